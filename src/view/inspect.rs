//! Inspection files: segment files in `kafka-dump-log.sh`'s words, and a per-partition check.
//!
//! * `segments/<base>.log.dump`: what `kafka-dump-log.sh --print-data-log --files <file>`
//!   prints: `Dumping <topic>-<p>/<base>.log`, `Log starting offset: <base>`, then per batch
//!   its line and one `| offset: ...` line per record (with `key:` and `payload:`; control
//!   records with their marker), and `Found N invalid bytes at the end of <file>` when the
//!   file does not end with a whole batch. A batch whose records cannot be decoded prints
//!   `Could not read the records of the batch at position P: <why>` and the dump goes on.
//! * `segments/<base>.index.dump`, `<base>.timeindex.dump`: `Dumping ...` then one line per
//!   entry, `offset: O position: P` / `timestamp: T offset: O` (absolute offsets), stopping at
//!   the first unwritten (all-zero) slot after entry 0, as the tool does.
//! * `segments/<base>.txnindex.dump`: one line per aborted transaction, `version: V
//!   producerId: P firstOffset: F lastOffset: L lastStableOffset: S`.
//! * `<topic>/<p>/check`: in the spirit of `--index-sanity-check`, one line per finding,
//!   `<file> position <p>: <what>`, then a summary line `checked ...: N problems, M offset gaps`.
//!   Problems: batches whose CRC does not match or that cannot be decoded, trailing invalid
//!   bytes, batches whose offsets do not increase, offset index entries that do not point at a
//!   batch start or whose offset is below that batch or past the segment, offset or time index
//!   entries out of order, time index entries outside the segment, `.txnindex` entries that
//!   do not end at an ABORT marker of their producer. Offset gaps between batches are listed
//!   too but are not problems: compaction leaves them.
//!
//! Everything is rendered from the bytes [`PartitionSource::read_segment_file`] serves (the
//! preallocated zero tail of an active index is not part of them), when the file is opened.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::format::control::{ControlRecordType, parse_control_key};
use crate::format::dump::{
    batch_line, index_entry_line, invalid_bytes_line, log_starting_offset_line, record_line,
    time_index_entry_line,
};
use crate::format::index_entry::{
    OFFSET_INDEX_ENTRY_SIZE, OffsetPosition, TIME_INDEX_ENTRY_SIZE, TimestampOffset,
};
use crate::format::{
    BatchInfo, Compression, Offset, decode_batch, legacy, parse_batch_info, peek_entry, verify_crc,
};
use crate::source::{PartitionSource, SegmentFileKind, SegmentSummary};

/// Suffix of a dump file next to a segment file (`00000000000000000000.log.dump`).
pub const DUMP_SUFFIX: &str = ".dump";
/// Size of one `.txnindex` entry (`AbortedTxn.TOTAL_SIZE`).
pub const TXN_INDEX_ENTRY_SIZE: usize = 34;

/// Texts kept by an [`InspectCache`] before it starts over.
const CACHE_ENTRIES: usize = 256;
/// Files (or, for `check`, a partition's files) up to this size are rendered when stat'ed, so
/// their size is exact before the first read; larger ones only when opened.
pub const RENDER_AT_STAT_BYTES: u64 = 4 << 20;
/// Texts larger than this are not kept between opens (a handle keeps its own copy).
const MAX_CACHED_BYTES: u64 = 64 << 20;

/// A rendered text and the segments it was rendered from.
type Rendered = (Vec<SegmentSummary>, Arc<Vec<u8>>);

/// Rendered inspection texts, each reused while the segments it was rendered from are
/// unchanged (same [`SegmentSummary`]: sizes, mtime, active flag), so `ls -l` (sizes) followed
/// by `cat` renders once.
#[derive(Debug, Default)]
pub struct InspectCache {
    entries: Mutex<HashMap<String, Rendered>>,
}

impl InspectCache {
    /// An empty cache.
    pub fn new() -> InspectCache {
        InspectCache::default()
    }

