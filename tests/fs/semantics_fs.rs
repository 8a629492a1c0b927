//! Promises of `SEMANTICS.md` checked on the filesystem logic without a kernel: `TopicFs` over a
//! real log dir in a temp dir, driven the way the kernel drives it. Each test names the promise
//! it checks; `doc/SEMANTICS-TESTS.md` lists it under the promise's tag.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::fs_fixture::{self, FsFixture};
use topicfs::Error;
use topicfs::fs::attr::{DYNAMIC_TTL, FileKind, OpenRequest, STABLE_TTL, SetAttrRequest};
use topicfs::fs::inode::ROOT_INO;
use topicfs::fs::{DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, TopicFs};
use topicfs::source::TopicSource;
use topicfs::storage::{LogConfig, LogDirs};

const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };
const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: false };
const UID: u32 = 1234;
const GID: u32 = 5678;

struct Fixture {
    fs: TopicFs,
    log_dir: Arc<LogDirs>,
    _dir: tempfile::TempDir,
}

/// A writable fixture whose segments roll every 200 bytes and whose retention keeps only the
/// active segment (`retention.bytes` 1) when it runs.
fn rolling_fixture_keeping_one_byte() -> Fixture {
    let config = LogConfig {
        segment_bytes: 200,
        retention_bytes: Some(1),
        retention_ms: None,
        ..LogConfig::default()
    };
    fixture_with(config, false)
}

fn fixture_with(config: LogConfig, read_only: bool) -> Fixture {
    fixture_with_modes(config, read_only, DEFAULT_FILE_MODE, DEFAULT_DIR_MODE)
}

fn fixture_with_modes(
    config: LogConfig,
    read_only: bool,
    file_mode: u16,
    dir_mode: u16,
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = crate::common::writable_log_dirs(dir.path(), config.clone());
    log_dir.create_topic("t", 2).unwrap();
    let fs = FsFixture::local(&log_dir)
        .read_only(read_only)
        .max_line_bytes(config.max_message_bytes as usize)
        .owner(UID, GID)
        .modes(file_mode, dir_mode)
        .build();
    Fixture { fs, log_dir, _dir: dir }
}

fn fixture() -> Fixture {
    fixture_with(LogConfig::default(), false)
}

impl Fixture {
    fn ino(&self, path: &str) -> Result<u64, Error> {
        fs_fixture::ino(&self.fs, path)
    }

    fn read_fh(&self, fh: u64) -> Result<Vec<u8>, Error> {
        fs_fixture::read_to_end(&self.fs, fh, 4096)
    }

    fn read_all(&self, path: &str) -> Vec<u8> {
        fs_fixture::read_path(&self.fs, path, 4096)
    }

    fn size(&self, path: &str) -> u64 {
        self.fs.getattr(self.ino(path).unwrap(), None).unwrap().attr.size
    }

    fn append(&self, path: &str, data: &[u8]) -> Result<(), Error> {
        let fh = self.fs.open(self.ino(path)?, WRITE)?.fh;
        self.fs.write(fh, data, None)?;
        self.fs.flush(fh, None)?;
        self.fs.release(fh)
    }

    fn names(&self, path: &str) -> Vec<String> {
        fs_fixture::names(&self.fs, path)
    }
}

