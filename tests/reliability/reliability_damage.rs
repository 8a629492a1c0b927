//! Damaged data and power cuts, through the storage engine's public API.
//!
//! A data dir is written by the engine ([`LogDirs`]), copied, and the copy damaged with a seeded
//! RNG: bits flipped and files truncated (`.log`, `.index`, `.timeindex`, checkpoints,
//! `meta.properties`, `partition.metadata`). The copy is then opened (with or without the
//! clean-shutdown marker, writable or read-only) and read completely through
//! [`PartitionSource`]. Checked: no panic, no hang (every read loop is bounded and each case runs
//! under a deadline), damage is reported as [`Error::Corrupt`] naming the file and a position
//! inside it, nothing served differs from what was written, and every batch that lies wholly
//! before the first damaged byte of its segment stays readable.
//!
//! The power-cut test appends, syncs, appends more without a sync, then cuts the active `.log`
//! of a copy at random positions past the synced size (sometimes followed by zero bytes, as a
//! file system that extended the file but never wrote its blocks leaves it): recovery keeps a
//! valid prefix holding everything synced.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use topicfs::Error;
use topicfs::format::{NewRecord, Offset, decode_batch, peek_entry};
use topicfs::source::{PartitionSource, TopicSource};
use topicfs::storage::{LogConfig, LogDirs, SegmentMode};

/// A case that takes longer than this is a hang (the whole engine work per case is a few
/// milliseconds).
const CASE_DEADLINE: Duration = Duration::from_secs(60);
/// Reads per partition before a read loop counts as endless.
const MAX_READS: usize = 100_000;

/// SplitMix64: a tiny deterministic RNG, so every failure names a reproducible seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", "2048").unwrap();
    c.set("index.interval.bytes", "128").unwrap();
    c.set("segment.index.bytes", "4096").unwrap();
    c.set("retention.ms", "-1").unwrap();
    c
}

fn topic_configs() -> HashMap<String, LogConfig> {
    let mut zipped = config();
    zipped.set("compression.type", "gzip").unwrap();
    HashMap::from([("zipped".to_string(), zipped)])
}

fn value(topic: &str, partition: u32, n: usize) -> Vec<u8> {
    format!("{topic}/{partition} record {n:05} {}", "x".repeat(n % 37)).into_bytes()
}

/// Written records: `(topic, partition)` → values in offset order (offsets start at 0).
type Written = BTreeMap<(String, u32), Vec<Vec<u8>>>;

/// Writes two topics (`plain` uncompressed, `zipped` gzip) of two partitions each, in batches
/// of 1 to 12 records over several segments, and shuts down cleanly.
fn write_data_dir(dir: &Path) -> Written {
    let log_dir = LogDirs::open_dir(dir, config(), topic_configs(), SegmentMode::Writable).unwrap();
    let mut written = Written::new();
    let mut rng = Rng(7);
    for topic in ["plain", "zipped"] {
        log_dir.create_topic(topic, 2).unwrap();
        for partition in 0..2 {
            let part = log_dir.partition(topic, partition).unwrap();
            let values = written.entry((topic.to_string(), partition)).or_default();
            while values.len() < 240 {
                let n = 1 + rng.below(12) as usize;
                let batch: Vec<NewRecord> = (values.len()..values.len() + n)
                    .map(|i| NewRecord {
                        timestamp: 1_767_225_600_000 + i as i64,
                        value: Some(value(topic, partition, i)),
                        ..NewRecord::default()
                    })
                    .collect();
                values.extend(batch.iter().map(|r| r.value.clone().unwrap()));
                part.append(topicfs::source::Records::Owned(&batch)).unwrap();
            }
        }
    }
    log_dir.shutdown().unwrap();
    written
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else if entry.file_name() != ".lock" {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Every regular file under `dir` except the lock and the clean-shutdown marker.
fn damageable_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if entry.file_type().unwrap().is_dir() {
            out.extend(damageable_files(&entry.path()));
        } else if name != ".lock" && name != ".kafka_cleanshutdown" {
            out.push(entry.path());
        }
    }
    out.sort();
    out
}

