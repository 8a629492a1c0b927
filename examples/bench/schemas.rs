//! The records-with-schemas figures of `topicfs-bench` (`--schemas`, issue 35): `.json`
//! streams of Avro values in the Confluent wire format, decoded by the mount, against the same
//! stream on a mount with `-o schemas=off` (the values as base64) and against fastavro decoding
//! the same values in Python (`scripts/bench-schemas.py`, the venv's interpreter), in one run.
//!
//! Data, generated once per run in `<work>/schemas-data`: `scripts/bench-schemas.py generate`
//! writes `--schema-records` values of an "order" schema (a long, strings, a nested record, an
//! enum, a union with null, ~100 bytes framed) with fastavro's `schemaless_writer`, and the
//! `_schemas` records Schema Registry writes for it; the engine appends both to a data dir
//! (topic `orders`, one partition, batches of [`BATCH_RECORDS`] in one 1 GiB segment; topic
//! `_schemas`, one record per batch as the registry's store writes them). With `--reuse-data`
//! both are kept for the next run, and reused when they hold `--schema-records` values.
//!
//! Figures, repetitions alternating in order (A B C, C B A, ...):
//! 1. `cat orders/0/by-offset/0.json` on a read-only mount with schemas (`_schemas` exists, so
//!    schemas are on);
//! 2. the same on a read-only mount with `-o schemas=off`;
//! 3. `bench-schemas.py decode`: for each value the header checked, the schema found by id,
//!    fastavro's `schemaless_reader`, `json.dumps`, written to /dev/null. Reading the file of
//!    values and splitting it are not timed (nor starting Python).
//!
//! Before timing, the record count of both streams and the decoded payload of three records
//! (against fastavro's Avro JSON encoding of the same values) are checked.

use super::*;

/// The topic of the Avro values.
const ORDERS: &str = "orders";

