//! What an inode stands for: the [`Node`] enum, the fixed names of the tree, and the parsing of
//! names that are numbers (partitions, segment base offsets).
//!
//! The tree is (each feature's nodes are one variant of [`DirNode`] and [`FileNode`] holding
//! the feature's own enum, named here after the dot):
//!
//! ```text
//! /                                   Dir Root
//! /@info, /@log                       File MountInfo, MountLog
//! /<topic>/                           Dir Topic
//! /<topic>/info                       File TopicInfo
//! /<topic>/config                     File TopicConfig
//! /<topic>/offsets/                   Dir OffsetsDir
//! /<topic>/offsets/<time>             File Offsets
//! /<topic>/by-time/                   Dir TopicByTimeDir
//! /<topic>/by-time/<spec>             File TopicStream
//! /<topic>/append                     File TopicAppend
//! /<topic>/append.json                File TopicAppendJson
//! /<topic>/<p>/                       Dir Partition
//! /<topic>/<p>/info                   File PartitionInfo
//! /<topic>/<p>/by-offset/             Dir ByOffsetDir
//! /<topic>/<p>/by-offset/<spec>       File Stream (StreamDir::ByOffset)
//! /<topic>/<p>/by-time/               Dir ByTimeDir
//! /<topic>/<p>/by-time/<spec>         File Stream (StreamDir::ByTime)
//! /<topic>/<p>/append                 File Append
//! /<topic>/<p>/append.json            File AppendJson
//! /<topic>/<p>/segments/              Dir Inspect.Segments      (inspection.rs)
//! /<topic>/<p>/segments/<base>.<ext>  File Inspect.Segment
//! /<topic>/<p>/segments/<base>.<ext>.dump  File Inspect.Dump
//! /<topic>/<p>/check                  File Inspect.Check
//! /<topic>/<p>/by-key/                Dir Keys.ByKey            (bykey.rs)
//! /<topic>/<p>/by-key/<key>[.json|.raw]  File Keys.ByKey
//! /<topic>/<p>/latest/                Dir Keys.Latest
//! /<topic>/<p>/latest/<key>[.json]    File Keys.Latest
//! /<topic>/<p>/keys                   File Keys.Keys
//! /<topic>/by-key/                    Dir Keys.Topic
//! /<topic>/by-key/<key>[.json]        File Keys.Topic
//! /<topic>/groups/                    Dir Groups.All            (groups.rs)
//! /<topic>/groups/<group>/            Dir Groups.Group
//! /<topic>/groups/<group>/offsets     File Groups.Offsets
//! /<topic>/groups/<group>/auto.offset.reset  File Groups.Reset
//! /<topic>/groups/<group>/<p>/        Dir Groups.Partition
//! /<topic>/groups/<group>/<p>/next[.json|.raw]  File Groups.Next
//! /<topic>/schemas/                   Dir Schemas.Subjects      (schemas.rs)
//! /<topic>/schemas/<subject>/         Dir Schemas.Subject
//! /<topic>/schemas/<subject>/<n>|latest|versions  File Schemas (SchemaFile)
//! /<topic>/where/                     Dir Where.All             (filtered.rs)
//! /<topic>/where/<filter>/            Dir Where.Filter
//! /<topic>/where/<filter>/info        File Where.TopicInfo
//! /<topic>/where/<filter>/by-time/    Dir Where.TopicByTime
//! /<topic>/where/<filter>/by-time/<spec>  File Where.TopicStream
//! /<topic>/where/<filter>/<p>/        Dir Where.Partition
//! /<topic>/where/<filter>/<p>/info    File Where.Info
//! /<topic>/where/<filter>/<p>/by-offset/, by-time/  Dir Where.Streams
//! /<topic>/where/<filter>/<p>/by-offset/<spec>, by-time/<spec>  File Where.Stream
//! ```
//!
//! A `Node` is a name, not a check: whether it exists is decided against the
//! [`TopicSource`](topicfs_source::TopicSource) when it is looked up.

use topicfs_format::Offset;
use topicfs_source::SegmentFileKind;

