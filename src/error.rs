//! The one error type of topicfs, its exhaustive errno mapping and the log level of each kind.
//!
//! Pure decoding errors live in [`crate::format::DecodeError`] (they know a byte offset inside a
//! buffer, not a file); the storage layer wraps them into [`Error::Corrupt`] with the file and the
//! absolute position, so every message names where the damage is.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::format::Offset;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, from a damaged segment to a malformed spec.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A name that does not exist (topic, partition, file, or an unparsable spec in a path).
    NotFound(String),
    /// A requested offset outside `[log start offset, log end offset]`.
    OffsetOutOfRange { requested: Offset, log_start: Offset, log_end: Offset },
    /// A topic name Kafka would refuse (characters, length, `.`/`..`).
    InvalidTopicName { name: String, reason: &'static str },
    /// A name that already exists (mkdir of an existing topic or partition).
    AlreadyExists(String),
    /// Bytes on disk that are not what Kafka would write: file and byte position of the damage.
    Corrupt { file: PathBuf, position: u64, what: String },
    /// A write to a read-only mount or data dir.
    ReadOnly,
    /// An operation topicfs never allows (rename, link, writing a stream or a segment file).
    NotPermitted(&'static str),
    /// Input the caller gave that cannot be accepted (malformed JSON line, bad option value).
    InvalidInput(String),
    /// A record or batch over `max.message.bytes` (or over `segment.bytes`).
    RecordTooLarge { size: usize, max: usize },
    /// The data dir is in use by another process (its `.lock` is held).
    Locked(PathBuf),
    /// A handle that no longer refers to anything (closed, or its partition went away).
    StaleHandle,
    /// Not supported by this source or on this file (e.g. seeking an append file).
    Unsupported(&'static str),
    /// A command line (or mount helper invocation) topicfs cannot accept: the text names the
    /// word and what is wrong with it. `topicfs` exits with status 2.
    Usage(String),
    /// A mount that could not be set up, served or shut down cleanly (data dir, mountpoint,
    /// `/dev/fuse`, the daemon child, the FUSE session): the text says what and why.
    Mount(String),
    /// An I/O error, with the file and the operation that failed.
    Io { file: PathBuf, op: &'static str, source: io::Error },
    /// A name in a data dir that is not the kind of file topicfs reads there (a FIFO, socket,
    /// device, dangling symlink or symlink loop where a regular file or a directory belongs):
    /// refused without opening it, so nothing blocks on it. See `storage::open`.
    WrongFileType { file: PathBuf, found: FileType, expected: FileType },
}

/// What a name in a data dir turned out to be (after following symlinks), for
/// [`Error::WrongFileType`]: named as `ls -l` or `stat` would say it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A named pipe.
    Fifo,
    /// A Unix domain socket.
    Socket,
    /// A character device (`/dev/zero`, a terminal).
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A symlink whose target does not exist.
    DanglingSymlink,
    /// A symlink that (through others) points back at itself, or a chain too long to follow.
    SymlinkLoop,
}

impl fmt::Display for FileType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileType::Regular => "regular file",
            FileType::Directory => "directory",
            FileType::Fifo => "FIFO",
            FileType::Socket => "socket",
            FileType::CharDevice => "character device",
            FileType::BlockDevice => "block device",
            FileType::DanglingSymlink => "dangling symlink",
            FileType::SymlinkLoop => "symlink loop",
        })
    }
}

impl Error {
    /// Wraps an I/O error with the file and operation it happened on.
    pub fn io(file: impl Into<PathBuf>, op: &'static str, source: io::Error) -> Error {
        Error::Io { file: file.into(), op, source }
    }

    /// A corruption error naming the file and byte position.
    pub fn corrupt(file: impl Into<PathBuf>, position: u64, what: impl Into<String>) -> Error {
        Error::Corrupt { file: file.into(), position, what: what.into() }
    }

    /// The errno a filesystem call returns for this error. One exhaustive match, no wildcard, so
    /// a new variant cannot be added without deciding its errno.
    pub fn errno(&self) -> i32 {
        match self {
            Error::NotFound(_) => libc::ENOENT,
            // Offsets below the log start (or past the end) simply do not exist as files.
            Error::OffsetOutOfRange { .. } => libc::ENOENT,
            Error::InvalidTopicName { .. } => libc::EINVAL,
            Error::AlreadyExists(_) => libc::EEXIST,
            Error::Corrupt { .. } => libc::EIO,
            Error::ReadOnly => libc::EROFS,
            Error::NotPermitted(_) => libc::EPERM,
            Error::InvalidInput(_) => libc::EINVAL,
            Error::RecordTooLarge { .. } => libc::EFBIG,
            Error::Locked(_) => libc::EBUSY,
            Error::StaleHandle => libc::ESTALE,
            Error::Unsupported(_) => libc::EOPNOTSUPP,
            // Not the answer to a filesystem call: these end the command, not a request.
            Error::Usage(_) => libc::EINVAL,
            Error::Mount(_) => libc::EIO,
            // ENOSPC, EDQUOT, EIO ... pass through; an error without an OS code is EIO.
            Error::Io { source, .. } => match source.raw_os_error() {
                Some(code) if code > 0 => code,
                _ => libc::EIO,
            },
            // The bytes behind the name cannot be read as what they should be: like damage,
            // EIO (not ENOTDIR/ELOOP, which would describe the mount's own path, not the file
            // in the data dir behind it).
            Error::WrongFileType { .. } => libc::EIO,
        }
    }

