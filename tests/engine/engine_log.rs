//! Log engine invariants, through the public storage API on real files in temporary dirs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use topicfs::Error;
use topicfs::format::{NewRecord, Offset, Timestamp, peek_entry};
use topicfs::source::SegmentFileKind;
use topicfs::source::{OffsetQuery, TopicSource};
use topicfs::storage::{Log, LogConfig, LogDirs, SegmentMode};

use crate::log_fixture::{read_records, record, small_config};

fn open(dir: &Path, config: &LogConfig) -> LogDirs {
    LogDirs::open_dir(dir, config.clone(), Default::default(), SegmentMode::Writable).unwrap()
}

fn open_log(dir: &Path, config: &LogConfig) -> (LogDirs, Arc<Log>) {
    let d = open(dir, config);
    if d.log("t", 0).is_err() {
        d.create_topic("t", 1).unwrap();
    }
    let log = d.log("t", 0).unwrap();
    (d, log)
}

/// Every record readable from `from`, as (offset, timestamp, value).
fn read_all(log: &Log, from: Offset) -> Vec<(i64, Timestamp, String)> {
    read_records(log, from, 4096)
        .into_iter()
        .map(|(o, ts, v)| (o, ts, String::from_utf8(v).unwrap()))
        .collect()
}

fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().unwrap().ends_with(suffix))
        .collect();
    v.sort();
    v
}

fn append_n(log: &Log, n: usize, ts: Timestamp, size: usize) {
    for i in 0..n {
        log.append(&[record(ts + i as i64, &"x".repeat(size))]).unwrap();
    }
}

#[test]
fn appends_get_consecutive_offsets_and_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let (_d, log) = open_log(tmp.path(), &small_config());
    let info = log.append(&[record(1000, "a"), record(1001, "b")]).unwrap();
    assert_eq!((info.first_offset, info.last_offset, info.batches), (Offset(0), Offset(1), 1));
    let info = log.append(&[record(1002, "c")]).unwrap();
    assert_eq!(info.first_offset, Offset(2));
    assert_eq!(log.log_end_offset(), Offset(3));
    let all = read_all(&log, Offset(0));
    assert_eq!(all.iter().map(|r| r.2.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(read_all(&log, Offset(1))[0].0, 1);
    assert!(read_all(&log, Offset(3)).is_empty(), "log end offset gives an empty read");
    assert!(matches!(log.seek(Offset(4)), Err(Error::OffsetOutOfRange { .. })));
}

#[test]
fn missing_timestamps_are_filled_with_now() {
    let tmp = tempfile::tempdir().unwrap();
    let (_d, log) = open_log(tmp.path(), &small_config());
    let before =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as i64;
    log.append(&[record(-1, "a")]).unwrap();
    let ts = read_all(&log, Offset(0))[0].1;
    assert!(ts >= before, "{ts} < {before}");
}

#[test]
fn roll_on_segment_bytes_keeps_every_segment_within_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let (_d, log) = open_log(tmp.path(), &small_config());
    append_n(&log, 40, 1000, 100);
    let segments = log.segment_list();
    assert!(segments.len() > 3, "{} segments", segments.len());
    for s in &segments {
        assert!(s.size() <= 1024, "segment {} has {} bytes", s.base_offset(), s.size());
    }
    // Rolled segments have trimmed indexes: exactly their entries, no zero tail.
    for s in &segments[..segments.len() - 1] {
        let idx_len = std::fs::metadata(s.file_path(".index")).unwrap().len();
        let entries = s.with_offset_index(|i| i.entries()).unwrap() as u64;
        assert_eq!(idx_len, entries * 8);
        let t_len = std::fs::metadata(s.file_path(".timeindex")).unwrap().len();
        let (ts, _) = s.with_time_index(|i| i.last_entry()).unwrap();
        assert_eq!(t_len % 12, 0);
        assert_eq!(Some(ts), s.max_timestamp_so_far().unwrap().map(|m| m.0), "final time entry");
    }
    // The active segment's indexes stay preallocated.
    let active = segments.last().unwrap();
    assert_eq!(std::fs::metadata(active.file_path(".index")).unwrap().len(), 4096);
    assert_eq!(read_all(&log, Offset(0)).len(), 40);
}

#[test]
fn roll_on_full_index() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = small_config();
    c.set("segment.bytes", "1000000").unwrap();
    c.set("index.interval.bytes", "0").unwrap();
    c.set("segment.index.bytes", "36").unwrap(); // 4 offset slots, 3 time slots (1 reserved)
    let (_d, log) = open_log(tmp.path(), &c);
    append_n(&log, 20, 1000, 10);
    let segments = log.segment_list();
    assert!(segments.len() >= 5, "{} segments", segments.len());
    for s in &segments {
        let entries = s.with_offset_index(|i| i.entries()).unwrap();
        assert!(entries <= 4);
    }
    assert_eq!(read_all(&log, Offset(0)).len(), 20);
}

#[test]
fn roll_on_segment_ms_uses_record_time() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = small_config();
    c.set("segment.bytes", "1000000").unwrap();
    c.set("segment.ms", "1000").unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    log.append(&[record(10_000, "a")]).unwrap();
    log.append(&[record(10_900, "b")]).unwrap();
    assert_eq!(log.segment_list().len(), 1);
    log.append(&[record(11_001, "c")]).unwrap();
    let bases: Vec<Offset> = log.segment_list().iter().map(|s| s.base_offset()).collect();
    assert_eq!(bases, [Offset(0), Offset(2)]);
}

#[test]
fn a_record_larger_than_segment_bytes_is_refused_naming_segment_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = small_config();
    c.set("segment.bytes", "200").unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    let err = log.append(&[record(1, &"x".repeat(300))]).unwrap_err();
    assert!(
        matches!(err, Error::RecordTooLarge { setting: "segment.bytes", max: 200, .. }),
        "{err}"
    );
    assert!(err.to_string().ends_with("exceeds segment.bytes 200"), "{err}");
    // With segment.bytes the larger, max.message.bytes is named.
    let tmp = tempfile::tempdir().unwrap();
    let mut c = small_config();
    c.set("max.message.bytes", "150").unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    let err = log.append(&[record(1, &"x".repeat(300))]).unwrap_err();
    assert!(err.to_string().ends_with("exceeds max.message.bytes 150"), "{err}");
}

