//! Background sizing, as tasks of the mount's executor ([`topicfs_executor`]):
//!
//! - **Deferred stats** ([`SizingSteps`], class [`Class::DeferredStat`]): the sizing a `stat`
//!   leaves to the background once a stream's index has been sized to the budget short of the
//!   log end, so that every later `stat` answers at once (a cluster mount: without waiting for a
//!   Fetch) and repeated stats still converge.
//! - **Mount sizing** ([`TopicFs::start_background_sizing`], class [`Class::MountSizing`]):
//!   after mount, every partition's streams are rendered (counting only) towards their end, so
//!   that a brand-new directory gets exact sizes soon after mount instead of at the first
//!   `stat` (SEMANTICS.md, "The segment cache"): first every sealed segment on its own, several
//!   at once, into the segment cache; then each stream's shared index, which moves over those
//!   segments without rendering them and renders the active segments; format by format.
//!
//! Only partitions whose source keeps summaries of sealed spans (a log directory with a segment
//! cache, [`topicfs_source::SpanStore::sealed_span_at`]) are sized at mount: for them the work is done
//! once and kept across remounts; a cluster's partitions would be fetched whole. Formats in
//! order of cost: values, raw, then JSON. Steps of [`SIZING_STEP`] bytes of log hold one render
//! index's lock at a time; requests of that format and partition wait at most one batch of a
//! step (it yields to them: [`topicfs_view::RenderIndex::size_step`]), and what a step rendered
//! is the index's, never rendered again by a reader.
//!
//! **Invariant** (bounded time): a deferred stat's step stops between two parts when a task of
//! a higher class waits (or the executor shuts down) and queues its continuation as a new task
//! of its class. Requests do not hold it back (a cluster's step waits at most
//! [`MAX_QUIET_WAIT`] per part for a moment without requests, see [`SizingSteps`]), so a
//! deferred `stat` becomes exact after at most its steps plus the higher-class tasks the
//! executor's starvation bound lets pass, however steadily other partitions are read.
//!
//! Mount sizing, which no caller waits for, yields more: it starts only while no higher-class
//! task waits or runs (the executor's rule for its class), and a task of it, or a step of a
//! shared index, starts only once no request has run for [`QUIET`]; otherwise the task pauses
//! a quarter of that and queues itself again (a worker is held at most that long).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use topicfs_executor::{Blocking, Class, Executor};
use topicfs_source::sync::lock;
use topicfs_source::{Operation, PartitionSource, SealedSpan};
use topicfs_view::Stream;
use topicfs_view::spec::Format;

use super::TopicFs;

/// Log bytes one step of background sizing renders while holding an index's lock.
pub const SIZING_STEP: u64 = 4 << 20;

/// Sealed segments summarized at once by mount sizing by default: one per core but one (kept
/// for requests), at least one, at most this.
pub const MAX_SUMMARIZERS: usize = 4;

/// A mount sizing started by [`TopicFs::start_background_sizing`].
pub struct BackgroundSizing {
    done: Arc<Done>,
}

/// Set when the last task of a mount sizing is gone (finished, stopped or dropped by the
/// executor's shutdown).
#[derive(Default)]
struct Done {
    finished: Mutex<bool>,
    changed: Condvar,
}

impl BackgroundSizing {
    /// Waits until the sizing is over: everything sized, or stopped (filesystem closing or
    /// gone, executor shut down).
    pub fn join(self) -> Result<(), std::convert::Infallible> {
        let mut finished = lock(&self.done.finished);
        while !*finished {
            finished =
                self.done.changed.wait(finished).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        Ok(())
    }
}

/// Marks a mount sizing [`Done`] when dropped.
struct DoneGuard(Arc<Done>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        *lock(&self.0.finished) = true;
        self.0.changed.notify_all();
    }
}

/// Held by every task of one mount sizing; the last one dropped marks it [`Done`].
struct MountSizing {
    fs: Weak<TopicFs>,
    executor: Executor,
    parts: Vec<Arc<dyn PartitionSource>>,
    /// Sealed spans summarized at once.
    lanes: usize,
    started: Instant,
    sized: AtomicUsize,
    /// Of the lines saying what was sized (info at mount, debug after appends).
    log_level: log::Level,
    _done: DoneGuard,
}

