//! Path specs: the names under `by-offset/` and `by-time/`, and how they resolve to offsets.
//!
//! A spec is a *selector* followed by an optional *format suffix*:
//!
//! | suffix | format |
//! |---|---|
//! | none | value lines ([`Format::Values`]) |
//! | `.json` | kcat `-J` envelopes, one per line ([`Format::Json`]) |
//! | `.raw` | whole batches exactly as stored ([`Format::Raw`]) |
//!
//! `by-offset/` selectors (kcat's `-o` plus ranges):
//!
//! | name | records |
//! |---|---|
//! | `N` or `N..` | offsets `N` and later, growing with the log |
//! | `-N` or `-N..` | the last `N` records before the log end offset, growing with the log |
//! | `A..B` | offsets `A` to `B - 1`; fixed once the log end offset reaches `B` |
//!
//! `N` must lie in `[log start offset, log end offset]` when the file is opened (else the name
//! does not exist: `ENOENT`); `-N` is clamped to the log start offset. Numbers are decimal digits
//! only, at most `i64::MAX`; anything else (a sign on `B`, `B < A`, a fraction) is not a name.
//!
//! `by-time/` selectors start at ListOffsets semantics: the first offset, in log order, whose
//! record timestamp is `>=` the time. A time later than every record resolves to the log end
//! offset, so the file is empty now and grows.
//!
//! | time | meaning |
//! |---|---|
//! | `1764662400000` | epoch milliseconds (only milliseconds: a bare number is never seconds) |
//! | `2026-12-02T08:00:00Z`, `2026-12-02T08:00:00.123+08:00` | RFC 3339 |
//! | `2026-12-02` | that day at 00:00 UTC |
//! | `-90s`, `-15m`, `-1h`, `-2d` | that long before the moment the file is opened |
//! | `-1`, `-2`, `-3` | Kafka's latest (log end), earliest (log start), max timestamp |
//!
//! and a range `T1..T2` ends before the first offset whose timestamp is `>= T2` (rpk's approach:
//! the end is resolved to an offset through ListOffsets, not compared record by record, so one
//! out-of-order CreateTime does not cut the range short). While no record reaches `T2` the file
//! keeps growing; once one exists the end is fixed at its offset. `T..` is the same as `T`.
//! Times before 1970 are clamped to epoch 0 (`-1` is Kafka's "no timestamp", never a time).

use std::fmt;

use chrono::{DateTime, NaiveDate};

use topicfs_format::{Offset, Timestamp};
use topicfs_source::error::{Error, Result};
use topicfs_source::{OffsetQuery, PartitionSource};

/// How a stream renders its records.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Each record's value followed by `\n` (what `kcat -C` prints); a null value is an empty
    /// line.
    Values,
    /// One kcat `-J` JSON object per record and line (see [`crate::render`]).
    Json,
    /// Whole batches exactly as stored in the `.log` files, control batches included.
    Raw,
}

impl Format {
    /// The file name suffix selecting this format (`""`, `".json"`, `".raw"`).
    pub fn suffix(self) -> &'static str {
        match self {
            Format::Values => "",
            Format::Json => ".json",
            Format::Raw => ".raw",
        }
    }

    /// Splits a name into its selector and format.
    fn split(name: &str) -> (&str, Format) {
        if let Some(sel) = name.strip_suffix(".json") {
            (sel, Format::Json)
        } else if let Some(sel) = name.strip_suffix(".raw") {
            (sel, Format::Raw)
        } else {
            (name, Format::Values)
        }
    }
}

/// Why a name is not a spec. Callers turn it into [`Error::NotFound`] (`ENOENT`): a name that
/// does not parse simply does not exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// The name as given.
    pub name: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not a stream name: {}", self.name, self.reason)
    }
}

impl std::error::Error for SpecError {}

impl From<SpecError> for Error {
    fn from(e: SpecError) -> Error {
        Error::NotFound(e.to_string())
    }
}

/// Where a `by-offset/` stream starts.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum OffsetPoint {
    /// This offset.
    At(Offset),
    /// This many records before the log end offset (kcat's `-N`), at least the log start offset.
    BeforeEnd(u64),
}

