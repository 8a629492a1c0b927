//! `topicfs unmount MOUNTPOINT`: unmounts, then waits until the daemon serving the mount has
//! exited and its data dir is closed cleanly, so `topicfs unmount M && <remount, or start a
//! broker>` never races the daemon's shutdown.
//!
//! # Finding the daemon
//!
//! Before unmounting, every process that has `/dev/fuse` open and whose command line is a
//! `topicfs mount` naming this mountpoint is taken as serving it. A relative mountpoint in
//! that command line is resolved against the directory the mount was started in: the daemon
//! child of a background mount carries it in [`STARTED_IN_ENV`] (it changes to `/` itself),
//! a foreground process is still in it (`/proc/<pid>/cwd`). The command line is read by the
//! caller's `mountpoint_of` (the command line's own parser). A process is followed by its pid
//! and start time, so a reused pid is never waited for. The data dir to check afterwards is
//! the directory of the `.lock` the daemon holds open (a read-write log dir mount); a
//! read-only or cluster mount has none, and then the daemon's exit is the whole wait.
//!
//! Only processes whose `/proc` entries this user may read are found (the same user, or
//! root); if none is found the mount is still unmounted and a warning says nothing was waited
//! for, and why, by the `user_id` of the mount: another user's, or one whose daemon is gone.
//! Messages name the daemon's log as its command line says (`--log-file`, `-f`: its stderr,
//! else syslog; a daemon without syslog is given its default log file as `--log-file`).
//!
//! It changes to `/` before unmounting, so run from inside the mount it does not keep it busy
//! itself, and it never lists itself among the holders of a busy mount.
//!
//! # Busy mounts
//!
//! A mount with open files or a working directory inside it cannot be unmounted (`EBUSY`):
//! the command fails, lists the processes holding it (their working directory, root or open
//! files under the mountpoint) and suggests `--lazy`, which detaches it at once; the daemon
//! then serves the open files until the last is closed, and shuts down cleanly after.

use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use super::detach::detach_lazily;
use super::mountinfo::{fuse_owner, list_proc, mount_entry, read_proc};
use super::session::DEV_FUSE;
use crate::storage::log_dir::{CLEAN_SHUTDOWN_FILE, LOCK_FILE};

/// Environment variable of the daemon child: the directory `topicfs mount` was started in,
/// against which relative paths of its command line are read.
pub const STARTED_IN_ENV: &str = "TOPICFS_STARTED_IN";
/// How long `topicfs unmount` waits for the daemon to exit unless `--timeout` says otherwise.
pub const DEFAULT_UNMOUNT_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(10);

/// `topicfs unmount` options.
#[derive(Clone, Debug)]
pub struct UnmountRequest {
    pub mountpoint: PathBuf,
    /// `--lazy`: detach even if busy, and do not wait for the daemon.
    pub lazy: bool,
    /// `--timeout`: the longest wait for the daemon to exit.
    pub timeout: Duration,
}

/// What `topicfs unmount` reads of a `topicfs mount` command line (the whole argv, program
/// name first); `None` for any other command line.
pub type MountpointOf = fn(&[OsString]) -> Option<MountCommand>;

/// Of a `topicfs mount` command line: its mountpoint and where it logs, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountCommand {
    pub mountpoint: PathBuf,
    /// `-f`.
    pub foreground: bool,
    /// `--log-file` or `-o log_file=`.
    pub log_file: Option<PathBuf>,
}

/// Runs `topicfs unmount`; the process's exit status (0: unmounted, and the daemon, if found,
/// exited and closed the data dir cleanly).
pub fn unmount(request: &UnmountRequest, mountpoint_of: MountpointOf) -> ExitCode {
    match run(request, mountpoint_of) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("topicfs: {message}");
            ExitCode::FAILURE
        }
    }
}

/// A process serving the mount.
#[derive(Debug)]
struct Daemon {
    pid: u32,
    /// Field 22 of `/proc/<pid>/stat`: with the pid, names the process even if the pid is
    /// reused.
    start_time: String,
    /// The log dirs whose `.lock` it holds open (a read-write local mount: one, or a
    /// broker's several).
    data_dirs: Vec<PathBuf>,
    /// Where it logs, as messages name it.
    log: String,
}

