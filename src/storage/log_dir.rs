//! The data directory: one entry of a broker's `log.dirs` (Kafka's `LogManager` for one dir).
//!
//! ```text
//! <dir>/meta.properties                   cluster.id, node.id (v1) or broker.id (v0)
//! <dir>/.lock                             exclusive lock while a process owns the dir
//! <dir>/.kafka_cleanshutdown              present only after a clean shutdown
//! <dir>/recovery-point-offset-checkpoint  per partition: offset below which data is on disk
//! <dir>/log-start-offset-checkpoint       per partition: first visible offset (when above the
//!                                         first segment's base offset)
//! <dir>/topicfs-topic-config              topicfs's per-topic overrides (a broker ignores it;
//!                                         see [`super::topic_config`])
//! <dir>/<topic>-<partition>/              one partition log each
//! ```
//!
//! **Writable mode** ([`LogDir::open`]) locks the dir, deletes the clean-shutdown marker as soon
//! as it is seen (so a crash while loading counts as unclean, KAFKA-10471), recovers every
//! partition from its recovery point after an unclean stop, and writes checkpoints (temporary
//! file, fsync, rename) after loading, after retention and at shutdown, which also writes the
//! marker again.
//!
//! **Read-only mode** ([`LogDir::open_read_only`]) changes nothing under the dir: no lock, no
//! marker removal, no checkpoint; damaged or missing indexes are rebuilt in memory and torn
//! tails are only hidden. A broker may be running on the dir meanwhile: the partition list is
//! read again at most every [`RESCAN_INTERVAL_MS`] when topics or partitions are looked up, so
//! partitions the broker creates appear and partitions it deletes (renamed `-delete`) disappear.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, Flock, FlockArg, fcntl};

use crate::error::{Error, FileType, Result};
use crate::format::Offset;
use crate::format::checkpoint::{format_offset_checkpoint, format_uuid, parse_offset_checkpoint};
use crate::format::file_name::{
    has_collision, parse_partition_dir, parse_special_dir, partition_dir_name, validate_topic_name,
};
use crate::format::log_dir_layout::{self, EntryKind, Layout, RootEntry};
use crate::format::properties::{format_properties, parse_properties};
use crate::sync::lock;

use super::cache::SegmentCache;
use super::cluster_metadata::{ClusterMetadataConfigs, ClusterMetadataReader};
use super::config::{BrokerSettings, LogConfig};
use super::log::{LoadState, Log};
use super::open;
use super::segment::{SegmentMode, now_ms};
use super::topic_config::{
    Resolved, TOPIC_CONFIG_FILE, TopicSettings, differing_settings, format_topic_config_file,
    parse_topic_config_file,
};
use crate::source::{ConfigChange, ConfigEntry};

/// `meta.properties`.
pub const META_PROPERTIES: &str = "meta.properties";
/// Unsynced segments (all partitions) from which a clean shutdown makes them durable with one
/// `syncfs` instead of an fsync per file ([`LogDir::shutdown`]): below it the fsyncs are few
/// and do not wait for other files of the file system.
pub const SYNCFS_FROM: usize = 64;

/// The lock file.
pub const LOCK_FILE: &str = ".lock";
/// The clean-shutdown marker.
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
/// Recovery points.
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
/// Log start offsets.
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
/// The KRaft metadata log's topic: owned by the raft layer, so loaded only read-only.
const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";
/// Read-only mode: the shortest time between two listings of the data dir for partitions the
/// broker created or deleted (the same interval as a partition's own refresh).
pub const RESCAN_INTERVAL_MS: i64 = 200;
/// The most partitions a topic can have: Kafka numbers partitions with an `INT32`, so
/// partition `2^31 - 1` is the last there can be (the mount's `--max-partitions` is lower).
pub const KAFKA_MAX_PARTITIONS: u32 = i32::MAX as u32;

/// The sizing budget of a log directory's partitions unless `--sizing-budget` says otherwise:
/// 256 MiB of log, rendered (counted, not kept) in about 0.45 s here (scaled from 333 MB sized
/// in 0.56 s, BENCHMARKS.md "cold opens"). A stream whose end
/// is farther shows size 0 until read to its end (SEMANTICS.md, "Sizes: exact or not yet
/// known"). Larger than the interface's [`DEFAULT_SIZING_BUDGET`](crate::source::DEFAULT_SIZING_BUDGET)
/// (16 MiB, what a source reached over a network states) because a local partition is cheap to
/// size, and a stream of unknown size makes `tail -n` (and the first step of `tail -f`) read
/// it from its start: measured on 3 M records (333 MB of log), `tail -n 10 by-offset/0` took
/// 0.8 s sized and 10 s unsized.
pub const LOCAL_SIZING_BUDGET: u64 = 256 << 20;

/// A Kafka data directory; see the module doc.
#[derive(Debug)]
pub struct LogDir {
    path: PathBuf,
    mode: SegmentMode,
    /// Every layer of the topics' settings ([`super::topic_config`]). Changed under
    /// `admin_lock` (after the file is written, for the overrides); read without it.
    settings: RwLock<TopicSettings>,
    /// The topics last logged as having unknown settings (logged again only when this changes).
    unknown_logged: Mutex<Option<BTreeSet<String>>>,
    /// Problems of broker settings already logged (each once).
    problems_logged: Mutex<BTreeSet<String>>,
    /// [`TOPIC_CONFIG_FILE`] could not be read (byte position of the bad line, what is wrong):
    /// no topic has known settings through it, and changes are refused so the file (the only
    /// copy of its overrides) is never replaced until it is fixed or removed.
    settings_damage: Option<(u64, String)>,
    /// The locks on `.lock` and on the directory itself (released when closed); `None`
    /// read-only.
    lock_file: Mutex<Option<DirLock>>,
    /// Partitions by (topic, partition).
    logs: RwLock<BTreeMap<(String, u32), Arc<Log>>>,
    had_clean_shutdown: bool,
    /// `meta.properties` as read or written.
    meta: BTreeMap<String, String>,
    shut_down: AtomicBool,
    /// Serializes checkpoint writes, topic creation and read-only rescans.
    admin_lock: Mutex<()>,
    /// Read-only mode: when the data dir was last listed (ms since the epoch).
    last_rescan_ms: AtomicI64,
    /// Read-only mode: partitions whose last load failed (logged at error level once).
    failed: Mutex<BTreeSet<(String, u32)>>,
    /// Every partition's sizing budget ([`LogDir::set_sizing_budget`]).
    sizing_budget: AtomicU64,
    /// The segment cache every partition keeps its sealed segments' summaries in
    /// ([`LogDir::set_cache`]; disabled until set).
    cache: RwLock<Arc<SegmentCache>>,
    /// The broker's KRaft metadata log (`__cluster_metadata-0`), read at open for the topics'
    /// broker layers and, read-only, again at each rescan (a running broker changes it);
    /// `None` when the data dir has none (yet).
    metadata: Mutex<Option<ClusterMetadataReader>>,
}

