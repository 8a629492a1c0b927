//! Filesystem logic without a kernel: `TopicFs` over a real log dir in a temp dir, driven the way
//! the kernel drives it (lookup, getattr, opendir/readdir, open/read/write/flush/release, mkdir).

use std::ffi::OsStr;
use std::sync::Arc;

use crate::common::fs_fixture::{self, FsFixture};
use topicfs::Error;
use topicfs::format::decode_batch;
use topicfs::fs::TopicFs;
use topicfs::fs::attr::{DirEntry, FileKind, OpenRequest, SetAttrRequest};
use topicfs::fs::inode::ROOT_INO;
use topicfs::source::TopicSource;
use topicfs::storage::{LogConfig, LogDirs, SegmentMode};

const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };
const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: false };

struct Fixture {
    fs: TopicFs,
    log_dir: Arc<LogDirs>,
    _dir: tempfile::TempDir,
}

fn fixture_with(config: LogConfig, read_only: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = crate::common::writable_log_dirs(dir.path(), config.clone());
    log_dir.create_topic("t", 1).unwrap();
    let fs = FsFixture::local(&log_dir)
        .read_only(read_only)
        .partitions_per_topic(2)
        .max_line_bytes(config.max_message_bytes as usize)
        .build();
    Fixture { fs, log_dir, _dir: dir }
}

fn fixture() -> Fixture {
    fixture_with(LogConfig::default(), false)
}

impl Fixture {
    /// Looks up a path from the root, one component at a time.
    fn ino(&self, path: &str) -> Result<u64, Error> {
        fs_fixture::ino(&self.fs, path)
    }

    fn read_all(&self, path: &str) -> Vec<u8> {
        fs_fixture::read_path(&self.fs, path, 7)
    }

    fn size(&self, path: &str) -> u64 {
        self.fs.getattr(self.ino(path).unwrap(), None).unwrap().attr.size
    }

    fn append(&self, path: &str, writes: &[&[u8]]) -> Result<(), Error> {
        let fh = self.fs.open(self.ino(path)?, WRITE)?.fh;
        for data in writes {
            self.fs.write(fh, data, None)?;
        }
        self.fs.flush(fh, None)?;
        self.fs.release(fh)
    }

    fn names(&self, path: &str) -> Vec<String> {
        fs_fixture::names(&self.fs, path)
    }

    /// Number of batches in partition t/0 (from the raw stream).
    fn batch_count(&self) -> usize {
        let raw = self.read_all("t/0/by-offset/0.raw");
        let mut rest = &raw[..];
        let mut count = 0;
        while !rest.is_empty() {
            let size = i32::from_be_bytes(rest[8..12].try_into().unwrap()) as usize + 12;
            decode_batch(&rest[..size]).unwrap();
            rest = &rest[size..];
            count += 1;
        }
        count
    }
}

/// The errno of a failed call.
fn errno<T>(result: Result<T, Error>) -> i32 {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(err) => err.errno(),
    }
}

#[test]
fn tree_lists_topics_partitions_and_partition_files() {
    let f = fixture();
    assert_eq!(f.names(""), [".", "..", "t"]);
    assert_eq!(
        f.names("t"),
        [
            ".",
            "..",
            "info",
            "config",
            "offsets",
            "by-time",
            "append",
            "append.json",
            "by-key",
            "where",
            "indexes",
            "0"
        ]
    );
    assert_eq!(
        f.names("t/0"),
        [
            ".",
            "..",
            "info",
            "by-offset",
            "by-time",
            "append",
            "append.json",
            "segments",
            "check",
            "by-key",
            "latest",
            "keys"
        ]
    );
    let attr = f.fs.getattr(f.ino("t/0/by-offset").unwrap(), None).unwrap().attr;
    assert_eq!(attr.kind, FileKind::Directory);
}

