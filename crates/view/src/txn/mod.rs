//! Transactions in streams: Kafka's `isolation.level`.
//!
//! With [`Isolation::ReadCommitted`] (the default, as in kcat and librdkafka) the record formats
//! show what a `read_committed` consumer receives:
//!
//! * records of **aborted** transactions are hidden: a transactional batch of producer `P` is
//!   aborted when an ABORT marker of `P` follows it with no COMMIT or ABORT of `P` between them
//!   (the range Kafka records in `.txnindex` as `firstOffset..lastOffset`);
//! * the stream ends at the **last stable offset** (LSO): the first offset of the earliest
//!   transaction that has no marker yet. Later records appear once that transaction ends. In
//!   this mode the log end offset a name resolves against is the LSO (ListOffsets `latest` with
//!   `READ_COMMITTED`), so `by-offset/N` for `N` past the LSO does not exist yet.
//!
//! Raw streams hold batches as stored, aborted ones and markers included (what a Fetch response
//! carries), up to the LSO. With [`Isolation::ReadUncommitted`] every record of every
//! non-control batch is shown, up to the log end offset.
//!
//! The decision is taken from the log itself, by a forward scan of batch headers and control
//! records kept per partition ([`TxnTracker`]): the markers are the source of truth Kafka
//! rebuilds `.txnindex` from. Each batch is scanned once; the tracker keeps the open
//! transactions (one entry per producer) and the aborted ranges.
//!
//! **Invariant** (of every [`TxnSnapshot`]): every batch holding only offsets below
//! [`TxnSnapshot::stable`] has been scanned, and its transaction (if any) has its marker, so
//! whether it is aborted never changes again. Render indexes therefore stay valid as the
//! tracker moves on.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;

use topicfs_format::{BatchInfo, Offset};
use topicfs_source::error::{Error, Result};

mod committed;
mod state;
#[cfg(test)]
mod tests;
mod tracker;

pub use committed::CommittedPartition;
pub use state::TXN_SUMMARY;
pub use tracker::{TxnTracker, TxnTrackers};

/// Which records of transactions streams show (Kafka's consumer `isolation.level`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// Committed records only, up to the last stable offset (the kcat/librdkafka default).
    #[default]
    ReadCommitted,
    /// Every record of every non-control batch, up to the log end offset.
    ReadUncommitted,
}

impl Isolation {
    /// Kafka's name of the level (`read_committed`, `read_uncommitted`).
    pub fn name(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read_committed",
            Isolation::ReadUncommitted => "read_uncommitted",
        }
    }
}

impl FromStr for Isolation {
    type Err = Error;

    fn from_str(s: &str) -> Result<Isolation> {
        match s {
            "read_committed" => Ok(Isolation::ReadCommitted),
            "read_uncommitted" => Ok(Isolation::ReadUncommitted),
            _ => Err(Error::InvalidInput(format!(
                "isolation {s:?}: expected read_committed or read_uncommitted"
            ))),
        }
    }
}

/// Where a scan stopped on bytes that do not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Damage {
    file: String,
    position: u64,
    what: String,
}

/// Aborted ranges of one producer, `(first offset, marker offset)`, ascending and disjoint.
type Ranges = Vec<(Offset, Offset)>;

/// What a [`TxnTracker`] knew at one moment; see the invariant in the module docs. Two
/// snapshots are equal when their stable offsets, aborted ranges and damage are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnSnapshot {
    /// The last stable offset as far as the scan went: the first offset of the earliest open
    /// transaction, else the end of what was scanned.
    pub stable: Offset,
    aborted: Arc<HashMap<i64, Ranges>>,
    /// Set when the scan stopped at `stable` on damaged bytes.
    damage: Option<Damage>,
}

impl TxnSnapshot {
    /// Whether the batch `info` (below [`TxnSnapshot::stable`]) belongs to an aborted
    /// transaction. Control batches are not "aborted": they are never records.
    pub fn is_aborted(&self, info: &BatchInfo) -> bool {
        if !info.is_transactional || info.is_control {
            return false;
        }
        let Some(ranges) = self.aborted.get(&info.producer_id) else { return false };
        let i = ranges.partition_point(|(_, last)| *last < info.base_offset);
        ranges.get(i).is_some_and(|(first, _)| *first <= info.base_offset)
    }

    /// Whether the record at `offset` (below [`TxnSnapshot::stable`]) of a transactional batch
    /// of producer `producer_id` belongs to an aborted transaction: what
    /// [`TxnSnapshot::is_aborted`] says of its batch (an aborted range holds whole batches, so
    /// any offset of the batch answers for it). Used by key lookups, which know records by
    /// offset and producer without reading their batches.
    pub fn is_aborted_record(&self, producer_id: i64, offset: Offset) -> bool {
        let Some(ranges) = self.aborted.get(&producer_id) else { return false };
        let i = ranges.partition_point(|(_, last)| *last < offset);
        ranges.get(i).is_some_and(|(first, _)| *first <= offset)
    }

    /// A digest of the aborted ranges that overlap `[from, to)` (every producer): two snapshots
    /// with the same digest hide the same records of a span between those offsets. Used to key
    /// what is cached about a span's `read_committed` rendering.
    pub fn aborted_digest(&self, from: Offset, to: Offset) -> u64 {
        let mut hits: Vec<(i64, i64, i64)> = self
            .aborted
            .iter()
            .flat_map(|(pid, ranges)| {
                ranges
                    .iter()
                    .filter(|(first, last)| *first < to && *last >= from)
                    .map(move |(first, last)| (*pid, first.0, last.0))
            })
            .collect();
        hits.sort_unstable();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (pid, first, last) in hits {
            for b in pid.to_be_bytes().iter().chain(&first.to_be_bytes()).chain(&last.to_be_bytes())
            {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        h
    }

    /// Whether an entry whose header offset is `offset` may be shown: it lies below the
    /// stable offset. Past it, `Err` when the scan stopped there on damage (reading on would
    /// show records whose transaction is unknown), else `Ok(false)`.
    pub fn admits(&self, offset: Offset) -> Result<bool> {
        if offset < self.stable {
            return Ok(true);
        }
        match &self.damage {
            Some(d) => Err(Error::corrupt(&d.file, d.position, d.what.clone())),
            None => Ok(false),
        }
    }
}
