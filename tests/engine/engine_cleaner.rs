//! The log cleaner seen through the view's key files: `latest/<key>` is the same before and
//! after cleaning, `by-key/<key>` then lists only the record the cleaner kept (the per-segment
//! key indexes of replaced segments are dropped and rebuilt), and appends and reads go on while
//! a pass runs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use topicfs::format::{NewRecord, Offset};
use topicfs::source::PartitionSource;
use topicfs::storage::cleaner::{CleanOptions, Cleaner, CleanerSettings};
use topicfs::storage::{LogConfig, LogDir};
use topicfs::view::bykey::{KeyStream, latest_record};
use topicfs::view::spec::Format;

const T0: i64 = 1_767_225_600_000;

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", "1500").unwrap();
    c.set("index.interval.bytes", "100").unwrap();
    c.set("retention.ms", "-1").unwrap();
    c
}

fn offsets_of_json(bytes: &[u8]) -> Vec<i64> {
    std::str::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["offset"].as_i64().unwrap())
        .collect()
}

fn settings() -> CleanerSettings {
    CleanerSettings {
        min_cleanable_dirty_ratio: 0.0,
        segment_bytes: 1 << 20,
        segment_index_bytes: 4096,
        dedupe_buffer_bytes: 1 << 16,
        ..CleanerSettings::default()
    }
}

fn rec(i: i64, key: &str, value: Option<&str>) -> NewRecord {
    NewRecord {
        timestamp: T0 + i,
        key: Some(key.as_bytes().to_vec()),
        value: value.map(|v| v.as_bytes().to_vec()),
        headers: vec![],
    }
}

#[test]
fn latest_and_by_key_agree_before_and_after_cleaning() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = LogDir::open(tmp.path(), config()).unwrap();
    dir.create_topic("t", 1).unwrap();
    let log = dir.log("t", 0).unwrap();
    let keys: Vec<String> = (0..9).map(|k| format!("key{k}")).collect();
    let mut last: BTreeMap<String, (i64, bool)> = BTreeMap::new();
    for i in 0..300i64 {
        let key = &keys[((i * 5) % 9) as usize];
        let value = (i % 13 != 4).then(|| format!("value {i}"));
        let info = log.append(&[rec(i, key, value.as_deref())]).unwrap();
        last.insert(key.clone(), (info.first_offset.0, value.is_none()));
    }
    let part: Arc<dyn PartitionSource> = log.clone();
    let latest =
        |k: &str| latest_record(part.as_ref(), Some(k.as_bytes()), Format::Json, None).unwrap();
    let before: Vec<_> = keys.iter().map(|k| latest(k)).collect();
    // The key indexes exist before the pass (built by the queries above).
    let by_key_before: Vec<Vec<i64>> = keys
        .iter()
        .map(|k| {
            let s = KeyStream::open(
                Arc::clone(&part),
                Some(k.clone().into_bytes()),
                Format::Json,
                None,
            )
            .unwrap();
            offsets_of_json(&s.read_at(0, 1 << 20).unwrap())
        })
        .collect();
    assert!(by_key_before.iter().all(|o| o.len() > 10));
    let active_base = log.segment_list().last().unwrap().base_offset().0;
    let opts = CleanOptions { now: T0 + 1000, ..CleanOptions::default() };
    let stats = Cleaner::new(1 << 16).clean(&log, &settings(), None, &opts).unwrap().unwrap();
    assert_eq!(stats.end_offset, Offset(active_base));
    let after: Vec<_> = keys.iter().map(|k| latest(k)).collect();
    assert_eq!(after, before, "latest/ is the same after cleaning");
    for (k, old) in keys.iter().zip(&by_key_before) {
        let s =
            KeyStream::open(Arc::clone(&part), Some(k.clone().into_bytes()), Format::Json, None)
                .unwrap();
        let got = offsets_of_json(&s.read_at(0, 1 << 20).unwrap());
        // The sealed part keeps only the key's latest record there, the active segment all.
        let sealed_latest = old.iter().copied().filter(|o| *o < active_base).max();
        let mut want: Vec<i64> = sealed_latest.into_iter().collect();
        want.extend(old.iter().copied().filter(|o| *o >= active_base));
        assert_eq!(got, want, "by-key/{k} after cleaning");
    }
}

