//! Bounded concurrency stress: several writers and readers on the same partitions while
//! segments roll (small `segment.bytes`) and retention deletes old ones (small
//! `retention.bytes`). Every record carries its writer and a sequence number, and its padding
//! is derived from both, so a torn, duplicated or reordered record is recognised. Readers never
//! see one; nothing deadlocks (every thread has a deadline); memory stays bounded.
//!
//! Two levels: the engine alone (many retention passes, called in a loop) and a real mount
//! (cat, `tail -f`, random `by-offset`/`by-time` opens; the daemon's own retention task).

use crate::common;

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use common::{Follower, MountGuard};
use topicfs::format::{NewRecord, Offset, decode_batch, peek_entry};
use topicfs::source::{OffsetQuery, PartitionSource, TopicSource};
use topicfs::storage::LogConfig;

/// How long writers keep writing (a bound on the test's length, not a performance target).
const WRITE_FOR: Duration = Duration::from_secs(6);
/// A thread still running this long after it was told to stop is deadlocked.
const STOP_DEADLINE: Duration = Duration::from_secs(60);

fn record_line(writer: usize, seq: u64) -> String {
    let pad = char::from(b'a' + (seq % 26) as u8).to_string().repeat((seq % 40) as usize);
    format!("w{writer} {seq:08} {pad}")
}

/// Parses a record written by [`record_line`]; `None` if it is not exactly such a record
/// (torn, merged with another, or garbage).
fn parse_line(line: &[u8]) -> Option<(usize, u64)> {
    let text = std::str::from_utf8(line).ok()?;
    let rest = text.strip_prefix('w')?;
    let (writer, rest) = rest.split_once(' ')?;
    let (seq, _) = rest.split_once(' ')?;
    let (writer, seq) = (writer.parse().ok()?, seq.parse().ok()?);
    (record_line(writer, seq) == text).then_some((writer, seq))
}

/// What one reader saw of one partition: per writer, sequence numbers in read order.
#[derive(Default, Debug)]
struct Seen(BTreeMap<usize, Vec<u64>>);

impl Seen {
    fn add(&mut self, line: &[u8], what: &str) {
        let (w, seq) = parse_line(line)
            .unwrap_or_else(|| panic!("{what}: torn record {:?}", String::from_utf8_lossy(line)));
        self.0.entry(w).or_default().push(seq);
    }

    fn add_lines(&mut self, text: &[u8], what: &str) {
        assert!(text.is_empty() || text.ends_with(b"\n"), "{what}: a partial record at the end");
        for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            self.add(line, what);
        }
    }

    /// No duplicates, no reordering: each writer's sequence strictly increases. With
    /// `contiguous`, no gaps either.
    fn check(&self, what: &str, contiguous: bool) -> usize {
        let mut n = 0;
        for (w, seqs) in &self.0 {
            for pair in seqs.windows(2) {
                assert!(
                    pair[0] < pair[1],
                    "{what}: writer {w} record {} then {}",
                    pair[0],
                    pair[1]
                );
                if contiguous {
                    assert_eq!(pair[0] + 1, pair[1], "{what}: writer {w} skipped records");
                }
            }
            n += seqs.len();
        }
        n
    }
}

/// Joins `handles` or fails when they do not all end within [`STOP_DEADLINE`]; results in the
/// order of `handles`.
fn join_all<T: Send + 'static>(what: &str, handles: Vec<thread::JoinHandle<T>>) -> Vec<T> {
    let (tx, rx) = mpsc::channel();
    let count = handles.len();
    for (i, h) in handles.into_iter().enumerate() {
        let tx = tx.clone();
        thread::spawn(move || {
            let _ = tx.send((i, h.join()));
        });
    }
    let mut out = BTreeMap::new();
    for _ in 0..count {
        match rx.recv_timeout(STOP_DEADLINE) {
            Ok((i, Ok(v))) => {
                out.insert(i, v);
            }
            Ok((_, Err(panic))) => std::panic::resume_unwind(panic),
            Err(_) => panic!("deadlock: {what} threads did not stop"),
        }
    }
    out.into_values().collect()
}

