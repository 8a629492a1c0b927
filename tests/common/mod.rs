//! Shared harness of the mount and daemon tests: a [`MountGuard`] that runs the built `topicfs`
//! binary on a fresh temp dir and always leaves no mount and no daemon behind, even when the
//! test panics.
//!
//! Every wait has a deadline ([`DEADLINE`]) that only guards against hangs; no test asserts on
//! how long something took.

#![allow(dead_code)]

pub mod corpus;
pub mod fs_fixture;
pub mod log_fixture;
pub mod tansu;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tempfile::TempDir;

/// Longest any wait in a test may take before it is a failure (a hang guard, generous for
/// debug builds on a loaded machine).
pub const DEADLINE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

/// The binary under test.
pub fn topicfs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_topicfs"))
}

/// Runs `topicfs mount SOURCE MNT ARGS` in the foreground of the test, for a mount that is
/// meant to fail: checks nothing was left mounted, and returns its exit code and stderr.
pub fn failed_mount(
    source: impl AsRef<std::ffi::OsStr>,
    mnt: &Path,
    args: &[&str],
) -> (Option<i32>, String) {
    let out = topicfs()
        .arg("mount")
        .arg(source.as_ref())
        .arg(mnt)
        .args(args)
        .stdin(Stdio::null())
        .output();
    let out = out.unwrap();
    assert!(!is_mounted(mnt));
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A temp dir with `data/` and `mnt/` in it, removed on drop.
pub struct Dirs {
    pub root: TempDir,
}

impl Dirs {
    pub fn new() -> Dirs {
        let root = tempfile::Builder::new().prefix("topicfs-test-").tempdir().unwrap();
        fs::create_dir(root.path().join("data")).unwrap();
        fs::create_dir(root.path().join("mnt")).unwrap();
        Dirs { root }
    }

    pub fn data(&self) -> PathBuf {
        self.root.path().join("data")
    }

    pub fn mnt(&self) -> PathBuf {
        self.root.path().join("mnt")
    }
}

/// Whether `path` is a mount point now (per `/proc/self/mountinfo`).
pub fn is_mounted(path: &Path) -> bool {
    let path = path.to_str().unwrap();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(path))
}

/// Polls `condition` until it holds; panics with `what` after [`DEADLINE`].
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        thread::sleep(POLL);
    }
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
pub fn process_ended(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // Field 3, after the parenthesised command name, is the state.
        Ok(stat) => stat.rsplit_once(") ").is_none_or(|(_, rest)| rest.starts_with('Z')),
    }
}

/// The pid of the daemon child serving `mnt` (its command line names the mountpoint).
pub fn daemon_pid(mnt: &Path) -> Option<u32> {
    let wanted = mnt.as_os_str().as_encoded_bytes();
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else { continue };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        if args.contains(&&b"--daemon-child"[..]) && args.contains(&wanted) && !process_ended(pid) {
            return Some(pid);
        }
    }
    None
}

/// Unmounts `mnt` if mounted: `fusermount3 -u`, then `umount -l` as a fallback.
pub fn force_unmount(mnt: &Path) {
    if !is_mounted(mnt) {
        return;
    }
    let _ = Command::new("fusermount3").arg("-u").arg(mnt).stderr(Stdio::null()).status();
    if is_mounted(mnt) {
        let _ = Command::new("umount").arg("-l").arg(mnt).stderr(Stdio::null()).status();
    }
}

/// A running `topicfs mount` on a [`Dirs`], unmounted and stopped on drop.
pub struct MountGuard {
    /// `None` only after [`MountGuard::unmount`] handed the dirs back.
    dirs: Option<Dirs>,
    /// The foreground process, when mounted with `-f`.
    child: Option<Child>,
    /// The serving process (the foreground child, or the daemon child).
    pub pid: u32,
}

impl MountGuard {
    /// `topicfs mount -f DATA MNT <args>` on fresh dirs, waiting until the mount is live.
    pub fn foreground(args: &[&str]) -> MountGuard {
        MountGuard::foreground_on(Dirs::new(), args)
    }

    /// `topicfs mount -f` on existing dirs.
    pub fn foreground_on(dirs: Dirs, args: &[&str]) -> MountGuard {
        MountGuard::foreground_logging_to(dirs, args, Stdio::inherit())
    }

    /// `topicfs mount -f` on existing dirs, its log (stderr) going to `stderr`.
    pub fn foreground_logging_to(dirs: Dirs, args: &[&str], stderr: Stdio) -> MountGuard {
        let source = dirs.data().into_os_string();
        MountGuard::foreground_source(dirs, &source, args, stderr)
    }

