//! Where a mount's diagnostics go and how they are found: the daemon's log file (`--log-file`,
//! `-o log_file=`, the default without syslog), `MNT/@log` and the `log:` line of `MNT/@info`,
//! what `topicfs unmount` says of a busy or a dead mount, and the one line a remount logs of
//! an interrupted cleaning's leftovers.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{Dirs, MountGuard, is_mounted, sh, sh_output, topicfs, wait_until};
use nix::sys::signal::Signal;

/// Makes topic `t` with one line in it.
fn produce(mnt: &Path) {
    fs::create_dir(mnt.join("t")).unwrap();
    fs::write(mnt.join("t/0/append"), "a\n").unwrap();
}

/// A refused `config` write, as a user's shell makes it: the write fails and the daemon
/// warns.
fn refused_config_write(mnt: &Path) {
    let out =
        sh_output(&format!("printf 'retention.ms=abc\\n' > '{}'", mnt.join("t/config").display()));
    assert!(!out.status.success(), "retention.ms=abc was accepted");
}

#[test]
fn a_background_mounts_warnings_reach_its_log_file_and_mnt_at_log() {
    let dirs = Dirs::new();
    let root = dirs.root.path().to_path_buf();
    let mnt = dirs.mnt();
    // `-o log_file=` (the fstab form), relative to where the mount is started. Its directory
    // must exist (a mistyped path fails the mount instead of creating directories): first
    // without it, then with it.
    let missing = sh_output(&format!(
        "cd '{}' && {} mount '{}' '{}' -o log_file=logs/m.log",
        root.display(),
        env!("CARGO_BIN_EXE_topicfs"),
        dirs.data().display(),
        mnt.display()
    ));
    assert!(!missing.status.success(), "mounted with a log file in a missing directory");
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(said.contains("cannot open the log file"), "{said}");
    assert!(!root.join("logs").exists(), "a directory was created");
    fs::create_dir(root.join("logs")).unwrap();
    let mut command = topicfs();
    command.current_dir(&root).arg("mount").arg(dirs.data()).arg(&mnt);
    command.args(["-o", "log_file=logs/m.log"]);
    let m = MountGuard::background_with(dirs, command);
    let log_file = root.join("logs/m.log");
    produce(&mnt);
    refused_config_write(&mnt);
    // The log file: the refusal with its time and level (info: refused input), appended by
    // the daemon, which may still be writing it when the write has failed: awaited.
    wait_until("the refusal in the log file", || {
        fs::read_to_string(&log_file).is_ok_and(|l| l.contains("retention.ms"))
    });
    let text = fs::read_to_string(&log_file).unwrap();
    let line = text.lines().find(|l| l.contains("retention.ms")).unwrap();
    assert!(line.starts_with('[') && line.contains(" INFO "), "{line}");
    assert!(line.contains("t/config"), "{line}");
    assert!(text.contains(&format!("mounted {} on {}", m.data().display(), mnt.display())));
    // MNT/@log: the same refusal, with time and level; its size is what cat reads.
    let log = sh(&format!("cat '{}'", mnt.join("@log").display()));
    let line = log.lines().find(|l| l.contains("retention.ms")).expect(&log);
    assert!(line.contains(" INFO ") && line.contains("t/config"), "{line}");
    assert!(line.starts_with("20") && line.contains('T'), "no time: {line}");
    assert!(!log.contains("mounted "), "info records other than refusals are not kept: {log}");
    assert_eq!(fs::metadata(mnt.join("@log")).unwrap().len(), log.len() as u64);
    // MNT/@info names the log; neither file is listed.
    let info = fs::read_to_string(mnt.join("@info")).unwrap();
    assert!(info.contains(&format!("log: {}\n", log_file.display())), "{info}");
    let listed = sh(&format!("ls -a '{}'", mnt.display()));
    assert!(!listed.contains('@'), "{listed}");
    drop(m);
}

