//! The rendering alone, in-process: CPU per record of value lines and of `.json` (kcat's
//! envelope, and with `-o json_payload=object`) over 1,000,000 JSON values of about 127 bytes,
//! in batches of 1,000 (issue 47: `.json` at the speed of value lines).
//!
//!     cargo run --release -p topicfs-view --example render-json [RECORDS]
//!
//! Prints the best of 5 repetitions of each (CPU time of the thread), and the ratio of
//! `.json`'s records/s to value lines'; `json-only` after RECORDS skips the Avro figures.
//! No FUSE, no disk: what the daemon's rendering costs, not what a read costs.

use std::time::Instant;

use topicfs_format::{BatchSpec, NewRecord, Offset, decode_batch, encode_batch};
use topicfs_view::render::{ByteCounter, JsonPayload, Renderer, render_value};
use topicfs_view::spec::Format;

fn value(i: u64) -> Vec<u8> {
    format!(
        r#"{{"id":{i},"user":"user-{}","item":"pen","qty":{},"address":{{"city":"Oslo","zip":"0150"}},"ok":true,"note":"leave at the door"}}"#,
        i % 100_000,
        i % 7
    )
    .into_bytes()
}

fn main() {
    let records: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let batches: Vec<Vec<u8>> = (0..records.div_ceil(1000))
        .map(|b| {
            let recs: Vec<NewRecord> = (b * 1000..((b + 1) * 1000).min(records))
                .map(|i| NewRecord {
                    timestamp: 1_764_662_400_000 + i as i64,
                    key: Some(format!("k{}", i % 1000).into_bytes()),
                    value: Some(value(i)),
                    headers: Vec::new(),
                })
                .collect();
            let spec = BatchSpec { base_offset: Offset(b as i64 * 1000), ..BatchSpec::default() };
            encode_batch(&spec, &recs).expect("encode")
        })
        .collect();
    let value_bytes: usize = (0..records.min(1000)).map(|i| value(i).len()).sum::<usize>()
        / records.clamp(1, 1000) as usize;
    println!("{records} records, values of about {value_bytes} bytes");
    let json = Renderer::new(Format::Json, "orders", 0);
    let objects = json.clone().with_json_payload(JsonPayload::Object);
    type Run<'a> = (&'a str, Box<dyn Fn(&mut Vec<u8>) + 'a>);
    let mut runs: Vec<Run> = vec![
        (
            "value lines",
            Box::new(|out: &mut Vec<u8>| {
                for b in &batches {
                    let batch = decode_batch(b).expect("decode");
                    for r in batch.records() {
                        render_value(r.expect("record").value, out);
                        if out.len() > 1 << 20 {
                            out.clear();
                        }
                    }
                }
            }),
        ),
        (
            ".json",
            Box::new(|out: &mut Vec<u8>| {
                for b in &batches {
                    let batch = decode_batch(b).expect("decode");
                    for r in batch.records() {
                        json.render(batch.info(), &r.expect("record"), out);
                        if out.len() > 1 << 20 {
                            out.clear();
                        }
                    }
                }
            }),
        ),
        (
            ".json, -o json_payload=object",
            Box::new(|out: &mut Vec<u8>| {
                for b in &batches {
                    let batch = decode_batch(b).expect("decode");
                    for r in batch.records() {
                        objects.render(batch.info(), &r.expect("record"), out);
                        if out.len() > 1 << 20 {
                            out.clear();
                        }
                    }
                }
            }),
        ),
        (
            ".json sized (ByteCounter)",
            Box::new(|_out: &mut Vec<u8>| {
                let mut n = ByteCounter(0);
                for b in &batches {
                    let batch = decode_batch(b).expect("decode");
                    for r in batch.records() {
                        json.render(batch.info(), &r.expect("record"), &mut n);
                    }
                }
                std::hint::black_box(n);
            }),
        ),
    ];
    if std::env::args().nth(2).as_deref() != Some("json-only") {
        extra_runs(&batches, &mut runs);
    }
    let mut base = None;
    for (name, run) in &runs {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let mut out = Vec::with_capacity(2 << 20);
            let (t, cpu) = (Instant::now(), cpu_ns());
            run(&mut out);
            // CPU time when the kernel says (a loaded machine stretches the wall clock).
            let spent = match (cpu, cpu_ns()) {
                (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
                _ => t.elapsed().as_secs_f64(),
            };
            best = best.min(spent);
            std::hint::black_box(out);
        }
        let ns = best * 1e9 / records as f64;
        let base_ns = *base.get_or_insert(ns);
        println!(
            "{name:<40} {ns:>7.1} ns/record  {:>6.2} M rec/s  ratio to value lines {:.2}",
            records as f64 / best / 1e6,
            base_ns / ns
        );
    }
}

/// This thread's time on a CPU so far, in ns (`/proc/thread-self/schedstat`).
fn cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The Avro value of record `i` (a record like the JSON values above), as the bench's
/// `--schemas` data: decoded to JSON by building a `serde_json::Value` and serializing it (as
/// before), and written as JSON while read.
const AVRO: &str = r#"{"type":"record","name":"Order","fields":[
  {"name":"id","type":"long"},{"name":"user","type":"string"},{"name":"item","type":"string"},
  {"name":"qty","type":"int"},
  {"name":"address","type":{"type":"record","name":"Address","fields":[{"name":"city","type":"string"},{"name":"zip","type":"string"}]}},
  {"name":"ok","type":"boolean"},{"name":"note","type":"string"}]}"#;

#[allow(clippy::type_complexity)]
fn extra_runs<'a>(
    _batches: &'a [Vec<u8>],
    runs: &mut Vec<(&'a str, Box<dyn Fn(&mut Vec<u8>) + 'a>)>,
) {
    use topicfs_schema::avro::AvroCodec;
    let codec = Box::leak(Box::new(AvroCodec::compile(AVRO, &[]).expect("schema")));
    let bodies: &'a Vec<Vec<u8>> = Box::leak(Box::new(
        (0..1_000_000u64)
            .map(|i| {
                let v: serde_json::Value = serde_json::from_slice(&value(i)).expect("json");
                codec.from_json(&v, "payload").expect("encode")
            })
            .collect(),
    ));
    let codec: &'a AvroCodec = codec;
    runs.push((
        "Avro body to Value to JSON text",
        Box::new(move |_out: &mut Vec<u8>| {
            let mut n = 0;
            for b in bodies {
                let v = codec.to_json(b).expect("decode");
                n += serde_json::to_string(&v).expect("text").len();
            }
            std::hint::black_box(n);
        }),
    ));
    runs.push((
        "Avro body written as JSON text",
        Box::new(move |_out: &mut Vec<u8>| {
            let mut n = 0;
            for b in bodies {
                n += codec.to_json_text(b).expect("decode").len();
            }
            std::hint::black_box(n);
        }),
    ));
}
