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
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::format::control::{ControlRecordType, parse_control_key};
use crate::format::{
    BatchInfo, DecodeError, DecodeErrorKind, Offset, RECORD_BATCH_OVERHEAD, decode_batch,
};
use crate::source::SegmentFiles;
use crate::source::{
    AppendInfo, CacheKind, Committed, KeyIndex, Known, OffsetQuery, PartitionSource,
    PartitionSummary, ReadAnswer, ReadCursor, ReadMode, Records, SealedSpan, SummaryUpdate,
};
use crate::sync::lock;

/// Bytes asked of [`PartitionSource::read`] per step of a scan.
const SCAN_CHUNK: usize = 256 * 1024;

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

/// What a [`TxnTracker`] knew at one moment; see the invariant in the module docs.
#[derive(Clone, Debug, Default)]
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

/// The mutable scan state of one partition.
#[derive(Debug, Default)]
struct TxnState {
    /// Where the scan continues; `None` before the first scan.
    cursor: Option<ReadCursor>,
    /// Every offset below this was scanned.
    scanned_to: Offset,
    /// The log start offset when the scan began.
    log_start: Offset,
    /// Where the scan began: the log start, or the segment boundary whose state a broker
    /// recorded ([`TxnState::start`]).
    scan_start: Offset,
    /// First offset of the open transaction of each producer.
    open: HashMap<i64, Offset>,
    aborted: Arc<HashMap<i64, Ranges>>,
    damage: Option<Damage>,
    /// The segment cache asked for an active segment's prefix at this cursor already.
    prefix_tried: Option<ReadCursor>,
    /// Since a segment start not known as a sealed span (the active segment's, if any): that
    /// start and the events after it, stored as the segment's prefix (see
    /// [`PartitionSource::update_prefix_summary`]) every [`PREFIX_STORE_EVERY`] bytes scanned.
    prefix: Option<(ReadCursor, SpanEvents)>,
    /// Bytes scanned since the prefix was last stored or loaded (`None`: none scanned).
    prefix_unstored: Option<u64>,
    /// The prefix was stored or loaded by this state.
    prefix_stored_once: bool,
}

/// Bytes of the active segment scanned before its prefix's transactions are stored again.
const PREFIX_STORE_EVERY: u64 = 64 << 20;

impl TxnState {
    /// Stores the events of the active segment's prefix up to `end` (where the scan stopped)
    /// when [`PREFIX_STORE_EVERY`] bytes were scanned since it was last stored or loaded, or
    /// it never was. The source stores nothing unless the prefix's start is the active
    /// segment's and `end` lies inside it.
    fn store_prefix(&mut self, part: &dyn PartitionSource, end: ReadCursor) {
        let Some((start, events)) = &self.prefix else { return };
        let due = match self.prefix_unstored {
            None => false,
            Some(n) => n >= PREFIX_STORE_EVERY || self.prefix_stored_never(),
        };
        if !due || *start == end || self.damage.is_some() {
            return;
        }
        let payload = events.encode(end.next_offset);
        part.update_prefix_summary(start, &end, CacheKind::TxnSummary, Box::new(|_| Some(payload)));
        self.prefix_unstored = Some(0);
        self.prefix_stored_once = true;
    }

