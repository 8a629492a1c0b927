//! The segment map, Kafka's `LogSegments`: a partition's segments by base offset, the
//! [`Version`] that counts its changes, and the values derived from it that are kept until it
//! changes ([`Memo`]s of the sealed segments' totals, their summaries and the timestamp search).
//!
//! **Invariants.**
//! - The map and its version change together, under the map's write lock, and only through
//!   [`SegmentMap`]'s mutating methods ([`SegmentMap::insert`], [`SegmentMap::remove`],
//!   [`SegmentMap::replace`], [`SegmentMap::replace_all`]), each of which bumps the version once.
//!   So two reads that see the same version see the same segment objects. No file but this one
//!   can make or change a [`Version`].
//! - A reader sees one map with its version, as it was before or after any change, never a mix:
//!   [`SegmentMap::read`] holds the read lock for as long as its [`SegmentsView`] lives; the
//!   one-call lookups take it for the lookup only.
//! - A derived value is computed from a view and kept with the view's version; it is handed out
//!   only to a view of that same version (never one computed from an older map), and computed
//!   at most once per version: the memo's lock is held while it is computed, and the map cannot
//!   change meanwhile (the caller's view holds its read lock).
//! - [`SegmentMap::rewrites`] counts [`SegmentMap::replace`] calls, bumped under the write lock
//!   with the map: whoever reads the new count and then looks a segment up finds the
//!   replacement, and whoever found the replacement reads the new count next.
//!
//! **Lock order.** The map's lock → a memo's lock → a segment's own locks. Nothing that takes
//! the map's lock is called while a view is alive or under a memo's lock (a second read lock
//! can wait behind a waiting writer).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use topicfs_format::{Offset, Timestamp};
use topicfs_source::SegmentSummary;
use topicfs_source::error::Result;
use topicfs_source::sync::lock;

use super::list_offsets::TimeSearch;
use crate::segment::LogSegment;

/// The number of changes a [`SegmentMap`] has had: a value made from the map at one version
/// describes it for as long as the version is the same. Only this file makes or bumps one.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Version(u64);

/// A value derived from something that changes by keys (a segment-map [`Version`], a log start
/// offset), kept with the key it was computed for.
///
/// **Invariant**: [`Memo::get_or_refine`] returns a value computed for the key it is given,
/// never one kept for another key; while the key is unchanged the value is computed once,
/// then only refined (when it does not fit the caller) from the one kept.
#[derive(Debug)]
pub(super) struct Memo<K, T> {
    slot: Mutex<Option<(K, T)>>,
}

impl<K, T> Default for Memo<K, T> {
    fn default() -> Self {
        Memo { slot: Mutex::new(None) }
    }
}

impl<K: Copy + Eq, T: Clone> Memo<K, T> {
    /// The value kept for `key`, else `compute()`, kept for `key` in place of any other.
    pub(super) fn get_or_try_compute(
        &self,
        key: K,
        compute: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        self.get_or_refine(key, |_| true, |_| compute())
    }

    /// The value kept for `key` if `fits` it; else `compute` of the value kept for `key` (`None`
    /// when the one kept is another key's, or there is none), kept for `key` in its place. The
    /// memo's lock is held while computing: callers of the same key wait for the first one's
    /// value instead of computing it again. A failed computation keeps nothing new.
    pub(super) fn get_or_refine(
        &self,
        key: K,
        fits: impl FnOnce(&T) -> bool,
        compute: impl FnOnce(Option<&T>) -> Result<T>,
    ) -> Result<T> {
        let mut slot = lock(&self.slot);
        let same_key = slot.as_ref().filter(|(k, _)| *k == key).map(|(_, v)| v);
        if let Some(value) = same_key
            && fits(value)
        {
            return Ok(value.clone());
        }
        let value = compute(same_key)?;
        *slot = Some((key, value.clone()));
        Ok(value)
    }
}

/// Bytes and max timestamp of every segment but the last: sealed segments never change size or
/// max timestamp while the map is unchanged, so a summary costs one segment (the active one),
/// not one per segment (streams ask for one on every open and `stat`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct SealedTotals {
    pub bytes: u64,
    pub max_timestamp: Option<Timestamp>,
}

