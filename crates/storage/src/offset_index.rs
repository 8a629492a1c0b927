//! The offset index (`.index`): Kafka's `OffsetIndex`.
//!
//! An index that maps offsets to physical positions in one segment's `.log` file. The index may
//! be sparse: not every batch has an entry. An entry `(O, P)` says that every batch containing an
//! offset `>= O` starts at or after position `P`; `O` is the **last** offset of the batch (or set
//! of batches) that starts at `P`, so `O` is not a batch base offset and readers always scan
//! forward from `P`.
//!
//! Format: 8-byte entries, a 4-byte big-endian relative offset (offset minus the segment's base
//! offset, `0 ..= i32::MAX`) and a 4-byte big-endian position. No header, no checksum: after a
//! crash the index is rebuilt from the log (recovery). The file is preallocated to
//! `segment.index.bytes` while its segment is active and trimmed to its entries afterwards.
//!
//! **Invariants**: offsets strictly increase along the file (an append that does not increase
//! the offset is refused); positions do not decrease. All public methods take and return
//! absolute offsets; relative offsets stay inside this file.
//!
//! Not thread-safe: a [`super::segment::LogSegment`] guards it with a lock.

use std::path::Path;

use topicfs_format::index_entry::{OFFSET_INDEX_ENTRY_SIZE, OffsetPosition};
use topicfs_format::{Offset, Position, RelativeOffset};
use topicfs_source::error::{Error, Result};

use super::index::IndexFile;

/// Entries in Kafka's 8 KiB "warm section" at the end of the index (KAFKA-6432): searching it
/// first keeps the pages touched by tailing readers hot, the result is the same.
const WARM_ENTRIES: usize = 8192 / OFFSET_INDEX_ENTRY_SIZE;

/// A segment's offset index; see the module doc for the format and invariants.
#[derive(Debug)]
pub struct OffsetIndex {
    base_offset: Offset,
    file: IndexFile,
    /// Offset of the last entry, or the base offset when empty.
    last_offset: Offset,
}

impl OffsetIndex {
    fn from_file(base_offset: Offset, file: IndexFile) -> OffsetIndex {
        let mut index = OffsetIndex { base_offset, file, last_offset: base_offset };
        index.last_offset = index.last_entry().map_or(base_offset, |(o, _)| o);
        index
    }

    /// Opens or creates the index of a writable (locked) log dir; `preallocate` extends it to
    /// `max_index_size` (the active segment).
    pub(crate) fn open_writable(
        path: &Path,
        base_offset: Offset,
        max_index_size: u32,
        preallocate: bool,
    ) -> Result<OffsetIndex> {
        let file =
            IndexFile::open_writable(path, OFFSET_INDEX_ENTRY_SIZE, max_index_size, preallocate)?;
        Ok(OffsetIndex::from_file(base_offset, file))
    }

    /// Maps the trimmed index of a sealed segment read-only (writable log dir).
    pub(crate) fn open_sealed(path: &Path, base_offset: Offset) -> Result<OffsetIndex> {
        Ok(OffsetIndex::from_file(
            base_offset,
            IndexFile::open_sealed(path, OFFSET_INDEX_ENTRY_SIZE)?,
        ))
    }

    /// Copies the index into memory with `pread` (read-only log dir).
    pub(crate) fn load_read_only(
        path: &Path,
        base_offset: Offset,
        max_index_size: u32,
    ) -> Result<OffsetIndex> {
        let file = IndexFile::load_read_only(path, OFFSET_INDEX_ENTRY_SIZE, max_index_size)?;
        Ok(OffsetIndex::from_file(base_offset, file))
    }

    /// An empty index in memory only (read-only rebuild).
    pub(crate) fn in_memory(path: &Path, base_offset: Offset, max_index_size: u32) -> OffsetIndex {
        let file = IndexFile::in_memory(path, OFFSET_INDEX_ENTRY_SIZE, max_index_size);
        OffsetIndex::from_file(base_offset, file)
    }

    /// Base offset of the segment.
    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// Number of entries.
    pub fn entries(&self) -> usize {
        self.file.entries()
    }

    /// Number of slots the file can hold.
    pub fn max_entries(&self) -> usize {
        self.file.max_entries()
    }

    /// Whether no further entry fits (`entries >= max_entries`): the segment must roll.
    pub fn is_full(&self) -> bool {
        self.file.entries() >= self.file.max_entries()
    }

    /// Offset of the last entry, or the base offset when the index is empty.
    pub fn last_offset(&self) -> Offset {
        self.last_offset
    }

    /// The valid entries as stored (no zero tail).
    pub fn valid_bytes(&self) -> &[u8] {
        self.file.valid_bytes()
    }

    /// The file length, preallocated tail included.
    pub fn length(&self) -> u64 {
        self.file.length()
    }

    pub(crate) fn file(&self) -> &IndexFile {
        &self.file
    }

    fn relative_at(&self, n: usize) -> Option<u32> {
        self.file.slot(n).and_then(|s| OffsetPosition::decode(s).ok()).map(|e| e.relative_offset.0)
    }

