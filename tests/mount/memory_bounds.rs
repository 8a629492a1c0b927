//! Many open streams through a real mount: the daemon's memory and threads are bounded by its
//! settings (`--memory-budget`, `--background-threads`, `--threads`), not by the number of open
//! handles, memory comes back after the handles close, and every handle still reads exactly
//! its records. The data is small (tens of MB) so that the test runs in seconds; what is
//! measured is the daemon's `/proc/<pid>/status` (`VmHWM`, `VmRSS`, `Threads`), never time.

use std::fs::{self, File};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{DEADLINE, Dirs, MountGuard};
use topicfs::format::NewRecord;
use topicfs::storage::{LogConfig, LogDirs, SegmentMode};

/// Open handles at once.
const HANDLES: usize = 1000;
/// Records of the partition the readers read (100-byte values, 1,000 a batch): about 30 MB.
const RECORDS: u64 = 300_000;
/// Records each reader reads: about 256 KiB of value lines.
const PER_READER: u64 = 2600;
/// Bytes each read asks for: the kernel's largest FUSE read, so read-ahead engages.
const READ_SIZE: usize = 128 << 10;
/// Threads of the test process sharing the handles (each reads its handles in turn).
const TEST_THREADS: usize = 25;
/// Peak resident set allowed for the daemon.
const MAX_RSS: u64 = 256 << 20;
/// Threads allowed for the daemon.
const MAX_THREADS: u64 = 64;

/// What one handle read: its first offset and its bytes.
type ReadRange = (u64, Vec<u8>);

/// The 100-byte value of record `offset`.
fn value(offset: u64) -> Vec<u8> {
    let mut v = format!("record {offset:012} ").into_bytes();
    v.resize(100, b'.');
    v
}

/// The value lines of records `[from, to)`.
fn lines(from: u64, to: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(((to - from) * 101) as usize);
    for o in from..to {
        out.extend_from_slice(&value(o));
        out.push(b'\n');
    }
    out
}

/// Partition `t-0` with records `[0, records)` in one segment.
fn write_partition(dirs: &Dirs, records: u64) {
    let mut config = LogConfig::default();
    config.set("retention.ms", "-1").unwrap();
    let log_dir =
        LogDirs::open_dir(&dirs.data(), config, Default::default(), SegmentMode::Writable).unwrap();
    log_dir.create_topic("t", 1).unwrap();
    let log = log_dir.log("t", 0).unwrap();
    let mut o = 0;
    while o < records {
        let batch: Vec<NewRecord> = (o..(o + 1000).min(records))
            .map(|o| NewRecord {
                timestamp: 1_700_000_000_000 + o as i64,
                key: None,
                value: Some(value(o)),
                headers: vec![],
            })
            .collect();
        o += batch.len() as u64;
        log.append(&batch).unwrap();
    }
    log_dir.shutdown().unwrap();
}

/// Room for [`HANDLES`] descriptors and then some.
fn raise_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    let want = (HANDLES as u64 + 1024).min(hard);
    if soft < want {
        setrlimit(Resource::RLIMIT_NOFILE, want, hard).unwrap();
    }
}

/// `VmHWM`, `VmRSS` (bytes) and `Threads` of process `pid`.
fn status(pid: u32) -> (u64, u64, u64) {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    (field("VmHWM:") * 1024, field("VmRSS:") * 1024, field("Threads:"))
}

/// Samples the daemon's thread count until dropped; the most seen.
struct ThreadSampler {
    stop: Arc<AtomicBool>,
    most: Arc<AtomicU64>,
    thread: Option<thread::JoinHandle<()>>,
}

impl ThreadSampler {
    fn start(pid: u32) -> ThreadSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let most = Arc::new(AtomicU64::new(0));
        let (s, m) = (Arc::clone(&stop), Arc::clone(&most));
        let thread = thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                m.fetch_max(status(pid).2, Ordering::SeqCst);
                thread::sleep(Duration::from_millis(5));
            }
        });
        ThreadSampler { stop, most, thread: Some(thread) }
    }

    fn most(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.most.load(Ordering::SeqCst)
    }
}

/// RSS once the mount has served one whole stream and gone quiet: the idle figure the RSS
/// after closing every handle is compared with.
fn idle_rss(mount: &MountGuard) -> u64 {
    let mut all = Vec::new();
    File::open(mount.path("t/0/by-offset/0..1000")).unwrap().read_to_end(&mut all).unwrap();
    assert_eq!(all, lines(0, 1000));
    settled_rss(mount.pid)
}

/// RSS after it stopped changing for a moment (freed memory is returned as it is freed; this
/// only waits for the daemon's threads to finish their last replies).
fn settled_rss(pid: u32) -> u64 {
    thread::sleep(Duration::from_millis(300));
    status(pid).1
}

/// RSS once every handle closed: the kernel sends FUSE `release` after `close` returns, on its
/// own schedule, so the daemon may see the last closes (and give memory back) some time later
/// on a loaded machine. Waits until RSS is at most `bound` or [`DEADLINE`] passes, and returns
/// the last figure either way (the caller's assertion then fails with it).
fn rss_after_close(pid: u32, bound: u64) -> u64 {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let rss = settled_rss(pid);
        if rss <= bound || Instant::now() >= deadline {
            return rss;
        }
    }
}

/// Prints the figures of a run of [`HANDLES`] `what` and checks them against the bounds: peak
/// RSS below [`MAX_RSS`], at most [`MAX_THREADS`] threads, RSS after close at most twice idle.
fn check_bounds(what: &str, peak: u64, most_threads: u64, idle: u64, after: u64) {
    eprintln!(
        "{HANDLES} {what}: peak RSS {} MB, at most {most_threads} threads, idle RSS {} MB, \
         after close {} MB",
        peak >> 20,
        idle >> 20,
        after >> 20
    );
    assert!(peak < MAX_RSS, "peak RSS {} MB", peak >> 20);
    assert!(most_threads <= MAX_THREADS, "{most_threads} threads");
    assert!(after <= 2 * idle, "RSS after close {} MB, idle {} MB", after >> 20, idle >> 20);
}

