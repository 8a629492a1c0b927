//! Leader moves, against a scripted cluster of two brokers: tansu is a single broker, so a
//! partition's leadership can never move there. Two fake brokers on 127.0.0.1 (node 1 "A",
//! node 2 "B") share one partition `moved/0` (its batches and the brokers' idempotent-producer
//! state, as replicas do). The test moves the leadership: the broker that is no longer leader
//! answers ListOffsets, Fetch and Produce with NOT_LEADER_OR_FOLLOWER (or a scripted code such
//! as LEADER_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION), and the next Metadata answers follow
//! a script (the stale leader, then no leader, then the new one). Reads through the filesystem
//! logic and through a real mount must return exactly the records, an append must land once
//! with its sequence numbers carried over to the new leader, and a partition whose leader never
//! becomes available must fail within `request.timeout.ms`, naming the broker and the
//! partition.

use crate::common;

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use common::fs_fixture::{self, FsFixture};
use common::{Dirs, MountGuard, sh, sh_output};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, FetchRequest, FetchResponse, InitProducerIdResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataResponse, ProduceRequest, ProduceResponse,
    ProducerId, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use topicfs::cluster::config::parse_bootstrap;
use topicfs::cluster::{Client, ClientConfig, ClusterSource};
use topicfs::fs::TopicFs;
use topicfs::fs::attr::OpenRequest;
use topicfs::source::TopicSource;

const TOPIC: &str = "moved";
const A: i32 = 1;
const B: i32 = 2;
const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: false };
const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };

/// An idempotent producer as the brokers remember it: the next sequence expected and the
/// batches stored, as (base sequence, base offset).
#[derive(Default)]
struct ProducerState {
    next: i32,
    stored: Vec<(i32, i64)>,
}

/// What the two brokers share.
#[derive(Default)]
struct State {
    /// The node that leads `moved/0` (-1: none).
    leader: i32,
    /// Leaders the next Metadata answers name, one per answer, before `leader`.
    metadata_script: VecDeque<i32>,
    /// Codes a broker answers its next partition requests with, one per request, before
    /// serving (or refusing as a non-leader).
    refusals: HashMap<i32, VecDeque<i16>>,
    /// (base offset, last offset, bytes) in offset order.
    batches: Vec<(i64, i64, Vec<u8>)>,
    producers: HashMap<i64, ProducerState>,
    next_producer_id: i64,
    /// A move that happens right before the first request of an API (to the old leader):
    /// (that API, the new leader, the Metadata script from then on).
    pending_move: Option<(ApiKey, i32, Vec<i32>)>,
    /// Set: the next Produce stored is not answered (its broker closes the connection) and the
    /// leadership moves to this node at that moment.
    lose_produce_answer_and_move_to: Option<i32>,
    /// Produce requests answered as duplicates of a batch already stored.
    duplicates: usize,
    /// Every partition request and Metadata: (node, API, error code answered).
    requests: Vec<(i32, ApiKey, i16)>,
    /// Produce requests refused for a sequence gap, or stored a second time: must stay empty.
    sequence_errors: Vec<String>,
}

impl State {
    fn hwm(&self) -> i64 {
        self.batches.last().map_or(0, |b| b.1 + 1)
    }

    /// The error code `node` answers a request for `moved/0` with (0: it serves it).
    fn gate(&mut self, node: i32, api: ApiKey) -> i16 {
        if self.pending_move.as_ref().is_some_and(|m| m.0 == api) {
            let (_, to, script) = self.pending_move.take().unwrap();
            self.leader = to;
            self.metadata_script = script.into();
        }
        if let Some(code) = self.refusals.get_mut(&node).and_then(VecDeque::pop_front) {
            return code;
        }
        match self.leader {
            l if l == node => 0,
            l if l < 0 => 5,
            _ => 6,
        }
    }

