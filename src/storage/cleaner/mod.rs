//! The log cleaner: Kafka's `LogCleaner` for topics with `cleanup.policy` `compact` (or
//! `compact,delete`), writing the files a broker's cleaner writes.
//!
//! # One pass over a log ([`Cleaner::clean`])
//!
//! 1. **Plan** (Kafka's `LogCleanerManager.cleanableOffsets`). The *dirty section* starts at the
//!    log's entry in `cleaner-offset-checkpoint` (the log start offset when there is none, or
//!    it lies outside the log) and ends at the *first uncleanable offset*: the least of the
//!    active segment's base offset (the active segment is never cleaned), the last stable
//!    offset (the first offset of the oldest open transaction), and the base offset of the
//!    first segment whose largest timestamp is newer than `now - min.compaction.lag.ms`. The
//!    log is cleaned when its dirty ratio (bytes of the dirty section over bytes of the clean
//!    and dirty sections) is at least `min.cleanable.dirty.ratio`, when the first dirty
//!    segment's first batch is older than `max.compaction.lag.ms`, or when a delete horizon the
//!    last pass wrote has passed (KIP-534, so that tombstones go without new writes).
//! 2. **Offset map** ([`offset_map`]): the latest offset of every key of the dirty section,
//!    records of aborted transactions left out. When the map is full (its size is bounded by
//!    `log.cleaner.dedupe.buffer.size`), mapping stops after the last whole batch: the pass
//!    cleans up to there and the next pass continues, as Kafka's does.
//! 3. **Clean** every sealed segment below the map's end, grouped up to `segment.bytes` (and
//!    `segment.index.bytes` for each index, and an offset span of at most `i32::MAX`), each
//!    group into one segment named after its first input: a record is kept by Kafka's
//!    `shouldRetainRecord` (below); batches keep their base offset, last offset delta, producer
//!    id, epoch and base sequence, partition leader epoch and codec.
//! 4. **Swap** each group's output in, crash-safe as Kafka does (`LocalLog.replaceSegments`):
//!    `<base>.log.cleaned` (and `.index`, `.timeindex`, `.txnindex`) written and fsynced, renamed
//!    `.swap`, the inputs renamed `.deleted`, the `.swap` suffixes dropped, then the inputs
//!    removed. Recovery at the next open (`storage::log` load, `storage::swap`) finishes or
//!    undoes whatever a crash interrupted: `.cleaned` files are deleted (the inputs are intact),
//!    a complete set of `.swap` files replaces the inputs it covers.
//! 5. The log's new dirty start (the map's end) goes to `cleaner-offset-checkpoint`
//!    ([`write_checkpoint`]) by the caller.
//!
//! # Which records stay
//!
//! - A record past the map's latest offset stays (it was not looked at).
//! - A record without a key goes.
//! - A keyed record stays when its offset is at least the map's offset for its key (or its key
//!   is not in the map, for records of the clean section), and it has a value, or it is a
//!   tombstone whose batch has no delete horizon yet or one still in the future.
//! - A batch holding a tombstone (or a marker that may go) that has no delete horizon gets one:
//!   attribute bit 6 and `now + delete.retention.ms` in `baseTimestamp` (KIP-534); a later pass
//!   after the horizon drops the tombstones.
//! - Batches of aborted transactions (by the `.txnindex` files) go; an ABORT marker stays until
//!   no batch of its transaction is left (then until its horizon), a COMMIT marker until its
//!   transaction left no batch in what was read; control batches are never compacted by key.
//! - A producer's last batch is kept, emptied to its 61-byte header if every record goes, so the
//!   producer's state (last sequence, epoch) survives while the producer is active (its last
//!   batch younger than Kafka's default `producer.id.expiration.ms`, one day, or a transaction
//!   of it open).
//! - Legacy v0/v1 messages are copied unchanged: never compacted (logged). The keys they hold
//!   still go into the map, so a newer v2 record of a key replaces nothing it should not.
//!
//! # Concurrency
//!
//! The map and the outputs are built without any lock of the log: appends, rolls and readers go
//! on. Only the swap takes the log's append lock, first checking that every input is still in
//! the segment map unchanged (retention may have deleted one meanwhile: then the pass's output
//! is discarded). Readers holding a replaced segment keep reading its open file (its indexes
//! are loaded before the files are renamed); a cursor made in a replaced segment is placed by
//! its offset in the output ([`crate::storage::segment::LogSegment::generation`]), and such a
//! cursor is no longer held
//! ([`crate::source::PartitionSource::holds`]), as after retention.

pub mod offset_map;
mod output;
pub mod txn;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};
use crate::format::checkpoint::{format_offset_checkpoint, parse_offset_checkpoint};
use crate::format::{
    BatchInfo, NO_TIMESTAMP, Offset, Position, Record, Timestamp, decode_batch_unverified,
    encode_empty_batch, encode_retained_batch, parse_batch_info, peek_entry,
};
use crate::storage::log::Log;
use crate::storage::segment::LogSegment;

