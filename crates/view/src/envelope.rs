//! Parsing what is written to `append` and `append.json` into records.
//!
//! `append`: every complete line (ending in `\n`) is one record whose value is the line without
//! its `\n` (a `\r` before it is kept; an empty line is an empty value). No key, no headers, no
//! timestamp: the engine stamps the append time. Bytes after the last `\n` wait for more input.
//!
//! `append.json`: every complete line is one JSON object in the envelope that `.json` streams
//! emit (see [`crate::render`]), so `jq -c` output of a `.json` stream can be appended
//! as is. Lines holding only whitespace are skipped. Fields:
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `key`, `payload` | string or `null` | key and value (missing: `null`) |
//! | `key`, `payload` | object, array, number, `true` or `false` | the key or value is that JSON's text as written, without whitespace outside its strings (what `.json` shows with `-o json_payload=object`, [`crate::render::JsonPayload`]) |
//! | `key_encoding`, `payload_encoding` | `"base64"` | the string is standard base64 (RFC 4648) |
//! | `headers` | kcat's flat array `["name","value","name2",null]`, or an object `{"name":"value"}` whose values may also be arrays of values (object form: in name order) | record headers |
//! | `headers_encoding` | `"base64"` | every non-null header value is base64 |
//! | `ts` | integer or `null` | CreateTime timestamp in epoch ms; missing, `null` or `-1`: the append time |
//! | `tstype`, `topic`, `partition`, `offset`, `broker` | any | accepted and ignored (the file's partition decides where the record goes; the log decides its offset) |
//! | `key_schema_id`, `payload_schema_id` | integer | the `key`/`payload` is any JSON value, encoded with that schema into the Confluent wire format (a mount with schemas only; [`crate::schemas`]) |
//! | `key_subject`, `payload_subject` | string | the same with the subject's latest version |
//! | `key_schema_error`, `payload_schema_error` | string | what a `.json` line says of a value it could not decode: its `key`/`payload` is the bytes as shown (any `_schema_id` beside it is ignored); refused on a mount without schemas, as the other schema fields are |
//!
//! A value that does not match its schema refuses the write, naming the field.
//! Any other field, a wrong type, or malformed JSON refuses the write with
//! [`Error::InvalidInput`] naming the line number.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use crate::schemas::Schemas;
use topicfs_format::{NO_TIMESTAMP, NewRecord, RecordRef};
use topicfs_source::error::{Error, Result};

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
    split_envelope_lines_with(buf, first_line, None)
}

/// [`split_envelope_lines`] encoding keys and payloads that name a schema with `schemas`.
pub fn split_envelope_lines_with<'a>(
    buf: &'a [u8],
    first_line: u64,
    schemas: Option<&Schemas>,
) -> Result<(Vec<NewRecord>, &'a [u8])> {
    let mut records = Vec::new();
    let mut rest = buf;
    let mut line_no = first_line;
    while let Some(nl) = find_newline(rest) {
        let (line, after) = rest.split_at(nl);
        if !line.iter().all(u8::is_ascii_whitespace) {
            records.push(parse_envelope_with(line, line_no, schemas)?);
        }
        rest = after.get(1..).unwrap_or_default();
        line_no = line_no.saturating_add(1);
    }
    Ok((records, rest))
}

/// Parses one JSON envelope (without its `\n`); `line_no` names it in errors.
pub fn parse_envelope(line: &[u8], line_no: u64) -> Result<NewRecord> {
    parse_envelope_with(line, line_no, None)
}

