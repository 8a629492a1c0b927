//! Filesystem logic on plain structs: [`TopicFs`] answers lookup, getattr, readdir, open, read,
//! write, flush, release and mkdir with the structs of [`attr`], talking to partitions only
//! through [`TopicSource`]. No fuser type appears here; `crate::fuse` converts.
//!
//! What each path is and does is described in [`node`]; the user-visible promises:
//!
//! - **Streams** (`by-offset/<spec>`, `by-time/<spec>`) are regular files whose `st_size` is
//!   exactly what a full read returns at that moment, with attribute TTL 0 and direct I/O, and
//!   whose mtime is the partition's last modification, so `tail -f` (which polls `fstat`) sees
//!   them grow. A name is resolved (a relative `-10` or `-1h` pinned to offsets) at every
//!   lookup, getattr and open while no handle has it open; while one does, the name keeps
//!   meaning the records that handle reads, so a follower never sees its file shift under it.
//! - **Topic-level files** (`<topic>/offsets/<time>`, `<topic>/by-time/<spec>`,
//!   `<topic>/append`, `<topic>/append.json`): see [`topicfs_view::topic`]. `offsets/<time>` is
//!   rendered at open (its size is exact at that moment); topic streams follow the same pinning
//!   and size rules as partition streams, their mtime is the topic's latest change.
//! - **Appends** (`append`, `append.json`): see [`append`]. Size 0; `O_TRUNC` and `O_APPEND`
//!   are both accepted; errors surface from `write` or `flush`, never only from `release`.
//! - **Topic settings** (`<topic>/config`): see [`config`]. Read-write text; the lines
//!   written between open and `close()` are one change of the topic's overrides, checked at
//!   each `write()` and applied at `close()`, through the source.
//! - **Refusals**: unknown names and unparsable specs are `NotFound`; changing anything other
//!   than by `mkdir`, an append, a group file or `config` is `NotPermitted`, or `ReadOnly` on a
//!   read-only mount.
//!
//! Where each job is: this file holds [`TopicFs`] (its state, constructors and options) and
//! the helpers its files share; each other file adds the methods of one job to it.
//!
//! - [`node`]: the tree's names ([`Node`]), [`inode`]: the inode table, [`handle`]: open
//!   handles, [`attr`]: the plain structs the methods return.
//! - `lookup.rs`: `lookup`, `forget`, `getattr`, `setattr`: naming a child, checking it
//!   exists, the attributes of every kind of node.
//! - `readdir.rs`: `opendir`, `readdir`, `releasedir` and each directory's listing.
//! - `open.rs`: `open`, `read`, `release`, the resolution of stream names and their pins.
//! - `write.rs`: `write`, `flush`, `fsync` and the refusals of writes; [`append`]: the
//!   append handles' line and JSON parsing.
//! - `admin.rs`: `mkdir`, the refusals of other changes of names, `statfs`, `shutdown`.
//! - [`config`]: `<topic>/config`, the topic's settings and changes to its overrides.
//! - `contents.rs`: the text of info and `offsets/<time>` files; [`info`]: the `info` texts
//!   themselves.
//!
//! The operations above handle the core tree (topics, partitions, their streams, appends and
//! texts) and dispatch every other node to its feature, which is one module holding that
//! feature's nodes and everything each operation does with them (see `subtree.rs`):
//!
//! - `groups.rs`: consumer groups (`<topic>/groups/`): their files, `next` streams, commits,
//!   `mkdir` of a group, and their state (`GroupsTree`).
//! - `schemas.rs`: `<topic>/schemas/`.
//! - `bykey.rs`: `by-key/`, `latest/`, `keys`.
//! - `inspection.rs`: `segments/` (segment files and their dumps) and `check`.

pub mod fuse;

pub mod append;
pub mod attr;
mod bykey;
pub mod handle;
pub mod info;
pub mod inode;
pub mod node;
pub mod recent_log;
mod sizing;

