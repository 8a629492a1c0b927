//! Fetch reads of one partition handle through the mount's read windows ([`Windows`]): a
//! read served from a kept piece, from a Fetch in flight, or by its own Fetch of its reader's
//! window, then a prefetch of the next window for a sequential reader.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use topicfs_executor::{Blocking, Class};

use super::ClusterPartition;
use super::window::{
    AHEAD_WINDOWS, FIRST_WINDOW, FLIGHTS_PER_PARTITION, FlightSlot, Found, Key, Landed,
    PIECE_WINDOWS, PREFETCH_AFTER, PROBE_ASK, Pass, Piece, RunBy,
};
use crate::client::{FetchOptions, FetchedPartition};
use crate::committed::committed_batches;
use crate::config::IsolationLevel;
use topicfs_format::{Offset, parse_batch_info, peek_entry};
use topicfs_source::error::{Error, Result};
use topicfs_source::{BatchChunk, ReadCursor};

/// What one Fetch answer gives a read (see [`ClusterPartition::piece_of`]).
enum Answered {
    /// Batches.
    Piece(Piece),
    /// Nothing: the log end (reading committed, the last stable offset).
    End,
    /// Nothing, although the log holds records there (a response limit that left this
    /// partition out, or a broker answering nothing when the first batch exceeds its limit).
    Nothing,
    /// Every batch dropped as aborted: the read continues from this offset.
    From(Offset),
}

/// Where a piece of `bytes` (whole batches) fetched from `from` serves reads from: the base
/// offset of its first v2 batch when that is below `from` (a Fetch answers with the batch
/// holding its offset, so the piece holds that batch's earlier records too, and a read from
/// the batch's start, where the answer before a guessed prefetch ended, finds it).
fn reaches_back(from: Offset, bytes: &[u8]) -> Offset {
    match parse_batch_info(bytes) {
        Ok(info) if info.magic >= 2 && info.base_offset.0 >= 0 && info.base_offset < from => {
            info.base_offset
        }
        _ => from,
    }
}

/// The piece of a Fetch answer for a read from `from` that asked `ask` bytes: `bytes` (whole
/// batches), continued at `next`, serving from [`reaches_back`], with its batches counted.
fn answer_piece(from: Offset, next: Offset, bytes: Bytes, ask: usize) -> Piece {
    let (batches, first_base) = batches_of(&bytes);
    let mut piece = Piece::new(reaches_back(from, &bytes), next, bytes);
    piece.asked = ask;
    piece.fetched_for = from;
    piece.batches = batches;
    piece.first_base = first_base.unwrap_or(piece.from);
    piece
}

/// The whole batches of `bytes` (a piece's) and the base offset of the first (`None` when it
/// does not parse). Reads entry headers only.
fn batches_of(bytes: &[u8]) -> (usize, Option<Offset>) {
    let first = parse_batch_info(bytes).ok().map(|info| info.base_offset);
    let (mut n, mut pos) = (0, 0);
    while let Some(rest) = bytes.get(pos..) {
        let Ok(Some(h)) = peek_entry(rest) else { break };
        let size = h.total_size();
        if size == 0 || size > rest.len() {
            break;
        }
        n += 1;
        pos += size;
    }
    (n, first)
}

/// Whether the first batch of `bytes` (whole batches) starts below `from`.
fn starts_below(bytes: &[u8], from: Offset) -> bool {
    parse_batch_info(bytes).is_ok_and(|info| info.base_offset < from)
}

/// A prefetch queued on the executor: run by its task, or, when the task is dropped unstarted
/// (the executor shut down), landed as failed without a Fetch, so that its flight ends and
/// what it holds (the partition handle, its fetch memory) is let go.
struct QueuedPrefetch(Arc<FlightSlot>);

impl QueuedPrefetch {
    fn run(self) {
        self.0.run_pending(RunBy::Worker);
    }
}

impl Drop for QueuedPrefetch {
    fn drop(&mut self) {
        self.0.run_pending(RunBy::Dropped);
    }
}

