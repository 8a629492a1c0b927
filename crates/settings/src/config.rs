//! Per-topic configuration with Kafka's topic-level names, types, ranges and defaults
//! (`LogConfig`), and what a broker holds for a data dir's topics ([`BrokerSettings`]).
//!
//! Names are the topic-level ones (`segment.bytes`, not the broker's `log.segment.bytes`),
//! values are parsed with the validation Kafka 4.0's `LogConfig` applies (minimums, ranges,
//! `-1` meaning "no limit" where Kafka allows it), and every refusal names the setting and the
//! rule. Every topic-level setting Kafka 4.0 has is accepted ([`NAMES`]); those that change
//! nothing in a single-node engine without replication or tiered storage are stored and shown
//! with Kafka's validation and defaults ([`NO_EFFECT`], SEMANTICS.md "Topic settings"), and
//! `remote.storage.enable=true` is refused as a broker without tiered storage refuses it.
//!
//! [`LogConfig::get`] renders a value as Kafka's DescribeConfigs shows it, and
//! [`LogConfig::set`] of that rendering gives the same value back (the invariant the `config`
//! file's round trip rests on, `rendered_values_parse_back_to_the_same_config`).

use std::collections::BTreeMap;

use topicfs_format::Compression;
use topicfs_source::error::{Error, Result};

/// `segment.bytes` default: 1 GiB.
pub const DEFAULT_SEGMENT_BYTES: u64 = 1 << 30;
/// `segment.ms` default: 7 days (`log.roll.hours` = 168).
pub const DEFAULT_SEGMENT_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// `segment.index.bytes` default: 10 MiB.
pub const DEFAULT_SEGMENT_INDEX_BYTES: u32 = 10 * 1024 * 1024;
/// `index.interval.bytes` default: one offset-index entry about every 4 KiB of log.
pub const DEFAULT_INDEX_INTERVAL_BYTES: u32 = 4096;
/// `max.message.bytes` default: 1 MiB plus the 12-byte log overhead.
pub const DEFAULT_MAX_MESSAGE_BYTES: u32 = 1024 * 1024 + 12;
/// `retention.ms` default: 7 days.
pub const DEFAULT_RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// `delete.retention.ms` default: 1 day.
pub const DEFAULT_DELETE_RETENTION_MS: i64 = 24 * 60 * 60 * 1000;
/// `file.delete.delay.ms` default: 1 minute.
pub const DEFAULT_FILE_DELETE_DELAY_MS: i64 = 60_000;
/// `message.timestamp.after.max.ms` default in Kafka 4.0 (KIP-1030): 1 hour.
pub const DEFAULT_TIMESTAMP_AFTER_MAX_MS: i64 = 60 * 60 * 1000;
/// `min.cleanable.dirty.ratio` default.
pub const DEFAULT_MIN_CLEANABLE_DIRTY_RATIO: f64 = 0.5;
/// Smallest `segment.bytes` Kafka 4.0 accepts (the v0 message minimum).
const MIN_SEGMENT_BYTES: u64 = 14;
/// Smallest `segment.index.bytes` Kafka accepts.
const MIN_SEGMENT_INDEX_BYTES: u32 = 4;

/// `message.timestamp.type`: who decides record timestamps.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MessageTimestampType {
    /// Producer timestamps are kept (records without one get "now" from the engine).
    CreateTime,
    /// The engine stamps every batch with the append time (attribute bit 3, `maxTimestamp`).
    LogAppendTime,
}

/// `compression.type` of a topic.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CompressionType {
    /// Keep what the producer sent. Our appends come from files, which carry no codec, so this
    /// writes uncompressed batches.
    Producer,
    /// Always write batches with this codec (`uncompressed` is [`Compression::None`]).
    Codec(Compression),
}

impl CompressionType {
    /// The codec appended batches are written with.
    pub fn codec(self) -> Compression {
        match self {
            CompressionType::Producer => Compression::None,
            CompressionType::Codec(c) => c,
        }
    }

    /// Kafka's name of the setting's value.
    pub fn as_str(self) -> &'static str {
        match self {
            CompressionType::Producer => "producer",
            CompressionType::Codec(Compression::None) => "uncompressed",
            CompressionType::Codec(Compression::Gzip) => "gzip",
            CompressionType::Codec(Compression::Snappy) => "snappy",
            CompressionType::Codec(Compression::Lz4) => "lz4",
            CompressionType::Codec(Compression::Zstd) => "zstd",
        }
    }
}

