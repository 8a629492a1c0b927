//! The Kafka client the cluster backend uses: one [`Client`] per mount, shared by every FUSE
//! worker thread.
//!
//! Invariants:
//! - One [`Connection`] per broker, shared by all threads (requests pipelined by correlation
//!   id). A dead connection is replaced by the next request that needs that broker.
//! - Every public method has one deadline, `request.timeout.ms` from its start, that covers
//!   metadata refreshes, reconnects, retries and backoff: it returns (an answer or an error)
//!   by then, plus at most one backoff step's rounding.
//! - Metadata is cached and refreshed when older than `metadata.max.age.ms`, and at once when
//!   a broker answers NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION
//!   and the like ([`super::errors::retriable_code`]); then the request is retried. A topic
//!   that a fresh Metadata does not list is `NotFound` at once, not retried until the deadline.
//! - Produce is idempotent by default: one producer id (InitProducerId) per client, a sequence
//!   number per partition, one produce in flight per partition. A retry resends the same batch
//!   with the same producer id, epoch and sequence, which the broker deduplicates. When a
//!   produce finally fails, the producer id is dropped, so the next produce starts a new
//!   session rather than guessing whether the failed batch landed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DescribeGroupsRequest,
    FetchRequest, FindCoordinatorRequest, GroupId, InitProducerIdRequest, ListGroupsRequest,
    ListOffsetsRequest, MetadataRequest, OffsetCommitRequest, OffsetFetchRequest, ProduceRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use super::config::{Acks, BrokerAddr, ClientConfig, IsolationLevel};
use super::conn::Connection;
use super::errors::{kafka_error, retriable};
use crate::error::{Error, Result};
use crate::format::{self, BatchSpec, EncodeRecord, Offset, Timestamp};
use crate::sync::lock;

/// ListOffsets timestamp: the log end offset (`latest`).
pub const LATEST: i64 = -1;
/// ListOffsets timestamp: the log start offset (`earliest`).
pub const EARLIEST: i64 = -2;
/// ListOffsets timestamp: the offset of the record with the largest timestamp (KIP-734,
/// ListOffsets v7+).
pub const MAX_TIMESTAMP: i64 = -3;

/// The highest version of each API this client implements (the version used is the highest
/// both sides speak, up to this). Fetch and Produce stop at 12: from 13 on they name topics by
/// id only.
const FETCH_MAX: i16 = 12;
const PRODUCE_MAX: i16 = 12;
const METADATA_MAX: i16 = 12;
const LIST_OFFSETS_MAX: i16 = 10;

/// Default CA bundle when `ssl.ca.location` is not given (Debian's).
const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// One partition as Metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// Partition index.
    pub partition: i32,
    /// Leader's broker id, -1 while there is none.
    pub leader: i32,
    /// Leader epoch (-1 when unknown).
    pub leader_epoch: i32,
    /// Replica broker ids.
    pub replicas: Vec<i32>,
    /// In-sync replica broker ids.
    pub isr: Vec<i32>,
    /// Offline replica broker ids.
    pub offline: Vec<i32>,
    /// The partition's error code in Metadata (0, or e.g. LEADER_NOT_AVAILABLE).
    pub error_code: i16,
}

/// One topic as Metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Topic name.
    pub name: String,
    /// Whether Kafka marks it internal (`__consumer_offsets`, `__transaction_state`).
    pub internal: bool,
    /// Partitions in index order.
    pub partitions: Vec<PartitionMetadata>,
}

/// The cluster as one Metadata response describes it.
#[derive(Clone, Debug)]
pub struct ClusterMetadata {
    /// Cluster id, if the broker reports one.
    pub cluster_id: Option<String>,
    /// The controller's broker id (-1 when unknown).
    pub controller: i32,
    /// Brokers by id.
    pub brokers: BTreeMap<i32, BrokerAddr>,
    /// Topics by name (topics Metadata reported with an error are left out).
    pub topics: BTreeMap<String, TopicMetadata>,
    /// When this was fetched.
    pub fetched_at: Instant,
}

impl ClusterMetadata {
    /// The partition's metadata, if the topic and partition exist.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionMetadata> {
        self.topics.get(topic)?.partitions.iter().find(|p| p.partition == partition)
    }
}

/// ListOffsets' answer for one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListedOffset {
    /// The offset.
    pub offset: Offset,
    /// The record's timestamp for timestamp lookups (-1 for earliest/latest).
    pub timestamp: Timestamp,
}

/// One aborted transaction in a read-committed Fetch response: the producer's records from
/// `first_offset` up to its abort marker are to be dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTransaction {
    /// Producer id of the aborted transaction.
    pub producer_id: i64,
    /// First offset of the aborted transaction.
    pub first_offset: Offset,
}

/// What a Fetch returned for one partition.
#[derive(Clone, Debug)]
pub struct FetchedPartition {
    /// The record-batch bytes as the broker sent them: whole v2 (or legacy) batches, possibly
    /// followed by a partial batch cut at the size limit, which the caller drops. May start
    /// with a batch whose base offset is below the fetch offset (a batch is never split).
    pub records: Bytes,
    /// High watermark: the offset after the last replicated record.
    pub high_watermark: Offset,
    /// Last stable offset (-1 when the broker does not say): read-committed reads stop here.
    pub last_stable_offset: Offset,
    /// Log start offset (-1 when the broker does not say).
    pub log_start_offset: Offset,
    /// Aborted transactions overlapping the returned batches (read-committed only).
    pub aborted_transactions: Vec<AbortedTransaction>,
}

/// Options of one Fetch.
#[derive(Clone, Copy, Debug)]
pub struct FetchOptions {
    /// Bytes this partition may return (`max.partition.fetch.bytes` when `None`).
    pub max_bytes: Option<i32>,
    /// How long the broker may wait for data (0: answer at once). Kept below the deadline.
    pub max_wait: Duration,
    /// `isolation.level` when `None`.
    pub isolation: Option<IsolationLevel>,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions { max_bytes: None, max_wait: Duration::ZERO, isolation: None }
    }
}

