//! The topics' settings of one broker, shared by the [`LogDir`]s of its `log.dirs`.
//!
//! A broker's topic settings are per topic, not per log dir: its KRaft metadata log
//! (`__cluster_metadata-0`, in one dir: `metadata.log.dir`, by default the first of
//! `log.dirs`) holds them for every dir, and topicfs's overrides file
//! ([`TOPIC_CONFIG_FILE`]) is kept in one dir, whichever the order of the dirs
//! ([`crate::log_dirs::settings_home`]). Every [`LogDir`] of a
//! mount resolves its partitions' settings from the one [`SharedSettings`]; a change (made
//! through [`crate::log_dirs::LogDirs`], or read from the metadata log) raises
//! [`SharedSettings::generation`], and each dir gives its partitions the new settings
//! ([`LogDir::catch_up_settings`]: at once for a change made through the mount, at its next
//! lookup otherwise).
//!
//! Invariant: `generation` is raised after every change of `settings`, under `change_lock`;
//! a dir whose applied generation equals it has given every loaded partition the settings as
//! they are.

use super::*;

/// What a [`LogDir`] is opened as: one of a broker's log dirs (one dir is a set of one).
#[derive(Debug)]
pub(crate) enum Member {
    /// The broker's log dir whose [`TOPIC_CONFIG_FILE`] holds the overrides; the broker's
    /// metadata log is read from `metadata_home` (this dir when `None`); the other dirs share
    /// its settings ([`LogDir::shared_settings`]).
    Home {
        /// The mount's defaults (`--config`; boxed: the other variant is small) and the
        /// engine's internal topics' settings.
        default_config: Box<LogConfig>,
        topic_configs: HashMap<String, LogConfig>,
        metadata_home: Option<PathBuf>,
        /// Another dir's overrides file differs from this one's (byte position, what): this
        /// one is taken as damaged (see [`SharedSettings::load`]).
        conflict: Option<(u64, String)>,
        excluded: BTreeSet<(String, u32)>,
        /// The dir's locks, taken before any dir of the broker was opened.
        lock: Option<HeldLock>,
    },
    /// One of a broker's other log dirs: the broker's settings, and the partitions another dir holds
    /// too, which this one leaves alone.
    Of {
        settings: Arc<SharedSettings>,
        excluded: BTreeSet<(String, u32)>,
        /// The dir's locks, taken before any dir of the broker was opened.
        lock: Option<HeldLock>,
    },
}

impl Member {
    pub(super) fn take_lock(&mut self) -> Option<HeldLock> {
        match self {
            Member::Home { lock, .. } | Member::Of { lock, .. } => lock.take(),
        }
    }
}

/// A writable dir's locks ([`LogDir::lock_dir`]), taken ahead of its open so that a broker's
/// dirs are all locked before any of them changes (a dir found locked then leaves every other
/// one untouched).
#[derive(Debug)]
pub(crate) struct HeldLock(pub(super) lock::DirLock);

impl LogDir {
    /// Takes `dir`'s locks without waiting ([`Error::Locked`] when another process holds
    /// them), for a later [`LogDir::open_member`] as a [`Member`] holding them.
    pub(crate) fn lock_dir(dir: &Path) -> Result<HeldLock> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, "mkdir", e))?;
        lock::take_lock(dir).map(HeldLock)
    }
}

/// The topics' settings of one broker; see the module doc.
#[derive(Debug)]
pub struct SharedSettings {
    /// The log dir whose [`TOPIC_CONFIG_FILE`] holds the overrides.
    pub(super) file_home: PathBuf,
    /// The log dir holding the broker's `__cluster_metadata-0`, if one does.
    pub(super) metadata_home: Option<PathBuf>,
    /// `meta.properties` of `file_home` (the broker's node id for the metadata log).
    pub(super) meta: BTreeMap<String, String>,
    /// Every layer of the topics' settings ([`topicfs_settings::topic_config`]). Changed under
    /// `change_lock` (after the file is written, for the overrides); read without it.
    pub(super) settings: RwLock<TopicSettings>,
    /// [`TOPIC_CONFIG_FILE`] could not be read (byte position of the bad line, what is wrong):
    /// no topic has known settings through it, and changes are refused so the file (the only
    /// copy of its overrides) is never replaced until it is fixed or removed.
    pub(super) damage: Option<(u64, String)>,
    /// The broker's KRaft metadata log, read at open for the topics' broker layers and,
    /// read-only, again at each rescan (a running broker changes it); `None` when no dir has
    /// one (yet).
    pub(super) metadata: Mutex<Option<ClusterMetadataReader>>,
    /// Problems of broker settings already logged (each once).
    pub(super) problems_logged: Mutex<BTreeSet<String>>,
    /// Serializes changes of `settings` and writes of [`TOPIC_CONFIG_FILE`]. Taken after a
    /// dir's `admin_lock` when both are held, never before.
    pub(super) change_lock: Mutex<()>,
    generation: AtomicU64,
}

