//! The render index: a sparse map from offsets to rendered positions of one partition in one
//! format, shared by every [`crate::stream::Stream`] of it.
//!
//! [`RenderIndex`] is shared by every stream of one (topic, partition, format) through the
//! [`StreamRegistry`](crate::stream::StreamRegistry). It is a sparse list of [`Checkpoint`]s
//! (a cursor at a batch boundary, the offset bound at that cursor, and the rendered position
//! there): one at every retention boundary it has seen (a segment start, as the source marks it in
//! [`ChunkStart`](topicfs_source::ChunkStart)), and one every [`CHECKPOINT_INTERVAL`] bytes of log
//! between them, up to [`MAX_CHECKPOINTS`] (then every other interval checkpoint is dropped and the
//! interval doubles, so memory stays bounded whatever the partition's size). The last checkpoint,
//! the *frontier*, is where rendering stopped; extending the index renders only the batches after
//! it, counting bytes without keeping them. Finding a rendered position, or reading a window,
//! renders forward from the nearest checkpoint at or before it: at most one interval of log plus
//! the window. `tail -n 10` on a large partition therefore costs one interval, not the whole
//! partition, once the index exists; building the index renders each batch once per format.
//!
//! **Invariant** (of every checkpoint `c`): `c.cursor` is a batch boundary; every batch before it
//! holds only offsets `< c.bound`, every batch at or after it only offsets `>= c.bound`; and
//! `c.position` is the rendered size of everything before `c.cursor` since the origin.
//! Checkpoints are ordered by bound and position alike (and by cursor: cursors order by offset
//! bound, their opaque source hint only breaking ties). The index never reads a cursor's hint:
//! the walker moves cursors with
//! [`ReadCursor::after_batch`](topicfs_source::ReadCursor::after_batch) inside a run of a chunk
//! and takes the source's cursor at each [`ChunkStart`](topicfs_source::ChunkStart), so a
//! checkpoint is always a cursor the source made, valid for [`PartitionSource::read`].
//!
//! Each [`Stream`](crate::stream::Stream) also remembers where its last read stopped (a
//! checkpoint of its own), and in the record formats the rest of the rendering of the batch it
//! stopped inside, so a sequential reader (`cat`, `tail -f`) continues from there instead of
//! searching, and reads, checks and decodes every batch once.
//!
//! # Origins, sizing budget, and reads that extend the index
//!
//! The shared index of a (topic, partition, format) has its origin at the log start. Extending
//! it to a far offset renders everything before that offset, so it is extended only by a bounded
//! amount per call: `RenderIndex::extend_within` with the source's
//! [`sizing_budget`](topicfs_source::Known::sizing_budget) answers "not reached yet" instead of
//! rendering more (a `stat` then shows a size not yet known; the next one continues from the
//! frontier). A stream starting farther past the shared frontier than the budget is opened on an
//! index whose origin is its own start ([`RenderIndex::new_at`], kept by the
//! [`StreamRegistry`](crate::stream::StreamRegistry)): its rendered positions count from the
//! start of the batch holding that offset, and the invariant below holds for it unchanged (a
//! stream only ever subtracts positions of one index). Reads hand what they rendered past the
//! frontier back to the index (`Learned`), so a sequential read to the end leaves the frontier
//! at the end without a second rendering.
//!
//! Ready for what comes next (issue 17): the checkpoints of sealed segments are plain data (a
//! cursor, a bound, a position), so a persistent cache can seed an index with them, and
//! background sizing is `RenderIndex::extend_within` called off the request path.
//!
//! # Background sizing yields to requests
//!
//! Background sizing ([`RenderIndex::size_step`]) renders under the index's lock like a
//! request, but it never holds a request back for more than one batch: every request that
//! locks the index (opens, stats, reads: [`RenderIndex::lock_state`]) counts itself in
//! `requests` while it waits or holds the lock; a step stops at the first batch boundary after
//! its first batch while one does, and takes the lock again only once none does (waiting at
//! most [`BACKGROUND_PATIENCE`], then rendering one batch before it looks again). The lock alone
//! would not do: it is not fair, and a step that releases it and takes it again at once can
//! keep a waiting `stat` out for the whole sizing (issue #47: a cold `stat` of a JSON stream in
//! the middle of a 74 MB segment waited 0.4 s for the sizing it had left to the background).
//!
//! # Retention
//!
//! Rendered positions of a stream never change, so its size never shrinks and `tail -f` keeps
//! following across retention. When retention deletes segments, the checkpoints inside them
//! (those the source no longer [`PartitionSource::holds`]: a prefix, since checkpoints are in
//! log order) are dropped; reading bytes of records that no longer exist fails with
//! [`Error::StaleHandle`](topicfs_source::error::Error::StaleHandle) (`ESTALE`), while later bytes remain readable. If retention overtakes
//! the whole index (its frontier is no longer held, and the log does not start exactly at the
//! frontier's bound) or the log shrinks below the frontier, the index is rebuilt from
//! the new log start under a new generation, and streams opened before fail with
//! [`Error::StaleHandle`](topicfs_source::error::Error::StaleHandle): reopening them gives consistent new positions.
//!
//! # Compaction
//!
//! A cleaner pass rewrites sealed segments in place, keeping the log start; the source counts
//! such passes ([`Known::rewrites`](topicfs_source::Known::rewrites)) and no longer holds a cursor into a segment it
//! replaced, but a read from one finds the place again by offset without an error. So the
//! index compares the count at every sync, and a stream at every window it renders (the only
//! check a read makes): when it moved, every checkpoint up to the last one not held is dropped
//! (held ones before it too: rendering from them would cross a replaced segment), and the
//! bytes before the first one left read as [`Error::StaleHandle`](topicfs_source::error::Error::StaleHandle), as after retention. What
//! is left renders as before: every segment the index rendered has a checkpoint at its start
//! (or the origin inside it), so no replaced segment lies after the first one left, and the
//! active segment is never cleaned, so `tail -f` goes on. When the frontier itself is not held
//! (it ended in a sealed segment the pass replaced) the index is rebuilt under a new
//! generation, as after retention. A stream opened after a pass at an offset before the
//! index's first checkpoint gets a new shared index from the log start
//! ([`StreamRegistry`](crate::stream::StreamRegistry)): it shows the compacted log
//! exactly. The count is read before the checkpoints are checked, and incremented under the
//! source's segment map lock, so a pass ending during a walk is seen by the next check; what a
//! read rendered while one ended is neither learned nor kept, and the window is rendered again.
//!

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::checkpoints::SparseCheckpoints;
use crate::render::Renderer;
use crate::spec::Format;
use crate::txn::TxnTracker;
pub use crate::walker::Checkpoint;
use crate::walker::READ_CHUNK;
use topicfs_format::Offset;
use topicfs_source::error::Result;
use topicfs_source::sync::lock;
use topicfs_source::{PartitionSource, ReadCursor, SealedSpan, SpanKind};

