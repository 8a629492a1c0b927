//! Detaching a mount lazily (`umount -l`): what a failed handshake, a signalled daemon and
//! `topicfs unmount --lazy` share. A leaf, so that the session, the signal thread and the
//! unmount command each depend on it and not on one another.

use std::path::Path;
use std::process::Command;

/// `umount -l` as root, `fusermount3 -u -z` otherwise.
pub(super) fn detach_lazily(mountpoint: &Path) {
    if nix::mount::umount2(mountpoint, nix::mount::MntFlags::MNT_DETACH).is_ok() {
        return;
    }
    match Command::new("fusermount3").arg("-u").arg("-z").arg("--").arg(mountpoint).status() {
        Ok(status) if status.success() => {}
        Ok(status) => log::error!("fusermount3 -u -z {} failed: {status}", mountpoint.display()),
        Err(err) => log::error!("cannot run fusermount3: {err}"),
    }
}
