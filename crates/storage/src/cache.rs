//! The segment cache: what was learned about sealed segments, kept across remounts in a
//! directory outside the data dir (`--cache-dir`, default [`DEFAULT_CACHE_DIR`]).
//!
//! A sealed segment never changes while it exists, so anything computed from its bytes (the
//! rendered sizes of its records and render checkpoints, the aborted transactions it holds, a
//! key index) stays true as long as the segment is the same file with the same bytes. An entry
//! is one file per (segment, [`EntryKind`]); a kind is named by the cache's user
//! ([`topicfs_source::SpanKind`]), never by the cache, which knows nothing of what a payload
//! means:
//!
//! ```text
//! <cache dir>/<key hash, 16 hex>-<base offset, 20 digits>.<kind extension>
//!   magic "TFSCACHE" | version u16 | kind u8 | 0u8 | key length u32 | key | payload length u64
//!   | payload CRC-32C u32 | header CRC-32C u32 | payload
//!   key = data dir | topic | partition | base offset | size | mtime ns | inode | device
//!         | fingerprint            (strings: u16 length + UTF-8; integers big-endian)
//! ```
//!
//! **Invariants.**
//! - An entry is used only if every rule holds, checked in this order: the magic (else the file
//!   is *foreign*), the format version ([`FORMAT_VERSION`], else *foreign*), the kind, the header
//!   CRC (else *damaged*), the key's data dir, topic, partition and base offset (else *foreign*:
//!   another segment's entry under a colliding name), the segment's identity: size, mtime,
//!   inode, device and [`SegmentIdentity::fingerprint`] (else *stale*: the broker replaced,
//!   compacted or rewrote the segment), the file length and the payload CRC (else *damaged*). An
//!   entry that fails is ignored: [`SegmentCache::load`] answers `None`, logs one warning naming
//!   the file and the rule, and the caller rebuilds what it needed and stores it, which replaces
//!   the file.
//! - Nothing in a payload is trusted beyond its CRC: payload decoders (the users of this module)
//!   check lengths and bounds like any bytes from disk.
//! - An entry is written crash-safely: a temporary file in the cache dir (`O_EXCL`, mode 0600),
//!   `fsync`, `rename` over the entry's name, `fsync` of the directory. A crash leaves the old
//!   entry, the new one, or a temporary file that the next open removes (when older than a
//!   minute, so another mount's write in progress is left alone).
//! - The cache never fails a read: a cache dir that cannot be created, a full disk or an
//!   unwritable file logs a warning (once per cause) and the mount continues without what it
//!   could not store.
//! - Bounded: after a store pushes the entries past the size limit, the least recently used
//!   entries (by file mtime, which [`SegmentCache::load`] refreshes on a hit) are deleted until
//!   they take at most nine tenths of the limit. Several mounts may share one cache dir: names
//!   are per data dir, writes are atomic renames, and each recounts the directory when it evicts.
//! - Deleting the directory or any file in it at any time only costs the work of rebuilding.
//!
//! **Active-segment prefixes.** The active segment changes by appends only, so its bytes below
//! a batch boundary already passed are as stable as a sealed segment's until the file is
//! truncated or replaced. A prefix entry ([`EntryKind::prefix_of`]) describes the first `P` bytes of
//! the active segment (one entry per segment, the latest `P` stored): its key records `P` as
//! the size and 0 as the mtime, and [`SegmentCache::load_prefix`] checks it against
//! [`SegmentIdentity::of_prefix`]`(P)` computed now: a file now shorter than `P` (truncated) or
//! with another inode or device (replaced) makes it *stale*, as does a change of the
//! fingerprint of bytes `[0, 512)` and `[P - 4096, P)` (rewritten in place); bytes appended
//! past `P` leave it valid. The other rules (magic, version, kind, CRCs, key) are those above.
//!
//! **Beside the segments.** A log directory keeps the entries of the kinds that travel with the
//! log ([`topicfs_source::SpanKind::with_the_log`]: rendered sizes and transaction events, a
//! few bytes per MiB of log) in the partition directory itself, next to the segment they
//! describe ([`SegmentCache::beside_segments`]):
//!
//! ```text
//! <data dir>/<topic>-<partition>/<base offset, 20 digits>.topicfs-<kind extension>
//! ```
//!
//! with the same layout and checks as above (the key still names the data dir, so a moved
//! directory rebuilds them). A writable mount stores them there (and not in its cache dir), so
//! that any later mount of the directory, whatever its `--cache-dir` (`none` included), finds
//! the sizes of what the engine wrote; a read-only mount only loads them and never writes to
//! the data dir (not even an mtime). A broker loading the directory ignores these names (its
//! loader knows only segment, index and snapshot suffixes). They are not bounded by the cache
//! size: they go with their segment (retention, recovery and compaction remove them with it)
//! and a writable mount removes those whose segment is gone (a broker's retention) and the
//! temporary files of a crash (`.topicfs-tmp-*`) when it loads the partition.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use topicfs_format::Offset;
use topicfs_source::sync::lock;
use topicfs_source::{SpanKind, SummaryUpdate};

