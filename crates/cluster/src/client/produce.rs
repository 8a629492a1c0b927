//! Produce: the idempotent producer session (InitProducerId), per-partition sequences, and
//! Produce to the partition's leader.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{InitProducerIdRequest, ProduceRequest};

use super::{Client, ms_i32, name, now_ms};
use crate::config::Acks;
use crate::errors::{check_code, kafka_error};
use topicfs_format::{self as format, BatchSpec, EncodeRecord, Offset, Timestamp};
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;

/// The highest Produce version this client implements (the version used is the highest both
/// sides speak, up to this). It stops at 12: from 13 on Produce names topics by
/// id only.
const PRODUCE_MAX: i16 = 12;

/// What a Produce returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Produced {
    /// Offset of the first record (-1 with `acks=0`, which gets no answer).
    pub base_offset: Offset,
    /// The broker's append time for LogAppendTime topics, else -1.
    pub log_append_time: Timestamp,
}

/// The producer id and epoch of this client's idempotent session.
#[derive(Clone, Copy, Debug)]
pub(super) struct ProducerSession {
    id: i64,
    epoch: i16,
    /// Distinguishes sessions so per-partition sequences of an older one restart at 0.
    generation: u64,
}

/// Per-partition produce state: held for a whole produce (one in flight per partition).
#[derive(Debug, Default)]
pub(super) struct PartitionSequence {
    generation: u64,
    next: i32,
}

/// Per-partition produce state, by (topic, partition).
pub(super) type Sequences = HashMap<(String, i32), Arc<Mutex<PartitionSequence>>>;

impl Client {
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
            let broker = conn.addr().to_string();
            check_code(&broker, "InitProducerId", r.error_code, None, None, None)?;
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
        let conn = self.leader("Produce", topic, partition, deadline)?;
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
}
