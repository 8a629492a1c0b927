//! The narrow interface between the filesystem and whatever holds the partitions.
//!
//! The filesystem never opens a segment file itself: it asks a [`TopicSource`] for topics and
//! partitions, and a [`PartitionSource`] for offsets, whole batches as stored, and appends. Two
//! backends implement them, neither named here: the log engine (`storage`) over a Kafka log
//! directory, and the cluster client (`cluster`) over Fetch, ListOffsets and Produce; `view`
//! and `fs` know only this module. It owns every type its traits name and imports nothing
//! from a backend.
//!
//! Batches cross this interface as stored bytes (a v2 batch, or a legacy v0/v1 message set
//! entry), so the same rendering code serves local files and a network fetch response.
//!
//! Everything here is in offsets and batches. A [`ReadCursor`] is an offset bound plus an
//! opaque [`CursorHint`] only its source reads; a [`BatchChunk`] says where its runs of
//! batches start and what damage the read stepped over. What exists only for local files
//! (segment listings, raw segment bytes, passthrough, repaired indexes) is the separate
//! [`SegmentFiles`] interface, reached by one capability accessor,
//! [`PartitionSource::segment_files`]; `view` and `fs` decide by that capability, never by
//! which backend is mounted. The backend itself is chosen once, at mount time
//! (`mount::open_backend`).

pub mod error;
pub mod sync;

use std::any::Any;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

pub use crate::error::{Error, Result};
use topicfs_format::{
    BatchInfo, DecodeError, DecodeErrorKind, NewRecord, Offset, RecordRef, Timestamp,
    parse_batch_info, peek_entry,
};

/// The filesystem operation (one `lookup`, `open`, `read`, `getattr`, ...) running on this
/// thread, as a moment: a source may answer a question of that operation with what it learned
/// from an answer *asked after the operation began*, without asking again.
///
/// **Invariant** (what makes this linearizable): an answer asked after the operation began
/// reflects every change the source had acknowledged before the operation began, so one such
/// answer serves every question of the operation as "the partition at that moment". An answer
/// asked before it, however recent, does not: another client's record produced a moment before
/// the operation must be visible to it. A question asked outside any operation (a background
/// thread) never reuses anything on this account.
///
/// Operations nest: an operation begun while one runs on the thread keeps the outer one's
/// moment (the inner one is part of it). Made by the filesystem layer at the top of each
/// filesystem method; dropped at its end.
///
/// The process also counts the operations running on behalf of a caller (not background
/// work, [`Operation::begin_background`]) and when the last one ended, so background work can
/// wait for a quiet moment ([`Operation::quiet_for`]) instead of queueing its requests ahead of
/// a caller's on a shared connection.
#[must_use = "the operation ends when this is dropped"]
pub struct Operation {
    outer: Option<Instant>,
    /// Counted in [`RUNNING_OPERATIONS`] (an outermost operation for a caller).
    counted: bool,
}

