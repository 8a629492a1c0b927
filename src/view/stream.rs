//! Streams: `by-offset/` and `by-time/` files that behave like growing regular files.
//!
//! # Model
//!
//! A partition rendered in one format is a single, append-only byte sequence: the *rendering*
//! of every record (value lines, JSON) or every batch (raw) from the log start offset on, in log
//! order, control batches contributing nothing to the record formats. A *rendered position* is
//! a byte position in that sequence, counted from the *origin* of its render index (the log
//! start offset when the index was built). A stream for `[start, end)` is the slice of the
//! rendering between the rendered position of `start` and that of `end` (or the current end of
//! the rendering for an open stream), so
//!
//! * `size()` is exactly the number of bytes a full read returns at that moment (what `stat`
//!   shows, [`Stream::known_size`], is that or "not yet known" when reaching the end would
//!   render more than the source's sizing budget), and
//! * a read at file offset `X` is the rendering at rendered position `start_position + X`.
//!
//! For the record formats the rendered position of offset `x` is the number of rendered bytes of
//! all records with offsets below `x`. For raw streams the units are whole batches: a stream
//! starts at the batch holding `start` (the first batch whose last offset is `>= start`) and ends
//! after the last batch holding an offset below `end` (before the first batch whose base offset
//! is `>= end`); a raw stream may therefore hold records outside `[start, end)`, as a Kafka Fetch
//! response does. An empty range is empty in every format.
//!
//! # The render index and retention
//!
//! Every stream of one (topic, partition, format) shares one sparse render index
//! ([`RenderIndex`], in [`crate::view::render_index`], with its invariant and how retention is
//! handled): finding a rendered position, or reading a window, renders forward from the nearest
//! checkpoint at or before it. Rendered positions of a stream never change; bytes of records
//! retention deleted read as [`Error::StaleHandle`] (`ESTALE`).
//!
//! # Transactions
//!
//! Control batches (transaction markers) are never rendered in the record formats and are kept, as
//! stored, in raw streams. Which transactional records are shown is the registry's [`Isolation`]:
//! with `read_committed` (the default) streams resolve against the last stable offset, end there,
//! and skip aborted batches in the record formats (see [`crate::view::txn`]); every `Walker`
//! (`view/walker.rs`) takes one [`TxnSnapshot`](crate::view::txn::TxnSnapshot) and stops at its
//! stable offset, so all it renders is final. With `read_uncommitted` every non-control record is
//! shown.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::error::{Error, Result};
use crate::format::{Offset, Timestamp, decode_batch, parse_batch_info};
use crate::source::{OffsetQuery, PartitionSource, SealedSpan};
use crate::sync::lock;
use crate::view::budget::{MemoryBudget, Reservation};
pub use crate::view::render_index::{
    CHECKPOINT_INTERVAL, Checkpoint, MAX_CHECKPOINTS, RenderIndex,
};
use crate::view::render_index::{Learned, Target};
use crate::view::spec::{Bound, Format, StreamSpec};
use crate::view::txn::{CommittedPartition, Isolation, TxnTracker};
use crate::view::walker::READ_CHUNK;

/// Key of a render index: rendered bytes depend on the topic and partition (JSON) and format.
type IndexKey = (String, u32, Format);

/// Most render indexes with an origin of their own kept per (topic, partition, format); older
/// ones live on only in the streams opened on them.
pub const MAX_ORIGINS: usize = 32;

/// One per mount: caches a [`RenderIndex`] per (topic, partition, format) and a
/// [`TxnTracker`] per partition, and opens streams at one [`Isolation`].
#[derive(Default)]
pub struct StreamRegistry {
    indexes: Mutex<HashMap<IndexKey, Arc<RenderIndex>>>,
    /// Render indexes whose origin is a stream's own start, for streams starting farther past
    /// the shared index's frontier than a sizing budget (most recent last, at most
    /// [`MAX_ORIGINS`] per key).
    origins: Mutex<HashMap<IndexKey, Vec<Arc<RenderIndex>>>>,
    isolation: Isolation,
    trackers: Mutex<HashMap<(String, u32), Arc<TxnTracker>>>,
    /// The mount's budget the renderings streams keep between reads come out of; `None`: kept
    /// without limit (in-process use without a mount).
    budget: Option<Arc<MemoryBudget>>,
    /// Key streams recently opened (`by-key/`), shared by the lookups and opens of a name.
    key_streams: crate::view::bykey::KeyStreamCache,
}

impl StreamRegistry {
    /// An empty registry showing committed records ([`Isolation::ReadCommitted`]).
    pub fn new() -> StreamRegistry {
        StreamRegistry::default()
    }

    /// An empty registry at `isolation`.
    pub fn with_isolation(isolation: Isolation) -> StreamRegistry {
        StreamRegistry { isolation, ..StreamRegistry::default() }
    }

    /// The same registry with every stream it opens keeping renderings only within `budget`.
    pub fn with_budget(mut self, budget: &Arc<MemoryBudget>) -> StreamRegistry {
        self.budget = Some(Arc::clone(budget));
        self
    }