fn errno<T>(result: Result<T, Error>) -> i32 {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(err) => err.errno(),
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

#[test]
fn every_file_is_opened_with_direct_io_and_no_kept_cache() {
    let f = fixture();
    f.append("t/0/append", b"a\n").unwrap();
    for path in [
        "t/info",
        "t/0/info",
        "t/0/by-offset/0",
        "t/0/by-time/-2.json",
        "t/0/segments/00000000000000000000.log",
        "t/0/segments/00000000000000000000.index",
        "t/0/append",
        "t/0/append.json",
    ] {
        let opened = f.fs.open(f.ino(path).unwrap(), READ).unwrap();
        assert!(opened.direct_io, "{path}");
        assert!(!opened.keep_cache, "{path}");
        f.fs.release(opened.fh).unwrap();
    }
}

#[test]
fn changing_attributes_are_never_cached_and_fixed_ones_for_one_second() {
    let config = LogConfig { segment_bytes: 200, ..LogConfig::default() };
    let f = fixture_with(config, false);
    for i in 0..20 {
        f.append("t/0/append", format!("record-{i}\n").as_bytes()).unwrap();
    }
    let segments = f.log_dir.log("t", 0).unwrap().segment_list();
    assert!(segments.len() > 1, "needs a sealed segment");
    let sealed = format!("t/0/segments/{:020}.log", segments[0].base_offset().0);
    let active = format!("t/0/segments/{:020}.log", segments.last().unwrap().base_offset().0);
    let ttl = |path: &str| f.fs.getattr(f.ino(path).unwrap(), None).unwrap().ttl;
    for path in ["t/info", "t/0/info", "t/0/by-offset/0", "t/0/by-time/-1h", "t/0/append", &active]
    {
        assert_eq!(ttl(path), DYNAMIC_TTL, "{path}");
    }
    for path in ["", "t", "t/0", "t/0/by-offset", "t/0/by-time", "t/0/segments", &sealed] {
        assert_eq!(ttl(path), STABLE_TTL, "{path}");
    }
    assert_eq!(STABLE_TTL, std::time::Duration::from_secs(1));
    // Names themselves are cached for one second, streams included.
    let dir = f.ino("t/0/by-offset").unwrap();
    assert_eq!(f.fs.lookup(dir, OsStr::new("-1")).unwrap().entry_ttl, STABLE_TTL);
}

#[test]
fn info_file_sizes_are_exactly_what_a_read_returns() {
    let f = fixture();
    f.append("t/0/append", b"one\ntwo\n").unwrap();
    for path in ["t/info", "t/0/info", "t/1/info"] {
        let text = f.read_all(path);
        assert_eq!(f.size(path), text.len() as u64, "{path}");
    }
    let info = String::from_utf8(f.read_all("t/0/info")).unwrap();
    for key in [
        "topic: t\n",
        "partition: 0\n",
        "log_start_offset: 0\n",
        "log_end_offset: 2\n",
        "segment_count: 1\n",
        "size_bytes: ",
        "first_timestamp: ",
        "first_time: ",
        "max_timestamp: ",
        "max_time: ",
    ] {
        assert!(info.contains(key), "{key:?} in {info}");
    }
    let empty = String::from_utf8(f.read_all("t/1/info")).unwrap();
    assert!(empty.contains("first_timestamp: none\n"), "{empty}");
    let topic = String::from_utf8(f.read_all("t/info")).unwrap();
    assert!(topic.contains("partitions: 2\n"), "{topic}");
    assert!(topic.contains("partition.0.log_end_offset: 2\n"), "{topic}");
    assert!(topic.contains("partition.1.log_start_offset: 0\n"), "{topic}");
}

#[test]
fn mount_log_shows_the_newest_warnings_with_an_exact_size_and_is_not_listed() {
    use topicfs::fs::recent_log::RecentLog;
    let mut f = fixture();
    let log = Arc::new(RecentLog::new(2, "/var/log/topicfs/mnt.log"));
    f.fs = f.fs.with_recent_log(Arc::clone(&log));
    assert_eq!(f.size("@log"), 0);
    assert!(f.read_all("@log").is_empty());
    let at = UNIX_EPOCH + std::time::Duration::from_millis(1_764_662_400_000);
    for (i, level) in [log::Level::Warn, log::Level::Error, log::Level::Warn].iter().enumerate() {
        log.push(at, *level, "topicfs_fs::config", &format!("record {i}"));
    }
    let text = String::from_utf8(f.read_all("@log")).unwrap();
    assert_eq!(
        text,
        "2025-12-02T08:00:00.000Z ERROR topicfs_fs::config: record 1\n\
         2025-12-02T08:00:00.000Z WARN topicfs_fs::config: record 2\n"
    );
    assert_eq!(f.size("@log"), text.len() as u64);
    assert_eq!(errno(f.fs.open(f.ino("@log").unwrap(), WRITE)), libc::EPERM);
    let info = String::from_utf8(f.read_all("@info")).unwrap();
    assert!(info.ends_with("log: /var/log/topicfs/mnt.log\n"), "{info}");
    assert_eq!(f.names(""), [".", "..", "t"]);
}

#[test]
fn modes_say_what_each_file_allows_and_the_mounting_user_owns_everything() {
    let f = fixture();
    f.append("t/0/append", b"a\n").unwrap();
    let expected = [
        ("", 0o755),
        ("t", 0o755),
        ("t/info", 0o444),
        ("t/0", 0o555),
        ("t/0/info", 0o444),
        ("t/0/by-offset", 0o555),
        ("t/0/by-time", 0o555),
        ("t/0/segments", 0o555),
        ("t/0/by-offset/0", 0o444),
        ("t/0/segments/00000000000000000000.log", 0o444),
        ("t/0/append", 0o220),
        ("t/0/append.json", 0o220),
    ];
    for (path, perm) in expected {
        let attr = f.fs.getattr(f.ino(path).unwrap(), None).unwrap().attr;
        assert_eq!(attr.perm, perm, "{path}");
        assert_eq!((attr.uid, attr.gid), (UID, GID), "{path}");
    }
    let ro = fixture_with(LogConfig::default(), true);
    for path in ["", "t"] {
        assert_eq!(ro.fs.getattr(ro.ino(path).unwrap(), None).unwrap().attr.perm, 0o555);
    }
}

#[test]
fn file_mode_and_dir_mode_give_each_file_the_bits_it_can_use() {
    let f = fixture_with_modes(LogConfig::default(), false, 0o640, 0o750);
    f.append("t/0/append", b"a\n").unwrap();
    f.fs.mkdir(f.ino("").unwrap(), OsStr::new("u")).unwrap();
    let expected = [
        ("", 0o750),
        ("t", 0o750),
        ("u", 0o750),
        ("t/info", 0o440),
        ("t/offsets", 0o550),
        ("t/offsets/0", 0o440),
        ("t/by-time", 0o550),
        ("t/by-time/0", 0o440),
        ("t/append", 0o200),
        ("t/append.json", 0o200),
        ("t/0", 0o550),
        ("t/0/info", 0o440),
        ("t/0/check", 0o440),
        ("t/0/by-offset", 0o550),
        ("t/0/by-time", 0o550),
        ("t/0/segments", 0o550),
        ("t/0/by-offset/0", 0o440),
        ("t/0/by-offset/0.json", 0o440),
        ("t/0/by-time/0", 0o440),
        ("t/0/segments/00000000000000000000.log", 0o440),
        ("t/0/segments/00000000000000000000.index", 0o440),
        ("t/0/segments/00000000000000000000.log.dump", 0o440),
        ("t/0/append", 0o200),
        ("t/0/append.json", 0o200),
    ];
    for (path, perm) in expected {
        let attr = f.fs.getattr(f.ino(path).unwrap(), None).unwrap().attr;
        assert_eq!(attr.perm, perm, "{path}: {:o}", attr.perm);
    }
    // A read-only mount never shows a write bit on a directory.
    let ro = fixture_with_modes(LogConfig::default(), true, 0o777, 0o777);
    for (path, perm) in [("", 0o555), ("t", 0o555), ("t/0", 0o555), ("t/0/info", 0o444)] {
        assert_eq!(ro.fs.getattr(ro.ino(path).unwrap(), None).unwrap().attr.perm, perm, "{path}");
    }
}

#[test]
fn append_files_have_size_zero_and_read_as_empty() {
    let f = fixture();
    f.append("t/0/append", b"a\nb\n").unwrap();
    for path in ["t/0/append", "t/0/append.json"] {
        let attr = f.fs.getattr(f.ino(path).unwrap(), None).unwrap().attr;
        assert_eq!((attr.kind, attr.size), (FileKind::RegularFile, 0), "{path}");
        assert_eq!(f.read_all(path), b"", "{path}");
    }
}

#[test]
fn append_files_accept_truncation_to_zero_and_touch_and_refuse_other_changes() {
    let f = fixture();
    let append = f.ino("t/0/append").unwrap();
    let set = |ino, request| f.fs.setattr(ino, &request);
    set(append, SetAttrRequest { size: Some(0), ..Default::default() }).unwrap();
    set(append, SetAttrRequest { times: true, ..Default::default() }).unwrap();
    assert_eq!(
        errno(set(append, SetAttrRequest { size: Some(3), ..Default::default() })),
        libc::EPERM
    );
    assert_eq!(
        errno(set(append, SetAttrRequest { mode: Some(0o666), ..Default::default() })),
        libc::EPERM
    );
    assert_eq!(
        errno(set(append, SetAttrRequest { uid: Some(0), ..Default::default() })),
        libc::EPERM
    );
    let info = f.ino("t/0/info").unwrap();
    assert_eq!(errno(set(info, SetAttrRequest { times: true, ..Default::default() })), libc::EPERM);
    // Nothing was appended by any of it.
    assert_eq!(f.size("t/0/by-offset/0"), 0);
}

#[test]
fn fsync_of_an_append_file_makes_its_records_durable() {
    let f = fixture();
    let log = f.log_dir.log("t", 0).unwrap();
    let fh = f.fs.open(f.ino("t/0/append").unwrap(), WRITE).unwrap().fh;
    f.fs.write(fh, b"a\nb\nc\n", None).unwrap();
    // Acknowledged and visible, not yet synced: the recovery point has not moved.
    assert_eq!(f.read_all("t/0/by-offset/0"), b"a\nb\nc\n");
    assert_eq!(log.recovery_point().0, 0);
    f.fs.fsync(fh).unwrap();
    // Everything below the log end offset is on disk now.
    assert_eq!(log.recovery_point(), log.log_end_offset());
    assert_eq!(log.recovery_point().0, 3);
    // A partial line is not a record yet: fsync leaves it pending.
    f.fs.write(fh, b"pend", None).unwrap();
    f.fs.fsync(fh).unwrap();
    assert_eq!(log.log_end_offset().0, 3);
    f.fs.release(fh).unwrap();
    assert_eq!(log.log_end_offset().0, 4);
    // fsync of a read-only file is a successful no-op.
    let stream = f.fs.open(f.ino("t/0/by-offset/0").unwrap(), READ).unwrap().fh;
    f.fs.fsync(stream).unwrap();
}

#[test]
fn by_time_later_than_every_record_starts_at_the_log_end_and_shows_every_later_append() {
    let f = fixture();
    f.append(
        "t/0/append.json",
        b"{\"payload\":\"a\",\"ts\":1000}\n{\"payload\":\"b\",\"ts\":2000}\n",
    )
    .unwrap();
    let ino = f.ino("t/0/by-time/3000").unwrap();
    let fh = f.fs.open(ino, READ).unwrap().fh;
    assert_eq!(f.fs.getattr(ino, Some(fh)).unwrap().attr.size, 0);
    // The start is an offset (ListOffsets), not a filter: an older timestamp appended later is
    // in the stream.
    f.append("t/0/append.json", b"{\"payload\":\"old\",\"ts\":500}\n").unwrap();
    assert_eq!(f.read_fh(fh).unwrap(), b"old\n");
    f.fs.release(fh).unwrap();
    // Resolved afresh, the name now starts at the (new) log end again.
    assert_eq!(f.read_all("t/0/by-time/3000"), b"");
    assert_eq!(f.read_all("t/0/by-time/1500"), b"b\nold\n");
}

#[test]
fn relative_times_are_anchored_at_resolution() {
    let f = fixture();
    let two_hours_ago = now_ms() - 2 * 3600 * 1000;
    f.append(
        "t/0/append.json",
        format!("{{\"payload\":\"old\",\"ts\":{two_hours_ago}}}\n").as_bytes(),
    )
    .unwrap();
    f.append("t/0/append", b"recent\n").unwrap();
    assert_eq!(f.read_all("t/0/by-time/-1h"), b"recent\n");
    assert_eq!(f.read_all("t/0/by-time/-3h"), b"old\nrecent\n");
}

#[test]
fn by_offset_at_the_log_end_is_empty_and_grows_and_past_it_does_not_exist() {
    let f = fixture();
    f.append("t/0/append", b"a\nb\n").unwrap();
    assert_eq!(errno(f.ino("t/0/by-offset/3")), libc::ENOENT);
    let ino = f.ino("t/0/by-offset/2").unwrap();
    let fh = f.fs.open(ino, READ).unwrap().fh;
    assert_eq!(f.read_fh(fh).unwrap(), b"");
    f.append("t/0/append", b"c\n").unwrap();
    assert_eq!(f.read_fh(fh).unwrap(), b"c\n");
    f.fs.release(fh).unwrap();
    // A range past the log end grows until the log end reaches its end, then never changes.
    let range = f.ino("t/0/by-offset/2..4").unwrap();
    let fh = f.fs.open(range, READ).unwrap().fh;
    assert_eq!(f.read_fh(fh).unwrap(), b"c\n");
    f.append("t/0/append", b"d\ne\n").unwrap();
    assert_eq!(f.read_fh(fh).unwrap(), b"c\nd\n");
    assert_eq!(f.fs.getattr(range, Some(fh)).unwrap().attr.size, 4);
    f.fs.release(fh).unwrap();
}

#[test]
fn a_refused_write_changes_nothing_and_the_handle_keeps_working() {
    let f = fixture();
    let fh = f.fs.open(f.ino("t/0/append.json").unwrap(), WRITE).unwrap().fh;
    f.fs.write(fh, b"{\"payload\":\"x\"}\n{\"pay", None).unwrap();
    let err = f.fs.write(fh, b"load\":\"y\"}\n{bad\n", None).unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL);
    assert!(err.to_string().contains("line 3"), "the message names the line: {err}");
    // Neither y nor anything else of the refused write was appended; the pending `{"pay`
    // is still there and completes with the next write.
    assert_eq!(f.read_all("t/0/by-offset/0"), b"x\n");
    f.fs.write(fh, b"load\":\"z\"}\n", None).unwrap();
    f.fs.release(fh).unwrap();
    assert_eq!(f.read_all("t/0/by-offset/0"), b"x\nz\n");
}

