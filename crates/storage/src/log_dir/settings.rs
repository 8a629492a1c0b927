//! The topics' settings of a broker: the changes to its [`SharedSettings`] (broker and mount
//! layers, overrides) and how a [`LogDir`] gives its partitions the settings as they are now.
//!
//! A change is made to the [`SharedSettings`] alone (it raises the generation); the broker's
//! dirs ([`crate::log_dirs::LogDirs`], the one place changes come from, and a read-only dir
//! that read the broker's metadata log again) then give their partitions the new settings
//! ([`LogDir::catch_up_settings`]).

use super::*;

impl SharedSettings {
    /// Takes what the broker holds for the topics (its KRaft metadata, `server.properties`)
    /// as the layers between the topics' overrides and Kafka's defaults
    /// ([`topicfs_settings::topic_config`] for the precedence).
    pub(crate) fn set_broker_settings(&self, broker: BrokerSettings) {
        let _guard = lock(&self.change_lock);
        self.settings.write().unwrap_or_else(|e| e.into_inner()).broker = broker;
        self.changed();
    }

    /// Takes a broker's static settings (`--server-properties`, in topic-level names) as the
    /// layer below the mount's `--config`, keeping what the broker's metadata log holds.
    pub(crate) fn set_static_defaults(&self, static_defaults: BTreeMap<String, String>) {
        let mut broker = self.settings.read().unwrap_or_else(|e| e.into_inner()).broker.clone();
        broker.static_defaults = static_defaults;
        self.set_broker_settings(broker);
    }

    /// Replaces the mount's defaults (the `--config` layer) with `settings`, by name. The open
    /// derives the layer from its `LogConfig` (the settings that differ from Kafka's
    /// defaults); this states it exactly, so a setting given at its Kafka default still counts
    /// as the mount's (above `server.properties`). `InvalidInput` naming the setting and the
    /// rule, nothing changed.
    pub(crate) fn set_mount_defaults(&self, settings: BTreeMap<String, String>) -> Result<()> {
        let mut rendered = BTreeMap::new();
        for (name, value) in settings {
            let mut probe = LogConfig::default();
            probe.set(&name, &value)?;
            let shown = probe.get(&name).unwrap_or(value);
            rendered.insert(name, shown);
        }
        let _guard = lock(&self.change_lock);
        self.settings.write().unwrap_or_else(|e| e.into_inner()).mount_defaults = rendered;
        self.changed();
        Ok(())
    }

    /// The effective settings of `topic` (see [`topicfs_settings::topic_config`]); a problem with a value
    /// is logged once.
    pub(crate) fn resolve_topic(&self, topic: &str) -> Resolved {
        let resolved = self.settings.read().unwrap_or_else(|e| e.into_inner()).resolve(topic);
        for problem in &resolved.problems {
            if lock(&self.problems_logged).insert(format!("{topic}: {problem}")) {
                log::warn!(
                    "topic {topic}: {problem}; its settings count as unknown (no retention by \
                     time or size, no compaction) until that value is fixed or the topic sets \
                     its own in MNT/{topic}/config"
                );
            }
        }
        resolved
    }

    /// The effective configuration of `topic`.
    pub(crate) fn config_for(&self, topic: &str) -> LogConfig {
        self.resolve_topic(topic).config
    }

    /// Whether `topic`'s settings are known (see [`topicfs_settings::topic_config`]).
    pub(crate) fn topic_settings_known(&self, topic: &str) -> bool {
        self.resolve_topic(topic).known
    }

