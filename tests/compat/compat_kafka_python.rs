//! Byte compatibility with kafka-python's record codec, an implementation of Kafka's formats
//! written independently of topicfs, in both directions:
//!
//! - batches topicfs encodes (every codec, legacy v0/v1 messages and wrappers, LogAppendTime,
//!   transactional and control batches, null keys/values, headers, several batches in one
//!   segment file) are decoded by kafka-python, which checks each CRC and compares every field
//!   and record with what the test meant to write (`tests/compat/check_log.py decode`);
//! - batches kafka-python builds (`tests/compat/write_batches.py`) are decoded by topicfs and
//!   compared record by record with kafka-python's own reading of them;
//! - segments the storage engine appends (every codec, LogAppendTime, several rolls) are read
//!   by kafka-python: contiguous offsets, every record as appended, index entries at batch
//!   starts (`tests/compat/check_log.py partition`).
//!
//! Needs the venv made by `scripts/install-deps` (`TOPICFS_PYTHON`); fails in CI without it.

use crate::manifest;

use std::path::Path;

use serde_json::{Value, json};
use topicfs::format::legacy::{encode_message, encode_wrapper};
use topicfs::format::{
    BatchSpec, Compression, NewRecord, Offset, TimestampType, encode_batch, set_base_offset,
    set_log_append_time, set_partition_leader_epoch,
};
use topicfs::storage::log::Log;
use topicfs::storage::{CompressionType, LogConfig, MessageTimestampType};

const T0: i64 = 1_767_225_600_000;

/// A segment file being written, with the batches kafka-python must find in it.
#[derive(Default)]
struct Segment {
    log: Vec<u8>,
    expected: Vec<Value>,
}

fn record_json(offset: i64, timestamp: i64, r: &NewRecord) -> Value {
    let headers: Vec<Value> = r
        .headers
        .iter()
        .map(|(k, v)| json!([String::from_utf8(k.clone()).unwrap(), manifest::b64(v.as_deref())]))
        .collect();
    json!({
        "offset": offset,
        "timestamp": timestamp,
        "key": manifest::b64(r.key.as_deref()),
        "value": manifest::b64(r.value.as_deref()),
        "headers": headers,
    })
}

impl Segment {
    /// Appends `bytes` (one v2 batch encoded from `spec` and `records`, possibly edited after)
    /// and what it must decode to, derived from the inputs rather than from our decoder.
    fn push_v2(&mut self, bytes: Vec<u8>, spec: &BatchSpec, records: &[NewRecord]) {
        let base = spec.base_offset.0;
        let lat = spec.timestamp_type == TimestampType::LogAppendTime;
        let max_ts = if lat {
            spec.log_append_time
        } else {
            records.iter().map(|r| r.timestamp).max().unwrap()
        };
        let recs: Vec<Value> = records
            .iter()
            .enumerate()
            .map(|(i, r)| record_json(base + i as i64, if lat { max_ts } else { r.timestamp }, r))
            .collect();
        self.expected.push(json!({
            "position": self.log.len(),
            "size": bytes.len(),
            "base_offset": base,
            "last_offset": base + records.len() as i64 - 1,
            "magic": 2,
            "compression": spec.compression.name(),
            "timestamp_type": spec.timestamp_type.name(),
            "is_transactional": spec.is_transactional,
            "is_control": spec.is_control,
            "producer_id": spec.producer_id,
            "producer_epoch": spec.producer_epoch,
            "base_sequence": spec.base_sequence,
            "partition_leader_epoch": spec.partition_leader_epoch,
            "base_timestamp": records[0].timestamp,
            "max_timestamp": max_ts,
            "records_count": records.len(),
            "records": recs,
        }));
        self.log.extend(bytes);
    }

    fn v2(&mut self, spec: BatchSpec, records: &[NewRecord]) {
        let bytes = encode_batch(&spec, records).unwrap();
        self.push_v2(bytes, &spec, records);
    }

