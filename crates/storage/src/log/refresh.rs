//! Read-only mode over a live broker's directory: taking in what the broker changed (new
//! batches at the end of the active segment, rolled, deleted or truncated segments).

use super::*;

/// Read-only logs look for a broker's changes at most this often (ms).
const REFRESH_INTERVAL_MS: i64 = 200;

impl Log {
    /// Read-only mode: takes in what a broker changed since the last look, at most every
    /// 200 ms (called from the read paths). See [`Log::refresh`].
    pub(crate) fn maybe_refresh(&self) -> Result<()> {
        if self.writable() {
            return Ok(());
        }
        if !self.listing.claim_refresh(now_ms(), REFRESH_INTERVAL_MS) {
            return Ok(());
        }
        // A broker changing files between our listing and our stat is routine: try again at
        // the next interval instead of failing this read.
        if let Err(e) = self.refresh() {
            log::warn!("{}: refresh failed: {e}", self.dir.display());
        }
        Ok(())
    }

    /// Read-only mode: looks at the partition directory again. Whole new batches at the end of
    /// the active segment become visible (one `stat`, then a scan of only the new bytes); a
    /// new, deleted or shrunk segment (the broker rolled, deleted or truncated) makes the log
    /// reload its segment list. Returns whether anything changed. Writable logs are never
    /// changed behind our back (we hold the lock), so this is a no-op for them.
    pub fn refresh(&self) -> Result<bool> {
        if self.writable() {
            return Ok(false);
        }
        // A segment whose `.swap` the broker renamed to its final name reloads too: the old
        // names of its index files are gone.
        let on_disk = self.scan_files()?;
        let segments = self.segments.list();
        let known: Vec<SegmentFiles> = segments
            .iter()
            .map(|s| SegmentFiles { base_offset: s.base_offset(), swap: s.is_swap() })
            .collect();
        let active = self.segments.last();
        let shrunk = match &active {
            Some(seg) => std::fs::metadata(seg.log_path()).map_or(true, |m| m.len() < seg.size()),
            None => false,
        };
        if on_disk != known || shrunk {
            log::debug!("{}: segments changed on disk, reloading", self.dir.display());
            self.load(self.listing.load_state)?;
            return Ok(true);
        }
        let Some(active) = active else { return Ok(false) };
        let len = std::fs::metadata(active.log_path())
            .map_err(|e| Error::io(active.log_path(), "stat", e))?
            .len();
        if !active.extend_read_only(len)? {
            return Ok(false);
        }
        self.offsets.publish_end(active.next_offset()?);
        *lock(&self.last_modified) = SystemTime::now();
        Ok(true)
    }
}
