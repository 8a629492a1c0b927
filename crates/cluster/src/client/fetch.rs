//! Fetch: record batches of one partition from its leader.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest};

use super::{Client, ClusterMetadata, EARLIEST, LATEST, ms_i32, name};
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

    /// One attempt at many partitions of `topic` at once: `reads` are (partition, fetch offset,
    /// partition max bytes). The partitions are grouped by leader (as the cached Metadata
    /// says) and each leader gets its part in Fetch requests carrying many partitions, each
    /// request asking at most `fetch.max.bytes` in its partitions' limits (at least one
    /// partition per request), all pipelined on the leader's connection: a round trip per
    /// broker, not per partition. Answers are in the order asked, each its partition's
    /// [`FetchedPartition`] or error. Nothing is retried and OFFSET_OUT_OF_RANGE is not
    /// looked into: the caller reads what failed through [`Client::fetch`]. No wait at the
    /// broker (`max.wait.ms` 0, `min.bytes` 0).
    pub fn fetch_many(
        &self,
        topic: &str,
        reads: &[(i32, Offset, i32)],
        isolation: IsolationLevel,
    ) -> Result<Vec<Result<FetchedPartition>>> {
        let deadline = self.deadline();
        let md = self.metadata_by(deadline)?;
        let mut out: Vec<Option<Result<FetchedPartition>>> = reads.iter().map(|_| None).collect();
        let mut by_leader: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
        for (i, (p, _, _)) in reads.iter().enumerate() {
            match md.partition(topic, *p) {
                Some(meta) if meta.leader >= 0 => by_leader.entry(meta.leader).or_default().push(i),
                Some(_) => out[i] = Some(Err(md.no_leader("Fetch", topic, *p))),
                None => out[i] = Some(Err(Error::NotFound(format!("{topic}/{p}")))),
            }
        }
        for (leader, idx) in by_leader {
            match self.fetch_many_on(&md, leader, topic, reads, &idx, isolation, deadline) {
                Ok(answers) => {
                    for (i, r) in answers {
                        out[i] = Some(r);
                    }
                }
                Err(e) => {
                    let msg = e.to_string();
                    for i in idx {
                        out[i] = Some(Err(Error::Protocol {
                            broker: format!("node {leader}"),
                            what: format!("Fetch of many partitions: {msg}"),
                        }));
                    }
                }
            }
        }
        Ok(out
            .into_iter()
            .zip(reads)
            .map(|(r, (p, _, _))| r.unwrap_or_else(|| Err(Error::NotFound(format!("{topic}/{p}")))))
            .collect())
    }

    /// The reads `idx` of `reads` from their leader `leader` (see [`Client::fetch_many`]).
    #[allow(clippy::too_many_arguments)]
    fn fetch_many_on(
        &self,
        md: &ClusterMetadata,
        leader: i32,
        topic: &str,
        reads: &[(i32, Offset, i32)],
        idx: &[usize],
        isolation: IsolationLevel,
        deadline: Instant,
    ) -> Result<Vec<(usize, Result<FetchedPartition>)>> {
        let conn = self.broker_conn(md, leader, deadline)?;
        let cap = if conn.fetch_untagged() { 11 } else { FETCH_MAX };
        let version = conn.version::<FetchRequest>(cap)?;
        let budget = i64::from(self.config.fetch_max_bytes.max(1));
        // Requests of at most `fetch.max.bytes` in partition limits: a broker that does not
        // share the response limit among partitions (tansu 0.6) still answers every one.
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut asked = 0i64;
        for &i in idx {
            let want = i64::from(reads.get(i).map_or(0, |r| r.2).max(1));
            match groups.last_mut() {
                Some(g) if !g.is_empty() && asked + want <= budget => g.push(i),
                _ => {
                    groups.push(vec![i]);
                    asked = 0;
                }
            }
            asked += want;
        }
        let reqs: Vec<FetchRequest> = groups
            .iter()
            .map(|g| {
                let partitions = g
                    .iter()
                    .filter_map(|&i| reads.get(i))
                    .map(|(p, offset, max)| {
                        FetchPartition::default()
                            .with_partition(*p)
                            .with_current_leader_epoch(-1)
                            .with_fetch_offset(offset.0)
                            .with_last_fetched_epoch(-1)
                            .with_log_start_offset(-1)
                            .with_partition_max_bytes((*max).max(1))
                    })
                    .collect();
                FetchRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_max_wait_ms(0)
                    .with_min_bytes(0)
                    .with_max_bytes(self.config.fetch_max_bytes)
                    .with_isolation_level(isolation.wire())
                    .with_session_id(0)
                    .with_session_epoch(-1)
                    .with_topics(vec![
                        FetchTopic::default().with_topic(name(topic)).with_partitions(partitions),
                    ])
            })
            .collect();
        let mut answers = conn.call_all(&reqs, version, deadline)?;
        let untagged =
            |a: &Result<_>| matches!(a, Err(Error::Protocol { what, .. }) if what.contains("Tag "));
        if version >= 12 && answers.iter().any(untagged) {
            // As in `fetch_once`: a broker whose v12 responses carry tags it may not (tansu).
            conn.set_fetch_untagged();
            let version = conn.version::<FetchRequest>(11)?;
            answers = conn.call_all(&reqs, version, deadline)?;
        }
        let broker = conn.addr().to_string();
        let mut out = Vec::with_capacity(idx.len());
        for (group, answer) in groups.iter().zip(answers) {
            let r = match answer {
                Ok(r) => r,
                Err(e) => {
                    let msg = e.to_string();
                    for &i in group {
                        let what = format!("Fetch of many partitions: {msg}");
                        out.push((i, Err(Error::Protocol { broker: broker.clone(), what })));
                    }
                    continue;
                }
            };
            let top = check_code(&broker, "Fetch", r.error_code, Some(topic), None, None);
            let mut partitions: BTreeMap<i32, _> = r
                .responses
                .into_iter()
                .filter(|t| t.topic.0.as_str() == topic)
                .flat_map(|t| t.partitions)
                .map(|p| (p.partition_index, p))
                .collect();
            for &i in group {
                let Some(&(p, _, _)) = reads.get(i) else { continue };
                if let Err(e) = &top {
                    let what = format!("Fetch: {e}");
                    out.push((i, Err(Error::Protocol { broker: broker.clone(), what })));
                    continue;
                }
                let Some(answer) = partitions.remove(&p) else {
                    let what = format!("Fetch without {topic}/{p}");
                    out.push((i, Err(Error::Protocol { broker: broker.clone(), what })));
                    continue;
                };
                let res =
                    check_code(&broker, "Fetch", answer.error_code, Some(topic), Some(p), None)
                        .map(|()| fetched(answer));
                out.push((i, res));
            }
        }
        Ok(out)
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
        Ok(fetched(p))
    }
}

/// One partition's answer in a Fetch response.
fn fetched(p: kafka_protocol::messages::fetch_response::PartitionData) -> FetchedPartition {
    FetchedPartition {
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
    }
}
