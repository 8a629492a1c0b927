//! Reading a stream: windows rendered from the checkpoint before them, the rest of the batch a
//! read stopped inside ([`Tail`]), and read-ahead ([`crate::readahead::AheadSource`]).

use super::*;
use bytes::Bytes;

/// The rendering of the batch a read stopped inside, from the end of the window it returned to
/// the end of the batch (or of the stream). A sequential reader (`cat`, a FUSE read is 128
/// KiB against batches of up to 1 MB) continues from it instead of reading, checking and
/// decoding that batch again.
///
/// **Invariant**: `bytes` are the stream's rendered positions `[at, at + bytes.len())` of the
/// index generation the stream was opened on, for records below `end`; the batch starts at
/// `before` and, unless the stream ends inside it, is followed by the checkpoint `after`,
/// whose position is `at + bytes.len()`.
///
/// `bytes` share the buffer the window before was rendered into (that window is returned as
/// another slice of it, see [`Stream::finish_window`]): keeping the rest of a batch costs no
/// copy, and a window inside it is served as a slice of it.
#[derive(Debug)]
pub(super) struct Tail {
    at: u64,
    bytes: Bytes,
    before: Checkpoint,
    after: Option<Checkpoint>,
    end: Option<Offset>,
    /// Its bytes in the mount's budget (`None` without one).
    _held: Option<Reservation>,
}

impl Stream {
    /// [`RenderIndex::sync`] by the bounds the source last stated
    /// ([`Known::bounds`](topicfs_source::Known::bounds), no request) when it keeps them, else by its summary.
    fn sync_stated(&self, st: &mut crate::render_index::IndexState) -> Result<()> {
        match self.part.known().bounds {
            Some((start, end)) => self.index.sync_to(st, self.part.as_ref(), start, end),
            None => self.index.sync(st, self.part.as_ref()),
        }
    }

