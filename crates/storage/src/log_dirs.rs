//! A broker's log dirs (`log.dirs=/a,/b,...`, one per disk) as one set of topics: Kafka's
//! `LogManager` over all its dirs, where [`LogDir`] is one of them. This is the one local
//! [`TopicSource`]: a mount of one data dir is a set of one ([`LogDirs::open_dir`]), and every
//! partition is handed out behind its dir's offline guard ([`health::DirPartition`]).
//!
//! - **One broker.** The dirs' `meta.properties` agree on `cluster.id` and the node id, and no
//!   two share a `directory.id` ([`identity`]); otherwise nothing is opened. A writable mount
//!   gives a dir without `meta.properties` the others' identity (and its own `directory.id`
//!   when theirs carry one).
//! - **Every partition once.** A partition lives in the dir holding its directory; a
//!   `-future` directory (an intra-broker move in progress) is not served, its current replica
//!   is. A partition found current in two dirs is served by neither: Kafka refuses to start
//!   then ("Duplicate log directories for ... are found in both ..."); topicfs leaves both
//!   copies untouched (not loaded, not recovered, their checkpoint entries kept), logs it, and
//!   names it in [`TopicSource::log_dirs`].
//! - **Per-dir files.** Each dir keeps its own `.lock`, clean-shutdown marker and checkpoints
//!   (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
//!   `cleaner-offset-checkpoint`) for the partitions it holds, as a broker does; the topics'
//!   settings are the broker's, one for all dirs ([`crate::log_dir::SharedSettings`]: the
//!   overrides file in one dir whatever the order the dirs are given in ([`settings_home`]),
//!   the metadata log wherever `__cluster_metadata-0` is).
//! - **One owner of what the mount sets.** The topics' settings ([`LogDirs::set_mount_defaults`],
//!   [`TopicSource::alter_topic_config`] and the like) and
//!   what every partition is given (the sizing budget, the segment cache, the executor:
//!   [`LogDirs::set_sizing_budget`], [`LogDirs::set_cache`], [`LogDirs::set_executor`]) are
//!   set here, once for every dir.
//! - **Placement.** A new partition goes where Kafka's `LogManager.nextLogDirs` puts it
//!   ([`placement`]): the online dir holding the fewest partitions (current and future).
//! - **A failing dir does not take the others down** ([`health`]): it goes offline, its
//!   partitions answer `EIO`, nothing is written to it; the others go on.

mod create;
pub mod health;
pub mod identity;
pub mod placement;
mod settings;
pub mod settings_home;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use topicfs_format::file_name::{SpecialDirKind, parse_partition_dir, parse_special_dir};
use topicfs_format::properties::parse_properties;
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_source::{
    ConfigChange, ConfigEntry, LogDirStatus, LogDirsReport, PartitionSource, SpaceStats,
    TopicSource, max_message_bytes_of,
};

use crate::cache::SegmentCache;
use crate::log::Log;
use crate::log_dir::{LogDir, LogSetup, META_PROPERTIES, Member};
use crate::open;
use crate::segment::SegmentMode;
use health::{DirHealth, DirPartition};
use topicfs_settings::config::LogConfig;

/// The KRaft metadata log's partition directory.
const CLUSTER_METADATA_DIR: &str = "__cluster_metadata-0";

/// One dir of the mount.
#[derive(Debug)]
struct Dir {
    dir: Arc<LogDir>,
    health: Arc<DirHealth>,
    /// The path as the mount was given it, made absolute as Kafka's `LogManager` makes a
    /// `log.dirs` entry (`File.getAbsoluteFile.getPath`), which orders dirs holding as many
    /// partitions ([`placement`]).
    given: String,
    /// `-future` partition directories found at open (counted by placement, as Kafka's
    /// `allLogs` counts future logs).
    futures: usize,
}

/// A broker's log dirs (one or more) as one [`TopicSource`]; see the module doc.
#[derive(Debug)]
pub struct LogDirs {
    dirs: Vec<Dir>,
    /// The index in `dirs` of the dir keeping the topics' overrides file ([`settings_home`]).
    home: usize,
    read_only: bool,
    /// Partitions current in more than one dir, with those dirs: served by none.
    duplicates: Mutex<BTreeMap<(String, u32), Vec<PathBuf>>>,
    /// Serializes topic and partition creation across the dirs.
    create_lock: Mutex<()>,
    /// What every partition of every dir is given (sizing budget, segment cache, executor):
    /// set here only.
    setup: Arc<LogSetup>,
    /// The broker's topic settings, one for all dirs (loaded by the `home` dir): changed here
    /// only, save what a read-only dir reads again from the broker's metadata log.
    settings: Arc<crate::log_dir::SharedSettings>,
}

