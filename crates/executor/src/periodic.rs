//! Work that comes back on a timer (Kafka's scheduler tasks: the retention check, the log
//! cleaner's passes), run as tasks of the executor instead of threads of their own.
//!
//! **Invariants**: a periodic job never runs twice at once (the next run is queued only when
//! the previous one ends, `interval` after its end); no run starts after
//! [`Periodic::stop`] returns, and `stop` returns only once a run in progress has ended; a run
//! is a long [`Class::Store`] task (see `Task::long`): while it runs a spare worker keeps the
//! executor's `threads` free for the other classes, as the thread it replaces did. A shutdown of
//! the executor drops a run not yet started; one running finishes.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::{Blocking, Class, Executor, Inner, Task, lock};

type Job = Box<dyn FnMut() + Send + 'static>;

/// A job run every `interval` on the executor ([`Executor::every`]); stopped by
/// [`Periodic::stop`] or when dropped.
pub struct Periodic {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Flags {
    stopped: bool,
    running: bool,
}

#[derive(Default)]
struct Shared {
    flags: Mutex<Flags>,
    ended: Condvar,
}

/// One scheduled run: what it needs to run the job and queue the next run.
struct Run {
    inner: Arc<Inner>,
    shared: Arc<Shared>,
    job: Arc<Mutex<Job>>,
    interval: Duration,
}

impl Executor {
    /// Runs `job` once `first` has passed, then again `interval` after each run ends, each run a
    /// long [`Class::Store`] task, until the returned [`Periodic`] is stopped or dropped (see
    /// the module docs). A run that panics is logged and the next one is still queued.
    pub fn every(
        &self,
        first: Duration,
        interval: Duration,
        job: impl FnMut() + Send + 'static,
    ) -> Periodic {
        let shared = Arc::new(Shared::default());
        let run = Run {
            inner: Arc::clone(&self.owner.inner),
            shared: Arc::clone(&shared),
            job: Arc::new(Mutex::new(Box::new(job))),
            interval,
        };
        run.queue(first);
        Periodic { shared }
    }
}

impl Run {
    fn queue(self, delay: Duration) {
        let inner = Arc::clone(&self.inner);
        let task = Task {
            job: Box::new(move || self.once()),
            blocking: Blocking::No,
            class: Class::Store.index(),
            long: true,
        };
        inner.submit_timed(delay, task);
    }

    fn once(self) {
        {
            let mut flags = lock(&self.shared.flags);
            if flags.stopped {
                return;
            }
            flags.running = true;
        }
        let job = &self.job;
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (lock(job))()));
        {
            let mut flags = lock(&self.shared.flags);
            flags.running = false;
            self.shared.ended.notify_all();
            if flags.stopped {
                return;
            }
        }
        if outcome.is_err() {
            log::warn!("a periodic background task panicked; it runs again at its next time");
        }
        let interval = self.interval;
        self.queue(interval);
    }
}

impl Periodic {
    /// Stops the job: no run starts after this returns, and a run in progress has ended when it
    /// returns. Idempotent. Must not be called from the job itself (it would wait for itself).
    pub fn stop(&self) {
        let mut flags = lock(&self.shared.flags);
        flags.stopped = true;
        while flags.running {
            flags =
                self.shared.ended.wait(flags).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

impl Drop for Periodic {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for Periodic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let flags = lock(&self.shared.flags);
        f.debug_struct("Periodic")
            .field("stopped", &flags.stopped)
            .field("running", &flags.running)
            .finish()
    }
}
