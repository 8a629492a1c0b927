//! Kafka's on-disk byte formats. Pure: nothing here touches a file.
//!
//! Vocabulary follows Kafka exactly: a *batch* (v2 `RecordBatch`, or a legacy v0/v1 message,
//! possibly a compressed wrapper) holds *records*; an *offset* is a logical record offset; a
//! *position* is a byte position inside a `.log` file; a *relative offset* is an offset minus the
//! segment's *base offset*.
//!
//! Everything that decodes bytes returns [`DecodeError`] on malformed input and never panics.

pub mod partitioner;

pub mod batch;
mod bytes;
pub mod checkpoint;
pub mod compression;
pub mod control;
pub mod dump;
pub mod field_index;
pub mod file_name;
pub mod groups;
pub mod index_entry;
pub mod key_index;
pub mod key_name;
pub mod legacy;
pub mod log_dir_layout;
pub mod metadata_record;
pub mod producer_snapshot;
pub mod properties;
pub mod txn_index;
pub mod varint;

pub use batch::{
    Batch, BatchSpec, EncodeRecord, EncodedBatch, EntryHeader, LinesError, RecordIter, RecordRef,
    RecordStamp, RecordValue, StampIter, StampPeek, ValueIter, check_no_trailing_records,
    decode_batch, decode_batch_unverified, encode_batch, encode_batch_into, encode_empty_batch,
    encode_retained_batch, encode_value_lines_into, parse_batch_info, peek_entry,
    peek_record_stamp, set_base_offset, set_log_append_time, set_partition_leader_epoch,
    value_line_records, verify_crc,
};
pub use compression::Compression;

use std::fmt;

/// Bytes before every batch's payload: `int64 offset` + `int32 size` (`Records.LOG_OVERHEAD`).
pub const LOG_OVERHEAD: usize = 12;
/// Bytes needed to learn an entry's magic (`Records.HEADER_SIZE_UP_TO_MAGIC`).
pub const HEADER_SIZE_UP_TO_MAGIC: usize = 17;
/// Size of a v2 batch header (`DefaultRecordBatch.RECORD_BATCH_OVERHEAD`).
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// Smallest legal `size` field of an entry (the v0 message minimum).
pub const MIN_ENTRY_SIZE_FIELD: i32 = 14;

/// A logical record offset (Kafka's `long offset`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub i64);

impl Offset {
    /// The offset `n` records later.
    pub fn plus(self, n: i64) -> Offset {
        Offset(self.0.saturating_add(n))
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A byte position inside one `.log` file.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position(pub u64);

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An offset relative to its segment's base offset, as stored in index entries (0 ..= i32::MAX).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RelativeOffset(pub u32);

/// Milliseconds since the Unix epoch; `-1` means "no timestamp" (`RecordBatch.NO_TIMESTAMP`).
pub type Timestamp = i64;
/// `RecordBatch.NO_TIMESTAMP`.
pub const NO_TIMESTAMP: Timestamp = -1;

/// Timestamp type of a batch (attribute bit 3; legacy v0 has none).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// v0 messages: no timestamp.
    NoTimestampType,
    /// The producer's timestamp (attribute bit 3 clear).
    CreateTime,
    /// The broker's append time (attribute bit 3 set).
    LogAppendTime,
}

impl TimestampType {
    /// The name Kafka prints (`CreateTime`, `LogAppendTime`, `NoTimestampType`).
    pub fn name(self) -> &'static str {
        match self {
            TimestampType::NoTimestampType => "NoTimestampType",
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

/// Shallow facts about one batch (v2) or top-level legacy message, known from its header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchInfo {
    /// v2: `baseOffset`. Legacy: the first inner offset if known, else the entry's offset.
    pub base_offset: Offset,
    /// v2: `baseOffset + lastOffsetDelta`. Legacy: the entry's offset field.
    pub last_offset: Offset,
    /// Total bytes of the entry including the 12-byte log overhead.
    pub size: u32,
    /// The magic byte: 0 or 1 legacy, 2 record batch.
    pub magic: i8,
    /// v2 only; -1 for legacy.
    pub partition_leader_epoch: i32,
    /// The stored CRC (CRC-32C for v2, CRC-32 for legacy).
    pub crc: u32,
    /// Raw attributes (legacy: the attributes byte).
    pub attributes: i16,
    /// Codec from attribute bits 0-2.
    pub compression: Compression,
    /// Attribute bit 3 (v0: `NoTimestampType`).
    pub timestamp_type: TimestampType,
    /// Attribute bit 4.
    pub is_transactional: bool,
    /// Attribute bit 5: a control batch.
    pub is_control: bool,
    /// Attribute bit 6: `base_timestamp` holds a delete horizon.
    pub has_delete_horizon: bool,
    /// v2 `baseTimestamp`; legacy: the message timestamp (-1 for v0).
    pub base_timestamp: Timestamp,
    /// v2 `maxTimestamp`; legacy: the message timestamp (-1 for v0).
    pub max_timestamp: Timestamp,
    /// Producer id, or -1 (legacy: -1).
    pub producer_id: i64,
    /// Producer epoch, or -1.
    pub producer_epoch: i16,
    /// Sequence of the first record, or -1.
    pub base_sequence: i32,
    /// v2 `recordsCount`; legacy: 1 (or unknown inner count before decompression: 1).
    pub records_count: i32,
}

/// One record header (`headerKey` is UTF-8 by contract but kept as bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    /// Header key (never null).
    pub key: &'a [u8],
    /// Header value, `None` if null.
    pub value: Option<&'a [u8]>,
}

/// One decoded record, borrowing key, value and headers from its batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Absolute offset of the record.
    pub offset: Offset,
    /// The effective timestamp (LogAppendTime batches: the batch's max timestamp).
    pub timestamp: Timestamp,
    /// The key, `None` if null.
    pub key: Option<&'a [u8]>,
    /// The value, `None` if null (a tombstone).
    pub value: Option<&'a [u8]>,
    /// Headers in order (always empty for legacy messages).
    pub headers: Vec<Header<'a>>,
    /// `baseSequence + offsetDelta` (wrapping), or -1.
    pub sequence: i32,
}

