//! Building v2 batches ([`encode_batch_into`]) and rewriting the header fields a broker stamps
//! on append (base offset, partition leader epoch, LogAppendTime).

use super::{
    ATTRIBUTES_AT, BASE_OFFSET_AT, BASE_SEQUENCE_AT, BASE_TIMESTAMP_AT, CONTROL_FLAG_MASK, CRC_AT,
    LAST_OFFSET_DELTA_AT, LENGTH_AT, MAGIC_AT, MAGIC_V2, MAX_TIMESTAMP_AT,
    PARTITION_LEADER_EPOCH_AT, PRODUCER_EPOCH_AT, PRODUCER_ID_AT, RECORDS_COUNT_AT,
    TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK, header,
};
use crate::bytes::{be_i16, invalid};
use crate::compression::{self, Compression};
use crate::varint::{
    MAX_VARINT_SIZE, MAX_VARLONG_SIZE, put_varint, put_varlong, size_of_varint, size_of_varlong,
    write_varint,
};
use crate::{
    DecodeError, DecodeErrorKind, LOG_OVERHEAD, NO_TIMESTAMP, NewRecord, Offset,
    RECORD_BATCH_OVERHEAD, Timestamp, TimestampType,
};

/// Everything needed to build a v2 batch besides its records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchSpec {
    /// `baseOffset`: the offset of the first record.
    pub base_offset: Offset,
    /// `partitionLeaderEpoch` (a leader stamps its epoch; producers send -1).
    pub partition_leader_epoch: i32,
    /// Codec of the records payload.
    pub compression: Compression,
    /// `CreateTime` or `LogAppendTime` (`NoTimestampType` is written as CreateTime).
    pub timestamp_type: TimestampType,
    /// The batch's max timestamp when `timestamp_type` is LogAppendTime.
    pub log_append_time: Timestamp,
    /// The timestamp written for records whose timestamp is [`NO_TIMESTAMP`] (the engine passes
    /// the append time, "now"); [`NO_TIMESTAMP`] writes them as they are.
    pub default_timestamp: Timestamp,
    /// Idempotent producer id, or -1.
    pub producer_id: i64,
    /// Producer epoch, or -1.
    pub producer_epoch: i16,
    /// Sequence of the first record, or -1.
    pub base_sequence: i32,
    /// Attribute bit 4: part of a transaction.
    pub is_transactional: bool,
    /// Attribute bit 5: a control batch (transaction marker).
    pub is_control: bool,
}

impl Default for BatchSpec {
    /// Base offset 0, leader epoch 0, uncompressed CreateTime, not idempotent (-1 ids), record
    /// timestamps written as given.
    fn default() -> Self {
        BatchSpec {
            base_offset: Offset(0),
            partition_leader_epoch: 0,
            compression: Compression::None,
            timestamp_type: TimestampType::CreateTime,
            log_append_time: NO_TIMESTAMP,
            default_timestamp: NO_TIMESTAMP,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            is_transactional: false,
            is_control: false,
        }
    }
}

impl BatchSpec {
    fn attributes(&self) -> i16 {
        let mut a = i16::from(self.compression.id());
        if self.timestamp_type == TimestampType::LogAppendTime {
            a |= TIMESTAMP_TYPE_MASK;
        }
        if self.is_transactional {
            a |= TRANSACTIONAL_FLAG_MASK;
        }
        if self.is_control {
            a |= CONTROL_FLAG_MASK;
        }
        a
    }
}

/// Length of a key/value/header part as a varint, or an error if it does not fit an `i32`.
fn part_len(part: Option<&[u8]>) -> Result<i32, DecodeError> {
    match part {
        None => Ok(-1),
        Some(b) => {
            i32::try_from(b.len()).map_err(|_| invalid(0, "key, value or header larger than 2 GiB"))
        }
    }
}

fn part_size(len: i32) -> usize {
    size_of_varint(len) + len.max(0) as usize
}

