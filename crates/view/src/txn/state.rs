//! The scan state of one partition and its persistence: the state a scan builds from batch
//! headers and markers, and the events of a span kept in the segment cache.

use std::collections::HashMap;
use std::sync::Arc;

use topicfs_format::control::{ControlRecordType, parse_control_key};
use topicfs_format::{
    BatchInfo, DecodeError, DecodeErrorKind, Offset, RECORD_BATCH_OVERHEAD, decode_batch,
};
use topicfs_source::error::Result;
use topicfs_source::{Committed, PREFIX_STORE_EVERY, PartitionSource, ReadCursor, SpanKind};

use super::{Damage, Ranges, TxnSnapshot};

/// The mutable scan state of one partition.
#[derive(Debug, Default)]
pub(super) struct TxnState {
    /// Where the scan continues; `None` before the first scan.
    pub(super) cursor: Option<ReadCursor>,
    /// Every offset below this was scanned.
    pub(super) scanned_to: Offset,
    /// The log start offset when the scan began.
    pub(super) log_start: Offset,
    /// Where the scan began: the log start, or the segment boundary whose state a broker
    /// recorded ([`TxnState::start`]).
    pub(super) scan_start: Offset,
    /// First offset of the open transaction of each producer.
    pub(super) open: HashMap<i64, Offset>,
    pub(super) aborted: Arc<HashMap<i64, Ranges>>,
    pub(super) damage: Option<Damage>,
    /// The segment cache asked for an active segment's prefix at this cursor already.
    pub(super) prefix_tried: Option<ReadCursor>,
    /// Since a segment start not known as a sealed span (the active segment's, if any): that
    /// start and the events after it, stored as the segment's prefix (see
    /// [`topicfs_source::SpanStore::update_prefix`]) every [`PREFIX_STORE_EVERY`] bytes scanned.
    pub(super) prefix: Option<(ReadCursor, SpanEvents)>,
    /// Bytes scanned since the prefix was last stored or loaded (`None`: none scanned).
    pub(super) prefix_unstored: Option<u64>,
    /// The prefix was stored or loaded by this state.
    pub(super) prefix_stored_once: bool,
}

/// The transaction tracker's kind of payload in a [`SpanStore`](topicfs_source::SpanStore): a
/// span's [`SpanEvents`], for sealed spans and stable prefixes. The tags and names are those
/// of the entries earlier versions wrote (`.txn`, `.prefix-txn`).
pub const TXN_SUMMARY: SpanKind =
    SpanKind { name: "txn", tag: 2, prefix: Some(("prefix-txn", 5)), with_the_log: true };

impl TxnState {
    /// Stores the events of the active segment's prefix up to `end` (where the scan stopped)
    /// when [`PREFIX_STORE_EVERY`] bytes were scanned since it was last stored or loaded, or
    /// it never was. The source stores nothing unless the prefix's start is the active
    /// segment's and `end` lies inside it.
    pub(super) fn store_prefix(&mut self, part: &dyn PartitionSource, end: ReadCursor) {
        let Some((start, events)) = &self.prefix else { return };
        let due = match self.prefix_unstored {
            None => false,
            Some(n) => n >= PREFIX_STORE_EVERY || self.prefix_stored_never(),
        };
        if !due || *start == end || self.damage.is_some() {
            return;
        }
        let payload = events.encode(end.next_offset);
        if let Some(store) = part.span_store() {
            store.update_prefix(start, &end, TXN_SUMMARY, Box::new(|_| Some(payload)));
        }
        self.prefix_unstored = Some(0);
        self.prefix_stored_once = true;
    }

