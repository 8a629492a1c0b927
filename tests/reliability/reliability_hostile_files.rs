//! Files a broker would not write, without a kernel: every kind of non-regular file (FIFO,
//! socket, directory, character device, symlink to `/dev/zero`, dangling symlink, symlink
//! loop) in place of every kind of file topicfs reads in a data dir, on read-only and writable
//! opens. Each case runs on its own thread with a deadline, so a regression (a blocking
//! `open(2)`) fails the test instead of hanging it. Every touch of the partition a shell would
//! make (`ls`, `info`, `by-offset/0`, `tail -n`, `by-time`, `segments/*`, `check`) must end
//! and answer;
//! the other partition is served in full; `check` names what was refused.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use topicfs::Error;
use topicfs::format::{NO_TIMESTAMP, NewRecord};
use topicfs::fs::TopicFs;
use topicfs::fs::attr::{DirEntry, OpenRequest};

use crate::common::fs_fixture::{FsFixture, ino, read_to_end};
use topicfs::storage::{LogConfig, LogDirs, SegmentMode};

const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };
const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: false };

/// A case that takes longer than this is taken to hang.
const DEADLINE: Duration = Duration::from_secs(60);

/// What is put in place of a file.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Hostile {
    Fifo,
    Socket,
    Directory,
    /// A character device made with mknod (1, 5: what `/dev/zero` is).
    CharDevice,
    /// A symlink to `/dev/zero`.
    LinkToDevZero,
    Dangling,
    Loop,
    /// A symlink to the real (regular) file: followed, so not hostile at all.
    LinkToRegular,
}

const HOSTILE: [Hostile; 8] = [
    Hostile::Fifo,
    Hostile::Socket,
    Hostile::Directory,
    Hostile::CharDevice,
    Hostile::LinkToDevZero,
    Hostile::Dangling,
    Hostile::Loop,
    Hostile::LinkToRegular,
];

impl Hostile {
    /// How `check` and the log name it (`None`: not refused).
    fn named(self) -> Option<&'static str> {
        match self {
            Hostile::Fifo => Some("FIFO"),
            Hostile::Socket => Some("socket"),
            Hostile::Directory => Some("directory"),
            Hostile::CharDevice | Hostile::LinkToDevZero => Some("character device"),
            Hostile::Dangling => Some("dangling symlink"),
            Hostile::Loop => Some("symlink loop"),
            Hostile::LinkToRegular => None,
        }
    }

    /// Puts this in place of `path` (moving a file that is there to `keep`, which a
    /// `LinkToRegular` points at).
    fn plant(self, path: &Path, keep: &Path) {
        if path.exists() {
            std::fs::rename(path, keep).unwrap();
        } else {
            std::fs::write(keep, b"").unwrap();
        }
        match self {
            Hostile::Fifo => {
                rustix::fs::mkfifoat(rustix::fs::CWD, path, rustix::fs::Mode::from_raw_mode(0o644))
                    .unwrap()
            }
            Hostile::Socket => drop(std::os::unix::net::UnixListener::bind(path).unwrap()),
            Hostile::Directory => std::fs::create_dir(path).unwrap(),
            Hostile::CharDevice => rustix::fs::mknodat(
                rustix::fs::CWD,
                path,
                rustix::fs::FileType::CharacterDevice,
                rustix::fs::Mode::from_raw_mode(0o644),
                rustix::fs::makedev(1, 5),
            )
            .unwrap(),
            Hostile::LinkToDevZero => symlink("/dev/zero", path).unwrap(),
            Hostile::Dangling => symlink(path.with_extension("nowhere"), path).unwrap(),
            Hostile::Loop => symlink(path, path).unwrap(),
            Hostile::LinkToRegular => symlink(keep, path).unwrap(),
        }
    }
}

/// Files of the template data dir: partitions `good-0` and `bad-0`, each with a sealed
/// segment at 0 (values 0..3) and an active one at 3 (values 3..6).
const SEALED: &str = "00000000000000000000";
const ACTIVE: &str = "00000000000000000003";

fn values(range: std::ops::Range<usize>) -> String {
    range.map(|i| format!("value-{i}\n")).collect()
}

