//! Opening a connection: TCP connect, the TLS handshake, ApiVersions and SASL, all by the
//! connect deadline.

use std::io;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::messages::{ApiVersionsRequest, SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;

use super::{ApiVersions, Connection, left};
use crate::config::{BrokerAddr, ClientConfig, SaslMechanism};
use crate::errors::error_name;
use crate::sasl::{self, ScramClient, ScramHash};
use topicfs_source::error::{Error, Result};

impl Connection {
    /// ApiVersions v3 (flexible, names the client software), falling back to v0 for brokers
    /// that answer UNSUPPORTED_VERSION (they answer in v0 then, as the protocol requires).
    pub(super) fn api_versions(&self, deadline: Instant) -> Result<ApiVersions> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("topicfs"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let response = match self.call(&req, 3, deadline) {
            Ok(r) if r.error_code == 0 => r,
            Ok(_) | Err(Error::Protocol { .. }) => self.call(&req, 0, deadline)?,
            Err(e) => return Err(e),
        };
        if response.error_code != 0 {
            return Err(Error::Kafka {
                broker: self.addr.to_string(),
                api: "ApiVersions",
                code: response.error_code,
                name: error_name(response.error_code).into(),
                topic: None,
                partition: None,
                message: None,
            });
        }
        Ok(ApiVersions(
            response.api_keys.iter().map(|k| (k.api_key, (k.min_version, k.max_version))).collect(),
        ))
    }

    /// SaslHandshake then SaslAuthenticate rounds (KIP-152 framing).
    pub(super) fn authenticate(&self, config: &ClientConfig, deadline: Instant) -> Result<()> {
        let broker = self.addr.to_string();
        let failed = |reason: String| Error::AuthFailed { broker: broker.clone(), reason };
        let mechanism = config.sasl_mechanism;
        let (user, password) = match (&config.sasl_username, &config.sasl_password) {
            (Some(u), Some(p)) => (u.as_str(), p.as_str()),
            _ => return Err(failed("sasl.username and sasl.password are required".into())),
        };
        let version = self.version::<SaslHandshakeRequest>(1)?;
        if version < 1 {
            return Err(failed(
                "the broker only speaks SaslHandshake v0 (no SaslAuthenticate)".into(),
            ));
        }
        let hs = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(mechanism.name()));
        let response = self.call(&hs, version, deadline)?;
        if response.error_code != 0 {
            let offered: Vec<&str> = response.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(failed(format!(
                "{} ({}): the broker offers {}",
                mechanism.name(),
                error_name(response.error_code),
                offered.join(", ")
            )));
        }
        let auth_version = self.version::<SaslAuthenticateRequest>(2)?;
        let round = |bytes: Vec<u8>| -> Result<Vec<u8>> {
            let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
            let r = self.call(&req, auth_version, deadline)?;
            if r.error_code != 0 {
                let message = r.error_message.as_ref().map(|m| m.to_string()).unwrap_or_default();
                return Err(failed(format!(
                    "{} ({}) {message}",
                    error_name(r.error_code),
                    mechanism.name()
                )));
            }
            Ok(r.auth_bytes.to_vec())
        };
        match mechanism {
            SaslMechanism::Plain => {
                round(sasl::plain_message(user, password))?;
            }
            SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
                let hash = if mechanism == SaslMechanism::ScramSha256 {
                    ScramHash::Sha256
                } else {
                    ScramHash::Sha512
                };
                let mut scram = ScramClient::new(hash, user, password).map_err(&failed)?;
                let server_first = round(scram.client_first())?;
                let client_final = scram.client_final(&server_first).map_err(&failed)?;
                let server_final = round(client_final)?;
                scram.verify_server_final(&server_final).map_err(&failed)?;
            }
        }
        Ok(())
    }
}

/// TCP connect to the first address of `addr` that answers, by `deadline`.
pub(super) fn connect(addr: &BrokerAddr, deadline: Instant, timeout_ms: u64) -> Result<TcpStream> {
    let unreachable = |op: &str, source: io::Error| Error::BrokerUnreachable {
        broker: addr.to_string(),
        op: op.to_string(),
        source,
    };
    // Name resolution has no timeout in std; brokers are usually given as IPs or resolve from
    // /etc/hosts or a local resolver.
    let addrs: Vec<SocketAddr> = (addr.host.as_str(), addr.port)
        .to_socket_addrs()
        .map_err(|e| unreachable("resolve", e))?
        .collect();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for a in addrs {
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                broker: addr.to_string(),
                what: "connect".into(),
                after_ms: timeout_ms,
            });
        }
        match TcpStream::connect_timeout(&a, left(deadline)) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                return Err(Error::Timeout {
                    broker: addr.to_string(),
                    what: "connect".into(),
                    after_ms: timeout_ms,
                });
            }
            Err(e) => last = e,
        }
    }
    Err(unreachable("connect", last))
}

