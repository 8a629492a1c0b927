//! The cleaner's model and crash tests: random keyed logs with tombstones, keyless records,
//! idempotent producers and committed and aborted transactions over several segments, written
//! as a broker would (segment files, `.txnindex`), cleaned, and checked against a model.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use super::*;
use topicfs_format::control::encode_end_txn_marker_batch;
use topicfs_format::index_entry::{OffsetPosition, TimestampOffset};
use topicfs_format::txn_index::TxnIndexEntry;
use topicfs_format::{BatchSpec, Compression, NewRecord, decode_batch, encode_batch, verify_crc};
use topicfs_settings::config::LogConfig;
use topicfs_storage::log::LoadState;
use topicfs_storage::segment::SegmentMode;

const T0: i64 = 1_767_225_600_000;
const NOW: i64 = T0 + 1_000_000;
const RETENTION: i64 = 3_600_000;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One record as the model knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Rec {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub control: bool,
}

/// What was generated: the records, which offsets belong to aborted transactions, the last
/// batch `(base, last)` of the idempotent producer, and the active segment's base offset.
pub(super) struct Generated {
    pub aborted: BTreeSet<i64>,
    pub producer_last_batch: Option<(i64, i64, i32)>,
    pub active_base: i64,
}

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("index.interval.bytes", "100").unwrap();
    c.set("segment.index.bytes", "4096").unwrap();
    c.set("retention.ms", "-1").unwrap();
    c
}

pub(super) fn settings(dedupe: usize, segment_bytes: u64) -> CleanerSettings {
    CleanerSettings {
        delete_retention_ms: RETENTION,
        min_cleanable_dirty_ratio: 0.0,
        segment_bytes,
        segment_index_bytes: 4096,
        dedupe_buffer_bytes: dedupe,
        ..CleanerSettings::default()
    }
}

/// Writes a random dirty partition into `dir` (segment files and `.txnindex` files only; the
/// indexes are rebuilt by recovery at open).
pub(super) fn generate(dir: &Path, seed: u64) -> Generated {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let keys = 3 + rng.below(12);
    let batches = 25 + rng.below(40);
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    let mut segments: Vec<(i64, Vec<u8>, Vec<u8>)> = vec![(0, Vec::new(), Vec::new())];
    let mut next = 0i64;
    let mut aborted = BTreeSet::new();
    let mut seq = 0i32;
    let mut producer_last_batch = None;
    let mut since_roll = 0;
    let roll_every = 3 + rng.below(5);
    let mut txn_pid = 500i64;
    let mut i = 0;
    while i < batches {
        i += 1;
        if since_roll >= roll_every {
            segments.push((next, Vec::new(), Vec::new()));
            since_roll = 0;
        }
        since_roll += 1;
        let mut records = Vec::new();
        let n = 1 + rng.below(4);
        for j in 0..n {
            let key = (!rng.chance(6)).then(|| format!("k{}", rng.below(keys)).into_bytes());
            let value = (!rng.chance(15)).then(|| format!("v{}-{j}", next + j as i64).into_bytes());
            records.push(NewRecord {
                timestamp: T0 + next + j as i64,
                key,
                value,
                headers: if rng.chance(20) {
                    vec![(b"h".to_vec(), Some(b"x".to_vec()))]
                } else {
                    vec![]
                },
            });
        }
        let compression = codecs[rng.below(codecs.len() as u64) as usize];
        let kind = rng.below(10);
        let seg = segments.last_mut().unwrap();
        let mut spec = BatchSpec {
            base_offset: Offset(next),
            compression,
            partition_leader_epoch: 3,
            ..BatchSpec::default()
        };
        match kind {
            0..=1 => {
                // The idempotent producer.
                spec.producer_id = 100;
                spec.producer_epoch = 2;
                spec.base_sequence = seq;
                producer_last_batch = Some((next, next + n as i64 - 1, seq));
                seq += n as i32;
            }
            2..=3 => {
                // A transaction of one data batch and its marker, committed or aborted.
                txn_pid += 1;
                spec.producer_id = txn_pid;
                spec.producer_epoch = 0;
                spec.base_sequence = 0;
                spec.is_transactional = true;
                let commit = kind == 2;
                seg.1.extend(encode_batch(&spec, &records).unwrap());
                let first = next;
                if !commit {
                    aborted.extend(first..first + n as i64);
                }
                next += n as i64;
                let marker =
                    encode_end_txn_marker_batch(Offset(next), 3, txn_pid, 0, commit, 1, T0 + next)
                        .unwrap();
                seg.1.extend(marker);
                if !commit {
                    let entry = TxnIndexEntry {
                        version: 0,
                        producer_id: txn_pid,
                        first_offset: Offset(first),
                        last_offset: Offset(next),
                        last_stable_offset: Offset(next),
                    };
                    seg.2.extend(entry.to_bytes());
                }
                next += 1;
                continue;
            }
            _ => {}
        }
        seg.1.extend(encode_batch(&spec, &records).unwrap());
        next += n as i64;
    }
    // The active segment: one batch, never cleaned.
    segments.push((next, Vec::new(), Vec::new()));
    let last = NewRecord {
        timestamp: T0 + next,
        key: Some(b"k0".to_vec()),
        value: Some(b"active".to_vec()),
        headers: vec![],
    };
    let spec = BatchSpec { base_offset: Offset(next), ..BatchSpec::default() };
    segments.last_mut().unwrap().1.extend(encode_batch(&spec, &[last]).unwrap());
    let active_base = next;
    for (base, log, txn) in &segments {
        let name = topicfs_format::file_name::format_base_offset(Offset(*base));
        std::fs::write(dir.join(format!("{name}.log")), log).unwrap();
        if !txn.is_empty() {
            std::fs::write(dir.join(format!("{name}.txnindex")), txn).unwrap();
        }
    }
    Generated { aborted, producer_last_batch, active_base }
}

