//! Mounting and the daemon lifecycle: checks, the FUSE session, background mode, signals,
//! unmounting and the clean shutdown.
//!
//! # Background mode
//!
//! `topicfs mount` without `-f` re-executes itself as a daemon child (the same binary and
//! arguments, plus a hidden flag) before anything else happens, so no thread exists in the
//! process that forks, and no `unsafe` `fork()` is needed. The child starts a new session
//! (`setsid`), does every check, opens the data dir, mounts, and then reports one line on its
//! stdout, a pipe to the parent: `ready`, or `error: <message>`. The parent exits 0 on `ready`
//! and 1 with the message otherwise (also when the child dies without a word), so a script can
//! rely on `topicfs mount D M && ls M`.
//!
//! # Ending
//!
//! The daemon ends when the mount goes away, whichever way:
//!
//! - `umount M` or `fusermount3 -u M`: the kernel closes the session;
//! - SIGINT, SIGTERM or SIGHUP: a dedicated thread (the signals are blocked in every other
//!   thread) unmounts. If the mount is busy (a `tail -f` holds a file open), it is detached
//!   lazily, and if the session has not ended [`BUSY_GRACE`] later the FUSE connection is
//!   aborted through fusectl (or, without fusectl, the daemon shuts down and exits, which ends
//!   the connection too), so open files fail with `ENOTCONN` instead of keeping the daemon
//!   alive.
//!
//! While mounted read-write, retention runs every `--retention-check-interval-ms` (Kafka's
//! `log.retention.check.interval.ms`, default [`RETENTION_CHECK_INTERVAL`]), deleting segments
//! past `retention.ms` / `retention.bytes`.
//!
//! Then [`TopicFs::shutdown`] appends the pending partial lines of open append files and shuts
//! the log dir down cleanly (indexes trimmed, checkpoints and the clean-shutdown marker
//! written). The exit status is 0 when that succeeded.
//!
//! # Layout
//!
//! - here: the mount request and its `-o` options ([`FuseOption`], [`Access`]), the backend
//!   (`open_backend`, the one place it is chosen), the checks and the mount sequence, and
//!   `topicfs unmount`;
//! - `daemon`: background mode, the parent waiting for the daemon child's status line;
//! - `session`: the fuser configuration, the `mount(2)` of a `fuse.topicfs` file system, the
//!   unmounter;
//! - `signals`: the termination signals and the signal thread that unmounts;
//! - `retention`: the retention thread of a read-write mount;
//! - `mountinfo`: `/proc/self/mountinfo` lookups;
//! - `logging`: stderr or syslog.

mod daemon;
mod logging;
mod memory;
mod mountinfo;
mod retention;
mod session;
mod signals;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::SigSet;

pub use self::daemon::DAEMON_CHILD_FLAG;
use self::daemon::{Reporter, run_parent};
pub use self::logging::{DEFAULT_LOG_FILTER, init_logging};
use self::mountinfo::fuse_connection;
pub use self::mountinfo::mount_entry;
pub use self::retention::RETENTION_CHECK_INTERVAL;
use self::retention::Retention;
use self::session::{DEV_FUSE, session_config, start_session};
pub use self::signals::BUSY_GRACE;
use self::signals::{Stopper, termination_signals};
use crate::error::{Error, Result};
use crate::fs::{FsOptions, TopicFs};
use crate::fuse::FuseAdapter;
use crate::source::TopicSource;
use crate::storage::log_dir::LogDir;
use crate::storage::{LogConfig, SegmentMode};

