//! Rendering one record into bytes, for the value-line and JSON formats.
//!
//! Raw streams need no rendering: their bytes are the batches as stored
//! (see [`crate::stream`]).
//!
//! # Value lines
//!
//! The value bytes followed by `\n`, exactly what `kcat -C` prints with its default `-D`. A null
//! value (a tombstone) is an empty line, like an empty value: use `.json` to tell them apart.
//! Values containing `\n` are written unchanged, so such a stream has more lines than records.
//!
//! # JSON (`.json`)
//!
//! One object per record followed by `\n`, with kcat `-J`'s field names and order:
//!
//! ```text
//! {"topic":"t","partition":0,"offset":42,"tstype":"create","ts":1764662400000,"broker":-1,
//!  "headers":["k1","v1","k2",null],"key":"k","payload":"v"}
//! ```
//!
//! (on one line). As in kcat, `tstype` and `ts` are present only when the batch has a timestamp
//! type (absent for v0 messages); `tstype` is `"create"` or `"logappend"`; `headers` is present
//! only when the record has headers, as kcat's flat array of name, value pairs (a null header
//! value is `null`); `broker` is always `-1` (no broker served the record); a null key or
//! payload is `null`.
//!
//! Unlike kcat, the output is lossless for bytes that are not UTF-8. JSON strings hold Unicode
//! text, so:
//!
//! * a key that is not valid UTF-8 is written as standard base64 (RFC 4648, with padding) and the
//!   field `"key_encoding":"base64"` follows `key`;
//! * likewise `payload` and `"payload_encoding":"base64"` (after `payload`);
//! * if any header value is not valid UTF-8, *every* non-null header value of that record is
//!   base64 and `"headers_encoding":"base64"` follows `headers`. Header names are Kafka strings
//!   (UTF-8 by contract); an invalid name is written with U+FFFD replacements, as Kafka's Java
//!   client decodes it.
//!
//! Valid UTF-8 is never base64-encoded, so output for text data is byte-identical to kcat's
//! (strings are escaped per RFC 8259: `"`, `\`, and control characters; everything else verbatim).
//! [`crate::envelope`] parses these objects back, so `.json` lines can be appended to
//! `append.json` unchanged.
//!
//! ## JSON payloads as JSON (`-o json_payload=object`, [`JsonPayload::Object`])
//!
//! A payload that is valid UTF-8 and whose text is one JSON object, array, number, `true` or
//! `false` is written as that JSON value (`"payload":{"user":"a"}`) instead of a string, with
//! every whitespace outside its strings removed (so a line stays one line; a newline inside a
//! JSON string is always escaped, never raw). A payload that is not JSON, or is a JSON string or
//! `null` (which would read back as another value, or as a tombstone), stays a string as above;
//! bytes that are not UTF-8 stay base64. Keys are always strings: a key like `42` is far more
//! often an identifier than a number. `append.json` stores a non-string `payload` or `key` as
//! its JSON text with that whitespace removed, so such lines append back to the same values.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use std::sync::Arc;

use crate::filter::{Filter, FilterStats};
use crate::schemas::{Decoded, Schemas};
use crate::spec::Format;
use topicfs_format::{BatchInfo, Record, TimestampType};

/// Where rendered bytes go: a buffer, or a counter when only the length matters.
pub trait Sink {
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]);

    /// Appends `data` as standard base64 with padding.
    fn put_base64(&mut self, data: &[u8]);

    /// Appends `n` in decimal (a counter only counts its digits).
    #[inline]
    fn put_decimal(&mut self, n: i64) {
        self.put(itoa::Buffer::new().format(n).as_bytes());
    }

    /// Appends `text` as a quoted JSON string (its quotes and backslashes escaped; it has no
    /// control character, see [`JsonText`]).
    fn put_json_text(&mut self, text: JsonText<'_>);
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    fn put_base64(&mut self, data: &[u8]) {
        let start = self.len();
        let encoded = base64::encoded_len(data.len(), true).unwrap_or(0);
        self.resize(start + encoded, 0);
        let written = match self.get_mut(start..) {
            Some(tail) => STANDARD.encode_slice(data, tail).unwrap_or(0),
            None => 0,
        };
        self.truncate(start + written);
    }

    fn put_json_text(&mut self, text: JsonText<'_>) {
        let JsonText { text, escapes } = text;
        if escapes == 0 {
            self.reserve(text.len() + 2);
            self.push(b'"');
            self.extend_from_slice(text);
            self.push(b'"');
            return;
        }
        // Room for the exact result and a word of slack: the escaping copies whole words and
        // keeps what belongs.
        let start = self.len();
        let len = text.len() + 2 + escapes;
        self.resize(start + len + 8, 0);
        let written = self.get_mut(start..).and_then(|dst| escape_into(dst, text));
        if written == Some(len) {
            self.truncate(start + len);
        } else {
            // Not reached (`escapes` is counted by `JsonText::scan`); kept exact regardless.
            self.truncate(start);
            write_json_bytes(self, text);
        }
    }
}

