//! The narrow interface between the filesystem and whatever holds the partitions.
//!
//! The filesystem never opens a segment file itself: it asks a [`TopicSource`] for topics and
//! partitions, and a [`PartitionSource`] for offsets, whole batches as stored, and appends. Today
//! [`crate::storage`] implements both over a Kafka log directory; a live Kafka cluster (Fetch,
//! ListOffsets, Produce) can implement them later without touching `view` or `fs`.
//!
//! Batches cross this interface as stored bytes (a v2 batch, or a legacy v0/v1 message set
//! entry), so the same rendering code serves local files and a network fetch response.

use std::sync::Arc;
use std::time::SystemTime;

use crate::error::Result;
use crate::format::{NewRecord, Offset, Position, RecordRef, Timestamp};

/// Which offset a ListOffsets-style query asks for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OffsetQuery {
    /// Kafka's `-1`: the log end offset.
    Latest,
    /// Kafka's `-2`: the log start offset.
    Earliest,
    /// Kafka's `-3`: the first record carrying the partition's max timestamp (KIP-734,
    /// KAFKA-16310); the log end offset for a partition without timestamps.
    MaxTimestamp,
    /// The first record (in log order) whose timestamp is >= the target; the log end offset
    /// when no record is that new (never "not found").
    Timestamp(Timestamp),
}

/// Facts about a partition at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionSummary {
    pub log_start_offset: Offset,
    pub log_end_offset: Offset,
    pub segment_count: usize,
    /// Sum of the `.log` file sizes.
    pub size_bytes: u64,
    /// Timestamp of the first record at or after the log start offset, if any.
    pub first_timestamp: Option<Timestamp>,
    /// Largest record timestamp in the partition, if any.
    pub max_timestamp: Option<Timestamp>,
    /// When the partition last changed (last append, roll or deletion).
    pub last_modified: SystemTime,
}

/// One segment as listed under `segments/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentSummary {
    pub base_offset: Offset,
    /// Size of the `.log` file in bytes.
    pub log_size: u64,
    /// Current sizes of the index files (0 when the file does not exist).
    pub index_size: u64,
    pub time_index_size: u64,
    /// `None` when the segment has no `.txnindex`.
    pub txn_index_size: Option<u64>,
    /// Largest timestamp in the segment, if known.
    pub max_timestamp: Option<Timestamp>,
    /// Whether this is the active (last, appendable) segment.
    pub is_active: bool,
    pub last_modified: SystemTime,
}

/// The files of one segment.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SegmentFileKind {
    Log,
    Index,
    TimeIndex,
    TxnIndex,
}

impl SegmentFileKind {
    /// The file name suffix, with the dot (`.log`, `.index`, `.timeindex`, `.txnindex`).
    pub fn suffix(self) -> &'static str {
        match self {
            SegmentFileKind::Log => ".log",
            SegmentFileKind::Index => ".index",
            SegmentFileKind::TimeIndex => ".timeindex",
            SegmentFileKind::TxnIndex => ".txnindex",
        }
    }
}

/// Where a sequential read continues: a batch boundary in one segment.
///
/// **Invariant**: `position` is the position of a batch start in the segment whose base offset
/// is `segment_base` (or that segment's end), and every batch before it holds only offsets below
/// `next_offset`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReadCursor {
    pub segment_base: Offset,
    pub position: Position,
    /// The offset the next batch is expected to hold (a lower bound, offsets may have gaps).
    pub next_offset: Offset,
}

/// Whole batches as stored, read from a cursor.
#[derive(Clone, Debug, Default)]
pub struct BatchChunk {
    /// Concatenated whole batches (possibly empty when the cursor is at the current end).
    pub bytes: Vec<u8>,
    /// Cursor after the last batch in `bytes`.
    pub next: Option<ReadCursor>,
    /// Every batch in `bytes` passed its CRC check when it was read, so a reader that decodes
    /// them need not check again. `false` promises nothing (the batches are checked by whoever
    /// decodes them).
    pub crc_checked: bool,
}

/// What an append wrote.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: Offset,
    pub last_offset: Offset,
    /// Number of batches the records were written as.
    pub batches: usize,
}

/// An aborted transaction, as recorded in `.txnindex` (Kafka's `AbortedTxn`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: Offset,
    pub last_offset: Offset,
    pub last_stable_offset: Offset,
}

