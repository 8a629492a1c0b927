//! Topic-level files through a real mount: `offsets/<time>` for every partition (the case that
//! broke Kafka 0.9 clients: one partition with only newer records, one empty), the merged
//! `by-time/` stream with cat, stat, jq and tail -f, keyed and keyless appends landing where
//! Kafka's default partitioner puts them, and mkdir of the next partition only.
//! Needs root (or fusermount3), /dev/fuse and jq.

use crate::common;

use std::fs;

use common::{Follower, MountGuard, sh, sh_output};
use topicfs::format::peek_entry;
use topicfs::partitioner::partition_for_key;

/// A mount with topic `name` of `partitions` partitions, made by mkdir.
fn mounted(name: &str, partitions: u32) -> MountGuard {
    let m = MountGuard::foreground(&["--partitions", &partitions.to_string()]);
    fs::create_dir(m.path(name)).unwrap();
    m
}

/// Appends JSON envelopes (one per line) to `path` in one write.
fn append_json(m: &MountGuard, path: &str, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    fs::write(m.path(path), text).unwrap();
}

/// `orders`: partition 0 holds records at 1000..1099 ms, partition 1 only at 5000..5009 ms,
/// partition 2 nothing.
fn kafka_09_trap() -> MountGuard {
    let m = mounted("orders", 3);
    let old: Vec<String> =
        (0..100).map(|i| format!(r#"{{"ts":{},"payload":"old {i}"}}"#, 1000 + i)).collect();
    append_json(&m, "orders/0/append.json", &old);
    let new: Vec<String> =
        (0..10).map(|i| format!(r#"{{"ts":{},"payload":"new {i}"}}"#, 5000 + i)).collect();
    append_json(&m, "orders/1/append.json", &new);
    m
}

#[test]
fn offsets_list_every_partition_when_one_is_newer_and_one_is_empty() {
    let m = kafka_09_trap();
    let cat =
        |name: &str| sh(&format!("cat '{}'", m.path(&format!("orders/offsets/{name}")).display()));
    assert_eq!(cat("3000"), "orders:0:100\norders:1:0\norders:2:0\n");
    assert_eq!(cat("1970-01-01T00:00:01.050Z"), "orders:0:50\norders:1:0\norders:2:0\n");
    assert_eq!(cat("-1"), "orders:0:100\norders:1:10\norders:2:0\n");
    assert_eq!(cat("-2"), "orders:0:0\norders:1:0\norders:2:0\n");
    // The size is exact at the moment of the stat.
    let len = fs::metadata(m.path("orders/offsets/3000")).unwrap().len();
    assert_eq!(len, "orders:0:100\norders:1:0\norders:2:0\n".len() as u64);
    assert_eq!(sh(&format!("ls {}", m.path("orders/offsets").display())), "-1\n-2\n-3\n");
    // Not a time, or a range: not a name.
    for bad in ["soon", "1000..2000", "1000.json"] {
        assert!(!m.path(&format!("orders/offsets/{bad}")).exists(), "{bad}");
    }
}

#[test]
fn topic_by_time_skips_partitions_without_newer_records() {
    let m = kafka_09_trap();
    let path = m.path("orders/by-time/3000");
    let text = sh(&format!("cat {}", path.display()));
    let expected: String = (0..10).map(|i| format!("new {i}\n")).collect();
    assert_eq!(text, expected);
    assert_eq!(fs::metadata(&path).unwrap().len(), expected.len() as u64);
    // From 1095: the last five old records and the new ones, merged by timestamp; the JSON
    // names each record's partition.
    let partitions = sh(&format!(
        "jq -c '[.partition, .offset]' < {}",
        m.path("orders/by-time/1095.json").display()
    ));
    let mut expected = String::new();
    for o in 95..100 {
        expected.push_str(&format!("[0,{o}]\n"));
    }
    for o in 0..10 {
        expected.push_str(&format!("[1,{o}]\n"));
    }
    assert_eq!(partitions, expected);
    assert!(!m.path("orders/by-time/0.raw").exists());
}

#[test]
fn topic_by_time_merges_by_timestamp_and_stat_matches_cat() {
    let m = mounted("t", 3);
    for p in 0..3u32 {
        let lines: Vec<String> = (0..300)
            .map(|i| format!(r#"{{"ts":{},"payload":"p{p} {i}"}}"#, 10_000 + 3 * i + i64::from(p)))
            .collect();
        append_json(&m, &format!("t/{p}/append.json"), &lines);
    }
    for name in ["0", "0.json", "10450", "10450..10600.json", "-2"] {
        let path = m.path(&format!("t/by-time/{name}"));
        let bytes = fs::read(&path).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), bytes.len() as u64, "{name}");
    }
    let text = sh(&format!("cat {}", m.path("t/by-time/0").display()));
    let expected: String =
        (0..300).flat_map(|i| (0..3).map(move |p| format!("p{p} {i}\n"))).collect();
    assert_eq!(text, expected);
    // A range ends before the first record at its end time.
    let range = sh(&format!("cat {}", m.path("t/by-time/10003..10009").display()));
    assert_eq!(range, "p0 1\np1 1\np2 1\np0 2\np1 2\np2 2\n");
    let tail = sh(&format!("tail -n 2 {}", m.path("t/by-time/0").display()));
    assert_eq!(tail, "p1 299\np2 299\n");
}

#[test]
fn tail_follows_the_topic_stream_across_partitions() {
    let m = mounted("t", 2);
    fs::write(m.path("t/0/append"), "first\n").unwrap();
    let path = m.path("t/by-time/0");
    let mut tail = Follower::start("tail", &["-c", "+1", "-f", path.to_str().unwrap()]);
    tail.wait_for("first\n");
    fs::write(m.path("t/1/append"), "second\n").unwrap();
    tail.wait_for("second\n");
    fs::write(m.path("t/append"), "third\n").unwrap();
    let seen = tail.wait_for("third\n");
    assert_eq!(seen, "first\nsecond\nthird\n");
}

#[test]
fn keyed_topic_appends_land_in_the_murmur2_partition() {
    let m = mounted("t", 5);
    let keys: Vec<String> = (0..60).map(|i| format!("customer-{i}")).collect();
    let lines: Vec<String> =
        keys.iter().map(|k| format!(r#"{{"key":"{k}","payload":"{k}"}}"#)).collect();
    append_json(&m, "t/append.json", &lines);
    for p in 0..5u32 {
        let got = sh(&format!("cat {}", m.path(&format!("t/{p}/by-offset/0")).display()));
        let want: String = keys
            .iter()
            .filter(|k| partition_for_key(k.as_bytes(), 5) == Some(p))
            .map(|k| format!("{k}\n"))
            .collect();
        assert_eq!(got, want, "partition {p}");
        let info = sh(&format!("cat {}", m.path(&format!("t/{p}/info")).display()));
        let records = want.lines().count();
        assert!(info.contains(&format!("log_end_offset: {records}\n")), "{info}");
        // One write: one batch in every partition that received records.
        let raw = fs::read(m.path(&format!("t/{p}/by-offset/0.raw"))).unwrap();
        let mut batches = 0;
        let mut at = 0;
        while let Some(h) = peek_entry(&raw[at..]).unwrap() {
            at += h.total_size();
            batches += 1;
        }
        assert_eq!(batches, usize::from(records > 0), "partition {p}");
    }
}

#[test]
fn keyless_topic_writes_rotate_over_the_partitions() {
    let m = mounted("t", 3);
    for w in 0..6 {
        sh(&format!("printf 'w{w}a\\nw{w}b\\n' >> {}", m.path("t/append").display()));
    }
    for p in 0..3u32 {
        let got = sh(&format!("cat {}", m.path(&format!("t/{p}/by-offset/0")).display()));
        let (a, b) = (p, p + 3);
        assert_eq!(got, format!("w{a}a\nw{a}b\nw{b}a\nw{b}b\n"), "partition {p}");
    }
    assert_eq!(fs::metadata(m.path("t/append")).unwrap().len(), 0);
}

#[test]
fn mkdir_adds_only_the_next_partition_and_nothing_removes_one() {
    let m = mounted("t", 2);
    assert!(sh_output(&format!("mkdir {}", m.path("t/3").display())).status.code() != Some(0));
    fs::create_dir(m.path("t/2")).unwrap();
    assert_eq!(sh(&format!("cat {}", m.path("t/offsets/-1").display())), "t:0:0\nt:1:0\nt:2:0\n");
    assert!(fs::remove_dir(m.path("t/2")).is_err());
    assert!(m.path("t/2").is_dir());
    // Keyed records now hash over three partitions.
    sh(&format!(
        r#"printf '{{"key":"foobar","payload":"x"}}\n' >> {}"#,
        m.path("t/append.json").display()
    ));
    let p = partition_for_key(b"foobar", 3).unwrap();
    let end = sh(&format!("cat {}", m.path("t/offsets/-1").display()));
    let want: String = (0..3).map(|q| format!("t:{q}:{}\n", u32::from(q == p))).collect();
    assert_eq!(end, want);
}

/// A data dir a broker wrote topic `t` into: partition 0 holds a committed transaction and an
/// aborted one between plain records; partition 1 a plain record, then an open transaction
/// (its last stable offset is 1) and a plain record after it.
fn transactional_data_dir() -> common::Dirs {
    use topicfs::format::control::encode_end_txn_marker_batch;
    use topicfs::format::{BatchSpec, NewRecord, Offset, encode_batch};
    let batch = |base: i64, pid: Option<i64>, ts: i64, values: &[&str]| {
        let spec = BatchSpec {
            base_offset: Offset(base),
            producer_id: pid.unwrap_or(-1),
            producer_epoch: if pid.is_some() { 0 } else { -1 },
            base_sequence: if pid.is_some() { 0 } else { -1 },
            is_transactional: pid.is_some(),
            ..BatchSpec::default()
        };
        let records: Vec<NewRecord> = values
            .iter()
            .map(|v| NewRecord {
                timestamp: ts,
                key: None,
                value: Some(v.as_bytes().to_vec()),
                headers: Vec::new(),
            })
            .collect();
        encode_batch(&spec, &records).unwrap()
    };
    let marker = |offset: i64, pid: i64, commit: bool| {
        encode_end_txn_marker_batch(Offset(offset), 0, pid, 0, commit, 0, 999).unwrap()
    };
    let dirs = common::Dirs::new();
    let partitions = [
        vec![
            batch(0, None, 100, &["p0-a"]),
            batch(1, Some(7), 110, &["c1", "c2"]),
            batch(3, Some(8), 115, &["x1"]),
            marker(4, 7, true),
            marker(5, 8, false),
            batch(6, None, 300, &["p0-b"]),
        ],
        vec![
            batch(0, None, 105, &["p1-a"]),
            batch(1, Some(9), 150, &["open"]),
            batch(2, None, 160, &["p1-late"]),
        ],
    ];
    for (p, batches) in partitions.iter().enumerate() {
        let dir = dirs.data().join(format!("t-{p}"));
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("00000000000000000000.log"), batches.concat()).unwrap();
    }
    dirs
}

#[test]
fn topic_by_time_follows_the_mounts_isolation_level() {
    let m = MountGuard::foreground_on(transactional_data_dir(), &["--read-only"]);
    let committed = "p0-a\np1-a\nc1\nc2\np0-b\n";
    assert_eq!(fs::read_to_string(m.path("t/by-time/0")).unwrap(), committed);
    assert_eq!(fs::metadata(m.path("t/by-time/0")).unwrap().len(), committed.len() as u64);
    // The merge holds what the partitions' own streams hold, no more.
    let own: String = ["t/0/by-time/0", "t/1/by-time/0"]
        .iter()
        .map(|p| fs::read_to_string(m.path(p)).unwrap())
        .collect();
    assert_eq!(own, "p0-a\nc1\nc2\np0-b\np1-a\n");
    let dirs = m.unmount();
    let m = MountGuard::foreground_on(dirs, &["--read-only", "--isolation", "read_uncommitted"]);
    let all = "p0-a\np1-a\nc1\nc2\nx1\nopen\np1-late\np0-b\n";
    assert_eq!(fs::read_to_string(m.path("t/by-time/0")).unwrap(), all);
    assert_eq!(fs::metadata(m.path("t/by-time/0")).unwrap().len(), all.len() as u64);
}
