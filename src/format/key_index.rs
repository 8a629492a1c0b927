//! The per-segment key index: which records of one segment hold which key.
//!
//! Built once per sealed segment (segments never change once rolled) and kept in topicfs's
//! segment cache, outside the data dir; the active segment's is built in memory with the same
//! [`KeyIndexBuilder`]. Pure: bytes in, bytes out.
//!
//! # Layout (version 2, big-endian like Kafka's own files)
//!
//! | position | field |
//! |---|---|
//! | 0 | magic `TFKI` |
//! | 4 | version `u16` (2), flags `u16` (bit 0: a filter is present) |
//! | 8 | CRC-32C `u32` of every other byte of the index |
//! | 12 | base offset `i64`, end offset `i64` (every record below it, from the base offset on, is indexed) |
//! | 28 | log size `u64`: the `.log` bytes indexed (a segment of another size is not this one) |
//! | 36 | record count `u64`, key count `u32`, transactional batch count `u32` |
//! | 52 | filter, keys and postings section lengths, `u32` each; 8 reserved bytes |
//! | 72 | filter: a binary fuse filter of the key hashes (seed `u64`, segment length, its mask, segment count length `u32` each, then one fingerprint byte per slot) |
//! | | dictionary: per key, 24 bytes: hash `u64` ([`key_hash`]), key position and length in the keys section `u32` each (length `u32::MAX`: the null key), postings position and record count `u32` each; sorted by hash, then null first, then key bytes, so keys whose hashes collide sit side by side and are told apart by their bytes |
//! | | keys: the key bytes, concatenated |
//! | | postings: per key, its records' offsets as unsigned LEB128 varints, the first relative to the base offset, each next one the (positive) difference to the previous |
//! | | key order: per key, `u32`, the dictionary index of the keys in key order (null key first, then the keys' bytes compared as unsigned bytes): `keys` lists in this order, merging segments |
//! | | transactional batches: 24 bytes each, base offset, last offset, producer id (`i64`), by base offset: a read-committed query tells aborted records from these without reading them |
//!
//! Version 1 (no key order) is not read: an index of another version is rebuilt, never misread.
//!
//! **Invariants** checked by [`SegmentKeyIndex::decode`] before anything is trusted: the CRC,
//! every section within the bytes and the lengths adding up exactly, every key and postings
//! range inside its section, the dictionary sorted, the key order a permutation of the
//! dictionary in strictly increasing key order, the record counts adding up, the filter's
//! geometry inside its fingerprints. Postings are decoded with checked arithmetic when read.
//! Nothing here panics on any bytes; a damaged index is a [`DecodeError`] and is rebuilt by its
//! owner.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use xorf::{BinaryFuse8, Filter};

use crate::format::bytes::invalid;
pub use crate::format::key_name::key_hash;
use crate::format::{DecodeError, DecodeErrorKind, Offset};

/// First bytes of every key index.
pub const MAGIC: [u8; 4] = *b"TFKI";
/// The layout version this code writes and reads.
pub const VERSION: u16 = 2;
/// Bytes before the filter.
pub const HEADER_LEN: usize = 72;
const DICT_ENTRY: usize = 24;
const TXN_ENTRY: usize = 24;
const ORDER_ENTRY: usize = 4;
const NULL_KEY: u32 = u32::MAX;
const FLAG_FILTER: u16 = 1;
/// The filter's descriptor: seed, segment length, mask, segment count length.
const FILTER_DESCRIPTOR: usize = 20;

/// A transactional batch: a read-committed reader hides its records when its producer's
/// transaction was aborted.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TxnBatch {
    pub base_offset: Offset,
    pub last_offset: Offset,
    pub producer_id: i64,
}

/// A hasher for keys that are already [`key_hash`]es (well mixed 64-bit values): the map
/// takes them as they are instead of hashing every record's key twice.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// One key of a [`KeyIndexBuilder`] and its offsets.
#[derive(Clone, Debug)]
struct Slot {
    key: Option<Box<[u8]>>,
    offsets: Vec<i64>,
}

/// What adds records to an index being built: [`KeyIndexBuilder`] (answers lookups as it
/// grows) and [`BulkKeyIndexBuilder`] (answers none, builds a whole segment's fast).
pub trait KeySink {
    /// Adds the record at `offset` whose key is `key`.
    fn add(&mut self, key: Option<&[u8]>, offset: Offset);
    /// Notes a transactional batch (in increasing offset order).
    fn add_txn_batch(&mut self, batch: TxnBatch);
}

/// The records of one segment by key, as they are read: the active segment's index in
/// memory, answering lookups as records are appended. It is a hash map of the keys added
/// since it was made, on top of an optional encoded index of the records before
/// ([`KeyIndexBuilder::on_top_of`]: a large active segment is first indexed in bulk).
#[derive(Clone, Debug, Default)]
pub struct KeyIndexBuilder {
    base_offset: Offset,
    /// The records below `frozen.end_offset()`, when it was made on top of an index.
    frozen: Option<std::sync::Arc<SegmentKeyIndex>>,
    /// By [`key_hash`]: the first key seen with that hash.
    slots: HashMap<u64, Slot, BuildHasherDefault<Prehashed>>,
    /// Keys whose hash an earlier key in `slots` has (a collision: practically never).
    collided: Vec<(u64, Slot)>,
    txns: Vec<TxnBatch>,
    records: u64,
}

impl KeySink for KeyIndexBuilder {
    fn add(&mut self, key: Option<&[u8]>, offset: Offset) {
        KeyIndexBuilder::add(self, key, offset)
    }

    fn add_txn_batch(&mut self, batch: TxnBatch) {
        KeyIndexBuilder::add_txn_batch(self, batch)
    }
}

impl KeyIndexBuilder {
    /// An empty index of the segment whose base offset is `base_offset`.
    pub fn new(base_offset: Offset) -> KeyIndexBuilder {
        KeyIndexBuilder { base_offset, ..KeyIndexBuilder::default() }
    }

    /// An index holding what `index` holds, to which later records are added.
    pub fn on_top_of(index: SegmentKeyIndex) -> KeyIndexBuilder {
        KeyIndexBuilder {
            base_offset: index.base_offset(),
            records: index.record_count(),
            txns: index.txns.clone(),
            frozen: Some(std::sync::Arc::new(index)),
            ..KeyIndexBuilder::default()
        }
    }