#[test]
fn stream_size_is_exactly_what_a_full_read_returns() {
    let f = fixture();
    f.append("t/0/append", &[b"alpha\nbeta\n", b"gamma\n"]).unwrap();
    for name in ["0", "0.json", "0.raw", "-1", "1..2", "1..2.json"] {
        let path = format!("t/0/by-offset/{name}");
        let bytes = f.read_all(&path);
        assert_eq!(f.size(&path), bytes.len() as u64, "{name}");
    }
    assert_eq!(f.read_all("t/0/by-offset/0"), b"alpha\nbeta\ngamma\n");
    assert_eq!(f.read_all("t/0/by-offset/1..2"), b"beta\n");
}

#[test]
fn each_write_is_one_batch_and_partial_lines_wait_for_close() {
    let f = fixture();
    let fh = f.fs.open(f.ino("t/0/append").unwrap(), WRITE).unwrap().fh;
    f.fs.write(fh, b"a\nb\nc\npart", Some(1)).unwrap();
    assert_eq!(f.read_all("t/0/by-offset/0"), b"a\nb\nc\n");
    assert_eq!(f.batch_count(), 1);
    f.fs.write(fh, b"ial", Some(1)).unwrap();
    // A close by a process that inherited the descriptor (another owner) does not end the line.
    f.fs.flush(fh, Some(2)).unwrap();
    assert_eq!(f.read_all("t/0/by-offset/0"), b"a\nb\nc\n");
    assert_eq!(f.read_all("t/0/by-offset/0"), b"a\nb\nc\n");
    f.fs.flush(fh, Some(1)).unwrap();
    assert_eq!(f.read_all("t/0/by-offset/0"), b"a\nb\nc\npartial\n");
    f.fs.release(fh).unwrap();
    assert_eq!(f.batch_count(), 2);
}

#[test]
fn record_over_max_message_bytes_fails_the_write_with_efbig_and_appends_nothing() {
    let config = LogConfig { max_message_bytes: 200, ..LogConfig::default() };
    let f = fixture_with(config, false);
    let mut data = b"small\n".to_vec();
    data.extend(vec![b'x'; 300]);
    data.push(b'\n');
    let err = f.append("t/0/append", &[&data]).unwrap_err();
    assert_eq!(err.errno(), libc::EFBIG, "{err}");
    assert_eq!(f.size("t/0/by-offset/0"), 0);
    // A partial line that can never fit is refused as soon as it is too long.
    let err = f.append("t/0/append", &[&vec![b'y'; 300]]).unwrap_err();
    assert_eq!(err.errno(), libc::EFBIG, "{err}");
}

#[test]
fn malformed_json_fails_the_write_with_einval_and_appends_nothing() {
    let f = fixture();
    let good = br#"{"key":"k","payload":"v"}"#;
    let mut data = good.to_vec();
    data.extend(b"\n{not json\n");
    let err = f.append("t/0/append.json", &[&data]).unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL, "{err}");
    assert_eq!(f.size("t/0/by-offset/0"), 0);
    f.append("t/0/append.json", &[good, b"\n"]).unwrap();
    assert_eq!(f.read_all("t/0/by-offset/0"), b"v\n");
}

#[test]
fn refusals_have_their_errno() {
    let f = fixture();
    f.append("t/0/append", &[b"a\n"]).unwrap();
    let stream = f.ino("t/0/by-offset/0").unwrap();
    assert_eq!(errno(f.fs.open(stream, WRITE)), libc::EPERM);
    assert_eq!(
        errno(f.fs.setattr(stream, &SetAttrRequest { size: Some(0), ..Default::default() })),
        libc::EPERM
    );
    let info = f.ino("t/0/info").unwrap();
    assert_eq!(errno(f.fs.open(info, WRITE)), libc::EPERM);
    let dir = f.ino("t/0/by-offset").unwrap();
    assert_eq!(f.fs.refuse_change(dir, OsStr::new("0"), "removing files").errno(), libc::EPERM);
    assert_eq!(f.fs.refuse_change(dir, OsStr::new("zz"), "removing files").errno(), libc::ENOENT);
    assert_eq!(errno(f.ino("t/0/by-offset/zz")), libc::ENOENT);
    assert_eq!(errno(f.ino("t/0/by-offset/5")), libc::ENOENT);
    assert_eq!(errno(f.ino("t/9")), libc::ENOENT);
    assert_eq!(errno(f.ino("t/00")), libc::ENOENT);
    assert_eq!(errno(f.ino("nope")), libc::ENOENT);
    assert_eq!(errno(f.fs.mkdir(dir, OsStr::new("x"))), libc::EPERM);
    // Truncating an append file (what `>` does) is accepted.
    let append = f.ino("t/0/append").unwrap();
    f.fs.setattr(append, &SetAttrRequest { size: Some(0), ..Default::default() }).unwrap();
}