/// One `-o` option, as sshfs and mount-s3 users know them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FuseOption {
    /// `allow_other`: every user may access the mount (non-root mounters need
    /// `user_allow_other` in `/etc/fuse.conf`).
    AllowOther,
    /// `allow_root`: root may access it too.
    AllowRoot,
    /// `default_permissions`: the kernel checks mode bits (always on; accepted for habit).
    DefaultPermissions,
    /// `auto_unmount`: fusermount3 unmounts if the daemon dies (needs `allow_other` or
    /// `allow_root`).
    AutoUnmount,
    /// `ro`: same as `--read-only`.
    ReadOnly,
    /// `rw`: the default.
    ReadWrite,
    /// `fsname=NAME`: the source shown in `/proc/mounts` (default: the data dir).
    FsName(String),
    /// `subtype=NAME`: shown as `fuse.NAME` (default: `topicfs`).
    Subtype(String),
    /// `no_passthrough`: sealed segment files are read through the page cache even where the
    /// kernel could read them itself (FUSE passthrough, see [`FuseAdapter`]).
    NoPassthrough,
    /// `show_internal`: list Kafka's internal topics (`__consumer_offsets`, ...) in the root.
    ShowInternal,
    /// `auto_offset_reset=earliest|latest`: where a consumer group without a usable committed
    /// offset starts reading (`groups/<group>/<p>/next`); default `earliest`.
    AutoOffsetReset(crate::view::groups::ResetPolicy),
    /// `auto_commit`: closing a group's `next` after reading all of it commits its end
    /// (at-most-once, as `kcat -G`); off by default.
    AutoCommit,
    /// A mount flag passed to the kernel: `nodev`, `nosuid`, `noexec`, `noatime`, `dev`,
    /// `suid`, `exec`, `atime`, `sync`, `async`, `dirsync`.
    Flag(&'static str),
    /// `uid=USER`: the owner shown on every file (a name or a number; default: the mounting
    /// user). See [`Access`].
    Uid(u32),
    /// `gid=GROUP`: the group shown on every file (a name or a number; default: the mounting
    /// user's group).
    Gid(u32),
    /// `umask=MODE`: sets both `file_mode` to `0666 & !MODE` and `dir_mode` to `0777 & !MODE`
    /// (an explicit `file_mode`/`dir_mode` wins, wherever it is given).
    Umask(u16),
    /// `file_mode=MODE`: the permission bits of files (default `0664`).
    FileMode(u16),
    /// `dir_mode=MODE`: the permission bits of directories (default `0755`).
    DirMode(u16),
    /// `memory_budget=SIZE`: same as `--memory-budget` (topicfs's, not the kernel's).
    MemoryBudget(usize),
    /// `render_threads=N`: same as `--render-threads`.
    RenderThreads(usize),
}

/// Kernel mount flags accepted by `-o`.
const FLAGS: &[&str] = &[
    "nodev", "nosuid", "noexec", "noatime", "dev", "suid", "exec", "atime", "sync", "async",
    "dirsync",
];

impl FromStr for FuseOption {
    type Err = Error;