#[test]
fn empty_lines_are_empty_values_in_append_and_skipped_in_append_json() {
    let f = fixture();
    f.append("t/0/append", b"a\n\nb\r\n").unwrap();
    assert_eq!(f.read_all("t/0/by-offset/0"), b"a\n\nb\r\n");
    let json = String::from_utf8(f.read_all("t/0/by-offset/1..2.json")).unwrap();
    assert!(json.contains("\"payload\":\"\""), "{json}");
    f.append("t/1/append.json", b"\n   \n{\"payload\":\"only\"}\n\n").unwrap();
    assert_eq!(f.read_all("t/1/by-offset/0"), b"only\n");
}

#[test]
fn mkdir_refusals_have_their_errno() {
    let f = fixture();
    let t = f.ino("t").unwrap();
    assert_eq!(errno(f.fs.mkdir(ROOT_INO, OsStr::new("a b"))), libc::EINVAL);
    assert_eq!(errno(f.fs.mkdir(ROOT_INO, OsStr::new(&"x".repeat(250)))), libc::EINVAL);
    assert_eq!(errno(f.fs.mkdir(ROOT_INO, OsStr::new("t"))), libc::EEXIST);
    assert_eq!(errno(f.fs.mkdir(t, OsStr::new("x"))), libc::EINVAL);
    assert_eq!(errno(f.fs.mkdir(t, OsStr::new("01"))), libc::EINVAL);
    assert_eq!(errno(f.fs.mkdir(t, OsStr::new("1"))), libc::EEXIST);
    assert_eq!(errno(f.fs.mkdir(t, OsStr::new("3"))), libc::EINVAL);
    assert_eq!(errno(f.fs.mkdir(f.ino("t/0").unwrap(), OsStr::new("x"))), libc::EPERM);
    assert_eq!(errno(f.fs.mkdir(f.ino("t/0/segments").unwrap(), OsStr::new("x"))), libc::EPERM);
    // The topic gets --partitions partitions (1 here).
    f.fs.mkdir(ROOT_INO, OsStr::new("new.topic_1-x")).unwrap();
    assert_eq!(
        f.names("new.topic_1-x"),
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
}

#[test]
fn creating_linking_and_removing_are_refused() {
    let f = fixture();
    f.append("t/0/append", b"a\n").unwrap();
    let p = f.ino("t/0").unwrap();
    assert_eq!(f.fs.refuse_create(p, "creating files").errno(), libc::EPERM);
    assert_eq!(f.fs.refuse_create(ROOT_INO, "hard links").errno(), libc::EPERM);
    for (dir, name) in [(ROOT_INO, "t"), (f.ino("t").unwrap(), "0"), (p, "append"), (p, "info")] {
        assert_eq!(f.fs.refuse_change(dir, OsStr::new(name), "removing").errno(), libc::EPERM);
    }
    assert_eq!(f.fs.refuse_change(p, OsStr::new("nope"), "removing").errno(), libc::ENOENT);
    let ro = fixture_with(LogConfig::default(), true);
    let p = ro.ino("t/0").unwrap();
    assert_eq!(ro.fs.refuse_create(p, "creating files").errno(), libc::EROFS);
    assert_eq!(ro.fs.refuse_change(p, OsStr::new("append"), "removing").errno(), libc::EROFS);
    assert_eq!(errno(ro.fs.open(ro.ino("t/0/append.json").unwrap(), WRITE)), libc::EROFS);
    // Reading an append file of a read-only mount is still allowed (and empty).
    assert_eq!(ro.read_all("t/0/append"), b"");
}

#[test]
fn a_deleted_segment_file_whose_inode_the_kernel_still_holds_fails_with_enoent() {
    let f = rolling_fixture_keeping_one_byte();
    for i in 0..20 {
        f.append("t/0/append", format!("record-{i}\n").as_bytes()).unwrap();
    }
    let segments = f.ino("t/0/segments").unwrap();
    let sealed = OsStr::new("00000000000000000000.log");
    let entry = f.fs.lookup(segments, sealed).unwrap();
    // The kernel may keep a sealed file's name and attributes for STABLE_TTL.
    assert_eq!((entry.entry_ttl, entry.attr_ttl), (STABLE_TTL, STABLE_TTL));
    // Deleted while the kernel still holds the name (and so the inode): the stat and the open
    // it sends then fail with ENOENT, as a new lookup does.
    assert!(f.log_dir.enforce_retention().unwrap() > 0);
    assert_eq!(errno(f.fs.getattr(entry.attr.ino, None)), libc::ENOENT);
    assert_eq!(errno(f.fs.open(entry.attr.ino, READ)), libc::ENOENT);
    assert_eq!(errno(f.fs.lookup(segments, sealed)), libc::ENOENT);
}

#[test]
fn segment_files_of_a_deleted_segment_no_longer_exist() {
    let f = rolling_fixture_keeping_one_byte();
    for i in 0..20 {
        f.append("t/0/append", format!("record-{i}\n").as_bytes()).unwrap();
    }
    let first = "t/0/segments/00000000000000000000.log";
    let held = f.fs.open(f.ino(first).unwrap(), READ).unwrap().fh;
    let stream = f.fs.open(f.ino("t/0/by-offset/0").unwrap(), READ).unwrap().fh;
    let size_before = f.fs.getattr(f.ino("t/0/by-offset/0").unwrap(), Some(stream)).unwrap();
    assert!(f.log_dir.enforce_retention().unwrap() > 0);
    assert!(!f.names("t/0/segments").contains(&"00000000000000000000.log".to_string()));
    assert_eq!(errno(f.ino(first)), libc::ENOENT);
    // A handle opened before the deletion reads nothing more of it.
    assert_eq!(errno(f.fs.read(held, 0, 10)), libc::ENOENT);
    f.fs.release(held).unwrap();
    // An open stream keeps its size (and its name its meaning while open); its deleted head
    // is ESTALE, its tail still readable.
    let after = f.fs.getattr(f.ino("t/0/by-offset/0").unwrap(), Some(stream)).unwrap();
    assert_eq!(after.attr.size, size_before.attr.size);
    assert_eq!(errno(f.fs.read(stream, 0, 10)), libc::ESTALE);
    let tail = f.fs.read(stream, after.attr.size - 10, 10).unwrap().to_vec();
    assert_eq!(tail, b"record-19\n");
    f.fs.release(stream).unwrap();
    // Once closed, offset 0 is below the new log start: no such name.
    assert_eq!(errno(f.ino("t/0/by-offset/0")), libc::ENOENT);
}

#[test]
fn streams_opened_before_retention_overtook_their_render_index_are_stale_and_reopen_cleanly() {
    let f = rolling_fixture_keeping_one_byte();
    for i in 0..5 {
        f.append("t/0/append", format!("early-{i}\n").as_bytes()).unwrap();
    }
    // Sized at lookup: the render index of `.json` now ends in the current active segment.
    let ino = f.ino("t/0/by-offset/0.json").unwrap();
    let fh = f.fs.open(ino, READ).unwrap().fh;
    // Many segments later, without anyone looking at `.json`, retention deletes that segment.
    for i in 0..30 {
        f.append("t/0/append", format!("late-{i}\n").as_bytes()).unwrap();
    }
    assert!(f.log_dir.enforce_retention().unwrap() > 0);
    // The first request after the deletion is a read (no stat in between): it says ESTALE too.
    assert_eq!(errno(f.fs.read(fh, 0, 100)), libc::ESTALE);
    assert_eq!(errno(f.fs.getattr(ino, Some(fh))), libc::ESTALE);
    f.fs.release(fh).unwrap();
    // Reopened from the new log start, the stream is consistent again.
    let start = f.log_dir.partition("t", 0).unwrap().summary().unwrap().log_start_offset.0;
    let path = format!("t/0/by-offset/{start}.json");
    let json = f.read_all(&path);
    assert_eq!(f.size(&path), json.len() as u64);
    assert!(String::from_utf8(json).unwrap().ends_with("\"payload\":\"late-29\"}\n"));
}

#[test]
fn an_open_info_file_and_an_open_directory_are_one_snapshot_each() {
    let f = fixture();
    f.append("t/0/append", b"a\n").unwrap();
    let fh = f.fs.open(f.ino("t/0/info").unwrap(), READ).unwrap().fh;
    f.append("t/0/append", b"b\n").unwrap();
    let text = String::from_utf8(f.read_fh(fh).unwrap()).unwrap();
    assert!(text.contains("log_end_offset: 1\n"), "the snapshot taken at open: {text}");
    f.fs.release(fh).unwrap();
    let now = String::from_utf8(f.read_all("t/0/info")).unwrap();
    assert!(now.contains("log_end_offset: 2\n"), "{now}");
    // A listing read in several calls comes from the list taken at opendir; a rewind lists again.
    let fh = f.fs.opendir(ROOT_INO).unwrap().fh;
    let mut first = Vec::new();
    f.fs.readdir(ROOT_INO, fh, 0, &mut |e| {
        first.push(e.clone());
        true
    })
    .unwrap();
    f.fs.mkdir(ROOT_INO, OsStr::new("u")).unwrap();
    let mut rest = Vec::new();
    f.fs.readdir(ROOT_INO, fh, first[0].next_offset, &mut |e| {
        rest.push(e.name.clone());
        false
    })
    .unwrap();
    assert_eq!(rest, ["..", "t"]);
    let mut again = Vec::new();
    f.fs.readdir(ROOT_INO, fh, 0, &mut |e| {
        again.push(e.name.clone());
        false
    })
    .unwrap();
    assert_eq!(again, [".", "..", "t", "u"]);
    f.fs.releasedir(fh).unwrap();
}

/// SEMANTICS.md and its test index, `doc/SEMANTICS-TESTS.md`, agree: every tag `[T-...]` that
/// ends a promise in SEMANTICS.md has a section `## T-...` in the index listing at least one
/// test, every section of the index is a tag SEMANTICS.md uses, and every test the index names
/// exists, so a promise cannot lose its tests and a renamed or removed test must take its index
/// entry with it. A test is named `binary::module::name`, which is `fn name` in
/// `tests/binary/module.rs` (the module of the test binary `tests/binary/main.rs`; a name with
/// more parts resolves through the longest prefix that is a file), or
/// `crates/c/src/path.rs::tests::name` (or `src/path.rs::tests::name`), `fn name` in that file.
#[test]
fn semantics_md_tags_and_the_test_index_agree() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("SEMANTICS.md")).unwrap();
    let index = std::fs::read_to_string(root.join("doc/SEMANTICS-TESTS.md")).unwrap();

    // The tags SEMANTICS.md uses: `[T-` then lower-case letters, digits and `-`, then `]`.
    let mut tags = std::collections::BTreeSet::new();
    for (at, _) in doc.match_indices("[T-") {
        let rest = &doc[at + 1..];
        let Some(end) = rest.find(']') else { continue };
        let tag = &rest[..end];
        if tag.len() > 2
            && tag[2..].chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            tags.insert(tag.to_string());
        }
    }
    assert!(tags.len() > 50, "found only {} tags in SEMANTICS.md", tags.len());

    // The index: `## T-...` sections, each listing backticked test names.
    let mut sections: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let mut current: Option<String> = None;
    for line in index.lines() {
        if let Some(tag) = line.strip_prefix("## ") {
            current = Some(tag.trim().to_string());
            sections.entry(tag.trim().to_string()).or_default();
        } else if let Some(section) = &current {
            let names = line.split('`').skip(1).step_by(2).filter(|name| name.contains("::"));
            sections.entry(section.clone()).or_default().extend(names.map(str::to_string));
        }
    }
    let without_tests: Vec<&String> =
        tags.iter().filter(|tag| sections.get(*tag).is_none_or(Vec::is_empty)).collect();
    assert!(
        without_tests.is_empty(),
        "SEMANTICS.md tags without tests in doc/SEMANTICS-TESTS.md: {without_tests:?}"
    );
    let unused: Vec<&String> = sections.keys().filter(|tag| !tags.contains(*tag)).collect();
    assert!(
        unused.is_empty(),
        "doc/SEMANTICS-TESTS.md sections SEMANTICS.md does not use: {unused:?}"
    );

    let names: std::collections::BTreeSet<&String> = sections.values().flatten().collect();
    let missing: Vec<&&String> = names.iter().filter(|name| !test_exists(root, name)).collect();
    assert!(names.len() >= 400, "doc/SEMANTICS-TESTS.md names only {} tests", names.len());
    assert!(
        missing.is_empty(),
        "doc/SEMANTICS-TESTS.md names tests that do not exist: {missing:?}"
    );
}

