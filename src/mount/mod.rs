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
//!   aborted through fusectl (mounted first, as root, where it is not; without fusectl and
//!   without root, the daemon shuts down and exits, which ends the connection too), so open
//!   files fail with `ENOTCONN` instead of keeping the daemon alive.
//!
//! `fusermount3 -u` and `umount` return when the kernel has let go of the mount, before the
//! daemon's shutdown; `topicfs unmount` ([`unmount`]) waits for it. A mount started meanwhile
//! waits up to [`LOCK_WAIT`] for the data dir's lock.
//!
//! While mounted read-write, retention runs every `--retention-check-interval-ms` (Kafka's
//! `log.retention.check.interval.ms`, default [`RETENTION_CHECK_INTERVAL`]), deleting segments
//! past `retention.ms` / `retention.bytes`, and the log cleaner every `--cleaner-backoff-ms`
//! (Kafka's `log.cleaner.backoff.ms`, default [`CLEANER_BACKOFF`]) over the topics a callback
//! gives cleaner settings for (see `cleaner`).
//!
//! Then [`TopicFs::shutdown`] appends the pending partial lines of open append files and shuts
//! the log dir down cleanly (indexes trimmed, checkpoints and the clean-shutdown marker
//! written). The exit status is 0 when that succeeded.
//!
//! # Layout
//!
//! - here: the backend (`open_backend`, the one place it is chosen), the checks and the mount
//!   sequence;
//! - `unmount`: `topicfs unmount`, which waits for the daemon's clean shutdown;
//! - `request`: the mount request and its `-o` options ([`FuseOption`], [`Access`]) and the
//!   parsers of their values;
//! - `daemon`: background mode, the parent waiting for the daemon child's status line;
//! - `session`: the fuser configuration, the `mount(2)` of a `fuse.topicfs` file system, the
//!   unmounter;
//! - `signals`: the termination signals and the signal thread that unmounts;
//! - `retention`: the retention task of a read-write mount;
//! - `cleaner`: the log cleaner task of a read-write mount;
//! - `mountinfo`: `/proc/self/mountinfo` lookups;
//! - `logging`: stderr, syslog or a log file, and the ring of recent warnings `MNT/@log`
//!   shows.

mod cleaner;
mod daemon;
mod detach;
mod logging;
mod memory;
mod mountinfo;
mod request;
mod retention;
mod session;
mod signals;
mod unmount;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::SigSet;

pub use self::cleaner::CLEANER_BACKOFF;
use self::cleaner::CleanerTask;
pub use self::daemon::DAEMON_CHILD_FLAG;
use self::daemon::{Reporter, run_parent};
pub use self::logging::{DEFAULT_LOG_FILTER, LogTarget, described_log, init_logging};
use self::mountinfo::fuse_connection;
pub use self::mountinfo::mount_entry;
pub use self::request::{
    Access, ClusterMount, DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, FuseOption, MountRequest,
    SchemaSettings, escape_option, parse_background_threads, parse_cache_dir, parse_group,
    parse_log_file, parse_mode, parse_schemas_topic, parse_size, parse_user, split_options,
};
pub use self::retention::RETENTION_CHECK_INTERVAL;
use self::retention::Retention;
use self::session::{DEV_FUSE, session_config, start_session};
pub use self::signals::BUSY_GRACE;
use self::signals::{Stopper, termination_signals};
pub use self::unmount::{
    DEFAULT_UNMOUNT_TIMEOUT, MountCommand, MountpointOf, STARTED_IN_ENV, UnmountRequest, unmount,
};
use crate::cleaner::CleanerSettings;
use crate::error::{Error, Result};
use crate::fs::recent_log::RecentLog;
use crate::fs::{FsOptions, TopicFs};
use crate::fuse::FuseAdapter;
use crate::source::TopicSource;
use crate::storage::SegmentMode;
use crate::storage::cache::{CacheSettings, SegmentCache};
use crate::storage::log_dirs::LogDirs;

/// How the mount process runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `-f`: serve in this process, log to stderr (or `--log-file`).
    Foreground,
    /// Default: start a daemon child and exit once it reports.
    Background,
    /// The daemon child itself: serve, log to syslog (or `--log-file`, which the parent gives
    /// when there is no syslog), report to the parent on stdout.
    DaemonChild,
}

