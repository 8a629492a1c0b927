//! Process-level edges of the daemon's life (issue 32): `topicfs unmount` returns only after
//! the daemon's clean shutdown, a busy mount is explained, a remount waits for the lock
//! briefly, the data dir itself is locked, a dead mount and an unusable `/dev/fuse` are named
//! as what they are, and relative paths survive daemonizing.

use crate::common;

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{Dirs, MountGuard, force_unmount, is_mounted, process_ended, topicfs, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";

/// Appends `lines` to a new topic `t` through the mount at `mnt`.
fn produce(mnt: &Path, lines: &str) {
    if !mnt.join("t").exists() {
        fs::create_dir(mnt.join("t")).unwrap();
    }
    fs::write(mnt.join("t/0/append"), lines).unwrap();
}

/// Whether nobody holds `.lock` of `data` (`flock -n` gets it at once).
fn lock_is_free(data: &Path) -> bool {
    Command::new("flock").arg("-n").arg(data.join(".lock")).arg("true").status().unwrap().success()
}

/// Unmounts `mnt` when dropped (a test that fails midway leaves no mount behind).
struct UnmountOnDrop(PathBuf);

impl Drop for UnmountOnDrop {
    fn drop(&mut self) {
        force_unmount(&self.0);
    }
}

#[test]
fn topicfs_unmount_returns_once_the_daemon_has_exited_and_closed_the_data_dir() {
    let m = MountGuard::background(&[]);
    produce(&m.mnt(), "a\nb\n");
    let out = topicfs().arg("unmount").arg(m.mnt()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // No wait here: all of it was already true when the command returned.
    assert!(!is_mounted(&m.mnt()));
    assert!(process_ended(m.pid), "daemon {} still running", m.pid);
    assert!(m.data().join(CLEAN_SHUTDOWN_MARKER).exists(), "no clean-shutdown marker");
    assert!(lock_is_free(&m.data()), ".lock still held");
    // So a remount right away never meets the lock.
    let dirs = m.into_dirs();
    let m = MountGuard::background_on(dirs, &[]);
    assert_eq!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap(), "a\nb\n");
}

#[test]
fn topicfs_unmount_names_the_mountpoint_and_the_daemon_pid_when_it_does_not_exit_in_time() {
    let mut m = MountGuard::background(&[]);
    produce(&m.mnt(), "a\n");
    // A daemon that cannot finish: stopped.
    m.signal(Signal::SIGSTOP);
    let out = topicfs().args(["unmount", "--timeout", "1"]).arg(m.mnt()).output().unwrap();
    m.signal(Signal::SIGCONT);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(m.mnt().to_str().unwrap()), "{stderr}");
    assert!(stderr.contains(&format!("pid {}", m.pid)), "{stderr}");
    assert!(stderr.contains("not exited"), "{stderr}");
    assert!(stderr.contains(m.data().to_str().unwrap()), "names the data dir: {stderr}");
    // Its log, as its command line gives it (the harness's --log-file).
    let log = m.dirs_root().join("topicfs.log");
    assert!(stderr.contains(&format!("see its log ({})", log.display())), "{stderr}");
    // Once it runs again it shuts down cleanly.
    m.wait_ended();
    assert!(m.data().join(CLEAN_SHUTDOWN_MARKER).exists());
}

#[test]
fn topicfs_unmount_of_a_busy_mount_names_the_holders_and_lazy_detaches_it() {
    let mut m = MountGuard::background(&[]);
    produce(&m.mnt(), "a\n");
    let mut held = fs::File::open(m.path("t/0/by-offset/0")).unwrap();
    let out = topicfs().arg("unmount").arg(m.mnt()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("busy"), "{stderr}");
    let me = format!("pid {} ", std::process::id());
    assert!(stderr.contains(&me), "names this test as a holder: {stderr}");
    assert!(stderr.contains("t/0/by-offset/0"), "names the open file: {stderr}");
    assert!(stderr.contains("--lazy"), "{stderr}");
    assert!(is_mounted(&m.mnt()), "a busy mount is left mounted");
    let out = topicfs().args(["unmount", "--lazy"]).arg(m.mnt()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("pid {}", m.pid)), "{stderr}");
    assert!(!is_mounted(&m.mnt()));
    // The open file is still served, and its close ends the daemon cleanly.
    let mut text = String::new();
    held.read_to_string(&mut text).unwrap();
    assert_eq!(text, "a\n");
    drop(held);
    m.wait_ended();
    assert!(m.data().join(CLEAN_SHUTDOWN_MARKER).exists());
}