fn write_part(out: &mut Vec<u8>, len: i32, part: Option<&[u8]>) {
    write_varint(out, len);
    if let Some(b) = part {
        out.extend_from_slice(b);
    }
}

/// A record to encode, borrowing its parts: what [`encode_batch_into`] reads. A [`NewRecord`]
/// lends one without copying ([`EncodeRecord`]); a caller holding the bytes elsewhere (the
/// lines of one `write()`) builds them without an allocation per record.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// CreateTime timestamp; [`NO_TIMESTAMP`] takes [`BatchSpec::default_timestamp`].
    pub timestamp: Timestamp,
    /// The key, `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// The value, `None` for a null value (a tombstone).
    pub value: Option<&'a [u8]>,
    /// Headers as (key, value) pairs; a `None` value is a null header value.
    pub headers: &'a [(Vec<u8>, Option<Vec<u8>>)],
}

impl<'a> RecordRef<'a> {
    /// An owned copy of the record.
    pub fn to_new_record(&self) -> NewRecord {
        NewRecord {
            timestamp: self.timestamp,
            key: self.key.map(<[u8]>::to_vec),
            value: self.value.map(<[u8]>::to_vec),
            headers: self.headers.to_vec(),
        }
    }

    /// A record holding only `value` (no key, no headers, no timestamp of its own).
    pub fn value_only(value: &'a [u8]) -> RecordRef<'a> {
        RecordRef { timestamp: NO_TIMESTAMP, key: None, value: Some(value), headers: &[] }
    }

    /// Upper bound of the record's encoded size (`DefaultRecord.MAX_RECORD_OVERHEAD` is 21;
    /// each header adds at most 10 bytes of framing).
    pub fn size_upper_bound(&self) -> usize {
        let headers: usize =
            self.headers.iter().map(|(k, v)| 10 + k.len() + v.as_ref().map_or(0, Vec::len)).sum();
        21 + self.key.map_or(0, <[u8]>::len) + self.value.map_or(0, <[u8]>::len) + headers
    }
}

/// Anything the encoder can read as a [`RecordRef`].
pub trait EncodeRecord {
    /// The record, borrowed.
    fn record_ref(&self) -> RecordRef<'_>;
}

impl EncodeRecord for NewRecord {
    fn record_ref(&self) -> RecordRef<'_> {
        RecordRef {
            timestamp: self.timestamp,
            key: self.key.as_deref(),
            value: self.value.as_deref(),
            headers: &self.headers,
        }
    }
}

impl EncodeRecord for RecordRef<'_> {
    fn record_ref(&self) -> RecordRef<'_> {
        *self
    }
}

/// The timestamp `record` is written with under `spec` (CreateTime).
fn effective_timestamp(spec: &BatchSpec, record: &RecordRef<'_>) -> Timestamp {
    if record.timestamp == NO_TIMESTAMP { spec.default_timestamp } else { record.timestamp }
}

/// Appends the records (uncompressed form) with offset deltas 0..n-1 to `out`.
fn write_records<R: EncodeRecord>(
    out: &mut Vec<u8>,
    spec: &BatchSpec,
    base_timestamp: Timestamp,
    records: &[R],
) -> Result<(), DecodeError> {
    for (i, r) in records.iter().enumerate() {
        let r = r.record_ref();
        let offset_delta = i32::try_from(i).map_err(|_| invalid(0, "too many records"))?;
        let timestamp_delta = effective_timestamp(spec, &r).wrapping_sub(base_timestamp);
        match (r.key, r.value, r.headers, timestamp_delta) {
            (None, Some(value), [], 0) => write_value_record(out, offset_delta, value)?,
            _ => write_record(out, &r, offset_delta, timestamp_delta)?,
        }
    }
    Ok(())
}

