//! The topic level of `<topic>/where/<filter>/` on the filesystem logic (issue 46): the merged
//! `by-time/` is exactly the unfiltered merged `by-time/` with the records a reference filter
//! (written here) rejects left out, over a random multi-partition topic on several log dirs,
//! writable and read-only; it follows new matches; `info` sums how the filter served each
//! partition.

use std::collections::HashMap;
use std::sync::Arc;

use crate::common::fs_fixture::{self, FsFixture};
use serde_json::Value;
use topicfs::format::NewRecord;
use topicfs::fs::TopicFs;
use topicfs::fs::attr::OpenRequest;
use topicfs::source::{Records, TopicSource};
use topicfs::storage::log_dirs::LogDirs;
use topicfs::storage::{LogConfig, SegmentMode};

const READ: OpenRequest = OpenRequest { read: true, write: false, truncate: false };
const PARTITIONS: u32 = 4;

/// xorshift64: the same random topic every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One random record: a JSON value (1 in 15 not JSON), a key for most, a `trace` header for
/// some; timestamps wander, also backwards within a partition.
fn random_record(rng: &mut Rng, id: u64, ts: &mut i64) -> NewRecord {
    *ts += rng.below(40) as i64 - 8;
    let value = if rng.below(15) == 0 {
        format!("not json {id}")
    } else {
        format!(
            r#"{{"id":{id},"user":"user-{}","qty":{},"address":{{"city":"{}","zip":"{:05}"}},"tags":["t{}","t{}"]}}"#,
            rng.below(12),
            rng.below(100),
            ["Oslo", "Lima", "Pune"][rng.below(3) as usize],
            rng.below(100_000),
            rng.below(5),
            rng.below(5),
        )
    };
    let key = (rng.below(8) != 0).then(|| format!("k-{}", rng.below(20)).into_bytes());
    let headers = if rng.below(3) == 0 {
        vec![(b"trace".to_vec(), Some(format!("tr-{}", rng.below(6)).into_bytes()))]
    } else {
        Vec::new()
    };
    NewRecord { timestamp: *ts, key, value: Some(value.into_bytes()), headers }
}

/// Writes a random topic `orders` of [`PARTITIONS`] partitions (small segments, batches of 1
/// to 3 records) into log dirs `a` and `b` under `root`.
fn random_topic(root: &std::path::Path) {
    let logs = open(root, SegmentMode::Writable);
    logs.create_topic("orders", PARTITIONS).unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for p in 0..PARTITIONS {
        let part = logs.partition("orders", p).unwrap();
        let mut ts = 1_700_000_000_000 + i64::from(p) * 50;
        for i in 0..350u64 {
            let n = 1 + rng.below(3);
            let batch: Vec<NewRecord> =
                (0..n).map(|j| random_record(&mut rng, i * 10 + j, &mut ts)).collect();
            part.append(Records::Owned(&batch)).unwrap();
        }
    }
}

fn open(root: &std::path::Path, mode: SegmentMode) -> Arc<LogDirs> {
    let mut config = LogConfig::default();
    config.set("segment.bytes", "16384").unwrap();
    config.set("retention.ms", "-1").unwrap();
    let given: Vec<(String, std::path::PathBuf)> =
        ["a", "b"].iter().map(|n| (n.to_string(), root.join(n))).collect();
    Arc::new(LogDirs::open(&given, config, HashMap::new(), mode).unwrap())
}

type Keep = fn(&Value) -> bool;

/// The header `name`'s values in a `.json` line (kcat's flat `[name, value, ...]`).
fn header(line: &Value, name: &str) -> Vec<Value> {
    let list = line["headers"].as_array().cloned().unwrap_or_default();
    list.chunks(2).filter(|pair| pair[0] == name).map(|pair| pair[1].clone()).collect()
}

/// The value of a `.json` line as JSON, if it is.
fn payload(line: &Value) -> Option<Value> {
    serde_json::from_str(line["payload"].as_str()?).ok()
}

