//! Topic-level views: every partition of a topic at once.
//!
//! * `offsets/<time>` ([`offsets_text`]): one `topic:partition:offset` line per partition, as
//!   `kafka-get-offsets.sh --time` prints them, for every partition, always: a partition with no
//!   record that new, or no record at all, answers its log end offset (ListOffsets semantics,
//!   [`topicfs_source::OffsetQuery`]), so no partition is ever missing from the list.
//! * `by-time/<spec>` and `by-time/<spec>.json` ([`TopicStream`]): the records of all
//!   partitions from that time, merged in timestamp order, with exact sizes like the partition
//!   streams of [`crate::stream`].
//! * `where/<filter>/by-time/<spec>` ([`TopicViews::open_filtered`]): the same merged stream
//!   holding only the records a filter keeps; rejected records keep their place in the merge
//!   (rendered as nothing), so it is exactly the unfiltered stream with them left out.
//! * `append` and `append.json` ([`TopicAppender`]): records routed to partitions as Kafka's
//!   default partitioner routes them (see [`topicfs_format::partitioner`]).
//!
//! # The merged stream
//!
//! Each partition `p` contributes the records its own `by-time/<spec>` stream holds: offsets
//! from `offset_for(Timestamp(T1))` (ListOffsets: the first record, in log order, whose
//! timestamp is `>= T1`), up to the first offset whose timestamp is `>= T2` for a range
//! `T1..T2`, control batches excluded. The merged stream interleaves these per-partition
//! sequences by a k-way merge: among the partitions' next records, the one with the smallest
//! timestamp comes first, ties in partition order; within a partition, log order is kept. When
//! every partition's timestamps ascend (LogAppendTime, or producers with sane clocks) the whole
//! stream ascends.
//!
//! `.raw` is not offered at topic level: a stored batch does not say which partition it belongs
//! to, so batches of several partitions concatenated could not be told apart.
//!
//! ## Growth: bytes already served never move
//!
//! A file's bytes must never change once they can have been read, but a partition can receive
//! a record older than records of other partitions that the stream already shows. The rule:
//!
//! > The stream is a sequence of *rounds*. A round starts whenever the stream's size is asked
//! > for or bytes past its current end are read, and takes, from every partition, the records
//! > that arrived since the previous round (up to the log end offset at that moment). A round's
//! > records are merged among themselves by (timestamp, partition) and placed after everything
//! > earlier rounds placed. A record that arrives late is therefore shown after the records
//! > already in the stream, never before them.
//!
//! For a topic that does not change while the file is open there is one round and the order is
//! the plain merge. The size reported is exactly the bytes of the rounds started so far, and a
//! read returns exactly those bytes; a round's boundaries never change once it started.
//! Partitions added (by `mkdir`) while the stream grows join it at their own start offset for
//! `T1`.
//!
//! ## The merge index
//!
//! A [`MergeIndex`] keeps, for one resolved stream, the rounds (the per-partition end offsets of
//! each round) and sparse [`MergeCheckpoint`]s: a rendered position and, for every partition, a
//! cursor (a batch boundary at or before its next record, and that record's offset). A
//! checkpoint is taken every [`MERGE_CHECKPOINT_INTERVAL`] rendered bytes, up to
//! [`MAX_MERGE_CHECKPOINTS`] (then every other one is dropped and the interval doubles). A
//! round is counted once when it starts (each record decoded and rendered once, into a
//! counter); a read resumes the merge from the checkpoint at or before its window (or from
//! where the stream's previous read stopped), so it costs at most one interval plus what it
//! returns, never a re-merge from the start.
//!
//! **Invariant** (of every checkpoint `c`): merging from `c.cursors` with the rounds from
//! `c.round` on renders exactly the bytes at rendered positions `c.position..` of the stream.
//!
//! Bytes of records deleted by retention read as [`Error::StaleHandle`] (`ESTALE`), as in the
//! partition streams.
//!
//! ## Compaction
//!
//! A cleaner pass rewrites a prefix of a partition's sealed segments in place
//! ([`Known::rewrites`](topicfs_source::Known::rewrites) counts them). A merged stream's
//! positions interleave every partition, so one removed record moves every later position:
//! once a pass replaced a segment holding a member's start (and so anything the stream renders
//! of it), every read of the stream, and every new round, is [`Error::StaleHandle`]; a pass
//! that replaced only segments before every member's start changes nothing. A read is checked
//! before and after it renders, so one racing a pass never returns bytes of the new log at
//! positions counted on the old one. A stream opened after a pass gets a new merge index.
//!
//! ## Transactions
//!
//! The merged stream honours the mount's [`Isolation`] as the partition streams do (see
//! [`crate::txn`]). With `read_committed` (the default) each partition contributes what
//! its own `by-time/<spec>` stream shows: it is seen through a [`CommittedPartition`], so its
//! log end offset, and with it every round's end for that partition, is its **last stable
//! offset**; and records of **aborted** transactions are skipped like control batches. A
//! partition with an open transaction therefore holds the merge of its later records back until
//! the transaction's marker arrives, then they join the next round. With `read_uncommitted`
//! every record of every non-control batch is merged, up to the log end offset.
//!
//! **Invariant**: a member only renders batches below the stable offset of a [`TxnSnapshot`]
//! taken when it reads them, so whether a batch is aborted is final when it is rendered, and
//! records buffered past a round's end stay valid for the next round.
//!
//! # Files
//!
//! This file: the `offsets/` and `by-time/` names, `offsets/<time>` text, and the per-mount
//! registry ([`TopicViews`]). `append.rs`: [`TopicAppender`] and [`route`]. `index.rs`: the members
//! of a merged stream and the [`MergeIndex`]. `walk.rs`: reading members and the k-way merge.
//! `stream.rs`: [`TopicStream`], reads of one open stream.
//!
//! [`CommittedPartition`]: crate::txn::CommittedPartition
//! [`TxnSnapshot`]: crate::txn::TxnSnapshot

