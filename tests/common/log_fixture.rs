//! The log engine tests' shared setup: a config of small segments and dense indexes, a record,
//! and reading a log's records back through the public storage API. Declared by
//! `tests/common/mod.rs` and, on its own, by the `engine` binary (which needs nothing else of
//! `common`).

#![allow(dead_code)]

use topicfs::format::{NewRecord, Offset, Timestamp, decode_batch, peek_entry};
use topicfs::storage::{Log, LogConfig};

/// 1 KiB segments, an index entry every 100 bytes, 4 KiB index files, no time retention: a few
/// dozen small records span several segments.
pub fn small_config() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", "1024").unwrap();
    c.set("index.interval.bytes", "100").unwrap();
    c.set("segment.index.bytes", "4096").unwrap();
    c.set("retention.ms", "-1").unwrap();
    c
}

/// A keyless record without headers.
pub fn record(ts: Timestamp, value: &str) -> NewRecord {
    NewRecord { timestamp: ts, key: None, value: Some(value.as_bytes().to_vec()), headers: vec![] }
}

/// Every record readable from `from`, reading `chunk` bytes at a time, as (offset, timestamp,
/// value). Checks that every chunk holds whole batches only.
pub fn read_records(log: &Log, from: Offset, chunk: usize) -> Vec<(i64, Timestamp, Vec<u8>)> {
    let mut cursor = log.seek(from).unwrap();
    let mut out = Vec::new();
    loop {
        let read = log.read(&cursor, chunk).unwrap();
        if read.bytes.is_empty() {
            return out;
        }
        let mut at = 0;
        while let Some(h) = peek_entry(&read.bytes[at..]).unwrap() {
            let batch = decode_batch(&read.bytes[at..at + h.total_size()]).unwrap();
            for r in batch.records() {
                let r = r.unwrap();
                if r.offset >= from {
                    out.push((r.offset.0, r.timestamp, r.value.unwrap().to_vec()));
                }
            }
            at += h.total_size();
        }
        assert_eq!(at, read.bytes.len(), "chunks hold whole batches only");
        cursor = read.next.unwrap();
    }
}

/// The batches of a `.log` file whose base offset `keep` accepts, concatenated.
pub fn kept_batches(log_file: &std::path::Path, keep: impl Fn(i64) -> bool) -> Vec<u8> {
    let bytes = std::fs::read(log_file).unwrap();
    let (mut out, mut at) = (Vec::new(), 0);
    while let Some(h) = peek_entry(&bytes[at..]).unwrap() {
        if keep(h.offset.0) {
            out.extend_from_slice(&bytes[at..at + h.total_size()]);
        }
        at += h.total_size();
    }
    out
}
