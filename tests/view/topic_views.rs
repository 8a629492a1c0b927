//! Topic-level views over the real log engine: `offsets/<time>` answers every partition, the
//! merged `by-time/` stream (order, exact sizes, windows, growth rounds, ranges, partitions
//! joining), and keyed/keyless appends routed like Kafka's default partitioner.

use std::sync::Arc;

use topicfs::error::Error;
use topicfs::format::{NewRecord, Offset, decode_batch};
use topicfs::partitioner::partition_for_key;
use topicfs::source::{PartitionSource, TopicSource};
use topicfs::storage::{LogConfig, LogDirs, SegmentMode};
use topicfs::view::Renderer;
use topicfs::view::spec::{Format, TimePoint};
use topicfs::view::topic::{
    TopicStream, TopicViews, offsets_text, parse_offsets_name, parse_topic_by_time,
};
use topicfs::view::txn::Isolation;

fn log_dir(dir: &std::path::Path) -> Arc<LogDirs> {
    let mut config = LogConfig::default();
    config.set("segment.bytes", "4096").unwrap();
    config.set("index.interval.bytes", "512").unwrap();
    config.set("retention.ms", "-1").unwrap();
    Arc::new(LogDirs::open_dir(dir, config, Default::default(), SegmentMode::Writable).unwrap())
}

fn rec(ts: i64, key: Option<&str>, value: &str) -> NewRecord {
    NewRecord {
        timestamp: ts,
        key: key.map(|k| k.as_bytes().to_vec()),
        value: Some(value.as_bytes().to_vec()),
        headers: Vec::new(),
    }
}

fn full_read(s: &TopicStream, chunk: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let got = s.read_at(out.len() as u64, chunk).unwrap();
        if got.is_empty() {
            return out;
        }
        out.extend_from_slice(&got);
    }
}

/// Every rendered record of `part` from offset `start` below `end`: (timestamp, bytes).
fn records_of(
    part: &dyn PartitionSource,
    format: Format,
    start: i64,
    end: i64,
) -> Vec<(i64, Vec<u8>)> {
    let renderer = Renderer::new(format, part.topic(), part.partition());
    let mut cursor = part.seek(part.summary().unwrap().log_start_offset).unwrap();
    let mut out = Vec::new();
    loop {
        let chunk = part
            .read(&cursor, 1 << 20, topicfs::source::ReadMode::Batches)
            .and_then(topicfs::source::ReadAnswer::into_chunk)
            .unwrap();
        if chunk.bytes.is_empty() {
            return out;
        }
        let mut at = 0;
        while at < chunk.bytes.len() {
            let batch = decode_batch(&chunk.bytes[at..]).unwrap();
            let info = batch.info().clone();
            if !info.is_control {
                for r in batch.records() {
                    let r = r.unwrap();
                    if r.offset.0 >= start && r.offset.0 < end {
                        let mut bytes = Vec::new();
                        renderer.render(&info, &r, &mut bytes);
                        out.push((r.timestamp, bytes));
                    }
                }
            }
            at += info.size as usize;
        }
        cursor = chunk.next.unwrap();
    }
}

/// The merge the stream promises for one round, computed the slow obvious way: repeatedly take
/// the partition whose next record has the smallest (timestamp, partition).
fn model_merge(mut queues: Vec<Vec<(i64, Vec<u8>)>>) -> Vec<u8> {
    queues.iter_mut().for_each(|q| q.reverse());
    let mut out = Vec::new();
    loop {
        let best = (0..queues.len())
            .filter(|&p| !queues[p].is_empty())
            .min_by_key(|&p| (queues[p].last().unwrap().0, p));
        let Some(p) = best else { return out };
        out.extend_from_slice(&queues[p].pop().unwrap().1);
    }
}

/// The Kafka 0.9 trap: partition 0 holds only old records, partition 1 only records newer than
/// the time asked, partition 2 nothing at all.
fn trap_topic(logs: &LogDirs) {
    logs.create_topic("orders", 3).unwrap();
    let p0 = logs.partition("orders", 0).unwrap();
    for i in 0..100 {
        p0.append(topicfs::source::Records::Owned(&[rec(1_000 + i, None, &format!("old {i}"))]))
            .unwrap();
    }
    let p1 = logs.partition("orders", 1).unwrap();
    for i in 0..10 {
        p1.append(topicfs::source::Records::Owned(&[rec(5_000 + i, None, &format!("new {i}"))]))
            .unwrap();
    }
}