    /// The segment's base offset.
    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// Records added.
    pub fn record_count(&self) -> u64 {
        self.records
    }

    fn slot(&self, key: Option<&[u8]>) -> Option<&Slot> {
        let hash = key_hash(key);
        let slot = self.slots.get(&hash)?;
        if slot.key.as_deref() == key {
            return Some(slot);
        }
        self.collided.iter().find(|(h, s)| *h == hash && s.key.as_deref() == key).map(|(_, s)| s)
    }

    /// Adds the record at `offset` (offsets come in increasing order) whose key is `key`.
    /// Records below the base offset (or below the end of the index this one was made on top
    /// of), or not above the key's previous one, are not indexed (they cannot be encoded; a
    /// log never has them).
    pub fn add(&mut self, key: Option<&[u8]>, offset: Offset) {
        if offset < self.base_offset || self.frozen.as_ref().is_some_and(|f| offset < f.end_offset)
        {
            return;
        }
        let hash = key_hash(key);
        let new_slot = || Slot { key: key.map(Box::from), offsets: Vec::new() };
        let slot = match self.slots.entry(hash) {
            std::collections::hash_map::Entry::Vacant(v) => v.insert(new_slot()),
            std::collections::hash_map::Entry::Occupied(o) => {
                let slot = o.into_mut();
                if slot.key.as_deref() == key {
                    slot
                } else {
                    let at = match self
                        .collided
                        .iter()
                        .position(|(h, s)| *h == hash && s.key.as_deref() == key)
                    {
                        Some(at) => at,
                        None => {
                            self.collided.push((hash, new_slot()));
                            self.collided.len() - 1
                        }
                    };
                    match self.collided.get_mut(at) {
                        Some((_, s)) => s,
                        None => return,
                    }
                }
            }
        };
        if slot.offsets.last().is_some_and(|last| *last >= offset.0) {
            return;
        }
        slot.offsets.push(offset.0);
        self.records += 1;
    }

    /// Notes a transactional batch (in increasing offset order).
    pub fn add_txn_batch(&mut self, batch: TxnBatch) {
        if self.txns.last().is_none_or(|last| last.last_offset < batch.base_offset) {
            self.txns.push(batch);
        }
    }

    /// The offsets of `key`'s records from `from` on, ascending.
    pub fn offsets_from(&self, key: Option<&[u8]>, from: Offset) -> Vec<i64> {
        let mut out = Vec::new();
        if let Some(frozen) = &self.frozen
            && let Some(entry) = frozen.find(key)
        {
            let _ = frozen.postings_from(&entry, from, |o| out.push(o.0));
        }
        if let Some(s) = self.slot(key) {
            let at = s.offsets.partition_point(|o| *o < from.0);
            out.extend_from_slice(s.offsets.get(at..).unwrap_or_default());
        }
        out
    }

    /// The offsets of `key`'s records, ascending.
    pub fn offsets(&self, key: Option<&[u8]>) -> Vec<i64> {
        self.offsets_from(key, Offset(i64::MIN))
    }

    /// The keys added whose [`key_hash`] is `hash`.
    pub fn keys_with_hash(&self, hash: u64) -> Vec<Option<Vec<u8>>> {
        let mut keys: Vec<Option<Vec<u8>>> = Vec::new();
        if let Some(frozen) = &self.frozen {
            for e in frozen.entries_with_hash(hash) {
                if let Ok(key) = frozen.key_of(&e) {
                    keys.push(key.map(<[u8]>::to_vec));
                }
            }
        }
        let first = self.slots.get(&hash).into_iter();
        let more = self.collided.iter().filter(|(h, _)| *h == hash).map(|(_, s)| s);
        for s in first.chain(more) {
            let key = s.key.as_deref().map(<[u8]>::to_vec);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }

    /// Whether any transactional batch was noted.
    pub fn has_txn_batches(&self) -> bool {
        !self.txns.is_empty()
    }

    /// The producer of the transactional batch holding `offset`, if one does.
    pub fn producer_at(&self, offset: Offset) -> Option<i64> {
        producer_in(&self.txns, offset)
    }

    /// The index in its byte layout (see the module docs): every record from the base offset
    /// up to `end_offset`, read from the first `log_size` bytes of the segment's `.log`.
    pub fn encode(&self, end_offset: Offset, log_size: u64) -> Vec<u8> {
        let mut bulk = BulkKeyIndexBuilder::new(self.base_offset);
        if let Some(frozen) = &self.frozen {
            for i in 0..frozen.key_count() {
                let Ok(e) = frozen.entry(i) else { continue };
                let Ok(key) = frozen.key_of(&e) else { continue };
                let _ = frozen.postings_from(&e, Offset(i64::MIN), |o| bulk.add(key, o));
            }
        }
        for s in self.slots.values().chain(self.collided.iter().map(|(_, s)| s)) {
            for o in &s.offsets {
                bulk.add(s.key.as_deref(), Offset(*o));
            }
        }
        bulk.txns = self.txns.clone();
        bulk.encode(end_offset, log_size)
    }
}

/// Keys up to this long are kept in their [`Posting`], longer ones in the builder's arena.
const INLINE_KEY: usize = 16;

/// One record in a [`BulkKeyIndexBuilder`]: its key's hash, its offset relative to the base,
/// its key (`key_len` [`NULL_KEY`]: the null key): the bytes themselves when at most
/// [`INLINE_KEY`] long (zero-padded; so comparing the keys of a hash's records reads only the
/// sorted records, no random access), else where they are in the builder's arena (big-endian
/// `u64` in the first 8 bytes).
#[derive(Copy, Clone, Debug, Default)]
struct Posting {
    hash: u64,
    relative: u32,
    key_len: u32,
    key: [u8; INLINE_KEY],
}

/// Builds a whole segment's index fast (about 0.1 us a record however many keys): each record
/// appends its key's hash, offset and key bytes to arrays in one sequential pass, then
/// [`BulkKeyIndexBuilder::encode`] sorts the records by (hash, offset) (a radix partition by
/// the hash's top bits, then each part sorted, on up to [`SORT_THREADS`] threads) and walks
/// them once, comparing keys' bytes only within a hash. No random access per record while
/// reading, no allocation per key. A segment read in parts on several threads gives one
/// builder per part, joined with [`BulkKeyIndexBuilder::append`].
#[derive(Clone, Debug, Default)]
pub struct BulkKeyIndexBuilder {
    base_offset: Offset,
    postings: Vec<Posting>,
    arena: Vec<u8>,
    txns: Vec<TxnBatch>,
}

impl Posting {
    /// Where a long key is in the arena.
    fn key_at(&self) -> u64 {
        let mut at = [0u8; 8];
        at.copy_from_slice(self.key.get(..8).unwrap_or(&[0; 8]));
        u64::from_be_bytes(at)
    }
}

/// Most threads sorting one index's records.
pub const SORT_THREADS: usize = 4;

impl KeySink for BulkKeyIndexBuilder {
    fn add(&mut self, key: Option<&[u8]>, offset: Offset) {
        BulkKeyIndexBuilder::add(self, key, offset)
    }

