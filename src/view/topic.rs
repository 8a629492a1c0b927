//! Topic-level views: every partition of a topic at once.
//!
//! * `offsets/<time>` ([`offsets_text`]): one `topic:partition:offset` line per partition, as
//!   `kafka-get-offsets.sh --time` prints them, for every partition, always: a partition with no
//!   record that new, or no record at all, answers its log end offset (ListOffsets semantics,
//!   [`crate::source::OffsetQuery`]), so no partition is ever missing from the list.
//! * `by-time/<spec>` and `by-time/<spec>.json` ([`TopicStream`]): the records of all
//!   partitions from that time, merged in timestamp order, with exact sizes like the partition
//!   streams of [`crate::view::stream`].
//! * `append` and `append.json` ([`TopicAppender`]): records routed to partitions as Kafka's
//!   default partitioner routes them (see [`crate::partitioner`]).
//!
//! # The merged stream
//!
//! Each partition `p` contributes the records its own `by-time/<spec>` stream holds: offsets
//! from `offset_for(Timestamp(T1))` (ListOffsets: the first record, in log order, whose
//! timestamp is `>= T1`), up to the first offset whose timestamp is `>= T2` for a range
//! `T1..T2`, control batches excluded. The merged stream interleaves these per-partition
//! sequences by a k-way merge: among the partitions' next records, the one with the smallest
//! timestamp comes first, ties in partition order; within a partition, log order is kept. When
//! every partition's timestamps ascend (LogAppendTime, or producers with sane clocks) the whole
//! stream ascends.
//!
//! `.raw` is not offered at topic level: a stored batch does not say which partition it belongs
//! to, so batches of several partitions concatenated could not be told apart.
//!
//! ## Growth: bytes already served never move
//!
//! A file's bytes must never change once they can have been read, but a partition can receive
//! a record older than records of other partitions that the stream already shows. The rule:
//!
//! > The stream is a sequence of *rounds*. A round starts whenever the stream's size is asked
//! > for or bytes past its current end are read, and takes, from every partition, the records
//! > that arrived since the previous round (up to the log end offset at that moment). A round's
//! > records are merged among themselves by (timestamp, partition) and placed after everything
//! > earlier rounds placed. A record that arrives late is therefore shown after the records
//! > already in the stream, never before them.
//!
//! For a topic that does not change while the file is open there is one round and the order is
//! the plain merge. The size reported is exactly the bytes of the rounds started so far, and a
//! read returns exactly those bytes; a round's boundaries never change once it started.
//! Partitions added (by `mkdir`) while the stream grows join it at their own start offset for
//! `T1`.
//!
//! ## The merge index
//!
//! A [`MergeIndex`] keeps, for one resolved stream, the rounds (the per-partition end offsets of
//! each round) and sparse [`MergeCheckpoint`]s: a rendered position and, for every partition, a
//! cursor (a batch boundary at or before its next record, and that record's offset). A
//! checkpoint is taken every [`MERGE_CHECKPOINT_INTERVAL`] rendered bytes, up to
//! [`MAX_MERGE_CHECKPOINTS`] (then every other one is dropped and the interval doubles). A
//! round is counted once when it starts (each record decoded and rendered once, into a
//! counter); a read resumes the merge from the checkpoint at or before its window (or from
//! where the stream's previous read stopped), so it costs at most one interval plus what it
//! returns, never a re-merge from the start.
//!
//! **Invariant** (of every checkpoint `c`): merging from `c.cursors` with the rounds from
//! `c.round` on renders exactly the bytes at rendered positions `c.position..` of the stream.
//!
//! Bytes of records deleted by retention read as [`Error::StaleHandle`] (`ESTALE`), as in the
//! partition streams.
//!
//! ## Transactions
//!
//! The merged stream honours the mount's [`Isolation`] as the partition streams do (see
//! [`crate::view::txn`]). With `read_committed` (the default) each partition contributes what
//! its own `by-time/<spec>` stream shows: it is seen through a [`CommittedPartition`], so its
//! log end offset, and with it every round's end for that partition, is its **last stable
//! offset**; and records of **aborted** transactions are skipped like control batches. A
//! partition with an open transaction therefore holds the merge of its later records back until
//! the transaction's marker arrives, then they join the next round. With `read_uncommitted`
//! every record of every non-control batch is merged, up to the log end offset.
//!
//! **Invariant**: a member only renders batches below the stable offset of a [`TxnSnapshot`]
//! taken when it reads them, so whether a batch is aborted is final when it is rendered, and
//! records buffered past a round's end stay valid for the next round.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::ops::Range;
use std::sync::{Arc, Mutex, Weak};