/// A connection that died with a TLS alert on its first request: the broker refused the TLS
/// session after the handshake (TLS 1.3 reports a missing or unaccepted client certificate
/// this way). An authentication failure, not retried, with what to set.
pub(super) fn tls_refused(e: Error, config: &ClientConfig) -> Error {
    match e {
        Error::BrokerUnreachable { broker, op, source }
            // The alert comes as the first request's read fails ("TLS: received fatal
            // alert: ...") or, when it arrives first, as its write fails (rustls's own
            // "received fatal alert: ..."): TLS 1.3 sends it after the client's handshake.
            if source.to_string().contains("received fatal alert") =>
        {
            let hint = match config.ssl_certificate_location {
                None => {
                    " (the broker may require a client certificate: ssl.certificate.location \
                     and ssl.key.location)"
                }
                Some(_) => " (the broker may not accept the client certificate)",
            };
            Error::AuthFailed { broker, reason: format!("{op}: {source}{hint}") }
        }
        e => e,
    }
}

/// The TLS handshake on a connected socket, by `deadline`.
pub(super) fn tls_handshake(
    addr: &BrokerAddr,
    socket: &TcpStream,
    tls_config: &Arc<rustls::ClientConfig>,
    deadline: Instant,
    timeout_ms: u64,
) -> Result<rustls::ClientConnection> {
    let broker = addr.to_string();
    let name = rustls::pki_types::ServerName::try_from(addr.host.clone()).map_err(|e| {
        Error::InvalidInput(format!("broker host {:?} as a TLS name: {e}", addr.host))
    })?;
    let mut tls = rustls::ClientConnection::new(Arc::clone(tls_config), name).map_err(|e| {
        Error::AuthFailed { broker: broker.clone(), reason: format!("TLS setup: {e}") }
    })?;
    let mut sock = socket;
    while tls.is_handshaking() {
        let timeout = left(deadline);
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                broker,
                what: "TLS handshake".into(),
                after_ms: timeout_ms,
            });
        }
        let set = sock
            .set_read_timeout(Some(timeout))
            .and_then(|()| sock.set_write_timeout(Some(timeout)));
        set.map_err(|e| Error::BrokerUnreachable {
            broker: broker.clone(),
            op: "TLS handshake".into(),
            source: e,
        })?;
        if let Err(e) = tls.complete_io(&mut sock) {
            return Err(match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                    Error::Timeout { broker, what: "TLS handshake".into(), after_ms: timeout_ms }
                }
                io::ErrorKind::InvalidData => {
                    Error::AuthFailed { broker, reason: format!("TLS: {e}") }
                }
                _ => Error::BrokerUnreachable { broker, op: "TLS handshake".into(), source: e },
            });
        }
    }
    Ok(tls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn died(op: &str, message: &str) -> Error {
        Error::BrokerUnreachable {
            broker: "b:9093".into(),
            op: op.into(),
            source: io::Error::other(message.to_string()),
        }
    }

    #[test]
    fn a_tls_alert_on_the_first_requests_read_or_write_is_an_authentication_failure_with_a_hint() {
        let without = ClientConfig::default();
        let with = ClientConfig {
            ssl_certificate_location: Some("alice.pem".into()),
            ..ClientConfig::default()
        };
        // The read of the answer (the alert read as the first response) and the write of the
        // request (the alert arrived first): the same refusal either way.
        for (op, message) in [
            ("ApiVersions", "TLS: received fatal alert: CertificateRequired"),
            ("write request", "received fatal alert: UnknownCA"),
        ] {
            match tls_refused(died(op, message), &without) {
                Error::AuthFailed { reason, .. } => {
                    assert!(reason.contains("ssl.certificate.location"), "{reason}")
                }
                other => panic!("{op}: {other}"),
            }
            match tls_refused(died(op, message), &with) {
                Error::AuthFailed { reason, .. } => {
                    assert!(reason.contains("client certificate"), "{reason}")
                }
                other => panic!("{op}: {other}"),
            }
        }
        // Anything else stays what it was (retried as any unreachable broker).
        let reset = tls_refused(died("write request", "connection reset by peer"), &without);
        assert!(matches!(reset, Error::BrokerUnreachable { .. }), "{reset}");
    }
}
