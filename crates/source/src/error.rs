//! The one error type of topicfs, its exhaustive errno mapping and the log level of each kind.
//!
//! Pure decoding errors live in [`topicfs_format::DecodeError`] (they know a byte offset inside a
//! buffer, not a file); the storage layer wraps them into [`Error::Corrupt`] with the file and the
//! absolute position, so every message names where the damage is.

use std::fmt;
use std::io;
use std::path::PathBuf;

use topicfs_format::Offset;

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
    /// A record or batch over `max.message.bytes` (or over `segment.bytes`), or a line written
    /// to an append file that can never become a record within it: `what` was `size` bytes,
    /// over `max`, the value of `setting` (the one that refused it).
    RecordTooLarge { what: &'static str, size: usize, setting: &'static str, max: usize },
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
    /// A log dir of the mount failed (an I/O error in it, or it went away) and is offline:
    /// nothing in it is read or written until the next mount. `reason` is the first failure.
    LogDirOffline { dir: PathBuf, reason: String },
    /// An I/O error, with the file and the operation that failed.
    Io { file: PathBuf, op: &'static str, source: io::Error },
    /// A name in a data dir that is not the kind of file topicfs reads there (a FIFO, socket,
    /// device, dangling symlink or symlink loop where a regular file or a directory belongs):
    /// refused without opening it, so nothing blocks on it. See `storage::open`.
    WrongFileType { file: PathBuf, found: FileType, expected: FileType },
    /// A Kafka broker answered a request with an error code (`code` and Kafka's name for it,
    /// e.g. `NOT_LEADER_OR_FOLLOWER`), for a topic/partition when the error is about one.
    /// (Boxed strings keep `Error` small: it travels in every `Result`.)
    Kafka {
        broker: String,
        api: &'static str,
        code: i16,
        name: Box<str>,
        topic: Option<Box<str>>,
        partition: Option<i32>,
        message: Option<Box<str>>,
    },
    /// A broker could not be reached, or the connection to it failed or closed mid-request.
    BrokerUnreachable { broker: String, op: String, source: io::Error },
    /// A request's deadline (`request.timeout.ms`) passed before it was answered.
    Timeout { broker: String, what: String, after_ms: u64 },
    /// TLS or SASL authentication with a broker failed (wrong password, unknown CA, ...).
    AuthFailed { broker: String, reason: String },
    /// The broker does not offer an API (or any version of it this client speaks).
    UnsupportedApi { broker: String, api: &'static str, why: String },
    /// Bytes from a broker that are not a well-formed response.
    Protocol { broker: String, what: String },
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
            // Kafka's KAFKA_STORAGE_ERROR: the data is there, the disk holding it is not.
            Error::LogDirOffline { .. } => libc::EIO,
            // ENOSPC, EDQUOT, EIO ... pass through; an error without an OS code is EIO.
            Error::Io { source, .. } => match source.raw_os_error() {
                Some(code) if code > 0 => code,
                _ => libc::EIO,
            },
            // The bytes behind the name cannot be read as what they should be: like damage,
            // EIO (not ENOTDIR/ELOOP, which would describe the mount's own path, not the file
            // in the data dir behind it).
            Error::WrongFileType { .. } => libc::EIO,
            Error::Kafka { code, .. } => kafka_errno(*code),
            Error::BrokerUnreachable { .. } => libc::EIO,
            Error::Timeout { .. } => libc::ETIMEDOUT,
            Error::AuthFailed { .. } => libc::EACCES,
            Error::UnsupportedApi { .. } => libc::EOPNOTSUPP,
            Error::Protocol { .. } => libc::EIO,
        }
    }

    /// Whether the data's source could not be reached, or did not answer, within its deadline
    /// (a broker down or silent): asking it again at once would only wait out another
    /// deadline, so callers that retry to get past a race (retention) give up instead.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::BrokerUnreachable { .. } | Error::Timeout { .. })
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
            Error::Kafka { code, .. } => match kafka_errno(*code) {
                libc::ENOENT => log::Level::Debug,
                libc::EIO => log::Level::Error,
                _ => log::Level::Info,
            },
            Error::UnsupportedApi { .. } => log::Level::Info,
            Error::AuthFailed { .. } => log::Level::Warn,
            Error::Corrupt { .. }
            | Error::LogDirOffline { .. }
            | Error::Io { .. }
            | Error::Mount(_)
            | Error::BrokerUnreachable { .. }
            | Error::Timeout { .. }
            | Error::Protocol { .. } => log::Level::Error,
        }
    }
}

