//! One partition: the [`PartitionSource`] trait and the types of its reads and appends.

use std::time::SystemTime;

use topicfs_format::{NewRecord, Offset, RecordRef};

use crate::cursor::{BatchChunk, BatchHeads, OffsetQuery, PartitionSummary, ReadCursor};
use crate::error::{Error, Result};
use crate::files::SegmentFiles;
use crate::keys::KeyIndex;
use crate::span::SpanStore;

/// [`Known::sizing_budget`] of a source that states none: 16 MiB of log.
pub const DEFAULT_SIZING_BUDGET: u64 = 16 << 20;

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

/// The transaction state a broker recorded at a segment boundary (Kafka's producer-state
/// snapshot and `.txnindex` files): what a `read_committed` scan of every batch below
/// [`BoundaryTxnState::offset`] would have found, so the scan can start there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BoundaryTxnState {
    /// A segment's base offset above the log start offset: the state is that of every batch
    /// below it.
    pub offset: Offset,
    /// The transactions open at `offset`: `(producer id, first offset)`.
    pub open: Vec<(i64, Offset)>,
    /// The aborted transactions whose ABORT marker lies below `offset`.
    pub aborted: Vec<AbortedTxn>,
}

/// How [`PartitionSource::read`] treats damage, and what it returns.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReadMode {
    /// Whole batches ([`ReadAnswer::Batches`]); a batch that fails its CRC check, or bytes that
    /// do not frame one, are an error (see [`BatchChunk::crc_checked`] for sources that check).
    Batches,
    /// Whole batches ([`ReadAnswer::Batches`]) for a reader that must get past damage to what
    /// follows (the streams): a batch that is framed but fails its CRC check is returned
    /// alone, as stored (decoding it then reports the damage), and damage the source can step
    /// over is stepped over and described in [`BatchChunk::skipped`]. A source that cannot step
    /// over anything reads as [`ReadMode::Batches`].
    PastDamage,
    /// The headers of the batches [`ReadMode::PastDamage`] would return, covering about
    /// `max_bytes` of stored batches (at least one batch), without their records: what the
    /// `read_committed` transaction scan needs ([`ReadAnswer::Heads`]). Data batches are not
    /// CRC-checked here (their readers check them); control batches come whole. A source
    /// without a header-only read answers with the whole batches ([`ReadAnswer::Batches`]),
    /// which [`ReadAnswer::into_heads`] turns into heads.
    HeadsPastDamage,
}

/// What [`PartitionSource::read`] returned: whole batches, or (only for
/// [`ReadMode::HeadsPastDamage`]) their headers.
#[derive(Clone, Debug)]
pub enum ReadAnswer {
    Batches(BatchChunk),
    Heads(BatchHeads),
}

impl ReadAnswer {
    /// The whole batches of a read in [`ReadMode::Batches`] or [`ReadMode::PastDamage`].
    /// `Unsupported` for headers, which a source answers only to
    /// [`ReadMode::HeadsPastDamage`].
    pub fn into_chunk(self) -> Result<BatchChunk> {
        match self {
            ReadAnswer::Batches(chunk) => Ok(chunk),
            ReadAnswer::Heads(_) => {
                Err(Error::Unsupported("batch headers where whole batches were asked for"))
            }
        }
    }

    /// The headers of the batches read (of whole batches: [`BatchHeads::of_chunk`]).
    pub fn into_heads(self) -> BatchHeads {
        match self {
            ReadAnswer::Batches(chunk) => BatchHeads::of_chunk(chunk),
            ReadAnswer::Heads(heads) => heads,
        }
    }
}

/// Records for [`PartitionSource::append`], in the shape the caller holds them.
#[derive(Copy, Clone, Debug)]
pub enum Records<'a> {
    /// Records the caller built.
    Owned(&'a [NewRecord]),
    /// Borrowed records (the lines of one `write()`, without a copy each).
    Borrowed(&'a [RecordRef<'a>]),
    /// A record of `head` (when given) and one record per `\n`-terminated line of `lines` (its
    /// value the line without the `\n`; no key, no headers). Bytes after the last `\n` are not
    /// appended. A local log encodes them straight from `lines`; another source may borrow
    /// each line ([`topicfs_format::value_line_records`]).
    ValueLines { head: Option<&'a [u8]>, lines: &'a [u8] },
}

