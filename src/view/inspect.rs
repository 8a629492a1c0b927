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
//!   do not end at an ABORT marker of their producer, segment files that are not regular files
//!   (`<file>: refused: a FIFO, not a regular file (not opened)`, see `storage::open`), and
//!   bytes after the active segment's last whole batch that do not start like a batch (a
//!   `.log` of text). Offset gaps between batches are listed too but are not problems:
//!   compaction leaves them.
//!
//! Everything is rendered from the bytes [`SegmentFiles::read_segment_file`] serves (the
//! preallocated zero tail of an active index is not part of them).
//!
//! # Memory
//!
//! A `.log` is never held whole: it is read in chunks of [`CHUNK_BYTES`] (a single batch larger
//! than that is read whole). Its dump is a [`LogDump`]: one counting pass renders each batch
//! only to measure it and keeps a checkpoint (text position, log position) at a batch start
//! every [`CHECKPOINT_TEXT_BYTES`] of text; a read renders from the checkpoint at or before it
//! only the batches it needs. Index dumps and `check` reports are small (an index is at most
//! `segment.index.bytes`) and are rendered whole, once, and shared by the handles reading them.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::format::control::{ControlRecordType, parse_control_key};
use crate::format::dump::{
    batch_line, index_entry_line, invalid_bytes_line, log_starting_offset_line,
    time_index_entry_line, write_record_line,
};
use crate::format::index_entry::{
    OFFSET_INDEX_ENTRY_SIZE, OffsetPosition, TIME_INDEX_ENTRY_SIZE, TimestampOffset,
};
use crate::format::{
    BatchInfo, Compression, Offset, decode_batch, legacy, parse_batch_info, peek_entry, verify_crc,
};
use crate::source::PartitionSource;
use crate::storage::segment_files::{SegmentFileKind, SegmentFiles, SegmentSummary};
use crate::sync::lock;

/// The segment files of `part`; `NotFound` (ENOENT) for a source without local files, whose
/// tree has no inspection files.
pub fn files(part: &dyn PartitionSource) -> Result<&dyn SegmentFiles> {
    part.segment_files().ok_or_else(|| {
        Error::NotFound(format!("segment files of {}-{}", part.topic(), part.partition()))
    })
}

/// Suffix of a dump file next to a segment file (`00000000000000000000.log.dump`).
pub const DUMP_SUFFIX: &str = ".dump";
/// Size of one `.txnindex` entry (`AbortedTxn.TOTAL_SIZE`).
pub const TXN_INDEX_ENTRY_SIZE: usize = crate::format::txn_index::ENTRY_SIZE;

/// Texts kept by an [`InspectCache`] before it starts over.
const CACHE_ENTRIES: usize = 256;

/// Sizes of inspection files kept (see [`InspectCache`]): 16,384 dump files are the segments
/// files of about 5,000 segments, at roughly 150 bytes each.
const SIZE_ENTRIES: usize = 16_384;
/// Files (or, for `check`, a partition's files) up to this size are rendered (a `.log` dump:
/// counted) when stat'ed, so their size is exact before the first read; larger ones only when
/// opened.
pub const RENDER_AT_STAT_BYTES: u64 = 4 << 20;
/// Whole texts larger than this are not kept between opens (each open renders its own).
const MAX_CACHED_BYTES: u64 = 64 << 20;
/// Bytes of a `.log` read at a time by the counting pass and by `check`.
pub const CHUNK_BYTES: usize = 1 << 20;
/// Bytes of a `.log` read at a time by the reads of a `.log` dump (they need one checkpoint
/// interval of text, a fraction of this).
const READ_CHUNK_BYTES: usize = 256 << 10;
/// Text between two checkpoints of a [`LogDump`] (at least; a checkpoint is at a batch start).
pub const CHECKPOINT_TEXT_BYTES: u64 = 256 << 10;

/// An inspection file's contents, shared by the [`InspectCache`] and the handles reading it.
#[derive(Clone)]
pub enum Inspection {
    /// A text rendered whole: index dumps and `check` reports.
    Text(Arc<Vec<u8>>),
    /// A `.log` dump, rendered batch by batch from the partition's `.log` as it is read.
    Log(Arc<LogDump>, Arc<dyn PartitionSource>),
}

impl std::fmt::Debug for Inspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Inspection::Text(text) => write!(f, "Text({} bytes)", text.len()),
            Inspection::Log(dump, _) => write!(f, "{dump:?}"),
        }
    }
}

impl Inspection {
    /// Exactly the bytes a full read returns.
    pub fn size(&self) -> u64 {
        match self {
            Inspection::Text(text) => text.len() as u64,
            Inspection::Log(dump, _) => dump.size(),
        }
    }
}

/// What the [`InspectCache`] keeps of an inspection file: no partition, so that a cached dump
/// never keeps a deleted partition (and its open files) alive.
#[derive(Clone, Debug)]
enum Rendering {
    Text(Arc<Vec<u8>>),
    Log(Arc<LogDump>),
}

