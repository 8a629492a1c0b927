//! Sealed segment files are read from disk by the kernel (FUSE passthrough, or the page cache
//! where passthrough is unavailable); the active segment's files always go through the daemon,
//! which hides its index's preallocated zero tail and shows only whole batches.

use crate::common;

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use common::fs_fixture::{self, FsFixture};
use common::{Dirs, MountGuard, wait_until};
use topicfs::format::{NO_TIMESTAMP, NewRecord, Offset};
use topicfs::fs::TopicFs;
use topicfs::fs::attr::OpenRequest;
use topicfs::source::{SegmentFileKind, SegmentFiles};
use topicfs::storage::{Log, LogConfig, LogDirs, SegmentMode};

const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };

/// Appends `batches` batches of 10 records of 250 bytes (about 2.6 KB a batch, so the offset
/// and time indexes get an entry every other batch).
fn append_batches(log: &Log, batches: usize) {
    for b in 0..batches {
        let records: Vec<NewRecord> = (0..10)
            .map(|i| NewRecord {
                timestamp: NO_TIMESTAMP,
                key: None,
                value: Some(format!("{b:06}-{i:02}-{}", "v".repeat(240)).into_bytes()),
                headers: vec![],
            })
            .collect();
        log.append(&records).unwrap();
    }
}

fn segment_name(base: Offset, kind: SegmentFileKind) -> String {
    format!("{:020}{}", base.0, kind.suffix())
}

/// Bytes the serving process has read with `read(2)`-family calls so far (`rchar`).
fn daemon_rchar(pid: u32) -> u64 {
    let io = fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    let line = io.lines().find_map(|l| l.strip_prefix("rchar: ")).unwrap();
    line.trim().parse().unwrap()
}

/// Whether the mount can use FUSE passthrough here: Linux 6.9 or later, `CAP_SYS_ADMIN` (root),
/// and a data dir on a filesystem that is not itself stacked (overlayfs, FUSE).
fn passthrough_expected(data: &Path) -> bool {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut numbers = release.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse().ok());
    let version: (u32, u32) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    // The type of the filesystem holding `data`: the mount with the longest matching point.
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let fs_type = mountinfo
        .lines()
        .filter_map(|line| {
            let point = line.split(' ').nth(4)?;
            let kind = line.split(" - ").nth(1)?.split(' ').next()?;
            data.starts_with(point).then_some((point.len(), kind))
        })
        .max_by_key(|&(len, _)| len)
        .map(|(_, kind)| kind.to_string())
        .unwrap_or_default();
    let stacked = fs_type == "overlay" || fs_type.starts_with("fuse");
    version >= (6, 9) && nix::unistd::geteuid().is_root() && !stacked
}

/// Reads a file through a handle from position 0 to its end.
fn read_from_start(file: &mut fs::File) -> Vec<u8> {
    file.seek(SeekFrom::Start(0)).unwrap();
    let mut out = Vec::new();
    file.read_to_end(&mut out).unwrap();
    out
}

#[test]
fn sealed_segment_files_reach_the_daemon_at_most_once_and_the_active_index_hides_its_zero_tail() {
    let dirs = Dirs::new();
    let passthrough = passthrough_expected(&dirs.data());
    sealed_and_active_files_of_a_live_writer(dirs, &[], passthrough);
}

#[test]
fn without_passthrough_sealed_segment_files_are_cached_and_the_active_ones_are_not() {
    sealed_and_active_files_of_a_live_writer(Dirs::new(), &["-o", "no_passthrough"], false);
}

