//! The state behind an open `append` or `append.json`: lines become records, one `write()` one
//! batch.
//!
//! **Invariants**:
//! - `pending` never contains a newline: it is the tail of what was written after the last
//!   newline, a line waiting for its end (or for `flush`/`close`).
//! - A `write()` either appends every complete line it ends (as one call to
//!   [`PartitionSource::append`], which writes one batch unless `max.message.bytes` forces more)
//!   and keeps its trailing partial line, or fails: no record of it is in the log, and
//!   `pending` is what it was before, except when the failure refuses the line being written
//!   (too long to ever be a record): then `pending` is dropped and the rest of that line, up
//!   to its newline, is refused too (see [`AppendState::write`]). Nothing of a refused line is
//!   ever appended.
//! - When `write()` returns, its records are in the log and visible to readers.
//!
//! A topic-level `append` ([`AppendTarget::Topic`]) routes each `write()`'s records with
//! [`TopicAppender`]: one append (one batch) per partition that receives records. There the
//! all-or-nothing rule holds per partition: when a later partition's append fails, the earlier
//! partitions keep their records (as with a producer writing several partitions without a
//! transaction), and the error is returned.

use std::sync::Arc;

use topicfs_format::{BatchSpec, NewRecord, RecordRef, encode_batch, value_line_records};
use topicfs_source::error::{Error, Result};
use topicfs_source::{PartitionSource, Records};
use topicfs_view::envelope::{self, EnvelopeBound, find_newline};
use topicfs_view::topic::TopicAppender;

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
            AppendTarget::Partition(p) => p.append(Records::Owned(&records)).map(drop),
            AppendTarget::Topic(t) => t.append(records).map(drop),
        }
    }

    /// Appends `head` (when given) and the `\n`-terminated lines of `lines` as records whose
    /// values are the lines (the `append` file); returns how many records. A partition's
    /// engine encodes them straight from the written bytes.
    fn append_value_lines(&self, head: Option<&[u8]>, lines: &[u8]) -> Result<u64> {
        match self {
            AppendTarget::Partition(p) => {
                let info = p.append(Records::ValueLines { head, lines })?;
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
    fn records(
        self,
        lines: &[u8],
        first_line: u64,
        schemas: Option<&topicfs_view::schemas::Schemas>,
    ) -> Result<Vec<NewRecord>> {
        match self {
            AppendFormat::Lines => Ok(envelope::split_value_lines(lines).0),
            AppendFormat::Json => {
                Ok(envelope::split_envelope_lines_with(lines, first_line, schemas)?.0)
            }
        }
    }
}

/// One open append file.
pub struct AppendState {
    target: AppendTarget,
    format: AppendFormat,
    /// `append.json`: keys and payloads naming a schema are encoded with these.
    schemas: Option<Arc<topicfs_view::schemas::Schemas>>,
    /// The partial line after the last newline. **Invariant**: no `\n` in it.
    pending: Vec<u8>,
    /// Largest partial line kept in memory: a longer line could never be a record
    /// (`max.message.bytes` bounds the whole batch; [`JSON_LINE_FACTOR`] times that for JSON).
    max_line_bytes: usize,
    /// `max.message.bytes`: an `append.json` line whose record holds more key, value and
    /// header bytes than this ([`EnvelopeBound`]) is refused before its newline.
    max_record_bytes: usize,
    /// `append.json`: the least the record of `pending` holds. **Invariant**: `pending` fed to
    /// a fresh [`EnvelopeBound`] gives this one.
    json_bound: EnvelopeBound,
    /// Complete lines appended through this handle so far (line numbers in error messages).
    lines_done: u64,
    /// The lock owner (the kernel's id of the writing process's file table) of the write that
    /// left `pending`, when the kernel sent one.
    pending_owner: Option<u64>,
    /// A line refused while it was being written: what follows, up to its newline, is its
    /// rest, discarded and refused too. **Invariant**: while set, `pending` is empty.
    refused: Option<RefusedLine>,
    /// A refusal that dropped bytes earlier `write()`s had accepted, not yet reported by a
    /// failed `write()` since: the writer may only have seen a short count (the kernel's
    /// answer when a later request of the same `write()` failed). The writer's `close()`
    /// reports it.
    unreported: Option<TooLarge>,
    /// Bytes appended through this handle since the last sizing it queued (see
    /// [`AppendState::sizing_due`]).
    unsized_bytes: u64,
}

/// Bytes an open append handle takes before the partition is sized in the background as after
/// a close (see `sizing::AppendedSizing`), so that a writer that keeps its handle open for days
/// leaves sizes for the next mount too, not only one that closes it.
pub const SIZE_APPENDED_EVERY: u64 = 64 << 20;

/// Why a line was refused, kept to refuse the rest of the line (and report it at `close()`)
/// with the same words: [`Error::RecordTooLarge`]'s fields, or a broker's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
enum TooLarge {
    /// Over a limit this mount knows: `what` was `size` bytes, over `max`, the value of
    /// `setting`.
    Limit { what: &'static str, size: usize, setting: &'static str, max: usize },
    /// The broker's refusal (`MESSAGE_TOO_LARGE`, `RECORD_LIST_TOO_LARGE`): [`Error::Kafka`]'s
    /// fields, the limit being the broker's.
    Broker {
        broker: String,
        api: &'static str,
        code: i16,
        name: Box<str>,
        topic: Option<Box<str>>,
        partition: Option<i32>,
        message: Option<Box<str>>,
    },
}

impl TooLarge {
    fn error(&self) -> Error {
        match self.clone() {
            TooLarge::Limit { what, size, setting, max } => {
                Error::RecordTooLarge { what, size, setting, max }
            }
            TooLarge::Broker { broker, api, code, name, topic, partition, message } => {
                Error::Kafka { broker, api, code, name, topic, partition, message }
            }
        }
    }

    /// The refused line has grown by `more` bytes.
    fn grow(&mut self, more: usize) {
        if let TooLarge::Limit { size, .. } = self {
            *size = size.saturating_add(more);
        }
    }
}

/// The state of a refused line: see [`AppendState::write`].
#[derive(Debug)]
struct RefusedLine {
    why: TooLarge,
    /// The refused line's end has been written: the bytes of that request up to and including
    /// the newline. A writer that saw a short count writes them again (it resumes where the
    /// kernel said the write stopped): a request that starts with them (or is a start of them)
    /// is that again, and refused; any other request starts a new line.
    end: Option<Vec<u8>>,
}

impl RefusedLine {
    /// Whether `data` is the refused line's end written again (or a start of it).
    fn is_end_again(&self, data: &[u8]) -> bool {
        match &self.end {
            Some(end) => data.starts_with(end) || (!data.is_empty() && end.starts_with(data)),
            None => false,
        }
    }
}

impl std::fmt::Debug for AppendState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppendState")
            .field("target", &self.target)
            .field("format", &self.format)
            .field("pending", &self.pending.len())
            .field("refused", &self.refused.as_ref().map(|r| &r.why))
            .finish()
    }
}

