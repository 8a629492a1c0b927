//! The Kafka client the cluster backend uses: one [`Client`] per mount, shared by every FUSE
//! worker thread.
//!
//! Invariants:
//! - One [`Connection`] per broker, shared by all threads (requests pipelined by correlation
//!   id). A dead connection is replaced by the next request that needs that broker.
//! - Every public method has one deadline, `request.timeout.ms` from its start, that covers
//!   metadata refreshes, reconnects, retries and backoff: it returns (an answer or an error)
//!   by then, plus at most one backoff step's rounding.
//! - A broker that a request could not reach for its whole deadline (unreachable, or silent
//!   until the deadline) is *down* for the next `reconnect.backoff.max.ms` (by default
//!   `request.timeout.ms`; 0: never) ([`Client::down`]): a request that needs it then makes
//!   one connection attempt of at most `socket.connection.setup.timeout.ms` (1 s) and, when
//!   that fails, fails at once with that error (not retried), so one shell command of several
//!   requests against a dead broker ends within about one deadline, not one deadline per
//!   request. A successful connection ends it at once (the broker is back).
//! - Retries pause `retry.backoff.ms` (50 ms), doubling up to `retry.backoff.max.ms` (1 s).
//! - Metadata is cached and refreshed when older than `metadata.max.age.ms`, and at once when
//!   a broker answers NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION
//!   and the like ([`super::errors::retriable_code`]); then the request is retried. A topic
//!   that a fresh Metadata does not list is `NotFound` at once, not retried until the deadline.
//! - Produce is idempotent by default: one producer id (InitProducerId) per client, a sequence
//!   number per partition, one produce in flight per partition. A retry resends the same batch
//!   with the same producer id, epoch and sequence, which the broker deduplicates. When a
//!   produce finally fails, the producer id is dropped, so the next produce starts a new
//!   session rather than guessing whether the failed batch landed.
//!
//! One file a job:
//! - `mod.rs` (here): the [`Client`] type and its shared state, TLS settings, connections
//!   (per broker, any broker), leader routing, the deadline and the retry loop
//!   (`Client::retry`), [`Client::supports`];
//! - `metadata.rs`: Metadata, its cache and refresh ([`ClusterMetadata`]);
//! - `offsets.rs`: ListOffsets ([`LATEST`], [`EARLIEST`], [`MAX_TIMESTAMP`], [`ListedOffset`]);
//! - `fetch.rs`: Fetch ([`FetchOptions`], [`FetchedPartition`]);
//! - `produce.rs`: InitProducerId, the idempotent producer session and sequences, Produce;
//! - `admin.rs`: CreateTopics and CreatePartitions (through the controller);
//! - `configs.rs`: a topic's settings, DescribeConfigs and IncrementalAlterConfigs;
//! - `groups.rs`: FindCoordinator, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::config::{BrokerAddr, ClientConfig};
use super::conn::{Connection, RequestCounts};
use super::errors::{kafka_error, retriable};
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;

mod admin;
mod configs;
mod fetch;
mod groups;
mod metadata;
mod offsets;
mod produce;

pub use configs::{ConfigOp, DescribedConfig};
pub use fetch::{AbortedTransaction, FetchOptions, FetchedPartition};
pub use groups::{CommittedOffset, GroupDescription, GroupListing, GroupMember};
pub use metadata::{ClusterMetadata, PartitionMetadata, TopicMetadata};
pub use offsets::{EARLIEST, LATEST, ListedOffset, MAX_TIMESTAMP, OffsetAnswer, OffsetQuery};
pub use produce::Produced;
use produce::{ProducerSession, Sequences};

/// Default CA bundle when `ssl.ca.location` is not given (Debian's).
const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

type Slot = Arc<Mutex<Option<Arc<Connection>>>>;

