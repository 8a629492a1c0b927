//! The cluster client against an independent client, confluent-kafka (librdkafka), over the
//! same tansu broker, in both directions:
//!
//! - what our client produces (keys, null keys and values, headers, timestamps, every codec)
//!   confluent-kafka consumes identically;
//! - what confluent-kafka produces (every codec, keyed, several records per batch) our Fetch
//!   plus the crate's batch decoder reads record for record;
//! - not transactions: tansu 0.6 does not offer EndTxn, so confluent-kafka's transactional
//!   producer fails (`txn` in confluent_xcheck.py is kept for a broker that does;
//!   doc/cluster-brokers.md);
//! - ListOffsets by timestamp agrees with confluent-kafka's `offsets_for_times`.
//!
//! Needs the venv (`TOPICFS_PYTHON`, with confluent-kafka) and the tansu broker, both made by
//! `scripts/install-deps`; fails without them.

use crate::common;

use std::process::Command;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use common::tansu::Tansu;
use serde_json::{Value, json};
use topicfs::cluster::client::FetchOptions;
use topicfs::cluster::config::{IsolationLevel, parse_bootstrap};
use topicfs::cluster::{Client, ClientConfig};
use topicfs::format::{self, NewRecord, Offset};

const T0: i64 = 1_767_225_600_000;

fn python() -> String {
    std::env::var("TOPICFS_PYTHON").unwrap_or_else(|_| "/opt/topicfs-venv/bin/python".into())
}

/// Runs the confluent-kafka side; `Err(stderr)` when it exits with status 3 (unsupported).
fn xcheck(args: &[&str]) -> Result<Value, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/compat/confluent_xcheck.py");
    let out = Command::new(python()).arg(script).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if out.status.code() == Some(3) {
        return Err(stderr);
    }
    assert!(out.status.success(), "confluent_xcheck {args:?} failed: {stderr}");
    Ok(serde_json::from_slice(&out.stdout).unwrap())
}

fn client(t: &Tansu, settings: &[&str]) -> Client {
    let mut c = ClientConfig::default();
    c.set_pair("request.timeout.ms=10000").unwrap();
    for s in settings {
        c.set_pair(s).unwrap();
    }
    Client::connect(parse_bootstrap(&t.bootstrap()).unwrap(), c).unwrap()
}

fn b64(b: Option<&[u8]>) -> Value {
    b.map_or(Value::Null, |b| Value::String(B64.encode(b)))
}

/// Records (as JSON), the (producer id, transactional) of each record's batch, and the aborted
/// transactions (producer id, first offset) the broker listed.
type Fetched = (Vec<Value>, Vec<(i64, bool)>, Vec<(i64, i64)>);

/// Every record from offset 0 to the end, as confluent_xcheck.py prints them, plus for each
/// the (producer id, transactional) of its batch; control batches are skipped, aborted
/// transactions are reported separately.
fn fetch_all(c: &Client, topic: &str, isolation: IsolationLevel) -> Fetched {
    let opts = FetchOptions { isolation: Some(isolation), ..FetchOptions::default() };
    let (mut records, mut batches, mut aborted, mut next) =
        (Vec::new(), Vec::new(), Vec::new(), 0i64);
    loop {
        let f = c.fetch(topic, 0, Offset(next), opts).unwrap();
        aborted.extend(f.aborted_transactions.iter().map(|a| (a.producer_id, a.first_offset.0)));
        let end = if isolation == IsolationLevel::ReadCommitted && f.last_stable_offset.0 >= 0 {
            f.last_stable_offset.0
        } else {
            f.high_watermark.0
        };
        let buf: &[u8] = &f.records;
        let mut pos = 0;
        while let Ok(Some(h)) = format::peek_entry(&buf[pos..]) {
            if pos + h.total_size() > buf.len() {
                break;
            }
            let batch = format::decode_batch(&buf[pos..pos + h.total_size()]).unwrap();
            let info = batch.info().clone();
            if !info.is_control {
                for r in batch.records() {
                    let r = r.unwrap();
                    if r.offset.0 < next {
                        continue;
                    }
                    let headers: Vec<Value> = r
                        .headers
                        .iter()
                        .map(|h| json!([String::from_utf8(h.key.to_vec()).unwrap(), b64(h.value)]))
                        .collect();
                    records.push(json!({
                        "offset": r.offset.0, "timestamp": r.timestamp,
                        "key": b64(r.key), "value": b64(r.value), "headers": headers,
                    }));
                    batches.push((info.producer_id, info.is_transactional));
                }
            }
            next = next.max(info.last_offset.0 + 1);
            pos += h.total_size();
        }
        if next >= end {
            return (records, batches, aborted);
        }
    }
}

