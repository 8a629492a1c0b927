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

use std::fs::{File, OpenOptions};

use super::open::{file_type, open_read, open_regular};
use crate::error::FileType;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::format::file_name::format_base_offset;
use crate::format::{
    Compression, HEADER_SIZE_UP_TO_MAGIC, NO_TIMESTAMP, Offset, Position, RECORD_BATCH_OVERHEAD,
    RecordStamp, StampPeek, Timestamp, check_no_trailing_records, decode_batch_unverified,
    parse_batch_info, peek_entry, peek_record_stamp, verify_crc,
};
use crate::sync::lock;

use super::offset_index::OffsetIndex;
use super::scan::{BatchLocation, ChunkReader, corrupt_at, read_fully_at, read_vec_at};
use super::time_index::TimeIndex;

/// Largest relative offset an index entry can hold.
const MAX_RELATIVE_OFFSET: i64 = i32::MAX as i64;

/// Path of one file of the segment with base offset `base` in `dir` (`suffix` with its dot).
pub fn segment_file_path(dir: &Path, base: Offset, suffix: &str) -> PathBuf {
    dir.join(format!("{}{suffix}", format_base_offset(base)))
}

/// Milliseconds since the Unix epoch now.
pub(crate) fn now_ms() -> Timestamp {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn mtime_ms(t: SystemTime) -> Timestamp {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// How a segment was opened.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SegmentMode {
    /// The log dir is locked by us: files may be written, indexes are mapped.
    Writable,
    /// Nothing under the log dir is changed; indexes are copied or rebuilt in memory.
    ReadOnly,
}

/// What [`LogSegment::read`] returns: whole batches and where they end.
#[derive(Clone, Debug, Default)]
pub struct SegmentRead {
    /// Concatenated whole batches.
    pub bytes: Vec<u8>,
    /// Position after the last batch in `bytes`.
    pub next_position: Position,
    /// Last offset of the last batch in `bytes` plus one.
    pub next_offset: Offset,
}

/// Result of [`LogSegment::translate_offset`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Translated {
    /// The first batch whose last offset is `>= target`.
    Batch(BatchLocation),
    /// No such batch: the scan reached this position (the committed end, or a torn tail).
    End(Position),
}

/// What recovery did to one segment.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RecoveryResult {
    /// Bytes dropped from the end of the `.log` (torn or invalid tail).
    pub truncated_bytes: u64,
    /// Position of the first dropped byte (the new size).
    pub valid_bytes: u64,
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
}

/// An index file a read-only segment serves rebuilt in memory because the file on disk failed
/// its sanity check (the file itself is left as it is).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexRepair {
    /// The time index (`false`: the offset index).
    pub time: bool,
    /// Byte position in the index file of the first entry found wrong.
    pub position: u64,
    /// What is wrong there.
    pub what: String,
}

