//! Rejected writes without a kernel: `TopicFs::write` driven the way FUSE drives it for one
//! `write()` (requests of at most `max_write` bytes, the first cut at the buffer's page offset,
//! the answer the bytes of the requests before the first that failed) and the way tools retry
//! a short count (`cat`, `dd`, stdio and Python's buffered writer write the rest again). Each
//! test checks that a line too long to be a record is refused with EFBIG, that nothing of it is
//! stored, and that the next line is stored normally.

use std::sync::Arc;

use crate::common::fs_fixture::{self, FsFixture};
use topicfs::Error;
use topicfs::fs::TopicFs;
use topicfs::fs::attr::OpenRequest;
use topicfs::storage::{LogConfig, LogDirs};

const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: false };
const MIB: usize = 1 << 20;

struct Fixture {
    fs: TopicFs,
    _log_dir: Arc<LogDirs>,
    _dir: tempfile::TempDir,
}

fn fixture_with(config: LogConfig) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = crate::common::writable_log_dirs(dir.path(), config.clone());
    log_dir.create_topic("t", 1).unwrap();
    let fs = FsFixture::local(&log_dir).max_line_bytes(config.max_message_bytes as usize).build();
    Fixture { fs, _log_dir: log_dir, _dir: dir }
}

/// The defaults: `max.message.bytes` 1,048,588.
fn fixture() -> Fixture {
    fixture_with(LogConfig::default())
}

fn small(max_message_bytes: u32) -> Fixture {
    fixture_with(LogConfig { max_message_bytes, ..LogConfig::default() })
}

fn efbig(result: Result<impl std::fmt::Debug, Error>) {
    match result {
        Err(e) => assert_eq!(e.errno(), libc::EFBIG, "{e}"),
        Ok(v) => panic!("expected EFBIG, got {v:?}"),
    }
}

impl Fixture {
    fn open(&self, path: &str) -> u64 {
        self.fs.open(fs_fixture::ino(&self.fs, path).unwrap(), WRITE).unwrap().fh
    }

    /// Closes `fh` as its writer does: flush, then release. Returns the flush's answer.
    fn close(&self, fh: u64) -> Result<(), Error> {
        let flushed = self.fs.flush(fh, Some(1));
        self.fs.release(fh).unwrap();
        flushed
    }

    /// One `write()` of `data` as the kernel sends it: requests of at most `max_write` bytes,
    /// the first `max_write - misalign` (the buffer's offset in its page), stopping at the
    /// first failure; the bytes of the requests before it, or the error when it was the first.
    fn syscall(
        &self,
        fh: u64,
        data: &[u8],
        max_write: usize,
        misalign: usize,
    ) -> Result<usize, Error> {
        let mut done = 0;
        let mut size = max_write - misalign;
        while done < data.len() {
            let end = (done + size).min(data.len());
            match self.fs.write(fh, &data[done..end], Some(1)) {
                Ok(n) => done += n as usize,
                Err(e) if done == 0 => return Err(e),
                Err(_) => return Ok(done),
            }
            size = max_write;
        }
        Ok(done)
    }

    /// `write()` until all of `data` is written or one fails (GNU `full_write`, stdio, Python's
    /// `BufferedWriter`): what `cat`, `dd`, `printf` and `sys.stdout.write` do. The rest is
    /// written from where the short count stopped, so its requests keep their alignment.
    fn write_all(
        &self,
        fh: u64,
        data: &[u8],
        max_write: usize,
        misalign: usize,
    ) -> Result<(), Error> {
        let mut done = 0;
        let mut offset = misalign;
        while done < data.len() {
            let n = self.syscall(fh, &data[done..], max_write, offset)?;
            offset = (offset + n) % 4096;
            done += n;
        }
        Ok(())
    }

    /// The values stored in `t/0`, one line each.
    fn stored(&self) -> Vec<u8> {
        fs_fixture::read_path(&self.fs, "t/0/by-offset/0", 7)
    }
}

fn line(len: usize, byte: u8) -> Vec<u8> {
    let mut l = vec![byte; len];
    l.push(b'\n');
    l
}

/// The request sizes of the kernels and buffers seen: 1 MiB (Linux's FUSE maximum) from an
/// aligned or a misaligned buffer (the 1,044,848-byte first request of the issue), 128 KiB
/// (older kernels) and one page.
const SPLITS: [(usize, usize); 4] = [(MIB, 0), (MIB, 3728), (128 * 1024, 100), (4096, 0)];