use crate::error::{Error, Result};
use crate::format::{DecodeError, NewRecord, Offset, Timestamp, decode_batch, peek_entry};
use crate::partitioner::{KeylessRotation, partition_for_key};
use crate::source::{AppendInfo, OffsetQuery, PartitionSource, ReadCursor, TopicSource};
use crate::sync::lock;
use crate::view::render::Renderer;
use crate::view::spec::{Bound, Format, Resolved, Selector, SpecError, StreamSpec, TimePoint};
use crate::view::txn::{CommittedPartition, Isolation, TxnSnapshot, TxnTracker, TxnTrackers};

/// Rendered bytes between two checkpoints of a fresh merge index.
pub const MERGE_CHECKPOINT_INTERVAL: u64 = 64 * 1024;
/// Most checkpoints one merge index keeps before thinning (each holds a cursor per partition).
pub const MAX_MERGE_CHECKPOINTS: usize = 4096;
/// Bytes asked of [`PartitionSource::read`] per partition at a time.
const MEMBER_READ_CHUNK: usize = 32 * 1024;

/// Parses a name under `<topic>/offsets/`: one time of the `by-time/` grammar (`-1`, `-2`,
/// `-3`, epoch milliseconds, RFC 3339, a date, `-15m`), no range and no format suffix.
pub fn parse_offsets_name(name: &str) -> Result<TimePoint, SpecError> {
    let spec = StreamSpec::parse_by_time(name)?;
    match (spec.selector, spec.format) {
        (Selector::Times { start, end: None }, Format::Values) if !name.contains("..") => Ok(start),
        _ => Err(SpecError {
            name: name.to_string(),
            reason: "offsets/ names are one time, without a range or a format suffix",
        }),
    }
}

/// Parses a name under `<topic>/by-time/`: the `by-time/` grammar, value lines or `.json`.
pub fn parse_topic_by_time(name: &str) -> Result<StreamSpec, SpecError> {
    let spec = StreamSpec::parse_by_time(name)?;
    if spec.format == Format::Raw {
        return Err(SpecError {
            name: name.to_string(),
            reason: "a topic-level stream has no .raw form (batches do not name their partition)",
        });
    }
    Ok(spec)
}

/// The text of `<topic>/offsets/<time>` at this moment: `topic:partition:offset\n` for every
/// partition in partition order, the offset being ListOffsets' answer for `time` (relative
/// times anchored at `now`): never missing, the log end offset when no record is that new.
pub fn offsets_text(
    source: &dyn TopicSource,
    topic: &str,
    time: TimePoint,
    now: Timestamp,
) -> Result<String> {
    let query = time.query(now);
    let mut text = String::new();
    for p in source.partitions(topic)? {
        let offset = source.partition(topic, p)?.offset_for(query)?;
        text.push_str(&format!("{topic}:{p}:{offset}\n"));
    }
    Ok(text)
}

/// Names listed in `<topic>/offsets/`: Kafka's special times, latest (`-1`), earliest (`-2`)
/// and max timestamp (`-3`). Any other time can be looked up.
pub fn offsets_names() -> Vec<String> {
    ["-1", "-2", "-3"].iter().map(|s| s.to_string()).collect()
}

/// Names listed in `<topic>/by-time/`: the union of the partitions' `by-time/` names (see
/// [`crate::view::listing::by_time_names`]), in time order.
pub fn topic_by_time_names(source: &dyn TopicSource, topic: &str) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for p in source.partitions(topic)? {
        names.extend(crate::view::listing::by_time_names(source.partition(topic, p)?.as_ref())?);
    }
    // RFC 3339 UTC names of one width sort as their times do.
    names.sort_unstable();
    names.dedup();
    Ok(names)
}

// ---- appends ----------------------------------------------------------------------------------

/// Routes records written to a topic-level `append` or `append.json` to partitions.
///
/// One call to [`TopicAppender::append`] is one `write()`: keyed records go to
/// `toPositive(murmur2(key)) % partitions` (Kafka's default partitioner), keyless records all go
/// to one partition chosen by the topic's [`KeylessRotation`]; each partition that receives
/// records gets them in one [`PartitionSource::append`] (one batch), in the order written.
/// Partitions are appended in partition order; if one append fails, the partitions before it
/// keep their records (as with a producer writing to several partitions without a
/// transaction) and the error is returned.
pub struct TopicAppender {
    source: Arc<dyn TopicSource>,
    topic: String,
    rotation: Arc<KeylessRotation>,
}