    /// The key streams recently opened (see [`crate::view::bykey::KeyStreamCache`]).
    pub fn key_streams(&self) -> &crate::view::bykey::KeyStreamCache {
        &self.key_streams
    }

    /// The isolation level of every stream this registry opens.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// The transaction tracker of `part` (`read_committed`), created on first use; none for a
    /// source that reads committed records itself ([`PartitionSource::reads_committed`]).
    pub fn tracker(&self, part: &dyn PartitionSource) -> Option<Arc<TxnTracker>> {
        if self.isolation == Isolation::ReadUncommitted || part.reads_committed() {
            return None;
        }
        let key = (part.topic().to_string(), part.partition());
        Some(Arc::clone(lock(&self.trackers).entry(key).or_default()))
    }

    /// `part` as streams of this registry see it: through its tracker in `read_committed`
    /// (offsets resolve against the last stable offset).
    pub fn view(&self, part: Arc<dyn PartitionSource>) -> Arc<dyn PartitionSource> {
        match self.tracker(part.as_ref()) {
            Some(tracker) => Arc::new(CommittedPartition::new(part, tracker)),
            None => part,
        }
    }

    /// Resolves `spec` against `part` at `now` (epoch ms, the anchor of relative times) and
    /// opens the stream. Errors as [`StreamSpec::resolve`] does (`OffsetOutOfRange` for a start
    /// outside the log).
    pub fn open(
        &self,
        part: Arc<dyn PartitionSource>,
        spec: &StreamSpec,
        now: Timestamp,
    ) -> Result<Arc<Stream>> {
        let view = self.view(Arc::clone(&part));
        let resolved = spec.resolve(view.as_ref(), now)?;
        let index = self.index_for(part.as_ref(), view.as_ref(), spec.format, resolved.start)?;
        let mut stream = Stream::open(index, part, resolved.start, resolved.end)?;
        stream.budget = self.budget.clone();
        Ok(Arc::new(stream))
    }

    /// The render index a stream of `part` (seen as `view`) starting at `start` is opened on:
    /// the shared one when it reaches `start` within the source's sizing budget (at most
    /// [`SIZED_AT_ONCE`]), else one with an origin at or before `start` that does (the most
    /// recent such), else a new one whose origin is `start` itself. So opening a stream never
    /// renders more than that of log, and never the records before its start that the shared
    /// index has not rendered yet.
    pub fn index_for(
        &self,
        part: &dyn PartitionSource,
        view: &dyn PartitionSource,
        format: Format,
        start: Offset,
    ) -> Result<Arc<RenderIndex>> {
        let budget = part.sizing_budget();
        let shared = self.index(part, format)?;
        if shared.frontier() >= start {
            return Ok(shared);
        }
        let key = (part.topic().to_string(), part.partition(), format);
        let candidate = lock(&self.origins).get(&key).and_then(|list| {
            list.iter().filter(|i| i.origin() <= start).max_by_key(|i| i.origin()).cloned()
        });
        // Already covered: no rendering at all (a lookup, `stat` and `open` of one name each
        // resolve it).
        if let Some(index) = candidate.as_ref().filter(|i| i.frontier() >= start) {
            return Ok(Arc::clone(index));
        }
        let budget = budget.min(SIZED_AT_ONCE);
        if shared.reaches(view, start, budget)? {
            return Ok(shared);
        }
        if let Some(index) = candidate {
            if index.reaches(view, start, budget)? {
                return Ok(index);
            }
        }
        let mut index = RenderIndex::new_at(part, format, start)?;
        index.txn = self.tracker(part);
        let index = Arc::new(index);
        let mut origins = lock(&self.origins);
        let list = origins.entry(key).or_default();
        list.push(Arc::clone(&index));
        if list.len() > MAX_ORIGINS {
            list.remove(0);
        }
        Ok(index)
    }

    /// Render indexes with an origin of their own kept for `part` in `format` (for tests and
    /// statistics).
    pub fn origin_indexes(&self, part: &dyn PartitionSource, format: Format) -> usize {
        let key = (part.topic().to_string(), part.partition(), format);
        lock(&self.origins).get(&key).map_or(0, Vec::len)
    }

    /// Sizes the shared render index of `part` in `format` to the log end in steps of `step`
    /// bytes of log (see [`RenderIndex::size_step`]) while `go()` says so: background sizing.
    /// Readers share the index, so what this renders is never rendered again by them, and a
    /// reader that needs more renders it itself (the index's lock orders them).
    pub fn size_in_background(
        &self,
        part: Arc<dyn PartitionSource>,
        format: Format,
        step: u64,
        go: &dyn Fn() -> bool,
    ) -> Result<bool> {
        let view = self.view(Arc::clone(&part));
        let index = self.index(part.as_ref(), format)?;
        while go() {
            if index.size_step(view.as_ref(), step)? {
                return Ok(true);
            }
            std::thread::yield_now();
        }
        Ok(false)
    }