/// A [`Sink`] that only counts bytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ByteCounter(pub u64);

impl Sink for ByteCounter {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.0 = self.0.saturating_add(bytes.len() as u64);
    }

    #[inline]
    fn put_decimal(&mut self, n: i64) {
        self.0 = self.0.saturating_add(decimal_len(n));
    }

    fn put_base64(&mut self, data: &[u8]) {
        let n = base64::encoded_len(data.len(), true).unwrap_or(usize::MAX);
        self.0 = self.0.saturating_add(n as u64);
    }

    #[inline]
    fn put_json_text(&mut self, text: JsonText<'_>) {
        let n = text.text.len() as u64 + 2 + text.escapes as u64;
        self.0 = self.0.saturating_add(n);
    }
}

/// Bytes of `n` in decimal (with its sign).
#[inline]
fn decimal_len(n: i64) -> u64 {
    let digits = n.unsigned_abs().checked_ilog10().map_or(1, |d| u64::from(d) + 1);
    digits + u64::from(n < 0)
}

/// The mount's [`Schemas`] as a renderer holds them: equal when they are the same.
#[derive(Clone, Debug)]
struct SchemasRef(Arc<Schemas>);

impl PartialEq for SchemasRef {
    fn eq(&self, other: &SchemasRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for SchemasRef {}
impl std::hash::Hash for SchemasRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.0), state);
    }
}

/// A filter as a renderer holds it: equal when its text is.
#[derive(Clone, Debug)]
struct FilterRef {
    text: Arc<str>,
    filter: Arc<Filter>,
    stats: Arc<FilterStats>,
    /// The mount's field indexes, which let walks skip batches without candidates.
    indexes: Option<Arc<crate::field_index::FieldIndexes>>,
}

impl PartialEq for FilterRef {
    fn eq(&self, other: &FilterRef) -> bool {
        self.text == other.text
    }
}
impl Eq for FilterRef {}
impl std::hash::Hash for FilterRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

/// How `.json` lines show a payload that is JSON (`-o json_payload=`; see the module doc).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum JsonPayload {
    /// As a JSON string of its text, as kcat does (`json_payload=string`, the default).
    #[default]
    String,
    /// As the JSON value itself when it is an object, array, number, `true` or `false`
    /// (`json_payload=object`).
    Object,
}

impl std::str::FromStr for JsonPayload {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<JsonPayload, String> {
        match s {
            "string" => Ok(JsonPayload::String),
            "object" => Ok(JsonPayload::Object),
            _ => Err(format!("json_payload={s}: string or object")),
        }
    }
}

/// What `.json` renderings show beyond the records' bytes, mount-wide: the schemas keys and
/// values in the wire format are decoded with (`None`: as bytes), and how payloads that are
/// JSON are shown.
#[derive(Clone, Debug, Default)]
pub struct JsonShown {
    pub schemas: Option<Arc<Schemas>>,
    pub payload: JsonPayload,
}

