//! Key indexes against a plain scan: random logs of random keys (null, empty, `/`, non-UTF-8,
//! long), tombstones, compaction gaps, transactions (committed, aborted, open), every codec and
//! the legacy message formats, split into random segments; `by-key`, `latest` and `keys` must
//! say what a scan of every record says, in `read_committed` and `read_uncommitted`. Also: a
//! stored index that is damaged or stale is detected and rebuilt, never trusted.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use topicfs::format::control::encode_end_txn_marker_batch;
use topicfs::format::key_name::key_name;
use topicfs::format::legacy::{encode_message, encode_wrapper};
use topicfs::format::{BatchSpec, Compression, NewRecord, Offset, encode_batch};
use topicfs::source::PartitionSource;
use topicfs::storage::key_index::KeyIndexStore;
use topicfs::storage::{LogConfig, LogDirs, LogSegment, SegmentMode};
use topicfs::view::bykey::{KeyStream, KeysReader, latest_record};
use topicfs::view::render::JsonShown;
use topicfs::view::spec::Format;
use topicfs::view::txn::TxnTracker;

/// The keys records get (by index; `None` is the null key).
fn keys() -> Vec<Option<Vec<u8>>> {
    vec![
        None,
        Some(b"user-1".to_vec()),
        Some(b"user-2".to_vec()),
        Some(b"".to_vec()),
        Some(b"a/b".to_vec()),
        Some(b"\xff\x00bin".to_vec()),
        Some(b"x.json".to_vec()),
        Some(vec![b'L'; 300]),
    ]
}

#[derive(Clone, Debug)]
enum Kind {
    /// A v2 batch with this codec.
    V2(Compression),
    /// A transactional v2 batch of this producer.
    Txn(i64),
    /// The producer's marker: commit or abort.
    Marker(i64, bool),
    /// Legacy messages, one entry each, of this magic.
    Legacy(i8),
    /// A legacy compressed wrapper (magic, codec).
    Wrapper(i8, Compression),
}

#[derive(Clone, Debug)]
struct Spec {
    kind: Kind,
    /// (key index, tombstone) per record.
    records: Vec<(usize, bool)>,
    /// Offsets skipped before this batch (a compacted log's gap).
    gap: i64,
    /// A new segment starts at this batch.
    roll: bool,
}

fn codec() -> impl Strategy<Value = Compression> {
    prop_oneof![
        Just(Compression::None),
        Just(Compression::Gzip),
        Just(Compression::Snappy),
        Just(Compression::Lz4),
        Just(Compression::Zstd),
    ]
}

fn legacy_codec() -> impl Strategy<Value = Compression> {
    prop_oneof![Just(Compression::Gzip), Just(Compression::Snappy)]
}

fn spec() -> impl Strategy<Value = Spec> {
    let kind = prop_oneof![
        5 => codec().prop_map(Kind::V2),
        3 => (1i64..4).prop_map(Kind::Txn),
        2 => ((1i64..4), any::<bool>()).prop_map(|(p, c)| Kind::Marker(p, c)),
        1 => (0i8..2).prop_map(Kind::Legacy),
        1 => ((0i8..2), legacy_codec()).prop_map(|(m, c)| Kind::Wrapper(m, c)),
    ];
    (
        kind,
        prop::collection::vec((0usize..8, prop::bool::weighted(0.2)), 1..6),
        prop_oneof![3 => Just(0i64), 1 => 1i64..5],
        prop::bool::weighted(0.2),
    )
        .prop_map(|(kind, records, gap, roll)| Spec { kind, records, gap, roll })
}

fn new_record(key: usize, tombstone: bool, offset: i64) -> NewRecord {
    NewRecord {
        timestamp: 1_000 + offset,
        key: keys()[key].clone(),
        value: (!tombstone).then(|| format!("v{offset}").into_bytes()),
        headers: vec![],
    }
}

/// One record as a scan sees it.
#[derive(Clone, Debug)]
struct Seen {
    offset: i64,
    key: usize,
    tombstone: bool,
    /// The producer of its transactional batch.
    txn: Option<i64>,
}