    /// Renders (counting only) the sealed span `span` of `part` in `format` on an index of its
    /// own whose origin is the span's start, in steps of `step` bytes of log while `go()` says
    /// so, so that the segment cache learns the span's rendering: the shared index (and every
    /// stream) then moves over the span without rendering it. Spans are independent, so
    /// background sizing summarizes several at once. Nothing is shared with readers but the
    /// cache. Whether it got through the span (the index is dropped either way).
    pub fn summarize_span(
        &self,
        part: Arc<dyn PartitionSource>,
        format: Format,
        span: &SealedSpan,
        step: u64,
        go: &dyn Fn() -> bool,
    ) -> Result<bool> {
        let view = self.view(Arc::clone(&part));
        let mut index = RenderIndex::new_at(view.as_ref(), format, span.base)?;
        index.txn = self.tracker(part.as_ref());
        if index.knows_span(view.as_ref(), span) {
            // Known from an earlier mount: nothing to render (and no jump over the cached
            // spans after it, which for every span of a remount would cost their square).
            return Ok(true);
        }
        while go() {
            if index.summarize_step(view.as_ref(), span.end.next_offset, step)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The render index of `part` in `format`, created (empty) on first use.
    pub fn index(&self, part: &dyn PartitionSource, format: Format) -> Result<Arc<RenderIndex>> {
        let key = (part.topic().to_string(), part.partition(), format);
        let mut indexes = lock(&self.indexes);
        if let Some(index) = indexes.get(&key) {
            return Ok(Arc::clone(index));
        }
        let mut index = RenderIndex::new(part, format)?;
        index.txn = self.tracker(part);
        let index = Arc::new(index);
        indexes.insert(key, Arc::clone(&index));
        Ok(index)
    }
}

/// The rendering of the batch a read stopped inside, from the end of the window it returned to
/// the end of the batch (or of the stream). A sequential reader (`cat`, a FUSE read is 128
/// KiB against batches of up to 1 MB) continues from it instead of reading, checking and
/// decoding that batch again.
///
/// **Invariant**: `bytes` are the stream's rendered positions `[at, at + bytes.len())` of the
/// index generation the stream was opened on, for records below `end`; the batch starts at
/// `before` and, unless the stream ends inside it, is followed by the checkpoint `after`,
/// whose position is `at + bytes.len()`.
#[derive(Debug)]
struct Tail {
    at: u64,
    bytes: Vec<u8>,
    before: Checkpoint,
    after: Option<Checkpoint>,
    end: Option<Offset>,
    /// Its bytes in the mount's budget (`None` without one).
    _held: Option<Reservation>,
}

/// The end of an open stream, as far as it is known.
#[derive(Debug)]
struct EndState {
    bound: Bound,
    /// The rendered position of the end, once it can never change.
    final_position: Option<u64>,
    /// [`Stream::completed_timestamp`], once looked up (it can never change either).
    completed_timestamp: Option<Option<Timestamp>>,
}

/// Log bytes a request (`stat`, lookup, `open`) renders at most itself to size a stream or to
/// reach its start on the shared render index, whatever the source's sizing budget: 1 MiB,
/// about a millisecond of rendering here. The rest of a larger budget is sized in the
/// background ([`Stream::stat_size`]), so an open far into a large partition on a fresh mount
/// does not wait for a quarter of a GiB of rendering (BENCHMARKS.md, issue 17: with 16 MiB
/// here, every such open still took 20–30 ms).
pub const SIZED_AT_ONCE: u64 = 1 << 20;

/// What [`Stream::stat_size`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatSize {
    /// As [`Stream::known_size`]: exact, or `None` while not yet known.
    Now(Option<u64>),
    /// Not yet known, and knowing more needs a budget's worth of sizing, left to the caller
    /// (a [`Stream::known_size`] elsewhere).
    Deferred,
}

/// A `by-offset/` or `by-time/` file: records `[start, end)` of one partition in one format,
/// with an exact, growing size. Cheap to open; `Send + Sync`.
pub struct Stream {
    index: Arc<RenderIndex>,
    part: Arc<dyn PartitionSource>,
    start: Offset,
    generation: u64,
    /// Rendered position of the stream's first byte.
    start_position: u64,
    end: Mutex<EndState>,
    /// The stream's end was the log end when it was opened (no fixed end offset).
    open_ended: bool,
    /// The stream has shown an exact size (or been read to its end): from then on
    /// [`Stream::known_size`] is always exact, whatever it costs, so a size once shown never
    /// turns back into "not yet known" (`tail -f` would take that for a truncation). Atomic:
    /// `stat` reads it without waiting for a sizing or read in progress.
    shown_exact: AtomicBool,
    /// Where the last read stopped: a checkpoint at a batch boundary at or before it.
    last_read: Mutex<Option<Checkpoint>>,
    /// The rest of the batch each of the last reads stopped inside (record formats), at most
    /// [`MAX_TAILS`], oldest first.
    tails: Mutex<VecDeque<Tail>>,
    /// The ends (`to`) of the windows being rendered now (see [`Stream::read_window`]).
    rendering: Mutex<Vec<u64>>,
    /// Notified whenever a window's rendering ends.
    rendered: Condvar,
    /// The walker's batch size hint as the last read left it (see `Walker::batch_hint`).
    batch_hint: AtomicUsize,
    /// The budget a kept [`Tail`] comes out of (see [`StreamRegistry::with_budget`]).
    budget: Option<Arc<MemoryBudget>>,
}

impl Stream {
    /// Opens `[start, end)` of `part` on `index` (which must be `part`'s index, made by a
    /// registry; `part` is the partition itself, not a [`StreamRegistry::view`] of it).
    pub fn open(
        index: Arc<RenderIndex>,
        part: Arc<dyn PartitionSource>,
        start: Offset,
        end: Bound,
    ) -> Result<Stream> {
        let part: Arc<dyn PartitionSource> = match &index.txn {
            Some(tracker) => Arc::new(CommittedPartition::new(part, Arc::clone(tracker))),
            None => part,
        };
        let (generation, start_position) = {
            let mut st = lock(&index.state);
            index.sync(&mut st, part.as_ref())?;
            let target = match index.renderer.format() {
                Format::Raw => Target::BatchHolding(start),
                Format::Values | Format::Json => Target::Record(start),
            };
            let p = index.locate(&mut st, part.as_ref(), target)?;
            (st.generation, p)
        };
        let open_ended = matches!(end, Bound::Open | Bound::UntilTimestamp(_));
        let end =
            Mutex::new(EndState { bound: end, final_position: None, completed_timestamp: None });
        Ok(Stream {
            index,
            part,
            start,
            generation,
            start_position,
            end,
            last_read: Mutex::new(None),
            open_ended,
            shown_exact: AtomicBool::new(false),
            tails: Mutex::new(VecDeque::new()),
            rendering: Mutex::new(Vec::new()),
            rendered: Condvar::new(),
            batch_hint: AtomicUsize::new(0),
            budget: None,
        })
    }

