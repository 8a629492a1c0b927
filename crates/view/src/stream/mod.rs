//! Streams: `by-offset/` and `by-time/` files that behave like growing regular files.
//!
//! # Model
//!
//! A partition rendered in one format is a single, append-only byte sequence: the *rendering*
//! of every record (value lines, JSON) or every batch (raw) from the log start offset on, in log
//! order, control batches contributing nothing to the record formats. A *rendered position* is
//! a byte position in that sequence, counted from the *origin* of its render index (the log
//! start offset when the index was built). A stream for `[start, end)` is the slice of the
//! rendering between the rendered position of `start` and that of `end` (or the current end of
//! the rendering for an open stream), so
//!
//! * `size()` is exactly the number of bytes a full read returns at that moment (what `stat`
//!   shows, [`Stream::known_size`], is that or "not yet known" when reaching the end would
//!   render more than the source's sizing budget), and
//! * a read at file offset `X` is the rendering at rendered position `start_position + X`.
//!
//! For the record formats the rendered position of offset `x` is the number of rendered bytes of
//! all records with offsets below `x`. For raw streams the units are whole batches: a stream
//! starts at the batch holding `start` (the first batch whose last offset is `>= start`) and ends
//! after the last batch holding an offset below `end` (before the first batch whose base offset
//! is `>= end`); a raw stream may therefore hold records outside `[start, end)`, as a Kafka Fetch
//! response does. An empty range is empty in every format.
//!
//! # The render index and retention
//!
//! Every stream of one (topic, partition, format) shares one sparse render index
//! ([`RenderIndex`], in [`crate::render_index`], with its invariant and how retention is
//! handled): finding a rendered position, or reading a window, renders forward from the nearest
//! checkpoint at or before it. Rendered positions of a stream never change; bytes of records
//! retention deleted read as [`Error::StaleHandle`] (`ESTALE`).
//!
//! # Transactions
//!
//! Control batches (transaction markers) are never rendered in the record formats and are kept, as
//! stored, in raw streams. Which transactional records are shown is the registry's [`Isolation`]:
//! with `read_committed` (the default) streams resolve against the last stable offset, end there,
//! and skip aborted batches in the record formats (see [`crate::txn`]); every `Walker`
//! (`view/walker.rs`) takes one [`TxnSnapshot`](crate::txn::TxnSnapshot) and stops at its
//! stable offset, so all it renders is final. With `read_uncommitted` every non-control record is
//! shown.
//!
//! # Files
//!
//! This file holds the [`Stream`] type and what opening one takes; `registry.rs` which render
//! index serves a stream ([`StreamRegistry`], and the entry points of background sizing);
//! `size.rs` what a stream's size is and how `stat` asks for it; `read.rs` reading windows of a
//! stream (with the rest of the batch a read stopped inside, and read-ahead).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::budget::{MemoryBudget, Reservation};
pub use crate::render_index::{CHECKPOINT_INTERVAL, Checkpoint, MAX_CHECKPOINTS, RenderIndex};
use crate::render_index::{Learned, Target};
use crate::spec::{Bound, Format, StreamSpec};
use crate::txn::{CommittedPartition, Isolation, TxnTracker, TxnTrackers};
use crate::walker::READ_CHUNK;
use topicfs_format::{Offset, Timestamp, decode_batch, parse_batch_info};
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_source::{OffsetQuery, PartitionSource, SealedSpan};

mod read;
mod registry;
mod size;

pub use registry::{MAX_ORIGINS, StreamRegistry};
pub use size::{SIZED_AT_ONCE, StatSize};

use read::Tail;

/// The end of an open stream, as far as it is known.
#[derive(Debug)]
struct EndState {
    bound: Bound,
    /// The rendered position of the end, once it can never change.
    final_position: Option<u64>,
    /// [`Stream::completed_timestamp`], once looked up (it can never change either).
    completed_timestamp: Option<Option<Timestamp>>,
}

