use super::encode::Writer;
use super::*;
use serde_json::Map;
use serde_json::json;

fn codec(schema: &str) -> AvroCodec {
    AvroCodec::compile(schema, &[]).unwrap()
}

fn message(r: Result<impl std::fmt::Debug>) -> String {
    match r {
        Err(Error::InvalidInput(m)) => m,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

/// Zigzag varint of `n`, as the Avro spec writes a long.
fn long(n: i64) -> Vec<u8> {
    let mut w = Writer { codec: &codec("\"null\""), out: Vec::new(), path: String::new() };
    w.long(n);
    w.out
}

#[test]
fn varints_are_zigzag_as_the_spec_examples_say() {
    // The Avro specification's table: 0 -> 00, -1 -> 01, 1 -> 02, -2 -> 03, 2 -> 04, -64 -> 7f, 64 -> 80 01.
    for (n, bytes) in [
        (0, vec![0]),
        (-1, vec![1]),
        (1, vec![2]),
        (-2, vec![3]),
        (2, vec![4]),
        (-64, vec![0x7f]),
        (64, vec![0x80, 1]),
    ] {
        assert_eq!(long(n), bytes, "{n}");
        assert_eq!(codec("\"long\"").to_json(&bytes).unwrap(), json!(n));
    }
    for n in [i64::MIN, i64::MAX, i64::from(i32::MIN), 1 << 40] {
        assert_eq!(codec("\"long\"").to_json(&long(n)).unwrap(), json!(n));
    }
}

const NAMED: &str = r#"{"type":"record","name":"Rec","namespace":"com.ex","fields":[
  {"name":"u","type":["null","int",{"type":"enum","name":"Color","symbols":["RED","GREEN"]},{"type":"fixed","name":"F2","size":2},{"type":"array","items":"long"},{"type":"map","values":"string"},"string"]},
  {"name":"c","type":"Color"},
  {"name":"b","type":"bytes"},
  {"name":"f","type":"float"},
  {"name":"d","type":"double"}
]}"#;

#[test]
fn unions_are_null_or_an_object_named_by_the_branch_full_name() {
    let c = codec(NAMED);
    for (u, branch) in [
        (json!(null), 0),
        (json!({"int": -3}), 1),
        (json!({"com.ex.Color": "GREEN"}), 2),
        (json!({"com.ex.F2": "\u{00}\u{ff}"}), 3),
        (json!({"array": [1, 2]}), 4),
        (json!({"map": {"k": "v"}}), 5),
        (json!({"string": "s"}), 6),
    ] {
        let v = json!({"u": u, "c": "RED", "b": "", "f": 1.5, "d": 2.5});
        let body = c.from_json(&v, "payload").unwrap();
        assert_eq!(body[0], long(branch)[0], "{u}");
        assert_eq!(c.to_json(&body).unwrap(), v);
        // Field order is the schema's, not alphabetical.
        let keys: Vec<String> =
            c.to_json(&body).unwrap().as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["u", "c", "b", "f", "d"]);
    }
}