#[test]
fn max_message_bytes_refusal_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = small_config();
    c.set("max.message.bytes", "200").unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    log.append(&[record(1, "ok")]).unwrap();
    let size = log.summary().unwrap().size_bytes.unwrap();
    let err = log.append(&[record(2, "small"), record(3, &"x".repeat(500))]).unwrap_err();
    assert!(matches!(err, Error::RecordTooLarge { max: 200, .. }), "{err}");
    assert_eq!(log.log_end_offset(), Offset(1));
    assert_eq!(log.summary().unwrap().size_bytes.unwrap(), size);
}

#[test]
fn append_splits_into_batches_only_when_one_exceeds_max_message_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = small_config();
    c.set("max.message.bytes", "400").unwrap();
    c.set("segment.bytes", "1000000").unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    let one = log.append(&[record(1, "a"), record(2, "b")]).unwrap();
    assert_eq!(one.batches, 1);
    let records: Vec<NewRecord> = (0..10).map(|i| record(i, &"v".repeat(100))).collect();
    let info = log.append(&records).unwrap();
    assert!(info.batches > 1);
    assert_eq!((info.first_offset, info.last_offset), (Offset(2), Offset(11)));
    let offsets: Vec<i64> = read_all(&log, Offset(0)).iter().map(|r| r.0).collect();
    assert_eq!(offsets, (0..12).collect::<Vec<_>>());
    for s in log.segment_list() {
        let mut pos = 0;
        let mut buf = vec![0u8; s.size() as usize];
        s.read_log_bytes(0, &mut buf).unwrap();
        while let Some(h) = peek_entry(&buf[pos..]).unwrap() {
            assert!(h.total_size() <= 400);
            pos += h.total_size();
        }
    }
}

#[test]
fn timestamp_lookup_is_first_record_in_log_order_and_later_than_all_is_log_end() {
    let tmp = tempfile::tempdir().unwrap();
    let (_d, log) = open_log(tmp.path(), &small_config());
    // Out-of-order CreateTime: the answer is the first offset whose timestamp is >= target.
    for (i, ts) in [100, 300, 200, 500, 400, 600].iter().enumerate() {
        log.append(&[record(*ts, &format!("r{i}"))]).unwrap();
    }
    let q = |t| log.offset_for(OffsetQuery::Timestamp(t)).unwrap();
    assert_eq!(q(0), Offset(0));
    assert_eq!(q(100), Offset(0));
    assert_eq!(q(150), Offset(1));
    assert_eq!(q(250), Offset(1));
    assert_eq!(q(301), Offset(3));
    assert_eq!(q(550), Offset(5));
    assert_eq!(q(601), Offset(6), "later than every record: the log end offset");
    assert_eq!(log.offset_for(OffsetQuery::Earliest).unwrap(), Offset(0));
    assert_eq!(log.offset_for(OffsetQuery::Latest).unwrap(), Offset(6));
}

#[test]
fn max_timestamp_query_returns_the_exact_first_record() {
    let tmp = tempfile::tempdir().unwrap();
    let (_d, log) = open_log(tmp.path(), &small_config());
    assert_eq!(log.offset_for(OffsetQuery::MaxTimestamp).unwrap(), Offset(0), "empty: log end");
    log.append(&[record(5, "a"), record(7, "b")]).unwrap();
    log.append(&[record(5, "c"), record(9, "d"), record(3, "e"), record(9, "f")]).unwrap();
    log.append(&[record(8, "g")]).unwrap();
    assert_eq!(log.offset_for(OffsetQuery::MaxTimestamp).unwrap(), Offset(3));
}

#[test]
fn log_append_time_stamps_every_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = small_config();
    c.set("message.timestamp.type", "LogAppendTime").unwrap();
    c.set("compression.type", "gzip").unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    log.append(&[record(5, "a"), record(6, "b")]).unwrap();
    let all = read_all(&log, Offset(0));
    assert!(all[0].1 > 1_000_000_000_000 && all[0].1 == all[1].1, "{all:?}");
}

/// Topic `t` in `dir` under [`small_config`] with the retention `setting`, and `records`
/// 100-byte records with timestamps in 1970 appended (several segments).
fn retained_log(
    dir: &Path,
    setting: (&str, &str),
    records: usize,
) -> (LogConfig, LogDirs, Arc<Log>) {
    let mut c = small_config();
    c.set(setting.0, setting.1).unwrap();
    let d = open(dir, &c);
    d.create_topic("t", 1).unwrap();
    let log = d.log("t", 0).unwrap();
    append_n(&log, records, 1000, 100);
    (c, d, log)
}

#[test]
fn retention_by_time_never_deletes_the_active_segment_and_advances_log_start() {
    let tmp = tempfile::tempdir().unwrap();
    // Timestamps in 1970: all old.
    let (c, d, log) = retained_log(tmp.path(), ("retention.ms", "1000"), 30);
    let before = log.segment_list();
    assert!(before.len() > 2);
    let deleted = d.enforce_retention().unwrap();
    assert_eq!(deleted, before.len() - 1);
    let after = log.segment_list();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].base_offset(), before.last().unwrap().base_offset());
    assert_eq!(log.log_start_offset(), after[0].base_offset());
    assert!(!before[0].log_path().exists());
    assert_eq!(files_with_suffix(log.dir(), ".log").len(), 1);
    // Kafka checkpoints a log start offset only when it lies above the first segment's base
    // offset; here it equals it, and a reopen derives it from the first segment.
    let text = std::fs::read_to_string(tmp.path().join("log-start-offset-checkpoint")).unwrap();
    assert_eq!(text, "0\n0\n");
    let start = after[0].base_offset().0;
    assert!(matches!(log.seek(Offset(0)), Err(Error::OffsetOutOfRange { .. })));
    assert_eq!(read_all(&log, log.log_start_offset()).len() as i64, 30 - start);
    d.shutdown().unwrap();
    drop((log, d));
    let d = open(tmp.path(), &c);
    assert_eq!(d.log("t", 0).unwrap().log_start_offset(), Offset(start));
}

