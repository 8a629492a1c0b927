//! The cluster backend: [`TopicSource`] and [`PartitionSource`] over the Kafka protocol.
//!
//! | seam method | request |
//! |---|---|
//! | `topics`, `partitions`, `partition` | Metadata (cached for `metadata.max.age.ms`) |
//! | `summary` | ListOffsets earliest and latest (two requests in one round trip, once per filesystem operation; see [`Bounds`]) |
//! | `offset_for` | ListOffsets with the timestamp or `-3`; `-1` and `-2` as `summary` |
//! | `seek` | as `summary` (range check), then [`ReadCursor::at`] |
//! | `read` | Fetch from the cursor's offset (its answer's log start, high watermark and last stable offset kept as the bounds; `stated_bounds` are the bounds last stated), or none when one of the mount's last Fetch answers started there ([`Answers`]) |
//! | `aborted_transactions` | Fetch, scanning the abort markers |
//! | `append`, `append_refs` | Produce: one request per call, idempotent, acked per `acks` |
//! | `create_topic` / `create_partition` | CreateTopics / CreatePartitions |
//! | `topic_config` / `alter_topic_config` | DescribeConfigs / IncrementalAlterConfigs (resource TOPIC; see [`config_source`]) |
//!
//! **Transactions.** `read` always fetches `read_uncommitted`: the batches as stored, aborted
//! ones and markers included, up to the high watermark, exactly what a local log holds. The
//! view's transaction tracker (`view::txn`) decides what `read_committed` shows from the
//! markers, as it does for local logs, so one rule serves both backends.
//! `aborted_transactions(from, to)` scans the markers in `[from, to)` the same way; a
//! transaction that began before `from` is not in its answer (nothing in the tree uses it for
//! a cluster: it serves the local inspection files).
//!
//! **Cursors.** A cursor of this source is an offset alone ([`CursorHint::NONE`]): the broker
//! finds the batch (a Fetch may start with a batch holding offsets below the one asked for; it
//! is dropped here, so a chunk starts at the first batch whose last offset is `>=` the cursor).
//!
//! Nothing here has segment files: [`PartitionSource::segment_files`] is `None`, so `segments/`
//! and the inspection files do not exist on a cluster mount.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::cluster::client::ConfigOp;
use crate::cluster::client::{EARLIEST, FetchOptions, FetchedPartition, LATEST, MAX_TIMESTAMP};
use crate::cluster::committed::committed_batches;
use crate::cluster::config::IsolationLevel;
use crate::cluster::{Client, ListedOffset};
use crate::error::{Error, Result};
use crate::format::control::{ControlRecordType, parse_control_key};
use crate::format::{NewRecord, Offset, RecordRef, decode_batch, parse_batch_info, peek_entry};
use crate::source::{
    AbortedTxn, AppendInfo, BatchChunk, ConfigChange, ConfigEntry, ConfigSource, FetchMemory,
    OffsetQuery, Operation, PartitionSource, PartitionSummary, ReadCursor, TopicSource,
};

/// A Kafka cluster as a [`TopicSource`].
pub struct ClusterSource {
    client: Arc<Client>,
    read_only: bool,
    sizing_budget: u64,
    committed: bool,
    fetch_memory: Option<FetchCap>,
    /// Per partition, what was last learned of its log start and end offsets, shared by every
    /// handle of the partition (see [`Bounds`]).
    bounds: std::sync::Mutex<HashMap<(String, u32), SharedBounds>>,
    /// How long learned bounds answer for the broker (see [`Bounds`]).
    bounds_fresh: Duration,
    /// The mount's last Fetch answers, shared by every partition handle (see [`Answers`]).
    answers: Arc<Answers>,
    /// Whether the broker answers the max-timestamp lookup (see [`MaxTimestampLookup`]).
    max_timestamp_lookup: Arc<MaxTimestampLookup>,
}

/// Whether the cluster answers ListOffsets `-3` (max timestamp), learned by the mount's first
/// such lookup: a broker may advertise ListOffsets v7+ and then not answer `-3` at all (tansu
/// 0.6 leaves it unanswered until `request.timeout.ms`, doc/cluster-brokers.md). The first
/// lookup waits at most [`MAX_TIMESTAMP_PROBE`]; one not answered by then (or failed other than
/// by a partition's error) makes every later one fail at once with `EOPNOTSUPP`, so `info`
/// shows `max_timestamp: unknown` without a wait.
#[derive(Debug, Default)]
struct MaxTimestampLookup {
    /// 0: not tried yet; 1: answered; 2: not answered.
    state: std::sync::atomic::AtomicU8,
}

/// How long the mount's first max-timestamp lookup may take before the broker counts as not
/// answering it (a Kafka broker answers it from its time indexes, in milliseconds).
const MAX_TIMESTAMP_PROBE: Duration = Duration::from_secs(3);

/// The last chunks `read` fetched, of any partition of the mount, the most recently used last,
/// [`ANSWER_SLOTS`] at most (so at most that many times `max.partition.fetch.bytes` of memory).
/// A read starting at the offset one of them started at is served from it without a Fetch:
/// the sizing of a stream (at a lookup, `open` or `stat`) fetches the chunk its first `read()`
/// then needs, and each new open of `by-offset/0` reads the same first chunk again. Batches
/// below the high watermark (reading committed, below the last stable offset, and with the
/// aborted transactions already dropped) never change, so this is what a Fetch would answer;
/// a chunk is never empty, so a read served from one ends where that answer ended and the
/// read after it Fetches from there, seeing whatever was produced since. Not served when the
/// log start offset last stated has passed its first offset (retention deleted it).
#[derive(Debug, Default)]
struct Answers(std::sync::Mutex<std::collections::VecDeque<Answer>>);

/// One kept chunk (see [`Answers`]).
#[derive(Debug)]
struct Answer {
    topic: String,
    partition: u32,
    committed: bool,
    from: Offset,
    /// Whole batches, the first holding `from` or a later offset.
    bytes: Vec<u8>,
    /// Where the read after these batches continues.
    next: Offset,
}

