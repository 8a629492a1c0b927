//! Consumer groups as files: the text of `groups/<group>/offsets`, the commits written to it,
//! and where `groups/<group>/<p>/next` starts and ends. Talks to groups only through
//! [`GroupStore`] and to partitions through [`TopicSource`], so local data dirs and a cluster
//! share it.
//!
//! - `offsets` shows one line per partition of the topic: `<partition> <committed> <log end>
//!   <lag>`, with `-` for the committed offset and the lag where the group has no commit (what
//!   `kafka-consumer-groups --describe` shows as CURRENT-OFFSET, LOG-END-OFFSET and LAG).
//! - A commit is the lines of one `write()`: `<partition> <offset>` or `<topic>:<partition>:<offset>`
//!   (what `<topic>/offsets/<time>` shows, so `cat orders/offsets/-1 > groups/g/offsets` moves a
//!   group to the end). Blank lines are ignored; a later line for the same partition wins. Every
//!   line is checked before anything is committed: a malformed line, another topic, a partition
//!   that does not exist, or an offset outside `[log start, log end]` refuses the whole write
//!   with [`Error::InvalidInput`] naming the line.
//! - `next` starts at the committed offset when it lies within `[log start, log end]`; otherwise
//!   (no commit, or one that retention or a truncation left outside the log) at the group's
//!   `auto.offset.reset` start: the log start (`earliest`) or the end (`latest`). It ends at the
//!   end as of its resolution (the last stable offset under `read_committed`).

use std::fmt;
use std::str::FromStr;

use topicfs_format::Offset;
use topicfs_source::error::{Error, Result};
use topicfs_source::{GroupStore, OffsetQuery, PartitionSource, TopicSource};

use super::spec::{Format, OffsetPoint, Selector, StreamSpec};

/// Name of a group's offsets file.
pub const OFFSETS: &str = "offsets";
/// Name of a group's `auto.offset.reset` file.
pub const AUTO_OFFSET_RESET: &str = "auto.offset.reset";
/// Name of the value-line stream in a group's partition directory (`next.json`, `next.raw`
/// select the other formats).
pub const NEXT: &str = "next";

/// Where a group without a usable committed offset starts (Kafka's `auto.offset.reset`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum ResetPolicy {
    /// The log start offset (topicfs's default, as `kafka-console-consumer --from-beginning`).
    #[default]
    Earliest,
    /// The log end offset: only records written after the first read.
    Latest,
}

impl fmt::Display for ResetPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ResetPolicy::Earliest => "earliest",
            ResetPolicy::Latest => "latest",
        })
    }
}

impl FromStr for ResetPolicy {
    type Err = Error;

    fn from_str(s: &str) -> Result<ResetPolicy> {
        match s.trim() {
            "earliest" => Ok(ResetPolicy::Earliest),
            "latest" => Ok(ResetPolicy::Latest),
            other => Err(Error::InvalidInput(format!(
                "auto.offset.reset {other:?}: expected earliest or latest"
            ))),
        }
    }
}

/// The text of `groups/<group>/offsets` now.
pub fn offsets_text(
    source: &dyn TopicSource,
    store: &dyn GroupStore,
    topic: &str,
    group: &str,
) -> Result<String> {
    let committed = store.committed(group, topic)?;
    let mut text = String::new();
    for p in source.partitions(topic)? {
        let end = source.partition(topic, p)?.summary()?.log_end_offset;
        match committed.get(&p) {
            Some(c) => {
                let lag = (end.0 - c.offset.0).max(0);
                text.push_str(&format!("{p} {} {end} {lag}\n", c.offset));
            }
            None => text.push_str(&format!("{p} - {end} -\n")),
        }
    }
    Ok(text)
}

/// Parses and checks the lines of one write to `groups/<group>/offsets` of `topic`: the
/// (partition, offset) pairs to commit, in partition order, one per partition.
pub fn parse_commit(
    source: &dyn TopicSource,
    topic: &str,
    data: &[u8],
) -> Result<Vec<(u32, Offset)>> {
    let text = std::str::from_utf8(data)
        .map_err(|_| Error::InvalidInput("a commit is text: the write is not UTF-8".to_string()))?;
    let partitions = source.partitions(topic)?;
    let mut commits = std::collections::BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: String| Error::InvalidInput(format!("line {} {line:?}: {why}", i + 1));
        let (p, offset) = match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            [p, o] => (*p, *o),
            [one] => match one.rsplitn(3, ':').collect::<Vec<_>>().as_slice() {
                [o, p, t] => {
                    if *t != topic {
                        return Err(bad(format!("topic {t:?} is not {topic:?}")));
                    }
                    (*p, *o)
                }
                _ => {
                    return Err(bad(
                        "expected `<partition> <offset>` or `topic:partition:offset`".into()
                    ));
                }
            },
            _ => {
                return Err(bad(
                    "expected `<partition> <offset>` or `topic:partition:offset`".into()
                ));
            }
        };
        let p: u32 = match p.parse() {
            Ok(n) if p.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => return Err(bad(format!("{p:?} is not a partition number"))),
        };
        if !partitions.contains(&p) {
            return Err(bad(format!("{topic} has no partition {p}")));
        }
        let offset: i64 =
            offset.parse().map_err(|_| bad(format!("{offset:?} is not an offset")))?;
        let summary = source.partition(topic, p)?.summary()?;
        let (start, end) = (summary.log_start_offset, summary.log_end_offset);
        if offset < start.0 || offset > end.0 {
            return Err(bad(format!(
                "offset {offset} is outside partition {p}'s log [{start}, {end}]"
            )));
        }
        commits.insert(p, Offset(offset));
    }
    Ok(commits.into_iter().collect())
}

/// Whether `name` names a `next` stream, and in which format.
pub fn parse_next_name(name: &str) -> Option<Format> {
    match name {
        "next" => Some(Format::Values),
        "next.json" => Some(Format::Json),
        "next.raw" => Some(Format::Raw),
        _ => None,
    }
}

/// The names listed in a group's partition directory.
pub fn next_names() -> [&'static str; 3] {
    ["next", "next.json", "next.raw"]
}

/// The range `next` shows for a group of a partition, rendered in `format`: from the committed
/// offset, or the reset policy's start when there is none usable, to the end now. `view` is
/// the partition as streams see it (through the mount's isolation: its end is the last stable
/// offset under `read_committed`), `log_end` the partition's log end offset: a commit in
/// `[log start, log end]` is usable, one past the last stable offset shows nothing until the
/// transaction ends.
pub fn next_spec(
    view: &dyn PartitionSource,
    log_end: Offset,
    committed: Option<Offset>,
    reset: ResetPolicy,
    format: Format,
) -> Result<StreamSpec> {
    let start = view.offset_for(OffsetQuery::Earliest)?;
    let end = view.offset_for(OffsetQuery::Latest)?;
    let from = match committed {
        Some(c) if start <= c && c <= log_end => c.min(end),
        _ => match reset {
            ResetPolicy::Earliest => start,
            ResetPolicy::Latest => end,
        },
    };
    Ok(StreamSpec {
        selector: Selector::Offsets { start: OffsetPoint::At(from), end: Some(end) },
        format,
    })
}

/// A group name usable as a directory name (Kafka allows any non-empty string).
pub fn check_group_name(name: &str) -> Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(Error::InvalidInput(format!("{name:?} cannot be a group directory")));
    }
    if name.len() > i16::MAX as usize {
        return Err(Error::InvalidInput("a group id is at most 32767 bytes".to_string()));
    }
    Ok(())
}