/// What a Produce returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Produced {
    /// Offset of the first record (-1 with `acks=0`, which gets no answer).
    pub base_offset: Offset,
    /// The broker's append time for LogAppendTime topics, else -1.
    pub log_append_time: Timestamp,
}

/// A committed group offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The committed offset: the next record to consume (-1: none committed).
    pub offset: i64,
    /// Commit metadata.
    pub metadata: Option<String>,
}

/// A group as ListGroups lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupListing {
    /// Group id.
    pub group_id: String,
    /// Protocol type (`consumer`, or empty for offsets-only groups).
    pub protocol_type: String,
    /// State (ListGroups v4+; empty before).
    pub state: String,
}

/// One member of a described group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMember {
    /// Member id.
    pub member_id: String,
    /// Its client.id.
    pub client_id: String,
    /// Its host.
    pub client_host: String,
}

/// A group as DescribeGroups describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    /// Group id.
    pub group_id: String,
    /// State (`Empty`, `Stable`, `Dead`, ...).
    pub state: String,
    /// Protocol type.
    pub protocol_type: String,
    /// Protocol (assignor) name.
    pub protocol: String,
    /// Members.
    pub members: Vec<GroupMember>,
}

/// The producer id and epoch of this client's idempotent session.
#[derive(Clone, Copy, Debug)]
struct ProducerSession {
    id: i64,
    epoch: i16,
    /// Distinguishes sessions so per-partition sequences of an older one restart at 0.
    generation: u64,
}

/// Per-partition produce state: held for a whole produce (one in flight per partition).
#[derive(Debug, Default)]
struct PartitionSequence {
    generation: u64,
    next: i32,
}

type Slot = Arc<Mutex<Option<Arc<Connection>>>>;

/// Per-partition produce state, by (topic, partition).
type Sequences = HashMap<(String, i32), Arc<Mutex<PartitionSequence>>>;

/// One ListOffsets question: (topic, partition, timestamp or [`LATEST`]/[`EARLIEST`]/...).
pub type OffsetQuery = (String, i32, i64);

/// A question and its answer (`None`: no record at or after the timestamp).
pub type OffsetAnswer = (OffsetQuery, Result<Option<ListedOffset>>);