    /// The cursor the first scan starts at. From the newest segment boundary whose transaction
    /// state a broker recorded (the source's [`crate::source::TxnBoundary`]: its producer-state
    /// snapshot and `.txnindex` files), as Kafka restores producer state, so that a first scan
    /// reads only the batches after it; else from the log start. A recorded state that cannot
    /// be read is not used (the scan starts at the log start, with a warning).
    fn start(&mut self, part: &dyn PartitionSource, log_end: Offset) -> Result<ReadCursor> {
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

    fn prefix_stored_never(&self) -> bool {
        !self.prefix_stored_once
    }

    fn snapshot(&self) -> TxnSnapshot {
        let first_open = self.open.values().min().copied();
        let stable = first_open.map_or(self.scanned_to, |o| o.min(self.scanned_to));
        // Damage matters only where the scan stopped, not below an open transaction.
        let damage = if stable == self.scanned_to { self.damage.clone() } else { None };
        TxnSnapshot { stable, aborted: Arc::clone(&self.aborted), damage }
    }

    /// Takes one batch into account; what it was, for a [`SpanEvents`] recording.
    /// `control` is the whole entry of a control batch (decoded and CRC-checked here); a data
    /// batch needs only its header.
    fn observe(
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
    fn apply(&mut self, event: TxnEvent) {
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
enum TxnEvent {
    /// A transactional data batch of producer `.0` at base offset `.1`.
    Data(i64, Offset),
    Commit(i64, Offset),
    Abort(i64, Offset),
}

/// The transaction summary of a sealed span ([`CacheKind::TxnSummary`]): the events of its
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
struct SpanEvents {
    events: Vec<TxnEvent>,
    /// Producers with a data batch kept since the span's start or their last marker.
    seen: std::collections::HashSet<i64>,
}

impl SpanEvents {
    fn note(&mut self, event: TxnEvent) {
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

    fn encode(&self, end: Offset) -> Vec<u8> {
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
    fn decode(bytes: &[u8], end: Offset) -> Option<Vec<TxnEvent>> {
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

/// The transaction state of one partition, scanned forward from the log start and extended on
/// each [`TxnTracker::refresh`] (see the module docs). Shared by every stream of the partition.
#[derive(Debug, Default)]
pub struct TxnTracker {
    state: Mutex<TxnState>,
}

impl TxnTracker {
    /// A tracker that has scanned nothing yet.
    pub fn new() -> TxnTracker {
        TxnTracker::default()
    }

    /// The state as of the last refresh, without reading anything.
    pub fn snapshot(&self) -> TxnSnapshot {
        lock(&self.state).snapshot()
    }

    /// Scans the batches appended since the last refresh and returns the new state. Starts over
    /// from the log start when the log was truncated below the scan or retention deleted the
    /// segment the scan stood in.
    pub fn refresh(&self, part: &dyn PartitionSource) -> Result<TxnSnapshot> {
        let mut st = lock(&self.state);
        let summary = part.summary()?;
        let stale = st.scanned_to < summary.log_start_offset;
        if st.cursor.is_none() || stale || summary.log_end_offset < st.scanned_to {
            *st = TxnState {
                log_start: summary.log_start_offset,
                scan_start: summary.log_start_offset,
                scanned_to: summary.log_start_offset,
                ..TxnState::default()
            };
        }
        if st.damage.is_some() {
            return Ok(st.snapshot());
        }
        let mut cursor = match st.cursor {
            Some(c) => c,
            None => st.start(part, summary.log_end_offset)?,
        };
        // The sealed span being scanned whole from its start, with its events so far.
        let mut recording: Option<(SealedSpan, SpanEvents)> = None;
        let (began, from) = (Instant::now(), st.scanned_to);
        loop {
            if let Some((span, events)) = recording.take() {
                if cursor.hint == span.end.hint {
                    let payload = events.encode(span.end.next_offset);
                    part.update_summary(&span, CacheKind::TxnSummary, Box::new(|_| Some(payload)));
                } else {
                    recording = Some((span, events));
                }
            }
            if let Some(span) = part.sealed_span_at(&cursor).filter(|s| st.scanned_to <= s.base) {
                let cached = part
                    .load_summary(&span, CacheKind::TxnSummary)
                    .and_then(|b| SpanEvents::decode(&b, span.end.next_offset));
                if let Some(events) = cached {
                    // Known from the segment cache: its events instead of its batches.
                    for e in events {
                        st.apply(e);
                    }
                    st.scanned_to = st.scanned_to.max(span.end.next_offset);
                    cursor = span.end;
                    st.cursor = Some(cursor);
                    continue;
                }
                recording = Some((span, SpanEvents::default()));
                st.prefix = None;
            } else if recording.is_none() && st.prefix_tried != Some(cursor) {
                st.prefix_tried = Some(cursor);
                let cached = part
                    .prefix_span_at(&cursor, CacheKind::TxnSummary)
                    .filter(|(span, _)| st.scanned_to <= span.base)
                    .and_then(|(span, b)| {
                        Some((span, SpanEvents::decode(&b, span.end.next_offset)?))
                    });
                if let Some((span, events)) = cached {
                    // The active segment's prefix, known from the segment cache.
                    let mut kept = SpanEvents::default();
                    for e in events {
                        st.apply(e);
                        kept.note(e);
                    }
                    st.scanned_to = st.scanned_to.max(span.end.next_offset);
                    st.prefix = Some((span.start, kept));
                    st.prefix_unstored = Some(0);
                    st.prefix_stored_once = true;
                    cursor = span.end;
                    st.cursor = Some(cursor);
                    st.prefix_tried = Some(cursor);
                    continue;
                }
                if st.prefix.is_none() && st.scanned_to == st.scan_start {
                    // The scan starts at a segment's start: perhaps the active segment's.
                    st.prefix = Some((cursor, SpanEvents::default()));
                }
            }
            let chunk = match part.read(&cursor, SCAN_CHUNK, ReadMode::HeadsPastDamage) {
                Ok(answer) => answer.into_heads(),
                Err(Error::Corrupt { file, position, what }) => {
                    let file = file.display().to_string();
                    st.damage = Some(Damage { file, position, what });
                    break;
                }
                Err(e) => return Err(e),
            };
            if chunk.heads.is_empty() && chunk.damaged.is_none() {
                break;
            }
            // The cursor at the batch being scanned: the run starts say where the source's runs
            // begin, `after_batch` moves past each batch.
            let mut here = cursor;
            let mut starts = chunk.starts.iter().peekable();
            let mut damaged = None;
            for i in 0..=chunk.heads.len() {
                if let Some(start) = starts.next_if(|s| s.at <= i) {
                    here = ReadCursor {
                        next_offset: here.next_offset.max(start.cursor.next_offset),
                        hint: start.cursor.hint,
                    };
                    if start.retention_boundary {
                        // A segment start: the active segment's, if this is the last one (the
                        // source stores nothing for any other).
                        st.prefix = Some((here, SpanEvents::default()));
                    }
                }
                let Some(head) = chunk.heads.get(i) else {
                    if let Some(e) = &chunk.damaged {
                        damaged = Some((part.byte_location(&here, e.at as u64), e.clone()));
                    }
                    break;
                };
                let info = &head.info;
                match st.observe(info, head.control.as_deref()) {
                    Ok(Some(event)) => {
                        if let Some((_, events)) = recording.as_mut() {
                            events.note(event);
                        }
                        if let Some((_, events)) = st.prefix.as_mut() {
                            events.note(event);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        damaged = Some((part.byte_location(&here, e.at as u64), e));
                        break;
                    }
                }
                st.scanned_to = st.scanned_to.max(info.last_offset.plus(1));
                here = here.after_batch(u64::from(info.size), info.last_offset);
            }
            if chunk.skipped.is_some() {
                // Damage stepped over: the span's events are not known whole.
                recording = None;
                st.prefix = None;
            }
            if st.prefix.is_some() {
                let scanned = chunk.bytes;
                st.prefix_unstored = Some(st.prefix_unstored.map_or(scanned, |n| n + scanned));
            }
            if let Some(((file, position), e)) = damaged {
                log::error!(
                    "transaction scan of {}-{} stopped: corrupt data in {file} at position \
                     {position}: {e}",
                    part.topic(),
                    part.partition()
                );
                st.damage = Some(Damage { file, position, what: e.to_string() });
                st.prefix = None;
                break;
            }
            match chunk.next {
                Some(next) => cursor = next,
                None => break,
            }

            st.cursor = Some(cursor);
        }
        st.cursor = Some(cursor);
        st.store_prefix(part, cursor);
        if st.scanned_to.0 - from.0 > 100_000 {
            log::debug!(
                "transaction scan of {}-{}: offsets {from}..{} in {:.1} ms",
                part.topic(),
                part.partition(),
                st.scanned_to,
                began.elapsed().as_secs_f64() * 1e3
            );
        }
        Ok(st.snapshot())
    }
}

/// One mount's [`TxnTracker`]s (one per partition, created on first use) at one [`Isolation`].
#[derive(Debug, Default)]
pub struct TxnTrackers {
    isolation: Isolation,
    trackers: Mutex<HashMap<(String, u32), Arc<TxnTracker>>>,
}

impl TxnTrackers {
    /// No tracker yet; streams at `isolation`.
    pub fn new(isolation: Isolation) -> TxnTrackers {
        TxnTrackers { isolation, trackers: Mutex::new(HashMap::new()) }
    }

    /// The isolation level of the streams these trackers serve.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// The tracker of `part` in `read_committed`, created on first use; `None` in
    /// `read_uncommitted` (every record is shown, nothing needs tracking) and for a source that
    /// reads committed records itself ([`Committed::BySource`]).
    pub fn tracker(&self, part: &dyn PartitionSource) -> Option<Arc<TxnTracker>> {
        if self.isolation == Isolation::ReadUncommitted
            || matches!(part.committed(), Committed::BySource)
        {
            return None;
        }
        let key = (part.topic().to_string(), part.partition());
        Some(Arc::clone(lock(&self.trackers).entry(key).or_default()))
    }
}

fn truncated(needed: usize, available: usize) -> DecodeError {
    DecodeError::new(0, DecodeErrorKind::Truncated { needed, available })
}

/// A partition as a `read_committed` consumer sees its offsets: the log end offset is the last
/// stable offset (see the module docs). Batches are read as stored; the stream walker cuts them
/// at the stable offset and hides aborted records. The transaction scan reads the inner source,
/// never this wrapper. Every method says what it does with the inner source's: most forward
/// it, the bounds are cut at the stable offset, and the bounds the inner source states without
/// asking are not stated (they may lie past the stable offset).
pub struct CommittedPartition {
    inner: Arc<dyn PartitionSource>,
    tracker: Arc<TxnTracker>,
}

impl CommittedPartition {
    /// `inner` seen through `tracker` (which must be `inner`'s).
    pub fn new(inner: Arc<dyn PartitionSource>, tracker: Arc<TxnTracker>) -> CommittedPartition {
        CommittedPartition { inner, tracker }
    }

    fn stable(&self) -> Result<Offset> {
        Ok(self.tracker.refresh(self.inner.as_ref())?.stable)
    }
}

impl PartitionSource for CommittedPartition {
    fn topic(&self) -> &str {
        self.inner.topic()
    }

    fn partition(&self) -> u32 {
        self.inner.partition()
    }

    fn summary(&self) -> Result<PartitionSummary> {
        let mut summary = self.inner.summary()?;
        let stable = self.stable()?;
        summary.log_end_offset = summary.log_end_offset.min(stable).max(summary.log_start_offset);
        Ok(summary)
    }

    /// The inner source's, without the bounds it states: its end may lie past the stable
    /// offset, so a reader asks [`CommittedPartition::summary`].
    fn known(&self) -> Known {
        Known { bounds: None, ..self.inner.known() }
    }

    fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
        let summary = self.summary()?;
        match query {
            OffsetQuery::Latest => Ok(summary.log_end_offset),
            OffsetQuery::Earliest => self.inner.offset_for(query),
            OffsetQuery::MaxTimestamp | OffsetQuery::Timestamp(_) => {
                Ok(self.inner.offset_for(query)?.min(summary.log_end_offset))
            }
        }
    }

    fn seek(&self, target: Offset) -> Result<ReadCursor> {
        let summary = self.summary()?;
        if target > summary.log_end_offset {
            return Err(Error::OffsetOutOfRange {
                requested: target,
                log_start: summary.log_start_offset,
                log_end: summary.log_end_offset,
            });
        }
        self.inner.seek(target)
    }

    fn holds(&self, cursor: &ReadCursor) -> Result<bool> {
        self.inner.holds(cursor)
    }

    /// The batches as stored: the stream walker cuts them at the stable offset and hides
    /// aborted records.
    fn read(&self, cursor: &ReadCursor, max_bytes: usize, mode: ReadMode) -> Result<ReadAnswer> {
        self.inner.read(cursor, max_bytes, mode)
    }

    fn append(&self, records: Records<'_>) -> Result<AppendInfo> {
        self.inner.append(records)
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn segment_files(&self) -> Option<&dyn SegmentFiles> {
        self.inner.segment_files()
    }

    fn key_index(&self) -> Option<&dyn KeyIndex> {
        self.inner.key_index()
    }

    fn committed(&self) -> Committed<'_> {
        self.inner.committed()
    }

    fn sealed_span_at(&self, cursor: &ReadCursor) -> Option<SealedSpan> {
        self.inner.sealed_span_at(cursor)
    }

    fn load_summary(&self, span: &SealedSpan, kind: CacheKind) -> Option<Vec<u8>> {
        self.inner.load_summary(span, kind)
    }

    fn update_summary(&self, span: &SealedSpan, kind: CacheKind, update: SummaryUpdate) {
        self.inner.update_summary(span, kind, update)
    }

    fn prefix_span_at(
        &self,
        cursor: &ReadCursor,
        kind: CacheKind,
    ) -> Option<(SealedSpan, Vec<u8>)> {
        self.inner.prefix_span_at(cursor, kind)
    }

    fn update_prefix_summary(
        &self,
        start: &ReadCursor,
        end: &ReadCursor,
        kind: CacheKind,
        update: SummaryUpdate,
    ) {
        self.inner.update_prefix_summary(start, end, kind, update)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::control::encode_end_txn_marker_batch;
    use crate::format::{BatchSpec, NewRecord, encode_batch, parse_batch_info};

    fn data(base: i64, pid: i64, transactional: bool) -> Vec<u8> {
        let spec = BatchSpec {
            base_offset: Offset(base),
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: 0,
            is_transactional: transactional,
            ..BatchSpec::default()
        };
        encode_batch(&spec, &[NewRecord { value: Some(b"v".to_vec()), ..NewRecord::default() }])
            .unwrap()
    }

    fn marker(offset: i64, pid: i64, commit: bool) -> Vec<u8> {
        encode_end_txn_marker_batch(Offset(offset), 0, pid, 0, commit, 0, 0).unwrap()
    }

    /// Observes `batches` in order; returns the state and each batch's header.
    fn scan(batches: &[Vec<u8>]) -> (TxnState, Vec<BatchInfo>) {
        let mut st = TxnState::default();
        let mut infos = Vec::new();
        for b in batches {
            let info = parse_batch_info(b).unwrap();
            st.observe(&info, Some(b)).unwrap();
            st.scanned_to = info.last_offset.plus(1);
            infos.push(info);
        }
        (st, infos)
    }

    #[test]
    fn a_batch_is_aborted_only_when_its_producers_next_marker_is_an_abort() {
        // 0: P1 data, 1: P2 data, 2: P1 data, 3: P2 COMMIT, 4: P1 ABORT, 5: P1 data, 6: P1 COMMIT
        let (st, infos) = scan(&[
            data(0, 1, true),
            data(1, 2, true),
            data(2, 1, true),
            marker(3, 2, true),
            marker(4, 1, false),
            data(5, 1, true),
            marker(6, 1, true),
        ]);
        let snap = st.snapshot();
        let aborted: Vec<bool> = infos.iter().map(|i| snap.is_aborted(i)).collect();
        assert_eq!(aborted, [true, false, true, false, false, false, false]);
        assert_eq!(snap.stable, Offset(7));
    }

    #[test]
    fn the_stable_offset_stops_at_the_first_open_transaction() {
        let (st, _) =
            scan(&[data(0, 9, false), data(1, 1, true), data(2, 2, true), marker(3, 2, true)]);
        assert_eq!(st.snapshot().stable, Offset(1));
        assert!(st.snapshot().admits(Offset(0)).unwrap());
        assert!(!st.snapshot().admits(Offset(1)).unwrap());
    }

    #[test]
    fn idempotent_non_transactional_batches_are_never_aborted() {
        let (st, infos) = scan(&[data(0, 1, false), marker(1, 1, false)]);
        assert!(!st.snapshot().is_aborted(&infos[0]));
        assert_eq!(st.snapshot().stable, Offset(2));
    }

    /// Scans `batches`, recording the events of each span (split before each index in
    /// `splits`), as the tracker does for sealed segments.
    fn record(batches: &[Vec<u8>], splits: &[usize]) -> Vec<Vec<TxnEvent>> {
        let mut st = TxnState::default();
        let mut spans = vec![SpanEvents::default()];
        for (i, b) in batches.iter().enumerate() {
            if splits.contains(&i) {
                spans.push(SpanEvents::default());
            }
            let info = parse_batch_info(b).unwrap();
            if let Some(e) = st.observe(&info, Some(b)).unwrap() {
                spans.last_mut().unwrap().note(e);
            }
        }
        spans.into_iter().map(|s| s.events).collect()
    }

    fn applied(spans: &[Vec<TxnEvent>]) -> (HashMap<i64, Offset>, HashMap<i64, Ranges>) {
        let mut st = TxnState::default();
        for e in spans.iter().flatten() {
            st.apply(*e);
        }
        (st.open, (*st.aborted).clone())
    }

    #[test]
    fn a_spans_recorded_events_give_the_state_scanning_its_batches_gives() {
        // P1 spans three segments (its abort in the last), P2 commits inside the first, P3 is
        // still open at the end.
        let batches = [
            data(0, 1, true),
            data(1, 2, true),
            data(2, 1, true),
            marker(3, 2, true),
            data(4, 1, true),
            data(5, 3, true),
            data(6, 1, true),
            marker(7, 1, false),
            data(8, 1, true),
            data(9, 9, false),
        ];
        for splits in [vec![], vec![3], vec![2, 5], vec![1, 4, 7, 8], (1..10).collect()] {
            let spans = record(&batches, &splits);
            let (st, _) = scan(&batches);
            assert_eq!(applied(&spans), (st.open.clone(), (*st.aborted).clone()), "{splits:?}");
            // Retention deleted the spans before the last ones: applying the rest equals
            // scanning the rest.
            let starts: Vec<usize> = std::iter::once(0).chain(splits.iter().copied()).collect();
            for (k, from) in starts.iter().enumerate() {
                let (rest, _) = scan(&batches[*from..]);
                assert_eq!(
                    applied(&spans[k..]),
                    (rest.open.clone(), (*rest.aborted).clone()),
                    "{splits:?} from {from}"
                );
            }
            // Encoded and decoded, each span's events are the same.
            for events in &spans {
                let e = SpanEvents { events: events.clone(), ..SpanEvents::default() };
                let bytes = e.encode(Offset(10));
                assert_eq!(SpanEvents::decode(&bytes, Offset(10)).as_ref(), Some(events));
                assert_eq!(SpanEvents::decode(&bytes, Offset(11)), None, "another end");
                for n in 0..bytes.len() {
                    assert_eq!(SpanEvents::decode(&bytes[..n], Offset(10)), None);
                }
            }
        }
        // Only what the state depends on is kept: the first data batch of a producer per span
        // and after each marker, and every marker.
        let spans = record(&batches, &[]);
        assert_eq!(spans[0].len(), 6, "{:?}", spans[0]);
    }

    #[test]
    fn isolation_levels_parse_by_kafkas_names() {
        assert_eq!("read_committed".parse::<Isolation>().unwrap(), Isolation::ReadCommitted);
        assert_eq!("read_uncommitted".parse::<Isolation>().unwrap(), Isolation::ReadUncommitted);
        assert!("committed".parse::<Isolation>().is_err());
        assert_eq!(Isolation::default().name(), "read_committed");
    }
}
