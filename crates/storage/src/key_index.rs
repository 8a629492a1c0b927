//! The log engine's key indexes: one [`SegmentKeyIndex`] per sealed segment, built once, and
//! the active segment's in memory ([`KeyIndexBuilder`]), behind [`topicfs_source::KeyIndex`].
//!
//! # Building
//!
//! Nothing is read before the first key query of a partition ([`PartitionKeys::refresh`]).
//! Then every sealed segment without an index gets one: loaded from the persistent store
//! ([`KeyIndexStore`], the segment cache outside the data dir) when it holds one that decodes
//! and describes this segment (same base offset, same `.log` size; anything else is stale and
//! is rebuilt and stored again, with a log line), else built by reading the segment's batches.
//! The checks and builds are [`topicfs_executor::Class::Store`] jobs of the mount's executor
//! ([`PartitionKeys::set_executor`]), one per segment, a large one read in up to
//! [`BUILD_THREADS`] parts: the querying thread (a FUSE request) runs the jobs no worker took
//! and waits for the rest, so it starts no thread and cannot wait on a full pool. Without an
//! executor (tests, tools) everything runs on the querying thread in order. The records'
//! sort when an index is encoded runs on the thread that encodes it. The active segment's index
//! catches up at each query with the batches appended since the last (by us or, on a read-only
//! mount, by the broker); when it rolls, its index is encoded as the sealed segment's and
//! stored, so a roll costs no rebuild.
//!
//! # What is indexed
//!
//! Every record of every non-control batch, every codec and message format (v0/v1 messages
//! and their compressed wrappers, v2 batches), by its key (null keys included), at its offset
//! (compacted logs' gaps are simply absent offsets). Transactional batches are noted with their
//! producer so that read-committed readers hide aborted records without reading them
//! ([`KeyHit::producer_id`]); what is aborted and where the last stable offset lies is decided
//! by the reader's transaction tracker, as for every stream. A batch that fails its CRC ends
//! its segment's index there (logged naming the file and position; such an index is not
//! persisted, so the next mount tries again): records after damage are not found by key.
//!
//! **Invariant**: a sealed segment's index covers exactly the `.log` bytes it names
//! ([`SegmentKeyIndex::log_size`]); sealed segments never change, and one rewritten by the
//! cleaner (a `.swap` renamed over it) has another size or is reloaded by the log, which drops
//! its index here (the cleaner also drops it by name, [`PartitionKeys::forget_segments`]).

mod build;
mod listing;
mod memory;

