//! Records by key: `by-key/<key>[.json|.raw]`, `latest/<key>[.json]`, `keys`, and the topic's
//! `by-key/<key>[.json]`, over a partition's [`KeyIndex`].
//!
//! Names are keys as [`topicfs_format::key_name`] writes them (`user-42`, `%null`, `%a%2Fb`,
//! `%~<hashes>` for keys too long for a name), then the format suffix of `by-offset/`.
//!
//! * A **key stream** ([`KeyStream`]) is the rendering, in the stream's format, of the records
//!   holding the key, in offset order: the same bytes per record as a `by-offset/` stream
//!   (value lines, kcat `-J` JSON lines), or for `.raw` each batch holding such a record once,
//!   as stored. It grows as matching records are appended, like `by-offset/N`: its size is
//!   exact at every moment and only grows; rendered positions never change. Transactions as
//!   in every stream ([`Isolation`](crate::txn::Isolation)): `read_committed` hides aborted records (raw keeps them,
//!   as raw streams do) and shows nothing at or past the last stable offset yet.
//! * **latest** ([`latest_record`]) is the last visible record holding the key, rendered once
//!   at open; it does not exist (`ENOENT`) when there is none or when it is a tombstone (null
//!   value): the key's current value in a compacted topic.
//! * **keys** ([`KeysReader`]) lists each distinct key with a visible record as
//!   `<name>\t<count>\n` (count: its visible records, tombstones included), in key order
//!   (the null key first, then the keys' bytes, unsigned: a merge of the segments' key
//!   orders), generated as it is read: memory is the indexes', not the listing's. Its size is
//!   exact at `stat` for at most [`KEYS_SIZED_AT_STAT`] keys (generated once to count), else
//!   0 (not yet known).
//!
//! Memory of a key stream: 16 bytes per record it shows (where each record's rendering ends);
//! reads render the records they return again from the log.
//!
//! **Cleaner passes.** A key stream shows the log of the passes that ended before it looked its
//! records up ([`KeyStream::made_before_a_pass`]): the cache of streams and the filesystem's
//! pins give a new open a new stream once another pass ended, so it shows that pass's log
//! whole, with an exact size. A stream opened before a pass keeps its size and positions: its
//! head kept in memory reads as it did, a record it shows that the pass kept renders the same
//! bytes again from the new segments, and one the pass removed reads as `ESTALE`.

use std::sync::{Arc, Mutex};

use crate::render::{ByteCounter, Renderer};
use crate::spec::Format;
use crate::txn::{TxnSnapshot, TxnTracker};
use topicfs_format::key_name::{KeyName, key_name, parse_key_name};
use topicfs_format::{BatchInfo, Offset, decode_batch, peek_entry};
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_source::{KeyHit, KeyListing, PartitionSource, ReadCursor};

/// Name of a partition's (and a topic's) by-key directory.
pub const BY_KEY: &str = "by-key";
/// Name of a partition's latest-value directory.
pub const LATEST: &str = "latest";
/// Name of a partition's key listing.
pub const KEYS: &str = "keys";

/// A name under `by-key/` or `latest/`: the key's name and a format.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeySpec {
    pub key: KeyName,
    pub format: Format,
}

impl KeySpec {
    /// Parses `name` (`<key name>` plus an optional `.json` or `.raw`); `None` when it is not
    /// the canonical name of a key.
    pub fn parse(name: &str) -> Option<KeySpec> {
        let (sel, format) = if let Some(sel) = name.strip_suffix(".json") {
            (sel, Format::Json)
        } else if let Some(sel) = name.strip_suffix(".raw") {
            (sel, Format::Raw)
        } else {
            (name, Format::Values)
        };
        Some(KeySpec { key: parse_key_name(sel)?, format })
    }

