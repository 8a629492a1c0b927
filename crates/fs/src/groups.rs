//! Consumer groups (`<topic>/groups/`): which groups exist, their `offsets` and
//! `auto.offset.reset` files, their `next` streams and the auto-commit on close.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use topicfs_source::GroupStore;
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_view::groups::{self as group_view, ResetPolicy};

use super::attr::{AttrReply, DYNAMIC_TTL, OpenRequest, Opened, STABLE_TTL};
use super::handle::{Handle, StreamRef};
use super::node::{DirNode, FileNode, GroupDir, GroupFile, Node, PartitionId, parse_partition};
use super::open::{append, direct};
use super::subtree::{DirAttr, SubtreeDir, SubtreeFile};
use super::{TopicFs, now_ms};

/// The state of the mount's consumer groups: the store, the groups it holds in memory and
/// their settings, and what auto-commit needs to know of open `next` handles.
pub(crate) struct GroupsTree {
    /// The store of committed offsets; `None`: the tree has no `groups` directories.
    store: Option<Arc<dyn GroupStore>>,
    /// The mount's `auto.offset.reset`.
    default_reset: ResetPolicy,
    /// Groups made by `mkdir` or given their own `auto.offset.reset`, by (topic, group), held
    /// for the life of the mount: a group exists while it has a committed offset or an entry
    /// here. `None`: the mount's policy.
    settings: Mutex<HashMap<(String, String), Option<ResetPolicy>>>,
    /// `-o auto_commit`: closing a `next` handle that read to its end commits that end.
    auto_commit: bool,
    /// With `auto_commit`: how far each open `next` handle has read (bytes), by handle.
    /// **Invariant**: an entry exists exactly while its `next` handle is open.
    read_to: Mutex<HashMap<u64, u64>>,
}

impl Default for GroupsTree {
    fn default() -> GroupsTree {
        GroupsTree {
            store: None,
            default_reset: ResetPolicy::Earliest,
            settings: Mutex::new(HashMap::new()),
            auto_commit: false,
            read_to: Mutex::new(HashMap::new()),
        }
    }
}

impl GroupsTree {
    /// The same tree over `store`, groups without a usable commit starting at `reset`.
    pub(crate) fn with_store(self, store: Arc<dyn GroupStore>, reset: ResetPolicy) -> GroupsTree {
        GroupsTree { store: Some(store), default_reset: reset, ..self }
    }

    /// The same tree committing the end of a `next` handle's range when it closes having read
    /// all of it.
    pub(crate) fn with_auto_commit(self, auto_commit: bool) -> GroupsTree {
        GroupsTree { auto_commit, ..self }
    }

    /// Whether the tree has `groups` directories.
    pub(crate) fn enabled(&self) -> bool {
        self.store.is_some()
    }

    fn store(&self) -> Result<&Arc<dyn GroupStore>> {
        self.store
            .as_ref()
            .ok_or_else(|| Error::NotFound("this mount has no groups directories".to_string()))
    }

    fn reset(&self, topic: &str, group: &str) -> ResetPolicy {
        let settings = lock(&self.settings);
        settings
            .get(&(topic.to_string(), group.to_string()))
            .copied()
            .flatten()
            .unwrap_or(self.default_reset)
    }

    /// Counts `len` bytes read at `offset` by handle `fh` (a `next` handle auto-commit
    /// watches; any other handle: nothing).
    pub(crate) fn note_read(&self, fh: u64, offset: u64, len: usize) {
        if self.auto_commit {
            if let Some(read_to) = lock(&self.read_to).get_mut(&fh) {
                *read_to = (*read_to).max(offset.saturating_add(len as u64));
            }
        }
    }

    /// How far `fh` read, if auto-commit watches it.
    pub(crate) fn read_to(&self, fh: u64) -> Option<u64> {
        if !self.auto_commit {
            return None;
        }
        lock(&self.read_to).get(&fh).copied()
    }

    /// How far `fh` read, if auto-commit watched it; it is not watched any more.
    pub(crate) fn forget_handle(&self, fh: u64) -> Option<u64> {
        if !self.auto_commit {
            return None;
        }
        lock(&self.read_to).remove(&fh)
    }
}

fn dir(dir: GroupDir) -> Node {
    Node::Dir(DirNode::Groups(dir))
}

fn file(file: GroupFile) -> Node {
    Node::File(FileNode::Groups(file))
}

