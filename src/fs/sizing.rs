//! Background sizing: after mount, background threads render (counting only) every
//! partition's streams towards their end, so that a brand-new directory gets exact sizes soon
//! after mount instead of at the first `stat` (SEMANTICS.md, "Background sizing"): first every
//! sealed segment on its own, in parallel (one thread per core but one, at most
//! [`MAX_SUMMARIZERS`]), into the segment cache; then each stream's shared index, which moves
//! over those segments without rendering them and renders the active segments; format by
//! format.
//!
//! Only partitions whose source keeps summaries of sealed spans (a log directory with a segment
//! cache, [`crate::source::SpanStore::sealed_span_at`]) are sized: for them the work is done once and
//! kept across remounts; a cluster's partitions would be fetched whole. Formats in order of
//! cost: values, raw, then JSON. Steps of [`SIZING_STEP`] bytes of log hold one render index's
//! lock at a time; readers of that format and partition wait at most one step, and what the
//! thread rendered is the index's, never rendered again by a reader.
//!
//! [`SizingSteps`]: the sizing a `stat` leaves to the background once a stream's index has been
//! sized to the budget short of the log end, so that every later `stat` answers at once (a
//! cluster mount: without waiting for a Fetch) and repeated stats still converge.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::source::{Operation, PartitionSource};
use crate::sync::lock;
use crate::view::Stream;
use crate::view::spec::Format;

use super::TopicFs;

/// Log bytes one step of background sizing renders while holding an index's lock.
pub const SIZING_STEP: u64 = 4 << 20;

impl TopicFs {
    /// Starts the background sizing thread over `fs` (held weakly: the thread ends when the
    /// filesystem is dropped or shut down, or when everything is sized). `None` when the
    /// thread could not be started (logged).
    pub fn start_background_sizing(fs: &Arc<TopicFs>) -> Option<std::thread::JoinHandle<()>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get().saturating_sub(1))
            .clamp(1, MAX_SUMMARIZERS);
        TopicFs::start_background_sizing_with(fs, threads)
    }

    /// [`TopicFs::start_background_sizing`] with `threads` summarizing sealed segments at once
    /// (at least one) instead of one per core but one.
    pub fn start_background_sizing_with(
        fs: &Arc<TopicFs>,
        threads: usize,
    ) -> Option<std::thread::JoinHandle<()>> {
        let weak = Arc::downgrade(fs);
        let spawned = std::thread::Builder::new()
            .name("topicfs-sizing".into())
            .spawn(move || size_everything(&weak, threads.max(1)));
        match spawned {
            Ok(handle) => Some(handle),
            Err(e) => {
                log::warn!("background sizing not started: {e}");
                None
            }
        }
    }
}