/// A time in a `by-time/` spec, before resolution.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum TimePoint {
    /// Epoch milliseconds (from a number, an RFC 3339 time or a date); never negative.
    At(Timestamp),
    /// This many milliseconds before the moment of resolution.
    Ago(i64),
    /// Kafka's `-1`: the log end offset.
    Latest,
    /// Kafka's `-2`: the log start offset.
    Earliest,
    /// Kafka's `-3`: the first record carrying the partition's max timestamp.
    MaxTimestamp,
}

/// The record selector of a spec.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Selector {
    /// `by-offset/`: a start and an optional exclusive end offset (`end >= start` when the start
    /// is absolute).
    Offsets { start: OffsetPoint, end: Option<Offset> },
    /// `by-time/`: a start time and an optional exclusive end time.
    Times { start: TimePoint, end: Option<TimePoint> },
}

/// A parsed stream name: which records, rendered how.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct StreamSpec {
    pub selector: Selector,
    pub format: Format,
}

/// The end of a resolved stream.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Bound {
    /// No end: the stream grows with the log.
    Open,
    /// Records below this offset (exclusive).
    Fixed(Offset),
    /// Records below the first offset whose timestamp is `>=` this time. Until such a record
    /// exists the stream grows like [`Bound::Open`]; the first answer below the log end offset
    /// fixes it (appends cannot change the first such offset).
    UntilTimestamp(Timestamp),
}

/// A spec resolved against one partition at one moment.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Resolved {
    /// First offset of the stream (records below it are not shown).
    pub start: Offset,
    pub end: Bound,
}

impl StreamSpec {
    /// Parses a name found under `by-offset/`.
    pub fn parse_by_offset(name: &str) -> Result<StreamSpec, SpecError> {
        let (sel, format) = Format::split(name);
        let err = |reason| SpecError { name: name.to_string(), reason };
        let (start, end) = match sel.split_once("..") {
            None => (sel, None),
            Some((start, "")) => (start, None),
            Some((start, end)) => (start, Some(end)),
        };
        let start = match start.strip_prefix('-') {
            Some(n) => OffsetPoint::BeforeEnd(parse_digits(n).map_err(err)?),
            None => OffsetPoint::At(Offset(parse_offset(start).map_err(err)?)),
        };
        let end = match end {
            None => None,
            Some(end) => {
                let OffsetPoint::At(first) = start else {
                    return Err(err("a range A..B needs an absolute start offset"));
                };
                let end = Offset(parse_offset(end).map_err(err)?);
                if end < first {
                    return Err(err("range end is below its start"));
                }
                Some(end)
            }
        };
        Ok(StreamSpec { selector: Selector::Offsets { start, end }, format })
    }

    /// Parses a name found under `by-time/`.
    pub fn parse_by_time(name: &str) -> Result<StreamSpec, SpecError> {
        let (sel, format) = Format::split(name);
        let err = |reason| SpecError { name: name.to_string(), reason };
        let (start, end) = match sel.split_once("..") {
            None => (sel, None),
            Some((start, "")) => (start, None),
            Some((start, end)) => (start, Some(end)),
        };
        let start = parse_time(start).map_err(err)?;
        let end = match end {
            None => None,
            Some(end) => {
                let end = parse_time(end).map_err(err)?;
                if let (TimePoint::At(a), TimePoint::At(b)) = (start, end) {
                    if b < a {
                        return Err(err("range end is before its start"));
                    }
                }
                if let (TimePoint::Ago(a), TimePoint::Ago(b)) = (start, end) {
                    if b > a {
                        return Err(err("range end is before its start"));
                    }
                }
                Some(end)
            }
        };
        Ok(StreamSpec { selector: Selector::Times { start, end }, format })
    }

    /// Resolves the spec against `part` now; `now` (epoch ms) anchors relative times.
    ///
    /// Errors with [`Error::OffsetOutOfRange`] when an absolute start offset lies outside
    /// `[log start offset, log end offset]`.
    pub fn resolve(&self, part: &dyn PartitionSource, now: Timestamp) -> Result<Resolved> {
        self.resolve_from(part, now, None)
    }