use self::offset_map::OffsetMap;
use self::output::{CLEANED, CleanedSegment, KINDS, SWAP, file_path};
use self::txn::{Producers, TxnMetadata, scan_producers};

/// Name of the cleaner's checkpoint at the root of a data dir.
pub const CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
/// Kafka's `log.cleaner.dedupe.buffer.size` default: 128 MiB.
pub const DEFAULT_DEDUPE_BUFFER_BYTES: usize = 128 << 20;
/// Bytes of a segment read per step while cleaning or mapping.
const READ_CHUNK: usize = 1 << 20;

/// What the cleaner needs of a topic's settings (the lead builds it from `LogConfig`).
#[derive(Clone, Debug, PartialEq)]
pub struct CleanerSettings {
    /// `cleanup.policy` contains `compact`.
    pub compact: bool,
    /// `delete.retention.ms`: how long tombstones and markers stay after their first cleaning.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: records younger than this are not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a log whose dirty data is older than this is cleaned whatever
    /// its dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
    /// `segment.bytes`: largest output segment.
    pub segment_bytes: u64,
    /// `segment.index.bytes`: largest output index file.
    pub segment_index_bytes: u32,
    /// `log.cleaner.dedupe.buffer.size`: bytes of the offset map.
    pub dedupe_buffer_bytes: usize,
}

impl CleanerSettings {
    /// How a log with `config` is cleaned: `None` when its `cleanup.policy` does not contain
    /// `compact` (the cleaner leaves it alone), the topic-level settings otherwise, with the
    /// mount's `log.cleaner.dedupe.buffer.size`.
    pub fn from_log_config(
        config: &crate::storage::config::LogConfig,
        dedupe_buffer_bytes: usize,
    ) -> Option<CleanerSettings> {
        config.cleanup_policy.compact.then_some(CleanerSettings {
            compact: true,
            delete_retention_ms: config.delete_retention_ms,
            min_compaction_lag_ms: config.min_compaction_lag_ms,
            max_compaction_lag_ms: config.max_compaction_lag_ms,
            min_cleanable_dirty_ratio: config.min_cleanable_dirty_ratio,
            segment_bytes: config.segment_bytes,
            segment_index_bytes: config.segment_index_bytes,
            dedupe_buffer_bytes,
        })
    }
}

impl Default for CleanerSettings {
    /// Kafka's defaults, `compact` on.
    fn default() -> Self {
        CleanerSettings {
            compact: true,
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            segment_bytes: 1 << 30,
            segment_index_bytes: 10 << 20,
            dedupe_buffer_bytes: DEFAULT_DEDUPE_BUFFER_BYTES,
        }
    }
}

/// A step of the swap a test may stop a pass after, leaving the files as a crash there would.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum CrashStep {
    /// The first output's `.log.cleaned` half written, no index yet.
    WritingCleaned,
    /// The first output's `.cleaned` files complete and fsynced.
    CleanedComplete,
    /// Its `.log` renamed `.swap`, its indexes still `.cleaned`.
    MidSwapRename,
    /// All its files renamed `.swap`.
    SwapRenamed,
    /// The first input's files renamed `.deleted`, the others' not yet.
    MidDeleteRename,
    /// Every input's files renamed `.deleted` (not yet removed).
    OldDeleted,
    /// The output's `.log.swap` renamed to its final name, its indexes still `.swap`.
    MidFinalRename,
}

impl CrashStep {
    /// Every step, in the order a pass goes through them.
    pub const ALL: [CrashStep; 7] = [
        CrashStep::WritingCleaned,
        CrashStep::CleanedComplete,
        CrashStep::MidSwapRename,
        CrashStep::SwapRenamed,
        CrashStep::MidDeleteRename,
        CrashStep::OldDeleted,
        CrashStep::MidFinalRename,
    ];
}

/// How one pass runs.
#[derive(Debug, Default)]
pub struct CleanOptions<'a> {
    /// Wall time (ms) the pass takes as now.
    pub now: Timestamp,
    /// Set by another thread to end the pass early (unmount): nothing is swapped after.
    pub abort: Option<&'a AtomicBool>,
    /// Test hook: stop after this step, leaving the files as they are.
    pub crash_at: Option<CrashStep>,
}

impl CleanOptions<'_> {
    fn aborted(&self) -> bool {
        self.abort.is_some_and(|a| a.load(Ordering::Relaxed))
    }
}

