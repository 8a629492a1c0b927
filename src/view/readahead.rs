//! Read-ahead for a stream read sequentially: worker threads render the next windows while
//! the reader's thread hands the current one to the kernel.
//!
//! Rendering a window (read the batches, check, decode, render) costs more than handing it
//! over (the FUSE reply, which the kernel copies into the reader's buffer); done one after the
//! other they add up. A [`ReadAhead`] belongs to one open handle. After two reads in a row that
//! each returned a whole window of at least [`MIN_AHEAD_WINDOW`] bytes it starts up to two
//! workers, which claim the following windows of the same size in turn and render them in
//! parallel (a stream serves any offset from the checkpoint before it), up to
//! [`MAX_AHEAD_BYTES`] ahead of the reader. The next read at the expected offset takes its
//! window (waiting for it while a worker renders it) instead of rendering. Any other read (a
//! seek, another size) drops the windows and reads directly.
//!
//! **Invariant**: every window held is exactly what the source returned for its offset and
//! size when a worker read it, and a read is served a window only at exactly that offset (the
//! offset where the previous read ended). So a read served from a window returns what a direct
//! read would have returned at that moment. Before serving one the source is asked whether it
//! still holds those bytes ([`AheadSource::holds`]): bytes of records that retention deleted
//! meanwhile are not served (the direct read then reports them stale). An error is a window
//! too: returned at its offset, after every byte before it.
//!
//! The workers stop claiming at a window that came back short (the current end of the stream:
//! a growing stream is then read directly, as `tail -f` does, until whole windows start them
//! again) or failed, wait while the windows ahead would pass the bound, and end when the
//! windows are dropped or the handle is closed. No lock is held while a worker renders.
//!
//! **Invariant** (no lost wake-ups): every change a waiting thread waits for notifies the
//! condition variable under the state's lock: a window filed, the reader moving on, a worker
//! stopping, the windows dropped (by any thread's read elsewhere) and the handle closed (the
//! last two only while a worker exists: without one nobody waits). A
//! reader waits only while a worker of the current epoch is reading its window; a worker waits
//! only while its epoch is current, the handle open, no window has stopped the claims and the
//! windows ahead reach the bound.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex};

use crate::error::Result;
use crate::sync::lock;

/// Most bytes rendered ahead of the reader per handle (windows ready or being rendered).
pub const MAX_AHEAD_BYTES: usize = 2 << 20;

/// Smallest read size that gets read-ahead: small reads (a lookup reading the first records, a
/// program scanning with a small buffer) are served directly, without a worker.
pub const MIN_AHEAD_WINDOW: usize = 64 << 10;

/// Whole sequential reads in a row before the workers start: one read is often all there is.
const STREAK_TO_START: u32 = 2;

/// Workers per handle, each rendering a different window: the source serves any offset (a
/// stream renders from the checkpoint before it), so consecutive windows render in parallel
/// on a machine's cores while the reader's thread replies.
const MAX_WORKERS: usize = 2;

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
    /// The offset a sequential reader asks for next.
    next: u64,
    /// Size of the windows the workers read (the reader's last read size).
    window: usize,
    /// Windows read ahead, by offset: what the source returned there (bytes or an error).
    ready: BTreeMap<u64, Result<Vec<u8>>>,
    /// Windows a worker is reading now, by offset.
    reading: BTreeSet<u64>,
    /// The offset of the next window to claim (`next` plus every window claimed since).
    claim_at: u64,
    /// A window came back short (the stream's current end) or failed: no more claims.
    stopped: bool,
    /// Workers of this `epoch` alive.
    workers: usize,
    /// Whole reads in a row, each at the offset the previous one ended.
    streak: u32,
    /// Bumped whenever the windows are dropped: a worker of an older epoch discards what it
    /// read and ends.
    epoch: u64,
    closed: bool,
}

impl ReadAhead {
    /// Read-ahead over `source`, idle until the first whole sequential reads.
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
        if let Some(served) = self.take_ready(offset, len)? {
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
        if start && st.workers == 0 && !st.closed {
            // Whole windows in a row: more is likely to follow.
            drop_windows(&self.shared, &mut st);
            st.claim_at = st.next;
            let epoch = st.epoch;
            let workers = MAX_WORKERS.min(MAX_AHEAD_BYTES / len).max(1);
            st.workers = workers;
            drop(st);
            for _ in 0..workers {
                self.spawn_worker(epoch);
            }
        }
        Ok(bytes)
    }

