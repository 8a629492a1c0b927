//! Appending: encoding records into batches of at most `max.message.bytes`, assigning offsets
//! from the log end offset, and rolling the active segment (Kafka's `maybeRoll`/`roll`).

use super::*;

use topicfs_format::{
    Compression, EncodedBatch, LinesError, encode_batch_into, encode_value_lines_into,
    value_line_records,
};

/// The largest batch an append may write, and the topic setting that makes it so (named in
/// the refusal of a record that does not fit).
#[derive(Copy, Clone, Debug)]
struct BatchLimit {
    bytes: usize,
    /// `max.message.bytes`, or `segment.bytes` when that is smaller.
    setting: &'static str,
}

impl BatchLimit {
    /// The refusal of a batch of `size` bytes (one record that does not fit alone).
    fn refuse(self, size: usize) -> Error {
        Error::RecordTooLarge { what: "record batch", size, setting: self.setting, max: self.bytes }
    }
}

/// Encoded batches ready to be appended, one after another in one buffer.
struct Encoded {
    bytes: Vec<u8>,
    batches: Vec<EncodedBatch>,
}

impl Log {
    pub(super) fn draw_roll_jitter(&self, base: Offset) -> i64 {
        let config = self.config();
        let jitter = config.segment_jitter_ms;
        if jitter <= 0 {
            return 0;
        }
        let random = std::hash::RandomState::new().hash_one(base.0);
        (random % jitter.min(config.segment_ms).max(1) as u64) as i64
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
        let (spec, limit) = self.batch_spec(now_ms());
        let encoded = self.encode_batches(records, &spec, limit)?;
        self.write_batches(encoded)
    }

    /// Appends one record per `\n`-terminated line of `lines` (its value the line without the
    /// `\n`; no key, no headers, the append time), after a record of `head` when given, as
    /// [`Log::append`] does: one batch unless they do not fit in one of `max.message.bytes`, all
    /// or nothing. Bytes after the last `\n` are not appended. The `append` file's path: the
    /// records are encoded straight from the written bytes
    /// ([`encode_value_lines_into`]), with no list of records in between.
    pub fn append_value_lines(&self, head: Option<&[u8]>, lines: &[u8]) -> Result<AppendInfo> {
        if !self.writable() {
            return Err(Error::ReadOnly);
        }
        let (spec, limit) = self.batch_spec(now_ms());
        if spec.compression != Compression::None {
            let records = value_line_records(head, lines);
            if records.is_empty() {
                return Err(Error::InvalidInput("an append needs at least one record".to_string()));
            }
            let encoded = self.encode_batches(&records, &spec, limit)?;
            return self.write_batches(encoded);
        }
        let mut bytes = Vec::new();
        let batches = encode_value_lines_into(&mut bytes, &spec, head, lines, limit.bytes)
            .map_err(|e| match e {
                LinesError::RecordTooLarge { size } => limit.refuse(size),
                LinesError::Invalid(e) => Error::InvalidInput(e.to_string()),
            })?;
        self.write_batches(Encoded { bytes, batches })
    }

    /// The spec of the batches an append writes at `now` (the topic's codec and timestamp
    /// type; `now` for records without a timestamp), and the largest batch it may write.
    fn batch_spec(&self, now: Timestamp) -> (BatchSpec, BatchLimit) {
        let config = self.config();
        let max = config.max_message_bytes as usize;
        let segment = usize::try_from(config.segment_bytes).unwrap_or(usize::MAX);
        // A batch never spans segments: a `segment.bytes` below `max.message.bytes` is the
        // limit, and the refusal names it.
        let limit = if segment < max {
            BatchLimit { bytes: segment, setting: "segment.bytes" }
        } else {
            BatchLimit { bytes: max, setting: "max.message.bytes" }
        };
        let spec = BatchSpec {
            compression: config.compression_type.codec(),
            timestamp_type: match config.message_timestamp_type {
                MessageTimestampType::CreateTime => TimestampType::CreateTime,
                MessageTimestampType::LogAppendTime => TimestampType::LogAppendTime,
            },
            log_append_time: now,
            default_timestamp: now,
            ..BatchSpec::default()
        };
        (spec, limit)
    }

    /// Writes encoded batches at the log end, in order, under the append lock: offsets from
    /// the log end offset, the active segment rolled first where a batch must not go into it.
    fn write_batches(&self, mut encoded: Encoded) -> Result<AppendInfo> {
        let batch_count = encoded.batches.len();
        let mut writer = lock(&self.writer);
        if writer.closed {
            return Err(Error::StaleHandle);
        }
        let first_offset = self.log_end_offset();
        let mut last_offset = first_offset;
        for batch in &encoded.batches {
            let base = self.log_end_offset();
            let last = base.plus(batch.records as i64 - 1);
            let bytes =
                encoded.bytes.get_mut(batch.start..batch.start + batch.len).ok_or_else(|| {
                    Error::InvalidInput("encoded batch out of its buffer".to_string())
                })?;
            set_base_offset(bytes, base)
                .map_err(|e| Error::InvalidInput(format!("encoded batch: {e}")))?;
            let active =
                self.maybe_roll(&mut writer, bytes.len() as u64, batch.max_timestamp, last)?;
            active.append(bytes, last, batch.max_timestamp, last)?;
            self.offsets.publish_end(last.plus(1));
            last_offset = last;
        }
        *lock(&self.last_modified) = SystemTime::now();
        Ok(AppendInfo { first_offset, last_offset, batches: batch_count })
    }