impl Rendering {
    /// Exactly the bytes a full read returns.
    fn size(&self) -> u64 {
        match self {
            Rendering::Text(text) => text.len() as u64,
            Rendering::Log(dump) => dump.size(),
        }
    }

    /// Bytes this keeps in memory (what the cache weighs).
    fn memory(&self) -> u64 {
        match self {
            Rendering::Text(text) => text.len() as u64,
            Rendering::Log(dump) => dump.memory(),
        }
    }

    /// The inspection `part`'s handles read.
    fn of(self, part: &Arc<dyn PartitionSource>) -> Inspection {
        match self {
            Rendering::Text(text) => Inspection::Text(text),
            Rendering::Log(dump) => Inspection::Log(dump, Arc::clone(part)),
        }
    }
}

/// One open inspection file: the shared contents and, for a `.log` dump, the text rendered
/// past the last read (so that sequential reads render each batch once).
pub struct InspectionReader {
    inspection: Inspection,
    window: Mutex<Window>,
}

impl std::fmt::Debug for InspectionReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.inspection)
    }
}

impl InspectionReader {
    /// A reader at the start of `inspection`.
    pub fn new(inspection: Inspection) -> InspectionReader {
        InspectionReader { inspection, window: Mutex::new(Window::default()) }
    }

    /// Exactly the bytes a full read returns.
    pub fn size(&self) -> u64 {
        self.inspection.size()
    }

    /// Up to `len` bytes at `offset` (fewer at the end): exactly the bytes the whole text has
    /// there. A `.log` dump whose segment no longer holds the batches it counted fails with
    /// [`Error::StaleHandle`].
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        match &self.inspection {
            Inspection::Text(text) => {
                let end = offset.saturating_add(len as u64);
                Ok(slice_at(text, offset, end).to_vec())
            }
            Inspection::Log(dump, part) => {
                dump.read_at(part.as_ref(), &mut lock(&self.window), offset, len)
            }
        }
    }
}

/// `bytes[from..to]`, clamped to `bytes`.
fn slice_at(bytes: &[u8], from: u64, to: u64) -> &[u8] {
    let at = |n: u64| usize::try_from(n).unwrap_or(usize::MAX).min(bytes.len());
    bytes.get(at(from)..at(to).max(at(from))).unwrap_or_default()
}

/// A cached inspection and the segments it was rendered from.
type Rendered = (Vec<SegmentSummary>, Rendering);

/// Rendered inspection files (a `.log` dump: its counting pass), each reused while the
/// segments it was rendered from are unchanged (same [`SegmentSummary`]: sizes, mtime, active
/// flag), so `ls -l` (sizes) followed by `cat` renders once.
///
/// **Invariant**: a size in `sizes` is the size of the rendering of its key from exactly the
/// segments stored with it; it is used only while those segments are unchanged. Sizes are kept
/// apart from the renderings (a few dozen bytes each against a rendering's text or checkpoints)
/// so that many more of them are kept ([`SIZE_ENTRIES`] against [`CACHE_ENTRIES`]): a second
/// `ls -l segments/` of a partition with more dump files than renderings are kept answers from
/// them instead of reading every small segment again.
#[derive(Debug, Default)]
pub struct InspectCache {
    entries: Mutex<HashMap<String, Rendered>>,
    sizes: Mutex<HashMap<String, (Vec<SegmentSummary>, u64)>>,
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
        part: &Arc<dyn PartitionSource>,
        base: Offset,
        kind: SegmentFileKind,
    ) -> Result<Inspection> {
        let (label, segment) = dump_segment(part.as_ref(), base, kind)?;
        let stamp = vec![segment.clone()];
        let rendering =
            self.get_or_render(label, stamp, || render_dump(part.as_ref(), &segment, kind))?;
        Ok(rendering.of(part))
    }

    /// The size of the dump of `base` + `kind`: exact when it is cached or the segment file is
    /// at most [`RENDER_AT_STAT_BYTES`] (then rendered or counted now); 0 for a larger file not
    /// opened since it last changed, so that a `stat` never reads a large segment.
    pub fn dump_size(
        &self,
        part: &Arc<dyn PartitionSource>,
        base: Offset,
        kind: SegmentFileKind,
    ) -> Result<u64> {
        let (label, segment) = dump_segment(part.as_ref(), base, kind)?;
        let file_size = match kind {
            SegmentFileKind::Log => segment.log_size,
            SegmentFileKind::Index => segment.index_size,
            SegmentFileKind::TimeIndex => segment.time_index_size,
            SegmentFileKind::TxnIndex => segment.txn_index_size.unwrap_or(0),
        };
        let stamp = vec![segment.clone()];
        if let Some(n) = self.cached_size(&label, &stamp) {
            return Ok(n);
        }
        if file_size > RENDER_AT_STAT_BYTES {
            return Ok(0);
        }
        let dump =
            self.get_or_render(label, stamp, || render_dump(part.as_ref(), &segment, kind))?;
        Ok(dump.size())
    }

    /// The `check` report of `part`.
    pub fn check(&self, part: &Arc<dyn PartitionSource>) -> Result<Inspection> {
        let key = check_key(part.as_ref())?;
        let report = self.get_or_render(key, files(part.as_ref())?.segments()?, || {
            render_check(part.as_ref())
        })?;
        Ok(report.of(part))
    }

    /// The size of the `check` report: exact when cached or when the partition's files total
    /// at most [`RENDER_AT_STAT_BYTES`] (then rendered now); else 0 until it is read.
    pub fn check_size(&self, part: &dyn PartitionSource) -> Result<u64> {
        let key = check_key(part)?;
        let segments = files(part)?.segments()?;
        if let Some(n) = self.cached_size(&key, &segments) {
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
        let report = self.get_or_render(key, segments, || render_check(part))?;
        Ok(report.size())
    }

    fn cached_size(&self, key: &str, stamp: &[SegmentSummary]) -> Option<u64> {
        if let Some((s, rendering)) = lock(&self.entries).get(key)
            && s.as_slice() == stamp
        {
            return Some(rendering.size());
        }
        let sizes = lock(&self.sizes);
        let (s, size) = sizes.get(key)?;
        (s.as_slice() == stamp).then_some(*size)
    }

    fn get_or_render(
        &self,
        key: String,
        stamp: Vec<SegmentSummary>,
        render: impl FnOnce() -> Result<Rendering>,
    ) -> Result<Rendering> {
        if let Some((s, rendering)) = lock(&self.entries).get(&key) {
            if *s == stamp {
                return Ok(rendering.clone());
            }
        }
        let rendering = render()?;
        {
            let mut sizes = lock(&self.sizes);
            if sizes.len() >= SIZE_ENTRIES && !sizes.contains_key(&key) {
                sizes.clear();
            }
            sizes.insert(key.clone(), (stamp.clone(), rendering.size()));
        }
        if rendering.memory() <= MAX_CACHED_BYTES {
            let mut entries = lock(&self.entries);
            if entries.len() >= CACHE_ENTRIES {
                entries.clear();
            }
            entries.insert(key, (stamp, rendering.clone()));
        }
        Ok(rendering)
    }
}