#[test]
fn offsets_answer_every_partition_even_when_one_is_newer_and_one_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let logs = log_dir(dir.path());
    trap_topic(&logs);
    let at = |name: &str| {
        offsets_text(logs.as_ref(), "orders", parse_offsets_name(name).unwrap(), 0).unwrap()
    };
    assert_eq!(at("3000"), "orders:0:100\norders:1:0\norders:2:0\n");
    assert_eq!(at("1050"), "orders:0:50\norders:1:0\norders:2:0\n");
    assert_eq!(at("9999"), "orders:0:100\norders:1:10\norders:2:0\n");
    assert_eq!(at("-1"), "orders:0:100\norders:1:10\norders:2:0\n");
    assert_eq!(at("-2"), "orders:0:0\norders:1:0\norders:2:0\n");
    assert_eq!(at("1970-01-01T00:00:05Z"), "orders:0:100\norders:1:0\norders:2:0\n");
}

#[test]
fn offsets_names_are_one_time_without_range_or_suffix() {
    assert_eq!(parse_offsets_name("-15m").unwrap(), TimePoint::Ago(15 * 60 * 1000));
    assert_eq!(parse_offsets_name("-1").unwrap(), TimePoint::Latest);
    for bad in ["1000..2000", "1000..", "1000.json", "1000.raw", "soon", ""] {
        assert!(parse_offsets_name(bad).is_err(), "{bad}");
    }
    assert!(parse_topic_by_time("1000.raw").is_err());
    assert!(parse_topic_by_time("1000..2000.json").is_ok());
}

#[test]
fn merged_stream_skips_partitions_with_nothing_that_new() {
    let dir = tempfile::tempdir().unwrap();
    let logs = log_dir(dir.path());
    trap_topic(&logs);
    let source: Arc<dyn TopicSource> = logs.clone();
    let views = TopicViews::new();
    let s = views.open_stream(source, "orders", &parse_topic_by_time("3000").unwrap(), 0).unwrap();
    let text = String::from_utf8(full_read(&s, 7)).unwrap();
    let expected: String = (0..10).map(|i| format!("new {i}\n")).collect();
    assert_eq!(text, expected);
    assert_eq!(s.size().unwrap(), expected.len() as u64);
    assert_eq!(s.starts(), vec![(0, Offset(100)), (1, Offset(0)), (2, Offset(0))]);
}

/// Three partitions whose timestamps interleave, tie and (in partition 2) go backwards, over
/// many segments and more than one checkpoint interval of rendered bytes.
fn interleaved_topic(logs: &LogDirs) {
    logs.create_topic("events", 3).unwrap();
    for p in 0..3u32 {
        let part = logs.partition("events", p).unwrap();
        for i in 0..2500i64 {
            let ts = match p {
                0 => 10_000 + 3 * i,
                1 => 10_000 + 5 * (i / 2),
                _ => 10_000 + 7 * i - if i % 10 == 0 { 500 } else { 0 },
            };
            let batch: Vec<NewRecord> = (0..(i % 3 + 1))
                .map(|j| rec(ts, Some(&format!("k{i}")), &format!("p{p} r{i}.{j} \"payload\"")))
                .collect();
            part.append(topicfs::source::Records::Owned(&batch)).unwrap();
        }
    }
}