thread_local! {
    static OPERATION_BEGAN: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// Outermost caller operations running now in the process.
static RUNNING_OPERATIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// When the last caller operation ended, in nanoseconds since [`operations_epoch`].
static LAST_OPERATION_ENDED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn operations_epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl Operation {
    /// Begins an operation for a caller on this thread (or joins the one running).
    pub fn begin() -> Operation {
        Operation::begin_counted(true)
    }

    /// Begins an operation of background work: as [`Operation::begin`], but not counted as
    /// a caller's ([`Operation::quiet_for`]).
    pub fn begin_background() -> Operation {
        Operation::begin_counted(false)
    }

    fn begin_counted(counted: bool) -> Operation {
        let outer = OPERATION_BEGAN.with(|b| {
            let outer = b.get();
            if outer.is_none() {
                b.set(Some(Instant::now()));
            }
            outer
        });
        let counted = counted && outer.is_none();
        if counted {
            operations_epoch();
            RUNNING_OPERATIONS.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
        Operation { outer, counted }
    }

    /// How long no caller operation has been running in the process; `None` while one runs.
    pub fn quiet_for() -> Option<std::time::Duration> {
        use std::sync::atomic::Ordering;
        if RUNNING_OPERATIONS.load(Ordering::Acquire) > 0 {
            return None;
        }
        let ended = std::time::Duration::from_nanos(LAST_OPERATION_ENDED.load(Ordering::Acquire));
        Some(operations_epoch().elapsed().saturating_sub(ended))
    }

    /// When the operation running on this thread began; `None` outside any operation.
    pub fn began() -> Option<Instant> {
        OPERATION_BEGAN.with(std::cell::Cell::get)
    }

    /// Whether an answer asked at `asked` answers for the operation running on this thread:
    /// asked at or after it began.
    pub fn covers(asked: Instant) -> bool {
        Operation::began().is_some_and(|began| asked >= began)
    }
}

impl Drop for Operation {
    fn drop(&mut self) {
        OPERATION_BEGAN.with(|b| b.set(self.outer));
        if self.counted {
            use std::sync::atomic::Ordering;
            let now = u64::try_from(operations_epoch().elapsed().as_nanos()).unwrap_or(u64::MAX);
            LAST_OPERATION_ENDED.fetch_max(now, Ordering::AcqRel);
            RUNNING_OPERATIONS.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// [`Known::sizing_budget`] of a source that states none: 16 MiB of log.
pub const DEFAULT_SIZING_BUDGET: u64 = 16 << 20;

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
    /// Number of segment files, for a source that has them (`None`: a cluster shows none).
    pub segment_count: Option<usize>,
    /// Sum of the `.log` file sizes, for a source that has them.
    pub size_bytes: Option<u64>,
    /// Timestamp of the first record at or after the log start offset, if any.
    pub first_timestamp: Option<Timestamp>,
    /// Largest record timestamp in the partition, if any.
    pub max_timestamp: Option<Timestamp>,
    /// When the partition last changed (last append, roll or deletion).
    pub last_modified: SystemTime,
}

/// The source's own half of a [`ReadCursor`]: where in its storage the batch at the cursor
/// lies (for the log engine, a segment's base offset and a byte position in its `.log`).
///
/// Opaque to everyone but the source that made it: the view only copies it, compares it for
/// equality, and moves it past a whole batch with [`ReadCursor::after_batch`]. A cursor without
/// a hint ([`CursorHint::NONE`], what [`ReadCursor::at`] makes) is valid input to
/// [`PartitionSource::read`] for every source; a source then finds the batch by its offset.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CursorHint(Option<(i64, u64)>);

impl CursorHint {
    /// No hint: the cursor is its offset alone.
    pub const NONE: CursorHint = CursorHint(None);

    /// A hint of two numbers whose meaning only the making source knows (the log engine: a
    /// segment's base offset, a byte position in it). The second is a byte count that
    /// [`CursorHint::advanced`] adds to.
    pub fn new(unit: i64, position: u64) -> CursorHint {
        CursorHint(Some((unit, position)))
    }

    /// The numbers given to [`CursorHint::new`]; for the source that made the hint only.
    pub fn get(self) -> Option<(i64, u64)> {
        self.0
    }

    /// The hint `bytes` stored bytes further in the same run of batches (see
    /// [`ChunkStart`]).
    pub fn advanced(self, bytes: u64) -> CursorHint {
        CursorHint(self.0.map(|(unit, position)| (unit, position.saturating_add(bytes))))
    }
}

/// Where a sequential read continues: a batch boundary.
///
/// **Invariant**: every batch before the cursor holds only offsets below `next_offset` (a lower
/// bound of the offsets of the batch at the cursor, which may have gaps). The `hint` lets the
/// source that made the cursor find that batch without a search; it is opaque to the view.
///
/// Cursors order by `next_offset`, the hint only breaking ties (two cursors at one offset bound
/// but different places, e.g. the end of one segment and the start of the next).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReadCursor {
    /// The offset the next batch is expected to hold (a lower bound, offsets may have gaps).
    pub next_offset: Offset,
    /// The source's own place of the batch; see [`CursorHint`].
    pub hint: CursorHint,
}

impl ReadCursor {
    /// A cursor at `offset` alone: [`PartitionSource::read`] from it reads the first batch
    /// whose last offset is `>= offset`, as from [`PartitionSource::seek`]`(offset)`.
    pub fn at(offset: Offset) -> ReadCursor {
        ReadCursor { next_offset: offset, hint: CursorHint::NONE }
    }

    /// The cursor after a whole batch of `size` stored bytes whose last offset is
    /// `last_offset`, this cursor being at that batch and the batch inside one run of a
    /// [`BatchChunk`] (see [`ChunkStart`]).
    pub fn after_batch(&self, size: u64, last_offset: Offset) -> ReadCursor {
        ReadCursor {
            next_offset: self.next_offset.max(last_offset.plus(1)),
            hint: self.hint.advanced(size),
        }
    }
}

/// Where a run of a [`BatchChunk`]'s bytes starts: the batches of one run are contiguous in
/// the source (the cursor after each is [`ReadCursor::after_batch`] of the cursor at it).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ChunkStart {
    /// Index into [`BatchChunk::bytes`] of the run's first batch.
    pub at: usize,
    /// The cursor at that batch.
    pub cursor: ReadCursor,
    /// The batch starts a unit the source deletes whole under retention (a segment): a render
    /// index keeps a checkpoint there, so reads of what follows survive the retention of what
    /// comes before. `false` when the source has no such units or does not know.
    pub retention_boundary: bool,
}

/// Damage a read stepped over to reach the batches it returned (local logs: bytes in a sealed
/// segment that do not frame a batch end that segment, the read goes on at the next one).
#[derive(Clone, Debug)]
pub struct SkippedDamage {
    /// What is wrong and where (file and position for a local log).
    pub error: Arc<crate::error::Error>,
    /// The offset bound the read went on at.
    pub resumed_at: Offset,
}

/// Whole batches as stored, read from a cursor.
#[derive(Clone, Debug, Default)]
pub struct BatchChunk {
    /// Concatenated whole batches (possibly empty when the cursor is at the current end).
    pub bytes: Vec<u8>,
    /// Where the runs of `bytes` start, the first at 0, in order. Empty means one run starting
    /// at the cursor read from.
    pub starts: Vec<ChunkStart>,
    /// Cursor after the last batch in `bytes`.
    pub next: Option<ReadCursor>,
    /// Every batch in `bytes` passed its CRC check when it was read, so a reader that decodes
    /// them need not check again. `false` promises nothing (the batches are checked by whoever
    /// decodes them).
    pub crc_checked: bool,
    /// Damage stepped over by a read in [`ReadMode::PastDamage`] before these batches.
    pub skipped: Option<SkippedDamage>,
}

/// One batch as the transaction scan sees it ([`ReadMode::HeadsPastDamage`]):
/// its header facts, and its whole entry only when it is a control batch (the scan decodes
/// the marker's one record; a data batch's records are never needed).
#[derive(Clone, Debug)]
pub struct BatchHead {
    /// Header facts (`info.size` is the whole stored entry, 12-byte overhead included).
    pub info: BatchInfo,
    /// The whole entry as stored, for control batches; `None` for data batches.
    pub control: Option<Vec<u8>>,
}

/// The headers of consecutive batches read from a cursor, without their records.
#[derive(Clone, Debug, Default)]
pub struct BatchHeads {
    /// The batches in order.
    pub heads: Vec<BatchHead>,
    /// Where runs start, as in [`BatchChunk::starts`], `at` indexing `heads` (an index equal
    /// to `heads.len()` is the place of `damaged`). Empty means one run at the cursor read from.
    pub starts: Vec<ChunkStart>,
    /// Cursor after the last batch in `heads`.
    pub next: Option<ReadCursor>,
    /// As in [`BatchChunk::skipped`].
    pub skipped: Option<SkippedDamage>,
    /// The bytes after the last head do not decode as a batch: why, `at` counted from where
    /// that batch starts. The reader stops there.
    pub damaged: Option<DecodeError>,
    /// Stored bytes the heads cover.
    pub bytes: u64,
}

impl BatchHeads {
    /// The heads of the whole batches of `chunk` (what a source without a header-only read
    /// returns): stops at the first entry that does not decode, kept in `damaged`.
    pub fn of_chunk(chunk: BatchChunk) -> BatchHeads {
        let mut out =
            BatchHeads { next: chunk.next, skipped: chunk.skipped, ..BatchHeads::default() };
        let mut starts = chunk.starts.into_iter().peekable();
        let mut at = 0usize;
        while at < chunk.bytes.len() {
            while let Some(start) = starts.next_if(|s| s.at <= at) {
                out.starts.push(ChunkStart { at: out.heads.len(), ..start });
            }
            let rest = chunk.bytes.get(at..).unwrap_or_default();
            let parsed = peek_entry(rest).and_then(|h| {
                let h = h.ok_or_else(|| {
                    DecodeError::new(
                        0,
                        DecodeErrorKind::Truncated { needed: 17, available: rest.len() },
                    )
                })?;
                let entry = rest.get(..h.total_size()).ok_or_else(|| {
                    DecodeError::new(
                        0,
                        DecodeErrorKind::Truncated {
                            needed: h.total_size(),
                            available: rest.len(),
                        },
                    )
                })?;
                Ok((entry, parse_batch_info(entry)?))
            });
            match parsed {
                Ok((entry, info)) => {
                    let control = info.is_control.then(|| entry.to_vec());
                    out.heads.push(BatchHead { info, control });
                    out.bytes += entry.len() as u64;
                    at += entry.len();
                }
                Err(e) => {
                    out.damaged = Some(e);
                    break;
                }
            }
        }
        out
    }
}

/// What an append wrote.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: Offset,
    pub last_offset: Offset,
    /// Number of batches the records were written as.
    pub batches: usize,
}

/// A sealed part of the log (a sealed segment locally): its batches never change while it
/// exists, so what is learned about them can be kept across remounts ([`SpanStore::load`]).
/// Made by the source; the view copies its cursors.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SealedSpan {
    /// The span's name: the base offset of its segment.
    pub base: Offset,
    /// The cursor at its first batch.
    pub start: ReadCursor,
    /// The cursor after its last batch (the source's place of its end; `next_offset` is the
    /// last offset it holds plus one).
    pub end: ReadCursor,
    /// Its stored bytes.
    pub bytes: u64,
}

