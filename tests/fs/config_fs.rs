//! `<topic>/config` without a kernel: reading every setting with its source, changing the
//! overrides by lines (all or nothing per write), the round trip of what reading shows, and the
//! refusals (EINVAL, EROFS).

use std::sync::Arc;

use crate::common::fs_fixture::{self, FsFixture};
use topicfs::Error;
use topicfs::fs::TopicFs;
use topicfs::fs::attr::OpenRequest;
use topicfs::settings::topic_config::TOPIC_CONFIG_FILE;
use topicfs::storage::{LogConfig, LogDirs, SegmentMode};

const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: false };
const WRITE_TRUNCATE: OpenRequest = OpenRequest { read: false, write: true, truncate: true };

struct Fixture {
    fs: TopicFs,
    log_dir: Arc<LogDirs>,
    dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut mount = LogConfig::default();
    mount.set("segment.bytes", "1048576").unwrap();
    let log_dir = crate::common::writable_log_dirs(dir.path(), mount);
    log_dir.create_topic("t", 1).unwrap();
    let fs = FsFixture::local(&log_dir).build();
    Fixture { fs, log_dir, dir }
}

impl Fixture {
    fn text(&self) -> String {
        String::from_utf8(fs_fixture::read_path(&self.fs, "t/config", 5)).unwrap()
    }

    fn line(&self, name: &str) -> String {
        let text = self.text();
        text.lines().find(|l| l.starts_with(&format!("{name}="))).unwrap().to_string()
    }

    /// One open, these writes, close; the first error.
    fn write(&self, request: OpenRequest, writes: &[&str]) -> Result<(), Error> {
        let fh = self.fs.open(fs_fixture::ino(&self.fs, "t/config")?, request)?.fh;
        let mut result = Ok(());
        for data in writes {
            if let Err(e) = self.fs.write(fh, data.as_bytes(), None) {
                result = result.and(Err(e));
            }
        }
        let flushed = self.fs.flush(fh, None);
        self.fs.release(fh)?;
        result.and(flushed)
    }
}

#[test]
fn config_lists_every_setting_with_its_source_and_its_exact_size() {
    let f = fixture();
    let text = f.text();
    let names: Vec<&str> = text.lines().map(|l| l.split('=').next().unwrap()).collect();
    assert_eq!(names, topicfs::settings::config::NAMES);
    assert_eq!(f.line("retention.ms"), "retention.ms=604800000 # kafka-default");
    assert_eq!(f.line("segment.bytes"), "segment.bytes=1048576 # mount-default");
    assert_eq!(f.line("cleanup.policy"), "cleanup.policy=delete # kafka-default");
    let ino = fs_fixture::ino(&f.fs, "t/config").unwrap();
    assert_eq!(f.fs.getattr(ino, None).unwrap().attr.size, text.len() as u64);
    assert!(fs_fixture::names(&f.fs, "t").contains(&"config".to_string()));
}

#[test]
fn written_lines_set_and_remove_overrides_and_take_effect_at_once() {
    let f = fixture();
    f.write(WRITE, &["cleanup.policy=compact\nretention.ms=1000\n"]).unwrap();
    assert_eq!(f.line("cleanup.policy"), "cleanup.policy=compact # override");
    assert_eq!(f.line("retention.ms"), "retention.ms=1000 # override");
    assert_eq!(f.log_dir.log("t", 0).unwrap().config().retention_ms, Some(1000));
    // `name=` removes the override; a partial last line is applied at close.
    f.write(WRITE, &["retention.ms", "=\n", "segment.ms=99"]).unwrap();
    assert_eq!(f.line("retention.ms"), "retention.ms=604800000 # kafka-default");
    assert_eq!(f.line("segment.ms"), "segment.ms=99 # override");
    let kept = std::fs::read_to_string(f.dir.path().join(TOPIC_CONFIG_FILE)).unwrap();
    assert!(kept.lines().any(|l| l == "t cleanup.policy=compact segment.ms=99"), "{kept}");
}

