//! The read window of a cluster partition: what Fetches a `read` sends, and what the mount keeps
//! of their answers so that other reads of the same batches send none.
//!
//! **Pieces.** Every Fetch answer a read or a prefetch got is kept as a [`Piece`]: the batches
//! a read from its first offset returns (whole batches, reading committed with the aborted
//! transactions already dropped), and the offset the read after them continues from. Any read
//! from an offset inside a piece is served from it, whichever handle of the partition asks: a
//! reopen of `by-offset/0`, the sizing of a stream and its first read, and N `tail -f`
//! followers of one partition cost one Fetch per window, not N. Batches below the high
//! watermark (reading committed, the last stable offset) never change, so this is what a
//! Fetch would answer; a piece is never empty, so a read served from it ends where the Fetch
//! answer ended and the read after it fetches from there, seeing whatever was produced since.
//! Not served when the log start offset last stated has passed the read's offset (retention
//! deleted it; the Fetch then says so).
//!
//! **Fetches in flight.** A read that finds no piece but a Fetch in flight from its offset (a
//! read's or a prefetch's) waits for that answer instead of sending its own; several readers
//! reaching the same offset at once (followers at the log end) send one Fetch. A prefetch is
//! a task of the mount's executor ([`FlightSlot::set_pending`]); a read that waits for one no
//! worker has started yet runs its Fetch itself, so no read waits for a queue.
//!
//! **The window.** Each partition keeps the reading positions of its last [`STREAM_SLOTS`]
//! readers ([`Stream`]): a read starting where one of them ended is sequential, and a reader
//! is prefetched for from its [`PREFETCH_AFTER`]th sequential read (the sizing of a stream,
//! a lookup's read and one background step, never is). A read that
//! is not (a random open, a probe) fetches [`FIRST_WINDOW`] (or what it asks, when less than
//! [`PROBE_ASK`]): the time to its first byte is one small Fetch. Each sequential read
//! doubles its reader's window, up to `max.partition.fetch.bytes` (and `fetch.max.bytes`),
//! and keeps the next windows in flight while the current one is read (a *prefetch*: up to
//! [`AHEAD_WINDOWS`] windows of batches fetched or in flight past the read, from the end of
//! what is already kept, never past the log end last stated, at most
//! [`FLIGHTS_PER_PARTITION`] at once). Where a prefetch in flight will end is not known: the
//! next one starts at its guessed end ([`guess_end`]: as the latest piece, a little short of
//! it), so that several are in flight across a network's round trip; on Kafka its answer
//! begins with the batch holding its offset, so a piece serves from that batch's base when it
//! is lower (the `from` of a piece may lie below the offset its Fetch asked); tansu's memory
//! engine answers with the batches after it ([`Framing`], learned from the answers). A guess
//! short of the end makes two pieces overlap (batches read twice); one past the end leaves a
//! gap that the reader reaching it fetches itself (a round trip), which is why guesses stay
//! short by the spread of answers' sizes, whatever the batches' framing. A read inside a
//! prefetch's guessed range waits for it, then looks again. A piece fetched from a guessed
//! offset (or continuing one) is [`Piece::guessed`].
//!
//! **Framing.** On a broker whose batches never change (Kafka) every piece's batches are the
//! log's. A broker that frames each Fetch answer anew (tansu's SQLite engine: one batch from
//! the offset asked) answers two Fetches from different offsets with batches that overlap:
//! a piece fetched for a read from 300 holds one batch from 300 on, and a reader whose last
//! batch ended at 655 would get records 300–654 again from it. So a piece serves a read from
//! its own Fetch's offset ([`Piece::fetched_for`]) whatever its first batch, and any other
//! read only when the batch holding the read's offset starts at or after it; otherwise the
//! read passes over it ([`Pass`]) and fetches for itself. A guessed piece framed across a
//! read's offset also stops guesses for the partition ([`Guesses`]: one guessed prefetch at a
//! time until a read has shown that they continue the answers before them), as each would
//! cost a Fetch and serve nothing. A prefetch asks `fetch.min.bytes` with `fetch.max.wait.ms`
//! when `fetch.min.bytes` is above 1 (any batch answers 1, and tansu holds a Fetch for its
//! whole wait); a read the caller waits for always asks for an answer at once (a read at the
//! log end must not wait).
//!
//! **Memory.** Every Fetch (a read's or a prefetch's) holds its size in the mount's fetch
//! memory (`--memory-budget`) while in flight: a read waits for room (at most the request
//! deadline), a prefetch that finds no room at once is not sent. Kept pieces are at most
//! [`PIECE_WINDOWS`] times `max.partition.fetch.bytes`, and at most a quarter of the fetch
//! memory's limit ([`super::ClusterPartition::piece_cap`]); the least recently used go first.
//!
//! **Locks.** One mutex per mount guards the pieces, streams and flights; under it only
//! reference counts are taken (a piece's bytes are shared [`Bytes`]) and offsets compared: the
//! copy into a read's answer, the batch parsing and every request happen outside it.
//!
//! Invariant: pieces of one partition are kept sorted by first offset; every byte of a piece is
//! a whole batch holding an offset at or past its first offset and below its `next`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bytes::Bytes;

use topicfs_format::Offset;
use topicfs_source::sync::lock;

/// A read asking for less than this (a probe of one batch) fetches only what it asks.
pub(super) const PROBE_ASK: usize = 4096;

/// What a read that is not sequential fetches (the view's read size): its time to first byte.
pub(super) const FIRST_WINDOW: usize = 64 << 10;

/// Reading positions kept per partition (see [`Stream`]).
const STREAM_SLOTS: usize = 16;

/// Windows a sequential reader keeps fetched or in flight past its read (see module docs):
/// the one it reads and [`FLIGHTS_PER_PARTITION`] in flight. `scripts/bench --cluster-net` at
/// a 20 ms round trip (1 M records in batches of 5,000, 1 MiB windows) read 0.25 of its
/// loopback rate with one prefetch in flight, 0.36 with four, 0.45 with six, 0.55–0.61 with
/// eight (BENCHMARKS.md).
pub(super) const AHEAD_WINDOWS: usize = 9;

