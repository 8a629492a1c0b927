//! Field indexes of filtered views (issue 46, item 3) on the filesystem logic: `<topic>/indexes`
//! declares, lists and drops them; a filtered stream answered with an index is exactly what a
//! reference filter (written here) keeps, and what the scan gave, while examining far fewer
//! records; after appends, several log dirs, and on a read-only mount (nothing written into
//! the data dir). Builds are waited for with `FieldIndexes::wait_idle`, never by sleeping.

use std::collections::HashMap;
use std::sync::Arc;

use crate::common::fs_fixture::{self, FsFixture};
use serde_json::Value;
use topicfs::fs::TopicFs;
use topicfs::fs::attr::OpenRequest;
use topicfs::storage::log_dirs::LogDirs;
use topicfs::storage::{LogConfig, SegmentMode};

const WRITE: OpenRequest = OpenRequest { read: false, write: true, truncate: false };

/// Record `i` of the test logs: JSON of every kind, arrays, missing fields, non-JSON.
fn line(i: usize) -> String {
    if i % 13 == 5 {
        return format!("plain {i}");
    }
    if i % 17 == 3 {
        return format!(r#"{{"id":{i}}}"#);
    }
    if i % 11 == 7 {
        return format!(r#"{{"id":{i},"user":["user-{}"],"qty":{{"a":1}}}}"#, i % 50);
    }
    let qty = if i % 9 == 0 { "2.5".to_string() } else { (i % 7).to_string() };
    let flag = ["true", "false", "null"][i % 3];
    let city = ["Oslo", "Lima", "Kyiv"][i % 3];
    format!(
        r#"{{"id":{i},"user":"user-{}","qty":{qty},"flag":{flag},"address":{{"city":"{city}"}}}}"#,
        (i * 7) % 50
    )
}

/// The reference: `FIELD OP VALUE` over a JSON text, as SEMANTICS.md states it.
fn holds(text: &str, path: &[&str], op: &str, value: &str) -> bool {
    let Ok(doc) = serde_json::from_str::<Value>(text) else { return false };
    let mut v = &doc;
    for seg in path {
        v = match v {
            Value::Object(m) => match m.get(*seg) {
                Some(x) => x,
                None => return false,
            },
            _ => return false,
        };
    }
    let literal = match value {
        "true" => Some(Value::Bool(true)),
        "false" => Some(Value::Bool(false)),
        "null" => Some(Value::Null),
        _ => None,
    };
    if let Some(l) = literal {
        return match op {
            "=" => *v == l,
            "!=" => *v != l,
            _ => false,
        };
    }
    let ord = match (v.as_f64(), value.parse::<f64>().ok().filter(|_| v.is_number())) {
        (Some(a), Some(b)) if op != "~" => a.partial_cmp(&b).unwrap(),
        _ => {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if op == "~" {
                return text.contains(value);
            }
            text.as_bytes().cmp(value.as_bytes())
        }
    };
    use std::cmp::Ordering::*;
    match op {
        "=" => ord == Equal,
        "!=" => ord != Equal,
        "<" => ord == Less,
        "<=" => ord != Greater,
        ">" => ord == Greater,
        ">=" => ord != Less,
        _ => unreachable!(),
    }
}

/// Whether `text` passes `filter` (conditions joined by `,`), by the reference.
fn keeps(text: &str, filter: &str) -> bool {
    filter.split(',').all(|c| {
        let at = c.find(['=', '!', '<', '>', '~']).unwrap();
        let rest = &c[at..];
        let op = ["!=", "<=", ">=", "=", "<", ">", "~"].into_iter().find(|o| rest.starts_with(o));
        let op = op.unwrap();
        let path: Vec<&str> = c[..at].split('.').collect();
        holds(text, &path, op, &rest[op.len()..])
    })
}

fn append(fs: &TopicFs, path: &str, lines: &[String]) {
    let ino = fs_fixture::ino(fs, path).unwrap();
    let fh = fs.open(ino, WRITE).unwrap().fh;
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs.write(fh, text.as_bytes(), None).unwrap();
    fs.release(fh).unwrap();
}

fn write_indexes(fs: &TopicFs, topic: &str, text: &str) -> Result<u32, topicfs::Error> {
    let ino = fs_fixture::ino(fs, &format!("{topic}/indexes")).unwrap();
    let fh = fs.open(ino, WRITE).unwrap().fh;
    let n = fs.write(fh, text.as_bytes(), None);
    fs.release(fh).unwrap();
    n
}

fn text(fs: &TopicFs, path: &str) -> String {
    String::from_utf8(fs_fixture::read_path(fs, path, 4096)).unwrap()
}

/// `name: value` of an `info` text.
fn info_value(info: &str, name: &str) -> String {
    info.lines().find_map(|l| l.strip_prefix(&format!("{name}: ")[..])).unwrap().to_string()
}

fn open_logs(dirs: &[(String, std::path::PathBuf)], mode: SegmentMode) -> Arc<LogDirs> {
    open_logs_with(dirs, mode, &[])
}

fn open_logs_with(
    dirs: &[(String, std::path::PathBuf)],
    mode: SegmentMode,
    settings: &[(&str, &str)],
) -> Arc<LogDirs> {
    let mut config = LogConfig::default();
    config.set("segment.bytes", "16384").unwrap();
    for (k, v) in settings {
        config.set(k, v).unwrap();
    }
    Arc::new(LogDirs::open(dirs, config, HashMap::new(), mode).unwrap())
}

const FILTERS: &[&str] = &[
    "user=user-7",
    "user!=user-7",
    "user<user-2",
    "user>=user-45",
    "user~-4",
    "qty=2.5",
    "qty>4",
    "qty<=1",
    "qty=3",
    "flag=true",
    "flag=null",
    "flag!=false",
    "address.city=Lima",
    "user=user-7,qty>3",
    "user=user-7,address.city=Oslo",
];

/// Every filter's stream equals the reference's lines, with and without an index, and the
/// indexed reads of a selective filter examine a fraction of the records.
#[test]
fn an_indexed_filtered_stream_is_the_reference_and_examines_fewer_records() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = open_logs(&[("d".into(), tmp.path().join("d"))], SegmentMode::Writable);
    logs.create_topic("orders", 1).unwrap();
    let fs = FsFixture::local(&logs).build();
    let lines: Vec<String> = (0..4000).map(line).collect();
    append(&fs, "orders/0/append", &lines);
    let reference = |filter: &str, lines: &[String]| -> String {
        lines.iter().filter(|l| keeps(l, filter)).map(|l| format!("{l}\n")).collect()
    };
    // Without an index: the scan.
    let scanned: Vec<String> =
        FILTERS.iter().map(|f| text(&fs, &format!("orders/where/{f}/0/by-offset/0"))).collect();
    for (f, got) in FILTERS.iter().zip(&scanned) {
        assert_eq!(*got, reference(f, &lines), "scan of {f}");
    }
    // Declared (the reads above declared them too), built, then read through the index.
    write_indexes(&fs, "orders", "user\nqty\nflag\naddress.city\n").unwrap();
    fs.field_indexes().wait_idle();
    let listed = text(&fs, "orders/indexes");
    fs.field_indexes().wait_idle();
    let listed_after = text(&fs, "orders/indexes");
    for field in ["user", "qty", "flag", "address.city"] {
        let l = listed_after.lines().find(|l| l.starts_with(&format!("{field} "))).unwrap();
        assert!(l.contains(" ready "), "{listed}\n{listed_after}");
    }
    let user = listed_after.lines().find(|l| l.starts_with("user ")).unwrap();
    let counts = user.split(' ').nth(2).unwrap();
    let (done, total) = counts.split_once('/').unwrap();
    assert_eq!(done, total, "{user}");
    assert!(done.parse::<usize>().unwrap() > 5, "{user}");
    for f in FILTERS {
        // Another registry per text ("%20" is not in any filter: same conditions, fresh counts).
        let fresh = format!("{f},id>=0");
        let got = text(&fs, &format!("orders/where/{fresh}/0/by-offset/0"));
        let want = reference(f, &lines)
            .lines()
            .filter(|l| keeps(l, "id>=0"))
            .map(|l| format!("{l}\n"))
            .collect::<String>();
        assert_eq!(got, want, "indexed {f}");
        let info = text(&fs, &format!("orders/where/{fresh}/0/info"));
        assert!(info_value(&info, "answered_by").starts_with("index ("), "{f}: {info}");
    }
    // A selective filter examines a fraction of the records: its candidates (the records whose
    // user is an array, every 11th, are candidates of every condition) and the active segment.
    let info = text(&fs, "orders/where/user=user-7,id>=0/0/info");
    let examined: u64 = info_value(&info, "records_examined").parse().unwrap();
    // A scan examines every record at least once (4000; `filtered_fs` checks it).
    assert!(examined < 4000 / 2, "{info}");

    // Appends: new sealed segments are indexed, the active one scanned; still the reference.
    let more: Vec<String> = (4000..6000).map(line).collect();
    append(&fs, "orders/0/append", &more);
    let all: Vec<String> = lines.iter().chain(&more).cloned().collect();
    text(&fs, "orders/indexes");
    fs.field_indexes().wait_idle();
    let after = text(&fs, "orders/indexes");
    assert!(after.lines().all(|l| l.contains(" ready ")), "{after}");
    for f in FILTERS {
        let got = text(&fs, &format!("orders/where/{f},id>=1/0/by-offset/0"));
        let want: String = all
            .iter()
            .filter(|l| keeps(l, f) && keeps(l, "id>=1"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(got, want, "after appends {f}");
    }

    // Dropped: no longer listed, reads scan.
    write_indexes(&fs, "orders", "-user\n").unwrap();
    assert!(!text(&fs, "orders/indexes").lines().any(|l| l.starts_with("user ")));
    // A bad field is EINVAL.
    let err = write_indexes(&fs, "orders", "@key\n").unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL);
}

/// A segment rewritten (by the cleaner, or deleted by retention) is another span: its index is
/// built again, never the old one used.
#[test]
fn indexes_follow_retention_and_are_rebuilt_never_stale() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = [("d".to_string(), tmp.path().join("d"))];
    let logs = open_logs_with(&dirs, SegmentMode::Writable, &[("retention.bytes", "120000")]);
    logs.create_topic("orders", 1).unwrap();
    let fs = FsFixture::local(&logs).build();
    let lines: Vec<String> = (0..3000).map(line).collect();
    append(&fs, "orders/0/append", &lines);
    write_indexes(&fs, "orders", "user\n").unwrap();
    fs.field_indexes().wait_idle();
    let before = text(&fs, "orders/where/user=user-7/0/by-offset/0");
    // Retention: the log start moves past the first segments.
    assert!(logs.enforce_retention().unwrap() > 0);
    text(&fs, "orders/indexes");
    fs.field_indexes().wait_idle();
    let kept: Vec<String> = (0..3000).map(line).collect();
    let start = logs.log("orders", 0).unwrap().log_start_offset().0 as usize;
    assert!(start > 0);
    let got = text(&fs, &format!("orders/where/user=user-7,id>=0/0/by-offset/{start}"));
    text(&fs, "orders/indexes");
    fs.field_indexes().wait_idle();
    let listed = text(&fs, "orders/indexes");
    assert!(listed.starts_with("user ready "), "{listed}");
    let want: String = kept[start..]
        .iter()
        .filter(|l| keeps(l, "user=user-7") && keeps(l, "id>=0"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(got, want);
    assert!(before.len() > got.len());
}

/// A read-only mount of a data dir without a cache dir: nothing is written into the data dir,
/// `indexes` says filtered reads scan, and they are still the reference.
#[test]
fn a_read_only_mount_writes_nothing_into_the_data_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = vec![("d".to_string(), tmp.path().join("d"))];
    {
        let logs = open_logs(&dirs, SegmentMode::Writable);
        logs.create_topic("orders", 1).unwrap();
        let fs = FsFixture::local(&logs).build();
        append(&fs, "orders/0/append", &(0..2000).map(line).collect::<Vec<_>>());
    }
    let listing = |dir: &std::path::Path| -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = walkdir(dir);
        out.sort();
        out
    };
    let before = listing(&tmp.path().join("d"));
    let logs = open_logs(&dirs, SegmentMode::ReadOnly);
    let fs = FsFixture::local(&logs).read_only(true).build();
    write_indexes(&fs, "orders", "user\n").unwrap();
    fs.field_indexes().wait_idle();
    let got = text(&fs, "orders/where/user=user-7/0/by-offset/0");
    let want: String =
        (0..2000).map(line).filter(|l| keeps(l, "user=user-7")).map(|l| format!("{l}\n")).collect();
    assert_eq!(got, want);
    let listed = text(&fs, "orders/indexes");
    assert!(listed.starts_with("user "), "{listed}");
    fs.field_indexes().wait_idle();
    assert_eq!(listing(&tmp.path().join("d")), before);
}

fn walkdir(dir: &std::path::Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let meta = e.metadata().unwrap();
        if meta.is_dir() {
            out.extend(walkdir(&e.path()));
        } else {
            out.push((e.path().display().to_string(), meta.len()));
        }
    }
    out
}