impl LogDir {
    /// Opens (creating if needed) a data dir for reading and writing: takes the `.lock`,
    /// creates `meta.properties` if missing, loads and recovers every partition.
    /// `Error::Locked` if a broker or another process holds the dir.
    pub fn open(path: &Path, config: LogConfig) -> Result<LogDir> {
        LogDir::open_with(path, config, HashMap::new(), SegmentMode::Writable)
    }

    /// Opens a data dir without changing anything in it (a broker may be using it).
    pub fn open_read_only(path: &Path, config: LogConfig) -> Result<LogDir> {
        LogDir::open_with(path, config, HashMap::new(), SegmentMode::ReadOnly)
    }

    /// [`LogDir::open`] or [`LogDir::open_read_only`] with per-topic configuration overrides.
    pub fn open_with(
        path: &Path,
        default_config: LogConfig,
        topic_configs: HashMap<String, LogConfig>,
        mode: SegmentMode,
    ) -> Result<LogDir> {
        let writable = mode == SegmentMode::Writable;
        if writable {
            std::fs::create_dir_all(path).map_err(|e| Error::io(path, "mkdir", e))?;
        } else if !path.is_dir() {
            return Err(Error::NotFound(path.display().to_string()));
        }
        let lock_file = if writable { Some(take_lock(path)?) } else { None };
        if writable {
            // The checkpoints are replaced by rename at every write, which would put a file
            // in place of what is there (or fail on a directory): refuse to take over a data
            // dir whose checkpoints are not regular files, naming them, instead of guessing.
            for name in [RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, TOPIC_CONFIG_FILE]
            {
                let file = path.join(name);
                match open::file_type(&file) {
                    Ok(FileType::Regular) => {}
                    Ok(found) => {
                        return Err(Error::WrongFileType {
                            file,
                            found,
                            expected: FileType::Regular,
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io(&file, "stat", e)),
                }
            }
        }
        let meta = load_meta_properties(path, writable)?;
        let (overrides, settings_damage) = load_topic_config_file(path)?;
        let metadata = open_cluster_metadata(path, &meta);
        let settings = TopicSettings {
            mount_defaults: differing_settings(&default_config, &LogConfig::default()),
            internal: topic_configs
                .iter()
                .map(|(topic, config)| (topic.clone(), differing_settings(config, &default_config)))
                .collect(),
            broker: metadata
                .as_ref()
                .map(|m| broker_settings(m.configs(), BTreeMap::new()))
                .unwrap_or_default(),
            overrides,
        };

        let marker = path.join(CLEAN_SHUTDOWN_FILE);
        let had_clean_shutdown = marker.exists();
        if had_clean_shutdown && writable {
            std::fs::remove_file(&marker).map_err(|e| Error::io(&marker, "remove", e))?;
            sync_dir(path)?;
        }
        let dir = LogDir {
            path: path.to_path_buf(),
            mode,
            settings: RwLock::new(settings),
            unknown_logged: Mutex::new(None),
            problems_logged: Mutex::new(BTreeSet::new()),
            settings_damage,
            lock_file: Mutex::new(lock_file),
            logs: RwLock::new(BTreeMap::new()),
            had_clean_shutdown,
            meta,
            shut_down: AtomicBool::new(false),
            admin_lock: Mutex::new(()),
            last_rescan_ms: AtomicI64::new(now_ms()),
            failed: Mutex::new(BTreeSet::new()),
            sizing_budget: AtomicU64::new(LOCAL_SIZING_BUDGET),
            cache: RwLock::new(Arc::new(SegmentCache::disabled())),
            metadata: Mutex::new(metadata),
        };
        let partitions = dir.partition_dirs(true)?;
        let logs = dir.load_partitions(partitions.into_iter().collect());
        *dir.logs.write().unwrap_or_else(|e| e.into_inner()) = logs;
        if writable {
            dir.write_checkpoints()?;
            dir.log_unknown_topics();
        }
        Ok(dir)
    }

    /// Takes what the broker holds for the data dir's topics (its KRaft metadata,
    /// `server.properties`) as the layers between the topics' overrides and Kafka's defaults
    /// ([`super::topic_config`] for the precedence), and re-resolves every partition's
    /// configuration now: the next append, roll and retention pass use it.
    pub fn set_broker_settings(&self, broker: BrokerSettings) {
        let _guard = lock(&self.admin_lock);
        self.settings.write().unwrap_or_else(|e| e.into_inner()).broker = broker;
        self.apply_settings(None);
        if self.mode == SegmentMode::Writable {
            self.log_unknown_topics();
        }
    }

    /// Takes a broker's static settings (`--server-properties`, in topic-level names) as the
    /// layer below the mount's `--config`, keeping what the broker's metadata log holds.
    pub fn set_static_defaults(&self, static_defaults: BTreeMap<String, String>) {
        let mut broker = self.settings.read().unwrap_or_else(|e| e.into_inner()).broker.clone();
        broker.static_defaults = static_defaults;
        self.set_broker_settings(broker);
    }

    /// Read-only mode: reads what the broker appended to its metadata log since the last
    /// read (a topic created or removed, a setting changed through the broker's admin API) and
    /// re-resolves the topics' settings when anything changed. An error is logged and the
    /// settings read before stay.
    fn refresh_cluster_metadata(&self) {
        let changed = {
            let mut reader = lock(&self.metadata);
            match reader.as_mut() {
                Some(r) => match r.refresh() {
                    Ok(changed) => changed.then(|| r.configs().clone()),
                    Err(e) => {
                        log::warn!("{e}; keeping the broker's topic settings read before");
                        None
                    }
                },
                None => {
                    *reader = open_cluster_metadata(&self.path, &self.meta);
                    reader.as_ref().map(|r| r.configs().clone())
                }
            }
        };
        if let Some(configs) = changed {
            let statics = self
                .settings
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .broker
                .static_defaults
                .clone();
            log::info!(
                "{}: the broker's topic settings changed; applying them",
                self.path.display()
            );
            self.set_broker_settings(broker_settings(&configs, statics));
        }
    }

    /// Replaces the mount's defaults (the `--config` layer) with `settings`, by name, and
    /// re-resolves every partition's configuration. [`LogDir::open`] derives the layer from its
    /// `LogConfig` (the settings that differ from Kafka's defaults); this states it exactly, so
    /// a setting given at its Kafka default still counts as the mount's (above
    /// `server.properties`). `InvalidInput` naming the setting and the rule, nothing changed.
    pub fn set_mount_defaults(&self, settings: BTreeMap<String, String>) -> Result<()> {
        let mut rendered = BTreeMap::new();
        for (name, value) in settings {
            let mut probe = LogConfig::default();
            probe.set(&name, &value)?;
            let shown = probe.get(&name).unwrap_or(value);
            rendered.insert(name, shown);
        }
        let _guard = lock(&self.admin_lock);
        self.settings.write().unwrap_or_else(|e| e.into_inner()).mount_defaults = rendered;
        self.apply_settings(None);
        Ok(())
    }

    /// The effective settings of `topic` (see [`super::topic_config`]).
    pub fn resolve_topic(&self, topic: &str) -> Resolved {
        let resolved = self.settings.read().unwrap_or_else(|e| e.into_inner()).resolve(topic);
        for problem in &resolved.problems {
            if lock(&self.problems_logged).insert(format!("{topic}: {problem}")) {
                log::warn!(
                    "topic {topic}: {problem}; its settings count as unknown (no retention by \
                     time or size, no compaction)"
                );
            }
        }
        resolved
    }

    /// How the log cleaner cleans `topic` now: `None` when its settings are unknown (nothing is
    /// compacted on guessed settings, see [`super::topic_config`]) or its `cleanup.policy`
    /// does not contain `compact`. Resolved at each call, so a `config` change applies to the
    /// next cleaner pass.
    pub fn cleaner_settings(
        &self,
        topic: &str,
        dedupe_buffer_bytes: usize,
    ) -> Option<super::cleaner::CleanerSettings> {
        let resolved = self.resolve_topic(topic);
        if !resolved.known {
            return None;
        }
        super::cleaner::CleanerSettings::from_log_config(&resolved.config, dedupe_buffer_bytes)
    }

    /// Gives the partitions of `topic` (all when `None`) their configuration as resolved now.
    fn apply_settings(&self, topic: Option<&str>) {
        let mut resolved: HashMap<String, Resolved> = HashMap::new();
        for log in self.logs() {
            if topic.is_some_and(|t| t != log.topic()) {
                continue;
            }
            let r = resolved
                .entry(log.topic().to_string())
                .or_insert_with(|| self.resolve_topic(log.topic()));
            log.set_config(Arc::new(r.config.clone()));
            log.set_settings_known(r.known);
        }
    }

    /// Logs (writable mode) the topics whose settings are unknown, once per change of that
    /// set: their partitions are not deleted from by time or size, nor compacted.
    fn log_unknown_topics(&self) {
        let unknown: BTreeSet<String> = self
            .logs()
            .iter()
            .filter(|l| !l.settings_known())
            .map(|l| l.topic().to_string())
            .collect();
        let mut logged = lock(&self.unknown_logged);
        if logged.as_ref() == Some(&unknown) {
            return;
        }
        if !unknown.is_empty() {
            log::warn!(
                "{}: settings unknown for topic(s) {}: no retention by time or size and no \
                 compaction there until set (write e.g. cleanup.policy=delete to \
                 MNT/<topic>/config to accept the defaults)",
                self.path.display(),
                unknown.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        *logged = Some(unknown);
    }

    /// Every effective setting of `topic`, sorted by name, with its source. `NotFound` for a
    /// topic without partitions.
    pub fn topic_config(&self, topic: &str) -> Result<Vec<ConfigEntry>> {
        self.partition_numbers(topic)?;
        Ok(self.resolve_topic(topic).entries)
    }

    /// Whether `topic`'s settings are known (see [`super::topic_config`]).
    pub fn topic_settings_known(&self, topic: &str) -> bool {
        self.resolve_topic(topic).known
    }

    /// Applies `changes` to `topic`'s overrides, all or nothing: validated, written to
    /// [`TOPIC_CONFIG_FILE`] (crash-safe), then in effect for the topic's partitions. Any call,
    /// even with no change, makes the topic's settings known. `ReadOnly` on a read-only mount,
    /// `NotFound` for a topic without partitions, `InvalidInput` naming the setting and the
    /// rule (nothing changed), `Corrupt` (EIO) while the file is damaged (see
    /// `load_topic_config_file`).
    pub fn alter_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        self.check_writable()?;
        self.partition_numbers(topic)?;
        if let Some((at, why)) = &self.settings_damage {
            return Err(Error::corrupt(self.path.join(TOPIC_CONFIG_FILE), *at, why.clone()));
        }
        let _guard = lock(&self.admin_lock);
        let mut candidate =
            self.settings.read().unwrap_or_else(|e| e.into_inner()).overrides.clone();
        let overrides = self
            .settings
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .changed_overrides(topic, changes)?;
        let unchanged = candidate.get(topic) == Some(&overrides);
        candidate.insert(topic.to_string(), overrides);
        if !unchanged {
            write_atomically(&self.path, TOPIC_CONFIG_FILE, &format_topic_config_file(&candidate))?;
            self.settings.write().unwrap_or_else(|e| e.into_inner()).overrides = candidate;
            let described: Vec<String> = changes
                .iter()
                .map(|c| match c {
                    ConfigChange::Set { name, value } => format!("{name}={value}"),
                    ConfigChange::Remove { name } => format!("{name} removed"),
                })
                .collect();
            if described.is_empty() {
                log::info!("topic {topic}: settings known now (no override)");
            } else {
                log::info!("topic {topic}: settings changed: {}", described.join(", "));
            }
        }
        self.apply_settings(Some(topic));
        self.log_unknown_topics();
        Ok(())
    }

    /// Gives `topic` an entry (no override) in [`TOPIC_CONFIG_FILE`] unless it has one:
    /// its settings are then known. Caller holds `admin_lock`.
    fn record_topic(&self, topic: &str) -> Result<()> {
        if self.settings_damage.is_some() {
            // The damaged file is not replaced: the new topic's settings stay unknown (safe).
            return Ok(());
        }
        let mut candidate =
            self.settings.read().unwrap_or_else(|e| e.into_inner()).overrides.clone();
        if candidate.contains_key(topic) {
            return Ok(());
        }
        candidate.insert(topic.to_string(), Default::default());
        write_atomically(&self.path, TOPIC_CONFIG_FILE, &format_topic_config_file(&candidate))?;
        self.settings.write().unwrap_or_else(|e| e.into_inner()).overrides = candidate;
        Ok(())
    }

    /// Sets the sizing budget of every partition, loaded now or later: the log bytes a
    /// stream's `stat` or `open` may render to learn its size (`--sizing-budget`; default
    /// [`LOCAL_SIZING_BUDGET`]).
    pub fn set_sizing_budget(&self, bytes: u64) {
        self.sizing_budget.store(bytes, Ordering::Relaxed);
        for log in self.logs.read().unwrap_or_else(|e| e.into_inner()).values() {
            log.set_sizing_budget(bytes);
        }
    }

    /// See [`LogDir::set_sizing_budget`].
    pub fn sizing_budget(&self) -> u64 {
        self.sizing_budget.load(Ordering::Relaxed)
    }

    /// Sets the segment cache of every partition, loaded now or later (`--cache-dir`; the
    /// cache lives outside the data dir, so a read-only mount still writes nothing here).
    pub fn set_cache(&self, cache: Arc<SegmentCache>) {
        *self.cache.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&cache);
        for log in self.logs.read().unwrap_or_else(|e| e.into_inner()).values() {
            log.set_cache(Arc::clone(&cache));
        }
    }

    /// See [`LogDir::set_cache`].
    pub fn cache(&self) -> Arc<SegmentCache> {
        Arc::clone(&self.cache.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The partition directories under the data dir, by (topic, partition); `log_skipped`
    /// logs why other directories are not partitions.
    fn partition_dirs(&self, log_skipped: bool) -> Result<BTreeMap<(String, u32), PathBuf>> {
        let path = &self.path;
        let mut out = BTreeMap::new();
        for entry in open::read_dir(path)? {
            let entry = entry.map_err(|e| Error::io(path, "readdir", e))?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
            let Ok(entry_type) = entry.file_type() else { continue };
            if entry_type.is_symlink() && parse_partition_dir(&name).is_some() {
                // A symlinked partition directory is followed; a link to anything else (or
                // dangling, or looping) is refused, named once in the log.
                match open::file_type(&entry.path()) {
                    Ok(FileType::Directory) => {}
                    Ok(found) => {
                        refuse_partition_dir(entry.path(), found);
                        continue;
                    }
                    Err(_) => continue,
                }
            } else if !entry_type.is_dir() {
                if parse_partition_dir(&name).is_some() && !entry_type.is_file() {
                    if let Ok(found) = open::file_type(&entry.path()) {
                        refuse_partition_dir(entry.path(), found);
                    }
                }
                continue;
            }
            if let Some(special) = parse_special_dir(&name) {
                if log_skipped {
                    log::info!(
                        "skipping {name}: {:?} directory of {}",
                        special.kind,
                        special.topic
                    );
                }
                continue;
            }
            let Some((topic, partition)) = parse_partition_dir(&name) else {
                if log_skipped {
                    log::debug!("skipping {name}: not a partition directory");
                }
                continue;
            };
            // A read-only mount shows the KRaft metadata log like any topic; a writable one
            // leaves it to the raft layer (no recovery, no checkpoints, no appends).
            if topic == CLUSTER_METADATA_TOPIC && self.mode == SegmentMode::Writable {
                continue;
            }
            out.insert((topic, partition), entry.path());
        }
        Ok(out)
    }

    /// Opens the partitions `dirs`, with their recovery points and log start offsets from the
    /// checkpoints as they are now. A partition that cannot be loaded is logged and left out.
    fn load_partitions(
        &self,
        dirs: Vec<((String, u32), PathBuf)>,
    ) -> BTreeMap<(String, u32), Arc<Log>> {
        let mut logs = BTreeMap::new();
        if dirs.is_empty() {
            return logs;
        }
        let recovery_points = read_checkpoint(&self.path.join(RECOVERY_POINT_CHECKPOINT));
        let log_starts = read_checkpoint(&self.path.join(LOG_START_OFFSET_CHECKPOINT));
        for (key, dir) in dirs {
            let state = LoadState {
                had_clean_shutdown: self.had_clean_shutdown,
                recovery_point: recovery_points.get(&key).copied().map(Offset),
                log_start_offset: log_starts.get(&key).copied().map(Offset),
            };
            let (topic, partition) = (&key.0, key.1);
            let resolved = self.resolve_topic(topic);
            match Log::open(&dir, topic, partition, resolved.config, self.mode, state) {
                Ok(log) => {
                    log.set_settings_known(resolved.known);
                    log.set_sizing_budget(self.sizing_budget());
                    log.set_cache(self.cache());
                    lock(&self.failed).remove(&key);
                    logs.insert(key, Arc::new(log));
                }
                Err(e) => {
                    if lock(&self.failed).insert(key.clone()) {
                        log::error!("cannot load partition {}: {e}", dir.display());
                    } else {
                        log::debug!("cannot load partition {} again: {e}", dir.display());
                    }
                }
            }
        }
        logs
    }

    /// Read-only mode: lists the data dir again, at most every [`RESCAN_INTERVAL_MS`], and
    /// takes in the partitions a broker created (opened as at mount) or deleted (a partition
    /// whose directory is gone, e.g. renamed `-delete`, is no longer listed; readers holding
    /// its log keep reading what they opened). A listing error is logged and retried later.
    fn maybe_rescan(&self) {
        if self.mode == SegmentMode::Writable {
            return;
        }
        let now = now_ms();
        let last = self.last_rescan_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) < RESCAN_INTERVAL_MS
            || self
                .last_rescan_ms
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        self.refresh_cluster_metadata();
        let _guard = lock(&self.admin_lock);
        let on_disk = match self.partition_dirs(false) {
            Ok(dirs) => dirs,
            Err(e) => {
                log::warn!("{e}; listing partitions again later");
                return;
            }
        };
        let known: BTreeSet<(String, u32)> =
            self.logs.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        let gone: Vec<&(String, u32)> =
            known.iter().filter(|k| !on_disk.contains_key(*k)).collect();
        let new: Vec<((String, u32), PathBuf)> =
            on_disk.into_iter().filter(|(k, _)| !known.contains(k)).collect();
        if gone.is_empty() && new.is_empty() {
            return;
        }
        let added = self.load_partitions(new);
        let mut logs = self.logs.write().unwrap_or_else(|e| e.into_inner());
        for key in gone {
            log::info!("partition {}-{} is gone from {}", key.0, key.1, self.path.display());
            logs.remove(key);
        }
        for (key, log) in added {
            log::info!("partition {}-{} appeared in {}", key.0, key.1, self.path.display());
            logs.insert(key, log);
        }
    }

    /// The data dir.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the last stop was clean (the marker was present at open).
    pub fn had_clean_shutdown(&self) -> bool {
        self.had_clean_shutdown
    }

    /// `meta.properties` keys and values.
    pub fn meta_properties(&self) -> &BTreeMap<String, String> {
        &self.meta
    }

    /// The effective configuration of `topic` (see [`super::topic_config`]).
    pub fn config_for(&self, topic: &str) -> LogConfig {
        self.resolve_topic(topic).config
    }

    /// One partition's log.
    pub fn log(&self, topic: &str, partition: u32) -> Result<Arc<Log>> {
        self.maybe_rescan();
        self.logs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(topic.to_string(), partition))
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("{topic} partition {partition}")))
    }