    /// What [`SharedSettings::alter_topic_config`] would answer, changing nothing.
    pub(crate) fn check_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        if let Some((at, why)) = &self.damage {
            let file = self.file_home.join(TOPIC_CONFIG_FILE);
            return Err(Error::corrupt(file, *at, why.clone()));
        }
        self.settings.read().unwrap_or_else(|e| e.into_inner()).changed(topic, changes)?;
        Ok(())
    }

    /// Applies `changes` to `topic`'s overrides, all or nothing: validated, then written to
    /// [`TOPIC_CONFIG_FILE`] (crash-safe); the caller then gives the partitions the new
    /// settings. The caller checked that the topic has partitions (in any dir) and that the
    /// mount is writable. Only [`ConfigChange::MakeKnown`] makes unknown settings known
    /// ([`TopicSettings::changed`]). `InvalidInput` naming the setting and the rule (nothing
    /// changed), `Corrupt` (EIO) while the file is damaged (see `load_topic_config_file`).
    pub(crate) fn alter_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        let home = &self.file_home;
        if let Some((at, why)) = &self.damage {
            return Err(Error::corrupt(home.join(TOPIC_CONFIG_FILE), *at, why.clone()));
        }
        let _guard = lock(&self.change_lock);
        let (candidate, was_known) = {
            let settings = self.settings.read().unwrap_or_else(|e| e.into_inner());
            (settings.changed(topic, changes)?, settings.has_entry(topic))
        };
        let unchanged =
            candidate == self.settings.read().unwrap_or_else(|e| e.into_inner()).overrides;
        if unchanged {
            return Ok(());
        }
        write_atomically(home, TOPIC_CONFIG_FILE, &format_topic_config_file(&candidate))?;
        let known = {
            let mut settings = self.settings.write().unwrap_or_else(|e| e.into_inner());
            settings.overrides = candidate;
            settings.has_entry(topic)
        };
        self.changed();
        let described: Vec<String> = changes
            .iter()
            .filter_map(|c| match c {
                ConfigChange::Set { name, value } => Some(format!("{name}={value}")),
                ConfigChange::Remove { name } => Some(format!("{name} removed")),
                ConfigChange::MakeKnown => None,
            })
            .collect();
        if !described.is_empty() {
            log::info!("topic {topic}: settings changed: {}", described.join(", "));
        }
        if known && !was_known {
            log::info!("topic {topic}: settings known now (retention and compaction apply)");
        }
        Ok(())
    }

    /// Gives `topic` an entry (no override) in [`TOPIC_CONFIG_FILE`] unless it has one:
    /// its settings are then known.
    pub(crate) fn record_topic(&self, topic: &str) -> Result<()> {
        if self.damage.is_some() {
            // The damaged file is not replaced: the new topic's settings stay unknown (safe).
            return Ok(());
        }
        let _guard = lock(&self.change_lock);
        let mut candidate =
            self.settings.read().unwrap_or_else(|e| e.into_inner()).overrides.clone();
        if candidate.topics.contains_key(topic) && !candidate.unknown.contains(topic) {
            return Ok(());
        }
        candidate.unknown.remove(topic);
        candidate.topics.entry(topic.to_string()).or_default();
        let home = &self.file_home;
        write_atomically(home, TOPIC_CONFIG_FILE, &format_topic_config_file(&candidate))?;
        self.settings.write().unwrap_or_else(|e| e.into_inner()).overrides = candidate;
        self.changed();
        Ok(())
    }
}

impl LogDir {
    /// The effective settings of `topic`, from the broker's settings.
    pub(super) fn resolve_topic(&self, topic: &str) -> Resolved {
        self.shared.resolve_topic(topic)
    }

    /// Gives the partitions of `topic` (all when `None`) their configuration as resolved now.
    pub(super) fn apply_settings(&self, topic: Option<&str>) {
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
    pub(crate) fn log_unknown_topics(&self) {
        if self.mode != SegmentMode::Writable {
            return;
        }
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
            let topics = unknown.iter().cloned().collect::<Vec<_>>().join(", ");
            let how = match &self.shared.damage {
                // Writes of `config` fail while the file is damaged: the way out is the file.
                Some(_) => format!(
                    "{} is damaged (logged above): fix or remove it, then remount",
                    self.shared.file_home.join(TOPIC_CONFIG_FILE).display()
                ),
                None => "write cleanup.policy=delete (or compact) to MNT/<topic>/config to \
                         make them known; other settings written there apply at once"
                    .to_string(),
            };
            log::warn!(
                "{}: settings unknown for topic(s) {topics}: no retention by time or size and \
                 no compaction there until they are known ({how})",
                self.path.display(),
            );
        }
        *logged = Some(unknown);
    }
}

/// The overrides of [`TOPIC_CONFIG_FILE`] (absent: none), and its damage if it cannot be
/// parsed (a bad line, not UTF-8): then it is logged once at error level, left as it is, and no
/// topic has known settings through it (nothing is deleted on guessed settings); reads and
/// appends go on. A file that cannot be read at all (not a regular file on a read-only mount,
/// an I/O error) is taken the same way; a writable open refuses a non-regular one earlier, as
/// for the checkpoints. The file is read only here: fixing it takes a remount.
pub(super) fn load_topic_config_file(
    dir: &Path,
) -> Result<(topicfs_settings::topic_config::Overrides, Option<(u64, String)>)> {
    let path = dir.join(TOPIC_CONFIG_FILE);
    let damage = match open::read_regular_to_string(&path) {
        Ok(text) => match parse_topic_config_file(&text) {
            Ok(overrides) => return Ok((overrides, None)),
            Err(damage) => damage,
        },
        Err(e) if open::is_not_found(&e) => return Ok((Default::default(), None)),
        Err(e) => (0, e.to_string()),
    };
    let e = Error::corrupt(&path, damage.0, damage.1.clone());
    log::error!(
        "{e}; every topic's settings count as unknown (no retention by time or size, no \
         compaction) and writes of MNT/<topic>/config fail (EIO) until the file is fixed or \
         removed and the data dir mounted again"
    );
    Ok((Default::default(), Some(damage)))
}
