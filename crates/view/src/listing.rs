//! Names listed in `by-offset/` and `by-time/` directories.
//!
//! Any valid spec can be looked up in these directories; the listings only offer useful starting
//! points, one per segment, so `ls` shows where the data is and each name opens a stream from
//! there to the end of the log. A source without segment files
//! ([`PartitionSource::segment_files`] is `None`) lists only the log start:
//!
//! * `by-offset/`: the log start offset and every segment's base offset above it, in decimal
//!   (`0`, `5000`, ...).
//! * `by-time/`: the timestamp of the first record at the log start offset and of the first
//!   record of every later segment, as RFC 3339 UTC with milliseconds
//!   (`2026-12-02T08:00:00.000Z`, see [`time_name`]). Opening such a name starts at the first
//!   record whose timestamp is at least that time, which is that record or an earlier one when
//!   CreateTime timestamps are out of order. Records without a timestamp (v0) list nothing.

use crate::spec::time_name;
use topicfs_format::{Offset, Timestamp, decode_batch};
use topicfs_source::error::{Error, Result};
use topicfs_source::{OffsetQuery, PartitionSource, PartitionSummary, ReadCursor};

/// Names for `by-offset/`: the log start offset and each later segment base offset up to the
/// log end offset (through a `read_committed` view, the last stable offset), ascending.
pub fn by_offset_names(part: &dyn PartitionSource) -> Result<Vec<String>> {
    let summary = part.summary()?;
    let log_start = summary.log_start_offset;
    let mut offsets = vec![log_start];
    offsets.extend(
        segment_bases(part)?.into_iter().filter(|b| *b > log_start && *b <= summary.log_end_offset),
    );
    offsets.sort_unstable();
    offsets.dedup();
    Ok(offsets.iter().map(|o| o.0.to_string()).collect())
}

/// Names for `by-time/`: the first timestamp at the log start and of each later segment, as
/// RFC 3339 (distinct names in log order; timestamps need not ascend).
pub fn by_time_names(part: &dyn PartitionSource) -> Result<Vec<String>> {
    let summary = part.summary()?;
    let log_start = summary.log_start_offset;
    let mut times: Vec<Timestamp> = summary.first_timestamp.into_iter().collect();
    for base in segment_bases(part)? {
        if base <= log_start {
            continue;
        }
        match first_timestamp(part, base) {
            Ok(Some(t)) => times.push(t),
            Ok(None) => {}
            // Deleted by retention since `segments()`: nothing to list.
            Err(Error::NotFound(_) | Error::OffsetOutOfRange { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let mut names: Vec<String> = Vec::with_capacity(times.len());
    for name in times.into_iter().filter(|t| *t >= 0).filter_map(time_name) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

/// Timestamp of the first record of the segment at `base` (control records included: their
/// timestamp is when the transaction ended), or `None` for an empty segment or a v0 record.
fn first_timestamp(part: &dyn PartitionSource, base: Offset) -> Result<Option<Timestamp>> {
    let cursor = ReadCursor::at(base);
    let chunk = part
        .read(&cursor, 1, topicfs_source::ReadMode::Batches)
        .and_then(topicfs_source::ReadAnswer::into_chunk)?;
    if chunk.bytes.is_empty() {
        return Ok(None);
    }
    let at = chunk.starts.first().map_or(cursor, |s| s.cursor);
    let corrupt = |delta: usize, what: String| {
        let (place, position) = part.byte_location(&at, delta as u64);
        Error::corrupt(place, position, what)
    };
    let batch = decode_batch(&chunk.bytes).map_err(|e| corrupt(e.at, e.to_string()))?;
    let first = batch.records().next().transpose().map_err(|e| corrupt(e.at, e.to_string()))?;
    Ok(first.map(|r| r.timestamp).filter(|t| *t >= 0))
}

/// The partition's summary with the timestamps its source leaves out asked for (a cluster's
/// summary holds only the offsets: it costs no more requests than those): the first record's
/// timestamp read at the log start offset, and the largest one as the timestamp of the record a
/// max-timestamp lookup ([`OffsetQuery::MaxTimestamp`], Kafka's ListOffsets `-3`) names, read
/// there. A lookup that fails (a broker without `-3`: ListOffsets below v7, or one that drops
/// the connection, doc/cluster-brokers.md) leaves its timestamp `None`, logged at debug; `info`
/// then says `unknown`. For the `info` file: two reads (and a lookup) per partition.
pub fn summary_with_timestamps(part: &dyn PartitionSource) -> Result<PartitionSummary> {
    let mut summary = part.summary()?;
    if summary.log_end_offset <= summary.log_start_offset {
        return Ok(summary);
    }
    let unknown = |what: &str, e: Error| {
        log::debug!("{}-{}: {what} not known: {e}", part.topic(), part.partition());
        None
    };
    if summary.first_timestamp.is_none() {
        summary.first_timestamp = first_timestamp(part, summary.log_start_offset)
            .unwrap_or_else(|e| unknown("first timestamp", e));
    }
    if summary.max_timestamp.is_none() {
        summary.max_timestamp =
            max_timestamp(part, &summary).unwrap_or_else(|e| unknown("max timestamp", e));
    }
    Ok(summary)
}

/// The timestamp of the record a max-timestamp lookup names (`None` when it names none).
fn max_timestamp(
    part: &dyn PartitionSource,
    summary: &PartitionSummary,
) -> Result<Option<Timestamp>> {
    let offset = part.offset_for(OffsetQuery::MaxTimestamp)?;
    if offset < summary.log_start_offset || offset >= summary.log_end_offset {
        return Ok(None);
    }
    let cursor = ReadCursor::at(offset);
    let chunk = part
        .read(&cursor, 1, topicfs_source::ReadMode::Batches)
        .and_then(topicfs_source::ReadAnswer::into_chunk)?;
    if chunk.bytes.is_empty() {
        return Ok(None);
    }
    let at = chunk.starts.first().map_or(cursor, |s| s.cursor);
    let corrupt = |delta: usize, what: String| {
        let (place, position) = part.byte_location(&at, delta as u64);
        Error::corrupt(place, position, what)
    };
    let batch = decode_batch(&chunk.bytes).map_err(|e| corrupt(e.at, e.to_string()))?;
    for stamp in batch.record_stamps() {
        let stamp = stamp.map_err(|e| corrupt(e.at, e.to_string()))?;
        if stamp.offset == offset {
            return Ok(Some(stamp.timestamp).filter(|t| *t >= 0));
        }
    }
    Ok(None)
}

/// Base offsets of the partition's segments (none for a source without segment files).
fn segment_bases(part: &dyn PartitionSource) -> Result<Vec<Offset>> {
    match part.segment_files() {
        Some(files) => Ok(files.segments()?.iter().map(|s| s.base_offset).collect()),
        None => Ok(Vec::new()),
    }
}