fn engine_config() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", "4096").unwrap();
    c.set("index.interval.bytes", "256").unwrap();
    c.set("segment.index.bytes", "4096").unwrap();
    c.set("retention.bytes", "16384").unwrap();
    c.set("retention.ms", "-1").unwrap();
    c
}

/// Records of a read chunk as lines.
fn chunk_lines(bytes: &[u8], seen: &mut Seen, what: &str) {
    let mut at = 0;
    while let Some(h) = peek_entry(&bytes[at..]).unwrap() {
        let end = at + h.total_size();
        let batch = decode_batch(&bytes[at..end]).unwrap_or_else(|e| panic!("{what}: {e}"));
        for r in batch.records() {
            seen.add(r.unwrap().value.unwrap(), what);
        }
        at = end;
    }
    assert_eq!(at, bytes.len(), "{what}: part of a batch");
}

/// `seek` racing retention: a cursor it returns is at the batch holding its target (or the
/// target is out of range), never at a later batch that the reader would take for the target's
/// (the floor segment deleted between the log-start check and the lookup gave the first
/// remaining segment's first batch, labelled with the target: a stream opened there showed
/// records of later offsets at the target's place).
#[test]
fn seek_racing_retention_returns_the_batch_holding_its_target_or_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = crate::common::writable_log_dirs(dir.path(), engine_config());
    log_dir.create_topic("t", 1).unwrap();
    let part = log_dir.partition("t", 0).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (part, stop) = (part.clone(), stop.clone());
        thread::spawn(move || {
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let batch: Vec<NewRecord> = (seq..seq + 3)
                    .map(|s| NewRecord {
                        value: Some(record_line(0, s).into_bytes()),
                        ..NewRecord::default()
                    })
                    .collect();
                part.append(topicfs::source::Records::Owned(&batch)).unwrap();
                seq += 3;
            }
            seq
        })
    };
    let retention = {
        let (log_dir, stop) = (log_dir.clone(), stop.clone());
        thread::spawn(move || {
            let mut deleted = 0;
            while !stop.load(Ordering::Relaxed) {
                deleted += log_dir.enforce_retention().unwrap();
            }
            deleted
        })
    };
    let seekers: Vec<_> = (0..2)
        .map(|_| {
            let (part, stop) = (part.clone(), stop.clone());
            thread::spawn(move || {
                let (mut checked, mut refused) = (0usize, 0usize);
                while !stop.load(Ordering::Relaxed) {
                    let target = part.offset_for(OffsetQuery::Earliest).unwrap();
                    let Ok(cursor) = part.seek(target) else {
                        refused += 1;
                        continue;
                    };
                    let chunk = match part
                        .read(&cursor, 1024, topicfs::source::ReadMode::Batches)
                        .and_then(topicfs::source::ReadAnswer::into_chunk)
                    {
                        Ok(chunk) => chunk,
                        Err(topicfs::Error::OffsetOutOfRange { .. }) => {
                            refused += 1;
                            continue;
                        }
                        Err(e) => panic!("read from {target:?}: {e}"),
                    };
                    let Some(h) = peek_entry(&chunk.bytes).unwrap() else { continue };
                    let batch = decode_batch(&chunk.bytes[..h.total_size()]).unwrap();
                    let info = batch.info();
                    assert!(
                        info.base_offset <= target && target <= info.last_offset,
                        "seek({target:?}) gave a cursor at the batch {:?}..={:?}",
                        info.base_offset,
                        info.last_offset
                    );
                    checked += 1;
                }
                (checked, refused)
            })
        })
        .collect();
    thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    join_all("writer", vec![writer]);
    let deleted = join_all("retention", vec![retention]);
    let seeks = join_all("seeker", seekers);
    assert!(deleted[0] > 0, "retention never deleted a segment");
    assert!(seeks.iter().all(|(checked, _)| *checked > 0), "{seeks:?}");
    eprintln!("seeks racing retention (checked, refused): {seeks:?}; {} deleted", deleted[0]);
    log_dir.shutdown().unwrap();
}

