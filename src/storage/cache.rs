//! The segment cache: what was learned about sealed segments, kept across remounts in a
//! directory outside the data dir (`--cache-dir`, default [`DEFAULT_CACHE_DIR`]).
//!
//! A sealed segment never changes while it exists, so anything computed from its bytes (the
//! rendered sizes of its records and render checkpoints, the aborted transactions it holds, a
//! key index) stays true as long as the segment is the same file with the same bytes. An entry
//! is one file per (segment, [`CacheKind`]):
//!
//! ```text
//! <cache dir>/<key hash, 16 hex>-<base offset, 20 digits>.<kind>
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
//! truncated or replaced. A [`CacheKind::PrefixRender`] entry describes the first `P` bytes of
//! the active segment (one entry per segment, the latest `P` stored): its key records `P` as
//! the size and 0 as the mtime, and [`SegmentCache::load_prefix`] checks it against
//! [`SegmentIdentity::of_prefix`]`(P)` computed now: a file now shorter than `P` (truncated) or
//! with another inode or device (replaced) makes it *stale*, as does a change of the
//! fingerprint of bytes `[0, 512)` and `[P - 4096, P)` (rewritten in place); bytes appended
//! past `P` leave it valid. The other rules (magic, version, kind, CRCs, key) are those above.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use crate::format::Offset;
use crate::sync::lock;

/// Where entries go unless `--cache-dir` says otherwise.
pub const DEFAULT_CACHE_DIR: &str = "/var/cache/topicfs";
/// The default bound on the entries' total size (`--cache-size`).
pub const DEFAULT_CACHE_SIZE: u64 = 256 << 20;
/// The entry layout's version: a file of another version is ignored (and replaced).
pub const FORMAT_VERSION: u16 = 1;

const MAGIC: &[u8; 8] = b"TFSCACHE";
/// Temporary files older than this are crash leftovers; younger ones may be another mount's.
const STALE_TEMP_AGE: Duration = Duration::from_secs(60);
/// A hit refreshes an entry's mtime (its place in the LRU order) at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(60);
/// Bytes at the start and at the end of a segment that its fingerprint covers.
const FINGERPRINT_HEAD: u64 = 512;
const FINGERPRINT_TAIL: u64 = 4096;

/// What an entry holds. One entry per (segment, kind); the payload's encoding is its user's.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum CacheKind {
    /// Rendered sizes and render checkpoints of a segment, per format (`view`'s sizing).
    RenderSummary,
    /// The transactions a segment's batches hold: what `read_committed` needs to know of it.
    TxnSummary,
    /// A per-segment index of record keys (issue 21).
    KeyIndex,
    /// Rendered sizes and render checkpoints of the *stable prefix* of an active segment: its
    /// bytes `[0, P)`, proven by a [`SegmentIdentity::of_prefix`] (see "Active-segment
    /// prefixes" in the module docs).
    PrefixRender,
    /// The transactions of the stable prefix of an active segment (as [`CacheKind::TxnSummary`]
    /// of a sealed one), proven like [`CacheKind::PrefixRender`].
    PrefixTxn,
}

impl CacheKind {
    fn tag(self) -> u8 {
        match self {
            CacheKind::RenderSummary => 1,
            CacheKind::TxnSummary => 2,
            CacheKind::KeyIndex => 3,
            CacheKind::PrefixRender => 4,
            CacheKind::PrefixTxn => 5,
        }
    }

    /// Whether an entry of this kind describes an active segment's stable prefix.
    pub fn is_prefix(self) -> bool {
        matches!(self, CacheKind::PrefixRender | CacheKind::PrefixTxn)
    }

    /// The entry file's extension.
    pub fn extension(self) -> &'static str {
        match self {
            CacheKind::RenderSummary => "render",
            CacheKind::TxnSummary => "txn",
            CacheKind::KeyIndex => "keys",
            CacheKind::PrefixRender => "prefix",
            CacheKind::PrefixTxn => "prefix-txn",
        }
    }

    fn from_extension(ext: &str) -> Option<CacheKind> {
        [
            CacheKind::RenderSummary,
            CacheKind::TxnSummary,
            CacheKind::KeyIndex,
            CacheKind::PrefixRender,
        ]
        .into_iter()
        .find(|k| k.extension() == ext)
    }
}

/// Which sealed segment an entry describes, and what proves it is still the same bytes.
///
/// The *key* (data dir, topic, partition, base offset) names the segment; the rest proves that
/// the file is unchanged since the entry was written. A broker that deletes a segment and writes
/// a new one with the same base offset (compaction's `.cleaned` → `.swap` → `.log`, a
/// replacement after truncation) changes the inode and almost always the size and mtime; the
/// fingerprint (CRC-32C of the first 512 and last 4096 bytes) catches a rewrite in place that
/// kept all three.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentIdentity {
    /// The data dir, canonical (so two spellings of one directory share entries).
    pub data_dir: PathBuf,
    pub topic: String,
    pub partition: u32,
    pub base_offset: Offset,
    /// The `.log` file's length in bytes.
    pub size: u64,
    /// The `.log` file's mtime, nanoseconds since the epoch.
    pub mtime_ns: i64,
    pub inode: u64,
    pub device: u64,
    /// CRC-32C of the file's first 512 and last 4096 bytes (see [`SegmentIdentity::of_file`]).
    pub fingerprint: u32,
}

