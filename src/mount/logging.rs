//! The daemon's logging: `RUST_LOG` filtering, to stderr, syslog or a log file, and a copy of
//! every warning and error in the ring `MNT/@log` shows ([`RecentLog`]).
//!
//! Where a mount logs ([`LogTarget`]):
//!
//! - `--log-file PATH` (`-o log_file=PATH`): that file, in the foreground too;
//! - else with `-f`: stderr;
//! - else (the daemon): syslog (identifier `topicfs`, facility daemon) when its socket accepts
//!   a connection, otherwise [`default_log_file`] (a container without syslog). The background
//!   parent decides this and opens the file before it starts the daemon child, so a file that
//!   cannot be opened fails the mount on the user's terminal; a default file is passed to the
//!   child as `--log-file`, so its command line (which `topicfs unmount` reads) names it.
//!
//! A log file is appended to, one line per record with its time (UTC, milliseconds) and level;
//! when it reaches [`LOG_FILE_MAX_BYTES`] it is renamed `<name>.1` (replacing the previous one)
//! and a new one is started, so the two take at most about twice that.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::recent_log::{DEFAULT_CAPACITY, RecentLog};

/// The log filter when `RUST_LOG` is unset: our messages from `info` up, fuser's errors only
/// (fuser 0.18 warns "Failed to umount filesystem" after every `fusermount3 -u`, when its own
/// second unmount finds nothing left to unmount).
pub const DEFAULT_LOG_FILTER: &str = "info,fuser=error";

/// The sockets a syslog daemon listens on, in the order they are tried (those of the `syslog`
/// crate).
pub const SYSLOG_SOCKETS: [&str; 3] = ["/dev/log", "/var/run/syslog", "/var/run/log"];

/// A log file past this size is renamed `<name>.1` and a new one started.
pub const LOG_FILE_MAX_BYTES: u64 = 10 << 20;

/// How `syslog` is named in messages.
const SYSLOG: &str = "syslog (identifier topicfs)";

/// Where a mount's log goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogTarget {
    Stderr,
    Syslog,
    File(PathBuf),
}

impl LogTarget {
    /// How messages name it: the file's path, `syslog (identifier topicfs)` or `stderr`.
    pub fn describe(&self) -> String {
        match self {
            LogTarget::Stderr => "stderr".to_string(),
            LogTarget::Syslog => SYSLOG.to_string(),
            LogTarget::File(path) => path.display().to_string(),
        }
    }
}

/// How `topicfs unmount` and other messages name the log of a mount whose command line says
/// `foreground` and `log_file`: the file, the terminal of a foreground mount, or syslog (a
/// daemon without syslog was given its default file as `--log-file`).
pub fn described_log(foreground: bool, log_file: Option<&Path>) -> String {
    match (log_file, foreground) {
        (Some(path), _) => path.display().to_string(),
        (None, true) => "the stderr of its `topicfs mount -f`".to_string(),
        (None, false) => SYSLOG.to_string(),
    }
}

/// Whether a syslog daemon accepts connections on one of `sockets` (datagram, as syslog
/// listens, or stream).
pub fn syslog_accepts(sockets: &[&Path]) -> bool {
    use std::os::unix::net::{UnixDatagram, UnixStream};
    sockets.iter().any(|path| {
        UnixDatagram::unbound().and_then(|s| s.connect(path)).is_ok()
            || UnixStream::connect(path).is_ok()
    })
}

/// Where a background mount's daemon logs: `log_file` if given, else syslog when one of
/// `sockets` accepts, else [`default_log_file`] (`home` and `state_home` are `$HOME` and
/// `$XDG_STATE_HOME`; `root`: running as root).
pub fn daemon_target(
    log_file: Option<&Path>,
    mountpoint: &Path,
    sockets: &[&Path],
    root: bool,
    state_home: Option<PathBuf>,
    home: Option<PathBuf>,
) -> Result<LogTarget> {
    if let Some(path) = log_file {
        return Ok(LogTarget::File(path.to_path_buf()));
    }
    if syslog_accepts(sockets) {
        return Ok(LogTarget::Syslog);
    }
    default_log_file(mountpoint, root, state_home, home).map(LogTarget::File)
}