/// A read-only mount (plus `args`) of a dir a writer appends to: sealed files are the bytes on
/// disk and the daemon reads them at most once (never, when `passthrough`); the active index
/// read through a held handle shows exactly the entries written so far.
fn sealed_and_active_files_of_a_live_writer(dirs: Dirs, args: &[&str], passthrough: bool) {
    let writer = crate::common::writable_log_dirs(&dirs.data(), LogConfig::default());
    writer.create_topic("live", 1).unwrap();
    let log = writer.log("live", 0).unwrap();
    append_batches(&log, 500);
    log.force_roll().unwrap();
    let active_base = log.log_end_offset();
    append_batches(&log, 8);
    let data_part = dirs.data().join("live-0");
    // No segment cache: background sizing would read the sealed segment in the daemon, which
    // is what this test counts.
    let mount =
        MountGuard::foreground_on(dirs, &[&["--read-only", "--cache-dir", "none"], args].concat());
    let segments = mount.path("live/0/segments");
    let sealed = |kind| segments.join(segment_name(Offset(0), kind));
    let active = |kind| segments.join(segment_name(active_base, kind));
    let on_disk = |base, kind| fs::read(data_part.join(segment_name(base, kind))).unwrap();

    // A sealed .log: exactly the bytes on disk, read twice, yet the daemon read it at most once
    // (passthrough: never; page cache: the first time). Direct I/O would read it twice.
    let sealed_log = on_disk(Offset(0), SegmentFileKind::Log);
    assert!(sealed_log.len() > 1 << 20, "{}", sealed_log.len());
    let before = daemon_rchar(mount.pid);
    assert_eq!(fs::read(sealed(SegmentFileKind::Log)).unwrap(), sealed_log);
    let after_first = daemon_rchar(mount.pid);
    assert_eq!(fs::read(sealed(SegmentFileKind::Log)).unwrap(), sealed_log);
    let after_second = daemon_rchar(mount.pid);
    let len = sealed_log.len() as u64;
    assert!(after_second - before < len * 3 / 2, "daemon read {}", after_second - before);
    if passthrough {
        assert!(after_first - before < len / 2, "daemon read {}", after_first - before);
    }
    // Read by the kernel from disk, it suggests the disk files' I/O size, not the 1 MiB of the
    // files the daemon serves (which would only make `cat` allocate a buffer that large).
    assert_eq!(fs::metadata(sealed(SegmentFileKind::Log)).unwrap().blksize(), 4096);
    // The sealed indexes were trimmed at the roll: on disk and through the mount alike.
    for kind in [SegmentFileKind::Index, SegmentFileKind::TimeIndex] {
        let bytes = on_disk(Offset(0), kind);
        assert!(!bytes.is_empty());
        assert_eq!(fs::read(sealed(kind)).unwrap(), bytes, "{kind:?}");
    }

    // The active index through a handle held while the writer appends: each read shows the
    // entries written so far and ends there, never the preallocated zero tail on disk.
    let mut held = fs::File::open(active(SegmentFileKind::Index)).unwrap();
    let valid = |log: &Log| {
        let mut buf = vec![0; 1 << 20];
        let n = log.read_segment_file(active_base, SegmentFileKind::Index, 0, &mut buf).unwrap();
        buf.truncate(n);
        buf
    };
    let first = valid(&log);
    assert!(!first.is_empty());
    assert_eq!(read_from_start(&mut held), first);
    append_batches(&log, 20);
    let grown = valid(&log);
    assert!(grown.len() > first.len());
    wait_until("the mount to see the new index entries", || read_from_start(&mut held) == grown);
    let disk = on_disk(active_base, SegmentFileKind::Index);
    assert!(disk.len() > grown.len(), "no zero tail on disk: {}", disk.len());
    assert!(disk[grown.len()..].iter().all(|&b| b == 0));
    // The active .log follows the writer too.
    wait_until("the active .log to follow the writer", || {
        fs::read(active(SegmentFileKind::Log)).unwrap()
            == on_disk(active_base, SegmentFileKind::Log)
    });

    // After a roll the formerly active segment is sealed: its trimmed files, as on disk.
    log.force_roll().unwrap();
    let next_base = log.log_end_offset();
    wait_until("the new segment to appear", || {
        segments.join(segment_name(next_base, SegmentFileKind::Log)).exists()
    });
    for kind in [SegmentFileKind::Log, SegmentFileKind::Index, SegmentFileKind::TimeIndex] {
        assert_eq!(fs::read(active(kind)).unwrap(), on_disk(active_base, kind), "{kind:?}");
    }
    drop(held);
    drop(log);
    writer.shutdown().unwrap();
}

fn fs_over(log_dir: &Arc<LogDirs>) -> TopicFs {
    FsFixture::local(log_dir).read_only(true).build()
}

fn ino(fs: &TopicFs, path: &str) -> u64 {
    fs_fixture::ino(fs, path).unwrap()
}

#[test]
fn only_sealed_files_whose_disk_bytes_are_what_reads_show_name_a_backing_file() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log_dir = LogDirs::open_dir(
            dir.path(),
            LogConfig::default(),
            Default::default(),
            SegmentMode::Writable,
        )
        .unwrap();
        log_dir.create_topic("t", 1).unwrap();
        let log = log_dir.log("t", 0).unwrap();
        append_batches(&log, 10);
        log.force_roll().unwrap();
        append_batches(&log, 10);
        log_dir.shutdown().unwrap();
    }
    // A crash can leave a sealed index untrimmed: give the sealed .index a zero tail.
    let index = dir.path().join("t-0").join(segment_name(Offset(0), SegmentFileKind::Index));
    let trimmed = fs::read(&index).unwrap();
    fs::OpenOptions::new().append(true).open(&index).unwrap().write_all(&[0; 64]).unwrap();

    let log_dir = Arc::new(
        LogDirs::open_dir(
            dir.path(),
            LogConfig::default(),
            Default::default(),
            SegmentMode::ReadOnly,
        )
        .unwrap(),
    );
    let fs = fs_over(&log_dir);
    let log = log_dir.log("t", 0).unwrap();
    let active_base = log.segments().unwrap().last().unwrap().base_offset;
    assert!(active_base > Offset(0));
    let open = |base, kind| {
        let path = format!("t/0/segments/{}", segment_name(base, kind));
        fs.open(ino(&fs, &path), READ).unwrap()
    };

    // The sealed .log and .timeindex: cached, backed by the very file on disk.
    for kind in [SegmentFileKind::Log, SegmentFileKind::TimeIndex] {
        let opened = open(Offset(0), kind);
        assert!(!opened.direct_io && opened.keep_cache && opened.no_flush, "{kind:?}");
        let mut backing = opened.backing.expect("a sealed file names its backing file");
        let mut bytes = Vec::new();
        backing.read_to_end(&mut bytes).unwrap();
        let disk = fs::read(dir.path().join("t-0").join(segment_name(Offset(0), kind))).unwrap();
        assert_eq!(bytes, disk, "{kind:?}");
        fs.release(opened.fh).unwrap();
    }
    // The sealed .index with a zero tail: read through the daemon, which hides the tail.
    let opened = open(Offset(0), SegmentFileKind::Index);
    assert!(opened.backing.is_none() && opened.direct_io);
    assert_eq!(fs.read(opened.fh, 0, 1 << 20).unwrap(), trimmed);
    fs.release(opened.fh).unwrap();
    // The active segment's files: never a backing file, never cached.
    for kind in [SegmentFileKind::Log, SegmentFileKind::Index, SegmentFileKind::TimeIndex] {
        let opened = open(active_base, kind);
        assert!(opened.backing.is_none() && opened.direct_io && !opened.keep_cache, "{kind:?}");
        assert!(opened.no_flush, "a segment file has nothing to flush at close");
        fs.release(opened.fh).unwrap();
        assert!(log.sealed_segment_file(active_base, kind).unwrap().is_none());
    }
}
