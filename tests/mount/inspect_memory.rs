//! Inspection files of a large segment through a read-only mount: the daemon's memory does not
//! grow with the segment or its dump (a `.log` dump is rendered batch by batch as it is read,
//! from a checkpoint index), and the text read is the whole dump, byte for byte where it is
//! spot-checked, with `st_size` exactly what `cat` reads once the dump was opened.

use crate::common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::time::{SystemTime, UNIX_EPOCH};

use common::{Dirs, MountGuard, sh};
use topicfs::format::NewRecord;
use topicfs::storage::{LogConfig, LogDirs, SegmentMode};

/// Records per batch (one append each).
const PER_BATCH: i64 = 1000;
/// Batches in the one segment: 1.5 million records of 9-byte values, a `.log` of about 27 MB
/// whose dump is about 170 MB.
const BATCHES: i64 = 1500;

/// The value of the record at `offset`.
fn value(offset: i64) -> String {
    format!("v{offset:08}")
}

/// The `--print-data-log` line of the record at `offset` (written by [`write_segment`]).
fn record_line(offset: i64, base_time: i64) -> String {
    format!(
        "| offset: {offset} CreateTime: {} keySize: -1 valueSize: 9 sequence: -1 headerKeys: [] \
         payload: {}",
        base_time + offset,
        value(offset)
    )
}

/// One partition `big-0` holding a single segment of `BATCHES` x `PER_BATCH` records.
fn write_segment(dirs: &Dirs, base_time: i64) {
    let mut config = LogConfig::default();
    config.set("retention.ms", "-1").unwrap();
    let log_dir =
        LogDirs::open_dir(&dirs.data(), config, Default::default(), SegmentMode::Writable).unwrap();
    log_dir.create_topic("big", 1).unwrap();
    let log = log_dir.log("big", 0).unwrap();
    for b in 0..BATCHES {
        let records: Vec<NewRecord> = (b * PER_BATCH..(b + 1) * PER_BATCH)
            .map(|o| NewRecord {
                timestamp: base_time + o,
                key: None,
                value: Some(value(o).into_bytes()),
                headers: vec![],
            })
            .collect();
        log.append(&records).unwrap();
    }
    log_dir.shutdown().unwrap();
}

/// The peak resident set of process `pid` in bytes (`VmHWM`).
fn peak_rss(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn a_large_log_dump_reads_whole_while_the_daemon_stays_small() {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    let base_time = now - 3_600_000;
    let dirs = Dirs::new();
    write_segment(&dirs, base_time);
    let log_size = fs::metadata(dirs.data().join("big-0/00000000000000000000.log")).unwrap().len();
    let mount = MountGuard::foreground_on(dirs, &["--read-only"]);
    let dump = mount.path("big/0/segments/00000000000000000000.log.dump");
    let quoted = format!("'{}'", dump.display());

    // Larger than a stat renders: its size is unknown until it is first opened.
    assert_eq!(fs::metadata(&dump).unwrap().size(), 0);
    let read: u64 = sh(&format!("cat {quoted} | wc -c")).trim().parse().unwrap();
    let size = fs::metadata(&dump).unwrap().size();
    assert_eq!(size, read, "st_size after the first open is exactly what cat read");
    assert!(read > 150 << 20, "the dump ({read} bytes of a {log_size}-byte .log) is large");

    let records = BATCHES * PER_BATCH;
    let head = sh(&format!("head -n 3 {quoted}"));
    let head: Vec<&str> = head.lines().collect();
    assert_eq!(head[..2], ["Dumping big-0/00000000000000000000.log", "Log starting offset: 0"]);
    let first_batch = format!("baseOffset: 0 lastOffset: {} count: {PER_BATCH} ", PER_BATCH - 1);
    assert!(head[2].starts_with(&first_batch), "{}", head[2]);
    assert!(
        head[2].contains(" position: 0 ") && head[2].ends_with(" isvalid: true"),
        "{}",
        head[2]
    );
    // Record `o` of batch `b` is on line 3 + b * (PER_BATCH + 1) + 1 + o % PER_BATCH.
    for offset in [1, records / 2 + 7] {
        let line = 3 + (offset / PER_BATCH) * (PER_BATCH + 1) + 1 + offset % PER_BATCH;
        let printed = sh(&format!("sed -n '{line}{{p;q}}' {quoted}"));
        assert_eq!(printed.trim_end(), record_line(offset, base_time), "line {line}");
    }
    let last = sh(&format!("tail -n 1 {quoted}"));
    assert_eq!(last.trim_end(), record_line(records - 1, base_time));

    let peak = peak_rss(mount.pid);
    assert!(
        peak < 100 << 20,
        "daemon peak RSS {peak} bytes after reading a {read}-byte dump of a {log_size}-byte .log"
    );
}