/// Whether the test `name` (in the form [`semantics_md_tags_and_the_test_index_agree`] states)
/// is defined.
fn test_exists(root: &std::path::Path, name: &str) -> bool {
    let Some((file_part, rest)) = name.split_once("::") else { return false };
    let function = rest.rsplit("::").next().unwrap_or(rest).trim_end_matches("()");
    let file = if file_part.starts_with("src/") || file_part.starts_with("crates/") {
        root.join(file_part)
    } else {
        let parts: Vec<&str> = name.split("::").collect();
        (1..parts.len())
            .rev()
            .map(|n| root.join("tests").join(format!("{}.rs", parts[..n].join("/"))))
            .find(|path| path.is_file())
            .unwrap_or_default()
    };
    let source = std::fs::read_to_string(&file).unwrap_or_default();
    source.match_indices(&format!("fn {function}")).any(|(at, m)| {
        let next = source[at + m.len()..].chars().next();
        matches!(next, Some('(' | '<'))
    })
}

/// A fixture whose partitions may render only `budget` bytes of log per `stat` or `open`, with
/// `batches` appends of 20 lines each in `t/0`; returns the lines as `by-offset/0` reads them.
fn sized_fixture(budget: u64, batches: usize) -> (Fixture, Vec<u8>) {
    let f = fixture();
    f.log_dir.set_sizing_budget(budget);
    let mut all = Vec::new();
    for b in 0..batches {
        let lines: String = (0..20).map(|i| format!("record-{b}-{i}\n")).collect();
        f.append("t/0/append", lines.as_bytes()).unwrap();
        all.extend_from_slice(lines.as_bytes());
    }
    (f, all)
}

