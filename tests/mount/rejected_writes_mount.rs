//! Rejected writes through a real mount: a line too long to be a record, written by `printf`,
//! `cat`, `dd bs=4M`, Python's buffered stdout and a C-style single `write()`. Each tool either
//! appends the record or exits non-zero, nothing of a refused line is stored, the next line is
//! stored normally, and the refusal is logged with the file and the limit. Needs root (or
//! fusermount3), /dev/fuse and python3.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::Stdio;

use common::{Dirs, MountGuard, sh, sh_output};

fn python() -> String {
    std::env::var("TOPICFS_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// The ways a user writes one long line to `append`, as shell commands reading the line from
/// the file `{src}` (or making it): each must exit 0 only when the line was appended.
fn writers(python: &str) -> Vec<(&'static str, String)> {
    vec![
        ("printf", r#"printf '%s\n' "$(cat {src_noeol})" >> {dst}"#.to_string()),
        ("cat", "cat {src} >> {dst}".to_string()),
        (
            "dd bs=4M",
            "dd if={src} of={dst} bs=4M oflag=append conv=notrunc status=none".to_string(),
        ),
        (
            "python buffered stdout",
            // Buffered: `PYTHONUNBUFFERED=1` (set in some environments) makes the text layer
            // write to the raw file, which drops the rest after a short count without an error;
            // see `unbuffered_python_gets_a_short_count_and_stores_nothing`.
            format!(
                "env -u PYTHONUNBUFFERED {python} -c \
                 'import sys; sys.stdout.write(open(\"{{src}}\").read())' >> {{dst}}"
            ),
        ),
        (
            // One write() of the whole buffer, its count checked, then close() checked (an
            // exception there exits 1): what a careful C program does.
            "single write()",
            format!(
                "{python} -c 'import os, sys\n\
                 data = open(\"{{src}}\", \"rb\").read()\n\
                 fd = os.open(\"{{dst}}\", os.O_WRONLY | os.O_APPEND)\n\
                 n = os.write(fd, data)\n\
                 os.close(fd)\n\
                 sys.exit(0 if n == len(data) else 1)'"
            ),
        ),
    ]
}

/// Runs each writer with a line of `len` bytes of `z` (and its newline); returns, per writer,
/// whether it exited 0 and the values stored by it (the log's growth).
fn write_long_lines(m: &MountGuard, tmp: &Path, len: usize) -> Vec<(&'static str, bool, Vec<u8>)> {
    let src = tmp.join("line");
    let src_noeol = tmp.join("line-noeol");
    let body = vec![b'z'; len];
    fs::write(&src_noeol, &body).unwrap();
    let mut line = body;
    line.push(b'\n');
    fs::write(&src, &line).unwrap();
    let dst = m.path("t/0/append");
    let stored = m.path("t/0/by-offset/0");
    let mut results = Vec::new();
    for (name, command) in writers(&python()) {
        let before = fs::read(&stored).unwrap();
        let script = command
            .replace("{src_noeol}", &src_noeol.display().to_string())
            .replace("{src}", &src.display().to_string())
            .replace("{dst}", &dst.display().to_string());
        let out = sh_output(&format!("exec bash -c '{}'", script.replace('\'', r"'\''")));
        let after = fs::read(&stored).unwrap();
        assert!(after.starts_with(&before), "{name}: the log changed");
        results.push((name, out.status.success(), after[before.len()..].to_vec()));
        // The next line of each writer is a line like any other.
        sh(&format!("printf 'next\\n' >> {}", dst.display()));
        assert!(fs::read(&stored).unwrap().ends_with(b"next\n"), "{name}: next line");
    }
    results
}

#[test]
fn a_line_too_long_is_refused_by_every_tool_and_nothing_of_it_is_stored() {
    let dirs = Dirs::new();
    let log = dirs.mnt().parent().unwrap().join("daemon.log");
    let m =
        MountGuard::foreground_logging_to(dirs, &[], Stdio::from(fs::File::create(&log).unwrap()));
    fs::create_dir(m.path("t")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // 3,000,000 bytes: over the default max.message.bytes (1,048,588) and over one FUSE
    // request (1 MiB), so the kernel splits each write().
    for (name, ok, stored) in write_long_lines(&m, tmp.path(), 3_000_000) {
        assert!(!ok, "{name} exited 0 but its line was refused");
        assert_eq!(stored, b"", "{name}: {} bytes of the refused line stored", stored.len());
    }
    let log = fs::read_to_string(&log).unwrap();
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains("t/0/append")
            && l.contains("exceeds max.message.bytes 1048588")),
        "no warning naming the file and the limit:\n{log}"
    );
}

#[test]
fn a_long_line_within_the_limit_is_appended_by_every_tool() {
    let m = MountGuard::foreground(&["--max-message-bytes", "4000000"]);
    fs::create_dir(m.path("t")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // 2,500,000 bytes fit in a batch of 4,000,000 but not in one FUSE request: each line
    // arrives in three requests and becomes one record.
    for (name, ok, stored) in write_long_lines(&m, tmp.path(), 2_500_000) {
        assert!(ok, "{name} failed on a line within the limit");
        let mut expected = vec![b'z'; 2_500_000];
        expected.push(b'\n');
        assert!(stored == expected, "{name}: stored {} bytes, not the line", stored.len());
    }
}

#[test]
fn a_too_large_envelope_in_append_json_is_refused_with_efbig() {
    let m = MountGuard::foreground(&[]);
    fs::create_dir(m.path("t")).unwrap();
    let dst = m.path("t/0/append.json");
    for payload in [2_000_000, 10_000_000] {
        let script = format!(
            "import os, sys\n\
             data = b'{{\"payload\":\"' + b'p' * {payload} + b'\"}}\\n'\n\
             fd = os.open('{dst}', os.O_WRONLY | os.O_APPEND)\n\
             try:\n\
             \x20   while data:\n\
             \x20       data = data[os.write(fd, data):]\n\
             except OSError as e:\n\
             \x20   print(e.errno)\n\
             try:\n\
             \x20   os.close(fd)\n\
             except OSError as e:\n\
             \x20   print(e.errno)\n",
            dst = dst.display()
        );
        let out = std::process::Command::new(python()).arg("-c").arg(&script).output().unwrap();
        let errnos = String::from_utf8(out.stdout).unwrap();
        let first = errnos.lines().next().unwrap_or("none");
        assert_eq!(first, libc::EFBIG.to_string(), "{payload}-byte payload: errnos {errnos:?}");
        assert!(
            errnos.lines().all(|e| e == libc::EFBIG.to_string()),
            "{payload}-byte payload: errnos {errnos:?}"
        );
    }
    assert_eq!(fs::read(m.path("t/0/by-offset/0")).unwrap(), b"");
    sh(&format!("echo '{{\"payload\":\"after\"}}' >> {}", dst.display()));
    assert_eq!(fs::read(m.path("t/0/by-offset/0")).unwrap(), b"after\n");
}

#[test]
fn unbuffered_python_gets_a_short_count_and_stores_nothing() {
    // With PYTHONUNBUFFERED=1, `sys.stdout.write` hands the text to the raw file once and
    // ignores a short count: the kernel answers the write() with the bytes of the requests
    // before the refused one and Python exits 0. Nothing of the line is stored, and the file's
    // close (at exit, unchecked) is refused with EFBIG.
    let m = MountGuard::foreground(&[]);
    fs::create_dir(m.path("t")).unwrap();
    let dst = m.path("t/0/append");
    // Its exit status is Python's (0 on the versions seen), not asserted.
    std::process::Command::new(python())
        .env("PYTHONUNBUFFERED", "1")
        .arg("-c")
        .arg("import sys; sys.stdout.write('z' * 3000000 + '\\n')")
        .stdout(fs::OpenOptions::new().append(true).open(&dst).unwrap())
        .status()
        .unwrap();
    assert_eq!(fs::read(m.path("t/0/by-offset/0")).unwrap(), b"");
    sh(&format!("printf 'next\\n' >> {}", dst.display()));
    assert_eq!(fs::read(m.path("t/0/by-offset/0")).unwrap(), b"next\n");
}
