//! One partition: Kafka's `UnifiedLog` / `LocalLog` over a `<topic>-<partition>` directory.
//!
//! A log is a sequence of segments keyed by base offset; the last one is the *active* segment,
//! the only one appended to. The **log start offset** is the first offset readers may see (at
//! or above the first segment's base offset); the **log end offset** is the offset the next
//! appended record gets.
//!
//! **Concurrency and lock order.** Readers (`seek`, `read`, `offset_for`, `summary`) take the
//! `segments` read lock only long enough to clone `Arc`s of the segments they need, then work on
//! the segments (whose committed sizes and index locks keep them consistent, see
//! [`super::segment`]). One writer at a time holds `append_lock` for an append, roll, retention
//! pass or close; the order is `append_lock` → `segments` (write, only to insert or remove) →
//! a segment's index locks. `sync` takes only `sync_lock` and never blocks readers. The log end
//! offset is published after the batch bytes and their segment size, so a reader that sees an
//! offset below it always finds the batch.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use crate::error::{Error, FileType, Result};
use crate::format::file_name::{FileKind, FileState, parse_segment_file_name};
use crate::format::txn_index;
use crate::format::{
    BatchSpec, EncodeRecord, NewRecord, Offset, Position, RecordRef, Timestamp, TimestampType,
    decode_batch, encode_batch, parse_batch_info, set_base_offset,
};
use crate::source::{
    AbortedTxn, AppendInfo, BatchChunk, ChunkStart, CursorHint, OffsetQuery, PartitionSummary,
    ReadCursor,
};
use crate::storage::segment_files::{FileProblem, SegmentFileKind, SegmentSummary};
use crate::sync::lock;

use super::config::{LogConfig, MessageTimestampType};
use super::scan::read_fully_at;
use super::segment::{LogSegment, SegmentMode, Translated, now_ms, segment_file_path};
use super::swap::{SegmentFiles, next_offset_of_log_file, read_only_segment_files};

mod load;
mod txn;

use self::load::{RefusedFile, list_segment_files};

/// What `segments/` shows of one segment (a `stat` of its `.txnindex` while it is active).
pub(super) fn segment_summary(seg: &LogSegment) -> Result<SegmentSummary> {
    let txn = seg.txn_index_size();
    Ok(SegmentSummary {
        base_offset: seg.base_offset(),
        log_size: seg.size(),
        index_size: seg.index_file_size(false)?,
        time_index_size: seg.index_file_size(true)?,
        txn_index_size: txn,
        max_timestamp: seg.max_timestamp_so_far()?.map(|(ts, _)| ts),
        is_active: seg.is_active(),
        last_modified: seg.last_modified(),
    })
}

/// What the log dir knows about a partition before opening it.
#[derive(Copy, Clone, Debug, Default)]
pub struct LoadState {
    /// `.kafka_cleanshutdown` was present: trust the files, recover nothing.
    pub had_clean_shutdown: bool,
    /// Entry of `recovery-point-offset-checkpoint` (recovery starts at 0 without one).
    pub recovery_point: Option<Offset>,
    /// Entry of `log-start-offset-checkpoint`.
    pub log_start_offset: Option<Offset>,
}

/// One partition's log; see the module doc.
#[derive(Debug)]
pub struct Log {
    topic: String,
    partition: u32,
    dir: PathBuf,
    config: LogConfig,
    mode: SegmentMode,
    /// Segments by base offset. Lock order: after `append_lock`.
    segments: RwLock<BTreeMap<Offset, Arc<LogSegment>>>,
    log_start_offset: AtomicI64,
    log_end_offset: AtomicI64,
    /// Offset below which everything is known to be on disk (fsynced).
    recovery_point: AtomicI64,
    /// Random reduction of `segment.ms` for the active segment (`segment.jitter.ms`).
    active_roll_jitter_ms: AtomicI64,
    /// Serializes appends, rolls, retention and close.
    append_lock: Mutex<()>,
    /// Serializes `sync` calls (separate so readers and appends never wait for the disk).
    sync_lock: Mutex<()>,
    last_modified: Mutex<SystemTime>,
    closed: AtomicBool,
    /// Segments re-read by recovery at open (diagnostics; 0 after a clean shutdown).
    recovered_segments: AtomicUsize,
    /// `(log start offset, timestamp of its first record)` of the last summary.
    first_timestamp: Mutex<Option<(Offset, Option<Timestamp>)>>,
    /// Bumped, under the `segments` write lock, whenever the segment map changes.
    segments_version: AtomicU64,
    /// `(segments_version, bytes, max timestamp)` of every segment but the last: sealed
    /// segments never change size or max timestamp while the map is unchanged, so a summary
    /// costs one segment, not one per segment (streams ask for one on every open and stat).
    sealed_summary: Mutex<Option<(u64, u64, Option<Timestamp>)>>,
    /// `(segments_version, summaries)` of every segment but the last (see `sealed_summary`): a
    /// `stat` of each segment's `.txnindex` made every lookup in `segments/` cost one system
    /// call per segment.
    sealed_segment_summaries: Mutex<Option<(u64, Arc<Vec<SegmentSummary>>)>>,
    /// The [`TimeSearch`] of the current segment-map version (built by the first timestamp
    /// lookup after a change).
    time_search: Mutex<Option<Arc<TimeSearch>>>,
    /// What the log dir knew at open (read-only reloads start from it again).
    load_state: LoadState,
    /// Wall time (ms) of the last read-only refresh.
    last_refresh_ms: AtomicI64,
    /// Segment-file names of the directory's last listing that are not regular files (FIFOs,
    /// sockets, devices, directories, dangling links, loops): never opened, reported by
    /// [`Log::file_problems`]. See [`super::open`].
    refused: Mutex<Vec<RefusedFile>>,
    /// Log bytes a stream's `stat`/`open` may render to size it ([`Log::set_sizing_budget`]).
    sizing_budget: AtomicU64,
}

