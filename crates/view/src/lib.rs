//! Views: what the files under a partition directory contain.
//!
//! This layer turns partitions (a [`topicfs_source::PartitionSource`]) into named, sized,
//! readable byte streams, and what is written to `append` files into records. It opens no file
//! and knows no FUSE type: the `fs` layer maps names and reads onto it.
//!
//! * [`spec`]: the grammar of `by-offset/` and `by-time/` names (`-10.json`, `100..200.raw`,
//!   `2026-12-02T08:00:00Z..`, `-15m`) and their resolution to offsets (ListOffsets semantics).
//! * [`render`]: one record as a value line or a kcat `-J` JSON object (lossless: non-UTF-8 bytes
//!   become base64 with an `*_encoding` marker).
//! * [`envelope`]: `append` lines and `append.json` envelopes back into records.
//! * [`stream`]: streams with exact sizes and the registry that opens them; [`render_index`]:
//!   the shared sparse render index behind them; `walker`: the batch walk both render with.
//! * [`bykey`]: records by key (`by-key/`, `latest/`, `keys`) over a partition's key index.
//! * [`txn`]: transaction isolation (`read_committed`: the last stable offset, aborted batches).
//! * [`inspect`]: the inspection files of a partition with segment files (`check`, `.dump`),
//!   through [`topicfs_source::SegmentFiles`].
//! * [`readahead`]: the next windows of streams read sequentially, rendered by a mount-wide
//!   worker pool.
//! * [`budget`]: the mount's one memory budget for windows read ahead and kept renderings.
//! * [`listing`]: the names `ls` shows in `by-offset/` and `by-time/`.
//! * [`groups`]: consumer groups: the `offsets` text, commits parsed and checked, where `next`
//!   starts, over [`topicfs_source::GroupStore`].
//! * [`topic`]: topic-level views: `offsets/<time>` for every partition, the `by-time/` stream
//!   of all partitions merged by timestamp, and appends routed by Kafka's default partitioner.
//!
//! # Tenets
//!
//! 1. **A stream is a file.** `st_size` is exactly what `cat` would read at that moment, reads
//!    at any offset return the same bytes a full read has there, and the size only grows (until
//!    a bounded range is complete, then it never changes). `tail`, `tail -f`, `less`, `head -c`
//!    and `dd skip=` work without special cases.
//! 2. **Kafka decides what a name means.** Times resolve with ListOffsets semantics (the first
//!    offset whose timestamp is at or after the time, in log order), range ends resolve to
//!    offsets once, offsets below the log start do not exist. Nothing is compared record by
//!    record against a clock.
//! 3. **Work is proportional to what is read.** Every byte is rendered once to build the
//!    sparse render index; after that a read renders at most one checkpoint interval plus what
//!    it returns, and memory per index is bounded.
//! 4. **Bytes round-trip.** `.raw` is the stored batches; `.json` is lossless and is accepted
//!    verbatim by `append.json`.
//! 5. **Fail explicitly.** Unparsable names are `ENOENT`, damaged batches `EIO` naming the segment
//!    file and position, bytes deleted by retention `ESTALE`, bad appends `EINVAL` naming the line.

pub mod budget;
pub mod bykey;
pub mod checkpoints;
pub mod envelope;
pub mod field_index;
pub mod filter;
pub mod groups;
pub mod inspect;
pub mod listing;
pub mod readahead;
pub mod render;
pub mod render_index;
pub mod schemas;
pub mod spec;
pub mod stream;
mod summary;
pub mod topic;
pub mod txn;
mod walker;

pub use envelope::{
    parse_envelope, parse_envelope_with, split_envelope_lines, split_envelope_lines_with,
    split_value_lines,
};
pub use listing::{by_offset_names, by_time_names};
pub use render::{ByteCounter, Renderer, Sink};
pub use spec::{
    Bound, Format, OffsetPoint, Resolved, Selector, SpecError, StreamSpec, TimePoint, time_name,
};
pub use stream::{Checkpoint, RenderIndex, StatSize, Stream, StreamRegistry};
