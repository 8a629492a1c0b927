//! Entries of a `.log` file: v2 record batches (`DefaultRecordBatch`, `DefaultRecord`) and, through
//! [`super::legacy`], v0/v1 messages.
//!
//! Every entry starts with `int64 offset, int32 size`, and its magic is at byte 16. A v2 batch:
//!
//! ```text
//! byte  width  field                   byte  width  field
//!  0    8      baseOffset               27   8      baseTimestamp
//!  8    4      batchLength (= total-12) 35   8      maxTimestamp
//! 12    4      partitionLeaderEpoch     43   8      producerId
//! 16    1      magic (2)                51   2      producerEpoch
//! 17    4      crc (CRC-32C of 21..end) 53   4      baseSequence
//! 21    2      attributes               57   4      recordsCount
//! 23    4      lastOffsetDelta          61   ...    records (compressed as one stream if a codec is set)
//! ```
//!
//! Attributes: bits 0-2 codec, bit 3 LogAppendTime, bit 4 transactional, bit 5 control, bit 6
//! delete horizon. The CRC does not cover `baseOffset`, `batchLength`, `partitionLeaderEpoch` or
//! `magic`, so [`set_base_offset`] and [`set_partition_leader_epoch`] leave it alone, while
//! [`set_log_append_time`] recomputes it.
//!
//! A record: `varint length, int8 attributes, varlong timestampDelta, varint offsetDelta,
//! varint keyLength, key, varint valueLength, value, varint headerCount, headers`
//! (negative lengths are null; a header key may not be null).
//!
//! Decoding follows Kafka's strict reader: a record's `length` must equal the bytes it holds,
//! exactly `recordsCount` records must be present, and no bytes may follow the last one. Error
//! positions (`at`) are offsets inside the entry; errors inside a compressed payload are reported
//! at the payload's start (byte 61), since positions in the decompressed stream name no file byte.

use std::borrow::Cow;

use super::compression::{self, Compression};
use super::legacy::{self, LegacyRecordIter};
use super::varint::{
    MAX_VARINT_SIZE, MAX_VARLONG_SIZE, put_varint, put_varlong, read_varint, read_varlong,
    size_of_varint, size_of_varlong, write_varint,
};
use super::{
    BatchInfo, DecodeError, DecodeErrorKind, HEADER_SIZE_UP_TO_MAGIC, Header, LOG_OVERHEAD,
    MIN_ENTRY_SIZE_FIELD, NO_TIMESTAMP, NewRecord, Offset, RECORD_BATCH_OVERHEAD, Record,
    Timestamp, TimestampType,
};

/// The current (and highest known) magic: v2 record batches.
pub const MAGIC_V2: i8 = 2;

// Byte positions of the v2 header fields, chained from their widths.
const BASE_OFFSET_AT: usize = 0;
const LENGTH_AT: usize = BASE_OFFSET_AT + 8;
const PARTITION_LEADER_EPOCH_AT: usize = LENGTH_AT + 4;
const MAGIC_AT: usize = PARTITION_LEADER_EPOCH_AT + 4;
/// Byte position of the v2 CRC field.
pub const CRC_AT: usize = MAGIC_AT + 1;
/// First byte covered by the v2 CRC (the attributes).
pub const ATTRIBUTES_AT: usize = CRC_AT + 4;
const LAST_OFFSET_DELTA_AT: usize = ATTRIBUTES_AT + 2;
const BASE_TIMESTAMP_AT: usize = LAST_OFFSET_DELTA_AT + 4;
const MAX_TIMESTAMP_AT: usize = BASE_TIMESTAMP_AT + 8;
const PRODUCER_ID_AT: usize = MAX_TIMESTAMP_AT + 8;
const PRODUCER_EPOCH_AT: usize = PRODUCER_ID_AT + 8;
const BASE_SEQUENCE_AT: usize = PRODUCER_EPOCH_AT + 2;
const RECORDS_COUNT_AT: usize = BASE_SEQUENCE_AT + 4;
const RECORDS_AT: usize = RECORDS_COUNT_AT + 4;
const _: () = assert!(RECORDS_AT == RECORD_BATCH_OVERHEAD);

const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
const CONTROL_FLAG_MASK: i16 = 0x20;
const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;

// Big-endian field readers with bounds checks; `at` is where the field starts.

pub(crate) fn be_bytes<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N], DecodeError> {
    at.checked_add(N).and_then(|end| buf.get(at..end)).and_then(|b| b.try_into().ok()).ok_or_else(
        || {
            DecodeError::new(
                at,
                DecodeErrorKind::Truncated { needed: at.saturating_add(N), available: buf.len() },
            )
        },
    )
}
pub(crate) fn be_i64(buf: &[u8], at: usize) -> Result<i64, DecodeError> {
    be_bytes(buf, at).map(i64::from_be_bytes)
}
pub(crate) fn be_i32(buf: &[u8], at: usize) -> Result<i32, DecodeError> {
    be_bytes(buf, at).map(i32::from_be_bytes)
}
pub(crate) fn be_u32(buf: &[u8], at: usize) -> Result<u32, DecodeError> {
    be_bytes(buf, at).map(u32::from_be_bytes)
}
pub(crate) fn be_i16(buf: &[u8], at: usize) -> Result<i16, DecodeError> {
    be_bytes(buf, at).map(i16::from_be_bytes)
}

/// The first 17 bytes of any entry (v2 batch or legacy message): enough to frame it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    /// v2: `baseOffset`; legacy: the entry's offset (a wrapper's last inner offset).
    pub offset: Offset,
    /// The `size` field: bytes after the 12-byte log overhead.
    pub size: i32,
    /// The magic byte (entry byte 16): 0 or 1 legacy, 2 record batch.
    pub magic: i8,
}

impl EntryHeader {
    /// Total bytes of the entry: the 12-byte log overhead plus `size`.
    pub fn total_size(&self) -> usize {
        LOG_OVERHEAD + self.size.max(0) as usize
    }
}

/// Reads the framing of the entry at the start of `buf` (`FileLogInputStream.nextBatch`).
///
/// `Ok(None)` if fewer than 17 bytes remain (iteration stops without error);
/// `Err(InvalidSize)` (at 8) if `size < 14`. Whether the whole entry fits in `buf` is not checked:
/// the caller decides whether a short entry is a torn tail.
pub fn peek_entry(buf: &[u8]) -> Result<Option<EntryHeader>, DecodeError> {
    if buf.len() < HEADER_SIZE_UP_TO_MAGIC {
        return Ok(None);
    }
    let offset = be_i64(buf, BASE_OFFSET_AT)?;
    let size = be_i32(buf, LENGTH_AT)?;
    if size < MIN_ENTRY_SIZE_FIELD {
        return Err(DecodeError::new(LENGTH_AT, DecodeErrorKind::InvalidSize(i64::from(size))));
    }
    let magic = be_bytes::<1>(buf, MAGIC_AT)?[0] as i8;
    Ok(Some(EntryHeader { offset: Offset(offset), size, magic }))
}

/// The framing of `entry`, which must hold at least the header (17 bytes).
fn header(entry: &[u8]) -> Result<EntryHeader, DecodeError> {
    peek_entry(entry)?.ok_or_else(|| {
        DecodeError::new(
            0,
            DecodeErrorKind::Truncated { needed: HEADER_SIZE_UP_TO_MAGIC, available: entry.len() },
        )
    })
}

/// `entry` cut to exactly its own bytes; an error if it does not hold all of them.
fn whole(entry: &[u8]) -> Result<(EntryHeader, &[u8]), DecodeError> {
    let h = header(entry)?;
    let total = h.total_size();
    let bytes = entry.get(..total).ok_or_else(|| {
        DecodeError::new(0, DecodeErrorKind::Truncated { needed: total, available: entry.len() })
    })?;
    Ok((h, bytes))
}

fn check_magic(magic: i8) -> Result<(), DecodeError> {
    if (0..=MAGIC_V2).contains(&magic) {
        Ok(())
    } else {
        Err(DecodeError::new(MAGIC_AT, DecodeErrorKind::UnknownMagic(magic)))
    }
}