mod cache;
mod checkpoints;
mod locate;

/// Bytes of log between two interval checkpoints of a fresh render index.
pub const CHECKPOINT_INTERVAL: u64 = 64 * 1024;
/// Log bytes between the checkpoints a span's cached summary keeps (so reading from a place
/// inside a cached segment renders at most about this much before it).
pub const SUMMARY_SPACING: u64 = 256 << 10;
/// The render index's kind of payload in a [`SpanStore`](topicfs_source::SpanStore): a span's
/// renderings, per format ([`crate::summary`]), for sealed spans and stable prefixes.
/// The tags and names are those of the entries earlier versions wrote (`.render`, `.prefix`).
pub const RENDER_SUMMARY: SpanKind =
    SpanKind { name: "render", tag: 1, prefix: Some(("prefix", 4)), with_the_log: true };
/// Most whole spans waiting to be stored at once (more are learned again later).
const MAX_COMPLETED: usize = 4096;
/// Longest a step of background sizing waits for the requests waiting for or holding an
/// index's lock to be done before it takes the lock anyway (then it renders one batch and
/// looks again), so sizing still moves under requests that never pause.
pub const BACKGROUND_PATIENCE: Duration = Duration::from_millis(50);
/// Most checkpoints kept per render index before thinning (about 4 GiB of log at the initial
/// interval; 64 bytes each).
pub const MAX_CHECKPOINTS: usize = 64 * 1024;

