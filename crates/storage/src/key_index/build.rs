//! Reading a segment's batches into a key index builder: sequentially, or in bulk in parts on
//! their own threads.

use crate::segment::LogSegment;
use topicfs_format::key_index::{BulkKeyIndexBuilder, KeySink, RunJobs, TxnBatch};
use topicfs_format::{Offset, Position, decode_batch_unverified};

/// Most threads sorting one index's records.
pub const SORT_THREADS: usize = 4;

/// The threads the log engine lends the key index format to sort a build's records: up to
/// [`SORT_THREADS`] scoped threads (no more than the cores), ended when the sort is.
pub(super) struct SortThreads;

impl RunJobs for SortThreads {
    fn width(&self) -> usize {
        SORT_THREADS.min(std::thread::available_parallelism().map_or(1, |t| t.get())).max(1)
    }

    fn run_jobs<'a>(&self, jobs: Vec<Box<dyn FnOnce() + Send + 'a>>) {
        std::thread::scope(|scope| {
            for job in jobs {
                scope.spawn(job);
            }
        });
    }
}

/// Bytes of a segment read per step while indexing.
const READ_CHUNK: usize = 1 << 20;

/// What one segment read gave the index: how far it got and whether it stopped on damage.
pub(super) struct Indexed {
    pub(super) position: u64,
    pub(super) next_offset: Offset,
    pub(super) damaged: bool,
}

/// Reads `seg`'s batches from `position` to its current size into `builder`.
pub(super) fn index_segment(
    seg: &LogSegment,
    position: u64,
    next_offset: Offset,
    builder: &mut impl KeySink,
) -> Indexed {
    index_range(seg, position, seg.size(), next_offset, builder)
}

/// Reads `seg`'s batches from `position` up to `end` (a batch boundary) into `builder`.
fn index_range(
    seg: &LogSegment,
    mut position: u64,
    end: u64,
    mut next_offset: Offset,
    builder: &mut impl KeySink,
) -> Indexed {
    loop {
        let Some(left) = end.checked_sub(position).filter(|l| *l > 0) else {
            return Indexed { position, next_offset, damaged: false };
        };
        let read = match seg.read(Position(position), READ_CHUNK.min(left as usize)) {
            Ok(Some(read)) => read,
            Ok(None) => return Indexed { position, next_offset, damaged: false },
            Err(e) => {
                log::error!(
                    "key index of {} stops at position {position}: {e}",
                    seg.log_path().display()
                );
                return Indexed { position, next_offset, damaged: true };
            }
        };
        let mut at = 0usize;
        while let Some(rest) = read.bytes.get(at..).filter(|r| !r.is_empty()) {
            // `LogSegment::read` returns whole batches whose CRC it checked.
            let batch = match decode_batch_unverified(rest) {
                Ok(batch) => batch,
                Err(e) => {
                    log::error!(
                        "key index of {} stops at position {}: {e}",
                        seg.log_path().display(),
                        position + at as u64
                    );
                    return Indexed { position: position + at as u64, next_offset, damaged: true };
                }
            };
            let size = topicfs_format::peek_entry(rest)
                .ok()
                .flatten()
                .map_or(rest.len(), |h| h.total_size());
            let info = batch.info();
            if !info.is_control {
                if info.is_transactional {
                    builder.add_txn_batch(TxnBatch {
                        base_offset: info.base_offset,
                        last_offset: info.last_offset,
                        producer_id: info.producer_id,
                    });
                }
                for record in batch.records() {
                    match record {
                        Ok(r) => builder.add(r.key, r.offset),
                        Err(e) => {
                            log::error!(
                                "key index of {}: batch at position {} has a bad record: {e}",
                                seg.log_path().display(),
                                position + at as u64
                            );
                            break;
                        }
                    }
                }
            }
            next_offset = next_offset.max(info.last_offset.plus(1));
            at += size.max(1);
        }
        position = read.next_position.0;
        next_offset = next_offset.max(read.next_offset);
    }
}

/// Where `seg` may be cut into about `parts` ranges from `from` on: positions of batches its
/// offset index names (checked as the ranges are read: see [`bulk_index`]).
fn split_positions(seg: &LogSegment, from: u64, parts: usize) -> Vec<u64> {
    let size = seg.size();
    if parts < 2 || size <= from + (READ_CHUNK as u64) * 4 {
        return Vec::new();
    }
    let cuts = seg.with_offset_index(|idx| {
        let n = idx.entries();
        (1..parts)
            .filter_map(|k| idx.entry(n * k / parts).map(|(_, p)| p.0))
            .filter(|p| *p > from && *p < size)
            .collect::<Vec<u64>>()
    });
    let mut cuts = cuts.unwrap_or_default();
    cuts.dedup();
    cuts
}

/// Indexes `seg` from `position` to its end in bulk, in parts read on their own threads, then
/// joined. A part that does not end exactly where the next begins (an offset index entry that
/// is not a batch boundary) or stops on damage makes the whole read again in one part, so
/// the result is the one a single sequential read gives.
pub(super) fn bulk_index(
    seg: &LogSegment,
    position: u64,
    parts: usize,
) -> (BulkKeyIndexBuilder, Indexed) {
    let sequential = || {
        let mut builder = BulkKeyIndexBuilder::new(seg.base_offset());
        let done = index_segment(seg, position, seg.base_offset(), &mut builder);
        (builder, done)
    };
    let cuts = split_positions(seg, position, parts);
    if cuts.is_empty() {
        return sequential();
    }
    let mut bounds = vec![position];
    bounds.extend(cuts);
    bounds.push(seg.size());
    let ranges: Vec<(u64, u64)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    let results: Vec<(BulkKeyIndexBuilder, Indexed, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = ranges
            .iter()
            .map(|&(start, end)| {
                scope.spawn(move || {
                    let mut builder = BulkKeyIndexBuilder::new(seg.base_offset());
                    let done = index_range(seg, start, end, seg.base_offset(), &mut builder);
                    (builder, done, end)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    if results.len() != ranges.len()
        || results.iter().any(|(_, done, end)| done.damaged || done.position != *end)
    {
        return sequential();
    }
    let mut joined = BulkKeyIndexBuilder::new(seg.base_offset());
    let mut last = Indexed { position, next_offset: seg.base_offset(), damaged: false };
    for (builder, done, _) in results {
        joined.append(builder);
        last = Indexed {
            position: done.position,
            next_offset: last.next_offset.max(done.next_offset),
            damaged: false,
        };
    }
    (joined, last)
}