    /// The dump of segment file `base` + `kind` of `part`; `NotFound` when the segment (or its
    /// `.txnindex`) does not exist.
    pub fn dump(
        &self,
        part: &dyn PartitionSource,
        base: Offset,
        kind: SegmentFileKind,
    ) -> Result<Arc<Vec<u8>>> {
        let (label, segment) = dump_segment(part, base, kind)?;
        self.get_or_render(label, vec![segment], || dump_segment_file(part, base, kind))
    }

    /// The size of the dump of `base` + `kind`: exact when it is cached or the segment file is
    /// at most [`RENDER_AT_STAT_BYTES`] (then rendered now); 0 for a larger file not rendered
    /// since it last changed, so that a `stat` never reads a large segment.
    pub fn dump_size(
        &self,
        part: &dyn PartitionSource,
        base: Offset,
        kind: SegmentFileKind,
    ) -> Result<u64> {
        let (label, segment) = dump_segment(part, base, kind)?;
        let file_size = match kind {
            SegmentFileKind::Log => segment.log_size,
            SegmentFileKind::Index => segment.index_size,
            SegmentFileKind::TimeIndex => segment.time_index_size,
            SegmentFileKind::TxnIndex => segment.txn_index_size.unwrap_or(0),
        };
        let stamp = vec![segment];
        if let Some(n) = self.cached_len(&label, &stamp) {
            return Ok(n);
        }
        if file_size > RENDER_AT_STAT_BYTES {
            return Ok(0);
        }
        let text = self.get_or_render(label, stamp, || dump_segment_file(part, base, kind))?;
        Ok(text.len() as u64)
    }

    /// The `check` report of `part`.
    pub fn check(&self, part: &dyn PartitionSource) -> Result<Arc<Vec<u8>>> {
        let key = check_key(part);
        self.get_or_render(key, part.segments()?, || check_partition(part))
    }

    /// The size of the `check` report: exact when cached or when the partition's files total
    /// at most [`RENDER_AT_STAT_BYTES`] (then rendered now); else 0 until it is read.
    pub fn check_size(&self, part: &dyn PartitionSource) -> Result<u64> {
        let key = check_key(part);
        let segments = part.segments()?;
        if let Some(n) = self.cached_len(&key, &segments) {
            return Ok(n);
        }
        let total: u64 = segments
            .iter()
            .map(|s| {
                s.log_size
                    .saturating_add(s.index_size)
                    .saturating_add(s.time_index_size)
                    .saturating_add(s.txn_index_size.unwrap_or(0))
            })
            .fold(0, u64::saturating_add);
        if total > RENDER_AT_STAT_BYTES {
            return Ok(0);
        }
        let text = self.get_or_render(key, segments, || check_partition(part))?;
        Ok(text.len() as u64)
    }

    fn cached_len(&self, key: &str, stamp: &[SegmentSummary]) -> Option<u64> {
        let entries = lock(&self.entries);
        let (s, text) = entries.get(key)?;
        (s.as_slice() == stamp).then_some(text.len() as u64)
    }

    fn get_or_render(
        &self,
        key: String,
        stamp: Vec<SegmentSummary>,
        render: impl FnOnce() -> Result<String>,
    ) -> Result<Arc<Vec<u8>>> {
        if let Some((s, text)) = lock(&self.entries).get(&key) {
            if *s == stamp {
                return Ok(Arc::clone(text));
            }
        }
        let text = Arc::new(render()?.into_bytes());
        if text.len() as u64 <= MAX_CACHED_BYTES {
            let mut entries = lock(&self.entries);
            if entries.len() >= CACHE_ENTRIES {
                entries.clear();
            }
            entries.insert(key, (stamp, Arc::clone(&text)));
        }
        Ok(text)
    }
}

/// The label and summary of the segment a dump is of; `NotFound` if it (or its `.txnindex`)
/// does not exist.
fn dump_segment(
    part: &dyn PartitionSource,
    base: Offset,
    kind: SegmentFileKind,
) -> Result<(String, SegmentSummary)> {
    let label = file_label(part, base, kind);
    let segment = part.segments()?.into_iter().find(|s| s.base_offset == base);
    let segment = segment
        .filter(|s| kind != SegmentFileKind::TxnIndex || s.txn_index_size.is_some())
        .ok_or_else(|| Error::NotFound(format!("{label}{DUMP_SUFFIX}")))?;
    Ok((label, segment))
}

