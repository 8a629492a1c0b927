//! The time index (`.timeindex`): Kafka's `TimeIndex`.
//!
//! An index that maps timestamps to offsets in one segment. An entry `(T, O)` means: the largest
//! timestamp among all records up to and including the batch ending at offset `O` is `T`, and
//! `O` is where that maximum first appeared. Any record with a timestamp `> T` therefore lies
//! after `O`; records before `O` may still have timestamps `>= t` for a target `t < T`, which is
//! why lookups go through the offset index and a forward record scan.
//!
//! Format: 12-byte entries, an 8-byte big-endian timestamp (ms) and a 4-byte big-endian relative
//! offset. Entries are only written when the timestamp is strictly larger than the last entry's
//! (the "max timestamp so far" rule, Kafka's `maybeAppend`), so timestamps strictly increase and
//! offsets do not decrease along the file. The last slot is reserved: [`TimeIndex::is_full`] is
//! `entries >= max_entries - 1`, so the final entry written at roll always fits.
//!
//! Not thread-safe: a [`super::segment::LogSegment`] guards it with a lock.

use std::path::Path;

use topicfs_format::index_entry::{TIME_INDEX_ENTRY_SIZE, TimestampOffset};
use topicfs_format::{NO_TIMESTAMP, Offset, RelativeOffset, Timestamp};
use topicfs_source::error::{Error, Result};

use super::index::IndexFile;
use super::offset_index::{largest_lower_bound_slot, partition_point};

/// A segment's time index; see the module doc for the format and invariants.
#[derive(Debug)]
pub struct TimeIndex {
    base_offset: Offset,
    file: IndexFile,
    /// The last entry, or `(-1, base offset)` when empty.
    last_entry: (Timestamp, Offset),
}

impl TimeIndex {
    fn from_file(base_offset: Offset, file: IndexFile) -> TimeIndex {
        let mut index = TimeIndex { base_offset, file, last_entry: (NO_TIMESTAMP, base_offset) };
        index.last_entry = index.read_last_entry();
        index
    }

    /// Opens or creates the index of a writable (locked) log dir; `preallocate` extends it to
    /// `max_index_size` (the active segment).
    pub(crate) fn open_writable(
        path: &Path,
        base_offset: Offset,
        max_index_size: u32,
        preallocate: bool,
    ) -> Result<TimeIndex> {
        let file =
            IndexFile::open_writable(path, TIME_INDEX_ENTRY_SIZE, max_index_size, preallocate)?;
        Ok(TimeIndex::from_file(base_offset, file))
    }

    /// Maps the trimmed index of a sealed segment read-only (writable log dir).
    pub(crate) fn open_sealed(path: &Path, base_offset: Offset) -> Result<TimeIndex> {
        Ok(TimeIndex::from_file(base_offset, IndexFile::open_sealed(path, TIME_INDEX_ENTRY_SIZE)?))
    }

    /// Copies the index into memory with `pread` (read-only log dir).
    pub(crate) fn load_read_only(
        path: &Path,
        base_offset: Offset,
        max_index_size: u32,
    ) -> Result<TimeIndex> {
        let file = IndexFile::load_read_only(path, TIME_INDEX_ENTRY_SIZE, max_index_size)?;
        Ok(TimeIndex::from_file(base_offset, file))
    }

    /// An empty index in memory only (read-only rebuild).
    pub(crate) fn in_memory(path: &Path, base_offset: Offset, max_index_size: u32) -> TimeIndex {
        TimeIndex::from_file(
            base_offset,
            IndexFile::in_memory(path, TIME_INDEX_ENTRY_SIZE, max_index_size),
        )
    }

    /// Number of entries.
    pub fn entries(&self) -> usize {
        self.file.entries()
    }

    /// Number of slots the file can hold.
    pub fn max_entries(&self) -> usize {
        self.file.max_entries()
    }

    /// Whether the segment must roll: the last slot is kept for the final entry written at roll.
    pub fn is_full(&self) -> bool {
        self.file.entries() >= self.file.max_entries().saturating_sub(1)
    }

