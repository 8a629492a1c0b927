//! The write side: whether to roll ([`LogSegment::should_roll`]), appends with their sparse
//! index entries, becoming inactive or active again, trimming indexes at close, fsync, and
//! deleting the segment's files.

use super::*;

impl LogSegment {
    /// Whether the next append of `set_size` bytes with max timestamp `max_timestamp` and last
    /// offset `last_offset` must go to a new segment (Kafka's `shouldRoll`).
    pub fn should_roll(
        &self,
        set_size: u64,
        max_timestamp: Timestamp,
        last_offset: Offset,
        segment_bytes: u64,
        max_segment_ms: i64,
    ) -> Result<bool> {
        let size = self.size();
        if size > segment_bytes.saturating_sub(set_size) {
            return Ok(true);
        }
        if size > 0 && self.time_waited_for_roll(max_timestamp)? > max_segment_ms {
            return Ok(true);
        }
        if self.with_offset_index(|idx| idx.is_full())? || self.with_time_index(|i| i.is_full())? {
            return Ok(true);
        }
        let relative = last_offset.0.checked_sub(self.base_offset.0);
        Ok(!relative.is_some_and(|r| (0..=MAX_RELATIVE_OFFSET).contains(&r)))
    }

    /// Kafka's `timeWaitedForRoll`: record time since the first batch when it had a timestamp,
    /// else wall time since this segment object was created.
    fn time_waited_for_roll(&self, max_timestamp: Timestamp) -> Result<i64> {
        let known = lock(&self.writer).rolling_based_timestamp;
        let first = match known {
            Some(ts) => ts,
            None => {
                let ts = self.first_batch_max_timestamp()?;
                lock(&self.writer).rolling_based_timestamp = Some(ts);
                ts
            }
        };
        if first >= 0 {
            Ok(max_timestamp.saturating_sub(first))
        } else {
            Ok(lock(&self.writer).created.elapsed().as_millis() as i64)
        }
    }

    fn first_batch_max_timestamp(&self) -> Result<Timestamp> {
        let mut reader = ChunkReader::new(&self.log, &self.log_path, self.size());
        Ok(reader.batch_at(0)?.map_or(NO_TIMESTAMP, |b| b.info.max_timestamp))
    }

    /// Appends a set of whole batches (Kafka's `LogSegment.append`): one `pwrite`, then the
    /// committed size is published, then the sparse indexes are updated (an entry for
    /// `largest_offset` at the set's position when more than `index.interval.bytes` were
    /// appended since the last entry). Only the log's writer calls this.
    pub fn append(
        &self,
        bytes: &[u8],
        largest_offset: Offset,
        max_timestamp: Timestamp,
        shallow_offset_of_max_timestamp: Offset,
    ) -> Result<()> {
        if self.mode == SegmentMode::ReadOnly {
            return Err(Error::ReadOnly);
        }
        let position = self.size();
        if let Err(e) = write_all_at(&self.log, bytes, position) {
            // Nothing was published; drop whatever part reached the file.
            let _ = self.log.set_len(position);
            return Err(Error::io(&self.log_path, "write", e));
        }
        let new_size = position + bytes.len() as u64;
        self.size.store(new_size, Ordering::Release);
        self.next_offset.store(largest_offset.plus(1).0, Ordering::Release);
        *lock(&self.last_modified) = SystemTime::now();

        // Load the max so far (from the time index after a clean reopen) before updating it.
        self.max_timestamp_so_far()?;
        let max_so_far = {
            let mut guard = lock(&self.max_timestamp);
            let current = guard.unwrap_or((NO_TIMESTAMP, self.base_offset));
            let updated = if max_timestamp > current.0 {
                (max_timestamp, shallow_offset_of_max_timestamp)
            } else {
                current
            };
            *guard = Some(updated);
            updated
        };
        let mut writer = lock(&self.writer);
        if position == 0 {
            writer.rolling_based_timestamp = Some(max_timestamp);
        }
        if writer.bytes_since_last_index_entry > u64::from(self.index_interval_bytes) {
            self.with_offset_index_mut(|idx| idx.append(largest_offset, Position(position)))?;
            self.with_time_index_mut(|idx| idx.maybe_append(max_so_far.0, max_so_far.1, false))?;
            writer.bytes_since_last_index_entry = 0;
        }
        writer.bytes_since_last_index_entry += bytes.len() as u64;
        Ok(())
    }