/// A kind of payload kept per span in a [`SpanStore`], named by its user (the render index,
/// the transaction tracker, the key index each define theirs next to their payload's
/// encoding). The store knows nothing of a kind but its names and tags: a store keeps at most
/// one payload per (span, kind), and the payload's encoding is the user's.
///
/// **Invariant**: names and tags are unique among the kinds of one program and never change
/// meaning (a store may keep payloads across versions of the program, and a kind's tag is
/// recorded with its payloads, so a payload of another kind under the same name is refused).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpanKind {
    /// The user's name of its payloads (a local store's entry file extension for a sealed span).
    pub name: &'static str,
    /// The kind's number, recorded with each payload of a sealed span.
    pub tag: u8,
    /// The name and tag of the kind's payloads for the stable prefix of the part of the log
    /// still being written ([`SpanStore::prefix_span_at`]); `None`: the kind is kept for sealed
    /// spans only.
    pub prefix: Option<(&'static str, u8)>,
}

/// What [`SpanStore::update`] does with a kept payload: given the valid payload (if any), the
/// new payload (`None`: leave it).
pub type SummaryUpdate = Box<dyn FnOnce(Option<Vec<u8>>) -> Option<Vec<u8>> + Send>;

/// Bytes a user of a [`SpanStore`] moves past the end of the stable prefix it last stored (or
/// took from the store) before it stores the prefix again: the render index counts rendered
/// bytes, the transaction tracker scanned bytes.
pub const PREFIX_STORE_EVERY: u64 = 64 << 20;