/// The log file of a daemon without syslog and without `--log-file`:
/// `/var/log/topicfs/<M>.log` as root, else `$XDG_STATE_HOME/topicfs/<M>.log` (by default
/// `~/.local/state/topicfs/<M>.log`), where `<M>` is the mountpoint escaped as
/// `systemd-escape --path` does (`/mnt/kafka` → `mnt-kafka`).
pub fn default_log_file(
    mountpoint: &Path,
    root: bool,
    state_home: Option<PathBuf>,
    home: Option<PathBuf>,
) -> Result<PathBuf> {
    let dir = if root {
        PathBuf::from("/var/log/topicfs")
    } else {
        let state = state_home
            .filter(|p| p.is_absolute())
            .or_else(|| home.filter(|p| p.is_absolute()).map(|h| h.join(".local/state")))
            .ok_or_else(|| {
                Error::Mount(
                    "no syslog, and neither $XDG_STATE_HOME nor $HOME tells where the daemon's \
                     log file goes: give one with --log-file"
                        .into(),
                )
            })?;
        state.join("topicfs")
    };
    Ok(dir.join(format!("{}.log", escape_path(mountpoint))))
}

/// `path` escaped as `systemd-escape --path` does: slashes at either end dropped, the others
/// `-`, bytes other than ASCII letters, digits, `:`, `_` and `.` (and a leading `.`) as
/// `\xNN`; `/` is `-`.
fn escape_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let parts: Vec<&[u8]> = bytes.split(|&b| b == b'/').filter(|p| !p.is_empty()).collect();
    if parts.is_empty() {
        return "-".to_string();
    }
    let mut out = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push('-');
        }
        for (j, &b) in part.iter().enumerate() {
            let plain = b.is_ascii_alphanumeric() || b == b':' || b == b'_' || b == b'.';
            if plain && !(i == 0 && j == 0 && b == b'.') {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("\\x{b:02x}"));
            }
        }
    }
    out
}

/// Opens the default log file `path` ([`default_log_file`]) for appending, creating it and its
/// directory (`/var/log/topicfs`, the XDG state dir).
pub fn open_default_log_file(path: &Path) -> Result<RotatingFile> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::Mount(format!("cannot create the log directory {}: {e}", dir.display()))
        })?;
    }
    open_log_file(path)
}

/// Opens (creating it, not its directory: a mistyped `--log-file` fails instead of making
/// directories) the log file `path` for appending.
pub fn open_log_file(path: &Path) -> Result<RotatingFile> {
    RotatingFile::append_to(path, LOG_FILE_MAX_BYTES)
        .map_err(|e| Error::Mount(format!("cannot open the log file {}: {e}", path.display())))
}

/// `path` opened for appending, created if missing: the daemon's log, the user's own path
/// (never a file of a data dir, so not through `storage::open`, whose rule lists it).
fn append_log_file(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    options.open(path) // the daemon's log file
}

/// A log file renamed `<name>.1` once it reaches its maximum size, and started again.
pub struct RotatingFile {
    path: PathBuf,
    file: File,
    size: u64,
    max: u64,
}

impl RotatingFile {
    fn append_to(path: &Path, max: u64) -> std::io::Result<RotatingFile> {
        let file = append_log_file(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile { path: path.to_path_buf(), file, size, max })
    }

