//! Reading by offset: [`Log::seek`] (floor segment, floor index entry, forward scan) and
//! [`Log::read`] (whole batches from a cursor, across segments), and the engine's cursor
//! ([`SegmentCursor`]).

use super::*;

impl Log {
    /// Cursor at the first batch whose last offset is `>= target` (floor segment, floor index
    /// entry, forward scan; later segments if the floor one has none). `target` equal to the log
    /// end offset gives a cursor at the end. `OffsetOutOfRange` outside `[log start, log end]`.
    pub fn seek(&self, target: Offset) -> Result<ReadCursor> {
        self.maybe_refresh()?;
        let log_end = self.log_end_offset();
        if target < self.log_start_offset() || target > log_end {
            return Err(self.out_of_range(target));
        }
        let mut end_cursor = None;
        // One segment at a time: the floor segment almost always holds the batch, so the
        // segments after it are not collected up front (that cost grew with the segment count).
        let mut next = self.floor_segment(target);
        while let Some(seg) = next {
            next = self.segment_after(seg.base_offset());
            match seg.translate_offset(target)? {
                Translated::Batch(b) => {
                    return Ok(cursor_at(seg.base_offset(), b.position, target));
                }
                Translated::End(position) => {
                    end_cursor = Some(cursor_at(seg.base_offset(), position, target));
                }
            }
        }
        // A read-only partition directory without any segment: an empty log at `target`.
        Ok(end_cursor.unwrap_or(cursor_at(target, Position(0), target)))
    }

    /// Whole batches from `cursor`, at most `max_bytes` unless the first batch alone is larger;
    /// moves on to the next segment when one is exhausted; empty at the current end. The
    /// batches of one read come from one segment (one run, see [`ChunkStart`]). A cursor
    /// without a hint ([`ReadCursor::at`]) is found with [`Log::seek`].
    pub fn read(&self, cursor: &ReadCursor, max_bytes: usize) -> Result<BatchChunk> {
        self.maybe_refresh()?;
        let mut reseeked = false;
        let mut cursor = match SegmentCursor::of(cursor) {
            Some(c) => c,
            None => {
                reseeked = true;
                SegmentCursor::of(&self.seek(cursor.next_offset)?)
                    .ok_or_else(|| self.out_of_range(cursor.next_offset))?
            }
        };
        loop {
            let Some(seg) = self.segment(cursor.segment_base) else {
                if self.segments.read().unwrap_or_else(|e| e.into_inner()).is_empty() {
                    return Ok(cursor.end_chunk(true));
                }
                // The segment was deleted by retention since the cursor was made.
                if cursor.next_offset < self.log_start_offset() || reseeked {
                    return Err(self.out_of_range(cursor.next_offset));
                }
                cursor = SegmentCursor::of(&self.seek(cursor.next_offset)?)
                    .ok_or_else(|| self.out_of_range(cursor.next_offset))?;
                reseeked = true;
                continue;
            };
            if seg.is_rewritten() {
                // The cleaner's output: the cursor's position may be one of the file it
                // replaced; find the place by offset.
                cursor.position = match seg.translate_offset(cursor.next_offset)? {
                    Translated::Batch(b) => b.position,
                    Translated::End(p) => p,
                };
            }
            // Whether `seg` was already sealed before it is read: a segment with a successor
            // never grows again. Taken first, so that a writer appending to `seg` and rolling
            // between the read and the check below is not mistaken for damage.
            let sealed_before_read = self.segment_after(seg.base_offset()).is_some();
            if let Some(r) = seg.read(cursor.position, max_bytes)? {
                let next = SegmentCursor {
                    position: r.next_position,
                    next_offset: r.next_offset.max(cursor.next_offset),
                    ..cursor
                };
                // `LogSegment::read` checked the CRC of every batch it returns.
                return Ok(BatchChunk {
                    bytes: r.bytes,
                    starts: vec![cursor.start(0)],
                    next: Some(next.cursor()),
                    crc_checked: true,
                    skipped: None,
                });
            }
            let next_segment = self
                .segments
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .range((Bound::Excluded(cursor.segment_base), Bound::Unbounded))
                .next()
                .map(|(b, _)| *b);
            match next_segment {
                Some(base) if cursor.position.0 >= seg.size() => {
                    cursor = SegmentCursor { segment_base: base, position: Position(0), ..cursor };
                }
                // It was the active segment when read and has since grown and rolled: read it
                // again, now sealed.
                Some(_) if !sealed_before_read => continue,
                // A sealed segment never grows again: bytes left at its end that do not make
                // a whole batch are damage (a torn write before the recovery point, a file cut
                // after a clean shutdown), not a tail still being written. Reporting them
                // keeps the segments after it reachable; a silent empty chunk would read as
                // the end of the log.
                Some(_) => {
                    return Err(Error::corrupt(
                        seg.file_path(".log"),
                        cursor.position.0,
                        format!(
                            "{} bytes at the end of a sealed segment are not a whole batch",
                            seg.size().saturating_sub(cursor.position.0)
                        ),
                    ));
                }
                // The active segment: the end of what is committed now.
                None => return Ok(cursor.end_chunk(true)),
            }
        }
    }
}

