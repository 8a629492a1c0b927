//! Promises of `SEMANTICS.md` checked through real mounts: durability across a killed daemon,
//! errors reported by `close()`, one `write()` one batch through the kernel, the access model,
//! SIGHUP, and log levels. Needs root, /dev/fuse, fusermount3 and setpriv.

use crate::common;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{DEADLINE, Dirs, MountGuard, force_unmount, is_mounted, sh, sh_output, wait_until};
use nix::sys::signal::Signal;

const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";

/// A mount with topic `t` (one partition) created through `mkdir`.
fn mounted_with_topic(args: &[&str]) -> MountGuard {
    let m = MountGuard::foreground(args);
    fs::create_dir(m.path("t")).unwrap();
    m
}

/// Number of record batches in `raw` (a `.raw` stream: whole batches as stored).
fn batch_count(raw: &[u8]) -> usize {
    let mut rest = raw;
    let mut count = 0;
    while !rest.is_empty() {
        let len = i32::from_be_bytes(rest[8..12].try_into().unwrap()) as usize;
        rest = &rest[12 + len..];
        count += 1;
    }
    count
}

/// Runs `script` with `sh -c` as user `nobody` (uid and gid 65534, no supplementary groups).
fn as_nobody(script: &str) -> std::process::Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn sighup_ends_the_daemon_cleanly() {
    let mut m = mounted_with_topic(&[]);
    fs::write(m.path("t/0/append"), "a\n").unwrap();
    m.signal(Signal::SIGHUP);
    let status = m.wait_ended().unwrap();
    assert!(status.success(), "{status}");
    assert!(!is_mounted(&m.mnt()));
    assert!(m.data().join(CLEAN_SHUTDOWN_MARKER).exists());
}

#[test]
fn records_acknowledged_before_sigkill_survive_a_remount() {
    let mut m = mounted_with_topic(&[]);
    let lines: String = (1..=500).map(|i| format!("line-{i}\n")).collect();
    // Acknowledged (write returned) but never fsynced.
    fs::write(m.path("t/0/append"), &lines).unwrap();
    fs::write(m.path("t/0/append"), "last\n").unwrap();
    m.signal(Signal::SIGKILL);
    m.wait_ended();
    let data = m.data();
    assert!(!data.join(CLEAN_SHUTDOWN_MARKER).exists(), "a killed daemon shuts nothing down");
    let dirs = m.into_dirs(); // unmounts the dead mount
    let m = MountGuard::foreground_on(dirs, &[]);
    let read = fs::read_to_string(m.path("t/0/by-offset/0")).unwrap();
    assert_eq!(read, format!("{lines}last\n"));
    // And the log goes on from there.
    fs::write(m.path("t/0/append"), "after\n").unwrap();
    assert_eq!(sh(&format!("tail -n 2 {}", m.path("t/0/by-offset/0").display())), "last\nafter\n");
}

#[test]
fn close_returns_the_error_of_a_refused_partial_line() {
    let m = mounted_with_topic(&[]);
    let mut file = OpenOptions::new().append(true).open(m.path("t/0/append.json")).unwrap();
    file.write_all(b"{\"payload\":\"ok\"}\n{bad").unwrap();
    let err = nix::unistd::close(file).unwrap_err();
    assert_eq!(err, nix::errno::Errno::EINVAL);
    // The complete line before it was appended when its write returned; the refused one not.
    assert_eq!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap(), "ok\n");
    let mut file = OpenOptions::new().append(true).open(m.path("t/0/append")).unwrap();
    file.write_all(b"fine").unwrap();
    nix::unistd::close(file).unwrap();
    assert_eq!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap(), "ok\nfine\n");
}

#[test]
fn a_busy_mount_ends_on_sigterm_and_its_open_files_fail_with_enotconn() {
    let mut m = mounted_with_topic(&[]);
    fs::write(m.path("t/0/append"), "a\n").unwrap();
    let held = fs::File::open(m.path("t/0/by-offset/0")).unwrap();
    m.signal(Signal::SIGTERM);
    let status = m.wait_ended().unwrap();
    assert!(status.success(), "{status}");
    let mut buf = [0u8; 16];
    let err = std::os::unix::fs::FileExt::read_at(&held, &mut buf, 0).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTCONN));
    assert!(m.data().join(CLEAN_SHUTDOWN_MARKER).exists());
}

#[test]
fn extended_attributes_are_not_supported() {
    let m = mounted_with_topic(&[]);
    fs::write(m.path("t/0/append"), "a\n").unwrap();
    let script = format!(
        "import os\ntry:\n    os.getxattr('{}', 'user.x')\nexcept OSError as e:\n    print(e.errno)",
        m.path("t/0/by-offset/0").display()
    );
    let out = Command::new("python3").arg("-c").arg(script).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), libc::EOPNOTSUPP.to_string());
}

