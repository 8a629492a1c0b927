//! One partition: Kafka's `UnifiedLog` / `LocalLog` over a `<topic>-<partition>` directory.
//!
//! A log is a sequence of segments keyed by base offset; the last one is the *active* segment,
//! the only one appended to. The **log start offset** is the first offset readers may see (at
//! or above the first segment's base offset); the **log end offset** is the offset the next
//! appended record gets.
//!
//! **State by job.** As Kafka splits `UnifiedLog` into `LocalLog`, `LogSegments` and
//! `ProducerStateManager`, a [`Log`]'s state is grouped by job, each group with its own lock or
//! none, its invariants stated where it is defined:
//! - the segment map (`segments.rs`, Kafka's `LogSegments`): the segments, the version that
//!   counts their changes and the values derived from them, one read-write lock; every change
//!   goes through its methods, which bump the version;
//! - the offsets (`offsets.rs`): log start, log end and recovery point, atomics;
//! - the writer's state (`state.rs`, `Writer`), behind the **append lock**: closed or not, the
//!   roll jitter, and the producer state the next roll's `.snapshot` holds;
//! - the topic's settings, the directory's listing and the cleaner's marks (`state.rs`);
//! - the sync lock, the last-modified time, the first timestamp's memo, the key indexes
//!   ([`super::key_index`]) and the segment cache's side (`summaries.rs`).
//!
//! **Concurrency and lock order.** Readers (`seek`, `read`, `offset_for`, `summary`) take the
//! segment map's read lock only long enough to clone `Arc`s of the segments they need (or to
//! compute a value kept for the map's version), then work on the segments (whose committed
//! sizes and index locks keep them consistent, see [`super::segment`]). One writer at a time
//! holds the append lock for an append, roll, retention pass, cleaner swap or close. The order:
//! the first timestamp's memo (taken by `summary` with nothing held) → the append lock → the
//! segment map (write only to change it; read) → a memo of the map → a segment's locks.
//! `sync` takes only the sync lock, then the map's read lock, and never blocks readers. The
//! settings', listing's and last-modified locks are leaves: nothing is taken under them. The
//! log end offset is published after the batch bytes and their segment size, so a reader that
//! sees an offset below it always finds the batch.
//!
//! **Where each job lives.** This file: the [`Log`] type, opening and creating a log, its
//! settings, offsets and segment lookups. The rest, one job per file, each an `impl Log` block
//! unless it defines a group of state:
//! - `segments.rs`: the segment map, its version and its memos (`Memo`);
//! - `offsets.rs`: the log start offset, log end offset and recovery point;
//! - `state.rs`: the settings, the writer's state, the listing and the cleaner's marks;
//! - `load.rs`: loading from the directory (segment files, temporary-file passes, recovery
//!   after an unclean shutdown, truncation of what recovery drops);
//! - `append.rs`: appends (batch encoding, offsets) and rolling the active segment;
//! - `read.rs`: [`Log::seek`] and [`Log::read`] by offset, and the engine's cursor
//!   ([`SegmentCursor`]);
//! - `list_offsets.rs`: ListOffsets ([`Log::offset_for`]) and the timestamp lookup
//!   ([`Log::find_offset_by_timestamp`], `TimeSearch`);
//! - `summary.rs`: [`Log::summary`];
//! - `files.rs`: what `segments/` lists, raw segment file bytes and `check`'s file problems;
//! - `refresh.rs`: read-only mode over a live broker's directory ([`Log::refresh`]);
//! - `retention.rs`: [`Log::delete_old_segments`];
//! - `durability.rs`: [`Log::sync`] and [`Log::close`];
//! - `cleaning.rs`: the log cleaner's hooks (its lock, installing its output);
//! - `txn.rs`: aborted transactions from `.txnindex` files; producer-state snapshots
//!   (`<offset>.snapshot`), read at segment boundaries and written at each roll.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use topicfs_format::file_name::{FileKind, FileState, parse_segment_file_name};
use topicfs_format::txn_index;
use topicfs_format::{
    BatchSpec, EncodeRecord, NewRecord, Offset, Position, RecordRef, Timestamp, TimestampType,
    decode_batch, parse_batch_info, set_base_offset,
};
use topicfs_source::error::{Error, FileType, Result};
use topicfs_source::sync::lock;
use topicfs_source::{
    AbortedTxn, AppendInfo, BatchChunk, ChunkStart, CursorHint, OffsetQuery, PartitionSummary,
    ReadCursor,
};
use topicfs_source::{FileProblem, SegmentFileKind, SegmentSummary};

use super::scan::read_fully_at;
use super::segment::{LogSegment, SegmentMode, Translated, now_ms, segment_file_path};
use super::swap::{SegmentFiles, next_offset_of_log_file, read_only_segment_files};
use topicfs_settings::config::{LogConfig, MessageTimestampType};

mod append;
mod cleaning;
mod durability;
mod files;
mod list_offsets;
mod load;
mod offsets;
mod read;
mod refresh;
mod retention;
mod segments;
mod state;
mod summaries;
mod summary;
mod txn;

pub(super) use self::files::segment_summary;
use self::load::list_segment_files;
use self::offsets::LogOffsets;
pub(crate) use self::read::SegmentCursor;
use self::segments::{Memo, SegmentMap, SegmentsView};
use self::state::{AppendGuard, CleanerMarks, Listing, Settings, Writer};

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