/// Renders records of one partition in one (record) format, optionally only the records a
/// filter keeps (`where/<filter>/`): the others render nothing, as control batches, so a
/// filtered rendering is a rendering like any other (positions, sizes and streams alike).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Renderer {
    format: Format,
    /// What every JSON object of this partition starts with, rendered once:
    /// `{"topic":<topic>,"partition":<partition>,"offset":`.
    json_head: Vec<u8>,
    /// JSON only: keys and values in the wire format shown decoded ([`crate::schemas`]).
    schemas: Option<SchemasRef>,
    /// JSON only: how a payload that is JSON is shown ([`JsonPayload::String`] for the other
    /// formats, so that renderers of one format compare equal).
    json_payload: JsonPayload,
    /// The filter records must pass to be rendered, if any.
    filter: Option<FilterRef>,
    /// What the filter's JSON fields read values in the wire format through (any format: the
    /// JSON `.json` would show).
    filter_schemas: Option<SchemasRef>,
}

/// What follows the offset of a JSON object, by the batch's timestamp type (up to the
/// timestamp) ...
const JSON_CREATE_TS: &[u8] = b",\"tstype\":\"create\",\"ts\":";
const JSON_LOG_APPEND_TS: &[u8] = b",\"tstype\":\"logappend\",\"ts\":";
/// ... and what follows that, up to the key's value, for a record without headers.
const JSON_BROKER_KEY: &[u8] = b",\"broker\":-1,\"key\":";

impl Renderer {
    /// A renderer for records of `topic`/`partition` in `format`.
    pub fn new(format: Format, topic: &str, partition: u32) -> Renderer {
        let mut json_head = Vec::with_capacity(topic.len() + 40);
        json_head.extend_from_slice(b"{\"topic\":");
        write_json_str(&mut json_head, topic);
        json_head.extend_from_slice(b",\"partition\":");
        json_head.put_decimal(i64::from(partition));
        json_head.extend_from_slice(b",\"offset\":");
        Renderer {
            format,
            json_head,
            schemas: None,
            json_payload: JsonPayload::String,
            filter: None,
            filter_schemas: None,
        }
    }

    /// The same renderer showing payloads that are JSON as `payload` says (JSON only).
    pub fn with_json_payload(mut self, payload: JsonPayload) -> Renderer {
        if self.format == Format::Json {
            self.json_payload = payload;
        }
        self
    }

    /// The same renderer showing what `shown` says ([`Renderer::with_schemas`],
    /// [`Renderer::with_json_payload`]).
    pub fn showing(self, shown: &JsonShown) -> Renderer {
        self.with_schemas(shown.schemas.clone()).with_json_payload(shown.payload)
    }

    /// How this renderer shows payloads that are JSON.
    pub fn json_payload(&self) -> JsonPayload {
        self.json_payload
    }

    /// What a rendering is identified by in the segment cache: the format, and how payloads
    /// that are JSON are shown (never [`JsonPayload::Object`] but for JSON).
    pub(crate) fn rendering(&self) -> (Format, JsonPayload) {
        (self.format, self.json_payload)
    }

    /// The same renderer showing keys and values in the wire format decoded with `schemas`
    /// (JSON only; `None`: as bytes).
    pub fn with_schemas(mut self, schemas: Option<Arc<Schemas>>) -> Renderer {
        self.filter_schemas = schemas.clone().map(SchemasRef);
        self.schemas = schemas.filter(|_| self.format == Format::Json).map(SchemasRef);
        self
    }

    /// The same renderer rendering only the records `filter` (whose text is `text`) keeps,
    /// counting its evaluations in `stats`.
    pub fn with_filter(
        mut self,
        text: Arc<str>,
        filter: Arc<Filter>,
        stats: Arc<FilterStats>,
    ) -> Renderer {
        self.filter = Some(FilterRef { text, filter, stats, indexes: None });
        self
    }

    /// The same filtered renderer letting walks skip the batches `indexes` say hold no match
    /// (see [`crate::field_index`]); nothing without a filter.
    pub fn with_field_indexes(
        mut self,
        indexes: Option<Arc<crate::field_index::FieldIndexes>>,
    ) -> Renderer {
        if let Some(f) = &mut self.filter {
            f.indexes = indexes;
        }
        self
    }

    /// What the field indexes know of the span of `part` holding offset `at`, for a filtered
    /// renderer with indexes.
    pub(crate) fn span_gate(
        &self,
        part: &dyn topicfs_source::PartitionSource,
        at: topicfs_format::Offset,
    ) -> Option<crate::field_index::SpanGate> {
        let f = self.filter.as_ref()?;
        f.indexes.as_ref()?.gate(part, &f.text, &f.filter, at)
    }

