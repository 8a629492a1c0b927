//! The [`Walker`]: walks a partition's batches forward from a render-index checkpoint, counting
//! or rendering them in one format, and tracking the cursor and offset bound at every batch
//! boundary (see the render-index invariant in [`crate::render_index`]). Streams and
//! their render index are built on it ([`crate::stream`]).
//!
//! Batches come from [`ReadMode::PastDamage`](topicfs_source::ReadMode::PastDamage) in offsets and batches only: the
//! walker never reads a cursor's source hint. It moves a cursor past a batch with
//! [`ReadCursor::after_batch`] and takes the source's cursor at each [`ChunkStart`] of a chunk.
//! A damaged batch renders nothing; its error is located by `byte_location` (on `dyn PartitionSource`).

use crate::render::{ByteCounter, Renderer, Sink, render_value, value_line_len};
use crate::spec::Format;
use crate::txn::TxnSnapshot;
use topicfs_format::{
    Batch, BatchInfo, Compression, DecodeError, Offset, Record, RecordValue, decode_batch,
    decode_batch_unverified, parse_batch_info, peek_entry,
};
use topicfs_source::error::{Error, Result};
use topicfs_source::{ChunkStart, PartitionSource, ReadCursor, ReadMode};

/// A place in a partition's rendering: see the invariant in [`crate::render_index`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// A batch boundary.
    pub cursor: ReadCursor,
    /// Every batch before `cursor` holds only offsets below this; every later batch only offsets
    /// at or above it.
    pub bound: Offset,
    /// Rendered bytes before `cursor`, counted from the index's origin.
    pub position: u64,
    /// Whether `cursor` is a retention boundary, a segment start
    /// ([`ChunkStart`](topicfs_source::ChunkStart); kept when thinning; survives retention of
    /// earlier segments).
    pub(super) segment_start: bool,
}

/// Bytes asked of [`PartitionSource::read`] at a time.
pub(super) const READ_CHUNK: usize = 64 * 1024;
/// Most bytes a batch size hint may reach (a batch larger than this is still read whole: the
/// source returns whole batches).
const MAX_READ: usize = 16 << 20;
/// Most rendered bytes a read renders past its window to finish the batch it stopped in (kept
/// as the stream's tail); a batch rendering to more than that is rendered again by the next
/// read instead.
pub(super) const MAX_TAIL: u64 = 4 << 20;

/// The first offset a batch holds: its base offset, or for a legacy compressed wrapper (whose
/// entry offset is its last inner offset) the first inner offset, which needs decompression.
pub(super) fn first_offset(entry: &[u8], info: &BatchInfo) -> Result<Offset, DecodeError> {
    if info.magic < 2 && info.compression != Compression::None {
        return Ok(decode_batch(entry)?.info().base_offset);
    }
    Ok(info.base_offset)
}

/// One batch found by a [`Walker`]: where it lies in the walker's chunk, and its header facts.
pub(super) struct Step {
    pub(super) at: usize,
    pub(super) len: usize,
    pub(super) info: BatchInfo,
}

/// Walks batches forward from a checkpoint, tracking the cursor and the offset bound at every
/// batch boundary. Cursors inside a chunk are computed: the chunk's [`ChunkStart`]s give the
/// cursor at the start of each run, [`ReadCursor::after_batch`] the cursor after each batch.
pub(super) struct Walker<'a> {
    pub(super) part: &'a dyn PartitionSource,
    pub(super) renderer: &'a Renderer,
    /// The checkpoint before the next batch (its `position` is the rendered position).
    pub(super) here: Checkpoint,
    /// The batch at `here` starts a unit retention deletes whole ([`ChunkStart`]).
    pub(super) at_retention_boundary: bool,
    pub(super) chunk: Vec<u8>,
    /// Where the runs of `chunk` start (see [`ChunkStart`]); `next_start` indexes the next one.
    pub(super) starts: Vec<ChunkStart>,
    pub(super) next_start: usize,
    pub(super) chunk_at: usize,
    pub(super) chunk_next: Option<ReadCursor>,
    /// The source checked the CRC of every batch in `chunk` ([`BatchChunk::crc_checked`]).
    pub(super) chunk_crc_checked: bool,
    /// Bytes asked of the next `read`: starts near what the caller needs, doubles up to
    /// [`READ_CHUNK`] (a small read near a checkpoint does not fetch a whole chunk).
    pub(super) read_size: usize,
    /// Stored size of the largest batch that came alone in a read asking for less (0: none
    /// yet). Reads then ask for at least that much: the source returns only whole batches, and
    /// reads a batch larger than asked twice (a part, then all of it).
    pub(super) batch_hint: usize,
    /// `read_committed`: batches at or past its stable offset end the walk; aborted batches
    /// render nothing in the record formats.
    pub(super) txn: Option<TxnSnapshot>,
    /// What the field indexes say of the span the last batch looked at lies in (a filtered
    /// renderer with indexes; see [`crate::field_index`]).
    gate: std::cell::RefCell<Option<crate::field_index::SpanGate>>,
}