/// Several log dirs: each partition's indexes are its own.
#[test]
fn indexes_cover_the_partitions_of_several_log_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<(String, std::path::PathBuf)> =
        ["a", "b"].iter().map(|n| (n.to_string(), tmp.path().join(n))).collect();
    let logs = open_logs(&dirs, SegmentMode::Writable);
    logs.create_topic("orders", 2).unwrap();
    let fs = FsFixture::local(&logs).build();
    for p in 0..2 {
        let lines: Vec<String> = (0..1500).map(|i| line(i + p * 7)).collect();
        append(&fs, &format!("orders/{p}/append"), &lines);
    }
    write_indexes(&fs, "orders", "qty\n").unwrap();
    fs.field_indexes().wait_idle();
    text(&fs, "orders/indexes");
    fs.field_indexes().wait_idle();
    let listed = text(&fs, "orders/indexes");
    assert!(listed.starts_with("qty ready "), "{listed}");
    for p in 0..2 {
        let got = text(&fs, &format!("orders/where/qty>4/{p}/by-offset/0.json"));
        let want = (0..1500).map(|i| line(i + p * 7)).filter(|l| keeps(l, "qty>4")).count();
        assert_eq!(got.lines().count(), want, "partition {p}");
        let info = text(&fs, &format!("orders/where/qty>4/{p}/info"));
        assert!(info_value(&info, "answered_by").starts_with("index (qty, "), "{info}");
    }
}
