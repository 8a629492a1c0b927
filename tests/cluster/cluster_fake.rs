//! `read_committed` on a cluster, against a scripted broker: tansu has no transactions (no
//! EndTxn, doc/cluster-brokers.md), so a fake broker on 127.0.0.1 answers ApiVersions,
//! Metadata, ListOffsets and Fetch for one partition whose log holds committed, aborted and
//! still-open transactions, with the last stable offset and aborted-transaction list Kafka
//! would send. The filesystem logic (`TopicFs`) over `ClusterSource` must show what a Java
//! `read_committed` consumer shows, and a stream's first read must cost one Fetch, however long
//! the partition.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest,
    ListOffsetsResponse, MetadataResponse, ProducerId, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use topicfs::cluster::config::parse_bootstrap;
use topicfs::cluster::{Client, ClientConfig, ClusterSource};
use topicfs::format::control::encode_end_txn_marker_batch;
use topicfs::format::{BatchSpec, NewRecord, Offset, encode_batch, parse_batch_info};
use topicfs::fs::attr::OpenRequest;
use topicfs::fs::inode::ROOT_INO;
use topicfs::fs::{FsOptions, TopicFs};
use topicfs::source::TopicSource;
use topicfs::view::budget::MemoryBudget;
use topicfs::view::txn::Isolation;

const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };
const TOPIC: &str = "tx";

/// One batch of `values` at `base`, transactional for `pid` >= 0.
fn batch(base: i64, values: &[&str], pid: i64) -> Vec<u8> {
    let records: Vec<NewRecord> = values
        .iter()
        .enumerate()
        .map(|(i, v)| NewRecord {
            timestamp: 1_767_225_600_000 + base + i as i64,
            key: None,
            value: Some(v.as_bytes().to_vec()),
            headers: Vec::new(),
        })
        .collect();
    let spec = BatchSpec {
        base_offset: Offset(base),
        producer_id: pid,
        producer_epoch: if pid >= 0 { 0 } else { -1 },
        base_sequence: if pid >= 0 { 0 } else { -1 },
        is_transactional: pid >= 0,
        ..BatchSpec::default()
    };
    encode_batch(&spec, &records).unwrap()
}

fn marker(base: i64, pid: i64, commit: bool) -> Vec<u8> {
    encode_end_txn_marker_batch(Offset(base), 0, pid, 0, commit, 0, 1_767_225_600_000).unwrap()
}

/// The partition `tx/0` as the fake broker stores it.
struct Log {
    /// (base offset, last offset, bytes) in offset order.
    batches: Vec<(i64, i64, Vec<u8>)>,
    /// Aborted transactions: (producer id, first offset, marker offset).
    aborted: Vec<(i64, i64, i64)>,
    lso: i64,
    hwm: i64,
    /// How long each Fetch takes to answer (so that concurrent readers overlap).
    fetch_delay: std::time::Duration,
    /// While set, Fetch requests wait before they are answered.
    hold_fetches: Arc<AtomicBool>,
    /// The newest ListOffsets version offered (7 answers the max-timestamp lookup, `-3`).
    list_offsets_max: i16,
    /// How long a ListOffsets `-3` takes to answer.
    max_timestamp_delay: std::time::Duration,
    /// Fetch answers as tansu's memory engine does (`dynostore.rs` `fetch`): from the first
    /// batch whose base offset is at or past the fetch offset (not the batch holding it), and
    /// with the batch that passes the limit.
    tansu_framing: bool,
}

impl Log {
    fn new(entries: Vec<Vec<u8>>, aborted: Vec<(i64, i64, i64)>, lso: i64) -> Log {
        let batches: Vec<(i64, i64, Vec<u8>)> = entries
            .into_iter()
            .map(|b| {
                let info = parse_batch_info(&b).unwrap();
                (info.base_offset.0, info.last_offset.0, b)
            })
            .collect();
        let hwm = batches.last().map_or(0, |b| b.1 + 1);
        let hold_fetches = Arc::new(AtomicBool::new(false));
        Log {
            batches,
            aborted,
            lso,
            hwm,
            fetch_delay: std::time::Duration::ZERO,
            hold_fetches,
            list_offsets_max: 7,
            max_timestamp_delay: std::time::Duration::ZERO,
            tansu_framing: false,
        }
    }

    /// Kafka's answer to ListOffsets `-3`: the first record with the largest timestamp, as
    /// (offset, timestamp); (-1, -1) for an empty log.
    fn max_timestamp(&self) -> (i64, i64) {
        let mut best = (-1, -1);
        for (_, _, bytes) in &self.batches {
            let batch = topicfs::format::decode_batch(bytes).unwrap();
            for stamp in batch.record_stamps() {
                let stamp = stamp.unwrap();
                if stamp.timestamp > best.1 {
                    best = (stamp.offset.0, stamp.timestamp);
                }
            }
        }
        best
    }

    /// What Kafka's Fetch returns from `offset`: whole batches from the one holding it, up to
    /// `max_bytes` (at least one batch), below the LSO when `committed`, with the aborted
    /// transactions overlapping the returned range.
    fn fetch(&self, offset: i64, max_bytes: usize, committed: bool) -> (Vec<u8>, Vec<(i64, i64)>) {
        let limit = if committed { self.lso } else { self.hwm };
        let mut out = Vec::new();
        let mut last = offset;
        let mut room = max_bytes;
        for (base, end, bytes) in &self.batches {
            if *end < offset || *base >= limit || (self.tansu_framing && *base < offset) {
                continue;
            }
            if self.tansu_framing {
                out.extend_from_slice(bytes);
                last = *end;
                if bytes.len() > room {
                    break;
                }
                room -= bytes.len();
                continue;
            }
            if !out.is_empty() && out.len() + bytes.len() > max_bytes {
                break;
            }
            out.extend_from_slice(bytes);
            last = *end;
        }
        let aborted = if committed {
            self.aborted
                .iter()
                .filter(|&&(_, first, marker)| marker >= offset && first <= last)
                .map(|&(pid, first, _)| (pid, first))
                .collect()
        } else {
            Vec::new()
        };
        (out, aborted)
    }
}

