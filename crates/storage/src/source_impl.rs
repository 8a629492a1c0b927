//! The log engine behind the filesystem's narrow interface: [`PartitionSource`] and the
//! local-only [`SegmentFiles`] for a [`Log`] (the mount's [`topicfs_source::TopicSource`] is
//! [`crate::log_dirs::LogDirs`], which hands each out behind its dir's offline guard,
//! [`crate::log_dirs::health::DirPartition`]). Each method forwards
//! to the engine method of the same meaning; the semantics are documented there and in
//! [`topicfs_source`]. The one piece of logic of its own is reading past damage
//! ([`ReadMode::PastDamage`](topicfs_source::ReadMode::PastDamage)): re-framing a batch the engine refuses to serve, and
//! stepping over bytes of a sealed segment that do not frame one.

use std::fs::File;
use std::sync::Arc;

use topicfs_format::{
    HEADER_SIZE_UP_TO_MAGIC, Offset, Position, file_name::format_base_offset, parse_batch_info,
    peek_entry,
};
use topicfs_source::error::{Error, Result};
use topicfs_source::{
    AppendInfo, BatchChunk, BoundaryTxnState, Committed, FileProblem, KeyHits, KeyIndex,
    KeyListing, Known, OffsetQuery, PartitionSource, PartitionSummary, ReadAnswer, ReadCursor,
    ReadMode, Records, SealedSpan, SegmentFileKind, SegmentFiles, SegmentSummary, SkippedDamage,
    SpanKind, SpanStore, SummaryUpdate, TxnBoundary,
};

use super::key_index::IndexedLog;
use super::log::{Log, SegmentCursor};
use super::segment::LogSegment;

impl PartitionSource for Log {
    fn topic(&self) -> &str {
        Log::topic(self)
    }

    fn partition(&self) -> u32 {
        Log::partition(self)
    }

    fn summary(&self) -> Result<PartitionSummary> {
        Log::summary(self)
    }

    fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
        Log::offset_for(self, query)
    }

    fn seek(&self, target: Offset) -> Result<ReadCursor> {
        Log::seek(self, target)
    }

    fn holds(&self, cursor: &ReadCursor) -> Result<bool> {
        match SegmentCursor::of(cursor) {
            Some(c) => {
                self.maybe_refresh()?;
                // A cursor into a segment the cleaner replaced is no longer held, as after
                // retention (its position was the old file's).
                Ok(self.segment(c.segment_base).is_some_and(|s| s.generation() == c.generation))
            }
            None => Ok(cursor.next_offset >= Log::log_start_offset(self)),
        }
    }

    /// [`ReadMode::HeadsPastDamage`]: headers only where the engine can frame whole v2
    /// batches; anything else (the end of a segment, a legacy message, damage) one batch at a
    /// time as [`ReadMode::PastDamage`] reads it.
    fn read(&self, cursor: &ReadCursor, max_bytes: usize, mode: ReadMode) -> Result<ReadAnswer> {
        match mode {
            ReadMode::Batches => Log::read(self, cursor, max_bytes).map(ReadAnswer::Batches),
            ReadMode::PastDamage => {
                read_past_damage(self, cursor, max_bytes).map(ReadAnswer::Batches)
            }
            ReadMode::HeadsPastDamage => match Log::read_heads(self, cursor, max_bytes)? {
                Some(heads) => Ok(ReadAnswer::Heads(heads)),
                None => read_past_damage(self, cursor, 1).map(ReadAnswer::Batches),
            },
        }
    }

    /// A writable log states its bounds and last change without I/O: nothing changes it behind
    /// this process's back, so they are exactly what [`Log::summary`] would say. A read-only
    /// log states neither: its summary looks at the directory again (a broker may write it).
    fn known(&self) -> Known {
        let writable = self.is_writable();
        Known {
            bounds: writable.then(|| (Log::log_start_offset(self), Log::log_end_offset(self))),
            last_modified: writable.then(|| Log::last_modified(self)),
            rewrites: Log::rewrites(self),
            sizing_budget: Log::sizing_budget(self),
        }
    }

    fn span_store(&self) -> Option<&dyn SpanStore> {
        Some(self)
    }

    fn append(&self, records: Records<'_>) -> Result<AppendInfo> {
        match records {
            Records::Owned(records) => Log::append(self, records),
            Records::Borrowed(records) => Log::append_refs(self, records),
            Records::ValueLines { head, lines } => Log::append_value_lines(self, head, lines),
        }
    }

    fn sync(&self) -> Result<()> {
        Log::sync(self)
    }

    fn segment_files(&self) -> Option<&dyn SegmentFiles> {
        Some(self)
    }

    fn key_index(&self) -> Option<&dyn KeyIndex> {
        Some(self)
    }

    fn committed(&self) -> Committed<'_> {
        Committed::ByView(Some(self))
    }
}