/// Appends one record (length, attributes, deltas, key, value, headers) to `out`.
pub(super) fn write_record(
    out: &mut Vec<u8>,
    r: &RecordRef<'_>,
    offset_delta: i32,
    timestamp_delta: i64,
) -> Result<(), DecodeError> {
    let key_len = part_len(r.key)?;
    let value_len = part_len(r.value)?;
    let header_count =
        i32::try_from(r.headers.len()).map_err(|_| invalid(0, "too many headers"))?;
    let mut body = 1
        + size_of_varlong(timestamp_delta)
        + size_of_varint(offset_delta)
        + part_size(key_len)
        + part_size(value_len)
        + size_of_varint(header_count);
    for (k, v) in r.headers {
        body += part_size(part_len(Some(k))?) + part_size(part_len(v.as_deref())?);
    }
    let body_len = i32::try_from(body).map_err(|_| invalid(0, "record larger than 2 GiB"))?;
    out.reserve(size_of_varint(body_len) + body);
    // Length, attributes (unused: 0), timestamp delta, offset delta and key length are
    // assembled on the stack and appended at once (appending them byte by byte was a
    // visible share of an append's time).
    let mut head = [0u8; 3 * MAX_VARINT_SIZE + 1 + MAX_VARLONG_SIZE];
    let mut n = 0;
    put_varint(&mut head, &mut n, body_len);
    n += 1;
    put_varlong(&mut head, &mut n, timestamp_delta);
    put_varint(&mut head, &mut n, offset_delta);
    put_varint(&mut head, &mut n, key_len);
    out.extend_from_slice(head.get(..n).unwrap_or_default());
    if let Some(key) = r.key {
        out.extend_from_slice(key);
    }
    write_part(out, value_len, r.value);
    write_varint(out, header_count);
    for (k, v) in r.headers {
        write_part(out, k.len() as i32, Some(k));
        write_part(out, part_len(v.as_deref())?, v.as_deref());
    }
    Ok(())
}

/// Appends the record an `append` line becomes, the most common record by far: a value, no
/// key, no headers, the batch's base timestamp. Writes the bytes [`write_record`] writes for
/// it (the property test `value_records_match_the_general_encoding` holds them equal) with
/// less work per record: splitting, encoding and checksumming 100-byte lines took 36 ns per
/// record through `write_record` and 25 through this (stop 13 in `doc/benchmarks-history.md`).
#[inline]
pub(super) fn write_value_record(
    out: &mut Vec<u8>,
    offset_delta: i32,
    value: &[u8],
) -> Result<(), DecodeError> {
    let value_len = part_len(Some(value))?;
    // Attributes (0), timestamp delta (0), key length (-1) and header count (0): a byte each.
    let body = 4 + size_of_varint(offset_delta) + size_of_varint(value_len) + value.len();
    let body_len = i32::try_from(body).map_err(|_| invalid(0, "record larger than 2 GiB"))?;
    let mut head = [0u8; 3 * MAX_VARINT_SIZE + 3];
    let mut n = 0;
    put_varint(&mut head, &mut n, body_len);
    n += 2; // attributes, timestamp delta: zero
    put_varint(&mut head, &mut n, offset_delta);
    put_varint(&mut head, &mut n, -1);
    put_varint(&mut head, &mut n, value_len);
    out.extend_from_slice(head.get(..n).unwrap_or_default());
    out.extend_from_slice(value);
    out.push(0); // header count
    Ok(())
}

