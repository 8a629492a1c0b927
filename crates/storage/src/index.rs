//! The storage shared by the offset and time indexes (Kafka's `AbstractIndex`).
//!
//! An index file is an array of fixed-size entries with no header. In a writable log dir a new
//! index file is preallocated to `segment.index.bytes` rounded down to a whole entry and mapped
//! read-write ([`super::mmap`]); entries are appended in place and the entry count is kept in
//! memory. When the segment stops being active (roll, close) the file is trimmed to its valid
//! entries, so a cleanly closed index has exactly `length / entry size` entries.
//!
//! **Zero tail.** An index left preallocated (active segment of a running or crashed writer) ends
//! in zero-filled slots. Kafka counts `length / entry size` entries and relies on recovery to
//! rebuild such files; the dump tool instead stops at the first slot `i > 0` that is all zero.
//! This engine counts the slots before the first all-zero slot, close to the dump tool's rule.
//! A written slot is never all zero: offset-index entries strictly increase and the first one
//! never has position 0 (the first set of a segment is not indexed), and time-index entries
//! strictly increase from a timestamp `>= 0`, so only a `(timestamp 0, base offset)` first entry
//! (a record stamped at the epoch) would be mistaken for unwritten space, which costs nothing
//! but a fallback to the file's mtime. The boundary is found by binary search, assuming (as
//! Kafka's writers guarantee) that the unwritten slots form one contiguous tail; truncation
//! zeroes the slots it removes so the rule keeps holding after a crash.
//!
//! **Read-only copies.** In read-only mode (a broker may own the files) an index file is copied
//! into memory with `pread` and never mapped, so a concurrent truncation cannot fault us; indexes
//! rebuilt by recovery in read-only mode live only in memory.
//!
//! This type is not thread-safe; segments guard each index with a lock.

use std::fs::{File, OpenOptions};

use super::open::{is_not_found, open_regular, read_regular};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use topicfs_source::error::{Error, Result};

use super::mmap::{IndexMap, IndexMapMut};

/// Where the entry bytes live.
#[derive(Debug)]
enum Storage {
    /// Writable log dir: the whole (possibly preallocated) file mapped read-write.
    Mapped { file: Arc<File>, map: IndexMapMut },
    /// Writable log dir, sealed segment: mapped read-only until someone needs to change it.
    Sealed { map: IndexMap },
    /// Read-only log dir (or an index rebuilt in memory): a private copy of the valid entries.
    Memory { bytes: Vec<u8> },
}

/// A fixed-entry-size index file: entry count, preallocation, trimming, raw slot access.
///
/// **Invariants**: `entries <= max_entries`; the slots `[0, entries)` hold the valid entries;
/// in a mapped file the slots `[entries, max_entries)` are zero.
#[derive(Debug)]
pub(crate) struct IndexFile {
    path: PathBuf,
    entry_size: usize,
    storage: Storage,
    entries: usize,
    max_entries: usize,
}

/// Rounds `max_index_size` down to a whole number of entries (Kafka: `roundDownToExactMultiple`).
fn max_entries_for(max_index_size: u32, entry_size: usize) -> usize {
    max_index_size as usize / entry_size
}

impl IndexFile {
    /// Opens (creating if missing) an index file of a locked, writable log dir and maps it.
    ///
    /// A new or empty file is preallocated to `max_index_size` rounded down to whole entries when
    /// `preallocate` is set (the active segment); an existing file keeps its length. Entries are
    /// counted by the zero-tail rule (module doc).
    pub(crate) fn open_writable(
        path: &Path,
        entry_size: usize,
        max_index_size: u32,
        preallocate: bool,
    ) -> Result<IndexFile> {
        let file = open_regular(
            path,
            OpenOptions::new().read(true).write(true).create(true).truncate(false),
            "open index",
        )?;
        let len = file.metadata().map_err(|e| Error::io(path, "stat index", e))?.len();
        let whole = (len / entry_size as u64) * entry_size as u64;
        if whole != len {
            // A partial trailing entry is never valid; drop it like Kafka's resize would.
            file.set_len(whole).map_err(|e| Error::io(path, "truncate index", e))?;
        }
        let mut index = IndexFile {
            path: path.to_path_buf(),
            entry_size,
            storage: Storage::Memory { bytes: Vec::new() },
            entries: 0,
            max_entries: 0,
        };
        index.storage = index.map_mut(file)?;
        index.max_entries = index.bytes().len() / entry_size;
        index.entries = count_written_slots(index.bytes(), entry_size);
        if preallocate {
            index.resize(max_index_size)?;
        }
        Ok(index)
    }