    /// Whether this renderer renders only the records a filter keeps.
    pub fn is_filtered(&self) -> bool {
        self.filter.is_some()
    }

    /// Whether `record` is rendered: always without a filter; with one, when the filter keeps
    /// it, its JSON fields read from the value or from what the mount's schemas decode it to.
    pub fn keeps(&self, record: &Record<'_>) -> bool {
        let Some(FilterRef { filter, stats, .. }) = &self.filter else { return true };
        let kept = match (&self.filter_schemas, record.value, filter.reads_json()) {
            (Some(schemas), Some(value), true) => match schemas.0.decode(value) {
                Decoded::Plain => filter.matches(record, record.value),
                Decoded::Json { json, .. } => filter.matches(record, Some(json.as_bytes())),
                Decoded::Failed { .. } => filter.matches(record, None),
            },
            _ => filter.matches(record, record.value),
        };
        stats.count(kept);
        kept
    }

    /// Whether what this renderer writes may be kept in the segment cache for later mounts:
    /// not when it decodes with schemas (another mount may know other schemas, or none), nor
    /// when it is filtered (the cache keeps a format's renderings, not a filter's). A rendering
    /// with payloads as JSON is kept under an identity of its own ([`Renderer::rendering`]).
    pub fn persistable(&self) -> bool {
        self.schemas.is_none() && self.filter.is_none()
    }

    /// The format rendered.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Writes `record` (from a batch described by `info`) to `out`. Control batches are never
    /// rendered: the caller skips them. For [`Format::Raw`] nothing is written (raw streams copy
    /// batches, not records).
    pub fn render(&self, info: &BatchInfo, record: &Record<'_>, out: &mut impl Sink) {
        if self.filter.is_some() && !self.keeps(record) {
            return;
        }
        match self.format {
            Format::Values => render_value(record.value, out),
            Format::Json => self.render_json(info, record, out),
            Format::Raw => {}
        }
    }

    fn render_json(&self, info: &BatchInfo, record: &Record<'_>, out: &mut impl Sink) {
        out.put(&self.json_head);
        out.put_decimal(record.offset.0);
        let ts: Option<&[u8]> = match info.timestamp_type {
            TimestampType::CreateTime => Some(JSON_CREATE_TS),
            TimestampType::LogAppendTime => Some(JSON_LOG_APPEND_TS),
            TimestampType::NoTimestampType => None,
        };
        if let Some(ts) = ts {
            out.put(ts);
            out.put_decimal(record.timestamp);
        }
        if record.headers.is_empty() {
            out.put(JSON_BROKER_KEY);
        } else {
            out.put(b",\"broker\":-1");
            let binary = record
                .headers
                .iter()
                .any(|h| h.value.is_some_and(|v| std::str::from_utf8(v).is_err()));
            out.put(b",\"headers\":[");
            for (i, h) in record.headers.iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                write_json_str(out, &String::from_utf8_lossy(h.key));
                out.put(b",");
                match h.value {
                    None => out.put(b"null"),
                    Some(v) if binary => {
                        out.put(b"\"");
                        out.put_base64(v);
                        out.put(b"\"");
                    }
                    Some(v) => write_json_str(out, std::str::from_utf8(v).unwrap_or_default()),
                }
            }
            out.put(b"]");
            if binary {
                out.put(b",\"headers_encoding\":\"base64\"");
            }
            out.put(b",\"key\":");
        }
        self.write_field(out, b"key", record.key, JsonPayload::String);
        out.put(b",\"payload\":");
        self.write_field(out, b"payload", record.value, self.json_payload);
        out.put(b"}\n");
    }

    /// The value of the field `name` (whose `,"name":` is written): decoded JSON followed by
    /// `,"name_schema_id":ID` for a key or value in the wire format whose schema is known;
    /// otherwise as [`write_bytes_value`] (or [`write_json_or_bytes`] with
    /// [`JsonPayload::Object`]), with `,"name_schema_id":ID` (when the header held one) and
    /// `,"name_schema_error":"..."` for one in the wire format that did not decode.
    fn write_field(
        &self,
        out: &mut impl Sink,
        name: &[u8],
        value: Option<&[u8]>,
        shown: JsonPayload,
    ) {
        let plain = |out: &mut _| match shown {
            JsonPayload::String => write_bytes_value(out, name, value),
            JsonPayload::Object => write_json_or_bytes(out, name, value),
        };
        let (Some(schemas), Some(bytes)) = (&self.schemas, value) else {
            return plain(out);
        };
        match schemas.0.decode(bytes) {
            Decoded::Plain => plain(out),
            Decoded::Json { id, json } => {
                out.put(json.as_bytes());
                put_field(out, name, b"_schema_id\":");
                out.put_decimal(i64::from(id));
            }
            Decoded::Failed { id, error } => {
                write_bytes_value(out, name, value);
                if let Some(id) = id {
                    put_field(out, name, b"_schema_id\":");
                    out.put_decimal(i64::from(id));
                }
                put_field(out, name, b"_schema_error\":");
                write_json_str(out, &error);
            }
        }
    }
}