/// `cleanup.policy`: `delete`, `compact` or both (`compact,delete`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CleanupPolicy {
    pub delete: bool,
    pub compact: bool,
}

impl CleanupPolicy {
    /// Kafka's default: `delete` only.
    pub const DELETE: CleanupPolicy = CleanupPolicy { delete: true, compact: false };
    /// `compact` only.
    pub const COMPACT: CleanupPolicy = CleanupPolicy { delete: false, compact: true };

    /// The value as Kafka lists it (`delete`, `compact`, `compact,delete`).
    pub fn as_str(self) -> &'static str {
        match (self.compact, self.delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            _ => "delete",
        }
    }

    /// Parses Kafka's list form: comma-separated, each `compact` or `delete`, spaces around
    /// items ignored, at least one item.
    pub fn parse(value: &str) -> Option<CleanupPolicy> {
        let mut policy = CleanupPolicy { delete: false, compact: false };
        for item in value.split(',') {
            match item.trim() {
                "delete" => policy.delete = true,
                "compact" => policy.compact = true,
                _ => return None,
            }
        }
        (policy.delete || policy.compact).then_some(policy)
    }
}

/// The settings of one log (partition), Kafka names and defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `cleanup.policy`: with `delete`, retention deletes old segments by time and size; with
    /// `compact`, the log cleaner keeps the last record of each key. Rule 1 of retention (the
    /// log start offset breach) applies whatever the policy, as in Kafka.
    pub cleanup_policy: CleanupPolicy,
    /// `delete.retention.ms`: how long a tombstone is kept after its segment was cleaned.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: a record younger than this is not compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a record older than this makes its segment cleanable
    /// whatever the dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`, in `[0, 1]`: the dirty share of a log above which the
    /// cleaner cleans it.
    pub min_cleanable_dirty_ratio: f64,
    /// `segment.bytes`: the active segment is rolled before an append that would make its `.log`
    /// larger than this.
    pub segment_bytes: u64,
    /// `segment.ms`: the active segment is rolled once the record-time span since its first
    /// batch exceeds this (minus the jitter).
    pub segment_ms: i64,
    /// `segment.jitter.ms`: random reduction of `segment.ms`, drawn once per segment.
    pub segment_jitter_ms: i64,
    /// `segment.index.bytes`: preallocated size of `.index` and `.timeindex` files, rounded down
    /// to whole entries.
    pub segment_index_bytes: u32,
    /// `index.interval.bytes`: log bytes between two offset-index entries.
    pub index_interval_bytes: u32,
    /// `max.message.bytes`: largest batch as stored (12-byte overhead included).
    pub max_message_bytes: u32,
    /// `retention.ms`: segments whose max timestamp is older are deleted; `None` = `-1`.
    pub retention_ms: Option<i64>,
    /// `retention.bytes`: oldest segments are deleted while the log is larger; `None` = `-1`.
    pub retention_bytes: Option<u64>,
    /// `message.timestamp.type`.
    pub message_timestamp_type: MessageTimestampType,
    /// `compression.type`.
    pub compression_type: CompressionType,
    /// The settings stored and shown but without effect here ([`NO_EFFECT`]), by name, as
    /// rendered ([`LogConfig::get`]); absent means Kafka's default.
    pub stored: BTreeMap<&'static str, String>,
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
            cleanup_policy: CleanupPolicy::DELETE,
            delete_retention_ms: DEFAULT_DELETE_RETENTION_MS,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: DEFAULT_MIN_CLEANABLE_DIRTY_RATIO,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            segment_ms: DEFAULT_SEGMENT_MS,
            segment_jitter_ms: 0,
            segment_index_bytes: DEFAULT_SEGMENT_INDEX_BYTES,
            index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            retention_ms: Some(DEFAULT_RETENTION_MS),
            retention_bytes: None,
            message_timestamp_type: MessageTimestampType::CreateTime,
            compression_type: CompressionType::Producer,
            stored: BTreeMap::new(),
        }
    }
}

/// Every topic-level setting of Kafka 4.0, sorted: what [`LogConfig::set`] accepts and
/// [`LogConfig::get`] shows.
pub const NAMES: &[&str] = &[
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
];

/// The keys [`LogConfig::set`] understands (the same list as [`NAMES`]).
pub const KNOWN_KEYS: &[&str] = NAMES;