mod append;
mod index;
mod member;
mod stream;
mod walk;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use self::member::{Member, MemberRendering};
use crate::spec::{Format, Resolved, Selector, SpecError, StreamSpec, TimePoint};
use crate::txn::{Isolation, TxnTrackers};
use topicfs_format::Timestamp;
use topicfs_format::partitioner::KeylessRotation;
use topicfs_source::TopicSource;
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;

pub use self::append::{TopicAppender, route};
pub use self::index::MergeIndex;
pub use self::member::{MemberCursor, MergeCheckpoint, StatsOf, TopicFilter};
pub use self::stream::TopicStream;

/// Rendered bytes between two checkpoints of a fresh merge index.
pub const MERGE_CHECKPOINT_INTERVAL: u64 = 64 * 1024;
/// Most checkpoints one merge index keeps before thinning (each holds a cursor per partition).
pub const MAX_MERGE_CHECKPOINTS: usize = 4096;
/// Bytes asked of [`topicfs_source::PartitionSource::read`] per partition at a time.
const MEMBER_READ_CHUNK: usize = 32 * 1024;

/// Parses a name under `<topic>/offsets/`: one time of the `by-time/` grammar (`-1`, `-2`,
/// `-3`, epoch milliseconds, RFC 3339, a date, `-15m`), no range and no format suffix.
pub fn parse_offsets_name(name: &str) -> Result<TimePoint, SpecError> {
    let spec = StreamSpec::parse_by_time(name)?;
    match (spec.selector, spec.format) {
        (Selector::Times { start, end: None }, Format::Values) if !name.contains("..") => Ok(start),
        _ => Err(SpecError {
            name: name.to_string(),
            reason: "offsets/ names are one time, without a range or a format suffix",
        }),
    }
}

/// Parses a name under `<topic>/by-time/`: the `by-time/` grammar, value lines or `.json`.
pub fn parse_topic_by_time(name: &str) -> Result<StreamSpec, SpecError> {
    let spec = StreamSpec::parse_by_time(name)?;
    if spec.format == Format::Raw {
        return Err(SpecError {
            name: name.to_string(),
            reason: "a topic-level stream has no .raw form (batches do not name their partition)",
        });
    }
    Ok(spec)
}

