//! Our Avro codec against fastavro, an independent encoder (tests/compat/schema_fixtures.py):
//! every Avro type, logical types, two versions of a subject, a schema referencing a named type
//! of another, top-level non-records.
//!
//! 1. fastavro writes each record as an Avro body and as its Avro JSON encoding; our decode of
//!    the body must equal that JSON, value by value (paths named on a mismatch).
//! 2. Our encode of that JSON must give fastavro's bytes, and fastavro must decode our bodies
//!    to the same records it decodes from its own (the script's `check`).
//!
//! Needs the venv made by `scripts/install-deps` (`TOPICFS_PYTHON` overrides
//! /opt/topicfs-venv/bin/python), with fastavro; fails without it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use topicfs_schema::registry::Registry;
use topicfs_schema::{Codec, SchemaRecord, SchemaReference, SchemaType};

fn python() -> String {
    std::env::var("TOPICFS_PYTHON").unwrap_or_else(|_| "/opt/topicfs-venv/bin/python".into())
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/compat/schema_fixtures.py")
}

fn run(command: &str, dir: &Path) -> String {
    let out = Command::new(python())
        .arg(script())
        .arg(command)
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} (set TOPICFS_PYTHON): {e}", python()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "schema_fixtures.py {command} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Asserts `ours == theirs` value by value; numbers compare as integers or as doubles.
fn same(ours: &Value, theirs: &Value, path: &str) {
    match (ours, theirs) {
        (Value::Number(a), Value::Number(b)) => {
            let equal = match (a.as_i64(), b.as_i64()) {
                (Some(x), Some(y)) => x == y,
                _ => a.as_f64() == b.as_f64(),
            };
            assert!(equal, "{path}: ours {a}, fastavro {b}");
        }
        (Value::Object(a), Value::Object(b)) => {
            let ka: Vec<&String> = a.keys().collect();
            let kb: Vec<&String> = b.keys().collect();
            assert_eq!(ka, kb, "{path}: keys (in order)");
            for (k, v) in a {
                same(v, &b[k], &format!("{path}.{k}"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{path}: lengths");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                same(x, y, &format!("{path}[{i}]"));
            }
        }
        (a, b) => assert_eq!(a, b, "{path}"),
    }
}

fn record(id: u32, subject: &str, text: &str, references: Vec<SchemaReference>) -> SchemaRecord {
    SchemaRecord {
        id,
        subject: Some(subject.into()),
        version: Some(1),
        schema_type: SchemaType::Avro,
        text: text.into(),
        references,
        deleted: false,
    }
}

#[test]
fn our_decode_equals_fastavro_json_and_fastavro_reads_our_encode() {
    let dir = tempfile::tempdir().unwrap();
    run("write", dir.path());
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("manifest.json")).unwrap()).unwrap();
    let mut ours_cases = Vec::new();
    let mut compared = 0;
    for case in manifest["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        // Through a registry, as records shaped as the registry writes them: the referenced
        // schemas as subjects of their own, referenced by name.
        let mut registry = Registry::new();
        let mut references = Vec::new();
        for (i, text) in case["references"].as_array().unwrap().iter().enumerate() {
            let text = text.as_str().unwrap();
            let full: Value = serde_json::from_str(text).unwrap();
            let name = format!(
                "{}.{}",
                full["namespace"].as_str().unwrap(),
                full["name"].as_str().unwrap()
            );
            let subject = format!("ref-{i}");
            registry.insert(record(100 + i as u32, &subject, text, vec![]));
            references.push(SchemaReference { name, subject, version: 1 });
        }
        let main = record(1, name, case["schema"].as_str().unwrap(), references);
        let codec = Codec::compile(&main, &mut |r| registry.resolve_reference(r))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut bodies = Vec::new();
        for (i, row) in case["records"].as_array().unwrap().iter().enumerate() {
            let body = unhex(row["body"].as_str().unwrap());
            let theirs: Value = serde_json::from_str(row["json"].as_str().unwrap()).unwrap();
            let decoded = codec.to_json(&body).unwrap_or_else(|e| panic!("{name}[{i}]: {e}"));
            same(&decoded, &theirs, &format!("{name}[{i}]"));
            let encoded =
                codec.from_json(&theirs, "payload").unwrap_or_else(|e| panic!("{name}[{i}]: {e}"));
            assert_eq!(hex(&encoded), hex(&body), "{name}[{i}]: our encoding of fastavro's JSON");
            bodies.push(hex(&encoded));
            compared += 1;
        }
        ours_cases.push(json!({"name": name, "bodies": bodies}));
    }
    assert!(compared >= 25, "only {compared} records compared");
    std::fs::write(dir.path().join("ours.json"), json!({"cases": ours_cases}).to_string()).unwrap();
    let report = run("check", dir.path());
    assert!(report.trim_end().ends_with(&format!("{compared} passed, 0 failed")), "{report}");
}

#[test]
fn evolution_two_versions_of_a_subject_decode_each_with_its_own_schema() {
    let dir = tempfile::tempdir().unwrap();
    run("write", dir.path());
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("manifest.json")).unwrap()).unwrap();
    let case = |n: &str| {
        manifest["cases"].as_array().unwrap().iter().find(|c| c["name"] == n).unwrap().clone()
    };
    let (v1, v2) = (case("user-v1"), case("user-v2"));
    // The subject's two versions in a `_schemas` topic, as the registry writes them.
    let mut registry = Registry::new();
    for (version, id, c) in [(1, 21u32, &v1), (2, 22u32, &v2)] {
        let key = format!(
            r#"{{"keytype":"SCHEMA","subject":"users-value","version":{version},"magic":1}}"#
        );
        let value = json!({"subject": "users-value", "version": version, "id": id, "schema": c["schema"], "deleted": false});
        registry.apply(Some(key.as_bytes()), Some(value.to_string().as_bytes()));
    }
    assert_eq!(registry.latest("users-value").unwrap().id, 22);
    for (id, c) in [(21, &v1), (22, &v2)] {
        let codec = Codec::compile(registry.schema_by_id(id).unwrap(), &mut |r| {
            registry.resolve_reference(r)
        })
        .unwrap();
        for row in c["records"].as_array().unwrap() {
            let theirs: Value = serde_json::from_str(row["json"].as_str().unwrap()).unwrap();
            same(
                &codec.to_json(&unhex(row["body"].as_str().unwrap())).unwrap(),
                &theirs,
                &format!("id {id}"),
            );
        }
    }
    // A v1 body is not a v2 value (the reader must use the writer's id): v2 runs out of bytes.
    let v1_body = unhex(v1["records"][0]["body"].as_str().unwrap());
    let v2_codec = Codec::compile(registry.latest("users-value").unwrap(), &mut |r| {
        registry.resolve_reference(r)
    })
    .unwrap();
    assert!(v2_codec.to_json(&v1_body).is_err());
    // v2's defaults fill what a v1-shaped JSON lacks when encoding with v2.
    let filled = v2_codec.from_json(&json!({"id": 1, "name": "ann"}), "payload").unwrap();
    assert_eq!(
        v2_codec.to_json(&filled).unwrap(),
        json!({"id": 1, "name": "ann", "email": null, "country": "NL"})
    );
}