impl TxnBoundary for Log {
    fn state_at_boundary(&self) -> Result<Option<BoundaryTxnState>> {
        Log::txn_state_at_boundary(self)
    }
}

/// The log's spans are its segments; what is kept of them is in its segment cache
/// (`storage::log::summaries`), the one way every user's payloads (render summaries,
/// transaction summaries, key indexes) reach it.
impl SpanStore for Log {
    fn keeps_summaries(&self) -> bool {
        Log::keeps_summaries(self)
    }

    fn sealed_span_at(&self, cursor: &ReadCursor) -> Option<SealedSpan> {
        Log::sealed_span_at(self, cursor)
    }

    fn load(&self, span: &SealedSpan, kind: SpanKind) -> Option<Vec<u8>> {
        Log::load_summary(self, span.base, kind)
    }

    fn update(&self, span: &SealedSpan, kind: SpanKind, update: SummaryUpdate) {
        Log::update_summary_later(self, span.base, kind, update)
    }

    fn prefix_span_at(&self, cursor: &ReadCursor, kind: SpanKind) -> Option<(SealedSpan, Vec<u8>)> {
        Log::prefix_span_at(self, cursor, kind)
    }

    fn update_prefix(
        &self,
        start: &ReadCursor,
        end: &ReadCursor,
        kind: SpanKind,
        update: SummaryUpdate,
    ) {
        Log::update_prefix_summary_later(self, start, end, kind, update)
    }
}

impl IndexedLog for Log {
    fn segment_list(&self) -> Vec<Arc<LogSegment>> {
        Log::segment_list(self)
    }

    fn log_start_offset(&self) -> Offset {
        Log::log_start_offset(self)
    }

    fn log_end_offset(&self) -> Offset {
        Log::log_end_offset(self)
    }

    fn take_in_changes(&self) -> Result<()> {
        self.maybe_refresh()
    }

    fn dir(&self) -> &std::path::Path {
        Log::dir(self)
    }

    fn load_key_index(&self, base: Offset) -> Option<Vec<u8>> {
        self.load_summary(base, super::key_index::KEY_INDEX)
    }

    fn store_key_index(&self, base: Offset, payload: &[u8]) {
        self.store_summary(base, super::key_index::KEY_INDEX, payload)
    }
}

impl KeyIndex for Log {
    fn key_hits(&self, key: Option<&[u8]>, from: Offset) -> Result<KeyHits> {
        self.keys().key_hits(self, key, from)
    }

    fn keys_named(&self, h0: u64, h1: u64) -> Result<Vec<Vec<u8>>> {
        self.keys().keys_named(self, h0, h1)
    }

    fn listing(&self) -> Result<Box<dyn KeyListing>> {
        self.keys().listing(self)
    }

    fn transactional(&self) -> bool {
        self.keys().transactional()
    }
}

impl SegmentFiles for Log {
    fn segments(&self) -> Result<Vec<SegmentSummary>> {
        self.segment_summaries()
    }

