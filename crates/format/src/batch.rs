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
//!
//! This module holds the layout and the header-level reads every entry needs (framing, header
//! facts, CRC); `decode` reads records out of a batch, `encode` builds and restamps batches.
//! Their items are re-exported here and from [`crate`].

mod decode;
mod encode;
#[cfg(test)]
mod tests;

pub use decode::{
    Batch, RecordIter, RecordStamp, RecordValue, StampIter, StampPeek, ValueIter,
    check_no_trailing_records, decode_batch, decode_batch_unverified, peek_record_stamp,
};
pub use encode::{
    BatchSpec, EncodeRecord, EncodedBatch, LinesError, RecordRef, encode_batch, encode_batch_into,
    encode_empty_batch, encode_retained_batch, encode_value_lines_into, set_base_offset,
    set_log_append_time, set_partition_leader_epoch, value_line_records,
};

use super::bytes::{be_bytes, be_i16, be_i32, be_i64, be_u32};
use super::compression::Compression;
use super::legacy;
use super::{
    BatchInfo, DecodeError, DecodeErrorKind, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD,
    MIN_ENTRY_SIZE_FIELD, Offset, RECORD_BATCH_OVERHEAD, TimestampType,
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

/// `DefaultRecordBatch.incrementSequence`: `sequence + increment`, continuing from 0 past
/// `i32::MAX`; -1 stays -1 (no sequence).
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence < 0 {
        return -1;
    }
    let sum = i64::from(sequence) + i64::from(increment);
    if sum > i64::from(i32::MAX) { (sum - i64::from(i32::MAX) - 1) as i32 } else { sum as i32 }
}
