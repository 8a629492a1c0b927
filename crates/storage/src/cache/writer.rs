//! The writer: entries stored and updated later, one at a time, off the caller's thread (as
//! `Store`-class tasks of the mount's executor).

use super::*;
use topicfs_executor::{Blocking, Class};

/// Work for the writer.
pub(super) enum Job {
    Update(SegmentIdentity, EntryKind, SummaryUpdate),
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Job::Update(id, kind, _) = self;
        f.debug_tuple("Update").field(id).field(kind).finish_non_exhaustive()
    }
}

/// Entries [`SegmentCache::store_later`] may have queued at once; more are dropped (they are
/// learned again on a later mount).
const QUEUE_BOUND: usize = 1024;

/// The drain of a cache's queued updates, run when dropped: as the body of an executor task, or
/// when the executor drops the task unrun at shutdown.
struct Drain(Arc<SegmentCache>);

impl Drop for Drain {
    fn drop(&mut self) {
        self.0.drain();
    }
}

impl SegmentCache {
    /// [`SegmentCache::store`] later: see [`SegmentCache::update_later`].
    pub fn store_later(self: &Arc<Self>, id: SegmentIdentity, kind: EntryKind, payload: Vec<u8>) {
        self.update_later(id, kind, Box::new(move |_| Some(payload)));
    }

    /// Loads the entry of `id` and `kind`, hands its payload (if valid) to `update`, and stores
    /// what that returns, as a `Store`-class task of the executor set by
    /// [`SegmentCache::set_executor`] (without one, a tool's or a test's cache, in place on the
    /// caller's thread). The caller does not wait for the write and its `fsync`s; updates run
    /// one at a time in the order queued, so merges into one entry never lose each other's
    /// part. When the queue is full the update is dropped (logged at debug): it is learned
    /// again later.
    pub fn update_later(
        self: &Arc<Self>,
        id: SegmentIdentity,
        kind: EntryKind,
        update: SummaryUpdate,
    ) {
        if !self.stores() {
            return;
        }
        if let Some(executor) = self.executor.get() {
            self.queue_on(executor, Job::Update(id, kind, update));
            return;
        }
        // No executor (a tool or a test, not a mount): written in place, on the caller's
        // thread; no thread is started for it. One update at a time, as the drain writes them:
        // two merges into one entry must not read the same old payload.
        let _one_at_a_time = lock(&self.updating);
        self.update(&id, kind, update);
    }

    /// Writes queued updates on `executor` from now on (the mount's one executor, handed over
    /// by `LogDirs::set_executor`/`set_cache`): one `Store`-class task at a time drains the
    /// queue in order, so merges into one entry still never lose each other's part.
    pub fn set_executor(&self, executor: topicfs_executor::Executor) {
        let _ = self.executor.set(executor);
    }

    /// Queues `job` for the executor's drain task, starting one unless one is queued or runs.
    /// At most [`QUEUE_BOUND`] queued: past it the update is dropped.
    fn queue_on(self: &Arc<Self>, executor: &topicfs_executor::Executor, job: Job) {
        {
            let mut pending = lock(&self.pending);
            if pending.len() >= QUEUE_BOUND {
                log::debug!("segment cache: write queue full, an update is dropped");
                return;
            }
            pending.push_back(job);
            *lock(&self.queued.0) += 1;
        }
        if !self.draining.swap(true, Ordering::AcqRel) {
            let drain = Drain(Arc::clone(self));
            // Run or dropped unrun (the executor shutting down), the drain writes what is
            // queued: `flush` never waits for an update nobody will write.
            executor.submit(Class::Store, Blocking::No, move || drop(drain));
        }
    }

    /// Writes queued updates in order until none is left, then lets the next update start a
    /// drain again (checking once more, so that an update queued meanwhile is not stranded).
    fn drain(&self) {
        loop {
            let next = lock(&self.pending).pop_front();
            match next {
                Some(Job::Update(id, kind, update)) => {
                    {
                        let _one_at_a_time = lock(&self.updating);
                        self.update(&id, kind, update);
                    }
                    let (count, done) = &*self.queued;
                    let mut n = lock(count);
                    *n = n.saturating_sub(1);
                    done.notify_all();
                }
                None => {
                    self.draining.store(false, Ordering::Release);
                    if lock(&self.pending).is_empty() || self.draining.swap(true, Ordering::AcqRel)
                    {
                        return;
                    }
                }
            }
        }
    }

    /// Waits until every entry queued by [`SegmentCache::store_later`] is written (or failed).
    pub fn flush(&self) {
        let (count, done) = &*self.queued;
        let mut n = lock(count);
        while *n > 0 {
            n = done.wait(n).unwrap_or_else(|e| e.into_inner());
        }
    }
}
