//! A read-only mount following a live writer, as it follows a running broker.
//!
//! The writer is the storage engine in read-write mode on the same data dir (it holds `.lock`,
//! preallocates the active segment's index files with a zero tail, rolls segments and deletes
//! old ones by retention, renaming them `.deleted` first). While it works, `tail -f` follows
//! `by-offset/0` through a `topicfs mount --read-only` of that dir: every record must appear,
//! in order, exactly once; new segments appear under `segments/`, deleted ones disappear, and
//! reads of what remains keep working.

use crate::common;

use std::fs;

use common::{Dirs, Follower, MountGuard, sh, wait_until};
use topicfs::format::{NO_TIMESTAMP, NewRecord};
use topicfs::storage::LogConfig;

const BATCHES_PER_PHASE: usize = 20;
const RECORDS_PER_BATCH: usize = 10;
const BATCHES_PER_SEGMENT: usize = 4;

fn value(i: usize) -> String {
    format!("live-{i:05}")
}

/// Appends `BATCHES_PER_PHASE` batches starting with record `first`, rolling every few batches.
fn write_phase(log: &topicfs::storage::Log, first: usize) -> usize {
    let mut next = first;
    for b in 0..BATCHES_PER_PHASE {
        let records: Vec<NewRecord> = (next..next + RECORDS_PER_BATCH)
            .map(|i| NewRecord {
                timestamp: NO_TIMESTAMP,
                key: Some(format!("k{}", i % 7).into_bytes()),
                value: Some(value(i).into_bytes()),
                headers: vec![],
            })
            .collect();
        log.append(&records).unwrap();
        next += RECORDS_PER_BATCH;
        if b % BATCHES_PER_SEGMENT == BATCHES_PER_SEGMENT - 1 {
            log.force_roll().unwrap();
        }
        // Let the reader's refresh see some appends one at a time and some together.
        if b % 3 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    next
}

fn segment_logs(mount: &MountGuard) -> Vec<String> {
    let names = sh(&format!("ls {}", mount.path("live/0/segments").display()));
    names.lines().filter(|n| n.ends_with(".log")).map(str::to_string).collect()
}

#[test]
fn tail_f_on_a_read_only_mount_sees_every_record_of_a_live_writer_once_in_order() {
    let dirs = Dirs::new();
    let config = LogConfig { retention_bytes: Some(1), ..LogConfig::default() };
    let writer = crate::common::writable_log_dirs(&dirs.data(), config);
    writer.create_topic("live", 1).unwrap();
    let log = writer.log("live", 0).unwrap();
    let mount = MountGuard::foreground_on(dirs, &["--read-only"]);
    let stream = mount.path("live/0/by-offset/0");
    let mut tail =
        Follower::start("tail", &["-f", "-n", "+1", "-s", "0.1", stream.to_str().unwrap()]);

    let written = write_phase(&log, 0);
    tail.wait_for(&format!("{}\n", value(written - 1)));
    // segments/ is refreshed on its own clock (at most every 200 ms), so the listing may lag
    // the stream that already showed the last record: wait for it rather than sample once.
    wait_until("the rolled segments to appear under segments/", || {
        segment_logs(&mount).len() > BATCHES_PER_PHASE / BATCHES_PER_SEGMENT
    });

    // Retention deletes every segment but the active one, under the reader's feet.
    let deleted = log.delete_old_segments(i64::MAX / 2).unwrap();
    assert!(deleted > 0);
    wait_until("deleted segments to disappear from segments/", || segment_logs(&mount).len() == 1);
    let written = write_phase(&log, written);
    let last = format!("{}\n", value(written - 1));
    let seen = tail.wait_for(&last);
    let expected: String = (0..written).map(|i| value(i) + "\n").collect();
    assert_eq!(seen, expected, "tail -f output differs from what was written");
    wait_until("new segments to appear under segments/", || {
        segment_logs(&mount).len() > BATCHES_PER_PHASE / BATCHES_PER_SEGMENT
    });
    // A new reader of what remains after retention reads it whole.
    let recent = fs::read_to_string(mount.path("live/0/by-offset/-5")).unwrap();
    let want: String = (written - 5..written).map(|i| value(i) + "\n").collect();
    assert_eq!(recent, want);
    // The writer still owns the dir: the read-only mount never took its lock.
    drop(log);
    writer.shutdown().unwrap();
}