    /// The key bytes this spec names in `part` (`Some(None)`: the null key): a long name is
    /// resolved through the index, and names no key when none or several hold its hashes.
    pub fn resolve(&self, part: &dyn PartitionSource) -> Result<Option<Vec<u8>>> {
        match &self.key {
            KeyName::Key(key) => Ok(key.clone()),
            KeyName::Long(h0, h1) => {
                let index = key_index(part)?;
                let mut keys = index.keys_named(*h0, *h1)?;
                match (keys.pop(), keys.is_empty()) {
                    (Some(key), true) => Ok(Some(key)),
                    _ => Err(Error::NotFound(format!(
                        "no single key of {}-{} has the long name %~{h0:016x}{h1:016x}",
                        part.topic(),
                        part.partition()
                    ))),
                }
            }
        }
    }
}

fn key_index(part: &dyn PartitionSource) -> Result<&dyn topicfs_source::KeyIndex> {
    part.key_index().ok_or_else(|| {
        Error::NotFound(format!("{}-{} has no key index", part.topic(), part.partition()))
    })
}

/// The transaction state a reader of `part` applies: `None` shows every record
/// (`read_uncommitted`, or a partition whose index has seen no transactional batch: nothing
/// to hide, no transaction to wait for, so no scan for markers).
fn snapshot(part: &dyn PartitionSource, txn: Option<&TxnTracker>) -> Result<Option<TxnSnapshot>> {
    if !key_index(part)?.transactional() {
        return Ok(None);
    }
    txn.map(|t| t.refresh(part)).transpose()
}

/// Whether `hit` is shown now: `Ok(None)` when it lies at or past the last stable offset (it
/// and everything after it wait), else whether it is visible.
fn visible(hit: &KeyHit, snap: Option<&TxnSnapshot>, raw: bool) -> Result<Option<bool>> {
    let Some(snap) = snap else { return Ok(Some(true)) };
    if !snap.admits(hit.offset)? {
        return Ok(None);
    }
    let aborted = hit.producer_id.is_some_and(|pid| snap.is_aborted_record(pid, hit.offset));
    Ok(Some(raw || !aborted))
}

/// One batch read from the partition, kept while consecutive records come from it.
struct CachedBatch {
    base: Offset,
    last: Offset,
    bytes: Vec<u8>,
    /// The source checked its CRC when it read it ([`topicfs_source::BatchChunk::crc_checked`]),
    /// so decoding it does not check it again.
    crc_checked: bool,
}

impl CachedBatch {
    /// The batch decoded (its CRC checked once: by the source or here).
    fn decode(
        &self,
    ) -> std::result::Result<topicfs_format::Batch<'_>, topicfs_format::DecodeError> {
        if self.crc_checked {
            topicfs_format::decode_batch_unverified(&self.bytes)
        } else {
            decode_batch(&self.bytes)
        }
    }
}

/// Reads the batch holding `offset` (`ESTALE` when retention deleted it).
fn batch_holding(part: &dyn PartitionSource, offset: Offset) -> Result<CachedBatch> {
    let cursor = part.seek(offset).map_err(|e| match e {
        Error::OffsetOutOfRange { .. } => Error::StaleHandle,
        e => e,
    })?;
    let chunk = part
        .read(&cursor, 1, topicfs_source::ReadMode::Batches)
        .and_then(topicfs_source::ReadAnswer::into_chunk)?;
    let crc_checked = chunk.crc_checked;
    let header = peek_entry(&chunk.bytes)
        .map_err(|e| {
            let (file, pos) = part.byte_location(&cursor, e.at as u64);
            Error::corrupt(file, pos, e.to_string())
        })?
        .ok_or(Error::StaleHandle)?;
    let mut bytes = chunk.bytes;
    bytes.truncate(header.total_size());
    let info = topicfs_format::parse_batch_info(&bytes).map_err(|e| {
        let (file, pos) = part.byte_location(&cursor, e.at as u64);
        Error::corrupt(file, pos, e.to_string())
    })?;
    // The batch at the cursor is the first whose last offset is at or past `offset` (a
    // legacy wrapper's header names only its last offset). Past it: the record is gone
    // (compaction rewrote the segment, retention deleted it).
    if offset > info.last_offset {
        return Err(Error::StaleHandle);
    }
    Ok(CachedBatch { base: info.base_offset, last: info.last_offset, bytes, crc_checked })
}

