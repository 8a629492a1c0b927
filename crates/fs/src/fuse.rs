//! The fuser adapter: [`FuseAdapter`] implements `fuser::Filesystem` over [`TopicFs`].
//!
//! Each method converts fuser's arguments, calls one `TopicFs` method and replies. A failed
//! request is logged here, once, at the error's own level (debug for absent names, info for
//! refusals, error for damaged data), and answered with the error's errno. No decision about
//! data is made in this file.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::SystemTime;

use fuser::{
    BackingId, BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::TopicFs;
use crate::attr::{Attr, Entry, FileKind, OpenRequest, Opened, SetAttrRequest};
use topicfs_source::error::Error;

/// Largest write the kernel is asked to pass in one request. The kernel caps it further at its
/// `max_pages` (1 MiB on current kernels); one `write()` up to that size arrives as one request
/// and so becomes one append.
const MAX_WRITE: u32 = 1 << 20;

/// Logs a failed request once, at the error's level, and replies with its errno.
macro_rules! fail {
    ($reply:expr, $err:expr, $($what:tt)+) => {{
        let err: Error = $err;
        log::log!(err.refusal_log_level(), "{}: {err}", format_args!($($what)+));
        $reply.error(Errno::from_i32(err.errno()));
    }};
}

/// `fuser::Filesystem` over a shared [`TopicFs`] (shared so the mount code can shut it down
/// after the session ends).
///
/// # Passthrough
///
/// A file `fs` opens with a [`Opened::backing`] file (a sealed segment's) is registered with the
/// kernel (`FUSE_DEV_IOC_BACKING_OPEN`) and opened `FOPEN_PASSTHROUGH`: its reads and `mmap`s go
/// to the file on disk without a request to the daemon. This needs `FUSE_PASSTHROUGH` from the
/// kernel (Linux 6.9 and later) and `CAP_SYS_ADMIN` for the registration; without either, such
/// a file is opened through the page cache with `FOPEN_KEEP_CACHE` instead (its bytes never
/// change), which is always correct.
///
/// The kernel demands one backing file per inode while any handle of it is open through
/// passthrough (a second one, or an open without passthrough, fails). So the [`BackingId`] of
/// an inode is shared by all its open handles ([`Backings`]), and once a registration failed
/// no new inode is opened through passthrough for the rest of the session (inodes already open
/// that way keep using theirs).
#[derive(Debug)]
pub struct FuseAdapter {
    fs: Arc<TopicFs>,
    /// The kernel granted `FUSE_PASSTHROUGH` at `init`, and no registration has failed since.
    passthrough: AtomicBool,
    /// Passthrough is not asked for at `init` (`-o no_passthrough`).
    no_passthrough: bool,
    backings: Mutex<Backings>,
}

/// The registered backing files.
///
/// **Invariant**: `by_inode` holds an entry for every inode with a handle in `by_handle`, and
/// that entry upgrades to the same `BackingId` the handles hold (entries are removed when the
/// last handle of their inode is released).
#[derive(Debug, Default)]
struct Backings {
    /// Keeps each registration alive while its handle is open (dropping the last `Arc`
    /// unregisters it: `FUSE_DEV_IOC_BACKING_CLOSE`).
    by_handle: HashMap<u64, (u64, Arc<BackingId>)>,
    by_inode: HashMap<u64, Weak<BackingId>>,
}

impl FuseAdapter {
    /// An adapter serving `fs`.
    pub fn new(fs: Arc<TopicFs>) -> FuseAdapter {
        FuseAdapter {
            fs,
            passthrough: AtomicBool::new(false),
            no_passthrough: false,
            backings: Mutex::new(Backings::default()),
        }
    }

    /// The same adapter, never using passthrough: backing files are read through the page
    /// cache (`-o no_passthrough`).
    pub fn without_passthrough(self) -> FuseAdapter {
        FuseAdapter { no_passthrough: true, ..self }
    }

    /// Replies to `open`/`opendir`: through passthrough when `opened` names a backing file and
    /// passthrough works (see [`FuseAdapter`]), with its page-cache flags otherwise.
    fn reply_opened(&self, reply: ReplyOpen, ino: u64, opened: Opened) {
        let fh = opened.fh;
        let mut flags = FopenFlags::empty();
        if opened.no_flush {
            flags |= FopenFlags::FOPEN_NOFLUSH;
        }
        if let Some(file) = &opened.backing
            && let Some(backing) = self.backing(&reply, ino, fh, file)
        {
            log::trace!("inode {ino} handle {fh}: passthrough");
            reply.opened_passthrough(FileHandle(fh), flags, &backing);
            return;
        }
        if opened.direct_io {
            flags |= FopenFlags::FOPEN_DIRECT_IO;
        }
        if opened.keep_cache {
            flags |= FopenFlags::FOPEN_KEEP_CACHE;
        }
        reply.opened(FileHandle(fh), flags);
    }

    /// The registration of `ino`'s backing file for handle `fh`: the one its open handles
    /// share, or a new one of `file`. `None` when passthrough is not available.
    fn backing(
        &self,
        reply: &ReplyOpen,
        ino: u64,
        fh: u64,
        file: &std::fs::File,
    ) -> Option<Arc<BackingId>> {
        let mut backings = topicfs_source::sync::lock(&self.backings);
        let shared = backings.by_inode.get(&ino).and_then(Weak::upgrade);
        let backing = match shared {
            Some(backing) => backing,
            None if self.passthrough.load(Ordering::Relaxed) => match reply.open_backing(file) {
                Ok(backing) => {
                    let backing = Arc::new(backing);
                    backings.by_inode.insert(ino, Arc::downgrade(&backing));
                    backing
                }
                Err(err) => {
                    self.passthrough.store(false, Ordering::Relaxed);
                    log::warn!(
                        "cannot register a backing file for FUSE passthrough ({err}); sealed \
                         segment files are read through the page cache from now on"
                    );
                    return None;
                }
            },
            None => return None,
        };
        backings.by_handle.insert(fh, (ino, Arc::clone(&backing)));
        Some(backing)
    }

    /// Drops handle `fh`'s registration, and its inode's entry with the last one.
    fn release_backing(&self, fh: u64) {
        let mut backings = topicfs_source::sync::lock(&self.backings);
        if let Some((ino, backing)) = backings.by_handle.remove(&fh)
            && Arc::strong_count(&backing) == 1
        {
            backings.by_inode.remove(&ino);
        }
    }
}

fn file_attr(attr: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(attr.ino),
        size: attr.size,
        blocks: attr.blocks(),
        atime: attr.mtime,
        mtime: attr.mtime,
        ctime: attr.mtime,
        crtime: SystemTime::UNIX_EPOCH,
        kind: file_type(attr.kind),
        perm: attr.perm,
        nlink: attr.nlink,
        uid: attr.uid,
        gid: attr.gid,
        rdev: 0,
        blksize: attr.blksize,
        flags: 0,
    }
}

fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::Directory => FileType::Directory,
        FileKind::RegularFile => FileType::RegularFile,
    }
}

fn reply_entry(reply: ReplyEntry, entry: &Entry) {
    reply.entry_with_ttls(
        &entry.attr_ttl,
        &entry.entry_ttl,
        &file_attr(&entry.attr),
        Generation(0),
    );
}

impl Filesystem for FuseAdapter {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        if let Err(nearest) = config.set_max_write(MAX_WRITE) {
            // The kernel offers less: take what it offers.
            let _ = config.set_max_write(nearest);
        }
        // Passthrough to files on a plain filesystem: a stack depth of 1 (the data dir on an
        // overlayfs or another FUSE mount would need 2, and registrations then fail).
        if self.no_passthrough {
            return Ok(());
        }
        match config.add_capabilities(InitFlags::FUSE_PASSTHROUGH) {
            Ok(()) => match config.set_max_stack_depth(1) {
                Ok(_) => self.passthrough.store(true, Ordering::Relaxed),
                Err(max) => log::info!("FUSE passthrough unavailable (stack depth {max})"),
            },
            Err(_) => log::info!(
                "the kernel offers no FUSE passthrough (Linux 6.9+): sealed segment files are \
                 read through the page cache"
            ),
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.fs.lookup(parent.0, name) {
            Ok(entry) => reply_entry(reply, &entry),
            Err(err) => fail!(reply, err, "lookup {name:?} in inode {parent}"),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.fs.forget(ino.0, nlookup);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.fs.statfs() {
            Ok(st) => {
                let s = st.space;
                reply.statfs(
                    s.blocks,
                    s.blocks_free,
                    s.blocks_available,
                    s.files,
                    s.files_free,
                    s.block_size,
                    st.name_max,
                    s.fragment_size,
                );
            }
            Err(err) => fail!(reply, err, "statfs"),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.fs.getattr(ino.0, fh.map(|fh| fh.0)) {
            Ok(attr) => reply.attr(&attr.ttl, &file_attr(&attr.attr)),
            Err(err) => fail!(reply, err, "getattr inode {ino}"),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let request =
            SetAttrRequest { mode, uid, gid, size, times: atime.is_some() || mtime.is_some() };
        match self.fs.setattr(ino.0, &request) {
            Ok(attr) => reply.attr(&attr.ttl, &file_attr(&attr.attr)),
            Err(err) => fail!(reply, err, "setattr inode {ino} {request:?}"),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let err = self.fs.refuse_create(parent.0, "creating files (only mkdir creates topics)");
        fail!(reply, err, "mknod {name:?} in inode {parent}");
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        match self.fs.mkdir(parent.0, name) {
            Ok(entry) => reply_entry(reply, &entry),
            Err(err) => fail!(reply, err, "mkdir {name:?} in inode {parent}"),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let err = self.fs.refuse_change(parent.0, name, "removing files");
        fail!(reply, err, "unlink {name:?} in inode {parent}");
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let err = self.fs.refuse_change(parent.0, name, "removing directories");
        fail!(reply, err, "rmdir {name:?} in inode {parent}");
    }

    fn symlink(
        &self,
        _req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        let err = self.fs.refuse_create(parent.0, "symbolic links");
        fail!(reply, err, "symlink {link_name:?} in inode {parent}");
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _newparent: INodeNo,
        newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let err = self.fs.refuse_change(parent.0, name, "renaming");
        fail!(reply, err, "rename {name:?} in inode {parent} to {newname:?}");
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let err = self.fs.refuse_create(newparent.0, "hard links");
        fail!(reply, err, "link inode {ino} as {newname:?} in inode {newparent}");
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.open(ino.0, OpenRequest::from_flags(flags.0)) {
            Ok(opened) => self.reply_opened(reply, ino.0, opened),
            Err(err) => fail!(reply, err, "open inode {ino} flags {flags:#x}"),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.fs.read(fh.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(err) => fail!(reply, err, "read inode {ino} at {offset} ({size} bytes)"),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.fs.write(fh.0, data, lock_owner.map(|owner| owner.0)) {
            Ok(written) => reply.written(written),
            Err(err) => fail!(reply, err, "write inode {ino} ({} bytes)", data.len()),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        match self.fs.flush(fh.0, Some(lock_owner.0)) {
            Ok(()) => reply.ok(),
            Err(err) => fail!(reply, err, "flush inode {ino}"),
        }
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.release_backing(fh.0);
        match self.fs.release(fh.0) {
            Ok(()) => reply.ok(),
            Err(err) => fail!(reply, err, "release inode {ino}"),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.fs.fsync(fh.0) {
            Ok(()) => reply.ok(),
            Err(err) => fail!(reply, err, "fsync inode {ino}"),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.opendir(ino.0) {
            Ok(opened) => self.reply_opened(reply, ino.0, opened),
            Err(err) => fail!(reply, err, "opendir inode {ino}"),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut add = |entry: &crate::attr::DirEntry| {
            reply.add(INodeNo(entry.ino), entry.next_offset, file_type(entry.kind), &entry.name)
        };
        match self.fs.readdir(ino.0, fh.0, offset, &mut add) {
            Ok(()) => reply.ok(),
            Err(err) => fail!(reply, err, "readdir inode {ino} from {offset}"),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        match self.fs.releasedir(fh.0) {
            Ok(()) => reply.ok(),
            Err(err) => fail!(reply, err, "releasedir inode {ino}"),
        }
    }

    // No extended attributes. ENOSYS (without fuser's "not implemented" warning) makes the
    // kernel stop asking for the whole mount, e.g. for security.capability before each write.
    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOSYS);
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let err = self.fs.refuse_create(parent.0, "creating files (only mkdir creates topics)");
        fail!(reply, err, "create {name:?} in inode {parent}");
    }
}