/// The map and its version, changed together under [`SegmentMap`]'s lock.
#[derive(Debug, Default)]
struct Segments {
    by_base: BTreeMap<Offset, Arc<LogSegment>>,
    version: Version,
}

/// The values derived from the map, each kept for one [`Version`].
#[derive(Debug, Default)]
struct Memos {
    sealed_totals: Memo<Version, SealedTotals>,
    /// A `stat` of each segment's `.txnindex` made every lookup in `segments/` cost one system
    /// call per segment.
    sealed_summaries: Memo<Version, Arc<Vec<SegmentSummary>>>,
    /// Built by the first timestamp lookup after a change.
    time_search: Memo<Version, Arc<TimeSearch>>,
}

/// A partition's segments; see the module doc.
#[derive(Debug, Default)]
pub(super) struct SegmentMap {
    segments: RwLock<Segments>,
    memos: Memos,
    rewrites: AtomicU64,
}

impl SegmentMap {
    fn read_lock(&self) -> RwLockReadGuard<'_, Segments> {
        self.segments.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The write lock, the version bumped: every change goes through here.
    fn change(&self) -> RwLockWriteGuard<'_, Segments> {
        let mut segments = self.segments.write().unwrap_or_else(|e| e.into_inner());
        segments.version.0 += 1;
        segments
    }

    /// The map as it is now, held (with its version) until the view is dropped.
    pub(super) fn read(&self) -> SegmentsView<'_> {
        SegmentsView { segments: self.read_lock(), memos: &self.memos }
    }

    /// The version now.
    #[cfg(test)]
    fn version(&self) -> Version {
        self.read_lock().version
    }

    /// Adds `segment` at its base offset (a roll), in place of one with the same base.
    pub(super) fn insert(&self, segment: Arc<LogSegment>) {
        self.change().by_base.insert(segment.base_offset(), segment);
    }

    /// Removes the segment whose base offset is `base` (retention).
    pub(super) fn remove(&self, base: Offset) -> Option<Arc<LogSegment>> {
        self.change().by_base.remove(&base)
    }

    /// Puts `output` in place of `inputs` (the cleaner's swap) and counts the rewrite, both under
    /// the write lock (see [`SegmentMap::rewrites`]).
    pub(super) fn replace(&self, inputs: &[Arc<LogSegment>], output: Arc<LogSegment>) {
        let mut segments = self.change();
        for seg in inputs {
            segments.by_base.remove(&seg.base_offset());
        }
        segments.by_base.insert(output.base_offset(), output);
        self.rewrites.fetch_add(1, Ordering::AcqRel);
    }

    /// Replaces the whole map (a load, or a read-only log's reload).
    pub(super) fn replace_all(&self, by_base: BTreeMap<Offset, Arc<LogSegment>>) {
        self.change().by_base = by_base;
    }

    /// [`SegmentMap::replace`] calls so far.
    pub(super) fn rewrites(&self) -> u64 {
        self.rewrites.load(Ordering::Acquire)
    }

    /// The segments in base-offset order (a snapshot).
    pub(super) fn list(&self) -> Vec<Arc<LogSegment>> {
        self.read_lock().by_base.values().cloned().collect()
    }

    /// Every segment's base offset, in order.
    pub(super) fn bases(&self) -> Vec<Offset> {
        self.read_lock().by_base.keys().copied().collect()
    }

    /// Whether there is no segment.
    pub(super) fn is_empty(&self) -> bool {
        self.read_lock().by_base.is_empty()
    }

    /// The segment whose base offset is `base`.
    pub(super) fn get(&self, base: Offset) -> Option<Arc<LogSegment>> {
        self.read_lock().by_base.get(&base).cloned()
    }

    /// The last segment (the active one).
    pub(super) fn last(&self) -> Option<Arc<LogSegment>> {
        self.read_lock().by_base.values().next_back().cloned()
    }

    /// The floor segment of `at` (the last with base offset `<= at`), else the first segment.
    pub(super) fn floor(&self, at: Offset) -> Option<Arc<LogSegment>> {
        let segments = self.read_lock();
        let map = &segments.by_base;
        map.range(..=at).next_back().or_else(|| map.iter().next()).map(|(_, s)| Arc::clone(s))
    }

    /// The segment following the one whose base offset is `base`.
    pub(super) fn after(&self, base: Offset) -> Option<Arc<LogSegment>> {
        let segments = self.read_lock();
        let mut later = segments.by_base.range((Bound::Excluded(base), Bound::Unbounded));
        later.next().map(|(_, s)| Arc::clone(s))
    }

    /// Segments with base offset `>= from` in order, starting with the floor segment of `from`.
    pub(super) fn from(&self, from: Offset) -> Vec<Arc<LogSegment>> {
        let segments = self.read_lock();
        let map = &segments.by_base;
        let floor = map.range(..=from).next_back().map_or(Offset(i64::MIN), |(b, _)| *b);
        map.range(floor..).map(|(_, s)| Arc::clone(s)).collect()
    }
}

