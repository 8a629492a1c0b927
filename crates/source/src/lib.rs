//! The narrow interface between the filesystem and whatever holds the partitions.
//!
//! The filesystem never opens a segment file itself: it asks a [`TopicSource`] for topics and
//! partitions, and a [`PartitionSource`] for offsets, whole batches as stored, and appends. Two
//! backends implement them, neither named here: the log engine (`storage`) over a Kafka log
//! directory, and the cluster client (`cluster`) over Fetch, ListOffsets and Produce; `view`
//! and `fs` know only this module. It owns every type its traits name and imports nothing
//! from a backend.
//!
//! Batches cross this interface as stored bytes (a v2 batch, or a legacy v0/v1 message set
//! entry), so the same rendering code serves local files and a network fetch response.
//!
//! Everything here is in offsets and batches. A [`ReadCursor`] is an offset bound plus an
//! opaque [`CursorHint`] only its source reads; a [`BatchChunk`] says where its runs of
//! batches start and what damage the read stepped over. What exists only for local files
//! (segment listings, raw segment bytes, passthrough, repaired indexes) is the separate
//! [`SegmentFiles`] interface, reached by one capability accessor,
//! [`PartitionSource::segment_files`]; `view` and `fs` decide by that capability, never by
//! which backend is mounted. The backend itself is chosen once, at mount time
//! (`mount::open_backend`).

pub mod error;
pub mod sync;

mod cursor;
mod files;
mod groups;
mod keys;
mod operation;
mod partition;
mod span;
mod topic;

pub use crate::cursor::{
    BatchChunk, BatchHead, BatchHeads, ChunkStart, CursorHint, OffsetQuery, PartitionSummary,
    ReadCursor, SkippedDamage,
};
pub use crate::error::{Error, Result};
pub use crate::files::{FileProblem, SegmentFileKind, SegmentFiles, SegmentSummary};
pub use crate::groups::{CommittedOffset, GroupStore};
pub use crate::keys::{KeyHit, KeyHits, KeyIndex, KeyListing, KeyRecords};
pub use crate::operation::Operation;
pub use crate::partition::{
    AbortedTxn, AppendInfo, BoundaryTxnState, Committed, DEFAULT_SIZING_BUDGET, Known,
    PartitionSource, ReadAnswer, ReadMode, Records, TxnBoundary,
};
pub use crate::span::{PREFIX_STORE_EVERY, SealedSpan, SpanKind, SpanStore, SummaryUpdate};
pub use crate::topic::{
    ConfigChange, ConfigEntry, ConfigSource, FetchMemory, LogDirStatus, LogDirsReport,
    MAX_MESSAGE_BYTES, SpaceStats, TopicSource, max_message_bytes_of,
};
