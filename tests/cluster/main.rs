//! The Kafka protocol client (`cluster`) against a real broker (tansu, started and stopped by a
//! guard from `tests/common`): reads, appends, metadata, security, and confluent-kafka
//! (librdkafka) as the independent client.

#[path = "../common/mod.rs"]
mod common;

mod cluster_client;
mod cluster_configs;
mod cluster_confluent;
mod cluster_fake;
mod cluster_fs;
mod cluster_groups;
mod cluster_leader;
mod cluster_mount;
mod cluster_read_ahead;
mod cluster_refusals;
mod cluster_scale;
mod cluster_security;
