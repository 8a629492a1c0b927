//! Read-ahead for streams read sequentially: the mount's background executor
//! ([`topicfs_executor`], class [`Class::ReadAhead`], its highest) renders the next windows of
//! the handles reading in order while their readers' threads hand the current ones to the
//! kernel, within the mount's memory budget.
//!
//! Rendering a window (read the batches, check, decode, render) costs more than handing it
//! over (the FUSE reply, which the kernel copies into the reader's buffer); done one after the
//! other they add up. A [`ReadAhead`] belongs to one open handle. After two reads in a row that
//! each returned a whole window of at least [`MIN_AHEAD_WINDOW`] bytes the handle *reads
//! ahead*: it queues itself on the mount's [`AheadPool`], one executor task per window (the
//! executor's workers are a fixed number; never a thread per handle), each claiming the
//! handle's next window of the same size, rendering it, filing it, and queueing the handle
//! again while it has room. Up to
//! [`MAX_PARALLEL`] windows of one handle render at once (a stream serves any offset from the
//! checkpoint before it), so one reader keeps the cores busy; the queue is first in, first
//! out, one window per turn, so handles take turns. The next read at the expected offset takes
//! its window (waiting for it while a worker renders it) instead of rendering. Any other read
//! (a seek, another size) drops the windows and reads directly.
//!
//! **Budget.** A window is claimed only with a reservation of its size from the mount's
//! [`MemoryBudget`] that fits the handle's fair share (the limit over the handles reading
//! ahead) and the limit, and only while the handle holds less than [`MAX_AHEAD_BYTES`] ahead.
//! A handle whose window does not fit reads on demand, exactly as without read-ahead, and tries
//! again at its next read: slower, never refused. A direct read reserves its window as needed
//! bytes ([`MemoryBudget::reserve`]) for as long as it renders.
//!
//! **Invariant**: every window held is exactly what the source returned for its offset and
//! size when a worker read it, and a read is served a window only at exactly that offset (the
//! offset where the previous read ended). So a read served from a window returns what a direct
//! read would have returned at that moment. Before serving one the source is asked whether it
//! still holds those bytes ([`AheadSource::holds`]): bytes of records that retention deleted
//! meanwhile are not served (the direct read then reports them stale). An error is a window
//! too: returned at its offset, after every byte before it.
//!
//! Claims stop at a window that came back short (the current end of the stream: a growing
//! stream is then read directly, as `tail -f` does, until whole windows start read-ahead
//! again) or failed, and when the windows are dropped or the handle is closed (a worker then
//! discards what it rendered). No lock is held while a worker renders.
//!
//! **Invariant** (no lost wake-ups): only a reader waits on a handle's condition variable, and
//! only while a worker is rendering the window at its offset (it is in `reading`, which holds
//! windows of the current epoch only). Every removal from `reading` (a window filed, the
//! windows dropped by any thread's read elsewhere or by the close) notifies under the handle's
//! lock. A worker waits only on the executor's queue (see its own no-lost-wake-up invariant).
//! A window queued when the executor shuts down is dropped unrendered: its handle's `queued`
//! count stays up, so the handle claims nothing more and its reader reads directly.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex};

use bytes::Bytes;

use crate::budget::{MemoryBudget, Reservation, Streaming};
use topicfs_executor::{Blocking, Class, Executor};
use topicfs_source::error::Result;
use topicfs_source::sync::lock;

/// Most bytes rendered ahead of the reader per handle (windows ready or being rendered), when
/// its fair share of the budget allows that much.
pub const MAX_AHEAD_BYTES: usize = 2 << 20;

/// Smallest read size that gets read-ahead: small reads (a lookup reading the first records, a
/// program scanning with a small buffer) are served directly.
pub const MIN_AHEAD_WINDOW: usize = 64 << 10;

/// Whole sequential reads in a row before read-ahead starts: one read is often all there is.
const STREAK_TO_START: u32 = 2;

/// Most windows of one handle rendering (or queued to render) at once.
pub const MAX_PARALLEL: usize = 2;

/// What a [`ReadAhead`] reads from.
pub trait AheadSource: Send + Sync {
    /// Up to `len` bytes at file offset `offset`: exactly what a full read has there, fewer only
    /// at the current end.
    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes>;
    /// Whether bytes at `offset` read earlier may still be served (their records exist).
    fn holds(&self, offset: u64) -> Result<bool>;
    /// Whether a read may wait on the network (a cluster's Fetch), not only on the CPU and
    /// local disk.
    fn waits_on_network(&self) -> bool {
        false
    }
}

