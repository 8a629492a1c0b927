//! The segment cache side of a render index: jumping the frontier over spans whose rendering
//! the cache holds, and storing the renderings of whole spans and of the active prefix.

use super::{IndexState, RENDER_SUMMARY, RenderIndex, SUMMARY_SPACING};
use crate::summary::{self, FormatSummary, SpanCheckpoint};
use crate::txn::TxnSnapshot;
use crate::walker::Checkpoint;
use topicfs_source::{PartitionSource, ReadCursor, SealedSpan};

impl RenderIndex {
    /// With `read_committed`, what a span's rendering depends on besides its bytes: `None` when
    /// it cannot be known yet (the span reaches the stable offset), else (committed, digest of
    /// the aborted ranges over the span). `(false, 0)` with `read_uncommitted`.
    fn txn_key(&self, snap: Option<&TxnSnapshot>, span: &SealedSpan) -> Option<(bool, u64)> {
        match (&self.txn, snap) {
            (None, _) => Some((false, 0)),
            (Some(_), Some(s)) if s.stable >= span.end.next_offset => {
                Some((true, s.aborted_digest(span.base, span.end.next_offset)))
            }
            (Some(_), _) => None,
        }
    }

    /// Moves the frontier over every sealed span right after it whose rendering in this
    /// format the segment cache holds (adding its checkpoints). Whether it moved.
    pub(super) fn jump_cached(
        &self,
        st: &mut IndexState,
        part: &dyn PartitionSource,
        snap: Option<&TxnSnapshot>,
    ) -> bool {
        if !self.renderer.persistable() {
            return false;
        }
        let Some(store) = part.span_store() else { return false };
        let mut moved = false;
        while let Some(span) = store.sealed_span_at(&st.frontier.cursor) {
            // A frontier past the span's base (an origin inside it) renders only part of it.
            if st.frontier.bound > span.base {
                break;
            }
            let Some(found) = self.cached_summary(part, snap, &span) else { break };
            self.apply_summary(st, &span, &found);
            st.summarized.insert(span.base);
            moved = true;
        }
        if st.prefix_tried != Some(st.frontier.cursor) {
            st.prefix_tried = Some(st.frontier.cursor);
            if let Some((span, payload)) = store.prefix_span_at(&st.frontier.cursor, RENDER_SUMMARY)
            {
                if self.jump_prefix(st, snap, &span, &payload) {
                    st.prefix_tried = Some(st.frontier.cursor);
                    moved = true;
                }
            }
        }
        moved
    }

    /// The segment cache's rendering of the sealed span `span` in this format, if it holds one
    /// made with the transaction state `snap` gives.
    pub(super) fn cached_summary(
        &self,
        part: &dyn PartitionSource,
        snap: Option<&TxnSnapshot>,
        span: &SealedSpan,
    ) -> Option<FormatSummary> {
        if !self.renderer.persistable() {
            return None;
        }
        let (committed, digest) = self.txn_key(snap, span)?;
        let summaries =
            part.span_store()?.load(span, RENDER_SUMMARY).and_then(|b| summary::decode(&b))?;
        let format = self.renderer.rendering();
        summaries.into_iter().find(|s| {
            s.format == format
                && s.committed == committed
                && s.digest == digest
                && s.end_bound == span.end.next_offset
        })
    }

    /// Moves the frontier over the stable prefix `span` of the active segment (right after
    /// it) when `payload` (the cache's summaries of it) holds its rendering in this format.
    /// Whether it moved. Unlike a sealed span, the segment is not marked summarized: when it is
    /// sealed later its whole rendering is stored as usual.
    fn jump_prefix(
        &self,
        st: &mut IndexState,
        snap: Option<&TxnSnapshot>,
        span: &SealedSpan,
        payload: &[u8],
    ) -> bool {
        if st.frontier.bound > span.base || !self.renderer.persistable() {
            return false;
        }
        let Some((committed, digest)) = self.txn_key(snap, span) else { return false };
        let format = self.renderer.rendering();
        let found = summary::decode(payload).and_then(|all| {
            all.into_iter().find(|s| {
                s.format == format
                    && s.committed == committed
                    && s.digest == digest
                    && s.end_bound == span.end.next_offset
            })
        });
        let Some(found) = found else { return false };
        self.apply_summary(st, span, &found);
        st.prefix_stored = Some(st.frontier.position);
        true
    }

    /// Adds the checkpoints of `found` (the rendering of `span` in this format, which starts
    /// right at the frontier) and moves the frontier to the span's end.
    fn apply_summary(&self, st: &mut IndexState, span: &SealedSpan, found: &FormatSummary) {
        let (bound, position) = (st.frontier.bound, st.frontier.position);
        let start = Checkpoint {
            cursor: ReadCursor { next_offset: bound, hint: span.start.hint },
            bound,
            position,
            segment_start: true,
        };
        st.push(start);
        for c in &found.checkpoints {
            let bound = c.bound.max(bound);
            st.push(Checkpoint {
                cursor: ReadCursor { next_offset: bound, hint: c.hint },
                bound,
                position: position.saturating_add(c.position),
                segment_start: false,
            });
        }
        let end = span.end.next_offset.max(bound);
        st.frontier = Checkpoint {
            cursor: ReadCursor { next_offset: end, hint: span.end.hint },
            bound: end,
            position: position.saturating_add(found.rendered),
            segment_start: false,
        };
        st.since_checkpoint = 0;
    }

