//! Retention passes, checkpoint writes and the clean shutdown of a [`LogDir`].

use super::*;

impl LogDir {
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
        let mut recovery: Vec<(String, u32, i64)> = logs
            .iter()
            .map(|l| (l.topic().to_string(), l.partition(), l.recovery_point().0))
            .collect();
        let mut starts: Vec<(String, u32, i64)> = logs
            .iter()
            .filter(|l| {
                l.segment_list().first().is_some_and(|s| l.log_start_offset() > s.base_offset())
            })
            .map(|l| (l.topic().to_string(), l.partition(), l.log_start_offset().0))
            .collect();
        // Partitions left alone (held by another log dir too) keep their entries as read.
        for ((topic, partition), (recovery_point, log_start)) in &self.excluded {
            if let Some(offset) = recovery_point {
                recovery.push((topic.clone(), *partition, *offset));
            }
            if let Some(offset) = log_start {
                starts.push((topic.clone(), *partition, *offset));
            }
        }
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
        self.beside.flush();
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
    pub(super) fn syncfs(&self) -> Result<()> {
        let guard = lock(&self.lock_file);
        let held = guard.as_ref().ok_or_else(|| {
            Error::io(&self.path, "syncfs", std::io::Error::other("the data dir is not locked"))
        })?;
        nix::unistd::syncfs(&*held.dir).map_err(|e| Error::io(&self.path, "syncfs", e.into()))
    }
}

/// Reads an offset checkpoint into a map; a missing or unreadable file is empty (Kafka then
/// recovers from 0 and starts logs at their first segment).
pub(super) fn read_checkpoint(path: &Path) -> HashMap<(String, u32), i64> {
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
