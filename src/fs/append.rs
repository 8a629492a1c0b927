//! The state behind an open `append` or `append.json`: lines become records, one `write()` one
//! batch.
//!
//! **Invariants**:
//! - `pending` never contains a newline: it is the tail of what was written after the last
//!   newline, a line waiting for its end (or for `flush`/`close`).
//! - A `write()` either appends every complete line it ends (as one call to
//!   [`PartitionSource::append`], which writes one batch unless `max.message.bytes` forces more)
//!   and keeps its trailing partial line, or fails and changes nothing: no record of it is in
//!   the log and `pending` is what it was before.
//! - When `write()` returns, its records are in the log and visible to readers.
//!
//! A topic-level `append` ([`AppendTarget::Topic`]) routes each `write()`'s records with
//! [`TopicAppender`]: one append (one batch) per partition that receives records. There the
//! all-or-nothing rule holds per partition: when a later partition's append fails, the earlier
//! partitions keep their records (as with a producer writing several partitions without a
//! transaction), and the error is returned.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{NewRecord, RecordRef, value_line_records};
use crate::source::PartitionSource;
use crate::view::envelope::{self, find_newline};
use crate::view::topic::TopicAppender;

/// Where an append file's records go.
pub enum AppendTarget {
    /// `<topic>/<p>/append*`: one partition.
    Partition(Arc<dyn PartitionSource>),
    /// `<topic>/append*`: the partition Kafka's default partitioner chooses.
    Topic(TopicAppender),
}

impl AppendTarget {
    fn append(&self, records: Vec<NewRecord>) -> Result<()> {
        match self {
            AppendTarget::Partition(p) => p.append(&records).map(drop),
            AppendTarget::Topic(t) => t.append(records).map(drop),
        }
    }

    /// Appends `head` (when given) and the `\n`-terminated lines of `lines` as records whose
    /// values are the lines (the `append` file); returns how many records. A partition's
    /// engine encodes them straight from the written bytes.
    fn append_value_lines(&self, head: Option<&[u8]>, lines: &[u8]) -> Result<u64> {
        match self {
            AppendTarget::Partition(p) => {
                let info = p.append_value_lines(head, lines)?;
                Ok(info.last_offset.0.saturating_sub(info.first_offset.0).saturating_add(1) as u64)
            }
            AppendTarget::Topic(_) => {
                let records = value_line_records(head, lines);
                let count = records.len() as u64;
                if count > 0 {
                    self.append(records.iter().map(RecordRef::to_new_record).collect())?;
                }
                Ok(count)
            }
        }
    }

    fn sync(&self) -> Result<()> {
        match self {
            AppendTarget::Partition(p) => p.sync(),
            AppendTarget::Topic(t) => t.sync(),
        }
    }
}

impl std::fmt::Debug for AppendTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppendTarget::Partition(p) => write!(f, "{}-{}", p.topic(), p.partition()),
            AppendTarget::Topic(t) => write!(f, "{}", t.topic()),
        }
    }
}

/// How much longer than `max.message.bytes` an `append.json` line may grow while it waits for
/// its newline (the record it holds is checked against the real limit when it is appended).
pub const JSON_LINE_FACTOR: usize = 8;

/// Which of the two append files a handle writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AppendFormat {
    /// `append`: each line is one record whose value is the line.
    Lines,
    /// `append.json`: each line is one JSON envelope (the `.json` rendering's shape).
    Json,
}

impl AppendFormat {
    /// Turns complete lines (each ending in `\n`) into records; `first_line` is the 1-based
    /// number of the first of them in what this handle was written (for error messages). Fails
    /// without side effects on malformed input.
    fn records(self, lines: &[u8], first_line: u64) -> Result<Vec<NewRecord>> {
        match self {
            AppendFormat::Lines => Ok(envelope::split_value_lines(lines).0),
            AppendFormat::Json => Ok(envelope::split_envelope_lines(lines, first_line)?.0),
        }
    }
}

/// One open append file.
pub struct AppendState {
    target: AppendTarget,
    format: AppendFormat,
    /// The partial line after the last newline. **Invariant**: no `\n` in it.
    pending: Vec<u8>,
    /// Largest partial line kept in memory: a longer line could never be a record
    /// (`max.message.bytes` bounds the whole batch; [`JSON_LINE_FACTOR`] times that for JSON).
    max_line_bytes: usize,
    /// Complete lines appended through this handle so far (line numbers in error messages).
    lines_done: u64,
    /// The lock owner (the kernel's id of the writing process's file table) of the write that
    /// left `pending`, when the kernel sent one.
    pending_owner: Option<u64>,
}

impl std::fmt::Debug for AppendState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppendState")
            .field("target", &self.target)
            .field("format", &self.format)
            .field("pending", &self.pending.len())
            .finish()
    }
}