#[test]
fn topicfs_unmount_of_something_not_mounted_fails() {
    let dirs = Dirs::new();
    let out = topicfs().arg("unmount").arg(dirs.mnt()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not mounted"));
}

/// Starts `flock .lock -c 'echo held; sleep SECS'` on `data` and returns once it holds it.
fn hold_lock(data: &Path, secs: u32) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let mut holder = Command::new("flock")
        .arg(data.join(".lock"))
        .arg("-c")
        .arg(format!("echo held; sleep {secs}"))
        .stdout(Stdio::piped())
        // Its own process group: ending the group ends the shell and sleep holding the lock.
        .process_group(0)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "held\n");
    holder
}

#[test]
fn a_mount_waits_briefly_for_a_lock_about_to_be_released() {
    let dirs = Dirs::new();
    // Stands in for a daemon still shutting down after `fusermount3 -u`.
    let mut holder = hold_lock(&dirs.data(), 1);
    let log_path = dirs.root.path().join("log");
    let log = fs::File::create(&log_path).unwrap();
    let m = MountGuard::foreground_logging_to(dirs, &[], Stdio::from(log));
    assert!(holder.wait().unwrap().success());
    produce(&m.mnt(), "x\n");
    let log = fs::read_to_string(log_path).unwrap();
    assert!(log.contains("is locked by another process"), "{log}");
    assert!(log.contains("waiting up to 5 s"), "{log}");
}

#[test]
fn a_mount_of_a_dir_locked_for_longer_fails_after_the_bounded_wait() {
    let dirs = Dirs::new();
    let mut holder = hold_lock(&dirs.data(), 60);
    let (code, stderr) = common::failed_mount(dirs.data(), &dirs.mnt(), &["-f"]);
    let _ = kill(Pid::from_raw(-(holder.id() as i32)), Signal::SIGKILL);
    let _ = holder.wait();
    assert_eq!(code, Some(1));
    assert!(stderr.contains("locked by another process"), "{stderr}");
    assert!(stderr.contains("waited 5 s"), "{stderr}");
}

#[test]
fn deleting_the_lock_file_does_not_let_a_second_writable_mount_start() {
    let m = MountGuard::background(&[]);
    produce(&m.mnt(), "a\n");
    fs::remove_file(m.data().join(".lock")).unwrap();
    let other = Dirs::new();
    let (code, stderr) = common::failed_mount(m.data(), &other.mnt(), &["-f"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("locked by another process"), "{stderr}");
    // The first mount still works.
    produce(&m.mnt(), "b\n");
    assert_eq!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap(), "a\nb\n");
}

#[test]
fn mounting_over_a_dead_mount_says_what_it_is_and_how_to_clear_it() {
    let mut m = MountGuard::foreground(&[]);
    m.signal(Signal::SIGKILL);
    m.wait_ended();
    let err = fs::metadata(m.mnt()).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTCONN), "not a dead mount: {err}");
    let other = Dirs::new();
    let out = topicfs().arg("mount").arg("-f").arg(other.data()).arg(m.mnt()).output().unwrap();
    assert!(is_mounted(&m.mnt()), "the dead mount is left to the user");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("disconnected topicfs mount"), "{stderr}");
    assert!(stderr.contains(&format!("fusermount3 -u {}", m.mnt().display())), "{stderr}");
    assert!(!stderr.contains("not a directory"), "{stderr}");
    assert_eq!(fs::read_dir(other.data()).unwrap().count(), 0, "the data dir was written");
}

#[test]
fn an_unusable_dev_fuse_is_named_with_the_fix_and_nothing_is_written_to_the_data_dir() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let fuse = fs::metadata("/dev/fuse").unwrap();
    if fuse.mode() & 0o006 == 0o006 {
        eprintln!("skipped: /dev/fuse is usable by everyone on this host");
        return;
    }
    let dirs = Dirs::new();
    fs::set_permissions(dirs.root.path(), fs::Permissions::from_mode(0o755)).unwrap();
    for dir in [dirs.data(), dirs.mnt()] {
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_topicfs"))
        .arg("mount")
        .arg("-f")
        .arg(dirs.data())
        .arg(dirs.mnt())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!is_mounted(&dirs.mnt()));
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot open /dev/fuse"), "{stderr}");
    assert!(stderr.contains("chmod 0666 /dev/fuse"), "{stderr}");
    let written: Vec<_> =
        fs::read_dir(dirs.data()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(written.is_empty(), "a failed mount wrote {written:?}");
}