mod admin;
pub mod config;
mod contents;
mod filtered;
mod groups;
mod inspection;
mod lookup;
mod open;
mod readdir;
mod schemas;
mod subtree;
mod write;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use topicfs_executor::Executor;
use topicfs_format::Timestamp;
use topicfs_source::error::{Error, Result};
use topicfs_source::{GroupStore, TopicSource};
use topicfs_view::budget::MemoryBudget;
use topicfs_view::groups::ResetPolicy;
use topicfs_view::readahead::AheadPool;
use topicfs_view::stream::StreamRegistry;
use topicfs_view::topic::TopicViews;

use handle::{HandleTable, StreamRef};
use inode::InodeTable;
use node::{DirNode, FileNode, INFO, Node, PartitionId};
use subtree::SubtreeFile;

/// Stream handles open at once from which closing half of them gives freed memory back to the
/// system ([`TopicFs::release`]).
const TRIM_AFTER: usize = 16;

/// Settings of one mount that the filesystem logic needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsOptions {
    /// Refuse every change with `ReadOnly` (`EROFS`).
    pub read_only: bool,
    /// Partitions of a topic created by `mkdir <topic>`.
    pub partitions_per_topic: u32,
    /// Longest line an append handle keeps waiting for its newline (`max.message.bytes`).
    pub max_line_bytes: usize,
    /// Owner shown on every file.
    pub uid: u32,
    pub gid: u32,
    /// Permission bits of files: read-only files show its read bits, `append` files its write
    /// bits.
    pub file_mode: u16,
    /// Permission bits of directories: the root and topic directories of a read-write mount
    /// show all of them, the others its read and search bits.
    pub dir_mode: u16,
}

/// [`FsOptions::file_mode`] unless the mount says otherwise: streams `0444`, appends `0220`.
pub const DEFAULT_FILE_MODE: u16 = 0o664;
/// [`FsOptions::dir_mode`] unless the mount says otherwise: root and topic directories `0755`
/// (`0555` read-only), the others `0555`.
pub const DEFAULT_DIR_MODE: u16 = 0o755;

/// A stream resolved for one inode, and how many open handles read it.
#[derive(Debug)]
struct Pin {
    stream: StreamRef,
    /// **Invariant**: the number of live `Handle::Stream` with this inode.
    open: usize,
}

/// The filesystem: inodes, handles and the rules of each path, over a [`TopicSource`].
///
/// Thread-safe: every method takes `&self`. Locks (inode table, handle table, pins, one
/// handle's state) are each held only for map operations, never two at once and never across a
/// call into the source, except a handle's own state lock, held across its append so one
/// handle's writes stay in order.
pub struct TopicFs {
    source: Arc<dyn TopicSource>,
    streams: StreamRegistry,
    /// The mount's field indexes, made at first use ([`TopicFs::field_indexes`]).
    field_indexes: std::sync::OnceLock<Arc<topicfs_view::field_index::FieldIndexes>>,
    /// Render workers of read-ahead and the memory budget shared by read-ahead windows and the
    /// renderings streams keep (see [`topicfs_view::budget`]).
    ahead: AheadPool,
    /// Merge indexes of topic-level streams and each topic's keyless append rotation.
    /// **Invariant**: its transaction trackers are `streams`' ([`StreamRegistry::trackers`]),
    /// so a partition is scanned once however it is read.
    topics: TopicViews,
    /// The registries of `where/<filter>/` views used last (`filtered.rs`).
    filters: filtered::FilterRegistries,
    /// Rendered segment dumps and check reports.
    inspect: topicfs_view::inspect::InspectCache,
    options: FsOptions,
    inodes: InodeTable,
    handles: HandleTable,
    /// Streams that open handles read, by inode number; an entry lives while a handle is open
    /// (**invariant**: `open > 0` for every entry).
    pins: Mutex<HashMap<u64, Pin>>,
    /// Open stream handles, and the most open since memory was last given back (see
    /// [`TopicFs::release`]).
    open_streams: Mutex<(usize, usize)>,
    /// Gives memory freed in the allocator's heaps back to the system (the daemon passes
    /// glibc's `malloc_trim`, see [`TopicFs::with_memory_release`]); `None`: nothing to do.
    release_memory: Option<fn() -> bool>,
    /// The daemon's most recent warnings and errors (`@log`) and where its log goes (`log:`
    /// in `@info`); `None`: `@log` is empty and `@info` has no `log:` line.
    recent_log: Option<Arc<recent_log::RecentLog>>,
    /// Set when [`TopicFs::shutdown`] starts: appends are refused from then on.
    closing: AtomicBool,
    /// Whether the shutdown completed; held for the whole shutdown so a second caller waits
    /// for the first instead of racing it.
    shut_down: Mutex<bool>,
    /// Shown as the mtime of the root and of topics without partitions.
    started: SystemTime,
    /// Consumer groups (`<topic>/groups/`): their store, settings and auto-commit.
    groups: groups::GroupsTree,
    /// List internal topics (`__consumer_offsets`, ...) in the root.
    show_internal: bool,
    /// The most partitions a topic may get through `mkdir` ([`TopicFs::with_max_partitions`]).
    max_partitions: u32,
    /// Sizing steps `stat` left to the background (see [`sizing::SizingSteps`]).
    sizing_steps: sizing::SizingSteps,
    /// Sizing of what append handles appended, once closed (see [`sizing::AppendedSizing`]).
    appended_sizing: sizing::AppendedSizing,
}