use topicfs_view::groups as group_view;
use topicfs_view::inspect::DUMP_SUFFIX;

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
/// `<topic>/indexes`.
pub const INDEXES: &str = "indexes";
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
/// Name of a topic's filtered views (`where/<filter>/`).
pub const WHERE: &str = "where";
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
    /// Parses a stream's name as this directory reads it (`by-offset/` names by offset,
    /// `by-time/` names by time).
    pub fn parse(
        self,
        name: &str,
    ) -> topicfs_source::error::Result<topicfs_view::spec::StreamSpec> {
        use topicfs_view::spec::StreamSpec;
        Ok(match self {
            StreamDir::ByOffset => StreamSpec::parse_by_offset(name)?,
            StreamDir::ByTime => StreamSpec::parse_by_time(name)?,
        })
    }

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
    /// `<topic>/<p>/segments/` (`inspection.rs`).
    Inspect(InspectDir),
    /// `<topic>/groups/` and its groups (`groups.rs`).
    Groups(GroupDir),
    /// `by-key/` and `latest/` directories (`bykey.rs`; only with a key index).
    Keys(KeyDir),
    /// `<topic>/schemas/` and its subjects (`schemas.rs`).
    Schemas(SchemaDir),
    /// `<topic>/where/` and the filtered views under it (`filtered.rs`).
    Where(WhereDir),
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
    /// A segment's file, its dump, or the partition's `check` (`inspection.rs`).
    Inspect(InspectFile),
    /// A group's files (`groups.rs`).
    Groups(GroupFile),
    /// `by-key/` and `latest/` files and `keys` (`bykey.rs`).
    Keys(KeyFile),
    /// `<topic>/schemas/<subject>/<name>` (`schemas.rs`).
    Schemas(SchemaFile),
    /// Files of a filtered view (`filtered.rs`).
    Where(WhereFile),
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
            DirNode::Where(dir) => dir.parent(),
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
            | DirNode::Schemas(_)
            | DirNode::Where(WhereDir::All(_) | WhereDir::Filter(..) | WhereDir::TopicByTime(..)) => {
                None
            }
            DirNode::Partition(id)
            | DirNode::ByOffsetDir(id)
            | DirNode::ByTimeDir(id)
            | DirNode::Keys(KeyDir::ByKey(id) | KeyDir::Latest(id))
            | DirNode::Inspect(InspectDir::Segments(id))
            | DirNode::Where(WhereDir::Partition(id, _) | WhereDir::Streams(id, ..)) => Some(id),
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
            FileNode::Where(file) => file.parent(),
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
            | FileNode::Schemas(_)
            | FileNode::Where(
                WhereFile::TopicInfo(..) | WhereFile::TopicStream(..) | WhereFile::Indexes(_),
            ) => None,
            FileNode::PartitionInfo(id)
            | FileNode::Stream(id, ..)
            | FileNode::Append(id)
            | FileNode::AppendJson(id)
            | FileNode::Inspect(
                InspectFile::Segment(id, ..) | InspectFile::Dump(id, ..) | InspectFile::Check(id),
            )
            | FileNode::Keys(KeyFile::ByKey(id, _) | KeyFile::Latest(id, _) | KeyFile::Keys(id))
            | FileNode::Where(WhereFile::Info(id, _) | WhereFile::Stream(id, ..)) => Some(id),
        }
    }
}

// ---- each feature's nodes (what each operation does with them is in the feature's module) ----

/// The directories of `<topic>/schemas/`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SchemaDir {
    /// `<topic>/schemas/`: the topic's subjects (`<topic>-key`, `<topic>-value`).
    Subjects(String),
    /// `<topic>/schemas/<subject>/` (topic, subject).
    Subject(String, String),
}

/// `<topic>/schemas/<subject>/<version>`, `latest` or `versions`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SchemaFile {
    pub topic: String,
    pub subject: String,
    pub name: String,
}

impl SchemaDir {
    /// The directory holding this one.
    pub fn parent(&self) -> DirNode {
        match self {
            SchemaDir::Subjects(topic) => DirNode::Topic(topic.clone()),
            SchemaDir::Subject(topic, _) => DirNode::Schemas(SchemaDir::Subjects(topic.clone())),
        }
    }

    /// A path-like description for messages.
    pub fn path(&self) -> String {
        match self {
            SchemaDir::Subjects(topic) => format!("{topic}/{SCHEMAS}"),
            SchemaDir::Subject(topic, subject) => format!("{topic}/{SCHEMAS}/{subject}"),
        }
    }
}