#[test]
fn a_thousand_concurrent_readers_stay_within_the_budget_and_read_exactly_their_records() {
    raise_fd_limit();
    let dirs = Dirs::new();
    write_partition(&dirs, RECORDS);
    let mount = MountGuard::foreground_on(dirs, &["--read-only"]);
    let idle = idle_rss(&mount);
    let sampler = ThreadSampler::start(mount.pid);

    // Every handle open at once, at spread offsets, each reading its range to the end in
    // 128 KiB reads, the test's threads taking turns over them.
    let stride = (RECORDS - PER_READER) / HANDLES as u64;
    let handles: Vec<(u64, File)> = (0..HANDLES as u64)
        .map(|i| {
            let from = i * stride;
            let name = format!("t/0/by-offset/{from}..{}", from + PER_READER);
            (from, File::open(mount.path(&name)).unwrap())
        })
        .collect();
    let handles = Arc::new(handles);
    let results: Arc<Mutex<Vec<ReadRange>>> = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..TEST_THREADS)
        .map(|t| {
            let (handles, results) = (Arc::clone(&handles), Arc::clone(&results));
            thread::spawn(move || {
                let mine: Vec<usize> = (t..HANDLES).step_by(TEST_THREADS).collect();
                let mut read: Vec<Vec<u8>> = vec![Vec::new(); mine.len()];
                let mut done = vec![false; mine.len()];
                let mut buf = vec![0u8; READ_SIZE];
                while done.iter().any(|d| !d) {
                    for (k, &i) in mine.iter().enumerate() {
                        if done[k] {
                            continue;
                        }
                        let file = &handles[i].1;
                        let n = file.read_at(&mut buf, read[k].len() as u64).unwrap();
                        read[k].extend_from_slice(&buf[..n]);
                        done[k] = n == 0;
                    }
                }
                let mut results = results.lock().unwrap();
                for (k, &i) in mine.iter().enumerate() {
                    results.push((handles[i].0, std::mem::take(&mut read[k])));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let (peak, _, _) = status(mount.pid);
    let most_threads = sampler.most();
    drop(Arc::try_unwrap(handles).ok().unwrap());
    let after = rss_after_close(mount.pid, 2 * idle);

    let results = results.lock().unwrap();
    assert_eq!(results.len(), HANDLES);
    for (from, bytes) in results.iter() {
        assert!(*bytes == lines(*from, from + PER_READER), "the handle at {from} read other bytes");
    }
    check_bounds("readers", peak, most_threads, idle, after);
}

#[test]
fn a_thousand_followers_of_a_growing_partition_see_every_record_within_the_budget() {
    raise_fd_limit();
    let dirs = Dirs::new();
    let start = 20_000;
    write_partition(&dirs, start);
    let mount = MountGuard::foreground_on(dirs, &[]);
    let idle = idle_rss(&mount);
    let sampler = ThreadSampler::start(mount.pid);

    // `tail -f` style: each handle opened at the current end (`by-offset/<end>`), reading to
    // the end of file, then polling there.
    let followers: Vec<File> = (0..HANDLES)
        .map(|_| File::open(mount.path(&format!("t/0/by-offset/{start}"))).unwrap())
        .collect();
    let followers = Arc::new(followers);
    let appended = 5_000u64;
    let writer = {
        let path = mount.path("t/0/append");
        thread::spawn(move || {
            let mut append = fs::OpenOptions::new().append(true).open(path).unwrap();
            let mut o = start;
            while o < start + appended {
                let n = 250.min(start + appended - o);
                use std::io::Write;
                let mut chunk = Vec::new();
                for x in o..o + n {
                    chunk.extend_from_slice(&value(x));
                    chunk.push(b'\n');
                }
                append.write_all(&chunk).unwrap();
                o += n;
                thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let expected = Arc::new(lines(start, start + appended));
    let threads: Vec<_> = (0..TEST_THREADS)
        .map(|t| {
            let (followers, expected) = (Arc::clone(&followers), Arc::clone(&expected));
            thread::spawn(move || {
                let mine: Vec<usize> = (t..HANDLES).step_by(TEST_THREADS).collect();
                let mut read: Vec<Vec<u8>> = vec![Vec::new(); mine.len()];
                let mut buf = vec![0u8; READ_SIZE];
                let begun = Instant::now();
                while read.iter().any(|r| r.len() < expected.len()) {
                    assert!(begun.elapsed() < 4 * DEADLINE, "followers did not catch up");
                    for (k, &i) in mine.iter().enumerate() {
                        // To the current end of file, then on to the next follower.
                        loop {
                            let n = followers[i].read_at(&mut buf, read[k].len() as u64).unwrap();
                            if n == 0 {
                                break;
                            }
                            read[k].extend_from_slice(&buf[..n]);
                        }
                    }
                    thread::sleep(Duration::from_millis(10));
                }
                for r in &read {
                    assert!(**r == expected[..], "a follower read other bytes");
                }
            })
        })
        .collect();
    writer.join().unwrap();
    for t in threads {
        t.join().unwrap();
    }
    let (peak, _, _) = status(mount.pid);
    let most_threads = sampler.most();
    drop(Arc::try_unwrap(followers).ok().unwrap());
    let after = rss_after_close(mount.pid, 2 * idle);
    check_bounds("followers", peak, most_threads, idle, after);
}
