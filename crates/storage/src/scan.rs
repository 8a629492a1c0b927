//! Positioned reads of `.log` files and the forward batch-header scan.
//!
//! `.log` files are never mapped: like Kafka's `FileRecords` they are read with `pread`
//! ([`FileExt::read_at`]), so a file a broker truncates under a read-only mount makes a read
//! short, never a fault. [`ChunkReader`] keeps one buffer of the file so a forward scan over many
//! small batches costs one system call per chunk, not per batch.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use topicfs_format::{
    BatchInfo, DecodeError, HEADER_SIZE_UP_TO_MAGIC, Position, RECORD_BATCH_OVERHEAD,
    parse_batch_info, peek_entry,
};
use topicfs_source::error::{Error, Result};

/// Bytes read at once by a forward scan: one page-cache page or so, which covers the batches
/// between two offset-index entries at the default `index.interval.bytes` (4096) in one or two
/// system calls, while a lookup that needs a single 61-byte header does not copy much more.
const SCAN_CHUNK: usize = 4096 + 128;

/// One batch (v2) or top-level legacy message located in a `.log` file, from its header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchLocation {
    /// Position of the batch's first byte in the `.log` file.
    pub position: Position,
    /// Header facts (`info.size` is the whole entry, 12-byte overhead included).
    pub info: BatchInfo,
}

impl BatchLocation {
    /// Position just after this batch.
    pub fn end(&self) -> u64 {
        self.position.0.saturating_add(u64::from(self.info.size))
    }
}

/// Wraps a decode error of bytes read at `position` of `file` into [`Error::Corrupt`].
pub fn corrupt_at(file: &Path, position: u64, e: DecodeError) -> Error {
    Error::corrupt(file, position.saturating_add(e.at as u64), e.to_string())
}

/// Up to `len` bytes of `file` at `pos`; fewer only at the end of the file.
///
/// `pread` writes straight into the new vector's spare capacity, so a large read is not
/// zero-filled first as a buffer for [`read_fully_at`] must be (a `.log` chunk of a megabyte
/// cost a megabyte of `memset` before the `pread` that overwrote it).
pub(crate) fn read_vec_at(file: &File, len: usize, pos: u64) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    read_more_at(file, &mut out, len, pos)?;
    Ok(out)
}