/// Fetch answers the mount keeps (see [`Answers`]).
const ANSWER_SLOTS: usize = 8;

/// One partition's [`Bounds`], shared by its handles.
type SharedBounds = Arc<std::sync::Mutex<Bounds>>;

/// The sizing budget of a cluster's partitions unless `--sizing-budget` says otherwise: 64 KiB
/// of log, what one Fetch of the view's read size returns, so that `stat` and `open` of a
/// stream cost at most one Fetch whatever the partition holds (see
/// [`PartitionSource::sizing_budget`]).
pub const CLUSTER_SIZING_BUDGET: u64 = 64 << 10;

/// How long a partition's log start and end offsets, as a ListOffsets or Fetch answer stated
/// them, answer for the broker by default (see [`Bounds`]): not at all. A name resolved, or a
/// size shown, is the partition as of that moment (a record another client produced a moment
/// before is in it), at two ListOffsets per filesystem operation that asks ([`Operation`]).
pub const BOUNDS_FRESH: Duration = Duration::ZERO;

/// A partition's log start and end offsets as last learned, from ListOffsets (earliest and
/// latest, two requests) or from a Fetch response, which carries the log start offset, the
/// high watermark and the last stable offset.
///
/// - A read that renders past its index's frontier learns up to the end last stated
///   ([`PartitionSource::stated_bounds`]) without asking: a sequential reader, whose every
///   Fetch states the end, asks no ListOffsets.
/// - [`ClusterPartition::bounds`] (and so `summary`, `seek`, `holds`, `offset_for` latest and
///   earliest) answers from them when they were asked after the filesystem operation running
///   on the thread began ([`Operation`]: one ListOffsets pair, or a Fetch, serves every
///   question of one `lookup`, `open` or `getattr`, and the partition is still as of a moment
///   of that operation), or while younger than the source's freshness window ([`BOUNDS_FRESH`],
///   zero unless [`ClusterSource::with_bounds_fresh`] says otherwise); else it asks
///   ListOffsets again. An append through this source makes them stale at once.
///
/// **Invariant**: `end` never decreases: it is at least every end stated since (ListOffsets
/// latest, and the high watermark or, reading committed, the last stable offset of every
/// Fetch), so every batch a read returned lies below the log end offset the source states
/// next (a view must never see its rendered frontier past the log end, which it would take for
/// a truncation; tansu's memory engine answers ListOffsets latest below its high watermark).
#[derive(Debug, Default)]
struct Bounds {
    start: Offset,
    end: Offset,
    /// When `start` and `end` were last stated together; `None`: never, or made stale.
    learned: Option<Instant>,
    /// Some ListOffsets or Fetch answer stated `end`.
    stated: bool,
}

/// The mount's cap on fetched bytes in flight and how long a fetch may wait for room.
#[derive(Clone)]
struct FetchCap {
    memory: Arc<dyn FetchMemory>,
    wait: Duration,
}

impl std::fmt::Debug for ClusterSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSource").field("read_only", &self.read_only).finish()
    }
}

impl ClusterSource {
    /// The cluster `client` talks to; appends and creations refused when `read_only`.
    pub fn new(client: Arc<Client>, read_only: bool) -> ClusterSource {
        ClusterSource {
            client,
            read_only,
            sizing_budget: CLUSTER_SIZING_BUDGET,
            committed: false,
            fetch_memory: None,
            bounds: std::sync::Mutex::new(HashMap::new()),
            bounds_fresh: BOUNDS_FRESH,
            answers: Arc::default(),
            max_timestamp_lookup: Arc::default(),
        }
    }

    /// The same source reusing a partition's learned log start and end offsets for `fresh`
    /// instead of [`BOUNDS_FRESH`] (zero: every question asks ListOffsets): names and sizes
    /// then reflect the broker up to `fresh` before, for fewer ListOffsets per open and stat.
    /// Not a mount setting; for measurements and comparisons.
    pub fn with_bounds_fresh(mut self, fresh: Duration) -> ClusterSource {
        self.bounds_fresh = fresh;
        self
    }

    /// The same source holding every Fetch's bytes (the size it asks for) in `memory` while it
    /// fetches and filters them: when other fetches hold the cap, a read waits for room, at
    /// most `wait` (the request deadline), then fails with `ETIMEDOUT` rather than growing
    /// memory. Without it, fetches in flight are bounded only by the readers at once.
    pub fn with_fetch_memory(
        mut self,
        memory: Arc<dyn FetchMemory>,
        wait: Duration,
    ) -> ClusterSource {
        self.fetch_memory = Some(FetchCap { memory, wait });
        self
    }

    /// The same source reading as a `read_committed` consumer when `committed`: Fetch at
    /// isolation level 1, each response filtered by its aborted-transaction list and cut at its
    /// last stable offset ([`crate::cluster::committed`]); the log end offset its partitions
    /// state is then ListOffsets `latest`, which the client asks at its `isolation.level` (the
    /// caller makes that `read_committed` too). See [`PartitionSource::reads_committed`].
    pub fn with_committed_reads(mut self, committed: bool) -> ClusterSource {
        self.committed = committed;
        self
    }

    /// The same source stating `bytes` as its partitions' sizing budget (`--sizing-budget`):
    /// how much a stream's `stat`/`open` may fetch to size it.
    pub fn with_sizing_budget(mut self, bytes: u64) -> ClusterSource {
        self.sizing_budget = bytes;
        self
    }

    /// The client (for the group store and tests).
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    fn partition_count(&self, topic: &str) -> Result<usize> {
        let md = self.client.metadata()?;
        md.topics.get(topic).map(|t| t.partitions.len()).ok_or_else(|| {
            Error::NotFound(format!("topic {topic} (not in the cluster's metadata)"))
        })
    }
}