/// Where what is learned about spans of the log is kept across remounts, for a source that
/// keeps it ([`PartitionSource::span_store`]; the log engine keeps it in its segment cache).
/// Two forms of span: a *sealed* span (a sealed segment), whose batches never change while it
/// exists, and the *stable prefix* of the part still being written (the active segment's bytes
/// below a batch boundary already passed), kept while the source still holds those bytes
/// unchanged. A payload is the user's encoding, checked by the store only for integrity and
/// against the span's bytes: decode it like bytes from disk. Nothing here ever fails: a payload
/// the store cannot keep is learned again later.
pub trait SpanStore: Send + Sync {
    /// The sealed span whose first batch is the next one read from `cursor` (the cursor is at
    /// the span's start, or at the end of the sealed span before it), if any.
    fn sealed_span_at(&self, cursor: &ReadCursor) -> Option<SealedSpan>;
    /// What was kept as `kind` for `span` (in this or an earlier mount), if it is still valid
    /// for the span's bytes.
    fn load(&self, span: &SealedSpan, kind: SpanKind) -> Option<Vec<u8>>;
    /// Replaces what is kept as `kind` for `span` by what `update` makes of it (`None`: keep it
    /// as it is), later, on another thread; updates of one store run one at a time, so two
    /// callers merging into one payload do not lose each other's part.
    fn update(&self, span: &SealedSpan, kind: SpanKind, update: SummaryUpdate);
    /// The stable prefix of the part of the log still being written whose first batch is the
    /// next one read from `cursor`: the span of that prefix (`end` is a batch boundary) and the
    /// `kind` payload (encoded as for a sealed span) kept for exactly that span by
    /// [`SpanStore::update_prefix`], if still valid. `None` otherwise, and for a kind without
    /// [`SpanKind::prefix`].
    fn prefix_span_at(&self, cursor: &ReadCursor, kind: SpanKind) -> Option<(SealedSpan, Vec<u8>)>;
    /// Like [`SpanStore::update`] for the prefix of the part still being written from `start`
    /// (its first batch, a cursor at a span start) to `end` (a batch boundary the caller got
    /// to); a payload kept for a prefix of another length is not handed to `update`. Nothing
    /// when `start` and `end` do not delimit such a prefix, or the kind has no
    /// [`SpanKind::prefix`].
    fn update_prefix(
        &self,
        start: &ReadCursor,
        end: &ReadCursor,
        kind: SpanKind,
        update: SummaryUpdate,
    );
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
/// **Shape.** Every method is required and every backend answers each one (no default: a
/// decorator such as `view::txn::CommittedPartition` must say what it does with each, it
/// cannot drop one silently). One read with a [`ReadMode`], one append of [`Records`], the
/// bounds as asked ([`summary`](Self::summary)) and as known without asking
/// ([`known`](Self::known): stated bounds, last change, rewrites, sizing budget), lookups by
/// offset and time ([`offset_for`](Self::offset_for), [`seek`](Self::seek),
/// [`holds`](Self::holds)), [`sync`](Self::sync), and capability accessors for what only some
/// sources have: [`segment_files`](Self::segment_files) (which also places damaged bytes in
/// files, [`SegmentFiles::byte_location`]), [`key_index`](Self::key_index), and
/// [`committed`](Self::committed) (who applies `read_committed`, and the [`TxnBoundary`]
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
/// methods a source implements. The five span methods below (`sealed_span_at` ...
/// `update_prefix_summary`) still have defaults; they become one capability accessor (a span
/// store) beside these.
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

/// A file of a partition that its source could not serve (for the partition's `check`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileProblem {
    /// The file's name in the partition directory.
    pub name: String,
    /// The byte position the problem starts at, if it is inside the file.
    pub position: Option<u64>,
    /// What is wrong, in a few words.
    pub what: String,
}