    /// All partition logs, by (topic, partition).
    pub fn logs(&self) -> Vec<Arc<Log>> {
        self.logs.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
    }

    /// Topic names, sorted.
    pub fn topic_names(&self) -> Vec<String> {
        self.maybe_rescan();
        let logs = self.logs.read().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<String> = logs.keys().map(|(t, _)| t.clone()).collect();
        names.dedup();
        names
    }

    /// Partition numbers of `topic`, sorted; `NotFound` for an unknown topic.
    pub fn partition_numbers(&self, topic: &str) -> Result<Vec<u32>> {
        self.maybe_rescan();
        let logs = self.logs.read().unwrap_or_else(|e| e.into_inner());
        let parts: Vec<u32> = logs.keys().filter(|(t, _)| t == topic).map(|(_, p)| *p).collect();
        if parts.is_empty() {
            return Err(Error::NotFound(format!("topic {topic}")));
        }
        Ok(parts)
    }

    fn check_writable(&self) -> Result<()> {
        if self.mode == SegmentMode::ReadOnly {
            return Err(Error::ReadOnly);
        }
        if self.shut_down.load(Ordering::Acquire) {
            return Err(Error::StaleHandle);
        }
        Ok(())
    }

    /// Creates `topic` with partitions `0..partitions` (Kafka's topic name rules), all of them
    /// or none: refused before anything is created when the name is invalid, exists, or
    /// collides with an existing topic's once `.` and `_` are taken as one (Kafka's
    /// `Topic.hasCollision`: both would report metrics under one name), or when `partitions` is
    /// 0 or above [`KAFKA_MAX_PARTITIONS`]; a partition that fails to be created removes the
    /// ones made before it.
    pub fn create_topic(&self, topic: &str, partitions: u32) -> Result<()> {
        self.check_writable()?;
        validate_topic_name(topic)
            .map_err(|reason| Error::InvalidTopicName { name: topic.to_string(), reason })?;
        if partitions == 0 {
            return Err(Error::InvalidInput("a topic needs at least one partition".to_string()));
        }
        if partitions > KAFKA_MAX_PARTITIONS {
            return Err(Error::InvalidInput(format!(
                "{partitions} partitions: a Kafka topic has at most {KAFKA_MAX_PARTITIONS}"
            )));
        }
        let _guard = lock(&self.admin_lock);
        if self.partition_numbers(topic).is_ok() {
            return Err(Error::AlreadyExists(format!("topic {topic}")));
        }
        if let Some(existing) = self.topic_names().into_iter().find(|t| has_collision(t, topic)) {
            return Err(Error::InvalidInput(format!(
                "topic {topic:?} collides with existing topic {existing:?}: Kafka treats '.' \
                 and '_' in topic names alike (metric names), so it refuses both"
            )));
        }
        // The entry first: a crash before the partitions exist leaves an entry without a
        // topic (harmless), never a topic created here without known settings.
        self.record_topic(topic)?;
        for p in 0..partitions {
            if let Err(err) = self.create_log(topic, p) {
                self.remove_created(topic, p);
                return Err(err);
            }
        }
        Ok(())
    }

