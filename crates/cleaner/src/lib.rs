//! The log cleaner: Kafka's `LogCleaner` for topics with `cleanup.policy` `compact` (or
//! `compact,delete`), writing the files a broker's cleaner writes. A client of the storage
//! engine: it reads segments through `topicfs_storage` and changes a log only through the
//! engine's rewrite hooks (`topicfs_storage::log::Log::cleaner_lock`,
//! `open_cleaned_segment`, `install_cleaned`, `set_latest_delete_horizon`); which topics it
//! cleans and how comes from their resolved settings ([`CleanerSettings::for_topic`]).
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
//! its offset in the output ([`topicfs_storage::segment::LogSegment::generation`]), and such a
//! cursor is no longer held ([`topicfs_source::PartitionSource::holds`]), as after retention.

mod checkpoint;
mod filter;
pub mod offset_map;
mod output;
mod plan;
mod swap;
pub mod txn;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use topicfs_format::checkpoint::{format_offset_checkpoint, parse_offset_checkpoint};
use topicfs_format::{
    BatchInfo, NO_TIMESTAMP, Offset, Position, Record, Timestamp, decode_batch_unverified,
    encode_empty_batch, encode_retained_batch, parse_batch_info, peek_entry,
};
use topicfs_source::error::{Error, Result};
use topicfs_storage::log::Log;
use topicfs_storage::segment::LogSegment;

use self::offset_map::OffsetMap;
use self::output::{CLEANED, CleanedSegment, KINDS, SWAP, file_path};
use self::txn::{Producers, TxnMetadata, scan_producers};

pub use self::checkpoint::{read_checkpoint, write_checkpoint};
use self::filter::Filter;
use self::plan::{group_by_size, plan};
use self::swap::{SwapDone, remove_cleaned, swap_in};

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
    /// How `topic`'s log is cleaned now, from its settings as resolved
    /// ([`topicfs_settings::topic_config::Resolved`]): `None` when they are unknown (nothing is
    /// compacted on guessed settings) or its `cleanup.policy` does not contain `compact`.
    pub fn for_topic(
        resolved: &topicfs_settings::topic_config::Resolved,
        dedupe_buffer_bytes: usize,
    ) -> Option<CleanerSettings> {
        if !resolved.known {
            return None;
        }
        CleanerSettings::from_log_config(&resolved.config, dedupe_buffer_bytes)
    }

    /// How a log with `config` is cleaned: `None` when its `cleanup.policy` does not contain
    /// `compact` (the cleaner leaves it alone), the topic-level settings otherwise, with the
    /// mount's `log.cleaner.dedupe.buffer.size`.
    pub fn from_log_config(
        config: &topicfs_settings::config::LogConfig,
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
                    let bad = |e: topicfs_format::DecodeError| {
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
