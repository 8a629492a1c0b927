//! `<offset>.snapshot` files: a broker's producer-state snapshot (Kafka's
//! `ProducerStateManager.writeSnapshot`, `ProducerSnapshot.json` version 1).
//!
//! ```text
//! byte  width  field
//!  0    2      int16 version (1)
//!  2    4      uint32 crc: CRC-32C of every byte from 6 to the end of the file
//!  6    4      int32 entryCount
//! 10    46 × entryCount entries:
//!                int64 producerId
//!                int16 epoch
//!                int32 lastSequence
//!                int64 lastOffset             (-1 without batch metadata)
//!                int32 offsetDelta
//!                int64 timestamp
//!                int32 coordinatorEpoch
//!                int64 currentTxnFirstOffset  (-1 without an open transaction)
//! ```
//!
//! All fields are big-endian. The file name's offset is the producer state's "map end offset":
//! the state is that of every batch below it. A broker takes one at each roll (named after the
//! new segment's base offset) and one at a clean shutdown. An unknown version, a length that is
//! not the header plus whole entries, or a CRC mismatch makes the file unusable (Kafka deletes it
//! and rebuilds the state by scanning).

use super::bytes::{be_i16, be_i32, be_i64, be_u32};
use super::{DecodeError, DecodeErrorKind, Offset};

/// The only version Kafka writes (`ProducerStateManager.PRODUCER_SNAPSHOT_VERSION`).
pub const VERSION: i16 = 1;
/// Bytes before the first entry: version, CRC, entry count.
pub const HEADER_SIZE: usize = 10;
/// Bytes of one producer entry.
pub const ENTRY_SIZE: usize = 46;
/// Where the bytes the CRC covers start.
const CRC_FROM: usize = 6;

/// One producer's state in a snapshot (the fields a reader of transactions needs, and the rest
/// so that a snapshot can be written back unchanged).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ProducerEntry {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    /// Offset of the producer's last batch's last record; -1 without batch metadata.
    pub last_offset: i64,
    pub offset_delta: i32,
    pub timestamp: i64,
    pub coordinator_epoch: i32,
    /// First offset of the producer's open transaction; `None` (stored as -1) when it has none.
    pub current_txn_first_offset: Option<Offset>,
}

/// A decoded snapshot: its producers in stored order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerSnapshot {
    pub entries: Vec<ProducerEntry>,
}

impl ProducerSnapshot {
    /// Decodes a whole snapshot file; an error names the byte and the rule broken.
    pub fn decode(bytes: &[u8]) -> Result<ProducerSnapshot, DecodeError> {
        let version = be_i16(bytes, 0)?;
        if version != VERSION {
            return Err(DecodeError::new(
                0,
                DecodeErrorKind::InvalidRecord("unknown snapshot version"),
            ));
        }
        let stored = be_u32(bytes, 2)?;
        let count = be_i32(bytes, CRC_FROM)?;
        let count = usize::try_from(count).map_err(|_| {
            DecodeError::new(CRC_FROM, DecodeErrorKind::InvalidRecord("negative entry count"))
        })?;
        let want = count.checked_mul(ENTRY_SIZE).and_then(|n| n.checked_add(HEADER_SIZE));
        if want != Some(bytes.len()) {
            return Err(DecodeError::new(
                CRC_FROM,
                DecodeErrorKind::InvalidRecord("entry count does not match the file length"),
            ));
        }
        let computed = crc32c::crc32c(bytes.get(CRC_FROM..).unwrap_or_default());
        if computed != stored {
            return Err(DecodeError::new(2, DecodeErrorKind::CrcMismatch { stored, computed }));
        }
        let mut entries = Vec::with_capacity(count);
        for n in 0..count {
            let at = HEADER_SIZE + n * ENTRY_SIZE;
            let first = be_i64(bytes, at + 38)?;
            entries.push(ProducerEntry {
                producer_id: be_i64(bytes, at)?,
                epoch: be_i16(bytes, at + 8)?,
                last_sequence: be_i32(bytes, at + 10)?,
                last_offset: be_i64(bytes, at + 14)?,
                offset_delta: be_i32(bytes, at + 22)?,
                timestamp: be_i64(bytes, at + 26)?,
                coordinator_epoch: be_i32(bytes, at + 34)?,
                current_txn_first_offset: (first >= 0).then_some(Offset(first)),
            });
        }
        Ok(ProducerSnapshot { entries })
    }

