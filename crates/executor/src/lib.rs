//! The mount's one background executor: a fixed pool of worker threads (`topicfs-bg-N`) that
//! runs every piece of work no caller waits for directly, by explicit priority.
//!
//! **Classes**, highest first ([`Class`]): read-ahead (a reader is about to ask for the
//! window), deferred stats (a `stat` answered "not yet known" and its exact size is being
//! worked out), mount sizing (every partition's streams towards their end after mount), then
//! store work (key-index builds and segment-cache writes).
//!
//! **Invariant** (priority order): a worker always takes the oldest task of the highest class
//! that has one waiting; within a class tasks start first in, first out. A lower class starts
//! only when no higher-class task waits, with one exception that bounds waiting: once
//! [`STARVATION_LIMIT`] tasks of higher classes have started in a row while a lower-class task
//! waited, the oldest task of the highest waiting lower class starts next. So a steady stream of
//! read-ahead (a reader that never pauses) delays a deferred stat's step by at most that many
//! read-ahead windows, never forever.
//!
//! **Invariant** (mount sizing leaves the cores to readers): a [`Class::MountSizing`] task
//! starts only while no task of a higher class waits *or runs* (the starvation bound does not
//! apply to it), and its steps stop while one does ([`Executor::higher_busy`]). Sizing a whole
//! mount is work no caller waits for; under steady read-ahead it pauses, as it paused for
//! requests before. A deferred stat's step, which a caller does wait for, does not pause.
//!
//! **Sizing**: `threads` workers (by default the cores, [`Executor::default_threads`]; the
//! mount option `--background-threads`), all started when the executor is made, so no thread is
//! ever started on a caller's (a FUSE request's) thread. A task that may wait on the network
//! (a read-ahead of a cluster partition) is submitted as [`Blocking::Network`]: while it runs
//! it does not count against `threads`, and its worker starts a spare worker if every other
//! one is busy, so one slow partition cannot take every worker from the others' read-ahead or
//! from the lower classes. Spare workers end when their blocking task ends and more than
//! `threads` workers are not blocked (unless the next task is a network one, which blocks it
//! again).
//!
//! **Invariant** (network tasks are bounded): at most `network` [`Blocking::Network`] tasks run
//! at once ([`NETWORK_TASKS`] by default, [`Executor::with_network`]); a network task beyond
//! that waits in its queue while tasks behind it that do not block start (the one exception to
//! first in, first out within a class). A spare worker is started only while fewer than
//! `threads` workers are not blocked, so at most `threads + network` workers exist at once
//! (and never more than [`MAX_WORKERS`]), however many handles or partitions are read. A
//! caller waiting for a network task it queued must not rely on it starting soon: the cluster
//! backend's readers run a prefetch no worker has started yet themselves.
//!
//! **Invariant** (no lost wake-ups): every push and every check of the queues happens under
//! the one state lock; a worker waits on the condition variable only after finding no task it
//! may start under that lock, and every push, and every end of a network task while a network
//! task waits (held back by the bound), notifies one waiting worker under it.
//!
//! **Shutdown** ([`Executor::shutdown`], the mount's shutdown path; also started, without
//! waiting, when the last handle is dropped): tasks still queued are dropped without running
//! (their closures are dropped, outside the lock), tasks running finish, and `shutdown` joins
//! every worker (except the calling thread, if it is one). Tasks pushed after shutdown are
//! dropped at once. Work that must not be lost therefore never lives only in the queue: every
//! user re-creates it (a read-ahead window is read directly, a size is worked out by the next
//! `stat`, a cache entry is written again when next computed).

use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod dedicated;
mod periodic;

pub use dedicated::{dedicated_threads, spawn_dedicated};
pub use periodic::Periodic;

/// Priority classes of background work, highest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Rendering the next window of a handle read sequentially.
    ReadAhead = 0,
    /// A `stat`'s exact size, deferred because it needs more than a request renders itself.
    DeferredStat = 1,
    /// Sizing every partition's streams after mount.
    MountSizing = 2,
    /// Key-index builds, segment-cache writes, and the periodic retention and cleaner passes.
    Store = 3,
}

