//! The log cleaner seen through the view's key files: `latest/<key>` is the same before and
//! after cleaning, `by-key/<key>` then lists only the record the cleaner kept (the per-segment
//! key indexes of replaced segments are dropped and rebuilt), and appends and reads go on while
//! a pass runs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use topicfs::cleaner::{CleanOptions, Cleaner, CleanerSettings};
use topicfs::format::{NewRecord, Offset};
use topicfs::source::PartitionSource;
use topicfs::storage::{LogConfig, LogDirs, SegmentMode};
use topicfs::view::bykey::{KeyStream, latest_record};
use topicfs::view::render::JsonShown;
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
    let dir =
        LogDirs::open_dir(tmp.path(), config(), Default::default(), SegmentMode::Writable).unwrap();
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
    let latest = |k: &str| {
        latest_record(part.as_ref(), Some(k.as_bytes()), Format::Json, None, JsonShown::default())
            .unwrap()
    };
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
                JsonShown::default(),
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
        let s = KeyStream::open(
            Arc::clone(&part),
            Some(k.clone().into_bytes()),
            Format::Json,
            None,
            JsonShown::default(),
        )
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
    let dir =
        LogDirs::open_dir(tmp.path(), config(), Default::default(), SegmentMode::Writable).unwrap();
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
    // Whole passes the reader made: the cleaner runs until there was one (on a loaded machine
    // twenty rounds can end before the reader's first pass does).
    let passes_read = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (log, done) = (Arc::clone(&log), Arc::clone(&done));
        let passes_read = Arc::clone(&passes_read);
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
                passes_read.fetch_add(1, Ordering::Relaxed);
            }
            reads
        })
    };
    let mut cleaner = Cleaner::new(1 << 16);
    let mut checkpoint = None;
    let mut passes = 0;
    let mut round = 0;
    while round < 20 || (passes_read.load(Ordering::Relaxed) == 0 && round < 100_000) {
        round += 1;
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

fn full_read(s: &topicfs::view::stream::Stream) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let chunk = s.read_at(out.len() as u64, 4096).unwrap();
        if chunk.is_empty() {
            return out;
        }
        out.extend(chunk);
    }
}

/// A log of 300 records with keys `k0`..`k4` in turn and values `value <offset>`, over several
/// segments.
fn keyed_log(tmp: &std::path::Path) -> (LogDirs, Arc<topicfs::storage::Log>) {
    let dir = LogDirs::open_dir(tmp, config(), Default::default(), SegmentMode::Writable).unwrap();
    dir.create_topic("t", 1).unwrap();
    let log = dir.log("t", 0).unwrap();
    for i in 0..300i64 {
        let value = format!("value {i}");
        log.append(&[rec(i, &format!("k{}", i % 5), Some(value.as_str()))]).unwrap();
    }
    (dir, log)
}

/// The values a pass leaves of [`keyed_log`] when the active segment starts at
/// `active_base`: each key's latest value before it, then every value from it to `end`.
fn compacted(active_base: i64, end: i64) -> Vec<String> {
    (active_base - 5..end).map(|i| format!("value {i}")).collect()
}

fn lines(bytes: &[u8]) -> Vec<String> {
    std::str::from_utf8(bytes).unwrap().lines().map(str::to_string).collect()
}

fn clean(log: &topicfs::storage::Log) -> i64 {
    let active_base = log.segment_list().last().unwrap().base_offset().0;
    let opts = CleanOptions { now: T0 + 1000, ..CleanOptions::default() };
    let stats = Cleaner::new(1 << 16).clean(log, &settings(), None, &opts).unwrap().unwrap();
    assert_eq!(stats.end_offset, Offset(active_base));
    active_base
}