#[test]
fn engine_readers_see_whole_ordered_records_while_segments_roll_and_retention_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = crate::common::writable_log_dirs(dir.path(), engine_config());
    log_dir.create_topic("t", 2).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let deleted = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for w in 0..4 {
        let part = log_dir.partition("t", (w % 2) as u32).unwrap();
        let stop = stop.clone();
        writers.push(thread::spawn(move || {
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let n = 1 + seq % 7;
                let batch: Vec<NewRecord> = (seq..seq + n)
                    .map(|s| NewRecord {
                        value: Some(record_line(w, s).into_bytes()),
                        ..NewRecord::default()
                    })
                    .collect();
                part.append(topicfs::source::Records::Owned(&batch)).unwrap();
                seq += n;
            }
            seq
        }));
    }
    let mut readers = Vec::new();
    for r in 0..4 {
        let part: Arc<dyn PartitionSource> = log_dir.partition("t", (r % 2) as u32).unwrap();
        let stop = stop.clone();
        readers.push(thread::spawn(move || {
            let mut reads = 0usize;
            let mut out_of_range = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let what = format!("engine reader {r}");
                let mut seen = Seen::default();
                // Alternate: from the log start, or from the middle.
                let start = part.offset_for(OffsetQuery::Earliest).unwrap();
                let from = if reads % 2 == 0 {
                    start
                } else {
                    let end = part.offset_for(OffsetQuery::Latest).unwrap();
                    Offset(start.0 + (end.0 - start.0) / 2)
                };
                let Ok(mut cursor) = part.seek(from) else {
                    // Retention moved the log start past `from` meanwhile.
                    out_of_range += 1;
                    reads += 1;
                    continue;
                };
                for _ in 0..10_000 {
                    match part
                        .read(&cursor, 2048, topicfs::source::ReadMode::Batches)
                        .and_then(topicfs::source::ReadAnswer::into_chunk)
                    {
                        Ok(chunk) if chunk.bytes.is_empty() => break,
                        Ok(chunk) => {
                            chunk_lines(&chunk.bytes, &mut seen, &what);
                            cursor = chunk.next.unwrap();
                        }
                        // Retention deleted the segment ahead of this reader.
                        Err(topicfs::Error::OffsetOutOfRange { .. }) => {
                            out_of_range += 1;
                            break;
                        }
                        Err(e) => panic!("{what}: {e}"),
                    }
                }
                seen.check(&what, false);
                reads += 1;
            }
            (reads, out_of_range)
        }));
    }
    let retention = {
        let (log_dir, stop, deleted) = (log_dir.clone(), stop.clone(), deleted.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                deleted.fetch_add(log_dir.enforce_retention().unwrap(), Ordering::Relaxed);
                thread::sleep(Duration::from_millis(5));
            }
        })
    };
    thread::sleep(WRITE_FOR);
    stop.store(true, Ordering::Relaxed);
    let written = join_all("writer", writers);
    let reads = join_all("reader", readers);
    join_all("retention", vec![retention]);
    assert!(deleted.load(Ordering::Relaxed) > 0, "retention never deleted a segment");
    assert!(reads.iter().all(|(n, _)| *n > 0), "a reader never finished a pass: {reads:?}");
    // What is left is whole and ordered, and ends with every writer's last record.
    for p in 0..2u32 {
        let part = log_dir.partition("t", p).unwrap();
        let mut seen = Seen::default();
        let mut cursor = part.seek(part.offset_for(OffsetQuery::Earliest).unwrap()).unwrap();
        loop {
            let chunk = part
                .read(&cursor, 1 << 20, topicfs::source::ReadMode::Batches)
                .and_then(topicfs::source::ReadAnswer::into_chunk)
                .unwrap();
            if chunk.bytes.is_empty() {
                break;
            }
            chunk_lines(&chunk.bytes, &mut seen, "final read");
            cursor = chunk.next.unwrap();
        }
        let end = part.offset_for(OffsetQuery::Latest).unwrap();
        assert!(
            cursor.next_offset >= end,
            "partition {p}: reading from the log start stopped at {cursor:?}, below the log end \
             offset {end}; segments {:?}",
            part.segment_files()
                .unwrap()
                .segments()
                .unwrap()
                .iter()
                .map(|s| (s.base_offset.0, s.log_size))
                .collect::<Vec<_>>()
        );
        seen.check(&format!("partition {p} after the stress"), true);
        for (w, seqs) in &seen.0 {
            assert_eq!(seqs.last().copied(), Some(written[*w] - 1), "writer {w}'s last record");
        }
    }
    eprintln!(
        "engine stress: {:?} records written, {} segments deleted, reader passes {reads:?}",
        written,
        deleted.load(Ordering::Relaxed)
    );
    log_dir.shutdown().unwrap();
}

