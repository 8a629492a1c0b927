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
//!   `<topic>/append`, `<topic>/append.json`): see [`crate::view::topic`]. `offsets/<time>` is
//!   rendered at open (its size is exact at that moment); topic streams follow the same pinning
//!   and size rules as partition streams, their mtime is the topic's latest change.
//! - **Appends** (`append`, `append.json`): see [`append`]. Size 0; `O_TRUNC` and `O_APPEND`
//!   are both accepted; errors surface from `write` or `flush`, never only from `release`.
//! - **Refusals**: unknown names and unparsable specs are `NotFound`; changing anything other
//!   than by `mkdir` or an append is `NotPermitted`, or `ReadOnly` on a read-only mount.

pub mod append;
pub mod attr;
pub mod handle;
pub mod info;
pub mod inode;
pub mod node;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::format::Timestamp;
use crate::source::{GroupStore, PartitionSource, TopicSource};
use crate::storage::segment_files::SegmentSummary;
use crate::sync::lock;
use crate::view::budget::MemoryBudget;
use crate::view::groups::{self as group_view, ResetPolicy};
use crate::view::inspect::files;
use crate::view::inspect::{DUMP_SUFFIX, Inspection, InspectionReader};
use crate::view::readahead::AheadPool;
use crate::view::spec::StreamSpec;
use crate::view::stream::StreamRegistry;
use crate::view::topic::{self as topic_view, TopicViews};

use append::{AppendFormat, AppendState, AppendTarget};
use attr::{
    Attr, AttrReply, BLOCK_SIZE, DYNAMIC_TTL, DirEntry, Entry, FileKind, NAME_MAX, OpenRequest,
    Opened, SEALED_BLOCK_SIZE, STABLE_TTL, SetAttrRequest, StatFs,
};
use handle::{Handle, HandleTable, StreamRef};
use inode::InodeTable;
use node::{INFO, Node, PartitionId, StreamDir, parse_partition, parse_segment_file_name};

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
    /// Render workers of read-ahead and the memory budget shared by read-ahead windows and the
    /// renderings streams keep (see [`crate::view::budget`]).
    ahead: AheadPool,
    /// Merge indexes of topic-level streams and each topic's keyless append rotation.
    topics: TopicViews,
    /// Rendered segment dumps and check reports.
    inspect: crate::view::inspect::InspectCache,
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
    /// Set when [`TopicFs::shutdown`] starts: appends are refused from then on.
    closing: AtomicBool,
    /// Whether the shutdown completed; held for the whole shutdown so a second caller waits
    /// for the first instead of racing it.
    shut_down: Mutex<bool>,
    /// Shown as the mtime of the root and of topics without partitions.
    started: SystemTime,
    /// Consumer groups (`<topic>/groups/`); `None`: the tree has no `groups` directories.
    groups: Option<Arc<dyn GroupStore>>,
    /// The mount's `auto.offset.reset`.
    default_reset: ResetPolicy,
    /// Groups made by `mkdir` or given their own `auto.offset.reset`, by (topic, group), held
    /// for the life of the mount: a group exists while it has a committed offset or an entry
    /// here. `None`: the mount's policy.
    group_settings: Mutex<HashMap<(String, String), Option<ResetPolicy>>>,
    /// List internal topics (`__consumer_offsets`, ...) in the root.
    show_internal: bool,
    /// `-o auto_commit`: closing a `next` handle that read to its end commits that end.
    auto_commit: bool,
    /// With `auto_commit`: how far each open `next` handle has read (bytes), by handle.
    read_to: Mutex<HashMap<u64, u64>>,
}

