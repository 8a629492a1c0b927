//! A log dir's health: online until an I/O failure in it, then offline for the rest of the
//! mount, as Kafka's `LogDirFailureChannel` takes a dir offline.
//!
//! A dir goes offline when
//! - a request or background pass (retention, the cleaner, checkpoints) on one of its files
//!   fails with an error of the disk rather than of the data: `EIO`, `EROFS`, `ENOTCONN`,
//!   `ESTALE`, `ENODEV`, `ENXIO`, `EUCLEAN`, or `EACCES`/`EPERM` (permissions taken away); a
//!   full disk (`ENOSPC`, `EDQUOT`) refuses the write without taking the dir offline, and
//!   damaged bytes (`Corrupt`) are the partition's problem, not the dir's;
//! - or the dir itself is no longer the one opened: [`DirHealth::check`] (at most every
//!   [`HEALTH_CHECK_INTERVAL_MS`], when topics are listed, and after any error naming a file in
//!   it) finds that its path cannot be `stat`ed or is another directory now (another device or
//!   inode: the file system under it was unmounted).
//!
//! Once offline: logged once at error level with the failure; every partition of the dir
//! answers [`Error::LogDirOffline`] (`EIO`) without touching the dir; nothing is written to it
//! (no append, retention, cleaning, checkpoint or clean-shutdown marker); the other dirs go on.
//! Only a new mount brings it back, as a broker restart does.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use topicfs_format::Offset;
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_source::{
    AppendInfo, BoundaryTxnState, Committed, FileProblem, KeyHits, KeyIndex, KeyListing,
    KeyRecords, Known, OffsetQuery, PartitionSource, PartitionSummary, ReadAnswer, ReadCursor,
    ReadMode, Records, SealedSpan, SegmentFileKind, SegmentFiles, SegmentSummary, SpanKind,
    SpanStore, SummaryUpdate, TxnBoundary,
};

use crate::log::Log;
use crate::segment::now_ms;

/// The shortest time between two [`DirHealth::check`]s of one dir made on a listing.
pub const HEALTH_CHECK_INTERVAL_MS: i64 = 1_000;

/// Whether an errno says the disk (not the data, not free space) failed.
fn is_disk_failure(errno: i32) -> bool {
    matches!(
        errno,
        libc::EIO
            | libc::EROFS
            | libc::ENOTCONN
            | libc::ESTALE
            | libc::ENODEV
            | libc::ENXIO
            | libc::EUCLEAN
            | libc::EACCES
            | libc::EPERM
    )
}

/// One log dir's health; see the module doc.
#[derive(Debug)]
pub struct DirHealth {
    path: PathBuf,
    /// (device, inode) of the dir when opened.
    identity: Option<(u64, u64)>,
    offline: AtomicBool,
    reason: std::sync::Mutex<Option<String>>,
    last_check_ms: AtomicI64,
}

impl DirHealth {
    /// The health of `path`, online, as it is now.
    pub fn new(path: &Path) -> DirHealth {
        let identity = std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
        DirHealth {
            path: path.to_path_buf(),
            identity,
            offline: AtomicBool::new(false),
            reason: std::sync::Mutex::new(None),
            last_check_ms: AtomicI64::new(now_ms()),
        }
    }

