use super::*;
use crate::registry::Registry;
use serde_json::json;

fn key(subject: &str, version: i32) -> Vec<u8> {
    format!(r#"{{"keytype":"SCHEMA","subject":"{subject}","version":{version},"magic":1}}"#)
        .into_bytes()
}

fn value(subject: &str, version: i32, id: u32, schema: &str, extra: &str) -> Vec<u8> {
    let schema = serde_json::to_string(schema).unwrap();
    format!(r#"{{"subject":"{subject}","version":{version},"id":{id},{extra}"schema":{schema},"deleted":false}}"#)
        .into_bytes()
}

#[test]
fn a_framed_value_decodes_through_the_registry_with_references() {
    let mut r = Registry::new();
    let address = r#"{"type":"record","name":"Address","namespace":"ex","fields":[{"name":"zip","type":"int"}]}"#;
    let person = r#"{"type":"record","name":"Person","namespace":"ex","fields":[{"name":"address","type":"ex.Address"}]}"#;
    let refs = r#""references":[{"name":"ex.Address","subject":"address","version":1}],"#;
    r.apply(Some(&key("address", 1)), Some(&value("address", 1, 1, address, "")));
    r.apply(Some(&key("people-value", 1)), Some(&value("people-value", 1, 2, person, refs)));
    let record = r.schema_by_id(2).unwrap().clone();
    let codec = Codec::compile(&record, &mut |reference| r.resolve_reference(reference)).unwrap();
    assert_eq!(codec.schema_type(), SchemaType::Avro);
    let framed =
        wire::frame(2, &codec.from_json(&json!({"address": {"zip": 1011}}), "payload").unwrap());
    let parsed = Framed::parse(&framed).unwrap();
    assert_eq!(parsed.schema_id, 2);
    assert_eq!(codec.to_json(parsed.body).unwrap(), json!({"address": {"zip": 1011}}));
    let e = codec.from_json(&json!({"address": {"zip": "x"}}), "payload").unwrap_err();
    assert!(
        matches!(e, Error::InvalidInput(m) if m == r#"payload.address.zip: expected int, got "x""#)
    );
    // Without the referenced schema registered: NotFound from the resolver.
    let empty = Registry::new();
    let missing = Codec::compile(&record, &mut |reference| empty.resolve_reference(reference));
    assert!(matches!(missing, Err(Error::NotFound(_))));
}

#[test]
fn references_are_fetched_once_each_and_cycles_end() {
    let a = SchemaRecord {
        id: 1,
        subject: Some("a".into()),
        version: Some(1),
        schema_type: SchemaType::Avro,
        text: r#"{"type":"fixed","name":"A","size":1}"#.into(),
        references: vec![SchemaReference { name: "A".into(), subject: "a".into(), version: 1 }],
        deleted: false,
    };
    let root = SchemaRecord {
        id: 2,
        text: r#"{"type":"record","name":"R","fields":[{"name":"a","type":"A"},{"name":"b","type":"A"}]}"#.into(),
        references: vec![a.references[0].clone(), a.references[0].clone()],
        ..a.clone()
    };
    let mut calls = 0;
    let codec = Codec::compile(&root, &mut |_| {
        calls += 1;
        Ok(a.clone())
    })
    .unwrap();
    assert_eq!(calls, 1);
    assert_eq!(codec.to_json(b"xy").unwrap(), json!({"a": "x", "b": "y"}));
}

#[test]
fn json_schema_and_protobuf_records_compile_through_codec() {
    let mut record = SchemaRecord {
        id: 5,
        subject: None,
        version: None,
        schema_type: SchemaType::Json,
        text: r#"{"type":"object","required":["a"]}"#.into(),
        references: vec![],
        deleted: false,
    };
    let codec = Codec::compile(&record, &mut |_| unreachable!()).unwrap();
    assert_eq!(codec.schema_type(), SchemaType::Json);
    assert_eq!(codec.to_json(br#"{"a":1}"#).unwrap(), json!({"a": 1}));
    assert!(codec.from_json(&json!({}), "payload").is_err());
    // A Protobuf schema importing another by the name its reference gives.
    let imported = SchemaRecord {
        id: 6,
        subject: Some("common".into()),
        version: Some(1),
        schema_type: SchemaType::Protobuf,
        text: "syntax = \"proto3\";\npackage c;\nmessage Money { int64 cents = 1; }\n".into(),
        references: vec![],
        deleted: false,
    };
    record.schema_type = SchemaType::Protobuf;
    record.text = "syntax = \"proto3\";\nimport \"common.proto\";\npackage o;\n\
                   message Order { string id = 1; c.Money total = 2; }\n"
        .into();
    record.references =
        vec![SchemaReference { name: "common.proto".into(), subject: "common".into(), version: 1 }];
    let codec = Codec::compile(&record, &mut |r| {
        assert_eq!(r.subject, "common");
        Ok(imported.clone())
    })
    .unwrap();
    assert_eq!(codec.schema_type(), SchemaType::Protobuf);
    let value = json!({"id": "o-1", "total": {"cents": "250"}});
    let body = codec.from_json(&value, "payload").unwrap();
    assert_eq!(codec.to_json(&body).unwrap(), value);
    let err = codec.from_json(&json!({"nope": 1}), "payload").unwrap_err().to_string();
    assert!(err.contains("payload") && err.contains("nope"), "{err}");
    assert_eq!(SchemaType::parse(None).unwrap(), SchemaType::Avro);
    for t in [SchemaType::Avro, SchemaType::Protobuf, SchemaType::Json] {
        assert_eq!(SchemaType::parse(Some(t.as_str())).unwrap(), t);
    }
}

#[test]
fn codecs_and_registries_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Codec>();
    shared::<Registry>();
    shared::<SchemaRecord>();
}
