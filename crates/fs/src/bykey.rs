//! The by-key files of the tree: `<topic>/<p>/by-key/`, `latest/`, `keys` and `<topic>/by-key/`
//! (see [`topicfs_view::bykey`]). They exist only for partitions whose source has a key index
//! ([`topicfs_source::PartitionSource::key_index`]: a log dir's partitions; a cluster's have none,
//! so there these names are `ENOENT` and not listed).

use std::sync::Arc;

use topicfs_source::PartitionSource;
use topicfs_source::error::{Error, Result};
use topicfs_view::bykey::{KeySpec, KeysReader, TopicKeyStream, latest_record};
use topicfs_view::spec::Format;

use super::TopicFs;
use super::handle::StreamRef;
use super::node::{FileNode, Node, PartitionId};

/// Parses a name under `by-key/` (any format), `latest/` or `<topic>/by-key/` (`raw`: whether
/// `.raw` is a format there).
pub(super) fn parse_key_spec(name: &str, raw: bool) -> Result<KeySpec> {
    KeySpec::parse(name)
        .filter(|spec| raw || spec.format != Format::Raw)
        .ok_or_else(|| Error::NotFound(format!("{name:?} is not the name of a key")))
}

impl TopicFs {
    /// Whether the partition has a key index; `NotFound` for a partition that does not exist.
    pub(super) fn has_key_index(&self, id: &PartitionId) -> Result<bool> {
        Ok(self.partition(id)?.key_index().is_some())
    }

    /// Whether every partition of `topic` has a key index (and it has one at least).
    pub(super) fn topic_has_key_index(&self, topic: &str) -> Result<bool> {
        let partitions = self.source.partitions(topic)?;
        if partitions.is_empty() {
            return Ok(false);
        }
        for p in partitions {
            let partition = match self.source.partition(topic, p) {
                Ok(partition) => partition,
                // Whether it has a key index is not known while its log dir is offline; the
                // topic's others decide (its files answer EIO for it).
                Err(topicfs_source::Error::LogDirOffline { .. }) => continue,
                Err(e) => return Err(e),
            };
            if partition.key_index().is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn topic_partitions(&self, topic: &str) -> Result<Vec<Arc<dyn PartitionSource>>> {
        let mut parts = Vec::new();
        for p in self.source.partitions(topic)? {
            parts.push(self.source.partition(topic, p)?);
        }
        Ok(parts)
    }

    /// Opens the key stream a `by-key/` name means now.
    pub(super) fn resolve_key(&self, node: &Node) -> Result<StreamRef> {
        match node {
            Node::File(FileNode::ByKey(id, name)) => {
                let spec = parse_key_spec(name, true)?;
                let part = self.partition(id)?;
                let key = spec.resolve(part.as_ref())?;
                let tracker = self.streams.tracker(part.as_ref());
                let streams = self.streams.key_streams();
                let schemas = self.streams.schemas().cloned();
                let stream = streams.open(part, key, spec.format, tracker, schemas)?;
                Ok(StreamRef::Key(stream))
            }
            Node::File(FileNode::TopicByKey(topic, name)) => {
                let spec = parse_key_spec(name, false)?;
                let parts = self.topic_partitions(topic)?;
                // A long name: the first partition whose index resolves it.
                let mut key = None;
                let mut resolved = false;
                for part in &parts {
                    match spec.resolve(part.as_ref()) {
                        Ok(k) => {
                            key = k;
                            resolved = true;
                            break;
                        }
                        Err(Error::NotFound(_)) => {}
                        Err(e) => return Err(e),
                    }
                }
                if !resolved {
                    return Err(Error::NotFound(format!("no key of {topic} is named {name:?}")));
                }
                let tracker = |p: &dyn PartitionSource| self.streams.tracker(p);
                let schemas = self.streams.schemas().cloned();
                let stream = TopicKeyStream::open(parts, key, spec.format, &tracker, schemas)?;
                Ok(StreamRef::TopicKey(Arc::new(stream)))
            }
            _ => Err(Error::NotFound(format!("{} is not a by-key file", super::describe(node)))),
        }
    }

    /// The contents of a `latest/` file now; `NotFound` when the key has no record, or its
    /// last is a tombstone.
    pub(super) fn latest_text(&self, node: &Node) -> Result<Vec<u8>> {
        let Node::File(FileNode::Latest(id, name)) = node else {
            return Err(Error::NotFound(format!("{} is not a latest file", super::describe(node))));
        };
        let spec = parse_key_spec(name, false)?;
        let part = self.partition(id)?;
        let key = spec.resolve(part.as_ref())?;
        let tracker = self.streams.tracker(part.as_ref());
        let schemas = self.streams.schemas().cloned();
        latest_record(part.as_ref(), key.as_deref(), spec.format, tracker.as_deref(), schemas)?
            .ok_or_else(|| {
                Error::NotFound(format!(
                    "{}: no record, or the last is a tombstone",
                    super::describe(node)
                ))
            })
    }

    /// A reader of a partition's `keys`.
    pub(super) fn keys_reader(&self, id: &PartitionId) -> Result<KeysReader> {
        let part = self.partition(id)?;
        let tracker = self.streams.tracker(part.as_ref());
        KeysReader::open(part, tracker)
    }
}