/// What a pass over one log did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CleanStats {
    /// Start of the dirty section.
    pub first_dirty: Offset,
    /// First uncleanable offset.
    pub first_uncleanable: Offset,
    /// The new start of the dirty section (what goes to `cleaner-offset-checkpoint`).
    pub end_offset: Offset,
    /// Distinct keys in the map.
    pub keys_mapped: usize,
    /// Whether the map filled up before the dirty section's end.
    pub map_full: bool,
    /// Input segments and their bytes.
    pub segments_in: usize,
    /// Bytes of the input segments.
    pub bytes_in: u64,
    /// Output segments and their bytes.
    pub segments_out: usize,
    /// Bytes of the output segments.
    pub bytes_out: u64,
    /// Records read and kept while cleaning.
    pub records_read: u64,
    /// Records kept.
    pub records_kept: u64,
    /// Legacy v0/v1 entries copied unchanged.
    pub legacy_copied: u64,
    /// The test hook stopped the pass here.
    pub stopped_at: Option<CrashStep>,
}

/// What the plan decided for a log.
#[derive(Debug)]
struct Plan {
    segments: Vec<Arc<LogSegment>>,
    first_dirty: Offset,
    first_uncleanable: Offset,
    producers: Producers,
}

/// The cleaner: its offset map, reused from log to log (the one large allocation).
#[derive(Debug)]
pub struct Cleaner {
    map: OffsetMap,
    buffer_bytes: usize,
}

impl Cleaner {
    /// A cleaner whose offset map takes `dedupe_buffer_bytes`.
    pub fn new(dedupe_buffer_bytes: usize) -> Cleaner {
        Cleaner { map: OffsetMap::new(dedupe_buffer_bytes), buffer_bytes: dedupe_buffer_bytes }
    }

    /// One pass over `log` with `settings`, the dirty section starting at `checkpoint` (the
    /// log's `cleaner-offset-checkpoint` entry). `Ok(None)` when the log is not due (or not
    /// compacted, not writable, or the pass was aborted); else what was done, whose
    /// `end_offset` the caller checkpoints.
    pub fn clean(
        &mut self,
        log: &Log,
        settings: &CleanerSettings,
        checkpoint: Option<Offset>,
        opts: &CleanOptions<'_>,
    ) -> Result<Option<CleanStats>> {
        if !settings.compact || !log.is_writable() {
            return Ok(None);
        }
        let Some(plan) = plan(log, settings, checkpoint, opts)? else { return Ok(None) };
        if settings.dedupe_buffer_bytes != self.buffer_bytes {
            self.map = OffsetMap::new(settings.dedupe_buffer_bytes);
            self.buffer_bytes = settings.dedupe_buffer_bytes;
        }
        let mut stats = CleanStats {
            first_dirty: plan.first_dirty,
            first_uncleanable: plan.first_uncleanable,
            ..CleanStats::default()
        };
        self.build_map(log, &plan, &mut stats, opts)?;
        if opts.aborted() {
            return Ok(None);
        }
        let end = self.map.latest_offset().plus(1).max(plan.first_dirty);
        stats.end_offset = end;
        let candidates: Vec<Arc<LogSegment>> = plan
            .segments
            .iter()
            .take(plan.segments.len().saturating_sub(1))
            .filter(|s| s.base_offset() < end)
            .cloned()
            .collect();
        let groups = group_by_size(&candidates, settings, plan.first_uncleanable)?;
        let mut horizon = NO_TIMESTAMP;
        for group in groups {
            if opts.aborted() {
                return Ok(None);
            }
            let done = self.clean_group(log, &group, &plan, settings, opts, &mut stats)?;
            match done {
                GroupDone::Swapped(h) => horizon = horizon.max(h),
                GroupDone::Stopped(step) => {
                    stats.stopped_at = Some(step);
                    return Ok(Some(stats));
                }
                GroupDone::Changed => {
                    log::info!(
                        "{}: cleaner: segments changed during the pass (retention); output \
                         discarded, the next pass starts over",
                        log.dir().display()
                    );
                    return Ok(None);
                }
            }
        }
        log.set_latest_delete_horizon(horizon);
        if stats.legacy_copied > 0 {
            log::info!(
                "{}: cleaner: {} legacy (v0/v1) entries copied unchanged; legacy data is never \
                 compacted",
                log.dir().display(),
                stats.legacy_copied
            );
        }
        log::info!(
            "{}: cleaned offsets {}..{}: {} segment(s), {} bytes -> {} segment(s), {} bytes; \
             {} of {} records kept, {} keys mapped{}",
            log.dir().display(),
            stats.first_dirty,
            stats.end_offset,
            stats.segments_in,
            stats.bytes_in,
            stats.segments_out,
            stats.bytes_out,
            stats.records_kept,
            stats.records_read,
            stats.keys_mapped,
            if stats.map_full { " (map full: the next pass continues)" } else { "" }
        );
        Ok(Some(stats))
    }

