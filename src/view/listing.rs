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

use crate::error::{Error, Result};
use crate::format::{Offset, Timestamp, decode_batch};
use crate::source::{PartitionSource, ReadCursor};
use crate::view::spec::time_name;

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
    let chunk = part.read(&cursor, 1)?;
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

/// Base offsets of the partition's segments (none for a source without segment files).
fn segment_bases(part: &dyn PartitionSource) -> Result<Vec<Offset>> {
    match part.segment_files() {
        Some(files) => Ok(files.segments()?.iter().map(|s| s.base_offset).collect()),
        None => Ok(Vec::new()),
    }
}