#[test]
fn cluster_what_we_produce_confluent_kafka_consumes_identically() {
    let t = Tansu::start();
    // Not snappy: tansu 0.6 cannot serve our xerial-framed snappy batches back to anyone
    // (doc/cluster-brokers.md).
    for codec in ["none", "gzip", "lz4", "zstd"] {
        let c = client(&t, &[&format!("compression.type={codec}")]);
        let topic = format!("ours-{codec}");
        c.create_topic(&topic, 1, &[]).unwrap();
        let records: Vec<NewRecord> = (0..12)
            .map(|i| NewRecord {
                timestamp: T0 + i * 250,
                key: (i % 4 != 1).then(|| format!("key{i}").into_bytes()),
                value: (i != 6)
                    .then(|| format!("{codec} v{i} {}", "z".repeat(i as usize * 11)).into_bytes()),
                headers: if i % 3 == 0 {
                    vec![(b"trace".to_vec(), Some(vec![i as u8, 0xff])), (b"nil".to_vec(), None)]
                } else {
                    vec![]
                },
            })
            .collect();
        c.produce(&topic, 0, &records[..7]).unwrap();
        c.produce(&topic, 0, &records[7..]).unwrap();
        let theirs = xcheck(&["consume", &t.addr(), &topic, "0", "12", "read_committed"]).unwrap();
        let want: Vec<Value> = records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let headers: Vec<Value> = r
                    .headers
                    .iter()
                    .map(|(k, v)| json!([String::from_utf8(k.clone()).unwrap(), b64(v.as_deref())]))
                    .collect();
                json!({"offset": i, "timestamp": r.timestamp, "key": b64(r.key.as_deref()),
                       "value": b64(r.value.as_deref()), "headers": headers})
            })
            .collect();
        assert_eq!(theirs, Value::Array(want), "{codec}");
    }
}

#[test]
fn cluster_what_confluent_kafka_produces_we_read_record_for_record() {
    let t = Tansu::start();
    let c = client(&t, &[]);
    // Not snappy: tansu 0.6 closes the Fetch connection on librdkafka's snappy batches
    // (doc/cluster-brokers.md). lz4 comes back re-encoded with linked blocks.
    for codec in ["none", "gzip", "lz4", "zstd"] {
        let topic = format!("theirs-{codec}");
        c.create_topic(&topic, 1, &[]).unwrap();
        let sent = xcheck(&["produce", &t.addr(), &topic, "0", codec, "40"]).unwrap();
        let (ours, batches, _) = fetch_all(&c, &topic, IsolationLevel::ReadUncommitted);
        let mut sent = sent.as_array().unwrap().clone();
        sent.sort_by_key(|r| r["offset"].as_i64().unwrap());
        let ours_sorted: Vec<Value> = ours.clone();
        assert_eq!(ours_sorted.len(), 40, "{codec}");
        for (o, s) in ours_sorted.iter().zip(&sent) {
            for field in ["offset", "timestamp", "key", "value", "headers"] {
                assert_eq!(o[field], s[field], "{codec}: {field} of {s}");
            }
        }
        // librdkafka batched them (linger.ms): fewer batches than records were decoded.
        assert_eq!(batches.len(), 40);
    }
}

#[test]
fn cluster_list_offsets_by_time_agrees_with_confluent_offsets_for_times() {
    let t = Tansu::start();
    let c = client(&t, &[]);
    c.create_topic("when", 1, &[]).unwrap();
    for chunk in 0..4 {
        let records: Vec<NewRecord> = (0..5)
            .map(|i| NewRecord {
                timestamp: T0 + (chunk * 5 + i) * 100,
                value: Some(b"v".to_vec()),
                ..NewRecord::default()
            })
            .collect();
        c.produce("when", 0, &records).unwrap();
    }
    let times: Vec<i64> =
        vec![T0 - 1, T0, T0 + 1, T0 + 450, T0 + 500, T0 + 1250, T0 + 1900, T0 + 1901];
    let args: Vec<String> = times.iter().map(ToString::to_string).collect();
    let addr = t.addr();
    let mut argv = vec!["offsets_for_times", addr.as_str(), "when", "0"];
    argv.extend(args.iter().map(String::as_str));
    let theirs = xcheck(&argv).unwrap();
    let ours: Vec<i64> = times
        .iter()
        .map(|&ts| c.list_offset("when", 0, ts).unwrap().map_or(-1, |o| o.offset.0))
        .collect();
    assert_eq!(Value::from(ours.clone()), theirs);
    // After the last record Kafka answers -1 (no record); tansu 0.6 answers 0 to both clients
    // (doc/cluster-brokers.md), so only the times up to the last record are pinned here.
    assert_eq!(ours[..times.len() - 1], [0, 0, 1, 5, 5, 13, 19]);
}
