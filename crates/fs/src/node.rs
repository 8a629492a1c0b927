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

pub use super::bykey::{KeyDir, KeyFile};
pub use super::groups::{GroupDir, GroupFile};
pub use super::inspection::{InspectDir, InspectFile};
pub use super::schemas::{SchemaDir, SchemaFile};
use super::subtree::{SubtreeDir, SubtreeFile};

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

/// Everything the filesystem can show: a directory or a file. Each node maps to exactly one
/// inode while the kernel remembers it (see [`super::inode::InodeTable`]).
///
/// The two kinds are two enums so that what holds for every directory (it is listed, it is
/// not opened as a file) or every file (it has no children) is said once, while each
/// operation still matches every kind of its side exhaustively: a new node forces a decision
/// wherever its kind is handled.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    Dir(DirNode),
    File(FileNode),
}

/// The directories of the tree.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DirNode {
    Root,
    Topic(String),
    /// `<topic>/offsets/`: offsets of every partition for a time.
    OffsetsDir(String),
    /// `<topic>/by-time/`: streams of every partition merged by timestamp.
    TopicByTimeDir(String),
    Partition(PartitionId),
    ByOffsetDir(PartitionId),
    ByTimeDir(PartitionId),
    /// `<topic>/<p>/segments/` ([`crate::inspection`]).
    Inspect(InspectDir),
    /// `<topic>/groups/` and its groups ([`crate::groups`]).
    Groups(GroupDir),
    /// `by-key/` and `latest/` directories ([`crate::bykey`]; only with a key index).
    Keys(KeyDir),
    /// `<topic>/schemas/` and its subjects ([`crate::schemas`]).
    Schemas(SchemaDir),
}

/// The files of the tree.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FileNode {
    /// `@info` at the root: the mount's log dirs and their state.
    MountInfo,
    /// `@log` at the root: the mount's most recent warnings and errors.
    MountLog,
    TopicInfo(String),
    /// `<topic>/config`: the topic's settings; writing changes its overrides.
    TopicConfig(String),
    /// `<topic>/offsets/<time>`; the name as written in the path.
    Offsets(String, String),
    /// `<topic>/by-time/<spec>`; the name as written in the path.
    TopicStream(String, String),
    /// `<topic>/append`: lines routed to partitions by Kafka's default partitioner.
    TopicAppend(String),
    /// `<topic>/append.json`: envelopes routed to partitions by key.
    TopicAppendJson(String),
    PartitionInfo(PartitionId),
    /// A stream file; the name is the spec exactly as written in the path (`-10.json`).
    Stream(PartitionId, StreamDir, String),
    Append(PartitionId),
    AppendJson(PartitionId),
    /// A segment's file, its dump, or the partition's `check` ([`crate::inspection`]).
    Inspect(InspectFile),
    /// A group's files ([`crate::groups`]).
    Groups(GroupFile),
    /// `by-key/` and `latest/` files and `keys` ([`crate::bykey`]).
    Keys(KeyFile),
    /// `<topic>/schemas/<subject>/<name>` ([`crate::schemas`]).
    Schemas(SchemaFile),
}

impl Node {
    /// The root directory.
    pub const ROOT: Node = Node::Dir(DirNode::Root);

    /// Whether this node is a directory.
    pub fn is_dir(&self) -> bool {
        matches!(self, Node::Dir(_))
    }

    /// The directory holding this node (the root is its own parent, as `/..` is `/`).
    pub fn parent(&self) -> DirNode {
        match self {
            Node::Dir(dir) => dir.parent(),
            Node::File(file) => file.parent(),
        }
    }

    /// The partition this node belongs to, if it is inside a partition directory.
    pub fn partition_id(&self) -> Option<&PartitionId> {
        match self {
            Node::Dir(dir) => dir.partition_id(),
            Node::File(file) => file.partition_id(),
        }
    }
}

impl DirNode {
    /// The directory holding this one (the root is its own parent).
    pub fn parent(&self) -> DirNode {
        match self {
            DirNode::Root | DirNode::Topic(_) => DirNode::Root,
            DirNode::OffsetsDir(topic) | DirNode::TopicByTimeDir(topic) => {
                DirNode::Topic(topic.clone())
            }
            DirNode::Partition(id) => DirNode::Topic(id.topic.clone()),
            DirNode::ByOffsetDir(id) | DirNode::ByTimeDir(id) => DirNode::Partition(id.clone()),
            DirNode::Keys(dir) => dir.parent(),
            DirNode::Inspect(dir) => dir.parent(),
            DirNode::Groups(dir) => dir.parent(),
            DirNode::Schemas(dir) => dir.parent(),
        }
    }

