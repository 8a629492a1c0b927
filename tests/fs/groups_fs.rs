//! Consumer groups in the filesystem logic, without a kernel: the `groups/` tree over the
//! narrow `GroupStore` interface (a second, in-memory backend shows the tree needs nothing
//! else), `next` pinned while open, and concurrent commits staying whole.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::sync::{Arc, Mutex};

use crate::common::fs_fixture::{self, FsFixture};
use topicfs::Error;
use topicfs::format::{NewRecord, Offset};
use topicfs::fs::TopicFs;
use topicfs::fs::attr::OpenRequest;
use topicfs::source::{CommittedOffset, GroupStore};
use topicfs::storage::groups::LocalGroupStore;
use topicfs::storage::{LogConfig, LogDirs};
use topicfs::view::groups::ResetPolicy;

const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };
const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: true };

/// A `GroupStore` in memory: what a cluster backend will provide over the Kafka protocol.
#[derive(Default)]
struct MemoryGroups {
    commits: Mutex<BTreeMap<(String, String, u32), Offset>>,
}

impl GroupStore for MemoryGroups {
    fn groups(&self, topic: &str) -> topicfs::Result<Vec<String>> {
        let commits = self.commits.lock().unwrap();
        let mut groups: Vec<String> =
            commits.keys().filter(|k| k.1 == topic).map(|k| k.0.clone()).collect();
        groups.dedup();
        Ok(groups)
    }

    fn committed(
        &self,
        group: &str,
        topic: &str,
    ) -> topicfs::Result<BTreeMap<u32, CommittedOffset>> {
        let commits = self.commits.lock().unwrap();
        Ok(commits
            .iter()
            .filter(|(k, _)| k.0 == group && k.1 == topic)
            .map(|(k, o)| {
                (k.2, CommittedOffset { offset: *o, metadata: String::new(), commit_timestamp: 0 })
            })
            .collect())
    }

    fn commit(&self, group: &str, topic: &str, offsets: &[(u32, Offset)]) -> topicfs::Result<()> {
        let mut commits = self.commits.lock().unwrap();
        for (p, o) in offsets {
            commits.insert((group.to_string(), topic.to_string(), *p), *o);
        }
        Ok(())
    }
}

struct Fixture {
    fs: TopicFs,
    log_dir: Arc<LogDirs>,
    _dir: tempfile::TempDir,
}

fn fixture(store: Option<Arc<dyn GroupStore>>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = crate::common::writable_log_dirs(dir.path(), LogConfig::default());
    log_dir.create_topic("t", 2).unwrap();
    for p in 0..2 {
        let records: Vec<NewRecord> = (0..4)
            .map(|i| NewRecord {
                value: Some(format!("{p}-{i}").into_bytes()),
                ..NewRecord::default()
            })
            .collect();
        log_dir.log("t", p).unwrap().append(&records).unwrap();
    }
    let store = store.unwrap_or_else(|| Arc::new(LocalGroupStore::new(Arc::clone(&log_dir))));
    let fs = FsFixture::local(&log_dir).build().with_groups(store, ResetPolicy::Earliest);
    Fixture { fs, log_dir, _dir: dir }
}

impl Fixture {
    fn ino(&self, path: &str) -> Result<u64, Error> {
        fs_fixture::ino(&self.fs, path)
    }

    fn read(&self, path: &str) -> String {
        let fh = self.fs.open(self.ino(path).unwrap(), READ).unwrap().fh;
        let data = self.fs.read(fh, 0, 1 << 20).unwrap().to_vec();
        self.fs.release(fh).unwrap();
        String::from_utf8(data).unwrap()
    }

    fn write(&self, path: &str, data: &str) -> Result<(), Error> {
        let fh = self.fs.open(self.ino(path)?, WRITE)?.fh;
        let written = self.fs.write(fh, data.as_bytes(), None);
        self.fs.flush(fh, None)?;
        self.fs.release(fh)?;
        written.map(drop)
    }

    fn mkdir(&self, parent: &str, name: &str) -> Result<(), Error> {
        self.fs.mkdir(self.ino(parent)?, OsStr::new(name)).map(drop)
    }
}

#[test]
fn the_groups_tree_works_over_any_group_store() {
    let memory = Arc::new(MemoryGroups::default());
    let f = fixture(Some(memory.clone()));
    f.mkdir("t/groups", "g").unwrap();
    assert_eq!(f.read("t/groups/g/offsets"), "0 - 4 -\n1 - 4 -\n");
    f.write("t/groups/g/offsets", "0 1\n1 4\n").unwrap();
    assert_eq!(memory.committed("g", "t").unwrap()[&0].offset, Offset(1));
    assert_eq!(f.read("t/groups/g/offsets"), "0 1 4 3\n1 4 4 0\n");
    assert_eq!(f.read("t/groups/g/0/next"), "0-1\n0-2\n0-3\n");
    let err = f.write("t/groups/g/offsets", "0 2\n1 5\n").unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL);
    assert_eq!(memory.committed("g", "t").unwrap()[&0].offset, Offset(1), "nothing of it");
    // No local __consumer_offsets was involved.
    assert!(f.log_dir.partition_numbers("__consumer_offsets").is_err());
}

#[test]
fn an_open_next_keeps_its_records_while_commits_and_appends_happen() {
    let f = fixture(None);
    f.mkdir("t/groups", "g").unwrap();
    let ino = f.ino("t/groups/g/0/next").unwrap();
    let fh = f.fs.open(ino, READ).unwrap().fh;
    f.write("t/groups/g/offsets", "0 3\n").unwrap();
    let records = vec![NewRecord { value: Some(b"0-4".to_vec()), ..NewRecord::default() }];
    f.log_dir.log("t", 0).unwrap().append(&records).unwrap();
    assert_eq!(f.fs.getattr(ino, Some(fh)).unwrap().attr.size, 16);
    assert_eq!(f.fs.read(fh, 0, 100).unwrap().to_vec(), b"0-0\n0-1\n0-2\n0-3\n");
    f.fs.release(fh).unwrap();
    // Reopened: from the commit to the new end.
    assert_eq!(f.read("t/groups/g/0/next"), "0-3\n0-4\n");
}

#[test]
fn concurrent_commits_each_land_whole() {
    let f = Arc::new(fixture(None));
    f.mkdir("t/groups", "g").unwrap();
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let f = Arc::clone(&f);
            std::thread::spawn(move || {
                for round in 0..10 {
                    let o = (i + round) % 5;
                    f.write("t/groups/g/offsets", &format!("0 {o}\n1 {o}\n")).unwrap();
                    // Both partitions always come from the same write.
                    let text = f.read("t/groups/g/offsets");
                    let committed: Vec<&str> =
                        text.lines().map(|l| l.split(' ').nth(1).unwrap()).collect();
                    assert_eq!(committed[0], committed[1], "{text}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