    /// Stores a produced batch as Kafka's idempotent producer state does: the expected sequence
    /// is appended, a batch already stored is answered with its first offset, a gap is
    /// OUT_OF_ORDER_SEQUENCE_NUMBER (and noted).
    fn produce(&mut self, mut batch: Vec<u8>) -> (i16, i64) {
        let info = topicfs::format::parse_batch_info(&batch).unwrap();
        let count = info.records_count;
        let base = self.hwm();
        if info.producer_id >= 0 {
            let p = self.producers.entry(info.producer_id).or_default();
            if let Some(&(_, offset)) = p.stored.iter().find(|s| s.0 == info.base_sequence) {
                self.duplicates += 1;
                return (0, offset);
            }
            if info.base_sequence != p.next {
                self.sequence_errors.push(format!(
                    "producer {} sent sequence {}, expected {}",
                    info.producer_id, info.base_sequence, p.next
                ));
                return (45, -1);
            }
            p.next += count;
            p.stored.push((info.base_sequence, base));
        }
        batch[..8].copy_from_slice(&base.to_be_bytes());
        let last = base + (info.last_offset.0 - info.base_offset.0);
        self.batches.push((base, last, batch));
        (0, base)
    }

    fn fetch(&self, offset: i64, max_bytes: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for (_, end, bytes) in &self.batches {
            if *end < offset {
                continue;
            }
            if !out.is_empty() && out.len() + bytes.len() > max_bytes {
                break;
            }
            out.extend_from_slice(bytes);
        }
        out
    }
}

/// Two scripted brokers sharing [`State`]; stopped on drop.
struct FakeCluster {
    ports: HashMap<i32, u16>,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    /// Connections accepted, by both brokers.
    accepted: Arc<AtomicUsize>,
    /// How the brokers misbehave: 0 they answer, [`HANG_UP`] they close every connection at
    /// once (as a broker going away does), [`SILENT`] they read requests and never answer.
    fault: Arc<AtomicUsize>,
}

const HANG_UP: usize = 1;
const SILENT: usize = 2;

impl Drop for FakeCluster {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for port in self.ports.values() {
            let _ = TcpStream::connect(("127.0.0.1", *port));
        }
    }
}

impl FakeCluster {
    fn start(leader: i32) -> FakeCluster {
        let state =
            Arc::new(Mutex::new(State { leader, next_producer_id: 1000, ..State::default() }));
        let stop = Arc::new(AtomicBool::new(false));
        let listeners: Vec<(i32, TcpListener)> =
            [A, B].iter().map(|&n| (n, TcpListener::bind("127.0.0.1:0").unwrap())).collect();
        let ports: HashMap<i32, u16> =
            listeners.iter().map(|(n, l)| (*n, l.local_addr().unwrap().port())).collect();
        let accepted = Arc::new(AtomicUsize::new(0));
        let fault = Arc::new(AtomicUsize::new(0));
        for (node, listener) in listeners {
            let (state, stop, ports) = (Arc::clone(&state), Arc::clone(&stop), ports.clone());
            let (accepted, fault) = (Arc::clone(&accepted), Arc::clone(&fault));
            thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let (state, ports, fault) =
                        (Arc::clone(&state), ports.clone(), Arc::clone(&fault));
                    thread::spawn(move || serve(conn, node, &ports, &state, &fault));
                }
            });
        }
        FakeCluster { ports, state, stop, accepted, fault }
    }

    fn bootstrap(&self, node: i32) -> String {
        format!("kafka://127.0.0.1:{}", self.ports[&node])
    }

    fn addr(&self, node: i32) -> String {
        format!("127.0.0.1:{}", self.ports[&node])
    }

    /// Moves the leadership to `to`; the next Metadata answers name `script` first.
    fn move_leader(&self, to: i32, script: &[i32]) {
        let mut s = self.state.lock().unwrap();
        s.leader = to;
        s.metadata_script = script.iter().copied().collect();
    }

    /// Moves the leadership to `to` right before the next `api` request reaches any broker.
    fn move_leader_before(&self, api: ApiKey, to: i32, script: &[i32]) {
        self.state.lock().unwrap().pending_move = Some((api, to, script.to_vec()));
    }

    fn refuse(&self, node: i32, codes: &[i16]) {
        self.state.lock().unwrap().refusals.insert(node, codes.iter().copied().collect());
    }

    /// The requests since the last call: (node, API, code).
    fn take_requests(&self) -> Vec<(i32, ApiKey, i16)> {
        std::mem::take(&mut self.state.lock().unwrap().requests)
    }

    fn sequence_errors(&self) -> Vec<String> {
        self.state.lock().unwrap().sequence_errors.clone()
    }

    /// The stored records' values in offset order, and the offsets of the batches.
    fn stored(&self) -> (Vec<String>, Vec<i64>) {
        let s = self.state.lock().unwrap();
        let mut values = Vec::new();
        for (_, _, bytes) in &s.batches {
            let batch = topicfs::format::decode_batch(bytes).unwrap();
            for r in batch.records() {
                values.push(String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap());
            }
        }
        (values, s.batches.iter().map(|b| b.0).collect())
    }
}