/// A scripted broker serving one partition; counts the Fetch requests it answered.
struct FakeBroker {
    addr: String,
    fetches: Arc<AtomicUsize>,
    /// Per Fetch: (fetch offset, partition_max_bytes asked).
    fetch_offsets: Arc<Mutex<Vec<(i64, i32)>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for FakeBroker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop.
        let _ = TcpStream::connect(&self.addr);
    }
}

impl FakeBroker {
    fn start(log: Log) -> FakeBroker {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(log);
        let fetches = Arc::new(AtomicUsize::new(0));
        let fetch_offsets = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (f, o, s) = (Arc::clone(&fetches), Arc::clone(&fetch_offsets), Arc::clone(&stop));
        thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (log, f, o) = (Arc::clone(&log), Arc::clone(&f), Arc::clone(&o));
                thread::spawn(move || serve(conn, addr.port(), &log, &f, &o));
            }
        });
        FakeBroker { addr: addr.to_string(), fetches, fetch_offsets, stop }
    }
}

fn serve(
    mut conn: TcpStream,
    port: u16,
    log: &Log,
    fetches: &AtomicUsize,
    offsets: &Mutex<Vec<(i64, i32)>>,
) {
    loop {
        let mut len = [0u8; 4];
        if conn.read_exact(&mut len).is_err() {
            return;
        }
        let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
        if conn.read_exact(&mut frame).is_err() {
            return;
        }
        let api = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).unwrap();
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let mut buf = Bytes::from(frame);
        let header = RequestHeader::decode(&mut buf, api.request_header_version(version)).unwrap();
        let mut body = BytesMut::new();
        match api {
            ApiKey::ApiVersions => {
                let keys = [
                    (ApiKey::ApiVersions, 0, 3),
                    (ApiKey::Metadata, 0, 12),
                    (ApiKey::ListOffsets, 0, log.list_offsets_max),
                    (ApiKey::Fetch, 4, 11),
                ];
                let r = ApiVersionsResponse::default().with_api_keys(
                    keys.iter()
                        .map(|&(k, min, max)| {
                            ApiVersion::default()
                                .with_api_key(k as i16)
                                .with_min_version(min)
                                .with_max_version(max)
                        })
                        .collect(),
                );
                r.encode(&mut body, version).unwrap();
            }
            ApiKey::Metadata => {
                let r = MetadataResponse::default()
                    .with_brokers(vec![
                        MetadataResponseBroker::default()
                            .with_node_id(BrokerId(1))
                            .with_host(StrBytes::from_static_str("127.0.0.1"))
                            .with_port(i32::from(port)),
                    ])
                    .with_controller_id(BrokerId(1))
                    .with_topics(vec![
                        MetadataResponseTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_static_str(TOPIC))))
                            .with_partitions(vec![
                                MetadataResponsePartition::default()
                                    .with_partition_index(0)
                                    .with_leader_id(BrokerId(1))
                                    .with_replica_nodes(vec![BrokerId(1)])
                                    .with_isr_nodes(vec![BrokerId(1)]),
                            ]),
                    ]);
                r.encode(&mut body, version).unwrap();
            }
            ApiKey::ListOffsets => {
                let req = ListOffsetsRequest::decode(&mut buf, version).unwrap();
                let committed = req.isolation_level == 1;
                let topics = req
                    .topics
                    .iter()
                    .map(|t| {
                        let parts = t
                            .partitions
                            .iter()
                            .map(|p| {
                                let (offset, timestamp) = match p.timestamp {
                                    -2 => (0, -1),
                                    -1 if committed => (log.lso, -1),
                                    -1 => (log.hwm, -1),
                                    -3 => {
                                        thread::sleep(log.max_timestamp_delay);
                                        log.max_timestamp()
                                    }
                                    _ => (0, -1),
                                };
                                ListOffsetsPartitionResponse::default()
                                    .with_partition_index(p.partition_index)
                                    .with_timestamp(timestamp)
                                    .with_offset(offset)
                            })
                            .collect();
                        ListOffsetsTopicResponse::default()
                            .with_name(t.name.clone())
                            .with_partitions(parts)
                    })
                    .collect();
                ListOffsetsResponse::default()
                    .with_topics(topics)
                    .encode(&mut body, version)
                    .unwrap();
            }
            ApiKey::Fetch => {
                let req = FetchRequest::decode(&mut buf, version).unwrap();
                thread::sleep(log.fetch_delay);
                while log.hold_fetches.load(Ordering::SeqCst) {
                    thread::sleep(Duration::from_millis(1));
                }
                let committed = req.isolation_level == 1;
                let topics = req
                    .topics
                    .iter()
                    .map(|t| {
                        let parts = t
                            .partitions
                            .iter()
                            .map(|p| {
                                fetches.fetch_add(1, Ordering::SeqCst);
                                offsets
                                    .lock()
                                    .unwrap()
                                    .push((p.fetch_offset, p.partition_max_bytes));
                                let max = (p.partition_max_bytes.max(1) as usize)
                                    .min(req.max_bytes.max(1) as usize);
                                let (records, aborted) = log.fetch(p.fetch_offset, max, committed);
                                PartitionData::default()
                                    .with_partition_index(p.partition)
                                    .with_high_watermark(log.hwm)
                                    .with_last_stable_offset(log.lso)
                                    .with_log_start_offset(0)
                                    .with_aborted_transactions(committed.then(|| {
                                        aborted
                                            .iter()
                                            .map(|&(pid, first)| {
                                                AbortedTransaction::default()
                                                    .with_producer_id(ProducerId(pid))
                                                    .with_first_offset(first)
                                            })
                                            .collect()
                                    }))
                                    .with_records(Some(Bytes::from(records)))
                            })
                            .collect();
                        FetchableTopicResponse::default()
                            .with_topic(t.topic.clone())
                            .with_partitions(parts)
                    })
                    .collect();
                FetchResponse::default().with_responses(topics).encode(&mut body, version).unwrap();
            }
            other => panic!("the fake broker does not answer {other:?}"),
        }
        let mut frame = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut frame, api.response_header_version(version))
            .unwrap();
        frame.extend_from_slice(&body);
        let mut out = (frame.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&frame);
        if conn.write_all(&out).is_err() {
            return;
        }
    }
}

