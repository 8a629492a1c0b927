//! `<topic>/where/<filter>/` on the filesystem logic (issue 46): lookups, listings, `EINVAL` for
//! a filter that does not parse, filtered streams exactly the records a reference keeps, and
//! the partition's `info` saying how the filter served it.

use std::collections::HashMap;
use std::sync::Arc;

use crate::common::fs_fixture::{self, FsFixture};
use serde_json::Value;
use topicfs::Error;
use topicfs::fs::TopicFs;
use topicfs::source::TopicSource;
use topicfs::storage::log_dirs::LogDirs;
use topicfs::storage::{LogConfig, SegmentMode};

struct Fixture {
    fs: TopicFs,
    lines: Vec<String>,
    _dir: tempfile::TempDir,
}

/// A topic `orders` of one partition holding `n` JSON lines (and a plain line every 13th).
fn fixture(n: usize) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut config = LogConfig::default();
    config.set("segment.bytes", "8192").unwrap();
    let given = vec![("d".to_string(), dir.path().to_path_buf())];
    let logs = LogDirs::open(&given, config, HashMap::new(), SegmentMode::Writable).unwrap();
    logs.create_topic("orders", 1).unwrap();
    let fs = FsFixture::over(Arc::new(logs) as Arc<dyn TopicSource>).build();
    let lines: Vec<String> = (0..n)
        .map(|i| {
            if i % 13 == 5 {
                format!("plain {i}")
            } else {
                format!(
                    r#"{{"id":{i},"user":"user-{}","qty":{},"address":{{"city":"{}"}}}}"#,
                    i % 10,
                    i % 7,
                    ["Oslo", "Lima"][i % 2]
                )
            }
        })
        .collect();
    let ino = fs_fixture::ino(&fs, "orders/0/append").unwrap();
    let fh = fs
        .open(ino, topicfs::fs::attr::OpenRequest { read: false, write: true, truncate: false })
        .unwrap()
        .fh;
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs.write(fh, text.as_bytes(), None).unwrap();
    fs.release(fh).unwrap();
    Fixture { fs, lines, _dir: dir }
}

#[test]
fn a_filtered_stream_holds_exactly_the_lines_the_reference_keeps() {
    let f = fixture(3000);
    let keep = |l: &str, pred: &dyn Fn(&Value) -> bool| {
        serde_json::from_str::<Value>(l).ok().is_some_and(|v| pred(&v))
    };
    type Keep = Box<dyn Fn(&Value) -> bool>;
    let cases: Vec<(&str, Keep)> = vec![
        ("user=user-4", Box::new(|v| v["user"] == "user-4")),
        (
            "qty>4,address.city=Lima",
            Box::new(|v| v["qty"].as_i64() > Some(4) && v["address"]["city"] == "Lima"),
        ),
        ("id<100", Box::new(|v| v["id"].as_i64().is_some_and(|i| i < 100))),
    ];
    for (filter, pred) in cases {
        let want: String =
            f.lines.iter().filter(|l| keep(l, &*pred)).map(|l| format!("{l}\n")).collect();
        let path = format!("orders/where/{filter}/0/by-offset/0");
        let got = fs_fixture::read_path(&f.fs, &path, 4096);
        assert_eq!(String::from_utf8(got).unwrap(), want, "{filter}");
    }
}

#[test]
fn a_filter_that_does_not_parse_is_einval_and_a_valid_one_lists_the_tree() {
    let f = fixture(50);
    for bad in ["user", "user!x", "a=%zz", "a=1,,b=2", "@nope=1"] {
        let err = fs_fixture::ino(&f.fs, &format!("orders/where/{bad}")).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{bad}: {err:?}");
        assert_eq!(err.errno(), libc::EINVAL, "{bad}");
    }
    assert!(fs_fixture::names(&f.fs, "orders").contains(&"where".to_string()));
    let names = |path: &str| -> Vec<String> {
        fs_fixture::names(&f.fs, path).into_iter().filter(|n| n != "." && n != "..").collect()
    };
    assert_eq!(names("orders/where"), Vec::<String>::new(), "filters unlisted");
    assert_eq!(names("orders/where/qty=1"), ["info", "by-time", "0"]);
    assert_eq!(names("orders/where/qty=1/0"), ["info", "by-offset", "by-time"]);
    let streams = names("orders/where/qty=1/0/by-offset");
    assert!(!streams.is_empty() && streams.iter().all(|n| !n.ends_with(".raw")), "{streams:?}");
    // No raw form, and nothing of a topic's other files.
    for absent in [
        "orders/where/qty=1/0/by-offset/0.raw",
        "orders/where/qty=1/0/append",
        "orders/where/qty=1/7",
    ] {
        let err = fs_fixture::ino(&f.fs, absent).unwrap_err();
        assert!(matches!(err, Error::NotFound(_)), "{absent}: {err:?}");
    }
}