#[test]
fn appends_and_reads_go_on_while_the_cleaner_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = LogDir::open(tmp.path(), config()).unwrap();
    dir.create_topic("t", 1).unwrap();
    let log = dir.log("t", 0).unwrap();
    for i in 0..200i64 {
        log.append(&[rec(i, &format!("k{}", i % 7), Some("v"))]).unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (log, done) = (Arc::clone(&log), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut n = 0i64;
            while !done.load(Ordering::Relaxed) || n < 200 {
                log.append(&[rec(1000 + n, &format!("k{}", n % 7), Some("w"))]).unwrap();
                n += 1;
            }
            n
        })
    };
    let reader = {
        let (log, done) = (Arc::clone(&log), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut reads = 0;
            while !done.load(Ordering::Relaxed) {
                let mut cursor = log.seek(log.log_start_offset()).unwrap();
                let mut last = -1i64;
                loop {
                    let chunk = log.read(&cursor, 700).unwrap();
                    if chunk.bytes.is_empty() {
                        break;
                    }
                    let mut at = 0;
                    while let Some(h) = topicfs::format::peek_entry(&chunk.bytes[at..]).unwrap() {
                        let b =
                            topicfs::format::decode_batch(&chunk.bytes[at..at + h.total_size()])
                                .unwrap();
                        for r in b.records() {
                            let o = r.unwrap().offset.0;
                            assert!(o > last, "offsets increase across a swap: {o} after {last}");
                            last = o;
                        }
                        at += h.total_size();
                    }
                    cursor = chunk.next.unwrap();
                }
                reads += 1;
            }
            reads
        })
    };
    let mut cleaner = Cleaner::new(1 << 16);
    let mut checkpoint = None;
    let mut passes = 0;
    for round in 0..20 {
        let opts = CleanOptions { now: T0 + 10_000 + round, ..CleanOptions::default() };
        if let Some(stats) = cleaner.clean(&log, &settings(), checkpoint, &opts).unwrap() {
            checkpoint = Some(stats.end_offset);
            passes += 1;
        }
    }
    done.store(true, Ordering::Relaxed);
    let appended = writer.join().unwrap();
    assert!(reader.join().unwrap() > 0);
    assert!(passes > 1, "{passes} passes ran while appends went on");
    // Every key's latest value is the last appended one.
    let end = log.log_end_offset().0;
    assert_eq!(end, 200 + appended);
}

/// A record stream opened before a pass keeps its size and its tail; its head reads records of
/// the compacted log (the view keeps its rendered positions: it does not yet treat a pass as
/// retention); a stream opened after reads exactly the compacted log.
#[test]
fn a_stream_opened_before_a_pass_keeps_its_tail_and_a_new_one_reads_the_compacted_log() {
    use topicfs::view::spec::StreamSpec;
    use topicfs::view::stream::{Stream, StreamRegistry};
    let full_read = |s: &Stream| {
        let mut out = Vec::new();
        loop {
            let chunk = s.read_at(out.len() as u64, 4096).unwrap();
            if chunk.is_empty() {
                return out;
            }
            out.extend(chunk);
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = LogDir::open(tmp.path(), config()).unwrap();
    dir.create_topic("t", 1).unwrap();
    let log = dir.log("t", 0).unwrap();
    for i in 0..300i64 {
        let value = format!("value {i}");
        log.append(&[rec(i, &format!("k{}", i % 5), Some(value.as_str()))]).unwrap();
    }
    let part: Arc<dyn PartitionSource> = log.clone();
    let reg = StreamRegistry::new();
    let spec = StreamSpec::parse_by_offset("0").unwrap();
    let old = reg.open(Arc::clone(&part), &spec, 0).unwrap();
    let before = full_read(&old);
    let size = old.size().unwrap();
    assert_eq!(size, before.len() as u64);
    let opts = CleanOptions { now: T0 + 1000, ..CleanOptions::default() };
    Cleaner::new(1 << 16).clean(&log, &settings(), None, &opts).unwrap().unwrap();
    // The tail (the active segment) reads as before; the head reads without error.
    let tail = old.read_at(size - 10, 10).unwrap();
    assert_eq!(tail, before[before.len() - 10..]);
    assert_eq!(old.size().unwrap(), size);
    let head = String::from_utf8(old.read_at(0, 200).unwrap()).unwrap();
    assert!(head.lines().count() > 2 && head.lines().all(|l| l.starts_with("value")), "{head}");
    // A stream opened now shows the compacted log: each key's latest value, then the active
    // segment.
    let fresh = StreamRegistry::new().open(Arc::clone(&part), &spec, 0).unwrap();
    let text = String::from_utf8(full_read(&fresh)).unwrap();
    let active_base = log.segment_list().last().unwrap().base_offset().0;
    let mut want: Vec<String> =
        (active_base - 5..active_base).map(|i| format!("value {i}")).collect();
    want.extend((active_base..300).map(|i| format!("value {i}")));
    assert_eq!(text.lines().collect::<Vec<_>>(), want);
}