    fn from_str(s: &str) -> Result<FuseOption> {
        let option = match s {
            "allow_other" => FuseOption::AllowOther,
            "allow_root" => FuseOption::AllowRoot,
            "default_permissions" => FuseOption::DefaultPermissions,
            "auto_unmount" => FuseOption::AutoUnmount,
            "ro" => FuseOption::ReadOnly,
            "rw" => FuseOption::ReadWrite,
            "no_passthrough" => FuseOption::NoPassthrough,
            "show_internal" => FuseOption::ShowInternal,
            "auto_commit" => FuseOption::AutoCommit,
            _ => {
                if let Some(policy) = s.strip_prefix("auto_offset_reset=") {
                    FuseOption::AutoOffsetReset(
                        policy.parse().map_err(|e| Error::Usage(format!("{e}")))?,
                    )
                } else if let Some(name) = s.strip_prefix("fsname=") {
                    FuseOption::FsName(name.to_string())
                } else if let Some(name) = s.strip_prefix("subtype=") {
                    FuseOption::Subtype(name.to_string())
                } else if let Some(flag) = FLAGS.iter().find(|f| **f == s) {
                    FuseOption::Flag(flag)
                } else if let Some(user) = s.strip_prefix("uid=") {
                    FuseOption::Uid(parse_user(user)?)
                } else if let Some(group) = s.strip_prefix("gid=") {
                    FuseOption::Gid(parse_group(group)?)
                } else if let Some(mode) = s.strip_prefix("umask=") {
                    FuseOption::Umask(parse_mode("umask", mode)?)
                } else if let Some(mode) = s.strip_prefix("file_mode=") {
                    FuseOption::FileMode(parse_mode("file_mode", mode)?)
                } else if let Some(mode) = s.strip_prefix("dir_mode=") {
                    FuseOption::DirMode(parse_mode("dir_mode", mode)?)
                } else if let Some(size) = s.strip_prefix("memory_budget=") {
                    FuseOption::MemoryBudget(parse_size(size)?)
                } else if let Some(n) = s.strip_prefix("render_threads=") {
                    FuseOption::RenderThreads(parse_render_threads(n)?)
                } else {
                    return Err(Error::Usage(format!(
                        "unknown mount option {s:?} (known: allow_other, allow_root, \
                         default_permissions, auto_unmount, ro, rw, no_passthrough, \
                         show_internal, auto_offset_reset=earliest|latest, auto_commit, \
                         fsname=NAME, subtype=NAME, uid=USER, gid=GROUP, umask=MODE, \
                         file_mode=MODE, dir_mode=MODE, memory_budget=SIZE, render_threads=N, {})",
                        FLAGS.join(", ")
                    )));
                }
            }
        };
        Ok(option)
    }
}

/// `uid=USER`: a user name (looked up in the user database when the option is parsed) or a
/// number.
pub fn parse_user(user: &str) -> Result<u32> {
    if let Ok(uid) = user.parse::<u32>() {
        return Ok(uid);
    }
    match nix::unistd::User::from_name(user) {
        Ok(Some(found)) => Ok(found.uid.as_raw()),
        Ok(None) => Err(Error::Usage(format!("uid={user}: no such user"))),
        Err(err) => Err(Error::Usage(format!("uid={user}: cannot look the user up: {err}"))),
    }
}

/// `gid=GROUP`: a group name or a number.
pub fn parse_group(group: &str) -> Result<u32> {
    if let Ok(gid) = group.parse::<u32>() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(group) {
        Ok(Some(found)) => Ok(found.gid.as_raw()),
        Ok(None) => Err(Error::Usage(format!("gid={group}: no such group"))),
        Err(err) => Err(Error::Usage(format!("gid={group}: cannot look the group up: {err}"))),
    }
}

/// An octal mode of permission bits only (`0644`, `644`, `0o644`): set-id and sticky bits
/// mean nothing on a topicfs mount and are refused.
pub fn parse_mode(name: &str, mode: &str) -> Result<u16> {
    let digits = mode.strip_prefix("0o").unwrap_or(mode);
    match u16::from_str_radix(digits, 8) {
        Ok(bits) if !digits.is_empty() && bits <= 0o777 => Ok(bits),
        _ => Err(Error::Usage(format!(
            "{name}={mode}: expected an octal mode from 000 to 777, such as 0640"
        ))),
    }
}

/// Who may do what on the mount: the owner and group shown on every file, and the permission
/// bits the kernel checks (`default_permissions` is always on).
///
/// A file shows `file_mode` reduced to what the file allows: the read bits for streams, info,
/// segment and inspection files (read-only content), the write bits for `append` and
/// `append.json` (write-only). A directory shows `dir_mode`, without its write bits where
/// nothing can be created (everything but the root and topic directories of a read-write
/// mount). The defaults, `0664` and `0755`, give streams `0444`, appends `0220`, the root and
/// topic directories `0755` and the others `0555`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// `None`: the mounting user.
    pub uid: Option<u32>,
    /// `None`: the mounting user's group.
    pub gid: Option<u32>,
    pub file_mode: u16,
    pub dir_mode: u16,
}