    /// Kafka's `buildOffsetMap`: the latest offset of each key in `[first_dirty,
    /// first_uncleanable)`, stopping after the last whole batch that fits.
    fn build_map(
        &mut self,
        log: &Log,
        plan: &Plan,
        stats: &mut CleanStats,
        opts: &CleanOptions<'_>,
    ) -> Result<()> {
        let (start, end) = (plan.first_dirty, plan.first_uncleanable);
        self.map.clear(Offset(start.0 - 1));
        if start >= end {
            return Ok(());
        }
        let mut txn = TxnMetadata::new(log.aborted_transactions(start, end)?);
        let map = &mut self.map;
        let mut full = false;
        'segments: for (i, seg) in plan.segments.iter().enumerate() {
            let next_base = plan.segments.get(i + 1).map(|s| s.base_offset());
            if next_base.is_some_and(|n| n <= start) {
                continue;
            }
            if seg.base_offset() >= end || seg.is_active() {
                break;
            }
            let mut stop = false;
            for_each_entry(seg, opts, |entry, info, position| {
                if info.last_offset < start {
                    return Ok(true);
                }
                if info.base_offset >= end || info.last_offset >= end {
                    stop = true;
                    return Ok(false);
                }
                if info.is_control {
                    txn.on_control_batch(info, entry);
                } else if !txn.on_batch(info) {
                    // `LogSegment::read` checked the CRC.
                    let bad = |e: crate::format::DecodeError| {
                        Error::corrupt(seg.log_path(), position + e.at as u64, e.to_string())
                    };
                    let batch = decode_batch_unverified(entry).map_err(bad)?;
                    for r in batch.records() {
                        let r = r.map_err(bad)?;
                        if let Some(key) = r.key
                            && r.offset >= start
                            && !map.put(key, r.offset)
                        {
                            full = true;
                            return Ok(false);
                        }
                    }
                }
                map.set_latest_offset(info.last_offset);
                Ok(true)
            })?;
            if full || stop || opts.aborted() {
                break 'segments;
            }
        }
        stats.keys_mapped = map.len();
        stats.map_full = full;
        Ok(())
    }

    /// Cleans one group into one output and swaps it in.
    fn clean_group(
        &mut self,
        log: &Log,
        group: &[Arc<LogSegment>],
        plan: &Plan,
        settings: &CleanerSettings,
        opts: &CleanOptions<'_>,
        stats: &mut CleanStats,
    ) -> Result<GroupDone> {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            return Ok(GroupDone::Swapped(NO_TIMESTAMP));
        };
        let base = first.base_offset();
        let upper = match plan.segments.iter().find(|s| s.base_offset() > last.base_offset()) {
            Some(next) => next.base_offset(),
            None => last.next_offset()?,
        };
        let mut txn = TxnMetadata::new(log.aborted_transactions(base, upper)?);
        let interval = log.config().index_interval_bytes;
        let mut out = CleanedSegment::create(log.dir(), base, interval)?;
        let filter = Filter {
            map: &self.map,
            producers: &plan.producers,
            now: opts.now,
            delete_retention_ms: settings.delete_retention_ms,
        };
        let mut horizon = NO_TIMESTAMP;
        let mut buf = Vec::new();
        let result = (|| -> Result<()> {
            for seg in group {
                stats.segments_in += 1;
                stats.bytes_in += seg.size();
                for_each_entry(seg, opts, |entry, info, position| {
                    buf.clear();
                    let kept =
                        filter.batch(entry, info, &mut txn, &mut buf, stats).map_err(|e| {
                            Error::corrupt(
                                seg.log_path(),
                                position,
                                format!("batch at offset {}: {e}", info.base_offset),
                            )
                        })?;
                    if let Some(k) = kept {
                        horizon = horizon.max(k.horizon);
                        let bytes = if k.original { entry } else { &buf[..] };
                        out.append(bytes, info.last_offset, k.max_timestamp)?;
                    }
                    Ok(true)
                })?;
            }
            Ok(())
        })();
        if let Err(e) = result {
            remove_cleaned(log.dir(), base);
            return Err(e);
        }
        if opts.aborted() {
            remove_cleaned(log.dir(), base);
            return Ok(GroupDone::Changed);
        }
        for aborted in &txn.cleaned_index {
            out.append_aborted(aborted);
        }
        let out_size = out.size;
        let stop_early = opts.crash_at == Some(CrashStep::WritingCleaned);
        if let Err(e) = out.finish(last.last_modified(), stop_early) {
            remove_cleaned(log.dir(), base);
            return Err(e);
        }
        if stop_early {
            return Ok(GroupDone::Stopped(CrashStep::WritingCleaned));
        }
        if opts.crash_at == Some(CrashStep::CleanedComplete) {
            return Ok(GroupDone::Stopped(CrashStep::CleanedComplete));
        }
        match swap_in(log, group, base, opts.crash_at)? {
            SwapDone::Done => {
                stats.segments_out += 1;
                stats.bytes_out += out_size;
                Ok(GroupDone::Swapped(horizon))
            }
            SwapDone::Stopped(step) => Ok(GroupDone::Stopped(step)),
            SwapDone::Changed => Ok(GroupDone::Changed),
        }
    }
}