    /// `<name>.1`, replacing the previous one, and a new file; on failure the current file
    /// goes on growing (nowhere else to say so).
    fn rotate(&mut self) {
        let mut old = self.path.clone().into_os_string();
        old.push(".1");
        if std::fs::rename(&self.path, &old).is_err() {
            return;
        }
        if let Ok(file) = append_log_file(&self.path) {
            self.file = file;
            self.size = 0;
        }
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Checked before a record (env_logger writes each one whole), so a record is never
        // split between the two files.
        if self.size >= self.max {
            self.rotate();
        }
        let n = self.file.write(buf)?;
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Sets up logging to `target` (`RUST_LOG` syntax, default [`DEFAULT_LOG_FILTER`]), every
/// warning and error also kept in the returned ring. A syslog that no longer accepts (it did
/// when the parent looked) is replaced by [`default_log_file`]. Fails only when a log file
/// cannot be opened.
pub fn init_logging(target: LogTarget, mountpoint: &Path) -> Result<Arc<RecentLog>> {
    let (target, output) = match target {
        LogTarget::Syslog => match syslog_logger() {
            Some(logger) => (LogTarget::Syslog, Output::Syslog(logger)),
            None => {
                let path = default_log_file(
                    mountpoint,
                    nix::unistd::geteuid().is_root(),
                    std::env::var_os("XDG_STATE_HOME").map(PathBuf::from),
                    std::env::var_os("HOME").map(PathBuf::from),
                )?;
                let file = open_default_log_file(&path)?;
                (LogTarget::File(path), Output::Env(file_builder(file).build()))
            }
        },
        LogTarget::File(path) => {
            let file = open_log_file(&path)?;
            (LogTarget::File(path), Output::Env(file_builder(file).build()))
        }
        LogTarget::Stderr => (LogTarget::Stderr, Output::Env(builder().build())),
    };
    let recent = Arc::new(RecentLog::new(DEFAULT_CAPACITY, target.describe()));
    let logger = TeeLogger { output, recent: Arc::clone(&recent) };
    let max = match &logger.output {
        Output::Env(l) => l.filter(),
        Output::Syslog(l) => l.filter.filter(),
    };
    if log::set_boxed_logger(Box::new(logger)).is_ok() {
        log::set_max_level(max);
    }
    Ok(recent)
}

/// The `RUST_LOG` filter and format (to stderr).
fn builder() -> env_logger::Builder {
    let env = || env_logger::Env::default().default_filter_or(DEFAULT_LOG_FILTER);
    let mut builder = env_logger::Builder::from_env(env());
    // ureq logs the HTTP wire at trace, the registry's Authorization header included: never
    // more than debug for it (which logs only an allow-list of headers).
    if env_logger::Builder::from_env(env()).build().filter() == log::LevelFilter::Trace {
        builder.filter_module("ureq", log::LevelFilter::Debug);
        builder.filter_module("ureq_proto", log::LevelFilter::Debug);
    }
    builder
}

/// [`builder`] writing to `file`, with millisecond timestamps and no colours.
fn file_builder(file: RotatingFile) -> env_logger::Builder {
    let mut builder = builder();
    builder
        .target(env_logger::Target::Pipe(Box::new(file)))
        .write_style(env_logger::WriteStyle::Never)
        .format_timestamp_millis();
    builder
}

fn syslog_logger() -> Option<SyslogLogger> {
    let formatter = syslog::Formatter3164 {
        facility: syslog::Facility::LOG_DAEMON,
        hostname: None,
        process: "topicfs".into(),
        pid: std::process::id(),
    };
    let writer = syslog::unix(formatter).ok()?;
    Some(SyslogLogger { filter: builder().build(), syslog: syslog::BasicLogger::new(writer) })
}

enum Output {
    /// Stderr or a log file (env_logger filters and formats).
    Env(env_logger::Logger),
    Syslog(SyslogLogger),
}

/// Where the filesystem adapter logs each refused request (at info for refused input, such as
/// a `config` value that is not valid): `MNT/@log` shows these too, so the reason for a
/// failed write is there beside the warnings and errors.
const REFUSALS_TARGET: &str = "topicfs_fs::fuse";

/// The output, and a copy of each warning and error, and of each refused request, it takes in
/// the ring.
struct TeeLogger {
    output: Output,
    recent: Arc<RecentLog>,
}

impl log::Log for TeeLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        match &self.output {
            Output::Env(l) => l.enabled(metadata),
            Output::Syslog(l) => l.filter.enabled(metadata),
        }
    }