/// Writes the specs as segment files of partition `t-0` under `dir`; returns every data record
/// and the markers (offset, producer, commit).
fn write_log(dir: &Path, specs: &[Spec]) -> (Vec<Seen>, Vec<(i64, i64, bool)>) {
    let part = dir.join("t-0");
    std::fs::create_dir_all(&part).unwrap();
    let mut segments: Vec<(i64, Vec<u8>)> = vec![(0, Vec::new())];
    let mut next = 0i64;
    let mut seen = Vec::new();
    let mut markers = Vec::new();
    for s in specs {
        next += s.gap;
        if s.roll && !segments.last().unwrap().1.is_empty() {
            segments.push((next, Vec::new()));
        }
        let base = next;
        let recs: Vec<NewRecord> = s
            .records
            .iter()
            .enumerate()
            .map(|(i, (k, t))| new_record(*k, *t, base + i as i64))
            .collect();
        let bytes = match &s.kind {
            Kind::V2(c) => {
                let spec = BatchSpec {
                    base_offset: Offset(base),
                    compression: *c,
                    ..BatchSpec::default()
                };
                encode_batch(&spec, &recs).unwrap()
            }
            Kind::Txn(pid) => {
                let spec = BatchSpec {
                    base_offset: Offset(base),
                    producer_id: *pid,
                    producer_epoch: 0,
                    base_sequence: 0,
                    is_transactional: true,
                    ..BatchSpec::default()
                };
                encode_batch(&spec, &recs).unwrap()
            }
            Kind::Marker(pid, commit) => {
                markers.push((base, *pid, *commit));
                next += 1;
                let b =
                    encode_end_txn_marker_batch(Offset(base), 0, *pid, 0, *commit, 0, 1).unwrap();
                segments.last_mut().unwrap().1.extend(b);
                continue;
            }
            Kind::Legacy(magic) => {
                let mut out = Vec::new();
                for (i, r) in recs.iter().enumerate() {
                    out.extend(encode_message(
                        Offset(base + i as i64),
                        *magic,
                        0,
                        r.timestamp,
                        r.key.as_deref(),
                        r.value.as_deref(),
                    ));
                }
                out
            }
            Kind::Wrapper(magic, c) => {
                encode_wrapper(*magic, *c, Offset(base), &recs, None).unwrap()
            }
        };
        let txn = match s.kind {
            Kind::Txn(pid) => Some(pid),
            _ => None,
        };
        for (i, (k, t)) in s.records.iter().enumerate() {
            seen.push(Seen { offset: base + i as i64, key: *k, tombstone: *t, txn });
        }
        next = base + recs.len() as i64;
        segments.last_mut().unwrap().1.extend(bytes);
    }
    for (base, bytes) in segments {
        std::fs::write(part.join(format!("{base:020}.log")), bytes).unwrap();
    }
    (seen, markers)
}

/// What a `read_committed` consumer sees of `seen`: records of aborted transactions hidden,
/// nothing from the first transaction without a marker on.
fn committed(seen: &[Seen], markers: &[(i64, i64, bool)]) -> Vec<Seen> {
    // Each transactional record's fate: the first marker of its producer after it.
    let mut out = Vec::new();
    for r in seen {
        match r.txn {
            None => out.push(r.clone()),
            Some(pid) => {
                let fate = markers.iter().find(|(o, p, _)| *p == pid && *o > r.offset);
                match fate {
                    Some((_, _, true)) => out.push(r.clone()),
                    Some((_, _, false)) => {}
                    None => out.push(Seen { offset: i64::MAX, ..r.clone() }),
                }
            }
        }
    }
    // The last stable offset: the first open transactional record's offset.
    let first_open = seen
        .iter()
        .filter(|r| {
            r.txn.is_some_and(|pid| !markers.iter().any(|(o, p, _)| *p == pid && *o > r.offset))
        })
        .map(|r| r.offset)
        .min();
    out.retain(|r| r.offset != i64::MAX && first_open.is_none_or(|f| r.offset < f));
    out
}

fn offsets_of_json(bytes: &[u8]) -> Vec<i64> {
    std::str::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["offset"].as_i64().unwrap())
        .collect()
}

