//! One tracker map per mount: a partition read directly (`<topic>/<p>/by-offset/`) and through
//! a topic-level stream (`<topic>/by-time/`) keeps one transaction tracker and is scanned once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use topicfs::error::Result;
use topicfs::format::{NewRecord, Offset};
use topicfs::source::{
    AppendInfo, Committed, ConfigChange, ConfigEntry, KeyIndex, Known, LogDirsReport, OffsetQuery,
    PartitionSource, PartitionSummary, ReadAnswer, ReadCursor, ReadMode, Records, SegmentFiles,
    SpaceStats, SpanStore, TopicSource,
};
use topicfs::storage::log_dirs::LogDirs;
use topicfs::storage::{LogConfig, SegmentMode};
use topicfs::view::spec::StreamSpec;
use topicfs::view::stream::StreamRegistry;
use topicfs::view::topic::{TopicStream, TopicViews, parse_topic_by_time};
use topicfs::view::txn::{Isolation, TxnTracker, TxnTrackers};

/// `inner`'s partitions, counting the reads of a transaction scan
/// ([`ReadMode::HeadsPastDamage`], which only a tracker asks for) in `scans`.
struct CountedPartition {
    inner: Arc<dyn PartitionSource>,
    scans: Arc<AtomicUsize>,
}

impl PartitionSource for CountedPartition {
    fn topic(&self) -> &str {
        self.inner.topic()
    }
    fn partition(&self) -> u32 {
        self.inner.partition()
    }
    fn summary(&self) -> Result<PartitionSummary> {
        self.inner.summary()
    }
    fn known(&self) -> Known {
        self.inner.known()
    }
    fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
        self.inner.offset_for(query)
    }
    fn seek(&self, target: Offset) -> Result<ReadCursor> {
        self.inner.seek(target)
    }
    fn holds(&self, cursor: &ReadCursor) -> Result<bool> {
        self.inner.holds(cursor)
    }
    fn read(&self, cursor: &ReadCursor, max: usize, mode: ReadMode) -> Result<ReadAnswer> {
        if mode == ReadMode::HeadsPastDamage {
            self.scans.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.read(cursor, max, mode)
    }
    fn append(&self, records: Records<'_>) -> Result<AppendInfo> {
        self.inner.append(records)
    }
    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }
    fn segment_files(&self) -> Option<&dyn SegmentFiles> {
        self.inner.segment_files()
    }
    fn key_index(&self) -> Option<&dyn KeyIndex> {
        self.inner.key_index()
    }
    fn committed(&self) -> Committed<'_> {
        self.inner.committed()
    }
    fn span_store(&self) -> Option<&dyn SpanStore> {
        // No segment cache: every scan reads the log (a cached span would hide a second scan).
        None
    }
}

/// `inner` whose partitions are [`CountedPartition`]s sharing one count.
struct Counted {
    inner: Arc<LogDirs>,
    scans: Arc<AtomicUsize>,
}

impl TopicSource for Counted {
    fn topics(&self) -> Result<Vec<String>> {
        TopicSource::topics(self.inner.as_ref())
    }
    fn partitions(&self, topic: &str) -> Result<Vec<u32>> {
        TopicSource::partitions(self.inner.as_ref(), topic)
    }
    fn partition(&self, topic: &str, p: u32) -> Result<Arc<dyn PartitionSource>> {
        let inner = TopicSource::partition(self.inner.as_ref(), topic, p)?;
        Ok(Arc::new(CountedPartition { inner, scans: Arc::clone(&self.scans) }))
    }
    fn create_topic(&self, topic: &str, partitions: u32) -> Result<()> {
        TopicSource::create_topic(self.inner.as_ref(), topic, partitions)
    }
    fn create_partition(&self, topic: &str, partition: u32) -> Result<()> {
        TopicSource::create_partition(self.inner.as_ref(), topic, partition)
    }
    fn is_read_only(&self) -> bool {
        TopicSource::is_read_only(self.inner.as_ref())
    }
    fn shutdown(&self) -> Result<()> {
        TopicSource::shutdown(self.inner.as_ref())
    }
    fn space(&self) -> Result<SpaceStats> {
        TopicSource::space(self.inner.as_ref())
    }
    fn topic_config(&self, topic: &str) -> Result<Vec<ConfigEntry>> {
        TopicSource::topic_config(self.inner.as_ref(), topic)
    }
    fn alter_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        TopicSource::alter_topic_config(self.inner.as_ref(), topic, changes)
    }
    fn check_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
        TopicSource::check_topic_config(self.inner.as_ref(), topic, changes)
    }
    fn check_value_prefix(&self, name: &str, value: &str) -> Result<()> {
        TopicSource::check_value_prefix(self.inner.as_ref(), name, value)
    }
    fn max_message_bytes(&self, topic: &str) -> Result<Option<usize>> {
        TopicSource::max_message_bytes(self.inner.as_ref(), topic)
    }
    fn state_bounds(&self, topic: &str) -> Result<()> {
        TopicSource::state_bounds(self.inner.as_ref(), topic)
    }
    fn offsets_for(&self, topic: &str, query: OffsetQuery) -> Result<Vec<(u32, Offset)>> {
        TopicSource::offsets_for(self.inner.as_ref(), topic, query)
    }
    fn prefetch(&self, topic: &str, reads: &[(u32, ReadCursor)]) -> Result<()> {
        TopicSource::prefetch(self.inner.as_ref(), topic, reads)
    }
    fn log_dirs(&self) -> LogDirsReport {
        TopicSource::log_dirs(self.inner.as_ref())
    }
}

