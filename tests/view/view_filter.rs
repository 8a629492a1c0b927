//! Filtered streams (`where/<filter>/`, issue 46) over the real log engine: every filtered
//! stream is the rendering of exactly the records a reference filter written here keeps, in
//! every record format, from any start, with an exact size, growing with new matches only.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use topicfs::Error;
use topicfs::format::{NewRecord, Record, decode_batch};
use topicfs::source::{PartitionSource, ReadAnswer, ReadMode, Records, TopicSource};
use topicfs::storage::log_dirs::LogDirs;
use topicfs::storage::{LogConfig, SegmentMode};
use topicfs::view::Renderer;
use topicfs::view::filter::Filter;
use topicfs::view::spec::{Format, StreamSpec};
use topicfs::view::stream::{Stream, StreamRegistry};

fn full_read(s: &Stream) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let chunk = s.read_at(out.len() as u64, 1500).unwrap();
        if chunk.is_empty() {
            return out;
        }
        out.extend_from_slice(&chunk);
    }
}

/// A reference filter: whether it keeps a record, decided here from the record alone.
type Reference = fn(&Record<'_>) -> bool;

/// The record's value as JSON, if it is JSON.
fn json(r: &Record<'_>) -> Option<Value> {
    serde_json::from_slice(r.value?).ok()
}

/// Filters and what they must keep, stated apart from the daemon's grammar and evaluation.
fn cases() -> Vec<(&'static str, Reference)> {
    vec![
        ("user=user-3", |r| json(r).is_some_and(|v| v["user"] == "user-3")),
        ("user!=user-3", |r| json(r).is_some_and(|v| v.get("user").is_some_and(|u| u != "user-3"))),
        ("qty>=4", |r| json(r).is_some_and(|v| v["qty"].as_f64().is_some_and(|q| q >= 4.0))),
        ("qty<2,user~-1", |r| {
            json(r).is_some_and(|v| {
                v["qty"].as_f64().is_some_and(|q| q < 2.0)
                    && v["user"].as_str().is_some_and(|u| u.contains("-1"))
            })
        }),
        ("address.city=Oslo", |r| json(r).is_some_and(|v| v["address"]["city"] == "Oslo")),
        ("tags.1=b", |r| json(r).is_some_and(|v| v["tags"][1] == "b")),
        ("@key=k-7", |r| r.key == Some(b"k-7")),
        ("@value~plain", |r| r.value.is_some_and(|v| v.windows(5).any(|w| w == b"plain"))),
        ("@value=null", |r| r.value.is_none()),
        ("@header.trace=t-2", |r| {
            r.headers.iter().any(|h| h.key == b"trace" && h.value == Some(b"t-2"))
        }),
        ("nothing=at-all", |_| false),
    ]
}

/// Record `i` of the test log: JSON orders mostly, a few plain values and tombstones.
fn record(i: u64) -> NewRecord {
    let value = match i % 17 {
        0 => None,
        5 => Some(format!("plain text {i}").into_bytes()),
        _ => {
            let city = ["Oslo", "Lima", "Pune"][(i % 3) as usize];
            let tags = if i % 2 == 0 { r#"["a","b"]"# } else { r#"["b","a"]"# };
            Some(
                format!(
                    r#"{{"user":"user-{}","qty":{},"address":{{"city":"{city}"}},"tags":{tags},"n":{i}}}"#,
                    i % 7,
                    i % 6
                )
                .into_bytes(),
            )
        }
    };
    NewRecord {
        timestamp: 1_000 + i as i64,
        key: Some(format!("k-{}", i % 11).into_bytes()),
        value,
        headers: vec![(b"trace".to_vec(), Some(format!("t-{}", i % 5).into_bytes()))],
    }
}

/// The expected rendering in `format` of the records from offset `start` that `keep` keeps.
fn model(part: &dyn PartitionSource, format: Format, start: i64, keep: Reference) -> Vec<u8> {
    let renderer = Renderer::new(format, part.topic(), part.partition());
    let mut cursor = part.seek(part.summary().unwrap().log_start_offset).unwrap();
    let mut out = Vec::new();
    loop {
        let chunk = part
            .read(&cursor, 1 << 20, ReadMode::Batches)
            .and_then(ReadAnswer::into_chunk)
            .unwrap();
        if chunk.bytes.is_empty() {
            return out;
        }
        let mut at = 0;
        while at < chunk.bytes.len() {
            let batch = decode_batch(&chunk.bytes[at..]).unwrap();
            let info = batch.info().clone();
            for r in batch.records() {
                let r = r.unwrap();
                if r.offset.0 >= start && keep(&r) {
                    renderer.render(&info, &r, &mut out);
                }
            }
            at += info.size as usize;
        }
        cursor = chunk.next.unwrap();
    }
}

#[test]
fn filtered_streams_hold_exactly_the_records_the_reference_keeps_and_grow_with_new_matches() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = LogConfig::default();
    config.set("segment.bytes", "4096").unwrap();
    config.set("index.interval.bytes", "512").unwrap();
    config.set("retention.ms", "-1").unwrap();
    let given = vec![("d".to_string(), dir.path().to_path_buf())];
    let logs = LogDirs::open(&given, config, HashMap::new(), SegmentMode::Writable).unwrap();
    logs.create_topic("orders", 1).unwrap();
    let part = logs.partition("orders", 0).unwrap();
    let append = |from: u64, to: u64| {
        for i in (from..to).step_by(3) {
            let batch: Vec<NewRecord> = (i..(i + 3).min(to)).map(record).collect();
            part.append(Records::Owned(&batch)).unwrap();
        }
    };
    append(0, 600);
    assert!(part.segment_files().unwrap().segments().unwrap().len() > 5);
    let log_end = part.summary().unwrap().log_end_offset.0;
    for (text, keep) in cases() {
        let reg = StreamRegistry::new().with_filter(text, Filter::parse(text).unwrap());
        for format in [Format::Values, Format::Json] {
            for start in [0, 1, log_end / 3, log_end - 1, log_end] {
                let name = format!("{start}{}", format.suffix());
                let spec = StreamSpec::parse_by_offset(&name).unwrap();
                let s = reg.open(Arc::clone(&part), &spec, 0).unwrap();
                let want = model(part.as_ref(), format, start, keep);
                assert_eq!(full_read(&s), want, "{text} {name}");
                assert_eq!(s.size().unwrap(), want.len() as u64, "{text} {name}");
            }
        }
        let raw = StreamSpec::parse_by_offset("0.raw").unwrap();
        match reg.open(Arc::clone(&part), &raw, 0) {
            Err(Error::InvalidInput(why)) => assert!(why.contains("raw"), "{why}"),
            other => panic!("{text}: a filtered raw stream opened: {other:?}"),
        }
    }
    // An open stream follows new matches only: what it shows after appends is the reference
    // over the whole log, its earlier bytes unchanged.
    let (text, keep) = ("user=user-3", cases()[0].1);
    let reg = StreamRegistry::new().with_filter(text, Filter::parse(text).unwrap());
    let s =
        reg.open(Arc::clone(&part), &StreamSpec::parse_by_offset("0.json").unwrap(), 0).unwrap();
    let before = full_read(&s);
    append(600, 700);
    let after = full_read(&s);
    assert!(after.starts_with(&before) && after.len() > before.len());
    assert_eq!(after, model(part.as_ref(), Format::Json, 0, keep));
    assert_eq!(s.size().unwrap(), after.len() as u64);
    logs.shutdown().unwrap();
}
