//! Consumer groups (`<topic>/groups/`): which groups exist, their `offsets` and
//! `auto.offset.reset` files, their `next` streams and the auto-commit on close.

use std::sync::Arc;

use topicfs_source::GroupStore;
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_view::groups::{self as group_view, ResetPolicy};

use super::handle::StreamRef;
use super::node::{FileNode, Node, PartitionId};
use super::{TopicFs, describe, now_ms};

impl TopicFs {
    pub(super) fn group_store(&self) -> Result<&Arc<dyn GroupStore>> {
        self.groups
            .as_ref()
            .ok_or_else(|| Error::NotFound("this mount has no groups directories".to_string()))
    }

    /// Groups of `topic`: those with committed offsets and those held in memory.
    pub(super) fn group_names(&self, topic: &str) -> Result<Vec<String>> {
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

    pub(super) fn group_exists(&self, topic: &str, group: &str) -> Result<bool> {
        if lock(&self.group_settings).contains_key(&(topic.to_string(), group.to_string())) {
            return Ok(true);
        }
        Ok(!self.group_store()?.committed(group, topic)?.is_empty())
    }

    /// `NotFound` unless `group` of `topic` exists.
    pub(super) fn check_group(&self, topic: &str, group: &str) -> Result<()> {
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
    pub(super) fn group_text(&self, node: &Node) -> Result<String> {
        match node {
            Node::File(FileNode::GroupOffsets(topic, group)) => {
                self.check_group(topic, group)?;
                let store = self.group_store()?;
                group_view::offsets_text(self.source.as_ref(), store.as_ref(), topic, group)
            }
            Node::File(FileNode::GroupReset(topic, group)) => {
                self.check_group(topic, group)?;
                Ok(format!("{}\n", self.group_reset(topic, group)))
            }
            _ => Err(Error::NotFound(format!("{} is not a group file", describe(node)))),
        }
    }

    /// One `write()` to a group's `offsets` (a commit: all its lines or none, durable when this
    /// returns) or `auto.offset.reset` file.
    pub(super) fn group_write(&self, node: &Node, data: &[u8]) -> Result<()> {
        match node {
            Node::File(FileNode::GroupOffsets(topic, group)) => {
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
            Node::File(FileNode::GroupReset(topic, group)) => {
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
    pub(super) fn auto_commit_on_close(
        &self,
        ino: u64,
        stream: &StreamRef,
        read_to: u64,
    ) -> Result<()> {
        let (Ok(Node::File(FileNode::GroupNext(id, group, _))), StreamRef::Partition(s)) =
            (self.node(ino), stream)
        else {
            return Ok(());
        };
        let topicfs_view::Bound::Fixed(end) = s.end() else { return Ok(()) };
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
    pub(super) fn resolve_next(
        &self,
        id: &PartitionId,
        group: &str,
        name: &str,
    ) -> Result<Arc<topicfs_view::stream::Stream>> {
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
}