/// What a timestamp lookup searches, for one segment-map version: the segments' base offsets
/// and the sealed segments' largest timestamps, with their running max.
///
/// **Invariants** (for `version`): `bases` are every segment's base offset in order, the last
/// one the active segment's; `largest[i]` is `largestTimestamp` of sealed segment `i` (all but
/// the last: a sealed segment's timestamps never change while the map is unchanged; the active
/// segment's are read live); `from` is the first segment not wholly below the log start offset
/// (its successor's base offset is above it); `running_max[i]` is the max of `largest[from..=i]`
/// for `i >= from` and `i64::MIN` below, so it is non-decreasing and the first segment at or
/// after `from` whose largest timestamp reaches `t` is the first `i` with `running_max[i] >= t`.
#[derive(Debug)]
struct TimeSearch {
    version: u64,
    bases: Vec<Offset>,
    largest: Vec<Timestamp>,
    from: usize,
    running_max: Vec<Timestamp>,
}

/// Number of leading segments wholly below `log_start` (each followed by a segment whose base
/// offset is `<= log_start`), given every segment's base offset in order.
fn first_not_below(bases: &[Offset], log_start: Offset) -> usize {
    bases.get(1..).unwrap_or_default().partition_point(|next| *next <= log_start)
}

impl TimeSearch {
    fn new(version: u64, bases: Vec<Offset>, largest: Vec<Timestamp>, from: usize) -> TimeSearch {
        let mut max = i64::MIN;
        let running_max = largest
            .iter()
            .enumerate()
            .map(|(i, &ts)| {
                if i >= from {
                    max = max.max(ts);
                }
                max
            })
            .collect();
        TimeSearch { version, bases, largest, from, running_max }
    }

    fn first_not_below(&self, log_start: Offset) -> usize {
        first_not_below(&self.bases, log_start)
    }

    /// Base offset of the first sealed segment not below the log start offset, with base
    /// offset above `after` (when given), whose largest timestamp reaches `target`; `None`
    /// when no sealed segment qualifies (the caller then looks at the active segment).
    fn candidate(&self, target: Timestamp, after: Option<Offset>) -> Option<Offset> {
        let index = match after {
            // The first look: binary search of the non-decreasing running max.
            None => self.running_max.partition_point(|&m| m < target).max(self.from),
            // A candidate had no match (its newest records are below the log start offset):
            // the rest, one by one (rare).
            Some(after) => {
                let start = self.bases.partition_point(|b| *b <= after).max(self.from);
                let rest = self.largest.get(start..).unwrap_or_default();
                start + rest.iter().position(|&ts| ts >= target)?
            }
        };
        self.largest.get(index)?;
        self.bases.get(index).copied()
    }
}

/// Read-only logs look for a broker's changes at most this often (ms).
const REFRESH_INTERVAL_MS: i64 = 200;

/// One encoded batch ready to be appended.
struct EncodedBatch {
    bytes: Vec<u8>,
    records: usize,
    max_timestamp: Timestamp,
}

impl Log {
    /// Opens the partition directory `dir` (Kafka's `LogLoader`): temporary-file passes (in
    /// writable mode), segment load, recovery after an unclean stop from the recovery point,
    /// log start and end offsets.
    pub fn open(
        dir: &Path,
        topic: &str,
        partition: u32,
        config: LogConfig,
        mode: SegmentMode,
        state: LoadState,
    ) -> Result<Log> {
        let mut mode = mode;
        if mode == SegmentMode::Writable {
            let (_, refused) = list_segment_files(dir)?;
            if !refused.is_empty() {
                // Recovery, retention, index rebuilds and appends would each have to decide
                // what to do around a file we never open; serve what can be read instead, and
                // leave every file as it is.
                log::warn!(
                    "{}: {} segment file(s) that are not regular files; serving the partition \
                     read-only (appends fail with EROFS)",
                    dir.display(),
                    refused.len()
                );
                mode = SegmentMode::ReadOnly;
            }
        }
        let log = Log {
            topic: topic.to_string(),
            partition,
            dir: dir.to_path_buf(),
            config,
            mode,
            segments: RwLock::new(BTreeMap::new()),
            log_start_offset: AtomicI64::new(0),
            log_end_offset: AtomicI64::new(0),
            recovery_point: AtomicI64::new(0),
            active_roll_jitter_ms: AtomicI64::new(0),
            append_lock: Mutex::new(()),
            sync_lock: Mutex::new(()),
            last_modified: Mutex::new(SystemTime::now()),
            closed: AtomicBool::new(false),
            recovered_segments: AtomicUsize::new(0),
            first_timestamp: Mutex::new(None),
            segments_version: AtomicU64::new(0),
            sealed_summary: Mutex::new(None),
            sealed_segment_summaries: Mutex::new(None),
            time_search: Mutex::new(None),
            load_state: state,
            last_refresh_ms: AtomicI64::new(now_ms()),
            refused: Mutex::new(Vec::new()),
            sizing_budget: AtomicU64::new(super::log_dir::LOCAL_SIZING_BUDGET),
        };
        // Read-only: a broker renaming a file between our listing and our open (a swap
        // finishing, retention) is routine; look again a few times before giving up.
        let mut attempts = 0;
        loop {
            match log.load(state) {
                Err(Error::Io { ref source, .. })
                    if !log.writable()
                        && source.kind() == std::io::ErrorKind::NotFound
                        && attempts < 3 =>
                {
                    attempts += 1;
                }
                result => break result?,
            }
        }
        Ok(log)
    }

    /// Sets what [`PartitionSource::sizing_budget`](crate::source::PartitionSource::sizing_budget)
    /// says for this partition (`--sizing-budget`).
    pub fn set_sizing_budget(&self, bytes: u64) {
        self.sizing_budget.store(bytes, Ordering::Relaxed);
    }

    /// See [`Log::set_sizing_budget`].
    pub fn sizing_budget(&self) -> u64 {
        self.sizing_budget.load(Ordering::Relaxed)
    }