/// Sequential reads a reader makes before its next windows are prefetched.
pub(super) const PREFETCH_AFTER: u32 = 2;

/// Prefetches in flight per partition at most.
pub(super) const FLIGHTS_PER_PARTITION: usize = 8;

/// Without a fetch memory: kept piece bytes at most, in `max.partition.fetch.bytes`.
pub(super) const PIECE_WINDOWS: usize = 16;

/// A partition's pieces as one reading position of it: (topic, partition, reads committed).
pub(super) type Key = (String, u32, bool);

/// One kept Fetch answer (see module docs).
pub(super) struct Piece {
    /// A read from here returns `bytes`.
    pub from: Offset,
    /// Where the read after `bytes` continues.
    pub next: Offset,
    /// Whole batches, the first holding `from` or a later offset.
    pub bytes: Bytes,
    /// Fetched from a guessed offset (see module docs): its batches may be framed otherwise
    /// than another piece's, so a read entering it checks that its first batch starts at the
    /// read's offset.
    pub guessed: bool,
    /// The bytes its Fetch asked (its own size when not known).
    pub asked: usize,
    /// The offset of the read whose answer this is (the Fetch's offset): a read from there
    /// gets what a Fetch of its own would, whatever the first batch holds. A read from any
    /// other offset is served only from a batch starting at or after it (see module docs).
    pub fetched_for: Offset,
    /// Batches in `bytes` (0 when not counted): with the offsets it spans, the records of a
    /// batch, which the guesses of where prefetches end allow for ([`guess_end`]).
    pub batches: usize,
    /// The base offset of its first batch (`from` when not known): above `fetched_for` when
    /// the broker answered a Fetch from inside a batch with the batches after it
    /// ([`Framing::After`]).
    pub first_base: Offset,
    /// When it was last served (the mount's tick), for least-recently-used dropping.
    used: u64,
}

impl Piece {
    /// A piece of `bytes` read from `from`, continued at `next`.
    pub fn new(from: Offset, next: Offset, bytes: Bytes) -> Piece {
        let asked = bytes.len();
        Piece {
            from,
            next,
            bytes,
            guessed: false,
            asked,
            fetched_for: from,
            batches: 0,
            first_base: from,
            used: 0,
        }
    }

    /// Whether this piece makes `other` unneeded: it holds all of it, answers the same read
    /// (a piece fetched for another read may be framed across the offsets `other` serves, see
    /// module docs), and is not guessed unless `other` is too.
    fn covers(&self, other: &Piece) -> bool {
        self.from <= other.from
            && other.next <= self.next
            && self.fetched_for == other.fetched_for
            && (!self.guessed || other.guessed)
    }
}

/// One reader's position and window: where its next sequential read starts, and the size of
/// the next Fetch for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stream {
    /// The offset a sequential read asks next.
    pub next: Offset,
    /// The bytes of its next Fetch.
    pub window: usize,
    /// Reads so far that continued the one before.
    pub sequential: u32,
}

/// What a Fetch in flight ended with, for the reads that waited for it.
#[derive(Clone, Debug)]
pub(super) enum Landed {
    /// Batches, kept as a piece: the waiting read is served from the pieces.
    Piece,
    /// Nothing from there (the log end): the waiting read answers empty.
    Empty,
    /// The Fetch failed: the waiting read sends its own (and gets the error itself).
    Failed,
}

/// A Fetch in flight from `from`; readers that wait for it hold `slot`.
struct Flight {
    from: Offset,
    prefetch: bool,
    slot: Arc<FlightSlot>,
    /// A prefetch's bytes asked (0 for a read's own Fetch).
    ask: usize,
    /// A prefetch from a guessed offset (the guessed end of another).
    guessed: bool,
    /// Where a prefetch probably ends ([`guess_end`]): reads below it wait for it, and the
    /// next prefetch starts there. `None`: not guessed (a read's own Fetch, or nothing kept
    /// to guess from).
    until: Option<Offset>,
}

impl Flight {
    /// Whether a read from `at` waits for this Fetch: it starts there, or probably holds it
    /// (a guessed one also a little below its start, unless the broker answers a Fetch from
    /// inside a batch with the batches after it: its answer begins with the batch holding its
    /// offset, which may start before it).
    fn covers(&self, at: Offset, framing: Framing) -> bool {
        let Some(until) = self.until else { return self.from == at };
        let below =
            if self.guessed && framing != Framing::After { (until.0 - self.from.0) / 8 } else { 0 };
        self.from.0.saturating_sub(below) <= at.0 && at < until
    }
}

/// What the latest kept piece of a partition says of its answers, to guess ends by
/// ([`guess_end`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Model {
    /// Offsets it spans.
    records: i64,
    /// Its bytes.
    bytes: usize,
    /// The bytes its Fetch asked (0: its size).
    asked: usize,
    /// Its batches (0: not counted).
    batches: usize,
}

/// How a partition's broker answers a Fetch from an offset inside a batch, as its answers
/// showed (see [`guess_end`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Framing {
    /// Not seen yet: taken as [`Framing::After`], where a guess past the end costs most.
    #[default]
    Unknown,
    /// With the batch holding the offset (Kafka): a guess inside the batch after an answer's
    /// end still continues it.
    Holding,
    /// With the batches starting after it (tansu's memory engine): a guess inside the batch
    /// after an answer's end skips that batch, a gap the reader fills with a Fetch of its own.
    After,
}

/// The part of a guessed answer's records a guess stays short of whatever the batches: answers
/// of whole batches vary as their batches' sizes do, and a guess past an answer's end costs a
/// round trip where one short of it costs the bytes read twice.
const GUESS_SHORT: i64 = 32;

