//! Filtered views: `<topic>/where/<filter>/` is the topic seen through a filter (issue 46,
//! [`topicfs_view::filter`] for the grammar): its partitions with `info`, `by-offset/` and
//! `by-time/`, whose streams hold only the records the filter keeps, each with its original
//! offset, timestamp, key and headers (in `.json`); the topic-level merged `by-time/`
//! (the unfiltered merge with the rejected records left out, [`TopicFilter`]) and an `info`
//! summing how the filter served each partition. The filter is evaluated in the daemon over
//! the partition's records (a byte-level check first, then a parse of the candidates), so no
//! record it rejects crosses FUSE; on a cluster mount it runs over what Fetch returns.
//!
//! A filtered stream is a stream like any other (exact sizes, bytes that never change, `tail
//! -f` following new matches), read through a [`StreamRegistry`] of the filter's own, made from
//! the mount's (same trackers, memory budget and schemas) and kept for the
//! [`FILTERS_KEPT`] filters used last. A filter that does not parse is `EINVAL` at lookup,
//! naming the byte where it went wrong.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::SystemTime;

use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_view::field_index::FieldIndexes;
use topicfs_view::filter::Filter;
use topicfs_view::spec::{Format, StreamSpec};
use topicfs_view::stream::StreamRegistry;
use topicfs_view::topic::{self as topic_view, TopicFilter};

use super::attr::{AttrReply, DYNAMIC_TTL, OpenRequest, Opened, STABLE_TTL};
use super::handle::{Handle, StreamRef};
use super::node::{BY_OFFSET, BY_TIME, INFO, Node, PartitionId, StreamDir, parse_partition};
use super::node::{DirNode, FileNode, WhereDir, WhereFile};
use super::open::direct;
use super::subtree::{DirAttr, SubtreeDir, SubtreeFile};
use super::{TopicFs, info, now_ms};

/// Filters whose registries (and so render indexes) are kept: the ones used last. A stream
/// open on an older one keeps its own.
pub const FILTERS_KEPT: usize = 16;

/// The registries of the filters used last, most recent last.
#[derive(Default)]
pub(crate) struct FilterRegistries {
    kept: std::sync::Mutex<VecDeque<(String, Arc<StreamRegistry>)>>,
}

fn dir(dir: WhereDir) -> Node {
    Node::Dir(DirNode::Where(dir))
}

fn file(file: WhereFile) -> Node {
    Node::File(FileNode::Where(file))
}

/// Parses `text` as a filter: `EINVAL` naming the byte where it went wrong.
fn parse_filter(topic: &str, text: &str) -> Result<Filter> {
    Filter::parse(text)
        .map_err(|e| Error::InvalidInput(format!("{topic}/where/{text}: not a filter: {e}")))
}

/// Parses a stream name under a filtered `by-offset/` or `by-time/`: the record formats only.
fn parse_spec(dir: StreamDir, name: &str) -> Result<StreamSpec> {
    let spec = dir.parse(name)?;
    if spec.format == Format::Raw {
        return Err(Error::NotFound(format!(
            "{name}: a filtered view has no .raw streams (a batch holds records the filter does \
             not keep)"
        )));
    }
    Ok(spec)
}