mod dir;
mod entry;
#[cfg(test)]
mod full_disk_tests;
#[cfg(test)]
mod tests;
mod writer;

pub use entry::{Rejected, SegmentIdentity};
use entry::{decode, encode, stored_size};
use writer::Job;

/// Where entries go unless `--cache-dir` says otherwise.
pub const DEFAULT_CACHE_DIR: &str = "/var/cache/topicfs";
/// The default bound on the entries' total size (`--cache-size`).
pub const DEFAULT_CACHE_SIZE: u64 = 256 << 20;
/// The entry layout's version: a file of another version is ignored (and replaced).
pub const FORMAT_VERSION: u16 = 1;

/// What an entry holds: the payloads of one [`SpanKind`] (named by its user: the render index,
/// the transaction tracker, the key index) for a sealed segment, or for an active segment's
/// stable prefix. One entry per (segment, kind); the payload's encoding is its user's, and the
/// cache knows a kind only by its extension and tag.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct EntryKind {
    /// The entry file's extension.
    pub extension: &'static str,
    /// The kind byte of the entry's header.
    pub tag: u8,
    /// Whether the entry describes the *stable prefix* of an active segment: its bytes
    /// `[0, P)`, proven by a [`SegmentIdentity::of_prefix`] (see "Active-segment prefixes" in
    /// the module docs).
    pub prefix: bool,
}

impl EntryKind {
    /// The entry of `kind` for a sealed segment.
    pub const fn sealed(kind: SpanKind) -> EntryKind {
        EntryKind { extension: kind.name, tag: kind.tag, prefix: false }
    }

    /// The entry of `kind` for an active segment's stable prefix; `None` when the kind is kept
    /// for sealed spans only.
    pub const fn prefix_of(kind: SpanKind) -> Option<EntryKind> {
        match kind.prefix {
            Some((extension, tag)) => Some(EntryKind { extension, tag, prefix: true }),
            None => None,
        }
    }

    /// Whether an entry of this kind describes an active segment's stable prefix.
    pub fn is_prefix(self) -> bool {
        self.prefix
    }

    /// The entry file's extension.
    pub fn extension(self) -> &'static str {
        self.extension
    }

    fn tag(self) -> u8 {
        self.tag
    }
}

/// The cache settings of a mount: `--cache-dir` (`None`: `-o cache_dir=none`, no cache) and
/// `--cache-size`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheSettings {
    pub dir: Option<PathBuf>,
    pub max_bytes: u64,
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings { dir: Some(PathBuf::from(DEFAULT_CACHE_DIR)), max_bytes: DEFAULT_CACHE_SIZE }
    }
}