    /// Opens a sealed index file of a locked, writable log dir read-only (lazily, on first use).
    /// A missing file is an empty index.
    pub(crate) fn open_sealed(path: &Path, entry_size: usize) -> Result<IndexFile> {
        let file = match open_regular(path, OpenOptions::new().read(true), "open index") {
            Ok(f) => f,
            Err(e) if is_not_found(&e) => {
                return Ok(IndexFile::in_memory(path, entry_size, 0));
            }
            Err(e) => return Err(e),
        };
        let len = file.metadata().map_err(|e| Error::io(path, "stat index", e))?.len();
        if len % entry_size as u64 != 0 {
            // Not trimmed to whole entries: reopen writable, which drops the partial entry.
            return IndexFile::open_writable(path, entry_size, 0, false);
        }
        let map = IndexMap::map(&file).map_err(|e| Error::io(path, "mmap index", e))?;
        let max_entries = map.as_slice().len() / entry_size;
        let entries = count_written_slots(map.as_slice(), entry_size);
        Ok(IndexFile {
            path: path.to_path_buf(),
            entry_size,
            storage: Storage::Sealed { map },
            entries,
            max_entries,
        })
    }

    /// Copies an index file into memory with `pread` (read-only mode: never mapped, never
    /// modified). A missing file is an empty index; a partial trailing entry is ignored.
    pub(crate) fn load_read_only(
        path: &Path,
        entry_size: usize,
        max_index_size: u32,
    ) -> Result<IndexFile> {
        let mut bytes = match read_regular(path) {
            Ok(b) => b,
            Err(e) if is_not_found(&e) => Vec::new(),
            Err(e) => return Err(e),
        };
        bytes.truncate((bytes.len() / entry_size) * entry_size);
        let entries = count_written_slots(&bytes, entry_size);
        bytes.truncate(entries * entry_size);
        Ok(IndexFile {
            path: path.to_path_buf(),
            entry_size,
            storage: Storage::Memory { bytes },
            entries,
            max_entries: max_entries_for(max_index_size, entry_size).max(entries),
        })
    }

    /// An empty index kept in memory only (read-only rebuilds).
    pub(crate) fn in_memory(path: &Path, entry_size: usize, max_index_size: u32) -> IndexFile {
        IndexFile {
            path: path.to_path_buf(),
            entry_size,
            storage: Storage::Memory { bytes: Vec::new() },
            entries: 0,
            max_entries: max_entries_for(max_index_size, entry_size),
        }
    }

    fn map_mut(&self, file: File) -> Result<Storage> {
        let map = IndexMapMut::map(&file).map_err(|e| Error::io(&self.path, "mmap index", e))?;
        Ok(Storage::Mapped { file: Arc::new(file), map })
    }

    /// The file this index belongs to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of valid entries.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Number of slots the file (or memory copy) can hold.
    pub(crate) fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Length of the file (or copy) in bytes, zero tail included.
    pub fn length(&self) -> u64 {
        (self.max_entries * self.entry_size) as u64
    }

    /// Whether this index lives only in memory (read-only mode).
    pub(crate) fn is_in_memory(&self) -> bool {
        matches!(self.storage, Storage::Memory { .. })
    }

    fn bytes(&self) -> &[u8] {
        match &self.storage {
            Storage::Mapped { map, .. } => map.as_slice(),
            Storage::Sealed { map } => map.as_slice(),
            Storage::Memory { bytes } => bytes,
        }
    }