fn check_key(part: &dyn PartitionSource) -> String {
    format!("{}-{}/check", part.topic(), part.partition())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The whole of one segment file as served by `part`.
pub fn read_segment_file(
    part: &dyn PartitionSource,
    base: Offset,
    kind: SegmentFileKind,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = part.read_segment_file(base, kind, out.len() as u64, &mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(buf.get(..n).unwrap_or_default());
    }
}

/// `<topic>-<p>/<base><suffix>`: how a file is named in dumps and reports (the path relative
/// to the data dir, as `kafka-dump-log.sh --files` run there would print it).
pub fn file_label(part: &dyn PartitionSource, base: Offset, kind: SegmentFileKind) -> String {
    format!(
        "{}-{}/{}{}",
        part.topic(),
        part.partition(),
        crate::format::file_name::format_base_offset(base),
        kind.suffix()
    )
}

/// The dump of one segment file (see the module docs).
pub fn dump_segment_file(
    part: &dyn PartitionSource,
    base: Offset,
    kind: SegmentFileKind,
) -> Result<String> {
    let bytes = read_segment_file(part, base, kind)?;
    let label = file_label(part, base, kind);
    Ok(match kind {
        SegmentFileKind::Log => dump_log(&label, base, &bytes),
        SegmentFileKind::Index => dump_offset_index(&label, base, &bytes),
        SegmentFileKind::TimeIndex => dump_time_index(&label, base, &bytes),
        SegmentFileKind::TxnIndex => dump_txn_index(&label, &bytes),
    })
}

/// One whole entry of a `.log` file at some position.
struct Entry<'a> {
    position: u64,
    bytes: &'a [u8],
    info: BatchInfo,
}

/// Walks the whole entries of a `.log` file's bytes; what follows the last one is invalid.
struct Entries<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Entries<'a> {
    fn new(bytes: &'a [u8]) -> Entries<'a> {
        Entries { bytes, at: 0 }
    }

    /// Bytes after the last whole entry returned (valid once the iterator ended).
    fn invalid_tail(&self) -> usize {
        self.bytes.len().saturating_sub(self.at)
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        let rest = self.bytes.get(self.at..)?;
        let header = peek_entry(rest).ok()??;
        let entry = rest.get(..header.total_size())?;
        let info = parse_batch_info(entry).ok()?;
        let position = self.at as u64;
        self.at = self.at.saturating_add(entry.len());
        Some(Entry { position, bytes: entry, info })
    }
}

/// `kafka-dump-log.sh --print-data-log` of a `.log` file's bytes.
pub fn dump_log(label: &str, base: Offset, bytes: &[u8]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Dumping {label}");
    let _ = writeln!(out, "{}", log_starting_offset_line(base));
    let mut entries = Entries::new(bytes);
    for e in entries.by_ref() {
        let valid = verify_crc(e.bytes).is_ok();
        let _ = writeln!(out, "{}", batch_line(&e.info, e.position, valid));
        if let Err(why) = dump_records(&e, &mut out) {
            let _ = writeln!(
                out,
                "Could not read the records of the batch at position {}: {why}",
                e.position
            );
        }
    }
    if entries.invalid_tail() > 0 {
        let name = label.rsplit('/').next().unwrap_or(label);
        let _ = writeln!(out, "{}", invalid_bytes_line(entries.invalid_tail() as u64, name));
    }
    out
}

