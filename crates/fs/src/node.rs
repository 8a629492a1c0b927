//! What an inode stands for: the [`Node`] enum, the fixed names of the tree, and the parsing of
//! names that are numbers (partitions, segment base offsets).
//!
//! The tree is:
//!
//! ```text
//! /                                   Root
//! /<topic>/                           Topic
//! /<topic>/info                       TopicInfo
//! /<topic>/config                     TopicConfig
//! /<topic>/offsets/                   OffsetsDir
//! /<topic>/offsets/<time>             Offsets
//! /<topic>/by-time/                   TopicByTimeDir
//! /<topic>/by-time/<spec>             TopicStream
//! /<topic>/append                     TopicAppend
//! /<topic>/append.json                TopicAppendJson
//! /<topic>/<p>/                       Partition
//! /<topic>/<p>/info                   PartitionInfo
//! /<topic>/<p>/by-offset/             ByOffsetDir
//! /<topic>/<p>/by-offset/<spec>       Stream (StreamDir::ByOffset)
//! /<topic>/<p>/by-time/               ByTimeDir
//! /<topic>/<p>/by-time/<spec>         Stream (StreamDir::ByTime)
//! /<topic>/<p>/append                 Append
//! /<topic>/<p>/append.json            AppendJson
//! /<topic>/<p>/segments/              SegmentsDir
//! /<topic>/<p>/segments/<base>.<ext>  SegmentFile
//! /<topic>/<p>/segments/<base>.<ext>.dump  SegmentDump
//! /<topic>/<p>/check                  PartitionCheck
//! /<topic>/<p>/by-key/                ByKeyDir
//! /<topic>/<p>/by-key/<key>[.json|.raw]  ByKey
//! /<topic>/<p>/latest/                LatestDir
//! /<topic>/<p>/latest/<key>[.json]    Latest
//! /<topic>/<p>/keys                   Keys
//! /<topic>/by-key/                    TopicByKeyDir
//! /<topic>/by-key/<key>[.json]        TopicByKey
//! /<topic>/groups/                    GroupsDir
//! /<topic>/groups/<group>/            Group
//! /<topic>/groups/<group>/offsets     GroupOffsets
//! /<topic>/groups/<group>/auto.offset.reset  GroupReset
//! /<topic>/groups/<group>/<p>/        GroupPartition
//! /<topic>/groups/<group>/<p>/next[.json|.raw]  GroupNext
//! /<topic>/schemas/                   SchemasDir
//! /<topic>/schemas/<subject>/         SchemaSubject
//! /<topic>/schemas/<subject>/<n>|latest|versions  SchemaFile
//! ```
//!
//! A `Node` is a name, not a check: whether it exists is decided against the
//! [`TopicSource`](topicfs_source::TopicSource) when it is looked up.

use topicfs_format::Offset;
use topicfs_source::SegmentFileKind;

/// Name of the info file in topic and partition directories.
pub const INFO: &str = "info";
/// Name of the directory of a topic's schemas (a mount with schemas only).
pub const SCHEMAS: &str = "schemas";
/// The mount's own `info` at the root: `@` is not in a Kafka topic name, so it never hides a
/// topic (and it is not listed, so the root lists topics only).
pub const MOUNT_INFO: &str = "@info";
/// The mount's most recent warnings and errors at the root (not listed either; see
/// [`crate::recent_log`]).
pub const MOUNT_LOG: &str = "@log";
/// Name of a topic's settings file (see [`super::config`]).
pub const CONFIG: &str = "config";
/// Name of a partition's check report (see [`topicfs_view::inspect`]).
pub const CHECK: &str = "check";
/// Name of the by-offset directory.
pub const BY_OFFSET: &str = "by-offset";
/// Name of the by-time directory.
pub const BY_TIME: &str = "by-time";
/// Name of the line-per-record append file.
pub const APPEND: &str = "append";
/// Name of the JSON-envelope append file.
pub const APPEND_JSON: &str = "append.json";
/// Name of the raw segment files directory.
pub const SEGMENTS: &str = "segments";
/// Name of the topic-level offsets-for-times directory.
pub const OFFSETS: &str = "offsets";
/// Name of a topic's consumer groups directory.
pub const GROUPS: &str = "groups";
/// Name of the by-key directories (partition and topic).
pub const BY_KEY: &str = topicfs_view::bykey::BY_KEY;
/// Name of a partition's latest-value directory.
pub const LATEST: &str = topicfs_view::bykey::LATEST;
/// Name of a partition's key listing.
pub const KEYS: &str = topicfs_view::bykey::KEYS;