    /// `topicfs mount -f SOURCE MNT <args>` for another source than `dirs`' data dir (a
    /// cluster's `kafka://HOST:PORT`), waiting until the mount is live.
    pub fn foreground_source(
        dirs: Dirs,
        source: &std::ffi::OsStr,
        args: &[&str],
        stderr: Stdio,
    ) -> MountGuard {
        let child = topicfs()
            .arg("mount")
            .arg("-f")
            .arg(source)
            .arg(dirs.mnt())
            .args(args)
            .stdin(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut guard = MountGuard { dirs: Some(dirs), child: Some(child), pid };
        let mnt = guard.mnt();
        wait_until("the foreground mount", || {
            if let Some(status) = guard.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!("topicfs -f exited before mounting: {status}");
            }
            is_mounted(&mnt)
        });
        guard
    }

    /// `topicfs mount DATA MNT <args>` (background) on existing dirs; the parent must exit 0
    /// with the mount already live.
    /// The daemon logs to `topicfs.log` in the temp dir (not to syslog or a file of the
    /// host's).
    pub fn background_on(dirs: Dirs, args: &[&str]) -> MountGuard {
        let mut command = topicfs();
        command.arg("mount").arg(dirs.data()).arg(dirs.mnt()).args(args);
        command.arg("--log-file").arg(dirs.root.path().join("topicfs.log"));
        MountGuard::background_with(dirs, command)
    }

    /// A background mount of `dirs` started by `command` (a mount helper, say), which must
    /// exit 0 with the mount already live.
    pub fn background_with(dirs: Dirs, mut command: Command) -> MountGuard {
        let status = command.status().unwrap();
        if !status.success() {
            force_unmount(&dirs.mnt());
            panic!("topicfs mount failed: {status}");
        }
        let mnt = dirs.mnt();
        let mounted_when_parent_exited = is_mounted(&mnt);
        let pid = daemon_pid(&mnt);
        let guard = MountGuard { dirs: Some(dirs), child: None, pid: pid.unwrap_or(0) };
        assert!(mounted_when_parent_exited, "parent exited 0 before the mount was live");
        assert!(pid.is_some(), "no daemon serves {}", mnt.display());
        guard
    }

    pub fn background(args: &[&str]) -> MountGuard {
        MountGuard::background_on(Dirs::new(), args)
    }

    pub fn mnt(&self) -> PathBuf {
        self.dirs.as_ref().map(Dirs::mnt).unwrap_or_default()
    }

    pub fn data(&self) -> PathBuf {
        self.dirs.as_ref().map(Dirs::data).unwrap_or_default()
    }

    /// The temp dir holding `data/` and `mnt/` (for scratch files next to them).
    pub fn dirs_root(&self) -> PathBuf {
        self.dirs.as_ref().map(|d| d.root.path().to_path_buf()).unwrap_or_default()
    }

    /// A path under the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mnt().join(rel)
    }

    /// Sends `signal` to the serving process.
    pub fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.pid as i32), signal).unwrap();
    }

    /// Waits until the serving process ended; its exit status when it is our child.
    pub fn wait_ended(&mut self) -> Option<ExitStatus> {
        if let Some(child) = self.child.as_mut() {
            let start = Instant::now();
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    self.child = None;
                    return Some(status);
                }
                assert!(start.elapsed() < DEADLINE, "topicfs did not exit");
                thread::sleep(POLL);
            }
        }
        let pid = self.pid;
        wait_until("the daemon to exit", || process_ended(pid));
        None
    }

    /// Unmounts with `fusermount3 -u`, waits for the process to end, and returns the dirs for
    /// a remount.
    pub fn unmount(mut self) -> Dirs {
        let status = Command::new("fusermount3").arg("-u").arg(self.mnt()).status().unwrap();
        assert!(status.success(), "fusermount3 -u failed");
        if let Some(status) = self.wait_ended() {
            assert!(status.success(), "topicfs exited with {status}");
        }
        self.into_dirs()
    }

    /// Makes sure nothing is mounted or running any more, and returns the dirs.
    pub fn into_dirs(mut self) -> Dirs {
        self.cleanup();
        self.dirs.take().unwrap()
    }

    fn cleanup(&mut self) {
        force_unmount(&self.mnt());
        let start = Instant::now();
        let ended = |guard: &mut MountGuard| match guard.child.as_mut() {
            Some(child) => child.try_wait().ok().flatten().is_some(),
            None => guard.pid == 0 || process_ended(guard.pid),
        };
        while !ended(self) && start.elapsed() < DEADLINE {
            thread::sleep(POLL);
        }
        if !ended(self) && self.pid != 0 {
            let _ = kill(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
        force_unmount(&self.mnt());
    }
}

impl Drop for MountGuard {
    fn drop(&mut self) {
        if self.dirs.is_some() {
            self.cleanup();
        }
    }
}

/// Runs `sh -c script`; panics with its stderr unless it succeeds.
/// The entries topicfs keeps beside the segments of the partition directory `dir`
/// (`<base>.topicfs-<kind>`, see SEMANTICS.md "The segment cache").
pub fn beside_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().contains(".topicfs-"))
        .collect();
    v.sort();
    v
}