    fn add_txn_batch(&mut self, batch: TxnBatch) {
        if self.txns.last().is_none_or(|last| last.last_offset < batch.base_offset) {
            self.txns.push(batch);
        }
    }
}

impl BulkKeyIndexBuilder {
    /// An empty index of the segment whose base offset is `base_offset`.
    pub fn new(base_offset: Offset) -> BulkKeyIndexBuilder {
        BulkKeyIndexBuilder { base_offset, ..BulkKeyIndexBuilder::default() }
    }

    /// Adds the record at `offset` whose key is `key`. Records below the base offset or more
    /// than `u32::MAX` past it are not indexed (Kafka's offset index cannot address them
    /// either: a log never has them); a key's repeated offset is indexed once.
    pub fn add(&mut self, key: Option<&[u8]>, offset: Offset) {
        let Some(relative) = offset.0.checked_sub(self.base_offset.0) else { return };
        let Ok(relative) = u32::try_from(relative) else { return };
        let mut inline = [0u8; INLINE_KEY];
        let key_len = match key {
            Some(k) if k.len() <= INLINE_KEY => {
                inline.get_mut(..k.len()).unwrap_or_default().copy_from_slice(k);
                k.len() as u32
            }
            Some(k) if k.len() < NULL_KEY as usize => {
                let at = self.arena.len() as u64;
                self.arena.extend_from_slice(k);
                inline.get_mut(..8).unwrap_or_default().copy_from_slice(&at.to_be_bytes());
                k.len() as u32
            }
            Some(_) => return,
            None => NULL_KEY,
        };
        self.postings.push(Posting { hash: key_hash(key), relative, key_len, key: inline });
    }

    /// Records added.
    pub fn len(&self) -> usize {
        self.postings.len()
    }

    /// Whether no record was added.
    pub fn is_empty(&self) -> bool {
        self.postings.is_empty()
    }

    /// Takes in the records of `later`, a builder of a later part of the same segment.
    pub fn append(&mut self, later: BulkKeyIndexBuilder) {
        let shift = self.arena.len() as u64;
        self.arena.extend_from_slice(&later.arena);
        self.postings.extend(later.postings.into_iter().map(|mut p| {
            if p.key_len != NULL_KEY && p.key_len as usize > INLINE_KEY {
                let at = p.key_at() + shift;
                if let Some(field) = p.key.get_mut(..8) {
                    field.copy_from_slice(&at.to_be_bytes());
                }
            }
            p
        }));
        for t in later.txns {
            KeySink::add_txn_batch(self, t);
        }
    }

    fn key<'a>(&'a self, p: &'a Posting) -> Option<&'a [u8]> {
        let len = p.key_len as usize;
        if p.key_len == NULL_KEY {
            None
        } else if len <= INLINE_KEY {
            p.key.get(..len)
        } else {
            let at = p.key_at() as usize;
            self.arena.get(at..at + len)
        }
    }

    /// Whether `a` and `b` (of equal hash) have the same key.
    fn same_key(&self, a: &Posting, b: &Posting) -> bool {
        a.key_len == b.key_len
            && (a.key == b.key
                || (a.key_len != NULL_KEY
                    && a.key_len as usize > INLINE_KEY
                    && self.key(a) == self.key(b)))
    }