    /// Undoes a [`LogDir::create_topic`] that failed at partition `failed`: forgets and deletes
    /// partitions `0..failed` of `topic` (just created, holding no record). Failures are
    /// logged; the directories left are ordinary empty partitions a remount serves.
    fn remove_created(&self, topic: &str, failed: u32) {
        let mut logs = self.logs.write().unwrap_or_else(|e| e.into_inner());
        for p in 0..failed {
            logs.remove(&(topic.to_string(), p));
            let dir = self.path.join(partition_dir_name(topic, p));
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                log::warn!("cannot remove {} after a failed topic creation: {e}", dir.display());
            }
        }
        drop(logs);
        if let Err(e) = sync_dir(&self.path) {
            log::warn!("{e}");
        }
    }

    /// Adds partition `partition` to an existing topic; only the next number is accepted, and
    /// none past [`KAFKA_MAX_PARTITIONS`].
    pub fn create_partition(&self, topic: &str, partition: u32) -> Result<()> {
        self.check_writable()?;
        let _guard = lock(&self.admin_lock);
        let existing = self.partition_numbers(topic)?;
        let next = existing.last().map_or(0, |p| p + 1);
        if existing.contains(&partition) {
            return Err(Error::AlreadyExists(format!("{topic} partition {partition}")));
        }
        if partition >= KAFKA_MAX_PARTITIONS {
            return Err(Error::InvalidInput(format!(
                "partition {partition}: a Kafka topic has at most {KAFKA_MAX_PARTITIONS} partitions"
            )));
        }
        if partition != next {
            return Err(Error::InvalidInput(format!(
                "topic {topic} has partitions 0..{next}; only partition {next} can be added"
            )));
        }
        self.create_log(topic, partition)
    }

    fn create_log(&self, topic: &str, partition: u32) -> Result<()> {
        let dir = self.path.join(partition_dir_name(topic, partition));
        let resolved = self.resolve_topic(topic);
        let log = Log::create(&dir, topic, partition, resolved.config)?;
        log.set_settings_known(resolved.known);
        log.set_sizing_budget(self.sizing_budget());
        log.set_cache(self.cache());
        sync_dir(&self.path)?;
        self.logs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert((topic.to_string(), partition), Arc::new(log));
        Ok(())
    }

    /// Applies retention to every partition (see [`Log::delete_old_segments`]) and writes the
    /// checkpoints when something was deleted. Returns the number of segments deleted.
    pub fn enforce_retention(&self) -> Result<usize> {
        if self.mode == SegmentMode::ReadOnly {
            return Ok(0);
        }
        let now = now_ms();
        let mut deleted = 0;
        for log in self.logs() {
            deleted += log.delete_old_segments(now)?;
        }
        if deleted > 0 {
            self.write_checkpoints()?;
        }
        Ok(deleted)
    }

    /// Writes `recovery-point-offset-checkpoint` and `log-start-offset-checkpoint` (temporary
    /// file, fsync, rename, fsync of the dir).
    pub fn write_checkpoints(&self) -> Result<()> {
        if self.mode == SegmentMode::ReadOnly {
            return Ok(());
        }
        let _guard = lock(&self.admin_lock);
        let logs = self.logs();
        let recovery: Vec<(String, u32, i64)> = logs
            .iter()
            .map(|l| (l.topic().to_string(), l.partition(), l.recovery_point().0))
            .collect();
        let starts: Vec<(String, u32, i64)> = logs
            .iter()
            .filter(|l| {
                l.segment_list().first().is_some_and(|s| l.log_start_offset() > s.base_offset())
            })
            .map(|l| (l.topic().to_string(), l.partition(), l.log_start_offset().0))
            .collect();
        write_atomically(
            &self.path,
            RECOVERY_POINT_CHECKPOINT,
            &format_offset_checkpoint(&recovery),
        )?;
        write_atomically(
            &self.path,
            LOG_START_OFFSET_CHECKPOINT,
            &format_offset_checkpoint(&starts),
        )
    }

    /// Closes every partition cleanly (trimmed indexes, fsync), writes the checkpoints and the
    /// clean-shutdown marker, and releases the lock; first waits for the segment cache's
    /// queued writes (both modes: the cache is outside the data dir). Idempotent.
    ///
    /// The fsyncs are bounded: past [`SYNCFS_FROM`] unsynced segments (all partitions
    /// together), one `syncfs` of the data dir's file system replaces the fsync of every file
    /// (three per segment, 30,000 for 10,000 segments, one after the other). It runs on the
    /// directory handle held locked since open, so a write-back error of any file of the file
    /// system since then fails it (Linux 5.8 and later), as the fsyncs would have.
    pub fn shutdown(&self) -> Result<()> {
        self.cache().flush();
        if self.shut_down.swap(true, Ordering::AcqRel) || self.mode == SegmentMode::ReadOnly {
            return Ok(());
        }
        let logs = self.logs();
        let unsynced: usize = logs.iter().map(|l| l.unsynced_segments()).sum();
        if unsynced < SYNCFS_FROM {
            for log in &logs {
                log.close()?;
            }
        } else {
            let mut closed = Vec::with_capacity(logs.len());
            for log in &logs {
                if let Some(end) = log.close_unsynced()? {
                    closed.push((log, end));
                }
            }
            let started = std::time::Instant::now();
            self.syncfs()?;
            for (log, end) in closed {
                log.synced_to(end);
            }
            log::info!(
                "{}: {unsynced} unsynced segments made durable by one syncfs in {:.2} s",
                self.path.display(),
                started.elapsed().as_secs_f64()
            );
        }
        self.write_checkpoints()?;
        write_atomically(&self.path, CLEAN_SHUTDOWN_FILE, "{\"version\":0,\"brokerEpoch\":-1}")?;
        *lock(&self.lock_file) = None;
        Ok(())
    }

    /// `syncfs` of the data dir's file system, through the directory handle locked since open.
    fn syncfs(&self) -> Result<()> {
        let guard = lock(&self.lock_file);
        let held = guard.as_ref().ok_or_else(|| {
            Error::io(&self.path, "syncfs", std::io::Error::other("the data dir is not locked"))
        })?;
        nix::unistd::syncfs(&*held.dir).map_err(|e| Error::io(&self.path, "syncfs", e.into()))
    }

    /// Whether appends and creations are refused.
    pub fn is_read_only(&self) -> bool {
        self.mode == SegmentMode::ReadOnly
    }
}