#[test]
fn retention_by_bytes_deletes_oldest_segments_while_over_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, d, log) = retained_log(tmp.path(), ("retention.bytes", "2500"), 40);
    d.enforce_retention().unwrap();
    let total: u64 = log.segment_list().iter().map(|s| s.size()).sum();
    let first = log.segment_list()[0].size();
    assert!(total >= 2500 || log.segment_list().len() == 1);
    assert!(total - first < 2500, "deleting one more would still leave >= retention.bytes");
    assert_eq!(log.log_start_offset(), log.segment_list()[0].base_offset());
}

#[test]
fn clean_shutdown_reopens_without_recovery_and_removes_the_marker() {
    let tmp = tempfile::tempdir().unwrap();
    let c = small_config();
    {
        let (d, log) = open_log(tmp.path(), &c);
        append_n(&log, 25, 1000, 100);
        d.shutdown().unwrap();
        assert!(tmp.path().join(".kafka_cleanshutdown").exists());
        // Clean close trims the active indexes too.
        let active = log.segment_list().last().unwrap().clone();
        let entries = active.with_offset_index(|i| i.entries()).unwrap() as u64;
        assert_eq!(std::fs::metadata(active.file_path(".index")).unwrap().len(), entries * 8);
    }
    let (d, log) = open_log(tmp.path(), &c);
    assert!(d.dirs()[0].had_clean_shutdown());
    assert!(!tmp.path().join(".kafka_cleanshutdown").exists(), "marker deleted at open");
    assert_eq!(log.recovered_segments(), 0, "no segment re-read after a clean shutdown");
    assert_eq!(log.log_end_offset(), Offset(25));
    assert_eq!(read_all(&log, Offset(0)).len(), 25);
    log.append(&[record(5000, "more")]).unwrap();
    assert_eq!(read_all(&log, Offset(25))[0].2, "more");
}

#[test]
fn torn_tail_is_truncated_on_recovery() {
    let tmp = tempfile::tempdir().unwrap();
    let c = small_config();
    let (log_path, good_size) = {
        let (_d, log) = open_log(tmp.path(), &c);
        append_n(&log, 5, 1000, 50);
        let active = log.segment_list().last().unwrap().clone();
        (active.log_path().to_path_buf(), active.size())
        // dropped without shutdown: an unclean stop
    };
    // Half of a batch at the end, as a crash mid-write leaves it.
    let bytes = std::fs::read(&log_path).unwrap();
    let mut torn = bytes.clone();
    torn.extend_from_slice(&bytes[..40]);
    std::fs::write(&log_path, &torn).unwrap();
    let (d, log) = open_log(tmp.path(), &c);
    assert!(!d.dirs()[0].had_clean_shutdown());
    assert!(log.recovered_segments() > 0);
    assert_eq!(std::fs::metadata(&log_path).unwrap().len(), good_size);
    assert_eq!(log.log_end_offset(), Offset(5));
    log.append(&[record(9, "after")]).unwrap();
    assert_eq!(read_all(&log, Offset(0)).len(), 6);
}

#[test]
fn crc_corrupt_batch_truncates_its_segment_and_deletes_later_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let c = small_config();
    let (second, third) = {
        let (_d, log) = open_log(tmp.path(), &c);
        append_n(&log, 30, 1000, 100);
        let segs = log.segment_list();
        assert!(segs.len() >= 3);
        (segs[1].clone(), segs[2].clone())
    };
    // Flip a byte inside the second batch of the second segment.
    let path = second.log_path().to_path_buf();
    let mut bytes = std::fs::read(&path).unwrap();
    let first_len = peek_entry(&bytes).unwrap().unwrap().total_size();
    bytes[first_len + 70] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), first_len as u64);
    assert!(!third.log_path().exists(), "later segments are deleted");
    assert_eq!(log.log_end_offset(), second.base_offset().plus(1));
    assert_eq!(read_all(&log, Offset(0)).len() as i64, log.log_end_offset().0);
}

/// Flips a byte at `at` of `path` in place (the same file, as a disk fault would).
fn flip_byte(path: &Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0xff], at).unwrap();
}

/// A batch's CRC is checked by the first read of it and not again by the same open log where
/// its bytes cannot change (a sealed segment, and the active one of a writable log, which only
/// this log appends to); on the active segment of a read-only log (a broker may truncate and
/// write other batches in place) once per position and stored CRC: another batch there is
/// checked anew; a log opened anew checks again.
#[test]
fn batches_are_crc_checked_once_per_open_log_and_a_read_only_logs_active_segment_per_batch_written()
{
    let tmp = tempfile::tempdir().unwrap();
    let c = small_config();
    let (sealed, active) = {
        let (d, log) = open_log(tmp.path(), &c);
        append_n(&log, 30, 1000, 100);
        let segs = log.segment_list();
        assert!(segs.len() >= 3);
        let (sealed, active) = (segs[1].clone(), segs.last().unwrap().clone());
        assert_eq!(read_all(&log, Offset(0)).len(), 30, "every batch checked once");
        flip_byte(sealed.log_path(), 70);
        flip_byte(active.log_path(), 70);
        // Checked before the damage: served as stored, not checked again.
        for seg in [&sealed, &active] {
            assert!(log.read(&log.seek(seg.base_offset()).unwrap(), 4096).is_ok());
        }
        d.shutdown().unwrap();
        (sealed, active)
    };
    let damaged = |log: &Log, seg: &topicfs::storage::LogSegment| match log
        .read(&log.seek(seg.base_offset()).unwrap(), 4096)
    {
        Err(Error::Corrupt { file, position, .. }) => {
            assert_eq!(file.as_path(), seg.log_path());
            assert!(position < 100, "inside the first batch: {position}");
        }
        other => panic!("{}: damaged batch read as {other:?}", seg.log_path().display()),
    };
    // A log opened anew (read-only: no recovery) checks the sealed segment again.
    flip_byte(active.log_path(), 70);
    let d = LogDirs::open_dir(tmp.path(), c.clone(), Default::default(), SegmentMode::ReadOnly)
        .unwrap();
    let log = d.log("t", 0).unwrap();
    damaged(&log, &sealed);
    // A read-only log's active segment: a batch checked once is served as stored while the
    // same batch (size and stored CRC) is at its position...
    assert!(log.read(&log.seek(active.base_offset()).unwrap(), 4096).is_ok());
    flip_byte(active.log_path(), 70);
    assert!(log.read(&log.seek(active.base_offset()).unwrap(), 4096).is_ok());
    // ... and another batch written there (its stored CRC differs) is checked anew, at every
    // read until it passes.
    flip_byte(active.log_path(), 17);
    damaged(&log, &active);
    damaged(&log, &active);
    // Written again as it was: checked, then served.
    flip_byte(active.log_path(), 17);
    flip_byte(active.log_path(), 70);
    assert!(log.read(&log.seek(active.base_offset()).unwrap(), 4096).is_ok());
}