/// Filters and what they keep of a `.json` line of the unfiltered stream.
fn cases() -> Vec<(&'static str, Keep)> {
    vec![
        ("user=user-7", |l| payload(l).is_some_and(|v| v["user"] == "user-7")),
        ("qty>=90", |l| payload(l).is_some_and(|v| v["qty"].as_i64() >= Some(90))),
        ("address.city=Lima,qty<20", |l| {
            payload(l)
                .is_some_and(|v| v["address"]["city"] == "Lima" && v["qty"].as_i64() < Some(20))
        }),
        ("address.zip~77", |l| {
            payload(l)
                .is_some_and(|v| v["address"]["zip"].as_str().is_some_and(|z| z.contains("77")))
        }),
        ("tags.1=t3", |l| payload(l).is_some_and(|v| v["tags"][1] == "t3")),
        ("@key=k-3", |l| l["key"] == "k-3"),
        ("@header.trace=tr-2", |l| header(l, "trace").iter().any(|v| *v == "tr-2")),
        ("@value~not json", |l| l["payload"].as_str().is_some_and(|p| p.contains("not json"))),
        ("user=nobody", |_| false),
    ]
}

fn lines(bytes: Vec<u8>) -> Vec<String> {
    String::from_utf8(bytes).unwrap().lines().map(str::to_string).collect()
}

/// For each case and each name, `where/<filter>/by-time/<name>` (values and `.json`) equals the
/// lines of `by-time/<name>` whose `.json` line the reference keeps.
fn check_merged_filtered(fs: &TopicFs, names: &[&str]) {
    for name in names {
        let json = lines(fs_fixture::read_path(fs, &format!("orders/by-time/{name}.json"), 4096));
        let values = lines(fs_fixture::read_path(fs, &format!("orders/by-time/{name}"), 4096));
        assert_eq!(json.len(), values.len(), "{name}: one value line per record");
        let partitions: std::collections::BTreeSet<i64> = json
            .iter()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["partition"].as_i64().unwrap())
            .collect();
        assert_eq!(partitions.len(), PARTITIONS as usize, "{name}: every partition merged");
        for (filter, keep) in cases() {
            let kept: Vec<usize> = (0..json.len())
                .filter(|&i| keep(&serde_json::from_str::<Value>(&json[i]).unwrap()))
                .collect();
            let want_json: Vec<String> = kept.iter().map(|&i| json[i].clone()).collect();
            let want_values: Vec<String> = kept.iter().map(|&i| values[i].clone()).collect();
            let base = format!("orders/where/{filter}/by-time/{name}");
            // Odd chunks: records cut by reads, resumed merges.
            let got_json = lines(fs_fixture::read_path(fs, &format!("{base}.json"), 777));
            let got_values = lines(fs_fixture::read_path(fs, &base, 4096));
            assert_eq!(got_json, want_json, "{base}.json");
            assert_eq!(got_values, want_values, "{base}");
            if filter != "user=nobody" {
                assert!(!kept.is_empty(), "{filter}: the topic holds matches");
            }
            // The size is exact.
            let ino = fs_fixture::ino(fs, &format!("{base}.json")).unwrap();
            let size = fs.getattr(ino, None).unwrap().attr.size;
            let want_size: usize = want_json.iter().map(|l| l.len() + 1).sum();
            assert_eq!(size, want_size as u64, "{base}.json size");
        }
    }
}

#[test]
fn the_merged_filtered_stream_is_the_unfiltered_merge_with_the_rejected_records_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    random_topic(tmp.path());
    // Both log dirs hold partitions.
    assert!(tmp.path().join("a/orders-0").is_dir() && tmp.path().join("b/orders-1").is_dir());
    // A writable mount, then a read-only one (a broker's data dir).
    for mode in [SegmentMode::Writable, SegmentMode::ReadOnly] {
        let logs = open(tmp.path(), mode);
        let fs = FsFixture::local(&logs).read_only(mode == SegmentMode::ReadOnly).build();
        let names: &[&str] =
            if mode == SegmentMode::Writable { &["0", "1700000003000"] } else { &["-2"] };
        check_merged_filtered(&fs, names);
        drop(fs);
        drop(logs);
    }
}

#[test]
fn the_filtered_topic_lists_info_by_time_and_its_partitions() {
    let tmp = tempfile::tempdir().unwrap();
    random_topic(tmp.path());
    let logs = open(tmp.path(), SegmentMode::Writable);
    let fs = FsFixture::local(&logs).build();
    let names = |path: &str| -> Vec<String> {
        fs_fixture::names(&fs, path).into_iter().filter(|n| n != "." && n != "..").collect()
    };
    assert_eq!(names("orders/where/qty=1"), ["info", "by-time", "0", "1", "2", "3"]);
    assert_eq!(names("orders/where/qty=1/by-time"), names("orders/by-time"));
    for absent in ["orders/where/qty=1/by-time/0.raw", "orders/where/qty=1/by-offset"] {
        let err = fs_fixture::ino(&fs, absent).unwrap_err();
        assert_eq!(err.errno(), libc::ENOENT, "{absent}: {err:?}");
    }
}

