//! The settings a KRaft broker's metadata log holds: the replay of its records
//! ([`topicfs_format::metadata_record`]) as Kafka's `MetadataLoader` builds its image, as far as
//! topic settings go. Pure: the records come from whoever reads the log (the storage engine's
//! `cluster_metadata` reader walks the snapshot and the segments and feeds [`Image::replay`]).
//!
//! - `TopicRecord` maps a topic id to its name; `RemoveTopicRecord` forgets the topic and
//!   deletes its configs (`ConfigurationsDelta.replay(RemoveTopicRecord)`);
//! - `ConfigRecord` sets or (value null) deletes one setting of a resource: TOPIC (by name,
//!   topic-level names), BROKER with an empty name (the cluster-wide dynamic default) or with
//!   a node id (that broker's own, which wins over the cluster default for that broker); other
//!   resource types are ignored;
//! - records between a `BeginTransactionRecord` and its `EndTransactionRecord` take effect at
//!   the end, all together; an `AbortTransactionRecord` drops them; a transaction still open
//!   at the end of the log has no effect yet (`MetadataBatchLoader`).

use std::collections::{BTreeMap, BTreeSet};

use topicfs_format::metadata_record::{MetadataRecord, RESOURCE_BROKER, RESOURCE_TOPIC, TopicId};

use crate::server_properties::broker_defaults_to_topic_settings;

/// What a KRaft broker's metadata log holds for topic settings, in TOPIC-level names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterMetadataConfigs {
    /// Every topic the metadata knows (a `TopicRecord` not removed since), by name, with its
    /// overrides (`ConfigRecord`s of resource TOPIC); an empty map means known, no overrides.
    pub topics: BTreeMap<String, BTreeMap<String, String>>,
    /// The cluster-wide dynamic broker defaults (resource BROKER, empty name) with this
    /// broker's own (resource BROKER, name = node id) over them, mapped from broker names
    /// (`log.retention.ms`) to topic-level names (`retention.ms`); broker settings that are no
    /// topic setting are left out.
    pub dynamic_defaults: BTreeMap<String, String>,
}

/// The replayed metadata, as far as settings go.
#[derive(Debug, Default)]
pub struct Image {
    /// Topic id to name, for every topic not removed.
    topics: BTreeMap<TopicId, String>,
    /// Topic name to the number of ids in `topics` with that name (one, unless a topic was
    /// created again without its removal in between).
    names: BTreeMap<String, usize>,
    /// (resource type, resource name) to its settings, for TOPIC and BROKER resources.
    resources: BTreeMap<(i8, String), BTreeMap<String, String>>,
    /// Topics whose entry in [`ClusterMetadataConfigs::topics`] may differ since
    /// [`Image::take_touched`] was last called.
    touched_topics: BTreeSet<String>,
    /// Whether a BROKER resource changed since then.
    touched_broker: bool,
    /// The records of a metadata transaction begun and not yet ended.
    transaction: Option<Vec<MetadataRecord>>,
}