    /// Stores in the segment cache the rendering of the active segment's prefix, from its
    /// start (the index's last segment start, or its origin at the log start) to the frontier, when the frontier moved at
    /// least `every` rendered bytes since it was last stored (or taken from the cache) and
    /// past that start. The source decides whether that start is the active segment's and the
    /// frontier inside it ([`topicfs_source::SpanStore::update_prefix`]); nothing else is stored.
    pub(crate) fn store_prefix(&self, st: &mut IndexState, part: &dyn PartitionSource, every: u64) {
        if !self.renderer.persistable() {
            return;
        }
        let Some(store) = part.span_store() else { return };
        let f = st.frontier;
        if st.prefix_stored.is_some_and(|at| f.position < at.saturating_add(every.max(1))) {
            return;
        }
        // The last segment start, or the origin when it is the log start (whose cursor is the
        // first segment's start).
        let list = st.checkpoints.as_slice();
        let from = match list.iter().rposition(|c| c.segment_start) {
            Some(i) => i,
            None if !self.own_origin => 0,
            None => return,
        };
        let Some(p) = list.get(from).copied() else { return };
        if p.cursor == f.cursor || p.bound > f.bound || f.bound != f.cursor.next_offset {
            return;
        }
        let snap = self.txn.as_ref().map(|t| t.snapshot());
        let span = SealedSpan { base: p.bound, start: p.cursor, end: f.cursor, bytes: 0 };
        let Some((committed, digest)) = self.txn_key(snap.as_ref(), &span) else { return };
        let mut last = p.position;
        let checkpoints = list
            .get(from + 1..)
            .unwrap_or_default()
            .iter()
            .filter(|k| k.bound <= f.bound && k.position >= p.position)
            .filter(|k| {
                let keep = k.position >= last.saturating_add(SUMMARY_SPACING);
                if keep {
                    last = k.position;
                }
                keep
            })
            .map(|k| SpanCheckpoint {
                hint: k.cursor.hint,
                bound: k.bound,
                position: k.position - p.position,
            })
            .collect();
        let new = FormatSummary {
            format: self.renderer.rendering(),
            committed,
            digest,
            rendered: f.position - p.position,
            end_bound: f.bound,
            checkpoints,
        };
        store.update_prefix(
            &p.cursor,
            &f.cursor,
            RENDER_SUMMARY,
            Box::new(move |old| {
                let old = old.and_then(|b| summary::decode(&b)).unwrap_or_default();
                Some(summary::encode(&summary::merged(old, new)))
            }),
        );
        st.prefix_stored = Some(f.position);
    }

    /// Stores in the segment cache what rendering whole sealed spans taught (see
    /// [`IndexState::push`]), at most one checkpoint per [`SUMMARY_SPACING`] bytes of log.
    pub(super) fn store_completed(
        &self,
        st: &mut IndexState,
        part: &dyn PartitionSource,
        snap: Option<&TxnSnapshot>,
    ) {
        let completed = std::mem::take(&mut st.completed);
        if !self.renderer.persistable() {
            return;
        }
        let Some(store) = part.span_store() else { return };
        for (p, c, interior) in completed {
            let Some(span) = store.sealed_span_at(&p.cursor) else { continue };
            // `c` must be the start of the very next segment (whose bound is this one's end):
            // a segment start missing in between would make this the rendering of two.
            if span.start.hint != p.cursor.hint
                || p.bound > span.base
                || c.bound != span.end.next_offset
                || st.summarized.contains(&span.base)
            {
                continue;
            }
            let Some((committed, digest)) = self.txn_key(snap, &span) else { continue };
            let wanted = usize::try_from(span.bytes / SUMMARY_SPACING).unwrap_or(usize::MAX);
            let step = interior.len().div_ceil(wanted.max(1)).max(1);
            let checkpoints = interior
                .iter()
                .skip(step - 1)
                .step_by(step)
                .filter(|k| k.bound <= span.end.next_offset && k.position >= p.position)
                .map(|k| SpanCheckpoint {
                    hint: k.cursor.hint,
                    bound: k.bound,
                    position: k.position - p.position,
                })
                .collect();
            let new = FormatSummary {
                format: self.renderer.rendering(),
                committed,
                digest,
                rendered: c.position - p.position,
                end_bound: span.end.next_offset,
                checkpoints,
            };
            // Merged with what other formats stored, on the cache's writer (so two formats
            // finishing one segment at once do not overwrite each other).
            store.update(
                &span,
                RENDER_SUMMARY,
                Box::new(move |old| {
                    let old = old.and_then(|b| summary::decode(&b)).unwrap_or_default();
                    Some(summary::encode(&summary::merged(old, new)))
                }),
            );
            st.summarized.insert(span.base);
        }
    }
}
