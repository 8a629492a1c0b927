//! The one way the filesystem-logic tests build a [`TopicFs`]: [`FsFixture`], a builder over
//! [`FsOptions`] whose defaults are those of a plain writable mount owned by root, so each test
//! states only what it changes.

use std::ffi::OsStr;
use std::sync::Arc;

use topicfs::Error;
use topicfs::fs::attr::{DirEntry, OpenRequest};
use topicfs::fs::inode::ROOT_INO;
use topicfs::fs::{DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, FsOptions, TopicFs};
use topicfs::source::TopicSource;
use topicfs::storage::LogDirs;

/// How the helpers below open a file: for reading.
const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };

/// Builds a [`TopicFs`] over a source: writable, one partition per `mkdir`ed topic, lines up to
/// 1 MiB, owned by root (uid and gid 0), the default file and directory modes.
pub struct FsFixture {
    source: Arc<dyn TopicSource>,
    options: FsOptions,
}

impl FsFixture {
    /// A filesystem over `source`.
    pub fn over(source: Arc<dyn TopicSource>) -> FsFixture {
        let options = FsOptions {
            read_only: false,
            partitions_per_topic: 1,
            max_line_bytes: 1 << 20,
            uid: 0,
            gid: 0,
            file_mode: DEFAULT_FILE_MODE,
            dir_mode: DEFAULT_DIR_MODE,
        };
        FsFixture { source, options }
    }

    /// A filesystem over local log dirs (what a mount of data dirs runs).
    pub fn local(log_dir: &Arc<LogDirs>) -> FsFixture {
        FsFixture::over(Arc::clone(log_dir) as Arc<dyn TopicSource>)
    }

    /// Refuse every change (`read_only` set) or not.
    pub fn read_only(mut self, read_only: bool) -> FsFixture {
        self.options.read_only = read_only;
        self
    }

    /// Partitions of a topic made by `mkdir`.
    pub fn partitions_per_topic(mut self, partitions: u32) -> FsFixture {
        self.options.partitions_per_topic = partitions;
        self
    }

    /// Longest line an append handle waits for (`max.message.bytes`).
    pub fn max_line_bytes(mut self, bytes: usize) -> FsFixture {
        self.options.max_line_bytes = bytes;
        self
    }

    /// Owner shown on every file.
    pub fn owner(mut self, uid: u32, gid: u32) -> FsFixture {
        self.options.uid = uid;
        self.options.gid = gid;
        self
    }

    /// Permission bits of files and directories (`-o file_mode`, `-o dir_mode`).
    pub fn modes(mut self, file_mode: u16, dir_mode: u16) -> FsFixture {
        self.options.file_mode = file_mode;
        self.options.dir_mode = dir_mode;
        self
    }

    /// The filesystem (call `with_groups` and the like on it for more).
    pub fn build(self) -> TopicFs {
        TopicFs::new(self.source, self.options)
    }
}

/// Reads an open file of `fs` from offset 0 to its end, `chunk` bytes a `read` (as the kernel
/// does, each at the offset the previous one ended).
pub fn read_to_end(fs: &TopicFs, fh: u64, chunk: u32) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    loop {
        let piece = fs.read(fh, out.len() as u64, chunk)?;
        if piece.is_empty() {
            return Ok(out);
        }
        out.extend(piece);
    }
}

/// Looks a path up from the root of `fs`, one component at a time, as the kernel does.
pub fn ino(fs: &TopicFs, path: &str) -> Result<u64, Error> {
    let mut ino = ROOT_INO;
    for name in path.split('/').filter(|n| !n.is_empty()) {
        ino = fs.lookup(ino, OsStr::new(name))?.attr.ino;
    }
    Ok(ino)
}

/// Reads the file at `path` of `fs` whole, `chunk` bytes a `read`: open, reads, release.
pub fn read_path(fs: &TopicFs, path: &str, chunk: u32) -> Vec<u8> {
    let fh = fs.open(ino(fs, path).unwrap(), READ).unwrap().fh;
    let out = read_to_end(fs, fh, chunk).unwrap();
    fs.release(fh).unwrap();
    out
}

/// The names of the directory at `path` of `fs`, `.` and `..` first, from one `readdir` pass.
pub fn names(fs: &TopicFs, path: &str) -> Vec<String> {
    let ino = ino(fs, path).unwrap();
    let fh = fs.opendir(ino).unwrap().fh;
    let mut names = Vec::new();
    fs.readdir(ino, fh, 0, &mut |e: &DirEntry| {
        names.push(e.name.clone());
        false
    })
    .unwrap();
    fs.releasedir(fh).unwrap();
    names
}