/// Encodes one v2 batch and appends it to `out`: record offset deltas 0..n-1, `baseTimestamp` =
/// the first record's timestamp, `maxTimestamp` = the largest record timestamp (or
/// `spec.log_append_time` for LogAppendTime), CRC-32C; records without a timestamp
/// ([`NO_TIMESTAMP`]) are written with `spec.default_timestamp`. Returns the batch's length in
/// bytes. On error `out` is left as it was. At least one record is required.
pub fn encode_batch_into<R: EncodeRecord>(
    out: &mut Vec<u8>,
    spec: &BatchSpec,
    records: &[R],
) -> Result<usize, DecodeError> {
    let start = out.len();
    let result = encode_at(out, start, spec, records);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn encode_at<R: EncodeRecord>(
    out: &mut Vec<u8>,
    start: usize,
    spec: &BatchSpec,
    records: &[R],
) -> Result<usize, DecodeError> {
    let first = records.first().ok_or_else(|| invalid(0, "a batch needs at least one record"))?;
    let count = i32::try_from(records.len()).map_err(|_| invalid(0, "too many records"))?;
    let base_timestamp = effective_timestamp(spec, &first.record_ref());
    let (mut max_timestamp, mut estimate) = (base_timestamp, 0usize);
    for r in records {
        let r = r.record_ref();
        max_timestamp = max_timestamp.max(effective_timestamp(spec, &r));
        estimate = estimate.saturating_add(r.size_upper_bound());
    }
    if spec.timestamp_type == TimestampType::LogAppendTime {
        max_timestamp = spec.log_append_time;
    }
    out.reserve(RECORD_BATCH_OVERHEAD.saturating_add(estimate));
    out.resize(start + RECORD_BATCH_OVERHEAD, 0);
    if spec.compression == Compression::None {
        write_records(out, spec, base_timestamp, records)?;
    } else {
        let mut plain = Vec::with_capacity(estimate);
        write_records(&mut plain, spec, base_timestamp, records)?;
        out.extend_from_slice(&compression::compress(spec.compression, &plain)?);
    }
    finish_header(
        out.get_mut(start..).unwrap_or_default(),
        spec,
        count,
        base_timestamp,
        max_timestamp,
    )
}

/// Fills in the header of the batch that is all of `h` (its records written after
/// [`RECORD_BATCH_OVERHEAD`] zero bytes) and its CRC-32C, computed once over the whole batch.
/// Returns the batch's length in bytes.
fn finish_header(
    h: &mut [u8],
    spec: &BatchSpec,
    count: i32,
    base_timestamp: Timestamp,
    max_timestamp: Timestamp,
) -> Result<usize, DecodeError> {
    let total = h.len();
    let batch_length = i32::try_from(total.saturating_sub(LOG_OVERHEAD))
        .map_err(|_| invalid(0, "batch larger than 2 GiB"))?;
    put(h, BASE_OFFSET_AT, &spec.base_offset.0.to_be_bytes());
    put(h, LENGTH_AT, &batch_length.to_be_bytes());
    put(h, PARTITION_LEADER_EPOCH_AT, &spec.partition_leader_epoch.to_be_bytes());
    put(h, MAGIC_AT, &[MAGIC_V2 as u8]);
    put(h, ATTRIBUTES_AT, &spec.attributes().to_be_bytes());
    put(h, LAST_OFFSET_DELTA_AT, &(count - 1).to_be_bytes());
    put(h, BASE_TIMESTAMP_AT, &base_timestamp.to_be_bytes());
    put(h, MAX_TIMESTAMP_AT, &max_timestamp.to_be_bytes());
    put(h, PRODUCER_ID_AT, &spec.producer_id.to_be_bytes());
    put(h, PRODUCER_EPOCH_AT, &spec.producer_epoch.to_be_bytes());
    put(h, BASE_SEQUENCE_AT, &spec.base_sequence.to_be_bytes());
    put(h, RECORDS_COUNT_AT, &count.to_be_bytes());
    let crc = crc32c::crc32c(h.get(ATTRIBUTES_AT..).unwrap_or_default());
    put(h, CRC_AT, &crc.to_be_bytes());
    Ok(total)
}

/// One batch [`encode_value_lines_into`] wrote: where it lies in the buffer, how many records
/// it holds and its max timestamp.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EncodedBatch {
    /// Position of the batch's first byte in the buffer.
    pub start: usize,
    /// Length of the batch in bytes.
    pub len: usize,
    /// Records in the batch.
    pub records: usize,
    /// The batch's `maxTimestamp` as written.
    pub max_timestamp: Timestamp,
}