    /// Serves a read at the expected offset from a window read ahead (waiting for it when a
    /// worker is on it). `None`: no window for it; the windows are dropped and the caller
    /// reads directly.
    fn take_ready(&self, offset: u64, len: usize) -> Result<Option<Result<Vec<u8>>>> {
        let mut st = lock(&self.shared.state);
        if offset != st.next || len != st.window {
            drop_windows(&self.shared, &mut st);
            return Ok(None);
        }
        while !st.ready.contains_key(&offset) && st.reading.contains(&offset) {
            st = self.shared.changed.wait(st).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        let Some(window) = st.ready.remove(&offset) else {
            drop_windows(&self.shared, &mut st);
            return Ok(None);
        };
        let epoch = st.epoch;
        drop(st);
        let bytes = match window {
            Ok(bytes) => bytes,
            Err(e) => {
                drop_windows(&self.shared, &mut lock(&self.shared.state));
                return Ok(Some(Err(e)));
            }
        };
        // Outside the lock: may take the source's own locks.
        let holds = self.source.holds(offset)?;
        let mut st = lock(&self.shared.state);
        if !holds || st.epoch != epoch || st.next != offset {
            drop_windows(&self.shared, &mut st);
            return Ok(None);
        }
        st.next = offset.saturating_add(bytes.len() as u64);
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
                st.workers = st.workers.saturating_sub(1);
            }
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        let mut st = lock(&self.shared.state);
        st.closed = true;
        drop_windows(&self.shared, &mut st);
    }
}

/// Drops every window read ahead; running workers end at their next step, and a reader
/// waiting for a window (another thread of the same handle) wakes up and reads directly.
fn drop_windows(shared: &Shared, st: &mut State) {
    // Only a worker of this epoch can be waited for, or wait: without one there is nobody to
    // wake (a seek or a lookup's small read, the common case, makes no wake-up call).
    if st.workers > 0 {
        shared.changed.notify_all();
    }
    st.ready.clear();
    st.reading.clear();
    st.stopped = false;
    st.workers = 0;
    st.epoch = st.epoch.wrapping_add(1);
}

/// A worker: claims the next window after the ones claimed, reads it, files it, until a window
/// comes back short or failed, a newer epoch or the handle's close; waits while the windows
/// ahead of the reader would pass [`MAX_AHEAD_BYTES`].
fn work(shared: &Shared, source: &dyn AheadSource, epoch: u64) {
    let mut st = lock(&shared.state);
    loop {
        while st.epoch == epoch
            && !st.closed
            && !st.stopped
            && st.claim_at.saturating_sub(st.next) >= MAX_AHEAD_BYTES as u64
        {
            st = shared.changed.wait(st).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        if st.epoch != epoch || st.closed {
            return;
        }
        if st.stopped {
            st.workers = st.workers.saturating_sub(1);
            shared.changed.notify_all();
            return;
        }
        let (at, len) = (st.claim_at, st.window);
        st.claim_at = at.saturating_add(len as u64);
        st.reading.insert(at);
        drop(st);
        let read = source.read_at(at, len);
        st = lock(&shared.state);
        if st.epoch != epoch || st.closed {
            return;
        }
        st.reading.remove(&at);
        if !matches!(&read, Ok(bytes) if bytes.len() == len) {
            st.stopped = true;
        }
        st.ready.insert(at, read);
        shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
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
        assert_eq!(lock(&ahead.shared.state).workers, 0);
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

    /// A stream that grows by `step` bytes at every read: windows claimed in parallel see
    /// different ends.
    struct Growing {
        len: AtomicU64,
        step: u64,
    }

    impl AheadSource for Growing {
        fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
            let end = self.len.fetch_add(self.step, Ordering::SeqCst);
            let end = end.min(offset + len as u64);
            Ok(expected(offset.min(end), end))
        }

        fn holds(&self, _offset: u64) -> Result<bool> {
            Ok(true)
        }
    }

    #[test]
    fn windows_read_in_parallel_while_the_stream_grows_never_leave_a_gap() {
        for step in [1u64, 4_000, 70_000, 200_000] {
            let source = Arc::new(Growing { len: AtomicU64::new(300_000), step });
            let ahead = ReadAhead::new(source.clone());
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

    /// A source whose reads take `delay`: a worker is still rendering when the next read
    /// comes.
    struct Slow {
        model: Arc<Model>,
        delay: std::time::Duration,
    }

    impl AheadSource for Slow {
        fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
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
        let ahead = Arc::new(ReadAhead::new(source));
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
        assert_eq!(lock(&state.state).workers, 0);
        assert_eq!(Arc::strong_count(&state), 1, "the worker ended and let go of the state");
    }
}
