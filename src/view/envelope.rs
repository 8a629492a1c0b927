//! Parsing what is written to `append` and `append.json` into records.
//!
//! `append`: every complete line (ending in `\n`) is one record whose value is the line without
//! its `\n` (a `\r` before it is kept; an empty line is an empty value). No key, no headers, no
//! timestamp: the engine stamps the append time. Bytes after the last `\n` wait for more input.
//!
//! `append.json`: every complete line is one JSON object in the envelope that `.json` streams
//! emit (see [`crate::view::render`]), so `jq -c` output of a `.json` stream can be appended
//! as is. Lines holding only whitespace are skipped. Fields:
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `key`, `payload` | string or `null` | key and value (missing: `null`) |
//! | `key_encoding`, `payload_encoding` | `"base64"` | the string is standard base64 (RFC 4648) |
//! | `headers` | kcat's flat array `["name","value","name2",null]`, or an object `{"name":"value"}` whose values may also be arrays of values (object form: in name order) | record headers |
//! | `headers_encoding` | `"base64"` | every non-null header value is base64 |
//! | `ts` | integer or `null` | CreateTime timestamp in epoch ms; missing, `null` or `-1`: the append time |
//! | `tstype`, `topic`, `partition`, `offset`, `broker` | any | accepted and ignored (the file's partition decides where the record goes; the log decides its offset) |
//!
//! Any other field, a wrong type, or malformed JSON refuses the write with
//! [`Error::InvalidInput`] naming the line number.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::format::{NO_TIMESTAMP, NewRecord, RecordRef};

/// Splits the complete lines of `buf` into records for `append`; returns them and the
/// unterminated remainder (empty when `buf` ends with `\n`).
pub fn split_value_lines(buf: &[u8]) -> (Vec<NewRecord>, &[u8]) {
    let (lines, rest) = split_value_line_refs(buf);
    let records = lines
        .iter()
        .map(|r| NewRecord {
            timestamp: NO_TIMESTAMP,
            key: None,
            value: r.value.map(<[u8]>::to_vec),
            headers: Vec::new(),
        })
        .collect();
    (records, rest)
}

/// [`split_value_lines`] without copying: each record borrows its line from `buf`.
pub fn split_value_line_refs(buf: &[u8]) -> (Vec<RecordRef<'_>>, &[u8]) {
    let mut records = Vec::new();
    let rest = push_value_lines(buf, &mut records);
    (records, rest)
}

/// Pushes one borrowed record per complete line of `buf` onto `out`; returns the unterminated
/// remainder.
pub fn push_value_lines<'a>(buf: &'a [u8], out: &mut Vec<RecordRef<'a>>) -> &'a [u8] {
    let mut rest = buf;
    while let Some(nl) = find_newline(rest) {
        let (line, after) = rest.split_at(nl);
        out.push(RecordRef::value_only(line));
        rest = after.get(1..).unwrap_or_default();
    }
    rest
}

/// Position of the first `\n` in `bytes` (`memchr`: SIMD; a byte-by-byte search was a
/// visible share of the daemon's time per appended line).
pub fn find_newline(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
}

/// Parses the complete lines of `buf` as JSON envelopes for `append.json`; `first_line` is the
/// 1-based number of the first line of `buf` in what was written so far (for error messages).
/// Returns the records and the unterminated remainder. One bad line refuses the whole buffer.
pub fn split_envelope_lines(buf: &[u8], first_line: u64) -> Result<(Vec<NewRecord>, &[u8])> {
    let mut records = Vec::new();
    let mut rest = buf;
    let mut line_no = first_line;
    while let Some(nl) = find_newline(rest) {
        let (line, after) = rest.split_at(nl);
        if !line.iter().all(u8::is_ascii_whitespace) {
            records.push(parse_envelope(line, line_no)?);
        }
        rest = after.get(1..).unwrap_or_default();
        line_no = line_no.saturating_add(1);
    }
    Ok((records, rest))
}