/// The sealed spans of one format's parallel phase, taken in order by the lanes.
struct SpanPhase {
    sizing: Arc<MountSizing>,
    format: usize,
    jobs: Vec<(Arc<dyn PartitionSource>, SealedSpan)>,
    next: AtomicUsize,
    lanes_left: AtomicUsize,
    started: Instant,
}

const FORMATS: [Format; 3] = [Format::Values, Format::Raw, Format::Json];

impl TopicFs {
    /// Starts mount sizing over `fs` (held weakly: it ends when the filesystem is dropped or
    /// shut down, or when everything is sized) on the filesystem's executor, summarizing one
    /// sealed segment per core but one at once.
    pub fn start_background_sizing(fs: &Arc<TopicFs>) -> BackgroundSizing {
        let lanes = std::thread::available_parallelism()
            .map_or(1, |n| n.get().saturating_sub(1))
            .clamp(1, MAX_SUMMARIZERS);
        TopicFs::start_background_sizing_with(fs, lanes)
    }

    /// [`TopicFs::start_background_sizing`] summarizing `lanes` sealed segments at once (at
    /// least one; the executor's workers bound how many run). From then on, closing an append
    /// handle of a partition sizes what it appended the same way ([`AppendedSizing`]).
    pub fn start_background_sizing_with(fs: &Arc<TopicFs>, lanes: usize) -> BackgroundSizing {
        let _ = fs.appended_sizing.me.set((Arc::downgrade(fs), lanes.max(1)));
        start_sizing(fs, lanes, log::Level::Info, sized_partitions)
    }

    /// Sizes `part` in the background after an append handle of it was closed (see
    /// [`AppendedSizing`]); nothing when background sizing was never started, the partition
    /// keeps no summaries (no segment cache), or a sizing of it is already queued.
    pub(crate) fn size_appended(&self, part: Arc<dyn PartitionSource>) {
        let Some((weak, lanes)) = self.appended_sizing.me.get() else { return };
        if !part.span_store().is_some_and(|store| store.keeps_summaries()) {
            return;
        }
        let key = (part.topic().to_string(), part.partition());
        if !lock(&self.appended_sizing.queued).insert(key.clone()) {
            return;
        }
        let Some(fs) = weak.upgrade() else { return };
        let queued = weak.clone();
        // Logged at debug level: one such sizing follows every append handle closed.
        start_sizing(&fs, *lanes, log::Level::Debug, move |_| {
            // Appends after this point queue a sizing of their own.
            if let Some(fs) = queued.upgrade() {
                lock(&fs.appended_sizing.queued).remove(&key);
            }
            Some(vec![part])
        });
    }
}

/// Sizing of what a mount appended (SEMANTICS.md, "The segment cache"): when an append handle of
/// a partition closes, that partition is sized in the background as at mount (class
/// [`Class::MountSizing`], once requests pause), so its rendered sizes reach the segment cache
/// (sealed segments' summaries, the active segment's prefix) while the mount lives, and the
/// next mount of the directory has exact sizes at once. At most one such sizing per partition
/// is queued at a time.
#[derive(Default)]
pub(crate) struct AppendedSizing {
    /// The filesystem (held weakly) and its lanes, once background sizing started.
    me: std::sync::OnceLock<(Weak<TopicFs>, usize)>,
    /// Partitions whose sizing is queued and not yet started.
    queued: Mutex<std::collections::HashSet<(String, u32)>>,
}

/// Starts a mount sizing of the partitions `plan` chooses (on a task of the executor).
fn start_sizing(
    fs: &Arc<TopicFs>,
    lanes: usize,
    log_level: log::Level,
    plan: impl FnOnce(&Weak<TopicFs>) -> Option<Vec<Arc<dyn PartitionSource>>> + Send + 'static,
) -> BackgroundSizing {
    let done = Arc::new(Done::default());
    let weak = Arc::downgrade(fs);
    let executor = fs.executor().clone();
    let plan_done = DoneGuard(Arc::clone(&done));
    let plan_executor = executor.clone();
    executor.submit(Class::MountSizing, Blocking::No, move || {
        let Some(parts) = plan(&weak) else { return };
        let sizing = Arc::new(MountSizing {
            fs: weak,
            executor: plan_executor,
            parts,
            lanes: lanes.max(1),
            started: Instant::now(),
            sized: AtomicUsize::new(0),
            log_level,
            _done: plan_done,
        });
        start_format(&sizing, 0);
    });
    BackgroundSizing { done }
}

