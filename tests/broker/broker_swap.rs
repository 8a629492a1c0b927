//! A read-only open of a broker's log dir while the log cleaner is mid-swap: the cleaner's
//! `.cleaned`, `.swap` and `.deleted` files are read as Kafka's loader would finish them, in
//! memory, without changing anything on disk. The "broker" here is the engine in writable mode;
//! the cleaner's files are written as Kafka's cleaner names them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use topicfs::format::Offset;
use topicfs::source::SegmentFileKind;
use topicfs::storage::{Log, LogDirs, SegmentMode};

use crate::common::log_fixture::{kept_batches, read_records, record, small_config};

/// Every record readable from the log start offset, as (offset, value).
fn read_all(log: &Log) -> Vec<(i64, String)> {
    read_records(log, log.log_start_offset(), 4096)
        .into_iter()
        .map(|(o, _, v)| (o, String::from_utf8(v).unwrap()))
        .collect()
}

/// Names, bytes and mtimes of every file under `dir`.
fn hash_tree(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u128)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            let mtime =
                meta.modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            if meta.is_dir() {
                out.insert(e.path(), (Vec::new(), mtime));
                stack.push(e.path());
            } else {
                out.insert(e.path(), (std::fs::read(e.path()).unwrap(), mtime));
            }
        }
    }
    out
}

fn name(base: Offset, suffix: &str) -> String {
    format!("{:020}{suffix}", base.0)
}

/// A partition `t-0` of 60 one-record batches (`v0`..`v59`) over several segments, closed
/// cleanly by the engine. Returns the segments' base offsets.
fn broker_partition(data: &Path) -> Vec<Offset> {
    let d =
        LogDirs::open_dir(data, small_config(), Default::default(), SegmentMode::Writable).unwrap();
    d.create_topic("t", 1).unwrap();
    let log = d.log("t", 0).unwrap();
    for i in 0..60 {
        log.append(&[record(1000 + i, &format!("v{i}{}", "x".repeat(100)))]).unwrap();
    }
    let bases = log.segment_list().iter().map(|s| s.base_offset()).collect();
    d.shutdown().unwrap();
    bases
}

/// Writes what Kafka's cleaner leaves once it has compacted the segments `first` and `second`
/// into one (keeping the records whose offset `keep` accepts) and renamed its output `.swap`:
/// `<first>.log.swap`, `.index.swap`, `.timeindex.swap`. The indexes are built by the engine
/// (a recovery in a scratch dir), as the cleaner builds them while writing. Returns the swap's
/// `.log` bytes.
fn write_swap(part: &Path, first: Offset, second: Offset, keep: impl Fn(i64) -> bool) -> Vec<u8> {
    let mut log = kept_batches(&part.join(name(first, ".log")), &keep);
    log.extend(kept_batches(&part.join(name(second, ".log")), &keep));
    let scratch = tempfile::tempdir().unwrap();
    let scratch_part = scratch.path().join("t-0");
    std::fs::create_dir(&scratch_part).unwrap();
    std::fs::write(scratch_part.join(name(first, ".log")), &log).unwrap();
    // No clean-shutdown marker: the engine recovers the segment and writes both indexes.
    let d = LogDirs::open_dir(
        scratch.path(),
        small_config(),
        Default::default(),
        SegmentMode::Writable,
    )
    .unwrap();
    assert_eq!(d.log("t", 0).unwrap().segment_list().len(), 1);
    d.shutdown().unwrap();
    for suffix in [".log", ".index", ".timeindex"] {
        std::fs::copy(
            scratch_part.join(name(first, suffix)),
            part.join(name(first, &format!("{suffix}.swap"))),
        )
        .unwrap();
    }
    log
}

fn compacted(i: i64) -> bool {
    i % 3 != 0
}

/// The records a reader must see once segments `[0, third)` are replaced by their compaction.
fn expected_after_compaction(third: Offset) -> Vec<(i64, String)> {
    (0..60)
        .filter(|&i| i >= third.0 || compacted(i))
        .map(|i| (i, format!("v{i}{}", "x".repeat(100))))
        .collect()
}

#[test]
fn a_finished_compaction_not_yet_renamed_is_served_once_from_its_swap_files() {
    let tmp = tempfile::tempdir().unwrap();
    let bases = broker_partition(tmp.path());
    assert!(bases.len() >= 4, "{bases:?}");
    let part = tmp.path().join("t-0");
    let swap_log = write_swap(&part, bases[0], bases[1], compacted);
    let before = hash_tree(tmp.path());

    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::ReadOnly)
            .unwrap();
    let log = d.log("t", 0).unwrap();
    assert_eq!(read_all(&log), expected_after_compaction(bases[2]));
    let shown: Vec<Offset> = log.segment_list().iter().map(|s| s.base_offset()).collect();
    let mut want = vec![bases[0]];
    want.extend_from_slice(&bases[2..]);
    assert_eq!(shown, want, "the swap stands in for both originals");
    assert_eq!(log.recovered_segments(), 0, "the swap's own indexes are used");
    let mut buf = vec![0; swap_log.len() + 10];
    let n = log.read_segment_file(bases[0], SegmentFileKind::Log, 0, &mut buf).unwrap();
    assert_eq!(&buf[..n], &swap_log[..], "segments/ shows the swap's bytes");
    assert_eq!(log.log_end_offset(), Offset(60));
    drop(log);
    drop(d);
    assert_eq!(hash_tree(tmp.path()), before, "nothing renamed, deleted or written");
}

