//! A Confluent Schema Registry REST client: [`HttpRegistry`] implements
//! [`topicfs_schema::SchemaSource`] over `GET /schemas/ids/{id}`, `GET /subjects`,
//! `GET /subjects/{subject}/versions` and `GET /subjects/{subject}/versions/{version|latest}`
//! (subjects percent-encoded), with the `Accept: application/vnd.schemaregistry.v1+json` header.
//! The answers are read by `topicfs_schema::registry`'s parsers.
//!
//! Settings: [`config`] (the Confluent serializers' names). A proxy named by the environment
//! (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, with `NO_PROXY`) is used, as curl does; redirects
//! are not followed (an answer that is one is an error). Caches: [`cache`] (a schema by id
//! for good; subjects, versions, latest and "no such id" for `schema.registry.cache.ttl.ms`).
//!
//! # Errors (the one [`Error`] type; each names the registry's URL, never a password)
//! - no answer within `schema.registry.request.timeout.ms` (or no connection within
//!   `schema.registry.connect.timeout.ms`): [`Error::Timeout`];
//! - no connection (refused, unreachable, unknown host, reset): [`Error::BrokerUnreachable`],
//!   after trying every URL of `schema.registry.url` (connection errors move on to the next
//!   URL, and the URL that answered is tried first next time);
//! - a URL that was not reached or did not answer in time counts as down for
//!   `schema.registry.down.ms`: it is not asked meanwhile, and when every URL is down a request
//!   fails at once with the error that put the first one down (no record waits out a deadline
//!   of its own while the registry is down);
//! - HTTP 401 or 403, or a TLS handshake that fails (unknown CA, refused client
//!   certificate): [`Error::AuthFailed`];
//! - HTTP 404 (the registry's 40401 subject, 40402 version, 40403 schema not found):
//!   [`Error::NotFound`];
//! - any other status, an answer over [`MAX_BODY`] bytes, or a body that is not the JSON
//!   expected: [`Error::Protocol`]. No body makes this code panic.
//!
//! Invariant: one request is bounded by the request timeout; [`SchemaSource::versions`] makes
//! one request per version not cached (each bounded).

pub mod cache;
pub mod config;

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use topicfs_schema::registry::{
    parse_schema_by_id, parse_subject_version, parse_subjects, parse_versions,
};
use topicfs_schema::{SchemaRecord, SchemaSource};
use topicfs_source::{Error, Result};
use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};

use crate::cache::{Cache, Short};
pub use crate::config::{BaseUrl, CredentialsSource, RegistryConfig};

/// The largest answer read (16 MiB): a larger one is refused, so a hostile server cannot
/// exhaust memory (a 10 MB schema still fits).
pub const MAX_BODY: u64 = 16 << 20;

/// The registry's media type.
pub const ACCEPT: &str = "application/vnd.schemaregistry.v1+json";

/// Where the system's trusted CAs are (Debian's bundle), when `schema.registry.ssl.ca.location`
/// is not given and a URL is `https://`.
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// A Schema Registry reached over HTTP(S). See the crate docs.
pub struct HttpRegistry {
    config: RegistryConfig,
    agent: ureq::Agent,
    /// The `Authorization` header for each URL of `config.urls` (same order), if any.
    auth: Vec<Option<String>>,
    /// The URL tried first (the last that answered).
    preferred: AtomicUsize,
    /// Per URL (same order): when it counts as down.
    down: Mutex<Vec<Option<DownMark>>>,
    cache: Mutex<Cache>,
    requests: AtomicU64,
}

impl std::fmt::Debug for HttpRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRegistry").field("config", &self.config).finish_non_exhaustive()
    }
}

/// A file the user named in a setting (a CA bundle, a client certificate or key), read once
/// when the mount starts: the user's own input, like the cluster's `--command-config`, not a
/// file of a data dir (which only `storage::open` opens).
fn read_file(setting: &str, path: &std::path::Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path); // read registry setting file (see the doc above)
    bytes.map_err(|e| Error::InvalidInput(format!("{setting} {}: {e}", path.display())))
}