/// The client. See the module docs for its invariants.
pub struct Client {
    config: Arc<ClientConfig>,
    bootstrap: Vec<BrokerAddr>,
    tls: Option<Arc<rustls::ClientConfig>>,
    slots: Mutex<HashMap<BrokerAddr, Slot>>,
    metadata: Mutex<Option<Arc<ClusterMetadata>>>,
    refresh_lock: Mutex<()>,
    producer: Mutex<Option<ProducerSession>>,
    next_generation: Mutex<u64>,
    sequences: Mutex<Sequences>,
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn ms_i32(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// The rustls configuration for `config` (None for PLAINTEXT and SASL_PLAINTEXT).
pub fn tls_config(config: &ClientConfig) -> Result<Option<Arc<rustls::ClientConfig>>> {
    if !config.security_protocol.tls() {
        return Ok(None);
    }
    let path = config.ssl_ca_location.clone().unwrap_or_else(|| SYSTEM_CA_BUNDLE.into());
    let bad =
        |what: String| Error::InvalidInput(format!("ssl.ca.location {}: {what}", path.display()));
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(&path).map_err(|e| bad(e.to_string()))?;
    for cert in certs {
        let cert = cert.map_err(|e| bad(e.to_string()))?;
        roots.add(cert).map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad("no PEM certificate in the file".into()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Some(Arc::new(tls)))
}

impl Client {
    /// A client for the cluster behind `bootstrap`; fetches metadata once, so a cluster that
    /// does not answer (or refuses the credentials) fails here, within `request.timeout.ms`.
    pub fn connect(bootstrap: Vec<BrokerAddr>, config: ClientConfig) -> Result<Client> {
        config.validate()?;
        let tls = tls_config(&config)?;
        let client = Client {
            config: Arc::new(config),
            bootstrap,
            tls,
            slots: Mutex::new(HashMap::new()),
            metadata: Mutex::new(None),
            refresh_lock: Mutex::new(()),
            producer: Mutex::new(None),
            next_generation: Mutex::new(1),
            sequences: Mutex::new(HashMap::new()),
        };
        client.refresh_metadata(client.deadline())?;
        Ok(client)
    }

    /// The settings.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.config.request_timeout
    }

    fn timeout_ms(&self) -> u64 {
        self.config.request_timeout.as_millis() as u64
    }

    /// Fills the elapsed deadline into a timeout error.
    fn with_timeout(&self, e: Error) -> Error {
        match e {
            Error::Timeout { broker, what, .. } => {
                Error::Timeout { broker, what, after_ms: self.timeout_ms() }
            }
            e => e,
        }
    }

    /// The shared connection to `addr`, opened (or reopened after it died) if needed.
    fn conn(&self, addr: &BrokerAddr, deadline: Instant) -> Result<Arc<Connection>> {
        let slot = Arc::clone(lock(&self.slots).entry(addr.clone()).or_default());
        let mut slot = lock(&slot);
        if let Some(c) = slot.as_ref().filter(|c| !c.is_dead()) {
            return Ok(Arc::clone(c));
        }
        *slot = None;
        let c = Arc::new(Connection::open(addr, &self.config, self.tls.as_ref(), deadline)?);
        *slot = Some(Arc::clone(&c));
        Ok(c)
    }

    /// The connection to broker `id` per the metadata.
    fn broker_conn(
        &self,
        md: &ClusterMetadata,
        id: i32,
        deadline: Instant,
    ) -> Result<Arc<Connection>> {
        let addr = md.brokers.get(&id).ok_or_else(|| {
            kafka_error(
                &format!("node {id}"),
                "Metadata",
                5,
                None,
                None,
                Some(format!("broker {id} not in metadata")),
            )
        })?;
        self.conn(addr, deadline)
    }

    /// A connection to any broker: the known ones first, then the bootstrap list.
    fn any_conn(&self, deadline: Instant) -> Result<Arc<Connection>> {
        let mut candidates: Vec<BrokerAddr> = lock(&self.metadata)
            .as_ref()
            .map(|m| m.brokers.values().cloned().collect())
            .unwrap_or_default();
        for b in &self.bootstrap {
            if !candidates.contains(b) {
                candidates.push(b.clone());
            }
        }
        let mut last = None;
        for addr in &candidates {
            match self.conn(addr, deadline) {
                Ok(c) => return Ok(c),
                // Wrong credentials are wrong on every broker.
                Err(e @ Error::AuthFailed { .. }) => return Err(e),
                Err(e) => {
                    log::debug!("broker {addr}: {e}");
                    last = Some(e);
                }
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        let all: Vec<String> = candidates.iter().map(ToString::to_string).collect();
        Err(match last {
            Some(Error::BrokerUnreachable { op, source, .. }) => {
                Error::BrokerUnreachable { broker: all.join(","), op, source }
            }
            Some(Error::Timeout { what, .. }) => {
                Error::Timeout { broker: all.join(","), what, after_ms: self.timeout_ms() }
            }
            Some(e) => e,
            None => Error::Timeout {
                broker: all.join(","),
                what: "connect".into(),
                after_ms: self.timeout_ms(),
            },
        })
    }

    /// Cached metadata, refreshed if older than `metadata.max.age.ms`.
    pub fn metadata(&self) -> Result<Arc<ClusterMetadata>> {
        self.metadata_by(self.deadline()).map_err(|e| self.with_timeout(e))
    }

    fn metadata_by(&self, deadline: Instant) -> Result<Arc<ClusterMetadata>> {
        if let Some(md) = lock(&self.metadata).as_ref()
            && md.fetched_at.elapsed() < self.config.metadata_max_age
        {
            return Ok(Arc::clone(md));
        }
        self.refresh_metadata(deadline)
    }

    /// The cached metadata without any request (None before the first Metadata).
    pub fn cached_metadata(&self) -> Option<Arc<ClusterMetadata>> {
        lock(&self.metadata).clone()
    }

    /// Fetches metadata for all topics now. Concurrent callers share one request.
    pub fn refresh_metadata(&self, deadline: Instant) -> Result<Arc<ClusterMetadata>> {
        let asked = Instant::now();
        let _single = lock(&self.refresh_lock);
        if let Some(md) = lock(&self.metadata).as_ref()
            && md.fetched_at >= asked
        {
            return Ok(Arc::clone(md));
        }
        let conn = self.any_conn(deadline)?;
        let version = conn.version::<MetadataRequest>(METADATA_MAX)?;
        let req =
            MetadataRequest::default().with_topics(None).with_allow_auto_topic_creation(false);
        let r = conn.call(&req, version, deadline)?;
        let mut topics = BTreeMap::new();
        for t in r.topics {
            let Some(tname) = t.name else { continue };
            if t.error_code != 0 {
                log::debug!(
                    "Metadata from {}: topic {}: error {}",
                    conn.addr(),
                    tname.0.as_str(),
                    t.error_code
                );
                continue;
            }
            let mut partitions: Vec<PartitionMetadata> = t
                .partitions
                .into_iter()
                .map(|p| PartitionMetadata {
                    partition: p.partition_index,
                    leader: p.leader_id.0,
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                    isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                    offline: p.offline_replicas.iter().map(|b| b.0).collect(),
                    error_code: p.error_code,
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            let tname = tname.0.to_string();
            topics.insert(
                tname.clone(),
                TopicMetadata { name: tname, internal: t.is_internal, partitions },
            );
        }
        let brokers = r
            .brokers
            .into_iter()
            .filter_map(|b| {
                let port = u16::try_from(b.port).ok()?;
                Some((b.node_id.0, BrokerAddr { host: b.host.to_string(), port }))
            })
            .collect();
        let md = Arc::new(ClusterMetadata {
            cluster_id: r.cluster_id.map(|c| c.to_string()),
            controller: r.controller_id.0,
            brokers,
            topics,
            fetched_at: Instant::now(),
        });
        *lock(&self.metadata) = Some(Arc::clone(&md));
        Ok(md)
    }

    /// Runs `op` until it succeeds, fails with an error not worth retrying, or the deadline
    /// comes; retriable errors refresh metadata first. Returns the last error.
    fn retry<T>(
        &self,
        what: &str,
        deadline: Instant,
        mut op: impl FnMut(Instant) -> Result<T>,
    ) -> Result<T> {
        let mut backoff = Duration::from_millis(50);
        loop {
            match op(deadline) {
                Ok(v) => return Ok(v),
                Err(e) if retriable(&e) && Instant::now() + backoff < deadline => {
                    log::debug!("{what}: {e}; refreshing metadata and retrying");
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    // A failure to refresh is the next attempt's problem (it fails the same way).
                    if let Err(e) = self.refresh_metadata(deadline) {
                        log::debug!("{what}: metadata refresh failed: {e}");
                    }
                }
                Err(e) => return Err(self.with_timeout(e)),
            }
        }
    }

    /// The partition's leader connection; `NotFound` when a fresh Metadata does not list the
    /// topic or partition.
    fn leader(&self, topic: &str, partition: i32, deadline: Instant) -> Result<Arc<Connection>> {
        let mut md = self.metadata_by(deadline)?;
        if md.partition(topic, partition).is_none()
            && md.fetched_at.elapsed() > Duration::from_millis(10)
        {
            md = self.refresh_metadata(deadline)?;
        }
        let p = md.partition(topic, partition).ok_or_else(|| {
            if md.topics.contains_key(topic) {
                Error::NotFound(format!("partition {partition} of topic {topic}"))
            } else {
                Error::NotFound(format!("topic {topic}"))
            }
        })?;
        if p.leader < 0 {
            return Err(kafka_error("-", "Metadata", 5, Some(topic), Some(partition), None));
        }
        self.broker_conn(&md, p.leader, deadline)
    }

    /// ListOffsets for one partition: `timestamp` is a time in ms or [`LATEST`], [`EARLIEST`],
    /// [`MAX_TIMESTAMP`]. `None` when no record has a timestamp at or after `timestamp`.
    pub fn list_offset(
        &self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> Result<Option<ListedOffset>> {
        let mut r = self.list_offsets(&[(topic.to_string(), partition, timestamp)])?;
        r.pop().ok_or_else(|| Error::NotFound(format!("{topic}/{partition}")))?.1
    }

    /// ListOffsets for many partitions: one request per leader broker per round; partitions
    /// whose answer is retriable are asked again after a metadata refresh, within one deadline.
    /// Results are in the order asked.
    pub fn list_offsets(&self, queries: &[(String, i32, i64)]) -> Result<Vec<OffsetAnswer>> {
        let deadline = self.deadline();
        let mut results: Vec<Option<Result<Option<ListedOffset>>>> =
            queries.iter().map(|_| None).collect();
        let mut backoff = Duration::from_millis(50);
        loop {
            let todo: Vec<usize> =
                (0..queries.len()).filter(|&i| !matches!(results[i], Some(Ok(_)))).collect();
            let todo: Vec<usize> = todo
                .into_iter()
                .filter(|&i| results[i].as_ref().is_none_or(|r| r.as_ref().is_err_and(retriable)))
                .collect();
            if todo.is_empty() {
                break;
            }
            if results.iter().any(Option::is_some) {
                if Instant::now() + backoff >= deadline {
                    break;
                }
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(1));
                if let Err(e) = self.refresh_metadata(deadline) {
                    log::debug!("ListOffsets: metadata refresh failed: {e}");
                }
            }
            // Group by leader.
            let md = self.metadata_by(deadline)?;
            let mut by_leader: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
            for i in todo {
                let (topic, partition, _) = &queries[i];
                match md.partition(topic, *partition) {
                    None => {
                        // Refresh once before calling it missing.
                        let fresh = self.refresh_metadata(deadline)?;
                        match fresh.partition(topic, *partition) {
                            None => {
                                results[i] =
                                    Some(Err(Error::NotFound(format!("{topic}/{partition}"))))
                            }
                            Some(p) => by_leader.entry(p.leader).or_default().push(i),
                        }
                    }
                    Some(p) => by_leader.entry(p.leader).or_default().push(i),
                }
            }
            for (leader, idx) in by_leader {
                if leader < 0 {
                    for i in idx {
                        let (t, p, _) = &queries[i];
                        results[i] =
                            Some(Err(kafka_error("-", "ListOffsets", 5, Some(t), Some(*p), None)));
                    }
                    continue;
                }
                match self.list_offsets_on(&md, leader, queries, &idx, deadline) {
                    Ok(answers) => {
                        for (i, r) in answers {
                            results[i] = Some(r);
                        }
                    }
                    Err(e) if retriable(&e) => {
                        let msg = e.to_string();
                        for i in idx {
                            results[i] = Some(Err(Error::BrokerUnreachable {
                                broker: format!("node {leader}"),
                                op: "ListOffsets".into(),
                                source: std::io::Error::other(msg.clone()),
                            }));
                        }
                    }
                    Err(e) => return Err(self.with_timeout(e)),
                }
            }
        }
        Ok(queries
            .iter()
            .cloned()
            .zip(results)
            .map(|(q, r)| {
                let r = r.unwrap_or_else(|| Err(Error::NotFound(format!("{}/{}", q.0, q.1))));
                (q, r.map_err(|e| self.with_timeout(e)))
            })
            .collect())
    }

    fn list_offsets_on(
        &self,
        md: &ClusterMetadata,
        leader: i32,
        queries: &[(String, i32, i64)],
        idx: &[usize],
        deadline: Instant,
    ) -> Result<Vec<(usize, Result<Option<ListedOffset>>)>> {
        let conn = self.broker_conn(md, leader, deadline)?;
        let version = conn.version::<ListOffsetsRequest>(LIST_OFFSETS_MAX)?;
        let mut topics: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
        for &i in idx {
            let (t, p, ts) = &queries[i];
            if *ts == MAX_TIMESTAMP && version < 7 {
                return Err(Error::UnsupportedApi {
                    broker: conn.addr().to_string(),
                    api: "ListOffsets",
                    why: format!(
                        "the max-timestamp lookup (-3) needs v7, the broker speaks v{version}"
                    ),
                });
            }
            topics.entry(t).or_default().push(
                ListOffsetsPartition::default()
                    .with_partition_index(*p)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(*ts),
            );
        }
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(self.config.isolation_level.wire())
            .with_timeout_ms(ms_i32(self.config.request_timeout))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, ps)| {
                        ListOffsetsTopic::default().with_name(name(t)).with_partitions(ps)
                    })
                    .collect(),
            );
        let r = conn.call(&req, version, deadline)?;
        let broker = conn.addr().to_string();
        let mut out = Vec::new();
        for &i in idx {
            let (t, p, _) = &queries[i];
            let answer = r
                .topics
                .iter()
                .filter(|rt| rt.name.0.as_str() == t)
                .flat_map(|rt| rt.partitions.iter())
                .find(|rp| rp.partition_index == *p);
            let res = match answer {
                None => Err(Error::Protocol {
                    broker: broker.clone(),
                    what: format!("ListOffsets without {t}/{p}"),
                }),
                Some(rp) if rp.error_code != 0 => {
                    Err(kafka_error(&broker, "ListOffsets", rp.error_code, Some(t), Some(*p), None))
                }
                Some(rp) if rp.offset < 0 => Ok(None),
                Some(rp) => {
                    Ok(Some(ListedOffset { offset: Offset(rp.offset), timestamp: rp.timestamp }))
                }
            };
            out.push((i, res));
        }
        Ok(out)
    }

    /// Fetch from one partition at `offset`. OFFSET_OUT_OF_RANGE becomes
    /// [`Error::OffsetOutOfRange`] with the log start and end offsets.
    pub fn fetch(
        &self,
        topic: &str,
        partition: i32,
        offset: Offset,
        opts: FetchOptions,
    ) -> Result<FetchedPartition> {
        let deadline = self.deadline();
        let result = self.retry("Fetch", deadline, |deadline| {
            self.fetch_once(topic, partition, offset, opts, deadline)
        });
        match result {
            Err(Error::Kafka { code: 1, .. }) => {
                let start =
                    self.list_offset(topic, partition, EARLIEST)?.map_or(Offset(0), |o| o.offset);
                let end =
                    self.list_offset(topic, partition, LATEST)?.map_or(Offset(0), |o| o.offset);
                Err(Error::OffsetOutOfRange { requested: offset, log_start: start, log_end: end })
            }
            other => other,
        }
    }

    fn fetch_once(
        &self,
        topic: &str,
        partition: i32,
        offset: Offset,
        opts: FetchOptions,
        deadline: Instant,
    ) -> Result<FetchedPartition> {
        let conn = self.leader(topic, partition, deadline)?;
        let cap = if conn.fetch_untagged() { 11 } else { FETCH_MAX };
        let version = conn.version::<FetchRequest>(cap)?;
        let partition_max = opts.max_bytes.unwrap_or(self.config.max_partition_fetch_bytes);
        // The broker's wait must end well before our deadline.
        let room = deadline.saturating_duration_since(Instant::now()) / 2;
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(ms_i32(opts.max_wait.min(room)))
            .with_min_bytes(if opts.max_wait.is_zero() { 0 } else { 1 })
            .with_max_bytes(self.config.fetch_max_bytes)
            .with_isolation_level(opts.isolation.unwrap_or(self.config.isolation_level).wire())
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default().with_topic(name(topic)).with_partitions(
                vec![
                FetchPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(offset.0)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(partition_max),
            ],
            )]);
        let r = match conn.call(&req, version, deadline) {
            Err(Error::Protocol { what, .. }) if version >= 12 && what.contains("Tag ") => {
                conn.set_fetch_untagged();
                let version = conn.version::<FetchRequest>(11)?;
                conn.call(&req, version, deadline)?
            }
            other => other?,
        };
        let broker = conn.addr().to_string();
        if r.error_code != 0 {
            return Err(kafka_error(
                &broker,
                "Fetch",
                r.error_code,
                Some(topic),
                Some(partition),
                None,
            ));
        }
        let p = r
            .responses
            .into_iter()
            .filter(|t| t.topic.0.as_str() == topic)
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| Error::Protocol {
                broker: broker.clone(),
                what: format!("Fetch without {topic}/{partition}"),
            })?;
        if p.error_code != 0 {
            return Err(kafka_error(
                &broker,
                "Fetch",
                p.error_code,
                Some(topic),
                Some(partition),
                None,
            ));
        }
        Ok(FetchedPartition {
            records: p.records.unwrap_or_default(),
            high_watermark: Offset(p.high_watermark),
            last_stable_offset: Offset(p.last_stable_offset),
            log_start_offset: Offset(p.log_start_offset),
            aborted_transactions: p
                .aborted_transactions
                .unwrap_or_default()
                .into_iter()
                .map(|a| AbortedTransaction {
                    producer_id: a.producer_id.0,
                    first_offset: Offset(a.first_offset),
                })
                .collect(),
        })
    }