/// The persistent per-segment cache of one mount (see the module docs). Cheap to share
/// (`Arc`); every method is callable from any thread and none fails.
#[derive(Debug)]
pub struct SegmentCache {
    /// `None`: caching is off (`cache_dir=none`, or the directory could not be made).
    dir: Option<PathBuf>,
    max_bytes: u64,
    /// The entries' total size as this mount knows it (recounted when evicting).
    used: AtomicU64,
    /// Files already warned about (one warning per file until it is stored again).
    warned: Mutex<HashSet<PathBuf>>,
    /// Whether a failed store was already logged at warn (later ones log at debug).
    store_warned: AtomicBool,
    /// Serializes eviction passes.
    evicting: Mutex<()>,
    temp_seq: AtomicU64,
    /// Entries queued and not yet written.
    queued: Arc<(Mutex<usize>, Condvar)>,
    /// The mount's executor, once set ([`SegmentCache::set_executor`]): queued updates are then
    /// written by `Store`-class tasks of it (without one, in place).
    executor: std::sync::OnceLock<topicfs_executor::Executor>,
    /// Held while an update is written (read, merged, stored): updates of one entry never
    /// interleave, whether written in place or by the executor's drain.
    updating: Mutex<()>,
    /// Updates waiting for the executor's drain task, in the order queued.
    pending: Mutex<std::collections::VecDeque<Job>>,
    /// Whether a drain task is queued or running (at most one at a time: updates run in order).
    draining: AtomicBool,
    /// Where the entries are: in `dir` itself, or beside the segments of the data dir `dir`.
    placement: Placement,
}

/// Where a [`SegmentCache`] keeps its entries (see "Beside the segments" in the module docs).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Placement {
    /// In the cache dir, bounded, named by key hash.
    CacheDir,
    /// In the partition directories of a data dir, next to their segments; stored only when
    /// `writable`.
    BesideSegments { writable: bool },
}

/// The name an entry of `kind` for the segment `base` has beside the segments.
pub fn beside_file_name(base: Offset, kind: EntryKind) -> String {
    format!("{:020}{BESIDE_INFIX}{}", base.0, kind.extension())
}

/// What follows the base offset in the name of every entry kept beside the segments.
const BESIDE_INFIX: &str = ".topicfs-";
/// The start of a temporary file's name beside the segments.
const BESIDE_TEMP: &str = ".topicfs-tmp-";

/// Whether `name` (of a file in a partition directory) is an entry kept beside the segments or
/// one's temporary file.
pub fn is_beside_name(name: &str) -> bool {
    name.starts_with(BESIDE_TEMP) || name.contains(BESIDE_INFIX)
}

/// Removes every entry kept beside the segments for the segment `base` of the partition
/// directory `dir` (its segment is being deleted or replaced). Failures are logged.
pub fn remove_beside_entries(dir: &Path, base: Offset) {
    let prefix = format!("{:020}{BESIDE_INFIX}", base.0);
    remove_beside_files(dir, |name| name.starts_with(&prefix));
}

/// Removes, from the partition directory `dir` of a writable mount, the entries kept beside
/// segments that no longer exist (deleted by a broker, or by a crash between a segment's
/// deletion and its entries') and temporary files older than a minute (a crash's).
pub fn remove_stray_beside_files(dir: &Path) {
    let now = SystemTime::now();
    remove_beside_files(dir, |name| {
        if name.starts_with(BESIDE_TEMP) {
            let old = std::fs::symlink_metadata(dir.join(name))
                .and_then(|m| m.modified())
                .map(|t| now.duration_since(t).unwrap_or_default() >= Duration::from_secs(60))
                .unwrap_or(false);
            return old;
        }
        match name.split_once(BESIDE_INFIX) {
            Some((digits, _))
                if digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()) =>
            {
                !dir.join(format!("{digits}.log")).exists()
            }
            _ => false,
        }
    });
}

