//! Installing and booting: `--version`, the fstab and systemd mount unit examples, and the
//! Debian package installed on this machine, mounted through `mount -t fuse.topicfs` and
//! through the example unit's command line, then removed without a trace.
//!
//! The package test needs root and `TOPICFS_DEB`, the path of the package `scripts/package`
//! built (scripts/test sets it). Without it the test prints `SKIPPED`, and fails under CI=true.
//! It refuses to run when a topicfs package is already installed (it would remove it), and a
//! guard purges the package it installed even when the test fails.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{Dirs, MountGuard, is_mounted, sh};

/// The repository's boot-time examples, as the package ships them.
fn packaging(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging").join(name)
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn ok(program: &str, args: &[&str]) -> String {
    let out = run(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A systemd unit file: section -> key -> values (a key may repeat), comments dropped.
fn parse_unit(text: &str) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut unit: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut section = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = Some(name.to_string());
            unit.entry(name.to_string()).or_default();
            continue;
        }
        let section =
            section.as_ref().unwrap_or_else(|| panic!("line {}: key before a section", n + 1));
        let (key, value) =
            line.split_once('=').unwrap_or_else(|| panic!("line {}: not KEY=VALUE: {line}", n + 1));
        unit.get_mut(section)
            .unwrap()
            .entry(key.trim().into())
            .or_default()
            .push(value.trim().into());
    }
    unit
}

fn one<'a>(
    unit: &'a BTreeMap<String, BTreeMap<String, Vec<String>>>,
    section: &str,
    key: &str,
) -> &'a str {
    match unit.get(section).and_then(|s| s.get(key)).map(Vec::as_slice) {
        Some([value]) => value,
        other => panic!("[{section}] {key}: expected one value, got {other:?}"),
    }
}

/// `systemd-escape -p --suffix=mount`: the name a mount unit for `where_` must have.
fn mount_unit_name(where_: &str) -> String {
    format!("{}.mount", where_.trim_matches('/').replace('-', "\\x2d").replace('/', "-"))
}

/// What `topicfs --version` of a release build of this checkout prints (build.rs).
fn release_version() -> String {
    let commit = run("git", &["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "--short=12", "HEAD"]);
    let commit = match std::env::var("TOPICFS_BUILD_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ if commit.status.success() => String::from_utf8_lossy(&commit.stdout).trim().to_string(),
        _ => "unknown".to_string(),
    };
    format!("topicfs {} (commit {commit})\n", env!("CARGO_PKG_VERSION"))
}

#[test]
fn a_debug_build_says_so_in_its_version() {
    // Release builds name the commit: checked on the installed package below.
    if option_env!("TOPICFS_BUILD_COMMIT").is_some() {
        eprintln!("SKIPPED: built with TOPICFS_BUILD_COMMIT set");
        return;
    }
    let out = ok(env!("CARGO_BIN_EXE_topicfs"), &["--version"]);
    assert_eq!(
        out,
        format!("topicfs {} (commit unknown, debug build)\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn cargo_install_installs_exactly_one_binary() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let metadata = ok(
        &cargo,
        &[
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
            "--manifest-path",
            manifest,
        ],
    );
    let metadata: serde_json::Value = serde_json::from_str(&metadata).unwrap();
    let package = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "topicfs")
        .expect("the topicfs package");
    let bins: Vec<&str> = package["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(bins, ["topicfs"], "`cargo install --path .` installs these");
}

#[test]
fn the_mount_unit_examples_verify_and_order_after_their_data() {
    let local = parse_unit(&fs::read_to_string(packaging("mnt-kafka.mount")).unwrap());
    let where_ = one(&local, "Mount", "Where");
    assert_eq!(mount_unit_name(where_), "mnt-kafka.mount", "the unit is named after Where=");
    assert_eq!(one(&local, "Mount", "Type"), "fuse.topicfs");
    // Requires= and After= on the data's file system.
    assert_eq!(one(&local, "Unit", "RequiresMountsFor"), one(&local, "Mount", "What"));
    assert!(one(&local, "Install", "WantedBy").ends_with(".target"));
    // Its options are ones topicfs takes.
    let options = one(&local, "Mount", "Options");
    topicfs::cli::helper_args(&["mount.topicfs", "d", "m", "-o", options].map(Into::into))
        .unwrap()
        .unwrap();

    let cluster = parse_unit(&fs::read_to_string(packaging("mnt-cluster.mount")).unwrap());
    assert_eq!(mount_unit_name(one(&cluster, "Mount", "Where")), "mnt-cluster.mount");
    assert!(one(&cluster, "Mount", "What").starts_with("kafka://"));
    assert!(one(&cluster, "Mount", "Options").split(',').any(|o| o == "_netdev"));
    assert_eq!(one(&cluster, "Unit", "After"), "network-online.target");

    // systemd's own check, where systemd is installed (it needs no running systemd): unknown
    // keys, a Where= that does not match the name, bad values.
    if run("sh", &["-c", "command -v systemd-analyze"]).status.success() {
        let out = run(
            "systemd-analyze",
            &[
                "verify",
                "--man=no",
                packaging("mnt-kafka.mount").to_str().unwrap(),
                packaging("mnt-cluster.mount").to_str().unwrap(),
            ],
        );
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && said.trim().is_empty(), "systemd-analyze verify: {said}");
    } else {
        eprintln!("systemd-analyze not installed: the units were checked by parsing only");
    }
}

#[test]
fn the_fstab_example_lines_are_valid_fstab_lines_topicfs_accepts() {
    let text = fs::read_to_string(packaging("fstab")).unwrap();
    // Active lines and the commented-out example lines (`#/...`, `#kafka://...`).
    let lines: Vec<&str> = text
        .lines()
        .map(|l| {
            l.strip_prefix('#')
                .filter(|l| l.starts_with('/') || l.starts_with("kafka://"))
                .unwrap_or(l)
        })
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    for line in &lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [source, mountpoint, fstype, options, "0", "0"] = fields[..] else {
            panic!("not six fstab fields: {line}")
        };
        assert_eq!(fstype, "fuse.topicfs", "{line}");
        assert!(mountpoint.starts_with('/'), "{line}");
        let opts: Vec<&str> = options.split(',').collect();
        if source.starts_with("kafka://") {
            assert!(opts.contains(&"_netdev"), "a cluster mount is a network mount: {line}");
        } else {
            let wanted = format!("x-systemd.requires-mounts-for={source}");
            assert!(opts.contains(&wanted.as_str()), "ordered after its data: {line}");
        }
        // What mount.fuse3 hands topicfs; names in gid= need not exist here.
        let checked: Vec<&str> = opts.iter().copied().filter(|o| !o.starts_with("gid=")).collect();
        topicfs::cli::helper_args(
            &["topicfs", source, mountpoint, "-o", &checked.join(",")].map(Into::into),
        )
        .unwrap_or_else(|e| panic!("{line}: {e}"))
        .unwrap();
    }
}

/// Purges the topicfs package on drop, whatever happened.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        if package_status().is_some() {
            let _ = run("dpkg", &["--purge", "topicfs"]);
        }
    }
}