fn template(dir: &Path) {
    let log_dir =
        LogDirs::open_dir(dir, LogConfig::default(), Default::default(), SegmentMode::Writable)
            .unwrap();
    for topic in ["good", "bad"] {
        log_dir.create_topic(topic, 1).unwrap();
        let log = log_dir.log(topic, 0).unwrap();
        for i in 0..6 {
            if i == 3 {
                log.force_roll().unwrap();
            }
            let record = NewRecord {
                timestamp: NO_TIMESTAMP,
                key: None,
                value: Some(format!("value-{i}").into_bytes()),
                headers: vec![],
            };
            log.append(&[record]).unwrap();
        }
    }
    log_dir.shutdown().unwrap();
}

/// Where a hostile file goes (relative to the data dir), and what the bad partition serves.
struct Target {
    path: String,
    /// Whether it is a segment file of `bad-0` (listed as refused by its `check`).
    segment_file: bool,
    /// Values `bad/0/by-offset/0` shows when the file is refused.
    shown: std::ops::Range<usize>,
}

fn targets() -> Vec<Target> {
    let seg =
        |name: String, shown| Target { path: format!("bad-0/{name}"), segment_file: true, shown };
    let other = |path: &str| Target { path: path.to_string(), segment_file: false, shown: 0..6 };
    vec![
        seg(format!("{SEALED}.log"), 3..6),
        seg(format!("{ACTIVE}.log"), 0..3),
        seg(format!("{SEALED}.index"), 0..6),
        seg(format!("{ACTIVE}.index"), 0..6),
        seg(format!("{SEALED}.timeindex"), 0..6),
        seg(format!("{ACTIVE}.timeindex"), 0..6),
        seg(format!("{SEALED}.txnindex"), 0..6),
        seg(format!("{SEALED}.log.swap"), 0..6),
        seg(format!("{SEALED}.index.swap"), 0..6),
        seg(format!("{SEALED}.log.cleaned"), 0..6),
        seg(format!("{ACTIVE}.log.deleted"), 0..6),
        other("bad-0/partition.metadata"),
        other("bad-0/leader-epoch-checkpoint"),
        other("recovery-point-offset-checkpoint"),
        other("log-start-offset-checkpoint"),
        other("meta.properties"),
        other(topicfs::settings::topic_config::TOPIC_CONFIG_FILE),
        other(".lock"),
    ]
}

fn read_all(fs: &TopicFs, path: &str) -> Result<Vec<u8>, Error> {
    let fh = fs.open(ino(fs, path)?, READ)?.fh;
    let out = read_to_end(fs, fh, 64 * 1024)?;
    fs.release(fh)?;
    Ok(out)
}

fn names(fs: &TopicFs, path: &str) -> Result<Vec<String>, Error> {
    let ino = ino(fs, path)?;
    let fh = fs.opendir(ino)?.fh;
    let mut names = Vec::new();
    fs.readdir(ino, fh, 0, &mut |e: &DirEntry| {
        names.push(e.name.clone());
        false
    })?;
    fs.releasedir(fh)?;
    Ok(names.into_iter().filter(|n| n != "." && n != "..").collect())
}

fn append(fs: &TopicFs, path: &str, data: &[u8]) -> Result<(), Error> {
    let fh = fs.open(ino(fs, path)?, WRITE)?.fh;
    let written = fs.write(fh, data, None).and_then(|_| fs.flush(fh, None));
    fs.release(fh)?;
    written
}