/// Appends up to `len` bytes read at `pos` to `out` (fewer only at the end of the file), read
/// straight into its spare capacity.
pub(crate) fn read_more_at(file: &File, out: &mut Vec<u8>, len: usize, pos: u64) -> io::Result<()> {
    let had = out.len();
    // `pread` fills the spare capacity, which this makes `len` (a larger one would only read
    // bytes that the `truncate` below drops: nothing past `len` is ever returned).
    out.reserve_exact(len);
    while out.len() < had + len {
        let at = pos.saturating_add((out.len() - had) as u64);
        match rustix::io::pread(file, rustix::buffer::spare_capacity(out), at) {
            Ok(0) => break,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    out.truncate(had + len);
    Ok(())
}

/// Reads up to `buf.len()` bytes at `pos`; fewer only at the end of the file.
pub(crate) fn read_fully_at(file: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        let at = pos.saturating_add(filled as u64);
        match file.read_at(buf.get_mut(filled..).unwrap_or_default(), at) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

thread_local! {
    /// One scan buffer per thread, reused by every [`ChunkReader`] of the thread, so a lookup
    /// does not allocate and zero-fill a batch-sized buffer each time.
    static SCAN_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A window over `[0, end)` of a `.log` file, refilled with `pread` as the scan moves.
///
/// **Invariant**: `buf[..filled]` holds the file bytes `[buf_start, buf_start + filled)`;
/// `buf` beyond `filled` is scratch space kept between reads.
pub(crate) struct ChunkReader<'a> {
    file: &'a File,
    path: &'a Path,
    end: u64,
    buf: Vec<u8>,
    filled: usize,
    buf_start: u64,
    /// Bytes one refill reads at least ([`SCAN_CHUNK`] unless [`ChunkReader::read_at_least`]).
    chunk: usize,
}

/// Largest scan buffer kept for reuse; a larger one (a huge batch) is freed after use.
const MAX_KEPT_SCAN_BUFFER: usize = 4 << 20;

impl Drop for ChunkReader<'_> {
    fn drop(&mut self) {
        if self.buf.len() <= MAX_KEPT_SCAN_BUFFER {
            SCAN_BUFFER.with(|cell| cell.set(std::mem::take(&mut self.buf)));
        }
    }
}

impl<'a> ChunkReader<'a> {
    /// Reads `file` up to `end` (the segment's committed size, or its file length in recovery).
    pub fn new(file: &'a File, path: &'a Path, end: u64) -> ChunkReader<'a> {
        let buf = SCAN_BUFFER.with(|cell| cell.take());
        ChunkReader { file, path, end, buf, filled: 0, buf_start: 0, chunk: SCAN_CHUNK }
    }

    /// The bytes `[pos, pos + len)`, or `None` if they extend past `end` (or the file is
    /// shorter than `end`, which a concurrent truncation can cause).
    pub fn get(&mut self, pos: u64, len: usize) -> Result<Option<&[u8]>> {
        let Some(stop) = pos.checked_add(len as u64) else { return Ok(None) };
        if stop > self.end {
            return Ok(None);
        }
        let buf_end = self.buf_start + self.filled as u64;
        if pos < self.buf_start || stop > buf_end {
            let want = (len.max(self.chunk) as u64).min(self.end - pos) as usize;
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            let target = self.buf.get_mut(..want).unwrap_or_default();
            let n = read_fully_at(self.file, target, pos)
                .map_err(|e| Error::io(self.path, "read", e))?;
            self.filled = n;
            self.buf_start = pos;
            if n < len {
                return Ok(None);
            }
        }
        let from = (pos - self.buf_start) as usize;
        Ok(self.buf.get(from..from + len))
    }

    /// Makes each refill read at least `bytes` (clamped to 64..=[`SCAN_CHUNK`]): a scan of
    /// headers of batches larger than a chunk reads one header per `pread` whatever it asks,
    /// so reading a page for each only copies bytes it skips.
    pub(crate) fn read_at_least(&mut self, bytes: usize) {
        self.chunk = bytes.clamp(64, SCAN_CHUNK);
    }

    /// The header of the batch at `pos`, or `None` at the end (fewer than 17 bytes left, or a
    /// batch extending past `end`: a torn or not yet committed tail). A `size` below the
    /// minimum, an unknown magic or a malformed header is an error naming the position.
    pub(crate) fn batch_at(&mut self, pos: u64) -> Result<Option<BatchLocation>> {
        let path = self.path;
        let Some(head) = self.get(pos, HEADER_SIZE_UP_TO_MAGIC)? else { return Ok(None) };
        let Some(h) = peek_entry(head).map_err(|e| corrupt_at(path, pos, e))? else {
            return Ok(None);
        };
        let total = h.total_size();
        // v2 needs its 61 header bytes; a legacy message is parsed whole.
        let need = if h.magic >= 2 { RECORD_BATCH_OVERHEAD.min(total) } else { total };
        if pos.checked_add(total as u64).is_none_or(|stop| stop > self.end) {
            return Ok(None);
        }
        let Some(bytes) = self.get(pos, need)? else { return Ok(None) };
        let info = parse_batch_info(bytes).map_err(|e| corrupt_at(path, pos, e))?;
        Ok(Some(BatchLocation { position: Position(pos), info }))
    }

    /// How many bytes from `pos` the buffer holds now (0 if `pos` is outside it), so a caller
    /// can use them before asking for more.
    pub(crate) fn buffered_from(&self, pos: u64) -> usize {
        let buf_end = self.buf_start + self.filled as u64;
        if pos < self.buf_start || pos >= buf_end { 0 } else { (buf_end - pos) as usize }
    }

    /// The `.log` file's path (for errors).
    pub fn path(&self) -> &'a Path {
        self.path
    }

    /// The whole entry of a batch located by [`ChunkReader::batch_at`].
    pub fn entry(&mut self, batch: &BatchLocation) -> Result<Option<&[u8]>> {
        self.get(batch.position.0, batch.info.size as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn read_more_at_appends_the_files_bytes_after_what_is_there_and_fewer_only_at_its_end() {
        let mut file = tempfile::tempfile().unwrap();
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&bytes).unwrap();
        for (have, len) in [(0, 0), (10, 1), (4096, 200_000), (299_990, 50), (300_000, 10)] {
            let mut out = read_vec_at(&file, have, 0).unwrap();
            read_more_at(&file, &mut out, len, have as u64).unwrap();
            let to = (have + len).min(bytes.len());
            assert_eq!(out, &bytes[..to], "{have} then {len}");
        }
    }

    #[test]
    fn read_vec_at_returns_the_files_bytes_and_fewer_only_at_its_end() {
        let mut file = tempfile::tempfile().unwrap();
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&bytes).unwrap();
        for (len, pos) in
            [(0, 0), (1, 0), (4096, 17), (200_000, 99_999), (50, 299_990), (10, 400_000)]
        {
            let got = read_vec_at(&file, len, pos as u64).unwrap();
            let from = pos.min(bytes.len());
            let to = (pos + len).min(bytes.len());
            assert_eq!(got, &bytes[from..to], "len {len} at {pos}");
            assert!(got.len() <= len);
        }
    }
}
