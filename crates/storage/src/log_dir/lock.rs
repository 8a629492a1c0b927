//! Locking a writable data dir (`.lock` and the directory itself).

use super::*;

/// What a writable [`LogDir`] holds locked while it owns the directory: `.lock`, as a broker
/// locks it, and the directory itself.
///
/// Invariant: both are held from open to shutdown, so a second writable topicfs is refused
/// even if `.lock` was deleted by hand under a running mount (the new `.lock` it would create
/// is another file; the directory cannot be deleted while in use as the data dir). A broker
/// only knows `.lock` (Kafka shares that weakness).
#[derive(Debug)]
pub(super) struct DirLock {
    _file: Flock<File>,
    /// Also the handle the shutdown's `syncfs` goes through.
    pub(super) dir: Flock<File>,
}

/// Locks the data dir (see [`DirLock`]) without waiting; [`Error::Locked`] when another
/// process holds either lock.
pub(super) fn take_lock(dir: &Path) -> Result<DirLock> {
    let handle = open::open_dir(dir)?;
    let dir_lock = match Flock::lock(handle, FlockArg::LockExclusiveNonblock) {
        Ok(locked) => locked,
        Err((_, Errno::EWOULDBLOCK)) => return Err(Error::Locked(dir.to_path_buf())),
        Err((_, e)) => return Err(Error::io(dir, "lock", e.into())),
    };
    Ok(DirLock { _file: take_lock_file(dir)?, dir: dir_lock })
}

/// Opens `.lock` (created if missing) and locks it exclusively without waiting: held until the
/// returned file is dropped; [`Error::Locked`] when another process holds it.
pub(super) fn take_lock_file(dir: &Path) -> Result<Flock<File>> {
    let path = dir.join(LOCK_FILE);
    let file = open::open_regular(
        &path,
        OpenOptions::new().read(true).write(true).create(true).truncate(false),
        "open",
    )?;
    // Two locks, because Linux keeps them apart: an open-file-description `fcntl` write lock on
    // the whole file, which conflicts with the POSIX record lock a Kafka broker takes
    // (`FileChannel.tryLock`), and a `flock`, which conflicts with tools that use `flock`. Both
    // are released when the file is closed.
    let whole_file = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        // Must be 0 for open-file-description locks.
        l_pid: 0,
    };
    match fcntl(&file, FcntlArg::F_OFD_SETLK(&whole_file)) {
        Ok(_) => {}
        Err(Errno::EAGAIN | Errno::EACCES) => return Err(Error::Locked(dir.to_path_buf())),
        Err(e) => return Err(Error::io(&path, "lock", e.into())),
    }
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(locked) => Ok(locked),
        Err((_, Errno::EWOULDBLOCK)) => Err(Error::Locked(dir.to_path_buf())),
        Err((_, e)) => Err(Error::io(&path, "lock", e.into())),
    }
}