enum GroupDone {
    /// Swapped in; the latest delete horizon it holds.
    Swapped(Timestamp),
    Stopped(CrashStep),
    Changed,
}

enum SwapDone {
    Done,
    Stopped(CrashStep),
    Changed,
}

/// Calls `f` with every whole batch of `seg` (CRC-checked) and its header, in order, until it
/// answers `false`, the segment ends or the pass is aborted.
fn for_each_entry(
    seg: &LogSegment,
    opts: &CleanOptions<'_>,
    mut f: impl FnMut(&[u8], &BatchInfo, u64) -> Result<bool>,
) -> Result<()> {
    let mut pos = Position(0);
    while let Some(chunk) = seg.read(pos, READ_CHUNK)? {
        if opts.aborted() {
            return Ok(());
        }
        let mut at = 0usize;
        while let Some(rest) = chunk.bytes.get(at..) {
            let Some(h) = peek_entry(rest)
                .map_err(|e| Error::corrupt(seg.log_path(), pos.0 + at as u64, e.to_string()))?
            else {
                break;
            };
            let Some(entry) = rest.get(..h.total_size()) else { break };
            let info = parse_batch_info(entry)
                .map_err(|e| Error::corrupt(seg.log_path(), pos.0 + at as u64, e.to_string()))?;
            if !f(entry, &info, pos.0 + at as u64)? {
                return Ok(());
            }
            at += entry.len();
        }
        pos = chunk.next_position;
    }
    Ok(())
}

/// What [`Filter::batch`] kept of a batch.
struct Kept {
    /// The original bytes are kept as they are.
    original: bool,
    max_timestamp: Timestamp,
    /// The batch's delete horizon, [`NO_TIMESTAMP`] if none.
    horizon: Timestamp,
}

/// Kafka's cleaner `RecordFilter` with `MemoryRecords.filterTo`, per batch.
struct Filter<'a> {
    map: &'a OffsetMap,
    producers: &'a Producers,
    now: Timestamp,
    delete_retention_ms: i64,
}

impl Filter<'_> {
    /// Kafka's `shouldRetainRecord`.
    fn retain_record(&self, info: &BatchInfo, r: &Record<'_>) -> bool {
        if r.offset > self.map.latest_offset() {
            return true;
        }
        let Some(key) = r.key else { return false };
        let latest_for_key = self.map.get(key).is_none_or(|found| r.offset >= found);
        let retain_deletes = !info.has_delete_horizon || self.now < info.base_timestamp;
        latest_for_key && (r.value.is_some() || retain_deletes)
    }

    /// Filters one batch: `None` when it goes entirely, else what was kept, rewritten into
    /// `out` unless the original stays as it is. Legacy entries are kept unchanged.
    fn batch(
        &self,
        entry: &[u8],
        info: &BatchInfo,
        txn: &mut TxnMetadata,
        out: &mut Vec<u8>,
        stats: &mut CleanStats,
    ) -> std::result::Result<Option<Kept>, crate::format::DecodeError> {
        if info.magic < 2 {
            stats.legacy_copied += 1;
            let horizon = NO_TIMESTAMP;
            return Ok(Some(Kept { original: true, max_timestamp: info.max_timestamp, horizon }));
        }
        let can_discard =
            if info.is_control { txn.on_control_batch(info, entry) } else { txn.on_batch(info) };
        let discard_records = if info.is_control {
            can_discard && info.has_delete_horizon && info.base_timestamp <= self.now
        } else {
            can_discard
        };
        let marker_for_empty_txn = can_discard && info.is_control;
        let retain_empty = self.producers.is_last_of_producer(info, self.now);
        // `LogSegment::read` checked the CRC.
        let batch = decode_batch_unverified(entry)?;
        let mut kept: Vec<Record<'_>> = Vec::new();
        let mut all = true;
        let mut tombstones = false;
        for r in batch.records() {
            let r = r?;
            stats.records_read += 1;
            let retain = !discard_records && (info.is_control || self.retain_record(info, &r));
            if retain {
                tombstones |= r.value.is_none();
                kept.push(r);
            } else {
                all = false;
            }
        }
        stats.records_kept += kept.len() as u64;
        let old_horizon = if info.has_delete_horizon { info.base_timestamp } else { NO_TIMESTAMP };
        if kept.is_empty() {
            if retain_empty {
                // A producer's last batch (or one emptied before) stays as its header.
                if info.records_count == 0 {
                    return Ok(Some(Kept {
                        original: true,
                        max_timestamp: info.max_timestamp,
                        horizon: NO_TIMESTAMP,
                    }));
                }
                encode_empty_batch(out, info)?;
                return Ok(Some(Kept {
                    original: false,
                    max_timestamp: info.max_timestamp,
                    horizon: NO_TIMESTAMP,
                }));
            }
            return Ok(None);
        }
        let set_horizon = (tombstones || marker_for_empty_txn) && !info.has_delete_horizon;
        // The horizon that matters for a later pass: one still to come over something it
        // will remove (tombstones, a marker).
        let pending = |h: Timestamp| {
            if (tombstones || info.is_control) && h > self.now { h } else { NO_TIMESTAMP }
        };
        if all && !set_horizon {
            return Ok(Some(Kept {
                original: true,
                max_timestamp: info.max_timestamp,
                horizon: pending(old_horizon),
            }));
        }
        let horizon = if set_horizon {
            Some(self.now.saturating_add(self.delete_retention_ms))
        } else {
            info.has_delete_horizon.then_some(info.base_timestamp)
        };
        encode_retained_batch(out, info, &kept, horizon)?;
        let max_timestamp = parse_batch_info(out)?.max_timestamp;
        Ok(Some(Kept {
            original: false,
            max_timestamp,
            horizon: pending(horizon.unwrap_or(NO_TIMESTAMP)),
        }))
    }
}

