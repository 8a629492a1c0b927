//! Recovery and sanity: Kafka's `LogSegment.recover` (re-reading every batch and rebuilding
//! the indexes, dropping a torn or invalid tail) and, in read-only mode over a live broker,
//! taking in the whole batches appended since the segment was opened.

use super::*;

/// What recovery did to one segment.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RecoveryResult {
    /// Bytes dropped from the end of the `.log` (torn or invalid tail).
    pub truncated_bytes: u64,
    /// Position of the first dropped byte (the new size).
    pub valid_bytes: u64,
}

impl LogSegment {
    /// Kafka's `LogSegment.recover`: re-reads every batch from position 0, checks framing, CRC
    /// and offset order, rebuilds both indexes with the per-batch interval rule, and drops
    /// everything from the first invalid or torn batch on (the `.log` is truncated in writable
    /// mode; in read-only mode the committed size stops there and indexes live in memory).
    pub fn recover(&self) -> Result<RecoveryResult> {
        let file_len = self.log.metadata().map_err(|e| Error::io(&self.log_path, "stat", e))?.len();
        // Readers must not use the old indexes while they are rebuilt, and an old map of the
        // files is dropped before the files are opened again.
        let mut offset_guard = self.offset_index.write().unwrap_or_else(|e| e.into_inner());
        let mut time_guard = self.time_index.write().unwrap_or_else(|e| e.into_inner());
        *offset_guard = None;
        *time_guard = None;
        let (mut offset_index, mut time_index) = match self.mode {
            SegmentMode::Writable => {
                // Start from fresh, zero-filled files: nothing of the old ones can survive.
                for suffix in [".index", ".timeindex"] {
                    let path = self.file_path(suffix);
                    match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(Error::io(&path, "remove", e)),
                    }
                }
                let mut o = OffsetIndex::open_writable(
                    &self.file_path(".index"),
                    self.base_offset,
                    self.max_index_size,
                    true,
                )?;
                let mut t = TimeIndex::open_writable(
                    &self.file_path(".timeindex"),
                    self.base_offset,
                    self.max_index_size,
                    true,
                )?;
                o.reset()?;
                t.reset()?;
                (o, t)
            }
            SegmentMode::ReadOnly => (
                OffsetIndex::in_memory(
                    &self.file_path(".index"),
                    self.base_offset,
                    self.max_index_size,
                ),
                TimeIndex::in_memory(
                    &self.file_path(".timeindex"),
                    self.base_offset,
                    self.max_index_size,
                ),
            ),
        };
        let valid = self.walk_and_index(&mut offset_index, &mut time_index, file_len)?;
        let truncated = file_len - valid;
        if truncated > 0 {
            log::warn!(
                "recovery of {}: invalid or incomplete data at position {valid}, {truncated} bytes \
                 dropped",
                self.log_path.display()
            );
            if self.mode == SegmentMode::Writable {
                self.log.set_len(valid).map_err(|e| Error::io(&self.log_path, "truncate", e))?;
                self.crc_checked_to.fetch_min(valid, Ordering::AcqRel);
            }
        }
        self.size.store(valid, Ordering::Release);
        let (max_ts, max_offset) =
            *lock(&self.max_timestamp).get_or_insert((NO_TIMESTAMP, self.base_offset));
        offset_index.trim_to_valid_size()?;
        time_index.maybe_append(max_ts, max_offset, true)?;
        time_index.trim_to_valid_size()?;
        if self.is_active() {
            offset_index.resize(self.max_index_size)?;
            time_index.resize(self.max_index_size)?;
        }
        *offset_guard = Some(offset_index);
        *time_guard = Some(time_index);
        Ok(RecoveryResult { truncated_bytes: truncated, valid_bytes: valid })
    }

    /// The recovery walk shared by [`LogSegment::recover`] and read-only index rebuilds: returns
    /// the end of the last valid batch and leaves the segment's next offset, max timestamp and
    /// rolling timestamp set from what it read.
    pub(super) fn walk_and_index(
        &self,
        offset_index: &mut OffsetIndex,
        time_index: &mut TimeIndex,
        end: u64,
    ) -> Result<u64> {
        let mut reader = ChunkReader::new(&self.log, &self.log_path, end);
        let mut valid = 0u64;
        let mut last_index_entry = 0u64;
        let mut max = (NO_TIMESTAMP, self.base_offset);
        let mut next = self.base_offset;
        let mut first_ts = None;
        loop {
            let batch = match reader.batch_at(valid) {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(e) => {
                    log::warn!("{e}");
                    break;
                }
            };
            let Some(entry) = reader.entry(&batch)? else { break };
            if let Err(e) = verify_crc(entry) {
                log::warn!("{}", corrupt_at(&self.log_path, valid, e));
                break;
            }
            let info = &batch.info;
            let relative = info.last_offset.0.checked_sub(self.base_offset.0);
            let ordered = info.base_offset >= next && info.last_offset >= info.base_offset;
            if !ordered || !relative.is_some_and(|r| (0..=MAX_RELATIVE_OFFSET).contains(&r)) {
                log::warn!(
                    "{}: batch at position {valid} has offsets {}..={} out of order or outside \
                     the segment (expected >= {next})",
                    self.log_path.display(),
                    info.base_offset,
                    info.last_offset
                );
                break;
            }
            if info.max_timestamp > max.0 {
                max = (info.max_timestamp, info.last_offset);
            }
            if valid - last_index_entry > u64::from(self.index_interval_bytes) {
                offset_index.append(info.last_offset, Position(valid))?;
                time_index.maybe_append(max.0, max.1, true)?;
                last_index_entry = valid;
            }
            first_ts.get_or_insert(info.max_timestamp);
            next = info.last_offset.plus(1);
            valid = batch.end();
        }
        self.next_offset.store(next.0, Ordering::Release);
        *lock(&self.max_timestamp) = Some(max);
        let mut writer = lock(&self.writer);
        writer.rolling_based_timestamp = Some(first_ts.unwrap_or(NO_TIMESTAMP));
        writer.bytes_since_last_index_entry = valid - last_index_entry;
        Ok(valid)
    }

    /// Read-only mode, live broker: takes in the whole batches a writer appended since this
    /// segment was opened, up to the file's current length `file_len`. Each new batch must
    /// pass its CRC check (a batch still being written stops the scan until the next call);
    /// opened in-memory indexes get entries by the per-batch interval rule. Returns whether the
    /// committed size grew.
    pub fn extend_read_only(&self, file_len: u64) -> Result<bool> {
        let start = self.size();
        if self.mode != SegmentMode::ReadOnly || file_len <= start {
            return Ok(false);
        }
        let mut reader = ChunkReader::new(&self.log, &self.log_path, file_len);
        let mut valid = start;
        let mut max = self.max_timestamp_so_far()?.unwrap_or((NO_TIMESTAMP, self.base_offset));
        let mut next = self.next_offset()?;
        let mut new_batches = Vec::new();
        while let Ok(Some(batch)) = reader.batch_at(valid) {
            let Some(entry) = reader.entry(&batch)? else { break };
            if verify_crc(entry).is_err() || batch.info.base_offset < next {
                break;
            }
            if batch.info.max_timestamp > max.0 {
                max = (batch.info.max_timestamp, batch.info.last_offset);
            }
            next = batch.info.last_offset.plus(1);
            valid = batch.end();
            new_batches.push((
                batch.position,
                u64::from(batch.info.size),
                batch.info.last_offset,
                max,
            ));
        }
        if valid == start {
            return Ok(false);
        }
        // Publish first: index entries must never point past the committed size.
        *lock(&self.max_timestamp) = Some(max);
        self.next_offset.store(next.0, Ordering::Release);
        self.size.store(valid, Ordering::Release);
        *lock(&self.last_modified) = SystemTime::now();
        {
            let mut writer = lock(&self.writer);
            let mut offset_guard = self.offset_index.write().unwrap_or_else(|e| e.into_inner());
            let mut time_guard = self.time_index.write().unwrap_or_else(|e| e.into_inner());
            for (position, size, last_offset, (ts, ts_offset)) in new_batches {
                if writer.bytes_since_last_index_entry > u64::from(self.index_interval_bytes)
                    && let (Some(o), Some(t)) = (offset_guard.as_mut(), time_guard.as_mut())
                    && o.file().is_in_memory()
                    && last_offset > o.last_offset()
                    && !o.is_full()
                {
                    o.append(last_offset, position)?;
                    t.maybe_append(ts, ts_offset, true)?;
                    writer.bytes_since_last_index_entry = 0;
                }
                writer.bytes_since_last_index_entry += size;
            }
        }
        Ok(true)
    }
}
