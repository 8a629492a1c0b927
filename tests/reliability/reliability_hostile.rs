//! Hostile names and inputs through a real mount: each gets a clean errno and leaves what is
//! stored unchanged. Also a full disk (a 2 MiB tmpfs as the data dir): the write fails with
//! ENOSPC, nothing is corrupted, and appends resume once space is freed.

use crate::common;

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Dirs, MountGuard};

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

/// Every file and directory under `dir`, as relative paths.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

fn append_lines(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut f = OpenOptions::new().write(true).open(path)?;
    f.write_all(data)?;
    Ok(())
}

fn values(m: &MountGuard, topic: &str) -> Vec<u8> {
    fs::read(m.path(&format!("{topic}/0/by-offset/0"))).unwrap()
}

#[test]
fn topic_names_that_try_to_escape_or_are_malformed_get_a_clean_errno() {
    let m = MountGuard::foreground(&[]);
    fs::create_dir(m.path("ok")).unwrap();
    append_lines(&m.path("ok/0/append"), b"kept\n").unwrap();
    let outside = m.dirs_root();
    let before_data = tree(&m.data());
    let before_outside: Vec<_> =
        fs::read_dir(&outside).unwrap().map(|e| e.unwrap().path()).collect();

    let long = "a".repeat(250);
    let too_long_for_the_kernel = "b".repeat(300);
    let cases: &[(&str, &[i32])] = &[
        // The kernel answers `.` and `..` itself; topicfs must never see them as topics.
        ("..", &[libc::EEXIST]),
        (".", &[libc::EEXIST]),
        ("bad\x01name", &[libc::EINVAL]),
        ("tab\tname", &[libc::EINVAL]),
        ("new\nline", &[libc::EINVAL]),
        ("sp ace", &[libc::EINVAL]),
        ("%2e%2e", &[libc::EINVAL]),
        (&long, &[libc::EINVAL]),
        (&too_long_for_the_kernel, &[libc::ENAMETOOLONG, libc::EINVAL]),
        ("\u{e9}t\u{e9}", &[libc::EINVAL]),
    ];
    for (name, allowed) in cases {
        let err = fs::create_dir(m.path(name)).expect_err(&format!("mkdir {name:?} succeeded"));
        assert!(allowed.contains(&errno(&err)), "mkdir {name:?}: {err} (errno {})", errno(&err));
    }
    // A slash can only reach mkdir as a path: the parent does not exist.
    let err = fs::create_dir(m.path("no/such")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    // `..data` is a legal Kafka name (only `.` and `..` are not): it must live inside the data
    // dir, not next to it.
    fs::create_dir(m.path("..data")).unwrap();
    assert!(m.data().join("..data-0").is_dir());
    let after_data: Vec<PathBuf> = tree(&m.data())
        .into_iter()
        .filter(|p| !p.starts_with("..data-0") && !before_data.contains(p))
        .filter(|p| !p.ends_with("recovery-point-offset-checkpoint"))
        .collect();
    assert!(after_data.is_empty(), "refused names left files: {after_data:?}");
    let after_outside: Vec<_> =
        fs::read_dir(&outside).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(before_outside, after_outside, "something was created next to the data dir");
    assert_eq!(values(&m, "ok"), b"kept\n");
}

#[test]
fn absurd_specs_do_not_exist() {
    let m = MountGuard::foreground(&[]);
    fs::create_dir(m.path("t")).unwrap();
    append_lines(&m.path("t/0/append"), b"a\nb\nc\n").unwrap();
    let by_offset = [
        "99999999999999999999999999",
        "9223372036854775807",
        "9223372036854775808",
        "-99999999999999999999999",
        "5..3",
        "-5..10",
        "1..-1",
        "1.5",
        "+1",
        " 1",
        "0x10",
        "1e3",
        "0....",
        "0..1..2",
        "0.JSON",
        "\u{661}",
    ];
    for spec in by_offset {
        let err = File::open(m.path(&format!("t/0/by-offset/{spec}")))
            .expect_err(&format!("by-offset/{spec} opened"));
        assert_eq!(errno(&err), libc::ENOENT, "by-offset/{spec}: {err}");
    }
    let by_time = [
        "2026-13-45",
        "2026-02-30",
        "99999-01-01",
        "-99999999999999999d",
        "-9223372036854775807d",
        "-1y",
        "-s",
        "--1h",
        "2026-01-01T25:00:00Z",
        "2026-01-01T00:00:00",
        "-1h..-2h",
        "2026-01-02..2026-01-01",
        "99999999999999999999999",
        "1e12",
    ];
    for spec in by_time {
        let err = File::open(m.path(&format!("t/0/by-time/{spec}")))
            .expect_err(&format!("by-time/{spec} opened"));
        assert_eq!(errno(&err), libc::ENOENT, "by-time/{spec}: {err}");
    }
    assert_eq!(values(&m, "t"), b"a\nb\nc\n");
}

/// Writes `chunk` to `f` up to 1024 times, until a write fails; returns the bytes accepted
/// before and the error. Panics (naming `what`) when every write was accepted.
fn write_until_refused(f: &mut File, chunk: &[u8], what: &str) -> (usize, std::io::Error) {
    let mut accepted = 0usize;
    for _ in 0..1024 {
        match f.write(chunk) {
            Ok(n) => accepted += n,
            Err(e) => return (accepted, e),
        }
    }
    panic!("{what} were all accepted");
}

#[test]
fn an_endless_line_to_append_is_refused_with_efbig_and_stores_nothing() {
    let m = MountGuard::foreground(&["--max-message-bytes", "1048576"]);
    fs::create_dir(m.path("t")).unwrap();
    append_lines(&m.path("t/0/append"), b"before\n").unwrap();
    let mut f = OpenOptions::new().write(true).open(m.path("t/0/append")).unwrap();
    let chunk = vec![b'x'; 64 * 1024];
    // Up to 64 MiB without a newline: the partial line must be refused long before.
    let (accepted, err) = write_until_refused(&mut f, &chunk, "64 MiB without a newline");
    assert_eq!(errno(&err), libc::EFBIG, "{err}");
    assert!(accepted <= 1048576, "{accepted} bytes of one line buffered");
    drop(f);
    assert_eq!(values(&m, "t"), b"before\n", "the refused line changed what is stored");
    append_lines(&m.path("t/0/append"), b"after\n").unwrap();
    assert_eq!(values(&m, "t"), b"before\nafter\n");

    // append.json allows a line 8 times longer (JSON escapes and base64 inflate a record), and
    // no more; a payload is refused sooner, once three quarters of its characters exceed
    // max.message.bytes (fs::rejected_writes_fs).
    let mut f = OpenOptions::new().write(true).open(m.path("t/0/append.json")).unwrap();
    f.write_all(b"{\"payload\":\"").unwrap();
    let (accepted, err) = write_until_refused(&mut f, &chunk, "64 MiB of one JSON line");
    assert_eq!(errno(&err), libc::EFBIG, "{err}");
    assert!(accepted <= 8 * 1048576, "{accepted} bytes of one JSON line buffered");
    drop(f);
    assert_eq!(values(&m, "t"), b"before\nafter\n", "the refused JSON line changed the log");
}

#[test]
fn invalid_json_or_utf8_to_append_json_is_refused_with_einval_and_stores_nothing() {
    let m = MountGuard::foreground(&[]);
    fs::create_dir(m.path("t")).unwrap();
    append_lines(&m.path("t/0/append.json"), b"{\"payload\":\"kept\"}\n").unwrap();
    let bad: &[&[u8]] = &[
        b"{\"payload\":\"\xff\xfe\"}\n",
        b"\xc3\x28\n",
        b"{\"payload\":\n",
        b"[1,2,3]\n",
        b"\"just a string\"\n",
        b"{\"payload\":\"ok\"}\n{\"payload\":\"then bad\"\n",
        b"{\"payload\":\"x\",\"ts\":\"yesterday\"}\n",
        b"{\"payload\":\"x\",\"payload_encoding\":\"base64\"}\n",
        b"{\"payload\":\"x\",\"surprise\":1}\n",
        b"{\"payload\":\"x\",\"headers\":[\"odd\"]}\n",
        b"{\"payload\":\"x\"}{\"payload\":\"y\"}\n",
        b"\0\n",
    ];
    for input in bad {
        let err = append_lines(&m.path("t/0/append.json"), input)
            .expect_err(&format!("{:?} accepted", String::from_utf8_lossy(input)));
        assert_eq!(errno(&err), libc::EINVAL, "{:?}: {err}", String::from_utf8_lossy(input));
    }
    assert_eq!(values(&m, "t"), b"kept\n", "a refused write changed what is stored");
}

/// A tmpfs mounted over a directory, unmounted on drop (after the topicfs mount on top of it
/// is gone: declare it before the [`MountGuard`]).
struct TmpfsGuard(PathBuf);

impl Drop for TmpfsGuard {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_fails_appends_with_enospc_corrupts_nothing_and_appends_resume() {
    let dirs = Dirs::new();
    let data = dirs.data();
    let status = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "topicfs-test", data.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success(), "mount -t tmpfs failed (the test needs root)");
    let _tmpfs = TmpfsGuard(data.clone());
    let m = MountGuard::foreground_on(dirs, &[]);
    fs::create_dir(m.path("t")).unwrap();
    append_lines(&m.path("t/0/append"), b"first\nsecond\n").unwrap();

    // Fill the file system.
    let filler_path = data.join("filler");
    let mut filler = File::create(&filler_path).unwrap();
    let block = vec![0xAAu8; 64 * 1024];
    loop {
        match filler.write(&block) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if errno(&e) == libc::ENOSPC => break,
            Err(e) => panic!("filling the tmpfs: {e}"),
        }
    }
    let _ = filler.flush();
    drop(filler);

    // Writes now fail with ENOSPC, and keep failing cleanly, never half-storing.
    let line = format!("{}\n", "v".repeat(1000));
    let mut failures = 0;
    for _ in 0..20 {
        match append_lines(&m.path("t/0/append"), line.repeat(8).as_bytes()) {
            Ok(()) => {}
            Err(e) => {
                assert_eq!(errno(&e), libc::ENOSPC, "{e}");
                failures += 1;
            }
        }
    }
    assert!(failures > 0, "no append failed on a full file system");
    let stored = values(&m, "t");
    assert!(stored.starts_with(b"first\nsecond\n"), "stored data changed");
    let tail = &stored[b"first\nsecond\n".len()..];
    assert_eq!(tail.len() % (line.len() * 8), 0, "a failed append left part of its batch");

    // Space freed: appends resume, and everything survives a clean remount.
    fs::remove_file(&filler_path).unwrap();
    append_lines(&m.path("t/0/append"), b"resumed\n").unwrap();
    let mut expected = stored.clone();
    expected.extend_from_slice(b"resumed\n");
    assert_eq!(values(&m, "t"), expected);
    let dirs = m.unmount();
    let m = MountGuard::foreground_on(dirs, &[]);
    assert_eq!(values(&m, "t"), expected, "not what was stored before the remount");
    // Unmount in order (topicfs, then the tmpfs) so the temp dir can be removed.
    let dirs = m.unmount();
    drop(_tmpfs);
    drop(dirs);
}