/// Where a topic setting DescribeConfigs states comes from, as [`ConfigSource`] names it:
/// DYNAMIC_TOPIC_CONFIG (1) is the topic's override; DYNAMIC_BROKER_CONFIG (2, this broker's)
/// and DYNAMIC_DEFAULT_BROKER_CONFIG (3, the cluster-wide one) the broker's dynamic default;
/// STATIC_BROKER_CONFIG (4) its `server.properties`; DEFAULT_CONFIG (5) Kafka's default. Any
/// other (UNKNOWN 0, the logger, client-metrics and group sources) is not a topic setting's:
/// `None`.
pub fn config_source(source: i8) -> Option<ConfigSource> {
    match source {
        1 => Some(ConfigSource::TopicOverride),
        2 | 3 => Some(ConfigSource::BrokerDefault),
        4 => Some(ConfigSource::BrokerStatic),
        5 => Some(ConfigSource::KafkaDefault),
        _ => None,
    }
}

fn to_i32(partition: u32) -> Result<i32> {
    i32::try_from(partition).map_err(|_| Error::NotFound(format!("partition {partition}")))
}

impl TopicSource for ClusterSource {
    fn topics(&self) -> Result<Vec<String>> {
        Ok(self.client.metadata()?.topics.keys().cloned().collect())
    }

    fn partitions(&self, topic: &str) -> Result<Vec<u32>> {
        let md = self.client.metadata()?;
        let t = md.topics.get(topic).ok_or_else(|| {
            Error::NotFound(format!("topic {topic} (not in the cluster's metadata)"))
        })?;
        let mut parts: Vec<u32> =
            t.partitions.iter().filter_map(|p| u32::try_from(p.partition).ok()).collect();
        parts.sort_unstable();
        Ok(parts)
    }

    fn partition(&self, topic: &str, partition: u32) -> Result<Arc<dyn PartitionSource>> {
        let p = to_i32(partition)?;
        let md = self.client.metadata()?;
        if md.partition(topic, p).is_none() {
            return Err(Error::NotFound(format!(
                "{topic}/{partition} (not in the cluster's metadata)"
            )));
        }
        Ok(Arc::new(ClusterPartition {
            client: Arc::clone(&self.client),
            topic: topic.to_string(),
            partition,
            read_only: self.read_only,
            sizing_budget: self.sizing_budget,
            committed: self.committed,
            fetch_memory: self.fetch_memory.clone(),
            ahead: std::sync::Mutex::new(Vec::new()),
            bounds: Arc::clone(
                crate::sync::lock(&self.bounds).entry((topic.to_string(), partition)).or_default(),
            ),
            bounds_fresh: self.bounds_fresh,
            answers: Arc::clone(&self.answers),
            max_timestamp_lookup: Arc::clone(&self.max_timestamp_lookup),
        }))
    }

    fn create_topic(&self, topic: &str, partitions: u32) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        crate::format::file_name::validate_topic_name(topic)
            .map_err(|reason| Error::InvalidTopicName { name: topic.to_string(), reason })?;
        if partitions == 0 {
            return Err(Error::InvalidInput("a topic needs at least one partition".to_string()));
        }
        let n = i32::try_from(partitions)
            .map_err(|_| Error::InvalidInput(format!("{partitions} partitions")))?;
        self.client.create_topic(topic, n, &[])
    }

    fn create_partition(&self, topic: &str, partition: u32) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        let count = self.partition_count(topic)?;
        if partition as usize != count {
            return Err(Error::InvalidInput(format!(
                "{topic} has {count} partitions: only partition {count} can be created next, not {partition}"
            )));
        }
        self.client.create_partitions(topic, to_i32(partition)?.saturating_add(1))
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// DescribeConfigs of the topic (`NotFound` first when Metadata does not list it), each
    /// setting's source mapped by [`config_source`], sorted by name. A broker without
    /// DescribeConfigs: [`Error::UnsupportedApi`] naming it.
    fn topic_config(&self, topic: &str) -> Result<Vec<ConfigEntry>> {
        self.partitions(topic)?;
        let (broker, described) = self.client.describe_topic_config(topic)?;
        let mut entries = Vec::with_capacity(described.len());
        for config in described {
            let source = config_source(config.source).ok_or_else(|| Error::Protocol {
                broker: broker.clone(),
                what: format!(
                    "DescribeConfigs of topic {topic}: setting {} has config source {}, which a \
                     topic's setting never has",
                    config.name, config.source
                ),
            })?;
            entries.push(ConfigEntry { name: config.name, value: config.value, source });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// One IncrementalAlterConfigs of the topic with every change (`Set`: SET, `Remove`:
    /// DELETE), which the broker applies all or none; its refusal (INVALID_CONFIG, ...) is
    /// `InvalidInput` with the broker's message naming the setting. A setting named twice is
    /// refused here, before any request.
    fn alter_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.partitions(topic)?;
        let mut ops: Vec<(String, ConfigOp)> = Vec::with_capacity(changes.len());
        for change in changes {
            let (name, op) = match change {
                ConfigChange::Set { name, value } => (name, ConfigOp::Set(value.clone())),
                ConfigChange::Remove { name } => (name, ConfigOp::Delete),
            };
            if name.is_empty() {
                return Err(Error::InvalidInput(format!("topic {topic}: an empty setting name")));
            }
            if ops.iter().any(|(n, _)| n == name) {
                return Err(Error::InvalidInput(format!(
                    "topic {topic}: setting {name} changed twice in one write"
                )));
            }
            ops.push((name.clone(), op));
        }
        if ops.is_empty() {
            return Ok(());
        }
        self.client.alter_topic_config(topic, &ops)
    }

    fn shutdown(&self) -> Result<()> {
        // Appends are acknowledged per `acks` before they return: nothing is buffered here.
        Ok(())
    }
}