pub(super) fn open(dir: &Path) -> Log {
    let state = LoadState { had_clean_shutdown: false, ..LoadState::default() };
    Log::open(dir, "t", 0, config(), SegmentMode::Writable, state).unwrap()
}

/// Every batch a full read of `log` shows: `(info, records)`.
pub(super) fn read_all(log: &Log) -> Vec<(BatchInfo, Vec<Rec>)> {
    let mut cursor = log.seek(log.log_start_offset()).unwrap();
    let mut out = Vec::new();
    loop {
        let chunk = log.read(&cursor, 4096).unwrap();
        if chunk.bytes.is_empty() {
            return out;
        }
        let mut at = 0;
        while let Some(h) = peek_entry(&chunk.bytes[at..]).unwrap() {
            let entry = &chunk.bytes[at..at + h.total_size()];
            verify_crc(entry).unwrap();
            let batch = decode_batch(entry).unwrap();
            let info = batch.info().clone();
            let recs = batch
                .records()
                .map(|r| {
                    let r = r.unwrap();
                    Rec {
                        offset: r.offset.0,
                        timestamp: r.timestamp,
                        key: r.key.map(<[u8]>::to_vec),
                        value: r.value.map(<[u8]>::to_vec),
                        control: info.is_control,
                    }
                })
                .collect();
            out.push((info, recs));
            at += h.total_size();
        }
        cursor = chunk.next.unwrap();
    }
}

fn records(batches: &[(BatchInfo, Vec<Rec>)]) -> Vec<Rec> {
    batches.iter().flat_map(|(_, r)| r.iter().cloned()).collect()
}

/// The latest value of each key among committed data records (what `latest/` shows).
fn latest_values(recs: &[Rec], aborted: &BTreeSet<i64>) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    for r in recs.iter().filter(|r| !r.control && !aborted.contains(&r.offset)) {
        if let Some(k) = &r.key {
            out.insert(k.clone(), r.value.clone());
        }
    }
    out.retain(|_, v| v.is_some());
    out
}