/// The dump of one file of `segment`: a [`LogDump`] counted now for the `.log`, a whole text
/// for an index.
fn render_dump(
    part: &dyn PartitionSource,
    segment: &SegmentSummary,
    kind: SegmentFileKind,
) -> Result<Rendering> {
    let base = segment.base_offset;
    let text = match kind {
        SegmentFileKind::Log => {
            return Ok(Rendering::Log(Arc::new(LogDump::count(part, segment)?)));
        }
        SegmentFileKind::Index => {
            let bytes = read_segment_file(part, base, kind)?;
            dump_offset_index(&file_label(part, base, kind), base, &bytes)
        }
        SegmentFileKind::TimeIndex => {
            let bytes = read_segment_file(part, base, kind)?;
            dump_time_index(&file_label(part, base, kind), base, &bytes)
        }
        SegmentFileKind::TxnIndex => {
            let bytes = read_segment_file(part, base, kind)?;
            dump_txn_index(&file_label(part, base, kind), &bytes)
        }
    };
    Ok(Rendering::Text(Arc::new(text.into_bytes())))
}

fn render_check(part: &dyn PartitionSource) -> Result<Rendering> {
    Ok(Rendering::Text(Arc::new(check_partition(part)?.into_bytes())))
}

/// The label and summary of the segment a dump is of; `NotFound` if it (or its `.txnindex`)
/// does not exist.
fn dump_segment(
    part: &dyn PartitionSource,
    base: Offset,
    kind: SegmentFileKind,
) -> Result<(String, SegmentSummary)> {
    let label = file_label(part, base, kind);
    let segment = files(part)?.segments()?.into_iter().find(|s| s.base_offset == base);
    let segment = segment
        .filter(|s| kind != SegmentFileKind::TxnIndex || s.txn_index_size.is_some())
        .ok_or_else(|| Error::NotFound(format!("{label}{DUMP_SUFFIX}")))?;
    Ok((label, segment))
}

/// The cache key of a `check` report: the partition, and the problems of files outside the
/// segments (refused names, bytes that are not batches), which change without changing the
/// segments the cached report is stamped with.
fn check_key(part: &dyn PartitionSource) -> Result<String> {
    let mut key = format!("{}-{}/check", part.topic(), part.partition());
    for p in files(part)?.file_problems()? {
        let _ = write!(key, "\n{} {:?} {}", p.name, p.position, p.what);
    }
    Ok(key)
}

/// The whole of one segment file as served by `part` (for index files, which are small).
pub fn read_segment_file(
    part: &dyn PartitionSource,
    base: Offset,
    kind: SegmentFileKind,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = files(part)?.read_segment_file(base, kind, out.len() as u64, &mut buf)?;
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

/// A position in a `.log` dump: where the text of the batch at `log` starts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Checkpoint {
    /// Position in the dump's text.
    text: u64,
    /// Position in the `.log`.
    log: u64,
}

