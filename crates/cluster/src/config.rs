//! Client settings by their Kafka client names (`--config KEY=VALUE`, `--command-config FILE`)
//! and bootstrap specs (`kafka://HOST:PORT[,HOST:PORT...]`).
//!
//! The names and defaults are the Java client's, so a `.properties` file written for
//! `kafka-console-consumer --consumer.config` or `kafka-topics --command-config` works as is,
//! as long as it only uses settings topicfs knows. A setting topicfs does not know is refused
//! with its name rather than silently ignored: a misspelt `sasl.pasword` must not become an
//! unauthenticated connection attempt.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use topicfs_format::Compression;
use topicfs_format::properties::parse_entries;
use topicfs_source::error::{Error, Result};

/// One broker address as given by the user or advertised in Metadata.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BrokerAddr {
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl fmt::Display for BrokerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl BrokerAddr {
    /// Parses `HOST:PORT` or `[IPV6]:PORT`.
    pub fn parse(s: &str) -> Result<BrokerAddr> {
        let bad = |why: &str| Error::InvalidInput(format!("broker address {s:?}: {why}"));
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (host, rest) = rest.split_once(']').ok_or_else(|| bad("missing ']'"))?;
            let port = rest.strip_prefix(':').ok_or_else(|| bad("expected HOST:PORT"))?;
            (host, port)
        } else {
            s.rsplit_once(':').ok_or_else(|| bad("expected HOST:PORT"))?
        };
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        let port: u16 = port.parse().map_err(|_| bad("port is not a number in 1..65535"))?;
        if port == 0 {
            return Err(bad("port 0"));
        }
        Ok(BrokerAddr { host: host.to_string(), port })
    }
}

/// Whether a mount source names a cluster: it starts with `kafka://`.
pub fn is_bootstrap_spec(source: &str) -> bool {
    source.starts_with("kafka://")
}

/// Parses `kafka://HOST:PORT[,HOST:PORT...]` (a trailing `/` is allowed) into the bootstrap
/// servers, in the order given.
pub fn parse_bootstrap(spec: &str) -> Result<Vec<BrokerAddr>> {
    let list = spec.strip_prefix("kafka://").ok_or_else(|| {
        Error::InvalidInput(format!("bootstrap spec {spec:?}: expected kafka://HOST:PORT[,...]"))
    })?;
    let list = list.strip_suffix('/').unwrap_or(list);
    let servers = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(BrokerAddr::parse)
        .collect::<Result<Vec<_>>>()?;
    if servers.is_empty() {
        return Err(Error::InvalidInput(format!("bootstrap spec {spec:?} names no broker")));
    }
    Ok(servers)
}

/// `isolation.level`: which records a Fetch returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsolationLevel {
    /// Up to the high watermark, aborted transactional records included.
    ReadUncommitted,
    /// Up to the last stable offset; the response lists aborted transactions to drop.
    ReadCommitted,
}

impl IsolationLevel {
    /// The protocol's byte.
    pub fn wire(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
}

/// `acks`: how many replicas must have a produced batch before the broker answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    /// `acks=0`: the broker sends no response at all.
    None,
    /// `acks=1`: the leader has it.
    Leader,
    /// `acks=all` (`-1`): every in-sync replica has it.
    All,
}

impl Acks {
    /// The protocol's value.
    pub fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// `security.protocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// Plain TCP.
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL over plain TCP.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Whether connections use TLS.
    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether connections authenticate with SASL.
    pub fn sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }
}

/// `sasl.mechanism`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    /// RFC 4616: user name and password in the clear (use it over TLS).
    Plain,
    /// RFC 5802/7677 with SHA-256.
    ScramSha256,
    /// RFC 5802 with SHA-512.
    ScramSha512,
}