/// Number of [`Class`]es.
const CLASSES: usize = 4;

impl Class {
    /// Every class, highest first.
    pub const ALL: [Class; CLASSES] =
        [Class::ReadAhead, Class::DeferredStat, Class::MountSizing, Class::Store];

    fn index(self) -> usize {
        self as usize
    }

    fn of_index(index: usize) -> Option<Class> {
        Class::ALL.get(index).copied()
    }
}

thread_local! {
    /// The class of the task the calling thread runs now, when it is a worker running one.
    static RUNNING: std::cell::Cell<Option<Class>> = const { std::cell::Cell::new(None) };
}

/// The class of the background task the calling thread is running, if it is a worker of an
/// executor running one (`None` on any other thread, a request's included). A backend uses it
/// to keep background work off its readers' way: a cluster sends the requests of deferred stats
/// and mount sizing on a connection of their own, so they never queue before a reader's at the
/// broker.
pub fn running_class() -> Option<Class> {
    RUNNING.with(std::cell::Cell::get)
}

/// Whether a task may wait on something other than the CPU and local disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocking {
    /// Renders, reads local files: counts against the executor's `threads`.
    No,
    /// May wait on the network (a cluster's Fetch): does not count against `threads` while it
    /// runs (see the module docs).
    Network,
}

/// Higher-class tasks that start in a row while a lower-class task waits before that one
/// starts (see the module docs).
pub const STARVATION_LIMIT: u32 = 16;

/// Most workers at once, spare ones for blocking tasks included.
pub const MAX_WORKERS: usize = 128;

/// Most workers configured (`--background-threads`).
pub const MAX_THREADS: usize = 64;

/// Most [`Blocking::Network`] tasks running at once unless [`Executor::with_network`] says
/// otherwise: a cluster's prefetches of four partitions at full depth (eight each), or the
/// read-ahead of as many handles; more wait in their queue (see the module docs).
pub const NETWORK_TASKS: usize = 32;

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Task {
    job: Job,
    blocking: Blocking,
    class: usize,
    /// A task that may hold its worker long (a periodic cleaner or retention pass,
    /// [`Executor::every`]): counted like a network task while it runs (it does not count
    /// against `threads`, so a spare worker keeps `threads` free for the others), but not
    /// against the network bound.
    long: bool,
}

/// A task queued to start at `at` ([`Executor::submit_after`]); ordered by `at`, then by
/// submission (`seq`), earliest first in a max-heap.
struct Timed {
    at: Instant,
    seq: u64,
    task: Task,
}

impl PartialEq for Timed {
    fn eq(&self, other: &Timed) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Timed {}

impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Timed) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Timed {
    fn cmp(&self, other: &Timed) -> std::cmp::Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// A handle on the executor. Cheap to clone (every clone is the same pool); the workers are
/// told to end (without being joined) when the last clone is dropped.
#[derive(Clone)]
pub struct Executor {
    owner: Arc<Owner>,
}

/// Dropped with the last [`Executor`]: starts the shutdown.
struct Owner {
    inner: Arc<Inner>,
}

struct Inner {
    threads: usize,
    /// Most [`Blocking::Network`] tasks running at once.
    network: usize,
    state: Mutex<State>,
    work: Condvar,
    /// Signalled whenever a task ends (for [`Executor::wait_idle`]).
    done: Condvar,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Default)]
struct State {
    queues: [VecDeque<Task>; CLASSES],
    /// Tasks waiting for their start time; moved to their class's queue when it has come.
    timed: BinaryHeap<Timed>,
    /// Timed tasks ever queued (orders tasks of the same start time).
    timed_seq: u64,
    /// Workers alive.
    workers: usize,
    /// Workers waiting for a task.
    idle: usize,
    /// Workers running a [`Blocking::Network`] task or a long one ([`Task::long`]).
    blocked: usize,
    /// Of `blocked`, the workers running a long task.
    long: usize,
    /// Tasks running.
    running: usize,
    /// Tasks running, by class.
    running_class: [usize; CLASSES],
    /// Higher-class tasks started in a row while a lower-class task waited.
    passed_over: u32,
    /// Workers ever started (names them).
    named: usize,
    shutdown: bool,
}