    /// Reads up to `len` bytes at file offset `offset`: exactly the bytes a full read has there
    /// (fewer at the current end; none past it).
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        let from = self.start_position.saturating_add(offset);
        let mut to = from.saturating_add(len as u64);
        let bound = {
            let mut end = lock(&self.end);
            self.refresh_bound(&mut end)?;
            if let Some(p) = end.final_position {
                to = to.min(p);
            }
            end.bound
        };
        if matches!(bound, Bound::Fixed(e) if e <= self.start) {
            return Ok(Bytes::new());
        }
        if from >= to {
            if offset == 0 && len > 0 {
                // An empty complete range: empty because its records are damaged (EIO, as a
                // read that starts at damage), or because it holds none (gaps, markers).
                if let Bound::Fixed(e) = bound {
                    self.check_range_readable(e)?;
                }
            }
            return Ok(Bytes::new());
        }
        let end = match bound {
            Bound::Fixed(e) => Some(e),
            Bound::Open | Bound::UntilTimestamp(_) => None,
        };
        match self.read_window(from, to, end) {
            // A source that could not be reached within its deadline: a retry would wait out
            // another one (a dead broker ends a read within one deadline, not three).
            Err(e) if e.is_unreachable() => Err(e),
            Err(e) if !matches!(e, Error::StaleHandle) => {
                // The checkpoint may have been deleted by retention meanwhile: notice it, retry.
                // A retry that finds the bytes deleted says so (ESTALE): the stream's bytes
                // exist, the records behind them are gone. The engine says the same thing as
                // an offset below its log start when retention overtook a reader between the
                // two attempts, or the sync itself (rebuilding the index at a log start that
                // retention moved meanwhile). Any other failure of the retry is reported as
                // the first one.
                let stale = |retry: Error| match retry {
                    Error::StaleHandle => retry,
                    Error::OffsetOutOfRange { requested, log_start, .. }
                        if requested < log_start =>
                    {
                        Error::StaleHandle
                    }
                    _ => e,
                };
                let mut st = self.index.lock_state();
                if let Err(retry) = self.index.sync(&mut st, self.part.as_ref()) {
                    return Err(stale(retry));
                }
                drop(st);
                self.read_window(from, to, end).map_err(stale)
            }
            other => other,
        }
    }

    /// For a complete bounded range (see [`Stream::is_complete`]) that holds records: the max
    /// timestamp of the batch holding its last record (for `LogAppendTime` the time it was
    /// appended), which never changes: what the range's mtime shows. `None` otherwise, for
    /// batches without timestamps (v0), and when that batch cannot be read (deleted, damaged).
    pub fn completed_timestamp(&self) -> Option<Timestamp> {
        let end = {
            let end = lock(&self.end);
            match (end.final_position, end.bound, end.completed_timestamp) {
                (Some(_), _, Some(known)) => return known,
                (Some(_), Bound::Fixed(e), None) if e > self.start => e,
                _ => return None,
            }
        };
        let last = Offset(end.0.saturating_sub(1));
        // Best effort: a batch deleted by retention since, or damaged (reads of it fail and
        // say so), leaves nothing to date the range by.
        let dated = self
            .part
            .seek(last)
            .and_then(|cursor| {
                self.part
                    .read(&cursor, 1, topicfs_source::ReadMode::Batches)
                    .and_then(topicfs_source::ReadAnswer::into_chunk)
            })
            .ok()
            .and_then(|chunk| parse_batch_info(&chunk.bytes).ok())
            .filter(|info| info.max_timestamp >= 0 && info.base_offset <= last)
            .map(|info| info.max_timestamp);
        lock(&self.end).completed_timestamp = Some(dated);
        dated
    }

    /// Whether bytes read earlier at file offset `offset` may still be served: the records
    /// behind them are still in the log (a read there would not fail with `ESTALE`).
    pub fn holds(&self, offset: u64) -> Result<bool> {
        let from = self.start_position.saturating_add(offset);
        let mut st = self.index.lock_state();
        // Bytes rendered a moment ago are served while the log start the source last stated
        // (a cluster: the Fetch that brought them) is not past them: no request per window.
        self.sync_stated(&mut st)?;
        if st.generation() != self.generation {
            return Ok(false);
        }
        Ok(st.first_checkpoint().is_some_and(|first| from >= first.position))
    }

    /// Fails with the damage of the first damaged batch holding records of `[start, end)`, if
    /// any (such a batch renders nothing, so a range of only damaged batches is empty).
    fn check_range_readable(&self, end: Offset) -> Result<()> {
        let part = self.part.as_ref();
        let checkpoint = {
            let st = self.index.lock_state();
            st.floor_by_bound(self.start).ok_or(Error::StaleHandle)?
        };
        let mut w = self.index.walker(part, checkpoint);
        while let Some(step) = w.peek()? {
            if step.info.base_offset >= end {
                break;
            }
            if step.info.last_offset >= self.start && !w.hides(&step.info) {
                let decoded = decode_batch(w.entry(&step))
                    .and_then(|b| b.records().try_for_each(|r| r.map(drop)));
                if let Err(e) = decoded {
                    return Err(w.corrupt(e.at as u64, &e));
                }
            }
            w.advance(&step, 0);
        }
        Ok(())
    }

    /// Renders rendered positions `[from, to)` (records below `end`); see
    /// [`Stream::render_window`].
    ///
    /// A window rendered while the source rewrote stored records (a cleaner pass ended,
    /// [`Known::rewrites`](topicfs_source::Known::rewrites) moved) may hold rewritten records at positions counted on
    /// the old ones: it is rendered again (the index then drops what the pass replaced, so
    /// those bytes read as stale), and fails with [`Error::StaleHandle`] when passes keep
    /// ending during it.
    fn read_window(&self, from: u64, to: u64, end: Option<Offset>) -> Result<Bytes> {
        lock(&self.rendering).push(to);
        let _done = RenderingWindow { stream: self, to };
        for _ in 0..3 {
            let seen = self.part.known().rewrites;
            let out = self.render_window(from, to, end, true, seen)?;
            if self.part.known().rewrites == seen {
                return Ok(out);
            }
        }
        Err(Error::StaleHandle)
    }

    /// Renders rendered positions `[from, to)` (records below `end`) from one of the stream's
    /// [`Tail`]s when one holds `from`, else from the nearest checkpoint.
    ///
    /// Windows read ahead render in parallel, so the window before this one (ending at `from`)
    /// may still be rendering the batch `from` falls in, and keeps the rest of it as a tail.
    /// With `may_defer`, when it is (and the index has the checkpoint `n` where that batch
    /// ends, inside the window), this render starts at `n` and then takes `[from, n)` from
    /// that tail once the window before is done, instead of reading, checking and decoding
    /// the batch a second time (issue 17: 27% more records rendered than read). Without the
    /// tail, or when the render from `n` fails, it renders as without deferring: the bytes
    /// are the same either way.
    fn render_window(
        &self,
        from: u64,
        to: u64,
        end: Option<Offset>,
        may_defer: bool,
        seen: u64,
    ) -> Result<Bytes> {
        let part = self.part.as_ref();
        let from0 = from;
        let window = usize::try_from(to - from).unwrap_or(usize::MAX);
        // Room for the window and the rest of the batch it ends in (kept as the tail): twice
        // the batches' stored size (a `.json` rendering is larger than the batch), so that the
        // batch crossing the window's end does not move the whole window to a larger buffer.
        let tail_room = self
            .batch_hint
            .load(Ordering::Relaxed)
            .saturating_mul(2)
            .clamp(READ_CHUNK * 2, crate::walker::MAX_TAIL as usize);
        let mut out = Vec::with_capacity(window.min(1 << 20).saturating_add(tail_room));
        let mut from = from;
        let checkpoint = {
            let mut st = self.index.lock_state();
            let mut tail = {
                let mut tails = lock(&self.tails);
                let found = tails.iter().position(|t| {
                    t.end == end && t.at <= from && from < t.at.saturating_add(t.bytes.len() as u64)
                });
                found.and_then(|i| tails.remove(i))
            };
            if tail.as_ref().is_some_and(|t| t.end == end && t.at <= from) || seen != st.rewrites()
            {
                // Bytes kept in memory are served only while the log still holds them: the
                // index notices retention here (as a read from the log would), by the bounds
                // the source last stated when it keeps them (the read that kept the bytes).
                // And a read from the log notices a rewrite (a cleaner pass) only here: its
                // reads find a replaced place again by offset, without an error.
                self.sync_stated(&mut st)?;
            }
            if st.generation() != self.generation {
                return Err(Error::StaleHandle);
            }
            let Some(first) = st.first_checkpoint() else {
                return Err(Error::StaleHandle);
            };
            if from < first.position {
                return Err(Error::StaleHandle);
            }
            let mut c = st.floor_by_position(from).ok_or(Error::StaleHandle)?;
            if let Some(last) = *lock(&self.last_read) {
                // Checkpoints are ordered by bound as by cursor: at or after the first one is
                // alive.
                let alive = last.bound >= first.bound;
                if alive && last.position <= from && last.position > c.position {
                    c = last;
                }
            }
            if let Some(t) = tail.take() {
                let held = t.at.saturating_add(t.bytes.len() as u64);
                let alive = t.before.bound >= first.bound;
                if t.end == end && alive && t.at <= from && from < held {
                    let skip = (from - t.at) as usize;
                    let n = (held - from).min(to - from) as usize;
                    // In range by the checks above (`Bytes::slice` would panic otherwise).
                    let served = match skip.checked_add(n) {
                        Some(e) if e <= t.bytes.len() => t.bytes.slice(skip..e),
                        _ => Bytes::new(),
                    };
                    from = from.saturating_add(n as u64);
                    if from < held {
                        keep_tail(&mut lock(&self.tails), t);
                        return Ok(served);
                    }
                    let Some(after) = t.after else { return Ok(served) };
                    *lock(&self.last_read) = Some(after);
                    if from >= to {
                        return Ok(served);
                    }
                    // The window goes on past the batch: its first bytes are the tail's.
                    out.extend_from_slice(&served);
                    c = after;
                }
            }
            // A read that renders past the frontier: what it finds there becomes the index's
            // (up to the log end offset read below).
            let learned =
                (to > st.frontier().position).then(|| Learned::new(&st, Offset(i64::MAX)));
            // Defer the batch `from` falls in to the window before, while it renders it (see
            // above): only below the frontier (nothing to learn) and in the record formats
            // (raw windows keep no tail).
            let defer_to = (may_defer
                && out.is_empty()
                && learned.is_none()
                && self.index.renderer.format() != Format::Raw
                && lock(&self.rendering).contains(&from))
            .then(|| st.checkpoint_after_position(from))
            .flatten()
            .filter(|n| n.position > from && n.position < to);
            if let Some(n) = defer_to {
                c = n;
                from = n.position;
            }
            (c, learned, defer_to)
        };
        let (checkpoint, mut learned, deferred) = checkpoint;
        if self.index.txn.is_some() {
            // Moves the transaction state (and with it the stable offset) to the log end, as
            // reading an open stream to its end does without transactions; and is the log end
            // the index may learn up to (read before the batches are).
            let log_end = part.summary()?.log_end_offset;
            if let Some(l) = learned.as_mut() {
                l.set_log_end(log_end);
            }
        } else if let Some(l) = learned.as_mut() {
            // The log end the index may learn up to, read before the batches are: one the
            // source already stated, when it keeps one (no request), else its summary's.
            let log_end = match part.known().bounds {
                Some((_, end)) => end,
                None => part.summary()?.log_end_offset,
            };
            l.set_log_end(log_end);
        }
        let mut w = self.index.walker(part, checkpoint).with_read_size(
            to.saturating_sub(checkpoint.position),
            self.batch_hint.load(Ordering::Relaxed),
        );
        if let Some(n) = deferred {
            // From `n` on, after room for the part before it (filled in then: no copy of the
            // window).
            let prefix = (n.position - from0) as usize;
            out.resize(prefix, 0);
            // The tail is kept at once, a copy (this window's start is filled in only after
            // the window before is done, and the window after may want the tail meanwhile).
            let mut out =
                match self.walk_window(&mut w, from, to, end, window, learned, out, seen, false) {
                    Ok((out, kept)) => self.keep_tail_copy(out, window, to, end, kept),
                    // Whatever went wrong from `n` on, a render from the start says it as
                    // without deferring (e.g. damage at `n` ends a read short rather than failing).
                    Err(_) => return self.render_window(from0, to, end, false, seen),
                };
            {
                let mut r = lock(&self.rendering);
                while r.contains(&from0) {
                    r = self.rendered.wait(r).unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            }
            let before = self.render_window(from0, n.position, end, false, seen)?;
            match out.get_mut(..prefix) {
                Some(room) if before.len() == prefix => room.copy_from_slice(&before),
                // The stream ended before `n` (its bound was reached): nothing after it.
                _ => return Ok(before),
            }
            return Ok(Bytes::from(out));
        }
        let (out, kept) =
            self.walk_window(&mut w, from, to, end, window, learned, out, seen, true)?;
        Ok(self.finish_window(out, window, to, end, kept))
    }

    /// The window `[.., to)` of `out` (its first `window` bytes) as returned to the reader, and
    /// with `kept` (the rest of the batch it ends in may be kept: its reservation and the
    /// checkpoints around that batch) the bytes past it kept as the stream's [`Tail`] at `to`:
    /// both slices of the one buffer, neither copied.
    fn finish_window(
        &self,
        out: Vec<u8>,
        window: usize,
        to: u64,
        end: Option<Offset>,
        kept: Option<KeptTail>,
    ) -> Bytes {
        let all = Bytes::from(out);
        if all.len() <= window {
            return all;
        }
        if let Some(kept) = kept {
            self.keep_tail_at(to, all.slice(window..), end, kept);
        }
        all.slice(..window)
    }

    /// `out` cut to its first `window` bytes, the bytes past them (with `kept`) copied into the
    /// stream's [`Tail`] at `to` at once: for a deferred window, whose own start is filled in
    /// only after the window before is done, while the window after may look for this tail.
    fn keep_tail_copy(
        &self,
        mut out: Vec<u8>,
        window: usize,
        to: u64,
        end: Option<Offset>,
        kept: Option<KeptTail>,
    ) -> Vec<u8> {
        if let (Some(kept), Some(rest)) = (kept, out.get(window..)) {
            self.keep_tail_at(to, Bytes::copy_from_slice(rest), end, kept);
        }
        out.truncate(window);
        out
    }

    /// Keeps `bytes`, the rest of the batch a window ending at `to` stopped inside, as the
    /// stream's [`Tail`] there.
    fn keep_tail_at(&self, to: u64, bytes: Bytes, end: Option<Offset>, kept: KeptTail) {
        let KeptTail { held, before, after } = kept;
        let tail = Tail { at: to, bytes, before, after, end, _held: held };
        keep_tail(&mut lock(&self.tails), tail);
    }

    /// The walk of [`Stream::render_window`] from the walker's checkpoint: renders `[from,
    /// to)` into `out` (which holds `window` bytes when done, or fewer at the stream's end).
    /// What it renders past the window stays in `out`; when the rest of that batch may be kept,
    /// the [`KeptTail`] it returns says so, with a reservation for the whole buffer when
    /// `share_tail` ([`Stream::finish_window`]) or for that rest alone when not
    /// ([`Stream::keep_tail_copy`]).
    #[allow(clippy::too_many_arguments)]
    fn walk_window(
        &self,
        w: &mut crate::walker::Walker<'_>,
        from: u64,
        to: u64,
        end: Option<Offset>,
        window: usize,
        mut learned: Option<Learned>,
        mut out: Vec<u8>,
        seen: u64,
        share_tail: bool,
    ) -> Result<(Vec<u8>, Option<KeptTail>)> {
        let part = self.part.as_ref();
        let mut resume = None;
        let mut kept = None;
        let mut at_end = false;
        while w.here.position < to {
            let Some(step) = w.peek()? else {
                at_end = true;
                break;
            };
            // Taken after `peek`, which moves the cursor when the batch starts a new run.
            let before = w.here;
            let boundary = w.at_retention_boundary;
            let size = step.len as u64;
            let r = w.render_batch(&step, from, to, self.start, end, &mut out)?;
            if out.len() > window {
                // The window ends inside this batch: keep the rest of its rendering.
                // Kept only within the budget (else the next read renders the batch again).
                // Shared, it keeps the window's buffer, of which it is the rest (see
                // `Stream::finish_window`), so the whole buffer is reserved; else a copy of
                // the rest, kept now.
                let keeps = if share_tail { out.len() } else { out.len() - window };
                let held = match &self.budget {
                    None => Some(None),
                    Some(budget) => budget.try_reserve(keeps).map(Some),
                };
                // Kept only when no rewrite ended meanwhile (see `Stream::read_window`): every
                // read of this walk then found the records as the index counted them.
                let unchanged = part.known().rewrites == seen;
                if let (false, Some(held), true) = (r.cut, held, unchanged) {
                    let after = if r.ends_stream {
                        None
                    } else {
                        w.advance(&step, r.bytes);
                        if let Some(l) = learned.as_mut() {
                            l.passed(before, boundary, w.here, size);
                        }
                        Some(w.here)
                    };
                    kept = Some(KeptTail { held, before, after });
                }
                resume = Some(before);
                break;
            }
            if r.ends_stream || r.cut {
                resume = Some(before);
                break;
            }
            w.advance(&step, r.bytes);
            if let Some(l) = learned.as_mut() {
                l.passed(before, boundary, w.here, size);
            }
            resume = Some(if w.here.position <= to { w.here } else { before });
        }
        if let Some(c) = resume.filter(|_| part.known().rewrites == seen) {
            *lock(&self.last_read) = Some(c);
        }
        if let Some(l) = learned {
            self.index.learn(part, l);
        }
        if at_end {
            // Read to the end of the log: the index's frontier is there too (learned above, or
            // rendered by another reader), so the size is exact from now on at little cost.
            self.shown_exact.store(true, Ordering::Release);
        }
        self.batch_hint.store(w.batch_hint, Ordering::Relaxed);
        Ok((out, kept))
    }
}