    /// The index in its byte layout (see the module docs): every record from the base offset
    /// up to `end_offset`, read from the first `log_size` bytes of the segment's `.log`.
    pub fn encode(mut self, end_offset: Offset, log_size: u64) -> Vec<u8> {
        let postings = std::mem::take(&mut self.postings);
        let sorted = sort_postings(postings);

        let mut hashes: Vec<u64> = Vec::new();
        let mut keys = Vec::new();
        let mut out_postings = Vec::new();
        let mut dict = Vec::new();
        // Per dictionary entry, where its key is in `keys` (for the key order).
        let mut key_refs: Vec<(u32, u32)> = Vec::new();
        let mut records = 0u64;
        let mut group_keys: Vec<(Option<&[u8]>, Vec<u32>)> = Vec::new();
        let mut i = 0;
        while let Some(first) = sorted.get(i) {
            let hash = first.hash;
            let end =
                i + sorted.get(i..).map_or(0, |r| r.iter().take_while(|p| p.hash == hash).count());
            let group = sorted.get(i..end).unwrap_or_default();
            i = end.max(i + 1);
            hashes.push(hash);
            let first_key = self.key(first);
            group_keys.clear();
            if group.iter().all(|p| self.same_key(p, first)) {
                group_keys.push((first_key, group.iter().map(|p| p.relative).collect()));
            } else {
                for p in group {
                    let key = self.key(p);
                    match group_keys.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, offs)) => offs.push(p.relative),
                        None => group_keys.push((key, vec![p.relative])),
                    }
                }
                group_keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            }
            for (key, offsets) in &group_keys {
                dict.extend_from_slice(&hash.to_be_bytes());
                let key_ref = match key {
                    Some(k) => (keys.len() as u32, k.len() as u32),
                    None => (0, NULL_KEY),
                };
                dict.extend_from_slice(&key_ref.0.to_be_bytes());
                dict.extend_from_slice(&key_ref.1.to_be_bytes());
                key_refs.push(key_ref);
                if let Some(k) = key {
                    keys.extend_from_slice(k);
                }
                let postings_at = out_postings.len() as u32;
                let mut prev = 0u32;
                let mut count = 0u32;
                for (n, o) in offsets.iter().enumerate() {
                    if n > 0 && *o == prev {
                        continue;
                    }
                    put_uvarint(&mut out_postings, u64::from(o - prev));
                    prev = *o;
                    count += 1;
                }
                dict.extend_from_slice(&postings_at.to_be_bytes());
                dict.extend_from_slice(&count.to_be_bytes());
                records += u64::from(count);
            }
        }
        drop(sorted);
        let order = key_order(&keys, &key_refs);
        let filter = if hashes.is_empty() { None } else { BinaryFuse8::try_from(&hashes).ok() };
        let mut filter_bytes = Vec::new();
        if let Some(f) = &filter {
            filter_bytes.extend_from_slice(&f.descriptor.seed.to_be_bytes());
            filter_bytes.extend_from_slice(&f.descriptor.segment_length.to_be_bytes());
            filter_bytes.extend_from_slice(&f.descriptor.segment_length_mask.to_be_bytes());
            filter_bytes.extend_from_slice(&f.descriptor.segment_count_length.to_be_bytes());
            filter_bytes.extend_from_slice(&f.fingerprints);
        }

        let mut out = Vec::with_capacity(
            HEADER_LEN
                + filter_bytes.len()
                + dict.len()
                + keys.len()
                + out_postings.len()
                + order.len() * ORDER_ENTRY
                + self.txns.len() * TXN_ENTRY,
        );
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_be_bytes());
        let flags = if filter.is_some() { FLAG_FILTER } else { 0 };
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(&[0; 4]); // CRC, below.
        out.extend_from_slice(&self.base_offset.0.to_be_bytes());
        out.extend_from_slice(&end_offset.0.to_be_bytes());
        out.extend_from_slice(&log_size.to_be_bytes());
        out.extend_from_slice(&records.to_be_bytes());
        out.extend_from_slice(&(key_refs.len() as u32).to_be_bytes());
        out.extend_from_slice(&(self.txns.len() as u32).to_be_bytes());
        out.extend_from_slice(&(filter_bytes.len() as u32).to_be_bytes());
        out.extend_from_slice(&(keys.len() as u32).to_be_bytes());
        out.extend_from_slice(&(out_postings.len() as u32).to_be_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&filter_bytes);
        out.extend_from_slice(&dict);
        out.extend_from_slice(&keys);
        out.extend_from_slice(&out_postings);
        for i in &order {
            out.extend_from_slice(&i.to_be_bytes());
        }
        for t in &self.txns {
            out.extend_from_slice(&t.base_offset.0.to_be_bytes());
            out.extend_from_slice(&t.last_offset.0.to_be_bytes());
            out.extend_from_slice(&t.producer_id.to_be_bytes());
        }
        let crc = checksum(&out);
        if let Some(field) = out.get_mut(8..12) {
            field.copy_from_slice(&crc.to_be_bytes());
        }
        out
    }
}

/// `postings` by (hash, relative offset): partitioned by the hash's top bits into parts of
/// about 4,096 records (so each part sorts in cache), the parts sorted on up to
/// [`SORT_THREADS`] threads.
fn sort_postings(postings: Vec<Posting>) -> Vec<Posting> {
    let n = postings.len();
    if n < 1 << 14 {
        let mut p = postings;
        p.sort_unstable_by_key(|p| (p.hash, p.relative));
        return p;
    }
    let bits = (usize::BITS - (n >> 12).leading_zeros()).clamp(1, 16);
    let shift = 64 - bits;
    let mut counts = vec![0usize; (1 << bits) + 1];
    for p in &postings {
        if let Some(c) = counts.get_mut((p.hash >> shift) as usize + 1) {
            *c += 1;
        }
    }
    for b in 1..counts.len() {
        let before = counts.get(b - 1).copied().unwrap_or(0);
        if let Some(c) = counts.get_mut(b) {
            *c += before;
        }
    }
    let starts = counts.clone();
    let mut sorted = vec![Posting::default(); n];
    for p in &postings {
        let b = (p.hash >> shift) as usize;
        if let Some(at) = counts.get_mut(b)
            && let Some(slot) = sorted.get_mut(*at)
        {
            *slot = *p;
            *at += 1;
        }
    }
    drop(postings);
    let threads =
        SORT_THREADS.min(std::thread::available_parallelism().map_or(1, |t| t.get())).max(1);
    // Split at part boundaries into `threads` runs of about equal length.
    let mut cuts: Vec<usize> = (1..threads)
        .map(|t| starts.get(starts.partition_point(|s| *s < n * t / threads)).copied().unwrap_or(n))
        .collect();
    cuts.push(n);
    cuts.dedup();
    let mut runs: Vec<&mut [Posting]> = Vec::new();
    let mut rest: &mut [Posting] = &mut sorted;
    let mut done = 0usize;
    for cut in cuts {
        let (run, tail) = rest.split_at_mut(cut.saturating_sub(done).min(rest.len()));
        done += run.len();
        runs.push(run);
        rest = tail;
    }
    std::thread::scope(|scope| {
        for run in runs {
            scope.spawn(move || sort_parts(run, shift));
        }
    });
    sorted
}

/// Sorts each part (records of equal top hash bits) of `run` by (hash, relative offset).
fn sort_parts(run: &mut [Posting], shift: u32) {
    let mut rest = run;
    while let Some(first) = rest.first() {
        let top = first.hash >> shift;
        let len = rest.partition_point(|p| p.hash >> shift == top);
        let (part, tail) = rest.split_at_mut(len.max(1));
        part.sort_unstable_by_key(|p| (p.hash, p.relative));
        rest = tail;
    }
}

/// The dictionary indexes of `key_refs` (positions in `keys`; [`NULL_KEY`] length: the null
/// key) in key order: the null key first, then by bytes.
fn key_order(keys: &[u8], key_refs: &[(u32, u32)]) -> Vec<u32> {
    let key = |r: &(u32, u32)| -> Option<&[u8]> {
        if r.1 == NULL_KEY {
            return None;
        }
        keys.get(r.0 as usize..r.0 as usize + r.1 as usize)
    };
    // The first 16 bytes as a number sort most keys without reading them again.
    let mut order: Vec<(bool, u128, u32)> = key_refs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let k = key(r);
            let mut prefix = [0u8; 16];
            if let Some(k) = k {
                let n = k.len().min(16);
                prefix[..n].copy_from_slice(k.get(..n).unwrap_or_default());
            }
            (k.is_some(), u128::from_be_bytes(prefix), i as u32)
        })
        .collect();
    order.sort_unstable_by(|a, b| {
        (a.0, a.1).cmp(&(b.0, b.1)).then_with(|| {
            let ka = key_refs.get(a.2 as usize).and_then(key);
            let kb = key_refs.get(b.2 as usize).and_then(key);
            ka.cmp(&kb)
        })
    });
    order.into_iter().map(|o| o.2).collect()
}