impl SubtreeDir for WhereDir {
    fn child(&self, _fs: &TopicFs, name: &str) -> Result<Option<Node>> {
        Ok(match self {
            WhereDir::All(topic) => {
                parse_filter(topic, name)?;
                Some(dir(WhereDir::Filter(topic.clone(), name.to_string())))
            }
            WhereDir::Filter(topic, filter) => match name {
                INFO => Some(file(WhereFile::TopicInfo(topic.clone(), filter.clone()))),
                BY_TIME => Some(dir(WhereDir::TopicByTime(topic.clone(), filter.clone()))),
                _ => parse_partition(name).map(|partition| {
                    let id = PartitionId { topic: topic.clone(), partition };
                    dir(WhereDir::Partition(id, filter.clone()))
                }),
            },
            WhereDir::TopicByTime(topic, filter) => {
                topic_view::parse_topic_by_time(name)?;
                Some(file(WhereFile::TopicStream(topic.clone(), filter.clone(), name.to_string())))
            }
            WhereDir::Partition(id, filter) => match name {
                INFO => Some(file(WhereFile::Info(id.clone(), filter.clone()))),
                BY_OFFSET => {
                    Some(dir(WhereDir::Streams(id.clone(), filter.clone(), StreamDir::ByOffset)))
                }
                BY_TIME => {
                    Some(dir(WhereDir::Streams(id.clone(), filter.clone(), StreamDir::ByTime)))
                }
                _ => None,
            },
            WhereDir::Streams(id, filter, stream_dir) => {
                parse_spec(*stream_dir, name)?;
                Some(file(WhereFile::Stream(
                    id.clone(),
                    filter.clone(),
                    *stream_dir,
                    name.to_string(),
                )))
            }
        })
    }

    fn list(&self, fs: &TopicFs) -> Result<Vec<(String, Node)>> {
        Ok(match self {
            // Filters are not listed: any can be looked up.
            WhereDir::All(topic) => {
                fs.source.partitions(topic)?;
                Vec::new()
            }
            WhereDir::Filter(topic, filter) => {
                let (t, f) = (|| topic.clone(), || filter.clone());
                let mut names = vec![
                    (INFO.to_string(), file(WhereFile::TopicInfo(t(), f()))),
                    (BY_TIME.to_string(), dir(WhereDir::TopicByTime(t(), f()))),
                ];
                names.extend(fs.source.partitions(topic)?.into_iter().map(|partition| {
                    let id = PartitionId { topic: t(), partition };
                    (partition.to_string(), dir(WhereDir::Partition(id, f())))
                }));
                names
            }
            WhereDir::TopicByTime(topic, filter) => {
                topic_view::topic_by_time_names(fs.source.as_ref(), topic)?
                    .into_iter()
                    .map(|name| {
                        let node =
                            WhereFile::TopicStream(topic.clone(), filter.clone(), name.clone());
                        (name, file(node))
                    })
                    .collect()
            }
            WhereDir::Partition(id, filter) => {
                fs.partition(id)?;
                let (i, f) = (|| id.clone(), || filter.clone());
                vec![
                    (INFO.to_string(), file(WhereFile::Info(i(), f()))),
                    (BY_OFFSET.to_string(), dir(WhereDir::Streams(i(), f(), StreamDir::ByOffset))),
                    (BY_TIME.to_string(), dir(WhereDir::Streams(i(), f(), StreamDir::ByTime))),
                ]
            }
            WhereDir::Streams(id, filter, stream_dir) => {
                // The unfiltered names (their offsets and times are the log's).
                fs.stream_names(id, *stream_dir)?
                    .into_iter()
                    .filter(|name| !name.ends_with(Format::Raw.suffix()))
                    .map(|name| {
                        let node = WhereFile::Stream(
                            id.clone(),
                            filter.clone(),
                            *stream_dir,
                            name.clone(),
                        );
                        (name, file(node))
                    })
                    .collect()
            }
        })
    }

    fn attr(&self, fs: &TopicFs) -> Result<DirAttr> {
        let mtime = match self {
            WhereDir::All(topic) => fs.topic_mtime(topic)?,
            WhereDir::Filter(topic, filter) | WhereDir::TopicByTime(topic, filter) => {
                parse_filter(topic, filter)?;
                fs.topic_mtime(topic)?
            }
            WhereDir::Partition(id, _) | WhereDir::Streams(id, ..) => {
                fs.partition(id)?.last_modified()?
            }
        };
        Ok(DirAttr { perm: fs.dir_perm(false), mtime, ttl: STABLE_TTL })
    }
}

impl SubtreeFile for WhereFile {
    fn is_stream(&self) -> bool {
        match self {
            WhereFile::Stream(..) | WhereFile::TopicStream(..) => true,
            WhereFile::Info(..) | WhereFile::TopicInfo(..) | WhereFile::Indexes(_) => false,
        }
    }

