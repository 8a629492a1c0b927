//! The segment cache as the filesystem uses it (SEMANTICS.md, "The segment cache"): what sizing
//! learned about sealed segments makes a remount's sizes exact without rendering them again, and
//! an entry that no longer matches its segment is ignored and rebuilt. `TopicFs` over real log
//! dirs in temp dirs, without a kernel.

use crate::common;

use std::ffi::OsStr;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use topicfs::fs::attr::OpenRequest;
use topicfs::fs::inode::ROOT_INO;
use topicfs::fs::{DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, FsOptions, TopicFs};
use topicfs::source::TopicSource;
use topicfs::storage::cache::{CacheSettings, SegmentCache};
use topicfs::storage::{LogConfig, LogDirs, SegmentMode};
use topicfs::view::txn::Isolation;

const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };
const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: false };
const FORMATS: [&str; 3] = ["", ".json", ".raw"];

struct Mounted {
    fs: Arc<TopicFs>,
    log_dir: Arc<LogDirs>,
    cache: Arc<SegmentCache>,
}

fn config() -> LogConfig {
    LogConfig { segment_bytes: 4096, ..LogConfig::default() }
}

/// `TopicFs` over `data` (read-only unless `writable`), sizing at most `budget` bytes of log per
/// stat, with the segment cache in `cache` (`None`: no cache).
fn mount(data: &Path, cache: Option<&Path>, budget: u64, writable: bool) -> Mounted {
    mount_with(data, cache, budget, writable, config())
}

/// [`mount`] with the log settings `config`.
fn mount_with(
    data: &Path,
    cache: Option<&Path>,
    budget: u64,
    writable: bool,
    config: LogConfig,
) -> Mounted {
    let log_dir = Arc::new(if writable {
        LogDirs::open_dir(data, config, Default::default(), SegmentMode::Writable).unwrap()
    } else {
        LogDirs::open_dir(data, config, Default::default(), SegmentMode::ReadOnly).unwrap()
    });
    let cache = Arc::new(SegmentCache::open(&CacheSettings {
        dir: cache.map(Path::to_path_buf),
        max_bytes: 64 << 20,
    }));
    log_dir.set_cache(Arc::clone(&cache));
    log_dir.set_sizing_budget(budget);
    let options = FsOptions {
        read_only: !writable,
        partitions_per_topic: 1,
        max_line_bytes: 1 << 20,
        uid: 0,
        gid: 0,
        file_mode: DEFAULT_FILE_MODE,
        dir_mode: DEFAULT_DIR_MODE,
    };
    let fs = Arc::new(
        TopicFs::new(Arc::clone(&log_dir) as Arc<dyn TopicSource>, options)
            .with_isolation(Isolation::ReadCommitted),
    );
    // As a mount does: the cache's writes run on the mount's one executor (without one they
    // are written in place, on whichever thread asks, unserialized).
    log_dir.set_executor(fs.executor().clone());
    Mounted { fs, log_dir, cache }
}

impl Mounted {
    fn ino(&self, path: &str) -> u64 {
        let mut ino = ROOT_INO;
        for name in path.split('/').filter(|n| !n.is_empty()) {
            ino = self.fs.lookup(ino, OsStr::new(name)).unwrap().attr.ino;
        }
        ino
    }

    fn size(&self, path: &str) -> u64 {
        self.fs.getattr(self.ino(path), None).unwrap().attr.size
    }

    fn read_at(&self, path: &str, offset: u64, len: u32) -> Vec<u8> {
        let fh = self.fs.open(self.ino(path), READ).unwrap().fh;
        let out = self.fs.read(fh, offset, len).unwrap().to_vec();
        self.fs.release(fh).unwrap();
        out
    }

