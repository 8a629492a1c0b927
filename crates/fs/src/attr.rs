//! The plain structs `fs` answers with; `fuse.rs` converts them to fuser's types.

use std::time::{Duration, SystemTime};

/// How long the kernel may cache attributes and names that never change while the mount lives
/// (fixed names such as `info`, `by-offset`, directories).
pub const STABLE_TTL: Duration = Duration::from_secs(1);
/// Attributes of files whose size or mtime moves (streams, info files, appends, active segment
/// files): never cached, so every `stat` (each poll of `tail -f`) sees the current size.
pub const DYNAMIC_TTL: Duration = Duration::ZERO;
/// `st_blksize` reported for every file: the preferred I/O size. Tools size their buffers by it
/// (coreutils `cat` and `cp` use the larger of 128 KiB and `st_blksize`), and every read or
/// write of a stream or append file is one FUSE request, so 1 MiB (the largest request the
/// mount negotiates, `MAX_WRITE` in `fuse.rs`) takes an eighth of the round trips of 128 KiB.
pub const BLOCK_SIZE: u32 = 1 << 20;
/// `st_blksize` of a sealed segment's files, which the kernel reads from the data dir itself
/// (passthrough or page cache, see `Opened::backing`): the usual block size of the disk files,
/// since no request is saved by larger reads and `cat` would allocate a fresh 1 MiB buffer
/// for each file.
pub const SEALED_BLOCK_SIZE: u32 = 4096;

/// File type of a node.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FileKind {
    Directory,
    RegularFile,
}

/// Attributes of one inode (what `stat` shows).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: FileKind,
    /// Exact byte size: for streams, what a full read returns at this moment.
    pub size: u64,
    /// Permission bits (`0o755`, `0o444`, ...).
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    /// Last change of the content (partition `last_modified` for partition files).
    pub mtime: SystemTime,
    /// `st_blksize`: [`BLOCK_SIZE`], or [`SEALED_BLOCK_SIZE`] for a sealed segment's files.
    pub blksize: u32,
}

impl Attr {
    /// `st_blocks`: 512-byte blocks covering `size`.
    pub fn blocks(&self) -> u64 {
        self.size.div_ceil(512)
    }
}

/// Attributes with how long the kernel may cache them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttrReply {
    pub attr: Attr,
    pub ttl: Duration,
}

/// A successful lookup (or mkdir): the attributes, and how long the kernel may cache the name
/// and the attributes. The generation is always 0 (inode numbers are never reused).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub attr: Attr,
    pub entry_ttl: Duration,
    pub attr_ttl: Duration,
}

/// One directory entry, as `readdir` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u64,
    /// Offset of the *next* entry (this entry's index + 1): passing it back to `readdir`
    /// continues after this entry.
    pub next_offset: u64,
    pub kind: FileKind,
    pub name: String,
}

/// How a file was opened.
#[derive(Debug)]
pub struct Opened {
    pub fh: u64,
    /// Bypass the page cache (`FOPEN_DIRECT_IO`): reads go to the filesystem even past the
    /// size the kernel last saw, and `read()` returns what the filesystem returned.
    pub direct_io: bool,
    /// Keep cached pages from an earlier open (`FOPEN_KEEP_CACHE`): only for content that never
    /// changes.
    pub keep_cache: bool,
    /// The file on disk whose bytes are exactly this file's, now and for as long as it is open
    /// (a sealed segment's file): the kernel may read it directly instead of asking (FUSE
    /// passthrough). `None` for everything that must be read through `read`.
    pub backing: Option<std::fs::File>,
    /// Closing sends no `FLUSH` (`FOPEN_NOFLUSH`): the file has nothing to flush (every file
    /// but `append` and `append.json`), so `close` costs no round trip to the daemon.
    pub no_flush: bool,
}

/// What `open` was asked for (the access mode and the flags that matter to us).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OpenRequest {
    pub read: bool,
    pub write: bool,
    /// `O_TRUNC` (only seen here when the kernel passes it through; otherwise it arrives as a
    /// `setattr` with size 0).
    pub truncate: bool,
}

impl OpenRequest {
    /// Decodes the access mode and `O_TRUNC` from `open(2)` flags.
    pub fn from_flags(flags: i32) -> OpenRequest {
        let (read, write) = match flags & libc::O_ACCMODE {
            libc::O_WRONLY => (false, true),
            libc::O_RDWR => (true, true),
            _ => (true, false),
        };
        OpenRequest { read, write, truncate: flags & libc::O_TRUNC != 0 }
    }
}

/// The changes a `setattr` asks for. Only what decides the answer is kept.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SetAttrRequest {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    /// atime or mtime is being set (`touch`).
    pub times: bool,
}

/// Longest name `statfs` reports (`NAME_MAX`): topic names are at most 249 bytes, stream
/// names are bounded by it too.
pub const NAME_MAX: u32 = 255;

/// What `statfs` answers (see [`super::TopicFs::statfs`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct StatFs {
    pub space: topicfs_source::SpaceStats,
    pub name_max: u32,
}