impl SchemaFile {
    /// The directory holding this file.
    pub fn parent(&self) -> DirNode {
        DirNode::Schemas(SchemaDir::Subject(self.topic.clone(), self.subject.clone()))
    }

    /// A path-like description for messages.
    pub fn path(&self) -> String {
        format!("{}/{SCHEMAS}/{}/{}", self.topic, self.subject, self.name)
    }
}

/// The directory of inspection: `<topic>/<p>/segments/`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum InspectDir {
    Segments(PartitionId),
}

/// The files of inspection.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum InspectFile {
    /// `segments/<base>.<ext>`: one file of a segment as stored.
    Segment(PartitionId, Offset, SegmentFileKind),
    /// `segments/<base>.<ext>.dump`: the segment file in `kafka-dump-log.sh`'s words.
    Dump(PartitionId, Offset, SegmentFileKind),
    /// `<topic>/<p>/check`: the partition's check report.
    Check(PartitionId),
}

impl InspectDir {
    /// The directory holding this one.
    pub fn parent(&self) -> DirNode {
        let InspectDir::Segments(id) = self;
        DirNode::Partition(id.clone())
    }

    /// A path-like description for messages.
    pub fn path(&self) -> String {
        let InspectDir::Segments(id) = self;
        format!("{}/{}/{SEGMENTS}", id.topic, id.partition)
    }
}

impl InspectFile {
    /// The directory holding this file.
    pub fn parent(&self) -> DirNode {
        match self {
            InspectFile::Segment(id, ..) | InspectFile::Dump(id, ..) => {
                DirNode::Inspect(InspectDir::Segments(id.clone()))
            }
            InspectFile::Check(id) => DirNode::Partition(id.clone()),
        }
    }

    /// A path-like description for messages.
    pub fn path(&self) -> String {
        let partition = |id: &PartitionId| format!("{}/{}", id.topic, id.partition);
        match self {
            InspectFile::Segment(id, base, kind) => {
                format!("{}/{SEGMENTS}/{}", partition(id), segment_file_name(*base, *kind))
            }
            InspectFile::Dump(id, base, kind) => format!(
                "{}/{SEGMENTS}/{}{DUMP_SUFFIX}",
                partition(id),
                segment_file_name(*base, *kind)
            ),
            InspectFile::Check(id) => format!("{}/{CHECK}", partition(id)),
        }
    }
}

/// The directories of `<topic>/where/`; the filter as written in the path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WhereDir {
    /// `<topic>/where/`: nothing listed; any filter can be looked up.
    All(String),
    /// `<topic>/where/<filter>/` (topic, filter): the topic's partitions through the filter,
    /// its `info` and its merged `by-time/`.
    Filter(String, String),
    /// `<topic>/where/<filter>/by-time/` (topic, filter): merged streams of every partition.
    TopicByTime(String, String),
    /// `<topic>/where/<filter>/<p>/`.
    Partition(PartitionId, String),
    /// `<topic>/where/<filter>/<p>/by-offset/` or `by-time/`.
    Streams(PartitionId, String, StreamDir),
}

/// The files of a filtered view; the filter and names as written in the path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WhereFile {
    /// `<topic>/where/<filter>/<p>/info`: the partition and how the filter served it.
    Info(PartitionId, String),
    /// `<topic>/where/<filter>/<p>/by-offset/<spec>` or `by-time/<spec>`: a stream of the
    /// records the filter keeps.
    Stream(PartitionId, String, StreamDir, String),
    /// `<topic>/where/<filter>/info` (topic, filter): the topic and how the filter served each
    /// partition.
    TopicInfo(String, String),
    /// `<topic>/where/<filter>/by-time/<spec>` (topic, filter, name): the merged stream of the
    /// records the filter keeps.
    TopicStream(String, String, String),
    /// `<topic>/indexes`: the topic's field indexes; a line written declares or drops one.
    Indexes(String),
}