#[test]
fn an_invalid_line_fails_the_write_with_einval_and_changes_nothing() {
    let f = fixture();
    f.write(WRITE, &["retention.ms=1000\n"]).unwrap();
    let before = f.text();
    for bad in [
        "segment.ms=5\nretention.ms=abc\n",
        "segment.ms=5\nno.such.setting=1\n",
        "segment.ms=5\njust words\n",
        "min.cleanable.dirty.ratio=2\n",
        "min.compaction.lag.ms=10\nmax.compaction.lag.ms=5\n",
    ] {
        let e = f.write(WRITE, &[bad]).unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL, "{bad:?}: {e}");
        assert_eq!(f.text(), before, "{bad:?} changed something");
    }
    let e = f.write(WRITE, &["retention.ms=-5\n"]).unwrap_err().to_string();
    assert!(e.contains("retention.ms") && e.contains("-1 (no limit) or >= 0"), "{e}");
}

#[test]
fn what_config_shows_written_back_changes_nothing() {
    let f = fixture();
    f.write(WRITE, &["retention.ms=1000\ncleanup.policy=compact,delete\n"]).unwrap();
    let before = f.text();
    // As `cat config > saved; cat saved > config` does it, in pieces.
    let (a, b) = before.split_at(before.len() / 2);
    f.write(WRITE_TRUNCATE, &[a, b]).unwrap();
    assert_eq!(f.text(), before);
    // A line of that form with another value (an editor's edit that kept the comment, a copy
    // saved before a change) only confirms: refused, naming what the topic has and how to set
    // it; the same edit without the comment sets it.
    let e = f.write(WRITE, &["segment.ms=604800001 # kafka-default\n"]).unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
    assert!(e.to_string().contains("(segment.ms=604800000 # kafka-default)"), "{e}");
    assert_eq!(f.line("segment.ms"), "segment.ms=604800000 # kafka-default");
    f.write(WRITE, &["segment.ms=604800001\n"]).unwrap();
    assert_eq!(f.line("segment.ms"), "segment.ms=604800001 # override");
}

#[test]
fn a_read_only_mount_shows_config_and_refuses_writes_with_erofs() {
    let f = fixture();
    f.write(WRITE, &["retention.ms=1000\n"]).unwrap();
    let fs = FsFixture::local(&f.log_dir).read_only(true).build();
    let ino = fs_fixture::ino(&fs, "t/config").unwrap();
    let text = String::from_utf8(fs_fixture::read_path(&fs, "t/config", 64)).unwrap();
    assert!(text.contains("retention.ms=1000 # override\n"), "{text}");
    assert_eq!(fs.open(ino, WRITE).unwrap_err().errno(), libc::EROFS);
    assert_eq!(fs.getattr(ino, None).unwrap().attr.perm & 0o222, 0);
}

/// The longest line `append` takes follows the topic's `max.message.bytes` as `config` sets it
/// (at the next open of `append`), not only the mount's: a 1,500,000-byte line is refused with
/// `EFBIG` under the default and appended whole once the override allows it.
#[test]
fn a_max_message_bytes_override_sets_the_longest_line_append_takes() {
    let f = fixture();
    let line = format!("{}\n", "x".repeat(1_500_000));
    let append = |text: &str| -> Result<(), Error> {
        let fh = f.fs.open(fs_fixture::ino(&f.fs, "t/0/append")?, WRITE)?.fh;
        let mut result = Ok(());
        // In FUSE-sized requests, as the kernel sends them.
        for chunk in text.as_bytes().chunks(1 << 20) {
            if let Err(e) = f.fs.write(fh, chunk, None) {
                result = result.and(Err(e));
                break;
            }
        }
        let flushed = f.fs.flush(fh, None);
        f.fs.release(fh)?;
        result.and(flushed)
    };
    let refused = append(&line).unwrap_err();
    assert_eq!(refused.errno(), libc::EFBIG, "{refused}");
    f.write(WRITE, &["max.message.bytes=2000000\nsegment.bytes=4000000\n"]).unwrap();
    append(&line).unwrap();
    let log = f.log_dir.log("t", 0).unwrap();
    assert_eq!(log.log_end_offset().0, 1, "one record of the whole line");
}