/// Kafka's internal topics, not listed in the root unless the mount shows them (they can still
/// be looked up by name).
pub const INTERNAL_TOPICS: &[&str] =
    &["__consumer_offsets", "__transaction_state", "__cluster_metadata", "__share_group_state"];

/// Whether `topic` is one of Kafka's internal topics ([`INTERNAL_TOPICS`]): the broker's own
/// (group offsets, transaction state, the KRaft metadata log). The mount never creates one
/// with `mkdir`, adds partitions to one, or appends to one: Kafka refuses a client's
/// CreateTopics of `__cluster_metadata` (INVALID_REQUEST, "Creation of internal topic ... is
/// prohibited") and a client's Produce to an internal topic (INVALID_TOPIC_EXCEPTION,
/// "Cannot append to internal topic"). Consumer groups' commits (`groups/<g>/offsets`) still
/// write `__consumer_offsets`, through the group store, as a coordinator does.
pub fn is_internal_topic(topic: &str) -> bool {
    INTERNAL_TOPICS.contains(&topic)
}

/// [`TopicFs::with_max_partitions`] unless the mount says otherwise (`--max-partitions`): a
/// KRaft controller refuses more than 10,000 partitions in one request
/// (`MAX_PARTITIONS_PER_BATCH`).
pub const DEFAULT_MAX_PARTITIONS: u32 = 10_000;

impl std::fmt::Debug for TopicFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicFs")
            .field("options", &self.options)
            .field("inodes", &self.inodes.len())
            .field("handles", &self.handles.len())
            .finish()
    }
}

impl TopicFs {
    /// A filesystem over `source`.
    pub fn new(source: Arc<dyn TopicSource>, options: FsOptions) -> TopicFs {
        let ahead = AheadPool::new(
            Executor::default(),
            Arc::new(topicfs_view::budget::MemoryBudget::default()),
        );
        let streams = StreamRegistry::new().with_budget(ahead.budget());
        let topics = TopicViews::with_trackers(Arc::clone(streams.trackers()));
        TopicFs {
            source,
            streams,
            field_indexes: std::sync::OnceLock::new(),
            ahead,
            topics,
            filters: filtered::FilterRegistries::default(),
            inspect: topicfs_view::inspect::InspectCache::new(),
            options,
            inodes: InodeTable::new(),
            handles: HandleTable::new(),
            pins: Mutex::new(HashMap::new()),
            open_streams: Mutex::new((0, 0)),
            release_memory: None,
            recent_log: None,
            started: SystemTime::now(),
            closing: AtomicBool::new(false),
            shut_down: Mutex::new(false),
            groups: groups::GroupsTree::default(),
            show_internal: false,
            max_partitions: DEFAULT_MAX_PARTITIONS,
            sizing_steps: sizing::SizingSteps::default(),
            appended_sizing: sizing::AppendedSizing::default(),
        }
    }