/// What a dir holds by name, before it is opened.
#[derive(Default)]
struct Listing {
    current: BTreeSet<(String, u32)>,
    futures: usize,
    has_metadata_log: bool,
}

fn list_dir(path: &Path) -> Result<Listing> {
    let mut listing = Listing::default();
    let entries = match open::read_dir(path) {
        Ok(entries) => entries,
        // A writable mount creates a dir that does not exist yet.
        Err(e) if open::is_not_found(&e) => return Ok(listing),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(path, "readdir", e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        if !entry.path().is_dir() {
            continue;
        }
        if name == CLUSTER_METADATA_DIR {
            listing.has_metadata_log = true;
            continue;
        }
        if let Some(special) = parse_special_dir(&name) {
            if special.kind == SpecialDirKind::Future {
                listing.futures += 1;
            }
            continue;
        }
        if let Some(key) = parse_partition_dir(&name) {
            listing.current.insert(key);
        }
    }
    Ok(listing)
}

/// `meta.properties` of `dir`, if it has one. Read-only, one that is not a regular file is as
/// good as none (as a read-only [`LogDir::open_member`] takes it); writable, it is refused (the
/// open would refuse it too).
fn read_meta(dir: &Path, writable: bool) -> Result<Option<BTreeMap<String, String>>> {
    let path = dir.join(META_PROPERTIES);
    match open::read_regular_to_string(&path) {
        Ok(text) => parse_properties(&text)
            .map(Some)
            .map_err(|e| Error::corrupt(&path, e.at as u64, e.to_string())),
        Err(e) if open::is_not_found(&e) => Ok(None),
        Err(Error::WrongFileType { .. }) if !writable => Ok(None),
        Err(e) => Err(e),
    }
}

impl LogDirs {
    /// Opens one data dir, the single-dir mount: [`LogDirs::open`] of a set of one, `path` as
    /// given.
    pub fn open_dir(
        path: &Path,
        default_config: LogConfig,
        topic_configs: HashMap<String, LogConfig>,
        mode: SegmentMode,
    ) -> Result<LogDirs> {
        let given = [(path.display().to_string(), path.to_path_buf())];
        LogDirs::open(&given, default_config, topic_configs, mode)
    }

    /// Opens the log dirs `dirs` (each as (the `log.dirs` entry as given, its path)) of one
    /// broker: checks that they are one broker's, finds partitions held twice, opens each dir
    /// with the broker's shared settings. `mode` applies to all: writable, each dir is locked
    /// (all before any is changed), gets `meta.properties` if missing, and has its partitions
    /// loaded and recovered; read-only, nothing under the dirs changes. Errors:
    /// [`Error::Mount`] naming the files and fields that differ, a dir given twice; a dir
    /// another process holds ([`Error::Locked`]); a read-only dir that does not exist
    /// ([`Error::NotFound`]); a writable dir whose checkpoints or overrides file are not
    /// regular files ([`Error::WrongFileType`]).
    pub fn open(
        dirs: &[(String, PathBuf)],
        default_config: LogConfig,
        topic_configs: HashMap<String, LogConfig>,
        mode: SegmentMode,
    ) -> Result<LogDirs> {
        if dirs.is_empty() {
            return Err(Error::Mount("no log dir given".to_string()));
        }
        let writable = mode == SegmentMode::Writable;
        let mut seen = BTreeMap::new();
        for (given, path) in dirs {
            let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
            if let Some(before) = seen.insert(canonical, given) {
                return Err(Error::Mount(format!(
                    "log dir {before} is given twice (as {before} and {given})"
                )));
            }
        }
        let mut metas = Vec::with_capacity(dirs.len());
        for (_, path) in dirs {
            metas.push((path.clone(), read_meta(path, writable)?));
        }
        let mut agreed = identity::agree(&metas)?;
        // Then every dir locked before anything is written: a dir another process holds fails
        // the open here, with no other dir changed (locks are released on drop).
        let mut locks = Vec::with_capacity(dirs.len());
        for (_, path) in dirs {
            locks.push(if writable { Some(LogDir::lock_dir(path)?) } else { None });
        }
        let mut listings = Vec::with_capacity(dirs.len());
        for (_, path) in dirs {
            listings.push(list_dir(path)?);
        }
        let mut holders: BTreeMap<(String, u32), Vec<PathBuf>> = BTreeMap::new();
        for ((_, path), listing) in dirs.iter().zip(&listings) {
            for key in &listing.current {
                holders.entry(key.clone()).or_default().push(path.clone());
            }
        }
        let duplicates: BTreeMap<(String, u32), Vec<PathBuf>> =
            holders.into_iter().filter(|(_, held)| held.len() > 1).collect();
        for ((topic, partition), held) in &duplicates {
            log::error!(
                "partition {topic}-{partition} is in more than one log dir ({}): serving \
                 neither and leaving both as they are. A broker refuses to start so; remove the \
                 copy that is out of date (usually the one in the dir that failed recently)",
                held.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            );
        }
        if writable && dirs.len() > 1 {
            // New dirs all: one new broker identity for them all.
            if agreed.cluster_id.is_none() {
                agreed.cluster_id = Some(crate::log_dir::new_cluster_id(&dirs[0].1)?);
            }
            for ((_, path), (_, meta)) in dirs.iter().zip(&metas) {
                if meta.is_none() {
                    crate::log_dir::write_identity(path, &agreed)?;
                }
            }
        }
        let metadata_home = dirs
            .iter()
            .zip(&listings)
            .find(|(_, l)| l.has_metadata_log)
            .map(|((_, path), _)| path.clone());
        let excluded_in = |path: &Path| -> BTreeSet<(String, u32)> {
            duplicates
                .iter()
                .filter(|(_, held)| held.iter().any(|h| h == path))
                .map(|(key, _)| key.clone())
                .collect()
        };
        let paths: Vec<PathBuf> = dirs.iter().map(|(_, path)| path.clone()).collect();
        let (home, mut conflict) = settings_home::settings_home(&paths, writable)?;
        let setup = Arc::new(LogSetup::new());
        // The settings' home first: the others share its settings.
        let mut opened: Vec<Option<Dir>> = dirs.iter().map(|_| None).collect();
        for i in std::iter::once(home).chain((0..dirs.len()).filter(|&i| i != home)) {
            let (Some((given, path)), Some(listing)) = (dirs.get(i), listings.get(i)) else {
                continue;
            };
            let lock = locks.get_mut(i).and_then(Option::take);
            let member = match opened.get(home).and_then(Option::as_ref) {
                None => Member::Home {
                    default_config: Box::new(default_config.clone()),
                    topic_configs: topic_configs.clone(),
                    metadata_home: metadata_home.clone(),
                    conflict: conflict.take(),
                    excluded: excluded_in(path),
                    lock,
                },
                Some(home) => Member::Of {
                    settings: Arc::clone(home.dir.shared_settings()),
                    excluded: excluded_in(path),
                    lock,
                },
            };
            let dir = LogDir::open_member(path, mode, member, Arc::clone(&setup))?;
            opened[i] = Some(Dir {
                health: Arc::new(DirHealth::new(path)),
                dir: Arc::new(dir),
                given: placement::java_file_path(
                    &std::path::absolute(given)
                        .unwrap_or_else(|_| PathBuf::from(given))
                        .to_string_lossy(),
                ),
                futures: listing.futures,
            });
        }
        let settings = match opened.get(home).and_then(Option::as_ref) {
            Some(d) => Arc::clone(d.dir.shared_settings()),
            None => return Err(Error::Mount("no log dir opened".to_string())),
        };
        let opened: Vec<Dir> = opened.into_iter().flatten().collect();
        Ok(LogDirs {
            dirs: opened,
            home,
            read_only: !writable,
            duplicates: Mutex::new(duplicates),
            create_lock: Mutex::new(()),
            setup,
            settings,
        })
    }

    /// The dirs, in the order given.
    pub fn dirs(&self) -> Vec<Arc<LogDir>> {
        self.dirs.iter().map(|d| Arc::clone(&d.dir)).collect()
    }

    /// The online dirs with their health, in the order given.
    pub fn online(&self) -> Vec<(Arc<LogDir>, Arc<DirHealth>)> {
        self.dirs
            .iter()
            .filter(|d| d.health.is_online())
            .map(|d| (Arc::clone(&d.dir), Arc::clone(&d.health)))
            .collect()
    }

    /// The dir keeping the topics' overrides file ([`settings_home`]).
    fn home(&self) -> &Dir {
        // `open` refuses an empty list and opens every dir, `home` among them.
        &self.dirs[self.home]
    }

    /// Partition `topic`-`partition` as current in the dirs' listings now: the dir holding it,
    /// `None` when none does; a partition held by two is recorded as a duplicate (logged once)
    /// and `None`.
    fn holder(&self, topic: &str, partition: u32) -> Option<&Dir> {
        if lock(&self.duplicates).contains_key(&(topic.to_string(), partition)) {
            return None;
        }
        let mut found = self.dirs.iter().filter(|d| {
            if d.health.is_online() {
                // Lists the dir again now and then on a read-only mount (a broker's changes).
                d.dir.log(topic, partition).is_ok()
            } else {
                d.dir.holds_partition(topic, partition)
            }
        });
        let first = found.next()?;
        let rest: Vec<&Dir> = found.collect();
        if rest.is_empty() {
            return Some(first);
        }
        let held: Vec<PathBuf> =
            std::iter::once(first).chain(rest).map(|d| d.dir.path().to_path_buf()).collect();
        self.record_duplicate(topic, partition, held);
        None
    }

    fn record_duplicate(&self, topic: &str, partition: u32, held: Vec<PathBuf>) {
        let mut duplicates = lock(&self.duplicates);
        if duplicates.contains_key(&(topic.to_string(), partition)) {
            return;
        }
        log::error!(
            "partition {topic}-{partition} appeared in more than one log dir ({}): serving \
             neither",
            held.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
        duplicates.insert((topic.to_string(), partition), held);
    }

    /// Whether `d` is online, checking the dir itself now and then (see [`health`]).
    fn looks_online(d: &Dir) -> bool {
        d.health.check_now_and_then()
    }

    /// Partition numbers of `topic` in each dir (an online read-only dir listed again now and
    /// then, an offline one as loaded), merged; a partition in two dirs is recorded as a
    /// duplicate and left out.
    fn merged_partitions(&self, topic: &str) -> Vec<u32> {
        let mut holders: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, d) in self.dirs.iter().enumerate() {
            let numbers = if LogDirs::looks_online(d) {
                d.dir.partition_numbers(topic).unwrap_or_default()
            } else {
                d.dir.loaded_partitions_of(topic)
            };
            for p in numbers {
                holders.entry(p).or_default().push(i);
            }
        }
        for (p, held) in holders.iter().filter(|(_, held)| held.len() > 1) {
            let paths = held
                .iter()
                .filter_map(|&i| self.dirs.get(i))
                .map(|d| d.dir.path().to_path_buf())
                .collect();
            self.record_duplicate(topic, *p, paths);
        }
        let duplicates = lock(&self.duplicates);
        holders.into_keys().filter(|p| !duplicates.contains_key(&(topic.to_string(), *p))).collect()
    }

    /// One partition's log (for the engine's own users: groups, tools); `LogDirOffline` while
    /// its dir is offline.
    pub fn log(&self, topic: &str, partition: u32) -> Result<Arc<Log>> {
        let Some(d) = self.holder(topic, partition) else {
            return Err(Error::NotFound(format!("{topic} partition {partition}")));
        };
        d.health.ensure_online()?;
        d.health.watch(d.dir.log(topic, partition))
    }

    /// Looks at an error met on a log handed out by [`LogDirs::log`]: the dir holding the
    /// file it names takes it as its own ([`DirHealth::observe`]: offline on a disk error).
    pub fn observe(&self, err: &Error) {
        for d in &self.dirs {
            d.health.observe(err);
        }
    }

    /// Topic names, sorted: every topic with a partition served.
    pub fn topic_names(&self) -> Vec<String> {
        let mut names = BTreeSet::new();
        for d in &self.dirs {
            if LogDirs::looks_online(d) {
                names.extend(d.dir.topic_names());
            } else {
                names.extend(d.dir.loaded_partitions().into_iter().map(|(t, _)| t));
            }
        }
        // A topic all of whose partitions are duplicates has none served (only topics with a
        // duplicate are asked, so a listing stays one pass over each dir).
        let with_duplicates: BTreeSet<String> =
            lock(&self.duplicates).keys().map(|(t, _)| t.clone()).collect();
        names
            .into_iter()
            .filter(|t| !with_duplicates.contains(t) || !self.merged_partitions(t).is_empty())
            .collect()
    }

    /// Partition numbers of `topic`, sorted; `NotFound` for an unknown topic.
    pub fn partition_numbers(&self, topic: &str) -> Result<Vec<u32>> {
        let parts = self.merged_partitions(topic);
        if parts.is_empty() {
            return Err(Error::NotFound(format!("topic {topic}")));
        }
        Ok(parts)
    }

    /// Whether appends and creations are refused.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Every partition's log in every dir, loaded now (an offline dir's as they were).
    pub fn logs(&self) -> Vec<Arc<Log>> {
        self.dirs.iter().flat_map(|d| d.dir.logs()).collect()
    }

    /// Sets the sizing budget of every partition, loaded now or later: the log bytes a
    /// stream's `stat` or `open` may render to learn its size (`--sizing-budget`; default
    /// [`crate::LOCAL_SIZING_BUDGET`]).
    pub fn set_sizing_budget(&self, bytes: u64) {
        self.setup.sizing_budget.store(bytes, std::sync::atomic::Ordering::Relaxed);
        for log in self.logs() {
            log.set_sizing_budget(bytes);
        }
    }

    /// See [`LogDirs::set_sizing_budget`].
    pub fn sizing_budget(&self) -> u64 {
        self.setup.sizing_budget()
    }

    /// Runs the engine's background work from now on as [`topicfs_executor::Class::Store`]
    /// tasks of `executor`, the mount's one executor (the filesystem's too): every partition's
    /// key-index builds, loaded now or later, and the segment caches' writes. Without it
    /// (tests, tools) they run on the calling thread; no thread is started either way.
    pub fn set_executor(&self, executor: topicfs_executor::Executor) {
        *self.setup.executor.write().unwrap_or_else(|e| e.into_inner()) = Some(executor.clone());
        self.setup.cache().set_executor(executor.clone());
        for d in &self.dirs {
            d.dir.beside_segments().set_executor(executor.clone());
        }
        for log in self.logs() {
            log.keys().set_executor(Some(executor.clone()));
        }
    }

    /// See [`LogDirs::set_executor`].
    pub fn executor(&self) -> Option<topicfs_executor::Executor> {
        self.setup.executor()
    }

    /// Sets the segment cache of every partition, loaded now or later (`--cache-dir`; one for
    /// all dirs; it lives outside them, so a read-only mount still writes nothing there).
    pub fn set_cache(&self, cache: Arc<SegmentCache>) {
        if let Some(executor) = self.setup.executor() {
            cache.set_executor(executor);
        }
        *self.setup.cache.write().unwrap_or_else(|e| e.into_inner()) = Arc::clone(&cache);
        for log in self.logs() {
            log.set_cache(Arc::clone(&cache));
        }
    }

    /// See [`LogDirs::set_cache`].
    pub fn cache(&self) -> Arc<SegmentCache> {
        self.setup.cache()
    }

    /// Retention over every online dir ([`LogDir::enforce_retention`]); a dir that fails
    /// with a disk error goes offline and the others go on. Segments deleted.
    pub fn enforce_retention(&self) -> Result<usize> {
        let mut deleted = 0;
        let mut first_error = None;
        for (dir, health) in self.online() {
            match health.watch(dir.enforce_retention()) {
                Ok(n) => deleted += n,
                Err(e) => {
                    log::log!(e.log_level(), "retention in {}: {e}", dir.path().display());
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) if deleted == 0 => Err(e),
            _ => Ok(deleted),
        }
    }

    /// Shuts every online dir down cleanly ([`LogDir::shutdown`]); an offline dir is left as
    /// it is (nothing written to it: a broker recovers it as after a crash). Every dir is shut
    /// down even when one fails; the first failure is returned.
    pub fn shutdown(&self) -> Result<()> {
        let mut first_error = None;
        for d in &self.dirs {
            if !d.health.is_online() {
                log::warn!(
                    "{}: offline, so not shut down cleanly (no checkpoints, no clean-shutdown \
                     marker)",
                    d.dir.path().display()
                );
                continue;
            }
            if let Err(e) = d.health.watch(d.dir.shutdown()) {
                log::error!("clean shutdown of {}: {e}", d.dir.path().display());
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl TopicSource for LogDirs {
    fn topics(&self) -> Result<Vec<String>> {
        Ok(self.topic_names())
    }

    fn partitions(&self, topic: &str) -> Result<Vec<u32>> {
        self.partition_numbers(topic)
    }

    fn partition(&self, topic: &str, partition: u32) -> Result<Arc<dyn PartitionSource>> {
        let Some(d) = self.holder(topic, partition) else {
            return Err(Error::NotFound(format!("{topic} partition {partition}")));
        };
        d.health.ensure_online()?;
        let log = d.health.watch(d.dir.log(topic, partition))?;
        Ok(Arc::new(DirPartition::new(log, Arc::clone(&d.health))))
    }

    fn create_topic(&self, topic: &str, partitions: u32) -> Result<()> {
        LogDirs::create_topic(self, topic, partitions)
    }

    fn create_partition(&self, topic: &str, partition: u32) -> Result<()> {
        LogDirs::create_partition(self, topic, partition)
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn shutdown(&self) -> Result<()> {
        LogDirs::shutdown(self)
    }

    /// The storage of every online dir added up, each file system once (dirs on one device
    /// count once), in units of the first one's fragment size: what `df` of the mount shows.
    fn space(&self) -> Result<SpaceStats> {
        use std::os::unix::fs::MetadataExt;
        let mut total: Option<SpaceStats> = None;
        let mut devices = BTreeSet::new();
        for (dir, health) in self.online() {
            let device = std::fs::metadata(dir.path()).map(|m| m.dev()).ok();
            if device.is_some_and(|d| !devices.insert(d)) {
                continue;
            }
            let one = health.watch(dir.space())?;
            let Some(sum) = total.as_mut() else {
                total = Some(one);
                continue;
            };
            // Blocks counted in the first file system's fragment size.
            let unit = u64::from(sum.fragment_size.max(1));
            let scale = |n: u64| n.saturating_mul(u64::from(one.fragment_size)) / unit;
            sum.blocks = sum.blocks.saturating_add(scale(one.blocks));
            sum.blocks_free = sum.blocks_free.saturating_add(scale(one.blocks_free));
            sum.blocks_available = sum.blocks_available.saturating_add(scale(one.blocks_available));
            sum.files = sum.files.saturating_add(one.files);
            sum.files_free = sum.files_free.saturating_add(one.files_free);
        }
        total.ok_or_else(|| self.home().health.offline_error())
    }

    fn topic_config(&self, topic: &str) -> Result<Vec<ConfigEntry>> {
        self.config_entries(topic)
    }

    /// Written to the settings file of its dir ([`settings_home`]): refused (`EIO`, naming the
    /// dir) while that dir is offline.
    fn alter_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        self.alter_config(topic, changes)
    }

    fn check_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        self.check_config(topic, changes)
    }

    fn check_value_prefix(&self, name: &str, value: &str) -> Result<()> {
        topicfs_settings::config::check_value_prefix(name, value)
    }

    fn max_message_bytes(&self, topic: &str) -> Result<Option<usize>> {
        let entries = self.topic_config(topic)?;
        Ok(max_message_bytes_of(entries.iter().map(|e| (e.name.as_str(), e.value.as_deref()))))
    }

    /// Nothing to learn: local partitions know their bounds without I/O.
    fn state_bounds(&self, topic: &str) -> Result<()> {
        self.partition_numbers(topic).map(drop)
    }

    /// Nothing to do: reading a local partition is reading its mapped files.
    fn prefetch(&self, _topic: &str, _reads: &[(u32, topicfs_source::ReadCursor)]) -> Result<()> {
        Ok(())
    }

    /// Each partition in turn (local: no request to save).
    fn offsets_for(
        &self,
        topic: &str,
        query: topicfs_source::OffsetQuery,
    ) -> Result<Vec<(u32, topicfs_format::Offset)>> {
        let mut out = Vec::new();
        for p in self.partition_numbers(topic)? {
            out.push((p, self.partition(topic, p)?.offset_for(query)?));
        }
        Ok(out)
    }

    fn log_dirs(&self) -> LogDirsReport {
        let dirs = self
            .dirs
            .iter()
            .map(|d| LogDirStatus {
                path: d.dir.path().to_path_buf(),
                offline: d.health.offline(),
                partitions: d.dir.loaded_partitions().len(),
            })
            .collect();
        let duplicates = lock(&self.duplicates)
            .iter()
            .map(|((t, p), held)| (t.clone(), *p, held.clone()))
            .collect();
        LogDirsReport { dirs, duplicates }
    }
}

#[cfg(test)]
mod tests;