/// The overrides of [`TOPIC_CONFIG_FILE`] (absent: none), and its damage if it cannot be
/// parsed (a bad line, not UTF-8): then it is logged once at error level, left as it is, and no
/// topic has known settings through it (nothing is deleted on guessed settings); reads and
/// appends go on. A file that cannot be read at all (not a regular file on a read-only mount,
/// an I/O error) is taken the same way; a writable open refuses a non-regular one earlier, as
/// for the checkpoints.
#[allow(clippy::type_complexity)]
fn load_topic_config_file(
    dir: &Path,
) -> Result<(BTreeMap<String, super::topic_config::Settings>, Option<(u64, String)>)> {
    let path = dir.join(TOPIC_CONFIG_FILE);
    let damage = match open::read_regular_to_string(&path) {
        Ok(text) => match parse_topic_config_file(&text) {
            Ok(overrides) => return Ok((overrides, None)),
            Err(damage) => damage,
        },
        Err(e) if open::is_not_found(&e) => return Ok((BTreeMap::new(), None)),
        Err(e) => (0, e.to_string()),
    };
    let e = Error::corrupt(&path, damage.0, damage.1.clone());
    log::error!(
        "{e}; every topic's settings count as unknown (no retention by time or size, no \
         compaction) and changes to them fail until the file is fixed or removed"
    );
    Ok((BTreeMap::new(), Some(damage)))
}