    /// The partition this directory belongs to, if it is inside a partition directory.
    pub fn partition_id(&self) -> Option<&PartitionId> {
        match self {
            DirNode::Root
            | DirNode::Topic(_)
            | DirNode::OffsetsDir(_)
            | DirNode::TopicByTimeDir(_)
            | DirNode::Groups(_)
            | DirNode::Keys(KeyDir::Topic(_))
            | DirNode::Schemas(_) => None,
            DirNode::Partition(id)
            | DirNode::ByOffsetDir(id)
            | DirNode::ByTimeDir(id)
            | DirNode::Keys(KeyDir::ByKey(id) | KeyDir::Latest(id))
            | DirNode::Inspect(InspectDir::Segments(id)) => Some(id),
        }
    }
}

impl FileNode {
    /// The directory holding this file.
    pub fn parent(&self) -> DirNode {
        match self {
            FileNode::MountInfo | FileNode::MountLog => DirNode::Root,
            FileNode::TopicInfo(topic)
            | FileNode::TopicConfig(topic)
            | FileNode::TopicAppend(topic)
            | FileNode::TopicAppendJson(topic) => DirNode::Topic(topic.clone()),
            FileNode::Offsets(topic, _) => DirNode::OffsetsDir(topic.clone()),
            FileNode::TopicStream(topic, _) => DirNode::TopicByTimeDir(topic.clone()),
            FileNode::PartitionInfo(id) | FileNode::Append(id) | FileNode::AppendJson(id) => {
                DirNode::Partition(id.clone())
            }
            FileNode::Stream(id, StreamDir::ByOffset, _) => DirNode::ByOffsetDir(id.clone()),
            FileNode::Stream(id, StreamDir::ByTime, _) => DirNode::ByTimeDir(id.clone()),
            FileNode::Inspect(file) => file.parent(),
            FileNode::Groups(file) => file.parent(),
            FileNode::Keys(file) => file.parent(),
            FileNode::Schemas(file) => file.parent(),
        }
    }

    /// The partition this file belongs to, if it is inside a partition directory.
    pub fn partition_id(&self) -> Option<&PartitionId> {
        match self {
            FileNode::MountInfo
            | FileNode::MountLog
            | FileNode::TopicInfo(_)
            | FileNode::TopicConfig(_)
            | FileNode::Offsets(..)
            | FileNode::TopicStream(..)
            | FileNode::TopicAppend(_)
            | FileNode::TopicAppendJson(_)
            | FileNode::Groups(_)
            | FileNode::Keys(KeyFile::Topic(..))
            | FileNode::Schemas(_) => None,
            FileNode::PartitionInfo(id)
            | FileNode::Stream(id, ..)
            | FileNode::Append(id)
            | FileNode::AppendJson(id)
            | FileNode::Inspect(
                InspectFile::Segment(id, ..) | InspectFile::Dump(id, ..) | InspectFile::Check(id),
            )
            | FileNode::Keys(KeyFile::ByKey(id, _) | KeyFile::Latest(id, _) | KeyFile::Keys(id)) => {
                Some(id)
            }
        }
    }
}

/// What a fixed-name child needs of its topic or partition to exist (and be listed).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Nothing: it exists with its parent.
    Nothing,
    /// A mount with consumer groups.
    Groups,
    /// A mount with schemas.
    Schemas,
    /// A key index ([`topicfs_source::PartitionSource::key_index`]): of the partition, or of
    /// every partition of the topic.
    KeyIndex,
    /// Segment files ([`topicfs_source::PartitionSource::segment_files`]).
    SegmentFiles,
}