    /// Entry `n` as (absolute offset, position).
    pub fn entry(&self, n: usize) -> Option<(Offset, Position)> {
        let e = OffsetPosition::decode(self.file.slot(n)?).ok()?;
        Some((
            self.base_offset.plus(i64::from(e.relative_offset.0)),
            Position(u64::from(e.position)),
        ))
    }

    fn last_entry(&self) -> Option<(Offset, Position)> {
        self.entry(self.entries().checked_sub(1)?)
    }

    /// The entry with the largest offset `<= target`, or `(base offset, 0)` when the index is
    /// empty or every entry is larger (Kafka's `lookup`).
    pub fn lookup(&self, target: Offset) -> (Offset, Position) {
        let floor = (self.base_offset, Position(0));
        let Some(rel) = self.relative(target) else { return floor };
        match largest_lower_bound_slot(self.entries(), rel, |n| self.relative_at(n)) {
            Some(slot) => self.entry(slot).unwrap_or(floor),
            None => floor,
        }
    }

    /// `target` relative to the base offset, clamped to `u32`; `None` below the base offset.
    fn relative(&self, target: Offset) -> Option<u32> {
        let delta = target.0.checked_sub(self.base_offset.0)?;
        if delta < 0 { None } else { Some(u32::try_from(delta).unwrap_or(u32::MAX)) }
    }

    /// Appends `(offset, position)`. Refused when the index is full, when `offset` is not larger
    /// than the last entry's, or when it does not fit a relative offset.
    pub fn append(&mut self, offset: Offset, position: Position) -> Result<()> {
        let at = (self.entries() * OFFSET_INDEX_ENTRY_SIZE) as u64;
        if self.entries() > 0 && offset <= self.last_offset {
            return Err(Error::corrupt(
                self.file.path(),
                at,
                format!(
                    "attempt to append offset {offset} to position {} no larger than the last \
                     offset appended ({})",
                    self.entries(),
                    self.last_offset
                ),
            ));
        }
        let relative = offset
            .0
            .checked_sub(self.base_offset.0)
            .and_then(|d| u32::try_from(d).ok())
            .filter(|d| *d <= i32::MAX as u32)
            .ok_or_else(|| {
                Error::corrupt(
                    self.file.path(),
                    at,
                    format!(
                        "offset {offset} overflows a relative offset of base {}",
                        self.base_offset
                    ),
                )
            })?;
        let position = u32::try_from(position.0).map_err(|_| {
            Error::corrupt(self.file.path(), at, format!("position {position} exceeds 2^32"))
        })?;
        let entry = OffsetPosition { relative_offset: RelativeOffset(relative), position };
        self.file.append_slot(&entry.encode())?;
        self.last_offset = offset;
        Ok(())
    }

    /// Removes every entry with offset `>= offset` (Kafka's `truncateTo`).
    pub fn truncate_to(&mut self, offset: Offset) -> Result<()> {
        let keep = match self.relative(offset) {
            None => 0,
            Some(rel) => {
                partition_point(self.entries(), |n| self.relative_at(n).is_some_and(|r| r < rel))
            }
        };
        self.file.truncate_entries(keep)?;
        self.last_offset = self.last_entry().map_or(self.base_offset, |(o, _)| o);
        Ok(())
    }

    /// Removes all entries.
    pub fn reset(&mut self) -> Result<()> {
        self.file.truncate_entries(0)?;
        self.last_offset = self.base_offset;
        Ok(())
    }

    /// Trims the file to its entries (`trimToValidSize`).
    pub fn trim_to_valid_size(&mut self) -> Result<()> {
        self.file.trim_to_valid_size()
    }

    /// Extends the file back to `max_index_size` (the segment became active again).
    pub fn resize(&mut self, max_index_size: u32) -> Result<()> {
        self.file.resize(max_index_size)
    }

    /// Kafka's `sanityCheck`, plus a check of the ordering invariant over all entries: corrupt
    /// if the last offset is below the base offset, or if offsets do not strictly increase or
    /// positions decrease.
    pub fn sanity_check(&self) -> Result<()> {
        let mut previous: Option<(Offset, Position)> = None;
        for n in 0..self.entries() {
            let Some(entry) = self.entry(n) else { break };
            if let Some(prev) = previous
                && (entry.0 <= prev.0 || entry.1 < prev.1)
            {
                return Err(Error::corrupt(
                    self.file.path(),
                    (n * OFFSET_INDEX_ENTRY_SIZE) as u64,
                    format!(
                        "entry {n} (offset {}, position {}) does not follow (offset {}, position {})",
                        entry.0, entry.1, prev.0, prev.1
                    ),
                ));
            }
            previous = Some(entry);
        }
        if self.last_offset < self.base_offset {
            return Err(Error::corrupt(
                self.file.path(),
                0,
                format!(
                    "last offset {} is below base offset {}",
                    self.last_offset, self.base_offset
                ),
            ));
        }
        Ok(())
    }
}

