//! Rendering and the append envelopes: kcat's shapes, RFC 8259 escaping, lossless round trips.

use proptest::prelude::*;
use topicfs::error::Error;
use topicfs::format::{
    BatchSpec, NO_TIMESTAMP, NewRecord, Offset, TimestampType, decode_batch, encode_batch,
};
use topicfs::view::envelope::{parse_envelope, split_envelope_lines, split_value_lines};
use topicfs::view::render::{ByteCounter, Renderer, write_json_str};
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
        (r#"{"payload":5}"#, "string or null"),
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
