//! Creating topics and partitions in a writable [`LogDir`].

use super::*;

/// The rules a new topic's name and partition count follow, whichever dirs it goes to: Kafka's
/// topic name rules, at least one partition and at most [`KAFKA_MAX_PARTITIONS`].
pub(crate) fn check_new_topic(topic: &str, partitions: u32) -> Result<()> {
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

impl LogDir {
    pub(super) fn check_writable(&self) -> Result<()> {
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
        check_new_topic(topic, partitions)?;
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
    pub(super) fn remove_created(&self, topic: &str, failed: u32) {
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

    /// Creates partition `partition` of `topic` in this dir, one of a broker's several
    /// ([`crate::log_dirs::LogDirs`], which checked the name and number against all of them).
    pub fn create_partition_here(&self, topic: &str, partition: u32) -> Result<()> {
        self.check_writable()?;
        let _guard = lock(&self.admin_lock);
        if self.holds_partition(topic, partition) {
            return Err(Error::AlreadyExists(format!("{topic} partition {partition}")));
        }
        self.create_log(topic, partition)
    }

    /// Undoes [`LogDir::create_partition_here`] of a topic whose creation failed later (the
    /// partition holds no record). Failures are logged.
    pub fn remove_new_partition(&self, topic: &str, partition: u32) {
        let _guard = lock(&self.admin_lock);
        self.logs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(topic.to_string(), partition));
        let dir = self.path.join(partition_dir_name(topic, partition));
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            log::warn!("cannot remove {} after a failed topic creation: {e}", dir.display());
        }
        if let Err(e) = sync_dir(&self.path) {
            log::warn!("{e}");
        }
    }

    pub(super) fn create_log(&self, topic: &str, partition: u32) -> Result<()> {
        let dir = self.path.join(partition_dir_name(topic, partition));
        let resolved = self.resolve_topic(topic);
        let log = Log::create(&dir, topic, partition, resolved.config)?;
        log.set_settings_known(resolved.known);
        log.set_sizing_budget(self.sizing_budget());
        log.set_cache(self.cache());
        log.set_beside_segments(self.beside_segments());
        log.keys().set_executor(self.executor());
        sync_dir(&self.path)?;
        self.logs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert((topic.to_string(), partition), Arc::new(log));
        Ok(())
    }
}