/// The mutable part of a render index.
#[derive(Debug)]
pub(super) struct IndexState {
    /// Changes when the index is rebuilt; streams of an older generation are stale.
    generation: u64,
    /// Sparse checkpoints in order; never empty (the first is the origin or a segment start).
    checkpoints: SparseCheckpoints<Checkpoint>,
    /// Where rendering stopped.
    frontier: Checkpoint,
    /// Log bytes between interval checkpoints (doubles when thinning).
    interval: u64,
    /// Log bytes rendered since the last checkpoint.
    since_checkpoint: u64,
    /// The log start offset last seen.
    log_start: Offset,
    /// The source's [`Known::rewrites`](topicfs_source::Known::rewrites) when the checkpoints were last checked
    /// against it (read before they were: see "Compaction" in the module docs).
    rewrites: u64,
    /// Sealed spans (by base offset) whose summary in this format is known to be cached: taken
    /// from the cache or stored by this index (see "The segment cache" in the module docs).
    summarized: HashSet<Offset>,
    /// Spans rendered whole since the last store: (checkpoint at the start, checkpoint at the
    /// next span's start, the checkpoints between).
    completed: Vec<(Checkpoint, Checkpoint, Vec<Checkpoint>)>,
    /// The frontier cursor at which the segment cache was last asked for an active segment's
    /// prefix (asked once per place, not at every extension).
    prefix_tried: Option<ReadCursor>,
    /// The rendered position of the frontier when the active segment's prefix was last
    /// stored (see [`RenderIndex::store_prefix`]).
    prefix_stored: Option<u64>,
    /// The latest positions [`RenderIndex::locate`] walked to (at most [`LOCATED`]): the
    /// target, the checkpoint the walk started from, and the position found inside a batch
    /// the walk read. Valid while that checkpoint is the floor of the target: the bytes
    /// between a checkpoint and the frontier render the same until the index drops the
    /// checkpoint or is rebuilt (a new `IndexState`). So the lookup, `stat` and `open` of one
    /// `by-offset/N` read and count the batch holding `N` once, not once each.
    located: std::collections::VecDeque<(Target, Checkpoint, u64)>,
}

/// Positions [`IndexState::located`] keeps.
const LOCATED: usize = 32;

impl IndexState {
    /// The index's generation: it changes when the index is rebuilt (streams of an older one
    /// are stale).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Where rendering stopped.
    pub fn frontier(&self) -> Checkpoint {
        self.frontier
    }

    /// The first checkpoint (the origin, or the first segment start retention left of it).
    pub(crate) fn first_checkpoint(&self) -> Option<Checkpoint> {
        self.checkpoints.first().copied()
    }

    /// The first checkpoint whose rendered position is past `p`.
    pub(crate) fn checkpoint_after_position(&self, p: u64) -> Option<Checkpoint> {
        self.checkpoints.after(|k| k.position <= p).copied()
    }

    /// The source's [`PartitionSource::rewrites`] when the checkpoints were last checked
    /// against it.
    pub fn rewrites(&self) -> u64 {
        self.rewrites
    }
}