/// Renders the record at `offset` of `batch` with `renderer` (raw: the batch itself) into
/// `out`; returns whether it was found.
fn render_unit(
    part: &dyn PartitionSource,
    batch: &CachedBatch,
    offset: Offset,
    renderer: &Renderer,
    out: &mut impl crate::render::Sink,
) -> Result<bool> {
    if renderer.format() == Format::Raw {
        out.put(&batch.bytes);
        return Ok(true);
    }
    let corrupt = |e: topicfs_format::DecodeError| {
        let (file, pos) = part.byte_location(&ReadCursor::at(batch.base), e.at as u64);
        Error::corrupt(file, pos, e.to_string())
    };
    let decoded = batch.decode().map_err(corrupt)?;
    let info: BatchInfo = decoded.info().clone();
    for record in decoded.records() {
        let record = record.map_err(corrupt)?;
        if record.offset == offset {
            renderer.render(&info, &record, out);
            return Ok(true);
        }
    }
    Ok(false)
}

/// What a [`KeyStream`] has rendered so far.
#[derive(Default)]
struct KeyState {
    /// Per record (raw: per batch) shown, in order: its offset (raw: the batch's base offset)
    /// and where its rendering ends.
    units: Vec<(Offset, u64)>,
    /// Where the next lookup starts.
    from: Offset,
    /// The last batch read.
    batch: Option<CachedBatch>,
    /// The rendering of the first units, up to [`HEAD_BYTES`], kept from sizing so that the
    /// first read after an open does not read and render their batches again.
    head: Vec<u8>,
}

/// Times a key stream's open looks its records up at most while cleaner passes end during
/// the lookup (see [`KeyStream::open`]).
const OPEN_TRIES: usize = 3;

/// Bytes of a key stream's start kept rendered (see `KeyState::head`): at most
/// [`MAX_CACHED_KEY_STREAMS`] times this per mount.
const HEAD_BYTES: usize = 16 << 10;

impl KeyState {
    fn size(&self) -> u64 {
        self.units.last().map_or(0, |u| u.1)
    }

    fn batch(&mut self, part: &dyn PartitionSource, offset: Offset) -> Result<&CachedBatch> {
        let fresh = !self.batch.as_ref().is_some_and(|b| b.base <= offset && offset <= b.last);
        if fresh {
            self.batch = Some(batch_holding(part, offset)?);
        }
        self.batch.as_ref().ok_or(Error::StaleHandle)
    }
}

/// `by-key/<key>[.json|.raw]` of one partition (see the module docs).
pub struct KeyStream {
    part: Arc<dyn PartitionSource>,
    key: Option<Vec<u8>>,
    renderer: Renderer,
    txn: Option<Arc<TxnTracker>>,
    state: Mutex<KeyState>,
    /// The source's [`Known::rewrites`](topicfs_source::Known::rewrites) before the stream
    /// first looked its records up: the cleaner passes whose log it shows.
    rewrites: u64,
}

impl std::fmt::Debug for KeyStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KeyStream({}-{} {}{})",
            self.part.topic(),
            self.part.partition(),
            key_name(self.key.as_deref()),
            self.renderer.format().suffix()
        )
    }
}

impl KeyStream {
    /// The records of `part` holding `key` in `format`, through `txn` (`read_committed`; `None`
    /// shows every record). `NotFound` when the partition has no key index.
    pub fn open(
        part: Arc<dyn PartitionSource>,
        key: Option<Vec<u8>>,
        format: Format,
        txn: Option<Arc<TxnTracker>>,
        shown: crate::render::JsonShown,
    ) -> Result<KeyStream> {
        key_index(part.as_ref())?;
        let renderer = Renderer::new(format, part.topic(), part.partition()).showing(&shown);
        let mut stream = KeyStream {
            part,
            key,
            renderer,
            txn,
            state: Mutex::new(KeyState::default()),
            rewrites: 0,
        };
        // A cleaner pass ending while the records are looked up may leave some it removed
        // (looked up before it) among them: the lookup is made again, so that a stream opened
        // after a pass shows that pass's log. Passes ending during every try leave the last
        // one, whose reads of records a pass removed are stale, as for any pass after an open.
        for _ in 0..OPEN_TRIES {
            stream.rewrites = stream.part.known().rewrites;
            *lock(&stream.state) = KeyState::default();
            stream.size()?;
            if stream.part.known().rewrites == stream.rewrites {
                break;
            }
        }
        Ok(stream)
    }

