//! A set of topics ([`TopicSource`]): settings, storage space, the mount's fetch memory.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use crate::error::Result;
use crate::partition::PartitionSource;
use topicfs_format::Offset;

/// The mount's memory for data a backend fetched and the view has not rendered yet (the view's
/// shared memory budget, `--memory-budget`, implements it): a backend holds the bytes it is
/// about to fetch for as long as it keeps them, and waits while other fetches hold the cap.
pub trait FetchMemory: Send + Sync {
    /// Holds `bytes` until the returned value is dropped, waiting until `deadline` at most for
    /// room; `None` when the deadline passed first.
    fn hold(&self, bytes: usize, deadline: Instant) -> Option<Box<dyn Any + Send>>;
    /// The cap in bytes.
    fn limit(&self) -> usize;
}

/// Where an effective topic setting's value comes from, highest precedence first.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigSource {
    /// Set for this topic through the mount's `config` file, or a cluster's topic override
    /// (DescribeConfigs DYNAMIC_TOPIC_CONFIG).
    TopicOverride,
    /// The broker's own override for this topic (a KRaft ConfigRecord of the topic).
    BrokerTopic,
    /// The broker's dynamic default (KRaft ConfigRecord BROKER; DYNAMIC_DEFAULT_BROKER_CONFIG or
    /// DYNAMIC_BROKER_CONFIG on a cluster).
    BrokerDefault,
    /// The mount's `--config` / `-o config.NAME=VALUE`.
    MountDefault,
    /// The broker's static settings (`--server-properties`; STATIC_BROKER_CONFIG on a cluster).
    BrokerStatic,
    /// Kafka's built-in default.
    KafkaDefault,
}
impl ConfigSource {
    /// The word the `config` file shows.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigSource::TopicOverride => "override",
            ConfigSource::BrokerTopic => "broker-override",
            ConfigSource::BrokerDefault => "broker-default",
            ConfigSource::MountDefault => "mount-default",
            ConfigSource::BrokerStatic => "server-properties",
            ConfigSource::KafkaDefault => "kafka-default",
        }
    }
}
/// One effective setting of a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
    /// Whether the source acts on the value now: `false` for a setting only retention and the
    /// log cleaner use on a topic whose settings a local source does not know (they delete and
    /// compact nothing until [`ConfigChange::MakeKnown`]). Always `true` on a cluster.
    pub applied: bool,
}
/// The name of the topic setting [`TopicSource::max_message_bytes`] reads.
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";

/// `max.message.bytes` among `settings` (name, value) (see
/// [`TopicSource::max_message_bytes`]): its value as a size, `None` when absent or not a size.
pub fn max_message_bytes_of<'a>(
    settings: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Option<usize> {
    settings
        .into_iter()
        .find(|(name, _)| *name == MAX_MESSAGE_BYTES)
        .and_then(|(_, value)| value)
        .and_then(|v| v.trim().parse::<usize>().ok())
}

/// One change to a topic's overrides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigChange {
    Set {
        name: String,
        value: String,
    },
    Remove {
        name: String,
    },
    /// The writer states the topic's settings (the `config` file's `cleanup.policy` line): a
    /// topic whose settings were unknown has them known from now on, and retention and the
    /// log cleaner act on them. Nothing else makes them known. A source whose topics' settings
    /// are always known (a cluster) takes it as no change.
    MakeKnown,
}