#[test]
fn a_foreground_mount_with_log_file_logs_there_and_not_to_stderr() {
    let dirs = Dirs::new();
    let log_file = dirs.root.path().join("fg.log");
    let stderr_file = dirs.root.path().join("stderr");
    let stderr = Stdio::from(fs::File::create(&stderr_file).unwrap());
    let log_arg = log_file.to_str().unwrap().to_string();
    let m = MountGuard::foreground_logging_to(dirs, &["--log-file", &log_arg], stderr);
    produce(&m.mnt());
    refused_config_write(&m.mnt());
    let log = fs::read_to_string(m.path("@log")).unwrap();
    assert!(log.contains("retention.ms"), "{log}");
    let info = fs::read_to_string(m.path("@info")).unwrap();
    assert!(info.contains(&format!("log: {}\n", log_file.display())), "{info}");
    let m = m.unmount();
    let text = fs::read_to_string(&log_file).unwrap();
    assert!(text.contains("retention.ms") && text.contains("shut down cleanly"), "{text}");
    let stderr = fs::read_to_string(&stderr_file).unwrap();
    assert!(!stderr.contains("retention.ms"), "{stderr}");
    drop(m);
}

#[test]
fn a_log_file_that_cannot_be_opened_fails_the_background_mount_on_the_terminal() {
    let dirs = Dirs::new();
    // A directory in place of the file's parent cannot be made: a regular file is there.
    let blocker = dirs.root.path().join("not-a-dir");
    fs::write(&blocker, "").unwrap();
    let log_file = blocker.join("m.log");
    let log_arg = log_file.to_str().unwrap().to_string();
    let (code, stderr) = common::failed_mount(dirs.data(), &dirs.mnt(), &["--log-file", &log_arg]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains(&format!("cannot open the log file {}", log_file.display())),
        "{stderr}"
    );
    assert_eq!(fs::read_dir(dirs.data()).unwrap().count(), 0, "the data dir was written");
    // A mount refused after its log file was made leaves none behind.
    fs::create_dir(dirs.root.path().join("logs")).unwrap();
    let log_file = dirs.root.path().join("logs/refused.log");
    let log_arg = log_file.to_str().unwrap().to_string();
    let (code, stderr) = common::failed_mount(&blocker, &dirs.mnt(), &["--log-file", &log_arg]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("is not a directory"), "{stderr}");
    assert!(!log_file.exists());
}

/// Unmounts on drop (a mount started by a command whose output the test reads).
struct UnmountOnDrop(std::path::PathBuf);

impl Drop for UnmountOnDrop {
    fn drop(&mut self) {
        common::force_unmount(&self.0);
    }
}