/// One batch of an undamaged `.log`: where it lies and which offsets it holds.
#[derive(Clone, Debug)]
struct BatchSpan {
    position: u64,
    end: u64,
    base_offset: i64,
    last_offset: i64,
}

/// The batches of every `.log` file under `dir`, by file path relative to `dir` (read from the
/// bytes directly).
fn batch_layout(dir: &Path) -> BTreeMap<PathBuf, Vec<BatchSpan>> {
    let mut out = BTreeMap::new();
    for path in damageable_files(dir) {
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let mut spans = Vec::new();
        let mut pos = 0usize;
        while let Some(h) = peek_entry(&bytes[pos..]).unwrap() {
            let end = pos + h.total_size();
            let batch = decode_batch(&bytes[pos..end]).unwrap();
            spans.push(BatchSpan {
                position: pos as u64,
                end: end as u64,
                base_offset: batch.info().base_offset.0,
                last_offset: batch.info().last_offset.0,
            });
            pos = end;
        }
        out.insert(path.strip_prefix(dir).unwrap().to_path_buf(), spans);
    }
    out
}

/// What was done to one file: the first byte that no longer holds what the engine wrote.
#[derive(Debug)]
struct Damage {
    file: PathBuf,
    first_damaged_byte: u64,
    /// Positions of flipped bits (empty for a truncation).
    flipped: Vec<u64>,
    what: String,
}

/// Flips bits in or truncates 1 to 3 random files of `dir`.
fn damage(dir: &Path, rng: &mut Rng) -> Vec<Damage> {
    let files = damageable_files(dir);
    let mut done = Vec::new();
    for _ in 0..1 + rng.below(3) {
        let file = files[rng.below(files.len() as u64) as usize].clone();
        let mut bytes = std::fs::read(&file).unwrap();
        if bytes.is_empty() {
            continue;
        }
        let mut flipped = Vec::new();
        let what = if rng.below(2) == 0 {
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(bytes.len() as u64);
                bytes[at as usize] ^= 1 << rng.below(8);
                flipped.push(at);
            }
            format!("bits flipped at {flipped:?}")
        } else {
            let len = rng.below(bytes.len() as u64);
            bytes.truncate(len as usize);
            format!("truncated to {len}")
        };
        let first_damaged_byte = flipped.iter().copied().min().unwrap_or(bytes.len() as u64);
        std::fs::write(&file, &bytes).unwrap();
        done.push(Damage { file, first_damaged_byte, flipped, what });
    }
    done
}

/// What reading a damaged dir gave.
#[derive(Debug, Default)]
struct ReadResult {
    /// `(topic, partition)` → offset → value, for every record served.
    served: BTreeMap<(String, u32), BTreeMap<i64, Vec<u8>>>,
    /// Log start offsets and the base offsets of the segments present after opening.
    log_start: BTreeMap<(String, u32), i64>,
    segments: BTreeMap<(String, u32), Vec<i64>>,
    errors: Vec<Error>,
}

/// Reads every partition of `dir` from its log start offset to its log end offset; on an error
/// continues at the next segment. Returns the open error if the dir cannot be opened.
fn read_everything(dir: &Path, mode: SegmentMode) -> Result<ReadResult, Error> {
    let log_dir = LogDirs::open_dir(dir, config(), topic_configs(), mode)?;
    let mut result = ReadResult::default();
    for topic in log_dir.topics()? {
        for partition in log_dir.partitions(&topic)? {
            let part = log_dir.partition(&topic, partition)?;
            read_partition(&*part, &topic, &mut result);
        }
    }
    log_dir.shutdown()?;
    Ok(result)
}

