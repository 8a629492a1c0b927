//! The segment cache over a broker's log dir mounted read-only: the broker compacts segments
//! (the cleaner's `.cleaned` → `.swap` → final names) and deletes them (retention's `.deleted`)
//! while topicfs has cached what it learned about them. A replaced segment's entry is stale and
//! ignored, a deleted one's is never asked for, and every size and read stays exact; nothing
//! is written into the data dir. `TopicFs` over a read-only `LogDirs::open_dir` (what a read-only
//! mount serves), the "broker" being the engine in writable mode plus the cleaner's renames.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

use crate::common::log_fixture::kept_batches;
use topicfs::format::{NewRecord, Offset};
use topicfs::fs::attr::OpenRequest;
use topicfs::fs::inode::ROOT_INO;
use topicfs::fs::{DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, FsOptions, TopicFs};
use topicfs::source::TopicSource;
use topicfs::storage::cache::{CacheSettings, SegmentCache};
use topicfs::storage::{LogConfig, LogDirs, SegmentMode};

const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", "1024").unwrap();
    c.set("index.interval.bytes", "100").unwrap();
    c.set("segment.index.bytes", "4096").unwrap();
    c.set("retention.ms", "-1").unwrap();
    c
}

fn value(i: i64) -> String {
    format!("v{i}{}", "x".repeat(100))
}

fn name(base: Offset, suffix: &str) -> String {
    format!("{:020}{suffix}", base.0)
}

/// A broker's partition `t-0`: 60 one-record batches over several segments. Base offsets.
fn broker_partition(data: &Path) -> Vec<Offset> {
    let d = LogDirs::open_dir(data, config(), Default::default(), SegmentMode::Writable).unwrap();
    d.create_topic("t", 1).unwrap();
    let log = d.log("t", 0).unwrap();
    for i in 0..60 {
        let r = NewRecord {
            timestamp: 1000 + i,
            key: None,
            value: Some(value(i).into_bytes()),
            headers: vec![],
        };
        log.append(&[r]).unwrap();
    }
    let bases = log.segment_list().iter().map(|s| s.base_offset()).collect();
    d.shutdown().unwrap();
    bases
}

/// Kafka's cleaner compacting segments `first` and `second` into one (keeping offsets `keep`
/// accepts), through to the final names: `.swap` files, the originals `.deleted` and removed,
/// the swap renamed. Indexes built by the engine in a scratch dir, as the cleaner builds them.
fn compact(part: &Path, first: Offset, second: Offset, keep: impl Fn(i64) -> bool) {
    let mut log = kept_batches(&part.join(name(first, ".log")), &keep);
    log.extend(kept_batches(&part.join(name(second, ".log")), &keep));
    let scratch = tempfile::tempdir().unwrap();
    let scratch_part = scratch.path().join("t-0");
    std::fs::create_dir(&scratch_part).unwrap();
    std::fs::write(scratch_part.join(name(first, ".log")), &log).unwrap();
    let d = LogDirs::open_dir(scratch.path(), config(), Default::default(), SegmentMode::Writable)
        .unwrap();
    d.shutdown().unwrap();
    for suffix in [".log", ".index", ".timeindex"] {
        std::fs::copy(
            scratch_part.join(name(first, suffix)),
            part.join(name(first, &format!("{suffix}.swap"))),
        )
        .unwrap();
    }
    for base in [first, second] {
        for suffix in [".log", ".index", ".timeindex"] {
            let f = part.join(name(base, suffix));
            let deleted = part.join(name(base, &format!("{suffix}.deleted")));
            std::fs::rename(&f, &deleted).unwrap();
            std::fs::remove_file(&deleted).unwrap();
        }
    }
    for suffix in [".log", ".index", ".timeindex"] {
        let swap = part.join(name(first, &format!("{suffix}.swap")));
        std::fs::rename(&swap, part.join(name(first, suffix))).unwrap();
    }
}

/// Retention: the broker deletes the segment `base` (renamed `.deleted`, then removed) and
/// moves the log start offset past it.
fn delete_segment(data: &Path, part: &Path, base: Offset, new_start: Offset) {
    for suffix in [".log", ".index", ".timeindex"] {
        let f = part.join(name(base, suffix));
        let deleted = part.join(name(base, &format!("{suffix}.deleted")));
        std::fs::rename(&f, &deleted).unwrap();
        std::fs::remove_file(&deleted).unwrap();
    }
    std::fs::write(
        data.join("log-start-offset-checkpoint"),
        format!("0\n1\nt 0 {}\n", new_start.0),
    )
    .unwrap();
}

struct Mounted {
    fs: Arc<TopicFs>,
    log_dir: Arc<LogDirs>,
    cache: Arc<SegmentCache>,
}

