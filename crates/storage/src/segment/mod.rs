//! One segment of a partition log: Kafka's `LogSegment`.
//!
//! A segment is a `.log` file of concatenated batches plus its `.index` (offset → position) and
//! `.timeindex` (timestamp → offset), all named after the segment's **base offset** (20 digits).
//! The base offset is `<=` the least offset in the segment and `>` every offset in earlier
//! segments. Only the last segment of a log (the *active* segment) is appended to.
//!
//! **Concurrency.** Any number of readers and one writer (the owning [`super::log::Log`] holds
//! its append lock) use a segment at once:
//! - the `.log` is written with `pwrite` and read with `pread`; the committed `size` is published
//!   (release) only after the bytes of a whole batch are written, and readers never read past
//!   the `size` they loaded (acquire), so a reader never sees part of a batch;
//! - each index sits behind its own `RwLock`; appends hold the write lock for an 8- or 12-byte
//!   store, lookups hold the read lock; fsync never holds either (it goes through a duplicated
//!   file handle, see [`LogSegment::sync`]);
//! - index entries are added after `size` is published, so an index never points past `size`.
//!
//! **Lazy indexes (KIP-263).** Opening a segment reads no `.log` bytes and maps no index; the
//! indexes are opened on first use (sealed ones mapped read-only, the active ones read-write and
//! preallocated, or copied into memory in read-only mode).
//!
//! **Where each job lives.** This file: the [`LogSegment`] type and its invariants, its
//! accessors and the lazy index slots. The rest, one job per file, each an `impl LogSegment`
//! block:
//! - `load.rs`: creating and opening a segment, loading its indexes on first use (and
//!   rebuilding a read-only one in memory when its file fails the sanity check);
//! - `read.rs`: the read side (offset translation, whole-batch reads, next offset, max
//!   timestamps, lookups by timestamp);
//! - `write.rs`: the write side (roll decision, append with index entries, becoming
//!   inactive/active, trimming indexes at close, fsync, deleting files);
//! - `recover.rs`: recovery and the read-only live extension (new batches of a broker);
//! - `files.rs`: sizes and raw bytes of the segment's files as `segments/` shows them.

use std::fs::{File, OpenOptions};

use super::open::{file_type, open_read, open_regular};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use topicfs_source::error::FileType;

use topicfs_format::file_name::format_base_offset;
use topicfs_format::{
    Compression, HEADER_SIZE_UP_TO_MAGIC, NO_TIMESTAMP, Offset, Position, RECORD_BATCH_OVERHEAD,
    RecordStamp, StampPeek, Timestamp, check_no_trailing_records, decode_batch_unverified,
    parse_batch_info, peek_entry, peek_record_stamp, verify_crc,
};
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;

use super::offset_index::OffsetIndex;
use super::scan::{
    BatchLocation, ChunkReader, corrupt_at, read_fully_at, read_more_at, read_vec_at,
};
use super::time_index::TimeIndex;

mod files;
mod load;
mod read;
mod recover;
mod write;

pub use self::load::IndexRepair;
pub use self::read::{SegmentRead, Translated};
pub use self::recover::RecoveryResult;

/// Largest relative offset an index entry can hold.
const MAX_RELATIVE_OFFSET: i64 = i32::MAX as i64;

/// Path of one file of the segment with base offset `base` in `dir` (`suffix` with its dot).
pub fn segment_file_path(dir: &Path, base: Offset, suffix: &str) -> PathBuf {
    dir.join(format!("{}{suffix}", format_base_offset(base)))
}

/// Milliseconds since the Unix epoch now.
pub fn now_ms() -> Timestamp {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// How a segment was opened.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SegmentMode {
    /// The log dir is locked by us: files may be written, indexes are mapped.
    Writable,
    /// Nothing under the log dir is changed; indexes are copied or rebuilt in memory.
    ReadOnly,
}

/// State only the appending thread touches.
#[derive(Debug)]
struct WriterState {
    /// Log bytes appended since the last offset-index entry (`bytesSinceLastIndexEntry`).
    bytes_since_last_index_entry: u64,
    /// Max timestamp of the first set appended (Kafka's `rollingBasedTimestamp`); `None` until
    /// known, `Some(NO_TIMESTAMP)` when the first batch had no timestamp.
    rolling_based_timestamp: Option<Timestamp>,
    /// Creation time of this in-memory segment (roll by `segment.ms` without timestamps).
    created: Instant,
}