/// The dump of a `.log` as it was at its counting pass, rendered piece by piece as it is read:
/// `head` (the `Dumping` and `Log starting offset` lines), the body (the lines of each whole
/// batch), `foot` (the `Found N invalid bytes` line, or nothing).
///
/// **Invariants**: `checkpoints` is not empty, its first entry is (`head.len()`, 0) and both
/// positions strictly increase; every entry's `log` is the position of a whole batch whose text
/// starts at `text`; `body_end` is where the text and the `.log` position are after the last
/// whole batch (at or after the last checkpoint); the `.log` held `foot`'s invalid bytes from
/// `body_end.log` to its size at the counting pass.
pub struct LogDump {
    base: Offset,
    /// `<topic>-<p>/<base>.log`.
    label: String,
    head: String,
    foot: String,
    checkpoints: Vec<Checkpoint>,
    body_end: Checkpoint,
}

impl std::fmt::Debug for LogDump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogDump")
            .field("file", &self.label)
            .field("size", &self.size())
            .field("checkpoints", &self.checkpoints.len())
            .field("body_end", &self.body_end)
            .finish()
    }
}

impl LogDump {
    /// Counts the dump of `segment`'s `.log` (its first `log_size` bytes) in one pass of
    /// [`CHUNK_BYTES`] reads, keeping a checkpoint every [`CHECKPOINT_TEXT_BYTES`] of text.
    pub fn count(part: &dyn PartitionSource, segment: &SegmentSummary) -> Result<LogDump> {
        LogDump::count_with(part, segment, CHECKPOINT_TEXT_BYTES, CHUNK_BYTES)
    }

    fn count_with(
        part: &dyn PartitionSource,
        segment: &SegmentSummary,
        interval: u64,
        chunk: usize,
    ) -> Result<LogDump> {
        let base = segment.base_offset;
        let label = file_label(part, base, SegmentFileKind::Log);
        let head = format!("Dumping {label}\n{}\n", log_starting_offset_line(base));
        let mut text = head.len() as u64;
        let mut checkpoints = vec![Checkpoint { text, log: 0 }];
        let mut entries = ChunkedEntries::new(base, 0, segment.log_size, chunk);
        let mut scratch = String::new();
        while let Some(e) = entries.next(part)? {
            let last = checkpoints.last().map_or(0, |c| c.text);
            if text.saturating_sub(last) >= interval {
                checkpoints.push(Checkpoint { text, log: e.position });
            }
            scratch.clear();
            render_entry(&e, &mut scratch);
            text = text.saturating_add(scratch.len() as u64);
        }
        let body_end = Checkpoint { text, log: entries.position() };
        let invalid = entries.end_of_file(part)?.saturating_sub(body_end.log);
        let foot = if invalid > 0 {
            let name = label.rsplit('/').next().unwrap_or(&label);
            format!("{}\n", invalid_bytes_line(invalid, name))
        } else {
            String::new()
        };
        Ok(LogDump { base, label, head, foot, checkpoints, body_end })
    }

    /// Exactly the bytes a full read returns.
    pub fn size(&self) -> u64 {
        self.body_end.text.saturating_add(self.foot.len() as u64)
    }

    /// Bytes this keeps in memory.
    fn memory(&self) -> u64 {
        let checkpoints = self.checkpoints.len().saturating_mul(size_of::<Checkpoint>());
        let texts =
            self.label.len().saturating_add(self.head.len()).saturating_add(self.foot.len());
        checkpoints.saturating_add(texts) as u64
    }

