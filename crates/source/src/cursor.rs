//! Where reads start and what they return: cursors, chunks of whole batches, their heads.

use std::sync::Arc;
use std::time::SystemTime;

use topicfs_format::{
    BatchInfo, DecodeError, DecodeErrorKind, Offset, Timestamp, parse_batch_info, peek_entry,
};

#[cfg(doc)]
use super::{PartitionSource, ReadMode};

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