    /// The idempotent producer session, started (InitProducerId) if there is none. `None` when
    /// idempotence is off, or on by default and the broker lacks InitProducerId (logged).
    fn producer_session(&self, deadline: Instant) -> Result<Option<ProducerSession>> {
        if !self.config.idempotent() {
            return Ok(None);
        }
        let mut session = lock(&self.producer);
        if let Some(s) = *session {
            return Ok(Some(s));
        }
        let (id, epoch) = match self.init_producer_id_by(deadline) {
            Ok(v) => v,
            Err(e @ Error::UnsupportedApi { .. }) if !self.config.idempotence_explicit => {
                log::warn!(
                    "{e}: producing without idempotence (set enable.idempotence=false to silence this)"
                );
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let mut generation = lock(&self.next_generation);
        let s = ProducerSession { id, epoch, generation: *generation };
        *generation += 1;
        *session = Some(s);
        Ok(Some(s))
    }

    /// InitProducerId for a new idempotent (non-transactional) producer: its id and epoch.
    pub fn init_producer_id(&self) -> Result<(i64, i16)> {
        self.init_producer_id_by(self.deadline()).map_err(|e| self.with_timeout(e))
    }

    fn init_producer_id_by(&self, deadline: Instant) -> Result<(i64, i16)> {
        self.retry("InitProducerId", deadline, |deadline| {
            let conn = self.any_conn(deadline)?;
            let version = conn.version::<InitProducerIdRequest>(5)?;
            let req = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(ms_i32(self.config.request_timeout))
                .with_producer_id((-1).into())
                .with_producer_epoch(-1);
            let r = conn.call(&req, version, deadline)?;
            if r.error_code != 0 {
                return Err(kafka_error(
                    &conn.addr().to_string(),
                    "InitProducerId",
                    r.error_code,
                    None,
                    None,
                    None,
                ));
            }
            Ok((r.producer_id.0, r.producer_epoch))
        })
    }

    /// Produces one already encoded batch as is (producer id, epoch and sequence included),
    /// with the same routing, retries and error mapping as [`Client::produce`]. A batch resent
    /// with the same producer id, epoch and sequence is acknowledged without a second copy.
    pub fn produce_batch(&self, topic: &str, partition: i32, batch: Bytes) -> Result<Produced> {
        let deadline = self.deadline();
        self.retry("Produce", deadline, |deadline| {
            self.produce_once(topic, partition, batch.clone(), deadline)
        })
    }

    /// Produces `records` to one partition as one batch (`compression.type`), acknowledged per
    /// `acks`. Records without a timestamp get the current time (CreateTime).
    pub fn produce<R: EncodeRecord>(
        &self,
        topic: &str,
        partition: i32,
        records: &[R],
    ) -> Result<Produced> {
        if records.is_empty() {
            return Err(Error::InvalidInput("a produce request needs at least one record".into()));
        }
        let deadline = self.deadline();
        let seq_slot =
            Arc::clone(lock(&self.sequences).entry((topic.to_string(), partition)).or_default());
        let mut seq = lock(&seq_slot);
        let count = i32::try_from(records.len())
            .map_err(|_| Error::InvalidInput("too many records".into()))?;
        let now = now_ms();
        // Encoded once per producer session: a retry within a session resends the same bytes.
        let mut encoded: Option<(u64, Bytes, i32)> = None;
        let mut resets = 0;
        let result = self.retry("Produce", deadline, |deadline| {
            loop {
                let session = self.producer_session(deadline)?;
                let generation = session.map_or(0, |s| s.generation);
                let batch = match &encoded {
                    Some((g, batch, _)) if *g == generation => batch.clone(),
                    _ => {
                        if seq.generation != generation {
                            *seq = PartitionSequence { generation, next: 0 };
                        }
                        let spec = BatchSpec {
                            compression: self.config.compression,
                            default_timestamp: now,
                            producer_id: session.map_or(-1, |s| s.id),
                            producer_epoch: session.map_or(-1, |s| s.epoch),
                            base_sequence: if session.is_some() { seq.next } else { -1 },
                            ..BatchSpec::default()
                        };
                        let bytes = format::encode_batch(&spec, records).map_err(|e| {
                            Error::InvalidInput(format!(
                                "encoding a batch for {topic}/{partition}: {e}"
                            ))
                        })?;
                        let batch = Bytes::from(bytes);
                        encoded = Some((generation, batch.clone(), spec.base_sequence));
                        batch
                    }
                };
                match self.produce_once(topic, partition, batch, deadline) {
                    // OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID,
                    // PRODUCER_FENCED: the broker lost or dropped this producer's state. Once,
                    // a new session and the same records.
                    Err(Error::Kafka { code: 45 | 47 | 59 | 90, .. })
                        if resets < 1 && session.is_some() =>
                    {
                        resets += 1;
                        *lock(&self.producer) = None;
                    }
                    other => return other,
                }
            }
        });
        match &result {
            Ok(_) => {
                if let Some((generation, _, base)) = encoded
                    && base >= 0
                {
                    *seq = PartitionSequence {
                        generation,
                        next: format::batch::increment_sequence(base, count),
                    };
                }
            }
            Err(_) if self.config.idempotent() => {
                // Whether the batch landed is unknown: the next produce starts a new session.
                *lock(&self.producer) = None;
            }
            Err(_) => {}
        }
        result
    }

    fn produce_once(
        &self,
        topic: &str,
        partition: i32,
        batch: Bytes,
        deadline: Instant,
    ) -> Result<Produced> {
        let conn = self.leader(topic, partition, deadline)?;
        let version = conn.version::<ProduceRequest>(PRODUCE_MAX)?;
        let req = ProduceRequest::default()
            .with_transactional_id(None)
            .with_acks(self.config.acks.wire())
            .with_timeout_ms(ms_i32(deadline.saturating_duration_since(Instant::now())))
            .with_topic_data(vec![
                TopicProduceData::default().with_name(name(topic)).with_partition_data(vec![
                    PartitionProduceData::default().with_index(partition).with_records(Some(batch)),
                ]),
            ]);
        if self.config.acks == Acks::None {
            conn.send_only(&req, version, deadline)?;
            return Ok(Produced { base_offset: Offset(-1), log_append_time: -1 });
        }
        let r = conn.call(&req, version, deadline)?;
        let broker = conn.addr().to_string();
        let p = r
            .responses
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partition_responses.iter())
            .find(|p| p.index == partition)
            .ok_or_else(|| Error::Protocol {
                broker: broker.clone(),
                what: format!("Produce without {topic}/{partition}"),
            })?;
        match p.error_code {
            0 => Ok(Produced {
                base_offset: Offset(p.base_offset),
                log_append_time: p.log_append_time_ms,
            }),
            // DUPLICATE_SEQUENCE_NUMBER: an earlier attempt of this very batch landed; its
            // offset is not in this answer (Kafka answers 0 with the offset instead).
            46 => {
                log::debug!(
                    "Produce to {topic}/{partition} at {broker}: a resent batch was already stored"
                );
                Ok(Produced { base_offset: Offset(-1), log_append_time: -1 })
            }
            code => {
                let message = p.error_message.as_ref().map(|m| m.to_string());
                Err(kafka_error(&broker, "Produce", code, Some(topic), Some(partition), message))
            }
        }
    }

    /// CreateTopics: `partitions` partitions, replication factor `replication.factor` or the
    /// broker's default. Returns once Metadata shows every partition with a leader (or the
    /// deadline passes; the topic exists then but may not be usable yet).
    pub fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<()> {
        let deadline = self.deadline();
        self.retry("CreateTopics", deadline, |deadline| {
            let md = self.metadata_by(deadline)?;
            let conn = match md.brokers.contains_key(&md.controller) {
                true => self.broker_conn(&md, md.controller, deadline)?,
                false => self.any_conn(deadline)?,
            };
            let version = conn.version::<CreateTopicsRequest>(7)?;
            let rf = match self.config.replication_factor {
                Some(n) => n,
                None if version >= 4 => -1,
                None => {
                    return Err(Error::InvalidInput(format!(
                        "broker {} needs replication.factor (CreateTopics v{version} has no broker default)",
                        conn.addr()
                    )));
                }
            };
            let req = CreateTopicsRequest::default()
                .with_timeout_ms(ms_i32(deadline.saturating_duration_since(Instant::now())))
                .with_topics(vec![
                    CreatableTopic::default()
                        .with_name(name(topic))
                        .with_num_partitions(partitions)
                        .with_replication_factor(rf)
                        .with_configs(
                            configs
                                .iter()
                                .map(|(k, v)| {
                                    kafka_protocol::messages::create_topics_request::CreatableTopicConfig::default()
                                        .with_name(StrBytes::from_string(k.clone()))
                                        .with_value(Some(StrBytes::from_string(v.clone())))
                                })
                                .collect(),
                        ),
                ]);
            let r = conn.call(&req, version, deadline)?;
            let broker = conn.addr().to_string();
            for t in &r.topics {
                match t.error_code {
                    0 => {}
                    36 => return Err(Error::AlreadyExists(format!("topic {topic}"))),
                    code => {
                        let message = t.error_message.as_ref().map(|m| m.to_string());
                        return Err(kafka_error(&broker, "CreateTopics", code, Some(topic), None, message));
                    }
                }
            }
            Ok(())
        })?;
        self.wait_for_leaders(topic, partitions, deadline);
        Ok(())
    }

    /// Waits (within `deadline`) until Metadata shows `count` partitions of `topic` with leaders.
    fn wait_for_leaders(&self, topic: &str, count: i32, deadline: Instant) {
        let mut backoff = Duration::from_millis(20);
        loop {
            if let Ok(md) = self.refresh_metadata(deadline)
                && let Some(t) = md.topics.get(topic)
                && t.partitions.len() >= count as usize
                && t.partitions.iter().all(|p| p.leader >= 0)
            {
                return;
            }
            if Instant::now() + backoff >= deadline {
                log::warn!(
                    "topic {topic}: created, but Metadata does not show all its leaders yet"
                );
                return;
            }
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }

    /// CreatePartitions: grows `topic` to `total` partitions. A broker that does not offer
    /// CreatePartitions (tansu 0.6) gives [`Error::UnsupportedApi`]; nothing is faked.
    pub fn create_partitions(&self, topic: &str, total: i32) -> Result<()> {
        let deadline = self.deadline();
        self.retry("CreatePartitions", deadline, |deadline| {
            let md = self.metadata_by(deadline)?;
            let conn = match md.brokers.contains_key(&md.controller) {
                true => self.broker_conn(&md, md.controller, deadline)?,
                false => self.any_conn(deadline)?,
            };
            let version = conn.version::<CreatePartitionsRequest>(3)?;
            let req = CreatePartitionsRequest::default()
                .with_timeout_ms(ms_i32(deadline.saturating_duration_since(Instant::now())))
                .with_topics(vec![
                    CreatePartitionsTopic::default()
                        .with_name(name(topic))
                        .with_count(total)
                        .with_assignments(None),
                ]);
            let r = conn.call(&req, version, deadline)?;
            for t in &r.results {
                if t.error_code != 0 {
                    let message = t.error_message.as_ref().map(|m| m.to_string());
                    return Err(kafka_error(
                        &conn.addr().to_string(),
                        "CreatePartitions",
                        t.error_code,
                        Some(topic),
                        None,
                        message,
                    ));
                }
            }
            Ok(())
        })?;
        self.wait_for_leaders(topic, total, deadline);
        Ok(())
    }

    /// FindCoordinator for a consumer group: the coordinator's connection.
    fn coordinator(&self, group: &str, deadline: Instant) -> Result<Arc<Connection>> {
        let conn = self.any_conn(deadline)?;
        let version = conn.version::<FindCoordinatorRequest>(6)?;
        let mut req = FindCoordinatorRequest::default().with_key_type(0);
        if version >= 4 {
            req = req.with_coordinator_keys(vec![StrBytes::from_string(group.to_string())]);
        } else {
            req = req.with_key(StrBytes::from_string(group.to_string()));
        }
        let r = conn.call(&req, version, deadline)?;
        let broker = conn.addr().to_string();
        let (code, message, host, port) = if version >= 4 {
            let c = r.coordinators.first().ok_or_else(|| Error::Protocol {
                broker: broker.clone(),
                what: "FindCoordinator without a coordinator".into(),
            })?;
            (c.error_code, c.error_message.clone(), c.host.clone(), c.port)
        } else {
            (r.error_code, r.error_message.clone(), r.host.clone(), r.port)
        };
        if code != 0 {
            return Err(kafka_error(
                &broker,
                "FindCoordinator",
                code,
                None,
                None,
                message.map(|m| m.to_string()),
            ));
        }
        let port = u16::try_from(port).map_err(|_| Error::Protocol {
            broker: broker.clone(),
            what: format!("coordinator port {port}"),
        })?;
        self.conn(&BrokerAddr { host: host.to_string(), port }, deadline)
    }

    /// OffsetCommit outside any group generation (generation -1, empty member id), as
    /// `kafka-consumer-groups --reset-offsets` does: the broker accepts it only while the group
    /// has no active members (else UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION, EBUSY).
    pub fn commit_offsets(
        &self,
        group: &str,
        topic: &str,
        offsets: &[(i32, i64, Option<String>)],
    ) -> Result<()> {
        let deadline = self.deadline();
        self.retry("OffsetCommit", deadline, |deadline| {
            let conn = self.coordinator(group, deadline)?;
            let version = conn.version::<OffsetCommitRequest>(9)?;
            let req = OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
                .with_generation_id_or_member_epoch(-1)
                .with_member_id(StrBytes::from_static_str(""))
                .with_retention_time_ms(-1)
                .with_topics(vec![
                    OffsetCommitRequestTopic::default().with_name(name(topic)).with_partitions(
                        offsets
                            .iter()
                            .map(|(p, o, m)| {
                                OffsetCommitRequestPartition::default()
                                    .with_partition_index(*p)
                                    .with_committed_offset(*o)
                                    .with_committed_leader_epoch(-1)
                                    .with_committed_metadata(m.clone().map(StrBytes::from_string))
                            })
                            .collect(),
                    ),
                ]);
            let r = conn.call(&req, version, deadline)?;
            for t in &r.topics {
                for p in &t.partitions {
                    if p.error_code != 0 {
                        return Err(kafka_error(
                            &conn.addr().to_string(),
                            "OffsetCommit",
                            p.error_code,
                            Some(t.name.0.as_str()),
                            Some(p.partition_index),
                            None,
                        ));
                    }
                }
            }
            Ok(())
        })
    }

    /// OffsetFetch: the group's committed offsets, for the given topics and partitions or (with
    /// `None`) for everything the group committed.
    pub fn fetch_offsets(
        &self,
        group: &str,
        topics: Option<&[(String, Vec<i32>)]>,
    ) -> Result<Vec<CommittedOffset>> {
        let deadline = self.deadline();
        self.retry("OffsetFetch", deadline, |deadline| {
            let conn = self.coordinator(group, deadline)?;
            let version = conn.version::<OffsetFetchRequest>(9)?;
            let gid = GroupId(StrBytes::from_string(group.to_string()));
            let mut req = OffsetFetchRequest::default().with_require_stable(false);
            if version >= 8 {
                let topics = topics.map(|ts| {
                    ts.iter()
                        .map(|(t, ps)| {
                            OffsetFetchRequestTopics::default()
                                .with_name(name(t))
                                .with_partition_indexes(ps.clone())
                        })
                        .collect()
                });
                req = req.with_groups(vec![
                    OffsetFetchRequestGroup::default()
                        .with_group_id(gid)
                        .with_member_epoch(-1)
                        .with_topics(topics),
                ]);
            } else {
                let topics = topics.map(|ts| {
                    ts.iter()
                        .map(|(t, ps)| {
                            OffsetFetchRequestTopic::default()
                                .with_name(name(t))
                                .with_partition_indexes(ps.clone())
                        })
                        .collect()
                });
                req = req.with_group_id(gid).with_topics(topics);
            }
            let r = conn.call(&req, version, deadline)?;
            let broker = conn.addr().to_string();
            let mut out = Vec::new();
            let check = |code: i16, topic: Option<&str>, partition: Option<i32>| {
                if code != 0 {
                    Err(kafka_error(&broker, "OffsetFetch", code, topic, partition, None))
                } else {
                    Ok(())
                }
            };
            if version >= 8 {
                for g in &r.groups {
                    check(g.error_code, None, None)?;
                    for t in &g.topics {
                        for p in &t.partitions {
                            check(p.error_code, Some(t.name.0.as_str()), Some(p.partition_index))?;
                            out.push(CommittedOffset {
                                topic: t.name.0.to_string(),
                                partition: p.partition_index,
                                offset: p.committed_offset,
                                metadata: p.metadata.as_ref().map(|m| m.to_string()),
                            });
                        }
                    }
                }
            } else {
                check(r.error_code, None, None)?;
                for t in &r.topics {
                    for p in &t.partitions {
                        check(p.error_code, Some(t.name.0.as_str()), Some(p.partition_index))?;
                        out.push(CommittedOffset {
                            topic: t.name.0.to_string(),
                            partition: p.partition_index,
                            offset: p.committed_offset,
                            metadata: p.metadata.as_ref().map(|m| m.to_string()),
                        });
                    }
                }
            }
            Ok(out)
        })
    }

    /// ListGroups on every broker, merged and sorted by group id.
    pub fn list_groups(&self) -> Result<Vec<GroupListing>> {
        let deadline = self.deadline();
        let md = self.metadata_by(deadline)?;
        let mut out = BTreeMap::new();
        for &id in md.brokers.keys() {
            let r = self.retry("ListGroups", deadline, |deadline| {
                let conn = self.broker_conn(&md, id, deadline)?;
                let version = conn.version::<ListGroupsRequest>(4)?;
                let r = conn.call(&ListGroupsRequest::default(), version, deadline)?;
                if r.error_code != 0 {
                    return Err(kafka_error(
                        &conn.addr().to_string(),
                        "ListGroups",
                        r.error_code,
                        None,
                        None,
                        None,
                    ));
                }
                Ok(r.groups)
            })?;
            for g in r {
                out.insert(
                    g.group_id.0.to_string(),
                    GroupListing {
                        group_id: g.group_id.0.to_string(),
                        protocol_type: g.protocol_type.to_string(),
                        state: g.group_state.to_string(),
                    },
                );
            }
        }
        Ok(out.into_values().collect())
    }

    /// DescribeGroups through each group's coordinator. A group the coordinator does not know
    /// is described with state `Dead` (as Kafka answers), not an error.
    pub fn describe_group(&self, group: &str) -> Result<GroupDescription> {
        let deadline = self.deadline();
        self.retry("DescribeGroups", deadline, |deadline| {
            let conn = self.coordinator(group, deadline)?;
            let version = conn.version::<DescribeGroupsRequest>(5)?;
            let req = DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(StrBytes::from_string(group.to_string()))]);
            let r = conn.call(&req, version, deadline)?;
            let broker = conn.addr().to_string();
            let g =
                r.groups.into_iter().find(|g| g.group_id.0.as_str() == group).ok_or_else(|| {
                    Error::Protocol {
                        broker: broker.clone(),
                        what: format!("DescribeGroups without {group}"),
                    }
                })?;
            if g.error_code != 0 {
                let message = g.error_message.as_ref().map(|m| m.to_string());
                return Err(kafka_error(
                    &broker,
                    "DescribeGroups",
                    g.error_code,
                    None,
                    None,
                    message,
                ));
            }
            Ok(GroupDescription {
                group_id: group.to_string(),
                state: g.group_state.to_string(),
                protocol_type: g.protocol_type.to_string(),
                protocol: g.protocol_data.to_string(),
                members: g
                    .members
                    .iter()
                    .map(|m| GroupMember {
                        member_id: m.member_id.to_string(),
                        client_id: m.client_id.to_string(),
                        client_host: m.client_host.to_string(),
                    })
                    .collect(),
            })
        })
    }

    /// Whether the connected brokers offer `api` (at any version this client speaks).
    pub fn supports(&self, api: ApiKey) -> Result<bool> {
        let conn = self.any_conn(self.deadline())?;
        Ok(conn.versions().range(api).is_some())
    }
}
