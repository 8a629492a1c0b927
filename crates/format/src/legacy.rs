//! Legacy message formats v0 and v1 (`LegacyRecord`, `AbstractLegacyRecordBatch`).
//!
//! ```text
//! entry byte  width  field
//!  0          8      int64 offset (absolute; a compressed wrapper carries its last inner offset)
//!  8          4      int32 messageSize (bytes from the CRC to the end of the value)
//! 12          4      uint32 crc: CRC-32 (IEEE) of entry bytes 16 .. end
//! 16          1      int8 magic (0 or 1)
//! 17          1      int8 attributes: bits 0-2 codec (zstd not allowed), bit 3 LogAppendTime (v1)
//! 18          8      int64 timestamp (v1 only)
//! 18 / 26     4      int32 keyLength (negative = null), then the key
//!  ...        4      int32 valueLength (negative = null), then the value
//! ```
//!
//! A compressed *wrapper* has a null key and, as value, the compressed bytes of an inner message
//! set: complete uncompressed `offset, size, message` entries with the wrapper's magic. Inner
//! offsets are absolute in v0; in v1 they are relative and the absolute offset of an inner message
//! is `wrapperOffset - lastInnerRelative + innerRelative` (a wrapper offset of 0, sent by some
//! librdkafka versions, means base 0). A v1 wrapper with LogAppendTime gives every inner message
//! the wrapper's timestamp. As in Kafka's reader, bytes after the value inside `messageSize` are
//! tolerated.

use super::bytes::{be_i32, be_i64, be_u32};
use super::compression::{self, Compression};
use super::{
    BatchInfo, DecodeError, DecodeErrorKind, LOG_OVERHEAD, NO_TIMESTAMP, NewRecord, Offset, Record,
    Timestamp, TimestampType,
};

/// `LegacyRecord.RECORD_OVERHEAD_V0`: smallest `messageSize` of a v0 message.
pub const RECORD_OVERHEAD_V0: i32 = 14;
/// `LegacyRecord.RECORD_OVERHEAD_V1`: smallest `messageSize` of a v1 message.
pub const RECORD_OVERHEAD_V1: i32 = 22;
/// Attribute bit 3 of a v1 message: LogAppendTime.
const TIMESTAMP_TYPE_MASK: u8 = 0x08;

/// One decoded v0/v1 message, borrowing its key and value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyMessage<'a> {
    /// The entry's offset field.
    pub offset: Offset,
    /// Total entry bytes including the 12-byte log overhead.
    pub size: usize,
    /// Stored CRC-32 (IEEE).
    pub crc: u32,
    /// 0 or 1.
    pub magic: i8,
    /// Raw attributes byte.
    pub attributes: u8,
    /// Codec from attribute bits 0-2 (never zstd).
    pub compression: Compression,
    /// v0: NoTimestampType; v1: CreateTime or LogAppendTime (bit 3).
    pub timestamp_type: TimestampType,
    /// v1 timestamp; [`NO_TIMESTAMP`] for v0.
    pub timestamp: Timestamp,
    /// The key, `None` if null.
    pub key: Option<&'a [u8]>,
    /// The value (a wrapper's compressed inner set), `None` if null.
    pub value: Option<&'a [u8]>,
}

/// Parses the legacy message at the start of `entry` (no CRC check, no decompression).
/// `entry` may extend past the message; the message must fit in it.
pub fn parse_message(entry: &[u8]) -> Result<LegacyMessage<'_>, DecodeError> {
    let offset = be_i64(entry, 0)?;
    let size_field = be_i32(entry, 8)?;
    let crc = be_u32(entry, 12)?;
    let magic = *entry.get(16).ok_or_else(|| truncated(entry, 17))? as i8;
    let min = match magic {
        0 => RECORD_OVERHEAD_V0,
        1 => RECORD_OVERHEAD_V1,
        m => return Err(DecodeError::new(16, DecodeErrorKind::UnknownMagic(m))),
    };
    if size_field < min {
        return Err(DecodeError::new(8, DecodeErrorKind::InvalidSize(i64::from(size_field))));
    }
    let size = LOG_OVERHEAD + size_field as usize;
    let msg = entry.get(..size).ok_or_else(|| truncated(entry, size))?;
    let attributes = *msg.get(17).ok_or_else(|| truncated(msg, 18))?;
    let compression = Compression::from_attributes(attributes)
        .ok()
        .filter(|c| *c != Compression::Zstd)
        .ok_or_else(|| DecodeError::new(17, DecodeErrorKind::InvalidCompression(attributes & 7)))?;
    let (timestamp_type, timestamp, mut pos) = if magic == 0 {
        (TimestampType::NoTimestampType, NO_TIMESTAMP, 18)
    } else {
        let t = if attributes & TIMESTAMP_TYPE_MASK != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        };
        (t, be_i64(msg, 18)?, 26)
    };
    let key = read_bytes(msg, &mut pos)?;
    let value = read_bytes(msg, &mut pos)?;
    Ok(LegacyMessage {
        offset: Offset(offset),
        size,
        crc,
        magic,
        attributes,
        compression,
        timestamp_type,
        timestamp,
        key,
        value,
    })
}

