//! Background mode: the parent re-executes `topicfs mount` as the daemon child and waits for
//! its one status line (`ready` or `error: <message>`); the child reports it (see the
//! [module docs](super)).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitCode, Stdio};

use crate::error::{Error, Result};

/// Hidden flag marking the re-executed daemon child.
pub const DAEMON_CHILD_FLAG: &str = "--daemon-child";
/// The child's status lines.
const READY: &str = "ready";
const ERROR_PREFIX: &str = "error: ";

/// The parent in background mode: re-executes this command as the daemon child and waits for
/// its one status line.
pub(super) fn run_parent(args: &[OsString]) -> ExitCode {
    match spawn_daemon(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("topicfs: {err}");
            ExitCode::FAILURE
        }
    }
}

fn spawn_daemon(args: &[OsString]) -> Result<()> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Mount(format!("cannot find the topicfs executable: {e}")))?;
    let args = daemon_child_args(args.to_vec());
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

/// The daemon child's arguments: the parent's, with [`DAEMON_CHILD_FLAG`] right after the
/// `mount` subcommand (so it can never be taken for a value or a path after `--`).
fn daemon_child_args(mut args: Vec<OsString>) -> Vec<OsString> {
    let at = args.iter().position(|a| a == "mount").map_or(0, |i| i + 1);
    args.insert(at, OsString::from(DAEMON_CHILD_FLAG));
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
            daemon_child_args(args(&["mount", "d", "m", "--", "-x"])),
            args(&["mount", DAEMON_CHILD_FLAG, "d", "m", "--", "-x"])
        );
    }
}
