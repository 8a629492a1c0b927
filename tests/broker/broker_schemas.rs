//! Records with schemas through a real mount: the fixture in `tests/fixtures/schemas-v1` (a
//! `_schemas` topic as Confluent Schema Registry writes it, and topics whose keys and values are
//! Avro (fastavro), Protobuf (Google's protobuf package) and JSON Schema in the Confluent wire
//! format; see its README). Every `.json` line is compared, field by field, with what those
//! libraries decode.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::corpus::copy_tree;
use common::{Dirs, MountGuard};
use serde_json::Value;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schemas-v1")
}

fn manifest() -> Value {
    serde_json::from_slice(&fs::read(fixture().join("manifest.json")).unwrap()).unwrap()
}

fn mount(args: &[&str]) -> MountGuard {
    let dirs = Dirs::new();
    copy_tree(&fixture().join("log-dir"), &dirs.data());
    let source = dirs.data().into_os_string();
    MountGuard::foreground_source(dirs, &source, args, Stdio::inherit())
}

pub(super) fn json_lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// `got` equals `want`, except that a number may be the shortest decimal of the same 32-bit
/// float (an Avro `float`, printed as Java's `Float.toString` prints it) where the reference
/// (Python, which has only doubles) prints the double expansion of that float.
pub(super) fn same_json(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Number(g), Value::Number(w)) if g != w => {
            let (Some(g), Some(w)) = (g.as_f64(), w.as_f64()) else { return false };
            let as_f32 = g as f32;
            as_f32 == w as f32 && format!("{as_f32:e}").parse::<f64>().ok() == Some(g)
        }
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(g, w)| same_json(g, w))
        }
        (Value::Object(g), Value::Object(w)) => {
            g.len() == w.len() && g.iter().all(|(k, v)| w.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => got == want,
    }
}

/// Differences between the `field` ("key" or "payload") of `line` and `want` (the manifest's
/// expected key or value).
fn check_field(line: &Value, field: &str, want: &Value, what: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let id_field = format!("{field}_schema_id");
    let error_field = format!("{field}_schema_error");
    match want["error"].as_str() {
        None if want.get("tombstone").is_some() => {
            if !line[field].is_null() {
                problems.push(format!("{what}: a tombstone shows {}", line[field]));
            }
        }
        None if want["schema_id"].is_null() => {
            if line.get(&id_field).is_some() || line.get(&error_field).is_some() {
                problems.push(format!("{what}: no schema expected, got {line}"));
            }
        }
        None => {
            if !same_json(&line[field], &want["json"]) {
                problems.push(format!("{what}: {field} is {}, want {}", line[field], want["json"]));
            }
            if line[&id_field] != want["schema_id"] {
                problems.push(format!("{what}: {id_field} is {}", line[&id_field]));
            }
            if line.get(&error_field).is_some() {
                problems.push(format!("{what}: unexpected {error_field}: {}", line[&error_field]));
            }
        }
        // Not in the wire format (first byte not 0): shown as bytes, nothing else.
        Some("not framed" | "magic byte") => {
            if line.get(&error_field).is_some() || line.get(&id_field).is_some() {
                problems.push(format!("{what}: not framed, yet {line}"));
            }
        }
        // Framed but not decodable: bytes as before, with the reason (and the id it names).
        Some(kind) => {
            let error = line[&error_field].as_str().unwrap_or_default();
            if error.is_empty() {
                problems.push(format!("{what}: {kind}: no {error_field} in {line}"));
            }
            if !want["schema_id"].is_null() && line[&id_field] != want["schema_id"] {
                problems.push(format!("{what}: {kind}: {id_field} is {}", line[&id_field]));
            }
        }
    }
    problems
}