/// [`parse_envelope`] encoding a key or payload that names a schema with `schemas`.
pub fn parse_envelope_with(
    line: &[u8],
    line_no: u64,
    schemas: Option<&Schemas>,
) -> Result<NewRecord> {
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
                | "key_schema_id"
                | "key_subject"
                | "key_schema_error"
                | "payload_schema_id"
                | "payload_subject"
                | "payload_schema_error"
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
    // A key or payload naming a schema: its JSON value encoded with it.
    let with_schema = |name: &str| -> Result<Option<Option<Vec<u8>>>> {
        let error = object.contains_key(&format!("{name}_schema_error"));
        let id = object.get(&format!("{name}_schema_id")).filter(|v| !v.is_null());
        let subject = object.get(&format!("{name}_subject")).filter(|v| !v.is_null());
        if !error && id.is_none() && subject.is_none() {
            return Ok(None);
        }
        let Some(schemas) = schemas else {
            let field = match (error, id, subject) {
                (true, _, _) => format!("{name}_schema_error"),
                (false, Some(_), _) => format!("{name}_schema_id"),
                (false, None, _) => format!("{name}_subject"),
            };
            return Err(bad(format!(
                "{field}: this mount decodes no schemas (mounted with -o schemas=off, or without \
                 a _schemas topic, --schemas-topic or --schema-registry); remove the field to \
                 append the {name} as the bytes shown"
            )));
        };
        if error {
            return Ok(None);
        }
        let value = object.get(name).unwrap_or(&Value::Null);
        if value.is_null() {
            return Ok(Some(None));
        }
        let encoded = match (id, subject) {
            (Some(_), Some(_)) => {
                return Err(bad(format!("{name}_schema_id and {name}_subject: name one")));
            }
            (Some(id), None) => {
                let id = id.as_u64().and_then(|i| u32::try_from(i).ok()).ok_or_else(|| {
                    bad(format!("{name}_schema_id must be a schema id, not {id}"))
                })?;
                schemas.encode_with_id(id, value, name)
            }
            (None, Some(Value::String(subject))) => {
                schemas.encode_with_subject(subject, value, name)
            }
            (None, Some(other)) => {
                return Err(bad(format!("{name}_subject must be a string, not {other}")));
            }
            (None, None) => return Ok(None),
        };
        encoded.map(|bytes| Some(Some(bytes))).map_err(|e| match e {
            Error::InvalidInput(what) => bad(what),
            e => bad(e.to_string()),
        })
    };
    // A key or payload that is JSON but not a string: its text, as written in the line.
    let json_text = |name: &str| -> Vec<u8> {
        let mut text = Vec::new();
        match raw_member(line, name) {
            Some(raw) => crate::render::write_minified(&mut text, raw),
            // Not reached: the line parsed, so its members are found.
            None => text = object.get(name).map(Value::to_string).unwrap_or_default().into_bytes(),
        }
        text
    };
    let field = |name: &str, v: &Value, base64: bool| -> Result<Option<Vec<u8>>> {
        match v {
            Value::Object(_) | Value::Array(_) | Value::Number(_) | Value::Bool(_) if !base64 => {
                Ok(Some(json_text(name)))
            }
            v => bytes(name, v, base64),
        }
    };
    let key = match (with_schema("key")?, object.get("key")) {
        (Some(encoded), _) => encoded,
        (None, None) => None,
        (None, Some(v)) => field("key", v, base64_flag("key_encoding")?)?,
    };
    let value = match (with_schema("payload")?, object.get("payload")) {
        (Some(encoded), _) => encoded,
        (None, None) => None,
        (None, Some(v)) => field("payload", v, base64_flag("payload_encoding")?)?,
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

/// The text of the last member named `name` of the JSON object `line` (which serde_json
/// parsed), as written; `None` if it has none.
fn raw_member<'a>(line: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let mut i = skip_whitespace(line, 0);
    if line.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut found = None;
    loop {
        i = skip_whitespace(line, i);
        match line.get(i)? {
            b'}' => return found,
            b',' => {
                i += 1;
                continue;
            }
            b'"' => {}
            _ => return None,
        }
        let name_end = string_end(line, i)?;
        let member: String = serde_json::from_slice(line.get(i..name_end)?).ok()?;
        i = skip_whitespace(line, name_end);
        if line.get(i) != Some(&b':') {
            return None;
        }
        i = skip_whitespace(line, i + 1);
        let end = value_end(line, i)?;
        if member == name {
            found = Some(line.get(i..end)?);
        }
        i = end;
    }
}

fn skip_whitespace(line: &[u8], mut i: usize) -> usize {
    while line.get(i).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The position right after the JSON string starting (with its quote) at `start`.
fn string_end(line: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', line.get(i..)?)?;
        if line.get(i) == Some(&b'\\') {
            i += 2;
        } else {
            return Some(i + 1);
        }
    }
}

/// The position right after the JSON value starting at `start`.
fn value_end(line: &[u8], start: usize) -> Option<usize> {
    match line.get(start)? {
        b'"' => string_end(line, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            loop {
                match line.get(i)? {
                    b'"' => {
                        i = string_end(line, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let mut i = start;
            while line
                .get(i)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
            {
                i += 1;
            }
            Some(i)
        }
    }
}

/// A lower bound of the size of the record an `append.json` line can become, learned from its
/// bytes as they are written, before its newline: so a line whose record can never fit in a
/// batch of `max.message.bytes` is refused as soon as that is known, not when the whole
/// envelope has been buffered.
///
/// It counts the bytes of the strings that become the record: the values of `key` and
/// `payload` and every string inside `headers` (names and values). Each raw byte of such a
/// string and each escape sequence (`\n`, `\u00e9`) is at least one byte of the record, or
/// three quarters of one when the string turns out to be base64 (the `*_encoding` field may come
/// after it), less two bytes of padding: the bound is `sum(max(0, 3 * n / 4 - 2))` over those
/// strings. Whitespace, field names and the values of the ignored fields (`topic`, `broker`,
/// ...) count nothing, so the bound holds for any envelope, valid or not (an invalid one is
/// refused at its newline anyway).
///
/// **Invariant**: [`EnvelopeBound::bound`] never exceeds the key, value and header bytes of the
/// record [`parse_envelope`] makes of any line that starts with the bytes fed so far, unless
/// the line names a field twice (JSON's last value wins; the bound counts both).
#[derive(Clone, Debug, Default)]
pub struct EnvelopeBound {
    /// Nesting depth: 0 before the top object, 1 inside it, more inside a field's value.
    depth: u32,
    in_string: bool,
    /// Inside a string: 0 no escape, 1 after `\`, 2 to 5 in the hex digits of `\uXXXX`.
    escape: u8,
    /// At depth 1 the next string is a field name (after `{` or `,`), not a value.
    expect_name: bool,
    /// The field name being read or last read (its first 16 bytes).
    name: Vec<u8>,
    /// Whether the string being read is a field name at depth 1.
    reading_name: bool,
    /// Whether the current string counts (see above).
    counting: bool,
    /// Units of the current counted string.
    units: usize,
    /// The bound of the counted strings that ended.
    ended: usize,
}

impl EnvelopeBound {
    /// Feeds the next bytes of the line (no newline among them).
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.in_string {
                self.string_byte(b);
                continue;
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    self.escape = 0;
                    self.reading_name = self.depth == 1 && self.expect_name;
                    if self.reading_name {
                        self.name.clear();
                    }
                    self.counting = !self.reading_name && self.counts_here();
                    self.units = 0;
                }
                b'{' | b'[' => {
                    self.depth = self.depth.saturating_add(1);
                    self.expect_name = b == b'{' && self.depth == 1;
                }
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                b',' if self.depth == 1 => self.expect_name = true,
                b':' if self.depth == 1 => self.expect_name = false,
                _ => {}
            }
        }
    }

    /// Whether a string value starting now becomes part of the record.
    fn counts_here(&self) -> bool {
        match self.name.as_slice() {
            b"key" | b"payload" => self.depth == 1,
            b"headers" => self.depth >= 2,
            _ => false,
        }
    }

    fn string_byte(&mut self, b: u8) {
        let unit = match (self.escape, b) {
            (0, b'\\') => {
                self.escape = 1;
                false
            }
            (0, b'"') => {
                self.in_string = false;
                if self.counting {
                    self.ended = self.ended.saturating_add(Self::bytes_of(self.units));
                }
                self.counting = false;
                self.units = 0;
                return;
            }
            (0, _) => true,
            (1, b'u') => {
                self.escape = 2;
                true
            }
            (1, _) => {
                self.escape = 0;
                true
            }
            (5, _) => {
                self.escape = 0;
                false
            }
            _ => {
                self.escape += 1;
                false
            }
        };
        if self.reading_name {
            if self.name.len() < 16 {
                self.name.push(b);
            }
        } else if unit && self.counting {
            self.units = self.units.saturating_add(1);
        }
    }

    /// The least number of bytes `units` characters of a string decode to.
    fn bytes_of(units: usize) -> usize {
        (units / 4).saturating_mul(3).saturating_sub(2)
    }

    /// The least number of key, value and header bytes the record of this line holds.
    pub fn bound(&self) -> usize {
        let current = if self.counting { Self::bytes_of(self.units) } else { 0 };
        self.ended.saturating_add(current)
    }
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
    fn json_keys_and_payloads_are_stored_as_their_text_without_whitespace() {
        let line = br#"{"key" : [1, 2.50],"payload":{"a" : "x y", "n":1e2},"pay\u006coad":{"b":"}"} , "ts":5}"#;
        let r = parse_envelope(line, 1).unwrap();
        assert_eq!(r.key.as_deref(), Some(&b"[1,2.50]"[..]));
        // The last of two members named alike, as serde_json reads the line.
        assert_eq!(r.value.as_deref(), Some(&br#"{"b":"}"}"#[..]));
        let r = parse_envelope(br#"{"payload":true,"key":-0}"#, 1).unwrap();
        assert_eq!((r.key.as_deref(), r.value.as_deref()), (Some(&b"-0"[..]), Some(&b"true"[..])));
        let r = parse_envelope(br#"{"payload":{"x":[{"y":"\"]"}]}}"#, 1).unwrap();
        assert_eq!(r.value.as_deref(), Some(&br#"{"x":[{"y":"\"]"}]}"#[..]));
        let err = parse_envelope(br#"{"payload":{},"payload_encoding":"base64"}"#, 1).unwrap_err();
        assert!(err.to_string().contains("string or null"), "{err}");
    }

    fn bound_of(line: &str) -> usize {
        let mut b = EnvelopeBound::default();
        b.feed(line.as_bytes());
        b.bound()
    }

    /// The key, value and header bytes of the record of `line`.
    fn record_bytes(line: &str) -> usize {
        let r = parse_envelope(line.as_bytes(), 1).unwrap();
        r.key.map_or(0, |k| k.len())
            + r.value.map_or(0, |v| v.len())
            + r.headers.iter().map(|(n, v)| n.len() + v.as_ref().map_or(0, Vec::len)).sum::<usize>()
    }

    #[test]
    fn schema_fields_on_a_mount_without_schemas_are_refused_naming_the_field_and_why() {
        for (line, field) in [
            (
                r#"{"payload":"x","payload_schema_error":"unknown schema id 9"}"#,
                "payload_schema_error",
            ),
            (r#"{"key":"x","key_schema_error":"bad"}"#, "key_schema_error"),
            (r#"{"payload":{"a":1},"payload_schema_id":4}"#, "payload_schema_id"),
            (r#"{"payload":{"a":1},"payload_subject":"t-value"}"#, "payload_subject"),
        ] {
            let err = parse_envelope(line.as_bytes(), 3).unwrap_err();
            assert!(matches!(err, Error::InvalidInput(_)), "{line}: {err}");
            let text = err.to_string();
            assert!(text.contains(&format!("line 3: {field}:")), "{text}");
            assert!(text.contains("schemas=off") && text.contains("--schema-registry"), "{text}");
        }
        // A null id or subject is no schema field.
        assert!(parse_envelope(br#"{"payload":"x","payload_schema_id":null}"#, 1).is_ok());
    }

    #[test]
    fn envelope_bound_counts_key_payload_and_headers_only() {
        let p = "p".repeat(400);
        assert_eq!(bound_of(&format!(r#"{{"payload":"{p}"}}"#)), 298);
        assert_eq!(bound_of(&format!(r#"{{"topic":"{p}","broker":1}}"#)), 0);
        assert_eq!(bound_of(&format!(r#"{{"headers":{{"{p}":["{p}"]}}}}"#)), 596);
        // Escapes are one character each; names of fields count nothing.
        let escaped = "\\u0041".repeat(100);
        assert_eq!(bound_of(&format!(r#"{{"key":"{escaped}"}}"#)), 73);
        // A string still open counts what it has so far.
        assert_eq!(bound_of(&format!(r#"{{"payload":"{p}"#)), 298);
    }

    proptest! {
        #[test]
        fn envelope_bound_never_exceeds_the_record_and_holds_for_every_prefix(
            key in proptest::option::of("[a-zA-Z0-9+/]{0,40}"),
            payload in proptest::option::of("[ -~é\\n]{0,60}"),
            headers in proptest::collection::vec(("[a-z]{0,8}", "[a-zA-Z0-9+/]{0,12}"), 0..3),
            base64 in any::<bool>(),
            topic in "[a-z\\x22]{0,20}",
        ) {
            let mut object = serde_json::Map::new();
            object.insert("topic".into(), Value::String(topic));
            if let Some(k) = key {
                let k = if base64 { STANDARD.encode(k) } else { k };
                object.insert("key".into(), Value::String(k));
            }
            if let Some(p) = payload {
                object.insert("payload".into(), Value::String(p));
            }
            let flat: Vec<Value> = headers
                .iter()
                .flat_map(|(n, v)| [Value::String(n.clone()), Value::String(v.clone())])
                .collect();
            object.insert("headers".into(), Value::Array(flat));
            if base64 {
                object.insert("key_encoding".into(), Value::String("base64".into()));
            }
            let line = serde_json::to_string(&Value::Object(object)).unwrap();
            let full = record_bytes(&line);
            let mut bound = EnvelopeBound::default();
            for &b in line.as_bytes() {
                bound.feed(&[b]);
                prop_assert!(bound.bound() <= full, "{} > {full} in {line}", bound.bound());
            }
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
