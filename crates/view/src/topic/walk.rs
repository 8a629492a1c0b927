//! The merge walk: reading each member's records and merging them within a round's targets.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use super::MEMBER_READ_CHUNK;
use super::member::{Member, MemberCursor, MergeCheckpoint};
use crate::render::Renderer;
use crate::txn::{TxnSnapshot, TxnTracker};
use topicfs_format::{DecodeError, Offset, Timestamp, decode_batch, peek_entry};
use topicfs_source::error::{Error, Result};
use topicfs_source::{PartitionSource, ReadCursor, TopicSource};

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

    /// Whether [`MemberReader::head`] reads a chunk now, and from where.
    fn fill_from(&self) -> Option<ReadCursor> {
        let cut = self.cut.is_some_and(|c| c >= self.target);
        let waits = self.pending.is_empty() && self.next < self.target && !self.at_end && !cut;
        self.after_chunk.filter(|_| waits)
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
        let chunk = self
            .part
            .read(&cursor, MEMBER_READ_CHUNK, topicfs_source::ReadMode::Batches)
            .and_then(topicfs_source::ReadAnswer::into_chunk)
            .map_err(retention_is_stale)?;
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

/// Members whose next chunks are asked of the source at once ([`TopicSource::prefetch`]) at
/// most: with reads of 64 KiB, 8 MiB of a cluster's answers kept at a time.
const PREFETCH_BATCH: usize = 128;

/// A k-way merge of members' records within one round's targets.
pub(super) struct MergeWalk {
    /// The topic's source: members' chunks are asked of it at once where it can.
    source: Arc<dyn TopicSource>,
    topic: Arc<str>,
    readers: Vec<MemberReader>,
    /// Members with a head below their target, keyed by (timestamp, member index): ties go to
    /// the lower partition (members are in partition order).
    heap: BinaryHeap<Reverse<(Timestamp, usize)>>,
    pub(super) position: u64,
}

impl MergeWalk {
    /// A walk from `from` over the round whose targets are `targets` (members that joined after
    /// `from` start at their own start cursor).
    pub(super) fn new(
        source: Arc<dyn TopicSource>,
        topic: Arc<str>,
        members: &[Member],
        from: &MergeCheckpoint,
        targets: Arc<Vec<Offset>>,
    ) -> Result<Self> {
        let mut walk = MergeWalk {
            source,
            topic,
            readers: Vec::new(),
            heap: BinaryHeap::new(),
            position: from.position,
        };
        for (i, member) in members.iter().enumerate() {
            let cursor = from.cursors.get(i).copied().unwrap_or(member.start);
            let target = targets.get(i).copied().unwrap_or(cursor.next);
            walk.readers.push(MemberReader::new(member, cursor, target));
        }
        walk.fill_heap()?;
        Ok(walk)
    }

    /// Every member's head into the heap. The members that read a chunk for it are asked of
    /// the source [`PREFETCH_BATCH`] at a time just before they read (a cluster: one Fetch
    /// per broker for the batch instead of one per partition); the reads are the same either
    /// way.
    fn fill_heap(&mut self) -> Result<()> {
        self.heap.clear();
        let waiting: Vec<(usize, u32, ReadCursor)> = self
            .readers
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.fill_from().map(|c| (i, r.part.partition(), c)))
            .collect();
        let mut batches = waiting.chunks(PREFETCH_BATCH).peekable();
        for i in 0..self.readers.len() {
            if let Some(batch) = batches.next_if(|b| b.first().is_some_and(|w| w.0 == i)) {
                let reads: Vec<(u32, ReadCursor)> = batch.iter().map(|w| (w.1, w.2)).collect();
                if let Err(e) = self.source.prefetch(&self.topic, &reads) {
                    log::debug!("{}: reading {} partitions at once: {e}", self.topic, reads.len());
                }
            }
            let Some(r) = self.readers.get_mut(i) else { break };
            if let Some(ts) = r.head()? {
                self.heap.push(Reverse((ts, i)));
            }
        }
        Ok(())
    }

    /// Moves on to the next round: new targets (and members that joined).
    pub(super) fn next_round(&mut self, members: &[Member], targets: &[Offset]) -> Result<()> {
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
    pub(super) fn step(&mut self, out: Option<&mut Vec<u8>>) -> Result<Option<u64>> {
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

    pub(super) fn checkpoint(&self, round: usize) -> MergeCheckpoint {
        MergeCheckpoint {
            position: self.position,
            round,
            cursors: Arc::new(self.readers.iter().map(MemberReader::cursor).collect()),
        }
    }
}
