//! Open files and directories: the handle table.
//!
//! Handle numbers come from a counter and are never reused while the mount lives. The table's
//! lock is held only to insert, clone or remove an `Arc<Handle>`; reads, appends and listings
//! run on the cloned `Arc` without it.
//!
//! Lock order: the handle table lock, then (after releasing it) one handle's own lock
//! (`Dir`'s entries or `Append`'s state). No code holds two handle locks at once, and no handle
//! lock is held while taking the inode table or handle table lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use topicfs_format::Offset;
use topicfs_source::PartitionSource;
use topicfs_source::SegmentFileKind;
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_view::bykey::{KeyStream, KeysReader, TopicKeyStream};
use topicfs_view::inspect::InspectionReader;
use topicfs_view::readahead::{AheadPool, AheadSource, ReadAhead};
use topicfs_view::stream::Stream;
use topicfs_view::topic::TopicStream;

use super::append::AppendState;
use super::attr::DirEntry;

/// What an open handle reads or writes.
pub enum Handle {
    /// An open directory: its entries as listed at `opendir` (or at a `readdir` from offset 0),
    /// so offsets stay consistent across the `readdir` calls of one listing.
    Dir { ino: u64, entries: Mutex<Vec<DirEntry>> },
    /// An `info` or `offsets` file: its text rendered at `open`.
    Text(Vec<u8>),
    /// A segment dump or a `check` report: the contents the inspection cache shares (not a
    /// copy), a `.log` dump rendered as it is read.
    Inspection(InspectionReader),
    /// A stream under `by-offset/` or `by-time/` (of a partition or a topic), resolved at
    /// `open` (or at the lookup that preceded it), with this handle's read-ahead (partition
    /// streams).
    Stream { ino: u64, stream: StreamRef, ahead: Option<ReadAhead> },
    /// A raw segment file.
    Segment { partition: Arc<dyn PartitionSource>, base_offset: Offset, kind: SegmentFileKind },
    /// `append` or `append.json` (boxed: its state, with a refused line's end, is the largest).
    Append(Box<Mutex<AppendState>>),
    /// A group's `offsets` or `auto.offset.reset` file (`file` says which): the text rendered
    /// at `open`; each `write()` is one commit (or one setting).
    Group { file: super::node::GroupFile, text: Vec<u8> },
    /// A partition's `keys` listing, generated as it is read.
    Keys(KeysReader),
    /// A topic's `config` file ([`super::config`]).
    Config(super::config::ConfigHandle),
    /// A topic's `indexes` file: its text rendered at `open`; each line written declares or
    /// drops a field index ([`super::filtered`]).
    Indexes { topic: String, text: Vec<u8> },
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Handle::Dir { ino, .. } => write!(f, "Dir({ino})"),
            Handle::Text(text) => write!(f, "Text({} bytes)", text.len()),
            Handle::Inspection(reader) => write!(f, "Inspection({} bytes)", reader.size()),
            Handle::Stream { ino, .. } => write!(f, "Stream({ino})"),
            Handle::Segment { partition, base_offset, kind } => write!(
                f,
                "Segment({}-{} {base_offset}{})",
                partition.topic(),
                partition.partition(),
                kind.suffix()
            ),
            Handle::Append(state) => write!(f, "{:?}", lock(state)),
            Handle::Group { file, .. } => write!(f, "Group({file:?})"),
            Handle::Keys(_) => write!(f, "Keys"),
            Handle::Config(handle) => write!(f, "Config({})", handle.topic),
            Handle::Indexes { topic, .. } => write!(f, "Indexes({topic})"),
        }
    }
}

/// A stream file of a partition (`<topic>/<p>/by-offset/`, `by-time/`) or of a whole topic
/// (`<topic>/by-time/`): both have an exact, growing size and positional reads.
#[derive(Clone, Debug)]
pub enum StreamRef {
    Partition(Arc<Stream>),
    Topic(Arc<TopicStream>),
    /// `<topic>/<p>/by-key/<key>`: the records of one key, growing.
    Key(Arc<KeyStream>),
    /// `<topic>/by-key/<key>`: the records of one key over the topic.
    TopicKey(Arc<TopicKeyStream>),
}