#[test]
fn merged_stream_is_the_timestamp_merge_with_exact_size_and_stable_windows() {
    let dir = tempfile::tempdir().unwrap();
    let logs = log_dir(dir.path());
    interleaved_topic(&logs);
    let source: Arc<dyn TopicSource> = logs.clone();
    let views = TopicViews::new();
    for (name, format) in
        [("12000", Format::Values), ("12000.json", Format::Json), ("-2", Format::Values)]
    {
        let spec = parse_topic_by_time(name).unwrap();
        let s = views.open_stream(Arc::clone(&source), "events", &spec, 0).unwrap();
        let queues: Vec<_> = s
            .starts()
            .iter()
            .map(|(p, start)| {
                let part = logs.partition("events", *p).unwrap();
                records_of(part.as_ref(), format, start.0, i64::MAX)
            })
            .collect();
        let expected = model_merge(queues);
        assert!(
            expected.len() as u64 > 3 * topicfs::view::topic::MERGE_CHECKPOINT_INTERVAL,
            "{name}"
        );
        assert_eq!(s.size().unwrap(), expected.len() as u64, "{name}");
        assert_eq!(full_read(&s, 4096), expected, "{name}");
        // Windows anywhere, in any order, on a fresh stream and on the read one.
        let fresh = views.open_stream(Arc::clone(&source), "events", &spec, 0).unwrap();
        let len = expected.len() as u64;
        for (i, at) in
            [len - 1, 0, len / 2, 65_535, 65_536, 200_001, len / 3, len - 100].iter().enumerate()
        {
            let n = 1 + (i * 977) % 9000;
            for stream in [&s, &fresh] {
                let got = stream.read_at(*at, n).unwrap();
                let end = (*at as usize + n).min(expected.len());
                assert_eq!(got, &expected[*at as usize..end], "{name} at {at} len {n}");
            }
        }
        assert!(s.read_at(len, 10).unwrap().is_empty());
        assert!(s.read_at(len + 10, 10).unwrap().is_empty());
    }
}

#[test]
fn json_lines_carry_their_partition() {
    let dir = tempfile::tempdir().unwrap();
    let logs = log_dir(dir.path());
    trap_topic(&logs);
    let source: Arc<dyn TopicSource> = logs.clone();
    let s = TopicViews::new()
        .open_stream(source, "orders", &parse_topic_by_time("1095.json").unwrap(), 0)
        .unwrap();
    let text = String::from_utf8(full_read(&s, 1000)).unwrap();
    let partitions: Vec<u64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["partition"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(partitions, [vec![0; 5], vec![1; 10]].concat());
}

#[test]
fn late_records_follow_the_bytes_already_served() {
    let dir = tempfile::tempdir().unwrap();
    let logs = log_dir(dir.path());
    logs.create_topic("t", 2).unwrap();
    let p0 = logs.partition("t", 0).unwrap();
    let p1 = logs.partition("t", 1).unwrap();
    p0.append(topicfs::source::Records::Owned(&[rec(100, None, "a100"), rec(300, None, "a300")]))
        .unwrap();
    p1.append(topicfs::source::Records::Owned(&[rec(200, None, "b200")])).unwrap();
    let source: Arc<dyn TopicSource> = logs.clone();
    let views = TopicViews::new();
    let s = views.open_stream(source.clone(), "t", &parse_topic_by_time("0").unwrap(), 0).unwrap();
    let first = full_read(&s, 3);
    assert_eq!(first, b"a100\nb200\na300\n");
    // Older than what was served, in both partitions: shown after it, merged among themselves.
    p1.append(topicfs::source::Records::Owned(&[rec(150, None, "b150")])).unwrap();
    p0.append(topicfs::source::Records::Owned(&[rec(120, None, "a120")])).unwrap();
    // A follower reading on from where it stopped (as `tail -f` does) gets just the new round.
    assert_eq!(s.read_at(first.len() as u64, 100).unwrap(), b"a120\nb150\n");
    assert_eq!(s.size().unwrap(), first.len() as u64 + 10);
    assert_eq!(full_read(&s, 5), b"a100\nb200\na300\na120\nb150\n");
    // Opened again while the first is alive, the name means the same bytes (the streams share
    // their rounds); once no stream holds them, a new open is one round: the plain merge.
    let same =
        views.open_stream(source.clone(), "t", &parse_topic_by_time("0").unwrap(), 0).unwrap();
    assert_eq!(full_read(&same, 64), b"a100\nb200\na300\na120\nb150\n");
    drop((s, same));
    let again = views.open_stream(source, "t", &parse_topic_by_time("0").unwrap(), 0).unwrap();
    assert_eq!(full_read(&again, 64), b"a100\nb200\nb150\na300\na120\n");
}

#[test]
fn range_is_complete_once_every_partition_reaches_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let logs = log_dir(dir.path());
    logs.create_topic("t", 2).unwrap();
    let p0 = logs.partition("t", 0).unwrap();
    let p1 = logs.partition("t", 1).unwrap();
    p0.append(topicfs::source::Records::Owned(&[rec(100, None, "a100"), rec(250, None, "a250")]))
        .unwrap();
    p1.append(topicfs::source::Records::Owned(&[rec(150, None, "b150")])).unwrap();
    let source: Arc<dyn TopicSource> = logs.clone();
    let s = TopicViews::new()
        .open_stream(source, "t", &parse_topic_by_time("120..200").unwrap(), 0)
        .unwrap();
    assert_eq!(full_read(&s, 100), b"b150\n");
    assert!(!s.is_complete(), "partition 1 has no record at 200 yet");
    p1.append(topicfs::source::Records::Owned(&[
        rec(180, None, "b180"),
        rec(220, None, "b220"),
        rec(190, None, "b190"),
    ]))
    .unwrap();
    assert_eq!(full_read(&s, 100), b"b150\nb180\n");
    assert!(s.is_complete());
    p1.append(topicfs::source::Records::Owned(&[rec(160, None, "late")])).unwrap();
    assert_eq!(s.size().unwrap(), 10);
}

