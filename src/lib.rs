//! topicfs: Kafka partition logs as a filesystem.
//!
//! Layers, each a crate of the workspace depending only on crates named before it (the graph is
//! in doc/ARCHITECTURE.md, checked against Cargo's by `scripts/check-architecture`):
//!
//! 1. [`format`](mod@format): Kafka's byte formats (record batches, records, codecs, index
//!    entries, file names, checkpoint files, `__consumer_offsets` and KRaft metadata records,
//!    the key index layout, Kafka's default [`partitioner`]). Pure: no I/O. [`executor`]: the
//!    mount's one background executor, a pool of worker threads running work by priority.
//! 2. [`source`]: the narrow interface the filesystem uses to talk to partitions
//!    (`TopicSource`, `PartitionSource` and their capabilities), with the one [`error`] type
//!    and its errno mapping, and `sync` (the poison-tolerant lock every layer uses).
//!    [`schema`]: values in the Confluent wire format and the `SchemaSource` trait (pure).
//!    [`settings`]: Kafka's topic and broker settings (names, rules, precedence, the overrides
//!    file, `server.properties`, the KRaft metadata image), pure.
//! 3. The backends, which implement [`source`] and know nothing of each other: [`storage`], the
//!    log engine over one or several Kafka log directories (segments, indexes, append, roll,
//!    recovery, retention, the segment cache), with [`cleaner`], the log cleaner, a client of
//!    its rewrite hooks; and [`cluster`], a live Kafka cluster over the Kafka protocol.
//!    `topicfs_registry`: a Schema Registry REST client, a `SchemaSource` (not re-exported
//!    here).
//! 4. [`view`]: path names and specs (`by-offset/-10.json`, `by-time/2026-12-02..`), rendering of
//!    records as value lines, kcat-style JSON or raw batches, and the sparse render index that
//!    gives streams exact sizes; transactions, records by key, groups, schemas, topic-level views.
//! 5. [`fs`]: filesystem logic on plain structs (inodes, handles, lookup/read/write); no fuser
//!    types but in [`fuse`], the thin fuser adapter.
//! 6. [`mount`]: the mount and daemon lifecycle, where the backend of a mount is chosen (the
//!    only place naming both backends), and [`cli`]: the command line and the mount helper,
//!    turned into a mount request. Of these, only `mount/session.rs` names fuser types.

pub mod cli;
pub mod mount;

pub use topicfs_cleaner as cleaner;
pub use topicfs_cluster as cluster;
pub use topicfs_executor as executor;
pub use topicfs_format as format;
pub use topicfs_format::partitioner;
pub use topicfs_fs as fs;
pub use topicfs_fs::fuse;
pub use topicfs_schema as schema;
pub use topicfs_settings as settings;
pub use topicfs_source as source;
pub use topicfs_source::error;
use topicfs_source::sync;
pub use topicfs_source::{Error, Result};
pub use topicfs_storage as storage;
pub use topicfs_view as view;