/// Settings accepted, validated and shown, without effect in this engine, with why:
/// - replication (`min.insync.replicas`, `unclean.leader.election.enable`, the two
///   `*.replication.throttled.replicas`): one node, no replicas;
/// - tiered storage (`local.retention.*`, `remote.log.*`, `remote.storage.enable`, which
///   only accepts `false`): there is no remote tier;
/// - `flush.messages`, `flush.ms`: the engine's own durability rules apply (RELIABILITY.md);
/// - `file.delete.delay.ms`: segment files are deleted at once (no reader of ours holds an
///   old segment open by name);
/// - `preallocate`: `.log` files are never preallocated;
/// - `compression.*.level`: appends use each codec's default level;
/// - `message.timestamp.before.max.ms`, `message.timestamp.after.max.ms`: appends are not
///   refused by timestamp.
pub const NO_EFFECT: &[&str] = &[
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "unclean.leader.election.enable",
];

/// Kafka's default of a [`NO_EFFECT`] setting, as rendered.
fn stored_default(name: &str) -> &'static str {
    match name {
        "compression.gzip.level" => "-1",
        "compression.lz4.level" => "9",
        "compression.zstd.level" => "3",
        "file.delete.delay.ms" => "60000",
        "flush.messages" | "flush.ms" | "message.timestamp.before.max.ms" => "9223372036854775807",
        "local.retention.bytes" | "local.retention.ms" => "-2",
        "message.timestamp.after.max.ms" => "3600000",
        "min.insync.replicas" => "1",
        "preallocate"
        | "remote.log.copy.disable"
        | "remote.log.delete.on.disable"
        | "remote.storage.enable"
        | "unclean.leader.election.enable" => "false",
        // The throttled-replica lists.
        _ => "",
    }
}