/// One partition of a cluster.
struct ClusterPartition {
    client: Arc<Client>,
    topic: String,
    partition: u32,
    read_only: bool,
    sizing_budget: u64,
    /// Reads as a `read_committed` consumer (see [`ClusterSource::with_committed_reads`]).
    committed: bool,
    fetch_memory: Option<FetchCap>,
    /// Whole batches Fetches returned beyond what their `read` gave out (see [`Ahead`]), the
    /// newest last, [`READ_AHEAD_SLOTS`] at most.
    ahead: std::sync::Mutex<Vec<Ahead>>,
    /// The partition's log start and end offsets as last learned (shared by its handles, kept
    /// by the [`ClusterSource`]).
    bounds: SharedBounds,
    /// How long `bounds` answer for the broker.
    bounds_fresh: Duration,
    /// The mount's last Fetch answers (see [`Answers`]).
    answers: Arc<Answers>,
    /// Whether the broker answers the max-timestamp lookup (shared by the mount).
    max_timestamp_lookup: Arc<MaxTimestampLookup>,
}

/// Read-ahead of one partition handle. A stream reads in chunks of tens of KiB, but one Fetch
/// round trip is worth up to `max.partition.fetch.bytes` (1 MiB by default), and some brokers
/// (tansu 0.6) ignore the partition limit and answer up to their own limit (5 MiB) whatever is
/// asked: without this, each 64 KiB chunk cost a whole Fetch, and reading a partition
/// transferred tens of times its size. The surplus (at most `max.partition.fetch.bytes` of
/// it) is served to the next `read` that starts where it starts. A handle shared by readers at
/// different places keeps one surplus per reader, [`READ_AHEAD_SLOTS`] at most (the oldest is
/// dropped), so memory stays below that many times `max.partition.fetch.bytes` per partition
/// handle. Batches below the high watermark do not change, so serving them later is what a
/// Fetch would answer.
struct Ahead {
    /// The offset the next sequential `read` asks for.
    from: Offset,
    /// Whole batches, the first holding `from` or a later offset.
    bytes: Vec<u8>,
}

/// Surpluses one partition handle keeps at most (see [`Ahead`]).
const READ_AHEAD_SLOTS: usize = 4;

/// Reads asking for less than this (probes of one batch) fetch only what they ask for.
const READ_AHEAD_MIN_ASK: usize = 4096;

/// The length of the longest prefix of `buf` made of whole batches.
fn whole_batches(buf: &[u8]) -> usize {
    let mut pos = 0;
    while let Ok(Some(h)) = peek_entry(&buf[pos..]) {
        let size = h.total_size();
        if size == 0 || size > buf.len() - pos {
            break;
        }
        pos += size;
    }
    pos
}

impl ClusterPartition {
    /// ListOffsets `-3` for this partition, within what [`MaxTimestampLookup`] learned: the
    /// mount's first lookup runs on a thread and is waited for at most [`MAX_TIMESTAMP_PROBE`].
    fn list_max_timestamp(&self) -> Result<Option<ListedOffset>> {
        use std::sync::atomic::Ordering;
        const ANSWERED: u8 = 1;
        const NOT_ANSWERED: u8 = 2;
        let lookup = &self.max_timestamp_lookup;
        match lookup.state.load(Ordering::Acquire) {
            ANSWERED => return self.client.list_offset(&self.topic, self.p(), MAX_TIMESTAMP),
            NOT_ANSWERED => {
                return Err(Error::UnsupportedApi {
                    broker: "the cluster".to_string(),
                    api: "ListOffsets",
                    why: "the max-timestamp lookup (-3) was not answered before".to_string(),
                });
            }
            _ => {}
        }
        let (client, topic, p) = (Arc::clone(&self.client), self.topic.clone(), self.p());
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new().name("max-timestamp".into()).spawn(move || {
            let _ = tx.send(client.list_offset(&topic, p, MAX_TIMESTAMP));
        });
        if let Err(e) = spawned {
            return Err(Error::io("max-timestamp lookup thread", "spawn", e));
        }
        let answer = rx.recv_timeout(MAX_TIMESTAMP_PROBE).unwrap_or_else(|_| {
            Err(Error::Timeout {
                broker: "the cluster".to_string(),
                what: "ListOffsets -3 (max timestamp)".to_string(),
                after_ms: MAX_TIMESTAMP_PROBE.as_millis() as u64,
            })
        });
        // A partition's own error (unknown topic, no leader) says nothing of the broker.
        let state = match &answer {
            Ok(_) => ANSWERED,
            Err(Error::Kafka { .. } | Error::NotFound(_)) => 0,
            Err(_) => NOT_ANSWERED,
        };
        if state == NOT_ANSWERED {
            log::info!(
                "{}-{}: the cluster does not answer ListOffsets -3 (max timestamp); info files \
                 show max_timestamp: unknown",
                self.topic,
                self.partition
            );
        }
        lookup.state.store(state, Ordering::Release);
        answer
    }

    fn p(&self) -> i32 {
        // Made from a u32 that fitted an i32 in `ClusterSource::partition`.
        self.partition as i32
    }

    /// (log start offset, log end offset): the learned [`Bounds`] while fresh, else ListOffsets
    /// earliest and latest (two requests, pipelined: one round trip). Reading uncommitted, the log end is the high watermark;
    /// reading committed, the last stable offset (ListOffsets asks at the client's isolation
    /// level, which the mount makes the streams' own).
    fn bounds(&self) -> Result<(Offset, Offset)> {
        {
            let b = crate::sync::lock(&self.bounds);
            if b.learned.is_some_and(|t| t.elapsed() < self.bounds_fresh || Operation::covers(t)) {
                return Ok((b.start, b.end.max(b.start)));
            }
        }
        let asked = Instant::now();
        let queries = [EARLIEST, LATEST].map(|ts| (self.topic.clone(), self.p(), ts));
        let answers = self.client.list_offsets(&queries).map_err(|e| self.named(e))?;
        let mut answers = answers.into_iter().map(|(_, answer)| answer);
        let mut offset = || -> Result<Offset> {
            let listed = answers
                .next()
                .unwrap_or_else(|| Err(Error::NotFound(format!("{}/{}", self.topic, self.p()))))
                .map_err(|e| self.named(e))?;
            Ok(listed.map_or(Offset(0), |l: ListedOffset| l.offset).max(Offset(0)))
        };
        let (start, end) = (offset()?, offset()?);
        let mut b = crate::sync::lock(&self.bounds);
        b.start = start;
        b.end = b.end.max(end);
        b.learned = Some(asked);
        b.stated = true;
        Ok((b.start, b.end.max(b.start)))
    }

