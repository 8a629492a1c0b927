//! Read-ahead for a stream read sequentially: a worker thread renders the next windows while
//! the reader's thread hands the current one to the kernel.
//!
//! Rendering a window (read the batches, check, decode, render) and handing it over (the FUSE
//! reply, which the kernel copies into the reader's buffer) take about the same time; done one
//! after the other they add up, on two cores they overlap. A [`ReadAhead`] belongs to one open
//! handle. After two reads in a row that each returned a whole window of at least
//! [`MIN_AHEAD_WINDOW`] bytes it starts a worker that renders the following windows of the same
//! size into a short queue ([`MAX_AHEAD_BYTES`]); the next read
//! at the expected offset takes them instead of rendering. Any other read (a seek, a different
//! size that the queue cannot serve) drops the queue and reads directly.
//!
//! **Invariant**: the queue holds, in order and without gaps, the bytes the source returned for
//! file offsets `[next, next + queued)`, followed by at most one error the source returned at
//! `next + queued`. So a read served from the queue returns exactly what a direct read would
//! have returned when the worker read it. Before serving queued bytes the source is asked
//! whether it still holds them ([`AheadSource::holds`]): bytes of records that retention
//! deleted meanwhile are not served (the direct read then reports them stale).
//!
//! The worker stops at a short window (the current end of the stream: a growing stream is then
//! read directly, as `tail -f` does, and read-ahead starts again after the next whole window),
//! at an error, when the queue is full (until the reader takes a window), and when the handle
//! is closed. It never holds the queue's lock while rendering.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};

/// Most bytes rendered ahead of the reader per handle.
pub const MAX_AHEAD_BYTES: usize = 4 << 20;

/// Smallest read size that gets read-ahead: small reads (a lookup reading the first records, a
/// program scanning with a small buffer) are served directly, without a worker.
pub const MIN_AHEAD_WINDOW: usize = 64 << 10;

/// Whole sequential reads in a row before a worker starts: one read is often all there is.
const STREAK_TO_START: u32 = 2;

/// What a [`ReadAhead`] reads from.
pub trait AheadSource: Send + Sync {
    /// Up to `len` bytes at file offset `offset`: exactly what a full read has there, fewer only
    /// at the current end.
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>>;
    /// Whether bytes at `offset` read earlier may still be served (their records exist).
    fn holds(&self, offset: u64) -> Result<bool>;
}

/// Read-ahead state of one open handle; see the module docs.
pub struct ReadAhead {
    shared: Arc<Shared>,
    source: Arc<dyn AheadSource>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// The offset a sequential reader asks for next; the queue starts there.
    next: u64,
    /// Windows read ahead, contiguous from `next`.
    queue: VecDeque<Vec<u8>>,
    queued: usize,
    /// The error the source returned right after the queue.
    failed: Option<Error>,
    /// Size of the windows the worker reads (the reader's last read size).
    window: usize,
    /// A worker of this `epoch` is reading.
    running: bool,
    /// Whole reads in a row, each at the offset the previous one ended.
    streak: u32,
    /// Bumped whenever the queue is dropped: a worker of an older epoch discards what it read
    /// and ends.
    epoch: u64,
    closed: bool,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ReadAhead {
    /// Read-ahead over `source`, idle until the first whole sequential read.
    pub fn new(source: Arc<dyn AheadSource>) -> ReadAhead {
        let shared =
            Arc::new(Shared { state: Mutex::new(State::default()), changed: Condvar::new() });
        ReadAhead { shared, source }
    }

    /// Up to `len` bytes at `offset`, as [`AheadSource::read_at`] returns them.
    pub fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        if let Some(served) = self.take_queued(offset, len)? {
            return served;
        }
        let bytes = self.source.read_at(offset, len)?;
        let mut st = lock(&self.shared.state);
        let sequential = offset == st.next && len == st.window;
        st.streak = match (bytes.len() == len, sequential) {
            (true, true) => st.streak.saturating_add(1),
            (true, false) => 1,
            (false, _) => 0,
        };
        st.next = offset.saturating_add(bytes.len() as u64);
        st.window = len;
        let start = st.streak >= STREAK_TO_START && len >= MIN_AHEAD_WINDOW;
        if start && !st.running && !st.closed {
            // Whole windows in a row: more is likely to follow.
            st.running = true;
            let epoch = st.epoch;
            drop(st);
            self.spawn_worker(epoch);
        }
        Ok(bytes)
    }