thread_local! {
    /// Set by the live test: files change between the reads of one touch.
    static LIVE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Every touch of `topic/0` a shell would make; returns (`by-offset/<start>`, `check`).
/// `by-offset/0` is read too: below the log start offset it does not exist (ENOENT).
fn touch_partition(fs: &TopicFs, topic: &str, start: usize) -> Result<(String, String), Error> {
    let p = format!("{topic}/0");
    names(fs, &p)?;
    read_all(fs, &format!("{p}/info"))?;
    match read_all(fs, &format!("{p}/by-offset/0")) {
        Err(e) if start > 0 && e.errno() == libc::ENOENT => {}
        other => drop(other?),
    }
    let all = String::from_utf8(read_all(fs, &format!("{p}/by-offset/{start}"))?).unwrap();
    let tail = String::from_utf8(read_all(fs, &format!("{p}/by-offset/-2"))?).unwrap();
    assert!(all.ends_with(&tail), "{p}: tail {tail:?} of {all:?}");
    // Every record was written moments ago: a day back is the log start (the time index).
    // (Checked where the files stand still: a live test may reload between the two reads.)
    let by_time = String::from_utf8(read_all(fs, &format!("{p}/by-time/-1d"))?).unwrap();
    if !LIVE.with(|l| l.get()) {
        assert_eq!(by_time, all, "{p}: by-time/-1d");
    }
    for name in names(fs, &format!("{p}/segments"))? {
        match read_all(fs, &format!("{p}/segments/{name}")) {
            // Live: a segment listed a moment ago may have been refused since (its file was
            // replaced between the listing and this read), as `ls` then `cat` would see.
            Err(e) if LIVE.with(|l| l.get()) && e.errno() == libc::ENOENT => {}
            other => drop(other?),
        }
    }
    let check = String::from_utf8(read_all(fs, &format!("{p}/check"))?).unwrap();
    Ok((all, check))
}

/// One case, on a copy of the template; panics with what went wrong.
fn run_case(template: &Path, target: &Target, hostile: Hostile, mode: SegmentMode) {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    copy_tree(template, &data);
    let path = data.join(&target.path);
    if hostile == Hostile::LinkToRegular && !path.exists() {
        // Nothing to link to: a regular file of that name is another test's business.
        return;
    }
    hostile.plant(&path, &tmp.path().join("kept"));
    let case = format!("{hostile:?} as {} ({mode:?})", target.path);

    let opened = LogDirs::open_dir(&data, LogConfig::default(), Default::default(), mode);
    let writable = mode == SegmentMode::Writable;
    let log_dir = match opened {
        Ok(d) => Arc::new(d),
        // A writable open takes over meta.properties, .lock and the checkpoints: it refuses
        // rather than lock, write or rename over something that is not a regular file.
        Err(e) if writable && hostile.named().is_some() && !target.path.starts_with("bad-0/") => {
            assert!(matches!(e, Error::WrongFileType { .. }), "{case}: {e}");
            assert_eq!(e.errno(), libc::EIO, "{case}");
            assert!(e.to_string().contains(&target.path), "{case}: {e}");
            return;
        }
        Err(e) => panic!("{case}: open failed: {e}"),
    };
    let fs = FsFixture::local(&log_dir).read_only(!writable).build();
    assert_eq!(names(&fs, "").unwrap(), ["bad", "good"], "{case}");

    let (good, _) = touch_partition(&fs, "good", 0).unwrap_or_else(|e| panic!("{case}: good: {e}"));
    assert_eq!(good, values(0..6), "{case}");
    let refused = hostile.named().filter(|_| target.segment_file);
    let shown = if refused.is_some() { target.shown.clone() } else { 0..6 };
    let (bad, check) =
        touch_partition(&fs, "bad", shown.start).unwrap_or_else(|e| panic!("{case}: bad: {e}"));
    assert_eq!(bad, values(shown), "{case}");
    if let Some(what) = refused {
        let name = target.path.trim_start_matches("bad-0/");
        let line = format!("bad-0/{name}: refused: a {what}, not a regular file");
        assert!(check.contains(&line), "{case}: {check}");
        assert!(!check.contains(" 0 problems"), "{case}: {check}");
        if writable {
            // The partition is served read-only; the other one still takes appends.
            let err = append(&fs, "bad/0/append", b"more\n").unwrap_err();
            assert_eq!(err.errno(), libc::EROFS, "{case}: {err}");
        }
    } else {
        assert!(!check.contains("refused"), "{case}: {check}");
    }
    if writable {
        append(&fs, "good/0/append", b"more\n").unwrap_or_else(|e| panic!("{case}: {e}"));
        fs.shutdown().unwrap_or_else(|e| panic!("{case}: shutdown: {e}"));
    }
    // What was planted is still there, untouched (leftovers of a writable open excepted:
    // `.cleaned` and `.deleted` names are Kafka's to remove).
    let leftover = target.path.contains(".cleaned") || target.path.contains(".deleted");
    if hostile.named().is_some() && !(writable && leftover) {
        assert!(std::fs::symlink_metadata(&path).is_ok(), "{case}: planted file gone");
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest: PathBuf = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// Runs every (target, hostile) case of `mode`, each on a thread with [`DEADLINE`].
fn every_case(mode: SegmentMode) {
    let template_dir = tempfile::tempdir().unwrap();
    template(template_dir.path());
    let template_dir = Arc::new(template_dir);
    let mut cases = 0;
    for (t, target) in targets().into_iter().enumerate() {
        for hostile in HOSTILE {
            let (tx, rx) = mpsc::channel();
            let template_dir = Arc::clone(&template_dir);
            std::thread::spawn(move || {
                let target = &targets()[t];
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_case(template_dir.path(), target, hostile, mode)
                }));
                let _ = tx.send(result.is_ok());
            });
            let name = format!("{hostile:?} as {} ({mode:?})", target.path);
            match rx.recv_timeout(DEADLINE) {
                Ok(true) => cases += 1,
                Ok(false) => panic!("{name}: failed (see the panic above)"),
                Err(_) => panic!("{name}: did not end within {DEADLINE:?} (blocked?)"),
            }
        }
    }
    assert_eq!(cases, targets().len() * HOSTILE.len());
}