/// Runs `topicfs mount` in `mode`; the process's exit status.
///
/// `args` is the command line after the program name as `topicfs` understands it (for a mount
/// helper invocation: its translation, see [`crate::cli::helper_args`]); the background parent
/// starts the daemon child with it.
pub fn run(request: MountRequest, mode: Mode, args: &[OsString]) -> ExitCode {
    match mode {
        Mode::Background => run_parent(args, &request),
        Mode::Foreground | Mode::DaemonChild => {
            let daemon = mode == Mode::DaemonChild;
            let mut reporter = Reporter { daemon, reported: false };
            let target = match (&request.log_file, daemon) {
                (Some(path), _) => LogTarget::File(path.clone()),
                (None, true) => LogTarget::Syslog,
                (None, false) => LogTarget::Stderr,
            };
            let status = init_logging(target, &request.mountpoint)
                .and_then(|recent| serve(&request, &mut reporter, recent));
            match status {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    reporter.error(&err);
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
fn serve(request: &MountRequest, reporter: &mut Reporter, recent: Arc<RecentLog>) -> Result<()> {
    // Before any thread exists, so every thread inherits the mask and only the signal thread
    // receives them.
    let signals = termination_signals();
    signals
        .thread_block()
        .map_err(|e| Error::Mount(format!("cannot block termination signals: {e}")))?;
    raise_open_file_limit();
    mount_and_serve(request, signals, reporter, recent)
}

/// Raises this process's limit of open files as far as it may: every segment keeps its `.log`
/// and index files open (as a broker does), three descriptors per segment, so 10,000 segments
/// need more than the usual soft limit of 1,024 (or even a hard limit of 20,000). The soft
/// limit goes up to the hard one; as root both go up to the kernel's `fs.nr_open`.
fn raise_open_file_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return };
    let nr_open = mountinfo::read_proc("sys/fs/nr_open")
        .and_then(|s| String::from_utf8_lossy(&s).trim().parse::<u64>().ok())
        .unwrap_or(hard);
    let raised = nr_open > hard && setrlimit(Resource::RLIMIT_NOFILE, nr_open, nr_open).is_ok();
    if !raised && soft < hard {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    if let Ok((soft, _)) = getrlimit(Resource::RLIMIT_NOFILE) {
        log::debug!("open files limit: {soft}");
    }
}

/// What a mount serves: the one [`TopicSource`] of the tree, and the local work that goes with
/// it.
struct Backend {
    source: Arc<dyn TopicSource>,
    /// A writable log directory, whose retention the daemon runs (`--retention-check-interval-ms`);
    /// `None` for a read-only mount (a broker, or nobody, deletes its segments).
    retained: Option<Arc<LogDirs>>,
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
/// What streams show: `--isolation`, except that a cluster mount given
/// `--config isolation.level=read_uncommitted` reads uncommitted too (either setting saying
/// `read_uncommitted` wins), so Fetch, ListOffsets and the view agree.
fn stream_isolation(request: &MountRequest) -> crate::view::txn::Isolation {
    let uncommitted_client = request.cluster.as_ref().is_some_and(|c| {
        c.config.isolation_level == crate::cluster::config::IsolationLevel::ReadUncommitted
    });
    if uncommitted_client {
        crate::view::txn::Isolation::ReadUncommitted
    } else {
        request.isolation
    }
}

fn open_backend(
    request: &MountRequest,
    dirs: &[(String, PathBuf)],
    budget: &Arc<crate::view::budget::MemoryBudget>,
    executor: &crate::executor::Executor,
) -> Result<Backend> {
    if let Some(cluster) = &request.cluster {
        let addrs: Vec<String> = cluster.bootstrap.iter().map(ToString::to_string).collect();
        let failed = |e: Error| match e {
            // A setting's file (a CA, a client certificate or key) that cannot be used: no
            // broker was asked.
            Error::InvalidInput(what) => Error::Mount(what),
            e => Error::Mount(format!("no bootstrap server answered ({}): {e}", addrs.join(","))),
        };
        // `--isolation` and `isolation.level` agree on read_committed (both defaults) or the
        // mount reads uncommitted: Fetch and ListOffsets ask the level the streams show.
        let mut config = cluster.config.clone();
        let committed = stream_isolation(request) == crate::view::txn::Isolation::ReadCommitted;
        if !committed {
            config.isolation_level = crate::cluster::config::IsolationLevel::ReadUncommitted;
        }
        let config_timeout = config.request_timeout;
        // Background work (deferred stats, mount sizing) gets a client of its own: its own
        // connections, so its Fetches never queue before a reader's at the broker.
        let background = crate::cluster::Client::connect(cluster.bootstrap.clone(), config.clone())
            .map_err(failed)?;
        let client =
            crate::cluster::Client::connect(cluster.bootstrap.clone(), config).map_err(failed)?;
        let client = Arc::new(client);
        let source = Arc::new(
            crate::cluster::ClusterSource::new(Arc::clone(&client), request.read_only)
                .with_background_client(Arc::new(background))
                .with_sizing_budget(
                    request.sizing_budget.unwrap_or(crate::cluster::source::CLUSTER_SIZING_BUDGET),
                )
                .with_committed_reads(committed)
                .with_fetch_memory(budget.fetch_memory(), config_timeout)
                // Prefetches and the max-timestamp probe run on the mount's one executor.
                .with_executor(executor.clone()),
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
    let log_dirs = Arc::new(open_log_dirs(dirs, &log_config, &topic_configs, mode)?);
    log_dirs.set_mount_defaults(request.log_settings.clone())?;
    if !request.server_properties.is_empty() {
        log_dirs.set_static_defaults(request.server_properties.clone());
    }
    let groups = Arc::new(crate::storage::groups::LocalGroupStore::new(Arc::clone(&log_dirs)));
    log_dirs
        .set_sizing_budget(request.sizing_budget.unwrap_or(crate::storage::LOCAL_SIZING_BUDGET));
    // Key-index builds run on the mount's one executor.
    log_dirs.set_executor(executor.clone());
    let data_dirs: Vec<PathBuf> = dirs.iter().map(|(_, path)| path.clone()).collect();
    log_dirs.set_cache(Arc::new(open_cache(&request.cache, &data_dirs)?));
    let source: Arc<dyn TopicSource> = Arc::clone(&log_dirs) as Arc<dyn TopicSource>;
    let retained = (!request.read_only).then_some(log_dirs);
    Ok(Backend { source, retained, groups })
}

/// The mount's schemas (SEMANTICS.md, "Records with schemas"): none with `schemas=off`; a
/// registry's REST API with `--schema-registry`; otherwise the schemas topic (`_schemas`, or
/// `--schemas-topic`) when it exists at mount, or was named, or `schemas=on` was given.
fn open_schemas(
    settings: &SchemaSettings,
    source: &Arc<dyn TopicSource>,
) -> Result<Option<Arc<crate::view::schemas::Schemas>>> {
    use crate::view::schemas::{Schemas, topic::DEFAULT_SCHEMAS_TOPIC, topic::TopicSchemas};
    if settings.enabled == Some(false) {
        return Ok(None);
    }
    if let Some(url) = &settings.registry {
        let registry = open_registry(url, &settings.registry_config)?;
        log::info!("schemas from the registry at {url}");
        return Ok(Some(Arc::new(Schemas::new(registry))));
    }
    let topic = settings.topic.as_deref().unwrap_or(DEFAULT_SCHEMAS_TOPIC);
    let exists = source.topics().is_ok_and(|topics| topics.iter().any(|t| t == topic));
    if !exists && settings.topic.is_none() && settings.enabled.is_none() {
        return Ok(None);
    }
    log::info!("schemas from topic {topic}{}", if exists { "" } else { " (not there yet)" });
    let topics = Arc::new(TopicSchemas::new(Arc::clone(source), topic));
    Ok(Some(Arc::new(Schemas::new(topics))))
}

/// The REST client of `--schema-registry`.
fn open_registry(
    url: &str,
    config: &[(String, String)],
) -> Result<Arc<dyn crate::schema::SchemaSource>> {
    let mut settings = vec![("schema.registry.url".to_string(), url.to_string())];
    settings.extend(config.iter().cloned());
    let usage = |e: Error| match e {
        Error::InvalidInput(what) | Error::Usage(what) => {
            Error::Usage(format!("--schema-registry: {what}"))
        }
        e => Error::Mount(format!("--schema-registry: {e}")),
    };
    let config = topicfs_registry::RegistryConfig::from_settings(&settings).map_err(usage)?;
    Ok(Arc::new(topicfs_registry::HttpRegistry::new(config).map_err(usage)?))
}

/// How long a mount waits for a data dir locked by another process: long enough for a daemon
/// that was just unmounted (`fusermount3 -u` returns before it has shut down) to finish, short
/// enough that a dir a broker holds is refused promptly.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);
const LOCK_RETRY: Duration = Duration::from_millis(50);

/// Opens the log dirs, waiting up to [`LOCK_WAIT`] (logged once) while another process holds
/// a lock of one; then [`Error::Locked`].
fn open_log_dirs(
    dirs: &[(String, PathBuf)],
    log_config: &crate::settings::LogConfig,
    topic_configs: &std::collections::HashMap<String, crate::settings::LogConfig>,
    mode: SegmentMode,
) -> Result<LogDirs> {
    let deadline = Instant::now() + LOCK_WAIT;
    let mut waiting = false;
    loop {
        match LogDirs::open(dirs, log_config.clone(), topic_configs.clone(), mode) {
            Err(Error::Locked(dir)) if Instant::now() < deadline => {
                if !waiting {
                    waiting = true;
                    log::info!(
                        "{} is locked by another process (a topicfs still shutting down?); \
                         waiting up to {} s for it",
                        dir.display(),
                        LOCK_WAIT.as_secs()
                    );
                }
                std::thread::sleep(LOCK_RETRY);
            }
            Err(Error::Locked(dir)) if waiting => {
                return Err(Error::Mount(format!(
                    "{} is locked by another process (a broker or another topicfs; waited {} s)",
                    dir.display(),
                    LOCK_WAIT.as_secs()
                )));
            }
            Ok(dir) => {
                if waiting {
                    log::info!("the log dirs are no longer locked; opening them");
                }
                return Ok(dir);
            }
            Err(e) => return Err(e),
        }
    }
}

/// The segment cache of a log-dir mount: refused inside a data dir (a read-only mount of a
/// broker's directory must write nothing there, and the broker would see foreign files).
fn open_cache(settings: &CacheSettings, data_dirs: &[PathBuf]) -> Result<SegmentCache> {
    if let Some(dir) = &settings.dir {
        // The nearest existing ancestor tells where the directory would be created.
        let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        let existing = absolute.ancestors().find_map(|a| std::fs::canonicalize(a).ok());
        for data_dir in data_dirs {
            let data = std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.clone());
            if existing.as_ref().is_some_and(|e| e.starts_with(&data))
                || absolute.starts_with(&data)
            {
                return Err(Error::Usage(format!(
                    "--cache-dir {} is inside the data dir {}: choose a directory outside it \
                     (or cache_dir=none)",
                    dir.display(),
                    data.display()
                )));
            }
        }
    }
    Ok(SegmentCache::open(settings))
}

fn mount_and_serve(
    request: &MountRequest,
    signals: SigSet,
    reporter: &mut Reporter,
    recent: Arc<RecentLog>,
) -> Result<()> {
    if reporter.daemon {
        // Leave the terminal's session: no SIGHUP or SIGINT from it. Fails only if already a
        // session leader, which is fine.
        let _ = nix::unistd::setsid();
    }
    let (data_dir, dirs, mountpoint) = check_paths(request)?;
    if reporter.daemon {
        // The daemon must not keep the directory it was started from busy.
        let _ = std::env::set_current_dir("/");
    }
    // Everything that can be known to fail the mount is checked before the data dir is
    // opened, which writes into it (`.lock`, `meta.properties`, checkpoints).
    check_fuse_usable(&mountpoint)?;
    let log_config = &request.log_config;
    // One budget for the view's renderings and a cluster's fetches in flight.
    let budget = crate::view::budget::MemoryBudget::new(request.memory_budget);
    crate::storage::key_index::set_memory_limit(request.key_index_memory);
    // The mount's one background executor: the filesystem's work and the log engine's.
    let executor = crate::executor::Executor::new(request.background_threads);
    let Backend { source, groups, retained } = open_backend(request, &dirs, &budget, &executor)?;
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
    let schemas = open_schemas(&request.schemas, &source)?;
    let json_payload = request
        .fuse_options
        .iter()
        .rev()
        .find_map(|o| match o {
            FuseOption::JsonPayload(shown) => Some(*shown),
            _ => None,
        })
        .unwrap_or_default();
    let fs = Arc::new(
        TopicFs::new(Arc::clone(&source), options)
            .with_schemas(schemas)
            .with_json_payload(json_payload)
            .with_isolation(stream_isolation(request))
            .with_groups(groups, reset)
            .with_internal_topics(request.fuse_options.contains(&FuseOption::ShowInternal))
            .with_max_partitions(request.max_partitions)
            .with_auto_commit(request.fuse_options.contains(&FuseOption::AutoCommit))
            .with_shared_executor(budget, executor.clone())
            .with_memory_release(memory::return_freed_memory)
            .with_recent_log(recent),
    );
    for option in &request.fuse_options {
        if let FuseOption::Index { topic, field } = option {
            // As a write of `FIELD` to `TOPIC/indexes`; a topic not there yet keeps the
            // declaration for when it is.
            if let Err(e) = fs.indexes_write(topic, format!("{field}\n").as_bytes()) {
                log::warn!("-o index={topic}/{field}: {e}");
            }
        }
    }
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
    // Sizing that still has to happen runs now, off the request path (a partition whose
    // sealed segments the cache knows costs nothing).
    let _sizing = TopicFs::start_background_sizing(&fs);
    let connection = fuse_connection(&mountpoint);
    let (ended_tx, ended_rx) = mpsc::channel::<()>();
    let stopper = Stopper {
        unmounter: unmounter.clone(),
        mountpoint: mountpoint.clone(),
        connection,
        ended: ended_rx,
        fs: Arc::clone(&fs),
    };
    let spawned = crate::executor::spawn_dedicated("topicfs-signals".into(), move || {
        stopper.wait_and_unmount(signals);
    });
    if let Err(err) = spawned {
        let _ = unmounter.unmount();
        drop(session);
        let _ = fs.shutdown();
        return Err(Error::Mount(format!("cannot start the signal thread: {err}")));
    }
    log::info!("mounted {} on {}", data_dir.display(), mountpoint.display());
    reporter.ready();
    // Each pass asks the topic's settings as resolved then: compacted only when known and
    // `cleanup.policy` contains `compact`.
    let cleaner_settings: Option<Arc<cleaner::SettingsFor>> = retained.clone().map(|log_dir| {
        let dedupe = request.cleaner_dedupe_buffer_bytes;
        let settings: Arc<cleaner::SettingsFor> = Arc::new(move |topic: &str| {
            CleanerSettings::for_topic(&log_dir.resolve_topic(topic), dedupe)
        });
        settings
    });
    let cleaner = retained.clone().zip(cleaner_settings).map(|(log_dir, settings)| {
        CleanerTask::start(
            &executor,
            log_dir,
            request.cleaner_backoff,
            request.cleaner_dedupe_buffer_bytes,
            settings,
        )
    });
    let retention = retained
        .map(|log_dir| Retention::start(&executor, log_dir, request.retention_check_interval));
    let ran = session.run();
    let _ = ended_tx.send(());
    if let Some(cleaner) = cleaner {
        cleaner.stop();
    }
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

/// Checks the data dirs and the mountpoint; returns the mount's source (the data dirs made
/// canonical, joined by commas, or the cluster's bootstrap spec), each log dir (as given,
/// canonical) and the mountpoint made absolute.
#[allow(clippy::type_complexity)]
fn check_paths(request: &MountRequest) -> Result<(PathBuf, Vec<(String, PathBuf)>, PathBuf)> {
    let mountpoint = check_mountpoint(request)?;
    if request.cluster.is_some() {
        check_mountpoint_empty(&mountpoint, request.nonempty)?;
        // The bootstrap spec, not a path: only shown as the mount's source (fsname).
        return Ok((request.data_dir.clone(), Vec::new(), mountpoint));
    }
    let mut dirs = Vec::with_capacity(request.log_dirs.len());
    for (given, path) in &request.log_dirs {
        let data_dir = check_data_dir(path, &request.mountpoint)?;
        check_mountpoint_outside_data_dir(&data_dir, &mountpoint)?;
        check_data_dir_is_log_dir(&data_dir, request.read_only, request.allow_non_log_dir)?;
        dirs.push((given.clone(), data_dir));
    }
    // After the data dirs: one inside the mountpoint is named as such.
    check_mountpoint_empty(&mountpoint, request.nonempty)?;
    let joined: Vec<String> = dirs.iter().map(|(_, p)| p.display().to_string()).collect();
    Ok((PathBuf::from(joined.join(",")), dirs, mountpoint))
}
/// Refuses a mountpoint inside the data dir (both canonical: symlinks resolved): the mount
/// would hide part of the data dir behind itself, and every write through it would land in
/// the mount. (A data dir inside the mountpoint is refused by `check_data_dir`.)
fn check_mountpoint_outside_data_dir(data_dir: &Path, mountpoint: &Path) -> Result<()> {
    if mountpoint.starts_with(data_dir) {
        return Err(Error::Mount(format!(
            "mountpoint {} is inside the data dir {}: choose a mountpoint outside it",
            mountpoint.display(),
            data_dir.display()
        )));
    }
    Ok(())
}

/// Refuses a data dir that is not a Kafka log dir (see [`crate::format::log_dir_layout`]),
/// before anything is written into it: a writable mount would write `.lock`,
/// `meta.properties`, checkpoints and segment files among someone else's files. A read-only
/// mount is refused too (it would serve a directory of configuration files as partitions),
/// unless `allow_non_log_dir`. Reads only names.
fn check_data_dir_is_log_dir(
    data_dir: &Path,
    read_only: bool,
    allow_non_log_dir: bool,
) -> Result<()> {
    let layout = crate::storage::log_dir::classify_data_dir(data_dir)
        .map_err(|e| Error::Mount(format!("data dir {}: {e}", data_dir.display())))?;
    let crate::format::log_dir_layout::Layout::Foreign { entry, why } = layout else {
        return Ok(());
    };
    if read_only && allow_non_log_dir {
        log::warn!(
            "data dir {} is not a Kafka log dir ({entry}: {why}); serving it read-only as asked \
             (--allow-non-log-dir)",
            data_dir.display()
        );
        return Ok(());
    }
    let hint = if read_only {
        "; --allow-non-log-dir mounts it read-only anyway"
    } else {
        "; nothing was written (an empty directory starts a new log dir)"
    };
    Err(Error::Mount(format!(
        "data dir {} is not a Kafka log dir: {entry}: {why} (a log dir holds meta.properties, \
         or only a broker's files){hint}",
        data_dir.display()
    )))
}

/// Whether this process can make a FUSE mount on `mountpoint`: `/dev/fuse` opens for reading
/// and writing, and without root, `fusermount3` (which mounts for an unprivileged user) is
/// there and the user may write to the mountpoint, as it requires. Run before anything is
/// written into the data dir, so a mount that cannot succeed leaves it untouched.
fn check_fuse_usable(mountpoint: &Path) -> Result<()> {
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open(DEV_FUSE) {
        let hint = match e.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => format!(
                ": this user may not use FUSE. Make the device usable by everyone, as \
                 distributions do (chmod 0666 {DEV_FUSE}, or a udev rule: KERNEL==\"fuse\", \
                 MODE=\"0666\"), or mount as root"
            ),
            Some(libc::ENOENT | libc::ENODEV | libc::ENXIO) => {
                ": load the fuse module (modprobe fuse), or give the container the device \
                 (--device /dev/fuse --cap-add SYS_ADMIN)"
                    .to_string()
            }
            _ => String::new(),
        };
        return Err(Error::Mount(format!("cannot open {DEV_FUSE}: {e}{hint}")));
    }
    if nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let in_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("fusermount3").is_file())
    });
    if !in_path {
        return Err(Error::Mount(
            "fusermount3 is not in PATH: without root, topicfs mounts through it (install the \
             fuse3 package)"
                .into(),
        ));
    }
    if nix::unistd::access(mountpoint, nix::unistd::AccessFlags::W_OK).is_err() {
        return Err(Error::Mount(format!(
            "mountpoint {}: this user may not write to it, which fusermount3 requires of a \
             mount without root: use a directory of your own",
            mountpoint.display()
        )));
    }
    Ok(())
}

/// The refusal of a mountpoint whose FUSE daemon is gone (`stat` fails with `ENOTCONN`): what
/// it is and how to clear it.
fn disconnected_mount(mountpoint: &Path) -> Error {
    let absolute = std::path::absolute(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
    // The file system type follows the ` - ` separator of its mountinfo line.
    let fstype = mount_entry(&absolute).and_then(|line| {
        line.split(" - ").nth(1).and_then(|rest| rest.split(' ').next()).map(str::to_string)
    });
    let what = match fstype.as_deref() {
        Some(t) if t.starts_with("fuse.topicfs") => "a disconnected topicfs mount".to_string(),
        Some(t) => format!("a disconnected FUSE mount (type {t})"),
        None => "a disconnected FUSE mount".to_string(),
    };
    Error::Mount(format!(
        "mountpoint {} is {what}: the daemon that served it has died. Clear it with \
         `fusermount3 -u {}` (or `umount -l` as root), then mount again",
        mountpoint.display(),
        mountpoint.display()
    ))
}

fn check_data_dir(given: &Path, mountpoint: &Path) -> Result<PathBuf> {
    let data_dir = given
        .canonicalize()
        .map_err(|e| Error::Mount(format!("data dir {}: {e}", given.display())))?;
    if !data_dir.is_dir() {
        return Err(Error::Mount(format!("data dir {} is not a directory", data_dir.display())));
    }
    let mountpoint = mountpoint.canonicalize().unwrap_or_else(|_| mountpoint.to_path_buf());
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
    let given = &request.mountpoint;
    let not_usable = |e: std::io::Error| {
        if e.raw_os_error() == Some(libc::ENOTCONN) {
            disconnected_mount(given)
        } else {
            Error::Mount(format!("mountpoint {}: {e}", given.display()))
        }
    };
    // stat first: on a mount whose daemon died it fails with ENOTCONN, which must not read as
    // "not a directory".
    let metadata = std::fs::metadata(given).map_err(not_usable)?;
    let mountpoint = given.canonicalize().map_err(not_usable)?;
    if !metadata.is_dir() {
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
    Ok(mountpoint)
}

/// Refuses a mountpoint that holds entries, which the mount would hide (fusermount3 no longer
/// refuses it itself), naming the first by name; with `nonempty` it is mounted over, logged at
/// info. A directory that cannot be listed is left to the mount itself to judge.
fn check_mountpoint_empty(mountpoint: &Path, nonempty: bool) -> Result<()> {
    let Ok(entries) = crate::storage::open::read_dir(mountpoint) else { return Ok(()) };
    let Some(first) = entries.filter_map(|e| e.ok().map(|e| e.file_name())).min() else {
        return Ok(());
    };
    let first = first.to_string_lossy();
    if nonempty {
        log::info!(
            "mountpoint {} is not empty ({first}, ...): mounting over it as asked (nonempty); \
             what it holds is hidden until unmounted",
            mountpoint.display()
        );
        return Ok(());
    }
    Err(Error::Mount(format!(
        "mountpoint {} is not empty (it holds {first}): the mount would hide what is there; use \
         an empty directory, or -o nonempty (--nonempty) to mount over it",
        mountpoint.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_isolation_setting_saying_read_uncommitted_makes_a_cluster_mount_read_uncommitted() {
        use crate::view::txn::Isolation;
        use clap::Parser;
        let isolation = |args: &[&str]| {
            let mut argv = vec!["topicfs", "mount", "kafka://h:1", "m"];
            argv.extend_from_slice(args);
            let crate::cli::Command::Mount(m) =
                crate::cli::Cli::try_parse_from(argv).unwrap().command
            else {
                panic!("not mount")
            };
            stream_isolation(&m.request().unwrap())
        };
        assert_eq!(isolation(&[]), Isolation::ReadCommitted);
        assert_eq!(isolation(&["--isolation", "read_uncommitted"]), Isolation::ReadUncommitted);
        let client = ["--config", "isolation.level=read_uncommitted"];
        assert_eq!(isolation(&client), Isolation::ReadUncommitted);
    }
}

#[cfg(test)]
mod cache_tests {
    use super::*;

    #[test]
    fn a_cache_dir_inside_the_data_dir_is_refused_and_one_outside_is_created() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let inside = CacheSettings { dir: Some(data.join("sub/cache")), max_bytes: 1 << 20 };
        let err = open_cache(&inside, std::slice::from_ref(&data)).unwrap_err().to_string();
        assert!(err.contains("inside the data dir"), "{err}");
        assert!(!data.join("sub").exists(), "nothing was created in the data dir");
        let dotted = CacheSettings { dir: Some(data.join("../data/c")), max_bytes: 1 << 20 };
        assert!(open_cache(&dotted, std::slice::from_ref(&data)).is_err());
        let outside = CacheSettings { dir: Some(tmp.path().join("cache")), max_bytes: 1 << 20 };
        let cache = open_cache(&outside, std::slice::from_ref(&data)).unwrap();
        assert_eq!(cache.dir(), Some(tmp.path().join("cache").as_path()));
        assert!(tmp.path().join("cache").is_dir());
        let off =
            open_cache(&CacheSettings { dir: None, max_bytes: 0 }, std::slice::from_ref(&data))
                .unwrap();
        assert_eq!(off.dir(), None);
    }
}
