//! The writer: entries stored and updated later, one at a time, off the caller's thread.

use super::*;
use topicfs_executor::{Blocking, Class};

/// Work for the writer thread.
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
    /// [`SegmentCache::store`] on the cache's writer thread: see [`SegmentCache::update_later`].
    pub fn store_later(self: &Arc<Self>, id: SegmentIdentity, kind: EntryKind, payload: Vec<u8>) {
        self.update_later(id, kind, Box::new(move |_| Some(payload)));
    }

    /// Loads the entry of `id` and `kind`, hands its payload (if valid) to `update`, and stores
    /// what that returns, on the cache's writer thread (one per cache, started on first use; it
    /// holds the cache weakly and ends when the cache is dropped). The caller does not wait for
    /// the write and its `fsync`s; updates run one at a time in the order queued, so merges
    /// into one entry never lose each other's part. When the queue is full the update is
    /// dropped (logged at debug): it is learned again later.
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
        let mut writer = lock(&self.writer);
        if writer.is_none() {
            match self.start_writer() {
                Ok(tx) => *writer = Some(tx),
                Err(e) => {
                    log::debug!("segment cache: no writer thread ({e}); writing in place");
                    drop(writer);
                    self.update(&id, kind, update);
                    return;
                }
            }
        }
        let Some(tx) = writer.as_ref() else { return };
        *lock(&self.queued.0) += 1;
        if tx.try_send(Job::Update(id, kind, update)).is_err() {
            let (count, done) = &*self.queued;
            let mut n = lock(count);
            *n = n.saturating_sub(1);
            done.notify_all();
            log::debug!("segment cache: write queue full, an update is dropped");
        }
    }

    /// Starts the writer: the thread that runs queued updates one at a time, in the order
    /// queued, holding the cache weakly (it ends when the cache is dropped and its queue with
    /// it). The queue's sending end.
    fn start_writer(self: &Arc<Self>) -> io::Result<SyncSender<Job>> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(QUEUE_BOUND);
        let weak = Arc::downgrade(self);
        let queued = Arc::clone(&self.queued);
        std::thread::Builder::new().name("topicfs-cache".into()).spawn(move || {
            while let Ok(Job::Update(id, kind, update)) = rx.recv() {
                if let Some(cache) = weak.upgrade() {
                    cache.update(&id, kind, update);
                }
                let (count, done) = &*queued;
                let mut n = lock(count);
                *n = n.saturating_sub(1);
                done.notify_all();
            }
        })?;
        Ok(tx)
    }

    /// Writes queued updates on `executor` from now on (the mount's one executor, handed over
    /// by `LogDir::set_executor`/`set_cache`): one `Store`-class task at a time drains the
    /// queue in order, so merges into one entry still never lose each other's part. No writer
    /// thread is started once this is set (one already started keeps draining what it has).
    pub fn set_executor(&self, executor: topicfs_executor::Executor) {
        let _ = self.executor.set(executor);
    }

    /// Queues `job` for the executor's drain task, starting one unless one is queued or runs.
    /// The same bound as the writer thread's queue: past it the update is dropped.
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
                    self.update(&id, kind, update);
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