fn answer(api: ApiKey, version: i16, body: &mut BytesMut, r: &impl Encodable) {
    r.encode(body, version).unwrap_or_else(|e| panic!("encoding {api:?} v{version}: {e}"));
}

fn serve(
    mut conn: TcpStream,
    node: i32,
    ports: &HashMap<i32, u16>,
    state: &Mutex<State>,
    fault: &AtomicUsize,
) {
    loop {
        if fault.load(Ordering::SeqCst) == HANG_UP {
            return;
        }
        let mut len = [0u8; 4];
        if conn.read_exact(&mut len).is_err() {
            return;
        }
        let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
        if conn.read_exact(&mut frame).is_err() {
            return;
        }
        match fault.load(Ordering::SeqCst) {
            HANG_UP => return,
            SILENT => continue,
            _ => {}
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
                    (ApiKey::ListOffsets, 0, 7),
                    (ApiKey::Fetch, 4, 11),
                    (ApiKey::Produce, 3, 9),
                    (ApiKey::InitProducerId, 0, 4),
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
                answer(api, version, &mut body, &r);
            }
            ApiKey::Metadata => {
                let mut s = state.lock().unwrap();
                let leader = s.metadata_script.pop_front().unwrap_or(s.leader);
                s.requests.push((node, api, 0));
                let brokers = [A, B]
                    .iter()
                    .map(|&n| {
                        MetadataResponseBroker::default()
                            .with_node_id(BrokerId(n))
                            .with_host(StrBytes::from_static_str("127.0.0.1"))
                            .with_port(i32::from(ports[&n]))
                    })
                    .collect();
                let r = MetadataResponse::default()
                    .with_brokers(brokers)
                    .with_controller_id(BrokerId(A))
                    .with_topics(vec![
                        MetadataResponseTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_static_str(TOPIC))))
                            .with_partitions(vec![
                                MetadataResponsePartition::default()
                                    .with_partition_index(0)
                                    .with_error_code(if leader < 0 { 5 } else { 0 })
                                    .with_leader_id(BrokerId(leader))
                                    .with_replica_nodes(vec![BrokerId(A), BrokerId(B)])
                                    .with_isr_nodes(vec![BrokerId(A), BrokerId(B)]),
                            ]),
                    ]);
                answer(api, version, &mut body, &r);
            }
            ApiKey::InitProducerId => {
                let mut s = state.lock().unwrap();
                let id = s.next_producer_id;
                s.next_producer_id += 1;
                let r = InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(id))
                    .with_producer_epoch(0);
                answer(api, version, &mut body, &r);
            }
            ApiKey::ListOffsets => {
                let req = ListOffsetsRequest::decode(&mut buf, version).unwrap();
                let mut s = state.lock().unwrap();
                let topics = req
                    .topics
                    .iter()
                    .map(|t| {
                        let parts = t
                            .partitions
                            .iter()
                            .map(|p| {
                                let code = s.gate(node, api);
                                s.requests.push((node, api, code));
                                let offset = match p.timestamp {
                                    -1 => s.hwm(),
                                    _ => 0,
                                };
                                ListOffsetsPartitionResponse::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                                    .with_timestamp(-1)
                                    .with_offset(if code == 0 { offset } else { -1 })
                            })
                            .collect();
                        ListOffsetsTopicResponse::default()
                            .with_name(t.name.clone())
                            .with_partitions(parts)
                    })
                    .collect();
                answer(
                    api,
                    version,
                    &mut body,
                    &ListOffsetsResponse::default().with_topics(topics),
                );
            }
            ApiKey::Fetch => {
                let req = FetchRequest::decode(&mut buf, version).unwrap();
                let mut s = state.lock().unwrap();
                let topics = req
                    .topics
                    .iter()
                    .map(|t| {
                        let parts = t
                            .partitions
                            .iter()
                            .map(|p| {
                                let code = s.gate(node, api);
                                s.requests.push((node, api, code));
                                let max = (p.partition_max_bytes.max(1) as usize)
                                    .min(req.max_bytes.max(1) as usize);
                                let records = match code {
                                    0 => s.fetch(p.fetch_offset, max),
                                    _ => Vec::new(),
                                };
                                let hwm = if code == 0 { s.hwm() } else { -1 };
                                PartitionData::default()
                                    .with_partition_index(p.partition)
                                    .with_error_code(code)
                                    .with_high_watermark(hwm)
                                    .with_last_stable_offset(hwm)
                                    .with_log_start_offset(0)
                                    .with_aborted_transactions(
                                        (req.isolation_level == 1).then(Vec::new),
                                    )
                                    .with_records(Some(Bytes::from(records)))
                            })
                            .collect();
                        FetchableTopicResponse::default()
                            .with_topic(t.topic.clone())
                            .with_partitions(parts)
                    })
                    .collect();
                answer(api, version, &mut body, &FetchResponse::default().with_responses(topics));
            }
            ApiKey::Produce => {
                let mut lost = false;
                let req = ProduceRequest::decode(&mut buf, version).unwrap();
                let mut s = state.lock().unwrap();
                let topics = req
                    .topic_data
                    .iter()
                    .map(|t| {
                        let parts = t
                            .partition_data
                            .iter()
                            .map(|p| {
                                let mut code = s.gate(node, api);
                                let mut base = -1;
                                if code == 0 {
                                    let batch = p.records.clone().unwrap().to_vec();
                                    (code, base) = s.produce(batch);
                                    if let Some(to) = s.lose_produce_answer_and_move_to.take() {
                                        s.leader = to;
                                        lost = true;
                                    }
                                }
                                s.requests.push((node, api, code));
                                PartitionProduceResponse::default()
                                    .with_index(p.index)
                                    .with_error_code(code)
                                    .with_base_offset(base)
                                    .with_log_append_time_ms(-1)
                            })
                            .collect();
                        TopicProduceResponse::default()
                            .with_name(t.name.clone())
                            .with_partition_responses(parts)
                    })
                    .collect();
                if lost {
                    // Stored, never answered: the connection drops.
                    return;
                }
                answer(api, version, &mut body, &ProduceResponse::default().with_responses(topics));
            }
            other => panic!("the fake cluster does not answer {other:?}"),
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

