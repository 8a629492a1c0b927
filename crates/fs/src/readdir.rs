//! Directories: `opendir`, `readdir`, `releasedir` and the listing of each kind of directory.

use std::sync::Mutex;

use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_view::groups as group_view;
use topicfs_view::inspect::DUMP_SUFFIX;
use topicfs_view::inspect::files;
use topicfs_view::topic as topic_view;

use super::attr::{DirEntry, FileKind, Opened};
use super::handle::Handle;
use super::node::{self, Node, PartitionId, StreamDir};
use super::{INFO, INTERNAL_TOPICS, TopicFs, describe, needs_segment_files, segment_file_size};

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
                    node::CONFIG,
                    node::OFFSETS,
                    node::BY_TIME,
                    node::APPEND,
                    node::APPEND_JSON,
                    node::GROUPS,
                    node::BY_KEY,
                    node::SCHEMAS,
                ] {
                    if name == node::GROUPS && self.groups.is_none() {
                        continue;
                    }
                    if name == node::SCHEMAS && self.schemas().is_none() {
                        continue;
                    }
                    if name == node::BY_KEY && !self.topic_has_key_index(topic)? {
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
                let has_keys = self.has_key_index(id)?;
                for name in [
                    node::INFO,
                    node::BY_OFFSET,
                    node::BY_TIME,
                    node::APPEND,
                    node::APPEND_JSON,
                    node::SEGMENTS,
                    node::CHECK,
                    node::BY_KEY,
                    node::LATEST,
                    node::KEYS,
                ] {
                    if let Some(child) = Node::partition_child(id, name)
                        && (has_files || !needs_segment_files(&child))
                        && (has_keys || !super::bykey::needs_key_index(&child))
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
                    StreamDir::ByOffset => topicfs_view::listing::by_offset_names(&*partition)?,
                    StreamDir::ByTime => topicfs_view::listing::by_time_names(&*partition)?,
                };
                for name in suggested {
                    let child = Node::Stream(id.clone(), dir, name.clone());
                    names.push((name, child));
                }
            }
            // Keys are not listed (a partition may have millions): `keys` lists them.
            Node::ByKeyDir(id) | Node::LatestDir(id) => {
                self.has_key_index(id)?;
            }
            Node::TopicByKeyDir(topic) => {
                self.source.partitions(topic)?;
            }
            Node::SchemasDir(topic) => {
                for subject in self.schema_subjects(topic)? {
                    names.push((subject.clone(), Node::SchemaSubject(topic.clone(), subject)));
                }
            }
            Node::SchemaSubject(topic, subject) => {
                for name in self.schema_file_names(topic, subject)? {
                    let child = Node::SchemaFile(topic.clone(), subject.clone(), name.clone());
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
                        topicfs_source::SegmentFileKind::Log,
                        topicfs_source::SegmentFileKind::Index,
                        topicfs_source::SegmentFileKind::TimeIndex,
                        topicfs_source::SegmentFileKind::TxnIndex,
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
}