    /// The first offset of the stream.
    pub fn start(&self) -> Offset {
        self.start
    }

    /// The current end bound (an [`Bound::UntilTimestamp`] becomes [`Bound::Fixed`] once a
    /// record reaches its time).
    pub fn end(&self) -> Bound {
        lock(&self.end).bound
    }

    /// Whether the stream is a bounded range whose records all exist: its size and bytes never
    /// change again (as observed by the last [`Stream::size`]).
    pub fn is_complete(&self) -> bool {
        lock(&self.end).final_position.is_some()
    }

    /// Exactly the number of bytes a full read returns now, rendering as much of the log as
    /// that takes (see [`Stream::known_size`] for what `stat` shows).
    pub fn size(&self) -> Result<u64> {
        let end = self.end_position(None)?.unwrap_or(self.start_position);
        Ok(end.saturating_sub(self.start_position))
    }

    /// The size as `stat` shows it: exactly the number of bytes a full read returns now, or
    /// `None` when that is not yet known because knowing it would render more than the source's
    /// [`sizing_budget`](PartitionSource::sizing_budget) of log. Each call continues from where
    /// the last sizing (or read) stopped, so repeated calls converge; once a size was known, or
    /// the stream was read to its end, every later call is exact (rendering what was appended
    /// since).
    pub fn known_size(&self) -> Result<Option<u64>> {
        self.known_size_within(self.part.sizing_budget())
    }

    /// [`Stream::known_size`] rendering at most `budget` bytes of log while not exact.
    fn known_size_within(&self, budget: u64) -> Result<Option<u64>> {
        let exact = self.shown_exact.load(Ordering::Acquire);
        let budget = if exact { None } else { Some(budget) };
        let end = self.end_position(budget)?;
        if end.is_some() {
            self.shown_exact.store(true, Ordering::Release);
        }
        Ok(end.map(|e| e.saturating_sub(self.start_position)))
    }

    /// What `stat` shows without waiting for a budget's worth of sizing: as
    /// [`Stream::known_size`], but
    /// - it renders at most [`SIZED_AT_ONCE`] of log itself; when the source's budget is larger
    ///   and that was not enough, [`StatSize::Deferred`]: not yet known, and the caller sizes
    ///   the rest of the budget in the background ([`Stream::size_step`]);
    /// - a stream ending at the log end whose size is not yet known while the last sizing of
    ///   its index stopped at the budget short of the log end (and reads have not reached it
    ///   since) is [`StatSize::Deferred`] at once, rendering nothing.
    ///
    /// So every `stat` answers within one step's rendering, and repeated stats still converge
    /// (each deferred one continues the sizing by a budget). Exact sizes are answered here,
    /// whatever they cost (a size once shown is never "not yet known" again).
    pub fn stat_size(&self) -> Result<StatSize> {
        // Never waits for a sizing or read in progress to decide: the flags are atomic, and a
        // busy index is being extended (not yet known).
        if self.open_ended
            && !self.shown_exact.load(Ordering::Acquire)
            && self.index.sizing_cut.load(Ordering::Acquire)
        {
            let log_end = self.part.summary()?.log_end_offset;
            let behind = match self.index.state.try_lock() {
                Ok(st) => st.frontier.bound < log_end,
                Err(std::sync::TryLockError::WouldBlock) => true,
                Err(std::sync::TryLockError::Poisoned(st)) => {
                    st.into_inner().frontier.bound < log_end
                }
            };
            if behind {
                return Ok(StatSize::Deferred);
            }
        }
        // A request sizes at most `SIZED_AT_ONCE` itself; the rest of the budget is the
        // background's.
        let budget = self.part.sizing_budget();
        if budget > SIZED_AT_ONCE && !self.shown_exact.load(Ordering::Acquire) {
            return Ok(match self.known_size_within(SIZED_AT_ONCE)? {
                Some(size) => StatSize::Now(Some(size)),
                None => StatSize::Deferred,
            });
        }
        Ok(StatSize::Now(self.known_size()?))
    }

