//! Creating a partition in a writable [`LogDir`], the dir [`crate::log_dirs::LogDirs`] placed
//! it in (which checked the topic's name and the partition's number against every dir).

use super::*;

impl LogDir {
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.mode == SegmentMode::ReadOnly {
            return Err(Error::ReadOnly);
        }
        if self.shut_down.load(Ordering::Acquire) {
            return Err(Error::StaleHandle);
        }
        Ok(())
    }

    /// Creates partition `partition` of `topic` in this dir ([`crate::log_dirs::LogDirs`]
    /// checked the name and number against every dir of the broker).
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

    fn create_log(&self, topic: &str, partition: u32) -> Result<()> {
        let dir = self.path.join(partition_dir_name(topic, partition));
        let resolved = self.resolve_topic(topic);
        let log = Log::create(&dir, topic, partition, resolved.config)?;
        log.set_settings_known(resolved.known);
        self.setup.give(&log, &self.beside);
        sync_dir(&self.path)?;
        self.logs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert((topic.to_string(), partition), Arc::new(log));
        Ok(())
    }
}
