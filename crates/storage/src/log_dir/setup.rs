//! What every partition of a mount is given, whichever of the broker's dirs holds it and
//! whenever it is loaded: the sizing budget, the segment cache and the executor. One
//! [`LogSetup`] is shared by the [`LogDir`]s of a [`crate::log_dirs::LogDirs`], which is the
//! only place it is set ([`crate::log_dirs::LogDirs::set_sizing_budget`],
//! [`crate::log_dirs::LogDirs::set_cache`], [`crate::log_dirs::LogDirs::set_executor`]);
//! each dir reads it when it loads or creates a partition.
//!
//! Invariant: a value is stored here before it is given to the partitions loaded then, so a
//! partition loaded meanwhile has it either way.

use super::*;

/// See the module doc.
#[derive(Debug)]
pub(crate) struct LogSetup {
    /// Every partition's sizing budget (default [`LOCAL_SIZING_BUDGET`]).
    pub(crate) sizing_budget: AtomicU64,
    /// The segment cache every partition keeps its sealed segments' summaries in (disabled
    /// until set).
    pub(crate) cache: RwLock<Arc<SegmentCache>>,
    /// The mount's executor: key-index builds run on it (until set, on the calling thread).
    pub(crate) executor: RwLock<Option<topicfs_executor::Executor>>,
}

impl LogSetup {
    pub(crate) fn new() -> LogSetup {
        LogSetup {
            sizing_budget: AtomicU64::new(LOCAL_SIZING_BUDGET),
            cache: RwLock::new(Arc::new(SegmentCache::disabled())),
            executor: RwLock::new(None),
        }
    }

    /// The sizing budget set now.
    pub(crate) fn sizing_budget(&self) -> u64 {
        self.sizing_budget.load(Ordering::Relaxed)
    }

    /// The segment cache set now.
    pub(crate) fn cache(&self) -> Arc<SegmentCache> {
        Arc::clone(&self.cache.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The executor set now, if any.
    pub(crate) fn executor(&self) -> Option<topicfs_executor::Executor> {
        self.executor.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Gives a partition just loaded or created what is set now, and `beside`, the entries
    /// kept beside its dir's segments.
    pub(crate) fn give(&self, log: &Log, beside: &Arc<SegmentCache>) {
        log.set_sizing_budget(self.sizing_budget());
        log.set_cache(self.cache());
        log.set_beside_segments(Arc::clone(beside));
        log.keys().set_executor(self.executor());
    }
}
