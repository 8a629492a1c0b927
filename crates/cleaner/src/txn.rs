//! Transactions and producers as the cleaner sees them: Kafka's `CleanedTransactionMetadata`
//! (which batches belong to aborted transactions, which markers may go) and the last batch of
//! every producer (`lastRecordsOfActiveProducers`), with the last stable offset.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use topicfs_format::control::{ControlRecordType, parse_control_key};
use topicfs_format::{BatchInfo, Offset, Position, Timestamp, decode_batch};
use topicfs_source::AbortedTxn;
use topicfs_source::error::Result;
use topicfs_storage::segment::LogSegment;

/// A producer's last batch as far as its current epoch goes (Kafka's `LastRecord`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LastRecord {
    /// Last offset of its last data batch in the current epoch, if any.
    pub last_data_offset: Option<Offset>,
    /// The producer's current epoch.
    pub producer_epoch: i16,
    /// Max timestamp of its last batch (for expiration).
    pub timestamp: Timestamp,
}

/// Kafka's `producer.id.expiration.ms` default: a producer with no batch for this long is no
/// longer active, and its last batch is no longer kept for it.
pub const PRODUCER_ID_EXPIRATION_MS: i64 = 86_400_000;

/// What a header scan of the whole log says about producers.
#[derive(Debug, Default)]
pub struct Producers {
    /// By producer id, every producer seen (expiration is applied by
    /// [`Producers::is_last_of_producer`]).
    pub last: HashMap<i64, LastRecord>,
    /// First offset of every transaction not yet ended by a marker, by producer id.
    pub open_txn_first: HashMap<i64, Offset>,
}

impl Producers {
    fn on_batch(&mut self, info: &BatchInfo) {
        if info.producer_id < 0 || info.magic < 2 {
            return;
        }
        let entry = self.last.entry(info.producer_id).or_insert(LastRecord {
            last_data_offset: None,
            producer_epoch: info.producer_epoch,
            timestamp: info.max_timestamp,
        });
        if entry.producer_epoch != info.producer_epoch {
            entry.last_data_offset = None;
            entry.producer_epoch = info.producer_epoch;
        }
        entry.timestamp = info.max_timestamp;
        if info.is_control {
            self.open_txn_first.remove(&info.producer_id);
        } else {
            entry.last_data_offset = Some(info.last_offset);
            if info.is_transactional {
                self.open_txn_first.entry(info.producer_id).or_insert(info.base_offset);
            }
        }
    }

    /// Whether the cleaner must keep the batch `info` (possibly empty) for its producer's state
    /// at `now`: the last data batch of an active producer (one whose last batch is younger
    /// than [`PRODUCER_ID_EXPIRATION_MS`] or whose transaction is open), or its last marker
    /// when no data batch of its epoch follows.
    pub fn is_last_of_producer(&self, info: &BatchInfo, now: Timestamp) -> bool {
        let active = |l: &LastRecord| {
            now.saturating_sub(l.timestamp) < PRODUCER_ID_EXPIRATION_MS
                || self.open_txn_first.contains_key(&info.producer_id)
        };
        info.producer_id >= 0
            && self.last.get(&info.producer_id).is_some_and(|l| {
                active(l)
                    && match l.last_data_offset {
                        Some(o) => info.last_offset == o,
                        None => info.is_control && info.producer_epoch == l.producer_epoch,
                    }
            })
    }

    /// The last stable offset: the first offset of the oldest open transaction, else `log_end`.
    pub fn last_stable_offset(&self, log_end: Offset) -> Offset {
        self.open_txn_first.values().copied().min().unwrap_or(log_end).min(log_end)
    }
}

/// Bytes of batch headers asked per step of the producer scan.
const HEADS_CHUNK: usize = 16 << 20;