// ---- files a broker would not write, through a real mount --------------------------------

/// Sealed (values 0..3) and active (3..6) segments of each of `topics` (partition 0).
fn two_segment_partitions(data: &Path, topics: &[&str]) {
    use topicfs::format::{NO_TIMESTAMP, NewRecord};
    use topicfs::storage::{LogConfig, LogDirs, SegmentMode};
    let log_dir =
        LogDirs::open_dir(data, LogConfig::default(), Default::default(), SegmentMode::Writable)
            .unwrap();
    for topic in topics {
        log_dir.create_topic(topic, 1).unwrap();
        let log = log_dir.log(topic, 0).unwrap();
        for i in 0..6 {
            if i == 3 {
                log.force_roll().unwrap();
            }
            let value = Some(format!("value-{i}").into_bytes());
            let record = NewRecord { timestamp: NO_TIMESTAMP, key: None, value, headers: vec![] };
            log.append(&[record]).unwrap();
        }
    }
    log_dir.shutdown().unwrap();
}

fn mkfifo(path: &Path) {
    rustix::fs::mkfifoat(rustix::fs::CWD, path, rustix::fs::Mode::from_raw_mode(0o644)).unwrap();
}

/// Runs `script` under `timeout 20`; fails if it had to be stopped. Its exit status and output.
fn promptly(script: &str) -> (i32, String) {
    let out = common::sh_output(&format!("timeout -s KILL 20 sh -c '{script}' 2>&1"));
    let code = out.status.code().unwrap_or(-1);
    assert!(code != 124 && code != 137 && code != -1, "`{script}` did not end: {out:?}");
    (code, String::from_utf8_lossy(&out.stdout).into_owned())
}

