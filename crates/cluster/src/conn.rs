//! One connection to one broker: blocking std TCP (optionally TLS), requests pipelined by
//! correlation id, a deadline on everything.
//!
//! Invariants:
//! - Every thread of the daemon shares the one [`Connection`] to a broker. A request is
//!   encoded, registered under a fresh correlation id, and written whole under the write lock,
//!   so frames never interleave; the caller then waits for *its* response only. Responses are
//!   read by one reader thread per connection, which hands each frame to the waiter registered
//!   under the frame's correlation id. Kafka answers requests on one connection in order, but
//!   nothing here relies on that.
//! - Nothing waits without a deadline: connecting (TCP connect, TLS handshake, ApiVersions,
//!   SASL) ends by the connect deadline; a request's write has a socket write timeout and its
//!   wait for the response a receive timeout, both the time left to the request's deadline.
//! - A request that times out kills the connection (as Kafka's Java client does): its response
//!   may still arrive and the broker may be wedged, so the socket is shut down, every other
//!   waiter on it gets an error at once, and the next request opens a new connection. The reader
//!   thread ends when the socket is shut down or the broker closes it; a dead connection never
//!   comes back to life.
//! - A frame longer than [`Connection::max_frame`] (a broker gone mad, or not a Kafka broker)
//!   kills the connection rather than allocating it.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::messages::{
    ApiVersionsResponse, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DescribeConfigsRequest, DescribeConfigsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FetchRequest, FetchResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    InitProducerIdRequest, InitProducerIdResponse, ListGroupsRequest, ListGroupsResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    ProduceRequest, ProduceResponse, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};

use super::config::{BrokerAddr, ClientConfig};
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;

mod handshake;
mod reader;

use handshake::{connect, tls_handshake, tls_refused};
use reader::Reader;

/// A request this client sends: its API key and response type. (kafka-protocol's own `Request`
/// trait needs its `broker` feature, which would also build the request decoders.)
pub trait Api: Encodable + Message {
    /// The API key.
    const KEY: ApiKey;
    /// The response.
    type Response: Decodable;
}

macro_rules! apis {
    ($($req:ident => $resp:ident, $key:ident;)*) => {
        $(impl Api for $req {
            const KEY: ApiKey = ApiKey::$key;
            type Response = $resp;
        })*
    };
}

apis! {
    ApiVersionsRequest => ApiVersionsResponse, ApiVersions;
    SaslHandshakeRequest => SaslHandshakeResponse, SaslHandshake;
    SaslAuthenticateRequest => SaslAuthenticateResponse, SaslAuthenticate;
    MetadataRequest => MetadataResponse, Metadata;
    ListOffsetsRequest => ListOffsetsResponse, ListOffsets;
    FetchRequest => FetchResponse, Fetch;
    ProduceRequest => ProduceResponse, Produce;
    InitProducerIdRequest => InitProducerIdResponse, InitProducerId;
    CreateTopicsRequest => CreateTopicsResponse, CreateTopics;
    CreatePartitionsRequest => CreatePartitionsResponse, CreatePartitions;
    DescribeConfigsRequest => DescribeConfigsResponse, DescribeConfigs;
    IncrementalAlterConfigsRequest => IncrementalAlterConfigsResponse, IncrementalAlterConfigs;
    FindCoordinatorRequest => FindCoordinatorResponse, FindCoordinator;
    OffsetCommitRequest => OffsetCommitResponse, OffsetCommit;
    OffsetFetchRequest => OffsetFetchResponse, OffsetFetch;
    ListGroupsRequest => ListGroupsResponse, ListGroups;
    DescribeGroupsRequest => DescribeGroupsResponse, DescribeGroups;
}

/// Time left until `deadline`, at least 1 ms (a zero socket timeout means "none").
fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))
}

/// The versions of each API a broker advertised in ApiVersions.
#[derive(Clone, Debug, Default)]
pub struct ApiVersions(HashMap<i16, (i16, i16)>);