    /// One step of sizing left to the background by a deferred [`Stream::stat_size`]: the
    /// source's sizing budget of log, towards the log end, in parts of at most `part_bytes`,
    /// each under the index's lock once `go` says so (`false`: stop). The first read of the
    /// step is asked of the source before the index is locked (a cluster keeps that Fetch's
    /// answer for the step), so opens, stats and reads of the index wait for a part's
    /// rendering at most, never for the source or the whole budget. The next `stat` shows
    /// the size if the step reached the end.
    pub fn size_step(&self, part_bytes: u64, go: &dyn Fn() -> bool) -> Result<()> {
        let frontier = lock(&self.index.state).frontier.cursor;
        if let Err(e) = self.part.read(&frontier, READ_CHUNK) {
            // The step reads it again under the lock, and fails there if it must.
            log::debug!(
                "sizing step of {}-{}: read ahead of the step: {e}",
                self.part.topic(),
                self.part.partition()
            );
        }
        let budget = self.part.sizing_budget();
        let part_bytes = part_bytes.clamp(1, budget.max(1));
        let mut spent = 0u64;
        while spent < budget && go() {
            if self.index.size_step(self.part.as_ref(), part_bytes)? {
                break;
            }
            spent = spent.saturating_add(part_bytes);
        }
        Ok(())
    }

    /// Whether `self` and `other` are sized together (one render index): a sizing step of
    /// either sizes both.
    pub fn sized_with(&self, other: &Stream) -> bool {
        Arc::ptr_eq(&self.index, &other.index)
    }

    /// Whether [`Stream::known_size`] is exact from now on.
    pub fn is_sized(&self) -> bool {
        self.shown_exact.load(Ordering::Acquire)
    }

    /// [`RenderIndex::sync`] by the bounds the source last stated
    /// ([`PartitionSource::stated_bounds`], no request) when it keeps them, else by its summary.
    fn sync_stated(&self, st: &mut crate::view::render_index::IndexState) -> Result<()> {
        match self.part.stated_bounds() {
            Some((start, end)) => self.index.sync_to(st, self.part.as_ref(), start, end),
            None => self.index.sync(st, self.part.as_ref()),
        }
    }

    /// Fixes an [`Bound::UntilTimestamp`] end once some record reaches its time.
    fn refresh_bound(&self, end: &mut EndState) -> Result<()> {
        if let Bound::UntilTimestamp(t) = end.bound {
            let log_end = self.part.summary()?.log_end_offset;
            let o = self.part.offset_for(OffsetQuery::Timestamp(t))?;
            if o < log_end {
                end.bound = Bound::Fixed(o.max(self.start));
            }
        }
        Ok(())
    }

    /// The rendered position of the end of the stream now; `None` when reaching it would
    /// render more than `budget` bytes of log.
    fn end_position(&self, budget: Option<u64>) -> Result<Option<u64>> {
        let mut end = lock(&self.end);
        if let Some(p) = end.final_position {
            return Ok(Some(p));
        }
        self.refresh_bound(&mut end)?;
        let index = &self.index;
        let part = self.part.as_ref();
        let mut st = lock(&index.state);
        index.sync(&mut st, part)?;
        if st.generation != self.generation {
            return Err(Error::StaleHandle);
        }
        let position = match end.bound {
            Bound::Open | Bound::UntilTimestamp(_) => {
                match index.end_position(&mut st, part, budget)? {
                    Some(p) => p,
                    None => return Ok(None),
                }
            }
            Bound::Fixed(e) if e <= self.start => {
                end.final_position = Some(self.start_position);
                self.start_position
            }
            Bound::Fixed(e) => {
                if !index.extend_within(&mut st, part, Some(e), budget)? {
                    return Ok(None);
                }
                if st.frontier.bound >= e {
                    let target = match index.renderer.format() {
                        Format::Raw => Target::BatchFrom(e),
                        Format::Values | Format::Json => Target::Record(e),
                    };
                    let p = index.locate(&mut st, part, target)?;
                    end.final_position = Some(p);
                    p
                } else {
                    st.frontier.position
                }
            }
        };
        Ok(Some(position.max(self.start_position)))
    }