fn read_partition(part: &dyn PartitionSource, topic: &str, result: &mut ReadResult) {
    let key = (topic.to_string(), part.partition());
    let served = result.served.entry(key.clone()).or_default();
    let summary = match part.summary() {
        Ok(s) => s,
        Err(e) => return result.errors.push(e),
    };
    let bases: Vec<i64> = match part.segment_files().unwrap().segments() {
        Ok(segs) => segs.iter().map(|s| s.base_offset.0).collect(),
        Err(e) => return result.errors.push(e),
    };
    result.log_start.insert(key.clone(), summary.log_start_offset.0);
    result.segments.insert(key, bases.clone());
    let mut next = summary.log_start_offset;
    let mut reads = 0;
    'segments: while next < summary.log_end_offset {
        let mut cursor = match part.seek(next) {
            Ok(c) => c,
            Err(e) => {
                result.errors.push(e);
                match bases.iter().find(|&&b| b > next.0) {
                    Some(&b) => {
                        next = Offset(b);
                        continue;
                    }
                    None => break,
                }
            }
        };
        loop {
            reads += 1;
            assert!(reads < MAX_READS, "endless read loop in {topic}-{}", part.partition());
            match part
                .read(&cursor, 1024, topicfs::source::ReadMode::Batches)
                .and_then(topicfs::source::ReadAnswer::into_chunk)
            {
                Ok(chunk) if chunk.bytes.is_empty() => {
                    // An empty read below the log end offset with segments after the cursor's
                    // would be damage served as the end of the log (bug 1 of RELIABILITY.md).
                    let at_end = cursor.next_offset >= summary.log_end_offset;
                    let later = bases.iter().any(|&b| b > cursor.hint.get().unwrap().0);
                    assert!(
                        at_end || !later,
                        "{topic}-{}: read ended silently at {cursor:?} below the log end offset \
                         {}",
                        part.partition(),
                        summary.log_end_offset
                    );
                    break 'segments;
                }
                Ok(chunk) => {
                    let mut at = 0;
                    while let Some(h) = peek_entry(&chunk.bytes[at..]).unwrap() {
                        let end = at + h.total_size();
                        let batch = decode_batch(&chunk.bytes[at..end])
                            .expect("read served a batch that does not decode");
                        for r in batch.records() {
                            let r = r.expect("read served a batch with a bad record");
                            served.insert(r.offset.0, r.value.unwrap_or_default().to_vec());
                        }
                        at = end;
                    }
                    assert_eq!(at, chunk.bytes.len(), "read served part of a batch");
                    let Some(n) = chunk.next else { break 'segments };
                    assert!(n > cursor, "read did not advance: {cursor:?} -> {n:?}");
                    cursor = n;
                }
                Err(e) => {
                    result.errors.push(e);
                    match bases.iter().find(|&&b| b > cursor.hint.get().unwrap().0) {
                        Some(&b) => {
                            next = Offset(b);
                            continue 'segments;
                        }
                        None => break 'segments,
                    }
                }
            }
        }
    }
}

/// Runs `f` on a thread and fails if it does not finish within [`CASE_DEADLINE`].
fn with_deadline<T: Send + 'static>(what: String, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(CASE_DEADLINE) {
        Ok(v) => {
            handle.join().unwrap();
            v
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the case thread ended without a result"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("hang: {what} still running"),
    }
}

/// `(topic, partition)` of a file under a partition directory of `root`.
fn partition_of(root: &Path, file: &Path) -> Option<(String, u32)> {
    let dir = file.parent()?;
    if dir == root {
        return None;
    }
    topicfs::format::file_name::parse_partition_dir(dir.file_name()?.to_str()?)
}