/// The PEM items of `path` (read for `setting`).
fn pem_items(setting: &str, path: &std::path::Path) -> Result<Vec<PemItem<'static>>> {
    let pem = read_file(setting, path)?;
    ureq::tls::parse_pem(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::InvalidInput(format!("{setting} {}: {e}", path.display())))
}

fn certificates(setting: &str, path: &std::path::Path) -> Result<Vec<Certificate<'static>>> {
    let certs: Vec<_> = pem_items(setting, path)?
        .into_iter()
        .filter_map(|item| match item {
            PemItem::Certificate(c) => Some(c),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(Error::InvalidInput(format!(
            "{setting} {}: no PEM certificate in the file",
            path.display()
        )));
    }
    Ok(certs)
}

fn tls_config(config: &RegistryConfig) -> Result<TlsConfig> {
    let mut tls = TlsConfig::builder();
    if config.urls.iter().any(BaseUrl::is_https) {
        // The CA file replaces the system's roots (as librdkafka's ssl.ca.location does).
        let certs = match &config.ssl_ca_location {
            Some(path) => certificates("schema.registry.ssl.ca.location", path)?,
            None => certificates(
                "schema.registry.ssl.ca.location not set; the system CA bundle",
                std::path::Path::new(SYSTEM_CA_BUNDLE),
            )?,
        };
        tls = tls.root_certs(RootCerts::new_with_certs(&certs));
    }
    if let (Some(cert), Some(key)) = (&config.ssl_certificate_location, &config.ssl_key_location) {
        let chain = certificates("schema.registry.ssl.certificate.location", cert)?;
        let key = pem_items("schema.registry.ssl.key.location", key)?
            .into_iter()
            .find_map(|item| match item {
                PemItem::PrivateKey(k) => Some(k),
                _ => None,
            })
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "schema.registry.ssl.key.location {}: no PEM private key in the file",
                    key.display()
                ))
            })?;
        let key: PrivateKey<'static> = key;
        tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
    }
    Ok(tls.build())
}

