//! A stream's size: exact, or not yet known within the sizing budget; what `stat` asks
//! ([`Stream::stat_size`]) and the sizing it leaves to the background.

use super::*;

/// Log bytes a request (`stat`, lookup, `open`) renders at most itself to size a stream or to
/// reach its start on the shared render index, whatever the source's sizing budget: 1 MiB,
/// about a millisecond of rendering here. The rest of a larger budget is sized in the
/// background ([`Stream::stat_size`]), so an open far into a large partition on a fresh mount
/// does not wait for a quarter of a GiB of rendering (doc/benchmarks-history.md, issue 17: with 16 MiB
/// here, every such open still took 20–30 ms).
pub const SIZED_AT_ONCE: u64 = 1 << 20;

/// What [`Stream::stat_size`] answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatSize {
    /// As [`Stream::known_size`]: exact, or `None` while not yet known.
    Now(Option<u64>),
    /// Not yet known, and knowing more needs a budget's worth of sizing, left to the caller
    /// (a [`Stream::known_size`] elsewhere).
    Deferred,
}

impl Stream {
    /// Exactly the number of bytes a full read returns now, rendering as much of the log as
    /// that takes (see [`Stream::known_size`] for what `stat` shows).
    pub fn size(&self) -> Result<u64> {
        let end = self.end_position(None)?.unwrap_or(self.start_position);
        Ok(end.saturating_sub(self.start_position))
    }

    /// The size as `stat` shows it: exactly the number of bytes a full read returns now, or
    /// `None` when that is not yet known because knowing it would render more than the source's
    /// [`sizing_budget`](topicfs_source::Known::sizing_budget) of log. Each call continues from where
    /// the last sizing (or read) stopped, so repeated calls converge; once a size was known, or
    /// the stream was read to its end, every later call is exact (rendering what was appended
    /// since).
    pub fn known_size(&self) -> Result<Option<u64>> {
        self.known_size_within(self.part.known().sizing_budget)
    }

    /// [`Stream::known_size`] rendering at most `budget` bytes of log while not exact.
    fn known_size_within(&self, budget: u64) -> Result<Option<u64>> {
        let exact = self.shown_exact.load(Ordering::Acquire);
        let budget = if exact { None } else { Some(budget) };
        let end = self.end_position(budget)?;
        if end.is_some() {
            self.shown_exact.store(true, Ordering::Release);
        }
        Ok(end.map(|e| e.saturating_sub(self.start_position)))
    }

    /// What `stat` shows without waiting for a budget's worth of sizing: as
    /// [`Stream::known_size`], but
    /// - it renders at most [`SIZED_AT_ONCE`] of log itself; when the source's budget is larger
    ///   and that was not enough, [`StatSize::Deferred`]: not yet known, and the caller sizes
    ///   the rest of the budget in the background ([`Stream::size_step`]);
    /// - a stream ending at the log end whose size is not yet known while the last sizing of
    ///   its index stopped at the budget short of the log end (and reads have not reached it
    ///   since) is [`StatSize::Deferred`] at once, rendering nothing.
    ///
    /// So every `stat` answers within one step's rendering, and repeated stats still converge
    /// (each deferred one continues the sizing by a budget). Exact sizes are answered here,
    /// whatever they cost (a size once shown is never "not yet known" again).
    pub fn stat_size(&self) -> Result<StatSize> {
        // Never waits for a sizing or read in progress to decide: the flags are atomic, and a
        // busy index is being extended (not yet known).
        if self.open_ended
            && !self.shown_exact.load(Ordering::Acquire)
            && self.index.sizing_cut.load(Ordering::Acquire)
        {
            let log_end = self.part.summary()?.log_end_offset;
            let behind = match self.index.state.try_lock() {
                Ok(st) => st.frontier().bound < log_end,
                Err(std::sync::TryLockError::WouldBlock) => true,
                Err(std::sync::TryLockError::Poisoned(st)) => {
                    st.into_inner().frontier().bound < log_end
                }
            };
            if behind {
                return Ok(StatSize::Deferred);
            }
        }
        // A request sizes at most `SIZED_AT_ONCE` itself; the rest of the budget is the
        // background's.
        let budget = self.part.known().sizing_budget;
        if budget > SIZED_AT_ONCE && !self.shown_exact.load(Ordering::Acquire) {
            return Ok(match self.known_size_within(SIZED_AT_ONCE)? {
                Some(size) => StatSize::Now(Some(size)),
                None => StatSize::Deferred,
            });
        }
        Ok(StatSize::Now(self.known_size()?))
    }