    /// Waits until the sizing steps `stat` left to the background are done, at most
    /// `timeout`; whether they are (for tests and measurements).
    pub fn wait_for_sizing_steps(&self, timeout: std::time::Duration) -> bool {
        self.sizing_steps.wait_idle(timeout)
    }

    /// Requests waiting for or holding the shared render index of `topic`-`partition` in
    /// `format` now (0 before it exists): background sizing of it yields while there are any
    /// (for tests and measurements).
    pub fn index_requests(
        &self,
        topic: &str,
        partition: u32,
        format: topicfs_view::spec::Format,
    ) -> usize {
        self.streams.requests_waiting(topic, partition, format)
    }

    /// The same filesystem committing, when a `groups/<group>/<p>/next` handle that read its
    /// whole range is closed, the end of that range (what `kcat -G` does on close: at-most-once
    /// for what the reader had not processed yet). Call before the first request.
    pub fn with_auto_commit(mut self, auto_commit: bool) -> TopicFs {
        self.groups = std::mem::take(&mut self.groups).with_auto_commit(auto_commit);
        self
    }

    /// The same filesystem with `<topic>/groups/` over `store`, groups without a usable commit
    /// starting at `reset`. Call before the first request.
    pub fn with_groups(mut self, store: Arc<dyn GroupStore>, reset: ResetPolicy) -> TopicFs {
        self.groups = std::mem::take(&mut self.groups).with_store(store, reset);
        self
    }

    /// The same filesystem listing Kafka's internal topics ([`INTERNAL_TOPICS`]) in the root
    /// when `show` is set (they are hidden by default, as `kafka-topics --exclude-internal` does).
    pub fn with_internal_topics(mut self, show: bool) -> TopicFs {
        self.show_internal = show;
        self
    }

    /// The same filesystem refusing (`EINVAL`, nothing created) a `mkdir` that would give a
    /// topic more than `max` partitions (default [`DEFAULT_MAX_PARTITIONS`]).
    pub fn with_max_partitions(mut self, max: u32) -> TopicFs {
        self.max_partitions = max;
        self
    }

    /// The same filesystem with streams at `isolation` (default `read_committed`, see
    /// [`topicfs_view::txn`]). Call before the first request.
    pub fn with_isolation(mut self, isolation: topicfs_view::txn::Isolation) -> TopicFs {
        let schemas = self.streams.schemas().cloned();
        let payload = self.streams.json_payload();
        let txns = Arc::new(topicfs_view::txn::TxnTrackers::new(isolation));
        self.streams = StreamRegistry::with_trackers(Arc::clone(&txns))
            .with_budget(self.ahead.budget())
            .with_schemas(schemas.clone())
            .with_json_payload(payload);
        self.topics =
            TopicViews::with_trackers(txns).with_schemas(schemas).with_json_payload(payload);
        self
    }

    /// The same filesystem with a memory budget of `budget_bytes` for rendered bytes held
    /// beyond a request (read-ahead windows, kept renderings) and `background_threads` workers
    /// of its background executor (defaults: [`topicfs_view::budget::DEFAULT_MEMORY_BUDGET`],
    /// one per core). Call before the first request.
    pub fn with_limits(self, budget_bytes: usize, background_threads: usize) -> TopicFs {
        self.with_shared_limits(MemoryBudget::new(budget_bytes), background_threads)
    }

    /// [`TopicFs::with_limits`] with a budget the caller shares with the backend (a cluster
    /// holds the bytes of its fetches in flight in it, `ClusterSource::with_fetch_memory`).
    pub fn with_shared_limits(
        self,
        budget: Arc<MemoryBudget>,
        background_threads: usize,
    ) -> TopicFs {
        self.with_shared_executor(budget, Executor::new(background_threads))
    }