impl SubtreeDir for GroupDir {
    fn child(&self, _fs: &TopicFs, name: &str) -> Result<Option<Node>> {
        Ok(match self {
            GroupDir::All(topic) => group_view::check_group_name(name)
                .ok()
                .map(|()| dir(GroupDir::Group(topic.clone(), name.to_string()))),
            GroupDir::Group(topic, group) => {
                let (topic, group) = (topic.clone(), group.clone());
                match name {
                    group_view::OFFSETS => Some(file(GroupFile::Offsets(topic, group))),
                    group_view::AUTO_OFFSET_RESET => Some(file(GroupFile::Reset(topic, group))),
                    _ => parse_partition(name).map(|partition| {
                        dir(GroupDir::Partition(PartitionId { topic, partition }, group))
                    }),
                }
            }
            GroupDir::Partition(id, group) => group_view::parse_next_name(name)
                .map(|_| file(GroupFile::Next(id.clone(), group.clone(), name.to_string()))),
        })
    }

    fn list(&self, fs: &TopicFs) -> Result<Vec<(String, Node)>> {
        let mut names = Vec::new();
        match self {
            GroupDir::All(topic) => {
                for group in fs.group_names(topic)? {
                    names.push((group.clone(), dir(GroupDir::Group(topic.clone(), group))));
                }
            }
            GroupDir::Group(topic, group) => {
                fs.check_group(topic, group)?;
                let (t, g) = (topic.clone(), group.clone());
                names.push((group_view::OFFSETS.to_string(), file(GroupFile::Offsets(t, g))));
                let (t, g) = (topic.clone(), group.clone());
                let reset = file(GroupFile::Reset(t, g));
                names.push((group_view::AUTO_OFFSET_RESET.to_string(), reset));
                for partition in fs.source.partitions(topic)? {
                    let id = PartitionId { topic: topic.clone(), partition };
                    names
                        .push((partition.to_string(), dir(GroupDir::Partition(id, group.clone()))));
                }
            }
            GroupDir::Partition(id, group) => {
                fs.check_group(&id.topic, group)?;
                for name in group_view::next_names() {
                    let next = GroupFile::Next(id.clone(), group.clone(), name.to_string());
                    names.push((name.to_string(), file(next)));
                }
            }
        }
        Ok(names)
    }

    fn attr(&self, fs: &TopicFs) -> Result<DirAttr> {
        Ok(match self {
            GroupDir::All(topic) => {
                fs.groups.store()?;
                DirAttr { perm: fs.dir_perm(true), mtime: fs.topic_mtime(topic)?, ttl: STABLE_TTL }
            }
            GroupDir::Group(topic, group) => {
                fs.check_group(topic, group)?;
                DirAttr { perm: 0o555, mtime: fs.topic_mtime(topic)?, ttl: DYNAMIC_TTL }
            }
            GroupDir::Partition(id, group) => {
                fs.check_group(&id.topic, group)?;
                let mtime = fs.partition(id)?.last_modified()?;
                DirAttr { perm: 0o555, mtime, ttl: DYNAMIC_TTL }
            }
        })
    }
}

impl SubtreeFile for GroupFile {
    fn mtime(&self, fs: &TopicFs) -> Result<SystemTime> {
        match self {
            GroupFile::Offsets(topic, _) | GroupFile::Reset(topic, _) => fs.topic_mtime(topic),
            GroupFile::Next(id, ..) => fs.partition(id)?.last_modified(),
        }
    }

    fn is_stream(&self) -> bool {
        match self {
            GroupFile::Next(..) => true,
            GroupFile::Offsets(..) | GroupFile::Reset(..) => false,
        }
    }

    fn resolve(&self, fs: &TopicFs) -> Result<StreamRef> {
        match self {
            GroupFile::Next(id, group, name) => {
                fs.resolve_next(id, group, name).map(StreamRef::Partition)
            }
            GroupFile::Offsets(..) | GroupFile::Reset(..) => {
                Err(Error::NotFound(format!("{} is not a stream", self.path())))
            }
        }
    }

    fn is_writable(&self) -> bool {
        match self {
            GroupFile::Offsets(..) | GroupFile::Reset(..) => true,
            GroupFile::Next(..) => false,
        }
    }

    fn attr(&self, fs: &TopicFs, ino: u64, node: &Node) -> Result<AttrReply> {
        if self.is_stream() {
            return fs.stream_file_attr(ino, node);
        }
        let size = fs.group_text(self)?.len() as u64;
        let perm = if fs.options.read_only { 0o444 } else { 0o644 };
        Ok(fs.file_reply(ino, size, perm, self.mtime(fs)?, DYNAMIC_TTL))
    }

    fn open(&self, fs: &TopicFs, ino: u64, node: &Node, request: OpenRequest) -> Result<Opened> {
        match self {
            GroupFile::Offsets(..) | GroupFile::Reset(..) => {
                if request.write || request.truncate {
                    fs.check_writable()?;
                }
                let text = fs.group_text(self)?.into_bytes();
                let handle = Handle::Group { file: self.clone(), text };
                Ok(append(fs.handles.insert(handle)))
            }
            GroupFile::Next(..) => {
                let fh = fs.open_stream_file(ino, node, request)?;
                if fs.groups.auto_commit && !fs.options.read_only {
                    lock(&fs.groups.read_to).insert(fh, 0);
                    // The commit happens at `flush`, which `close()` waits for (`release` is
                    // sent after `close()` returned).
                    return Ok(append(fh));
                }
                Ok(direct(fh))
            }
        }
    }
}