    /// Reads up to `len` bytes at file offset `offset`: exactly the bytes a full read has there
    /// (fewer at the current end; none past it).
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let from = self.start_position.saturating_add(offset);
        let mut to = from.saturating_add(len as u64);
        let bound = {
            let mut end = lock(&self.end);
            self.refresh_bound(&mut end)?;
            if let Some(p) = end.final_position {
                to = to.min(p);
            }
            end.bound
        };
        if matches!(bound, Bound::Fixed(e) if e <= self.start) {
            return Ok(Vec::new());
        }
        if from >= to {
            if offset == 0 && len > 0 {
                // An empty complete range: empty because its records are damaged (EIO, as a
                // read that starts at damage), or because it holds none (gaps, markers).
                if let Bound::Fixed(e) = bound {
                    self.check_range_readable(e)?;
                }
            }
            return Ok(Vec::new());
        }
        let end = match bound {
            Bound::Fixed(e) => Some(e),
            Bound::Open | Bound::UntilTimestamp(_) => None,
        };
        match self.read_window(from, to, end) {
            // A source that could not be reached within its deadline: a retry would wait out
            // another one (a dead broker ends a read within one deadline, not three).
            Err(e) if e.is_unreachable() => Err(e),
            Err(e) if !matches!(e, Error::StaleHandle) => {
                // The checkpoint may have been deleted by retention meanwhile: notice it, retry.
                let mut st = lock(&self.index.state);
                self.index.sync(&mut st, self.part.as_ref())?;
                drop(st);
                // A retry that finds the bytes deleted says so (ESTALE): the stream's bytes
                // exist, the records behind them are gone. The engine says the same thing as
                // an offset below its log start when retention overtook a reader between the
                // two attempts. Any other failure of the retry is reported as the first one.
                self.read_window(from, to, end).map_err(|retry| match retry {
                    Error::StaleHandle => retry,
                    Error::OffsetOutOfRange { requested, log_start, .. }
                        if requested < log_start =>
                    {
                        Error::StaleHandle
                    }
                    _ => e,
                })
            }
            other => other,
        }
    }

    /// For a complete bounded range (see [`Stream::is_complete`]) that holds records: the max
    /// timestamp of the batch holding its last record (for `LogAppendTime` the time it was
    /// appended), which never changes: what the range's mtime shows. `None` otherwise, for
    /// batches without timestamps (v0), and when that batch cannot be read (deleted, damaged).
    pub fn completed_timestamp(&self) -> Option<Timestamp> {
        let end = {
            let end = lock(&self.end);
            match (end.final_position, end.bound, end.completed_timestamp) {
                (Some(_), _, Some(known)) => return known,
                (Some(_), Bound::Fixed(e), None) if e > self.start => e,
                _ => return None,
            }
        };
        let last = Offset(end.0.saturating_sub(1));
        // Best effort: a batch deleted by retention since, or damaged (reads of it fail and
        // say so), leaves nothing to date the range by.
        let dated = self
            .part
            .seek(last)
            .and_then(|cursor| self.part.read(&cursor, 1))
            .ok()
            .and_then(|chunk| parse_batch_info(&chunk.bytes).ok())
            .filter(|info| info.max_timestamp >= 0 && info.base_offset <= last)
            .map(|info| info.max_timestamp);
        lock(&self.end).completed_timestamp = Some(dated);
        dated
    }

    /// Whether bytes read earlier at file offset `offset` may still be served: the records
    /// behind them are still in the log (a read there would not fail with `ESTALE`).
    pub fn holds(&self, offset: u64) -> Result<bool> {
        let from = self.start_position.saturating_add(offset);
        let mut st = lock(&self.index.state);
        // Bytes rendered a moment ago are served while the log start the source last stated
        // (a cluster: the Fetch that brought them) is not past them: no request per window.
        self.sync_stated(&mut st)?;
        if st.generation != self.generation {
            return Ok(false);
        }
        Ok(st.checkpoints.first().is_some_and(|first| from >= first.position))
    }

    /// Fails with the damage of the first damaged batch holding records of `[start, end)`, if
    /// any (such a batch renders nothing, so a range of only damaged batches is empty).
    fn check_range_readable(&self, end: Offset) -> Result<()> {
        let part = self.part.as_ref();
        let checkpoint = {
            let st = lock(&self.index.state);
            st.floor_by_bound(self.start).ok_or(Error::StaleHandle)?
        };
        let mut w = self.index.walker(part, checkpoint);
        while let Some(step) = w.peek()? {
            if step.info.base_offset >= end {
                break;
            }
            if step.info.last_offset >= self.start && !w.hides(&step.info) {
                let decoded = decode_batch(w.entry(&step))
                    .and_then(|b| b.records().try_for_each(|r| r.map(drop)));
                if let Err(e) = decoded {
                    return Err(w.corrupt(e.at as u64, &e));
                }
            }
            w.advance(&step, 0);
        }
        Ok(())
    }

    /// Renders rendered positions `[from, to)` (records below `end`); see
    /// [`Stream::render_window`].
    fn read_window(&self, from: u64, to: u64, end: Option<Offset>) -> Result<Vec<u8>> {
        lock(&self.rendering).push(to);
        let _done = RenderingWindow { stream: self, to };
        self.render_window(from, to, end, true)
    }