/// What a read-only log's active segment remembers of checked batches is bounded: past
/// `MAX_CHECKED_BATCHES` it starts again, so a batch read early is checked again once (here it
/// was damaged since, and the read says so); every read stays correct.
#[test]
fn a_read_only_active_segment_remembers_a_bounded_number_of_checked_batches() {
    use topicfs::storage::segment::MAX_CHECKED_BATCHES;
    let tmp = tempfile::tempdir().unwrap();
    let c = LogConfig::default();
    let n = MAX_CHECKED_BATCHES + 1000;
    {
        let (d, log) = open_log(tmp.path(), &c);
        append_n(&log, n, 1000, 10);
        d.shutdown().unwrap();
    }
    let d = LogDirs::open_dir(tmp.path(), c, Default::default(), SegmentMode::ReadOnly).unwrap();
    let log = d.log("t", 0).unwrap();
    let active = log.segment_list().last().unwrap().clone();
    assert_eq!(log.segment_list().len(), 1);
    assert!(log.read(&log.seek(Offset(0)).unwrap(), 4096).is_ok(), "the first batch checked");
    assert_eq!(read_all(&log, Offset(0)).len(), n);
    let remembered = active.remembered_checked_batches();
    assert!(remembered > 0 && remembered <= MAX_CHECKED_BATCHES, "{remembered}");
    // The first batch's body damaged in place: forgotten past the bound, so checked again.
    flip_byte(active.log_path(), 70);
    assert!(matches!(log.read(&log.seek(Offset(0)).unwrap(), 4096), Err(Error::Corrupt { .. })));
}

#[test]
fn missing_index_is_rebuilt_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let c = small_config();
    let sealed = {
        let (d, log) = open_log(tmp.path(), &c);
        append_n(&log, 30, 1000, 100);
        let sealed = log.segment_list()[1].clone();
        d.shutdown().unwrap();
        sealed
    };
    let index_path = sealed.file_path(".index");
    let original = std::fs::read(&index_path).unwrap();
    assert!(!original.is_empty());
    std::fs::remove_file(&index_path).unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    assert_eq!(std::fs::read(&index_path).unwrap(), original, "same entries rebuilt");
    let target = sealed.base_offset().plus(3);
    assert_eq!(read_all(&log, target)[0].0, target.0);
}

#[test]
fn unclean_stop_recovers_from_the_zero_filled_active_index() {
    let tmp = tempfile::tempdir().unwrap();
    let c = small_config();
    {
        let (_d, log) = open_log(tmp.path(), &c);
        append_n(&log, 7, 1000, 100);
    }
    let (_d, log) = open_log(tmp.path(), &c);
    assert_eq!(log.log_end_offset(), Offset(7));
    for o in 0..7 {
        assert_eq!(read_all(&log, Offset(o))[0].0, o);
    }
    assert_eq!(log.offset_for(OffsetQuery::Timestamp(1003)).unwrap(), Offset(3));
}

#[test]
fn a_corrupt_batch_fails_reads_that_hit_it_and_data_around_it_stays_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = small_config();
    c.set("segment.bytes", "1000000").unwrap();
    let (d, log) = open_log(tmp.path(), &c);
    append_n(&log, 6, 1000, 20);
    d.shutdown().unwrap();
    drop(log);
    drop(d);
    let path = tmp.path().join("t-0/00000000000000000000.log");
    let mut bytes = std::fs::read(&path).unwrap();
    let batch = peek_entry(&bytes).unwrap().unwrap().total_size();
    let corrupt_at = 2 * batch + 65; // inside the record bytes of offset 2
    bytes[corrupt_at] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let (_d, log) = open_log(tmp.path(), &c); // clean: no recovery, the damage stays
    let err = log.read(&log.seek(Offset(2)).unwrap(), 1 << 20).unwrap_err();
    match err {
        Error::Corrupt { file, position, .. } => {
            assert_eq!(file, path);
            assert!(position >= (2 * batch) as u64 && position < (3 * batch) as u64);
        }
        e => panic!("expected Corrupt, got {e}"),
    }
    // Before: a read from 0 stops before the bad batch; after: seek past it works.
    let chunk = log.read(&log.seek(Offset(0)).unwrap(), 1 << 20).unwrap();
    assert_eq!(chunk.bytes.len(), 2 * batch);
    assert_eq!(read_all(&log, Offset(3)).iter().map(|r| r.0).collect::<Vec<_>>(), [3, 4, 5]);
}

#[test]
fn second_open_of_a_locked_dir_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let _d = open(tmp.path(), &small_config());
    let err =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap_err();
    assert!(matches!(err, Error::Locked(_)), "{err}");
    // Read-only opens take no lock.
    LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::ReadOnly)
        .unwrap();
}

#[test]
fn deleting_the_lock_file_by_hand_does_not_let_a_second_writer_in() {
    let tmp = tempfile::tempdir().unwrap();
    let d = open(tmp.path(), &small_config());
    std::fs::remove_file(tmp.path().join(".lock")).unwrap();
    // The directory itself is locked too.
    let err =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap_err();
    assert!(matches!(err, Error::Locked(_)), "{err}");
    d.shutdown().unwrap();
    drop(d);
    // Released at shutdown: the next writer gets both locks (and a new `.lock`).
    let again = open(tmp.path(), &small_config());
    assert!(tmp.path().join(".lock").is_file());
    again.shutdown().unwrap();
}

