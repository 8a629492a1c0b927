//! Answering from the sealed indexes: a key's postings as hits, and the k-way merged key
//! listing over segments' dictionaries.

use std::collections::BinaryHeap;
use std::sync::Arc;

use topicfs_format::Offset;
use topicfs_format::key_index::{DictEntry, SegmentKeyIndex};
use topicfs_source::error::{Error, Result};
use topicfs_source::{KeyHit, KeyListing, KeyRecords};

pub(super) fn push_hits(
    index: &SegmentKeyIndex,
    entry: &DictEntry,
    from: Offset,
    hits: &mut Vec<KeyHit>,
) -> Result<()> {
    index
        .postings_from(entry, from, |offset| {
            hits.push(KeyHit { offset, producer_id: index.producer_at(offset) })
        })
        .map_err(|e| damaged(index, e))
}

/// A dictionary entry in the merge: its key, the index it comes from.
type HeapEntry = (Option<Vec<u8>>, usize);

/// A k-way merge of segments' dictionaries in key order (the null key first, then by bytes),
/// each walked in its own key order ([`SegmentKeyIndex::entry_in_key_order`]).
pub(super) struct MergedListing {
    pub(super) indexes: Vec<Arc<SegmentKeyIndex>>,
    /// Per index, the next dictionary entry to push.
    pub(super) next: Vec<usize>,
    /// Min-heap (by `Reverse`) of each index's current entry.
    pub(super) heap: BinaryHeap<std::cmp::Reverse<HeapEntry>>,
    pub(super) from: Offset,
    /// The log end offset read before the indexes caught up: records at or past it (a batch
    /// being appended) are not listed yet.
    pub(super) to: Offset,
}

impl MergedListing {
    /// Pushes index `i`'s next entry, if it has one.
    pub(super) fn advance(&mut self, i: usize) -> Result<()> {
        let (Some(index), Some(next)) = (self.indexes.get(i), self.next.get_mut(i)) else {
            return Ok(());
        };
        if *next >= index.key_count() {
            return Ok(());
        }
        let entry = index.entry_in_key_order(*next).map_err(|e| damaged(index, e))?;
        let key = index.key_of(&entry).map_err(|e| damaged(index, e))?.map(<[u8]>::to_vec);
        *next += 1;
        self.heap.push(std::cmp::Reverse((key, i)));
        Ok(())
    }
}

fn damaged(index: &SegmentKeyIndex, e: topicfs_format::DecodeError) -> Error {
    Error::corrupt(
        format!("key index of segment {}", index.base_offset()),
        e.at as u64,
        e.to_string(),
    )
}

impl KeyListing for MergedListing {
    fn next_key(&mut self) -> Result<Option<KeyRecords>> {
        loop {
            let Some(std::cmp::Reverse((key, i))) = self.heap.pop() else { return Ok(None) };
            let mut sources = vec![i];
            while let Some(std::cmp::Reverse(top)) = self.heap.peek() {
                if top.0 != key {
                    break;
                }
                let Some(std::cmp::Reverse((_, j))) = self.heap.pop() else { break };
                sources.push(j);
            }
            sources.sort_unstable();
            let mut hits = Vec::new();
            for &j in &sources {
                let index = match self.indexes.get(j) {
                    Some(index) => Arc::clone(index),
                    None => continue,
                };
                let at = self.next.get(j).copied().unwrap_or(0).saturating_sub(1);
                let entry = index.entry_in_key_order(at).map_err(|e| damaged(&index, e))?;
                push_hits(&index, &entry, self.from, &mut hits)?;
                self.advance(j)?;
            }
            hits.retain(|h| h.offset < self.to);
            if !hits.is_empty() {
                return Ok(Some((key, hits)));
            }
        }
    }

    fn keys_at_most(&self) -> u64 {
        self.indexes.iter().map(|i| i.key_count() as u64).sum()
    }
}