    /// The last entry, or `(-1, base offset)` when empty.
    pub fn last_entry(&self) -> (Timestamp, Offset) {
        self.last_entry
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

    fn decoded(&self, n: usize) -> Option<TimestampOffset> {
        TimestampOffset::decode(self.file.slot(n)?).ok()
    }

    /// Entry `n` as (timestamp, absolute offset).
    pub fn entry(&self, n: usize) -> Option<(Timestamp, Offset)> {
        let e = self.decoded(n)?;
        Some((e.timestamp, self.base_offset.plus(i64::from(e.relative_offset.0))))
    }

    fn read_last_entry(&self) -> (Timestamp, Offset) {
        self.entries()
            .checked_sub(1)
            .and_then(|n| self.entry(n))
            .unwrap_or((NO_TIMESTAMP, self.base_offset))
    }

    /// The entry with the largest timestamp `<= target`, or `(-1, base offset)` when there is
    /// none (Kafka's `lookup`).
    pub fn lookup(&self, target: Timestamp) -> (Timestamp, Offset) {
        let none = (NO_TIMESTAMP, self.base_offset);
        largest_lower_bound_slot(self.entries(), target, |n| self.decoded(n).map(|e| e.timestamp))
            .and_then(|slot| self.entry(slot))
            .unwrap_or(none)
    }

    /// Appends `(timestamp, offset)` if `timestamp` is larger than the last entry's (Kafka's
    /// `maybeAppend`). Refused when full (unless `skip_full_check`, used for the final entry at
    /// roll and close), when `offset` is below the last entry's offset, or when `timestamp` is
    /// below the last entry's timestamp.
    pub fn maybe_append(
        &mut self,
        timestamp: Timestamp,
        offset: Offset,
        skip_full_check: bool,
    ) -> Result<()> {
        let at = (self.entries() * TIME_INDEX_ENTRY_SIZE) as u64;
        if !skip_full_check && self.is_full() {
            return Err(Error::InvalidInput(format!(
                "attempt to append to a full time index {} ({} entries)",
                self.file.path().display(),
                self.entries()
            )));
        }
        let (last_ts, last_offset) = self.last_entry;
        if self.entries() > 0 && offset < last_offset {
            return Err(Error::corrupt(
                self.file.path(),
                at,
                format!("attempt to append offset {offset} below the last offset {last_offset}"),
            ));
        }
        if self.entries() > 0 && timestamp < last_ts {
            return Err(Error::corrupt(
                self.file.path(),
                at,
                format!("attempt to append timestamp {timestamp} below the last {last_ts}"),
            ));
        }
        if timestamp <= last_ts {
            return Ok(());
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
        let entry = TimestampOffset { timestamp, relative_offset: RelativeOffset(relative) };
        self.file.append_slot(&entry.encode())?;
        self.last_entry = (timestamp, offset);
        Ok(())
    }

    /// Removes every entry with offset `>= offset` (Kafka's `truncateTo`, on the offset column).
    pub fn truncate_to(&mut self, offset: Offset) -> Result<()> {
        let keep =
            partition_point(self.entries(), |n| self.entry(n).is_some_and(|(_, o)| o < offset));
        self.file.truncate_entries(keep)?;
        self.last_entry = self.read_last_entry();
        Ok(())
    }

    /// Removes all entries.
    pub fn reset(&mut self) -> Result<()> {
        self.file.truncate_entries(0)?;
        self.last_entry = (NO_TIMESTAMP, self.base_offset);
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

    /// Kafka's `sanityCheck`, plus the ordering invariant over all entries: timestamps strictly
    /// increase, offsets do not decrease and are not below the base offset.
    pub fn sanity_check(&self) -> Result<()> {
        let mut previous: Option<(Timestamp, Offset)> = None;
        for n in 0..self.entries() {
            let Some(entry) = self.entry(n) else { break };
            let bad = entry.1 < self.base_offset
                || previous.is_some_and(|prev| entry.0 <= prev.0 || entry.1 < prev.1);
            if bad {
                return Err(Error::corrupt(
                    self.file.path(),
                    (n * TIME_INDEX_ENTRY_SIZE) as u64,
                    format!(
                        "entry {n} (timestamp {}, offset {}) breaks the time index order \
                         (previous {previous:?}, base offset {})",
                        entry.0, entry.1, self.base_offset
                    ),
                ));
            }
            previous = Some(entry);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_index(dir: &Path, base: i64, slots: u32) -> TimeIndex {
        let path = dir.join(format!("{base:020}.timeindex"));
        TimeIndex::open_writable(&path, Offset(base), slots * 12, true).unwrap()
    }

    #[test]
    fn only_a_new_max_timestamp_is_appended() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(dir.path(), 0, 100);
        idx.maybe_append(NO_TIMESTAMP, Offset(0), false).unwrap();
        assert_eq!(idx.entries(), 0, "v0 data (no timestamps) leaves the index empty");
        idx.maybe_append(1000, Offset(4), false).unwrap();
        idx.maybe_append(1000, Offset(9), false).unwrap();
        assert_eq!(idx.entries(), 1, "same max again is a no-op");
        idx.maybe_append(2000, Offset(9), false).unwrap();
        assert_eq!(idx.entries(), 2);
        assert!(idx.maybe_append(1500, Offset(12), false).is_err(), "timestamp going back");
        assert!(idx.maybe_append(3000, Offset(8), false).is_err(), "offset going back");
        assert_eq!(idx.last_entry(), (2000, Offset(9)));
    }

    #[test]
    fn lookup_returns_largest_timestamp_at_or_below_target() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(dir.path(), 50, 100);
        for (ts, off) in [(100, 52), (200, 60), (300, 61)] {
            idx.maybe_append(ts, Offset(off), false).unwrap();
        }
        assert_eq!(idx.lookup(99), (NO_TIMESTAMP, Offset(50)));
        assert_eq!(idx.lookup(100), (100, Offset(52)));
        assert_eq!(idx.lookup(299), (200, Offset(60)));
        assert_eq!(idx.lookup(i64::MAX), (300, Offset(61)));
    }

    #[test]
    fn last_slot_is_reserved_for_the_roll_entry() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(dir.path(), 0, 3);
        idx.maybe_append(1, Offset(1), false).unwrap();
        idx.maybe_append(2, Offset(2), false).unwrap();
        assert!(idx.is_full());
        assert!(idx.maybe_append(3, Offset(3), false).is_err());
        idx.maybe_append(3, Offset(3), true).unwrap();
        assert_eq!(idx.entries(), 3);
    }

    #[test]
    fn truncate_and_reopen_keep_the_zero_tail_rule() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = new_index(dir.path(), 0, 100);
        for (ts, off) in [(5, 0), (10, 3), (20, 7)] {
            idx.maybe_append(ts, Offset(off), false).unwrap();
        }
        idx.truncate_to(Offset(7)).unwrap();
        assert_eq!(idx.last_entry(), (10, Offset(3)));
        let path = idx.file().path().to_path_buf();
        drop(idx);
        let idx = TimeIndex::open_writable(&path, Offset(0), 1200, false).unwrap();
        assert_eq!(idx.entries(), 2, "the zeroed tail does not count");
        idx.sanity_check().unwrap();
    }
}
