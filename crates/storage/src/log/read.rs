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
        let mut next = self.segments.floor(target);
        // Retention raises the log start before it drops a segment from the map: when the
        // floor segment of `target` was dropped after the check above, the lookup found a
        // later segment, whose first batch does not hold `target`, and the log start now says
        // so. (A cursor into a segment dropped after the lookup is fine: reads from it report
        // the offset out of range.)
        if target < self.log_start_offset() {
            return Err(self.out_of_range(target));
        }
        while let Some(seg) = next {
            next = self.segments.after(seg.base_offset());
            match seg.translate_offset(target)? {
                Translated::Batch(b) => {
                    return Ok(cursor_at(&seg, b.position, target));
                }
                Translated::End(position) => {
                    end_cursor = Some(cursor_at(&seg, position, target));
                }
            }
        }
        // A read-only partition directory without any segment: an empty log at `target`.
        Ok(end_cursor
            .unwrap_or(ReadCursor { next_offset: target, hint: CursorHint::new(target.0, 0) }))
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
                if self.segments.is_empty() {
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
            if seg.generation() != cursor.generation {
                // Made in a segment the cleaner replaced: its position means nothing here;
                // find the place by offset.
                cursor.position = match seg.translate_offset(cursor.next_offset)? {
                    Translated::Batch(b) => b.position,
                    Translated::End(p) => p,
                };
                cursor.generation = seg.generation();
            }
            // Whether `seg` was already sealed before it is read: a segment with a successor
            // never grows again. Taken first, so that a writer appending to `seg` and rolling
            // between the read and the check below is not mistaken for damage.
            let sealed_before_read = self.segments.after(seg.base_offset()).is_some();
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
            let next_segment = self.segments.after(cursor.segment_base).map(|s| s.base_offset());
            match next_segment {
                Some(base) if cursor.position.0 >= seg.size() => {
                    let generation = self.segment(base).map_or(0, |s| s.generation());
                    cursor = SegmentCursor {
                        segment_base: base,
                        position: Position(0),
                        generation,
                        ..cursor
                    };
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
    ) -> Result<Option<topicfs_source::BatchHeads>> {
        self.maybe_refresh()?;
        let Some(mut at) = SegmentCursor::of(cursor) else { return Ok(None) };
        let Some(seg) = self.segment(at.segment_base) else { return Ok(None) };
        if seg.generation() != at.generation {
            // As in `read`: made in a segment the cleaner replaced.
            at.position = match seg.translate_offset(at.next_offset)? {
                Translated::Batch(b) => b.position,
                Translated::End(p) => p,
            };
            at.generation = seg.generation();
        }
        let (heads, end) = seg.read_heads(at.position, max_bytes)?;
        let Some(last) = heads.last() else { return Ok(None) };
        let next = SegmentCursor {
            position: end,
            next_offset: at.next_offset.max(last.info.last_offset.plus(1)),
            ..at
        };
        Ok(Some(topicfs_source::BatchHeads {
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
/// batch start in its `.log`, or the segment's end), the position's bits from
/// [`GENERATION_SHIFT`] on holding the segment's cleaner generation
/// ([`LogSegment::generation`]: 0 but for a segment the cleaner wrote while the log was open).
/// A cursor whose generation is not its segment's was made in a segment the cleaner replaced:
/// its position means nothing in the replacement, which is read from the cursor's offset
/// instead, and [`topicfs_source::PartitionSource::holds`] says it is no longer held (as after
/// retention), so the view drops what it built on it.
///
/// **Invariant**: `position` is the position of a batch start in the segment whose base offset
/// is `segment_base` (or that segment's end) when `generation` is that segment's, and every
/// batch before it holds only offsets below `next_offset`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct SegmentCursor {
    pub segment_base: Offset,
    pub position: Position,
    pub next_offset: Offset,
    pub generation: u32,
}

/// Where a hint's position keeps the segment's cleaner generation (positions stay below 1 TiB).
pub(crate) const GENERATION_SHIFT: u32 = 40;

impl SegmentCursor {
    /// The engine's reading of `cursor`; `None` for a cursor without a hint.
    pub fn of(cursor: &ReadCursor) -> Option<SegmentCursor> {
        let (base, raw) = cursor.hint.get()?;
        Some(SegmentCursor {
            segment_base: Offset(base),
            position: Position(raw & ((1 << GENERATION_SHIFT) - 1)),
            next_offset: cursor.next_offset,
            generation: (raw >> GENERATION_SHIFT) as u32,
        })
    }

    /// As a [`ReadCursor`].
    pub fn cursor(self) -> ReadCursor {
        let raw = self.position.0 | (u64::from(self.generation) << GENERATION_SHIFT);
        ReadCursor {
            next_offset: self.next_offset,
            hint: CursorHint::new(self.segment_base.0, raw),
        }
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

/// The cursor at `position` of `seg`, expecting offset `next_offset`.
pub fn cursor_at(seg: &LogSegment, position: Position, next_offset: Offset) -> ReadCursor {
    SegmentCursor {
        segment_base: seg.base_offset(),
        position,
        next_offset,
        generation: seg.generation(),
    }
    .cursor()
}