/// `dpkg-query`'s status of the topicfs package, `None` when dpkg knows nothing of it.
fn package_status() -> Option<String> {
    let out = run("dpkg-query", &["-W", "-f=${db:Status-Abbrev}", "topicfs"]);
    let status = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !status.is_empty() && status != "un").then_some(status)
}

/// A data dir holding topic `t` with records "a" and "b", made with the binary under test.
fn data_with_records() -> Dirs {
    let m = MountGuard::foreground(&[]);
    fs::create_dir(m.path("t")).unwrap();
    fs::write(m.path("t/0/append"), "a\nb\n").unwrap();
    let dirs = m.unmount();
    fs::set_permissions(dirs.root.path(), fs::Permissions::from_mode(0o755)).unwrap();
    dirs
}

/// The mount helper's environment: the installed binary must be the one found.
const SYSTEM_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// `mount -t <fstype> -o <options> <data> <mnt>` as mount(8) and systemd run it, with the
/// system's PATH: the mount helper chain starts the installed binary in the background.
fn system_mount(dirs: Dirs, fstype: &str, options: &str) -> MountGuard {
    let mut mount = Command::new("mount");
    mount
        .env("PATH", SYSTEM_PATH)
        .args(["-t", fstype, "-o", options])
        .arg(dirs.data())
        .arg(dirs.mnt());
    MountGuard::background_with(dirs, mount)
}

/// The daemon serving `m` runs the packaged binary.
fn assert_installed_binary(m: &MountGuard) {
    assert_eq!(
        fs::read_link(format!("/proc/{}/exe", m.pid)).unwrap(),
        Path::new("/usr/bin/topicfs")
    );
}