#[test]
fn meta_properties_is_created_as_version_1() {
    let tmp = tempfile::tempdir().unwrap();
    let d = open(tmp.path(), &small_config());
    let text = std::fs::read_to_string(tmp.path().join("meta.properties")).unwrap();
    assert!(text.contains("version=1") && text.contains("node.id=0"), "{text}");
    let dir = &d.dirs()[0];
    let id = dir.meta_properties().get("cluster.id").unwrap();
    assert_eq!(id.len(), 22);
}

#[test]
fn topic_and_partition_creation_follow_kafkas_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let d = open(tmp.path(), &small_config());
    assert!(matches!(d.create_topic("bad/name", 1), Err(Error::InvalidTopicName { .. })));
    assert!(matches!(d.create_topic("..", 1), Err(Error::InvalidTopicName { .. })));
    d.create_topic("my.topic-x", 2).unwrap();
    assert!(matches!(d.create_topic("my.topic-x", 1), Err(Error::AlreadyExists(_))));
    assert!(matches!(d.create_partition("my.topic-x", 1), Err(Error::AlreadyExists(_))));
    assert!(matches!(d.create_partition("my.topic-x", 3), Err(Error::InvalidInput(_))));
    assert!(matches!(d.create_partition("nope", 0), Err(Error::NotFound(_))));
    d.create_partition("my.topic-x", 2).unwrap();
    assert_eq!(TopicSource::partitions(&d, "my.topic-x").unwrap(), [0, 1, 2]);
    assert!(tmp.path().join("my.topic-x-2/00000000000000000000.log").exists());
    assert_eq!(d.topics().unwrap(), ["my.topic-x"]);
}

#[test]
fn special_and_foreign_directories_are_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    for name in [
        "t-0.0123456789abcdef0123456789abcdef-delete",
        "t-1.0123456789abcdef0123456789abcdef-future",
        "t-2.0123456789abcdef0123456789abcdef-stray",
        "remote-log-index-cache",
        "__cluster_metadata-0",
        "not a partition",
    ] {
        std::fs::create_dir(tmp.path().join(name)).unwrap();
    }
    let d = open(tmp.path(), &small_config());
    assert!(d.topics().unwrap().is_empty());
}

#[test]
fn temporary_files_are_cleaned_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let c = small_config();
    let dir = {
        let (d, log) = open_log(tmp.path(), &c);
        append_n(&log, 3, 1000, 10);
        d.shutdown().unwrap();
        log.dir().to_path_buf()
    };
    std::fs::write(dir.join("00000000000000000100.log.deleted"), b"x").unwrap();
    std::fs::write(dir.join("00000000000000000100.index.cleaned"), b"x").unwrap();
    std::fs::write(dir.join("00000000000000000200.index"), b"orphan").unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    assert!(!dir.join("00000000000000000100.log.deleted").exists());
    assert!(!dir.join("00000000000000000100.index.cleaned").exists());
    assert!(!dir.join("00000000000000000200.index").exists(), "orphaned index removed");
    assert_eq!(read_all(&log, Offset(0)).len(), 3);
}

fn hash_tree(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                out.insert(e.path(), (Vec::new(), 0));
                stack.push(e.path());
            } else {
                let mtime = meta
                    .modified()
                    .unwrap()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64;
                out.insert(e.path(), (std::fs::read(e.path()).unwrap(), mtime));
            }
        }
    }
    out
}

#[test]
fn read_only_open_leaves_the_tree_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let c = small_config();
    let active_log = {
        let (d, log) = open_log(tmp.path(), &c);
        d.create_topic("u", 2).unwrap();
        append_n(&log, 30, 1000, 100);
        log.segment_list().last().unwrap().log_path().to_path_buf()
        // unclean stop: preallocated active indexes, recovery needed
    };
    // A torn tail and a missing index, which a writable open would repair.
    let mut bytes = std::fs::read(&active_log).unwrap();
    let good = bytes.len();
    bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 99, 0, 0, 1, 0, 0, 0, 0, 0, 2, 1, 2]);
    std::fs::write(&active_log, &bytes).unwrap();
    let first_index = tmp.path().join("t-0/00000000000000000000.index");
    std::fs::remove_file(&first_index).unwrap();
    let before = hash_tree(tmp.path());

    let d = LogDirs::open_dir(tmp.path(), c.clone(), Default::default(), SegmentMode::ReadOnly)
        .unwrap();
    assert!(d.is_read_only());
    let log = d.log("t", 0).unwrap();
    assert_eq!(log.log_end_offset(), Offset(30), "the torn tail is hidden");
    assert_eq!(read_all(&log, Offset(0)).len(), 30);
    assert_eq!(read_all(&log, Offset(2))[0].0, 2);
    assert_eq!(log.offset_for(OffsetQuery::Timestamp(1017)).unwrap(), Offset(17));
    assert_eq!(log.offset_for(OffsetQuery::MaxTimestamp).unwrap(), Offset(29));
    let summary = log.summary().unwrap();
    assert_eq!(summary.first_timestamp, Some(1000));
    assert!(log.segment_summaries().unwrap().len() > 2);
    let active = log.segment_list().last().unwrap().clone();
    assert_eq!(active.size() as usize, good);
    let mut buf = vec![0u8; 100];
    let n =
        log.read_segment_file(active.base_offset(), SegmentFileKind::Index, 0, &mut buf).unwrap();
    assert_eq!(n % 8, 0, "index shown without its zero tail");
    assert!(matches!(log.append(&[record(1, "x")]), Err(Error::ReadOnly)));
    assert!(matches!(d.create_topic("v", 1), Err(Error::ReadOnly)));
    d.enforce_retention().unwrap();
    d.shutdown().unwrap();
    drop(log);
    drop(d);
    assert_eq!(hash_tree(tmp.path()), before, "the read-only open changed the tree");
}

