//! The shared [`MergeIndex`] of a merged stream's rounds and checkpoints (see the module docs
//! of [`crate::topic`]); its members are [`super::member`]'s.

use std::sync::{Arc, Mutex};

use super::member::{Member, MemberRendering, MergeCheckpoint};
use super::walk::MergeWalk;
use super::{MAX_MERGE_CHECKPOINTS, MERGE_CHECKPOINT_INTERVAL};
use crate::checkpoints::SparseCheckpoints;
use crate::spec::StreamSpec;
use crate::txn::TxnTrackers;
use topicfs_format::{Offset, Timestamp};
use topicfs_source::TopicSource;
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;

/// One round: the end offsets (exclusive) each member is merged up to.
#[derive(Clone, Debug)]
pub(super) struct Round {
    /// One per member that had joined when the round started.
    pub(super) targets: Arc<Vec<Offset>>,
}

/// The mutable part of a merge index.
pub(super) struct MergeState {
    pub(super) members: Vec<Member>,
    pub(super) rounds: Vec<Round>,
    /// Sparse, ascending by position; the first is the start of the stream.
    pub(super) checkpoints: SparseCheckpoints<MergeCheckpoint>,
    /// Where the last round ended.
    pub(super) frontier: MergeCheckpoint,
    pub(super) interval: u64,
    /// Every member's end is final and reached: nothing will ever be added.
    pub(super) complete: bool,
    /// Per member, the source's [`Known::rewrites`](topicfs_source::Known::rewrites) when it
    /// was last checked that no cleaner pass replaced what the stream renders of it.
    pub(super) rewrites: Vec<u64>,
    /// A cleaner pass replaced a segment the stream renders: every read is stale.
    pub(super) stale: bool,
}

impl MergeState {
    fn push(&mut self, c: MergeCheckpoint) {
        if self.checkpoints.last().is_some_and(|last| last.position >= c.position) {
            return;
        }
        if self.checkpoints.push(c, |_| false) {
            self.interval = self.interval.saturating_mul(2);
        }
    }

    /// The last checkpoint (frontier included) at or before rendered position `p`.
    pub(super) fn floor(&self, p: u64) -> Option<MergeCheckpoint> {
        if self.frontier.position <= p {
            return Some(self.frontier.clone());
        }
        self.checkpoints.floor(|c| c.position <= p).cloned()
    }
}

/// The shared index of one resolved topic-level stream (see the module docs).
pub struct MergeIndex {
    pub(super) source: Arc<dyn TopicSource>,
    /// The mount's isolation and trackers, for partitions joining later.
    txns: Arc<TxnTrackers>,
    /// The mount's schemas and the stream's filter, for partitions joining later.
    rendering: MemberRendering,
    pub(super) topic: Arc<str>,
    pub(super) spec: StreamSpec,
    /// The anchor of relative times, for partitions joining later.
    now: Timestamp,
    pub(super) state: Mutex<MergeState>,
}

impl MergeIndex {
    pub(super) fn new(
        source: Arc<dyn TopicSource>,
        txns: Arc<TxnTrackers>,
        rendering: MemberRendering,
        topic: &str,
        spec: StreamSpec,
        now: Timestamp,
        members: Vec<Member>,
    ) -> MergeIndex {
        let cursors = Arc::new(members.iter().map(|m| m.start).collect());
        let origin = MergeCheckpoint { position: 0, round: 0, cursors };
        let rewrites = members.iter().map(|m| m.rewrites).collect();
        let state = MergeState {
            members,
            rounds: Vec::new(),
            checkpoints: SparseCheckpoints::new(origin.clone(), MAX_MERGE_CHECKPOINTS),
            frontier: origin,
            interval: MERGE_CHECKPOINT_INTERVAL,
            complete: false,
            rewrites,
            stale: false,
        };
        let topic = Arc::from(topic);
        MergeIndex { source, txns, rendering, topic, spec, now, state: Mutex::new(state) }
    }

