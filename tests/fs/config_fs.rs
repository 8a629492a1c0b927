//! `<topic>/config` without a kernel: reading every setting with its source, changing the
//! overrides by lines (all or nothing per write), the round trip of what reading shows, and the
//! refusals (EINVAL, EROFS).

use std::sync::Arc;

use crate::common::fs_fixture::{self, FsFixture};
use topicfs::Error;
use topicfs::fs::TopicFs;
use topicfs::fs::attr::OpenRequest;
use topicfs::storage::topic_config::TOPIC_CONFIG_FILE;
use topicfs::storage::{LogConfig, LogDir};

const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: false };
const WRITE_TRUNCATE: OpenRequest = OpenRequest { read: false, write: true, truncate: true };

struct Fixture {
    fs: TopicFs,
    log_dir: Arc<LogDir>,
    dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut mount = LogConfig::default();
    mount.set("segment.bytes", "1048576").unwrap();
    let log_dir = Arc::new(LogDir::open(dir.path(), mount).unwrap());
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
    assert_eq!(names, topicfs::storage::config::NAMES);
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
    // An edited line of that form sets the value it names.
    f.write(WRITE, &["segment.ms=604800001 # kafka-default\n"]).unwrap();
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
