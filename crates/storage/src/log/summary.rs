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

    /// Timestamp of the first record at or after the log start offset, kept per log start
    /// and cleaner pass (a pass may remove the first record without moving the log start).
    fn first_timestamp(&self, log_start: Offset, log_end: Offset) -> Result<Option<Timestamp>> {
        if log_start >= log_end {
            return Ok(None);
        }
        // Nothing holds a lock here (this memo's is taken first, see the module doc's order).
        let key = (log_start, self.rewrites());
        self.first_timestamp.get_or_try_compute(key, || self.read_first_timestamp(log_start))
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

#[cfg(test)]
mod tests {
    use topicfs_format::NewRecord;

    use super::*;

    fn record(timestamp: Timestamp) -> NewRecord {
        NewRecord { timestamp, key: None, value: Some(b"value".to_vec()), headers: vec![] }
    }

    /// What is kept for a version of the segment map (the sealed totals, the sealed segments'
    /// summaries, the timestamp search) follows each change: a roll, a retention pass.
    #[test]
    fn what_is_kept_for_the_segment_map_follows_each_change_of_it() {
        let tmp = tempfile::tempdir().unwrap();
        let config = LogConfig { retention_bytes: Some(1), ..LogConfig::default() };
        let log = Log::create(&tmp.path().join("t-0"), "t", 0, config).unwrap();
        let sizes = |log: &Log| log.segment_list().iter().map(|s| s.size()).sum::<u64>();
        for ts in [100, 200] {
            log.append(&[record(ts)]).unwrap();
            log.force_roll().unwrap();
        }
        log.append(&[record(300)]).unwrap();
        let summary = log.summary().unwrap();
        assert_eq!((summary.segment_count, summary.max_timestamp), (Some(3), Some(300)));
        assert_eq!(summary.size_bytes, Some(sizes(&log)));
        assert_eq!(log.segment_summaries().unwrap().len(), 3);
        assert_eq!(log.find_offset_by_timestamp(150).unwrap(), Some((Offset(1), 200)));
        // A roll: one more sealed segment, counted.
        log.force_roll().unwrap();
        log.append(&[record(50)]).unwrap();
        let summary = log.summary().unwrap();
        assert_eq!(summary.segment_count, Some(4));
        assert_eq!(summary.size_bytes, Some(sizes(&log)));
        assert_eq!(log.segment_summaries().unwrap().len(), 4);
        assert_eq!(log.find_offset_by_timestamp(250).unwrap(), Some((Offset(2), 300)));
        // Retention: the sealed segments go, and nothing kept of them is served.
        assert_eq!(log.delete_old_segments(0).unwrap(), 3);
        let summary = log.summary().unwrap();
        assert_eq!((summary.segment_count, summary.max_timestamp), (Some(1), Some(50)));
        assert_eq!(summary.size_bytes, Some(sizes(&log)));
        assert_eq!(log.segment_summaries().unwrap().len(), 1);
        assert_eq!(log.find_offset_by_timestamp(150).unwrap(), None);
        assert_eq!(log.find_offset_by_timestamp(10).unwrap(), Some((Offset(3), 50)));
    }
}
