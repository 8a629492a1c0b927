//! A partition's side of the segment cache ([`crate::cache`]): which segments are
//! sealed, their identities, and loading and storing their summaries.
//!
//! A partition has up to two stores: the mount's cache dir (every kind), and the entries its
//! log directory keeps beside the segments (the kinds that go with the log,
//! [`SpanKind::with_the_log`]; see "Beside the segments" in [`crate::cache`]). A payload of
//! such a kind is looked for beside the segments first, then in the cache dir, and stored
//! beside the segments when the mount may store there (a writable one), else in the cache dir.
//!
//! Only sealed segments have entries: the active segment still changes. A segment's identity is
//! computed from the file this partition holds open (so it describes the bytes reads return),
//! once per segment object: a segment the broker replaced is a new object with a new identity.

use std::collections::HashMap;
use std::sync::{OnceLock, Weak};

use topicfs_source::{SealedSpan, SpanKind, SummaryUpdate};

use super::read::cursor_at;
use crate::cache::{EntryKind, SegmentCache, SegmentIdentity};

use super::*;

/// The cache of a partition and the identities of its sealed segments computed so far.
#[derive(Debug)]
pub(crate) struct Summaries {
    cache: RwLock<Arc<SegmentCache>>,
    /// The entries kept beside the segments ([`Log::set_beside_segments`]), if any.
    beside: RwLock<Option<Arc<SegmentCache>>>,
    /// Whether the partition directory held such entries at the last listing: a read-only log
    /// of a directory without any (a broker's) does not look for them, segment by segment.
    beside_listed: AtomicBool,
    /// The canonical data dir (computed once).
    data_dir: OnceLock<PathBuf>,
    /// By base offset: the segment object an identity was computed for, and the identity.
    identities: Mutex<HashMap<Offset, (Weak<LogSegment>, SegmentIdentity)>>,
}

impl Default for Summaries {
    fn default() -> Self {
        Summaries {
            cache: RwLock::new(Arc::new(SegmentCache::disabled())),
            beside: RwLock::new(None),
            beside_listed: AtomicBool::new(false),
            data_dir: OnceLock::new(),
            identities: Mutex::new(HashMap::new()),
        }
    }
}

impl Log {
    /// Sets the segment cache this partition keeps summaries of its sealed segments in.
    pub fn set_cache(&self, cache: Arc<SegmentCache>) {
        *self.summaries.cache.write().unwrap_or_else(|e| e.into_inner()) = cache;
    }