#[test]
fn partitions_added_while_growing_join_the_stream() {
    let dir = tempfile::tempdir().unwrap();
    let logs = log_dir(dir.path());
    logs.create_topic("t", 1).unwrap();
    logs.partition("t", 0)
        .unwrap()
        .append(topicfs::source::Records::Owned(&[rec(100, None, "a")]))
        .unwrap();
    let source: Arc<dyn TopicSource> = logs.clone();
    let s =
        TopicViews::new().open_stream(source, "t", &parse_topic_by_time("50").unwrap(), 0).unwrap();
    assert_eq!(full_read(&s, 10), b"a\n");
    logs.create_partition("t", 1).unwrap();
    logs.partition("t", 1)
        .unwrap()
        .append(topicfs::source::Records::Owned(&[rec(90, None, "b")]))
        .unwrap();
    logs.partition("t", 0)
        .unwrap()
        .append(topicfs::source::Records::Owned(&[rec(95, None, "c")]))
        .unwrap();
    assert_eq!(full_read(&s, 10), b"a\nb\nc\n");
    assert_eq!(s.starts().len(), 2);
}

#[test]
fn raw_topic_streams_do_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let logs = log_dir(dir.path());
    trap_topic(&logs);
    let source: Arc<dyn TopicSource> = logs.clone();
    let spec = topicfs::view::spec::StreamSpec::parse_by_time("0.raw").unwrap();
    let err = TopicViews::new().open_stream(source, "orders", &spec, 0).unwrap_err();
    assert!(matches!(err, Error::Unsupported(_)), "{err:?}");
}

#[test]
fn keyed_appends_land_in_the_default_partitioners_partition_one_batch_each() {
    let dir = tempfile::tempdir().unwrap();
    let logs = log_dir(dir.path());
    logs.create_topic("t", 6).unwrap();
    let source: Arc<dyn TopicSource> = logs.clone();
    let views = TopicViews::new();
    let appender = views.appender(Arc::clone(&source), "t");
    let keys: Vec<String> = (0..40).map(|i| format!("user-{i}")).collect();
    let records: Vec<NewRecord> =
        keys.iter().map(|k| rec(-1, Some(k), &format!("v-{k}"))).collect();
    let written = appender.append(records).unwrap();
    let mut expected_counts = [0i64; 6];
    for k in &keys {
        expected_counts[partition_for_key(k.as_bytes(), 6).unwrap() as usize] += 1;
    }
    for (p, info) in &written {
        assert_eq!(info.batches, 1, "one batch per partition per write");
        assert_eq!(info.last_offset.0 - info.first_offset.0 + 1, expected_counts[*p as usize]);
    }
    assert_eq!(written.len(), expected_counts.iter().filter(|c| **c > 0).count());
    // Every record is in the partition its key hashes to, in written order.
    for p in 0..6u32 {
        let part = logs.partition("t", p).unwrap();
        let got = records_of(part.as_ref(), Format::Values, 0, i64::MAX);
        let want: Vec<Vec<u8>> = keys
            .iter()
            .filter(|k| partition_for_key(k.as_bytes(), 6) == Some(p))
            .map(|k| format!("v-{k}\n").into_bytes())
            .collect();
        assert_eq!(got.into_iter().map(|(_, b)| b).collect::<Vec<_>>(), want, "partition {p}");
    }
}