/// Largest slot in `[0, n)` whose key is `<= target`, searching the warm section first
/// (Kafka's `indexSlotRangeFor` / `largestLowerBoundSlotFor`). Keys are non-decreasing; an
/// unreadable slot counts as larger than any target.
pub(crate) fn largest_lower_bound_slot<K: Ord + Copy>(
    n: usize,
    target: K,
    key: impl Fn(usize) -> Option<K>,
) -> Option<usize> {
    if n == 0 {
        return None;
    }
    let bsearch = |mut lo: usize, mut hi: usize| -> usize {
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            match key(mid) {
                Some(k) if k < target => lo = mid,
                Some(k) if k == target => return mid,
                _ => hi = mid - 1,
            }
        }
        lo
    };
    let first_hot = n.saturating_sub(1 + WARM_ENTRIES);
    if key(first_hot).is_some_and(|k| k < target) {
        return Some(bsearch(first_hot, n - 1));
    }
    match key(0) {
        Some(k) if k <= target => Some(bsearch(0, first_hot)),
        _ => None,
    }
}

/// Number of leading slots in `[0, n)` for which `pred` holds (`pred` true then false).
pub fn partition_point(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) { lo = mid + 1 } else { hi = mid }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_with(dir: &Path, base: i64, entries: &[(i64, u64)]) -> OffsetIndex {
        let path = dir.join(topicfs_format::file_name::format_base_offset(Offset(base)) + ".index");
        let mut idx = OffsetIndex::open_writable(&path, Offset(base), 8 * 4096, true).unwrap();
        for &(o, p) in entries {
            idx.append(Offset(o), Position(p)).unwrap();
        }
        idx
    }

    #[test]
    fn lookup_returns_the_floor_entry() {
        let dir = tempfile::tempdir().unwrap();
        let idx = index_with(dir.path(), 100, &[(105, 40), (110, 90), (120, 300)]);
        assert_eq!(idx.lookup(Offset(99)), (Offset(100), Position(0)), "below base");
        assert_eq!(idx.lookup(Offset(104)), (Offset(100), Position(0)), "below first entry");
        assert_eq!(idx.lookup(Offset(105)), (Offset(105), Position(40)));
        assert_eq!(idx.lookup(Offset(119)), (Offset(110), Position(90)));
        assert_eq!(idx.lookup(Offset(5000)), (Offset(120), Position(300)));
    }

    #[test]
    fn lookup_matches_a_linear_floor_over_the_warm_and_cold_sections() {
        let dir = tempfile::tempdir().unwrap();
        let entries: Vec<(i64, u64)> = (0..3000).map(|i| (i * 3 + 1, i as u64 * 10)).collect();
        let idx = index_with(dir.path(), 0, &entries);
        for target in 0..9010 {
            let expected = entries
                .iter()
                .rev()
                .find(|(o, _)| *o <= target)
                .map_or((Offset(0), Position(0)), |&(o, p)| (Offset(o), Position(p)));
            assert_eq!(idx.lookup(Offset(target)), expected, "target {target}");
        }
    }

    #[test]
    fn append_refuses_non_increasing_offsets_and_full_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        let mut idx = OffsetIndex::open_writable(&path, Offset(0), 16, true).unwrap();
        idx.append(Offset(5), Position(10)).unwrap();
        assert!(idx.append(Offset(5), Position(20)).is_err());
        assert!(idx.append(Offset(4), Position(20)).is_err());
        idx.append(Offset(6), Position(20)).unwrap();
        assert!(idx.is_full());
        assert!(idx.append(Offset(7), Position(30)).is_err());
    }

    #[test]
    fn zero_tail_is_ignored_on_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let idx = index_with(dir.path(), 0, &[(3, 50), (7, 100), (9, 200)]);
        let path = idx.file().path().to_path_buf();
        drop(idx);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8 * 4096, "still preallocated");
        let reopened = OffsetIndex::open_writable(&path, Offset(0), 8 * 4096, false).unwrap();
        assert_eq!(reopened.entries(), 3);
        assert_eq!(reopened.last_offset(), Offset(9));
        let copy = OffsetIndex::load_read_only(&path, Offset(0), 8 * 4096).unwrap();
        assert_eq!(copy.entries(), 3);
        assert_eq!(copy.valid_bytes().len(), 24);
        reopened.sanity_check().unwrap();
    }

    #[test]
    fn truncate_to_removes_entries_at_and_after_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = index_with(dir.path(), 10, &[(12, 10), (15, 20), (18, 30)]);
        idx.truncate_to(Offset(16)).unwrap();
        assert_eq!(idx.entries(), 2);
        idx.truncate_to(Offset(15)).unwrap();
        assert_eq!(idx.entries(), 1);
        assert_eq!(idx.last_offset(), Offset(12));
        idx.append(Offset(13), Position(15)).unwrap();
        let path = idx.file().path().to_path_buf();
        drop(idx);
        let reopened = OffsetIndex::open_writable(&path, Offset(10), 8 * 4096, false).unwrap();
        assert_eq!(reopened.entries(), 2, "truncated slots were zeroed");
    }
}