/// Removes what topicfs kept beside the segments of the partition directory `dir`: it is then
/// as a broker would have written it.
pub fn strip_beside_entries(dir: &Path) {
    for p in beside_entries(dir) {
        fs::remove_file(p).unwrap();
    }
}

pub fn sh(script: &str) -> String {
    let out = sh_output(script);
    assert!(
        out.status.success(),
        "`{script}` failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `sh -c script` and returns everything.
pub fn sh_output(script: &str) -> Output {
    Command::new("sh").arg("-c").arg(script).stdin(Stdio::null()).output().unwrap()
}

/// A child process whose stdout is collected by a thread, killed and reaped on drop.
pub struct Follower {
    child: Child,
    lines: mpsc::Receiver<Vec<u8>>,
    seen: Vec<u8>,
}

impl Follower {
    /// Starts `program args` with stdout piped.
    pub fn start(program: &str, args: &[&str]) -> Follower {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Follower { child, lines, seen: Vec::new() }
    }

    /// Waits until the output contains `needle`; returns all output so far.
    pub fn wait_for(&mut self, needle: &str) -> String {
        let start = Instant::now();
        while !String::from_utf8_lossy(&self.seen).contains(needle) {
            let left = DEADLINE.checked_sub(start.elapsed()).unwrap_or_default();
            match self.lines.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(chunk) => self.seen.extend(chunk),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            assert!(
                start.elapsed() < DEADLINE,
                "timed out waiting for {needle:?}; output so far: {:?}",
                String::from_utf8_lossy(&self.seen)
            );
        }
        let seen = String::from_utf8_lossy(&self.seen).into_owned();
        assert!(seen.contains(needle), "output ended without {needle:?}: {seen:?}");
        seen
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The README's consumer-group loop, as shipped in `doc/examples/consume-group.sh`.
pub const GROUP_LOOP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/doc/examples/consume-group.sh");

/// Runs the README loop once on topic `t` of the mount `m` for `group` with `command`; whether
/// it succeeded.
pub fn run_group_loop(m: &MountGuard, group: &str, command: &str) -> bool {
    Command::new("sh")
        .args([GROUP_LOOP, m.mnt().to_str().unwrap(), "t", group, command])
        .stdin(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// Starts one shell per group running the README loop `times` times on topic `t` of the mount
/// at `mnt`, each processing with `jq -r .payload >> <root>/<group>.out`. Returns the shells and,
/// per group, its output file and processing command.
pub fn spawn_group_loops(
    mnt: &Path,
    root: &Path,
    groups: &[&'static str],
    times: u32,
) -> (Vec<Child>, Vec<(&'static str, PathBuf, String)>) {
    let mut children = Vec::new();
    let mut outs = Vec::new();
    for &group in groups {
        let out = root.join(format!("{group}.out"));
        let command = format!("jq -r .payload >> {}", out.display());
        let script = format!(
            "for i in $(seq {times}); do sh {GROUP_LOOP} {mnt} t {group} '{command}' || exit 1; done",
            mnt = mnt.display()
        );
        children
            .push(Command::new("sh").args(["-c", &script]).stdin(Stdio::null()).spawn().unwrap());
        outs.push((group, out, command));
    }
    (children, outs)
}

/// The log dirs of one writable data dir `dir` (a set of one, what a mount of it runs) with
/// `config` as every topic's defaults.
pub fn writable_log_dirs(
    dir: &Path,
    config: topicfs::storage::LogConfig,
) -> std::sync::Arc<topicfs::storage::LogDirs> {
    let mode = topicfs::storage::SegmentMode::Writable;
    let dirs = topicfs::storage::LogDirs::open_dir(dir, config, Default::default(), mode);
    std::sync::Arc::new(dirs.unwrap())
}