/// Why [`encode_value_lines_into`] wrote nothing.
#[derive(Debug, PartialEq, Eq)]
pub enum LinesError {
    /// One line's record alone makes a batch of `size` bytes, over the limit.
    RecordTooLarge { size: usize },
    /// The spec asks for what this encoder does not write (a codec), or a part is too large.
    Invalid(DecodeError),
}

impl From<DecodeError> for LinesError {
    fn from(e: DecodeError) -> Self {
        LinesError::Invalid(e)
    }
}

/// Appends the record of one line ([`write_value_record`]'s bytes) given the sizes the caller
/// already computed: `body_len` is the record's length field. The header (at most 18 bytes) is
/// assembled on the stack and appended as a fixed 24-byte copy cut back to its length, which
/// compiles to a few stores instead of a call; the value is the one variable-length copy.
#[inline]
fn put_line_record(
    out: &mut Vec<u8>,
    offset_delta: i32,
    value: &[u8],
    value_len: i32,
    body_len: i32,
) {
    let mut head = [0u8; 24];
    let mut n = 0;
    put_varint(&mut head, &mut n, body_len);
    n += 2; // attributes, timestamp delta: zero
    put_varint(&mut head, &mut n, offset_delta);
    put_varint(&mut head, &mut n, -1);
    put_varint(&mut head, &mut n, value_len);
    let at = out.len();
    out.extend_from_slice(&head);
    out.truncate(at + n);
    out.extend_from_slice(value);
    out.push(0); // header count
}

/// The records of `head` (when given) and of every `\n`-terminated line of `lines`, each
/// borrowing its line without the `\n` as its value (what [`encode_value_lines_into`] encodes),
/// for the paths that need a list of records (a codec, a topic-level append, a cluster).
pub fn value_line_records<'a>(head: Option<&'a [u8]>, lines: &'a [u8]) -> Vec<RecordRef<'a>> {
    let mut records: Vec<RecordRef<'a>> = head.map(RecordRef::value_only).into_iter().collect();
    let mut from = 0;
    for nl in memchr::memchr_iter(b'\n', lines) {
        records.push(RecordRef::value_only(lines.get(from..nl).unwrap_or_default()));
        from = nl + 1;
    }
    records
}

