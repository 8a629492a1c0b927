//! The rewrite hooks the log cleaner (the `topicfs-cleaner` crate, a client of this one) uses:
//! the append lock for its swap, opening its output under the final name, installing it in the
//! segment map in place of the segments it replaces, and the delete horizon it leaves. The
//! engine knows nothing else of the cleaner: the files it writes beside the segments
//! (`.cleaned`, `.swap`) are the crash protocol `crate::swap` reads back at load.

use super::*;

impl Log {
    /// Whether the log may be written (a writable mount, no refused file).
    pub fn is_writable(&self) -> bool {
        self.writable()
    }

    /// The append lock (appends, rolls, retention and close wait while it is held): the cleaner
    /// holds it only to check its inputs are unchanged and swap its output in.
    pub fn cleaner_lock(&self) -> AppendGuard<'_> {
        AppendGuard::new(&self.writer)
    }

    /// Opens the cleaner's output, renamed to its final name, as a sealed segment.
    pub fn open_cleaned_segment(&self, base: Offset) -> Result<LogSegment> {
        let config = self.config();
        let seg = LogSegment::open(
            &self.dir,
            base,
            SegmentMode::Writable,
            config.segment_index_bytes,
            config.index_interval_bytes,
            false,
        )?;
        // 1 ..= 2^24 - 1, wrapping, never 0 (the generation of segments loaded from disk).
        let next = self.cleaner.generation.fetch_add(1, Ordering::AcqRel);
        seg.set_generation(next % 0xFF_FFFF + 1);
        Ok(seg)
    }

    /// Puts `output` in the segment map in place of `inputs` (the caller holds
    /// [`Log::cleaner_lock`] and renamed the files). Readers holding an input keep reading its
    /// open file; new lookups find the output.
    pub fn install_cleaned(&self, inputs: &[Arc<LogSegment>], output: Arc<LogSegment>) {
        // Counted with the change: whoever reads the new count and then looks a segment up
        // finds the output, and a reader that found the output sees the new count next.
        self.segments.replace(inputs, output);
        let bases: Vec<Offset> = inputs.iter().map(|s| s.base_offset()).collect();
        self.keys.forget_segments(&bases);
        *lock(&self.last_modified) = SystemTime::now();
    }

    /// Cleaner outputs installed in this log so far (see [`topicfs_source::Known::rewrites`]).
    pub fn rewrites(&self) -> u64 {
        self.segments.rewrites()
    }

    /// The latest delete horizon the cleaner left in this log's batches (`-1`: none), Kafka's
    /// `UnifiedLog.latestDeleteHorizon`: once it has passed, a pass is due even without new
    /// dirty data, to drop the tombstones and markers.
    pub fn latest_delete_horizon(&self) -> Timestamp {
        self.cleaner.latest_delete_horizon.load(Ordering::Acquire)
    }

    /// Records the delete horizon a cleaner pass left in this log's batches.
    pub fn set_latest_delete_horizon(&self, horizon: Timestamp) {
        self.cleaner.latest_delete_horizon.store(horizon, Ordering::Release);
    }
}