fn client(cluster: &FakeCluster, timeout_ms: u32) -> Arc<Client> {
    client_with(cluster, &[&format!("request.timeout.ms={timeout_ms}")])
}

fn client_with(cluster: &FakeCluster, settings: &[&str]) -> Arc<Client> {
    let mut config = ClientConfig::default();
    for s in settings {
        config.set_pair(s).unwrap();
    }
    Arc::new(Client::connect(parse_bootstrap(&cluster.bootstrap(A)).unwrap(), config).unwrap())
}

fn fs_over(client: Arc<Client>) -> TopicFs {
    let source = ClusterSource::new(client, false);
    FsFixture::over(Arc::new(source) as Arc<dyn TopicSource>).read_only(false).build()
}

fn append(fs: &TopicFs, data: &[u8]) -> topicfs::Result<()> {
    let fh = fs.open(fs_fixture::ino(fs, &format!("{TOPIC}/0/append"))?, WRITE)?.fh;
    let written = fs.write(fh, data, None);
    let flushed = fs.flush(fh, None);
    fs.release(fh)?;
    written?;
    flushed
}

fn read(fs: &TopicFs) -> String {
    String::from_utf8(fs_fixture::read_path(fs, &format!("{TOPIC}/0/by-offset/0"), 4096)).unwrap()
}