/// The partitions mount sizing sizes: those whose source keeps summaries of sealed spans.
/// A partition without a span store is passed over without a question to its source (a
/// cluster's 10,000 partitions would cost 10,000 ListOffsets), and the walk stops when the
/// executor shuts down (unmounting waits for this task).
fn sized_partitions(weak: &Weak<TopicFs>) -> Option<Vec<Arc<dyn PartitionSource>>> {
    let fs = weak.upgrade()?;
    let mut parts: Vec<Arc<dyn PartitionSource>> = Vec::new();
    for topic in fs.source.topics().unwrap_or_default() {
        for p in fs.source.partitions(&topic).unwrap_or_default() {
            if fs.executor().is_shut_down() {
                return None;
            }
            let Ok(part) = fs.source.partition(&topic, p) else { continue };
            let Some(store) = part.span_store() else { continue };
            let keeps_summaries = store.keeps_summaries()
                && part
                    .summary()
                    .and_then(|s| part.seek(s.log_start_offset))
                    .is_ok_and(|c| store.sealed_span_at(&c).is_some());
            if keeps_summaries {
                parts.push(part);
            }
        }
    }
    Some(parts)
}

impl MountSizing {
    /// Whether a step may run now: the filesystem is there and not closing, and no task of a
    /// higher class waits or runs.
    fn go(&self) -> bool {
        let open = self
            .fs
            .upgrade()
            .is_some_and(|fs| !fs.closing.load(std::sync::atomic::Ordering::Relaxed));
        open && !self.executor.is_shut_down()
            && !self.executor.higher_busy(Class::MountSizing)
            && requests_quiet()
    }

    /// Whether `task` was queued again, after a pause of a quarter of [`QUIET`], because
    /// requests are running (mount sizing yields to them, see [`requests_quiet`]); `false`:
    /// the caller runs now.
    fn requeued_for_requests(self: &Arc<Self>, task: impl FnOnce() + Send + 'static) -> bool {
        if requests_quiet() {
            return false;
        }
        std::thread::sleep(QUIET / 4);
        self.submit(task);
        true
    }