/// Encodes lines as records straight from the written bytes, the `append` file's path: `head`
/// (when given) and then every `\n`-terminated line of `lines` each become one record whose
/// value is the line without its `\n` (no key, no headers, no timestamp of its own: the
/// batch's base timestamp, `spec.default_timestamp`); bytes after the last `\n` are not
/// encoded. The records go into consecutive uncompressed batches appended to `out`, each
/// filled greedily up to `limit` bytes, so one batch unless the records do not fit in one.
/// Each batch is byte for byte what [`encode_batch_into`] writes for the same records (the
/// test `value_lines_encode_as_encode_batch_does` holds them equal), without a list of
/// records: one pass finds the newlines and copies the values, one CRC-32C per batch.
///
/// On error `out` is left as it was. Needs `spec.compression` to be [`Compression::None`].
pub fn encode_value_lines_into(
    out: &mut Vec<u8>,
    spec: &BatchSpec,
    head: Option<&[u8]>,
    lines: &[u8],
    limit: usize,
) -> Result<Vec<EncodedBatch>, LinesError> {
    let start = out.len();
    let result = encode_lines_at(out, spec, head, lines, limit);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn encode_lines_at(
    out: &mut Vec<u8>,
    spec: &BatchSpec,
    head: Option<&[u8]>,
    lines: &[u8],
    limit: usize,
) -> Result<Vec<EncodedBatch>, LinesError> {
    if spec.compression != Compression::None {
        return Err(invalid(0, "lines are encoded uncompressed only").into());
    }
    let timestamp = spec.default_timestamp;
    let max_timestamp = if spec.timestamp_type == TimestampType::LogAppendTime {
        spec.log_append_time
    } else {
        timestamp
    };
    // About the size of the output: each line's `\n` becomes a few bytes of record framing.
    out.reserve(
        RECORD_BATCH_OVERHEAD
            .saturating_add(head.map_or(0, <[u8]>::len))
            .saturating_add(lines.len().saturating_add(lines.len() / 8)),
    );
    let mut batches = Vec::new();
    let mut batch = out.len();
    out.resize(batch + RECORD_BATCH_OVERHEAD, 0);
    let mut count: i32 = 0;
    let mut record = |out: &mut Vec<u8>, value: &[u8]| -> Result<(), LinesError> {
        let value_len = part_len(Some(value))?;
        // Attributes, timestamp delta, key length and header count: a byte each.
        let fixed = 4 + size_of_varint(value_len) + value.len();
        let mut body = fixed + size_of_varint(count);
        let mut size = size_of_varint(body as i32) + body;
        if count > 0 && (out.len() - batch).saturating_add(size) > limit {
            let len = finish_header(
                out.get_mut(batch..).unwrap_or_default(),
                spec,
                count,
                timestamp,
                max_timestamp,
            )?;
            batches.push(EncodedBatch {
                start: batch,
                len,
                records: count as usize,
                max_timestamp,
            });
            batch = out.len();
            out.resize(batch + RECORD_BATCH_OVERHEAD, 0);
            count = 0;
            body = fixed + 1;
            size = size_of_varint(body as i32) + body;
        }
        if count == 0 && RECORD_BATCH_OVERHEAD.saturating_add(size) > limit {
            return Err(LinesError::RecordTooLarge { size: RECORD_BATCH_OVERHEAD + size });
        }
        let body_len = i32::try_from(body).map_err(|_| invalid(0, "record larger than 2 GiB"))?;
        put_line_record(out, count, value, value_len, body_len);
        count = count.checked_add(1).ok_or_else(|| invalid(0, "too many records"))?;
        Ok(())
    };
    if let Some(value) = head {
        record(out, value)?;
    }
    let mut from = 0;
    for nl in memchr::memchr_iter(b'\n', lines) {
        record(out, lines.get(from..nl).unwrap_or_default())?;
        from = nl + 1;
    }
    if count == 0 {
        return Err(invalid(0, "a batch needs at least one record").into());
    }
    let len = finish_header(
        out.get_mut(batch..).unwrap_or_default(),
        spec,
        count,
        timestamp,
        max_timestamp,
    )?;
    batches.push(EncodedBatch { start: batch, len, records: count as usize, max_timestamp });
    Ok(batches)
}

/// Writes `bytes` at `at` of a buffer known to be long enough (callers checked the length).
fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = buf.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

/// [`encode_batch_into`] a new buffer.
pub fn encode_batch<R: EncodeRecord>(
    spec: &BatchSpec,
    records: &[R],
) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    encode_batch_into(&mut out, spec, records)?;
    Ok(out)
}

/// The v2 batch at the start of `entry`, checked to be whole, as a mutable slice.
fn whole_v2_mut(entry: &mut [u8]) -> Result<&mut [u8], DecodeError> {
    let h = header(entry)?;
    if h.magic != MAGIC_V2 {
        return Err(DecodeError::new(MAGIC_AT, DecodeErrorKind::UnknownMagic(h.magic)));
    }
    let total = h.total_size();
    if total < RECORD_BATCH_OVERHEAD {
        return Err(DecodeError::new(LENGTH_AT, DecodeErrorKind::InvalidSize(i64::from(h.size))));
    }
    let available = entry.len();
    entry
        .get_mut(..total)
        .ok_or_else(|| DecodeError::new(0, DecodeErrorKind::Truncated { needed: total, available }))
}