/// The mount's read-ahead: the background executor its windows render on (class
/// [`Class::ReadAhead`], the highest) and the budget they come out of. Cheap to clone (every
/// clone is the same pool).
#[derive(Clone)]
pub struct AheadPool {
    inner: Arc<Pool>,
}

struct Pool {
    budget: Arc<MemoryBudget>,
    executor: Executor,
}

impl AheadPool {
    /// Read-ahead on `executor` over `budget`.
    pub fn new(executor: Executor, budget: Arc<MemoryBudget>) -> AheadPool {
        AheadPool { inner: Arc::new(Pool { budget, executor }) }
    }

    /// The budget windows are reserved from.
    pub fn budget(&self) -> &Arc<MemoryBudget> {
        &self.inner.budget
    }

    /// The executor windows render on.
    pub fn executor(&self) -> &Executor {
        &self.inner.executor
    }
}

impl Pool {
    /// Queues one window of `handle` on the executor. A window of a source that may wait on
    /// the network is a [`Blocking::Network`] task: a slow partition's windows do not take the
    /// workers from the other handles' read-ahead (see [`topicfs_executor`]).
    fn push(self: &Arc<Self>, handle: Arc<Shared>) {
        let pool = Arc::clone(self);
        let blocking =
            if handle.source.waits_on_network() { Blocking::Network } else { Blocking::No };
        self.executor.submit(Class::ReadAhead, blocking, move || pool.render_one(&handle));
    }

    /// Claims, renders and files the next window of `handle`, if it still wants one and the
    /// budget has room; queues the handle again while it has room for more.
    fn render_one(self: &Arc<Self>, handle: &Arc<Shared>) {
        let mut st = lock(&handle.state);
        st.queued = st.queued.saturating_sub(1);
        let len = st.window;
        if !st.has_room() || st.ahead().saturating_add(len as u64) > self.cap() as u64 {
            return;
        }
        let Some(held) = self.budget.try_reserve(len) else { return };
        let (at, epoch) = (st.claim_at, st.epoch);
        st.claim_at = at.saturating_add(len as u64);
        st.reading.insert(at);
        // Another worker may render the window after this one meanwhile.
        self.queue_if_room(handle, &mut st);
        drop(st);
        let read = handle.source.read_at(at, len);
        let mut st = lock(&handle.state);
        if st.epoch != epoch || st.closed {
            return;
        }
        st.reading.remove(&at);
        if !matches!(&read, Ok(bytes) if bytes.len() == len) {
            st.stopped = true;
        }
        st.ready.insert(at, Window { read, _held: held });
        handle.changed.notify_all();
        self.queue_if_room(handle, &mut st);
    }

    /// Queues `handle` once more if it may claim another window now.
    fn queue_if_room(self: &Arc<Self>, handle: &Arc<Shared>, st: &mut State) {
        if st.has_room()
            && st.queued + st.reading.len() < MAX_PARALLEL
            && st.ahead().saturating_add(st.window as u64) <= self.cap() as u64
        {
            st.queued += 1;
            self.push(Arc::clone(handle));
        }
    }

    /// Most bytes one handle renders ahead now: its fair share, at most [`MAX_AHEAD_BYTES`].
    fn cap(&self) -> usize {
        self.budget.share().min(MAX_AHEAD_BYTES)
    }
}

/// Read-ahead state of one open handle; see the module docs.
pub struct ReadAhead {
    shared: Arc<Shared>,
    pool: AheadPool,
}

struct Shared {
    source: Arc<dyn AheadSource>,
    state: Mutex<State>,
    changed: Condvar,
}

/// A window read ahead: what the source returned (bytes or an error), and its reservation.
struct Window {
    read: Result<Bytes>,
    _held: Reservation,
}

#[derive(Default)]
struct State {
    /// The offset a sequential reader asks for next.
    next: u64,
    /// Size of the windows read ahead (the reader's last read size).
    window: usize,
    /// Windows read ahead, by offset.
    ready: BTreeMap<u64, Window>,
    /// Windows a worker is reading now, by offset (current epoch only).
    reading: BTreeSet<u64>,
    /// The offset of the next window to claim (`next` plus every window claimed since).
    claim_at: u64,
    /// A window came back short (the stream's current end) or failed: no more claims.
    stopped: bool,
    /// Reading ahead: counted in the budget's fair share while set.
    streaming: Option<Streaming>,
    /// Entries of this handle in the pool's queue.
    queued: usize,
    /// Whole reads in a row, each at the offset the previous one ended.
    streak: u32,
    /// Bumped whenever the windows are dropped: a worker rendering for an older epoch
    /// discards what it read.
    epoch: u64,
    closed: bool,
}