    /// Whether a cleaner pass ended in one of the partitions since the index last checked
    /// that none replaced what it renders (or one did): a new open makes a new index.
    pub(super) fn made_before_a_pass(&self) -> bool {
        let st = lock(&self.state);
        st.stale || st.members.iter().zip(&st.rewrites).any(|(m, r)| m.part.known().rewrites != *r)
    }

    /// Notices cleaner passes (see "Compaction" in the module docs): `StaleHandle` once one
    /// replaced a segment holding a member's start or anything after it. A pass rewrites a
    /// prefix of the sealed segments, so a member whose start cursor is still held lost
    /// nothing the stream renders.
    pub(super) fn check_passes(&self, st: &mut MergeState) -> Result<()> {
        if st.stale {
            return Err(Error::StaleHandle);
        }
        for i in 0..st.members.len() {
            let Some(m) = st.members.get(i) else { break };
            let now = m.part.known().rewrites;
            if st.rewrites.get(i) == Some(&now) {
                continue;
            }
            if !m.part.holds(&m.start.from)? {
                log::debug!(
                    "{}-{}: a cleaner pass replaced records a topic-level stream rendered: the \
                     stream is stale",
                    m.part.topic(),
                    m.part.partition()
                );
                st.stale = true;
                return Err(Error::StaleHandle);
            }
            if let Some(r) = st.rewrites.get_mut(i) {
                *r = now;
            }
        }
        Ok(())
    }

    /// Starts a round if any partition has records the stream does not hold yet; returns the
    /// stream's length (rendered bytes of every round).
    pub(super) fn extend(&self) -> Result<u64> {
        let mut st = lock(&self.state);
        self.check_passes(&mut st)?;
        if st.complete {
            return Ok(st.frontier.position);
        }
        self.join_new_partitions(&mut st)?;
        if st.members.len() > 1 {
            // Every member's end below at once where the source can (a cluster: one
            // ListOffsets per broker); without it each asks for itself.
            let _ = self.source.state_bounds(&self.topic);
        }
        let mut targets = Vec::with_capacity(st.members.len());
        let mut all_final = true;
        for m in &st.members {
            let (end, is_final) = m.end_now()?;
            all_final &= is_final;
            targets.push(end);
        }
        let previous = st.rounds.last().map(|r| Arc::clone(&r.targets));
        // Ends never move back: a log that shrank below them is a rebuilt log.
        if let Some(prev) = &previous {
            if targets.iter().zip(prev.iter()).any(|(now, before)| now < before) {
                return Err(Error::StaleHandle);
            }
        }
        let grew = match &previous {
            None => true,
            Some(prev) => prev.len() != targets.len() || prev.iter().ne(targets.iter()),
        };
        if grew {
            let targets = Arc::new(targets);
            let round_index = st.rounds.len();
            let mut walk = MergeWalk::new(
                Arc::clone(&self.source),
                Arc::clone(&self.topic),
                &st.members,
                &st.frontier,
                Arc::clone(&targets),
            )?;
            let mut since = 0u64;
            while let Some(n) = walk.step(None)? {
                since = since.saturating_add(n);
                if since >= st.interval {
                    since = 0;
                    st.push(walk.checkpoint(round_index));
                }
            }
            // A pass ending during the round may have had it count records it removed.
            self.check_passes(&mut st)?;
            st.rounds.push(Round { targets });
            st.frontier = walk.checkpoint(round_index.saturating_add(1));
        }
        st.complete = all_final;
        Ok(st.frontier.position)
    }

    /// Adds partitions created since the stream was opened (while it can still grow).
    fn join_new_partitions(&self, st: &mut MergeState) -> Result<()> {
        let partitions = self.source.partitions(&self.topic)?;
        if partitions.len() <= st.members.len() {
            return Ok(());
        }
        for p in partitions {
            if st.members.iter().any(|m| m.part.partition() == p) {
                continue;
            }
            let part = self.source.partition(&self.topic, p)?;
            st.rewrites.push(part.known().rewrites);
            st.members.push(Member::resolve(
                part,
                &self.txns,
                &self.rendering,
                &self.spec,
                self.now,
                None,
            )?);
        }
        Ok(())
    }
}
