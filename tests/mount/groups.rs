//! Consumer groups through real mounts: `<topic>/groups/<group>/{offsets,auto.offset.reset,
//! <p>/next[.json|.raw]}`, driven with shell tools and the README's loop
//! (`doc/examples/consume-group.sh`); the `__consumer_offsets` records topicfs writes, read by
//! an independent reader (`tests/compat/consumer_offsets.py`); and a broker-style
//! `__consumer_offsets` (`tests/fixtures/groups-v1`) on a read-only mount. Needs root (or
//! fusermount3), /dev/fuse, jq and the kafka-python venv (`TOPICFS_PYTHON`).

use crate::common;
use crate::manifest;

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Dirs, GROUP_LOOP, MountGuard, run_group_loop, sh, sh_output, spawn_group_loops};
use serde_json::Value;

/// A mount with topic `t` of `partitions` partitions and `records` value lines `<p>-<i>` in each.
fn mounted(partitions: u32, records: usize, extra: &[&str]) -> MountGuard {
    let parts = partitions.to_string();
    let mut args = vec!["--partitions", parts.as_str()];
    args.extend_from_slice(extra);
    let m = MountGuard::foreground(&args);
    sh(&format!("mkdir {}", m.path("t").display()));
    for p in 0..partitions {
        append(&m, p, 0..records);
    }
    m
}

fn append(m: &MountGuard, p: u32, range: std::ops::Range<usize>) {
    let lines: String = range.map(|i| format!("{p}-{i}\n")).collect();
    fs::write(m.path(&format!("t/{p}/append")), lines).unwrap();
}

fn read(m: &MountGuard, rel: &str) -> String {
    fs::read_to_string(m.path(rel)).unwrap()
}

/// One `write()` of `text` to `rel` (opened with `O_TRUNC`, as `>` does); the errno on failure.
fn write(m: &MountGuard, rel: &str, text: &str) -> Result<(), i32> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(m.path(rel))
        .map_err(|e| e.raw_os_error().unwrap_or(0))?;
    let n = file.write(text.as_bytes()).map_err(|e| e.raw_os_error().unwrap_or(0))?;
    assert_eq!(n, text.len(), "one write");
    Ok(())
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

fn all_records(partitions: u32, records: usize) -> Vec<String> {
    let mut all: Vec<String> =
        (0..partitions).flat_map(|p| (0..records).map(move |i| format!("{p}-{i}"))).collect();
    all.sort();
    all
}

