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
//!                                         see [`topicfs_settings::topic_config`])
//! <dir>/<topic>-<partition>/              one partition log each
//! ```
//!
//! A dir is opened as a member of a [`crate::log_dirs::LogDirs`] (one dir is a set of one), which
//! is the mount's [`topicfs_source::TopicSource`]; a [`LogDir`] is one member's job: its files,
//! its lock, `meta.properties`, its checkpoints and its partition registry.
//!
//! **Writable mode** locks the dir, deletes the clean-shutdown marker as soon as it is seen (so
//! a crash while loading counts as unclean, KAFKA-10471), recovers every partition from its
//! recovery point after an unclean stop, and writes checkpoints (temporary file, fsync, rename)
//! after loading, after retention and at shutdown, which also writes the marker again.
//!
//! **Read-only mode** changes nothing under the dir: no lock, no marker removal, no checkpoint;
//! damaged or missing indexes are rebuilt in memory and torn tails are only hidden. A broker may
//! be running on the dir meanwhile: the partition list is read again at most every
//! [`RESCAN_INTERVAL_MS`] when topics or partitions are looked up, so partitions the broker
//! creates appear and partitions it deletes (renamed `-delete`) disappear.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, Flock, FlockArg, fcntl};

use topicfs_format::Offset;
use topicfs_format::checkpoint::{format_offset_checkpoint, format_uuid, parse_offset_checkpoint};
use topicfs_format::file_name::{parse_partition_dir, parse_special_dir, partition_dir_name};
use topicfs_format::log_dir_layout::{self, EntryKind, Layout, RootEntry};
use topicfs_format::properties::{format_properties, parse_properties};
use topicfs_source::error::{Error, FileType, Result};
use topicfs_source::sync::lock;

use super::cache::SegmentCache;
use super::cluster_metadata::{ClusterMetadataConfigs, ClusterMetadataReader};
use super::log::{LOCAL_SIZING_BUDGET, LoadState, Log};
use super::open;
use super::segment::{SegmentMode, now_ms};
use topicfs_settings::config::{BrokerSettings, LogConfig};
use topicfs_settings::topic_config::{
    Resolved, TOPIC_CONFIG_FILE, TopicSettings, differing_settings, format_topic_config_file,
    parse_topic_config_file,
};
use topicfs_source::ConfigChange;

mod checkpoints;
mod classify;
mod create;
mod lock;
mod metadata;
mod scan;
mod settings;
mod setup;
mod shared;

use checkpoints::read_checkpoint;
pub use classify::classify_data_dir;
use lock::{DirLock, take_lock};
use metadata::{broker_settings, open_cluster_metadata};
pub(crate) use setup::LogSetup;
pub use shared::SharedSettings;
use shared::excluded_entries;
pub(crate) use shared::{HeldLock, Member};

pub use crate::meta_properties::META_PROPERTIES;
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

/// A Kafka data directory; see the module doc.
#[derive(Debug)]
pub struct LogDir {
    path: PathBuf,
    mode: SegmentMode,
    /// The topics' settings: the broker's, shared with the other log dirs of its `log.dirs`
    /// ([`SharedSettings`]).
    shared: Arc<SharedSettings>,
    /// The [`SharedSettings::generation`] this dir's partitions were last given their settings
    /// at; behind it, the next [`LogDir::logs`] or [`LogDir::log`] gives them again.
    applied_generation: AtomicU64,
    /// The topics last logged as having unknown settings (logged again only when this changes).
    unknown_logged: Mutex<Option<BTreeSet<String>>>,
    /// Partitions not loaded because another log dir of the mount holds them too
    /// ([`crate::log_dirs`]), with their checkpoint entries as read at open (recovery point,
    /// log start offset), written back unchanged so nothing of theirs is lost.
    excluded: BTreeMap<(String, u32), (Option<i64>, Option<i64>)>,
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
    /// What every partition is given when loaded or created, shared by the broker's dirs
    /// ([`LogSetup`]).
    setup: Arc<LogSetup>,
    /// The entries kept beside the segments ([`SegmentCache::beside_segments`]): stored by a
    /// writable mount, loaded by any.
    beside: Arc<SegmentCache>,
}