    /// The dir.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `None` while online; the failure that took the dir offline otherwise.
    pub fn offline(&self) -> Option<String> {
        if !self.offline.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.reason).clone()
    }

    /// Whether the dir is online.
    pub fn is_online(&self) -> bool {
        !self.offline.load(Ordering::Acquire)
    }

    /// The error every request to the dir's partitions answers while it is offline.
    pub fn offline_error(&self) -> Error {
        let reason = lock(&self.reason).clone().unwrap_or_default();
        Error::LogDirOffline { dir: self.path.clone(), reason }
    }

    /// `Ok` while online; [`DirHealth::offline_error`] otherwise.
    pub fn ensure_online(&self) -> Result<()> {
        if self.is_online() { Ok(()) } else { Err(self.offline_error()) }
    }

    /// Takes the dir offline for `reason` (logged once; later calls change nothing).
    pub fn take_offline(&self, reason: String) {
        let mut held = lock(&self.reason);
        if self.offline.swap(true, Ordering::AcqRel) {
            return;
        }
        log::error!(
            "log dir {} is offline: {reason}. Its partitions answer EIO and nothing is written \
             to it until the next mount; the other log dirs go on",
            self.path.display()
        );
        *held = Some(reason);
    }

    /// Looks at an error met on this dir's data: one of the disk, on a file in the dir, takes
    /// the dir offline; any error naming a file in the dir makes the dir checked
    /// ([`DirHealth::check`]).
    pub fn observe(&self, err: &Error) {
        let Error::Io { file, source, .. } = err else { return };
        if !file.starts_with(&self.path) {
            return;
        }
        if source.raw_os_error().is_some_and(is_disk_failure) {
            self.take_offline(err.to_string());
        } else {
            self.check();
        }
    }

    /// `result`, after [`DirHealth::observe`] of its error.
    pub fn watch<T>(&self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            self.observe(e);
        }
        result
    }

    /// Whether the dir is still the one opened (see the module doc); takes it offline if not.
    pub fn check(&self) -> bool {
        if !self.is_online() {
            return false;
        }
        self.last_check_ms.store(now_ms(), Ordering::Relaxed);
        match std::fs::metadata(&self.path) {
            Ok(m) if self.identity.is_none_or(|id| id == (m.dev(), m.ino())) => true,
            Ok(_) => {
                self.take_offline(
                    "it is another directory now (the file system under it was unmounted?)"
                        .to_string(),
                );
                false
            }
            Err(e) => {
                self.take_offline(format!("stat {}: {e}", self.path.display()));
                false
            }
        }
    }

    /// [`DirHealth::check`] at most every [`HEALTH_CHECK_INTERVAL_MS`]; whether online.
    pub fn check_now_and_then(&self) -> bool {
        let last = self.last_check_ms.load(Ordering::Relaxed);
        if now_ms().saturating_sub(last) < HEALTH_CHECK_INTERVAL_MS {
            return self.is_online();
        }
        self.check()
    }
}

/// The one way to a partition's [`Log`] for a [`DirPartition`] and the capability objects it
/// hands out: every file-touching call goes through [`Guarded::online`] (the error of an
/// offline dir, the log otherwise), and its result through [`Guarded::watch`]. The log itself
/// is private to this module, so no method can skip the guard; what it answers without the
/// guard it answers from memory (named below), touching no file.
mod guard {
    use super::*;

    pub(super) struct Guarded {
        log: Arc<Log>,
        health: Arc<DirHealth>,
    }

    impl Guarded {
        pub(super) fn new(log: Arc<Log>, health: Arc<DirHealth>) -> Guarded {
            Guarded { log, health }
        }

        /// The log while its dir is online; [`DirHealth::offline_error`] otherwise.
        pub(super) fn online(&self) -> Result<&Log> {
            self.health.ensure_online()?;
            Ok(&self.log)
        }

        /// `result`, its error looked at by the dir's health ([`DirHealth::watch`]).
        pub(super) fn watch<T>(&self, result: Result<T>) -> Result<T> {
            self.health.watch(result)
        }

        /// `f` of the log while the dir is online, its error watched.
        pub(super) fn call<T>(&self, f: impl FnOnce(&Log) -> Result<T>) -> Result<T> {
            let log = self.online()?;
            self.watch(f(log))
        }

        /// Known without I/O: the partition's name.
        pub(super) fn topic(&self) -> &str {
            self.log.topic()
        }

        /// Known without I/O: the partition's number.
        pub(super) fn partition(&self) -> u32 {
            self.log.partition()
        }

        /// Known without I/O ([`PartitionSource::known`] of a log holds what it last read).
        pub(super) fn known(&self) -> Known {
            self.log.known()
        }

        /// Known without I/O: a file name and position computed from the cursor.
        pub(super) fn byte_location(
            &self,
            cursor: &ReadCursor,
            delta: u64,
        ) -> Option<(String, u64)> {
            SegmentFiles::byte_location(&*self.log, cursor, delta)
        }

        /// Known without I/O: whether the key index met a transactional batch so far.
        pub(super) fn transactional(&self) -> bool {
            self.log.keys().transactional()
        }

        /// A handle on the same guard, for what outlives a call (a key listing).
        pub(super) fn health(&self) -> Arc<DirHealth> {
            Arc::clone(&self.health)
        }
    }
}

use guard::Guarded;