    fn segment_summary(&self, base_offset: Offset) -> Result<Option<SegmentSummary>> {
        self.maybe_refresh()?;
        self.segment(base_offset).map(|seg| super::log::segment_summary(&seg)).transpose()
    }

    fn read_segment_file(
        &self,
        base_offset: Offset,
        kind: SegmentFileKind,
        pos: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        Log::read_segment_file(self, base_offset, kind, pos, buf)
    }

    fn sealed_segment_file(
        &self,
        base_offset: Offset,
        kind: SegmentFileKind,
    ) -> Result<Option<File>> {
        let segment = self.segment(base_offset).ok_or_else(|| {
            Error::NotFound(format!("segment {base_offset} of {}", self.dir().display()))
        })?;
        if segment.is_active() {
            return Ok(None);
        }
        let path = segment.file_path(kind.suffix());
        let file = match super::open::open_read(&path) {
            Ok(file) => file,
            Err(e) if super::open::is_not_found(&e) => {
                return Err(Error::NotFound(path.display().to_string()));
            }
            // Not a regular file (an index that is a FIFO, say): nothing to hand the kernel;
            // reads go through `read_segment_file`, which shows it empty.
            Err(Error::WrongFileType { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let on_disk = file.metadata().map_err(|e| Error::io(&path, "stat", e))?.len();
        // What `read_segment_file` shows: the `.log` up to its committed size, an index up to its
        // last entry (a roll trims a sealed index, but a crash can leave its zero tail).
        let shown = match kind {
            SegmentFileKind::Log => segment.size(),
            SegmentFileKind::Index => segment.index_file_size(false)?,
            SegmentFileKind::TimeIndex => segment.index_file_size(true)?,
            SegmentFileKind::TxnIndex => on_disk,
        };
        Ok((on_disk == shown).then_some(file))
    }

    fn repaired_segment_files(
        &self,
        base_offset: Offset,
    ) -> Result<Vec<(SegmentFileKind, u64, String)>> {
        let segment = self.segment(base_offset).ok_or_else(|| {
            Error::NotFound(format!("segment {base_offset} of {}", self.dir().display()))
        })?;
        Ok(segment
            .index_repairs()?
            .into_iter()
            .map(|r| {
                let kind = if r.time { SegmentFileKind::TimeIndex } else { SegmentFileKind::Index };
                (kind, r.position, r.what)
            })
            .collect())
    }

    fn file_problems(&self) -> Result<Vec<FileProblem>> {
        Log::file_problems(self)
    }

    fn byte_location(&self, cursor: &ReadCursor, delta: u64) -> Option<(String, u64)> {
        let c = SegmentCursor::of(cursor)?;
        Some((log_file_name(self, c.segment_base), c.position.0.saturating_add(delta)))
    }
}

/// `<topic>-<partition>/<base offset>.log`, as damage is reported.
fn log_file_name(log: &Log, segment_base: Offset) -> String {
    format!("{}-{}/{}.log", log.topic(), log.partition(), format_base_offset(segment_base))
}

/// Largest batch [`read_past_damage`] returns as stored when the engine refuses to serve it.
const MAX_DAMAGED_BATCH: u64 = 64 << 20;

/// Reads whole batches from `cursor` like [`Log::read`], stepping over damage the engine
/// refuses to serve, so that what follows stays readable:
///
/// * a batch that is framed (its size field fits the segment) but fails its CRC is returned
///   alone, as stored; decoding it then reports the damage;
/// * bytes that do not frame a batch, in a segment followed by another one (so sealed), end
///   that segment: the read goes on at the next segment, and [`BatchChunk::skipped`] names
///   the segment's `.log`, the position and the damage, for the caller to log.
///
/// Damage in the last segment is returned as an error (or, for a torn tail the engine hides,
/// is the end of the log).
fn read_past_damage(log: &Log, cursor: &ReadCursor, max_bytes: usize) -> Result<BatchChunk> {
    let mut cursor = *cursor;
    let mut skipped = None;
    loop {
        let damage = match log.read(&cursor, max_bytes) {
            Ok(chunk) if !chunk.bytes.is_empty() => return Ok(BatchChunk { skipped, ..chunk }),
            // Empty: the end, unless unread bytes remain in a sealed segment.
            Ok(_) => None,
            Err(e @ Error::Corrupt { .. }) => Some(e),
            Err(e) => return Err(e),
        };
        // A cursor made in a segment the cleaner replaced is placed again by its offset.
        let current = |c: &SegmentCursor| {
            log.segment(c.segment_base).is_some_and(|s| s.generation() == c.generation)
        };
        let here = match SegmentCursor::of(&cursor).filter(current) {
            Some(c) => c,
            None => match SegmentCursor::of(&Log::seek(log, cursor.next_offset)?) {
                Some(c) => c,
                None => return Err(damage.unwrap_or_else(|| log.out_of_range(cursor.next_offset))),
            },
        };
        let Some(segment) = SegmentFiles::segment_summary(log, here.segment_base)? else {
            return match damage {
                Some(e) => Err(e),
                None => log.read(&cursor, max_bytes).map(|c| BatchChunk { skipped, ..c }),
            };
        };
        let position = here.position.0;
        let end = || BatchChunk { skipped: skipped.clone(), ..here.end_chunk(false) };
        // The end of the log (what every read of a stream at its end meets): no listing.
        if damage.is_none() && position >= segment.log_size {
            return Ok(end());
        }
        let next = log
            .segment_summaries()?
            .iter()
            .map(|s| s.base_offset)
            .filter(|b| *b > here.segment_base)
            .min();
        if damage.is_none() && next.is_none() {
            return Ok(end());
        }
        if let Some(chunk) = framed_entry(log, here, segment.log_size)? {
            return Ok(BatchChunk { skipped, ..chunk });
        }
        let what = match damage {
            Some(e) => e,
            None => Error::corrupt(
                log_file_name(log, here.segment_base),
                position,
                format!("{} bytes that are not a batch", segment.log_size - position),
            ),
        };
        let Some(next) = next else { return Err(what) };
        let next = SegmentCursor {
            segment_base: next,
            position: Position(0),
            next_offset: here.next_offset.max(next),
            generation: log.segment(next).map_or(0, |s| s.generation()),
        };
        skipped = Some(SkippedDamage { error: Arc::new(what), resumed_at: next.next_offset });
        cursor = next.cursor();
    }
}

/// The entry at `here` read as stored, if its header frames a batch inside the segment.
fn framed_entry(log: &Log, here: SegmentCursor, log_size: u64) -> Result<Option<BatchChunk>> {
    let position = here.position.0;
    let mut header = [0u8; HEADER_SIZE_UP_TO_MAGIC];
    let n =
        log.read_segment_file(here.segment_base, SegmentFileKind::Log, position, &mut header)?;
    let Ok(Some(h)) = peek_entry(header.get(..n).unwrap_or_default()) else { return Ok(None) };
    let total = h.total_size() as u64;
    if total > MAX_DAMAGED_BATCH || position.saturating_add(total) > log_size {
        return Ok(None);
    }
    let mut entry = vec![0u8; total as usize];
    let n = log.read_segment_file(here.segment_base, SegmentFileKind::Log, position, &mut entry)?;
    if n as u64 != total {
        return Ok(None);
    }
    let Ok(info) = parse_batch_info(&entry) else { return Ok(None) };
    let next = SegmentCursor {
        position: Position(position.saturating_add(total)),
        next_offset: here.next_offset.max(info.last_offset.plus(1)),
        ..here
    };
    Ok(Some(BatchChunk {
        bytes: entry,
        starts: vec![here.start(0)],
        next: Some(next.cursor()),
        crc_checked: false,
        skipped: None,
    }))
}
