//! Memory maps of index files: `unsafe` code, with `mount/memory.rs`'s one allocator call the
//! only `unsafe` in the crate.
//!
//! Kafka maps `.index` and `.timeindex` files so that lookups are plain memory reads and appends
//! are plain memory writes. Mapping a file is unsafe in Rust because another writer could change
//! or truncate it underneath the map (a truncation turns later reads into `SIGBUS`). The engine
//! therefore maps index files only when that cannot happen:
//!
//! - **Writable log dirs.** The data dir's `.lock` is held with an exclusive `flock` for as long
//!   as the engine runs ([`super::log_dirs::LogDirs::open`]); a Kafka broker takes the same lock, so
//!   no broker (and no second topicfs) can write the files. Inside the process, each index file
//!   is mapped by exactly one [`super::index::IndexFile`], which is the only code that resizes the
//!   file, and it always drops its map before calling `set_len`.
//! - **Read-only mounts never map.** A broker may be writing (and truncating or trimming) the
//!   files, so [`super::index::IndexFile::load_read_only`] copies index files into memory with
//!   `pread` instead. A concurrent truncation can then only make a read short, never fault.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;

use memmap2::{Mmap, MmapMut};

/// A read-write shared map of a whole index file of a log dir this process has locked.
///
/// **Invariant**: the file is not resized while this map exists (the owner drops the map before
/// any `set_len`), and no other process writes it (the log dir's `.lock` is held).
#[derive(Debug)]
pub(crate) struct IndexMapMut {
    map: MmapMut,
}

impl IndexMapMut {
    /// Maps all of `file` (opened read-write) shared and writable.
    ///
    /// The caller must hold the log dir's `.lock` and must not resize `file` while the returned
    /// map exists.
    pub fn map(file: &File) -> io::Result<IndexMapMut> {
        // SAFETY: the file belongs to a log dir whose `.lock` this process holds exclusively
        // (flock), so no Kafka broker or other topicfs instance writes or truncates it; within
        // the process the only code that resizes an index file is `IndexFile`, which drops this
        // map before every `set_len` and maps again afterwards. Memory writes through the map
        // are therefore the only concurrent change, and they go through `&mut self`.
        let map = unsafe { MmapMut::map_mut(file)? };
        Ok(IndexMapMut { map })
    }

    /// The mapped bytes (the whole file).
    pub fn as_slice(&self) -> &[u8] {
        &self.map
    }

    /// The mapped bytes, writable.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.map
    }
}

/// A read-only shared map of a sealed index file of a log dir this process has locked.
///
/// **Invariant**: as for [`IndexMapMut`], nothing resizes or rewrites the file while mapped.
#[derive(Debug)]
pub(crate) struct IndexMap {
    map: Mmap,
}

impl IndexMap {
    /// Maps all of `file` read-only.
    ///
    /// The caller must hold the log dir's `.lock` and must not resize `file` while the returned
    /// map exists.
    pub fn map(file: &File) -> io::Result<IndexMap> {
        // SAFETY: same precondition as `IndexMapMut::map`: the log dir's `.lock` is held by this
        // process, so no other process changes the file, and the owning `IndexFile` drops the
        // map before it resizes or rewrites the file.
        let map = unsafe { Mmap::map(file)? };
        Ok(IndexMap { map })
    }

    /// The mapped bytes (the whole file).
    pub fn as_slice(&self) -> &[u8] {
        &self.map
    }
}