/// What a source knows of its partition without I/O or a request ([`PartitionSource::known`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Known {
    /// The log start and end offsets this source last stated (a cluster: in a summary or with
    /// a read, every Fetch answer states them; a writable local log: its own, which only its
    /// appends and retention change). The end is a lower bound of the log end now, never below
    /// a batch a read returned: a read that renders past its index's frontier learns up to it,
    /// and bytes a read rendered a moment ago are served while the start is not past them,
    /// without a request per read. `None`: ask [`PartitionSource::summary`].
    pub bounds: Option<(Offset, Offset)>,
    /// When the partition last changed, when known without I/O (a cluster: the time asked, the
    /// protocol does not say; a writable local log: its last append, roll or deletion), so
    /// that a directory's attributes cost no request per partition (a topic of 100 partitions
    /// would cost 200 ListOffsets per `stat`). `None`: [`PartitionSummary::last_modified`].
    pub last_modified: Option<SystemTime>,
    /// How many times stored records were rewritten in place without moving the log start (a
    /// local log: the log cleaner's passes that replaced segments); it only grows. A cursor
    /// made before it changed may point at records no longer stored as they were
    /// ([`PartitionSource::holds`] says which), and a read from it finds the place again by
    /// offset: the view drops what it learned there (`view::render_index`, "Compaction").
    /// Checked at every window a stream renders. 0 for a source whose stored records never
    /// change (a cluster: its broker's compaction is not seen).
    pub rewrites: u64,
    /// Log bytes a cheap sizing of a stream may read ([`DEFAULT_SIZING_BUDGET`] unless the
    /// source says otherwise): `stat` and `open` of a stream render at most this much of the
    /// log, from where the last sizing stopped, towards the end; a stream whose end that does
    /// not reach shows a size not yet known. A local log states what a read of its pages costs,
    /// a cluster about one Fetch response. Never zero in effect (a source stating 0 still lets
    /// a sizing read one batch).
    pub sizing_budget: u64,
}

/// The transaction state a source recorded at segment boundaries (a local log's producer-state
/// snapshots and `.txnindex` files), reached by [`PartitionSource::committed`].
pub trait TxnBoundary: Send + Sync {
    /// The transaction state recorded at the newest segment boundary that has one (see
    /// [`BoundaryTxnState`]), for a `read_committed` scan to start from instead of the log
    /// start; `None` when no boundary has one.
    fn state_at_boundary(&self) -> Result<Option<BoundaryTxnState>>;
}

/// How a `read_committed` reader of a source learns which records are committed
/// ([`PartitionSource::committed`]).
#[derive(Copy, Clone)]
pub enum Committed<'a> {
    /// The source applies `read_committed` itself: [`PartitionSource::read`] returns no batch
    /// of an aborted transaction and nothing at or past the last stable offset, and the log
    /// end offset it states (summary, `Latest`, `seek`) is the last stable offset. A cluster
    /// does so with Kafka's Fetch at isolation level 1, filtered per response as the Java
    /// consumer does, so the view keeps no transaction scan of its own for such a partition.
    BySource,
    /// The view decides from the batches (`view::txn`), its scan starting at the state the
    /// source's [`TxnBoundary`] recorded when it has one, else at the log start.
    ByView(Option<&'a dyn TxnBoundary>),
}

impl std::fmt::Debug for Committed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Committed::BySource => f.write_str("BySource"),
            Committed::ByView(b) => write!(f, "ByView(boundary: {})", b.is_some()),
        }
    }
}