/// Rewrites the base offset of the entry at the start of `entry` (v2: `baseOffset`; legacy: the
/// entry offset). The CRC does not cover it.
pub fn set_base_offset(entry: &mut [u8], base: Offset) -> Result<(), DecodeError> {
    header(entry)?;
    put(entry, BASE_OFFSET_AT, &base.0.to_be_bytes());
    Ok(())
}

/// Rewrites `partitionLeaderEpoch` of a v2 batch (not covered by the CRC).
pub fn set_partition_leader_epoch(entry: &mut [u8], epoch: i32) -> Result<(), DecodeError> {
    let b = whole_v2_mut(entry)?;
    put(b, PARTITION_LEADER_EPOCH_AT, &epoch.to_be_bytes());
    Ok(())
}

/// Stamps a v2 batch with LogAppendTime `ts`: sets attribute bit 3 and `maxTimestamp`, then
/// recomputes the CRC (what a broker does for a `message.timestamp.type=LogAppendTime` topic).
pub fn set_log_append_time(entry: &mut [u8], ts: Timestamp) -> Result<(), DecodeError> {
    let b = whole_v2_mut(entry)?;
    let attributes = be_i16(b, ATTRIBUTES_AT)? | TIMESTAMP_TYPE_MASK;
    put(b, ATTRIBUTES_AT, &attributes.to_be_bytes());
    put(b, MAX_TIMESTAMP_AT, &ts.to_be_bytes());
    let crc = crc32c::crc32c(b.get(ATTRIBUTES_AT..).unwrap_or_default());
    put(b, CRC_AT, &crc.to_be_bytes());
    Ok(())
}

/// Attribute bit 6 (KIP-534): `baseTimestamp` holds the delete horizon.
const DELETE_HORIZON_MASK: i16 = 0x40;

/// What the log cleaner keeps of a v2 batch (Kafka's `MemoryRecords.filterTo` with
/// `buildRetainedRecordsInto`): a new batch with the original's `baseOffset`,
/// `lastOffsetDelta`, partition leader epoch, producer id, epoch and base sequence, codec,
/// timestamp type and transactional/control bits, holding exactly `records` (each keeps its
/// offset, so offset deltas may have gaps, and its timestamp), re-compressed with the codec and
/// CRC-32C computed. `baseTimestamp` is the first kept record's timestamp, or the delete
/// horizon when `delete_horizon` is given (attribute bit 6 then set); record timestamp deltas
/// are relative to it. `maxTimestamp` is the largest kept record timestamp (LogAppendTime: the
/// original's). Appended to `out`; returns the batch's length. At least one record is
/// required; on error `out` is left as it was.
pub fn encode_retained_batch(
    out: &mut Vec<u8>,
    original: &crate::BatchInfo,
    records: &[crate::Record<'_>],
    delete_horizon: Option<Timestamp>,
) -> Result<usize, DecodeError> {
    let start = out.len();
    let result = retained_at(out, start, original, records, delete_horizon);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn retained_at(
    out: &mut Vec<u8>,
    start: usize,
    original: &crate::BatchInfo,
    records: &[crate::Record<'_>],
    delete_horizon: Option<Timestamp>,
) -> Result<usize, DecodeError> {
    let first = records.first().ok_or_else(|| invalid(0, "a batch needs at least one record"))?;
    let count = i32::try_from(records.len()).map_err(|_| invalid(0, "too many records"))?;
    let base_timestamp = delete_horizon.unwrap_or(first.timestamp);
    let max_timestamp = if original.timestamp_type == TimestampType::LogAppendTime {
        original.max_timestamp
    } else {
        records.iter().map(|r| r.timestamp).max().unwrap_or(NO_TIMESTAMP)
    };
    let mut plain = Vec::new();
    let mut headers: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    for r in records {
        let delta = r.offset.0.checked_sub(original.base_offset.0).unwrap_or(-1);
        let offset_delta = i32::try_from(delta)
            .ok()
            .filter(|d| *d >= 0)
            .ok_or_else(|| invalid(0, "record offset outside its batch"))?;
        headers.clear();
        headers.extend(r.headers.iter().map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec))));
        let rec =
            RecordRef { timestamp: r.timestamp, key: r.key, value: r.value, headers: &headers };
        write_record(&mut plain, &rec, offset_delta, r.timestamp.wrapping_sub(base_timestamp))?;
    }
    out.resize(start + RECORD_BATCH_OVERHEAD, 0);
    if original.compression == Compression::None {
        out.extend_from_slice(&plain);
    } else {
        out.extend_from_slice(&compression::compress(original.compression, &plain)?);
    }
    let mut attributes = original.attributes & !DELETE_HORIZON_MASK;
    if delete_horizon.is_some() {
        attributes |= DELETE_HORIZON_MASK;
    }
    let h = out.get_mut(start..).unwrap_or_default();
    finish_kept_header(h, original, attributes, count, base_timestamp, max_timestamp)
}