    fn read_all(&self, path: &str) -> Vec<u8> {
        let fh = self.fs.open(self.ino(path), READ).unwrap().fh;
        let mut out = Vec::new();
        loop {
            let chunk = self.fs.read(fh, out.len() as u64, 65536).unwrap();
            if chunk.is_empty() {
                break;
            }
            out.extend_from_slice(&chunk);
        }
        self.fs.release(fh).unwrap();
        out
    }

    fn append(&self, path: &str, data: &[u8]) {
        let fh = self.fs.open(self.ino(path), WRITE).unwrap().fh;
        self.fs.write(fh, data, None).unwrap();
        self.fs.flush(fh, None).unwrap();
        self.fs.release(fh).unwrap();
    }

    fn unmount(self) {
        self.fs.shutdown().unwrap();
        self.cache.flush();
        drop(self.fs);
        self.log_dir.shutdown().unwrap();
        drop(self.log_dir);
    }
}

/// A data dir with topic `t`, partition 0 in about 60 segments of 4 KiB, as a broker would
/// have written it (without the entries topicfs keeps beside its segments); returns what each
/// format's `by-offset/0` reads, after a read-only mount that read them all when `cache` is
/// given (so the cache holds every sealed segment's rendering).
fn written(data: &Path, cache: Option<&Path>) -> Vec<Vec<u8>> {
    let all = written_by_topicfs(data);
    common::strip_beside_entries(&data.join("t-0"));
    if let Some(cache) = cache {
        let m = mount(data, Some(cache), u64::MAX, false);
        for (f, bytes) in FORMATS.iter().zip(&all) {
            assert_eq!(&m.read_all(&format!("t/0/by-offset/0{f}")), bytes);
            assert_eq!(m.size(&format!("t/0/by-offset/0{f}")), bytes.len() as u64);
        }
        m.unmount();
    }
    all
}

/// [`written`]'s partition as a writable mount without a cache dir leaves it: with what the
/// mount learned about its segments kept beside them.
fn written_by_topicfs(data: &Path) -> Vec<Vec<u8>> {
    let m = mount(data, None, u64::MAX, true);
    m.log_dir.create_topic("t", 1).unwrap();
    for b in 0..200 {
        let lines: String = (0..20).map(|i| format!("record-{b}-{i}\n")).collect();
        m.append("t/0/append", lines.as_bytes());
    }
    let all: Vec<Vec<u8>> =
        FORMATS.iter().map(|f| m.read_all(&format!("t/0/by-offset/0{f}"))).collect();
    for (f, bytes) in FORMATS.iter().zip(&all) {
        assert_eq!(m.size(&format!("t/0/by-offset/0{f}")), bytes.len() as u64);
    }
    m.unmount();
    all
}

fn entries(cache: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "render"))
        .collect();
    v.sort();
    v
}

/// Names, sizes and mtimes of every file under `dir`.
fn listing(dir: &Path) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    for e in walk(dir) {
        let m = std::fs::metadata(&e).unwrap();
        out.push((e.display().to_string(), m.len(), m.modified().unwrap()));
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_remount_knows_exact_sizes_from_the_cache_and_renders_only_the_active_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, cache) = (tmp.path().join("data"), tmp.path().join("cache"));
    let all = written(&data, Some(&cache));
    let segments = walk(&data).iter().filter(|p| p.extension().is_some_and(|e| e == "log")).count();
    assert!(segments > 20, "{segments} segments");
    assert_eq!(entries(&cache).len(), segments - 1, "one entry per sealed segment");

    // Without the cache, a stat that may render one batch cannot know the size.
    let before = listing(&data);
    let cold = mount(&data, None, 1, false);
    assert_eq!(cold.size("t/0/by-offset/0"), 0);
    cold.unmount();

    // With it, the first stat is exact in every format: only the active segment is rendered
    // (one batch at a time: a few stats at most), the sealed ones come from the cache.
    let warm = mount(&data, Some(&cache), 1, false);
    for (f, bytes) in FORMATS.iter().zip(&all) {
        let name = format!("t/0/by-offset/0{f}");
        let mut sizes = vec![warm.size(&name)];
        while sizes.last() == Some(&0) && sizes.len() < 10 {
            sizes.push(warm.size(&name));
        }
        assert_eq!(sizes.last().copied(), Some(bytes.len() as u64), "{name}: {sizes:?}");
        assert!(sizes.len() <= 6, "{name}: more stats than batches in the active segment");
        // The last 100 bytes, read where the size says (what `tail -c` does), and everything.
        let end = bytes.len() as u64;
        assert_eq!(warm.read_at(&name, end - 100, 100), bytes[bytes.len() - 100..].to_vec());
        assert_eq!(&warm.read_all(&name), bytes, "{name}");
    }
    // A stream in the middle of a cached segment reads exactly its records.
    let from_1234: Vec<u8> =
        all[0].split_inclusive(|&b| b == b'\n').skip(1234).flatten().copied().collect();
    assert_eq!(warm.read_all("t/0/by-offset/1234"), from_1234);
    warm.unmount();
    assert_eq!(listing(&data), before, "a read-only mount wrote nothing into the data dir");
}