impl WhereDir {
    /// The directory holding this one.
    pub fn parent(&self) -> DirNode {
        match self {
            WhereDir::All(topic) => DirNode::Topic(topic.clone()),
            WhereDir::Filter(topic, _) => DirNode::Where(WhereDir::All(topic.clone())),
            WhereDir::TopicByTime(topic, filter) => {
                DirNode::Where(WhereDir::Filter(topic.clone(), filter.clone()))
            }
            WhereDir::Partition(id, filter) => {
                DirNode::Where(WhereDir::Filter(id.topic.clone(), filter.clone()))
            }
            WhereDir::Streams(id, filter, _) => {
                DirNode::Where(WhereDir::Partition(id.clone(), filter.clone()))
            }
        }
    }

    /// A path-like description for messages.
    pub fn path(&self) -> String {
        match self {
            WhereDir::All(topic) => format!("{topic}/{WHERE}"),
            WhereDir::Filter(topic, filter) => format!("{topic}/{WHERE}/{filter}"),
            WhereDir::TopicByTime(topic, filter) => format!("{topic}/{WHERE}/{filter}/{BY_TIME}"),
            WhereDir::Partition(id, filter) => {
                format!("{}/{WHERE}/{filter}/{}", id.topic, id.partition)
            }
            WhereDir::Streams(id, filter, dir) => {
                format!("{}/{WHERE}/{filter}/{}/{}", id.topic, id.partition, dir.dir_name())
            }
        }
    }
}

impl WhereFile {
    /// The directory holding this file.
    pub fn parent(&self) -> DirNode {
        match self {
            WhereFile::Info(id, filter) => {
                DirNode::Where(WhereDir::Partition(id.clone(), filter.clone()))
            }
            WhereFile::Stream(id, filter, dir, _) => {
                DirNode::Where(WhereDir::Streams(id.clone(), filter.clone(), *dir))
            }
            WhereFile::TopicInfo(topic, filter) => {
                DirNode::Where(WhereDir::Filter(topic.clone(), filter.clone()))
            }
            WhereFile::TopicStream(topic, filter, _) => {
                DirNode::Where(WhereDir::TopicByTime(topic.clone(), filter.clone()))
            }
            WhereFile::Indexes(topic) => DirNode::Topic(topic.clone()),
        }
    }

    /// A path-like description for messages.
    pub fn path(&self) -> String {
        match self {
            WhereFile::Info(id, filter) => {
                format!("{}/{WHERE}/{filter}/{}/{INFO}", id.topic, id.partition)
            }
            WhereFile::Stream(id, filter, dir, name) => {
                format!("{}/{WHERE}/{filter}/{}/{}/{name}", id.topic, id.partition, dir.dir_name())
            }
            WhereFile::TopicInfo(topic, filter) => format!("{topic}/{WHERE}/{filter}/{INFO}"),
            WhereFile::TopicStream(topic, filter, name) => {
                format!("{topic}/{WHERE}/{filter}/{BY_TIME}/{name}")
            }
            WhereFile::Indexes(topic) => format!("{topic}/{INDEXES}"),
        }
    }
}

/// The by-key directories.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KeyDir {
    /// `<topic>/<p>/by-key/`: records by key.
    ByKey(PartitionId),
    /// `<topic>/<p>/latest/`: the last record of each key.
    Latest(PartitionId),
    /// `<topic>/by-key/`: records by key over the topic's partitions.
    Topic(String),
}

/// The by-key files; the names as written in the path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KeyFile {
    /// `<topic>/<p>/by-key/<key>[.json|.raw]`: a stream of the key's records.
    ByKey(PartitionId, String),
    /// `<topic>/<p>/latest/<key>[.json]`: the key's last record.
    Latest(PartitionId, String),
    /// `<topic>/<p>/keys`: the distinct keys with their record counts.
    Keys(PartitionId),
    /// `<topic>/by-key/<key>[.json]`: a stream of the key's records over the topic.
    Topic(String, String),
}

impl KeyDir {
    /// The directory holding this one.
    pub fn parent(&self) -> DirNode {
        match self {
            KeyDir::ByKey(id) | KeyDir::Latest(id) => DirNode::Partition(id.clone()),
            KeyDir::Topic(topic) => DirNode::Topic(topic.clone()),
        }
    }

    /// A path-like description for messages.
    pub fn path(&self) -> String {
        match self {
            KeyDir::ByKey(id) => format!("{}/{}/{BY_KEY}", id.topic, id.partition),
            KeyDir::Latest(id) => format!("{}/{}/{LATEST}", id.topic, id.partition),
            KeyDir::Topic(topic) => format!("{topic}/{BY_KEY}"),
        }
    }
}