/// Digits in a segment file's base offset (`00000000000000000000.log`), as Kafka writes them.
const SEGMENT_BASE_DIGITS: usize = 20;

/// One partition of one topic.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionId {
    pub topic: String,
    pub partition: u32,
}

/// Which stream directory a spec was looked up in.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StreamDir {
    ByOffset,
    ByTime,
}

impl StreamDir {
    /// The directory name (`by-offset` or `by-time`).
    pub fn dir_name(self) -> &'static str {
        match self {
            StreamDir::ByOffset => BY_OFFSET,
            StreamDir::ByTime => BY_TIME,
        }
    }
}

/// Everything the filesystem can show. Each variant maps to exactly one inode while the kernel
/// remembers it (see [`super::inode::InodeTable`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    Root,
    /// `@info` at the root: the mount's log dirs and their state.
    MountInfo,
    /// `@log` at the root: the mount's most recent warnings and errors.
    MountLog,
    Topic(String),
    TopicInfo(String),
    /// `<topic>/config`: the topic's settings; writing changes its overrides.
    TopicConfig(String),
    /// `<topic>/offsets/`: offsets of every partition for a time.
    OffsetsDir(String),
    /// `<topic>/offsets/<time>`; the name as written in the path.
    Offsets(String, String),
    /// `<topic>/by-time/`: streams of every partition merged by timestamp.
    TopicByTimeDir(String),
    /// `<topic>/by-time/<spec>`; the name as written in the path.
    TopicStream(String, String),
    /// `<topic>/append`: lines routed to partitions by Kafka's default partitioner.
    TopicAppend(String),
    /// `<topic>/append.json`: envelopes routed to partitions by key.
    TopicAppendJson(String),
    Partition(PartitionId),
    PartitionInfo(PartitionId),
    ByOffsetDir(PartitionId),
    ByTimeDir(PartitionId),
    /// A stream file; the name is the spec exactly as written in the path (`-10.json`).
    Stream(PartitionId, StreamDir, String),
    Append(PartitionId),
    AppendJson(PartitionId),
    SegmentsDir(PartitionId),
    SegmentFile(PartitionId, Offset, SegmentFileKind),
    /// `segments/<base>.<ext>.dump`: the segment file in `kafka-dump-log.sh`'s words.
    SegmentDump(PartitionId, Offset, SegmentFileKind),
    /// `<topic>/<p>/check`: the partition's check report.
    PartitionCheck(PartitionId),
    /// `<topic>/groups/`: the groups with committed offsets for the topic.
    GroupsDir(String),
    /// `<topic>/groups/<group>/` (topic, group).
    Group(String, String),
    /// `<topic>/groups/<group>/offsets`: committed offsets and lag; writing commits.
    GroupOffsets(String, String),
    /// `<topic>/groups/<group>/auto.offset.reset`: `earliest` or `latest`.
    GroupReset(String, String),
    /// `<topic>/groups/<group>/<p>/` (partition, group).
    GroupPartition(PartitionId, String),
    /// `<topic>/groups/<group>/<p>/next[.json|.raw]` (partition, group, name): records from the
    /// committed offset to the end as of resolution.
    GroupNext(PartitionId, String, String),
    /// `<topic>/<p>/by-key/`: records by key (only with a key index).
    ByKeyDir(PartitionId),
    /// `<topic>/<p>/by-key/<key>[.json|.raw]`; the name as written in the path.
    ByKey(PartitionId, String),
    /// `<topic>/<p>/latest/`: the last record of each key.
    LatestDir(PartitionId),
    /// `<topic>/<p>/latest/<key>[.json]`; the name as written in the path.
    Latest(PartitionId, String),
    /// `<topic>/<p>/keys`: the distinct keys with their record counts.
    Keys(PartitionId),
    /// `<topic>/by-key/`: records by key over the topic's partitions.
    TopicByKeyDir(String),
    /// `<topic>/by-key/<key>[.json]`; the name as written in the path.
    TopicByKey(String, String),
    /// `<topic>/schemas/`: the topic's subjects (`<topic>-key`, `<topic>-value`).
    SchemasDir(String),
    /// `<topic>/schemas/<subject>/` (topic, subject).
    SchemaSubject(String, String),
    /// `<topic>/schemas/<subject>/<version>`, `latest` or `versions` (topic, subject, name).
    SchemaFile(String, String, String),
}