#[test]
fn damaged_and_stale_entries_are_ignored_and_rebuilt_and_reads_stay_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, cache) = (tmp.path().join("data"), tmp.path().join("cache"));
    let all = written(&data, Some(&cache));
    let files = entries(&cache);
    // Damage one entry, replace another with a foreign file, truncate a third.
    let mut bytes = std::fs::read(&files[0]).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&files[0], &bytes).unwrap();
    std::fs::write(&files[1], b"{\"not\": \"a cache file\"}").unwrap();
    let bytes = std::fs::read(&files[2]).unwrap();
    std::fs::write(&files[2], &bytes[..bytes.len() / 2]).unwrap();
    // A segment replaced by a copy of itself (what compaction's rename does to the inode):
    // its entry is stale.
    let seg = data.join("t-0").join("00000000000000000000.log");
    let copy = data.join("t-0").join("copy");
    std::fs::copy(&seg, &copy).unwrap();
    std::fs::rename(&copy, &seg).unwrap();

    let m = mount(&data, Some(&cache), u64::MAX, false);
    for (f, bytes) in FORMATS.iter().zip(&all) {
        let name = format!("t/0/by-offset/0{f}");
        assert_eq!(m.size(&name), bytes.len() as u64, "{name}");
        assert_eq!(&m.read_all(&name), bytes, "{name}");
    }
    m.unmount();
    // Rebuilt: a remount that may render only one batch per stat is exact again.
    let again = mount(&data, Some(&cache), 1, false);
    let mut size = 0;
    for _ in 0..10 {
        size = again.size("t/0/by-offset/0.json");
        if size > 0 {
            break;
        }
    }
    assert_eq!(size, all[1].len() as u64);
    again.unmount();
}

#[test]
fn deleting_the_cache_dir_at_any_time_costs_only_the_rendering() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, cache) = (tmp.path().join("data"), tmp.path().join("cache"));
    let all = written(&data, Some(&cache));
    let m = mount(&data, Some(&cache), u64::MAX, false);
    std::fs::remove_dir_all(&cache).unwrap();
    assert_eq!(m.size("t/0/by-offset/0.json"), all[1].len() as u64);
    assert_eq!(m.read_all("t/0/by-offset/0"), all[0]);
    m.unmount();
}

/// Every format's `by-offset/0` shows its exact size at the first stat, and reads `all`.
fn assert_every_format_exact_at_the_first_stat(m: &Mounted, all: &[Vec<u8>]) {
    for (f, bytes) in FORMATS.iter().zip(all) {
        let name = format!("t/0/by-offset/0{f}");
        assert_eq!(m.size(&name), bytes.len() as u64, "{name} exact at the first stat");
        assert_eq!(&m.read_all(&name), bytes);
    }
}