#[test]
fn a_stream_farther_than_the_sizing_budget_has_size_zero_and_reads_every_record() {
    let (f, all) = sized_fixture(1024, 100);
    for name in ["0", "0.json", "0.raw", "5..1990", "1000"] {
        assert_eq!(f.size(&format!("t/0/by-offset/{name}")), 0, "{name}");
    }
    // Reads do not depend on the size: every record, to the true end.
    assert_eq!(f.read_all("t/0/by-offset/0"), all);
    let middle: Vec<u8> =
        all.split_inclusive(|&b| b == b'\n').skip(1000).flatten().copied().collect();
    assert_eq!(f.read_all("t/0/by-offset/1000"), middle);
    let range: Vec<u8> =
        all.split_inclusive(|&b| b == b'\n').skip(5).take(1985).flatten().copied().collect();
    assert_eq!(f.read_all("t/0/by-offset/5..1990"), range);
    // Having been read to the end, they are exact.
    assert_eq!(f.size("t/0/by-offset/0"), all.len() as u64);
    assert_eq!(f.size("t/0/by-offset/5..1990"), range.len() as u64);
    // A stream whose end is within the budget is exact at once.
    assert_eq!(
        f.size("t/0/by-offset/-3"),
        b"record-99-17\nrecord-99-18\nrecord-99-19\n".len() as u64
    );
}