impl SharedSettings {
    /// Reads the overrides of `file_home` and the metadata log of `metadata_home`, with the
    /// mount's defaults (`default_config`) and the engine's internal topics' settings.
    /// `conflict`: another dir's overrides file differs from `file_home`'s (byte position,
    /// what, logged by the caller): the file is then taken as damaged, no override is read.
    pub fn load(
        file_home: &Path,
        metadata_home: Option<&Path>,
        meta: &BTreeMap<String, String>,
        default_config: &LogConfig,
        topic_configs: &HashMap<String, LogConfig>,
        conflict: Option<(u64, String)>,
    ) -> Result<SharedSettings> {
        let (overrides, damage) = match super::settings::load_topic_config_file(file_home)? {
            (overrides, None) if conflict.is_none() => (overrides, None),
            (_, damage) => (Default::default(), damage.or(conflict)),
        };
        let metadata = metadata_home.and_then(|home| open_cluster_metadata(home, meta));
        let settings = TopicSettings {
            mount_defaults: differing_settings(default_config, &LogConfig::default()),
            internal: topic_configs
                .iter()
                .map(|(topic, config)| (topic.clone(), differing_settings(config, default_config)))
                .collect(),
            broker: metadata
                .as_ref()
                .map(|m| broker_settings(m.configs(), BTreeMap::new()))
                .unwrap_or_default(),
            overrides,
        };
        Ok(SharedSettings {
            file_home: file_home.to_path_buf(),
            metadata_home: metadata_home.map(Path::to_path_buf),
            meta: meta.clone(),
            settings: RwLock::new(settings),
            damage,
            metadata: Mutex::new(metadata),
            problems_logged: Mutex::new(BTreeSet::new()),
            change_lock: Mutex::new(()),
            generation: AtomicU64::new(0),
        })
    }

    /// Raised at every change; see the module doc.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Marks a change of `settings` (caller holds `change_lock`).
    pub(super) fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The dir whose [`TOPIC_CONFIG_FILE`] holds the overrides.
    pub fn file_home(&self) -> &Path {
        &self.file_home
    }

    /// The dir holding the broker's metadata log, if any.
    pub fn metadata_home(&self) -> Option<&Path> {
        self.metadata_home.as_deref()
    }
}

impl LogDir {
    /// Gives this dir's partitions the shared settings when they changed since it last did
    /// (see the module doc).
    pub(crate) fn catch_up_settings(&self) {
        let now = self.shared.generation();
        let seen = self.applied_generation.load(Ordering::Acquire);
        if seen != now
            && self
                .applied_generation
                .compare_exchange(seen, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.apply_settings(None);
        }
    }

    /// The broker's settings this dir resolves its topics with.
    pub fn shared_settings(&self) -> &Arc<SharedSettings> {
        &self.shared
    }
}

/// The checkpoint entries (recovery point, log start offset) of `excluded` partitions as
/// `dir`'s checkpoint files hold them now.
pub(super) fn excluded_entries(
    dir: &Path,
    excluded: &BTreeSet<(String, u32)>,
) -> BTreeMap<(String, u32), (Option<i64>, Option<i64>)> {
    if excluded.is_empty() {
        return BTreeMap::new();
    }
    let recovery_points = read_checkpoint(&dir.join(RECOVERY_POINT_CHECKPOINT));
    let log_starts = read_checkpoint(&dir.join(LOG_START_OFFSET_CHECKPOINT));
    excluded
        .iter()
        .map(|key| (key.clone(), (recovery_points.get(key).copied(), log_starts.get(key).copied())))
        .collect()
}