fn vm_rss_kib(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Base offsets listed under `segments/` (`.log` files).
fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = match fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".log")?.parse().ok())
            .collect(),
        Err(_) => Vec::new(),
    };
    bases.sort();
    bases
}

#[test]
fn mounted_readers_see_whole_ordered_records_while_segments_roll_and_retention_deletes() {
    let m = MountGuard::foreground(&[
        "--partitions",
        "2",
        "--threads",
        "4",
        "--segment-bytes",
        "8192",
        "--index-interval-bytes",
        "512",
        "--retention-bytes",
        "32768",
        "--retention-ms",
        "-1",
        // Retention passes every second, so segments are deleted while readers read (the
        // default first pass after 30 s could find too little data on a loaded machine).
        "--retention-check-interval-ms",
        "1000",
    ]);
    fs::create_dir(m.path("t")).unwrap();
    let rss_before = vm_rss_kib(m.pid);
    let stop = Arc::new(AtomicBool::new(false));

    // A `tail -f` on each partition (a read loop that waits at the end, as tail does; the
    // real `tail -f` runs in `tail_f_keeps_following_while_another_reader_cats_the_same_partition`).
    let followers: Vec<_> = (0..2)
        .map(|p| {
            let (path, stop) = (m.path(&format!("t/{p}/by-offset/0")), stop.clone());
            thread::spawn(move || {
                let mut f = fs::File::open(path).unwrap();
                let mut out = Vec::new();
                let mut buf = vec![0u8; 64 * 1024];
                let mut idle_after_stop = 0;
                loop {
                    match f.read(&mut buf) {
                        Ok(0) if stop.load(Ordering::Relaxed) => {
                            idle_after_stop += 1;
                            if idle_after_stop > 20 {
                                return (out, None);
                            }
                            thread::sleep(Duration::from_millis(50));
                        }
                        Ok(0) => thread::sleep(Duration::from_millis(20)),
                        Ok(n) => out.extend_from_slice(&buf[..n]),
                        Err(e) => return (out, Some(e)),
                    }
                }
            })
        })
        .collect();

    let mut writers = Vec::new();
    for w in 0..4usize {
        let path = m.path(&format!("t/{}/append", w % 2));
        let stop = stop.clone();
        writers.push(thread::spawn(move || {
            let mut f = OpenOptions::new().write(true).open(path).unwrap();
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let n = 1 + seq % 5;
                let text: String =
                    (seq..seq + n).map(|s| record_line(w, s) + "\n").collect::<Vec<_>>().concat();
                f.write_all(text.as_bytes()).unwrap();
                seq += n;
                thread::sleep(Duration::from_millis(2));
            }
            seq
        }));
    }

    let mut readers = Vec::new();
    for r in 0..3usize {
        let root = m.mnt();
        let stop = stop.clone();
        readers.push(thread::spawn(move || {
            let mut passes = 0usize;
            let mut refused = 0usize;
            let mut rng = 0x2545_F491_4F6C_DD1Du64.wrapping_add(r as u64);
            while !stop.load(Ordering::Relaxed) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let p = rng % 2;
                // cat of everything, a random tail, a random offset, a random relative time.
                let name = match (r + passes) % 4 {
                    0 => "by-offset/-1000000".to_string(),
                    1 => format!("by-offset/-{}", rng % 500),
                    2 => format!("by-offset/{}", rng % 3000),
                    _ => format!("by-time/-{}s", rng % 10),
                };
                let path = root.join(format!("t/{p}/{name}"));
                let what = format!("reader {r}: {}", path.display());
                let mut text = Vec::new();
                let read =
                    fs::File::open(&path).and_then(|f| f.take(256 * 1024).read_to_end(&mut text));
                match read {
                    Ok(_) => {
                        // A read cut at 256 KiB may end mid-record: drop that partial line.
                        if text.len() == 256 * 1024 {
                            let keep = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                            text.truncate(keep);
                        }
                        let mut seen = Seen::default();
                        seen.add_lines(&text, &what);
                        seen.check(&what, false);
                    }
                    // ENOENT: an offset below the log start (deleted by retention) or past the
                    // end. ESTALE: retention deleted records this stream had not read yet, or
                    // rebuilt the partition's render index (documented in crates/view/src/stream.rs).
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESTALE)) => {
                        refused += 1
                    }
                    Err(e) => panic!("{what}: {e}"),
                }
                passes += 1;
            }
            (passes, refused)
        }));
    }

    // Write until the daemon's retention task (a pass every second) has deleted segments of
    // both partitions, then a little longer.
    let start = Instant::now();
    let retention_seen = |m: &MountGuard| {
        (0..2).all(|p| segment_bases(&m.path(&format!("t/{p}/segments"))).first() > Some(&0))
    };
    while !retention_seen(&m) && start.elapsed() < Duration::from_secs(90) {
        thread::sleep(Duration::from_millis(200));
    }
    let retention_ran = retention_seen(&m);
    // Keep the readers and writers going through several more retention passes.
    thread::sleep(
        Duration::from_secs(2).max(Duration::from_secs(12).saturating_sub(start.elapsed())),
    );
    stop.store(true, Ordering::Relaxed);
    let written = join_all("writer", writers);
    let reads = join_all("reader", readers);
    assert!(retention_ran, "retention never deleted a segment");
    assert!(reads.iter().all(|(n, _)| *n > 0), "a reader never finished: {reads:?}");

    // What each follower saw is whole, in order and without gaps; it follows to the end
    // unless retention deleted records it had not rendered yet (then ESTALE, as documented).
    let mut followed = 0;
    for (p, (out, err)) in join_all("follower", followers).into_iter().enumerate() {
        let what = format!("follower of partition {p}");
        let keep = out.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let mut seen = Seen::default();
        seen.add_lines(&out[..keep], &what);
        followed += seen.check(&what, true);
        match err {
            None => {
                for w in [p, p + 2] {
                    let last = seen.0.get(&w).and_then(|s| s.last()).copied();
                    assert_eq!(last, Some(written[w] - 1), "{what}: writer {w}'s last record");
                }
            }
            Some(e) => panic!("{what}: {e}"),
        }
    }

    let rss_after = vm_rss_kib(m.pid);
    eprintln!(
        "mount stress: records written {written:?}, reader passes (done, ENOENT) {reads:?}, \
         {followed} records followed, daemon VmRSS {rss_before} KiB -> {rss_after} KiB"
    );
    assert!(
        rss_after <= rss_before + 128 * 1024,
        "daemon memory grew from {rss_before} KiB to {rss_after} KiB"
    );
    m.unmount();
}