/// The `| offset: ...` lines of one entry.
fn dump_records(e: &Entry<'_>, out: &mut String) -> Result<(), crate::format::DecodeError> {
    let batch = decode_batch(e.bytes)?;
    // Legacy messages print their own CRC: the entry's, or each inner message's.
    let mut legacy_crcs: Vec<u32> = Vec::new();
    if e.info.magic < 2 {
        if e.info.compression == Compression::None {
            legacy_crcs.push(e.info.crc);
        } else {
            let contents = legacy::decode_wrapper(e.bytes)?;
            let mut at = 0;
            while let Some(rest) = contents.inner.get(at..).filter(|r| !r.is_empty()) {
                let m = legacy::parse_message(rest)?;
                legacy_crcs.push(m.crc);
                at = at.saturating_add(m.size);
            }
        }
    }
    for (i, record) in batch.records().enumerate() {
        let record = record?;
        let crc = legacy_crcs.get(i).copied();
        let _ = writeln!(out, "{}", record_line(batch.info(), &record, true, crc));
    }
    Ok(())
}

/// The dump of a `.index` file's bytes.
pub fn dump_offset_index(label: &str, base: Offset, bytes: &[u8]) -> String {
    let mut out = format!("Dumping {label}\n");
    for (i, e) in offset_entries(bytes).into_iter().enumerate() {
        if i > 0 && e.relative_offset.0 == 0 && e.position == 0 {
            break;
        }
        let _ = writeln!(out, "{}", index_entry_line(e.offset(base), e.position));
    }
    out
}

/// The dump of a `.timeindex` file's bytes.
pub fn dump_time_index(label: &str, base: Offset, bytes: &[u8]) -> String {
    let mut out = format!("Dumping {label}\n");
    for (i, e) in time_entries(bytes).into_iter().enumerate() {
        if i > 0 && e.relative_offset.0 == 0 && e.timestamp == 0 {
            break;
        }
        let _ = writeln!(out, "{}", time_index_entry_line(e.timestamp, e.offset(base)));
    }
    out
}

/// One `.txnindex` entry (Kafka's `AbortedTxn` with its version).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct TxnEntry {
    version: i16,
    producer_id: i64,
    first_offset: i64,
    last_offset: i64,
    last_stable_offset: i64,
}

fn txn_entries(bytes: &[u8]) -> Vec<TxnEntry> {
    bytes
        .chunks_exact(TXN_INDEX_ENTRY_SIZE)
        .filter_map(|c| {
            let i16_at = |at: usize| c.get(at..at + 2)?.try_into().ok().map(i16::from_be_bytes);
            let i64_at = |at: usize| c.get(at..at + 8)?.try_into().ok().map(i64::from_be_bytes);
            Some(TxnEntry {
                version: i16_at(0)?,
                producer_id: i64_at(2)?,
                first_offset: i64_at(10)?,
                last_offset: i64_at(18)?,
                last_stable_offset: i64_at(26)?,
            })
        })
        .collect()
}

/// The dump of a `.txnindex` file's bytes.
pub fn dump_txn_index(label: &str, bytes: &[u8]) -> String {
    let mut out = format!("Dumping {label}\n");
    for t in txn_entries(bytes) {
        let _ = writeln!(
            out,
            "version: {} producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
            t.version, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset
        );
    }
    let rest = bytes.len() % TXN_INDEX_ENTRY_SIZE;
    if rest > 0 {
        let name = label.rsplit('/').next().unwrap_or(label);
        let _ = writeln!(out, "{}", invalid_bytes_line(rest as u64, name));
    }
    out
}

fn offset_entries(bytes: &[u8]) -> Vec<OffsetPosition> {
    (0..bytes.len() / OFFSET_INDEX_ENTRY_SIZE)
        .map_while(|n| OffsetPosition::nth(bytes, n))
        .collect()
}