    fn mtime(&self, fs: &TopicFs) -> Result<SystemTime> {
        match self {
            WhereFile::Stream(id, ..) | WhereFile::Info(id, _) => fs.partition(id)?.last_modified(),
            WhereFile::TopicInfo(topic, _)
            | WhereFile::TopicStream(topic, ..)
            | WhereFile::Indexes(topic) => fs.topic_mtime(topic),
        }
    }

    fn resolve(&self, fs: &TopicFs) -> Result<StreamRef> {
        match self {
            WhereFile::Stream(id, filter, stream_dir, name) => {
                let spec = parse_spec(*stream_dir, name)?;
                let registry = fs.filter_registry(&id.topic, filter)?;
                let partition = fs.partition(id)?;
                registry.open(partition, &spec, now_ms()).map(StreamRef::Partition)
            }
            WhereFile::TopicStream(topic, filter, name) => {
                let spec = topic_view::parse_topic_by_time(name)?;
                let filter = Some(fs.topic_filter(topic, filter)?);
                let source = Arc::clone(&fs.source);
                let stream = fs.topics.open_filtered(source, topic, &spec, now_ms(), filter)?;
                Ok(StreamRef::Topic(stream))
            }
            WhereFile::Info(..) | WhereFile::TopicInfo(..) | WhereFile::Indexes(_) => {
                Err(Error::NotFound(format!("{} is not a stream", self.path())))
            }
        }
    }

    fn is_writable(&self) -> bool {
        matches!(self, WhereFile::Indexes(_))
    }

    fn attr(&self, fs: &TopicFs, ino: u64, node: &Node) -> Result<AttrReply> {
        match self {
            WhereFile::Stream(..) | WhereFile::TopicStream(..) => fs.stream_file_attr(ino, node),
            WhereFile::Info(id, filter) => {
                let size = fs.filtered_info(id, filter)?.len() as u64;
                let mtime = self.mtime(fs)?;
                Ok(fs.file_reply(ino, size, fs.read_only_perm(), mtime, DYNAMIC_TTL))
            }
            WhereFile::TopicInfo(topic, filter) => {
                let size = fs.filtered_topic_info(topic, filter)?.len() as u64;
                let mtime = self.mtime(fs)?;
                Ok(fs.file_reply(ino, size, fs.read_only_perm(), mtime, DYNAMIC_TTL))
            }
            WhereFile::Indexes(topic) => {
                let size = fs.indexes_text(topic)?.len() as u64;
                let perm = fs.options.file_mode & 0o666;
                Ok(fs.file_reply(ino, size, perm, self.mtime(fs)?, DYNAMIC_TTL))
            }
        }
    }

    fn open(&self, fs: &TopicFs, ino: u64, node: &Node, request: OpenRequest) -> Result<Opened> {
        match self {
            WhereFile::Stream(..) | WhereFile::TopicStream(..) => {
                fs.open_stream_file(ino, node, request).map(direct)
            }
            WhereFile::Info(id, filter) => {
                fs.refuse_write(request, "writing a filtered view's info")?;
                let text = fs.filtered_info(id, filter)?;
                Ok(direct(fs.handles.insert(Handle::Text(text.into_bytes()))))
            }
            WhereFile::TopicInfo(topic, filter) => {
                fs.refuse_write(request, "writing a filtered view's info")?;
                let text = fs.filtered_topic_info(topic, filter)?;
                Ok(direct(fs.handles.insert(Handle::Text(text.into_bytes()))))
            }
            WhereFile::Indexes(topic) => {
                let text = fs.indexes_text(topic)?.into_bytes();
                Ok(direct(fs.handles.insert(Handle::Indexes { topic: topic.clone(), text })))
            }
        }
    }
}