    /// Whether a cleaner pass replaced segments of the partition since the stream looked its
    /// records up: it may show records the log no longer holds (a new open would not).
    pub fn made_before_a_pass(&self) -> bool {
        self.part.known().rewrites != self.rewrites
    }

    /// The key shown.
    pub fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }

    /// The offset of the first record (raw: batch) shown, if any.
    pub fn first_offset(&self) -> Option<Offset> {
        lock(&self.state).units.first().map(|u| u.0)
    }

    /// Takes in the matching records appended (or become stable) since the last look.
    fn catch_up(&self, st: &mut KeyState) -> Result<()> {
        let part = self.part.as_ref();
        // Hits first: the snapshot then knows of every transactional batch they are in.
        let hits = key_index(part)?.key_hits(self.key.as_deref(), st.from)?;
        let snap = snapshot(part, self.txn.as_deref())?;
        let raw = self.renderer.format() == Format::Raw;
        for hit in &hits.hits {
            match visible(hit, snap.as_ref(), raw)? {
                None => break,
                Some(false) => {}
                Some(true) => {
                    let batch = st.batch(part, hit.offset)?;
                    let base = batch.base;
                    if raw && st.units.last().is_some_and(|u| u.0 == base) {
                        st.from = hit.offset.plus(1);
                        continue;
                    }
                    let keep = st.head.len() as u64 == st.size() && st.head.len() < HEAD_BYTES;
                    let batch = st.batch(part, hit.offset)?;
                    let (found, n) = if keep {
                        let mut rendered = Vec::new();
                        let found =
                            render_unit(part, batch, hit.offset, &self.renderer, &mut rendered)?;
                        let n = rendered.len() as u64;
                        if found && st.head.len() + rendered.len() <= HEAD_BYTES {
                            st.head.extend_from_slice(&rendered);
                        }
                        (found, n)
                    } else {
                        let mut n = ByteCounter::default();
                        (render_unit(part, batch, hit.offset, &self.renderer, &mut n)?, n.0)
                    };
                    if found {
                        let end = st.size().saturating_add(n);
                        st.units.push((if raw { base } else { hit.offset }, end));
                    }
                }
            }
            st.from = hit.offset.plus(1);
        }
        Ok(())
    }

    /// Exactly the bytes a full read returns now.
    pub fn size(&self) -> Result<u64> {
        let mut st = lock(&self.state);
        self.catch_up(&mut st)?;
        Ok(st.size())
    }

    /// Up to `len` bytes at `offset` (fewer at the current end).
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut st = lock(&self.state);
        let want_end = offset.saturating_add(len as u64);
        if want_end > st.size() {
            self.catch_up(&mut st)?;
        }
        let end = want_end.min(st.size());
        let mut out = Vec::new();
        if offset >= end {
            return Ok(out);
        }
        if end <= st.head.len() as u64 {
            return Ok(st.head.get(offset as usize..end as usize).unwrap_or_default().to_vec());
        }
        // The first unit ending after `offset`, and where it starts.
        let mut i = st.units.partition_point(|u| u.1 <= offset);
        let mut unit_start = match i.checked_sub(1) {
            Some(p) => st.units.get(p).map_or(0, |u| u.1),
            None => 0,
        };
        let part = self.part.as_ref();
        let mut rendered = Vec::new();
        while unit_start < end {
            let Some(&(unit_offset, unit_end)) = st.units.get(i) else { break };
            rendered.clear();
            let batch = st.batch(part, unit_offset)?;
            render_unit(part, batch, unit_offset, &self.renderer, &mut rendered)?;
            if rendered.len() as u64 != unit_end - unit_start {
                // What was measured is not what the log holds now (compaction rewrote it).
                return Err(Error::StaleHandle);
            }
            let from = offset.saturating_sub(unit_start) as usize;
            let to = (end - unit_start).min(rendered.len() as u64) as usize;
            out.extend_from_slice(rendered.get(from..to).unwrap_or_default());
            unit_start = unit_end;
            i += 1;
        }
        Ok(out)
    }
}

