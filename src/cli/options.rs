//! From parsed mount arguments to what the mount needs: the log configuration, the access
//! settings, the cluster client settings, the mount request and mode.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cluster::ClientConfig;
use crate::cluster::config::{is_bootstrap_spec, parse_bootstrap};
use crate::error::{Error, Result};
use crate::mount::{Access, ClusterMount, FuseOption, Mode, MountRequest};
use crate::settings::LogConfig;
use crate::settings::config::NAMES;
use crate::settings::server_properties::{BrokerDefault, parse_server_properties, reason};

use super::MountArgs;

/// `path` made absolute against the current directory (lexically: `..` and symlinks are left
/// for the checks that canonicalize); unchanged if the current directory is unknown.
fn absolute(path: &std::path::Path) -> std::path::PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A log setting given on the command line.
struct GivenSetting {
    /// Its topic-level name, trimmed.
    key: String,
    /// Its value, trimmed.
    value: String,
    /// How it was given, for messages: `--retention-ms -1`, `--config retention.ms=-1`.
    given: String,
}

impl MountArgs {
    /// The log settings given on the command line, in the order they apply: the named flags,
    /// then each `--config KEY=VALUE` (a later one winning), trimmed; each with how it was
    /// given (`--segment-bytes 1048576`, `--config segment.bytes=1048576`).
    fn given_settings(&self) -> Result<Vec<GivenSetting>> {
        let named = [
            ("segment.bytes", "--segment-bytes", &self.segment_bytes),
            ("segment.ms", "--segment-ms", &self.segment_ms),
            ("segment.index.bytes", "--segment-index-bytes", &self.segment_index_bytes),
            ("index.interval.bytes", "--index-interval-bytes", &self.index_interval_bytes),
            ("max.message.bytes", "--max-message-bytes", &self.max_message_bytes),
            ("retention.ms", "--retention-ms", &self.retention_ms),
            ("retention.bytes", "--retention-bytes", &self.retention_bytes),
            ("message.timestamp.type", "--message-timestamp-type", &self.message_timestamp_type),
            ("compression.type", "--compression-type", &self.compression_type),
        ];
        let mut given: Vec<GivenSetting> = named
            .into_iter()
            .filter_map(|(key, flag, value)| {
                let value = value.as_ref()?.trim().to_string();
                Some(GivenSetting { key: key.to_string(), given: format!("{flag} {value}"), value })
            })
            .collect();
        for pair in &self.config {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| Error::Usage(format!("--config {pair:?}: expected KEY=VALUE")))?;
            let (key, value) = (key.trim().to_string(), value.trim().to_string());
            given.push(GivenSetting { given: format!("--config {key}={value}"), key, value });
        }
        Ok(given)
    }

    /// The log configuration: defaults, then the named flags, then each `--config` in order.
    /// A value Kafka refuses is a usage error naming how it was given and the rule.
    pub fn log_config(&self) -> Result<LogConfig> {
        let mut config = LogConfig::default();
        for setting in self.given_settings()? {
            config
                .set(&setting.key, &setting.value)
                .map_err(|e| Error::Usage(format!("{}: {}", setting.given, reason(e))))?;
        }
        Ok(config)
    }

    /// The settings given by name (the named flags, then each `--config`, a later one winning),
    /// validated: the mount's defaults for every topic without an override.
    pub fn log_settings(&self) -> Result<std::collections::BTreeMap<String, String>> {
        self.log_config()?;
        Ok(self.given_settings()?.into_iter().map(|s| (s.key, s.value)).collect())
    }

    /// Refuses mount defaults that break a rule between settings (`min.compaction.lag.ms`
    /// above `max.compaction.lag.ms`) once layered over `server.properties`' defaults as a
    /// topic's settings are ([`crate::settings::topic_config`]): a broker would refuse them,
    /// and every later `config` write would fail on them. Names each setting with where its
    /// value comes from.
    fn check_defaults_together(&self, server: &[BrokerDefault]) -> Result<()> {
        let mut config = LogConfig::default();
        let mut from: BTreeMap<&str, String> = BTreeMap::new();
        let file = self.server_properties.as_deref().unwrap_or(Path::new("server.properties"));
        for default in server.iter().filter(|d| NAMES.contains(&d.name)) {
            config.set(default.name, &default.value)?;
            from.insert(
                default.name,
                format!(
                    "{}={} on line {} of {}",
                    default.broker_name,
                    default.broker_value,
                    default.line,
                    file.display()
                ),
            );
        }
        for setting in self.given_settings()? {
            config.set(&setting.key, &setting.value)?;
            if let Some(name) = NAMES.iter().find(|n| **n == setting.key) {
                from.insert(name, setting.given);
            }
        }
        let Some(conflict) = config.conflict() else { return Ok(()) };
        let sources: Vec<String> = conflict
            .names
            .iter()
            .map(|name| {
                let source = from.get(name).cloned().unwrap_or_else(|| "Kafka's default".into());
                format!("{name} from {source}")
            })
            .collect();
        Err(Error::Usage(format!(
            "conflicting log settings: {} ({})",
            conflict.rule,
            sources.join("; ")
        )))
    }

    /// Every `-o` option, in the order given.
    pub fn fuse_options(&self) -> Vec<FuseOption> {
        self.options.iter().flat_map(|list| list.0.iter().cloned()).collect()
    }

    /// Owner, group and modes: the `-o` access options in order, then the flags (which win).
    pub fn access(&self) -> Access {
        let flags = [
            self.uid.map(FuseOption::Uid),
            self.gid.map(FuseOption::Gid),
            self.umask.map(FuseOption::Umask),
            self.file_mode.map(FuseOption::FileMode),
            self.dir_mode.map(FuseOption::DirMode),
        ];
        Access::from_options(self.fuse_options().iter().chain(flags.iter().flatten()))
    }

    /// The log dirs of a local mount: `DATA_DIR` split at commas, as a broker's `log.dirs`
    /// (each as given, and absolute), unless the whole name is an existing directory (a
    /// single dir whose name holds a comma).
    pub fn log_dirs(&self) -> Result<Vec<(String, PathBuf)>> {
        let whole = self.data_dir.to_string_lossy().into_owned();
        if self.data_dir.is_dir() || !whole.contains(',') {
            return Ok(vec![(whole, absolute(&self.data_dir))]);
        }
        let mut dirs = Vec::new();
        for entry in whole.split(',') {
            if entry.is_empty() {
                return Err(Error::Usage(format!(
                    "data dir {whole:?}: an empty entry in the list of log dirs"
                )));
            }
            dirs.push((entry.to_string(), absolute(Path::new(entry))));
        }
        Ok(dirs)
    }

    /// Where schemas come from: `-o` options in order, then the flags (which win).
    pub fn schema_settings(&self) -> crate::mount::SchemaSettings {
        let mut settings = crate::mount::SchemaSettings::default();
        for option in &self.fuse_options() {
            match option {
                FuseOption::Schemas(on) => settings.enabled = Some(*on),
                FuseOption::SchemasTopic(t) => settings.topic = Some(t.clone()),
                FuseOption::SchemaRegistry(url) => settings.registry = Some(url.clone()),
                _ => {}
            }
        }
        if let Some(topic) = &self.schemas_topic {
            settings.topic = Some(topic.clone());
        }
        if let Some(url) = &self.schema_registry {
            settings.registry = Some(url.clone());
        }
        settings.registry_config.clone_from(&self.schema_registry_config);
        settings
    }

    /// The cluster of a `kafka://` source: bootstrap servers and the client settings
    /// (defaults, then `--command-config`, then each `--config` in order). `None` for a local
    /// data dir, where `--command-config` is refused.
    pub fn cluster(&self) -> Result<Option<ClusterMount>> {
        let source = self.data_dir.to_string_lossy();
        if !is_bootstrap_spec(&source) {
            if let Some(file) = &self.command_config {
                return Err(Error::Usage(format!(
                    "--command-config {}: only for a cluster mount (kafka://HOST:PORT)",
                    file.display()
                )));
            }
            return Ok(None);
        }
        let log_flags = [
            ("--segment-bytes", &self.segment_bytes),
            ("--segment-ms", &self.segment_ms),
            ("--segment-index-bytes", &self.segment_index_bytes),
            ("--index-interval-bytes", &self.index_interval_bytes),
            ("--max-message-bytes", &self.max_message_bytes),
            ("--retention-ms", &self.retention_ms),
            ("--retention-bytes", &self.retention_bytes),
            ("--message-timestamp-type", &self.message_timestamp_type),
            ("--compression-type", &self.compression_type),
        ];
        if let Some((flag, _)) = log_flags.iter().find(|(_, v)| v.is_some()) {
            return Err(Error::Usage(format!(
                "{flag} is a log setting of a local mount; a cluster's topics keep the brokers' \
                 (client settings go in --config KEY=VALUE)"
            )));
        }
        let bootstrap = parse_bootstrap(&source).map_err(|e| Error::Usage(e.to_string()))?;
        let mut config = ClientConfig::default();
        if let Some(file) = &self.command_config {
            config.load_properties_file(file).map_err(|e| Error::Usage(e.to_string()))?;
        }
        for pair in &self.config {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| Error::Usage(format!("--config {pair:?}: expected KEY=VALUE")))?;
            config.set(key.trim(), value, "--config").map_err(|e| Error::Usage(e.to_string()))?;
        }
        Ok(Some(ClusterMount { bootstrap, config }))
    }

    /// `--server-properties FILE` read into topic-level settings, validated (empty without the
    /// flag). Refused for a cluster mount, whose brokers hold their own settings.
    pub fn server_properties(&self, cluster: bool) -> Result<Vec<BrokerDefault>> {
        let Some(file) = &self.server_properties else { return Ok(Vec::new()) };
        if cluster {
            return Err(Error::Usage(format!(
                "--server-properties {}: only for a local mount (a cluster's brokers keep their \
                 own settings)",
                file.display()
            )));
        }
        let text = crate::storage::open::read_regular_to_string(file);
        text.and_then(|text| parse_server_properties(&text, file)).map_err(|e| {
            Error::Usage(format!(
                "--server-properties: {} (a broker would not start with it)",
                reason(e)
            ))
        })
    }

    /// The mount request these arguments describe.
    ///
    /// Every path in it is absolute, resolved against the current directory here: the daemon
    /// child changes to `/` before it opens the data dir, the cache dir or a cluster's
    /// certificate files, so a relative path must never reach it.
    pub fn request(&self) -> Result<MountRequest> {
        let mut cluster = self.cluster()?;
        if let Some(cluster) = cluster.as_mut() {
            let config = &mut cluster.config;
            for path in [
                &mut config.ssl_ca_location,
                &mut config.ssl_certificate_location,
                &mut config.ssl_key_location,
            ]
            .into_iter()
            .flatten()
            {
                *path = absolute(path);
            }
        }
        let log_config = if cluster.is_some() { LogConfig::default() } else { self.log_config()? };
        if self.partitions > self.max_partitions {
            return Err(Error::Usage(format!(
                "--partitions {} is above --max-partitions {} (the most partitions a topic may \
                 get through the mount)",
                self.partitions, self.max_partitions
            )));
        }
        let log_settings =
            if cluster.is_some() { Default::default() } else { self.log_settings()? };
        let server_defaults = self.server_properties(cluster.is_some())?;
        if cluster.is_none() {
            self.check_defaults_together(&server_defaults)?;
        }
        let server_properties =
            server_defaults.into_iter().map(|d| (d.name.to_string(), d.value)).collect();
        let log_dirs = if cluster.is_some() { Vec::new() } else { self.log_dirs()? };
        let data_dir = if cluster.is_some() {
            self.data_dir.clone()
        } else {
            let joined: Vec<String> =
                log_dirs.iter().map(|(_, path)| path.display().to_string()).collect();
            PathBuf::from(joined.join(","))
        };
        let mut cache = self.cache_settings();
        cache.dir = cache.dir.as_deref().map(absolute);
        let options = self.fuse_options();
        Ok(MountRequest {
            cluster,
            access: self.access(),
            schemas: self.schema_settings(),
            data_dir,
            log_dirs,
            mountpoint: absolute(&self.mountpoint),
            read_only: self.read_only || options.contains(&FuseOption::ReadOnly),
            nonempty: self.nonempty || options.contains(&FuseOption::NonEmpty),
            log_config,
            log_settings,
            server_properties,
            partitions: self.partitions,
            max_partitions: self.max_partitions,
            allow_non_log_dir: self.allow_non_log_dir
                || options.contains(&FuseOption::AllowNonLogDir),
            threads: usize::from(self.threads),
            memory_budget: options
                .iter()
                .rev()
                .find_map(|o| match o {
                    FuseOption::MemoryBudget(n) => Some(*n),
                    _ => None,
                })
                .or(self.memory_budget)
                .unwrap_or(crate::view::budget::DEFAULT_MEMORY_BUDGET),
            key_index_memory: self
                .key_index_memory
                .map_or(crate::storage::key_index::DEFAULT_MEMORY_LIMIT, |n| n as u64),
            background_threads: options
                .iter()
                .rev()
                .find_map(|o| match o {
                    FuseOption::BackgroundThreads(n) => Some(*n),
                    _ => None,
                })
                .or(self.background_threads)
                .or(self.render_threads)
                .unwrap_or_else(crate::executor::Executor::default_threads),
            isolation: self.isolation,
            fuse_options: options,
            sizing_budget: self.sizing_budget,
            cache,
            retention_check_interval: std::time::Duration::from_millis(
                self.retention_check_interval_ms,
            ),
            cleaner_backoff: std::time::Duration::from_millis(self.cleaner_backoff_ms),
            cleaner_dedupe_buffer_bytes: self.cleaner_dedupe_buffer_size,
            log_file: self.log_file().map(|p| absolute(&p)),
        })
    }

    /// `--log-file` or `-o log_file=` (the last given wins, `-o` over the flag), as written.
    pub fn log_file(&self) -> Option<PathBuf> {
        let option = self.fuse_options().into_iter().rev().find_map(|o| match o {
            FuseOption::LogFile(path) => Some(path),
            _ => None,
        });
        option.or_else(|| self.log_file.clone())
    }

    /// `--cache-dir`/`--cache-size`, or their `-o` forms (the last given wins, `-o` over flags).
    fn cache_settings(&self) -> crate::storage::cache::CacheSettings {
        let defaults = crate::storage::cache::CacheSettings::default();
        let options = self.fuse_options();
        let dir = options
            .iter()
            .rev()
            .find_map(|o| match o {
                FuseOption::CacheDir(d) => Some(d.clone()),
                _ => None,
            })
            .or_else(|| self.cache_dir.clone().map(|f| f.0))
            .unwrap_or(defaults.dir);
        let max_bytes = options
            .iter()
            .rev()
            .find_map(|o| match o {
                FuseOption::CacheSize(n) => Some(*n),
                _ => None,
            })
            .or(self.cache_size.map(|n| n as u64))
            .unwrap_or(defaults.max_bytes);
        crate::storage::cache::CacheSettings { dir, max_bytes }
    }

    /// Foreground, background, or the daemon child of a background mount.
    pub fn mode(&self) -> Mode {
        if self.daemon_child {
            Mode::DaemonChild
        } else if self.foreground {
            Mode::Foreground
        } else {
            Mode::Background
        }
    }
}
