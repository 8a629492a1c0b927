//! One partition of a merged stream ([`Member`]) and the cursors and checkpoints that say where
//! the merge is in each ([`MemberCursor`], [`MergeCheckpoint`]): the values the walk consumes
//! and the index keeps, so that the index drives the walk and both depend on these, not on
//! each other.

use std::sync::Arc;

use crate::filter::{Filter, FilterStats};
use crate::render::Renderer;
use crate::spec::{Bound, Resolved, StreamSpec};
use crate::txn::{CommittedPartition, TxnTracker, TxnTrackers};
use topicfs_format::{Offset, Timestamp};
use topicfs_source::error::Result;
use topicfs_source::{OffsetQuery, PartitionSource, ReadCursor};

/// How a merged stream's members render: the mount's schemas, and the filter of a filtered
/// merged stream (`where/<filter>/by-time/`).
#[derive(Clone, Default)]
pub(super) struct MemberRendering {
    /// What the mount's JSON streams show (schemas, payloads that are JSON).
    pub(super) shown: crate::render::JsonShown,
    pub(super) filter: Option<TopicFilter>,
}

impl MemberRendering {
    /// The renderer of `topic`-`partition` in `format`: a filtered one renders only the
    /// records the filter keeps, counting into the partition's own stats.
    fn renderer(&self, format: crate::spec::Format, topic: &str, partition: u32) -> Renderer {
        let renderer = Renderer::new(format, topic, partition).showing(&self.shown);
        match &self.filter {
            Some(f) => renderer.with_filter(
                Arc::clone(&f.text),
                Arc::clone(&f.filter),
                (f.stats)(topic, partition),
            ),
            None => renderer,
        }
    }
}

/// Where a partition's filter counts go: the same stats its own filtered streams count into.
pub type StatsOf = Arc<dyn Fn(&str, u32) -> Arc<FilterStats> + Send + Sync>;

/// The filter of a merged stream of `where/<filter>/by-time/`: every member renders only the
/// records it keeps. A rejected record still takes its place in the merge (with no bytes), so
/// the stream is exactly the unfiltered merge with the rejected records left out.
#[derive(Clone)]
pub struct TopicFilter {
    /// The filter as written (merge indexes of different filters are never shared).
    pub text: Arc<str>,
    /// The filter parsed.
    pub filter: Arc<Filter>,
    /// Each partition's stats (see [`crate::filter::FilterStats`]).
    pub stats: StatsOf,
}

/// One partition of a merged stream.
#[derive(Clone)]
pub(super) struct Member {
    /// The partition as stored: batches are read from it.
    pub(super) part: Arc<dyn PartitionSource>,
    /// The partition at the stream's isolation: in `read_committed` a [`CommittedPartition`]
    /// (its log end offset is the last stable offset), which times resolve against.
    pub(super) view: Arc<dyn PartitionSource>,
    /// The partition's transaction tracker (`read_committed`); `None` shows every record.
    pub(super) txn: Option<Arc<TxnTracker>>,
    pub(super) renderer: Renderer,
    /// The partition's stream as resolved when it joined.
    pub(super) resolved: Resolved,
    /// Where its records start.
    pub(super) start: MemberCursor,
    /// The source's [`Known::rewrites`](topicfs_source::Known::rewrites) before it was resolved.
    pub(super) rewrites: u64,
}

impl Member {
    /// The member `part` of a stream of `spec`. `known_start`: the partition's own answer
    /// for the spec's start time, asked with the others' (used only when the member resolves
    /// times against the partition itself, without a transaction tracker).
    pub(super) fn resolve(
        part: Arc<dyn PartitionSource>,
        txns: &TxnTrackers,
        rendering: &MemberRendering,
        spec: &StreamSpec,
        now: Timestamp,
        known_start: Option<Offset>,
    ) -> Result<Member> {
        let rewrites = part.known().rewrites;
        let txn = txns.tracker(part.as_ref());
        let known_start = known_start.filter(|_| txn.is_none());
        let view: Arc<dyn PartitionSource> = match &txn {
            Some(tracker) => {
                Arc::new(CommittedPartition::new(Arc::clone(&part), Arc::clone(tracker)))
            }
            None => Arc::clone(&part),
        };
        let resolved = spec.resolve_from(view.as_ref(), now, known_start)?;
        let start = MemberCursor { from: view.seek(resolved.start)?, next: resolved.start };
        let renderer = rendering.renderer(spec.format, part.topic(), part.partition());
        Ok(Member { part, view, txn, renderer, resolved, start, rewrites })
    }

    /// The end offset of this member's records as far as it exists now: the log end offset
    /// (the last stable offset in `read_committed`), capped by its end bound (an
    /// `UntilTimestamp` bound is fixed as soon as a record reaches the time). Also returns
    /// whether that end is final.
    pub(super) fn end_now(&self) -> Result<(Offset, bool)> {
        let log_end = self.view.summary()?.log_end_offset;
        let start = self.resolved.start;
        match self.resolved.end {
            Bound::Open => Ok((log_end.max(start), false)),
            Bound::Fixed(e) => Ok((e.min(log_end).max(start), log_end >= e)),
            Bound::UntilTimestamp(t) => {
                let o = self.view.offset_for(OffsetQuery::Timestamp(t))?;
                if o < log_end { Ok((o.max(start), true)) } else { Ok((log_end.max(start), false)) }
            }
        }
    }
}

/// Where one partition's merge continues.
///
/// **Invariant**: `from` is a batch boundary at or before the batch holding `next`, and every
/// record of that partition's stream below `next` was merged before this cursor.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MemberCursor {
    /// A batch boundary to read from.
    pub from: ReadCursor,
    /// The offset of the next record to merge (records below it are skipped).
    pub next: Offset,
}

/// A place in a merged stream: see the invariant in the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeCheckpoint {
    /// Rendered bytes before this point.
    pub position: u64,
    /// The round this point lies in (the index into the rounds).
    pub round: usize,
    /// One cursor per partition that had joined by then, in member order.
    pub cursors: Arc<Vec<MemberCursor>>,
}