/// `int32 length` + bytes; a negative length is null (as `LegacyRecord.key()` reads it).
fn read_bytes<'a>(msg: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, DecodeError> {
    let len = be_i32(msg, *pos)?;
    let start = *pos + 4;
    if len < 0 {
        *pos = start;
        return Ok(None);
    }
    let end = start + len as usize;
    let bytes = msg.get(start..end).ok_or_else(|| {
        DecodeError::new(
            *pos,
            DecodeErrorKind::InvalidRecord("key or value extends past the message"),
        )
    })?;
    *pos = end;
    Ok(Some(bytes))
}

/// CRC-32 (IEEE) of a whole legacy entry, compared with the stored one (`at` 12 on mismatch).
pub fn verify_crc(entry: &[u8]) -> Result<(), DecodeError> {
    let stored = be_u32(entry, 12)?;
    let covered = entry.get(16..).ok_or_else(|| truncated(entry, 17))?;
    let computed = crc32fast::hash(covered);
    if stored != computed {
        return Err(DecodeError::new(12, DecodeErrorKind::CrcMismatch { stored, computed }));
    }
    Ok(())
}

/// Header facts of a top-level legacy entry. For a compressed wrapper `base_offset` is the entry
/// offset and `records_count` is 1 until [`decode_wrapper`] has seen the inner messages.
pub fn batch_info(entry: &[u8]) -> Result<BatchInfo, DecodeError> {
    let m = parse_message(entry)?;
    Ok(BatchInfo {
        base_offset: m.offset,
        last_offset: m.offset,
        size: m.size as u32,
        magic: m.magic,
        partition_leader_epoch: -1,
        crc: m.crc,
        attributes: i16::from(m.attributes),
        compression: m.compression,
        timestamp_type: m.timestamp_type,
        is_transactional: false,
        is_control: false,
        has_delete_horizon: false,
        base_timestamp: m.timestamp,
        max_timestamp: m.timestamp,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        records_count: 1,
    })
}

/// What a compressed wrapper contains, learned by one pass over its decompressed inner set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrapperContents {
    /// The decompressed inner message set.
    pub inner: Vec<u8>,
    /// Number of inner messages.
    pub count: i32,
    /// Added to each inner offset field to get the absolute offset (0 for v0).
    pub offset_adjust: i64,
    /// Timestamp forced on every inner message (v1 LogAppendTime wrappers), if any.
    pub forced_timestamp: Option<Timestamp>,
    /// Position of the wrapper's value inside the entry (where inner errors are reported).
    pub value_at: usize,
}

/// Decompresses a wrapper's value and validates the inner set as Kafka's deep iterator does:
/// non-empty, every inner message uncompressed, with the wrapper's magic and a valid CRC.
/// Errors inside the inner set are reported at the wrapper's value position.
pub fn decode_wrapper(entry: &[u8]) -> Result<WrapperContents, DecodeError> {
    let m = parse_message(entry)?;
    let value_at = m.size - m.value.map_or(0, <[u8]>::len);
    let compressed = m.value.unwrap_or_default();
    let inner = compression::decompress(m.compression, compressed, m.magic)
        .map_err(|e| DecodeError::new(value_at, e.kind))?;
    let mut pos = 0;
    let mut count: i32 = 0;
    let mut last_inner = 0i64;
    while pos < inner.len() {
        let rest = inner.get(pos..).unwrap_or_default();
        let invalid = |why| DecodeError::new(value_at, DecodeErrorKind::InvalidRecord(why));
        let im = parse_message(rest).map_err(|e| DecodeError::new(value_at, e.kind))?;
        if im.compression != Compression::None {
            return Err(invalid("inner message of a compressed wrapper is compressed"));
        }
        if im.magic != m.magic {
            return Err(invalid("inner message magic differs from the wrapper's"));
        }
        verify_crc(rest.get(..im.size).unwrap_or_default())
            .map_err(|e| DecodeError::new(value_at, e.kind))?;
        last_inner = im.offset.0;
        count = count.checked_add(1).ok_or_else(|| invalid("too many inner messages"))?;
        pos += im.size;
    }
    if count == 0 {
        return Err(DecodeError::new(
            value_at,
            DecodeErrorKind::InvalidRecord("compressed wrapper with no inner messages"),
        ));
    }
    let offset_adjust =
        if m.magic == 0 || m.offset.0 == 0 { 0 } else { m.offset.0.wrapping_sub(last_inner) };
    let forced_timestamp =
        (m.magic == 1 && m.timestamp_type == TimestampType::LogAppendTime).then_some(m.timestamp);
    Ok(WrapperContents { inner, count, offset_adjust, forced_timestamp, value_at })
}

