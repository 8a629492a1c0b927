//! A partition's records by key, for a source that indexes them ([`KeyIndex`]).

use topicfs_format::Offset;

use crate::error::Result;

#[cfg(doc)]
use super::PartitionSource;

/// One record a [`KeyIndex`] found: its offset and, when its batch is transactional, the
/// producer (a read-committed reader hides it when that producer's transaction was aborted).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct KeyHit {
    pub offset: Offset,
    pub producer_id: Option<i64>,
}

/// What a [`KeyIndex`] lookup found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyHits {
    /// The records holding the key, ascending, from the offset asked for (at or above the log
    /// start offset).
    pub hits: Vec<KeyHit>,
    /// Every record below this offset was indexed when the lookup ran: no record below it that
    /// holds the key is missing from `hits` (the log end offset of that moment).
    pub indexed_to: Offset,
}

/// One key of a [`KeyListing`] and its records.
pub type KeyRecords = (Option<Vec<u8>>, Vec<KeyHit>);

/// The distinct keys of a partition, one at a time (see [`KeyIndex::listing`]).
pub trait KeyListing: Send {
    /// The next key and its records, `None` after the last.
    fn next_key(&mut self) -> Result<Option<KeyRecords>>;
    /// At least as many keys as the listing has (the sum of its segments' key counts): what
    /// generating it all would cost.
    fn keys_at_most(&self) -> u64;
}

/// A partition's records by key: the per-segment key indexes of the log engine. Reached by
/// [`PartitionSource::key_index`]; a source without one (a cluster) has no `by-key/`,
/// `latest/` or `keys`.
pub trait KeyIndex: Send + Sync {
    /// The records whose key is `key` (`None`: the null key) at offsets `>= from`, catching up
    /// with what was appended first. Touches only the segments whose filters admit the key.
    fn key_hits(&self, key: Option<&[u8]>, from: Offset) -> Result<KeyHits>;
    /// The keys whose long name (`%~`, see [`topicfs_format::key_name`]) holds these hashes.
    fn keys_named(&self, h0: u64, h1: u64) -> Result<Vec<Vec<u8>>>;
    /// Every distinct key now, in the index's hash order, with its records, streamed: the
    /// listing holds the indexes, not the keys.
    fn listing(&self) -> Result<Box<dyn KeyListing>>;
    /// Whether anything indexed so far is in a transactional batch. `false` means no record
    /// found so far can be aborted or wait for a transaction: a read-committed reader then shows
    /// them all without scanning for transaction markers.
    fn transactional(&self) -> bool;
}