const SEALED_LOG: &str = "00000000000000000000.log";

/// Plants non-regular files in `data`: in `bad-0` the sealed `.log` is a FIFO, the active
/// `.timeindex` a link to `/dev/zero`, a `.txnindex` a socket; `fifo-0` is a FIFO, `loop-0` a
/// symlink loop and `zero-0` a link to `/dev/zero`.
fn plant_hostile_files(data: &Path) {
    let bad = data.join("bad-0");
    fs::remove_file(bad.join(SEALED_LOG)).unwrap();
    mkfifo(&bad.join(SEALED_LOG));
    let timeindex = bad.join("00000000000000000003.timeindex");
    fs::remove_file(&timeindex).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &timeindex).unwrap();
    drop(std::os::unix::net::UnixListener::bind(bad.join("00000000000000000000.txnindex")));
    mkfifo(&data.join("fifo-0"));
    std::os::unix::fs::symlink(data.join("loop-0"), data.join("loop-0")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", data.join("zero-0")).unwrap();
}

/// Every shell touch of the bad partition ends; the good one is served in full.
fn every_touch_ends(m: &MountGuard) {
    let mnt = m.mnt();
    let p = mnt.join("bad/0");
    let (p, mnt) = (p.display(), mnt.display());
    assert_eq!(promptly(&format!("ls {mnt}")).1, "bad\ngood\n");
    assert_eq!(promptly(&format!("ls {p}")).0, 0);
    assert_eq!(promptly(&format!("ls {p}/segments")).0, 0);
    let (code, info) = promptly(&format!("cat {p}/info"));
    assert!(code == 0 && info.contains("log_start_offset: 3"), "{info}");
    // Below the log start offset there is nothing (the sealed segment is refused).
    assert_ne!(promptly(&format!("cat {p}/by-offset/0")).0, 0);
    assert_eq!(
        promptly(&format!("cat {p}/by-offset/3")),
        (0, "value-3\nvalue-4\nvalue-5\n".into())
    );
    assert_eq!(promptly(&format!("tail -n 1 {p}/by-offset/3")), (0, "value-5\n".into()));
    assert_eq!(promptly(&format!("cat {p}/segments/* >/dev/null")).0, 0);
    let (code, check) = promptly(&format!("cat {p}/check"));
    assert_eq!(code, 0, "{check}");
    for line in [
        format!("bad-0/{SEALED_LOG}: refused: a FIFO, not a regular file"),
        "bad-0/00000000000000000003.timeindex: refused: a character device".to_string(),
        "bad-0/00000000000000000000.txnindex: refused: a socket".to_string(),
    ] {
        assert!(check.contains(&line), "{line} not in {check}");
    }
    assert_eq!(
        promptly(&format!("cat {mnt}/good/0/by-offset/0")),
        (0, (0..6).map(|i| format!("value-{i}\n")).collect())
    );
}