impl SegmentIdentity {
    /// The identity of the open `.log` file `file` of segment `base_offset` of
    /// `topic`-`partition` in `data_dir` (canonical): one `fstat` and two small `pread`s.
    pub fn of_file(
        data_dir: &Path,
        topic: &str,
        partition: u32,
        base_offset: Offset,
        file: &File,
    ) -> io::Result<SegmentIdentity> {
        use std::os::unix::fs::FileExt;
        let meta = file.metadata()?;
        let size = meta.len();
        let mut crc = 0u32;
        let mut buf = vec![0u8; (FINGERPRINT_HEAD + FINGERPRINT_TAIL) as usize];
        let head = size.min(FINGERPRINT_HEAD) as usize;
        let head_buf = buf.get_mut(..head).unwrap_or_default();
        file.read_exact_at(head_buf, 0)?;
        crc = crc32c::crc32c_append(crc, head_buf);
        let tail = size.min(FINGERPRINT_TAIL) as usize;
        let tail_buf = buf.get_mut(..tail).unwrap_or_default();
        file.read_exact_at(tail_buf, size - tail as u64)?;
        crc = crc32c::crc32c_append(crc, tail_buf);
        Ok(SegmentIdentity {
            data_dir: data_dir.to_path_buf(),
            topic: topic.to_string(),
            partition,
            base_offset,
            size,
            mtime_ns: meta.mtime().saturating_mul(1_000_000_000).saturating_add(meta.mtime_nsec()),
            inode: meta.ino(),
            device: meta.dev(),
            fingerprint: crc,
        })
    }

    /// The identity of the first `prefix` bytes of the open `.log` file `file` of the *active*
    /// segment `base_offset`: `None` when the file is now shorter than `prefix` (truncated
    /// since). Bytes of an active segment below a batch boundary it has passed never change
    /// while the file exists (appends go after them); what proves them unchanged is the inode,
    /// the device and the fingerprint of the prefix's first 512 and last 4096 bytes. The size
    /// recorded is `prefix` and the mtime 0: the active file's own size and mtime move with
    /// every append, which leaves the prefix as it was.
    pub fn of_prefix(
        data_dir: &Path,
        topic: &str,
        partition: u32,
        base_offset: Offset,
        file: &File,
        prefix: u64,
    ) -> io::Result<Option<SegmentIdentity>> {
        use std::os::unix::fs::FileExt;
        let meta = file.metadata()?;
        if meta.len() < prefix {
            return Ok(None);
        }
        let mut crc = 0u32;
        let mut buf = vec![0u8; (FINGERPRINT_HEAD + FINGERPRINT_TAIL) as usize];
        let head = prefix.min(FINGERPRINT_HEAD) as usize;
        let head_buf = buf.get_mut(..head).unwrap_or_default();
        file.read_exact_at(head_buf, 0)?;
        crc = crc32c::crc32c_append(crc, head_buf);
        let tail = prefix.min(FINGERPRINT_TAIL) as usize;
        let tail_buf = buf.get_mut(..tail).unwrap_or_default();
        file.read_exact_at(tail_buf, prefix - tail as u64)?;
        crc = crc32c::crc32c_append(crc, tail_buf);
        Ok(Some(SegmentIdentity {
            data_dir: data_dir.to_path_buf(),
            topic: topic.to_string(),
            partition,
            base_offset,
            size: prefix,
            mtime_ns: 0,
            inode: meta.ino(),
            device: meta.dev(),
            fingerprint: crc,
        }))
    }

    /// The entry's file name for `kind`.
    fn file_name(&self, kind: CacheKind) -> String {
        let mut h = Fnv::new();
        h.write(self.data_dir.as_os_str().as_encoded_bytes());
        h.write(&[0]);
        h.write(self.topic.as_bytes());
        h.write(&[0]);
        h.write(&self.partition.to_be_bytes());
        format!("{:016x}-{:020}.{}", h.0, self.base_offset.0, kind.extension())
    }