    /// Creates the directory of a new, empty partition and opens it (writable mode).
    pub fn create(dir: &Path, topic: &str, partition: u32, config: LogConfig) -> Result<Log> {
        std::fs::create_dir(dir).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => {
                Error::AlreadyExists(format!("{topic} partition {partition}"))
            }
            _ => Error::io(dir, "mkdir", e),
        })?;
        let state = LoadState { had_clean_shutdown: true, ..LoadState::default() };
        Log::open(dir, topic, partition, config, SegmentMode::Writable, state)
    }

    fn writable(&self) -> bool {
        self.mode == SegmentMode::Writable
    }

    fn draw_roll_jitter(&self, base: Offset) -> i64 {
        let jitter = self.config.segment_jitter_ms;
        if jitter <= 0 {
            return 0;
        }
        let random = std::hash::RandomState::new().hash_one(base.0);
        (random % jitter.min(self.config.segment_ms).max(1) as u64) as i64
    }

    /// Read-only mode: takes in what a broker changed since the last look, at most every
    /// 200 ms (called from the read paths). See [`Log::refresh`].
    pub(super) fn maybe_refresh(&self) -> Result<()> {
        if self.writable() {
            return Ok(());
        }
        let now = now_ms();
        let last = self.last_refresh_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) < REFRESH_INTERVAL_MS
            || self
                .last_refresh_ms
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return Ok(());
        }
        // A broker changing files between our listing and our stat is routine: try again at
        // the next interval instead of failing this read.
        if let Err(e) = self.refresh() {
            log::warn!("{}: refresh failed: {e}", self.dir.display());
        }
        Ok(())
    }

    /// Read-only mode: looks at the partition directory again. Whole new batches at the end of
    /// the active segment become visible (one `stat`, then a scan of only the new bytes); a
    /// new, deleted or shrunk segment (the broker rolled, deleted or truncated) makes the log
    /// reload its segment list. Returns whether anything changed. Writable logs are never
    /// changed behind our back (we hold the lock), so this is a no-op for them.
    pub fn refresh(&self) -> Result<bool> {
        if self.writable() {
            return Ok(false);
        }
        // A segment whose `.swap` the broker renamed to its final name reloads too: the old
        // names of its index files are gone.
        let on_disk = self.scan_files()?;
        let known: Vec<SegmentFiles> = self
            .segments
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|s| SegmentFiles { base_offset: s.base_offset(), swap: s.is_swap() })
            .collect();
        let active = self.active_segment();
        let shrunk = match &active {
            Some(seg) => std::fs::metadata(seg.log_path()).map_or(true, |m| m.len() < seg.size()),
            None => false,
        };
        if on_disk != known || shrunk {
            log::debug!("{}: segments changed on disk, reloading", self.dir.display());
            self.load(self.load_state)?;
            return Ok(true);
        }
        let Some(active) = active else { return Ok(false) };
        let len = std::fs::metadata(active.log_path())
            .map_err(|e| Error::io(active.log_path(), "stat", e))?
            .len();
        if !active.extend_read_only(len)? {
            return Ok(false);
        }
        self.log_end_offset.store(active.next_offset()?.0, Ordering::Release);
        *lock(&self.last_modified) = SystemTime::now();
        Ok(true)
    }

    /// Topic name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Partition number.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The configuration this log was opened with.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// First offset readers may see.
    pub fn log_start_offset(&self) -> Offset {
        Offset(self.log_start_offset.load(Ordering::Acquire))
    }

    /// Offset the next appended record gets.
    pub fn log_end_offset(&self) -> Offset {
        Offset(self.log_end_offset.load(Ordering::Acquire))
    }

    /// Offset below which everything was fsynced (what `recovery-point-offset-checkpoint` gets).
    pub fn recovery_point(&self) -> Offset {
        Offset(self.recovery_point.load(Ordering::Acquire))
    }

    /// Number of segments recovery re-read when this log was opened.
    pub fn recovered_segments(&self) -> usize {
        self.recovered_segments.load(Ordering::Relaxed)
    }

    /// The segments in base-offset order (a snapshot).
    pub fn segment_list(&self) -> Vec<Arc<LogSegment>> {
        self.segments.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
    }

    /// The segment whose base offset is `base`, if any.
    pub fn segment(&self, base: Offset) -> Option<Arc<LogSegment>> {
        self.segments.read().unwrap_or_else(|e| e.into_inner()).get(&base).cloned()
    }

    fn active_segment(&self) -> Option<Arc<LogSegment>> {
        self.segments.read().unwrap_or_else(|e| e.into_inner()).values().next_back().cloned()
    }

    /// The floor segment of `at` (the last with base offset `<= at`), else the first segment.
    fn floor_segment(&self, at: Offset) -> Option<Arc<LogSegment>> {
        let map = self.segments.read().unwrap_or_else(|e| e.into_inner());
        map.range(..=at).next_back().or_else(|| map.iter().next()).map(|(_, s)| Arc::clone(s))
    }

    /// The segment following the one whose base offset is `base`.
    fn segment_after(&self, base: Offset) -> Option<Arc<LogSegment>> {
        let map = self.segments.read().unwrap_or_else(|e| e.into_inner());
        map.range((Bound::Excluded(base), Bound::Unbounded)).next().map(|(_, s)| Arc::clone(s))
    }

    /// Segments with base offset `>= from` in order, starting with the floor segment of `from`.
    fn segments_from(&self, from: Offset) -> Vec<Arc<LogSegment>> {
        let map = self.segments.read().unwrap_or_else(|e| e.into_inner());
        let floor = map.range(..=from).next_back().map_or(Offset(i64::MIN), |(b, _)| *b);
        map.range(floor..).map(|(_, s)| Arc::clone(s)).collect()
    }

    pub(super) fn out_of_range(&self, requested: Offset) -> Error {
        Error::OffsetOutOfRange {
            requested,
            log_start: self.log_start_offset(),
            log_end: self.log_end_offset(),
        }
    }

    // ---- appends ----------------------------------------------------------------------------

    /// Appends `records` as one batch (several only when one would exceed `max.message.bytes`),
    /// assigning offsets from the log end offset. Records without a timestamp get "now"; with
    /// `message.timestamp.type=LogAppendTime` every batch is stamped with the append time; the
    /// topic's `compression.type` codec is used. Refuses the whole call, writing nothing, if a
    /// single record does not fit in a batch of `max.message.bytes` (or `segment.bytes`).
    pub fn append(&self, records: &[NewRecord]) -> Result<AppendInfo> {
        self.append_records(records)
    }

    /// [`Log::append`] of borrowed records (the lines of one `write()` without a copy each).
    pub fn append_refs(&self, records: &[RecordRef<'_>]) -> Result<AppendInfo> {
        self.append_records(records)
    }

    fn append_records<R: EncodeRecord>(&self, records: &[R]) -> Result<AppendInfo> {
        if !self.writable() {
            return Err(Error::ReadOnly);
        }
        if records.is_empty() {
            return Err(Error::InvalidInput("an append needs at least one record".to_string()));
        }
        // "Now" fills in missing timestamps while encoding (`BatchSpec::default_timestamp`).
        let batches = self.encode_batches(records, now_ms())?;
        let batch_count = batches.len();

        let _guard = lock(&self.append_lock);
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::StaleHandle);
        }
        let first_offset = self.log_end_offset();
        let mut last_offset = first_offset;
        for mut batch in batches {
            let base = self.log_end_offset();
            let last = base.plus(batch.records as i64 - 1);
            set_base_offset(&mut batch.bytes, base)
                .map_err(|e| Error::InvalidInput(format!("encoded batch: {e}")))?;
            let active = self.maybe_roll(batch.bytes.len() as u64, batch.max_timestamp, last)?;
            active.append(&batch.bytes, last, batch.max_timestamp, last)?;
            self.log_end_offset.store(last.plus(1).0, Ordering::Release);
            last_offset = last;
        }
        *lock(&self.last_modified) = SystemTime::now();
        Ok(AppendInfo { first_offset, last_offset, batches: batch_count })
    }

    /// Encodes `records` into batches of at most `max.message.bytes` each: one batch when it
    /// fits, otherwise consecutive chunks, halved until each fits. Records without a timestamp
    /// are written with `now`.
    fn encode_batches<R: EncodeRecord>(
        &self,
        records: &[R],
        now: Timestamp,
    ) -> Result<Vec<EncodedBatch>> {
        let max = self.config.max_message_bytes as usize;
        let limit = max.min(usize::try_from(self.config.segment_bytes).unwrap_or(usize::MAX));
        let spec = BatchSpec {
            compression: self.config.compression_type.codec(),
            timestamp_type: match self.config.message_timestamp_type {
                MessageTimestampType::CreateTime => TimestampType::CreateTime,
                MessageTimestampType::LogAppendTime => TimestampType::LogAppendTime,
            },
            log_append_time: now,
            default_timestamp: now,
            ..BatchSpec::default()
        };
        // Pre-split by an upper bound of the uncompressed size, so one huge append does not
        // encode everything many times over.
        let mut chunks = Vec::new();
        let (mut start, mut estimate) = (0usize, crate::format::RECORD_BATCH_OVERHEAD);
        for (i, r) in records.iter().enumerate() {
            let size = r.record_ref().size_upper_bound();
            if i > start && estimate.saturating_add(size) > limit {
                chunks.push(records.get(start..i).unwrap_or_default());
                start = i;
                estimate = crate::format::RECORD_BATCH_OVERHEAD;
            }
            estimate = estimate.saturating_add(size);
        }
        chunks.push(records.get(start..).unwrap_or_default());
        let mut out = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            self.encode_split(chunk, &spec, limit, &mut out)?;
        }
        Ok(out)
    }

    fn encode_split<R: EncodeRecord>(
        &self,
        records: &[R],
        spec: &BatchSpec,
        limit: usize,
        out: &mut Vec<EncodedBatch>,
    ) -> Result<()> {
        let bytes = encode_batch(spec, records).map_err(|e| Error::InvalidInput(e.to_string()))?;
        if bytes.len() <= limit {
            // The encoder wrote the max timestamp (now-filled, or LogAppendTime) in the header.
            let max_timestamp = parse_batch_info(&bytes)
                .map_err(|e| Error::InvalidInput(format!("encoded batch: {e}")))?
                .max_timestamp;
            out.push(EncodedBatch { bytes, records: records.len(), max_timestamp });
            return Ok(());
        }
        if records.len() == 1 {
            return Err(Error::RecordTooLarge { size: bytes.len(), max: limit });
        }
        let (first, second) = records.split_at(records.len() / 2);
        self.encode_split(first, spec, limit, out)?;
        self.encode_split(second, spec, limit, out)
    }

    /// The active segment, rolled first if the next set must not go into it (Kafka's
    /// `maybeRoll`: `segment.bytes`, `segment.ms` by record time, a full index, or a relative
    /// offset overflow). Caller holds `append_lock`.
    fn maybe_roll(
        &self,
        set_size: u64,
        max_timestamp: Timestamp,
        last: Offset,
    ) -> Result<Arc<LogSegment>> {
        let active = self.active_segment().ok_or(Error::StaleHandle)?;
        let max_segment_ms = self
            .config
            .segment_ms
            .saturating_sub(self.active_roll_jitter_ms.load(Ordering::Relaxed));
        if !active.should_roll(
            set_size,
            max_timestamp,
            last,
            self.config.segment_bytes,
            max_segment_ms,
        )? {
            return Ok(active);
        }
        self.roll()
    }

    /// Starts a new active segment at the log end offset. Caller holds `append_lock`.
    fn roll(&self) -> Result<Arc<LogSegment>> {
        let new_base = self.log_end_offset();
        if let Some(active) = self.active_segment() {
            if active.base_offset() == new_base && active.size() == 0 {
                return Ok(active);
            }
            active.on_become_inactive()?;
        }
        let segment = Arc::new(LogSegment::create(
            &self.dir,
            new_base,
            self.config.segment_index_bytes,
            self.config.index_interval_bytes,
        )?);
        let mut map = self.segments.write().unwrap_or_else(|e| e.into_inner());
        map.insert(new_base, Arc::clone(&segment));
        self.segments_version.fetch_add(1, Ordering::AcqRel);
        drop(map);
        self.active_roll_jitter_ms.store(self.draw_roll_jitter(new_base), Ordering::Relaxed);
        log::debug!("rolled {} to a new segment at {new_base}", self.dir.display());
        Ok(segment)
    }

    /// Rolls the active segment now if it is not empty (tests and tools).
    pub fn force_roll(&self) -> Result<()> {
        if !self.writable() {
            return Err(Error::ReadOnly);
        }
        let _guard = lock(&self.append_lock);
        self.roll().map(|_| ())
    }

    // ---- reads ------------------------------------------------------------------------------

    /// Cursor at the first batch whose last offset is `>= target` (floor segment, floor index
    /// entry, forward scan; later segments if the floor one has none). `target` equal to the log
    /// end offset gives a cursor at the end. `OffsetOutOfRange` outside `[log start, log end]`.
    pub fn seek(&self, target: Offset) -> Result<ReadCursor> {
        self.maybe_refresh()?;
        let log_end = self.log_end_offset();
        if target < self.log_start_offset() || target > log_end {
            return Err(self.out_of_range(target));
        }
        let mut end_cursor = None;
        // One segment at a time: the floor segment almost always holds the batch, so the
        // segments after it are not collected up front (that cost grew with the segment count).
        let mut next = self.floor_segment(target);
        while let Some(seg) = next {
            next = self.segment_after(seg.base_offset());
            match seg.translate_offset(target)? {
                Translated::Batch(b) => {
                    return Ok(cursor_at(seg.base_offset(), b.position, target));
                }
                Translated::End(position) => {
                    end_cursor = Some(cursor_at(seg.base_offset(), position, target));
                }
            }
        }
        // A read-only partition directory without any segment: an empty log at `target`.
        Ok(end_cursor.unwrap_or(cursor_at(target, Position(0), target)))
    }

    /// Whole batches from `cursor`, at most `max_bytes` unless the first batch alone is larger;
    /// moves on to the next segment when one is exhausted; empty at the current end. The
    /// batches of one read come from one segment (one run, see [`ChunkStart`]). A cursor
    /// without a hint ([`ReadCursor::at`]) is found with [`Log::seek`].
    pub fn read(&self, cursor: &ReadCursor, max_bytes: usize) -> Result<BatchChunk> {
        self.maybe_refresh()?;
        let mut reseeked = false;
        let mut cursor = match SegmentCursor::of(cursor) {
            Some(c) => c,
            None => {
                reseeked = true;
                SegmentCursor::of(&self.seek(cursor.next_offset)?)
                    .ok_or_else(|| self.out_of_range(cursor.next_offset))?
            }
        };
        loop {
            let Some(seg) = self.segment(cursor.segment_base) else {
                if self.segments.read().unwrap_or_else(|e| e.into_inner()).is_empty() {
                    return Ok(cursor.end_chunk(true));
                }
                // The segment was deleted by retention since the cursor was made.
                if cursor.next_offset < self.log_start_offset() || reseeked {
                    return Err(self.out_of_range(cursor.next_offset));
                }
                cursor = SegmentCursor::of(&self.seek(cursor.next_offset)?)
                    .ok_or_else(|| self.out_of_range(cursor.next_offset))?;
                reseeked = true;
                continue;
            };
            if let Some(r) = seg.read(cursor.position, max_bytes)? {
                let next = SegmentCursor {
                    position: r.next_position,
                    next_offset: r.next_offset.max(cursor.next_offset),
                    ..cursor
                };
                // `LogSegment::read` checked the CRC of every batch it returns.
                return Ok(BatchChunk {
                    bytes: r.bytes,
                    starts: vec![cursor.start(0)],
                    next: Some(next.cursor()),
                    crc_checked: true,
                    skipped: None,
                });
            }
            let next_segment = self
                .segments
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .range((Bound::Excluded(cursor.segment_base), Bound::Unbounded))
                .next()
                .map(|(b, _)| *b);
            match next_segment {
                Some(base) if cursor.position.0 >= seg.size() => {
                    cursor = SegmentCursor { segment_base: base, position: Position(0), ..cursor };
                }
                // A sealed segment never grows again: bytes left at its end that do not make
                // a whole batch are damage (a torn write before the recovery point, a file cut
                // after a clean shutdown), not a tail still being written. Reporting them
                // keeps the segments after it reachable; a silent empty chunk would read as
                // the end of the log.
                Some(_) => {
                    return Err(Error::corrupt(
                        seg.file_path(".log"),
                        cursor.position.0,
                        format!(
                            "{} bytes at the end of a sealed segment are not a whole batch",
                            seg.size().saturating_sub(cursor.position.0)
                        ),
                    ));
                }
                // The active segment: the end of what is committed now.
                None => return Ok(cursor.end_chunk(true)),
            }
        }
    }

    /// ListOffsets semantics (see [`OffsetQuery`]); never "not found": a timestamp later than
    /// every record gives the log end offset.
    pub fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
        self.maybe_refresh()?;
        match query {
            OffsetQuery::Latest => Ok(self.log_end_offset()),
            OffsetQuery::Earliest => Ok(self.log_start_offset()),
            OffsetQuery::MaxTimestamp => {
                let mut best: Option<(Timestamp, Arc<LogSegment>)> = None;
                for seg in self.segment_list() {
                    if let Some((ts, _)) = seg.max_timestamp_so_far()?
                        && best.as_ref().is_none_or(|(b, _)| ts > *b)
                    {
                        best = Some((ts, seg));
                    }
                }
                let found = match best {
                    Some((_, seg)) => seg.find_max_timestamp_record()?,
                    None => None,
                };
                Ok(found.map_or_else(|| self.log_end_offset(), |(o, _)| o))
            }
            OffsetQuery::Timestamp(target) => Ok(self
                .find_offset_by_timestamp(target)?
                .map_or_else(|| self.log_end_offset(), |(o, _)| o)),
        }
    }

    /// The first record (in log order, at or after the log start offset) with timestamp `>=
    /// target`, as `(offset, its timestamp)`; `None` when no record is that new. Unlike Kafka,
    /// the search continues into later segments when the first candidate segment has no match.
    ///
    /// The first candidate segment (the first not wholly below the log start offset whose
    /// largest timestamp reaches `target`, as Kafka's `fetchOffsetByTimestamp`) is found by a
    /// binary search of [`TimeSearch::running_max`], not a pass over every segment.
    pub fn find_offset_by_timestamp(
        &self,
        target: Timestamp,
    ) -> Result<Option<(Offset, Timestamp)>> {
        let log_start = self.log_start_offset();
        let mut after = None;
        loop {
            let candidate = {
                let map = self.segments.read().unwrap_or_else(|e| e.into_inner());
                let version = self.segments_version.load(Ordering::Acquire);
                let search = self.time_search(&map, version, log_start)?;
                match search.candidate(target, after) {
                    Some(base) => map.get(&base).map(Arc::clone),
                    // No sealed segment: the active one, if its (live) max timestamp reaches.
                    None => match map.iter().next_back() {
                        Some((base, seg))
                            if after.is_none_or(|a| *base > a)
                                && seg.largest_timestamp()? >= target =>
                        {
                            Some(Arc::clone(seg))
                        }
                        _ => None,
                    },
                }
            };
            let Some(seg) = candidate else { return Ok(None) };
            if let Some(found) = seg.find_offset_by_timestamp(target, log_start)? {
                return Ok(Some(found));
            }
            after = Some(seg.base_offset());
        }
    }

    /// The [`TimeSearch`] of segment-map `version` (whose read lock the caller holds as `map`)
    /// for `log_start`: reused while the map is unchanged, the running max recomputed from the
    /// cached timestamps when only the log start offset moved to another segment.
    fn time_search(
        &self,
        map: &BTreeMap<Offset, Arc<LogSegment>>,
        version: u64,
        log_start: Offset,
    ) -> Result<Arc<TimeSearch>> {
        let mut cache = lock(&self.time_search);
        if let Some(search) = cache.as_ref().filter(|s| s.version == version) {
            let from = search.first_not_below(log_start);
            if from == search.from {
                return Ok(Arc::clone(search));
            }
            let moved = Arc::new(TimeSearch::new(
                version,
                search.bases.clone(),
                search.largest.clone(),
                from,
            ));
            *cache = Some(Arc::clone(&moved));
            return Ok(moved);
        }
        let bases: Vec<Offset> = map.keys().copied().collect();
        let largest = map
            .values()
            .take(map.len().saturating_sub(1))
            .map(|seg| seg.largest_timestamp())
            .collect::<Result<Vec<_>>>()?;
        let from = first_not_below(&bases, log_start);
        let search = Arc::new(TimeSearch::new(version, bases, largest, from));
        *cache = Some(Arc::clone(&search));
        Ok(search)
    }

    /// Offsets, sizes and timestamps now.
    pub fn summary(&self) -> Result<PartitionSummary> {
        self.maybe_refresh()?;
        let (segment_count, size_bytes, max_timestamp) = self.segment_totals()?;
        let log_start = self.log_start_offset();
        let log_end = self.log_end_offset();
        Ok(PartitionSummary {
            log_start_offset: log_start,
            log_end_offset: log_end,
            segment_count: Some(segment_count),
            size_bytes: Some(size_bytes),
            first_timestamp: self.first_timestamp(log_start, log_end)?,
            max_timestamp,
            last_modified: *lock(&self.last_modified),
        })
    }

    /// Segment count, total bytes and max timestamp: the sealed segments' totals come from
    /// `sealed_summary` while the segment map is unchanged, the last segment is read live.
    fn segment_totals(&self) -> Result<(usize, u64, Option<Timestamp>)> {
        fn max_ts(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            }
        }
        let map = self.segments.read().unwrap_or_else(|e| e.into_inner());
        let version = self.segments_version.load(Ordering::Acquire);
        let Some((_, last)) = map.iter().next_back() else { return Ok((0, 0, None)) };
        let cached = *lock(&self.sealed_summary);
        let (sealed_bytes, sealed_max) = match cached {
            Some((v, bytes, max)) if v == version => (bytes, max),
            _ => {
                let (mut bytes, mut max) = (0u64, None);
                for seg in map.values().take(map.len() - 1) {
                    bytes = bytes.saturating_add(seg.size());
                    max = max_ts(max, seg.max_timestamp_so_far()?.map(|(ts, _)| ts));
                }
                *lock(&self.sealed_summary) = Some((version, bytes, max));
                (bytes, max)
            }
        };
        let last_max = last.max_timestamp_so_far()?.map(|(ts, _)| ts);
        Ok((map.len(), sealed_bytes.saturating_add(last.size()), max_ts(sealed_max, last_max)))
    }

    /// Timestamp of the first record at or after the log start offset (cached per log start).
    fn first_timestamp(&self, log_start: Offset, log_end: Offset) -> Result<Option<Timestamp>> {
        if log_start >= log_end {
            return Ok(None);
        }
        if let Some((start, ts)) = *lock(&self.first_timestamp)
            && start == log_start
        {
            return Ok(ts);
        }
        let cursor = self.seek(log_start)?;
        let chunk = self.read(&cursor, 1)?;
        let mut found = None;
        if !chunk.bytes.is_empty() {
            let at = SegmentCursor::of(&cursor)
                .map_or((Offset(0), 0), |c| (c.segment_base, c.position.0));
            let batch = decode_batch(&chunk.bytes).map_err(|e| {
                Error::corrupt(
                    segment_file_path(&self.dir, at.0, ".log"),
                    at.1 + e.at as u64,
                    e.to_string(),
                )
            })?;
            for record in batch.records() {
                let Ok(record) = record else { break };
                if record.offset >= log_start {
                    found = Some(record.timestamp);
                    break;
                }
            }
        }
        *lock(&self.first_timestamp) = Some((log_start, found));
        Ok(found)
    }

    /// Segments in base-offset order, as listed under `segments/`.
    pub fn segment_summaries(&self) -> Result<Vec<SegmentSummary>> {
        self.maybe_refresh()?;
        let map = self.segments.read().unwrap_or_else(|e| e.into_inner());
        let version = self.segments_version.load(Ordering::Acquire);
        let Some((_, last)) = map.iter().next_back() else { return Ok(Vec::new()) };
        let cached = lock(&self.sealed_segment_summaries).clone();
        let sealed = match cached {
            Some((v, sealed)) if v == version => sealed,
            _ => {
                let sealed = map
                    .values()
                    .take(map.len() - 1)
                    .map(|seg| segment_summary(seg))
                    .collect::<Result<Vec<_>>>()?;
                let sealed = Arc::new(sealed);
                *lock(&self.sealed_segment_summaries) = Some((version, Arc::clone(&sealed)));
                sealed
            }
        };
        let mut out = Vec::with_capacity(map.len());
        out.extend_from_slice(&sealed);
        out.push(segment_summary(last)?);
        Ok(out)
    }

    /// What the log could not serve from its directory's files, for the partition's `check`:
    /// every segment-file name that is not a regular file (never opened), and an active
    /// segment whose bytes after its last whole batch do not even start like one (a `.log` of
    /// text, say; a broker's half-written batch is not reported).
    pub fn file_problems(&self) -> Result<Vec<FileProblem>> {
        self.maybe_refresh()?;
        let mut out: Vec<FileProblem> = lock(&self.refused)
            .iter()
            .map(|r| FileProblem {
                name: r.name.clone(),
                position: None,
                what: format!("refused: a {}, not a regular file (not opened)", r.found),
            })
            .collect();
        let Some(active) = self.active_segment() else { return Ok(out) };
        let path = active.log_path();
        let on_disk = match std::fs::metadata(path) {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(Error::io(path, "stat", e)),
        };
        let end = active.size();
        if on_disk > end {
            let mut head = [0u8; crate::format::HEADER_SIZE_UP_TO_MAGIC];
            let n = active.read_log_bytes_on_disk(end, &mut head)?;
            let not_a_batch = match crate::format::peek_entry(head.get(..n).unwrap_or_default()) {
                Err(e) => Some(e.to_string()),
                Ok(Some(h)) if !(0..=2).contains(&h.magic) => Some(format!("magic {}", h.magic)),
                Ok(_) => None,
            };
            if let Some(why) = not_a_batch {
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
                out.push(FileProblem {
                    name: name.unwrap_or_default(),
                    position: Some(end),
                    what: format!(
                        "{} bytes that are not record batches ({why}); not shown",
                        on_disk - end
                    ),
                });
            }
        }
        Ok(out)
    }

    /// Raw bytes of one segment file at `pos`; index files end at their last valid entry.
    pub fn read_segment_file(
        &self,
        base_offset: Offset,
        kind: SegmentFileKind,
        pos: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        let seg = self.segment(base_offset).ok_or_else(|| {
            Error::NotFound(format!("segment {base_offset} of {}", self.dir.display()))
        })?;
        match kind {
            SegmentFileKind::Log => seg.read_log_bytes(pos, buf),
            SegmentFileKind::Index => seg.read_index_bytes(false, pos, buf),
            SegmentFileKind::TimeIndex => seg.read_index_bytes(true, pos, buf),
            SegmentFileKind::TxnIndex => {
                let path = seg.file_path(".txnindex");
                let file = super::open::open_read(&path).map_err(|e| {
                    if super::open::is_not_found(&e) {
                        Error::NotFound(path.display().to_string())
                    } else {
                        e
                    }
                })?;
                read_fully_at(&file, buf, pos).map_err(|e| Error::io(&path, "read", e))
            }
        }
    }

    // ---- durability, retention, close -------------------------------------------------------

    /// Makes everything appended so far durable (fsync of `.log` and index files from the
    /// recovery point on, and of the directory) and advances the recovery point. Readers are
    /// never blocked; appends continue meanwhile.
    pub fn sync(&self) -> Result<()> {
        if !self.writable() {
            return Ok(());
        }
        let _guard = lock(&self.sync_lock);
        let log_end = self.log_end_offset();
        for seg in self.segments_from(self.recovery_point()) {
            seg.sync()?;
        }
        super::open::sync_dir(&self.dir)?;
        self.recovery_point.fetch_max(log_end.0, Ordering::AcqRel);
        Ok(())
    }

    /// Deletes old segments by Kafka's retention rules (log start offset breach, then
    /// `retention.bytes`, then `retention.ms` by each segment's max timestamp), each rule
    /// removing a prefix of the segments; the active segment is never deleted. Advances the log
    /// start offset to the first remaining segment. Returns the number of segments deleted.
    pub fn delete_old_segments(&self, now: Timestamp) -> Result<usize> {
        if !self.writable() {
            return Ok(0);
        }
        let _guard = lock(&self.append_lock);
        let mut deleted = 0;
        let segments = self.segment_list();
        let sealed = segments.len().saturating_sub(1);
        let log_start = self.log_start_offset();
        // 1. Segments entirely below the log start offset.
        let mut prefix = 0;
        while prefix < sealed
            && segments.get(prefix + 1).is_some_and(|n| n.base_offset() <= log_start)
        {
            prefix += 1;
        }
        // 2. Size: while the log minus this segment is still at least retention.bytes.
        if let Some(limit) = self.config.retention_bytes {
            let remaining: u64 = segments.iter().skip(prefix).map(|s| s.size()).sum();
            let mut excess = i128::from(remaining) - i128::from(limit);
            while prefix < sealed {
                let size = i128::from(segments.get(prefix).map_or(0, |s| s.size()));
                if excess < size {
                    break;
                }
                excess -= size;
                prefix += 1;
            }
        }
        // 3. Time: segments whose newest record is older than retention.ms.
        if let Some(retention_ms) = self.config.retention_ms {
            while prefix < sealed {
                let Some(seg) = segments.get(prefix) else { break };
                if now.saturating_sub(seg.largest_timestamp()?) <= retention_ms {
                    break;
                }
                prefix += 1;
            }
        }
        for seg in segments.iter().take(prefix) {
            // Kafka's order: the log start offset moves past the segment (new seeks refuse its
            // offsets), then readers stop finding it, then the files go.
            if let Some(next) = segments.get(deleted + 1) {
                self.log_start_offset.fetch_max(next.base_offset().0, Ordering::AcqRel);
            }
            let mut map = self.segments.write().unwrap_or_else(|e| e.into_inner());
            map.remove(&seg.base_offset());
            self.segments_version.fetch_add(1, Ordering::AcqRel);
            drop(map);
            log::info!("retention: deleting segment {}", seg.log_path().display());
            seg.delete_files()?;
            deleted += 1;
        }
        if deleted > 0 {
            *lock(&self.last_modified) = SystemTime::now();
        }
        Ok(deleted)
    }

    /// Closes cleanly: final time-index entry and trimmed indexes for the active segment, then
    /// everything fsynced. Appends fail afterwards. Idempotent.
    pub fn close(&self) -> Result<()> {
        let _guard = lock(&self.append_lock);
        if self.closed.swap(true, Ordering::AcqRel) || !self.writable() {
            return Ok(());
        }
        for seg in self.segment_list() {
            seg.close_indexes()?;
        }
        drop(_guard);
        self.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(largest: &[Timestamp], log_start: i64) -> TimeSearch {
        // Segments at 0, 10, 20, ...; the last one (active) has no cached timestamp.
        let bases: Vec<Offset> = (0..=largest.len() as i64).map(|i| Offset(i * 10)).collect();
        let from = first_not_below(&bases, Offset(log_start));
        TimeSearch::new(0, bases, largest.to_vec(), from)
    }

    #[test]
    fn timestamp_search_finds_the_first_segment_in_log_order_whose_largest_timestamp_reaches() {
        // Largest timestamps need not grow: 50 comes before 30.
        let s = search(&[10, 50, 30, 70], 0);
        assert_eq!(s.candidate(5, None), Some(Offset(0)));
        assert_eq!(s.candidate(20, None), Some(Offset(10)));
        assert_eq!(s.candidate(40, None), Some(Offset(10)), "not the later 30");
        assert_eq!(s.candidate(60, None), Some(Offset(30)));
        assert_eq!(s.candidate(71, None), None, "only the active segment can still reach");
        // Continuing after a candidate without a match: the next that reaches, in order.
        assert_eq!(s.candidate(25, Some(Offset(10))), Some(Offset(20)));
        assert_eq!(s.candidate(40, Some(Offset(10))), Some(Offset(30)));
        assert_eq!(s.candidate(40, Some(Offset(30))), None);
    }

    #[test]
    fn timestamp_search_skips_segments_wholly_below_the_log_start_offset() {
        // Log start 25: segments 0 and 10 are wholly below it (20 <= 25), 20 straddles it.
        let s = search(&[90, 80, 30, 40], 25);
        assert_eq!(s.from, 2);
        assert_eq!(s.candidate(35, None), Some(Offset(30)), "not 0 or 10, below the start");
        assert_eq!(s.candidate(5, None), Some(Offset(20)));
        // A log start in the active segment leaves only the active segment.
        let s = search(&[90, 80], 20);
        assert_eq!(s.candidate(5, None), None);
    }
}

