//! Rendering one record into bytes, for the value-line and JSON formats.
//!
//! Raw streams need no rendering: their bytes are the batches as stored
//! (see [`crate::view::stream`]).
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
//! [`crate::view::envelope`] parses these objects back, so `.json` lines can be appended to
//! `append.json` unchanged.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::format::{BatchInfo, Record, TimestampType};
use crate::view::spec::Format;

/// Where rendered bytes go: a buffer, or a counter when only the length matters.
pub trait Sink {
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]);

    /// Appends `data` as standard base64 with padding.
    fn put_base64(&mut self, data: &[u8]);
}

impl Sink for Vec<u8> {
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
    fn put(&mut self, bytes: &[u8]) {
        self.0 = self.0.saturating_add(bytes.len() as u64);
    }

    fn put_base64(&mut self, data: &[u8]) {
        let n = base64::encoded_len(data.len(), true).unwrap_or(usize::MAX);
        self.0 = self.0.saturating_add(n as u64);
    }
}

/// Renders records of one partition in one (record) format.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Renderer {
    format: Format,
    /// The JSON-escaped, quoted topic name, rendered once.
    topic_json: Vec<u8>,
    partition: u32,
}

impl Renderer {
    /// A renderer for records of `topic`/`partition` in `format`.
    pub fn new(format: Format, topic: &str, partition: u32) -> Renderer {
        let mut topic_json = Vec::with_capacity(topic.len() + 2);
        write_json_str(&mut topic_json, topic);
        Renderer { format, topic_json, partition }
    }

    /// The format rendered.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Writes `record` (from a batch described by `info`) to `out`. Control batches are never
    /// rendered: the caller skips them. For [`Format::Raw`] nothing is written (raw streams copy
    /// batches, not records).
    pub fn render(&self, info: &BatchInfo, record: &Record<'_>, out: &mut impl Sink) {
        match self.format {
            Format::Values => render_value(record.value, out),
            Format::Json => self.render_json(info, record, out),
            Format::Raw => {}
        }
    }

    fn render_json(&self, info: &BatchInfo, record: &Record<'_>, out: &mut impl Sink) {
        let mut num = itoa::Buffer::new();
        out.put(b"{\"topic\":");
        out.put(&self.topic_json);
        out.put(b",\"partition\":");
        out.put(num.format(i64::from(self.partition)).as_bytes());
        out.put(b",\"offset\":");
        out.put(num.format(record.offset.0).as_bytes());
        let tstype: Option<&[u8]> = match info.timestamp_type {
            TimestampType::CreateTime => Some(b"create"),
            TimestampType::LogAppendTime => Some(b"logappend"),
            TimestampType::NoTimestampType => None,
        };
        if let Some(tstype) = tstype {
            out.put(b",\"tstype\":\"");
            out.put(tstype);
            out.put(b"\",\"ts\":");
            out.put(num.format(record.timestamp).as_bytes());
        }
        out.put(b",\"broker\":-1");
        if !record.headers.is_empty() {
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
        }
        write_bytes_field(out, b"key", record.key);
        write_bytes_field(out, b"payload", record.value);
        out.put(b"}\n");
    }
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

/// Writes `,"name":<value>` and, for non-UTF-8 bytes, `,"name_encoding":"base64"`.
fn write_bytes_field(out: &mut impl Sink, name: &[u8], value: Option<&[u8]>) {
    out.put(b",\"");
    out.put(name);
    out.put(b"\":");
    match value {
        None => out.put(b"null"),
        Some(v) => match std::str::from_utf8(v) {
            Ok(s) => write_json_str(out, s),
            Err(_) => {
                out.put(b"\"");
                out.put_base64(v);
                out.put(b"\",\"");
                out.put(name);
                out.put(b"_encoding\":\"base64\"");
            }
        },
    }
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
