//! The mount's one memory budget for rendered bytes held beyond a request: windows read ahead,
//! the rendering a stream keeps of the batch its last read stopped inside ([`Tail`]), and the
//! render buffer of every read in flight.
//!
//! A [`MemoryBudget`] counts bytes; a [`Reservation`] holds some of them and gives them back
//! when dropped, so what a window or a tail holds is released wherever it is dropped. Two kinds
//! of reservations:
//!
//! * [`MemoryBudget::try_reserve`]: optional bytes (read-ahead, a kept tail). Granted only while
//!   the total stays within the limit *and* the bytes fit the holder's fair share
//!   ([`MemoryBudget::share`]: the limit divided by the handles reading ahead now). Refused:
//!   the holder does without (reads on demand, renders the batch again).
//! * [`MemoryBudget::reserve`]: bytes a read needs to answer at all (its render buffer). Always
//!   granted, counted so that optional reservations back off while reads are in flight. They
//!   are bounded by the FUSE worker threads (one read each) times the largest read.
//! * [`MemoryBudget::reserve_fetch`] (through [`FetchMemory`]): bytes a backend is about to
//!   fetch over the network (a cluster's Fetch response) and hold until the view has them.
//!   Granted while the bytes of all fetches in flight stay within the limit, or when no other
//!   fetch is in flight (so one fetch larger than the limit still proceeds, alone); otherwise
//!   the fetch *waits* for others to finish, until its deadline. Fetches wait only for fetches,
//!   which end within their own deadlines, never for read-ahead windows an idle handle keeps;
//!   and they count in `used`, so read-ahead backs off while they are in flight.
//!
//! **Invariant**: `used` is the sum of the bytes of every live [`Reservation`]; optional ones
//! are granted only while `used` stays at or below `limit`. So the bytes held by optional
//! reservations never exceed the limit, and all bytes held never exceed the limit plus what
//! the reads in flight need. `fetching` is the sum of the live fetch reservations, at most
//! `max(limit, the largest single fetch)`.
//!
//! [`Tail`]: crate::stream

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use topicfs_source::FetchMemory;
use topicfs_source::sync::lock;

/// Default budget of a mount: 64 MiB.
pub const DEFAULT_MEMORY_BUDGET: usize = 64 << 20;

/// Bytes of rendered data held beyond a request, mount-wide; see the module docs.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: usize,
    used: AtomicUsize,
    /// Handles reading ahead now (each counted by one [`Streaming`]).
    streaming: AtomicUsize,
    /// Bytes of the fetches in flight; fetches waiting for room wait on `fetched`.
    fetching: Mutex<usize>,
    fetched: Condvar,
    /// The most `fetching` has been (statistics and tests).
    peak_fetching: AtomicUsize,
    /// Fetches that had to wait for room (statistics and tests).
    fetch_waits: AtomicUsize,
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Arc<MemoryBudget> {
        Arc::new(MemoryBudget { limit, ..MemoryBudget::default() })
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Handles reading ahead now.
    pub fn streaming(&self) -> usize {
        self.streaming.load(Ordering::Relaxed)
    }

    /// One handle's fair share: the limit divided by the handles reading ahead (at least one).
    pub fn share(&self) -> usize {
        self.limit / self.streaming().max(1)
    }

    /// `bytes` if they fit both the fair share and what is left of the limit; `None` otherwise
    /// (the caller does without).
    pub fn try_reserve(self: &Arc<Self>, bytes: usize) -> Option<Reservation> {
        if bytes > self.share() {
            return None;
        }
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let total = used.checked_add(bytes).filter(|t| *t <= self.limit)?;
            match self.used.compare_exchange_weak(used, total, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Some(Reservation { budget: Arc::clone(self), bytes, fetch: false });
                }
                Err(now) => used = now,
            }
        }
    }

    /// `bytes` a read needs to answer: always granted, and counted.
    pub fn reserve(self: &Arc<Self>, bytes: usize) -> Reservation {
        self.used.fetch_add(bytes, Ordering::AcqRel);
        Reservation { budget: Arc::clone(self), bytes, fetch: false }
    }

    /// `bytes` about to be fetched: granted while all fetches in flight fit the limit, or when
    /// none is; otherwise waits for fetches to finish, until `deadline` (`None` then). See the
    /// module docs.
    pub fn reserve_fetch(self: &Arc<Self>, bytes: usize, deadline: Instant) -> Option<Reservation> {
        let mut fetching = lock(&self.fetching);
        let mut waited = false;
        while *fetching > 0 && fetching.saturating_add(bytes) > self.limit {
            let left = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())?;
            if !waited {
                waited = true;
                self.fetch_waits.fetch_add(1, Ordering::Relaxed);
            }
            fetching = match self.fetched.wait_timeout(fetching, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        *fetching += bytes;
        self.peak_fetching.fetch_max(*fetching, Ordering::Relaxed);
        self.used.fetch_add(bytes, Ordering::AcqRel);
        Some(Reservation { budget: Arc::clone(self), bytes, fetch: true })
    }

    /// Bytes of the fetches in flight now.
    pub fn fetching(&self) -> usize {
        *lock(&self.fetching)
    }

    /// The most bytes fetches have held at once.
    pub fn peak_fetching(&self) -> usize {
        self.peak_fetching.load(Ordering::Relaxed)
    }

    /// Fetches that waited for room so far.
    pub fn fetch_waits(&self) -> usize {
        self.fetch_waits.load(Ordering::Relaxed)
    }

    /// Counts one more handle reading ahead until the returned value is dropped.
    pub fn streaming_handle(self: &Arc<Self>) -> Streaming {
        self.streaming.fetch_add(1, Ordering::AcqRel);
        Streaming { budget: Arc::clone(self) }
    }
}