impl LogSegment {
    /// Creates a new, empty active segment (writable mode); existing files with this base offset
    /// are replaced (KAFKA-6388).
    pub fn create(
        dir: &Path,
        base_offset: Offset,
        max_index_size: u32,
        index_interval_bytes: u32,
    ) -> Result<LogSegment> {
        for suffix in [".log", ".index", ".timeindex", ".txnindex"] {
            let path = segment_file_path(dir, base_offset, suffix);
            match std::fs::remove_file(&path) {
                Ok(()) => log::warn!("replaced existing segment file {}", path.display()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, "remove", e)),
            }
        }
        let log_path = segment_file_path(dir, base_offset, ".log");
        let log = open_regular(
            &log_path,
            OpenOptions::new().read(true).write(true).create_new(true),
            "create",
        )?;
        let segment = LogSegment::new(
            dir,
            base_offset,
            log_path,
            log,
            SegmentMode::Writable,
            max_index_size,
            index_interval_bytes,
            0,
            true,
        );
        segment.next_offset.store(base_offset.0, Ordering::Release);
        *lock(&segment.max_timestamp) = Some((NO_TIMESTAMP, base_offset));
        lock(&segment.writer).rolling_based_timestamp = None;
        // Create the index files now (Kafka creates them at first access, i.e. first append).
        segment.with_offset_index(|_| ())?;
        segment.with_time_index(|_| ())?;
        Ok(segment)
    }

    /// Opens an existing segment without reading its `.log` (KIP-263): only its size is taken.
    pub fn open(
        dir: &Path,
        base_offset: Offset,
        mode: SegmentMode,
        max_index_size: u32,
        index_interval_bytes: u32,
        active: bool,
    ) -> Result<LogSegment> {
        let log_path = segment_file_path(dir, base_offset, ".log");
        let log = open_regular(
            &log_path,
            OpenOptions::new().read(true).write(mode == SegmentMode::Writable),
            "open",
        )?;
        LogSegment::opened(
            dir,
            base_offset,
            log_path,
            log,
            mode,
            max_index_size,
            index_interval_bytes,
            active,
        )
    }

    /// Opens the `.swap` files of a finished compaction (`<base>.log.swap`, `.index.swap`, ...)
    /// as a sealed read-only segment, without renaming anything (Kafka's loader would rename
    /// them; a read-only mount serves them under their final names instead).
    pub fn open_swap(
        dir: &Path,
        base_offset: Offset,
        max_index_size: u32,
        index_interval_bytes: u32,
    ) -> Result<LogSegment> {
        let log_path = segment_file_path(dir, base_offset, ".log.swap");
        let log = open_read(&log_path)?;
        let mut segment = LogSegment::opened(
            dir,
            base_offset,
            log_path,
            log,
            SegmentMode::ReadOnly,
            max_index_size,
            index_interval_bytes,
            false,
        )?;
        segment.state_suffix = ".swap";
        Ok(segment)
    }

    /// Whether this segment is served from a finished compaction's `.swap` files.
    pub fn is_swap(&self) -> bool {
        !self.state_suffix.is_empty()
    }

    #[allow(clippy::too_many_arguments)]
    fn opened(
        dir: &Path,
        base_offset: Offset,
        log_path: PathBuf,
        log: File,
        mode: SegmentMode,
        max_index_size: u32,
        index_interval_bytes: u32,
        active: bool,
    ) -> Result<LogSegment> {
        let meta = log.metadata().map_err(|e| Error::io(&log_path, "stat", e))?;
        let segment = LogSegment::new(
            dir,
            base_offset,
            log_path,
            log,
            mode,
            max_index_size,
            index_interval_bytes,
            meta.len(),
            active,
        );
        if let Ok(t) = meta.modified() {
            *lock(&segment.last_modified) = t;
        }
        Ok(segment)
    }

    #[allow(clippy::too_many_arguments)]
    fn new(
        dir: &Path,
        base_offset: Offset,
        log_path: PathBuf,
        log: File,
        mode: SegmentMode,
        max_index_size: u32,
        index_interval_bytes: u32,
        size: u64,
        active: bool,
    ) -> LogSegment {
        LogSegment {
            base_offset,
            dir: dir.to_path_buf(),
            log_path,
            state_suffix: "",
            log,
            mode,
            max_index_size,
            index_interval_bytes,
            active: AtomicBool::new(active),
            size: AtomicU64::new(size),
            next_offset: AtomicI64::new(i64::MIN),
            offset_index: RwLock::new(None),
            time_index: RwLock::new(None),
            max_timestamp: Mutex::new(None),
            writer: Mutex::new(WriterState {
                bytes_since_last_index_entry: 0,
                rolling_based_timestamp: None,
                created: Instant::now(),
            }),
            last_modified: Mutex::new(SystemTime::now()),
            index_repairs: Mutex::new(Vec::new()),
            sealed_txn_index_size: Mutex::new(None),
        }
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

    fn load_offset_index(&self) -> Result<OffsetIndex> {
        let path = self.file_path(".index");
        match self.mode {
            SegmentMode::Writable if self.is_active() => {
                OffsetIndex::open_writable(&path, self.base_offset, self.max_index_size, true)
            }
            SegmentMode::Writable => OffsetIndex::open_sealed(&path, self.base_offset),
            SegmentMode::ReadOnly => {
                let index =
                    match OffsetIndex::load_read_only(&path, self.base_offset, self.max_index_size)
                    {
                        Ok(index) => index,
                        Err(e @ Error::WrongFileType { .. }) => {
                            self.note_repair(false, e);
                            return Ok(self.rebuild_in_memory()?.0);
                        }
                        Err(e) => return Err(e),
                    };
                match index.sanity_check() {
                    Ok(()) => Ok(index),
                    Err(e) => {
                        log::warn!("{e}; rebuilding the offset index in memory");
                        self.note_repair(false, e);
                        Ok(self.rebuild_in_memory()?.0)
                    }
                }
            }
        }
    }

    fn load_time_index(&self) -> Result<TimeIndex> {
        let path = self.file_path(".timeindex");
        match self.mode {
            SegmentMode::Writable if self.is_active() => {
                TimeIndex::open_writable(&path, self.base_offset, self.max_index_size, true)
            }
            SegmentMode::Writable => TimeIndex::open_sealed(&path, self.base_offset),
            SegmentMode::ReadOnly => {
                let index =
                    match TimeIndex::load_read_only(&path, self.base_offset, self.max_index_size) {
                        Ok(index) => index,
                        Err(e @ Error::WrongFileType { .. }) => {
                            self.note_repair(true, e);
                            return Ok(self.rebuild_in_memory()?.1);
                        }
                        Err(e) => return Err(e),
                    };
                match index.sanity_check() {
                    Ok(()) => Ok(index),
                    Err(e) => {
                        log::warn!("{e}; rebuilding the time index in memory");
                        self.note_repair(true, e);
                        Ok(self.rebuild_in_memory()?.1)
                    }
                }
            }
        }
    }

    fn note_repair(&self, time: bool, e: Error) {
        let (position, what) = match e {
            Error::Corrupt { position, what, .. } => (position, what),
            other => (0, other.to_string()),
        };
        let mut repairs = lock(&self.index_repairs);
        repairs.retain(|r| r.time != time);
        repairs.push(IndexRepair { time, position, what });
    }

    /// The indexes of this segment served rebuilt in memory, and why (loading each index
    /// first, so that the answer is final).
    pub fn index_repairs(&self) -> Result<Vec<IndexRepair>> {
        self.with_offset_index(|_| ())?;
        self.with_time_index(|_| ())?;
        Ok(lock(&self.index_repairs).clone())
    }

    /// Builds both indexes in memory from the `.log` (read-only mode), without changing files.
    fn rebuild_in_memory(&self) -> Result<(OffsetIndex, TimeIndex)> {
        let mut offset_index = OffsetIndex::in_memory(
            &self.file_path(".index"),
            self.base_offset,
            self.max_index_size,
        );
        let mut time_index = TimeIndex::in_memory(
            &self.file_path(".timeindex"),
            self.base_offset,
            self.max_index_size,
        );
        self.walk_and_index(&mut offset_index, &mut time_index, self.size())?;
        Ok((offset_index, time_index))
    }

    /// The batch containing `target` or the first after it: the first batch whose last offset
    /// is `>= target`, found from the floor index entry by a forward header scan (Kafka's
    /// `translateOffset`). [`Translated::End`] with the committed end when no batch of the
    /// segment qualifies.
    pub fn translate_offset(&self, target: Offset) -> Result<Translated> {
        let end = self.size();
        let (_, mut position) = self.with_offset_index(|idx| idx.lookup(target))?;
        if position.0 > end {
            // A read-only copy can be newer than our view of the `.log`; scan from the start.
            position = Position(0);
        }
        let mut reader = ChunkReader::new(&self.log, &self.log_path, end);
        let mut pos = position.0;
        while let Some(batch) = reader.batch_at(pos)? {
            if batch.info.last_offset >= target {
                return Ok(Translated::Batch(batch));
            }
            pos = batch.end();
        }
        Ok(Translated::End(Position(pos)))
    }

    /// Whole batches starting at `position`, at most `max_bytes` unless the first batch alone is
    /// larger (then exactly that batch). Each batch's CRC is checked: a bad first batch is an
    /// error naming the file and position, a bad later batch ends the chunk before it.
    /// `None` when `position` is at (or past) the committed end.
    pub fn read(&self, position: Position, max_bytes: usize) -> Result<Option<SegmentRead>> {
        let end = self.size();
        if position.0 >= end {
            return Ok(None);
        }
        let available = end - position.0;
        let span = available.min(max_bytes.max(HEADER_SIZE_UP_TO_MAGIC) as u64) as usize;
        let read = |len: usize| {
            read_vec_at(&self.log, len, position.0)
                .map_err(|e| Error::io(&self.log_path, "read", e))
        };
        let mut bytes = read(span)?;
        // The first batch alone may be larger than `max_bytes`: then read exactly it.
        if let Some(first) =
            peek_entry(&bytes).map_err(|e| corrupt_at(&self.log_path, position.0, e))?
            && first.total_size() > bytes.len()
            && first.total_size() as u64 <= available
        {
            bytes = read(first.total_size())?;
        }
        let mut cut = 0usize;
        let mut next_offset = Offset(0);
        while let Some(rest) = bytes.get(cut..) {
            let pos = position.0 + cut as u64;
            let header = match peek_entry(rest) {
                Ok(Some(h)) => h,
                Ok(None) => break,
                Err(e) if cut == 0 => return Err(corrupt_at(&self.log_path, pos, e)),
                Err(_) => break,
            };
            let Some(entry) = rest.get(..header.total_size()) else { break };
            let checked = parse_batch_info(entry).and_then(|info| verify_crc(entry).map(|()| info));
            match checked {
                Ok(info) => {
                    cut += entry.len();
                    next_offset = info.last_offset.plus(1);
                }
                Err(e) if cut == 0 => return Err(corrupt_at(&self.log_path, pos, e)),
                Err(_) => break,
            }
        }
        if cut == 0 {
            return Ok(None);
        }
        bytes.truncate(cut);
        let next_position = Position(position.0 + cut as u64);
        Ok(Some(SegmentRead { bytes, next_position, next_offset }))
    }

    /// Offset after the last batch (the log end offset when active), computed from the last
    /// index entry and a scan to the committed end on first use.
    pub fn next_offset(&self) -> Result<Offset> {
        let cached = self.next_offset.load(Ordering::Acquire);
        if cached != i64::MIN {
            return Ok(Offset(cached));
        }
        let end = self.size();
        let (_, mut pos) = self.with_offset_index(|idx| idx.lookup(Offset(i64::MAX)))?;
        if pos.0 > end {
            pos = Position(0);
        }
        let mut reader = ChunkReader::new(&self.log, &self.log_path, end);
        let mut next = self.base_offset;
        let mut at = pos.0;
        while let Some(batch) = reader.batch_at(at)? {
            next = batch.info.last_offset.plus(1);
            at = batch.end();
        }
        self.next_offset.store(next.0, Ordering::Release);
        Ok(next)
    }

    /// `(max timestamp, shallow offset)` of the segment, `None` if no batch has a timestamp.
    /// Taken from memory, or on first use from the time index's last entry.
    pub fn max_timestamp_so_far(&self) -> Result<Option<(Timestamp, Offset)>> {
        let known = *lock(&self.max_timestamp);
        let value = match known {
            Some(v) => v,
            None => {
                let v = self.with_time_index(|idx| idx.last_entry())?;
                let mut guard = lock(&self.max_timestamp);
                *guard.get_or_insert(v)
            }
        };
        Ok((value.0 >= 0).then_some(value))
    }

    /// Kafka's `largestTimestamp`: the max timestamp, or the `.log` file's mtime when the
    /// segment has no timestamps (v0 data, empty time index).
    pub fn largest_timestamp(&self) -> Result<Timestamp> {
        match self.max_timestamp_so_far()? {
            Some((ts, _)) => Ok(ts),
            None => {
                let meta = self.log.metadata().map_err(|e| Error::io(&self.log_path, "stat", e))?;
                Ok(meta.modified().map(mtime_ms).unwrap_or(0))
            }
        }
    }

    /// The first record (in log order) with timestamp `>= target` and offset `>=
    /// start_offset`, as `(offset, its timestamp)` (Kafka's `findOffsetByTimestamp`): time
    /// index floor, offset index floor, skip batches whose max timestamp is older, then the
    /// first qualifying record. `None` if this segment has none.
    pub fn find_offset_by_timestamp(
        &self,
        target: Timestamp,
        start_offset: Offset,
    ) -> Result<Option<(Offset, Timestamp)>> {
        let (_, indexed_offset) = self.with_time_index(|idx| idx.lookup(target))?;
        let from = indexed_offset.max(start_offset);
        self.scan_records(
            from,
            |batch_max| batch_max >= target,
            |offset, ts| ts >= target && offset >= start_offset,
        )
    }

    /// The first record carrying the segment's max timestamp (KIP-734 / KAFKA-16310), as
    /// `(offset, timestamp)`; `None` without timestamps.
    pub fn find_max_timestamp_record(&self) -> Result<Option<(Offset, Timestamp)>> {
        let Some((max_ts, shallow_offset)) = self.max_timestamp_so_far()? else { return Ok(None) };
        self.scan_records(shallow_offset, |batch_max| batch_max == max_ts, |_, ts| ts == max_ts)
    }

    /// Scans batches from the offset-index floor of `from`: in each batch accepted by
    /// `batch_filter(max timestamp)`, returns the first record accepted by `record_filter`.
    fn scan_records(
        &self,
        from: Offset,
        batch_filter: impl Fn(Timestamp) -> bool,
        record_filter: impl Fn(Offset, Timestamp) -> bool,
    ) -> Result<Option<(Offset, Timestamp)>> {
        let end = self.size();
        let (_, mut position) = self.with_offset_index(|idx| idx.lookup(from))?;
        if position.0 > end {
            position = Position(0);
        }
        let mut reader = ChunkReader::new(&self.log, &self.log_path, end);
        let mut pos = position.0;
        while let Some(batch) = reader.batch_at(pos)? {
            pos = batch.end();
            if !batch_filter(batch.info.max_timestamp) || batch.info.is_control {
                continue;
            }
            let at = batch.position.0;
            if batch.info.magic >= 2 && batch.info.compression == Compression::None {
                match first_stamp_uncompressed(&mut reader, &batch, &record_filter)? {
                    Some(stamp) => return Ok(Some((stamp.offset, stamp.timestamp))),
                    None => continue,
                }
            }
            let Some(entry) = reader.entry(&batch)? else { break };
            // Only the records' offsets and timestamps are read, up to the first match, and the
            // CRC is not checked, as in Kafka's `searchForTimestamp`: a lookup serves no record
            // bytes, and whoever reads from the answer checks the batches it gets.
            let decoded =
                decode_batch_unverified(entry).map_err(|e| corrupt_at(&self.log_path, at, e))?;
            for stamp in decoded.record_stamps() {
                let stamp = stamp.map_err(|e| corrupt_at(&self.log_path, at, e))?;
                if record_filter(stamp.offset, stamp.timestamp) {
                    return Ok(Some((stamp.offset, stamp.timestamp)));
                }
            }
        }
        Ok(None)
    }

    /// Whether the next append of `set_size` bytes with max timestamp `max_timestamp` and last
    /// offset `last_offset` must go to a new segment (Kafka's `shouldRoll`).
    pub fn should_roll(
        &self,
        set_size: u64,
        max_timestamp: Timestamp,
        last_offset: Offset,
        segment_bytes: u64,
        max_segment_ms: i64,
    ) -> Result<bool> {
        let size = self.size();
        if size > segment_bytes.saturating_sub(set_size) {
            return Ok(true);
        }
        if size > 0 && self.time_waited_for_roll(max_timestamp)? > max_segment_ms {
            return Ok(true);
        }
        if self.with_offset_index(|idx| idx.is_full())? || self.with_time_index(|i| i.is_full())? {
            return Ok(true);
        }
        let relative = last_offset.0.checked_sub(self.base_offset.0);
        Ok(!relative.is_some_and(|r| (0..=MAX_RELATIVE_OFFSET).contains(&r)))
    }

    /// Kafka's `timeWaitedForRoll`: record time since the first batch when it had a timestamp,
    /// else wall time since this segment object was created.
    fn time_waited_for_roll(&self, max_timestamp: Timestamp) -> Result<i64> {
        let known = lock(&self.writer).rolling_based_timestamp;
        let first = match known {
            Some(ts) => ts,
            None => {
                let ts = self.first_batch_max_timestamp()?;
                lock(&self.writer).rolling_based_timestamp = Some(ts);
                ts
            }
        };
        if first >= 0 {
            Ok(max_timestamp.saturating_sub(first))
        } else {
            Ok(lock(&self.writer).created.elapsed().as_millis() as i64)
        }
    }

    fn first_batch_max_timestamp(&self) -> Result<Timestamp> {
        let mut reader = ChunkReader::new(&self.log, &self.log_path, self.size());
        Ok(reader.batch_at(0)?.map_or(NO_TIMESTAMP, |b| b.info.max_timestamp))
    }

    /// Appends a set of whole batches (Kafka's `LogSegment.append`): one `pwrite`, then the
    /// committed size is published, then the sparse indexes are updated (an entry for
    /// `largest_offset` at the set's position when more than `index.interval.bytes` were
    /// appended since the last entry). Only the log's writer calls this.
    pub fn append(
        &self,
        bytes: &[u8],
        largest_offset: Offset,
        max_timestamp: Timestamp,
        shallow_offset_of_max_timestamp: Offset,
    ) -> Result<()> {
        if self.mode == SegmentMode::ReadOnly {
            return Err(Error::ReadOnly);
        }
        let position = self.size();
        if let Err(e) = write_all_at(&self.log, bytes, position) {
            // Nothing was published; drop whatever part reached the file.
            let _ = self.log.set_len(position);
            return Err(Error::io(&self.log_path, "write", e));
        }
        let new_size = position + bytes.len() as u64;
        self.size.store(new_size, Ordering::Release);
        self.next_offset.store(largest_offset.plus(1).0, Ordering::Release);
        *lock(&self.last_modified) = SystemTime::now();

        // Load the max so far (from the time index after a clean reopen) before updating it.
        self.max_timestamp_so_far()?;
        let max_so_far = {
            let mut guard = lock(&self.max_timestamp);
            let current = guard.unwrap_or((NO_TIMESTAMP, self.base_offset));
            let updated = if max_timestamp > current.0 {
                (max_timestamp, shallow_offset_of_max_timestamp)
            } else {
                current
            };
            *guard = Some(updated);
            updated
        };
        let mut writer = lock(&self.writer);
        if position == 0 {
            writer.rolling_based_timestamp = Some(max_timestamp);
        }
        if writer.bytes_since_last_index_entry > u64::from(self.index_interval_bytes) {
            self.with_offset_index_mut(|idx| idx.append(largest_offset, Position(position)))?;
            self.with_time_index_mut(|idx| idx.maybe_append(max_so_far.0, max_so_far.1, false))?;
            writer.bytes_since_last_index_entry = 0;
        }
        writer.bytes_since_last_index_entry += bytes.len() as u64;
        Ok(())
    }

    /// Kafka's `LogSegment.recover`: re-reads every batch from position 0, checks framing, CRC
    /// and offset order, rebuilds both indexes with the per-batch interval rule, and drops
    /// everything from the first invalid or torn batch on (the `.log` is truncated in writable
    /// mode; in read-only mode the committed size stops there and indexes live in memory).
    pub fn recover(&self) -> Result<RecoveryResult> {
        let file_len = self.log.metadata().map_err(|e| Error::io(&self.log_path, "stat", e))?.len();
        // Readers must not use the old indexes while they are rebuilt, and an old map of the
        // files is dropped before the files are opened again.
        let mut offset_guard = self.offset_index.write().unwrap_or_else(|e| e.into_inner());
        let mut time_guard = self.time_index.write().unwrap_or_else(|e| e.into_inner());
        *offset_guard = None;
        *time_guard = None;
        let (mut offset_index, mut time_index) = match self.mode {
            SegmentMode::Writable => {
                // Start from fresh, zero-filled files: nothing of the old ones can survive.
                for suffix in [".index", ".timeindex"] {
                    let path = self.file_path(suffix);
                    match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(Error::io(&path, "remove", e)),
                    }
                }
                let mut o = OffsetIndex::open_writable(
                    &self.file_path(".index"),
                    self.base_offset,
                    self.max_index_size,
                    true,
                )?;
                let mut t = TimeIndex::open_writable(
                    &self.file_path(".timeindex"),
                    self.base_offset,
                    self.max_index_size,
                    true,
                )?;
                o.reset()?;
                t.reset()?;
                (o, t)
            }
            SegmentMode::ReadOnly => (
                OffsetIndex::in_memory(
                    &self.file_path(".index"),
                    self.base_offset,
                    self.max_index_size,
                ),
                TimeIndex::in_memory(
                    &self.file_path(".timeindex"),
                    self.base_offset,
                    self.max_index_size,
                ),
            ),
        };
        let valid = self.walk_and_index(&mut offset_index, &mut time_index, file_len)?;
        let truncated = file_len - valid;
        if truncated > 0 {
            log::warn!(
                "recovery of {}: invalid or incomplete data at position {valid}, {truncated} bytes \
                 dropped",
                self.log_path.display()
            );
            if self.mode == SegmentMode::Writable {
                self.log.set_len(valid).map_err(|e| Error::io(&self.log_path, "truncate", e))?;
            }
        }
        self.size.store(valid, Ordering::Release);
        let (max_ts, max_offset) =
            *lock(&self.max_timestamp).get_or_insert((NO_TIMESTAMP, self.base_offset));
        offset_index.trim_to_valid_size()?;
        time_index.maybe_append(max_ts, max_offset, true)?;
        time_index.trim_to_valid_size()?;
        if self.is_active() {
            offset_index.resize(self.max_index_size)?;
            time_index.resize(self.max_index_size)?;
        }
        *offset_guard = Some(offset_index);
        *time_guard = Some(time_index);
        Ok(RecoveryResult { truncated_bytes: truncated, valid_bytes: valid })
    }

    /// The recovery walk shared by [`LogSegment::recover`] and read-only index rebuilds: returns
    /// the end of the last valid batch and leaves the segment's next offset, max timestamp and
    /// rolling timestamp set from what it read.
    fn walk_and_index(
        &self,
        offset_index: &mut OffsetIndex,
        time_index: &mut TimeIndex,
        end: u64,
    ) -> Result<u64> {
        let mut reader = ChunkReader::new(&self.log, &self.log_path, end);
        let mut valid = 0u64;
        let mut last_index_entry = 0u64;
        let mut max = (NO_TIMESTAMP, self.base_offset);
        let mut next = self.base_offset;
        let mut first_ts = None;
        loop {
            let batch = match reader.batch_at(valid) {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(e) => {
                    log::warn!("{e}");
                    break;
                }
            };
            let Some(entry) = reader.entry(&batch)? else { break };
            if let Err(e) = verify_crc(entry) {
                log::warn!("{}", corrupt_at(&self.log_path, valid, e));
                break;
            }
            let info = &batch.info;
            let relative = info.last_offset.0.checked_sub(self.base_offset.0);
            let ordered = info.base_offset >= next && info.last_offset >= info.base_offset;
            if !ordered || !relative.is_some_and(|r| (0..=MAX_RELATIVE_OFFSET).contains(&r)) {
                log::warn!(
                    "{}: batch at position {valid} has offsets {}..={} out of order or outside \
                     the segment (expected >= {next})",
                    self.log_path.display(),
                    info.base_offset,
                    info.last_offset
                );
                break;
            }
            if info.max_timestamp > max.0 {
                max = (info.max_timestamp, info.last_offset);
            }
            if valid - last_index_entry > u64::from(self.index_interval_bytes) {
                offset_index.append(info.last_offset, Position(valid))?;
                time_index.maybe_append(max.0, max.1, true)?;
                last_index_entry = valid;
            }
            first_ts.get_or_insert(info.max_timestamp);
            next = info.last_offset.plus(1);
            valid = batch.end();
        }
        self.next_offset.store(next.0, Ordering::Release);
        *lock(&self.max_timestamp) = Some(max);
        let mut writer = lock(&self.writer);
        writer.rolling_based_timestamp = Some(first_ts.unwrap_or(NO_TIMESTAMP));
        writer.bytes_since_last_index_entry = valid - last_index_entry;
        Ok(valid)
    }

    /// Read-only mode, live broker: takes in the whole batches a writer appended since this
    /// segment was opened, up to the file's current length `file_len`. Each new batch must
    /// pass its CRC check (a batch still being written stops the scan until the next call);
    /// opened in-memory indexes get entries by the per-batch interval rule. Returns whether the
    /// committed size grew.
    pub fn extend_read_only(&self, file_len: u64) -> Result<bool> {
        let start = self.size();
        if self.mode != SegmentMode::ReadOnly || file_len <= start {
            return Ok(false);
        }
        let mut reader = ChunkReader::new(&self.log, &self.log_path, file_len);
        let mut valid = start;
        let mut max = self.max_timestamp_so_far()?.unwrap_or((NO_TIMESTAMP, self.base_offset));
        let mut next = self.next_offset()?;
        let mut new_batches = Vec::new();
        while let Ok(Some(batch)) = reader.batch_at(valid) {
            let Some(entry) = reader.entry(&batch)? else { break };
            if verify_crc(entry).is_err() || batch.info.base_offset < next {
                break;
            }
            if batch.info.max_timestamp > max.0 {
                max = (batch.info.max_timestamp, batch.info.last_offset);
            }
            next = batch.info.last_offset.plus(1);
            valid = batch.end();
            new_batches.push((
                batch.position,
                u64::from(batch.info.size),
                batch.info.last_offset,
                max,
            ));
        }
        if valid == start {
            return Ok(false);
        }
        // Publish first: index entries must never point past the committed size.
        *lock(&self.max_timestamp) = Some(max);
        self.next_offset.store(next.0, Ordering::Release);
        self.size.store(valid, Ordering::Release);
        *lock(&self.last_modified) = SystemTime::now();
        {
            let mut writer = lock(&self.writer);
            let mut offset_guard = self.offset_index.write().unwrap_or_else(|e| e.into_inner());
            let mut time_guard = self.time_index.write().unwrap_or_else(|e| e.into_inner());
            for (position, size, last_offset, (ts, ts_offset)) in new_batches {
                if writer.bytes_since_last_index_entry > u64::from(self.index_interval_bytes)
                    && let (Some(o), Some(t)) = (offset_guard.as_mut(), time_guard.as_mut())
                    && o.file().is_in_memory()
                    && last_offset > o.last_offset()
                    && !o.is_full()
                {
                    o.append(last_offset, position)?;
                    t.maybe_append(ts, ts_offset, true)?;
                    writer.bytes_since_last_index_entry = 0;
                }
                writer.bytes_since_last_index_entry += size;
            }
        }
        Ok(true)
    }

    /// The segment stops being active (roll): final time-index entry, indexes trimmed to their
    /// valid size (Kafka's `onBecomeInactiveSegment`).
    pub fn on_become_inactive(&self) -> Result<()> {
        self.close_indexes()?;
        self.active.store(false, Ordering::Release);
        Ok(())
    }

    /// The segment becomes active again after load: its indexes are extended back to
    /// `segment.index.bytes` (dropping lazily opened read-only maps first).
    pub fn on_become_active(&self) -> Result<()> {
        self.active.store(true, Ordering::Release);
        if self.mode == SegmentMode::ReadOnly {
            return Ok(());
        }
        let path = self.file_path(".index");
        self.with_offset_index_mut(|idx| {
            if !idx.file().is_in_memory() {
                // Drop the old (possibly read-only) map before mapping the file again.
                *idx = OffsetIndex::in_memory(&path, self.base_offset, 0);
                *idx =
                    OffsetIndex::open_writable(&path, self.base_offset, self.max_index_size, true)?;
            }
            Ok(())
        })?;
        let path = self.file_path(".timeindex");
        self.with_time_index_mut(|idx| {
            if !idx.file().is_in_memory() {
                *idx = TimeIndex::in_memory(&path, self.base_offset, 0);
                *idx =
                    TimeIndex::open_writable(&path, self.base_offset, self.max_index_size, true)?;
            }
            Ok(())
        })
    }

    /// Appends the final time-index entry and trims both index files (roll and clean close).
    /// Indexes never opened are left untouched (KAFKA-9373).
    pub fn close_indexes(&self) -> Result<()> {
        if self.mode == SegmentMode::ReadOnly {
            return Ok(());
        }
        let max = *lock(&self.max_timestamp);
        let mut time_guard = self.time_index.write().unwrap_or_else(|e| e.into_inner());
        if let Some(idx) = time_guard.as_mut() {
            if let Some((ts, offset)) = max {
                idx.maybe_append(ts, offset, true)?;
            }
            idx.trim_to_valid_size()?;
        }
        let mut offset_guard = self.offset_index.write().unwrap_or_else(|e| e.into_inner());
        if let Some(idx) = offset_guard.as_mut() {
            idx.trim_to_valid_size()?;
        }
        Ok(())
    }

    /// Makes the `.log` and both index files durable. Holds no lock while it waits: the index
    /// files are synced through duplicated handles (`fsync` of a file also writes back pages
    /// dirtied through a shared mapping of it), so lookups never wait for the disk.
    pub fn sync(&self) -> Result<()> {
        if self.mode == SegmentMode::ReadOnly {
            return Ok(());
        }
        self.log.sync_data().map_err(|e| Error::io(&self.log_path, "fsync", e))?;
        let offset = self
            .offset_index
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|i| i.file().sync_handle());
        let time = self
            .time_index
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|i| i.file().sync_handle());
        for (handle, suffix) in [(offset, ".index"), (time, ".timeindex")] {
            if let Some(file) = handle {
                file.sync_data().map_err(|e| Error::io(self.file_path(suffix), "fsync", e))?;
            }
        }
        Ok(())
    }

    /// Size of the `.txnindex` file, `None` if there is none or it is not a regular file (one
    /// `stat`, remembered once the segment is sealed).
    pub fn txn_index_size(&self) -> Option<u64> {
        let path = self.file_path(".txnindex");
        let size = || std::fs::metadata(&path).ok().filter(|m| m.is_file()).map(|m| m.len());
        if self.is_active() {
            return size();
        }
        *lock(&self.sealed_txn_index_size).get_or_insert_with(size)
    }

    /// Whether the index (`time`: the time index) is served rebuilt in memory because its file
    /// failed the sanity check (loading it first).
    fn index_repaired(&self, time: bool) -> Result<bool> {
        if time {
            self.with_time_index(|_| ())?;
        } else {
            self.with_offset_index(|_| ())?;
        }
        Ok(lock(&self.index_repairs).iter().any(|r| r.time == time))
    }

    /// Size of an index file as a reader should see it: the valid entries of an opened index
    /// (no preallocated zero tail), else the file's length on disk. An index rebuilt in memory
    /// (read-only mode) is shown as its file on disk is, damage included.
    pub fn index_file_size(&self, time: bool) -> Result<u64> {
        if self.index_repaired(time)? {
            let path = self.file_path(if time { ".timeindex" } else { ".index" });
            // A refused file (a FIFO, a device, a dangling link ...) has no bytes to show.
            return match file_type(&path) {
                Ok(FileType::Regular) => {
                    let meta = std::fs::metadata(&path).map_err(|e| Error::io(&path, "stat", e))?;
                    Ok(meta.len())
                }
                Ok(_) => Ok(0),
                Err(e) => Err(Error::io(&path, "stat", e)),
            };
        }
        let len = if time {
            self.with_time_index(|i| i.valid_bytes().len())?
        } else {
            self.with_offset_index(|i| i.valid_bytes().len())?
        };
        Ok(len as u64)
    }

    /// Copies index bytes from `pos` into `buf`: what [`LogSegment::index_file_size`] shows.
    pub fn read_index_bytes(&self, time: bool, pos: u64, buf: &mut [u8]) -> Result<usize> {
        if self.index_repaired(time)? {
            let path = self.file_path(if time { ".timeindex" } else { ".index" });
            let file = match open_read(&path) {
                Ok(file) => file,
                // A refused file (a FIFO, a device ...) is shown empty (see `index_file_size`).
                Err(Error::WrongFileType { .. }) => return Ok(0),
                Err(e) => return Err(e),
            };
            return read_fully_at(&file, buf, pos).map_err(|e| Error::io(&path, "read", e));
        }
        let copy = |bytes: &[u8], buf: &mut [u8]| -> usize {
            let Some(src) = usize::try_from(pos).ok().and_then(|p| bytes.get(p..)) else {
                return 0;
            };
            let n = src.len().min(buf.len());
            buf[..n].copy_from_slice(&src[..n]);
            n
        };
        if time {
            self.with_time_index(|i| copy(i.valid_bytes(), buf))
        } else {
            self.with_offset_index(|i| copy(i.valid_bytes(), buf))
        }
    }

    /// Reads raw `.log` bytes at `pos`, never past the committed size.
    pub fn read_log_bytes(&self, pos: u64, buf: &mut [u8]) -> Result<usize> {
        let end = self.size();
        if pos >= end {
            return Ok(0);
        }
        let n = ((end - pos) as usize).min(buf.len());
        read_fully_at(&self.log, &mut buf[..n], pos)
            .map_err(|e| Error::io(&self.log_path, "read", e))
    }

    /// Up to `buf.len()` bytes of the `.log` file at `pos`, past the segment's size too (what
    /// follows the last whole batch, for `check`); fewer only at the end of the file.
    pub fn read_log_bytes_on_disk(&self, pos: u64, buf: &mut [u8]) -> Result<usize> {
        read_fully_at(&self.log, buf, pos).map_err(|e| Error::io(&self.log_path, "read", e))
    }

    /// Removes the segment's files (retention, or later segments after a truncating recovery):
    /// each is renamed to `.deleted` first, as Kafka does, so a crash midway leaves files the
    /// next start removes, then deleted.
    pub fn delete_files(&self) -> Result<()> {
        if self.mode == SegmentMode::ReadOnly {
            return Err(Error::ReadOnly);
        }
        // Unmap the indexes before their files go away.
        *self.offset_index.write().unwrap_or_else(|e| e.into_inner()) = None;
        *self.time_index.write().unwrap_or_else(|e| e.into_inner()) = None;
        for suffix in [".log", ".index", ".timeindex", ".txnindex"] {
            let path = self.file_path(suffix);
            let deleted = self.file_path(&format!("{suffix}.deleted"));
            match std::fs::rename(&path, &deleted) {
                Ok(()) => {
                    std::fs::remove_file(&deleted).map_err(|e| Error::io(&deleted, "remove", e))?
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, "rename", e)),
            }
        }
        Ok(())
    }
}