impl std::fmt::Debug for TopicAppender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicAppender").field("topic", &self.topic).finish()
    }
}

/// Records of one write grouped by partition (ascending), each group in written order.
pub fn route(
    records: Vec<NewRecord>,
    partitions: u32,
    rotation: &KeylessRotation,
) -> Result<Vec<(u32, Vec<NewRecord>)>> {
    let none = || Error::NotFound("a topic without partitions takes no records".into());
    let mut keyless = None;
    let mut groups: Vec<(u32, Vec<NewRecord>)> = Vec::new();
    for record in records {
        let p = match &record.key {
            Some(key) => partition_for_key(key, partitions).ok_or_else(none)?,
            None => match keyless {
                Some(p) => p,
                None => {
                    let p = rotation.next(partitions).ok_or_else(none)?;
                    keyless = Some(p);
                    p
                }
            },
        };
        match groups.iter_mut().find(|(q, _)| *q == p) {
            Some((_, group)) => group.push(record),
            None => groups.push((p, vec![record])),
        }
    }
    groups.sort_by_key(|(p, _)| *p);
    Ok(groups)
}

impl TopicAppender {
    /// The topic name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Appends the records of one `write()`; returns what each partition wrote.
    pub fn append(&self, records: Vec<NewRecord>) -> Result<Vec<(u32, AppendInfo)>> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let count = self.partition_count()?;
        let mut written = Vec::new();
        for (p, group) in route(records, count, &self.rotation)? {
            let info = self.source.partition(&self.topic, p)?.append(&group)?;
            written.push((p, info));
        }
        Ok(written)
    }

    /// Makes every partition's appends durable.
    pub fn sync(&self) -> Result<()> {
        for p in self.source.partitions(&self.topic)? {
            self.source.partition(&self.topic, p)?.sync()?;
        }
        Ok(())
    }

    /// Partitions are `0..n` (only the next number can be added), so the count is what Kafka's
    /// partitioner divides by; anything else is refused rather than misrouted.
    fn partition_count(&self) -> Result<u32> {
        let partitions = self.source.partitions(&self.topic)?;
        let n = u32::try_from(partitions.len()).unwrap_or(u32::MAX);
        if partitions.iter().enumerate().any(|(i, p)| u32::try_from(i).ok() != Some(*p)) {
            return Err(Error::InvalidInput(format!(
                "partitions of {} are not numbered 0..{n}: {partitions:?}",
                self.topic
            )));
        }
        Ok(n)
    }
}

// ---- the registry -----------------------------------------------------------------------------

/// Identity of a merge index: the same topic, format and per-partition resolution share one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct MergeKey {
    topic: String,
    format: Format,
    members: Vec<(u32, Resolved)>,
}

/// One per mount: merge indexes of topic-level streams (shared while a stream uses them), the
/// transaction trackers of their partitions, and each topic's keyless rotation.
#[derive(Default)]
pub struct TopicViews {
    indexes: Mutex<HashMap<MergeKey, Weak<MergeIndex>>>,
    rotations: Mutex<HashMap<String, Arc<KeylessRotation>>>,
    /// The isolation level of every stream opened, and the partitions' trackers.
    txns: Arc<TxnTrackers>,
}

impl std::fmt::Debug for TopicViews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicViews").field("indexes", &lock(&self.indexes).len()).finish()
    }
}

impl TopicViews {
    /// Empty, streams showing committed records ([`Isolation::ReadCommitted`]).
    pub fn new() -> TopicViews {
        TopicViews::default()
    }

    /// Empty, streams at `isolation` (see the module docs).
    pub fn with_isolation(isolation: Isolation) -> TopicViews {
        TopicViews { txns: Arc::new(TxnTrackers::new(isolation)), ..TopicViews::default() }
    }

    /// The isolation level of every stream these views open.
    pub fn isolation(&self) -> Isolation {
        self.txns.isolation()
    }

