//! The log engine: a Kafka log directory, read and written byte-compatibly with a broker.
//!
//! - [`log_dir::LogDir`]: the data dir (`meta.properties`, `.lock`, checkpoints, clean-shutdown
//!   marker, one directory per partition); implements [`crate::source::TopicSource`].
//! - [`log::Log`]: one partition (Kafka's `UnifiedLog`/`LocalLog`): segments by base offset,
//!   log start/end offsets, append with roll, reads, ListOffsets, retention; implements
//!   [`crate::source::PartitionSource`].
//! - [`segment::LogSegment`]: a `.log` with its [`offset_index::OffsetIndex`] and
//!   [`time_index::TimeIndex`]; recovery.
//! - [`config::LogConfig`]: Kafka's topic-level settings and defaults.
//! - `mmap`: the only `unsafe` code in the crate (index maps).
//!
//! Nothing here knows about FUSE, inodes or views.

pub mod config;
mod index;
pub mod log;
pub mod log_dir;
mod mmap;
pub mod offset_index;
pub mod scan;
pub mod segment;
mod source_impl;
pub mod time_index;

pub use config::{CompressionType, LogConfig, MessageTimestampType};
pub use log::Log;
pub use log_dir::LogDir;
pub use segment::{LogSegment, SegmentMode};