#[test]
fn readers_never_see_a_partial_batch_while_a_writer_appends() {
    let tmp = tempfile::tempdir().unwrap();
    let (_d, log) = open_log(tmp.path(), &small_config());
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            for i in 0..300 {
                log.append(&[record(i, &"w".repeat(i as usize % 90)), record(i, "z")]).unwrap();
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                let mut seen = 0;
                while seen < 600 {
                    let end = log.log_end_offset();
                    let records = read_all(&log, Offset(0));
                    assert!(records.len() as i64 >= end.0);
                    for (i, r) in records.iter().enumerate() {
                        assert_eq!(r.0, i as i64);
                    }
                    seen = records.len();
                }
            });
        }
        writer.join().unwrap();
    });
}

#[test]
fn partition_source_reports_segments_and_hides_the_index_zero_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, _log) = open_log(tmp.path(), &small_config());
    let p = d.partition("t", 0).unwrap();
    for i in 0..15 {
        p.append(topicfs::source::Records::Owned(&[record(1000 + i, &"y".repeat(100))])).unwrap();
    }
    p.sync().unwrap();
    let segs = p.segment_files().unwrap().segments().unwrap();
    let active = segs.last().unwrap();
    assert!(active.is_active && !segs[0].is_active);
    let entries = active.index_size / 8;
    assert!(active.index_size < 4096, "valid size, not the preallocated 4096");
    let mut buf = vec![0u8; 8192];
    let n = p
        .segment_files()
        .unwrap()
        .read_segment_file(active.base_offset, SegmentFileKind::Index, 0, &mut buf)
        .unwrap();
    assert_eq!(n as u64, entries * 8);
    let summary = p.summary().unwrap();
    assert_eq!(summary.log_end_offset, Offset(15));
    assert_eq!(summary.max_timestamp, Some(1014));
    assert_eq!(summary.segment_count, Some(segs.len()));
    let text = std::fs::read_to_string(tmp.path().join("recovery-point-offset-checkpoint"));
    // Checkpoints are written at open and shutdown; the recovery point itself moved on sync.
    assert!(text.is_ok());
    assert_eq!(d.log("t", 0).unwrap().recovery_point(), Offset(15));
}

#[test]
fn read_only_refresh_follows_a_live_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = small_config();
    c.set("retention.ms", "1000").unwrap();
    let (writer_dir, writer) = open_log(tmp.path(), &c);
    append_n(&writer, 3, 1000, 100);
    let reader_dir =
        LogDirs::open_dir(tmp.path(), c.clone(), Default::default(), SegmentMode::ReadOnly)
            .unwrap();
    let reader = reader_dir.log("t", 0).unwrap();
    assert_eq!(reader.log_end_offset(), Offset(3));

    // New batches at the end of the active segment.
    append_n(&writer, 2, 2000, 100);
    assert!(reader.refresh().unwrap());
    assert_eq!(reader.log_end_offset(), Offset(5));
    assert_eq!(read_all(&reader, Offset(3))[0].1, 2000);
    assert!(!reader.refresh().unwrap(), "nothing new");

    // The writer rolls a few times, then retention deletes old segments.
    append_n(&writer, 20, 3000, 100);
    assert!(reader.refresh().unwrap());
    assert_eq!(reader.log_end_offset(), Offset(25));
    assert_eq!(reader.segment_list().len(), writer.segment_list().len());
    assert_eq!(read_all(&reader, Offset(0)).len(), 25);
    assert_eq!(reader.offset_for(OffsetQuery::Timestamp(3005)).unwrap(), Offset(10));
    writer_dir.enforce_retention().unwrap();
    assert!(reader.refresh().unwrap());
    assert_eq!(reader.log_start_offset(), writer.log_start_offset());
    assert_eq!(reader.segment_list().len(), 1);
    let start = reader.log_start_offset().0;
    assert_eq!(read_all(&reader, reader.log_start_offset()).len() as i64, 25 - start);
}

#[test]
fn clean_open_trusts_sealed_segments_without_reading_them() {
    let tmp = tempfile::tempdir().unwrap();
    let c = small_config();
    let sealed = {
        let (d, log) = open_log(tmp.path(), &c);
        append_n(&log, 25, 1000, 100);
        d.shutdown().unwrap();
        log.segment_list()[0].log_path().to_path_buf()
    };
    // Damage that recovery would truncate: after a clean shutdown nobody looks.
    let mut bytes = std::fs::read(&sealed).unwrap();
    let len = bytes.len();
    bytes[len - 5] ^= 0xff;
    std::fs::write(&sealed, &bytes).unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    assert_eq!(log.recovered_segments(), 0);
    assert_eq!(std::fs::read(&sealed).unwrap(), bytes, "the sealed segment was not rewritten");
    assert_eq!(log.log_end_offset(), Offset(25));
}

#[test]
fn per_topic_overrides_apply_to_their_topic_only() {
    let tmp = tempfile::tempdir().unwrap();
    let mut big = small_config();
    big.set("max.message.bytes", "100000").unwrap();
    let mut tiny = small_config();
    tiny.set("max.message.bytes", "150").unwrap();
    let overrides = std::collections::HashMap::from([("tiny".to_string(), tiny)]);
    let d = LogDirs::open_dir(tmp.path(), big, overrides, topicfs::storage::SegmentMode::Writable)
        .unwrap();
    d.create_topic("tiny", 1).unwrap();
    d.create_topic("big", 1).unwrap();
    let value = "x".repeat(200);
    assert!(matches!(
        d.log("tiny", 0).unwrap().append(&[record(1, &value)]),
        Err(Error::RecordTooLarge { .. })
    ));
    d.log("big", 0).unwrap().append(&[record(1, &value)]).unwrap();
}