#[test]
fn one_write_call_of_600_kib_is_one_batch() {
    let m = mounted_with_topic(&[]);
    let line = format!("{}\n", "x".repeat(99));
    let data = line.repeat(6144);
    assert_eq!(data.len(), 600 * 1024);
    let mut file = OpenOptions::new().append(true).open(m.path("t/0/append")).unwrap();
    let written = file.write(data.as_bytes()).unwrap();
    assert_eq!(written, data.len(), "one write() call took everything");
    drop(file);
    let raw = fs::read(m.path("t/0/by-offset/0.raw")).unwrap();
    assert_eq!(batch_count(&raw), 1);
    assert_eq!(sh(&format!("wc -l < {}", m.path("t/0/by-offset/0").display())).trim(), "6144");
}

/// A mount on dirs that user `nobody` may traverse (the temp dir is 0700 by default).
fn mounted_for_other_users(args: &[&str]) -> MountGuard {
    let dirs = Dirs::new();
    fs::set_permissions(dirs.root.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let m = MountGuard::foreground_on(dirs, args);
    fs::create_dir(m.path("t")).unwrap();
    fs::write(m.path("t/0/append"), "by-owner\n").unwrap();
    m
}

#[test]
fn other_users_cannot_enter_a_mount_without_allow_other() {
    let m = mounted_for_other_users(&[]);
    let out = as_nobody(&format!("cat {}", m.path("t/0/by-offset/0").display()));
    assert!(!out.status.success(), "nobody read the mount");
    let out = as_nobody(&format!("ls {}", m.mnt().display()));
    assert!(!out.status.success(), "nobody listed the mount");
    // The owner still can.
    assert_eq!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap(), "by-owner\n");
}

#[test]
fn allow_other_lets_other_users_read_and_the_modes_keep_them_from_writing() {
    let m = mounted_for_other_users(&["-o", "allow_other"]);
    let out = as_nobody(&format!("cat {}", m.path("t/0/by-offset/0").display()));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout, b"by-owner\n");
    let out = as_nobody(&format!("cat {}", m.path("t/0/info").display()));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // append is 0220 and owned by the mounting user: others may not write it...
    let out = as_nobody(&format!("printf 'x\\n' >> {}", m.path("t/0/append").display()));
    assert!(!out.status.success(), "nobody appended");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
    // ...nor create topics in the 0755 root.
    let out = as_nobody(&format!("mkdir {}", m.path("u").display()));
    assert!(!out.status.success(), "nobody created a topic");
    assert_eq!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap(), "by-owner\n");
}

/// `topicfs mount -f` with its stderr in a file; unmounted and reaped on drop.
struct LoggedMount {
    dirs: Dirs,
    child: Child,
}

impl LoggedMount {
    fn start() -> LoggedMount {
        let dirs = Dirs::new();
        let log = fs::File::create(dirs.root.path().join("stderr")).unwrap();
        let child = common::topicfs()
            .arg("mount")
            .arg("-f")
            .arg(dirs.data())
            .arg(dirs.mnt())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut mount = LoggedMount { dirs, child };
        let mnt = mount.dirs.mnt();
        wait_until("the foreground mount", || {
            assert!(mount.child.try_wait().unwrap().is_none(), "topicfs -f exited");
            is_mounted(&mnt)
        });
        mount
    }

    /// Unmounts, waits for the exit, and returns what was logged.
    fn stop(mut self) -> String {
        assert!(
            Command::new("fusermount3").arg("-u").arg(self.dirs.mnt()).status().unwrap().success()
        );
        let start = std::time::Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(start.elapsed() < DEADLINE, "topicfs did not exit");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        fs::read_to_string(self.dirs.root.path().join("stderr")).unwrap()
    }
}

impl Drop for LoggedMount {
    fn drop(&mut self) {
        force_unmount(&self.dirs.mnt());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn refusals_are_logged_at_info_and_absent_names_are_not_logged_by_default() {
    let m = LoggedMount::start();
    let mnt = m.dirs.mnt();
    fs::create_dir(mnt.join("t")).unwrap();
    fs::write(mnt.join("t/0/append"), "a\n").unwrap();
    let refused = fs::write(mnt.join("t/0/by-offset/0"), "x").unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::EPERM));
    let absent = fs::metadata(mnt.join("t/0/by-offset/absent-name")).unwrap_err();
    assert_eq!(absent.raw_os_error(), Some(libc::ENOENT));
    let log = m.stop();
    assert!(log.contains("mounted "), "{log}");
    assert!(log.contains("not permitted: writing a stream"), "{log}");
    assert!(!log.contains("absent-name"), "ENOENT is logged at debug only: {log}");
    assert!(log.contains("shut down cleanly"), "{log}");
}

#[test]
fn read_only_mount_leaves_the_data_dir_byte_identical() {
    let m = mounted_with_topic(&[]);
    fs::write(m.path("t/0/append"), "kept\n").unwrap();
    let dirs = m.unmount();
    let before = tree_bytes(&dirs.data());
    let m = MountGuard::foreground_on(dirs, &["--read-only"]);
    assert_eq!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap(), "kept\n");
    let out = sh_output(&format!("printf 'x\\n' >> {}", m.path("t/0/append").display()));
    assert!(!out.status.success());
    let dirs = m.unmount();
    assert_eq!(tree_bytes(&dirs.data()), before, "a read-only mount changed the data dir");
}

