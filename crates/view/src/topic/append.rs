//! Topic-level appends: records routed to partitions as Kafka's default partitioner routes them.

use std::sync::Arc;

use topicfs_format::NewRecord;
use topicfs_format::partitioner::{KeylessRotation, partition_for_key};
use topicfs_source::error::{Error, Result};
use topicfs_source::{AppendInfo, Records, TopicSource};

/// Routes records written to a topic-level `append` or `append.json` to partitions.
///
/// One call to [`TopicAppender::append`] is one `write()`: keyed records go to
/// `toPositive(murmur2(key)) % partitions` (Kafka's default partitioner), keyless records all go
/// to one partition chosen by the topic's [`KeylessRotation`]; each partition that receives
/// records gets them in one [`topicfs_source::PartitionSource::append`] (one batch), in the
/// order written. Partitions are appended in partition order; if one append fails, the partitions before it
/// keep their records (as with a producer writing to several partitions without a
/// transaction) and the error is returned.
pub struct TopicAppender {
    pub(super) source: Arc<dyn TopicSource>,
    pub(super) topic: String,
    pub(super) rotation: Arc<KeylessRotation>,
}

impl std::fmt::Debug for TopicAppender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicAppender").field("topic", &self.topic).finish()
    }
}

/// Records of one write grouped by partition (ascending), each group in written order.
pub fn route(
    records: Vec<NewRecord>,
    partitions: u32,
    rotation: &KeylessRotation,
) -> Result<Vec<(u32, Vec<NewRecord>)>> {
    let none = || Error::NotFound("a topic without partitions takes no records".into());
    let mut keyless = None;
    let mut groups: Vec<(u32, Vec<NewRecord>)> = Vec::new();
    for record in records {
        let p = match &record.key {
            Some(key) => partition_for_key(key, partitions).ok_or_else(none)?,
            None => match keyless {
                Some(p) => p,
                None => {
                    let p = rotation.next(partitions).ok_or_else(none)?;
                    keyless = Some(p);
                    p
                }
            },
        };
        match groups.iter_mut().find(|(q, _)| *q == p) {
            Some((_, group)) => group.push(record),
            None => groups.push((p, vec![record])),
        }
    }
    groups.sort_by_key(|(p, _)| *p);
    Ok(groups)
}

impl TopicAppender {
    /// The topic name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Appends the records of one `write()`; returns what each partition wrote.
    pub fn append(&self, records: Vec<NewRecord>) -> Result<Vec<(u32, AppendInfo)>> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let count = self.partition_count()?;
        let mut written = Vec::new();
        for (p, group) in route(records, count, &self.rotation)? {
            let info = self.source.partition(&self.topic, p)?.append(Records::Owned(&group))?;
            written.push((p, info));
        }
        Ok(written)
    }

    /// Makes every partition's appends durable.
    pub fn sync(&self) -> Result<()> {
        for p in self.source.partitions(&self.topic)? {
            self.source.partition(&self.topic, p)?.sync()?;
        }
        Ok(())
    }

    /// Partitions are `0..n` (only the next number can be added), so the count is what Kafka's
    /// partitioner divides by; anything else is refused rather than misrouted.
    fn partition_count(&self) -> Result<u32> {
        let partitions = self.source.partitions(&self.topic)?;
        let n = u32::try_from(partitions.len()).unwrap_or(u32::MAX);
        if partitions.iter().enumerate().any(|(i, p)| u32::try_from(i).ok() != Some(*p)) {
            return Err(Error::InvalidInput(format!(
                "partitions of {} are not numbered 0..{n}: {partitions:?}",
                self.topic
            )));
        }
        Ok(n)
    }
}