/// Where a Fetch of `ask` bytes from `from` probably ends, like the latest kept piece
/// (`model`): an answer holds as many whole batches as fit its ask (a broker may add the batch
/// that passes it: tansu), so the next one holds at least about `n` records, the piece's
/// records scaled by `ask` over the larger of its ask and its size. Answers vary as their
/// batches' sizes do: the guess is `n / GUESS_SHORT` short of `from + n`, since one past the
/// end leaves a gap that the reader fills with a Fetch of its own when it gets there (a round
/// trip) and one short of it makes two answers overlap (bytes read twice). On a broker that
/// answers a Fetch from inside a batch with that batch ([`Framing::Holding`], Kafka) a guess
/// inside the batch after the end still continues the answer before, so the guess is short
/// only by what that exceeds a batch (`b`, the piece's records per batch; not at all with
/// batches about half the ask, where being short would fetch the last batch of the answer
/// before again). At least one record past `from`. `None` without a piece to guess from.
fn guess_end(from: Offset, ask: usize, model: Model, framing: Framing) -> Option<Offset> {
    let Model { records, bytes, asked, batches } = model;
    let asked = asked.max(bytes);
    if records <= 0 || asked == 0 {
        return None;
    }
    let n = (ask as u128).saturating_mul(u128::try_from(records).ok()?) / asked as u128;
    let n = i64::try_from(n).ok()?.max(1);
    let short = match (framing, i64::try_from(batches)) {
        (Framing::Holding, Ok(b)) if b > 0 => (n / GUESS_SHORT - records / b).max(0),
        (Framing::Holding, _) => 0,
        (Framing::Unknown | Framing::After, _) => n / GUESS_SHORT,
    };
    let n = n.saturating_sub(short).max(1);
    Some(Offset(from.0.saturating_add(n)))
}

/// A prefetch's Fetch not started yet, run with its slot and who runs it.
pub(super) type PendingFetch = Box<dyn FnOnce(&Arc<FlightSlot>, RunBy) + Send>;

/// Who runs a [`PendingFetch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RunBy {
    /// A worker of the executor: nobody waits for it yet.
    Worker,
    /// A read waiting for its slot: it asks for an answer at once.
    Reader,
    /// Nobody: its task was dropped unstarted (the executor shut down); it lands as failed
    /// without a Fetch.
    Dropped,
}

/// Where a Fetch in flight reports how it ended.
#[derive(Default)]
pub(super) struct FlightSlot {
    state: Mutex<SlotState>,
    done: Condvar,
}

#[derive(Default)]
struct SlotState {
    landed: Option<Landed>,
    /// A prefetch queued on the executor and not started yet: whoever takes it first runs it
    /// (a worker, or a read that waits for the slot, which so never waits for a queue).
    pending: Option<PendingFetch>,
}

impl FlightSlot {
    /// How the Fetch ended, waiting at most `wait` (`None`: not ended by then). A prefetch
    /// nobody started yet is run here, on the caller ([`FlightSlot::run_pending`]).
    pub fn wait(self: &Arc<Self>, wait: Duration) -> Option<Landed> {
        let deadline = std::time::Instant::now() + wait;
        let mut st = lock(&self.state);
        while st.landed.is_none() {
            if let Some(fetch) = st.pending.take() {
                drop(st);
                fetch(self, RunBy::Reader);
                st = lock(&self.state);
                continue;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return None;
            }
            st = match self.done.wait_timeout(st, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        st.landed.clone()
    }

    /// Makes `fetch` the slot's Fetch, run by whoever comes first: [`FlightSlot::run_pending`]
    /// (a worker) or a read waiting for the slot.
    pub fn set_pending(&self, fetch: PendingFetch) {
        lock(&self.state).pending = Some(fetch);
        self.done.notify_all();
    }

    /// Runs the slot's Fetch if nobody started it yet.
    pub fn run_pending(self: &Arc<Self>, by: RunBy) {
        let fetch = lock(&self.state).pending.take();
        if let Some(fetch) = fetch {
            fetch(self, by);
        }
    }

    fn set(&self, how: Landed) {
        lock(&self.state).landed = Some(how);
        self.done.notify_all();
    }
}

/// One partition's pieces, readers and flights.
#[derive(Default)]
struct PartWindow {
    pieces: Vec<Piece>,
    streams: VecDeque<Stream>,
    flights: Vec<Flight>,
    /// Whether guessed prefetches serve this partition's readers (see [`Guesses`]).
    guesses: Guesses,
    /// How the broker answers a Fetch from inside a batch, as the latest answer that showed
    /// it says.
    framing: Framing,
}

/// What a partition's reads showed of prefetches from guessed offsets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Guesses {
    /// Nothing yet: one guessed prefetch at a time (a probe), until a read shows whether its
    /// answer continues the answers before it.
    #[default]
    Unproven,
    /// A guessed piece served a read: as many as the windows ahead allow.
    Proven,
    /// A guessed piece was framed across a read's offset (the broker frames each Fetch's
    /// batches anew, so a guessed start never continues another answer): no more guesses.
    Refused,
}

/// The mount's pieces, readers and Fetches in flight (see module docs).
#[derive(Default)]
pub(super) struct Windows {
    state: Mutex<WindowsState>,
}

#[derive(Default)]
struct WindowsState {
    parts: HashMap<Key, PartWindow>,
    /// Bytes of every kept piece.
    bytes: usize,
    tick: u64,
}

/// What a read found (see [`Windows::find`]).
pub(super) enum Found {
    /// A piece holds the offset: its bytes (shared), its first offset, where the read after
    /// them continues, whether it was fetched from a guessed offset ([`Piece::guessed`]) and
    /// for which read ([`Piece::fetched_for`]).
    Piece { bytes: Bytes, from: Offset, next: Offset, guessed: bool, fetched_for: Offset },
    /// A Fetch from the offset is in flight: wait on it, then look again.
    InFlight(Arc<FlightSlot>),
    /// Neither: the read fetches, reporting to this slot (registered as in flight); with the
    /// first offset of the next kept piece past the offset, if any (a gap before a piece
    /// fetched ahead needs only a small Fetch).
    Fetch(Arc<FlightSlot>, Option<Offset>),
}

/// What a read passes over in [`Windows::find`]: pieces and flights from guessed offsets
/// (`guessed`), and the pieces it found framed across its offset (by first offset and next).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Pass<'a> {
    pub guessed: bool,
    pub pieces: &'a [(Offset, Offset)],
}

impl Pass<'_> {
    /// Nothing passed over.
    pub const NONE: Pass<'static> = Pass { guessed: false, pieces: &[] };

    fn skips(&self, p: &Piece) -> bool {
        (self.guessed && p.guessed) || self.pieces.contains(&(p.from, p.next))
    }
}