/// `TopicFs` over `ClusterSource` at `isolation` against `broker` with the mount's defaults
/// (sizing budget, bounds asked at every question), and its client (to count requests).
fn fs_counting(broker: &FakeBroker, isolation: Isolation) -> (TopicFs, Arc<Client>) {
    fs_counting_with(broker, isolation, |_, source| source)
}

/// [`fs_counting`], with `extend` given the client's settings and the source to change it
/// (e.g. give it a background client of its own).
fn fs_counting_with(
    broker: &FakeBroker,
    isolation: Isolation,
    extend: impl FnOnce(&ClientConfig, ClusterSource) -> ClusterSource,
) -> (TopicFs, Arc<Client>) {
    let mut config = ClientConfig::default();
    config.set_pair("request.timeout.ms=5000").unwrap();
    let committed = isolation == Isolation::ReadCommitted;
    if !committed {
        config.set_pair("isolation.level=read_uncommitted").unwrap();
    }
    let spec = format!("kafka://{}", broker.addr);
    let client =
        Arc::new(Client::connect(parse_bootstrap(&spec).unwrap(), config.clone()).unwrap());
    let budget = MemoryBudget::new(64 << 20);
    let source = ClusterSource::new(Arc::clone(&client), true)
        .with_committed_reads(committed)
        .with_fetch_memory(budget.fetch_memory(), std::time::Duration::from_secs(30));
    let source = extend(&config, source);
    let options = FsOptions {
        read_only: true,
        partitions_per_topic: 1,
        max_line_bytes: 1 << 20,
        uid: 0,
        gid: 0,
        file_mode: topicfs::fs::DEFAULT_FILE_MODE,
        dir_mode: topicfs::fs::DEFAULT_DIR_MODE,
    };
    let fs = TopicFs::new(Arc::new(source) as Arc<dyn TopicSource>, options)
        .with_shared_limits(budget, 2)
        .with_isolation(isolation);
    (fs, client)
}

/// (Fetch, ListOffsets) requests `client` sent so far.
fn fetch_and_list_offsets(client: &Client) -> (u64, u64) {
    let counts = client.request_counts();
    (counts.get(ApiKey::Fetch), counts.get(ApiKey::ListOffsets))
}

/// `TopicFs` over `ClusterSource` at `isolation` against `broker`, as the mount builds it.
fn fs_for(broker: &FakeBroker, isolation: Isolation, sizing_budget: u64) -> TopicFs {
    fs_with_budget(broker, isolation, sizing_budget, MemoryBudget::new(64 << 20))
}

/// [`fs_for`] sharing `budget` between the view and the fetches, as the mount does.
fn fs_with_budget(
    broker: &FakeBroker,
    isolation: Isolation,
    sizing_budget: u64,
    budget: Arc<MemoryBudget>,
) -> TopicFs {
    let mut config = ClientConfig::default();
    config.set_pair("request.timeout.ms=5000").unwrap();
    let committed = isolation == Isolation::ReadCommitted;
    if !committed {
        config.set_pair("isolation.level=read_uncommitted").unwrap();
    }
    let spec = format!("kafka://{}", broker.addr);
    let client = Client::connect(parse_bootstrap(&spec).unwrap(), config).unwrap();
    let source = ClusterSource::new(Arc::new(client), true)
        .with_sizing_budget(sizing_budget)
        .with_committed_reads(committed)
        .with_fetch_memory(budget.fetch_memory(), std::time::Duration::from_secs(30));
    let options = FsOptions {
        read_only: true,
        partitions_per_topic: 1,
        max_line_bytes: 1 << 20,
        uid: 0,
        gid: 0,
        file_mode: topicfs::fs::DEFAULT_FILE_MODE,
        dir_mode: topicfs::fs::DEFAULT_DIR_MODE,
    };
    TopicFs::new(Arc::new(source) as Arc<dyn TopicSource>, options)
        .with_shared_limits(budget, 2)
        .with_isolation(isolation)
}

fn ino(fs: &TopicFs, path: &str) -> u64 {
    let mut ino = ROOT_INO;
    for name in path.split('/') {
        ino = fs.lookup(ino, OsStr::new(name)).unwrap().attr.ino;
    }
    ino
}

fn read_all(fs: &TopicFs, path: &str) -> String {
    let fh = fs.open(ino(fs, path), READ).unwrap().fh;
    let mut out = Vec::new();
    loop {
        let chunk = fs.read(fh, out.len() as u64, 4096).unwrap();
        if chunk.is_empty() {
            break;
        }
        out.extend(chunk);
    }
    fs.release(fh).unwrap();
    String::from_utf8(out).unwrap()
}

/// 0-1 plain; 2-3 transaction of producer 7, aborted by the marker at 6; 4-5 transaction of 8,
/// committed at 7; 8 plain; 9-10 transaction of 7 again, committed at 11; 12-13 transaction of
/// 9, aborted at 14 (the aborted transaction last before the stable offset); 15-16 transaction
/// of 10, still open: the last stable offset is 15, the high watermark 17.
fn scripted_log() -> Log {
    Log::new(
        vec![
            batch(0, &["a", "b"], -1),
            batch(2, &["aborted-1", "aborted-2"], 7),
            batch(4, &["c", "d"], 8),
            marker(6, 7, false),
            marker(7, 8, true),
            batch(8, &["e"], -1),
            batch(9, &["f", "g"], 7),
            marker(11, 7, true),
            batch(12, &["aborted-3", "aborted-4"], 9),
            marker(14, 9, false),
            batch(15, &["open-1", "open-2"], 10),
        ],
        vec![(7, 2, 6), (9, 12, 14)],
        15,
    )
}