    /// Encodes `records` into batches of at most `limit` bytes each, one after another in one
    /// buffer: one batch when it fits, otherwise consecutive chunks, halved until each fits.
    fn encode_batches<R: EncodeRecord>(
        &self,
        records: &[R],
        spec: &BatchSpec,
        limit: BatchLimit,
    ) -> Result<Encoded> {
        // Pre-split by an upper bound of the uncompressed size, so one huge append does not
        // encode everything many times over.
        let mut chunks = Vec::new();
        let (mut start, mut estimate) = (0usize, topicfs_format::RECORD_BATCH_OVERHEAD);
        for (i, r) in records.iter().enumerate() {
            let size = r.record_ref().size_upper_bound();
            if i > start && estimate.saturating_add(size) > limit.bytes {
                chunks.push(records.get(start..i).unwrap_or_default());
                start = i;
                estimate = topicfs_format::RECORD_BATCH_OVERHEAD;
            }
            estimate = estimate.saturating_add(size);
        }
        chunks.push(records.get(start..).unwrap_or_default());
        let mut out = Encoded { bytes: Vec::new(), batches: Vec::with_capacity(chunks.len()) };
        for chunk in chunks {
            encode_split(chunk, spec, limit, &mut out)?;
        }
        Ok(out)
    }

    /// The active segment, rolled first if the next set must not go into it (Kafka's
    /// `maybeRoll`: `segment.bytes`, `segment.ms` by record time, a full index, or a relative
    /// offset overflow).
    fn maybe_roll(
        &self,
        writer: &mut Writer,
        set_size: u64,
        max_timestamp: Timestamp,
        last: Offset,
    ) -> Result<Arc<LogSegment>> {
        let active = self.segments.last().ok_or(Error::StaleHandle)?;
        let config = self.config();
        let max_segment_ms = config.segment_ms.saturating_sub(writer.roll_jitter_ms);
        if !active.should_roll(
            set_size,
            max_timestamp,
            last,
            config.segment_bytes,
            max_segment_ms,
        )? {
            return Ok(active);
        }
        self.roll(writer)
    }

    /// Starts a new active segment at the log end offset.
    fn roll(&self, writer: &mut Writer) -> Result<Arc<LogSegment>> {
        let new_base = self.log_end_offset();
        if let Some(active) = self.segments.last() {
            if active.base_offset() == new_base && active.size() == 0 {
                return Ok(active);
            }
            active.on_become_inactive()?;
            self.write_producer_snapshot(writer, &active, new_base);
        }
        let config = self.config();
        let segment = Arc::new(LogSegment::create(
            &self.dir,
            new_base,
            config.segment_index_bytes,
            config.index_interval_bytes,
        )?);
        self.segments.insert(Arc::clone(&segment));
        writer.active_all_ours = true;
        writer.roll_jitter_ms = self.draw_roll_jitter(new_base);
        log::debug!("rolled {} to a new segment at {new_base}", self.dir.display());
        Ok(segment)
    }

    /// Rolls the active segment now if it is not empty (tests and tools).
    pub fn force_roll(&self) -> Result<()> {
        if !self.writable() {
            return Err(Error::ReadOnly);
        }
        let mut writer = lock(&self.writer);
        self.roll(&mut writer).map(|_| ())
    }
}

/// Encodes `records` as one batch at the end of `out`, or, when that is over `limit`, each half
/// in turn (recursively); a single record over `limit` is refused.
fn encode_split<R: EncodeRecord>(
    records: &[R],
    spec: &BatchSpec,
    limit: BatchLimit,
    out: &mut Encoded,
) -> Result<()> {
    let start = out.bytes.len();
    let len = encode_batch_into(&mut out.bytes, spec, records)
        .map_err(|e| Error::InvalidInput(e.to_string()))?;
    if len <= limit.bytes {
        // The encoder wrote the max timestamp (now-filled, or LogAppendTime) in the header.
        let max_timestamp = parse_batch_info(out.bytes.get(start..).unwrap_or_default())
            .map_err(|e| Error::InvalidInput(format!("encoded batch: {e}")))?
            .max_timestamp;
        out.batches.push(EncodedBatch { start, len, records: records.len(), max_timestamp });
        return Ok(());
    }
    out.bytes.truncate(start);
    if records.len() == 1 {
        return Err(limit.refuse(len));
    }
    let (first, second) = records.split_at(records.len() / 2);
    encode_split(first, spec, limit, out)?;
    encode_split(second, spec, limit, out)
}