/// The checks shared by every damage case; `label` names the case in failures.
fn check_damage_case(
    label: &str,
    root: &Path,
    written: &Written,
    layout: &BTreeMap<PathBuf, Vec<BatchSpan>>,
    damages: &[Damage],
    outcome: Result<ReadResult, Error>,
) {
    let result = match outcome {
        Ok(r) => r,
        Err(e) => {
            // Refusing to open is acceptable only for damage to the dir's own files, and the
            // error must name the damaged file.
            let msg = e.to_string();
            assert!(
                damages.iter().any(|d| partition_of(root, &d.file).is_none()
                    && msg.contains(d.file.file_name().unwrap().to_str().unwrap())),
                "{label}: open failed with {msg:?}, which names no damaged dir-level file"
            );
            return;
        }
    };
    for e in &result.errors {
        match e {
            Error::Corrupt { file, position, .. } => {
                let damaged = damages.iter().find(|d| &d.file == file);
                let relative = file.strip_prefix(root).unwrap_or(file);
                let original_len = layout.get(relative).and_then(|s| s.last()).map_or(0, |s| s.end);
                assert!(
                    damaged.is_some() || file.extension().is_some_and(|e| e != "log"),
                    "{label}: corruption reported in undamaged {file:?}: {e}"
                );
                assert!(
                    *position <= original_len.max(1 << 20),
                    "{label}: position {position} outside {file:?}: {e}"
                );
            }
            other => panic!("{label}: damage reported without file and position: {other}"),
        }
    }
    for ((topic, partition), values) in written {
        let key = (topic.clone(), *partition);
        let served = result.served.get(&key).cloned().unwrap_or_default();
        let dir = root.join(format!("{topic}-{partition}"));
        // Kafka's CRC does not cover a batch's `baseOffset` (bytes 0..8): a flipped bit there
        // moves the batch's records to other offsets undetectably (Kafka's own recovery accepts
        // it too). Only then may a record show up at another offset; its bytes are still ours.
        let base_offset_flipped = damages.iter().any(|d| {
            d.file.parent() == Some(&dir)
                && layout.get(d.file.strip_prefix(root).unwrap()).is_some_and(|spans| {
                    spans
                        .iter()
                        .any(|s| d.flipped.iter().any(|&p| p >= s.position && p < s.position + 8))
                })
        });
        for (offset, v) in &served {
            let expected = usize::try_from(*offset).ok().and_then(|o| values.get(o));
            if base_offset_flipped {
                assert!(
                    values.contains(v),
                    "{label}: {topic}-{partition} offset {offset} served bytes never written; damage: {damages:?}"
                );
            } else {
                assert_eq!(
                    Some(v),
                    expected,
                    "{label}: {topic}-{partition} offset {offset} served bytes never written; damage: {damages:?}"
                );
            }
        }
        let Some(log_start) = result.log_start.get(&key) else { continue };
        let present = result.segments.get(&key).cloned().unwrap_or_default();
        // Every batch wholly before the first damaged byte of its (still present) segment.
        for (relative, spans) in layout.iter() {
            let file = root.join(relative);
            if file.parent() != Some(&dir) {
                continue;
            }
            let base = spans.first().map_or(-1, |s| s.base_offset);
            if !present.contains(&base) {
                continue;
            }
            let first_damage = damages
                .iter()
                .filter(|d| d.file == file)
                .map(|d| d.first_damaged_byte)
                .min()
                .unwrap_or(u64::MAX);
            for span in spans.iter().filter(|s| s.end <= first_damage) {
                for offset in span.base_offset.max(*log_start)..=span.last_offset {
                    assert!(
                        served.contains_key(&offset),
                        "{label}: {topic}-{partition} offset {offset} (intact, in {} at {}) \
                         not readable; damage: {damages:?}; errors: {:?}",
                        file.display(),
                        span.position,
                        result.errors.iter().map(ToString::to_string).collect::<Vec<_>>()
                    );
                }
            }
        }
    }
}