impl AppendState {
    /// State for a freshly opened append file.
    pub fn new(
        partition: Arc<dyn PartitionSource>,
        format: AppendFormat,
        max_line_bytes: usize,
    ) -> AppendState {
        AppendState::for_target(AppendTarget::Partition(partition), format, max_line_bytes)
    }

    /// State for a freshly opened append file writing to `target`.
    pub fn for_target(
        target: AppendTarget,
        format: AppendFormat,
        max_line_bytes: usize,
    ) -> AppendState {
        let max_line_bytes = match format {
            AppendFormat::Lines => max_line_bytes,
            // An envelope is longer than its record: base64 adds a third, JSON escapes of
            // control characters up to six times; refuse only lines no record could come from.
            AppendFormat::Json => max_line_bytes.saturating_mul(JSON_LINE_FACTOR),
        };
        AppendState {
            target,
            format,
            pending: Vec::new(),
            max_line_bytes,
            lines_done: 0,
            pending_owner: None,
        }
    }

    /// Handles one `write()` by `owner` (the kernel's lock owner, when known): the complete
    /// lines it ends become one append; its trailing partial line is kept. Returns the number
    /// of bytes accepted (all of `data`).
    pub fn write(&mut self, data: &[u8], owner: Option<u64>) -> Result<usize> {
        let Some(last_newline) = memchr::memrchr(b'\n', data) else {
            self.check_line_len(self.pending.len().saturating_add(data.len()))?;
            self.pending.extend_from_slice(data);
            self.pending_owner = owner;
            return Ok(data.len());
        };
        let (ended, rest) = data.split_at(last_newline + 1);
        self.check_line_len(rest.len())?;
        let line_count = match self.format {
            AppendFormat::Lines => self.append_lines(ended)?,
            AppendFormat::Json => {
                let mut lines = Vec::with_capacity(self.pending.len().saturating_add(ended.len()));
                lines.extend_from_slice(&self.pending);
                lines.extend_from_slice(ended);
                let records = self.format.records(&lines, self.lines_done.saturating_add(1))?;
                if !records.is_empty() {
                    self.target.append(records)?;
                }
                ended.iter().filter(|&&b| b == b'\n').count() as u64
            }
        };
        self.lines_done = self.lines_done.saturating_add(line_count);
        self.pending.clear();
        self.pending.extend_from_slice(rest);
        self.pending_owner = owner;
        Ok(data.len())
    }

    /// Appends the lines of `ended` (which ends with `\n`), the first one continuing `pending`,
    /// as one append of records encoded from the written bytes: only the line that continues
    /// `pending` is copied. Returns the number of lines. Changes nothing on failure.
    fn append_lines(&self, ended: &[u8]) -> Result<u64> {
        match find_newline(ended) {
            Some(nl) if !self.pending.is_empty() => {
                let (first, after) = ended.split_at(nl);
                let joined = [self.pending.as_slice(), first].concat();
                self.target.append_value_lines(Some(&joined), after.get(1..).unwrap_or_default())
            }
            _ => self.target.append_value_lines(None, ended),
        }
    }

    /// `flush` (a `close()` of one descriptor of this open file) by `owner`: appends the
    /// pending partial line if the closing process is the one that wrote it (or either owner is
    /// unknown). A child that inherited the descriptor through `fork` and closes it (at `exec`
    /// or exit) has another owner and leaves the line waiting, so
    /// `{ printf part; /bin/true; printf 'ial\n'; } >> append` appends one record, `partial`.
    /// (A shell that moves the descriptor itself, e.g. dash running `ls > /dev/null` inside the
    /// group, closes it as the writer: that ends the line.)
    pub fn flush_by(&mut self, owner: Option<u64>) -> Result<()> {
        log::trace!("flush by {owner:?} of {self:?} written by {:?}", self.pending_owner);
        match (owner, self.pending_owner) {
            (Some(closing), Some(writer)) if closing != writer => Ok(()),
            _ => self.flush(),
        }
    }

    /// Appends the pending partial line, if any, as a record (at the last close, or at
    /// shutdown). The line is dropped
    /// whether or not the append succeeds, so a refused line is reported once, not again at
    /// every later flush.
    pub fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut line = std::mem::take(&mut self.pending);
        // The unterminated last line is a line like any other: terminate it and parse it so.
        line.push(b'\n');
        let first_line = self.lines_done.saturating_add(1);
        self.lines_done = first_line;
        let records = self.format.records(&line, first_line)?;
        if !records.is_empty() {
            self.target.append(records)?;
        }
        Ok(())
    }

    /// Makes everything appended so far durable (`fsync`). A pending partial line is not a
    /// record yet and stays pending.
    pub fn sync(&self) -> Result<()> {
        self.target.sync()
    }

    /// Bytes waiting for a newline.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    fn check_line_len(&self, len: usize) -> Result<()> {
        if len > self.max_line_bytes {
            return Err(Error::RecordTooLarge { size: len, max: self.max_line_bytes });
        }
        Ok(())
    }
}
