//! A live Kafka cluster over the Kafka wire protocol: the client the cluster backend uses.
//!
//! Beside the log engine (`storage`), the second implementation of the partition interface
//! ([`topicfs_source`]). It may use [`topicfs_format`] (batch encoding and decoding, CRCs,
//! codecs) and [`topicfs_source`], never the log engine, the view, filesystem or FUSE layers.
//!
//! - [`config`]: client settings by Kafka's names, `.properties` files, bootstrap specs;
//! - [`conn`]: one blocking connection per broker, requests pipelined by correlation id,
//!   TLS (rustls), SASL, deadlines;
//! - [`client`]: metadata cache, leader routing, retries, and the APIs (Metadata, ListOffsets,
//!   Fetch, Produce, CreateTopics, CreatePartitions, FindCoordinator, OffsetCommit, OffsetFetch,
//!   ListGroups, DescribeGroups);
//! - [`committed`]: the `read_committed` filter of one Fetch response (aborted transactions,
//!   control batches, the last stable offset), as the Java consumer applies it;
//! - [`source`]: the cluster backend of the `source` seam (TopicSource, PartitionSource);
//! - [`sasl`]: PLAIN and SCRAM-SHA-256/512 messages;
//! - [`errors`]: Kafka error codes, names and which are retried.
//!
//! Why a hand-written transport over the `kafka-protocol` codecs rather than librdkafka:
//! doc/ARCHITECTURE.md, "The cluster client".

pub mod client;
pub mod committed;
pub mod config;
pub mod conn;
pub mod errors;
pub mod sasl;
pub mod source;

pub use client::{Client, FetchOptions, FetchedPartition, ListedOffset, Produced};
pub use config::{BrokerAddr, ClientConfig};
pub use source::{ClusterGroups, ClusterSource};