/// Kafka's `cleanableOffsets` and the decision whether to clean now.
fn plan(
    log: &Log,
    settings: &CleanerSettings,
    checkpoint: Option<Offset>,
    opts: &CleanOptions<'_>,
) -> Result<Option<Plan>> {
    let segments = log.segment_list();
    let Some(active) = segments.last() else { return Ok(None) };
    if segments.len() < 2 {
        return Ok(None);
    }
    let log_start = log.log_start_offset();
    let log_end = log.log_end_offset();
    let first_dirty = match checkpoint {
        Some(c) if c >= log_start && c <= log_end => c,
        _ => log_start,
    };
    // Decided first with the active segment as the bound (sizes and timestamps only); the
    // header scan for producers and open transactions only runs for a log that is due.
    let Some(bound) = due_up_to(log, settings, &segments, first_dirty, active.base_offset(), opts)?
    else {
        return Ok(None);
    };
    let producers = scan_producers(&segments, &|| opts.aborted())?;
    let lso = producers.last_stable_offset(log_end);
    let first_uncleanable = if lso < bound {
        // An open transaction cuts the dirty section: decided again with it.
        match due_up_to(log, settings, &segments, first_dirty, lso, opts)? {
            Some(b) => b,
            None => return Ok(None),
        }
    } else {
        bound
    };
    Ok(Some(Plan { segments, first_dirty, first_uncleanable, producers }))
}

/// Whether `log` is due for a pass with the dirty section `[first_dirty, bound)` cut by
/// `min.compaction.lag.ms`: the first uncleanable offset so far when it is.
fn due_up_to(
    log: &Log,
    settings: &CleanerSettings,
    segments: &[Arc<LogSegment>],
    first_dirty: Offset,
    bound: Offset,
    opts: &CleanOptions<'_>,
) -> Result<Option<Offset>> {
    let log_end = log.log_end_offset();
    let sealed = segments.len().saturating_sub(1);
    let mut first_uncleanable = bound;
    if settings.min_compaction_lag_ms > 0 {
        let limit = opts.now.saturating_sub(settings.min_compaction_lag_ms);
        for (i, seg) in segments.iter().enumerate().take(sealed) {
            let ends_before_dirty =
                segments.get(i + 1).is_some_and(|n| n.base_offset() <= first_dirty);
            if ends_before_dirty {
                continue;
            }
            if seg.largest_timestamp()? > limit {
                first_uncleanable = first_uncleanable.min(seg.base_offset().max(first_dirty));
                break;
            }
        }
    }
    let first_uncleanable = first_uncleanable.max(first_dirty);
    let (mut clean_bytes, mut dirty_bytes) = (0u64, 0u64);
    let mut first_dirty_segment = None;
    for (i, seg) in segments.iter().enumerate().take(sealed) {
        let end = segments.get(i + 1).map_or(log_end, |n| n.base_offset());
        if seg.base_offset() < first_dirty {
            clean_bytes += seg.size();
        }
        if end > first_dirty && seg.base_offset() < first_uncleanable {
            dirty_bytes += seg.size();
            first_dirty_segment.get_or_insert_with(|| Arc::clone(seg));
        }
    }
    let total = clean_bytes + dirty_bytes;
    let ratio = if total == 0 { 0.0 } else { dirty_bytes as f64 / total as f64 };
    let has_dirty = first_dirty < first_uncleanable && dirty_bytes > 0;
    let mut overdue = false;
    if settings.max_compaction_lag_ms > 0
        && settings.max_compaction_lag_ms < i64::MAX
        && let Some(seg) = &first_dirty_segment
    {
        let (heads, _) = seg.read_heads(Position(0), 1)?;
        if let Some(h) = heads.first()
            && h.info.max_timestamp >= 0
        {
            overdue =
                opts.now.saturating_sub(h.info.max_timestamp) > settings.max_compaction_lag_ms;
        }
    }
    let horizon = log.latest_delete_horizon();
    let horizon_due = horizon != NO_TIMESTAMP && horizon <= opts.now;
    let due =
        (has_dirty && (ratio >= settings.min_cleanable_dirty_ratio || overdue)) || horizon_due;
    log::debug!(
        "{}: cleaner plan: dirty {first_dirty}..{first_uncleanable}, ratio {ratio:.3}, overdue \
         {overdue}, horizon due {horizon_due}: {}",
        log.dir().display(),
        if due { "clean" } else { "skip" }
    );
    Ok(due.then_some(first_uncleanable))
}