#[test]
fn bytes_and_fixed_are_one_code_point_per_byte() {
    let c = codec(r#""bytes""#);
    let all: Vec<u8> = (0..=255).collect();
    let mut body = long(256);
    body.extend_from_slice(&all);
    let shown = c.to_json(&body).unwrap();
    let expected: String = all.iter().map(|&b| char::from(b)).collect();
    assert_eq!(shown, json!(expected));
    assert_eq!(c.from_json(&shown, "payload").unwrap(), body);
    let m = message(c.from_json(&json!("\u{100}"), "payload"));
    assert_eq!(m, "payload: bytes string has a character above U+00FF (one code point per byte)");
}

#[test]
fn floats_are_shortest_and_non_finite_ones_are_strings() {
    let c = codec(r#""float""#);
    assert_eq!(c.to_json(&0.1f32.to_le_bytes()).unwrap(), json!(0.1));
    assert_eq!(c.from_json(&json!(0.1), "p").unwrap(), 0.1f32.to_le_bytes());
    for (f, s) in [(f32::NAN, "NaN"), (f32::INFINITY, "Infinity"), (f32::NEG_INFINITY, "-Infinity")]
    {
        let shown = c.to_json(&f.to_le_bytes()).unwrap();
        assert_eq!(shown, json!(s));
        let back = c.from_json(&shown, "p").unwrap();
        assert_eq!(f32::from_le_bytes(back.try_into().unwrap()).to_bits(), f.to_bits());
    }
    assert!(message(c.from_json(&json!(1e300), "p")).contains("out of range for float"));
    let d = codec(r#""double""#);
    assert_eq!(d.to_json(&0.1f64.to_le_bytes()).unwrap(), json!(0.1));
    assert_eq!(d.to_json(&f64::NAN.to_le_bytes()).unwrap(), json!("NaN"));
}

#[test]
fn logical_types_are_shown_as_their_underlying_types() {
    let c = codec(
        r#"{"type":"record","name":"L","fields":[
        {"name":"date","type":{"type":"int","logicalType":"date"}},
        {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
        {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":5,"scale":2}},
        {"name":"decf","type":{"type":"fixed","name":"D","size":3,"logicalType":"decimal","precision":5,"scale":2}},
        {"name":"uuid","type":{"type":"string","logicalType":"uuid"}},
        {"name":"uuidf","type":{"type":"fixed","name":"U","size":16,"logicalType":"uuid"}},
        {"name":"dur","type":{"type":"fixed","name":"Dur","size":12,"logicalType":"duration"}},
        {"name":"opt","type":["null",{"type":"int","logicalType":"date"}]}
    ]}"#,
    );
    let v = json!({
        "date": 19000, "ts": 1_700_000_000_000i64, "dec": "\u{00}\u{30}\u{39}", "decf": "\u{ff}\u{ff}\u{85}",
        "uuid": "0f8fad5b-d9cb-469f-a165-70867728950e", "uuidf": "0123456789abcdef",
        "dur": "\u{1}\u{0}\u{0}\u{0}\u{2}\u{0}\u{0}\u{0}\u{3}\u{0}\u{0}\u{0}", "opt": {"int": 5}
    });
    let body = c.from_json(&v, "payload").unwrap();
    assert_eq!(c.to_json(&body).unwrap(), v);
    // The date is the int 19000: zigzag 38000 as a varint.
    assert_eq!(&body[..3], long(19000).as_slice());
}

#[test]
fn missing_fields_take_their_defaults_and_union_defaults_are_for_the_first_branch() {
    let c = codec(
        r#"{"type":"record","name":"R","fields":[
        {"name":"a","type":"int"},
        {"name":"n","type":["null","string"],"default":null},
        {"name":"s","type":["string","null"],"default":"x"},
        {"name":"b","type":"bytes","default":"\u00ff"},
        {"name":"r","type":{"type":"record","name":"In","fields":[{"name":"k","type":"long","default":7}]},"default":{}}
    ]}"#,
    );
    let body = c.from_json(&json!({"a": 1}), "payload").unwrap();
    assert_eq!(
        c.to_json(&body).unwrap(),
        json!({"a": 1, "n": null, "s": {"string": "x"}, "b": "\u{ff}", "r": {"k": 7}})
    );
}

#[test]
fn encode_errors_name_the_field_path_and_what_is_wrong() {
    let c = codec(
        r#"{"type":"record","name":"P","namespace":"ns","fields":[
        {"name":"address","type":{"type":"record","name":"A","fields":[
            {"name":"zip","type":"int"},
            {"name":"tags","type":{"type":"array","items":{"type":"enum","name":"T","symbols":["X","Y"]}}}
        ]}},
        {"name":"id","type":{"type":"fixed","name":"Id","size":4}},
        {"name":"opt","type":["null","long"]}
    ]}"#,
    );
    let ok = json!({"address": {"zip": 1, "tags": ["X"]}, "id": "abcd", "opt": null});
    assert!(c.from_json(&ok, "payload").is_ok());
    let cases = [
        (
            json!({"address": {"zip": "x", "tags": []}, "id": "abcd", "opt": null}),
            r#"payload.address.zip: expected int, got "x""#,
        ),
        (
            json!({"address": {"zip": 1, "tags": ["Z"]}, "id": "abcd", "opt": null}),
            "payload.address.tags[0]: unknown symbol \"Z\" of enum ns.T (symbols: X, Y)",
        ),
        (
            json!({"address": {"zip": 1}, "id": "abcd", "opt": null}),
            "payload.address.tags: missing field of record ns.A (it has no default)",
        ),
        (
            json!({"address": {"zip": 1, "tags": []}, "id": "abc", "opt": null}),
            "payload.id: fixed ns.Id has size 4, got 3 bytes",
        ),
        (
            json!({"address": {"zip": 3_000_000_000i64, "tags": []}, "id": "abcd", "opt": null}),
            "payload.address.zip: int out of range: 3000000000",
        ),
        (
            json!({"address": {"zip": 1, "tags": []}, "id": "abcd", "opt": 5}),
            "payload.opt: union branch not named: expected null or {\"<branch>\": value} with a branch of [null, long], got 5",
        ),
        (
            json!({"address": {"zip": 1, "tags": []}, "id": "abcd", "opt": {"int": 5}}),
            "payload.opt: \"int\" is not a branch of union [null, long]",
        ),
        (
            json!({"address": {"zip": 1, "tags": []}, "id": "abcd", "opt": null, "extra": 1}),
            "payload.extra: no such field in record ns.P",
        ),
        (json!([1]), "payload: expected record ns.P (an object), got an array of 1"),
    ];
    for (v, expected) in cases {
        assert_eq!(message(c.from_json(&v, "payload")), expected);
    }
}

