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
        for seg in self.segments_from(self.recovery_point()) {
            seg.sync()?;
        }
        crate::storage::open::sync_dir(&self.dir)?;
        self.recovery_point.fetch_max(log_end.0, Ordering::AcqRel);
        Ok(())
    }

    /// Closes cleanly: final time-index entry and trimmed indexes for the active segment, then
    /// everything fsynced. Appends fail afterwards. Idempotent.
    pub fn close(&self) -> Result<()> {
        let _guard = lock(&self.append_lock);
        if self.closed.swap(true, Ordering::AcqRel) || !self.writable() {
            return Ok(());
        }
        for seg in self.segment_list() {
            seg.close_indexes()?;
        }
        drop(_guard);
        self.sync()
    }
}