/// A fixture whose topic `t` has unknown settings: created, then its entry removed, as in a
/// copy of a broker's dir without its metadata.
fn unknown_fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut mount = LogConfig::default();
    mount.set("segment.bytes", "1048576").unwrap();
    let log_dir =
        LogDirs::open_dir(dir.path(), mount.clone(), Default::default(), SegmentMode::Writable)
            .unwrap();
    log_dir.create_topic("t", 1).unwrap();
    log_dir.shutdown().unwrap();
    drop(log_dir);
    std::fs::remove_file(dir.path().join(TOPIC_CONFIG_FILE)).unwrap();
    let log_dir = crate::common::writable_log_dirs(dir.path(), mount);
    assert!(!log_dir.topic_settings_known("t"));
    let fs = FsFixture::local(&log_dir).build();
    Fixture { fs, log_dir, dir }
}

/// Issue 44, items 1 and 2: on a topic whose settings are unknown, `config` says which settings
/// are not applied and how to make them known (its size still exact); what it shows written
/// back changes nothing and leaves them unknown; another setting is applied and leaves them
/// unknown; a commented line with another value is refused, and `cleanup.policy=` (removing an
/// override) states nothing; only a `cleanup.policy` line with a value, written without a
/// comment, makes them known.
#[test]
fn unknown_settings_are_shown_not_applied_and_only_a_written_policy_makes_them_known() {
    let f = unknown_fixture();
    let text = f.text();
    assert!(text.starts_with(topicfs::fs::config::UNKNOWN_HEADER), "{text}");
    assert!(text.lines().next().unwrap().contains("cleanup.policy=delete"), "{text}");
    for name in ["retention.ms", "cleanup.policy", "retention.bytes", "min.compaction.lag.ms"] {
        assert!(f.line(name).ends_with("; not applied: settings unknown"), "{}", f.line(name));
    }
    assert_eq!(
        f.line("retention.ms"),
        "retention.ms=604800000 # kafka-default; not applied: settings unknown"
    );
    assert_eq!(f.line("segment.bytes"), "segment.bytes=1048576 # mount-default");
    let ino = fs_fixture::ino(&f.fs, "t/config").unwrap();
    assert_eq!(f.fs.getattr(ino, None).unwrap().attr.size, text.len() as u64);
    // `cat config > saved; cat saved > config`, and an editor's whole-file write.
    f.write(WRITE_TRUNCATE, &[&text]).unwrap();
    let (a, b) = text.split_at(text.len() / 3);
    f.write(WRITE_TRUNCATE, &[a, b]).unwrap();
    assert_eq!(f.text(), text);
    assert!(!f.log_dir.topic_settings_known("t"));
    assert!(!f.dir.path().join(TOPIC_CONFIG_FILE).exists(), "nothing was stored");
    // Another setting applies at once; the settings stay unknown.
    f.write(WRITE, &["segment.bytes=2000000\n"]).unwrap();
    assert_eq!(f.log_dir.log("t", 0).unwrap().config().segment_bytes, 2_000_000);
    assert!(!f.log_dir.topic_settings_known("t"));
    // A line in the form reading shows with another value only confirms: refused, nothing set.
    let e = f
        .write(WRITE, &["cleanup.policy=compact # kafka-default; not applied: settings unknown\n"])
        .unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
    assert!(e.to_string().contains("without the comment"), "{e}");
    assert_eq!(
        f.line("cleanup.policy"),
        "cleanup.policy=delete # kafka-default; not applied: settings unknown"
    );
    // Removing a policy override that is not there states nothing either.
    f.write(WRITE, &["cleanup.policy=\n"]).unwrap();
    assert!(!f.log_dir.topic_settings_known("t"));
    f.write(WRITE, &["cleanup.policy=delete\n"]).unwrap();
    assert!(f.log_dir.topic_settings_known("t"));
    assert!(!f.text().starts_with('#'), "{}", f.text());
    assert_eq!(f.line("retention.ms"), "retention.ms=604800000 # kafka-default");
    assert_eq!(f.line("segment.bytes"), "segment.bytes=2000000 # override");
}