#[test]
fn values_with_schemas_read_as_the_reference_libraries_decode_them() {
    let m = mount(&["--read-only"]);
    let want = manifest();
    let mut problems = Vec::new();
    let mut checked = 0;
    for r in want["records"].as_array().unwrap() {
        let topic = r["topic"].as_str().unwrap();
        if topic == "_schemas" {
            continue;
        }
        let (p, offset) = (r["partition"].as_u64().unwrap(), r["offset"].as_u64().unwrap());
        let lines = json_lines(&m.path(&format!("{topic}/{p}/by-offset/{offset}.json")));
        let line = &lines[0];
        assert_eq!(line["offset"].as_u64(), Some(offset));
        let what = format!("{topic}-{p}@{offset}");
        if let Some(key) = r.get("expected_key") {
            problems.extend(check_field(line, "key", key, &what));
        }
        problems.extend(check_field(line, "payload", &r["expected_value"], &what));
        checked += 1;
    }
    assert!(problems.is_empty(), "{checked} records, problems:\n{}", problems.join("\n"));
    assert!(checked >= 30, "{checked}");
    // The same through a topic-level stream, and jq selects on a decoded field.
    let out = common::sh(&format!(
        "jq -c 'select(.payload.customer == \"alice\") | .payload.id' {}",
        m.path("orders/by-time/0.json").display()
    ));
    assert_eq!(out, "0\n6\n");
    m.unmount();
}

#[test]
fn schemas_off_shows_the_bytes_and_sizes_are_exact_either_way() {
    for args in [&["--read-only", "-o", "schemas=off"][..], &["--read-only"][..]] {
        let m = mount(args);
        let path = m.path("orders/1/by-offset/0.json");
        let bytes = fs::read(&path).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), bytes.len() as u64, "{args:?}");
        let lines = json_lines(&path);
        let decoded = lines.iter().filter(|l| l.get("payload_schema_id").is_some()).count();
        if args.contains(&"schemas=off") {
            assert_eq!(decoded, 0);
            assert!(lines.iter().all(|l| l["payload"].is_string() || l["payload"].is_null()));
        } else {
            assert_eq!(decoded, 8, "6 good, the unknown id and the truncated one name theirs");
        }
        // Value lines stay the raw values.
        let raw = fs::read(m.path("orders/1/by-offset/0")).unwrap();
        assert!(raw.starts_with(&[0, 0, 0, 0, 3]), "{:?}", &raw[..8]);
        m.unmount();
    }
}

pub(super) fn python() -> String {
    std::env::var("TOPICFS_PYTHON").unwrap_or_else(|_| "/opt/topicfs-venv/bin/python".into())
}