#[test]
fn keyless_writes_rotate_one_batch_per_write_across_handles() {
    let dir = tempfile::tempdir().unwrap();
    let logs = log_dir(dir.path());
    logs.create_topic("t", 3).unwrap();
    let source: Arc<dyn TopicSource> = logs.clone();
    let views = TopicViews::new();
    for w in 0..7 {
        // A fresh appender per write, as `echo >> append` opens a new handle each time.
        let appender = views.appender(Arc::clone(&source), "t");
        let records = vec![rec(-1, None, &format!("w{w}a")), rec(-1, None, &format!("w{w}b"))];
        let written = appender.append(records).unwrap();
        assert_eq!(written.len(), 1);
        assert_eq!(written[0].0, w % 3);
        assert_eq!(written[0].1.batches, 1);
    }
    let ends: Vec<i64> = (0..3)
        .map(|p| logs.partition("t", p).unwrap().summary().unwrap().log_end_offset.0)
        .collect();
    assert_eq!(ends, [6, 4, 4]);
}

// ---- transactions ------------------------------------------------------------------------------

/// A stored batch at `base`, one record per value, all at `ts`: transactional for producer
/// `pid` when given, else a plain non-idempotent batch.
fn stored(base: i64, pid: Option<i64>, ts: i64, values: &[&str]) -> Vec<u8> {
    use topicfs::format::{BatchSpec, encode_batch};
    let spec = BatchSpec {
        base_offset: Offset(base),
        producer_id: pid.unwrap_or(-1),
        producer_epoch: if pid.is_some() { 0 } else { -1 },
        base_sequence: if pid.is_some() { 0 } else { -1 },
        is_transactional: pid.is_some(),
        ..BatchSpec::default()
    };
    let records: Vec<NewRecord> = values.iter().map(|v| rec(ts, None, v)).collect();
    encode_batch(&spec, &records).unwrap()
}

/// The COMMIT (or ABORT) marker of producer `pid` at `offset`.
fn marker(offset: i64, pid: i64, commit: bool) -> Vec<u8> {
    use topicfs::format::control::encode_end_txn_marker_batch;
    encode_end_txn_marker_batch(Offset(offset), 0, pid, 0, commit, 0, 999).unwrap()
}

/// Writes `topic-partition/00000000000000000000.log` as a broker would have: `batches` in order.
fn write_partition(dir: &std::path::Path, topic: &str, partition: u32, batches: &[Vec<u8>]) {
    let part = dir.join(format!("{topic}-{partition}"));
    std::fs::create_dir_all(&part).unwrap();
    std::fs::write(part.join("00000000000000000000.log"), batches.concat()).unwrap();
}

/// Topic `t` written by a broker: partition 0 holds a committed transaction (producer 7) and an
/// aborted one (producer 8) between plain records; partition 1 holds a plain record, then an
/// open transaction of producer 9 (its last stable offset is 1) and a plain record after it.
fn transactional_topic(dir: &std::path::Path) -> Arc<LogDirs> {
    write_partition(
        dir,
        "t",
        0,
        &[
            stored(0, None, 100, &["p0-a"]),
            stored(1, Some(7), 110, &["c1", "c2"]),
            stored(3, Some(8), 115, &["x1"]),
            marker(4, 7, true),
            marker(5, 8, false),
            stored(6, None, 300, &["p0-b"]),
        ],
    );
    write_partition(
        dir,
        "t",
        1,
        &[
            stored(0, None, 105, &["p1-a"]),
            stored(1, Some(9), 150, &["open"]),
            stored(2, None, 160, &["p1-late"]),
        ],
    );
    Arc::new(
        LogDirs::open_dir(dir, LogConfig::default(), Default::default(), SegmentMode::ReadOnly)
            .unwrap(),
    )
}