impl Node {
    /// Whether this node is a directory.
    pub fn is_dir(&self) -> bool {
        match self {
            Node::Root
            | Node::Topic(_)
            | Node::OffsetsDir(_)
            | Node::TopicByTimeDir(_)
            | Node::Partition(_)
            | Node::ByOffsetDir(_)
            | Node::ByTimeDir(_)
            | Node::SegmentsDir(_)
            | Node::GroupsDir(_)
            | Node::Group(..)
            | Node::GroupPartition(..)
            | Node::ByKeyDir(_)
            | Node::LatestDir(_)
            | Node::TopicByKeyDir(_)
            | Node::SchemasDir(_)
            | Node::SchemaSubject(..) => true,
            Node::SchemaFile(..) => false,
            Node::GroupOffsets(..) | Node::GroupReset(..) | Node::GroupNext(..) => false,
            Node::ByKey(..) | Node::Latest(..) | Node::Keys(_) | Node::TopicByKey(..) => false,
            Node::MountInfo
            | Node::MountLog
            | Node::TopicInfo(_)
            | Node::TopicConfig(_)
            | Node::Offsets(..)
            | Node::TopicStream(..)
            | Node::TopicAppend(_)
            | Node::TopicAppendJson(_)
            | Node::PartitionInfo(_)
            | Node::Stream(..)
            | Node::Append(_)
            | Node::AppendJson(_)
            | Node::SegmentFile(..)
            | Node::SegmentDump(..)
            | Node::PartitionCheck(_) => false,
        }
    }

    /// The directory holding this node (the root is its own parent, as `/..` is `/`).
    pub fn parent(&self) -> Node {
        match self {
            Node::Root | Node::MountInfo | Node::MountLog | Node::Topic(_) => Node::Root,
            Node::TopicInfo(topic)
            | Node::TopicConfig(topic)
            | Node::OffsetsDir(topic)
            | Node::TopicByTimeDir(topic)
            | Node::TopicAppend(topic)
            | Node::TopicAppendJson(topic) => Node::Topic(topic.clone()),
            Node::Offsets(topic, _) => Node::OffsetsDir(topic.clone()),
            Node::TopicStream(topic, _) => Node::TopicByTimeDir(topic.clone()),
            Node::Partition(id) => Node::Topic(id.topic.clone()),
            Node::PartitionInfo(id)
            | Node::PartitionCheck(id)
            | Node::ByOffsetDir(id)
            | Node::ByTimeDir(id)
            | Node::Append(id)
            | Node::AppendJson(id)
            | Node::SegmentsDir(id) => Node::Partition(id.clone()),
            Node::Stream(id, StreamDir::ByOffset, _) => Node::ByOffsetDir(id.clone()),
            Node::Stream(id, StreamDir::ByTime, _) => Node::ByTimeDir(id.clone()),
            Node::SegmentFile(id, ..) | Node::SegmentDump(id, ..) => Node::SegmentsDir(id.clone()),
            Node::GroupsDir(topic) => Node::Topic(topic.clone()),
            Node::Group(topic, _) => Node::GroupsDir(topic.clone()),
            Node::GroupOffsets(topic, group) | Node::GroupReset(topic, group) => {
                Node::Group(topic.clone(), group.clone())
            }
            Node::GroupPartition(id, group) => Node::Group(id.topic.clone(), group.clone()),
            Node::GroupNext(id, group, _) => Node::GroupPartition(id.clone(), group.clone()),
            Node::ByKeyDir(id) | Node::LatestDir(id) | Node::Keys(id) => {
                Node::Partition(id.clone())
            }
            Node::ByKey(id, _) => Node::ByKeyDir(id.clone()),
            Node::Latest(id, _) => Node::LatestDir(id.clone()),
            Node::TopicByKeyDir(topic) => Node::Topic(topic.clone()),
            Node::TopicByKey(topic, _) => Node::TopicByKeyDir(topic.clone()),
            Node::SchemasDir(topic) => Node::Topic(topic.clone()),
            Node::SchemaSubject(topic, _) => Node::SchemasDir(topic.clone()),
            Node::SchemaFile(topic, subject, _) => {
                Node::SchemaSubject(topic.clone(), subject.clone())
            }
        }
    }