impl Default for MemoryBudget {
    fn default() -> MemoryBudget {
        MemoryBudget {
            limit: DEFAULT_MEMORY_BUDGET,
            used: AtomicUsize::new(0),
            streaming: AtomicUsize::new(0),
            fetching: Mutex::new(0),
            fetched: Condvar::new(),
            peak_fetching: AtomicUsize::new(0),
            fetch_waits: AtomicUsize::new(0),
        }
    }
}

impl MemoryBudget {
    /// This budget as the [`FetchMemory`] a backend holds its fetches in flight in.
    pub fn fetch_memory(self: &Arc<Self>) -> Arc<dyn FetchMemory> {
        Arc::new(FetchBudget(Arc::clone(self)))
    }
}

/// A [`MemoryBudget`] seen by a backend: [`FetchMemory::hold`] is
/// [`MemoryBudget::reserve_fetch`].
struct FetchBudget(Arc<MemoryBudget>);

impl FetchMemory for FetchBudget {
    fn hold(&self, bytes: usize, deadline: Instant) -> Option<Box<dyn Any + Send>> {
        self.0.reserve_fetch(bytes, deadline).map(|r| Box::new(r) as Box<dyn Any + Send>)
    }

    fn limit(&self) -> usize {
        self.0.limit
    }
}

/// Bytes held of a [`MemoryBudget`], given back on drop.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<MemoryBudget>,
    bytes: usize,
    /// Made by [`MemoryBudget::reserve_fetch`]: also counted in `fetching`.
    fetch: bool,
}

impl Reservation {
    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
        if self.fetch {
            let mut fetching = lock(&self.budget.fetching);
            *fetching = fetching.saturating_sub(self.bytes);
            drop(fetching);
            self.budget.fetched.notify_all();
        }
    }
}

/// One handle counted as reading ahead (for [`MemoryBudget::share`]) while it lives.
#[derive(Debug)]
pub struct Streaming {
    budget: Arc<MemoryBudget>,
}

impl Drop for Streaming {
    fn drop(&mut self) {
        self.budget.streaming.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_bytes_stay_within_the_limit_and_come_back_on_drop() {
        let budget = MemoryBudget::new(1000);
        let a = budget.try_reserve(600).unwrap();
        assert!(budget.try_reserve(600).is_none(), "over the limit");
        let b = budget.try_reserve(400).unwrap();
        assert_eq!(budget.used(), 1000);
        drop(a);
        assert_eq!(budget.used(), 400);
        drop(b);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn needed_bytes_are_always_granted_and_make_optional_ones_wait() {
        let budget = MemoryBudget::new(1000);
        let needed = budget.reserve(5000);
        assert_eq!(budget.used(), 5000);
        assert!(budget.try_reserve(1).is_none());
        drop(needed);
        assert!(budget.try_reserve(1).is_some());
    }

    #[test]
    fn the_fair_share_divides_the_limit_among_the_handles_reading_ahead() {
        let budget = MemoryBudget::new(1000);
        assert_eq!(budget.share(), 1000);
        let handles: Vec<Streaming> = (0..4).map(|_| budget.streaming_handle()).collect();
        assert_eq!(budget.share(), 250);
        assert!(budget.try_reserve(251).is_none(), "more than one handle's share");
        assert!(budget.try_reserve(250).is_some());
        drop(handles);
        assert_eq!(budget.streaming(), 0);
        assert_eq!(budget.share(), 1000);
    }

    #[test]
    fn fetches_wait_for_other_fetches_within_the_limit_and_give_up_at_the_deadline() {
        let budget = MemoryBudget::new(1000);
        let soon = || Instant::now() + std::time::Duration::from_millis(50);
        let a = budget.reserve_fetch(600, soon()).unwrap();
        // Would pass the limit with `a` in flight: waits, then gives up at the deadline.
        assert!(budget.reserve_fetch(600, soon()).is_none());
        assert_eq!(budget.fetch_waits(), 1);
        let b = budget.reserve_fetch(400, soon()).unwrap();
        assert_eq!((budget.fetching(), budget.used()), (1000, 1000));
        // Read-ahead backs off while fetches are in flight.
        assert!(budget.try_reserve(1).is_none());
        drop((a, b));
        assert_eq!((budget.fetching(), budget.used()), (0, 0));
        // Alone, a fetch larger than the limit proceeds.
        let big = budget.reserve_fetch(5000, soon()).unwrap();
        assert_eq!(budget.peak_fetching(), 5000);
        drop(big);
    }

    #[test]
    fn a_waiting_fetch_proceeds_when_another_ends() {
        let budget = MemoryBudget::new(1000);
        let a = budget.reserve_fetch(800, Instant::now()).unwrap();
        let waiter = {
            let budget = Arc::clone(&budget);
            std::thread::spawn(move || {
                let deadline = Instant::now() + std::time::Duration::from_secs(30);
                budget.reserve_fetch(800, deadline).map(|r| r.bytes())
            })
        };
        while budget.fetch_waits() == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // Optional bytes held elsewhere do not keep a fetch waiting; only fetches do.
        let _window = budget.reserve(10_000);
        drop(a);
        assert_eq!(waiter.join().unwrap(), Some(800));
        assert!(budget.peak_fetching() <= 1000);
    }

    #[test]
    fn concurrent_reservations_never_pass_the_limit() {
        let budget = MemoryBudget::new(10_000);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let budget = Arc::clone(&budget);
                std::thread::spawn(move || {
                    let mut held = Vec::new();
                    for i in 0..10_000 {
                        if let Some(r) = budget.try_reserve(100) {
                            assert!(budget.used() <= 10_000);
                            held.push(r);
                        }
                        if i % 7 == 0 {
                            held.clear();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(budget.used(), 0);
    }
}