/// Checks the offset and time index files of every segment of the directory against its log.
pub(super) fn check_indexes(dir: &Path) {
    for entry in topicfs_storage::open::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("log") {
            continue;
        }
        let base: i64 = path.file_stem().unwrap().to_str().unwrap().parse().unwrap();
        let log = topicfs_storage::open::read_regular(&path).unwrap();
        let mut starts = HashMap::new();
        let mut at = 0;
        let mut max_ts = -1;
        while let Some(h) = peek_entry(&log[at..]).unwrap() {
            let info = parse_batch_info(&log[at..]).unwrap();
            verify_crc(&log[at..at + h.total_size()]).unwrap();
            assert!(info.base_offset.0 >= base, "{}: batch below the base offset", path.display());
            starts.insert(at as u32, info.last_offset.0);
            max_ts = max_ts.max(info.max_timestamp);
            at += h.total_size();
        }
        assert_eq!(at, log.len(), "{}: whole batches", path.display());
        let index =
            topicfs_storage::open::read_regular(&path.with_extension("index")).unwrap_or_default();
        let mut last = -1;
        for n in 0.. {
            let Some(e) = OffsetPosition::nth(&index, n) else { break };
            if e.relative_offset.0 == 0 && e.position == 0 && n > 0 {
                break;
            }
            let offset = e.offset(Offset(base)).0;
            assert!(offset > last, "{}: index offsets increase", path.display());
            assert_eq!(
                starts.get(&e.position),
                Some(&offset),
                "{}: entry {n} at a batch start",
                path.display()
            );
            last = offset;
        }
        let time = topicfs_storage::open::read_regular(&path.with_extension("timeindex"))
            .unwrap_or_default();
        let mut last_ts = -1;
        for n in 0.. {
            let Some(e) = TimestampOffset::nth(&time, n) else { break };
            if e.timestamp == 0 && n > 0 {
                break;
            }
            assert!(
                e.timestamp > last_ts && e.timestamp <= max_ts,
                "{}: time index",
                path.display()
            );
            last_ts = e.timestamp;
        }
    }
}

/// Cleans until the dirty section is gone (several passes when the map is small).
fn clean_fully(
    log: &Log,
    cleaner: &mut Cleaner,
    s: &CleanerSettings,
    now: i64,
    checkpoint: &mut Option<Offset>,
) -> usize {
    let mut passes = 0;
    let opts = CleanOptions { now, ..CleanOptions::default() };
    while let Some(stats) = cleaner.clean(log, s, *checkpoint, &opts).unwrap() {
        passes += 1;
        assert!(
            stats.end_offset > stats.first_dirty || stats.first_dirty == stats.first_uncleanable
        );
        *checkpoint = Some(stats.end_offset);
        if stats.end_offset >= stats.first_uncleanable {
            break;
        }
        assert!(passes < 200, "the cleaner makes progress");
    }
    passes
}

