//! ListOffsets: offsets by time, the log start and end offsets, batched per leader broker.

use std::collections::BTreeMap;
use std::time::Instant;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest};

use super::{Client, ClusterMetadata, ms_i32, name};
use crate::errors::{kafka_error, retriable};
use topicfs_format::{Offset, Timestamp};
use topicfs_source::error::{Error, Result};

/// The highest ListOffsets version this client implements (the version used is the highest both
/// sides speak, up to this).
const LIST_OFFSETS_MAX: i16 = 10;

/// ListOffsets timestamp: the log end offset (`latest`).
pub const LATEST: i64 = -1;
/// ListOffsets timestamp: the log start offset (`earliest`).
pub const EARLIEST: i64 = -2;
/// ListOffsets timestamp: the offset of the record with the largest timestamp (KIP-734,
/// ListOffsets v7+).
pub const MAX_TIMESTAMP: i64 = -3;

/// ListOffsets' answer for one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListedOffset {
    /// The offset.
    pub offset: Offset,
    /// The record's timestamp for timestamp lookups (-1 for earliest/latest).
    pub timestamp: Timestamp,
}

/// One ListOffsets question: (topic, partition, timestamp or [`LATEST`]/[`EARLIEST`]/...).
pub type OffsetQuery = (String, i32, i64);

/// A question and its answer (`None`: no record at or after the timestamp).
pub type OffsetAnswer = (OffsetQuery, Result<Option<ListedOffset>>);

impl Client {
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
        let mut backoff = self.config.retry_backoff;
        // The last round's error from a broker that could not be reached, as the connection
        // gave it (naming the broker's address), for `Client::note_down`.
        let mut unreached: Option<Error> = None;
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
                    if let Some(e) = &unreached {
                        self.note_down(e);
                    }
                    break;
                }
                self.pause_and_refresh("ListOffsets", &mut backoff, deadline);
            }
            unreached = None;
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
                        results[i] = Some(Err(md.no_leader("ListOffsets", t, *p)));
                    }
                    continue;
                }
                match self.list_offsets_on(&md, leader, queries, &idx, deadline) {
                    Ok(answers) => {
                        for (i, r) in answers {
                            results[i] = Some(r);
                        }
                    }
                    Err(e) if self.names_only_down_brokers(&e) => return Err(self.with_timeout(e)),
                    Err(e) if retriable(&e) => {
                        let msg = e.to_string();
                        for i in idx {
                            results[i] = Some(Err(Error::BrokerUnreachable {
                                broker: format!("node {leader}"),
                                op: "ListOffsets".into(),
                                source: std::io::Error::other(msg.clone()),
                            }));
                        }
                        unreached = Some(e);
                    }
                    Err(e) => {
                        self.note_down(&e);
                        return Err(self.with_timeout(e));
                    }
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

    /// The questions `idx` of `queries` to the broker `leader`: one ListOffsets request per
    /// round of distinct partitions (Kafka refuses a request naming a partition twice, and
    /// tansu answers both with the first), all rounds pipelined on the connection, so the log
    /// start and end of a partition cost one round trip.
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
        // Round r holds each partition's r-th question.
        let mut rounds: Vec<Vec<usize>> = Vec::new();
        let mut seen: BTreeMap<(&str, i32), usize> = BTreeMap::new();
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
            let round = seen.entry((t.as_str(), *p)).or_default();
            if *round == rounds.len() {
                rounds.push(Vec::new());
            }
            if let Some(r) = rounds.get_mut(*round) {
                r.push(i);
            }
            *round += 1;
        }
        let reqs: Vec<ListOffsetsRequest> =
            rounds.iter().map(|round| self.list_offsets_request(queries, round)).collect();
        let answers = conn.call_all(&reqs, version, deadline)?;
        let broker = conn.addr().to_string();
        let mut out = Vec::new();
        for (round, r) in rounds.iter().zip(answers) {
            let r = r?;
            for &i in round {
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
                    Some(rp) if rp.error_code != 0 => Err(kafka_error(
                        &broker,
                        "ListOffsets",
                        rp.error_code,
                        Some(t),
                        Some(*p),
                        None,
                    )),
                    Some(rp) if rp.offset < 0 => Ok(None),
                    Some(rp) => Ok(Some(ListedOffset {
                        offset: Offset(rp.offset),
                        timestamp: rp.timestamp,
                    })),
                };
                out.push((i, res));
            }
        }
        Ok(out)
    }

    /// One ListOffsets request for the questions `round` of `queries` (distinct partitions).
    fn list_offsets_request(
        &self,
        queries: &[(String, i32, i64)],
        round: &[usize],
    ) -> ListOffsetsRequest {
        let mut topics: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
        for &i in round {
            let (t, p, ts) = &queries[i];
            topics.entry(t).or_default().push(
                ListOffsetsPartition::default()
                    .with_partition_index(*p)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(*ts),
            );
        }
        ListOffsetsRequest::default()
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
            )
    }
}
