//! A read-only open of a data dir while a broker (the engine in writable mode, on the same dir)
//! creates and deletes topics: the topic and partition lists follow it, in the engine and
//! through a read-only mount.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Dirs, MountGuard, sh};

use topicfs::Error;
use topicfs::format::{NewRecord, Offset};
use topicfs::source::TopicSource;
use topicfs::storage::{LogConfig, LogDirs, SegmentMode};

fn record(value: &str) -> NewRecord {
    NewRecord {
        timestamp: 1000,
        key: None,
        value: Some(value.as_bytes().to_vec()),
        headers: vec![],
    }
}

/// Polls `condition` until it holds; panics after 30 s (a deadline, not a timing assertion).
fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn rename_to_delete(data: &Path, dir: &str) {
    std::fs::rename(
        data.join(dir),
        data.join(format!("{dir}.0123456789abcdef0123456789abcdef-delete")),
    )
    .unwrap();
}

#[test]
fn topics_and_partitions_a_broker_creates_after_the_open_appear_and_deleted_ones_disappear() {
    let tmp = tempfile::tempdir().unwrap();
    let broker = LogDirs::open_dir(
        tmp.path(),
        LogConfig::default(),
        Default::default(),
        SegmentMode::Writable,
    )
    .unwrap();
    broker.create_topic("old", 1).unwrap();
    let reader = LogDirs::open_dir(
        tmp.path(),
        LogConfig::default(),
        Default::default(),
        SegmentMode::ReadOnly,
    )
    .unwrap();
    assert_eq!(reader.topics().unwrap(), ["old"]);
    assert!(matches!(reader.partitions("new"), Err(Error::NotFound(_))));

    broker.create_topic("new", 2).unwrap();
    broker.log("new", 1).unwrap().append(&[record("a"), record("b")]).unwrap();
    wait_until("the new topic is listed", || reader.topics().unwrap() == ["new", "old"]);
    assert_eq!(reader.partitions("new").unwrap(), [0, 1]);
    let log = reader.partition("new", 1).unwrap();
    assert_eq!(log.summary().unwrap().log_end_offset, Offset(2));

    broker.create_partition("new", 2).unwrap();
    wait_until("the new partition is listed", || reader.partitions("new").unwrap() == [0, 1, 2]);

    broker.shutdown().unwrap();
    drop(broker);
    // The broker deletes a topic by renaming its partition dirs `-delete`.
    for p in 0..3 {
        rename_to_delete(tmp.path(), &format!("new-{p}"));
    }
    wait_until("the deleted topic is gone", || reader.topics().unwrap() == ["old"]);
    assert!(matches!(reader.partitions("new"), Err(Error::NotFound(_))));
    assert!(matches!(reader.partition("new", 1), Err(Error::NotFound(_))));
    assert_eq!(
        log.summary().unwrap().log_end_offset,
        Offset(2),
        "a reader holding the deleted partition keeps what it opened"
    );
}

#[test]
fn a_read_only_mount_shows_a_topic_the_broker_creates_after_the_mount() {
    let dirs = Dirs::new();
    let broker = LogDirs::open_dir(
        &dirs.data(),
        LogConfig::default(),
        Default::default(),
        SegmentMode::Writable,
    )
    .unwrap();
    broker.create_topic("old", 1).unwrap();
    let mount = MountGuard::foreground_on(dirs, &["--read-only"]);
    assert_eq!(sh(&format!("ls {}", mount.mnt().display())), "old\n");

    broker.create_topic("late", 1).unwrap();
    broker.log("late", 0).unwrap().append(&[record("first"), record("second")]).unwrap();
    let root = mount.mnt();
    wait_until("the new topic is listed", || {
        sh(&format!("ls {}", root.display())) == "late\nold\n"
    });
    let stream = mount.path("late/0/by-offset/0");
    wait_until("the new topic's records are readable", || {
        std::fs::read_to_string(&stream).is_ok_and(|s| s == "first\nsecond\n")
    });
    broker.shutdown().unwrap();
}
