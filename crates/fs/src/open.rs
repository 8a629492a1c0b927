//! Opening and reading files, and closing them: the handle each kind of file gets, and the
//! stream pins that keep a name meaning what its open handles read.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_view::inspect::files;
use topicfs_view::topic as topic_view;

use super::append::{AppendFormat, AppendState, AppendTarget};
use super::attr::{OpenRequest, Opened};
use super::handle::{Handle, StreamRef};
use super::node::{FileNode, Node};
use super::subtree::SubtreeFile;
use super::{Pin, TRIM_AFTER, TopicFs, describe, now_ms};

/// `NotPermitted` (`EPERM`) for a write open of an internal topic's `append` or `append.json`
/// (see [`super::is_internal_topic`]): a consumer group's commits go through its `offsets` file.
fn refuse_internal_append(topic: &str) -> Result<()> {
    if super::is_internal_topic(topic) {
        return Err(Error::NotPermitted("appending to a Kafka internal topic (the broker's own)"));
    }
    Ok(())
}

/// How a file whose reads go to the daemon at every call (direct I/O) is opened: streams,
/// generated texts, an active segment's files.
pub(super) fn direct(fh: u64) -> Opened {
    Opened { fh, direct_io: true, keep_cache: false, backing: None, no_flush: true }
}

/// [`direct`], with a `flush` at each close: `append` files append their pending partial
/// line then, settings and group files apply what was written.
pub(super) fn append(fh: u64) -> Opened {
    Opened { no_flush: false, ..direct(fh) }
}

impl TopicFs {
    /// The longest record an append handle of `topic` takes: the topic's `max.message.bytes`
    /// as the source states it now (a `config` override applies to the next open), or the
    /// mount's when the source cannot say (a broker without DescribeConfigs, a value it does
    /// not list). The log engine checks every batch again against its own settings.
    fn append_limit(&self, topic: &str) -> usize {
        let stated = self.source.max_message_bytes(topic).ok().flatten();
        stated.unwrap_or(self.options.max_line_bytes)
    }

    /// Opens a file. Streams, info and segment files are read-only (direct I/O, so reads follow
    /// the current size; a sealed segment's files, which never change, are cached and name
    /// their file on disk as [`Opened::backing`]); `append` files are write-only in effect
    /// (reading them gives nothing).
    pub fn open(&self, ino: u64, request: OpenRequest) -> Result<Opened> {
        let _op = topicfs_source::Operation::begin();
        let node = self.node(ino)?;
        let Node::File(file) = &node else {
            return Err(Error::Unsupported("open of a directory as a file"));
        };
        match file {
            FileNode::TopicConfig(topic) => {
                if request.write || request.truncate {
                    self.check_writable()?;
                }
                let text = self.config_text(topic)?.into_bytes();
                let handle = super::config::ConfigHandle::new(topic.clone(), text);
                Ok(append(self.handles.insert(Handle::Config(handle))))
            }
            FileNode::Schemas(file) => file.open(self, ino, &node, request),
            FileNode::Where(file) => file.open(self, ino, &node, request),
            FileNode::Inspect(file) => file.open(self, ino, &node, request),
            FileNode::Keys(file) => file.open(self, ino, &node, request),
            FileNode::Groups(file) => file.open(self, ino, &node, request),
            FileNode::MountInfo
            | FileNode::MountLog
            | FileNode::TopicInfo(_)
            | FileNode::PartitionInfo(_) => {
                self.refuse_write(request, "writing an info file")?;
                let text = self.info_text(&node)?;
                Ok(direct(self.handles.insert(Handle::Text(text.into_bytes()))))
            }
            FileNode::Offsets(..) => {
                self.refuse_write(request, "writing an offsets file")?;
                let text = self.offsets_text(&node)?;
                Ok(direct(self.handles.insert(Handle::Text(text.into_bytes()))))
            }
            FileNode::TopicAppend(topic) | FileNode::TopicAppendJson(topic) => {
                if request.write || request.truncate {
                    self.check_writable()?;
                    refuse_internal_append(topic)?;
                }
                let format = match file {
                    FileNode::TopicAppendJson(_) => AppendFormat::Json,
                    _ => AppendFormat::Lines,
                };
                // The topic must exist now; its partition count is read at every write.
                self.source.partitions(topic)?;
                let appender = self.topics.appender(Arc::clone(&self.source), topic);
                let target = AppendTarget::Topic(appender);
                let state = AppendState::for_target(target, format, self.append_limit(topic))
                    .with_schemas(self.schemas().cloned());
                Ok(append(self.handles.insert(Handle::Append(Box::new(Mutex::new(state))))))
            }
            FileNode::Stream(..) | FileNode::TopicStream(..) => {
                self.open_stream_file(ino, &node, request).map(direct)
            }
            FileNode::Append(id) | FileNode::AppendJson(id) => {
                if request.write || request.truncate {
                    self.check_writable()?;
                    refuse_internal_append(&id.topic)?;
                }
                let format = match file {
                    FileNode::AppendJson(_) => AppendFormat::Json,
                    _ => AppendFormat::Lines,
                };
                let partition = self.partition(id)?;
                let state = AppendState::new(partition, format, self.append_limit(&id.topic))
                    .with_schemas(self.schemas().cloned());
                Ok(append(self.handles.insert(Handle::Append(Box::new(Mutex::new(state))))))
            }
        }
    }

