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
        Renderer { format, json_head, schemas: None, filter: None, filter_schemas: None }
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
    /// when it is filtered (the cache keeps a format's renderings, not a filter's).
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
        self.write_field(out, b"key", record.key);
        out.put(b",\"payload\":");
        self.write_field(out, b"payload", record.value);
        out.put(b"}\n");
    }

    /// The value of the field `name` (whose `,"name":` is written): decoded JSON followed by
    /// `,"name_schema_id":ID` for a key or value in the wire format whose schema is known;
    /// otherwise as [`write_bytes_value`], with `,"name_schema_id":ID` (when the header held
    /// one) and `,"name_schema_error":"..."` for one in the wire format that did not decode.
    fn write_field(&self, out: &mut impl Sink, name: &[u8], value: Option<&[u8]>) {
        let (Some(schemas), Some(bytes)) = (&self.schemas, value) else {
            return write_bytes_value(out, name, value);
        };
        match schemas.0.decode(bytes) {
            Decoded::Plain => write_bytes_value(out, name, value),
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
    if plain_ascii(v) {
        // The common case, found in one pass: printable ASCII without a quote or backslash is
        // valid UTF-8 that needs no escape.
        out.put(b"\"");
        out.put(v);
        out.put(b"\"");
        return;
    }
    match std::str::from_utf8(v) {
        Ok(s) => write_json_str(out, s),
        Err(_) => {
            out.put(b"\"");
            out.put_base64(v);
            out.put(b"\",\"");
            out.put(name);
            out.put(b"_encoding\":\"base64\"");
        }
    }
}

/// Whether every byte of `bytes` is ASCII that a JSON string holds verbatim (no quote,
/// backslash, control character or byte of a multi-byte character). One pass without an early
/// exit, so the compiler turns it into vector compares (keys and payloads are short, and
/// nearly always plain).
#[inline]
fn plain_ascii(bytes: &[u8]) -> bool {
    // Below 0x20 or at/above 0x80: outside 0x20..0x80 after the shift.
    let special = |b: u8| u8::from(b.wrapping_sub(0x20) >= 0x60 || b == b'"' || b == b'\\');
    bytes.iter().fold(0u8, |any, &b| any | special(b)) == 0
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
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
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

    #[test]
    fn plain_ascii_is_exactly_what_needs_no_escape_and_is_utf8() {
        for len in [0usize, 1, 15, 16, 17, 40] {
            for b in 0u8..=255 {
                for at in [0, len / 2, len.saturating_sub(1)] {
                    let mut v = vec![b'a'; len];
                    if let Some(x) = v.get_mut(at) {
                        *x = b;
                    }
                    let expected =
                        v.iter().all(|&c| (0x20..0x80).contains(&c) && c != b'"' && c != b'\\');
                    assert_eq!(plain_ascii(&v), expected, "{v:?}");
                }
            }
        }
    }
}