    fn next_offset(&self) -> i64 {
        self.expected.last().map_or(0, |b| b["last_offset"].as_i64().unwrap() + 1)
    }

    /// Legacy entries: one message per record when `compression` is none, else one wrapper.
    fn legacy(
        &mut self,
        magic: i8,
        compression: Compression,
        records: &[NewRecord],
        log_append_time: Option<i64>,
    ) {
        let base = self.next_offset();
        let timestamp_type = match (magic, log_append_time) {
            (0, _) => TimestampType::NoTimestampType,
            (_, Some(_)) => TimestampType::LogAppendTime,
            (_, None) => TimestampType::CreateTime,
        };
        let effective = |r: &NewRecord| match (magic, log_append_time) {
            (0, _) => -1,
            (_, Some(t)) => t,
            (_, None) => r.timestamp,
        };
        let mut entries = Vec::new();
        if compression == Compression::None {
            for (i, r) in records.iter().enumerate() {
                let ts = effective(r);
                let attrs = if timestamp_type == TimestampType::LogAppendTime { 0x08 } else { 0 };
                let bytes = encode_message(
                    Offset(base + i as i64),
                    magic,
                    attrs,
                    ts,
                    r.key.as_deref(),
                    r.value.as_deref(),
                );
                entries.push((
                    bytes,
                    base + i as i64,
                    ts,
                    vec![record_json(base + i as i64, ts, r)],
                ));
            }
        } else {
            let bytes =
                encode_wrapper(magic, compression, Offset(base), records, log_append_time).unwrap();
            let wrapper_ts = match magic {
                0 => -1,
                _ => log_append_time
                    .unwrap_or_else(|| records.iter().map(|r| r.timestamp).max().unwrap()),
            };
            let recs = records
                .iter()
                .enumerate()
                .map(|(i, r)| record_json(base + i as i64, effective(r), r))
                .collect();
            entries.push((bytes, base, wrapper_ts, recs));
        }
        for (bytes, first, ts, recs) in entries {
            let recs: Vec<Value> = recs;
            self.expected.push(json!({
                "position": self.log.len(),
                "size": bytes.len(),
                "base_offset": first,
                "last_offset": first + recs.len() as i64 - 1,
                "magic": magic,
                "compression": compression.name(),
                "timestamp_type": timestamp_type.name(),
                "is_transactional": false,
                "is_control": false,
                "base_timestamp": ts,
                "max_timestamp": ts,
                "records_count": recs.len(),
                "records": recs,
            }));
            self.log.extend(bytes);
        }
    }
}

fn rec(
    ts: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(&str, Option<&[u8]>)],
) -> NewRecord {
    NewRecord {
        timestamp: ts,
        key: key.map(<[u8]>::to_vec),
        value: value.map(<[u8]>::to_vec),
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.map(<[u8]>::to_vec)))
            .collect(),
    }
}

/// Records covering every shape of key, value and header.
fn edge_records(first_ts: i64) -> Vec<NewRecord> {
    let all_bytes: Vec<u8> = (0..=255).collect();
    vec![
        rec(first_ts, None, Some(b"null key"), &[]),
        rec(first_ts + 1, Some(b"null value"), None, &[]),
        rec(first_ts + 2, Some(b""), Some(b""), &[]),
        rec(
            first_ts - 5000, // older than the first: negative timestamp delta
            Some(b"\x00\xff"),
            Some(&all_bytes),
            &[
                ("a", Some(b"1")),
                ("empty", Some(b"")),
                ("null", None),
                ("\u{e9}t\u{e9}", Some(b"\xff")),
            ],
        ),
        rec(first_ts + 4, None, None, &[("only", Some(b"headers"))]),
        rec(first_ts + 5, Some(b"k"), Some("unicode \u{263a} \u{4e2d}".as_bytes()), &[]),
    ]
}