impl State {
    fn waiting(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }

    /// Whether a task of class `class` may start now: [`Class::MountSizing`] waits while a
    /// higher-class task runs (see the module docs); every other class may.
    fn may_start(&self, class: usize) -> bool {
        class != Class::MountSizing.index() || self.running_class[..class].iter().all(|&n| n == 0)
    }

    /// Whether a task of a class higher than `class` waits or runs.
    fn higher_busy(&self, class: usize) -> bool {
        self.queues[..class].iter().any(|q| !q.is_empty())
            || self.running_class[..class].iter().any(|&n| n > 0)
    }

    /// Where the first task of `class` that may start now is in its queue: the oldest, or
    /// the oldest that does not block while `network` network tasks run (see the module docs).
    fn startable(&self, class: usize, network: usize) -> Option<usize> {
        if !self.may_start(class) {
            return None;
        }
        let full = self.blocked - self.long >= network;
        self.queues[class].iter().position(|t| !full || t.blocking == Blocking::No)
    }

    /// The next task by the priority rule (see the module docs): its class, its place in the
    /// queue, and the count of higher-class tasks passed over once it starts.
    fn next(&self, network: usize) -> Option<(usize, usize, u32)> {
        let first = (0..CLASSES).find_map(|c| Some((c, self.startable(c, network)?)))?;
        let lower = (first.0 + 1..CLASSES).find_map(|c| Some((c, self.startable(c, network)?)));
        Some(match lower {
            Some((c, at)) if self.passed_over >= STARVATION_LIMIT => (c, at, 0),
            Some(_) => (first.0, first.1, self.passed_over.saturating_add(1)),
            None => (first.0, first.1, 0),
        })
    }

    /// Moves the timed tasks whose start time has come to their queues, in start order; the
    /// start time of the next one still waiting.
    fn promote_due(&mut self, now: Instant) -> Option<Instant> {
        while self.timed.peek().is_some_and(|t| t.at <= now) {
            if let Some(t) = self.timed.pop() {
                self.queues[t.task.class].push_back(t.task);
            }
        }
        self.timed.peek().map(|t| t.at)
    }

    /// Takes the task [`State::next`] chose.
    fn take(&mut self, (class, at, passed_over): (usize, usize, u32)) -> Option<Task> {
        self.passed_over = passed_over;
        self.queues[class].remove(at)
    }
}

impl Executor {
    /// An executor of `threads` workers (1 to [`MAX_THREADS`]), all started now, running at
    /// most [`NETWORK_TASKS`] network tasks at once.
    pub fn new(threads: usize) -> Executor {
        Executor::with_network(threads, NETWORK_TASKS)
    }

    /// An executor of `threads` workers (1 to [`MAX_THREADS`]), all started now, running at
    /// most `network` [`Blocking::Network`] tasks at once (1 to [`MAX_WORKERS`] - `threads`):
    /// at most `threads + network` workers exist at once (see the module docs).
    pub fn with_network(threads: usize, network: usize) -> Executor {
        let threads = threads.clamp(1, MAX_THREADS);
        let network = network.clamp(1, MAX_WORKERS - threads);
        let inner = Arc::new(Inner {
            threads,
            network,
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            done: Condvar::new(),
            handles: Mutex::new(Vec::new()),
        });
        {
            let mut st = lock(&inner.state);
            for _ in 0..threads {
                Inner::spawn(&inner, &mut st);
            }
        }
        Executor { owner: Arc::new(Owner { inner }) }
    }

    /// The default number of workers: the machine's cores (what
    /// `std::thread::available_parallelism` reports), at most [`MAX_THREADS`].
    pub fn default_threads() -> usize {
        std::thread::available_parallelism().map_or(2, |n| n.get()).min(MAX_THREADS)
    }