#[test]
fn tail_f_keeps_following_while_another_reader_cats_the_same_partition() {
    let m = MountGuard::foreground(&["--threads", "4", "--segment-bytes", "8192"]);
    fs::create_dir(m.path("t")).unwrap();
    let stream = m.path("t/0/by-offset/0");
    let mut follower =
        Follower::start("tail", &["-f", "-s", "0.2", "-c", "+1", stream.to_str().unwrap()]);
    let stop = Arc::new(AtomicBool::new(false));
    let cat = {
        let (path, stop) = (m.path("t/0/by-offset/-1000000"), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = fs::read(&path);
            }
        })
    };
    let mut f = OpenOptions::new().write(true).open(m.path("t/0/append")).unwrap();
    for seq in 0..3000 {
        f.write_all(format!("{}\n", record_line(0, seq)).as_bytes()).unwrap();
    }
    let out = follower.wait_for(&format!("{}\n", record_line(0, 2999)));
    stop.store(true, Ordering::Relaxed);
    join_all("cat", vec![cat]);
    let mut seen = Seen::default();
    seen.add_lines(out.as_bytes(), "tail -f");
    assert_eq!(seen.check("tail -f", true), 3000);
}

/// Several threads reading one open stream at once, as the kernel's parallel read-ahead of a
/// page-cache reader or a program sharing one descriptor between threads does: windows in
/// order from two threads in turn (the daemon's read-ahead starts, and each thread's read
/// arrives while the other's window is being rendered) and reads elsewhere from a third. Every
/// read returns exactly the bytes a single-threaded read has there, and none hangs (until
/// 4d2c8f4 a reader waiting for a window slept forever when another thread's read elsewhere
/// dropped the windows).
#[test]
fn threads_sharing_one_stream_handle_read_the_same_bytes_and_never_hang() {
    use std::os::unix::fs::FileExt;
    let m = MountGuard::foreground(&["--threads", "4"]);
    fs::create_dir(m.path("t")).unwrap();
    let mut f = OpenOptions::new().write(true).open(m.path("t/0/append")).unwrap();
    for chunk in 0..100u64 {
        let lines: String =
            (0..1000).map(|i| format!("{}\n", record_line(0, chunk * 1000 + i))).collect();
        f.write_all(lines.as_bytes()).unwrap();
    }
    drop(f);
    let stream = m.path("t/0/by-offset/0");
    let whole = Arc::new(fs::read(&stream).unwrap());
    let window = 64 * 1024;
    assert!(whole.len() > 40 * window, "{} bytes: too few windows for read-ahead", whole.len());
    let file = Arc::new(fs::File::open(&stream).unwrap());
    let read_at = |file: &fs::File, at: usize, len: usize| {
        let mut buf = vec![0u8; len];
        let mut got = 0;
        while got < len {
            match file.read_at(&mut buf[got..], (at + got) as u64).unwrap() {
                0 => break,
                n => got += n,
            }
        }
        buf.truncate(got);
        buf
    };
    let (done, finished) = mpsc::channel();
    for round in 0..8usize {
        let mut threads = Vec::new();
        // Two threads take the windows in order, in turn.
        for lane in 0..2usize {
            let (file, whole, done) = (file.clone(), whole.clone(), done.clone());
            threads.push(thread::spawn(move || {
                let mut k = lane;
                while k * window < whole.len() {
                    let at = k * window;
                    let got = read_at(&file, at, window);
                    let end = (at + window).min(whole.len());
                    assert!(got == whole[at..end], "round {round}: window at {at} differs");
                    k += 2;
                }
                let _ = done.send(());
            }));
        }
        // A third reads elsewhere, in other sizes, dropping the windows read ahead.
        let (file, whole, done) = (file.clone(), whole.clone(), done.clone());
        threads.push(thread::spawn(move || {
            let mut seed = 0x9e37_79b9_u64 + round as u64;
            for _ in 0..50 {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let at = (seed >> 24) as usize % whole.len();
                let len = [4096, 65536, 100_000][(seed >> 60) as usize % 3];
                let got = read_at(&file, at, len);
                let end = (at + len).min(whole.len());
                assert!(got == whole[at..end], "round {round}: read at {at} differs");
            }
            let _ = done.send(());
        }));
        for _ in 0..threads.len() {
            finished
                .recv_timeout(STOP_DEADLINE)
                .unwrap_or_else(|_| panic!("round {round}: a read never returned"));
        }
        join_all("reader", threads);
    }
    drop(file);
    m.unmount();
}

