//! The checkpoint list of an index state: a fresh origin, adding (and thinning) checkpoints,
//! and the last checkpoint at or before an offset or a rendered position.

use std::collections::HashSet;

use super::{CHECKPOINT_INTERVAL, IndexState, MAX_CHECKPOINTS, MAX_COMPLETED};
use crate::checkpoints::SparseCheckpoints;
use crate::walker::Checkpoint;
use topicfs_format::Offset;
use topicfs_source::PartitionSource;
use topicfs_source::error::Result;

impl IndexState {
    /// A fresh index at `start` (the log start offset when `None`), rendered position 0.
    pub(crate) fn origin_at(
        part: &dyn PartitionSource,
        generation: u64,
        start: Option<Offset>,
    ) -> Result<IndexState> {
        let rewrites = part.known().rewrites;
        let summary = part.summary()?;
        let log_start = summary.log_start_offset;
        let at = start.unwrap_or(log_start).max(log_start);
        let cursor = part.seek(at)?;
        let origin = Checkpoint { cursor, bound: at, position: 0, segment_start: false };
        Ok(IndexState {
            generation,
            checkpoints: SparseCheckpoints::new(origin, MAX_CHECKPOINTS),
            frontier: origin,
            interval: CHECKPOINT_INTERVAL,
            since_checkpoint: 0,
            log_start,
            rewrites,
            summarized: HashSet::new(),
            completed: Vec::new(),
            prefix_tried: None,
            prefix_stored: None,
            located: std::collections::VecDeque::new(),
        })
    }

    pub(crate) fn is_new_checkpoint(&self, c: &Checkpoint) -> bool {
        self.checkpoints.last().is_none_or(|last| last.cursor != c.cursor)
    }

    /// Adds a checkpoint (not twice at one cursor), thinning when over [`MAX_CHECKPOINTS`].
    pub fn push(&mut self, c: Checkpoint) {
        self.since_checkpoint = 0;
        if !self.is_new_checkpoint(&c) {
            return;
        }
        if c.segment_start && self.completed.len() < MAX_COMPLETED {
            // The span from the previous segment start (or the origin) to here was rendered
            // whole: a candidate for the segment cache.
            let list = self.checkpoints.as_slice();
            let from = list.iter().rposition(|p| p.segment_start).unwrap_or(0);
            if let Some(p) = list.get(from).copied() {
                if p.position <= c.position {
                    let interior = list.get(from + 1..).unwrap_or_default().to_vec();
                    self.completed.push((p, c, interior));
                }
            }
        }
        if self.checkpoints.push(c, |c| c.segment_start) {
            self.interval = self.interval.saturating_mul(2);
        }
    }

    /// The last checkpoint (frontier included) whose bound is `<= x`.
    pub(crate) fn floor_by_bound(&self, x: Offset) -> Option<Checkpoint> {
        if self.frontier.bound <= x {
            return Some(self.frontier);
        }
        self.checkpoints.floor(|c| c.bound <= x).copied()
    }

    /// The last checkpoint (frontier included) whose rendered position is `<= p`.
    pub(crate) fn floor_by_position(&self, p: u64) -> Option<Checkpoint> {
        if self.frontier.position <= p {
            return Some(self.frontier);
        }
        self.checkpoints.floor(|c| c.position <= p).copied()
    }
}