#[test]
fn read_only_refuses_every_change_with_erofs() {
    let f = fixture_with(LogConfig::default(), true);
    assert_eq!(errno(f.fs.open(f.ino("t/0/append").unwrap(), WRITE)), libc::EROFS);
    assert_eq!(errno(f.fs.open(f.ino("t/0/by-offset/0").unwrap(), WRITE)), libc::EROFS);
    assert_eq!(errno(f.fs.mkdir(ROOT_INO, OsStr::new("u"))), libc::EROFS);
    let dir = f.ino("t/0").unwrap();
    assert_eq!(f.fs.refuse_change(dir, OsStr::new("info"), "renaming").errno(), libc::EROFS);
}

#[test]
fn mkdir_creates_topics_and_only_the_next_partition() {
    let f = fixture();
    let entry = f.fs.mkdir(ROOT_INO, OsStr::new("u")).unwrap();
    assert_eq!(entry.attr.kind, FileKind::Directory);
    assert_eq!(
        f.names("u"),
        [
            ".",
            "..",
            "info",
            "config",
            "offsets",
            "by-time",
            "append",
            "append.json",
            "by-key",
            "where",
            "indexes",
            "0",
            "1"
        ]
    );
    let u = f.ino("u").unwrap();
    assert!(f.fs.mkdir(u, OsStr::new("3")).is_err());
    f.fs.mkdir(u, OsStr::new("2")).unwrap();
    assert_eq!(f.log_dir.partitions("u").unwrap(), [0, 1, 2]);
    assert_eq!(f.fs.mkdir(ROOT_INO, OsStr::new("u")).unwrap_err().errno(), libc::EEXIST);
}

#[test]
fn readdir_resumes_at_the_offset_of_the_last_entry_taken() {
    let f = fixture();
    let ino = f.ino("t/0").unwrap();
    let fh = f.fs.opendir(ino).unwrap().fh;
    let mut first = Vec::new();
    f.fs.readdir(ino, fh, 0, &mut |e: &DirEntry| {
        first.push(e.clone());
        first.len() == 3 // the reply buffer is "full" after three entries
    })
    .unwrap();
    let resume = first.last().unwrap().next_offset;
    let mut rest = Vec::new();
    f.fs.readdir(ino, fh, resume, &mut |e: &DirEntry| {
        rest.push(e.name.clone());
        false
    })
    .unwrap();
    f.fs.releasedir(fh).unwrap();
    let names: Vec<_> = first.iter().map(|e| e.name.clone()).chain(rest).collect();
    assert_eq!(
        names,
        [
            ".",
            "..",
            "info",
            "by-offset",
            "by-time",
            "append",
            "append.json",
            "segments",
            "check",
            "by-key",
            "latest",
            "keys"
        ]
    );
}

#[test]
fn inode_numbers_are_stable_while_referenced_and_fresh_after_forget() {
    let f = fixture();
    let a = f.ino("t/0/info").unwrap();
    assert_eq!(f.ino("t/0/info").unwrap(), a);
    f.fs.forget(a, 2);
    let b = f.ino("t/0/info").unwrap();
    assert_ne!(a, b);
    assert_eq!(f.fs.getattr(a, None).unwrap_err().errno(), libc::ESTALE);
}

