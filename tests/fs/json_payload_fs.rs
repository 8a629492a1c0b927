//! `-o json_payload=object` on the filesystem logic: every `.json` stream of the mount (a
//! partition's, the topic's merged one, by key, latest, filtered) shows payloads that are JSON
//! as JSON, with exact sizes, and `append.json` takes such lines back.

use std::collections::HashMap;
use std::sync::Arc;

use crate::common::fs_fixture::{self, FsFixture};
use serde_json::{Value, json};
use topicfs::fs::TopicFs;
use topicfs::source::TopicSource;
use topicfs::storage::log_dirs::LogDirs;
use topicfs::storage::{LogConfig, SegmentMode};
use topicfs::view::render::JsonPayload;

fn write(fs: &TopicFs, path: &str, bytes: &[u8]) {
    let ino = fs_fixture::ino(fs, path).unwrap();
    let request = topicfs::fs::attr::OpenRequest { read: false, write: true, truncate: false };
    let fh = fs.open(ino, request).unwrap().fh;
    fs.write(fh, bytes, None).unwrap();
    fs.release(fh).unwrap();
}

/// The payloads of the `.json` stream at `path`, checking its size is what a read returns.
fn payloads(fs: &TopicFs, path: &str) -> Vec<Value> {
    let bytes = fs_fixture::read_path(fs, path, 100);
    let ino = fs_fixture::ino(fs, path).unwrap();
    assert_eq!(fs.getattr(ino, None).unwrap().attr.size, bytes.len() as u64, "{path}");
    let text = String::from_utf8(bytes).unwrap();
    text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["payload"].clone()).collect()
}

#[test]
fn every_json_stream_shows_json_payloads_as_json_and_append_json_takes_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let given = vec![("d".to_string(), dir.path().to_path_buf())];
    let config = LogConfig::default();
    let logs = LogDirs::open(&given, config, HashMap::new(), SegmentMode::Writable).unwrap();
    logs.create_topic("orders", 1).unwrap();
    let fs = FsFixture::over(Arc::new(logs) as Arc<dyn TopicSource>)
        .build()
        .with_json_payload(JsonPayload::Object);
    let lines = concat!(
        r#"{"key":"k1","payload":{"user":"a","n":1}}"#,
        "\n",
        r#"{"key":"k2","payload":"not json"}"#,
        "\n",
        r#"{"key":"k1","payload":[1, {"user":"b"}]}"#,
        "\n",
    );
    write(&fs, "orders/0/append.json", lines.as_bytes());
    // append.json stored the JSON as its text without whitespace.
    let values = fs_fixture::read_path(&fs, "orders/0/by-offset/0", 100);
    assert_eq!(
        String::from_utf8(values).unwrap(),
        "{\"user\":\"a\",\"n\":1}\nnot json\n[1,{\"user\":\"b\"}]\n"
    );
    let all = vec![json!({"user":"a","n":1}), json!("not json"), json!([1, {"user":"b"}])];
    assert_eq!(payloads(&fs, "orders/0/by-offset/0.json"), all);
    assert_eq!(payloads(&fs, "orders/by-time/0.json"), all);
    let k1 = vec![all[0].clone(), all[2].clone()];
    assert_eq!(payloads(&fs, "orders/0/by-key/k1.json"), k1);
    assert_eq!(payloads(&fs, "orders/by-key/k1.json"), k1);
    assert_eq!(payloads(&fs, "orders/0/latest/k1.json"), vec![all[2].clone()]);
    assert_eq!(payloads(&fs, "orders/where/user=a/0/by-offset/0.json"), vec![all[0].clone()]);
    // Value lines are unchanged by the setting.
    assert_eq!(
        fs_fixture::read_path(&fs, "orders/where/user=a/0/by-offset/0", 100),
        b"{\"user\":\"a\",\"n\":1}\n"
    );
}