/// The errno for a Kafka protocol error code (see Kafka's `Errors.java` for the numbers). Codes
/// not listed are failures of the cluster the caller cannot fix by changing the request: EIO.
pub fn kafka_errno(code: i16) -> i32 {
    match code {
        // OFFSET_OUT_OF_RANGE: like a local offset outside the log (the file does not exist).
        1 => libc::ENOENT,
        // UNKNOWN_TOPIC_OR_PARTITION, GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_ID.
        3 | 69 | 100 => libc::ENOENT,
        // MESSAGE_TOO_LARGE (the Java client's RecordTooLargeException), RECORD_LIST_TOO_LARGE
        // (a batch larger than a segment): the write is too big.
        10 | 18 => libc::EFBIG,
        // REQUEST_TIMED_OUT (the broker's own timeout, e.g. waiting for acks=all).
        7 => libc::ETIMEDOUT,
        // INVALID_TOPIC_EXCEPTION, INVALID_REQUIRED_ACKS, INVALID_PARTITIONS,
        // INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_RECORD,
        // POLICY_VIOLATION.
        17 | 21 | 37 | 38 | 39 | 40 | 87 | 44 => libc::EINVAL,
        // TOPIC/GROUP/CLUSTER/TRANSACTIONAL_ID authorization, SASL authentication failed,
        // DELEGATION_TOKEN_AUTH_DISABLED..., ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM.
        29 | 30 | 31 | 53 | 58 | 33 | 34 => libc::EACCES,
        // TOPIC_ALREADY_EXISTS.
        36 => libc::EEXIST,
        // ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, NON_EMPTY_GROUP: the group
        // is in use by live members.
        22 | 25 | 27 | 68 => libc::EBUSY,
        // UNSUPPORTED_VERSION, UNSUPPORTED_FOR_MESSAGE_FORMAT.
        35 | 43 => libc::EOPNOTSUPP,
        _ => libc::EIO,
    }
}

/// Damage already reported, as (file, position): see [`Error::first_report`].
static REPORTED_DAMAGE: std::sync::Mutex<Option<std::collections::HashSet<(PathBuf, u64)>>> =
    std::sync::Mutex::new(None);

/// Entries [`REPORTED_DAMAGE`] holds before it starts over (a damaged partition read in a loop
/// then logs again now and then rather than growing the set without bound).
const MAX_REPORTED_DAMAGE: usize = 4096;