    /// The segment cache (a disabled one until [`Log::set_cache`]).
    pub fn cache(&self) -> Arc<SegmentCache> {
        Arc::clone(&self.summaries.cache.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Sets the entries this partition's log directory keeps beside its segments
    /// ([`SegmentCache::beside_segments`]): where the kinds that go with the log are looked
    /// for first, and stored when it stores.
    pub fn set_beside_segments(&self, beside: Arc<SegmentCache>) {
        *self.summaries.beside.write().unwrap_or_else(|e| e.into_inner()) = Some(beside);
    }

    /// Records whether the last listing of the partition directory found entries kept beside
    /// the segments.
    pub(super) fn note_beside_entries(&self, found: bool) {
        self.summaries.beside_listed.store(found, Ordering::Relaxed);
    }

    /// The entries kept beside the segments, when there may be any to load or this log stores
    /// them (a writable log; a read-only one only when its directory held some when listed).
    fn beside(&self) -> Option<Arc<SegmentCache>> {
        if !self.writable() && !self.summaries.beside_listed.load(Ordering::Relaxed) {
            return None;
        }
        self.summaries.beside.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The stores a `kind` payload is looked for in, in order (beside the segments, then the
    /// cache dir); empty when there is none.
    fn load_stores(&self, kind: SpanKind) -> Vec<Arc<SegmentCache>> {
        let mut stores = Vec::with_capacity(2);
        if kind.with_the_log {
            stores.extend(self.beside());
        }
        let cache = self.cache();
        if cache.dir().is_some() {
            stores.push(cache);
        }
        stores
    }

    /// The store a `kind` payload is stored in: beside the segments when that stores (a
    /// writable mount) and the kind goes with the log, else the cache dir when set.
    fn store_for(&self, kind: SpanKind) -> Option<Arc<SegmentCache>> {
        if kind.with_the_log && self.writable() {
            if let Some(beside) = self.beside().filter(|b| b.stores()) {
                return Some(beside);
            }
        }
        Some(self.cache()).filter(|c| c.stores())
    }

    /// Whether anything learned about this partition is kept across mounts: a cache dir is
    /// set, or its log directory stores entries beside its segments.
    pub fn keeps_summaries(&self) -> bool {
        self.cache().stores() || (self.writable() && self.beside().is_some_and(|b| b.stores()))
    }

    /// Whether any store could hold a payload of some kind (to load or to store).
    fn any_store(&self) -> bool {
        self.cache().dir().is_some() || self.beside().is_some()
    }

    /// The identity of the sealed segment whose base offset is `base`; `None` when there is no
    /// such segment, it is the active one, or its file cannot be examined (logged at debug).
    pub fn sealed_identity(&self, base: Offset) -> Option<SegmentIdentity> {
        let seg = self.segment(base)?;
        if seg.is_active() {
            return None;
        }
        let mut known = lock(&self.summaries.identities);
        if let Some((of, id)) = known.get(&base) {
            if of.upgrade().is_some_and(|s| Arc::ptr_eq(&s, &seg)) {
                return Some(id.clone());
            }
        }
        let data_dir = self.canonical_data_dir();
        match SegmentIdentity::of_file(data_dir, &self.topic, self.partition, base, seg.log_file())
        {
            Ok(id) => {
                known.retain(|_, (of, _)| of.strong_count() > 0);
                known.insert(base, (Arc::downgrade(&seg), id.clone()));
                Some(id)
            }
            Err(e) => {
                log::debug!("segment cache: no identity for {}: {e}", seg.log_path().display());
                None
            }
        }
    }

    fn canonical_data_dir(&self) -> &Path {
        self.summaries.data_dir.get_or_init(|| {
            let parent = self.dir.parent().unwrap_or(&self.dir);
            std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf())
        })
    }

    /// The active segment whose first batch is the next one read from `cursor` (at its
    /// start, or at the end of the sealed segment before it), when caching is on.
    fn active_at(&self, cursor: &ReadCursor) -> Option<Arc<LogSegment>> {
        if !self.any_store() {
            return None;
        }
        let at = SegmentCursor::of(cursor)?;
        let seg = self.segment(at.segment_base)?;
        let target = if at.position.0 == 0 {
            seg
        } else if at.position.0 == seg.size() && !seg.is_active() {
            self.segments.after(at.segment_base)?
        } else {
            return None;
        };
        target.is_active().then_some(target)
    }

    /// The stable prefix of the active segment whose first batch is the next one read from
    /// `cursor`, as the segment cache knows it: the span of its first `P` bytes (a batch
    /// boundary when stored; `end.next_offset` the offset after its last batch) and the render
    /// payload stored for it, if the entry is still valid for the file's bytes (see "Active-
    /// segment prefixes" in [`crate::cache`]). `None` otherwise, and for a kind kept
    /// for sealed segments only.
    pub fn prefix_span_at(
        &self,
        cursor: &ReadCursor,
        kind: SpanKind,
    ) -> Option<(SealedSpan, Vec<u8>)> {
        let stores = self.load_stores(kind);
        let kind = EntryKind::prefix_of(kind)?;
        let seg = self.active_at(cursor)?;
        let base = seg.base_offset();
        let data_dir = self.canonical_data_dir().to_path_buf();
        let (topic, partition) = (self.topic.as_str(), self.partition);
        let name = SegmentIdentity {
            data_dir: data_dir.clone(),
            topic: topic.to_string(),
            partition,
            base_offset: base,
            size: 0,
            mtime_ns: 0,
            inode: 0,
            device: 0,
            fingerprint: 0,
        };
        let identify = |prefix: u64| {
            SegmentIdentity::of_prefix(&data_dir, topic, partition, base, seg.log_file(), prefix)
                .ok()
                .flatten()
        };
        let (prefix, payload) =
            stores.iter().find_map(|store| store.load_prefix(&name, kind, identify))?;
        let (next, payload) = payload.split_first_chunk::<8>()?;
        let next = Offset(i64::from_be_bytes(*next));
        if prefix == 0 || next <= base {
            return None;
        }
        let span = SealedSpan {
            base,
            start: cursor_at(&seg, Position(0), base),
            end: cursor_at(&seg, Position(prefix), next),
            bytes: prefix,
        };
        Some((span, payload.to_vec()))
    }

    /// Replaces the render payload kept for the prefix of the active segment from `start` (its
    /// first batch) to `end` (a batch boundary inside it) by what `update` makes of it, on the
    /// cache's writer; a payload kept for a prefix of another length is not handed to
    /// `update`. Nothing when `start` is not the start of the active segment, `end` not inside
    /// it, or caching is off.
    pub fn update_prefix_summary_later(
        &self,
        start: &ReadCursor,
        end: &ReadCursor,
        kind: SpanKind,
        update: SummaryUpdate,
    ) {
        let Some(store) = self.store_for(kind) else { return };
        let Some(kind) = EntryKind::prefix_of(kind) else { return };
        let (Some(s), Some(e)) = (SegmentCursor::of(start), SegmentCursor::of(end)) else {
            return;
        };
        let Some(seg) = self.active_at(start) else { return };
        let base = seg.base_offset();
        if s.segment_base != base || s.position.0 != 0 || e.segment_base != base {
            return;
        }
        let prefix = e.position.0;
        if prefix == 0 || prefix > seg.size() {
            return;
        }
        let data_dir = self.canonical_data_dir().to_path_buf();
        let id = match SegmentIdentity::of_prefix(
            &data_dir,
            &self.topic,
            self.partition,
            base,
            seg.log_file(),
            prefix,
        ) {
            Ok(Some(id)) => id,
            Ok(None) => return,
            Err(err) => {
                log::debug!(
                    "segment cache: no prefix identity for {}: {err}",
                    seg.log_path().display()
                );
                return;
            }
        };
        let next = e.next_offset.0.to_be_bytes();
        store.update_later(
            id,
            kind,
            Box::new(move |old| {
                let old = old.and_then(|b| b.get(8..).map(<[u8]>::to_vec));
                update(old).map(|p| {
                    let mut out = next.to_vec();
                    out.extend_from_slice(&p);
                    out
                })
            }),
        );
    }

    /// The cached `kind` payload of sealed segment `base`, if valid (see
    /// [`SegmentCache::load`]).
    pub fn load_summary(&self, base: Offset, kind: SpanKind) -> Option<Vec<u8>> {
        let stores = self.load_stores(kind);
        if stores.is_empty() {
            return None;
        }
        let id = self.sealed_identity(base)?;
        stores.iter().find_map(|store| store.load(&id, EntryKind::sealed(kind)))
    }

    /// The sealed segment whose first batch is the next one read from `cursor`: the cursor is at
    /// its start, or at the end of the sealed segment before it. `None` for the active segment,
    /// an empty one, or when caching is off.
    pub fn sealed_span_at(&self, cursor: &ReadCursor) -> Option<SealedSpan> {
        if !self.any_store() {
            return None;
        }
        let at = SegmentCursor::of(cursor)?;
        let seg = self.segment(at.segment_base)?;
        let target = if at.position.0 == 0 {
            seg
        } else if at.position.0 == seg.size() && !seg.is_active() {
            self.segments.after(at.segment_base)?
        } else {
            return None;
        };
        let bytes = target.size();
        if target.is_active() || bytes == 0 {
            return None;
        }
        let base = target.base_offset();
        let next = target.next_offset().ok()?;
        Some(SealedSpan {
            base,
            start: cursor_at(&target, Position(0), base),
            end: cursor_at(&target, Position(bytes), next),
            bytes,
        })
    }

    /// Replaces the `kind` summary of sealed segment `base` by what `update` makes of it, on
    /// the cache's writer (see [`SegmentCache::update_later`]).
    pub fn update_summary_later(&self, base: Offset, kind: SpanKind, update: SummaryUpdate) {
        let Some(store) = self.store_for(kind) else { return };
        if let Some(id) = self.sealed_identity(base) {
            store.update_later(id, EntryKind::sealed(kind), update);
        }
    }

    /// Stores `payload` as the `kind` summary of sealed segment `base` (nothing if the segment
    /// is not sealed or caching is off). Never fails.
    pub fn store_summary(&self, base: Offset, kind: SpanKind, payload: &[u8]) {
        let Some(store) = self.store_for(kind) else { return };
        if let Some(id) = self.sealed_identity(base) {
            store.store(&id, EntryKind::sealed(kind), payload);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cache::CacheSettings;
    use topicfs_format::NewRecord;

    use super::*;

    const SIZES: SpanKind = SpanKind { name: "render", tag: 1, prefix: None, with_the_log: false };
    const KEYS: SpanKind = SpanKind { name: "keys", tag: 3, prefix: None, with_the_log: false };
    const WITH_THE_LOG: SpanKind =
        SpanKind { name: "render", tag: 1, prefix: None, with_the_log: true };

    fn beside_names(dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains(".topicfs-"))
            .collect();
        v.sort();
        v
    }

    /// A kind that goes with the log is stored beside the segment by a writable log (not in
    /// the cache dir), found there by a read-only one that stores nothing there, and deleted
    /// with its segment by retention; a kind that does not stays in the cache dir.
    #[test]
    fn kinds_that_go_with_the_log_are_kept_beside_their_segment_and_deleted_with_it() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let canonical = std::fs::canonicalize(&data).unwrap();
        let config = LogConfig { retention_bytes: Some(1), ..LogConfig::default() };
        let log = Log::create(&data.join("t-0"), "t", 0, config.clone()).unwrap();
        let cache = Arc::new(SegmentCache::open(&CacheSettings {
            dir: Some(tmp.path().join("cache")),
            max_bytes: 1 << 20,
        }));
        log.set_cache(Arc::clone(&cache));
        log.set_beside_segments(Arc::new(SegmentCache::beside_segments(&canonical, true)));
        assert!(log.keeps_summaries());
        for v in ["a", "b", "c"] {
            log.append(&[record(v)]).unwrap();
            log.force_roll().unwrap();
        }
        log.store_summary(Offset(0), WITH_THE_LOG, b"sizes 0");
        log.store_summary(Offset(1), WITH_THE_LOG, b"sizes 1");
        log.store_summary(Offset(1), KEYS, b"keys 1");
        let part = data.join("t-0");
        assert_eq!(
            beside_names(&part),
            ["00000000000000000000.topicfs-render", "00000000000000000001.topicfs-render"]
        );
        let in_cache = std::fs::read_dir(tmp.path().join("cache")).unwrap().count();
        assert_eq!(in_cache, 1, "only the kind that stays with the reader is in the cache dir");
        assert_eq!(log.load_summary(Offset(1), WITH_THE_LOG).as_deref(), Some(&b"sizes 1"[..]));
        drop(log);
        // A read-only log finds them without a cache dir, and stores nothing beside.
        let ro =
            Log::open(&part, "t", 0, config.clone(), SegmentMode::ReadOnly, LoadState::default())
                .unwrap();
        ro.set_beside_segments(Arc::new(SegmentCache::beside_segments(&canonical, false)));
        assert!(!ro.keeps_summaries());
        assert_eq!(ro.load_summary(Offset(0), WITH_THE_LOG).as_deref(), Some(&b"sizes 0"[..]));
        ro.store_summary(Offset(2), WITH_THE_LOG, b"sizes 2");
        assert_eq!(beside_names(&part).len(), 2, "a read-only log wrote nothing");
        drop(ro);
        // Retention deletes the sealed segments, and their entries with them.
        let log = Log::open(
            &part,
            "t",
            0,
            config,
            SegmentMode::Writable,
            LoadState { had_clean_shutdown: true, ..LoadState::default() },
        )
        .unwrap();
        log.set_beside_segments(Arc::new(SegmentCache::beside_segments(&canonical, true)));
        assert_eq!(beside_names(&part).len(), 2, "their segments exist: kept at load");
        assert!(log.delete_old_segments(i64::MAX / 2).unwrap() >= 2);
        assert_eq!(beside_names(&part), Vec::<String>::new());
    }

    fn record(value: &str) -> NewRecord {
        NewRecord {
            timestamp: 1,
            key: None,
            value: Some(value.as_bytes().to_vec()),
            headers: vec![],
        }
    }

    #[test]
    fn only_sealed_segments_have_summaries_and_a_replaced_segment_loses_its_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let log = Log::create(&data.join("t-0"), "t", 0, LogConfig::default()).unwrap();
        let cache = Arc::new(SegmentCache::open(&CacheSettings {
            dir: Some(tmp.path().join("cache")),
            max_bytes: 1 << 20,
        }));
        log.set_cache(Arc::clone(&cache));
        log.append(&[record("a"), record("b")]).unwrap();
        // The active segment has no identity and stores nothing.
        assert_eq!(log.sealed_identity(Offset(0)), None);
        log.store_summary(Offset(0), SIZES, b"x");
        assert_eq!(log.load_summary(Offset(0), SIZES), None);
        log.force_roll().unwrap();
        log.append(&[record("c")]).unwrap();
        let id = log.sealed_identity(Offset(0)).unwrap();
        assert_eq!((id.topic.as_str(), id.partition, id.base_offset), ("t", 0, Offset(0)));
        assert_eq!(id.data_dir, std::fs::canonicalize(&data).unwrap());
        log.store_summary(Offset(0), SIZES, b"sizes");
        assert_eq!(log.load_summary(Offset(0), SIZES).as_deref(), Some(&b"sizes"[..]));
        assert_eq!(log.sealed_identity(Offset(2)), None, "the new active segment");
        // Nothing was written into the data dir.
        let names: Vec<_> = std::fs::read_dir(data.join("t-0"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| !n.ends_with(".log") && !n.ends_with("index"))
            .collect();
        assert!(names.iter().all(|n| !n.contains("cache")), "{names:?}");
        // The same data dir opened again (a remount) finds the entry.
        drop(log);
        let again = Log::open(
            &data.join("t-0"),
            "t",
            0,
            LogConfig::default(),
            SegmentMode::ReadOnly,
            LoadState::default(),
        )
        .unwrap();
        again.set_cache(Arc::clone(&cache));
        assert_eq!(again.load_summary(Offset(0), SIZES).as_deref(), Some(&b"sizes"[..]));
        drop(again);
        // The segment replaced by another file with the same name (compaction's swap): stale.
        let path = data.join("t-0").join("00000000000000000000.log");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(data.join("t-0").join("new"), &bytes).unwrap();
        std::fs::rename(data.join("t-0").join("new"), &path).unwrap();
        let third = Log::open(
            &data.join("t-0"),
            "t",
            0,
            LogConfig::default(),
            SegmentMode::ReadOnly,
            LoadState::default(),
        )
        .unwrap();
        third.set_cache(cache);
        assert_eq!(third.load_summary(Offset(0), SIZES), None);
    }
}