#[test]
fn the_debian_package_installs_mounts_from_fstab_and_unit_and_purges_cleanly() {
    let deb = match std::env::var("TOPICFS_DEB") {
        Ok(deb) if !deb.is_empty() => PathBuf::from(deb),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("TOPICFS_DEB is not set: scripts/test builds the package with scripts/package")
        }
        _ => {
            eprintln!("SKIPPED: TOPICFS_DEB is not set (build one with scripts/package)");
            return;
        }
    };
    assert!(nix::unistd::geteuid().is_root(), "installing a package needs root");
    assert!(deb.is_file(), "{}: no such package file", deb.display());
    if let Some(status) = package_status() {
        panic!("a topicfs package is already installed ({status}); not touching it");
    }
    let _guard = Installed;
    ok("dpkg", &["--install", deb.to_str().unwrap()]);
    assert_eq!(package_status().as_deref(), Some("ii"));
    let files: Vec<PathBuf> = ok("dpkg", &["--listfiles", "topicfs"])
        .lines()
        .map(PathBuf::from)
        .filter(|p| !p.is_dir() || p.starts_with("/usr/share/doc/topicfs"))
        .collect();

    // What it installs.
    let version = ok("/usr/bin/topicfs", &["--version"]);
    assert_eq!(
        version,
        release_version(),
        "the package is a release build of this checkout's HEAD"
    );
    assert_eq!(fs::read_link("/sbin/mount.topicfs").unwrap(), Path::new("/usr/bin/topicfs"));
    for page in ["topicfs", "topicfs-mount", "topicfs-unmount"] {
        let path = format!("/usr/share/man/man1/{page}.1.gz");
        let roff = sh(&format!("gzip -dc {path}"));
        assert!(
            roff.contains(&format!(".TH {page} 1")),
            "{path}: {}",
            &roff[..roff.len().min(200)]
        );
        assert!(files.contains(&PathBuf::from(&path)), "{path} not owned by the package");
    }
    assert!(sh("gzip -dc /usr/share/man/man1/topicfs-mount.1.gz").contains("file_mode"));
    let bash = "/usr/share/bash-completion/completions/topicfs";
    ok("bash", &["-n", bash]);
    assert!(fs::read_to_string(bash).unwrap().contains("--dir-mode"));
    assert!(
        fs::read_to_string("/usr/share/zsh/vendor-completions/_topicfs")
            .unwrap()
            .starts_with("#compdef topicfs")
    );
    assert!(
        fs::read_to_string("/usr/share/fish/vendor_completions.d/topicfs.fish")
            .unwrap()
            .contains("complete -c topicfs")
    );
    let examples = Path::new("/usr/share/doc/topicfs/examples");
    for name in ["fstab", "mnt-kafka.mount", "mnt-cluster.mount"] {
        assert_eq!(
            fs::read(examples.join(name)).unwrap(),
            fs::read(packaging(name)).unwrap(),
            "{name}"
        );
    }

    // fstab type fuse.topicfs: mount(8) -> mount.fuse3 -> /usr/bin/topicfs, in the background.
    let dirs = data_with_records();
    let m =
        system_mount(dirs, "fuse.topicfs", "rw,allow_other,file_mode=0640,dir_mode=0750,nofail");
    assert_installed_binary(&m);
    assert_eq!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap(), "a\nb\n");
    fs::write(m.path("t/0/append"), "c\n").unwrap();
    assert_eq!(fs::metadata(m.path("t/0/info")).unwrap().mode() & 0o777, 0o440);
    assert_eq!(fs::metadata(m.mnt()).unwrap().mode() & 0o777, 0o750);
    let fstype = sh(&format!("findmnt -n -o FSTYPE -M {}", m.mnt().display()));
    assert_eq!(fstype.trim(), "fuse.topicfs");
    let dirs = m.unmount();

    // The example unit's command line: systemd runs `mount -t TYPE -o OPTIONS WHAT WHERE` for a
    // mount unit; the same, with What= and Where= pointed at the test's dirs.
    let unit = parse_unit(&fs::read_to_string(examples.join("mnt-kafka.mount")).unwrap());
    let m = system_mount(dirs, one(&unit, "Mount", "Type"), one(&unit, "Mount", "Options"));
    assert_eq!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap(), "a\nb\nc\n");
    // ro,allow_other,umask=022: read-only, every file 0444, directories 0555.
    let err = fs::write(m.path("t/0/append"), "d\n").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS));
    assert_eq!(fs::metadata(m.path("t/0/info")).unwrap().mode() & 0o777, 0o444);
    assert_eq!(fs::metadata(m.mnt()).unwrap().mode() & 0o777, 0o555);
    // The mount.topicfs link (fstab type topicfs) is the installed binary too.
    let mnt = m.mnt();
    let dirs = m.unmount();
    assert!(!is_mounted(&mnt));
    let m = system_mount(dirs, "topicfs", "ro");
    assert_installed_binary(&m);
    assert!(fs::read_to_string(m.path("t/0/info")).unwrap().contains("log_end_offset"));
    drop(m.unmount());

    // Removal: dpkg -r takes the files, dpkg -P the rest; nothing the package owned is left.
    ok("dpkg", &["--remove", "topicfs"]);
    assert!(!Path::new("/usr/bin/topicfs").exists());
    ok("dpkg", &["--purge", "topicfs"]);
    assert_eq!(package_status(), None, "dpkg still knows topicfs");
    let left: Vec<&PathBuf> = files.iter().filter(|p| p.symlink_metadata().is_ok()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(Path::new("/sbin/mount.topicfs").symlink_metadata().is_err(), "mount.topicfs left");
}
