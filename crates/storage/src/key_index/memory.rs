//! The process-wide bound on the bytes of sealed key indexes held in memory (least recently
//! used dropped first).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use topicfs_format::Offset;
use topicfs_format::key_index::SegmentKeyIndex;
use topicfs_source::sync::lock;

/// Default of [`set_memory_limit`]: bytes of sealed key indexes held in memory by the process.
pub const DEFAULT_MEMORY_LIMIT: u64 = 256 << 20;

/// The sealed key indexes every partition of the process holds in memory, and their bound
/// (see [`set_memory_limit`]).
struct Held {
    /// Where the index is held (gone when its partition is).
    map: std::sync::Weak<Mutex<BTreeMap<Offset, Arc<SegmentKeyIndex>>>>,
    bytes: u64,
    /// When a query last used it (a tick of [`Memory::tick`]).
    used: u64,
}

#[derive(Default)]
struct MemoryState {
    tick: u64,
    total: u64,
    held: std::collections::HashMap<(usize, Offset), Held>,
}

/// Lock order: `state`, then a partition's map (to drop an index from it); a partition never
/// calls in here while holding its map.
pub(super) struct Memory {
    limit: std::sync::atomic::AtomicU64,
    state: Mutex<MemoryState>,
}

pub(super) static MEMORY: std::sync::LazyLock<Memory> = std::sync::LazyLock::new(|| Memory {
    limit: std::sync::atomic::AtomicU64::new(DEFAULT_MEMORY_LIMIT),
    state: Mutex::new(MemoryState::default()),
});

/// Bounds the bytes of sealed segments' key indexes held in memory by this process (every
/// partition, every log dir; a daemon serves one mount): when a newly built or loaded index
/// takes the total past `limit`, the least recently used sealed indexes are dropped (never
/// the active segment's, which is built record by record and cannot be read back). A dropped
/// index is loaded again from the segment cache at its next query, or rebuilt when the cache
/// does not hold it. A query holds the indexes it uses until it ends, so a bound smaller than
/// one query's indexes costs reloads, never wrong answers.
pub fn set_memory_limit(limit: u64) {
    MEMORY.limit.store(limit, Ordering::Relaxed);
    MEMORY.shrink(&mut lock(&MEMORY.state));
}

/// Bytes of sealed key indexes held in memory by this process now.
pub fn memory_held() -> u64 {
    lock(&MEMORY.state).total
}

pub(super) static NEXT_PARTITION: AtomicUsize = AtomicUsize::new(0);

impl Memory {
    /// Notes that partition `id` holds `index` in `map`, then drops the least recently used
    /// indexes while over the limit.
    pub(super) fn admit(
        &self,
        id: usize,
        map: &Arc<Mutex<BTreeMap<Offset, Arc<SegmentKeyIndex>>>>,
        index: &SegmentKeyIndex,
    ) {
        let mut st = lock(&self.state);
        st.tick += 1;
        let used = st.tick;
        let bytes = index.bytes().len() as u64;
        let held = Held { map: Arc::downgrade(map), bytes, used };
        if let Some(old) = st.held.insert((id, index.base_offset()), held) {
            st.total -= old.bytes;
        }
        st.total += bytes;
        self.shrink(&mut st);
    }

    /// Drops the least recently used indexes while over the limit.
    fn shrink(&self, st: &mut MemoryState) {
        let limit = self.limit.load(Ordering::Relaxed);
        while st.total > limit {
            let Some((&victim, _)) = st.held.iter().min_by_key(|(_, h)| h.used) else { break };
            let Some(h) = st.held.remove(&victim) else { break };
            st.total -= h.bytes;
            if let Some(map) = h.map.upgrade() {
                lock(&map).remove(&victim.1);
                log::debug!(
                    "key index of segment {} dropped from memory ({} bytes; bound {limit})",
                    victim.1,
                    h.bytes
                );
            }
        }
    }

    /// Notes that partition `id`'s index of segment `base` was used.
    pub(super) fn touch(&self, id: usize, base: Offset) {
        let mut st = lock(&self.state);
        st.tick += 1;
        let tick = st.tick;
        if let Some(h) = st.held.get_mut(&(id, base)) {
            h.used = tick;
        }
    }

    /// Forgets partition `id`'s index of segment `base` (dropped by its partition).
    pub(super) fn forget(&self, id: usize, base: Offset) {
        let mut st = lock(&self.state);
        if let Some(h) = st.held.remove(&(id, base)) {
            st.total -= h.bytes;
        }
    }
}