/// Writes `,"<name><what>` (`what` ends the field name and holds its `":`).
fn put_field(out: &mut impl Sink, name: &[u8], what: &[u8]) {
    out.put(b",\"");
    out.put(name);
    out.put(what);
}

/// Writes the value line of a record whose value is `value` ([`Format::Values`]): its bytes and
/// `\n` (a null value is an empty line).
pub fn render_value(value: Option<&[u8]>, out: &mut impl Sink) {
    if let Some(v) = value {
        out.put(v);
    }
    out.put(b"\n");
}

/// Bytes [`render_value`] writes for `value`.
#[inline]
pub fn value_line_len(value: Option<&[u8]>) -> u64 {
    value.map_or(0, |v| v.len() as u64) + 1
}

/// Writes the value of the field `name` (whose `,"name":` is written): `null`, a JSON string,
/// or for bytes that are not UTF-8 a base64 string followed by `,"name_encoding":"base64"`.
#[inline]
fn write_bytes_value(out: &mut impl Sink, name: &[u8], value: Option<&[u8]>) {
    let Some(v) = value else {
        out.put(b"null");
        return;
    };
    if let Some(text) = JsonText::scan(v) {
        // The common case, found in one pass over the bytes: text without control characters,
        // whose quotes and backslashes (if any) the sink escapes a word at a time.
        return out.put_json_text(text);
    }
    match std::str::from_utf8(v) {
        Ok(s) => write_json_bytes(out, s.as_bytes()),
        Err(_) => {
            out.put(b"\"");
            out.put_base64(v);
            out.put(b"\",\"");
            out.put(name);
            out.put(b"_encoding\":\"base64\"");
        }
    }
}

/// Writes the payload `value` (whose `,"payload":` is written) for [`JsonPayload::Object`]: a
/// value that is UTF-8 and one JSON object, array, number, `true` or `false` as that JSON
/// without insignificant whitespace; anything else as [`write_bytes_value`].
fn write_json_or_bytes(out: &mut impl Sink, name: &[u8], value: Option<&[u8]>) {
    match value {
        Some(v) if is_json_value(v) => write_minified(out, v),
        _ => write_bytes_value(out, name, value),
    }
}

/// Whether `bytes` is UTF-8 whose text is one JSON object, array, number, `true` or `false`
/// (with any whitespace around it): checked by serde_json without building the value.
pub fn is_json_value(bytes: &[u8]) -> bool {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if !matches!(first, Some(b'{' | b'[' | b'-' | b'0'..=b'9' | b't' | b'f')) {
        return false;
    }
    // serde_json does not check the UTF-8 of strings it skips: the text is checked first.
    std::str::from_utf8(bytes)
        .is_ok_and(|text| serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok())
}