#[test]
fn background_sizing_makes_a_new_directorys_sizes_exact_and_fills_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, cache) = (tmp.path().join("data"), tmp.path().join("cache"));
    let all = written(&data, None);
    // A first mount of this directory: nothing cached, one batch per stat.
    let m = mount(&data, Some(&cache), 1, false);
    TopicFs::start_background_sizing(&m.fs).join().unwrap();
    assert_every_format_exact_at_the_first_stat(&m, &all);
    m.unmount();
    assert!(entries(&cache).len() > 20, "the sealed segments were summarized");
    // And a remount knows them at once.
    let again = mount(&data, Some(&cache), 1, false);
    let mut sizes = vec![again.size("t/0/by-offset/0.json")];
    while sizes.last() == Some(&0) && sizes.len() < 10 {
        sizes.push(again.size("t/0/by-offset/0.json"));
    }
    assert_eq!(sizes.last().copied(), Some(all[1].len() as u64), "{sizes:?}");
    again.unmount();
}

#[test]
fn background_sizing_summarizes_sealed_segments_on_several_threads_with_the_same_sizes() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, cache) = (tmp.path().join("data"), tmp.path().join("cache"));
    let all = written(&data, None);
    let m = mount(&data, Some(&cache), 1, false);
    TopicFs::start_background_sizing_with(&m.fs, 3).join().unwrap();
    assert_every_format_exact_at_the_first_stat(&m, &all);
    m.unmount();
    let summarized = entries(&cache).len();
    assert!(summarized > 20, "the sealed segments were summarized: {summarized}");
    // A remount on one thread finds everything summarized: the same cache, nothing new.
    let again = mount(&data, Some(&cache), 1, false);
    TopicFs::start_background_sizing_with(&again.fs, 1).join().unwrap();
    for (f, bytes) in FORMATS.iter().zip(&all) {
        assert_eq!(again.size(&format!("t/0/by-offset/0{f}")), bytes.len() as u64);
    }
    again.unmount();
    assert_eq!(entries(&cache).len(), summarized);
}

#[test]
fn background_sizing_leaves_a_partition_without_sealed_segments_or_cache_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let all = written(&data, None);
    // No cache: nothing is kept across remounts, so nothing is sized ahead of readers.
    let m = mount(&data, None, 1, false);
    TopicFs::start_background_sizing(&m.fs).join().unwrap();
    assert_eq!(m.size("t/0/by-offset/0"), 0);
    assert_eq!(m.read_all("t/0/by-offset/0"), all[0]);
    m.unmount();
}

/// What a writable mount appended is sized once its append handle closes (in the background,
/// as at mount), and what it learns is kept beside the segments in the data dir: sealed
/// segments' summaries and the active segment's prefix. So the next mount of the directory
/// shows every format's exact size at the first stat, where it would otherwise have to render
/// the whole partition first, whatever its cache dir (none here, or an empty one).
#[test]
fn what_a_mount_appended_is_sized_in_the_background_so_any_next_mount_knows_exact_sizes() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let w = mount(&data, None, 1, true);
    TopicFs::start_background_sizing(&w.fs).join().unwrap();
    w.log_dir.create_topic("t", 1).unwrap();
    let fh = w.fs.open(w.ino("t/0/append"), WRITE).unwrap().fh;
    for b in 0..200 {
        let lines: String = (0..20).map(|i| format!("record-{b}-{i}\n")).collect();
        w.fs.write(fh, lines.as_bytes(), None).unwrap();
    }
    w.fs.release(fh).unwrap();
    assert!(w.fs.executor().wait_idle(std::time::Duration::from_secs(60)), "sizing ended");
    w.unmount();
    let kept = common::beside_entries(&data.join("t-0"));
    let segments = walk(&data).iter().filter(|p| p.extension().is_some_and(|e| e == "log")).count();
    assert!(segments > 20, "{segments} segments");
    let named = |end: &str| kept.iter().filter(|p| p.to_str().unwrap().ends_with(end)).count();
    assert_eq!(named(".topicfs-render"), segments - 1, "one per sealed segment: {kept:?}");
    assert_eq!(named(".topicfs-prefix"), 1, "the active segment's prefix: {kept:?}");
    // What each format reads, from a mount that renders everything.
    let plain = mount(&data, None, u64::MAX, false);
    let all: Vec<Vec<u8>> =
        FORMATS.iter().map(|f| plain.read_all(&format!("t/0/by-offset/0{f}"))).collect();
    plain.unmount();
    // The next mounts: one batch per stat, and yet exact at once; read-only without a cache,
    // with an empty cache dir, and writable.
    let before = listing(&data);
    let again = mount(&data, None, 1, false);
    assert_every_format_exact_at_the_first_stat(&again, &all);
    again.unmount();
    assert_eq!(listing(&data), before, "a read-only mount wrote nothing into the data dir");
    let cache = tmp.path().join("empty-cache");
    let again = mount(&data, Some(&cache), 1, false);
    assert_every_format_exact_at_the_first_stat(&again, &all);
    again.unmount();
    let again = mount(&data, None, 1, true);
    assert_every_format_exact_at_the_first_stat(&again, &all);
    again.unmount();
}