/// A stream opened before a pass (values, JSON, raw) keeps its size and its positions: the bytes
/// it showed of the segments the pass replaced read as `ESTALE` (never other bytes), its tail
/// (the active segment) reads as before, and `tail -f` from its old end reads exactly the
/// records appended after the pass.
#[test]
fn a_pass_makes_an_open_streams_replaced_bytes_stale_and_its_tail_goes_on() {
    use topicfs::error::Error;
    use topicfs::view::spec::StreamSpec;
    use topicfs::view::stream::StreamRegistry;
    for name in ["0", "0.json", "0.raw"] {
        let tmp = tempfile::tempdir().unwrap();
        let (_dir, log) = keyed_log(tmp.path());
        let part: Arc<dyn PartitionSource> = log.clone();
        let reg = StreamRegistry::new();
        let spec = StreamSpec::parse_by_offset(name).unwrap();
        let old = reg.open(Arc::clone(&part), &spec, 0).unwrap();
        let before = full_read(&old);
        let size = old.size().unwrap();
        assert_eq!(size, before.len() as u64);
        clean(&log);
        // No stat, no sync: the read itself notices the pass.
        let head = old.read_at(0, 200);
        assert!(matches!(head, Err(Error::StaleHandle)), "{name}: {head:?}");
        assert_eq!(old.size().unwrap(), size, "{name}: the size does not shrink");
        assert!(matches!(old.read_at(0, 200), Err(Error::StaleHandle)), "{name}");
        // Every byte still readable is the byte shown before.
        let mut at = 0u64;
        let mut readable = 0;
        while at < size {
            match old.read_at(at, 10) {
                Ok(b) => {
                    assert_eq!(b[..], before[at as usize..at as usize + b.len()], "{name} @{at}");
                    readable += b.len();
                    at += b.len().max(1) as u64;
                }
                Err(Error::StaleHandle) => at += 10,
                Err(e) => panic!("{name} @{at}: {e}"),
            }
        }
        assert!(readable > 0, "{name}: the active segment's bytes are still readable");
        let tail = old.read_at(size - 10, 10).unwrap();
        assert_eq!(tail, before[before.len() - 10..]);
        // tail -f: new records appear after the old end, exactly.
        for i in 300..320i64 {
            let value = format!("value {i}");
            log.append(&[rec(i, &format!("k{}", i % 5), Some(value.as_str()))]).unwrap();
        }
        let more = old.read_at(size, 1 << 20).unwrap();
        let fresh_all = StreamRegistry::new()
            .open(
                Arc::clone(&part),
                &StreamSpec::parse_by_offset(&name.replace('0', "300")).unwrap(),
                0,
            )
            .unwrap();
        assert_eq!(more, full_read(&fresh_all), "{name}: tail -f reads the new records");
        assert_eq!(old.size().unwrap(), size + more.len() as u64);
        if name == "0" {
            assert_eq!(lines(&more), (300..320).map(|i| format!("value {i}")).collect::<Vec<_>>());
        }
    }
}

