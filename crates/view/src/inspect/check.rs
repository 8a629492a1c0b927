//! The `check` report of a partition: each segment's `.log`, offset index, time index and
//! `.txnindex` checked against each other, one line per problem.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use topicfs_format::control::{ControlRecordType, parse_control_key};
use topicfs_format::index_entry::{
    OFFSET_INDEX_ENTRY_SIZE, OffsetPosition, TIME_INDEX_ENTRY_SIZE, TimestampOffset,
};
use topicfs_format::{Offset, decode_batch, verify_crc};
use topicfs_source::PartitionSource;
use topicfs_source::error::Result;
use topicfs_source::{SegmentFileKind, SegmentSummary};

use super::dump::{offset_entries, time_entries, txn_entries};
use super::entries::ChunkedEntries;
use super::{CHUNK_BYTES, TXN_INDEX_ENTRY_SIZE, file_label, files, read_segment_file};

/// Findings of a check, and counts for its summary line.
#[derive(Default)]
struct Report {
    lines: String,
    problems: usize,
    gaps: usize,
    batches: usize,
}

impl Report {
    fn problem(&mut self, file: &str, position: u64, what: impl std::fmt::Display) {
        self.problems += 1;
        let _ = writeln!(self.lines, "{file} position {position}: {what}");
    }
}

/// The `check` report of a partition (see the module docs).
pub fn check_partition(part: &dyn PartitionSource) -> Result<String> {
    let segments = files(part)?.segments()?;
    let file_problems = files(part)?.file_problems()?;
    let refused: HashSet<&str> =
        file_problems.iter().filter(|p| p.position.is_none()).map(|p| p.name.as_str()).collect();
    let mut report = Report::default();
    // The offset the next batch is expected at, across segments.
    let mut expected: Option<Offset> = None;
    for segment in &segments {
        check_segment(part, segment, &refused, &mut expected, &mut report)?;
    }
    for p in &file_problems {
        let label = format!("{}-{}/{}", part.topic(), part.partition(), p.name);
        match p.position {
            Some(position) => report.problem(&label, position, &p.what),
            None => {
                report.problems += 1;
                let _ = writeln!(report.lines, "{label}: {}", p.what);
            }
        }
    }
    let mut out = report.lines;
    let _ = writeln!(
        out,
        "checked {}-{}: {} segments, {} batches: {} problems, {} offset gaps",
        part.topic(),
        part.partition(),
        segments.len(),
        report.batches,
        report.problems,
        report.gaps
    );
    Ok(out)
}

/// Checks one segment, step by step: its `.log` (framing, CRCs, offsets), then its offset index
/// against the batch starts found there, its time index, the indexes the source repaired, and
/// its `.txnindex` against the ABORT markers found in the `.log`.
fn check_segment(
    part: &dyn PartitionSource,
    segment: &SegmentSummary,
    refused: &HashSet<&str>,
    expected: &mut Option<Offset>,
    report: &mut Report,
) -> Result<()> {
    let base = segment.base_offset;
    let log_label = file_label(part, base, SegmentFileKind::Log);
    let index = offset_entries(&read_segment_file(part, base, SegmentFileKind::Index)?);
    let facts = check_log(part, segment, &index, &log_label, expected, report)?;
    check_offset_index(part, base, index, &facts, &log_label, report);
    check_time_index(part, base, facts.segment_end, report)?;
    note_repaired_indexes(part, base, refused, report)?;
    if segment.txn_index_size.is_some() {
        check_txn_index(part, base, &facts.abort_markers, &log_label, report)?;
    }
    Ok(())
}

/// What the `.log` pass of [`check_log`] learned, for the index checks.
struct LogFacts {
    /// Batch starts by position, with the batch's first and last offsets.
    starts: HashMap<u64, (Offset, Offset)>,
    /// (producer id, offset) of every transactional ABORT marker.
    abort_markers: HashSet<(i64, Offset)>,
    /// One past the segment's last offset (its base offset when it holds no batch).
    segment_end: Offset,
}

