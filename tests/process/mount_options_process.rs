//! Mount options and settings checked at mount (issue 44): log settings a broker would refuse,
//! in `--server-properties` or the mount's defaults, refuse the mount with the setting and
//! where it comes from; a mountpoint that is not empty is refused unless `nonempty`; every
//! flag has an fstab form, and a comma inside a value is written `\,`.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::common::{Dirs, MountGuard, failed_mount, is_mounted};

/// Whether `dir` holds nothing.
fn is_empty(dir: &Path) -> bool {
    fs::read_dir(dir).unwrap().next().is_none()
}

#[test]
fn a_server_properties_value_a_broker_refuses_is_refused_naming_file_line_setting_and_rule() {
    let dirs = Dirs::new();
    let file = dirs.root.path().join("server.properties");
    for (line, rule) in [
        ("log.segment.bytes=abc", "invalid value \"abc\" for segment.bytes: not an integer"),
        ("log.retention.ms=abc", "invalid value \"abc\" for retention.ms: not an integer"),
        ("log.cleanup.policy=foo", "must be delete, compact or compact,delete"),
        ("message.max.bytes=-3", "for max.message.bytes: must be at least 0"),
    ] {
        fs::write(&file, format!("# a broker\nnode.id=1\n{line}\nnum.io.threads=8\n")).unwrap();
        let args = ["--server-properties", file.to_str().unwrap()];
        let (code, stderr) = failed_mount(dirs.data(), &dirs.mnt(), &args);
        assert_eq!(code, Some(2), "{line}: {stderr}");
        assert!(stderr.contains(&format!("{}: line 3: {line}: ", file.display())), "{stderr}");
        assert!(stderr.contains(rule), "{line}: {stderr}");
        assert!(is_empty(&dirs.data()), "{line}: something was written to the data dir");
    }
}

#[test]
fn mount_defaults_that_conflict_are_refused_from_the_command_line_and_from_fstab() {
    let dirs = Dirs::new();
    let args = ["--config", "min.compaction.lag.ms=10", "--config", "max.compaction.lag.ms=5"];
    let (code, stderr) = failed_mount(dirs.data(), &dirs.mnt(), &args);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("min.compaction.lag.ms (10) must not be above"), "{stderr}");
    assert!(stderr.contains("from --config max.compaction.lag.ms=5"), "{stderr}");
    // server.properties below a mount default, through the fstab helper.
    let file = dirs.root.path().join("server.properties");
    fs::write(&file, "log.cleaner.min.compaction.lag.ms=10\n").unwrap();
    let link = dirs.root.path().join("mount.topicfs");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_topicfs"), &link).unwrap();
    let options = format!("rw,server_properties={},max.compaction.lag.ms=5", file.display());
    let out = Command::new(&link)
        .arg(dirs.data())
        .arg(dirs.mnt())
        .args(["-o", &options])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "min.compaction.lag.ms from log.cleaner.min.compaction.lag.ms=10 on line 1 of {}",
            file.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("max.compaction.lag.ms from --config max.compaction.lag.ms=5"));
    assert!(!is_mounted(&dirs.mnt()));
    assert!(is_empty(&dirs.data()), "something was written to the data dir");
}

#[test]
fn a_mountpoint_that_is_not_empty_is_refused_unless_nonempty_and_then_mounted_over() {
    let dirs = Dirs::new();
    fs::write(dirs.mnt().join("notes.txt"), "mine\n").unwrap();
    fs::create_dir(dirs.mnt().join("b-dir")).unwrap();
    for args in [&[][..], &["-f"], &["--read-only"]] {
        let (code, stderr) = failed_mount(dirs.data(), &dirs.mnt(), args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        let want = format!("mountpoint {} is not empty (it holds b-dir)", dirs.mnt().display());
        assert!(stderr.contains(&want), "{args:?}: {stderr}");
        assert!(stderr.contains("-o nonempty"), "{args:?}: {stderr}");
        assert!(is_empty(&dirs.data()), "{args:?}: something was written to the data dir");
    }
    // Mounted over with --nonempty (and -o nonempty): what it holds is hidden, then back.
    let mut dirs = dirs;
    for args in [&["--nonempty"][..], &["-o", "rw,nonempty"]] {
        let m = MountGuard::background_on(dirs, args);
        assert!(!m.path("notes.txt").exists(), "{args:?}: the mountpoint's file shows");
        fs::create_dir_all(m.path("t")).unwrap();
        fs::write(m.path("t/0/append"), "x\n").unwrap();
        assert!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap().starts_with("x\n"));
        dirs = m.unmount();
        assert_eq!(fs::read_to_string(dirs.mnt().join("notes.txt")).unwrap(), "mine\n");
    }
}

#[test]
fn fstab_through_mount_fuse3_takes_cleaner_flags_and_a_comma_escaped_value() {
    let dirs = Dirs::new();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_topicfs")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut command = Command::new("/sbin/mount.fuse3");
    command
        .arg(dirs.data())
        .arg(dirs.mnt())
        .args([
            "-t",
            "topicfs",
            "-o",
            "rw,nofail,config=cleanup.policy=compact\\,delete,cleaner_backoff_ms=60000,\
             cleaner_dedupe_buffer_size=1M,key_index_memory=1M,retention.bytes=100",
        ])
        .env("PATH", path);
    let m = MountGuard::background_with(dirs, command);
    fs::create_dir(m.path("t")).unwrap();
    let config = fs::read_to_string(m.path("t/config")).unwrap();
    for line in
        ["cleanup.policy=compact,delete # mount-default", "retention.bytes=100 # mount-default"]
    {
        assert!(config.lines().any(|l| l == line), "{line}: {config}");
    }
    // The cleaner's flags reached the daemon's command line.
    let cmdline = fs::read(format!("/proc/{}/cmdline", m.pid)).unwrap();
    let args: Vec<String> =
        cmdline.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    for pair in [
        ["--cleaner-backoff-ms", "60000"],
        ["--cleaner-dedupe-buffer-size", "1M"],
        ["--key-index-memory", "1M"],
    ] {
        assert!(args.windows(2).any(|w| w == pair), "{pair:?} not in {args:?}");
    }
}
