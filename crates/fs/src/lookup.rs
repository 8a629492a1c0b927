//! Lookup and attributes: naming a child of a directory ([`Node`]), checking that it exists,
//! and the attributes (`st_size`, `st_mtime`, permission bits, TTLs) of every kind of node.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::SystemTime;

use topicfs_source::PartitionSource;
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_view::StatSize;
use topicfs_view::spec::StreamSpec;
use topicfs_view::topic as topic_view;

use super::attr::{
    Attr, AttrReply, BLOCK_SIZE, DYNAMIC_TTL, Entry, FileKind, STABLE_TTL, SetAttrRequest,
};
use super::handle::{Handle, StreamRef};
use super::info;
use super::node::{
    DirNode, FileNode, Needs, Node, PartitionId, StreamDir, fixed_child, parse_partition,
    partition_children, topic_children,
};
use super::subtree::{DirAttr, SubtreeDir, SubtreeFile};
use super::{TopicFs, describe, is_stream, is_writable, name_str};

impl TopicFs {
    /// Looks `name` up in directory `parent`, taking one kernel reference on the result.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<Entry> {
        let _op = topicfs_source::Operation::begin();
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
        let _op = topicfs_source::Operation::begin();
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
        let _op = topicfs_source::Operation::begin();
        let node = self.node(ino)?;
        let reply = self.getattr(ino, None)?;
        if is_writable(&node) {
            self.check_writable()?;
            if request.mode.is_some() || request.uid.is_some() || request.gid.is_some() {
                return Err(Error::NotPermitted("changing the mode or owner of a file"));
            }
            match request.size {
                None | Some(0) => Ok(reply),
                Some(_) => Err(Error::NotPermitted("an append file can only be truncated to 0")),
            }
        } else {
            self.check_writable()?;
            Err(Error::NotPermitted("changing the attributes of a file other than append"))
        }
    }

    pub(super) fn node(&self, ino: u64) -> Result<Node> {
        self.inodes.node(ino).ok_or(Error::StaleHandle)
    }

    pub(super) fn partition(&self, id: &PartitionId) -> Result<Arc<dyn PartitionSource>> {
        self.source.partition(&id.topic, id.partition)
    }

    /// The node `name` names in `parent`, parsed only: existence is checked by `attr_of` (or
    /// the stream resolution), but for the fixed names a topic or partition shows only with
    /// what they need ([`Needs`]).
    pub(super) fn child(&self, parent: &Node, name: &OsStr) -> Result<Node> {
        let name = name_str(name)?;
        let absent = || Error::NotFound(format!("{name:?} in {}", describe(parent)));
        let Node::Dir(parent) = parent else { return Err(absent()) };
        let node = match parent {
            DirNode::Root if name == super::node::MOUNT_INFO => Node::File(FileNode::MountInfo),
            DirNode::Root if name == super::node::MOUNT_LOG => Node::File(FileNode::MountLog),
            DirNode::Root => Node::Dir(DirNode::Topic(name.to_string())),
            DirNode::Schemas(dir) => dir.child(self, name)?.ok_or_else(absent)?,
            DirNode::Where(dir) => dir.child(self, name)?.ok_or_else(absent)?,
            DirNode::Topic(topic) => match fixed_child(topic_children(topic), name) {
                Some((node, needs)) => {
                    if !self.topic_offers(topic, needs)? {
                        return Err(absent());
                    }
                    node
                }
                None => Node::Dir(DirNode::Partition(PartitionId {
                    topic: topic.clone(),
                    partition: parse_partition(name).ok_or_else(absent)?,
                })),
            },
            DirNode::OffsetsDir(topic) => {
                topic_view::parse_offsets_name(name)?;
                Node::File(FileNode::Offsets(topic.clone(), name.to_string()))
            }
            DirNode::TopicByTimeDir(topic) => {
                topic_view::parse_topic_by_time(name)?;
                Node::File(FileNode::TopicStream(topic.clone(), name.to_string()))
            }
            DirNode::Partition(id) => {
                let (child, needs) =
                    fixed_child(partition_children(id), name).ok_or_else(absent)?;
                if !self.partition_offers(id, needs)? {
                    return Err(absent());
                }
                child
            }
            DirNode::Groups(dir) => dir.child(self, name)?.ok_or_else(absent)?,
            DirNode::ByOffsetDir(id) => {
                StreamSpec::parse_by_offset(name)?;
                Node::File(FileNode::Stream(id.clone(), StreamDir::ByOffset, name.to_string()))
            }
            DirNode::ByTimeDir(id) => {
                StreamSpec::parse_by_time(name)?;
                Node::File(FileNode::Stream(id.clone(), StreamDir::ByTime, name.to_string()))
            }
            DirNode::Inspect(dir) => dir.child(self, name)?.ok_or_else(absent)?,
            DirNode::Keys(dir) => dir.child(self, name)?.ok_or_else(absent)?,
        };
        Ok(node)
    }

    /// Whether `topic`'s fixed child needing `needs` exists (and is listed).
    pub(super) fn topic_offers(&self, topic: &str, needs: Needs) -> Result<bool> {
        Ok(match needs {
            Needs::Nothing => true,
            Needs::Groups => self.groups.enabled(),
            Needs::Schemas => self.schemas().is_some(),
            Needs::KeyIndex => self.topic_has_key_index(topic)?,
            Needs::SegmentFiles => false,
        })
    }

    /// Whether the partition's fixed child needing `needs` exists (and is listed); `NotFound`
    /// for a partition that does not exist, when it needs the partition asked.
    pub(super) fn partition_offers(&self, id: &PartitionId, needs: Needs) -> Result<bool> {
        Ok(match needs {
            Needs::Nothing => true,
            Needs::SegmentFiles => self.has_segment_files(id)?,
            Needs::KeyIndex => self.has_key_index(id)?,
            Needs::Groups | Needs::Schemas => false,
        })
    }

    /// Attributes of a node, checking that it exists (`ino` 0: the node has no inode yet).
    pub(super) fn attr_of(&self, ino: u64, node: &Node) -> Result<AttrReply> {
        match node {
            Node::Dir(dir) => {
                let DirAttr { perm, mtime, ttl } = self.dir_attr(dir)?;
                Ok(AttrReply { attr: self.attr(ino, FileKind::Directory, 0, perm, mtime), ttl })
            }
            Node::File(file) => self.file_attr(ino, node, file),
        }
    }

    /// A directory's permission bits, mtime and attribute TTL, checking that it exists.
    fn dir_attr(&self, dir: &DirNode) -> Result<DirAttr> {
        let (rw_dir, ro_dir) = (self.dir_perm(true), self.dir_perm(false));
        let (perm, mtime, ttl) = match dir {
            DirNode::Root => (rw_dir, self.started, STABLE_TTL),
            DirNode::Schemas(dir) => return dir.attr(self),
            DirNode::Where(dir) => return dir.attr(self),
            DirNode::Inspect(dir) => return dir.attr(self),
            DirNode::Keys(dir) => return dir.attr(self),
            DirNode::Topic(topic) => (rw_dir, self.topic_mtime(topic)?, STABLE_TTL),
            DirNode::OffsetsDir(topic) | DirNode::TopicByTimeDir(topic) => {
                (ro_dir, self.topic_mtime(topic)?, STABLE_TTL)
            }
            DirNode::Partition(id) | DirNode::ByOffsetDir(id) | DirNode::ByTimeDir(id) => {
                (ro_dir, self.partition(id)?.last_modified()?, STABLE_TTL)
            }
            DirNode::Groups(dir) => return dir.attr(self),
        };
        Ok(DirAttr { perm, mtime, ttl })
    }

    /// A file's attributes, checking that it exists (`ino` 0: the node has no inode yet).
    fn file_attr(&self, ino: u64, node: &Node, file: &FileNode) -> Result<AttrReply> {
        let (ro_file, wo_file) = (self.read_only_perm(), self.write_only_perm());
        let (size, perm, mtime, ttl) = match file {
            FileNode::MountInfo | FileNode::MountLog => {
                let size = self.info_text(node)?.len() as u64;
                (size, ro_file, self.started, DYNAMIC_TTL)
            }
            FileNode::Schemas(file) => return file.attr(self, ino, node),
            FileNode::Where(file) => return file.attr(self, ino, node),
            FileNode::Inspect(file) => return file.attr(self, ino, node),
            FileNode::TopicInfo(topic) => {
                let mtime = self.topic_mtime(topic)?;
                let size = self.info_text(node)?.len() as u64;
                (size, ro_file, mtime, DYNAMIC_TTL)
            }
            FileNode::TopicConfig(topic) => {
                let mtime = self.topic_mtime(topic)?;
                let size = self.config_text(topic)?.len() as u64;
                let perm =
                    if self.options.read_only { ro_file } else { self.options.file_mode & 0o666 };
                (size, perm, mtime, DYNAMIC_TTL)
            }
            FileNode::Offsets(topic, _) => {
                let mtime = self.topic_mtime(topic)?;
                let size = self.offsets_text(node)?.len() as u64;
                (size, ro_file, mtime, DYNAMIC_TTL)
            }
            FileNode::TopicAppend(topic) | FileNode::TopicAppendJson(topic) => {
                (0, wo_file, self.topic_mtime(topic)?, DYNAMIC_TTL)
            }
            FileNode::PartitionInfo(id) => {
                let partition = self.partition(id)?;
                let summary = partition.summary()?;
                let swaps = partition.known().rewrites;
                let size =
                    info::partition_info(&id.topic, id.partition, &summary, swaps).len() as u64;
                (size, ro_file, summary.last_modified, DYNAMIC_TTL)
            }
            FileNode::Append(id) | FileNode::AppendJson(id) => {
                (0, wo_file, self.partition(id)?.last_modified()?, DYNAMIC_TTL)
            }
            FileNode::Keys(file) => return file.attr(self, ino, node),
            FileNode::Groups(file) => return file.attr(self, ino, node),
            FileNode::Stream(..) | FileNode::TopicStream(..) => {
                return self.stream_file_attr(ino, node);
            }
        };
        Ok(AttrReply { attr: self.attr(ino, FileKind::RegularFile, size, perm, mtime), ttl })
    }

    /// The attributes of a regular file (`ino` 0: no inode yet).
    pub(super) fn file_reply(
        &self,
        ino: u64,
        size: u64,
        perm: u16,
        mtime: SystemTime,
        ttl: std::time::Duration,
    ) -> AttrReply {
        AttrReply { attr: self.attr(ino, FileKind::RegularFile, size, perm, mtime), ttl }
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
    pub(super) fn dir_perm(&self, writable: bool) -> u16 {
        if writable && !self.options.read_only {
            self.options.dir_mode & 0o777
        } else {
            self.options.dir_mode & 0o555
        }
    }

    /// Permission bits of a file whose content can only be read: `file_mode`'s read bits.
    pub(super) fn read_only_perm(&self) -> u16 {
        self.options.file_mode & 0o444
    }

    /// Permission bits of an `append` file (write-only in effect): `file_mode`'s write bits.
    pub(super) fn write_only_perm(&self) -> u16 {
        self.options.file_mode & 0o222
    }

    /// The attributes of the stream file `node` now (`ino` 0: no inode yet, nothing to pin the
    /// resolution to).
    pub(super) fn stream_file_attr(&self, ino: u64, node: &Node) -> Result<AttrReply> {
        let stream = if ino == 0 { self.resolve(node)? } else { self.pinned(ino, node)? };
        self.stream_attr(ino, node, &stream)
    }

    fn stream_attr(&self, ino: u64, node: &Node, stream: &StreamRef) -> Result<AttrReply> {
        // A size not yet known shows as 0, as /proc files do: every tool then reads to the end
        // (streams are direct I/O, so reads reach the daemon whatever st_size says). Never a
        // partial size: `tail -n` would seek to it and `wc -c` would trust it.
        let size = match stream {
            StreamRef::Partition(s) => match s.stat_size()? {
                StatSize::Now(size) => size,
                StatSize::Deferred => {
                    self.sizing_steps.continue_sizing(s, self.executor());
                    None
                }
            },
            _ => stream.known_size()?,
        };
        let size = size.unwrap_or(0);
        let mut mtime = match node {
            Node::File(FileNode::TopicStream(topic, _)) => self.topic_mtime(topic)?,
            Node::File(FileNode::Stream(id, ..)) => self.partition(id)?.last_modified()?,
            Node::File(FileNode::Groups(file)) => file.mtime(self)?,
            Node::File(FileNode::Keys(file)) => file.mtime(self)?,
            Node::File(FileNode::Where(file)) => file.mtime(self)?,
            _ => return Err(Error::StaleHandle),
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

    /// The latest change of any partition of `topic` (the mount's start for a topic without
    /// partitions).
    pub(super) fn topic_mtime(&self, topic: &str) -> Result<SystemTime> {
        let mut mtime = None;
        for p in self.source.partitions(topic)? {
            let modified = match self.source.partition(topic, p).and_then(|s| s.last_modified()) {
                Ok(modified) => modified,
                // A partition whose log dir is offline does not hide the topic: its other
                // partitions are served (SEMANTICS.md, "Several log directories").
                Err(Error::LogDirOffline { .. }) => continue,
                Err(e) => return Err(e),
            };
            mtime = mtime.max(Some(modified));
        }
        Ok(mtime.unwrap_or(self.started))
    }
}