#[test]
fn info_says_how_the_filter_served_the_partition() {
    let f = fixture(700);
    let path = "orders/where/user=user-3/0/by-offset/0";
    let matches = f.lines.iter().filter(|l| l.contains(r#""user":"user-3""#)).count();
    let read = fs_fixture::read_path(&f.fs, path, 4096);
    assert_eq!(read.iter().filter(|&&b| b == b'\n').count(), matches);
    let info =
        String::from_utf8(fs_fixture::read_path(&f.fs, "orders/where/user=user-3/0/info", 4096))
            .unwrap();
    let value = |name: &str| -> String {
        info.lines().find_map(|l| l.strip_prefix(&format!("{name}: ")[..])).unwrap().to_string()
    };
    assert_eq!(value("filter"), "user=user-3");
    // The read declared an index of `user` (built in the background): later reads use it.
    assert!(
        ["scan", "index (user, "].iter().any(|a| value("answered_by").starts_with(a)),
        "{info}"
    );
    assert_eq!(value("log_end_offset"), "700");
    let examined: u64 = value("records_examined").parse().unwrap();
    let matched: u64 = value("records_matched").parse().unwrap();
    // Every record was looked at at least once and every match kept at least once (a size, a
    // read and read-ahead may each look at a record: counts are evaluations, not records).
    assert!(examined >= 700 && matched >= matches as u64 && matched < examined, "{info}");
}

#[test]
fn a_filtered_stream_grows_with_new_matches_only() {
    let f = fixture(100);
    let path = "orders/where/address.city=Oslo/0/by-offset/0.json";
    let ino = fs_fixture::ino(&f.fs, path).unwrap();
    let fh = f
        .fs
        .open(ino, topicfs::fs::attr::OpenRequest { read: true, write: false, truncate: false })
        .unwrap()
        .fh;
    let before = fs_fixture::read_to_end(&f.fs, fh, 4096).unwrap();
    assert_eq!(before.iter().filter(|&&b| b == b'\n').count(), 46, "even ids but the plain lines");
    // Append a Lima and an Oslo record: the open handle reads on to the Oslo one only.
    let append = fs_fixture::ino(&f.fs, "orders/0/append").unwrap();
    let w = f
        .fs
        .open(append, topicfs::fs::attr::OpenRequest { read: false, write: true, truncate: false })
        .unwrap()
        .fh;
    f.fs.write(
        w,
        b"{\"address\":{\"city\":\"Lima\"},\"n\":1}\n{\"address\":{\"city\":\"Oslo\"},\"n\":2}\n",
        None,
    )
    .unwrap();
    f.fs.release(w).unwrap();
    let mut after = before.clone();
    loop {
        let chunk = f.fs.read(fh, after.len() as u64, 4096).unwrap();
        if chunk.is_empty() {
            break;
        }
        after.extend_from_slice(&chunk);
    }
    assert!(after.starts_with(&before));
    let new = String::from_utf8(after[before.len()..].to_vec()).unwrap();
    assert_eq!(new.lines().count(), 1, "{new}");
    assert!(new.contains(r#""offset":101"#) && new.contains(r#"\"n\":2"#), "{new}");
    f.fs.release(fh).unwrap();
}

/// Several log dirs (one broker's `log.dirs`): the filtered view lists every partition whatever
/// dir holds it, and each filtered stream is that partition's matches.
#[test]
fn a_filtered_view_spans_the_partitions_of_several_log_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let given: Vec<(String, std::path::PathBuf)> =
        ["a", "b"].iter().map(|n| (n.to_string(), tmp.path().join(n))).collect();
    let logs =
        LogDirs::open(&given, LogConfig::default(), HashMap::new(), SegmentMode::Writable).unwrap();
    logs.create_topic("orders", 3).unwrap();
    let fs = FsFixture::over(Arc::new(logs) as Arc<dyn TopicSource>).build();
    let write = topicfs::fs::attr::OpenRequest { read: false, write: true, truncate: false };
    for p in 0..3 {
        let text: String =
            (0..60).map(|i| format!("{{\"p\":{p},\"i\":{i},\"even\":{}}}\n", i % 2 == 0)).collect();
        let ino = fs_fixture::ino(&fs, &format!("orders/{p}/append")).unwrap();
        let fh = fs.open(ino, write).unwrap().fh;
        fs.write(fh, text.as_bytes(), None).unwrap();
        fs.release(fh).unwrap();
    }
    let listed: Vec<String> = fs_fixture::names(&fs, "orders/where/even=true")
        .into_iter()
        .filter(|n| n != "." && n != "..")
        .collect();
    assert_eq!(listed, ["info", "by-time", "0", "1", "2"]);
    assert!(tmp.path().join("a/orders-0").is_dir() && tmp.path().join("b/orders-1").is_dir());
    for p in 0..3 {
        let want: String = (0..60)
            .step_by(2)
            .map(|i| format!("{{\"p\":{p},\"i\":{i},\"even\":true}}\n"))
            .collect();
        let got =
            fs_fixture::read_path(&fs, &format!("orders/where/even=true/{p}/by-offset/0"), 4096);
        assert_eq!(String::from_utf8(got).unwrap(), want, "partition {p}");
    }
}
