//! The fuser adapter: [`FuseAdapter`] implements `fuser::Filesystem` over [`TopicFs`].
//!
//! Each method converts fuser's arguments, calls one `TopicFs` method and replies. A failed
//! request is logged here, once, at the error's own level (debug for absent names, info for
//! refusals, error for damaged data), and answered with the error's errno. No decision about
//! data is made in this file.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::{
    BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, ReplyXattr, Request, TimeOrNow,
    WriteFlags,
};

use crate::error::Error;
use crate::fs::TopicFs;
use crate::fs::attr::{Attr, BLOCK_SIZE, Entry, FileKind, OpenRequest, Opened, SetAttrRequest};

/// Largest write the kernel is asked to pass in one request. The kernel caps it further at its
/// `max_pages` (1 MiB on current kernels); one `write()` up to that size arrives as one request
/// and so becomes one append.
const MAX_WRITE: u32 = 1 << 20;

/// Logs a failed request once, at the error's level, and replies with its errno.
macro_rules! fail {
    ($reply:expr, $err:expr, $($what:tt)+) => {{
        let err: Error = $err;
        log::log!(err.log_level(), "{}: {err}", format_args!($($what)+));
        $reply.error(Errno::from_i32(err.errno()));
    }};
}

/// `fuser::Filesystem` over a shared [`TopicFs`] (shared so the mount code can shut it down
/// after the session ends).
#[derive(Debug)]
pub struct FuseAdapter {
    fs: Arc<TopicFs>,
}

impl FuseAdapter {
    /// An adapter serving `fs`.
    pub fn new(fs: Arc<TopicFs>) -> FuseAdapter {
        FuseAdapter { fs }
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
        blksize: BLOCK_SIZE,
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

fn reply_opened(reply: ReplyOpen, opened: Opened) {
    let mut flags = FopenFlags::empty();
    if opened.direct_io {
        flags |= FopenFlags::FOPEN_DIRECT_IO;
    }
    if opened.keep_cache {
        flags |= FopenFlags::FOPEN_KEEP_CACHE;
    }
    reply.opened(FileHandle(opened.fh), flags);
}

impl Filesystem for FuseAdapter {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        if let Err(nearest) = config.set_max_write(MAX_WRITE) {
            // The kernel offers less: take what it offers.
            let _ = config.set_max_write(nearest);
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
            Ok(opened) => reply_opened(reply, opened),
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
            Ok(opened) => reply_opened(reply, opened),
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
        let mut add = |entry: &crate::fs::attr::DirEntry| {
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