impl Log {
    /// The headers of the batches at `cursor` in its segment, about `max_bytes` of them (see
    /// [`LogSegment::read_heads`]); `None` when none can be given without reading whole
    /// batches (a cursor without a hint, the end of a segment, a legacy message, damage), for
    /// [`Log::read`] to decide.
    pub fn read_heads(
        &self,
        cursor: &ReadCursor,
        max_bytes: usize,
    ) -> Result<Option<crate::source::BatchHeads>> {
        self.maybe_refresh()?;
        let Some(mut at) = SegmentCursor::of(cursor) else { return Ok(None) };
        let Some(seg) = self.segment(at.segment_base) else { return Ok(None) };
        if seg.is_rewritten() {
            // As in `read`: the place in the cleaner's output is found by offset.
            at.position = match seg.translate_offset(at.next_offset)? {
                Translated::Batch(b) => b.position,
                Translated::End(p) => p,
            };
        }
        let (heads, end) = seg.read_heads(at.position, max_bytes)?;
        let Some(last) = heads.last() else { return Ok(None) };
        let next = SegmentCursor {
            position: end,
            next_offset: at.next_offset.max(last.info.last_offset.plus(1)),
            ..at
        };
        Ok(Some(crate::source::BatchHeads {
            bytes: end.0 - at.position.0,
            heads,
            starts: vec![at.start(0)],
            next: Some(next.cursor()),
            skipped: None,
            damaged: None,
        }))
    }
}

/// A [`ReadCursor`] as this engine makes it: the hint is (segment base offset, position of a
/// batch start in its `.log`, or the segment's end).
///
/// **Invariant**: `position` is the position of a batch start in the segment whose base offset
/// is `segment_base` (or that segment's end), and every batch before it holds only offsets below
/// `next_offset`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct SegmentCursor {
    pub segment_base: Offset,
    pub position: Position,
    pub next_offset: Offset,
}

impl SegmentCursor {
    /// The engine's reading of `cursor`; `None` for a cursor without a hint.
    pub fn of(cursor: &ReadCursor) -> Option<SegmentCursor> {
        let (base, position) = cursor.hint.get()?;
        Some(SegmentCursor {
            segment_base: Offset(base),
            position: Position(position),
            next_offset: cursor.next_offset,
        })
    }

    /// As a [`ReadCursor`].
    pub fn cursor(self) -> ReadCursor {
        cursor_at(self.segment_base, self.position, self.next_offset)
    }

    /// The run of a chunk starting here, at index `at` of its bytes.
    pub fn start(self, at: usize) -> ChunkStart {
        ChunkStart { at, cursor: self.cursor(), retention_boundary: self.position.0 == 0 }
    }

    /// An empty chunk: the end of what is readable now.
    pub fn end_chunk(self, crc_checked: bool) -> BatchChunk {
        BatchChunk { next: Some(self.cursor()), crc_checked, ..BatchChunk::default() }
    }
}

/// The cursor at `position` of segment `segment_base`, expecting offset `next_offset`.
pub(crate) fn cursor_at(
    segment_base: Offset,
    position: Position,
    next_offset: Offset,
) -> ReadCursor {
    ReadCursor { next_offset, hint: CursorHint::new(segment_base.0, position.0) }
}