/// What [`Stream::walk_window`] found about the batch its window ends inside, for
/// [`Stream::finish_window`] to keep the rest of its rendering as a [`Tail`].
struct KeptTail {
    held: Option<Reservation>,
    before: Checkpoint,
    after: Option<Checkpoint>,
}

/// Tails a stream keeps at once: one per window of a handle rendering in parallel
/// ([`crate::readahead::MAX_PARALLEL`]) and one for a reader's own read.
pub(super) const MAX_TAILS: usize = crate::readahead::MAX_PARALLEL + 2;

/// Keeps `tail` among `tails`, dropping the oldest beyond [`MAX_TAILS`] and any other at the
/// same position.
fn keep_tail(tails: &mut VecDeque<Tail>, tail: Tail) {
    tails.retain(|t| t.at != tail.at || t.end != tail.end);
    while tails.len() >= MAX_TAILS {
        tails.pop_front();
    }
    tails.push_back(tail);
}

/// A window of [`Stream::read_window`] being rendered: its end is in the stream's `rendering`
/// until dropped.
struct RenderingWindow<'a> {
    stream: &'a Stream,
    to: u64,
}

impl Drop for RenderingWindow<'_> {
    fn drop(&mut self) {
        let mut r = lock(&self.stream.rendering);
        if let Some(i) = r.iter().position(|&t| t == self.to) {
            r.swap_remove(i);
        }
        self.stream.rendered.notify_all();
    }
}

impl crate::readahead::AheadSource for Stream {
    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        Stream::read_at(self, offset, len)
    }

    fn holds(&self, offset: u64) -> Result<bool> {
        Stream::holds(self, offset)
    }

    /// A source without local segment files (a cluster) fetches over the network.
    fn waits_on_network(&self) -> bool {
        Stream::waits_on_network(self)
    }
}