/// A writer that keeps its append handle open leaves sizes for the next mount too: every
/// `SIZE_APPENDED_EVERY` bytes it appends, the partition is sized in the background as after a
/// close, not only when the handle closes.
#[test]
fn an_append_handle_kept_open_has_what_it_appended_sized_every_64_mib() {
    use topicfs::fs::append::SIZE_APPENDED_EVERY;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let w = mount_with(&data, None, 1, true, LogConfig::default());
    TopicFs::start_background_sizing(&w.fs).join().unwrap();
    w.log_dir.create_topic("t", 1).unwrap();
    let fh = w.fs.open(w.ino("t/0/append"), WRITE).unwrap().fh;
    let chunk: Vec<u8> = (0..10_000).flat_map(|i| format!("{i:099}\n").into_bytes()).collect();
    let prefixes = || {
        common::beside_entries(&data.join("t-0"))
            .iter()
            .filter(|p| p.to_str().unwrap().ends_with(".topicfs-prefix"))
            .count()
    };
    let idle = |m: &Mounted| {
        assert!(m.fs.executor().wait_idle(std::time::Duration::from_secs(60)));
        m.log_dir.dirs()[0].beside_segments().flush();
    };
    // Less than the threshold, handle open: nothing sized yet.
    let mut written = 0u64;
    while written + chunk.len() as u64 <= SIZE_APPENDED_EVERY {
        w.fs.write(fh, &chunk, None).unwrap();
        written += chunk.len() as u64;
    }
    idle(&w);
    assert_eq!(prefixes(), 0, "{written} bytes, below the threshold: not sized yet");
    // Past it, still open: sized in the background.
    w.fs.write(fh, &chunk, None).unwrap();
    idle(&w);
    assert_eq!(prefixes(), 1, "sized while the handle is open");
    w.fs.release(fh).unwrap();
    idle(&w);
    w.unmount();
    let lines = written / chunk.len() as u64 * 10_000 + 10_000;
    let again = mount_with(&data, None, 1, false, LogConfig::default());
    assert_eq!(again.size("t/0/by-offset/0"), lines * 100, "exact at the first stat");
    again.unmount();
}

