//! The null filesystem: the FUSE ceiling the sequential figures are measured against (issue
//! 17). A tiny fuser filesystem mounted with topicfs's own FUSE settings (worker threads,
//! `max_write` 1 MiB, direct I/O on every file, attributes never cached) that serves bytes from
//! memory for reads (`data`, `data.json`: the same bytes topicfs renders) and writes what it is
//! given to a plain file (`sink`). Nothing is rendered, decoded or checked: what it takes is
//! what FUSE itself costs to carry those bytes on this machine.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyEntry, ReplyOpen,
    ReplyWrite, Request, SessionACL, WriteFlags,
};

/// topicfs's `max_write` (crates/fs/src/fuse.rs).
const MAX_WRITE: u32 = 1 << 20;
const ROOT: u64 = 1;
const FILES: [&str; 3] = ["data", "data.json", "sink"];

pub struct NullFs {
    /// Bytes of `data` and `data.json`.
    files: [Vec<u8>; 2],
    sink: Mutex<(File, u64)>,
}

impl NullFs {
    pub fn new(values: Vec<u8>, json: Vec<u8>, sink: &Path) -> std::io::Result<NullFs> {
        let file = File::create(sink)?;
        Ok(NullFs { files: [values, json], sink: Mutex::new((file, 0)) })
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let (kind, perm, size) = match ino {
            ROOT => (FileType::Directory, 0o755, 0),
            2 | 3 => (FileType::RegularFile, 0o444, self.files[(ino - 2) as usize].len() as u64),
            4 => (FileType::RegularFile, 0o644, self.sink.lock().map(|s| s.1).unwrap_or(0)),
            _ => return None,
        };
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: SystemTime::UNIX_EPOCH,
            mtime: SystemTime::UNIX_EPOCH,
            ctime: SystemTime::UNIX_EPOCH,
            crtime: SystemTime::UNIX_EPOCH,
            kind,
            perm,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 1 << 20,
            flags: 0,
        })
    }
}

impl Filesystem for NullFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        if let Err(nearest) = config.set_max_write(MAX_WRITE) {
            let _ = config.set_max_write(nearest);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let ino = FILES.iter().position(|f| OsStr::new(f) == name).map(|i| i as u64 + 2);
        match ino.filter(|_| parent.0 == ROOT).and_then(|i| self.attr(i)) {
            Some(attr) => reply.entry(&Duration::ZERO, &attr, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) {
            Some(attr) => reply.attr(&Duration::ZERO, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // As topicfs opens every file: direct I/O, nothing kept in the page cache.
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(bytes) = ino.0.checked_sub(2).and_then(|i| self.files.get(i as usize)) else {
            return reply.error(Errno::EISDIR);
        };
        let start = (offset as usize).min(bytes.len());
        let end = start.saturating_add(size as usize).min(bytes.len());
        reply.data(&bytes[start..end]);
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if ino.0 != 4 {
            return reply.error(Errno::EROFS);
        }
        let mut sink = match self.sink.lock() {
            Ok(s) => s,
            Err(e) => e.into_inner(),
        };
        match sink.0.write_all(data) {
            Ok(()) => {
                sink.1 += data.len() as u64;
                reply.written(data.len() as u32);
            }
            Err(_) => reply.error(Errno::EIO),
        }
    }
}

/// A mounted null filesystem; unmounted (and its thread joined) on drop.
pub struct NullMount {
    session: Option<fuser::BackgroundSession>,
    pub mnt: PathBuf,
}

impl NullMount {
    /// Mounts `fs` on `mnt` with `threads` FUSE worker threads (topicfs's `--threads`).
    pub fn start(fs: NullFs, mnt: &Path, threads: usize) -> Result<NullMount, String> {
        std::fs::create_dir_all(mnt).map_err(|e| e.to_string())?;
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("topicfs-null".into()),
            MountOption::Subtype("topicfs-null".into()),
            MountOption::DefaultPermissions,
            MountOption::RW,
        ];
        config.acl = SessionACL::Owner;
        config.n_threads = Some(threads.max(1));
        let session = fuser::Session::new(fs, mnt, &config).map_err(|e| format!("null fs: {e}"))?;
        let session = session.spawn().map_err(|e| format!("null fs: {e}"))?;
        Ok(NullMount { session: Some(session), mnt: mnt.to_path_buf() })
    }
}

impl Drop for NullMount {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            let _ = s.umount_and_join();
        }
    }
}
