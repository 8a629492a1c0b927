//! Retention: deleting old segments by Kafka's rules (log start offset breach,
//! `retention.bytes`, `retention.ms`), as `cleanup.policy` and known settings allow.

use super::*;

impl Log {
    /// Deletes old segments by Kafka's retention rules (log start offset breach, then
    /// `retention.bytes`, then `retention.ms` by each segment's max timestamp), each rule
    /// removing a prefix of the segments; the active segment is never deleted. Advances the log
    /// start offset to the first remaining segment. Returns the number of segments deleted.
    ///
    /// Rules 2 and 3 apply only when `cleanup.policy` includes `delete` and the topic's
    /// settings are known ([`Log::settings_known`]): a compacted topic is never deleted from by
    /// time or size (Kafka's `UnifiedLog.deleteOldSegments`), and a topic whose real settings
    /// topicfs cannot find keeps every segment a broker might keep. Rule 1 always applies, as
    /// in Kafka for every policy: the segments it deletes hold only offsets below the log start
    /// offset, which no reader can see any more (a broker with any settings deletes them too).
    pub fn delete_old_segments(&self, now: Timestamp) -> Result<usize> {
        if !self.writable() {
            return Ok(0);
        }
        let _writer = lock(&self.writer);
        let config = self.config();
        let by_time_and_size = config.cleanup_policy.delete && self.settings_known();
        let mut deleted = 0;
        let segments = self.segment_list();
        let sealed = segments.len().saturating_sub(1);
        let log_start = self.log_start_offset();
        // 1. Segments entirely below the log start offset.
        let mut prefix = 0;
        while prefix < sealed
            && segments.get(prefix + 1).is_some_and(|n| n.base_offset() <= log_start)
        {
            prefix += 1;
        }
        // 2. Size: while the log minus this segment is still at least retention.bytes.
        if let Some(limit) = config.retention_bytes.filter(|_| by_time_and_size) {
            let remaining: u64 = segments.iter().skip(prefix).map(|s| s.size()).sum();
            let mut excess = i128::from(remaining) - i128::from(limit);
            while prefix < sealed {
                let size = i128::from(segments.get(prefix).map_or(0, |s| s.size()));
                if excess < size {
                    break;
                }
                excess -= size;
                prefix += 1;
            }
        }
        // 3. Time: segments whose newest record is older than retention.ms.
        if let Some(retention_ms) = config.retention_ms.filter(|_| by_time_and_size) {
            while prefix < sealed {
                let Some(seg) = segments.get(prefix) else { break };
                if now.saturating_sub(seg.largest_timestamp()?) <= retention_ms {
                    break;
                }
                prefix += 1;
            }
        }
        for seg in segments.iter().take(prefix) {
            // Kafka's order: the log start offset moves past the segment (new seeks refuse its
            // offsets), then readers stop finding it, then the files go.
            if let Some(next) = segments.get(deleted + 1) {
                self.offsets.advance_start(next.base_offset());
            }
            self.segments.remove(seg.base_offset());
            log::info!("retention: deleting segment {}", seg.log_path().display());
            seg.delete_files()?;
            deleted += 1;
        }
        if deleted > 0 {
            *lock(&self.last_modified) = SystemTime::now();
        }
        Ok(deleted)
    }
}