    /// Serves a read at the expected offset from the queue (waiting for the worker's window
    /// when it is on it). `None`: not a sequential read the queue can serve; the queue is
    /// dropped and the caller reads directly.
    fn take_queued(&self, offset: u64, len: usize) -> Result<Option<Result<Vec<u8>>>> {
        let mut st = lock(&self.shared.state);
        let sequential = offset == st.next && len == st.window;
        if !sequential {
            drop_queue(&mut st);
            return Ok(None);
        }
        while st.queue.is_empty() && st.failed.is_none() && st.running {
            st = self.shared.changed.wait(st).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        if st.queue.is_empty() {
            if let Some(e) = st.failed.take() {
                drop_queue(&mut st);
                return Ok(Some(Err(e)));
            }
            // The worker stopped at the end of the stream: read directly (it may have grown).
            return Ok(None);
        }
        drop(st);
        // Outside the lock: may take the source's own locks.
        let holds = self.source.holds(offset)?;
        let mut st = lock(&self.shared.state);
        if !holds || st.next != offset {
            drop_queue(&mut st);
            return Ok(None);
        }
        let Some(bytes) = st.queue.pop_front() else { return Ok(None) };
        st.queued = st.queued.saturating_sub(bytes.len());
        st.next = offset.saturating_add(bytes.len() as u64);
        if bytes.len() < len && !st.queue.is_empty() {
            // Windows are read at the reader's size, so only the last one of a stream that
            // was short at the time is shorter: nothing follows it in the queue.
            drop_queue(&mut st);
            return Ok(None);
        }
        self.shared.changed.notify_all();
        Ok(Some(Ok(bytes)))
    }

    fn spawn_worker(&self, epoch: u64) {
        let shared = Arc::clone(&self.shared);
        let source = Arc::clone(&self.source);
        let spawned = std::thread::Builder::new()
            .name("topicfs-readahead".into())
            .spawn(move || work(&shared, source.as_ref(), epoch));
        if let Err(e) = spawned {
            log::warn!("no read-ahead thread ({e}); reading on demand");
            let mut st = lock(&self.shared.state);
            if st.epoch == epoch {
                st.running = false;
            }
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        let mut st = lock(&self.shared.state);
        st.closed = true;
        drop_queue(&mut st);
        self.shared.changed.notify_all();
    }
}

/// Drops everything read ahead; a running worker ends at its next step.
fn drop_queue(st: &mut State) {
    st.queue.clear();
    st.queued = 0;
    st.failed = None;
    st.running = false;
    st.epoch = st.epoch.wrapping_add(1);
}

/// The worker: reads the windows after the queue until the stream's current end, an error,
/// a newer epoch or the handle's close; waits while the queue is full.
fn work(shared: &Shared, source: &dyn AheadSource, epoch: u64) {
    loop {
        let (at, len) = {
            let mut st = lock(&shared.state);
            while st.epoch == epoch && !st.closed && st.queued >= MAX_AHEAD_BYTES {
                st = shared.changed.wait(st).unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            if st.epoch != epoch || st.closed {
                return;
            }
            (st.next.saturating_add(st.queued as u64), st.window)
        };
        let read = source.read_at(at, len);
        let mut st = lock(&shared.state);
        if st.epoch != epoch || st.closed {
            return;
        }
        match read {
            Ok(bytes) => {
                let short = bytes.len() < len;
                if !bytes.is_empty() {
                    st.queued = st.queued.saturating_add(bytes.len());
                    st.queue.push_back(bytes);
                }
                if short {
                    st.running = false;
                }
            }
            Err(e) => {
                st.failed = Some(e);
                st.running = false;
            }
        }
        let running = st.running;
        shared.changed.notify_all();
        if !running {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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
        fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
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
            Ok(expected(offset.min(end), end))
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
        let ahead = ReadAhead::new(model.clone());
        ahead.read(0, 1 << 20).unwrap();
        for i in 0..10u64 {
            ahead.read(i * 4096, 4096).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(model.reads.load(Ordering::SeqCst), 11, "every read was direct");
        assert!(!lock(&ahead.shared.state).running);
    }

    #[test]
    fn sequential_reads_return_exactly_the_sources_bytes() {
        for (len, window) in [(0u64, 4096usize), (10_000_000, 65536), (1_000_001, 4096)] {
            let model = Model::new(len, None);
            let ahead = ReadAhead::new(model.clone());
            let (bytes, err) = read_all(&ahead, window);
            assert!(err.is_none());
            assert_eq!(bytes, expected(0, len), "len {len} window {window}");
        }
    }

    #[test]
    fn an_error_is_returned_at_its_offset_after_every_byte_before_it() {
        let model = Model::new(5_000_000, Some(3_000_123));
        let ahead = ReadAhead::new(model.clone());
        let (bytes, err) = read_all(&ahead, 65536);
        assert_eq!(bytes, expected(0, 3_000_123));
        assert!(matches!(err, Some(Error::Corrupt { .. })), "{err:?}");
    }

    #[test]
    fn a_growing_stream_is_read_to_its_new_end_after_a_short_window() {
        let model = Model::new(300_000, None);
        let ahead = ReadAhead::new(model.clone());
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

    #[test]
    fn seeks_and_other_sizes_read_directly_and_agree_with_the_source() {
        let model = Model::new(2_000_000, None);
        let ahead = ReadAhead::new(model.clone());
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
        let ahead = ReadAhead::new(model.clone());
        assert_eq!(ahead.read(0, 65536).unwrap().len(), 65536);
        assert_eq!(ahead.read(65536, 65536).unwrap().len(), 65536);
        // Let the worker fill its queue, then retention deletes everything read so far.
        std::thread::sleep(std::time::Duration::from_millis(50));
        model.gone.store(5_000_000, Ordering::SeqCst);
        assert!(model.reads.load(Ordering::SeqCst) > 2, "the worker read ahead");
        let err = ahead.read(131072, 65536).unwrap_err();
        assert!(matches!(err, Error::StaleHandle), "{err}");
    }

    #[test]
    fn the_worker_stays_within_its_bound_and_ends_when_the_handle_closes() {
        let model = Model::new(u64::MAX / 2, None);
        let ahead = ReadAhead::new(model.clone());
        ahead.read(0, 65536).unwrap();
        ahead.read(65536, 65536).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let reads = model.reads.load(Ordering::SeqCst);
        assert!(reads > 2, "a worker started after two whole reads in a row");
        assert!(reads <= 3 + MAX_AHEAD_BYTES / 65536, "{reads} reads ahead");
        let state = Arc::clone(&ahead.shared);
        drop(ahead);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!lock(&state.state).running);
        assert_eq!(Arc::strong_count(&state), 1, "the worker ended and let go of the state");
    }
}