/// The entries kept beside the segments go with their segments: a writable mount removes those
/// whose segment a broker deleted and a crash's temporary files (retention by the engine
/// itself: `storage::log::summaries`' tests); a damaged one is ignored (logged) and rebuilt,
/// never trusted.
#[test]
fn entries_beside_the_segments_go_with_them_and_are_never_trusted_blindly() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let all = written_by_topicfs(&data);
    let part = data.join("t-0");
    let kept = common::beside_entries(&part);
    assert!(kept.len() > 20, "{kept:?}");
    // A broker's retention deletes the first segment's files (and knows nothing of ours); a
    // crash left a temporary file an hour ago.
    for suffix in ["log", "index", "timeindex"] {
        std::fs::remove_file(part.join(format!("00000000000000000000.{suffix}"))).unwrap();
    }
    let temp = part.join(".topicfs-tmp-1-1");
    std::fs::write(&temp, b"partial").unwrap();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&temp).unwrap().set_modified(hour_ago).unwrap();
    // Damage a later segment's entry.
    let damaged = kept.iter().find(|p| p.to_str().unwrap().ends_with(".topicfs-render")).unwrap();
    let damaged = if damaged.to_str().unwrap().contains("/00000000000000000000.") {
        kept.iter().filter(|p| p.to_str().unwrap().ends_with(".topicfs-render")).nth(1).unwrap()
    } else {
        damaged
    };
    let mut bytes = std::fs::read(damaged).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(damaged, &bytes).unwrap();
    // A writable mount removes the strays at load, and its reads are exact and rebuild the
    // damaged entry.
    let m = mount(&data, None, u64::MAX, true);
    let left = common::beside_entries(&part);
    assert!(!left.contains(&temp), "the crash's temporary file is removed");
    assert!(
        left.iter().all(|p| !p.to_str().unwrap().contains("/00000000000000000000.")),
        "the deleted segment's entries are removed: {left:?}"
    );
    let start = m.log_dir.log("t", 0).unwrap().log_start_offset().0 as usize;
    assert!(start > 0);
    let want: Vec<u8> =
        all[0].split_inclusive(|&b| b == b'\n').skip(start).flatten().copied().collect();
    let from_start = format!("t/0/by-offset/{start}");
    assert_eq!(m.size(&from_start), want.len() as u64);
    assert_eq!(m.read_all(&from_start), want);
    m.unmount();
    // The rebuilt entry is valid again: a mount sizing one batch per stat is exact at once.
    let again = mount(&data, None, 1, false);
    let start = again.log_dir.log("t", 0).unwrap().log_start_offset().0 as usize;
    let want: Vec<u8> =
        all[0].split_inclusive(|&b| b == b'\n').skip(start).flatten().copied().collect();
    assert_eq!(again.size(&format!("t/0/by-offset/{start}")), want.len() as u64);
    again.unmount();
}

fn prefix_entries(cache: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "prefix"))
        .collect();
    v.sort();
    v
}

/// The sizes of every format's `by-offset/0` on the first stat of a fresh mount that may render
/// one batch per stat.
fn first_stats(m: &Mounted) -> Vec<u64> {
    FORMATS.iter().map(|f| m.size(&format!("t/0/by-offset/0{f}"))).collect()
}