    /// Opens `<topic>/by-time/<spec>`: resolves `spec` against every partition at `now` (epoch
    /// ms, the anchor of relative times). `NotFound` for an unknown topic; `Unsupported` for a
    /// `.raw` spec.
    pub fn open_stream(
        &self,
        source: Arc<dyn TopicSource>,
        topic: &str,
        spec: &StreamSpec,
        now: Timestamp,
    ) -> Result<Arc<TopicStream>> {
        if spec.format == Format::Raw {
            return Err(Error::Unsupported("a topic-level .raw stream"));
        }
        let mut members = Vec::new();
        for p in source.partitions(topic)? {
            let part = source.partition(topic, p)?;
            members.push(Member::resolve(part, &self.txns, spec, now)?);
        }
        let key = MergeKey {
            topic: topic.to_string(),
            format: spec.format,
            members: members.iter().map(|m| (m.part.partition(), m.resolved)).collect(),
        };
        let mut indexes = lock(&self.indexes);
        let index = match indexes.get(&key).and_then(Weak::upgrade) {
            Some(index) => index,
            None => {
                indexes.retain(|_, w| w.strong_count() > 0);
                let txns = Arc::clone(&self.txns);
                let index = Arc::new(MergeIndex::new(source, txns, topic, *spec, now, members));
                indexes.insert(key, Arc::downgrade(&index));
                index
            }
        };
        Ok(Arc::new(TopicStream { index, resume: Mutex::new(None) }))
    }

    /// The appender of `topic`'s `append` files (sharing the topic's keyless rotation).
    pub fn appender(&self, source: Arc<dyn TopicSource>, topic: &str) -> TopicAppender {
        let rotation = Arc::clone(lock(&self.rotations).entry(topic.to_string()).or_default());
        TopicAppender { source, topic: topic.to_string(), rotation }
    }
}

// ---- members and cursors ----------------------------------------------------------------------

/// One partition of a merged stream.
#[derive(Clone)]
struct Member {
    /// The partition as stored: batches are read from it.
    part: Arc<dyn PartitionSource>,
    /// The partition at the stream's isolation: in `read_committed` a [`CommittedPartition`]
    /// (its log end offset is the last stable offset), which times resolve against.
    view: Arc<dyn PartitionSource>,
    /// The partition's transaction tracker (`read_committed`); `None` shows every record.
    txn: Option<Arc<TxnTracker>>,
    renderer: Renderer,
    /// The partition's stream as resolved when it joined.
    resolved: Resolved,
    /// Where its records start.
    start: MemberCursor,
}

impl Member {
    fn resolve(
        part: Arc<dyn PartitionSource>,
        txns: &TxnTrackers,
        spec: &StreamSpec,
        now: Timestamp,
    ) -> Result<Member> {
        let txn = txns.tracker(part.as_ref());
        let view: Arc<dyn PartitionSource> = match &txn {
            Some(tracker) => {
                Arc::new(CommittedPartition::new(Arc::clone(&part), Arc::clone(tracker)))
            }
            None => Arc::clone(&part),
        };
        let resolved = spec.resolve(view.as_ref(), now)?;
        let start = MemberCursor { from: view.seek(resolved.start)?, next: resolved.start };
        let renderer = Renderer::new(spec.format, part.topic(), part.partition());
        Ok(Member { part, view, txn, renderer, resolved, start })
    }

    /// The end offset of this member's records as far as it exists now: the log end offset
    /// (the last stable offset in `read_committed`), capped by its end bound (an
    /// `UntilTimestamp` bound is fixed as soon as a record reaches the time). Also returns
    /// whether that end is final.
    fn end_now(&self) -> Result<(Offset, bool)> {
        let log_end = self.view.summary()?.log_end_offset;
        let start = self.resolved.start;
        match self.resolved.end {
            Bound::Open => Ok((log_end.max(start), false)),
            Bound::Fixed(e) => Ok((e.min(log_end).max(start), log_end >= e)),
            Bound::UntilTimestamp(t) => {
                let o = self.view.offset_for(OffsetQuery::Timestamp(t))?;
                if o < log_end { Ok((o.max(start), true)) } else { Ok((log_end.max(start), false)) }
            }
        }
    }
}

/// Where one partition's merge continues.
///
/// **Invariant**: `from` is a batch boundary at or before the batch holding `next`, and every
/// record of that partition's stream below `next` was merged before this cursor.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MemberCursor {
    /// A batch boundary to read from.
    pub from: ReadCursor,
    /// The offset of the next record to merge (records below it are skipped).
    pub next: Offset,
}

/// A place in a merged stream: see the invariant in the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeCheckpoint {
    /// Rendered bytes before this point.
    pub position: u64,
    /// The round this point lies in (the index into the rounds).
    pub round: usize,
    /// One cursor per partition that had joined by then, in member order.
    pub cursors: Arc<Vec<MemberCursor>>,
}

/// One round: the end offsets (exclusive) each member is merged up to.
#[derive(Clone, Debug)]
struct Round {
    /// One per member that had joined when the round started.
    targets: Arc<Vec<Offset>>,
}