fn full_read(s: &TopicStream) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let got = s.read_at(out.len() as u64, 4096).unwrap();
        if got.is_empty() {
            return out;
        }
        out.extend_from_slice(&got);
    }
}

#[test]
fn a_partition_read_directly_and_through_a_topic_stream_is_scanned_once() {
    let dir = tempfile::tempdir().unwrap();
    let logs = Arc::new(
        LogDirs::open_dir(
            dir.path(),
            LogConfig::default(),
            Default::default(),
            SegmentMode::Writable,
        )
        .unwrap(),
    );
    logs.create_topic("t", 1).unwrap();
    // Enough batches that one scan takes many reads.
    let value = |i: i64| format!("{i:0>1000}");
    for i in 0..2000 {
        let record = NewRecord {
            timestamp: 1000 + i,
            key: None,
            value: Some(value(i).into()),
            headers: vec![],
        };
        logs.partition("t", 0).unwrap().append(Records::Owned(&[record])).unwrap();
    }
    let expected: Vec<u8> =
        (0..2000).flat_map(|i| format!("{}\n", value(i)).into_bytes()).collect();

    let scans = Arc::new(AtomicUsize::new(0));
    let source: Arc<dyn TopicSource> =
        Arc::new(Counted { inner: Arc::clone(&logs), scans: Arc::clone(&scans) });
    let txns = Arc::new(TxnTrackers::new(Isolation::ReadCommitted));
    let registry = StreamRegistry::with_trackers(Arc::clone(&txns));
    let views = TopicViews::with_trackers(txns);

    // Directly: the partition's tracker scans the log once to its end.
    let part = source.partition("t", 0).unwrap();
    // What one whole scan costs, on a tracker of its own.
    TxnTracker::new().refresh(part.as_ref()).unwrap();
    let one_scan = scans.swap(0, Ordering::SeqCst);
    assert!(one_scan > 8, "a scan of this log takes many reads ({one_scan})");

    let spec = StreamSpec::parse_by_offset("0").unwrap();
    let stream = registry.open(part, &spec, 0).unwrap();
    let mut direct = Vec::new();
    while let got = stream.read_at(direct.len() as u64, 1 << 20).unwrap()
        && !got.is_empty()
    {
        direct.extend_from_slice(&got);
    }
    assert_eq!(direct, expected);
    let direct_scans = scans.swap(0, Ordering::SeqCst);
    assert!(direct_scans >= one_scan, "the direct read scans the partition once");

    // Through the topic: the tracker is the same and already at the log end; each of its
    // refreshes reads once past the end and finds nothing new.
    let topic = views.open_stream(source, "t", &parse_topic_by_time("0").unwrap(), 0).unwrap();
    assert_eq!(full_read(&topic), expected);
    let topic_scans = scans.load(Ordering::SeqCst);
    assert!(
        topic_scans < one_scan,
        "the topic stream scanned the partition again: {topic_scans} scan reads, one scan is \
         {one_scan}"
    );
}