/// The fixed-name children of a topic directory (besides its partitions), in listing order,
/// with what each needs to exist: the one list lookups and listings both read.
pub fn topic_children(topic: &str) -> [(&'static str, Node, Needs); 9] {
    let t = || topic.to_string();
    [
        (INFO, Node::File(FileNode::TopicInfo(t())), Needs::Nothing),
        (CONFIG, Node::File(FileNode::TopicConfig(t())), Needs::Nothing),
        (OFFSETS, Node::Dir(DirNode::OffsetsDir(t())), Needs::Nothing),
        (BY_TIME, Node::Dir(DirNode::TopicByTimeDir(t())), Needs::Nothing),
        (APPEND, Node::File(FileNode::TopicAppend(t())), Needs::Nothing),
        (APPEND_JSON, Node::File(FileNode::TopicAppendJson(t())), Needs::Nothing),
        (GROUPS, Node::Dir(DirNode::Groups(GroupDir::All(t()))), Needs::Groups),
        (BY_KEY, Node::Dir(DirNode::Keys(KeyDir::Topic(t()))), Needs::KeyIndex),
        (SCHEMAS, Node::Dir(DirNode::Schemas(SchemaDir::Subjects(t()))), Needs::Schemas),
    ]
}

/// The fixed-name children of a partition directory, in listing order, with what each needs
/// to exist: the one list lookups and listings both read.
pub fn partition_children(id: &PartitionId) -> [(&'static str, Node, Needs); 10] {
    let i = || id.clone();
    [
        (INFO, Node::File(FileNode::PartitionInfo(i())), Needs::Nothing),
        (BY_OFFSET, Node::Dir(DirNode::ByOffsetDir(i())), Needs::Nothing),
        (BY_TIME, Node::Dir(DirNode::ByTimeDir(i())), Needs::Nothing),
        (APPEND, Node::File(FileNode::Append(i())), Needs::Nothing),
        (APPEND_JSON, Node::File(FileNode::AppendJson(i())), Needs::Nothing),
        (SEGMENTS, Node::Dir(DirNode::Inspect(InspectDir::Segments(i()))), Needs::SegmentFiles),
        (CHECK, Node::File(FileNode::Inspect(InspectFile::Check(i()))), Needs::SegmentFiles),
        (BY_KEY, Node::Dir(DirNode::Keys(KeyDir::ByKey(i()))), Needs::KeyIndex),
        (LATEST, Node::Dir(DirNode::Keys(KeyDir::Latest(i()))), Needs::KeyIndex),
        (KEYS, Node::File(FileNode::Keys(KeyFile::Keys(i()))), Needs::KeyIndex),
    ]
}

/// The child named `name` in `children` ([`topic_children`], [`partition_children`]).
pub fn fixed_child<const N: usize>(
    children: [(&'static str, Node, Needs); N],
    name: &str,
) -> Option<(Node, Needs)> {
    children.into_iter().find(|(n, ..)| *n == name).map(|(_, node, needs)| (node, needs))
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
    fn every_node_leads_up_to_the_root() {
        let id = PartitionId { topic: "t".into(), partition: 3 };
        let mut nodes = vec![
            Node::File(FileNode::Stream(id.clone(), StreamDir::ByTime, "-1h".into())),
            Node::File(FileNode::Offsets("t".into(), "-1".into())),
            Node::File(FileNode::TopicStream("t".into(), "-1h.json".into())),
            Node::File(FileNode::Inspect(InspectFile::Dump(
                id.clone(),
                Offset(0),
                SegmentFileKind::Log,
            ))),
            Node::File(FileNode::Groups(GroupFile::Offsets("t".into(), "g".into()))),
            Node::File(FileNode::Groups(GroupFile::Reset("t".into(), "g".into()))),
            Node::File(FileNode::Groups(GroupFile::Next(id.clone(), "g".into(), "n".into()))),
            Node::File(FileNode::Keys(KeyFile::ByKey(id.clone(), "user-42.json".into()))),
            Node::File(FileNode::Keys(KeyFile::Latest(id.clone(), "%null".into()))),
            Node::File(FileNode::Keys(KeyFile::Topic("t".into(), "k.json".into()))),
            Node::File(FileNode::Schemas(SchemaFile {
                topic: "t".into(),
                subject: "t-value".into(),
                name: "1".into(),
            })),
        ];
        nodes.extend(topic_children("t").into_iter().map(|(_, node, _)| node));
        nodes.extend(partition_children(&id).into_iter().map(|(_, node, _)| node));
        for node in nodes {
            let mut dir = node.parent();
            for _ in 0..6 {
                dir = dir.parent();
            }
            assert_eq!(dir, DirNode::Root, "{node:?}");
        }
        assert_eq!(Node::ROOT.parent(), DirNode::Root);
    }

    #[test]
    fn fixed_children_are_children_of_their_directory() {
        let id = PartitionId { topic: "t".into(), partition: 3 };
        for (name, node, _) in topic_children("t") {
            assert_eq!(node.parent(), DirNode::Topic("t".into()), "{name}");
            assert_eq!(fixed_child(topic_children("t"), name).map(|c| c.0), Some(node));
        }
        for (name, node, _) in partition_children(&id) {
            assert_eq!(node.parent(), DirNode::Partition(id.clone()), "{name}");
            assert_eq!(fixed_child(partition_children(&id), name).map(|c| c.0), Some(node));
        }
        assert_eq!(fixed_child(topic_children("t"), "0"), None);
    }
}
