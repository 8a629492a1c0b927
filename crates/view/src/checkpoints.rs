//! A sparse list of checkpoints: places in a rendering where a read can start, kept every so
//! often and thinned when there are too many. Used by the render index (log cursors and
//! rendered positions), the topic merge index (one cursor per partition) and the `.log` dump
//! (text and `.log` positions).
//!
//! **Invariants** (of every [`SparseCheckpoints`]):
//! - it is never empty, and its first checkpoint is the one it was made with (or reset to) or
//!   the first its owner kept when dropping a prefix ([`SparseCheckpoints::drop_front`]);
//! - checkpoints are in the order they were pushed, and every key its owner looks them up by
//!   ascends in that order (the owner pushes only checkpoints past the last);
//! - after a push it holds at most its bound, or twice its *pinned* checkpoints (segment
//!   starts, say) plus two when those are many: going over the bound drops every other
//!   checkpoint, keeping the first and every pinned one, and [`SparseCheckpoints::push`] says
//!   so, for the owner to double its interval;
//! - a floor lookup answers exactly the last checkpoint whose key is at or before the one asked.

/// A sparse, ordered, bounded list of checkpoints (see the module docs).
#[derive(Clone, Debug)]
pub struct SparseCheckpoints<T> {
    list: Vec<T>,
    /// Most checkpoints kept (at least 2); more are thinned.
    max: usize,
}

impl<T> SparseCheckpoints<T> {
    /// A list holding `first` only, thinned when it grows past `max` (at least 2).
    pub fn new(first: T, max: usize) -> SparseCheckpoints<T> {
        SparseCheckpoints { list: vec![first], max: max.max(2) }
    }

    /// Appends `c` (which the owner places past the last checkpoint). When the list then
    /// holds more than its bound, every other checkpoint is dropped, the first and those
    /// `pinned` says being kept: `true` then (the owner doubles its interval).
    pub fn push(&mut self, c: T, pinned: impl Fn(&T) -> bool) -> bool {
        self.list.push(c);
        if self.list.len() <= self.max {
            return false;
        }
        let mut i = 0usize;
        self.list.retain(|c| {
            let keep = i % 2 == 0 || pinned(c);
            i += 1;
            keep
        });
        true
    }

    /// The checkpoints, in order.
    pub fn as_slice(&self) -> &[T] {
        &self.list
    }

    /// The first checkpoint.
    pub fn first(&self) -> Option<&T> {
        self.list.first()
    }

    /// The last checkpoint.
    pub fn last(&self) -> Option<&T> {
        self.list.last()
    }

    /// Number of checkpoints held.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Never true (see the invariants); for completeness.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The last checkpoint whose key is at or before the one asked: `at_or_before` answers
    /// that for one checkpoint, and must hold for a prefix of the list and not after it (it
    /// compares an ascending key). `None` when it holds for none.
    pub fn floor(&self, at_or_before: impl Fn(&T) -> bool) -> Option<&T> {
        self.floor_at(at_or_before).map(|(_, c)| c)
    }

    /// [`SparseCheckpoints::floor`] with the checkpoint's index in the list.
    pub fn floor_at(&self, at_or_before: impl Fn(&T) -> bool) -> Option<(usize, &T)> {
        let i = self.list.partition_point(at_or_before).checked_sub(1)?;
        self.list.get(i).map(|c| (i, c))
    }

    /// The first checkpoint after those for which `at_or_before` holds (as for
    /// [`SparseCheckpoints::floor`]).
    pub fn after(&self, at_or_before: impl Fn(&T) -> bool) -> Option<&T> {
        self.list.get(self.list.partition_point(at_or_before))
    }

    /// Drops the first `n` checkpoints (those in a deleted or replaced part of the log); when
    /// that would leave none, the list holds `instead` alone.
    pub fn drop_front(&mut self, n: usize, instead: T) {
        self.list.drain(..n.min(self.list.len()));
        if self.list.is_empty() {
            self.list.push(instead);
        }
    }

    /// Forgets every checkpoint: the list holds `first` alone.
    pub fn reset(&mut self, first: T) {
        self.list.clear();
        self.list.push(first);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint at (key, pinned).
    type C = (u64, bool);

    /// The last checkpoint with key `<= x`, by a linear scan.
    fn floor_by_scan(list: &[C], x: u64) -> Option<C> {
        list.iter().rev().find(|c| c.0 <= x).copied()
    }

    #[test]
    fn pushes_stay_sorted_bounded_and_keep_the_first_and_pinned_checkpoints() {
        let max = 16;
        let mut cps = SparseCheckpoints::new((0u64, false), max);
        let mut thinned = 0;
        let mut pinned = Vec::new();
        for k in 1..2_000u64 {
            let pin = k % 97 == 0;
            if pin {
                pinned.push(k);
            }
            if cps.push((k * 3, pin), |c| c.1) {
                thinned += 1;
            }
            let list = cps.as_slice();
            assert!(list.windows(2).all(|w| w[0].0 < w[1].0), "sorted after push {k}");
            let pins = list.iter().filter(|c| c.1).count();
            assert!(cps.len() <= max.max(2 * pins + 2), "bounded: {} checkpoints", cps.len());
            assert_eq!(cps.first(), Some(&(0, false)), "the first is kept");
        }
        assert!(thinned > 0);
        for p in &pinned {
            assert!(cps.as_slice().iter().any(|c| c.0 == p * 3), "pinned {p} kept");
        }
    }

    #[test]
    fn a_floor_lookup_is_the_last_checkpoint_at_or_before_the_key() {
        let mut cps = SparseCheckpoints::new((10u64, false), 8);
        for k in [20, 25, 40, 41, 90, 200, 201, 500, 900, 1000, 1500] {
            cps.push((k, false), |c| c.1);
        }
        let list = cps.as_slice().to_vec();
        for x in 0..1_600 {
            assert_eq!(cps.floor(|c| c.0 <= x).copied(), floor_by_scan(&list, x), "floor of {x}");
            if let Some((i, c)) = cps.floor_at(|c| c.0 <= x) {
                assert_eq!(list.get(i), Some(c));
            }
            let after = list.iter().find(|c| c.0 > x).copied();
            assert_eq!(cps.after(|c| c.0 <= x).copied(), after, "after {x}");
        }
    }

    #[test]
    fn dropping_a_prefix_or_resetting_never_leaves_the_list_empty() {
        let mut cps = SparseCheckpoints::new((0u64, false), 8);
        cps.push((5, false), |c| c.1);
        cps.push((9, false), |c| c.1);
        cps.drop_front(1, (100, false));
        assert_eq!(cps.as_slice(), &[(5, false), (9, false)]);
        cps.drop_front(5, (100, false));
        assert_eq!(cps.as_slice(), &[(100, false)]);
        cps.reset((7, true));
        assert_eq!(cps.as_slice(), &[(7, true)]);
        assert!(!cps.is_empty());
    }
}