#[test]
fn a_daemon_without_syslog_logs_to_the_default_file_and_says_so_at_start() {
    use std::os::unix::net::UnixDatagram;
    let dirs = Dirs::new();
    let mnt = dirs.mnt();
    let _unmount = UnmountOnDrop(mnt.clone());
    let out = topicfs().arg("mount").arg(dirs.data()).arg(&mnt).stdin(Stdio::null()).output();
    let out = out.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let info = fs::read_to_string(mnt.join("@info")).unwrap();
    let log = info.lines().find_map(|l| l.strip_prefix("log: ")).expect(&info).to_string();
    let syslog = UnixDatagram::unbound().and_then(|s| s.connect("/dev/log")).is_ok();
    if syslog {
        assert_eq!(log, "syslog (identifier topicfs)");
        assert!(stderr.is_empty(), "{stderr}");
    } else {
        // The mountpoint escaped as `systemd-escape --path` does: `-` for each `/` inside,
        // `\x2d` for a `-` of its own.
        let escaped = mnt.to_str().unwrap()[1..].replace('-', "\\x2d").replace('/', "-");
        let dir = if nix::unistd::geteuid().is_root() {
            "/var/log/topicfs".to_string()
        } else {
            format!("{}/.local/state/topicfs", std::env::var("HOME").unwrap())
        };
        let expected = format!("{dir}/{escaped}.log");
        let file = std::path::PathBuf::from(&expected);
        let _remove = RemoveOnDrop(file.clone());
        assert_eq!(log, expected);
        assert!(
            stderr.contains(&format!("no syslog (/dev/log): the daemon logs to {expected}")),
            "{stderr}"
        );
        produce(&mnt);
        refused_config_write(&mnt);
        wait_until("the warning in the default log file", || {
            fs::read_to_string(&file).is_ok_and(|l| l.contains("retention.ms"))
        });
    }
    let out = topicfs().arg("unmount").arg(&mnt).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Removes a file on drop (a log file outside the test's temp dir).
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

#[test]
fn topicfs_unmount_names_the_holders_of_a_busy_mount_and_never_itself() {
    let m = MountGuard::background(&[]);
    produce(&m.mnt());
    // A holder whose cwd is in the mount, waited for until it runs there (it says so after
    // its chdir), so the unmount below cannot race its start.
    let mut holder = Command::new("sh")
        .args(["-c", "echo ready; exec sleep 600"])
        .current_dir(m.path("t"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    let stdout = holder.stdout.take().unwrap();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut ready).unwrap();
    assert_eq!(ready, "ready\n");
    // Run from inside the mount, as `cd MNT/t && topicfs unmount ../` would be.
    let unmount = topicfs()
        .current_dir(m.path("t/0"))
        .args(["unmount", "../.."])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let own = unmount.id();
    let out = unmount.wait_with_output().unwrap();
    let _ = holder.kill();
    let _ = holder.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is busy"), "{stderr}");
    // By pid: its name is `sh` or `sleep`, whichever it runs by now.
    let named = format!("pid {} (", holder.id());
    assert!(stderr.lines().any(|l| l.contains(&named) && l.contains("): cwd ")), "{stderr}");
    assert!(!stderr.contains(&format!("pid {own} ")), "it lists itself: {stderr}");
    assert!(is_mounted(&m.mnt()));
    // With the holder gone, the same command from inside the mount unmounts it.
    let out = topicfs().current_dir(m.path("t/0")).args(["unmount", "../.."]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!is_mounted(&m.mnt()));
}

#[test]
fn topicfs_unmount_of_a_mount_whose_daemon_died_says_so_instead_of_guessing() {
    let mut m = MountGuard::background(&[]);
    m.signal(Signal::SIGKILL);
    m.wait_ended();
    assert!(is_mounted(&m.mnt()));
    let out = topicfs().arg("unmount").arg(m.mnt()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!is_mounted(&m.mnt()));
    assert!(!stderr.contains("another user"), "{stderr}");
    assert!(stderr.contains("its daemon had exited or died"), "{stderr}");
    let me = nix::unistd::geteuid();
    if me.is_root() {
        assert!(stderr.contains(&format!("mounted by uid {me}")), "{stderr}");
    }
}

#[test]
fn a_remount_logs_an_interrupted_cleanings_leftovers_in_one_line_per_partition() {
    let m = MountGuard::foreground(&[]);
    produce(&m.mnt());
    let dirs = m.unmount();
    // What a crash in the middle of replacing segments leaves: `.deleted` files.
    let partition = dirs.data().join("t-0");
    for base in 1000..1040 {
        for kind in ["log", "index", "timeindex"] {
            fs::write(partition.join(format!("{base:020}.{kind}.deleted")), "").unwrap();
        }
    }
    let stderr_file = dirs.root.path().join("stderr");
    let stderr = Stdio::from(fs::File::create(&stderr_file).unwrap());
    let m = MountGuard::foreground_logging_to(dirs, &[], stderr);
    assert_eq!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap(), "a\n");
    let m = m.unmount();
    let left: Vec<_> = fs::read_dir(m.data().join("t-0"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".deleted"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let log = fs::read_to_string(&stderr_file).unwrap();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(".deleted")).collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains(" WARN "), "{}", lines[0]);
    assert!(lines[0].contains("removed 120 files"), "{}", lines[0]);
    assert!(lines[0].contains("00000000000000001000.index.deleted ... "), "{}", lines[0]);
    assert!(lines[0].contains("... 00000000000000001039.timeindex.deleted)"), "{}", lines[0]);
}