#[test]
fn the_filtered_topic_info_sums_how_the_filter_served_each_partition() {
    let tmp = tempfile::tempdir().unwrap();
    random_topic(tmp.path());
    let logs = open(tmp.path(), SegmentMode::Writable);
    let fs = FsFixture::local(&logs).build();
    let (filter, keep) = cases()[0];
    let merged =
        lines(fs_fixture::read_path(&fs, &format!("orders/where/{filter}/by-time/0"), 4096));
    let json = lines(fs_fixture::read_path(&fs, "orders/by-time/0.json", 4096));
    let matches = json.iter().filter(|l| keep(&serde_json::from_str(l).unwrap())).count();
    assert_eq!(merged.len(), matches);
    let info =
        String::from_utf8(fs_fixture::read_path(&fs, &format!("orders/where/{filter}/info"), 4096))
            .unwrap();
    let value = |name: &str| -> String {
        info.lines().find_map(|l| l.strip_prefix(&format!("{name}: ")[..])).unwrap().to_string()
    };
    let number = |name: &str| -> u64 { value(name).parse().unwrap() };
    assert_eq!(value("topic"), "orders");
    assert_eq!(value("partitions"), PARTITIONS.to_string());
    assert_eq!(value("filter"), filter);
    assert_eq!(value("answered_by"), "scan");
    let (mut examined, mut matched) = (0, 0);
    for p in 0..PARTITIONS {
        assert_eq!(value(&format!("partition.{p}.answered_by")), "scan", "{info}");
        let (e, m) = (
            number(&format!("partition.{p}.records_examined")),
            number(&format!("partition.{p}.records_matched")),
        );
        // The partition's own filtered info says the same (the merge counted into its stats).
        let own = String::from_utf8(fs_fixture::read_path(
            &fs,
            &format!("orders/where/{filter}/{p}/info"),
            4096,
        ))
        .unwrap();
        assert!(own.contains(&format!("records_examined: {e}\n")), "{own}\n{info}");
        assert!(own.contains(&format!("records_matched: {m}\n")), "{own}\n{info}");
        let end = number(&format!("partition.{p}.log_end_offset"));
        assert!(e >= end && m < e, "partition {p}: {info}");
        examined += e;
        matched += m;
    }
    assert_eq!(number("records_examined"), examined, "{info}");
    assert_eq!(number("records_matched"), matched, "{info}");
    // Counts are evaluations (a size and a read may each look at a record), so at least.
    assert!(matched >= matches as u64, "{info}");
}

/// An open handle on the filtered merge reads on to exactly the new matches, whatever
/// partition they arrive in.
#[test]
fn an_open_filtered_merge_follows_new_matches_only() {
    let tmp = tempfile::tempdir().unwrap();
    random_topic(tmp.path());
    let logs = open(tmp.path(), SegmentMode::Writable);
    let fs = FsFixture::local(&logs).build();
    let path = "orders/where/user=user-99/by-time/0.json";
    let fh = fs.open(fs_fixture::ino(&fs, path).unwrap(), READ).unwrap().fh;
    let before = fs_fixture::read_to_end(&fs, fh, 4096).unwrap();
    assert!(before.is_empty(), "no user-99 yet");
    let rec = |ts: i64, user: &str| NewRecord {
        timestamp: ts,
        key: None,
        value: Some(format!(r#"{{"user":"{user}"}}"#).into_bytes()),
        headers: Vec::new(),
    };
    let far = 1_800_000_000_000;
    logs.partition("orders", 2)
        .unwrap()
        .append(Records::Owned(&[rec(far, "user-1"), rec(far + 1, "user-99")]))
        .unwrap();
    logs.partition("orders", 0)
        .unwrap()
        .append(Records::Owned(&[rec(far + 2, "user-99")]))
        .unwrap();
    let after = lines(fs_fixture::read_to_end(&fs, fh, 4096).unwrap());
    assert_eq!(after.len(), 2, "{after:?}");
    let got: Vec<(i64, i64)> = after
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["partition"].as_i64().unwrap(), v["ts"].as_i64().unwrap())
        })
        .collect();
    assert_eq!(got, [(2, far + 1), (0, far + 2)]);
    fs.release(fh).unwrap();
}
