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
//!
//! # Where each job is
//!
//! - this file: the file kinds' constants, [`Inspection`] and [`InspectionReader`] (what a handle
//!   reads), [`InspectCache`] (renderings and sizes kept per segment stamp), reading segment
//!   files and naming them in texts;
//! - `log_dump.rs`: [`LogDump`], a `.log` dump counted once and rendered piece by piece;
//! - `entries.rs`: walking a `.log`'s whole entries, from bytes held or chunk by chunk;
//! - `dump.rs`: the `kafka-dump-log.sh` texts rendered whole ([`dump_log`],
//!   [`dump_offset_index`], [`dump_time_index`], [`dump_txn_index`]);
//! - `check.rs`: the `check` report ([`check_partition`]: `check_log`, `check_offset_index`,
//!   `check_time_index`, `check_txn_index`);
//! - `test_support.rs` (tests only): segments served from memory and the logs tests use.

mod check;
mod dump;
mod entries;
mod log_dump;
#[cfg(test)]
mod test_support;

pub use check::check_partition;
pub use dump::{dump_log, dump_offset_index, dump_time_index, dump_txn_index};
pub use log_dump::LogDump;
use log_dump::Window;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use topicfs_format::Offset;
use topicfs_source::PartitionSource;
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_source::{SegmentFileKind, SegmentFiles, SegmentSummary};

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
pub const TXN_INDEX_ENTRY_SIZE: usize = topicfs_format::txn_index::ENTRY_SIZE;

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
        topicfs_format::file_name::format_base_offset(base),
        kind.suffix()
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::inspect::test_support::{Segments, three_batches};

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
}