/// An owned record to append (what a producer sends).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NewRecord {
    /// CreateTime timestamp; the engine fills "now" when it is [`NO_TIMESTAMP`].
    pub timestamp: Timestamp,
    /// The key, `None` for a null key.
    pub key: Option<Vec<u8>>,
    /// The value, `None` for a null value (a tombstone).
    pub value: Option<Vec<u8>>,
    /// Headers as (key, value) pairs; a `None` value is a null header value.
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// What is wrong with some bytes, and where inside the buffer that was given to the decoder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Byte offset inside the buffer handed to the decoder (callers add the file position).
    pub at: usize,
    /// What is wrong.
    pub kind: DecodeErrorKind,
}

/// The kinds of malformed input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// Fewer bytes than the structure needs.
    Truncated {
        /// Bytes the structure needs.
        needed: usize,
        /// Bytes there were.
        available: usize,
    },
    /// The entry's `size` field is below the minimum (14) or otherwise impossible.
    InvalidSize(i64),
    /// A magic byte this decoder does not know.
    UnknownMagic(i8),
    /// Stored and computed checksum differ.
    CrcMismatch {
        /// The checksum stored in the bytes.
        stored: u32,
        /// The checksum computed over the bytes.
        computed: u32,
    },
    /// A varint longer than 5 bytes (varlong: 10).
    InvalidVarint,
    /// Codec bits 5..7, or a codec not allowed for this magic.
    InvalidCompression(u8),
    /// The compressed payload could not be decompressed.
    Decompression(String),
    /// A record or batch violating Kafka's reader rules; the text says which.
    InvalidRecord(&'static str),
    /// A text file (checkpoint, properties) that does not parse; the text says why.
    InvalidText(String),
}

impl DecodeError {
    /// A `kind` error at byte `at` of the decoder's input.
    pub fn new(at: usize, kind: DecodeErrorKind) -> DecodeError {
        DecodeError { at, kind }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DecodeErrorKind::Truncated { needed, available } => {
                write!(f, "truncated: needed {needed} bytes, {available} available")
            }
            DecodeErrorKind::InvalidSize(s) => write!(f, "invalid entry size {s}"),
            DecodeErrorKind::UnknownMagic(m) => write!(f, "unknown magic {m}"),
            DecodeErrorKind::CrcMismatch { stored, computed } => {
                write!(f, "CRC mismatch: stored {stored}, computed {computed}")
            }
            DecodeErrorKind::InvalidVarint => write!(f, "invalid varint"),
            DecodeErrorKind::InvalidCompression(c) => write!(f, "invalid compression codec {c}"),
            DecodeErrorKind::Decompression(e) => write!(f, "decompression failed: {e}"),
            DecodeErrorKind::InvalidRecord(why) => write!(f, "invalid record: {why}"),
            DecodeErrorKind::InvalidText(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for DecodeError {}