    /// Up to `len` bytes at `offset`, rendered from `part`'s `.log`, continuing the text
    /// `window` holds when it can.
    fn read_at(
        &self,
        part: &dyn PartitionSource,
        window: &mut Window,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>> {
        let end = offset.saturating_add(len as u64).min(self.size());
        let mut out = Vec::with_capacity(usize::try_from(end.saturating_sub(offset)).unwrap_or(0));
        let head_end = self.head.len() as u64;
        if offset < head_end {
            out.extend_from_slice(slice_at(self.head.as_bytes(), offset, end.min(head_end)));
        }
        let (from, to) = (offset.max(head_end), end.min(self.body_end.text));
        if from < to {
            self.read_body(part, window, from, to, &mut out)?;
        }
        let foot_start = self.body_end.text;
        if end > foot_start {
            let (from, to) = (offset.max(foot_start) - foot_start, end - foot_start);
            out.extend_from_slice(slice_at(self.foot.as_bytes(), from, to));
        }
        Ok(out)
    }

    /// Appends the body text `from..to` (within the body) to `out`, rendering the batches it
    /// covers from where `window` ends or from the checkpoint at or before `from`, and on to
    /// the next checkpoint (or the body's end): every byte returned lies in a stretch whose
    /// length was checked against the counting pass.
    fn read_body(
        &self,
        part: &dyn PartitionSource,
        window: &mut Window,
        from: u64,
        to: u64,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let window_end = window.start.saturating_add(window.text.len() as u64);
        if window.reader.is_none() || from < window.start || from > window_end {
            let i = self.checkpoints.partition_point(|c| c.text <= from).saturating_sub(1);
            let first = Checkpoint { text: self.head.len() as u64, log: 0 };
            let at = self.checkpoints.get(i).copied().unwrap_or(first);
            let reader =
                ChunkedEntries::new(self.base, at.log, self.body_end.log, READ_CHUNK_BYTES);
            *window = Window {
                start: at.text,
                text: Vec::new(),
                reader: Some(reader),
                next_checkpoint: i.saturating_add(1),
                at_checkpoint: true,
            };
        }
        let Window { start, text, reader: Some(reader), next_checkpoint, at_checkpoint } = window
        else {
            return Err(self.changed());
        };
        // Only text at or after `from` can serve this read or the next sequential one.
        let done = slice_at(text, 0, from.saturating_sub(*start)).len();
        text.drain(..done);
        *start = start.saturating_add(done as u64);
        let mut scratch = String::new();
        while start.saturating_add(text.len() as u64) < to || !*at_checkpoint {
            let Some(e) = reader.next(part)? else {
                return Err(self.changed());
            };
            scratch.clear();
            render_entry(&e, &mut scratch);
            text.extend_from_slice(scratch.as_bytes());
            let here = Checkpoint {
                text: start.saturating_add(text.len() as u64),
                log: reader.position(),
            };
            *at_checkpoint = if here.log == self.body_end.log {
                if here != self.body_end {
                    return Err(self.changed());
                }
                true
            } else {
                match self.checkpoints.get(*next_checkpoint) {
                    Some(c) if c.log < here.log || (c.log == here.log && *c != here) => {
                        return Err(self.changed());
                    }
                    Some(c) if *c == here => {
                        *next_checkpoint = next_checkpoint.saturating_add(1);
                        true
                    }
                    _ => false,
                }
            };
        }
        let (from, to) = (from.saturating_sub(*start), to.saturating_sub(*start));
        out.extend_from_slice(slice_at(text, from, to));
        Ok(())
    }

    /// The error of a read that found other batches than the counting pass did (the segment
    /// was replaced or truncated since): the open dump no longer describes the file.
    fn changed(&self) -> Error {
        log::debug!("{}: the segment changed since its dump was opened", self.label);
        Error::StaleHandle
    }
}

/// The text a reader of a [`LogDump`] rendered past its last read, and where the `.log`
/// continues after it.
#[derive(Default)]
struct Window {
    /// Text position of `text`'s first byte.
    start: u64,
    /// Body text from `start` to where `reader` continues.
    text: Vec<u8>,
    /// At the batch after `text`; `None` before the first read.
    reader: Option<ChunkedEntries>,
    /// Index of the first checkpoint `reader` has not passed yet.
    next_checkpoint: usize,
    /// Whether `reader` is at a checkpoint (or the body's end) and the text up to it matched
    /// the counting pass.
    at_checkpoint: bool,
}

/// One whole entry of a `.log` file at some position.
struct Entry<'a> {
    position: u64,
    bytes: &'a [u8],
    info: BatchInfo,
}

/// What the bytes at the start of a `.log` file's remainder hold.
enum Frame {
    /// A whole entry of `size` bytes.
    Whole { size: usize, info: BatchInfo },
    /// The start of an entry that needs `needed` bytes (more than there are).
    Short { needed: usize },
    /// Bytes that do not start an entry: the whole entries end here.
    Invalid,
}

/// Frames the entry at the start of `rest` as `FileLogInputStream` does.
fn frame(rest: &[u8]) -> Frame {
    match peek_entry(rest) {
        Err(_) => Frame::Invalid,
        Ok(None) => Frame::Short { needed: rest.len().saturating_add(1) },
        Ok(Some(header)) => match rest.get(..header.total_size()) {
            None => Frame::Short { needed: header.total_size() },
            Some(entry) => match parse_batch_info(entry) {
                Ok(info) => Frame::Whole { size: entry.len(), info },
                Err(_) => Frame::Invalid,
            },
        },
    }
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
        let Frame::Whole { size, info } = frame(rest) else { return None };
        let position = self.at as u64;
        self.at = self.at.saturating_add(size);
        Some(Entry { position, bytes: rest.get(..size)?, info })
    }
}

/// Walks the whole entries of a `.log` file from a batch start, reading it through
/// [`SegmentFiles::read_segment_file`] a chunk at a time: it holds one chunk, or one entry
/// when an entry is larger.
///
/// **Invariant**: `buf` holds the file's bytes from `buf_start`; the next entry starts at
/// `buf[at]`; nothing at or past `limit` is read.
struct ChunkedEntries {
    base: Offset,
    buf: Vec<u8>,
    buf_start: u64,
    at: usize,
    limit: u64,
    chunk: usize,
    /// The file (or `limit`) ended at `buf`'s end.
    eof: bool,
    /// The whole entries ended.
    done: bool,
}

