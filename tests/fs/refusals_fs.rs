//! Refused changes of the tree, without a kernel (issue 31): Kafka's internal topics are never
//! made, grown or appended to through the mount (a group's commit still writes
//! `__consumer_offsets` its own way), a topic name colliding with an existing one once `.` and
//! `_` are alike is refused naming it, and partition counts past the mount's maximum or
//! Kafka's are refused before anything is created.

use std::ffi::OsStr;
use std::sync::Arc;

use crate::common::fs_fixture::{self, FsFixture};
use topicfs::Error;
use topicfs::fs::TopicFs;
use topicfs::fs::attr::OpenRequest;
use topicfs::storage::groups::LocalGroupStore;
use topicfs::storage::{LogConfig, LogDirs};
use topicfs::view::groups::ResetPolicy;

const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: true };
const APPEND: OpenRequest = OpenRequest { read: false, write: true, truncate: false };

struct Fixture {
    fs: TopicFs,
    log_dir: Arc<LogDirs>,
    dir: tempfile::TempDir,
}

fn fixture(partitions_per_topic: u32, max_partitions: u32) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = crate::common::writable_log_dirs(dir.path(), LogConfig::default());
    let store = Arc::new(LocalGroupStore::new(Arc::clone(&log_dir)));
    let fs = FsFixture::local(&log_dir)
        .partitions_per_topic(partitions_per_topic)
        .build()
        .with_groups(store, ResetPolicy::Earliest)
        .with_max_partitions(max_partitions);
    Fixture { fs, log_dir, dir }
}

impl Fixture {
    fn mkdir(&self, parent: &str, name: &str) -> Result<(), Error> {
        let parent = fs_fixture::ino(&self.fs, parent)?;
        self.fs.mkdir(parent, OsStr::new(name)).map(drop)
    }

    fn write(&self, path: &str, request: OpenRequest, data: &str) -> Result<(), Error> {
        let fh = self.fs.open(fs_fixture::ino(&self.fs, path)?, request)?.fh;
        let written = self.fs.write(fh, data.as_bytes(), None);
        self.fs.flush(fh, None)?;
        self.fs.release(fh)?;
        written.map(drop)
    }

    /// The names in the data dir but the files a writable open keeps at its root.
    fn partition_dirs(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| std::fs::metadata(self.dir.path().join(n)).unwrap().is_dir())
            .collect();
        names.sort();
        names
    }
}

#[test]
fn mkdir_of_an_internal_topic_or_of_its_partition_is_refused_with_eperm() {
    let f = fixture(1, 10_000);
    for topic in ["__consumer_offsets", "__transaction_state", "__cluster_metadata"] {
        let err = f.mkdir("/", topic).unwrap_err();
        assert_eq!(err.errno(), libc::EPERM, "{topic}: {err}");
        assert!(err.to_string().contains("internal topic"), "{err}");
    }
    assert!(f.partition_dirs().is_empty(), "nothing created: {:?}", f.partition_dirs());
    // Once a commit made __consumer_offsets (50 partitions), no partition can be added to it.
    f.mkdir("/", "t").unwrap();
    f.mkdir("t/groups", "g").unwrap();
    f.write("t/groups/g/offsets", WRITE, "0 0\n").unwrap();
    assert_eq!(f.log_dir.partition_numbers("__consumer_offsets").unwrap().len(), 50);
    let err = f.mkdir("__consumer_offsets", "50").unwrap_err();
    assert_eq!(err.errno(), libc::EPERM, "{err}");
    assert_eq!(f.log_dir.partition_numbers("__consumer_offsets").unwrap().len(), 50);
}

#[test]
fn append_to_an_internal_topic_is_refused_and_group_commits_still_write_consumer_offsets() {
    let f = fixture(1, 10_000);
    f.mkdir("/", "t").unwrap();
    f.mkdir("t/groups", "g").unwrap();
    // A commit creates __consumer_offsets through the group store, as a coordinator does.
    f.write("t/groups/g/offsets", WRITE, "0 0\n").unwrap();
    let partitions = f.log_dir.partition_numbers("__consumer_offsets").unwrap();
    let end = |p: u32| f.log_dir.log("__consumer_offsets", p).unwrap().log_end_offset();
    let ends: Vec<_> = partitions.iter().map(|&p| end(p)).collect();
    assert_eq!(ends.iter().map(|o| o.0).sum::<i64>(), 1, "one commit record");
    for path in [
        "__consumer_offsets/append",
        "__consumer_offsets/append.json",
        "__consumer_offsets/0/append",
        "__consumer_offsets/0/append.json",
    ] {
        let data = if path.ends_with(".json") { "{\"payload\":\"x\"}\n" } else { "x\n" };
        let err = f.write(path, APPEND, data).unwrap_err();
        assert_eq!(err.errno(), libc::EPERM, "{path}: {err}");
    }
    let after: Vec<_> = partitions.iter().map(|&p| end(p)).collect();
    assert_eq!(after, ends, "nothing appended");
    // The group's commits keep working.
    f.write("t/groups/g/offsets", WRITE, "0 0\n").unwrap();
    let total: i64 = partitions.iter().map(|&p| end(p).0).sum();
    assert_eq!(total, 2);
}

#[test]
fn a_topic_colliding_with_an_existing_one_after_dots_become_underscores_is_refused() {
    let f = fixture(1, 10_000);
    f.mkdir("/", "a.b").unwrap();
    let err = f.mkdir("/", "a_b").unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL, "{err}");
    assert!(err.to_string().contains("\"a.b\""), "names the existing topic: {err}");
    assert_eq!(f.partition_dirs(), ["a.b-0"]);
    // And the other way round; an unrelated name is fine; the same name is EEXIST.
    f.mkdir("/", "x_y").unwrap();
    assert_eq!(f.mkdir("/", "x.y").unwrap_err().errno(), libc::EINVAL);
    assert_eq!(f.mkdir("/", "a.b").unwrap_err().errno(), libc::EEXIST);
    f.mkdir("/", "a-b").unwrap();
    assert_eq!(f.partition_dirs(), ["a-b-0", "a.b-0", "x_y-0"]);
}

#[test]
fn partition_counts_past_the_mount_maximum_are_refused_without_creating_anything() {
    // --partitions above --max-partitions: mkdir of a topic refused, nothing created.
    let f = fixture(5, 4);
    let err = f.mkdir("/", "t").unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL, "{err}");
    assert!(err.to_string().contains("--max-partitions 4"), "{err}");
    assert!(f.partition_dirs().is_empty());
    // Partitions may be added up to the maximum, not past it.
    let f = fixture(3, 4);
    f.mkdir("/", "t").unwrap();
    f.mkdir("t", "3").unwrap();
    let err = f.mkdir("t", "4").unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL, "{err}");
    assert_eq!(f.partition_dirs(), ["t-0", "t-1", "t-2", "t-3"]);
    // A partition number past Kafka's INT32 is not even parsed as one to add.
    assert_eq!(f.mkdir("t", "4294967295").unwrap_err().errno(), libc::EINVAL);
    assert_eq!(f.partition_dirs(), ["t-0", "t-1", "t-2", "t-3"]);
}
