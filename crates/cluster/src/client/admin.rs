//! Admin APIs through the controller: CreateTopics and CreatePartitions.

use std::time::{Duration, Instant};

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{CreatePartitionsRequest, CreateTopicsRequest};
use kafka_protocol::protocol::StrBytes;

use super::{Client, ms_i32, name};
use crate::errors::{check_code, kafka_error};
use topicfs_source::error::{Error, Result};

impl Client {
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
            let conn = self.controller_conn(deadline)?;
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
            let conn = self.controller_conn(deadline)?;
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
            let broker = conn.addr().to_string();
            for t in &r.results {
                let message = t.error_message.as_deref();
                check_code(&broker, "CreatePartitions", t.error_code, Some(topic), None, message)?;
            }
            Ok(())
        })?;
        self.wait_for_leaders(topic, total, deadline);
        Ok(())
    }
}