/// A stream opened after a pass, on the same registry (whose shared index had rendered the
/// replaced segments) or on a new one, at the log start or inside the compacted part, reads
/// exactly the compacted log; with a segment cache and entries beside the segments that
/// summarized the old segments too (the pass removes the entries of the segments it replaced).
#[test]
fn a_stream_opened_after_a_pass_reads_exactly_the_compacted_log() {
    use topicfs::storage::cache::{CacheSettings, SegmentCache};
    use topicfs::view::spec::StreamSpec;
    use topicfs::view::stream::StreamRegistry;
    let tmp = tempfile::tempdir().unwrap();
    let (dir, log) = keyed_log(tmp.path());
    let beside_entries = || -> Vec<String> {
        dir.dirs()[0].beside_segments().flush();
        let mut v: Vec<String> = std::fs::read_dir(tmp.path().join("t-0"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.contains(".topicfs-"))
            .collect();
        v.sort();
        v
    };
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(SegmentCache::open(&CacheSettings {
        dir: Some(cache_dir.path().to_path_buf()),
        max_bytes: 1 << 24,
    }));
    log.set_cache(Arc::clone(&cache));
    let part: Arc<dyn PartitionSource> = log.clone();
    let reg = StreamRegistry::new();
    let open = |reg: &StreamRegistry, name: &str| {
        reg.open(Arc::clone(&part), &StreamSpec::parse_by_offset(name).unwrap(), 0).unwrap()
    };
    // The shared indexes render every segment (and the cache stores their renderings).
    let old = open(&reg, "0");
    let old_json = open(&reg, "0.json");
    assert_eq!(lines(&full_read(&old)).len(), 300);
    assert_eq!(offsets_of_json(&full_read(&old_json)).len(), 300);
    cache.flush();
    let before = beside_entries();
    assert!(
        before.iter().filter(|n| n.ends_with(".topicfs-render")).count() > 2,
        "the renderings of the old segments are kept beside them: {before:?}"
    );
    let active_base = clean(&log);
    // The entries of every segment the pass replaced are gone with it.
    let bases: Vec<String> =
        log.segment_list().iter().map(|s| format!("{:020}", s.base_offset().0)).collect();
    for name in beside_entries() {
        let base = name.split('.').next().unwrap().to_string();
        assert!(bases.contains(&base), "{name} outlived its segment");
        assert!(
            !before.contains(&name) || base == bases[bases.len() - 1],
            "{name} survived the pass"
        );
    }
    let want = compacted(active_base, 300);
    for reg in [&reg, &StreamRegistry::new()] {
        assert_eq!(lines(&full_read(&open(reg, "0"))), want);
        let json = full_read(&open(reg, "0.json"));
        let offsets: Vec<i64> = (active_base - 5..300).collect();
        assert_eq!(offsets_of_json(&json), offsets);
        // Inside the compacted part: from the first record kept at or after the start.
        let mid = active_base - 3;
        let from_mid: Vec<String> = (mid..300).map(|i| format!("value {i}")).collect();
        assert_eq!(lines(&full_read(&open(reg, &mid.to_string()))), from_mid);
        assert!(active_base > 12);
        assert_eq!(lines(&full_read(&open(reg, "7"))), want);
    }
    // The stream opened before still reads its tail, and the new one its whole log.
    let size = old.size().unwrap();
    assert!(old.read_at(size - 10, 10).is_ok());
}

/// When a pass replaces the segment the render index stopped in (the log rolled after the
/// last read, and the pass cleaned the segment that was active then), the index is rebuilt:
/// the stream opened before is stale as a whole, and reopening it reads the compacted log.
#[test]
fn a_pass_replacing_the_segment_a_stream_stopped_in_makes_the_stream_stale() {
    use topicfs::error::Error;
    use topicfs::view::spec::StreamSpec;
    use topicfs::view::stream::StreamRegistry;
    let tmp = tempfile::tempdir().unwrap();
    let (_dir, log) = keyed_log(tmp.path());
    let part: Arc<dyn PartitionSource> = log.clone();
    let reg = StreamRegistry::new();
    let spec = StreamSpec::parse_by_offset("0").unwrap();
    let old = reg.open(Arc::clone(&part), &spec, 0).unwrap();
    let size = full_read(&old).len() as u64;
    let segments = log.segment_list().len();
    let mut i = 300i64;
    while log.segment_list().len() == segments {
        let value = format!("value {i}");
        log.append(&[rec(i, &format!("k{}", i % 5), Some(value.as_str()))]).unwrap();
        i += 1;
    }
    clean(&log);
    assert!(matches!(old.read_at(size - 10, 10), Err(Error::StaleHandle)));
    assert!(matches!(old.read_at(0, 10), Err(Error::StaleHandle)));
    let fresh = reg.open(Arc::clone(&part), &spec, 0).unwrap();
    let got = lines(&full_read(&fresh));
    let fresh_reg = StreamRegistry::new().open(Arc::clone(&part), &spec, 0).unwrap();
    assert_eq!(got, lines(&full_read(&fresh_reg)));
    assert_eq!(got.last().unwrap(), &format!("value {}", i - 1));
    assert!(got.len() < i as usize, "compacted: {} of {i}", got.len());
}

/// A pass that removes the first record (an older value of a key) without moving the log start
/// offset: the partition's first timestamp (`info`'s `first_timestamp`) is then the first kept
/// record's, not the removed one's remembered from before the pass.
#[test]
fn the_first_timestamp_follows_a_pass_that_removes_the_first_record() {
    let tmp = tempfile::tempdir().unwrap();
    let dir =
        LogDirs::open_dir(tmp.path(), config(), Default::default(), SegmentMode::Writable).unwrap();
    dir.create_topic("t", 1).unwrap();
    let log = dir.log("t", 0).unwrap();
    for i in 0..120i64 {
        // Key "a" first (offset 0), then again at 60 (a sealed segment); the others once each.
        let key = if i == 0 || i == 60 { "a".to_string() } else { format!("k{i}") };
        log.append(&[rec(i, &key, Some("some value to fill segments"))]).unwrap();
    }
    let part: Arc<dyn PartitionSource> = log.clone();
    assert_eq!(part.summary().unwrap().first_timestamp, Some(T0));
    let opts = CleanOptions { now: T0 + 10_000, ..CleanOptions::default() };
    Cleaner::new(1 << 16).clean(&log, &settings(), None, &opts).unwrap().unwrap();
    let summary = part.summary().unwrap();
    assert_eq!(summary.log_start_offset, Offset(0), "the log start did not move");
    assert_eq!(summary.first_timestamp, Some(T0 + 1), "offset 0 was removed by the pass");
}
