//! Consumer groups' committed offsets ([`GroupStore`]).

use topicfs_format::{Offset, Timestamp};

use crate::error::Result;

#[cfg(doc)]
use super::TopicSource;

/// One group's committed position in one partition, as the group coordinator stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    /// Kafka's committed offset: the next record the group will process.
    pub offset: Offset,
    /// The commit's metadata string (empty when none).
    pub metadata: String,
    /// When it was committed (epoch ms).
    pub commit_timestamp: Timestamp,
}

/// Consumer groups' committed offsets: a second narrow interface next to [`TopicSource`], so
/// local data dirs (the `__consumer_offsets` topic, the log engine's `groups`) and a cluster
/// (OffsetFetch, OffsetCommit) are two backends of the same `groups/` tree. Validation of what
/// is committed (partitions exist, offsets within the log) is the caller's.
pub trait GroupStore: Send + Sync {
    /// Groups with at least one committed offset for a partition of `topic`, sorted.
    fn groups(&self, topic: &str) -> Result<Vec<String>>;
    /// `group`'s committed offsets for `topic`, by partition (partitions without a commit are
    /// absent).
    fn committed(
        &self,
        group: &str,
        topic: &str,
    ) -> Result<std::collections::BTreeMap<u32, CommittedOffset>>;
    /// Commits `offsets` (partition, offset) of `topic` for `group`: all of them or none, and
    /// durably before it returns. `ReadOnly` where commits are not possible.
    fn commit(&self, group: &str, topic: &str, offsets: &[(u32, Offset)]) -> Result<()>;
}