/// Header-only facts about the entry at the start of `entry`: no CRC check, no decompression.
/// A v2 batch needs its 61 header bytes; a legacy message needs its whole message.
pub fn parse_batch_info(entry: &[u8]) -> Result<BatchInfo, DecodeError> {
    let h = header(entry)?;
    check_magic(h.magic)?;
    if h.magic < MAGIC_V2 {
        return legacy::batch_info(entry);
    }
    if h.total_size() < RECORD_BATCH_OVERHEAD {
        return Err(DecodeError::new(LENGTH_AT, DecodeErrorKind::InvalidSize(i64::from(h.size))));
    }
    let attributes = be_i16(entry, ATTRIBUTES_AT)?;
    let compression = Compression::from_attributes(attributes as u8)
        .map_err(|e| DecodeError::new(ATTRIBUTES_AT, e.kind))?;
    let last_offset_delta = be_i32(entry, LAST_OFFSET_DELTA_AT)?;
    Ok(BatchInfo {
        base_offset: h.offset,
        last_offset: Offset(h.offset.0.wrapping_add(i64::from(last_offset_delta))),
        size: h.total_size() as u32,
        magic: h.magic,
        partition_leader_epoch: be_i32(entry, PARTITION_LEADER_EPOCH_AT)?,
        crc: be_u32(entry, CRC_AT)?,
        attributes,
        compression,
        timestamp_type: if attributes & TIMESTAMP_TYPE_MASK != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        is_transactional: attributes & TRANSACTIONAL_FLAG_MASK != 0,
        is_control: attributes & CONTROL_FLAG_MASK != 0,
        has_delete_horizon: attributes & DELETE_HORIZON_FLAG_MASK != 0,
        base_timestamp: be_i64(entry, BASE_TIMESTAMP_AT)?,
        max_timestamp: be_i64(entry, MAX_TIMESTAMP_AT)?,
        producer_id: be_i64(entry, PRODUCER_ID_AT)?,
        producer_epoch: be_i16(entry, PRODUCER_EPOCH_AT)?,
        base_sequence: be_i32(entry, BASE_SEQUENCE_AT)?,
        records_count: be_i32(entry, RECORDS_COUNT_AT)?,
    })
}

/// Checks the stored checksum of the whole entry at the start of `entry`: CRC-32C of bytes
/// 21..end for v2, CRC-32 (IEEE) of bytes 16..end for legacy. A mismatch is reported at the CRC
/// field (17 for v2, 12 for legacy).
pub fn verify_crc(entry: &[u8]) -> Result<(), DecodeError> {
    let (h, entry) = whole(entry)?;
    check_magic(h.magic)?;
    if h.magic < MAGIC_V2 {
        return legacy::verify_crc(entry);
    }
    if entry.len() < RECORD_BATCH_OVERHEAD {
        return Err(DecodeError::new(LENGTH_AT, DecodeErrorKind::InvalidSize(i64::from(h.size))));
    }
    let stored = be_u32(entry, CRC_AT)?;
    let computed = crc32c::crc32c(entry.get(ATTRIBUTES_AT..).unwrap_or_default());
    if stored != computed {
        return Err(DecodeError::new(CRC_AT, DecodeErrorKind::CrcMismatch { stored, computed }));
    }
    Ok(())
}

/// A whole entry with a verified checksum and its payload decompressed; records are decoded
/// lazily by [`Batch::records`].
#[derive(Clone, Debug)]
pub struct Batch<'a> {
    info: BatchInfo,
    /// v2: the (decompressed) records; legacy: the entry itself or a wrapper's inner set.
    body: Cow<'a, [u8]>,
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    V2 { compressed: bool },
    Legacy { offset_adjust: i64, forced_timestamp: Option<Timestamp>, inner_at: Option<usize> },
}

impl<'a> Batch<'a> {
    /// Header facts. For a legacy compressed wrapper `base_offset` is the first inner offset and
    /// `records_count` the number of inner messages.
    pub fn info(&self) -> &BatchInfo {
        &self.info
    }

    /// The records in order, with Kafka's strict reader rules. A control batch yields its control
    /// record too (callers skip it via `info().is_control`). Legacy wrappers yield their inner
    /// messages with absolute offsets. After the first error the iterator ends.
    pub fn records(&self) -> RecordIter<'_> {
        RecordIter { inner: self.inner() }
    }

    /// The records' offsets and timestamps only, read with the same strict rules as
    /// [`Batch::records`] (every length, the record count, no trailing bytes) but without
    /// building records: key, value and headers are stepped over by their lengths. A timestamp
    /// lookup stops at the first stamp it wants.
    pub fn record_stamps(&self) -> StampIter<'_> {
        StampIter { inner: self.inner() }
    }

    /// The records' offsets and values only (what value lines show), read with the same strict
    /// rules as [`Batch::records`] but without building records: key and headers are stepped
    /// over by their lengths.
    pub fn record_values(&self) -> ValueIter<'_> {
        ValueIter { inner: self.inner() }
    }

    /// Calls `f` with the offset and value of every record in order: what
    /// [`Batch::record_values`] yields, with the same rules, in one loop rather than an
    /// iterator step per record (the value-line streams' hot path). The first error ends the
    /// walk and is returned; `f` has then seen every record before it.
    pub fn for_each_value<'s>(
        &'s self,
        mut f: impl FnMut(RecordValue<'s>),
    ) -> Result<(), DecodeError> {
        let mut inner = self.inner();
        while let Some(value) = inner.next_value() {
            f(value?);
        }
        Ok(())
    }

    /// Bytes of the encoded records (for a compressed batch or wrapper, decompressed). Every
    /// record's encoding is longer than its value by at least one byte, so this bounds the
    /// value lines of the batch.
    pub fn records_bytes(&self) -> usize {
        self.body.len()
    }

    fn inner(&self) -> Inner<'_> {
        match self.kind {
            Kind::V2 { compressed } => Inner::V2(V2Iter {
                body: &self.body,
                pos: 0,
                remaining: self.info.records_count,
                base_offset: self.info.base_offset.0,
                base_timestamp: self.info.base_timestamp,
                log_append_time: (self.info.timestamp_type == TimestampType::LogAppendTime)
                    .then_some(self.info.max_timestamp),
                base_sequence: self.info.base_sequence,
                error_base: if compressed { None } else { Some(RECORDS_AT) },
                done: false,
            }),
            Kind::Legacy { offset_adjust, forced_timestamp, inner_at } => Inner::Legacy(
                LegacyRecordIter::new(&self.body, offset_adjust, forced_timestamp, inner_at),
            ),
        }
    }
}

/// Decodes the entry at the start of `entry` (bytes after it are ignored): checks framing and
/// CRC, decompresses the payload. Records are decoded by [`Batch::records`].
pub fn decode_batch(entry: &[u8]) -> Result<Batch<'_>, DecodeError> {
    let (_, whole_entry) = whole(entry)?;
    verify_crc(whole_entry)?;
    decode_batch_unverified(entry)
}

/// [`decode_batch`] without the CRC check, for lookups that only read record offsets and
/// timestamps, as Kafka's `FileRecords.searchForTimestamp` does (it never calls
/// `ensureValid`): every structural rule is still enforced, so damaged bytes give a
/// [`DecodeError`] or wrong values, never a panic. Readers that serve records use
/// [`decode_batch`].
pub fn decode_batch_unverified(entry: &[u8]) -> Result<Batch<'_>, DecodeError> {
    let (h, entry) = whole(entry)?;
    let mut info = parse_batch_info(entry)?;
    if h.magic < MAGIC_V2 {
        if info.compression == Compression::None {
            let kind = Kind::Legacy { offset_adjust: 0, forced_timestamp: None, inner_at: None };
            return Ok(Batch { info, body: Cow::Borrowed(entry), kind });
        }
        let w = legacy::decode_wrapper(entry)?;
        info.records_count = w.count;
        if let Some(first) = peek_entry(&w.inner).ok().flatten() {
            info.base_offset = Offset(first.offset.0.wrapping_add(w.offset_adjust));
        }
        let kind = Kind::Legacy {
            offset_adjust: w.offset_adjust,
            forced_timestamp: w.forced_timestamp,
            inner_at: Some(w.value_at),
        };
        return Ok(Batch { info, body: Cow::Owned(w.inner), kind });
    }
    if info.records_count < 0 {
        return Err(invalid(RECORDS_COUNT_AT, "negative recordsCount"));
    }
    let payload = entry.get(RECORDS_AT..).unwrap_or_default();
    let compressed = info.compression != Compression::None;
    let body = if !compressed || (payload.is_empty() && info.records_count == 0) {
        Cow::Borrowed(payload)
    } else {
        Cow::Owned(
            compression::decompress(info.compression, payload, h.magic)
                .map_err(|e| DecodeError::new(RECORDS_AT, e.kind))?,
        )
    };
    Ok(Batch { info, body, kind: Kind::V2 { compressed } })
}