/// Writes the JSON text `json` without the whitespace outside its strings (space, tab, `\n`,
/// `\r`: the only whitespace JSON has, and the only place raw control characters may be).
pub fn write_minified(out: &mut impl Sink, json: &[u8]) {
    let mut run_start = 0;
    let mut i = 0;
    while let Some(&b) = json.get(i) {
        match b {
            b'"' => {
                // Skip the string: to its closing quote, past escaped characters.
                i += 1;
                while let Some(at) =
                    json.get(i..).and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
                {
                    i += at;
                    if json.get(i) == Some(&b'\\') {
                        i += 2;
                    } else {
                        break;
                    }
                }
                i += 1;
            }
            b' ' | b'\t' | b'\n' | b'\r' => {
                out.put(json.get(run_start..i).unwrap_or_default());
                i += 1;
                while json.get(i).is_some_and(|&b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
                    i += 1;
                }
                run_start = i;
            }
            _ => i += 1,
        }
    }
    out.put(json.get(run_start..).unwrap_or_default());
}

/// Text a JSON string holds with no escape but of its quotes and backslashes: valid UTF-8
/// without control characters (U+0000..U+001F), and how many quotes and backslashes it has.
#[derive(Copy, Clone, Debug)]
pub struct JsonText<'a> {
    text: &'a [u8],
    escapes: usize,
}