/// Logs, once per process, a name shaped like a partition directory that is not one.
fn refuse_partition_dir(path: PathBuf, found: FileType) {
    let e = Error::WrongFileType { file: path, found, expected: FileType::Directory };
    if e.first_report() {
        log::warn!("{e}; no partition is served from it");
    }
}

/// What a writable [`LogDir`] holds locked while it owns the directory: `.lock`, as a broker
/// locks it, and the directory itself.
///
/// Invariant: both are held from open to shutdown, so a second writable topicfs is refused
/// even if `.lock` was deleted by hand under a running mount (the new `.lock` it would create
/// is another file; the directory cannot be deleted while in use as the data dir). A broker
/// only knows `.lock` (Kafka shares that weakness).
#[derive(Debug)]
struct DirLock {
    _file: Flock<File>,
    /// Also the handle the shutdown's `syncfs` goes through.
    dir: Flock<File>,
}

/// Locks the data dir (see [`DirLock`]) without waiting; [`Error::Locked`] when another
/// process holds either lock.
fn take_lock(dir: &Path) -> Result<DirLock> {
    let handle = open::open_dir(dir)?;
    let dir_lock = match Flock::lock(handle, FlockArg::LockExclusiveNonblock) {
        Ok(locked) => locked,
        Err((_, Errno::EWOULDBLOCK)) => return Err(Error::Locked(dir.to_path_buf())),
        Err((_, e)) => return Err(Error::io(dir, "lock", e.into())),
    };
    Ok(DirLock { _file: take_lock_file(dir)?, dir: dir_lock })
}