    fn log(&self, record: &log::Record<'_>) {
        let taken = match &self.output {
            Output::Env(l) => l.matches(record),
            Output::Syslog(l) => l.filter.matches(record),
        };
        if !taken {
            return;
        }
        if record.level() <= log::Level::Warn
            || (record.level() == log::Level::Info && record.target() == REFUSALS_TARGET)
        {
            let message = record.args().to_string();
            let now = std::time::SystemTime::now();
            self.recent.push(now, record.level(), record.target(), &message);
        }
        match &self.output {
            Output::Env(l) => l.log(record),
            Output::Syslog(l) => l.syslog.log(record),
        }
    }

    fn flush(&self) {
        match &self.output {
            Output::Env(l) => l.flush(),
            Output::Syslog(l) => l.syslog.flush(),
        }
    }
}

/// Syslog output with `RUST_LOG` filtering.
struct SyslogLogger {
    filter: env_logger::Logger,
    syslog: syslog::BasicLogger,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemon_without_syslog_logs_to_a_file_named_after_its_mountpoint() {
        use std::os::unix::net::UnixDatagram;
        let tmp = tempfile::tempdir().unwrap();
        let socket = tmp.path().join("log");
        let mnt = Path::new("/mnt/kafka");
        let target = |sockets: &[&Path], root: bool| {
            daemon_target(None, mnt, sockets, root, None, Some("/home/u".into())).unwrap()
        };
        // No socket there: the default file.
        assert_eq!(
            target(&[&socket], true),
            LogTarget::File("/var/log/topicfs/mnt-kafka.log".into())
        );
        assert_eq!(
            target(&[&socket], false),
            LogTarget::File("/home/u/.local/state/topicfs/mnt-kafka.log".into())
        );
        let state = daemon_target(None, mnt, &[&socket], false, Some("/st".into()), None).unwrap();
        assert_eq!(state, LogTarget::File("/st/topicfs/mnt-kafka.log".into()));
        assert!(daemon_target(None, mnt, &[&socket], false, None, None).is_err());
        // A syslog listening there.
        let _listening = UnixDatagram::bind(&socket).unwrap();
        assert_eq!(target(&[&socket], true), LogTarget::Syslog);
        // --log-file wins over both.
        let given = daemon_target(Some(Path::new("/l/x.log")), mnt, &[&socket], true, None, None);
        assert_eq!(given.unwrap(), LogTarget::File("/l/x.log".into()));
    }

    #[test]
    fn mountpoints_are_escaped_as_systemd_escape_path_does() {
        assert_eq!(escape_path(Path::new("/")), "-");
        assert_eq!(escape_path(Path::new("/mnt/kafka/")), "mnt-kafka");
        assert_eq!(escape_path(Path::new("/mnt/a-b c")), "mnt-a\\x2db\\x20c");
        assert_eq!(escape_path(Path::new("/.hidden/x.y")), "\\x2ehidden-x.y");
    }

    /// A `--log-file` in a directory that does not exist fails (a typo makes no directories);
    /// the default file's directory is created.
    #[test]
    fn only_the_default_log_file_gets_its_directory_created() {
        let tmp = tempfile::tempdir().unwrap();
        let given = tmp.path().join("typo/m.log");
        let e = open_log_file(&given).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("cannot open the log file"), "{e}");
        assert!(!tmp.path().join("typo").exists());
        let default = tmp.path().join("state/topicfs/m.log");
        open_default_log_file(&default).unwrap();
        assert!(default.exists());
    }

    #[test]
    fn a_log_file_past_its_maximum_is_renamed_dot_1_and_started_again() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("sub/m.log");
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        let mut file = RotatingFile::append_to(&path, 10).unwrap();
        file.write_all(b"first 8\n").unwrap();
        file.write_all(b"second\n").unwrap();
        file.write_all(b"third\n").unwrap();
        let old = tmp.path().join("sub/m.log.1");
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "first 8\nsecond\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "third\n");
        // Reopened, it appends and knows its size.
        drop(file);
        let mut file = RotatingFile::append_to(&path, 10).unwrap();
        file.write_all(b"4444\n").unwrap();
        file.write_all(b"5\n").unwrap();
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "third\n4444\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "5\n");
    }
}
