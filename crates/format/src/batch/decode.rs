//! Reading a batch's records: [`Batch`] (framing and CRC checked, payload decompressed) and
//! its record, stamp and value iterators, with Kafka's strict reader rules. Legacy entries are
//! read by [`crate::legacy`].

use std::borrow::Cow;

use super::{
    MAGIC_V2, RECORDS_AT, RECORDS_COUNT_AT, increment_sequence, parse_batch_info, peek_entry,
    verify_crc, whole,
};
use crate::bytes::{be_bytes, invalid};
use crate::compression::{self, Compression};
use crate::legacy::{self, LegacyRecordIter};
use crate::varint::{read_varint, read_varlong};
use crate::{
    BatchInfo, DecodeError, DecodeErrorKind, Header, Offset, Record, Timestamp, TimestampType,
};

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