fn remove_beside_files(dir: &Path, doomed: impl Fn(&str) -> bool) {
    let Ok(read) = super::open::read_dir(dir) else { return };
    for ent in read.flatten() {
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        if !is_beside_name(name) || !doomed(name) {
            continue;
        }
        match std::fs::remove_file(ent.path()) {
            Ok(()) => log::debug!("removed {}", ent.path().display()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("{}: not removed: {e}", ent.path().display()),
        }
    }
}

impl SegmentCache {
    /// A cache that keeps nothing.
    pub fn disabled() -> SegmentCache {
        SegmentCache {
            dir: None,
            max_bytes: 0,
            used: AtomicU64::new(0),
            warned: Mutex::new(HashSet::new()),
            store_warned: AtomicBool::new(false),
            evicting: Mutex::new(()),
            temp_seq: AtomicU64::new(0),
            queued: Arc::new((Mutex::new(0), Condvar::new())),
            executor: std::sync::OnceLock::new(),
            updating: Mutex::new(()),
            pending: Mutex::new(std::collections::VecDeque::new()),
            draining: AtomicBool::new(false),
            placement: Placement::CacheDir,
        }
    }

    /// The entries the log directory `data_dir` (canonical) keeps beside its segments (see
    /// "Beside the segments" in the module docs): stored only when `writable`, loaded either
    /// way. Unbounded (they go with their segments) and never failing, like any cache.
    pub fn beside_segments(data_dir: &Path, writable: bool) -> SegmentCache {
        SegmentCache {
            dir: Some(data_dir.to_path_buf()),
            max_bytes: u64::MAX,
            placement: Placement::BesideSegments { writable },
            ..SegmentCache::disabled()
        }
    }

    /// Whether this cache stores entries (a cache dir is set, or it is beside the segments of
    /// a writable mount).
    pub fn stores(&self) -> bool {
        self.dir.is_some() && self.placement != Placement::BesideSegments { writable: false }
    }

    /// Opens (creating it, mode 0700) the cache dir of `settings`. Never fails: a directory that
    /// cannot be created or listed logs a warning and gives a disabled cache.
    pub fn open(settings: &CacheSettings) -> SegmentCache {
        let Some(dir) = &settings.dir else { return SegmentCache::disabled() };
        let made = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| e.to_string())
            .and_then(|()| super::open::read_dir(dir).map(drop).map_err(|e| e.to_string()));
        if let Err(e) = made {
            log::warn!(
                "segment cache {}: cannot use the directory ({e}); continuing without a cache",
                dir.display()
            );
            return SegmentCache::disabled();
        }
        let cache = SegmentCache {
            dir: Some(dir.clone()),
            max_bytes: settings.max_bytes,
            ..SegmentCache::disabled()
        };
        let used = cache.scan(true).iter().map(|e| e.len).sum();
        cache.used.store(used, Ordering::Relaxed);
        if used > cache.max_bytes {
            cache.evict();
        }
        cache
    }

    /// The cache dir, `None` when caching is off.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The bound on the entries' total size.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The entry file of `id` and `kind` (whether or not it exists); `None` when caching is off.
    pub fn entry_path(&self, id: &SegmentIdentity, kind: EntryKind) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(match self.placement {
            Placement::CacheDir => dir.join(id.file_name(kind)),
            Placement::BesideSegments { .. } => dir
                .join(topicfs_format::file_name::partition_dir_name(&id.topic, id.partition))
                .join(beside_file_name(id.base_offset, kind)),
        })
    }

    /// The payload stored for `id` and `kind`, if an entry exists and passes every check (see
    /// the module docs); otherwise `None`, with one warning per rejected file naming it.
    pub fn load(&self, id: &SegmentIdentity, kind: EntryKind) -> Option<Vec<u8>> {
        let path = self.entry_path(id, kind)?;
        // Through `storage::open`: a FIFO or device planted under an entry's name is refused
        // without blocking.
        let mut file = match super::open::open_read(&path) {
            Ok(f) => f,
            Err(e) if super::open::is_not_found(&e) => return None,
            Err(e) => {
                self.warn_once(&path, &format!("cannot be read ({e})"));
                return None;
            }
        };
        let mut bytes = Vec::new();
        if let Err(e) = file.read_to_end(&mut bytes) {
            self.warn_once(&path, &format!("cannot be read ({e})"));
            return None;
        }
        match decode(&bytes, id, kind) {
            Ok(payload) => {
                let payload = payload.to_vec();
                self.touch(&file);
                Some(payload)
            }
            Err(why) => {
                self.warn_once(&path, &format!("{why}; ignored, it will be rebuilt"));
                None
            }
        }
    }

    /// The prefix length and payload of the `kind` entry ([`EntryKind::is_prefix`]) of the
    /// active segment `name` names (only its data dir, topic, partition and base offset are read),
    /// if it passes every check against `identify(prefix)`, the identity of the segment's
    /// first `prefix` bytes now (`None`: the file is shorter, truncated since: *stale*). The
    /// prefix length is read from the entry's key before the checks; the checks are then those
    /// of [`SegmentCache::load`], in the same order, with the same warning on a rejection.
    pub fn load_prefix(
        &self,
        name: &SegmentIdentity,
        kind: EntryKind,
        identify: impl FnOnce(u64) -> Option<SegmentIdentity>,
    ) -> Option<(u64, Vec<u8>)> {
        let path = self.entry_path(name, kind)?;
        let (file, bytes) = self.read_entry(&path)?;
        // The key's size field, before anything is checked: a damaged or foreign file fails
        // the checks below whatever it says here.
        let prefix = stored_size(&bytes).unwrap_or(0);
        let id = match identify(prefix) {
            Some(id) => id,
            None => {
                let why = Rejected::Stale("size (shorter than the cached prefix)");
                self.warn_once(&path, &format!("{why}; ignored, it will be rebuilt"));
                return None;
            }
        };
        match decode(&bytes, &id, kind) {
            Ok(payload) => {
                self.touch(&file);
                Some((prefix, payload.to_vec()))
            }
            Err(why) => {
                self.warn_once(&path, &format!("{why}; ignored, it will be rebuilt"));
                None
            }
        }
    }

    fn read_entry(&self, path: &Path) -> Option<(File, Vec<u8>)> {
        let mut file = match super::open::open_read(path) {
            Ok(f) => f,
            Err(e) if super::open::is_not_found(&e) => return None,
            Err(e) => {
                self.warn_once(path, &format!("cannot be read ({e})"));
                return None;
            }
        };
        let mut bytes = Vec::new();
        if let Err(e) = file.read_to_end(&mut bytes) {
            self.warn_once(path, &format!("cannot be read ({e})"));
            return None;
        }
        Some((file, bytes))
    }

    /// Stores `payload` as the entry of `id` and `kind`, crash-safely, replacing any entry
    /// there. A failure (full disk, unwritable dir) is logged, never returned.
    pub fn store(&self, id: &SegmentIdentity, kind: EntryKind, payload: &[u8]) {
        if !self.stores() {
            return;
        }
        let Some(path) = self.entry_path(id, kind) else { return };
        let Some(dir) = path.parent() else { return };
        let bytes = encode(id, kind, payload);
        let old = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        match self.write_atomically(dir, &path, &bytes) {
            Ok(()) => {
                lock(&self.warned).remove(&path);
                let used =
                    self.used.fetch_add(bytes.len() as u64, Ordering::Relaxed) + bytes.len() as u64;
                self.used.fetch_sub(old.min(used), Ordering::Relaxed);
                if used.saturating_sub(old) > self.max_bytes {
                    self.evict();
                }
            }
            Err(e) => {
                let msg = format!(
                    "segment cache: cannot store {} ({e}); continuing without caching it",
                    path.display()
                );
                if self.store_warned.swap(true, Ordering::Relaxed) {
                    log::debug!("{msg}");
                } else {
                    log::warn!("{msg} (further failures are logged at debug level)");
                }
                if e.raw_os_error() == Some(libc::ENOSPC) {
                    // Make room for the next one, if our own entries are what fills the disk.
                    self.evict();
                }
            }
        }
    }

    /// [`SegmentCache::update_later`] in place.
    pub fn update(&self, id: &SegmentIdentity, kind: EntryKind, update: SummaryUpdate) {
        if !self.stores() {
            return;
        }
        let old = if kind.is_prefix() {
            // A prefix entry of another length is replaced, not merged, and without a
            // warning: the active segment grew since it was written (nothing is wrong).
            self.entry_path(id, kind)
                .and_then(|path| super::open::open_read(&path).ok())
                .and_then(|mut f| {
                    let mut bytes = Vec::new();
                    f.read_to_end(&mut bytes).ok().map(|_| bytes)
                })
                .and_then(|bytes| decode(&bytes, id, kind).ok().map(<[u8]>::to_vec))
        } else {
            self.load(id, kind)
        };
        if let Some(payload) = update(old) {
            self.store(id, kind, &payload);
        }
    }

    /// Deletes the entry of `id` and `kind`, if any.
    pub fn remove(&self, id: &SegmentIdentity, kind: EntryKind) {
        if !self.stores() {
            return;
        }
        if let Some(path) = self.entry_path(id, kind) {
            if let Ok(meta) = std::fs::metadata(&path) {
                if std::fs::remove_file(&path).is_ok() {
                    self.used.fetch_sub(meta.len().min(self.used()), Ordering::Relaxed);
                }
            }
        }
    }

    /// The entries' total size as this mount counts it.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
}