fn size_everything(weak: &Weak<TopicFs>, threads: usize) {
    let Some(fs) = weak.upgrade() else { return };
    let mut parts: Vec<Arc<dyn PartitionSource>> = Vec::new();
    for topic in fs.source.topics().unwrap_or_default() {
        for p in fs.source.partitions(&topic).unwrap_or_default() {
            let Ok(part) = fs.source.partition(&topic, p) else { continue };
            let keeps_summaries = part
                .summary()
                .and_then(|s| part.seek(s.log_start_offset))
                .is_ok_and(|c| part.span_store().and_then(|s| s.sealed_span_at(&c)).is_some());
            if keeps_summaries {
                parts.push(part);
            }
        }
    }
    drop(fs);
    let started = std::time::Instant::now();
    let mut sized = 0;
    for format in [Format::Values, Format::Raw, Format::Json] {
        if !summarize_sealed_spans(weak, &parts, format, threads) {
            return;
        }
        for part in &parts {
            let Some(fs) = weak.upgrade() else { return };
            // Between steps, waits for a quiet moment: a reader of the index being sized waits
            // for at most the step running when it came, never for a train of steps (the
            // index's lock is not fair: a thread taking it again at once keeps it).
            let go = || wait_quiet(&|| fs.closing.load(std::sync::atomic::Ordering::Relaxed));
            match fs.streams.size_in_background(Arc::clone(part), format, SIZING_STEP, &go) {
                Ok(true) => sized += 1,
                Ok(false) => return,
                Err(e) => log::debug!(
                    "background sizing of {}-{}{} stopped: {e}",
                    part.topic(),
                    part.partition(),
                    format.suffix()
                ),
            }
        }
    }
    log::info!(
        "background sizing: {sized} streams of {} partitions sized in {:.1} s",
        parts.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Threads that summarize sealed spans at once in background sizing by default: one per core
/// but one (kept for requests), at least one, at most this.
pub const MAX_SUMMARIZERS: usize = 4;

/// The parallel phase of background sizing in `format`: every sealed span of `parts`, each
/// rendered on an index of its own ([`crate::view::StreamRegistry::summarize_span`]) by one of
/// `threads` threads, so that the segment cache holds
/// every sealed segment's rendering and the sequential phase after it renders only the active
/// segments. Spans the cache already knows cost nothing. Each step waits for a quiet moment,
/// as the sequential phase does. `false` when the filesystem is closing or gone.
fn summarize_sealed_spans(
    weak: &Weak<TopicFs>,
    parts: &[Arc<dyn PartitionSource>],
    format: Format,
    threads: usize,
) -> bool {
    let mut jobs = Vec::new();
    for part in parts {
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
    let threads = threads.min(jobs.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    let work = || {
        while let Some((part, span)) =
            jobs.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
        {
            let Some(fs) = weak.upgrade() else { return false };
            let go = || wait_quiet(&|| fs.closing.load(std::sync::atomic::Ordering::Relaxed));
            let _op = Operation::begin_background();
            match fs.streams.summarize_span(Arc::clone(part), format, span, SIZING_STEP, &go) {
                Ok(true) => {}
                Ok(false) => return false,
                Err(e) => log::debug!(
                    "background sizing of {}-{}{} segment {} stopped: {e}",
                    part.topic(),
                    part.partition(),
                    format.suffix(),
                    span.base
                ),
            }
        }
        true
    };
    let finished = std::thread::scope(|scope| {
        let workers: Vec<_> = (1..threads)
            .filter_map(|n| {
                std::thread::Builder::new()
                    .name(format!("topicfs-sizing-{n}"))
                    .spawn_scoped(scope, work)
                    .map_err(|e| log::warn!("a background sizing thread not started: {e}"))
                    .ok()
            })
            .collect();
        let mine = work();
        workers.into_iter().all(|w| w.join().unwrap_or(false)) && mine
    });
    if finished && !jobs.is_empty() {
        log::info!(
            "background sizing: {} sealed segments summarized (by-offset/N{}) on {threads} \
             threads in {:.1} s",
            jobs.len(),
            format.suffix(),
            started.elapsed().as_secs_f64()
        );
    }
    finished
}

/// Sizing steps a `stat` left to the background ([`Stream::stat_size`] answered
/// [`crate::view::StatSize::Deferred`]): one worker thread, started at the first step and
/// ended when this is dropped, runs one [`Stream::size_step`] (one budget of sizing) per
/// step, in order, each as one [`crate::source::Operation`]. A stream whose render index is
/// already waiting or being sized is not queued (one step sizes every stream of the index),
/// and at most [`MAX_PENDING_STEPS`] wait (more are dropped: a later `stat` asks again), so
/// memory stays bounded whatever is stat'ed. A step starts only once no caller's operation
/// has run for [`QUIET`] ([`Operation::quiet_for`]): its Fetch would otherwise go ahead of the
/// caller's next requests on the connection they share (Kafka answers a connection's
/// requests in order), and `cat` would wait for it after all.
#[derive(Default)]
pub struct SizingSteps {
    shared: Arc<StepsShared>,
}

/// Steps waiting at most in a [`SizingSteps`] queue.
pub const MAX_PENDING_STEPS: usize = 64;

#[derive(Default)]
struct StepsShared {
    queue: Mutex<StepsQueue>,
    /// Signalled when a step is queued, when one ends, and when closing.
    changed: Condvar,
}

#[derive(Default)]
struct StepsQueue {
    pending: VecDeque<Arc<Stream>>,
    running: Option<Arc<Stream>>,
    started: bool,
    closing: bool,
}

impl SizingSteps {
    /// Queues one sizing step of `stream` (see the type's docs).
    pub fn continue_sizing(&self, stream: &Arc<Stream>) {
        let mut q = lock(&self.shared.queue);
        let queued = q.running.iter().chain(q.pending.iter()).any(|s| s.sized_with(stream));
        if q.closing || queued || q.pending.len() >= MAX_PENDING_STEPS {
            return;
        }
        if !q.started {
            let shared = Arc::clone(&self.shared);
            let spawned = std::thread::Builder::new()
                .name("topicfs-sizing-steps".into())
                .spawn(move || run_steps(&shared));
            if let Err(e) = spawned {
                log::warn!("sizing steps not started (sizes stay unknown until read): {e}");
                return;
            }
            q.started = true;
        }
        q.pending.push_back(Arc::clone(stream));
        self.shared.changed.notify_all();
    }

    /// Waits until no step is waiting or running, at most `timeout`; whether it got there
    /// (for tests and measurements that need a stat's step done).
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut q = lock(&self.shared.queue);
        while !q.pending.is_empty() || q.running.is_some() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            q = match self.shared.changed.wait_timeout(q, left) {
                Ok((q, _)) => q,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        true
    }
}

impl Drop for SizingSteps {
    fn drop(&mut self) {
        let mut q = lock(&self.shared.queue);
        q.closing = true;
        q.pending.clear();
        self.shared.changed.notify_all();
    }
}

/// How long no caller's operation must have run before a step of background sizing starts.
pub const QUIET: Duration = Duration::from_millis(20);

fn quiet() -> bool {
    Operation::quiet_for().is_some_and(|q| q >= QUIET)
}

/// Waits until no caller's operation has run for [`QUIET`]; `false` (at once) when `closing`.
fn wait_quiet(closing: &dyn Fn() -> bool) -> bool {
    loop {
        if closing() {
            return false;
        }
        if quiet() {
            return true;
        }
        std::thread::sleep(QUIET / 4);
    }
}

fn run_steps(shared: &StepsShared) {
    loop {
        let stream = {
            let mut q = lock(&shared.queue);
            q.running = None;
            shared.changed.notify_all();
            loop {
                if q.closing {
                    return;
                }
                if !q.pending.is_empty() && !quiet() {
                    // Requests of a step would queue ahead of a caller's on the connection
                    // they share: wait for a quiet moment.
                    q = match shared.changed.wait_timeout(q, QUIET / 4) {
                        Ok((q, _)) => q,
                        Err(poisoned) => poisoned.into_inner().0,
                    };
                    continue;
                }
                if let Some(s) = q.pending.pop_front() {
                    q.running = Some(Arc::clone(&s));
                    break s;
                }
                q = match shared.changed.wait(q) {
                    Ok(q) => q,
                    Err(poisoned) => poisoned.into_inner(),
                };
            }
        };
        // One step is one operation: it asks the partition's bounds once.
        let _op = Operation::begin_background();
        let closing = || lock(&shared.queue).closing;
        if let Err(e) = stream.size_step(SIZING_STEP, &|| wait_quiet(&closing)) {
            log::debug!("background sizing step stopped: {e}");
        }
    }
}