#[test]
fn cluster_read_committed_hides_aborted_transactions_and_stops_at_the_last_stable_offset() {
    let broker = FakeBroker::start(scripted_log());
    let fs = fs_for(&broker, Isolation::ReadCommitted, 1 << 20);
    assert_eq!(read_all(&fs, "tx/0/by-offset/0"), "a\nb\nc\nd\ne\nf\ng\n");
    // From inside the aborted transaction: the broker lists it with its first offset (2).
    assert_eq!(read_all(&fs, "tx/0/by-offset/3"), "c\nd\ne\nf\ng\n");
    // Names resolve against the last stable offset (15): offsets 8 to 14, of which 12-13 are
    // aborted and 11 and 14 are markers.
    assert_eq!(read_all(&fs, "tx/0/by-offset/-7"), "e\nf\ng\n");
    assert_eq!(read_all(&fs, "tx/0/by-offset/-2"), "");
    let json = read_all(&fs, "tx/0/by-offset/0.json");
    let offsets: Vec<&str> = json
        .lines()
        .map(|l| l.split("\"offset\":").nth(1).unwrap().split(',').next().unwrap())
        .collect();
    assert_eq!(offsets, ["0", "1", "4", "5", "8", "9", "10"], "{json}");
    let info = read_all(&fs, "tx/0/info");
    assert!(info.contains("log_end_offset: 15\n"), "{info}");

    // read_uncommitted: every record of every data batch up to the high watermark.
    let fs = fs_for(&broker, Isolation::ReadUncommitted, 1 << 20);
    assert_eq!(
        read_all(&fs, "tx/0/by-offset/0"),
        "a\nb\naborted-1\naborted-2\nc\nd\ne\nf\ng\naborted-3\naborted-4\nopen-1\nopen-2\n"
    );
}

#[test]
fn cluster_read_committed_first_read_costs_one_fetch_whatever_the_partition_size() {
    // 20,000 batches, every other one in a transaction aborted right after it: a partition a
    // scan from the log start would fetch in full before the first byte.
    let mut entries = Vec::new();
    let mut aborted = Vec::new();
    let mut next = 0i64;
    for i in 0..20_000i64 {
        if i % 2 == 0 {
            entries.push(batch(next, &[&format!("r{next}")], -1));
            next += 1;
        } else {
            entries.push(batch(next, &["x"], 100 + i));
            entries.push(marker(next + 1, 100 + i, false));
            aborted.push((100 + i, next, next + 1));
            next += 2;
        }
    }
    let broker = FakeBroker::start(Log::new(entries, aborted, next));
    // A small sizing budget, as for a partition too large to size at open.
    let fs = fs_for(&broker, Isolation::ReadCommitted, 4096);
    let before = broker.fetches.load(Ordering::SeqCst);
    let fh = fs.open(ino(&fs, "tx/0/by-offset/0"), READ).unwrap().fh;
    let first = fs.read(fh, 0, 12).unwrap();
    assert_eq!(String::from_utf8_lossy(&first), "r0\nr3\nr6\nr9\n");
    let fetched = broker.fetches.load(Ordering::SeqCst) - before;
    let offsets = broker.fetch_offsets.lock().unwrap().clone();
    eprintln!("open and first read: {fetched} Fetch requests at offsets {offsets:?}");
    // Bounded by the sizing budget, not by the partition's 30,000 offsets.
    assert!(fetched <= 4, "{fetched} fetches: {offsets:?}");
    fs.release(fh).unwrap();
    // Near the end (30,000 offsets): the first record at or after 29,996 that is not aborted.
    let fh = fs.open(ino(&fs, "tx/0/by-offset/29996"), READ).unwrap().fh;
    assert_eq!(String::from_utf8_lossy(&fs.read(fh, 0, 100).unwrap()), "r29997\n");
    fs.release(fh).unwrap();
}

#[test]
fn cluster_fetches_in_flight_stay_within_the_memory_budget_with_many_readers() {
    // 2,000 batches of 10 records of 100 bytes (about 2.2 MB); each Fetch answers after 2 ms.
    let mut entries = Vec::new();
    for b in 0..2_000i64 {
        let values: Vec<String> = (0..10).map(|i| format!("{:0>99}", b * 10 + i)).collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        entries.push(batch(b * 10, &refs, -1));
    }
    let mut log = Log::new(entries, Vec::new(), 20_000);
    log.fetch_delay = std::time::Duration::from_millis(2);
    let broker = FakeBroker::start(log);
    // A budget of 256 KiB for 16 handles reading at once, 16 KiB at a time.
    const LIMIT: usize = 256 << 10;
    let budget = MemoryBudget::new(LIMIT);
    let fs = Arc::new(fs_with_budget(&broker, Isolation::ReadCommitted, 1, Arc::clone(&budget)));
    let want: String = (0..20_000).map(|n| format!("{n:0>99}\n")).collect();
    let readers: Vec<_> = (0..16)
        .map(|r| {
            let fs = Arc::clone(&fs);
            thread::spawn(move || {
                let start = r * 1_000;
                let fh = fs.open(ino(&fs, &format!("tx/0/by-offset/{start}")), READ).unwrap().fh;
                let mut out = Vec::new();
                loop {
                    let chunk = fs.read(fh, out.len() as u64, 16 << 10).unwrap();
                    if chunk.is_empty() {
                        break;
                    }
                    out.extend(chunk);
                }
                fs.release(fh).unwrap();
                (start, String::from_utf8(out).unwrap())
            })
        })
        .collect();
    for r in readers {
        let (start, got) = r.join().unwrap();
        assert!(got == want[start as usize * 100..], "reader from {start}: {} bytes", got.len());
    }
    let (peak, waits) = (budget.peak_fetching(), budget.fetch_waits());
    eprintln!(
        "16 readers: peak fetched bytes in flight {peak} (limit {LIMIT}), {waits} fetches \
         waited, {} Fetch requests",
        broker.fetches.load(Ordering::SeqCst)
    );
    assert!(peak <= LIMIT, "{peak} bytes of fetches in flight, limit {LIMIT}");
    assert!(waits > 0, "no reader ever had to wait: the test does not exercise the cap");
    assert_eq!(budget.fetching(), 0);
}