    /// The file's bytes, as a broker writes them.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_SIZE + self.entries.len() * ENTRY_SIZE);
        out.extend_from_slice(&VERSION.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&(self.entries.len() as i32).to_be_bytes());
        for e in &self.entries {
            out.extend_from_slice(&e.producer_id.to_be_bytes());
            out.extend_from_slice(&e.epoch.to_be_bytes());
            out.extend_from_slice(&e.last_sequence.to_be_bytes());
            out.extend_from_slice(&e.last_offset.to_be_bytes());
            out.extend_from_slice(&e.offset_delta.to_be_bytes());
            out.extend_from_slice(&e.timestamp.to_be_bytes());
            out.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            let first = e.current_txn_first_offset.map_or(-1, |o| o.0);
            out.extend_from_slice(&first.to_be_bytes());
        }
        let crc = crc32c::crc32c(out.get(CRC_FROM..).unwrap_or_default());
        out.splice(2..CRC_FROM, crc.to_be_bytes());
        out
    }

    /// The open transactions: `(producer id, first offset)` of each producer with one.
    pub fn open_transactions(&self) -> impl Iterator<Item = (i64, Offset)> + '_ {
        self.entries.iter().filter_map(|e| Some((e.producer_id, e.current_txn_first_offset?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: i64, txn_first: Option<i64>) -> ProducerEntry {
        ProducerEntry {
            producer_id: pid,
            epoch: 3,
            last_sequence: 41,
            last_offset: 120,
            offset_delta: 9,
            timestamp: 1_700_000_000_000,
            coordinator_epoch: 7,
            current_txn_first_offset: txn_first.map(Offset),
        }
    }

    /// The layout written out field by field from the spec (Appendix A.2), independently of
    /// [`ProducerSnapshot::encode`].
    fn by_hand(entries: &[(i64, i64)]) -> Vec<u8> {
        let mut body = (entries.len() as i32).to_be_bytes().to_vec();
        for (pid, first) in entries {
            body.extend_from_slice(&pid.to_be_bytes());
            body.extend_from_slice(&3i16.to_be_bytes());
            body.extend_from_slice(&41i32.to_be_bytes());
            body.extend_from_slice(&120i64.to_be_bytes());
            body.extend_from_slice(&9i32.to_be_bytes());
            body.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
            body.extend_from_slice(&7i32.to_be_bytes());
            body.extend_from_slice(&first.to_be_bytes());
        }
        let mut out = 1i16.to_be_bytes().to_vec();
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn a_snapshot_is_the_spec_layout_and_round_trips() {
        let bytes = by_hand(&[(1000, -1), (1001, 57)]);
        assert_eq!(bytes.len(), HEADER_SIZE + 2 * ENTRY_SIZE);
        let s = ProducerSnapshot::decode(&bytes).unwrap();
        assert_eq!(s.entries, vec![entry(1000, None), entry(1001, Some(57))]);
        assert_eq!(s.encode(), bytes);
        assert_eq!(s.open_transactions().collect::<Vec<_>>(), vec![(1001, Offset(57))]);
    }

    #[test]
    fn an_empty_snapshot_is_ten_bytes() {
        let bytes = ProducerSnapshot::default().encode();
        assert_eq!(bytes, by_hand(&[]));
        assert_eq!(bytes.len(), 10);
        assert_eq!(ProducerSnapshot::decode(&bytes).unwrap(), ProducerSnapshot::default());
    }

    #[test]
    fn a_damaged_or_foreign_snapshot_is_refused_never_misread() {
        let good = by_hand(&[(5, 10)]);
        let mut flipped = good.clone();
        flipped[20] ^= 1;
        assert!(matches!(
            ProducerSnapshot::decode(&flipped).unwrap_err().kind,
            DecodeErrorKind::CrcMismatch { .. }
        ));
        let mut version = good.clone();
        version[1] = 2;
        assert!(ProducerSnapshot::decode(&version).is_err());
        assert!(ProducerSnapshot::decode(&good[..good.len() - 1]).is_err());
        let mut longer = good.clone();
        longer.push(0);
        assert!(ProducerSnapshot::decode(&longer).is_err());
        let mut negative = good.clone();
        negative[6] = 0xff;
        assert!(ProducerSnapshot::decode(&negative).is_err());
        for len in 0..HEADER_SIZE {
            assert!(ProducerSnapshot::decode(&good[..len]).is_err());
        }
    }
}
