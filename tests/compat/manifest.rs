//! Compares what topicfs's decoder reads from a `.log` file with a JSON list of batches written
//! by kafka-python (schema: `tests/compat/kafka_py.py`), and finds the venv's interpreter.
//!
//! Shared by `tests/compat/compat_kafka_python.rs` and `tests/compat/compat_fixtures.rs` through `#[path]`.

#![allow(dead_code)] // each test crate uses its own subset

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;
use topicfs::format::batch::increment_sequence;
use topicfs::format::{BatchInfo, Record, decode_batch, parse_batch_info, peek_entry};

/// Repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The venv interpreter with kafka-python (`TOPICFS_PYTHON`, default
/// `/opt/topicfs-venv/bin/python`, made by `scripts/install-deps`).
///
/// `None` (after printing why) when it is missing and we are not in CI; in CI (`CI=true`) a
/// missing interpreter fails the test, so the compatibility checks can never be skipped there.
pub fn python() -> Option<PathBuf> {
    let path = std::env::var_os("TOPICFS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/topicfs-venv/bin/python"));
    let usable = Command::new(&path)
        .args(["-c", "import kafka.record, kafka.codec as c; assert c.has_snappy() and c.has_lz4() and c.has_zstd()"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if usable {
        return Some(path);
    }
    let why = format!(
        "{} is not a Python with kafka-python and its codecs: run scripts/install-deps \
         (or set TOPICFS_PYTHON)",
        path.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
    None
}

/// Runs a script of `tests/compat/` with `args`; panics with its output unless it exits 0.
pub fn run_script(python: &Path, script: &str, args: &[&Path]) -> String {
    let out = Command::new(python)
        .arg(repo().join("tests/compat").join(script))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} failed ({}):\n{stdout}\n{stderr}", out.status);
    stdout
}

/// The bytes of base64 `text` (what [`b64`] and kafka_py.py write).
pub fn unb64(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    STANDARD.decode(text).expect("base64 from the script")
}

/// Base64 of `bytes`, or JSON null.
pub fn b64(bytes: Option<&[u8]>) -> Value {
    bytes.map_or(Value::Null, |b| Value::String(STANDARD.encode(b)))
}

/// JSON for one decoded batch, in the manifest schema (the fields this decoder knows).
fn batch_json(info: &BatchInfo, position: usize, records: &[Record<'_>]) -> Value {
    serde_json::json!({
        "position": position,
        "size": info.size,
        "base_offset": info.base_offset.0,
        "last_offset": info.last_offset.0,
        "magic": info.magic,
        "crc": info.crc,
        "compression": info.compression.name(),
        "timestamp_type": info.timestamp_type.name(),
        "is_transactional": info.is_transactional,
        "is_control": info.is_control,
        "producer_id": info.producer_id,
        "producer_epoch": info.producer_epoch,
        "base_sequence": info.base_sequence,
        "partition_leader_epoch": info.partition_leader_epoch,
        "base_timestamp": info.base_timestamp,
        "max_timestamp": info.max_timestamp,
        "records_count": info.records_count,
        "records": records.iter().map(record_json).collect::<Vec<_>>(),
    })
}

fn record_json(r: &Record<'_>) -> Value {
    let headers: Vec<Value> = r
        .headers
        .iter()
        .map(|h| serde_json::json!([String::from_utf8_lossy(h.key), b64(h.value)]))
        .collect();
    serde_json::json!({
        "offset": r.offset.0,
        "timestamp": r.timestamp,
        "key": b64(r.key),
        "value": b64(r.value),
        "headers": headers,
    })
}

/// Decodes every entry of `log` with topicfs (`peek_entry`, `decode_batch`, `parse_batch_info`)
/// and lists every difference from `expected` (manifest batches). Checked besides the manifest's
/// fields: the file is consumed exactly, the shallow header parse agrees with the full decode,
/// and v2 record sequences are `baseSequence + offsetDelta`.
pub fn compare_log(log: &[u8], expected: &[Value], what: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut decoded = Vec::new();
    let mut position = 0usize;
    while position < log.len() {
        let rest = &log[position..];
        let header = match peek_entry(rest) {
            Ok(Some(h)) => h,
            Ok(None) => {
                problems.push(format!("{what}: {} stray bytes at {position}", rest.len()));
                break;
            }
            Err(e) => {
                problems.push(format!("{what}: entry at {position}: {e}"));
                break;
            }
        };
        let batch = match decode_batch(rest) {
            Ok(b) => b,
            Err(e) => {
                problems.push(format!("{what}: batch at {position}: {e} (at +{})", e.at));
                break;
            }
        };
        let info = batch.info().clone();
        let mut records = Vec::new();
        for r in batch.records() {
            match r {
                Ok(r) => records.push(r),
                Err(e) => problems.push(format!("{what}: batch at {position}: record: {e}")),
            }
        }
        match parse_batch_info(rest) {
            Ok(shallow) => {
                if shallow.last_offset != info.last_offset || shallow.crc != info.crc {
                    problems.push(format!(
                        "{what}: batch at {position}: header parse {shallow:?} disagrees with \
                         decode {info:?}"
                    ));
                }
            }
            Err(e) => problems.push(format!("{what}: batch at {position}: header parse: {e}")),
        }
        if info.magic == 2 {
            for r in &records {
                let delta = (r.offset.0 - info.base_offset.0) as i32;
                let want = increment_sequence(info.base_sequence, delta);
                if r.sequence != want {
                    problems.push(format!(
                        "{what}: record {}: sequence {} instead of {want}",
                        r.offset, r.sequence
                    ));
                }
            }
        }
        decoded.push(batch_json(&info, position, &records));
        position += header.total_size();
    }
    if decoded.len() != expected.len() {
        problems.push(format!(
            "{what}: topicfs decoded {} batches, the manifest lists {}",
            decoded.len(),
            expected.len()
        ));
    }
    for (i, (got, want)) in decoded.iter().zip(expected).enumerate() {
        let Some(want) = want.as_object() else {
            problems.push(format!("{what}: manifest batch {i} is not an object"));
            continue;
        };
        let at = format!("{what}: batch {i} at position {}", got["position"]);
        for (field, w) in want {
            if field == "records" {
                continue;
            }
            if &got[field] != w {
                problems.push(format!("{at}: {field} is {}, kafka-python says {w}", got[field]));
            }
        }
        let got_records = got["records"].as_array().map_or(&[][..], Vec::as_slice);
        let want_records = want.get("records").and_then(Value::as_array);
        let Some(want_records) = want_records else { continue };
        if got_records.len() != want_records.len() {
            problems.push(format!(
                "{at}: {} records, kafka-python says {}",
                got_records.len(),
                want_records.len()
            ));
        }
        for (g, w) in got_records.iter().zip(want_records) {
            for (field, wv) in w.as_object().into_iter().flatten() {
                if &g[field] != wv {
                    problems.push(format!(
                        "{at}: record {}: {field} is {}, kafka-python says {wv}",
                        g["offset"], g[field]
                    ));
                }
            }
        }
    }
    problems
}

/// Panics listing `problems` unless there are none.
pub fn assert_no_problems(problems: &[String]) {
    assert!(problems.is_empty(), "{} mismatches:\n{}", problems.len(), problems.join("\n"));
}
