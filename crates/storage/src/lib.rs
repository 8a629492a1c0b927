//! The log engine: a Kafka log directory, read and written byte-compatibly with a broker.
//!
//! - [`log_dirs::LogDirs`]: a broker's log dirs (`log.dirs`; one data dir is a set of one) as
//!   one set of topics, the one local [`topicfs_source::TopicSource`] (what a mount of data dirs
//!   runs): partitions placed across the dirs, the topics' settings (one owner for all dirs),
//!   the mount's sizing budget, segment cache and executor, and each dir's health (an offline
//!   dir's partitions answer `EIO` through [`log_dirs::health::DirPartition`], the only way a
//!   partition is handed out).
//! - [`log_dir::LogDir`]: one member data dir (`meta.properties`, `.lock`, checkpoints,
//!   clean-shutdown marker, one directory per partition) and its partition registry; opened
//!   only by [`log_dirs::LogDirs`].
//! - [`log::Log`]: one partition (Kafka's `UnifiedLog`/`LocalLog`): segments by base offset,
//!   log start/end offsets, append with roll, reads, ListOffsets, retention; implements
//!   [`topicfs_source::PartitionSource`].
//! - [`segment::LogSegment`]: a `.log` with its [`offset_index::OffsetIndex`] and
//!   [`time_index::TimeIndex`]; recovery.
//! - [`topicfs_source::SegmentFiles`]: the local-only half of the partition interface (segment
//!   listings, raw segment file bytes, passthrough, repaired indexes), which [`log::Log`]
//!   implements and [`topicfs_source::PartitionSource::segment_files`] reaches.
//! - [`offset_index`], [`time_index`]: the `.index` and `.timeindex` files, over the shared
//!   `index` file (mapped when writable, copied into memory when read-only).
//! - [`scan`]: positioned reads of `.log` files (`pread`, never mapped) and the forward
//!   batch-header scan.
//! - [`cache`]: the segment cache, outside the data dir: what was learned about sealed
//!   segments, kept across remounts and validated before use (the
//!   [`topicfs_source::SpanStore`]).
//! - [`key_index`]: records by key, one index per sealed segment, built on the mount's executor
//!   and bounded in memory (the [`topicfs_source::KeyIndex`]).
//! - [`groups`]: consumer groups' committed offsets over `__consumer_offsets` (the
//!   [`topicfs_source::GroupStore`]).
//! - [`cluster_metadata`]: reads a KRaft broker's `__cluster_metadata-0` (snapshot, then the
//!   log), re-read cheaply as it grows, into the settings image of `topicfs_settings` (which
//!   owns every setting's names, rules and precedence; its [`LogConfig`] and friends are
//!   re-exported here because this crate's API takes them).
//! - `source_impl`: [`topicfs_source::PartitionSource`] and [`topicfs_source::SegmentFiles`]
//!   for [`log::Log`].
//! - [`groups`]: consumer groups' committed offsets in `__consumer_offsets`
//!   ([`topicfs_source::GroupStore`]).
//! - [`key_index`]: the per-segment key indexes behind `by-key/` and `latest/`.
//! - `log::cleaning`: the rewrite hooks the log cleaner (crate `topicfs-cleaner`, Kafka's
//!   `LogCleaner`) uses to swap its output in.
//! - `swap`: the log cleaner's `.cleaned`/`.swap`/`.deleted` files as Kafka's loader would
//!   leave them, decided in memory for read-only opens.
//! - `mmap`: the only `unsafe` code in the crate (index maps).
//! - [`open`]: the one way files and directories of a data dir are opened (non-blocking, regular
//!   files only).
//!
//! Nothing here knows about FUSE, inodes or views.
//!
//! # Where this engine differs from a broker
//!
//! The files it writes are what a broker writes; a few behaviours differ on purpose:
//! - A timestamp search (ListOffsets) that finds nothing in the first candidate segment goes on
//!   to later segments, and a timestamp later than every record answers the log end offset
//!   instead of "not found" (`-1`).
//! - Recovery stops at a batch whose offsets do not increase and keeps the valid prefix (Kafka
//!   empties the segment when an index append trips on it); a segment whose offsets overflow a
//!   relative offset is truncated there instead of split.
//! - An index file is opened with the dump tool's zero-tail rule (entries up to the first
//!   all-zero slot), not `length / entry size`, so a preallocated index left by a crash is
//!   usable before recovery rebuilds it; truncation zeroes the removed slots.
//! - The active segment is recovered at open, even after a clean shutdown, when it does not end
//!   with a whole batch.
//! - Deleted segments are renamed `.deleted` and removed at once (`file.delete.delay.ms` is
//!   ignored: no reader of ours holds files by name).
//! - Producer-state snapshots (`<base>.snapshot`) are written at each roll only when the
//!   producer state is known without following producers through batches: this engine's
//!   appends carry no producer id, so the state is the one at the sealed segment's base offset
//!   unless that segment holds a producer's batch (then none is written). A broker writes one
//!   at every roll and at shutdown.
//! - The log cleaner removes the replaced segments' `.deleted` files at once, counts a producer
//!   as active for Kafka's default `producer.id.expiration.ms` (one day) whatever the broker's
//!   setting, and copies legacy v0/v1 messages unchanged (a broker rewrites them).
//! - Not kept: the leader-epoch cache, `.txnindex` writing for appends (it is read for aborted
//!   transactions; the cleaner writes its output's). Appended batches carry partition leader epoch 0 and no
//!   producer id.

pub mod cache;
pub mod cluster_metadata;
pub mod groups;
mod index;
pub mod key_index;
pub mod log;
pub mod log_dir;
pub mod log_dirs;
pub mod meta_properties;
mod mmap;
pub mod offset_index;
pub mod open;
pub mod scan;
pub mod segment;
mod source_impl;
mod swap;
pub mod time_index;

pub use log::LOCAL_SIZING_BUDGET;
pub use log::Log;
pub use log_dir::LogDir;
pub use log_dirs::LogDirs;
pub use segment::{LogSegment, SegmentMode};
pub use topicfs_settings::{
    BrokerSettings, CleanupPolicy, CompressionType, LogConfig, MessageTimestampType,
};