/// The client. See the module docs for its invariants.
pub struct Client {
    config: Arc<ClientConfig>,
    bootstrap: Vec<BrokerAddr>,
    tls: Option<Arc<rustls::ClientConfig>>,
    slots: Mutex<HashMap<BrokerAddr, Slot>>,
    metadata: Mutex<Option<Arc<ClusterMetadata>>>,
    refresh_lock: Mutex<()>,
    producer: Mutex<Option<ProducerSession>>,
    next_generation: Mutex<u64>,
    sequences: Mutex<Sequences>,
    /// Brokers (by address as written in errors) that a request could not reach for its whole
    /// deadline, and until when they count as down.
    down: Mutex<HashMap<String, Instant>>,
    /// Requests sent by every connection of this client.
    counts: Arc<RequestCounts>,
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn ms_i32(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

/// The rustls configuration for `config` (None for PLAINTEXT and SASL_PLAINTEXT).
pub fn tls_config(config: &ClientConfig) -> Result<Option<Arc<rustls::ClientConfig>>> {
    if !config.security_protocol.tls() {
        return Ok(None);
    }
    let path = config.ssl_ca_location.clone().unwrap_or_else(|| SYSTEM_CA_BUNDLE.into());
    let bad =
        |what: String| Error::InvalidInput(format!("ssl.ca.location {}: {what}", path.display()));
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(&path).map_err(|e| bad(e.to_string()))?;
    for cert in certs {
        let cert = cert.map_err(|e| bad(e.to_string()))?;
        roots.add(cert).map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad("no PEM certificate in the file".into()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots);
    let tls = match (&config.ssl_certificate_location, &config.ssl_key_location) {
        (Some(cert), Some(key)) => {
            let (chain, key) = client_certificate(cert, key)?;
            tls.with_client_auth_cert(chain, key).map_err(|e| {
                Error::InvalidInput(format!(
                    "ssl.key.location {} and ssl.certificate.location {}: {e} (is it the \
                     certificate's key?)",
                    key_path_display(config),
                    cert.display()
                ))
            })?
        }
        _ => tls.with_no_client_auth(),
    };
    Ok(Some(Arc::new(tls)))
}

fn key_path_display(config: &ClientConfig) -> String {
    config.ssl_key_location.as_ref().map_or_else(String::new, |p| p.display().to_string())
}

/// The client certificate chain (`ssl.certificate.location`, leaf first) and its private key
/// (`ssl.key.location`), both PEM; an unreadable or empty file is an error naming it.
fn client_certificate(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let bad = |setting: &str, path: &std::path::Path, what: String| {
        Error::InvalidInput(format!("{setting} {}: {what}", path.display()))
    };
    let mut chain = Vec::new();
    let certs = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad("ssl.certificate.location", cert, e.to_string()))?;
    for c in certs {
        chain.push(c.map_err(|e| bad("ssl.certificate.location", cert, e.to_string()))?);
    }
    if chain.is_empty() {
        return Err(bad("ssl.certificate.location", cert, "no PEM certificate in the file".into()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        let what = match e {
            rustls_pki_types::pem::Error::NoItemsFound => {
                "no PEM private key in the file (an encrypted key is not supported)".to_string()
            }
            e => e.to_string(),
        };
        bad("ssl.key.location", key, what)
    })?;
    Ok((chain, key))
}

impl Client {
    /// A client for the cluster behind `bootstrap`; fetches metadata once, so a cluster that
    /// does not answer (or refuses the credentials) fails here, within `request.timeout.ms`.
    pub fn connect(bootstrap: Vec<BrokerAddr>, config: ClientConfig) -> Result<Client> {
        config.validate()?;
        let tls = tls_config(&config)?;
        let client = Client {
            config: Arc::new(config),
            bootstrap,
            tls,
            slots: Mutex::new(HashMap::new()),
            metadata: Mutex::new(None),
            refresh_lock: Mutex::new(()),
            producer: Mutex::new(None),
            next_generation: Mutex::new(1),
            sequences: Mutex::new(HashMap::new()),
            down: Mutex::new(HashMap::new()),
            counts: Arc::new(RequestCounts::default()),
        };
        client.refresh_metadata(client.deadline())?;
        Ok(client)
    }

    /// The settings.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Requests sent so far, per API (every connection, retries included).
    pub fn request_counts(&self) -> &RequestCounts {
        &self.counts
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.config.request_timeout
    }

    fn timeout_ms(&self) -> u64 {
        self.config.request_timeout.as_millis() as u64
    }

    /// Fills the elapsed deadline into a timeout error.
    fn with_timeout(&self, e: Error) -> Error {
        match e {
            Error::Timeout { broker, what, .. } => {
                Error::Timeout { broker, what, after_ms: self.timeout_ms() }
            }
            e => e,
        }
    }

    /// The shared connection to `addr`, opened (or reopened after it died) if needed.
    fn conn(&self, addr: &BrokerAddr, deadline: Instant) -> Result<Arc<Connection>> {
        let slot = Arc::clone(lock(&self.slots).entry(addr.clone()).or_default());
        let mut slot = lock(&slot);
        if let Some(c) = slot.as_ref().filter(|c| !c.is_dead()) {
            return Ok(Arc::clone(c));
        }
        *slot = None;
        let probe = self.down(&addr.to_string());
        let deadline = match probe {
            true => deadline.min(Instant::now() + self.config.socket_connection_setup_timeout),
            false => deadline,
        };
        let c = match Connection::open(
            addr,
            &self.config,
            self.tls.as_ref(),
            deadline,
            Arc::clone(&self.counts),
        ) {
            Ok(c) => Arc::new(c),
            // Say why a request failed before its deadline.
            Err(Error::Timeout { broker, what, after_ms }) if probe => {
                let what = format!(
                    "{what} (the broker counts as down: one connection attempt of at most \
                     socket.connection.setup.timeout.ms = {} ms)",
                    self.config.socket_connection_setup_timeout.as_millis()
                );
                return Err(Error::Timeout { broker, what, after_ms });
            }
            Err(e) => return Err(e),
        };
        lock(&self.down).remove(&addr.to_string());
        *slot = Some(Arc::clone(&c));
        Ok(c)
    }

    /// Whether the broker at `addr` counts as down: a request could not reach it for its
    /// whole deadline less than `reconnect.backoff.max.ms` ago, and no connection to it was
    /// opened since.
    fn down(&self, addr: &str) -> bool {
        lock(&self.down).get(addr).is_some_and(|until| Instant::now() < *until)
    }

    /// The brokers an unreachable-broker error names (one address, or the bootstrap list
    /// joined with commas).
    fn named_brokers(e: &Error) -> Option<impl Iterator<Item = &str>> {
        match e {
            Error::BrokerUnreachable { broker, .. } | Error::Timeout { broker, .. } => {
                Some(broker.split(','))
            }
            _ => None,
        }
    }

    /// Whether `e` came from brokers that are all down (then it is not retried).
    fn names_only_down_brokers(&self, e: &Error) -> bool {
        Client::named_brokers(e).is_some_and(|mut names| names.all(|b| self.down(b)))
    }

    /// After a request ended with `e`: when it could not reach its broker(s) for its whole
    /// deadline, they are down for the next `reconnect.backoff.max.ms` (unless already).
    fn note_down(&self, e: &Error) {
        let Some(names) = Client::named_brokers(e) else { return };
        let window = self.config.broker_down_for();
        if window.is_zero() {
            return;
        }
        let until = Instant::now() + window;
        let mut down = lock(&self.down);
        for b in names {
            if down.get(b).is_none_or(|t| Instant::now() >= *t) {
                log::info!(
                    "broker {b} did not answer within request.timeout.ms ({} ms): requests \
                     to it fail after one connection attempt of at most {} ms \
                     (socket.connection.setup.timeout.ms) until it answers or {} ms pass \
                     (reconnect.backoff.max.ms)",
                    self.timeout_ms(),
                    self.config.socket_connection_setup_timeout.as_millis(),
                    window.as_millis()
                );
                down.insert(b.to_string(), until);
            }
        }
    }

    /// The connection to broker `id` per the metadata.
    fn broker_conn(
        &self,
        md: &ClusterMetadata,
        id: i32,
        deadline: Instant,
    ) -> Result<Arc<Connection>> {
        let addr = md.brokers.get(&id).ok_or_else(|| {
            kafka_error(
                &format!("node {id}"),
                "Metadata",
                5,
                None,
                None,
                Some(format!("broker {id} not in metadata")),
            )
        })?;
        self.conn(addr, deadline)
    }

    /// A connection to any broker: the known ones first, then the bootstrap list.
    fn any_conn(&self, deadline: Instant) -> Result<Arc<Connection>> {
        let mut candidates: Vec<BrokerAddr> = lock(&self.metadata)
            .as_ref()
            .map(|m| m.brokers.values().cloned().collect())
            .unwrap_or_default();
        for b in &self.bootstrap {
            if !candidates.contains(b) {
                candidates.push(b.clone());
            }
        }
        let mut last = None;
        for addr in &candidates {
            match self.conn(addr, deadline) {
                Ok(c) => return Ok(c),
                // Wrong credentials are wrong on every broker.
                Err(e @ Error::AuthFailed { .. }) => return Err(e),
                Err(e) => {
                    log::debug!("broker {addr}: {e}");
                    last = Some(e);
                }
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        let all: Vec<String> = candidates.iter().map(ToString::to_string).collect();
        Err(match last {
            Some(Error::BrokerUnreachable { op, source, .. }) => {
                Error::BrokerUnreachable { broker: all.join(","), op, source }
            }
            Some(Error::Timeout { what, .. }) => {
                Error::Timeout { broker: all.join(","), what, after_ms: self.timeout_ms() }
            }
            Some(e) => e,
            None => Error::Timeout {
                broker: all.join(","),
                what: "connect".into(),
                after_ms: self.timeout_ms(),
            },
        })
    }

    /// The one retry loop of every request: runs `op` (one attempt: route to the leader,
    /// coordinator or controller, send, map the answer's error codes) until it succeeds, fails
    /// with an error not worth retrying, or the deadline comes. Returns the last error, with
    /// the timeout filled in.
    ///
    /// Invariants:
    /// - Every attempt gets the same `deadline` (the caller's one `request.timeout.ms`): the
    ///   attempts, the metadata refreshes and the pauses between them all fit inside it, and
    ///   no attempt starts once the next pause would pass it.
    /// - Retried are exactly the errors [`retriable`] names: Kafka codes for which a fresh
    ///   metadata view can help (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
    ///   NOT_LEADER_OR_FOLLOWER, NETWORK_EXCEPTION, the COORDINATOR_* codes,
    ///   NOT_ENOUGH_REPLICAS*, FENCED/UNKNOWN_LEADER_EPOCH, OFFSET_NOT_AVAILABLE,
    ///   UNKNOWN_TOPIC_ID; see [`super::errors::retriable_code`]) and an unreachable broker.
    ///   Before each retry: [`Client::pause_and_refresh`].
    /// - Never retried: an error from brokers that are all down ([`Client::down`]); a final
    ///   unreachable-broker error marks its brokers down ([`Client::note_down`]).
    fn retry<T>(
        &self,
        what: &str,
        deadline: Instant,
        mut op: impl FnMut(Instant) -> Result<T>,
    ) -> Result<T> {
        let mut backoff = self.config.retry_backoff;
        loop {
            match op(deadline) {
                Ok(v) => return Ok(v),
                Err(e) if self.names_only_down_brokers(&e) => return Err(self.with_timeout(e)),
                Err(e) if retriable(&e) && Instant::now() + backoff < deadline => {
                    log::debug!("{what}: {e}; refreshing metadata and retrying");
                    self.pause_and_refresh(what, &mut backoff, deadline);
                }
                Err(e) => {
                    self.note_down(&e);
                    return Err(self.with_timeout(e));
                }
            }
        }
    }

    /// Between two attempts of one request: sleeps `backoff`, doubles it (up to
    /// `retry.backoff.max.ms`) and refreshes metadata. The caller checked that the pause ends before
    /// `deadline`. A failed refresh is only logged: the next attempt fails the same way.
    fn pause_and_refresh(&self, what: &str, backoff: &mut Duration, deadline: Instant) {
        std::thread::sleep(*backoff);
        *backoff = (*backoff * 2).min(self.config.retry_backoff_max);
        if let Err(e) = self.refresh_metadata(deadline) {
            log::debug!("{what}: metadata refresh failed: {e}");
        }
    }

    /// The controller's connection (admin requests go there), or any broker's when Metadata
    /// names no controller it lists.
    fn controller_conn(&self, deadline: Instant) -> Result<Arc<Connection>> {
        let md = self.metadata_by(deadline)?;
        match md.brokers.contains_key(&md.controller) {
            true => self.broker_conn(&md, md.controller, deadline),
            false => self.any_conn(deadline),
        }
    }

    /// The partition's leader connection for an `api` request; `NotFound` when a fresh
    /// Metadata does not list the topic or partition, LEADER_NOT_AVAILABLE (naming the broker
    /// whose Metadata said so) when it lists no leader.
    fn leader(
        &self,
        api: &'static str,
        topic: &str,
        partition: i32,
        deadline: Instant,
    ) -> Result<Arc<Connection>> {
        let mut md = self.metadata_by(deadline)?;
        if md.partition(topic, partition).is_none()
            && md.fetched_at.elapsed() > Duration::from_millis(10)
        {
            md = self.refresh_metadata(deadline)?;
        }
        let p = md.partition(topic, partition).ok_or_else(|| {
            if md.topics.contains_key(topic) {
                Error::NotFound(format!("partition {partition} of topic {topic}"))
            } else {
                Error::NotFound(format!("topic {topic}"))
            }
        })?;
        if p.leader < 0 {
            return Err(md.no_leader(api, topic, partition));
        }
        self.broker_conn(&md, p.leader, deadline)
    }

    /// Whether the connected brokers offer `api` (at any version this client speaks).
    pub fn supports(&self, api: ApiKey) -> Result<bool> {
        let conn = self.any_conn(self.deadline())?;
        Ok(conn.versions().range(api).is_some())
    }
}
