//! The cluster backend: [`TopicSource`] and [`PartitionSource`] over the Kafka protocol.
//!
//! | seam method | request |
//! |---|---|
//! | `topics`, `partitions`, `partition` | Metadata (cached for `metadata.max.age.ms`) |
//! | `summary` | ListOffsets earliest and latest (two requests in one round trip, once per filesystem operation; see [`Bounds`]) |
//! | `offset_for` | ListOffsets with the timestamp or `-3`; `-1` and `-2` as `summary` |
//! | `seek` | as `summary` (range check), then [`ReadCursor::at`] |
//! | `read` (every [`ReadMode`](topicfs_source::ReadMode) reads whole batches) | Fetch of the reader's window from the cursor's offset (its answer's log start, high watermark and last stable offset kept as the bounds; `known().bounds` are the bounds last stated), or none when a kept answer holds the offset or a Fetch from it is in flight; a sequential reader's window grows and the next one is prefetched ([`window`]) |
//! | `known`, `committed` | nothing: what the source last learned, and its settings |
//! | `holds` | as `summary` (the cursor's offset against the log start) |
//! | `append` | Produce: one request per call, idempotent, acked per `acks` |
//! | `create_topic` / `create_partition` | CreateTopics / CreatePartitions |
//! | `topic_config` / `alter_topic_config` | DescribeConfigs / IncrementalAlterConfigs (resource TOPIC; see [`config_source`]) |
//!
//! **Transactions.** `read` always fetches `read_uncommitted`: the batches as stored, aborted
//! ones and markers included, up to the high watermark, exactly what a local log holds. The
//! view's transaction tracker (`view::txn`) decides what `read_committed` shows from the
//! markers, as it does for local logs, so one rule serves both backends (unless the source
//! reads committed itself, [`ClusterSource::with_committed_reads`]).
//!
//! **Cursors.** A cursor of this source is an offset alone ([`CursorHint::NONE`]): the broker
//! finds the batch (a Fetch may start with a batch holding offsets below the one asked for; it
//! is dropped here, so a chunk starts at the first batch whose last offset is `>=` the cursor).
//!
//! Nothing here has segment files: [`PartitionSource::segment_files`] is `None`, so `segments/`
//! and the inspection files do not exist on a cluster mount; nor a key index
//! ([`PartitionSource::key_index`]) nor a transaction state at segment boundaries.

mod groups;
mod partition;
mod reads;
mod window;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Client;
use crate::client::ConfigOp;
use topicfs_executor::Executor;
use topicfs_format::Offset;
use topicfs_source::error::{Error, Result};
use topicfs_source::{
    ConfigChange, ConfigEntry, ConfigSource, FetchMemory, PartitionSource, ReadCursor, SpaceStats,
    TopicSource, max_message_bytes_of,
};

pub use groups::{ClusterGroups, group_in_use};
use window::Windows;