/// A partition's segment files: the local-only half of the partition interface, reached by
/// [`PartitionSource::segment_files`]. The filesystem shows `segments/`, the inspection files
/// (`check`, `.dump`) and passes sealed files through to the kernel only for a partition that
/// has them; a live cluster has none.
pub trait SegmentFiles: Send + Sync {
    /// Segments in base-offset order.
    fn segments(&self) -> Result<Vec<SegmentSummary>>;
    /// The segment whose base offset is `base_offset`, if any (what [`Self::segments`] lists
    /// for it).
    fn segment_summary(&self, base_offset: Offset) -> Result<Option<SegmentSummary>>;
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
    /// exactly what [`SegmentFiles::read_segment_file`] returns and will not change: the
    /// mount hands it to the kernel, which then reads it without asking (FUSE passthrough).
    /// `None` for the active segment and for a file whose on-disk size differs from the size
    /// shown (an index left untrimmed by a crash).
    fn sealed_segment_file(
        &self,
        base_offset: Offset,
        kind: SegmentFileKind,
    ) -> Result<Option<std::fs::File>>;
    /// Files of segment `base_offset` whose bytes on disk the source found damaged and serves
    /// repaired instead (an index rebuilt in memory from the `.log` on a read-only mount), as
    /// (file, byte position of the damage on disk, what is wrong there).
    fn repaired_segment_files(
        &self,
        base_offset: Offset,
    ) -> Result<Vec<(SegmentFileKind, u64, String)>>;
    /// Where the stored byte `delta` bytes after the batch start at `cursor` lies, as (a file
    /// name, a byte position in it), when the cursor's hint names a segment of this source;
    /// `None` otherwise (see `<dyn PartitionSource>::byte_location`).
    fn byte_location(&self, cursor: &ReadCursor, delta: u64) -> Option<(String, u64)>;
    /// Files the source could not serve at all or in part: names that are not regular files
    /// (refused unopened, see `storage::open`), bytes that are not batches after the last
    /// whole batch of the active segment.
    fn file_problems(&self) -> Result<Vec<FileProblem>>;
}

