//! The per-segment key index: which records of one segment hold which key.
//!
//! Built once per sealed segment (segments never change once rolled) and kept in topicfs's
//! segment cache, outside the data dir; the active segment's is built in memory with the same
//! [`KeyIndexBuilder`]. Pure: bytes in, bytes out.
//!
//! # Layout (version 1, big-endian like Kafka's own files)
//!
//! | position | field |
//! |---|---|
//! | 0 | magic `TFKI` |
//! | 4 | version `u16` (1), flags `u16` (bit 0: a filter is present) |
//! | 8 | CRC-32C `u32` of every other byte of the index |
//! | 12 | base offset `i64`, end offset `i64` (every record below it, from the base offset on, is indexed) |
//! | 28 | log size `u64`: the `.log` bytes indexed (a segment of another size is not this one) |
//! | 36 | record count `u64`, key count `u32`, transactional batch count `u32` |
//! | 52 | filter, keys and postings section lengths, `u32` each; 8 reserved bytes |
//! | 72 | filter: a binary fuse filter of the key hashes (seed `u64`, segment length, its mask, segment count length `u32` each, then one fingerprint byte per slot) |
//! | | dictionary: per key, 24 bytes: hash `u64` ([`key_hash`]), key position and length in the keys section `u32` each (length `u32::MAX`: the null key), postings position and record count `u32` each; sorted by hash, then null first, then key bytes, so keys whose hashes collide sit side by side and are told apart by their bytes |
//! | | keys: the key bytes, concatenated |
//! | | postings: per key, its records' offsets as unsigned LEB128 varints, the first relative to the base offset, each next one the (positive) difference to the previous |
//! | | transactional batches: 24 bytes each, base offset, last offset, producer id (`i64`), by base offset: a read-committed query tells aborted records from these without reading them |
//!
//! **Invariants** checked by [`SegmentKeyIndex::decode`] before anything is trusted: the CRC,
//! every section within the bytes and the lengths adding up exactly, every key and postings
//! range inside its section, the dictionary sorted, the record counts adding up, the filter's
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
pub const VERSION: u16 = 1;
/// Bytes before the filter.
pub const HEADER_LEN: usize = 72;
const DICT_ENTRY: usize = 24;
const TXN_ENTRY: usize = 24;
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

/// A key's hash, the key, its offsets, while encoding.
type Entry<'a> = (u64, Option<&'a [u8]>, &'a [i64]);

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

/// The records of one segment by key, as they are read (the active segment's index in memory,
/// and every index before it is encoded).
#[derive(Clone, Debug, Default)]
pub struct KeyIndexBuilder {
    base_offset: Offset,
    /// By [`key_hash`]: the first key seen with that hash.
    slots: HashMap<u64, Slot, BuildHasherDefault<Prehashed>>,
    /// Keys whose hash an earlier key in `slots` has (a collision: practically never).
    collided: Vec<(u64, Slot)>,
    txns: Vec<TxnBatch>,
    records: u64,
}

impl KeyIndexBuilder {
    /// An empty index of the segment whose base offset is `base_offset`.
    pub fn new(base_offset: Offset) -> KeyIndexBuilder {
        KeyIndexBuilder { base_offset, ..KeyIndexBuilder::default() }
    }

    /// The segment's base offset.
    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// Records added.
    pub fn record_count(&self) -> u64 {
        self.records
    }