/// A segment; see the module doc.
#[derive(Debug)]
pub struct LogSegment {
    base_offset: Offset,
    dir: PathBuf,
    log_path: PathBuf,
    /// `""`, or `".swap"` for a finished compaction's output the broker has not yet renamed to
    /// its final name (read-only mode serves it in place of the segments it replaces): the
    /// suffix every file of this segment has after its kind's.
    state_suffix: &'static str,
    log: File,
    mode: SegmentMode,
    max_index_size: u32,
    index_interval_bytes: u32,
    active: AtomicBool,
    /// **Invariant**: bytes `[0, size)` of the `.log` are whole, fully written batches.
    size: AtomicU64,
    /// Last offset of the last batch plus one; [`i64::MIN`] until computed.
    next_offset: AtomicI64,
    offset_index: RwLock<Option<OffsetIndex>>,
    time_index: RwLock<Option<TimeIndex>>,
    /// `(max timestamp, shallow offset of it)` so far; `None` until loaded from the time index.
    max_timestamp: Mutex<Option<(Timestamp, Offset)>>,
    writer: Mutex<WriterState>,
    last_modified: Mutex<SystemTime>,
    /// Size of the `.txnindex` (`None`: there is none) once looked up while sealed: a sealed
    /// segment's transaction index no longer changes.
    sealed_txn_index_size: Mutex<Option<Option<u64>>>,
    /// Indexes whose file failed its sanity check and are served rebuilt from the `.log` in
    /// memory instead (read-only mode), with the failure.
    index_repairs: Mutex<Vec<IndexRepair>>,
    /// 0, or the cleaner generation of a segment the log cleaner wrote in place of others
    /// while the log was open ([`LogSegment::generation`]).
    generation: std::sync::atomic::AtomicU32,
    /// **Invariant**: bytes `[0, crc_checked_to)` of the `.log` are whole batches whose CRC a
    /// [`LogSegment::read`] of this object checked while their bytes were kept
    /// ([`LogSegment::bytes_kept`]: the segment sealed, or the active one of a writable log).
    /// Such bytes never change while the object exists (appends only add; the cleaner and
    /// retention replace or delete whole files, and a broker's new files make a read-only log
    /// load new objects), so reads below the mark skip the check: each batch's CRC is checked
    /// once per mount. Only grows while the bytes are kept; 0 again when the segment becomes
    /// active or recovery truncates it.
    crc_checked_to: AtomicU64,
    /// **Invariant**: for the active segment of a read-only log (whose bytes a broker may
    /// truncate and write again, so `crc_checked_to` does not apply), each entry is a batch
    /// whose CRC a [`LogSegment::read`] of this object checked: its position, mapped to its
    /// size and stored CRC. A batch read later at that position with the same size and stored
    /// CRC is taken as checked: bytes a broker writes in place of others after a truncation
    /// are another batch, whose stored CRC differs, or the same batch again (a follower
    /// fetching it anew), whose bytes are the ones checked; and what is within the file's size
    /// was written whole (the size grows after the bytes). So each batch's CRC is checked once
    /// per mount here too, not at every read. Bounded: emptied when it reaches
    /// [`MAX_CHECKED_BATCHES`] (batches are then checked again once).
    checked_batches: Mutex<std::collections::HashMap<u64, (u32, u32)>>,
}

/// The most batches [`LogSegment`]'s `checked_batches` remembers (about 2 MiB).
pub const MAX_CHECKED_BATCHES: usize = 1 << 16;

impl LogSegment {
    /// Whether this segment is served from a finished compaction's `.swap` files.
    pub fn is_swap(&self) -> bool {
        !self.state_suffix.is_empty()
    }

    /// 0 for a segment loaded from disk or rolled to; for one the log cleaner wrote in place of
    /// others while the log was open, a number of its own in that log, carried by the cursors
    /// made in it: a cursor with another generation was made in a replaced segment (its
    /// position is the old file's), see `log::read`'s `SegmentCursor`.
    pub fn generation(&self) -> u32 {
        self.generation.load(Ordering::Acquire)
    }

    /// Sets the segment's cleaner generation (see [`LogSegment::generation`]).
    pub fn set_generation(&self, generation: u32) {
        self.generation.store(generation, Ordering::Release);
    }

    /// The segment's base offset.
    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// Committed size of the `.log` in bytes.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    /// Path of the `.log` file.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Path of one of this segment's files (`suffix` is the kind's, e.g. `.index`; a swap
    /// segment's files end in `.swap` after it).
    pub fn file_path(&self, suffix: &str) -> PathBuf {
        segment_file_path(&self.dir, self.base_offset, &format!("{suffix}{}", self.state_suffix))
    }

    /// The open `.log` file (for its identity in the segment cache: `fstat` and `pread` only).
    pub fn log_file(&self) -> &File {
        &self.log
    }

    /// Whether this is the active (last, appendable) segment.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// When the segment last changed (append, or the file's mtime at open).
    pub fn last_modified(&self) -> SystemTime {
        *lock(&self.last_modified)
    }

    /// Runs `f` on the offset index, opening it on first use.
    pub fn with_offset_index<R>(&self, f: impl FnOnce(&OffsetIndex) -> R) -> Result<R> {
        with_lazy(&self.offset_index, || self.load_offset_index(), f)
    }

    fn with_offset_index_mut<R>(&self, f: impl FnOnce(&mut OffsetIndex) -> Result<R>) -> Result<R> {
        with_lazy_mut(&self.offset_index, || self.load_offset_index(), f)
    }

    /// Runs `f` on the time index, opening it on first use.
    pub fn with_time_index<R>(&self, f: impl FnOnce(&TimeIndex) -> R) -> Result<R> {
        with_lazy(&self.time_index, || self.load_time_index(), f)
    }

    fn with_time_index_mut<R>(&self, f: impl FnOnce(&mut TimeIndex) -> Result<R>) -> Result<R> {
        with_lazy_mut(&self.time_index, || self.load_time_index(), f)
    }
}

/// Kafka's `LazyIndex`: runs `f` on the index in `slot`, loading it with `load` on first use.
/// Readers share the read lock once the index is loaded.
fn with_lazy<T, R>(
    slot: &RwLock<Option<T>>,
    load: impl FnOnce() -> Result<T>,
    f: impl FnOnce(&T) -> R,
) -> Result<R> {
    {
        let guard = slot.read().unwrap_or_else(|e| e.into_inner());
        if let Some(index) = guard.as_ref() {
            return Ok(f(index));
        }
    }
    with_lazy_mut(slot, load, |index| Ok(f(index)))
}

/// [`with_lazy`] with the write lock, for changes to the index.
fn with_lazy_mut<T, R>(
    slot: &RwLock<Option<T>>,
    load: impl FnOnce() -> Result<T>,
    f: impl FnOnce(&mut T) -> Result<R>,
) -> Result<R> {
    let mut guard = slot.write().unwrap_or_else(|e| e.into_inner());
    let mut index = match guard.take() {
        Some(index) => index,
        None => load()?,
    };
    let result = f(&mut index);
    *guard = Some(index);
    result
}
