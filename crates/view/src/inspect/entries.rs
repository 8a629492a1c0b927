//! Walking the whole entries (batches, or legacy message sets) of a `.log`: framed from bytes
//! held whole, or read from a segment a chunk at a time.

use topicfs_format::{BatchInfo, Offset, parse_batch_info, peek_entry};
use topicfs_source::PartitionSource;
use topicfs_source::SegmentFileKind;
use topicfs_source::error::Result;

use super::files;

/// One whole entry of a `.log` file at some position.
pub(super) struct Entry<'a> {
    pub(super) position: u64,
    pub(super) bytes: &'a [u8],
    pub(super) info: BatchInfo,
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
pub(super) struct Entries<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Entries<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Entries<'a> {
        Entries { bytes, at: 0 }
    }

    /// Bytes after the last whole entry returned (valid once the iterator ended).
    pub(super) fn invalid_tail(&self) -> usize {
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
///
/// [`SegmentFiles::read_segment_file`]: topicfs_source::SegmentFiles::read_segment_file
pub(super) struct ChunkedEntries {
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
    pub(super) fn new(base: Offset, position: u64, limit: u64, chunk: usize) -> ChunkedEntries {
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
    pub(super) fn position(&self) -> u64 {
        self.buf_start.saturating_add(self.at as u64)
    }

    /// The next whole entry; `None` once the bytes left do not start one.
    pub(super) fn next(&mut self, part: &dyn PartitionSource) -> Result<Option<Entry<'_>>> {
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
    pub(super) fn end_of_file(mut self, part: &dyn PartitionSource) -> Result<u64> {
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