#[test]
fn a_line_too_long_for_a_record_fails_its_write_with_efbig_and_stores_nothing_whatever_the_request_size()
 {
    for (max_write, misalign) in SPLITS {
        let f = fixture();
        let fh = f.open("t/0/append");
        f.write_all(fh, b"before\n", max_write, misalign).unwrap();
        let mut data = line(3_000_000, b'z');
        data.extend_from_slice(b"same write\n");
        efbig(f.write_all(fh, &data, max_write, misalign));
        // The writer saw the error from a write(): close() has nothing more to report.
        f.close(fh).unwrap();
        let fh = f.open("t/0/append");
        f.write_all(fh, b"after\n", max_write, misalign).unwrap();
        f.close(fh).unwrap();
        assert_eq!(f.stored(), b"before\nafter\n", "requests of {max_write} - {misalign}");
    }
}

#[test]
fn a_single_write_of_a_too_long_line_is_short_or_refused_and_close_reports_it() {
    for (max_write, misalign) in SPLITS {
        let f = fixture();
        let fh = f.open("t/0/append");
        let data = line(3_000_000, b'z');
        // A C program's one write(): the kernel answers a short count (the requests before the
        // refused one), or EFBIG when the first request is refused.
        match f.syscall(fh, &data, max_write, misalign) {
            Ok(n) => assert!(n < data.len(), "all {n} bytes accepted"),
            Err(e) => assert_eq!(e.errno(), libc::EFBIG, "{e}"),
        }
        // Its close() reports the refusal (the short count alone may have gone unchecked).
        efbig(f.close(fh));
        assert_eq!(f.stored(), b"", "requests of {max_write} - {misalign}");
    }
}

#[test]
fn the_request_that_makes_the_line_too_long_fails_and_the_earlier_ones_appended_nothing() {
    let f = small(1000);
    let fh = f.open("t/0/append");
    f.fs.write(fh, b"ok\n", Some(1)).unwrap();
    assert_eq!(f.fs.write(fh, &[b'a'; 600], Some(1)).unwrap(), 600);
    assert_eq!(f.stored(), b"ok\n", "a line becomes a record only at its newline");
    let err = f.fs.write(fh, &[b'a'; 600], Some(1)).unwrap_err();
    assert_eq!(err.errno(), libc::EFBIG);
    assert_eq!(err.to_string(), "line of 1200 bytes exceeds max.message.bytes 1000");
    // The rest of the refused line, up to its newline, is refused too; the request holding
    // the newline as a whole.
    efbig(f.fs.write(fh, &[b'a'; 100], Some(1)));
    efbig(f.fs.write(fh, b"aaa\nnot stored\n", Some(1)));
    // The next line is a line like any other.
    f.fs.write(fh, b"next\n", Some(1)).unwrap();
    f.close(fh).unwrap();
    assert_eq!(f.stored(), b"ok\nnext\n");
}

#[test]
fn the_end_of_a_refused_line_written_again_after_a_short_count_is_refused_again() {
    let f = small(1000);
    let fh = f.open("t/0/append");
    // One write() of 1,500 bytes and a newline in requests of 900: the first is accepted, the
    // second refused with the line's end in it; the kernel answers 900.
    let data = line(1500, b'q');
    assert_eq!(f.syscall(fh, &data, 900, 0).unwrap(), 900);
    // The writer resumes at byte 900: the same bytes again, refused, not a line of their own.
    efbig(f.syscall(fh, &data[900..], 900, 0));
    efbig(f.syscall(fh, &data[900..], 900, 0));
    f.fs.write(fh, b"next\n", Some(1)).unwrap();
    f.close(fh).unwrap();
    assert_eq!(f.stored(), b"next\n");
}

#[test]
fn a_refusal_seen_only_as_a_short_count_fails_close_even_after_more_lines() {
    let f = small(1000);
    let fh = f.open("t/0/append");
    assert_eq!(f.syscall(fh, &line(1500, b'q'), 900, 0).unwrap(), 900);
    // A writer that ignores the short count writes on: its next line is stored ...
    f.fs.write(fh, b"next\n", Some(1)).unwrap();
    f.fs.write(fh, b"last, unterminated", Some(1)).unwrap();
    // ... and its close() fails: the 1,500-byte line was not. Its last partial line is stored
    // all the same, as at any close().
    efbig(f.close(fh));
    assert_eq!(f.stored(), b"next\nlast, unterminated\n");
}

