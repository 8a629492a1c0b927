//! [`TopicStream`]: one open `<topic>/by-time/<spec>`, reading the merge from its index.

use std::sync::{Arc, Mutex};

use super::index::{MergeIndex, Round};
use super::walk::MergeWalk;
use topicfs_format::Offset;
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;

/// `<topic>/by-time/<spec>`: the merged records of every partition, with an exact size that
/// only grows. Cheap to open; `Send + Sync`.
pub struct TopicStream {
    pub(super) index: Arc<MergeIndex>,
    /// Where this stream's last read stopped (a sequential reader resumes there).
    pub(super) resume: Mutex<Option<Resume>>,
}

impl std::fmt::Debug for TopicStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicStream")
            .field("topic", &self.index.topic)
            .field("spec", &self.index.spec)
            .finish()
    }
}

impl TopicStream {
    /// The topic.
    pub fn topic(&self) -> &str {
        &self.index.topic
    }

    /// Exactly the number of bytes a full read returns now (starts a round if records arrived).
    pub fn size(&self) -> Result<u64> {
        self.index.extend()
    }

    /// Whether the stream is a range whose every partition reached its end: size and bytes never
    /// change again.
    pub fn is_complete(&self) -> bool {
        lock(&self.index.state).complete
    }

    /// Per partition, the first offset of its records in this stream (in partition order).
    pub fn starts(&self) -> Vec<(u32, Offset)> {
        let st = lock(&self.index.state);
        st.members.iter().map(|m| (m.part.partition(), m.resolved.start)).collect()
    }

    /// Whether a cleaner pass ended in one of its partitions since it last checked that none
    /// replaced what it renders (a new open of its name makes a new stream).
    pub fn made_before_a_pass(&self) -> bool {
        self.index.made_before_a_pass()
    }

    /// Reads up to `len` bytes at `offset`: exactly the bytes a full read has there (fewer at
    /// the current end, none past it). `StaleHandle` once a cleaner pass replaced segments the
    /// stream renders (see "Compaction" in the module docs), also when one ended during the
    /// read: its bytes are never those of another log.
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.index.check_passes(&mut lock(&self.index.state))?;
        let out = self.read_merged(offset, len)?;
        self.index.check_passes(&mut lock(&self.index.state))?;
        Ok(out)
    }

    fn read_merged(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let to = offset.saturating_add(len as u64);
        let length = lock(&self.index.state).frontier.position;
        let length = if to > length { self.index.extend()? } else { length };
        let to = to.min(length);
        if offset >= to {
            return Ok(Vec::new());
        }
        let want = usize::try_from(to - offset).unwrap_or(usize::MAX);
        // A sequential read continues the previous read's merge where it stopped.
        let resumed = lock(&self.resume).take().filter(|r| r.at == offset);
        let (mut walk, mut round, mut out) = match resumed {
            Some(mut r) if r.carry.len() >= want => {
                let rest = r.carry.split_off(want);
                let out = std::mem::replace(&mut r.carry, rest);
                r.at = to;
                *lock(&self.resume) = Some(r);
                return Ok(out);
            }
            Some(r) => (r.walk, r.round, r.carry),
            None => {
                let (from, members, targets) = {
                    let st = lock(&self.index.state);
                    let c = st.floor(offset).ok_or(Error::StaleHandle)?;
                    let targets = st.rounds.get(c.round).map(|r| Arc::clone(&r.targets));
                    (c, st.members.clone(), targets)
                };
                let Some(targets) = targets else { return Ok(Vec::new()) };
                let round = from.round;
                let walk = MergeWalk::new(
                    Arc::clone(&self.index.source),
                    Arc::clone(&self.index.topic),
                    &members,
                    &from,
                    targets,
                )?;
                (walk, round, Vec::new())
            }
        };
        let (members, later) = {
            let st = lock(&self.index.state);
            let later: Vec<Round> =
                st.rounds.get(round.saturating_add(1)..).unwrap_or_default().to_vec();
            (st.members.clone(), later)
        };
        let mut later = later.into_iter();
        let mut scratch = Vec::new();
        while walk.position < to {
            let before = walk.position;
            let stepped = if before >= offset {
                walk.step(Some(&mut out))?
            } else {
                scratch.clear();
                let stepped = walk.step(Some(&mut scratch))?;
                // A record straddling the window start.
                if walk.position > offset {
                    let skip = usize::try_from(offset - before).unwrap_or(usize::MAX);
                    out.extend_from_slice(scratch.get(skip..).unwrap_or_default());
                }
                stepped
            };
            if stepped.is_none() {
                // This round is done: on to the next one, if it started.
                let Some(next) = later.next() else { break };
                round = round.saturating_add(1);
                walk.next_round(&members, &next.targets)?;
            }
        }
        let carry = out.split_off(want.min(out.len()));
        *lock(&self.resume) = Some(Resume { walk, round, carry, at: to });
        Ok(out)
    }
}

/// Where a stream's last read stopped: its merge, and the rendered bytes it produced past the
/// end of the window (the rest of a record cut by the window), at rendered position `at`.
pub(super) struct Resume {
    walk: MergeWalk,
    round: usize,
    carry: Vec<u8>,
    at: u64,
}