/// The mutable part of a merge index.
struct MergeState {
    members: Vec<Member>,
    rounds: Vec<Round>,
    /// Sparse, ascending by position; the first is the start of the stream.
    checkpoints: Vec<MergeCheckpoint>,
    /// Where the last round ended.
    frontier: MergeCheckpoint,
    interval: u64,
    /// Every member's end is final and reached: nothing will ever be added.
    complete: bool,
}

impl MergeState {
    fn push(&mut self, c: MergeCheckpoint) {
        if self.checkpoints.last().is_some_and(|last| last.position >= c.position) {
            return;
        }
        self.checkpoints.push(c);
        if self.checkpoints.len() > MAX_MERGE_CHECKPOINTS {
            let mut keep = false;
            let first = self.checkpoints.first().map(|c| c.position);
            self.checkpoints.retain(|c| {
                keep = !keep;
                keep || Some(c.position) == first
            });
            self.interval = self.interval.saturating_mul(2);
        }
    }

    /// The last checkpoint (frontier included) at or before rendered position `p`.
    fn floor(&self, p: u64) -> Option<MergeCheckpoint> {
        if self.frontier.position <= p {
            return Some(self.frontier.clone());
        }
        let i = self.checkpoints.partition_point(|c| c.position <= p);
        i.checked_sub(1).and_then(|i| self.checkpoints.get(i)).cloned()
    }
}

/// The shared index of one resolved topic-level stream (see the module docs).
pub struct MergeIndex {
    source: Arc<dyn TopicSource>,
    /// The mount's isolation and trackers, for partitions joining later.
    txns: Arc<TxnTrackers>,
    topic: String,
    spec: StreamSpec,
    /// The anchor of relative times, for partitions joining later.
    now: Timestamp,
    state: Mutex<MergeState>,
}

impl MergeIndex {
    fn new(
        source: Arc<dyn TopicSource>,
        txns: Arc<TxnTrackers>,
        topic: &str,
        spec: StreamSpec,
        now: Timestamp,
        members: Vec<Member>,
    ) -> MergeIndex {
        let cursors = Arc::new(members.iter().map(|m| m.start).collect());
        let origin = MergeCheckpoint { position: 0, round: 0, cursors };
        let state = MergeState {
            members,
            rounds: Vec::new(),
            checkpoints: vec![origin.clone()],
            frontier: origin,
            interval: MERGE_CHECKPOINT_INTERVAL,
            complete: false,
        };
        let topic = topic.to_string();
        MergeIndex { source, txns, topic, spec, now, state: Mutex::new(state) }
    }

    /// Starts a round if any partition has records the stream does not hold yet; returns the
    /// stream's length (rendered bytes of every round).
    fn extend(&self) -> Result<u64> {
        let mut st = lock(&self.state);
        if st.complete {
            return Ok(st.frontier.position);
        }
        self.join_new_partitions(&mut st)?;
        let mut targets = Vec::with_capacity(st.members.len());
        let mut all_final = true;
        for m in &st.members {
            let (end, is_final) = m.end_now()?;
            all_final &= is_final;
            targets.push(end);
        }
        let previous = st.rounds.last().map(|r| Arc::clone(&r.targets));
        // Ends never move back: a log that shrank below them is a rebuilt log.
        if let Some(prev) = &previous {
            if targets.iter().zip(prev.iter()).any(|(now, before)| now < before) {
                return Err(Error::StaleHandle);
            }
        }
        let grew = match &previous {
            None => true,
            Some(prev) => prev.len() != targets.len() || prev.iter().ne(targets.iter()),
        };
        if grew {
            let targets = Arc::new(targets);
            let round_index = st.rounds.len();
            let mut walk = MergeWalk::new(&st.members, &st.frontier, Arc::clone(&targets))?;
            let mut since = 0u64;
            while let Some(n) = walk.step(None)? {
                since = since.saturating_add(n);
                if since >= st.interval {
                    since = 0;
                    st.push(walk.checkpoint(round_index));
                }
            }
            st.rounds.push(Round { targets });
            st.frontier = walk.checkpoint(round_index.saturating_add(1));
        }
        st.complete = all_final;
        Ok(st.frontier.position)
    }

    /// Adds partitions created since the stream was opened (while it can still grow).
    fn join_new_partitions(&self, st: &mut MergeState) -> Result<()> {
        let partitions = self.source.partitions(&self.topic)?;
        if partitions.len() <= st.members.len() {
            return Ok(());
        }
        for p in partitions {
            if st.members.iter().any(|m| m.part.partition() == p) {
                continue;
            }
            let part = self.source.partition(&self.topic, p)?;
            st.members.push(Member::resolve(part, &self.txns, &self.spec, self.now)?);
        }
        Ok(())
    }
}

