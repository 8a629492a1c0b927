//! The cluster backend's read-ahead (`ClusterPartition`, doc in `crates/cluster/src/source.rs`): one
//! Fetch serves several small sequential reads, and what they return is exactly what reads
//! that each fetch would return, also with several readers interleaved on one partition
//! handle and with records appended between reads. Against tansu 0.6.0 (SQLite engine), which
//! answers a Fetch with up to 5 MiB whatever the partition limit asks.

use crate::common;

use std::sync::Arc;

use common::tansu::Tansu;
use topicfs::cluster::config::parse_bootstrap;
use topicfs::cluster::{Client, ClientConfig, ClusterSource};
use topicfs::format::{NewRecord, Offset, decode_batch, peek_entry};
use topicfs::source::{BatchChunk, PartitionSource, ReadCursor, TopicSource};

/// The whole batches of `bytes`, one slice each.
fn batches(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let size = peek_entry(&bytes[pos..]).unwrap().unwrap().total_size();
        out.push(&bytes[pos..pos + size]);
        pos += size;
    }
    out
}

/// The (offset, value) of every record of `bytes` (whole batches) at `from` or later.
fn records(bytes: &[u8], from: Offset) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in batches(bytes) {
        for r in decode_batch(entry).unwrap().records() {
            let r = r.unwrap();
            if r.offset >= from {
                out.push((r.offset.0, r.value.unwrap_or_default().to_vec()));
            }
        }
    }
    out
}

/// The first offset of each batch of `bytes` (whole batches).
fn bases(bytes: &[u8]) -> Vec<i64> {
    batches(bytes).into_iter().map(|e| decode_batch(e).unwrap().info().base_offset.0).collect()
}

/// A client of `broker` with a 10 s request deadline.
fn connect(broker: &Tansu) -> Arc<Client> {
    let mut config = ClientConfig::default();
    config.set_pair("request.timeout.ms=10000").unwrap();
    Arc::new(Client::connect(parse_bootstrap(&broker.bootstrap()).unwrap(), config).unwrap())
}

/// One read of at most `ask` bytes at `cursor`, as the views ask it.
fn read_chunk(p: &dyn PartitionSource, cursor: &ReadCursor, ask: usize) -> BatchChunk {
    p.read(cursor, ask, topicfs::source::ReadMode::Batches)
        .and_then(topicfs::source::ReadAnswer::into_chunk)
        .unwrap()
}

/// Reads `[from, to)` in reads of `ask` bytes; the records and how many reads it took.
fn read_range(p: &dyn PartitionSource, from: i64, to: i64, ask: usize) -> Vec<(i64, Vec<u8>)> {
    let mut cursor = ReadCursor::at(Offset(from));
    let mut out = Vec::new();
    while cursor.next_offset.0 < to {
        let chunk = read_chunk(p, &cursor, ask);
        out.extend(records(&chunk.bytes, cursor.next_offset));
        let Some(next) = chunk.next else { break };
        assert!(next.next_offset > cursor.next_offset, "no progress at {:?}", cursor.next_offset);
        cursor = next;
    }
    out.retain(|(o, _)| *o < to);
    out
}