#[test]
fn read_committed_topic_stream_hides_aborted_records_and_stops_at_each_last_stable_offset() {
    let dir = tempfile::tempdir().unwrap();
    let logs = transactional_topic(dir.path());
    let source: Arc<dyn TopicSource> = logs.clone();
    let views = TopicViews::new();
    assert_eq!(views.isolation(), Isolation::ReadCommitted);
    let s = views.open_stream(source.clone(), "t", &parse_topic_by_time("0").unwrap(), 0).unwrap();
    // Partition 0 without x1 (aborted); partition 1 only below its last stable offset (1).
    let committed = b"p0-a\np1-a\nc1\nc2\np0-b\n";
    assert_eq!(s.size().unwrap(), committed.len() as u64);
    assert_eq!(full_read(&s, 3), committed);
    let json = views.open_stream(source, "t", &parse_topic_by_time("0.json").unwrap(), 0).unwrap();
    let payloads: Vec<String> = String::from_utf8(full_read(&json, 64))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["payload"].to_string())
        .collect();
    assert_eq!(payloads, [r#""p0-a""#, r#""p1-a""#, r#""c1""#, r#""c2""#, r#""p0-b""#]);
}

#[test]
fn records_held_back_by_an_open_transaction_join_the_next_round_after_its_marker() {
    let dir = tempfile::tempdir().unwrap();
    let logs = transactional_topic(dir.path());
    let source: Arc<dyn TopicSource> = logs.clone();
    let s =
        TopicViews::new().open_stream(source, "t", &parse_topic_by_time("0").unwrap(), 0).unwrap();
    let first = full_read(&s, 4);
    assert_eq!(first, b"p0-a\np1-a\nc1\nc2\np0-b\n");
    // Producer 9 aborts; a plain record follows. Its "open" record was buffered past the
    // stable offset before: it must not appear now that its transaction is aborted.
    let active = dir.path().join("t-1/00000000000000000000.log");
    let mut file = std::fs::OpenOptions::new().append(true).open(active).unwrap();
    std::io::Write::write_all(
        &mut file,
        &[marker(3, 9, false), stored(4, None, 170, &["p1-c"])].concat(),
    )
    .unwrap();
    assert!(logs.log("t", 1).unwrap().refresh().unwrap());
    // A follower reading on from where it stopped gets the held-back records as a new round.
    let round = b"p1-late\np1-c\n";
    assert_eq!(s.read_at(first.len() as u64, 100).unwrap(), round);
    assert_eq!(s.size().unwrap(), (first.len() + round.len()) as u64);
    assert_eq!(full_read(&s, 5), [&first[..], round].concat());
}

#[test]
fn read_uncommitted_topic_stream_shows_every_record_up_to_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    let logs = transactional_topic(dir.path());
    let source: Arc<dyn TopicSource> = logs.clone();
    let views = TopicViews::with_isolation(Isolation::ReadUncommitted);
    let s = views.open_stream(source, "t", &parse_topic_by_time("0").unwrap(), 0).unwrap();
    let all = b"p0-a\np1-a\nc1\nc2\nx1\nopen\np1-late\np0-b\n";
    assert_eq!(s.size().unwrap(), all.len() as u64);
    assert_eq!(full_read(&s, 7), all);
}

/// A source that records every [`TopicSource::prefetch`] it is asked and fails it (a hint
/// that failed must change nothing), delegating everything else.
struct RecordingPrefetch {
    inner: Arc<LogDirs>,
    asked: std::sync::Mutex<Vec<Vec<(u32, topicfs::source::ReadCursor)>>>,
}