/// Key streams most recently opened, kept per mount so that the lookup, `stat` and `open` of
/// one name (and later opens of it) share one stream instead of each rendering the key's
/// records to learn the size (at most [`MAX_CACHED_KEY_STREAMS`]; the oldest goes first).
pub const MAX_CACHED_KEY_STREAMS: usize = 256;

/// See [`MAX_CACHED_KEY_STREAMS`].
#[derive(Default)]
pub struct KeyStreamCache {
    streams: Mutex<std::collections::VecDeque<(KeyStreamId, Arc<KeyStream>)>>,
}

type KeyStreamId = (String, u32, Option<Vec<u8>>, Format, bool);

impl KeyStreamCache {
    /// The stream of `key` in `part` in `format` through `txn`: the cached one when it is still
    /// whole (no record it shows was deleted by retention or removed by a cleaner pass since),
    /// else a new one.
    pub fn open(
        &self,
        part: Arc<dyn PartitionSource>,
        key: Option<Vec<u8>>,
        format: Format,
        txn: Option<Arc<TxnTracker>>,
        shown: crate::render::JsonShown,
    ) -> Result<Arc<KeyStream>> {
        let id: KeyStreamId =
            (part.topic().to_string(), part.partition(), key.clone(), format, txn.is_some());
        let cached = lock(&self.streams).iter().find(|(i, _)| *i == id).map(|(_, s)| Arc::clone(s));
        if let Some(stream) = cached.filter(|s| !s.made_before_a_pass()) {
            let log_start = part.summary()?.log_start_offset;
            if stream.first_offset().is_none_or(|first| first >= log_start) {
                stream.size()?;
                return Ok(stream);
            }
        }
        let stream = Arc::new(KeyStream::open(part, key, format, txn, shown)?);
        let mut streams = lock(&self.streams);
        streams.retain(|(i, _)| *i != id);
        streams.push_back((id, Arc::clone(&stream)));
        while streams.len() > MAX_CACHED_KEY_STREAMS {
            streams.pop_front();
        }
        Ok(stream)
    }
}

/// `latest/<key>[.json]`: the rendering of the last visible record of `part` holding `key`,
/// `None` when there is none or it is a tombstone.
pub fn latest_record(
    part: &dyn PartitionSource,
    key: Option<&[u8]>,
    format: Format,
    txn: Option<&TxnTracker>,
    shown: crate::render::JsonShown,
) -> Result<Option<Vec<u8>>> {
    let hits = key_index(part)?.key_hits(key, Offset(0))?;
    let snap = snapshot(part, txn)?;
    let renderer = Renderer::new(format, part.topic(), part.partition()).showing(&shown);
    let mut cached: Option<CachedBatch> = None;
    for hit in hits.hits.iter().rev() {
        if visible(hit, snap.as_ref(), false)? != Some(true) {
            continue;
        }
        if !cached.as_ref().is_some_and(|b| b.base <= hit.offset && hit.offset <= b.last) {
            cached = Some(batch_holding(part, hit.offset)?);
        }
        let Some(batch) = cached.as_ref() else { continue };
        let decoded = batch.decode().map_err(|e| {
            let (file, pos) = part.byte_location(&ReadCursor::at(batch.base), e.at as u64);
            Error::corrupt(file, pos, e.to_string())
        })?;
        let info = decoded.info().clone();
        for record in decoded.records().flatten() {
            if record.offset == hit.offset {
                if record.value.is_none() {
                    return Ok(None);
                }
                let mut out = Vec::new();
                renderer.render(&info, &record, &mut out);
                return Ok(Some(out));
            }
        }
    }
    Ok(None)
}