    /// [`StreamSpec::resolve`], with the start of a `by-time/` spec already known: what
    /// `part.offset_for` answers for the start time, asked for many partitions at once
    /// ([`topicfs_source::TopicSource::offsets_for`]). Ignored for `by-offset/` specs.
    pub fn resolve_from(
        &self,
        part: &dyn PartitionSource,
        now: Timestamp,
        known_start: Option<Offset>,
    ) -> Result<Resolved> {
        match self.selector {
            Selector::Offsets { start, end } => {
                let summary = part.summary()?;
                let (log_start, log_end) = (summary.log_start_offset, summary.log_end_offset);
                let start = match start {
                    OffsetPoint::At(o) => {
                        if o < log_start || o > log_end {
                            return Err(Error::OffsetOutOfRange {
                                requested: o,
                                log_start,
                                log_end,
                            });
                        }
                        o
                    }
                    OffsetPoint::BeforeEnd(n) => {
                        let back = i64::try_from(n).unwrap_or(i64::MAX);
                        Offset(log_end.0.saturating_sub(back)).max(log_start)
                    }
                };
                let end = match end {
                    None => Bound::Open,
                    Some(e) => Bound::Fixed(e.max(start)),
                };
                Ok(Resolved { start, end })
            }
            Selector::Times { start, end } => {
                let start = match known_start {
                    Some(o) => o,
                    None => part.offset_for(start.query(now))?,
                };
                let end = match end.map(|end| end.query(now)) {
                    None => Bound::Open,
                    Some(OffsetQuery::Timestamp(t)) => Bound::UntilTimestamp(t),
                    Some(q) => Bound::Fixed(part.offset_for(q)?.max(start)),
                };
                Ok(Resolved { start, end })
            }
        }
    }
}

impl TimePoint {
    /// The ListOffsets query for this time, relative times anchored at `now`.
    pub fn query(self, now: Timestamp) -> OffsetQuery {
        match self {
            TimePoint::At(t) => OffsetQuery::Timestamp(t.max(0)),
            TimePoint::Ago(ms) => OffsetQuery::Timestamp(now.saturating_sub(ms).max(0)),
            TimePoint::Latest => OffsetQuery::Latest,
            TimePoint::Earliest => OffsetQuery::Earliest,
            TimePoint::MaxTimestamp => OffsetQuery::MaxTimestamp,
        }
    }
}

/// Decimal digits only (no sign, no spaces), as u64.
fn parse_digits(s: &str) -> Result<u64, &'static str> {
    if s.is_empty() {
        return Err("empty number");
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err("not a decimal number");
    }
    s.parse::<u64>().map_err(|_| "number too large")
}

/// A non-negative offset that fits Kafka's `int64`.
fn parse_offset(s: &str) -> Result<i64, &'static str> {
    i64::try_from(parse_digits(s)?).map_err(|_| "number too large")
}

const MS_PER_SECOND: i64 = 1000;

fn parse_time(s: &str) -> Result<TimePoint, &'static str> {
    match s {
        "" => return Err("empty time"),
        "-1" => return Ok(TimePoint::Latest),
        "-2" => return Ok(TimePoint::Earliest),
        "-3" => return Ok(TimePoint::MaxTimestamp),
        _ => {}
    }
    if let Some(rel) = s.strip_prefix('-') {
        let unit_len = rel.chars().last().map_or(0, char::len_utf8);
        let (n, unit) = rel.split_at(rel.len() - unit_len);
        let unit_ms = match unit {
            "s" => MS_PER_SECOND,
            "m" => 60 * MS_PER_SECOND,
            "h" => 3600 * MS_PER_SECOND,
            "d" => 86_400 * MS_PER_SECOND,
            _ => return Err("a relative time is -<n>s, -<n>m, -<n>h or -<n>d"),
        };
        let n = i64::try_from(parse_digits(n)?).map_err(|_| "number too large")?;
        return n.checked_mul(unit_ms).map(TimePoint::Ago).ok_or("relative time too large");
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(TimePoint::At(parse_offset(s)?));
    }
    if s.len() == 10 {
        let date = NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|_| "not a date")?;
        let midnight = date.and_hms_opt(0, 0, 0).ok_or("not a date")?;
        return Ok(TimePoint::At(midnight.and_utc().timestamp_millis().max(0)));
    }
    let t = DateTime::parse_from_rfc3339(s).map_err(|_| "not a time")?;
    Ok(TimePoint::At(t.timestamp_millis().max(0)))
}

/// Formats epoch milliseconds as the RFC 3339 name used in `by-time/` listings:
/// UTC with millisecond precision, e.g. `2026-12-02T08:00:00.000Z`.
pub fn time_name(t: Timestamp) -> Option<String> {
    DateTime::from_timestamp_millis(t).map(|d| d.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
}