#[test]
fn commit_remount_resume() {
    let m = mounted(2, 5, &[]);
    sh(&format!("mkdir {}", m.path("t/groups/etl").display()));
    assert_eq!(sh(&format!("ls {}", m.path("t/groups").display())), "etl\n");
    assert_eq!(
        sh(&format!("ls {}", m.path("t/groups/etl").display())),
        "0\n1\nauto.offset.reset\noffsets\n"
    );
    assert_eq!(
        sh(&format!("ls {}", m.path("t/groups/etl/0").display())),
        "next\nnext.json\nnext.raw\n"
    );
    assert_eq!(read(&m, "t/groups/etl/offsets"), "0 - 5 -\n1 - 5 -\n");
    // No commit: from the log start (auto.offset.reset earliest); reading commits nothing.
    assert_eq!(read(&m, "t/groups/etl/0/next"), "0-0\n0-1\n0-2\n0-3\n0-4\n");
    assert_eq!(read(&m, "t/groups/etl/offsets"), "0 - 5 -\n1 - 5 -\n");
    // One write, two lines, both forms.
    assert!(write(&m, "t/groups/etl/offsets", "0 3\nt:1:5\n").is_ok());
    assert_eq!(read(&m, "t/groups/etl/offsets"), "0 3 5 2\n1 5 5 0\n");
    assert_eq!(read(&m, "t/groups/etl/0/next"), "0-3\n0-4\n");
    assert_eq!(read(&m, "t/groups/etl/1/next"), "");
    let json = read(&m, "t/groups/etl/0/next.json");
    let first: Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!((first["offset"].as_i64(), first["payload"].as_str()), (Some(3), Some("0-3")));
    let raw = fs::read(m.path("t/groups/etl/0/next.raw")).unwrap();
    assert!(!raw.is_empty());
    // The size is exact, and `next` is pinned while open (what was appended later is not in it).
    let size = fs::metadata(m.path("t/groups/etl/0/next")).unwrap().len();
    assert_eq!(size, 8);
    // Remount: the commit is in the data dir; new records come after it.
    let dirs = m.unmount();
    let m = MountGuard::foreground_on(dirs, &[]);
    assert_eq!(read(&m, "t/groups/etl/offsets"), "0 3 5 2\n1 5 5 0\n");
    append(&m, 1, 5..7);
    assert_eq!(read(&m, "t/groups/etl/1/next"), "1-5\n1-6\n");
    assert_eq!(read(&m, "t/groups/etl/offsets"), "0 3 5 2\n1 5 7 2\n");
    // `<topic>/offsets/<time>` lines commit as they are: a rewind to the start and back to the end.
    sh(&format!(
        "cat {} > {}",
        m.path("t/offsets/-2").display(),
        m.path("t/groups/etl/offsets").display()
    ));
    assert_eq!(read(&m, "t/groups/etl/offsets"), "0 0 5 5\n1 0 7 7\n");
    sh(&format!(
        "cat {} > {}",
        m.path("t/offsets/-1").display(),
        m.path("t/groups/etl/offsets").display()
    ));
    assert_eq!(read(&m, "t/groups/etl/offsets"), "0 5 5 0\n1 7 7 0\n");
    // __consumer_offsets is hidden from the root unless -o show_internal.
    assert_eq!(sh(&format!("ls {}", m.mnt().display())), "t\n");
    let dirs = m.unmount();
    let m = MountGuard::foreground_on(dirs, &["-o", "show_internal"]);
    assert_eq!(sh(&format!("ls {}", m.mnt().display())), "__consumer_offsets\nt\n");
}

#[test]
fn bad_commits_are_einval_and_commit_nothing() {
    let dirs = Dirs::new();
    let log = dirs.mnt().parent().unwrap().join("topicfs.log");
    let stderr = fs::File::create(&log).unwrap();
    let m = MountGuard::foreground_logging_to(dirs, &["--partitions", "2"], stderr.into());
    sh(&format!("mkdir {}", m.path("t").display()));
    append(&m, 0, 0..5);
    sh(&format!("mkdir {}", m.path("t/groups/g").display()));
    assert!(write(&m, "t/groups/g/offsets", "0 2\n").is_ok());
    for (bad, why) in [
        ("1 0\n0 6\n", "line 2 \"0 6\": offset 6 is outside partition 0's log [0, 5]"),
        ("0 -1\n", "outside partition 0's log"),
        ("0 4\n7 0\n", "t has no partition 7"),
        ("0 4\nzero four\n", "line 2"),
        ("0 4 extra\n", "expected"),
        ("other:0:4\n", "topic \"other\""),
        ("0 4\n0x 1\n", "is not a partition number"),
    ] {
        assert_eq!(write(&m, "t/groups/g/offsets", bad), Err(libc::EINVAL), "{bad}");
        assert_eq!(read(&m, "t/groups/g/offsets"), "0 2 5 3\n1 - 0 -\n", "{bad}");
        wait_for_log(&log, why);
    }
    // Reads and writes of everything else are refused as before.
    assert!(
        !sh_output(&format!("echo 0 1 > {}", m.path("t/groups/g/0/next").display()))
            .status
            .success()
    );
    assert_eq!(write(&m, "t/groups/g/auto.offset.reset", "sometimes\n"), Err(libc::EINVAL));
    let again = sh_output(&format!("mkdir {}", m.path("t/groups/g").display()));
    assert!(String::from_utf8_lossy(&again.stderr).contains("File exists"));
    let rmdir = sh_output(&format!("rmdir {}", m.path("t/groups/g").display()));
    assert!(String::from_utf8_lossy(&rmdir.stderr).contains("Operation not permitted"));
    assert!(!sh_output(&format!("mkdir {}", m.path("nope/groups/g").display())).status.success());
    assert!(!m.path("t/groups/absent").exists());
    drop(m);
}