impl LogConfig {
    /// Sets one setting by its Kafka topic-level name, validating the value as Kafka does.
    /// On error nothing changed; the message names the setting and the rule.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let value = value.trim();
        match key {
            "cleanup.policy" => {
                self.cleanup_policy = CleanupPolicy::parse(value).ok_or_else(|| {
                    invalid(key, value, "must be delete, compact or compact,delete".to_string())
                })?
            }
            "delete.retention.ms" => {
                self.delete_retention_ms = at_least(key, parse_int(key, value)?, 0)?
            }
            "min.compaction.lag.ms" => {
                self.min_compaction_lag_ms = at_least(key, parse_int(key, value)?, 0)?
            }
            "max.compaction.lag.ms" => {
                self.max_compaction_lag_ms = at_least(key, parse_int(key, value)?, 1)?
            }
            "min.cleanable.dirty.ratio" => {
                let v: f64 = value
                    .parse()
                    .ok()
                    .filter(|v: &f64| v.is_finite())
                    .ok_or_else(|| invalid(key, value, "not a number".to_string()))?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(invalid(key, value, "must be between 0 and 1".to_string()));
                }
                self.min_cleanable_dirty_ratio = v;
            }
            "segment.bytes" => {
                // Kafka's INT: a segment's positions are 32-bit in its `.index`.
                let v = at_least(key, parse_int(key, value)?, MIN_SEGMENT_BYTES as i64)?;
                self.segment_bytes = u64::from(fit_i32(key, v)?);
            }
            "segment.ms" => self.segment_ms = at_least(key, parse_int(key, value)?, 1)?,
            "segment.jitter.ms" => {
                self.segment_jitter_ms = at_least(key, parse_int(key, value)?, 0)?
            }
            "segment.index.bytes" => {
                let v = at_least(key, parse_int(key, value)?, MIN_SEGMENT_INDEX_BYTES as i64)?;
                self.segment_index_bytes = fit_i32(key, v)?;
            }
            "index.interval.bytes" => {
                let v = at_least(key, parse_int(key, value)?, 0)?;
                self.index_interval_bytes = fit_i32(key, v)?;
            }
            "max.message.bytes" => {
                let v = at_least(key, parse_int(key, value)?, 0)?;
                self.max_message_bytes = fit_i32(key, v)?;
            }
            "retention.ms" => self.retention_ms = unlimited_or(key, parse_int(key, value)?)?,
            "retention.bytes" => {
                self.retention_bytes = unlimited_or(key, parse_int(key, value)?)?.map(|v| v as u64)
            }
            "message.timestamp.type" => {
                self.message_timestamp_type = match value {
                    "CreateTime" => MessageTimestampType::CreateTime,
                    "LogAppendTime" => MessageTimestampType::LogAppendTime,
                    _ => {
                        return Err(invalid(
                            key,
                            value,
                            "must be CreateTime or LogAppendTime".to_string(),
                        ));
                    }
                }
            }
            "compression.type" => {
                self.compression_type = match value {
                    "producer" => CompressionType::Producer,
                    "uncompressed" => CompressionType::Codec(Compression::None),
                    "gzip" => CompressionType::Codec(Compression::Gzip),
                    "snappy" => CompressionType::Codec(Compression::Snappy),
                    "lz4" => CompressionType::Codec(Compression::Lz4),
                    "zstd" => CompressionType::Codec(Compression::Zstd),
                    _ => {
                        return Err(invalid(
                            key,
                            value,
                            "must be one of producer, uncompressed, gzip, snappy, lz4, zstd"
                                .to_string(),
                        ));
                    }
                }
            }
            _ => {
                let Some(name) = NO_EFFECT.iter().copied().find(|n| *n == key) else {
                    return Err(Error::InvalidInput(format!(
                        "unknown topic setting {key:?} (known: {})",
                        NAMES.join(", ")
                    )));
                };
                let rendered = validate_stored(name, value)?;
                if rendered == stored_default(name) {
                    self.stored.remove(name);
                } else {
                    self.stored.insert(name, rendered);
                }
            }
        }
        Ok(())
    }

    /// The value of setting `name` as Kafka's DescribeConfigs renders it (`-1` for no limit,
    /// `compact,delete`, `0.5`, `false`); `None` for a name not in [`NAMES`].
    pub fn get(&self, name: &str) -> Option<String> {
        let unlimited = |v: Option<i64>| v.map_or("-1".to_string(), |v| v.to_string());
        Some(match name {
            "cleanup.policy" => self.cleanup_policy.as_str().to_string(),
            "delete.retention.ms" => self.delete_retention_ms.to_string(),
            "min.compaction.lag.ms" => self.min_compaction_lag_ms.to_string(),
            "max.compaction.lag.ms" => self.max_compaction_lag_ms.to_string(),
            "min.cleanable.dirty.ratio" => format!("{:?}", self.min_cleanable_dirty_ratio),
            "segment.bytes" => self.segment_bytes.to_string(),
            "segment.ms" => self.segment_ms.to_string(),
            "segment.jitter.ms" => self.segment_jitter_ms.to_string(),
            "segment.index.bytes" => self.segment_index_bytes.to_string(),
            "index.interval.bytes" => self.index_interval_bytes.to_string(),
            "max.message.bytes" => self.max_message_bytes.to_string(),
            "retention.ms" => unlimited(self.retention_ms),
            "retention.bytes" => unlimited(self.retention_bytes.map(|v| v as i64)),
            "message.timestamp.type" => match self.message_timestamp_type {
                MessageTimestampType::CreateTime => "CreateTime".to_string(),
                MessageTimestampType::LogAppendTime => "LogAppendTime".to_string(),
            },
            "compression.type" => self.compression_type.as_str().to_string(),
            _ => {
                let name = NO_EFFECT.iter().copied().find(|n| *n == name)?;
                self.stored.get(name).cloned().unwrap_or_else(|| stored_default(name).to_string())
            }
        })
    }

    /// Every setting with its value, sorted by name ([`NAMES`], [`LogConfig::get`]).
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        NAMES.iter().filter_map(|n| Some((*n, self.get(n)?))).collect()
    }

    /// The rules between settings Kafka checks when a topic's settings change
    /// (`LogConfig.validateValues`): `min.compaction.lag.ms` at most `max.compaction.lag.ms`.
    pub fn validate(&self) -> Result<()> {
        match self.conflict() {
            Some(conflict) => Err(Error::InvalidInput(conflict.rule)),
            None => Ok(()),
        }
    }

    /// The first rule between settings ([`LogConfig::validate`]) this configuration breaks,
    /// with the settings it involves, so a caller can say where each value came from.
    pub fn conflict(&self) -> Option<Conflict> {
        (self.min_compaction_lag_ms > self.max_compaction_lag_ms).then(|| Conflict {
            names: ["min.compaction.lag.ms", "max.compaction.lag.ms"],
            rule: format!(
                "min.compaction.lag.ms ({}) must not be above max.compaction.lag.ms ({})",
                self.min_compaction_lag_ms, self.max_compaction_lag_ms
            ),
        })
    }

    /// Largest entry count of a preallocated offset index (`segment.index.bytes / 8`).
    pub fn offset_index_max_entries(&self) -> usize {
        self.segment_index_bytes as usize / topicfs_format::index_entry::OFFSET_INDEX_ENTRY_SIZE
    }

    /// Largest entry count of a preallocated time index (`segment.index.bytes / 12`).
    pub fn time_index_max_entries(&self) -> usize {
        self.segment_index_bytes as usize / topicfs_format::index_entry::TIME_INDEX_ENTRY_SIZE
    }
}