use std::collections::{BTreeMap, BinaryHeap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::segment::LogSegment;
use topicfs_executor::Executor;
use topicfs_format::Offset;
use topicfs_format::key_index::{InOrder, KeyIndexBuilder, SegmentKeyIndex};
use topicfs_format::key_name::long_hashes;
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_source::{KeyHit, KeyHits, KeyListing, SpanKind};

use build::{bulk_index, index_segment};
use listing::{MergedListing, push_hits};
pub use memory::{DEFAULT_MEMORY_LIMIT, memory_held, set_memory_limit};
use memory::{MEMORY, NEXT_PARTITION};

/// Most sealed segments' indexes one key query builds at once (jobs of the executor), and most
/// parts one segment is read in.
pub const BUILD_THREADS: usize = 4;
/// An active segment at least this large is first indexed in bulk (see
/// [`KeyIndexBuilder::on_top_of`]); smaller ones record by record.
const BULK_ACTIVE_BYTES: u64 = 16 << 20;

/// The key indexes' kind of payload in the segment cache: a sealed segment's
/// [`SegmentKeyIndex`] bytes (sealed segments only; the active segment's index is rebuilt).
pub const KEY_INDEX: SpanKind =
    SpanKind { name: "keys", tag: 3, prefix: None, with_the_log: false };

/// Where sealed segments' key indexes persist between mounts in place of the log's segment
/// cache ([`KEY_INDEX`] entries of `storage::cache`, the default): for tests and
/// embedders. A store may lose, damage or keep stale entries: every payload is decoded and
/// checked against the segment before use.
pub trait KeyIndexStore: Send + Sync {
    /// The payload stored for `segment`'s key index, if any.
    fn load(&self, segment: &LogSegment) -> Option<Vec<u8>>;
    /// Keeps `payload` as `segment`'s key index (best effort: failures are the store's to log).
    fn store(&self, segment: &LogSegment, payload: &[u8]);
}

/// What the key indexes need of their partition's log (implemented by
/// [`crate::Log`]; a trait so that this module does not import the log that holds
/// it).
pub trait IndexedLog: Sync {
    /// The segments in base-offset order (a snapshot).
    fn segment_list(&self) -> Vec<Arc<LogSegment>>;
    fn log_start_offset(&self) -> Offset;
    fn log_end_offset(&self) -> Offset;
    /// Read-only logs: takes in what the broker changed (rate-limited by the log).
    fn take_in_changes(&self) -> Result<()>;
    /// The partition directory (for messages).
    fn dir(&self) -> &std::path::Path;
    /// The key index the segment cache holds for sealed segment `base`, if any (the cache
    /// checked that it is the entry of this very segment file; its contents are checked here).
    fn load_key_index(&self, base: Offset) -> Option<Vec<u8>>;
    /// Keeps `payload` in the segment cache as sealed segment `base`'s key index.
    fn store_key_index(&self, base: Offset, payload: &[u8]);
}

/// The active segment's index and how far it has read.
struct Active {
    base: Offset,
    position: u64,
    next_offset: Offset,
    builder: KeyIndexBuilder,
    /// The encoded form of `builder` at `position`, for listings.
    encoded: Option<(u64, Arc<SegmentKeyIndex>)>,
    damaged: bool,
}

/// The key indexes of one partition (see the module docs).
pub struct PartitionKeys {
    store: Mutex<Option<Arc<dyn KeyIndexStore>>>,
    /// The mount's executor the builds run on ([`PartitionKeys::set_executor`]); without one
    /// they run on the querying thread, one after another.
    executor: Mutex<Option<Executor>>,
    /// Sealed segments' indexes by base offset (those held in memory: see
    /// [`set_memory_limit`]).
    sealed: Arc<Mutex<BTreeMap<Offset, Arc<SegmentKeyIndex>>>>,
    /// This partition's name in the process's memory bound.
    id: usize,
    active: Mutex<Option<Active>>,
    /// Whether any sealed index held so far has a transactional batch (stays set when the
    /// memory bound drops that index: read-committed readers keep looking for markers).
    txn_seen: std::sync::atomic::AtomicBool,
    /// Held while building, so concurrent first queries wait for one build.
    building: Mutex<()>,
    /// Sealed indexes built by reading their segment (not loaded), for tests and statistics.
    built: AtomicUsize,
    /// Sealed indexes loaded from the store.
    loaded: AtomicUsize,
}

impl Drop for PartitionKeys {
    fn drop(&mut self) {
        let bases: Vec<Offset> = lock(&self.sealed).keys().copied().collect();
        for base in bases {
            MEMORY.forget(self.id, base);
        }
    }
}

impl std::fmt::Debug for PartitionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PartitionKeys({} sealed)", lock(&self.sealed).len())
    }
}

impl PartitionKeys {
    /// No index yet; sealed indexes persist in `store` when given.
    pub fn new(store: Option<Arc<dyn KeyIndexStore>>) -> PartitionKeys {
        PartitionKeys {
            store: Mutex::new(store),
            executor: Mutex::new(None),
            sealed: Arc::new(Mutex::new(BTreeMap::new())),
            id: NEXT_PARTITION.fetch_add(1, Ordering::Relaxed),
            active: Mutex::new(None),
            txn_seen: std::sync::atomic::AtomicBool::new(false),
            building: Mutex::new(()),
            built: AtomicUsize::new(0),
            loaded: AtomicUsize::new(0),
        }
    }