    /// Takes in what a Fetch response stated (asked at `asked`): its log start offset (when
    /// the broker says), and its high watermark or, reading committed, its last stable offset
    /// (the high watermark when the broker does not say) as a floor of the log end.
    fn learn_from_fetch(&self, fetched: &FetchedPartition, asked: Instant) {
        let end = if self.committed && fetched.last_stable_offset.0 >= 0 {
            fetched.last_stable_offset
        } else {
            fetched.high_watermark
        };
        let mut b = crate::sync::lock(&self.bounds);
        b.end = b.end.max(end);
        b.stated = true;
        if fetched.log_start_offset.0 >= 0 {
            b.start = fetched.log_start_offset;
            if b.learned.is_none_or(|t| t < asked) {
                b.learned = Some(asked);
            }
        }
    }

    /// After an append: the bounds are asked again by the next question, so the appended
    /// records are visible to the next read (the log end a Produce answer implies is the high
    /// watermark only with `acks=all`, and not the last stable offset).
    fn forget_bounds(&self) {
        crate::sync::lock(&self.bounds).learned = None;
    }

    fn produced(&self, base: Offset, count: usize) -> AppendInfo {
        AppendInfo {
            first_offset: base,
            last_offset: Offset(base.0.saturating_add(count as i64 - 1)),
            batches: 1,
        }
    }
}

impl PartitionSource for ClusterPartition {
    fn topic(&self) -> &str {
        &self.topic
    }

    fn partition(&self) -> u32 {
        self.partition
    }

    fn summary(&self) -> Result<PartitionSummary> {
        let (log_start_offset, log_end_offset) = self.bounds()?;
        Ok(PartitionSummary {
            log_start_offset,
            log_end_offset,
            segment_count: None,
            size_bytes: None,
            first_timestamp: None,
            max_timestamp: None,
            // The protocol does not say when a partition last changed: the time it was asked.
            last_modified: SystemTime::now(),
        })
    }

    /// The time it was asked, as in `summary`, without asking the broker: directory
    /// attributes of a cluster mount cost no request (and answer while the broker is down).
    fn last_modified(&self) -> Result<SystemTime> {
        Ok(SystemTime::now())
    }

    fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
        let ts = match query {
            OffsetQuery::Latest => return Ok(self.bounds()?.1),
            OffsetQuery::Earliest => return Ok(self.bounds()?.0),
            OffsetQuery::MaxTimestamp => MAX_TIMESTAMP,
            OffsetQuery::Timestamp(t) => t.max(0),
        };
        let listed = if ts == MAX_TIMESTAMP {
            self.list_max_timestamp()
        } else {
            self.client.list_offset(&self.topic, self.p(), ts)
        };
        match listed.map_err(|e| self.named(e))? {
            // A broker answering a time past the last record with an older record (tansu 0.6
            // answers offset 0, doc/cluster-brokers.md): no record is that new.
            Some(l) if matches!(query, OffsetQuery::Timestamp(t) if l.timestamp >= 0 && l.timestamp < t) => {
                Ok(self.bounds()?.1)
            }
            Some(l) if l.offset.0 >= 0 => Ok(l.offset),
            // No record that new (or -3 on an empty partition): the log end offset.
            _ => Ok(self.bounds()?.1),
        }
    }

    fn seek(&self, target: Offset) -> Result<ReadCursor> {
        let (log_start, log_end) = self.bounds()?;
        if target < log_start || target > log_end {
            return Err(Error::OffsetOutOfRange { requested: target, log_start, log_end });
        }
        Ok(ReadCursor::at(target))
    }

    fn read(&self, cursor: &ReadCursor, max_bytes: usize) -> Result<BatchChunk> {
        if let Some(chunk) = self.answered(cursor.next_offset, max_bytes)? {
            return Ok(chunk);
        }
        if self.committed {
            self.read_committed(cursor, max_bytes)
        } else {
            self.read_uncommitted(cursor, max_bytes)
        }
    }

    fn aborted_transactions(&self, from: Offset, to: Offset) -> Result<Vec<AbortedTxn>> {
        let mut open: HashMap<i64, Offset> = HashMap::new();
        let mut aborted = Vec::new();
        let mut cursor = ReadCursor::at(from);
        while cursor.next_offset < to {
            let chunk = self.read(&cursor, 1 << 20)?;
            let Some(next) = chunk.next else { break };
            let mut pos = 0;
            while let Ok(Some(h)) = peek_entry(&chunk.bytes[pos..]) {
                let entry = &chunk.bytes[pos..pos + h.total_size().min(chunk.bytes.len() - pos)];
                pos += entry.len();
                let info =
                    parse_batch_info(entry).map_err(|e| self.bad_bytes(pos, &e.to_string()))?;
                if info.base_offset >= to {
                    break;
                }
                if info.is_control && info.is_transactional {
                    let batch =
                        decode_batch(entry).map_err(|e| self.bad_bytes(pos, &e.to_string()))?;
                    let Some(record) = batch.records().next() else { continue };
                    let record = record.map_err(|e| self.bad_bytes(pos, &e.to_string()))?;
                    let key = parse_control_key(record.key)
                        .map_err(|e| self.bad_bytes(pos, &e.to_string()))?;
                    let first = open.remove(&info.producer_id);
                    if let (ControlRecordType::Abort, Some(first)) = (key.record_type, first) {
                        aborted.push(AbortedTxn {
                            producer_id: info.producer_id,
                            first_offset: first,
                            last_offset: info.base_offset,
                            // The broker does not say: the offset after the marker.
                            last_stable_offset: info.base_offset.plus(1),
                        });
                    }
                } else if info.is_transactional {
                    open.entry(info.producer_id).or_insert(info.base_offset);
                }
            }
            cursor = next;
        }
        Ok(aborted)
    }

    fn append(&self, records: &[NewRecord]) -> Result<AppendInfo> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        let produced = self.client.produce(&self.topic, self.p(), records);
        self.forget_bounds();
        let produced = produced.map_err(|e| self.named(e))?;
        Ok(self.produced(produced.base_offset, records.len()))
    }

    fn append_refs(&self, records: &[RecordRef<'_>]) -> Result<AppendInfo> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        let produced = self.client.produce(&self.topic, self.p(), records);
        self.forget_bounds();
        let produced = produced.map_err(|e| self.named(e))?;
        Ok(self.produced(produced.base_offset, records.len()))
    }

    fn sizing_budget(&self) -> u64 {
        self.sizing_budget
    }

    /// The bounds as last stated by a ListOffsets or Fetch answer (see [`Bounds`]): a read
    /// learns up to their end without a request, and its own Fetch answer restates them.
    fn stated_bounds(&self) -> Option<(Offset, Offset)> {
        let b = crate::sync::lock(&self.bounds);
        b.stated.then_some((b.start, b.end.max(b.start)))
    }

    fn reads_committed(&self) -> bool {
        self.committed
    }

    fn sync(&self) -> Result<()> {
        // Each append was acknowledged per `acks` before it returned; there is no local copy
        // to flush.
        Ok(())
    }
}