    /// The cursor the first scan starts at. From the newest segment boundary whose transaction
    /// state a broker recorded (the source's [`topicfs_source::TxnBoundary`]: its producer-state
    /// snapshot and `.txnindex` files), as Kafka restores producer state, so that a first scan
    /// reads only the batches after it; else from the log start. A recorded state that cannot
    /// be read is not used (the scan starts at the log start, with a warning).
    pub(super) fn start(
        &mut self,
        part: &dyn PartitionSource,
        log_end: Offset,
    ) -> Result<ReadCursor> {
        let recorded = match part.committed() {
            Committed::ByView(Some(boundary)) => boundary.state_at_boundary(),
            Committed::ByView(None) | Committed::BySource => Ok(None),
        };
        let boundary = match recorded {
            Ok(b) => b.filter(|b| b.offset > self.log_start && b.offset <= log_end),
            Err(e) => {
                log::warn!(
                    "transaction state of {}-{} at a segment boundary not used: {e}",
                    part.topic(),
                    part.partition()
                );
                None
            }
        };
        let Some(b) = boundary else { return part.seek(self.log_start) };
        let cursor = part.seek(b.offset)?;
        let mut aborted: HashMap<i64, Ranges> = HashMap::new();
        for t in &b.aborted {
            aborted.entry(t.producer_id).or_default().push((t.first_offset, t.last_offset));
        }
        for ranges in aborted.values_mut() {
            ranges.sort_unstable_by_key(|(_, last)| *last);
        }
        log::debug!(
            "transaction scan of {}-{} starts at {} from the broker's producer snapshot: {} open, \
             {} aborted below",
            part.topic(),
            part.partition(),
            b.offset,
            b.open.len(),
            b.aborted.len()
        );
        self.open = b.open.into_iter().collect();
        self.aborted = Arc::new(aborted);
        self.scanned_to = b.offset;
        self.scan_start = b.offset;
        Ok(cursor)
    }

    pub(super) fn prefix_stored_never(&self) -> bool {
        !self.prefix_stored_once
    }

    pub(super) fn snapshot(&self) -> TxnSnapshot {
        let first_open = self.open.values().min().copied();
        let stable = first_open.map_or(self.scanned_to, |o| o.min(self.scanned_to));
        // Damage matters only where the scan stopped, not below an open transaction.
        let damage = if stable == self.scanned_to { self.damage.clone() } else { None };
        TxnSnapshot { stable, aborted: Arc::clone(&self.aborted), damage }
    }

    /// Takes one batch into account; what it was, for a [`SpanEvents`] recording.
    /// `control` is the whole entry of a control batch (decoded and CRC-checked here); a data
    /// batch needs only its header.
    pub(super) fn observe(
        &mut self,
        info: &BatchInfo,
        control: Option<&[u8]>,
    ) -> Result<Option<TxnEvent>, DecodeError> {
        let event = if info.is_control {
            if !info.is_transactional {
                return Ok(None); // KRaft control records: no transaction.
            }
            let entry = control.ok_or_else(|| truncated(RECORD_BATCH_OVERHEAD, 0))?;
            let batch = decode_batch(entry)?;
            let Some(record) = batch.records().next() else { return Ok(None) };
            let key = parse_control_key(record?.key)?;
            match key.record_type {
                ControlRecordType::Abort => TxnEvent::Abort(info.producer_id, info.base_offset),
                ControlRecordType::Commit => TxnEvent::Commit(info.producer_id, info.base_offset),
                _ => return Ok(None),
            }
        } else if info.is_transactional {
            TxnEvent::Data(info.producer_id, info.base_offset)
        } else {
            return Ok(None);
        };
        self.apply(event);
        Ok(Some(event))
    }

    /// The effect of one transactional batch or marker on the state.
    pub(super) fn apply(&mut self, event: TxnEvent) {
        match event {
            TxnEvent::Data(pid, offset) => {
                self.open.entry(pid).or_insert(offset);
            }
            TxnEvent::Abort(pid, offset) => {
                if let Some(first) = self.open.remove(&pid) {
                    let ranges = Arc::make_mut(&mut self.aborted).entry(pid).or_default();
                    ranges.push((first, offset));
                }
            }
            TxnEvent::Commit(pid, _) => {
                self.open.remove(&pid);
            }
        }
    }
}