    /// Whether the sizing must end (not only pause).
    fn stopped(&self) -> bool {
        self.executor.is_shut_down()
            || self
                .fs
                .upgrade()
                .is_none_or(|fs| fs.closing.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn submit(self: &Arc<Self>, task: impl FnOnce() + Send + 'static) {
        self.executor.submit(Class::MountSizing, Blocking::No, task);
    }
}

/// The parallel phase of format `format` (an index into [`FORMATS`]): every sealed span of the
/// partitions, each rendered on an index of its own
/// ([`topicfs_view::StreamRegistry::summarize_span`]), `lanes` at once, so that the segment
/// cache holds every sealed segment's rendering and the sequential phase after it renders only
/// the active segments. Spans the cache already knows cost nothing.
fn start_format(sizing: &Arc<MountSizing>, format: usize) {
    if format >= FORMATS.len() {
        log::log!(
            sizing.log_level,
            "background sizing: {} streams of {} partitions sized in {:.1} s",
            sizing.sized.load(Ordering::Relaxed),
            sizing.parts.len(),
            sizing.started.elapsed().as_secs_f64()
        );
        return;
    }
    let mut jobs = Vec::new();
    for part in &sizing.parts {
        let Ok(mut cursor) = part.summary().and_then(|s| part.seek(s.log_start_offset)) else {
            continue;
        };
        let Some(store) = part.span_store() else { continue };
        while let Some(span) = store.sealed_span_at(&cursor) {
            if span.end == cursor {
                break;
            }
            cursor = span.end;
            jobs.push((Arc::clone(part), span));
        }
    }
    let lanes = sizing.lanes.min(jobs.len());
    if lanes == 0 {
        size_partition(sizing, format, 0);
        return;
    }
    let phase = Arc::new(SpanPhase {
        sizing: Arc::clone(sizing),
        format,
        jobs,
        next: AtomicUsize::new(0),
        lanes_left: AtomicUsize::new(lanes),
        started: Instant::now(),
    });
    for _ in 0..lanes {
        let phase = Arc::clone(&phase);
        sizing.submit(move || summarize_next(phase));
    }
}

/// One lane of the parallel phase: summarizes the next span, then queues itself again (so
/// higher classes go first between spans); the last lane to run out starts the sequential
/// phase.
fn summarize_next(phase: Arc<SpanPhase>) {
    let sizing = Arc::clone(&phase.sizing);
    if sizing.stopped() {
        return;
    }
    let again = Arc::clone(&phase);
    if sizing.requeued_for_requests(move || summarize_next(again)) {
        return;
    }
    let sizing = &phase.sizing;
    let format = FORMATS[phase.format];
    let Some((part, span)) = phase.jobs.get(phase.next.fetch_add(1, Ordering::Relaxed)) else {
        if phase.lanes_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            log::log!(
                sizing.log_level,
                "background sizing: {} sealed segments summarized (by-offset/N{}) in {:.1} s",
                phase.jobs.len(),
                format.suffix(),
                phase.started.elapsed().as_secs_f64()
            );
            size_partition(sizing, phase.format, 0);
        }
        return;
    };
    let Some(fs) = sizing.fs.upgrade() else { return };
    // A span is summarized on an index of its own: it runs to its end (a pause would lose
    // it), stopping only when the filesystem closes.
    let go = || !sizing.stopped();
    // One span is one operation: it asks the partition's bounds once.
    let _op = Operation::begin_background();
    match fs.streams.summarize_span(Arc::clone(part), format, span, SIZING_STEP, &go) {
        Ok(_) => {}
        Err(e) => log::debug!(
            "background sizing of {}-{}{} segment {} stopped: {e}",
            part.topic(),
            part.partition(),
            format.suffix(),
            span.base
        ),
    }
    drop(fs);
    let again = Arc::clone(&phase);
    sizing.submit(move || summarize_next(again));
}

/// The sequential phase: partition `index` of the sizing's shared index in `format`, in steps
/// while [`MountSizing::go`]; paused (queued again) when a higher class waits, then the next
/// partition, then the next format.
fn size_partition(sizing: &Arc<MountSizing>, format: usize, index: usize) {
    if sizing.stopped() {
        return;
    }
    let Some(part) = sizing.parts.get(index) else {
        start_format(sizing, format + 1);
        return;
    };
    let again = Arc::clone(sizing);
    if sizing.requeued_for_requests(move || size_partition(&again, format, index)) {
        return;
    }
    let Some(fs) = sizing.fs.upgrade() else { return };
    let f = FORMATS[format];
    let go = || sizing.go();
    let _op = Operation::begin_background();
    let next = match fs.streams.size_in_background(Arc::clone(part), f, SIZING_STEP, &go) {
        Ok(true) => {
            sizing.sized.fetch_add(1, Ordering::Relaxed);
            index + 1
        }
        // Paused for a higher class (or stopping: checked when it runs again).
        Ok(false) => index,
        Err(e) => {
            log::debug!(
                "background sizing of {}-{}{} stopped: {e}",
                part.topic(),
                part.partition(),
                f.suffix()
            );
            index + 1
        }
    };
    drop(fs);
    let again = Arc::clone(sizing);
    sizing.submit(move || size_partition(&again, format, next));
}

/// Sizing steps a `stat` left to the background ([`Stream::stat_size`] answered
/// [`topicfs_view::StatSize::Deferred`]): each is a task of class [`Class::DeferredStat`] that
/// runs one [`Stream::size_step`] (one budget of sizing). A stream whose render index is
/// already waiting or being sized is not queued (one step sizes every stream of the index), and
/// at most [`MAX_PENDING_STEPS`] wait (more are dropped: a later `stat` asks again), so memory
/// stays bounded whatever is stat'ed. A step stops between its parts when a read-ahead task
/// waits and continues as a new task with the rest of its budget.
///
/// A step of a source that waits on the network (a cluster) shares the broker connection with
/// the callers' requests, and a broker answers a connection's requests in order: each of its
/// parts first waits for [`QUIET`] without a caller's operation
/// ([`Operation::quiet_for`]), at most [`MAX_QUIET_WAIT`], so a `stat` never waits behind the
/// step's Fetch while requests come, and the size is still exact in bounded time. (With a
/// connection of its own for background work this wait goes.) A local source's steps never
/// wait.
#[derive(Default)]
pub struct SizingSteps {
    shared: Arc<StepsShared>,
}

/// Steps waiting or running at most in a [`SizingSteps`].
pub const MAX_PENDING_STEPS: usize = 64;

#[derive(Default)]
struct StepsShared {
    /// Streams with a step queued or running.
    pending: Mutex<VecDeque<Arc<Stream>>>,
    /// Signalled when a step ends.
    changed: Condvar,
}

impl SizingSteps {
    /// Queues one sizing step of `stream` on `executor` (see the type's docs).
    pub fn continue_sizing(&self, stream: &Arc<Stream>, executor: &Executor) {
        {
            let mut pending = lock(&self.shared.pending);
            let queued = pending.iter().any(|s| s.sized_with(stream));
            if queued || pending.len() >= MAX_PENDING_STEPS || executor.is_shut_down() {
                return;
            }
            pending.push_back(Arc::clone(stream));
        }
        let done = StepDone { shared: Arc::clone(&self.shared), stream: Arc::clone(stream) };
        submit_step(done, executor.clone(), stream.sizing_budget());
    }