    /// Distinct keys added.
    pub fn key_count(&self) -> usize {
        self.slots.len() + self.collided.len()
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
    /// Records below the base offset, or not above the key's previous one, are not indexed
    /// (they cannot be encoded; a log never has them).
    pub fn add(&mut self, key: Option<&[u8]>, offset: Offset) {
        if offset < self.base_offset {
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

    /// The offsets of `key`'s records, ascending.
    pub fn offsets(&self, key: Option<&[u8]>) -> &[i64] {
        self.slot(key).map_or(&[], |s| s.offsets.as_slice())
    }

    /// The keys added whose [`key_hash`] is `hash`.
    pub fn keys_with_hash(&self, hash: u64) -> Vec<Option<Vec<u8>>> {
        let first = self.slots.get(&hash).into_iter();
        let more = self.collided.iter().filter(|(h, _)| *h == hash).map(|(_, s)| s);
        first.chain(more).map(|s| s.key.as_deref().map(<[u8]>::to_vec)).collect()
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
        let mut entries: Vec<Entry<'_>> = self
            .slots
            .iter()
            .chain(self.collided.iter().map(|(h, s)| (h, s)))
            .map(|(h, s)| (*h, s.key.as_deref(), s.offsets.as_slice()))
            .collect();
        entries.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));

        let mut hashes: Vec<u64> = entries.iter().map(|e| e.0).collect();
        hashes.dedup();
        let filter = if hashes.is_empty() { None } else { BinaryFuse8::try_from(&hashes).ok() };

        let mut keys = Vec::new();
        let mut postings = Vec::new();
        let mut dict = Vec::with_capacity(entries.len() * DICT_ENTRY);
        for (hash, key, offsets) in &entries {
            dict.extend_from_slice(&hash.to_be_bytes());
            match key {
                Some(k) => {
                    dict.extend_from_slice(&(keys.len() as u32).to_be_bytes());
                    dict.extend_from_slice(&(k.len() as u32).to_be_bytes());
                    keys.extend_from_slice(k);
                }
                None => {
                    dict.extend_from_slice(&0u32.to_be_bytes());
                    dict.extend_from_slice(&NULL_KEY.to_be_bytes());
                }
            }
            dict.extend_from_slice(&(postings.len() as u32).to_be_bytes());
            dict.extend_from_slice(&(offsets.len() as u32).to_be_bytes());
            let mut prev = self.base_offset.0;
            for o in offsets.iter() {
                // Offsets are >= the base and strictly increasing (`add`).
                put_uvarint(&mut postings, (o - prev) as u64);
                prev = *o;
            }
        }
        let mut filter_bytes = Vec::new();
        if let Some(f) = &filter {
            filter_bytes.extend_from_slice(&f.descriptor.seed.to_be_bytes());
            filter_bytes.extend_from_slice(&f.descriptor.segment_length.to_be_bytes());
            filter_bytes.extend_from_slice(&f.descriptor.segment_length_mask.to_be_bytes());
            filter_bytes.extend_from_slice(&f.descriptor.segment_count_length.to_be_bytes());
            filter_bytes.extend_from_slice(&f.fingerprints);
        }

        let mut out = Vec::with_capacity(
            HEADER_LEN + filter_bytes.len() + dict.len() + keys.len() + postings.len(),
        );
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_be_bytes());
        let flags = if filter.is_some() { FLAG_FILTER } else { 0 };
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(&[0; 4]); // CRC, below.
        out.extend_from_slice(&self.base_offset.0.to_be_bytes());
        out.extend_from_slice(&end_offset.0.to_be_bytes());
        out.extend_from_slice(&log_size.to_be_bytes());
        out.extend_from_slice(&self.records.to_be_bytes());
        out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        out.extend_from_slice(&(self.txns.len() as u32).to_be_bytes());
        out.extend_from_slice(&(filter_bytes.len() as u32).to_be_bytes());
        out.extend_from_slice(&(keys.len() as u32).to_be_bytes());
        out.extend_from_slice(&(postings.len() as u32).to_be_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&filter_bytes);
        out.extend_from_slice(&dict);
        out.extend_from_slice(&keys);
        out.extend_from_slice(&postings);
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
        let txn_at = postings_at + postings_len;
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
        let section = self
            .bytes
            .get(self.postings_at..self.postings_at + self.postings_len)
            .unwrap_or_default();
        let mut pos = entry.postings_at as usize;
        let mut out = Vec::with_capacity(entry.count.min(1 << 16) as usize);
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
            out.push(Offset(offset));
        }
        Ok(out)
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