impl ClusterPartition {
    /// [`PartitionSource::read`] as a `read_uncommitted` consumer, with read-ahead (see
    /// [`Ahead`]).
    fn read_uncommitted(&self, cursor: &ReadCursor, max_bytes: usize) -> Result<BatchChunk> {
        let from = cursor.next_offset;
        let taken = {
            let mut ahead = crate::sync::lock(&self.ahead);
            ahead.iter().position(|a| a.from == from).map(|i| ahead.remove(i))
        };
        if let Some(a) = taken {
            let (chunk, rest) = self.split(&a.bytes, from, max_bytes)?;
            if chunk.next.is_some() {
                if let (Some(next), Some(rest)) = (chunk.next, rest) {
                    let bytes = a.bytes[rest..].to_vec();
                    self.keep_ahead(Ahead { from: next.next_offset, bytes });
                }
                return Ok(chunk);
            }
        }
        let cap = usize::try_from(self.client.config().max_partition_fetch_bytes).unwrap_or(0);
        let ask = if max_bytes >= READ_AHEAD_MIN_ASK { max_bytes.max(cap) } else { max_bytes };
        let opts = FetchOptions {
            max_bytes: Some(i32::try_from(ask.max(1)).unwrap_or(i32::MAX)),
            max_wait: Duration::ZERO,
            isolation: Some(IsolationLevel::ReadUncommitted),
        };
        let _held = self.hold(ask)?;
        let asked = Instant::now();
        let fetched =
            self.client.fetch(&self.topic, self.p(), from, opts).map_err(|e| self.named(e))?;
        self.learn_from_fetch(&fetched, asked);
        let buf: &[u8] = &fetched.records;
        let (chunk, rest) = self.split(buf, from, max_bytes)?;
        if let (Some(next), Some(rest)) = (chunk.next, rest) {
            let end = buf.len().min(rest.saturating_add(cap));
            let kept = whole_batches(&buf[rest..end]);
            if kept > 0 {
                let bytes = buf[rest..rest + kept].to_vec();
                self.keep_ahead(Ahead { from: next.next_offset, bytes });
            }
        }
        self.keep_answer(from, &chunk);
        Ok(chunk)
    }

    /// A read from `from` served by a kept Fetch answer (see [`Answers`]): its batches,
    /// `max_bytes` of them at most (at least one); `None` when no answer starts there.
    fn answered(&self, from: Offset, max_bytes: usize) -> Result<Option<BatchChunk>> {
        if self.stated_bounds().is_none_or(|(start, _)| start > from) {
            return Ok(None);
        }
        let mut answers = crate::sync::lock(&self.answers.0);
        let Some(i) = answers.iter().position(|a| {
            a.from == from
                && a.partition == self.partition
                && a.committed == self.committed
                && a.topic == self.topic
        }) else {
            return Ok(None);
        };
        let Some(a) = answers.remove(i) else { return Ok(None) };
        let chunk = if a.bytes.len() <= max_bytes {
            BatchChunk {
                bytes: a.bytes.clone(),
                starts: Vec::new(),
                next: Some(ReadCursor::at(a.next)),
                crc_checked: false,
                skipped: None,
            }
        } else {
            self.split(&a.bytes, from, max_bytes)?.0
        };
        answers.push_back(a);
        Ok(chunk.next.is_some().then_some(chunk))
    }

    /// Keeps what a read from `from` fetched (see [`Answers`]), dropping the least recently
    /// used answer beyond [`ANSWER_SLOTS`].
    fn keep_answer(&self, from: Offset, chunk: &BatchChunk) {
        let Some(next) = chunk.next.as_ref().map(|c| c.next_offset) else { return };
        if chunk.bytes.is_empty() {
            return;
        }
        let mut answers = crate::sync::lock(&self.answers.0);
        answers.retain(|a| {
            !(a.from == from
                && a.partition == self.partition
                && a.committed == self.committed
                && a.topic == self.topic)
        });
        if answers.len() >= ANSWER_SLOTS {
            answers.pop_front();
        }
        answers.push_back(Answer {
            topic: self.topic.clone(),
            partition: self.partition,
            committed: self.committed,
            from,
            bytes: chunk.bytes.clone(),
            next,
        });
    }
}