/// Lines of the daemon's log naming `needle` (the log is the file `log`).
fn log_lines_with(log: &Path, needle: &str) -> usize {
    fs::read_to_string(log).unwrap().lines().filter(|l| l.contains(needle)).count()
}

#[test]
fn a_read_only_mount_comes_up_over_fifos_sockets_devices_and_loops_and_every_touch_ends() {
    let dirs = Dirs::new();
    two_segment_partitions(&dirs.data(), &["good", "bad"]);
    plant_hostile_files(&dirs.data());
    let log = dirs.root.path().join("daemon.log");
    let m = MountGuard::foreground_logging_to(
        dirs,
        &["--read-only"],
        std::process::Stdio::from(File::create(&log).unwrap()),
    );
    every_touch_ends(&m);
    every_touch_ends(&m);
    // Named once in the log, however often it is met.
    assert_eq!(log_lines_with(&log, &format!("bad-0/{SEALED_LOG}: it is a FIFO")), 1);
    assert_eq!(log_lines_with(&log, "fifo-0: it is a FIFO, not a directory"), 1);
    assert_eq!(log_lines_with(&log, "loop-0: it is a symlink loop, not a directory"), 1);
    assert_eq!(log_lines_with(&log, "zero-0: it is a character device, not a directory"), 1);
}