/// The text of `<topic>/offsets/<time>` at this moment: `topic:partition:offset\n` for every
/// partition in partition order, the offset being ListOffsets' answer for `time` (relative
/// times anchored at `now`): never missing, the log end offset when no record is that new.
pub fn offsets_text(
    source: &dyn TopicSource,
    topic: &str,
    time: TimePoint,
    now: Timestamp,
) -> Result<String> {
    let query = time.query(now);
    let mut text = String::new();
    // Every partition at once where the source can (a cluster: one ListOffsets per broker).
    for (p, offset) in source.offsets_for(topic, query)? {
        text.push_str(&format!("{topic}:{p}:{offset}\n"));
    }
    Ok(text)
}

/// Names listed in `<topic>/offsets/`: Kafka's special times, latest (`-1`), earliest (`-2`)
/// and max timestamp (`-3`). Any other time can be looked up.
pub fn offsets_names() -> Vec<String> {
    ["-1", "-2", "-3"].iter().map(|s| s.to_string()).collect()
}

/// Names listed in `<topic>/by-time/`: the union of the partitions' `by-time/` names (see
/// [`crate::listing::by_time_names`]), in time order.
pub fn topic_by_time_names(source: &dyn TopicSource, topic: &str) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for p in source.partitions(topic)? {
        names.extend(crate::listing::by_time_names(source.partition(topic, p)?.as_ref())?);
    }
    // RFC 3339 UTC names of one width sort as their times do.
    names.sort_unstable();
    names.dedup();
    Ok(names)
}

// ---- the registry -----------------------------------------------------------------------------

/// Identity of a merge index: the same topic, format, per-partition resolution and filter share
/// one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct MergeKey {
    topic: String,
    format: Format,
    members: Vec<(u32, Resolved)>,
    /// The filter's text (`where/<filter>/by-time/`), if any.
    filter: Option<Arc<str>>,
}

/// One per mount: merge indexes of topic-level streams (shared while a stream uses them), the
/// transaction trackers of their partitions, and each topic's keyless rotation.
#[derive(Default)]
pub struct TopicViews {
    indexes: Mutex<HashMap<MergeKey, Weak<MergeIndex>>>,
    rotations: Mutex<HashMap<String, Arc<KeylessRotation>>>,
    /// The isolation level of every stream opened, and the partitions' trackers.
    txns: Arc<TxnTrackers>,
    /// What JSON streams show beyond the records' bytes: keys and values in the wire format
    /// decoded ([`crate::schemas`]), payloads that are JSON as JSON.
    shown: crate::render::JsonShown,
}

impl std::fmt::Debug for TopicViews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicViews").field("indexes", &lock(&self.indexes).len()).finish()
    }
}

impl TopicViews {
    /// Empty, streams showing committed records ([`Isolation::ReadCommitted`]).
    pub fn new() -> TopicViews {
        TopicViews::default()
    }

    /// Empty, streams at `isolation` (see the module docs).
    pub fn with_isolation(isolation: Isolation) -> TopicViews {
        TopicViews::with_trackers(Arc::new(TxnTrackers::new(isolation)))
    }

    /// Empty, keeping the partitions' transaction state in `txns`, at their isolation level: a
    /// mount passes the trackers of its [`StreamRegistry`](crate::stream::StreamRegistry), so
    /// a partition read directly and through a topic-level stream is scanned once.
    pub fn with_trackers(txns: Arc<TxnTrackers>) -> TopicViews {
        TopicViews { txns, ..TopicViews::default() }
    }

    /// The same views decoding keys and values with `schemas` in JSON streams.
    pub fn with_schemas(mut self, schemas: Option<Arc<crate::schemas::Schemas>>) -> TopicViews {
        self.shown.schemas = schemas;
        self
    }