    /// The partition this node belongs to, if it is inside a partition directory.
    pub fn partition_id(&self) -> Option<&PartitionId> {
        match self {
            Node::Root
            | Node::MountInfo
            | Node::MountLog
            | Node::Topic(_)
            | Node::TopicInfo(_)
            | Node::TopicConfig(_)
            | Node::OffsetsDir(_)
            | Node::Offsets(..)
            | Node::TopicByTimeDir(_)
            | Node::TopicStream(..)
            | Node::TopicAppend(_)
            | Node::TopicAppendJson(_)
            | Node::GroupsDir(_)
            | Node::Group(..)
            | Node::GroupOffsets(..)
            | Node::GroupReset(..)
            | Node::GroupPartition(..)
            | Node::GroupNext(..)
            | Node::TopicByKeyDir(_)
            | Node::TopicByKey(..)
            | Node::SchemasDir(_)
            | Node::SchemaSubject(..)
            | Node::SchemaFile(..) => None,
            Node::Partition(id)
            | Node::PartitionInfo(id)
            | Node::ByOffsetDir(id)
            | Node::ByTimeDir(id)
            | Node::Stream(id, ..)
            | Node::Append(id)
            | Node::AppendJson(id)
            | Node::SegmentsDir(id)
            | Node::SegmentFile(id, ..)
            | Node::SegmentDump(id, ..)
            | Node::PartitionCheck(id)
            | Node::ByKeyDir(id)
            | Node::ByKey(id, _)
            | Node::LatestDir(id)
            | Node::Latest(id, _)
            | Node::Keys(id) => Some(id),
        }
    }

    /// The fixed-name child of a topic directory other than a partition, if `name` is one.
    pub fn topic_child(topic: &str, name: &str) -> Option<Node> {
        let topic = topic.to_string();
        Some(match name {
            INFO => Node::TopicInfo(topic),
            CONFIG => Node::TopicConfig(topic),
            OFFSETS => Node::OffsetsDir(topic),
            BY_TIME => Node::TopicByTimeDir(topic),
            APPEND => Node::TopicAppend(topic),
            APPEND_JSON => Node::TopicAppendJson(topic),
            GROUPS => Node::GroupsDir(topic),
            BY_KEY => Node::TopicByKeyDir(topic),
            SCHEMAS => Node::SchemasDir(topic),
            _ => return None,
        })
    }

    /// The fixed-name child of a partition directory, if `name` is one.
    pub fn partition_child(id: &PartitionId, name: &str) -> Option<Node> {
        let id = id.clone();
        Some(match name {
            INFO => Node::PartitionInfo(id),
            CHECK => Node::PartitionCheck(id),
            BY_OFFSET => Node::ByOffsetDir(id),
            BY_TIME => Node::ByTimeDir(id),
            APPEND => Node::Append(id),
            APPEND_JSON => Node::AppendJson(id),
            SEGMENTS => Node::SegmentsDir(id),
            BY_KEY => Node::ByKeyDir(id),
            LATEST => Node::LatestDir(id),
            KEYS => Node::Keys(id),
            _ => return None,
        })
    }
}