#[test]
fn aborted_transactions_are_read_from_the_txn_index() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, log) = open_log(tmp.path(), &small_config());
    append_n(&log, 3, 1000, 10);
    d.shutdown().unwrap();
    drop((log, d));
    let mut txn = Vec::new();
    for (pid, first, last, lso) in [(7i64, 0i64, 1i64, 0i64), (8, 1, 2, 1)] {
        txn.extend_from_slice(&0i16.to_be_bytes());
        for v in [pid, first, last, lso] {
            txn.extend_from_slice(&v.to_be_bytes());
        }
    }
    txn.extend_from_slice(&[0, 0, 1]); // a trailing partial entry is ignored
    std::fs::write(tmp.path().join("t-0/00000000000000000000.txnindex"), &txn).unwrap();
    let (_d, log) = open_log(tmp.path(), &small_config());
    let all = log.aborted_transactions(Offset(0), Offset(3)).unwrap();
    assert_eq!(all.iter().map(|t| t.producer_id).collect::<Vec<_>>(), [7, 8]);
    let later = log.aborted_transactions(Offset(2), Offset(3)).unwrap();
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].last_offset, Offset(2));
    assert!(log.aborted_transactions(Offset(0), Offset(0)).unwrap().is_empty());
    assert_eq!(log.segment_summaries().unwrap()[0].txn_index_size, Some(71));
}

#[test]
fn junk_after_a_clean_shutdown_is_recovered_before_appending() {
    let tmp = tempfile::tempdir().unwrap();
    let c = small_config();
    let path = {
        let (d, log) = open_log(tmp.path(), &c);
        append_n(&log, 2, 1000, 10);
        d.shutdown().unwrap();
        log.segment_list()[0].log_path().to_path_buf()
    };
    let good = std::fs::metadata(&path).unwrap().len();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0xab; 30]);
    std::fs::write(&path, &bytes).unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
    log.append(&[record(5, "next")]).unwrap();
    assert_eq!(read_all(&log, Offset(0)).len(), 3);
}

#[test]
fn read_only_partition_without_segments_is_an_empty_log() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("e-0")).unwrap();
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::ReadOnly)
            .unwrap();
    let log = d.log("e", 0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (Offset(0), Offset(0)));
    let cursor = log.seek(Offset(0)).unwrap();
    assert!(log.read(&cursor, 100).unwrap().bytes.is_empty());
    assert_eq!(log.offset_for(OffsetQuery::Timestamp(5)).unwrap(), Offset(0));
    assert!(!tmp.path().join("e-0/00000000000000000000.log").exists());
}

#[test]
fn an_interrupted_swap_is_finished_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = small_config();
    c.set("segment.bytes", "1000000").unwrap();
    let dir = {
        let (d, log) = open_log(tmp.path(), &c);
        append_n(&log, 3, 1000, 10);
        d.shutdown().unwrap();
        log.dir().to_path_buf()
    };
    // A compaction output that kept only the first batch, renamed to `.swap` before the
    // originals were deleted.
    let original = std::fs::read(dir.join("00000000000000000000.log")).unwrap();
    let first = peek_entry(&original).unwrap().unwrap().total_size();
    std::fs::write(dir.join("00000000000000000000.log.swap"), &original[..first]).unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    assert!(!dir.join("00000000000000000000.log.swap").exists());
    assert_eq!(std::fs::read(dir.join("00000000000000000000.log")).unwrap(), &original[..first]);
    assert_eq!(log.log_end_offset(), Offset(1));
    assert_eq!(read_all(&log, Offset(0)).len(), 1);
}

/// The answer a timestamp query must give: the first record in log order with timestamp >=
/// target, else the log end offset.
fn naive_offset_for(records: &[(i64, Timestamp)], target: Timestamp) -> Offset {
    let end = records.len() as i64;
    Offset(records.iter().find(|(_, ts)| *ts >= target).map_or(end, |(o, _)| *o))
}

#[test]
fn timestamp_lookup_reads_large_batches_in_windows_and_finds_every_record() {
    // Batches far larger than one read window (16 KiB), with small records, records larger
    // than the window, and out-of-order timestamps: the windowed walk must agree with a plain
    // scan for every target, including records that straddle window boundaries.
    let tmp = tempfile::tempdir().unwrap();
    let mut c = small_config();
    c.set("segment.bytes", "100000000").unwrap();
    c.set("index.interval.bytes", "4096").unwrap();
    c.set("max.message.bytes", "10000000").unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    let mut all = Vec::new();
    let mut seed = 7u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for b in 0..6 {
        let mut batch = Vec::new();
        for i in 0..400 {
            let size = match next() % 50 {
                0 => 20_000 + (next() % 30_000) as usize, // longer than a window
                _ => (next() % 300) as usize,
            };
            let ts = 10_000 * b + i * 10 + (next() % 40) as i64; // mostly rising, some disorder
            all.push((all.len() as i64, ts));
            batch.push(record(ts, &"v".repeat(size)));
        }
        log.append(&batch).unwrap();
    }
    let max = all.iter().map(|r| r.1).max().unwrap();
    for target in (0..=max + 1).step_by(7) {
        assert_eq!(
            log.offset_for(OffsetQuery::Timestamp(target)).unwrap(),
            naive_offset_for(&all, target),
            "target {target}"
        );
    }
}

#[test]
fn timestamp_lookup_in_a_batch_with_a_bad_record_length_is_an_error_naming_the_position() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = small_config();
    c.set("segment.bytes", "1000000").unwrap();
    let (d, log) = open_log(tmp.path(), &c);
    log.append(&[record(10, "aaaa"), record(20, "bbbb"), record(30, "cccc")]).unwrap();
    d.shutdown().unwrap();
    drop(log);
    drop(d);
    let path = tmp.path().join("t-0/00000000000000000000.log");
    let mut bytes = std::fs::read(&path).unwrap();
    // The first record's length varint (right after the 61-byte header): claim 63 bytes, more
    // than the batch holds.
    bytes[61] = 0x7e;
    std::fs::write(&path, &bytes).unwrap();
    let (_d, log) = open_log(tmp.path(), &c);
    match log.offset_for(OffsetQuery::Timestamp(25)).unwrap_err() {
        Error::Corrupt { file, position, .. } => {
            assert_eq!(file, path);
            assert_eq!(position, 61);
        }
        e => panic!("expected Corrupt, got {e}"),
    }
}

/// The producer snapshots (`<base>.snapshot`) in a partition directory, by offset.
fn snapshot_offsets(dir: &Path) -> Vec<i64> {
    files_with_suffix(dir, ".snapshot")
        .iter()
        .map(|p| {
            p.file_name().unwrap().to_str().unwrap().split('.').next().unwrap().parse().unwrap()
        })
        .collect()
}

