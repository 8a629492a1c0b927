//! Fetch: record batches of one partition from its leader.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest};

use super::{Client, EARLIEST, LATEST, ms_i32, name};
use crate::config::IsolationLevel;
use crate::errors::check_code;
use topicfs_format::Offset;
use topicfs_source::error::{Error, Result};

/// The highest Fetch version this client implements (the version used is the highest both
/// sides speak, up to this). It stops at 12: from 13 on Fetch names topics by
/// id only.
const FETCH_MAX: i16 = 12;

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
    /// Bytes the broker waits for (up to `max_wait`) before it answers; `None`: 1 when
    /// `max_wait` is set, else 0.
    pub min_bytes: Option<i32>,
    /// `isolation.level` when `None`.
    pub isolation: Option<IsolationLevel>,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions { max_bytes: None, max_wait: Duration::ZERO, min_bytes: None, isolation: None }
    }
}

impl Client {
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
            let f = self.fetch_once(topic, partition, offset, opts, true, deadline)?;
            if f.records.is_empty() && f.high_watermark > offset {
                // Nothing although records are there: a broker that answers nothing when the
                // first batch exceeds the response limit (tansu 0.6, unlike KIP-74's rule) is
                // asked again with the whole `fetch.max.bytes`.
                return self.fetch_once(topic, partition, offset, opts, false, deadline);
            }
            Ok(f)
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
        response_capped: bool,
        deadline: Instant,
    ) -> Result<FetchedPartition> {
        let conn = self.leader("Fetch", topic, partition, deadline)?;
        let cap = if conn.fetch_untagged() { 11 } else { FETCH_MAX };
        let version = conn.version::<FetchRequest>(cap)?;
        let partition_max = opts.max_bytes.unwrap_or(self.config.max_partition_fetch_bytes);
        // The broker's wait must end well before our deadline.
        let room = deadline.saturating_duration_since(Instant::now()) / 2;
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(ms_i32(opts.max_wait.min(room)))
            .with_min_bytes(match opts.min_bytes {
                Some(min) if !opts.max_wait.is_zero() => min.max(0),
                _ if opts.max_wait.is_zero() => 0,
                _ => 1,
            })
            // One partition per request: the response limit is the partition's (KIP-74: the
            // first batch comes whole whatever the limits). Brokers that ignore the partition
            // limit (tansu 0.6) honour this one.
            .with_max_bytes(if response_capped {
                self.config.fetch_max_bytes.min(partition_max)
            } else {
                self.config.fetch_max_bytes
            })
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
        check_code(&broker, "Fetch", r.error_code, Some(topic), Some(partition), None)?;
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
        check_code(&broker, "Fetch", p.error_code, Some(topic), Some(partition), None)?;
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
}
