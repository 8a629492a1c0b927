//! Directories: `opendir`, `readdir`, `releasedir` and the listing of each kind of directory.

use std::sync::Mutex;

use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_view::topic as topic_view;

use super::attr::{DirEntry, FileKind, Opened};
use super::handle::Handle;
use super::node::{self, DirNode, FileNode, Node, PartitionId, StreamDir};
use super::subtree::SubtreeDir;
use super::{INTERNAL_TOPICS, TopicFs, describe};

impl TopicFs {
    /// Opens a directory: its entries are listed now, and served from this list until
    /// `releasedir` (or a `readdir` from offset 0, which lists again).
    pub fn opendir(&self, ino: u64) -> Result<Opened> {
        let _op = topicfs_source::Operation::begin();
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
        let _op = topicfs_source::Operation::begin();
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

    /// The entries of a directory, `.` and `..` first, each with the offset of the next.
    fn list(&self, ino: u64, node: &Node) -> Result<Vec<DirEntry>> {
        let Node::Dir(dir) = node else {
            return Err(Error::NotFound(format!("{} is not a directory", describe(node))));
        };
        let mut names: Vec<(String, Node)> = Vec::new();
        match dir {
            DirNode::Root => {
                for topic in self.source.topics()? {
                    if !self.show_internal && INTERNAL_TOPICS.contains(&topic.as_str()) {
                        continue;
                    }
                    names.push((topic.clone(), Node::Dir(DirNode::Topic(topic))));
                }
            }
            DirNode::Topic(topic) => {
                for (name, child, needs) in node::topic_children(topic) {
                    if self.topic_offers(topic, needs)? {
                        names.push((name.to_string(), child));
                    }
                }
                for partition in self.source.partitions(topic)? {
                    let id = PartitionId { topic: topic.clone(), partition };
                    names.push((partition.to_string(), Node::Dir(DirNode::Partition(id))));
                }
            }
            DirNode::Partition(id) => {
                // Each need asked of the partition once (several children share one).
                let mut asked: Vec<(node::Needs, bool)> = Vec::new();
                for (name, child, needs) in node::partition_children(id) {
                    let offered = match asked.iter().find(|(n, _)| *n == needs) {
                        Some(&(_, offered)) => offered,
                        None => {
                            let offered = self.partition_offers(id, needs)?;
                            asked.push((needs, offered));
                            offered
                        }
                    };
                    if offered {
                        names.push((name.to_string(), child));
                    }
                }
            }
            DirNode::ByOffsetDir(id) | DirNode::ByTimeDir(id) => {
                let stream_dir = match dir {
                    DirNode::ByTimeDir(_) => StreamDir::ByTime,
                    _ => StreamDir::ByOffset,
                };
                for name in self.stream_names(id, stream_dir)? {
                    let child = Node::File(FileNode::Stream(id.clone(), stream_dir, name.clone()));
                    names.push((name, child));
                }
            }
            DirNode::Keys(dir) => names = dir.list(self)?,
            DirNode::Schemas(dir) => names = dir.list(self)?,
            DirNode::Where(dir) => names = dir.list(self)?,
            DirNode::Groups(dir) => names = dir.list(self)?,
            DirNode::OffsetsDir(topic) => {
                self.source.partitions(topic)?;
                for name in topic_view::offsets_names() {
                    names.push((name.clone(), Node::File(FileNode::Offsets(topic.clone(), name))));
                }
            }
            DirNode::TopicByTimeDir(topic) => {
                for name in topic_view::topic_by_time_names(self.source.as_ref(), topic)? {
                    names.push((
                        name.clone(),
                        Node::File(FileNode::TopicStream(topic.clone(), name)),
                    ));
                }
            }
            DirNode::Inspect(dir) => names = dir.list(self)?,
        }
        let parent_ino = self.inodes.peek(&Node::Dir(dir.parent()));
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
}

impl TopicFs {
    /// The stream names `ls` shows in a partition's `by-offset/` or `by-time/`, as streams see
    /// the partition: names past the last stable offset do not exist yet.
    pub(super) fn stream_names(&self, id: &PartitionId, dir: StreamDir) -> Result<Vec<String>> {
        let partition = self.streams.view(self.partition(id)?);
        match dir {
            StreamDir::ByOffset => topicfs_view::listing::by_offset_names(&*partition),
            StreamDir::ByTime => topicfs_view::listing::by_time_names(&*partition),
        }
    }
}
