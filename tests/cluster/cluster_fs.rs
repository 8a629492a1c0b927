//! The filesystem logic (`TopicFs`, no kernel) over the cluster backend (`ClusterSource`)
//! against a real broker: tansu 0.6.0 with its SQLite engine, one per test
//! (`common::tansu::Tansu`, killed even when a test fails).

use crate::common;

use std::ffi::OsStr;
use std::sync::Arc;

use common::fs_fixture::{self, FsFixture};
use common::tansu::Tansu;
use kafka_protocol::messages::ApiKey;
use topicfs::Error;
use topicfs::cluster::config::parse_bootstrap;
use topicfs::cluster::{Client, ClientConfig, ClusterSource};
use topicfs::format::{NewRecord, Offset};
use topicfs::fs::TopicFs;
use topicfs::fs::attr::OpenRequest;
use topicfs::fs::inode::ROOT_INO;
use topicfs::source::{OffsetQuery, TopicSource};

const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: false };
const T0: i64 = 1_767_225_600_000;

struct Fixture {
    fs: TopicFs,
    source: Arc<ClusterSource>,
    _broker: Tansu,
}

fn fixture_with(read_only: bool, show_internal: bool) -> Fixture {
    fixture_reading(read_only, show_internal, false)
}

/// `committed`: the source reads as a `read_committed` consumer itself (as a mount's does);
/// otherwise the views track transactions over what it reads.
fn fixture_reading(read_only: bool, show_internal: bool, committed: bool) -> Fixture {
    let broker = Tansu::start();
    let mut config = ClientConfig::default();
    config.set_pair("request.timeout.ms=10000").unwrap();
    let client = Client::connect(parse_bootstrap(&broker.bootstrap()).unwrap(), config).unwrap();
    // Prefetches run on an executor, as a mount's do.
    let source = Arc::new(
        ClusterSource::new(Arc::new(client), read_only)
            .with_committed_reads(committed)
            .with_executor(topicfs::executor::Executor::new(2)),
    );
    let fs = FsFixture::over(Arc::clone(&source) as Arc<dyn TopicSource>)
        .read_only(read_only)
        .build()
        .with_internal_topics(show_internal);
    Fixture { fs, source, _broker: broker }
}

fn fixture() -> Fixture {
    fixture_with(false, false)
}

impl Fixture {
    fn ino(&self, path: &str) -> Result<u64, Error> {
        fs_fixture::ino(&self.fs, path)
    }

    fn read_all(&self, path: &str) -> Vec<u8> {
        fs_fixture::read_path(&self.fs, path, 4096)
    }

    fn text(&self, path: &str) -> String {
        String::from_utf8(self.read_all(path)).unwrap()
    }

    fn append(&self, path: &str, data: &[u8]) -> Result<(), Error> {
        let fh = self.fs.open(self.ino(path)?, WRITE)?.fh;
        let written = self.fs.write(fh, data, None);
        let flushed = self.fs.flush(fh, None);
        self.fs.release(fh)?;
        written?;
        flushed
    }

    fn names(&self, path: &str) -> Vec<String> {
        fs_fixture::names(&self.fs, path)
    }

    /// Produces records with timestamps T0, T0+1000, ... straight through the client.
    fn produce_timed(&self, topic: &str, values: &[&str]) {
        let records: Vec<NewRecord> = values
            .iter()
            .enumerate()
            .map(|(i, v)| NewRecord {
                timestamp: T0 + 1000 * i as i64,
                key: None,
                value: Some(v.as_bytes().to_vec()),
                headers: Vec::new(),
            })
            .collect();
        self.source.client().produce(topic, 0, &records).unwrap();
    }
}

#[test]
fn cluster_fs_lists_topics_and_partitions_without_segment_files() {
    let f = fixture();
    f.fs.mkdir(ROOT_INO, OsStr::new("t")).unwrap();
    let root = f.names("");
    assert!(root.contains(&"t".to_string()), "{root:?}");
    let topic = f.names("t");
    assert!(topic.contains(&"0".to_string()), "{topic:?}");
    let part = f.names("t/0");
    for name in ["by-offset", "by-time", "append", "info"] {
        assert!(part.contains(&name.to_string()), "{name} missing in {part:?}");
    }
    assert!(!part.contains(&"segments".to_string()), "{part:?}");
    assert!(matches!(f.ino("t/0/segments"), Err(Error::NotFound(_))));
    assert_eq!(f.ino("nope").unwrap_err().errno(), libc::ENOENT);
    assert_eq!(f.ino("t/7").unwrap_err().errno(), libc::ENOENT);
}