#[test]
fn cluster_read_ahead_serves_sequential_and_interleaved_reads_exactly() {
    let broker = Tansu::start();
    let client = connect(&broker);
    client.create_topic("t", 1, &[]).unwrap();
    // 300 batches of 20 records of 200 bytes: about 1.3 MB, beyond one 1 MiB read-ahead.
    let mut expected = Vec::new();
    for b in 0..300 {
        let batch: Vec<NewRecord> = (0..20)
            .map(|i| {
                let n = b * 20 + i;
                let value = format!("{n:08} {}", "v".repeat(191)).into_bytes();
                expected.push((n as i64, value.clone()));
                NewRecord { value: Some(value), ..NewRecord::default() }
            })
            .collect();
        client.produce("t", 0, &batch).unwrap();
    }
    let source = ClusterSource::new(Arc::clone(&client), false);
    let p = source.partition("t", 0).unwrap();
    // Small sequential reads (the view's 64 KiB chunks, and smaller) see every record once.
    assert_eq!(read_range(p.as_ref(), 0, 6000, 64 << 10), expected);
    assert_eq!(read_range(p.as_ref(), 0, 6000, 5000), expected);
    // From the middle of a batch.
    assert_eq!(read_range(p.as_ref(), 1234, 6000, 8192), expected[1234..]);
    // Three readers interleaved on one handle, each from its own place.
    let mut cursors = [0i64, 2000, 4000].map(|o| ReadCursor::at(Offset(o)));
    let mut got: [Vec<(i64, Vec<u8>)>; 3] = Default::default();
    let ends = [2000, 4000, 6000];
    while (0..3).any(|i| cursors[i].next_offset.0 < ends[i]) {
        for i in 0..3 {
            if cursors[i].next_offset.0 >= ends[i] {
                continue;
            }
            let chunk = read_chunk(p.as_ref(), &cursors[i], 16 << 10);
            got[i].extend(records(&chunk.bytes, cursors[i].next_offset));
            cursors[i] = chunk.next.unwrap();
        }
    }
    for i in 0..3 {
        got[i].retain(|(o, _)| *o < ends[i]);
        let from = ends[i] as usize - 2000;
        assert_eq!(got[i], expected[from..ends[i] as usize], "reader {i}");
    }
    // Records appended after a read-ahead are read when the reader gets there.
    let tail = read_range(p.as_ref(), 5990, 6000, 4096);
    assert_eq!(tail, expected[5990..]);
    let more: Vec<NewRecord> = (0..5)
        .map(|i| NewRecord {
            value: Some(format!("late {i}").into_bytes()),
            ..NewRecord::default()
        })
        .collect();
    client.produce("t", 0, &more).unwrap();
    let late = read_range(p.as_ref(), 5990, 6005, 4096);
    assert_eq!(late.len(), 15);
    assert_eq!(late[14], (6004, b"late 4".to_vec()));
}

/// Readers of one partition share what each fetched, but tansu's SQLite engine frames each
/// Fetch answer's batches anew from the offset asked (a Fetch from 300 answers one batch from
/// 300 on). A read continuing where its last batch ended, at an offset inside such a batch
/// fetched for another reader, gets a batch starting at its offset (its own Fetch), never the
/// records below its offset again; a read from exactly where another read's Fetch started
/// is served from that answer.
#[test]
fn cluster_read_ahead_a_read_inside_a_batch_fetched_for_another_read_gets_no_record_twice() {
    let broker = Tansu::start();
    let client = connect(&broker);
    client.create_topic("t", 1, &[]).unwrap();
    for b in 0..40 {
        let batch: Vec<NewRecord> = (0..500)
            .map(|i| NewRecord {
                value: Some(format!("{:0100}", b * 500 + i).into_bytes()),
                ..NewRecord::default()
            })
            .collect();
        client.produce("t", 0, &batch).unwrap();
    }
    let source = ClusterSource::new(Arc::clone(&client), false);
    let p = source.partition("t", 0).unwrap();
    let read = |at: i64| read_chunk(p.as_ref(), &ReadCursor::at(Offset(at)), 64 << 10);
    // A reader from 300: its answer's one batch starts at 300.
    let other = read(300);
    assert_eq!(bases(&other.bytes).first(), Some(&300));
    let fetches = || client.request_counts().get(kafka_protocol::messages::ApiKey::Fetch);
    // A second read from 300 is served from that answer.
    let before = fetches();
    assert_eq!(read(300).bytes, other.bytes);
    assert_eq!(fetches(), before);
    // A reader from 0 ends its first batch inside the other's; its next read starts there.
    let first = read(0);
    let next = first.next.unwrap().next_offset;
    let other_end = other.next.unwrap().next_offset;
    assert!(next.0 > 300 && next < other_end, "{next:?} not inside 300..{other_end:?}");
    let mut cursor = first.next.unwrap();
    let mut seen = records(&first.bytes, Offset(0)).len() as i64;
    while cursor.next_offset.0 < 20_000 {
        let chunk = read_chunk(p.as_ref(), &cursor, 64 << 10);
        let got = bases(&chunk.bytes);
        assert!(
            got.first().is_some_and(|b| *b == cursor.next_offset.0),
            "a read from {:?} continuing a batch's end got batches from {got:?}",
            cursor.next_offset
        );
        // Every record of the answer is the reader's (none below its offset).
        let all = records(&chunk.bytes, Offset(0));
        assert_eq!(all.first().map(|r| r.0), Some(cursor.next_offset.0));
        seen += all.len() as i64;
        cursor = chunk.next.unwrap();
    }
    assert_eq!(seen, 20_000);
}