/// Damages `cases` copies of one engine-written dir (seeds `first_seed..`), opens each in `mode`
/// (after a clean shutdown or, without the marker, after a crash) and checks it.
fn run_damage_cases(cases: u64, first_seed: u64, mode: SegmentMode, clean: bool) {
    let work = tempfile::tempdir().unwrap();
    let pristine = work.path().join("pristine");
    let written = Arc::new(write_data_dir(&pristine));
    let layout = Arc::new(batch_layout(&pristine));
    let (mut with_errors, mut refused) = (0, 0);
    for seed in first_seed..first_seed + cases {
        let root = work.path().join(format!("case-{seed}"));
        copy_dir(&pristine, &root);
        if !clean {
            std::fs::remove_file(root.join(".kafka_cleanshutdown")).unwrap();
        }
        let damages = damage(&root, &mut Rng(seed));
        let label = format!("seed {seed} ({mode:?}, clean shutdown {clean})");
        let shown: Vec<String> =
            damages.iter().map(|d| format!("{} {}", d.file.display(), d.what)).collect();
        let (r, w, l) = (root.clone(), written.clone(), layout.clone());
        let errors = with_deadline(format!("{label}: {shown:?}"), move || {
            let outcome = read_everything(&r, mode);
            let counts = match &outcome {
                Ok(o) => (o.errors.len(), 0),
                Err(_) => (0, 1),
            };
            check_damage_case(&label, &r, &w, &l, &damages, outcome);
            counts
        });
        with_errors += usize::from(errors.0 > 0 || errors.1 > 0);
        refused += errors.1;
        std::fs::remove_dir_all(&root).unwrap();
    }
    eprintln!(
        "{cases} damage cases ({mode:?}, clean shutdown {clean}): {with_errors} reported damage \
         ({refused} refused to open)"
    );
    // Some damage must have been noticed at all, or the cases damaged nothing that matters.
    assert!(with_errors > 0, "no case of {cases} reported any damage");
}

#[test]
fn damaged_files_after_a_clean_shutdown_are_reported_and_intact_batches_stay_readable() {
    run_damage_cases(40, 1000, SegmentMode::Writable, true);
}

#[test]
fn damaged_files_after_a_crash_are_recovered_and_intact_batches_stay_readable() {
    run_damage_cases(40, 2000, SegmentMode::Writable, false);
}

#[test]
fn damaged_files_read_only_are_reported_and_intact_batches_stay_readable() {
    run_damage_cases(40, 3000, SegmentMode::ReadOnly, false);
}

/// Reads `part` from `from` until the first error or the first empty chunk (bounded).
fn read_until_stop(
    part: &dyn PartitionSource,
    from: Offset,
) -> (BTreeMap<i64, Vec<u8>>, Result<topicfs::source::ReadCursor, Error>) {
    let mut served = BTreeMap::new();
    let mut cursor = match part.seek(from) {
        Ok(c) => c,
        Err(e) => return (served, Err(e)),
    };
    for _ in 0..MAX_READS {
        match part
            .read(&cursor, 4096, topicfs::source::ReadMode::Batches)
            .and_then(topicfs::source::ReadAnswer::into_chunk)
        {
            Ok(chunk) if chunk.bytes.is_empty() => return (served, Ok(cursor)),
            Ok(chunk) => {
                let mut at = 0;
                while let Some(h) = peek_entry(&chunk.bytes[at..]).unwrap() {
                    let end = at + h.total_size();
                    for r in decode_batch(&chunk.bytes[at..end]).unwrap().records() {
                        let r = r.unwrap();
                        served.insert(r.offset.0, r.value.unwrap_or_default().to_vec());
                    }
                    at = end;
                }
                cursor = chunk.next.unwrap();
            }
            Err(e) => return (served, Err(e)),
        }
    }
    panic!("endless read loop from {from}");
}

#[test]
fn torn_batch_in_a_sealed_segment_is_reported() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("data");
    write_data_dir(&dir);
    let first = dir.join("plain-0").join("00000000000000000000.log");
    let len = std::fs::metadata(&first).unwrap().len();
    // Cut the first (sealed) segment in the middle of its last batch.
    let spans = &batch_layout(&dir)[Path::new("plain-0/00000000000000000000.log")];
    let last = spans.last().unwrap();
    assert_eq!(last.end, len);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&first)
        .unwrap()
        .set_len(last.position + 20)
        .unwrap();

    let log_dir =
        LogDirs::open_dir(&dir, config(), topic_configs(), SegmentMode::Writable).unwrap();
    let part = log_dir.partition("plain", 0).unwrap();
    let log_end = part.summary().unwrap().log_end_offset;
    let (served, stop) = read_until_stop(&*part, Offset(0));
    assert!(served.len() as i64 >= last.base_offset, "records before the torn batch are served");
    match stop {
        Err(Error::Corrupt { file, position, .. }) => {
            assert_eq!(file, first);
            assert_eq!(position, last.position);
        }
        Ok(cursor) => panic!(
            "read stopped silently at {cursor:?} before the log end offset {log_end}; the \
             sealed segment {} is torn at position {}",
            first.display(),
            last.position
        ),
        Err(e) => panic!("torn batch reported without file and position: {e}"),
    }
}

