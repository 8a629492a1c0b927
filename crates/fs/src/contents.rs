//! What info, `offsets/<time>` and inspection files contain when opened (or sized).

use topicfs_source::error::{Error, Result};
use topicfs_view::topic as topic_view;

use super::info;
use super::node::{FileNode, Node};
use super::{TopicFs, describe, now_ms};

impl TopicFs {
    pub(super) fn info_text(&self, node: &Node) -> Result<String> {
        match node {
            Node::File(FileNode::MountInfo) => {
                let log = self.recent_log.as_ref().map(|l| l.destination());
                Ok(info::mount_info(&self.source.log_dirs(), log))
            }
            Node::File(FileNode::MountLog) => {
                Ok(self.recent_log.as_ref().map(|l| l.text()).unwrap_or_default())
            }
            Node::File(FileNode::TopicInfo(topic)) => {
                // Every partition's bounds in one go where the source can (see
                // `TopicSource::state_bounds`); an error leaves each partition to ask.
                let _ = self.source.state_bounds(topic);
                let mut summaries = Vec::new();
                for p in self.source.partitions(topic)? {
                    summaries.push((p, self.source.partition(topic, p)?.summary()?));
                }
                Ok(info::topic_info(topic, &summaries))
            }
            Node::File(FileNode::PartitionInfo(id)) => {
                let partition = self.partition(id)?;
                let summary = topicfs_view::listing::summary_with_timestamps(partition.as_ref())?;
                let swaps = partition.known().rewrites;
                Ok(info::partition_info(&id.topic, id.partition, &summary, swaps))
            }
            _ => Err(Error::NotFound(format!("{} is not an info file", describe(node)))),
        }
    }

    /// The text of `<topic>/offsets/<time>` now.
    pub(super) fn offsets_text(&self, node: &Node) -> Result<String> {
        let Node::File(FileNode::Offsets(topic, name)) = node else {
            return Err(Error::NotFound(format!("{} is not an offsets file", describe(node))));
        };
        let time = topic_view::parse_offsets_name(name)?;
        topic_view::offsets_text(self.source.as_ref(), topic, time, now_ms())
    }
}