impl LogDir {
    /// Opens the data dir `path` as one of a broker's log dirs ([`crate::log_dirs::LogDirs`],
    /// which opens every dir, one dir being a set of one): writable (`mode`) takes the
    /// `.lock` (unless `member` holds it), creates `meta.properties` if missing, loads and
    /// recovers every partition; read-only changes nothing under the dir. The topics' settings
    /// are `member`'s, and its excluded partitions are neither loaded nor forgotten (their
    /// checkpoint entries are kept). `Error::Locked` if a broker or another process holds the
    /// dir.
    pub(crate) fn open_member(
        path: &Path,
        mode: SegmentMode,
        mut member: Member,
        setup: Arc<LogSetup>,
    ) -> Result<LogDir> {
        let writable = mode == SegmentMode::Writable;
        let held = member.take_lock();
        if writable {
            std::fs::create_dir_all(path).map_err(|e| Error::io(path, "mkdir", e))?;
        } else if !path.is_dir() {
            return Err(Error::NotFound(path.display().to_string()));
        }
        let lock_file = match (writable, held) {
            (true, Some(HeldLock(lock))) => Some(lock),
            (true, None) => Some(take_lock(path)?),
            (false, _) => None,
        };
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
        let (shared, excluded) = match member {
            Member::Home {
                metadata_home,
                conflict,
                excluded,
                default_config,
                topic_configs,
                ..
            } => (
                Arc::new(SharedSettings::load(
                    path,
                    Some(metadata_home.as_deref().unwrap_or(path)),
                    &meta,
                    &default_config,
                    &topic_configs,
                    conflict,
                )?),
                excluded_entries(path, &excluded),
            ),
            Member::Of { settings, excluded, .. } => {
                let kept = excluded_entries(path, &excluded);
                (settings, kept)
            }
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
            applied_generation: AtomicU64::new(shared.generation()),
            shared,
            unknown_logged: Mutex::new(None),
            excluded,
            lock_file: Mutex::new(lock_file),
            logs: RwLock::new(BTreeMap::new()),
            had_clean_shutdown,
            meta,
            shut_down: AtomicBool::new(false),
            admin_lock: Mutex::new(()),
            last_rescan_ms: AtomicI64::new(now_ms()),
            failed: Mutex::new(BTreeSet::new()),
            setup,
            beside: Arc::new(SegmentCache::beside_segments(
                &std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
                writable,
            )),
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

    /// The entries kept beside the segments (see [`SegmentCache::beside_segments`]).
    pub fn beside_segments(&self) -> Arc<SegmentCache> {
        Arc::clone(&self.beside)
    }

    /// The segment cache the mount set ([`crate::log_dirs::LogDirs::set_cache`]).
    fn cache(&self) -> Arc<SegmentCache> {
        self.setup.cache()
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

    /// One partition's log.
    pub fn log(&self, topic: &str, partition: u32) -> Result<Arc<Log>> {
        self.maybe_rescan();
        self.catch_up_settings();
        self.logs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(topic.to_string(), partition))
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("{topic} partition {partition}")))
    }

    /// The partitions loaded now, without listing the dir again (an offline dir's as they
    /// were).
    pub fn loaded_partitions(&self) -> Vec<(String, u32)> {
        self.logs.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
    }

    /// The partitions of `topic` loaded now, sorted, without listing the dir again.
    pub fn loaded_partitions_of(&self, topic: &str) -> Vec<u32> {
        let logs = self.logs.read().unwrap_or_else(|e| e.into_inner());
        logs.keys().filter(|(t, _)| t == topic).map(|(_, p)| *p).collect()
    }

    /// Whether the partition is loaded now, without listing the dir again.
    pub fn holds_partition(&self, topic: &str, partition: u32) -> bool {
        self.logs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&(topic.to_string(), partition))
    }

    /// All partition logs, by (topic, partition).
    pub fn logs(&self) -> Vec<Arc<Log>> {
        self.catch_up_settings();
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

    /// Whether appends and creations are refused.
    pub fn is_read_only(&self) -> bool {
        self.mode == SegmentMode::ReadOnly
    }

    /// The storage of the file system holding the dir (`statvfs`).
    pub fn space(&self) -> Result<topicfs_source::SpaceStats> {
        let path = self.path();
        let st = nix::sys::statvfs::statvfs(path)
            .map_err(|e| Error::io(path, "statvfs", std::io::Error::from(e)))?;
        Ok(topicfs_source::SpaceStats {
            block_size: u32::try_from(st.block_size()).unwrap_or(u32::MAX),
            fragment_size: u32::try_from(st.fragment_size()).unwrap_or(u32::MAX),
            blocks: st.blocks(),
            blocks_free: st.blocks_free(),
            blocks_available: st.blocks_available(),
            files: st.files(),
            files_free: st.files_free(),
        })
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

/// Writes `meta.properties` (version 1) into `dir`, a new log dir of the broker `identity`
/// names (a random `cluster.id` and node 0 when it names none), with a `directory.id` of its
/// own when the broker's other dirs carry one. Kafka writes the same into a log dir that lacks
/// it at startup.
pub fn write_identity(dir: &Path, identity: &crate::meta_properties::Identity) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, "mkdir", e))?;
    let mut props = BTreeMap::new();
    props.insert("version".to_string(), "1".to_string());
    let cluster = match &identity.cluster_id {
        Some(id) => id.clone(),
        None => format_uuid(&random_uuid(dir)?),
    };
    props.insert("cluster.id".to_string(), cluster);
    props.insert("node.id".to_string(), identity.node_id.clone().unwrap_or_else(|| "0".into()));
    if identity.directory_ids {
        props.insert("directory.id".to_string(), format_uuid(&random_uuid(dir)?));
    }
    let date = chrono::Utc::now().format("%a %b %d %H:%M:%S UTC %Y").to_string();
    write_atomically(dir, META_PROPERTIES, &format_properties(&props, &date))
}

/// A new random `cluster.id` (for a new broker's first log dir, `for_dir` in errors).
pub fn new_cluster_id(for_dir: &Path) -> Result<String> {
    Ok(format_uuid(&random_uuid(&for_dir.join(META_PROPERTIES))?))
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
mod tests {
    use super::*;
    use crate::log_dirs::LogDirs;

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
        let mode = SegmentMode::Writable;
        let dir = LogDirs::open_dir(&data, LogConfig::default(), HashMap::new(), mode).unwrap();
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