/// Parses a partition directory name: a decimal number without sign or leading zeros (`0`, `7`,
/// `12`), as Kafka writes it in `<topic>-<partition>`. `None` for anything else, so `01` and
/// `+1` are simply absent names.
pub fn parse_partition(name: &str) -> Option<u32> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if name.len() > 1 && name.starts_with('0') {
        return None;
    }
    name.parse().ok()
}

/// The file name of one segment file: the base offset as 20 zero-padded digits and the suffix
/// (`00000000000000000042.timeindex`).
pub fn segment_file_name(base_offset: Offset, kind: SegmentFileKind) -> String {
    format!("{:0width$}{}", base_offset.0, kind.suffix(), width = SEGMENT_BASE_DIGITS)
}

/// Parses a segment file name written by [`segment_file_name`]. Exactly 20 digits, then one of
/// the four suffixes; anything else is `None`.
pub fn parse_segment_file_name(name: &str) -> Option<(Offset, SegmentFileKind)> {
    let digits = name.get(..SEGMENT_BASE_DIGITS)?;
    let suffix = name.get(SEGMENT_BASE_DIGITS..)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let kind = [
        SegmentFileKind::Log,
        SegmentFileKind::Index,
        SegmentFileKind::TimeIndex,
        SegmentFileKind::TxnIndex,
    ]
    .into_iter()
    .find(|kind| kind.suffix() == suffix)?;
    let base: i64 = digits.parse().ok()?;
    Some((Offset(base), kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names_are_canonical_decimals() {
        assert_eq!(parse_partition("0"), Some(0));
        assert_eq!(parse_partition("12"), Some(12));
        assert_eq!(parse_partition("01"), None);
        assert_eq!(parse_partition("+1"), None);
        assert_eq!(parse_partition("-1"), None);
        assert_eq!(parse_partition(""), None);
        assert_eq!(parse_partition("4294967296"), None);
    }

    #[test]
    fn segment_file_names_round_trip() {
        for kind in [
            SegmentFileKind::Log,
            SegmentFileKind::Index,
            SegmentFileKind::TimeIndex,
            SegmentFileKind::TxnIndex,
        ] {
            let name = segment_file_name(Offset(42), kind);
            assert_eq!(name.len(), 20 + kind.suffix().len());
            assert_eq!(parse_segment_file_name(&name), Some((Offset(42), kind)));
        }
        assert_eq!(parse_segment_file_name("42.log"), None);
        assert_eq!(parse_segment_file_name("00000000000000000042.snapshot"), None);
        assert_eq!(parse_segment_file_name("0000000000000000004x.log"), None);
        // Multi-byte characters around the split point are not a panic.
        assert_eq!(parse_segment_file_name("0000000000000000000é.log"), None);
    }

    #[test]
    fn every_node_has_a_directory_parent() {
        let id = PartitionId { topic: "t".into(), partition: 3 };
        let nodes = [
            Node::Topic("t".into()),
            Node::TopicInfo("t".into()),
            Node::Partition(id.clone()),
            Node::PartitionInfo(id.clone()),
            Node::Stream(id.clone(), StreamDir::ByTime, "-1h".into()),
            Node::Offsets("t".into(), "-1".into()),
            Node::TopicStream("t".into(), "-1h.json".into()),
            Node::TopicAppend("t".into()),
            Node::SegmentFile(id.clone(), Offset(0), SegmentFileKind::Log),
            Node::GroupsDir("t".into()),
            Node::GroupOffsets("t".into(), "g".into()),
            Node::GroupReset("t".into(), "g".into()),
            Node::GroupNext(id.clone(), "g".into(), "next.json".into()),
            Node::ByKey(id.clone(), "user-42.json".into()),
            Node::Latest(id.clone(), "%null".into()),
            Node::Keys(id.clone()),
            Node::TopicByKey("t".into(), "k.json".into()),
        ];
        for node in nodes {
            assert!(node.parent().is_dir(), "{node:?}");
        }
        assert_eq!(Node::Root.parent(), Node::Root);
    }
}