    /// [`TopicFs::with_shared_limits`] with an executor the caller shares with the backend: the
    /// mount makes one and hands it to the log engine too (its key-index builds and segment-cache
    /// writes), so the mount has one pool of background threads. Call before the first request.
    pub fn with_shared_executor(
        mut self,
        budget: Arc<MemoryBudget>,
        executor: Executor,
    ) -> TopicFs {
        self.ahead.executor().shutdown();
        self.ahead = AheadPool::new(executor, budget);
        // The same registry (its trackers are the topic views' too) over the new budget.
        self.streams = std::mem::take(&mut self.streams).with_budget(self.ahead.budget());
        self
    }

    /// The same filesystem showing keys and values in the Confluent wire format decoded with
    /// `schemas` in every `.json` stream, and encoding `append.json` payloads that name a schema
    /// (see [`topicfs_view::schemas`]); `None`: bytes as stored. Call before the first request.
    pub fn with_schemas(mut self, schemas: Option<Arc<topicfs_view::schemas::Schemas>>) -> TopicFs {
        self.streams = std::mem::take(&mut self.streams).with_schemas(schemas.clone());
        self.topics = std::mem::take(&mut self.topics).with_schemas(schemas);
        self
    }

    /// The same filesystem showing payloads that are JSON as `payload` says in every `.json`
    /// stream (`-o json_payload=`; see [`topicfs_view::render`]). Call before the first request.
    pub fn with_json_payload(mut self, payload: topicfs_view::render::JsonPayload) -> TopicFs {
        self.streams = std::mem::take(&mut self.streams).with_json_payload(payload);
        self.topics = std::mem::take(&mut self.topics).with_json_payload(payload);
        self
    }

    /// The schemas `.json` streams decode with, if any.
    pub fn schemas(&self) -> Option<&Arc<topicfs_view::schemas::Schemas>> {
        self.streams.schemas()
    }

    /// The same filesystem calling `release` (which gives memory freed in the allocator's heaps
    /// back to the system) once many stream handles have closed; see [`TopicFs::release`].
    /// The daemon passes `mount::memory::return_freed_memory` (the filesystem logic imports nothing
    /// of `storage` but its segment files interface).
    pub fn with_memory_release(mut self, release: fn() -> bool) -> TopicFs {
        self.release_memory = Some(release);
        self
    }

    /// The same filesystem showing `log`'s records in `@log` and its destination in `@info`.
    pub fn with_recent_log(mut self, log: Arc<recent_log::RecentLog>) -> TopicFs {
        self.recent_log = Some(log);
        self
    }

    /// The mount's read-ahead pool and memory budget (for statistics and tests).
    pub fn read_ahead_pool(&self) -> &AheadPool {
        &self.ahead
    }

    /// The mount's background executor (read-ahead, deferred stats, mount sizing; the log
    /// engine's store work when the mount shares it, [`TopicFs::with_shared_executor`]; see
    /// [`topicfs_executor`]).
    pub fn executor(&self) -> &Executor {
        self.ahead.executor()
    }

    /// The options this filesystem was built with.
    pub fn options(&self) -> &FsOptions {
        &self.options
    }
}