#[test]
fn repeated_stats_of_a_stream_converge_to_its_exact_size_never_a_partial_one() {
    // One batch per stat. The first stat sizes before it answers; once a sizing stopped at the
    // budget, a stat answers at once and continues the sizing by one budget in the background
    // (waited for here, so each stat is one step).
    let (f, all) = sized_fixture(1, 30);
    let mut sizes = Vec::new();
    loop {
        let size = f.size("t/0/by-offset/0.json");
        sizes.push(size);
        assert!(f.fs.wait_for_sizing_steps(std::time::Duration::from_secs(30)));
        if size > 0 || sizes.len() > 40 {
            break;
        }
    }
    assert!(sizes.len() > 10 && sizes.len() <= 31, "{sizes:?}");
    assert_eq!(sizes.last().copied(), Some(f.read_all("t/0/by-offset/0.json").len() as u64));
    // The render index is shared by the streams of one format: another `.json` stream is exact
    // at once, while the value streams, whose index has not been sized, are not yet.
    assert!(f.size("t/0/by-offset/1.json") > 0);
    assert_eq!(f.size("t/0/by-offset/1"), 0);
    assert_eq!(f.read_all("t/0/by-offset/0"), all);
}

#[test]
fn a_stream_read_to_its_end_keeps_an_exact_size_as_the_log_grows_past_the_budget() {
    let (f, all) = sized_fixture(1024, 100);
    let ino = f.ino("t/0/by-offset/0").unwrap();
    let fh = f.fs.open(ino, READ).unwrap().fh;
    assert_eq!(f.fs.getattr(ino, Some(fh)).unwrap().attr.size, 0);
    assert_eq!(f.read_fh(fh).unwrap(), all);
    // What `tail -f` sees after reading to the end: the exact size, then the exact growth,
    // however much is appended (here far more than the budget): never 0 again.
    assert_eq!(f.fs.getattr(ino, Some(fh)).unwrap().attr.size, all.len() as u64);
    let mut grown = all.clone();
    for b in 0..100 {
        let lines: String = (0..20).map(|i| format!("later-{b}-{i}\n")).collect();
        f.append("t/0/append", lines.as_bytes()).unwrap();
        grown.extend_from_slice(lines.as_bytes());
    }
    assert_eq!(f.fs.getattr(ino, Some(fh)).unwrap().attr.size, grown.len() as u64);
    assert_eq!(f.fs.read(fh, all.len() as u64, 1 << 20).unwrap(), grown[all.len()..]);
    f.fs.release(fh).unwrap();
}

