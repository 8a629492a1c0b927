//! The cleaner's offset map (Kafka's `SkimpyOffsetMap`): key hash → latest offset, in a fixed
//! table sized by `log.cleaner.dedupe.buffer.size`.
//!
//! Each slot is 24 bytes, as Kafka's (an MD5 of 16 bytes plus an 8-byte offset): here the hash
//! is 128 bits made of two xxHash64 digests of the key (seeds 0 and 1, the pair
//! [`topicfs_format::key_name::long_hashes`] computes), which is as good as MD5 for telling keys
//! apart (a collision of 128-bit hashes between two keys of one partition is not a practical
//! concern) and much faster. Open addressing with linear probing; the table is filled to at
//! most [`LOAD_FACTOR`] of its slots (Kafka's `log.cleaner.io.buffer.load.factor`, 0.9), after
//! which [`OffsetMap::put`] of a new key answers "full".
//!
//! **Invariant**: a slot with `offset == EMPTY` is free; every other slot holds the hash of one
//! key put since the last [`OffsetMap::clear`] and the largest offset put for it.

use topicfs_format::Offset;
use topicfs_format::key_name::long_hashes;

/// Bytes per slot: 16 of hash, 8 of offset (Kafka: MD5 + offset).
pub const BYTES_PER_ENTRY: usize = 24;
/// Kafka's `log.cleaner.io.buffer.load.factor`.
pub const LOAD_FACTOR: f64 = 0.9;

const EMPTY: i64 = i64::MIN;

#[derive(Copy, Clone, Debug)]
struct Slot {
    h0: u64,
    h1: u64,
    offset: i64,
}

const FREE: Slot = Slot { h0: 0, h1: 0, offset: EMPTY };

/// See the module doc.
#[derive(Debug)]
pub struct OffsetMap {
    slots: Vec<Slot>,
    used: usize,
    max_entries: usize,
    /// Largest offset the map covers ([`OffsetMap::set_latest_offset`]); records after it are
    /// not described by the map.
    latest: Offset,
}

impl OffsetMap {
    /// A map using at most `buffer_bytes` for its table (at least one slot).
    pub fn new(buffer_bytes: usize) -> OffsetMap {
        let n = (buffer_bytes / BYTES_PER_ENTRY).max(2);
        let max_entries = ((n as f64 * LOAD_FACTOR) as usize).clamp(1, n - 1);
        OffsetMap { slots: vec![FREE; n], used: 0, max_entries, latest: Offset(-1) }
    }

    /// Number of slots in the table.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Most keys the map holds before [`OffsetMap::put`] answers "full".
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.used
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Forgets every key; the latest offset becomes `latest`.
    pub fn clear(&mut self, latest: Offset) {
        if self.used > 0 {
            self.slots.fill(FREE);
        }
        self.used = 0;
        self.latest = latest;
    }

    /// The largest offset the map covers.
    pub fn latest_offset(&self) -> Offset {
        self.latest
    }

    /// Raises the largest offset the map covers to `offset`.
    pub fn set_latest_offset(&mut self, offset: Offset) {
        self.latest = self.latest.max(offset);
    }

    fn find(&self, h0: u64, h1: u64) -> usize {
        let n = self.slots.len();
        let mut i = (h0 % n as u64) as usize;
        loop {
            match self.slots.get(i) {
                Some(s) if s.offset == EMPTY || (s.h0 == h0 && s.h1 == h1) => return i,
                Some(_) => i = (i + 1) % n,
                None => return 0,
            }
        }
    }

    /// Records `offset` as the latest of `key` (the larger of it and the one held). `false`,
    /// changing nothing, when `key` is new and the map is full.
    pub fn put(&mut self, key: &[u8], offset: Offset) -> bool {
        let (h0, h1) = long_hashes(key);
        let i = self.find(h0, h1);
        let Some(slot) = self.slots.get_mut(i) else { return false };
        if slot.offset == EMPTY {
            if self.used >= self.max_entries {
                return false;
            }
            self.used += 1;
            *slot = Slot { h0, h1, offset: offset.0 };
        } else {
            slot.offset = slot.offset.max(offset.0);
        }
        true
    }

    /// The latest offset of `key`, if the map holds it.
    pub fn get(&self, key: &[u8]) -> Option<Offset> {
        let (h0, h1) = long_hashes(key);
        let s = self.slots.get(self.find(h0, h1))?;
        (s.offset != EMPTY).then_some(Offset(s.offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_map_keeps_the_latest_offset_and_refuses_new_keys_when_full() {
        let mut m = OffsetMap::new(24 * 10);
        assert_eq!(m.max_entries(), 9);
        for i in 0..9u32 {
            assert!(m.put(&i.to_be_bytes(), Offset(i64::from(i))));
        }
        assert!(!m.put(b"new key", Offset(100)), "a tenth key does not fit at load factor 0.9");
        assert!(m.put(&3u32.to_be_bytes(), Offset(50)), "an existing key still updates");
        assert!(m.put(&3u32.to_be_bytes(), Offset(7)), "an older offset never lowers it");
        assert_eq!(m.get(&3u32.to_be_bytes()), Some(Offset(50)));
        assert_eq!(m.get(b"new key"), None);
        m.clear(Offset(4));
        assert_eq!((m.len(), m.get(&3u32.to_be_bytes()), m.latest_offset()), (0, None, Offset(4)));
    }
}