/// Kafka's internal topics, not listed in the root unless the mount shows them (they can still
/// be looked up by name).
pub const INTERNAL_TOPICS: &[&str] =
    &["__consumer_offsets", "__transaction_state", "__cluster_metadata", "__share_group_state"];

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
        let ahead = AheadPool::default();
        TopicFs {
            source,
            streams: StreamRegistry::new().with_budget(ahead.budget()),
            ahead,
            topics: TopicViews::new(),
            inspect: crate::view::inspect::InspectCache::new(),
            options,
            inodes: InodeTable::new(),
            handles: HandleTable::new(),
            pins: Mutex::new(HashMap::new()),
            open_streams: Mutex::new((0, 0)),
            release_memory: None,
            started: SystemTime::now(),
            closing: AtomicBool::new(false),
            shut_down: Mutex::new(false),
            groups: None,
            default_reset: ResetPolicy::Earliest,
            group_settings: Mutex::new(HashMap::new()),
            show_internal: false,
            auto_commit: false,
            read_to: Mutex::new(HashMap::new()),
        }
    }

    /// The same filesystem committing, when a `groups/<group>/<p>/next` handle that read its
    /// whole range is closed, the end of that range (what `kcat -G` does on close: at-most-once
    /// for what the reader had not processed yet). Call before the first request.
    pub fn with_auto_commit(mut self, auto_commit: bool) -> TopicFs {
        self.auto_commit = auto_commit;
        self
    }

    /// The same filesystem with `<topic>/groups/` over `store`, groups without a usable commit
    /// starting at `reset`. Call before the first request.
    pub fn with_groups(mut self, store: Arc<dyn GroupStore>, reset: ResetPolicy) -> TopicFs {
        self.groups = Some(store);
        self.default_reset = reset;
        self
    }

    /// The same filesystem listing Kafka's internal topics ([`INTERNAL_TOPICS`]) in the root
    /// when `show` is set (they are hidden by default, as `kafka-topics --exclude-internal` does).
    pub fn with_internal_topics(mut self, show: bool) -> TopicFs {
        self.show_internal = show;
        self
    }

    /// The same filesystem with streams at `isolation` (default `read_committed`, see
    /// [`crate::view::txn`]). Call before the first request.
    pub fn with_isolation(mut self, isolation: crate::view::txn::Isolation) -> TopicFs {
        self.streams = StreamRegistry::with_isolation(isolation).with_budget(self.ahead.budget());
        self.topics = TopicViews::with_isolation(isolation);
        self
    }

    /// The same filesystem with a memory budget of `budget_bytes` for rendered bytes held
    /// beyond a request (read-ahead windows, kept renderings) and `render_threads` read-ahead
    /// workers (defaults: [`crate::view::budget::DEFAULT_MEMORY_BUDGET`], one per core). Call
    /// before the first request.
    pub fn with_limits(mut self, budget_bytes: usize, render_threads: usize) -> TopicFs {
        self.ahead = AheadPool::new(render_threads, MemoryBudget::new(budget_bytes));
        let isolation = self.streams.isolation();
        self.streams = StreamRegistry::with_isolation(isolation).with_budget(self.ahead.budget());
        self
    }

    /// The same filesystem calling `release` (which gives memory freed in the allocator's heaps
    /// back to the system) once many stream handles have closed; see [`TopicFs::release`].
    /// The daemon passes `mount::memory::return_freed_memory` (the filesystem logic imports nothing
    /// of `storage` but its segment files interface).
    pub fn with_memory_release(mut self, release: fn() -> bool) -> TopicFs {
        self.release_memory = Some(release);
        self
    }

    /// The mount's read-ahead pool and memory budget (for statistics and tests).
    pub fn read_ahead_pool(&self) -> &AheadPool {
        &self.ahead
    }

    /// The options this filesystem was built with.
    pub fn options(&self) -> &FsOptions {
        &self.options
    }

    /// Looks `name` up in directory `parent`, taking one kernel reference on the result.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<Entry> {
        let parent = self.node(parent)?;
        let node = self.child(&parent, name)?;
        if is_stream(&node) {
            // Resolved before it gets an inode: a name that does not resolve does not exist.
            let stream = self.resolve_for_lookup(&node)?;
            let reply = self.stream_attr(0, &node, &stream)?;
            let ino = self.inodes.lookup(&node);
            // Keeps the pin of a handle that opened the name meanwhile (TTL 0: the next stat
            // shows its size).
            self.pin(ino, stream);
            let attr = Attr { ino, ..reply.attr };
            return Ok(Entry { attr, entry_ttl: STABLE_TTL, attr_ttl: reply.ttl });
        }
        // Attributes first: they check the node exists before it gets an inode.
        let reply = self.attr_of(0, &node)?;
        let ino = self.inodes.lookup(&node);
        Ok(Entry { attr: Attr { ino, ..reply.attr }, entry_ttl: STABLE_TTL, attr_ttl: reply.ttl })
    }

    /// Drops `nlookup` kernel references to `ino`.
    pub fn forget(&self, ino: u64, nlookup: u64) {
        if self.inodes.forget(ino, nlookup) {
            lock(&self.pins).remove(&ino);
        }
    }

    /// Attributes of `ino`; `fh` (when the kernel passes one) selects an open stream's view.
    pub fn getattr(&self, ino: u64, fh: Option<u64>) -> Result<AttrReply> {
        let node = self.node(ino)?;
        if is_stream(&node) {
            let stream = match fh.map(|fh| self.handles.get(fh)) {
                Some(Ok(handle)) => match &*handle {
                    Handle::Stream { stream, .. } => stream.clone(),
                    _ => self.pinned(ino, &node)?,
                },
                _ => self.pinned(ino, &node)?,
            };
            return self.stream_attr(ino, &node, &stream);
        }
        self.attr_of(ino, &node)
    }

    /// `setattr`: only `append` files accept a change, and only truncation to 0 (what `>`
    /// does) and time updates (`touch`), both without effect. Everything else is refused.
    pub fn setattr(&self, ino: u64, request: &SetAttrRequest) -> Result<AttrReply> {
        let node = self.node(ino)?;
        let reply = self.getattr(ino, None)?;
        match node {
            Node::Append(_)
            | Node::AppendJson(_)
            | Node::TopicAppend(_)
            | Node::TopicAppendJson(_)
            | Node::GroupOffsets(..)
            | Node::GroupReset(..) => {
                self.check_writable()?;
                if request.mode.is_some() || request.uid.is_some() || request.gid.is_some() {
                    return Err(Error::NotPermitted("changing the mode or owner of a file"));
                }
                match request.size {
                    None | Some(0) => Ok(reply),
                    Some(_) => {
                        Err(Error::NotPermitted("an append file can only be truncated to 0"))
                    }
                }
            }
            _ => {
                self.check_writable()?;
                Err(Error::NotPermitted("changing the attributes of a file other than append"))
            }
        }
    }

    /// Opens a directory: its entries are listed now, and served from this list until
    /// `releasedir` (or a `readdir` from offset 0, which lists again).
    pub fn opendir(&self, ino: u64) -> Result<Opened> {
        let node = self.node(ino)?;
        if !node.is_dir() {
            return Err(Error::NotFound(format!("{} is not a directory", describe(&node))));
        }
        let entries = self.list(ino, &node)?;
        let fh = self.handles.insert(Handle::Dir { ino, entries: Mutex::new(entries) });
        Ok(Opened { fh, direct_io: false, keep_cache: false, backing: None, no_flush: false })
    }

    /// Lists the directory from `offset` (0, or an entry's `next_offset`), calling `add` for
    /// each entry until it returns `true` (the reply buffer is full) or the entries end.
    pub fn readdir(
        &self,
        ino: u64,
        fh: u64,
        offset: u64,
        add: &mut dyn FnMut(&DirEntry) -> bool,
    ) -> Result<()> {
        let handle = self.handles.get(fh)?;
        let Handle::Dir { ino: dir_ino, entries } = &*handle else {
            return Err(Error::StaleHandle);
        };
        if *dir_ino != ino {
            return Err(Error::StaleHandle);
        }
        if offset == 0 {
            let node = self.node(ino)?;
            let fresh = self.list(ino, &node)?;
            *lock(entries) = fresh;
        }
        let entries = lock(entries);
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        for entry in entries.iter().skip(skip) {
            if add(entry) {
                break;
            }
        }
        Ok(())
    }

    /// Closes a directory handle.
    pub fn releasedir(&self, fh: u64) -> Result<()> {
        self.handles.remove(fh).map(drop)
    }

    /// Opens a file. Streams, info and segment files are read-only (direct I/O, so reads follow
    /// the current size; a sealed segment's files, which never change, are cached and name
    /// their file on disk as [`Opened::backing`]); `append` files are write-only in effect
    /// (reading them gives nothing).
    pub fn open(&self, ino: u64, request: OpenRequest) -> Result<Opened> {
        let node = self.node(ino)?;
        let direct =
            |fh| Opened { fh, direct_io: true, keep_cache: false, backing: None, no_flush: true };
        // `append` files flush their pending partial line at each close.
        let append = |fh| Opened { no_flush: false, ..direct(fh) };
        match &node {
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
            | Node::GroupPartition(..) => Err(Error::Unsupported("open of a directory as a file")),
            Node::GroupOffsets(..) | Node::GroupReset(..) => {
                if request.write || request.truncate {
                    self.check_writable()?;
                }
                let text = self.group_text(&node)?.into_bytes();
                let handle = Handle::Group { node: node.clone(), text };
                Ok(append(self.handles.insert(handle)))
            }
            Node::TopicInfo(_) | Node::PartitionInfo(_) => {
                self.refuse_write(request, "writing an info file")?;
                let text = self.info_text(&node)?;
                Ok(direct(self.handles.insert(Handle::Text(text.into_bytes()))))
            }
            Node::SegmentDump(..) | Node::PartitionCheck(_) => {
                self.refuse_write(request, "writing an inspection file")?;
                let reader = InspectionReader::new(self.inspection(&node)?);
                Ok(direct(self.handles.insert(Handle::Inspection(reader))))
            }
            Node::Offsets(..) => {
                self.refuse_write(request, "writing an offsets file")?;
                let text = self.offsets_text(&node)?;
                Ok(direct(self.handles.insert(Handle::Text(text.into_bytes()))))
            }
            Node::TopicAppend(topic) | Node::TopicAppendJson(topic) => {
                if request.write || request.truncate {
                    self.check_writable()?;
                }
                let format = match node {
                    Node::TopicAppendJson(_) => AppendFormat::Json,
                    _ => AppendFormat::Lines,
                };
                // The topic must exist now; its partition count is read at every write.
                self.source.partitions(topic)?;
                let appender = self.topics.appender(Arc::clone(&self.source), topic);
                let target = AppendTarget::Topic(appender);
                let state = AppendState::for_target(target, format, self.options.max_line_bytes);
                Ok(append(self.handles.insert(Handle::Append(Mutex::new(state)))))
            }
            Node::Stream(..) | Node::TopicStream(..) | Node::GroupNext(..) => {
                self.refuse_write(request, "writing a stream")?;
                let stream = self.open_pinned(ino, &node)?;
                let ahead = stream.read_ahead(&self.ahead);
                let fh = self.handles.insert(Handle::Stream { ino, stream, ahead });
                let mut open = lock(&self.open_streams);
                open.0 = open.0.saturating_add(1);
                open.1 = open.1.max(open.0);
                if self.auto_commit
                    && !self.options.read_only
                    && matches!(node, Node::GroupNext(..))
                {
                    lock(&self.read_to).insert(fh, 0);
                    // The commit happens at `flush`, which `close()` waits for (`release` is
                    // sent after `close()` returned).
                    return Ok(append(fh));
                }
                Ok(direct(fh))
            }
            Node::SegmentFile(id, base_offset, kind) => {
                self.refuse_write(request, "writing a segment file")?;
                // Fails with NotFound once retention deleted the segment.
                let segment = self.segment(id, *base_offset)?;
                if segment_file_size(&segment, *kind).is_none() {
                    let what = describe(&node);
                    return Err(Error::NotFound(format!("{what} has no {}", kind.suffix())));
                }
                let partition = self.partition(id)?;
                // A sealed segment's files never change: the kernel may keep their pages and
                // read the file on disk itself. The active one's go through `read` (its index
                // has a zero tail that is not shown, its `.log` may end in a partial batch).
                let backing = if segment.is_active {
                    None
                } else {
                    files(partition.as_ref())?.sealed_segment_file(*base_offset, *kind)?
                };
                let handle = Handle::Segment { partition, base_offset: *base_offset, kind: *kind };
                let fh = self.handles.insert(handle);
                Ok(match backing {
                    Some(file) => Opened {
                        fh,
                        direct_io: false,
                        keep_cache: true,
                        backing: Some(file),
                        no_flush: true,
                    },
                    None => direct(fh),
                })
            }
            Node::Append(id) | Node::AppendJson(id) => {
                if request.write || request.truncate {
                    self.check_writable()?;
                }
                let format = match node {
                    Node::AppendJson(_) => AppendFormat::Json,
                    _ => AppendFormat::Lines,
                };
                let partition = self.partition(id)?;
                let state = AppendState::new(partition, format, self.options.max_line_bytes);
                Ok(append(self.handles.insert(Handle::Append(Mutex::new(state)))))
            }
        }
    }

    /// Reads up to `size` bytes at `offset` of an open file (fewer at its current end).
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>> {
        let size = size as usize;
        match &*self.handles.get(fh)? {
            Handle::Text(text) | Handle::Group { text, .. } => {
                let start = usize::try_from(offset).unwrap_or(usize::MAX).min(text.len());
                let end = start.saturating_add(size).min(text.len());
                Ok(text.get(start..end).unwrap_or_default().to_vec())
            }
            Handle::Inspection(reader) => reader.read_at(offset, size),
            Handle::Stream { stream, ahead, .. } => {
                let data = match ahead {
                    Some(ahead) => ahead.read(offset, size)?,
                    None => stream.read_at(offset, size)?,
                };
                if self.auto_commit {
                    if let Some(read_to) = lock(&self.read_to).get_mut(&fh) {
                        *read_to = (*read_to).max(offset.saturating_add(data.len() as u64));
                    }
                }
                Ok(data)
            }
            Handle::Segment { partition, base_offset, kind } => {
                let mut buf = vec![0; size];
                let n = files(partition.as_ref())?.read_segment_file(
                    *base_offset,
                    *kind,
                    offset,
                    &mut buf,
                )?;
                buf.truncate(n);
                Ok(buf)
            }
            Handle::Append(_) => Ok(Vec::new()),
            Handle::Dir { .. } => Err(Error::Unsupported("read of a directory")),
        }
    }

    /// Writes to an open `append` file: complete lines become one append, visible when this
    /// returns. `owner` is the kernel's lock owner of the writing process, when sent. Returns
    /// the bytes accepted (all of `data`).
    pub fn write(&self, fh: u64, data: &[u8], owner: Option<u64>) -> Result<u32> {
        self.check_open()?;
        match &*self.handles.get(fh)? {
            Handle::Append(state) => {
                let n = lock(state).write(data, owner)?;
                Ok(u32::try_from(n).unwrap_or(u32::MAX))
            }
            Handle::Group { node, .. } => {
                self.check_writable()?;
                self.group_write(node, data)?;
                Ok(u32::try_from(data.len()).unwrap_or(u32::MAX))
            }
            _ => Err(self.write_refusal("writing a file other than append")),
        }
    }

    /// `flush` (every `close()` of a descriptor): appends an open `append` file's partial last
    /// line when the closing process (`owner`) wrote it, so its errors reach that `close()`;
    /// see [`AppendState::flush_by`].
    pub fn flush(&self, fh: u64, owner: Option<u64>) -> Result<()> {
        self.check_open()?;
        match &*self.handles.get(fh)? {
            Handle::Append(state) => lock(state).flush_by(owner),
            Handle::Stream { ino, stream, .. } if self.auto_commit => {
                let read_to = lock(&self.read_to).get(&fh).copied();
                match read_to {
                    Some(read_to) => self.auto_commit_on_close(*ino, stream, read_to),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// `fsync`: makes an append file's records durable. Nothing to do for read-only files.
    pub fn fsync(&self, fh: u64) -> Result<()> {
        match &*self.handles.get(fh)? {
            Handle::Append(state) => lock(state).sync(),
            _ => Ok(()),
        }
    }

    /// Closes a file handle. A partial line still pending (no `flush` came) is appended; its
    /// error, if any, is returned for logging (the kernel does not pass it to anyone).
    pub fn release(&self, fh: u64) -> Result<()> {
        let handle = self.handles.remove(fh)?;
        match &*handle {
            Handle::Stream { ino, stream, .. } => {
                self.pin_close(*ino);
                let read_to = if self.auto_commit { lock(&self.read_to).remove(&fh) } else { None };
                let closed = match read_to {
                    Some(read_to) => self.auto_commit_on_close(*ino, stream, read_to),
                    None => Ok(()),
                };
                // The handle's windows and kept rendering are freed with it.
                drop(handle);
                self.stream_closed();
                closed
            }
            Handle::Append(state) => lock(state).flush(),
            Handle::Text(_)
            | Handle::Inspection(_)
            | Handle::Segment { .. }
            | Handle::Group { .. }
            | Handle::Dir { .. } => Ok(()),
        }
    }

    /// Counts a stream handle closed. Once many have closed (at least [`TRIM_AFTER`] were open
    /// at once and at most half of that are open now), gives the memory freed in the
    /// allocator's heaps back to the system: glibc keeps freed heap memory below a live
    /// allocation resident otherwise (see `doc/ARCHITECTURE.md`, "Memory"). A single reader
    /// opening and closing never triggers it.
    fn stream_closed(&self) {
        let trim = {
            let mut open = lock(&self.open_streams);
            open.0 = open.0.saturating_sub(1);
            let trim = open.1 >= TRIM_AFTER && open.0 <= open.1 / 2;
            if trim {
                open.1 = open.0;
            }
            trim
        };
        if let (true, Some(release)) = (trim, self.release_memory) {
            release();
        }
    }

    /// `mkdir`: a topic in the root (with [`FsOptions::partitions_per_topic`] partitions), or
    /// the next partition in a topic. Nowhere else.
    pub fn mkdir(&self, parent: u64, name: &OsStr) -> Result<Entry> {
        let parent = self.node(parent)?;
        self.check_writable()?;
        let name = name_str(name)?;
        let node = match &parent {
            Node::Root => {
                self.source.create_topic(name, self.options.partitions_per_topic)?;
                Node::Topic(name.to_string())
            }
            Node::Topic(topic) => {
                let partition = parse_partition(name).ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "{name:?}: a partition directory is named by its number"
                    ))
                })?;
                self.source.create_partition(topic, partition)?;
                Node::Partition(PartitionId { topic: topic.clone(), partition })
            }
            Node::GroupsDir(topic) => {
                self.group_store()?;
                self.source.partitions(topic)?;
                group_view::check_group_name(name)?;
                if self.group_exists(topic, name)? {
                    return Err(Error::AlreadyExists(format!("group {name} of {topic}")));
                }
                let key = (topic.clone(), name.to_string());
                lock(&self.group_settings).entry(key).or_insert(None);
                log::info!("group {name:?} of {topic} created (held in memory until a commit)");
                Node::Group(topic.clone(), name.to_string())
            }
            _ => return Err(Error::NotPermitted("mkdir outside the root and topic directories")),
        };
        let reply = self.attr_of(0, &node)?;
        let ino = self.inodes.lookup(&node);
        Ok(Entry { attr: Attr { ino, ..reply.attr }, entry_ttl: STABLE_TTL, attr_ttl: reply.ttl })
    }

    /// The answer to a change of `name` in `parent` (unlink, rmdir, rename): `NotFound` if there
    /// is no such name, else `ReadOnly` or `NotPermitted`. Never a success.
    pub fn refuse_change(&self, parent: u64, name: &OsStr, what: &'static str) -> Error {
        let exists = self.node(parent).and_then(|parent| {
            let node = self.child(&parent, name)?;
            if is_stream(&node) {
                self.resolve_for_lookup(&node).map(drop)
            } else {
                self.attr_of(0, &node).map(drop)
            }
        });
        match exists {
            Err(err) => err,
            Ok(()) => self.write_refusal(what),
        }
    }

    /// The answer to creating a new name (`create`, `mknod`, `symlink`, `link`): only `mkdir`
    /// of topics and partitions creates anything. `ReadOnly` or `NotPermitted`, never a success.
    pub fn refuse_create(&self, parent: u64, what: &'static str) -> Error {
        match self.node(parent) {
            Err(err) => err,
            Ok(_) => self.write_refusal(what),
        }
    }

    /// What `df` shows: the space of the storage behind the topics (the data dir's file
    /// system), with names up to [`NAME_MAX`] bytes.
    pub fn statfs(&self) -> Result<StatFs> {
        Ok(StatFs { space: self.source.space()?, name_max: NAME_MAX })
    }

    /// Flushes every open append handle's pending line, then shuts the source down cleanly
    /// (indexes trimmed, checkpoints and the clean-shutdown marker written). Idempotent.
    pub fn shutdown(&self) -> Result<()> {
        let mut shut_down = lock(&self.shut_down);
        if *shut_down {
            return Ok(());
        }
        self.closing.store(true, Ordering::SeqCst);
        for handle in self.handles.all() {
            if let Handle::Append(state) = &*handle {
                let mut state = lock(state);
                if let Err(err) = state.flush() {
                    log::log!(err.log_level(), "shutdown: pending line of {state:?} lost: {err}");
                }
            }
        }
        self.source.shutdown()?;
        *shut_down = true;
        Ok(())
    }

    /// Appends after the shutdown started would land after the clean-shutdown marker: refuse
    /// them (`ESTALE`: the mount they were opened on is gone).
    fn check_open(&self) -> Result<()> {
        if self.closing.load(Ordering::SeqCst) { Err(Error::StaleHandle) } else { Ok(()) }
    }

    // ---- nodes and attributes ----

    fn node(&self, ino: u64) -> Result<Node> {
        self.inodes.node(ino).ok_or(Error::StaleHandle)
    }

    fn partition(&self, id: &PartitionId) -> Result<Arc<dyn PartitionSource>> {
        self.source.partition(&id.topic, id.partition)
    }

    /// The node `name` names in `parent`, parsed only: existence is checked by `attr_of` (or
    /// the stream resolution).
    fn child(&self, parent: &Node, name: &OsStr) -> Result<Node> {
        let name = name_str(name)?;
        let absent = || Error::NotFound(format!("{name:?} in {}", describe(parent)));
        let node = match parent {
            Node::Root => Node::Topic(name.to_string()),
            Node::Topic(topic) => match Node::topic_child(topic, name) {
                Some(node) => node,
                None => Node::Partition(PartitionId {
                    topic: topic.clone(),
                    partition: parse_partition(name).ok_or_else(absent)?,
                }),
            },
            Node::OffsetsDir(topic) => {
                topic_view::parse_offsets_name(name)?;
                Node::Offsets(topic.clone(), name.to_string())
            }
            Node::TopicByTimeDir(topic) => {
                topic_view::parse_topic_by_time(name)?;
                Node::TopicStream(topic.clone(), name.to_string())
            }
            Node::Partition(id) => {
                let child = Node::partition_child(id, name).ok_or_else(absent)?;
                if needs_segment_files(&child) && !self.has_segment_files(id)? {
                    return Err(absent());
                }
                child
            }
            Node::GroupsDir(topic) => {
                group_view::check_group_name(name).map_err(|_| absent())?;
                Node::Group(topic.clone(), name.to_string())
            }
            Node::Group(topic, group) => match name {
                group_view::OFFSETS => Node::GroupOffsets(topic.clone(), group.clone()),
                group_view::AUTO_OFFSET_RESET => Node::GroupReset(topic.clone(), group.clone()),
                _ => Node::GroupPartition(
                    PartitionId {
                        topic: topic.clone(),
                        partition: parse_partition(name).ok_or_else(absent)?,
                    },
                    group.clone(),
                ),
            },
            Node::GroupPartition(id, group) => {
                group_view::parse_next_name(name).ok_or_else(absent)?;
                Node::GroupNext(id.clone(), group.clone(), name.to_string())
            }
            Node::ByOffsetDir(id) => {
                StreamSpec::parse_by_offset(name)?;
                Node::Stream(id.clone(), StreamDir::ByOffset, name.to_string())
            }
            Node::ByTimeDir(id) => {
                StreamSpec::parse_by_time(name)?;
                Node::Stream(id.clone(), StreamDir::ByTime, name.to_string())
            }
            Node::SegmentsDir(id) => match name.strip_suffix(DUMP_SUFFIX) {
                Some(file) => {
                    let (base, kind) = parse_segment_file_name(file).ok_or_else(absent)?;
                    Node::SegmentDump(id.clone(), base, kind)
                }
                None => {
                    let (base, kind) = parse_segment_file_name(name).ok_or_else(absent)?;
                    Node::SegmentFile(id.clone(), base, kind)
                }
            },
            Node::TopicInfo(_)
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
            | Node::PartitionCheck(_)
            | Node::GroupOffsets(..)
            | Node::GroupReset(..)
            | Node::GroupNext(..) => return Err(absent()),
        };
        Ok(node)
    }

    /// Attributes of a node, checking that it exists (`ino` 0: the node has no inode yet).
    fn attr_of(&self, ino: u64, node: &Node) -> Result<AttrReply> {
        let (rw_dir, dir, ro_file, wo_file) = (
            self.dir_perm(true),
            self.dir_perm(false),
            self.read_only_perm(),
            self.write_only_perm(),
        );
        let (kind, size, perm, mtime, ttl) = match node {
            Node::Root => (FileKind::Directory, 0, rw_dir, self.started, STABLE_TTL),
            Node::Topic(topic) => {
                let mtime = self.topic_mtime(topic)?;
                (FileKind::Directory, 0, rw_dir, mtime, STABLE_TTL)
            }
            Node::TopicInfo(topic) => {
                let mtime = self.topic_mtime(topic)?;
                let size = self.info_text(node)?.len() as u64;
                (FileKind::RegularFile, size, ro_file, mtime, DYNAMIC_TTL)
            }
            Node::OffsetsDir(topic) | Node::TopicByTimeDir(topic) => {
                let mtime = self.topic_mtime(topic)?;
                (FileKind::Directory, 0, dir, mtime, STABLE_TTL)
            }
            Node::Offsets(topic, _) => {
                let mtime = self.topic_mtime(topic)?;
                let size = self.offsets_text(node)?.len() as u64;
                (FileKind::RegularFile, size, ro_file, mtime, DYNAMIC_TTL)
            }
            Node::TopicAppend(topic) | Node::TopicAppendJson(topic) => {
                let mtime = self.topic_mtime(topic)?;
                (FileKind::RegularFile, 0, wo_file, mtime, DYNAMIC_TTL)
            }
            Node::Partition(id)
            | Node::ByOffsetDir(id)
            | Node::ByTimeDir(id)
            | Node::SegmentsDir(id) => {
                let mtime = self.partition(id)?.summary()?.last_modified;
                (FileKind::Directory, 0, dir, mtime, STABLE_TTL)
            }
            Node::PartitionInfo(id) => {
                let summary = self.partition(id)?.summary()?;
                let size = info::partition_info(&id.topic, id.partition, &summary).len() as u64;
                (FileKind::RegularFile, size, ro_file, summary.last_modified, DYNAMIC_TTL)
            }
            Node::Append(id) | Node::AppendJson(id) => {
                let mtime = self.partition(id)?.summary()?.last_modified;
                (FileKind::RegularFile, 0, wo_file, mtime, DYNAMIC_TTL)
            }
            Node::SegmentFile(id, base, file_kind) => {
                let segment = self.segment(id, *base)?;
                let size = segment_file_size(&segment, *file_kind).ok_or_else(|| {
                    Error::NotFound(format!("{} has no {}", describe(node), file_kind.suffix()))
                })?;
                let mut attr =
                    self.attr(ino, FileKind::RegularFile, size, ro_file, segment.last_modified);
                if segment.is_active {
                    return Ok(AttrReply { attr, ttl: DYNAMIC_TTL });
                }
                attr.blksize = SEALED_BLOCK_SIZE;
                return Ok(AttrReply { attr, ttl: STABLE_TTL });
            }
            Node::SegmentDump(id, base, dump_kind) => {
                let segment = self.segment(id, *base)?;
                let partition = self.partition(id)?;
                let size = self.inspect.dump_size(&partition, *base, *dump_kind)?;
                let ttl = if segment.is_active { DYNAMIC_TTL } else { STABLE_TTL };
                (FileKind::RegularFile, size, ro_file, segment.last_modified, ttl)
            }
            Node::PartitionCheck(id) => {
                let mtime = self.partition(id)?.summary()?.last_modified;
                let size = self.inspect.check_size(self.partition(id)?.as_ref())?;
                (FileKind::RegularFile, size, ro_file, mtime, DYNAMIC_TTL)
            }
            Node::GroupsDir(topic) => {
                self.group_store()?;
                let mtime = self.topic_mtime(topic)?;
                (FileKind::Directory, 0, rw_dir, mtime, STABLE_TTL)
            }
            Node::Group(topic, group) => {
                self.check_group(topic, group)?;
                let mtime = self.topic_mtime(topic)?;
                (FileKind::Directory, 0, 0o555, mtime, DYNAMIC_TTL)
            }
            Node::GroupOffsets(topic, _) | Node::GroupReset(topic, _) => {
                let size = self.group_text(node)?.len() as u64;
                let mtime = self.topic_mtime(topic)?;
                let perm = if self.options.read_only { 0o444 } else { 0o644 };
                (FileKind::RegularFile, size, perm, mtime, DYNAMIC_TTL)
            }
            Node::GroupPartition(id, group) => {
                self.check_group(&id.topic, group)?;
                let mtime = self.partition(id)?.summary()?.last_modified;
                (FileKind::Directory, 0, 0o555, mtime, DYNAMIC_TTL)
            }
            Node::Stream(..) | Node::TopicStream(..) | Node::GroupNext(..) => {
                // Without an inode yet (0) there is nothing to pin the resolution to.
                let stream = if ino == 0 { self.resolve(node)? } else { self.pinned(ino, node)? };
                return self.stream_attr(ino, node, &stream);
            }
        };
        Ok(AttrReply { attr: self.attr(ino, kind, size, perm, mtime), ttl })
    }

    fn attr(&self, ino: u64, kind: FileKind, size: u64, perm: u16, mtime: SystemTime) -> Attr {
        let nlink = match kind {
            FileKind::Directory => 2,
            FileKind::RegularFile => 1,
        };
        let (uid, gid) = (self.options.uid, self.options.gid);
        Attr { ino, kind, size, perm, nlink, uid, gid, mtime, blksize: BLOCK_SIZE }
    }

    /// Permission bits of a directory: all of `dir_mode` where `mkdir` can create something
    /// (`writable`: the root and topic directories) on a read-write mount, its read and search
    /// bits otherwise.
    fn dir_perm(&self, writable: bool) -> u16 {
        if writable && !self.options.read_only {
            self.options.dir_mode & 0o777
        } else {
            self.options.dir_mode & 0o555
        }
    }

    /// Permission bits of a file whose content can only be read: `file_mode`'s read bits.
    fn read_only_perm(&self) -> u16 {
        self.options.file_mode & 0o444
    }

    /// Permission bits of an `append` file (write-only in effect): `file_mode`'s write bits.
    fn write_only_perm(&self) -> u16 {
        self.options.file_mode & 0o222
    }

    fn stream_attr(&self, ino: u64, node: &Node, stream: &StreamRef) -> Result<AttrReply> {
        // A size not yet known shows as 0, as /proc files do: every tool then reads to the end
        // (streams are direct I/O, so reads reach the daemon whatever st_size says). Never a
        // partial size: `tail -n` would seek to it and `wc -c` would trust it.
        let size = stream.known_size()?.unwrap_or(0);
        let mut mtime = match (node, node.partition_id()) {
            (Node::TopicStream(topic, _), _) => self.topic_mtime(topic)?,
            (Node::GroupNext(id, ..), _) => self.partition(id)?.summary()?.last_modified,
            (_, Some(id)) => self.partition(id)?.summary()?.last_modified,
            (_, None) => return Err(Error::StaleHandle),
        };
        // A complete range never changes again: its mtime stops moving too.
        if let StreamRef::Partition(s) = stream {
            if let Some(ts) = s.completed_timestamp() {
                let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ts as u64);
                mtime = mtime.min(at);
            }
        }
        Ok(AttrReply {
            attr: self.attr(ino, FileKind::RegularFile, size, self.read_only_perm(), mtime),
            ttl: DYNAMIC_TTL,
        })
    }

    fn topic_mtime(&self, topic: &str) -> Result<SystemTime> {
        let mut mtime = None;
        for p in self.source.partitions(topic)? {
            let modified = self.source.partition(topic, p)?.summary()?.last_modified;
            mtime = mtime.max(Some(modified));
        }
        Ok(mtime.unwrap_or(self.started))
    }

    /// Whether the partition has segment files (`segments/` and `check` exist only then);
    /// `NotFound` for a partition that does not exist.
    fn has_segment_files(&self, id: &PartitionId) -> Result<bool> {
        Ok(self.partition(id)?.segment_files().is_some())
    }

    fn segment(&self, id: &PartitionId, base: crate::format::Offset) -> Result<SegmentSummary> {
        files(self.partition(id)?.as_ref())?.segment_summary(base)?.ok_or_else(|| {
            Error::NotFound(format!("segment {base} of {}-{}", id.topic, id.partition))
        })
    }

    /// A segment dump or a check report: rendered (a `.log` dump: counted) once per change of
    /// the segments it is of, and shared by every handle reading it.
    fn inspection(&self, node: &Node) -> Result<Inspection> {
        match node {
            Node::SegmentDump(id, base, kind) => {
                self.inspect.dump(&self.partition(id)?, *base, *kind)
            }
            Node::PartitionCheck(id) => self.inspect.check(&self.partition(id)?),
            _ => Err(Error::NotFound(format!("{} is not an inspection file", describe(node)))),
        }
    }

    fn info_text(&self, node: &Node) -> Result<String> {
        match node {
            Node::TopicInfo(topic) => {
                let mut summaries = Vec::new();
                for p in self.source.partitions(topic)? {
                    summaries.push((p, self.source.partition(topic, p)?.summary()?));
                }
                Ok(info::topic_info(topic, &summaries))
            }
            Node::PartitionInfo(id) => {
                let summary = self.partition(id)?.summary()?;
                Ok(info::partition_info(&id.topic, id.partition, &summary))
            }
            _ => Err(Error::NotFound(format!("{} is not an info file", describe(node)))),
        }
    }

    /// The text of `<topic>/offsets/<time>` now.
    fn offsets_text(&self, node: &Node) -> Result<String> {
        let Node::Offsets(topic, name) = node else {
            return Err(Error::NotFound(format!("{} is not an offsets file", describe(node))));
        };
        let time = topic_view::parse_offsets_name(name)?;
        topic_view::offsets_text(self.source.as_ref(), topic, time, now_ms())
    }

    /// The entries of a directory, `.` and `..` first, each with the offset of the next.
    fn list(&self, ino: u64, node: &Node) -> Result<Vec<DirEntry>> {
        let mut names: Vec<(String, Node)> = Vec::new();
        match node {
            Node::Root => {
                for topic in self.source.topics()? {
                    if !self.show_internal && INTERNAL_TOPICS.contains(&topic.as_str()) {
                        continue;
                    }
                    names.push((topic.clone(), Node::Topic(topic)));
                }
            }
            Node::Topic(topic) => {
                for name in [
                    INFO,
                    node::OFFSETS,
                    node::BY_TIME,
                    node::APPEND,
                    node::APPEND_JSON,
                    node::GROUPS,
                ] {
                    if name == node::GROUPS && self.groups.is_none() {
                        continue;
                    }
                    if let Some(child) = Node::topic_child(topic, name) {
                        names.push((name.to_string(), child));
                    }
                }
                for partition in self.source.partitions(topic)? {
                    let id = PartitionId { topic: topic.clone(), partition };
                    names.push((partition.to_string(), Node::Partition(id)));
                }
            }
            Node::Partition(id) => {
                let has_files = self.has_segment_files(id)?;
                for name in [
                    node::INFO,
                    node::BY_OFFSET,
                    node::BY_TIME,
                    node::APPEND,
                    node::APPEND_JSON,
                    node::SEGMENTS,
                    node::CHECK,
                ] {
                    if let Some(child) = Node::partition_child(id, name)
                        && (has_files || !needs_segment_files(&child))
                    {
                        names.push((name.to_string(), child));
                    }
                }
            }
            Node::ByOffsetDir(id) | Node::ByTimeDir(id) => {
                let dir = match node {
                    Node::ByTimeDir(_) => StreamDir::ByTime,
                    _ => StreamDir::ByOffset,
                };
                // As streams see it: names past the last stable offset do not exist yet.
                let partition = self.streams.view(self.partition(id)?);
                let suggested = match dir {
                    StreamDir::ByOffset => crate::view::listing::by_offset_names(&*partition)?,
                    StreamDir::ByTime => crate::view::listing::by_time_names(&*partition)?,
                };
                for name in suggested {
                    let child = Node::Stream(id.clone(), dir, name.clone());
                    names.push((name, child));
                }
            }
            Node::GroupsDir(topic) => {
                for group in self.group_names(topic)? {
                    names.push((group.clone(), Node::Group(topic.clone(), group)));
                }
            }
            Node::Group(topic, group) => {
                self.check_group(topic, group)?;
                for name in [group_view::OFFSETS, group_view::AUTO_OFFSET_RESET] {
                    let child = match name {
                        group_view::OFFSETS => Node::GroupOffsets(topic.clone(), group.clone()),
                        _ => Node::GroupReset(topic.clone(), group.clone()),
                    };
                    names.push((name.to_string(), child));
                }
                for partition in self.source.partitions(topic)? {
                    let id = PartitionId { topic: topic.clone(), partition };
                    names.push((partition.to_string(), Node::GroupPartition(id, group.clone())));
                }
            }
            Node::GroupPartition(id, group) => {
                self.check_group(&id.topic, group)?;
                for name in group_view::next_names() {
                    let child = Node::GroupNext(id.clone(), group.clone(), name.to_string());
                    names.push((name.to_string(), child));
                }
            }
            Node::OffsetsDir(topic) => {
                self.source.partitions(topic)?;
                for name in topic_view::offsets_names() {
                    names.push((name.clone(), Node::Offsets(topic.clone(), name)));
                }
            }
            Node::TopicByTimeDir(topic) => {
                for name in topic_view::topic_by_time_names(self.source.as_ref(), topic)? {
                    names.push((name.clone(), Node::TopicStream(topic.clone(), name)));
                }
            }
            Node::SegmentsDir(id) => {
                for segment in files(self.partition(id)?.as_ref())?.segments()? {
                    for kind in [
                        crate::storage::segment_files::SegmentFileKind::Log,
                        crate::storage::segment_files::SegmentFileKind::Index,
                        crate::storage::segment_files::SegmentFileKind::TimeIndex,
                        crate::storage::segment_files::SegmentFileKind::TxnIndex,
                    ] {
                        if segment_file_size(&segment, kind).is_some() {
                            let name = node::segment_file_name(segment.base_offset, kind);
                            names.push((
                                format!("{name}{DUMP_SUFFIX}"),
                                Node::SegmentDump(id.clone(), segment.base_offset, kind),
                            ));
                            names.push((
                                name,
                                Node::SegmentFile(id.clone(), segment.base_offset, kind),
                            ));
                        }
                    }
                }
            }
            _ => return Err(Error::NotFound(format!("{} is not a directory", describe(node)))),
        }
        let parent_ino = self.inodes.peek(&node.parent());
        let mut entries = Vec::with_capacity(names.len() + 2);
        let dots = [(".".to_string(), ino), ("..".to_string(), parent_ino)];
        for (name, ino) in dots {
            entries.push((name, ino, FileKind::Directory));
        }
        for (name, child) in names {
            let kind = if child.is_dir() { FileKind::Directory } else { FileKind::RegularFile };
            entries.push((name, self.inodes.peek(&child), kind));
        }
        Ok(entries
            .into_iter()
            .enumerate()
            .map(|(i, (name, ino, kind))| DirEntry { ino, next_offset: i as u64 + 1, kind, name })
            .collect())
    }

    // ---- streams ----

    /// Resolves a stream node now.
    fn resolve(&self, node: &Node) -> Result<StreamRef> {
        if let Node::GroupNext(id, group, name) = node {
            return self.resolve_next(id, group, name).map(StreamRef::Partition);
        }
        if let Node::TopicStream(topic, name) = node {
            let spec = topic_view::parse_topic_by_time(name)?;
            let source = Arc::clone(&self.source);
            let stream = self.topics.open_stream(source, topic, &spec, now_ms())?;
            return Ok(StreamRef::Topic(stream));
        }
        let Node::Stream(id, dir, name) = node else {
            return Err(Error::NotFound(format!("{} is not a stream", describe(node))));
        };
        let spec = match dir {
            StreamDir::ByOffset => StreamSpec::parse_by_offset(name)?,
            StreamDir::ByTime => StreamSpec::parse_by_time(name)?,
        };
        let partition = self.partition(id)?;
        self.streams.open(partition, &spec, now_ms()).map(StreamRef::Partition)
    }

    /// The stream a lookup answers with: the pinned one while a handle reads it, else a fresh
    /// resolution (so `by-offset/-10` means the last ten records as of this lookup).
    fn resolve_for_lookup(&self, node: &Node) -> Result<StreamRef> {
        if let Some(ino) = self.inodes.find(node) {
            if let Some(pin) = lock(&self.pins).get(&ino) {
                if pin.open > 0 {
                    return Ok(pin.stream.clone());
                }
            }
        }
        self.resolve(node)
    }

    /// The stream a handle already reads at `ino`, else `stream`. Nothing is kept for an
    /// inode no handle reads: every later call resolves its name afresh anyway, and a stream
    /// keeps up to one rendered batch, so keeping them per name the kernel still remembers
    /// would grow the daemon with every distinct name ever opened.
    fn pin(&self, ino: u64, stream: StreamRef) -> StreamRef {
        match lock(&self.pins).get(&ino) {
            Some(pin) if pin.open > 0 => pin.stream.clone(),
            _ => stream,
        }
    }

    /// The stream `ino` means now: the pinned one while a handle reads it, else a fresh
    /// resolution (pinned for later calls), so `st_size` of `by-offset/-10` is the size of the
    /// last ten records as of this call.
    fn pinned(&self, ino: u64, node: &Node) -> Result<StreamRef> {
        if let Some(pin) = lock(&self.pins).get(&ino) {
            if pin.open > 0 {
                return Ok(pin.stream.clone());
            }
        }
        let stream = self.resolve(node)?;
        Ok(self.pin(ino, stream))
    }

    /// Like [`TopicFs::pinned`], and counts one more open handle on the stream returned, in
    /// one step (so a concurrent lookup cannot re-pin between the two).
    fn open_pinned(&self, ino: u64, node: &Node) -> Result<StreamRef> {
        let fresh = self.pinned(ino, node)?;
        let mut pins = lock(&self.pins);
        let pin = pins.entry(ino).or_insert_with(|| Pin { stream: fresh.clone(), open: 0 });
        if pin.open == 0 {
            pin.stream = fresh;
        }
        pin.open = pin.open.saturating_add(1);
        Ok(pin.stream.clone())
    }

    /// Number of streams kept for open handles (for tests and statistics): memory the
    /// filesystem holds per name stays bounded by the open handles, not by the names used.
    pub fn pinned_streams(&self) -> usize {
        lock(&self.pins).len()
    }

    /// Counts one handle of `ino` closed; the last one unpins its stream (see [`TopicFs::pin`]).
    fn pin_close(&self, ino: u64) {
        let mut pins = lock(&self.pins);
        if let Some(pin) = pins.get_mut(&ino) {
            pin.open = pin.open.saturating_sub(1);
            if pin.open == 0 {
                pins.remove(&ino);
            }
        }
    }

    // ---- consumer groups ----

    fn group_store(&self) -> Result<&Arc<dyn GroupStore>> {
        self.groups
            .as_ref()
            .ok_or_else(|| Error::NotFound("this mount has no groups directories".to_string()))
    }

    /// Groups of `topic`: those with committed offsets and those held in memory.
    fn group_names(&self, topic: &str) -> Result<Vec<String>> {
        self.source.partitions(topic)?;
        let mut names: std::collections::BTreeSet<String> =
            self.group_store()?.groups(topic)?.into_iter().collect();
        for (t, g) in lock(&self.group_settings).keys() {
            if t == topic {
                names.insert(g.clone());
            }
        }
        Ok(names.into_iter().collect())
    }

    fn group_exists(&self, topic: &str, group: &str) -> Result<bool> {
        if lock(&self.group_settings).contains_key(&(topic.to_string(), group.to_string())) {
            return Ok(true);
        }
        Ok(!self.group_store()?.committed(group, topic)?.is_empty())
    }

    /// `NotFound` unless `group` of `topic` exists.
    fn check_group(&self, topic: &str, group: &str) -> Result<()> {
        self.source.partitions(topic)?;
        if self.group_exists(topic, group)? {
            Ok(())
        } else {
            Err(Error::NotFound(format!("group {group} of {topic}")))
        }
    }

    fn group_reset(&self, topic: &str, group: &str) -> ResetPolicy {
        let settings = lock(&self.group_settings);
        settings
            .get(&(topic.to_string(), group.to_string()))
            .copied()
            .flatten()
            .unwrap_or(self.default_reset)
    }

    /// The text of a group's `offsets` or `auto.offset.reset` file now.
    fn group_text(&self, node: &Node) -> Result<String> {
        match node {
            Node::GroupOffsets(topic, group) => {
                self.check_group(topic, group)?;
                let store = self.group_store()?;
                group_view::offsets_text(self.source.as_ref(), store.as_ref(), topic, group)
            }
            Node::GroupReset(topic, group) => {
                self.check_group(topic, group)?;
                Ok(format!("{}\n", self.group_reset(topic, group)))
            }
            _ => Err(Error::NotFound(format!("{} is not a group file", describe(node)))),
        }
    }

    /// One `write()` to a group's `offsets` (a commit: all its lines or none, durable when this
    /// returns) or `auto.offset.reset` file.
    fn group_write(&self, node: &Node, data: &[u8]) -> Result<()> {
        match node {
            Node::GroupOffsets(topic, group) => {
                let store = self.group_store()?;
                let result = group_view::parse_commit(self.source.as_ref(), topic, data).and_then(
                    |offsets| {
                        store.commit(group, topic, &offsets)?;
                        Ok(offsets)
                    },
                );
                match result {
                    Ok(offsets) => {
                        log::debug!("group {group:?} of {topic}: committed {offsets:?}");
                        Ok(())
                    }
                    Err(err) => {
                        log::warn!(
                            "group {group:?} of {topic}: commit refused, nothing committed: {err}"
                        );
                        Err(err)
                    }
                }
            }
            Node::GroupReset(topic, group) => {
                let text = std::str::from_utf8(data)
                    .map_err(|_| Error::InvalidInput("auto.offset.reset: not UTF-8".to_string()))?;
                let policy: ResetPolicy = text.parse().inspect_err(|err| {
                    log::warn!("group {group:?} of {topic}: {err}");
                })?;
                lock(&self.group_settings).insert((topic.clone(), group.clone()), Some(policy));
                Ok(())
            }
            _ => Err(self.write_refusal("writing a file other than append")),
        }
    }

    /// With `auto_commit`: a closed `next` handle that read `read_to` bytes commits the end of
    /// its range if it read all of it (and the group's commit is not there already).
    fn auto_commit_on_close(&self, ino: u64, stream: &StreamRef, read_to: u64) -> Result<()> {
        let (Ok(Node::GroupNext(id, group, _)), StreamRef::Partition(s)) = (self.node(ino), stream)
        else {
            return Ok(());
        };
        let crate::view::Bound::Fixed(end) = s.end() else { return Ok(()) };
        if read_to < s.size()? {
            log::debug!("group {group:?} of {}: next closed before its end; no commit", id.topic);
            return Ok(());
        }
        let store = self.group_store()?;
        let committed = store.committed(&group, &id.topic)?;
        if committed.get(&id.partition).map(|c| c.offset) == Some(end) {
            return Ok(());
        }
        store.commit(&group, &id.topic, &[(id.partition, end)]).inspect_err(|err| {
            log::warn!("group {group:?} of {}: auto-commit of {end} failed: {err}", id.topic);
        })?;
        log::debug!("group {group:?} of {}: auto-committed {}:{end}", id.topic, id.partition);
        Ok(())
    }

    /// `groups/<group>/<p>/next[.json|.raw]` resolved now.
    fn resolve_next(
        &self,
        id: &PartitionId,
        group: &str,
        name: &str,
    ) -> Result<Arc<crate::view::stream::Stream>> {
        let format = group_view::parse_next_name(name)
            .ok_or_else(|| Error::NotFound(format!("{name:?} is not a next stream")))?;
        self.check_group(&id.topic, group)?;
        let committed = self.group_store()?.committed(group, &id.topic)?;
        let committed = committed.get(&id.partition).map(|c| c.offset);
        let partition = self.partition(id)?;
        let log_end = partition.summary()?.log_end_offset;
        let view = self.streams.view(Arc::clone(&partition));
        let reset = self.group_reset(&id.topic, group);
        let spec = group_view::next_spec(view.as_ref(), log_end, committed, reset, format)?;
        self.streams.open(partition, &spec, now_ms())
    }

    // ---- refusals ----

    fn check_writable(&self) -> Result<()> {
        if self.options.read_only { Err(Error::ReadOnly) } else { Ok(()) }
    }

    fn write_refusal(&self, what: &'static str) -> Error {
        if self.options.read_only { Error::ReadOnly } else { Error::NotPermitted(what) }
    }

    fn refuse_write(&self, request: OpenRequest, what: &'static str) -> Result<()> {
        if request.write || request.truncate { Err(self.write_refusal(what)) } else { Ok(()) }
    }
}