impl State {
    /// Whether the handle may claim its next window (budget aside).
    fn has_room(&self) -> bool {
        self.streaming.is_some() && !self.closed && !self.stopped
    }

    /// Bytes claimed ahead of the reader.
    fn ahead(&self) -> u64 {
        self.claim_at.saturating_sub(self.next)
    }
}

impl ReadAhead {
    /// Read-ahead over `source` on `pool`, idle until the first whole sequential reads.
    pub fn new(source: Arc<dyn AheadSource>, pool: &AheadPool) -> ReadAhead {
        let shared = Arc::new(Shared {
            source,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        ReadAhead { shared, pool: pool.clone() }
    }

    fn pool(&self) -> &Arc<Pool> {
        &self.pool.inner
    }

    /// Up to `len` bytes at `offset`, as [`AheadSource::read_at`] returns them.
    pub fn read(&self, offset: u64, len: usize) -> Result<Bytes> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        if let Some(served) = self.take_ready(offset, len)? {
            return served;
        }
        let rendering = self.pool().budget.reserve(len);
        let bytes = self.shared.source.read_at(offset, len)?;
        drop(rendering);
        let mut st = lock(&self.shared.state);
        let sequential = offset == st.next && len == st.window;
        st.streak = match (bytes.len() == len, sequential) {
            (true, true) => st.streak.saturating_add(1),
            (true, false) => 1,
            (false, _) => 0,
        };
        st.next = offset.saturating_add(bytes.len() as u64);
        st.window = len;
        if st.streaming.is_some() && !(sequential && bytes.len() == len && st.claim_at == st.next) {
            // A seek, another size, the current end, or another thread's read meanwhile.
            drop_windows(&self.shared, &mut st);
        }
        let start = st.streak >= STREAK_TO_START && len >= MIN_AHEAD_WINDOW;
        if start && st.streaming.is_none() && !st.closed {
            // Whole windows in a row: more is likely to follow.
            drop_windows(&self.shared, &mut st);
            st.claim_at = st.next;
            st.streaming = Some(self.pool().budget.streaming_handle());
        }
        self.pool().queue_if_room(&self.shared, &mut st);
        Ok(bytes)
    }

    /// Serves a read at the expected offset from a window read ahead (waiting for it when a
    /// worker is on it). `None`: no window for it; the windows are dropped and the caller
    /// reads directly.
    fn take_ready(&self, offset: u64, len: usize) -> Result<Option<Result<Bytes>>> {
        let mut st = lock(&self.shared.state);
        if offset != st.next || len != st.window {
            drop_windows(&self.shared, &mut st);
            return Ok(None);
        }
        while !st.ready.contains_key(&offset) && st.reading.contains(&offset) {
            st = self.shared.changed.wait(st).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        let Some(window) = st.ready.remove(&offset) else {
            if st.streaming.is_some() && st.claim_at == offset && st.ready.is_empty() {
                // Reading ahead, but no window was claimed here yet (the workers are busy or
                // the budget is spent): the caller reads this one itself; the workers go on
                // after it.
                st.claim_at = offset.saturating_add(len as u64);
            } else {
                drop_windows(&self.shared, &mut st);
            }
            return Ok(None);
        };
        let epoch = st.epoch;
        drop(st);
        let bytes = match window.read {
            Ok(bytes) => bytes,
            Err(e) => {
                drop_windows(&self.shared, &mut lock(&self.shared.state));
                return Ok(Some(Err(e)));
            }
        };
        // Outside the lock: may take the source's own locks.
        let holds = self.shared.source.holds(offset)?;
        let mut st = lock(&self.shared.state);
        if !holds || st.epoch != epoch || st.next != offset {
            drop_windows(&self.shared, &mut st);
            return Ok(None);
        }
        st.next = offset.saturating_add(bytes.len() as u64);
        self.pool().queue_if_room(&self.shared, &mut st);
        Ok(Some(Ok(bytes)))
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        let mut st = lock(&self.shared.state);
        st.closed = true;
        drop_windows(&self.shared, &mut st);
    }
}

/// Drops every window read ahead and stops reading ahead; windows being rendered are
/// discarded when done, and a reader waiting for one (another thread of the same handle) wakes
/// up and reads directly.
fn drop_windows(shared: &Shared, st: &mut State) {
    // Only a window being rendered can be waited for: without one there is nobody to wake (a
    // seek or a lookup's small read, the common case, makes no wake-up call).
    if !st.reading.is_empty() {
        shared.changed.notify_all();
    }
    st.ready.clear();
    st.reading.clear();
    st.stopped = false;
    st.streaming = None;
    st.epoch = st.epoch.wrapping_add(1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use topicfs_source::error::Error;

    fn pool() -> AheadPool {
        AheadPool::new(Executor::new(2), MemoryBudget::new(64 << 20))
    }

    /// A growing file of `len` bytes (byte `i` is `i % 251`), with a failure at `bad` and
    /// nothing held below `gone`.
    struct Model {
        len: AtomicU64,
        bad: Option<u64>,
        gone: AtomicU64,
        reads: AtomicUsize,
    }

    impl Model {
        fn new(len: u64, bad: Option<u64>) -> Arc<Model> {
            Arc::new(Model {
                len: AtomicU64::new(len),
                bad,
                gone: AtomicU64::new(0),
                reads: AtomicUsize::new(0),
            })
        }
    }

    fn expected(from: u64, to: u64) -> Vec<u8> {
        (from..to).map(|i| (i % 251) as u8).collect()
    }

    impl AheadSource for Model {
        fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            if offset < self.gone.load(Ordering::SeqCst) {
                return Err(Error::StaleHandle);
            }
            let mut end = self.len.load(Ordering::SeqCst).min(offset + len as u64);
            if let Some(bad) = self.bad {
                if offset >= bad {
                    return Err(Error::corrupt("t-0/00000000000000000000.log", bad, "CRC"));
                }
                end = end.min(bad);
            }
            Ok(expected(offset.min(end), end).into())
        }

        fn holds(&self, offset: u64) -> Result<bool> {
            Ok(offset >= self.gone.load(Ordering::SeqCst))
        }
    }

    fn read_all(ahead: &ReadAhead, window: usize) -> (Vec<u8>, Option<Error>) {
        let mut out = Vec::new();
        loop {
            match ahead.read(out.len() as u64, window) {
                Ok(b) if b.is_empty() => return (out, None),
                Ok(b) => out.extend_from_slice(&b),
                Err(e) => return (out, Some(e)),
            }
        }
    }

    #[test]
    fn small_or_single_reads_start_no_worker() {
        let model = Model::new(10_000_000, None);
        let ahead = ReadAhead::new(model.clone(), &pool());
        ahead.read(0, 1 << 20).unwrap();
        for i in 0..10u64 {
            ahead.read(i * 4096, 4096).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(model.reads.load(Ordering::SeqCst), 11, "every read was direct");
        assert!(lock(&ahead.shared.state).streaming.is_none());
        assert_eq!(ahead.pool.executor().waiting(), 0, "no window queued");
    }

    #[test]
    fn sequential_reads_return_exactly_the_sources_bytes() {
        for (len, window) in [(0u64, 4096usize), (10_000_000, 65536), (1_000_001, 4096)] {
            let model = Model::new(len, None);
            let ahead = ReadAhead::new(model.clone(), &pool());
            let (bytes, err) = read_all(&ahead, window);
            assert!(err.is_none());
            assert_eq!(bytes, expected(0, len), "len {len} window {window}");
        }
    }

    #[test]
    fn an_error_is_returned_at_its_offset_after_every_byte_before_it() {
        let model = Model::new(5_000_000, Some(3_000_123));
        let ahead = ReadAhead::new(model.clone(), &pool());
        let (bytes, err) = read_all(&ahead, 65536);
        assert_eq!(bytes, expected(0, 3_000_123));
        assert!(matches!(err, Some(Error::Corrupt { .. })), "{err:?}");
    }

    #[test]
    fn a_growing_stream_is_read_to_its_new_end_after_a_short_window() {
        let model = Model::new(300_000, None);
        let ahead = ReadAhead::new(model.clone(), &pool());
        let (bytes, _) = read_all(&ahead, 65536);
        assert_eq!(bytes.len(), 300_000);
        model.len.store(1_000_000, Ordering::SeqCst);
        let mut out = bytes;
        loop {
            let b = ahead.read(out.len() as u64, 65536).unwrap();
            if b.is_empty() {
                break;
            }
            out.extend_from_slice(&b);
        }
        assert_eq!(out, expected(0, 1_000_000));
    }

    /// A stream that grows by `step` bytes at every read: windows claimed in parallel see
    /// different ends.
    struct Growing {
        len: AtomicU64,
        step: u64,
    }

    impl AheadSource for Growing {
        fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
            let end = self.len.fetch_add(self.step, Ordering::SeqCst);
            let end = end.min(offset + len as u64);
            Ok(expected(offset.min(end), end).into())
        }

        fn holds(&self, _offset: u64) -> Result<bool> {
            Ok(true)
        }
    }

    #[test]
    fn windows_read_in_parallel_while_the_stream_grows_never_leave_a_gap() {
        for step in [1u64, 4_000, 70_000, 200_000] {
            let source = Arc::new(Growing { len: AtomicU64::new(300_000), step });
            let ahead = ReadAhead::new(source.clone(), &pool());
            let mut out: Vec<u8> = Vec::new();
            let mut empty = 0;
            while out.len() < 3_000_000 && empty < 100 {
                let b = ahead.read(out.len() as u64, 65536).unwrap();
                if b.is_empty() {
                    empty += 1;
                }
                out.extend_from_slice(&b);
            }
            assert_eq!(out, expected(0, out.len() as u64), "step {step}");
        }
    }

    #[test]
    fn seeks_and_other_sizes_read_directly_and_agree_with_the_source() {
        let model = Model::new(2_000_000, None);
        let ahead = ReadAhead::new(model.clone(), &pool());
        let mut seed = 17u64;
        let mut at = 0u64;
        for _ in 0..400 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let window = [4096usize, 65536, 131072][(seed >> 33) as usize % 3];
            if (seed >> 40) % 5 == 0 {
                at = (seed >> 20) % 2_000_000;
            }
            let b = ahead.read(at, window).unwrap();
            let end = (at + window as u64).min(2_000_000);
            assert_eq!(b, expected(at, end), "at {at} window {window}");
            at = end % 2_000_000;
        }
    }

    #[test]
    fn bytes_no_longer_held_are_not_served_from_the_queue() {
        let model = Model::new(10_000_000, None);
        let ahead = ReadAhead::new(model.clone(), &pool());
        assert_eq!(ahead.read(0, 65536).unwrap().len(), 65536);
        assert_eq!(ahead.read(65536, 65536).unwrap().len(), 65536);
        // Let the worker fill its queue, then retention deletes everything read so far.
        std::thread::sleep(std::time::Duration::from_millis(50));
        model.gone.store(5_000_000, Ordering::SeqCst);
        assert!(model.reads.load(Ordering::SeqCst) > 2, "the worker read ahead");
        let err = ahead.read(131072, 65536).unwrap_err();
        assert!(matches!(err, Error::StaleHandle), "{err}");
    }

    /// A source whose reads take `delay`: a worker is still rendering when the next read
    /// comes.
    struct Slow {
        model: Arc<Model>,
        delay: std::time::Duration,
    }

    impl AheadSource for Slow {
        fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
            std::thread::sleep(self.delay);
            self.model.read_at(offset, len)
        }

        fn holds(&self, offset: u64) -> Result<bool> {
            self.model.holds(offset)
        }
    }