/// A rule between settings that a [`LogConfig`] breaks ([`LogConfig::conflict`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The settings the rule involves.
    pub names: [&'static str; 2],
    /// The rule, with the values: `min.compaction.lag.ms (10) must not be above ...`.
    pub rule: String,
}

/// Validates a [`NO_EFFECT`] setting as Kafka does; returns its rendering.
fn validate_stored(key: &str, value: &str) -> Result<String> {
    let int = |min: i64, max: i64| -> Result<String> {
        let v = parse_int(key, value)?;
        if v < min || v > max {
            let rule = if max == i64::MAX {
                format!("must be at least {min}")
            } else {
                format!("must be between {min} and {max}")
            };
            return Err(invalid(key, value, rule));
        }
        Ok(v.to_string())
    };
    match key {
        "compression.gzip.level" => {
            let v = parse_int(key, value)?;
            if v != -1 && !(1..=9).contains(&v) {
                return Err(invalid(key, value, "must be -1 or between 1 and 9".to_string()));
            }
            Ok(v.to_string())
        }
        "compression.lz4.level" => int(1, 17),
        "compression.zstd.level" => int(-131_072, 22),
        "file.delete.delay.ms"
        | "flush.ms"
        | "message.timestamp.after.max.ms"
        | "message.timestamp.before.max.ms" => int(0, i64::MAX),
        "flush.messages" | "min.insync.replicas" => int(1, i64::MAX),
        "local.retention.bytes" | "local.retention.ms" => int(-2, i64::MAX),
        "follower.replication.throttled.replicas" | "leader.replication.throttled.replicas" => {
            throttled_replicas(key, value)
        }
        _ => {
            let v = match value.to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => return Err(invalid(key, value, "must be true or false".to_string())),
            };
            if key == "remote.storage.enable" && v {
                return Err(invalid(
                    key,
                    value,
                    "tiered storage is not available here (no remote log storage system)"
                        .to_string(),
                ));
            }
            Ok(v.to_string())
        }
    }
}

/// Kafka's `ThrottledReplicaListValidator`: empty, `*`, or `partition:broker` pairs separated
/// by commas. Rendered without spaces.
fn throttled_replicas(key: &str, value: &str) -> Result<String> {
    if value.is_empty() || value == "*" {
        return Ok(value.to_string());
    }
    let mut items = Vec::new();
    for item in value.split(',') {
        let item = item.trim();
        let ok = item.split_once(':').is_some_and(|(p, b)| {
            p.trim().parse::<u32>().is_ok() && b.trim().parse::<i32>().is_ok_and(|b| b >= 0)
        });
        if !ok {
            return Err(invalid(
                key,
                value,
                "must be *, empty, or partition:broker pairs separated by commas".to_string(),
            ));
        }
        items.push(item.split(':').map(str::trim).collect::<Vec<_>>().join(":"));
    }
    Ok(items.join(","))
}

/// What a broker holds for a data dir's topics, in TOPIC-level names (`retention.ms`, not
/// `log.retention.ms`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BrokerSettings {
    /// Per topic the broker knows (a KRaft TopicRecord): its overrides. A topic present here has
    /// known settings even with an empty map.
    pub topics: BTreeMap<String, BTreeMap<String, String>>,
    /// Cluster-wide and this broker's dynamic defaults (KRaft ConfigRecord, resource BROKER).
    pub dynamic_defaults: BTreeMap<String, String>,
    /// Static defaults (`--server-properties FILE`).
    pub static_defaults: BTreeMap<String, String>,
}

fn invalid(key: &str, value: &str, why: String) -> Error {
    Error::InvalidInput(format!("invalid value {} for {key}: {why}", shown_value(value)))
}

/// Longest part of a value an error message quotes.
const SHOWN_VALUE_BYTES: usize = 80;

/// `value` quoted for an error message: whole up to [`SHOWN_VALUE_BYTES`], else its start and
/// its length (a refused value may be kilobytes long, and is logged).
pub fn shown_value(value: &str) -> String {
    if value.len() <= SHOWN_VALUE_BYTES {
        return format!("{value:?}");
    }
    let mut end = SHOWN_VALUE_BYTES;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", &value[..end], value.len())
}

