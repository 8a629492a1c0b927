//! Model test of the log engine: random sequences of appends, rolls (small `segment.bytes` and
//! small indexes), clean and unclean reopens, reads by offset and by time, checked against a
//! plain `Vec` of records.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use topicfs::format::{NewRecord, Offset, Timestamp};
use topicfs::source::OffsetQuery;
use topicfs::storage::{Log, LogConfig, LogDirs, SegmentMode};

use crate::log_fixture::read_records;

#[derive(Clone, Debug)]
enum Op {
    /// Records with these (timestamp, value length).
    Append(Vec<(Timestamp, usize)>),
    Roll,
    ReopenClean,
    ReopenUnclean,
    /// Read everything from `log start + frac * (log end - log start)`.
    ReadFrom(f64),
    ByTime(Timestamp),
    MaxTimestamp,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop::collection::vec((1000i64..1100, 0usize..150), 1..12).prop_map(Op::Append),
        1 => Just(Op::Roll),
        1 => Just(Op::ReopenClean),
        1 => Just(Op::ReopenUnclean),
        3 => (0.0f64..=1.0).prop_map(Op::ReadFrom),
        3 => (990i64..1110).prop_map(Op::ByTime),
        1 => Just(Op::MaxTimestamp),
    ]
}

fn config(compression: &str) -> LogConfig {
    let mut c = LogConfig::default();
    c.set("compression.type", compression).unwrap();
    c.set("segment.bytes", "700").unwrap();
    c.set("index.interval.bytes", "60").unwrap();
    c.set("segment.index.bytes", "120").unwrap(); // 15 offset slots, 10 time slots
    c.set("retention.ms", "-1").unwrap();
    c
}

fn open(dir: &Path, compression: &str) -> (LogDirs, Arc<Log>) {
    let d = LogDirs::open_dir(dir, config(compression), Default::default(), SegmentMode::Writable)
        .unwrap();
    if d.log("m", 0).is_err() {
        d.create_topic("m", 1).unwrap();
    }
    let log = d.log("m", 0).unwrap();
    (d, log)
}

/// Value bytes of record `offset`, derived so that any mix-up shows.
fn value(offset: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (offset * 31 + i) as u8).collect()
}

fn read_from(log: &Log, from: Offset) -> Vec<(i64, Timestamp, Vec<u8>)> {
    read_records(log, from, 333)
}

fn run(ops: Vec<Op>, compression: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let mut model: Vec<(Timestamp, Vec<u8>)> = Vec::new();
    let (mut dir, mut log) = open(tmp.path(), compression);
    for op in ops {
        match op {
            Op::Append(specs) => {
                let base = model.len();
                let records: Vec<NewRecord> = specs
                    .iter()
                    .enumerate()
                    .map(|(i, &(ts, len))| NewRecord {
                        timestamp: ts,
                        key: None,
                        value: Some(value(base + i, len)),
                        headers: vec![],
                    })
                    .collect();
                let info = log.append(&records).unwrap();
                assert_eq!(info.first_offset, Offset(base as i64));
                for r in records {
                    model.push((r.timestamp, r.value.unwrap()));
                }
                assert_eq!(info.last_offset, Offset(model.len() as i64 - 1));
            }
            Op::Roll => log.force_roll().unwrap(),
            Op::ReopenClean => {
                dir.shutdown().unwrap();
                drop((log, dir));
                (dir, log) = open(tmp.path(), compression);
                assert_eq!(log.recovered_segments(), 0);
            }
            Op::ReopenUnclean => {
                drop((log, dir));
                (dir, log) = open(tmp.path(), compression);
            }
            Op::ReadFrom(frac) => {
                let start = log.log_start_offset().0;
                let end = log.log_end_offset().0;
                let from = start + ((end - start) as f64 * frac) as i64;
                let got = read_from(&log, Offset(from));
                let want: Vec<(i64, Timestamp, Vec<u8>)> = model
                    .iter()
                    .enumerate()
                    .skip(from as usize)
                    .map(|(o, (ts, v))| (o as i64, *ts, v.clone()))
                    .collect();
                assert_eq!(got, want, "read from {from}");
            }
            Op::ByTime(t) => {
                let want = model.iter().position(|(ts, _)| *ts >= t).unwrap_or(model.len());
                let got = log.offset_for(OffsetQuery::Timestamp(t)).unwrap();
                assert_eq!(got, Offset(want as i64), "by time {t}");
            }
            Op::MaxTimestamp => {
                let max = model.iter().map(|(ts, _)| *ts).max();
                let want = max
                    .and_then(|m| model.iter().position(|(ts, _)| *ts == m))
                    .unwrap_or(model.len());
                let got = log.offset_for(OffsetQuery::MaxTimestamp).unwrap();
                assert_eq!(got, Offset(want as i64), "max timestamp");
            }
        }
        assert_eq!(log.log_end_offset(), Offset(model.len() as i64));
        assert_eq!(log.log_start_offset(), Offset(0));
    }
    let got = read_from(&log, Offset(0));
    assert_eq!(got.len(), model.len());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_a_vec_of_records(
        ops in prop::collection::vec(op(), 1..60),
        compression in prop::sample::select(vec!["producer", "gzip", "snappy", "lz4", "zstd"]),
    ) {
        run(ops, compression);
    }
}
