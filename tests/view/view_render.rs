//! Rendering and the append envelopes: kcat's shapes, RFC 8259 escaping, lossless round trips.

use proptest::prelude::*;
use topicfs::error::Error;
use topicfs::format::{
    BatchSpec, NO_TIMESTAMP, NewRecord, Offset, TimestampType, decode_batch, encode_batch,
};
use topicfs::view::envelope::{parse_envelope, split_envelope_lines, split_value_lines};
use topicfs::view::render::{ByteCounter, JsonPayload, Renderer, write_json_str};
use topicfs::view::spec::Format;

/// Renders `records` (one batch built from `spec`) in `format`.
fn render(format: Format, spec: &BatchSpec, records: &[NewRecord]) -> Vec<u8> {
    let bytes = encode_batch(spec, records).unwrap();
    let batch = decode_batch(&bytes).unwrap();
    let renderer = Renderer::new(format, "topic \"q\"", 7);
    let mut out = Vec::new();
    for r in batch.records() {
        renderer.render(batch.info(), &r.unwrap(), &mut out);
    }
    out
}

fn record(key: Option<&[u8]>, value: Option<&[u8]>, ts: i64) -> NewRecord {
    NewRecord {
        timestamp: ts,
        key: key.map(<[u8]>::to_vec),
        value: value.map(<[u8]>::to_vec),
        headers: Vec::new(),
    }
}

#[test]
fn value_lines_are_the_value_and_a_newline_with_null_as_an_empty_line() {
    let records =
        [record(None, Some(b"one"), 1), record(Some(b"k"), None, 2), record(None, Some(b""), 3)];
    assert_eq!(render(Format::Values, &BatchSpec::default(), &records), b"one\n\n\n");
}

#[test]
fn json_has_kcat_field_names_and_order() {
    let mut r = record(Some(b"k1"), Some(b"hello"), 1_764_662_400_000);
    r.headers = vec![(b"h1".to_vec(), Some(b"v1".to_vec())), (b"h2".to_vec(), None)];
    let spec = BatchSpec { base_offset: Offset(41), ..BatchSpec::default() };
    let out = render(Format::Json, &spec, &[record(None, None, 5), r]);
    let text = String::from_utf8(out).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        r#"{"topic":"topic \"q\"","partition":7,"offset":41,"tstype":"create","ts":5,"broker":-1,"key":null,"payload":null}"#
    );
    assert_eq!(
        lines.next().unwrap(),
        r#"{"topic":"topic \"q\"","partition":7,"offset":42,"tstype":"create","ts":1764662400000,"broker":-1,"headers":["h1","v1","h2",null],"key":"k1","payload":"hello"}"#
    );
    assert!(text.ends_with("}\n"));
}

#[test]
fn json_escapes_quotes_backslashes_and_control_characters_per_rfc8259() {
    let mut out = Vec::new();
    write_json_str(&mut out, "a\"b\\c\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}é😀/");
    assert_eq!(
        String::from_utf8(out.clone()).unwrap(),
        "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0000\\u001f\u{7f}é😀/\""
    );
    let back: String = serde_json::from_slice(&out).unwrap();
    assert_eq!(back, "a\"b\\c\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}é😀/");
}