    /// The segment stops being active (roll): final time-index entry, indexes trimmed to their
    /// valid size (Kafka's `onBecomeInactiveSegment`).
    pub fn on_become_inactive(&self) -> Result<()> {
        self.close_indexes()?;
        self.active.store(false, Ordering::Release);
        Ok(())
    }

    /// The segment becomes active again after load: its indexes are extended back to
    /// `segment.index.bytes` (dropping lazily opened read-only maps first).
    pub fn on_become_active(&self) -> Result<()> {
        self.active.store(true, Ordering::Release);
        self.crc_checked_to.store(0, Ordering::Release);
        if self.mode == SegmentMode::ReadOnly {
            return Ok(());
        }
        let path = self.file_path(".index");
        self.with_offset_index_mut(|idx| {
            if !idx.file().is_in_memory() {
                // Drop the old (possibly read-only) map before mapping the file again.
                *idx = OffsetIndex::in_memory(&path, self.base_offset, 0);
                *idx =
                    OffsetIndex::open_writable(&path, self.base_offset, self.max_index_size, true)?;
            }
            Ok(())
        })?;
        let path = self.file_path(".timeindex");
        self.with_time_index_mut(|idx| {
            if !idx.file().is_in_memory() {
                *idx = TimeIndex::in_memory(&path, self.base_offset, 0);
                *idx =
                    TimeIndex::open_writable(&path, self.base_offset, self.max_index_size, true)?;
            }
            Ok(())
        })
    }

    /// Appends the final time-index entry and trims both index files (roll and clean close).
    /// Indexes never opened are left untouched (KAFKA-9373).
    pub fn close_indexes(&self) -> Result<()> {
        if self.mode == SegmentMode::ReadOnly {
            return Ok(());
        }
        let max = *lock(&self.max_timestamp);
        let mut time_guard = self.time_index.write().unwrap_or_else(|e| e.into_inner());
        if let Some(idx) = time_guard.as_mut() {
            if let Some((ts, offset)) = max {
                idx.maybe_append(ts, offset, true)?;
            }
            idx.trim_to_valid_size()?;
        }
        let mut offset_guard = self.offset_index.write().unwrap_or_else(|e| e.into_inner());
        if let Some(idx) = offset_guard.as_mut() {
            idx.trim_to_valid_size()?;
        }
        Ok(())
    }

    /// Makes the `.log` and both index files durable. Holds no lock while it waits: the index
    /// files are synced through duplicated handles (`fsync` of a file also writes back pages
    /// dirtied through a shared mapping of it), so lookups never wait for the disk.
    pub fn sync(&self) -> Result<()> {
        if self.mode == SegmentMode::ReadOnly {
            return Ok(());
        }
        self.log.sync_data().map_err(|e| Error::io(&self.log_path, "fsync", e))?;
        let offset = self
            .offset_index
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|i| i.file().sync_handle());
        let time = self
            .time_index
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|i| i.file().sync_handle());
        for (handle, suffix) in [(offset, ".index"), (time, ".timeindex")] {
            if let Some(file) = handle {
                file.sync_data().map_err(|e| Error::io(self.file_path(suffix), "fsync", e))?;
            }
        }
        Ok(())
    }

    /// Removes the segment's files (retention, or later segments after a truncating recovery):
    /// each is renamed to `.deleted` first, as Kafka does, so a crash midway leaves files the
    /// next start removes, then deleted.
    pub fn delete_files(&self) -> Result<()> {
        if self.mode == SegmentMode::ReadOnly {
            return Err(Error::ReadOnly);
        }
        // Unmap the indexes before their files go away.
        *self.offset_index.write().unwrap_or_else(|e| e.into_inner()) = None;
        *self.time_index.write().unwrap_or_else(|e| e.into_inner()) = None;
        // The producer snapshot taken at the segment's base offset goes with it, as Kafka's
        // `removeAndMarkSnapshotForDeletion` does.
        for suffix in [".log", ".index", ".timeindex", ".txnindex", ".snapshot"] {
            let path = self.file_path(suffix);
            let deleted = self.file_path(&format!("{suffix}.deleted"));
            match std::fs::rename(&path, &deleted) {
                Ok(()) => {
                    std::fs::remove_file(&deleted).map_err(|e| Error::io(&deleted, "remove", e))?
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, "rename", e)),
            }
        }
        // What the mount kept beside the segment goes with it (a crash before this leaves
        // entries the next writable load removes as strays).
        crate::cache::remove_beside_entries(&self.dir, self.base_offset);
        Ok(())
    }
}

/// `pwrite` of all of `bytes` at `pos`.
fn write_all_at(file: &File, bytes: &[u8], pos: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(bytes, pos)
}