    /// How loudly a failed request with this error is logged: lookups of absent names are
    /// routine (debug), refused user input is info, damaged data and I/O failures are errors.
    pub fn log_level(&self) -> log::Level {
        match self {
            Error::NotFound(_) | Error::OffsetOutOfRange { .. } => log::Level::Debug,
            Error::InvalidTopicName { .. }
            | Error::AlreadyExists(_)
            | Error::ReadOnly
            | Error::NotPermitted(_)
            | Error::InvalidInput(_)
            | Error::RecordTooLarge { .. }
            | Error::Unsupported(_)
            | Error::StaleHandle
            | Error::Usage(_) => log::Level::Info,
            Error::Locked(_) | Error::WrongFileType { .. } => log::Level::Warn,
            Error::Corrupt { .. } | Error::Io { .. } | Error::Mount(_) => log::Level::Error,
        }
    }
}

/// Damage already reported, as (file, position): see [`Error::first_report`].
static REPORTED_DAMAGE: std::sync::Mutex<Option<std::collections::HashSet<(PathBuf, u64)>>> =
    std::sync::Mutex::new(None);

/// Entries [`REPORTED_DAMAGE`] holds before it starts over (a damaged partition read in a loop
/// then logs again now and then rather than growing the set without bound).
const MAX_REPORTED_DAMAGE: usize = 4096;

impl Error {
    /// For [`Error::Corrupt`] and [`Error::WrongFileType`]: whether this is the first report of
    /// damage at its file and position (recorded now), so that damage (or a refused file) is
    /// logged once where it is first met, not again by every request or rescan that runs into
    /// it. Always `true` for other errors.
    pub fn first_report(&self) -> bool {
        let (file, position) = match self {
            Error::Corrupt { file, position, .. } => (file, *position),
            // Positions are file offsets, so `u64::MAX` never clashes with a real one.
            Error::WrongFileType { file, .. } => (file, u64::MAX),
            _ => return true,
        };
        let mut guard = crate::sync::lock(&REPORTED_DAMAGE);
        let set = guard.get_or_insert_with(std::collections::HashSet::new);
        if set.len() >= MAX_REPORTED_DAMAGE {
            set.clear();
        }
        set.insert((file.clone(), position))
    }

    /// The level to log a refused request with: [`Error::log_level`], except damage that was
    /// reported before ([`Error::first_report`]), which is debug.
    pub fn refusal_log_level(&self) -> log::Level {
        if self.first_report() { self.log_level() } else { log::Level::Debug }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotFound(what) => write!(f, "not found: {what}"),
            Error::OffsetOutOfRange { requested, log_start, log_end } => write!(
                f,
                "offset {requested} is out of range [log start offset {log_start}, log end offset {log_end}]"
            ),
            Error::InvalidTopicName { name, reason } => {
                write!(f, "invalid topic name {name:?}: {reason}")
            }
            Error::AlreadyExists(what) => write!(f, "already exists: {what}"),
            Error::Corrupt { file, position, what } => {
                write!(f, "corrupt data in {} at position {position}: {what}", file.display())
            }
            Error::ReadOnly => write!(f, "read-only"),
            Error::NotPermitted(what) => write!(f, "not permitted: {what}"),
            Error::InvalidInput(what) => write!(f, "invalid input: {what}"),
            Error::RecordTooLarge { size, max } => {
                write!(f, "record batch of {size} bytes exceeds max.message.bytes {max}")
            }
            Error::Locked(path) => {
                write!(f, "{} is locked by another process", path.display())
            }
            Error::StaleHandle => write!(f, "stale file handle"),
            Error::Unsupported(what) => write!(f, "not supported: {what}"),
            Error::Usage(what) | Error::Mount(what) => f.write_str(what),
            Error::Io { file, op, source } => {
                write!(f, "{op} {}: {source}", file.display())
            }
            Error::WrongFileType { file, found, expected } => {
                write!(f, "refused {}: it is a {found}, not a {expected}", file.display())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_keep_their_os_errno() {
        let e = Error::io("/x", "write", io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(e.errno(), libc::ENOSPC);
        let e = Error::io("/x", "write", io::Error::other("no code"));
        assert_eq!(e.errno(), libc::EIO);
    }

    #[test]
    fn corruption_names_file_and_position() {
        let e = Error::corrupt("/d/t-0/00000000000000000000.log", 4096, "crc mismatch");
        let msg = e.to_string();
        assert!(msg.contains("00000000000000000000.log") && msg.contains("4096"), "{msg}");
        assert_eq!(e.errno(), libc::EIO);
        assert_eq!(e.log_level(), log::Level::Error);
    }
}
