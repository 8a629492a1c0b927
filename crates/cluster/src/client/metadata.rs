//! Metadata: the cluster's brokers, topics, partitions and leaders, cached and refreshed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::messages::MetadataRequest;

use super::Client;
use crate::config::BrokerAddr;
use crate::errors::{error_name, kafka_error};
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;

/// The highest Metadata version this client implements (the version used is the highest both
/// sides speak, up to this).
const METADATA_MAX: i16 = 12;

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
    /// The broker that answered (`HOST:PORT`), named in errors the answer causes (a partition
    /// without a leader).
    pub from: String,
}

impl ClusterMetadata {
    /// The partition's metadata, if the topic and partition exist.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionMetadata> {
        self.topics.get(topic)?.partitions.iter().find(|p| p.partition == partition)
    }

    /// LEADER_NOT_AVAILABLE for `topic`/`partition`, which this Metadata lists without a leader:
    /// names the broker that said so, for `api` (the request that could not be routed), e.g.
    /// `Fetch to broker 127.0.0.1:9092 for t/0: LEADER_NOT_AVAILABLE (5): its Metadata names no leader`.
    pub fn no_leader(&self, api: &'static str, topic: &str, partition: i32) -> Error {
        let said = self.partition(topic, partition).map_or(0, |p| p.error_code);
        let message = match said {
            0 | 5 => "its Metadata names no leader".to_string(),
            code => format!("its Metadata names no leader ({})", error_name(code)),
        };
        kafka_error(&self.from, api, 5, Some(topic), Some(partition), Some(message))
    }
}

impl Client {
    /// Cached metadata, refreshed if older than `metadata.max.age.ms`.
    pub fn metadata(&self) -> Result<Arc<ClusterMetadata>> {
        self.metadata_by(self.deadline()).map_err(|e| self.with_timeout(e))
    }

    pub(super) fn metadata_by(&self, deadline: Instant) -> Result<Arc<ClusterMetadata>> {
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
            from: conn.addr().to_string(),
        });
        *lock(&self.metadata) = Some(Arc::clone(&md));
        Ok(md)
    }
}