    /// Drops the indexes of the segments with these base offsets (the log cleaner replaced
    /// them: a rewritten segment may even keep its base offset and size); the next query
    /// builds the replacement's.
    pub fn forget_segments(&self, bases: &[Offset]) {
        let mut dropped = Vec::new();
        {
            let mut sealed = lock(&self.sealed);
            for base in bases {
                if sealed.remove(base).is_some() {
                    dropped.push(*base);
                }
            }
        }
        for base in dropped {
            MEMORY.forget(self.id, base);
        }
    }

    /// Persists sealed indexes in `store` from now on.
    pub fn set_store(&self, store: Option<Arc<dyn KeyIndexStore>>) {
        *lock(&self.store) = store;
    }

    /// Builds from now on run as [`topicfs_executor::Class::Store`] jobs of `executor` (the
    /// querying thread runs the jobs no worker took and waits for the rest: it starts no
    /// thread); `None`: on the querying thread.
    pub fn set_executor(&self, executor: Option<Executor>) {
        *lock(&self.executor) = executor;
    }

    fn store(&self) -> Option<Arc<dyn KeyIndexStore>> {
        lock(&self.store).clone()
    }

    /// Sealed indexes built from their segment so far (not loaded from the store).
    pub fn built_count(&self) -> usize {
        self.built.load(Ordering::Relaxed)
    }

    /// Sealed indexes loaded from the store so far.
    pub fn loaded_count(&self) -> usize {
        self.loaded.load(Ordering::Relaxed)
    }

    /// Bytes of the sealed indexes held (what the store holds for this partition).
    pub fn sealed_bytes(&self) -> u64 {
        lock(&self.sealed).values().map(|i| i.bytes().len() as u64).sum()
    }

    /// Bytes of every index of the partition in its encoded form (the sealed ones held, the
    /// active one as it would be stored), for statistics; builds what is missing first.
    pub fn index_bytes(&self, log: &dyn IndexedLog) -> Result<u64> {
        let sealed: u64 = self.refresh(log)?.iter().map(|i| i.bytes().len() as u64).sum();
        let active = lock(&self.active)
            .as_ref()
            .map_or(0, |a| a.builder.encode_with(a.next_offset, a.position, &InOrder).len() as u64);
        Ok(sealed + active)
    }

    /// The stored payload of `seg`'s index, if any: from the store set with
    /// [`PartitionKeys::set_store`], else from the log's segment cache (checked by
    /// [`stored_index`]).
    fn load(&self, log: &dyn IndexedLog, seg: &LogSegment) -> Option<Vec<u8>> {
        match self.store() {
            Some(store) => store.load(seg),
            None => log.load_key_index(seg.base_offset()),
        }
    }

    /// Keeps `bytes` as the sealed segment `seg`'s index (the store, else the segment cache).
    fn persist(&self, log: &dyn IndexedLog, seg: &LogSegment, bytes: &[u8]) {
        match self.store() {
            Some(store) => store.store(seg, bytes),
            None => log.store_key_index(seg.base_offset(), bytes),
        }
    }