#[test]
fn cluster_fs_appends_and_reads_back_in_every_format() {
    let f = fixture();
    f.fs.mkdir(ROOT_INO, OsStr::new("t")).unwrap();
    f.append("t/0/append", b"a\nb\n").unwrap();
    f.append("t/0/append", b"c\n").unwrap();
    assert_eq!(f.text("t/0/by-offset/0"), "a\nb\nc\n");
    assert_eq!(f.text("t/0/by-offset/1"), "b\nc\n");
    assert_eq!(f.text("t/0/by-offset/-1"), "c\n");
    assert_eq!(f.text("t/0/by-offset/0..2"), "a\nb\n");
    let json = f.text("t/0/by-offset/0.json");
    let lines: Vec<serde_json::Value> =
        json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3, "{json}");
    assert_eq!(lines[2]["offset"], 2);
    assert_eq!(lines[2]["payload"], "c");
    let raw = f.read_all("t/0/by-offset/0.raw");
    let mut pos = 0;
    let mut values = Vec::new();
    while let Ok(Some(h)) = topicfs::format::peek_entry(&raw[pos..]) {
        let batch = topicfs::format::decode_batch(&raw[pos..pos + h.total_size()]).unwrap();
        for r in batch.records() {
            values.push(r.unwrap().value.unwrap().to_vec());
        }
        pos += h.total_size();
    }
    assert_eq!(pos, raw.len());
    assert_eq!(values, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    // Past the end: the offset does not exist (as locally).
    assert!(f.ino("t/0/by-offset/4").is_err());
}

#[test]
fn cluster_fs_streams_by_time_through_list_offsets() {
    let f = fixture();
    f.fs.mkdir(ROOT_INO, OsStr::new("t")).unwrap();
    f.produce_timed("t", &["x", "y", "z"]);
    let part = f.source.partition("t", 0).unwrap();
    assert_eq!(part.offset_for(OffsetQuery::Timestamp(T0 + 1000)).unwrap(), Offset(1));
    assert_eq!(part.offset_for(OffsetQuery::Earliest).unwrap(), Offset(0));
    assert_eq!(part.offset_for(OffsetQuery::Latest).unwrap(), Offset(3));
    assert_eq!(f.text(&format!("t/0/by-time/{}", T0 + 1000)), "y\nz\n");
    assert_eq!(f.text(&format!("t/0/by-time/{}", T0 + 500)), "y\nz\n");
    let json = f.text(&format!("t/0/by-time/{}.json", T0 + 2000));
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["offset"], 2);
    assert_eq!(v["ts"], T0 + 2000);
}

#[test]
fn cluster_fs_seek_and_read_honour_the_contract() {
    let f = fixture();
    f.fs.mkdir(ROOT_INO, OsStr::new("t")).unwrap();
    for i in 0..5 {
        f.append("t/0/append", format!("{i}\n").as_bytes()).unwrap();
    }
    let part = f.source.partition("t", 0).unwrap();
    let s = part.summary().unwrap();
    assert_eq!((s.log_start_offset, s.log_end_offset), (Offset(0), Offset(5)));
    assert_eq!(s.segment_count, None);
    assert!(part.segment_files().is_none());
    assert!(matches!(part.seek(Offset(6)), Err(Error::OffsetOutOfRange { .. })));
    // One whole batch holding offset 2, even with 1 byte asked (tansu rebuilds batches on
    // Fetch, so their boundaries are its own: doc/cluster-brokers.md).
    let c = part.seek(Offset(2)).unwrap();
    let chunk = part
        .read(&c, 1, topicfs::source::ReadMode::Batches)
        .and_then(topicfs::source::ReadAnswer::into_chunk)
        .unwrap();
    let h = topicfs::format::peek_entry(&chunk.bytes).unwrap().unwrap();
    assert_eq!(h.total_size(), chunk.bytes.len());
    let info = topicfs::format::parse_batch_info(&chunk.bytes).unwrap();
    assert!(info.base_offset <= Offset(2) && info.last_offset >= Offset(2), "{info:?}");
    assert_eq!(chunk.next.unwrap().next_offset, info.last_offset.plus(1));
    // At the end: empty.
    let end = part.seek(Offset(5)).unwrap();
    let chunk = part
        .read(&end, 1 << 20, topicfs::source::ReadMode::Batches)
        .and_then(topicfs::source::ReadAnswer::into_chunk)
        .unwrap();
    assert!(chunk.bytes.is_empty() && chunk.next.is_none());
}

#[test]
fn cluster_fs_mkdir_creates_a_topic_and_refuses_bad_names() {
    let f = fixture();
    f.fs.mkdir(ROOT_INO, OsStr::new("fresh")).unwrap();
    assert_eq!(f.source.partitions("fresh").unwrap(), vec![0]);
    let err = f.fs.mkdir(ROOT_INO, OsStr::new("bad name")).unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL, "{err}");
    // tansu 0.6 has no CreatePartitions (doc/cluster-brokers.md): refused, never faked.
    let err = f.source.create_partition("fresh", 1).unwrap_err();
    assert_eq!(err.errno(), libc::EOPNOTSUPP, "{err}");
    assert_eq!(f.source.partitions("fresh").unwrap(), vec![0]);
}