/// `n` records with `size`-byte values mixing text and pseudo-random bytes, so that compressed
/// payloads of large ones span several snappy chunks and LZ4 blocks.
fn bulk_records(first_ts: i64, n: usize, size: usize) -> Vec<NewRecord> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..n)
        .map(|i| {
            let value: Vec<u8> = (0..size)
                .map(|j| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    if j % 4 == 0 { (state >> 56) as u8 } else { b"topicfs "[j % 8] }
                })
                .collect();
            rec(first_ts + i as i64, Some(format!("key-{}", i % 3).as_bytes()), Some(&value), &[])
        })
        .collect()
}

fn spec(base: i64, compression: Compression) -> BatchSpec {
    BatchSpec { base_offset: Offset(base), compression, ..BatchSpec::default() }
}

#[test]
fn kafka_python_decodes_every_batch_topicfs_encodes() {
    let Some(python) = manifest::python() else { return };
    let mut seg = Segment::default();
    for c in Compression::ALL {
        seg.v2(spec(seg.next_offset(), c), &edge_records(T0));
    }
    for c in Compression::ALL {
        seg.v2(spec(seg.next_offset(), c), &bulk_records(T0 + 100, 3, 150_000));
    }
    // LogAppendTime, set by the encoder and stamped afterwards as a broker does.
    let lat = BatchSpec {
        timestamp_type: TimestampType::LogAppendTime,
        log_append_time: T0 + 3_600_000,
        ..spec(seg.next_offset(), Compression::Lz4)
    };
    seg.v2(lat, &edge_records(T0));
    let records = bulk_records(T0 + 200, 4, 100);
    let mut stamped = encode_batch(&spec(0, Compression::Zstd), &records).unwrap();
    let broker = BatchSpec {
        timestamp_type: TimestampType::LogAppendTime,
        log_append_time: T0 + 3_700_000,
        partition_leader_epoch: 9,
        ..spec(seg.next_offset(), Compression::Zstd)
    };
    set_base_offset(&mut stamped, broker.base_offset).unwrap();
    set_partition_leader_epoch(&mut stamped, 9).unwrap();
    set_log_append_time(&mut stamped, broker.log_append_time).unwrap();
    seg.push_v2(stamped, &broker, &records);
    // A transaction (sequence wrapping past i32::MAX) and its COMMIT marker.
    let txn = BatchSpec {
        producer_id: 42,
        producer_epoch: 2,
        base_sequence: i32::MAX - 1,
        is_transactional: true,
        ..spec(seg.next_offset(), Compression::Snappy)
    };
    seg.v2(txn, &bulk_records(T0 + 300, 3, 50));
    let marker = BatchSpec {
        producer_id: 42,
        producer_epoch: 2,
        is_transactional: true,
        is_control: true,
        ..spec(seg.next_offset(), Compression::None)
    };
    seg.v2(marker, &[rec(T0 + 400, Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0, 3]), &[])]);
    for magic in [0, 1] {
        for c in [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4] {
            let mut records = edge_records(T0 + 500);
            records.iter_mut().for_each(|r| r.headers.clear()); // legacy messages have none
            seg.legacy(magic, c, &records, None);
        }
    }
    seg.legacy(1, Compression::Lz4, &bulk_records(T0 + 600, 2, 150_000), None);
    seg.legacy(1, Compression::Gzip, &bulk_records(T0 + 700, 3, 20), Some(T0 + 7_200_000));
    seg.legacy(1, Compression::None, &bulk_records(T0 + 800, 2, 20), Some(T0 + 7_300_000));

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("00000000000000000000.log");
    let expected = dir.path().join("expected.json");
    std::fs::write(&log, &seg.log).unwrap();
    std::fs::write(&expected, serde_json::to_vec(&json!({ "batches": seg.expected })).unwrap())
        .unwrap();
    let out =
        manifest::run_script(&python, "check_log.py", &[Path::new("decode"), &log, &expected]);
    eprint!("{out}");
    // Our own decoder agrees with the same expectations (guards the expectations themselves).
    manifest::assert_no_problems(&manifest::compare_log(&seg.log, &seg.expected, "our segment"));
}

