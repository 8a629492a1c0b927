//! Appending: encoding records into batches of at most `max.message.bytes`, assigning offsets
//! from the log end offset, and rolling the active segment (Kafka's `maybeRoll`/`roll`).

use super::*;

/// One encoded batch ready to be appended.
struct EncodedBatch {
    bytes: Vec<u8>,
    records: usize,
    max_timestamp: Timestamp,
}

impl Log {
    pub(super) fn draw_roll_jitter(&self, base: Offset) -> i64 {
        let jitter = self.config.segment_jitter_ms;
        if jitter <= 0 {
            return 0;
        }
        let random = std::hash::RandomState::new().hash_one(base.0);
        (random % jitter.min(self.config.segment_ms).max(1) as u64) as i64
    }

    /// Appends `records` as one batch (several only when one would exceed `max.message.bytes`),
    /// assigning offsets from the log end offset. Records without a timestamp get "now"; with
    /// `message.timestamp.type=LogAppendTime` every batch is stamped with the append time; the
    /// topic's `compression.type` codec is used. Refuses the whole call, writing nothing, if a
    /// single record does not fit in a batch of `max.message.bytes` (or `segment.bytes`).
    pub fn append(&self, records: &[NewRecord]) -> Result<AppendInfo> {
        self.append_records(records)
    }

    /// [`Log::append`] of borrowed records (the lines of one `write()` without a copy each).
    pub fn append_refs(&self, records: &[RecordRef<'_>]) -> Result<AppendInfo> {
        self.append_records(records)
    }

    fn append_records<R: EncodeRecord>(&self, records: &[R]) -> Result<AppendInfo> {
        if !self.writable() {
            return Err(Error::ReadOnly);
        }
        if records.is_empty() {
            return Err(Error::InvalidInput("an append needs at least one record".to_string()));
        }
        // "Now" fills in missing timestamps while encoding (`BatchSpec::default_timestamp`).
        let batches = self.encode_batches(records, now_ms())?;
        let batch_count = batches.len();

        let _guard = lock(&self.append_lock);
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::StaleHandle);
        }
        let first_offset = self.log_end_offset();
        let mut last_offset = first_offset;
        for mut batch in batches {
            let base = self.log_end_offset();
            let last = base.plus(batch.records as i64 - 1);
            set_base_offset(&mut batch.bytes, base)
                .map_err(|e| Error::InvalidInput(format!("encoded batch: {e}")))?;
            let active = self.maybe_roll(batch.bytes.len() as u64, batch.max_timestamp, last)?;
            active.append(&batch.bytes, last, batch.max_timestamp, last)?;
            self.log_end_offset.store(last.plus(1).0, Ordering::Release);
            last_offset = last;
        }
        *lock(&self.last_modified) = SystemTime::now();
        Ok(AppendInfo { first_offset, last_offset, batches: batch_count })
    }

    /// Encodes `records` into batches of at most `max.message.bytes` each: one batch when it
    /// fits, otherwise consecutive chunks, halved until each fits. Records without a timestamp
    /// are written with `now`.
    fn encode_batches<R: EncodeRecord>(
        &self,
        records: &[R],
        now: Timestamp,
    ) -> Result<Vec<EncodedBatch>> {
        let max = self.config.max_message_bytes as usize;
        let limit = max.min(usize::try_from(self.config.segment_bytes).unwrap_or(usize::MAX));
        let spec = BatchSpec {
            compression: self.config.compression_type.codec(),
            timestamp_type: match self.config.message_timestamp_type {
                MessageTimestampType::CreateTime => TimestampType::CreateTime,
                MessageTimestampType::LogAppendTime => TimestampType::LogAppendTime,
            },
            log_append_time: now,
            default_timestamp: now,
            ..BatchSpec::default()
        };
        // Pre-split by an upper bound of the uncompressed size, so one huge append does not
        // encode everything many times over.
        let mut chunks = Vec::new();
        let (mut start, mut estimate) = (0usize, crate::format::RECORD_BATCH_OVERHEAD);
        for (i, r) in records.iter().enumerate() {
            let size = r.record_ref().size_upper_bound();
            if i > start && estimate.saturating_add(size) > limit {
                chunks.push(records.get(start..i).unwrap_or_default());
                start = i;
                estimate = crate::format::RECORD_BATCH_OVERHEAD;
            }
            estimate = estimate.saturating_add(size);
        }
        chunks.push(records.get(start..).unwrap_or_default());
        let mut out = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            self.encode_split(chunk, &spec, limit, &mut out)?;
        }
        Ok(out)
    }

    fn encode_split<R: EncodeRecord>(
        &self,
        records: &[R],
        spec: &BatchSpec,
        limit: usize,
        out: &mut Vec<EncodedBatch>,
    ) -> Result<()> {
        let bytes = encode_batch(spec, records).map_err(|e| Error::InvalidInput(e.to_string()))?;
        if bytes.len() <= limit {
            // The encoder wrote the max timestamp (now-filled, or LogAppendTime) in the header.
            let max_timestamp = parse_batch_info(&bytes)
                .map_err(|e| Error::InvalidInput(format!("encoded batch: {e}")))?
                .max_timestamp;
            out.push(EncodedBatch { bytes, records: records.len(), max_timestamp });
            return Ok(());
        }
        if records.len() == 1 {
            return Err(Error::RecordTooLarge { size: bytes.len(), max: limit });
        }
        let (first, second) = records.split_at(records.len() / 2);
        self.encode_split(first, spec, limit, out)?;
        self.encode_split(second, spec, limit, out)
    }

    /// The active segment, rolled first if the next set must not go into it (Kafka's
    /// `maybeRoll`: `segment.bytes`, `segment.ms` by record time, a full index, or a relative
    /// offset overflow). Caller holds `append_lock`.
    fn maybe_roll(
        &self,
        set_size: u64,
        max_timestamp: Timestamp,
        last: Offset,
    ) -> Result<Arc<LogSegment>> {
        let active = self.active_segment().ok_or(Error::StaleHandle)?;
        let max_segment_ms = self
            .config
            .segment_ms
            .saturating_sub(self.active_roll_jitter_ms.load(Ordering::Relaxed));
        if !active.should_roll(
            set_size,
            max_timestamp,
            last,
            self.config.segment_bytes,
            max_segment_ms,
        )? {
            return Ok(active);
        }
        self.roll()
    }

    /// Starts a new active segment at the log end offset. Caller holds `append_lock`.
    fn roll(&self) -> Result<Arc<LogSegment>> {
        let new_base = self.log_end_offset();
        if let Some(active) = self.active_segment() {
            if active.base_offset() == new_base && active.size() == 0 {
                return Ok(active);
            }
            active.on_become_inactive()?;
        }
        let segment = Arc::new(LogSegment::create(
            &self.dir,
            new_base,
            self.config.segment_index_bytes,
            self.config.index_interval_bytes,
        )?);
        let mut map = self.segments.write().unwrap_or_else(|e| e.into_inner());
        map.insert(new_base, Arc::clone(&segment));
        self.segments_version.fetch_add(1, Ordering::AcqRel);
        drop(map);
        self.active_roll_jitter_ms.store(self.draw_roll_jitter(new_base), Ordering::Relaxed);
        log::debug!("rolled {} to a new segment at {new_base}", self.dir.display());
        Ok(segment)
    }

    /// Rolls the active segment now if it is not empty (tests and tools).
    pub fn force_roll(&self) -> Result<()> {
        if !self.writable() {
            return Err(Error::ReadOnly);
        }
        let _guard = lock(&self.append_lock);
        self.roll().map(|_| ())
    }
}