#[test]
fn a_request_sizes_at_most_one_mib_itself_and_the_background_the_rest_of_the_budget() {
    // About 2 MiB of log in appends of 100 KB, with the default budget (256M): more than one
    // request sizes itself.
    let f = fixture();
    let line = format!("{:0>99}\n", 7);
    let chunk: String = std::iter::repeat_n(line.as_str(), 1_000).collect();
    for _ in 0..20 {
        f.append("t/0/append", chunk.as_bytes()).unwrap();
    }
    let total = 20 * chunk.len() as u64;
    // Not yet known at the first stat, although the budget covers the stream: the request
    // sized 1 MiB of log and left the rest to the background. The first stat is the lookup's
    // (what the kernel caches for a new name): the deferred step it queues starts at once on a
    // local source, so a `getattr` right after it may already be exact.
    let dir = f.ino("t/0/by-offset").unwrap();
    assert_eq!(f.fs.lookup(dir, OsStr::new("0")).unwrap().attr.size, 0);
    assert!(f.fs.wait_for_sizing_steps(std::time::Duration::from_secs(60)));
    assert_eq!(f.size("t/0/by-offset/0"), total);
    // A stream within 1 MiB of its end is exact at once (on a sizing of its own in JSON).
    assert_eq!(f.size("t/0/by-offset/15000"), total - 15_000 * 100);
    assert!(f.size("t/0/by-offset/15000.json") > 0);
}