fn run(request: &UnmountRequest, mountpoint_of: MountpointOf) -> Result<(), String> {
    let given = &request.mountpoint;
    // The path as written first: canonicalizing asks the mount itself, which may hang (a
    // stopped daemon) or fail (ENOTCONN, a dead one); then through symlinks.
    let target = [Some(lexically_absolute(given)), given.canonicalize().ok()]
        .into_iter()
        .flatten()
        .find(|path| mount_entry(path).is_some())
        .ok_or_else(|| format!("{} is not mounted", given.display()))?;
    let owner = mount_entry(&target).as_deref().and_then(fuse_owner);
    let daemons = serving_daemons(&target, mountpoint_of);
    // Not to keep the mount busy itself when run from inside it (`target` is absolute).
    let _ = std::env::set_current_dir("/");
    let pids = daemons.iter().map(|d| d.pid.to_string()).collect::<Vec<_>>().join(", ");
    if request.lazy {
        detach_lazily(&target);
        if mount_entry(&target).is_some() {
            return Err(format!("cannot detach {}", target.display()));
        }
        if !daemons.is_empty() {
            eprintln!(
                "topicfs: {} detached; its daemon (pid {pids}) serves the files still open and \
                 shuts down cleanly when the last is closed",
                target.display()
            );
        }
        return Ok(());
    }
    unmount_now(&target)?;
    if daemons.is_empty() {
        eprintln!(
            "topicfs: warning: {} is unmounted, but {}: not waiting for its shutdown",
            target.display(),
            no_daemon_found(owner)
        );
        return Ok(());
    }
    let deadline = Instant::now() + request.timeout;
    for daemon in &daemons {
        while is_running(daemon) {
            if Instant::now() >= deadline {
                let data = if daemon.data_dirs.is_empty() {
                    String::new()
                } else {
                    let dirs: Vec<String> =
                        daemon.data_dirs.iter().map(|d| d.display().to_string()).collect();
                    format!("; its data dir {} is not closed yet", dirs.join(","))
                };
                return Err(format!(
                    "{} is unmounted, but its daemon (pid {}) has not exited after {} s{data}: \
                     see its log ({})",
                    target.display(),
                    daemon.pid,
                    request.timeout.as_secs_f64(),
                    daemon.log
                ));
            }
            std::thread::sleep(POLL);
        }
        if let Some(dir) = daemon.data_dirs.iter().find(|d| !d.join(CLEAN_SHUTDOWN_FILE).exists()) {
            return Err(format!(
                "the daemon of {} (pid {}) exited without closing its data dir {} cleanly (no \
                 {CLEAN_SHUTDOWN_FILE}): the next mount recovers it; see its log ({})",
                target.display(),
                daemon.pid,
                dir.display(),
                daemon.log
            ));
        }
    }
    Ok(())
}

/// Why no daemon was found, by what the mount's `user_id` (`owner`) tells: a mount of
/// another user, whose processes this one may not inspect, or one no topicfs process of this
/// user (or, as root, of anyone) serves any more.
fn no_daemon_found(owner: Option<u32>) -> String {
    let me = nix::unistd::geteuid();
    let gone = "its daemon had exited or died";
    match owner {
        Some(uid) if uid != me.as_raw() && !me.is_root() => format!(
            "it was mounted by uid {uid}, whose processes this user (uid {me}) may not inspect"
        ),
        Some(uid) if me.is_root() => {
            format!("no topicfs process served it (it was mounted by uid {uid}; {gone})")
        }
        None if me.is_root() => format!("no topicfs process served it ({gone})"),
        _ => format!("no topicfs process of this user served it ({gone})"),
    }
}

/// `umount(2)` as root, `fusermount3 -u` otherwise; a busy mount is an error naming who holds
/// it.
fn unmount_now(target: &Path) -> Result<(), String> {
    match nix::mount::umount(target) {
        Ok(()) => return Ok(()),
        Err(nix::errno::Errno::EBUSY) => {}
        Err(_) => {
            let out = Command::new("fusermount3")
                .arg("-u")
                .arg("--")
                .arg(target)
                .output()
                .map_err(|e| format!("cannot run fusermount3: {e}"))?;
            if out.status.success() {
                return Ok(());
            }
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !stderr.contains("busy") {
                return Err(format!(
                    "fusermount3 -u {} failed ({}): {}",
                    target.display(),
                    out.status,
                    stderr.trim()
                ));
            }
        }
    }
    let holders = holders(target);
    let list = if holders.is_empty() {
        " (no process this user may inspect holds it)".to_string()
    } else {
        format!(" by:\n{}", holders.iter().map(|h| format!("  {h}")).collect::<Vec<_>>().join("\n"))
    };
    Err(format!(
        "{} is busy: files or working directories under it are in use{list}\nclose them and \
         retry, or detach it now with `topicfs unmount --lazy {}` (the daemon then shuts down \
         when the last is closed)",
        target.display(),
        target.display()
    ))
}

/// The processes serving the mount at `target` (see the module docs).
fn serving_daemons(target: &Path, mountpoint_of: MountpointOf) -> Vec<Daemon> {
    let mut found = Vec::new();
    for pid in pids() {
        let Some(fds) = open_files(pid) else { continue };
        if !fds.iter().any(|(_, path)| path == Path::new(DEV_FUSE)) {
            continue;
        }
        let Some(cmdline) = read_proc(&format!("{pid}/cmdline")) else { continue };
        let argv: Vec<OsString> = cmdline
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| std::ffi::OsStr::from_bytes(a).to_os_string())
            .collect();
        let Some(command) = mountpoint_of(&argv) else { continue };
        let base = started_in(pid).or_else(|| fs::read_link(format!("/proc/{pid}/cwd")).ok());
        let resolve = |path: PathBuf| match &base {
            Some(base) if path.is_relative() => base.join(path),
            _ => path,
        };
        let named = resolve(command.mountpoint);
        let log_file = command.log_file.map(resolve);
        let log = super::logging::described_log(command.foreground, log_file.as_deref());
        if lexically_absolute(&named) != target
            && named.canonicalize().ok().as_deref() != Some(target)
        {
            continue;
        }
        let Some(start_time) = start_time(pid) else { continue };
        let data_dirs = fds
            .iter()
            .filter_map(|(_, path)| {
                (path.file_name() == Some(LOCK_FILE.as_ref())).then(|| path.parent()).flatten()
            })
            .map(Path::to_path_buf)
            .collect();
        found.push(Daemon { pid, start_time, data_dirs, log });
    }
    found
}

