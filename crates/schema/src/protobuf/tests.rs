//! Unit tests: message indexes, hostile values and schemas, error messages. The comparison
//! with an independent encoder (Python's protobuf) is crates/schema/tests/protobuf_compat.rs.

use super::*;
use serde_json::json;

const SHOP: &str = r#"
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

message Order {
  string id = 1;
  int64 total_cents = 2;
  message Item { string sku = 1; uint32 count = 2; }
  repeated Item items = 3;
  map<string, Item> by_sku = 4;
  message Note { string text = 1; }
  google.protobuf.Timestamp at = 5;
}
message Tree { string name = 1; repeated Tree children = 2; }
"#;

fn shop() -> ProtobufSchema {
    ProtobufSchema::compile(SHOP, &[]).expect("SHOP compiles")
}

fn invalid(result: Result<impl std::fmt::Debug>) -> String {
    match result {
        Err(Error::InvalidInput(message)) => message,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[test]
fn message_names_are_in_index_order_without_map_entries() {
    assert_eq!(
        shop().message_names(),
        ["shop.Order", "shop.Order.Item", "shop.Order.Note", "shop.Tree"]
    );
}

#[test]
fn indexes_skip_map_entries_and_zero_is_one_byte() {
    let s = shop();
    // [0]: the single byte 0.
    assert_eq!(s.from_json(None, &json!({"id": "a"})).unwrap(), [0, 0x0a, 1, b'a']);
    // shop.Order.Note is [0, 1]: the map entry BySkuEntry declared before it does not count.
    let note = s.from_json(Some("shop.Order.Note"), &json!({"text": "x"})).unwrap();
    assert_eq!(&note[..3], [4, 0, 2]);
    let (value, name) = s.to_json(&note).unwrap();
    assert_eq!((value, name.as_str()), (json!({"text": "x"}), "shop.Order.Note"));
    // [1]: count 1 then index 1 (zigzag 2, 2).
    let tree = s.from_json(Some("shop.Tree"), &json!({"name": "t"})).unwrap();
    assert_eq!(&tree[..2], [2, 2]);
    // An explicit [0] (count 1, index 0) is the first message too.
    assert_eq!(s.to_json(&[2, 0, 0x0a, 1, b'a']).unwrap().1, "shop.Order");
}

#[test]
fn zigzag_varints_round_trip_at_their_limits() {
    for value in [0, 1, -1, 63, -64, 64, 300, i32::MAX, i32::MIN] {
        let mut out = Vec::new();
        write_zigzag(value, &mut out);
        let mut pos = 0;
        assert_eq!(read_zigzag(&out, &mut pos, "x").unwrap(), value);
        assert_eq!(pos, out.len());
    }
}

#[test]
fn hostile_indexes_are_refused_naming_the_index() {
    let s = shop();
    assert!(invalid(s.to_json(&[])).contains("count at byte 0 is truncated"));
    // A negative count.
    assert!(invalid(s.to_json(&[1])).contains("count -1 is negative"));
    // A huge count with nothing after it: truncated at its first index, nothing allocated.
    let mut huge = Vec::new();
    write_zigzag(i32::MAX, &mut huge);
    assert!(invalid(s.to_json(&huge)).contains("message index 1 of 2147483647"));
    // A huge count whose indexes go deeper than the nesting.
    let mut deep = huge.clone();
    deep.extend([0; 64]);
    assert!(invalid(s.to_json(&deep)).contains("index 0 names no message (shop.Order.Item has 0"));
    // Out of range at the top and nested; a negative index.
    assert!(
        invalid(s.to_json(&[2, 4])).contains("[2]: index 2 names no message (the schema has 2")
    );
    assert!(invalid(s.to_json(&[4, 0, 4])).contains("shop.Order has 2 nested messages"));
    assert!(invalid(s.to_json(&[2, 1])).contains("index -1 names no message"));
    // A varint over 32 bits, and one over 5 bytes.
    assert!(invalid(s.to_json(&[0xff, 0xff, 0xff, 0xff, 0x1f])).contains("over 32 bits"));
    assert!(invalid(s.to_json(&[0x80, 0x80, 0x80, 0x80, 0x80, 0])).contains("over 32 bits"));
}

#[test]
fn damaged_messages_are_errors_naming_the_type() {
    let s = shop();
    // A length-delimited field whose length runs past the end.
    let message = invalid(s.to_json(&[0, 0x0a, 10, b'a']));
    assert!(message.contains("type shop.Order (message at byte 1"), "{message}");
    assert!(message.contains("field id at byte 1: length 10, 1 bytes left"), "{message}");
    // A wrong wire type for field 1 (string sent as varint).
    let message = invalid(s.to_json(&[0, 0x08, 1]));
    assert!(message.contains("field id at byte 1: wire type 0 where its type has 2"), "{message}");
    // Inside the second element of a repeated message: its string is not UTF-8. (The byte
    // is where the field starts: its key.)
    let message = invalid(s.to_json(&[0, 0x1a, 0, 0x1a, 3, 0x0a, 1, 0xff]));
    assert!(
        message.contains("field items[1].sku at byte 5: a string that is not UTF-8"),
        "{message}"
    );
    // A truncated varint in a nested message, and a field key cut short.
    let message = invalid(s.to_json(&[0, 0x1a, 2, 0x10, 0x80]));
    assert!(message.contains("field items[0].count at byte 3: a truncated varint"), "{message}");
    let message = invalid(s.to_json(&[0, 0x80]));
    assert!(message.contains("the message at byte 1: a truncated field key"), "{message}");
    // Garbage never panics: random bytes after each valid index path (seeded xorshift), and
    // every truncation of a full value.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let prefixes: [&[u8]; 5] = [&[0], &[4, 0, 0], &[4, 0, 2], &[2, 2], &[]];
    for n in 0..20_000 {
        let mut bytes = prefixes[n % prefixes.len()].to_vec();
        bytes.extend((0..next() % 48).map(|_| next() as u8));
        let _ = s.to_json(&bytes);
    }
    let full = json!({"id": "o", "totalCents": "-5", "items": [{"sku": "a", "count": 3}],
                      "bySku": {"k": {"sku": "v"}}, "at": "2020-01-01T00:00:00Z"});
    let bytes = s.from_json(None, &full).unwrap();
    for end in 0..bytes.len() {
        let _ = s.to_json(&bytes[..end]);
    }
}

#[test]
fn a_recursive_type_decodes_and_refuses_nesting_past_the_limit() {
    let s = shop();
    // 90 levels, under prost's limit of 100 (and walked once each: a walk per name of a field
    // would be 2^90).
    let mut value = json!({"name": "leaf"});
    for _ in 0..90 {
        value = json!({"name": "n", "children": [value]});
    }
    let bytes = s.from_json(Some("shop.Tree"), &value).unwrap();
    assert_eq!(s.to_json(&bytes).unwrap().0, value);
    // 200 levels of Tree { children: [...] } built by hand: past prost's limit of 100.
    let mut body: Vec<u8> = Vec::new();
    for _ in 0..200 {
        let mut outer = vec![0x12];
        let mut len = body.len();
        while len >= 0x80 {
            outer.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        outer.push(len as u8);
        outer.extend_from_slice(&body);
        body = outer;
    }
    let mut framed = vec![2, 2];
    framed.extend_from_slice(&body);
    let message = invalid(s.to_json(&framed));
    assert!(message.contains("shop.Tree") && message.contains("recursion limit"), "{message}");
}

#[test]
fn values_that_do_not_match_are_refused_naming_the_field() {
    let s = shop();
    let message = invalid(s.from_json(None, &json!({"id": "a", "colour": 1})));
    assert!(message.contains("shop.Order") && message.contains("colour"), "{message}");
    let message = invalid(s.from_json(None, &json!({"items": [{"sku": "a"}, {"count": "many"}]})));
    assert!(message.contains("items[1].count"), "{message}");
    let message = invalid(s.from_json(None, &json!({"totalCents": "12x"})));
    assert!(message.contains("totalCents"), "{message}");
    let message = invalid(s.from_json(None, &json!({"at": "yesterday"})));
    assert!(message.contains("field at"), "{message}");
    let message = invalid(s.from_json(None, &json!([1, 2])));
    assert!(message.contains("shop.Order"), "{message}");
    let message = invalid(s.from_json(None, &json!({"items": [{"count": 1.5}]})));
    assert!(message.contains("field items[0].count"), "{message}");
    let message = invalid(s.from_json(None, &json!({"items": [{"count": -1}]})));
    assert!(message.contains("field items[0].count"), "{message}");
    let e = ProtobufSchema::compile(
        "syntax = \"proto3\";\nenum E { ZERO = 0; ONE = 1; }\nmessage M { E e = 1; }\n",
        &[],
    )
    .unwrap();
    let message = invalid(e.from_json(None, &json!({"e": "TWO"})));
    assert!(message.contains("field e") && message.contains("TWO"), "{message}");
    // Enum numbers are accepted, and a number the enum lacks is shown as the number.
    assert_eq!(e.from_json(None, &json!({"e": 1})).unwrap(), [0, 0x08, 1]);
    assert_eq!(e.to_json(&[0, 0x08, 1]).unwrap().0, json!({"e": "ONE"}));
    assert_eq!(e.to_json(&[0, 0x08, 7]).unwrap().0, json!({"e": 7}));
    assert!(invalid(s.from_json(Some("shop.Nope"), &json!({}))).contains("no message shop.Nope"));
    let message = invalid(s.from_json(Some("google.protobuf.Timestamp"), &json!({})));
    assert!(message.contains("defined in import"), "{message}");
    let message = invalid(s.from_json(Some("shop.Order.BySkuEntry"), &json!({})));
    assert!(message.contains("no message shop.Order.BySkuEntry"), "{message}");
}

#[test]
fn json_mapping_omits_defaults_and_stringifies_64_bit_integers() {
    let s = shop();
    let value = json!({
        "id": "o-1", "totalCents": "9007199254740993",
        "items": [{"sku": "a", "count": 2}, {}],
        "bySku": {"a": {"sku": "a"}},
        "at": "2024-02-29T12:00:00.500Z"
    });
    let bytes = s.from_json(None, &value).unwrap();
    assert_eq!(s.to_json(&bytes).unwrap().0, value);
    // A Timestamp past year 9999 has no JSON form: an error naming the type.
    let mut bytes = vec![0, 0x2a, 7, 0x08];
    let mut seconds: u64 = 253_402_300_800;
    while seconds >= 0x80 {
        bytes.push((seconds as u8 & 0x7f) | 0x80);
        seconds >>= 7;
    }
    bytes.push(seconds as u8);
    let message = invalid(s.to_json(&bytes));
    assert!(message.contains("shop.Order") && message.contains("timestamp"), "{message}");
    // Defaults are omitted; the proto name of a field is accepted on input.
    let bytes = s.from_json(None, &json!({"id": "", "total_cents": 0})).unwrap();
    assert_eq!(s.to_json(&bytes).unwrap().0, json!({}));
}

#[test]
fn garbage_and_broken_schemas_are_errors_with_a_position() {
    let message = invalid(ProtobufSchema::compile("syntax = \"proto3\";\nmessage {", &[]));
    assert!(message.contains("the schema, line 2"), "{message}");
    let message = invalid(ProtobufSchema::compile(
        "syntax = \"proto3\";\nmessage A {\n  Missing m = 1;\n}\n",
        &[],
    ));
    assert!(message.contains("line 3") && message.contains("Missing"), "{message}");
    let message = invalid(ProtobufSchema::compile(
        "syntax = \"proto3\";\nimport \"other.proto\";\nmessage A { B b = 1; }\n",
        &[],
    ));
    assert!(message.contains("other.proto"), "{message}");
    let broken_import =
        [("other.proto".to_string(), "syntax = \"proto3\";\n\nmessage B { int32 }".to_string())];
    let message = invalid(ProtobufSchema::compile(
        "syntax = \"proto3\";\nimport \"other.proto\";\nmessage A { B b = 1; }\n",
        &broken_import,
    ));
    assert!(message.contains("import \"other.proto\", line 3"), "{message}");
    for garbage in ["\u{0}\u{1}\u{2}", "}}}}", "message A { int32 a = 99999999999; }", ""] {
        let _ = ProtobufSchema::compile(garbage, &[]);
    }
    // References that import each other.
    let cycle = [
        ("a.proto".to_string(), "syntax = \"proto3\";\nimport \"b.proto\";\n".to_string()),
        ("b.proto".to_string(), "syntax = \"proto3\";\nimport \"a.proto\";\n".to_string()),
    ];
    let message = invalid(ProtobufSchema::compile("import \"a.proto\";\nmessage M {}", &cycle));
    assert!(message.contains("cycle"), "{message}");
    // Nesting without end is refused by the parser at its limit, not by the stack.
    let deep = format!(
        "syntax = \"proto3\";\n{}{}",
        "message A {\n".repeat(100_000),
        "}\n".repeat(100_000)
    );
    let message = invalid(ProtobufSchema::compile(&deep, &[]));
    assert!(message.contains("line 33") && message.contains("recursion limit"), "{message}");
    // An empty file compiles but has no message to decode or encode.
    let empty = ProtobufSchema::compile("syntax = \"proto3\";", &[]).unwrap();
    assert!(empty.message_names().is_empty());
    assert!(invalid(empty.to_json(&[0])).contains("defines no message"));
    assert!(invalid(empty.from_json(None, &json!({}))).contains("defines no message"));
}

#[test]
fn references_resolve_by_their_import_names() {
    let imports = [(
        "common/money.proto".to_string(),
        "syntax = \"proto3\";\npackage common;\nmessage Money { string currency = 1; int64 units = 2; }\n"
            .to_string(),
    )];
    let s = ProtobufSchema::compile(
        "syntax = \"proto3\";\npackage pay;\nimport \"common/money.proto\";\n\
         message Payment { common.Money amount = 1; }\n",
        &imports,
    )
    .unwrap();
    assert_eq!(s.message_names(), ["pay.Payment"]);
    let value = json!({"amount": {"currency": "EUR", "units": "12"}});
    let bytes = s.from_json(None, &value).unwrap();
    assert_eq!(s.to_json(&bytes).unwrap(), (value, "pay.Payment".to_string()));
}

#[test]
fn floats_printed_at_f32_max_encode_again_and_past_it_are_refused() {
    let s = ProtobufSchema::compile(
        "syntax = \"proto3\";\nimport \"google/protobuf/wrappers.proto\";\n\
         message F { float f = 1; repeated float fs = 2; map<string, float> m = 3;\n\
         google.protobuf.FloatValue w = 4; F inner = 5; }\n",
        &[],
    )
    .unwrap();
    let max = json!({"f": 3.4028235e38, "fs": [-3.4028235e38, 1.1], "m": {"k": 3.4028235e38},
                     "w": 3.4028235e38, "inner": {"f": 3.4028235e38}});
    let bytes = s.from_json(None, &max).unwrap();
    assert_eq!(s.to_json(&bytes).unwrap().0, max);
    let message = invalid(s.from_json(None, &json!({"inner": {"fs": [1, 3.5e38]}})));
    assert!(message.contains("field inner.fs[1]") && message.contains("out of range"), "{message}");
}
/// Token soups (seeded, the same each run): compile never panics, nor what follows on the
/// schemas that compile.
#[test]
fn garbage_schema_texts_never_panic() {
    let tokens = [
        "syntax",
        "=",
        "\"proto3\"",
        "\"proto2\"",
        ";",
        "message",
        "A",
        "B",
        "{",
        "}",
        "int32",
        "string",
        "map",
        "<",
        ">",
        ",",
        "1",
        "0",
        "-1",
        "99999999999",
        "repeated",
        "optional",
        "oneof",
        "enum",
        "import",
        "\"google/protobuf/timestamp.proto\"",
        "\"x.proto\"",
        "package",
        "a.b",
        ".A",
        "extensions",
        "to",
        "max",
        "reserved",
        "option",
        "(",
        ")",
        "[",
        "]",
        "json_name",
        "\"x\"",
        "service",
        "rpc",
        "returns",
        "stream",
        "group",
        "extend",
        "edition",
        "\"2023\"",
        "\u{0}",
        "\u{ff}",
        "/*",
        "*/",
        "//",
        "\n",
        "true",
        "inf",
        "nan",
        "-",
        "0x7fffffff",
        "1e400",
    ];
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let import =
        [("x.proto".to_string(), "syntax = \"proto3\"; message X { int32 a = 1; }".to_string())];
    let mut compiled = 0;
    for n in 0..20000 {
        let len = (next() % 40) as usize;
        let mut text = String::from(if n % 2 == 0 { "syntax = \"proto3\";\n" } else { "" });
        for _ in 0..len {
            text.push_str(tokens[(next() % tokens.len() as u64) as usize]);
            text.push(' ');
        }
        if let Ok(s) = ProtobufSchema::compile(&text, &import) {
            for name in s.message_names() {
                let _ = s.from_json(Some(&name), &json!({}));
            }
            let mut bytes = vec![0u8; (next() % 16) as usize];
            bytes.iter_mut().for_each(|b| *b = next() as u8);
            let _ = s.to_json(&bytes);
            compiled += 1;
        }
    }
    assert!(compiled > 0, "no token soup compiled: the soups test nothing past the parser");
}
/// Random JSON (seeded) against three message types: refusals are errors, never panics, and a
/// value that is accepted decodes, and its JSON encodes again to the same JSON.
#[test]
fn random_json_never_panics_and_what_is_accepted_round_trips() {
    let s = shop();
    let keys = [
        "id",
        "totalCents",
        "total_cents",
        "items",
        "bySku",
        "at",
        "sku",
        "count",
        "name",
        "children",
        "x",
        "@type",
    ];
    let mut seed: u64 = 0x1234_5678_9abc_def1;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    fn make(next: &mut dyn FnMut() -> u64, keys: &[&str], depth: u32) -> serde_json::Value {
        match next() % if depth > 4 { 6 } else { 8 } {
            0 => json!(null),
            1 => json!(next() % 2 == 0),
            2 => json!(next() as i64),
            3 => {
                // Random bits (huge, tiny, fractional) or a small number.
                let f = f64::from_bits(next());
                json!(if f.is_finite() { f } else { (next() % 1000) as f64 / 8.0 })
            }
            4 => json!(
                ["x", "1", "-1", "1e5", "2020-01-01T00:00:00Z", "NaN", "", "AAAA"]
                    [(next() % 8) as usize]
            ),
            5 => json!(next() % 300),
            6 => serde_json::Value::Array(
                (0..next() % 3).map(|_| make(next, keys, depth + 1)).collect(),
            ),
            _ => serde_json::Value::Object(
                (0..next() % 4)
                    .map(|_| {
                        (
                            keys[(next() % keys.len() as u64) as usize].to_string(),
                            make(next, keys, depth + 1),
                        )
                    })
                    .collect(),
            ),
        }
    }
    let mut ok = 0;
    for _ in 0..50_000 {
        let v = make(&mut next, &keys, 0);
        for m in ["shop.Order", "shop.Order.Item", "shop.Tree"] {
            if let Ok(b) = s.from_json(Some(m), &v) {
                ok += 1;
                let (shown, name) = s.to_json(&b).unwrap();
                assert_eq!(name, m);
                let again = s.from_json(Some(m), &shown).unwrap();
                assert_eq!(s.to_json(&again).unwrap().0, shown, "{v}");
            }
        }
    }
    assert!(ok > 1000, "only {ok} random values were accepted");
}