fn read_all_keys(reader: &KeysReader) -> BTreeMap<String, u64> {
    let mut all = Vec::new();
    loop {
        let chunk = reader.read_at(all.len() as u64, 37).unwrap();
        if chunk.is_empty() {
            break;
        }
        all.extend(chunk);
    }
    String::from_utf8(all)
        .unwrap()
        .lines()
        .map(|l| {
            let (name, count) = l.split_once('\t').unwrap();
            (name.to_string(), count.parse().unwrap())
        })
        .collect()
}

fn check(part: Arc<dyn PartitionSource>, visible: &[Seen], read_committed: bool) {
    let tracker = || read_committed.then(|| Arc::new(TxnTracker::new()));
    let keys = keys();
    let mut counts = BTreeMap::new();
    for (k, key) in keys.iter().enumerate() {
        let expect: Vec<&Seen> = visible.iter().filter(|r| r.key == k).collect();
        let stream = KeyStream::open(
            Arc::clone(&part),
            key.clone(),
            Format::Json,
            tracker(),
            JsonShown::default(),
        )
        .unwrap();
        let size = stream.size().unwrap();
        let bytes = stream.read_at(0, size as usize + 10).unwrap();
        assert_eq!(bytes.len() as u64, size);
        assert_eq!(
            offsets_of_json(&bytes),
            expect.iter().map(|r| r.offset).collect::<Vec<_>>(),
            "key {}",
            key_name(key.as_deref())
        );
        // Reads in small windows give the same bytes.
        let mut windows = Vec::new();
        while (windows.len() as u64) < size {
            windows.extend(stream.read_at(windows.len() as u64, 13).unwrap());
        }
        assert_eq!(windows, bytes);
        let latest = latest_record(
            part.as_ref(),
            key.as_deref(),
            Format::Json,
            tracker().as_deref(),
            JsonShown::default(),
        )
        .unwrap();
        match expect.last() {
            Some(r) if !r.tombstone => assert_eq!(offsets_of_json(&latest.unwrap()), [r.offset]),
            _ => assert!(latest.is_none()),
        }
        if !expect.is_empty() {
            counts.insert(key_name(key.as_deref()), expect.len() as u64);
        }
    }
    let reader = KeysReader::open(Arc::clone(&part), tracker()).unwrap();
    assert_eq!(read_all_keys(&reader), counts);
    // In key order (the null key first, then bytes), and `stat`'s size is what a read gives.
    let reader = KeysReader::open(Arc::clone(&part), tracker()).unwrap();
    let text = reader.read_at(0, 1 << 20).unwrap();
    assert_eq!(reader.size().unwrap(), Some(text.len() as u64));
    let by_name: HashMap<String, Option<Vec<u8>>> =
        keys.iter().map(|k| (key_name(k.as_deref()), k.clone())).collect();
    let listed: Vec<Option<Vec<u8>>> = std::str::from_utf8(&text)
        .unwrap()
        .lines()
        .map(|l| by_name[l.split_once('\t').unwrap().0].clone())
        .collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "keys is in key order");
}

/// A store that keeps payloads in memory, by segment base offset and size.
#[derive(Default)]
struct MemStore {
    payloads: Mutex<HashMap<(i64, u64), Vec<u8>>>,
}

impl KeyIndexStore for MemStore {
    fn load(&self, segment: &LogSegment) -> Option<Vec<u8>> {
        self.payloads.lock().unwrap().get(&(segment.base_offset().0, segment.size())).cloned()
    }

    fn store(&self, segment: &LogSegment, payload: &[u8]) {
        self.payloads
            .lock()
            .unwrap()
            .insert((segment.base_offset().0, segment.size()), payload.to_vec());
    }
}

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("retention.ms", "-1").unwrap();
    c
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn by_key_latest_and_keys_agree_with_a_plain_scan(specs in prop::collection::vec(spec(), 1..40)) {
        let tmp = tempfile::tempdir().unwrap();
        let (seen, markers) = write_log(tmp.path(), &specs);
        let dir = LogDirs::open_dir(tmp.path(), config(), Default::default(), SegmentMode::ReadOnly).unwrap();
        let log = dir.log("t", 0).unwrap();
        let part: Arc<dyn PartitionSource> = log.clone();
        check(Arc::clone(&part), &committed(&seen, &markers), true);
        check(part, &seen, false);
    }
}