#[test]
fn non_utf8_bytes_are_base64_with_an_encoding_marker() {
    let mut r = record(Some(&[0xff, 0x00]), Some(&[0xc3, 0x28]), 9);
    r.headers = vec![(b"a".to_vec(), Some(b"text".to_vec())), (b"b".to_vec(), Some(vec![0x80]))];
    let out = render(Format::Json, &BatchSpec::default(), &[r.clone()]);
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains(r#""headers":["a","dGV4dA==","b","gA=="],"headers_encoding":"base64""#));
    assert!(text.contains(r#""key":"/wA=","key_encoding":"base64""#), "{text}");
    assert!(text.contains(r#""payload":"wyg=","payload_encoding":"base64"}"#), "{text}");
    let back = parse_envelope(text.trim_end().as_bytes(), 1).unwrap();
    assert_eq!(back, r);
}

#[test]
fn log_append_time_batches_render_logappend_with_the_batch_time() {
    let spec = BatchSpec {
        timestamp_type: TimestampType::LogAppendTime,
        log_append_time: 123,
        ..BatchSpec::default()
    };
    let text =
        String::from_utf8(render(Format::Json, &spec, &[record(None, Some(b"x"), 5)])).unwrap();
    assert!(text.contains(r#""tstype":"logappend","ts":123,"#), "{text}");
}

#[test]
fn value_lines_split_on_newline_and_keep_the_unterminated_rest() {
    let (records, rest) = split_value_lines(b"a\nb\r\n\nc");
    let values: Vec<_> = records.iter().map(|r| r.value.clone().unwrap()).collect();
    assert_eq!(values, [b"a".to_vec(), b"b\r".to_vec(), Vec::new()]);
    assert!(records.iter().all(|r| r.key.is_none() && r.timestamp == NO_TIMESTAMP));
    assert_eq!(rest, b"c");
    let (records, rest) = split_value_lines(b"");
    assert!(records.is_empty() && rest.is_empty());
}

#[test]
fn envelope_lines_accept_kcat_output_and_skip_blank_lines() {
    let input = concat!(
        r#"{"topic":"x","partition":3,"offset":9,"tstype":"create","ts":5,"broker":-1,"key":"k","payload":"v"}"#,
        "\n  \n",
        r#"{"payload":null,"headers":{"a":"1","b":["2",null]}}"#,
        "\n",
        r#"{"payload":"partial"#
    );
    let (records, rest) = split_envelope_lines(input.as_bytes(), 1).unwrap();
    assert_eq!(rest, br#"{"payload":"partial"#);
    assert_eq!(records[0], record(Some(b"k"), Some(b"v"), 5));
    assert_eq!(records[1].value, None);
    assert_eq!(records[1].timestamp, NO_TIMESTAMP);
    assert_eq!(
        records[1].headers,
        vec![
            (b"a".to_vec(), Some(b"1".to_vec())),
            (b"b".to_vec(), Some(b"2".to_vec())),
            (b"b".to_vec(), None)
        ]
    );
}

#[test]
fn malformed_envelopes_are_invalid_input_naming_the_line() {
    for (line, why) in [
        (r#"{"payload":"a""#, "malformed"),
        (r#"[1,2]"#, "not a JSON object"),
        (r#"{"value":"typo"}"#, "unknown field"),
        (r#"{"payload":5,"payload_encoding":"base64"}"#, "string or null"),
        (r#"{"headers":["a",5]}"#, "string or null"),
        (r#"{"key":"***","key_encoding":"base64"}"#, "base64"),
        (r#"{"payload":"a","payload_encoding":"hex"}"#, "payload_encoding"),
        (r#"{"headers":["a"]}"#, "alternate"),
        (r#"{"headers":[1,"v"]}"#, "header name"),
        (r#"{"headers":"a=b"}"#, "array or object"),
        (r#"{"ts":"now"}"#, "integer"),
        (r#"{"ts":-5}"#, "epoch"),
        (r#"{"ts":1.5}"#, "epoch"),
    ] {
        let input = format!("{{}}\n{line}\n");
        let err = split_envelope_lines(input.as_bytes(), 10).unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{line}: {err}");
        assert_eq!(err.errno(), libc::EINVAL);
        let msg = err.to_string();
        assert!(msg.contains("line 11") && msg.contains(why), "{line}: {msg}");
    }
}

fn arb_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..24),
        ".{0,12}".prop_map(String::into_bytes),
        Just(b"\"\\\n\t\x00\x1f".to_vec()),
    ]
}

fn arb_record() -> impl Strategy<Value = NewRecord> {
    (
        prop::option::of(arb_bytes()),
        prop::option::of(arb_bytes()),
        prop::collection::vec(
            (".{0,8}".prop_map(String::into_bytes), prop::option::of(arb_bytes())),
            0..4,
        ),
        0i64..=i64::MAX / 2,
    )
        .prop_map(|(key, value, headers, timestamp)| NewRecord {
            timestamp,
            key,
            value,
            headers,
        })
}

proptest! {
    /// A JSON string is exactly what serde_json writes for it, wherever the bytes that need an
    /// escape fall relative to the 16-byte blocks the clean runs are found in.
    #[test]
    fn json_strings_are_what_serde_json_writes(
        pieces in prop::collection::vec(
            prop_oneof![
                "[a-z0-9 ]{0,40}",
                Just("\"".to_string()),
                Just("\\".to_string()),
                Just("\n".to_string()),
                Just("\u{1}".to_string()),
                Just("\u{1f}".to_string()),
                Just("é😀".to_string()),
                "\\PC{0,5}",
            ],
            0..12,
        )
    ) {
        let s: String = pieces.concat();
        let mut out = Vec::new();
        write_json_str(&mut out, &s);
        prop_assert_eq!(String::from_utf8(out).unwrap(), serde_json::to_string(&s).unwrap());
        let mut counter = ByteCounter::default();
        write_json_str(&mut counter, &s);
        prop_assert_eq!(counter.0 as usize, serde_json::to_string(&s).unwrap().len());
    }

    /// `.json` output parses back through `append.json` into the same key, value, headers and
    /// timestamp, whatever the bytes; each line is valid JSON with kcat's keys.
    #[test]
    fn json_round_trips_through_the_append_envelope(records in prop::collection::vec(arb_record(), 1..6)) {
        let out = render(Format::Json, &BatchSpec::default(), &records);
        let (parsed, rest) = split_envelope_lines(&out, 1).unwrap();
        prop_assert!(rest.is_empty());
        prop_assert_eq!(parsed, records);
        for line in out.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let v: serde_json::Value = serde_json::from_slice(line).unwrap();
            prop_assert_eq!(v["broker"].as_i64(), Some(-1));
            prop_assert_eq!(v["partition"].as_i64(), Some(7));
        }
    }

    /// Counting rendered bytes gives exactly the rendered length, in both record formats.
    #[test]
    fn byte_counter_equals_rendered_length(records in prop::collection::vec(arb_record(), 1..6)) {
        let bytes = encode_batch(&BatchSpec::default(), &records).unwrap();
        let batch = decode_batch(&bytes).unwrap();
        for format in [Format::Values, Format::Json] {
            let renderer = Renderer::new(format, "t", 0);
            for r in batch.records() {
                let r = r.unwrap();
                let mut out = Vec::new();
                let mut counter = ByteCounter(0);
                renderer.render(batch.info(), &r, &mut out);
                renderer.render(batch.info(), &r, &mut counter);
                prop_assert_eq!(counter.0, out.len() as u64);
            }
        }
    }
}

/// Renders `records` in `.json` with payloads that are JSON shown as JSON.
fn render_objects(records: &[NewRecord]) -> String {
    let bytes = encode_batch(&BatchSpec::default(), records).unwrap();
    let batch = decode_batch(&bytes).unwrap();
    let renderer = Renderer::new(Format::Json, "t", 0).with_json_payload(JsonPayload::Object);
    let mut out = Vec::new();
    let mut counter = ByteCounter(0);
    for r in batch.records() {
        let r = r.unwrap();
        renderer.render(batch.info(), &r, &mut out);
        renderer.render(batch.info(), &r, &mut counter);
    }
    assert_eq!(counter.0, out.len() as u64, "the size path counts what is written");
    String::from_utf8(out).unwrap()
}

/// What follows `"payload":` in a `.json` line.
fn payload_of(line: &str) -> &str {
    let at = line.find(r#""payload":"#).unwrap() + r#""payload":"#.len();
    line[at..].strip_suffix('}').unwrap()
}

#[test]
fn json_payload_object_shows_json_values_as_json_and_everything_else_as_before() {
    let cases: [(&[u8], &str); 14] = [
        (br#"{"user":"a","n":1}"#, r#"{"user":"a","n":1}"#),
        (br#"{"a":{"b":[1,{"c":null}]},"d":"x\"y"}"#, r#"{"a":{"b":[1,{"c":null}]},"d":"x\"y"}"#),
        (b"[1, 2,\n 3]\n", "[1,2,3]"),
        (b" {\r\n  \"a b\" : \"c d\"\t}\n", r#"{"a b":"c d"}"#),
        (b"-12.5e3", "-12.5e3"),
        (b"42", "42"),
        (b"true", "true"),
        (b"false", "false"),
        // A JSON string or null would read back as another value (or a tombstone): a string.
        (br#""quoted""#, r#""\"quoted\"""#),
        (b"null", r#""null""#),
        (b"not json", r#""not json""#),
        (br#"{"a":1"#, r#""{\"a\":1""#),
        (b"{\"a\":\"line\nbreak\"}", r#""{\"a\":\"line\nbreak\"}""#),
        (b"\xff{}", r#""/3t9","payload_encoding":"base64""#),
    ];
    for (value, expected) in cases {
        let text = render_objects(&[record(Some(b"42"), Some(value), 1)]);
        assert_eq!(text.matches('\n').count(), 1, "one line: {text}");
        let line = text.trim_end();
        assert_eq!(payload_of(line), expected, "{:?}", String::from_utf8_lossy(value));
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        // The key stays a string, even when it reads as JSON.
        assert_eq!(v["key"], serde_json::json!("42"));
        // And the line appends back to the same record.
        let back = parse_envelope(line.as_bytes(), 1).unwrap();
        let stored: &[u8] = if expected.starts_with('"') { value } else { expected.as_bytes() };
        assert_eq!(back.value.as_deref(), Some(stored), "{line}");
    }
    let text = render_objects(&[record(None, None, 1)]);
    assert_eq!(payload_of(text.trim_end()), "null", "a tombstone is null");
}

#[test]
fn json_payload_object_is_only_for_json_renderers() {
    let values = Renderer::new(Format::Values, "t", 0);
    assert_eq!(values.clone().with_json_payload(JsonPayload::Object), values);
    let json = Renderer::new(Format::Json, "t", 0);
    assert_ne!(json.clone().with_json_payload(JsonPayload::Object), json);
    assert_eq!("object".parse(), Ok(JsonPayload::Object));
    assert_eq!("string".parse(), Ok(JsonPayload::String));
    assert!("obj".parse::<JsonPayload>().unwrap_err().contains("string or object"));
}

/// A JSON value in compact form, as `jq -c` and most producers write it.
fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        "\\PC{0,6}".prop_map(serde_json::Value::from),
        Just(serde_json::Value::from("q\"\\\n\u{1}")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::vec(("[a-z\"]{0,4}", inner), 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    /// With payloads as JSON, every line is one line of valid JSON whose payload is the value
    /// itself when it is a JSON object, array, number or boolean (a string otherwise), and
    /// appends back to the same records.
    #[test]
    fn json_payload_object_round_trips_through_the_append_envelope(
        values in prop::collection::vec(
            prop_oneof![arb_json().prop_map(|v| v.to_string().into_bytes()), arb_bytes()],
            1..6,
        )
    ) {
        let records: Vec<NewRecord> =
            values.iter().map(|v| record(Some(b"k"), Some(v), 3)).collect();
        let text = render_objects(&records);
        let (parsed, rest) = split_envelope_lines(text.as_bytes(), 1).unwrap();
        prop_assert!(rest.is_empty());
        prop_assert_eq!(parsed.len(), records.len());
        prop_assert_eq!(text.lines().count(), records.len());
        for ((line, value), back) in text.lines().zip(&values).zip(&parsed) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let as_json = std::str::from_utf8(value)
                .ok()
                .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
                .filter(|j| !j.is_string() && !j.is_null());
            prop_assert_eq!(back.key.as_deref(), Some(&b"k"[..]));
            prop_assert_eq!(back.timestamp, 3);
            match as_json {
                Some(j) => {
                    prop_assert_eq!(&v["payload"], &j);
                    // Appended back: the same JSON (whitespace outside strings aside).
                    let stored: serde_json::Value =
                        serde_json::from_slice(back.value.as_deref().unwrap()).unwrap();
                    prop_assert_eq!(stored, j);
                }
                None => {
                    prop_assert!(v["payload"].is_string());
                    prop_assert_eq!(back.value.as_deref(), Some(&value[..]));
                }
            }
        }
    }
}
