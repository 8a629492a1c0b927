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

use crate::bytes::invalid;
pub use crate::key_name::key_hash;
use crate::{DecodeError, DecodeErrorKind, Offset};

mod bulk;
mod memory;
mod reader;
mod sort;
#[cfg(test)]
mod tests;

pub use bulk::BulkKeyIndexBuilder;
pub use memory::KeyIndexBuilder;
pub use reader::{DictEntry, SegmentKeyIndex};

/// How the independent jobs of a build run: the format layer starts no thread; a caller with
/// threads to lend runs the jobs on them. [`InOrder`] runs them one after another on the
/// caller's thread.
pub trait RunJobs: Sync {
    /// How many jobs run at once (at least 1): the work is cut into about this many jobs.
    fn width(&self) -> usize;
    /// Runs every job, returning when all are done.
    fn run_jobs<'a>(&self, jobs: Vec<Box<dyn FnOnce() + Send + 'a>>);
}

/// Runs jobs one after another on the caller's thread.
#[derive(Copy, Clone, Debug, Default)]
pub struct InOrder;

impl RunJobs for InOrder {
    fn width(&self) -> usize {
        1
    }

    fn run_jobs<'a>(&self, jobs: Vec<Box<dyn FnOnce() + Send + 'a>>) {
        for job in jobs {
            job();
        }
    }
}

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

/// What adds records to an index being built: [`KeyIndexBuilder`] (answers lookups as it
/// grows) and [`BulkKeyIndexBuilder`] (answers none, builds a whole segment's fast).
pub trait KeySink {
    /// Adds the record at `offset` whose key is `key`.
    fn add(&mut self, key: Option<&[u8]>, offset: Offset);
    /// Notes a transactional batch (in increasing offset order).
    fn add_txn_batch(&mut self, batch: TxnBatch);
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