    fn encode_key(&self, out: &mut Vec<u8>) {
        put_str(out, self.data_dir.as_os_str().as_encoded_bytes());
        put_str(out, self.topic.as_bytes());
        out.extend_from_slice(&self.partition.to_be_bytes());
        out.extend_from_slice(&self.base_offset.0.to_be_bytes());
        out.extend_from_slice(&self.size.to_be_bytes());
        out.extend_from_slice(&self.mtime_ns.to_be_bytes());
        out.extend_from_slice(&self.inode.to_be_bytes());
        out.extend_from_slice(&self.device.to_be_bytes());
        out.extend_from_slice(&self.fingerprint.to_be_bytes());
    }
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    let len = u16::try_from(s.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(s.get(..usize::from(len)).unwrap_or(s));
}

/// FNV-1a, 64 bits: entry names must not change between builds (std's hasher may).
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// Why an entry was not used (the log line says which).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    /// Not a topicfs cache file, or one of another format version or kind.
    Foreign(String),
    /// A topicfs cache file whose bytes fail a check (CRC, length).
    Damaged(String),
    /// The entry of another segment (a colliding name, or a file copied from elsewhere).
    OtherSegment,
    /// The segment changed since the entry was written (deleted and replaced, compacted).
    Stale(&'static str),
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejected::Foreign(why) => write!(f, "not an entry of this cache format ({why})"),
            Rejected::Damaged(why) => write!(f, "damaged ({why})"),
            Rejected::OtherSegment => write!(f, "an entry of another segment"),
            Rejected::Stale(what) => write!(f, "stale: the segment's {what} changed"),
        }
    }
}