impl SaslMechanism {
    /// The mechanism's IANA name, as SaslHandshake sends it.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// The client settings topicfs understands, with the Java client's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// `client.id` (default `topicfs`).
    pub client_id: String,
    /// `request.timeout.ms` (default 30000): the deadline of every request, retries included,
    /// and of connecting (TCP, TLS and SASL).
    pub request_timeout: Duration,
    /// `metadata.max.age.ms` (default 300000): cached metadata older than this is refreshed.
    pub metadata_max_age: Duration,
    /// `fetch.max.bytes` (default 52428800): the most one Fetch response may carry.
    pub fetch_max_bytes: i32,
    /// `max.partition.fetch.bytes` (default 1048576): the most one partition may return per Fetch.
    pub max_partition_fetch_bytes: i32,
    /// `fetch.min.bytes` (default 1): the bytes a prefetch (a Fetch no read waits for) asks the
    /// broker to wait for, up to `fetch.max.wait.ms`. A read's own Fetch never waits.
    pub fetch_min_bytes: i32,
    /// `fetch.max.wait.ms` (default 500): how long the broker may hold a prefetch for
    /// `fetch.min.bytes`.
    pub fetch_max_wait: Duration,
    /// `isolation.level` (default `read_committed`, the mount's default).
    pub isolation_level: IsolationLevel,
    /// `acks` (default `all`).
    pub acks: Acks,
    /// `enable.idempotence` (default `true`): InitProducerId and sequence numbers, so a retried
    /// Produce never duplicates records. Requires `acks=all`.
    pub enable_idempotence: bool,
    /// Whether `enable.idempotence` was given explicitly (then a broker without
    /// InitProducerId is an error rather than a logged fallback).
    pub idempotence_explicit: bool,
    /// `compression.type` (default `none`): the codec appends are produced with.
    pub compression: Compression,
    /// `security.protocol` (default `PLAINTEXT`).
    pub security_protocol: SecurityProtocol,
    /// `ssl.ca.location` or `ssl.truststore.location` (PEM): the CAs brokers' certificates must
    /// chain to; without it, the system's bundle.
    pub ssl_ca_location: Option<PathBuf>,
    /// `ssl.certificate.location` (PEM, librdkafka's name): the client certificate (chain,
    /// leaf first) presented to brokers that ask for one (mutual TLS); needs
    /// `ssl.key.location`.
    pub ssl_certificate_location: Option<PathBuf>,
    /// `ssl.key.location` (PEM, unencrypted PKCS#8, PKCS#1 or SEC1): the private key of
    /// `ssl.certificate.location`.
    pub ssl_key_location: Option<PathBuf>,
    /// `sasl.mechanism` (default `PLAIN` when SASL is on).
    pub sasl_mechanism: SaslMechanism,
    /// `sasl.username`.
    pub sasl_username: Option<String>,
    /// `sasl.password`.
    pub sasl_password: Option<String>,
    /// `replication.factor`: for topics created with mkdir; `None` is the broker's default.
    pub replication_factor: Option<i16>,
    /// `retry.backoff.ms` (default 50): the first pause before a request is retried (after a
    /// retriable error such as NOT_LEADER_OR_FOLLOWER, or a broker that could not be reached);
    /// each further pause of the same request doubles, up to `retry.backoff.max.ms`.
    pub retry_backoff: Duration,
    /// `retry.backoff.max.ms` (default 1000): the longest pause between two attempts.
    pub retry_backoff_max: Duration,
    /// `reconnect.backoff.max.ms` (default: `request.timeout.ms`; 0 turns it off): how long a
    /// broker that a request could not reach for its whole deadline counts as *down* (see
    /// `Client`): requests that need it make one short connection attempt and then fail at
    /// once rather than each waiting out its deadline. `None`: the default.
    pub reconnect_backoff_max: Option<Duration>,
    /// `socket.connection.setup.timeout.ms` (default 1000): the longest connection setup (TCP,
    /// TLS, ApiVersions, SASL) to a broker that counts as down. Other connections may take
    /// what is left of the request's deadline.
    pub socket_connection_setup_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            client_id: "topicfs".to_string(),
            request_timeout: Duration::from_millis(30_000),
            metadata_max_age: Duration::from_millis(300_000),
            fetch_max_bytes: 52_428_800,
            max_partition_fetch_bytes: 1_048_576,
            fetch_min_bytes: 1,
            fetch_max_wait: Duration::from_millis(500),
            isolation_level: IsolationLevel::ReadCommitted,
            acks: Acks::All,
            enable_idempotence: true,
            idempotence_explicit: false,
            compression: Compression::None,
            security_protocol: SecurityProtocol::Plaintext,
            ssl_ca_location: None,
            ssl_certificate_location: None,
            ssl_key_location: None,
            sasl_mechanism: SaslMechanism::Plain,
            sasl_username: None,
            sasl_password: None,
            replication_factor: None,
            retry_backoff: Duration::from_millis(50),
            retry_backoff_max: Duration::from_millis(1000),
            reconnect_backoff_max: None,
            socket_connection_setup_timeout: Duration::from_millis(1000),
        }
    }
}

