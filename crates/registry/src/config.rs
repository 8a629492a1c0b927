//! The registry client's settings, by the names the Confluent serializers (and kcat, libserdes)
//! take them.
//!
//! | setting | meaning |
//! | --- | --- |
//! | `schema.registry.url` | one or several comma-separated base URLs (`http://` or `https://`); on a connection error the next is tried |
//! | `basic.auth.credentials.source` | `USER_INFO` (from `basic.auth.user.info`) or `URL` (the `user:password@` of the URL) |
//! | `basic.auth.user.info` | `user:password` |
//! | `schema.registry.ssl.ca.location` | PEM file of the CAs to trust, **instead of** the system bundle (as librdkafka's `ssl.ca.location` and Java's trust store) |
//! | `schema.registry.ssl.certificate.location`, `schema.registry.ssl.key.location` | a client certificate chain and its key (PEM), both or neither |
//! | `schema.registry.request.timeout.ms` | the deadline of one request, connection included (default 5000) |
//! | `schema.registry.connect.timeout.ms` | the deadline of one connection (default: the request timeout) |
//! | `schema.registry.cache.ttl.ms` | how long subject, version and "not found" answers are reused (default 1000; topicfs's own) |
//! | `schema.registry.down.ms` | how long a URL that was not reached, or did not answer in time, is not asked again (default 10000; topicfs's own) |
//!
//! The `schema.registry.` prefix may be left off or added to the `basic.auth.` names, as the
//! Java serializers accept both. `basic.auth.credentials.source` defaults to `USER_INFO` when
//! `basic.auth.user.info` is given, else `URL`.
//!
//! Invariant: a password is never part of [`RegistryConfig`]'s `Debug` output, of a URL kept
//! for messages ([`BaseUrl::shown`]), or of an error.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use topicfs_source::{Error, Result};

/// Default `schema.registry.request.timeout.ms`.
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 5_000;
/// Default `schema.registry.cache.ttl.ms`.
pub const DEFAULT_CACHE_TTL_MS: u64 = 1_000;
/// Default `schema.registry.down.ms`.
pub const DEFAULT_DOWN_MS: u64 = 10_000;

/// Every setting name this client knows (with its aliases).
pub const SETTINGS: &[&str] = &[
    "schema.registry.url",
    "basic.auth.credentials.source",
    "schema.registry.basic.auth.credentials.source",
    "basic.auth.user.info",
    "schema.registry.basic.auth.user.info",
    "schema.registry.ssl.ca.location",
    "schema.registry.ssl.certificate.location",
    "schema.registry.ssl.key.location",
    "schema.registry.request.timeout.ms",
    "schema.registry.connect.timeout.ms",
    "schema.registry.cache.ttl.ms",
    "schema.registry.down.ms",
];

/// One base URL of the registry, without its user info.
#[derive(Clone, PartialEq, Eq)]
pub struct BaseUrl {
    /// `scheme://host[:port][/path]` with no trailing `/` and no `user:password@`: what
    /// requests are sent to and what errors name.
    pub shown: String,
    /// The `user:password` the URL carried (for `basic.auth.credentials.source=URL`).
    user_info: Option<String>,
}

impl BaseUrl {
    fn parse(text: &str) -> Result<BaseUrl> {
        let bad = |why: &str| {
            Error::InvalidInput(format!("schema.registry.url {:?}: {why}", redact(text)))
        };
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| bad("expected http://host:port or https://host:port"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(bad("the scheme must be http or https"));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let (user_info, host) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u.to_string()), h),
            None => (None, authority),
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        if path.contains(['?', '#']) {
            return Err(bad("a base URL has no query or fragment"));
        }
        let path = path.trim_end_matches('/');
        Ok(BaseUrl { shown: format!("{scheme}://{host}{path}"), user_info })
    }

    /// Whether requests to this URL use TLS.
    pub fn is_https(&self) -> bool {
        self.shown.starts_with("https://")
    }
}

impl fmt::Debug for BaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

/// `text` (a URL as given) with any `user:password@` replaced by `***@`.
fn redact(text: &str) -> String {
    let (scheme, rest) = text.split_once("://").unwrap_or(("", text));
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((_, host)) if scheme.is_empty() => format!("***@{host}{path}"),
        Some((_, host)) => format!("{scheme}://***@{host}{path}"),
        None => text.to_string(),
    }
}

/// Where basic-auth credentials come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredentialsSource {
    UserInfo,
    Url,
}