#[test]
fn each_roll_writes_a_producer_snapshot_at_the_new_base_and_retention_removes_it() {
    use topicfs::format::producer_snapshot::ProducerSnapshot;
    let tmp = tempfile::tempdir().unwrap();
    let (_, d, log) = retained_log(tmp.path(), ("retention.ms", "1000"), 30);
    let bases: Vec<i64> = log.segment_list().iter().map(|s| s.base_offset().0).collect();
    assert!(bases.len() > 2, "{bases:?}");
    // As a broker: one at each roll, named after the new segment; none at the log start.
    assert_eq!(snapshot_offsets(log.dir()), bases[1..]);
    for path in files_with_suffix(log.dir(), ".snapshot") {
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(ProducerSnapshot::decode(&bytes).unwrap(), ProducerSnapshot::default());
    }
    // A reader's transaction scan starts at the newest.
    let state = log.txn_state_at_boundary().unwrap().unwrap();
    assert_eq!(state.offset, Offset(*bases.last().unwrap()));
    assert!(state.open.is_empty() && state.aborted.is_empty());
    // Retention removes a segment's snapshot with its files.
    d.enforce_retention().unwrap();
    assert_eq!(snapshot_offsets(log.dir()), [*bases.last().unwrap()]);
    assert!(log.txn_state_at_boundary().unwrap().is_none(), "at the log start: not used");
}

#[test]
fn no_producer_snapshot_is_written_after_a_segment_holding_a_producers_batch() {
    use topicfs::format::{BatchSpec, encode_batch};
    let tmp = tempfile::tempdir().unwrap();
    let (d, log) = open_log(tmp.path(), &small_config());
    let dir = log.dir().to_path_buf();
    d.shutdown().unwrap();
    drop((log, d));
    // Another writer left a transactional batch of producer 5 in the active segment.
    let spec = BatchSpec {
        base_offset: Offset(0),
        producer_id: 5,
        is_transactional: true,
        ..BatchSpec::default()
    };
    let batch = encode_batch(&spec, &[record(1000, "t")]).unwrap();
    std::fs::write(dir.join("00000000000000000000.log"), batch).unwrap();
    let (_d, log) = open_log(tmp.path(), &small_config());
    append_n(&log, 30, 1000, 100);
    assert!(log.segment_list().len() > 2);
    // This engine does not follow producers through batches: no snapshot says what it
    // does not know, and readers scan from the log start.
    assert!(snapshot_offsets(&dir).is_empty(), "{:?}", snapshot_offsets(&dir));
    assert!(log.txn_state_at_boundary().unwrap().is_none());
}

#[test]
fn a_shutdown_with_many_unsynced_segments_makes_them_durable_at_once_and_checkpoints_the_end() {
    use topicfs::storage::log_dir::SYNCFS_FROM;
    let tmp = tempfile::tempdir().unwrap();
    let (d, log) = open_log(tmp.path(), &small_config());
    d.create_topic("u", 2).unwrap();
    // 300-byte values: about three records per 1 KiB segment.
    append_n(&log, 3 * SYNCFS_FROM, 1000, 300);
    let other = d.log("u", 1).unwrap();
    append_n(&other, 10, 1000, 300);
    let unsynced = log.unsynced_segments() + other.unsynced_segments();
    assert!(unsynced >= SYNCFS_FROM, "{unsynced} segments: the per-file path would be taken");
    let ends = (log.log_end_offset(), other.log_end_offset());
    d.shutdown().unwrap();
    // The recovery points moved to the log ends, as the checkpoint says.
    assert_eq!((log.recovery_point(), other.recovery_point()), ends);
    let text =
        std::fs::read_to_string(tmp.path().join("recovery-point-offset-checkpoint")).unwrap();
    assert!(text.contains(&format!("t 0 {}", ends.0.0)), "{text}");
    assert!(text.contains(&format!("u 1 {}", ends.1.0)), "{text}");
    assert!(tmp.path().join(".kafka_cleanshutdown").exists());
    drop((log, other, d));
    // A clean reopen: nothing to recover, every record there.
    let d = open(tmp.path(), &small_config());
    assert!(d.dirs()[0].had_clean_shutdown());
    assert_eq!(d.log("t", 0).unwrap().log_end_offset(), ends.0);
}

/// The seam's `known()`: a writable log states its bounds and last change without I/O, exactly
/// what its summary says; a read-only one states neither (its summary looks at the directory
/// again, a broker may write it). Every shape of `append` records writes the same records.
#[test]
fn a_writable_log_knows_its_bounds_without_io_and_a_read_only_one_asks() {
    use topicfs::format::RecordRef;
    use topicfs::source::{PartitionSource, Records};
    let tmp = tempfile::tempdir().unwrap();
    {
        let (_d, log) = open_log(tmp.path(), &small_config());
        let part: Arc<dyn PartitionSource> = log.clone();
        part.append(Records::Owned(&[record(1000, "a")])).unwrap();
        part.append(Records::Borrowed(&[RecordRef::value_only(b"b")])).unwrap();
        let info =
            part.append(Records::ValueLines { head: Some(b"c"), lines: b"d\ne\nnot" }).unwrap();
        assert_eq!((info.first_offset, info.last_offset), (Offset(2), Offset(4)));
        let values: Vec<String> = read_all(&log, Offset(0)).into_iter().map(|r| r.2).collect();
        assert_eq!(values, ["a", "b", "c", "d", "e"]);
        let (known, summary) = (part.known(), part.summary().unwrap());
        assert_eq!(known.bounds, Some((summary.log_start_offset, summary.log_end_offset)));
        assert_eq!(known.last_modified, Some(summary.last_modified));
        assert_eq!((known.rewrites, known.sizing_budget), (0, log.sizing_budget()));
    }
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::ReadOnly)
            .unwrap();
    let part: Arc<dyn PartitionSource> = d.log("t", 0).unwrap();
    let known = part.known();
    assert_eq!((known.bounds, known.last_modified), (None, None));
    assert_eq!(part.summary().unwrap().log_end_offset, Offset(5));
}