/// `Basic base64(user:password)`.
fn basic_auth(user: &str, password: &str) -> String {
    use base64::Engine;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

/// `subject` as one path segment: unreserved characters kept, every other byte `%XX` (dots
/// too when the subject is `.` or `..`, which would otherwise be a path step).
pub fn encode_segment(subject: &str) -> String {
    let dots_only = subject == "." || subject == "..";
    let mut out = String::with_capacity(subject.len());
    for &b in subject.as_bytes() {
        if b.is_ascii_alphanumeric()
            || b == b'-'
            || b == b'_'
            || b == b'~'
            || (b == b'.' && !dots_only)
        {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The `message` of a registry error body (`{"error_code":N,"message":M}`), else the start of
/// the body as text.
fn error_message(body: &[u8]) -> String {
    if let Ok(serde_json::Value::Object(o)) = serde_json::from_slice::<serde_json::Value>(body) {
        let code = o.get("error_code").and_then(serde_json::Value::as_i64);
        if let Some(m) = o.get("message").and_then(serde_json::Value::as_str) {
            return match code {
                Some(code) => format!("{m} (error {code})"),
                None => m.to_string(),
            };
        }
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
    let text: String = text.chars().filter(|c| !c.is_control()).collect();
    if text.is_empty() { "(no body)".into() } else { text }
}

/// What a failed request means, and whether the next URL should be tried.
struct Failure {
    error: Error,
    /// A connection error: the next URL may answer.
    try_next: bool,
}

/// A URL that could not be reached, or did not answer, within its deadline: not asked again
/// until `until` (`schema.registry.down.ms`), so that records with schemas do not each wait out
/// a deadline while the registry is down.
#[derive(Clone, Debug)]
struct DownMark {
    until: Instant,
    /// What happened (the error's message) and, for a timeout, the deadline in ms.
    reason: String,
    timeout_ms: Option<u64>,
}

impl HttpRegistry {
    /// A client for `config`. Reads the CA and client certificate files now (an unreadable
    /// one is `InvalidInput` naming its setting); makes no request.
    pub fn new(config: RegistryConfig) -> Result<HttpRegistry> {
        let tls = tls_config(&config)?;
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(config.request_timeout))
            .timeout_connect(Some(config.connect_timeout))
            .max_redirects(0)
            .user_agent(format!("topicfs/{}", env!("CARGO_PKG_VERSION")))
            .tls_config(tls)
            .build()
            .new_agent();
        let auth = config
            .urls
            .iter()
            .map(|url| config.credentials_for(url).map(|(u, p)| basic_auth(u, p)))
            .collect();
        let down = Mutex::new(vec![None; config.urls.len()]);
        Ok(HttpRegistry {
            config,
            agent,
            auth,
            preferred: AtomicUsize::new(0),
            down,
            cache: Mutex::new(Cache::default()),
            requests: AtomicU64::new(0),
        })
    }

    /// The settings this client runs with.
    pub fn config(&self) -> &RegistryConfig {
        &self.config
    }

    /// HTTP requests sent so far (each URL tried counts).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    fn cache(&self) -> MutexGuard<'_, Cache> {
        // Each change of the cache is one map operation: a poisoned lock guards a consistent
        // cache.
        topicfs_source::sync::lock(&self.cache)
    }

    /// The body of a 200 answer to `GET {url}{path}`, trying the URLs from the preferred one
    /// on and moving on after connection errors. Also returns the URL that answered.
    fn get(&self, path: &str) -> Result<(String, Vec<u8>)> {
        let n = self.config.urls.len();
        let start = self.preferred.load(Ordering::Relaxed) % n.max(1);
        let mut last = None;
        let mut skipped = None;
        for k in 0..n {
            let i = (start + k) % n;
            if let Some(mark) = self.down_mark(i) {
                skipped = skipped.or(Some((i, mark)));
                continue;
            }
            let result = self.get_from(i, path);
            if let Err(Failure { error, .. }) = &result {
                self.note_down(i, error);
            }
            match result {
                Ok(body) => {
                    self.preferred.store(i, Ordering::Relaxed);
                    return Ok((self.config.urls[i].shown.clone(), body));
                }
                Err(Failure { error, try_next: true }) => {
                    if n > 1 {
                        log::warn!("schema registry: {error}; trying the next URL");
                    }
                    last = Some(error);
                }
                Err(Failure { error, .. }) => return Err(error),
            }
        }
        Err(match (last, skipped) {
            (Some(error), _) => error,
            (None, Some((i, mark))) => self.down_error(i, &mark, path),
            (None, None) => Error::InvalidInput("schema.registry.url: no URL to ask".into()),
        })
    }

    /// The mark of URL `i` if it counts as down now.
    fn down_mark(&self, i: usize) -> Option<DownMark> {
        let down = topicfs_source::sync::lock(&self.down);
        down.get(i)?.as_ref().filter(|mark| Instant::now() < mark.until).cloned()
    }

    /// After a request to URL `i` failed with `error`: a URL that was not reached or did not
    /// answer in time counts as down for `schema.registry.down.ms`; one that answered does not.
    fn note_down(&self, i: usize, error: &Error) {
        let timeout_ms = match error {
            Error::Timeout { after_ms, .. } => Some(*after_ms),
            Error::BrokerUnreachable { .. } => None,
            _ => return,
        };
        let mark = DownMark {
            until: Instant::now() + self.config.down_for,
            reason: error.to_string(),
            timeout_ms,
        };
        if let Some(slot) = topicfs_source::sync::lock(&self.down).get_mut(i) {
            *slot = Some(mark);
        }
    }

    /// The error for a request not sent because every URL counts as down (URL `i` first).
    fn down_error(&self, i: usize, mark: &DownMark, path: &str) -> Error {
        let broker = self.config.urls.get(i).map(|u| u.shown.clone()).unwrap_or_default();
        let ms = self.config.down_for.as_millis();
        let what = format!(
            "schema registry GET {path} not sent: the registry counts as down for \
             schema.registry.down.ms ({ms} ms) after: {}",
            mark.reason
        );
        match mark.timeout_ms {
            Some(after_ms) => Error::Timeout { broker, what, after_ms },
            None => Error::BrokerUnreachable {
                broker,
                op: format!("schema registry GET {path}"),
                source: io::Error::new(io::ErrorKind::NotConnected, what),
            },
        }
    }

    fn get_from(&self, i: usize, path: &str) -> std::result::Result<Vec<u8>, Failure> {
        let url = &self.config.urls[i];
        let mut request = self.agent.get(format!("{}{path}", url.shown)).header("Accept", ACCEPT);
        if let Some(Some(auth)) = self.auth.get(i) {
            request = request.header("Authorization", auth);
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        let mut response = request.call().map_err(|e| self.failure(url, path, e))?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec()
            .map_err(|e| self.failure(url, path, e))?;
        let broker = url.shown.clone();
        let error = match status {
            200 => return Ok(body),
            401 | 403 => Error::AuthFailed {
                broker,
                reason: format!("HTTP {status} for GET {path}: {}", error_message(&body)),
            },
            404 => Error::NotFound(format!("{broker}{path}: {}", error_message(&body))),
            _ => Error::Protocol {
                broker,
                what: format!("HTTP {status} for GET {path}: {}", error_message(&body)),
            },
        };
        Err(Failure { error, try_next: false })
    }

    fn failure(&self, url: &BaseUrl, path: &str, e: ureq::Error) -> Failure {
        let broker = url.shown.clone();
        let op = format!("schema registry GET {path}");
        let unreachable = |source: io::Error| Failure {
            error: Error::BrokerUnreachable { broker: broker.clone(), op: op.clone(), source },
            try_next: true,
        };
        match e {
            ureq::Error::Timeout(kind) => {
                let connecting = matches!(kind, ureq::Timeout::Connect | ureq::Timeout::Resolve);
                let (after, setting) = if connecting {
                    (self.config.connect_timeout, "schema.registry.connect.timeout.ms")
                } else {
                    (self.config.request_timeout, "schema.registry.request.timeout.ms")
                };
                Failure {
                    error: Error::Timeout {
                        broker,
                        what: format!("{op} ({kind} timeout, {setting})"),
                        after_ms: u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
                    },
                    try_next: connecting,
                }
            }
            // A TLS handshake that failed (unknown CA, a refused client certificate) comes
            // as an I/O error wrapping the rustls error.
            ureq::Error::Io(source)
                if source.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) =>
            {
                Failure {
                    error: Error::AuthFailed { broker, reason: format!("TLS: {source}") },
                    try_next: false,
                }
            }
            ureq::Error::Io(source) => unreachable(source),
            ureq::Error::ConnectionFailed => {
                unreachable(io::Error::new(io::ErrorKind::ConnectionRefused, "connection failed"))
            }
            ureq::Error::HostNotFound => {
                unreachable(io::Error::new(io::ErrorKind::NotFound, "host not found"))
            }
            ureq::Error::Rustls(e) => Failure {
                error: Error::AuthFailed { broker, reason: format!("TLS: {e}") },
                try_next: false,
            },
            ureq::Error::Tls(e) => Failure {
                error: Error::AuthFailed { broker, reason: format!("TLS: {e}") },
                try_next: false,
            },
            ureq::Error::BodyExceedsLimit(_) => Failure {
                error: Error::Protocol {
                    broker,
                    what: format!("GET {path}: the answer is over {MAX_BODY} bytes"),
                },
                try_next: false,
            },
            other => Failure {
                error: Error::Protocol { broker, what: format!("GET {path}: {other}") },
                try_next: false,
            },
        }
    }

    /// A parser's refusal of a 200 answer, as the registry's fault.
    fn malformed(url: String, path: &str, e: Error) -> Error {
        match e {
            // The parsers' messages start with the path they read (`/schemas/ids/7: ...`).
            Error::InvalidInput(what) if what.starts_with(path) => {
                Error::Protocol { broker: url, what: format!("GET {what}") }
            }
            Error::InvalidInput(what) => {
                Error::Protocol { broker: url, what: format!("GET {path}: {what}") }
            }
            Error::NotFound(what) => Error::NotFound(format!("{url}{path}: {what}")),
            e => e,
        }
    }

    /// A short-lived answer for `path`, from the cache or from the registry (`parse` reads a
    /// 200 answer). NotFound answers are cached too.
    fn short(&self, path: String, parse: impl FnOnce(&[u8]) -> Result<Short>) -> Result<Short> {
        let ttl = self.config.cache_ttl;
        if let Some(answer) = self.cache().short(&path, ttl) {
            return Ok(answer);
        }
        let answer = match self.get(&path) {
            Ok((url, body)) => parse(&body).map_err(|e| Self::malformed(url, &path, e)),
            Err(e) => Err(e),
        };
        let answer = match answer {
            Ok(a) => a,
            Err(Error::NotFound(what)) => Short::NotFound(what.into()),
            Err(e) => return Err(e),
        };
        self.cache().insert_short(path, answer.clone(), ttl);
        Ok(answer)
    }

    fn record_at(&self, path: String) -> Result<SchemaRecord> {
        match self.short(path, |body| Ok(Short::Record(Arc::new(parse_subject_version(body)?))))? {
            Short::Record(r) => Ok((*r).clone()),
            Short::NotFound(what) => Err(Error::NotFound(what.to_string())),
            other => Err(unexpected(other)),
        }
    }
}

fn unexpected(short: Short) -> Error {
    Error::NotFound(format!("schema registry cache held {short:?} where another answer belongs"))
}

impl SchemaSource for HttpRegistry {
    fn by_id(&self, id: u32) -> Result<SchemaRecord> {
        if let Some(record) = self.cache().id(id) {
            return Ok((*record).clone());
        }
        let path = format!("/schemas/ids/{id}");
        if let Some(Short::NotFound(what)) = self.cache().short(&path, self.config.cache_ttl) {
            return Err(Error::NotFound(what.to_string()));
        }
        let answer = self.get(&path).and_then(|(url, body)| {
            parse_schema_by_id(id, &body).map_err(|e| Self::malformed(url, &path, e))
        });
        match answer {
            Ok(record) => {
                self.cache().insert_id(id, Arc::new(record.clone()));
                Ok(record)
            }
            Err(Error::NotFound(what)) => {
                let ttl = self.config.cache_ttl;
                self.cache().insert_short(path, Short::NotFound(what.as_str().into()), ttl);
                Err(Error::NotFound(what))
            }
            Err(e) => Err(e),
        }
    }

    fn by_subject(&self, subject: &str, version: Option<i32>) -> Result<SchemaRecord> {
        let which = version.map_or_else(|| "latest".to_string(), |v| v.to_string());
        self.record_at(format!("/subjects/{}/versions/{which}", encode_segment(subject)))
    }

    fn subjects(&self) -> Result<Vec<String>> {
        match self
            .short("/subjects".into(), |b| Ok(Short::Subjects(Arc::new(parse_subjects(b)?))))?
        {
            Short::Subjects(list) => Ok((*list).clone()),
            Short::NotFound(what) => Err(Error::NotFound(what.to_string())),
            other => Err(unexpected(other)),
        }
    }

    fn versions(&self, subject: &str) -> Result<Vec<(i32, u32)>> {
        let encoded = encode_segment(subject);
        let path = format!("/subjects/{encoded}/versions");
        let versions =
            match self.short(path, |b| Ok(Short::Versions(Arc::new(parse_versions(b)?))))? {
                Short::Versions(list) => list,
                Short::NotFound(what) => return Err(Error::NotFound(what.to_string())),
                other => return Err(unexpected(other)),
            };
        let mut out = Vec::with_capacity(versions.len());
        for &version in versions.iter() {
            match self.record_at(format!("/subjects/{encoded}/versions/{version}")) {
                Ok(record) => out.push((version, record.id)),
                // Deleted between the two requests.
                Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_one_path_segment() {
        assert_eq!(encode_segment("orders-value"), "orders-value");
        assert_eq!(encode_segment("a/b c?d#e%"), "a%2Fb%20c%3Fd%23e%25");
        assert_eq!(encode_segment(".."), "%2E%2E");
        assert_eq!(encode_segment("é"), "%C3%A9");
    }

    #[test]
    fn error_bodies_become_short_messages() {
        assert_eq!(
            error_message(br#"{"error_code":40403,"message":"Schema not found"}"#),
            "Schema not found (error 40403)"
        );
        assert_eq!(error_message(b""), "(no body)");
        assert_eq!(error_message(&[0xff, b'\n', b'x']), "\u{fffd}x");
    }
}