fn index_file_len(seg: &LogSegment, kind: &str) -> u64 {
    std::fs::metadata(seg.file_path(kind)).map_or(0, |m| m.len())
}

/// Kafka's `groupSegmentsBySize`: consecutive segments whose total log bytes stay within
/// `segment.bytes`, each index's total bytes within `segment.index.bytes`, and whose offsets
/// span at most `i32::MAX` from the group's base offset.
fn group_by_size(
    segments: &[Arc<LogSegment>],
    settings: &CleanerSettings,
    first_uncleanable: Offset,
) -> Result<Vec<Vec<Arc<LogSegment>>>> {
    let mut groups = Vec::new();
    let mut i = 0;
    while let Some(first) = segments.get(i) {
        let mut group = vec![Arc::clone(first)];
        let mut log_size = first.size();
        let mut index_size = index_file_len(first, ".index");
        let mut time_size = index_file_len(first, ".timeindex");
        i += 1;
        while let Some(next) = segments.get(i) {
            let last_offset = match segments.get(i + 1) {
                Some(after) => Offset(after.base_offset().0 - 1),
                None => Offset(first_uncleanable.0 - 1),
            };
            let (idx, time) = (index_file_len(next, ".index"), index_file_len(next, ".timeindex"));
            let fits = log_size + next.size() <= settings.segment_bytes
                && index_size + idx <= u64::from(settings.segment_index_bytes)
                && time_size + time <= u64::from(settings.segment_index_bytes)
                && (next.size() == 0
                    || last_offset.0 - first.base_offset().0 <= i64::from(i32::MAX));
            if !fits {
                break;
            }
            log_size += next.size();
            index_size += idx;
            time_size += time;
            group.push(Arc::clone(next));
            i += 1;
        }
        groups.push(group);
    }
    Ok(groups)
}

/// Removes the `.cleaned` files of the output `base` (an abandoned output).
fn remove_cleaned(dir: &Path, base: Offset) {
    for kind in KINDS {
        let path = file_path(dir, base, kind, CLEANED);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("{}: not removed: {e}", path.display()),
        }
    }
}

fn rename(from: &Path, to: &Path) -> Result<bool> {
    match std::fs::rename(from, to) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(from, "rename", e)),
    }
}

/// Kafka's `replaceSegments` for one output: under the append lock, checks the inputs are
/// unchanged, renames the output `.cleaned` → `.swap`, the inputs → `.deleted`, the output
/// `.swap` → final, installs it, then removes the `.deleted` files.
fn swap_in(
    log: &Log,
    inputs: &[Arc<LogSegment>],
    base: Offset,
    crash_at: Option<CrashStep>,
) -> Result<SwapDone> {
    let dir = log.dir();
    let _guard = log.cleaner_lock();
    let current = log.segment_list();
    let unchanged =
        inputs.iter().all(|seg| current.iter().any(|c| Arc::ptr_eq(c, seg)) && !seg.is_active());
    if !unchanged {
        remove_cleaned(dir, base);
        return Ok(SwapDone::Changed);
    }
    // Readers holding an input keep reading it after its files are renamed: load its indexes
    // now (a map survives the rename and the removal).
    for seg in inputs {
        seg.with_offset_index(|_| ())?;
        seg.with_time_index(|_| ())?;
    }
    let stop = |step: CrashStep| crash_at == Some(step);
    // 1. `.cleaned` → `.swap`, the `.log` first (Kafka's `changeFileSuffixes` order).
    for kind in KINDS {
        let from = file_path(dir, base, kind, CLEANED);
        rename(&from, &file_path(dir, base, kind, SWAP))?;
        if kind == ".log" && stop(CrashStep::MidSwapRename) {
            return Ok(SwapDone::Stopped(CrashStep::MidSwapRename));
        }
    }
    crate::storage::open::sync_dir(dir)?;
    if stop(CrashStep::SwapRenamed) {
        return Ok(SwapDone::Stopped(CrashStep::SwapRenamed));
    }
    // 2. The inputs → `.deleted` (with the producer snapshots at the base offsets that go).
    let mut deleted = Vec::new();
    for (i, seg) in inputs.iter().enumerate() {
        let b = seg.base_offset();
        let mut kinds: Vec<&str> = KINDS.to_vec();
        if b != base {
            kinds.push(".snapshot");
        }
        for kind in kinds {
            let to = file_path(dir, b, kind, ".deleted");
            if rename(&file_path(dir, b, kind, ""), &to)? {
                deleted.push(to);
            }
        }
        if i == 0 && stop(CrashStep::MidDeleteRename) {
            return Ok(SwapDone::Stopped(CrashStep::MidDeleteRename));
        }
    }
    if stop(CrashStep::OldDeleted) {
        return Ok(SwapDone::Stopped(CrashStep::OldDeleted));
    }
    // 3. `.swap` → final.
    for kind in KINDS {
        rename(&file_path(dir, base, kind, SWAP), &file_path(dir, base, kind, ""))?;
        if kind == ".log" && stop(CrashStep::MidFinalRename) {
            return Ok(SwapDone::Stopped(CrashStep::MidFinalRename));
        }
    }
    crate::storage::open::sync_dir(dir)?;
    let output = Arc::new(log.open_cleaned_segment(base)?);
    log.install_cleaned(inputs, output);
    for path in deleted {
        if let Err(e) = std::fs::remove_file(&path) {
            log::warn!("{}: not removed: {e}", path.display());
        }
    }
    Ok(SwapDone::Done)
}