/// Iterator over the records of a legacy entry: the message itself, or a wrapper's inner messages.
#[derive(Clone, Debug)]
pub struct LegacyRecordIter<'a> {
    set: &'a [u8],
    pos: usize,
    offset_adjust: i64,
    forced_timestamp: Option<Timestamp>,
    /// `Some(p)`: iterating a wrapper's inner set, errors are reported at `p` (the wrapper's
    /// value); `None`: iterating the entry itself, errors keep their own position.
    error_at: Option<usize>,
    done: bool,
}

impl<'a> LegacyRecordIter<'a> {
    /// Iterates the messages of `set` (one uncompressed entry, or a decompressed inner set).
    pub fn new(
        set: &'a [u8],
        offset_adjust: i64,
        forced_timestamp: Option<Timestamp>,
        error_at: Option<usize>,
    ) -> Self {
        LegacyRecordIter { set, pos: 0, offset_adjust, forced_timestamp, error_at, done: false }
    }
}

impl<'a> Iterator for LegacyRecordIter<'a> {
    type Item = Result<Record<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.set.len() {
            return None;
        }
        let rest = self.set.get(self.pos..).unwrap_or_default();
        match parse_message(rest) {
            Ok(m) => {
                self.pos += m.size;
                Some(Ok(Record {
                    offset: Offset(m.offset.0.wrapping_add(self.offset_adjust)),
                    timestamp: self.forced_timestamp.unwrap_or(m.timestamp),
                    key: m.key,
                    value: m.value,
                    headers: Vec::new(),
                    sequence: -1,
                }))
            }
            Err(e) => {
                self.done = true;
                Some(Err(DecodeError::new(self.error_at.unwrap_or(e.at), e.kind)))
            }
        }
    }
}

/// Encodes one legacy message entry (test fixtures: Kafka 4 no longer writes v0/v1).
/// `attributes` holds the codec and (v1) the timestamp-type bit; `timestamp` is ignored for v0.
pub fn encode_message(
    offset: Offset,
    magic: i8,
    attributes: u8,
    timestamp: Timestamp,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&offset.0.to_be_bytes());
    out.extend_from_slice(&[0; 8]); // size and CRC, filled below
    out.push(magic as u8);
    out.push(attributes);
    if magic >= 1 {
        out.extend_from_slice(&timestamp.to_be_bytes());
    }
    for part in [key, value] {
        match part {
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    let size = (out.len() - LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&size.to_be_bytes());
    let crc = crc32fast::hash(&out[16..]);
    out[12..16].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Encodes a compressed wrapper holding `records` at offsets `base_offset..`, as a Kafka 0.10
/// (v1) or 0.9 (v0) producer and broker would: v1 inner offsets are relative, v0 absolute; the
/// wrapper carries the last offset and (v1) the max timestamp, or `log_append_time` with bit 3.
pub fn encode_wrapper(
    magic: i8,
    compression: Compression,
    base_offset: Offset,
    records: &[NewRecord],
    log_append_time: Option<Timestamp>,
) -> Result<Vec<u8>, DecodeError> {
    let mut inner = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let off = if magic == 0 { base_offset.plus(i as i64) } else { Offset(i as i64) };
        inner.extend(encode_message(
            off,
            magic,
            0,
            r.timestamp,
            r.key.as_deref(),
            r.value.as_deref(),
        ));
    }
    let packed = compression::compress(compression, &inner)?;
    let last = base_offset.plus(records.len() as i64 - 1);
    let max_ts = records.iter().map(|r| r.timestamp).max().unwrap_or(NO_TIMESTAMP);
    let (attrs, ts) = match log_append_time {
        Some(t) => (compression.id() | TIMESTAMP_TYPE_MASK, t),
        None => (compression.id(), max_ts),
    };
    Ok(encode_message(last, magic, attrs, ts, None, Some(&packed)))
}

fn truncated(buf: &[u8], needed: usize) -> DecodeError {
    DecodeError::new(0, DecodeErrorKind::Truncated { needed, available: buf.len() })
}
