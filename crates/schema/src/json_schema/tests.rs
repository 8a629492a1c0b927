use super::*;
use serde_json::json;

fn message(r: Result<Vec<u8>>) -> String {
    match r {
        Err(Error::InvalidInput(m)) => m,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

const PERSON: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "address": {"$ref": "#/definitions/Address"},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
    "kind": {"const": "person"},
    "nick": {"type": ["string", "null"]}
  },
  "required": ["name"],
  "additionalProperties": false,
  "definitions": {
    "Address": {"type": "object", "properties": {"zip": {"type": "integer"}}, "required": ["zip"]}
  }
}"##;

#[test]
fn decode_is_the_json_text_and_encode_writes_it_back() {
    let c = JsonSchemaCodec::compile(PERSON).unwrap();
    let v = c.to_json(br#"{"name":"n","age":3}"#).unwrap();
    assert_eq!(v, json!({"name": "n", "age": 3}));
    assert_eq!(c.from_json(&v, "payload").unwrap(), br#"{"name":"n","age":3}"#);
    let e = c.to_json(b"\0\x01").unwrap_err();
    assert!(matches!(e, Error::InvalidInput(m) if m.starts_with("JSON Schema body: not JSON")));
    // Decoding does not validate: a reader sees what is there.
    assert_eq!(c.to_json(b"[1]").unwrap(), json!([1]));
}

#[test]
fn encode_checks_type_required_properties_enum_const_items_and_refs() {
    let c = JsonSchemaCodec::compile(PERSON).unwrap();
    let ok = json!({"name": "n", "age": 3, "address": {"zip": 1}, "tags": ["a"], "kind": "person", "nick": null});
    assert!(c.from_json(&ok, "payload").is_ok());
    let cases = [
        (json!({"age": 3}), "payload: missing required property \"name\""),
        (json!({"name": 1}), "payload.name: expected string, got 1"),
        (json!({"name": "n", "age": 1.5}), "payload.age: expected integer, got 1.5"),
        (
            json!({"name": "n", "address": {"zip": "x"}}),
            "payload.address.zip: expected integer, got \"x\"",
        ),
        (json!({"name": "n", "address": {}}), "payload.address: missing required property \"zip\""),
        (
            json!({"name": "n", "tags": ["a", "c"]}),
            "payload.tags[1]: \"c\" is not one of the enum's 2 values",
        ),
        (
            json!({"name": "n", "kind": "robot"}),
            "payload.kind: expected the constant \"person\", got \"robot\"",
        ),
        (json!({"name": "n", "nick": 2}), "payload.nick: expected one of string, null, got 2"),
        (json!({"name": "n", "extra": 2}), "payload.extra: not allowed here (schema false)"),
        (json!([]), "payload: expected object, got a value of type array"),
    ];
    for (v, expected) in cases {
        assert_eq!(message(c.from_json(&v, "payload")), expected);
    }
}

#[test]
fn combinators_and_tuples_are_checked() {
    let c = JsonSchemaCodec::compile(
        r#"{"oneOf":[{"type":"integer"},{"type":"number","minimum":0}],
            "not":{"const":7}}"#,
    )
    .unwrap();
    // 1 is an integer and a number: oneOf matches twice.
    assert!(message(c.from_json(&json!(1), "p")).contains("matches 2 of the oneOf"));
    assert!(c.from_json(&json!(1.5), "p").is_ok());
    assert!(message(c.from_json(&json!("s"), "p")).contains("matches none of the oneOf schemas"));
    let t = JsonSchemaCodec::compile(
        r#"{"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"}}"#,
    )
    .unwrap();
    assert!(t.from_json(&json!(["a", 1, 2]), "p").is_ok());
    assert_eq!(message(t.from_json(&json!(["a", "b"]), "p")), "p[1]: expected integer, got \"b\"");
}

#[test]
fn bad_schemas_and_hostile_refs_are_errors() {
    assert!(JsonSchemaCodec::compile("{").is_err());
    assert!(JsonSchemaCodec::compile("3").is_err());
    assert!(JsonSchemaCodec::compile("true").is_ok());
    let dangling = JsonSchemaCodec::compile(r##"{"$ref":"#/definitions/none"}"##).unwrap();
    assert!(message(dangling.from_json(&json!(1), "p")).contains("points nowhere"));
    // A $ref to itself: stopped by the depth limit, not the stack.
    let looped = JsonSchemaCodec::compile(r##"{"$ref":"#"}"##).unwrap();
    assert!(message(looped.from_json(&json!(1), "p")).contains("deeper than"));
    // References to other documents are not checked.
    let remote = JsonSchemaCodec::compile(r#"{"$ref":"https://example.com/s.json"}"#).unwrap();
    assert!(remote.from_json(&json!(1), "p").is_ok());
}

#[test]
fn the_depth_limit_fits_in_a_one_mebibyte_stack() {
    let worker = std::thread::Builder::new().stack_size(1 << 20).spawn(|| {
        // Every hop of a self-reference and every nested value is a level.
        let looped = JsonSchemaCodec::compile(r##"{"$ref":"#"}"##).unwrap();
        assert!(message(looped.from_json(&json!(1), "p")).contains("deeper than"));
        let nested =
            JsonSchemaCodec::compile(r##"{"type":"array","items":{"$ref":"#"}}"##).unwrap();
        let mut v = json!([]);
        for _ in 0..100 {
            v = Value::Array(vec![v]);
        }
        assert!(message(nested.from_json(&v, "p")).contains("deeper than"));
        std::mem::forget(v);
    });
    worker.unwrap().join().unwrap();
}