fn check_model(seed: u64, dedupe: usize, segment_bytes: u64) -> (usize, usize, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    std::fs::create_dir(&dir).unwrap();
    let g = generate(&dir, seed);
    let log = open(&dir);
    let segments_before = log.segment_list().len();
    let before = read_all(&log);
    let before_recs = records(&before);
    let by_offset: HashMap<i64, Rec> = before_recs.iter().map(|r| (r.offset, r.clone())).collect();
    let latest_before = latest_values(&before_recs, &g.aborted);
    let s = settings(dedupe, segment_bytes);
    let mut cleaner = Cleaner::new(dedupe);
    let mut checkpoint = None;
    let passes = clean_fully(&log, &mut cleaner, &s, NOW, &mut checkpoint);
    let segments_after = log.segment_list().len();
    assert!(passes >= 1, "seed {seed}: the dirty log is cleaned");
    assert_eq!(
        checkpoint,
        Some(Offset(g.active_base)),
        "seed {seed}: cleaned up to the active segment"
    );

    let check = |log: &Log, tombstones_kept: bool, what: &str| {
        let after = read_all(log);
        let recs = records(&after);
        // Every kept record is the original at its offset, offsets strictly increasing.
        let mut last = -1;
        for r in &recs {
            assert!(r.offset > last, "seed {seed} {what}: offsets increase, {} once", r.offset);
            last = r.offset;
            assert_eq!(
                by_offset.get(&r.offset),
                Some(r),
                "seed {seed} {what}: record {} unchanged",
                r.offset
            );
        }
        // In the cleaned section: exactly the latest committed record of each key.
        let mut latest: BTreeMap<Vec<u8>, &Rec> = BTreeMap::new();
        for r in before_recs
            .iter()
            .filter(|r| r.offset < g.active_base && !r.control && !g.aborted.contains(&r.offset))
        {
            if let Some(k) = &r.key {
                latest.insert(k.clone(), r);
            }
        }
        let mut expected: Vec<i64> = latest
            .values()
            .filter(|r| r.value.is_some() || tombstones_kept)
            .map(|r| r.offset)
            .collect();
        expected.sort();
        let got: Vec<i64> = recs
            .iter()
            .filter(|r| r.offset < g.active_base && !r.control)
            .map(|r| r.offset)
            .collect();
        assert_eq!(
            got, expected,
            "seed {seed} {what}: the latest record of each key, nothing else"
        );
        // The active segment is untouched.
        let active: Vec<&Rec> = before_recs.iter().filter(|r| r.offset >= g.active_base).collect();
        let active_after: Vec<&Rec> = recs.iter().filter(|r| r.offset >= g.active_base).collect();
        assert_eq!(active, active_after, "seed {seed} {what}: the active segment is untouched");
        assert_eq!(
            latest_values(&recs, &g.aborted),
            latest_before,
            "seed {seed} {what}: latest values"
        );
        // The idempotent producer's last batch survives with its offsets and sequence.
        if let Some((base, last, seq)) = g.producer_last_batch {
            let b = after.iter().find(|(i, _)| i.producer_id == 100 && i.base_offset.0 == base);
            let (info, _) =
                b.unwrap_or_else(|| panic!("seed {seed} {what}: producer's last batch kept"));
            assert_eq!(
                (info.last_offset.0, info.base_sequence, info.producer_epoch),
                (last, seq, 2)
            );
        }
        for (info, recs) in &after {
            assert_eq!(
                info.partition_leader_epoch,
                if info.base_offset.0 >= g.active_base { 0 } else { 3 }
            );
            if info.records_count == 0 {
                let last_of_producer = before
                    .iter()
                    .rfind(|(b, _)| b.producer_id == info.producer_id && !b.is_control)
                    .is_some_and(|(b, _)| b.base_offset == info.base_offset);
                assert!(
                    info.size == 61 && last_of_producer,
                    "seed {seed}: only a producer's last batch is kept empty"
                );
            }
            assert!(
                recs.iter().all(|r| !g.aborted.contains(&r.offset)),
                "seed {seed} {what}: aborted records removed"
            );
        }
    };
    check(&log, true, "after cleaning");
    check_indexes(&dir);

    // Reopened from disk (recovery), the same.
    drop(log);
    let log = open(&dir);
    check(&log, true, "reopened");

    // After the delete horizon, a pass drops the tombstones (and the markers of emptied
    // transactions, but a producer's last batch).
    let later = NOW + RETENTION + 1;
    let opts = CleanOptions { now: later, ..CleanOptions::default() };
    log.set_latest_delete_horizon(NOW + RETENTION);
    let mut horizon_passes = 0;
    while let Some(stats) = cleaner.clean(&log, &s, checkpoint, &opts).unwrap() {
        checkpoint = Some(stats.end_offset);
        horizon_passes += 1;
        assert!(horizon_passes < 50, "seed {seed}: passes after the horizon end");
    }
    assert!(horizon_passes >= 1, "seed {seed}: a passed horizon makes a pass due");
    check(&log, false, "after the delete horizon");
    // A marker that could not go before (its transaction's batches were still there) got its
    // own horizon in that pass; after it, only markers of transactions whose batch is still
    // there remain (Kafka keeps those; a producer's last batch stays, emptied, while it is active).
    let last = later + RETENTION + 1;
    let opts = CleanOptions { now: last, ..CleanOptions::default() };
    while let Some(stats) = cleaner.clean(&log, &s, checkpoint, &opts).unwrap() {
        checkpoint = Some(stats.end_offset);
        assert!(log.latest_delete_horizon() == NO_TIMESTAMP || log.latest_delete_horizon() > last);
    }
    assert_eq!(log.latest_delete_horizon(), NO_TIMESTAMP);
    check(&log, false, "after the markers' horizon");
    let after = read_all(&log);
    for (info, _) in &after {
        if info.is_control && info.base_offset.0 < g.active_base {
            let data_kept = after.iter().any(|(b, r)| {
                !b.is_control
                    && b.producer_id == info.producer_id
                    && (!r.is_empty() || b.records_count == 0)
            });
            assert!(
                data_kept,
                "seed {seed}: marker at {} kept after its horizon",
                info.base_offset
            );
        }
    }
    check_indexes(&dir);
    (passes, segments_before, segments_after)
}

