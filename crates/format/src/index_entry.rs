//! Entries of the offset index (`.index`) and the time index (`.timeindex`).
//!
//! Both files are arrays of fixed-size big-endian entries with no header:
//!
//! ```text
//! .index      8 bytes: int32 relative offset, int32 position of a batch start in the .log
//! .timeindex 12 bytes: int64 timestamp (ms),   int32 relative offset
//! ```
//!
//! Relative offsets are `offset - segment base offset` (0 ..= `i32::MAX`). Invariants of the
//! files (strictly increasing offsets, non-decreasing positions, increasing timestamps) are the
//! index classes' business, not the entries'.

use super::{DecodeError, DecodeErrorKind, Offset, RelativeOffset, Timestamp};

/// Bytes per offset index entry.
pub const OFFSET_INDEX_ENTRY_SIZE: usize = 8;
/// Bytes per time index entry.
pub const TIME_INDEX_ENTRY_SIZE: usize = 12;

/// One offset index entry: the batch holding `base + relative_offset` starts at `position`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct OffsetPosition {
    /// Offset minus the segment's base offset.
    pub relative_offset: RelativeOffset,
    /// Byte position of a batch start in the segment's `.log`.
    pub position: u32,
}

impl OffsetPosition {
    /// Encodes the entry (8 bytes, big-endian).
    pub fn encode(&self) -> [u8; OFFSET_INDEX_ENTRY_SIZE] {
        let mut out = [0u8; OFFSET_INDEX_ENTRY_SIZE];
        out[..4].copy_from_slice(&self.relative_offset.0.to_be_bytes());
        out[4..].copy_from_slice(&self.position.to_be_bytes());
        out
    }

    /// Decodes the entry at the start of `bytes`; [`DecodeErrorKind::Truncated`] if fewer than 8
    /// bytes.
    pub fn decode(bytes: &[u8]) -> Result<OffsetPosition, DecodeError> {
        let b = entry::<OFFSET_INDEX_ENTRY_SIZE>(bytes)?;
        Ok(OffsetPosition {
            relative_offset: RelativeOffset(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
            position: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        })
    }

    /// Entry `n` of an index file's bytes; `None` past the end.
    pub fn nth(bytes: &[u8], n: usize) -> Option<OffsetPosition> {
        OffsetPosition::decode(bytes.get(n.checked_mul(OFFSET_INDEX_ENTRY_SIZE)?..)?).ok()
    }

    /// The absolute offset of this entry in a segment with base offset `base`.
    pub fn offset(&self, base: Offset) -> Offset {
        base.plus(i64::from(self.relative_offset.0))
    }
}

/// One time index entry: the largest timestamp up to the batch ending at `base +
/// relative_offset` is `timestamp`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct TimestampOffset {
    /// Largest timestamp seen up to and including the batch ending at the offset.
    pub timestamp: Timestamp,
    /// Offset minus the segment's base offset.
    pub relative_offset: RelativeOffset,
}

impl TimestampOffset {
    /// Encodes the entry (12 bytes, big-endian).
    pub fn encode(&self) -> [u8; TIME_INDEX_ENTRY_SIZE] {
        let mut out = [0u8; TIME_INDEX_ENTRY_SIZE];
        out[..8].copy_from_slice(&self.timestamp.to_be_bytes());
        out[8..].copy_from_slice(&self.relative_offset.0.to_be_bytes());
        out
    }

    /// Decodes the entry at the start of `bytes`; [`DecodeErrorKind::Truncated`] if fewer than
    /// 12 bytes.
    pub fn decode(bytes: &[u8]) -> Result<TimestampOffset, DecodeError> {
        let b = entry::<TIME_INDEX_ENTRY_SIZE>(bytes)?;
        Ok(TimestampOffset {
            timestamp: i64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            relative_offset: RelativeOffset(u32::from_be_bytes([b[8], b[9], b[10], b[11]])),
        })
    }

    /// Entry `n` of a time index file's bytes; `None` past the end.
    pub fn nth(bytes: &[u8], n: usize) -> Option<TimestampOffset> {
        TimestampOffset::decode(bytes.get(n.checked_mul(TIME_INDEX_ENTRY_SIZE)?..)?).ok()
    }

    /// The absolute offset of this entry in a segment with base offset `base`.
    pub fn offset(&self, base: Offset) -> Offset {
        base.plus(i64::from(self.relative_offset.0))
    }
}

/// The first `N` bytes of `bytes` as an array.
fn entry<const N: usize>(bytes: &[u8]) -> Result<[u8; N], DecodeError> {
    bytes.get(..N).and_then(|b| b.try_into().ok()).ok_or_else(|| {
        DecodeError::new(0, DecodeErrorKind::Truncated { needed: N, available: bytes.len() })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_index_entry_matches_appendix_b() {
        let e = OffsetPosition { relative_offset: RelativeOffset(5123 - 5000), position: 8192 };
        assert_eq!(e.encode(), [0x00, 0x00, 0x00, 0x7B, 0x00, 0x00, 0x20, 0x00]);
        assert_eq!(OffsetPosition::decode(&e.encode()), Ok(e));
        assert_eq!(e.offset(Offset(5000)), Offset(5123));
    }

    #[test]
    fn time_index_entry_matches_appendix_b() {
        let e =
            TimestampOffset { timestamp: 1_700_000_000_123, relative_offset: RelativeOffset(123) };
        assert_eq!(
            e.encode(),
            [0x00, 0x00, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x7B, 0x00, 0x00, 0x00, 0x7B]
        );
        assert_eq!(TimestampOffset::decode(&e.encode()), Ok(e));
    }

    #[test]
    fn short_slices_and_entries_past_the_end_decode_to_none() {
        assert!(OffsetPosition::decode(&[0; 7]).is_err());
        assert!(TimestampOffset::decode(&[0; 11]).is_err());
        let two = [[1u8; 8], [2u8; 8]].concat();
        assert!(OffsetPosition::nth(&two, 1).is_some());
        assert_eq!(OffsetPosition::nth(&two, 2), None);
        assert_eq!(OffsetPosition::nth(&two, usize::MAX), None);
        assert_eq!(TimestampOffset::nth(&two, usize::MAX / 2), None);
    }
}