/// Appends after a stream opened are taken in; a roll makes the active index a sealed one.
#[test]
fn a_key_stream_grows_with_appends_and_survives_a_roll() {
    let tmp = tempfile::tempdir().unwrap();
    let dir =
        LogDirs::open_dir(tmp.path(), config(), Default::default(), SegmentMode::Writable).unwrap();
    dir.create_topic("g", 1).unwrap();
    let log = dir.log("g", 0).unwrap();
    let rec = |k: &str, v: &str| NewRecord {
        key: Some(k.as_bytes().to_vec()),
        value: Some(v.as_bytes().to_vec()),
        ..NewRecord::default()
    };
    log.append(&[rec("a", "1"), rec("b", "2")]).unwrap();
    let part: Arc<dyn PartitionSource> = log.clone();
    let stream = KeyStream::open(
        Arc::clone(&part),
        Some(b"a".to_vec()),
        Format::Values,
        None,
        JsonShown::default(),
    )
    .unwrap();
    assert_eq!(stream.read_at(0, 100).unwrap(), b"1\n");
    log.append(&[rec("a", "3")]).unwrap();
    log.force_roll().unwrap();
    log.append(&[rec("b", "4"), rec("a", "5")]).unwrap();
    assert_eq!(stream.size().unwrap(), 6);
    assert_eq!(stream.read_at(0, 100).unwrap(), b"1\n3\n5\n");
    assert_eq!(stream.read_at(2, 3).unwrap(), b"3\n5");
    assert_eq!(log.keys().built_count(), 0, "the rolled segment's index came from memory");
}