#[test]
fn cleaner_model_keeps_the_latest_record_of_every_key() {
    for seed in 0..40 {
        let (passes, before, after) = check_model(seed, 1 << 16, 1 << 20);
        assert_eq!((passes, after), (1, 2), "seed {seed}: one pass, one group ({before} segments)");
    }
}

#[test]
fn cleaner_model_in_several_passes_with_a_small_map() {
    let mut several = 0;
    for seed in 100..130 {
        // Room for 4 keys: more keys than that take several passes.
        several += usize::from(check_model(seed, 24 * 5, 1 << 20).0 > 1);
    }
    assert!(several > 10, "{several} logs needed several passes");
}

#[test]
fn cleaner_model_regroups_segments_up_to_segment_bytes() {
    let (mut regrouped, mut several_outputs) = (0, 0);
    for seed in 200..220 {
        let (_, before, after) = check_model(seed, 1 << 16, 2000);
        several_outputs += usize::from(after > 2);
        regrouped += usize::from(after < before);
    }
    assert!(regrouped > 10, "segments merged in {regrouped} logs");
    assert!(several_outputs > 10, "several groups in {several_outputs} logs");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for e in topicfs_storage::open::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn leftovers(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = topicfs_storage::open::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted"))
        .collect();
    out.sort();
    out
}

#[test]
fn cleaner_crash_at_every_step_loses_and_duplicates_nothing() {
    let s = settings(1 << 16, 1 << 20);
    for seed in 300..306 {
        let tmp = tempfile::tempdir().unwrap();
        let pristine = tmp.path().join("pristine");
        std::fs::create_dir(&pristine).unwrap();
        generate(&pristine, seed);
        // What a pass that completes leaves.
        let done_dir = tmp.path().join("done");
        copy_dir(&pristine, &done_dir);
        let done = open(&done_dir);
        let before = records(&read_all(&done));
        let opts = CleanOptions { now: NOW, ..CleanOptions::default() };
        Cleaner::new(1 << 16).clean(&done, &s, None, &opts).unwrap().unwrap();
        let cleaned = records(&read_all(&done));
        assert!(cleaned.len() < before.len(), "seed {seed}: the pass removes records");
        for step in CrashStep::ALL {
            let dir = tmp.path().join(format!("{step:?}"));
            copy_dir(&pristine, &dir);
            let log = open(&dir);
            let opts = CleanOptions { now: NOW, crash_at: Some(step), ..CleanOptions::default() };
            let stats = Cleaner::new(1 << 16).clean(&log, &s, None, &opts).unwrap().unwrap();
            assert_eq!(stats.stopped_at, Some(step));
            assert!(!leftovers(&dir).is_empty(), "seed {seed} {step:?}: files in flight");
            drop(log);
            // The crash: reopen from disk with recovery.
            let log = open(&dir);
            assert_eq!(leftovers(&dir), Vec::<String>::new(), "seed {seed} {step:?}: recovery");
            let after = records(&read_all(&log));
            let committed = matches!(
                step,
                CrashStep::SwapRenamed
                    | CrashStep::MidDeleteRename
                    | CrashStep::OldDeleted
                    | CrashStep::MidFinalRename
            );
            let expected = if committed { &cleaned } else { &before };
            assert_eq!(
                &after, expected,
                "seed {seed} {step:?}: every record once, as before or as cleaned"
            );
            check_indexes(&dir);
            // Cleaning again gives what an uninterrupted pass gives.
            Cleaner::new(1 << 16)
                .clean(&log, &s, None, &CleanOptions { now: NOW, ..CleanOptions::default() })
                .unwrap();
            assert_eq!(records(&read_all(&log)), cleaned, "seed {seed} {step:?}: cleaned again");
        }
    }
}

#[test]
fn cleaner_readers_keep_reading_across_a_swap() {
    let s = settings(1 << 16, 1 << 20);
    for seed in 400..410 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        std::fs::create_dir(&dir).unwrap();
        generate(&dir, seed);
        let log = open(&dir);
        let before = records(&read_all(&log));
        let by_offset: HashMap<i64, Rec> = before.iter().map(|r| (r.offset, r.clone())).collect();
        // A reader part way through the first segment when the swap happens.
        let mut cursor = log.seek(log.log_start_offset()).unwrap();
        let first = log.read(&cursor, 200).unwrap();
        cursor = first.next.unwrap();
        let mut seen: Vec<i64> = Vec::new();
        let mut at = 0;
        while let Some(h) = peek_entry(&first.bytes[at..]).unwrap() {
            let b = decode_batch(&first.bytes[at..at + h.total_size()]).unwrap();
            seen.extend(b.records().map(|r| r.unwrap().offset.0));
            at += h.total_size();
        }
        // An old segment object kept by a reader still reads its bytes after the swap.
        let old_first = log.segment_list()[0].clone();
        let old_bytes = old_first.read(Position(0), 1 << 20).unwrap().unwrap().bytes;
        let opts = CleanOptions { now: NOW, ..CleanOptions::default() };
        Cleaner::new(1 << 16).clean(&log, &s, None, &opts).unwrap().unwrap();
        assert_eq!(old_first.read(Position(0), 1 << 20).unwrap().unwrap().bytes, old_bytes);
        // The cursor into the replaced segment is no longer held (as after retention); one
        // made now is.
        use topicfs_source::PartitionSource;
        assert!(!PartitionSource::holds(&log, &cursor).unwrap(), "seed {seed}: stale cursor");
        let fresh = log.seek(cursor.next_offset).unwrap();
        assert!(PartitionSource::holds(&log, &fresh).unwrap(), "seed {seed}: fresh cursor");
        loop {
            let chunk = log.read(&cursor, 300).unwrap();
            if chunk.bytes.is_empty() {
                break;
            }
            let mut at = 0;
            while let Some(h) = peek_entry(&chunk.bytes[at..]).unwrap() {
                let b = decode_batch(&chunk.bytes[at..at + h.total_size()]).unwrap();
                for r in b.records() {
                    let r = r.unwrap();
                    assert!(
                        by_offset.contains_key(&r.offset.0),
                        "seed {seed}: a record of the log"
                    );
                    seen.push(r.offset.0);
                }
                at += h.total_size();
            }
            cursor = chunk.next.unwrap();
        }
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "seed {seed}: no record twice: {seen:?}");
        assert_eq!(seen.last(), before.last().map(|r| &r.offset), "seed {seed}: to the end");
    }
}