/// Whether `requests` holds `api` answered by `node` with `code`.
fn saw(requests: &[(i32, ApiKey, i16)], node: i32, api: ApiKey, code: i16) -> bool {
    requests.contains(&(node, api, code))
}

#[test]
fn cluster_leader_moves_are_invisible_to_reads_and_appends() {
    let cluster = FakeCluster::start(A);
    let fs = fs_over(client(&cluster, 10_000));

    // A leads: the first append lands there (producer sequence 0, two records).
    append(&fs, b"one\ntwo\n").unwrap();
    let r = cluster.take_requests();
    assert!(saw(&r, A, ApiKey::Produce, 0), "{r:?}");

    // Leadership moves to B right before the Fetch of a read: A answers it with
    // NOT_LEADER_OR_FOLLOWER; the next Metadata still names A (stale), then none
    // (LEADER_NOT_AVAILABLE), then B, which serves the Fetch.
    cluster.move_leader_before(ApiKey::Fetch, B, &[A, -1, B]);
    let text = read(&fs);
    let r = cluster.take_requests();
    eprintln!("read across a move: {r:?}");
    assert_eq!(text, "one\ntwo\n");
    assert!(saw(&r, A, ApiKey::Fetch, 6), "A never refused the Fetch: {r:?}");
    assert!(saw(&r, B, ApiKey::Fetch, 0), "B never served the Fetch: {r:?}");

    // The next append: Produce to B, which first answers UNKNOWN_TOPIC_OR_PARTITION (as a broker
    // does right after a create, before it has the partition), then stores it with sequence 2,
    // carried over from A: neither a duplicate nor a gap.
    cluster.refuse(B, &[3]);
    append(&fs, b"three\n").unwrap();
    let r = cluster.take_requests();
    assert!(saw(&r, B, ApiKey::Produce, 3) && saw(&r, B, ApiKey::Produce, 0), "{r:?}");

    // Back to A right before a Produce: B answers NOT_LEADER_OR_FOLLOWER, Metadata names B once
    // more, then A, which answers LEADER_NOT_AVAILABLE once (still becoming leader), then stores
    // the batch with sequence 3.
    cluster.refuse(A, &[5]);
    cluster.move_leader_before(ApiKey::Produce, A, &[B, A]);
    append(&fs, b"four\nfive\n").unwrap();
    let r = cluster.take_requests();
    eprintln!("append across a move: {r:?}");
    assert!(saw(&r, B, ApiKey::Produce, 6), "B never refused the Produce: {r:?}");
    assert!(saw(&r, A, ApiKey::Produce, 5) && saw(&r, A, ApiKey::Produce, 0), "{r:?}");

    // To B again right before a ListOffsets (a new open).
    cluster.move_leader_before(ApiKey::ListOffsets, B, &[]);
    let text = read(&fs);
    let r = cluster.take_requests();
    eprintln!("open across a move: {r:?}");
    assert!(saw(&r, A, ApiKey::ListOffsets, 6), "A never refused ListOffsets: {r:?}");
    assert!(saw(&r, B, ApiKey::ListOffsets, 0), "{r:?}");
    assert_eq!(text, "one\ntwo\nthree\nfour\nfive\n");

    // Each record stored exactly once, in order, in three batches; no sequence was refused.
    let (values, bases) = cluster.stored();
    assert_eq!(values, ["one", "two", "three", "four", "five"]);
    assert_eq!(bases, [0, 2, 3]);
    assert_eq!(cluster.sequence_errors(), Vec::<String>::new());
}

