//! The segment's files as `segments/` shows them: sizes and raw bytes of the `.log`, the index
//! files (their valid entries, or the file on disk when served rebuilt) and the `.txnindex`.

use super::*;

impl LogSegment {
    /// Size of the `.txnindex` file, `None` if there is none or it is not a regular file (one
    /// `stat`, remembered once the segment is sealed).
    pub fn txn_index_size(&self) -> Option<u64> {
        let path = self.file_path(".txnindex");
        let size = || std::fs::metadata(&path).ok().filter(|m| m.is_file()).map(|m| m.len());
        if self.is_active() {
            return size();
        }
        *lock(&self.sealed_txn_index_size).get_or_insert_with(size)
    }

    /// Whether the index (`time`: the time index) is served rebuilt in memory because its file
    /// failed the sanity check (loading it first).
    fn index_repaired(&self, time: bool) -> Result<bool> {
        if time {
            self.with_time_index(|_| ())?;
        } else {
            self.with_offset_index(|_| ())?;
        }
        Ok(lock(&self.index_repairs).iter().any(|r| r.time == time))
    }

    /// Size of an index file as a reader should see it: the valid entries of an opened index
    /// (no preallocated zero tail), else the file's length on disk. An index rebuilt in memory
    /// (read-only mode) is shown as its file on disk is, damage included.
    pub fn index_file_size(&self, time: bool) -> Result<u64> {
        if self.index_repaired(time)? {
            let path = self.file_path(if time { ".timeindex" } else { ".index" });
            // A refused file (a FIFO, a device, a dangling link ...) has no bytes to show.
            return match file_type(&path) {
                Ok(FileType::Regular) => {
                    let meta = std::fs::metadata(&path).map_err(|e| Error::io(&path, "stat", e))?;
                    Ok(meta.len())
                }
                Ok(_) => Ok(0),
                Err(e) => Err(Error::io(&path, "stat", e)),
            };
        }
        let len = if time {
            self.with_time_index(|i| i.valid_bytes().len())?
        } else {
            self.with_offset_index(|i| i.valid_bytes().len())?
        };
        Ok(len as u64)
    }

    /// Copies index bytes from `pos` into `buf`: what [`LogSegment::index_file_size`] shows.
    pub fn read_index_bytes(&self, time: bool, pos: u64, buf: &mut [u8]) -> Result<usize> {
        if self.index_repaired(time)? {
            let path = self.file_path(if time { ".timeindex" } else { ".index" });
            let file = match open_read(&path) {
                Ok(file) => file,
                // A refused file (a FIFO, a device ...) is shown empty (see `index_file_size`).
                Err(Error::WrongFileType { .. }) => return Ok(0),
                Err(e) => return Err(e),
            };
            return read_fully_at(&file, buf, pos).map_err(|e| Error::io(&path, "read", e));
        }
        let copy = |bytes: &[u8], buf: &mut [u8]| -> usize {
            let Some(src) = usize::try_from(pos).ok().and_then(|p| bytes.get(p..)) else {
                return 0;
            };
            let n = src.len().min(buf.len());
            buf[..n].copy_from_slice(&src[..n]);
            n
        };
        if time {
            self.with_time_index(|i| copy(i.valid_bytes(), buf))
        } else {
            self.with_offset_index(|i| copy(i.valid_bytes(), buf))
        }
    }

    /// Reads raw `.log` bytes at `pos`, never past the committed size.
    pub fn read_log_bytes(&self, pos: u64, buf: &mut [u8]) -> Result<usize> {
        let end = self.size();
        if pos >= end {
            return Ok(0);
        }
        let n = ((end - pos) as usize).min(buf.len());
        read_fully_at(&self.log, &mut buf[..n], pos)
            .map_err(|e| Error::io(&self.log_path, "read", e))
    }

    /// Up to `buf.len()` bytes of the `.log` file at `pos`, past the segment's size too (what
    /// follows the last whole batch, for `check`); fewer only at the end of the file.
    pub fn read_log_bytes_on_disk(&self, pos: u64, buf: &mut [u8]) -> Result<usize> {
        read_fully_at(&self.log, buf, pos).map_err(|e| Error::io(&self.log_path, "read", e))
    }
}