impl TopicFs {
    /// Groups of `topic`: those with committed offsets and those held in memory.
    fn group_names(&self, topic: &str) -> Result<Vec<String>> {
        self.source.partitions(topic)?;
        let mut names: BTreeSet<String> = self.groups.store()?.groups(topic)?.into_iter().collect();
        for (t, g) in lock(&self.groups.settings).keys() {
            if t == topic {
                names.insert(g.clone());
            }
        }
        Ok(names.into_iter().collect())
    }

    fn group_exists(&self, topic: &str, group: &str) -> Result<bool> {
        let key = (topic.to_string(), group.to_string());
        if lock(&self.groups.settings).contains_key(&key) {
            return Ok(true);
        }
        Ok(!self.groups.store()?.committed(group, topic)?.is_empty())
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

    /// `mkdir <topic>/groups/<name>`: a group held in memory until its first commit.
    pub(super) fn group_mkdir(&self, topic: &str, name: &str) -> Result<Node> {
        self.groups.store()?;
        self.source.partitions(topic)?;
        group_view::check_group_name(name)?;
        if self.group_exists(topic, name)? {
            return Err(Error::AlreadyExists(format!("group {name} of {topic}")));
        }
        let key = (topic.to_string(), name.to_string());
        lock(&self.groups.settings).entry(key).or_insert(None);
        log::info!("group {name:?} of {topic} created (held in memory until a commit)");
        Ok(dir(GroupDir::Group(topic.to_string(), name.to_string())))
    }

    /// The text of a group's `offsets` or `auto.offset.reset` file now.
    fn group_text(&self, file: &GroupFile) -> Result<String> {
        match file {
            GroupFile::Offsets(topic, group) => {
                self.check_group(topic, group)?;
                let store = self.groups.store()?;
                group_view::offsets_text(self.source.as_ref(), store.as_ref(), topic, group)
            }
            GroupFile::Reset(topic, group) => {
                self.check_group(topic, group)?;
                Ok(format!("{}\n", self.groups.reset(topic, group)))
            }
            GroupFile::Next(..) => {
                Err(Error::NotFound(format!("{} is not a group file", file.path())))
            }
        }
    }

    /// One `write()` to a group's `offsets` (a commit: all its lines or none, durable when this
    /// returns) or `auto.offset.reset` file.
    pub(super) fn group_write(&self, file: &GroupFile, data: &[u8]) -> Result<()> {
        match file {
            GroupFile::Offsets(topic, group) => {
                let store = self.groups.store()?;
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
            GroupFile::Reset(topic, group) => {
                let text = std::str::from_utf8(data)
                    .map_err(|_| Error::InvalidInput("auto.offset.reset: not UTF-8".to_string()))?;
                let policy: ResetPolicy = text.parse().inspect_err(|err| {
                    log::warn!("group {group:?} of {topic}: {err}");
                })?;
                let key = (topic.clone(), group.clone());
                lock(&self.groups.settings).insert(key, Some(policy));
                Ok(())
            }
            GroupFile::Next(..) => Err(self.write_refusal("writing a file other than append")),
        }
    }

    /// With `auto_commit`: a closed `next` handle that read `read_to` bytes commits the end of
    /// its range if it read all of it (and the group's commit is not there already).
    pub(super) fn auto_commit_on_close(
        &self,
        ino: u64,
        stream: &StreamRef,
        read_to: u64,
    ) -> Result<()> {
        let (
            Ok(Node::File(FileNode::Groups(GroupFile::Next(id, group, _)))),
            StreamRef::Partition(s),
        ) = (self.node(ino), stream)
        else {
            return Ok(());
        };
        let topicfs_view::Bound::Fixed(end) = s.end() else { return Ok(()) };
        if read_to < s.size()? {
            log::debug!("group {group:?} of {}: next closed before its end; no commit", id.topic);
            return Ok(());
        }
        let store = self.groups.store()?;
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
    ) -> Result<Arc<topicfs_view::stream::Stream>> {
        let format = group_view::parse_next_name(name)
            .ok_or_else(|| Error::NotFound(format!("{name:?} is not a next stream")))?;
        self.check_group(&id.topic, group)?;
        let committed = self.groups.store()?.committed(group, &id.topic)?;
        let committed = committed.get(&id.partition).map(|c| c.offset);
        let partition = self.partition(id)?;
        let log_end = partition.summary()?.log_end_offset;
        let view = self.streams.view(Arc::clone(&partition));
        let reset = self.groups.reset(&id.topic, group);
        let spec = group_view::next_spec(view.as_ref(), log_end, committed, reset, format)?;
        self.streams.open(partition, &spec, now_ms())
    }
}
