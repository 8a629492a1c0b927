//! topicfs-schema's Protobuf values against an independent encoder: Google's protobuf package
//! (Python), driven by tests/compat/proto_fixtures.py with the venv's interpreter
//! (/opt/topicfs-venv/bin/python, or $TOPICFS_PYTHON; scripts/install-deps installs
//! tests/compat/requirements.txt into it).
//!
//! Python builds messages with protoc-generated classes and frames them as Confluent does;
//! our `to_json` must give `json_format.MessageToJson`'s JSON of each, and what our
//! `from_json` encodes from that JSON must parse back in Python to the same message.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use topicfs_schema::protobuf::ProtobufSchema;

fn python() -> String {
    std::env::var("TOPICFS_PYTHON").unwrap_or_else(|_| "/opt/topicfs-venv/bin/python".to_string())
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/compat/proto_fixtures.py")
}

fn run(args: &[&Path]) -> Vec<u8> {
    let out = Command::new(python())
        .arg(script())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {} (set TOPICFS_PYTHON): {e}", python()));
    assert!(
        out.status.success(),
        "proto_fixtures.py {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn values_written_by_python_protobuf_decode_to_its_json_and_ours_parse_back_in_python() {
    let dir = tempfile::tempdir().unwrap();
    let manifest_path = dir.path().join("manifest.json");
    run(&[Path::new("generate"), &manifest_path]);
    let manifest: Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();

    let mut schemas = HashMap::new();
    for schema in manifest["schemas"].as_array().unwrap() {
        let imports: Vec<(String, String)> = schema["imports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| (i[0].as_str().unwrap().to_string(), i[1].as_str().unwrap().to_string()))
            .collect();
        let compiled = ProtobufSchema::compile(schema["text"].as_str().unwrap(), &imports)
            .unwrap_or_else(|e| panic!("{}: {e:?}", schema["name"]));
        schemas.insert(schema["name"].as_str().unwrap().to_string(), compiled);
    }

    let cases = manifest["cases"].as_array().unwrap();
    assert!(cases.len() >= 10, "the manifest has {} cases", cases.len());
    let mut ours = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let schema = &schemas[case["schema"].as_str().unwrap()];
        let message = case["message"].as_str().unwrap();
        let theirs = unhex(case["hex"].as_str().unwrap());

        let (value, type_name) =
            schema.to_json(&theirs).unwrap_or_else(|e| panic!("{name}: to_json: {e:?}"));
        assert_eq!(type_name, message, "{name}: the type the indexes name");
        assert_eq!(value, case["json"], "{name}: our JSON against MessageToJson's");

        let encoded = schema
            .from_json(Some(message), &case["json"])
            .unwrap_or_else(|e| panic!("{name}: from_json: {e:?}"));
        // The same bytes as protobuf's, except for the cases with a map (or Struct) of two or
        // more entries, which may come in another order.
        if ["order_full", "well_known_types"].contains(&name) {
            assert_eq!(encoded[0], theirs[0], "{name}: message indexes");
            assert_eq!(encoded.len(), theirs.len(), "{name}: length");
        } else {
            assert_eq!(hex(&encoded), hex(&theirs), "{name}: our encoding against protobuf's");
        }
        // The first message of a file is what `None` names. (Compared decoded: map entries are
        // written in prost-reflect's hash map order, which may differ from one call to the next.)
        if case["indexes"] == json!([0]) {
            let first = schema.from_json(None, &case["json"]).unwrap();
            assert_eq!(schema.to_json(&first).unwrap(), (value, type_name), "{name}: None");
        }
        ours.push(json!({"schema": case["schema"], "hex": hex(&encoded)}));
    }

    let bodies_path = dir.path().join("bodies.json");
    std::fs::write(&bodies_path, serde_json::to_vec(&ours).unwrap()).unwrap();
    let parsed: Value = serde_json::from_slice(&run(&[Path::new("parse"), &bodies_path])).unwrap();
    let parsed = parsed.as_array().unwrap();
    assert_eq!(parsed.len(), cases.len());
    for (case, back) in cases.iter().zip(parsed) {
        let name = case["name"].as_str().unwrap();
        assert_eq!(
            back["message"], case["message"],
            "{name}: the type Python reads our indexes as"
        );
        assert_eq!(back["json"], case["json"], "{name}: Python's JSON of our encoding");
    }
}