    /// Opens the stream file `node` (inode `ino`) for reading: the stream its name means now,
    /// pinned while the handle is open, with the handle's read-ahead. The handle number.
    pub(super) fn open_stream_file(
        &self,
        ino: u64,
        node: &Node,
        request: OpenRequest,
    ) -> Result<u64> {
        self.refuse_write(request, "writing a stream")?;
        let stream = self.open_pinned(ino, node)?;
        let ahead = stream.read_ahead(&self.ahead);
        let fh = self.handles.insert(Handle::Stream { ino, stream, ahead });
        let mut open = lock(&self.open_streams);
        open.0 = open.0.saturating_add(1);
        open.1 = open.1.max(open.0);
        Ok(fh)
    }

    /// Reads up to `size` bytes at `offset` of an open file (fewer at its current end). A
    /// stream's bytes may be a slice of a buffer it keeps (the rest of a batch, see the view's
    /// `Tail`): shared, not copied.
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Bytes> {
        let _op = topicfs_source::Operation::begin();
        let size = size as usize;
        match &*self.handles.get(fh)? {
            Handle::Text(text)
            | Handle::Group { text, .. }
            | Handle::Indexes { text, .. }
            | Handle::Config(super::config::ConfigHandle { text, .. }) => {
                let start = usize::try_from(offset).unwrap_or(usize::MAX).min(text.len());
                let end = start.saturating_add(size).min(text.len());
                Ok(Bytes::copy_from_slice(text.get(start..end).unwrap_or_default()))
            }
            Handle::Inspection(reader) => reader.read_at(offset, size).map(Bytes::from),
            Handle::Keys(reader) => reader.read_at(offset, size).map(Bytes::from),
            Handle::Stream { stream, ahead, .. } => {
                let data = match ahead {
                    Some(ahead) => ahead.read(offset, size)?,
                    None => stream.read_at(offset, size)?,
                };
                self.groups.note_read(fh, offset, data.len());
                Ok(data)
            }
            Handle::Segment { partition, base_offset, kind } => {
                let mut buf = vec![0; size];
                let n = files(partition.as_ref())?.read_segment_file(
                    *base_offset,
                    *kind,
                    offset,
                    &mut buf,
                )?;
                buf.truncate(n);
                Ok(Bytes::from(buf))
            }
            Handle::Append(_) => Ok(Bytes::new()),
            Handle::Dir { .. } => Err(Error::Unsupported("read of a directory")),
        }
    }

    /// Closes a file handle. A partial line still pending (no `flush` came) is appended; its
    /// error, if any, is returned for logging (the kernel does not pass it to anyone).
    pub fn release(&self, fh: u64) -> Result<()> {
        let _op = topicfs_source::Operation::begin();
        let handle = self.handles.remove(fh)?;
        match &*handle {
            Handle::Stream { ino, stream, .. } => {
                self.pin_close(*ino);
                let read_to = self.groups.forget_handle(fh);
                let closed = match read_to {
                    Some(read_to) => self.auto_commit_on_close(*ino, stream, read_to),
                    None => Ok(()),
                };
                // The handle's windows and kept rendering are freed with it.
                drop(handle);
                self.stream_closed();
                closed
            }
            Handle::Append(state) => {
                let mut state = lock(state);
                let flushed = state.flush();
                if let Some(part) = state.appended_partition() {
                    self.size_appended(part);
                }
                flushed
            }
            Handle::Config(config) => self.config_release(config),
            Handle::Text(_)
            | Handle::Inspection(_)
            | Handle::Segment { .. }
            | Handle::Group { .. }
            | Handle::Indexes { .. }
            | Handle::Keys(_)
            | Handle::Dir { .. } => Ok(()),
        }
    }

    /// Counts a stream handle closed. Once many have closed (at least [`TRIM_AFTER`] were open
    /// at once and at most half of that are open now), gives the memory freed in the
    /// allocator's heaps back to the system: glibc keeps freed heap memory below a live
    /// allocation resident otherwise (see `doc/ARCHITECTURE.md`, "Memory"). A single reader
    /// opening and closing never triggers it.
    fn stream_closed(&self) {
        let trim = {
            let mut open = lock(&self.open_streams);
            open.0 = open.0.saturating_sub(1);
            let trim = open.1 >= TRIM_AFTER && open.0 <= open.1 / 2;
            if trim {
                open.1 = open.0;
            }
            trim
        };
        if let (true, Some(release)) = (trim, self.release_memory) {
            release();
        }
    }