#[test]
fn relative_paths_of_a_background_mount_are_resolved_where_it_was_started() {
    let dirs = Dirs::new();
    let root = dirs.root.path();
    let mnt = dirs.mnt();
    let _unmount = UnmountOnDrop(mnt.clone());
    // A name nothing else uses, so that the wrong place (/) can be checked too.
    let cache = format!("{}-cache", root.file_name().unwrap().to_str().unwrap());
    let status = topicfs()
        .current_dir(root)
        .args(["mount", "data", "mnt", "--cache-dir", &cache, "--log-file", "daemon.log"])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(is_mounted(&mnt));
    produce(&mnt, "a\n");
    assert!(root.join(&cache).is_dir(), "--cache-dir not created in the start directory");
    assert!(!Path::new("/").join(&cache).exists(), "--cache-dir resolved against /");
    assert!(root.join("daemon.log").is_file(), "--log-file not resolved in the start directory");
    // `topicfs unmount` with a relative path finds the daemon, which started in `root` too.
    let out = topicfs().current_dir(root).args(["unmount", "mnt"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"), "daemon not found");
    assert!(dirs.data().join(CLEAN_SHUTDOWN_MARKER).exists());
    // The same with -o cache_dir=, in the foreground.
    let mut child = topicfs()
        .current_dir(root)
        .args(["mount", "-f", "data", "mnt", "-o", "cache_dir=c2"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the foreground mount", || is_mounted(&mnt));
    produce(&mnt, "b\n");
    assert!(root.join("c2").is_dir());
    let out = topicfs().current_dir(root).args(["unmount", "mnt"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"), "process not found");
    // Already exited: `try_wait` reaps it without waiting.
    let status = child.try_wait().unwrap().expect("topicfs unmount returned before the exit");
    assert!(status.success());
}

/// The lines of `tail -f FILE`'s stderr so far, read by a thread.
fn stderr_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

#[test]
fn sigterm_ends_a_tail_f_reader_even_where_fusectl_was_not_mounted() {
    let fusectl = Path::new("/sys/fs/fuse/connections");
    let fusectl_before = is_mounted(fusectl);
    let dirs = Dirs::new();
    let log_path = dirs.root.path().join("log");
    let log = fs::File::create(&log_path).unwrap();
    let mut m = MountGuard::foreground_logging_to(dirs, &[], Stdio::from(log));
    produce(&m.mnt(), "a\n");
    let mut tail = Command::new("tail")
        .arg("-f")
        .arg(m.path("t/0/by-offset/0"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let errors = stderr_lines(&mut tail);
    let tail_pid = tail.id();
    // tail has the file open once one of its descriptors points into the mount.
    wait_until("tail -f to open its file", || {
        fs::read_dir(format!("/proc/{tail_pid}/fd"))
            .unwrap()
            .flatten()
            .any(|e| fs::read_link(e.path()).is_ok_and(|t| t.starts_with(m.mnt())))
    });
    m.signal(Signal::SIGTERM);
    let status = m.wait_ended().unwrap();
    assert!(status.success(), "{status}");
    // The reader's next read fails: tail reports it and, with no file left, ends.
    let mut said = Vec::new();
    wait_until("tail -f to end", || {
        said.extend(errors.try_iter());
        tail.try_wait().unwrap().is_some()
    });
    said.extend(errors.try_iter());
    let said = said.join("\n");
    assert!(said.contains("Transport endpoint is not connected"), "tail said: {said}");
    let log = fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("aborted the FUSE connection"), "{log}");
    if !fusectl_before && nix::unistd::geteuid().is_root() {
        assert!(log.contains("mounted fusectl on /sys/fs/fuse/connections"), "{log}");
    }
    // The host is left as it was found: fusectl mounted for the abort is detached again.
    assert_eq!(is_mounted(fusectl), fusectl_before);
    assert!(m.data().join(CLEAN_SHUTDOWN_MARKER).exists());
}
