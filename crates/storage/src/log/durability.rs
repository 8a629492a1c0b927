//! Durability and close: fsync from the recovery point on, and a clean close.

use super::*;

impl Log {
    /// Makes everything appended so far durable (fsync of `.log` and index files from the
    /// recovery point on, and of the directory) and advances the recovery point. Readers are
    /// never blocked; appends continue meanwhile.
    pub fn sync(&self) -> Result<()> {
        if !self.writable() {
            return Ok(());
        }
        let _guard = lock(&self.sync_lock);
        let log_end = self.log_end_offset();
        for seg in self.segments.from(self.recovery_point()) {
            seg.sync()?;
        }
        crate::open::sync_dir(&self.dir)?;
        self.offsets.advance_recovery_point(log_end);
        Ok(())
    }

    /// Closes cleanly: final time-index entry and trimmed indexes for the active segment, then
    /// everything fsynced. Appends fail afterwards. Idempotent.
    pub fn close(&self) -> Result<()> {
        match self.close_unsynced()? {
            Some(_) => self.sync(),
            None => Ok(()),
        }
    }

    /// [`Log::close`] without the fsync, for a caller that makes the whole file system durable
    /// at once (`syncfs`, [`crate::log_dir::LogDir::shutdown`]) and then calls
    /// [`Log::synced_to`] with the offset returned: the log end offset, final since appends
    /// now fail. `None` if already closed or read-only (nothing to sync).
    pub fn close_unsynced(&self) -> Result<Option<Offset>> {
        let mut writer = lock(&self.writer);
        if std::mem::replace(&mut writer.closed, true) || !self.writable() {
            return Ok(None);
        }
        for seg in self.segment_list() {
            seg.close_indexes()?;
        }
        Ok(Some(self.log_end_offset()))
    }

    /// The segments an fsync ([`Log::sync`]) would write: those from the recovery point on.
    pub fn unsynced_segments(&self) -> usize {
        self.segments.from(self.recovery_point()).len()
    }

    /// Records that everything below `offset` is durable, synced by the caller (`syncfs` of
    /// the file system holding the log): moves the recovery point up to it.
    ///
    /// Invariant: only called once the `.log` and index files of every segment from the
    /// recovery point on, and the partition directory, have been made durable.
    pub fn synced_to(&self, offset: Offset) {
        self.offsets.advance_recovery_point(offset);
    }
}
