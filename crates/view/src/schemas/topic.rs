//! Schemas from the `_schemas` topic, as Confluent Schema Registry keeps them there, read
//! through the seam: the same for a log dir and a cluster.
//!
//! The topic is read from its log start to its end at the first question, then again from
//! where the last read stopped whenever a question is not answered by what was read (a schema
//! registered since): at most every [`REREAD_INTERVAL_MS`], so a stream of records with an id
//! nobody registered does not read the topic once per record. Records are applied in offset
//! order ([`Registry::apply`]); a record the registry would not have written is counted and
//! skipped, never an error of the mount.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use topicfs_format::{Offset, decode_batch, peek_entry};
use topicfs_schema::registry::Registry;
use topicfs_schema::{SchemaRecord, SchemaSource};
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_source::{PartitionSource, ReadMode, TopicSource};

/// The topic Confluent Schema Registry keeps its schemas in by default (`kafkastore.topic`).
pub const DEFAULT_SCHEMAS_TOPIC: &str = "_schemas";
/// The shortest time between two reads of the topic made to answer a question.
pub const REREAD_INTERVAL_MS: u64 = 200;
/// Bytes asked of the partition at a time.
const READ_CHUNK: usize = 1 << 20;

struct State {
    registry: Registry,
    /// The next offset to read, per partition.
    next: Vec<(u32, Offset)>,
    last_read: Option<Instant>,
}

/// A [`SchemaSource`] over a topic of the mount; see the module doc.
pub struct TopicSchemas {
    topics: Arc<dyn TopicSource>,
    topic: String,
    state: Mutex<State>,
}

impl TopicSchemas {
    /// Schemas from `topic` of `topics` (usually [`DEFAULT_SCHEMAS_TOPIC`]); nothing is read
    /// until asked.
    pub fn new(topics: Arc<dyn TopicSource>, topic: &str) -> TopicSchemas {
        TopicSchemas {
            topics,
            topic: topic.to_string(),
            state: Mutex::new(State {
                registry: Registry::default(),
                next: Vec::new(),
                last_read: None,
            }),
        }
    }

    /// The topic read.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Reads what was appended to the topic since the last read (at most every
    /// [`REREAD_INTERVAL_MS`] unless `force`). A topic that does not exist holds no schema.
    fn read_new(&self, st: &mut State, force: bool) -> Result<()> {
        let due =
            st.last_read.is_none_or(|at| at.elapsed() >= Duration::from_millis(REREAD_INTERVAL_MS));
        if !force && !due {
            return Ok(());
        }
        st.last_read = Some(Instant::now());
        let partitions = match self.topics.partitions(&self.topic) {
            Ok(p) => p,
            Err(Error::NotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        for p in partitions {
            let part = self.topics.partition(&self.topic, p)?;
            let from = st.next.iter().find(|(q, _)| *q == p).map(|(_, o)| *o);
            let next = read_partition(part.as_ref(), from, &mut st.registry)?;
            match st.next.iter_mut().find(|(q, _)| *q == p) {
                Some(slot) => slot.1 = next,
                None => st.next.push((p, next)),
            }
        }
        Ok(())
    }

    /// `f` of the registry as read; read again (see the module doc) when `f` finds nothing.
    fn ask<T>(
        &self,
        f: impl Fn(&Registry) -> Option<T>,
        missing: impl FnOnce() -> Error,
    ) -> Result<T> {
        let mut st = lock(&self.state);
        let first = st.last_read.is_none();
        if first {
            self.read_new(&mut st, true)?;
        }
        if let Some(found) = f(&st.registry) {
            return Ok(found);
        }
        if !first {
            self.read_new(&mut st, false)?;
        }
        f(&st.registry).ok_or_else(missing)
    }
}

/// Applies the records of `part` from `from` (its log start when `None`) to its end; the next
/// offset to read.
fn read_partition(
    part: &dyn PartitionSource,
    from: Option<Offset>,
    registry: &mut Registry,
) -> Result<Offset> {
    let summary = part.summary()?;
    let start = from.unwrap_or(summary.log_start_offset).max(summary.log_start_offset);
    if start >= summary.log_end_offset {
        return Ok(start);
    }
    let mut cursor = part.seek(start)?;
    let mut next = start;
    while next < summary.log_end_offset {
        let chunk = part.read(&cursor, READ_CHUNK, ReadMode::Batches)?.into_chunk()?;
        if chunk.bytes.is_empty() {
            break;
        }
        let mut at = 0;
        while let Some(rest) = chunk.bytes.get(at..) {
            let Ok(Some(header)) = peek_entry(rest) else { break };
            let size = header.total_size();
            let Some(entry) = rest.get(..size) else { break };
            at += size;
            let Ok(batch) = decode_batch(entry) else {
                log::warn!(
                    "{}-{}: a damaged batch near offset {next}; its schemas are skipped",
                    part.topic(),
                    part.partition()
                );
                continue;
            };
            let info = batch.info();
            for record in batch.records().flatten() {
                if record.offset < next {
                    continue;
                }
                next = record.offset.plus(1);
                if !info.is_control {
                    registry.apply(record.key, record.value);
                }
            }
            next = next.max(info.last_offset.plus(1));
        }
        match chunk.next {
            Some(c) => cursor = c,
            None => break,
        }
    }
    Ok(next)
}

/// The error of a subject without `version` (`None`: without any version) in `topic`.
fn no_version(subject: &str, version: Option<i32>, topic: &str) -> Error {
    let which = version.map_or("version".to_string(), |v| format!("version {v}"));
    Error::NotFound(format!("subject {subject:?} has no {which} in topic {topic}"))
}

impl SchemaSource for TopicSchemas {
    fn by_id(&self, id: u32) -> Result<SchemaRecord> {
        let topic = &self.topic;
        self.ask(
            |r| r.schema_by_id(id).cloned(),
            || Error::NotFound(format!("schema id {id} is not registered in topic {topic}")),
        )
    }

    fn by_subject(&self, subject: &str, version: Option<i32>) -> Result<SchemaRecord> {
        let topic = &self.topic;
        self.ask(
            |r| match version {
                Some(v) => r.version(subject, v).cloned(),
                None => r.latest(subject).cloned(),
            },
            || no_version(subject, version, topic),
        )
    }

    fn subjects(&self) -> Result<Vec<String>> {
        let mut st = lock(&self.state);
        self.read_new(&mut st, false)?;
        Ok(st.registry.subjects().into_iter().map(str::to_string).collect())
    }

    fn versions(&self, subject: &str) -> Result<Vec<(i32, u32)>> {
        let mut st = lock(&self.state);
        self.read_new(&mut st, false)?;
        Ok(st
            .registry
            .versions(subject)
            .into_iter()
            .filter(|v| !v.deleted)
            .map(|v| (v.version, v.id))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_without_versions_is_said_in_plain_words() {
        let none = no_version("s-value", None, "_schemas").to_string();
        assert!(none.contains("subject \"s-value\" has no version in topic _schemas"), "{none}");
        let three = no_version("s-value", Some(3), "_schemas").to_string();
        assert!(three.contains("has no version 3 in topic _schemas"), "{three}");
    }
}