/// The `.log` of `segment`, batch by batch: CRCs, decoding, offsets below the base offset,
/// offsets that do not increase across the partition (`expected`), gaps, and invalid bytes at
/// the end.
fn check_log(
    part: &dyn PartitionSource,
    segment: &SegmentSummary,
    index: &[OffsetPosition],
    log_label: &str,
    expected: &mut Option<Offset>,
    report: &mut Report,
) -> Result<LogFacts> {
    let base = segment.base_offset;
    // Batch starts by position, with the batch's first and last offsets: only at the
    // positions the offset index names (what is checked below), so that memory follows the
    // index, not the number of batches.
    let indexed: HashSet<u64> = index.iter().map(|e| u64::from(e.position)).collect();
    let mut starts: HashMap<u64, (Offset, Offset)> = HashMap::new();
    let mut abort_markers: HashSet<(i64, Offset)> = HashSet::new();
    let mut segment_end = base;
    let mut entries = ChunkedEntries::new(base, 0, segment.log_size, CHUNK_BYTES);
    while let Some(e) = entries.next(part)? {
        report.batches += 1;
        let info = &e.info;
        if let Err(why) = verify_crc(e.bytes) {
            report.problem(log_label, e.position, why);
        }
        let first = match decode_batch(e.bytes) {
            Ok(batch) => {
                if info.is_control && info.is_transactional {
                    let key = batch.records().next().and_then(|r| r.ok()).map(|r| r.key);
                    if let Some(Ok(k)) = key.map(parse_control_key) {
                        if k.record_type == ControlRecordType::Abort {
                            abort_markers.insert((info.producer_id, info.base_offset));
                        }
                    }
                }
                batch.info().base_offset
            }
            Err(why) => {
                if verify_crc(e.bytes).is_ok() {
                    report.problem(log_label, e.position, why);
                }
                info.base_offset
            }
        };
        if first < base {
            report.problem(
                log_label,
                e.position,
                format!("offset {first} is below the segment's base offset {base}"),
            );
        }
        if let Some(x) = *expected {
            if first < x {
                report.problem(
                    log_label,
                    e.position,
                    format!(
                        "offsets do not increase: batch starts at {first}, expected {x} or later"
                    ),
                );
            } else if first > x {
                report.gaps += 1;
                let _ = writeln!(
                    report.lines,
                    "{log_label} position {}: offset gap: {x}..{} missing",
                    e.position,
                    first.0.saturating_sub(1)
                );
            }
        }
        *expected = Some(info.last_offset.plus(1));
        segment_end = segment_end.max(info.last_offset.plus(1));
        if indexed.contains(&e.position) {
            starts.insert(e.position, (first, info.last_offset));
        }
    }
    let position = entries.position();
    let invalid = entries.end_of_file(part)?.saturating_sub(position);
    if invalid > 0 {
        report.problem(log_label, position, format!("{invalid} invalid bytes at the end"));
    }

    Ok(LogFacts { starts, abort_markers, segment_end })
}

/// The offset index of the segment at `base`: entries in increasing order, each at a batch
/// start of the `.log` and within the segment.
fn check_offset_index(
    part: &dyn PartitionSource,
    base: Offset,
    index: Vec<OffsetPosition>,
    facts: &LogFacts,
    log_label: &str,
    report: &mut Report,
) {
    let index_label = file_label(part, base, SegmentFileKind::Index);
    let LogFacts { starts, segment_end, .. } = facts;
    let segment_end = *segment_end;
    let mut previous: Option<OffsetPosition> = None;
    for (i, e) in index.into_iter().enumerate() {
        let at = (i * OFFSET_INDEX_ENTRY_SIZE) as u64;
        let offset = e.offset(base);
        if let Some(p) = previous {
            if e.relative_offset <= p.relative_offset || e.position <= p.position {
                report.problem(
                    &index_label,
                    at,
                    format!(
                        "entry offset {offset} position {} is not after offset {} position {}",
                        e.position,
                        p.offset(base),
                        p.position
                    ),
                );
            }
        }
        match starts.get(&u64::from(e.position)) {
            None => report.problem(&index_label, at, format!("entry offset {offset} position {} does not point at a batch start in {log_label}", e.position)),
            Some((first, _)) if *first > offset => report.problem(&index_label, at, format!("entry offset {offset} position {} points at a batch starting at offset {first}", e.position)),
            Some(_) if offset >= segment_end => report.problem(&index_label, at, format!("entry offset {offset} is past the segment's last offset {}", segment_end.0 - 1)),
            Some(_) => {}
        }
        previous = Some(e);
    }
}

/// The time index of the segment at `base`: timestamps and offsets in order, within the segment.
fn check_time_index(
    part: &dyn PartitionSource,
    base: Offset,
    segment_end: Offset,
    report: &mut Report,
) -> Result<()> {
    let time_label = file_label(part, base, SegmentFileKind::TimeIndex);
    let time_index = read_segment_file(part, base, SegmentFileKind::TimeIndex)?;
    let mut previous: Option<TimestampOffset> = None;
    for (i, e) in time_entries(&time_index).into_iter().enumerate() {
        let at = (i * TIME_INDEX_ENTRY_SIZE) as u64;
        let offset = e.offset(base);
        if let Some(p) = previous {
            if e.timestamp < p.timestamp {
                report.problem(
                    &time_label,
                    at,
                    format!("out of order: timestamp {} after {}", e.timestamp, p.timestamp),
                );
            }
            if e.relative_offset < p.relative_offset {
                report.problem(
                    &time_label,
                    at,
                    format!("out of order: offset {offset} after {}", p.offset(base)),
                );
            }
        }
        if offset >= segment_end && !(i == 0 && segment_end == base) {
            report.problem(
                &time_label,
                at,
                format!(
                    "entry offset {offset} is past the segment's last offset {}",
                    segment_end.0 - 1
                ),
            );
        }
        previous = Some(e);
    }
    Ok(())
}

