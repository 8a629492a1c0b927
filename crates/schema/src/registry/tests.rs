use super::*;

/// A SCHEMA key as the registry writes it.
fn key(subject: &str, version: i32) -> Vec<u8> {
    format!(r#"{{"keytype":"SCHEMA","subject":"{subject}","version":{version},"magic":1}}"#)
        .into_bytes()
}

/// A SCHEMA value as the registry writes it (Avro: no schemaType).
fn value(subject: &str, version: i32, id: u32, schema: &str, extra: &str) -> Vec<u8> {
    let schema = serde_json::to_string(schema).unwrap();
    format!(r#"{{"subject":"{subject}","version":{version},"id":{id},{extra}"schema":{schema},"deleted":false}}"#)
        .into_bytes()
}

const V1: &str = r#"{"type":"record","name":"T","fields":[{"name":"a","type":"int"}]}"#;
const V2: &str = r#"{"type":"record","name":"T","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":""}]}"#;

fn registry() -> Registry {
    let mut r = Registry::new();
    r.apply(Some(br#"{"keytype":"NOOP","magic":0}"#), None);
    r.apply(
        Some(br#"{"keytype":"CONFIG","subject":null,"magic":0}"#),
        Some(br#"{"compatibilityLevel":"BACKWARD"}"#),
    );
    r.apply(Some(&key("t-value", 1)), Some(&value("t-value", 1, 1, V1, "")));
    r.apply(Some(&key("t-value", 2)), Some(&value("t-value", 2, 2, V2, "")));
    r.apply(Some(&key("t-key", 1)), Some(&value("t-key", 1, 3, "\"string\"", "")));
    r
}

#[test]
fn schema_records_build_subjects_versions_and_ids() {
    let r = registry();
    assert_eq!(r.subjects(), ["t-key", "t-value"]);
    assert_eq!(
        r.versions("t-value"),
        [
            SubjectVersion { version: 1, id: 1, deleted: false },
            SubjectVersion { version: 2, id: 2, deleted: false }
        ]
    );
    let latest = r.latest("t-value").unwrap();
    assert_eq!((latest.id, latest.version, latest.text.as_str()), (2, Some(2), V2));
    assert_eq!(latest.schema_type, SchemaType::Avro);
    assert_eq!(r.schema_by_id(1).unwrap().text, V1);
    assert_eq!(r.schema_by_id(3).unwrap().subject.as_deref(), Some("t-key"));
    assert!(r.schema_by_id(4).is_none());
    assert_eq!(r.stats().applied, 3);
    assert_eq!(r.stats().recognised, 2);
    assert_eq!(r.stats().rejected, 0);
}

#[test]
fn soft_deletes_keep_ids_but_not_latest_and_tombstones_remove() {
    let mut r = registry();
    // A soft delete of version 2, as the registry writes it: the same value with deleted=true.
    let deleted = String::from_utf8(value("t-value", 2, 2, V2, ""))
        .unwrap()
        .replace("\"deleted\":false", "\"deleted\":true");
    r.apply(Some(&key("t-value", 2)), Some(deleted.as_bytes()));
    assert_eq!(r.latest("t-value").unwrap().version, Some(1));
    assert!(r.schema_by_id(2).unwrap().deleted, "still found by id");
    // DELETE_SUBJECT up to version 1: every version deleted, the subject no longer listed.
    r.apply(
        Some(br#"{"keytype":"DELETE_SUBJECT","subject":"t-value","magic":0}"#),
        Some(br#"{"subject":"t-value","version":1}"#),
    );
    assert!(r.latest("t-value").is_none());
    assert_eq!(r.subjects(), ["t-key"]);
    assert!(r.versions("t-value").iter().all(|v| v.deleted));
    assert_eq!(r.schema_by_id(1).unwrap().text, V1);
    // The hard delete: tombstones of the SCHEMA keys.
    r.apply(Some(&key("t-value", 1)), None);
    assert!(r.schema_by_id(1).is_none());
    assert_eq!(r.versions("t-value").len(), 1);
    r.apply(Some(&key("t-value", 2)), None);
    assert!(r.versions("t-value").is_empty());
    // A tombstone of something never seen changes nothing.
    r.apply(Some(&key("nope", 9)), None);
    assert_eq!(r.stats().rejected, 0);
    // Re-registering after a delete: a new version, and the subject is back.
    r.apply(Some(&key("t-value", 3)), Some(&value("t-value", 3, 1, V1, "")));
    assert_eq!(r.latest("t-value").unwrap().id, 1);
}

#[test]
fn an_id_shared_by_two_subjects_stays_while_one_remains() {
    let mut r = registry();
    r.apply(Some(&key("other-value", 1)), Some(&value("other-value", 1, 1, V1, "")));
    r.apply(Some(&key("t-value", 1)), None);
    assert_eq!(r.schema_by_id(1).unwrap().subject.as_deref(), Some("other-value"));
}

#[test]
fn references_and_schema_types_are_read() {
    let mut r = registry();
    let extra = r#""schemaType":"PROTOBUF","references":[{"name":"other.proto","subject":"other","version":1}],"#;
    r.apply(
        Some(&key("p-value", 1)),
        Some(&value("p-value", 1, 10, "syntax = \"proto3\";", extra)),
    );
    let p = r.schema_by_id(10).unwrap();
    assert_eq!(p.schema_type, SchemaType::Protobuf);
    assert_eq!(
        r.references(10).unwrap(),
        [SchemaReference { name: "other.proto".into(), subject: "other".into(), version: 1 }]
    );
    let json = r#""schemaType":"JSON","#;
    r.apply(Some(&key("j-value", 1)), Some(&value("j-value", 1, 11, "{}", json)));
    assert_eq!(r.schema_by_id(11).unwrap().schema_type, SchemaType::Json);
    assert!(
        r.resolve_reference(&SchemaReference {
            name: "T".into(),
            subject: "t-value".into(),
            version: 2
        })
        .is_ok()
    );
    let missing = r.resolve_reference(&SchemaReference {
        name: "T".into(),
        subject: "t-value".into(),
        version: 9,
    });
    assert!(matches!(missing, Err(Error::NotFound(_))));
}

#[test]
fn unknown_keytypes_are_counted_and_garbage_is_rejected_with_a_reason() {
    let mut r = registry();
    r.apply(Some(br#"{"keytype":"CONTEXT","tenant":"x","context":".a","magic":0}"#), Some(b"{}"));
    r.apply(
        Some(br#"{"keytype":"MODE","subject":null,"magic":0}"#),
        Some(br#"{"mode":"READWRITE"}"#),
    );
    r.apply(
        Some(br#"{"keytype":"CLEAR_SUBJECT","subject":"t-value","magic":0}"#),
        Some(br#"{"subject":"t-value"}"#),
    );
    assert_eq!(r.stats().unknown, 1);
    assert_eq!(r.stats().recognised, 4);
    type Garbage<'a> = (Option<&'a [u8]>, Option<&'a [u8]>, &'a str);
    let garbage: [Garbage; 9] = [
        (None, Some(b"{}"), "without a key"),
        (Some(b"\xff\xfe"), None, "_schemas key: not JSON"),
        (Some(b"[1]"), None, "_schemas key: expected a JSON object, got an array"),
        (Some(br#"{"subject":"x"}"#), None, "_schemas key.keytype: missing"),
        (Some(&key("t-value", 5)), Some(b"{"), "_schemas value: not JSON"),
        (
            Some(&key("t-value", 5)),
            Some(br#"{"subject":"t-value","version":5,"id":-1,"schema":"x"}"#),
            "_schemas value.id: a schema id is not negative, got -1",
        ),
        (
            Some(&key("t-value", 5)),
            Some(br#"{"subject":"t-value","version":5,"id":1}"#),
            "_schemas value.schema: missing",
        ),
        (
            Some(&key("t-value", 5)),
            Some(&value("t-value", 6, 1, V1, "")),
            "under the key of \"t-value\" version 5",
        ),
        (
            Some(&key("t-value", 5)),
            Some(&value("t-value", 5, 1, V1, r#""schemaType":"XML","#)),
            "_schemas value.schemaType: unknown schema type \"XML\"",
        ),
    ];
    for (k, v, reason) in garbage {
        r.apply(k, v);
        let last = r.stats().problems.last().unwrap();
        assert!(last.contains(reason), "{last} lacks {reason}");
    }
    assert_eq!(r.stats().rejected, 9);
    // Nothing changed.
    assert_eq!(r.versions("t-value").len(), 2);
    assert_eq!(r.schema_by_id(1).unwrap().text, V1);
    // Only the last KEPT_PROBLEMS reasons are kept.
    for _ in 0..100 {
        r.apply(None, None);
    }
    assert_eq!(r.stats().problems.len(), KEPT_PROBLEMS);
    assert_eq!(r.stats().rejected, 109);
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut r = Registry::new();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let pieces: [&[u8]; 8] = [
        b"{",
        b"}",
        b"\"keytype\":",
        b"\"SCHEMA\"",
        b",",
        b"\"version\":",
        b"-1",
        b"\"subject\":\"s\"",
    ];
    for _ in 0..5_000 {
        let mut k = Vec::new();
        let mut v = Vec::new();
        for _ in 0..8 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            k.extend_from_slice(pieces[(seed >> 60) as usize % 8]);
            v.extend_from_slice(pieces[(seed >> 56) as usize % 8]);
        }
        r.apply(Some(&k), if seed & 1 == 0 { Some(&v) } else { None });
    }
    let s = r.stats();
    assert_eq!(s.applied + s.recognised + s.unknown + s.rejected, 5_000);
}

#[test]
fn rest_answers_parse_into_the_same_records() {
    let by_id = parse_schema_by_id(
        7,
        br#"{"schemaType":"AVRO","schema":"\"string\"","references":[{"name":"a.B","subject":"b","version":2}]}"#,
    )
    .unwrap();
    assert_eq!(by_id.id, 7);
    assert_eq!((by_id.subject, by_id.version), (None, None));
    assert_eq!(by_id.text, "\"string\"");
    assert_eq!(by_id.references[0].subject, "b");
    let plain = parse_schema_by_id(8, br#"{"schema":"{\"type\":\"int\"}"}"#).unwrap();
    assert_eq!((plain.schema_type, plain.references.len()), (SchemaType::Avro, 0));
    let sv =
        parse_subject_version(br#"{"subject":"t-value","version":2,"id":2,"schema":"\"int\""}"#)
            .unwrap();
    assert_eq!(
        (sv.id, sv.subject.as_deref(), sv.version, sv.deleted),
        (2, Some("t-value"), Some(2), false)
    );
    let missing = parse_schema_by_id(9, br#"{"error_code":40403,"message":"Schema 9 not found"}"#);
    assert!(
        matches!(missing, Err(Error::NotFound(m)) if m == "schema registry error 40403: Schema 9 not found")
    );
    let unauthorized = parse_subject_version(br#"{"error_code":40101,"message":"Unauthorized"}"#);
    assert!(matches!(unauthorized, Err(Error::InvalidInput(_))));
    assert!(parse_subject_version(b"<html>").is_err());
    // Fed into a registry: by id only, or as a subject version.
    let mut r = Registry::new();
    r.insert(parse_schema_by_id(8, br#"{"schema":"\"int\""}"#).unwrap());
    assert_eq!(r.schema_by_id(8).unwrap().text, "\"int\"");
    assert!(r.subjects().is_empty());
    r.insert(sv);
    assert_eq!(r.latest("t-value").unwrap().id, 2);
}

#[test]
fn rest_listings_of_subjects_and_versions_parse() {
    assert_eq!(parse_subjects(br#"["t-value","a-key"]"#).unwrap(), ["a-key", "t-value"]);
    assert_eq!(parse_versions(b"[3,1,2]").unwrap(), [1, 2, 3]);
    assert!(matches!(
        parse_versions(br#"{"error_code":40401,"message":"Subject 'x' not found."}"#),
        Err(Error::NotFound(_))
    ));
    let e = parse_versions(br#"[1,"2"]"#).unwrap_err();
    assert!(
        matches!(e, Error::InvalidInput(m) if m == r#"/subjects/{subject}/versions[1]: expected a 32-bit integer, got "2""#)
    );
    assert!(parse_subjects(b"{}").is_err());
    assert!(parse_subjects(b"[1]").is_err());
}