/// Most keys a partition's `keys` may have for `stat` to show its exact size (generating it
/// to count: about 0.1 s at this many); larger listings show 0 (size not yet known).
pub const KEYS_SIZED_AT_STAT: u64 = 100_000;

/// The line of `keys` for `key` with records `hits`: `None` when none is visible.
fn line(key: Option<&[u8]>, hits: &[KeyHit], snap: Option<&TxnSnapshot>) -> Result<Option<String>> {
    let mut count = 0u64;
    for hit in hits {
        match visible(hit, snap, false)? {
            None => break,
            Some(true) => count += 1,
            Some(false) => {}
        }
    }
    Ok((count > 0).then(|| format!("{}\t{count}\n", key_name(key))))
}

/// `keys`: the distinct keys of a partition with their visible record counts, generated as it
/// is read (see the module docs). Reads are expected in order (`cat`, `wc`, `grep`); a read
/// before the window kept starts the listing over.
pub struct KeysReader {
    part: Arc<dyn PartitionSource>,
    txn: Option<Arc<TxnTracker>>,
    state: Mutex<KeysState>,
}

struct KeysState {
    listing: Option<Box<dyn KeyListing>>,
    snap: Option<TxnSnapshot>,
    /// Generated bytes not yet passed, starting at `buf_start` of the listing.
    buf: Vec<u8>,
    buf_start: u64,
    done: bool,
}

impl KeysReader {
    /// The listing of `part` as seen through `txn`. `NotFound` without a key index.
    pub fn open(
        part: Arc<dyn PartitionSource>,
        txn: Option<Arc<TxnTracker>>,
    ) -> Result<KeysReader> {
        key_index(part.as_ref())?;
        let state =
            KeysState { listing: None, snap: None, buf: Vec::new(), buf_start: 0, done: false };
        Ok(KeysReader { part, txn, state: Mutex::new(state) })
    }

    /// The listing's exact size now, when it has at most [`KEYS_SIZED_AT_STAT`] keys (it is
    /// generated to count its bytes); `None` (size not yet known) for more.
    pub fn size(&self) -> Result<Option<u64>> {
        let mut listing = key_index(self.part.as_ref())?.listing()?;
        if listing.keys_at_most() > KEYS_SIZED_AT_STAT {
            return Ok(None);
        }
        let snap = snapshot(self.part.as_ref(), self.txn.as_deref())?;
        let mut size = 0u64;
        while let Some((key, hits)) = listing.next_key()? {
            size += line(key.as_deref(), &hits, snap.as_ref())?.map_or(0, |l| l.len() as u64);
        }
        Ok(Some(size))
    }

    fn restart(&self, st: &mut KeysState) -> Result<()> {
        st.listing = Some(key_index(self.part.as_ref())?.listing()?);
        st.snap = snapshot(self.part.as_ref(), self.txn.as_deref())?;
        st.buf.clear();
        st.buf_start = 0;
        st.done = false;
        Ok(())
    }

    /// Up to `len` bytes at `offset` of the listing.
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut st = lock(&self.state);
        if st.listing.is_none() || offset < st.buf_start {
            self.restart(&mut st)?;
        }
        let want_end = offset.saturating_add(len as u64);
        while !st.done && st.buf_start + (st.buf.len() as u64) < want_end {
            let next = match st.listing.as_mut() {
                Some(listing) => listing.next_key()?,
                None => None,
            };
            let Some((key, hits)) = next else {
                st.done = true;
                break;
            };
            if let Some(line) = line(key.as_deref(), &hits, st.snap.as_ref())? {
                st.buf.extend_from_slice(line.as_bytes());
            }
        }
        // Drop what lies before `offset`: reads move forward.
        let skip = offset.saturating_sub(st.buf_start).min(st.buf.len() as u64) as usize;
        st.buf.drain(..skip);
        st.buf_start += skip as u64;
        let take = len.min(st.buf.len());
        Ok(st.buf.get(..take).unwrap_or_default().to_vec())
    }
}