/// A read's answer when nothing is there (the log end, or the last stable offset).
fn empty() -> BatchChunk {
    BatchChunk {
        bytes: Vec::new(),
        starts: Vec::new(),
        next: None,
        crc_checked: false,
        skipped: None,
    }
}

impl ClusterPartition {
    fn key(&self) -> Key {
        (self.topic.clone(), self.partition, self.committed)
    }

    /// The most one Fetch of this partition asks: `max.partition.fetch.bytes`, within
    /// `fetch.max.bytes`.
    /// Within a fetch memory, a quarter of its limit at most (so that several readers fit).
    fn fetch_cap(&self) -> usize {
        let c = self.client.config();
        let most = usize::try_from(c.max_partition_fetch_bytes.min(c.fetch_max_bytes))
            .unwrap_or(1 << 20)
            .max(1);
        match &self.fetch_memory {
            Some(cap) => most.min(cap.memory.limit() / 4).max(PROBE_ASK),
            None => most,
        }
    }

    /// The most bytes the mount keeps as pieces (see [`super::window`]).
    pub(super) fn piece_cap(&self) -> usize {
        let most = self.fetch_cap().saturating_mul(PIECE_WINDOWS);
        match &self.fetch_memory {
            Some(cap) => most.min(cap.memory.limit() / 4),
            None => most,
        }
    }