/// Runs `bench-schemas.py ARGS...`; its stdout.
fn script(args: &[&OsStr]) -> Result<String, String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/bench-schemas.py");
    let py = cluster::python();
    let out = Command::new(&py)
        .arg(path)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", py.display()))?;
    if !out.status.success() {
        return Err(format!(
            "bench-schemas.py {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("bench-schemas.py {args:?}: {e}"))
}

fn script_json(args: &[&OsStr]) -> Result<Value, String> {
    let out = script(args)?;
    serde_json::from_str(&out).map_err(|e| format!("bench-schemas.py {args:?}: {e}: {out}"))
}

/// The values of `values.bin` (each preceded by its 4-byte big-endian length).
fn read_values(path: &Path) -> Result<Vec<Vec<u8>>, String> {
    let data = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = vec![];
    let mut rest = data.as_slice();
    while !rest.is_empty() {
        let (len, tail) = rest.split_first_chunk::<4>().ok_or("values.bin: truncated length")?;
        let len = u32::from_be_bytes(*len) as usize;
        if tail.len() < len {
            return Err("values.bin: truncated value".into());
        }
        let (v, tail) = tail.split_at(len);
        out.push(v.to_vec());
        rest = tail;
    }
    Ok(out)
}

/// Writes the data dir: `_schemas` from `schemas.json`, `orders` from `values.bin`.
fn write_data_dir(dir: &Path, made: &Path, t0: i64) -> Result<(u64, u64), String> {
    let _ = fs::remove_dir_all(dir);
    let logs = LogDirs::open_dir(
        dir,
        bench_config(KAFKA_SEGMENT_BYTES),
        Default::default(),
        SegmentMode::Writable,
    )
    .map_err(|e| e.to_string())?;
    logs.create_topic("_schemas", 1).map_err(|e| e.to_string())?;
    logs.create_topic(ORDERS, 1).map_err(|e| e.to_string())?;
    let text = fs::read_to_string(made.join("schemas.json")).map_err(|e| e.to_string())?;
    let records: Vec<(String, Option<String>)> =
        serde_json::from_str(&text).map_err(|e| format!("schemas.json: {e}"))?;
    let log = logs.log("_schemas", 0).map_err(|e| e.to_string())?;
    for (key, value) in records {
        let r = NewRecord {
            timestamp: t0,
            key: Some(key.into_bytes()),
            value: value.map(String::into_bytes),
            headers: vec![],
        };
        log.append(&[r]).map_err(|e| e.to_string())?;
    }
    let values = read_values(&made.join("values.bin"))?;
    let n = values.len() as u64;
    let log = logs.log(ORDERS, 0).map_err(|e| e.to_string())?;
    let mut batch = Vec::with_capacity(BATCH_RECORDS);
    for (i, v) in values.into_iter().enumerate() {
        batch.push(NewRecord {
            timestamp: t0 + i as i64,
            key: None,
            value: Some(v),
            headers: vec![],
        });
        if batch.len() == BATCH_RECORDS {
            log.append(&batch).map_err(|e| e.to_string())?;
            batch.clear();
        }
    }
    if !batch.is_empty() {
        log.append(&batch).map_err(|e| e.to_string())?;
    }
    let bytes = log_bytes(&log);
    logs.shutdown().map_err(|e| e.to_string())?;
    Ok((n, bytes))
}

/// With `--reuse-data`: the log size and value bytes of a data dir kept from an earlier run
/// when its `orders` partition holds exactly `records` records and the values file is there.
fn kept_data(data: &Path, made: &Path, records: u64) -> Option<(u64, u64)> {
    let values = fs::metadata(made.join("values.bin")).ok()?.len();
    let logs = LogDirs::open_dir(
        data,
        bench_config(KAFKA_SEGMENT_BYTES),
        Default::default(),
        SegmentMode::ReadOnly,
    )
    .ok()?;
    let log = logs.log(ORDERS, 0).ok()?;
    (log.log_end_offset().0 as u64 == records).then(|| (log_bytes(&log), values - 4 * records))
}

/// The lines of a `.json` stream with the parsed line `i` (0-based) for each of `pick`.
fn count_and_pick(path: &Path, pick: &[u64]) -> Result<(u64, Vec<Value>), String> {
    use std::io::BufRead;
    let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = 0;
    let mut picked = vec![Value::Null; pick.len()];
    for line in std::io::BufReader::with_capacity(1 << 20, f).lines() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(i) = pick.iter().position(|p| *p == lines) {
            picked[i] = serde_json::from_str(&line)
                .map_err(|e| format!("{} line {}: {e}", path.display(), lines + 1))?;
        }
        lines += 1;
    }
    Ok((lines, picked))
}

pub fn run(a: &Args, report: &mut Report) -> Result<(), String> {
    let records = a.schema_records.max(1);
    let reps = a.reps.unwrap_or(3).max(1);
    let made = a.work.join("schemas-made");
    let data = a.work.join("schemas-data");
    let kept = a.reuse_data.then(|| kept_data(&data, &made, records)).flatten();
    let (n, log_size, value_bytes) = match kept {
        Some((log_size, value_bytes)) => (records, log_size, value_bytes),
        None => {
            eprintln!("schemas: generating {records} Avro values with fastavro ...");
            let g = script_json(&[
                OsStr::new("generate"),
                made.as_os_str(),
                OsStr::new(&records.to_string()),
            ])?;
            let t0 = now_ms() - records as i64 - 60_000;
            let (n, log_size) = write_data_dir(&data, &made, t0)?;
            let value_bytes = g["bytes"].as_u64().unwrap_or(0);
            report.notes.push(format!(
                "schemas: {n} Avro values ({:.1} bytes each on average, framed) written by \
                 fastavro in {:.1} s, appended by the engine: {:.1} MB of log",
                value_bytes as f64 / n as f64,
                g["seconds"].as_f64().unwrap_or(f64::NAN),
                log_size as f64 / 1e6
            ));
            (n, log_size, value_bytes)
        }
    };

    let mnt = a.work.join("mnt");
    let mnt_off = a.work.join("mnt-plain");
    let probe = format!("{ORDERS}/0");
    let (m, _) = Mount::start(&a.topicfs, &data, &mnt, &["--read-only"], &probe, &a.work)?;
    let (m_off, _) = Mount::start(
        &a.topicfs,
        &data,
        &mnt_off,
        &["--read-only", "-o", "schemas=off"],
        &probe,
        &a.work,
    )?;
    let json_of = |root: &Path| root.join(ORDERS).join("0").join("by-offset").join("0.json");
    let (with, without) = (json_of(&mnt), json_of(&mnt_off));

    // The check: every record on both mounts; three payloads as fastavro encodes them.
    let pick = [0, 3, n - 1];
    let (lines, picked) = count_and_pick(&with, &pick)?;
    let (lines_off, picked_off) = count_and_pick(&without, &pick)?;
    if lines != n || lines_off != n {
        return Err(format!("{n} records: {lines} lines with schemas, {lines_off} without"));
    }
    let values = made.join("values.bin");
    let schemas = made.join("schemas.json");
    for ((i, line), off) in pick.iter().zip(&picked).zip(&picked_off) {
        let shown = script(&[
            OsStr::new("show"),
            values.as_os_str(),
            schemas.as_os_str(),
            OsStr::new(&i.to_string()),
        ])?;
        let expected: Value = serde_json::from_str(&shown).map_err(|e| format!("{e}: {shown}"))?;
        if line["payload"] != expected || line["payload_schema_id"] != json!(1) {
            return Err(format!("record {i}: the mount shows {line}, fastavro {expected}"));
        }
        if !off["payload"].is_string() || off.get("payload_schema_id").is_some() {
            return Err(format!("record {i} with schemas=off: {off}"));
        }
    }

    eprintln!("schemas: cat .json with schemas, without, fastavro ({reps} repetitions) ...");
    let cat = |p: &Path| format!("cat {} > /dev/null", sh_quote(p));
    let (cat_with, cat_without) = (cat(&with), cat(&without));
    time_sh(&cat_with)?; // warm: page cache, the mount's schema
    time_sh(&cat_without)?;
    let decode = [OsStr::new("decode"), values.as_os_str(), schemas.as_os_str()];
    let mut t: [Vec<f64>; 3] = [vec![], vec![], vec![]];
    let (mut cpu_with, mut cpu_without) = (vec![], vec![]);
    let mut json_bytes = [0u64; 3];
    for rep in 0..reps {
        let order: [usize; 3] = if rep % 2 == 0 { [0, 1, 2] } else { [2, 1, 0] };
        for i in order {
            match i {
                0 => {
                    let c0 = process_cpu_ns(m.pid());
                    t[0].push(time_sh(&cat_with)?);
                    cpu_with.push((process_cpu_ns(m.pid()) - c0) as f64 / n as f64);
                }
                1 => {
                    let c0 = process_cpu_ns(m_off.pid());
                    t[1].push(time_sh(&cat_without)?);
                    cpu_without.push((process_cpu_ns(m_off.pid()) - c0) as f64 / n as f64);
                }
                _ => {
                    let v = script_json(&decode)?;
                    if v["records"].as_u64() != Some(n) {
                        return Err(format!("fastavro decoded {v}, expected {n} records"));
                    }
                    json_bytes[2] = v["json_bytes"].as_u64().unwrap_or(0);
                    t[2].push(cluster::seconds_of(&v)?);
                }
            }
        }
    }
    json_bytes[0] = fs::metadata(&with).map_err(|e| e.to_string())?.len();
    json_bytes[1] = fs::metadata(&without).map_err(|e| e.to_string())?.len();
    m.stop()?;
    m_off.stop()?;

    let ratio = |base: &[f64]| -> Vec<f64> { base.iter().zip(&t[0]).map(|(b, s)| b / s).collect() };
    let (r_off, r_py) = (ratio(&t[1]), ratio(&t[2]));
    let s: Vec<Stat> = t.iter().map(|x| stat(x)).collect();
    let rate = |st: &Stat, bytes: u64| {
        format!(
            "{} rec/s ({}..{}), {:.0} MB/s",
            fmt_rate(n as f64 / st.median),
            fmt_rate(n as f64 / st.max),
            fmt_rate(n as f64 / st.min),
            bytes as f64 / st.median / 1e6
        )
    };
    let (ro, rp) = (stat(&r_off), stat(&r_py));
    report.row(
        "schemas",
        format!("cat by-offset/0.json, {n} Avro values decoded vs the same with schemas=off"),
        rate(&s[0], json_bytes[0]),
        format!("schemas=off (base64) {}", rate(&s[1], json_bytes[1])),
        format!("{:.2} ({:.2}..{:.2})", ro.median, ro.min, ro.max),
        "",
        None,
    );
    report.row(
        "schemas",
        format!("cat by-offset/0.json, {n} Avro values decoded vs fastavro + json.dumps"),
        rate(&s[0], json_bytes[0]),
        format!("fastavro {}", rate(&s[2], json_bytes[2])),
        format!("{:.2} ({:.2}..{:.2})", rp.median, rp.min, rp.max),
        "",
        None,
    );
    report.row(
        "CPU",
        "daemon CPU per record, .json with schemas (Avro decoded) / schemas=off",
        format!("{:.0} ns", stat(&cpu_with).median),
        format!("{:.0} ns", stat(&cpu_without).median),
        "",
        "",
        None,
    );
    report.notes.push(
        "schemas: fastavro's time excludes starting Python and reading the file of values; \
         its JSON is the value alone (json.dumps of what schemaless_reader returns), the \
         mount's lines also carry offset, timestamp and the schema id"
            .into(),
    );
    report.put(
        "schemas",
        json!({"records": n, "reps": reps, "log_bytes": log_size, "value_bytes": value_bytes,
               "json_bytes_with_schemas": json_bytes[0], "json_bytes_schemas_off": json_bytes[1],
               "json_bytes_fastavro": json_bytes[2],
               "seconds_with_schemas": t[0], "seconds_schemas_off": t[1],
               "seconds_fastavro": t[2],
               "ratio_to_schemas_off": r_off, "ratio_to_fastavro": r_py,
               "daemon_cpu_ns_per_record_with_schemas": cpu_with,
               "daemon_cpu_ns_per_record_schemas_off": cpu_without}),
    );
    if !a.reuse_data {
        let _ = fs::remove_dir_all(&data);
        let _ = fs::remove_dir_all(&made);
    }
    Ok(())
}