fn wait_for_log(log: &Path, needle: &str) {
    common::wait_until(&format!("a log line with {needle:?}"), || {
        fs::read_to_string(log).unwrap_or_default().contains(needle)
    });
}

#[test]
fn auto_offset_reset_per_mount_and_per_group() {
    let m = mounted(1, 3, &["-o", "auto_offset_reset=latest"]);
    sh(&format!("mkdir {} {}", m.path("t/groups/a").display(), m.path("t/groups/b").display()));
    assert_eq!(read(&m, "t/groups/a/auto.offset.reset"), "latest\n");
    assert_eq!(read(&m, "t/groups/a/0/next"), "");
    assert!(write(&m, "t/groups/b/auto.offset.reset", "earliest\n").is_ok());
    assert_eq!(read(&m, "t/groups/b/auto.offset.reset"), "earliest\n");
    assert_eq!(read(&m, "t/groups/b/0/next"), "0-0\n0-1\n0-2\n");
    // A group that never committed keeps starting at the end: it sees what comes while its
    // `next` is open, not what came before.
    append(&m, 0, 3..4);
    assert_eq!(read(&m, "t/groups/a/0/next"), "");
    // A commit wins over the policy.
    assert!(write(&m, "t/groups/a/offsets", "0 1\n").is_ok());
    assert_eq!(read(&m, "t/groups/a/0/next"), "0-1\n0-2\n0-3\n");
}

#[test]
fn readme_loop_resumes_and_kill_9_before_the_commit_repeats_never_skips() {
    let m = mounted(2, 5, &[]);
    let out = m.dirs_root().join("out");
    let pid = m.pid;
    // Process partition 0 (5 records, committed), then partition 1, and kill -9 the daemon
    // after processing it and before its commit.
    let killer =
        format!("cat >> {out}; [ $(wc -l < {out}) -lt 10 ] || kill -9 {pid}", out = out.display());
    assert!(!run_group_loop(&m, "etl", &killer), "the commit after the kill cannot succeed");
    assert_eq!(lines(&out).len(), 10);
    let dirs = m.into_dirs();
    let m = MountGuard::foreground_on(dirs, &[]);
    // Partition 0's commit survived; partition 1's never happened.
    assert_eq!(read(&m, "t/groups/etl/offsets"), "0 5 5 0\n1 - 5 -\n");
    append(&m, 0, 5..7);
    let keep = format!("cat >> {}", out.display());
    assert!(run_group_loop(&m, "etl", &keep));
    assert_eq!(read(&m, "t/groups/etl/offsets"), "0 7 7 0\n1 5 5 0\n");
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for line in lines(&out) {
        let v: Value = serde_json::from_str(&line).unwrap();
        *seen.entry(v["payload"].as_str().unwrap().to_string()).or_default() += 1;
    }
    let mut expected = all_records(2, 5);
    expected.extend(["0-5".to_string(), "0-6".to_string()]);
    expected.sort();
    assert_eq!(seen.keys().cloned().collect::<Vec<_>>(), expected, "none skipped");
    for (record, n) in &seen {
        // Partition 1 was processed before the kill and again after it; the rest once.
        let want = if record.starts_with("1-") { 2 } else { 1 };
        assert_eq!(*n, want, "{record}");
    }
    // Nothing new: the loop does nothing and commits nothing.
    assert!(run_group_loop(&m, "etl", &keep));
    assert_eq!(lines(&out).len(), 17);
}