impl<'a> Walker<'a> {
    pub(super) fn new(
        part: &'a dyn PartitionSource,
        renderer: &'a Renderer,
        from: Checkpoint,
        txn: Option<TxnSnapshot>,
    ) -> Walker<'a> {
        let mut here = from;
        here.segment_start = false;
        Walker {
            part,
            renderer,
            here,
            at_retention_boundary: false,
            chunk: Vec::new(),
            starts: Vec::new(),
            next_start: 0,
            chunk_at: 0,
            chunk_next: None,
            chunk_crc_checked: false,
            read_size: READ_CHUNK,
            batch_hint: 0,
            txn,
            gate: std::cell::RefCell::new(None),
        }
    }

    /// Starts with reads of about `bytes` (at least 4 KiB) instead of whole chunks; with batches
    /// of about `batch_hint` bytes as stored (0: unknown), reads of enough whole batches, but
    /// never more than one chunk or one batch at a time: a read holds one piece of the log in
    /// memory, however much of it the walk renders (compressed batches render to many times
    /// their stored size, so `bytes` of rendering may span many batches).
    pub(super) fn with_read_size(mut self, bytes: u64, batch_hint: usize) -> Walker<'a> {
        let bytes = usize::try_from(bytes).unwrap_or(READ_CHUNK);
        self.batch_hint = batch_hint.min(MAX_READ);
        self.read_size = match self.whole_batches() {
            0 => bytes.clamp(4096, READ_CHUNK),
            one => {
                bytes.div_ceil(self.batch_hint).max(1).saturating_mul(one).min(one.max(READ_CHUNK))
            }
        };
        self
    }

    /// What a read asks for at least to get one whole batch of the hinted size, with room for
    /// batches a little larger (0 without a hint).
    pub(super) fn whole_batches(&self) -> usize {
        self.batch_hint.saturating_add(self.batch_hint / 16).min(MAX_READ)
    }

    /// The damage `e`, found `delta` bytes into the batch at the walker's cursor, located by
    /// the source (`byte_location` (on `dyn PartitionSource`)).
    pub(super) fn corrupt(&self, delta: u64, e: &DecodeError) -> Error {
        let (place, position) = self.part.byte_location(&self.here.cursor, delta);
        Error::corrupt(place, position, e.to_string())
    }

    /// Whether the next [`Walker::peek`] reads from the source (no batch is left in hand).
    pub(super) fn needs_read(&self) -> bool {
        self.chunk_at >= self.chunk.len()
    }

    /// The next batch, reading a chunk when needed; `None` at the current end of the log.
    pub(super) fn peek(&mut self) -> Result<Option<Step>> {
        if self.chunk_at >= self.chunk.len() {
            let chunk = self
                .part
                .read(&self.here.cursor, self.read_size, ReadMode::PastDamage)?
                .into_chunk()?;
            if let Some(skipped) = &chunk.skipped {
                // Logged once per damage, however many walks step over it.
                if skipped.error.first_report() {
                    log::error!("{}; skipped to the next segment", skipped.error);
                }
            }
            if chunk.bytes.len() > self.read_size {
                self.batch_hint = self.batch_hint.max(chunk.bytes.len()).min(MAX_READ);
            }
            self.read_size =
                self.read_size.saturating_mul(2).min(READ_CHUNK).max(self.whole_batches());
            if chunk.bytes.is_empty() {
                return Ok(None);
            }
            self.chunk = chunk.bytes;
            self.starts = chunk.starts;
            self.next_start = 0;
            self.chunk_at = 0;
            self.chunk_next = chunk.next;
            self.chunk_crc_checked = chunk.crc_checked;
        }
        if let Some(start) = self.starts.get(self.next_start).filter(|s| s.at <= self.chunk_at) {
            // A new run: the source's cursor there (offset bounds only ever grow).
            self.here.cursor.hint = start.cursor.hint;
            self.here.bound = self.here.bound.max(start.cursor.next_offset);
            self.here.cursor.next_offset = self.here.bound;
            self.at_retention_boundary = start.retention_boundary;
            self.next_start += 1;
        }
        let rest = self.chunk.get(self.chunk_at..).unwrap_or_default();
        let header = match peek_entry(rest) {
            Ok(Some(h)) => h,
            Ok(None) => {
                let e = DecodeError::new(
                    0,
                    topicfs_format::DecodeErrorKind::Truncated {
                        needed: 17,
                        available: rest.len(),
                    },
                );
                return Err(self.corrupt(0, &e));
            }
            Err(e) => return Err(self.corrupt(e.at as u64, &e)),
        };
        if let Some(txn) = &self.txn {
            // The header offset is a v2 base offset or a legacy entry's last offset; either way
            // the stable offset (a batch boundary) is never inside the entry.
            if !txn.admits(header.offset)? {
                return Ok(None);
            }
        }
        let len = header.total_size();
        let Some(entry) = rest.get(..len) else {
            let e = DecodeError::new(
                0,
                topicfs_format::DecodeErrorKind::Truncated { needed: len, available: rest.len() },
            );
            return Err(self.corrupt(0, &e));
        };
        let info = parse_batch_info(entry).map_err(|e| self.corrupt(e.at as u64, &e))?;
        Ok(Some(Step { at: self.chunk_at, len, info }))
    }

    pub(super) fn entry(&self, step: &Step) -> &[u8] {
        self.chunk.get(step.at..step.at.saturating_add(step.len)).unwrap_or_default()
    }

    /// Decodes `step`'s batch, checking its CRC unless the source already did.
    pub(super) fn decode(&self, step: &Step) -> std::result::Result<Batch<'_>, DecodeError> {
        if self.chunk_crc_checked {
            decode_batch_unverified(self.entry(step))
        } else {
            decode_batch(self.entry(step))
        }
    }

    /// Moves past `step`, which rendered to `rendered` bytes.
    pub(super) fn advance(&mut self, step: &Step, rendered: u64) {
        self.here.position = self.here.position.saturating_add(rendered);
        let after = Offset(step.info.last_offset.0.saturating_add(1));
        self.here.bound = self.here.bound.max(after);
        self.here.cursor.hint = self.here.cursor.hint.advanced(step.len as u64);
        self.at_retention_boundary = false;
        self.chunk_at = step.at.saturating_add(step.len);
        if self.chunk_at >= self.chunk.len() {
            if let Some(next) = self.chunk_next {
                self.here.cursor = next;
            }
        }
        self.here.cursor.next_offset = self.here.bound;
    }

    /// Whether a batch contributes no records: a control batch, or an aborted one.
    pub(super) fn hides(&self, info: &BatchInfo) -> bool {
        info.is_control || self.txn.as_ref().is_some_and(|t| t.is_aborted(info))
    }

    /// Whether a field index says the batch `info` holds no record the filter keeps: it
    /// renders nothing, and is not decoded (see [`crate::field_index`]).
    fn skips(&self, info: &BatchInfo) -> bool {
        if !self.renderer.is_filtered() || info.magic < 2 {
            return false;
        }
        let mut gate = self.gate.borrow_mut();
        let at = info.base_offset;
        if gate.as_ref().is_none_or(|g| at < g.lo || at >= g.hi) {
            *gate = self.renderer.span_gate(self.part, at);
        }
        gate.as_ref().is_some_and(|g| !g.may_hold(at, info.last_offset))
    }

    /// Whether the field indexes rule out the record at `offset` of the batch last passed to
    /// [`Walker::skips`]: it renders nothing, and the filter is not evaluated.
    fn rejects(&self, offset: Offset) -> bool {
        self.gate.borrow().as_ref().is_some_and(|g| g.rejects(offset))
    }

    /// Rendered bytes of `step`: the whole batch for raw; for the record formats its records
    /// (below `below`, when given), nothing for a control batch.
    pub(super) fn count_batch(&self, step: &Step, below: Option<Offset>) -> Result<u64> {
        if self.renderer.format() == Format::Raw {
            return Ok(u64::from(step.info.size));
        }
        if self.hides(&step.info) || self.skips(&step.info) {
            return Ok(0);
        }
        let counted = self.decode(step).and_then(|batch| {
            let info = batch.info();
            match self.renderer.format() {
                // A filter looks at whole records: not the value-only loop.
                Format::Values if !self.renderer.is_filtered() => {
                    let mut bytes = 0u64;
                    batch
                        .for_each_value(|r| {
                            if below.is_none_or(|b| r.offset < b) {
                                bytes += value_line_len(r.value);
                            }
                        })
                        .map(|()| bytes)
                }
                Format::Values | Format::Json | Format::Raw => {
                    self.count_records(info, batch.records(), below)
                }
            }
        });
        match counted {
            Ok(n) => Ok(n),
            Err(e) => {
                self.log_damage(&e);
                Ok(0)
            }
        }
    }

    /// Rendered bytes of the records below `below` (all when `None`) of a batch described by
    /// `info`. Every record is decoded, also past `below`: a batch with any damaged record
    /// counts as nothing wherever the count stops, so positions agree.
    fn count_records<R: Renderable>(
        &self,
        info: &BatchInfo,
        records: impl Iterator<Item = std::result::Result<R, DecodeError>>,
        below: Option<Offset>,
    ) -> std::result::Result<u64, DecodeError> {
        let mut counter = ByteCounter(0);
        for record in records {
            let record = record?;
            if below.is_none_or(|b| record.offset() < b) && !self.rejects(record.offset()) {
                record.render(self.renderer, info, &mut counter);
            }
        }
        Ok(counter.0)
    }

    /// Logs a damaged batch at the walker's position, once per damage ([`Error::first_report`]).
    pub(super) fn log_damage(&self, e: &DecodeError) {
        let err = self.corrupt(e.at as u64, e);
        if err.first_report() {
            log::error!("{err}; the batch renders no records (reads through it fail with EIO)");
        }
    }

    /// Renders `step` into `out`: rendered positions from `from` on, records below `end` (the
    /// stream starts at offset `first`). The record formats render past `to` to the end of the
    /// batch (at most [`MAX_TAIL`] bytes past `to`), so that a read stopping inside the batch
    /// can keep the rest for the next one ([`Tail`]); raw streams stop at `to`. So on return
    /// `out` holds the rendering from `from` to the returned position, or, when
    /// [`Rendered::cut`], to at least `to`.
    pub(super) fn render_batch(
        &self,
        step: &Step,
        from: u64,
        to: u64,
        first: Offset,
        end: Option<Offset>,
        out: &mut Vec<u8>,
    ) -> Result<Rendered> {
        let start = self.here.position;
        let err = |e: DecodeError| self.corrupt(e.at as u64, &e);
        let whole = |bytes: u64| -> Result<Rendered> {
            Ok(Rendered { bytes, ends_stream: false, cut: false })
        };
        if self.renderer.format() == Format::Raw {
            let entry = self.entry(step);
            if let Some(e) = end {
                if first_offset(entry, &step.info).map_err(err)? >= e {
                    return Ok(Rendered { bytes: 0, ends_stream: true, cut: false });
                }
            }
            copy_window(entry, start, from, to, out);
            let size = u64::from(step.info.size);
            let cut = start.saturating_add(size) > to;
            return Ok(Rendered { bytes: size, ends_stream: false, cut });
        }
        if self.hides(&step.info)
            || (end.is_none_or(|e| step.info.last_offset < e) && self.skips(&step.info))
        {
            return whole(0);
        }
        // A damaged batch renders nothing (as `count_batch` counts it): a read whose window
        // starts after it skips it; one that reaches it ends before it, or fails with EIO when
        // it starts there.
        let out_before = out.len();
        let stop = Rendered { bytes: 0, ends_stream: true, cut: false };
        let damaged = |e: DecodeError, out: &mut Vec<u8>| {
            out.truncate(out_before);
            if step.info.last_offset < first {
                // Not part of this stream: it holds only offsets before `first`.
                whole(0)
            } else if end.is_some_and(|e| step.info.base_offset >= e) {
                Ok(stop)
            } else if start < from {
                whole(0)
            } else if out_before > 0 {
                Ok(stop)
            } else {
                Err(err(e))
            }
        };
        let batch = match self.decode(step) {
            Ok(batch) => batch,
            Err(e) => return damaged(e, out),
        };
        let info = batch.info();
        let rendered = match self.renderer.format() {
            // The whole batch inside the window (its value lines are fewer bytes than its
            // records, so they end before the tail limit): every value straight into `out`, in
            // one loop; what `render_records` does for such a batch.
            Format::Values
                if !self.renderer.is_filtered()
                    && start >= from
                    && start.saturating_add(batch.records_bytes() as u64)
                        < to.saturating_add(MAX_TAIL) =>
            {
                let mut ends_stream = false;
                let before = out.len();
                batch
                    .for_each_value(|r| {
                        ends_stream = ends_stream || end.is_some_and(|e| r.offset >= e);
                        if !ends_stream {
                            render_value(r.value, out);
                        }
                    })
                    .map(|()| Rendered {
                        bytes: (out.len() - before) as u64,
                        ends_stream,
                        cut: false,
                    })
            }
            Format::Values if !self.renderer.is_filtered() => {
                self.render_records(info, batch.record_values(), from, to, end, out)
            }
            Format::Values | Format::Json | Format::Raw => {
                self.render_records(info, batch.records(), from, to, end, out)
            }
        };
        match rendered {
            Ok(r) => Ok(r),
            Err(e) => damaged(e, out),
        }
    }

    /// The record loop of [`Walker::render_batch`]: renders `records` (of a batch described by
    /// `info`, starting at the walker's rendered position) into `out` from `from` on, below
    /// `end`, up to [`MAX_TAIL`] bytes past `to`. A damaged record anywhere in the batch is
    /// the error, whatever the window holds.
    fn render_records<R: Renderable>(
        &self,
        info: &BatchInfo,
        mut records: impl Iterator<Item = std::result::Result<R, DecodeError>>,
        from: u64,
        to: u64,
        end: Option<Offset>,
        out: &mut Vec<u8>,
    ) -> std::result::Result<Rendered, DecodeError> {
        let start = self.here.position;
        let tail_limit = to.saturating_add(MAX_TAIL);
        let mut pos = start;
        while let Some(record) = records.next() {
            let record = record?;
            let ends_stream = end.is_some_and(|e| record.offset() >= e);
            if ends_stream || pos >= tail_limit {
                // The rest of the batch is decoded too: a damaged record anywhere makes the
                // whole batch render nothing, whatever this window holds.
                if let Some(e) = records.find_map(std::result::Result::err) {
                    return Err(e);
                }
                return Ok(Rendered { bytes: pos - start, ends_stream, cut: !ends_stream });
            }
            let n = if self.rejects(record.offset()) {
                0
            } else if pos >= from {
                // Inside the window or past it: render straight into `out`.
                let before = out.len();
                record.render(self.renderer, info, out);
                (out.len() - before) as u64
            } else {
                // Before the window: count, and render only a record straddling `from`.
                let mut counter = ByteCounter(0);
                record.render(self.renderer, info, &mut counter);
                if pos.saturating_add(counter.0) > from {
                    let mut scratch = Vec::with_capacity(counter.0 as usize);
                    record.render(self.renderer, info, &mut scratch);
                    copy_window(&scratch, pos, from, u64::MAX, out);
                }
                counter.0
            };
            pos = pos.saturating_add(n);
        }
        Ok(Rendered { bytes: pos - start, ends_stream: false, cut: false })
    }
}