#[test]
fn a_partial_line_written_by_a_request_over_the_limit_refuses_the_request_and_the_line() {
    let f = small(100);
    let fh = f.open("t/0/append");
    let mut data = b"complete\n".to_vec();
    data.extend(vec![b'r'; 150]);
    efbig(f.fs.write(fh, &data, Some(1)));
    efbig(f.fs.write(fh, b"rrr\n", Some(1)));
    f.fs.write(fh, b"next\n", Some(1)).unwrap();
    f.close(fh).unwrap();
    assert_eq!(f.stored(), b"next\n");
}

#[test]
fn a_line_the_partition_refuses_at_its_newline_is_refused_like_one_refused_before() {
    // 990 bytes pass the line check (max.message.bytes 1000) but not the batch's: 61 bytes of
    // batch header and the record's framing make it 1,060.
    let f = small(1000);
    let fh = f.open("t/0/append");
    f.fs.write(fh, &[b'w'; 500], Some(1)).unwrap();
    let mut end = vec![b'w'; 490];
    end.extend_from_slice(b"\nnext\n");
    let err = f.fs.write(fh, &end, Some(1)).unwrap_err();
    assert_eq!(err.to_string(), "record batch of 1060 bytes exceeds max.message.bytes 1000");
    // Written again, it is refused again; the first 500 bytes were dropped.
    efbig(f.fs.write(fh, &end, Some(1)));
    f.fs.write(fh, b"after\n", Some(1)).unwrap();
    f.close(fh).unwrap();
    assert_eq!(f.stored(), b"after\n");
}

#[test]
fn a_too_long_later_line_fails_the_write_and_keeps_the_line_in_progress() {
    let f = small(1000);
    let fh = f.open("t/0/append");
    f.fs.write(fh, b"par", Some(1)).unwrap();
    let mut data = b"tial\n".to_vec();
    data.extend(line(995, b'x'));
    efbig(f.fs.write(fh, &data, Some(1)));
    // Nothing changed: the writer may write the line's end without the long line.
    f.fs.write(fh, b"tial\n", Some(1)).unwrap();
    f.close(fh).unwrap();
    assert_eq!(f.stored(), b"partial\n");
}

#[test]
fn a_refused_line_never_ended_ends_at_close() {
    let f = small(1000);
    let fh = f.open("t/0/append");
    efbig(f.fs.write(fh, &[b'a'; 1200], Some(1)));
    // close() after a refused write(): nothing stored, nothing more to report.
    f.close(fh).unwrap();
    let fh = f.open("t/0/append");
    f.fs.write(fh, b"fresh\n", Some(1)).unwrap();
    f.close(fh).unwrap();
    assert_eq!(f.stored(), b"fresh\n");
}

#[test]
fn segment_bytes_smaller_than_max_message_bytes_is_named_in_the_refusal() {
    let config = LogConfig { segment_bytes: 200, ..LogConfig::default() };
    let f = fixture_with(config);
    let fh = f.open("t/0/append");
    let err = f.fs.write(fh, &line(300, b's'), Some(1)).unwrap_err();
    assert_eq!(err.errno(), libc::EFBIG);
    assert_eq!(err.to_string(), "record batch of 370 bytes exceeds segment.bytes 200");
    f.close(fh).unwrap();
}

#[test]
fn append_json_refuses_a_too_large_envelope_with_efbig_like_append() {
    for (max_write, misalign) in SPLITS {
        // A 2 MB payload: a valid envelope whose record is over max.message.bytes.
        let f = fixture();
        let fh = f.open("t/0/append.json");
        let envelope = format!("{{\"payload\":\"{}\"}}\n", "p".repeat(2_000_000));
        efbig(f.write_all(fh, envelope.as_bytes(), max_write, misalign));
        f.close(fh).unwrap();
        // A 10 MB envelope: refused as soon as its payload is known to be too large (three
        // quarters of its characters, in case it is base64, over max.message.bytes), not
        // after 8 MiB; close() says EFBIG, not that the cut envelope is malformed JSON.
        let fh = f.open("t/0/append.json");
        let envelope = format!("{{\"payload\":\"{}\"}}\n", "p".repeat(10_000_000));
        match f.syscall(fh, envelope.as_bytes(), max_write, misalign) {
            Ok(n) => assert!(n < 1_400_000, "{n} bytes accepted"),
            Err(e) => assert_eq!(e.errno(), libc::EFBIG, "{e}"),
        }
        efbig(f.close(fh));
        let fh = f.open("t/0/append.json");
        f.write_all(fh, b"{\"payload\":\"after\"}\n", max_write, misalign).unwrap();
        f.close(fh).unwrap();
        assert_eq!(f.stored(), b"after\n", "requests of {max_write} - {misalign}");
    }
}

