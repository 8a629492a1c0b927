//! The partition's summary now ([`Log::summary`]): offsets, segment count, bytes, first and
//! max timestamps, with the caches that keep it from costing one segment per segment.

use super::*;

impl Log {
    /// Offsets, sizes and timestamps now.
    pub fn summary(&self) -> Result<PartitionSummary> {
        self.maybe_refresh()?;
        let (segment_count, size_bytes, max_timestamp) = self.segment_totals()?;
        let log_start = self.log_start_offset();
        let log_end = self.log_end_offset();
        Ok(PartitionSummary {
            log_start_offset: log_start,
            log_end_offset: log_end,
            segment_count: Some(segment_count),
            size_bytes: Some(size_bytes),
            first_timestamp: self.first_timestamp(log_start, log_end)?,
            max_timestamp,
            last_modified: *lock(&self.last_modified),
        })
    }

    /// When the partition last changed (last append, roll or deletion) as far as this log
    /// knows, without looking at the directory again ([`Log::summary`] does on a read-only
    /// log).
    pub fn last_modified(&self) -> SystemTime {
        *lock(&self.last_modified)
    }

    /// Segment count, total bytes and max timestamp: the sealed segments' totals are kept
    /// while the segment map is unchanged (`SegmentsView::sealed_totals`), the last segment is
    /// read live.
    fn segment_totals(&self) -> Result<(usize, u64, Option<Timestamp>)> {
        let view = self.segments.read();
        let Some(last) = view.last() else { return Ok((0, 0, None)) };
        let sealed = view.sealed_totals()?;
        let last_max = last.max_timestamp_so_far()?.map(|(ts, _)| ts);
        // `None` is below every timestamp.
        let max = sealed.max_timestamp.max(last_max);
        Ok((view.len(), sealed.bytes.saturating_add(last.size()), max))
    }

    /// Timestamp of the first record at or after the log start offset (kept per log start).
    fn first_timestamp(&self, log_start: Offset, log_end: Offset) -> Result<Option<Timestamp>> {
        if log_start >= log_end {
            return Ok(None);
        }
        // Nothing holds a lock here (this memo's is taken first, see the module doc's order).
        self.first_timestamp.get_or_try_compute(log_start, || self.read_first_timestamp(log_start))
    }

    /// Timestamp of the first record at or after `log_start`, read from the log.
    fn read_first_timestamp(&self, log_start: Offset) -> Result<Option<Timestamp>> {
        let cursor = self.seek(log_start)?;
        let chunk = self.read(&cursor, 1)?;
        let mut found = None;
        if !chunk.bytes.is_empty() {
            let at = SegmentCursor::of(&cursor)
                .map_or((Offset(0), 0), |c| (c.segment_base, c.position.0));
            let batch = decode_batch(&chunk.bytes).map_err(|e| {
                Error::corrupt(
                    segment_file_path(&self.dir, at.0, ".log"),
                    at.1 + e.at as u64,
                    e.to_string(),
                )
            })?;
            for record in batch.records() {
                let Ok(record) = record else { break };
                if record.offset >= log_start {
                    found = Some(record.timestamp);
                    break;
                }
            }
        }
        Ok(found)
    }
}