impl StreamRef {
    /// Exactly the bytes a full read returns now.
    pub fn size(&self) -> Result<u64> {
        match self {
            StreamRef::Partition(s) => s.size(),
            StreamRef::Topic(s) => s.size(),
            StreamRef::Key(s) => s.size(),
            StreamRef::TopicKey(s) => s.size(),
        }
    }

    /// The size `stat` shows: exact, or `None` while not yet known (partition streams whose
    /// end lies farther than their source's sizing budget; see [`Stream::known_size`]). Topic
    /// streams are always exact.
    pub fn known_size(&self) -> Result<Option<u64>> {
        match self {
            StreamRef::Partition(s) => s.known_size(),
            StreamRef::Topic(s) => s.size().map(Some),
            StreamRef::Key(s) => s.size().map(Some),
            StreamRef::TopicKey(s) => s.size().map(Some),
        }
    }

    /// Whether a cleaner pass replaced segments the stream's partitions had when it was opened
    /// (a new open of its name resolves it again: see [`crate::TopicFs`]'s pins).
    pub fn made_before_a_pass(&self) -> bool {
        match self {
            StreamRef::Partition(s) => s.made_before_a_pass(),
            StreamRef::Topic(s) => s.made_before_a_pass(),
            StreamRef::Key(s) => s.made_before_a_pass(),
            StreamRef::TopicKey(s) => s.made_before_a_pass(),
        }
    }

    /// Up to `len` bytes at `offset` (fewer at the current end).
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        match self {
            StreamRef::Partition(s) => s.read_at(offset, len),
            StreamRef::Topic(s) => s.read_at(offset, len).map(Bytes::from),
            StreamRef::Key(s) => s.read_at(offset, len).map(Bytes::from),
            StreamRef::TopicKey(s) => s.read_at(offset, len).map(Bytes::from),
        }
    }

    /// Read-ahead on `pool` for a handle reading this stream (partition streams; `None` for
    /// topic streams, which merge partitions and are read directly).
    pub fn read_ahead(&self, pool: &AheadPool) -> Option<ReadAhead> {
        match self {
            StreamRef::Partition(s) => {
                let source: Arc<dyn AheadSource> = Arc::clone(s) as Arc<dyn AheadSource>;
                Some(ReadAhead::new(source, pool))
            }
            StreamRef::Topic(_) | StreamRef::Key(_) | StreamRef::TopicKey(_) => None,
        }
    }

    /// Whether both name the same open stream.
    pub fn same(&self, other: &StreamRef) -> bool {
        match (self, other) {
            (StreamRef::Partition(a), StreamRef::Partition(b)) => Arc::ptr_eq(a, b),
            (StreamRef::Topic(a), StreamRef::Topic(b)) => Arc::ptr_eq(a, b),
            (StreamRef::Key(a), StreamRef::Key(b)) => Arc::ptr_eq(a, b),
            (StreamRef::TopicKey(a), StreamRef::TopicKey(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// Open handles by number.
#[derive(Debug, Default)]
pub struct HandleTable {
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    /// **Invariant**: greater than every handle number handed out (0 is never used).
    next_fh: AtomicU64,
}

impl HandleTable {
    /// An empty table.
    pub fn new() -> HandleTable {
        HandleTable { handles: Mutex::new(HashMap::new()), next_fh: AtomicU64::new(1) }
    }

    /// Registers a handle and returns its number.
    pub fn insert(&self, handle: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, Arc::new(handle));
        fh
    }

    /// The handle with this number; `StaleHandle` if it was released (or never existed).
    pub fn get(&self, fh: u64) -> Result<Arc<Handle>> {
        lock(&self.handles).get(&fh).cloned().ok_or(Error::StaleHandle)
    }

    /// Removes a handle; `StaleHandle` if it was not open.
    pub fn remove(&self, fh: u64) -> Result<Arc<Handle>> {
        lock(&self.handles).remove(&fh).ok_or(Error::StaleHandle)
    }

    /// Every open handle (for shutdown).
    pub fn all(&self) -> Vec<Arc<Handle>> {
        lock(&self.handles).values().cloned().collect()
    }

    /// Number of open handles.
    pub fn len(&self) -> usize {
        lock(&self.handles).len()
    }

    /// Whether no handle is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