/// The records of one key across a topic: `<topic>/by-key/<key>[.json]` (see
/// [`TopicKeyStream::open`]).
#[derive(Debug)]
pub enum TopicKeyStream {
    /// Only the partition Kafka's default partitioner places the key in holds it: that
    /// partition's key stream, growing.
    Placed(Arc<KeyStream>),
    /// Several partitions (or another than murmur2's) hold it: their key streams one after
    /// the other by partition number, each as of the open (fixed).
    Spread(Vec<(Arc<KeyStream>, u64)>),
}

impl TopicKeyStream {
    /// Opens the topic-level stream of `key` over `parts` (every partition of the topic, in
    /// order), each seen through its tracker from `txn`.
    pub fn open(
        parts: Vec<Arc<dyn PartitionSource>>,
        key: Option<Vec<u8>>,
        format: Format,
        txn: &dyn Fn(&dyn PartitionSource) -> Option<Arc<TxnTracker>>,
        shown: crate::render::JsonShown,
    ) -> Result<TopicKeyStream> {
        let count = u32::try_from(parts.len()).unwrap_or(u32::MAX);
        let placed =
            key.as_deref().and_then(|k| topicfs_format::partitioner::partition_for_key(k, count));
        let mut holders = Vec::new();
        for part in parts {
            if part.key_index().is_none() {
                return Err(Error::NotFound(format!(
                    "{}-{} has no key index",
                    part.topic(),
                    part.partition()
                )));
            }
            let tracker = txn(part.as_ref());
            let holds =
                !key_index(part.as_ref())?.key_hits(key.as_deref(), Offset(0))?.hits.is_empty();
            if holds || Some(part.partition()) == placed {
                holders.push((part, tracker));
            }
        }
        let only_placed = holders.iter().all(|(p, _)| Some(p.partition()) == placed);
        let mut streams = Vec::new();
        for (part, tracker) in holders {
            let shown = shown.clone();
            streams.push(Arc::new(KeyStream::open(part, key.clone(), format, tracker, shown)?));
        }
        if only_placed && streams.len() == 1 {
            if let Some(one) = streams.pop() {
                return Ok(TopicKeyStream::Placed(one));
            }
        }
        let mut fixed = Vec::new();
        for s in streams {
            let size = s.size()?;
            if size > 0 {
                fixed.push((s, size));
            }
        }
        Ok(TopicKeyStream::Spread(fixed))
    }

    /// Whether a cleaner pass replaced segments of one of its partitions since it looked their
    /// records up (see [`KeyStream::made_before_a_pass`]).
    pub fn made_before_a_pass(&self) -> bool {
        match self {
            TopicKeyStream::Placed(s) => s.made_before_a_pass(),
            TopicKeyStream::Spread(list) => list.iter().any(|(s, _)| s.made_before_a_pass()),
        }
    }

    /// Exactly the bytes a full read returns now.
    pub fn size(&self) -> Result<u64> {
        match self {
            TopicKeyStream::Placed(s) => s.size(),
            TopicKeyStream::Spread(list) => Ok(list.iter().map(|(_, n)| n).sum()),
        }
    }

    /// Up to `len` bytes at `offset`.
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        match self {
            TopicKeyStream::Placed(s) => s.read_at(offset, len),
            TopicKeyStream::Spread(list) => {
                let mut out = Vec::new();
                let mut start = 0u64;
                let end = offset.saturating_add(len as u64);
                for (s, size) in list {
                    let stop = start + size;
                    if stop > offset && start < end {
                        let from = offset.max(start) - start;
                        let to = end.min(stop) - start;
                        out.extend(s.read_at(from, (to - from) as usize)?);
                    }
                    start = stop;
                }
                Ok(out)
            }
        }
    }
}