/// A `by-offset/` or `by-time/` file: records `[start, end)` of one partition in one format,
/// with an exact, growing size. Cheap to open; `Send + Sync`.
pub struct Stream {
    index: Arc<RenderIndex>,
    part: Arc<dyn PartitionSource>,
    start: Offset,
    generation: u64,
    /// Rendered position of the stream's first byte.
    start_position: u64,
    end: Mutex<EndState>,
    /// The stream's end was the log end when it was opened (no fixed end offset).
    open_ended: bool,
    /// The stream has shown an exact size (or been read to its end): from then on
    /// [`Stream::known_size`] is always exact, whatever it costs, so a size once shown never
    /// turns back into "not yet known" (`tail -f` would take that for a truncation). Atomic:
    /// `stat` reads it without waiting for a sizing or read in progress.
    shown_exact: AtomicBool,
    /// Where the last read stopped: a checkpoint at a batch boundary at or before it.
    last_read: Mutex<Option<Checkpoint>>,
    /// The rest of the batch each of the last reads stopped inside (record formats), at most
    /// [`read::MAX_TAILS`], oldest first.
    tails: Mutex<VecDeque<Tail>>,
    /// The ends (`to`) of the windows being rendered now (see [`Stream::read_window`]).
    rendering: Mutex<Vec<u64>>,
    /// Notified whenever a window's rendering ends.
    rendered: Condvar,
    /// The walker's batch size hint as the last read left it (see `Walker::batch_hint`).
    batch_hint: AtomicUsize,
    /// The budget a kept [`Tail`] comes out of (see [`StreamRegistry::with_budget`]).
    budget: Option<Arc<MemoryBudget>>,
    /// The source's [`Known::rewrites`](topicfs_source::Known::rewrites) when the stream was
    /// opened (see [`Stream::made_before_a_pass`]).
    rewrites: u64,
}

impl Stream {
    /// Opens `[start, end)` of `part` on `index` (which must be `part`'s index, made by a
    /// registry; `part` is the partition itself, not a [`StreamRegistry::view`] of it).
    pub fn open(
        index: Arc<RenderIndex>,
        part: Arc<dyn PartitionSource>,
        start: Offset,
        end: Bound,
    ) -> Result<Stream> {
        let part: Arc<dyn PartitionSource> = match &index.txn {
            Some(tracker) => Arc::new(CommittedPartition::new(part, Arc::clone(tracker))),
            None => part,
        };
        let rewrites = part.known().rewrites;
        let (generation, start_position) = {
            let mut st = index.lock_state();
            index.sync(&mut st, part.as_ref())?;
            let target = match index.renderer.format() {
                Format::Raw => Target::BatchHolding(start),
                Format::Values | Format::Json => Target::Record(start),
            };
            let p = index.locate(&mut st, part.as_ref(), target)?;
            (st.generation(), p)
        };
        let open_ended = matches!(end, Bound::Open | Bound::UntilTimestamp(_));
        let end =
            Mutex::new(EndState { bound: end, final_position: None, completed_timestamp: None });
        Ok(Stream {
            index,
            part,
            start,
            generation,
            start_position,
            end,
            last_read: Mutex::new(None),
            open_ended,
            shown_exact: AtomicBool::new(false),
            tails: Mutex::new(VecDeque::new()),
            rendering: Mutex::new(Vec::new()),
            rendered: Condvar::new(),
            batch_hint: AtomicUsize::new(0),
            budget: None,
            rewrites,
        })
    }

    /// Whether a cleaner pass replaced segments of the partition since the stream was opened:
    /// the name may mean other bytes now (a new open shows the pass's log).
    pub fn made_before_a_pass(&self) -> bool {
        self.part.known().rewrites != self.rewrites
    }

    /// The first offset of the stream.
    pub fn start(&self) -> Offset {
        self.start
    }

    /// The current end bound (an [`Bound::UntilTimestamp`] becomes [`Bound::Fixed`] once a
    /// record reaches its time).
    pub fn end(&self) -> Bound {
        lock(&self.end).bound
    }

    /// Whether the stream is a bounded range whose records all exist: its size and bytes never
    /// change again (as observed by the last [`Stream::size`]).
    pub fn is_complete(&self) -> bool {
        lock(&self.end).final_position.is_some()
    }

    /// Fixes an [`Bound::UntilTimestamp`] end once some record reaches its time.
    fn refresh_bound(&self, end: &mut EndState) -> Result<()> {
        if let Bound::UntilTimestamp(t) = end.bound {
            let log_end = self.part.summary()?.log_end_offset;
            let o = self.part.offset_for(OffsetQuery::Timestamp(t))?;
            if o < log_end {
                end.bound = Bound::Fixed(o.max(self.start));
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("topic", &self.part.topic())
            .field("partition", &self.part.partition())
            .field("format", &self.index.renderer.format())
            .field("start", &self.start)
            .field("end", &lock(&self.end).bound)
            .field("start_position", &self.start_position)
            .finish()
    }
}
