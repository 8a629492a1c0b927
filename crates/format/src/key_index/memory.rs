//! The in-memory builder: the active segment's index, answering lookups as records are
//! appended.

use super::*;

/// One key of a [`KeyIndexBuilder`] and its offsets.
#[derive(Clone, Debug)]
struct Slot {
    key: Option<Box<[u8]>>,
    offsets: Vec<i64>,
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
        self.encode_with(end_offset, log_size, &InOrder)
    }

    /// [`KeyIndexBuilder::encode`], its sort run as `run`'s jobs (see
    /// [`BulkKeyIndexBuilder::encode_with`]).
    pub fn encode_with(&self, end_offset: Offset, log_size: u64, run: &dyn RunJobs) -> Vec<u8> {
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
        bulk.encode_with(end_offset, log_size, run)
    }
}