/// A path-like description of a node for messages (`orders/0/by-offset/-10`).
pub fn describe(node: &Node) -> String {
    let partition = |id: &PartitionId| format!("{}/{}", id.topic, id.partition);
    match node {
        Node::Dir(DirNode::Root) => "/".to_string(),
        Node::File(FileNode::MountInfo) => node::MOUNT_INFO.to_string(),
        Node::File(FileNode::MountLog) => node::MOUNT_LOG.to_string(),
        Node::Dir(DirNode::Schemas(dir)) => dir.path(),
        Node::File(FileNode::Schemas(file)) => file.path(),
        Node::Dir(DirNode::Where(dir)) => dir.path(),
        Node::File(FileNode::Where(file)) => file.path(),
        Node::Dir(DirNode::Topic(topic)) => topic.clone(),
        Node::File(FileNode::TopicInfo(topic)) => format!("{topic}/{INFO}"),
        Node::File(FileNode::TopicConfig(topic)) => format!("{topic}/{}", node::CONFIG),
        Node::Dir(DirNode::OffsetsDir(topic)) => format!("{topic}/{}", node::OFFSETS),
        Node::File(FileNode::Offsets(topic, name)) => format!("{topic}/{}/{name}", node::OFFSETS),
        Node::Dir(DirNode::TopicByTimeDir(topic)) => format!("{topic}/{}", node::BY_TIME),
        Node::File(FileNode::TopicStream(topic, name)) => {
            format!("{topic}/{}/{name}", node::BY_TIME)
        }
        Node::File(FileNode::TopicAppend(topic)) => format!("{topic}/{}", node::APPEND),
        Node::File(FileNode::TopicAppendJson(topic)) => format!("{topic}/{}", node::APPEND_JSON),
        Node::Dir(DirNode::Partition(id)) => partition(id),
        Node::File(FileNode::PartitionInfo(id)) => format!("{}/{INFO}", partition(id)),
        Node::Dir(DirNode::ByOffsetDir(id)) => format!("{}/{}", partition(id), node::BY_OFFSET),
        Node::Dir(DirNode::ByTimeDir(id)) => format!("{}/{}", partition(id), node::BY_TIME),
        Node::File(FileNode::Stream(id, dir, name)) => {
            format!("{}/{}/{name}", partition(id), dir.dir_name())
        }
        Node::File(FileNode::Append(id)) => format!("{}/{}", partition(id), node::APPEND),
        Node::File(FileNode::AppendJson(id)) => format!("{}/{}", partition(id), node::APPEND_JSON),
        Node::Dir(DirNode::Inspect(dir)) => dir.path(),
        Node::File(FileNode::Inspect(file)) => file.path(),
        Node::Dir(DirNode::Keys(dir)) => dir.path(),
        Node::File(FileNode::Keys(file)) => file.path(),
        Node::Dir(DirNode::Groups(dir)) => dir.path(),
        Node::File(FileNode::Groups(file)) => file.path(),
    }
}

/// Whether a node is a stream file (of a partition, of a topic, or a group's `next`).
fn is_stream(node: &Node) -> bool {
    let Node::File(file) = node else { return false };
    match file {
        FileNode::Stream(..) | FileNode::TopicStream(..) => true,
        FileNode::MountInfo
        | FileNode::MountLog
        | FileNode::TopicInfo(_)
        | FileNode::TopicConfig(_)
        | FileNode::Offsets(..)
        | FileNode::TopicAppend(_)
        | FileNode::TopicAppendJson(_)
        | FileNode::PartitionInfo(_)
        | FileNode::Append(_)
        | FileNode::AppendJson(_) => false,
        FileNode::Schemas(file) => file.is_stream(),
        FileNode::Where(file) => file.is_stream(),
        FileNode::Inspect(file) => file.is_stream(),
        FileNode::Keys(file) => file.is_stream(),
        FileNode::Groups(file) => file.is_stream(),
    }
}

/// Whether a node is a file that takes writes (`append` files, `config`, a group's files):
/// those accept `O_TRUNC` and a truncation to 0 (without effect) on a read-write mount.
fn is_writable(node: &Node) -> bool {
    let Node::File(file) = node else { return false };
    match file {
        FileNode::Append(_)
        | FileNode::AppendJson(_)
        | FileNode::TopicAppend(_)
        | FileNode::TopicAppendJson(_)
        | FileNode::TopicConfig(_) => true,
        FileNode::MountInfo
        | FileNode::MountLog
        | FileNode::TopicInfo(_)
        | FileNode::Offsets(..)
        | FileNode::TopicStream(..)
        | FileNode::PartitionInfo(_)
        | FileNode::Stream(..) => false,
        FileNode::Schemas(file) => file.is_writable(),
        FileNode::Where(file) => file.is_writable(),
        FileNode::Inspect(file) => file.is_writable(),
        FileNode::Keys(file) => file.is_writable(),
        FileNode::Groups(file) => file.is_writable(),
    }
}

/// Names are UTF-8 (topic names are ASCII, specs are ASCII); anything else does not exist.
fn name_str(name: &OsStr) -> Result<&str> {
    name.to_str().ok_or_else(|| Error::NotFound(format!("{name:?} is not a UTF-8 name")))
}

/// Now in epoch milliseconds (anchors relative `by-time/` specs).
fn now_ms() -> Timestamp {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
