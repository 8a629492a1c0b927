//! The by-key files of the tree: `<topic>/<p>/by-key/`, `latest/`, `keys` and `<topic>/by-key/`
//! (see [`topicfs_view::bykey`]). They exist only for partitions whose source has a key index
//! ([`topicfs_source::PartitionSource::key_index`]: a log dir's partitions; a cluster's have none,
//! so there these names are `ENOENT` and not listed).

use std::sync::Arc;
use std::time::SystemTime;

use topicfs_source::PartitionSource;
use topicfs_source::error::{Error, Result};
use topicfs_view::bykey::{KeySpec, KeysReader, TopicKeyStream, latest_record};
use topicfs_view::spec::Format;

use super::TopicFs;
use super::attr::{AttrReply, DYNAMIC_TTL, OpenRequest, Opened, STABLE_TTL};
use super::handle::{Handle, StreamRef};
use super::node::{FileNode, KeyDir, KeyFile, Node, PartitionId};
use super::open::direct;
use super::subtree::{DirAttr, SubtreeDir, SubtreeFile};

fn file(file: KeyFile) -> Node {
    Node::File(FileNode::Keys(file))
}

impl SubtreeDir for KeyDir {
    fn child(&self, _fs: &TopicFs, name: &str) -> Result<Option<Node>> {
        let name = name.to_string();
        Ok(Some(match self {
            KeyDir::ByKey(id) => {
                parse_key_spec(&name, true)?;
                file(KeyFile::ByKey(id.clone(), name))
            }
            KeyDir::Latest(id) => {
                parse_key_spec(&name, false)?;
                file(KeyFile::Latest(id.clone(), name))
            }
            KeyDir::Topic(topic) => {
                parse_key_spec(&name, false)?;
                file(KeyFile::Topic(topic.clone(), name))
            }
        }))
    }

    /// Keys are not listed (a partition may have millions): `keys` lists them.
    fn list(&self, fs: &TopicFs) -> Result<Vec<(String, Node)>> {
        match self {
            KeyDir::ByKey(id) | KeyDir::Latest(id) => fs.has_key_index(id).map(drop)?,
            KeyDir::Topic(topic) => fs.source.partitions(topic).map(drop)?,
        }
        Ok(Vec::new())
    }

    fn attr(&self, fs: &TopicFs) -> Result<DirAttr> {
        let mtime = match self {
            KeyDir::ByKey(id) | KeyDir::Latest(id) => fs.partition(id)?.last_modified()?,
            KeyDir::Topic(topic) => fs.topic_mtime(topic)?,
        };
        Ok(DirAttr { perm: fs.dir_perm(false), mtime, ttl: STABLE_TTL })
    }
}

impl SubtreeFile for KeyFile {
    fn mtime(&self, fs: &TopicFs) -> Result<SystemTime> {
        match self {
            KeyFile::ByKey(id, _) => fs.partition(id)?.last_modified(),
            KeyFile::Latest(id, _) | KeyFile::Keys(id) => {
                Ok(fs.partition(id)?.summary()?.last_modified)
            }
            KeyFile::Topic(topic, _) => fs.topic_mtime(topic),
        }
    }

    fn is_stream(&self) -> bool {
        match self {
            KeyFile::ByKey(..) | KeyFile::Topic(..) => true,
            KeyFile::Latest(..) | KeyFile::Keys(_) => false,
        }
    }

    /// Opens the key stream a `by-key/` name means now.
    fn resolve(&self, fs: &TopicFs) -> Result<StreamRef> {
        match self {
            KeyFile::ByKey(id, name) => {
                let spec = parse_key_spec(name, true)?;
                let part = fs.partition(id)?;
                let key = spec.resolve(part.as_ref())?;
                let tracker = fs.streams.tracker(part.as_ref());
                let streams = fs.streams.key_streams();
                let shown = fs.streams.json_shown();
                let stream = streams.open(part, key, spec.format, tracker, shown)?;
                Ok(StreamRef::Key(stream))
            }
            KeyFile::Topic(topic, name) => {
                let spec = parse_key_spec(name, false)?;
                let parts = fs.topic_partitions(topic)?;
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
                let tracker = |p: &dyn PartitionSource| fs.streams.tracker(p);
                let shown = fs.streams.json_shown();
                let stream = TopicKeyStream::open(parts, key, spec.format, &tracker, shown)?;
                Ok(StreamRef::TopicKey(Arc::new(stream)))
            }
            KeyFile::Latest(..) | KeyFile::Keys(_) => {
                Err(Error::NotFound(format!("{} is not a stream", self.path())))
            }
        }
    }

    fn is_writable(&self) -> bool {
        false
    }

    fn attr(&self, fs: &TopicFs, ino: u64, node: &Node) -> Result<AttrReply> {
        let size = match self {
            KeyFile::ByKey(..) | KeyFile::Topic(..) => return fs.stream_file_attr(ino, node),
            KeyFile::Latest(id, name) => fs.latest_text(self, id, name)?.len() as u64,
            // Exact when the listing is small enough to generate at stat, else 0 (not yet
            // known, as for a stream farther than the sizing budget; tools read to the end).
            KeyFile::Keys(id) => fs.keys_reader(id)?.size()?.unwrap_or(0),
        };
        Ok(fs.file_reply(ino, size, fs.read_only_perm(), self.mtime(fs)?, DYNAMIC_TTL))
    }

    fn open(&self, fs: &TopicFs, ino: u64, node: &Node, request: OpenRequest) -> Result<Opened> {
        match self {
            KeyFile::ByKey(..) | KeyFile::Topic(..) => {
                fs.open_stream_file(ino, node, request).map(direct)
            }
            KeyFile::Latest(id, name) => {
                fs.refuse_write(request, "writing a latest file")?;
                let text = fs.latest_text(self, id, name)?;
                Ok(direct(fs.handles.insert(Handle::Text(text))))
            }
            KeyFile::Keys(id) => {
                fs.refuse_write(request, "writing a keys file")?;
                let reader = fs.keys_reader(id)?;
                Ok(direct(fs.handles.insert(Handle::Keys(reader))))
            }
        }
    }
}

/// Parses a name under `by-key/` (any format), `latest/` or `<topic>/by-key/` (`raw`: whether
/// `.raw` is a format there).
fn parse_key_spec(name: &str, raw: bool) -> Result<KeySpec> {
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

    /// The contents of a `latest/` file now; `NotFound` when the key has no record, or its
    /// last is a tombstone.
    fn latest_text(&self, file: &KeyFile, id: &PartitionId, name: &str) -> Result<Vec<u8>> {
        let spec = parse_key_spec(name, false)?;
        let part = self.partition(id)?;
        let key = spec.resolve(part.as_ref())?;
        let tracker = self.streams.tracker(part.as_ref());
        let shown = self.streams.json_shown();
        latest_record(part.as_ref(), key.as_deref(), spec.format, tracker.as_deref(), shown)?
            .ok_or_else(|| {
                Error::NotFound(format!("{}: no record, or the last is a tombstone", file.path()))
            })
    }

    /// A reader of a partition's `keys`.
    fn keys_reader(&self, id: &PartitionId) -> Result<KeysReader> {
        let part = self.partition(id)?;
        let tracker = self.streams.tracker(part.as_ref());
        KeysReader::open(part, tracker)
    }
}