#[test]
fn a_writable_mount_comes_up_over_fifos_and_serves_that_partition_read_only() {
    let dirs = Dirs::new();
    two_segment_partitions(&dirs.data(), &["good", "bad"]);
    plant_hostile_files(&dirs.data());
    let m = MountGuard::foreground_on(dirs, &[]);
    every_touch_ends(&m);
    let err = append_lines(&m.path("bad/0/append"), b"more\n").unwrap_err();
    assert_eq!(errno(&err), libc::EROFS, "{err}");
    append_lines(&m.path("good/0/append"), b"more\n").unwrap();
    assert_eq!(
        promptly(&format!("tail -n 1 {}", m.path("good/0/by-offset/0").display())).1,
        "more\n"
    );
    let dirs = m.unmount();
    // Nothing planted was removed or replaced.
    let planted = fs::symlink_metadata(dirs.data().join("bad-0").join(SEALED_LOG)).unwrap();
    assert!(planted.file_type().is_fifo());
}

#[test]
fn a_live_read_only_mount_refuses_a_log_replaced_by_a_fifo_and_a_fifo_segment_appearing() {
    let dirs = Dirs::new();
    two_segment_partitions(&dirs.data(), &["good", "live"]);
    let m = MountGuard::foreground_on(dirs, &["--read-only"]);
    let p = m.path("live/0");
    let p = p.display();
    assert_eq!(promptly(&format!("cat {p}/by-offset/0")).1.lines().count(), 6);
    let part = m.data().join("live-0");
    mkfifo(&part.join("00000000000000000010.log"));
    let active = part.join("00000000000000000003.log");
    fs::rename(&active, m.dirs_root().join("kept.log")).unwrap();
    mkfifo(&active);
    common::wait_until("check names both FIFOs", || {
        let check = promptly(&format!("cat {p}/check")).1;
        check.contains("live-0/00000000000000000010.log: refused: a FIFO")
            && check.contains("live-0/00000000000000000003.log: refused: a FIFO")
    });
    assert_eq!(
        promptly(&format!("cat {p}/by-offset/0")),
        (0, "value-0\nvalue-1\nvalue-2\n".into())
    );
    assert_eq!(promptly(&format!("ls {p}/segments")).0, 0);
    assert_eq!(
        promptly(&format!("cat {}", m.path("good/0/by-offset/0").display())).1.lines().count(),
        6
    );
}