/// The shared sparse render index of one partition in one format (see the module docs).
pub struct RenderIndex {
    pub(super) renderer: Renderer,
    pub(super) state: Mutex<IndexState>,
    /// The partition's transaction state (`read_committed`); `None` shows every record.
    pub(super) txn: Option<Arc<TxnTracker>>,
    /// Made by [`RenderIndex::new_at`]: its origin may lie inside a batch, so it never stores
    /// an active segment's prefix from its origin.
    own_origin: bool,
    /// The last sizing to the log end ([`RenderIndex::end_position`] with a budget) stopped at
    /// the budget short of it; cleared when a sizing reaches the end. A `stat` of a stream
    /// ending at the log end then answers "not yet known" at once and leaves the next budget's
    /// sizing to the background ([`crate::stream::Stream::stat_size`]).
    pub(super) sizing_cut: AtomicBool,
    /// Requests waiting for or holding `state` ([`RenderIndex::lock_state`]): background
    /// sizing yields to them (see "Background sizing yields to requests" in the module docs).
    requests: AtomicUsize,
    /// Guards the wait for `requests` to drop to zero ([`RenderIndex::size_step`]).
    requests_mutex: Mutex<()>,
    /// Notified when `requests` drops to zero.
    requests_gone: Condvar,
}

/// The index's state locked by a request ([`RenderIndex::lock_state`]): counted in the
/// index's `requests` until dropped.
pub(crate) struct StateGuard<'a> {
    state: MutexGuard<'a, IndexState>,
    index: &'a RenderIndex,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = IndexState;
    fn deref(&self) -> &IndexState {
        &self.state
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut IndexState {
        &mut self.state
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        // Before the lock itself is released (just after this): a step woken now waits for
        // that moment at most.
        if self.index.requests.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _waiting = lock(&self.index.requests_mutex);
            self.index.requests_gone.notify_all();
        }
    }
}

/// What one step of background sizing did ([`RenderIndex::size_step`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SizedStep {
    /// The index reached the log end.
    pub reached: bool,
    /// Log bytes of the step it used: all of them, unless it yielded to a request early (then
    /// the bytes it rendered).
    pub used: u64,
}

/// Where [`RenderIndex::extend_yielding`] stopped.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Extended {
    /// At the offset asked for, or the log end.
    There,
    /// The budget ran out first.
    OverBudget,
    /// It yielded to a request after rendering this many bytes of log.
    Yielded(u64),
}

/// What a locate walk looks for: the rendered position of the first unit that satisfies it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// Record formats: the first record with offset `>= x`.
    Record(Offset),
    /// Raw: the first batch whose last offset is `>= x` (the batch holding `x`).
    BatchHolding(Offset),
    /// Raw: the first batch whose base offset is `>= x`.
    BatchFrom(Offset),
}

impl Target {
    pub(super) fn offset(self) -> Offset {
        match self {
            Target::Record(x) | Target::BatchHolding(x) | Target::BatchFrom(x) => x,
        }
    }
}

impl RenderIndex {
    /// An index with one checkpoint: the log start offset at rendered position 0.
    pub fn new(part: &dyn PartitionSource, format: Format) -> Result<RenderIndex> {
        let renderer = Renderer::new(format, part.topic(), part.partition());
        let state = Mutex::new(IndexState::origin_at(part, 0, None)?);
        Ok(RenderIndex {
            renderer,
            state,
            txn: None,
            own_origin: false,
            sizing_cut: AtomicBool::new(false),
            requests: AtomicUsize::new(0),
            requests_mutex: Mutex::new(()),
            requests_gone: Condvar::new(),
        })
    }

    /// An index whose origin is `start` instead of the log start: rendered position 0 is the
    /// start of the batch holding `start` (see "Origins" in the module docs).
    pub fn new_at(
        part: &dyn PartitionSource,
        format: Format,
        start: Offset,
    ) -> Result<RenderIndex> {
        let renderer = Renderer::new(format, part.topic(), part.partition());
        let state = Mutex::new(IndexState::origin_at(part, 0, Some(start))?);
        Ok(RenderIndex {
            renderer,
            state,
            txn: None,
            own_origin: true,
            sizing_cut: AtomicBool::new(false),
            requests: AtomicUsize::new(0),
            requests_mutex: Mutex::new(()),
            requests_gone: Condvar::new(),
        })
    }