/// Every file under `dir` with its bytes, sorted by path.
fn tree_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push((path.display().to_string(), fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn df_shows_the_space_of_the_data_dirs_file_system() {
    let m = mounted_with_topic(&[]);
    // `stat -f`: block size, total blocks, total inodes, max name length.
    let fmt = "%S %b %c %l";
    let mounted = sh(&format!("stat -f -c '{fmt}' {}", m.mnt().display()));
    let data = sh(&format!("stat -f -c '{fmt}' {}", m.data().display()));
    assert_eq!(mounted, data, "statfs of the mount is the data dir's file system");
    let total: u64 = mounted.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(total > 0, "{mounted}");
    // df prints a size for the mount, not 0.
    let df = sh(&format!("df -k --output=size {} | tail -n 1", m.mnt().display()));
    assert!(df.trim().parse::<u64>().unwrap() > 0, "{df}");
}

/// Right after a read the kernel still holds a sealed segment file's name (for its 1 s TTL);
/// once retention deleted the segment, `cat` and `stat` of that name fail with ENOENT all the
/// same and `ls` no longer lists it.
#[test]
fn a_deleted_sealed_segment_fails_cat_and_stat_with_enoent_though_its_name_was_cached() {
    let m = mounted_with_topic(&[
        "--segment-bytes",
        "1024",
        "--retention-bytes",
        "3000",
        "--retention-check-interval-ms",
        "200",
    ]);
    let line = format!("{}\n", "y".repeat(90));
    let append = |n: usize| {
        for _ in 0..n {
            OpenOptions::new()
                .append(true)
                .open(m.path("t/0/append"))
                .unwrap()
                .write_all(line.as_bytes())
                .unwrap();
        }
    };
    append(20);
    let first = m.path("t/0/segments/00000000000000000000.log");
    let quoted = first.display();
    // Read through the mount: its name is now in the kernel's cache.
    let bytes: u64 = sh(&format!("cat {quoted} | wc -c")).trim().parse().unwrap();
    assert!(bytes > 0);
    let listed =
        |name: &str| sh(&format!("ls {}", m.path("t/0/segments").display())).contains(name);
    // More records: retention (every 200 ms, 3,000 bytes kept) deletes the first segments.
    append(60);
    wait_until("retention deleted the first segment", || !listed("00000000000000000000.log"));
    let cat = sh_output(&format!("cat {quoted}"));
    assert!(!cat.status.success());
    assert!(String::from_utf8_lossy(&cat.stderr).contains("No such file"), "{cat:?}");
    // After the attribute TTL (1 s) `stat` asks the daemon too.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let stat = sh_output(&format!("stat {quoted}"));
    assert!(!stat.status.success());
    assert!(String::from_utf8_lossy(&stat.stderr).contains("No such file"), "{stat:?}");
}

/// `mmap` as SEMANTICS.md states it, driven from Python's `mmap` module: streams and the
/// active segment's files map privately and show what a read shows; a shared mapping of them
/// fails with `ENODEV` (the kernel's answer for a direct-I/O file); sealed segment files map
/// either way, as the files on disk.
#[test]
fn streams_map_privately_shared_maps_fail_with_enodev_and_sealed_segments_map_either_way() {
    let m = MountGuard::foreground(&["--segment-bytes", "8192"]);
    fs::create_dir(m.path("t")).unwrap();
    for w in 0..10 {
        let lines: String =
            (0..20).map(|i| format!("write {w:02} line {i:02} {}\n", "x".repeat(80))).collect();
        fs::write(m.path("t/0/append"), lines).unwrap();
    }
    let mut logs: Vec<String> = fs::read_dir(m.path("t/0/segments"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 2, "segments rolled: {logs:?}");
    let sealed = m.path(&format!("t/0/segments/{}", logs[0]));
    let active = m.path(&format!("t/0/segments/{}", logs[logs.len() - 1]));
    let probe = r#"
import mmap, os, sys
def try_map(path, flags):
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        m = mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ)
        with open(path, "rb") as f:
            same = m[:] == f.read()
        return "same" if same else "differs"
    except OSError as e:
        return "errno %d" % e.errno
    finally:
        os.close(fd)
for path in sys.argv[1:]:
    print(try_map(path, mmap.MAP_PRIVATE), try_map(path, mmap.MAP_SHARED))
"#;
    let paths = [
        m.path("t/0/by-offset/0"),
        m.path("t/0/by-offset/5.json"),
        m.path("t/0/info"),
        active,
        sealed.clone(),
    ];
    let out =
        Command::new("python3").arg("-c").arg(probe).args(&paths).output().expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<String> =
        String::from_utf8(out.stdout).unwrap().lines().map(String::from).collect();
    let enodev = format!("same errno {}", libc::ENODEV);
    assert_eq!(lines, [enodev.as_str(), &enodev, &enodev, &enodev, "same same"], "{paths:?}");
    // And what the sealed segment maps and reads (equal, above) is the file on disk.
    let on_disk = fs::read(m.data().join("t-0").join(&logs[0])).unwrap();
    assert!(fs::read(&sealed).unwrap() == on_disk);
    m.unmount();
}
