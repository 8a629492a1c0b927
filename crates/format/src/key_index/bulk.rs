//! The bulk builder: a whole segment's records gathered in one pass, then sorted and encoded
//! into the index file's bytes.

use super::sort::sort_by_hash;
use super::*;

/// Keys up to this long are kept in their [`Posting`], longer ones in the builder's arena.
pub(super) const INLINE_KEY: usize = 16;

/// One record in a [`BulkKeyIndexBuilder`]: its key's hash, its offset relative to the base,
/// its key (`key_len` [`NULL_KEY`]: the null key): the bytes themselves when at most
/// [`INLINE_KEY`] long (zero-padded; so comparing the keys of a hash's records reads only the
/// sorted records, no random access), else where they are in the builder's arena (big-endian
/// `u64` in the first 8 bytes).
#[derive(Copy, Clone, Debug, Default)]
pub(super) struct Posting {
    pub(super) hash: u64,
    pub(super) relative: u32,
    pub(super) key_len: u32,
    pub(super) key: [u8; INLINE_KEY],
}

/// Builds a whole segment's index fast (about 0.1 us a record however many keys): each record
/// appends its key's hash, offset and key bytes to arrays in one sequential pass, then
/// [`BulkKeyIndexBuilder::encode`] sorts the records by (hash, offset) (a radix partition by
/// the hash's top bits, then each part sorted, as jobs the caller may run at once, [`BulkKeyIndexBuilder::encode_with`]) and walks
/// them once, comparing keys' bytes only within a hash. No random access per record while
/// reading, no allocation per key. A segment read in parts on several threads gives one
/// builder per part, joined with [`BulkKeyIndexBuilder::append`].
#[derive(Clone, Debug, Default)]
pub struct BulkKeyIndexBuilder {
    pub(super) base_offset: Offset,
    pub(super) postings: Vec<Posting>,
    pub(super) arena: Vec<u8>,
    pub(super) txns: Vec<TxnBatch>,
}

impl Posting {
    /// Where a long key is in the arena.
    fn key_at(&self) -> u64 {
        let mut at = [0u8; 8];
        at.copy_from_slice(self.key.get(..8).unwrap_or(&[0; 8]));
        u64::from_be_bytes(at)
    }
}

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
    pub fn encode(self, end_offset: Offset, log_size: u64) -> Vec<u8> {
        self.encode_with(end_offset, log_size, &InOrder)
    }

    /// [`BulkKeyIndexBuilder::encode`], the sort's parts run as `run`'s jobs (on the
    /// caller's threads).
    pub fn encode_with(mut self, end_offset: Offset, log_size: u64, run: &dyn RunJobs) -> Vec<u8> {
        let postings = std::mem::take(&mut self.postings);
        let sorted = sort_by_hash(postings, |p: &Posting| (p.hash, p.relative), run);

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