    /// Resolves a stream node now.
    pub(super) fn resolve(&self, node: &Node) -> Result<StreamRef> {
        let not_a_stream = || Error::NotFound(format!("{} is not a stream", describe(node)));
        let Node::File(file) = node else { return Err(not_a_stream()) };
        match file {
            FileNode::Stream(id, dir, name) => {
                let spec = dir.parse(name)?;
                let partition = self.partition(id)?;
                self.streams.open(partition, &spec, now_ms()).map(StreamRef::Partition)
            }
            FileNode::TopicStream(topic, name) => {
                let spec = topic_view::parse_topic_by_time(name)?;
                let source = Arc::clone(&self.source);
                let stream = self.topics.open_stream(source, topic, &spec, now_ms())?;
                Ok(StreamRef::Topic(stream))
            }
            FileNode::MountInfo
            | FileNode::MountLog
            | FileNode::TopicInfo(_)
            | FileNode::TopicConfig(_)
            | FileNode::Offsets(..)
            | FileNode::TopicAppend(_)
            | FileNode::TopicAppendJson(_)
            | FileNode::PartitionInfo(_)
            | FileNode::Append(_)
            | FileNode::AppendJson(_) => Err(not_a_stream()),
            FileNode::Schemas(file) => file.resolve(self),
            FileNode::Where(file) => file.resolve(self),
            FileNode::Inspect(file) => file.resolve(self),
            FileNode::Keys(file) => file.resolve(self),
            FileNode::Groups(file) => file.resolve(self),
        }
    }

    /// The stream a lookup answers with: the pinned one while a handle reads it, else a fresh
    /// resolution (so `by-offset/-10` means the last ten records as of this lookup).
    pub(super) fn resolve_for_lookup(&self, node: &Node) -> Result<StreamRef> {
        match self.inodes.find(node) {
            Some(ino) => self.pinned(ino, node),
            None => self.resolve(node),
        }
    }

    /// The stream a handle already reads at `ino`, else `stream`. Nothing is kept for an
    /// inode no handle reads: every later call resolves its name afresh anyway, and a stream
    /// keeps up to one rendered batch, so keeping them per name the kernel still remembers
    /// would grow the daemon with every distinct name ever opened. A pinned stream made before
    /// a cleaner pass is replaced by `stream` (the handles reading it keep it, and their
    /// `fstat` shows its size): after a pass the name means the pass's log.
    pub(super) fn pin(&self, ino: u64, stream: StreamRef) -> StreamRef {
        let pinned = match lock(&self.pins).get(&ino) {
            Some(pin) if pin.open > 0 => pin.stream.clone(),
            _ => return stream,
        };
        // Asked of the source outside the lock (no call into the source under it).
        if !pinned.made_before_a_pass() || stream.made_before_a_pass() {
            return pinned;
        }
        match lock(&self.pins).get_mut(&ino) {
            Some(pin) if pin.open > 0 => {
                if pin.stream.same(&pinned) {
                    pin.stream = stream;
                }
                pin.stream.clone()
            }
            _ => stream,
        }
    }

    /// The stream `ino` means now: the pinned one while a handle reads it (unless a cleaner
    /// pass ended since it was made), else a fresh resolution (pinned for later calls), so
    /// `st_size` of `by-offset/-10` is the size of the last ten records as of this call.
    pub(super) fn pinned(&self, ino: u64, node: &Node) -> Result<StreamRef> {
        let pinned =
            lock(&self.pins).get(&ino).filter(|pin| pin.open > 0).map(|p| p.stream.clone());
        if let Some(pinned) = pinned.filter(|s| !s.made_before_a_pass()) {
            return Ok(pinned);
        }
        let stream = self.resolve(node)?;
        Ok(self.pin(ino, stream))
    }

    /// Like [`TopicFs::pinned`], and counts one more open handle on the stream returned, in
    /// one step (so a concurrent lookup cannot re-pin between the two).
    fn open_pinned(&self, ino: u64, node: &Node) -> Result<StreamRef> {
        let fresh = self.pinned(ino, node)?;
        let mut pins = lock(&self.pins);
        let pin = pins.entry(ino).or_insert_with(|| Pin { stream: fresh.clone(), open: 0 });
        if pin.open == 0 {
            pin.stream = fresh;
        }
        pin.open = pin.open.saturating_add(1);
        Ok(pin.stream.clone())
    }

    /// Number of streams kept for open handles (for tests and statistics): memory the
    /// filesystem holds per name stays bounded by the open handles, not by the names used.
    pub fn pinned_streams(&self) -> usize {
        lock(&self.pins).len()
    }

    /// Counts one handle of `ino` closed; the last one unpins its stream (see [`TopicFs::pin`]).
    fn pin_close(&self, ino: u64) {
        let mut pins = lock(&self.pins);
        if let Some(pin) = pins.get_mut(&ino) {
            pin.open = pin.open.saturating_sub(1);
            if pin.open == 0 {
                pins.remove(&ino);
            }
        }
    }
}