/// A record as a walker renders it: whole (JSON), or only its offset and value (value lines,
/// which need nothing else and so skip building a [`Record`] per record).
trait Renderable {
    fn offset(&self) -> Offset;
    fn render(&self, renderer: &Renderer, info: &BatchInfo, out: &mut impl Sink);
}

impl Renderable for Record<'_> {
    fn offset(&self) -> Offset {
        self.offset
    }

    fn render(&self, renderer: &Renderer, info: &BatchInfo, out: &mut impl Sink) {
        renderer.render(info, self, out);
    }
}

impl Renderable for RecordValue<'_> {
    fn offset(&self) -> Offset {
        self.offset
    }

    fn render(&self, _renderer: &Renderer, _info: &BatchInfo, out: &mut impl Sink) {
        render_value(self.value, out);
    }
}

/// What [`Walker::render_batch`] did with one batch.
#[derive(Copy, Clone, Debug)]
pub(super) struct Rendered {
    /// Rendered bytes of the batch walked over: all of them unless the walk stops inside it.
    pub(super) bytes: u64,
    /// A record at or past the stream's end offset: the stream ends inside this batch.
    pub(super) ends_stream: bool,
    /// Rendering stopped past the window before the end of the batch: the walk stops here and
    /// the next read renders this batch again.
    pub(super) cut: bool,
}

/// Appends the part of `bytes` (which sit at rendered position `at`) inside `[from, to)`.
pub(super) fn copy_window(bytes: &[u8], at: u64, from: u64, to: u64, out: &mut Vec<u8>) {
    let end = at.saturating_add(bytes.len() as u64);
    let lo = from.max(at);
    let hi = to.min(end);
    if lo < hi {
        let (lo, hi) = ((lo - at) as usize, (hi - at) as usize);
        out.extend_from_slice(bytes.get(lo..hi).unwrap_or_default());
    }
}
