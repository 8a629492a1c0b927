//! One cleaned segment being written: `<base>.log.cleaned` and its `.index.cleaned`,
//! `.timeindex.cleaned` and (when it has entries) `.txnindex.cleaned`, with index entries made
//! by Kafka's append rule (an offset-index entry for a batch's last offset at its position once
//! more than `index.interval.bytes` were written since the last one, a time-index entry for the
//! largest timestamp so far when it grew; the final time-index entry of a sealed segment at
//! the end).

use std::fs::{File, OpenOptions};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;
use topicfs_storage::open::open_regular;

use topicfs_format::file_name::format_base_offset;
use topicfs_format::index_entry::{OffsetPosition, TimestampOffset};
use topicfs_format::txn_index::TxnIndexEntry;
use topicfs_format::{NO_TIMESTAMP, Offset, RelativeOffset, Timestamp};
use topicfs_source::AbortedTxn;
use topicfs_source::error::{Error, Result};

/// The suffix of the cleaner's files being written (Kafka's `CleanedFileSuffix`).
pub const CLEANED: &str = ".cleaned";
/// The suffix of a finished cleaned segment not yet renamed (Kafka's `SwapFileSuffix`).
pub const SWAP: &str = ".swap";
/// The kinds of a segment's files in the order Kafka's `changeFileSuffixes` renames them.
pub const KINDS: [&str; 4] = [".log", ".index", ".timeindex", ".txnindex"];

/// Path of the file `kind` (e.g. `.log`) of the segment `base` in `dir`, with `state`
/// (`""`, [`CLEANED`], [`SWAP`], `.deleted`) after it.
pub fn file_path(dir: &Path, base: Offset, kind: &str, state: &str) -> PathBuf {
    dir.join(format!("{}{kind}{state}", format_base_offset(base)))
}

/// See the module doc.
pub struct CleanedSegment {
    pub(super) base: Offset,
    dir: PathBuf,
    log: File,
    log_path: PathBuf,
    pub(super) size: u64,
    index: Vec<u8>,
    time_index: Vec<u8>,
    txn_index: Vec<u8>,
    interval: u64,
    bytes_since_last_entry: u64,
    /// `(max timestamp, its batch's last offset)` so far.
    max_so_far: (Timestamp, Offset),
    last_time_entry: Timestamp,
    last_offset: Option<Offset>,
}

impl CleanedSegment {
    /// Creates `<base>.log.cleaned` in `dir` (replacing a leftover one).
    pub fn create(dir: &Path, base: Offset, index_interval_bytes: u32) -> Result<CleanedSegment> {
        let log_path = file_path(dir, base, ".log", CLEANED);
        let log = open_regular(
            &log_path,
            OpenOptions::new().write(true).create(true).truncate(true),
            "create",
        )?;
        Ok(CleanedSegment {
            base,
            dir: dir.to_path_buf(),
            log,
            log_path,
            size: 0,
            index: Vec::new(),
            time_index: Vec::new(),
            txn_index: Vec::new(),
            interval: u64::from(index_interval_bytes),
            bytes_since_last_entry: 0,
            max_so_far: (NO_TIMESTAMP, base),
            last_time_entry: NO_TIMESTAMP,
            last_offset: None,
        })
    }

    fn relative(&self, offset: Offset) -> Result<RelativeOffset> {
        offset
            .0
            .checked_sub(self.base.0)
            .and_then(|r| u32::try_from(r).ok())
            .filter(|r| *r <= i32::MAX as u32)
            .map(RelativeOffset)
            .ok_or_else(|| {
                Error::corrupt(
                    &self.log_path,
                    self.size,
                    format!("offset {offset} does not fit a relative offset of base {}", self.base),
                )
            })
    }

    /// Appends whole batches `bytes` whose last offset is `last_offset` and largest timestamp
    /// `max_timestamp` (Kafka's `LogSegment.append`).
    pub fn append(
        &mut self,
        bytes: &[u8],
        last_offset: Offset,
        max_timestamp: Timestamp,
    ) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let relative = self.relative(last_offset)?;
        let position = u32::try_from(self.size).map_err(|_| {
            Error::corrupt(&self.log_path, self.size, "cleaned segment larger than 2 GiB")
        })?;
        self.log.write_all(bytes).map_err(|e| Error::io(&self.log_path, "write", e))?;
        if max_timestamp > self.max_so_far.0 {
            self.max_so_far = (max_timestamp, last_offset);
        }
        if self.bytes_since_last_entry > self.interval {
            self.index.extend_from_slice(
                &OffsetPosition { relative_offset: relative, position }.encode(),
            );
            self.maybe_time_entry()?;
            self.bytes_since_last_entry = 0;
        }
        self.bytes_since_last_entry += bytes.len() as u64;
        self.size += bytes.len() as u64;
        self.last_offset = Some(last_offset);
        Ok(())
    }

    fn maybe_time_entry(&mut self) -> Result<()> {
        let (ts, offset) = self.max_so_far;
        if ts > self.last_time_entry {
            let relative = self.relative(offset)?;
            self.time_index.extend_from_slice(
                &TimestampOffset { timestamp: ts, relative_offset: relative }.encode(),
            );
            self.last_time_entry = ts;
        }
        Ok(())
    }

    /// Adds an aborted transaction to the output's `.txnindex`.
    pub fn append_aborted(&mut self, txn: &AbortedTxn) {
        let entry = TxnIndexEntry {
            version: 0,
            producer_id: txn.producer_id,
            first_offset: txn.first_offset,
            last_offset: txn.last_offset,
            last_stable_offset: txn.last_stable_offset,
        };
        self.txn_index.extend_from_slice(&entry.to_bytes());
    }

    /// Seals the output (final time-index entry), writes the index files, makes everything
    /// durable and gives the `.log` the modification time `mtime` (the last input's, as Kafka
    /// does). `stop_early` leaves the `.log.cleaned` half written, for the crash tests.
    pub fn finish(mut self, mtime: SystemTime, stop_early: bool) -> Result<()> {
        if stop_early {
            let half = self.size / 2;
            self.log.set_len(half).map_err(|e| Error::io(&self.log_path, "truncate", e))?;
            return Ok(());
        }
        self.maybe_time_entry()?;
        self.log.sync_all().map_err(|e| Error::io(&self.log_path, "fsync", e))?;
        if let Err(e) = self.log.set_modified(mtime) {
            log::debug!("{}: mtime not set: {e}", self.log_path.display());
        }
        let mut files = vec![(".index", &self.index), (".timeindex", &self.time_index)];
        if !self.txn_index.is_empty() {
            files.push((".txnindex", &self.txn_index));
        }
        for (kind, bytes) in files {
            let path = file_path(&self.dir, self.base, kind, CLEANED);
            let mut f = open_regular(
                &path,
                OpenOptions::new().write(true).create(true).truncate(true),
                "create",
            )?;
            f.write_all(bytes).map_err(|e| Error::io(&path, "write", e))?;
            f.sync_all().map_err(|e| Error::io(&path, "fsync", e))?;
        }
        Ok(())
    }
}