/// A transactional batch or marker, as far as the scan's state is concerned.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum TxnEvent {
    /// A transactional data batch of producer `.0` at base offset `.1`.
    Data(i64, Offset),
    Commit(i64, Offset),
    Abort(i64, Offset),
}

/// The transaction summary of a sealed span ([`TXN_SUMMARY`]): the events of its
/// batches that the scan's state depends on, so that a later scan applies them instead of
/// reading the span. Of the data batches of a producer, only the first after the span's start
/// and the first after each of its markers are kept (applying a `Data` to an open transaction
/// changes nothing); every marker is kept. Applying the events in order to any state gives the
/// state scanning the span's batches gives (also when retention deleted what came before).
///
/// ```text
/// version u8 = 1 | end bound i64 | count u32 | count × (kind u8: 0 data, 1 commit, 2 abort
///   | producer id i64 | offset i64)
/// ```
#[derive(Debug, Default, Clone)]
pub(super) struct SpanEvents {
    pub(super) events: Vec<TxnEvent>,
    /// Producers with a data batch kept since the span's start or their last marker.
    pub(super) seen: std::collections::HashSet<i64>,
}

impl SpanEvents {
    pub(super) fn note(&mut self, event: TxnEvent) {
        match event {
            TxnEvent::Data(pid, _) => {
                if !self.seen.insert(pid) {
                    return;
                }
            }
            TxnEvent::Commit(pid, _) | TxnEvent::Abort(pid, _) => {
                self.seen.remove(&pid);
            }
        }
        self.events.push(event);
    }

    pub(super) fn encode(&self, end: Offset) -> Vec<u8> {
        let mut out = vec![1u8];
        out.extend_from_slice(&end.0.to_be_bytes());
        out.extend_from_slice(&(self.events.len() as u32).to_be_bytes());
        for e in &self.events {
            let (kind, pid, offset) = match *e {
                TxnEvent::Data(p, o) => (0u8, p, o),
                TxnEvent::Commit(p, o) => (1, p, o),
                TxnEvent::Abort(p, o) => (2, p, o),
            };
            out.push(kind);
            out.extend_from_slice(&pid.to_be_bytes());
            out.extend_from_slice(&offset.0.to_be_bytes());
        }
        out
    }

    /// The events of a payload whose end bound is `end`; `None` if anything does not check.
    pub(super) fn decode(bytes: &[u8], end: Offset) -> Option<Vec<TxnEvent>> {
        let (&version, rest) = bytes.split_first()?;
        let (stored_end, rest) = rest.split_first_chunk::<8>()?;
        let (count, mut rest) = rest.split_first_chunk::<4>()?;
        if version != 1 || i64::from_be_bytes(*stored_end) != end.0 {
            return None;
        }
        let count = u32::from_be_bytes(*count) as usize;
        if rest.len() != count.checked_mul(17)? {
            return None;
        }
        let mut events = Vec::with_capacity(count);
        while let Some((&kind, tail)) = rest.split_first() {
            let (pid, tail) = tail.split_first_chunk::<8>()?;
            let (offset, tail) = tail.split_first_chunk::<8>()?;
            let (pid, offset) = (i64::from_be_bytes(*pid), Offset(i64::from_be_bytes(*offset)));
            if offset >= end {
                return None;
            }
            events.push(match kind {
                0 => TxnEvent::Data(pid, offset),
                1 => TxnEvent::Commit(pid, offset),
                2 => TxnEvent::Abort(pid, offset),
                _ => return None,
            });
            rest = tail;
        }
        Some(events)
    }
}

pub(super) fn truncated(needed: usize, available: usize) -> DecodeError {
    DecodeError::new(0, DecodeErrorKind::Truncated { needed, available })
}