#[test]
fn read_only_open_serves_around_every_kind_of_non_regular_file_in_every_place() {
    every_case(SegmentMode::ReadOnly);
}

#[test]
fn writable_open_serves_around_every_kind_of_non_regular_file_in_every_place() {
    every_case(SegmentMode::Writable);
}

/// Runs `f` on a thread; fails if it does not end within [`DEADLINE`].
fn with_deadline(name: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(result.is_ok());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(true) => {}
        Ok(false) => panic!("{name}: failed (see the panic above)"),
        Err(_) => panic!("{name}: did not end within {DEADLINE:?} (blocked?)"),
    }
}

fn fs_over(data: &Path, mode: SegmentMode) -> Result<TopicFs, Error> {
    let log_dir = LogDirs::open_dir(data, LogConfig::default(), Default::default(), mode)?;
    Ok(FsFixture::local(&Arc::new(log_dir)).read_only(mode == SegmentMode::ReadOnly).build())
}

#[test]
fn a_partition_directory_that_is_not_a_directory_is_refused_and_a_symlinked_one_followed() {
    let template_dir = tempfile::tempdir().unwrap();
    template(template_dir.path());
    let template_dir = Arc::new(template_dir);
    for mode in [SegmentMode::ReadOnly, SegmentMode::Writable] {
        for hostile in HOSTILE {
            let template_dir = Arc::clone(&template_dir);
            let name = format!("{hostile:?} as bad-0 ({mode:?})");
            with_deadline(&name.clone(), move || {
                let tmp = tempfile::tempdir().unwrap();
                let data = tmp.path().join("data");
                copy_tree(template_dir.path(), &data);
                hostile.plant(&data.join("bad-0"), &tmp.path().join("kept-bad-0"));
                let fs = fs_over(&data, mode).unwrap_or_else(|e| panic!("{name}: {e}"));
                let topics = names(&fs, "").unwrap();
                let (good, _) = touch_partition(&fs, "good", 0).unwrap();
                assert_eq!(good, values(0..6), "{name}");
                if hostile == Hostile::Directory {
                    // An (empty) directory is a partition directory like any other.
                    assert_eq!(topics, ["bad", "good"], "{name}");
                    assert_eq!(touch_partition(&fs, "bad", 0).unwrap().0, "", "{name}");
                } else if hostile == Hostile::LinkToRegular {
                    // A symlink to a partition directory is followed.
                    assert_eq!(topics, ["bad", "good"], "{name}");
                    let (bad, check) = touch_partition(&fs, "bad", 0).unwrap();
                    assert_eq!(bad, values(0..6), "{name}");
                    assert!(check.contains(" 0 problems"), "{name}: {check}");
                } else {
                    assert_eq!(topics, ["good"], "{name}");
                    assert_eq!(ino(&fs, "bad").unwrap_err().errno(), libc::ENOENT, "{name}");
                }
                if mode == SegmentMode::Writable {
                    fs.shutdown().unwrap();
                }
            });
        }
    }
}

/// Polls `condition` (a read-only mount looks at the directory again at most every 200 ms).
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..200 {
        if condition() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what}: never happened");
}