/// One partition: offsets, batches as stored, appends. Nothing here assumes files: a live
/// cluster implements it with ListOffsets, Fetch and Produce.
///
/// **Shape.** 14 methods, every one required and answered by every backend (no default: a
/// decorator such as `view::txn::CommittedPartition` must say what it does with each, it
/// cannot drop one silently). One read with a [`ReadMode`], one append of [`Records`], the
/// bounds as asked ([`summary`](Self::summary)) and as known without asking
/// ([`known`](Self::known): stated bounds, last change, rewrites, sizing budget), lookups by
/// offset and time ([`offset_for`](Self::offset_for), [`seek`](Self::seek),
/// [`holds`](Self::holds)), [`sync`](Self::sync), and capability accessors for what only some
/// sources have: [`span_store`](Self::span_store) (where what is learned about spans of the
/// log persists, [`SpanStore`]), [`segment_files`](Self::segment_files) (which also places
/// damaged bytes in files, [`SegmentFiles::byte_location`]), [`key_index`](Self::key_index),
/// and [`committed`](Self::committed) (who applies `read_committed`, and the [`TxnBoundary`]
/// state a scan can start from).
///
/// Where what used to be separate methods went: the damage-tolerant and header-only reads are
/// [`ReadMode`]s; the three appends are [`Records`] shapes (a local log keeps its fast path
/// for value lines); the stated bounds, the last change, the rewrite count and the sizing
/// budget are fields of [`Known`]; whether a source reads committed and its boundary state
/// are [`Committed`]; where a damaged byte lies is [`SegmentFiles::byte_location`] (only
/// files have positions). `holds` stays a method: both backends answer it, a local log by the
/// cursor's segment and generation, a cluster by the log start. `last_modified` and
/// `byte_location` are inherent helpers on `dyn PartitionSource` built from these, not
/// methods a source implements. The five span methods that had defaults (`sealed_span_at` ...
/// `update_prefix_summary`) are the one accessor [`span_store`](Self::span_store).
pub trait PartitionSource: Send + Sync {
    /// Topic name.
    fn topic(&self) -> &str;
    /// Partition number.
    fn partition(&self) -> u32;
    /// Offsets, sizes and timestamps now.
    fn summary(&self) -> Result<PartitionSummary>;
    /// What the source knows without I/O or a request (see [`Known`]). Cheap: called at every
    /// window a stream renders.
    fn known(&self) -> Known;
    /// ListOffsets semantics; see [`OffsetQuery`]. Never "not found".
    fn offset_for(&self, query: OffsetQuery) -> Result<Offset>;
    /// Cursor at the first batch whose last offset is >= `target`. `target` equal to the log
    /// end offset gives a cursor at the end. Errors with `OffsetOutOfRange` below the log start
    /// offset or past the log end offset.
    fn seek(&self, target: Offset) -> Result<ReadCursor>;
    /// Whether the batches at and after `cursor` are still stored: retention has not deleted
    /// (nor the cleaner replaced) the place the cursor points at. For a cursor without a
    /// source's hint: its offset bound is at or above the log start offset.
    fn holds(&self, cursor: &ReadCursor) -> Result<bool>;
    /// Whole batches (or their headers, see [`ReadMode`]) from `cursor` (one this source made,
    /// or [`ReadCursor::at`] an offset), at most `max_bytes` unless the first batch alone is
    /// larger (then exactly that batch). Empty when the cursor is at the current end. Never
    /// returns part of a batch.
    fn read(&self, cursor: &ReadCursor, max_bytes: usize, mode: ReadMode) -> Result<ReadAnswer>;
    /// Appends records as one batch (several only when one would exceed `max.message.bytes`);
    /// visible to readers when this returns. Refuses the whole call, writing nothing, if any
    /// single record cannot fit in a batch.
    fn append(&self, records: Records<'_>) -> Result<AppendInfo>;
    /// Makes everything appended so far durable (fsync of the log and its indexes).
    fn sync(&self) -> Result<()>;
    /// Where what is learned about spans of the log persists across remounts, for a source
    /// that keeps it (the log engine: its segment cache); `None` for one that does not (every
    /// span is then learned again by each mount).
    fn span_store(&self) -> Option<&dyn SpanStore>;
    /// The partition's segment files, for a source that has local ones (`segments/`, the
    /// inspection files, passthrough): the only way to them. `None` for a source without
    /// files, whose tree then has none of those entries.
    fn segment_files(&self) -> Option<&dyn SegmentFiles>;
    /// The partition's records by key, for a source that indexes them (the log engine). `None`:
    /// no `by-key/`, `latest/` or `keys` in its tree.
    fn key_index(&self) -> Option<&dyn KeyIndex>;
    /// Who applies `read_committed` for this partition, and the transaction state a scan of
    /// the view can start from (see [`Committed`]).
    fn committed(&self) -> Committed<'_>;
}

impl dyn PartitionSource + '_ {
    /// When the partition last changed (the mtime of its directories and files):
    /// [`Known::last_modified`] when the source knows it without I/O, else
    /// [`PartitionSummary::last_modified`].
    pub fn last_modified(&self) -> Result<SystemTime> {
        match self.known().last_modified {
            Some(t) => Ok(t),
            None => Ok(self.summary()?.last_modified),
        }
    }

    /// Where the stored byte `delta` bytes after the batch start at `cursor` lies, as (a file
    /// name or other place, a byte position), for error messages about damaged batches: the
    /// segment file and position when the source has files
    /// ([`SegmentFiles::byte_location`]), else the partition, counted from the batch start.
    pub fn byte_location(&self, cursor: &ReadCursor, delta: u64) -> (String, u64) {
        if let Some(at) = self.segment_files().and_then(|f| f.byte_location(cursor, delta)) {
            return at;
        }
        let place =
            format!("{}-{} batch at offset {}", self.topic(), self.partition(), cursor.next_offset);
        (place, delta)
    }
}