/// A [`ReadCursor`] as this engine makes it: the hint is (segment base offset, position of a
/// batch start in its `.log`, or the segment's end).
///
/// **Invariant**: `position` is the position of a batch start in the segment whose base offset
/// is `segment_base` (or that segment's end), and every batch before it holds only offsets below
/// `next_offset`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct SegmentCursor {
    pub segment_base: Offset,
    pub position: Position,
    pub next_offset: Offset,
}

impl SegmentCursor {
    /// The engine's reading of `cursor`; `None` for a cursor without a hint.
    pub fn of(cursor: &ReadCursor) -> Option<SegmentCursor> {
        let (base, position) = cursor.hint.get()?;
        Some(SegmentCursor {
            segment_base: Offset(base),
            position: Position(position),
            next_offset: cursor.next_offset,
        })
    }

    /// As a [`ReadCursor`].
    pub fn cursor(self) -> ReadCursor {
        cursor_at(self.segment_base, self.position, self.next_offset)
    }

    /// The run of a chunk starting here, at index `at` of its bytes.
    pub fn start(self, at: usize) -> ChunkStart {
        ChunkStart { at, cursor: self.cursor(), retention_boundary: self.position.0 == 0 }
    }

    /// An empty chunk: the end of what is readable now.
    pub fn end_chunk(self, crc_checked: bool) -> BatchChunk {
        BatchChunk { next: Some(self.cursor()), crc_checked, ..BatchChunk::default() }
    }
}

/// The cursor at `position` of segment `segment_base`, expecting offset `next_offset`.
pub(crate) fn cursor_at(
    segment_base: Offset,
    position: Position,
    next_offset: Offset,
) -> ReadCursor {
    ReadCursor { next_offset, hint: CursorHint::new(segment_base.0, position.0) }
}