// ---- the merge walk ---------------------------------------------------------------------------

/// A record waiting in a member's buffer: its rendered bytes are `rendered[span]`.
struct Pending {
    offset: Offset,
    timestamp: Timestamp,
    span: Range<usize>,
}

/// Reads one member's records forward from a cursor, rendering them one chunk at a time.
struct MemberReader {
    part: Arc<dyn PartitionSource>,
    /// The partition's transaction tracker (`read_committed`).
    txn: Option<Arc<TxnTracker>>,
    renderer: Renderer,
    /// The cursor the buffered chunk was read from (a batch boundary before the head).
    from: ReadCursor,
    /// The head's offset: records below it are merged already.
    next: Offset,
    /// Records of the buffered chunk at or after `next`, in log order.
    pending: VecDeque<Pending>,
    rendered: Vec<u8>,
    /// Where the next chunk is read from once `pending` is empty.
    after_chunk: Option<ReadCursor>,
    /// Records at or after this offset belong to a later round.
    target: Offset,
    /// The log ended before `target` (deleted or truncated meanwhile).
    at_end: bool,
    /// `read_committed`: the buffered chunk was cut at this batch, at or past the stable
    /// offset of the last read (`after_chunk` then re-reads the chunk once `target` passes it).
    cut: Option<Offset>,
}

impl MemberReader {
    fn new(member: &Member, cursor: MemberCursor, target: Offset) -> MemberReader {
        MemberReader {
            part: Arc::clone(&member.part),
            txn: member.txn.clone(),
            renderer: member.renderer.clone(),
            from: cursor.from,
            next: cursor.next,
            pending: VecDeque::new(),
            rendered: Vec::new(),
            after_chunk: Some(cursor.from),
            target,
            at_end: false,
            cut: None,
        }
    }

    fn cursor(&self) -> MemberCursor {
        MemberCursor { from: self.from, next: self.next }
    }

    /// Timestamp of the next record below `target`, reading chunks as needed.
    fn head(&mut self) -> Result<Option<Timestamp>> {
        loop {
            if let Some(p) = self.pending.front() {
                return Ok((p.offset < self.target).then_some(p.timestamp));
            }
            let cut = self.cut.is_some_and(|c| c >= self.target);
            if self.next >= self.target || self.at_end || cut {
                return Ok(None);
            }
            let Some(cursor) = self.after_chunk else {
                self.at_end = true;
                return Ok(None);
            };
            self.fill(cursor)?;
        }
    }

    /// The transaction state to render with (`read_committed`): one whose stable offset is at
    /// least `target`, which was at most the stable offset when the round started.
    fn snapshot(&self) -> Result<Option<TxnSnapshot>> {
        let Some(tracker) = &self.txn else { return Ok(None) };
        let snapshot = tracker.snapshot();
        if snapshot.stable >= self.target {
            return Ok(Some(snapshot));
        }
        let snapshot = tracker.refresh(self.part.as_ref())?;
        if snapshot.stable < self.target {
            // The log was truncated or rebuilt below the round's end: its bytes are gone.
            return Err(Error::StaleHandle);
        }
        Ok(Some(snapshot))
    }

