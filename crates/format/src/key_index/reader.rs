//! The reader: a decoded, checked index answering lookups from its bytes.

use super::*;

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
    pub(super) bytes: Vec<u8>,
    pub(super) base_offset: Offset,
    pub(super) end_offset: Offset,
    pub(super) log_size: u64,
    pub(super) record_count: u64,
    pub(super) key_count: usize,
    pub(super) filter: Option<BinaryFuse8>,
    pub(super) dict_at: usize,
    pub(super) keys_at: usize,
    pub(super) keys_len: usize,
    pub(super) postings_at: usize,
    pub(super) postings_len: usize,
    pub(super) order_at: usize,
    pub(super) txns: Vec<TxnBatch>,
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