/// Reads every batch header of `segments` (in order) for producers and open transactions.
/// Legacy messages carry no producer and are stepped over.
pub fn scan_producers(segments: &[Arc<LogSegment>], stop: &dyn Fn() -> bool) -> Result<Producers> {
    let mut out = Producers::default();
    for seg in segments {
        let mut pos = Position(0);
        while pos.0 < seg.size() {
            if stop() {
                return Ok(out);
            }
            let (heads, next) = seg.read_heads(pos, HEADS_CHUNK)?;
            if heads.is_empty() {
                // A legacy message (or damage, which `read` reports): step over one entry.
                match seg.read(pos, 1)? {
                    Some(r) => pos = r.next_position,
                    None => break,
                }
                continue;
            }
            for h in &heads {
                out.on_batch(&h.info);
            }
            pos = next;
        }
    }
    Ok(out)
}

struct OngoingAborted {
    txn: AbortedTxn,
    last_observed_batch: Option<Offset>,
}

/// Kafka's `CleanedTransactionMetadata`: fed the aborted transactions of the range being read,
/// then every batch in order.
pub struct TxnMetadata {
    aborted: VecDeque<AbortedTxn>,
    ongoing_aborted: HashMap<i64, OngoingAborted>,
    ongoing_committed: HashSet<i64>,
    /// The `.txnindex` entries of the cleaned output: aborted transactions whose ABORT marker
    /// is kept because batches of them were read in this pass.
    pub cleaned_index: Vec<AbortedTxn>,
}

impl TxnMetadata {
    /// Metadata over `aborted` (any order, duplicates allowed).
    pub fn new(mut aborted: Vec<AbortedTxn>) -> TxnMetadata {
        aborted.sort_by_key(|t| (t.first_offset, t.producer_id, t.last_offset));
        aborted.dedup();
        TxnMetadata {
            aborted: aborted.into(),
            ongoing_aborted: HashMap::new(),
            ongoing_committed: HashSet::new(),
            cleaned_index: Vec::new(),
        }
    }

    fn consume_aborted_up_to(&mut self, offset: Offset) {
        while self.aborted.front().is_some_and(|t| t.first_offset <= offset) {
            let Some(txn) = self.aborted.pop_front() else { break };
            self.ongoing_aborted
                .entry(txn.producer_id)
                .or_insert(OngoingAborted { txn, last_observed_batch: None });
        }
    }

    /// A control batch (`entry` its bytes): whether it may be discarded (an ABORT marker whose
    /// transaction left no batch in what was read, a COMMIT marker of a transaction none of
    /// whose batches was read, an emptied control batch).
    pub fn on_control_batch(&mut self, info: &BatchInfo, entry: &[u8]) -> bool {
        self.consume_aborted_up_to(info.last_offset);
        let key_type = decode_batch(entry).ok().and_then(|b| {
            let first = b.records().next()?.ok()?;
            parse_control_key(first.key).ok().map(|k| k.record_type)
        });
        match key_type {
            Some(ControlRecordType::Abort) => {
                match self.ongoing_aborted.remove(&info.producer_id) {
                    Some(o) if o.last_observed_batch.is_some() => {
                        self.cleaned_index.push(o.txn);
                        false
                    }
                    _ => true,
                }
            }
            Some(ControlRecordType::Commit) => !self.ongoing_committed.remove(&info.producer_id),
            Some(_) => false,
            // An empty control batch was already cleaned: safe to discard.
            None => info.records_count == 0,
        }
    }

    /// A data batch: whether it belongs to an aborted transaction.
    pub fn on_batch(&mut self, info: &BatchInfo) -> bool {
        self.consume_aborted_up_to(info.last_offset);
        if !info.is_transactional {
            return false;
        }
        match self.ongoing_aborted.get_mut(&info.producer_id) {
            Some(o) => {
                o.last_observed_batch = Some(info.last_offset);
                true
            }
            None => {
                self.ongoing_committed.insert(info.producer_id);
                false
            }
        }
    }
}