/// One partition: offsets, batches as stored, appends.
pub trait PartitionSource: Send + Sync {
    /// Topic name.
    fn topic(&self) -> &str;
    /// Partition number.
    fn partition(&self) -> u32;
    /// Offsets, sizes and timestamps now.
    fn summary(&self) -> Result<PartitionSummary>;
    /// Segments in base-offset order.
    fn segments(&self) -> Result<Vec<SegmentSummary>>;
    /// The segment whose base offset is `base_offset`, if any (what [`Self::segments`] lists
    /// for it). The default looks through `segments()`.
    fn segment_summary(&self, base_offset: Offset) -> Result<Option<SegmentSummary>> {
        Ok(self.segments()?.into_iter().find(|s| s.base_offset == base_offset))
    }
    /// ListOffsets semantics; see [`OffsetQuery`]. Never "not found".
    fn offset_for(&self, query: OffsetQuery) -> Result<Offset>;
    /// Cursor at the first batch whose last offset is >= `target` (floor segment, floor index
    /// entry, forward scan). `target` equal to the log end offset gives a cursor at the end.
    /// Errors with `OffsetOutOfRange` below the log start offset or past the log end offset.
    fn seek(&self, target: Offset) -> Result<ReadCursor>;
    /// Whole batches from `cursor`, at most `max_bytes` unless the first batch alone is larger
    /// (then exactly that batch). Empty when the cursor is at the current end. Moves to the next
    /// segment when one is exhausted. Never returns part of a batch. A batch that fails its CRC
    /// check is an error (see [`BatchChunk::crc_checked`] for sources that check).
    fn read(&self, cursor: &ReadCursor, max_bytes: usize) -> Result<BatchChunk>;
    /// Aborted transactions overlapping `[from, to)` (for read-committed views).
    fn aborted_transactions(&self, from: Offset, to: Offset) -> Result<Vec<AbortedTxn>>;
    /// Appends records as one batch (several only when one would exceed `max.message.bytes`);
    /// visible to readers when this returns. Refuses the whole call, writing nothing, if any
    /// single record cannot fit in a batch.
    fn append(&self, records: &[NewRecord]) -> Result<AppendInfo>;
    /// [`PartitionSource::append`] of borrowed records (the lines of one `write()`, without a
    /// copy each). The default copies them into [`NewRecord`]s.
    fn append_refs(&self, records: &[RecordRef<'_>]) -> Result<AppendInfo> {
        let owned: Vec<NewRecord> = records.iter().map(RecordRef::to_new_record).collect();
        self.append(&owned)
    }
    /// Makes everything appended so far durable (fsync of the log and its indexes).
    fn sync(&self) -> Result<()>;
    /// Reads the raw bytes of one segment file at `pos` (the preallocated zero tail of an active
    /// index is not shown: the file ends at its last valid entry).
    fn read_segment_file(
        &self,
        base_offset: Offset,
        kind: SegmentFileKind,
        pos: u64,
        buf: &mut [u8],
    ) -> Result<usize>;
    /// An open handle on one file of a sealed (not active) segment, when its bytes on disk are
    /// exactly what [`PartitionSource::read_segment_file`] returns and will not change: the
    /// mount hands it to the kernel, which then reads it without asking (FUSE passthrough).
    /// `None` for the active segment, for a file whose on-disk size differs from the size shown
    /// (an index left untrimmed by a crash), and for sources without local files (the default).
    fn sealed_segment_file(
        &self,
        _base_offset: Offset,
        _kind: SegmentFileKind,
    ) -> Result<Option<std::fs::File>> {
        Ok(None)
    }
    /// Files of segment `base_offset` whose bytes on disk the source found damaged and serves
    /// repaired instead (an index rebuilt in memory from the `.log` on a read-only mount), as
    /// (file, byte position of the damage on disk, what is wrong there). Empty by default.
    fn repaired_segment_files(
        &self,
        _base_offset: Offset,
    ) -> Result<Vec<(SegmentFileKind, u64, String)>> {
        Ok(Vec::new())
    }
}

/// A set of topics made of partitions.
pub trait TopicSource: Send + Sync {
    /// Topic names, sorted.
    fn topics(&self) -> Result<Vec<String>>;
    /// Partition numbers of a topic, sorted. `NotFound` for an unknown topic.
    fn partitions(&self, topic: &str) -> Result<Vec<u32>>;
    /// One partition. `NotFound` if it does not exist.
    fn partition(&self, topic: &str, partition: u32) -> Result<Arc<dyn PartitionSource>>;
    /// Creates a topic with partitions `0..partitions`. `AlreadyExists`, `InvalidTopicName`.
    fn create_topic(&self, topic: &str, partitions: u32) -> Result<()>;
    /// Adds partition `partition` to an existing topic; only the next number is allowed.
    fn create_partition(&self, topic: &str, partition: u32) -> Result<()>;
    /// Whether appends and creations are refused.
    fn is_read_only(&self) -> bool;
    /// Flushes and closes everything cleanly (indexes trimmed, checkpoints, clean-shutdown
    /// marker). Idempotent.
    fn shutdown(&self) -> Result<()>;
    /// Space on the storage that holds the topics (what `df` shows for a mount of them). All
    /// zero when unknown (the default).
    fn space(&self) -> Result<SpaceStats> {
        Ok(SpaceStats::default())
    }
}

/// Capacity and free space of the storage behind a [`TopicSource`], in `statvfs` terms.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SpaceStats {
    /// Preferred I/O block size.
    pub block_size: u32,
    /// The unit of the block counts below.
    pub fragment_size: u32,
    pub blocks: u64,
    pub blocks_free: u64,
    /// Free blocks available to unprivileged users.
    pub blocks_available: u64,
    pub files: u64,
    pub files_free: u64,
}
