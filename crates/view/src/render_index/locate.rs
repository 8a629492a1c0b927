//! Finding rendered positions: walkers from a checkpoint, the position of a target offset, and
//! the frontier's position at the log end.

use std::sync::atomic::Ordering;

use super::{IndexState, RenderIndex, Target};
use crate::walker::{Checkpoint, Walker, first_offset};
use topicfs_format::Offset;
use topicfs_source::PREFIX_STORE_EVERY;
use topicfs_source::PartitionSource;
use topicfs_source::error::{Error, Result};

impl RenderIndex {
    /// A walker from `from` with the transaction state as last refreshed (by the
    /// [`CommittedPartition`] a stream reads through, whenever its summary is asked).
    pub(crate) fn walker<'a>(
        &'a self,
        part: &'a dyn PartitionSource,
        from: Checkpoint,
    ) -> Walker<'a> {
        let txn = self.txn.as_ref().map(|t| t.snapshot());
        Walker::new(part, &self.renderer, from, txn)
    }

    /// The rendered position of `target`; extends the index as far as needed first.
    pub(crate) fn locate(
        &self,
        st: &mut IndexState,
        part: &dyn PartitionSource,
        target: Target,
    ) -> Result<u64> {
        let x = target.offset();
        self.extend(st, part, Some(x))?;
        let from = st.floor_by_bound(x).ok_or(Error::StaleHandle)?;
        // The checkpoint is the place itself, without a read (opening `by-offset/0`, or a
        // stream at a checkpoint, fetches nothing): when its bound is x, the batch at it holds
        // x or only later offsets. That batch holds no record below x unless the checkpoint is
        // the index's origin, which may lie inside a batch (`new_at`, a log start inside a
        // batch): there only the batch holding x, or x = 0 (no offset is below it), is sure.
        let origin = st.checkpoints.first().is_some_and(|c| c.cursor == from.cursor);
        let sure = match target {
            Target::BatchHolding(_) => true,
            Target::Record(_) | Target::BatchFrom(_) => !origin || x == Offset(0),
        };
        if from.bound == x && sure {
            return Ok(from.position);
        }
        if let Some(&(_, _, at)) = st.located.iter().find(|(t, c, _)| *t == target && *c == from) {
            return Ok(at);
        }
        let mut w = self.walker(part, from);
        let found = loop {
            let Some(step) = w.peek()? else {
                // The end of what is readable (or stable) now: not kept, it may move.
                return Ok(w.here.position);
            };
            let rendered = match target {
                Target::Record(x) => {
                    let n = w.count_batch(&step, Some(x))?;
                    if step.info.last_offset >= x {
                        break w.here.position.saturating_add(n);
                    }
                    n
                }
                Target::BatchHolding(x) => {
                    if step.info.last_offset >= x {
                        break w.here.position;
                    }
                    u64::from(step.info.size)
                }
                Target::BatchFrom(x) => {
                    let first =
                        first_offset(w.entry(&step), &step.info).map_err(|e| w.corrupt(0, &e))?;
                    if first >= x {
                        break w.here.position;
                    }
                    u64::from(step.info.size)
                }
            };
            w.advance(&step, rendered);
        };
        if st.located.len() >= super::LOCATED {
            st.located.pop_front();
        }
        st.located.push_back((target, from, found));
        Ok(found)
    }

    /// Extends the index to the current log end and returns the frontier's rendered position.
    ///
    /// **Invariant**: the frontier never passes a log end offset the source has published. The
    /// engine makes a batch's bytes readable a moment before it publishes the log end offset
    /// that covers them; rendering such a batch would put the frontier past the log end another
    /// reader sees next, which [`RenderIndex::sync`] must read as a truncated log. So the index
    /// renders only up to the log end offset read before the batches are.
    ///
    /// With a `budget`, renders at most that many bytes of log and returns `None` when the end
    /// is farther (the size is not yet known); the next call continues from there.
    pub(crate) fn end_position(
        &self,
        st: &mut IndexState,
        part: &dyn PartitionSource,
        budget: Option<u64>,
    ) -> Result<Option<u64>> {
        let log_end = part.summary()?.log_end_offset;
        let reached = self.extend_within(st, part, Some(log_end), budget)?;
        if reached {
            self.store_prefix(st, part, PREFIX_STORE_EVERY);
        }
        if budget.is_some() || reached {
            self.sizing_cut.store(!reached, Ordering::Release);
        }
        Ok(reached.then_some(st.frontier.position))
    }
}