/// `pwrite` of all of `bytes` at `pos`.
/// Bytes of an uncompressed batch's records read at once by [`first_stamp_uncompressed`]: a
/// few pages, so a lookup that stops early in a large batch copies little more than it needs
/// while a batch read to its end costs a handful of system calls.
const STAMP_WINDOW: usize = 16 * 1024;

/// The first record of the uncompressed v2 `batch` accepted by `record_filter`, reading the
/// batch in [`STAMP_WINDOW`]s only up to that record, with the rules of
/// [`crate::format::Batch::record_stamps`] up to there (each record's framing, then the record
/// count and no trailing bytes if the whole batch is read). `None` if no record qualifies or the
/// batch is cut off by the end of the file (a concurrent truncation).
fn first_stamp_uncompressed(
    reader: &mut ChunkReader<'_>,
    batch: &BatchLocation,
    record_filter: &impl Fn(Offset, Timestamp) -> bool,
) -> Result<Option<RecordStamp>> {
    let path = reader.path();
    let batch_end = batch.end();
    let mut pos = batch.position.0.saturating_add(RECORD_BATCH_OVERHEAD as u64);
    let mut left = batch.info.records_count;
    let mut window = STAMP_WINDOW;
    // The first window is what the header read already brought in, if anything.
    let mut first = reader.buffered_from(pos);
    while left > 0 {
        let want = if first > 0 { std::mem::take(&mut first) } else { window };
        let len = (want as u64).min(batch_end.saturating_sub(pos)) as usize;
        let at_end = pos.saturating_add(len as u64) >= batch_end;
        let Some(bytes) = reader.get(pos, len)? else { return Ok(None) };
        let mut from = 0usize;
        while left > 0 {
            let rest = bytes.get(from..).unwrap_or_default();
            match peek_record_stamp(&batch.info, rest, at_end)
                .map_err(|e| corrupt_at(path, pos + from as u64, e))?
            {
                StampPeek::Stamp { stamp, len } => {
                    if record_filter(stamp.offset, stamp.timestamp) {
                        return Ok(Some(stamp));
                    }
                    from += len;
                    left -= 1;
                }
                StampPeek::NeedMore { need } => {
                    // A record longer than the window: read from its start with room for it.
                    if from == 0 {
                        window = window.max(need);
                    }
                    break;
                }
            }
        }
        pos = pos.saturating_add(from as u64);
    }
    check_no_trailing_records(batch_end.saturating_sub(pos) as usize)
        .map_err(|e| corrupt_at(path, pos, e))?;
    Ok(None)
}

fn write_all_at(file: &File, bytes: &[u8], pos: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(bytes, pos)
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