    /// The bytes of the valid entries (what a reader of the file should see).
    pub(crate) fn valid_bytes(&self) -> &[u8] {
        let bytes = self.bytes();
        bytes.get(..self.entries * self.entry_size).unwrap_or(bytes)
    }

    /// The bytes of slot `n`, if `n < entries`.
    pub fn slot(&self, n: usize) -> Option<&[u8]> {
        if n >= self.entries {
            return None;
        }
        let start = n.checked_mul(self.entry_size)?;
        self.bytes().get(start..start.checked_add(self.entry_size)?)
    }

    fn not_writable(&self) -> Error {
        Error::io(&self.path, "write index", io::Error::from(io::ErrorKind::PermissionDenied))
    }

    /// Reopens a sealed read-only map read-write so it can be changed.
    fn make_writable(&mut self) -> Result<()> {
        if let Storage::Sealed { .. } = self.storage {
            // Drop the read-only map before mapping again (module invariant of `mmap`).
            self.storage = Storage::Memory { bytes: Vec::new() };
            let file =
                open_regular(&self.path, OpenOptions::new().read(true).write(true), "open index")?;
            self.storage = self.map_mut(file)?;
        }
        Ok(())
    }

    /// Appends one entry. The caller has checked the ordering rules; a full index is an error.
    pub(crate) fn append_slot(&mut self, entry: &[u8]) -> Result<()> {
        debug_assert_eq!(entry.len(), self.entry_size);
        if self.entries >= self.max_entries {
            return Err(Error::InvalidInput(format!(
                "attempt to append to a full index {} ({} entries)",
                self.path.display(),
                self.entries
            )));
        }
        self.make_writable()?;
        let start = self.entries * self.entry_size;
        match &mut self.storage {
            Storage::Mapped { map, .. } => {
                let slot = map
                    .as_mut_slice()
                    .get_mut(start..start + entry.len())
                    .ok_or_else(|| Error::corrupt(&self.path, start as u64, "index shrank"))?;
                slot.copy_from_slice(entry);
            }
            Storage::Memory { bytes } => {
                bytes.truncate(start);
                bytes.extend_from_slice(entry);
            }
            Storage::Sealed { .. } => return Err(self.not_writable()),
        }
        self.entries += 1;
        Ok(())
    }

    /// Keeps the first `entries` entries; the removed slots are zeroed in a mapped file so the
    /// zero-tail rule still finds the right count after a crash.
    pub(crate) fn truncate_entries(&mut self, entries: usize) -> Result<()> {
        if entries >= self.entries {
            return Ok(());
        }
        self.make_writable()?;
        let (from, to) = (entries * self.entry_size, self.entries * self.entry_size);
        match &mut self.storage {
            Storage::Mapped { map, .. } => {
                if let Some(tail) = map.as_mut_slice().get_mut(from..to) {
                    tail.fill(0);
                }
            }
            Storage::Memory { bytes } => bytes.truncate(from),
            Storage::Sealed { .. } => return Err(self.not_writable()),
        }
        self.entries = entries;
        Ok(())
    }

    /// Sets the file length to exactly the valid entries (`trimToValidSize`).
    pub(crate) fn trim_to_valid_size(&mut self) -> Result<()> {
        let valid_len = (self.entries * self.entry_size) as u64;
        let trimmed = self.entries == self.max_entries
            && match &self.storage {
                // Trimmed at its roll and still mapped: the file is already its valid length
                // (checked, since a preallocated length need not be whole entries).
                Storage::Mapped { file, .. } => file.metadata().is_ok_and(|m| m.len() == valid_len),
                Storage::Sealed { .. } | Storage::Memory { .. } => true,
            };
        if trimmed {
            // Already trimmed (a sealed file): leave the file, and its mtime, alone; a clean
            // shutdown calls this for every segment, and a truncate to the same length would
            // still dirty the inode for its sync.
            return Ok(());
        }
        if self.is_in_memory() {
            self.max_entries = self.entries;
            return Ok(());
        }
        let valid = (self.entries * self.entry_size) as u32;
        self.set_file_length(valid)
    }