/// A path-like description of a node for messages (`orders/0/by-offset/-10`).
pub fn describe(node: &Node) -> String {
    let partition = |id: &PartitionId| format!("{}/{}", id.topic, id.partition);
    match node {
        Node::Root => "/".to_string(),
        Node::Topic(topic) => topic.clone(),
        Node::TopicInfo(topic) => format!("{topic}/{INFO}"),
        Node::OffsetsDir(topic) => format!("{topic}/{}", node::OFFSETS),
        Node::Offsets(topic, name) => format!("{topic}/{}/{name}", node::OFFSETS),
        Node::TopicByTimeDir(topic) => format!("{topic}/{}", node::BY_TIME),
        Node::TopicStream(topic, name) => format!("{topic}/{}/{name}", node::BY_TIME),
        Node::TopicAppend(topic) => format!("{topic}/{}", node::APPEND),
        Node::TopicAppendJson(topic) => format!("{topic}/{}", node::APPEND_JSON),
        Node::Partition(id) => partition(id),
        Node::PartitionInfo(id) => format!("{}/{INFO}", partition(id)),
        Node::ByOffsetDir(id) => format!("{}/{}", partition(id), node::BY_OFFSET),
        Node::ByTimeDir(id) => format!("{}/{}", partition(id), node::BY_TIME),
        Node::Stream(id, dir, name) => format!("{}/{}/{name}", partition(id), dir.dir_name()),
        Node::Append(id) => format!("{}/{}", partition(id), node::APPEND),
        Node::AppendJson(id) => format!("{}/{}", partition(id), node::APPEND_JSON),
        Node::SegmentsDir(id) => format!("{}/{}", partition(id), node::SEGMENTS),
        Node::SegmentFile(id, base, kind) => {
            format!(
                "{}/{}/{}",
                partition(id),
                node::SEGMENTS,
                node::segment_file_name(*base, *kind)
            )
        }
        Node::SegmentDump(id, base, kind) => format!(
            "{}/{}/{}{DUMP_SUFFIX}",
            partition(id),
            node::SEGMENTS,
            node::segment_file_name(*base, *kind)
        ),
        Node::PartitionCheck(id) => format!("{}/{}", partition(id), node::CHECK),
        Node::GroupsDir(topic) => format!("{topic}/{}", node::GROUPS),
        Node::Group(topic, group) => format!("{topic}/{}/{group}", node::GROUPS),
        Node::GroupOffsets(topic, group) => {
            format!("{topic}/{}/{group}/{}", node::GROUPS, group_view::OFFSETS)
        }
        Node::GroupReset(topic, group) => {
            format!("{topic}/{}/{group}/{}", node::GROUPS, group_view::AUTO_OFFSET_RESET)
        }
        Node::GroupPartition(id, group) => {
            format!("{}/{}/{group}/{}", id.topic, node::GROUPS, id.partition)
        }
        Node::GroupNext(id, group, name) => {
            format!("{}/{}/{group}/{}/{name}", id.topic, node::GROUPS, id.partition)
        }
    }
}

/// Whether a partition child exists only for a partition with segment files
/// ([`PartitionSource::segment_files`]): `segments/` and the `check` report.
fn needs_segment_files(node: &Node) -> bool {
    matches!(node, Node::SegmentsDir(_) | Node::PartitionCheck(_))
}

/// Whether a node is a stream file (of a partition, of a topic, or a group's `next`).
fn is_stream(node: &Node) -> bool {
    matches!(node, Node::Stream(..) | Node::TopicStream(..) | Node::GroupNext(..))
}

/// Size of one file of a segment; `None` when the segment has no such file.
fn segment_file_size(
    segment: &SegmentSummary,
    kind: crate::storage::segment_files::SegmentFileKind,
) -> Option<u64> {
    use crate::storage::segment_files::SegmentFileKind as K;
    match kind {
        K::Log => Some(segment.log_size),
        K::Index => Some(segment.index_size),
        K::TimeIndex => Some(segment.time_index_size),
        K::TxnIndex => segment.txn_index_size,
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