/// The answer to a stored Produce is lost (the old leader's connection drops) and the
/// leadership moves at that moment: the client resends the same batch (same producer id and
/// sequence) to the new leader, which recognises it, so the records are stored once.
#[test]
fn cluster_leader_move_after_a_lost_produce_answer_stores_the_batch_once() {
    let cluster = FakeCluster::start(A);
    let fs = fs_over(client(&cluster, 10_000));
    append(&fs, b"before\n").unwrap();
    cluster.state.lock().unwrap().lose_produce_answer_and_move_to = Some(B);
    append(&fs, b"lost-answer-1\nlost-answer-2\n").unwrap();
    let r = cluster.take_requests();
    eprintln!("a lost Produce answer across a move: {r:?}");
    assert!(saw(&r, A, ApiKey::Produce, 0) && saw(&r, B, ApiKey::Produce, 0), "{r:?}");
    append(&fs, b"after\n").unwrap();
    assert_eq!(cluster.state.lock().unwrap().duplicates, 1, "the resent batch was not recognised");
    assert_eq!(cluster.stored().0, ["before", "lost-answer-1", "lost-answer-2", "after"]);
    assert_eq!(cluster.sequence_errors(), Vec::<String>::new());
    assert_eq!(read(&fs), "before\nlost-answer-1\nlost-answer-2\nafter\n");
}

#[test]
fn cluster_leader_that_never_comes_fails_within_the_deadline_naming_broker_and_partition() {
    let cluster = FakeCluster::start(A);
    let fs = fs_over(client(&cluster, 2_000));
    append(&fs, b"kept\n").unwrap();
    // No broker leads the partition from now on: every Metadata says LEADER_NOT_AVAILABLE.
    cluster.move_leader(-1, &[]);
    // The cached Metadata still names A, which refuses; the refreshed ones name no leader.
    let start = Instant::now();
    let err = fs_fixture::ino(&fs, &format!("{TOPIC}/0/by-offset/0"))
        .and_then(|ino| fs.open(ino, READ).map(|o| o.fh))
        .and_then(|fh| fs_fixture::read_to_end(&fs, fh, 4096))
        .unwrap_err();
    let elapsed = start.elapsed();
    eprintln!("no leader: failed after {elapsed:?} (request.timeout.ms=2000): {err}");
    let msg = err.to_string();
    assert_eq!(err.errno(), libc::EIO, "{msg}");
    assert!(msg.contains("LEADER_NOT_AVAILABLE"), "{msg}");
    assert!(msg.contains(&format!("{TOPIC}/0")), "{msg}");
    assert!(msg.contains("127.0.0.1:"), "names no broker: {msg}");
    let start = Instant::now();
    let err = append(&fs, b"lost\n").unwrap_err();
    eprintln!("no leader: append failed after {:?}: {err}", start.elapsed());
    assert_eq!(err.errno(), libc::EIO, "{err}");
    assert!(err.to_string().contains("LEADER_NOT_AVAILABLE"), "{err}");
    assert_eq!(cluster.stored().0, ["kept"]);
}

#[test]
fn cluster_leader_move_through_a_real_mount_cat_reads_exactly_and_append_lands_once() {
    let cluster = FakeCluster::start(A);
    let source = OsString::from(cluster.bootstrap(A));
    let args = ["--config", "request.timeout.ms=3000"];
    let log = tempfile::NamedTempFile::new().unwrap();
    let file = std::fs::File::create(log.path()).unwrap();
    let m = MountGuard::foreground_source(Dirs::new(), &source, &args, Stdio::from(file));
    let mnt = m.mnt();
    let p = format!("{}/{TOPIC}/0", mnt.display());
    sh(&format!("printf 'a\\nb\\n' >> {p}/append"));
    cluster.move_leader(B, &[A, -1, B]);
    sh(&format!("printf 'c\\n' >> {p}/append"));
    cluster.refuse(A, &[5]);
    cluster.move_leader(A, &[B, -1, A]);
    assert_eq!(sh(&format!("cat {p}/by-offset/0")), "a\nb\nc\n");
    let r = cluster.take_requests();
    assert!(saw(&r, A, ApiKey::Produce, 6) && saw(&r, B, ApiKey::Produce, 0), "{r:?}");
    assert!(saw(&r, B, ApiKey::ListOffsets, 6) || saw(&r, B, ApiKey::Fetch, 6), "{r:?}");
    assert_eq!(cluster.stored().0, ["a", "b", "c"]);
    assert_eq!(cluster.sequence_errors(), Vec::<String>::new());

    // No leader at all: cat fails within the deadline with EIO, the daemon logs broker and
    // partition.
    cluster.move_leader(-1, &[]);
    let start = Instant::now();
    let out = sh_output(&format!("cat {p}/by-offset/0"));
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("no leader: cat failed after {:?} (request.timeout.ms=3000): {err}", start.elapsed());
    assert!(!out.status.success());
    assert!(err.contains("Input/output error"), "{err}");
    m.unmount();
    let log = std::fs::read_to_string(log.path()).unwrap();
    let named = |l: &&str| {
        l.contains("LEADER_NOT_AVAILABLE")
            && l.contains(&format!("{TOPIC}/0"))
            && (l.contains(&cluster.addr(A)) || l.contains(&cluster.addr(B)))
    };
    assert!(log.lines().any(|l| named(&l)), "no log line names the broker and partition:\n{log}");
}