impl KeyFile {
    /// The directory holding this file.
    pub fn parent(&self) -> DirNode {
        match self {
            KeyFile::ByKey(id, _) => DirNode::Keys(KeyDir::ByKey(id.clone())),
            KeyFile::Latest(id, _) => DirNode::Keys(KeyDir::Latest(id.clone())),
            KeyFile::Keys(id) => DirNode::Partition(id.clone()),
            KeyFile::Topic(topic, _) => DirNode::Keys(KeyDir::Topic(topic.clone())),
        }
    }

    /// A path-like description for messages.
    pub fn path(&self) -> String {
        match self {
            KeyFile::ByKey(id, name) => format!("{}/{}/{BY_KEY}/{name}", id.topic, id.partition),
            KeyFile::Latest(id, name) => format!("{}/{}/{LATEST}/{name}", id.topic, id.partition),
            KeyFile::Keys(id) => format!("{}/{}/{KEYS}", id.topic, id.partition),
            KeyFile::Topic(topic, name) => format!("{topic}/{BY_KEY}/{name}"),
        }
    }
}

/// The directories of `<topic>/groups/`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GroupDir {
    /// `<topic>/groups/`: the groups with committed offsets for the topic.
    All(String),
    /// `<topic>/groups/<group>/` (topic, group).
    Group(String, String),
    /// `<topic>/groups/<group>/<p>/` (partition, group).
    Partition(PartitionId, String),
}

/// The files of `<topic>/groups/`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GroupFile {
    /// `<topic>/groups/<group>/offsets`: committed offsets and lag; writing commits.
    Offsets(String, String),
    /// `<topic>/groups/<group>/auto.offset.reset`: `earliest` or `latest`.
    Reset(String, String),
    /// `<topic>/groups/<group>/<p>/next[.json|.raw]` (partition, group, name): records from the
    /// committed offset to the end as of resolution.
    Next(PartitionId, String, String),
}

impl GroupDir {
    /// The directory holding this one.
    pub fn parent(&self) -> DirNode {
        match self {
            GroupDir::All(topic) => DirNode::Topic(topic.clone()),
            GroupDir::Group(topic, _) => DirNode::Groups(GroupDir::All(topic.clone())),
            GroupDir::Partition(id, group) => {
                DirNode::Groups(GroupDir::Group(id.topic.clone(), group.clone()))
            }
        }
    }

    /// A path-like description for messages.
    pub fn path(&self) -> String {
        match self {
            GroupDir::All(topic) => format!("{topic}/{GROUPS}"),
            GroupDir::Group(topic, group) => format!("{topic}/{GROUPS}/{group}"),
            GroupDir::Partition(id, group) => {
                format!("{}/{GROUPS}/{group}/{}", id.topic, id.partition)
            }
        }
    }
}

impl GroupFile {
    /// The directory holding this file.
    pub fn parent(&self) -> DirNode {
        match self {
            GroupFile::Offsets(topic, group) | GroupFile::Reset(topic, group) => {
                DirNode::Groups(GroupDir::Group(topic.clone(), group.clone()))
            }
            GroupFile::Next(id, group, _) => {
                DirNode::Groups(GroupDir::Partition(id.clone(), group.clone()))
            }
        }
    }

    /// A path-like description for messages.
    pub fn path(&self) -> String {
        match self {
            GroupFile::Offsets(topic, group) => {
                format!("{topic}/{GROUPS}/{group}/{}", group_view::OFFSETS)
            }
            GroupFile::Reset(topic, group) => {
                format!("{topic}/{GROUPS}/{group}/{}", group_view::AUTO_OFFSET_RESET)
            }
            GroupFile::Next(id, group, name) => {
                format!("{}/{GROUPS}/{group}/{}/{name}", id.topic, id.partition)
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
pub fn topic_children(topic: &str) -> [(&'static str, Node, Needs); 11] {
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
        (WHERE, Node::Dir(DirNode::Where(WhereDir::All(t()))), Needs::Nothing),
        (INDEXES, Node::File(FileNode::Where(WhereFile::Indexes(t()))), Needs::Nothing),
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
