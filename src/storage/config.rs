//! Per-log configuration with Kafka's topic-level names and defaults (`LogConfig`).
//!
//! Only the settings that change what the engine writes or keeps are modelled. Names are the
//! topic-level ones (`segment.bytes`, not the broker's `log.segment.bytes`), values are parsed
//! with the same validation Kafka applies (minimums, `-1` meaning "no limit" where Kafka allows
//! it), and every refusal says which key and why.

use crate::error::{Error, Result};
use crate::format::Compression;

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
}

/// The settings of one log (partition), Kafka names and defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
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
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
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
        }
    }
}

/// The keys [`LogConfig::set`] understands.
pub const KNOWN_KEYS: &[&str] = &[
    "segment.bytes",
    "segment.ms",
    "segment.jitter.ms",
    "segment.index.bytes",
    "index.interval.bytes",
    "max.message.bytes",
    "retention.ms",
    "retention.bytes",
    "message.timestamp.type",
    "compression.type",
    "file.delete.delay.ms",
];

impl LogConfig {
    /// Sets one setting by its Kafka topic-level name, validating the value as Kafka does.
    ///
    /// `file.delete.delay.ms` is accepted and ignored: this engine deletes segment files at once
    /// (no reader of ours can still hold an old segment open by name).
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let value = value.trim();
        match key {
            "segment.bytes" => {
                let v = parse_int(key, value)?;
                self.segment_bytes = at_least(key, v, MIN_SEGMENT_BYTES as i64)? as u64;
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
            "file.delete.delay.ms" => {
                at_least(key, parse_int(key, value)?, 0)?;
            }
            _ => {
                return Err(Error::InvalidInput(format!(
                    "unknown log config {key:?} (known: {})",
                    KNOWN_KEYS.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Largest entry count of a preallocated offset index (`segment.index.bytes / 8`).
    pub fn offset_index_max_entries(&self) -> usize {
        self.segment_index_bytes as usize / crate::format::index_entry::OFFSET_INDEX_ENTRY_SIZE
    }

    /// Largest entry count of a preallocated time index (`segment.index.bytes / 12`).
    pub fn time_index_max_entries(&self) -> usize {
        self.segment_index_bytes as usize / crate::format::index_entry::TIME_INDEX_ENTRY_SIZE
    }
}

fn invalid(key: &str, value: &str, why: String) -> Error {
    Error::InvalidInput(format!("invalid value {value:?} for {key}: {why}"))
}

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
        assert!(c.set("retention.ms", "-2").is_err());
        assert!(c.set("compression.type", "brotli").is_err());
        assert!(c.set("segment.ms", "soon").is_err());
        assert!(c.set("no.such.key", "1").unwrap_err().to_string().contains("unknown"));
    }
}