/// A partition of a dir of several, as the views see it: the log, refused while its dir is
/// offline, with every error it returns looked at by the dir's [`DirHealth`]. The capability
/// objects it hands out (segment files, key index, span store, transaction boundary) are the
/// partition itself, so one taken before the dir went offline is refused too.
pub struct DirPartition {
    log: Guarded,
}

impl DirPartition {
    pub fn new(log: Arc<Log>, health: Arc<DirHealth>) -> DirPartition {
        DirPartition { log: Guarded::new(log, health) }
    }

    fn guarded<T>(&self, f: impl FnOnce(&Log) -> Result<T>) -> Result<T> {
        self.log.call(f)
    }
}

impl PartitionSource for DirPartition {
    fn topic(&self) -> &str {
        self.log.topic()
    }
    fn partition(&self) -> u32 {
        self.log.partition()
    }
    fn summary(&self) -> Result<PartitionSummary> {
        self.guarded(|l| l.summary())
    }
    fn known(&self) -> Known {
        self.log.known()
    }
    fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
        self.guarded(|l| l.offset_for(query))
    }
    fn seek(&self, target: Offset) -> Result<ReadCursor> {
        self.guarded(|l| PartitionSource::seek(l, target))
    }
    fn holds(&self, cursor: &ReadCursor) -> Result<bool> {
        self.guarded(|l| l.holds(cursor))
    }
    fn read(&self, cursor: &ReadCursor, max_bytes: usize, mode: ReadMode) -> Result<ReadAnswer> {
        self.guarded(|l| PartitionSource::read(l, cursor, max_bytes, mode))
    }
    fn append(&self, records: Records<'_>) -> Result<AppendInfo> {
        self.guarded(|l| PartitionSource::append(l, records))
    }
    fn sync(&self) -> Result<()> {
        self.guarded(PartitionSource::sync)
    }
    fn span_store(&self) -> Option<&dyn SpanStore> {
        Some(self)
    }
    fn segment_files(&self) -> Option<&dyn SegmentFiles> {
        Some(self)
    }
    fn key_index(&self) -> Option<&dyn KeyIndex> {
        Some(self)
    }
    fn committed(&self) -> Committed<'_> {
        Committed::ByView(Some(self))
    }
}

impl TxnBoundary for DirPartition {
    fn state_at_boundary(&self) -> Result<Option<BoundaryTxnState>> {
        self.guarded(TxnBoundary::state_at_boundary)
    }
}

impl KeyIndex for DirPartition {
    fn key_hits(&self, key: Option<&[u8]>, from: Offset) -> Result<KeyHits> {
        self.guarded(|l| KeyIndex::key_hits(l, key, from))
    }
    fn keys_named(&self, h0: u64, h1: u64) -> Result<Vec<Vec<u8>>> {
        self.guarded(|l| KeyIndex::keys_named(l, h0, h1))
    }
    fn listing(&self) -> Result<Box<dyn KeyListing>> {
        let inner = self.guarded(KeyIndex::listing)?;
        Ok(Box::new(DirKeyListing { inner, health: self.log.health() }))
    }
    fn transactional(&self) -> bool {
        self.log.transactional()
    }
}

/// A key listing of a partition of a dir of several: each step refused once the dir is
/// offline (a listing reads the key indexes as it goes).
struct DirKeyListing {
    inner: Box<dyn KeyListing>,
    health: Arc<DirHealth>,
}

impl KeyListing for DirKeyListing {
    fn next_key(&mut self) -> Result<Option<KeyRecords>> {
        self.health.ensure_online()?;
        self.health.watch(self.inner.next_key())
    }
    fn keys_at_most(&self) -> u64 {
        self.inner.keys_at_most()
    }
}