/// A key lookup finds only records below the log end offset it read first: the active
/// segment's file may already hold a batch being appended (its bytes are written before the
/// log end offset moves), whose offsets the log does not serve yet. The log here states an
/// end one record short of its file, as it does during that append.
#[test]
fn a_key_lookup_finds_no_record_past_the_log_end_offset_it_read() {
    use topicfs::storage::Log;
    use topicfs::storage::key_index::{IndexedLog, PartitionKeys};
    struct Behind(Arc<Log>, Offset);
    impl IndexedLog for Behind {
        fn segment_list(&self) -> Vec<Arc<LogSegment>> {
            self.0.segment_list()
        }
        fn log_start_offset(&self) -> Offset {
            IndexedLog::log_start_offset(self.0.as_ref())
        }
        fn log_end_offset(&self) -> Offset {
            self.1
        }
        fn take_in_changes(&self) -> topicfs::error::Result<()> {
            IndexedLog::take_in_changes(self.0.as_ref())
        }
        fn dir(&self) -> &Path {
            IndexedLog::dir(self.0.as_ref())
        }
        fn load_key_index(&self, base: Offset) -> Option<Vec<u8>> {
            self.0.load_key_index(base)
        }
        fn store_key_index(&self, base: Offset, payload: &[u8]) {
            self.0.store_key_index(base, payload)
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir =
        LogDirs::open_dir(tmp.path(), config(), Default::default(), SegmentMode::Writable).unwrap();
    dir.create_topic("g", 1).unwrap();
    let log = dir.log("g", 0).unwrap();
    let rec = |v: &str| NewRecord {
        key: Some(b"a".to_vec()),
        value: Some(v.as_bytes().to_vec()),
        ..NewRecord::default()
    };
    log.append(&[rec("1")]).unwrap();
    log.append(&[rec("2")]).unwrap();
    let keys = PartitionKeys::new(None);
    let offsets = |end: i64| -> Vec<i64> {
        let hits = keys.key_hits(&Behind(Arc::clone(&log), Offset(end)), Some(b"a"), Offset(0));
        let hits = hits.unwrap();
        assert_eq!(hits.indexed_to, Offset(end));
        hits.hits.iter().map(|h| h.offset.0).collect()
    };
    assert_eq!(offsets(1), [0], "the record still being appended is not a hit yet");
    assert_eq!(offsets(2), [0, 1], "once the log serves it, it is");
    // `keys` counts the same records.
    let listed = |end: i64| -> Vec<i64> {
        let mut listing = keys.listing(&Behind(Arc::clone(&log), Offset(end))).unwrap();
        let (key, hits) = listing.next_key().unwrap().unwrap();
        assert_eq!(key.as_deref(), Some(&b"a"[..]));
        assert!(listing.next_key().unwrap().is_none());
        hits.iter().map(|h| h.offset.0).collect()
    };
    assert_eq!(listed(1), [0]);
    assert_eq!(listed(2), [0, 1]);
}

/// Sealed indexes past the memory bound (`--key-index-memory`) are dropped from memory, least
/// recently used first, and loaded again from the store at their next query: the answers
/// never change. (The bound is process-wide: nextest runs each test in a process of its own.)
#[test]
fn sealed_key_indexes_past_the_memory_bound_are_dropped_and_loaded_again() {
    use topicfs::storage::key_index::{memory_held, set_memory_limit};
    let tmp = tempfile::tempdir().unwrap();
    let specs: Vec<Spec> = (0..6)
        .map(|i| Spec {
            kind: Kind::V2(Compression::None),
            records: vec![(1 + i % 3, false), (2, i == 5)],
            gap: 0,
            roll: i % 2 == 0,
        })
        .collect();
    let (seen, _) = write_log(tmp.path(), &specs);
    let store = Arc::new(MemStore::default());
    let dir =
        LogDirs::open_dir(tmp.path(), config(), Default::default(), SegmentMode::ReadOnly).unwrap();
    let log = dir.log("t", 0).unwrap();
    log.keys().set_store(Some(store.clone() as Arc<dyn KeyIndexStore>));
    let user1 = |log: &Arc<topicfs::storage::Log>| {
        let part: Arc<dyn PartitionSource> = log.clone();
        let s = KeyStream::open(
            part,
            Some(b"user-1".to_vec()),
            Format::Json,
            None,
            JsonShown::default(),
        )
        .unwrap();
        offsets_of_json(&s.read_at(0, 1 << 20).unwrap())
    };
    let expect: Vec<i64> = seen.iter().filter(|r| r.key == 1).map(|r| r.offset).collect();
    assert_eq!(user1(&log), expect);
    assert_eq!((log.keys().built_count(), log.keys().loaded_count()), (2, 0));
    let sizes: Vec<u64> = store.payloads.lock().unwrap().values().map(|p| p.len() as u64).collect();
    assert_eq!(memory_held(), sizes.iter().sum::<u64>());

    // Room for one index: one is dropped at once, and each query loads what it lacks.
    let one = *sizes.iter().max().unwrap();
    set_memory_limit(one);
    assert!(memory_held() <= one, "{} held, bound {one}", memory_held());
    assert!(log.keys().sealed_bytes() <= one);
    for round in 1..=3 {
        assert_eq!(user1(&log), expect, "round {round}");
        assert!(memory_held() <= one, "{} held, bound {one}", memory_held());
    }
    assert_eq!(log.keys().built_count(), 2, "dropped indexes are loaded, not rebuilt");
    assert!(log.keys().loaded_count() >= 3, "{} loads", log.keys().loaded_count());

    // A bound again larger than both: nothing more is dropped or loaded.
    set_memory_limit(1 << 30);
    assert_eq!(user1(&log), expect);
    let loads = log.keys().loaded_count();
    assert_eq!(user1(&log), expect);
    assert_eq!(log.keys().loaded_count(), loads);
    drop(log);
    drop(dir);
}

/// A stored index that is damaged, or describes another segment, is rebuilt and stored again.
#[test]
fn a_damaged_or_stale_stored_index_is_detected_and_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let specs: Vec<Spec> = (0..6)
        .map(|i| Spec {
            kind: Kind::V2(Compression::None),
            records: vec![(1 + i % 3, false), (2, i == 5)],
            gap: 0,
            roll: i % 2 == 0,
        })
        .collect();
    let (seen, _) = write_log(tmp.path(), &specs);
    let store = Arc::new(MemStore::default());
    let open = || {
        let dir =
            LogDirs::open_dir(tmp.path(), config(), Default::default(), SegmentMode::ReadOnly)
                .unwrap();
        let log = dir.log("t", 0).unwrap();
        log.keys().set_store(Some(store.clone() as Arc<dyn KeyIndexStore>));
        (dir, log)
    };
    let user1 = |log: &Arc<topicfs::storage::Log>| {
        let part: Arc<dyn PartitionSource> = log.clone();
        let s = KeyStream::open(
            part,
            Some(b"user-1".to_vec()),
            Format::Json,
            None,
            JsonShown::default(),
        )
        .unwrap();
        offsets_of_json(&s.read_at(0, 1 << 20).unwrap())
    };
    let expect: Vec<i64> = seen.iter().filter(|r| r.key == 1).map(|r| r.offset).collect();

    // First mount: the sealed segments (all but the last) are built and stored.
    let (_d, log) = open();
    assert_eq!(user1(&log), expect);
    let sealed = log.keys().built_count();
    assert_eq!(sealed, 2);
    assert_eq!(store.payloads.lock().unwrap().len(), 2);

    // Second mount: loaded, nothing built.
    let (_d, log) = open();
    assert_eq!(user1(&log), expect);
    assert_eq!((log.keys().built_count(), log.keys().loaded_count()), (0, 2));

    // Damage one stored index (a flipped byte), and make the other stale (a valid index of
    // another segment stored under this one's name): both are rebuilt, and the answers hold.
    {
        let mut payloads = store.payloads.lock().unwrap();
        let mut entries: Vec<_> = payloads.keys().copied().collect();
        entries.sort();
        let first = payloads.get_mut(&entries[0]).unwrap();
        let mid = first.len() / 2;
        first[mid] ^= 1;
        let stale = topicfs::format::key_index::KeyIndexBuilder::new(Offset(entries[1].0));
        payloads.insert(entries[1], stale.encode(Offset(entries[1].0), 3));
    }
    let (_d, log) = open();
    assert_eq!(user1(&log), expect);
    assert_eq!((log.keys().built_count(), log.keys().loaded_count()), (2, 0));
    // Stored again, whole: the next mount loads both.
    let (_d, log) = open();
    assert_eq!(user1(&log), expect);
    assert_eq!((log.keys().built_count(), log.keys().loaded_count()), (0, 2));
}

/// Through the log's own segment cache (no store set): a remount loads the sealed segments'
/// key indexes instead of building them.
#[test]
fn a_remount_loads_sealed_key_indexes_from_the_segment_cache() {
    use topicfs::storage::cache::{CacheSettings, SegmentCache};
    let tmp = tempfile::tempdir().unwrap();
    let specs: Vec<Spec> = (0..6)
        .map(|i| Spec {
            kind: Kind::V2(Compression::None),
            records: vec![(1 + i % 3, false), (2, false)],
            gap: 0,
            roll: i % 2 == 0,
        })
        .collect();
    let (seen, _) = write_log(tmp.path(), &specs);
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(SegmentCache::open(&CacheSettings {
        dir: Some(cache_dir.path().to_path_buf()),
        max_bytes: 1 << 24,
    }));
    let expect: Vec<i64> = seen.iter().filter(|r| r.key == 1).map(|r| r.offset).collect();
    let query = |log: &Arc<topicfs::storage::Log>| {
        let part: Arc<dyn PartitionSource> = log.clone();
        let s = KeyStream::open(
            part,
            Some(b"user-1".to_vec()),
            Format::Json,
            None,
            JsonShown::default(),
        )
        .unwrap();
        offsets_of_json(&s.read_at(0, 1 << 20).unwrap())
    };
    {
        let dir =
            LogDirs::open_dir(tmp.path(), config(), Default::default(), SegmentMode::ReadOnly)
                .unwrap();
        let log = dir.log("t", 0).unwrap();
        log.set_cache(Arc::clone(&cache));
        assert_eq!(query(&log), expect);
        assert_eq!((log.keys().built_count(), log.keys().loaded_count()), (2, 0));
        dir.shutdown().unwrap();
    }
    let dir =
        LogDirs::open_dir(tmp.path(), config(), Default::default(), SegmentMode::ReadOnly).unwrap();
    let log = dir.log("t", 0).unwrap();
    log.set_cache(Arc::clone(&cache));
    assert_eq!(query(&log), expect);
    assert_eq!((log.keys().built_count(), log.keys().loaded_count()), (0, 2));
}