#[test]
fn append_json_keeps_an_envelope_whose_record_may_still_fit() {
    let f = fixture();
    // A base64 payload of 1,000,000 bytes: 1,333,336 characters, more than max.message.bytes,
    // but its record fits: stored.
    let payload =
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, vec![7u8; 1_000_000]);
    let envelope = format!("{{\"payload\":\"{payload}\",\"payload_encoding\":\"base64\"}}\n");
    let fh = f.open("t/0/append.json");
    f.write_all(fh, envelope.as_bytes(), MIB, 3728).unwrap();
    f.close(fh).unwrap();
    let raw = fs_fixture::read_path(&f.fs, "t/0/by-offset/0.json", 4096);
    assert!(raw.len() > 1_000_000, "{} bytes", raw.len());
    // 3 MB of an ignored field count nothing towards the record: only the 8-times line limit
    // refuses such a line, at 8 MiB.
    let fh = f.open("t/0/append.json");
    let envelope = format!("{{\"topic\":\"{}\",\"payload\":\"x\"}}\n", "t".repeat(3_000_000));
    f.write_all(fh, envelope.as_bytes(), MIB, 0).unwrap();
    f.close(fh).unwrap();
    assert!(f.stored().ends_with(b"\nx\n"));
}

#[test]
fn append_json_refuses_a_payload_too_large_before_its_newline() {
    let f = small(1000);
    let fh = f.open("t/0/append.json");
    f.fs.write(fh, b"{\"payload\":\"", Some(1)).unwrap();
    // 1,300 characters: at least 973 bytes of record, within 1,000.
    f.fs.write(fh, &[b'p'; 1300], Some(1)).unwrap();
    let err = f.fs.write(fh, &[b'p'; 100], Some(1)).unwrap_err();
    assert_eq!(err.errno(), libc::EFBIG);
    assert_eq!(
        err.to_string(),
        "append.json record (key, payload and headers at least) of 1048 bytes exceeds \
         max.message.bytes 1000"
    );
    efbig(f.fs.write(fh, b"pp\"}\n", Some(1)));
    f.fs.write(fh, b"{\"payload\":\"next\"}\n", Some(1)).unwrap();
    f.close(fh).unwrap();
    assert_eq!(f.stored(), b"next\n");
}

#[test]
fn the_topic_level_append_refuses_a_too_long_line_the_same_way() {
    let f = small(1000);
    let fh = f.open("t/append");
    f.fs.write(fh, b"kept\n", Some(1)).unwrap();
    f.fs.write(fh, &[b'a'; 600], Some(1)).unwrap();
    let err = f.fs.write(fh, &[b'a'; 600], Some(1)).unwrap_err();
    assert_eq!(err.errno(), libc::EFBIG);
    efbig(f.fs.write(fh, b"aaa\n", Some(1)));
    f.fs.write(fh, b"next\n", Some(1)).unwrap();
    // The 600 bytes accepted first were dropped; the write() of the line's end reported the
    // refusal, so close() has nothing more to report.
    f.close(fh).unwrap();
    assert_eq!(f.stored(), b"kept\nnext\n");
}

#[test]
fn only_the_writer_s_close_reports_a_refusal_seen_as_a_short_count() {
    let f = small(1000);
    let fh = f.open("t/0/append");
    assert_eq!(f.syscall(fh, &line(1500, b'q'), 900, 0).unwrap(), 900);
    // A child that inherited the descriptor closes it (another lock owner): not told.
    f.fs.flush(fh, Some(2)).unwrap();
    efbig(f.close(fh));
    assert_eq!(f.stored(), b"");
}
