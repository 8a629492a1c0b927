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
    let cases: Vec<(&str, Box<dyn Fn(&Value) -> bool>)> = vec![
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