/// Classifies the directory `path` as a Kafka log dir or not by the names in it (see
/// [`crate::format::log_dir_layout`]), reading only names: its entries, and the entries of
/// those named like partition directories. Reads nothing else and writes nothing. A missing
/// directory is [`Layout::Empty`] (a new log dir).
pub fn classify_data_dir(path: &Path) -> Result<Layout> {
    let listing = match open::read_dir(path) {
        Ok(listing) => listing,
        Err(e) if open::is_not_found(&e) => return Ok(Layout::Empty),
        Err(e) => return Err(e),
    };
    // The common case first, without listing anything: a broker's (or topicfs's) dir.
    if matches!(open::file_type(&path.join(META_PROPERTIES)), Ok(FileType::Regular)) {
        return Ok(Layout::MetaProperties);
    }
    let kind_of = |p: &Path| match open::file_type(p) {
        Ok(FileType::Regular) => Ok(EntryKind::File),
        Ok(FileType::Directory) => Ok(EntryKind::Dir),
        Ok(_) => Ok(EntryKind::Other),
        Err(e) => Err(Error::io(p, "stat", e)),
    };
    let mut entries = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|e| Error::io(path, "readdir", e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let full = entry.path();
        let kind = kind_of(&full)?;
        let mut children = Vec::new();
        if kind == EntryKind::Dir && log_dir_layout::is_partition_dir_name(&name) {
            for child in open::read_dir(&full)? {
                let child = child.map_err(|e| Error::io(&full, "readdir", e))?;
                let child_name = child.file_name().to_string_lossy().into_owned();
                children.push((child_name, kind_of(&child.path())?));
            }
        }
        entries.push(RootEntry { name, kind, children });
    }
    Ok(log_dir_layout::classify(&entries))
}

/// Opens `.lock` (created if missing) and locks it exclusively without waiting: held until the
/// returned file is dropped; [`Error::Locked`] when another process holds it.
fn take_lock_file(dir: &Path) -> Result<Flock<File>> {
    let path = dir.join(LOCK_FILE);
    let file = open::open_regular(
        &path,
        OpenOptions::new().read(true).write(true).create(true).truncate(false),
        "open",
    )?;
    // Two locks, because Linux keeps them apart: an open-file-description `fcntl` write lock on
    // the whole file, which conflicts with the POSIX record lock a Kafka broker takes
    // (`FileChannel.tryLock`), and a `flock`, which conflicts with tools that use `flock`. Both
    // are released when the file is closed.
    let whole_file = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        // Must be 0 for open-file-description locks.
        l_pid: 0,
    };
    match fcntl(&file, FcntlArg::F_OFD_SETLK(&whole_file)) {
        Ok(_) => {}
        Err(Errno::EAGAIN | Errno::EACCES) => return Err(Error::Locked(dir.to_path_buf())),
        Err(e) => return Err(Error::io(&path, "lock", e.into())),
    }
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(locked) => Ok(locked),
        Err((_, Errno::EWOULDBLOCK)) => Err(Error::Locked(dir.to_path_buf())),
        Err((_, e)) => Err(Error::io(&path, "lock", e.into())),
    }
}

/// The broker's metadata log reader for a data dir, with this broker's id from its
/// `meta.properties` (`node.id`, or `broker.id` of a version 0 file); `None` when the dir has no
/// `__cluster_metadata-0` or it cannot be read (logged: the topics it would have made known
/// then stay unknown, so nothing of theirs is deleted or compacted).
fn open_cluster_metadata(
    path: &Path,
    meta: &BTreeMap<String, String>,
) -> Option<ClusterMetadataReader> {
    let node_id = meta
        .get("node.id")
        .or_else(|| meta.get("broker.id"))
        .and_then(|v| v.trim().parse::<i32>().ok());
    match ClusterMetadataReader::open(path, node_id) {
        Ok(reader) => {
            if let Some(r) = &reader {
                log::info!(
                    "{}: the broker's metadata log holds settings for {} topic(s) and {} \
                     default(s)",
                    path.display(),
                    r.configs().topics.len(),
                    r.configs().dynamic_defaults.len()
                );
            }
            reader
        }
        Err(e) => {
            log::warn!("{e}; the broker's topic settings in its metadata log are not used");
            None
        }
    }
}

/// The broker layers of the topics' settings: what its metadata log holds, and its static
/// `server.properties` defaults.
fn broker_settings(
    configs: &ClusterMetadataConfigs,
    static_defaults: BTreeMap<String, String>,
) -> BrokerSettings {
    BrokerSettings {
        topics: configs.topics.clone(),
        dynamic_defaults: configs.dynamic_defaults.clone(),
        static_defaults,
    }
}

/// Reads `meta.properties`; creates a version 1 file (random `cluster.id`, `node.id=0`) when it
/// is missing and the dir is writable. Version 0 (`broker.id`) is accepted; version 1 needs
/// `cluster.id` and `node.id`.
fn load_meta_properties(dir: &Path, writable: bool) -> Result<BTreeMap<String, String>> {
    let path = dir.join(META_PROPERTIES);
    match open::read_regular_to_string(&path) {
        Ok(text) => {
            let props = parse_properties(&text)
                .map_err(|e| Error::corrupt(&path, e.at as u64, e.to_string()))?;
            let version = props.get("version").map_or("0", String::as_str);
            match version {
                "0" => {}
                "1" => {
                    for key in ["cluster.id", "node.id"] {
                        if !props.contains_key(key) {
                            return Err(Error::corrupt(
                                &path,
                                0,
                                format!("version 1 without {key}"),
                            ));
                        }
                    }
                }
                v => return Err(Error::corrupt(&path, 0, format!("unknown version {v}"))),
            }
            Ok(props)
        }
        Err(e) if open::is_not_found(&e) && writable => {
            let mut props = BTreeMap::new();
            props.insert("version".to_string(), "1".to_string());
            props.insert("cluster.id".to_string(), format_uuid(&random_uuid(&path)?));
            props.insert("node.id".to_string(), "0".to_string());
            let date = chrono::Utc::now().format("%a %b %d %H:%M:%S UTC %Y").to_string();
            write_atomically(dir, META_PROPERTIES, &format_properties(&props, &date))?;
            Ok(props)
        }
        Err(e) if open::is_not_found(&e) => Ok(BTreeMap::new()),
        // Read-only: a `meta.properties` that is not a regular file is as good as none (the
        // mount shows the partitions; nothing reads the ids). Writable: the mount refuses to
        // take over the dir rather than write a new identity over it.
        Err(e @ Error::WrongFileType { .. }) if !writable => {
            log::warn!("{e}; reading the data dir without it");
            Ok(BTreeMap::new())
        }
        Err(e) => Err(e),
    }
}