    /// The configured number of workers.
    pub fn threads(&self) -> usize {
        self.owner.inner.threads
    }

    /// The most [`Blocking::Network`] tasks running at once.
    pub fn network(&self) -> usize {
        self.owner.inner.network
    }

    /// Workers alive now (spare ones included).
    pub fn workers(&self) -> usize {
        lock(&self.owner.inner.state).workers
    }

    /// Tasks waiting to start.
    pub fn waiting(&self) -> usize {
        lock(&self.owner.inner.state).waiting()
    }

    /// Whether a task of a class higher than `class` waits: a long task of `class` that can
    /// stop and continue later (as a new task) stops here, so that the priority order holds
    /// between its steps too.
    pub fn higher_waiting(&self, class: Class) -> bool {
        let st = lock(&self.owner.inner.state);
        st.queues.iter().take(class.index()).any(|q| !q.is_empty())
    }

    /// Whether a task of a class higher than `class` waits or runs: mount sizing stops between
    /// its steps then (see the module docs).
    pub fn higher_busy(&self, class: Class) -> bool {
        lock(&self.owner.inner.state).higher_busy(class.index())
    }

    /// Whether the executor was shut down: a running task that can stop early stops.
    pub fn is_shut_down(&self) -> bool {
        lock(&self.owner.inner.state).shutdown
    }

    /// Queues `job` in `class`; dropped at once after shutdown.
    pub fn submit(&self, class: Class, blocking: Blocking, job: impl FnOnce() + Send + 'static) {
        let inner = &self.owner.inner;
        let mut st = lock(&inner.state);
        if st.shutdown {
            drop(st);
            return;
        }
        st.queues[class.index()].push_back(Task {
            job: Box::new(job),
            blocking,
            class: class.index(),
            long: false,
        });
        if st.idle > 0 {
            inner.work.notify_one();
        }
    }

    /// Queues `job` in `class` to start once `delay` has passed (then by the same priority
    /// rule as every task: a busy executor may start it later); dropped at once after
    /// shutdown, and dropped unrun by a shutdown before it starts.
    pub fn submit_after(
        &self,
        delay: Duration,
        class: Class,
        blocking: Blocking,
        job: impl FnOnce() + Send + 'static,
    ) {
        let task = Task { job: Box::new(job), blocking, class: class.index(), long: false };
        self.owner.inner.submit_timed(delay, task);
    }

