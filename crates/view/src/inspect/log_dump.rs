//! The dump of a `.log` read piece by piece: the counting pass, its checkpoints, and the
//! chunked walk over a segment's batches that renders only what a read needs.

use crate::checkpoints::SparseCheckpoints;
use topicfs_format::Offset;
use topicfs_format::dump::{invalid_bytes_line, log_starting_offset_line};
use topicfs_source::PartitionSource;
use topicfs_source::error::{Error, Result};
use topicfs_source::{SegmentFileKind, SegmentSummary};

use super::dump::render_entry;
use super::entries::ChunkedEntries;
use super::{CHECKPOINT_TEXT_BYTES, CHUNK_BYTES, READ_CHUNK_BYTES, file_label, slice_at};

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
    checkpoints: SparseCheckpoints<Checkpoint>,
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
        // Never thinned: one per `interval` of text bounds their count.
        let mut checkpoints = SparseCheckpoints::new(Checkpoint { text, log: 0 }, usize::MAX);
        let mut entries = ChunkedEntries::new(base, 0, segment.log_size, chunk);
        let mut scratch = String::new();
        while let Some(e) = entries.next(part)? {
            let last = checkpoints.last().map_or(0, |c| c.text);
            if text.saturating_sub(last) >= interval {
                checkpoints.push(Checkpoint { text, log: e.position }, |_| true);
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
    pub(super) fn memory(&self) -> u64 {
        let checkpoints = self.checkpoints.len().saturating_mul(size_of::<Checkpoint>());
        let texts =
            self.label.len().saturating_add(self.head.len()).saturating_add(self.foot.len());
        checkpoints.saturating_add(texts) as u64
    }

    /// Up to `len` bytes at `offset`, rendered from `part`'s `.log`, continuing the text
    /// `window` holds when it can.
    pub(super) fn read_at(
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
            let first = Checkpoint { text: self.head.len() as u64, log: 0 };
            let (i, at) =
                self.checkpoints.floor_at(|c| c.text <= from).map_or((0, first), |(i, c)| (i, *c));
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
                match self.checkpoints.as_slice().get(*next_checkpoint) {
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
pub(super) struct Window {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::inspect::test_support::{damaged_multi_batch_log, one_segment, three_batches};
    use crate::inspect::{Inspection, InspectionReader, dump_log, files};

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
        boundaries.extend(dump.checkpoints.as_slice().iter().map(|c| c.text));
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
}