impl Windows {
    /// The piece holding `from` for partition `key` (the one reaching furthest; not one `pass`
    /// passes over), a Fetch in flight that probably holds `from` (not a guessed one when
    /// `pass.guessed`), or else registers the caller's own Fetch from `from`.
    pub fn find(&self, key: &Key, from: Offset, pass: &Pass) -> Found {
        let mut st = lock(&self.state);
        st.tick += 1;
        let tick = st.tick;
        let part = st.parts.entry(key.clone()).or_default();
        let best = part
            .pieces
            .iter_mut()
            .filter(|p| p.from <= from && from < p.next && !pass.skips(p))
            .max_by_key(|p| p.next);
        if let Some(p) = best {
            p.used = tick;
            return Found::Piece {
                bytes: p.bytes.clone(),
                from: p.from,
                next: p.next,
                guessed: p.guessed,
                fetched_for: p.fetched_for,
            };
        }
        let framing = part.framing;
        let waits = |f: &&Flight| f.covers(from, framing) && !(pass.guessed && f.guessed);
        if let Some(f) = part.flights.iter().find(waits) {
            return Found::InFlight(Arc::clone(&f.slot));
        }
        let slot = Arc::new(FlightSlot::default());
        let flight = Flight {
            from,
            prefetch: false,
            slot: Arc::clone(&slot),
            ask: 0,
            guessed: false,
            until: None,
        };
        part.flights.push(flight);
        let ahead = part.pieces.iter().map(|p| p.from).filter(|f| *f > from).min();
        Found::Fetch(slot, ahead)
    }

    /// The reader whose read from `from` is sequential (one ended there), moved to `next` with
    /// its window doubled (up to `cap`); or the reader already at `next`, unchanged; or a new
    /// reader at `next` with `first` as its window.
    /// Returns the reader (its count of sequential reads says whether to prefetch).
    pub fn advance(
        &self,
        key: &Key,
        from: Offset,
        next: Offset,
        first: usize,
        cap: usize,
    ) -> Stream {
        let mut st = lock(&self.state);
        let part = st.parts.entry(key.clone()).or_default();
        let found = part.streams.iter().position(|s| s.next == from);
        let stream = match found.and_then(|i| part.streams.remove(i)) {
            Some(s) => Stream {
                next,
                window: s.window.saturating_mul(2).min(cap).max(first.min(cap)),
                sequential: s.sequential.saturating_add(1),
            },
            // A read that lands where a reader already is (a second follower) joins it: one
            // reader per position, so two readers at one offset are one stream of Fetches.
            None => match part.streams.iter().position(|s| s.next == next) {
                Some(i) => part.streams.remove(i).unwrap_or(Stream {
                    next,
                    window: first.min(cap).max(1),
                    sequential: 0,
                }),
                None => Stream { next, window: first.min(cap).max(1), sequential: 0 },
            },
        };
        part.streams.retain(|s| s.next != next);
        if part.streams.len() >= STREAM_SLOTS {
            part.streams.pop_front();
        }
        part.streams.push_back(stream);
        stream
    }

    /// The window of the reader whose sequential read starts at `from`, if one's does.
    pub fn window_of(&self, key: &Key, from: Offset) -> Option<usize> {
        let st = lock(&self.state);
        st.parts.get(key)?.streams.iter().find(|s| s.next == from).map(|s| s.window)
    }

    /// Where a prefetch of `window` bytes for a reader now at `from` starts: the end of the
    /// kept pieces and flights that follow `from` without a gap, when fewer than `ahead` bytes
    /// lie between; `None` when enough is kept or in flight, or the partition has
    /// [`FLIGHTS_PER_PARTITION`] prefetches in flight. Where a prefetch in flight will end is
    /// not known: its guess ([`guess_end`]) stands for it, so that several are in flight at once
    /// (a read's own Fetch has none: nothing starts past it). Registers the prefetch as in
    /// flight, with its own guess (the caller reports its end through [`Windows::landed`],
    /// marking the piece [`Piece::guessed`] when the start was: the third value).
    pub fn prefetch_from(
        &self,
        key: &Key,
        from: Offset,
        window: usize,
        ahead: usize,
        end: Offset,
    ) -> Option<(Offset, Arc<FlightSlot>, bool)> {
        let mut st = lock(&self.state);
        let part = st.parts.get_mut(key)?;
        if part.flights.iter().filter(|f| f.prefetch).count() >= FLIGHTS_PER_PARTITION {
            return None;
        }
        // The records per byte of the partition's latest piece, to guess ends by.
        let model = part
            .pieces
            .iter()
            .max_by_key(|p| p.next)
            .map(|p| Model {
                records: p.next.0 - p.from.0,
                bytes: p.bytes.len(),
                asked: p.asked,
                batches: p.batches,
            })
            .unwrap_or_default();
        let framing = part.framing;
        let mut at = from;
        let mut kept = 0usize;
        let mut guessed = false;
        loop {
            if kept >= ahead {
                return None;
            }
            if let Some(p) =
                part.pieces.iter().filter(|p| p.from <= at && at < p.next).max_by_key(|p| p.next)
            {
                // The part of the piece past `at`, by offsets (batches are about alike).
                let span = (p.next.0 - p.from.0).max(1);
                let past = (p.next.0 - at.0).clamp(0, span);
                let share = u128::try_from(past).unwrap_or(0) * p.bytes.len() as u128
                    / u128::try_from(span).unwrap_or(1);
                kept = kept.saturating_add(usize::try_from(share).unwrap_or(usize::MAX));
                at = p.next;
                // The end of a guessed piece is a batch boundary of its framing only.
                guessed = p.guessed;
            } else if let Some(f) = part.flights.iter().find(|f| f.covers(at, framing)) {
                // Where that Fetch ends is not known yet: its guess, if it has one.
                let until = f.until?;
                kept = kept.saturating_add(f.ask);
                at = until;
                guessed = true;
            } else {
                break;
            }
        }
        if at >= end {
            return None;
        }
        if guessed {
            let unproven =
                part.flights.iter().any(|f| f.guessed) || part.pieces.iter().any(|p| p.guessed);
            match part.guesses {
                Guesses::Refused => return None,
                Guesses::Unproven if unproven => return None,
                Guesses::Unproven | Guesses::Proven => {}
            }
        }
        let until = guess_end(at, window, model, framing).map(|u| u.min(end));
        let slot = Arc::new(FlightSlot::default());
        let flight = Flight {
            from: at,
            prefetch: true,
            slot: Arc::clone(&slot),
            ask: window,
            guessed,
            until,
        };
        part.flights.push(flight);
        Some((at, slot, guessed))
    }

