//! topicfs: Kafka partition logs as a filesystem.
//!
//! Layers, each depending only on the ones above it:
//!
//! 1. [`format`]: Kafka's on-disk byte formats (record batches, records, codecs, index entries,
//!    file names, checkpoint files). Pure: no I/O.
//! 2. [`storage`]: the log engine (segments, offset and time indexes, append, roll, recovery,
//!    retention, the log directory with its checkpoints). Implements [`source`].
//! 3. [`source`]: the narrow interface the filesystem uses to talk to partitions. Today the
//!    log engine implements it; a live Kafka cluster can implement it later.
//! 4. [`view`]: path names and specs (`by-offset/-10.json`, `by-time/2026-12-02..`), rendering of
//!    records as value lines, kcat-style JSON or raw batches, and the sparse render index that
//!    gives streams exact sizes.
//! 5. [`fs`]: filesystem logic on plain structs (inodes, handles, lookup/read/write); no fuser
//!    types.
//! 6. [`fuse`] and [`mount`]: the thin fuser adapter and the mount/daemon lifecycle. Only these
//!    two files name fuser types.
//! 7. [`cli`]: the command line and the mount helper, turned into a mount request.
//!
//! Beside the layers: [`error`] (the one error type and its errno mapping), [`executor`] (the one
//! background executor: a pool of worker threads running work by priority), [`partitioner`]
//! (Kafka's default partitioner, pure) and `sync` (the poison-tolerant lock every layer uses).

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