/// A plain partition of `records` records of 100 bytes, 10 to a batch.
fn plain_log(records: i64) -> Log {
    let mut entries = Vec::new();
    for b in 0..records / 10 {
        let values: Vec<String> = (0..10).map(|i| format!("{:0>99}", b * 10 + i)).collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        entries.push(batch(b * 10, &refs, -1));
    }
    Log::new(entries, Vec::new(), records)
}

#[test]
fn cluster_open_and_first_read_cost_the_same_requests_whatever_the_partition_size() {
    // What `cat by-offset/0` does: a lookup of the name (its size), an open, an fstat, a first
    // read; then reads of 128 KiB, as FUSE sends them. 1,000 records (110 KB, more than the
    // cluster's 64 KiB sizing budget) against 300,000 (33 MB).
    for isolation in [Isolation::ReadCommitted, Isolation::ReadUncommitted] {
        let mut costs = Vec::new();
        for records in [1_000, 300_000] {
            let broker = FakeBroker::start(plain_log(records));
            let (fs, client) = fs_counting(&broker, isolation);
            let dir = ino(&fs, "tx/0/by-offset");
            let before = fetch_and_list_offsets(&client);
            let entry = fs.lookup(dir, OsStr::new("0")).unwrap();
            // Not yet known: sizing it would take more than one Fetch.
            assert_eq!(entry.attr.size, 0, "{records} records, {isolation:?}");
            let fh = fs.open(entry.attr.ino, READ).unwrap().fh;
            // The fstat answers at once (not yet known) and leaves one more Fetch of sizing to
            // the background.
            let size = fs.getattr(entry.attr.ino, Some(fh)).unwrap().attr.size;
            assert_eq!(size, 0, "{records} records, {isolation:?}");
            let first = fs.read(fh, 0, 1).unwrap().to_vec();
            assert_eq!(first, b"0");
            assert!(fs.wait_for_sizing_steps(Duration::from_secs(10)));
            let after = fetch_and_list_offsets(&client);
            // That step made 1,000 records exact (a stat then costs the bounds only).
            if records == 1_000 {
                let size = fs.getattr(entry.attr.ino, Some(fh)).unwrap().attr.size;
                assert_eq!(size, 100_000, "{isolation:?}");
            }
            let opened = (after.0 - before.0, after.1 - before.1);
            // Another open + first read of the same name (as `head -c 1` again): the read is
            // served by the Fetch answer of offset 0 the mount kept, whatever the size.
            let again = fs.open(entry.attr.ino, READ).unwrap().fh;
            assert_eq!(fs.read(again, 0, 1).unwrap().to_vec(), b"0");
            fs.release(again).unwrap();
            let reopened = fetch_and_list_offsets(&client).0 - after.0;
            assert_eq!(reopened, 0, "{records} records, {isolation:?}: Fetches of a second open");
            let after = fetch_and_list_offsets(&client);
            // The rest, in 128 KiB reads (the view reads ahead of them in the background).
            let mut out = first;
            loop {
                let chunk = fs.read(fh, out.len() as u64, 128 << 10).unwrap();
                if chunk.is_empty() {
                    break;
                }
                out.extend(chunk);
            }
            let want: String = (0..records).map(|n| format!("{n:0>99}\n")).collect();
            assert!(
                out == want.as_bytes(),
                "{records} records, {isolation:?}: {} bytes",
                out.len()
            );
            let done = fetch_and_list_offsets(&client);
            let mib = out.len() as f64 / f64::from(1 << 20);
            let fetch_per_mib = (done.0 - after.0) as f64 / mib;
            let list_offsets = done.1 - after.1;
            eprintln!(
                "{isolation:?}, {records} records: lookup + open + fstat + first read: {} Fetch, \
                 {} ListOffsets; then {fetch_per_mib:.1} Fetch per MiB read, {list_offsets} \
                 ListOffsets in all",
                opened.0, opened.1
            );
            // At most one Fetch to size at the lookup, one the fstat left to the background;
            // the first read is
            // served by the lookup's Fetch answer of offset 0 (the mount keeps its last
            // answers). The bounds asked once per operation (ListOffsets earliest and latest,
            // pipelined) by the lookup, the open, the fstat and the background step, never
            // again within one of them, and not by the read.
            assert!(opened.0 <= 2 && opened.1 <= 8, "{opened:?}");
            // Reads learn the log end from their Fetch answers: no ListOffsets per read (the
            // bounds asked once at the end of the stream at most, whatever its length).
            assert!(list_offsets <= 2, "{list_offsets} ListOffsets");
            // Read-committed Fetches are the view's reads of 64 KiB; read-uncommitted ones keep
            // 1 MiB (max.partition.fetch.bytes) of read-ahead.
            if records > 1_000 {
                let most = if isolation == Isolation::ReadCommitted { 100.0 } else { 50.0 };
                assert!(fetch_per_mib <= most, "{fetch_per_mib} Fetch per MiB");
            }
            fs.release(fh).unwrap();
            costs.push(opened);
        }
        assert_eq!(costs[0], costs[1], "{isolation:?}: the costs depend on the partition size");
    }
}