impl ClusterPartition {
    /// [`PartitionSource::read`] as a `read_committed` consumer: Fetch at isolation level 1,
    /// the response filtered by its own aborted-transaction list and cut at its last stable
    /// offset ([`committed_batches`]). A response whose batches were all dropped (an aborted
    /// transaction longer than one response) is followed by the next Fetch from past them, each
    /// with its own deadline; the walk ends empty at the last stable offset.
    fn read_committed(&self, cursor: &ReadCursor, max_bytes: usize) -> Result<BatchChunk> {
        let opts = FetchOptions {
            max_bytes: Some(i32::try_from(max_bytes.max(1)).unwrap_or(i32::MAX)),
            max_wait: Duration::ZERO,
            isolation: Some(IsolationLevel::ReadCommitted),
        };
        let mut from = cursor.next_offset;
        loop {
            let _held = self.hold(max_bytes)?;
            let asked = Instant::now();
            let fetched =
                self.client.fetch(&self.topic, self.p(), from, opts).map_err(|e| self.named(e))?;
            self.learn_from_fetch(&fetched, asked);
            // A broker that does not say (-1): nothing is pending, the high watermark.
            let lso = if fetched.last_stable_offset.0 >= 0 {
                fetched.last_stable_offset
            } else {
                fetched.high_watermark
            };
            let aborted: Vec<(i64, Offset)> = fetched
                .aborted_transactions
                .iter()
                .map(|a| (a.producer_id, a.first_offset))
                .collect();
            let kept = committed_batches(&fetched.records, from, lso, &aborted, max_bytes)
                .map_err(|(at, e)| self.bad_bytes(at, &e.to_string()))?;
            if !kept.bytes.is_empty() {
                let next = Some(ReadCursor::at(kept.next));
                let chunk = BatchChunk {
                    bytes: kept.bytes,
                    starts: Vec::new(),
                    next,
                    crc_checked: false,
                    skipped: None,
                };
                self.keep_answer(cursor.next_offset, &chunk);
                return Ok(chunk);
            }
            if kept.next <= from || kept.next >= lso {
                return Ok(BatchChunk {
                    bytes: Vec::new(),
                    starts: Vec::new(),
                    next: None,
                    crc_checked: false,
                    skipped: None,
                });
            }
            from = kept.next;
        }
    }

