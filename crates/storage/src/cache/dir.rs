//! The cache directory: writing entries crash-safely, refreshing and warning about them,
//! listing them, and evicting the least recently used.

use super::*;

/// Temporary files older than this are crash leftovers; younger ones may be another mount's.
const STALE_TEMP_AGE: Duration = Duration::from_secs(60);
/// A hit refreshes an entry's mtime (its place in the LRU order) at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

impl SegmentCache {
    pub(super) fn write_atomically(&self, dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let seq = self.temp_seq.fetch_add(1, Ordering::Relaxed);
        let start = match self.placement {
            Placement::CacheDir => ".tmp-",
            Placement::BesideSegments { .. } => BESIDE_TEMP,
        };
        let temp = dir.join(format!("{start}{}-{seq}", std::process::id()));
        let written = (|| {
            let mut options = OpenOptions::new();
            options.write(true).create_new(true).mode(0o600);
            let mut f = crate::open::open_regular(&temp, &mut options, "create").map_err(io_of)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            std::fs::rename(&temp, path)?;
            crate::open::sync_dir(dir).map_err(io_of)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    }

    pub(super) fn touch(&self, file: &File) {
        if self.placement != Placement::CacheDir {
            // Beside the segments nothing is evicted, and a read-only mount writes nothing
            // there, not even an mtime.
            return;
        }
        let now = SystemTime::now();
        let old = file.metadata().and_then(|m| m.modified()).unwrap_or(now);
        if now.duration_since(old).unwrap_or_default() >= TOUCH_EVERY {
            let _ = file.set_modified(now);
        }
    }

    pub(super) fn warn_once(&self, path: &Path, what: &str) {
        if lock(&self.warned).insert(path.to_path_buf()) {
            if self.placement == (Placement::BesideSegments { writable: false }) {
                // A read-only mount neither replaces nor removes it (a broker that compacted or
                // deleted segments topicfs once wrote leaves such entries behind): nothing to
                // act on, so not a warning.
                log::info!("entry beside the segments {}: {what}", path.display());
            } else {
                log::warn!("segment cache entry {}: {what}", path.display());
            }
        }
    }

    /// The entries in the cache dir; with `clean_temps`, removes temporary files left by a
    /// crash.
    pub(super) fn scan(&self, clean_temps: bool) -> Vec<Entry> {
        let Some(dir) = &self.dir else { return Vec::new() };
        let Ok(read) = crate::open::read_dir(dir) else { return Vec::new() };
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
            if is_entry_name(name) {
                out.push(Entry { path: ent.path(), len: meta.len(), mtime });
            }
        }
        out
    }

    /// Deletes least recently used entries until they take at most 9/10 of the bound.
    pub(super) fn evict(&self) {
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

/// The `io::Error` inside an [`topicfs_source::error::Error`] from `storage::open` (its errno kept, so a
/// full disk is still `ENOSPC`).
fn io_of(e: topicfs_source::error::Error) -> io::Error {
    match e {
        topicfs_source::error::Error::Io { source, .. } => source,
        other => io::Error::other(other.to_string()),
    }
}

pub(super) struct Entry {
    pub(super) path: PathBuf,
    pub(super) len: u64,
    pub(super) mtime: SystemTime,
}

/// Whether `name` is an entry's file name (`<16 hex>-<20 digits>.<extension>`, see
/// [`SegmentIdentity`]'s `file_name`), of any kind: eviction counts and deletes entries of
/// every kind, including kinds this build does not use.
pub(super) fn is_entry_name(name: &str) -> bool {
    let Some((stem, ext)) = name.split_once('.') else { return false };
    let Some((hash, base)) = stem.split_once('-') else { return false };
    !ext.is_empty()
        && hash.len() == 16
        && hash.bytes().all(|b| b.is_ascii_hexdigit())
        && base.len() == 20
        && base.bytes().all(|b| b.is_ascii_digit())
}