/// One record a [`KeyIndex`] found: its offset and, when its batch is transactional, the
/// producer (a read-committed reader hides it when that producer's transaction was aborted).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct KeyHit {
    pub offset: Offset,
    pub producer_id: Option<i64>,
}

/// What a [`KeyIndex`] lookup found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyHits {
    /// The records holding the key, ascending, from the offset asked for (at or above the log
    /// start offset).
    pub hits: Vec<KeyHit>,
    /// Every record below this offset was indexed when the lookup ran: no record below it that
    /// holds the key is missing from `hits` (the log end offset of that moment).
    pub indexed_to: Offset,
}

/// One key of a [`KeyListing`] and its records.
pub type KeyRecords = (Option<Vec<u8>>, Vec<KeyHit>);

/// The distinct keys of a partition, one at a time (see [`KeyIndex::listing`]).
pub trait KeyListing: Send {
    /// The next key and its records, `None` after the last.
    fn next_key(&mut self) -> Result<Option<KeyRecords>>;
    /// At least as many keys as the listing has (the sum of its segments' key counts): what
    /// generating it all would cost.
    fn keys_at_most(&self) -> u64;
}

/// A partition's records by key: the per-segment key indexes of the log engine. Reached by
/// [`PartitionSource::key_index`]; a source without one (a cluster) has no `by-key/`,
/// `latest/` or `keys`.
pub trait KeyIndex: Send + Sync {
    /// The records whose key is `key` (`None`: the null key) at offsets `>= from`, catching up
    /// with what was appended first. Touches only the segments whose filters admit the key.
    fn key_hits(&self, key: Option<&[u8]>, from: Offset) -> Result<KeyHits>;
    /// The keys whose long name (`%~`, see [`topicfs_format::key_name`]) holds these hashes.
    fn keys_named(&self, h0: u64, h1: u64) -> Result<Vec<Vec<u8>>>;
    /// Every distinct key now, in the index's hash order, with its records, streamed: the
    /// listing holds the indexes, not the keys.
    fn listing(&self) -> Result<Box<dyn KeyListing>>;
    /// Whether anything indexed so far is in a transactional batch. `false` means no record
    /// found so far can be aborted or wait for a transaction: a read-committed reader then shows
    /// them all without scanning for transaction markers.
    fn transactional(&self) -> bool;
}

/// The mount's memory for data a backend fetched and the view has not rendered yet (the view's
/// shared memory budget, `--memory-budget`, implements it): a backend holds the bytes it is
/// about to fetch for as long as it keeps them, and waits while other fetches hold the cap.
pub trait FetchMemory: Send + Sync {
    /// Holds `bytes` until the returned value is dropped, waiting until `deadline` at most for
    /// room; `None` when the deadline passed first.
    fn hold(&self, bytes: usize, deadline: Instant) -> Option<Box<dyn Any + Send>>;
    /// The cap in bytes.
    fn limit(&self) -> usize;
}

/// Where an effective topic setting's value comes from, highest precedence first.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigSource {
    /// Set for this topic through the mount's `config` file, or a cluster's topic override
    /// (DescribeConfigs DYNAMIC_TOPIC_CONFIG).
    TopicOverride,
    /// The broker's own override for this topic (a KRaft ConfigRecord of the topic).
    BrokerTopic,
    /// The broker's dynamic default (KRaft ConfigRecord BROKER; DYNAMIC_DEFAULT_BROKER_CONFIG or
    /// DYNAMIC_BROKER_CONFIG on a cluster).
    BrokerDefault,
    /// The mount's `--config` / `-o config.NAME=VALUE`.
    MountDefault,
    /// The broker's static settings (`--server-properties`; STATIC_BROKER_CONFIG on a cluster).
    BrokerStatic,
    /// Kafka's built-in default.
    KafkaDefault,
}
impl ConfigSource {
    /// The word the `config` file shows.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigSource::TopicOverride => "override",
            ConfigSource::BrokerTopic => "broker-override",
            ConfigSource::BrokerDefault => "broker-default",
            ConfigSource::MountDefault => "mount-default",
            ConfigSource::BrokerStatic => "server-properties",
            ConfigSource::KafkaDefault => "kafka-default",
        }
    }
}
/// One effective setting of a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
}
/// The name of the topic setting [`TopicSource::max_message_bytes`] reads.
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";