#[test]
fn a_live_read_only_open_refuses_files_replaced_or_appearing_while_it_is_open() {
    with_deadline("live", || {
        LIVE.with(|l| l.set(true));
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        template(&data);
        let fs = fs_over(&data, SegmentMode::ReadOnly).unwrap();
        assert_eq!(touch_partition(&fs, "bad", 0).unwrap().0, values(0..6));

        // A segment appears as a FIFO (a broker would roll to a regular file).
        let part = data.join("bad-0");
        Hostile::Fifo.plant(&part.join("00000000000000000010.log"), &tmp.path().join("k1"));
        eventually("the new FIFO is listed as refused", || {
            touch_partition(&fs, "bad", 0).unwrap().1.contains("00000000000000000010.log: refused")
        });
        assert_eq!(touch_partition(&fs, "bad", 0).unwrap().0, values(0..6));

        // The active segment's .log is replaced by a FIFO: the partition shows the rest.
        Hostile::Fifo.plant(&part.join(format!("{ACTIVE}.log")), &tmp.path().join("k2"));
        eventually("the replaced .log is refused", || {
            let (values_shown, check) = touch_partition(&fs, "bad", 0).unwrap();
            values_shown == values(0..3)
                && check.contains(&format!("bad-0/{ACTIVE}.log: refused: a FIFO"))
        });

        // A partition appears as a FIFO, another as a symlink loop: never listed, and the
        // listing still ends.
        Hostile::Fifo.plant(&data.join("new-0"), &tmp.path().join("k3"));
        Hostile::Loop.plant(&data.join("loop-0"), &tmp.path().join("k4"));
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(names(&fs, "").unwrap(), ["bad", "good"]);
        assert_eq!(touch_partition(&fs, "good", 0).unwrap().0, values(0..6));
    });
}

/// The template in `tmp/data` with `bad-0`'s `<base>.log` replaced by a symlink to 360 bytes
/// of text (`tmp/notes.txt`) that frame no batch; returns both paths.
fn notes_as_log(tmp: &Path, base: &str) -> (PathBuf, PathBuf) {
    let data = tmp.join("data");
    template(&data);
    let text = tmp.join("notes.txt");
    std::fs::write(&text, "these are notes, not record batches\n".repeat(10)).unwrap();
    let log = data.join(format!("bad-0/{base}.log"));
    std::fs::remove_file(&log).unwrap();
    symlink(&text, &log).unwrap();
    (data, text)
}

#[test]
fn check_reports_an_active_log_whose_bytes_are_not_batches() {
    // Read-only: the text is hidden and reported. (A writable open would recover the segment
    // and truncate the file to its whole batches, as Kafka does with any `.log`.)
    let tmp = tempfile::tempdir().unwrap();
    let (data, text) = notes_as_log(tmp.path(), ACTIVE);
    for suffix in ["index", "timeindex"] {
        std::fs::remove_file(data.join(format!("bad-0/{ACTIVE}.{suffix}"))).unwrap();
    }
    let fs = fs_over(&data, SegmentMode::ReadOnly).unwrap();
    let (shown, check) = touch_partition(&fs, "bad", 0).unwrap();
    assert_eq!(shown, values(0..3));
    let line = format!("bad-0/{ACTIVE}.log position 0: 360 bytes that are not record batches");
    assert!(check.contains(&line), "{check}");
    assert!(check.contains(": 1 problems"), "{check}");
    assert_eq!(std::fs::read(&text).unwrap().len(), 360, "the text is left as it was");
}

#[test]
fn check_reports_a_sealed_log_whose_bytes_are_not_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, text) = notes_as_log(tmp.path(), SEALED);
    for mode in [SegmentMode::ReadOnly, SegmentMode::Writable] {
        if mode == SegmentMode::Writable {
            // A clean shutdown was recorded: a writable open trusts the sealed segment.
            assert!(data.join(".kafka_cleanshutdown").exists());
        }
        let fs = fs_over(&data, mode).unwrap();
        let check = String::from_utf8(read_all(&fs, "bad/0/check").unwrap()).unwrap();
        let line = format!("bad-0/{SEALED}.log position 0: 360 invalid bytes at the end");
        assert!(check.contains(&line), "{mode:?}: {check}");
        assert!(!check.contains(" 0 problems"), "{mode:?}: {check}");
        assert_eq!(read_all(&fs, "bad/0/by-offset/3").unwrap(), values(3..6).into_bytes());
        if mode == SegmentMode::Writable {
            fs.shutdown().unwrap();
        }
    }
    assert_eq!(std::fs::read(&text).unwrap().len(), 360, "the text is left as it was");
}