#[test]
fn cleaned_files_and_swaps_of_an_unfinished_split_are_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let bases = broker_partition(tmp.path());
    let part = tmp.path().join("t-0");
    write_swap(&part, bases[0], bases[1], compacted);
    // An unfinished compaction of a later group (`.cleaned`), and a split's `.swap` at or above
    // it (KAFKA-6264): Kafka's loader deletes both. Their contents would drop records.
    let later = &bases[2];
    let cleaned = kept_batches(&part.join(name(*later, ".log")), |_| false);
    std::fs::write(part.join(name(*later, ".log.cleaned")), &cleaned).unwrap();
    let split = kept_batches(&part.join(name(bases[3], ".log")), |i| i % 2 == 0);
    std::fs::write(part.join(name(bases[3], ".log.swap")), &split).unwrap();
    let before = hash_tree(tmp.path());

    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::ReadOnly)
            .unwrap();
    let log = d.log("t", 0).unwrap();
    assert_eq!(read_all(&log), expected_after_compaction(bases[2]));
    assert!(log.segment_list().iter().any(|s| s.base_offset() == bases[3]));
    drop(log);
    drop(d);
    assert_eq!(hash_tree(tmp.path()), before);
}

#[test]
fn every_step_of_a_live_swap_shows_each_record_once() {
    let tmp = tempfile::tempdir().unwrap();
    let bases = broker_partition(tmp.path());
    let part = tmp.path().join("t-0");
    let all: Vec<(i64, String)> =
        (0..60).map(|i| (i, format!("v{i}{}", "x".repeat(100)))).collect();
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::ReadOnly)
            .unwrap();
    let log = d.log("t", 0).unwrap();
    assert_eq!(read_all(&log), all);

    // The cleaner's output is complete but still `.cleaned`: not part of the log yet.
    let compacted_log = write_swap(&part, bases[0], bases[1], compacted);
    for suffix in [".log", ".index", ".timeindex"] {
        let swap = part.join(name(bases[0], &format!("{suffix}.swap")));
        std::fs::rename(&swap, part.join(name(bases[0], &format!("{suffix}.cleaned")))).unwrap();
    }
    log.refresh().unwrap();
    assert_eq!(read_all(&log), all);

    // `.cleaned` renamed `.swap`: the compacted data replaces the originals.
    for suffix in [".log", ".index", ".timeindex"] {
        let cleaned = part.join(name(bases[0], &format!("{suffix}.cleaned")));
        std::fs::rename(&cleaned, part.join(name(bases[0], &format!("{suffix}.swap")))).unwrap();
    }
    assert!(log.refresh().unwrap());
    let expected = expected_after_compaction(bases[2]);
    assert_eq!(read_all(&log), expected);

    // The originals renamed `.deleted`, then removed.
    for base in &bases[..2] {
        for suffix in [".log", ".index", ".timeindex"] {
            let f = part.join(name(*base, suffix));
            std::fs::rename(&f, part.join(name(*base, &format!("{suffix}.deleted")))).unwrap();
        }
    }
    log.refresh().unwrap();
    assert_eq!(read_all(&log), expected);

    // `.swap` dropped: the compacted segment under its final names.
    for suffix in [".log", ".index", ".timeindex"] {
        let swap = part.join(name(bases[0], &format!("{suffix}.swap")));
        std::fs::rename(&swap, part.join(name(bases[0], suffix))).unwrap();
    }
    assert!(log.refresh().unwrap(), "the renamed swap is reopened under its final names");
    assert!(log.segment_list().iter().all(|s| !s.is_swap()));
    assert_eq!(read_all(&log), expected);
    for e in std::fs::read_dir(&part).unwrap() {
        let f = e.unwrap().path();
        if f.extension().is_some_and(|x| x == "deleted") {
            std::fs::remove_file(f).unwrap();
        }
    }
    log.refresh().unwrap();
    assert_eq!(read_all(&log), expected);
    let mut buf = vec![0; compacted_log.len() + 10];
    let n = log.read_segment_file(bases[0], SegmentFileKind::Log, 0, &mut buf).unwrap();
    assert_eq!(&buf[..n], &compacted_log[..]);
}
