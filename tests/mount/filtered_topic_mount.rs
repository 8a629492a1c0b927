//! `<topic>/where/<filter>/by-time/` and the filtered topic's `info` through real mounts of a
//! data dir made of two log dirs (one broker's `log.dirs=a,b`), read-write then read-only
//! (issue 46): `cat` of the filtered merge is exactly what `jq` keeps of the unfiltered merged
//! stream, `stat` agrees, and `tail -f` of it shows exactly the new matches.

use std::collections::HashMap;
use std::fs;
use std::process::Stdio;

use crate::common::{Dirs, Follower, MountGuard, sh};
use topicfs::format::NewRecord;
use topicfs::source::{Records, TopicSource};
use topicfs::storage::log_dirs::LogDirs;
use topicfs::storage::{LogConfig, SegmentMode};

/// Filters with the `jq` expression keeping the same records (`fromjson?` skips non-JSON).
const CASES: &[(&str, &str)] = &[
    ("user=user-7", r#"select(.user=="user-7")"#),
    ("qty>=80,address.city=Oslo", r#"select(.qty>=80 and .address.city=="Oslo")"#),
    ("tags.1=t2", r#"select(.tags[1]=="t2")"#),
    ("address.zip~42", r#"select(.address.zip|contains("42"))"#),
];

/// Topic `orders` of 3 partitions spread over log dirs `a` and `b` under `dirs`' root, written
/// through the engine: JSON values (every 17th not JSON), timestamps of the last hour that
/// wander, also backwards within a partition.
fn two_log_dirs_topic(dirs: &Dirs) -> std::ffi::OsString {
    let paths: Vec<(String, std::path::PathBuf)> =
        ["a", "b"].iter().map(|n| (n.to_string(), dirs.root.path().join(n))).collect();
    let logs =
        LogDirs::open(&paths, LogConfig::default(), HashMap::new(), SegmentMode::Writable).unwrap();
    logs.create_topic("orders", 3).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for p in 0..3u32 {
        let part = logs.partition("orders", p).unwrap();
        let mut ts = now.as_millis() as i64 - 3_600_000 + i64::from(p) * 7;
        for i in 0..1500u64 {
            ts += next(30) as i64 - 6;
            let value = if i % 17 == 3 {
                format!("not json {p}/{i}")
            } else {
                format!(
                    r#"{{"id":"{p}/{i}","user":"user-{}","qty":{},"address":{{"city":"{}","zip":"{:05}"}},"tags":["t{}","t{}"]}}"#,
                    next(15),
                    next(100),
                    ["Oslo", "Lima"][next(2) as usize],
                    next(100_000),
                    next(4),
                    next(4)
                )
            };
            let record = NewRecord {
                timestamp: ts,
                key: None,
                value: Some(value.into_bytes()),
                headers: vec![],
            };
            part.append(Records::Owned(&[record])).unwrap();
        }
    }
    assert!(dirs.root.path().join("a/orders-0").is_dir());
    assert!(dirs.root.path().join("b/orders-1").is_dir());
    let joined = ["a", "b"].map(|n| dirs.root.path().join(n).display().to_string()).join(",");
    joined.into()
}

/// Every case on the mount `m`: values and `.json` of `where/<f>/by-time/0` against `jq` over
/// `by-time/0` and `by-time/0.json`; `stat` is exact; `info` sums the partitions.
fn check_against_jq(m: &MountGuard) {
    let plain = m.path("orders/by-time/0");
    let json = m.path("orders/by-time/0.json");
    for (filter, jq) in CASES {
        let dir = m.path(&format!("orders/where/{filter}/by-time"));
        let want = sh(&format!("jq -cR 'fromjson? | {jq}' '{}'", plain.display()));
        assert!(want.lines().count() > 3, "{filter}: the case keeps records");
        assert_eq!(sh(&format!("cat '{}/0'", dir.display())), want, "{filter}");
        let want =
            sh(&format!("jq -c '. as $r | .payload | fromjson? | {jq} | $r' '{}'", json.display()));
        let got = sh(&format!("cat '{}/0.json'", dir.display()));
        assert_eq!(got, want, "{filter}.json");
        let size = sh(&format!("stat -c %s '{}/0.json'", dir.display()));
        assert_eq!(size.trim(), got.len().to_string(), "{filter}: stat");
        // Every partition is in the merge.
        let partitions = sh(&format!("jq -r .partition '{}/0.json' | sort -u", dir.display()));
        assert_eq!(partitions, "0\n1\n2\n", "{filter}");
        let info = fs::read_to_string(m.path(&format!("orders/where/{filter}/info"))).unwrap();
        assert!(info.contains(&format!("filter: {filter}\nanswered_by: scan\n")), "{info}");
        for p in 0..3 {
            assert!(info.contains(&format!("partition.{p}.records_matched: ")), "{info}");
        }
    }
}

#[test]
fn where_by_time_over_two_log_dirs_is_what_jq_keeps_of_the_merged_stream() {
    let dirs = Dirs::new();
    let source = two_log_dirs_topic(&dirs);
    let m = MountGuard::foreground_source(dirs, &source, &[], Stdio::inherit());
    check_against_jq(&m);
    // `tail -f` of the filtered merge: the matches so far, then exactly the new one.
    let path = m.path("orders/where/user=user-7/by-time/0");
    let last = sh(&format!("tail -n 1 '{}'", path.display()));
    let mut tail = Follower::start("tail", &["-f", "-n", "+1", path.to_str().unwrap()]);
    tail.wait_for(last.trim_end());
    let more: String = (0..30).map(|i| format!("{{\"user\":\"user-8\",\"n\":{i}}}\n")).collect();
    fs::write(m.path("orders/1/append"), &more).unwrap();
    fs::write(m.path("orders/2/append"), "{\"user\":\"user-7\",\"n\":\"new\"}\n").unwrap();
    let seen = tail.wait_for("\"n\":\"new\"");
    let plain = m.path("orders/by-time/0");
    let want = sh(&format!("jq -cR 'fromjson? | select(.user==\"user-7\")' '{}'", plain.display()));
    assert_eq!(seen, want, "the follower saw the old matches and the new one only");
    assert!(!seen.contains("user-8"), "{seen}");
    drop(tail);
    // The same dirs read-only, as a broker's disks are mounted.
    let dirs = m.unmount();
    let m = MountGuard::foreground_source(dirs, &source, &["--read-only"], Stdio::inherit());
    check_against_jq(&m);
    m.unmount();
}