pub use crate::fs::{DEFAULT_DIR_MODE, DEFAULT_FILE_MODE};

impl Default for Access {
    fn default() -> Access {
        Access { uid: None, gid: None, file_mode: DEFAULT_FILE_MODE, dir_mode: DEFAULT_DIR_MODE }
    }
}

impl Access {
    /// The access the options say, in order (a later `uid=` wins over an earlier one); an
    /// explicit `file_mode`/`dir_mode` wins over `umask` wherever either is given.
    pub fn from_options<'a>(options: impl IntoIterator<Item = &'a FuseOption>) -> Access {
        let mut access = Access::default();
        let (mut file_mode, mut dir_mode, mut umask) = (None, None, None);
        for option in options {
            match option {
                FuseOption::Uid(uid) => access.uid = Some(*uid),
                FuseOption::Gid(gid) => access.gid = Some(*gid),
                FuseOption::Umask(mask) => umask = Some(*mask),
                FuseOption::FileMode(mode) => file_mode = Some(*mode),
                FuseOption::DirMode(mode) => dir_mode = Some(*mode),
                _ => {}
            }
        }
        if let Some(mask) = umask {
            access.file_mode = 0o666 & !mask;
            access.dir_mode = 0o777 & !mask;
        }
        access.file_mode = file_mode.unwrap_or(access.file_mode);
        access.dir_mode = dir_mode.unwrap_or(access.dir_mode);
        access
    }
}

/// A size in bytes: a number, optionally followed by K, M or G (powers of 1024; `KiB`, `MB`
/// and the like are read the same way), e.g. `64M`, `1G`, `65536`.
pub fn parse_size(s: &str) -> Result<usize> {
    let text = s.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => {
            return Err(Error::Usage(format!(
                "{s:?}: not a size (a number, optionally with K, M or G)"
            )));
        }
    };
    let n: usize = number.parse().map_err(|_| {
        Error::Usage(format!("{s:?}: not a size (a number, optionally with K, M or G)"))
    })?;
    n.checked_mul(1 << shift).ok_or_else(|| Error::Usage(format!("{s:?}: too large")))
}

/// A number of render threads: 1 to [`crate::view::readahead::MAX_RENDER_THREADS`].
pub fn parse_render_threads(s: &str) -> Result<usize> {
    let max = crate::view::readahead::MAX_RENDER_THREADS;
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(Error::Usage(format!("render_threads={s:?}: expected a number from 1 to {max}"))),
    }
}

/// A cluster to mount: bootstrap servers and client settings.
#[derive(Clone, Debug)]
pub struct ClusterMount {
    pub bootstrap: Vec<crate::cluster::BrokerAddr>,
    pub config: crate::cluster::ClientConfig,
}

/// Everything `topicfs mount` was asked to do.
#[derive(Clone, Debug)]
pub struct MountRequest {
    /// `kafka://...` as the source: the cluster (then `data_dir` is that spec, not a path).
    pub cluster: Option<ClusterMount>,
    pub data_dir: PathBuf,
    pub mountpoint: PathBuf,
    /// `--read-only` or `-o ro`.
    pub read_only: bool,
    pub fuse_options: Vec<FuseOption>,
    pub log_config: LogConfig,
    /// Partitions of topics created with `mkdir`.
    pub partitions: u32,
    /// FUSE worker threads.
    pub threads: usize,
    /// Bytes of rendered data held beyond a request, mount-wide (read-ahead windows and kept
    /// renderings; see [`crate::view::budget`]).
    pub memory_budget: usize,
    /// Read-ahead render workers.
    pub render_threads: usize,
    /// Which records of transactions streams show.
    pub isolation: crate::view::txn::Isolation,
    /// `--sizing-budget`: log bytes a stream's stat/open may render (the log dir's
    /// [`PartitionSource::sizing_budget`](crate::source::PartitionSource::sizing_budget)).
    /// `None`: the backend's default ([`crate::storage::LOCAL_SIZING_BUDGET`] for a log dir,
    /// [`crate::source::DEFAULT_SIZING_BUDGET`] for a cluster).
    pub sizing_budget: Option<u64>,
    /// `log.retention.check.interval.ms`: how often retention runs on a read-write mount.
    pub retention_check_interval: Duration,
    /// Owner, group and modes of the files.
    pub access: Access,
}