    /// Ends the Fetch from `from` registered for `key`: keeps `piece` (when some), drops the
    /// least recently used pieces beyond `cap` bytes, and wakes the reads that waited.
    pub fn landed(
        &self,
        key: &Key,
        from: Offset,
        slot: &Arc<FlightSlot>,
        piece: Option<Piece>,
        how: Landed,
        cap: usize,
    ) {
        let dropped = {
            let mut st = lock(&self.state);
            st.tick += 1;
            let tick = st.tick;
            let mut added = 0;
            let mut dropped = Vec::new();
            if let Some(part) = st.parts.get_mut(key) {
                part.flights.retain(|f| !(f.from == from && Arc::ptr_eq(&f.slot, slot)));
                if let Some(mut piece) = piece {
                    piece.used = tick;
                    if piece.batches > 0 && piece.first_base > piece.fetched_for {
                        part.framing = Framing::After;
                    } else if piece.batches > 0 && piece.first_base < piece.fetched_for {
                        part.framing = Framing::Holding;
                    }
                    // A piece another one covers whole is not needed.
                    let mut i = 0;
                    while i < part.pieces.len() {
                        let p = &part.pieces[i];
                        if piece.covers(p) {
                            added -= p.bytes.len() as isize;
                            dropped.push(part.pieces.remove(i));
                        } else {
                            i += 1;
                        }
                    }
                    let covered = part.pieces.iter().any(|p| p.covers(&piece));
                    if covered {
                        dropped.push(piece);
                    } else {
                        added += piece.bytes.len() as isize;
                        let at = part.pieces.partition_point(|p| p.from <= piece.from);
                        part.pieces.insert(at, piece);
                    }
                }
            }
            st.bytes = st.bytes.saturating_add_signed(added);
            while st.bytes > cap {
                let Some(p) = st.evict_oldest() else { break };
                dropped.push(p);
            }
            dropped
        };
        slot.set(how);
        drop(dropped); // Their bytes and holds are released outside the lock.
    }

    /// A reader of `key` has read up to `next`: its pieces ending there or before are dropped
    /// first when the kept pieces pass their cap (before pieces fetched ahead of a reader,
    /// which least-recently-used order would drop first: they were fetched earliest).
    pub fn passed(&self, key: &Key, next: Offset) {
        let mut st = lock(&self.state);
        if let Some(part) = st.parts.get_mut(key) {
            for p in part.pieces.iter_mut().filter(|p| p.next <= next) {
                p.used = 0;
            }
        }
    }

    /// No more prefetches from guessed offsets for `key`: a read found a guessed piece whose
    /// first batch holds offsets below the read's (the broker frames batches per Fetch, so
    /// such pieces would cost a Fetch each and serve nothing).
    pub fn refuse_guesses(&self, key: &Key) {
        lock(&self.state).parts.entry(key.clone()).or_default().guesses = Guesses::Refused;
    }

    /// A guessed piece of `key` served a read from inside it, its first batch starting at the
    /// read's offset: guessed prefetches continue the broker's answers (unless refused since).
    pub fn guess_served(&self, key: &Key) {
        let mut st = lock(&self.state);
        let part = st.parts.entry(key.clone()).or_default();
        if part.guesses == Guesses::Unproven {
            part.guesses = Guesses::Proven;
        }
    }

    /// How `key`'s broker answers a Fetch from inside a batch, as its answers showed.
    #[cfg(test)]
    fn framing(&self, key: &Key) -> Framing {
        lock(&self.state).parts.get(key).map_or(Framing::Unknown, |p| p.framing)
    }

    /// Drops every kept piece of the mount.
    #[cfg(test)]
    pub fn drop_all(&self) {
        let dropped: Vec<Piece> = {
            let mut st = lock(&self.state);
            st.bytes = 0;
            st.parts.values_mut().flat_map(|p| std::mem::take(&mut p.pieces)).collect()
        };
        drop(dropped);
    }

    /// Drops the pieces of `key` (the partition's log start passed them, or its reads failed).
    pub fn forget(&self, key: &Key) {
        let dropped: Vec<Piece> = {
            let mut st = lock(&self.state);
            let taken = st.parts.get_mut(key).map(|p| std::mem::take(&mut p.pieces));
            let taken = taken.unwrap_or_default();
            let bytes: usize = taken.iter().map(|p| p.bytes.len()).sum();
            st.bytes = st.bytes.saturating_sub(bytes);
            taken
        };
        drop(dropped);
    }

    /// Bytes of every kept piece.
    #[cfg(test)]
    pub fn kept_bytes(&self) -> usize {
        lock(&self.state).bytes
    }
}

impl WindowsState {
    fn evict_oldest(&mut self) -> Option<Piece> {
        let (key, i) = self
            .parts
            .iter()
            .flat_map(|(k, part)| part.pieces.iter().enumerate().map(move |(i, p)| (p.used, k, i)))
            .min_by_key(|(used, _, _)| *used)
            .map(|(_, k, i)| (k.clone(), i))?;
        let piece = self.parts.get_mut(&key)?.pieces.remove(i);
        self.bytes = self.bytes.saturating_sub(piece.bytes.len());
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        ("t".to_string(), 0, false)
    }

    fn piece(from: i64, next: i64, len: usize) -> Piece {
        Piece::new(Offset(from), Offset(next), Bytes::from(vec![0u8; len]))
    }