/// Power cut: everything up to the last `sync` survives a cut anywhere past the synced size.
#[test]
fn power_cut_past_the_last_sync_keeps_a_valid_prefix_with_everything_synced() {
    let work = tempfile::tempdir().unwrap();
    let live = work.path().join("live");
    let log_dir =
        LogDirs::open_dir(&live, config(), topic_configs(), SegmentMode::Writable).unwrap();
    log_dir.create_topic("plain", 1).unwrap();
    log_dir.create_topic("zipped", 1).unwrap();
    let mut rng = Rng(42);
    let mut cases = 0;
    for round in 0..6 {
        for topic in ["plain", "zipped"] {
            let part = log_dir.partition(topic, 0).unwrap();
            let append = |part: &Arc<dyn PartitionSource>, rng: &mut Rng, n: usize| {
                for _ in 0..n {
                    let next = part.summary().unwrap().log_end_offset.0 as usize;
                    let k = 1 + rng.below(6) as usize;
                    let batch: Vec<NewRecord> = (next..next + k)
                        .map(|i| NewRecord {
                            value: Some(value(topic, 0, i)),
                            ..NewRecord::default()
                        })
                        .collect();
                    part.append(topicfs::source::Records::Owned(&batch)).unwrap();
                }
            };
            append(&part, &mut rng, 3 + round);
            part.sync().unwrap();
            let synced = part.summary().unwrap().log_end_offset;
            let segments = part.segment_files().unwrap().segments().unwrap();
            let active = segments.last().unwrap();
            let synced_size = active.log_size;
            let more = 1 + rng.below(4) as usize;
            append(&part, &mut rng, more);
            let full_end = part.summary().unwrap().log_end_offset;
            // Only the active segment past the synced size may be lost, so stay in one segment.
            if part.segment_files().unwrap().segments().unwrap().last().unwrap().base_offset
                != active.base_offset
            {
                continue;
            }
            let full_size =
                part.segment_files().unwrap().segments().unwrap().last().unwrap().log_size;
            for cut in 0..4 {
                let case = work.path().join(format!("cut-{round}-{topic}-{cut}"));
                copy_dir(&live, &case);
                let log_name = format!("{:020}.log", active.base_offset.0);
                let log_path = case.join(format!("{topic}-0")).join(&log_name);
                let cut_at = synced_size + rng.below(full_size - synced_size + 1);
                let file = std::fs::OpenOptions::new().write(true).open(&log_path).unwrap();
                file.set_len(cut_at).unwrap();
                // A file system may have extended the file without writing its blocks.
                let zeros = if rng.below(2) == 0 { rng.below(300) } else { 0 };
                file.set_len(cut_at + zeros).unwrap();
                drop(file);
                // Index pages written through the map may be lost too: cut the active
                // segment's indexes at a random length in half the cases.
                if rng.below(2) == 0 {
                    for suffix in ["index", "timeindex"] {
                        let path = log_path.with_extension(suffix);
                        let len = std::fs::metadata(&path).unwrap().len();
                        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                        f.set_len(rng.below(len + 1)).unwrap();
                    }
                }
                let label =
                    format!("{topic} cut at {cut_at} (+{zeros} zeros), synced {synced_size}");
                let c = case.clone();
                let topic_name = topic.to_string();
                let (served, stop, end) = with_deadline(label.clone(), move || {
                    let d = LogDirs::open_dir(&c, config(), topic_configs(), SegmentMode::Writable)
                        .unwrap();
                    let p = d.partition(&topic_name, 0).unwrap();
                    let end = p.summary().unwrap().log_end_offset;
                    let (served, stop) = read_until_stop(&*p, Offset(0));
                    d.shutdown().unwrap();
                    (served, stop.map_err(|e| e.to_string()), end)
                });
                assert!(stop.is_ok(), "{label}: read failed after recovery: {stop:?}");
                assert!(
                    end >= synced && end <= full_end,
                    "{label}: log end {end} not in [{synced}, {full_end}]"
                );
                assert_eq!(
                    served.len() as i64,
                    end.0,
                    "{label}: not every offset below the end is served"
                );
                for (offset, v) in &served {
                    assert_eq!(v, &value(topic, 0, *offset as usize), "{label}: offset {offset}");
                }
                std::fs::remove_dir_all(&case).unwrap();
                cases += 1;
            }
        }
    }
    log_dir.shutdown().unwrap();
    assert!(cases >= 24, "only {cases} power cuts simulated");
}