/// Keys of [`key_files_stay_exact_while_the_cleaner_compacts_under_writers`].
const SOAK_KEYS: u64 = 40;

/// `cleaner_swaps` of `kv/0/info`: cleaner outputs swapped in so far (a pass that replaced
/// segments a reader was reading has been counted before its read could fail).
fn cleaner_swaps(m_root: &Path) -> u64 {
    let info = fs::read_to_string(m_root.join("kv/0/info")).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cleaner_swaps: "))
        .unwrap_or_else(|| panic!("no cleaner_swaps in {info}"))
        .parse()
        .unwrap()
}

/// One JSON record of the soak: (offset, key, writer, sequence number).
fn soak_record(line: &str, what: &str) -> (u64, String, usize, u64) {
    let v: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{what}: {e}: {line:?}"));
    let payload = v["payload"].as_str().unwrap_or_else(|| panic!("{what}: {line}"));
    let mut words = payload.strip_prefix('w').unwrap_or_default().split(' ');
    let (w, seq): (usize, u64) = words
        .next()
        .zip(words.next())
        .and_then(|(w, s)| Some((w.parse().ok()?, s.parse().ok()?)))
        .unwrap_or_else(|| panic!("{what}: payload {payload:?}"));
    let pad = "p".repeat((seq % 30) as usize);
    assert_eq!(payload, format!("w{w} {seq:08} {pad}"), "{what}: a torn payload");
    let key = v["key"].as_str().unwrap_or_else(|| panic!("{what}: {line}")).to_string();
    (v["offset"].as_u64().unwrap(), key, w, seq)
}