fn time_entries(bytes: &[u8]) -> Vec<TimestampOffset> {
    (0..bytes.len() / TIME_INDEX_ENTRY_SIZE).map_while(|n| TimestampOffset::nth(bytes, n)).collect()
}

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
    let segments = part.segments()?;
    let mut report = Report::default();
    // The offset the next batch is expected at, across segments.
    let mut expected: Option<Offset> = None;
    for segment in &segments {
        check_segment(part, segment, &mut expected, &mut report)?;
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

fn check_segment(
    part: &dyn PartitionSource,
    segment: &SegmentSummary,
    expected: &mut Option<Offset>,
    report: &mut Report,
) -> Result<()> {
    let base = segment.base_offset;
    let log_label = file_label(part, base, SegmentFileKind::Log);
    let log = read_segment_file(part, base, SegmentFileKind::Log)?;
    // Batch starts by position, with the batch's first and last offsets.
    let mut starts: HashMap<u64, (Offset, Offset)> = HashMap::new();
    let mut abort_markers: HashSet<(i64, Offset)> = HashSet::new();
    let mut segment_end = base;
    let mut entries = Entries::new(&log);
    for e in entries.by_ref() {
        report.batches += 1;
        let info = &e.info;
        if let Err(why) = verify_crc(e.bytes) {
            report.problem(&log_label, e.position, why);
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
                    report.problem(&log_label, e.position, why);
                }
                info.base_offset
            }
        };
        if first < base {
            report.problem(
                &log_label,
                e.position,
                format!("offset {first} is below the segment's base offset {base}"),
            );
        }
        if let Some(x) = *expected {
            if first < x {
                report.problem(
                    &log_label,
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
        starts.insert(e.position, (first, info.last_offset));
    }
    if entries.invalid_tail() > 0 {
        let position = (log.len() - entries.invalid_tail()) as u64;
        report.problem(
            &log_label,
            position,
            format!("{} invalid bytes at the end", entries.invalid_tail()),
        );
    }

    let index_label = file_label(part, base, SegmentFileKind::Index);
    let index = read_segment_file(part, base, SegmentFileKind::Index)?;
    let mut previous: Option<OffsetPosition> = None;
    for (i, e) in offset_entries(&index).into_iter().enumerate() {
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

    // Index files the source does not use as they are (the problems in them are listed
    // above, from the bytes on disk): a note, not a problem of its own.
    for (kind, position, what) in part.repaired_segment_files(base)? {
        let label = file_label(part, base, kind);
        let _ = writeln!(
            report.lines,
            "{label} position {position}: failed the sanity check ({what}); lookups use an \
             index rebuilt from the .log in memory"
        );
    }

    if segment.txn_index_size.is_some() {
        let txn_label = file_label(part, base, SegmentFileKind::TxnIndex);
        let txn = read_segment_file(part, base, SegmentFileKind::TxnIndex)?;
        for (i, t) in txn_entries(&txn).into_iter().enumerate() {
            let at = (i * TXN_INDEX_ENTRY_SIZE) as u64;
            if t.first_offset > t.last_offset {
                report.problem(
                    &txn_label,
                    at,
                    format!(
                        "first offset {} is after last offset {}",
                        t.first_offset, t.last_offset
                    ),
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
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::format::{BatchSpec, NewRecord, encode_batch};
    use crate::source::{
        AbortedTxn, AppendInfo, BatchChunk, OffsetQuery, PartitionSummary, ReadCursor,
    };

    /// One sealed segment served from memory: only what the check reads.
    struct OneSegment {
        log: Vec<u8>,
        index: Vec<u8>,
        time_index: Vec<u8>,
    }

    impl PartitionSource for OneSegment {
        fn topic(&self) -> &str {
            "t"
        }
        fn partition(&self) -> u32 {
            0
        }
        fn summary(&self) -> Result<PartitionSummary> {
            Err(Error::Unsupported("summary"))
        }
        fn segments(&self) -> Result<Vec<SegmentSummary>> {
            Ok(vec![SegmentSummary {
                base_offset: Offset(0),
                log_size: self.log.len() as u64,
                index_size: self.index.len() as u64,
                time_index_size: self.time_index.len() as u64,
                txn_index_size: None,
                max_timestamp: None,
                is_active: false,
                last_modified: SystemTime::UNIX_EPOCH,
            }])
        }
        fn offset_for(&self, _: OffsetQuery) -> Result<Offset> {
            Err(Error::Unsupported("offset_for"))
        }
        fn seek(&self, _: Offset) -> Result<ReadCursor> {
            Err(Error::Unsupported("seek"))
        }
        fn read(&self, _: &ReadCursor, _: usize) -> Result<BatchChunk> {
            Err(Error::Unsupported("read"))
        }
        fn aborted_transactions(&self, _: Offset, _: Offset) -> Result<Vec<AbortedTxn>> {
            Ok(Vec::new())
        }
        fn append(&self, _: &[NewRecord]) -> Result<AppendInfo> {
            Err(Error::ReadOnly)
        }
        fn sync(&self) -> Result<()> {
            Ok(())
        }
        fn read_segment_file(
            &self,
            _: Offset,
            kind: SegmentFileKind,
            pos: u64,
            buf: &mut [u8],
        ) -> Result<usize> {
            let file = match kind {
                SegmentFileKind::Log => &self.log,
                SegmentFileKind::Index => &self.index,
                SegmentFileKind::TimeIndex => &self.time_index,
                SegmentFileKind::TxnIndex => return Err(Error::NotFound("txnindex".into())),
            };
            let rest = file.get(pos as usize..).unwrap_or_default();
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            Ok(n)
        }
    }

    /// Three batches of two records: offsets 0-1, 2-3, 4-5 (the last at 10, 20, 30 ms).
    fn three_batches() -> (Vec<u8>, Vec<u64>) {
        let mut log = Vec::new();
        let mut positions = Vec::new();
        for b in 0..3i64 {
            positions.push(log.len() as u64);
            let spec = BatchSpec { base_offset: Offset(2 * b), ..BatchSpec::default() };
            let record =
                |t| NewRecord { timestamp: t, value: Some(b"v".to_vec()), ..NewRecord::default() };
            log.extend(encode_batch(&spec, &[record(10 * b + 5), record(10 * b + 10)]).unwrap());
        }
        (log, positions)
    }

    fn time_entry(timestamp: i64, relative: u32) -> Vec<u8> {
        TimestampOffset { timestamp, relative_offset: crate::format::RelativeOffset(relative) }
            .encode()
            .to_vec()
    }

    #[test]
    fn a_consistent_segment_has_no_problem() {
        let (log, positions) = three_batches();
        let index = OffsetPosition {
            relative_offset: crate::format::RelativeOffset(3),
            position: positions[1] as u32,
        }
        .encode()
        .to_vec();
        let time_index = [time_entry(20, 3), time_entry(30, 5)].concat();
        let report = check_partition(&OneSegment { log, index, time_index }).unwrap();
        assert_eq!(report, "checked t-0: 1 segments, 3 batches: 0 problems, 0 offset gaps\n");
    }

    #[test]
    fn out_of_order_time_index_entries_are_problems_at_their_position() {
        let (log, _) = three_batches();
        let time_index = [time_entry(30, 5), time_entry(20, 3)].concat();
        let report = check_partition(&OneSegment { log, index: Vec::new(), time_index }).unwrap();
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
            OffsetPosition { relative_offset: crate::format::RelativeOffset(rel), position: pos }
                .encode()
        };
        // Offset 1 at the batch starting at 2; offset 9 past the last offset 5.
        let index = [entry(1, positions[1] as u32), entry(9, positions[2] as u32)].concat();
        let time_index = time_entry(40, 9);
        let report = check_partition(&OneSegment { log, index, time_index }).unwrap();
        assert!(report.contains("position 0: entry offset 1 position"), "{report}");
        assert!(report.contains("points at a batch starting at offset 2"), "{report}");
        assert!(
            report
                .contains(".index position 8: entry offset 9 is past the segment's last offset 5"),
            "{report}"
        );
        assert!(report.contains(".timeindex position 0: entry offset 9 is past"), "{report}");
    }

    #[test]
    fn dumps_stop_at_the_first_unwritten_index_slot() {
        let index = [
            OffsetPosition { relative_offset: crate::format::RelativeOffset(3), position: 100 }
                .encode(),
            [0u8; 8],
        ]
        .concat();
        assert_eq!(
            dump_offset_index("t-0/00000000000000000010.index", Offset(10), &index),
            "Dumping t-0/00000000000000000010.index\noffset: 13 position: 100\n"
        );
    }
}