    /// Runs `jobs` in `class` and returns their results in order: each job is queued, and the
    /// calling thread runs the ones no worker has started yet itself, then waits for the rest.
    /// So a caller (a FUSE request, or a task of this executor) starts no thread, never waits
    /// for a queue it could serve itself, and cannot deadlock the pool by waiting in a worker.
    /// A job whose task was dropped by shutdown runs on the calling thread; a job's panic is
    /// raised on the calling thread.
    pub fn run_all<T: Send + 'static>(
        &self,
        class: Class,
        jobs: Vec<Box<dyn FnOnce() -> T + Send + 'static>>,
    ) -> Vec<T> {
        self.run_jobs(class, jobs, false, || ()).0
    }

    /// [`Executor::run_all`] with `beside` (which may borrow from the caller) run on the
    /// calling thread while workers start on `jobs`; the caller then runs the jobs no worker
    /// has started and waits for the rest. Returns the jobs' results in order and `beside`'s.
    /// Used by a key query: the active segment's index catches up on the caller while sealed
    /// segments' indexes build.
    pub fn run_all_beside<T: Send + 'static, R>(
        &self,
        class: Class,
        jobs: Vec<Box<dyn FnOnce() -> T + Send + 'static>>,
        beside: impl FnOnce() -> R,
    ) -> (Vec<T>, R) {
        self.run_jobs(class, jobs, true, beside)
    }

    fn run_jobs<T: Send + 'static, R>(
        &self,
        class: Class,
        jobs: Vec<Box<dyn FnOnce() -> T + Send + 'static>>,
        queue_first: bool,
        beside: impl FnOnce() -> R,
    ) -> (Vec<T>, R) {
        let n = jobs.len();
        let shared: Arc<RunAll<T>> = Arc::new(RunAll {
            slots: Mutex::new(jobs.into_iter().map(|j| Slot::Waiting(Some(j))).collect()),
            finished: Condvar::new(),
        });
        // Without work beside, the first job is the caller's own; the others may go to workers.
        let first_queued = usize::from(!queue_first);
        for i in first_queued..n {
            let shared = Arc::clone(&shared);
            self.submit(class, Blocking::No, move || shared.run(i));
        }
        let beside = beside();
        for i in 0..n {
            shared.run(i);
        }
        let mut slots = lock(&shared.slots);
        loop {
            if slots.iter().all(|s| matches!(s, Slot::Done(_))) {
                break;
            }
            slots = shared.finished.wait(slots).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        let done: Vec<std::thread::Result<T>> = slots
            .drain(..)
            .filter_map(|s| match s {
                Slot::Done(v) => Some(v),
                _ => None,
            })
            .collect();
        drop(slots);
        // A job's panic is the caller's, as if it had run the job itself.
        let done =
            done.into_iter().map(|v| v.unwrap_or_else(|p| std::panic::resume_unwind(p))).collect();
        (done, beside)
    }

    /// Waits until no task waits or runs, at most `timeout`; whether it got there (for tests
    /// and measurements).
    pub fn wait_idle(&self, timeout: std::time::Duration) -> bool {
        let inner = &self.owner.inner;
        let deadline = std::time::Instant::now() + timeout;
        let mut st = lock(&inner.state);
        while st.waiting() > 0 || st.running > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            st = match inner.done.wait_timeout(st, left) {
                Ok((st, _)) => st,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        true
    }

    /// Stops the executor: queued tasks are dropped without running, running ones finish, and
    /// every worker is joined (but the calling thread, if it is one). Idempotent.
    pub fn shutdown(&self) {
        let inner = &self.owner.inner;
        inner.stop();
        let me = std::thread::current().id();
        let handles: Vec<JoinHandle<()>> = std::mem::take(&mut *lock(&inner.handles));
        for h in handles {
            if h.thread().id() != me && h.join().is_err() {
                log::warn!("a background worker panicked");
            }
        }
    }
}

impl Default for Executor {
    fn default() -> Executor {
        Executor::new(Executor::default_threads())
    }
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor").field("threads", &self.threads()).finish()
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.inner.stop();
    }
}

impl Inner {
    /// Queues `task` to start after `delay` (see [`Executor::submit_after`]).
    fn submit_timed(&self, delay: Duration, task: Task) {
        let mut st = lock(&self.state);
        if st.shutdown {
            drop(st);
            return;
        }
        let at = Instant::now() + delay;
        st.timed_seq += 1;
        let seq = st.timed_seq;
        st.timed.push(Timed { at, seq, task });
        // Every idle worker waits at most until the earliest start time: wake them to look at
        // the new one.
        if st.idle > 0 {
            self.work.notify_all();
        }
    }

    /// Marks shutdown, drops the queued and timed tasks (outside the lock) and wakes every
    /// worker.
    fn stop(&self) {
        let dropped: (Vec<Task>, BinaryHeap<Timed>) = {
            let mut st = lock(&self.state);
            st.shutdown = true;
            self.work.notify_all();
            self.done.notify_all();
            let queued = st.queues.iter_mut().flat_map(|q| q.drain(..)).collect();
            (queued, std::mem::take(&mut st.timed))
        };
        drop(dropped);
    }

    /// Starts one worker (counted in `st`); logged when the thread cannot be started.
    fn spawn(inner: &Arc<Inner>, st: &mut State) {
        st.named += 1;
        let name = format!("topicfs-bg-{}", st.named);
        let me = Arc::clone(inner);
        match std::thread::Builder::new().name(name).spawn(move || me.run()) {
            Ok(h) => {
                st.workers += 1;
                lock(&inner.handles).push(h);
            }
            Err(e) => log::warn!("a background worker not started: {e}"),
        }
    }