#[test]
fn topicfs_decodes_every_batch_kafka_python_encodes() {
    let Some(python) = manifest::python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = manifest::run_script(&python, "write_batches.py", &[dir.path()]);
    eprint!("{out}");
    let log = std::fs::read(dir.path().join("batches.log")).unwrap();
    let expected: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("expected.json")).unwrap()).unwrap();
    let batches = expected["batches"].as_array().unwrap();
    assert!(batches.len() >= 30, "write_batches.py wrote only {} batches", batches.len());
    manifest::assert_no_problems(&manifest::compare_log(&log, batches, "kafka-python's segment"));
}

/// One partition appended through the engine, then closed as at a clean shutdown.
struct EngineLog {
    dir: std::path::PathBuf,
    /// What each appended record must read back as: offset, CreateTime timestamp, record.
    appended: Vec<(i64, i64, NewRecord)>,
}

fn append_through_engine(
    root: &std::path::Path,
    name: &str,
    compression: Compression,
    timestamp_type: MessageTimestampType,
) -> EngineLog {
    let dir = root.join(format!("{name}-0"));
    let config = LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        compression_type: CompressionType::Codec(compression),
        message_timestamp_type: timestamp_type,
        ..LogConfig::default()
    };
    let log = Log::create(&dir, name, 0, config).unwrap();
    let mut appended = Vec::new();
    for call in 0..40 {
        let mut records =
            bulk_records(T0 + 10 * call, (call % 5 + 1) as usize, 40 + 7 * call as usize);
        if call % 7 == 0 {
            records.extend(edge_records(T0 + 10 * call));
        }
        let info = log.append(&records).unwrap();
        assert_eq!(info.last_offset.0 - info.first_offset.0 + 1, records.len() as i64);
        for (i, r) in records.into_iter().enumerate() {
            appended.push((info.first_offset.0 + i as i64, r.timestamp, r));
        }
    }
    log.close().unwrap();
    EngineLog { dir, appended }
}

#[test]
fn kafka_python_reads_the_segments_the_engine_appends() {
    let Some(python) = manifest::python() else { return };
    let root = tempfile::tempdir().unwrap();
    let mut logs = Vec::new();
    for c in Compression::ALL {
        logs.push((
            append_through_engine(root.path(), c.name(), c, MessageTimestampType::CreateTime),
            false,
        ));
    }
    let lat = append_through_engine(
        root.path(),
        "lat",
        Compression::Lz4,
        MessageTimestampType::LogAppendTime,
    );
    logs.push((lat, true));
    for (log, log_append_time) in &logs {
        let segments = std::fs::read_dir(&log.dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "log"))
            .count();
        assert!(
            segments >= 3,
            "{}: only {segments} segments, the test wants rolls",
            log.dir.display()
        );
        // Offsets contiguous from 0 across segments, file names = base offsets, every index
        // entry at a batch start, time index entries = max timestamp so far.
        manifest::run_script(
            &python,
            "check_log.py",
            &[Path::new("partition"), &log.dir, Path::new("--contiguous")],
        );
        let out = manifest::run_script(&python, "check_log.py", &[Path::new("records"), &log.dir]);
        let read: Vec<Value> = serde_json::from_str(&out).unwrap();
        assert_eq!(read.len(), log.appended.len(), "{}", log.dir.display());
        for (got, (offset, timestamp, r)) in read.iter().zip(&log.appended) {
            let mut want = record_json(*offset, *timestamp, r);
            if *log_append_time {
                assert_eq!(got["timestamp_type"], "LogAppendTime");
                assert!(got["timestamp"].as_i64().unwrap() > T0 + 86_400_000, "append time is now");
                want["timestamp"] = got["timestamp"].clone();
            } else {
                assert_eq!(got["timestamp_type"], "CreateTime");
            }
            want["timestamp_type"] = got["timestamp_type"].clone();
            want["is_control"] = json!(false);
            assert_eq!(got, &want, "{}", log.dir.display());
        }
    }
}