    /// Brings every index up to the log as it is now: sealed segments without an index get one
    /// (in parallel), deleted ones are dropped, the active segment's catches up. Returns the
    /// sealed segments' indexes (held by the caller even if the memory bound drops them from
    /// this partition meanwhile).
    pub fn refresh(&self, log: &dyn IndexedLog) -> Result<Vec<Arc<SegmentKeyIndex>>> {
        let _building = lock(&self.building);
        let segments = log.segment_list();
        let (sealed_segs, active_seg): (Vec<_>, Vec<_>) =
            segments.iter().cloned().partition(|s| !s.is_active());
        // A read-only log's last segment may not say it is active: the last one always is.
        let (sealed_segs, active_seg) = match (active_seg.into_iter().next_back(), sealed_segs) {
            (Some(a), sealed) => (sealed, Some(a)),
            (None, mut sealed) => {
                let last = sealed.pop();
                (sealed, last)
            }
        };
        let mut missing = Vec::new();
        let mut admitted: Vec<Arc<SegmentKeyIndex>> = Vec::new();
        // Dropped here, forgotten by the memory bound once `sealed` is unlocked (the bound
        // locks its state, then a partition's `sealed`: never the other way round).
        let mut dropped = Vec::new();
        {
            let mut sealed = lock(&self.sealed);
            sealed.retain(|base, index| {
                let keep = sealed_segs
                    .iter()
                    .any(|s| s.base_offset() == *base && s.size() == index.log_size());
                if !keep {
                    dropped.push(*base);
                }
                keep
            });
            let mut active = lock(&self.active);
            for seg in &sealed_segs {
                if sealed.contains_key(&seg.base_offset()) {
                    continue;
                }
                // The segment this index followed as active rolled: finish it.
                if let Some(a) = active.take_if(|a| a.base == seg.base_offset()) {
                    let mut a = a;
                    let done = index_segment(seg, a.position, a.next_offset, &mut a.builder);
                    a.damaged |= done.damaged;
                    if done.position == seg.size() {
                        let bytes =
                            a.builder.encode_with(done.next_offset, done.position, &InOrder);
                        if let Ok(index) = SegmentKeyIndex::decode(bytes) {
                            if !a.damaged {
                                self.persist(log, seg, index.bytes());
                            }
                            let index = Arc::new(index);
                            sealed.insert(seg.base_offset(), Arc::clone(&index));
                            admitted.push(index);
                            continue;
                        }
                    }
                }
                missing.push(Arc::clone(seg));
            }
        }
        for base in dropped {
            MEMORY.forget(self.id, base);
        }
        // The active segment catches up on the querying thread while sealed segments build.
        let catch_up_active = || {
            let mut active = lock(&self.active);
            let Some(seg) = &active_seg else {
                *active = None;
                return;
            };
            let fresh = || Active {
                base: seg.base_offset(),
                position: 0,
                next_offset: seg.base_offset(),
                builder: KeyIndexBuilder::new(seg.base_offset()),
                encoded: None,
                damaged: false,
            };
            let a = active.get_or_insert_with(fresh);
            if a.base != seg.base_offset() || a.position > seg.size() {
                *a = fresh();
            }
            if a.position == 0 && a.builder.record_count() == 0 && seg.size() >= BULK_ACTIVE_BYTES {
                // A large active segment's first read: in bulk, then record by record on top.
                let (bulk, done) = bulk_index(seg, 0, 1, None);
                let bytes = bulk.encode_with(done.next_offset, done.position, &InOrder);
                match SegmentKeyIndex::decode(bytes) {
                    Ok(index) => {
                        a.builder = KeyIndexBuilder::on_top_of(index);
                        a.position = done.position;
                        a.next_offset = done.next_offset;
                        a.damaged = done.damaged;
                    }
                    Err(e) => log::error!(
                        "key index of {}: encoding the active segment's: {e}",
                        seg.log_path().display()
                    ),
                }
            }
            if !a.damaged && a.position < seg.size() {
                let done = index_segment(seg, a.position, a.next_offset, &mut a.builder);
                a.position = done.position;
                a.next_offset = done.next_offset;
                a.damaged = done.damaged;
            }
        };
        if missing.is_empty() {
            catch_up_active();
            return Ok(self.held_after(admitted));
        }
        // Stored payloads are read here; checking them and building the rest are jobs.
        let executor = lock(&self.executor).clone();
        let jobs_at_once = executor.as_ref().map_or(1, |e| e.threads()).min(missing.len());
        let parts = executor
            .as_ref()
            .map_or(1, |e| e.threads() / jobs_at_once.clamp(1, BUILD_THREADS))
            .clamp(1, BUILD_THREADS);
        let jobs: Vec<Box<dyn FnOnce() -> Sealed + Send>> = missing
            .iter()
            .map(|seg| {
                let stored = self.load(log, seg);
                let seg = Arc::clone(seg);
                let executor = executor.clone();
                Box::new(move || build_sealed(&seg, stored, parts, executor.as_ref()))
                    as Box<dyn FnOnce() -> Sealed + Send>
            })
            .collect();
        let (results, ()) = match &executor {
            Some(e) => e.run_all_beside(topicfs_executor::Class::Store, jobs, catch_up_active),
            None => {
                catch_up_active();
                (jobs.into_iter().map(|job| job()).collect(), ())
            }
        };
        let mut built = Vec::new();
        let mut failed = None;
        for (seg, sealed) in missing.iter().zip(results) {
            let index = match sealed.index {
                Ok(index) => index,
                Err(e) => {
                    failed.get_or_insert(e);
                    continue;
                }
            };
            if sealed.loaded {
                self.loaded.fetch_add(1, Ordering::Relaxed);
            } else {
                self.built.fetch_add(1, Ordering::Relaxed);
                if sealed.complete {
                    self.persist(log, seg, index.bytes());
                }
            }
            built.push((seg.base_offset(), index));
        }
        {
            let mut sealed = lock(&self.sealed);
            for (base, index) in built {
                let index = Arc::new(index);
                sealed.insert(base, Arc::clone(&index));
                admitted.push(index);
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(self.held_after(admitted))
    }

    /// The sealed indexes held now, then `admitted` (just built or loaded) counted against the
    /// memory bound (which may drop the least recently used from their partitions).
    fn held_after(&self, admitted: Vec<Arc<SegmentKeyIndex>>) -> Vec<Arc<SegmentKeyIndex>> {
        let held: Vec<Arc<SegmentKeyIndex>> = lock(&self.sealed).values().cloned().collect();
        for index in &admitted {
            if index.has_txn_batches() {
                self.txn_seen.store(true, Ordering::Relaxed);
            }
            MEMORY.admit(self.id, &self.sealed, index);
        }
        held
    }

    /// See [`topicfs_source::KeyIndex::key_hits`].
    pub fn key_hits(
        &self,
        log: &dyn IndexedLog,
        key: Option<&[u8]>,
        from: Offset,
    ) -> Result<KeyHits> {
        log.take_in_changes()?;
        let indexed_to = log.log_end_offset();
        let sealed = self.refresh(log)?;
        let from = from.max(log.log_start_offset());
        let hash = topicfs_format::key_name::key_hash(key);
        let mut hits = Vec::new();
        for index in sealed.iter().filter(|i| i.end_offset() > from) {
            if !index.may_contain(hash) {
                continue;
            }
            MEMORY.touch(self.id, index.base_offset());
            let Some(entry) = index.find(key) else { continue };
            push_hits(index, &entry, from, &mut hits)?;
        }
        if let Some(a) = lock(&self.active).as_ref() {
            for o in a.builder.offsets_from(key, from) {
                let offset = Offset(o);
                hits.push(KeyHit { offset, producer_id: a.builder.producer_at(offset) });
            }
        }
        // The active segment's index read what its file holds, which may include a batch
        // being appended whose offsets the log does not serve yet (its end offset moves after
        // the write): such records are not hits until a later lookup, so that every hit can
        // be read.
        hits.retain(|h| h.offset < indexed_to);
        Ok(KeyHits { hits, indexed_to })
    }

    /// See [`topicfs_source::KeyIndex::transactional`].
    pub fn transactional(&self) -> bool {
        self.txn_seen.load(Ordering::Relaxed)
            || lock(&self.active).as_ref().is_some_and(|a| a.builder.has_txn_batches())
    }

    /// See [`topicfs_source::KeyIndex::keys_named`].
    pub fn keys_named(&self, log: &dyn IndexedLog, h0: u64, h1: u64) -> Result<Vec<Vec<u8>>> {
        log.take_in_changes()?;
        let sealed = self.refresh(log)?;
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut consider = |key: &[u8]| {
            if long_hashes(key) == (h0, h1) && !keys.iter().any(|k| k == key) {
                keys.push(key.to_vec());
            }
        };
        for index in &sealed {
            for e in index.entries_with_hash(h0) {
                if let Ok(Some(key)) = index.key_of(&e) {
                    consider(key);
                }
            }
        }
        if let Some(a) = lock(&self.active).as_ref() {
            for key in a.builder.keys_with_hash(h0).into_iter().flatten() {
                consider(&key);
            }
        }
        Ok(keys)
    }

    /// See [`topicfs_source::KeyIndex::listing`].
    pub fn listing(&self, log: &dyn IndexedLog) -> Result<Box<dyn KeyListing>> {
        log.take_in_changes()?;
        // As in `key_hits`: nothing at or past the log end offset read before catching up.
        let to = log.log_end_offset();
        let mut indexes = self.refresh(log)?;
        for index in &indexes {
            MEMORY.touch(self.id, index.base_offset());
        }
        let from = log.log_start_offset();
        if let Some(a) = lock(&self.active).as_mut() {
            let encoded = match &a.encoded {
                Some((position, index)) if *position == a.position => Arc::clone(index),
                _ => {
                    let bytes = a.builder.encode_with(a.next_offset, a.position, &InOrder);
                    let index = Arc::new(SegmentKeyIndex::decode(bytes).map_err(|e| {
                        Error::corrupt(log.dir(), 0, format!("key index encoding: {e}"))
                    })?);
                    a.encoded = Some((a.position, Arc::clone(&index)));
                    index
                }
            };
            indexes.push(encoded);
        }
        let mut listing =
            MergedListing { indexes, next: Vec::new(), heap: BinaryHeap::new(), from, to };
        listing.next = vec![0; listing.indexes.len()];
        for i in 0..listing.indexes.len() {
            listing.advance(i)?;
        }
        Ok(Box::new(listing))
    }
}

/// What one job of [`PartitionKeys::refresh`] made of a sealed segment.
struct Sealed {
    index: Result<SegmentKeyIndex>,
    /// Checked from the store (else built by reading the segment).
    loaded: bool,
    /// Built from the whole segment without damage: worth persisting.
    complete: bool,
}

/// The index of sealed segment `seg`: `stored` if it decodes and describes `seg`, else built
/// by reading `seg` in `parts` parts (jobs of `executor`).
fn build_sealed(
    seg: &Arc<LogSegment>,
    stored: Option<Vec<u8>>,
    parts: usize,
    executor: Option<&Executor>,
) -> Sealed {
    if let Some(index) = stored.and_then(|bytes| stored_index(seg, bytes)) {
        return Sealed { index: Ok(index), loaded: true, complete: true };
    }
    let (builder, done) = bulk_index(seg, 0, parts, executor);
    let bytes = builder.encode_with(done.next_offset, done.position, &InOrder);
    let index = SegmentKeyIndex::decode(bytes)
        .map_err(|e| Error::corrupt(seg.log_path(), 0, format!("key index encoding: {e}")));
    Sealed { index, loaded: false, complete: !done.damaged && done.position == seg.size() }
}

/// The stored index `bytes` of `seg` if they decode and describe `seg` (same base offset, same
/// `.log` size); anything else is logged and rebuilt.
fn stored_index(seg: &LogSegment, bytes: Vec<u8>) -> Option<SegmentKeyIndex> {
    match SegmentKeyIndex::decode(bytes) {
        Ok(index) if index.base_offset() == seg.base_offset() && index.log_size() == seg.size() => {
            Some(index)
        }
        Ok(index) => {
            log::warn!(
                "stored key index of {} is stale (it indexed {} bytes from offset {}, the \
                 segment has {} from {}): rebuilding it",
                seg.log_path().display(),
                index.log_size(),
                index.base_offset(),
                seg.size(),
                seg.base_offset()
            );
            None
        }
        Err(e) => {
            log::warn!(
                "stored key index of {} is damaged ({e}): rebuilding it",
                seg.log_path().display()
            );
            None
        }
    }
}