    /// A worker: runs tasks by priority until shutdown, or until it is a spare no longer
    /// needed.
    fn run(self: Arc<Self>) {
        let mut st = lock(&self.state);
        loop {
            let next_timed = st.promote_due(Instant::now());
            let next = st.next(self.network);
            // A spare worker stays for a network task: running it, it is blocked again.
            let spare = st.workers - st.blocked > self.threads
                && !next.is_some_and(|(c, at, _)| {
                    st.queues[c].get(at).is_some_and(|t| t.blocking == Blocking::Network)
                });
            if st.shutdown || spare {
                st.workers -= 1;
                return;
            }
            let Some(task) = next.and_then(|n| st.take(n)) else {
                st.idle += 1;
                st = match next_timed {
                    None => self.work.wait(st).unwrap_or_else(std::sync::PoisonError::into_inner),
                    Some(at) => {
                        let left = at.saturating_duration_since(Instant::now());
                        match self.work.wait_timeout(st, left) {
                            Ok((st, _)) => st,
                            Err(poisoned) => poisoned.into_inner().0,
                        }
                    }
                };
                st.idle -= 1;
                continue;
            };
            st.running += 1;
            st.running_class[task.class] += 1;
            let class = task.class;
            let long = task.long;
            let blocking = task.blocking == Blocking::Network || long;
            if blocking {
                st.blocked += 1;
                st.long += usize::from(long);
                // Keep `threads` workers free of network waits, so that a task pushed later
                // finds one (a caller never starts a worker itself).
                if st.workers - st.blocked < self.threads && st.workers < MAX_WORKERS {
                    Inner::spawn(&self, &mut st);
                }
            }
            drop(st);
            let job = task.job;
            RUNNING.with(|r| r.set(Class::of_index(class)));
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
                log::warn!("a background task panicked");
            }
            RUNNING.with(|r| r.set(None));
            st = lock(&self.state);
            st.running -= 1;
            st.running_class[class] -= 1;
            if blocking {
                st.blocked -= 1;
                st.long -= usize::from(long);
                // A network task held back by the bound may start now.
                if st.idle > 0
                    && st.queues.iter().flatten().any(|t| t.blocking == Blocking::Network)
                {
                    self.work.notify_one();
                }
            }
            if st.idle > 0 && class < Class::MountSizing.index() {
                // Mount sizing may start now that a higher-class task ended.
                if !st.queues[Class::MountSizing.index()].is_empty() {
                    self.work.notify_all();
                }
            }
            self.done.notify_all();
        }
    }
}

/// The jobs of one [`Executor::run_all`].
struct RunAll<T> {
    slots: Mutex<Vec<Slot<T>>>,
    finished: Condvar,
}

enum Slot<T> {
    Waiting(Option<Box<dyn FnOnce() -> T + Send + 'static>>),
    Running,
    Done(std::thread::Result<T>),
}

impl<T> RunAll<T> {
    /// Runs job `i` unless someone started it already.
    fn run(&self, i: usize) {
        let job = {
            let mut slots = lock(&self.slots);
            match slots.get_mut(i) {
                Some(slot @ Slot::Waiting(_)) => match std::mem::replace(slot, Slot::Running) {
                    Slot::Waiting(job) => job,
                    _ => None,
                },
                _ => None,
            }
        };
        let Some(job) = job else { return };
        let value = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        let mut slots = lock(&self.slots);
        if let Some(slot) = slots.get_mut(i) {
            *slot = Slot::Done(value);
        }
        self.finished.notify_all();
    }
}

#[cfg(test)]
mod tests;

/// Locks `mutex`, recovering it if a task panicked while holding it (as the other crates'
/// `sync::lock`: every critical section here leaves its data consistent between statements
/// that can panic).
fn lock<T: ?Sized>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