fn invalid(at: usize, why: &'static str) -> DecodeError {
    DecodeError::new(at, DecodeErrorKind::InvalidRecord(why))
}

/// Iterator over the records of a [`Batch`].
#[derive(Clone, Debug)]
pub struct RecordIter<'b> {
    inner: Inner<'b>,
}

#[derive(Clone, Debug)]
enum Inner<'b> {
    V2(V2Iter<'b>),
    Legacy(LegacyRecordIter<'b>),
}

impl<'b> Iterator for RecordIter<'b> {
    type Item = Result<Record<'b>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::V2(it) => it.next(),
            Inner::Legacy(it) => it.next(),
        }
    }
}

#[derive(Clone, Debug)]
struct V2Iter<'b> {
    body: &'b [u8],
    pos: usize,
    remaining: i32,
    base_offset: i64,
    base_timestamp: Timestamp,
    log_append_time: Option<Timestamp>,
    base_sequence: i32,
    /// `Some(61)` for uncompressed batches (error positions are entry positions), `None` for
    /// compressed ones (errors are reported at the payload start).
    error_base: Option<usize>,
    done: bool,
}

impl<'b> V2Iter<'b> {
    fn at(&self, body_pos: usize) -> usize {
        match self.error_base {
            Some(base) => base + body_pos,
            None => RECORDS_AT,
        }
    }

    fn relocate(&self, e: DecodeError) -> DecodeError {
        DecodeError::new(self.at(e.at), e.kind)
    }

    /// `DefaultRecord.readFrom`, positions relative to the body.
    fn read_record(&mut self) -> Result<Record<'b>, DecodeError> {
        let mut headers = Vec::new();
        let frame = self.read_frame(Some(&mut headers))?;
        Ok(Record {
            offset: frame.offset,
            timestamp: frame.timestamp,
            key: frame.key,
            value: frame.value,
            headers,
            sequence: increment_sequence(self.base_sequence, frame.offset_delta),
        })
    }

    /// Reads the record at `pos` with every rule of [`V2Iter::read_record`] (lengths, null
    /// header keys, no bytes left over); headers are collected into `headers` when given, else
    /// only stepped over by their lengths. Moves `pos` to the next record. Always inlined: each
    /// caller keeps only what it uses (the value walk drops the headers and the timestamp).
    #[inline(always)]
    fn read_frame(
        &mut self,
        mut headers: Option<&mut Vec<Header<'b>>>,
    ) -> Result<Frame<'b>, DecodeError> {
        let body = self.body;
        let start = self.pos;
        let mut pos = start;
        let length = read_varint(body, &mut pos)?;
        let end = usize::try_from(length)
            .ok()
            .and_then(|l| pos.checked_add(l))
            .filter(|&e| e <= body.len())
            .ok_or_else(|| invalid(start, "record length exceeds the bytes left in the batch"))?;
        let rec = body.get(..end).unwrap_or_default();
        let _attributes = be_bytes::<1>(rec, pos)?;
        pos += 1;
        let timestamp_delta = read_varlong(rec, &mut pos)?;
        let offset_delta = read_varint(rec, &mut pos)?;
        let key = read_bytes(rec, &mut pos)?;
        let value = read_bytes(rec, &mut pos)?;
        let header_count_at = pos;
        let header_count = read_varint(rec, &mut pos)?;
        if header_count < 0 {
            return Err(invalid(header_count_at, "negative header count"));
        }
        if header_count as usize > end - pos {
            return Err(invalid(header_count_at, "header count exceeds the bytes left"));
        }
        if let Some(headers) = headers.as_deref_mut() {
            headers.reserve_exact(header_count as usize);
        }
        for _ in 0..header_count {
            let key_at = pos;
            let key =
                read_bytes(rec, &mut pos)?.ok_or_else(|| invalid(key_at, "null header key"))?;
            let value = read_bytes(rec, &mut pos)?;
            if let Some(headers) = headers.as_deref_mut() {
                headers.push(Header { key, value });
            }
        }
        if pos != end {
            return Err(invalid(start, "record length does not match the bytes it holds"));
        }
        self.pos = end;
        let timestamp = self
            .log_append_time
            .unwrap_or_else(|| self.base_timestamp.wrapping_add(timestamp_delta));
        Ok(Frame {
            offset: Offset(self.base_offset.wrapping_add(i64::from(offset_delta))),
            offset_delta,
            timestamp,
            key,
            value,
        })
    }

    /// One step of the iteration with Kafka's count rules (exactly `recordsCount` records, no
    /// bytes after the last one); `read` decodes the record at `pos`. After an error, `None`.
    fn step<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Option<Result<T, DecodeError>> {
        if self.done {
            return None;
        }
        if self.remaining <= 0 {
            self.done = true;
            // Kafka checks this after the last record; a batch declaring 0 records is checked
            // here, so an emptied batch with stray bytes is also rejected.
            if self.pos != self.body.len() {
                return Some(Err(invalid(self.at(self.pos), TRAILING)));
            }
            return None;
        }
        if self.pos >= self.body.len() {
            self.done = true;
            return Some(Err(invalid(self.at(self.pos), "fewer records than recordsCount")));
        }
        let result = read(self).map_err(|e| self.relocate(e));
        self.remaining -= 1;
        match result {
            Ok(r) if self.remaining == 0 && self.pos != self.body.len() => {
                drop(r);
                self.done = true;
                Some(Err(invalid(self.at(self.pos), TRAILING)))
            }
            Ok(r) => {
                if self.remaining == 0 {
                    self.done = true;
                }
                Some(Ok(r))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// The parts of a v2 record that [`V2Iter::read_frame`] returns.
struct Frame<'b> {
    offset: Offset,
    offset_delta: i32,
    timestamp: Timestamp,
    key: Option<&'b [u8]>,
    value: Option<&'b [u8]>,
}

impl<'b> Iterator for V2Iter<'b> {
    type Item = Result<Record<'b>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(V2Iter::read_record)
    }
}

/// Offset and effective timestamp of one record (what a timestamp lookup compares).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RecordStamp {
    /// Absolute offset of the record.
    pub offset: Offset,
    /// The effective timestamp (LogAppendTime batches: the batch's max timestamp).
    pub timestamp: Timestamp,
}

/// Iterator over the offsets and timestamps of a [`Batch`]'s records ([`Batch::record_stamps`]).
#[derive(Clone, Debug)]
pub struct StampIter<'b> {
    inner: Inner<'b>,
}

impl Iterator for StampIter<'_> {
    type Item = Result<RecordStamp, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        let stamp = |offset, timestamp| RecordStamp { offset, timestamp };
        match &mut self.inner {
            Inner::V2(it) => {
                it.step(|it| it.read_frame(None).map(|f| stamp(f.offset, f.timestamp)))
            }
            Inner::Legacy(it) => it.next().map(|r| r.map(|r| stamp(r.offset, r.timestamp))),
        }
    }
}

/// What [`peek_record_stamp`] found at the start of a window of records.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StampPeek {
    /// The record starting the window: its stamp and its size in bytes (length varint included).
    Stamp {
        /// Offset and effective timestamp.
        stamp: RecordStamp,
        /// Bytes of the record, so the next one starts at `len`.
        len: usize,
    },
    /// The window ends inside this record; at least `need` bytes from its start are needed.
    NeedMore {
        /// Window length that holds the whole record (a lower bound while its length varint
        /// is itself cut off).
        need: usize,
    },
}