impl ApiVersions {
    /// The highest version both the broker and this client speak for `api`, where this client
    /// speaks `ours` (inclusive), or `None`.
    pub fn pick(&self, api: ApiKey, ours: (i16, i16)) -> Option<i16> {
        let &(min, max) = self.0.get(&(api as i16))?;
        let (lo, hi) = (min.max(ours.0), max.min(ours.1));
        (lo <= hi).then_some(hi)
    }

    /// The broker's advertised range for `api`.
    pub fn range(&self, api: ApiKey) -> Option<(i16, i16)> {
        self.0.get(&(api as i16)).copied()
    }
}

/// Requests sent, per API, by every connection of one client: what a stream's open or read
/// costs in round trips, for tests and measurements (`Client::request_counts`). Counted when a
/// request is written, whatever its answer.
pub struct RequestCounts {
    by_key: Box<[AtomicU64]>,
}

/// One past the highest API key counted (Kafka's keys are below 100).
const COUNTED_KEYS: usize = 128;

impl Default for RequestCounts {
    fn default() -> Self {
        RequestCounts { by_key: (0..COUNTED_KEYS).map(|_| AtomicU64::new(0)).collect() }
    }
}

impl RequestCounts {
    /// Requests of `api` sent so far.
    pub fn get(&self, api: ApiKey) -> u64 {
        usize::try_from(api as i16)
            .ok()
            .and_then(|k| self.by_key.get(k))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Requests of every API sent so far.
    pub fn total(&self) -> u64 {
        self.by_key.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    fn note(&self, api: ApiKey) {
        if let Some(c) = usize::try_from(api as i16).ok().and_then(|k| self.by_key.get(k)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for RequestCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        for (k, c) in self.by_key.iter().enumerate() {
            let n = c.load(Ordering::Relaxed);
            if n > 0 {
                match i16::try_from(k).ok().and_then(|k| ApiKey::try_from(k).ok()) {
                    Some(api) => m.entry(&api_name(api), &n),
                    None => m.entry(&k, &n),
                };
            }
        }
        m.finish()
    }
}

/// Bookkeeping shared by callers and the reader thread.
struct Pending {
    waiters: HashMap<i32, mpsc::SyncSender<Bytes>>,
    /// Why the connection died, once it has.
    dead: Option<String>,
}

struct Shared {
    pending: Mutex<Pending>,
    /// Notified when `pending.dead` is set.
    died: Condvar,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            pending: Mutex::new(Pending { waiters: HashMap::new(), dead: None }),
            died: Condvar::new(),
        }
    }

    fn kill(&self, why: String) {
        let mut p = lock(&self.pending);
        if p.dead.is_none() {
            p.dead = Some(why);
        }
        // Dropping the senders wakes every waiter with `Disconnected`.
        p.waiters.clear();
        drop(p);
        self.died.notify_all();
    }

    fn dead(&self) -> Option<String> {
        lock(&self.pending).dead.clone()
    }

    /// Why the connection died, waiting for it until `deadline`; `None` if it is still alive
    /// then.
    fn wait_dead(&self, deadline: Instant) -> Option<String> {
        let mut p = lock(&self.pending);
        loop {
            if let Some(why) = &p.dead {
                return Some(why.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            p = self
                .died
                .wait_timeout(p, left)
                .map(|(p, _)| p)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

/// A live (or dead) connection to one broker. See the module docs for its invariants.
pub struct Connection {
    addr: BrokerAddr,
    client_id: StrBytes,
    socket: TcpStream,
    tls: Option<Arc<Mutex<rustls::ClientConnection>>>,
    write_lock: Arc<Mutex<()>>,
    shared: Arc<Shared>,
    next_id: AtomicI32,
    versions: ApiVersions,
    /// `request.timeout.ms`, for messages.
    timeout_ms: u64,
    /// Set once a flexible (v12+) Fetch response of this broker failed to decode because of a
    /// tagged field not defined for its version (tansu 0.6 sends `NodeEndpoints`, a v16 field,
    /// at v12): Fetch then stays at v11 on this connection.
    fetch_untagged: AtomicBool,
    /// The client's count of requests sent (shared by its connections).
    counts: Arc<RequestCounts>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Ends the reader thread.
        let _ = self.socket.shutdown(Shutdown::Both);
    }
}

impl Connection {
    /// The largest response frame accepted: a Fetch response may exceed `fetch.max.bytes` by
    /// one batch (Kafka returns the first batch whole so a consumer can progress), so the cap
    /// is the larger fetch setting plus 64 MiB, never less than 128 MiB.
    pub fn max_frame(config: &ClientConfig) -> usize {
        let fetch = config.fetch_max_bytes.max(config.max_partition_fetch_bytes).max(0) as usize;
        (fetch + (64 << 20)).max(128 << 20)
    }

    /// Connects, handshakes TLS, negotiates API versions and authenticates, all by `deadline`;
    /// every request it sends is counted in `counts`.
    pub fn open(
        addr: &BrokerAddr,
        config: &ClientConfig,
        tls_config: Option<&Arc<rustls::ClientConfig>>,
        deadline: Instant,
        counts: Arc<RequestCounts>,
    ) -> Result<Connection> {
        let timeout_ms = config.request_timeout.as_millis() as u64;
        let socket = connect(addr, deadline, timeout_ms)?;
        let unreachable = |op: &str, source: io::Error| Error::BrokerUnreachable {
            broker: addr.to_string(),
            op: op.to_string(),
            source,
        };
        socket.set_nodelay(true).map_err(|e| unreachable("set TCP_NODELAY", e))?;
        let tls = match tls_config {
            None => None,
            Some(tls_config) => Some(Arc::new(Mutex::new(tls_handshake(
                addr, &socket, tls_config, deadline, timeout_ms,
            )?))),
        };
        let reader_socket = socket.try_clone().map_err(|e| unreachable("clone socket", e))?;
        // Reads block until data or shutdown; deadlines are enforced by the waiters.
        reader_socket.set_read_timeout(None).map_err(|e| unreachable("set read timeout", e))?;
        let shared = Arc::new(Shared::new());
        let write_lock = Arc::new(Mutex::new(()));
        let reader = Reader {
            addr: addr.clone(),
            socket: reader_socket,
            writer: socket.try_clone().map_err(|e| unreachable("clone socket", e))?,
            tls: tls.clone(),
            write_lock: Arc::clone(&write_lock),
            shared: Arc::clone(&shared),
            max_frame: Connection::max_frame(config),
        };
        // A dedicated thread: it blocks in the socket's read for the connection's whole life.
        topicfs_executor::spawn_dedicated(format!("kafka-rx {addr}"), move || reader.run())
            .map_err(|e| unreachable("spawn reader thread", e))?;
        let mut conn = Connection {
            addr: addr.clone(),
            client_id: StrBytes::from_string(config.client_id.clone()),
            socket,
            tls,
            write_lock,
            shared,
            next_id: AtomicI32::new(1),
            versions: ApiVersions::default(),
            timeout_ms,
            fetch_untagged: AtomicBool::new(false),
            counts,
        };
        conn.versions = conn.api_versions(deadline).map_err(|e| tls_refused(e, config))?;
        if config.security_protocol.sasl() {
            conn.authenticate(config, deadline)?;
        }
        Ok(conn)
    }

    /// The broker this connection goes to.
    pub fn addr(&self) -> &BrokerAddr {
        &self.addr
    }

    /// The versions the broker advertised.
    pub fn versions(&self) -> &ApiVersions {
        &self.versions
    }

    /// Whether Fetch must stay below v12 on this connection (see `fetch_untagged`).
    pub fn fetch_untagged(&self) -> bool {
        self.fetch_untagged.load(Ordering::Relaxed)
    }

    /// Records that this broker's flexible Fetch responses carry tagged fields their version
    /// does not define.
    pub fn set_fetch_untagged(&self) {
        if !self.fetch_untagged.swap(true, Ordering::Relaxed) {
            log::info!(
                "broker {}: Fetch v12+ responses carry undefined tagged fields; using Fetch v11",
                self.addr
            );
        }
    }

    /// Whether the connection has died (then a new one is needed).
    pub fn is_dead(&self) -> bool {
        self.shared.dead().is_some()
    }

    /// Kills the connection: every waiter fails now, the reader thread ends.
    pub fn kill(&self, why: &str) {
        self.shared.kill(why.to_string());
        let _ = self.socket.shutdown(Shutdown::Both);
    }

    /// The highest version of `R` both sides speak, capped at `cap` (the highest this client
    /// implements for `R`).
    pub fn version<R: Api>(&self, cap: i16) -> Result<i16> {
        let api = R::KEY;
        let ours = (R::VERSIONS.min, R::VERSIONS.max.min(cap));
        self.versions.pick(api, ours).ok_or_else(|| Error::UnsupportedApi {
            broker: self.addr.to_string(),
            api: api_name(api),
            why: match self.versions.range(api) {
                None => "the broker does not advertise it in ApiVersions".to_string(),
                Some((lo, hi)) => {
                    format!(
                        "it offers versions {lo}..{hi}, this client speaks {}..{}",
                        ours.0, ours.1
                    )
                }
            },
        })
    }

    fn encode<R: Api>(&self, req: &R, version: i16) -> Result<(i32, Bytes)> {
        let api = R::KEY;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(id)
            .with_client_id(Some(self.client_id.clone()));
        let mut buf = BytesMut::with_capacity(64);
        buf.put_i32(0);
        let encoded = header
            .encode(&mut buf, api.request_header_version(version))
            .and_then(|()| req.encode(&mut buf, version));
        encoded.map_err(|e| {
            Error::InvalidInput(format!("{} v{version}: cannot encode: {e}", api_name(api)))
        })?;
        let len = i32::try_from(buf.len() - 4)
            .map_err(|_| Error::InvalidInput(format!("{} request over 2 GiB", api_name(api))))?;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        Ok((id, buf.freeze()))
    }

    /// Sends `req` at `version` and waits for its response until `deadline`.
    pub fn call<R: Api>(&self, req: &R, version: i16, deadline: Instant) -> Result<R::Response> {
        let mut answers = self.call_all(std::slice::from_ref(req), version, deadline)?;
        answers.pop().unwrap_or_else(|| Err(self.dead_error(R::KEY, "no response")))
    }

    /// Sends every request of `reqs` at `version` at once (pipelined: their frames in one
    /// write, each under its own correlation id), then waits for each response until
    /// `deadline`: one round trip for all of them instead of one each. The answers are in the
    /// order of `reqs`; a request that timed out (which kills the connection) or whose answer
    /// does not decode is an error in its place. `Err` when nothing could be sent.
    pub fn call_all<R: Api>(
        &self,
        reqs: &[R],
        version: i16,
        deadline: Instant,
    ) -> Result<Vec<Result<R::Response>>> {
        let api = R::KEY;
        let mut frames = Vec::with_capacity(reqs.len());
        for req in reqs {
            frames.push(self.encode(req, version)?);
        }
        let sent = Instant::now();
        let mut waits = Vec::with_capacity(frames.len());
        {
            let mut p = lock(&self.shared.pending);
            if let Some(why) = &p.dead {
                return Err(self.dead_error(api, why));
            }
            for (id, _) in &frames {
                let (tx, rx) = mpsc::sync_channel(1);
                p.waiters.insert(*id, tx);
                waits.push((*id, rx));
            }
        }
        let written = match frames.as_slice() {
            [(_, frame)] => self.write_frame(frame, deadline),
            _ => {
                let all: Vec<&[u8]> = frames.iter().map(|(_, f)| f.as_ref()).collect();
                self.write_frame(&all.concat(), deadline)
            }
        };
        for _ in &frames {
            self.counts.note(api);
        }
        if let Err(e) = written {
            let mut p = lock(&self.shared.pending);
            for (id, _) in &frames {
                p.waiters.remove(id);
            }
            return Err(e);
        }
        let mut answers = Vec::with_capacity(waits.len());
        for (id, rx) in waits {
            answers.push(
                match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(response) => {
                        log::trace!(
                            "broker {}: {} v{version}: {} bytes answered in {:?}",
                            self.addr,
                            api_name(api),
                            response.len(),
                            sent.elapsed()
                        );
                        self.decode::<R>(version, response)
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        lock(&self.shared.pending).waiters.remove(&id);
                        self.kill(&format!("{} timed out", api_name(api)));
                        Err(Error::Timeout {
                            broker: self.addr.to_string(),
                            what: api_name(api).to_string(),
                            after_ms: self.timeout_ms,
                        })
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        let why =
                            self.shared.dead().unwrap_or_else(|| "connection closed".to_string());
                        Err(self.dead_error(api, &why))
                    }
                },
            );
        }
        Ok(answers)
    }

    /// Sends `req` without waiting for a response (Produce with `acks=0`, which has none).
    pub fn send_only<R: Api>(&self, req: &R, version: i16, deadline: Instant) -> Result<()> {
        if let Some(why) = self.shared.dead() {
            return Err(self.dead_error(R::KEY, &why));
        }
        let (_, frame) = self.encode(req, version)?;
        self.counts.note(R::KEY);
        self.write_frame(&frame, deadline)
    }

    fn dead_error(&self, api: ApiKey, why: &str) -> Error {
        Error::BrokerUnreachable {
            broker: self.addr.to_string(),
            op: api_name(api).to_string(),
            source: io::Error::new(io::ErrorKind::ConnectionAborted, why.to_string()),
        }
    }

    fn decode<R: Api>(&self, version: i16, mut frame: Bytes) -> Result<R::Response> {
        let api = R::KEY;
        let bad = |e: String| Error::Protocol {
            broker: self.addr.to_string(),
            what: format!("{} v{version} response: {e}", api_name(api)),
        };
        ResponseHeader::decode(&mut frame, api.response_header_version(version))
            .map_err(|e| bad(e.to_string()))?;
        <R::Response as Decodable>::decode(&mut frame, version).map_err(|e| bad(e.to_string()))
    }

    /// Writes one whole frame under the write lock, with the socket write timeout set to the
    /// time left. A failed or timed-out write kills the connection (a partial frame cannot be
    /// taken back).
    fn write_frame(&self, frame: &[u8], deadline: Instant) -> Result<()> {
        let guard = lock(&self.write_lock);
        if let Some(why) = self.shared.dead() {
            drop(guard);
            return Err(Error::BrokerUnreachable {
                broker: self.addr.to_string(),
                op: "write request".to_string(),
                source: io::Error::new(io::ErrorKind::ConnectionAborted, why),
            });
        }
        let result =
            self.socket.set_write_timeout(Some(left(deadline))).and_then(|()| match &self.tls {
                None => (&self.socket).write_all(frame),
                Some(tls) => {
                    let mut out = Vec::with_capacity(frame.len() + 64);
                    {
                        let mut tls = lock(tls);
                        tls.writer().write_all(frame)?;
                        while tls.wants_write() {
                            tls.write_tls(&mut out)?;
                        }
                    }
                    (&self.socket).write_all(&out)
                }
            });
        drop(guard);
        result.map_err(|e| self.write_failed(e, deadline))
    }

    /// The error of a request whose write failed with `e`. A write that timed out kills the
    /// connection. Any other failure means the connection is already broken (the broker closed
    /// or reset it, or the reader thread shut it down): the reader, which reads in order what
    /// the broker sent before that, ends on its own and names the first cause (bytes that are
    /// not a Kafka response, a TLS alert, the broker closing). That cause is reported, whichever
    /// of the reader and the writer noticed first; the write's own error only if the reader has
    /// not ended by `deadline`.
    fn write_failed(&self, e: io::Error, deadline: Instant) -> Error {
        let timed_out = matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut);
        if timed_out {
            self.kill(&format!("write failed: {e}"));
            return Error::Timeout {
                broker: self.addr.to_string(),
                what: "writing a request".to_string(),
                after_ms: self.timeout_ms,
            };
        }
        let source = match self.shared.wait_dead(deadline) {
            Some(why) => io::Error::new(io::ErrorKind::ConnectionAborted, why),
            None => {
                self.kill(&format!("write failed: {e}"));
                e
            }
        };
        Error::BrokerUnreachable {
            broker: self.addr.to_string(),
            op: "write request".into(),
            source,
        }
    }
}

/// Kafka's name of an API, for messages.
pub fn api_name(api: ApiKey) -> &'static str {
    match api {
        ApiKey::Produce => "Produce",
        ApiKey::Fetch => "Fetch",
        ApiKey::ListOffsets => "ListOffsets",
        ApiKey::Metadata => "Metadata",
        ApiKey::OffsetCommit => "OffsetCommit",
        ApiKey::OffsetFetch => "OffsetFetch",
        ApiKey::FindCoordinator => "FindCoordinator",
        ApiKey::DescribeGroups => "DescribeGroups",
        ApiKey::ListGroups => "ListGroups",
        ApiKey::SaslHandshake => "SaslHandshake",
        ApiKey::ApiVersions => "ApiVersions",
        ApiKey::CreateTopics => "CreateTopics",
        ApiKey::InitProducerId => "InitProducerId",
        ApiKey::SaslAuthenticate => "SaslAuthenticate",
        ApiKey::CreatePartitions => "CreatePartitions",
        ApiKey::DescribeConfigs => "DescribeConfigs",
        ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
        _ => "a Kafka API",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_pick_is_the_highest_common_one() {
        let v =
            ApiVersions([(1i16, (0i16, 17i16)), (3, (0, 12)), (37, (5, 6))].into_iter().collect());
        assert_eq!(v.pick(ApiKey::Fetch, (4, 12)), Some(12));
        assert_eq!(v.pick(ApiKey::Metadata, (0, 13)), Some(12));
        assert_eq!(v.pick(ApiKey::CreatePartitions, (0, 3)), None);
        assert_eq!(v.pick(ApiKey::Produce, (3, 11)), None);
    }

    /// A connection to a listener of this process, without a handshake, and the peer's end.
    fn bare_connection() -> (Connection, TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let socket = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (peer, _) = listener.accept().unwrap();
        let conn = Connection {
            addr: BrokerAddr { host: "127.0.0.1".into(), port: 9 },
            client_id: StrBytes::from_static_str("test"),
            socket,
            tls: None,
            write_lock: Arc::new(Mutex::new(())),
            shared: Arc::new(Shared::new()),
            next_id: AtomicI32::new(1),
            versions: ApiVersions::default(),
            timeout_ms: 5000,
            fetch_untagged: AtomicBool::new(false),
            counts: Arc::new(RequestCounts::default()),
        };
        (conn, peer)
    }

    const GARBAGE: &str = "response frame of 2147483647 bytes (limit 134217728 bytes): not a \
                           Kafka response";

    #[test]
    fn a_failed_write_reports_what_the_reader_found_whichever_noticed_first() {
        let pipe = || io::Error::from(io::ErrorKind::BrokenPipe);
        let far = Instant::now() + Duration::from_secs(60);
        // The reader first: it saw bytes that are no Kafka response and shut the socket down,
        // so the write failed.
        let (conn, _peer) = bare_connection();
        conn.kill(GARBAGE);
        let err = conn.write_failed(pipe(), far).to_string();
        assert!(err.contains("not a Kafka response") && err.contains("write request"), "{err}");
        // The writer first: its error waits for the reader's verdict, which names the cause.
        let (conn, _peer) = bare_connection();
        let conn = Arc::new(conn);
        let writer = {
            let conn = Arc::clone(&conn);
            std::thread::spawn(move || conn.write_failed(pipe(), far).to_string())
        };
        conn.shared.kill(GARBAGE.to_string());
        let err = writer.join().unwrap();
        assert!(err.contains("not a Kafka response"), "{err}");
        // A reader that has not ended by the deadline: the write's own error, and the
        // connection is dead from then on.
        let (conn, _peer) = bare_connection();
        let err = conn.write_failed(pipe(), Instant::now()).to_string();
        assert!(err.contains("write request") && !err.contains("Kafka response"), "{err}");
        assert!(conn.is_dead());
        // A write that timed out is a timeout at once.
        let (conn, _peer) = bare_connection();
        let err = conn.write_failed(io::Error::from(io::ErrorKind::WouldBlock), far);
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert!(conn.is_dead());
    }

    #[test]
    fn max_frame_covers_fetch_settings() {
        let mut c = ClientConfig::default();
        assert!(Connection::max_frame(&c) >= c.fetch_max_bytes as usize);
        c.fetch_max_bytes = 500 << 20;
        assert!(Connection::max_frame(&c) > 500 << 20);
    }
}