/// The settings of an [`crate::HttpRegistry`]. See the module docs for the names.
#[derive(Clone)]
pub struct RegistryConfig {
    /// The base URLs, in the order given (at least one).
    pub urls: Vec<BaseUrl>,
    pub credentials_source: CredentialsSource,
    /// `user:password` of `basic.auth.user.info`.
    user_info: Option<String>,
    pub ssl_ca_location: Option<PathBuf>,
    pub ssl_certificate_location: Option<PathBuf>,
    pub ssl_key_location: Option<PathBuf>,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// How long subject, version and "not found" answers are reused.
    pub cache_ttl: Duration,
    /// How long a URL that was not reached, or did not answer in time, is not asked again.
    pub down_for: Duration,
}

impl fmt::Debug for RegistryConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryConfig")
            .field("urls", &self.urls)
            .field("credentials_source", &self.credentials_source)
            .field("user", &self.user())
            .field("ssl_ca_location", &self.ssl_ca_location)
            .field("ssl_certificate_location", &self.ssl_certificate_location)
            .field("ssl_key_location", &self.ssl_key_location)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("cache_ttl", &self.cache_ttl)
            .field("down_for", &self.down_for)
            .finish()
    }
}

fn millis(name: &str, value: &str) -> Result<Duration> {
    match value.trim().parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => Err(Error::InvalidInput(format!(
            "{name}={value:?}: expected a positive number of milliseconds"
        ))),
    }
}

fn path(name: &str, value: &str) -> Result<PathBuf> {
    if value.is_empty() {
        return Err(Error::InvalidInput(format!("{name}: expected a file name")));
    }
    Ok(PathBuf::from(value))
}

impl RegistryConfig {
    /// Whether `name` is one of this client's settings ([`SETTINGS`]).
    pub fn is_setting(name: &str) -> bool {
        SETTINGS.contains(&name)
    }

    /// The settings from `(name, value)` pairs. A name that is not one of [`SETTINGS`], a
    /// value that cannot be read, no `schema.registry.url`, `USER_INFO` without user info, or
    /// only one of the client certificate and key is `InvalidInput` naming the setting (never
    /// the password).
    pub fn from_settings(settings: &[(String, String)]) -> Result<RegistryConfig> {
        let mut urls = None;
        let mut source = None;
        let mut user_info = None;
        let mut config = RegistryConfig {
            urls: Vec::new(),
            credentials_source: CredentialsSource::Url,
            user_info: None,
            ssl_ca_location: None,
            ssl_certificate_location: None,
            ssl_key_location: None,
            request_timeout: Duration::from_millis(DEFAULT_REQUEST_TIMEOUT_MS),
            connect_timeout: Duration::from_millis(DEFAULT_REQUEST_TIMEOUT_MS),
            cache_ttl: Duration::from_millis(DEFAULT_CACHE_TTL_MS),
            down_for: Duration::from_millis(DEFAULT_DOWN_MS),
        };
        let mut connect_timeout = None;
        for (name, value) in settings {
            match name.as_str() {
                "schema.registry.url" => {
                    let list = value
                        .split(',')
                        .map(str::trim)
                        .filter(|u| !u.is_empty())
                        .map(BaseUrl::parse)
                        .collect::<Result<Vec<_>>>()?;
                    urls = Some(list);
                }
                "basic.auth.credentials.source"
                | "schema.registry.basic.auth.credentials.source" => {
                    source = Some(match value.trim().to_ascii_uppercase().as_str() {
                        "USER_INFO" => CredentialsSource::UserInfo,
                        "URL" => CredentialsSource::Url,
                        "SASL_INHERIT" => {
                            return Err(Error::InvalidInput(format!(
                                "{name}=SASL_INHERIT: not supported (give \
                                 basic.auth.user.info instead)"
                            )));
                        }
                        _ => {
                            return Err(Error::InvalidInput(format!(
                                "{name}={value:?}: expected USER_INFO or URL"
                            )));
                        }
                    })
                }
                "basic.auth.user.info" | "schema.registry.basic.auth.user.info" => {
                    if !value.contains(':') {
                        return Err(Error::InvalidInput(format!(
                            "{name}: expected user:password (the value is not shown)"
                        )));
                    }
                    user_info = Some(value.clone());
                }
                "schema.registry.ssl.ca.location" => {
                    config.ssl_ca_location = Some(path(name, value)?)
                }
                "schema.registry.ssl.certificate.location" => {
                    config.ssl_certificate_location = Some(path(name, value)?)
                }
                "schema.registry.ssl.key.location" => {
                    config.ssl_key_location = Some(path(name, value)?)
                }
                "schema.registry.request.timeout.ms" => {
                    config.request_timeout = millis(name, value)?
                }
                "schema.registry.connect.timeout.ms" => {
                    connect_timeout = Some(millis(name, value)?)
                }
                "schema.registry.cache.ttl.ms" => config.cache_ttl = millis(name, value)?,
                "schema.registry.down.ms" => config.down_for = millis(name, value)?,
                other => {
                    return Err(Error::InvalidInput(format!(
                        "unknown schema registry setting {other:?} (known: {})",
                        SETTINGS.join(", ")
                    )));
                }
            }
        }
        config.urls = match urls {
            Some(list) if !list.is_empty() => list,
            _ => {
                return Err(Error::InvalidInput(
                    "schema.registry.url: expected one or more comma-separated URLs".into(),
                ));
            }
        };
        config.connect_timeout = connect_timeout.unwrap_or(config.request_timeout);
        config.credentials_source = match source {
            Some(s) => s,
            None if user_info.is_some() => CredentialsSource::UserInfo,
            None => CredentialsSource::Url,
        };
        if config.credentials_source == CredentialsSource::UserInfo && user_info.is_none() {
            return Err(Error::InvalidInput(
                "basic.auth.credentials.source=USER_INFO: basic.auth.user.info is not set".into(),
            ));
        }
        config.user_info = user_info;
        match (&config.ssl_certificate_location, &config.ssl_key_location) {
            (Some(_), None) | (None, Some(_)) => {
                return Err(Error::InvalidInput(
                    "schema.registry.ssl.certificate.location and schema.registry.ssl.key.location \
                     are given together (a client certificate and its key)"
                        .into(),
                ));
            }
            _ => {}
        }
        Ok(config)
    }