    /// Reads and renders the chunk at `cursor`: its records at or after `next`, skipping
    /// control batches and, in `read_committed`, aborted batches; it stops at the first batch
    /// at or past the stable offset.
    fn fill(&mut self, cursor: ReadCursor) -> Result<()> {
        let txn = self.snapshot()?;
        let chunk = self.part.read(&cursor, MEMBER_READ_CHUNK).map_err(retention_is_stale)?;
        self.from = cursor;
        self.rendered.clear();
        self.cut = None;
        if chunk.bytes.is_empty() {
            self.at_end = true;
            return Ok(());
        }
        self.after_chunk = chunk.next;
        let mut at = 0usize;
        // Where the chunk's first run starts (the source's place, for error messages).
        let first = chunk.starts.first().map_or(cursor, |s| s.cursor);
        while let Some(rest) = chunk.bytes.get(at..).filter(|r| !r.is_empty()) {
            let corrupt = |e: DecodeError| {
                let delta = (at as u64).saturating_add(e.at as u64);
                let (place, position) = self.part.byte_location(&first, delta);
                Error::corrupt(place, position, e.to_string())
            };
            let Some(header) = peek_entry(rest).map_err(corrupt)? else { break };
            if txn.as_ref().is_some_and(|t| header.offset >= t.stable) {
                // Whether this batch is aborted is not known yet (the stable offset is a batch
                // boundary, so the header offset decides). Records already buffered stay; the
                // chunk is read again, from its start, once the stable offset moved on.
                self.cut = Some(header.offset);
                self.after_chunk = Some(cursor);
                break;
            }
            let len = header.total_size();
            let entry = rest.get(..len).unwrap_or(rest);
            let batch = decode_batch(entry).map_err(corrupt)?;
            let hidden =
                batch.info().is_control || txn.as_ref().is_some_and(|t| t.is_aborted(batch.info()));
            if !hidden {
                for record in batch.records() {
                    let record = record.map_err(corrupt)?;
                    if record.offset < self.next {
                        continue;
                    }
                    let begin = self.rendered.len();
                    self.renderer.render(batch.info(), &record, &mut self.rendered);
                    let span = begin..self.rendered.len();
                    self.pending.push_back(Pending {
                        offset: record.offset,
                        timestamp: record.timestamp,
                        span,
                    });
                }
            }
            at = at.saturating_add(len);
        }
        if self.pending.is_empty() {
            // Nothing left in this chunk: the next read starts after it.
            if let Some(next) = self.after_chunk {
                self.from = next;
            }
        }
        Ok(())
    }

    /// Takes the head record (after [`MemberReader::head`] answered `Some`).
    fn pop(&mut self) -> Option<(Range<usize>, Offset)> {
        let p = self.pending.pop_front()?;
        self.next = p.offset.plus(1);
        if self.pending.is_empty() {
            if let Some(next) = self.after_chunk {
                self.from = next;
            }
        }
        Some((p.span, p.offset))
    }
}

/// Reading a partition that retention shrank under the stream: the bytes are gone.
fn retention_is_stale(e: Error) -> Error {
    match e {
        Error::OffsetOutOfRange { .. } | Error::NotFound(_) => Error::StaleHandle,
        other => other,
    }
}

/// A k-way merge of members' records within one round's targets.
struct MergeWalk {
    readers: Vec<MemberReader>,
    /// Members with a head below their target, keyed by (timestamp, member index): ties go to
    /// the lower partition (members are in partition order).
    heap: BinaryHeap<Reverse<(Timestamp, usize)>>,
    position: u64,
}

impl MergeWalk {
    /// A walk from `from` over the round whose targets are `targets` (members that joined after
    /// `from` start at their own start cursor).
    fn new(members: &[Member], from: &MergeCheckpoint, targets: Arc<Vec<Offset>>) -> Result<Self> {
        let mut walk =
            MergeWalk { readers: Vec::new(), heap: BinaryHeap::new(), position: from.position };
        for (i, member) in members.iter().enumerate() {
            let cursor = from.cursors.get(i).copied().unwrap_or(member.start);
            let target = targets.get(i).copied().unwrap_or(cursor.next);
            walk.readers.push(MemberReader::new(member, cursor, target));
        }
        walk.fill_heap()?;
        Ok(walk)
    }

    fn fill_heap(&mut self) -> Result<()> {
        self.heap.clear();
        for (i, r) in self.readers.iter_mut().enumerate() {
            if let Some(ts) = r.head()? {
                self.heap.push(Reverse((ts, i)));
            }
        }
        Ok(())
    }

    /// Moves on to the next round: new targets (and members that joined).
    fn next_round(&mut self, members: &[Member], targets: &[Offset]) -> Result<()> {
        for (i, member) in members.iter().enumerate().take(targets.len()) {
            if i >= self.readers.len() {
                self.readers.push(MemberReader::new(member, member.start, member.start.next));
            }
        }
        for (r, t) in self.readers.iter_mut().zip(targets) {
            r.target = *t;
        }
        self.fill_heap()
    }

    /// Merges the next record: appends its bytes to `out` when given, returns its length; `None`
    /// when the round is done.
    fn step(&mut self, out: Option<&mut Vec<u8>>) -> Result<Option<u64>> {
        let Some(Reverse((_, i))) = self.heap.pop() else { return Ok(None) };
        let Some(reader) = self.readers.get_mut(i) else { return Ok(None) };
        let Some((span, _)) = reader.pop() else { return Ok(None) };
        let bytes = reader.rendered.get(span).unwrap_or_default();
        let n = bytes.len() as u64;
        if let Some(out) = out {
            out.extend_from_slice(bytes);
        }
        self.position = self.position.saturating_add(n);
        if let Some(ts) = reader.head()? {
            self.heap.push(Reverse((ts, i)));
        }
        Ok(Some(n))
    }