impl ChunkedEntries {
    /// Entries of the `.log` of segment `base` from `position` (a batch start), reading
    /// `chunk` bytes at a time and nothing at or past `limit`.
    fn new(base: Offset, position: u64, limit: u64, chunk: usize) -> ChunkedEntries {
        ChunkedEntries {
            base,
            buf: Vec::new(),
            buf_start: position,
            at: 0,
            limit,
            chunk: chunk.max(1),
            eof: false,
            done: false,
        }
    }

    /// Position of the next entry (once the entries ended: where the invalid bytes start).
    fn position(&self) -> u64 {
        self.buf_start.saturating_add(self.at as u64)
    }

    /// The next whole entry; `None` once the bytes left do not start one.
    fn next(&mut self, part: &dyn PartitionSource) -> Result<Option<Entry<'_>>> {
        while !self.done {
            match frame(self.buf.get(self.at..).unwrap_or_default()) {
                Frame::Whole { size, info } => {
                    let position = self.position();
                    let start = self.at;
                    self.at = start.saturating_add(size);
                    let bytes = self.buf.get(start..self.at).unwrap_or_default();
                    return Ok(Some(Entry { position, bytes, info }));
                }
                Frame::Short { needed } if !self.eof => self.fill(part, needed)?,
                Frame::Short { .. } | Frame::Invalid => self.done = true,
            }
        }
        Ok(None)
    }

    /// Drops the bytes before the next entry and reads until `buf` holds `needed` bytes (at
    /// least a chunk) or the file ends.
    fn fill(&mut self, part: &dyn PartitionSource, needed: usize) -> Result<()> {
        let consumed = self.at.min(self.buf.len());
        self.buf.drain(..consumed);
        self.buf_start = self.buf_start.saturating_add(consumed as u64);
        self.at = 0;
        let want = needed.max(self.chunk);
        while self.buf.len() < want {
            let pos = self.buf_start.saturating_add(self.buf.len() as u64);
            let room = (want - self.buf.len()).min(self.chunk);
            let room = usize::try_from(self.limit.saturating_sub(pos)).unwrap_or(room).min(room);
            if room == 0 {
                self.eof = true;
                break;
            }
            let old = self.buf.len();
            self.buf.resize(old.saturating_add(room), 0);
            let target = self.buf.get_mut(old..).unwrap_or_default();
            let n = files(part)?.read_segment_file(self.base, SegmentFileKind::Log, pos, target)?;
            self.buf.truncate(old.saturating_add(n.min(room)));
            if n == 0 {
                self.eof = true;
                break;
            }
        }
        Ok(())
    }

    /// Where the file (or `limit`) ends, reading (and dropping) whatever follows the entries.
    fn end_of_file(mut self, part: &dyn PartitionSource) -> Result<u64> {
        loop {
            let end = self.buf_start.saturating_add(self.buf.len() as u64);
            if self.eof {
                return Ok(end);
            }
            self.at = self.buf.len();
            self.fill(part, self.chunk)?;
        }
    }
}

/// `kafka-dump-log.sh --print-data-log` of a `.log` file's bytes, rendered whole: the
/// reference a [`LogDump`] reads as, for inputs small enough to hold.
pub fn dump_log(label: &str, base: Offset, bytes: &[u8]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Dumping {label}");
    let _ = writeln!(out, "{}", log_starting_offset_line(base));
    let mut entries = Entries::new(bytes);
    for e in entries.by_ref() {
        render_entry(&e, &mut out);
    }
    if entries.invalid_tail() > 0 {
        let name = label.rsplit('/').next().unwrap_or(label);
        let _ = writeln!(out, "{}", invalid_bytes_line(entries.invalid_tail() as u64, name));
    }
    out
}