/// `path` absolute (against the current directory) with `.` and `..` removed lexically.
fn lexically_absolute(path: &Path) -> PathBuf {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// [`STARTED_IN_ENV`] of a process.
fn started_in(pid: u32) -> Option<PathBuf> {
    let environ = read_proc(&format!("{pid}/environ"))?;
    let prefix = format!("{STARTED_IN_ENV}=");
    environ.split(|&b| b == 0).find_map(|var| {
        var.strip_prefix(prefix.as_bytes())
            .map(|dir| PathBuf::from(std::ffi::OsStr::from_bytes(dir)))
    })
}

/// Every pid in `/proc`.
fn pids() -> Vec<u32> {
    let Some(entries) = list_proc("") else { return Vec::new() };
    entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect()
}

/// The open files of a process (fd number, target), `None` if its fds cannot be read.
fn open_files(pid: u32) -> Option<Vec<(String, PathBuf)>> {
    let entries = list_proc(&format!("{pid}/fd"))?;
    Some(
        entries
            .flatten()
            .filter_map(|e| {
                let target = fs::read_link(e.path()).ok()?;
                Some((e.file_name().to_string_lossy().into_owned(), target))
            })
            .collect(),
    )
}

/// Field 22 (start time) of `/proc/<pid>/stat`, `None` if the process is gone or a zombie.
fn start_time(pid: u32) -> Option<String> {
    let stat = String::from_utf8(read_proc(&format!("{pid}/stat"))?).ok()?;
    // Fields after the parenthesised command name: 3 (state) is the first.
    let (_, rest) = stat.rsplit_once(") ")?;
    let mut fields = rest.split(' ');
    let state = fields.next()?;
    if state.starts_with('Z') || state.starts_with('X') {
        return None;
    }
    fields.nth(18).map(str::to_string)
}

fn is_running(daemon: &Daemon) -> bool {
    start_time(daemon.pid).as_deref() == Some(daemon.start_time.as_str())
}

/// Who keeps `target` busy: each process but this one whose working directory, root or an
/// open file is under it, as `pid N (command): what path`.
fn holders(target: &Path) -> Vec<String> {
    let under = |p: &Path| p.starts_with(target);
    let me = std::process::id();
    let mut found = Vec::new();
    for pid in pids().into_iter().filter(|&pid| pid != me) {
        let comm = read_proc(&format!("{pid}/comm")).unwrap_or_default();
        let comm = String::from_utf8_lossy(&comm);
        let mut uses = Vec::new();
        for what in ["cwd", "root"] {
            if let Ok(path) = fs::read_link(format!("/proc/{pid}/{what}"))
                && under(&path)
            {
                uses.push(format!("{what} {}", path.display()));
            }
        }
        for (fd, path) in open_files(pid).unwrap_or_default() {
            if under(&path) {
                uses.push(format!("fd {fd} {}", path.display()));
            }
        }
        if !uses.is_empty() {
            found.push(format!("pid {pid} ({}): {}", comm.trim(), uses.join(", ")));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_are_the_processes_in_a_directory_but_never_this_one() {
        let dir = tempfile::tempdir().unwrap();
        let canonical = dir.path().canonicalize().unwrap();
        let held = fs::File::open(dir.path()).unwrap();
        // A process whose cwd is the directory: it says so once it runs there (its chdir comes
        // before its exec), so the scan below cannot race its start.
        let mut other = Command::new("sh")
            .args(["-c", "echo ready; exec sleep 600"])
            .current_dir(&canonical)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        let stdout = other.stdout.take().unwrap();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut ready).unwrap();
        assert_eq!(ready, "ready\n");
        let me = std::process::id();
        let found = holders(&canonical);
        let _ = other.kill();
        let _ = other.wait();
        // By pid: its name is `sh` or `sleep`, whichever it runs by now.
        assert!(
            found.iter().any(|h| h.starts_with(&format!("pid {} (", other.id()))
                && h.contains(&format!("): cwd {}", canonical.display()))),
            "{found:?}"
        );
        assert!(!found.iter().any(|h| h.starts_with(&format!("pid {me} "))), "{found:?}");
        drop(held);
        assert_eq!(lexically_absolute(Path::new("/a/./b/../c")), Path::new("/a/c"));
        let stat = start_time(me).unwrap();
        assert!(stat.parse::<u64>().is_ok(), "{stat}");
    }
}