#[test]
fn cluster_fs_read_only_refuses_appends_and_mkdir() {
    let f = fixture_with(true, false);
    f.source.client().create_topic("t", 1, &[]).unwrap();
    assert!(f.fs.mkdir(ROOT_INO, OsStr::new("u")).is_err());
    assert!(f.append("t/0/append", b"x\n").is_err());
    assert_eq!(f.text("t/0/by-offset/0"), "");
}

#[test]
fn cluster_fs_every_operation_sees_what_another_client_produced_before_it_asking_the_bounds_once() {
    let f = fixture();
    f.fs.mkdir(ROOT_INO, OsStr::new("lin")).unwrap();
    let bootstrap = parse_bootstrap(&f._broker.bootstrap()).unwrap();
    let other = Client::connect(bootstrap, ClientConfig::default()).unwrap();
    let produce = |v: &str| {
        let record = NewRecord { value: Some(v.as_bytes().to_vec()), ..NewRecord::default() };
        other.produce("lin", 0, &[record]).unwrap();
    };
    let list_offsets = || f.source.client().request_counts().get(ApiKey::ListOffsets);
    produce("a");
    let ino = f.ino("lin/0/by-offset/0").unwrap();
    let mut want = String::from("a\n");
    assert_eq!(f.fs.getattr(ino, None).unwrap().attr.size, want.len() as u64);
    for v in ["b", "c", "d"] {
        produce(v);
        want.push_str(&format!("{v}\n"));
        // The next operation sees the record at once: no window in which bounds learned by an
        // earlier operation hide it.
        let before = list_offsets();
        assert_eq!(f.fs.getattr(ino, None).unwrap().attr.size, want.len() as u64, "after {v}");
        // One operation asks the bounds once (ListOffsets earliest and latest), however many
        // questions of it need them.
        assert_eq!(list_offsets() - before, 2, "after {v}");
        assert_eq!(f.text("lin/0/by-offset/-1"), format!("{v}\n"));
        assert_eq!(f.text("lin/0/by-offset/0"), want);
    }
}

/// Topic-level files of a wide topic ask every partition's bounds in one ListOffsets pair per
/// broker (`TopicSource::state_bounds`), and `offsets/<time>` the time in one more
/// (`TopicSource::offsets_for`), not a request per partition.
#[test]
fn cluster_fs_topic_level_files_ask_the_bounds_of_all_partitions_at_once() {
    let f = fixture();
    f.source.create_topic("wide", 300).unwrap();
    let bootstrap = parse_bootstrap(&f._broker.bootstrap()).unwrap();
    let other = Client::connect(bootstrap, ClientConfig::default()).unwrap();
    for p in [0, 7, 299] {
        let record = NewRecord { value: Some(b"x".to_vec()), ..NewRecord::default() };
        other.produce("wide", p, &[record.clone(), record]).unwrap();
    }
    let list_offsets = || f.source.client().request_counts().get(ApiKey::ListOffsets);
    for (file, ends) in [
        ("wide/offsets/-1", true),
        ("wide/offsets/-2", false),
        ("wide/info", true),
        // A time: the first record at or after it, the log end when none is that new.
        ("wide/offsets/0", false),
        ("wide/offsets/2099-01-01T00:00:00Z", true),
    ] {
        let before = list_offsets();
        let text = f.text(file);
        let asked = list_offsets() - before;
        // Earliest and latest of all 300 partitions: one request each (a request may not name
        // a partition twice), a time one more, plus the ones the file's own lookup and open
        // make.
        assert!(asked <= 9, "{file}: {asked} ListOffsets requests for 300 partitions");
        if let Some(time) = file.strip_prefix("wide/offsets/") {
            assert_eq!(text.lines().count(), 300, "{file}");
            // The same answers as each partition's own ListOffsets.
            let query = match time {
                "-1" => OffsetQuery::Latest,
                "-2" => OffsetQuery::Earliest,
                "0" => OffsetQuery::Timestamp(0),
                _ => OffsetQuery::Timestamp(4_070_908_800_000),
            };
            for p in [0u32, 7, 8, 299] {
                let own = f.source.partition("wide", p).unwrap().offset_for(query).unwrap();
                let want = format!("wide:{p}:{own}");
                assert!(text.lines().any(|l| l == want), "{file}: {want} not in the text");
            }
            if time == "-1" || time == "-2" {
                let want = if ends { "wide:7:2" } else { "wide:7:0" };
                assert!(text.lines().any(|l| l == want), "{file}: {text}");
            }
        } else {
            assert!(text.contains("partition.299.log_end_offset: 2\n"), "{text}");
        }
    }
}