    /// The same views showing payloads that are JSON as `payload` says in JSON streams.
    pub fn with_json_payload(mut self, payload: crate::render::JsonPayload) -> TopicViews {
        self.shown.payload = payload;
        self
    }

    /// The isolation level of every stream these views open.
    pub fn isolation(&self) -> Isolation {
        self.txns.isolation()
    }

    /// Opens `<topic>/by-time/<spec>`: resolves `spec` against every partition at `now` (epoch
    /// ms, the anchor of relative times). `NotFound` for an unknown topic; `Unsupported` for a
    /// `.raw` spec.
    pub fn open_stream(
        &self,
        source: Arc<dyn TopicSource>,
        topic: &str,
        spec: &StreamSpec,
        now: Timestamp,
    ) -> Result<Arc<TopicStream>> {
        self.open_filtered(source, topic, spec, now, None)
    }

    /// Opens `<topic>/where/<filter>/by-time/<spec>` (with `filter`; without, as
    /// [`TopicViews::open_stream`]): the merged stream of `<topic>/by-time/<spec>` holding only
    /// the records the filter keeps, in the same order (see [`TopicFilter`]).
    pub fn open_filtered(
        &self,
        source: Arc<dyn TopicSource>,
        topic: &str,
        spec: &StreamSpec,
        now: Timestamp,
        filter: Option<TopicFilter>,
    ) -> Result<Arc<TopicStream>> {
        if spec.format == Format::Raw {
            return Err(Error::Unsupported("a topic-level .raw stream"));
        }
        // Every partition's bounds in one go (see `offsets_text`).
        let _ = source.state_bounds(topic);
        let mut parts = Vec::new();
        for p in source.partitions(topic)? {
            parts.push(source.partition(topic, p)?);
        }
        // A start time: every partition's first offset at or after it in one go too (a
        // cluster: one ListOffsets per broker), when the members resolve times against the
        // partitions themselves (no transaction tracker: their answers are the partitions').
        let mut starts = std::collections::HashMap::new();
        if let crate::spec::Selector::Times { start, .. } = spec.selector {
            let query = start.query(now);
            let own = parts.iter().all(|p| self.txns.tracker(p.as_ref()).is_none());
            if parts.len() > 1 && own && matches!(query, topicfs_source::OffsetQuery::Timestamp(_))
            {
                if let Ok(answers) = source.offsets_for(topic, query) {
                    starts.extend(answers);
                }
            }
        }
        let rendering = MemberRendering { shown: self.shown.clone(), filter };
        let mut members = Vec::new();
        for part in parts {
            let known = starts.get(&part.partition()).copied();
            members.push(Member::resolve(part, &self.txns, &rendering, spec, now, known)?);
        }
        let key = MergeKey {
            topic: topic.to_string(),
            format: spec.format,
            members: members.iter().map(|m| (m.part.partition(), m.resolved)).collect(),
            filter: rendering.filter.as_ref().map(|f| Arc::clone(&f.text)),
        };
        // An index made before a cleaner pass may count records it removed: a new one (asked
        // outside the mount-wide lock: it waits for the index's own).
        let shared = lock(&self.indexes).get(&key).and_then(Weak::upgrade);
        let shared = shared.filter(|index| !index.made_before_a_pass());
        let mut indexes = lock(&self.indexes);
        let index = match shared {
            Some(index) => index,
            None => {
                indexes.retain(|_, w| w.strong_count() > 0);
                let txns = Arc::clone(&self.txns);
                let index =
                    Arc::new(MergeIndex::new(source, txns, rendering, topic, *spec, now, members));
                indexes.insert(key, Arc::downgrade(&index));
                index
            }
        };
        Ok(Arc::new(TopicStream { index, resume: Mutex::new(None) }))
    }

    /// The appender of `topic`'s `append` files (sharing the topic's keyless rotation).
    pub fn appender(&self, source: Arc<dyn TopicSource>, topic: &str) -> TopicAppender {
        let rotation = Arc::clone(lock(&self.rotations).entry(topic.to_string()).or_default());
        TopicAppender { source, topic: topic.to_string(), rotation }
    }
}