/// Reads `path` through the mount until EOF or an error; returns the bytes read and the errno.
fn read_through_mount(path: &Path) -> (Vec<u8>, Option<i32>) {
    let mut out = Vec::new();
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return (out, e.raw_os_error()),
    };
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..MAX_READS {
        match f.read(&mut buf) {
            Ok(0) => return (out, None),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => return (out, e.raw_os_error()),
        }
    }
    panic!("endless read of {}", path.display());
}

#[test]
fn damaged_data_dirs_mounted_serve_intact_records_and_eio_for_damage() {
    let work = tempfile::tempdir().unwrap();
    let pristine = work.path().join("pristine");
    let written = write_data_dir(&pristine);
    let layout = batch_layout(&pristine);
    let (mut eio, mut skipped) = (0, 0);
    for seed in 5000..5008u64 {
        let dirs = common::Dirs::new();
        std::fs::remove_dir(dirs.data()).unwrap();
        copy_dir(&pristine, &dirs.data());
        let damages = damage(&dirs.data(), &mut Rng(seed));
        // Read-only every other seed: nothing under the dir may change, damage or not.
        let args: &[&str] = if seed % 2 == 0 { &["--read-only"] } else { &[] };
        let m = common::MountGuard::foreground_on(dirs, args);
        for ((topic, partition), values) in &written {
            let path = m.path(&format!("{topic}/{partition}/by-offset/0"));
            let label = format!("seed {seed} {}: damage {damages:?}", path.display());
            let (bytes, errno) = with_deadline(label.clone(), move || read_through_mount(&path));
            match errno {
                None => {}
                Some(libc::EIO) => eio += 1,
                // The partition did not load, or recovery moved its log start past 0.
                Some(libc::ENOENT) => {}
                Some(e) => panic!("{label}: errno {e}"),
            }
            let dir = m.data().join(format!("{topic}-{partition}"));
            let base_offset_flipped = damages.iter().any(|d| {
                d.file.parent() == Some(&dir)
                    && layout.get(d.file.strip_prefix(m.data()).unwrap()).is_some_and(|spans| {
                        spans.iter().any(|s| {
                            d.flipped.iter().any(|&p| p >= s.position && p < s.position + 8)
                        })
                    })
            });
            // Whole lines served are records that were written, in order. A damaged sealed
            // segment's rest is skipped (logged with file and position) so later intact
            // segments stay readable: gaps are counted.
            let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            let mut next = 0usize;
            for line in bytes[..complete].split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                let at = values.iter().position(|v| v == line);
                let at = at.unwrap_or_else(|| panic!("{label}: {line:?} never written"));
                if !base_offset_flipped {
                    assert!(at >= next, "{label}: record {at} served after record {next}");
                    skipped += at - next;
                }
                next = at + 1;
            }
        }
        assert!(!common::process_ended(m.pid), "seed {seed}: the daemon died");
        m.unmount();
    }
    eprintln!(
        "8 damaged dirs mounted: {eio} partitions reported EIO, {skipped} damaged records skipped"
    );
}