impl AppendState {
    /// The partition this handle appended records to (a partition's `append` file that took
    /// at least one line), for sizing them once closed (see `sizing::AppendedSizing`).
    pub fn appended_partition(&self) -> Option<Arc<dyn PartitionSource>> {
        match &self.target {
            AppendTarget::Partition(p) if self.lines_done > 0 => Some(Arc::clone(p)),
            AppendTarget::Partition(_) | AppendTarget::Topic(_) => None,
        }
    }

    /// The partition to size in the background now, while the handle stays open: once
    /// [`SIZE_APPENDED_EVERY`] bytes were appended since the last time this said so (what a
    /// close leaves is sized at the close).
    pub fn sizing_due(&mut self) -> Option<Arc<dyn PartitionSource>> {
        if self.unsized_bytes < SIZE_APPENDED_EVERY {
            return None;
        }
        self.unsized_bytes = 0;
        self.appended_partition()
    }

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
        let max_record_bytes = max_line_bytes;
        let max_line_bytes = match format {
            AppendFormat::Lines => max_line_bytes,
            // An envelope is longer than its record: base64 adds a third, JSON escapes of
            // control characters up to six times; refuse only lines no record could come from.
            AppendFormat::Json => max_line_bytes.saturating_mul(JSON_LINE_FACTOR),
        };
        AppendState {
            target,
            format,
            schemas: None,
            pending: Vec::new(),
            max_line_bytes,
            max_record_bytes,
            json_bound: EnvelopeBound::default(),
            lines_done: 0,
            unsized_bytes: 0,
            pending_owner: None,
            refused: None,
            unreported: None,
        }
    }

    /// The same state encoding `append.json` keys and payloads that name a schema with
    /// `schemas` (see [`topicfs_view::envelope`]).
    pub fn with_schemas(mut self, schemas: Option<Arc<topicfs_view::schemas::Schemas>>) -> Self {
        self.schemas = schemas;
        self
    }

    /// The file as the mount shows it (`<topic>/<p>/append`), for log lines.
    pub fn path(&self) -> String {
        let file = match self.format {
            AppendFormat::Lines => "append",
            AppendFormat::Json => "append.json",
        };
        match &self.target {
            AppendTarget::Partition(p) => format!("{}/{}/{file}", p.topic(), p.partition()),
            AppendTarget::Topic(t) => format!("{}/{file}", t.topic()),
        }
    }

    /// Handles one `write()` request by `owner` (the kernel's lock owner, when known): the
    /// complete lines it ends become one append; its trailing partial line is kept. Returns the
    /// number of bytes accepted (all of `data`).
    ///
    /// The kernel splits a large `write()` into requests of at most `max_write` bytes and
    /// answers the `write()` with the bytes of the requests before the first that failed. So
    /// a line too long to ever be a record (over [`Self::max_line_bytes`], or refused by the
    /// partition: `max.message.bytes`, `segment.bytes`) is refused by the request that makes
    /// it so, with `EFBIG`, and then, whatever the requests' sizes:
    /// - nothing of it is stored: the bytes earlier requests accepted into it are dropped (no
    ///   record of it was appended: a line becomes a record only at its newline);
    /// - the rest of it, up to its newline, is discarded and refused with `EFBIG` too (a
    ///   request that holds its newline is refused as a whole: lines after that newline in the
    ///   same request are not stored either), and so is that end written again (the writer
    ///   resuming after a short count);
    /// - the next request starts a new line;
    /// - when the refusal dropped bytes earlier requests had accepted and no refused request
    ///   reported it since, the writer's `close()` fails with `EFBIG` (see `unreported`).
    ///
    /// Every refusal is logged (warn) with the file and the limit.
    pub fn write(&mut self, data: &[u8], owner: Option<u64>) -> Result<usize> {
        if let Some(refused) = &mut self.refused {
            if refused.end.is_none() {
                // The rest of the refused line: discarded up to its newline.
                refused.why.grow(data.len());
                if let Some(nl) = find_newline(data) {
                    refused.end = Some(data.get(..=nl).unwrap_or_default().to_vec());
                    let path = self.path();
                    log::debug!("{path}: the refused line ended; the next write starts a line");
                }
            } else if !refused.is_end_again(data) {
                self.refused = None;
            }
            if let Some(refused) = &self.refused {
                // A request after the refusing one is the first of its `write()`: the writer
                // sees this error.
                self.unreported = None;
                return Err(refused.why.error());
            }
        }
        let result = self.write_lines(data, owner);
        if let Err(e) = &result {
            // A refused line was logged by `refuse_line`; any other refusal of a line too
            // large (one complete in this request) is logged here, and is seen by the writer
            // as the error of its `write()`.
            if e.errno() == libc::EFBIG && self.refused.is_none() {
                self.unreported = None;
                log::warn!("{}: refused a write of {} bytes: {e}", self.path(), data.len());
            }
        }
        result
    }

    /// [`Self::write`] when no refused line is being discarded.
    fn write_lines(&mut self, data: &[u8], owner: Option<u64>) -> Result<usize> {
        let Some(last_newline) = memchr::memrchr(b'\n', data) else {
            let len = self.pending.len().saturating_add(data.len());
            if let Err(why) = self.check_line_len(len) {
                return Err(self.refuse_line(why, None));
            }
            if self.format == AppendFormat::Json {
                let mut bound = self.json_bound.clone();
                bound.feed(data);
                if let Err(why) = self.check_record_bound(&bound) {
                    return Err(self.refuse_line(why, None));
                }
                self.json_bound = bound;
            }
            self.pending.extend_from_slice(data);
            self.pending_owner = owner;
            return Ok(data.len());
        };
        let (ended, rest) = data.split_at(last_newline + 1);
        let first_nl = find_newline(ended).unwrap_or(last_newline);
        let first_end = data.get(..=first_nl).unwrap_or_default();
        if let Err(why) = self.check_line_len(self.pending.len().saturating_add(first_nl)) {
            if self.pending.is_empty() {
                // The whole line is in this request, refused with it: nothing to discard later.
                return Err(why.error());
            }
            return Err(self.refuse_line(why, Some(first_end.to_vec())));
        }
        let mut rest_bound = EnvelopeBound::default();
        if self.format == AppendFormat::Json {
            rest_bound.feed(rest);
        }
        if let Err(why) =
            self.check_line_len(rest.len()).and_then(|()| self.check_record_bound(&rest_bound))
        {
            // The line this request starts (after its last newline) is refused already; the
            // request fails as a whole, so its complete lines are not stored either.
            return Err(self.refuse_line(why, None));
        }
        let appended = match self.format {
            AppendFormat::Lines => self.append_lines(ended),
            AppendFormat::Json => {
                let mut lines = Vec::with_capacity(self.pending.len().saturating_add(ended.len()));
                lines.extend_from_slice(&self.pending);
                lines.extend_from_slice(ended);
                self.format
                    .records(&lines, self.lines_done.saturating_add(1), self.schemas.as_deref())
                    .and_then(|records| {
                        if !records.is_empty() {
                            self.target.append(records)?;
                        }
                        Ok(ended.iter().filter(|&&b| b == b'\n').count() as u64)
                    })
            }
        };
        let line_count = match appended {
            Ok(n) => n,
            Err(e) if e.errno() == libc::EFBIG && !self.pending.is_empty() => {
                // Refused by the partition: when the line this request ends (the one earlier
                // requests began) is the one too large, it is refused; when another is, the
                // request fails and changes nothing.
                match self.first_line_too_large(&e, first_nl, data) {
                    Some(why) => return Err(self.refuse_line(why, Some(first_end.to_vec()))),
                    None => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        self.lines_done = self.lines_done.saturating_add(line_count);
        self.unsized_bytes = self.unsized_bytes.saturating_add(ended.len() as u64);
        self.pending.clear();
        self.pending.extend_from_slice(rest);
        self.json_bound = rest_bound;
        self.pending_owner = owner;
        Ok(data.len())
    }

    /// Refuses the line being written (`pending` and what this request adds to it); `end` is
    /// this request through the line's newline when it holds it. Returns the error for this
    /// request.
    fn refuse_line(&mut self, why: TooLarge, end: Option<Vec<u8>>) -> Error {
        let error = why.error();
        let dropped = self.pending.len();
        let rest = if end.is_some() {
            ""
        } else {
            "; the rest of the line, up to its newline, is refused too"
        };
        log::warn!(
            "{}: refused a line: {error}; {dropped} bytes of it accepted before were dropped{rest}",
            self.path()
        );
        if dropped > 0 {
            // Earlier requests accepted these bytes: the writer may not learn of the refusal
            // from this request (a short count), so `close()` reports it unless a later
            // request does.
            self.unreported = Some(why.clone());
        }
        self.pending = Vec::new();
        self.json_bound = EnvelopeBound::default();
        // `pending_owner` stays: the process that wrote the dropped bytes is the one whose
        // `close()` reports an unreported refusal (not a child closing an inherited copy).
        self.refused = Some(RefusedLine { why, end });
        error
    }

    /// After the partition refused this request's records as too large (`err`), the refusal
    /// of the line that continues `pending` (through `data[..first_nl]`) when that line alone
    /// is too large; `None` when the culprit is another line. The line alone is encoded once
    /// more, uncompressed, to tell (only on this error path).
    fn first_line_too_large(&self, err: &Error, first_nl: usize, data: &[u8]) -> Option<TooLarge> {
        let line = [self.pending.as_slice(), data.get(..first_nl).unwrap_or_default()].concat();
        let line_count = memchr::memchr_iter(b'\n', data).count();
        let (setting, max) = match err {
            Error::RecordTooLarge { setting, max, .. } => (*setting, *max),
            // A broker's refusal names no limit: the line is the culprit when it is the only
            // one.
            Error::Kafka { broker, api, code, name, topic, partition, message } => {
                return (line_count == 1).then(|| TooLarge::Broker {
                    broker: broker.clone(),
                    api,
                    code: *code,
                    name: name.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                    message: message.clone(),
                });
            }
            _ => return None,
        };
        let record = match self.format {
            AppendFormat::Lines => RecordRef::value_only(&line).to_new_record(),
            AppendFormat::Json => {
                if line.iter().all(u8::is_ascii_whitespace) {
                    return None;
                }
                envelope::parse_envelope(&line, self.lines_done.saturating_add(1)).ok()?
            }
        };
        let size = encode_batch(&BatchSpec::default(), &[record]).map_or(usize::MAX, |b| b.len());
        (size > max).then_some(TooLarge::Limit { what: "record batch", size, setting, max })
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
    /// shutdown). The line is dropped whether or not the append succeeds, so a refused line is
    /// reported once, not again at every later flush. A refused line ends here (what is
    /// written next is a new line), and a refusal the writer may not have seen
    /// (`unreported`) fails this with `EFBIG`.
    pub fn flush(&mut self) -> Result<()> {
        self.refused = None;
        let unreported = self.unreported.take();
        let appended = self.append_pending();
        match unreported {
            Some(why) => {
                log::warn!("{}: close() reports the refused line: {}", self.path(), why.error());
                if let Err(e) = appended {
                    log::log!(e.log_level(), "{}: the last line at close(): {e}", self.path());
                }
                Err(why.error())
            }
            None => appended,
        }
    }

    /// Appends the pending partial line, if any, as a record; it is dropped either way.
    fn append_pending(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut line = std::mem::take(&mut self.pending);
        self.json_bound = EnvelopeBound::default();
        // The unterminated last line is a line like any other: terminate it and parse it so.
        line.push(b'\n');
        let first_line = self.lines_done.saturating_add(1);
        self.lines_done = first_line;
        let records = self.format.records(&line, first_line, self.schemas.as_deref())?;
        if !records.is_empty() {
            if let Err(e) = self.target.append(records) {
                if e.errno() == libc::EFBIG {
                    log::warn!("{}: refused the last line at close(): {e}", self.path());
                }
                return Err(e);
            }
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

    /// Refuses an `append.json` line whose record holds at least `bound` key, value and header
    /// bytes, more than `max.message.bytes` (the batch adds its header to them).
    fn check_record_bound(&self, bound: &EnvelopeBound) -> Result<(), TooLarge> {
        let size = bound.bound();
        if size <= self.max_record_bytes {
            return Ok(());
        }
        Err(TooLarge::Limit {
            what: "append.json record (key, payload and headers at least)",
            size,
            setting: "max.message.bytes",
            max: self.max_record_bytes,
        })
    }

    /// Refuses a line of (at least) `len` bytes that no record within the limit can come
    /// from.
    fn check_line_len(&self, len: usize) -> Result<(), TooLarge> {
        if len <= self.max_line_bytes {
            return Ok(());
        }
        Err(match self.format {
            AppendFormat::Lines => TooLarge::Limit {
                what: "line",
                size: len,
                setting: "max.message.bytes",
                max: self.max_line_bytes,
            },
            AppendFormat::Json => TooLarge::Limit {
                what: "append.json line",
                size: len,
                setting: "max.message.bytes x 8 (for a JSON envelope)",
                max: self.max_line_bytes,
            },
        })
    }
}
