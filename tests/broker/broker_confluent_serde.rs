//! confluent-kafka's own Schema Registry serializers and deserializers against a real mount, in
//! both directions, with no registry server: `tests/compat/confluent_serde.py` registers the
//! schemas in confluent-kafka's MockSchemaRegistryClient, serializes values with AvroSerializer,
//! ProtobufSerializer and JSONSerializer into a broker log dir with the `_schemas` records of
//! the ids the mock assigned; the mount must show each value as the JSON the serializer was
//! given; and what `append.json` encodes with those ids, confluent's deserializers must read
//! back from the segment files as the same values.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use common::corpus::copy_tree;
use common::{Dirs, MountGuard};
use serde_json::Value;

use super::broker_schemas::{json_lines, python, same_json};

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat/confluent_serde.py")
}

/// `confluent_serde.py produce` into a temp dir: (the temp dir, its manifest).
fn produce() -> (tempfile::TempDir, Value) {
    let out = tempfile::Builder::new().prefix("topicfs-confluent-").tempdir().unwrap();
    let status = Command::new(python())
        .arg(script())
        .arg("produce")
        .arg(out.path().join("out"))
        .status()
        .unwrap();
    assert!(status.success(), "confluent_serde.py produce: {status}");
    let manifest = fs::read(out.path().join("out/manifest.json")).unwrap();
    let manifest = serde_json::from_slice(&manifest).unwrap();
    (out, manifest)
}

fn mount(out: &Path, args: &[&str]) -> MountGuard {
    let dirs = Dirs::new();
    copy_tree(&out.join("out/log-dir"), &dirs.data());
    let source = dirs.data().into_os_string();
    MountGuard::foreground_source(dirs, &source, args, Stdio::inherit())
}

fn records(manifest: &Value) -> &[Value] {
    manifest["records"].as_array().unwrap()
}

/// `confluent_serde.py consume` on one `.log` file: a JSON object per record.
fn consume(log: &Path, manifest: &Path) -> Vec<Value> {
    let out = Command::new(python()).arg(script()).arg("consume").arg(log).arg(manifest).output();
    let out = out.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn confluent_serde_values_read_as_the_serializers_were_given_them() {
    let (out, manifest) = produce();
    let m = mount(out.path(), &["--read-only"]);
    let mut problems = Vec::new();
    let mut kinds = std::collections::BTreeSet::new();
    for r in records(&manifest) {
        let (topic, offset) = (r["topic"].as_str().unwrap(), r["offset"].as_u64().unwrap());
        let lines = json_lines(&m.path(&format!("{topic}/0/by-offset/{offset}.json")));
        let line = &lines[0];
        let what = format!("{topic}@{offset}");
        assert_eq!(line["offset"].as_u64(), Some(offset), "{what}");
        if !same_json(&line["payload"], &r["json"]) {
            problems.push(format!("{what}: payload {}, want {}", line["payload"], r["json"]));
        }
        if line["payload_schema_id"] != r["schema_id"] {
            problems.push(format!("{what}: payload_schema_id {}", line["payload_schema_id"]));
        }
        if let Some(e) = line.get("payload_schema_error") {
            problems.push(format!("{what}: payload_schema_error {e}"));
        }
        kinds.insert(r["schemaType"].as_str().unwrap().to_owned());
    }
    assert!(problems.is_empty(), "problems:\n{}", problems.join("\n"));
    assert_eq!(kinds.len(), 3, "Avro, Protobuf and JSON Schema: {kinds:?}");
    assert!(records(&manifest).len() >= 10);
    // The subjects the serializers registered, with the mock's ids, as the mount lists them.
    let id = |subject: &str| {
        let subjects = manifest["subjects"].as_array().unwrap();
        subjects.iter().find(|s| s["subject"] == subject).unwrap()["id"].clone()
    };
    let topics = [
        ("x-avro", "AVRO"),
        ("x-protobuf", "PROTOBUF"),
        ("x-protobuf-nested", "PROTOBUF"),
        ("x-json", "JSON"),
    ];
    for (topic, kind) in topics {
        let path = m.path(&format!("{topic}/schemas/{topic}-value/versions"));
        let versions = fs::read_to_string(path).unwrap();
        assert_eq!(versions, format!("1 {} {kind}\n", id(&format!("{topic}-value"))));
    }
    m.unmount();
}

#[test]
fn confluent_serde_deserializers_read_what_append_json_encodes() {
    let (out, manifest) = produce();
    let manifest_path = out.path().join("out/manifest.json");
    let m = mount(out.path(), &[]);
    // Not `x-protobuf-nested`: an append encodes a Protobuf payload as the schema's first
    // message ([0]); there is no field naming a nested type.
    for topic in ["x-avro", "x-protobuf", "x-json"] {
        let mine: Vec<&Value> = records(&manifest).iter().filter(|r| r["topic"] == topic).collect();
        let lines: String = mine
            .iter()
            .map(|r| {
                let line =
                    serde_json::json!({"payload": r["json"], "payload_schema_id": r["schema_id"]});
                format!("{line}\n")
            })
            .collect();
        fs::write(m.path(&format!("{topic}/0/append.json")), lines).unwrap();
        let mut decoded = Vec::new();
        for entry in fs::read_dir(m.path(&format!("{topic}/0/segments"))).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                decoded.extend(consume(&path, &manifest_path));
            }
        }
        decoded.sort_by_key(|d| d["offset"].as_u64());
        // The serializers' own records first, then what the mount appended, in the same order.
        assert_eq!(decoded.len(), 2 * mine.len(), "{topic}: {decoded:?}");
        let n = mine.len() as u64;
        for (i, d) in decoded.iter().enumerate() {
            let r = mine[i % mine.len()];
            let what = format!("{topic}@{}", d["offset"]);
            assert_eq!(d["offset"].as_u64(), Some(i as u64), "{what}");
            assert!(d["error"].is_null(), "{what}: {}", d["error"]);
            assert_eq!(d["schema_id"], r["schema_id"], "{what}");
            assert_eq!(d["message_indexes"], r["message_indexes"], "{what}");
            // Python has only doubles: an Avro float comes back as the double expansion of the
            // f32, which same_json accepts for the value the serializer was given.
            assert!(
                same_json(&r["json"], &d["value"]),
                "{what} (appended: {}): {d}, want {}",
                d["offset"].as_u64() >= Some(n),
                r["json"]
            );
        }
    }
    m.unmount();
}