#[test]
fn cluster_stat_of_a_stream_sized_to_the_budget_answers_without_waiting_for_a_fetch() {
    let log = plain_log(30_000);
    let hold = Arc::clone(&log.hold_fetches);
    let broker = FakeBroker::start(log);
    let (fs, client) = fs_counting(&broker, Isolation::ReadUncommitted);
    let fs = Arc::new(fs);
    let dir = ino(&fs, "tx/0/by-offset");
    // The first sizing is the lookup's own (one Fetch, waited for): not yet known.
    let entry = fs.lookup(dir, OsStr::new("0")).unwrap();
    assert_eq!(entry.attr.size, 0);
    let fetched = fetch_and_list_offsets(&client).0;
    // The broker now holds every Fetch: a stat that waited for one would not answer.
    hold.store(true, Ordering::SeqCst);
    let (tx, rx) = std::sync::mpsc::channel();
    let stat = {
        let fs = Arc::clone(&fs);
        thread::spawn(move || {
            for _ in 0..3 {
                let _ = tx.send(fs.getattr(entry.attr.ino, None).map(|r| r.attr.size));
            }
        })
    };
    let answers: Vec<_> = (0..3).map(|_| rx.recv_timeout(Duration::from_secs(60))).collect();
    hold.store(false, Ordering::SeqCst);
    stat.join().unwrap();
    for answer in answers {
        assert_eq!(answer.expect("a stat waited for a held Fetch").unwrap(), 0);
    }
    assert!(fs.wait_for_sizing_steps(Duration::from_secs(30)));
    // The three stats left one step (the index queued once at a time): one Fetch.
    assert_eq!(fetch_and_list_offsets(&client).0 - fetched, 1);
}

/// Background work has its own connections: the Fetch of a deferred stat's step goes through
/// the background client, never the readers' (a broker answers one connection's requests in
/// order, so on the readers' connection it would delay their next read).
#[test]
fn cluster_deferred_sizing_fetches_through_the_background_client_not_the_readers() {
    let broker = FakeBroker::start(plain_log(30_000));
    let spec = format!("kafka://{}", broker.addr);
    let mut background = None;
    let (fs, readers) = fs_counting_with(&broker, Isolation::ReadUncommitted, |config, source| {
        let client =
            Arc::new(Client::connect(parse_bootstrap(&spec).unwrap(), config.clone()).unwrap());
        background = Some(Arc::clone(&client));
        source.with_background_client(client)
    });
    let background = background.unwrap();
    let dir = ino(&fs, "tx/0/by-offset");
    // The lookup's own sizing (a request): one Fetch, through the readers' client.
    let entry = fs.lookup(dir, OsStr::new("0")).unwrap();
    assert_eq!(entry.attr.size, 0);
    let (readers_fetches, _) = fetch_and_list_offsets(&readers);
    assert!(readers_fetches >= 1);
    assert_eq!(fetch_and_list_offsets(&background).0, 0);
    // A stat leaves a step to the background: its Fetch goes through the background client.
    assert_eq!(fs.getattr(entry.attr.ino, None).unwrap().attr.size, 0);
    assert!(fs.wait_for_sizing_steps(Duration::from_secs(30)));
    assert!(fetch_and_list_offsets(&background).0 >= 1, "the step fetched in the background");
    assert_eq!(
        fetch_and_list_offsets(&readers).0,
        readers_fetches,
        "no step Fetch on the readers' client"
    );
}

/// 52 records in batches of 10 whose timestamps do not ascend: the largest is in the middle.
fn timestamps_log() -> Log {
    let mut entries = Vec::new();
    for b in 0..6_i64 {
        let n = if b == 5 { 2 } else { 10 };
        let records: Vec<NewRecord> = (0..n)
            .map(|i| NewRecord {
                timestamp: 1_767_225_600_000 + if b == 2 { 10_000_000 + i } else { b * 10 + i },
                key: None,
                value: Some(format!("r{}", b * 10 + i).into_bytes()),
                headers: Vec::new(),
            })
            .collect();
        let spec = BatchSpec { base_offset: Offset(b * 10), ..BatchSpec::default() };
        entries.push(encode_batch(&spec, &records).unwrap());
    }
    Log::new(entries, Vec::new(), 52)
}

#[test]
fn cluster_partition_info_shows_the_first_and_max_timestamps_of_its_records() {
    let broker = FakeBroker::start(timestamps_log());
    let fs = fs_for(&broker, Isolation::ReadUncommitted, 1 << 20);
    let info = read_all(&fs, "tx/0/info");
    assert!(info.contains("log_end_offset: 52\n"), "{info}");
    assert!(info.contains("first_timestamp: 1767225600000\n"), "{info}");
    assert!(info.contains("first_time: 2026-01-01T00:00:00.000Z\n"), "{info}");
    // Record 29, in the middle of the log, has the largest timestamp.
    assert!(info.contains("max_timestamp: 1767235600009\n"), "{info}");
    assert!(info.contains("max_time: 2026-01-01T02:46:40.009Z\n"), "{info}");
}

/// The mount's first max-timestamp lookup (ListOffsets `-3`) is waited for 3 s on a task of
/// the executor, not on a thread of its own: when the broker takes longer, the caller gives up
/// while the task still waits for the answer (the connection is kept), and every thread besides
/// the executor's workers is one that was there before. The next lookup fails at once.
#[test]
fn cluster_the_first_max_timestamp_lookup_runs_on_the_executor_not_a_thread_of_its_own() {
    use crate::cluster_read_ahead::{thread_names, threads_but_workers};
    use topicfs::source::OffsetQuery;
    let slow = Log { max_timestamp_delay: Duration::from_secs(6), ..timestamps_log() };
    let broker = FakeBroker::start(slow);
    let mut config = ClientConfig::default();
    config.set_pair("request.timeout.ms=10000").unwrap();
    config.set_pair("isolation.level=read_uncommitted").unwrap();
    let spec = format!("kafka://{}", broker.addr);
    let client = Client::connect(parse_bootstrap(&spec).unwrap(), config).unwrap();
    let executor = topicfs::executor::Executor::with_network(1, 2);
    let source = ClusterSource::new(Arc::new(client), true).with_executor(executor);
    let p = source.partition(TOPIC, 0).unwrap();
    assert_eq!(p.offset_for(OffsetQuery::Latest).unwrap(), Offset(52));
    let others = threads_but_workers();
    let first = p.offset_for(OffsetQuery::MaxTimestamp);
    assert!(matches!(first, Err(topicfs::Error::Timeout { .. })), "{first:?}");
    let names = thread_names();
    let now = names.iter().filter(|n| !n.starts_with("topicfs-bg-")).count();
    assert!(now <= others, "threads besides the workers: {names:?}");
    let next = p.offset_for(OffsetQuery::MaxTimestamp);
    assert!(matches!(next, Err(topicfs::Error::UnsupportedApi { .. })), "{next:?}");
}