/// Parses one JSON envelope (without its `\n`); `line_no` names it in errors.
pub fn parse_envelope(line: &[u8], line_no: u64) -> Result<NewRecord> {
    let bad = |what: String| Error::InvalidInput(format!("append.json line {line_no}: {what}"));
    let object: Map<String, Value> = match serde_json::from_slice(line) {
        Ok(Value::Object(o)) => o,
        Ok(_) => return Err(bad("not a JSON object".into())),
        Err(e) => return Err(bad(format!("malformed JSON: {e}"))),
    };
    let base64_flag = |name: &str| -> Result<bool> {
        match object.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::String(s)) if s == "base64" => Ok(true),
            Some(other) => Err(bad(format!("{name} must be \"base64\", not {other}"))),
        }
    };
    for field in object.keys() {
        if !matches!(
            field.as_str(),
            "topic"
                | "partition"
                | "offset"
                | "tstype"
                | "ts"
                | "broker"
                | "headers"
                | "headers_encoding"
                | "key"
                | "key_encoding"
                | "payload"
                | "payload_encoding"
        ) {
            return Err(bad(format!("unknown field {field:?}")));
        }
    }
    let bytes = |name: &str, v: &Value, base64: bool| -> Result<Option<Vec<u8>>> {
        match v {
            Value::Null => Ok(None),
            Value::String(s) if base64 => STANDARD
                .decode(s)
                .map(Some)
                .map_err(|e| bad(format!("{name} is not valid base64: {e}"))),
            Value::String(s) => Ok(Some(s.as_bytes().to_vec())),
            other => Err(bad(format!("{name} must be a string or null, not {other}"))),
        }
    };
    let key = match object.get("key") {
        None => None,
        Some(v) => bytes("key", v, base64_flag("key_encoding")?)?,
    };
    let value = match object.get("payload") {
        None => None,
        Some(v) => bytes("payload", v, base64_flag("payload_encoding")?)?,
    };
    let headers_b64 = base64_flag("headers_encoding")?;
    let mut headers = Vec::new();
    let header_name = |v: &Value| match v {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        other => Err(bad(format!("a header name must be a string, not {other}"))),
    };
    match object.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            if items.len() % 2 != 0 {
                return Err(bad("headers must alternate names and values".into()));
            }
            for pair in items.chunks_exact(2) {
                if let [name, value] = pair {
                    headers
                        .push((header_name(name)?, bytes("a header value", value, headers_b64)?));
                }
            }
        }
        Some(Value::Object(map)) => {
            for (name, value) in map {
                match value {
                    Value::Array(values) => {
                        for v in values {
                            let v = bytes("a header value", v, headers_b64)?;
                            headers.push((name.as_bytes().to_vec(), v));
                        }
                    }
                    v => headers
                        .push((name.as_bytes().to_vec(), bytes("a header value", v, headers_b64)?)),
                }
            }
        }
        Some(other) => return Err(bad(format!("headers must be an array or object, not {other}"))),
    }
    let timestamp = match object.get("ts") {
        None | Some(Value::Null) => NO_TIMESTAMP,
        Some(Value::Number(n)) => match n.as_i64() {
            Some(t) if t >= NO_TIMESTAMP => t,
            _ => return Err(bad(format!("ts must be epoch milliseconds >= 0, not {n}"))),
        },
        Some(other) => return Err(bad(format!("ts must be an integer, not {other}"))),
    };
    Ok(NewRecord { timestamp, key, value, headers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn find_newline_finds_the_first_newline_like_a_byte_search(
            bytes in proptest::collection::vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..80)
        ) {
            prop_assert_eq!(find_newline(&bytes), bytes.iter().position(|&b| b == b'\n'));
        }
    }

    #[test]
    fn borrowed_lines_are_the_lines_without_their_newline() {
        let (lines, rest) = split_value_line_refs(b"0123456789abcdef\n\nx\r\npartial");
        let values: Vec<_> = lines.iter().map(|r| r.value).collect();
        assert_eq!(values, [Some(&b"0123456789abcdef"[..]), Some(b""), Some(b"x\r")]);
        assert!(lines.iter().all(|r| r.timestamp == NO_TIMESTAMP && r.key.is_none()));
        assert_eq!(rest, b"partial");
    }
}
