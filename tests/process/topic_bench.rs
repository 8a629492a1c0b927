//! Benchmark (ignored by default; no timing is asserted): records/s of the merged topic-level
//! stream against reading each partition's stream one after another, over the same records.
//!
//! `cargo test --release --test process topic_bench -- --ignored --nocapture`

use std::sync::Arc;
use std::time::Instant;

use topicfs::format::NewRecord;
use topicfs::source::TopicSource;
use topicfs::storage::LogConfig;
use topicfs::view::spec::StreamSpec;
use topicfs::view::stream::StreamRegistry;
use topicfs::view::topic::{TopicViews, parse_topic_by_time};

const PARTITIONS: u32 = 8;
const BATCHES: i64 = 2_000;
const PER_BATCH: i64 = 10;
const READ: usize = 128 * 1024;

#[test]
#[ignore = "benchmark: run with --ignored --nocapture"]
fn merged_stream_records_per_second_against_partitions_one_after_another() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = LogConfig::default();
    config.set("retention.ms", "-1").unwrap();
    let logs = crate::common::writable_log_dirs(dir.path(), config);
    logs.create_topic("bench", PARTITIONS).unwrap();
    for p in 0..PARTITIONS {
        let part = logs.partition("bench", p).unwrap();
        for b in 0..BATCHES {
            let records: Vec<NewRecord> = (0..PER_BATCH)
                .map(|i| NewRecord {
                    timestamp: 1_000_000 + b * 10 + i64::from(p),
                    key: None,
                    value: Some(format!("partition {p} batch {b} record {i} payload").into_bytes()),
                    headers: Vec::new(),
                })
                .collect();
            part.append(topicfs::source::Records::Owned(&records)).unwrap();
        }
    }
    let records = f64::from(PARTITIONS) * (BATCHES * PER_BATCH) as f64;
    let drain = |read: &dyn Fn(u64) -> Vec<u8>| {
        let mut at = 0u64;
        loop {
            let chunk = read(at);
            if chunk.is_empty() {
                return at;
            }
            at += chunk.len() as u64;
        }
    };

    let started = Instant::now();
    let registry = StreamRegistry::new();
    let mut one_by_one = 0;
    for p in 0..PARTITIONS {
        let part = logs.partition("bench", p).unwrap();
        let s = registry.open(part, &StreamSpec::parse_by_time("0").unwrap(), 0).unwrap();
        s.size().unwrap();
        one_by_one += drain(&|at| s.read_at(at, READ).unwrap().to_vec());
    }
    let partitions_secs = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let source: Arc<dyn TopicSource> = logs.clone();
    let merged = TopicViews::new()
        .open_stream(source, "bench", &parse_topic_by_time("0").unwrap(), 0)
        .unwrap();
    merged.size().unwrap();
    let merged_bytes = drain(&|at| merged.read_at(at, READ).unwrap());
    let merged_secs = started.elapsed().as_secs_f64();

    assert_eq!(merged_bytes, one_by_one, "the merge holds exactly the partitions' records");
    println!(
        "bench topic by-time: {records} records in {PARTITIONS} partitions, size+full read in \
         {READ}-byte reads: merged {:.0} records/s, partitions one after another {:.0} records/s",
        records / merged_secs,
        records / partitions_secs,
    );
}