    /// [`PartitionSource::read`] through the mount's read windows (see [`super::window`]).
    pub(super) fn read_windowed(
        &self,
        cursor: &ReadCursor,
        max_bytes: usize,
    ) -> Result<BatchChunk> {
        let key = self.key();
        let first =
            if max_bytes < PROBE_ASK { max_bytes.max(1) } else { max_bytes.max(FIRST_WINDOW) };
        let cap = self.fetch_cap();
        let mut from = cursor.next_offset;
        // Pieces serve only offsets the log still holds as last stated.
        if self.stated_bounds().is_some_and(|(start, _)| start > from) {
            self.windows.forget(&key);
        }
        let deadline = Instant::now() + self.client.config().request_timeout;
        // Set when a guessed piece's batches are framed across `from`: pieces and flights
        // from guesses are passed over then.
        let mut unguessed = false;
        // Pieces framed across `from` (fetched for another read): passed over.
        let mut across: Vec<(Offset, Offset)> = Vec::new();
        let chunk = loop {
            let pass = Pass { guessed: unguessed, pieces: &across };
            match self.windows.find(&key, from, &pass) {
                Found::Piece { bytes, from: piece_from, next, guessed, fetched_for } => {
                    let chunk = self.served(&bytes, from, next, max_bytes)?;
                    match chunk {
                        Some(chunk) if fetched_for != from && starts_below(&chunk.bytes, from) => {
                            // Its batch holding `from` starts below it, and the piece was
                            // fetched for a read from elsewhere: a broker that frames batches
                            // per Fetch (tansu's SQLite engine) answers `from` with a batch
                            // starting there, and a read continuing a batch that ended at
                            // `from` must not get records below `from` again.
                            across.push((piece_from, next));
                            if guessed {
                                unguessed = true;
                                self.windows.refuse_guesses(&key);
                            }
                        }
                        Some(chunk) => {
                            if guessed {
                                self.windows.guess_served(&key);
                            }
                            break chunk;
                        }
                        // Past the piece's last batch (dropped aborted ones): go on from its end.
                        None => from = next,
                    }
                }
                Found::InFlight(slot) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match slot.wait(left) {
                        Some(Landed::Empty) => return Ok(empty()),
                        Some(Landed::Piece | Landed::Failed) => {}
                        None => {
                            return Err(Error::Timeout {
                                broker: self.leader_name(),
                                what: format!(
                                    "partition {}/{}: waiting for a Fetch in flight from offset {}",
                                    self.topic, self.partition, from.0
                                ),
                                after_ms: u64::try_from(
                                    self.client.config().request_timeout.as_millis(),
                                )
                                .unwrap_or(u64::MAX),
                            });
                        }
                    }
                    // Looked again: served by what landed, or a Fetch of its own.
                }
                Found::Fetch(slot, ahead) => {
                    let ask =
                        self.windows.window_of(&key, from).unwrap_or(first).max(first).min(cap);
                    // A gap before a piece fetched ahead (a guess past an answer's end): a
                    // small Fetch fills it, the piece serves the rest.
                    let ask = if ahead.is_some() { ask.min(first) } else { ask };
                    let landed = self.hold(ask).and_then(|held| {
                        let piece = self.fetch_window(from, ask, false);
                        drop(held);
                        piece
                    });
                    let piece_cap = self.piece_cap();
                    match landed {
                        Ok(Some(piece)) => {
                            let (bytes, next) = (piece.bytes.clone(), piece.next);
                            self.windows.landed(
                                &key,
                                from,
                                &slot,
                                Some(piece),
                                Landed::Piece,
                                piece_cap,
                            );
                            match self.served(&bytes, from, next, max_bytes)? {
                                Some(chunk) => break chunk,
                                None => from = next,
                            }
                        }
                        Ok(None) => {
                            self.windows.landed(&key, from, &slot, None, Landed::Empty, piece_cap);
                            return Ok(empty());
                        }
                        Err(e) => {
                            self.windows.landed(&key, from, &slot, None, Landed::Failed, piece_cap);
                            return Err(e);
                        }
                    }
                }
            }
        };
        if let Some(next) = chunk.next.as_ref().map(|c| c.next_offset) {
            self.windows.passed(&key, next);
            let stream = self.windows.advance(&key, cursor.next_offset, next, first, cap);
            if stream.sequential >= PREFETCH_AFTER {
                // As many as the windows ahead allow: a read taking a whole answer at once
                // (one batch per Fetch) calls this once per window.
                for _ in 0..FLIGHTS_PER_PARTITION {
                    if !self.prefetch(&key, next, stream.window) {
                        break;
                    }
                }
            }
        }
        Ok(chunk)
    }

    /// The batches of a kept piece (`bytes`, continued at `next`) a read from `from` returns,
    /// `max_bytes` of them at most (at least one); `None` when none holds `from` or a later
    /// offset. Copies outside every lock.
    fn served(
        &self,
        bytes: &Bytes,
        from: Offset,
        next: Offset,
        max_bytes: usize,
    ) -> Result<Option<BatchChunk>> {
        let (mut chunk, more) = self.split(bytes, from, max_bytes)?;
        if chunk.bytes.is_empty() {
            return Ok(None);
        }
        if more.is_none() {
            // The whole rest of the piece: the read after it continues where its Fetch did
            // (past aborted batches the filter dropped at its end).
            chunk.next = Some(ReadCursor::at(next));
        }
        Ok(Some(chunk))
    }

    /// Keeps up to [`AHEAD_WINDOWS`] windows fetched or in flight past `from` for a sequential
    /// reader: a Fetch of `window` bytes from the end of what is kept, below the log end last
    /// stated, queued on the mount's executor (a [`Blocking::Network`] task of the read-ahead
    /// class; run by a read that waits for it first, if no worker started it yet); not sent
    /// when the fetch memory has no room at once. Without an executor (a source made outside
    /// a mount) the Fetch runs here, on the caller. Whether one was sent.
    fn prefetch(&self, key: &Key, from: Offset, window: usize) -> bool {
        let Some((_, end)) = self.stated_bounds() else { return false };
        // Pieces fetched ahead stay kept until the reader gets to them: those it passed go
        // first when the kept pieces pass their cap (`Windows::passed`).
        let ahead = window.saturating_mul(AHEAD_WINDOWS);
        let Some((at, slot, guessed)) = self.windows.prefetch_from(key, from, window, ahead, end)
        else {
            return false;
        };
        let held = match &self.fetch_memory {
            Some(cap) => match cap.memory.hold(window, Instant::now()) {
                Some(held) => Some(held),
                None => {
                    self.windows.landed(key, at, &slot, None, Landed::Failed, self.piece_cap());
                    return false;
                }
            },
            None => None,
        };
        let Some(me) = self.me.upgrade() else {
            self.windows.landed(key, at, &slot, None, Landed::Failed, self.piece_cap());
            return false;
        };
        let key = key.clone();
        slot.set_pending(Box::new(move |slot: &Arc<FlightSlot>, by: RunBy| {
            let cap = me.piece_cap();
            if by == RunBy::Dropped {
                me.windows.landed(&key, at, slot, None, Landed::Failed, cap);
                return;
            }
            // A read waiting for it asks for an answer at once, as its own Fetch would.
            let fetched = me.fetch_window(at, window, by == RunBy::Worker).map(|piece| {
                piece.map(|mut p| {
                    p.guessed = guessed;
                    p
                })
            });
            drop(held);
            match fetched {
                Ok(Some(piece)) => {
                    me.windows.landed(&key, at, slot, Some(piece), Landed::Piece, cap)
                }
                Ok(None) => me.windows.landed(&key, at, slot, None, Landed::Empty, cap),
                Err(e) => {
                    log::debug!("{}-{}: prefetch from {}: {e}", me.topic, me.partition, at.0);
                    me.windows.landed(&key, at, slot, None, Landed::Failed, cap);
                }
            }
        }));
        match &self.executor {
            Some(executor) => {
                let queued = QueuedPrefetch(slot);
                executor.submit(Class::ReadAhead, Blocking::Network, move || queued.run());
            }
            None => slot.run_pending(RunBy::Reader),
        }
        true
    }

    /// One Fetch of `ask` bytes from `from` as this partition's reads see it: whole batches
    /// holding `from` or later offsets (reading committed, filtered by the response's aborted
    /// transactions and cut at its last stable offset, the next Fetch following when all of a
    /// response was dropped), as a piece; `None` at the end. A `prefetch` asks
    /// `fetch.min.bytes` with `fetch.max.wait.ms` (when `fetch.min.bytes` is above 1); a read
    /// asks for an answer at once.
    pub(super) fn fetch_window(
        &self,
        from: Offset,
        ask: usize,
        prefetch: bool,
    ) -> Result<Option<Piece>> {
        let config = self.client.config();
        let opts = FetchOptions {
            max_bytes: Some(i32::try_from(ask.max(1)).unwrap_or(i32::MAX)),
            // `fetch.min.bytes` of 1 (the default) is answered by any batch, which a prefetch
            // below the log end always has: no wait then (tansu 0.6 holds a Fetch for its whole
            // `max_wait` even with the batches there, doc/cluster-brokers.md).
            max_wait: if prefetch && config.fetch_min_bytes > 1 {
                config.fetch_max_wait
            } else {
                Duration::ZERO
            },
            min_bytes: if prefetch { Some(config.fetch_min_bytes) } else { None },
            isolation: Some(if self.committed {
                IsolationLevel::ReadCommitted
            } else {
                IsolationLevel::ReadUncommitted
            }),
        };
        let mut at = from;
        loop {
            let asked = Instant::now();
            let fetched = self
                .client_now()
                .fetch(&self.topic, self.p(), at, opts)
                .map_err(|e| self.named(e))?;
            self.learn_from_fetch(&fetched, asked);
            match self.piece_of(&fetched, from, at, ask)? {
                Answered::Piece(piece) => return Ok(Some(piece)),
                Answered::End | Answered::Nothing => return Ok(None),
                Answered::From(next) => at = next,
            }
        }
    }

    /// What a Fetch answer from `at` gives a read from `from` (see [`ClusterPartition::fetch_window`]).
    fn piece_of(
        &self,
        fetched: &FetchedPartition,
        from: Offset,
        at: Offset,
        ask: usize,
    ) -> Result<Answered> {
        if !self.committed {
            let (start, end, next) = self.whole_from(&fetched.records, at)?;
            if end > start {
                let bytes = fetched.records.slice(start..end);
                return Ok(Answered::Piece(answer_piece(from, next, bytes, ask)));
            }
            return Ok(if fetched.high_watermark > at { Answered::Nothing } else { Answered::End });
        }
        // A broker that does not say (-1): nothing is pending, the high watermark.
        let lso = if fetched.last_stable_offset.0 >= 0 {
            fetched.last_stable_offset
        } else {
            fetched.high_watermark
        };
        let aborted: Vec<(i64, Offset)> =
            fetched.aborted_transactions.iter().map(|a| (a.producer_id, a.first_offset)).collect();
        let kept = committed_batches(&fetched.records, at, lso, &aborted, ask.max(1))
            .map_err(|(pos, e)| self.bad_bytes(pos, &e.to_string()))?;
        if !kept.bytes.is_empty() {
            let bytes = Bytes::from(kept.bytes);
            return Ok(Answered::Piece(answer_piece(from, kept.next, bytes, ask)));
        }
        if kept.next <= at || kept.next >= lso {
            return Ok(Answered::End);
        }
        Ok(Answered::From(kept.next))
    }

    /// Takes a Fetch of many partitions' answer for this partition's read from `from` (sent by
    /// [`crate::ClusterSource`]'s `prefetch`, which holds the flight `slot`): kept as a piece
    /// when it holds batches; the log end when it says so; anything else (an error, a
    /// response limit that left this partition out, every batch dropped as aborted) lands as
    /// failed, so the read sends its own Fetch as without the prefetch.
    pub(super) fn land_prefetched(
        &self,
        from: Offset,
        ask: usize,
        slot: &Arc<FlightSlot>,
        fetched: Result<FetchedPartition>,
        asked: Instant,
    ) {
        let key = self.key();
        let cap = self.piece_cap();
        let answered = fetched.and_then(|f| {
            self.learn_from_fetch(&f, asked);
            self.piece_of(&f, from, from, ask)
        });
        match answered {
            Ok(Answered::Piece(piece)) => {
                self.windows.landed(&key, from, slot, Some(piece), Landed::Piece, cap)
            }
            Ok(Answered::End) => self.windows.landed(&key, from, slot, None, Landed::Empty, cap),
            Ok(Answered::Nothing | Answered::From(_)) => {
                self.windows.landed(&key, from, slot, None, Landed::Failed, cap)
            }
            Err(e) => {
                log::debug!(
                    "{}-{}: fetch of many from {}: {e}",
                    self.topic,
                    self.partition,
                    from.0
                );
                self.windows.landed(&key, from, slot, None, Landed::Failed, cap)
            }
        }
    }

    /// The flight of a read from `cursor` for a Fetch of many partitions, with the bytes to
    /// ask: `None` when a kept piece or a Fetch in flight already serves it, or the log start
    /// last stated is past it.
    pub(super) fn claim_prefetch(&self, cursor: &ReadCursor) -> Option<(Arc<FlightSlot>, usize)> {
        let from = cursor.next_offset;
        if self.stated_bounds().is_some_and(|(start, end)| start > from || end <= from) {
            return None;
        }
        match self.windows.find(&self.key(), from, &Pass::NONE) {
            Found::Fetch(slot, _) => Some((slot, FIRST_WINDOW.min(self.fetch_cap()))),
            Found::Piece { .. } | Found::InFlight(_) => None,
        }
    }

    /// Where the whole batches of `buf` (a Fetch response's records) that hold `from` or later
    /// offsets start and end, and the offset after the last of them.
    fn whole_from(&self, buf: &[u8], from: Offset) -> Result<(usize, usize, Offset)> {
        let (mut start, mut pos, mut next) = (None, 0, from);
        while pos < buf.len() {
            let rest = &buf[pos..];
            let Some(h) = peek_entry(rest).map_err(|e| self.bad_bytes(pos, &e.to_string()))? else {
                break;
            };
            let size = h.total_size();
            if size == 0 || size > rest.len() {
                break; // A batch cut at the size limit.
            }
            let info =
                parse_batch_info(&rest[..size]).map_err(|e| self.bad_bytes(pos, &e.to_string()))?;
            if info.last_offset >= from {
                start.get_or_insert(pos);
                next = info.last_offset.plus(1);
            }
            pos += size;
        }
        let start = start.unwrap_or(pos);
        Ok((start, pos.max(start), next))
    }

    /// Room for a Fetch of `max_bytes` in the mount's fetch memory, held until dropped (nothing
    /// without a cap); waits for other fetches at most the request deadline.
    fn hold(&self, max_bytes: usize) -> Result<Option<Box<dyn std::any::Any + Send>>> {
        let Some(cap) = &self.fetch_memory else { return Ok(None) };
        match cap.memory.hold(max_bytes, Instant::now() + cap.wait) {
            Some(held) => Ok(Some(held)),
            None => Err(Error::Timeout {
                broker: self.leader_name(),
                what: format!(
                    "partition {}/{}: waiting for fetch memory ({} bytes asked, other fetches \
                     hold the memory budget of {} bytes)",
                    self.topic,
                    self.partition,
                    max_bytes,
                    cap.memory.limit()
                ),
                after_ms: u64::try_from(cap.wait.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// `e` naming this partition where the client's error names only a broker (a connection
    /// that failed or a deadline that passed), so the log line of a failed read says which
    /// partition it was reading: `broker B: partition T/P: Fetch: ...`.
    pub(super) fn named(&self, e: Error) -> Error {
        let part = format!("partition {}/{}", self.topic, self.partition);
        match e {
            Error::BrokerUnreachable { broker, op, source } => {
                Error::BrokerUnreachable { broker, op: format!("{part}: {op}"), source }
            }
            Error::Timeout { broker, what, after_ms } => {
                Error::Timeout { broker, what: format!("{part}: {what}"), after_ms }
            }
            Error::Protocol { broker, what } => {
                Error::Protocol { broker, what: format!("{part}: {what}") }
            }
            other => other,
        }
    }

    /// The first batches of `buf` (a Fetch response's records) holding `from` or a later
    /// offset, `max_bytes` of them at most (but at least one), as a chunk; and where the
    /// batches after them start in `buf`, when some follow.
    fn split(
        &self,
        buf: &[u8],
        from: Offset,
        max_bytes: usize,
    ) -> Result<(BatchChunk, Option<usize>)> {
        let mut out = Vec::new();
        let mut next = from;
        let mut pos = 0;
        let mut more = None;
        while pos < buf.len() {
            let rest = &buf[pos..];
            let Some(h) = peek_entry(rest).map_err(|e| self.bad_bytes(pos, &e.to_string()))? else {
                break;
            };
            let size = h.total_size();
            if size > rest.len() {
                break; // A batch cut at the size limit: the broker's way to say "more".
            }
            let entry = &rest[..size];
            let info = parse_batch_info(entry).map_err(|e| self.bad_bytes(pos, &e.to_string()))?;
            if info.last_offset < next {
                pos += size;
                continue; // Before the cursor (a fetch may start with the batch holding it).
            }
            if !out.is_empty() && out.len() + size > max_bytes {
                more = Some(pos);
                break;
            }
            pos += size;
            out.extend_from_slice(entry);
            next = info.last_offset.plus(1);
        }
        let next = if out.is_empty() { None } else { Some(ReadCursor::at(next)) };
        let chunk =
            BatchChunk { bytes: out, starts: Vec::new(), next, crc_checked: false, skipped: None };
        Ok((chunk, more))
    }

    /// The partition's leader as errors name it: its `HOST:PORT` as the cached Metadata says,
    /// or `leader of <topic>/<partition>` when none is known.
    fn leader_name(&self) -> String {
        let leader = self.client.cached_metadata().and_then(|m| {
            let leader = m.partition(&self.topic, i32::try_from(self.partition).ok()?)?.leader;
            m.brokers.get(&leader).map(ToString::to_string)
        });
        leader.unwrap_or_else(|| format!("leader of {}/{}", self.topic, self.partition))
    }

    /// Bytes in a Fetch response that do not frame a batch.
    pub(super) fn bad_bytes(&self, at: usize, what: &str) -> Error {
        Error::Protocol {
            broker: self.leader_name(),
            what: format!("Fetch response records at byte {at}: {what}"),
        }
    }
}