#[test]
fn a_remount_knows_the_active_segments_prefix_from_the_cache_until_it_is_truncated_replaced_or_damaged()
 {
    let tmp = tempfile::tempdir().unwrap();
    let (data, cache) = (tmp.path().join("data"), tmp.path().join("cache"));
    written(&data, Some(&cache));
    // A few more small batches, so that the active segment holds several.
    let w = mount(&data, None, u64::MAX, true);
    for b in 0..3 {
        w.append("t/0/append", format!("small-{b}\n").as_bytes());
    }
    let mut all: Vec<Vec<u8>> =
        FORMATS.iter().map(|f| w.read_all(&format!("t/0/by-offset/0{f}"))).collect();
    let lens = |all: &[Vec<u8>]| all.iter().map(|b| b.len() as u64).collect::<Vec<_>>();
    assert_eq!(
        FORMATS.iter().map(|f| w.size(&format!("t/0/by-offset/0{f}"))).collect::<Vec<_>>(),
        lens(&all)
    );
    w.unmount();
    // What that writable mount kept beside the segments would answer first: gone, the
    // directory is as a broker's (this test is about the cache dir).
    common::strip_beside_entries(&data.join("t-0"));
    // Background sizing, reaching the end, stores the active segment's prefix to there.
    let m = mount(&data, Some(&cache), 1, false);
    TopicFs::start_background_sizing(&m.fs).join().unwrap();
    m.unmount();
    assert_eq!(prefix_entries(&cache).len(), 1, "one prefix entry: the active segment's");
    let txn_entries = std::fs::read_dir(&cache)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "prefix-txn"))
        .count();
    assert_eq!(txn_entries, 1, "and one of its transactions (read_committed)");
    let active = walk(&data)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .unwrap();

    // Without the prefix entry (the sealed ones kept), a stat that may render one batch does
    // not reach the end: the active segment holds several.
    let entry = prefix_entries(&cache).pop().unwrap();
    let saved = std::fs::read(&entry).unwrap();
    std::fs::remove_file(&entry).unwrap();
    let m = mount(&data, Some(&cache), 1, false);
    assert!(first_stats(&m).contains(&0), "several batches in the active segment");
    m.fs.shutdown().unwrap();
    drop(m.fs);
    m.log_dir.shutdown().unwrap();
    // (Not flushed: that mount's own prefix entry is not kept; the saved one is put back.)
    std::fs::write(&entry, &saved).unwrap();

    // The first stat renders at most one batch, yet is exact in every format: the sealed
    // segments and the active one's prefix come from the cache.
    let before = listing(&data);
    let m = mount(&data, Some(&cache), 1, false);
    assert_eq!(first_stats(&m), lens(&all));
    for (f, bytes) in FORMATS.iter().zip(&all) {
        let name = format!("t/0/by-offset/0{f}");
        let end = bytes.len() as u64;
        assert_eq!(m.read_at(&name, end - 100, 100), bytes[bytes.len() - 100..].to_vec());
        assert_eq!(&m.read_all(&name), bytes, "{name}");
    }
    m.unmount();
    assert_eq!(listing(&data), before, "a read-only mount wrote nothing into the data dir");

    // One batch appended beyond the prefix: the entry stays valid, and the first stat renders
    // just that batch.
    let w = mount(&data, None, u64::MAX, true);
    w.append("t/0/append", b"appended-1\nappended-2\n");
    all = FORMATS.iter().map(|f| w.read_all(&format!("t/0/by-offset/0{f}"))).collect();
    w.unmount();
    common::strip_beside_entries(&data.join("t-0"));
    let m = mount(&data, Some(&cache), 1, false);
    assert_eq!(first_stats(&m), lens(&all), "exact after an append beyond the prefix");
    assert!(m.read_all("t/0/by-offset/0").ends_with(b"appended-1\nappended-2\n"));
    m.unmount();

    // A damaged entry is ignored: sizes become exact by rendering, and stay right.
    let entry = prefix_entries(&cache).pop().unwrap();
    let mut bytes = std::fs::read(&entry).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    let m = mount(&data, Some(&cache), 1, false);
    assert!(first_stats(&m).contains(&0), "the damaged entry is not used");
    for (f, bytes) in FORMATS.iter().zip(&all) {
        assert_eq!(&m.read_all(&format!("t/0/by-offset/0{f}")), bytes);
    }
    // Rebuilt by that mount (its reads reached the end, a stat stored the prefix again).
    assert_eq!(first_stats(&m), lens(&all));
    m.unmount();
    let m = mount(&data, Some(&cache), 1, false);
    assert_eq!(first_stats(&m), lens(&all), "rebuilt");
    m.unmount();

    // The active segment replaced by a copy of itself (a new inode): stale.
    let copy = active.with_extension("copy");
    std::fs::copy(&active, &copy).unwrap();
    std::fs::rename(&copy, &active).unwrap();
    let m = mount(&data, Some(&cache), 1, false);
    assert!(first_stats(&m).contains(&0), "the replaced segment's entry is not used");
    for (f, bytes) in FORMATS.iter().zip(&all) {
        assert_eq!(&m.read_all(&format!("t/0/by-offset/0{f}")), bytes);
    }
    m.unmount();

    // Truncated to its first batches (what a broker's log truncation does), then written again
    // with other records: the entry is stale, and every read shows the new records.
    let m = mount(&data, Some(&cache), u64::MAX, false);
    assert_eq!(first_stats(&m), lens(&all));
    m.unmount();
    let kept = {
        let bytes = std::fs::read(&active).unwrap();
        // The first batch: its length is at bytes 8..12 (plus the 12-byte prefix).
        12 + u32::from_be_bytes(bytes[8..12].try_into().unwrap()) as u64
    };
    File::options().write(true).open(&active).unwrap().set_len(kept).unwrap();
    for idx in ["index", "timeindex"] {
        let _ = std::fs::remove_file(active.with_extension(idx));
    }
    let w = mount(&data, None, u64::MAX, true);
    w.append("t/0/append", b"after-truncation\n");
    let now: Vec<Vec<u8>> =
        FORMATS.iter().map(|f| w.read_all(&format!("t/0/by-offset/0{f}"))).collect();
    w.unmount();
    assert!(now[0].ends_with(b"after-truncation\n"));
    let m = mount(&data, Some(&cache), 1, false);
    let mut sizes = first_stats(&m);
    for _ in 0..20 {
        if !sizes.contains(&0) {
            break;
        }
        // Each stat after the first continues the sizing in the background.
        assert!(m.fs.wait_for_sizing_steps(std::time::Duration::from_secs(30)));
        sizes = first_stats(&m);
    }
    assert_eq!(sizes, lens(&now), "exact sizes of the truncated and rewritten segment");
    for (f, bytes) in FORMATS.iter().zip(&now) {
        assert_eq!(&m.read_all(&format!("t/0/by-offset/0{f}")), bytes);
    }
    m.unmount();
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// A first by-key read that needs every sealed segment's key index built runs the builds on the
/// mount's one executor (handed to the log engine, `LogDirs::set_executor`) and the request's own
/// thread: no thread is started, and every sealed segment's index is built.
#[test]
fn a_first_by_key_read_builds_on_the_mounts_executor_and_starts_no_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let m = mount(tmp.path(), None, u64::MAX, true);
    m.log_dir.create_topic("t", 1).unwrap();
    for b in 0..100 {
        let lines: String = (0..10)
            .map(|i| format!("{{\"key\":\"k{}\",\"payload\":\"p-{b}-{i}\"}}\n", i % 3))
            .collect();
        m.append("t/0/append.json", lines.as_bytes());
    }
    let log = m.log_dir.log("t", 0).unwrap();
    let sealed = log.segment_list().len() - 1;
    assert!(sealed >= 4, "{sealed} sealed segments");
    let executor = topicfs::executor::Executor::new(2);
    m.log_dir.set_executor(executor.clone());
    let fs = Arc::try_unwrap(m.fs).ok().unwrap();
    let fs = Arc::new(fs.with_shared_executor(
        Arc::new(topicfs::view::budget::MemoryBudget::default()),
        executor.clone(),
    ));
    let m = Mounted { fs, log_dir: m.log_dir, cache: m.cache };
    assert!(executor.wait_idle(std::time::Duration::from_secs(10)));
    let before = threads();
    let read = m.read_all("t/0/by-key/k1");
    assert_eq!(threads(), before, "the by-key read started no thread");
    assert_eq!(log.keys().built_count(), sealed);
    let expected: String = (0..100)
        .flat_map(|b| (0..10).filter(|i| i % 3 == 1).map(move |i| format!("p-{b}-{i}\n")))
        .collect();
    assert_eq!(String::from_utf8(read).unwrap(), expected);
    m.unmount();
}