    #[test]
    fn a_sequential_reader_doubles_its_window_up_to_the_cap_and_a_random_one_starts_small() {
        let w = Windows::default();
        let k = key();
        let cap = 1 << 20;
        let mut sizes = Vec::new();
        let mut at = Offset(0);
        for _ in 0..7 {
            let s = w.advance(&k, at, Offset(at.0 + 100), FIRST_WINDOW, cap);
            sizes.push(s.window);
            at = s.next;
        }
        assert_eq!(sizes, [64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 1 << 20, 1 << 20]);
        // A read elsewhere (a random open) starts again at the first window.
        let s = w.advance(&k, Offset(50_000), Offset(50_100), FIRST_WINDOW, cap);
        assert_eq!((s.window, s.sequential), (FIRST_WINDOW, 0));
        // The first reader goes on where it was.
        let s = w.advance(&k, at, Offset(at.0 + 100), FIRST_WINDOW, cap);
        assert_eq!((s.window, s.sequential), (1 << 20, 7));
    }

    #[test]
    fn a_read_inside_a_piece_is_served_and_one_from_a_fetch_in_flight_waits_for_it() {
        let w = Windows::default();
        let k = key();
        let Found::Fetch(slot, _) = w.find(&k, Offset(0), &Pass::NONE) else {
            panic!("nothing kept yet")
        };
        // A second reader of offset 0 meanwhile waits for that Fetch.
        let Found::InFlight(waited) = w.find(&k, Offset(0), &Pass::NONE) else {
            panic!("not in flight")
        };
        assert!(Arc::ptr_eq(&slot, &waited));
        w.landed(&k, Offset(0), &slot, Some(piece(0, 10, 1000)), Landed::Piece, usize::MAX);
        assert!(matches!(waited.wait(Duration::from_secs(1)), Some(Landed::Piece)));
        for at in [0, 5, 9] {
            let Found::Piece { next, bytes, .. } = w.find(&k, Offset(at), &Pass::NONE) else {
                panic!("{at}")
            };
            assert_eq!((next, bytes.len()), (Offset(10), 1000));
        }
        assert!(matches!(w.find(&k, Offset(10), &Pass::NONE), Found::Fetch(..)));
        // Another partition shares nothing.
        assert!(matches!(
            w.find(&("t".to_string(), 1, false), Offset(0), &Pass::NONE),
            Found::Fetch(..)
        ));
        assert!(matches!(
            w.find(&("t".to_string(), 0, true), Offset(0), &Pass::NONE),
            Found::Fetch(..)
        ));
    }

    #[test]
    fn a_read_waiting_for_a_prefetch_no_worker_started_runs_it_itself_and_only_once() {
        let w = Arc::new(Windows::default());
        let k = key();
        let Found::Fetch(slot, _) = w.find(&k, Offset(0), &Pass::NONE) else { panic!() };
        w.landed(&k, Offset(0), &slot, Some(piece(0, 100, 10_000)), Landed::Piece, usize::MAX);
        let (at, slot, _) = w.prefetch_from(&k, Offset(50), 4_000, 8_000, Offset(1000)).unwrap();
        // Queued on an executor whose workers are all busy: a read reaching it runs it.
        let runs = Arc::new(Mutex::new(Vec::new()));
        let (ran, windows, kk) = (Arc::clone(&runs), Arc::clone(&w), k.clone());
        slot.set_pending(Box::new(move |slot: &Arc<FlightSlot>, by: RunBy| {
            lock(&ran).push(by);
            let piece = Some(piece(100, 200, 10_000));
            windows.landed(&kk, at, slot, piece, Landed::Piece, usize::MAX);
        }));
        let Found::InFlight(waited) = w.find(&k, Offset(100), &Pass::NONE) else { panic!() };
        // Never landed by anyone else: without running it, this wait would time out.
        assert!(matches!(waited.wait(Duration::from_secs(30)), Some(Landed::Piece)));
        // The worker that gets to it later finds nothing to run.
        slot.run_pending(RunBy::Worker);
        slot.run_pending(RunBy::Dropped);
        assert_eq!(*lock(&runs), [RunBy::Reader]);
        assert!(matches!(w.find(&k, Offset(150), &Pass::NONE), Found::Piece { .. }));
    }

    #[test]
    fn prefetches_start_at_the_end_of_what_is_kept_and_stop_at_the_log_end() {
        let w = Windows::default();
        let k = key();
        let Found::Fetch(slot, _) = w.find(&k, Offset(0), &Pass::NONE) else { panic!() };
        w.landed(&k, Offset(0), &slot, Some(piece(0, 100, 10_000)), Landed::Piece, usize::MAX);
        // A reader at 50 has 5,000 bytes kept past it: 8,000 ahead wants more, from 100.
        let (at, slot, _) = w.prefetch_from(&k, Offset(50), 4_000, 8_000, Offset(1000)).unwrap();
        assert_eq!(at, Offset(100));
        // In flight, with 5,000 + 4,000 bytes past 50: enough.
        assert!(w.prefetch_from(&k, Offset(50), 4_000, 8_000, Offset(1000)).is_none());
        w.landed(&k, at, &slot, Some(piece(100, 200, 10_000)), Landed::Piece, usize::MAX);
        // Enough kept past 50 now.
        assert!(w.prefetch_from(&k, Offset(50), 4_000, 8_000, Offset(1000)).is_none());
        // Nothing past the log end.
        assert!(w.prefetch_from(&k, Offset(150), 4_000, 50_000, Offset(200)).is_none());
    }