/// Issue 44, item 7: the lines of one open are one change. Nothing is applied before `close()`;
/// a refused line (here the second `write()`, as bash's printf writes each line) refuses every
/// later write and the close, and nothing of the open is applied; each write is checked with
/// what came before it (a conflict across writes is refused at the write that makes it); a
/// second `close()` (a duplicate descriptor) applies nothing twice.
#[test]
fn the_lines_written_between_open_and_close_are_one_change_applied_at_close() {
    let f = fixture();
    let before = f.text();
    let open = || f.fs.open(fs_fixture::ino(&f.fs, "t/config").unwrap(), WRITE).unwrap().fh;
    let fh = open();
    f.fs.write(fh, b"retention.ms=7100\n", None).unwrap();
    assert_eq!(f.text(), before, "nothing applied before close");
    let e = f.fs.write(fh, b"segment.bytes=abc\n", None).unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
    let e = e.to_string();
    assert!(
        e.contains("t/config line 2")
            && e.contains("segment.bytes")
            && e.contains("not an integer")
            && e.contains("nothing written to it since open is applied"),
        "{e}"
    );
    assert_eq!(f.fs.write(fh, b"segment.ms=5\n", None).unwrap_err().errno(), libc::EINVAL);
    assert_eq!(f.fs.flush(fh, None).unwrap_err().errno(), libc::EINVAL);
    f.fs.release(fh).unwrap();
    assert_eq!(f.text(), before, "nothing of the refused open applied");

    let e = f
        .write(WRITE, &["min.compaction.lag.ms=10\n", "max.compaction.lag.ms=5\n"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 2") && e.contains("max.compaction.lag.ms"), "{e}");
    assert_eq!(f.text(), before);
    // A setting named twice in one write: each value is judged.
    let e = f.write(WRITE, &["retention.ms=abc\nretention.ms=5\n"]).unwrap_err();
    assert!(e.to_string().contains("line 1"), "{e}");
    assert_eq!(f.text(), before);

    let fh = open();
    f.fs.write(fh, b"retention.ms=7100\n", None).unwrap();
    f.fs.write(fh, b"segment.bytes=2000000\nretention.ms=7200", None).unwrap();
    assert_eq!(f.text(), before);
    f.fs.flush(fh, None).unwrap();
    assert_eq!(f.line("retention.ms"), "retention.ms=7200 # override");
    assert_eq!(f.line("segment.bytes"), "segment.bytes=2000000 # override");
    f.write(WRITE, &["retention.ms=1\n"]).unwrap();
    f.fs.flush(fh, None).unwrap();
    f.fs.release(fh).unwrap();
    assert_eq!(f.line("retention.ms"), "retention.ms=1 # override", "applied once only");
}

/// Issue 44, item 8: an unfinished last line is judged at its write: refused there when no
/// continuation can make it valid (so `printf 'retention.ms=abc' > config` fails), taken when
/// one can.
#[test]
fn an_unfinished_line_no_continuation_can_make_valid_is_refused_at_its_write() {
    let f = fixture();
    let before = f.text();
    for (bad, what) in [
        ("retention.ms=abc", "-1 (no limit) or >= 0"),
        ("retention.ms=-2", "-1 (no limit) or >= 0"),
        ("message.timestamp.type=Log-", "CreateTime or LogAppendTime"),
        ("no.such.setting=1", "unknown topic setting"),
        ("just words", "expected name=value"),
        ("=5", "no setting name"),
    ] {
        let fh = f.fs.open(fs_fixture::ino(&f.fs, "t/config").unwrap(), WRITE).unwrap().fh;
        let e = f.fs.write(fh, bad.as_bytes(), None).unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL, "{bad}: {e}");
        assert!(e.to_string().contains(what) && e.to_string().contains("line 1"), "{bad}: {e}");
        assert_eq!(f.fs.flush(fh, None).unwrap_err().errno(), libc::EINVAL);
        f.fs.release(fh).unwrap();
        assert_eq!(f.text(), before, "{bad}");
    }
    // Starts of valid lines pass, in any pieces.
    f.write(WRITE, &["retention.ms=-", "1\nmessage.timestamp.type=Log", "AppendTime"]).unwrap();
    assert_eq!(f.line("retention.ms"), "retention.ms=-1 # override");
    assert_eq!(f.line("message.timestamp.type"), "message.timestamp.type=LogAppendTime # override");
    // A complete value then a comment: judged whole (a commented line only confirms).
    let e = f.write(WRITE, &["segment.ms=0 # x"]).unwrap_err();
    assert!(e.to_string().contains("is not what the topic has now"), "{e}");
}

/// Issue 44, item 9: a line past 4 KiB is refused at the write that passes it (a 16 MiB line
/// without newline takes 4 KiB, then EINVAL), quoting only its start; more than 1 MiB in one
/// open is refused at once too.
#[test]
fn a_line_past_4_kib_or_an_open_past_1_mib_is_refused_at_once() {
    let f = fixture();
    let before = f.text();
    let fh = f.fs.open(fs_fixture::ino(&f.fs, "t/config").unwrap(), WRITE).unwrap().fh;
    // A comment line: only its length can refuse it.
    let chunk = [b'#'; 1024];
    let mut accepted = 0;
    let e = loop {
        match f.fs.write(fh, &chunk, None) {
            Ok(n) => accepted += n as usize,
            Err(e) => break e,
        }
        assert!(accepted <= 16 << 20);
    };
    assert_eq!(accepted, topicfs::fs::config::MAX_LINE);
    assert_eq!(e.errno(), libc::EINVAL);
    let e = e.to_string();
    assert!(e.contains("longer than 4096 bytes") && e.len() < 400, "{e}");
    f.fs.flush(fh, None).unwrap_err();
    f.fs.release(fh).unwrap();
    // One 16 MiB write: refused whole.
    let fh = f.fs.open(fs_fixture::ino(&f.fs, "t/config").unwrap(), WRITE).unwrap().fh;
    let e = f.fs.write(fh, &vec![b'x'; 16 << 20], None).unwrap_err();
    assert!(e.to_string().len() < 400, "{e}");
    f.fs.release(fh).unwrap();
    // Short lines past 1 MiB since open.
    let fh = f.fs.open(fs_fixture::ino(&f.fs, "t/config").unwrap(), WRITE).unwrap().fh;
    let line = format!("#{}\n", "c".repeat(1022));
    let mut accepted = 0u64;
    let e = loop {
        match f.fs.write(fh, line.as_bytes(), None) {
            Ok(n) => accepted += u64::from(n),
            Err(e) => break e,
        }
    };
    assert_eq!(accepted, topicfs::fs::config::MAX_TEXT);
    assert!(e.to_string().contains("bytes written since open"), "{e}");
    f.fs.release(fh).unwrap();
    assert_eq!(f.text(), before);
}

/// What a probe found: a copy of `config` saved before the settings changed, written back
/// after, would have pinned the values it showed (Kafka's defaults included) as overrides, and
/// retention then deleted by them. Such lines only confirm: the write is refused, nothing of it
/// applied, and the settings stay as they are.
#[test]
fn a_saved_config_written_back_after_a_change_pins_nothing() {
    let f = unknown_fixture();
    let saved = f.text();
    f.write(WRITE, &["cleanup.policy=compact\n"]).unwrap();
    assert!(f.log_dir.topic_settings_known("t"));
    let now = f.text();
    let e = f.write(WRITE_TRUNCATE, &[&saved]).unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
    assert!(e.to_string().contains("cleanup.policy=compact # override"), "{e}");
    assert_eq!(f.text(), now, "nothing of the saved copy applied");
    assert_eq!(f.line("cleanup.policy"), "cleanup.policy=compact # override");
    assert_eq!(f.line("retention.ms"), "retention.ms=604800000 # kafka-default");
    // What it shows now, written back: nothing changes.
    f.write(WRITE_TRUNCATE, &[&now]).unwrap();
    assert_eq!(f.text(), now);
}