/// The settings only retention and the log cleaner act on: a topic whose settings are unknown
/// has them shown but not applied (see [`crate::topic_config`]).
pub const RETENTION_ONLY: &[&str] = &[
    "cleanup.policy",
    "delete.retention.ms",
    "max.compaction.lag.ms",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "retention.bytes",
    "retention.ms",
];

mod value_prefix;
pub use value_prefix::check_value_prefix;

fn parse_int(key: &str, value: &str) -> Result<i64> {
    value.parse::<i64>().map_err(|_| invalid(key, value, "not an integer".to_string()))
}

fn at_least(key: &str, v: i64, min: i64) -> Result<i64> {
    if v < min {
        return Err(invalid(key, &v.to_string(), format!("must be at least {min}")));
    }
    Ok(v)
}

fn fit_i32(key: &str, v: i64) -> Result<u32> {
    if v > i64::from(i32::MAX) {
        return Err(invalid(key, &v.to_string(), format!("must be at most {}", i32::MAX)));
    }
    Ok(v as u32)
}

/// `-1` means "no limit"; other negative values are refused.
fn unlimited_or(key: &str, v: i64) -> Result<Option<i64>> {
    match v {
        -1 => Ok(None),
        v if v >= 0 => Ok(Some(v)),
        v => Err(invalid(key, &v.to_string(), "must be -1 (no limit) or >= 0".to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kafkas() {
        let c = LogConfig::default();
        assert_eq!(c.segment_bytes, 1_073_741_824);
        assert_eq!(c.segment_ms, 604_800_000);
        assert_eq!(c.segment_index_bytes, 10_485_760);
        assert_eq!(c.index_interval_bytes, 4096);
        assert_eq!(c.max_message_bytes, 1_048_588);
        assert_eq!(c.retention_ms, Some(604_800_000));
        assert_eq!(c.retention_bytes, None);
        assert_eq!(c.offset_index_max_entries(), 1_310_720);
        assert_eq!(c.time_index_max_entries(), 873_813);
    }

    #[test]
    fn set_parses_kafka_names_and_refuses_bad_values() {
        let mut c = LogConfig::default();
        c.set("segment.bytes", "1048576").unwrap();
        c.set("retention.ms", "-1").unwrap();
        c.set("retention.bytes", "5000").unwrap();
        c.set("message.timestamp.type", "LogAppendTime").unwrap();
        c.set("compression.type", "zstd").unwrap();
        assert_eq!(c.segment_bytes, 1_048_576);
        assert_eq!(c.retention_ms, None);
        assert_eq!(c.retention_bytes, Some(5000));
        assert_eq!(c.message_timestamp_type, MessageTimestampType::LogAppendTime);
        assert_eq!(c.compression_type.codec(), Compression::Zstd);
        assert!(c.set("segment.bytes", "13").unwrap_err().to_string().contains("at least 14"));
        // Kafka's INT: a segment's positions are 32-bit (a probe saw i64::MAX taken).
        c.set("segment.bytes", "2147483647").unwrap();
        for big in ["2147483648", "5000000000", "9223372036854775807"] {
            let e = c.set("segment.bytes", big).unwrap_err().to_string();
            assert!(e.contains("at most 2147483647"), "{big}: {e}");
        }
        assert!(check_value_prefix("segment.bytes", "21474836470").is_err());
        assert!(c.set("retention.ms", "-2").is_err());
        assert!(c.set("compression.type", "brotli").is_err());
        assert!(c.set("segment.ms", "soon").is_err());
        assert!(c.set("no.such.key", "1").unwrap_err().to_string().contains("unknown"));
    }

    #[test]
    fn every_topic_setting_has_kafkas_default_and_a_rendering() {
        let c = LogConfig::default();
        let shown: BTreeMap<&str, String> = c.settings().into_iter().collect();
        assert_eq!(shown.len(), NAMES.len());
        for (name, value) in [
            ("cleanup.policy", "delete"),
            ("delete.retention.ms", "86400000"),
            ("min.compaction.lag.ms", "0"),
            ("max.compaction.lag.ms", "9223372036854775807"),
            ("min.cleanable.dirty.ratio", "0.5"),
            ("retention.ms", "604800000"),
            ("retention.bytes", "-1"),
            ("min.insync.replicas", "1"),
            ("unclean.leader.election.enable", "false"),
            ("file.delete.delay.ms", "60000"),
            ("message.timestamp.after.max.ms", "3600000"),
            ("local.retention.ms", "-2"),
            ("leader.replication.throttled.replicas", ""),
            ("compression.type", "producer"),
        ] {
            assert_eq!(shown[name], value, "{name}");
        }
        let mut sorted = NAMES.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, NAMES);
        assert!(NO_EFFECT.iter().all(|n| NAMES.contains(n)));
    }

    #[test]
    fn cleanup_policy_takes_kafkas_list_forms() {
        let mut c = LogConfig::default();
        c.set("cleanup.policy", "compact").unwrap();
        assert_eq!(c.cleanup_policy, CleanupPolicy::COMPACT);
        c.set("cleanup.policy", "delete, compact").unwrap();
        assert_eq!(c.cleanup_policy, CleanupPolicy { delete: true, compact: true });
        assert_eq!(c.get("cleanup.policy").unwrap(), "compact,delete");
        for bad in ["", "none", "compact,", "compact;delete"] {
            let e = c.set("cleanup.policy", bad).unwrap_err().to_string();
            assert!(e.contains("cleanup.policy") && e.contains("delete, compact"), "{e}");
        }
        assert_eq!(c.cleanup_policy, CleanupPolicy { delete: true, compact: true });
    }

    #[test]
    fn settings_are_validated_with_kafkas_ranges() {
        let mut c = LogConfig::default();
        for (name, bad, rule) in [
            ("min.cleanable.dirty.ratio", "1.5", "between 0 and 1"),
            ("min.cleanable.dirty.ratio", "NaN", "not a number"),
            ("max.compaction.lag.ms", "0", "at least 1"),
            ("delete.retention.ms", "-1", "at least 0"),
            ("min.insync.replicas", "0", "at least 1"),
            ("unclean.leader.election.enable", "yes", "true or false"),
            ("compression.lz4.level", "18", "between 1 and 17"),
            ("compression.gzip.level", "0", "-1 or between 1 and 9"),
            ("local.retention.ms", "-3", "at least -2"),
            ("leader.replication.throttled.replicas", "0:x", "partition:broker"),
            ("remote.storage.enable", "true", "tiered storage"),
        ] {
            let e = c.set(name, bad).unwrap_err().to_string();
            assert!(e.contains(name) && e.contains(rule), "{name}={bad}: {e}");
        }
        assert_eq!(c, LogConfig::default(), "a refused value changes nothing");
        c.set("min.insync.replicas", "2").unwrap();
        c.set("unclean.leader.election.enable", "TRUE").unwrap();
        c.set("leader.replication.throttled.replicas", "0:1, 1:2").unwrap();
        c.set("min.cleanable.dirty.ratio", "0.1").unwrap();
        assert_eq!(c.get("min.insync.replicas").unwrap(), "2");
        assert_eq!(c.get("unclean.leader.election.enable").unwrap(), "true");
        assert_eq!(c.get("leader.replication.throttled.replicas").unwrap(), "0:1,1:2");
        assert_eq!(c.min_cleanable_dirty_ratio, 0.1);
        c.set("min.insync.replicas", "1").unwrap();
        assert!(!c.stored.contains_key("min.insync.replicas"), "the default is not stored");
        c.set("min.compaction.lag.ms", "10").unwrap();
        c.set("max.compaction.lag.ms", "5").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("min.compaction.lag.ms"));
    }

    /// Every start of a value `set` takes passes [`check_value_prefix`]: it never refuses what
    /// could still become valid. Candidates: each setting's default and values around its
    /// bounds, in several spellings.
    #[test]
    fn no_start_of_a_valid_value_is_refused() {
        let mut candidates: Vec<String> = [
            "-1",
            "0",
            "1",
            "9",
            "10",
            "14",
            "17",
            "22",
            "-2",
            "-131072",
            "2147483647",
            "9223372036854775807",
            "+5",
            "-0",
            "007",
            " 12 ",
            "0.5",
            "1",
            "1.0",
            ".5",
            "5e-1",
            "0E0",
            "delete",
            "compact",
            "compact,delete",
            "delete , compact",
            "true",
            "FALSE",
            "False",
            "CreateTime",
            "LogAppendTime",
            "producer",
            "zstd",
            "uncompressed",
            "*",
            "",
            "0:1",
            "0:1, 1:2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let defaults = LogConfig::default();
        candidates.extend(NAMES.iter().filter_map(|n| defaults.get(n)));
        let mut checked = 0;
        for name in NAMES {
            for value in &candidates {
                if LogConfig::default().set(name, value).is_err() {
                    continue;
                }
                for end in (0..=value.len()).filter(|e| value.is_char_boundary(*e)) {
                    let start = &value[..end];
                    assert!(
                        check_value_prefix(name, start).is_ok(),
                        "{name}: {start:?}, the start of the valid {value:?}, was refused"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 500, "{checked}");
        // Whitespace after a valid value ends it and passes too.
        assert!(check_value_prefix("retention.ms", "5 ").is_ok());
        assert!(check_value_prefix("cleanup.policy", "delete ").is_ok());
    }

    #[test]
    fn a_start_no_continuation_can_make_valid_is_refused_naming_the_rule() {
        for (name, start, rule) in [
            ("retention.ms", "abc", "-1 (no limit) or >= 0"),
            ("retention.ms", "1x", "-1 (no limit) or >= 0"),
            ("retention.ms", "-2", "-1 (no limit) or >= 0"),
            ("retention.ms", "-10", "-1 (no limit) or >= 0"),
            ("retention.ms", "--", "-1 (no limit) or >= 0"),
            ("retention.ms", "99999999999999999999", "-1 (no limit) or >= 0"),
            ("retention.ms", "5 5", "-1 (no limit) or >= 0"),
            ("segment.ms", "-", "at least 1"),
            ("segment.ms", "0 ", "at least 1"),
            ("segment.bytes", "13 ", "between 14 and 2147483647"),
            ("max.message.bytes", "3000000000", "between 0 and 2147483647"),
            ("compression.gzip.level", "0 ", "-1 or between 1 and 9"),
            ("compression.gzip.level", "-2", "-1 or between 1 and 9"),
            ("message.timestamp.type", "Log-", "CreateTime or LogAppendTime"),
            ("message.timestamp.type", "createtime", "CreateTime or LogAppendTime"),
            ("compression.type", "brot", "producer"),
            ("cleanup.policy", "compact;", "delete, compact or compact,delete"),
            ("cleanup.policy", "compact,,", "delete, compact or compact,delete"),
            ("cleanup.policy", "del ete", "delete, compact or compact,delete"),
            ("min.cleanable.dirty.ratio", "0.5x", "between 0 and 1"),
            ("min.cleanable.dirty.ratio", "2 ", "between 0 and 1"),
            ("unclean.leader.election.enable", "yes", "true or false"),
            ("remote.storage.enable", "t", "must be false"),
            ("leader.replication.throttled.replicas", "*1", "partition:broker"),
            ("leader.replication.throttled.replicas", "0:x", "partition:broker"),
        ] {
            let e = check_value_prefix(name, start).unwrap_err();
            assert_eq!(e.errno(), libc::EINVAL);
            let e = e.to_string();
            assert!(e.contains(name) && e.contains(rule), "{name}={start:?}: {e}");
        }
        let e = check_value_prefix("no.such.setting", "1").unwrap_err().to_string();
        assert!(e.contains("unknown topic setting"), "{e}");
        // Starts that can still become valid.
        for (name, start) in [
            ("retention.ms", "-"),
            ("retention.ms", "-1"),
            ("segment.ms", "0"),
            ("segment.bytes", "1"),
            ("delete.retention.ms", "-"),
            ("compression.gzip.level", "-"),
            ("message.timestamp.type", "Log"),
            ("min.cleanable.dirty.ratio", "2"),
        ] {
            assert!(check_value_prefix(name, start).is_ok(), "{name}={start:?}");
        }
    }

    #[test]
    fn a_long_refused_value_is_quoted_by_its_start_and_length() {
        let long = "x".repeat(5000);
        let e = LogConfig::default().set("retention.ms", &long).unwrap_err().to_string();
        assert!(e.contains("(5000 bytes)") && e.len() < 300, "{e}");
        let e = check_value_prefix("retention.ms", &long).unwrap_err().to_string();
        assert!(e.contains("(5000 bytes)") && e.len() < 300, "{e}");
    }

    #[test]
    fn rendered_values_parse_back_to_the_same_config() {
        let mut c = LogConfig::default();
        for (name, value) in [
            ("cleanup.policy", "compact,delete"),
            ("min.cleanable.dirty.ratio", "1"),
            ("retention.ms", "-1"),
            ("retention.bytes", "123"),
            ("compression.type", "lz4"),
            ("message.timestamp.type", "LogAppendTime"),
            ("flush.messages", "5"),
            ("follower.replication.throttled.replicas", "*"),
        ] {
            c.set(name, value).unwrap();
        }
        let mut back = LogConfig::default();
        for (name, value) in c.settings() {
            back.set(name, &value).unwrap();
        }
        assert_eq!(back, c);
    }
}