/// A partition of two sealed segments and an active one: `k0` written at offsets 0 and 1,
/// at 2 (an open transaction's batch when `open_txn`), and at 3; then `k1` at 4 in the next
/// segment, the active one at 5.
fn plan_fixture(dir: &Path, open_txn: bool) {
    let one = |base: i64, key: &str, txn: bool| {
        let spec = BatchSpec {
            base_offset: Offset(base),
            producer_id: if txn { 900 } else { -1 },
            producer_epoch: if txn { 0 } else { -1 },
            base_sequence: if txn { 0 } else { -1 },
            is_transactional: txn,
            ..BatchSpec::default()
        };
        let r = NewRecord {
            timestamp: T0 + base,
            key: Some(key.as_bytes().to_vec()),
            value: Some(format!("v{base}").into_bytes()),
            headers: vec![],
        };
        encode_batch(&spec, &[r]).unwrap()
    };
    let seg0 =
        [one(0, "k0", false), one(1, "k0", false), one(2, "k0", open_txn), one(3, "k0", false)]
            .concat();
    std::fs::write(dir.join("00000000000000000000.log"), seg0).unwrap();
    std::fs::write(dir.join("00000000000000000004.log"), one(4, "k1", false)).unwrap();
    std::fs::write(dir.join("00000000000000000005.log"), one(5, "k2", false)).unwrap();
}