/// The records of JSON lines `text` (every line whole), checked against the writers' model:
/// offsets ascend, and each writer's records ascend in sequence (a writer appends in order).
fn soak_records(text: &str, what: &str) -> Vec<(u64, String, usize, u64)> {
    assert!(text.is_empty() || text.ends_with('\n'), "{what}: a partial record at the end");
    let records: Vec<_> = text.lines().map(|l| soak_record(l, what)).collect();
    assert!(records.windows(2).all(|w| w[0].0 < w[1].0), "{what}: offsets out of order");
    let mut last: BTreeMap<usize, u64> = BTreeMap::new();
    for r in &records {
        let before = last.insert(r.2, r.3);
        assert!(before.is_none_or(|b| b < r.3), "{what}: writer {}'s records out of order", r.2);
    }
    records
}

/// Reads `path` whole through one handle: its size at `fstat` and its bytes.
fn read_whole(path: &Path) -> std::io::Result<(u64, String)> {
    let mut f = fs::File::open(path)?;
    let size = f.metadata()?.len();
    let mut text = String::new();
    f.read_to_string(&mut text)?;
    Ok((size, text))
}

/// Issue 44, item 3, under load: three writers of keyed records to a compacted topic with
/// small segments and a cleaner pass every 200 ms, readers of `by-key/<k>.json`,
/// `latest/<k>.json` and `by-offset/0.json`. Every read is checked against the writers' model
/// (whole records of its key, offsets ascending, each writer's in order, `by-key/` holding the
/// latest record present before its open, `latest/` never going back); a read may fail with
/// `ESTALE` only when a pass was swapped in during it (`cleaner_swaps` of `info` moved). After
/// the writers stop, every new open of every key (partition and topic level) is exactly the
/// key's records in the log, with `stat` agreeing.
#[test]
fn key_files_stay_exact_while_the_cleaner_compacts_under_writers() {
    let m = MountGuard::foreground(&["--cache-dir", "none", "--cleaner-backoff-ms", "200"]);
    fs::create_dir(m.path("kv")).unwrap();
    let mut config = OpenOptions::new().append(true).open(m.path("kv/config")).unwrap();
    config
        .write_all(b"cleanup.policy=compact\nsegment.bytes=8192\nmin.cleanable.dirty.ratio=0.01\n")
        .unwrap();
    drop(config);
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..3usize {
        let (path, stop) = (m.path("kv/0/append.json"), stop.clone());
        writers.push(thread::spawn(move || {
            let mut f = OpenOptions::new().write(true).open(path).unwrap();
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut text = String::new();
                for s in seq..seq + 4 {
                    let key = (s * 7 + w as u64 * 13) % SOAK_KEYS;
                    text.push_str(&format!(
                        "{{\"key\":\"k{key:03}\",\"payload\":\"w{w} {s:08} {}\"}}\n",
                        "p".repeat((s % 30) as usize)
                    ));
                }
                f.write_all(text.as_bytes()).unwrap();
                seq += 4;
                thread::sleep(Duration::from_millis(1));
            }
            seq
        }));
    }
    let mut readers = Vec::new();
    for r in 0..3usize {
        let (root, stop) = (m.mnt(), stop.clone());
        readers.push(thread::spawn(move || {
            // (reads checked, reads stale because a pass was swapped in during them: of
            // by-key/, of by-offset/)
            let (mut done, mut stale_by_key, mut stale_by_offset) = (0usize, 0usize, 0usize);
            let mut latest_seen: BTreeMap<u64, u64> = BTreeMap::new();
            let mut i = r;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let key = (i as u64 * 11) % SOAK_KEYS;
                let name = format!("k{key:03}");
                let before = cleaner_swaps(&root);
                // The key's latest record before the by-key open: the file holds it (or a
                // later one of the key).
                let latest = match fs::read_to_string(root.join(format!("kv/0/latest/{name}.json")))
                {
                    Ok(text) => Some(soak_record(text.trim_end(), &name)),
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
                    Err(e) => panic!("latest/{name}.json: {e}"),
                };
                if let Some(l) = &latest {
                    assert_eq!(l.1, name, "latest/{name}.json");
                    let prev = latest_seen.insert(key, l.0);
                    assert!(prev.is_none_or(|p| p <= l.0), "latest/{name}.json went back");
                }
                let path = match i % 3 {
                    0 => root.join("kv/0/by-offset/0.json"),
                    _ => root.join(format!("kv/0/by-key/{name}.json")),
                };
                let what = format!("reader {r}: {}", path.display());
                match read_whole(&path) {
                    Ok((size, text)) => {
                        let records = soak_records(&text, &what);
                        assert!(text.len() as u64 >= size, "{what}: {} < fstat {size}", text.len());
                        if i % 3 != 0 {
                            assert!(records.iter().all(|x| x.1 == name), "{what}: another key");
                            if let Some(l) = &latest {
                                let last = records.last().map(|x| x.0);
                                assert!(last >= Some(l.0), "{what}: lacks {l:?} ({last:?})");
                            }
                        }
                        done += 1;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ESTALE) => {
                        let after = cleaner_swaps(&root);
                        assert!(after > before, "{what}: ESTALE without a pass ({before})");
                        match i % 3 {
                            0 => stale_by_offset += 1,
                            _ => stale_by_key += 1,
                        }
                    }
                    Err(e) => panic!("{what}: {e}"),
                }
            }
            (done, stale_by_key, stale_by_offset)
        }));
    }
    // Write until passes have been swapped in several times, bounded in time.
    let start = Instant::now();
    while cleaner_swaps(&m.mnt()) < 30 && start.elapsed() < Duration::from_secs(60) {
        thread::sleep(Duration::from_millis(100));
    }
    thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let written = join_all("writer", writers);
    let reads = join_all("reader", readers);
    let swaps = cleaner_swaps(&m.mnt());
    assert!(swaps >= 30, "only {swaps} cleaner outputs swapped in");
    assert!(reads.iter().all(|(n, ..)| *n > 0), "a reader never finished: {reads:?}");

    // Quiet: the log changes only by passes now. Every new open equals the log's records of
    // the key, read between two looks at `cleaner_swaps` that agree.
    let root = m.mnt();
    for key in 0..SOAK_KEYS {
        let name = format!("k{key:03}");
        let mut tries = 0;
        loop {
            tries += 1;
            assert!(tries < 100, "{name}: passes kept coming");
            let before = cleaner_swaps(&root);
            let log = read_whole(&root.join("kv/0/by-offset/0.json"));
            let by_key = root.join(format!("kv/0/by-key/{name}.json"));
            let got = read_whole(&by_key);
            let topic = read_whole(&root.join(format!("kv/by-key/{name}.json")));
            let stat = fs::metadata(&by_key).map(|s| s.len());
            let latest = fs::read_to_string(root.join(format!("kv/0/latest/{name}.json")));
            if cleaner_swaps(&root) != before {
                continue;
            }
            let (_, log) = log.unwrap_or_else(|e| panic!("by-offset/0.json: {e}"));
            let want: Vec<_> = soak_records(&log, "by-offset/0.json")
                .into_iter()
                .filter(|x| x.1 == name)
                .collect();
            let (size, text) = got.unwrap_or_else(|e| panic!("by-key/{name}.json: {e}"));
            assert_eq!(soak_records(&text, &name), want, "by-key/{name}.json");
            assert_eq!(size, text.len() as u64, "fstat of by-key/{name}.json");
            assert_eq!(stat.unwrap(), text.len() as u64, "stat of by-key/{name}.json");
            let (_, topic) = topic.unwrap_or_else(|e| panic!("kv/by-key/{name}.json: {e}"));
            assert_eq!(topic, text, "kv/by-key/{name}.json");
            let latest = soak_record(latest.unwrap().trim_end(), &name);
            assert_eq!(Some(&latest), want.last(), "latest/{name}.json");
            break;
        }
    }
    eprintln!(
        "cleaner soak: records written {written:?}, reads (checked, stale during a pass: \
         by-key, by-offset) {reads:?}, {swaps} cleaner outputs swapped in"
    );
    m.unmount();
}
