//! Background mode: the parent re-executes `topicfs mount` as the daemon child and waits for
//! its one status line (`ready` or `error: <message>`); the child reports it (see the
//! [module docs](super)).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use super::MountRequest;
use super::logging::{
    LogTarget, SYSLOG_SOCKETS, daemon_target, open_default_log_file, open_log_file,
};
use crate::error::{Error, Result};

/// Hidden flag marking the re-executed daemon child.
pub const DAEMON_CHILD_FLAG: &str = "--daemon-child";
/// The child's status lines.
const READY: &str = "ready";
const ERROR_PREFIX: &str = "error: ";

/// The parent in background mode: decides where the daemon logs, re-executes this command as
/// the daemon child and waits for its one status line.
pub(super) fn run_parent(args: &[OsString], request: &MountRequest) -> ExitCode {
    match start_daemon(args, request) {
        Ok(note) => {
            if let Some(note) = note {
                eprintln!("topicfs: {note}");
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("topicfs: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Starts the daemon once its log is known to open (see [`super::logging`]); a note for the
/// terminal when it logs to the default file because there is no syslog.
fn start_daemon(args: &[OsString], request: &MountRequest) -> Result<Option<String>> {
    let sockets: Vec<&Path> = SYSLOG_SOCKETS.iter().map(Path::new).collect();
    let target = daemon_target(
        request.log_file.as_deref(),
        &request.mountpoint,
        &sockets,
        nix::unistd::geteuid().is_root(),
        std::env::var_os("XDG_STATE_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )?;
    let mut log_args = Vec::new();
    let mut note = None;
    let mut created = None;
    if let LogTarget::File(path) = &target {
        // Opened here, so a log file that cannot be opened fails the mount on the terminal.
        if !path.exists() {
            created = Some(path.clone());
        }
        if request.log_file.is_none() {
            open_default_log_file(path)?;
        } else {
            open_log_file(path)?;
        }
        if request.log_file.is_none() {
            log_args = vec![OsString::from("--log-file"), path.clone().into_os_string()];
            note = Some(format!(
                "no syslog ({}): the daemon logs to {}",
                SYSLOG_SOCKETS[0],
                path.display()
            ));
        }
    }
    if let Err(err) = spawn_daemon(args, log_args) {
        // A mount that did not start leaves no log file of its own behind (its error is on the
        // terminal).
        if let Some(path) = created {
            let _ = std::fs::remove_file(path);
        }
        return Err(err);
    }
    Ok(note)
}

fn spawn_daemon(args: &[OsString], log_args: Vec<OsString>) -> Result<()> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Mount(format!("cannot find the topicfs executable: {e}")))?;
    let args = daemon_child_args(args.to_vec(), log_args);
    let mut command = Command::new(exe);
    // The child changes to `/`: `topicfs unmount` reads its command line's relative paths
    // against this.
    if let Ok(dir) = std::env::current_dir() {
        command.env(super::STARTED_IN_ENV, dir);
    }
    let mut child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::Mount(format!("cannot start the daemon: {e}")))?;
    let stdout = child.stdout.take().ok_or_else(|| Error::Mount("daemon has no stdout".into()))?;
    let mut line = String::new();
    // EOF (0 bytes) means the child died before reporting.
    let read = BufReader::new(stdout).read_line(&mut line);
    let line = line.trim_end();
    if matches!(read, Ok(n) if n > 0) {
        if line == READY {
            return Ok(());
        }
        if let Some(message) = line.strip_prefix(ERROR_PREFIX) {
            let _ = child.wait();
            return Err(Error::Mount(message.to_string()));
        }
    }
    let status = child.wait().map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
    Err(Error::Mount(format!("the daemon ended ({status}) before the mount was ready")))
}

/// The daemon child's arguments: the parent's, with [`DAEMON_CHILD_FLAG`] and `extra` (the
/// default log file) right after the `mount` subcommand (so they can never be taken for a
/// value or a path after `--`).
fn daemon_child_args(mut args: Vec<OsString>, extra: Vec<OsString>) -> Vec<OsString> {
    let at = args.iter().position(|a| a == "mount").map_or(0, |i| i + 1);
    let inserted = std::iter::once(OsString::from(DAEMON_CHILD_FLAG)).chain(extra);
    args.splice(at..at, inserted);
    args
}

/// Tells the waiting parent (daemon child) or the terminal (foreground) how the start went.
pub(super) struct Reporter {
    pub(super) daemon: bool,
    pub(super) reported: bool,
}

impl Reporter {
    pub(super) fn ready(&mut self) {
        if self.daemon && !self.reported {
            self.reported = true;
            let mut out = std::io::stdout().lock();
            // If the parent is gone there is no one to tell; the mount is live regardless.
            let _ = writeln!(out, "{READY}");
            let _ = out.flush();
        }
    }

    pub(super) fn error(&mut self, err: &Error) {
        if self.daemon && !self.reported {
            self.reported = true;
            let message = err.to_string().replace('\n', " ");
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{ERROR_PREFIX}{message}");
            let _ = out.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_flag_follows_the_subcommand() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            daemon_child_args(args(&["mount", "d", "m", "--", "-x"]), Vec::new()),
            args(&["mount", DAEMON_CHILD_FLAG, "d", "m", "--", "-x"])
        );
        assert_eq!(
            daemon_child_args(args(&["mount", "d", "m"]), args(&["--log-file", "/l"])),
            args(&["mount", DAEMON_CHILD_FLAG, "--log-file", "/l", "d", "m"])
        );
    }
}