    /// Two threads reading one handle at once (the kernel sends a page-cache reader's
    /// read-ahead requests in parallel, and a program may `pread` one descriptor from several
    /// threads): a reader waiting for the window a worker renders must not sleep forever when
    /// the other thread's read elsewhere drops the windows.
    #[test]
    fn a_reader_waiting_for_a_window_wakes_when_another_read_drops_the_windows() {
        let source = Arc::new(Slow {
            model: Model::new(50_000_000, None),
            delay: std::time::Duration::from_millis(300),
        });
        let ahead = Arc::new(ReadAhead::new(source, &pool()));
        let window = 65536usize;
        ahead.read(0, window).unwrap();
        ahead.read(window as u64, window).unwrap();
        // Workers now render the windows at 2 and 3 windows; this read waits for the first.
        let (done, finished) = std::sync::mpsc::channel();
        let waiting = Arc::clone(&ahead);
        std::thread::spawn(move || {
            let got = waiting.read(2 * window as u64, window);
            let _ = done.send(got);
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        // Another thread of the same handle reads elsewhere: the windows are dropped.
        let other = ahead.read(10_000_000, window).unwrap();
        assert_eq!(other, expected(10_000_000, 10_000_000 + window as u64));
        // A hang is what this test is about: wait far longer than any read takes.
        let got = finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the waiting reader never woke up");
        let from = 2 * window as u64;
        assert_eq!(got.unwrap(), expected(from, from + window as u64));
    }

    #[test]
    fn the_worker_stays_within_its_bound_and_ends_when_the_handle_closes() {
        let model = Model::new(u64::MAX / 2, None);
        let ahead = ReadAhead::new(model.clone(), &pool());
        ahead.read(0, 65536).unwrap();
        ahead.read(65536, 65536).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let reads = model.reads.load(Ordering::SeqCst);
        assert!(reads > 2, "a worker started after two whole reads in a row");
        assert!(reads <= 3 + MAX_AHEAD_BYTES / 65536, "{reads} reads ahead");
        let state = Arc::clone(&ahead.shared);
        let budget = Arc::clone(ahead.pool.budget());
        drop(ahead);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(lock(&state.state).streaming.is_none());
        assert_eq!(Arc::strong_count(&state), 1, "the workers let go of the state");
        assert_eq!(budget.used(), 0, "every window's bytes went back to the budget");
        assert_eq!(budget.streaming(), 0);
    }

    #[test]
    fn a_handle_whose_window_does_not_fit_the_budget_reads_on_demand() {
        // A budget smaller than one window: nothing is ever read ahead, every read is direct
        // and exact.
        let model = Model::new(3_000_000, None);
        let pool = AheadPool::new(Executor::new(2), MemoryBudget::new(32 << 10));
        let ahead = ReadAhead::new(model.clone(), &pool);
        let (bytes, err) = read_all(&ahead, 65536);
        assert!(err.is_none());
        assert_eq!(bytes, expected(0, 3_000_000));
        let reads = model.reads.load(Ordering::SeqCst);
        assert_eq!(reads, 3_000_000usize.div_ceil(65536) + 1, "one direct read per window");
        assert_eq!(pool.budget().used(), 0);
    }

    #[test]
    fn many_handles_share_the_pool_and_the_budget_and_read_exactly_their_bytes() {
        let budget = MemoryBudget::new(1 << 20);
        let pool = AheadPool::new(Executor::new(3), Arc::clone(&budget));
        let len = 2_000_000u64;
        let model = Model::new(len, None);
        let peak = Arc::new(AtomicUsize::new(0));
        let readers: Vec<_> = (0..40)
            .map(|i| {
                let ahead = ReadAhead::new(model.clone(), &pool);
                let (budget, peak) = (Arc::clone(&budget), Arc::clone(&peak));
                std::thread::spawn(move || {
                    let window = 65536 * (1 + i % 2);
                    let mut out = Vec::new();
                    loop {
                        let b = ahead.read(out.len() as u64, window).unwrap();
                        peak.fetch_max(budget.used(), Ordering::SeqCst);
                        if b.is_empty() {
                            break;
                        }
                        out.extend_from_slice(&b);
                    }
                    assert_eq!(out, expected(0, len), "reader {i}");
                })
            })
            .collect();
        for r in readers {
            r.join().unwrap();
        }
        // Windows read ahead stay within the limit; direct reads in flight (40 readers, one
        // window each) may add to it.
        let bound = (1 << 20) + 40 * 131072;
        assert!(peak.load(Ordering::SeqCst) <= bound, "peak {}", peak.load(Ordering::SeqCst));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(budget.used(), 0, "every window's bytes went back");
        assert_eq!(budget.streaming(), 0);
    }

    #[test]
    fn the_fair_share_caps_what_each_handle_reads_ahead() {
        let budget = MemoryBudget::new(1 << 20);
        let pool = AheadPool::new(Executor::new(2), Arc::clone(&budget));
        let model = Model::new(u64::MAX / 2, None);
        let handles: Vec<ReadAhead> =
            (0..4).map(|_| ReadAhead::new(model.clone(), &pool)).collect();
        for h in &handles {
            h.read(0, 65536).unwrap();
            h.read(65536, 65536).unwrap();
        }
        // The first handle may have claimed the whole limit before the others started; once
        // its reader has taken those windows, every handle claims only its share.
        for round in 2..40u64 {
            for h in &handles {
                let b = h.read(round * 65536, 65536).unwrap();
                assert_eq!(b, expected(round * 65536, (round + 1) * 65536));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(budget.streaming(), 4);
        for h in &handles {
            let st = lock(&h.shared.state);
            assert!(st.ahead() <= (1 << 20) / 4, "{} bytes ahead", st.ahead());
        }
        assert!(budget.used() <= 1 << 20);
    }
}