impl<'a> JsonText<'a> {
    /// `bytes` as such text, or `None` when they are not UTF-8 or hold a control character.
    #[inline]
    pub fn scan(bytes: &'a [u8]) -> Option<JsonText<'a>> {
        let mut control = false;
        let mut high = false;
        let mut escapes = 0usize;
        // Counted in blocks whose count fits a byte, so each block is vector compares.
        for block in bytes.chunks(128) {
            let mut n = 0u8;
            for &b in block {
                control |= b < 0x20;
                high |= b >= 0x80;
                n = n.wrapping_add(u8::from(b == b'"' || b == b'\\'));
            }
            escapes += usize::from(n);
        }
        if control || (high && std::str::from_utf8(bytes).is_err()) {
            return None;
        }
        Some(JsonText { text: bytes, escapes })
    }
}

/// Bytes of a word whose byte is zero, as the high bit of that byte: the lowest set bit marks
/// exactly the first (lowest) zero byte (bits above it may be false: only the first is used).
#[inline(always)]
fn zero_bytes(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    word.wrapping_sub(ONES) & !word & HIGHS
}

/// Writes `text` (no control characters) quoted, its quotes and backslashes escaped, into
/// `dst`, which has room for the result and 8 bytes more; returns the bytes written (`None`
/// if `dst` is short). A word of 8 bytes is copied at a time and tested for a quote or
/// backslash without a branch per byte; at the first one the copy resumes right after it.
fn escape_into(dst: &mut [u8], text: &[u8]) -> Option<usize> {
    const QUOTES: u64 = 0x2222_2222_2222_2222;
    const BACKSLASHES: u64 = 0x5c5c_5c5c_5c5c_5c5c;
    *dst.get_mut(0)? = b'"';
    let mut w = 1;
    let mut i = 0;
    while let Some(word) = text.get(i..i + 8).and_then(|c| <[u8; 8]>::try_from(c).ok()) {
        dst.get_mut(w..w + 8)?.copy_from_slice(&word);
        let x = u64::from_le_bytes(word);
        let found = zero_bytes(x ^ QUOTES) | zero_bytes(x ^ BACKSLASHES);
        if found == 0 {
            w += 8;
            i += 8;
            continue;
        }
        let k = (found.trailing_zeros() / 8) as usize;
        w += k;
        *dst.get_mut(w)? = b'\\';
        *dst.get_mut(w + 1)? = *word.get(k)?;
        w += 2;
        i += k + 1;
    }
    for &b in text.get(i..)? {
        if b == b'"' || b == b'\\' {
            *dst.get_mut(w)? = b'\\';
            w += 1;
        }
        *dst.get_mut(w)? = b;
        w += 1;
    }
    *dst.get_mut(w)? = b'"';
    Some(w + 1)
}

/// Whether JSON needs `b` escaped inside a string: a quote, a backslash or a control character.
#[inline(always)]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The position of the first byte of `bytes` that needs an escape. Each 16-byte block is tested
/// without branching per byte (the compiler turns it into vector compares).
fn first_to_escape(bytes: &[u8]) -> Option<usize> {
    let mut blocks = bytes.chunks_exact(16);
    let mut at = 0;
    for block in &mut blocks {
        if block.iter().fold(false, |any, &b| any | needs_escape(b)) {
            return block.iter().position(|&b| needs_escape(b)).map(|i| at + i);
        }
        at += 16;
    }
    blocks.remainder().iter().position(|&b| needs_escape(b)).map(|i| at + i)
}

/// Writes `s` as a quoted JSON string (RFC 8259 §7): `"` and `\` escaped, control characters
/// U+0000..U+001F as `\b \f \n \r \t` or `\u00XX`; all other characters verbatim (UTF-8).
pub fn write_json_str(out: &mut impl Sink, s: &str) {
    match JsonText::scan(s.as_bytes()) {
        Some(text) => out.put_json_text(text),
        None => write_json_bytes(out, s.as_bytes()),
    }
}

/// [`write_json_str`] of the UTF-8 `bytes`, a byte at a time from the first that needs an
/// escape.
fn write_json_bytes(out: &mut impl Sink, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.put(b"\"");
    // Most keys and payloads need no escape: they are found so 16 bytes at a time and written
    // whole; the byte-by-byte walk starts at the first byte that needs one.
    let Some(first) = first_to_escape(bytes) else {
        out.put(bytes);
        out.put(b"\"");
        return;
    };
    let mut run_start = 0;
    for (i, &b) in bytes.iter().enumerate().skip(first) {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => &[],
            _ => continue,
        };
        out.put(bytes.get(run_start..i).unwrap_or_default());
        if escape.is_empty() {
            out.put(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]);
        } else {
            out.put(escape);
        }
        run_start = i + 1;
    }
    out.put(bytes.get(run_start..).unwrap_or_default());
    out.put(b"\"");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_counts_the_digits_a_buffer_gets() {
        let mut n = 1i64;
        let mut samples = vec![0, i64::MIN, i64::MAX, -1, 9, 10, -10, 99, 100];
        while let Some(next) = n.checked_mul(10) {
            samples.extend([n - 1, n, n + 1, -n, -(n - 1)]);
            n = next;
        }
        for v in samples {
            let mut buf = Vec::new();
            buf.put_decimal(v);
            assert_eq!(buf, v.to_string().into_bytes());
            let mut counter = ByteCounter(0);
            counter.put_decimal(v);
            assert_eq!(counter.0, buf.len() as u64, "{v}");
        }
    }

    /// One Avro schema, id 1.
    struct OneSchema;

    impl topicfs_schema::SchemaSource for OneSchema {
        fn by_id(&self, id: u32) -> topicfs_source::error::Result<topicfs_schema::SchemaRecord> {
            Ok(topicfs_schema::SchemaRecord {
                id,
                subject: None,
                version: None,
                schema_type: topicfs_schema::SchemaType::Avro,
                text: r#"{"type":"record","name":"R","fields":[{"name":"user","type":"string"}]}"#
                    .into(),
                references: Vec::new(),
                deleted: false,
            })
        }
        fn by_subject(
            &self,
            _: &str,
            _: Option<i32>,
        ) -> topicfs_source::error::Result<topicfs_schema::SchemaRecord> {
            self.by_id(1)
        }
        fn subjects(&self) -> topicfs_source::error::Result<Vec<String>> {
            Ok(Vec::new())
        }
        fn versions(&self, _: &str) -> topicfs_source::error::Result<Vec<(i32, u32)>> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn schemas_and_json_payloads_combine_decoded_values_first() {
        let schemas = Arc::new(Schemas::new(Arc::new(OneSchema)));
        let shown = JsonShown { schemas: Some(schemas), payload: JsonPayload::Object };
        let renderer = Renderer::new(Format::Json, "t", 0).showing(&shown);
        let mut out = Vec::new();
        // Decoded with its schema: JSON and its id, as without the option.
        renderer.write_field(
            &mut out,
            b"payload",
            Some(b"\0\0\0\0\x01\x0aalice"),
            JsonPayload::Object,
        );
        assert_eq!(out, br#"{"user":"alice"},"payload_schema_id":1"#);
        // Not in the wire format and JSON: JSON; not decodable: the bytes as before, and why.
        out.clear();
        renderer.write_field(&mut out, b"payload", Some(b" [1, 2]"), JsonPayload::Object);
        assert_eq!(out, b"[1,2]");
        out.clear();
        renderer.write_field(&mut out, b"payload", Some(b"\0\0\0\0\x01\x09"), JsonPayload::Object);
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.starts_with(r#""\u0000\u0000\u0000\u0000\u0001\t","payload_schema_id":1,"payload_schema_error":"#), "{text}");
        let mut counter = ByteCounter(0);
        renderer.write_field(
            &mut counter,
            b"payload",
            Some(b"\0\0\0\0\x01\x09"),
            JsonPayload::Object,
        );
        assert_eq!(counter.0, out.len() as u64);
    }

    #[test]
    fn json_text_is_exactly_utf8_without_control_characters_with_its_escapes_counted() {
        for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 40, 200] {
            for b in 0u8..=255 {
                for at in [0, len / 2, len.saturating_sub(1)] {
                    let mut v = vec![b'a'; len];
                    if let Some(x) = v.get_mut(at) {
                        *x = b;
                    }
                    let text = JsonText::scan(&v);
                    let expected = std::str::from_utf8(&v).is_ok() && v.iter().all(|&c| c >= 0x20);
                    assert_eq!(text.is_some(), expected, "{v:?}");
                    if let Some(text) = text {
                        let n = v.iter().filter(|&&c| c == b'"' || c == b'\\').count();
                        assert_eq!(text.escapes, n, "{v:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn word_escaping_is_the_byte_by_byte_escaping() {
        // Quotes and backslashes at every place of the words and of the tail.
        for len in (0..40usize).chain([100, 333]) {
            for step in [1usize, 2, 3, 4, 5, 6, 7, 8, 9, 50, 1000] {
                for special in [b'"', b'\\'] {
                    let v: Vec<u8> = (0..len)
                        .map(|i| if i % step == step - 1 { special } else { b'a' + (i % 26) as u8 })
                        .collect();
                    let mut fast = Vec::new();
                    fast.put_json_text(JsonText::scan(&v).unwrap());
                    let mut slow = Vec::new();
                    write_json_bytes(&mut slow, &v);
                    assert_eq!(fast, slow, "{v:?}");
                    let escapes = v.iter().filter(|&&c| c == special).count();
                    let mut dst = vec![0; v.len() + escapes + 10];
                    let n = escape_into(&mut dst, &v).unwrap();
                    assert_eq!(&dst[..n], &slow[..], "{v:?}");
                }
            }
        }
    }

    #[test]
    fn minified_json_loses_only_whitespace_outside_strings() {
        let cases: [(&str, &str); 5] = [
            (
                " { \"a\" : [1, 2 ,\n3], \"b c\":\"x \\\" y\\\\\" }\r\n",
                r#"{"a":[1,2,3],"b c":"x \" y\\"}"#,
            ),
            ("42", "42"),
            ("\t-1.5e3\n", "-1.5e3"),
            (r#"["\\", " "]"#, r#"["\\"," "]"#),
            ("true", "true"),
        ];
        for (input, expected) in cases {
            let mut out = Vec::new();
            write_minified(&mut out, input.as_bytes());
            assert_eq!(String::from_utf8(out).unwrap(), expected, "{input:?}");
            let mut counter = ByteCounter(0);
            write_minified(&mut counter, input.as_bytes());
            assert_eq!(counter.0, expected.len() as u64);
        }
    }

    #[test]
    fn json_values_are_objects_arrays_numbers_and_booleans_in_utf8() {
        for yes in
            ["{}", " {\"a\":1}\n", "[1,\"x\"]", "-0.5", "7", "true", "false", "{\"é\":\"😀\"}"]
        {
            assert!(is_json_value(yes.as_bytes()), "{yes}");
        }
        for no in ["", " ", "null", "\"s\"", "{", "{} {}", "tru", "01", "[1,]", "abc", "{\"a\":1}x"]
        {
            assert!(!is_json_value(no.as_bytes()), "{no}");
        }
        // A string of bytes that are not UTF-8: serde_json alone would skip it.
        assert!(!is_json_value(b"[\"\xff\"]"));
    }
}