/// The lines of one entry in a `.log` dump: the batch line, then its records' lines (or why
/// they could not be read).
fn render_entry(e: &Entry<'_>, out: &mut String) {
    let valid = verify_crc(e.bytes).is_ok();
    let _ = writeln!(out, "{}", batch_line(&e.info, e.position, valid));
    if let Err(why) = dump_records(e, out) {
        let _ = writeln!(
            out,
            "Could not read the records of the batch at position {}: {why}",
            e.position
        );
    }
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
        write_record_line(out, batch.info(), &record, true, crc);
        out.push('\n');
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
    crate::format::txn_index::entries(bytes)
        .map(|(_, e)| TxnEntry {
            version: e.version,
            producer_id: e.producer_id,
            first_offset: e.first_offset.0,
            last_offset: e.last_offset.0,
            last_stable_offset: e.last_stable_offset.0,
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
    use std::time::SystemTime;

    use super::*;
    use crate::format::{BatchSpec, NewRecord, encode_batch};
    use crate::source::{
        AbortedTxn, AppendInfo, BatchChunk, OffsetQuery, PartitionSummary, ReadCursor,
    };

    /// `count` sealed segments (base offsets 0, 1000, ...) served from memory with the same
    /// files (only what the check and the dumps read), counting the reads of their files.
    #[derive(Default)]
    struct Segments {
        log: Vec<u8>,
        index: Vec<u8>,
        time_index: Vec<u8>,
        count: i64,
        reads: std::sync::atomic::AtomicUsize,
    }

    /// One sealed segment at base offset 0 with these files.
    fn segment_files(log: Vec<u8>, index: Vec<u8>, time_index: Vec<u8>) -> Segments {
        Segments { log, index, time_index, count: 1, ..Segments::default() }
    }

    impl PartitionSource for Segments {
        fn topic(&self) -> &str {
            "t"
        }
        fn partition(&self) -> u32 {
            0
        }
        fn summary(&self) -> Result<PartitionSummary> {
            Err(Error::Unsupported("summary"))
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
        fn segment_files(&self) -> Option<&dyn SegmentFiles> {
            Some(self)
        }
    }

    impl SegmentFiles for Segments {
        fn segments(&self) -> Result<Vec<SegmentSummary>> {
            Ok((0..self.count)
                .map(|i| SegmentSummary {
                    base_offset: Offset(i * 1000),
                    log_size: self.log.len() as u64,
                    index_size: self.index.len() as u64,
                    time_index_size: self.time_index.len() as u64,
                    txn_index_size: None,
                    max_timestamp: None,
                    is_active: false,
                    last_modified: SystemTime::UNIX_EPOCH,
                })
                .collect())
        }
        fn read_segment_file(
            &self,
            _: Offset,
            kind: SegmentFileKind,
            pos: u64,
            buf: &mut [u8],
        ) -> Result<usize> {
            self.reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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

    #[test]
    fn sizes_of_more_dumps_than_renderings_are_kept_are_answered_again_without_reading() {
        let (log, _) = three_batches();
        let many = Arc::new(Segments {
            log: log.clone(),
            count: CACHE_ENTRIES as i64 + 40,
            ..Segments::default()
        });
        let part: Arc<dyn PartitionSource> = Arc::clone(&many) as Arc<dyn PartitionSource>;
        let cache = InspectCache::new();
        let bases: Vec<Offset> = files(part.as_ref())
            .unwrap()
            .segments()
            .unwrap()
            .iter()
            .map(|s| s.base_offset)
            .collect();
        // What `ls -l segments/` asks for each `.log.dump`, twice.
        let first: Vec<u64> = bases
            .iter()
            .map(|b| cache.dump_size(&part, *b, SegmentFileKind::Log).unwrap())
            .collect();
        let reads_after_first = many.reads.load(std::sync::atomic::Ordering::Relaxed);
        assert!(reads_after_first >= bases.len(), "every dump counted once: {reads_after_first}");
        let second: Vec<u64> = bases
            .iter()
            .map(|b| cache.dump_size(&part, *b, SegmentFileKind::Log).unwrap())
            .collect();
        assert_eq!(first, second);
        assert_eq!(many.reads.load(std::sync::atomic::Ordering::Relaxed), reads_after_first);
        // Each size is the size of the dump a read returns.
        let dump = cache.dump(&part, bases[3], SegmentFileKind::Log).unwrap();
        let reader = InspectionReader::new(dump);
        let text = reader.read_at(0, 1 << 20).unwrap();
        assert!(text.starts_with(b"Dumping t-0/00000000000000003000.log"), "{text:?}");
        assert_eq!(text.len() as u64, first[3]);
        // A changed segment is counted again: its stamp no longer matches.
        let other =
            Segments { log: log[..log.len() - 5].to_vec(), count: 2, ..Segments::default() };
        let other: Arc<dyn PartitionSource> = Arc::new(other);
        let changed = cache.dump_size(&other, Offset(1000), SegmentFileKind::Log).unwrap();
        let text =
            InspectionReader::new(cache.dump(&other, Offset(1000), SegmentFileKind::Log).unwrap())
                .read_at(0, 1 << 20)
                .unwrap();
        assert!(String::from_utf8_lossy(&text).contains("invalid bytes at the end"));
        assert_eq!(changed, text.len() as u64);
        assert_ne!(changed, first[1]);
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
            OffsetPosition { relative_offset: crate::format::RelativeOffset(rel), position: pos }
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

    /// Twelve batches of 1 to 12 records (offsets 0-77; every third one gzip), the fifth
    /// damaged (a flipped payload byte: CRC mismatch, records unreadable), then the first half
    /// of another batch (an invalid tail).
    fn damaged_multi_batch_log() -> Vec<u8> {
        let mut log = Vec::new();
        let mut next = 0i64;
        for b in 0..12usize {
            let compression = if b % 3 == 2 { Compression::Gzip } else { Compression::None };
            let spec = BatchSpec { base_offset: Offset(next), compression, ..BatchSpec::default() };
            let records: Vec<NewRecord> = (0..=b)
                .map(|r| NewRecord {
                    timestamp: 1_700_000_000_000 + (10 * b + r) as i64,
                    key: (r % 2 == 0).then(|| format!("k{r}").into_bytes()),
                    value: Some(format!("value {b}.{r} {}", "x".repeat(r * 7)).into_bytes()),
                    ..NewRecord::default()
                })
                .collect();
            let mut batch = encode_batch(&spec, &records).unwrap();
            if b == 4 {
                let last = batch.len() - 2;
                batch[last] ^= 0x20;
            }
            log.extend(batch);
            next += records.len() as i64;
        }
        let spec = BatchSpec { base_offset: Offset(next), ..BatchSpec::default() };
        let tail = encode_batch(&spec, &[NewRecord::default()]).unwrap();
        log.extend_from_slice(&tail[..tail.len() / 2]);
        log
    }

    fn one_segment(log: Vec<u8>) -> Arc<dyn PartitionSource> {
        Arc::new(segment_files(log, Vec::new(), Vec::new()))
    }

    /// A dump counted with checkpoints every 300 bytes of text and 64-byte reads (smaller than
    /// any batch, so each is read whole past the buffer).
    fn small_steps_dump(part: &Arc<dyn PartitionSource>) -> Arc<LogDump> {
        let segment = files(part.as_ref()).unwrap().segments().unwrap().remove(0);
        Arc::new(LogDump::count_with(part.as_ref(), &segment, 300, 64).unwrap())
    }

    #[test]
    fn lazy_log_dump_reads_are_the_whole_dumps_bytes_at_every_offset() {
        let log = damaged_multi_batch_log();
        let whole = dump_log("t-0/00000000000000000000.log", Offset(0), &log).into_bytes();
        let text = String::from_utf8_lossy(&whole);
        assert!(text.contains("Could not read the records of the batch at position"), "{text}");
        assert!(text.ends_with(" invalid bytes at the end of 00000000000000000000.log\n"));
        let part = one_segment(log);
        let dump = small_steps_dump(&part);
        assert!(dump.checkpoints.len() > 5, "{dump:?}");
        assert_eq!(dump.size(), whole.len() as u64);
        let size = whole.len() as u64;
        let expected = |offset: u64, len: usize| {
            let end = (offset + len as u64).min(size);
            whole.get(offset.min(size) as usize..end as usize).unwrap_or_default().to_vec()
        };

        // Fresh readers (each starts at a checkpoint) at every offset, with lengths that stay
        // in one batch, straddle checkpoints, cover the head or foot, or run past the end.
        let mut boundaries: Vec<u64> = vec![0, dump.head.len() as u64, dump.body_end.text, size];
        boundaries.extend(dump.checkpoints.iter().map(|c| c.text));
        for offset in (0..size + 3)
            .step_by(7)
            .chain(boundaries.iter().flat_map(|b| [b.saturating_sub(1), *b, b + 1]))
        {
            for len in [1, 5, 64, 301, 997, size as usize] {
                let reader =
                    InspectionReader::new(Inspection::Log(Arc::clone(&dump), Arc::clone(&part)));
                assert_eq!(
                    reader.read_at(offset, len).unwrap(),
                    expected(offset, len),
                    "{offset}+{len}"
                );
            }
        }

        // One reader: sequential reads continue its window, backward ones restart it.
        let reader = InspectionReader::new(Inspection::Log(Arc::clone(&dump), Arc::clone(&part)));
        let mut all = Vec::new();
        loop {
            let piece = reader.read_at(all.len() as u64, 37).unwrap();
            if piece.is_empty() {
                break;
            }
            all.extend(piece);
        }
        assert_eq!(all, whole);
        for offset in (0..size).rev().step_by(113) {
            assert_eq!(reader.read_at(offset, 250).unwrap(), expected(offset, 250), "{offset}");
        }
    }

    #[test]
    fn a_log_dump_whose_segment_changed_since_counting_reads_as_stale() {
        let (log, _) = three_batches();
        let part = one_segment(log.clone());
        let dump = small_steps_dump(&part);
        let body = dump.head.len() as u64;
        let read = |log: Vec<u8>, offset: u64| {
            let inspection = Inspection::Log(Arc::clone(&dump), one_segment(log));
            InspectionReader::new(inspection).read_at(offset, 10)
        };
        // The first batch's base offset rewritten (outside its CRC): its lines are longer.
        let mut renumbered = log.clone();
        renumbered[..8].copy_from_slice(&1_000_000i64.to_be_bytes());
        assert!(matches!(read(renumbered, body), Err(Error::StaleHandle)));
        // The first batch's framing destroyed.
        let mut garbage = log.clone();
        garbage[..20].fill(0xff);
        assert!(matches!(read(garbage, body), Err(Error::StaleHandle)));
        // Truncated: the last batch is gone.
        let truncated = log[..log.len() - 10].to_vec();
        assert!(matches!(read(truncated, dump.body_end.text - 5), Err(Error::StaleHandle)));
        // Unchanged bytes read as counted, and the head is not read from the segment.
        assert_eq!(read(log, 0).unwrap(), b"Dumping t-");
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