/// How the mount process runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `-f`: serve in this process, log to stderr.
    Foreground,
    /// Default: start a daemon child and exit once it reports.
    Background,
    /// The daemon child itself: serve, log to syslog, report to the parent on stdout.
    DaemonChild,
}

/// Runs `topicfs mount` in `mode`; the process's exit status.
///
/// `args` is the command line after the program name as `topicfs` understands it (for a mount
/// helper invocation: its translation, see [`crate::cli::helper_args`]); the background parent
/// starts the daemon child with it.
pub fn run(request: MountRequest, mode: Mode, args: &[OsString]) -> ExitCode {
    match mode {
        Mode::Background => run_parent(args),
        Mode::Foreground | Mode::DaemonChild => {
            let daemon = mode == Mode::DaemonChild;
            init_logging(daemon);
            let status = serve(&request, daemon);
            match status {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    if daemon {
                        log::error!("{err}");
                    } else {
                        eprintln!("topicfs: {err}");
                    }
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// Foreground and daemon child: check, mount, serve until unmounted, shut down.
fn serve(request: &MountRequest, daemon: bool) -> Result<()> {
    // Before any thread exists, so every thread inherits the mask and only the signal thread
    // receives them.
    let signals = termination_signals();
    signals
        .thread_block()
        .map_err(|e| Error::Mount(format!("cannot block termination signals: {e}")))?;
    let mut reporter = Reporter { daemon, reported: false };
    let served = mount_and_serve(request, signals, &mut reporter);
    if let Err(err) = &served {
        reporter.error(err);
    }
    served
}

/// What a mount serves: the one [`TopicSource`] of the tree, and the local work that goes with
/// it.
struct Backend {
    source: Arc<dyn TopicSource>,
    /// A writable log directory, whose retention the daemon runs (`--retention-check-interval-ms`);
    /// `None` for a read-only mount (a broker, or nobody, deletes its segments).
    retained: Option<Arc<LogDir>>,
    /// Consumer groups' committed offsets (`<topic>/groups/`).
    groups: Arc<dyn crate::source::GroupStore>,
}

/// Opens the backend of a mount: the one place where it is chosen. Everything above the
/// [`TopicSource`] (views, filesystem, FUSE) is the same for every backend; what exists only for
/// local files is asked for by capability ([`crate::source::PartitionSource::segment_files`]).
///
/// Two arms: a Kafka log directory (`data_dir`), read-write or read-only; or a live cluster
/// (`kafka://HOST:PORT,...`, [`crate::cluster::ClusterSource`]) over the Kafka protocol, with
/// `retained: None` (the brokers retain). The cluster's client is made here, in the process
/// that serves (after daemonizing: its connections and threads must not cross a fork), and
/// its first Metadata must answer within `request.timeout.ms` or the mount fails with the
/// bootstrap addresses and the reason.
fn open_backend(request: &MountRequest, data_dir: &Path) -> Result<Backend> {
    if let Some(cluster) = &request.cluster {
        let addrs: Vec<String> = cluster.bootstrap.iter().map(ToString::to_string).collect();
        let failed = |e: Error| {
            Error::Mount(format!("no bootstrap server answered ({}): {e}", addrs.join(",")))
        };
        let client =
            crate::cluster::Client::connect(cluster.bootstrap.clone(), cluster.config.clone())
                .map_err(failed)?;
        let client = Arc::new(client);
        let source = Arc::new(
            crate::cluster::ClusterSource::new(Arc::clone(&client), request.read_only)
                .with_sizing_budget(
                    request.sizing_budget.unwrap_or(crate::source::DEFAULT_SIZING_BUDGET),
                ),
        );
        let groups = Arc::new(crate::cluster::ClusterGroups::new(client));
        return Ok(Backend { source, retained: None, groups });
    }
    let log_config = request.log_config.clone();
    // `__consumer_offsets` keeps the broker's settings for it (no retention).
    let topic_configs = std::collections::HashMap::from([(
        crate::format::groups::CONSUMER_OFFSETS_TOPIC.to_string(),
        crate::storage::groups::offsets_topic_config(&log_config),
    )]);
    let mode = if request.read_only { SegmentMode::ReadOnly } else { SegmentMode::Writable };
    let log_dir = Arc::new(LogDir::open_with(data_dir, log_config, topic_configs, mode)?);
    let groups = Arc::new(crate::storage::groups::LocalGroupStore::new(Arc::clone(&log_dir)));
    log_dir.set_sizing_budget(request.sizing_budget.unwrap_or(crate::storage::LOCAL_SIZING_BUDGET));
    let source: Arc<dyn TopicSource> = Arc::clone(&log_dir) as Arc<dyn TopicSource>;
    let retained = (!request.read_only).then_some(log_dir);
    Ok(Backend { source, retained, groups })
}

fn mount_and_serve(request: &MountRequest, signals: SigSet, reporter: &mut Reporter) -> Result<()> {
    if reporter.daemon {
        // Leave the terminal's session: no SIGHUP or SIGINT from it. Fails only if already a
        // session leader, which is fine.
        let _ = nix::unistd::setsid();
    }
    let (data_dir, mountpoint) = check_paths(request)?;
    if reporter.daemon {
        // The daemon must not keep the directory it was started from busy.
        let _ = std::env::set_current_dir("/");
    }
    let log_config = &request.log_config;
    let Backend { source, groups, retained } = open_backend(request, &data_dir)?;
    let options = FsOptions {
        read_only: request.read_only,
        partitions_per_topic: request.partitions,
        max_line_bytes: log_config.max_message_bytes as usize,
        uid: request.access.uid.unwrap_or_else(|| nix::unistd::getuid().as_raw()),
        gid: request.access.gid.unwrap_or_else(|| nix::unistd::getgid().as_raw()),
        file_mode: request.access.file_mode,
        dir_mode: request.access.dir_mode,
    };
    let reset = request
        .fuse_options
        .iter()
        .rev()
        .find_map(|o| match o {
            FuseOption::AutoOffsetReset(policy) => Some(*policy),
            _ => None,
        })
        .unwrap_or_default();
    let fs = Arc::new(
        TopicFs::new(Arc::clone(&source), options)
            .with_isolation(request.isolation)
            .with_groups(groups, reset)
            .with_internal_topics(request.fuse_options.contains(&FuseOption::ShowInternal))
            .with_auto_commit(request.fuse_options.contains(&FuseOption::AutoCommit))
            .with_limits(request.memory_budget, request.render_threads)
            .with_memory_release(memory::return_freed_memory),
    );
    let config = session_config(request, &data_dir)?;
    let mut adapter = FuseAdapter::new(Arc::clone(&fs));
    if request.fuse_options.contains(&FuseOption::NoPassthrough) {
        adapter = adapter.without_passthrough();
    }
    let (session, mut unmounter) = match start_session(adapter, &mountpoint, &config) {
        Ok(started) => started,
        Err(err) => {
            let _ = source.shutdown();
            return Err(Error::Mount(format!(
                "cannot mount {} on {}: {err}",
                data_dir.display(),
                mountpoint.display()
            )));
        }
    };
    let connection = fuse_connection(&mountpoint);
    let (ended_tx, ended_rx) = mpsc::channel::<()>();
    let stopper = Stopper {
        unmounter: unmounter.clone(),
        mountpoint: mountpoint.clone(),
        connection,
        ended: ended_rx,
        fs: Arc::clone(&fs),
    };
    let spawned = std::thread::Builder::new()
        .name("topicfs-signals".into())
        .spawn(move || stopper.wait_and_unmount(signals));
    if let Err(err) = spawned {
        let _ = unmounter.unmount();
        drop(session);
        let _ = fs.shutdown();
        return Err(Error::Mount(format!("cannot start the signal thread: {err}")));
    }
    log::info!("mounted {} on {}", data_dir.display(), mountpoint.display());
    reporter.ready();
    let retention =
        retained.map(|log_dir| Retention::start(log_dir, request.retention_check_interval));
    let ran = session.run();
    let _ = ended_tx.send(());
    if let Some(retention) = retention {
        retention.stop();
    }
    if let Err(err) = ran {
        log::error!("FUSE session of {} ended with an error: {err}", mountpoint.display());
    }
    log::info!("{} unmounted; shutting down", mountpoint.display());
    fs.shutdown().map_err(|err| {
        Error::Mount(format!("clean shutdown of {} failed: {err}", data_dir.display()))
    })?;
    log::info!("shut down cleanly");
    Ok(())
}

/// Checks the data dir, the mountpoint and `/dev/fuse`; returns both paths made absolute.
fn check_paths(request: &MountRequest) -> Result<(PathBuf, PathBuf)> {
    let data_dir = if request.cluster.is_some() {
        // The bootstrap spec, not a path: only shown as the mount's source (fsname).
        request.data_dir.clone()
    } else {
        check_data_dir(request)?
    };
    let mountpoint = check_mountpoint(request)?;
    Ok((data_dir, mountpoint))
}

fn check_data_dir(request: &MountRequest) -> Result<PathBuf> {
    let data_dir = request
        .data_dir
        .canonicalize()
        .map_err(|e| Error::Mount(format!("data dir {}: {e}", request.data_dir.display())))?;
    if !data_dir.is_dir() {
        return Err(Error::Mount(format!("data dir {} is not a directory", data_dir.display())));
    }
    let mountpoint =
        request.mountpoint.canonicalize().unwrap_or_else(|_| request.mountpoint.clone());
    if data_dir.starts_with(&mountpoint) {
        return Err(Error::Mount(format!(
            "data dir {} is inside the mountpoint {}",
            data_dir.display(),
            mountpoint.display()
        )));
    }
    Ok(data_dir)
}

fn check_mountpoint(request: &MountRequest) -> Result<PathBuf> {
    let mountpoint = request.mountpoint.canonicalize().map_err(|e| {
        let hint = if e.raw_os_error() == Some(libc::ENOTCONN) {
            format!(" (a dead FUSE mount: fusermount3 -u {})", request.mountpoint.display())
        } else {
            String::new()
        };
        Error::Mount(format!("mountpoint {}: {e}{hint}", request.mountpoint.display()))
    })?;
    if !mountpoint.is_dir() {
        return Err(Error::Mount(format!(
            "mountpoint {} is not a directory",
            mountpoint.display()
        )));
    }
    if mount_entry(&mountpoint).is_some() {
        return Err(Error::Mount(format!(
            "mountpoint {} is busy: something is already mounted there",
            mountpoint.display()
        )));
    }
    if !Path::new(DEV_FUSE).exists() {
        return Err(Error::Mount(format!(
            "{DEV_FUSE} is missing: load the fuse module (modprobe fuse), or give the container \
             the device (--device /dev/fuse --cap-add SYS_ADMIN)"
        )));
    }
    Ok(mountpoint)
}

/// `topicfs unmount MOUNTPOINT`: `umount` as root, `fusermount3 -u` otherwise. The daemon then
/// shuts down cleanly on its own.
pub fn unmount(mountpoint: &Path) -> ExitCode {
    if mount_entry(&mountpoint.canonicalize().unwrap_or_else(|_| mountpoint.to_path_buf()))
        .is_none()
    {
        eprintln!("topicfs: {} is not mounted", mountpoint.display());
        return ExitCode::FAILURE;
    }
    if nix::mount::umount(mountpoint).is_ok() {
        return ExitCode::SUCCESS;
    }
    match Command::new("fusermount3").arg("-u").arg("--").arg(mountpoint).status() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("topicfs: cannot run fusermount3: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_options_parse_like_sshfs() {
        assert_eq!("allow_other".parse::<FuseOption>().ok(), Some(FuseOption::AllowOther));
        assert_eq!(
            "fsname=kafka".parse::<FuseOption>().ok(),
            Some(FuseOption::FsName("kafka".into()))
        );
        assert_eq!("noatime".parse::<FuseOption>().ok(), Some(FuseOption::Flag("noatime")));
        assert_eq!("no_passthrough".parse::<FuseOption>().ok(), Some(FuseOption::NoPassthrough));
        assert!("bogus".parse::<FuseOption>().unwrap_err().to_string().contains("allow_other"));
    }

    #[test]
    fn access_options_take_names_numbers_and_octal_modes() {
        assert_eq!("uid=0".parse::<FuseOption>().ok(), Some(FuseOption::Uid(0)));
        assert_eq!("uid=root".parse::<FuseOption>().ok(), Some(FuseOption::Uid(0)));
        assert_eq!("gid=root".parse::<FuseOption>().ok(), Some(FuseOption::Gid(0)));
        assert_eq!(
            "gid=4294967294".parse::<FuseOption>().ok(),
            Some(FuseOption::Gid(4_294_967_294))
        );
        assert_eq!("umask=027".parse::<FuseOption>().ok(), Some(FuseOption::Umask(0o027)));
        assert_eq!("file_mode=0640".parse::<FuseOption>().ok(), Some(FuseOption::FileMode(0o640)));
        assert_eq!("dir_mode=750".parse::<FuseOption>().ok(), Some(FuseOption::DirMode(0o750)));
        assert_eq!("dir_mode=0o750".parse::<FuseOption>().ok(), Some(FuseOption::DirMode(0o750)));
        let no_user = "uid=no-such-user-here".parse::<FuseOption>().unwrap_err().to_string();
        assert!(no_user.contains("no such user"), "{no_user}");
        let no_group = "gid=no-such-group-here".parse::<FuseOption>().unwrap_err().to_string();
        assert!(no_group.contains("no such group"), "{no_group}");
        for bad in ["file_mode=0800", "file_mode=4755", "dir_mode=", "umask=rwx", "umask=-1"] {
            let err = bad.parse::<FuseOption>().unwrap_err().to_string();
            assert!(err.contains("octal mode"), "{bad}: {err}");
        }
    }

    #[test]
    fn umask_sets_both_modes_and_explicit_modes_win() {
        let access = |opts: &[&str]| {
            let options: Vec<FuseOption> = opts.iter().map(|o| o.parse().unwrap()).collect();
            Access::from_options(&options)
        };
        assert_eq!(access(&[]), Access::default());
        assert_eq!((access(&[]).file_mode, access(&[]).dir_mode), (0o664, 0o755));
        let a = access(&["umask=027"]);
        assert_eq!((a.file_mode, a.dir_mode), (0o640, 0o750));
        // file_mode wins over umask, before or after it; dir_mode still follows umask.
        for opts in [["file_mode=0600", "umask=022"], ["umask=022", "file_mode=0600"]] {
            let a = access(&opts);
            assert_eq!((a.file_mode, a.dir_mode), (0o600, 0o755), "{opts:?}");
        }
        let a = access(&["uid=1", "gid=2", "uid=3"]);
        assert_eq!((a.uid, a.gid), (Some(3), Some(2)), "the last uid= counts");
    }
}