/// 16 random bytes from the kernel, shaped as a version 4 UUID.
fn random_uuid(for_file: &Path) -> Result<[u8; 16]> {
    let mut id = [0u8; 16];
    File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut id))
        .map_err(|e| Error::io(for_file, "read /dev/urandom for", e))?;
    id[6] = (id[6] & 0x0f) | 0x40;
    id[8] = (id[8] & 0x3f) | 0x80;
    Ok(id)
}

/// Reads an offset checkpoint into a map; a missing or unreadable file is empty (Kafka then
/// recovers from 0 and starts logs at their first segment).
fn read_checkpoint(path: &Path) -> HashMap<(String, u32), i64> {
    let text = match open::read_regular_to_string(path) {
        Ok(t) => t,
        Err(e) if open::is_not_found(&e) => return HashMap::new(),
        Err(e) => {
            // Once per process for a refused file (read again at every rescan that finds new
            // partitions).
            if e.first_report() {
                log::warn!("cannot read {}: {e}; treating it as empty", path.display());
            }
            return HashMap::new();
        }
    };
    match parse_offset_checkpoint(&text) {
        Ok(entries) => entries.into_iter().map(|(t, p, o)| ((t, p), o)).collect(),
        Err(e) => {
            log::warn!("{}: {e}; treating it as empty", path.display());
            HashMap::new()
        }
    }
}

/// Writes `<dir>/<name>` as Kafka does: `<name>.tmp`, fsync, rename over, fsync of the dir.
fn write_atomically(dir: &Path, name: &str, text: &str) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let target = dir.join(name);
    // A leftover temporary (even a FIFO or a link of that name) is ours to replace.
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(&tmp, "remove", e)),
    }
    let mut file =
        open::open_regular(&tmp, OpenOptions::new().write(true).create_new(true), "create")?;
    file.write_all(text.as_bytes()).map_err(|e| Error::io(&tmp, "write", e))?;
    file.sync_all().map_err(|e| Error::io(&tmp, "fsync", e))?;
    std::fs::rename(&tmp, &target).map_err(|e| Error::io(&tmp, "rename", e))?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<()> {
    open::sync_dir(dir)
}

#[cfg(test)]
mod refusal_tests {
    use super::*;

    fn dirs_in(path: &Path) -> Vec<String> {
        let mut names: Vec<String> = open::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| path.join(n).is_dir())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn create_topic_refuses_a_colliding_name_or_too_many_partitions_before_creating_anything() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = LogDir::open(tmp.path(), LogConfig::default()).unwrap();
        dir.create_topic("a.b", 1).unwrap();
        let err = dir.create_topic("a_b", 1).unwrap_err();
        assert_eq!(err.errno(), libc::EINVAL);
        assert!(err.to_string().contains("existing topic \"a.b\""), "{err}");
        // u32::MAX partitions (`--partitions 4294967295`): refused at once, not created one by
        // one until killed.
        let err = dir.create_topic("big", u32::MAX).unwrap_err();
        assert_eq!(err.errno(), libc::EINVAL);
        assert!(err.to_string().contains("at most 2147483647"), "{err}");
        let err = dir.create_partition("a.b", KAFKA_MAX_PARTITIONS).unwrap_err();
        assert_eq!(err.errno(), libc::EINVAL);
        assert_eq!(dirs_in(tmp.path()), ["a.b-0"]);
        assert_eq!(dir.topic_names(), ["a.b"]);
    }

    #[test]
    fn a_topic_creation_failing_at_one_partition_removes_the_ones_made_before_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = LogDir::open(tmp.path(), LogConfig::default()).unwrap();
        // Partition 2's directory cannot be made: a file holds its name.
        std::fs::write(tmp.path().join("t-2"), "in the way").unwrap();
        assert!(dir.create_topic("t", 4).is_err());
        assert!(dirs_in(tmp.path()).is_empty(), "{:?}", dirs_in(tmp.path()));
        assert!(dir.partition_numbers("t").is_err());
        std::fs::remove_file(tmp.path().join("t-2")).unwrap();
        dir.create_topic("t", 4).unwrap();
        assert_eq!(dir.partition_numbers("t").unwrap(), [0, 1, 2, 3]);
    }

    #[test]
    fn classify_data_dir_reads_names_of_the_root_and_of_partition_directories_only() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(classify_data_dir(&tmp.path().join("absent")).unwrap(), Layout::Empty);
        assert_eq!(classify_data_dir(tmp.path()).unwrap(), Layout::Empty);
        // A small copy of /etc: dbus-1/ holds configuration files.
        let etc = tmp.path().join("etc");
        std::fs::create_dir_all(etc.join("dbus-1/system.d")).unwrap();
        std::fs::write(etc.join("dbus-1/system.conf"), "<busconfig/>").unwrap();
        std::fs::write(etc.join("hostname"), "h\n").unwrap();
        let layout = classify_data_dir(&etc).unwrap();
        assert_eq!(
            layout,
            Layout::Foreign {
                entry: "dbus-1/system.conf".into(),
                why: "not a file a broker writes in a partition directory"
            }
        );
        // A data dir topicfs wrote: meta.properties.
        let data = tmp.path().join("data");
        let dir = LogDir::open(&data, LogConfig::default()).unwrap();
        dir.create_topic("t", 2).unwrap();
        dir.shutdown().unwrap();
        assert_eq!(classify_data_dir(&data).unwrap(), Layout::MetaProperties);
        // Without it, the names alone make it a log dir.
        std::fs::remove_file(data.join(META_PROPERTIES)).unwrap();
        assert_eq!(classify_data_dir(&data).unwrap(), Layout::KafkaNames);
        // A FIFO among them is not a broker's file at the root.
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            data.join("pipe"),
            rustix::fs::Mode::from_raw_mode(0o644),
        )
        .unwrap();
        assert!(!classify_data_dir(&data).unwrap().is_log_dir());
    }
}