impl TopicSource for RecordingPrefetch {
    fn topics(&self) -> topicfs::error::Result<Vec<String>> {
        self.inner.topics()
    }
    fn partitions(&self, topic: &str) -> topicfs::error::Result<Vec<u32>> {
        TopicSource::partitions(self.inner.as_ref(), topic)
    }
    fn partition(&self, topic: &str, p: u32) -> topicfs::error::Result<Arc<dyn PartitionSource>> {
        TopicSource::partition(self.inner.as_ref(), topic, p)
    }
    fn create_topic(&self, topic: &str, partitions: u32) -> topicfs::error::Result<()> {
        TopicSource::create_topic(self.inner.as_ref(), topic, partitions)
    }
    fn create_partition(&self, topic: &str, partition: u32) -> topicfs::error::Result<()> {
        TopicSource::create_partition(self.inner.as_ref(), topic, partition)
    }
    fn is_read_only(&self) -> bool {
        TopicSource::is_read_only(self.inner.as_ref())
    }
    fn shutdown(&self) -> topicfs::error::Result<()> {
        TopicSource::shutdown(self.inner.as_ref())
    }
    fn space(&self) -> topicfs::error::Result<topicfs::source::SpaceStats> {
        TopicSource::space(self.inner.as_ref())
    }
    fn topic_config(
        &self,
        topic: &str,
    ) -> topicfs::error::Result<Vec<topicfs::source::ConfigEntry>> {
        TopicSource::topic_config(self.inner.as_ref(), topic)
    }
    fn alter_topic_config(
        &self,
        topic: &str,
        changes: &[topicfs::source::ConfigChange],
    ) -> topicfs::error::Result<()> {
        TopicSource::alter_topic_config(self.inner.as_ref(), topic, changes)
    }
    fn check_topic_config(
        &self,
        topic: &str,
        changes: &[topicfs::source::ConfigChange],
    ) -> topicfs::error::Result<()> {
        TopicSource::check_topic_config(self.inner.as_ref(), topic, changes)
    }
    fn check_value_prefix(&self, name: &str, value: &str) -> topicfs::error::Result<()> {
        TopicSource::check_value_prefix(self.inner.as_ref(), name, value)
    }
    fn max_message_bytes(&self, topic: &str) -> topicfs::error::Result<Option<usize>> {
        TopicSource::max_message_bytes(self.inner.as_ref(), topic)
    }
    fn state_bounds(&self, topic: &str) -> topicfs::error::Result<()> {
        TopicSource::state_bounds(self.inner.as_ref(), topic)
    }
    fn offsets_for(
        &self,
        topic: &str,
        query: topicfs::source::OffsetQuery,
    ) -> topicfs::error::Result<Vec<(u32, Offset)>> {
        TopicSource::offsets_for(self.inner.as_ref(), topic, query)
    }
    fn prefetch(
        &self,
        _topic: &str,
        reads: &[(u32, topicfs::source::ReadCursor)],
    ) -> topicfs::error::Result<()> {
        self.asked.lock().unwrap().push(reads.to_vec());
        Err(Error::InvalidInput("this source's prefetch always fails".into()))
    }
    fn log_dirs(&self) -> topicfs::source::LogDirsReport {
        TopicSource::log_dirs(self.inner.as_ref())
    }
}

/// The merged stream asks the source for its members' first chunks in batches of at most 128
/// partitions, each member once per walk, from where it reads; a prefetch that fails changes
/// no byte of the stream.
#[test]
fn merged_stream_asks_members_first_chunks_at_once_and_a_failed_prefetch_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let logs = log_dir(dir.path());
    logs.create_topic("wide", 300).unwrap();
    for p in 0..300u32 {
        let part = logs.partition("wide", p).unwrap();
        let batch = [rec(1000 + i64::from(p % 7), None, &format!("p{p}"))];
        part.append(topicfs::source::Records::Owned(&batch)).unwrap();
    }
    let plain: Arc<dyn TopicSource> = logs.clone();
    let recording =
        Arc::new(RecordingPrefetch { inner: Arc::clone(&logs), asked: Default::default() });
    let views = TopicViews::new();
    let spec = parse_topic_by_time("-2").unwrap();
    let expected = full_read(&views.open_stream(plain, "wide", &spec, 0).unwrap(), 4096);
    assert_eq!(expected.iter().filter(|&&b| b == b'\n').count(), 300);
    let watched: Arc<dyn TopicSource> = recording.clone();
    let s = views.open_stream(watched, "wide", &spec, 0).unwrap();
    assert_eq!(s.size().unwrap(), expected.len() as u64);
    let asked = std::mem::take(&mut *recording.asked.lock().unwrap());
    // Sizing the stream walked every member once: 128 + 128 + 44.
    assert_eq!(asked.iter().map(Vec::len).collect::<Vec<_>>(), vec![128, 128, 44]);
    let mut partitions: Vec<u32> = asked.iter().flatten().map(|(p, _)| *p).collect();
    partitions.dedup();
    assert_eq!(partitions, (0..300).collect::<Vec<_>>());
    for (p, cursor) in asked.iter().flatten() {
        let start = logs.partition("wide", *p).unwrap().summary().unwrap().log_start_offset;
        assert_eq!(cursor.next_offset, start, "partition {p}");
    }
    assert_eq!(full_read(&s, 4096), expected);
}