/// The keys [`ClientConfig::set`] accepts.
pub const KNOWN_KEYS: &[&str] = &[
    "client.id",
    "request.timeout.ms",
    "metadata.max.age.ms",
    "fetch.max.bytes",
    "max.partition.fetch.bytes",
    "fetch.min.bytes",
    "fetch.max.wait.ms",
    "isolation.level",
    "acks",
    "enable.idempotence",
    "compression.type",
    "security.protocol",
    "ssl.ca.location",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.certificate.location",
    "ssl.key.location",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "replication.factor",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "reconnect.backoff.max.ms",
    "socket.connection.setup.timeout.ms",
];

impl ClientConfig {
    /// Applies one setting. `origin` names where it came from (`--config`, or `FILE:LINE`) for
    /// the error message.
    pub fn set(&mut self, key: &str, value: &str, origin: &str) -> Result<()> {
        let bad =
            |why: &str| Error::InvalidInput(format!("{origin}: setting {key}={value:?}: {why}"));
        let value = value.trim();
        match key {
            "client.id" => self.client_id = value.to_string(),
            "request.timeout.ms" => {
                self.request_timeout =
                    millis(value).ok_or_else(|| bad("expected milliseconds > 0"))?
            }
            "metadata.max.age.ms" => {
                self.metadata_max_age =
                    millis(value).ok_or_else(|| bad("expected milliseconds > 0"))?
            }
            "fetch.max.bytes" => {
                self.fetch_max_bytes = positive(value).ok_or_else(|| bad("expected bytes > 0"))?
            }
            "max.partition.fetch.bytes" => {
                self.max_partition_fetch_bytes =
                    positive(value).ok_or_else(|| bad("expected bytes > 0"))?
            }
            "fetch.min.bytes" => {
                self.fetch_min_bytes = value
                    .parse::<i32>()
                    .ok()
                    .filter(|v| *v >= 0)
                    .ok_or_else(|| bad("expected bytes >= 0"))?
            }
            "fetch.max.wait.ms" => {
                self.fetch_max_wait = value
                    .parse::<u64>()
                    .ok()
                    .map(Duration::from_millis)
                    .ok_or_else(|| bad("expected milliseconds >= 0"))?
            }
            "isolation.level" => {
                self.isolation_level = match value.to_ascii_lowercase().as_str() {
                    "read_committed" => IsolationLevel::ReadCommitted,
                    "read_uncommitted" => IsolationLevel::ReadUncommitted,
                    _ => return Err(bad("expected read_committed or read_uncommitted")),
                }
            }
            "acks" => {
                self.acks = match value.to_ascii_lowercase().as_str() {
                    "all" | "-1" => Acks::All,
                    "1" => Acks::Leader,
                    "0" => Acks::None,
                    _ => return Err(bad("expected all, -1, 1 or 0")),
                }
            }
            "enable.idempotence" => {
                self.enable_idempotence = match value.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad("expected true or false")),
                };
                self.idempotence_explicit = true;
            }
            "compression.type" => {
                self.compression = Compression::from_name(&value.to_ascii_lowercase())
                    .ok_or_else(|| bad("expected none, gzip, snappy, lz4 or zstd"))?
            }
            "security.protocol" => {
                self.security_protocol = match value.to_ascii_uppercase().as_str() {
                    "PLAINTEXT" => SecurityProtocol::Plaintext,
                    "SSL" => SecurityProtocol::Ssl,
                    "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
                    "SASL_SSL" => SecurityProtocol::SaslSsl,
                    _ => return Err(bad("expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")),
                }
            }
            "ssl.ca.location" | "ssl.truststore.location" => {
                if value.is_empty() {
                    return Err(bad("empty path"));
                }
                self.ssl_ca_location = Some(PathBuf::from(value))
            }
            "ssl.certificate.location" | "ssl.key.location" => {
                if value.is_empty() {
                    return Err(bad("empty path"));
                }
                let path = Some(PathBuf::from(value));
                match key {
                    "ssl.certificate.location" => self.ssl_certificate_location = path,
                    _ => self.ssl_key_location = path,
                }
            }
            "ssl.truststore.type" => {
                if !value.eq_ignore_ascii_case("PEM") {
                    return Err(bad(
                        "only PEM truststores are supported (convert JKS/PKCS12 with keytool/openssl)",
                    ));
                }
            }
            "sasl.mechanism" => {
                self.sasl_mechanism = match value.to_ascii_uppercase().as_str() {
                    "PLAIN" => SaslMechanism::Plain,
                    "SCRAM-SHA-256" => SaslMechanism::ScramSha256,
                    "SCRAM-SHA-512" => SaslMechanism::ScramSha512,
                    _ => return Err(bad("expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")),
                }
            }
            "sasl.username" => self.sasl_username = Some(value.to_string()),
            "sasl.password" => self.sasl_password = Some(value.to_string()),
            "replication.factor" => {
                let n: i16 = value.parse().map_err(|_| bad("expected a number of replicas"))?;
                self.replication_factor = if n == -1 {
                    None
                } else if n >= 1 {
                    Some(n)
                } else {
                    return Err(bad("expected a number of replicas >= 1 (or -1)"));
                }
            }
            "retry.backoff.ms" => {
                self.retry_backoff =
                    millis(value).ok_or_else(|| bad("expected milliseconds > 0"))?
            }
            "retry.backoff.max.ms" => {
                self.retry_backoff_max =
                    millis(value).ok_or_else(|| bad("expected milliseconds > 0"))?
            }
            "reconnect.backoff.max.ms" => {
                let n: u64 = value.parse().map_err(|_| bad("expected milliseconds >= 0"))?;
                self.reconnect_backoff_max = Some(Duration::from_millis(n))
            }
            "socket.connection.setup.timeout.ms" => {
                self.socket_connection_setup_timeout =
                    millis(value).ok_or_else(|| bad("expected milliseconds > 0"))?
            }
            _ => {
                return Err(Error::InvalidInput(format!(
                    "{origin}: unknown client setting {key:?} (topicfs knows: {})",
                    KNOWN_KEYS.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Applies one `KEY=VALUE` pair as given to `--config`.
    pub fn set_pair(&mut self, pair: &str) -> Result<()> {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| Error::InvalidInput(format!("--config {pair:?}: expected KEY=VALUE")))?;
        self.set(key.trim(), value, "--config")
    }

    /// Applies every setting of a Java `.properties` file (`--command-config`).
    pub fn load_properties_file(&mut self, path: &Path) -> Result<()> {
        let text =
            std::fs::read_to_string(path).map_err(|e| Error::io(path, "read client config", e))?;
        let entries = parse_entries(&text).map_err(|e| {
            let line = text.get(..e.at).map_or(0, |t| t.matches('\n').count()) + 1;
            Error::InvalidInput(format!("{}:{line}: {e}", path.display()))
        })?;
        for p in entries {
            self.set(&p.key, &p.value, &format!("{}:{}", path.display(), p.line))?;
        }
        Ok(())
    }

    /// Checks the combination of settings (after all were applied).
    pub fn validate(&self) -> Result<()> {
        if self.security_protocol.sasl()
            && (self.sasl_username.is_none() || self.sasl_password.is_none())
        {
            return Err(Error::InvalidInput(format!(
                "security.protocol={:?} needs sasl.username and sasl.password",
                self.security_protocol
            )));
        }
        match (&self.ssl_certificate_location, &self.ssl_key_location) {
            (Some(_), None) => {
                return Err(Error::InvalidInput(
                    "ssl.certificate.location needs ssl.key.location (the certificate's private key)"
                        .to_string(),
                ));
            }
            (None, Some(_)) => {
                return Err(Error::InvalidInput(
                    "ssl.key.location needs ssl.certificate.location (the client certificate)"
                        .to_string(),
                ));
            }
            (Some(_), Some(_)) if !self.security_protocol.tls() => log::warn!(
                "ssl.certificate.location and ssl.key.location are not used with \
                 security.protocol={:?} (no TLS)",
                self.security_protocol
            ),
            _ => {}
        }
        if self.enable_idempotence && self.idempotence_explicit && self.acks != Acks::All {
            return Err(Error::InvalidInput(
                "enable.idempotence=true needs acks=all (as in Kafka's clients)".to_string(),
            ));
        }
        if self.retry_backoff > self.retry_backoff_max {
            return Err(Error::InvalidInput(format!(
                "retry.backoff.ms ({} ms) is above retry.backoff.max.ms ({} ms)",
                self.retry_backoff.as_millis(),
                self.retry_backoff_max.as_millis()
            )));
        }
        if self.max_partition_fetch_bytes > self.fetch_max_bytes {
            log::debug!(
                "max.partition.fetch.bytes {} > fetch.max.bytes {}: a response is capped by the latter",
                self.max_partition_fetch_bytes,
                self.fetch_max_bytes
            );
        }
        Ok(())
    }

    /// How long a broker unreachable for a whole deadline counts as down
    /// (`reconnect.backoff.max.ms`, by default `request.timeout.ms`).
    pub fn broker_down_for(&self) -> Duration {
        self.reconnect_backoff_max.unwrap_or(self.request_timeout)
    }

    /// Whether produce requests carry a producer id and sequence numbers: idempotence on and
    /// `acks=all` (an implicit default is dropped for `acks` 0 or 1, as Kafka's clients do).
    pub fn idempotent(&self) -> bool {
        self.enable_idempotence && self.acks == Acks::All
    }
}

fn millis(value: &str) -> Option<Duration> {
    let n: u64 = value.parse().ok()?;
    (n > 0).then(|| Duration::from_millis(n))
}

fn positive(value: &str) -> Option<i32> {
    let n: i32 = value.parse().ok()?;
    (n > 0).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_specs_parse_in_order() {
        let servers = parse_bootstrap("kafka://a.example:9092,10.0.0.2:9093,[::1]:9094/").unwrap();
        let shown: Vec<String> = servers.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["a.example:9092", "10.0.0.2:9093", "[::1]:9094"]);
        assert_eq!(servers[2].host, "::1");
        assert!(is_bootstrap_spec("kafka://x:1"));
        assert!(!is_bootstrap_spec("/var/lib/kafka"));
    }

    #[test]
    fn bad_bootstrap_specs_are_refused_with_the_spec() {
        for bad in
            ["kafka://", "kafka://host", "kafka://host:0", "kafka://:9092", "kafka://h:x", "h:1"]
        {
            let err = parse_bootstrap(bad).unwrap_err();
            assert_eq!(err.errno(), libc::EINVAL, "{bad}");
        }
        let msg = parse_bootstrap("kafka://h:99999").unwrap_err().to_string();
        assert!(msg.contains("h:99999"), "{msg}");
    }

    #[test]
    fn settings_take_kafka_names_and_defaults() {
        let mut c = ClientConfig::default();
        assert_eq!(c.acks, Acks::All);
        assert!(c.idempotent());
        assert_eq!(c.isolation_level, IsolationLevel::ReadCommitted);
        for pair in [
            "client.id=me",
            "request.timeout.ms=1500",
            "metadata.max.age.ms=1000",
            "fetch.max.bytes=1000000",
            "max.partition.fetch.bytes=4096",
            "fetch.min.bytes=65536",
            "fetch.max.wait.ms=100",
            "isolation.level=read_uncommitted",
            "acks=1",
            "compression.type=zstd",
            "security.protocol=SASL_SSL",
            "ssl.ca.location=/etc/ca.pem",
            "ssl.certificate.location=/etc/client.pem",
            "ssl.key.location=/etc/client.key",
            "sasl.mechanism=SCRAM-SHA-512",
            "sasl.username=u",
            "sasl.password=p=w",
            "replication.factor=3",
        ] {
            c.set_pair(pair).unwrap();
        }
        assert_eq!(c.client_id, "me");
        assert_eq!(c.request_timeout, Duration::from_millis(1500));
        assert_eq!(c.metadata_max_age, Duration::from_secs(1));
        assert_eq!((c.fetch_max_bytes, c.max_partition_fetch_bytes), (1_000_000, 4096));
        assert_eq!((c.fetch_min_bytes, c.fetch_max_wait), (65536, Duration::from_millis(100)));
        assert_eq!(c.isolation_level, IsolationLevel::ReadUncommitted);
        assert_eq!(c.acks, Acks::Leader);
        // Implicit idempotence is dropped with acks=1, as in Kafka's clients.
        assert!(!c.idempotent());
        assert_eq!(c.compression, Compression::Zstd);
        assert!(c.security_protocol.tls() && c.security_protocol.sasl());
        assert_eq!(c.ssl_ca_location.as_deref(), Some(Path::new("/etc/ca.pem")));
        assert_eq!(c.ssl_certificate_location.as_deref(), Some(Path::new("/etc/client.pem")));
        assert_eq!(c.ssl_key_location.as_deref(), Some(Path::new("/etc/client.key")));
        assert_eq!(c.sasl_mechanism, SaslMechanism::ScramSha512);
        assert_eq!(c.sasl_password.as_deref(), Some("p=w"));
        assert_eq!(c.replication_factor, Some(3));
        c.validate().unwrap();
    }

    #[test]
    fn unknown_and_malformed_settings_are_refused_by_name() {
        let mut c = ClientConfig::default();
        let msg = c.set_pair("sasl.pasword=x").unwrap_err().to_string();
        assert!(msg.contains("sasl.pasword"), "{msg}");
        for bad in [
            "acks=2",
            "request.timeout.ms=0",
            "isolation.level=dirty",
            "compression.type=brotli",
            "novalue",
        ] {
            let err = c.set_pair(bad).unwrap_err();
            assert_eq!(err.errno(), libc::EINVAL, "{bad}");
        }
        c.set_pair("security.protocol=SASL_PLAINTEXT").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("sasl.username"));
        for (given, missing) in [
            ("ssl.certificate.location=/c.pem", "ssl.key.location"),
            ("ssl.key.location=/c.key", "ssl.certificate.location"),
        ] {
            let mut c = ClientConfig::default();
            c.set_pair(given).unwrap();
            let msg = c.validate().unwrap_err().to_string();
            assert!(msg.contains(missing), "{msg}");
        }
        let mut c = ClientConfig::default();
        c.set_pair("enable.idempotence=true").unwrap();
        c.set_pair("acks=1").unwrap();
        assert!(c.validate().is_err());
    }

    #[test]
    fn retry_and_reconnect_settings_default_to_the_built_in_values_and_are_validated() {
        let mut c = ClientConfig::default();
        assert_eq!(c.retry_backoff, Duration::from_millis(50));
        assert_eq!(c.retry_backoff_max, Duration::from_secs(1));
        assert_eq!(c.socket_connection_setup_timeout, Duration::from_secs(1));
        // The down window follows request.timeout.ms unless set.
        c.set_pair("request.timeout.ms=7000").unwrap();
        assert_eq!(c.broker_down_for(), Duration::from_secs(7));
        for pair in [
            "retry.backoff.ms=20",
            "retry.backoff.max.ms=400",
            "reconnect.backoff.max.ms=0",
            "socket.connection.setup.timeout.ms=250",
        ] {
            c.set_pair(pair).unwrap();
        }
        assert_eq!(c.retry_backoff, Duration::from_millis(20));
        assert_eq!(c.retry_backoff_max, Duration::from_millis(400));
        assert_eq!(c.broker_down_for(), Duration::ZERO);
        assert_eq!(c.socket_connection_setup_timeout, Duration::from_millis(250));
        c.validate().unwrap();
        for bad in [
            "retry.backoff.ms=0",
            "retry.backoff.max.ms=-1",
            "reconnect.backoff.max.ms=soon",
            "socket.connection.setup.timeout.ms=0",
        ] {
            let msg = c.set_pair(bad).unwrap_err().to_string();
            assert!(msg.contains(bad.split('=').next().unwrap()), "{msg}");
        }
        c.set_pair("retry.backoff.ms=500").unwrap();
        let msg = c.validate().unwrap_err().to_string();
        assert!(msg.contains("retry.backoff.max.ms"), "{msg}");
    }

    #[test]
    fn a_properties_file_names_the_line_of_a_bad_setting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("client.properties");
        std::fs::write(&path, "client.id=x\nbogus.key=1\n").unwrap();
        let mut c = ClientConfig::default();
        let msg = c.load_properties_file(&path).unwrap_err().to_string();
        assert!(msg.contains("client.properties:2") && msg.contains("bogus.key"), "{msg}");
        assert_eq!(c.client_id, "x");
    }

    #[test]
    fn a_properties_file_with_a_malformed_escape_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("client.properties");
        std::fs::write(&path, "client.id=x\n# note\nsasl.password=p\\u00zz\n").unwrap();
        let mut c = ClientConfig::default();
        let msg = c.load_properties_file(&path).unwrap_err().to_string();
        assert!(msg.contains("client.properties:3") && msg.contains("uXXXX"), "{msg}");
    }
}