    /// Sets the file length to `max_index_size` rounded down to whole entries (never below the
    /// valid entries), as Kafka does for the active segment after load and truncation.
    pub fn resize(&mut self, max_index_size: u32) -> Result<()> {
        let slots = max_entries_for(max_index_size, self.entry_size).max(self.entries);
        if self.is_in_memory() {
            self.max_entries = slots;
            return Ok(());
        }
        if slots == self.max_entries && matches!(self.storage, Storage::Mapped { .. }) {
            return Ok(());
        }
        self.set_file_length((slots * self.entry_size) as u32)
    }

    fn set_file_length(&mut self, len: u32) -> Result<()> {
        // Drop the map before changing the length (mmap module invariant).
        let old = std::mem::replace(&mut self.storage, Storage::Memory { bytes: Vec::new() });
        let file = match old {
            Storage::Mapped { file, map } => {
                drop(map);
                match Arc::try_unwrap(file) {
                    Ok(f) => f,
                    Err(shared) => {
                        shared.try_clone().map_err(|e| Error::io(&self.path, "reopen index", e))?
                    }
                }
            }
            Storage::Sealed { map } => {
                drop(map);
                open_regular(&self.path, OpenOptions::new().read(true).write(true), "open index")?
            }
            Storage::Memory { bytes } => {
                // In-memory indexes have no file length to set (callers check first).
                self.storage = Storage::Memory { bytes };
                return Ok(());
            }
        };
        file.set_len(u64::from(len)).map_err(|e| Error::io(&self.path, "resize index", e))?;
        self.storage = self.map_mut(file)?;
        self.max_entries = len as usize / self.entry_size;
        Ok(())
    }

    /// A handle to fsync the file without holding the index lock (`None` when nothing is
    /// mapped writable: read-only copies and untouched sealed files have nothing to flush).
    pub(crate) fn sync_handle(&self) -> Option<Arc<File>> {
        match &self.storage {
            Storage::Mapped { file, .. } => Some(Arc::clone(file)),
            Storage::Sealed { .. } | Storage::Memory { .. } => None,
        }
    }
}

/// Valid entry count of a slot array under the zero-tail rule (module doc): the number of
/// slots before the first all-zero one, found by binary search.
fn count_written_slots(bytes: &[u8], entry_size: usize) -> usize {
    let is_zero = |i: usize| {
        bytes.get(i * entry_size..(i + 1) * entry_size).is_none_or(|s| s.iter().all(|b| *b == 0))
    };
    // Slots [0, lo) are written, [hi, slots) are zero.
    let (mut lo, mut hi) = (0, bytes.len() / entry_size);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if is_zero(mid) { hi = mid } else { lo = mid + 1 }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_tail_is_not_counted() {
        let mut b = vec![0u8; 8 * 10];
        assert_eq!(count_written_slots(&b, 8), 0, "a fresh preallocated file has no entries");
        b[3] = 1;
        b[8 + 3] = 5;
        b[16 + 3] = 9;
        assert_eq!(count_written_slots(&b, 8), 3);
        for slot in 3..10 {
            b[slot * 8 + 3] = 10 + slot as u8;
        }
        assert_eq!(count_written_slots(&b, 8), 10, "a trimmed, full file is all entries");
        assert_eq!(count_written_slots(&[], 8), 0);
    }

    #[test]
    fn preallocate_then_trim_to_valid_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        let mut idx = IndexFile::open_writable(&path, 8, 84, true).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 80, "rounded down to whole entries");
        assert_eq!(idx.max_entries(), 10);
        idx.append_slot(&[0, 0, 0, 1, 0, 0, 0, 9]).unwrap();
        idx.append_slot(&[0, 0, 0, 2, 0, 0, 0, 19]).unwrap();
        drop(idx);
        let mut idx = IndexFile::open_writable(&path, 8, 84, false).unwrap();
        assert_eq!(idx.entries(), 2, "zero tail ignored on reopen");
        idx.trim_to_valid_size().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 16);
        idx.resize(84).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 80);
        assert_eq!(idx.entries(), 2);
    }
}