    /// The offset bound of the index's first checkpoint (its origin, or the first segment start
    /// retention left of it).
    pub fn origin(&self) -> Offset {
        let st = self.lock_state();
        st.checkpoints.first().map_or(st.frontier.bound, |c| c.bound)
    }

    /// [`RenderIndex::origin`] once the index has noticed the source's last rewrite of stored
    /// records: a cleaner pass drops the checkpoints of what it replaced, so the origin may
    /// move past offsets the log still holds (a stream starting there needs another index).
    /// Costs nothing more unless [`Known::rewrites`](topicfs_source::Known::rewrites) moved.
    pub fn origin_now(&self, part: &dyn PartitionSource) -> Result<Offset> {
        let mut st = self.lock_state();
        if part.known().rewrites != st.rewrites {
            self.sync(&mut st, part)?;
        }
        Ok(st.checkpoints.first().map_or(st.frontier.bound, |c| c.bound))
    }

    /// The offset bound the index has rendered up to (its frontier).
    pub fn frontier(&self) -> Offset {
        self.lock_state().frontier.bound
    }

    /// Whether the index reaches `start` (its frontier's bound is at or past it, or the log ends
    /// before it) after extending it by at most `budget` bytes of log: a stream starting at
    /// `start` can then be opened on it without rendering more.
    pub fn reaches(&self, part: &dyn PartitionSource, start: Offset, budget: u64) -> Result<bool> {
        let mut st = self.lock_state();
        self.sync(&mut st, part)?;
        if st.frontier.bound >= start {
            return Ok(true);
        }
        let reached = self.extend_within(&mut st, part, Some(start), Some(budget))?;
        Ok(reached || st.frontier.bound >= start)
    }