    /// Renders rendered positions `[from, to)` (records below `end`) from one of the stream's
    /// [`Tail`]s when one holds `from`, else from the nearest checkpoint.
    ///
    /// Windows read ahead render in parallel, so the window before this one (ending at `from`)
    /// may still be rendering the batch `from` falls in, and keeps the rest of it as a tail.
    /// With `may_defer`, when it is (and the index has the checkpoint `n` where that batch
    /// ends, inside the window), this render starts at `n` and then takes `[from, n)` from
    /// that tail once the window before is done, instead of reading, checking and decoding
    /// the batch a second time (issue 17: 27% more records rendered than read). Without the
    /// tail, or when the render from `n` fails, it renders as without deferring: the bytes
    /// are the same either way.
    fn render_window(
        &self,
        from: u64,
        to: u64,
        end: Option<Offset>,
        may_defer: bool,
    ) -> Result<Vec<u8>> {
        let part = self.part.as_ref();
        let from0 = from;
        let window = usize::try_from(to - from).unwrap_or(usize::MAX);
        // Room for the window and the rest of the batch it ends in (kept as the tail).
        let mut out = Vec::with_capacity(window.min(1 << 20).saturating_add(READ_CHUNK * 2));
        let mut from = from;
        let checkpoint = {
            let mut st = lock(&self.index.state);
            let mut tail = {
                let mut tails = lock(&self.tails);
                let found = tails.iter().position(|t| {
                    t.end == end && t.at <= from && from < t.at.saturating_add(t.bytes.len() as u64)
                });
                found.and_then(|i| tails.remove(i))
            };
            if tail.as_ref().is_some_and(|t| t.end == end && t.at <= from) {
                // Bytes kept in memory are served only while the log still holds them: the
                // index notices retention here (as a read from the log would), by the bounds
                // the source last stated when it keeps them (the read that kept the bytes).
                self.sync_stated(&mut st)?;
            }
            if st.generation != self.generation {
                return Err(Error::StaleHandle);
            }
            let Some(first) = st.checkpoints.first().copied() else {
                return Err(Error::StaleHandle);
            };
            if from < first.position {
                return Err(Error::StaleHandle);
            }
            let mut c = st.floor_by_position(from).ok_or(Error::StaleHandle)?;
            if let Some(last) = *lock(&self.last_read) {
                // Checkpoints are ordered by bound as by cursor: at or after the first one is
                // alive.
                let alive = last.bound >= first.bound;
                if alive && last.position <= from && last.position > c.position {
                    c = last;
                }
            }
            if let Some(t) = tail.take() {
                let held = t.at.saturating_add(t.bytes.len() as u64);
                let alive = t.before.bound >= first.bound;
                if t.end == end && alive && t.at <= from && from < held {
                    let skip = (from - t.at) as usize;
                    let n = (held - from).min(to - from) as usize;
                    out.extend_from_slice(t.bytes.get(skip..skip + n).unwrap_or_default());
                    from = from.saturating_add(n as u64);
                    if from < held {
                        keep_tail(&mut lock(&self.tails), t);
                        return Ok(out);
                    }
                    let Some(after) = t.after else { return Ok(out) };
                    *lock(&self.last_read) = Some(after);
                    if from >= to {
                        return Ok(out);
                    }
                    c = after;
                }
            }
            // A read that renders past the frontier: what it finds there becomes the index's
            // (up to the log end offset read below).
            let learned = (to > st.frontier.position).then(|| Learned::new(&st, Offset(i64::MAX)));
            // Defer the batch `from` falls in to the window before, while it renders it (see
            // above): only below the frontier (nothing to learn) and in the record formats
            // (raw windows keep no tail).
            let defer_to = (may_defer
                && out.is_empty()
                && learned.is_none()
                && self.index.renderer.format() != Format::Raw
                && lock(&self.rendering).contains(&from))
            .then(|| {
                let i = st.checkpoints.partition_point(|k| k.position <= from);
                st.checkpoints.get(i).copied()
            })
            .flatten()
            .filter(|n| n.position > from && n.position < to);
            if let Some(n) = defer_to {
                c = n;
                from = n.position;
            }
            (c, learned, defer_to)
        };
        let (checkpoint, mut learned, deferred) = checkpoint;
        if self.index.txn.is_some() {
            // Moves the transaction state (and with it the stable offset) to the log end, as
            // reading an open stream to its end does without transactions; and is the log end
            // the index may learn up to (read before the batches are).
            let log_end = part.summary()?.log_end_offset;
            if let Some(l) = learned.as_mut() {
                l.set_log_end(log_end);
            }
        } else if let Some(l) = learned.as_mut() {
            // The log end the index may learn up to, read before the batches are: one the
            // source already stated, when it keeps one (no request), else its summary's.
            let log_end = match part.stated_bounds() {
                Some((_, end)) => end,
                None => part.summary()?.log_end_offset,
            };
            l.set_log_end(log_end);
        }
        let mut w = self.index.walker(part, checkpoint).with_read_size(
            to.saturating_sub(checkpoint.position),
            self.batch_hint.load(Ordering::Relaxed),
        );
        if let Some(n) = deferred {
            // From `n` on, after room for the part before it (filled in then: no copy of the
            // window).
            let prefix = (n.position - from0) as usize;
            out.resize(prefix, 0);
            let mut out = match self.walk_window(&mut w, from, to, end, window, learned, out) {
                Ok(out) => out,
                // Whatever went wrong from `n` on, a render from the start says it as
                // without deferring (e.g. damage at `n` ends a read short rather than failing).
                Err(_) => return self.render_window(from0, to, end, false),
            };
            {
                let mut r = lock(&self.rendering);
                while r.contains(&from0) {
                    r = self.rendered.wait(r).unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            }
            let before = self.render_window(from0, n.position, end, false)?;
            match out.get_mut(..prefix) {
                Some(room) if before.len() == prefix => room.copy_from_slice(&before),
                // The stream ended before `n` (its bound was reached): nothing after it.
                _ => return Ok(before),
            }
            return Ok(out);
        }
        self.walk_window(&mut w, from, to, end, window, learned, out)
    }

    /// The walk of [`Stream::render_window`] from the walker's checkpoint: renders `[from,
    /// to)` into `out` (which holds `window` bytes when done, or fewer at the stream's end).
    #[allow(clippy::too_many_arguments)]
    fn walk_window(
        &self,
        w: &mut crate::view::walker::Walker<'_>,
        from: u64,
        to: u64,
        end: Option<Offset>,
        window: usize,
        mut learned: Option<Learned>,
        mut out: Vec<u8>,
    ) -> Result<Vec<u8>> {
        let part = self.part.as_ref();
        let mut resume = None;
        let mut at_end = false;
        while w.here.position < to {
            let Some(step) = w.peek()? else {
                at_end = true;
                break;
            };
            // Taken after `peek`, which moves the cursor when the batch starts a new run.
            let before = w.here;
            let boundary = w.at_retention_boundary;
            let size = step.len as u64;
            let r = w.render_batch(&step, from, to, self.start, end, &mut out)?;
            if out.len() > window {
                // The window ends inside this batch: keep the rest of its rendering.
                let rest = out.get(window..).unwrap_or_default();
                // Kept only within the budget (else the next read renders the batch again),
                // in a buffer of exactly its size.
                let held = match &self.budget {
                    None => Some(None),
                    Some(budget) => budget.try_reserve(rest.len()).map(Some),
                };
                if let (false, Some(held)) = (r.cut, held) {
                    let after = if r.ends_stream {
                        None
                    } else {
                        w.advance(&step, r.bytes);
                        if let Some(l) = learned.as_mut() {
                            l.passed(before, boundary, w.here, size);
                        }
                        Some(w.here)
                    };
                    let bytes = rest.to_vec();
                    let tail = Tail { at: to, bytes, before, after, end, _held: held };
                    keep_tail(&mut lock(&self.tails), tail);
                }
                out.truncate(window);
                resume = Some(before);
                break;
            }
            if r.ends_stream || r.cut {
                resume = Some(before);
                break;
            }
            w.advance(&step, r.bytes);
            if let Some(l) = learned.as_mut() {
                l.passed(before, boundary, w.here, size);
            }
            resume = Some(if w.here.position <= to { w.here } else { before });
        }
        if let Some(c) = resume {
            *lock(&self.last_read) = Some(c);
        }
        if let Some(l) = learned {
            self.index.learn(part, l);
        }
        if at_end {
            // Read to the end of the log: the index's frontier is there too (learned above, or
            // rendered by another reader), so the size is exact from now on at little cost.
            self.shown_exact.store(true, Ordering::Release);
        }
        self.batch_hint.store(w.batch_hint, Ordering::Relaxed);
        Ok(out)
    }
}

/// Tails a stream keeps at once: one per window of a handle rendering in parallel
/// ([`crate::view::readahead::MAX_PARALLEL`]) and one for a reader's own read.
const MAX_TAILS: usize = crate::view::readahead::MAX_PARALLEL + 2;

/// Keeps `tail` among `tails`, dropping the oldest beyond [`MAX_TAILS`] and any other at the
/// same position.
fn keep_tail(tails: &mut VecDeque<Tail>, tail: Tail) {
    tails.retain(|t| t.at != tail.at || t.end != tail.end);
    while tails.len() >= MAX_TAILS {
        tails.pop_front();
    }
    tails.push_back(tail);
}

/// A window of [`Stream::read_window`] being rendered: its end is in the stream's `rendering`
/// until dropped.
struct RenderingWindow<'a> {
    stream: &'a Stream,
    to: u64,
}

impl Drop for RenderingWindow<'_> {
    fn drop(&mut self) {
        let mut r = lock(&self.stream.rendering);
        if let Some(i) = r.iter().position(|&t| t == self.to) {
            r.swap_remove(i);
        }
        self.stream.rendered.notify_all();
    }
}

impl crate::view::readahead::AheadSource for Stream {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        Stream::read_at(self, offset, len)
    }

    fn holds(&self, offset: u64) -> Result<bool> {
        Stream::holds(self, offset)
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("topic", &self.part.topic())
            .field("partition", &self.part.partition())
            .field("format", &self.index.renderer.format())
            .field("start", &self.start)
            .field("end", &lock(&self.end).bound)
            .field("start_position", &self.start_position)
            .finish()
    }
}