#[test]
fn relative_name_is_pinned_while_open_and_re_resolved_after() {
    let f = fixture();
    f.append("t/0/append", &[b"1\n2\n3\n"]).unwrap();
    let ino = f.ino("t/0/by-offset/-1").unwrap();
    let fh = f.fs.open(ino, READ).unwrap().fh;
    f.append("t/0/append", &[b"4\n"]).unwrap();
    // The open file grew from where it started (tail -f sees "3" then "4").
    assert_eq!(f.fs.read(fh, 0, 100).unwrap().to_vec(), b"3\n4\n");
    assert_eq!(f.fs.getattr(ino, None).unwrap().attr.size, 4);
    // A new lookup while it is open means the same records.
    assert_eq!(
        f.fs.lookup(f.ino("t/0/by-offset").unwrap(), OsStr::new("-1")).unwrap().attr.size,
        4
    );
    f.fs.release(fh).unwrap();
    // Once closed, the name is resolved again: the last record now, for stat and read alike.
    assert_eq!(f.read_all("t/0/by-offset/-1"), b"4\n");
    f.append("t/0/append", &[b"55\n"]).unwrap();
    assert_eq!(f.fs.getattr(ino, None).unwrap().attr.size, 3);
}

#[test]
fn offsets_below_the_log_start_do_not_exist() {
    let config = LogConfig {
        segment_bytes: 200,
        retention_bytes: Some(1),
        retention_ms: None,
        ..LogConfig::default()
    };
    let f = fixture_with(config, false);
    for i in 0..20 {
        f.append("t/0/append", &[format!("record-{i}\n").as_bytes()]).unwrap();
    }
    assert!(f.log_dir.enforce_retention().unwrap() > 0);
    let start = f.log_dir.partition("t", 0).unwrap().summary().unwrap().log_start_offset.0;
    assert!(start > 0);
    assert_eq!(f.ino("t/0/by-offset/0").unwrap_err().errno(), libc::ENOENT);
    let listed = f.names("t/0/by-offset");
    assert!(listed.contains(&start.to_string()), "{listed:?}");
    assert!(f.read_all(&format!("t/0/by-offset/{start}")).ends_with(b"record-19\n"));
}

#[test]
fn segment_files_are_listed_and_read_as_stored() {
    let f = fixture();
    f.append("t/0/append", &[b"x\ny\n"]).unwrap();
    let names = f.names("t/0/segments");
    assert!(names.contains(&"00000000000000000000.log".to_string()), "{names:?}");
    let log = f.read_all("t/0/segments/00000000000000000000.log");
    assert_eq!(log, f.read_all("t/0/by-offset/0.raw"));
    assert_eq!(f.size("t/0/segments/00000000000000000000.log"), log.len() as u64);
    let ino = f.ino("t/0/segments/00000000000000000000.log").unwrap();
    assert_eq!(f.fs.open(ino, WRITE).unwrap_err().errno(), libc::EPERM);
}

#[test]
fn shutdown_appends_pending_lines_and_refuses_later_writes() {
    let f = fixture();
    let fh = f.fs.open(f.ino("t/0/append").unwrap(), WRITE).unwrap().fh;
    f.fs.write(fh, b"pending", None).unwrap();
    f.fs.shutdown().unwrap();
    f.fs.shutdown().unwrap();
    assert_eq!(f.fs.write(fh, b"late\n", None).unwrap_err().errno(), libc::ESTALE);
    drop(f.fs);
    let reopened = LogDirs::open_dir(
        f._dir.path(),
        LogConfig::default(),
        Default::default(),
        SegmentMode::Writable,
    )
    .unwrap();
    assert!(reopened.dirs()[0].had_clean_shutdown());
    let summary = reopened.partition("t", 0).unwrap().summary().unwrap();
    assert_eq!(summary.log_end_offset.0, 1);
}

#[test]
fn stream_mtime_moves_when_the_stream_grows() {
    let f = fixture();
    f.append("t/0/append", &[b"1\n"]).unwrap();
    let ino = f.ino("t/0/by-offset/0").unwrap();
    let before = f.fs.getattr(ino, None).unwrap().attr;
    // Partition modification times have millisecond resolution: step past it.
    std::thread::sleep(std::time::Duration::from_millis(5));
    f.append("t/0/append", &[b"2\n"]).unwrap();
    let after = f.fs.getattr(ino, None).unwrap().attr;
    assert!(after.size > before.size);
    assert!(after.mtime > before.mtime, "{:?} -> {:?}", before.mtime, after.mtime);
}