fn mount(data: &Path, cache: &Path, budget: u64) -> Mounted {
    let log_dir = Arc::new(
        LogDirs::open_dir(data, config(), Default::default(), SegmentMode::ReadOnly).unwrap(),
    );
    let cache = Arc::new(SegmentCache::open(&CacheSettings {
        dir: Some(cache.to_path_buf()),
        max_bytes: 64 << 20,
    }));
    log_dir.set_cache(Arc::clone(&cache));
    log_dir.set_sizing_budget(budget);
    let options = FsOptions {
        read_only: true,
        partitions_per_topic: 1,
        max_line_bytes: 1 << 20,
        uid: 0,
        gid: 0,
        file_mode: DEFAULT_FILE_MODE,
        dir_mode: DEFAULT_DIR_MODE,
    };
    let fs = Arc::new(TopicFs::new(Arc::clone(&log_dir) as Arc<dyn TopicSource>, options));
    Mounted { fs, log_dir, cache }
}

impl Mounted {
    fn ino(&self, path: &str) -> u64 {
        let mut ino = ROOT_INO;
        for n in path.split('/').filter(|n| !n.is_empty()) {
            ino = self.fs.lookup(ino, OsStr::new(n)).unwrap().attr.ino;
        }
        ino
    }

    /// `stat` until the size is known (at most `tries` times); 0 if it never is.
    fn size(&self, path: &str, tries: usize) -> u64 {
        for _ in 0..tries {
            let size = self.fs.getattr(self.ino(path), None).unwrap().attr.size;
            if size > 0 {
                return size;
            }
        }
        0
    }

    fn read_all(&self, path: &str) -> String {
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
        String::from_utf8(out).unwrap()
    }

    fn refresh(&self) {
        self.log_dir.log("t", 0).unwrap().refresh().unwrap();
    }

    fn unmount(self) {
        self.fs.shutdown().unwrap();
        self.cache.flush();
    }
}

fn lines(offsets: impl Iterator<Item = i64>) -> String {
    offsets.map(|i| format!("{}\n", value(i))).collect()
}

fn listing(dir: &Path) -> Vec<(std::path::PathBuf, u64, std::time::SystemTime)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            (e.path(), m.len(), m.modified().unwrap())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_broker_compacting_and_deleting_segments_under_a_read_only_mount_keeps_sizes_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, cache) = (tmp.path().join("data"), tmp.path().join("cache"));
    let bases = broker_partition(&data);
    assert!(bases.len() >= 5, "{bases:?}");
    let part = data.join("t-0");

    // A first mount learns every sealed segment (background sizing), in every format.
    let m = mount(&data, &cache, u64::MAX);
    TopicFs::start_background_sizing(&m.fs).join().unwrap();
    let all = lines(0..60);
    assert_eq!(m.read_all("t/0/by-offset/0"), all);
    m.unmount();

    // Mounted again (the cache warm, one batch per stat): exact at once.
    let m = mount(&data, &cache, 1);
    assert_eq!(m.size("t/0/by-offset/0", 3), all.len() as u64);

    // Under the mount, the cleaner compacts the first two segments (dropping every third
    // record).
    compact(&part, bases[0], bases[1], |i| i % 3 != 0);
    m.refresh();
    let after = lines(bases[2].0..60);
    assert_eq!(m.read_all(&format!("t/0/by-offset/{}", bases[2].0)), after);
    m.unmount();

    // A new mount: the compacted segment's entry is stale (another file, other bytes) and the
    // deleted second segment's is never asked for; sizes are exact, reads what is on disk.
    let m = mount(&data, &cache, u64::MAX);
    let compacted: String = lines((0..bases[2].0).filter(|i| i % 3 != 0));
    let expected = format!("{compacted}{after}");
    assert_eq!(m.size("t/0/by-offset/0", 1), expected.len() as u64);
    assert_eq!(m.read_all("t/0/by-offset/0"), expected);
    let json = m.read_all("t/0/by-offset/0.json");
    assert_eq!(m.size("t/0/by-offset/0.json", 1), json.len() as u64);
    assert_eq!(json.lines().count(), expected.lines().count());

    // Under this mount, retention deletes the compacted segment.
    delete_segment(&data, &part, bases[0], bases[2]);
    m.refresh();
    let from = format!("t/0/by-offset/{}", bases[2].0);
    assert_eq!(m.read_all(&from), after);
    assert_eq!(m.size(&from, 1), after.len() as u64);
    m.unmount();

    // Rebuilt: with the cache warm again, one batch per stat is enough.
    let m = mount(&data, &cache, 1);
    assert_eq!(m.size(&from, 3), after.len() as u64);
    assert_eq!(m.read_all(&from), after);
    m.unmount();
    assert!(!listing(&part).iter().any(|(p, ..)| p.to_string_lossy().contains("cache")));
    assert!(std::fs::read_dir(&data).unwrap().all(|e| {
        let n = e.unwrap().file_name();
        n == OsStr::new("t-0")
            || n.to_string_lossy().ends_with("checkpoint")
            || n == OsStr::new("meta.properties")
            || n == OsStr::new(".lock")
            || n == OsStr::new(".kafka_cleanshutdown")
            // Written by the writable stand-in broker (this engine) when it created `t`.
            || n == OsStr::new(topicfs::settings::topic_config::TOPIC_CONFIG_FILE)
    }));
}