/// A Kafka cluster as a [`TopicSource`].
pub struct ClusterSource {
    client: Arc<Client>,
    /// The client of background work (deferred stats, mount sizing): its own connections, so
    /// its Fetches never queue before a reader's at the broker ([`ClusterSource::with_background_client`]).
    background: Arc<Client>,
    read_only: bool,
    sizing_budget: u64,
    committed: bool,
    fetch_memory: Option<FetchCap>,
    /// Per partition, what was last learned of its log start and end offsets, shared by every
    /// handle of the partition (see [`Bounds`]).
    bounds: std::sync::Mutex<HashMap<(String, u32), SharedBounds>>,
    /// How long learned bounds answer for the broker (see [`Bounds`]).
    bounds_fresh: Duration,
    /// The mount's read windows: kept Fetch answers, readers, Fetches in flight (see
    /// [`window`]).
    windows: Arc<Windows>,
    /// Whether the broker answers the max-timestamp lookup (see [`MaxTimestampLookup`]).
    max_timestamp_lookup: Arc<MaxTimestampLookup>,
    /// The mount's executor, where prefetches and the max-timestamp probe run
    /// ([`ClusterSource::with_executor`]).
    executor: Option<Executor>,
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

/// One partition's [`Bounds`], shared by its handles.
type SharedBounds = Arc<std::sync::Mutex<Bounds>>;

/// The sizing budget of a cluster's partitions unless `--sizing-budget` says otherwise: 64 KiB
/// of log, what one Fetch of the view's read size returns, so that `stat` and `open` of a
/// stream cost at most one Fetch whatever the partition holds (see
/// [`Known::sizing_budget`](topicfs_source::Known::sizing_budget)).
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
///   ([`Known::bounds`](topicfs_source::Known::bounds)) without asking: a sequential reader, whose every
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

impl Bounds {
    /// Whether a question answers from these bounds without asking: learned within the
    /// current operation, or less than `fresh` ago.
    fn current(&self, fresh: Duration) -> bool {
        self.learned.is_some_and(|t| t.elapsed() < fresh || topicfs_source::Operation::covers(t))
    }
}

/// The client a request of the running task goes through: the background one for deferred
/// stats and mount sizing (see [`ClusterSource::with_background_client`]), else the readers'.
fn client_for<'a>(client: &'a Arc<Client>, background: &'a Arc<Client>) -> &'a Client {
    match topicfs_executor::running_class() {
        Some(topicfs_executor::Class::DeferredStat | topicfs_executor::Class::MountSizing) => {
            background
        }
        _ => client,
    }
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
            background: Arc::clone(&client),
            client,
            read_only,
            sizing_budget: CLUSTER_SIZING_BUDGET,
            committed: false,
            fetch_memory: None,
            bounds: std::sync::Mutex::new(HashMap::new()),
            bounds_fresh: BOUNDS_FRESH,
            windows: Arc::default(),
            max_timestamp_lookup: Arc::default(),
            executor: None,
        }
    }

    /// The same source running its background network work on `executor` (the mount's one):
    /// a sequential reader's prefetches and the first max-timestamp lookup are
    /// [`Blocking::Network`](topicfs_executor::Blocking::Network) tasks of the read-ahead
    /// class, so the source starts no thread of its own. Without one (a source made outside a
    /// mount) that work runs on the caller: the prefetches with the read that sends them, the
    /// lookup bounded by `request.timeout.ms` instead of [`MAX_TIMESTAMP_PROBE`].
    pub fn with_executor(mut self, executor: Executor) -> ClusterSource {
        self.executor = Some(executor);
        self
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
    /// last stable offset ([`crate::committed`]); the log end offset its partitions
    /// state is then ListOffsets `latest`, which the client asks at its `isolation.level` (the
    /// caller makes that `read_committed` too). See [`topicfs_source::Committed::BySource`].
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

    /// The same source sending the requests of background work (tasks of the executor's
    /// deferred-stat and mount-sizing classes, [`topicfs_executor::running_class`]) through
    /// `client`, a client of its own with its own connections: a broker answers one
    /// connection's requests in order, so on the readers' connection a sizing Fetch would
    /// delay the next read. The default is the readers' client.
    pub fn with_background_client(mut self, client: Arc<Client>) -> ClusterSource {
        self.background = client;
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

/// A read [`TopicSource::prefetch`] fetches: the partition, the offset, the flight it holds
/// and the bytes it asks.
type Claim = (Arc<ClusterPartition>, Offset, Arc<window::FlightSlot>, usize);

impl ClusterSource {
    /// One partition's handle (what [`TopicSource::partition`] returns).
    fn cluster_partition(&self, topic: &str, partition: u32) -> Result<Arc<ClusterPartition>> {
        let p = to_i32(partition)?;
        let md = self.client.metadata()?;
        if md.partition(topic, p).is_none() {
            return Err(Error::NotFound(format!(
                "{topic}/{partition} (not in the cluster's metadata)"
            )));
        }
        Ok(Arc::new_cyclic(|me| ClusterPartition {
            me: me.clone(),
            client: Arc::clone(&self.client),
            background: Arc::clone(&self.background),
            topic: topic.to_string(),
            partition,
            read_only: self.read_only,
            sizing_budget: self.sizing_budget,
            committed: self.committed,
            fetch_memory: self.fetch_memory.clone(),
            bounds: Arc::clone(
                topicfs_source::sync::lock(&self.bounds)
                    .entry((topic.to_string(), partition))
                    .or_default(),
            ),
            bounds_fresh: self.bounds_fresh,
            windows: Arc::clone(&self.windows),
            max_timestamp_lookup: Arc::clone(&self.max_timestamp_lookup),
            executor: self.executor.clone(),
        }))
    }

    /// Claims of [`TopicSource::prefetch`], as many as fit: the asks add up to half the kept
    /// pieces' cap at most (so that what lands is still kept when the reads come) and to the
    /// fetch memory free at once.
    fn prefetch_claims(&self, topic: &str, reads: &[(u32, ReadCursor)]) -> Result<Vec<Claim>> {
        // Every handle first: nothing below fails, so no claimed flight is left unlanded.
        let mut parts = Vec::with_capacity(reads.len());
        for (p, cursor) in reads {
            parts.push((self.cluster_partition(topic, *p)?, cursor));
        }
        let mut claimed = Vec::new();
        let mut total = 0usize;
        let mut room = usize::MAX;
        for (part, cursor) in parts {
            room = room.min(part.piece_cap() / 2);
            if total >= room {
                break;
            }
            if let Some((slot, ask)) = part.claim_prefetch(cursor) {
                total = total.saturating_add(ask);
                claimed.push((part, cursor.next_offset, slot, ask));
            }
        }
        Ok(claimed)
    }
}

impl ClusterSource {
    /// The IncrementalAlterConfigs operations of `changes` to `topic` (which must exist): a
    /// setting named twice or an empty name is refused here, before any request; `ReadOnly`
    /// on a read-only mount.
    fn config_ops(&self, topic: &str, changes: &[ConfigChange]) -> Result<Vec<(String, ConfigOp)>> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.partitions(topic)?;
        let mut ops: Vec<(String, ConfigOp)> = Vec::with_capacity(changes.len());
        for change in changes {
            let (name, op) = match change {
                ConfigChange::Set { name, value } => (name, ConfigOp::Set(value.clone())),
                ConfigChange::Remove { name } => (name, ConfigOp::Delete),
                // A cluster's topics' settings are always known.
                ConfigChange::MakeKnown => continue,
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
        Ok(ops)
    }
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
        Ok(self.cluster_partition(topic, partition)?)
    }

    fn create_topic(&self, topic: &str, partitions: u32) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        topicfs_format::file_name::validate_topic_name(topic)
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
            entries.push(ConfigEntry {
                name: config.name,
                value: config.value,
                source,
                applied: true,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// One IncrementalAlterConfigs of the topic with every change (`Set`: SET, `Remove`:
    /// DELETE), which the broker applies all or none; its refusal (INVALID_CONFIG, ...) is
    /// `InvalidInput` with the broker's message naming the setting. A setting named twice is
    /// refused here, before any request.
    fn alter_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        let ops = self.config_ops(topic, changes)?;
        if ops.is_empty() {
            return Ok(());
        }
        self.client.alter_topic_config(topic, &ops, false)
    }

    /// The IncrementalAlterConfigs of [`TopicSource::alter_topic_config`] with `validate_only`:
    /// the broker validates the changes as it would apply them, and applies nothing.
    fn check_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        let ops = self.config_ops(topic, changes)?;
        if ops.is_empty() {
            return Ok(());
        }
        self.client.alter_topic_config(topic, &ops, true)
    }

    /// Every start is taken: the brokers judge values, by the rules of their version (which
    /// may take values this one's do not), at the end of the line or at `close()`.
    fn check_value_prefix(&self, _name: &str, _value: &str) -> Result<()> {
        Ok(())
    }

    /// DescribeConfigs of the topic (`NotFound` first when Metadata does not list the topic):
    /// one round trip. Every setting is asked for, not only this one: tansu 0.6 answers a
    /// request naming its keys with an error the client retries until its deadline, which made
    /// every `append` open of a cluster mount wait `request.timeout.ms`.
    fn max_message_bytes(&self, topic: &str) -> Result<Option<usize>> {
        self.partitions(topic)?;
        let (_, described) = self.client.describe_topic_config_keys(topic, None)?;
        Ok(max_message_bytes_of(described.iter().map(|c| (c.name.as_str(), c.value.as_deref()))))
    }

    /// One ListOffsets per leader broker (earliest and latest of every partition of `topic`),
    /// taken in as if each partition had asked at the same moment (see [`Bounds`]); nothing
    /// when every partition's bounds are current (learned within this operation, or fresh).
    fn state_bounds(&self, topic: &str) -> Result<()> {
        use crate::client::{EARLIEST, LATEST};
        let parts = self.partitions(topic)?;
        // Bounds a partition would answer from without asking (learned within this operation
        // or while fresh) are not asked again.
        let current = |p: &u32| {
            let all = topicfs_source::sync::lock(&self.bounds);
            all.get(&(topic.to_string(), *p))
                .is_some_and(|shared| topicfs_source::sync::lock(shared).current(self.bounds_fresh))
        };
        if parts.iter().all(current) {
            return Ok(());
        }
        let asked = Instant::now();
        let mut queries = Vec::with_capacity(parts.len() * 2);
        for p in &parts {
            let p = to_i32(*p)?;
            queries.push((topic.to_string(), p, EARLIEST));
            queries.push((topic.to_string(), p, LATEST));
        }
        let client = client_for(&self.client, &self.background);
        let answers = client.list_offsets(&queries)?;
        let offset = |i: usize| match answers.get(i) {
            Some((_, Ok(listed))) => Some(listed.map_or(Offset(0), |l| l.offset).max(Offset(0))),
            _ => None,
        };
        let mut all = topicfs_source::sync::lock(&self.bounds);
        for (i, p) in parts.iter().enumerate() {
            let (Some(start), Some(end)) = (offset(2 * i), offset(2 * i + 1)) else { continue };
            let shared = all.entry((topic.to_string(), *p)).or_default();
            let mut b = topicfs_source::sync::lock(shared);
            b.start = start;
            b.end = b.end.max(end);
            b.learned = Some(asked);
            b.stated = true;
        }
        Ok(())
    }

    /// One Fetch per leader broker for the reads (at most [`Client::fetch_many`]'s requests,
    /// pipelined): each read's answer is kept in the mount's read windows as if its partition
    /// had fetched it, so its read is served from there. Reads a kept piece or a Fetch in
    /// flight already serves, or past the log end last stated, are left out; so are the
    /// last ones when the asks would pass half the kept pieces' cap or the fetch memory free
    /// now (they read for themselves). Each claimed read's flight is ended whatever happens.
    fn prefetch(&self, topic: &str, reads: &[(u32, ReadCursor)]) -> Result<()> {
        if reads.len() < 2 {
            return Ok(());
        }
        let claimed = self.prefetch_claims(topic, reads)?;
        let fail_all = |claimed: &[Claim], why: &str| {
            let asked = Instant::now();
            for (part, from, slot, ask) in claimed {
                let e = Error::InvalidInput(why.to_string());
                part.land_prefetched(*from, *ask, slot, Err(e), asked);
            }
        };
        if claimed.is_empty() {
            return Ok(());
        }
        let total: usize = claimed.iter().map(|c| c.3).sum();
        let _held = match &self.fetch_memory {
            Some(cap) => match cap.memory.hold(total, Instant::now()) {
                Some(held) => Some(held),
                None => {
                    fail_all(&claimed, "no fetch memory free");
                    return Ok(());
                }
            },
            None => None,
        };
        let isolation = if self.committed {
            crate::config::IsolationLevel::ReadCommitted
        } else {
            crate::config::IsolationLevel::ReadUncommitted
        };
        let mut asks = Vec::with_capacity(claimed.len());
        for (part, from, _, ask) in &claimed {
            asks.push((part.p(), *from, i32::try_from(*ask).unwrap_or(i32::MAX)));
        }
        let client = client_for(&self.client, &self.background);
        let asked = Instant::now();
        match client.fetch_many(topic, &asks, isolation) {
            Ok(answers) => {
                // One answer per read; a missing one lands as failed all the same.
                let mut answers = answers.into_iter();
                for (part, from, slot, ask) in &claimed {
                    let answer = answers.next().unwrap_or_else(|| {
                        Err(Error::InvalidInput("no answer for this partition".into()))
                    });
                    part.land_prefetched(*from, *ask, slot, answer, asked);
                }
                Ok(())
            }
            Err(e) => {
                fail_all(&claimed, &e.to_string());
                Err(e)
            }
        }
    }

    /// Latest and earliest from [`TopicSource::state_bounds`]; a time: one ListOffsets per
    /// broker for every partition, each answer taken as [`ClusterPartition`]'s `offset_for`
    /// takes it (no record that new, or a broker answering an older record: the log end, from
    /// the bounds just stated). The max-timestamp query goes partition by partition (its
    /// support is probed per broker).
    fn offsets_for(
        &self,
        topic: &str,
        query: topicfs_source::OffsetQuery,
    ) -> Result<Vec<(u32, Offset)>> {
        use topicfs_source::OffsetQuery as Query;
        let ts = match query {
            Query::Timestamp(t) => t.max(0),
            Query::Latest | Query::Earliest | Query::MaxTimestamp => {
                let _ = self.state_bounds(topic);
                let mut out = Vec::new();
                for p in self.partitions(topic)? {
                    out.push((p, self.partition(topic, p)?.offset_for(query)?));
                }
                return Ok(out);
            }
        };
        let _ = self.state_bounds(topic);
        let parts = self.partitions(topic)?;
        let mut queries = Vec::with_capacity(parts.len());
        for p in &parts {
            queries.push((topic.to_string(), to_i32(*p)?, ts));
        }
        let answers = self.client.list_offsets(&queries)?;
        let mut out = Vec::with_capacity(parts.len());
        for (i, p) in parts.iter().enumerate() {
            let partition = self.partition(topic, *p)?;
            let listed = match answers.get(i) {
                Some((_, Ok(listed))) => *listed,
                // This partition's own question names the error as it would.
                _ => {
                    out.push((*p, partition.offset_for(query)?));
                    continue;
                }
            };
            let end = || partition.known().bounds.map(|(_, end)| end);
            let offset = match listed {
                Some(l) if l.timestamp >= 0 && l.timestamp < ts => None,
                Some(l) if l.offset.0 >= 0 => Some(l.offset),
                _ => None,
            };
            let offset = match offset {
                Some(o) => o,
                None => match end() {
                    Some(end) => end,
                    None => partition.offset_for(query)?,
                },
            };
            out.push((*p, offset));
        }
        Ok(out)
    }

    /// None: the brokers' log dirs are theirs (DescribeLogDirs is not asked).
    fn log_dirs(&self) -> topicfs_source::LogDirsReport {
        topicfs_source::LogDirsReport::default()
    }

    /// Unknown (all zero): the brokers' disks are not the mount's storage.
    fn space(&self) -> Result<SpaceStats> {
        Ok(SpaceStats::default())
    }

    fn shutdown(&self) -> Result<()> {
        // Appends are acknowledged per `acks` before they return: nothing is buffered here.
        Ok(())
    }
}

/// One partition of a cluster.
struct ClusterPartition {
    /// This handle, for the prefetches it queues.
    me: std::sync::Weak<ClusterPartition>,
    client: Arc<Client>,
    /// The client of background work (see [`ClusterSource::with_background_client`]).
    background: Arc<Client>,
    topic: String,
    partition: u32,
    read_only: bool,
    sizing_budget: u64,
    /// Reads as a `read_committed` consumer (see [`ClusterSource::with_committed_reads`]).
    committed: bool,
    fetch_memory: Option<FetchCap>,
    /// The partition's log start and end offsets as last learned (shared by its handles, kept
    /// by the [`ClusterSource`]).
    bounds: SharedBounds,
    /// How long `bounds` answer for the broker.
    bounds_fresh: Duration,
    /// The mount's read windows (see [`window`]).
    windows: Arc<Windows>,
    /// Whether the broker answers the max-timestamp lookup (shared by the mount).
    max_timestamp_lookup: Arc<MaxTimestampLookup>,
    /// The mount's executor (see [`ClusterSource::with_executor`]).
    executor: Option<Executor>,
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
    use crate::errors::kafka_error;

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