#[test]
fn a_complete_ranges_mtime_is_its_last_records_time_and_stops_moving() {
    let f = fixture();
    // Two records with CreateTime 1 s and 2 s after the epoch (append.json keeps `ts`).
    f.append("t/0/append.json", &[b"{\"ts\":1000,\"payload\":\"a\"}\n"]).unwrap();
    f.append("t/0/append.json", &[b"{\"ts\":2000,\"payload\":\"b\"}\n"]).unwrap();
    let range = f.ino("t/0/by-offset/0..2").unwrap();
    let open = f.ino("t/0/by-offset/0").unwrap();
    let first = f.fs.getattr(range, None).unwrap().attr;
    let second_rec = std::time::UNIX_EPOCH + std::time::Duration::from_millis(2000);
    assert_eq!(first.mtime, second_rec, "the max timestamp of the batch of its last record");
    std::thread::sleep(std::time::Duration::from_millis(5));
    f.append("t/0/append", &[b"later\n"]).unwrap();
    let again = f.fs.getattr(range, None).unwrap().attr;
    assert_eq!((again.size, again.mtime), (first.size, first.mtime), "complete: nothing moves");
    // An open-ended stream still moves with the partition.
    assert!(f.fs.getattr(open, None).unwrap().attr.mtime > second_rec);
    // A range not yet complete moves with the partition too.
    let growing = f.ino("t/0/by-offset/0..10").unwrap();
    assert!(f.fs.getattr(growing, None).unwrap().attr.mtime > second_rec);
}

#[test]
fn json_line_written_in_pieces_is_one_record() {
    let config = LogConfig { max_message_bytes: 400, ..LogConfig::default() };
    let f = fixture_with(config, false);
    let line = format!("{{\"key\":\"k\",\"payload\":\"{}\"}}\n", "p".repeat(250));
    let pieces: Vec<&[u8]> = line.as_bytes().chunks(50).collect();
    f.append("t/0/append.json", &pieces).unwrap();
    assert_eq!(f.read_all("t/0/by-offset/0"), format!("{}\n", "p".repeat(250)).as_bytes());
    let too_big = format!("{{\"payload\":\"{}\"}}\n", "q".repeat(500));
    assert_eq!(errno(f.append("t/0/append.json", &[too_big.as_bytes()])), libc::EFBIG);
}

mod model {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        /// However the bytes are cut into write() calls, every line becomes one record, in
        /// order, and a read of the stream at any offset returns the bytes a full read has there.
        #[test]
        fn lines_survive_any_write_chunking_and_any_read_window(
            lines in prop::collection::vec("[a-z0-9 ]{0,40}", 1..40),
            cuts in prop::collection::vec(1usize..64, 1..20),
            window in (0usize..400, 1u32..100),
        ) {
            let f = fixture();
            let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            let bytes = text.as_bytes();
            let mut pieces = Vec::new();
            let mut at = 0;
            for cut in cuts.iter().cycle() {
                if at >= bytes.len() {
                    break;
                }
                let end = (at + cut).min(bytes.len());
                pieces.push(&bytes[at..end]);
                at = end;
            }
            f.append("t/0/append", &pieces).unwrap();
            let full = f.read_all("t/0/by-offset/0");
            prop_assert_eq!(&full, bytes);
            let json = f.read_all("t/0/by-offset/0.json");
            prop_assert_eq!(f.size("t/0/by-offset/0.json"), json.len() as u64);
            let ino = f.ino("t/0/by-offset/0.json").unwrap();
            let fh = f.fs.open(ino, READ).unwrap().fh;
            let (offset, len) = window;
            let got = f.fs.read(fh, offset as u64, len).unwrap();
            let start = offset.min(json.len());
            let end = (offset + len as usize).min(json.len());
            prop_assert_eq!(&got[..], &json[start..end]);
            f.fs.release(fh).unwrap();
        }
    }
}