    /// Waits until no step is waiting or running, at most `timeout`; whether it got there
    /// (for tests and measurements that need a stat's step done).
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut pending = lock(&self.shared.pending);
        while !pending.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            pending = match self.shared.changed.wait_timeout(pending, left) {
                Ok((p, _)) => p,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        true
    }
}

/// Removes the stream from the pending steps when its step is over, or when the executor drops
/// the task at shutdown.
struct StepDone {
    shared: Arc<StepsShared>,
    stream: Arc<Stream>,
}

impl Drop for StepDone {
    fn drop(&mut self) {
        let mut pending = lock(&self.shared.pending);
        if let Some(i) = pending.iter().position(|s| Arc::ptr_eq(s, &self.stream)) {
            pending.remove(i);
        }
        self.shared.changed.notify_all();
    }
}

/// How long no caller's operation must have run before a part of a deferred step of a source
/// that waits on the network starts (see [`SizingSteps`]).
pub const QUIET: Duration = Duration::from_millis(20);

/// Whether no caller's operation (a filesystem request) has run for [`QUIET`]. Mount sizing
/// starts a task, and takes a step of a shared index, only then: its steps hold the index's
/// lock, which the next read of a reader of that stream would wait for. (Deferred stats do not
/// wait for this on a local source: a caller waits for their result.)
fn requests_quiet() -> bool {
    Operation::quiet_for().is_some_and(|q| q >= QUIET)
}

/// Longest a part of a deferred step of a source that waits on the network waits for [`QUIET`]:
/// past it the part runs anyway, so the size is exact in bounded time under steady reads.
pub const MAX_QUIET_WAIT: Duration = Duration::from_secs(1);

/// Waits until no caller's operation has run for [`QUIET`], at most [`MAX_QUIET_WAIT`] or
/// until `ex` shuts down.
fn wait_quiet_bounded(ex: &Executor) {
    let deadline = Instant::now() + MAX_QUIET_WAIT;
    while !ex.is_shut_down() && Instant::now() < deadline {
        if requests_quiet() {
            return;
        }
        std::thread::sleep(QUIET / 4);
    }
}

/// Queues the step of `done.stream` with `budget` bytes of log left.
fn submit_step(done: StepDone, executor: Executor, budget: u64) {
    let ex = executor.clone();
    executor.submit(Class::DeferredStat, Blocking::No, move || {
        let remote = done.stream.waits_on_network();
        let go = || {
            if remote {
                // Its Fetch would go ahead of a caller's next requests on the connection they
                // share (a broker answers a connection's requests in order).
                wait_quiet_bounded(&ex);
            }
            !ex.is_shut_down() && !ex.higher_waiting(Class::DeferredStat)
        };
        if remote {
            // The step's first read is asked before its first part: wait for it too.
            wait_quiet_bounded(&ex);
        }
        // One step is one operation: it asks the partition's bounds once.
        let _op = Operation::begin_background();
        let step = done.stream.size_step(SIZING_STEP, budget, &go);
        match step {
            Ok(left) if left > 0 && !ex.is_shut_down() => {
                // The rest of the budget, as a new task: the read-ahead waiting goes first.
                submit_step(done, ex, left);
            }
            Ok(_) => {}
            Err(e) => log::debug!("background sizing step stopped: {e}"),
        }
    });
}