/// Encodes an entry file's bytes.
fn encode(id: &SegmentIdentity, kind: CacheKind, payload: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(128);
    id.encode_key(&mut key);
    let mut out = Vec::with_capacity(64 + key.len() + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_be_bytes());
    out.push(kind.tag());
    out.push(0);
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(&key);
    out.extend_from_slice(&(payload.len() as u64).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    let header_crc = crc32c::crc32c(&out);
    out.extend_from_slice(&header_crc.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A bounds-checked reader over an entry's bytes.
struct Cur<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn str(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

/// Checks an entry file's bytes against `id` and `kind` (rules in the module docs, in order)
/// and returns its payload.
fn decode<'a>(
    bytes: &'a [u8],
    id: &SegmentIdentity,
    kind: CacheKind,
) -> Result<&'a [u8], Rejected> {
    let short = || Rejected::Damaged("shorter than its header".into());
    let mut c = Cur { bytes, at: 0 };
    if c.take(MAGIC.len()) != Some(MAGIC.as_slice()) {
        return Err(Rejected::Foreign("no TFSCACHE magic".into()));
    }
    let version = c.u16().ok_or_else(short)?;
    if version != FORMAT_VERSION {
        return Err(Rejected::Foreign(format!(
            "format version {version}, this topicfs reads {FORMAT_VERSION}"
        )));
    }
    let tag = c.take(2).ok_or_else(short)?;
    if tag.first() != Some(&kind.tag()) {
        return Err(Rejected::Foreign(format!(
            "kind {}, expected {}",
            tag.first().copied().unwrap_or(0),
            kind.tag()
        )));
    }
    let key_len = c.u32().ok_or_else(short)? as usize;
    let key = c.take(key_len).ok_or_else(short)?;
    let payload_len = c.u64().ok_or_else(short)?;
    let payload_crc = c.u32().ok_or_else(short)?;
    let header_end = c.at;
    let header_crc = c.u32().ok_or_else(short)?;
    let header = bytes.get(..header_end).ok_or_else(short)?;
    if crc32c::crc32c(header) != header_crc {
        return Err(Rejected::Damaged("header CRC mismatch".into()));
    }
    let mut k = Cur { bytes: key, at: 0 };
    let bad_key = || Rejected::Damaged("key shorter than stated".into());
    let data_dir = k.str().ok_or_else(bad_key)?;
    let topic = k.str().ok_or_else(bad_key)?;
    let partition = k.u32().ok_or_else(bad_key)?;
    let base = k.u64().ok_or_else(bad_key)? as i64;
    if data_dir != id.data_dir.as_os_str().as_encoded_bytes()
        || topic != id.topic.as_bytes()
        || partition != id.partition
        || base != id.base_offset.0
    {
        return Err(Rejected::OtherSegment);
    }
    let size = k.u64().ok_or_else(bad_key)?;
    let mtime = k.u64().ok_or_else(bad_key)? as i64;
    let inode = k.u64().ok_or_else(bad_key)?;
    let device = k.u64().ok_or_else(bad_key)?;
    let fingerprint = k.u32().ok_or_else(bad_key)?;
    if size != id.size {
        return Err(Rejected::Stale("size"));
    }
    if inode != id.inode || device != id.device {
        return Err(Rejected::Stale("inode"));
    }
    if mtime != id.mtime_ns {
        return Err(Rejected::Stale("mtime"));
    }
    if fingerprint != id.fingerprint {
        return Err(Rejected::Stale("bytes (fingerprint)"));
    }
    let payload = &bytes[c.at..];
    if payload.len() as u64 != payload_len {
        return Err(Rejected::Damaged(format!(
            "payload of {} bytes, header says {payload_len}",
            payload.len()
        )));
    }
    if crc32c::crc32c(payload) != payload_crc {
        return Err(Rejected::Damaged("payload CRC mismatch".into()));
    }
    Ok(payload)
}

/// The size field of an entry's key (a prefix entry's prefix length), unchecked: `None` when
/// the bytes are too short to hold it.
fn stored_size(bytes: &[u8]) -> Option<u64> {
    let mut c = Cur { bytes, at: 0 };
    c.take(MAGIC.len() + 4)?;
    c.u32()?;
    c.str()?;
    c.str()?;
    c.take(4 + 8)?;
    c.u64()
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
    /// The writer thread's queue ([`SegmentCache::store_later`]), started on first use.
    writer: Mutex<Option<SyncSender<Job>>>,
    /// Entries queued and not yet written.
    queued: Arc<(Mutex<usize>, Condvar)>,
}

/// What [`SegmentCache::update_later`] does with an entry: given its valid payload (if any),
/// the new payload (`None`: leave it).
pub type SummaryUpdate = Box<dyn FnOnce(Option<Vec<u8>>) -> Option<Vec<u8>> + Send>;

/// Work for the writer thread.
enum Job {
    Update(SegmentIdentity, CacheKind, SummaryUpdate),
}

/// Entries [`SegmentCache::store_later`] may have queued at once; more are dropped (they are
/// learned again on a later mount).
const QUEUE_BOUND: usize = 1024;

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
            writer: Mutex::new(None),
            queued: Arc::new((Mutex::new(0), Condvar::new())),
        }
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
    pub fn entry_path(&self, id: &SegmentIdentity, kind: CacheKind) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(id.file_name(kind)))
    }

    /// The payload stored for `id` and `kind`, if an entry exists and passes every check (see
    /// the module docs); otherwise `None`, with one warning per rejected file naming it.
    pub fn load(&self, id: &SegmentIdentity, kind: CacheKind) -> Option<Vec<u8>> {
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

    /// The prefix length and payload of the `kind` entry ([`CacheKind::is_prefix`]) of the
    /// active segment `name` names (only its data dir, topic, partition and base offset are read),
    /// if it passes every check against `identify(prefix)`, the identity of the segment's
    /// first `prefix` bytes now (`None`: the file is shorter, truncated since: *stale*). The
    /// prefix length is read from the entry's key before the checks; the checks are then those
    /// of [`SegmentCache::load`], in the same order, with the same warning on a rejection.
    pub fn load_prefix(
        &self,
        name: &SegmentIdentity,
        kind: CacheKind,
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
    pub fn store(&self, id: &SegmentIdentity, kind: CacheKind, payload: &[u8]) {
        let Some(dir) = &self.dir else { return };
        let path = dir.join(id.file_name(kind));
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

    /// [`SegmentCache::store`] on the cache's writer thread: see [`SegmentCache::update_later`].
    pub fn store_later(self: &Arc<Self>, id: SegmentIdentity, kind: CacheKind, payload: Vec<u8>) {
        self.update_later(id, kind, Box::new(move |_| Some(payload)));
    }

    /// Loads the entry of `id` and `kind`, hands its payload (if valid) to `update`, and stores
    /// what that returns, on the cache's writer thread (one per cache, started on first use; it
    /// holds the cache weakly and ends when the cache is dropped). The caller does not wait for
    /// the write and its `fsync`s; updates run one at a time in the order queued, so merges
    /// into one entry never lose each other's part. When the queue is full the update is
    /// dropped (logged at debug): it is learned again later.
    pub fn update_later(
        self: &Arc<Self>,
        id: SegmentIdentity,
        kind: CacheKind,
        update: SummaryUpdate,
    ) {
        if self.dir.is_none() {
            return;
        }
        let mut writer = lock(&self.writer);
        if writer.is_none() {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(QUEUE_BOUND);
            let weak = Arc::downgrade(self);
            let queued = Arc::clone(&self.queued);
            let spawned =
                std::thread::Builder::new().name("topicfs-cache".into()).spawn(move || {
                    while let Ok(Job::Update(id, kind, update)) = rx.recv() {
                        if let Some(cache) = weak.upgrade() {
                            cache.update(&id, kind, update);
                        }
                        let (count, done) = &*queued;
                        let mut n = lock(count);
                        *n = n.saturating_sub(1);
                        done.notify_all();
                    }
                });
            match spawned {
                Ok(_) => *writer = Some(tx),
                Err(e) => {
                    log::debug!("segment cache: no writer thread ({e}); writing in place");
                    drop(writer);
                    self.update(&id, kind, update);
                    return;
                }
            }
        }
        let Some(tx) = writer.as_ref() else { return };
        *lock(&self.queued.0) += 1;
        if tx.try_send(Job::Update(id, kind, update)).is_err() {
            let (count, done) = &*self.queued;
            let mut n = lock(count);
            *n = n.saturating_sub(1);
            done.notify_all();
            log::debug!("segment cache: write queue full, an update is dropped");
        }
    }

    /// [`SegmentCache::update_later`] in place.
    pub fn update(&self, id: &SegmentIdentity, kind: CacheKind, update: SummaryUpdate) {
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

    /// Waits until every entry queued by [`SegmentCache::store_later`] is written (or failed).
    pub fn flush(&self) {
        let (count, done) = &*self.queued;
        let mut n = lock(count);
        while *n > 0 {
            n = done.wait(n).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Deletes the entry of `id` and `kind`, if any.
    pub fn remove(&self, id: &SegmentIdentity, kind: CacheKind) {
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

    fn write_atomically(&self, dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let seq = self.temp_seq.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".tmp-{}-{seq}", std::process::id()));
        let written = (|| {
            let mut options = OpenOptions::new();
            options.write(true).create_new(true).mode(0o600);
            let mut f = super::open::open_regular(&temp, &mut options, "create").map_err(io_of)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            std::fs::rename(&temp, path)?;
            super::open::sync_dir(dir).map_err(io_of)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    }

    fn touch(&self, file: &File) {
        let now = SystemTime::now();
        let old = file.metadata().and_then(|m| m.modified()).unwrap_or(now);
        if now.duration_since(old).unwrap_or_default() >= TOUCH_EVERY {
            let _ = file.set_modified(now);
        }
    }

    fn warn_once(&self, path: &Path, what: &str) {
        if lock(&self.warned).insert(path.to_path_buf()) {
            log::warn!("segment cache entry {}: {what}", path.display());
        }
    }

    /// The entries in the cache dir; with `clean_temps`, removes temporary files left by a
    /// crash.
    fn scan(&self, clean_temps: bool) -> Vec<Entry> {
        let Some(dir) = &self.dir else { return Vec::new() };
        let Ok(read) = super::open::read_dir(dir) else { return Vec::new() };
        let now = SystemTime::now();
        let mut out = Vec::new();
        for ent in read.flatten() {
            let name = ent.file_name();
            let Some(name) = name.to_str() else { continue };
            let Ok(meta) = ent.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let mtime = meta.modified().unwrap_or(now);
            if name.starts_with(".tmp-") {
                let old = now.duration_since(mtime).unwrap_or_default() >= STALE_TEMP_AGE;
                if clean_temps && old {
                    let _ = std::fs::remove_file(ent.path());
                }
                continue;
            }
            let is_entry = name
                .rsplit_once('.')
                .is_some_and(|(_, ext)| CacheKind::from_extension(ext).is_some());
            if is_entry {
                out.push(Entry { path: ent.path(), len: meta.len(), mtime });
            }
        }
        out
    }

    /// Deletes least recently used entries until they take at most 9/10 of the bound.
    fn evict(&self) {
        let _one = lock(&self.evicting);
        let mut entries = self.scan(false);
        let mut total: u64 = entries.iter().map(|e| e.len).sum();
        let target = self.max_bytes / 10 * 9;
        if total > target {
            entries.sort_by_key(|e| e.mtime);
            for e in &entries {
                if total <= target {
                    break;
                }
                if std::fs::remove_file(&e.path).is_ok() {
                    log::debug!("segment cache: evicted {}", e.path.display());
                }
                total = total.saturating_sub(e.len);
            }
        }
        self.used.store(total, Ordering::Relaxed);
    }
}

/// The `io::Error` inside an [`crate::error::Error`] from `storage::open` (its errno kept, so a
/// full disk is still `ENOSPC`).
fn io_of(e: crate::error::Error) -> io::Error {
    match e {
        crate::error::Error::Io { source, .. } => source,
        other => io::Error::other(other.to_string()),
    }
}

struct Entry {
    path: PathBuf,
    len: u64,
    mtime: SystemTime,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident(base: i64) -> SegmentIdentity {
        SegmentIdentity {
            data_dir: PathBuf::from("/data"),
            topic: "t".into(),
            partition: 0,
            base_offset: Offset(base),
            size: 1000,
            mtime_ns: 1_700_000_000_000_000_000,
            inode: 42,
            device: 7,
            fingerprint: 0xdead_beef,
        }
    }

    fn cache_in(dir: &Path, max: u64) -> SegmentCache {
        SegmentCache::open(&CacheSettings { dir: Some(dir.to_path_buf()), max_bytes: max })
    }

    #[test]
    fn a_stored_payload_loads_back_and_survives_a_new_cache_instance() {
        let tmp = tempfile::tempdir().unwrap();
        let c = cache_in(tmp.path(), 1 << 20);
        assert_eq!(c.load(&ident(0), CacheKind::RenderSummary), None);
        c.store(&ident(0), CacheKind::RenderSummary, b"hello");
        c.store(&ident(0), CacheKind::TxnSummary, b"txn");
        assert_eq!(c.load(&ident(0), CacheKind::RenderSummary).as_deref(), Some(&b"hello"[..]));
        let again = cache_in(tmp.path(), 1 << 20);
        assert_eq!(again.load(&ident(0), CacheKind::TxnSummary).as_deref(), Some(&b"txn"[..]));
        assert_eq!(again.load(&ident(0), CacheKind::KeyIndex), None);
        assert_eq!(again.load(&ident(1), CacheKind::RenderSummary), None);
        assert!(again.used() > 0);
        // Replacing keeps one file.
        again.store(&ident(0), CacheKind::RenderSummary, b"second");
        assert_eq!(
            again.load(&ident(0), CacheKind::RenderSummary).as_deref(),
            Some(&b"second"[..])
        );
        let files: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(files.len(), 2, "no temporary file is left behind");
    }

    #[test]
    fn each_validation_rule_rejects_its_case() {
        let id = ident(5);
        let good = encode(&id, CacheKind::RenderSummary, b"payload");
        assert_eq!(decode(&good, &id, CacheKind::RenderSummary), Ok(&b"payload"[..]));

        // Magic.
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(matches!(decode(&bad, &id, CacheKind::RenderSummary), Err(Rejected::Foreign(_))));
        assert!(matches!(
            decode(b"{\"json\": 1}", &id, CacheKind::RenderSummary),
            Err(Rejected::Foreign(_))
        ));
        // Version.
        let mut bad = good.clone();
        bad[9] = 99;
        assert!(matches!(decode(&bad, &id, CacheKind::RenderSummary), Err(Rejected::Foreign(_))));
        // Kind.
        assert!(matches!(decode(&good, &id, CacheKind::TxnSummary), Err(Rejected::Foreign(_))));
        // Header CRC: a flipped bit in the key.
        let mut bad = good.clone();
        bad[20] ^= 1;
        assert!(matches!(decode(&bad, &id, CacheKind::RenderSummary), Err(Rejected::Damaged(_))));
        // Another segment's entry (same name, other key).
        for other in [
            SegmentIdentity { topic: "u".into(), ..id.clone() },
            SegmentIdentity { partition: 1, ..id.clone() },
            SegmentIdentity { base_offset: Offset(6), ..id.clone() },
            SegmentIdentity { data_dir: "/elsewhere".into(), ..id.clone() },
        ] {
            assert_eq!(
                decode(&good, &other, CacheKind::RenderSummary),
                Err(Rejected::OtherSegment)
            );
        }
        // The segment changed.
        for (changed, what) in [
            (SegmentIdentity { size: 1001, ..id.clone() }, "size"),
            (SegmentIdentity { inode: 43, ..id.clone() }, "inode"),
            (SegmentIdentity { device: 8, ..id.clone() }, "inode"),
            (SegmentIdentity { mtime_ns: id.mtime_ns + 1, ..id.clone() }, "mtime"),
            (SegmentIdentity { fingerprint: 1, ..id.clone() }, "bytes (fingerprint)"),
        ] {
            assert_eq!(
                decode(&good, &changed, CacheKind::RenderSummary),
                Err(Rejected::Stale(what))
            );
        }
        // Truncated, extended, or a payload byte flipped.
        let bad = &good[..good.len() - 1];
        assert!(matches!(decode(bad, &id, CacheKind::RenderSummary), Err(Rejected::Damaged(_))));
        let mut bad = good.clone();
        bad.push(0);
        assert!(matches!(decode(&bad, &id, CacheKind::RenderSummary), Err(Rejected::Damaged(_))));
        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0x80;
        assert!(matches!(decode(&bad, &id, CacheKind::RenderSummary), Err(Rejected::Damaged(_))));
        // Every prefix is rejected without panicking.
        for n in 0..good.len() {
            assert!(decode(&good[..n], &id, CacheKind::RenderSummary).is_err());
        }
    }

    #[test]
    fn a_damaged_entry_is_ignored_warned_once_and_replaced_by_the_next_store() {
        let tmp = tempfile::tempdir().unwrap();
        let c = cache_in(tmp.path(), 1 << 20);
        let id = ident(0);
        c.store(&id, CacheKind::TxnSummary, b"aborted ranges");
        let path = c.entry_path(&id, CacheKind::TxnSummary).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(c.load(&id, CacheKind::TxnSummary), None);
        assert!(lock(&c.warned).contains(&path), "the damaged file was warned about");
        assert_eq!(c.load(&id, CacheKind::TxnSummary), None);
        c.store(&id, CacheKind::TxnSummary, b"rebuilt");
        assert!(!lock(&c.warned).contains(&path));
        assert_eq!(c.load(&id, CacheKind::TxnSummary).as_deref(), Some(&b"rebuilt"[..]));
        // A foreign file under an entry's name.
        std::fs::write(&path, b"not ours").unwrap();
        assert_eq!(c.load(&id, CacheKind::TxnSummary), None);
    }

    #[test]
    fn the_identity_of_a_file_changes_when_it_is_replaced_or_rewritten() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("00000000000000000000.log");
        std::fs::write(&p, vec![1u8; 10_000]).unwrap();
        let of = |p: &Path| {
            SegmentIdentity::of_file(tmp.path(), "t", 0, Offset(0), &File::open(p).unwrap())
                .unwrap()
        };
        let a = of(&p);
        assert_eq!(a, of(&p), "stable while unchanged");
        assert_eq!(a.size, 10_000);
        // Rewritten in place with the same size and mtime: the fingerprint differs.
        let mtime = std::fs::metadata(&p).unwrap().modified().unwrap();
        let mut bytes = vec![1u8; 10_000];
        bytes[9_999] = 2;
        std::fs::write(&p, &bytes).unwrap();
        File::options().write(true).open(&p).unwrap().set_modified(mtime).unwrap();
        let b = of(&p);
        assert_eq!((a.size, a.mtime_ns, a.inode), (b.size, b.mtime_ns, b.inode));
        assert_ne!(a.fingerprint, b.fingerprint);
        // Replaced by another file (compaction's rename): the inode differs.
        let q = tmp.path().join("new");
        std::fs::write(&q, &bytes).unwrap();
        std::fs::rename(&q, &p).unwrap();
        assert_ne!(of(&p).inode, b.inode);
        // Tiny and empty files have identities too.
        std::fs::write(&p, b"").unwrap();
        assert_eq!(of(&p).size, 0);
    }

    #[test]
    fn an_active_prefix_entry_survives_appends_and_is_rejected_when_truncated_replaced_rewritten_or_damaged()
     {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let c = cache_in(&tmp.path().join("cache"), 1 << 20);
        let p = data.join("00000000000000000000.log");
        let mut bytes: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &bytes).unwrap();
        let prefix = 12_000u64;
        let name = SegmentIdentity {
            size: 0,
            mtime_ns: 0,
            inode: 0,
            device: 0,
            fingerprint: 0,
            ..ident(0)
        };
        let name = SegmentIdentity { data_dir: data.clone(), ..name };
        let of = |p: &Path, prefix: u64| {
            SegmentIdentity::of_prefix(&data, "t", 0, Offset(0), &File::open(p).unwrap(), prefix)
                .unwrap()
        };
        let load = |p: &Path| c.load_prefix(&name, CacheKind::PrefixRender, |n| of(p, n));
        assert_eq!(load(&p), None, "nothing stored yet");
        c.store(&of(&p, prefix).unwrap(), CacheKind::PrefixRender, b"sizes");
        assert_eq!(load(&p), Some((prefix, b"sizes".to_vec())));
        // Appends beyond the prefix (the file's size and mtime move): still valid.
        bytes.extend_from_slice(&[9u8; 5_000]);
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(load(&p), Some((prefix, b"sizes".to_vec())), "valid after an append");
        // Truncated below the prefix: stale, and warned about by name.
        let short = File::options().write(true).open(&p).unwrap();
        short.set_len(prefix - 1).unwrap();
        assert_eq!(of(&p, prefix), None);
        assert_eq!(load(&p), None, "truncated below the prefix");
        let path = c.entry_path(&name, CacheKind::PrefixRender).unwrap();
        assert!(lock(&c.warned).contains(&path));
        // Truncated and written again to beyond the prefix with other bytes: the fingerprint.
        let mut other = bytes.clone();
        other[(prefix - 10) as usize] ^= 0xff;
        std::fs::write(&p, &other).unwrap();
        assert_eq!(load(&p), None, "rewritten below the prefix");
        // Replaced by another file with the same bytes (a new inode): stale.
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(load(&p), Some((prefix, b"sizes".to_vec())), "the same bytes again");
        let q = data.join("new");
        std::fs::write(&q, &bytes).unwrap();
        std::fs::rename(&q, &p).unwrap();
        assert_eq!(load(&p), None, "replaced by another file");
        // Stored again for the new file, then damaged: ignored.
        c.store(&of(&p, prefix).unwrap(), CacheKind::PrefixRender, b"sizes");
        assert_eq!(load(&p), Some((prefix, b"sizes".to_vec())));
        let mut entry = std::fs::read(&path).unwrap();
        let last = entry.len() - 1;
        entry[last] ^= 0xff;
        std::fs::write(&path, &entry).unwrap();
        assert_eq!(load(&p), None, "a damaged payload");
        // A damaged header (even one claiming a prefix the file has): ignored too.
        std::fs::write(&path, b"TFSCACHE garbage").unwrap();
        assert_eq!(load(&p), None, "a foreign file");
        // An update of another prefix length replaces the entry without merging.
        c.store(&of(&p, prefix).unwrap(), CacheKind::PrefixRender, b"old");
        let longer = of(&p, prefix + 100).unwrap();
        c.update(
            &longer,
            CacheKind::PrefixRender,
            Box::new(|old| {
                assert_eq!(old, None, "the entry of another prefix is not handed over");
                Some(b"new".to_vec())
            }),
        );
        assert_eq!(load(&p), Some((prefix + 100, b"new".to_vec())));
        // Nothing was written into the data dir.
        let names: Vec<_> =
            std::fs::read_dir(&data).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn entries_stay_within_the_bound_evicting_the_least_recently_used() {
        let tmp = tempfile::tempdir().unwrap();
        let c = cache_in(tmp.path(), 10_000);
        let payload = vec![0u8; 1_000];
        for base in 0..30 {
            c.store(&ident(base), CacheKind::RenderSummary, &payload);
            // Distinct mtimes, oldest first; entry 0 is used again (and so refreshed).
            let path = c.entry_path(&ident(base), CacheKind::RenderSummary).unwrap();
            let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + base as u64);
            File::options().write(true).open(&path).unwrap().set_modified(when).unwrap();
        }
        let total: u64 = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(total <= 10_000, "entries take {total} bytes, bound 10000");
        assert_eq!(c.used(), total);
        // The newest survive, the oldest went first.
        assert!(c.load(&ident(29), CacheKind::RenderSummary).is_some());
        assert!(c.load(&ident(1), CacheKind::RenderSummary).is_none());
        // A new instance over a directory beyond its bound evicts at open.
        let small = cache_in(tmp.path(), 2_500);
        assert!(small.used() <= 2_500);
    }

    #[test]
    fn an_unusable_directory_disables_the_cache_without_failing() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let c = cache_in(&file.join("sub"), 1 << 20);
        assert_eq!(c.dir(), None);
        c.store(&ident(0), CacheKind::RenderSummary, b"x");
        assert_eq!(c.load(&ident(0), CacheKind::RenderSummary), None);
        let off = SegmentCache::open(&CacheSettings { dir: None, max_bytes: 1 });
        assert_eq!(off.dir(), None);
    }

    #[test]
    fn a_store_that_cannot_write_logs_and_leaves_no_temporary_file() {
        let tmp = tempfile::tempdir().unwrap();
        let c = cache_in(tmp.path(), 1 << 20);
        // The directory disappears under the mount (someone deleted the cache): stores fail
        // quietly, loads miss.
        std::fs::remove_dir_all(tmp.path()).unwrap();
        c.store(&ident(0), CacheKind::RenderSummary, b"x");
        assert!(c.store_warned.load(Ordering::Relaxed));
        assert_eq!(c.load(&ident(0), CacheKind::RenderSummary), None);
    }

    #[test]
    fn old_temporary_files_are_removed_at_open_and_young_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let old = tmp.path().join(".tmp-1-0");
        let young = tmp.path().join(".tmp-2-0");
        std::fs::write(&old, b"partial").unwrap();
        std::fs::write(&young, b"partial").unwrap();
        File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(3600))
            .unwrap();
        let _c = cache_in(tmp.path(), 1 << 20);
        assert!(!old.exists());
        assert!(young.exists());
    }
}

/// The full-disk case, on a real filesystem that fills up: a 16 KiB tmpfs mounted for the test
/// (root only; the guard unmounts it even when the test fails).
#[cfg(test)]
mod full_disk_tests {
    use super::*;

    struct TmpfsGuard(PathBuf);

    impl Drop for TmpfsGuard {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
        }
    }

    #[test]
    fn a_cache_dir_on_a_full_disk_stores_what_fits_and_never_fails() {
        if !nix::unistd::getuid().is_root() {
            eprintln!("skipped: mounting a tmpfs needs root");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=16k", "topicfs-cache-test"])
            .arg(tmp.path())
            .status()
            .unwrap();
        assert!(status.success(), "mount tmpfs");
        let _guard = TmpfsGuard(tmp.path().to_path_buf());
        let c = SegmentCache::open(&CacheSettings {
            dir: Some(tmp.path().join("cache")),
            max_bytes: 1 << 30,
        });
        assert!(c.dir().is_some());
        let payload = vec![7u8; 3000];
        let id = |base| SegmentIdentity {
            data_dir: PathBuf::from("/data"),
            topic: "t".into(),
            partition: 0,
            base_offset: Offset(base),
            size: 1,
            mtime_ns: 1,
            inode: 1,
            device: 1,
            fingerprint: 1,
        };
        for base in 0..20 {
            c.store(&id(base), CacheKind::RenderSummary, &payload);
        }
        assert!(c.store_warned.load(Ordering::Relaxed), "the full disk was logged");
        // Whatever is there is whole: every entry loads or is absent, none is damaged, and no
        // temporary file is left.
        let mut loaded = 0;
        for base in 0..20 {
            if let Some(p) = c.load(&id(base), CacheKind::RenderSummary) {
                assert_eq!(p, payload);
                loaded += 1;
            }
        }
        assert!(loaded > 0, "some entries fit");
        assert!(lock(&c.warned).is_empty(), "no entry was damaged");
        let temps = std::fs::read_dir(tmp.path().join("cache"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with(".tmp"))
            .count();
        assert_eq!(temps, 0);
    }
}