    #[test]
    fn a_second_prefetch_starts_at_the_guessed_end_of_the_one_in_flight() {
        let w = Windows::default();
        let k = key();
        let Found::Fetch(slot, _) = w.find(&k, Offset(3), &Pass::NONE) else { panic!() };
        // A broker answering a Fetch from inside a batch with that batch (Kafka): 100 records
        // in 10,000 bytes, 100 bytes a record, in batches of 25.
        let mut first = piece(0, 100, 10_000);
        (first.batches, first.fetched_for) = (4, Offset(3));
        w.landed(&k, Offset(3), &slot, Some(first), Landed::Piece, usize::MAX);
        assert_eq!(w.framing(&k), Framing::Holding);
        // A window of 10,000 bytes from 100 probably ends at 200 (100 records, as the last).
        let (first, one, _) =
            w.prefetch_from(&k, Offset(50), 10_000, 25_000, Offset(1000)).unwrap();
        assert_eq!(first, Offset(100));
        let (second, two, guessed) =
            w.prefetch_from(&k, Offset(50), 10_000, 25_000, Offset(1000)).unwrap();
        assert_eq!(second, Offset(200));
        assert!(guessed, "started at a guess");
        // 5,000 bytes kept past 50 and two windows in flight: 25,000 ahead, enough.
        assert!(w.prefetch_from(&k, Offset(50), 10_000, 25_000, Offset(1000)).is_none());
        // A read inside either guess waits for its Fetch (the guessed one also a little below
        // its start: 200 - 100/8); one past both fetches itself.
        assert!(
            matches!(w.find(&k, Offset(150), &Pass::NONE), Found::InFlight(s) if Arc::ptr_eq(&s, &one))
        );
        assert!(
            matches!(w.find(&k, Offset(250), &Pass::NONE), Found::InFlight(s) if Arc::ptr_eq(&s, &two))
        );
        assert!(
            matches!(w.find(&k, Offset(190), &Pass::NONE), Found::InFlight(s) if Arc::ptr_eq(&s, &one))
        );
        // Passing over guesses, the guessed one is not waited for.
        let Found::Fetch(own, _) = w.find(&k, Offset(250), &Pass { guessed: true, pieces: &[] })
        else {
            panic!()
        };
        w.landed(&k, Offset(250), &own, None, Landed::Failed, usize::MAX);
        assert!(matches!(w.find(&k, Offset(400), &Pass::NONE), Found::Fetch(..)));
        // The first ends at 190, short of the guess; the second's answer starts with the
        // batch holding 200, at 185: a read at 190 is served by the second.
        w.landed(&k, first, &one, Some(piece(100, 190, 9_000)), Landed::Piece, usize::MAX);
        assert!(
            matches!(w.find(&k, Offset(190), &Pass::NONE), Found::InFlight(s) if Arc::ptr_eq(&s, &two))
        );
        let mut guessed_piece = piece(185, 290, 10_500);
        guessed_piece.guessed = true;
        w.landed(&k, second, &two, Some(guessed_piece), Landed::Piece, usize::MAX);
        let Found::Piece { next, .. } = w.find(&k, Offset(187), &Pass::NONE) else { panic!() };
        assert_eq!(next, Offset(290), "the piece reaching furthest");
        let Found::Piece { next, guessed, .. } = w.find(&k, Offset(190), &Pass::NONE) else {
            panic!()
        };
        assert_eq!((next, guessed), (Offset(290), true));
        // A read finding the guessed piece framed across its offset passes over it: the
        // first piece serves 187, and 190 is fetched.
        let Found::Piece { next, guessed, .. } =
            w.find(&k, Offset(187), &Pass { guessed: true, pieces: &[] })
        else {
            panic!()
        };
        assert_eq!((next, guessed), (Offset(190), false));
        assert!(matches!(
            w.find(&k, Offset(190), &Pass { guessed: true, pieces: &[] }),
            Found::Fetch(..)
        ));
        // A guess past the log end stops there.
        let w = Windows::default();
        let Found::Fetch(slot, _) = w.find(&k, Offset(0), &Pass::NONE) else { panic!() };
        w.landed(&k, Offset(0), &slot, Some(piece(0, 100, 10_000)), Landed::Piece, usize::MAX);
        let (at, _, _) = w.prefetch_from(&k, Offset(90), 10_000, 30_000, Offset(120)).unwrap();
        assert_eq!(at, Offset(100));
        assert!(w.prefetch_from(&k, Offset(90), 10_000, 30_000, Offset(120)).is_none());
        assert!(matches!(w.find(&k, Offset(119), &Pass::NONE), Found::InFlight(_)));
        assert!(matches!(w.find(&k, Offset(120), &Pass::NONE), Found::Fetch(..)));
    }

    fn model(records: i64, bytes: usize, asked: usize, batches: usize) -> Model {
        Model { records, bytes, asked, batches }
    }

    #[test]
    fn guesses_stay_short_of_the_end_by_the_spread_of_answers_and_on_kafka_by_less_than_a_batch() {
        let mib = 1 << 20;
        // Small batches (linger.ms 0: 5 records a batch), 10,000 records in 1 MiB: 1/32 short.
        let small = model(10_000, mib, mib, 2_000);
        for framing in [Framing::Unknown, Framing::After] {
            assert_eq!(guess_end(Offset(0), mib, small, framing), Some(Offset(10_000 - 312)));
        }
        // Kafka answers a guess inside the batch after the end with that batch: a batch less.
        assert_eq!(guess_end(Offset(0), mib, small, Framing::Holding), Some(Offset(10_000 - 307)));
        // Batches of about half the ask: on Kafka not short at all (as before), ...
        let large = model(10_000, mib, mib, 2);
        assert_eq!(guess_end(Offset(0), mib, large, Framing::Holding), Some(Offset(10_000)));
        // ... on a broker that added the batch passing the ask (2 MiB for 1 MiB asked: tansu)
        // by the records of the ask only, then 1/32 short.
        let over = model(10_000, 2 * mib, mib, 2);
        assert_eq!(guess_end(Offset(100), mib, over, Framing::After), Some(Offset(100 + 4_844)));
        // Windows growing: scaled by the ask.
        assert_eq!(guess_end(Offset(0), 2 * mib, small, Framing::After), Some(Offset(19_375)));
        // At least one record; nothing to guess from without records.
        assert_eq!(guess_end(Offset(7), 10, small, Framing::After), Some(Offset(8)));
        assert_eq!(guess_end(Offset(7), mib, model(0, mib, mib, 0), Framing::After), None);
    }