/// What fastavro / protobuf make of the records of `log` (a `.log` file), by
/// `tests/compat/schema_check.py`: one JSON object per record.
fn reference_decode(log: &Path) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat/schema_check.py");
    let out = std::process::Command::new(python())
        .arg(script)
        .arg(log)
        .arg(fixture().join("manifest.json"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn append_json_encodes_with_a_schema_and_the_reference_library_decodes_it() {
    let m = mount(&[]);
    // A consumer group's next.json (a new group starts at the log start) decodes the same way.
    fs::create_dir(m.path("orders/groups/readers")).unwrap();
    let next = json_lines(&m.path("orders/groups/readers/0/next.json"));
    assert_eq!(next.len(), 8);
    assert_eq!(next[0]["payload"]["customer"], "alice", "{}", next[0]);
    assert_eq!(next[0]["key_schema_id"], 2);
    let append = m.path("orders/0/append.json");
    let order = r#"{"id":100,"customer":"zoe","total":{"currency":"EUR","units":7,"cents":50},"status":"PAID","items":["a"],"coupon":{"string":"X1"}}"#;
    let lines = format!(
        "{{\"key\":\"zoe\",\"key_subject\":\"orders-key\",\"payload\":{order},\"payload_schema_id\":4}}\n\
         {{\"key\":\"zoe\",\"key_schema_id\":2,\"payload\":{order},\"payload_subject\":\"orders-value\"}}\n"
    );
    fs::write(&append, lines).unwrap();
    // A payload that does not match: refused naming the field, nothing appended.
    let bad = r#"{"payload":{"id":"nope"},"payload_schema_id":4}"#;
    let err = fs::write(&append, format!("{bad}\n")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
    // Read back decoded: both lines, v2 (id 4, the latest live version of orders-value).
    let back = json_lines(&m.path("orders/0/by-offset/8.json"));
    assert_eq!(back.len(), 2, "{back:?}");
    let want: Value = serde_json::from_str(order).unwrap();
    for line in &back {
        assert!(same_json(&line["payload"], &want), "{line}");
        assert_eq!(line["payload_schema_id"], 4);
        assert_eq!(line["key"], "zoe");
        assert_eq!(line["key_schema_id"], 2);
    }
    // The bytes on disk, as fastavro reads them from the segment file.
    let mut decoded = Vec::new();
    for entry in fs::read_dir(m.path("orders/0/segments")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            decoded.extend(reference_decode(&path));
        }
    }
    let appended: Vec<&Value> =
        decoded.iter().filter(|d| d["offset"].as_u64() >= Some(8)).collect();
    assert_eq!(appended.len(), 2, "{decoded:?}");
    for d in appended {
        assert_eq!(d["schema_id"], 4, "{d}");
        assert!(same_json(&d["value"], &want), "{d}");
    }
    m.unmount();
}

#[test]
fn a_mount_without_schemas_refuses_schema_fields_in_append_json_and_appends_nothing() {
    let m = mount(&["-o", "schemas=off"]);
    let append = m.path("orders/0/append.json");
    let before = fs::read(m.path("orders/0/by-offset/0")).unwrap();
    // What a `.json` line of a mount with schemas says of a value it could not decode, and a
    // payload naming a schema: the write fails with EINVAL, nothing appended.
    for line in [
        r#"{"payload":"AAAAAAQ=","payload_schema_error":"unknown schema id 99"}"#,
        r#"{"key":"k","key_schema_error":"unknown schema id 99"}"#,
        r#"{"payload":{"id":1},"payload_schema_id":4}"#,
        r#"{"payload":{"id":1},"payload_subject":"orders-value"}"#,
    ] {
        let mut file = fs::OpenOptions::new().append(true).open(&append).unwrap();
        let err =
            std::io::Write::write_all(&mut file, format!("{line}\n").as_bytes()).expect_err(line);
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{line}: {err}");
    }
    assert_eq!(fs::read(m.path("orders/0/by-offset/0")).unwrap(), before);
    m.unmount();
}

#[test]
fn a_topics_schemas_are_files() {
    let m = mount(&["--read-only"]);
    let ls = |m: &MountGuard, rel: &str| common::sh(&format!("ls {}", m.path(rel).display()));
    assert!(ls(&m, "orders").contains("schemas\n"), "{}", ls(&m, "orders"));
    assert_eq!(ls(&m, "orders/schemas"), "orders-key\norders-value\n");
    // v3 is soft-deleted: not listed, and latest is v2.
    assert_eq!(ls(&m, "orders/schemas/orders-value"), "1\n2\nlatest\nversions\n");
    let versions = fs::read_to_string(m.path("orders/schemas/orders-value/versions")).unwrap();
    assert_eq!(versions, "1 3 AVRO\n2 4 AVRO\n");
    let want = manifest();
    let v2 = want["subjects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["subject"] == "orders-value" && s["version"] == 2)
        .unwrap();
    let text = fs::read_to_string(m.path("orders/schemas/orders-value/2")).unwrap();
    assert_eq!(text.trim_end(), v2["schema"].as_str().unwrap());
    assert_eq!(fs::read_to_string(m.path("orders/schemas/orders-value/latest")).unwrap(), text);
    assert_eq!(ls(&m, "payments/schemas"), "payments-value\n");
    let proto = fs::read_to_string(m.path("payments/schemas/payments-value/1")).unwrap();
    assert!(proto.contains("message Order"), "{proto}");
    assert!(!m.path("orders/schemas/orders-value/3").exists(), "a deleted version");
    assert!(!m.path("orders/schemas/other-value").exists());
    m.unmount();
    // Without schemas, no schemas/ directory.
    let m = mount(&["--read-only", "-o", "schemas=off"]);
    assert!(!ls(&m, "orders").contains("schemas"));
    assert!(!m.path("orders/schemas").exists());
    m.unmount();
}

/// `tests/compat/registry_server.py` serving the fixture's schemas over HTTP with basic auth;
/// killed on drop.
struct RegistryServer {
    child: std::process::Child,
    port: u16,
}

impl RegistryServer {
    fn start(user_info: &str) -> RegistryServer {
        use std::io::BufRead;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat/registry_server.py");
        let mut child = std::process::Command::new("python3")
            .arg(script)
            .arg(fixture().join("manifest.json"))
            .arg(user_info)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let stdout = child.stdout.take().unwrap();
        std::io::BufReader::new(stdout).read_line(&mut line).unwrap();
        RegistryServer { child, port: line.trim().parse().unwrap() }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for RegistryServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A copy of the fixture without its `_schemas` topic: the schemas come from elsewhere.
fn mount_without_schemas_topic(args: &[&str]) -> MountGuard {
    let dirs = Dirs::new();
    copy_tree(&fixture().join("log-dir"), &dirs.data());
    fs::remove_dir_all(dirs.data().join("_schemas-0")).unwrap();
    let source = dirs.data().into_os_string();
    MountGuard::foreground_source(dirs, &source, args, Stdio::inherit())
}

#[test]
fn a_registry_over_http_with_basic_auth_gives_the_same_records() {
    let server = RegistryServer::start("svc:s3cret");
    let url = server.url();
    let m = mount_without_schemas_topic(&[
        "--read-only",
        "--schema-registry",
        &url,
        "--schema-registry-config",
        "basic.auth.user.info=svc:s3cret",
    ]);
    let want = manifest();
    let mut problems = Vec::new();
    for r in want["records"].as_array().unwrap() {
        let topic = r["topic"].as_str().unwrap();
        if topic == "_schemas" {
            continue;
        }
        let (p, offset) = (r["partition"].as_u64().unwrap(), r["offset"].as_u64().unwrap());
        let lines = json_lines(&m.path(&format!("{topic}/{p}/by-offset/{offset}.json")));
        let what = format!("{topic}-{p}@{offset}");
        if let Some(key) = r.get("expected_key") {
            problems.extend(check_field(&lines[0], "key", key, &what));
        }
        problems.extend(check_field(&lines[0], "payload", &r["expected_value"], &what));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(
        fs::read_to_string(m.path("orders/schemas/orders-value/versions")).unwrap(),
        "1 3 AVRO\n2 4 AVRO\n"
    );
    m.unmount();
    // A wrong password: records as bytes, each with the reason; the mount still serves.
    let m = mount_without_schemas_topic(&[
        "--read-only",
        "--schema-registry",
        &url,
        "--schema-registry-config",
        "basic.auth.user.info=svc:wrong",
    ]);
    let lines = json_lines(&m.path("orders/0/by-offset/0.json"));
    assert!(lines[0]["payload_schema_error"].as_str().unwrap().contains("auth"), "{}", lines[0]);
    assert!(!lines[0].to_string().contains("wrong"), "the password is never shown");
    m.unmount();
}

#[test]
fn an_unreachable_registry_gives_records_with_the_error_not_a_hang() {
    // A port nothing listens on: connection refused at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let m = mount_without_schemas_topic(&["--read-only", "--schema-registry", &url]);
    let started = std::time::Instant::now();
    let lines = json_lines(&m.path("orders/1/by-offset/0.json"));
    assert_eq!(lines.len(), 10);
    for line in &lines[..6] {
        assert!(line["payload_schema_error"].is_string(), "{line}");
        assert!(line["payload"].is_string(), "the bytes, as without schemas: {line}");
    }
    // Bounded by the registry's timeouts (no timing assertion: only that it returned).
    eprintln!("10 records with an unreachable registry in {:?}", started.elapsed());
    m.unmount();
}

/// `where/<filter>/` reads the fields of values a schema decodes (issue 46): on each partition
/// of the Avro `orders` topic, the filtered `.json` stream is what `jq` keeps of the decoded
/// one; the value-line form of the same filter holds bytes too (the Avro values as stored,
/// which may hold newlines, so not counted by lines).
#[test]
fn a_filter_reads_the_fields_schemas_decode() {
    let m = mount(&["--read-only"]);
    let mut ids = Vec::new();
    for p in 0..2 {
        let want = common::sh(&format!(
            "jq -c 'select(.payload.customer == \"alice\")' {}",
            m.path(&format!("orders/{p}/by-offset/0.json")).display()
        ));
        let dir = m.path(&format!("orders/where/customer=alice/{p}/by-offset"));
        let got = common::sh(&format!("cat {}/0.json", dir.display()));
        assert_eq!(got, want, "partition {p}");
        let values = fs::read(dir.join("0")).unwrap();
        assert_eq!(values.is_empty(), want.is_empty(), "partition {p}: value lines");
        for line in want.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            ids.push(v["payload"]["id"].as_i64().unwrap());
        }
    }
    ids.sort_unstable();
    assert_eq!(ids, [0, 6]);
    m.unmount();
}
