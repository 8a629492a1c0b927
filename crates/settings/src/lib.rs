//! Kafka's settings, as topicfs applies them: pure parsing, validation, precedence and file
//! text, with no I/O and no engine. The storage engine applies them to partitions, the CLI parses
//! `--config` and `--server-properties` with them, and the cluster backend reads a broker's
//! `DescribeConfigs` answers through the same names.
//!
//! - [`config`]: [`LogConfig`], Kafka's topic-level settings (names, defaults, each setting's
//!   rules and the rules between them, the text `config` files show), and
//!   [`config::value_prefix`], how a value still being written is judged.
//! - [`topic_config`]: the layers a topic's settings come from (Kafka's defaults, the broker's,
//!   the mount's, the topic's own overrides) and the overrides file, including settings that
//!   are unknown (a broker's topic whose overrides live elsewhere).
//! - [`server_properties`]: a broker's `server.properties` and the mapping from broker names
//!   (`log.retention.hours`) to topic-level names (`retention.ms`).
//! - [`metadata_image`]: the replay of a KRaft broker's `__cluster_metadata` records into the
//!   topic overrides and dynamic broker defaults they hold (the storage engine reads the files).

pub mod config;
pub mod metadata_image;
pub mod server_properties;
pub mod topic_config;

pub use config::{BrokerSettings, CleanupPolicy, CompressionType, LogConfig, MessageTimestampType};