/// The names of this process's threads now (one that ended meanwhile is left out).
pub(crate) fn thread_names() -> Vec<String> {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_string())
        .collect()
}

/// The threads of this process now.
fn threads_now() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Threads now that are not the executor's workers (`topicfs-bg-N`).
pub(crate) fn threads_but_workers() -> usize {
    thread_names().iter().filter(|n| !n.starts_with("topicfs-bg-")).count()
}

/// Sequential readers of several partitions at once start no thread per prefetch: a reader's
/// next windows are Fetches queued on the executor (`Blocking::Network`, at most `network` of
/// them running), so the process's threads stay within those before the reads plus the
/// executor's spare workers, however many partitions are read and prefetched. The broker holds
/// every prefetch for `fetch.max.wait.ms` (tansu holds a Fetch asking `fetch.min.bytes` above 1
/// for its whole wait), so prefetches of every partition are in flight together: a thread each
/// would pass the bound at the first count after them. What the readers get is every record
/// once, in order (reads that reach a prefetch no worker started yet run it themselves).
#[test]
fn cluster_read_ahead_of_many_partitions_starts_no_thread_beyond_the_executors_workers() {
    const PARTITIONS: u32 = 6;
    const RECORDS: i64 = 10_000;
    let broker = Tansu::start();
    let mut config = ClientConfig::default();
    for pair in ["request.timeout.ms=10000", "fetch.min.bytes=2", "fetch.max.wait.ms=1000"] {
        config.set_pair(pair).unwrap();
    }
    let client =
        Arc::new(Client::connect(parse_bootstrap(&broker.bootstrap()).unwrap(), config).unwrap());
    client.create_topic("t", PARTITIONS as i32, &[]).unwrap();
    for p in 0..PARTITIONS {
        for b in 0..RECORDS / 500 {
            let batch: Vec<NewRecord> = (0..500)
                .map(|i| NewRecord {
                    value: Some(format!("{p} {:0100}", b * 500 + i).into_bytes()),
                    ..NewRecord::default()
                })
                .collect();
            client.produce("t", p as i32, &batch).unwrap();
        }
    }
    let executor = topicfs::executor::Executor::with_network(1, 2);
    let source = ClusterSource::new(Arc::clone(&client), true).with_executor(executor.clone());
    let parts: Vec<_> = (0..PARTITIONS).map(|p| source.partition("t", p).unwrap()).collect();
    // One read of each first (no prefetch yet): every connection and worker is up.
    let mut cursors: Vec<ReadCursor> = Vec::new();
    let mut got: Vec<Vec<(i64, Vec<u8>)>> = Vec::new();
    for p in &parts {
        let chunk = read_chunk(p.as_ref(), &ReadCursor::at(Offset(0)), 64 << 10);
        got.push(records(&chunk.bytes, Offset(0)));
        cursors.push(chunk.next.unwrap());
    }
    let bound = threads_now() + executor.network();
    let others = threads_but_workers();
    let mut most = 0;
    let prefetches = || client.request_counts().get(kafka_protocol::messages::ApiKey::Fetch);
    let before = prefetches();
    while cursors.iter().any(|c| c.next_offset.0 < RECORDS) {
        for (i, p) in parts.iter().enumerate() {
            if cursors[i].next_offset.0 >= RECORDS {
                continue;
            }
            let chunk = read_chunk(p.as_ref(), &cursors[i], 64 << 10);
            got[i].extend(records(&chunk.bytes, cursors[i].next_offset));
            cursors[i] = chunk.next.unwrap();
            most = most.max(threads_now());
            assert!(most <= bound, "{most} threads, more than {bound}");
            let names = thread_names();
            let new = names.iter().filter(|n| !n.starts_with("topicfs-bg-")).count();
            assert!(new <= others, "threads besides the workers: {names:?}");
        }
    }
    eprintln!("at most {most} threads (bound {bound}), {} Fetches", prefetches() - before);
    for (i, records) in got.iter_mut().enumerate() {
        records.retain(|(o, _)| *o < RECORDS);
        assert_eq!(records.len() as i64, RECORDS, "partition {i}");
        for (n, (offset, value)) in records.iter().enumerate() {
            assert_eq!(*offset, n as i64);
            assert_eq!(value, &format!("{i} {n:0100}").into_bytes());
        }
    }
}