/// `reconnect.backoff.max.ms` and `socket.connection.setup.timeout.ms`: a broker that hung up
/// on every connection for a whole deadline counts as down for the window, so the next request
/// makes exactly one connection attempt and fails; with the window off (0) the next request
/// retries connecting until its own deadline. A silent down broker gets one connection setup
/// of at most `socket.connection.setup.timeout.ms` (times printed, not asserted).
#[test]
fn cluster_down_broker_window_and_probe_follow_their_settings() {
    for (window, one_attempt) in [("60000", true), ("0", false)] {
        let cluster = FakeCluster::start(A);
        let client = client_with(
            &cluster,
            &[
                "request.timeout.ms=1500",
                &format!("reconnect.backoff.max.ms={window}"),
                "socket.connection.setup.timeout.ms=200",
                "retry.backoff.ms=20",
                "retry.backoff.max.ms=100",
            ],
        );
        client.list_offset(TOPIC, 0, -1).unwrap();
        cluster.fault.store(HANG_UP, Ordering::SeqCst);
        let err = client.list_offset(TOPIC, 0, -1).unwrap_err();
        assert!([libc::EIO, libc::ETIMEDOUT].contains(&err.errno()), "{err}");
        let before = cluster.accepted.load(Ordering::SeqCst);
        let start = Instant::now();
        let err = client.list_offset(TOPIC, 0, -1).unwrap_err();
        let attempts = cluster.accepted.load(Ordering::SeqCst) - before;
        eprintln!(
            "reconnect.backoff.max.ms={window}: the next request made {attempts} connections \
             and failed after {:?}: {err}",
            start.elapsed()
        );
        assert!([libc::EIO, libc::ETIMEDOUT].contains(&err.errno()), "{err}");
        if one_attempt {
            assert_eq!(attempts, 1, "a down broker gets one connection attempt");
        } else {
            assert!(attempts > 1, "without the window the request retries: {attempts}");
        }
    }
    // Silent: the connection opens, ApiVersions is never answered.
    let cluster = FakeCluster::start(A);
    let client = client_with(
        &cluster,
        &["request.timeout.ms=1500", "socket.connection.setup.timeout.ms=200"],
    );
    client.list_offset(TOPIC, 0, -1).unwrap();
    cluster.fault.store(SILENT, Ordering::SeqCst);
    let start = Instant::now();
    let err = client.list_offset(TOPIC, 0, -1).unwrap_err();
    eprintln!("silent broker: first request failed after {:?}: {err}", start.elapsed());
    assert_eq!(err.errno(), libc::ETIMEDOUT, "{err}");
    let before = cluster.accepted.load(Ordering::SeqCst);
    let start = Instant::now();
    let err = client.list_offset(TOPIC, 0, -1).unwrap_err();
    eprintln!(
        "silent broker counted down: next request failed after {:?} \
         (socket.connection.setup.timeout.ms=200): {err}",
        start.elapsed()
    );
    assert_eq!(err.errno(), libc::ETIMEDOUT, "{err}");
    assert_eq!(cluster.accepted.load(Ordering::SeqCst) - before, 1);
}