#[test]
fn cluster_partition_info_says_unknown_for_a_timestamp_the_broker_does_not_answer() {
    // A broker speaking ListOffsets up to v6 has no max-timestamp lookup.
    let broker = FakeBroker::start(Log { list_offsets_max: 6, ..timestamps_log() });
    let fs = fs_for(&broker, Isolation::ReadUncommitted, 1 << 20);
    let info = read_all(&fs, "tx/0/info");
    assert!(info.contains("first_timestamp: 1767225600000\n"), "{info}");
    assert!(info.contains("max_timestamp: unknown\n"), "{info}");
    assert!(info.contains("max_time: unknown\n"), "{info}");
    // `none` is for a partition without records.
    assert!(!info.contains("none"), "{info}");
}

/// `tx/0` of `broker` read through a `ClusterSource` reading uncommitted (no fetch memory: the
/// window's cap is `max.partition.fetch.bytes`).
fn partition_of(broker: &FakeBroker) -> Arc<dyn topicfs::source::PartitionSource> {
    let mut config = ClientConfig::default();
    config.set_pair("request.timeout.ms=5000").unwrap();
    config.set_pair("isolation.level=read_uncommitted").unwrap();
    let spec = format!("kafka://{}", broker.addr);
    let client = Client::connect(parse_bootstrap(&spec).unwrap(), config).unwrap();
    // Prefetches run on an executor, as a mount's do.
    let executor = topicfs::executor::Executor::new(2);
    let source = ClusterSource::new(Arc::new(client), true).with_executor(executor);
    source.partition(TOPIC, 0).unwrap()
}

/// Reads `part` from `from` to its end in reads of 64 KiB (the view's read size); the offsets
/// of the records read, in order.
fn read_to_end(part: &dyn topicfs::source::PartitionSource, from: i64) -> Vec<i64> {
    let mut cursor = topicfs::source::ReadCursor::at(Offset(from));
    let mut offsets = Vec::new();
    loop {
        let chunk = part
            .read(&cursor, 64 << 10, topicfs::source::ReadMode::Batches)
            .and_then(topicfs::source::ReadAnswer::into_chunk)
            .unwrap();
        let Some(next) = chunk.next else { break };
        let mut pos = 0;
        while pos < chunk.bytes.len() {
            let info = parse_batch_info(&chunk.bytes[pos..]).unwrap();
            offsets.extend((info.base_offset.0..=info.last_offset.0).filter(|o| *o >= from));
            pos += info.size as usize;
        }
        cursor = next;
    }
    offsets
}

#[test]
fn cluster_a_sequential_reader_grows_its_fetches_and_a_random_open_keeps_a_small_first_one() {
    // 300,000 records of 100 bytes (33 MB) read from 0, then a read at 150,000 elsewhere.
    let broker = FakeBroker::start(plain_log(300_000));
    let part = partition_of(&broker);
    let got = read_to_end(part.as_ref(), 0);
    assert!(got == (0..300_000).collect::<Vec<_>>(), "{} records read", got.len());
    let asks = std::mem::take(&mut *broker.fetch_offsets.lock().unwrap());
    let sizes: Vec<i32> = asks.iter().map(|a| a.1).collect();
    eprintln!("{} Fetches, sizes asked: {:?}", asks.len(), &sizes[..sizes.len().min(12)]);
    // The first Fetch is the view's read size; the window doubles from there, up to
    // max.partition.fetch.bytes, and stays there.
    assert_eq!(sizes[0], 64 << 10, "{asks:?}");
    let growth: Vec<i32> = (0..5).map(|i| (64 << 10) << i).collect();
    for s in &sizes {
        assert!(growth.contains(s), "a Fetch of {s} bytes: {sizes:?}");
    }
    let full = sizes.iter().filter(|s| **s == 1 << 20).count();
    assert!(full + 8 >= sizes.len(), "windows that did not grow to 1 MiB: {sizes:?}");
    // Each offset fetched once: the Fetches together ask about the partition's size.
    let asked: i64 = sizes.iter().map(|s| i64::from(*s)).sum();
    assert!(asked <= 33_000_000 + (8 << 20), "{asked} bytes asked for 33 MB");
    // A read elsewhere (a random open) starts with a small Fetch again.
    let got = read_to_end(part.as_ref(), 150_000);
    assert_eq!(got.first(), Some(&150_000));
    let asks = broker.fetch_offsets.lock().unwrap().clone();
    assert_eq!(asks.first(), Some(&(150_000, 64 << 10)), "{asks:?}");
}