/// A note for each index file of the segment at `base` the source repaired in memory.
fn note_repaired_indexes(
    part: &dyn PartitionSource,
    base: Offset,
    refused: &HashSet<&str>,
    report: &mut Report,
) -> Result<()> {
    // Index files the source does not use as they are (the problems in them are listed
    // above, from the bytes on disk): a note, not a problem of its own.
    for (kind, position, what) in files(part)?.repaired_segment_files(base)? {
        let label = file_label(part, base, kind);
        if label.rsplit('/').next().is_some_and(|name| refused.contains(name)) {
            // Not a file at all: reported once, below, as refused.
            continue;
        }
        let _ = writeln!(
            report.lines,
            "{label} position {position}: failed the sanity check ({what}); lookups use an \
             index rebuilt from the .log in memory"
        );
    }
    Ok(())
}

/// The `.txnindex` of the segment at `base`: each aborted transaction well formed and matched
/// by an ABORT marker in the `.log`, and no bytes past the last whole entry.
fn check_txn_index(
    part: &dyn PartitionSource,
    base: Offset,
    abort_markers: &HashSet<(i64, Offset)>,
    log_label: &str,
    report: &mut Report,
) -> Result<()> {
    let txn_label = file_label(part, base, SegmentFileKind::TxnIndex);
    let txn = read_segment_file(part, base, SegmentFileKind::TxnIndex)?;
    for (i, t) in txn_entries(&txn).into_iter().enumerate() {
        let at = (i * TXN_INDEX_ENTRY_SIZE) as u64;
        if t.first_offset > t.last_offset {
            report.problem(
                &txn_label,
                at,
                format!("first offset {} is after last offset {}", t.first_offset, t.last_offset),
            );
        }
        if !abort_markers.contains(&(t.producer_id, Offset(t.last_offset))) {
            report.problem(
                &txn_label,
                at,
                format!(
                    "no ABORT marker of producer {} at offset {} in {log_label}",
                    t.producer_id, t.last_offset
                ),
            );
        }
    }
    if txn.len() % TXN_INDEX_ENTRY_SIZE != 0 {
        let at = (txn.len() - txn.len() % TXN_INDEX_ENTRY_SIZE) as u64;
        report.problem(
            &txn_label,
            at,
            format!("{} invalid bytes at the end", txn.len() % TXN_INDEX_ENTRY_SIZE),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::test_support::{segment_files, three_batches, time_entry};

    #[test]
    fn a_consistent_segment_has_no_problem() {
        let (log, positions) = three_batches();
        let index = OffsetPosition {
            relative_offset: topicfs_format::RelativeOffset(3),
            position: positions[1] as u32,
        }
        .encode()
        .to_vec();
        let time_index = [time_entry(20, 3), time_entry(30, 5)].concat();
        let report = check_partition(&segment_files(log, index, time_index)).unwrap();
        assert_eq!(report, "checked t-0: 1 segments, 3 batches: 0 problems, 0 offset gaps\n");
    }

    #[test]
    fn out_of_order_time_index_entries_are_problems_at_their_position() {
        let (log, _) = three_batches();
        let time_index = [time_entry(30, 5), time_entry(20, 3)].concat();
        let report = check_partition(&segment_files(log, Vec::new(), time_index)).unwrap();
        assert!(
            report.contains(
                "t-0/00000000000000000000.timeindex position 12: out of order: timestamp 20 after 30"
            ),
            "{report}"
        );
        assert!(report.contains("position 12: out of order: offset 3 after 5"), "{report}");
        assert!(report.ends_with(": 2 problems, 0 offset gaps\n"), "{report}");
    }

    #[test]
    fn index_entries_past_the_segment_or_below_their_batch_are_problems() {
        let (log, positions) = three_batches();
        let entry = |rel, pos| {
            OffsetPosition { relative_offset: topicfs_format::RelativeOffset(rel), position: pos }
                .encode()
        };
        // Offset 1 at the batch starting at 2; offset 9 past the last offset 5.
        let index = [entry(1, positions[1] as u32), entry(9, positions[2] as u32)].concat();
        let time_index = time_entry(40, 9);
        let report = check_partition(&segment_files(log, index, time_index)).unwrap();
        assert!(report.contains("position 0: entry offset 1 position"), "{report}");
        assert!(report.contains("points at a batch starting at offset 2"), "{report}");
        assert!(
            report
                .contains(".index position 8: entry offset 9 is past the segment's last offset 5"),
            "{report}"
        );
        assert!(report.contains(".timeindex position 0: entry offset 9 is past"), "{report}");
    }
}