/// What the partition keeps of its spans lives beside its segments (and in the segment cache):
/// while the dir is offline nothing is found or kept, as the trait allows ("a payload the
/// store cannot keep is learned again later"), and the dir is not touched.
impl SpanStore for DirPartition {
    fn keeps_summaries(&self) -> bool {
        self.log.online().is_ok_and(|l| l.keeps_summaries())
    }
    fn sealed_span_at(&self, cursor: &ReadCursor) -> Option<SealedSpan> {
        self.log.online().ok()?.sealed_span_at(cursor)
    }
    fn load(&self, span: &SealedSpan, kind: SpanKind) -> Option<Vec<u8>> {
        SpanStore::load(self.log.online().ok()?, span, kind)
    }
    fn update(&self, span: &SealedSpan, kind: SpanKind, update: SummaryUpdate) {
        if let Ok(log) = self.log.online() {
            SpanStore::update(log, span, kind, update);
        }
    }
    fn prefix_span_at(&self, cursor: &ReadCursor, kind: SpanKind) -> Option<(SealedSpan, Vec<u8>)> {
        self.log.online().ok()?.prefix_span_at(cursor, kind)
    }
    fn update_prefix(
        &self,
        start: &ReadCursor,
        end: &ReadCursor,
        kind: SpanKind,
        update: SummaryUpdate,
    ) {
        if let Ok(log) = self.log.online() {
            log.update_prefix(start, end, kind, update);
        }
    }
}

impl SegmentFiles for DirPartition {
    fn segments(&self) -> Result<Vec<SegmentSummary>> {
        self.guarded(SegmentFiles::segments)
    }
    fn segment_summary(&self, base_offset: Offset) -> Result<Option<SegmentSummary>> {
        self.guarded(|l| l.segment_summary(base_offset))
    }
    fn read_segment_file(
        &self,
        base_offset: Offset,
        kind: SegmentFileKind,
        pos: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        self.guarded(|l| l.read_segment_file(base_offset, kind, pos, buf))
    }
    fn sealed_segment_file(
        &self,
        base_offset: Offset,
        kind: SegmentFileKind,
    ) -> Result<Option<std::fs::File>> {
        self.guarded(|l| l.sealed_segment_file(base_offset, kind))
    }
    fn repaired_segment_files(
        &self,
        base_offset: Offset,
    ) -> Result<Vec<(SegmentFileKind, u64, String)>> {
        self.guarded(|l| l.repaired_segment_files(base_offset))
    }
    fn byte_location(&self, cursor: &ReadCursor, delta: u64) -> Option<(String, u64)> {
        self.log.byte_location(cursor, delta)
    }
    fn file_problems(&self) -> Result<Vec<FileProblem>> {
        self.guarded(|l| l.file_problems())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_error_in_the_dir_takes_it_offline_once_and_others_do_not() {
        let tmp = tempfile::tempdir().unwrap();
        let health = DirHealth::new(tmp.path());
        let elsewhere = Error::io("/elsewhere/x.log", "read", std::io::Error::from_raw_os_error(5));
        health.observe(&elsewhere);
        let full = Error::io(
            tmp.path().join("t-0/x.log"),
            "write",
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        );
        health.observe(&full);
        health.observe(&Error::corrupt(tmp.path().join("t-0/x.log"), 7, "bad crc"));
        assert!(health.is_online(), "not the dir's disk, a full disk, damaged bytes");
        let eio = Error::io(
            tmp.path().join("t-0/x.log"),
            "read",
            std::io::Error::from_raw_os_error(libc::EIO),
        );
        health.observe(&eio);
        let reason = health.offline().unwrap();
        assert!(reason.contains("x.log"), "{reason}");
        let err = health.ensure_online().unwrap_err();
        assert_eq!(err.errno(), libc::EIO);
        assert!(err.to_string().contains("is offline"), "{err}");
        health.take_offline("later".into());
        assert_eq!(health.offline().unwrap(), reason, "the first failure is kept");
    }

    #[test]
    fn a_dir_that_is_gone_or_replaced_is_found_offline_by_a_check() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        let health = DirHealth::new(&dir);
        assert!(health.check());
        std::fs::rename(&dir, tmp.path().join("moved")).unwrap();
        std::fs::create_dir(&dir).unwrap();
        assert!(!health.check(), "another inode at the path");
        assert!(health.offline().unwrap().contains("another directory"));
        let gone = tmp.path().join("gone");
        std::fs::create_dir(&gone).unwrap();
        let health = DirHealth::new(&gone);
        std::fs::remove_dir(&gone).unwrap();
        let not_found = Error::io(
            gone.join("t-0/0.log"),
            "open",
            std::io::Error::from_raw_os_error(libc::ENOENT),
        );
        health.observe(&not_found);
        assert!(health.offline().unwrap().contains("stat"), "{:?}", health.offline());
    }
}