impl TopicFs {
    /// The mount's field indexes, made at first use on its executor with its schemas.
    pub fn field_indexes(&self) -> &Arc<FieldIndexes> {
        self.field_indexes.get_or_init(|| {
            Arc::new(FieldIndexes::new(self.executor().clone(), self.schemas().cloned()))
        })
    }

    /// The text of `<topic>/indexes`: a line per declared field, `FIELD STATE DONE/TOTAL
    /// segments BYTES bytes` (STATE `building` or `ready`), over the topic's partitions.
    /// Reading it starts the builds of segments sealed since.
    pub(super) fn indexes_text(&self, topic: &str) -> Result<String> {
        let parts: Vec<_> = self
            .source
            .partitions(topic)?
            .into_iter()
            .map(|p| self.partition(&PartitionId { topic: topic.to_string(), partition: p }))
            .collect::<Result<_>>()?;
        let indexes = self.field_indexes();
        let supported = parts.iter().all(|p| FieldIndexes::supported(p.as_ref()));
        for p in &parts {
            indexes.ensure(Arc::clone(p));
        }
        let mut out = String::new();
        for s in indexes.status(topic, &parts) {
            if !supported {
                out.push_str(&format!(
                    "{} unsupported (this mount keeps nothing per segment: filtered reads scan)\n",
                    s.field
                ));
                continue;
            }
            let state = if s.ready { "ready" } else { "building" };
            out.push_str(&format!(
                "{} {state} {}/{} segments {} bytes\n",
                s.field, s.done, s.total, s.bytes
            ));
        }
        Ok(out)
    }

    /// A write to `<topic>/indexes`: each line `FIELD` declares an index (and starts its
    /// builds), `-FIELD` drops it. A field that is not a JSON field or `@header.NAME` is
    /// `EINVAL` (logged).
    pub fn indexes_write(&self, topic: &str, data: &[u8]) -> Result<()> {
        let text = std::str::from_utf8(data)
            .map_err(|_| Error::InvalidInput(format!("{topic}/indexes: not UTF-8")))?;
        let indexes = self.field_indexes();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let done = match line.strip_prefix('-') {
                Some(field) => indexes.drop_field(topic, field).map(|_| ()),
                None => indexes.declare(topic, line),
            };
            if let Err(why) = done {
                log::warn!("{topic}/indexes: {line:?} refused: {why}");
                return Err(Error::InvalidInput(format!("{topic}/indexes: {line:?}: {why}")));
            }
        }
        for p in self.source.partitions(topic)? {
            let part = self.partition(&PartitionId { topic: topic.to_string(), partition: p })?;
            indexes.ensure(part);
        }
        Ok(())
    }

    /// The registry `filter` is read through: kept for the [`FILTERS_KEPT`] filters used last.
    pub(super) fn filter_registry(&self, topic: &str, text: &str) -> Result<Arc<StreamRegistry>> {
        let mut kept = lock(&self.filters.kept);
        if let Some(at) = kept.iter().position(|(t, _)| t == text) {
            let entry = kept.remove(at).ok_or_else(|| Error::NotFound(text.to_string()))?;
            let registry = Arc::clone(&entry.1);
            kept.push_back(entry);
            return Ok(registry);
        }
        let filter = parse_filter(topic, text)?;
        let indexes = Some(Arc::clone(self.field_indexes()));
        let registry = Arc::new(self.streams.filtered(text, filter).with_field_indexes(indexes));
        kept.push_back((text.to_string(), Arc::clone(&registry)));
        if kept.len() > FILTERS_KEPT {
            kept.pop_front();
        }
        Ok(registry)
    }

    /// The text of `<topic>/where/<filter>/<p>/info`: the partition's `info`, then the filter,
    /// how it is answered and how many records it examined and kept on this mount so far.
    fn filtered_info(&self, id: &PartitionId, text: &str) -> Result<String> {
        let registry = self.filter_registry(&id.topic, text)?;
        let partition = self.partition(id)?;
        let summary = partition.summary()?;
        let swaps = partition.known().rewrites;
        let mut out = info::partition_info(&id.topic, id.partition, &summary, swaps);
        let (examined, matched) = registry
            .filter_stats(&id.topic, id.partition)
            .map(|(_, stats)| stats.get())
            .unwrap_or_default();
        out.push_str(&format!("filter: {text}\n"));
        let filter = parse_filter(&id.topic, text)?;
        let (fields, done) = self.field_indexes().coverage(partition.as_ref(), &filter);
        if fields.is_empty() || done == 0 {
            out.push_str("answered_by: scan\n");
        } else {
            let segments = summary.segment_count.unwrap_or(done);
            let fields = fields.join(", ");
            out.push_str(&format!(
                "answered_by: index ({fields}, {done} of {segments} segments)\n"
            ));
        }
        out.push_str(&format!("records_examined: {examined}\n"));
        out.push_str(&format!("records_matched: {matched}\n"));
        Ok(out)
    }
}