/// A set of topics made of partitions.
pub trait TopicSource: Send + Sync {
    /// Topic names, sorted.
    fn topics(&self) -> Result<Vec<String>>;
    /// Partition numbers of a topic, sorted. `NotFound` for an unknown topic.
    fn partitions(&self, topic: &str) -> Result<Vec<u32>>;
    /// One partition. `NotFound` if it does not exist.
    fn partition(&self, topic: &str, partition: u32) -> Result<Arc<dyn PartitionSource>>;
    /// Creates a topic with partitions `0..partitions`. `AlreadyExists`, `InvalidTopicName`.
    fn create_topic(&self, topic: &str, partitions: u32) -> Result<()>;
    /// Adds partition `partition` to an existing topic; only the next number is allowed.
    fn create_partition(&self, topic: &str, partition: u32) -> Result<()>;
    /// Whether appends and creations are refused.
    fn is_read_only(&self) -> bool;
    /// Flushes and closes everything cleanly (indexes trimmed, checkpoints, clean-shutdown
    /// marker). Idempotent.
    fn shutdown(&self) -> Result<()>;
    /// Space on the storage that holds the topics (what `df` shows for a mount of them). All
    /// zero when unknown (a cluster: its brokers' disks are not the mount's).
    fn space(&self) -> Result<SpaceStats>;
    /// Every effective setting of `topic`, sorted by name, with where each comes from.
    /// `NotFound` for an unknown topic; `Unsupported`/`UnsupportedApi` where the backend cannot.
    fn topic_config(&self, topic: &str) -> Result<Vec<ConfigEntry>>;
    /// Applies `changes` to `topic`'s overrides, all or nothing. `InvalidInput` naming the
    /// setting and the rule; nothing changed then.
    fn alter_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()>;
    /// Validates `changes` as [`TopicSource::alter_topic_config`] would (against the topic's
    /// settings now, the rules between settings included) and changes nothing: its errors.
    fn check_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()>;
    /// Judges `value`, the start of a value of setting `name` still being written:
    /// `InvalidInput` naming the setting and the rule when no continuation can make it valid.
    /// A source that cannot judge a value before it is whole (a cluster: its brokers decide,
    /// whatever their version takes) accepts every start.
    fn check_value_prefix(&self, name: &str, value: &str) -> Result<()>;
    /// `topic`'s effective `max.message.bytes` now (the longest record batch it takes), as
    /// [`TopicSource::topic_config`] states it, without the other settings: what an `append`
    /// handle's line limit follows. `None` when the source does not state it (a setting it
    /// does not list, or a value that is not a size); errors as `topic_config`'s.
    fn max_message_bytes(&self, topic: &str) -> Result<Option<usize>>;
    /// Learns the log start and end offsets of every partition of `topic` at once where that is
    /// cheaper than one partition at a time (a cluster: one ListOffsets per broker for all of
    /// them), so that the partitions' bounds questions within the same filesystem operation
    /// ([`crate::Operation`]) answer without a request each: what topic-level files
    /// (`offsets/-1`, `info`) ask first. A source that knows them without I/O does nothing. An
    /// error changes nothing (each partition then asks for itself).
    fn state_bounds(&self, topic: &str) -> Result<()>;
    /// [`PartitionSource::offset_for`] of every partition of `topic`, in partition order, with
    /// the same answers, asked at once where that is cheaper (a cluster: one ListOffsets per
    /// broker for a time, after [`TopicSource::state_bounds`]): what `offsets/<time>` shows.
    fn offsets_for(&self, topic: &str, query: crate::OffsetQuery) -> Result<Vec<(u32, Offset)>>;
    /// Reads the batches at each of `reads` (partition of `topic`, cursor) at once where that is
    /// cheaper than one partition at a time (a cluster: one Fetch per leader broker for all of
    /// them), so that each partition's [`PartitionSource::read`] from that cursor soon after
    /// answers without a request of its own: what a topic-level stream merging many
    /// partitions asks before it reads their heads. A hint: the reads answer the same with or
    /// without it, and a failure changes nothing (each partition then reads for itself). A
    /// source that reads locally does nothing.
    fn prefetch(&self, topic: &str, reads: &[(u32, crate::ReadCursor)]) -> Result<()>;
    /// The log dirs behind the topics, in the order the mount was given them, with their
    /// state; empty for a source without local directories (a cluster). No I/O.
    fn log_dirs(&self) -> LogDirsReport;
}

/// The state of a source's log dirs ([`TopicSource::log_dirs`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogDirsReport {
    pub dirs: Vec<LogDirStatus>,
    /// Partitions found (not as a `-future` move) in more than one dir: served by none, with
    /// the dirs holding them.
    pub duplicates: Vec<(String, u32, Vec<std::path::PathBuf>)>,
}

/// One log dir of a [`LogDirsReport`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDirStatus {
    pub path: std::path::PathBuf,
    /// `None` while online; the failure that took it offline otherwise.
    pub offline: Option<String>,
    /// Partitions it holds (as loaded: an offline dir's as they were).
    pub partitions: usize,
}

/// Capacity and free space of the storage behind a [`TopicSource`], in `statvfs` terms.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SpaceStats {
    /// Preferred I/O block size.
    pub block_size: u32,
    /// The unit of the block counts below.
    pub fragment_size: u32,
    pub blocks: u64,
    pub blocks_free: u64,
    /// Free blocks available to unprivileged users.
    pub blocks_available: u64,
    pub files: u64,
    pub files_free: u64,
}