    /// The `user:password` to send to `url`, split at the first `:`, if any.
    pub(crate) fn credentials_for<'a>(&'a self, url: &'a BaseUrl) -> Option<(&'a str, &'a str)> {
        let info = match self.credentials_source {
            CredentialsSource::UserInfo => self.user_info.as_deref(),
            CredentialsSource::Url => url.user_info.as_deref(),
        }?;
        Some(info.split_once(':').unwrap_or((info, "")))
    }

    /// The user name (no password) of the first URL's credentials, for messages.
    pub fn user(&self) -> Option<&str> {
        let url = self.urls.first()?;
        self.credentials_for(url).map(|(user, _)| user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    #[test]
    fn settings_by_their_client_names() {
        let c = RegistryConfig::from_settings(&settings(&[
            ("schema.registry.url", "http://a:8081/, https://b:8081/base/"),
            ("basic.auth.user.info", "fred:s3cret:x"),
            ("schema.registry.request.timeout.ms", "250"),
        ]))
        .unwrap();
        assert_eq!(c.urls.len(), 2);
        assert_eq!(c.urls[0].shown, "http://a:8081");
        assert_eq!(c.urls[1].shown, "https://b:8081/base");
        assert_eq!(c.credentials_source, CredentialsSource::UserInfo);
        assert_eq!(c.credentials_for(&c.urls[0]), Some(("fred", "s3cret:x")));
        assert_eq!(c.request_timeout, Duration::from_millis(250));
        assert_eq!(c.connect_timeout, Duration::from_millis(250));
        assert!(!format!("{c:?}").contains("s3cret"), "{c:?}");
    }

    #[test]
    fn credentials_from_the_url_are_never_shown() {
        let c = RegistryConfig::from_settings(&settings(&[
            ("schema.registry.url", "http://fred:s3cret@a:8081"),
            ("basic.auth.credentials.source", "URL"),
        ]))
        .unwrap();
        assert_eq!(c.urls[0].shown, "http://a:8081");
        assert_eq!(c.credentials_for(&c.urls[0]), Some(("fred", "s3cret")));
        assert!(!format!("{c:?}").contains("s3cret"));
        let e = RegistryConfig::from_settings(&settings(&[(
            "schema.registry.url",
            "ftp://fred:s3cret@a:8081",
        )]))
        .unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }

    #[test]
    fn refused_settings_name_the_setting() {
        for (pairs, word) in [
            (vec![], "schema.registry.url"),
            (vec![("schema.registry.url", "a:8081")], "schema.registry.url"),
            (
                vec![
                    ("schema.registry.url", "http://a"),
                    ("basic.auth.credentials.source", "USER_INFO"),
                ],
                "basic.auth.user.info",
            ),
            (
                vec![
                    ("schema.registry.url", "http://a"),
                    ("schema.registry.ssl.key.location", "/k"),
                ],
                "schema.registry.ssl.certificate.location",
            ),
            (
                vec![
                    ("schema.registry.url", "http://a"),
                    ("schema.registry.request.timeout.ms", "x"),
                ],
                "schema.registry.request.timeout.ms",
            ),
            (vec![("schema.registry.url", "http://a"), ("bogus", "1")], "bogus"),
        ] {
            let e = RegistryConfig::from_settings(&settings(&pairs)).unwrap_err();
            assert!(matches!(e, Error::InvalidInput(_)), "{e:?}");
            assert!(e.to_string().contains(word), "{e}");
        }
    }
}