/// The map at one version, its read lock held while the view lives (see the module doc's lock
/// order), with the values derived from it.
pub(super) struct SegmentsView<'a> {
    segments: RwLockReadGuard<'a, Segments>,
    memos: &'a Memos,
}

impl SegmentsView<'_> {
    /// The version of the map seen.
    pub(super) fn version(&self) -> Version {
        self.segments.version
    }

    /// Number of segments.
    pub(super) fn len(&self) -> usize {
        self.segments.by_base.len()
    }

    /// The segments in base-offset order.
    pub(super) fn segments(
        &self,
    ) -> impl DoubleEndedIterator<Item = &Arc<LogSegment>> + ExactSizeIterator {
        self.segments.by_base.values()
    }

    /// Every segment but the last, in order.
    pub(super) fn sealed(&self) -> impl Iterator<Item = &Arc<LogSegment>> {
        self.segments().take(self.len().saturating_sub(1))
    }

    /// The last segment (the active one).
    pub(super) fn last(&self) -> Option<&Arc<LogSegment>> {
        self.segments().next_back()
    }

    /// The segment whose base offset is `base`.
    pub(super) fn get(&self, base: Offset) -> Option<&Arc<LogSegment>> {
        self.segments.by_base.get(&base)
    }

    /// Every segment's base offset, in order.
    pub(super) fn bases(&self) -> impl Iterator<Item = Offset> {
        self.segments.by_base.keys().copied()
    }

    /// The [`SealedTotals`] of this version (computed by the first caller).
    pub(super) fn sealed_totals(&self) -> Result<SealedTotals> {
        self.memos.sealed_totals.get_or_try_compute(self.version(), || {
            let mut totals = SealedTotals::default();
            for seg in self.sealed() {
                totals.bytes = totals.bytes.saturating_add(seg.size());
                let max = seg.max_timestamp_so_far()?.map(|(ts, _)| ts);
                totals.max_timestamp = totals.max_timestamp.max(max);
            }
            Ok(totals)
        })
    }

    /// The sealed segments' summaries of this version: `summary` of each (by the first caller).
    pub(super) fn sealed_summaries(
        &self,
        summary: impl Fn(&LogSegment) -> Result<SegmentSummary>,
    ) -> Result<Arc<Vec<SegmentSummary>>> {
        self.memos.sealed_summaries.get_or_try_compute(self.version(), || {
            Ok(Arc::new(self.sealed().map(|seg| summary(seg)).collect::<Result<Vec<_>>>()?))
        })
    }

    /// The [`TimeSearch`] of this version that `fits` the caller, else `build` of the one kept
    /// for this version, if any (see [`Memo::get_or_refine`]).
    pub(super) fn time_search(
        &self,
        fits: impl FnOnce(&TimeSearch) -> bool,
        build: impl FnOnce(Option<&TimeSearch>) -> Result<TimeSearch>,
    ) -> Result<Arc<TimeSearch>> {
        self.memos.time_search.get_or_refine(
            self.version(),
            |search| fits(search),
            |kept| build(kept.map(|s| &**s)).map(Arc::new),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    fn segment(dir: &std::path::Path, base: i64) -> Arc<LogSegment> {
        Arc::new(LogSegment::create(dir, Offset(base), 4096, 4096).unwrap())
    }

    fn bases(map: &SegmentMap) -> Vec<i64> {
        map.bases().into_iter().map(|b| b.0).collect()
    }

    #[test]
    fn every_change_of_the_map_bumps_its_version_once_and_a_lookup_none() {
        let tmp = tempfile::tempdir().unwrap();
        let map = SegmentMap::default();
        let v0 = map.version();
        map.insert(segment(tmp.path(), 0));
        let v1 = map.version();
        assert!(v1 > v0);
        map.insert(segment(tmp.path(), 10));
        let v2 = map.version();
        assert!(v2 > v1);
        let old = map.get(Offset(0)).unwrap();
        let (_, _, _, _, _) = (
            map.list(),
            map.last(),
            map.floor(Offset(5)),
            map.after(Offset(0)),
            map.from(Offset(3)),
        );
        assert_eq!(map.version(), v2, "lookups change nothing");
        map.replace(&[old], segment(tmp.path(), 0));
        let v3 = map.version();
        assert!(v3 > v2);
        assert_eq!(map.rewrites(), 1);
        assert!(map.remove(Offset(10)).is_some());
        let v4 = map.version();
        assert!(v4 > v3);
        map.replace_all(BTreeMap::new());
        assert!(map.version() > v4);
        assert!(map.is_empty());
        // Once each: the versions seen are consecutive.
        assert_eq!([v1.0 - v0.0, v2.0 - v1.0, v3.0 - v2.0, v4.0 - v3.0], [1; 4]);
    }

    #[test]
    fn lookups_find_the_floor_the_next_and_the_segments_from_an_offset() {
        let tmp = tempfile::tempdir().unwrap();
        let map = SegmentMap::default();
        assert!(map.floor(Offset(0)).is_none() && map.last().is_none());
        for base in [0, 10, 20] {
            map.insert(segment(tmp.path(), base));
        }
        let base = |s: Option<Arc<LogSegment>>| s.map(|s| s.base_offset().0);
        assert_eq!(base(map.floor(Offset(15))), Some(10));
        assert_eq!(base(map.floor(Offset(-5))), Some(0), "below every base: the first");
        assert_eq!(base(map.after(Offset(10))), Some(20));
        assert_eq!(base(map.after(Offset(20))), None);
        assert_eq!(base(map.last()), Some(20));
        let from: Vec<i64> = map.from(Offset(12)).iter().map(|s| s.base_offset().0).collect();
        assert_eq!(from, [10, 20]);
        let view = map.read();
        let sealed: Vec<i64> = view.sealed().map(|s| s.base_offset().0).collect();
        assert_eq!(sealed, [0, 10]);
        assert_eq!(view.last().map(|s| s.base_offset().0), Some(20));
    }

    #[test]
    fn a_memo_never_returns_a_value_kept_for_another_key() {
        let memo: Memo<u64, &str> = Memo::default();
        let computed = AtomicUsize::new(0);
        let get = |key: u64, value: &'static str| {
            memo.get_or_try_compute(key, || {
                computed.fetch_add(1, Ordering::Relaxed);
                Ok(value)
            })
            .unwrap()
        };
        assert_eq!(get(1, "one"), "one");
        assert_eq!(get(1, "not computed"), "one", "kept for its key");
        assert_eq!(get(2, "two"), "two");
        assert_eq!(get(1, "one again"), "one again", "not the value of key 2");
        assert_eq!(computed.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_memo_refines_only_its_own_keys_value_and_keeps_nothing_from_a_failure() {
        let memo: Memo<u64, u32> = Memo::default();
        assert_eq!(
            memo.get_or_refine(1, |_| true, |kept| Ok(kept.map_or(10, |v| v + 1))).unwrap(),
            10
        );
        // Does not fit: refined from the value kept for the same key.
        assert_eq!(
            memo.get_or_refine(1, |v| *v > 10, |kept| Ok(kept.map_or(0, |v| v + 1))).unwrap(),
            11
        );
        // Another key: computed afresh, never from key 1's value.
        assert_eq!(
            memo.get_or_refine(2, |_| false, |kept| Ok(kept.map_or(0, |v| v + 1))).unwrap(),
            0
        );
        let failed = memo.get_or_try_compute(3, || {
            Err(topicfs_source::error::Error::InvalidInput("no".to_string()))
        });
        assert!(failed.is_err());
        assert_eq!(
            memo.get_or_try_compute(2, || Ok(99)).unwrap(),
            0,
            "key 2's value is still kept"
        );
    }

    #[test]
    fn a_derived_value_is_computed_once_per_version_and_never_served_to_a_later_one() {
        let tmp = tempfile::tempdir().unwrap();
        let map = SegmentMap::default();
        for base in [0, 10] {
            map.insert(segment(tmp.path(), base));
        }
        let computed = AtomicUsize::new(0);
        let count_summaries = |view: &SegmentsView<'_>| {
            view.sealed_summaries(|seg| {
                computed.fetch_add(1, Ordering::Relaxed);
                super::super::segment_summary(seg)
            })
            .unwrap()
        };
        // Eight readers of one version at once: one computes, the others get its value.
        let barrier = Barrier::new(8);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let view = map.read();
                    barrier.wait();
                    let summaries = count_summaries(&view);
                    assert_eq!(summaries.len(), 1, "segment 0, the only sealed one");
                });
            }
        });
        assert_eq!(computed.load(Ordering::Relaxed), 1);
        // A change: the next reader's value is computed from the new map.
        map.insert(segment(tmp.path(), 20));
        let summaries = count_summaries(&map.read());
        let bases: Vec<i64> = summaries.iter().map(|s| s.base_offset.0).collect();
        assert_eq!(bases, [0, 10]);
        assert_eq!(computed.load(Ordering::Relaxed), 3, "both sealed segments again");
        // The totals follow the same rule.
        let totals = map.read().sealed_totals().unwrap();
        assert_eq!(totals, SealedTotals { bytes: 0, max_timestamp: None });
        map.remove(Offset(0));
        map.remove(Offset(10));
        assert_eq!(map.read().sealed().count(), 0);
        assert_eq!(count_summaries(&map.read()).len(), 0, "not the two of the older version");
    }

    #[test]
    fn readers_during_changes_see_the_old_or_the_new_map_with_its_version() {
        let tmp = tempfile::tempdir().unwrap();
        let map = SegmentMap::default();
        // Version v holds {0, 10} when v is odd, {0, 10, 20} when even.
        let odd: BTreeMap<Offset, Arc<LogSegment>> =
            [0, 10].map(|b| (Offset(b), segment(tmp.path(), b))).into();
        let mut even = odd.clone();
        even.insert(Offset(20), segment(tmp.path(), 20));
        map.replace_all(odd.clone());
        assert_eq!(map.version().0 % 2, 1);
        let expected =
            |version: Version| if version.0 % 2 == 1 { vec![0, 10] } else { vec![0, 10, 20] };
        let output = segment(tmp.path(), 0);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..2000 {
                        let view = map.read();
                        let seen: Vec<i64> = view.bases().map(|b| b.0).collect();
                        assert_eq!(seen, expected(view.version()));
                    }
                });
            }
            s.spawn(|| {
                for i in 0..1000 {
                    map.replace_all(if i % 2 == 0 { even.clone() } else { odd.clone() });
                }
            });
        });
        // A rewrite: whoever sees the new count finds the output, and the other way round.
        let before = map.get(Offset(0)).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..2000 {
                    let rewrites = map.rewrites();
                    let found = map.get(Offset(0)).is_some_and(|s| Arc::ptr_eq(&s, &output));
                    if rewrites == 1 {
                        assert!(found, "the count is bumped with the map");
                    }
                    if found {
                        assert_eq!(map.rewrites(), 1);
                    }
                }
            });
            s.spawn(|| map.replace(&[before], Arc::clone(&output)));
        });
        assert_eq!(bases(&map), [0, 10]);
    }
}