/// The sizing budget of a log directory's partitions unless `--sizing-budget` says otherwise:
/// 256 MiB of log, rendered (counted, not kept) in about 0.45 s here (scaled from 333 MB sized
/// in 0.56 s, doc/benchmarks-history.md, "cold opens"). A stream whose end
/// is farther shows size 0 until read to its end (SEMANTICS.md, "Sizes: exact or not yet
/// known"). Larger than the interface's [`DEFAULT_SIZING_BUDGET`](topicfs_source::DEFAULT_SIZING_BUDGET)
/// (16 MiB, what a source reached over a network states) because a local partition is cheap to
/// size, and a stream of unknown size makes `tail -n` (and the first step of `tail -f`) read
/// it from its start: measured on 3 M records (333 MB of log), `tail -n 10 by-offset/0` took
/// 0.8 s sized and 10 s unsized.
pub const LOCAL_SIZING_BUDGET: u64 = 256 << 20;

/// One partition's log; see the module doc. Its state is grouped by job, each group behind its
/// own lock or none (the module doc gives the lock order).
#[derive(Debug)]
pub struct Log {
    topic: String,
    partition: u32,
    dir: PathBuf,
    mode: SegmentMode,
    /// The topic's settings as applied here (`state.rs`).
    settings: Settings,
    /// The segment map, its version and what is derived from it (`segments.rs`).
    segments: SegmentMap,
    /// The log start offset, the log end offset and the recovery point (`offsets.rs`).
    offsets: LogOffsets,
    /// The append lock, with what only the writer changes (`state.rs`).
    writer: Mutex<Writer>,
    /// Serializes `sync` calls (separate so readers and appends never wait for the disk).
    sync_lock: Mutex<()>,
    /// When the partition last changed (an append, roll or deletion, a refresh that found
    /// something new). Nothing is taken under its lock.
    last_modified: Mutex<SystemTime>,
    /// The timestamp of the first record at a log start offset, kept for that offset and the
    /// number of cleaner passes installed (a pass may remove the first record).
    first_timestamp: Memo<(Offset, u64), Option<Timestamp>>,
    /// What the directory's listings found, and the read-only refresh clock (`state.rs`).
    listing: Listing,
    /// The key indexes of the segments, built on the first key query
    /// ([`super::key_index`]).
    keys: super::key_index::PartitionKeys,
    /// The segment cache and what this partition knows of its sealed segments' identities
    /// (`log/summaries.rs`).
    summaries: summaries::Summaries,
    /// What the log cleaner left in this log (`state.rs`).
    cleaner: CleanerMarks,
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
            mode,
            settings: Settings::new(config),
            segments: SegmentMap::default(),
            offsets: LogOffsets::default(),
            writer: Mutex::new(Writer::default()),
            sync_lock: Mutex::new(()),
            last_modified: Mutex::new(SystemTime::now()),
            first_timestamp: Memo::default(),
            listing: Listing::new(state),
            keys: super::key_index::PartitionKeys::new(None),
            summaries: summaries::Summaries::default(),
            cleaner: CleanerMarks::default(),
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

    /// Sets what [`Known::sizing_budget`](topicfs_source::Known::sizing_budget)
    /// says for this partition (`--sizing-budget`).
    pub fn set_sizing_budget(&self, bytes: u64) {
        self.settings.set_sizing_budget(bytes);
    }

    /// The partition's key indexes ([`super::key_index`]).
    pub fn keys(&self) -> &super::key_index::PartitionKeys {
        &self.keys
    }

    /// See [`Log::set_sizing_budget`].
    pub fn sizing_budget(&self) -> u64 {
        self.settings.sizing_budget()
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

    /// The configuration now (a snapshot: a change made meanwhile applies to the next call).
    pub fn config(&self) -> Arc<LogConfig> {
        self.settings.config()
    }

    /// Replaces the configuration: the next append, roll and retention pass use it (a segment
    /// already created keeps the index size it was preallocated with).
    pub fn set_config(&self, config: Arc<LogConfig>) {
        self.settings.set_config(config);
    }

    /// Whether the topic's settings are known (see [`Log::set_settings_known`]).
    pub fn settings_known(&self) -> bool {
        self.settings.known()
    }

    /// Sets whether the topic's settings are known: while they are not, retention deletes only
    /// segments below the log start offset (rule 1), never by time or size.
    pub fn set_settings_known(&self, known: bool) {
        self.settings.set_known(known);
    }

    /// First offset readers may see.
    pub fn log_start_offset(&self) -> Offset {
        self.offsets.start()
    }

    /// Offset the next appended record gets.
    pub fn log_end_offset(&self) -> Offset {
        self.offsets.end()
    }

    /// Offset below which everything was fsynced (what `recovery-point-offset-checkpoint` gets).
    pub fn recovery_point(&self) -> Offset {
        self.offsets.recovery_point()
    }

    /// Number of segments recovery re-read when this log was opened.
    pub fn recovered_segments(&self) -> usize {
        self.listing.recovered_segments.load(Ordering::Relaxed)
    }

    /// The segments in base-offset order (a snapshot).
    pub fn segment_list(&self) -> Vec<Arc<LogSegment>> {
        self.segments.list()
    }

    /// The segment whose base offset is `base`, if any.
    pub fn segment(&self, base: Offset) -> Option<Arc<LogSegment>> {
        self.segments.get(base)
    }

    pub(super) fn out_of_range(&self, requested: Offset) -> Error {
        Error::OffsetOutOfRange {
            requested,
            log_start: self.log_start_offset(),
            log_end: self.log_end_offset(),
        }
    }
}