/// The entries of `cleaner-offset-checkpoint` in `data_dir`: `(topic, partition)` → the
/// offset the log is cleaned up to. An absent file is empty; a damaged one is logged and
/// treated as empty (Kafka: every log then starts dirty at its log start).
pub fn read_checkpoint(data_dir: &Path) -> BTreeMap<(String, u32), Offset> {
    let path = data_dir.join(CHECKPOINT_FILE);
    let text = match crate::storage::open::read_regular_to_string(&path) {
        Ok(t) => t,
        Err(e) if crate::storage::open::is_not_found(&e) => return BTreeMap::new(),
        Err(e) => {
            log::warn!("{e}; every compacted log is taken as dirty from its log start");
            return BTreeMap::new();
        }
    };
    match parse_offset_checkpoint(&text) {
        Ok(entries) => entries.into_iter().map(|(t, p, o)| ((t, p), Offset(o))).collect(),
        Err(e) => {
            log::warn!(
                "{}: damaged at byte {}: {e}; every compacted log is taken as dirty from its \
                 log start",
                path.display(),
                e.at
            );
            BTreeMap::new()
        }
    }
}

/// Writes `cleaner-offset-checkpoint` in `data_dir` (temporary file, fsync, rename, fsync of
/// the directory).
pub fn write_checkpoint(data_dir: &Path, entries: &BTreeMap<(String, u32), Offset>) -> Result<()> {
    let list: Vec<(String, u32, i64)> =
        entries.iter().map(|((t, p), o)| (t.clone(), *p, o.0)).collect();
    let path = data_dir.join(CHECKPOINT_FILE);
    let tmp = data_dir.join(format!("{CHECKPOINT_FILE}.tmp"));
    {
        use std::io::Write;
        let mut f = crate::storage::open::open_regular(
            &tmp,
            std::fs::OpenOptions::new().write(true).create(true).truncate(true),
            "create",
        )?;
        f.write_all(format_offset_checkpoint(&list).as_bytes())
            .map_err(|e| Error::io(&tmp, "write", e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, "fsync", e))?;
    }
    std::fs::rename(&tmp, &path).map_err(|e| Error::io(&tmp, "rename", e))?;
    crate::storage::open::sync_dir(data_dir)
}

/// One pass of the cleaner over every log of a writable data dir (`data_dir`, its `logs`):
/// each log whose topic `settings_for` gives settings for is cleaned if due, and
/// `cleaner-offset-checkpoint` is rewritten after each log cleaned. Errors of one log are
/// logged and the others still cleaned. Returns the number of logs cleaned.
pub fn clean_logs(
    data_dir: &Path,
    logs: &[Arc<Log>],
    cleaner: &mut Cleaner,
    settings_for: &dyn Fn(&str) -> Option<CleanerSettings>,
    opts: &CleanOptions<'_>,
) -> usize {
    let mut checkpoint = read_checkpoint(data_dir);
    let mut cleaned = 0;
    for log in logs {
        if opts.aborted() {
            break;
        }
        let Some(settings) = settings_for(log.topic()) else { continue };
        let key = (log.topic().to_string(), log.partition());
        match cleaner.clean(log, &settings, checkpoint.get(&key).copied(), opts) {
            Ok(Some(stats)) if stats.stopped_at.is_none() => {
                cleaned += 1;
                checkpoint.insert(key, stats.end_offset);
                if let Err(e) = write_checkpoint(data_dir, &checkpoint) {
                    log::log!(e.log_level(), "cleaner: {e}");
                }
            }
            Ok(_) => {}
            Err(e) => log::log!(e.log_level(), "cleaner: {}: {e}", log.dir().display()),
        }
    }
    cleaned
}

#[cfg(test)]
mod tests;