/// `max.message.bytes` among `settings` (name, value) (see
/// [`TopicSource::max_message_bytes`]): its value as a size, `None` when absent or not a size.
pub fn max_message_bytes_of<'a>(
    settings: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Option<usize> {
    settings
        .into_iter()
        .find(|(name, _)| *name == MAX_MESSAGE_BYTES)
        .and_then(|(_, value)| value)
        .and_then(|v| v.trim().parse::<usize>().ok())
}

/// One change to a topic's overrides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigChange {
    Set { name: String, value: String },
    Remove { name: String },
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
    /// zero when unknown (a cluster: its brokers' disks are not the mount's).
    fn space(&self) -> Result<SpaceStats>;
    /// Every effective setting of `topic`, sorted by name, with where each comes from.
    /// `NotFound` for an unknown topic; `Unsupported`/`UnsupportedApi` where the backend cannot.
    fn topic_config(&self, topic: &str) -> Result<Vec<ConfigEntry>>;
    /// Applies `changes` to `topic`'s overrides, all or nothing. `InvalidInput` naming the
    /// setting and the rule; nothing changed then.
    fn alter_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()>;
    /// `topic`'s effective `max.message.bytes` now (the longest record batch it takes), as
    /// [`TopicSource::topic_config`] states it, without the other settings: what an `append`
    /// handle's line limit follows. `None` when the source does not state it (a setting it
    /// does not list, or a value that is not a size); errors as `topic_config`'s.
    fn max_message_bytes(&self, topic: &str) -> Result<Option<usize>>;
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

/// One group's committed position in one partition, as the group coordinator stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    /// Kafka's committed offset: the next record the group will process.
    pub offset: Offset,
    /// The commit's metadata string (empty when none).
    pub metadata: String,
    /// When it was committed (epoch ms).
    pub commit_timestamp: Timestamp,
}

/// Consumer groups' committed offsets: a second narrow interface next to [`TopicSource`], so
/// local data dirs (the `__consumer_offsets` topic, the log engine's `groups`) and a cluster
/// (OffsetFetch, OffsetCommit) are two backends of the same `groups/` tree. Validation of what
/// is committed (partitions exist, offsets within the log) is the caller's.
pub trait GroupStore: Send + Sync {
    /// Groups with at least one committed offset for a partition of `topic`, sorted.
    fn groups(&self, topic: &str) -> Result<Vec<String>>;
    /// `group`'s committed offsets for `topic`, by partition (partitions without a commit are
    /// absent).
    fn committed(
        &self,
        group: &str,
        topic: &str,
    ) -> Result<std::collections::BTreeMap<u32, CommittedOffset>>;
    /// Commits `offsets` (partition, offset) of `topic` for `group`: all of them or none, and
    /// durably before it returns. `ReadOnly` where commits are not possible.
    fn commit(&self, group: &str, topic: &str, offsets: &[(u32, Offset)]) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::Operation;
    use std::time::Instant;

    #[test]
    fn an_operation_covers_answers_asked_after_it_began_and_only_while_it_runs() {
        let before = Instant::now();
        assert!(!Operation::covers(before), "outside any operation");
        {
            let _op = Operation::begin();
            let began = Operation::began().unwrap();
            assert!(!Operation::covers(before), "asked before the operation began");
            assert!(Operation::covers(Instant::now()));
            {
                // A nested operation keeps the outer moment.
                let _inner = Operation::begin();
                assert_eq!(Operation::began(), Some(began));
            }
            assert_eq!(Operation::began(), Some(began), "the inner end does not end the outer");
        }
        assert_eq!(Operation::began(), None);
        assert!(!Operation::covers(Instant::now()));
        // Another thread runs its own operations.
        let _op = Operation::begin();
        std::thread::spawn(|| assert_eq!(Operation::began(), None)).join().unwrap();
    }

    #[test]
    fn the_process_is_quiet_only_while_no_caller_operation_runs() {
        let op = Operation::begin();
        assert_eq!(Operation::quiet_for(), None, "a caller's operation runs");
        drop(op);
        let quiet = Operation::quiet_for().expect("none runs");
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(Operation::quiet_for().expect("none runs") > quiet, "quiet time grows");
        // Background work does not count.
        let _background = Operation::begin_background();
        assert!(Operation::quiet_for().is_some());
        assert!(Operation::began().is_some(), "but it is an operation for the bounds");
    }
}
