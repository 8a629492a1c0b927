//! Changes of the tree and of the mount: `mkdir` (topics, partitions, groups), the refusals of
//! every other change of a name, `statfs` and the clean shutdown.

use std::ffi::OsStr;
use std::sync::atomic::Ordering;

use topicfs_format::file_name::has_collision;
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;

use super::attr::{Attr, Entry, NAME_MAX, STABLE_TTL, StatFs};
use super::handle::Handle;
use super::node::{DirNode, GroupDir, Node, PartitionId, parse_partition};
use super::{TopicFs, is_internal_topic, is_stream, name_str};

impl TopicFs {
    /// `mkdir`: a topic in the root (with [`FsOptions::partitions_per_topic`](super::FsOptions::partitions_per_topic) partitions), or
    /// the next partition in a topic. Nowhere else.
    pub fn mkdir(&self, parent: u64, name: &OsStr) -> Result<Entry> {
        let _op = topicfs_source::Operation::begin();
        let parent = self.node(parent)?;
        self.check_writable()?;
        let name = name_str(name)?;
        let node = match &parent {
            Node::Dir(DirNode::Root) => {
                if is_internal_topic(name) {
                    if self.source.partitions(name).is_ok() {
                        return Err(Error::AlreadyExists(format!("topic {name}")));
                    }
                    return Err(Error::NotPermitted(
                        "mkdir of a Kafka internal topic (the broker's own)",
                    ));
                }
                let partitions = self.options.partitions_per_topic;
                if partitions > self.max_partitions {
                    return Err(Error::InvalidInput(format!(
                        "topic {name}: {partitions} partitions is above the mount's \
                         --max-partitions {}",
                        self.max_partitions
                    )));
                }
                // The local log dir checks again under its lock; a cluster's broker should,
                // but not every one does (tansu).
                let topics = self.source.topics()?;
                if let Some(existing) = topics.iter().find(|t| has_collision(t, name)) {
                    return Err(Error::InvalidInput(format!(
                        "topic {name:?} collides with existing topic {existing:?}: Kafka treats \
                         '.' and '_' in topic names alike (metric names), so it refuses both"
                    )));
                }
                self.source.create_topic(name, partitions)?;
                Node::Dir(DirNode::Topic(name.to_string()))
            }
            Node::Dir(DirNode::Topic(topic)) => {
                let partition = parse_partition(name).ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "{name:?}: a partition directory is named by its number"
                    ))
                })?;
                if is_internal_topic(topic) {
                    return Err(Error::NotPermitted(
                        "adding a partition to a Kafka internal topic (the broker's own)",
                    ));
                }
                if partition >= self.max_partitions {
                    return Err(Error::InvalidInput(format!(
                        "{topic} partition {partition}: a topic has at most the mount's \
                         --max-partitions {} partitions",
                        self.max_partitions
                    )));
                }
                self.source.create_partition(topic, partition)?;
                Node::Dir(DirNode::Partition(PartitionId { topic: topic.clone(), partition }))
            }
            Node::Dir(DirNode::Groups(GroupDir::All(topic))) => self.group_mkdir(topic, name)?,
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
        // Background work ends before the source does: queued tasks are dropped, running
        // ones (a sizing step checks `closing`) finish, and the workers are joined.
        self.executor().shutdown();
        self.source.shutdown()?;
        *shut_down = true;
        Ok(())
    }
}
