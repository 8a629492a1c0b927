//! Reading a segment's batches into a key index builder: sequentially, or in bulk in parts run
//! as jobs of the mount's executor (the calling thread runs those no worker took).

use std::sync::Arc;

use crate::segment::LogSegment;
use topicfs_executor::{Class, Executor};
use topicfs_format::key_index::{BulkKeyIndexBuilder, KeySink, TxnBatch};
use topicfs_format::{Offset, Position, decode_batch_unverified};

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

/// Indexes `seg` from `position` to its end in bulk, in parts read as jobs of `executor` (of
/// class [`Class::Store`]; without one, in one part on the calling thread), then joined. A part that does not end exactly where the next begins (an offset index entry that
/// is not a batch boundary) or stops on damage makes the whole read again in one part, so
/// the result is the one a single sequential read gives.
pub(super) fn bulk_index(
    seg: &Arc<LogSegment>,
    position: u64,
    parts: usize,
    executor: Option<&Executor>,
) -> (BulkKeyIndexBuilder, Indexed) {
    let sequential = || {
        let mut builder = BulkKeyIndexBuilder::new(seg.base_offset());
        let done = index_segment(seg, position, seg.base_offset(), &mut builder);
        (builder, done)
    };
    let Some(executor) = executor else { return sequential() };
    let cuts = split_positions(seg, position, parts);
    if cuts.is_empty() {
        return sequential();
    }
    let mut bounds = vec![position];
    bounds.extend(cuts);
    bounds.push(seg.size());
    let ranges: Vec<(u64, u64)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    type Part = (BulkKeyIndexBuilder, Indexed, u64);
    let jobs: Vec<Box<dyn FnOnce() -> Part + Send>> = ranges
        .iter()
        .map(|&(start, end)| {
            let seg = Arc::clone(seg);
            Box::new(move || {
                let mut builder = BulkKeyIndexBuilder::new(seg.base_offset());
                let done = index_range(&seg, start, end, seg.base_offset(), &mut builder);
                (builder, done, end)
            }) as Box<dyn FnOnce() -> Part + Send>
        })
        .collect();
    let results = executor.run_all(Class::Store, jobs);
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