const LIST: &str = r#"{"type":"record","name":"Node","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","Node"]}]}"#;

fn list_body(n: usize) -> Vec<u8> {
    let mut body = Vec::new();
    for i in 0..n {
        body.extend(long(i as i64));
        body.extend(long(if i + 1 == n { 0 } else { 1 }));
    }
    body
}

#[test]
fn recursive_types_decode_to_the_depth_limit_and_no_further() {
    let c = codec(LIST);
    // Each node is a record and a union: two levels.
    let fits = MAX_DEPTH / 2;
    let v = c.to_json(&list_body(fits)).unwrap();
    assert_eq!(c.from_json(&v, "payload").unwrap(), list_body(fits));
    for n in [fits + 1, 100_000] {
        let m = message(c.to_json(&list_body(n)));
        assert!(m.contains(&format!("nested deeper than {MAX_DEPTH}")), "{m}");
        assert!(m.contains("next.next.next"), "{m}");
    }
    // A record that contains itself without a union takes no bytes per level.
    let endless = codec(r#"{"type":"record","name":"E","fields":[{"name":"e","type":"E"}]}"#);
    assert!(message(endless.to_json(b"")).contains("nested deeper"));
    // (Built by hand: json! would serialize `deep` again at every level.)
    let mut deep = Value::Null;
    for i in 0..1000 {
        let mut branch = Map::new();
        branch.insert("Node".into(), deep);
        let mut node = Map::new();
        node.insert("v".into(), json!(i));
        node.insert("next".into(), Value::Object(branch));
        deep = Value::Object(node);
    }
    let m = message(c.from_json(&deep["next"]["Node"], "payload"));
    assert!(m.contains(&format!("nested deeper than {MAX_DEPTH}")), "{m}");
    // A deep serde_json value is dropped iteratively by nobody: forget it rather than recurse.
    std::mem::forget(deep);
}

#[test]
fn block_counts_cannot_make_values_out_of_nothing() {
    // 2^60 nulls in one block take no bytes each: stopped by the value budget, quickly.
    let mut body = long(1 << 60);
    body.extend(long(0));
    let m = message(codec(r#"{"type":"array","items":"null"}"#).to_json(&body));
    assert!(m.contains("more values than the body can hold"), "{m}");
    // Empty records likewise; and a huge count of longs runs out of bytes.
    let empty = codec(r#"{"type":"array","items":{"type":"record","name":"Z","fields":[]}}"#);
    assert!(message(empty.to_json(&body)).contains("more values than"));
    let m = message(codec(r#"{"type":"array","items":"long"}"#).to_json(&body));
    assert!(m.contains("truncated"), "{m}");
    // A negative count is followed by the block's size in bytes (the spec's fast-skip form).
    let mut negative = long(-2);
    negative.extend(long(2));
    negative.extend(long(5));
    negative.extend(long(6));
    negative.extend(long(0));
    assert_eq!(
        codec(r#"{"type":"array","items":"long"}"#).to_json(&negative).unwrap(),
        json!([5, 6])
    );
    let mut min = long(i64::MIN);
    min.extend(long(0));
    assert!(
        message(codec(r#"{"type":"array","items":"long"}"#).to_json(&min))
            .contains("block count overflow")
    );
}

#[test]
fn lengths_are_checked_against_the_bytes_left_before_anything_is_allocated() {
    let c = codec(r#""string""#);
    let m = message(c.to_json(&long(1 << 40)));
    assert_eq!(
        m,
        "Avro body at byte 6: value: truncated: length 1099511627776 over the 0 bytes left"
    );
    let m = message(c.to_json(&long(-5)));
    assert_eq!(m, "Avro body at byte 1: value: negative length -5");
    let b = codec(r#"{"type":"map","values":"bytes"}"#);
    let mut body = long(1);
    body.extend(long(-1));
    assert!(message(b.to_json(&body)).contains("negative length -1"));
    assert!(message(c.to_json(&[0x80; 11])).contains("varint longer than 10 bytes"));
    let mut bad_utf8 = long(2);
    bad_utf8.extend([0xc3, 0x28]);
    assert!(message(c.to_json(&bad_utf8)).contains("string is not UTF-8"));
}

#[test]
fn truncated_bodies_bad_indexes_and_trailing_bytes_are_errors() {
    let c = codec(NAMED);
    let v = json!({"u": {"string": "hello"}, "c": "GREEN", "b": "xyz", "f": 1.0, "d": 2.0});
    let body = c.from_json(&v, "payload").unwrap();
    for cut in 0..body.len() {
        let m = message(c.to_json(&body[..cut]));
        assert!(m.contains("truncated"), "{cut}: {m}");
    }
    let mut trailing = body.clone();
    trailing.push(0);
    assert!(message(c.to_json(&trailing)).contains("1 bytes left after the value"));
    assert!(message(c.to_json(&long(7))).contains("union branch 7 out of range (7 branches)"));
    assert!(message(c.to_json(&long(-1))).contains("union branch -1 out of range"));
    let mut bad_enum = long(0);
    bad_enum.extend(long(2));
    assert!(
        message(c.to_json(&bad_enum))
            .contains("enum ordinal 2 out of range (enum com.ex.Color has 2 symbols)")
    );
    let boolean = codec(r#""boolean""#);
    assert!(message(boolean.to_json(&[2])).contains("boolean byte 2"));
    assert!(message(codec(r#""int""#).to_json(&long(1 << 40))).contains("int out of range"));
}

#[test]
fn hostile_schemas_are_errors_or_parse_but_never_panic() {
    assert!(message(AvroCodec::compile("{", &[])).contains("not JSON"));
    assert!(
        message(AvroCodec::compile(
            r#"{"type":"record","name":"R","fields":[{"name":"a","type":"Missing"}]}"#,
            &[]
        ))
        .contains("Avro schema")
    );
    // Nesting deeper than serde_json's limit.
    let deep = format!("{}\"int\"{}", r#"{"type":"array","items":"#.repeat(200), "}".repeat(200));
    assert!(message(AvroCodec::compile(&deep, &[])).contains("not JSON"));
    // 10 MB of schema text: a record of 200,000 int fields parses and decodes.
    let fields: Vec<String> = (0..200_000)
        .map(|i| format!(r#"{{"name":"f{i:06}_padding_padding_padding","type":"int"}}"#))
        .collect();
    let big = format!(r#"{{"type":"record","name":"Big","fields":[{}]}}"#, fields.join(","));
    assert!(big.len() > 10_000_000);
    let c = AvroCodec::compile(&big, &[]).unwrap();
    assert_eq!(c.to_json(&[0; 200_000]).unwrap().as_object().unwrap().len(), 200_000);
    // The same as nulls, which take no bytes: more values than an empty body may yield.
    let nulls = big.replace(r#""type":"int""#, r#""type":"null""#);
    let c = AvroCodec::compile(&nulls, &[]).unwrap();
    assert!(message(c.to_json(b"")).contains("more values than the body can hold"));
    // Over the text limit: refused before parsing.
    let huge = " ".repeat(MAX_SCHEMA_TEXT + 1);
    assert!(message(AvroCodec::compile(&huge, &[])).contains("over the limit"));
}

#[test]
fn named_types_of_referenced_schemas_resolve() {
    let address = r#"{"type":"record","name":"Address","namespace":"com.ex","fields":[{"name":"zip","type":"string"}]}"#;
    let person = r#"{"type":"record","name":"Person","namespace":"com.ex","fields":[{"name":"home","type":"com.ex.Address"},{"name":"work","type":["null","com.ex.Address"]}]}"#;
    assert!(AvroCodec::compile(person, &[]).is_err());
    let c = AvroCodec::compile(person, &[address]).unwrap();
    let v = json!({"home": {"zip": "1011"}, "work": {"com.ex.Address": {"zip": "2022"}}});
    let body = c.from_json(&v, "payload").unwrap();
    assert_eq!(c.to_json(&body).unwrap(), v);
}

#[test]
fn the_depth_limit_fits_in_a_one_mebibyte_stack() {
    // Half the 2 MiB of a spawned thread's default stack: decode and encode both reach
    // MAX_DEPTH and fail there without overflowing.
    let worker = std::thread::Builder::new().stack_size(1 << 20).spawn(|| {
        let c = codec(LIST);
        let too_deep = list_body(MAX_DEPTH);
        assert!(message(c.to_json(&too_deep)).contains("nested deeper"));
        let fits = c.to_json(&list_body(MAX_DEPTH / 2)).unwrap();
        let mut branch = Map::new();
        branch.insert("Node".into(), fits);
        let mut deeper = Map::new();
        deeper.insert("v".into(), json!(0));
        deeper.insert("next".into(), Value::Object(branch));
        let deeper = Value::Object(deeper);
        assert!(message(c.from_json(&deeper, "payload")).contains("nested deeper"));
        std::mem::forget(deeper);
    });
    worker.unwrap().join().unwrap();
}

const EVERYTHING: &str = r#"{"type":"record","name":"All","namespace":"p","fields":[
  {"name":"b","type":"boolean"},{"name":"i","type":"int"},{"name":"l","type":"long"},
  {"name":"f","type":"float"},{"name":"d","type":"double"},{"name":"by","type":"bytes"},
  {"name":"s","type":"string"},{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B","C"]}},
  {"name":"fx","type":{"type":"fixed","name":"F","size":3}},
  {"name":"a","type":{"type":"array","items":["null","int","E"]}},
  {"name":"m","type":{"type":"map","values":{"type":"array","items":"string"}}},
  {"name":"next","type":["null","All"]}
]}"#;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// Any bytes: an error or a value; a value encodes to a body that decodes to it again.
    #[test]
    fn arbitrary_bodies_never_panic_and_what_decodes_round_trips(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
        let c = codec(EVERYTHING);
        proptest::prop_assert_eq!(text_of(&c, &body), c.to_json_text(&body).ok());
        if let Ok(v) = c.to_json(&body) {
            let again = c.from_json(&v, "payload").unwrap();
            proptest::prop_assert_eq!(c.to_json(&again).unwrap(), v);
            proptest::prop_assert_eq!(text_of(&c, &again), c.to_json_text(&again).ok());
        }
    }

    /// Bodies built item by item for a loose schema (one byte changed, maybe): unchanged ones
    /// decode to as many items, and whatever decodes round-trips.
    #[test]
    fn built_bodies_decode_and_round_trip(
        items in proptest::collection::vec((0u8..5, proptest::prelude::any::<[u8; 4]>()), 0..20),
        flip in proptest::option::of((proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>())),
    ) {
        let c = codec(r#"{"type":"array","items":["null","boolean","int",{"type":"enum","name":"E","symbols":["A","B"]},"float"]}"#);
        let mut body = Vec::new();
        if !items.is_empty() {
            body.extend(long(items.len() as i64));
        }
        for (branch, bytes) in &items {
            body.extend(long(i64::from(*branch)));
            match branch {
                0 => {}
                1 => body.push(bytes[0] & 1),
                2 => body.extend(long(i64::from(i32::from_le_bytes(*bytes)))),
                3 => body.extend(long(i64::from(bytes[0] & 1))),
                _ => body.extend_from_slice(bytes),
            }
        }
        body.push(0);
        let flipped = flip.is_some();
        if let Some((at, byte)) = flip {
            let i = at.index(body.len());
            body[i] = byte;
        }
        proptest::prop_assert_eq!(text_of(&c, &body), c.to_json_text(&body).ok());
        match c.to_json(&body) {
            Ok(v) => {
                if !flipped {
                    proptest::prop_assert_eq!(v.as_array().map(Vec::len), Some(items.len()));
                }
                let again = c.from_json(&v, "payload").unwrap();
                proptest::prop_assert_eq!(c.to_json(&again).unwrap(), v);
            }
            Err(e) => proptest::prop_assert!(flipped, "{e}"),
        }
    }
}

/// What `to_json_text` must be: `serde_json::to_string` of the value (`None`: an error).
fn text_of(c: &AvroCodec, body: &[u8]) -> Option<String> {
    c.to_json(body).ok().map(|v| serde_json::to_string(&v).unwrap())
}

#[test]
fn json_text_is_serde_jsons_text_of_the_value_maps_with_a_key_twice_included() {
    let c = codec(EVERYTHING);
    let inner = json!({"b": true, "i": -5, "l": 1i64 << 50, "f": 0.5, "d": "NaN", "by": "\u{0}\u{ff}", "s": "é\"\n",
        "e": "C", "fx": "abc", "a": [null, {"int": 3}, {"p.E": "B"}], "m": {"k": ["x", ""], "j": []}, "next": null});
    let body = c.from_json(&inner, "payload").unwrap();
    assert_eq!(c.to_json_text(&body).ok(), text_of(&c, &body));
    assert_eq!(c.to_json_text(&body).unwrap(), serde_json::to_string(&inner).unwrap());
    // A map of two entries with the same key: the object keeps one, and so does the text.
    let m = codec(r#"{"type":"map","values":"int"}"#);
    let mut twice = long(2);
    for (k, v) in [("a", 1), ("a", 2)] {
        twice.extend(long(1));
        twice.extend_from_slice(k.as_bytes());
        twice.extend(long(v));
    }
    twice.push(0);
    assert_eq!(m.to_json_text(&twice).unwrap(), r#"{"a":2}"#);
    assert_eq!(m.to_json_text(&twice).ok(), text_of(&m, &twice));
    for cut in 0..body.len() {
        assert!(c.to_json_text(&body[..cut]).is_err(), "{cut}");
    }
}

#[test]
fn every_prefix_of_a_valid_body_is_an_error_not_a_panic() {
    let c = codec(EVERYTHING);
    let inner = json!({"b": true, "i": -5, "l": 1i64 << 50, "f": 0.5, "d": "NaN", "by": "\u{0}\u{ff}", "s": "é",
        "e": "C", "fx": "abc", "a": [null, {"int": 3}, {"p.E": "B"}], "m": {"k": ["x", ""]}, "next": null});
    let mut outer = inner.clone();
    outer["next"] = json!({"p.All": inner});
    let body = c.from_json(&outer, "payload").unwrap();
    assert_eq!(c.to_json(&body).unwrap(), outer);
    for cut in 0..body.len() {
        assert!(c.to_json(&body[..cut]).is_err(), "{cut}");
    }
}