impl Error {
    /// For [`Error::Corrupt`], [`Error::WrongFileType`] and [`Error::LogDirOffline`]: whether
    /// this is the first report of damage at its file and position, or of its dir being
    /// offline (recorded now), so that damage (a refused file, an offline dir) is logged once
    /// where it is first met, not again by every request or rescan that runs into it (an
    /// offline dir's requests would otherwise push everything else out of `MNT/@log`). Always
    /// `true` for other errors.
    pub fn first_report(&self) -> bool {
        let (file, position) = match self {
            Error::Corrupt { file, position, .. } => (file, *position),
            // Positions are file offsets, so `u64::MAX` and `u64::MAX - 1` never clash with a
            // real one.
            Error::WrongFileType { file, .. } => (file, u64::MAX),
            Error::LogDirOffline { dir, .. } => (dir, u64::MAX - 1),
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
            Error::RecordTooLarge { what, size, setting, max } => {
                write!(f, "{what} of {size} bytes exceeds {setting} {max}")
            }
            Error::Locked(path) => {
                write!(f, "{} is locked by another process", path.display())
            }
            Error::StaleHandle => write!(f, "stale file handle"),
            Error::Unsupported(what) => write!(f, "not supported: {what}"),
            Error::Usage(what) | Error::Mount(what) => f.write_str(what),
            Error::LogDirOffline { dir, reason } => {
                write!(f, "log dir {} is offline ({reason})", dir.display())
            }
            Error::Io { file, op, source } => {
                write!(f, "{op} {}: {source}", file.display())
            }
            Error::WrongFileType { file, found, expected } => {
                write!(f, "refused {}: it is a {found}, not a {expected}", file.display())
            }
            Error::Kafka { broker, api, code, name, topic, partition, message } => {
                write!(f, "{api} to broker {broker}")?;
                match (topic.as_deref(), partition) {
                    (Some(t), Some(p)) => write!(f, " for {t}/{p}")?,
                    (Some(t), None) => write!(f, " for {t}")?,
                    _ => {}
                }
                write!(f, ": {name} ({code})")?;
                if let Some(m) = message.as_deref().filter(|m| !m.is_empty()) {
                    write!(f, ": {m}")?;
                }
                Ok(())
            }
            Error::BrokerUnreachable { broker, op, source } => {
                write!(f, "broker {broker}: {op}: {source}")
            }
            Error::Timeout { broker, what, after_ms } => {
                write!(
                    f,
                    "broker {broker}: {what}: no answer within request.timeout.ms ({after_ms} ms)"
                )
            }
            Error::AuthFailed { broker, reason } => {
                write!(f, "broker {broker}: authentication failed: {reason}")
            }
            Error::UnsupportedApi { broker, api, why } => {
                write!(f, "broker {broker} does not support {api}: {why}")
            }
            Error::Protocol { broker, what } => {
                write!(f, "broker {broker}: malformed response: {what}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::BrokerUnreachable { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offline_dirs_refusals_are_logged_at_error_once_per_dir_then_at_debug() {
        let offline =
            |dir: &str| Error::LogDirOffline { dir: PathBuf::from(dir), reason: "EIO".into() };
        let (a, b) = ("/tmp/offline-test-a", "/tmp/offline-test-b");
        assert_eq!(offline(a).refusal_log_level(), log::Level::Error);
        assert_eq!(offline(a).refusal_log_level(), log::Level::Debug);
        assert_eq!(offline(b).refusal_log_level(), log::Level::Error);
        assert_eq!(offline(a).errno(), libc::EIO);
    }

    #[test]
    fn io_errors_keep_their_os_errno() {
        let e = Error::io("/x", "write", io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(e.errno(), libc::ENOSPC);
        let e = Error::io("/x", "write", io::Error::other("no code"));
        assert_eq!(e.errno(), libc::EIO);
    }

    #[test]
    fn cluster_errors_map_to_the_local_errnos() {
        let kafka = |code: i16| Error::Kafka {
            broker: "127.0.0.1:9092".into(),
            api: "Produce",
            code,
            name: "X".into(),
            topic: Some("t".into()),
            partition: Some(0),
            message: None,
        };
        assert_eq!(kafka(3).errno(), libc::ENOENT);
        assert_eq!(kafka(10).errno(), libc::EFBIG);
        assert_eq!(kafka(18).errno(), libc::EFBIG);
        assert_eq!(kafka(29).errno(), libc::EACCES);
        assert_eq!(kafka(36).errno(), libc::EEXIST);
        assert_eq!(kafka(6).errno(), libc::EIO);
        let msg = kafka(10).to_string();
        assert!(
            msg.contains("127.0.0.1:9092") && msg.contains("t/0") && msg.contains("(10)"),
            "{msg}"
        );
        let t = Error::Timeout { broker: "b:1".into(), what: "Fetch".into(), after_ms: 5 };
        assert_eq!(t.errno(), libc::ETIMEDOUT);
        let u = Error::BrokerUnreachable {
            broker: "b:1".into(),
            op: "connect".into(),
            source: io::Error::from(io::ErrorKind::ConnectionRefused),
        };
        assert_eq!(u.errno(), libc::EIO);
        assert_eq!(
            Error::AuthFailed { broker: "b:1".into(), reason: "x".into() }.errno(),
            libc::EACCES
        );
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