/// The merged `by-time/` of a wide topic reads its partitions' first batches in Fetches of
/// many partitions (`TopicSource::prefetch`, 128 partitions a request at most), not a Fetch
/// per partition, and gives the same records in the same order as each partition read alone.
/// Its start, a time, is asked of all partitions at once too. The source reads committed, as
/// a mount's does.
#[test]
fn cluster_fs_merged_by_time_of_a_wide_topic_fetches_many_partitions_at_once() {
    let f = fixture_reading(false, false, true);
    f.source.create_topic("wide", 300).unwrap();
    let bootstrap = parse_bootstrap(&f._broker.bootstrap()).unwrap();
    let other = Client::connect(bootstrap, ClientConfig::default()).unwrap();
    // Two records per partition, their times interleaving the partitions: the merge takes
    // every partition's first record before any second one.
    for p in 0..300i32 {
        let records: Vec<NewRecord> = (0..2i64)
            .map(|i| NewRecord {
                timestamp: T0 + 1_000_000 * i + i64::from(p),
                value: Some(format!("{p}-{i}").into_bytes()),
                ..NewRecord::default()
            })
            .collect();
        other.produce("wide", p, &records).unwrap();
    }
    let want: String = (0..2).flat_map(|i| (0..300).map(move |p| format!("{p}-{i}\n"))).collect();
    let fetches = || f.source.client().request_counts().get(ApiKey::Fetch);
    let list_offsets = || f.source.client().request_counts().get(ApiKey::ListOffsets);
    for file in ["wide/by-time/-2", "wide/by-time/0"] {
        let (before, listed) = (fetches(), list_offsets());
        let text = f.text(file);
        let asked = fetches() - before;
        let listed = list_offsets() - listed;
        assert_eq!(text, want, "{file}");
        // The bounds and a start time of all 300 partitions in a few ListOffsets, not 300 or
        // more: a pair per broker for the bounds in each operation that needs them (lookup,
        // open, reads: 8 measured), one more per resolution of a time (lookup and open).
        assert!(listed <= 12, "{file}: {listed} ListOffsets requests for 300 partitions");
        // 300 partitions in batches of at most 128: three Fetches (128 + 128 + 44) where one
        // per partition made 301; reading the stream after sizing it, and the second file,
        // are served from the answers the mount keeps.
        assert!(asked <= 6, "{file}: {asked} Fetch requests for 300 partitions");
    }
    // The same records as each partition's own stream gives.
    for p in [0, 150, 299] {
        assert_eq!(f.text(&format!("wide/{p}/by-offset/0")), format!("{p}-0\n{p}-1\n"));
    }
    // Through a filter (run over what Fetch returns, in the mount): the same merge with the
    // rejected records left out.
    let kept: String =
        want.lines().filter(|l| l.ends_with("-1")).map(|l| format!("{l}\n")).collect();
    assert_eq!(f.text("wide/where/@value~-1/by-time/0"), kept);
}

/// A sequential reader of a partition of several MiB keeps several Fetches in flight, each
/// after the last one's guessed end (`cluster/source/window.rs`), and still reads every
/// record once, in order: tansu's SQLite engine frames the batches of each Fetch answer anew,
/// so a guessed answer's first batch may hold records the reader already has, which it then
/// fetches itself instead, and guesses stop for that partition (one Fetch lost, not one per
/// window).
#[test]
fn cluster_fs_a_sequential_read_with_guessed_prefetches_returns_every_record_once() {
    let f = fixture_reading(false, false, true);
    f.source.client().create_topic("big", 1, &[]).unwrap();
    let mut want = String::new();
    let mut batch = Vec::new();
    for i in 0..60_000u32 {
        let value = format!("{i:0100}");
        want.push_str(&value);
        want.push('\n');
        batch.push(NewRecord { value: Some(value.into_bytes()), ..NewRecord::default() });
        if batch.len() == 700 {
            f.source.client().produce("big", 0, &batch).unwrap();
            batch.clear();
        }
    }
    f.source.client().produce("big", 0, &batch).unwrap();
    let fetches = || f.source.client().request_counts().get(ApiKey::Fetch);
    for round in 0..2 {
        let before = fetches();
        let got = f.text("big/0/by-offset/0");
        assert!(got == want, "round {round}: {} bytes read, {} expected", got.len(), want.len());
        // 13 without guessed prefetches; one guess is tried, refused, and read again.
        let asked = fetches() - before;
        assert!(asked <= 16, "round {round}: {asked} Fetch requests");
    }
}