impl Image {
    /// Replays one record; `Err` says why it was skipped.
    pub fn replay(&mut self, record: MetadataRecord) -> std::result::Result<(), &'static str> {
        match record {
            MetadataRecord::BeginTransaction => {
                if self.transaction.is_some() {
                    return Err("BeginTransactionRecord inside a transaction");
                }
                self.transaction = Some(Vec::new());
            }
            MetadataRecord::EndTransaction => {
                let records = self
                    .transaction
                    .take()
                    .ok_or("EndTransactionRecord without a BeginTransactionRecord")?;
                for r in records {
                    self.apply(r)?;
                }
            }
            MetadataRecord::AbortTransaction => {
                self.transaction
                    .take()
                    .ok_or("AbortTransactionRecord without a BeginTransactionRecord")?;
            }
            other => match &mut self.transaction {
                Some(pending) => pending.push(other),
                None => self.apply(other)?,
            },
        }
        Ok(())
    }

    fn apply(&mut self, record: MetadataRecord) -> std::result::Result<(), &'static str> {
        match record {
            MetadataRecord::Topic { name, topic_id } => {
                if let Some(old) = self.topics.insert(topic_id, name.clone()) {
                    self.forget_name(old);
                }
                *self.names.entry(name.clone()).or_default() += 1;
                self.touched_topics.insert(name);
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                let name = self
                    .topics
                    .remove(&topic_id)
                    .ok_or("RemoveTopicRecord of an unknown topic id")?;
                self.resources.remove(&(RESOURCE_TOPIC, name.clone()));
                self.forget_name(name);
            }
            MetadataRecord::Config { resource_type, resource_name, name, value }
                if resource_type == RESOURCE_TOPIC || resource_type == RESOURCE_BROKER =>
            {
                if resource_type == RESOURCE_TOPIC {
                    self.touched_topics.insert(resource_name.clone());
                } else {
                    self.touched_broker = true;
                }
                let key = (resource_type, resource_name);
                match value {
                    Some(value) => {
                        self.resources.entry(key).or_default().insert(name, value);
                    }
                    None => {
                        if let Some(settings) = self.resources.get_mut(&key) {
                            settings.remove(&name);
                            if settings.is_empty() {
                                self.resources.remove(&key);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Forgets a transaction left open by a snapshot: a snapshot holds whole transactions
    /// only, so what follows its footer starts with none open.
    pub fn end_snapshot(&mut self) {
        self.transaction = None;
    }

    /// One id fewer carries `name`.
    fn forget_name(&mut self, name: String) {
        if let Some(n) = self.names.get_mut(&name) {
            *n -= 1;
            if *n == 0 {
                self.names.remove(&name);
            }
        }
        self.touched_topics.insert(name);
    }

    /// The topics and whether the broker settings changed since the last call.
    pub fn take_touched(&mut self) -> (BTreeSet<String>, bool) {
        (std::mem::take(&mut self.touched_topics), std::mem::take(&mut self.touched_broker))
    }

    /// `name`'s entry in [`ClusterMetadataConfigs::topics`]: `None` if no topic has that name.
    fn topic_configs(&self, name: &str) -> Option<BTreeMap<String, String>> {
        self.names.contains_key(name).then(|| {
            self.resources.get(&(RESOURCE_TOPIC, name.to_string())).cloned().unwrap_or_default()
        })
    }

    fn dynamic_defaults(&self, node_id: Option<i32>) -> BTreeMap<String, String> {
        let mut broker =
            self.resources.get(&(RESOURCE_BROKER, String::new())).cloned().unwrap_or_default();
        if let Some(own) =
            node_id.and_then(|id| self.resources.get(&(RESOURCE_BROKER, id.to_string())))
        {
            broker.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        broker_defaults_to_topic_settings(&broker)
    }

    /// Brings `configs` up to date with the changes since [`Image::take_touched`] was last
    /// called, touching only what changed; whether anything did.
    pub fn update(&mut self, configs: &mut ClusterMetadataConfigs, node_id: Option<i32>) -> bool {
        let (topics, broker) = self.take_touched();
        let mut changed = false;
        for name in topics {
            let now = self.topic_configs(&name);
            if configs.topics.get(&name) != now.as_ref() {
                changed = true;
                match now {
                    Some(settings) => configs.topics.insert(name, settings),
                    None => configs.topics.remove(&name),
                };
            }
        }
        if broker {
            let now = self.dynamic_defaults(node_id);
            if now != configs.dynamic_defaults {
                changed = true;
                configs.dynamic_defaults = now;
            }
        }
        changed
    }

    /// The whole image as [`ClusterMetadataConfigs`], `node_id`'s own BROKER settings over
    /// the cluster default.
    pub fn configs(&self, node_id: Option<i32>) -> ClusterMetadataConfigs {
        let topics = self
            .names
            .keys()
            .map(|name| {
                let settings = self
                    .resources
                    .get(&(RESOURCE_TOPIC, name.clone()))
                    .cloned()
                    .unwrap_or_default();
                (name.clone(), settings)
            })
            .collect();
        ClusterMetadataConfigs { topics, dynamic_defaults: self.dynamic_defaults(node_id) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str, id: u8) -> MetadataRecord {
        MetadataRecord::Topic { name: name.into(), topic_id: [id; 16] }
    }

    fn config(
        resource_type: i8,
        resource: &str,
        name: &str,
        value: Option<&str>,
    ) -> MetadataRecord {
        MetadataRecord::Config {
            resource_type,
            resource_name: resource.into(),
            name: name.into(),
            value: value.map(str::to_string),
        }
    }

    fn replay_all(image: &mut Image, records: Vec<MetadataRecord>) {
        for r in records {
            image.replay(r).unwrap();
        }
    }

    #[test]
    fn a_transaction_takes_effect_at_its_end_and_an_aborted_one_never() {
        let mut image = Image::default();
        replay_all(
            &mut image,
            vec![
                topic("t", 1),
                MetadataRecord::BeginTransaction,
                config(RESOURCE_TOPIC, "t", "retention.ms", Some("5")),
            ],
        );
        assert_eq!(image.configs(None).topics["t"], BTreeMap::new(), "open: no effect yet");
        image.replay(MetadataRecord::EndTransaction).unwrap();
        assert_eq!(image.configs(None).topics["t"]["retention.ms"], "5");
        replay_all(
            &mut image,
            vec![
                MetadataRecord::BeginTransaction,
                config(RESOURCE_TOPIC, "t", "retention.ms", Some("9")),
                MetadataRecord::AbortTransaction,
            ],
        );
        assert_eq!(image.configs(None).topics["t"]["retention.ms"], "5");
        assert!(image.replay(MetadataRecord::EndTransaction).is_err(), "end without a begin");
    }

    #[test]
    fn removing_a_topic_forgets_its_settings_and_a_broker_s_own_settings_win() {
        let mut image = Image::default();
        replay_all(
            &mut image,
            vec![
                topic("t", 1),
                config(RESOURCE_TOPIC, "t", "cleanup.policy", Some("compact")),
                config(RESOURCE_BROKER, "", "log.retention.ms", Some("100")),
                config(RESOURCE_BROKER, "2", "log.retention.ms", Some("200")),
                MetadataRecord::RemoveTopic { topic_id: [1; 16] },
                topic("t", 3),
            ],
        );
        let configs = image.configs(Some(2));
        assert_eq!(configs.topics["t"], BTreeMap::new(), "created again: no overrides");
        assert_eq!(configs.dynamic_defaults["retention.ms"], "200");
        assert_eq!(image.configs(Some(1)).dynamic_defaults["retention.ms"], "100");
        let unknown = MetadataRecord::RemoveTopic { topic_id: [7; 16] };
        assert!(image.replay(unknown).is_err());
    }

    #[test]
    fn update_touches_only_what_changed_and_says_whether_anything_did() {
        let mut image = Image::default();
        image.replay(topic("a", 1)).unwrap();
        image.take_touched();
        let mut configs = image.configs(None);
        assert!(!image.update(&mut configs, None));
        image.replay(config(RESOURCE_TOPIC, "a", "segment.bytes", Some("1048576"))).unwrap();
        assert!(image.update(&mut configs, None));
        assert_eq!(configs, image.configs(None));
        image.replay(config(RESOURCE_TOPIC, "a", "segment.bytes", Some("1048576"))).unwrap();
        assert!(!image.update(&mut configs, None), "the same value again changes nothing");
    }
}