#[test]
fn cleaner_plan_stops_at_the_last_stable_offset_and_honours_the_lags_and_the_ratio() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    std::fs::create_dir(&dir).unwrap();
    plan_fixture(&dir, false);
    let log = open(&dir);
    let mut cleaner = Cleaner::new(1 << 16);
    let opts = CleanOptions { now: NOW, ..CleanOptions::default() };
    // The dirty ratio: the clean section (below the checkpoint at 4) is most of the log.
    let s = CleanerSettings { min_cleanable_dirty_ratio: 0.5, ..settings(1 << 16, 1 << 20) };
    assert_eq!(cleaner.clean(&log, &s, Some(Offset(4)), &opts).unwrap(), None);
    // ... unless the first dirty batch is older than max.compaction.lag.ms.
    let overdue = CleanerSettings { max_compaction_lag_ms: 1000, ..s.clone() };
    let stats = cleaner.clean(&log, &overdue, Some(Offset(4)), &opts).unwrap().unwrap();
    assert_eq!((stats.first_dirty, stats.end_offset), (Offset(4), Offset(5)));
    let offsets: Vec<i64> = records(&read_all(&log)).iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [0, 1, 2, 3, 4, 5], "keys the dirty section lacks stay in the clean one");
    // min.compaction.lag.ms: every segment is too young.
    let young = CleanerSettings { min_compaction_lag_ms: NOW - T0, ..settings(1 << 16, 1 << 20) };
    assert_eq!(cleaner.clean(&log, &young, None, &opts).unwrap(), None);

    // An open transaction at offset 2 ends the dirty section; records from it on stay.
    let dir = tmp.path().join("t-1");
    std::fs::create_dir(&dir).unwrap();
    plan_fixture(&dir, true);
    let log = open(&dir);
    let stats = cleaner.clean(&log, &settings(1 << 16, 1 << 20), None, &opts).unwrap().unwrap();
    assert_eq!((stats.first_uncleanable, stats.end_offset), (Offset(2), Offset(2)));
    let offsets: Vec<i64> = records(&read_all(&log)).iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [1, 2, 3, 4, 5], "offset 0 replaced by 1; 2 and 3 past the map");
    assert_eq!(
        cleaner.clean(&log, &settings(1 << 16, 1 << 20), Some(Offset(2)), &opts).unwrap(),
        None
    );
}

/// The child of [`cleaner_kill_9_during_passes_loses_and_duplicates_nothing`]: cleans the
/// log in `dir` again and again (every pass rewrites every sealed segment) until killed,
/// printing a line on stdout after each pass.
fn clean_forever(dir: &Path) -> ! {
    use std::io::Write;
    let log = open(dir);
    let s = settings(1 << 16, 1 << 20);
    let mut cleaner = Cleaner::new(1 << 16);
    let opts = CleanOptions { now: NOW, ..CleanOptions::default() };
    loop {
        cleaner.clean(&log, &s, None, &opts).unwrap();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "pass");
        let _ = out.flush();
    }
}

