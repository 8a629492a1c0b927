//! Entries of a `.txnindex` file (Kafka's `TransactionIndex`): one fixed-size entry per aborted
//! transaction whose ABORT marker is in the segment, in the order the markers were written.
//!
//! ```text
//! byte  width  field
//!  0    2      int16 version (0: `AbortedTxn.CURRENT_VERSION`)
//!  2    8      int64 producerId
//! 10    8      int64 firstOffset
//! 18    8      int64 lastOffset (the offset of the ABORT marker)
//! 26    8      int64 lastStableOffset
//! ```
//!
//! All fields are big-endian. The file is a plain sequence of entries: no header, no
//! preallocation, so `length / 34` entries and bytes after the last whole entry are not part of
//! any (Kafka's reader ignores them; the dump tool reports them).

use super::bytes::{be_i16, be_i64};
use super::{DecodeError, Offset};

/// Bytes of one entry (`AbortedTxn.TOTAL_SIZE`).
pub const ENTRY_SIZE: usize = 34;
/// The only entry version Kafka writes and reads (`AbortedTxn.CURRENT_VERSION`).
pub const CURRENT_VERSION: i16 = 0;

/// One `.txnindex` entry (Kafka's `AbortedTxn`, with its version).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TxnIndexEntry {
    /// The entry's version; Kafka's reader refuses entries above [`CURRENT_VERSION`].
    pub version: i16,
    /// The producer whose transaction was aborted.
    pub producer_id: i64,
    /// The transaction's first offset.
    pub first_offset: Offset,
    /// The transaction's last offset: where its ABORT marker is.
    pub last_offset: Offset,
    /// The partition's last stable offset when the marker was written.
    pub last_stable_offset: Offset,
}

impl TxnIndexEntry {
    /// Reads the entry at the start of `entry` (34 bytes needed; more are ignored). The version
    /// is returned as stored: whether it is known is the caller's question
    /// ([`TxnIndexEntry::is_known_version`]).
    pub fn read(entry: &[u8]) -> Result<TxnIndexEntry, DecodeError> {
        Ok(TxnIndexEntry {
            version: be_i16(entry, 0)?,
            producer_id: be_i64(entry, 2)?,
            first_offset: Offset(be_i64(entry, 10)?),
            last_offset: Offset(be_i64(entry, 18)?),
            last_stable_offset: Offset(be_i64(entry, 26)?),
        })
    }

    /// Whether Kafka's reader accepts the entry: its version is not above [`CURRENT_VERSION`]
    /// (`TransactionIndex` throws "Unexpected aborted transaction version" otherwise).
    pub fn is_known_version(&self) -> bool {
        self.version <= CURRENT_VERSION
    }

    /// The entry's 34 bytes.
    pub fn to_bytes(&self) -> [u8; ENTRY_SIZE] {
        let mut out = [0u8; ENTRY_SIZE];
        let fields: [&[u8]; 5] = [
            &self.version.to_be_bytes(),
            &self.producer_id.to_be_bytes(),
            &self.first_offset.0.to_be_bytes(),
            &self.last_offset.0.to_be_bytes(),
            &self.last_stable_offset.0.to_be_bytes(),
        ];
        let mut at = 0;
        for f in fields {
            out[at..at + f.len()].copy_from_slice(f);
            at += f.len();
        }
        out
    }
}

/// The whole entries of a `.txnindex` file's bytes, in order, with their byte positions; bytes
/// after the last whole entry ([`trailing_bytes`]) are not read.
pub fn entries(bytes: &[u8]) -> impl Iterator<Item = (u64, TxnIndexEntry)> + '_ {
    bytes
        .chunks_exact(ENTRY_SIZE)
        .enumerate()
        // A whole chunk always holds an entry: `read` only fails on fewer than 34 bytes.
        .filter_map(|(n, c)| Some(((n * ENTRY_SIZE) as u64, TxnIndexEntry::read(c).ok()?)))
}

/// Bytes after the last whole entry of a `.txnindex` file of `len` bytes.
pub fn trailing_bytes(len: usize) -> usize {
    len % ENTRY_SIZE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(version: i16, pid: i64, first: i64, last: i64, lso: i64) -> TxnIndexEntry {
        TxnIndexEntry {
            version,
            producer_id: pid,
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(lso),
        }
    }

    #[test]
    fn an_entry_is_34_big_endian_bytes_in_kafkas_field_order() {
        let e = entry(0, 0x0102, 3, 4, 5);
        let bytes = e.to_bytes();
        let mut want = vec![0, 0];
        for v in [0x0102i64, 3, 4, 5] {
            want.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(bytes.as_slice(), want.as_slice());
        assert_eq!(TxnIndexEntry::read(&bytes), Ok(e));
    }

    #[test]
    fn entries_stop_at_the_last_whole_entry_and_count_the_rest() {
        let mut bytes = entry(0, 7, 0, 1, 0).to_bytes().to_vec();
        bytes.extend_from_slice(&entry(0, 8, 1, 2, 1).to_bytes());
        bytes.extend_from_slice(&[0, 0, 1]);
        let got: Vec<_> = entries(&bytes).collect();
        assert_eq!(got, [(0, entry(0, 7, 0, 1, 0)), (34, entry(0, 8, 1, 2, 1))]);
        assert_eq!(trailing_bytes(bytes.len()), 3);
        assert!(TxnIndexEntry::read(&bytes[68..]).is_err());
    }

    #[test]
    fn only_versions_up_to_the_current_one_are_known() {
        assert!(entry(0, 1, 0, 0, 0).is_known_version());
        assert!(!entry(1, 1, 0, 0, 0).is_known_version());
        assert!(!entry(0x100, 1, 0, 0, 0).is_known_version());
    }
}