    /// Room for a Fetch of `max_bytes` in the mount's fetch memory, held until dropped (nothing
    /// without a cap); waits for other fetches at most the request deadline.
    fn hold(&self, max_bytes: usize) -> Result<Option<Box<dyn std::any::Any + Send>>> {
        let Some(cap) = &self.fetch_memory else { return Ok(None) };
        match cap.memory.hold(max_bytes, Instant::now() + cap.wait) {
            Some(held) => Ok(Some(held)),
            None => Err(Error::Timeout {
                broker: format!("leader of {}/{}", self.topic, self.partition),
                what: format!(
                    "partition {}/{}: waiting for fetch memory ({} bytes asked, other fetches \
                     hold the memory budget of {} bytes)",
                    self.topic,
                    self.partition,
                    max_bytes,
                    cap.memory.limit()
                ),
                after_ms: u64::try_from(cap.wait.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// `e` naming this partition where the client's error names only a broker (a connection
    /// that failed or a deadline that passed), so the log line of a failed read says which
    /// partition it was reading: `broker B: partition T/P: Fetch: ...`.
    fn named(&self, e: Error) -> Error {
        let part = format!("partition {}/{}", self.topic, self.partition);
        match e {
            Error::BrokerUnreachable { broker, op, source } => {
                Error::BrokerUnreachable { broker, op: format!("{part}: {op}"), source }
            }
            Error::Timeout { broker, what, after_ms } => {
                Error::Timeout { broker, what: format!("{part}: {what}"), after_ms }
            }
            Error::Protocol { broker, what } => {
                Error::Protocol { broker, what: format!("{part}: {what}") }
            }
            other => other,
        }
    }

    /// Keeps a surplus for the next sequential read, dropping the oldest beyond
    /// [`READ_AHEAD_SLOTS`].
    fn keep_ahead(&self, a: Ahead) {
        let mut ahead = crate::sync::lock(&self.ahead);
        ahead.retain(|b| b.from != a.from);
        if ahead.len() >= READ_AHEAD_SLOTS {
            ahead.remove(0);
        }
        ahead.push(a);
    }

    /// The first batches of `buf` (a Fetch response's records) holding `from` or a later
    /// offset, `max_bytes` of them at most (but at least one), as a chunk; and where the
    /// batches after them start in `buf`, when some follow.
    fn split(
        &self,
        buf: &[u8],
        from: Offset,
        max_bytes: usize,
    ) -> Result<(BatchChunk, Option<usize>)> {
        let mut out = Vec::new();
        let mut next = from;
        let mut pos = 0;
        let mut more = None;
        while pos < buf.len() {
            let rest = &buf[pos..];
            let Some(h) = peek_entry(rest).map_err(|e| self.bad_bytes(pos, &e.to_string()))? else {
                break;
            };
            let size = h.total_size();
            if size > rest.len() {
                break; // A batch cut at the size limit: the broker's way to say "more".
            }
            let entry = &rest[..size];
            let info = parse_batch_info(entry).map_err(|e| self.bad_bytes(pos, &e.to_string()))?;
            if info.last_offset < next {
                pos += size;
                continue; // Before the cursor (a fetch may start with the batch holding it).
            }
            if !out.is_empty() && out.len() + size > max_bytes {
                more = Some(pos);
                break;
            }
            pos += size;
            out.extend_from_slice(entry);
            next = info.last_offset.plus(1);
        }
        let next = if out.is_empty() { None } else { Some(ReadCursor::at(next)) };
        let chunk =
            BatchChunk { bytes: out, starts: Vec::new(), next, crc_checked: false, skipped: None };
        Ok((chunk, more))
    }

    /// Bytes in a Fetch response that do not frame a batch.
    fn bad_bytes(&self, at: usize, what: &str) -> Error {
        Error::Protocol {
            broker: format!("leader of {}/{}", self.topic, self.partition),
            what: format!("Fetch response records at byte {at}: {what}"),
        }
    }
}

/// Consumer groups' committed offsets on a cluster: ListGroups and OffsetFetch to read,
/// OffsetCommit to commit (as `kafka-consumer-groups --reset-offsets` does: refused with EBUSY
/// while the group has live members).
pub struct ClusterGroups {
    client: Arc<Client>,
}

impl ClusterGroups {
    /// The groups of the cluster `client` talks to.
    pub fn new(client: Arc<Client>) -> ClusterGroups {
        ClusterGroups { client }
    }
}

impl crate::source::GroupStore for ClusterGroups {
    fn groups(&self, topic: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for g in self.client.list_groups()? {
            let committed = self.client.fetch_offsets(&g.group_id, None)?;
            if committed.iter().any(|c| c.topic == topic && c.offset >= 0) {
                out.push(g.group_id);
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn committed(
        &self,
        group: &str,
        topic: &str,
    ) -> Result<std::collections::BTreeMap<u32, crate::source::CommittedOffset>> {
        let mut out = std::collections::BTreeMap::new();
        for c in self.client.fetch_offsets(group, None)? {
            let Ok(p) = u32::try_from(c.partition) else { continue };
            if c.topic == topic && c.offset >= 0 {
                out.insert(
                    p,
                    crate::source::CommittedOffset {
                        offset: Offset(c.offset),
                        metadata: c.metadata.unwrap_or_default(),
                        // OffsetFetch does not return the commit time.
                        commit_timestamp: crate::format::NO_TIMESTAMP,
                    },
                );
            }
        }
        Ok(out)
    }

    fn commit(&self, group: &str, topic: &str, offsets: &[(u32, Offset)]) -> Result<()> {
        let offsets: Vec<(i32, i64, Option<String>)> =
            offsets.iter().map(|&(p, o)| (p as i32, o.0, None)).collect();
        match self.client.commit_offsets(group, topic, &offsets) {
            Err(err) if err.errno() == libc::EBUSY => {
                // Kafka refuses a commit from outside the group while it has members: name
                // the group's state (ListGroups v4+; DescribeGroups is not needed for it).
                let state = self.client.list_groups().ok().and_then(|listing| {
                    listing.into_iter().find(|g| g.group_id == group).map(|g| g.state)
                });
                Err(group_in_use(err, group, state.as_deref()))
            }
            other => other,
        }
    }
}

/// The error of a commit the group's coordinator refused because the group is in use
/// (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS: EBUSY), with a message
/// naming the group's `state` as the broker reported it (or saying it did not). Other errors
/// are returned unchanged.
pub fn group_in_use(err: Error, group: &str, state: Option<&str>) -> Error {
    let Error::Kafka { broker, api, code, name, topic, partition, message: _ } = err else {
        return err;
    };
    let state = match state {
        Some(s) if !s.is_empty() && !s.eq_ignore_ascii_case("unknown") => s.to_string(),
        Some(_) => "not reported by the broker".to_string(),
        None => "unknown: the broker no longer lists the group".to_string(),
    };
    let message = format!(
        "group {group:?} is in use by active members (state {state}); Kafka accepts a commit \
         from outside the group only while it has none: stop its consumers first, as \
         kafka-consumer-groups --reset-offsets requires"
    );
    Error::Kafka { broker, api, code, name, topic, partition, message: Some(message.into()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_configs_sources_map_to_where_a_topic_setting_comes_from() {
        assert_eq!(config_source(1), Some(ConfigSource::TopicOverride));
        assert_eq!(config_source(2), Some(ConfigSource::BrokerDefault));
        assert_eq!(config_source(3), Some(ConfigSource::BrokerDefault));
        assert_eq!(config_source(4), Some(ConfigSource::BrokerStatic));
        assert_eq!(config_source(5), Some(ConfigSource::KafkaDefault));
        // UNKNOWN, DYNAMIC_BROKER_LOGGER_CONFIG, CLIENT_METRICS_CONFIG, GROUP_CONFIG.
        for other in [0, 6, 7, 8, -1] {
            assert_eq!(config_source(other), None, "{other}");
        }
    }
    use crate::cluster::errors::kafka_error;

    #[test]
    fn a_refused_commit_is_ebusy_and_names_the_groups_state() {
        // UNKNOWN_MEMBER_ID (25), as Kafka answers a standalone commit to a Stable group.
        let refused = || kafka_error("b:9092", "OffsetCommit", 25, Some("orders"), Some(0), None);
        let err = group_in_use(refused(), "etl", Some("Stable"));
        assert_eq!(err.errno(), libc::EBUSY);
        let text = err.to_string();
        assert!(text.contains("UNKNOWN_MEMBER_ID") && text.contains("orders/0"), "{text}");
        assert!(text.contains("\"etl\" is in use") && text.contains("state Stable"), "{text}");
        for (code, state) in [(22, "PreparingRebalance"), (27, "CompletingRebalance")] {
            let err = group_in_use(
                kafka_error("b:9092", "OffsetCommit", code, None, None, None),
                "etl",
                Some(state),
            );
            assert_eq!(err.errno(), libc::EBUSY);
            assert!(err.to_string().contains(&format!("state {state}")), "{err}");
        }
        let err = group_in_use(refused(), "etl", Some("unknown"));
        assert!(err.to_string().contains("state not reported by the broker"), "{err}");
        let err = group_in_use(refused(), "etl", None);
        assert!(err.to_string().contains("no longer lists the group"), "{err}");
        // Anything else is left as it was.
        let other = group_in_use(Error::ReadOnly, "etl", Some("Stable"));
        assert!(matches!(other, Error::ReadOnly));
    }
}