#[test]
fn cleaner_kill_9_during_passes_loses_and_duplicates_nothing() {
    const CHILD: &str = "TOPICFS_CLEANER_KILL_CHILD_DIR";
    if let Some(dir) = std::env::var_os(CHILD) {
        clean_forever(Path::new(&dir));
    }
    let tmp = tempfile::tempdir().unwrap();
    let pristine = tmp.path().join("pristine");
    std::fs::create_dir(&pristine).unwrap();
    generate(&pristine, 77);
    let done_dir = tmp.path().join("done");
    copy_dir(&pristine, &done_dir);
    let done = open(&done_dir);
    let before = records(&read_all(&done));
    let s = settings(1 << 16, 1 << 20);
    let opts = CleanOptions { now: NOW, ..CleanOptions::default() };
    Cleaner::new(1 << 16).clean(&done, &s, None, &opts).unwrap().unwrap();
    let cleaned = records(&read_all(&done));
    let dir = tmp.path().join("t-0");
    copy_dir(&pristine, &dir);
    let mut rng = Rng(77);
    let (mut saw_before, mut saw_cleaned) = (0, 0);
    for round in 0..12 {
        // Killed on drop too, so that a failing test leaves no child behind.
        struct Child(std::process::Child);
        impl Drop for Child {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let mut child = Child(
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "tests::cleaner_kill_9_during_passes_loses_and_duplicates_nothing",
                ])
                .args(["--nocapture", "--test-threads", "1"])
                .env(CHILD, &dir)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        if round % 3 == 2 {
            // Every third round is killed right after a whole pass (its line read): whatever
            // the machine's speed, some rounds see a finished pass, the others a random point.
            // (The test harness prints its own lines first.)
            let out = std::io::BufReader::new(child.0.stdout.take().unwrap());
            let mut lines = std::io::BufRead::lines(out);
            let passed = lines.any(|line| line.is_ok_and(|l| l == "pass"));
            assert!(passed, "round {round}: the child ended before a whole pass");
        } else {
            std::thread::sleep(std::time::Duration::from_millis(20 + rng.below(300)));
        }
        // SIGKILL: no unwinding, no flush, files exactly as the kernel has them.
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        let log = open(&dir);
        assert_eq!(leftovers(&dir), Vec::<String>::new(), "round {round}: recovery");
        let after = records(&read_all(&log));
        if after == before {
            saw_before += 1;
        } else {
            assert_eq!(after, cleaned, "round {round}: every record once, as before or as cleaned");
            saw_cleaned += 1;
        }
        check_indexes(&dir);
    }
    assert!(saw_cleaned > 0, "a pass completed in some round ({saw_before} saw the old log)");
}

#[test]
fn cleaner_copies_legacy_messages_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    std::fs::create_dir(&dir).unwrap();
    let legacy =
        topicfs_format::legacy::encode_message(Offset(0), 1, 0, T0, Some(b"k0"), Some(b"old"));
    let keyless = topicfs_format::legacy::encode_message(Offset(1), 1, 0, T0, None, Some(b"x"));
    let v2 = |base: i64, key: &str| {
        let r = NewRecord {
            timestamp: T0 + base,
            key: Some(key.as_bytes().to_vec()),
            value: Some(b"new".to_vec()),
            headers: vec![],
        };
        encode_batch(&BatchSpec { base_offset: Offset(base), ..BatchSpec::default() }, &[r])
            .unwrap()
    };
    let seg0 = [legacy.clone(), keyless.clone(), v2(2, "k0"), v2(3, "k0")].concat();
    std::fs::write(dir.join("00000000000000000000.log"), seg0).unwrap();
    std::fs::write(dir.join("00000000000000000004.log"), v2(4, "k1")).unwrap();
    let log = open(&dir);
    let opts = CleanOptions { now: NOW, ..CleanOptions::default() };
    let stats = Cleaner::new(1 << 16).clean(&log, &settings(1 << 16, 1 << 20), None, &opts);
    assert_eq!(stats.unwrap().unwrap().legacy_copied, 2);
    let bytes = topicfs_storage::open::read_regular(&dir.join("00000000000000000000.log")).unwrap();
    assert!(bytes.starts_with(&[legacy, keyless].concat()), "legacy entries copied byte for byte");
    let offsets: Vec<i64> = records(&read_all(&log)).iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [0, 1, 3, 4], "the v2 record of k0 at 2 replaced by 3; legacy kept");
}