/// Reads the offset and timestamp of the record at the start of `window`, a window over the
/// records of an uncompressed v2 batch described by `info` (the bytes after its 61-byte header)
/// that starts at a record boundary, so a timestamp lookup can read a large batch only up to
/// the record it wants instead of whole. Only the record's framing is read: its length (which
/// must fit in the batch), attributes, timestamp delta and offset delta (which must fit in the
/// record); key, value and headers are stepped over by the length, as a lookup serves no record
/// bytes (whoever reads from its answer decodes those records with every rule). The
/// batch-level rules are the caller's ([`check_no_trailing_records`]). `at_end` says the window
/// runs to the end of the batch: a record that does not fit is then an error, else
/// [`StampPeek::NeedMore`]. Error positions are relative to the window.
pub fn peek_record_stamp(
    info: &BatchInfo,
    window: &[u8],
    at_end: bool,
) -> Result<StampPeek, DecodeError> {
    if window.is_empty() && at_end {
        return Err(invalid(0, "fewer records than recordsCount"));
    }
    let mut pos = 0;
    let length = match read_varint(window, &mut pos) {
        Ok(length) => length,
        Err(e) if !at_end && matches!(e.kind, DecodeErrorKind::Truncated { .. }) => {
            return Ok(StampPeek::NeedMore { need: window.len() + 5 });
        }
        Err(e) => return Err(e),
    };
    let Some(end) = usize::try_from(length).ok().and_then(|l| l.checked_add(pos)) else {
        return Err(invalid(0, "negative record length"));
    };
    if end > window.len() {
        if at_end {
            return Err(invalid(0, "record length exceeds the bytes left in the batch"));
        }
        return Ok(StampPeek::NeedMore { need: end });
    }
    let rec = window.get(..end).unwrap_or_default();
    pos += 1; // attributes
    let timestamp_delta = read_varlong(rec, &mut pos)?;
    let offset_delta = read_varint(rec, &mut pos)?;
    let timestamp = match info.timestamp_type {
        TimestampType::LogAppendTime => info.max_timestamp,
        _ => info.base_timestamp.wrapping_add(timestamp_delta),
    };
    let offset = Offset(info.base_offset.0.wrapping_add(i64::from(offset_delta)));
    Ok(StampPeek::Stamp { stamp: RecordStamp { offset, timestamp }, len: end })
}

/// The batch-level rule that ends a [`peek_record_stamp`] walk: after the last of
/// `recordsCount` records, `left_over` bytes of the batch remain, which must be none.
pub fn check_no_trailing_records(left_over: usize) -> Result<(), DecodeError> {
    if left_over == 0 { Ok(()) } else { Err(invalid(0, TRAILING)) }
}

/// Offset and value of one record (what a value line shows).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RecordValue<'b> {
    /// Absolute offset of the record.
    pub offset: Offset,
    /// The value, `None` if null (a tombstone).
    pub value: Option<&'b [u8]>,
}

/// Iterator over the offsets and values of a [`Batch`]'s records ([`Batch::record_values`]).
#[derive(Clone, Debug)]
pub struct ValueIter<'b> {
    inner: Inner<'b>,
}

impl<'b> Iterator for ValueIter<'b> {
    type Item = Result<RecordValue<'b>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next_value()
    }
}

impl<'b> Inner<'b> {
    /// The next record's offset and value ([`ValueIter`], [`Batch::for_each_value`]); always
    /// inlined so that the value walk's loop holds the whole record decoding.
    #[inline(always)]
    fn next_value(&mut self) -> Option<Result<RecordValue<'b>, DecodeError>> {
        match self {
            Inner::V2(it) => it.step(|it| {
                it.read_frame(None).map(|f| RecordValue { offset: f.offset, value: f.value })
            }),
            Inner::Legacy(it) => {
                it.next().map(|r| r.map(|r| RecordValue { offset: r.offset, value: r.value }))
            }
        }
    }
}

const TRAILING: &str = "incorrect declared batch size: bytes remain after the last record";

/// `varint length` + bytes; a negative length is null.
#[inline(always)]
fn read_bytes<'b>(rec: &'b [u8], pos: &mut usize) -> Result<Option<&'b [u8]>, DecodeError> {
    let len_at = *pos;
    let len = read_varint(rec, pos)?;
    if len < 0 {
        return Ok(None);
    }
    let start = *pos;
    let bytes = start
        .checked_add(len as usize)
        .and_then(|end| rec.get(start..end))
        .ok_or_else(|| invalid(len_at, "field extends past the end of the record"))?;
    *pos = start + bytes.len();
    Ok(Some(bytes))
}