#[test]
fn cluster_two_readers_of_one_partition_cost_one_fetch_per_window() {
    let records = 100_000;
    // One reader alone.
    let broker = FakeBroker::start(plain_log(records));
    let part = partition_of(&broker);
    assert_eq!(read_to_end(part.as_ref(), 0).len(), records as usize);
    let alone = broker.fetches.load(Ordering::SeqCst);
    // Two handles of the partition read it in turns, a read each, as two followers do.
    let broker = FakeBroker::start(plain_log(records));
    // Two handles of one source, as a mount's two open files are.
    let mut config = ClientConfig::default();
    config.set_pair("request.timeout.ms=5000").unwrap();
    config.set_pair("isolation.level=read_uncommitted").unwrap();
    let spec = format!("kafka://{}", broker.addr);
    let client = Client::connect(parse_bootstrap(&spec).unwrap(), config).unwrap();
    let executor = topicfs::executor::Executor::new(2);
    let source = ClusterSource::new(Arc::new(client), true).with_executor(executor);
    let handles = [source.partition(TOPIC, 0).unwrap(), source.partition(TOPIC, 0).unwrap()];
    let before = broker.fetches.load(Ordering::SeqCst);
    let mut cursors = [topicfs::source::ReadCursor::at(Offset(0)); 2];
    let mut counts = [0i64; 2];
    let mut done = [false; 2];
    while !done.iter().all(|d| *d) {
        for r in 0..2 {
            if done[r] {
                continue;
            }
            let chunk = handles[r]
                .read(&cursors[r], 64 << 10, topicfs::source::ReadMode::Batches)
                .and_then(topicfs::source::ReadAnswer::into_chunk)
                .unwrap();
            match chunk.next {
                Some(next) => {
                    counts[r] = next.next_offset.0;
                    cursors[r] = next;
                }
                None => done[r] = true,
            }
        }
    }
    assert_eq!(counts, [records, records]);
    let together = broker.fetches.load(Ordering::SeqCst) - before;
    eprintln!("one reader: {alone} Fetches; two readers in turns: {together}");
    // Two readers cost one reader's Fetches (a read at the end, empty, each at most more).
    assert!(together <= alone + 1, "one reader {alone} Fetches, two readers {together}");
}

/// `records` records of 100 bytes in batches of irregular sizes: small ones (1 to 12 records,
/// as a producer with `linger.ms` 0 writes them), or about 1 MB ones (8,800 to 9,200 records,
/// as librdkafka's `batch.size` of 1,000,000 bytes makes at `linger.ms` 20); framed on Fetch
/// as `tansu_framing` says.
fn batches_log(records: i64, large: bool, tansu_framing: bool) -> Log {
    let mut entries = Vec::new();
    let (mut base, mut i) = (0, 0i64);
    while base < records {
        let n = if large { 8_800 + (i * 137) % 400 } else { (i * 7 + i / 13) % 12 + 1 };
        let n = n.min(records - base);
        let values: Vec<String> = (base..base + n).map(|o| format!("{o:0>99}")).collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        entries.push(batch(base, &refs, -1));
        base += n;
        i += 1;
    }
    let mut log = Log::new(entries, Vec::new(), records);
    log.tansu_framing = tansu_framing;
    log
}

/// A source of `broker`'s `tx/0` whose prefetches are queued on an executor that never starts
/// them (its one network task's place is taken until the returned sender is dropped): the
/// reader runs each when it reaches it (as it runs one no worker has started yet), so which
/// Fetches a sequential read sends, from which guessed offsets, does not depend on timing.
fn partition_prefetching_in_order(
    broker: &FakeBroker,
) -> (Arc<dyn topicfs::source::PartitionSource>, std::sync::mpsc::Sender<()>) {
    use topicfs::executor::{Blocking, Class, Executor};
    let mut config = ClientConfig::default();
    config.set_pair("request.timeout.ms=5000").unwrap();
    config.set_pair("isolation.level=read_uncommitted").unwrap();
    let spec = format!("kafka://{}", broker.addr);
    let client = Client::connect(parse_bootstrap(&spec).unwrap(), config).unwrap();
    let executor = Executor::with_network(1, 1);
    let (started_tx, started) = std::sync::mpsc::channel();
    let (release, held) = std::sync::mpsc::channel::<()>();
    executor.submit(Class::ReadAhead, Blocking::Network, move || {
        started_tx.send(()).unwrap();
        let _ = held.recv();
    });
    started.recv().unwrap();
    let source = ClusterSource::new(Arc::new(client), true).with_executor(executor);
    (source.partition(TOPIC, 0).unwrap(), release)
}

#[test]
fn cluster_prefetches_of_small_batches_leave_no_gap_for_the_reader_to_fetch_whatever_the_framing() {
    // Issue 47: with batches of a few records, a guess of where a prefetch ends that passed
    // the end of the answer before left a gap, which the reader reached and fetched itself: a
    // round trip the prefetches were there to hide; with batches of about 1 MB on tansu, a
    // guess inside the batch after an answer's end skipped that batch. Both framings: Kafka's
    // (an answer starts with the batch holding the offset) and tansu's memory engine's (with
    // the batch after it).
    for (records, large, tansu) in [
        (120_000, false, false),
        (120_000, false, true),
        (160_000, true, true),
        (160_000, true, false),
    ] {
        let broker = FakeBroker::start(batches_log(records, large, tansu));
        let (part, release) = partition_prefetching_in_order(&broker);
        let got = read_to_end(part.as_ref(), 0);
        drop(release);
        assert!(got == (0..records).collect::<Vec<_>>(), "tansu {tansu}: {} records", got.len());
        let asks = broker.fetch_offsets.lock().unwrap().clone();
        // Sizes asked: the first read's 64 KiB and the windows growing from it; a gap's Fetch
        // asks 64 KiB again once the windows have grown.
        let grown = asks.iter().position(|a| a.1 > 64 << 10).unwrap_or(asks.len());
        let gaps: Vec<_> = asks[grown..].iter().filter(|a| a.1 <= 64 << 10).collect();
        eprintln!(
            "tansu framing {tansu}: {} Fetches, gaps fetched by the reader {gaps:?}",
            asks.len()
        );
        assert!(
            gaps.is_empty(),
            "tansu framing {tansu}: the reader fetched gaps {gaps:?} of {asks:?}"
        );
        // Guesses short of the end read little twice: about the partition's size asked.
        let size = records as usize * 100;
        let asked: usize = asks.iter().map(|a| a.1 as usize).sum();
        assert!(
            asked <= size + size / 4 + (8 << 20),
            "tansu {tansu}: {asked} bytes asked for {size}"
        );
    }
}