/// CRC-32C of every byte but the checksum field's own (8..12).
fn checksum(b: &[u8]) -> u32 {
    let head = crc32c::crc32c(b.get(..8).unwrap_or_default());
    crc32c::crc32c_append(head, b.get(12..).unwrap_or_default())
}

fn producer_in(txns: &[TxnBatch], offset: Offset) -> Option<i64> {
    let i = txns.partition_point(|t| t.base_offset <= offset);
    let t = txns.get(i.checked_sub(1)?)?;
    (offset <= t.last_offset).then_some(t.producer_id)
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_uvarint(bytes: &[u8], pos: &mut usize) -> Result<u64, DecodeError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos).ok_or_else(|| invalid(*pos, "postings end inside a varint"))?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(DecodeError::new(*pos, DecodeErrorKind::InvalidVarint))
}

/// One key of a [`SegmentKeyIndex`]'s dictionary.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DictEntry {
    pub hash: u64,
    key_at: u32,
    key_len: u32,
    postings_at: u32,
    /// Records holding the key in the segment.
    pub count: u32,
}

/// A decoded, checked key index of one segment (see the module docs), answering lookups from
/// its bytes without unpacking them.
#[derive(Clone, Debug)]
pub struct SegmentKeyIndex {
    bytes: Vec<u8>,
    base_offset: Offset,
    end_offset: Offset,
    log_size: u64,
    record_count: u64,
    key_count: usize,
    filter: Option<BinaryFuse8>,
    dict_at: usize,
    keys_at: usize,
    keys_len: usize,
    postings_at: usize,
    postings_len: usize,
    order_at: usize,
    txns: Vec<TxnBatch>,
}