/// `DefaultRecordBatch.incrementSequence`: `sequence + increment`, continuing from 0 past
/// `i32::MAX`; -1 stays -1 (no sequence).
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence < 0 {
        return -1;
    }
    let sum = i64::from(sequence) + i64::from(increment);
    if sum > i64::from(i32::MAX) { (sum - i64::from(i32::MAX) - 1) as i32 } else { sum as i32 }
}

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
fn write_record(
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
/// record through `write_record` and 25 through this (stop 13 in `BENCHMARKS.md`).
#[inline]
fn write_value_record(
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
    let total = out.len() - start;
    let batch_length =
        i32::try_from(total - LOG_OVERHEAD).map_err(|_| invalid(0, "batch larger than 2 GiB"))?;
    let h = out.get_mut(start..).unwrap_or_default();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    fn hello() -> NewRecord {
        NewRecord {
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(b"hello".to_vec()),
            headers: vec![],
        }
    }

    const APPENDIX_B_HELLO: &str = "
        00 00 00 00 00 00 00 00  00 00 00 3d  00 00 00 00  02  e6 41 a4 4b  00 00
        00 00 00 00  00 00 01 8b cf e5 68 00  00 00 01 8b cf e5 68 00
        ff ff ff ff ff ff ff ff  ff ff  ff ff ff ff  00 00 00 01
        16 00 00 00 01 0a 68 65 6c 6c 6f 00";

    #[test]
    fn one_record_batch_matches_appendix_b_byte_for_byte() {
        let bytes = encode_batch(&BatchSpec::default(), &[hello()]).unwrap();
        assert_eq!(bytes, hex(APPENDIX_B_HELLO));
        assert_eq!(bytes.len(), 73);
        let info = parse_batch_info(&bytes).unwrap();
        assert_eq!(info.crc, 0xE641_A44B);
        assert_eq!(info.size, 73);
    }

    #[test]
    fn appendix_b_batch_decodes_to_its_record() {
        let bytes = hex(APPENDIX_B_HELLO);
        let batch = decode_batch(&bytes).unwrap();
        let records: Vec<_> = batch.records().collect::<Result<_, _>>().unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].offset, Offset(0));
        assert_eq!(records[0].timestamp, 1_700_000_000_000);
        assert_eq!(records[0].key, None);
        assert_eq!(records[0].value, Some(&b"hello"[..]));
        assert_eq!(records[0].sequence, -1);
    }

    fn rec(ts: Timestamp, key: Option<&[u8]>, value: Option<&[u8]>) -> NewRecord {
        NewRecord {
            timestamp: ts,
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers: vec![],
        }
    }

    fn sample_records() -> Vec<NewRecord> {
        let mut with_headers = rec(1_700_000_000_500, Some(b"k2"), Some(b"v2"));
        with_headers.headers =
            vec![(b"trace".to_vec(), Some(b"abc".to_vec())), (b"empty".to_vec(), None)];
        vec![
            rec(1_700_000_000_100, Some(b"k0"), Some(b"hello")),
            rec(1_700_000_000_000, None, None),
            with_headers,
            rec(1_699_999_999_000, Some(b""), Some(&[0u8; 300])),
        ]
    }

    /// Recomputes `batchLength` and the CRC of a hand-edited v2 batch.
    fn refresh(bytes: &mut [u8]) {
        let len = (bytes.len() - LOG_OVERHEAD) as i32;
        bytes[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&len.to_be_bytes());
        let crc = crc32c::crc32c(&bytes[ATTRIBUTES_AT..]);
        bytes[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    }

    fn all<'b>(batch: &'b Batch<'_>) -> Result<Vec<Record<'b>>, DecodeError> {
        batch.records().collect()
    }

    #[test]
    fn every_codec_roundtrips_keys_values_nulls_and_headers() {
        let input = sample_records();
        for compression in Compression::ALL {
            let spec = BatchSpec {
                base_offset: Offset(1000),
                partition_leader_epoch: 7,
                compression,
                producer_id: 42,
                producer_epoch: 3,
                base_sequence: 10,
                ..BatchSpec::default()
            };
            let bytes = encode_batch(&spec, &input).unwrap();
            let batch = decode_batch(&bytes).unwrap();
            let info = batch.info();
            assert_eq!(info.compression, compression);
            assert_eq!(info.base_offset, Offset(1000));
            assert_eq!(info.last_offset, Offset(1003));
            assert_eq!(info.records_count, 4);
            assert_eq!(info.base_timestamp, 1_700_000_000_100);
            assert_eq!(info.max_timestamp, 1_700_000_000_500);
            assert_eq!(info.partition_leader_epoch, 7);
            assert_eq!((info.producer_id, info.producer_epoch, info.base_sequence), (42, 3, 10));
            assert_eq!(info.size as usize, bytes.len());
            let out = all(&batch).unwrap();
            assert_eq!(out.len(), input.len());
            for (i, (r, n)) in out.iter().zip(&input).enumerate() {
                assert_eq!(r.offset, Offset(1000 + i as i64));
                assert_eq!(r.timestamp, n.timestamp);
                assert_eq!(r.key, n.key.as_deref());
                assert_eq!(r.value, n.value.as_deref());
                assert_eq!(r.sequence, 10 + i as i32);
                let headers: Vec<_> = r
                    .headers
                    .iter()
                    .map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec)))
                    .collect();
                assert_eq!(headers, n.headers);
            }
        }
    }

    #[test]
    fn encode_batch_into_appends_and_returns_the_batch_length() {
        let mut out = b"prefix".to_vec();
        let n = encode_batch_into(&mut out, &BatchSpec::default(), &[hello()]).unwrap();
        assert_eq!(n, 73);
        assert_eq!(&out[..6], b"prefix");
        assert_eq!(out[6..], hex(APPENDIX_B_HELLO));
    }

    #[test]
    fn empty_record_list_is_refused_and_leaves_out_untouched() {
        let mut out = vec![1, 2, 3];
        let none: &[NewRecord] = &[];
        assert!(encode_batch_into(&mut out, &BatchSpec::default(), none).is_err());
        assert_eq!(out, [1, 2, 3]);
    }

    #[test]
    fn records_without_a_timestamp_are_written_with_the_default_timestamp() {
        let records = [rec(NO_TIMESTAMP, None, Some(b"a")), rec(7_000, None, Some(b"b"))];
        let spec = BatchSpec { default_timestamp: 5_000, ..BatchSpec::default() };
        let batch_bytes = encode_batch(&spec, &records).unwrap();
        let batch = decode_batch(&batch_bytes).unwrap();
        assert_eq!((batch.info().base_timestamp, batch.info().max_timestamp), (5_000, 7_000));
        let stamps: Vec<_> = all(&batch).unwrap().iter().map(|r| r.timestamp).collect();
        assert_eq!(stamps, [5_000, 7_000]);
        // Without a default the record keeps NO_TIMESTAMP, as before.
        let bytes = encode_batch(&BatchSpec::default(), &records[..1]).unwrap();
        assert_eq!(all(&decode_batch(&bytes).unwrap()).unwrap()[0].timestamp, NO_TIMESTAMP);
    }

    #[test]
    fn borrowed_records_encode_byte_for_byte_like_owned_ones() {
        let owned = sample_records();
        let borrowed: Vec<RecordRef<'_>> = owned.iter().map(EncodeRecord::record_ref).collect();
        for compression in Compression::ALL {
            let spec = BatchSpec { compression, default_timestamp: 9, ..BatchSpec::default() };
            assert_eq!(encode_batch(&spec, &borrowed), encode_batch(&spec, &owned));
        }
        let line = RecordRef::value_only(b"line");
        let bytes = encode_batch(&BatchSpec::default(), &[line]).unwrap();
        let batch = decode_batch(&bytes).unwrap();
        let r = &all(&batch).unwrap()[0];
        assert_eq!((r.key, r.value, r.headers.len()), (None, Some(&b"line"[..]), 0));
    }

    #[test]
    fn record_stamps_are_the_records_offsets_and_timestamps_for_every_codec() {
        for compression in Compression::ALL {
            let spec = BatchSpec { base_offset: Offset(40), compression, ..BatchSpec::default() };
            let bytes = encode_batch(&spec, &sample_records()).unwrap();
            let batch = decode_batch(&bytes).unwrap();
            let stamps: Vec<_> = batch.record_stamps().collect::<Result<_, _>>().unwrap();
            let expected: Vec<_> = all(&batch)
                .unwrap()
                .iter()
                .map(|r| RecordStamp { offset: r.offset, timestamp: r.timestamp })
                .collect();
            assert_eq!(stamps, expected);
        }
        let lat = BatchSpec {
            timestamp_type: TimestampType::LogAppendTime,
            log_append_time: 77,
            ..BatchSpec::default()
        };
        let bytes = encode_batch(&lat, &sample_records()).unwrap();
        let batch = decode_batch(&bytes).unwrap();
        assert!(batch.record_stamps().all(|s| s.unwrap().timestamp == 77));
        let v1 = legacy::encode_message(Offset(8), 1, 0, 1_600_000_000_000, None, None);
        let batch = decode_batch(&v1).unwrap();
        let stamps: Vec<_> = batch.record_stamps().collect::<Result<_, _>>().unwrap();
        assert_eq!(stamps, [RecordStamp { offset: Offset(8), timestamp: 1_600_000_000_000 }]);
    }

    /// Walks `records` (an uncompressed batch's records section) with windows of `window`
    /// bytes the way a timestamp lookup does, collecting every stamp.
    fn peek_all(info: &BatchInfo, records: &[u8], window: usize) -> Vec<RecordStamp> {
        let (mut out, mut pos, mut want) = (Vec::new(), 0, window);
        while out.len() < info.records_count as usize {
            let stop = (pos + want).min(records.len());
            let at_end = stop == records.len();
            match peek_record_stamp(info, &records[pos..stop], at_end).unwrap() {
                StampPeek::Stamp { stamp, len } => {
                    out.push(stamp);
                    pos += len;
                    want = window;
                }
                StampPeek::NeedMore { need } => {
                    assert!(need > stop - pos, "NeedMore must ask for more than it had");
                    want = need;
                }
            }
        }
        check_no_trailing_records(records.len() - pos).unwrap();
        out
    }

    #[test]
    fn peek_record_stamp_walks_an_uncompressed_batch_like_record_stamps_for_any_window() {
        for tstype in [TimestampType::CreateTime, TimestampType::LogAppendTime] {
            let spec = BatchSpec {
                base_offset: Offset(40),
                timestamp_type: tstype,
                log_append_time: 77,
                ..BatchSpec::default()
            };
            let bytes = encode_batch(&spec, &sample_records()).unwrap();
            let batch = decode_batch(&bytes).unwrap();
            let expected: Vec<_> = batch.record_stamps().collect::<Result<_, _>>().unwrap();
            for window in 1..bytes.len() {
                assert_eq!(peek_all(batch.info(), &bytes[RECORDS_AT..], window), expected);
            }
        }
    }

    #[test]
    fn peek_record_stamp_refuses_damaged_framing_at_the_end_of_a_batch() {
        let bytes = encode_batch(&BatchSpec::default(), &sample_records()).unwrap();
        let info = parse_batch_info(&bytes).unwrap();
        let records = &bytes[RECORDS_AT..];
        // Cut inside the first record: more is needed, or an error once the batch has ended.
        assert!(matches!(
            peek_record_stamp(&info, &records[..3], false),
            Ok(StampPeek::NeedMore { .. })
        ));
        assert!(peek_record_stamp(&info, &records[..3], true).is_err());
        assert!(peek_record_stamp(&info, &[], true).is_err(), "fewer records than the count");
        // A negative record length is an error whatever the window.
        assert!(peek_record_stamp(&info, &[0x01, 0, 0, 0], false).is_err());
        assert!(check_no_trailing_records(1).is_err());
    }

    #[test]
    fn record_values_are_the_records_offsets_and_values_for_every_codec() {
        for compression in Compression::ALL {
            let spec = BatchSpec { base_offset: Offset(40), compression, ..BatchSpec::default() };
            let bytes = encode_batch(&spec, &sample_records()).unwrap();
            let batch = decode_batch(&bytes).unwrap();
            let values: Vec<_> = batch.record_values().collect::<Result<_, _>>().unwrap();
            let expected: Vec<_> = all(&batch)
                .unwrap()
                .iter()
                .map(|r| RecordValue { offset: r.offset, value: r.value })
                .collect();
            assert_eq!(values, expected);
        }
        let v1 = legacy::encode_message(Offset(8), 1, 0, 1_600_000_000_000, None, Some(b"v"));
        let batch = decode_batch(&v1).unwrap();
        let values: Vec<_> = batch.record_values().collect::<Result<_, _>>().unwrap();
        assert_eq!(values, [RecordValue { offset: Offset(8), value: Some(&b"v"[..]) }]);
    }

    #[test]
    fn record_stamps_refuse_what_records_refuse_at_the_same_byte() {
        let mut short = hex(APPENDIX_B_HELLO);
        short[RECORD_BATCH_OVERHEAD] = 0x18; // record length one byte longer than its contents
        short.push(0);
        let mut trailing = hex(APPENDIX_B_HELLO);
        trailing.extend_from_slice(&[0x16, 0, 0]);
        let mut missing = hex(APPENDIX_B_HELLO);
        missing[RECORDS_COUNT_AT + 3] = 2;
        for mut bytes in [short, trailing, missing] {
            refresh(&mut bytes);
            let batch = decode_batch(&bytes).unwrap();
            let light = batch.record_stamps().find_map(Result::err).unwrap();
            assert_eq!(Some(light.clone()), batch.records().find_map(Result::err));
            let values = batch.record_values().find_map(Result::err);
            assert_eq!(values, Some(light.clone()));
            // The value walk sees the records before the damaged one, then stops with its error.
            let mut walked = Vec::new();
            assert_eq!(batch.for_each_value(|v| walked.push(v)), Err(light));
            let before: Vec<_> = batch.record_values().map_while(Result::ok).collect();
            assert_eq!(walked, before);
        }
    }

    #[test]
    fn the_value_walk_is_the_record_values_for_every_codec_and_legacy_messages() {
        let mut batches: Vec<Vec<u8>> = Compression::ALL
            .into_iter()
            .map(|compression| {
                let spec =
                    BatchSpec { base_offset: Offset(40), compression, ..BatchSpec::default() };
                encode_batch(&spec, &sample_records()).unwrap()
            })
            .collect();
        batches.push(legacy::encode_message(Offset(8), 1, 0, 1_600_000_000_000, None, Some(b"v")));
        batches.push(legacy::encode_message(Offset(9), 0, 0, 0, Some(b"k"), None));
        for bytes in &batches {
            let batch = decode_batch(bytes).unwrap();
            let mut walked = Vec::new();
            batch.for_each_value(|v| walked.push(v)).unwrap();
            let values: Vec<_> = batch.record_values().collect::<Result<_, _>>().unwrap();
            assert_eq!(walked, values);
            // The bound the value-line fast path relies on: value lines fit in the records.
            let lines: usize = values.iter().map(|v| v.value.map_or(0, <[u8]>::len) + 1).sum();
            assert!(lines <= batch.records_bytes(), "{lines} > {}", batch.records_bytes());
        }
    }

    #[test]
    fn log_append_time_overrides_every_record_timestamp() {
        let spec = BatchSpec {
            timestamp_type: TimestampType::LogAppendTime,
            log_append_time: 1_800_000_000_000,
            ..BatchSpec::default()
        };
        let bytes = encode_batch(&spec, &sample_records()).unwrap();
        let batch = decode_batch(&bytes).unwrap();
        assert_eq!(batch.info().timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(batch.info().max_timestamp, 1_800_000_000_000);
        assert!(all(&batch).unwrap().iter().all(|r| r.timestamp == 1_800_000_000_000));
    }

    #[test]
    fn set_log_append_time_stamps_the_batch_and_keeps_the_crc_valid() {
        let mut bytes = encode_batch(&BatchSpec::default(), &sample_records()).unwrap();
        set_log_append_time(&mut bytes, 1_900_000_000_000).unwrap();
        verify_crc(&bytes).unwrap();
        let batch = decode_batch(&bytes).unwrap();
        assert_eq!(batch.info().timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(batch.info().base_timestamp, 1_700_000_000_100, "base timestamp unchanged");
        assert!(all(&batch).unwrap().iter().all(|r| r.timestamp == 1_900_000_000_000));
    }

    #[test]
    fn base_offset_and_leader_epoch_rewrites_do_not_touch_the_crc() {
        let mut bytes = hex(APPENDIX_B_HELLO);
        set_base_offset(&mut bytes, Offset(5000)).unwrap();
        set_partition_leader_epoch(&mut bytes, 9).unwrap();
        assert_eq!(&bytes[CRC_AT..CRC_AT + 4], &0xE641_A44Bu32.to_be_bytes());
        let batch = decode_batch(&bytes).unwrap();
        assert_eq!(batch.info().partition_leader_epoch, 9);
        assert_eq!(all(&batch).unwrap()[0].offset, Offset(5000));
    }

    #[test]
    fn crc_mismatch_is_reported_at_the_crc_field() {
        let mut bytes = hex(APPENDIX_B_HELLO);
        bytes[70] ^= 0x01; // inside the value
        for e in [verify_crc(&bytes).unwrap_err(), decode_batch(&bytes).unwrap_err()] {
            assert_eq!(e.at, CRC_AT);
            assert!(matches!(e.kind, DecodeErrorKind::CrcMismatch { stored: 0xE641_A44B, .. }));
        }
        // Header facts are still readable: parse_batch_info does not check the CRC.
        assert_eq!(parse_batch_info(&bytes).unwrap().records_count, 1);
    }

    #[test]
    fn unverified_decode_skips_only_the_crc_check() {
        let intact = hex(APPENDIX_B_HELLO);
        let stamps = |b: &Batch<'_>| -> Vec<(Offset, Timestamp)> {
            b.record_stamps().map(|s| s.map(|s| (s.offset, s.timestamp)).unwrap()).collect()
        };
        let verified = decode_batch(&intact).unwrap();
        let unverified = decode_batch_unverified(&intact).unwrap();
        assert_eq!(stamps(&verified), stamps(&unverified));
        assert_eq!(stamps(&unverified), [(Offset(0), 1_700_000_000_000)]);
        // A flipped value bit: the CRC check refuses it, the unverified decode still parses.
        let mut flipped = intact.clone();
        flipped[70] ^= 0x01;
        assert!(decode_batch(&flipped).is_err());
        assert_eq!(stamps(&decode_batch_unverified(&flipped).unwrap()), stamps(&verified));
        // Structural damage is still an error: a record count the records do not have.
        let mut miscounted = intact;
        miscounted[60] = 2;
        assert!(decode_batch_unverified(&miscounted).unwrap().record_stamps().any(|s| s.is_err()));
    }

    #[test]
    fn peek_entry_stops_quietly_below_17_bytes_and_rejects_small_sizes() {
        let bytes = hex(APPENDIX_B_HELLO);
        assert_eq!(peek_entry(&bytes[..16]).unwrap(), None);
        let h = peek_entry(&bytes[..17]).unwrap().unwrap();
        assert_eq!(h, EntryHeader { offset: Offset(0), size: 61, magic: 2 });
        assert_eq!(h.total_size(), 73);
        let mut small = bytes.clone();
        small[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&13i32.to_be_bytes());
        let e = peek_entry(&small).unwrap_err();
        assert_eq!((e.at, e.kind), (LENGTH_AT, DecodeErrorKind::InvalidSize(13)));
    }

    #[test]
    fn torn_entry_is_truncated_not_decoded() {
        let bytes = hex(APPENDIX_B_HELLO);
        let e = decode_batch(&bytes[..72]).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::Truncated { needed: 73, available: 72 });
        assert!(parse_batch_info(&bytes[..60]).is_err());
        assert!(parse_batch_info(&bytes[..61]).is_ok());
    }

    #[test]
    fn bytes_after_the_entry_are_ignored() {
        let mut bytes = hex(APPENDIX_B_HELLO);
        bytes.extend_from_slice(&[0xff; 10]);
        assert_eq!(all(&decode_batch(&bytes).unwrap()).unwrap().len(), 1);
    }

    #[test]
    fn v2_batch_shorter_than_its_header_or_with_unknown_magic_is_invalid() {
        let mut bytes = hex(APPENDIX_B_HELLO);
        bytes[MAGIC_AT] = 3;
        assert_eq!(decode_batch(&bytes).unwrap_err().kind, DecodeErrorKind::UnknownMagic(3));
        let mut short = hex(APPENDIX_B_HELLO);
        short[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&48i32.to_be_bytes());
        assert!(matches!(
            parse_batch_info(&short).unwrap_err().kind,
            DecodeErrorKind::InvalidSize(48)
        ));
    }

    #[test]
    fn invalid_codec_bits_are_rejected_at_the_attributes() {
        let mut bytes = hex(APPENDIX_B_HELLO);
        bytes[ATTRIBUTES_AT + 1] = 0x05;
        refresh(&mut bytes);
        let e = decode_batch(&bytes).unwrap_err();
        assert_eq!((e.at, e.kind), (ATTRIBUTES_AT, DecodeErrorKind::InvalidCompression(5)));
    }

    #[test]
    fn record_length_larger_than_its_contents_is_invalid() {
        let mut bytes = hex(APPENDIX_B_HELLO);
        bytes[RECORDS_AT] = 0x18; // length 12, one byte more than the record holds
        bytes.push(0);
        refresh(&mut bytes);
        let batch = decode_batch(&bytes).unwrap();
        let e = all(&batch).unwrap_err();
        assert_eq!(e.at, RECORDS_AT);
        assert!(
            matches!(e.kind, DecodeErrorKind::InvalidRecord(m) if m.contains("length does not match"))
        );
    }

    #[test]
    fn record_length_past_the_batch_end_is_invalid() {
        let mut bytes = hex(APPENDIX_B_HELLO);
        bytes[RECORDS_AT] = 0x7e; // 63 bytes, the batch holds 11
        refresh(&mut bytes);
        let e = all(&decode_batch(&bytes).unwrap()).unwrap_err();
        assert_eq!(e.at, RECORDS_AT);
    }

    #[test]
    fn fewer_records_than_records_count_is_invalid() {
        let mut bytes = hex(APPENDIX_B_HELLO);
        bytes[RECORDS_COUNT_AT + 3] = 2;
        refresh(&mut bytes);
        let batch = decode_batch(&bytes).unwrap();
        let mut it = batch.records();
        assert!(it.next().unwrap().is_ok());
        let e = it.next().unwrap().unwrap_err();
        assert_eq!(e.at, 73);
        assert!(it.next().is_none(), "the iterator ends after an error");
    }

    #[test]
    fn bytes_after_the_last_record_fail_the_last_record() {
        let mut bytes = hex(APPENDIX_B_HELLO);
        bytes.extend_from_slice(&[0x16, 0, 0]);
        refresh(&mut bytes);
        let batch = decode_batch(&bytes).unwrap();
        let mut it = batch.records();
        let e = it.next().unwrap().unwrap_err();
        assert!(
            matches!(e.kind, DecodeErrorKind::InvalidRecord(m) if m.contains("declared batch size"))
        );
        assert!(it.next().is_none());
        // The same with zero declared records.
        let mut zero = hex(APPENDIX_B_HELLO);
        zero[RECORDS_COUNT_AT + 3] = 0;
        refresh(&mut zero);
        assert!(all(&decode_batch(&zero).unwrap()).is_err());
    }

    #[test]
    fn negative_records_count_and_null_header_keys_are_invalid() {
        let mut bytes = hex(APPENDIX_B_HELLO);
        bytes[RECORDS_COUNT_AT..RECORDS_AT].copy_from_slice(&(-1i32).to_be_bytes());
        refresh(&mut bytes);
        assert!(decode_batch(&bytes).is_err());

        let mut r = hello();
        r.headers = vec![(b"h".to_vec(), None)];
        let mut bytes = encode_batch(&BatchSpec::default(), &[r]).unwrap();
        // Header key length varint (1 -> 0x02) sits 4 bytes before the end: turn it into -1.
        let n = bytes.len();
        assert_eq!(bytes[n - 3], 0x02);
        bytes.splice(n - 3..n - 1, [0x01]);
        bytes[RECORDS_AT] -= 2; // record length minus one byte
        refresh(&mut bytes);
        let e = all(&decode_batch(&bytes).unwrap()).unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::InvalidRecord("null header key")), "{e:?}");
    }

    #[test]
    fn emptied_batch_with_no_payload_yields_no_records() {
        let mut bytes = hex(APPENDIX_B_HELLO);
        bytes.truncate(RECORD_BATCH_OVERHEAD);
        bytes[RECORDS_COUNT_AT + 3] = 0;
        bytes[ATTRIBUTES_AT + 1] = Compression::Gzip.id();
        refresh(&mut bytes);
        let batch = decode_batch(&bytes).unwrap();
        assert_eq!(all(&batch).unwrap().len(), 0);
    }

    #[test]
    fn sequences_wrap_past_i32_max() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(increment_sequence(5, 2), 7);
        assert_eq!(increment_sequence(-1, 2), -1);
    }

    #[test]
    fn legacy_messages_decode_with_their_offsets_and_timestamps() {
        let v0 = legacy::encode_message(Offset(7), 0, 0, 123, Some(b"k"), Some(b"v0"));
        let batch = decode_batch(&v0).unwrap();
        assert_eq!(batch.info().magic, 0);
        assert_eq!(batch.info().timestamp_type, TimestampType::NoTimestampType);
        let r = &all(&batch).unwrap()[0];
        assert_eq!(
            (r.offset, r.timestamp, r.key, r.value),
            (Offset(7), -1, Some(&b"k"[..]), Some(&b"v0"[..]))
        );

        let v1 = legacy::encode_message(Offset(8), 1, 0, 1_600_000_000_000, None, None);
        let batch = decode_batch(&v1).unwrap();
        assert_eq!(batch.info().timestamp_type, TimestampType::CreateTime);
        assert_eq!(batch.info().max_timestamp, 1_600_000_000_000);
        let r = &all(&batch).unwrap()[0];
        assert_eq!(
            (r.offset, r.timestamp, r.key, r.value),
            (Offset(8), 1_600_000_000_000, None, None)
        );
    }

    #[test]
    fn legacy_crc_mismatch_is_reported_at_byte_12() {
        let mut v1 = legacy::encode_message(Offset(8), 1, 0, 5, None, Some(b"value"));
        let n = v1.len();
        v1[n - 1] ^= 0xff;
        let e = decode_batch(&v1).unwrap_err();
        assert_eq!(e.at, 12);
        assert!(matches!(e.kind, DecodeErrorKind::CrcMismatch { .. }));
    }

    #[test]
    fn legacy_wrappers_yield_inner_messages_with_absolute_offsets() {
        let records = sample_records();
        for magic in [0i8, 1] {
            for c in [Compression::Gzip, Compression::Snappy, Compression::Lz4] {
                let bytes = legacy::encode_wrapper(magic, c, Offset(500), &records, None).unwrap();
                let batch = decode_batch(&bytes).unwrap();
                let info = batch.info();
                assert_eq!((info.base_offset, info.last_offset), (Offset(500), Offset(503)));
                assert_eq!(info.records_count, 4);
                assert_eq!(info.compression, c);
                let out = all(&batch).unwrap();
                let offsets: Vec<i64> = out.iter().map(|r| r.offset.0).collect();
                assert_eq!(offsets, [500, 501, 502, 503], "magic {magic} {}", c.name());
                assert_eq!(out[0].value, Some(&b"hello"[..]));
                let expected_ts = if magic == 0 { -1 } else { records[1].timestamp };
                assert_eq!(out[1].timestamp, expected_ts);
            }
        }
    }

    #[test]
    fn v1_wrapper_offset_is_its_last_inner_offset_and_zero_means_base_zero() {
        // Inner relative offsets 0..3, wrapper at 109: absolute = 109 - 3 + relative.
        let bytes =
            legacy::encode_wrapper(1, Compression::Gzip, Offset(106), &sample_records(), None)
                .unwrap();
        let offsets: Vec<i64> =
            all(&decode_batch(&bytes).unwrap()).unwrap().iter().map(|r| r.offset.0).collect();
        assert_eq!(offsets, [106, 107, 108, 109]);
        let mut zero = bytes.clone();
        set_base_offset(&mut zero, Offset(0)).unwrap();
        let offsets: Vec<i64> =
            all(&decode_batch(&zero).unwrap()).unwrap().iter().map(|r| r.offset.0).collect();
        assert_eq!(offsets, [0, 1, 2, 3]);
    }

    #[test]
    fn v1_log_append_time_wrapper_overrides_inner_timestamps() {
        let bytes =
            legacy::encode_wrapper(1, Compression::Snappy, Offset(0), &sample_records(), Some(77))
                .unwrap();
        let batch = decode_batch(&bytes).unwrap();
        assert_eq!(batch.info().timestamp_type, TimestampType::LogAppendTime);
        assert!(all(&batch).unwrap().iter().all(|r| r.timestamp == 77));
    }

    #[test]
    fn v0_lz4_wrapper_with_kafka_08_header_checksum_decodes() {
        // Kafka before KIP-57 computed HC over the magic bytes too; readers ignore HC for v0.
        let inner = legacy::encode_message(Offset(3), 0, 0, 0, None, Some(b"old"));
        let mut packed = compression::compress(Compression::Lz4, &inner).unwrap();
        packed[6] = packed[6].wrapping_add(1);
        let bytes =
            legacy::encode_message(Offset(3), 0, Compression::Lz4.id(), 0, None, Some(&packed));
        let batch = decode_batch(&bytes).unwrap();
        let out = all(&batch).unwrap();
        assert_eq!(out[0].value, Some(&b"old"[..]));
        // The same frame in a v1 wrapper is rejected.
        let inner1 = legacy::encode_message(Offset(0), 1, 0, 0, None, Some(b"old"));
        let mut packed1 = compression::compress(Compression::Lz4, &inner1).unwrap();
        packed1[6] = packed1[6].wrapping_add(1);
        let bytes1 =
            legacy::encode_message(Offset(3), 1, Compression::Lz4.id(), 0, None, Some(&packed1));
        assert!(decode_batch(&bytes1).is_err());
    }

    #[test]
    fn legacy_wrappers_with_zstd_or_no_inner_messages_are_invalid() {
        let packed = compression::compress(Compression::Zstd, b"").unwrap();
        let z =
            legacy::encode_message(Offset(0), 1, Compression::Zstd.id(), 0, None, Some(&packed));
        assert!(matches!(
            decode_batch(&z).unwrap_err().kind,
            DecodeErrorKind::InvalidCompression(4)
        ));
        let empty = compression::compress(Compression::Gzip, b"").unwrap();
        let e = legacy::encode_message(Offset(0), 1, Compression::Gzip.id(), 0, None, Some(&empty));
        assert!(matches!(decode_batch(&e).unwrap_err().kind, DecodeErrorKind::InvalidRecord(_)));
    }

    mod value_records {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// The fast path for `append` lines writes exactly what the general record writer
            /// writes, for every value length and offset delta (varints of 1 to 5 bytes).
            #[test]
            fn value_records_match_the_general_encoding(
                value in proptest::collection::vec(any::<u8>(), 0..300),
                long in 0usize..3, offset_delta in prop_oneof![0i32..200, 0i32..i32::MAX],
            ) {
                let value = value.repeat(1 + long * 300);
                let (mut fast, mut general) = (vec![7u8], vec![7u8]);
                write_value_record(&mut fast, offset_delta, &value).unwrap();
                write_record(&mut general, &RecordRef::value_only(&value), offset_delta, 0).unwrap();
                prop_assert_eq!(fast, general);
            }
        }

        /// A batch mixing value records with keyed, timestamped and headed ones decodes to
        /// what was encoded: the dispatch picks the fast path only for records it fits.
        #[test]
        fn mixed_batches_round_trip() {
            let headers = vec![(b"h".to_vec(), Some(b"v".to_vec()))];
            let records = [
                RecordRef::value_only(b"plain"),
                RecordRef { key: Some(b"k"), ..RecordRef::value_only(b"keyed") },
                RecordRef { timestamp: 5, ..RecordRef::value_only(b"timed") },
                RecordRef { headers: &headers, ..RecordRef::value_only(b"headed") },
                RecordRef { value: None, ..RecordRef::value_only(b"") },
                RecordRef::value_only(b""),
            ];
            let spec = BatchSpec { default_timestamp: 1_000, ..BatchSpec::default() };
            let bytes = encode_batch(&spec, &records).unwrap();
            let batch = decode_batch(&bytes).unwrap();
            let decoded: Vec<_> = batch.records().collect::<Result<_, _>>().unwrap();
            assert_eq!(decoded.len(), records.len());
            for (d, r) in decoded.iter().zip(&records) {
                assert_eq!(d.key, r.key);
                assert_eq!(d.value, r.value);
                let expected_ts = if r.timestamp == NO_TIMESTAMP { 1_000 } else { r.timestamp };
                assert_eq!(d.timestamp, expected_ts);
                assert_eq!(d.headers.len(), r.headers.len());
            }
        }
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        /// Runs every decoder entry point over `bytes`, draining record iterators.
        fn exercise(bytes: &[u8]) {
            let _ = peek_entry(bytes);
            let _ = parse_batch_info(bytes);
            let _ = verify_crc(bytes);
            if let Ok(b) = decode_batch(bytes) {
                // Every record or the first error, and the light walk agrees with it exactly.
                let full: Vec<_> = b
                    .records()
                    .map(|r| r.map(|r| RecordStamp { offset: r.offset, timestamp: r.timestamp }))
                    .collect();
                let light: Vec<_> = b.record_stamps().collect();
                assert_eq!(light, full);
                // The value walk: the record values up to the first error, then that error.
                let values: Vec<_> = b.record_values().collect();
                let mut walked = Vec::new();
                let end = b.for_each_value(|v| walked.push(Ok(v)));
                if let Err(e) = end {
                    walked.push(Err(e));
                }
                assert_eq!(walked, values);
                let lines: usize = values
                    .iter()
                    .filter_map(|v| v.as_ref().ok())
                    .map(|v| v.value.map_or(0, <[u8]>::len) + 1)
                    .sum();
                assert!(lines <= b.records_bytes());
            }
            let mut copy = bytes.to_vec();
            let _ = set_log_append_time(&mut copy, 1);
            let _ = set_partition_leader_epoch(&mut copy, 1);
            let _ = set_base_offset(&mut copy, Offset(1));
        }

        fn valid_entry(kind: u8, compression: Compression) -> Vec<u8> {
            let records = sample_records();
            match kind % 3 {
                0 => encode_batch(&BatchSpec { compression, ..BatchSpec::default() }, &records)
                    .unwrap(),
                1 => {
                    let c = if compression == Compression::Zstd {
                        Compression::None
                    } else {
                        compression
                    };
                    if c == Compression::None {
                        legacy::encode_message(Offset(4), 1, 0, 9, Some(b"k"), Some(b"v"))
                    } else {
                        legacy::encode_wrapper(1, c, Offset(9), &records, None).unwrap()
                    }
                }
                _ => legacy::encode_message(Offset(4), 0, 0, 0, None, Some(b"v0")),
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn random_bytes_never_panic_the_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
                exercise(&bytes);
            }

            #[test]
            fn random_bytes_behind_a_plausible_header_never_panic(
                magic in 0u8..4, size in 0i32..300, tail in proptest::collection::vec(any::<u8>(), 0..300)
            ) {
                let mut bytes = vec![0u8; 8];
                bytes.extend_from_slice(&size.to_be_bytes());
                bytes.extend_from_slice(&[0, 0, 0, 0, magic]);
                bytes.extend(tail);
                exercise(&bytes);
                if bytes.len() > ATTRIBUTES_AT && magic == 2 {
                    let crc = crc32c::crc32c(&bytes[ATTRIBUTES_AT..]);
                    bytes[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
                    exercise(&bytes);
                }
            }

            #[test]
            fn mutated_valid_entries_never_panic(
                kind in any::<u8>(), codec in 0usize..5,
                flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
                cut in any::<usize>(), fix_crc in any::<bool>()
            ) {
                let mut bytes = valid_entry(kind, Compression::ALL[codec]);
                for &(i, x) in &flips {
                    let n = bytes.len();
                    bytes[i % n] ^= x;
                }
                let n = bytes.len();
                bytes.truncate(n - cut % (n / 4 + 1));
                if fix_crc && bytes.len() > ATTRIBUTES_AT {
                    if bytes[MAGIC_AT] == 2 {
                        let crc = crc32c::crc32c(&bytes[ATTRIBUTES_AT..]);
                        bytes[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
                    } else {
                        let crc = crc32fast::hash(&bytes[16..]);
                        bytes[12..16].copy_from_slice(&crc.to_be_bytes());
                    }
                }
                exercise(&bytes);
            }

            #[test]
            fn encoded_batches_always_decode_to_their_records(
                records in proptest::collection::vec(
                    (any::<i64>(), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
                     proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
                     proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..8),
                                                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8))), 0..3)),
                    1..20),
                codec in 0usize..5, base in 0i64..i64::MAX / 2
            ) {
                let input: Vec<NewRecord> = records
                    .into_iter()
                    .map(|(timestamp, key, value, headers)| NewRecord { timestamp, key, value, headers })
                    .collect();
                let spec = BatchSpec { base_offset: Offset(base), compression: Compression::ALL[codec], ..BatchSpec::default() };
                let bytes = encode_batch(&spec, &input).unwrap();
                let batch = decode_batch(&bytes).unwrap();
                let out: Vec<Record<'_>> = batch.records().collect::<Result<_, _>>().unwrap();
                prop_assert_eq!(out.len(), input.len());
                for (i, (r, n)) in out.iter().zip(&input).enumerate() {
                    prop_assert_eq!(r.offset, Offset(base + i as i64));
                    prop_assert_eq!(r.timestamp, n.timestamp);
                    prop_assert_eq!(r.key, n.key.as_deref());
                    prop_assert_eq!(r.value, n.value.as_deref());
                    prop_assert_eq!(r.headers.len(), n.headers.len());
                }
            }
        }
    }
}