/// The empty batch the cleaner keeps in place of a producer's last batch whose records are all
/// removed (Kafka's `DefaultRecordBatch.writeEmptyHeader`): 61 bytes, `recordsCount` 0,
/// `baseTimestamp` -1, the original's `maxTimestamp`, offsets, producer fields and flags (the
/// delete-horizon bit cleared). Appended to `out`; returns its length (61).
pub fn encode_empty_batch(
    out: &mut Vec<u8>,
    original: &crate::BatchInfo,
) -> Result<usize, DecodeError> {
    let start = out.len();
    out.resize(start + RECORD_BATCH_OVERHEAD, 0);
    let attributes = (original.attributes & !DELETE_HORIZON_MASK) & !0x07;
    let h = out.get_mut(start..).unwrap_or_default();
    let result =
        finish_kept_header(h, original, attributes, 0, NO_TIMESTAMP, original.max_timestamp);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Fills in a kept batch's header (the fields of `original` but attributes, count and
/// timestamps) and its CRC-32C.
fn finish_kept_header(
    h: &mut [u8],
    original: &crate::BatchInfo,
    attributes: i16,
    count: i32,
    base_timestamp: Timestamp,
    max_timestamp: Timestamp,
) -> Result<usize, DecodeError> {
    let total = h.len();
    let batch_length = i32::try_from(total.saturating_sub(LOG_OVERHEAD))
        .map_err(|_| invalid(0, "batch larger than 2 GiB"))?;
    let last_offset_delta = i32::try_from(original.last_offset.0 - original.base_offset.0)
        .map_err(|_| invalid(0, "lastOffsetDelta out of range"))?;
    put(h, BASE_OFFSET_AT, &original.base_offset.0.to_be_bytes());
    put(h, LENGTH_AT, &batch_length.to_be_bytes());
    put(h, PARTITION_LEADER_EPOCH_AT, &original.partition_leader_epoch.to_be_bytes());
    put(h, MAGIC_AT, &[MAGIC_V2 as u8]);
    put(h, ATTRIBUTES_AT, &attributes.to_be_bytes());
    put(h, LAST_OFFSET_DELTA_AT, &last_offset_delta.to_be_bytes());
    put(h, BASE_TIMESTAMP_AT, &base_timestamp.to_be_bytes());
    put(h, MAX_TIMESTAMP_AT, &max_timestamp.to_be_bytes());
    put(h, PRODUCER_ID_AT, &original.producer_id.to_be_bytes());
    put(h, PRODUCER_EPOCH_AT, &original.producer_epoch.to_be_bytes());
    put(h, BASE_SEQUENCE_AT, &original.base_sequence.to_be_bytes());
    put(h, RECORDS_COUNT_AT, &count.to_be_bytes());
    let crc = crc32c::crc32c(h.get(ATTRIBUTES_AT..).unwrap_or_default());
    put(h, CRC_AT, &crc.to_be_bytes());
    Ok(total)
}