    fn checkpoint(&self, round: usize) -> MergeCheckpoint {
        MergeCheckpoint {
            position: self.position,
            round,
            cursors: Arc::new(self.readers.iter().map(MemberReader::cursor).collect()),
        }
    }
}

// ---- the stream -------------------------------------------------------------------------------

/// `<topic>/by-time/<spec>`: the merged records of every partition, with an exact size that
/// only grows. Cheap to open; `Send + Sync`.
pub struct TopicStream {
    index: Arc<MergeIndex>,
    /// Where this stream's last read stopped (a sequential reader resumes there).
    resume: Mutex<Option<Resume>>,
}

impl std::fmt::Debug for TopicStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicStream")
            .field("topic", &self.index.topic)
            .field("spec", &self.index.spec)
            .finish()
    }
}

impl TopicStream {
    /// The topic.
    pub fn topic(&self) -> &str {
        &self.index.topic
    }

    /// Exactly the number of bytes a full read returns now (starts a round if records arrived).
    pub fn size(&self) -> Result<u64> {
        self.index.extend()
    }

    /// Whether the stream is a range whose every partition reached its end: size and bytes never
    /// change again.
    pub fn is_complete(&self) -> bool {
        lock(&self.index.state).complete
    }

    /// Per partition, the first offset of its records in this stream (in partition order).
    pub fn starts(&self) -> Vec<(u32, Offset)> {
        let st = lock(&self.index.state);
        st.members.iter().map(|m| (m.part.partition(), m.resolved.start)).collect()
    }

    /// Reads up to `len` bytes at `offset`: exactly the bytes a full read has there (fewer at
    /// the current end, none past it).
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let to = offset.saturating_add(len as u64);
        let length = lock(&self.index.state).frontier.position;
        let length = if to > length { self.index.extend()? } else { length };
        let to = to.min(length);
        if offset >= to {
            return Ok(Vec::new());
        }
        let want = usize::try_from(to - offset).unwrap_or(usize::MAX);
        // A sequential read continues the previous read's merge where it stopped.
        let resumed = lock(&self.resume).take().filter(|r| r.at == offset);
        let (mut walk, mut round, mut out) = match resumed {
            Some(mut r) if r.carry.len() >= want => {
                let rest = r.carry.split_off(want);
                let out = std::mem::replace(&mut r.carry, rest);
                r.at = to;
                *lock(&self.resume) = Some(r);
                return Ok(out);
            }
            Some(r) => (r.walk, r.round, r.carry),
            None => {
                let (from, members, targets) = {
                    let st = lock(&self.index.state);
                    let c = st.floor(offset).ok_or(Error::StaleHandle)?;
                    let targets = st.rounds.get(c.round).map(|r| Arc::clone(&r.targets));
                    (c, st.members.clone(), targets)
                };
                let Some(targets) = targets else { return Ok(Vec::new()) };
                let round = from.round;
                (MergeWalk::new(&members, &from, targets)?, round, Vec::new())
            }
        };
        let (members, later) = {
            let st = lock(&self.index.state);
            let later: Vec<Round> =
                st.rounds.get(round.saturating_add(1)..).unwrap_or_default().to_vec();
            (st.members.clone(), later)
        };
        let mut later = later.into_iter();
        let mut scratch = Vec::new();
        while walk.position < to {
            let before = walk.position;
            let stepped = if before >= offset {
                walk.step(Some(&mut out))?
            } else {
                scratch.clear();
                let stepped = walk.step(Some(&mut scratch))?;
                // A record straddling the window start.
                if walk.position > offset {
                    let skip = usize::try_from(offset - before).unwrap_or(usize::MAX);
                    out.extend_from_slice(scratch.get(skip..).unwrap_or_default());
                }
                stepped
            };
            if stepped.is_none() {
                // This round is done: on to the next one, if it started.
                let Some(next) = later.next() else { break };
                round = round.saturating_add(1);
                walk.next_round(&members, &next.targets)?;
            }
        }
        let carry = out.split_off(want.min(out.len()));
        *lock(&self.resume) = Some(Resume { walk, round, carry, at: to });
        Ok(out)
    }
}

/// Where a stream's last read stopped: its merge, and the rendered bytes it produced past the
/// end of the window (the rest of a record cut by the window), at rendered position `at`.
struct Resume {
    walk: MergeWalk,
    round: usize,
    carry: Vec<u8>,
    at: u64,
}