#[test]
fn streams_are_kept_only_while_a_handle_reads_them() {
    let f = fixture();
    let lines: Vec<u8> = (0..300).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
    f.append("t/0/append", &[&lines]).unwrap();
    // Many distinct names, each looked up, stat'ed, opened, read and closed: the kernel may
    // remember every name, the filesystem keeps no stream for any of them afterwards.
    for n in 0..200 {
        let path = format!("t/0/by-offset/{n}");
        assert!(f.size(&path) > 0);
        assert!(f.read_all(&path).starts_with(format!("line {n}\n").as_bytes()));
    }
    assert_eq!(f.fs.pinned_streams(), 0);
    // An open handle keeps its stream (and only that one) until it is closed.
    let ino = f.ino("t/0/by-offset/-5").unwrap();
    let fh = f.fs.open(ino, READ).unwrap().fh;
    assert_eq!(f.fs.pinned_streams(), 1);
    f.fs.release(fh).unwrap();
    assert_eq!(f.fs.pinned_streams(), 0);
}

/// A source with the local log's offsets and batches but no segment files (what a cluster
/// backend offers): every [`PartitionSource`] method is forwarded except `segment_files` and
/// `key_index` (none), and `read`, which reads past no damage (as a cluster).
mod without_files {
    use std::sync::Arc;

    use topicfs::Result;
    use topicfs::format::Offset;
    use topicfs::source::{
        AppendInfo, Committed, ConfigChange, ConfigEntry, KeyIndex, Known, OffsetQuery,
        PartitionSource, PartitionSummary, ReadAnswer, ReadCursor, ReadMode, Records, SegmentFiles,
        SpaceStats, TopicSource,
    };

    pub struct Topics(pub Arc<dyn TopicSource>);
    struct Partition(Arc<dyn PartitionSource>);

    impl TopicSource for Topics {
        fn topics(&self) -> Result<Vec<String>> {
            self.0.topics()
        }
        fn partitions(&self, topic: &str) -> Result<Vec<u32>> {
            self.0.partitions(topic)
        }
        fn partition(&self, topic: &str, partition: u32) -> Result<Arc<dyn PartitionSource>> {
            Ok(Arc::new(Partition(self.0.partition(topic, partition)?)))
        }
        fn create_topic(&self, topic: &str, partitions: u32) -> Result<()> {
            self.0.create_topic(topic, partitions)
        }
        fn create_partition(&self, topic: &str, partition: u32) -> Result<()> {
            self.0.create_partition(topic, partition)
        }
        fn is_read_only(&self) -> bool {
            self.0.is_read_only()
        }
        fn shutdown(&self) -> Result<()> {
            self.0.shutdown()
        }
        fn space(&self) -> Result<SpaceStats> {
            self.0.space()
        }
        fn topic_config(&self, topic: &str) -> Result<Vec<ConfigEntry>> {
            self.0.topic_config(topic)
        }
        fn alter_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
            self.0.alter_topic_config(topic, changes)
        }
        fn check_topic_config(&self, topic: &str, changes: &[ConfigChange]) -> Result<()> {
            self.0.check_topic_config(topic, changes)
        }
        fn check_value_prefix(&self, name: &str, value: &str) -> Result<()> {
            self.0.check_value_prefix(name, value)
        }
        fn max_message_bytes(&self, topic: &str) -> Result<Option<usize>> {
            self.0.max_message_bytes(topic)
        }
        fn offsets_for(
            &self,
            topic: &str,
            query: topicfs::source::OffsetQuery,
        ) -> Result<Vec<(u32, topicfs::format::Offset)>> {
            self.0.offsets_for(topic, query)
        }