#[test]
fn two_loops_with_two_groups_on_one_topic_at_once() {
    let m = mounted(3, 20, &[]);
    let mnt = m.mnt();
    // Each script runs the loop 5 times while records keep coming.
    let (children, outs) = spawn_group_loops(&mnt, &m.dirs_root(), &["etl", "audit"], 5);
    for round in 0..5 {
        for p in 0..3 {
            append(&m, p, 20 + round * 4..24 + round * 4);
        }
    }
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    for (group, out, command) in &outs {
        // A last run after the writes ended picks up the rest.
        assert!(run_group_loop(&m, group, command));
        let mut got = lines(out);
        got.sort();
        assert_eq!(got, all_records(3, 40), "{group}: every record exactly once");
        assert_eq!(
            read(&m, &format!("t/groups/{group}/offsets")),
            "0 40 40 0\n1 40 40 0\n2 40 40 0\n"
        );
    }
    assert_eq!(sh(&format!("ls {}", m.path("t/groups").display())), "audit\netl\n");
}

/// `tests/compat/consumer_offsets.py` on `data`: the latest commit per key it decodes.
fn independent_reading(data: &Path) -> Option<Value> {
    let python = manifest::python()?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/compat/consumer_offsets.py");
    let out = Command::new(python).arg(script).arg(data).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn committed_records_decode_with_kafkas_schema_in_kafkas_partition() {
    let m = mounted(2, 5, &[]);
    for group in ["etl", "hello", "g\u{e9}n\u{e9}ral"] {
        sh(&format!("mkdir '{}'", m.path(&format!("t/groups/{group}")).display()));
    }
    assert!(write(&m, "t/groups/etl/offsets", "0 1\n1 2\n").is_ok());
    assert!(write(&m, "t/groups/etl/offsets", "0 4\n").is_ok());
    assert!(write(&m, "t/groups/hello/offsets", "1 5\n").is_ok());
    assert!(write(&m, "t/groups/g\u{e9}n\u{e9}ral/offsets", "0 0\n").is_ok());
    let dirs = m.unmount();
    let Some(reading) = independent_reading(&dirs.data()) else { return };
    assert_eq!(reading["partition_count"], 50);
    let commits = reading["commits"].as_array().unwrap();
    let got: Vec<(String, i64, i64)> = commits
        .iter()
        .map(|c| {
            assert_eq!(c["topic"], "t");
            assert_eq!((c["key_version"].as_i64(), c["version"].as_i64()), (Some(1), Some(3)));
            assert_eq!(c["leader_epoch"], -1);
            assert_eq!(c["metadata"], "");
            assert!(c["commit_timestamp"].as_i64().unwrap() > 1_700_000_000_000);
            assert_eq!(c["dir"], c["expected_dir"], "Kafka's partition choice");
            (
                c["group"].as_str().unwrap().to_string(),
                c["partition"].as_i64().unwrap(),
                c["offset"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("etl".to_string(), 0, 4),
            ("etl".to_string(), 1, 2),
            ("g\u{e9}n\u{e9}ral".to_string(), 0, 0),
            ("hello".to_string(), 1, 5)
        ]
    );
    // "etl".hashCode() = 100765 -> 15, "hello".hashCode() = 99162322 -> 22.
    let dir_of = |g: &str| commits.iter().find(|c| c["group"] == g).unwrap()["dir"].clone();
    assert_eq!(dir_of("etl"), "__consumer_offsets-15");
    assert_eq!(dir_of("hello"), "__consumer_offsets-22");
}

fn fixture() -> (PathBuf, Value) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/groups-v1");
    let manifest: Value =
        serde_json::from_str(&fs::read_to_string(root.join("manifest.json")).unwrap()).unwrap();
    (root.join("log-dir"), manifest)
}

fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status().unwrap();
    assert!(status.success());
}

#[test]
fn a_brokers_groups_show_on_a_read_only_mount_with_lag() {
    let (log_dir, manifest) = fixture();
    let dirs = Dirs::new();
    fs::remove_dir_all(dirs.data()).ok();
    copy_tree(&log_dir, &dirs.data());
    let m = MountGuard::foreground_on(dirs, &["--read-only"]);
    let groups = &manifest["groups"]["orders"];
    let ends = &manifest["log_end_offsets"]["orders"];
    let names: Vec<&String> = groups.as_object().unwrap().keys().collect();
    let listed = sh(&format!("ls {}", m.path("orders/groups").display()));
    assert_eq!(listed.lines().collect::<Vec<_>>(), names, "gone (tombstoned) is not listed");
    for (group, committed) in groups.as_object().unwrap() {
        let mut expected = String::new();
        for p in 0..3 {
            let end = ends[p.to_string()].as_i64().unwrap();
            match committed.get(p.to_string()).and_then(Value::as_i64) {
                Some(c) => expected.push_str(&format!("{p} {c} {end} {}\n", end - c)),
                None => expected.push_str(&format!("{p} - {end} -\n")),
            }
        }
        assert_eq!(read(&m, &format!("orders/groups/{group}/offsets")), expected, "{group}");
    }
    assert_eq!(read(&m, "orders/groups/etl/0/next"), "order-0-7\norder-0-8\norder-0-9\n");
    assert!(!m.path("orders/groups/gone").exists());
    // Writes fail with EROFS; nothing changes.
    assert_eq!(write(&m, "orders/groups/etl/offsets", "0 8\n"), Err(libc::EROFS));
    let out = sh_output(&format!("mkdir {}", m.path("orders/groups/new").display()));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Read-only file system"));
    assert_eq!(read(&m, "orders/groups/etl/offsets"), "0 7 10 3\n1 4 4 0\n2 - 0 -\n");
    // The independent reader agrees with the manifest.
    let Some(reading) = independent_reading(&log_dir) else { return };
    for c in reading["commits"].as_array().unwrap() {
        assert_eq!(c["dir"], c["expected_dir"]);
        assert_eq!(manifest["placement"][c["group"].as_str().unwrap()], c["dir"]);
    }
}

#[test]
fn auto_commit_on_close_commits_what_was_read_whole_and_nothing_else() {
    let m = mounted(1, 5, &["-o", "auto_commit"]);
    sh(&format!("mkdir {}", m.path("t/groups/g").display()));
    // Read partly (head closes after 2 lines): nothing committed.
    assert_eq!(sh(&format!("head -c 4 {}", m.path("t/groups/g/0/next").display())), "0-0\n");
    assert_eq!(read(&m, "t/groups/g/offsets"), "0 - 5 -\n");
    // Read whole: its end is committed on close, and the next read starts there.
    assert_eq!(read(&m, "t/groups/g/0/next"), "0-0\n0-1\n0-2\n0-3\n0-4\n");
    assert_eq!(read(&m, "t/groups/g/offsets"), "0 5 5 0\n");
    append(&m, 0, 5..7);
    assert_eq!(read(&m, "t/groups/g/0/next.json").lines().count(), 2);
    assert_eq!(read(&m, "t/groups/g/offsets"), "0 7 7 0\n");
    // Without the option, reading never commits (commit_remount_resume checks it too).
    let dirs = m.unmount();
    let m = MountGuard::foreground_on(dirs, &[]);
    append(&m, 0, 7..8);
    assert_eq!(read(&m, "t/groups/g/0/next"), "0-7\n");
    assert_eq!(read(&m, "t/groups/g/offsets"), "0 7 8 1\n");
}

#[test]
fn readme_shows_the_loop_the_tests_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let script = fs::read_to_string(GROUP_LOOP).unwrap();
    assert!(
        readme.contains(&format!("```sh\n{script}```")),
        "README's loop differs from {GROUP_LOOP}"
    );
}