// ---- the topic level: `where/<filter>/info` and `where/<filter>/by-time/` ---------------------

/// The lines a filtered partition's `info` adds after the partition's own (from `filter:` on).
const FILTER_LINE: &str = "filter: ";

impl TopicFs {
    /// The filter of `<topic>/where/<text>/by-time/` streams: each partition counts into the
    /// stats its own filtered streams count into (the filter's registry's).
    fn topic_filter(&self, topic: &str, text: &str) -> Result<TopicFilter> {
        let registry = self.filter_registry(topic, text)?;
        let filter = Arc::new(parse_filter(topic, text)?);
        let stats = Arc::new(move |topic: &str, partition: u32| {
            registry.filter_stats(topic, partition).map(|(_, stats)| stats).unwrap_or_default()
        });
        Ok(TopicFilter { text: Arc::from(text), filter, stats })
    }

    /// The text of `<topic>/where/<filter>/info`: the topic's `info`, the filter, how it was
    /// answered (every partition's answer, distinct, joined by `,`) and the records examined and
    /// matched summed over the partitions; then, per partition `p`, the lines its own filtered
    /// `info` adds after `filter:` (`answered_by`, `records_examined`, `records_matched`, ...)
    /// prefixed `partition.<p>.`, so the two never disagree.
    fn filtered_topic_info(&self, topic: &str, text: &str) -> Result<String> {
        parse_filter(topic, text)?;
        let _ = self.source.state_bounds(topic);
        let mut summaries = Vec::new();
        let mut per_partition = String::new();
        let (mut answers, mut examined, mut matched) = (Vec::new(), 0u64, 0u64);
        for p in self.source.partitions(topic)? {
            summaries.push((p, self.source.partition(topic, p)?.summary()?));
            let id = PartitionId { topic: topic.to_string(), partition: p };
            let own = self.filtered_info(&id, text)?;
            let Some(at) = own.find(&format!("\n{FILTER_LINE}")) else { continue };
            for line in own.get(at + 1..).unwrap_or_default().lines().skip(1) {
                let Some((key, value)) = line.split_once(": ") else { continue };
                let count = || value.parse::<u64>().unwrap_or(0);
                match key {
                    "answered_by" if !answers.iter().any(|a| a == value) => {
                        answers.push(value.to_string());
                    }
                    "records_examined" => examined = examined.saturating_add(count()),
                    "records_matched" => matched = matched.saturating_add(count()),
                    _ => {}
                }
                per_partition.push_str(&format!("partition.{p}.{line}\n"));
            }
        }
        let mut out = info::topic_info(topic, &summaries);
        out.push_str(&format!("{FILTER_LINE}{text}\n"));
        answers.sort_unstable();
        let answered_by = if answers.is_empty() { "none".to_string() } else { answers.join(",") };
        out.push_str(&format!("answered_by: {answered_by}\n"));
        out.push_str(&format!("records_examined: {examined}\n"));
        out.push_str(&format!("records_matched: {matched}\n"));
        out.push_str(&per_partition);
        Ok(out)
    }
}
