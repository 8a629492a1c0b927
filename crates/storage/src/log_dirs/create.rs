//! Creating topics and partitions across a broker's log dirs, each partition where Kafka's
//! `LogManager` would put it.

use super::*;
use crate::log_dir::KAFKA_MAX_PARTITIONS;
use topicfs_format::file_name::{has_collision, validate_topic_name};

/// The rules a new topic's name and partition count follow, whichever dirs it goes to: Kafka's
/// topic name rules, at least one partition and at most [`KAFKA_MAX_PARTITIONS`].
fn check_new_topic(topic: &str, partitions: u32) -> Result<()> {
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
    Ok(())
}

impl LogDirs {
    /// `ReadOnly` on a read-only mount, `StaleHandle` once shut down (checked on the dir
    /// keeping the topics' settings, which a creation writes first).
    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.home().dir.check_writable()
    }

    /// Creates partition `partition` of `topic` in the dir Kafka's `nextLogDirs` names
    /// ([`placement`]): the online dir holding the fewest partitions; a dir whose creation
    /// fails with a disk error goes offline and the next is tried, as Kafka's
    /// `getOrCreateLog` does. Caller holds `create_lock`.
    fn place(&self, topic: &str, partition: u32) -> Result<()> {
        let online: Vec<&Dir> = self.dirs.iter().filter(|d| d.health.is_online()).collect();
        if online.is_empty() {
            return Err(self.home().health.offline_error());
        }
        let counts: Vec<(&str, usize)> = online
            .iter()
            .map(|d| (d.given.as_str(), d.dir.loaded_partitions().len() + d.futures))
            .collect();
        let mut last_error = None;
        for i in placement::next_log_dirs(&counts) {
            let Some(d) = online.get(i) else { continue };
            match d.health.watch(d.dir.create_partition_here(topic, partition)) {
                Ok(()) => {
                    log::info!(
                        "created partition {topic}-{partition} in {} ({} partitions there before)",
                        d.dir.path().display(),
                        counts.get(i).map_or(0, |c| c.1)
                    );
                    return Ok(());
                }
                // Tried in the next dir only when this one failed (went offline).
                Err(e) if !d.health.is_online() => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| self.home().health.offline_error()))
    }

    /// Creates `topic` with partitions `0..partitions` (Kafka's topic name rules) across the
    /// dirs, all of them or none: refused before anything is created when the name is
    /// invalid, exists in any dir, or collides with an existing topic's once `.` and `_` are
    /// taken as one (Kafka's `Topic.hasCollision`: both would report metrics under one name),
    /// or when `partitions` is 0 or above [`KAFKA_MAX_PARTITIONS`]; a partition that fails to
    /// be created removes the ones made before it.
    pub fn create_topic(&self, topic: &str, partitions: u32) -> Result<()> {
        self.check_writable()?;
        check_new_topic(topic, partitions)?;
        let _guard = lock(&self.create_lock);
        let topics = self.topic_names();
        let held = lock(&self.duplicates).keys().any(|(t, _)| t == topic);
        if held || topics.iter().any(|t| t == topic) {
            return Err(Error::AlreadyExists(format!("topic {topic}")));
        }
        if let Some(existing) = topics.iter().find(|t| has_collision(t, topic)) {
            return Err(Error::InvalidInput(format!(
                "topic {topic:?} collides with existing topic {existing:?}: Kafka treats '.' \
                 and '_' in topic names alike (metric names), so it refuses both"
            )));
        }
        // The settings entry first: a crash before the partitions exist leaves an entry
        // without a topic (harmless), never a topic created here without known settings.
        let home = self.home();
        if home.health.is_online() {
            home.health.watch(self.settings.record_topic(topic))?;
        } else {
            log::warn!(
                "topic {topic}: no settings entry recorded, {} (which keeps the topics' \
                 overrides) is offline: its settings stay unknown (no retention by time or \
                 size, no compaction) until a later mount sets them",
                home.dir.path().display()
            );
        }
        for p in 0..partitions {
            if let Err(err) = self.place(topic, p) {
                for made in 0..p {
                    if let Some(d) = self.dirs.iter().find(|d| d.dir.holds_partition(topic, made)) {
                        d.dir.remove_new_partition(topic, made);
                    }
                }
                return Err(err);
            }
        }
        Ok(())
    }

    /// Adds partition `partition` to `topic`; only the next number is accepted, and none past
    /// [`KAFKA_MAX_PARTITIONS`].
    pub fn create_partition(&self, topic: &str, partition: u32) -> Result<()> {
        self.check_writable()?;
        let _guard = lock(&self.create_lock);
        let existing = self.partition_numbers(topic)?;
        let hidden: Vec<u32> =
            lock(&self.duplicates).keys().filter(|(t, _)| t == topic).map(|(_, p)| *p).collect();
        let next = existing.iter().chain(&hidden).max().map_or(0, |p| p + 1);
        if existing.contains(&partition) || hidden.contains(&partition) {
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
        self.place(topic, partition)
    }
}