    /// One step of sizing left to the background by a deferred [`Stream::stat_size`]: `budget`
    /// bytes of log (at first the source's [`Stream::sizing_budget`]), towards the log end, in
    /// parts of at most `part_bytes`, each under the index's lock once `go` says so. The first
    /// read of the step is asked of the source before the index is locked (a cluster keeps that
    /// Fetch's answer for the step), so opens, stats and reads of the index wait for one batch
    /// of a part at most (a part yields to them: [`RenderIndex::size_step`]), never for the
    /// source or the whole budget. The next `stat` shows the
    /// size if the step reached the end. Returns the bytes of the budget left when `go` stopped
    /// it (0: the budget is spent or the end reached), for the caller to continue later.
    pub fn size_step(&self, part_bytes: u64, budget: u64, go: &dyn Fn() -> bool) -> Result<u64> {
        let frontier = lock(&self.index.state).frontier().cursor;
        if let Err(e) = self
            .part
            .read(&frontier, READ_CHUNK, topicfs_source::ReadMode::Batches)
            .and_then(topicfs_source::ReadAnswer::into_chunk)
        {
            // The step reads it again under the lock, and fails there if it must.
            log::debug!(
                "sizing step of {}-{}: read ahead of the step: {e}",
                self.part.topic(),
                self.part.partition()
            );
        }
        let part_bytes = part_bytes.clamp(1, budget.max(1));
        let mut spent = 0u64;
        while spent < budget {
            if !go() {
                return Ok(budget - spent);
            }
            let step = self.index.size_step(self.part.as_ref(), part_bytes)?;
            if step.reached {
                break;
            }
            // A part that yielded to a request early costs only what it rendered.
            spent = spent.saturating_add(step.used.max(1));
        }
        Ok(0)
    }

    /// Whether reading the stream may wait on the network: its source has no local segment
    /// files (a cluster).
    pub fn waits_on_network(&self) -> bool {
        self.part.segment_files().is_none()
    }

    /// Log bytes one deferred sizing step renders: the source's
    /// [`sizing_budget`](topicfs_source::Known::sizing_budget).
    pub fn sizing_budget(&self) -> u64 {
        self.part.known().sizing_budget
    }

    /// Whether `self` and `other` are sized together (one render index): a sizing step of
    /// either sizes both.
    pub fn sized_with(&self, other: &Stream) -> bool {
        Arc::ptr_eq(&self.index, &other.index)
    }

    /// Whether [`Stream::known_size`] is exact from now on.
    pub fn is_sized(&self) -> bool {
        self.shown_exact.load(Ordering::Acquire)
    }

    /// The rendered position of the end of the stream now; `None` when reaching it would
    /// render more than `budget` bytes of log.
    fn end_position(&self, budget: Option<u64>) -> Result<Option<u64>> {
        let mut end = lock(&self.end);
        if let Some(p) = end.final_position {
            return Ok(Some(p));
        }
        self.refresh_bound(&mut end)?;
        let index = &self.index;
        let part = self.part.as_ref();
        let mut st = index.lock_state();
        index.sync(&mut st, part)?;
        if st.generation() != self.generation {
            return Err(Error::StaleHandle);
        }
        let position = match end.bound {
            Bound::Open | Bound::UntilTimestamp(_) => {
                match index.end_position(&mut st, part, budget)? {
                    Some(p) => p,
                    None => return Ok(None),
                }
            }
            Bound::Fixed(e) if e <= self.start => {
                end.final_position = Some(self.start_position);
                self.start_position
            }
            Bound::Fixed(e) => {
                if !index.extend_within(&mut st, part, Some(e), budget)? {
                    return Ok(None);
                }
                if st.frontier().bound >= e {
                    let target = match index.renderer.format() {
                        Format::Raw => Target::BatchFrom(e),
                        Format::Values | Format::Json => Target::Record(e),
                    };
                    let p = index.locate(&mut st, part, target)?;
                    end.final_position = Some(p);
                    p
                } else {
                    st.frontier().position
                }
            }
        };
        Ok(Some(position.max(self.start_position)))
    }
}
