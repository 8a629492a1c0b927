//! From parsed mount arguments to what the mount needs: the log configuration, the access
//! settings, the cluster client settings, the mount request and mode.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cluster::ClientConfig;
use crate::cluster::config::{is_bootstrap_spec, parse_bootstrap};
use crate::error::{Error, Result};
use crate::mount::{Access, ClusterMount, FuseOption, Mode, MountRequest};
use crate::storage::LogConfig;
use crate::storage::server_properties::read_server_properties;

use super::MountArgs;

/// `path` made absolute against the current directory (lexically: `..` and symlinks are left
/// for the checks that canonicalize); unchanged if the current directory is unknown.
fn absolute(path: &std::path::Path) -> std::path::PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

impl MountArgs {
    /// The log settings given on the command line, in the order they apply: the named flags,
    /// then each `--config KEY=VALUE` (a later one winning), trimmed.
    fn given_settings(&self) -> Result<Vec<(String, String)>> {
        let named = [
            ("segment.bytes", &self.segment_bytes),
            ("segment.ms", &self.segment_ms),
            ("segment.index.bytes", &self.segment_index_bytes),
            ("index.interval.bytes", &self.index_interval_bytes),
            ("max.message.bytes", &self.max_message_bytes),
            ("retention.ms", &self.retention_ms),
            ("retention.bytes", &self.retention_bytes),
            ("message.timestamp.type", &self.message_timestamp_type),
            ("compression.type", &self.compression_type),
        ];
        let mut given: Vec<(String, String)> = named
            .into_iter()
            .filter_map(|(key, value)| {
                value.as_ref().map(|v| (key.to_string(), v.trim().to_string()))
            })
            .collect();
        for pair in &self.config {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| Error::Usage(format!("--config {pair:?}: expected KEY=VALUE")))?;
            given.push((key.trim().to_string(), value.trim().to_string()));
        }
        Ok(given)
    }

    /// The log configuration: defaults, then the named flags, then each `--config` in order.
    pub fn log_config(&self) -> Result<LogConfig> {
        let mut config = LogConfig::default();
        for (key, value) in self.given_settings()? {
            config.set(&key, &value)?;
        }
        Ok(config)
    }

    /// The settings given by name (the named flags, then each `--config`, a later one winning),
    /// validated: the mount's defaults for every topic without an override.
    pub fn log_settings(&self) -> Result<std::collections::BTreeMap<String, String>> {
        self.log_config()?;
        Ok(self.given_settings()?.into_iter().collect())
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
        Access::from_options(self.options.iter().chain(flags.iter().flatten()))
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
        for option in &self.options {
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

    /// `--server-properties FILE` read into topic-level settings (empty without the flag).
    /// Refused for a cluster mount, whose brokers hold their own settings.
    pub fn server_properties(&self, cluster: bool) -> Result<BTreeMap<String, String>> {
        let Some(file) = &self.server_properties else { return Ok(BTreeMap::new()) };
        if cluster {
            return Err(Error::Usage(format!(
                "--server-properties {}: only for a local mount (a cluster's brokers keep their \
                 own settings)",
                file.display()
            )));
        }
        read_server_properties(file)
            .map_err(|e| Error::Usage(format!("--server-properties {}: {e}", file.display())))
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
        let server_properties = self.server_properties(cluster.is_some())?;
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
        Ok(MountRequest {
            cluster,
            access: self.access(),
            schemas: self.schema_settings(),
            data_dir,
            log_dirs,
            mountpoint: absolute(&self.mountpoint),
            read_only: self.read_only || self.options.contains(&FuseOption::ReadOnly),
            fuse_options: self.options.clone(),
            log_config,
            log_settings,
            server_properties,
            partitions: self.partitions,
            max_partitions: self.max_partitions,
            allow_non_log_dir: self.allow_non_log_dir
                || self.options.contains(&FuseOption::AllowNonLogDir),
            threads: usize::from(self.threads),
            memory_budget: self
                .options
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
            background_threads: self
                .options
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
        let option = self.options.iter().rev().find_map(|o| match o {
            FuseOption::LogFile(path) => Some(path.clone()),
            _ => None,
        });
        option.or_else(|| self.log_file.clone())
    }

    /// `--cache-dir`/`--cache-size`, or their `-o` forms (the last given wins, `-o` over flags).
    fn cache_settings(&self) -> crate::storage::cache::CacheSettings {
        let defaults = crate::storage::cache::CacheSettings::default();
        let dir = self
            .options
            .iter()
            .rev()
            .find_map(|o| match o {
                FuseOption::CacheDir(d) => Some(d.clone()),
                _ => None,
            })
            .or_else(|| self.cache_dir.clone().map(|f| f.0))
            .unwrap_or(defaults.dir);
        let max_bytes = self
            .options
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