fn be_u32(b: &[u8], at: usize) -> Result<u32, DecodeError> {
    let s = b.get(at..at + 4).ok_or_else(|| truncated(at + 4, b.len()))?;
    Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn be_u64(b: &[u8], at: usize) -> Result<u64, DecodeError> {
    let s = b.get(at..at + 8).ok_or_else(|| truncated(at + 8, b.len()))?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Ok(u64::from_be_bytes(a))
}

fn truncated(needed: usize, available: usize) -> DecodeError {
    DecodeError::new(0, DecodeErrorKind::Truncated { needed, available })
}

impl SegmentKeyIndex {
    /// Checks `bytes` (see the module docs' invariants) and takes them as an index.
    pub fn decode(bytes: Vec<u8>) -> Result<SegmentKeyIndex, DecodeError> {
        let b = bytes.as_slice();
        if b.len() < HEADER_LEN {
            return Err(truncated(HEADER_LEN, b.len()));
        }
        if b.get(..4) != Some(&MAGIC[..]) {
            return Err(invalid(0, "not a topicfs key index (magic)"));
        }
        let version = be_u32(b, 4)? >> 16;
        let flags = (be_u32(b, 4)? & 0xffff) as u16;
        if version != u32::from(VERSION) || flags & !FLAG_FILTER != 0 {
            return Err(invalid(4, "key index version this daemon does not read"));
        }
        let stored = be_u32(b, 8)?;
        let computed = checksum(b);
        if stored != computed {
            return Err(DecodeError::new(8, DecodeErrorKind::CrcMismatch { stored, computed }));
        }
        let base_offset = Offset(be_u64(b, 12)? as i64);
        let end_offset = Offset(be_u64(b, 20)? as i64);
        let log_size = be_u64(b, 28)?;
        let record_count = be_u64(b, 36)?;
        let key_count = be_u32(b, 44)? as usize;
        let txn_count = be_u32(b, 48)? as usize;
        let filter_len = be_u32(b, 52)? as usize;
        let keys_len = be_u32(b, 56)? as usize;
        let postings_len = be_u32(b, 60)? as usize;
        if end_offset < base_offset {
            return Err(invalid(20, "end offset below the base offset"));
        }
        let dict_at = HEADER_LEN + filter_len;
        let keys_at = key_count
            .checked_mul(DICT_ENTRY)
            .and_then(|d| d.checked_add(dict_at))
            .ok_or_else(|| invalid(44, "key count too large"))?;
        let postings_at = keys_at + keys_len;
        let order_at = postings_at + postings_len;
        let txn_at = key_count
            .checked_mul(ORDER_ENTRY)
            .and_then(|o| o.checked_add(order_at))
            .ok_or_else(|| invalid(44, "key count too large"))?;
        let end = txn_count
            .checked_mul(TXN_ENTRY)
            .and_then(|t| t.checked_add(txn_at))
            .ok_or_else(|| invalid(48, "transactional batch count too large"))?;
        if end != b.len() {
            return Err(invalid(52, "section lengths do not add up to the index's size"));
        }
        let filter = if flags & FLAG_FILTER != 0 {
            Some(decode_filter(b.get(HEADER_LEN..dict_at).unwrap_or_default())?)
        } else if filter_len != 0 {
            return Err(invalid(52, "filter bytes without the filter flag"));
        } else {
            None
        };
        let mut txns = Vec::with_capacity(txn_count);
        for i in 0..txn_count {
            let at = txn_at + i * TXN_ENTRY;
            let t = TxnBatch {
                base_offset: Offset(be_u64(b, at)? as i64),
                last_offset: Offset(be_u64(b, at + 8)? as i64),
                producer_id: be_u64(b, at + 16)? as i64,
            };
            if t.last_offset < t.base_offset
                || txns.last().is_some_and(|p: &TxnBatch| p.last_offset >= t.base_offset)
            {
                return Err(invalid(at, "transactional batches out of order"));
            }
            txns.push(t);
        }
        let index = SegmentKeyIndex {
            bytes: Vec::new(),
            base_offset,
            end_offset,
            log_size,
            record_count,
            key_count,
            filter,
            dict_at,
            keys_at,
            keys_len,
            postings_at,
            postings_len,
            order_at,
            txns,
        };
        let mut index = index;
        index.bytes = bytes;
        let mut previous: Option<(u64, Option<&[u8]>)> = None;
        let mut total = 0u64;
        for i in 0..key_count {
            let e = index.entry(i)?;
            let key = index.key_of(&e)?;
            if e.count == 0 || e.postings_at as usize >= postings_len {
                return Err(invalid(index.dict_at + i * DICT_ENTRY, "postings out of range"));
            }
            if previous.is_some_and(|p| p >= (e.hash, key)) {
                return Err(invalid(index.dict_at + i * DICT_ENTRY, "dictionary out of order"));
            }
            previous = Some((e.hash, key));
            total += u64::from(e.count);
        }
        if total != record_count {
            return Err(invalid(36, "record count differs from the dictionary's"));
        }
        // The key order: a permutation of the dictionary, keys strictly increasing.
        let mut seen = vec![false; key_count];
        let mut previous: Option<Option<&[u8]>> = None;
        for i in 0..key_count {
            let at = index.order_at + i * ORDER_ENTRY;
            let e = index.entry_in_key_order(i)?;
            let slot = seen.get_mut(be_u32(&index.bytes, at)? as usize);
            match slot {
                Some(s) if !*s => *s = true,
                _ => return Err(invalid(at, "key order is not a permutation")),
            }
            let key = index.key_of(&e)?;
            if previous.is_some_and(|p| p >= key) {
                return Err(invalid(at, "key order out of order"));
            }
            previous = Some(key);
        }
        Ok(index)
    }

    /// The index's bytes (what is persisted).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The segment's base offset.
    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// Every record from the base offset below this is indexed.
    pub fn end_offset(&self) -> Offset {
        self.end_offset
    }

    /// Bytes of the `.log` that were indexed.
    pub fn log_size(&self) -> u64 {
        self.log_size
    }

    /// Records indexed.
    pub fn record_count(&self) -> u64 {
        self.record_count
    }

    /// Distinct keys.
    pub fn key_count(&self) -> usize {
        self.key_count
    }

    /// Whether the segment may hold a key of hash `hash` (`false`: it surely does not; the
    /// filter errs the other way for about 0.4 % of absent keys).
    pub fn may_contain(&self, hash: u64) -> bool {
        if self.key_count == 0 {
            return false;
        }
        self.filter.as_ref().is_none_or(|f| f.contains(&hash))
    }

    /// The `i`th dictionary entry (hash order).
    pub fn entry(&self, i: usize) -> Result<DictEntry, DecodeError> {
        if i >= self.key_count {
            return Err(invalid(self.dict_at, "dictionary entry past the key count"));
        }
        let at = self.dict_at + i * DICT_ENTRY;
        let b = &self.bytes;
        Ok(DictEntry {
            hash: be_u64(b, at)?,
            key_at: be_u32(b, at + 8)?,
            key_len: be_u32(b, at + 12)?,
            postings_at: be_u32(b, at + 16)?,
            count: be_u32(b, at + 20)?,
        })
    }

    /// The key of `entry` (`None`: the null key).
    pub fn key_of(&self, entry: &DictEntry) -> Result<Option<&[u8]>, DecodeError> {
        if entry.key_len == NULL_KEY {
            return Ok(None);
        }
        let start = entry.key_at as usize;
        let end = start
            .checked_add(entry.key_len as usize)
            .filter(|end| *end <= self.keys_len)
            .ok_or_else(|| invalid(self.keys_at, "key out of range"))?;
        self.bytes
            .get(self.keys_at + start..self.keys_at + end)
            .map(Some)
            .ok_or_else(|| invalid(self.keys_at, "key out of range"))
    }

    /// The `i`th dictionary entry in key order (the null key first, then by bytes).
    pub fn entry_in_key_order(&self, i: usize) -> Result<DictEntry, DecodeError> {
        if i >= self.key_count {
            return Err(invalid(self.order_at, "key order entry past the key count"));
        }
        self.entry(be_u32(&self.bytes, self.order_at + i * ORDER_ENTRY)? as usize)
    }

    /// Index of the first dictionary entry whose hash is `>= hash`.
    fn lower_bound(&self, hash: u64) -> usize {
        let (mut lo, mut hi) = (0, self.key_count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.entry(mid) {
                Ok(e) if e.hash < hash => lo = mid + 1,
                _ => hi = mid,
            }
        }
        lo
    }

    /// The dictionary entries whose hash is `hash` (several only on a hash collision).
    pub fn entries_with_hash(&self, hash: u64) -> Vec<DictEntry> {
        if !self.may_contain(hash) {
            return Vec::new();
        }
        (self.lower_bound(hash)..self.key_count)
            .map_while(|i| self.entry(i).ok().filter(|e| e.hash == hash))
            .collect()
    }

    /// The entry of `key`, if the segment holds it.
    pub fn find(&self, key: Option<&[u8]>) -> Option<DictEntry> {
        self.entries_with_hash(key_hash(key)).into_iter().find(|e| self.key_of(e).ok() == Some(key))
    }

    /// The offsets of `entry`'s records, ascending.
    pub fn postings(&self, entry: &DictEntry) -> Result<Vec<Offset>, DecodeError> {
        let mut out = Vec::with_capacity(entry.count.min(1 << 16) as usize);
        self.postings_from(entry, Offset(i64::MIN), |o| out.push(o))?;
        Ok(out)
    }

    /// Calls `each` with the offsets of `entry`'s records from `from` on, ascending (decoding
    /// stops at the end of the postings; nothing is collected).
    pub fn postings_from(
        &self,
        entry: &DictEntry,
        from: Offset,
        mut each: impl FnMut(Offset),
    ) -> Result<(), DecodeError> {
        let section = self
            .bytes
            .get(self.postings_at..self.postings_at + self.postings_len)
            .unwrap_or_default();
        let mut pos = entry.postings_at as usize;
        let mut offset = self.base_offset.0;
        for i in 0..entry.count {
            let delta = get_uvarint(section, &mut pos)?;
            let delta = i64::try_from(delta).map_err(|_| invalid(pos, "offset delta too large"))?;
            if i > 0 && delta == 0 {
                return Err(invalid(self.postings_at + pos, "postings not increasing"));
            }
            offset = offset
                .checked_add(delta)
                .filter(|o| *o < self.end_offset.0)
                .ok_or_else(|| invalid(self.postings_at + pos, "offset past the index's end"))?;
            if offset >= from.0 {
                each(Offset(offset));
            }
        }
        Ok(())
    }

    /// The producer of the transactional batch holding `offset`, if one does.
    pub fn producer_at(&self, offset: Offset) -> Option<i64> {
        producer_in(&self.txns, offset)
    }

    /// Whether the segment has any transactional batch.
    pub fn has_txn_batches(&self) -> bool {
        !self.txns.is_empty()
    }
}

fn decode_filter(b: &[u8]) -> Result<BinaryFuse8, DecodeError> {
    if b.len() < FILTER_DESCRIPTOR {
        return Err(invalid(HEADER_LEN, "filter shorter than its descriptor"));
    }
    let seed = be_u64(b, 0)?;
    let segment_length = be_u32(b, 8)?;
    let segment_length_mask = be_u32(b, 12)?;
    let segment_count_length = be_u32(b, 16)?;
    let fingerprints: Box<[u8]> = b.get(FILTER_DESCRIPTOR..).unwrap_or_default().into();
    // The filter reads fingerprints at h0 < segment count length and at h0 plus one and two
    // segment lengths (low bits changed within the segment): all below (segments of the count
    // length, rounded up, plus two) segment lengths, which must be fingerprints.
    let fits = segment_length.is_power_of_two()
        && segment_length_mask == segment_length - 1
        && segment_count_length >= 1
        && (u64::from(segment_count_length).div_ceil(u64::from(segment_length)) + 2)
            * u64::from(segment_length)
            <= fingerprints.len() as u64;
    if !fits {
        return Err(invalid(HEADER_LEN, "filter geometry outside its fingerprints"));
    }
    let descriptor =
        xorf::Descriptor { seed, segment_length, segment_length_mask, segment_count_length };
    Ok(BinaryFuse8 { descriptor, fingerprints })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> KeyIndexBuilder {
        let mut b = KeyIndexBuilder::new(Offset(100));
        for o in 100..400 {
            let key = format!("k{}", o % 37);
            b.add(Some(key.as_bytes()), Offset(o));
        }
        b.add(None, Offset(400));
        b.add(Some(b""), Offset(401));
        b.add(Some(b"\xff/"), Offset(405));
        b.add_txn_batch(TxnBatch {
            base_offset: Offset(402),
            last_offset: Offset(404),
            producer_id: 7,
        });
        b
    }

    #[test]
    fn an_encoded_index_answers_like_its_builder() {
        let b = sample();
        let index = SegmentKeyIndex::decode(b.encode(Offset(406), 4096)).unwrap();
        assert_eq!(index.key_count(), 40);
        assert_eq!(index.record_count(), 303);
        assert_eq!(
            (index.base_offset(), index.end_offset(), index.log_size()),
            (Offset(100), Offset(406), 4096)
        );
        for k in 0..37 {
            let key = format!("k{k}");
            let e = index.find(Some(key.as_bytes())).unwrap();
            let got: Vec<i64> = index.postings(&e).unwrap().iter().map(|o| o.0).collect();
            assert_eq!(got, b.offsets(Some(key.as_bytes())));
        }
        let null = index.find(None).unwrap();
        assert_eq!(index.postings(&null).unwrap(), [Offset(400)]);
        let empty = index.find(Some(b"")).unwrap();
        assert_eq!(index.postings(&empty).unwrap(), [Offset(401)]);
        assert!(index.find(Some(b"absent")).is_none());
        assert_eq!(index.producer_at(Offset(403)), Some(7));
        assert_eq!(index.producer_at(Offset(405)), None);
        assert_eq!(index.producer_at(Offset(401)), None);
    }

    #[test]
    fn the_filter_rejects_most_absent_keys() {
        let index = SegmentKeyIndex::decode(sample().encode(Offset(406), 1)).unwrap();
        let admitted = (0..10_000)
            .filter(|i| index.may_contain(key_hash(Some(format!("x{i}").as_bytes()))))
            .count();
        assert!(admitted < 200, "{admitted} of 10000 absent keys admitted");
    }

    #[test]
    fn empty_and_tiny_indexes_encode() {
        let index =
            SegmentKeyIndex::decode(KeyIndexBuilder::new(Offset(5)).encode(Offset(5), 0)).unwrap();
        assert_eq!(index.key_count(), 0);
        assert!(!index.may_contain(key_hash(None)));
        let mut b = KeyIndexBuilder::new(Offset(0));
        b.add(Some(b"one"), Offset(3));
        let index = SegmentKeyIndex::decode(b.encode(Offset(4), 10)).unwrap();
        assert_eq!(index.postings(&index.find(Some(b"one")).unwrap()).unwrap(), [Offset(3)]);
    }

    #[test]
    fn every_damaged_byte_is_detected() {
        let bytes = sample().encode(Offset(406), 1);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(SegmentKeyIndex::decode(bad).is_err(), "flip at {i} not detected");
        }
        for len in 0..bytes.len() {
            assert!(SegmentKeyIndex::decode(bytes[..len].to_vec()).is_err());
        }
    }

    /// An index of another layout version (version 1, written before the key order) is
    /// refused, so a stored one is rebuilt, never misread.
    #[test]
    fn an_index_of_another_version_is_refused() {
        let mut bytes = sample().encode(Offset(406), 1);
        assert!(SegmentKeyIndex::decode(bytes.clone()).is_ok());
        bytes[4..6].copy_from_slice(&1u16.to_be_bytes());
        let crc = checksum(&bytes);
        bytes[8..12].copy_from_slice(&crc.to_be_bytes());
        let err = SegmentKeyIndex::decode(bytes).unwrap_err();
        assert!(err.to_string().contains("version"), "{err}");
    }

    /// The key order lists every key once, the null key first, then by bytes.
    #[test]
    fn entries_in_key_order_are_sorted_by_key_bytes() {
        let index = SegmentKeyIndex::decode(sample().encode(Offset(406), 1)).unwrap();
        let keys: Vec<Option<Vec<u8>>> = (0..index.key_count())
            .map(|i| {
                index.key_of(&index.entry_in_key_order(i).unwrap()).unwrap().map(<[u8]>::to_vec)
            })
            .collect();
        let mut expect = keys.clone();
        expect.sort();
        expect.dedup();
        assert_eq!(keys, expect);
        assert_eq!(keys.len(), 40);
        assert_eq!(keys[0], None);
        assert_eq!(keys[1].as_deref(), Some(&b""[..]));
    }

    /// Built in bulk, in parts joined in order, with keys short and long (kept in the arena),
    /// the index is byte for byte the one built record by record.
    #[test]
    fn the_bulk_builder_in_parts_encodes_what_the_incremental_one_does() {
        let key = |o: i64| match o % 7 {
            0 => None,
            1 => Some(format!("a-much-longer-key-than-sixteen-bytes-{}", o % 5).into_bytes()),
            _ => Some(format!("k{}", o % 13).into_bytes()),
        };
        let mut one = KeyIndexBuilder::new(Offset(1000));
        let mut parts: Vec<BulkKeyIndexBuilder> =
            (0..3).map(|_| BulkKeyIndexBuilder::new(Offset(1000))).collect();
        // 39,000 records: sorted through the radix partition on several threads.
        for o in 1000..40_000 {
            one.add(key(o).as_deref(), Offset(o));
            parts[((o - 1000) * 3 / 39_000) as usize].add(key(o).as_deref(), Offset(o));
        }
        let t = TxnBatch { base_offset: Offset(1003), last_offset: Offset(1009), producer_id: 3 };
        one.add_txn_batch(t);
        KeySink::add_txn_batch(&mut parts[0], t);
        let mut bulk = parts.remove(0);
        for p in parts {
            bulk.append(p);
        }
        assert_eq!(bulk.encode(Offset(40_000), 77), one.encode(Offset(40_000), 77));
        // And a builder on top of an encoded index answers as one that read everything.
        let half = {
            let mut b = KeyIndexBuilder::new(Offset(1000));
            for o in 1000..20_000 {
                b.add(key(o).as_deref(), Offset(o));
            }
            b
        };
        let mut top = KeyIndexBuilder::on_top_of(
            SegmentKeyIndex::decode(half.encode(Offset(20_000), 5)).unwrap(),
        );
        for o in 1000..40_000 {
            top.add(key(o).as_deref(), Offset(o));
        }
        top.add_txn_batch(t);
        for o in 0..20 {
            let k = key(o);
            assert_eq!(top.offsets(k.as_deref()), one.offsets(k.as_deref()), "key of {o}");
            assert_eq!(
                top.offsets_from(k.as_deref(), Offset(20_005)),
                one.offsets_from(k.as_deref(), Offset(20_005))
            );
        }
        assert_eq!(top.encode(Offset(40_000), 77), one.encode(Offset(40_000), 77));
    }

    /// Keys of one hash (forced: every key hashes to its length here, so `aa`, `bb` and `cc`
    /// collide, as do `x` and `y`, and the empty key shares the null key's 0) are kept apart by their bytes, in
    /// the bulk builder (sorted, in parts) and in the incremental one (and one on top of an
    /// encoded index), and a query for one returns that key's offsets only.
    #[test]
    fn keys_of_one_hash_are_kept_apart() {
        fn by_len(key: Option<&[u8]>) -> u64 {
            key.map_or(0, |k| k.len() as u64)
        }
        crate::format::key_name::with_key_hash(by_len, || {
            let keys: [Option<&[u8]>; 6] =
                [Some(b"aa"), Some(b"bb"), Some(b"cc"), Some(b"x"), Some(b"y"), None];
            // Offset o holds keys[o % 6], or the empty key when o % 11 == 0.
            let key = |o: i64| if o % 11 == 0 { Some(&b""[..]) } else { keys[(o % 6) as usize] };
            let mut one = KeyIndexBuilder::new(Offset(0));
            let mut parts: Vec<BulkKeyIndexBuilder> =
                (0..2).map(|_| BulkKeyIndexBuilder::new(Offset(0))).collect();
            for o in 0..3000 {
                one.add(key(o), Offset(o));
                parts[(o / 1500) as usize].add(key(o), Offset(o));
            }
            let mut bulk = parts.remove(0);
            bulk.append(parts.remove(0));
            let encoded = bulk.encode(Offset(3000), 9);
            assert_eq!(encoded, one.encode(Offset(3000), 9));
            let index = SegmentKeyIndex::decode(encoded).unwrap();
            assert_eq!(index.key_count(), 7);
            assert_eq!(index.entries_with_hash(2).len(), 3);
            let mut top = KeyIndexBuilder::on_top_of(
                SegmentKeyIndex::decode(one.encode(Offset(3000), 9)).unwrap(),
            );
            for o in 3000..3100 {
                top.add(key(o), Offset(o));
                one.add(key(o), Offset(o));
            }
            let mut all = keys.to_vec();
            all.push(Some(b""));
            for k in all {
                let want: Vec<i64> = (0..3000).filter(|&o| key(o) == k).collect();
                let entry = index.find(k).unwrap();
                assert_eq!(index.key_of(&entry).unwrap(), k);
                let got: Vec<i64> = index.postings(&entry).unwrap().iter().map(|o| o.0).collect();
                assert_eq!(got, want, "encoded, key {k:?}");
                assert_eq!(one.offsets_from(k, Offset(0))[..want.len()], want[..], "key {k:?}");
                assert_eq!(top.offsets(k), one.offsets(k), "on top, key {k:?}");
                assert!(one.offsets(k).iter().all(|&o| key(o) == k), "key {k:?}");
            }
            // A key of a shared hash that the segment does not hold is not found.
            assert!(index.find(Some(b"dd")).is_none());
            assert!(one.offsets(Some(b"dd")).is_empty());
            assert!(top.offsets(Some(b"z")).is_empty());
        });
    }

    /// Bytes with a valid CRC but hostile contents never panic.
    #[test]
    fn hostile_contents_with_a_valid_crc_never_panic() {
        let bytes = sample().encode(Offset(406), 1);
        let mut state = 0x9e3779b97f4a7c15u64;
        for _ in 0..3000 {
            let mut bad = bytes.clone();
            for _ in 0..4 {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let at = 12 + (state >> 33) as usize % (bad.len() - 12);
                bad[at] = (state >> 13) as u8;
            }
            let crc = checksum(&bad);
            bad[8..12].copy_from_slice(&crc.to_be_bytes());
            if let Ok(index) = SegmentKeyIndex::decode(bad) {
                for i in 0..index.key_count() {
                    let e = index.entry(i).unwrap();
                    let _ = index.key_of(&e);
                    let _ = index.postings(&e);
                }
                let _ = index.find(Some(b"k3"));
                let _ = index.may_contain(12345);
                let _ = index.producer_at(Offset(403));
            }
        }
    }
}