    /// Locks the index's state for a request (an open, `stat` or read): while the guard lives,
    /// and while it waits for the lock, background sizing yields (see "Background sizing
    /// yields to requests" in the module docs). Every lock but a sizing step's is taken so.
    pub(crate) fn lock_state(&self) -> StateGuard<'_> {
        self.requests.fetch_add(1, Ordering::AcqRel);
        StateGuard { state: lock(&self.state), index: self }
    }

    /// Requests waiting for or holding the index's lock now (for tests and statistics).
    pub fn requests_waiting(&self) -> usize {
        self.requests.load(Ordering::Acquire)
    }

    /// Waits until no request waits for or holds the index's lock, at most
    /// [`BACKGROUND_PATIENCE`].
    fn wait_for_requests(&self) {
        let deadline = Instant::now() + BACKGROUND_PATIENCE;
        let mut waiting = lock(&self.requests_mutex);
        while self.requests.load(Ordering::Acquire) > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            waiting = match self.requests_gone.wait_timeout(waiting, left) {
                Ok((w, _)) => w,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// One step of background sizing: extends the index towards the current log end by at most
    /// `step` bytes of log (sealed segments the segment cache knows cost nothing), holding the
    /// index's lock only for that step, so readers of anything else never wait for it. It
    /// yields to requests of this index (see "Background sizing yields to requests" in the
    /// module docs): it takes the lock once none waits, and stops at the first batch boundary
    /// after its first batch when one comes, so a request waits for at most one batch of it.
    pub fn size_step(&self, part: &dyn PartitionSource, step: u64) -> Result<SizedStep> {
        self.wait_for_requests();
        let mut st = lock(&self.state);
        self.sync(&mut st, part)?;
        let log_end = part.summary()?.log_end_offset;
        let extended = self.extend_yielding(&mut st, part, Some(log_end), Some(step), true)?;
        if extended == Extended::There {
            self.store_prefix(&mut st, part, 0);
        }
        Ok(match extended {
            Extended::There => SizedStep { reached: true, used: step },
            Extended::OverBudget => SizedStep { reached: false, used: step },
            Extended::Yielded(rendered) => SizedStep { reached: false, used: rendered },
        })
    }

    /// One step of summarizing the sealed span that ends before `end` (its last offset plus
    /// one) from this index's origin at its start ([`RenderIndex::new_at`]): extends by at most
    /// `step` bytes of log, up to the first batch after the span, where the next segment's
    /// start completes the span and its rendering goes to the segment cache. Whether it got
    /// there (or the log ended).
    pub fn summarize_step(
        &self,
        part: &dyn PartitionSource,
        end: Offset,
        step: u64,
    ) -> Result<bool> {
        let mut st = lock(&self.state);
        self.extend_within(&mut st, part, Some(end.plus(1)), Some(step))
    }

    /// Whether the segment cache holds the rendering of the sealed span `span` in this format
    /// (made with the current transaction state): summarizing it would add nothing.
    pub fn knows_span(&self, part: &dyn PartitionSource, span: &SealedSpan) -> bool {
        let snap = self.txn.as_ref().map(|t| t.snapshot());
        self.cached_summary(part, snap.as_ref(), span).is_some()
    }

    /// Takes in what a read rendered past the frontier (see [`Learned`]): its checkpoints and
    /// the batch boundary it reached become the index's, unless the index was rebuilt or another
    /// caller got as far meanwhile.
    pub(super) fn learn(&self, part: &dyn PartitionSource, learned: Learned) {
        let Some(reached) = learned.reached else { return };
        let mut st = self.lock_state();
        // A read that ran while the source rewrote records may have rendered some of them as
        // rewritten at positions counted on the old ones: nothing of it is learned.
        if st.generation != learned.generation
            || reached.bound <= st.frontier.bound
            || st.rewrites != learned.rewrites
            || part.known().rewrites != learned.rewrites
        {
            return;
        }
        let old = st.frontier;
        st.push(old);
        for c in learned.pending {
            // A segment start right after the old frontier has its bound (the end of the
            // segment before): kept, so that the segment's rendering is known whole.
            let after_old = c.bound > old.bound
                || (c.segment_start && c.bound == old.bound && c.cursor != old.cursor);
            if after_old && c.bound < reached.bound {
                st.push(c);
            }
        }
        st.frontier = reached;
        st.since_checkpoint = learned.since;
        let snap = self.txn.as_ref().map(|t| t.snapshot());
        self.store_completed(&mut st, part, snap.as_ref());
    }

    /// Number of checkpoints held (frontier excluded): for tests and statistics.
    pub fn checkpoint_count(&self) -> usize {
        self.lock_state().checkpoints.len()
    }

    /// Notices retention and truncation: drops checkpoints in deleted segments, rebuilds the
    /// index when its frontier is gone.
    pub(super) fn sync(&self, st: &mut IndexState, part: &dyn PartitionSource) -> Result<()> {
        let summary = part.summary()?;
        self.sync_to(st, part, summary.log_start_offset, summary.log_end_offset)
    }

    /// [`RenderIndex::sync`] against a log start and end offset the caller has (for the
    /// bounds a source last stated, [`Known::bounds`](topicfs_source::Known::bounds)).
    pub(super) fn sync_to(
        &self,
        st: &mut IndexState,
        part: &dyn PartitionSource,
        log_start: Offset,
        log_end: Offset,
    ) -> Result<()> {
        let rewrites = part.known().rewrites;
        if rewrites != st.rewrites {
            self.forget_rewritten(st, part, rewrites)?;
        }
        let frontier_lost = log_end < st.frontier.bound;
        if log_start > st.log_start || frontier_lost {
            st.log_start = log_start;
            if !frontier_lost && part.holds(&st.frontier.cursor)? {
                // Checkpoints are in log order: the deleted ones are a prefix.
                let mut dead = 0;
                for c in st.checkpoints.as_slice() {
                    if part.holds(&c.cursor)? {
                        break;
                    }
                    dead += 1;
                }
                st.checkpoints.drop_front(dead, st.frontier);
            } else if !frontier_lost && st.frontier.bound == st.log_start {
                // Retention deleted the frontier's segment too (a broker rolls, then deletes
                // every segment but the active one), but the log now starts exactly at the
                // frontier's bound: everything rendered is gone and nothing unrendered was
                // lost. The frontier moves to the log start, keeping its rendered position, so
                // open streams (`tail -f`) go on. (Had unrendered records been deleted, the
                // index is rebuilt: see below.)
                let cursor = part.seek(st.log_start)?;
                st.frontier = Checkpoint {
                    cursor,
                    bound: st.log_start,
                    position: st.frontier.position,
                    segment_start: true,
                };
                st.checkpoints.reset(st.frontier);
            } else {
                *st = IndexState::origin_at(part, st.generation.wrapping_add(1), None)?;
            }
        }
        Ok(())
    }

    /// After the source rewrote stored records in place (a cleaner pass: `rewrites`, read
    /// before this looks, differs from the index's): drops every checkpoint up to the last one
    /// the source no longer [`PartitionSource::holds`], or rebuilds the index under a new
    /// generation when the frontier is not held (see "Compaction" in the module docs).
    fn forget_rewritten(
        &self,
        st: &mut IndexState,
        part: &dyn PartitionSource,
        rewrites: u64,
    ) -> Result<()> {
        st.located.clear();
        if !part.holds(&st.frontier.cursor)? {
            *st = IndexState::origin_at(part, st.generation.wrapping_add(1), None)?;
            return Ok(());
        }
        let mut last_dead = None;
        for (i, c) in st.checkpoints.as_slice().iter().enumerate() {
            if !part.holds(&c.cursor)? {
                last_dead = Some(i);
            }
        }
        if let Some(i) = last_dead {
            // Held checkpoints before a replaced segment go too: rendering from them would
            // cross it. Every segment the index rendered has a checkpoint at its start (or its
            // origin inside it), so what is left renders exactly as it did.
            st.checkpoints.drop_front(i + 1, st.frontier);
            st.completed.clear();
        }
        // Keyed by base offset, which a replaced segment's output keeps.
        st.summarized.clear();
        st.rewrites = rewrites;
        Ok(())
    }

    /// Renders (counting only) from the frontier until its bound reaches `until`, or to the
    /// current end of the log when `until` is `None`, adding checkpoints on the way.
    pub(super) fn extend(
        &self,
        st: &mut IndexState,
        part: &dyn PartitionSource,
        until: Option<Offset>,
    ) -> Result<()> {
        self.extend_within(st, part, until, None).map(drop)
    }

    /// [`RenderIndex::extend`], rendering at most `budget` bytes of log (at least one batch
    /// when there is one) when given. Whether it got there: its bound reached `until`, or the
    /// log ended (`false`: the budget ran out first).
    pub(super) fn extend_within(
        &self,
        st: &mut IndexState,
        part: &dyn PartitionSource,
        until: Option<Offset>,
        budget: Option<u64>,
    ) -> Result<bool> {
        Ok(self.extend_yielding(st, part, until, budget, false)? == Extended::There)
    }

    /// [`RenderIndex::extend_within`], also stopping at the first batch boundary after its
    /// first batch while a request waits for the lock when `yields` (background sizing).
    fn extend_yielding(
        &self,
        st: &mut IndexState,
        part: &dyn PartitionSource,
        until: Option<Offset>,
        budget: Option<u64>,
        yields: bool,
    ) -> Result<Extended> {
        let snap = self.txn.as_ref().map(|t| t.snapshot());
        self.jump_cached(st, part, snap.as_ref());
        let mut w = self.walker(part, st.frontier);
        if let Some(b) = budget.filter(|&b| b < READ_CHUNK as u64) {
            // A small budget reads no more than it may render.
            w = w.with_read_size(b, 0);
        }
        let mut spent = 0u64;
        loop {
            if until.is_some_and(|u| w.here.bound >= u) {
                break;
            }
            // Over the budget, or about to read from the source more than it has left: a
            // budget of one read's worth costs one read of the source (one Fetch of a cluster).
            let over = |b: u64| {
                spent >= b || (w.needs_read() && spent.saturating_add(w.read_size as u64) > b)
            };
            let yielding = yields && self.requests.load(Ordering::Acquire) > 0;
            if spent > 0 && (yielding || budget.is_some_and(over)) {
                self.store_completed(st, part, snap.as_ref());
                return Ok(if yielding { Extended::Yielded(spent) } else { Extended::OverBudget });
            }
            let Some(step) = w.peek()? else { break };
            if w.at_retention_boundary && st.is_new_checkpoint(&w.here) {
                // A new segment: if the cache knows its rendering, skip to its end.
                if self.jump_cached(st, part, snap.as_ref()) {
                    w = self.walker(part, st.frontier);
                    continue;
                }
                let mut c = w.here;
                c.segment_start = true;
                st.push(c);
            }
            spent = spent.saturating_add(u64::from(step.info.size));
            let rendered = w.count_batch(&step, None)?;
            w.advance(&step, rendered);
            st.since_checkpoint = st.since_checkpoint.saturating_add(u64::from(step.info.size));
            if st.since_checkpoint >= st.interval {
                st.push(w.here);
            }
            st.frontier = w.here;
        }
        self.store_completed(st, part, snap.as_ref());
        Ok(Extended::There)
    }
}

/// What a stream's read rendered past its index's frontier, for [`RenderIndex::learn`]: reads
/// extend the index as they render, so a sequential read to the end makes sizes exact without
/// rendering the log a second time.
///
/// **Invariant**: every checkpoint in `pending` and `reached` was made by a walker of the
/// index's generation `generation` that started at one of its checkpoints, after whole batches
/// only (so it satisfies the index's invariant), with a bound past `from` (the frontier when the
/// read began) and at most `log_end` (a log end offset read before the batches were, as
/// [`RenderIndex::end_position`] requires of the frontier).
#[derive(Debug)]
pub(super) struct Learned {
    generation: u64,
    /// The index's [`IndexState::rewrites`] when the read began.
    rewrites: u64,
    from: Offset,
    log_end: Offset,
    interval: u64,
    since: u64,
    pending: Vec<Checkpoint>,
    reached: Option<Checkpoint>,
}

impl Learned {
    /// Starts learning for a read that may pass `st`'s frontier; `log_end` as read before the
    /// read's batches.
    pub(super) fn new(st: &IndexState, log_end: Offset) -> Learned {
        Learned {
            generation: st.generation,
            rewrites: st.rewrites,
            from: st.frontier.bound,
            log_end,
            interval: st.interval,
            since: st.since_checkpoint,
            pending: Vec::new(),
            reached: None,
        }
    }

    /// The log end offset read before the read's batches were (nothing past it is learned).
    pub(super) fn set_log_end(&mut self, log_end: Offset) {
        self.log_end = log_end;
    }

    /// The walker went from `before` (a retention boundary when `boundary`) past one whole
    /// batch of `size` stored bytes to `after`.
    pub(super) fn passed(
        &mut self,
        before: Checkpoint,
        boundary: bool,
        after: Checkpoint,
        size: u64,
    ) {
        if before.bound < self.from || after.bound > self.log_end {
            return;
        }
        if boundary {
            let mut c = before;
            c.segment_start = true;
            self.pending.push(c);
            self.since = 0;
        }
        self.since = self.since.saturating_add(size);
        if self.since >= self.interval {
            self.pending.push(after);
            self.since = 0;
        }
        self.reached = Some(after);
    }
}

impl std::fmt::Debug for RenderIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.lock_state();
        f.debug_struct("RenderIndex")
            .field("format", &self.renderer.format())
            .field("generation", &st.generation)
            .field("checkpoints", &st.checkpoints.len())
            .field("frontier", &st.frontier)
            .finish()
    }
}