    #[test]
    fn answers_show_how_the_broker_frames_a_fetch_from_inside_a_batch() {
        let k = key();
        let land = |w: &Windows, fetched_for: i64, first_base: i64| {
            let Found::Fetch(slot, _) = w.find(&k, Offset(fetched_for), &Pass::NONE) else {
                panic!()
            };
            let mut p = piece(first_base.min(fetched_for), fetched_for + 50, 5_000);
            (p.batches, p.first_base, p.fetched_for) = (5, Offset(first_base), Offset(fetched_for));
            w.landed(&k, Offset(fetched_for), &slot, Some(p), Landed::Piece, usize::MAX);
        };
        let w = Windows::default();
        assert_eq!(w.framing(&k), Framing::Unknown);
        // From a batch boundary: nothing shown.
        land(&w, 0, 0);
        assert_eq!(w.framing(&k), Framing::Unknown);
        // tansu's memory engine: a Fetch from 130 answers from the next batch, at 140.
        land(&w, 130, 140);
        assert_eq!(w.framing(&k), Framing::After);
        // The next prefetches: from the end of what is kept, then from 1/32 short of where
        // that one probably ends (50 records as the latest piece).
        let (at, _, guessed) =
            w.prefetch_from(&k, Offset(150), 5_000, 50_000, Offset(10_000)).unwrap();
        assert_eq!((at, guessed), (Offset(180), false));
        let (at, _, guessed) =
            w.prefetch_from(&k, Offset(150), 5_000, 50_000, Offset(10_000)).unwrap();
        assert_eq!((at, guessed), (Offset(180 + 50 - 1), true));
        // Kafka: the answer starts with the batch holding the offset.
        let w = Windows::default();
        land(&w, 130, 120);
        assert_eq!(w.framing(&k), Framing::Holding);
    }

    #[test]
    fn a_read_passes_over_the_pieces_it_names_and_a_piece_covers_only_one_answering_the_same_read()
    {
        let w = Windows::default();
        let k = key();
        // Fetched for a read from 30 (a batch from 30 to 60), then for one from 0 (to 40).
        let Found::Fetch(slot, _) = w.find(&k, Offset(30), &Pass::NONE) else { panic!() };
        w.landed(&k, Offset(30), &slot, Some(piece(30, 60, 3000)), Landed::Piece, usize::MAX);
        let Found::Fetch(slot, _) = w.find(&k, Offset(0), &Pass::NONE) else { panic!() };
        w.landed(&k, Offset(0), &slot, Some(piece(0, 40, 4000)), Landed::Piece, usize::MAX);
        // A read from 40 finds the piece fetched for 30 (the one reaching furthest) ...
        let Found::Piece { from, next, fetched_for, .. } = w.find(&k, Offset(40), &Pass::NONE)
        else {
            panic!()
        };
        assert_eq!((from, next, fetched_for), (Offset(30), Offset(60), Offset(30)));
        // ... and, passing over it, fetches for itself.
        let across = [(Offset(30), Offset(60))];
        let pass = Pass { guessed: false, pieces: &across };
        let Found::Fetch(slot, ahead) = w.find(&k, Offset(40), &pass) else { panic!() };
        assert_eq!(ahead, None);
        // Its answer (40 to 60) lies inside the piece fetched for 30, but is kept.
        w.landed(&k, Offset(40), &slot, Some(piece(40, 60, 2000)), Landed::Piece, usize::MAX);
        let Found::Piece { fetched_for, .. } = w.find(&k, Offset(40), &pass) else { panic!() };
        assert_eq!(fetched_for, Offset(40));
        assert_eq!(w.kept_bytes(), 9000);
        // A piece answering the same read and holding all of another replaces it.
        let Found::Fetch(slot, _) = w.find(&k, Offset(60), &Pass::NONE) else { panic!() };
        w.landed(&k, Offset(60), &slot, Some(piece(60, 70, 1000)), Landed::Piece, usize::MAX);
        let Found::Fetch(slot, _) = w.find(&k, Offset(70), &Pass::NONE) else { panic!() };
        let mut wider = piece(60, 90, 3000);
        wider.fetched_for = Offset(60);
        w.landed(&k, Offset(70), &slot, Some(wider), Landed::Piece, usize::MAX);
        assert_eq!(w.kept_bytes(), 12_000);
    }

    #[test]
    fn pieces_a_reader_passed_are_dropped_before_those_fetched_ahead_of_it() {
        let w = Windows::default();
        let k = key();
        // Fetched ahead first (the oldest), then read: 0..10 is read last.
        for i in [3, 2, 1, 0] {
            let Found::Fetch(slot, _) = w.find(&k, Offset(i * 10), &Pass::NONE) else { panic!() };
            let p = piece(i * 10, i * 10 + 10, 1000);
            w.landed(&k, Offset(i * 10), &slot, Some(p), Landed::Piece, usize::MAX);
        }
        assert!(matches!(w.find(&k, Offset(5), &Pass::NONE), Found::Piece { .. }));
        // The reader passed 10: over the cap, 0..10 goes, not 30..40 (least recently used).
        w.passed(&k, Offset(10));
        let Found::Fetch(slot, _) = w.find(&k, Offset(40), &Pass::NONE) else { panic!() };
        w.landed(&k, Offset(40), &slot, Some(piece(40, 50, 1000)), Landed::Piece, 4500);
        assert!(matches!(w.find(&k, Offset(35), &Pass::NONE), Found::Piece { .. }));
        assert!(matches!(w.find(&k, Offset(5), &Pass::NONE), Found::Fetch(..)));
    }

    #[test]
    fn kept_pieces_stay_within_the_cap_the_least_recently_used_dropped_first() {
        let w = Windows::default();
        let k = key();
        for i in 0..4 {
            let Found::Fetch(slot, _) = w.find(&k, Offset(i * 10), &Pass::NONE) else { panic!() };
            let p = piece(i * 10, i * 10 + 10, 1000);
            w.landed(&k, Offset(i * 10), &slot, Some(p), Landed::Piece, 2500);
            assert!(w.kept_bytes() <= 2500);
        }
        // The two newest are kept.
        assert!(matches!(w.find(&k, Offset(35), &Pass::NONE), Found::Piece { .. }));
        assert!(matches!(w.find(&k, Offset(25), &Pass::NONE), Found::Piece { .. }));
        assert!(matches!(w.find(&k, Offset(5), &Pass::NONE), Found::Fetch(..)));
        w.drop_all();
        assert_eq!(w.kept_bytes(), 0);
    }
}
