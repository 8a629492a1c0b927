//! The topics' settings of the broker, changed through its log dirs as one: each change is
//! made to the one [`crate::log_dir::SharedSettings`] and then given to the partitions of
//! every dir at once.
//! The overrides file is in one dir ([`settings_home`]): a change that writes it is refused
//! (`EIO`, naming that dir) while that dir is offline.

use super::*;
use topicfs_settings::config::BrokerSettings;

impl LogDirs {
    /// Gives every dir's partitions the settings as they are now, and logs (writable, once
    /// per change of that set) the topics whose settings are still unknown.
    fn settings_changed(&self) {
        for d in &self.dirs {
            d.dir.catch_up_settings();
            if d.health.is_online() {
                d.dir.log_unknown_topics();
            }
        }
    }

    /// The mount's `--config` layer, in effect at once. The open derives the layer from its
    /// `LogConfig` (the settings that differ from Kafka's defaults); this states it exactly, so
    /// a setting given at its Kafka default still counts as the mount's (above
    /// `server.properties`). `InvalidInput` naming the setting and the rule, nothing changed.
    pub fn set_mount_defaults(&self, settings: BTreeMap<String, String>) -> Result<()> {
        self.settings.set_mount_defaults(settings)?;
        self.settings_changed();
        Ok(())
    }

    /// The broker's static settings (`--server-properties`, in topic-level names) as the layer
    /// below the mount's `--config`, keeping what the broker's metadata log holds; in effect
    /// at once.
    pub fn set_static_defaults(&self, settings: BTreeMap<String, String>) {
        self.settings.set_static_defaults(settings);
        self.settings_changed();
    }

    /// Takes what the broker holds for the topics (its KRaft metadata, `server.properties`) as
    /// the layers between the topics' overrides and Kafka's defaults ([`topicfs_settings::topic_config`]
    /// for the precedence), in effect at once: the next append, roll and retention pass use
    /// them.
    pub fn set_broker_settings(&self, broker: BrokerSettings) {
        self.settings.set_broker_settings(broker);
        self.settings_changed();
    }

    /// `topic`'s settings as resolved now: what the log cleaner asks before each pass, so a
    /// `config` change applies to the next one.
    pub fn resolve_topic(&self, topic: &str) -> topicfs_settings::topic_config::Resolved {
        self.settings.resolve_topic(topic)
    }

    /// The effective configuration of `topic` (see [`topicfs_settings::topic_config`]).
    pub fn config_for(&self, topic: &str) -> LogConfig {
        self.settings.config_for(topic)
    }

    /// Whether `topic`'s settings are known (see [`topicfs_settings::topic_config`]).
    pub fn topic_settings_known(&self, topic: &str) -> bool {
        self.settings.topic_settings_known(topic)
    }

    /// [`TopicSource::topic_config`]: every effective setting of `topic`, sorted by name, with
    /// its source. `NotFound` for a topic without partitions.
    pub(super) fn config_entries(&self, topic: &str) -> Result<Vec<ConfigEntry>> {
        self.partition_numbers(topic)?;
        Ok(self.settings.resolve_topic(topic).entries)
    }

    /// [`TopicSource::alter_topic_config`]: validated, written to the overrides file
    /// (crash-safe), in effect at once. `NotFound` for a topic without partitions, `ReadOnly`
    /// on a read-only mount, `StaleHandle` after the shutdown, the offline error while the
    /// settings' dir is offline.
    pub(super) fn alter_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        self.partition_numbers(topic)?;
        let home = self.home();
        home.health.ensure_online()?;
        home.dir.check_writable()?;
        home.health.watch(self.settings.alter_topic_config(topic, changes))?;
        self.settings_changed();
        Ok(())
    }

    /// What [`LogDirs::alter_config`] would answer, changing nothing.
    pub(super) fn check_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        self.partition_numbers(topic)?;
        let home = self.home();
        home.health.ensure_online()?;
        home.dir.check_writable()?;
        self.settings.check_topic_config(topic, changes)
    }
}
