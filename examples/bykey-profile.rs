//! Profiles the per-query path of by-key files in process (issue 21), without FUSE: builds a
//! partition of `RECORDS` records with `RECORDS / 10` keys (1,000-record batches of 100-byte
//! values, keys spread at random, as `scripts/bench --by-key` does), builds its key index, then
//! times `QUERIES` rounds of what the kernel sends for `cat by-key/<k>.json | head -c 4096` of a
//! present key and of an absent key: lookup, open, one 4 KiB read, release.
//!
//! `cargo run --release --example bykey-profile -- DIR [RECORDS] [QUERIES]`, under
//! `perf record -e cpu-clock -g` or `valgrind --tool=callgrind` to see where a query goes.
//! DIR is reused when it already holds the partition.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Instant;

use topicfs::format::NewRecord;
use topicfs::fs::attr::OpenRequest;
use topicfs::fs::inode::ROOT_INO;
use topicfs::fs::{DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, FsOptions, TopicFs};
use topicfs::source::TopicSource;
use topicfs::storage::{LogConfig, LogDirs, SegmentMode};

const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };

/// The key of record `n` among `keys` keys (xorshift, as the benchmark's).
fn key_of(n: u64, keys: u64) -> String {
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    format!("user-{:07}", x.wrapping_mul(0x2545_F491_4F6C_DD1D) % keys)
}

fn config() -> LogConfig {
    LogConfig { segment_bytes: 64 << 20, retention_ms: None, ..LogConfig::default() }
}

fn generate(dir: &std::path::Path, records: u64, keys: u64) -> Result<(), String> {
    let logs = LogDirs::open_dir(dir, config(), Default::default(), SegmentMode::Writable)
        .map_err(|e| e.to_string())?;
    logs.create_topic("t", 1).map_err(|e| e.to_string())?;
    let log = logs.log("t", 0).map_err(|e| e.to_string())?;
    let mut n = 0;
    while n < records {
        let batch: Vec<NewRecord> = (n..(n + 1000).min(records))
            .map(|i| NewRecord {
                timestamp: 1_700_000_000_000 + i as i64,
                key: Some(key_of(i, keys).into_bytes()),
                value: Some(format!("{i:0>100}").into_bytes()),
                headers: vec![],
            })
            .collect();
        n += batch.len() as u64;
        log.append(&batch).map_err(|e| e.to_string())?;
    }
    logs.shutdown().map_err(|e| e.to_string())
}

fn ino(fs: &TopicFs, path: &str) -> Result<u64, String> {
    let mut ino = ROOT_INO;
    for name in path.split('/') {
        ino = fs.lookup(ino, OsStr::new(name)).map_err(|e| format!("{path}: {e}"))?.attr.ino;
    }
    Ok(ino)
}

/// What the kernel sends for one `head -c 4096 PATH` whose directory is already looked up.
fn query(fs: &TopicFs, dir: u64, name: &str) -> Result<usize, String> {
    let ino = fs.lookup(dir, OsStr::new(name)).map_err(|e| format!("{name}: {e}"))?.attr.ino;
    let fh = fs.open(ino, READ).map_err(|e| format!("{name}: {e}"))?.fh;
    let n = fs.read(fh, 0, 4096).map_err(|e| format!("{name}: {e}"))?.len();
    fs.release(fh).map_err(|e| format!("{name}: {e}"))?;
    Ok(n)
}

fn percentiles(mut us: Vec<f64>) -> String {
    us.sort_by(f64::total_cmp);
    let at = |q: f64| us[((us.len() - 1) as f64 * q) as usize];
    format!("p50 {:.1} us, p99 {:.1} us, max {:.1} us", at(0.5), at(0.99), at(1.0))
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().ok_or("usage: DIR [RECORDS] [QUERIES]")?);
    let records: u64 =
        args.next().map_or(Ok(1_000_000), |a| a.parse()).map_err(|e| format!("{e}"))?;
    let queries: u64 = args.next().map_or(Ok(10_000), |a| a.parse()).map_err(|e| format!("{e}"))?;
    let keys = (records / 10).max(1);
    if !dir.join("t-0").exists() {
        eprintln!("generating {records} records with {keys} keys in {}", dir.display());
        generate(&dir, records, keys)?;
    }
    let logs = Arc::new(
        LogDirs::open_dir(&dir, config(), Default::default(), SegmentMode::ReadOnly)
            .map_err(|e| e.to_string())?,
    );
    let options = FsOptions {
        read_only: true,
        partitions_per_topic: 1,
        max_line_bytes: 1 << 20,
        uid: 0,
        gid: 0,
        file_mode: DEFAULT_FILE_MODE,
        dir_mode: DEFAULT_DIR_MODE,
    };
    let fs = TopicFs::new(Arc::clone(&logs) as Arc<dyn TopicSource>, options);
    let by_key = ino(&fs, "t/0/by-key")?;
    let start = Instant::now();
    query(&fs, by_key, &format!("{}.json", key_of(0, keys)))?;
    eprintln!("index built by the first query in {:.2} s", start.elapsed().as_secs_f64());

    let (mut present, mut absent) = (Vec::new(), Vec::new());
    let mut bytes = 0;
    let start = Instant::now();
    for i in 0..queries {
        let t = Instant::now();
        bytes += query(&fs, by_key, &format!("{}.json", key_of(i * 7919 + 13, keys)))?;
        present.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        bytes += query(&fs, by_key, &format!("absent-{i}.json"))?;
        absent.push(t.elapsed().as_secs_f64() * 1e6);
    }
    eprintln!(
        "{queries} present + {queries} absent queries in {:.2} s ({bytes} bytes read)",
        start.elapsed().as_secs_f64()
    );
    eprintln!("present by-key/<k>.json lookup+open+read+release: {}", percentiles(present));
    eprintln!("absent  by-key/<k>.json lookup+open+read+release: {}", percentiles(absent));
    Ok(())
}