        fn state_bounds(&self, topic: &str) -> Result<()> {
            self.0.state_bounds(topic)
        }
        fn prefetch(&self, topic: &str, reads: &[(u32, ReadCursor)]) -> Result<()> {
            self.0.prefetch(topic, reads)
        }
        fn log_dirs(&self) -> topicfs::source::LogDirsReport {
            self.0.log_dirs()
        }
    }

    impl PartitionSource for Partition {
        fn topic(&self) -> &str {
            self.0.topic()
        }
        fn partition(&self) -> u32 {
            self.0.partition()
        }
        fn summary(&self) -> Result<PartitionSummary> {
            let summary = self.0.summary()?;
            Ok(PartitionSummary { segment_count: None, size_bytes: None, ..summary })
        }
        fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
            self.0.offset_for(query)
        }
        fn seek(&self, target: Offset) -> Result<ReadCursor> {
            self.0.seek(target)
        }
        fn known(&self) -> Known {
            self.0.known()
        }
        fn read(&self, cursor: &ReadCursor, max_bytes: usize, _: ReadMode) -> Result<ReadAnswer> {
            self.0.read(cursor, max_bytes, ReadMode::Batches)
        }
        fn holds(&self, cursor: &ReadCursor) -> Result<bool> {
            self.0.holds(cursor)
        }
        fn append(&self, records: Records<'_>) -> Result<AppendInfo> {
            self.0.append(records)
        }
        fn sync(&self) -> Result<()> {
            self.0.sync()
        }
        fn segment_files(&self) -> Option<&dyn SegmentFiles> {
            None
        }
        fn key_index(&self) -> Option<&dyn KeyIndex> {
            None
        }
        fn committed(&self) -> Committed<'_> {
            self.0.committed()
        }

        fn span_store(&self) -> Option<&dyn topicfs::source::SpanStore> {
            None
        }
    }
}

#[test]
fn a_source_without_segment_files_has_no_segments_or_check_and_the_same_streams() {
    let config = LogConfig { segment_bytes: 1024, ..LogConfig::default() };
    let local = fixture_with(config.clone(), false);
    for i in 0..40 {
        local.append("t/0/append", &[format!("line {i} {}\n", "x".repeat(60)).as_bytes()]).unwrap();
    }
    assert!(local.log_dir.log("t", 0).unwrap().segment_summaries().unwrap().len() > 2);
    let source = without_files::Topics(Arc::clone(&local.log_dir) as Arc<dyn TopicSource>);
    let remote = Fixture {
        fs: FsFixture::over(Arc::new(source))
            .partitions_per_topic(2)
            .max_line_bytes(config.max_message_bytes as usize)
            .build(),
        log_dir: Arc::clone(&local.log_dir),
        _dir: tempfile::tempdir().unwrap(),
    };
    assert_eq!(
        remote.names("t/0"),
        [".", "..", "info", "by-offset", "by-time", "append", "append.json"]
    );
    assert_eq!(errno(remote.ino("t/0/segments")), libc::ENOENT);
    assert_eq!(errno(remote.ino("t/0/check")), libc::ENOENT);
    assert_eq!(errno(remote.ino("t/0/segments/00000000000000000000.log")), libc::ENOENT);
    // No key index either: no by-key/, latest/ or keys, in the partition or the topic.
    for path in
        ["t/0/by-key", "t/0/by-key/k", "t/0/latest", "t/0/keys", "t/by-key", "t/by-key/k.json"]
    {
        assert_eq!(errno(remote.ino(path)), libc::ENOENT, "{path}");
    }
    assert!(!remote.names("t").contains(&"by-key".to_string()));
    // Listings offer only the log start; the streams are byte for byte the local ones.
    assert_eq!(remote.names("t/0/by-offset"), [".", "..", "0"]);
    assert!(local.names("t/0/by-offset").len() > 4);
    for path in ["t/0/by-offset/0", "t/0/by-offset/7.json", "t/0/by-offset/0.raw", "t/by-time/0"] {
        assert_eq!(remote.read_all(path), local.read_all(path), "{path}");
        assert_eq!(remote.size(path), local.size(path), "{path}");
    }
    let info = String::from_utf8(remote.read_all("t/0/info")).unwrap();
    assert!(info.contains("log_end_offset: 40\n"), "{info}");
    assert!(!info.contains("segment_count") && !info.contains("size_bytes"), "{info}");
    remote.append("t/0/append", &[b"from the remote tree\n"]).unwrap();
    assert!(
        String::from_utf8(local.read_all("t/0/by-offset/40")).unwrap() == "from the remote tree\n"
    );
}
