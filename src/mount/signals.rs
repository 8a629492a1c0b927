//! Termination signals: SIGINT, SIGTERM and SIGHUP, blocked in every thread but one, which
//! unmounts, detaches a busy mount lazily and aborts its FUSE connection after [`BUSY_GRACE`]
//! (see the [module docs](super)).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal};

use super::detach::detach_lazily;
use super::session::Unmounter;
use crate::fs::TopicFs;

/// How long a signalled daemon waits for a busy (lazily detached) mount to be released before
/// it aborts the FUSE connection.
pub const BUSY_GRACE: Duration = Duration::from_secs(2);
/// Where the kernel's fusectl filesystem exposes each connection's `abort` file.
const FUSE_CONNECTIONS: &str = "/sys/fs/fuse/connections";

/// SIGINT, SIGTERM and SIGHUP: each ends the daemon cleanly.
pub(super) fn termination_signals() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGHUP);
    set
}

/// What the signal thread needs to end the mount.
pub(super) struct Stopper {
    pub(super) unmounter: Unmounter,
    pub(super) mountpoint: PathBuf,
    /// The FUSE connection number, to abort a busy mount.
    pub(super) connection: Option<u32>,
    /// Receives once the session has ended (the main thread then shuts down).
    pub(super) ended: mpsc::Receiver<()>,
    pub(super) fs: Arc<TopicFs>,
}

impl Stopper {
    /// The signal thread: waits for a termination signal, then unmounts (see the module docs).
    pub(super) fn wait_and_unmount(mut self, signals: SigSet) {
        let signal = match signals.wait() {
            Ok(signal) => signal,
            Err(err) => {
                log::error!("waiting for signals failed: {err}; unmount with fusermount3 -u");
                return;
            }
        };
        let mountpoint = self.mountpoint.display();
        log::info!("{signal}: unmounting {mountpoint}");
        match self.unmounter.unmount() {
            Ok(()) => {}
            Err(err) if err.raw_os_error() == Some(libc::EBUSY) => {
                log::warn!("{mountpoint} is busy; detaching it lazily");
                detach_lazily(&self.mountpoint);
            }
            Err(err) => {
                log::error!("unmounting {mountpoint} failed: {err}; detaching it lazily");
                detach_lazily(&self.mountpoint);
            }
        }
        // A lazily detached mount (also every unmount without root: fusermount3 -z) lives on
        // while files are open: give them a moment, then cut the connection.
        if self.ended.recv_timeout(BUSY_GRACE).is_ok() {
            return;
        }
        log::warn!(
            "{mountpoint} still has open files {}s after {signal}; closing them",
            BUSY_GRACE.as_secs()
        );
        match self.abort_connection() {
            // The session ends now, and the main thread shuts down.
            Ok(()) => log::info!(
                "aborted the FUSE connection of {mountpoint}: open files fail with ENOTCONN"
            ),
            Err(reason) => {
                // Exiting closes /dev/fuse, which ends the connection just as well; shut down
                // first (a main thread already shutting down is waited for).
                log::warn!("cannot abort the FUSE connection ({reason}); exiting");
                let status = match self.fs.shutdown() {
                    Ok(()) => 0,
                    Err(err) => {
                        log::error!("clean shutdown failed: {err}");
                        1
                    }
                };
                std::process::exit(status);
            }
        }
    }

    /// Writes to the connection's `abort` file under fusectl: every pending and future request
    /// fails with `ENOTCONN` and the session loop ends. fusectl not mounted (as on hosts
    /// without systemd) is mounted first when running as root, and detached again once the
    /// abort is written, so the host is left as it was found.
    fn abort_connection(&self) -> Result<(), String> {
        let id = self.connection.ok_or("connection number unknown")?;
        let mounted_here = ensure_fusectl()?;
        let abort = Path::new(FUSE_CONNECTIONS).join(id.to_string()).join("abort");
        let written = fs::write(&abort, b"1").map_err(|err| format!("{}: {err}", abort.display()));
        if mounted_here {
            if let Err(err) =
                nix::mount::umount2(FUSE_CONNECTIONS, nix::mount::MntFlags::MNT_DETACH)
            {
                log::warn!(
                    "cannot unmount the fusectl this daemon mounted on {FUSE_CONNECTIONS}: {err}"
                );
            }
        }
        written
    }
}

/// Mounts fusectl on [`FUSE_CONNECTIONS`] unless it is there (as systemd does at boot); needs
/// root. Whether this call mounted it (the caller detaches it again after use).
fn ensure_fusectl() -> Result<bool, String> {
    if super::mount_entry(Path::new(FUSE_CONNECTIONS)).is_some() {
        return Ok(false);
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(format!(
            "fusectl is not mounted on {FUSE_CONNECTIONS}, and mounting it needs root"
        ));
    }
    nix::mount::mount(
        Some("fusectl"),
        FUSE_CONNECTIONS,
        Some("fusectl"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .map_err(|err| format!("cannot mount fusectl on {FUSE_CONNECTIONS}: {err}"))?;
    log::info!("mounted fusectl on {FUSE_CONNECTIONS} to abort a FUSE connection");
    Ok(true)
}
