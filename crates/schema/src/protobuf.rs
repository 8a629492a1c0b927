//! Protobuf values in the Confluent wire format, as canonical proto3 JSON and back.
//!
//! A Confluent Protobuf value is byte 0 (magic), the 4-byte big-endian schema id, then the
//! **message indexes** (which message type of the schema's `.proto` file the value is), then
//! the protobuf-encoded message. This module starts after the schema id: the framing of the
//! first five bytes and the schema registry are elsewhere in this crate.
//!
//! ## Message indexes (as Confluent's serializers write them)
//! A count `N` then `N` indexes, each a zigzag varint of a 32-bit int (Kafka's `ByteUtils`
//! varint: at most 5 bytes). The indexes are a path through the file's message types: the
//! first is the position among the file's top-level messages, each next one the position
//! among the nested messages of the one before, all in declaration order. Map fields' entry
//! types are not messages of the schema text (the registry's Java `ProtobufSchema` walks the
//! parsed text, where a `map<,>` field declares no type), so they are skipped when counting;
//! confluent-kafka-python counts them (it walks descriptors), and differs only for a nested
//! message declared after a map field in the same message. A count of 0 (a single byte `0`)
//! means `[0]`, the file's first message, and is how `[0]` is written.
//!
//! Hostile bytes are refused, never trusted: a negative count or index, a varint over 5
//! bytes, an index past the messages there are, a path deeper than the nesting. Nothing is
//! allocated from a count: indexes are resolved as they are read, each costs a byte of input.
//! Recursive message types decode to prost's nesting limit (100) and no further.
//! A message that does not decode is an error naming its type, and the path of the damaged
//! field and its byte where a second walk over the wire format finds them (`damage`).
//!
//! ## JSON mapping
//! The canonical proto3 JSON mapping (prost-reflect's, the one protobuf's `JsonFormat` and
//! Python's `json_format` implement): fields by their `json_name` (lowerCamelCase unless the
//! `.proto` says otherwise), 64-bit integers as strings, `bytes` as base64, enums by name
//! (a number the enum does not define as the number), well-known types (`Timestamp`,
//! `Duration`, wrappers, `Struct`, `Any`, ...) by their JSON forms. Fields holding their
//! default value (and absent `optional`s) are **omitted**, as `JsonFormat.printer()` of
//! Confluent's `kafka-protobuf-console-consumer` and `MessageToJson` omit them; a set
//! `optional` or `oneof` member is shown even when it holds its default. Unknown fields (of a
//! newer writer schema) are not shown. `float` fields print the fewest digits (at least 6) that read
//! back as the same float, as Python's `json_format` does (`1.1`, not `1.100000023841858`).
//! Unlike Google's implementations, a `double`/`float` field without presence holding `-0.0`
//! counts as its default (prost-reflect compares with `==`): not shown, not written.
//!
//! Encoding accepts the same mapping (numbers for 64-bit integers too, enum numbers, both the
//! `json_name` and the `.proto` name of a field); a field the message does not have, or a value
//! of the wrong type, is refused naming the field's path (`items[1].price`).

use std::collections::HashMap;
use std::path::Path;

use prost::Message;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, FileDescriptor, MessageDescriptor,
    SerializeOptions,
};
use protox::file::{File, FileResolver, GoogleFileResolver};
use topicfs_source::error::{Error, Result};

/// The name the schema's own text is compiled under. Refused as a reference name; a text that
/// imports it imports itself, a cycle protox refuses.
const ROOT_NAME: &str = "topicfs-schema-root.proto";

/// A compiled Protobuf schema: its `.proto` file and everything it imports.
///
/// Invariant: `file` is the schema's own text, compiled; it holds its descriptor pool (with
/// every import), so each type a message of `file` refers to resolves.
#[derive(Debug, Clone)]
pub struct ProtobufSchema {
    file: FileDescriptor,
}

/// Resolves the schema's text, its references (by their import names), then the well-known
/// types `google/protobuf/*.proto` that protox ships.
/// (Owned: protox keeps its resolver for `'static`.)
struct Resolver {
    root: String,
    imports: HashMap<String, String>,
    google: GoogleFileResolver,
}

impl FileResolver for Resolver {
    fn open_file(&self, name: &str) -> std::result::Result<File, protox::Error> {
        if name == ROOT_NAME {
            return File::from_source(name, &self.root);
        }
        match self.imports.get(name) {
            Some(text) => File::from_source(name, text),
            None => self.google.open_file(name),
        }
    }
}

impl ProtobufSchema {
    /// Compiles a schema: `text` is its `.proto` text; `imports` are (import name, `.proto`
    /// text) of its references, the name being what the text's `import "..."` says. The
    /// well-known types (`google/protobuf/timestamp.proto`, ...) resolve without a reference.
    ///
    /// Errors: text that does not parse or check (a type that does not exist, a duplicate
    /// field number, an import cycle), an import no reference gives: `InvalidInput` naming
    /// the file (the schema or the import) with its line and column.
    ///
    /// Cost: linear in the text, about 0.35 s per MB in a release build (a 10 MB schema of
    /// 120,000 messages: 4 s), so callers compile a schema once and keep it.
    pub fn compile(text: &str, imports: &[(String, String)]) -> Result<ProtobufSchema> {
        let mut by_name = HashMap::with_capacity(imports.len());
        for (name, import) in imports {
            if name == ROOT_NAME {
                return Err(Error::InvalidInput(format!(
                    "protobuf schema: a reference may not be named {ROOT_NAME:?}"
                )));
            }
            by_name.insert(name.clone(), import.clone());
        }
        let resolver = Resolver {
            root: text.to_string(),
            imports: by_name,
            google: GoogleFileResolver::new(),
        };
        let mut compiler = protox::Compiler::with_file_resolver(resolver);
        compiler.include_imports(true).include_source_info(false);
        if let Err(err) = compiler.open_file(Path::new(ROOT_NAME)) {
            return Err(compile_error(&err, text, imports));
        }
        let pool: DescriptorPool = compiler.descriptor_pool();
        let file = pool.get_file_by_name(ROOT_NAME).ok_or_else(|| {
            Error::InvalidInput("protobuf schema: the compiled schema has no file".to_string())
        })?;
        Ok(ProtobufSchema { file })
    }

    /// The full names of the schema's message types (nested ones too, map entries not), in
    /// the order of their message indexes: depth first, in declaration order.
    pub fn message_names(&self) -> Vec<String> {
        fn walk(message: MessageDescriptor, out: &mut Vec<String>) {
            out.push(message.full_name().to_string());
            for child in message.child_messages().filter(|m| !m.is_map_entry()) {
                walk(child, out);
            }
        }
        let mut out = Vec::new();
        for message in self.file.messages() {
            walk(message, &mut out);
        }
        out
    }

    /// Decodes what follows magic and schema id (the message indexes, then the message): the
    /// message as canonical proto3 JSON (see the module doc) and the full name of its type.
    ///
    /// Errors (`InvalidInput`): indexes that are truncated, negative, over 5 bytes, or name
    /// no message of the schema; a message that does not decode as its type (truncated, a
    /// wrong wire type, nested deeper than 100); a value the JSON mapping cannot show (a
    /// `Timestamp` out of its range).
    pub fn to_json(&self, after_id: &[u8]) -> Result<(serde_json::Value, String)> {
        let (message, start) = self.read_indexes(after_id)?;
        let name = message.full_name().to_string();
        let body = after_id.get(start..).unwrap_or_default();
        let decoded = DynamicMessage::decode(message.clone(), body).map_err(|err| {
            let place = damage::locate(&message, body, start)
                .map_or_else(String::new, |place| format!("; {place}"));
            Error::InvalidInput(format!(
                "protobuf value of type {name} (message at byte {start} after the schema id, \
                 {} bytes): {err}{place}",
                body.len()
            ))
        })?;
        let mut value = decoded
            .serialize_with_options(serde_json::value::Serializer, &SerializeOptions::new())
            .map_err(|err| {
                Error::InvalidInput(format!("protobuf value of type {name}: as JSON: {err}"))
            })?;
        each_float(&message, &mut value, 0, &shortest_f32);
        Ok((value, name))
    }

    /// Encodes `value` (canonical proto3 JSON) as the message type `message` (a full name such
    /// as `shop.Order.Item`; `None`: the file's first message): the message indexes, then the
    /// message, i.e. what follows magic and schema id.
    ///
    /// Errors (`InvalidInput`): a type that is not a message of this schema's own file (an
    /// imported one has no indexes in it); a value that does not match, naming the field's
    /// path and what is wrong (an unknown field, a string where a number belongs, an enum
    /// name the enum does not have).
    pub fn from_json(&self, message: Option<&str>, value: &serde_json::Value) -> Result<Vec<u8>> {
        let descriptor = match message {
            None => self.file.messages().next().ok_or_else(|| {
                Error::InvalidInput("protobuf schema: the schema defines no message".to_string())
            })?,
            Some(name) => self.message_of_file(name)?,
        };
        let name = descriptor.full_name().to_string();
        let indexes = indexes_of(&descriptor)?;
        let mut value = value.clone();
        each_float(&descriptor, &mut value, 0, &round_to_f32);
        let mut track = serde_path_to_error::Track::new();
        let deserializer = serde_path_to_error::Deserializer::new(&value, &mut track);
        let decoded = DynamicMessage::deserialize_with_options(
            descriptor,
            deserializer,
            &DeserializeOptions::new(),
        )
        .map_err(|err| {
            let path = track.path().to_string();
            let at = if path.is_empty() || path == "." {
                String::from("the value")
            } else {
                format!("field {path}")
            };
            Error::InvalidInput(format!("protobuf value of type {name}: {at}: {err}"))
        })?;
        let mut out = Vec::with_capacity(indexes.len() * 5 + 5 + decoded.encoded_len());
        write_indexes(&indexes, &mut out);
        decoded.encode(&mut out).map_err(|err| {
            Error::InvalidInput(format!("protobuf value of type {name}: encoding: {err}"))
        })?;
        Ok(out)
    }

    /// The message type called `name` if it is one of this schema's file (not of an import,
    /// not a map entry).
    fn message_of_file(&self, name: &str) -> Result<MessageDescriptor> {
        let pool = self.file.parent_pool();
        let name = name.strip_prefix('.').unwrap_or(name);
        match pool.get_message_by_name(name) {
            Some(m) if m.parent_file() == self.file && !m.is_map_entry() => Ok(m),
            Some(m) if m.parent_file() != self.file => Err(Error::InvalidInput(format!(
                "protobuf schema: message {name} is defined in import {:?}, not in the schema \
                 itself (a value's type must be one of the schema's own messages: {})",
                m.parent_file().name(),
                self.message_names().join(", ")
            ))),
            _ => Err(Error::InvalidInput(format!(
                "protobuf schema: no message {name} (the schema's messages: {})",
                self.message_names().join(", ")
            ))),
        }
    }

    /// Reads the message indexes at the start of `buf`: the message type they name and the
    /// position of the message's first byte.
    fn read_indexes(&self, buf: &[u8]) -> Result<(MessageDescriptor, usize)> {
        let mut pos = 0;
        let count = read_zigzag(buf, &mut pos, "the message index count")?;
        if count == 0 {
            let first = self.file.messages().next().ok_or_else(|| {
                Error::InvalidInput(
                    "protobuf value: message indexes [0] but the schema defines no message"
                        .to_string(),
                )
            })?;
            return Ok((first, pos));
        }
        if count < 0 {
            return Err(Error::InvalidInput(format!(
                "protobuf value: message index count {count} is negative"
            )));
        }
        let mut path: Vec<i32> = Vec::new();
        let mut current: Option<MessageDescriptor> = None;
        for i in 0..count {
            let what = format!("message index {} of {count}", i + 1);
            let index = read_zigzag(buf, &mut pos, &what)?;
            path.push(index);
            let next = match (&current, usize::try_from(index)) {
                (_, Err(_)) => None,
                (None, Ok(index)) => self.file.messages().nth(index),
                (Some(parent), Ok(index)) => {
                    parent.child_messages().filter(|m| !m.is_map_entry()).nth(index)
                }
            };
            match next {
                Some(next) => current = Some(next),
                None => {
                    let within = match &current {
                        None => format!(
                            "the schema has {} top-level messages",
                            self.file.messages().len()
                        ),
                        Some(parent) => format!(
                            "{} has {} nested messages",
                            parent.full_name(),
                            parent.child_messages().filter(|m| !m.is_map_entry()).count()
                        ),
                    };
                    return Err(Error::InvalidInput(format!(
                        "protobuf value: message indexes {path:?}: index {index} names no \
                         message ({within})"
                    )));
                }
            }
        }
        match current {
            Some(message) => Ok((message, pos)),
            None => Err(Error::InvalidInput("protobuf value: no message indexes".to_string())),
        }
    }
}

/// The message indexes of `message` (one of its file's messages, not a map entry): its
/// position among its siblings, map entries skipped, for it and each message it is nested in.
fn indexes_of(message: &MessageDescriptor) -> Result<Vec<i32>> {
    let mut indexes = Vec::new();
    let mut current = message.clone();
    loop {
        let parent = current.parent_message();
        let position = match &parent {
            Some(parent) => {
                parent.child_messages().filter(|m| !m.is_map_entry()).position(|m| m == current)
            }
            None => current.parent_file().messages().position(|m| m == current),
        };
        let position = position.and_then(|p| i32::try_from(p).ok()).ok_or_else(|| {
            Error::InvalidInput(format!(
                "protobuf schema: message {} has no message index",
                message.full_name()
            ))
        })?;
        indexes.push(position);
        match parent {
            Some(parent) => current = parent,
            None => break,
        }
    }
    indexes.reverse();
    Ok(indexes)
}

/// How deep [`each_float`] follows nested messages (prost decodes no deeper either).
const MAX_DEPTH: u32 = 100;

/// Calls `fix` on every JSON value of a `float` field (or a `google.protobuf.FloatValue`) in
/// `value`, a message of type `message`: in lists and map values too, nested messages to
/// [`MAX_DEPTH`]. A field is looked up by its `json_name` and by its `.proto` name.
fn each_float(
    message: &MessageDescriptor,
    value: &mut serde_json::Value,
    depth: u32,
    fix: &dyn Fn(&mut serde_json::Value),
) {
    use prost_reflect::Kind;
    fn field_value(
        kind: &Kind,
        value: &mut serde_json::Value,
        depth: u32,
        fix: &dyn Fn(&mut serde_json::Value),
    ) {
        match kind {
            Kind::Float => fix(value),
            Kind::Message(m) if m.full_name() == "google.protobuf.FloatValue" => fix(value),
            Kind::Message(m) => each_float(m, value, depth + 1, fix),
            _ => {}
        }
    }
    let serde_json::Value::Object(object) = value else { return };
    if depth >= MAX_DEPTH {
        return;
    }
    for field in message.fields() {
        let kind = field.kind();
        // Each key once (a field's two names are often the same): a nested message is walked
        // once per key it is under, and twice per level would be 2^depth walks.
        let names = [field.json_name(), field.name()];
        let keys = if names[0] == names[1] { &names[..1] } else { &names[..] };
        for key in keys {
            let Some(v) = object.get_mut(*key) else { continue };
            if field.is_map() {
                let Kind::Message(entry) = &kind else { continue };
                let value_kind = entry.map_entry_value_field().kind();
                if let serde_json::Value::Object(entries) = v {
                    entries.values_mut().for_each(|v| field_value(&value_kind, v, depth, fix));
                }
            } else if field.is_list() {
                if let serde_json::Value::Array(items) = v {
                    items.iter_mut().for_each(|v| field_value(&kind, v, depth, fix));
                }
            } else {
                field_value(&kind, v, depth, fix);
            }
        }
    }
}

/// For `to_json`: a `float` as the decimal of fewest significant digits, at least 6, that
/// reads back as the same `f32` (`1.1`, where the f32 widened to f64 is `1.100000023841858`):
/// Python's `json_format` rule (`ToShortestFloat`). For normal floats it is the shortest
/// round-trip decimal; for subnormals, whose shortest form can be 1 digit (`1e-45`), it keeps
/// 6 (`1.4013e-45`).
fn shortest_f32(number: &mut serde_json::Value) {
    let Some(v) = number.as_f64() else { return };
    let original = v as f32;
    if !original.is_finite() {
        return;
    }
    for digits in 6..=9 {
        let Ok(rounded) = format!("{original:.*e}", digits - 1).parse::<f64>() else { return };
        if rounded as f32 == original {
            if let Some(rounded) = serde_json::Number::from_f64(rounded) {
                *number = serde_json::Value::Number(rounded);
            }
            return;
        }
    }
}

/// For `from_json`: a number past `f32::MAX` that rounds to it, such as the `3.4028235e38`
/// that `to_json` (and every shortest-form printer) writes for `f32::MAX`, as `f32::MAX`:
/// prost-reflect refuses it as out of range, protobuf's Java `JsonFormat` parser takes it.
/// Numbers that round to infinity are left for the parser to refuse.
fn round_to_f32(number: &mut serde_json::Value) {
    if let Some(v) = number.as_f64() {
        let rounded = v as f32;
        if v.abs() > f64::from(f32::MAX) && rounded.is_finite() {
            *number = serde_json::Value::from(f64::from(rounded));
        }
    }
}

/// Writes message indexes as Confluent's serializers do: `[0]` as the single byte 0,
/// anything else as its count and its indexes, zigzag varints.
fn write_indexes(indexes: &[i32], out: &mut Vec<u8>) {
    if indexes == [0] {
        out.push(0);
        return;
    }
    write_zigzag(i32::try_from(indexes.len()).unwrap_or(i32::MAX), out);
    for &index in indexes {
        write_zigzag(index, out);
    }
}

/// Reads a zigzag varint of a 32-bit int (Kafka's `ByteUtils.readVarint`) at `*pos`.
fn read_zigzag(buf: &[u8], pos: &mut usize, what: &str) -> Result<i32> {
    let start = *pos;
    let mut raw: u32 = 0;
    for shift in (0..35).step_by(7) {
        let Some(&byte) = buf.get(*pos) else {
            return Err(Error::InvalidInput(format!(
                "protobuf value: {what} at byte {start} is truncated ({} bytes in all)",
                buf.len()
            )));
        };
        *pos += 1;
        if shift == 28 && byte > 0x0f {
            return Err(Error::InvalidInput(format!(
                "protobuf value: {what} at byte {start} is a varint over 32 bits"
            )));
        }
        raw |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32));
        }
    }
    // Unreachable: the fifth byte either ends the varint or is refused above.
    Err(Error::InvalidInput(format!("protobuf value: {what} at byte {start} is over 5 bytes")))
}

/// Writes a zigzag varint of a 32-bit int (Kafka's `ByteUtils.writeVarint`).
fn write_zigzag(value: i32, out: &mut Vec<u8>) {
    let mut raw = ((value << 1) ^ (value >> 31)) as u32;
    while raw >= 0x80 {
        out.push((raw as u8 & 0x7f) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// A compile error as `InvalidInput`: the file (the schema or an import by name), the line and
/// column of the first place it points at, and protox's message.
fn compile_error(err: &protox::Error, text: &str, imports: &[(String, String)]) -> Error {
    use miette::Diagnostic;
    let file = err.file();
    let (where_, source) = match file {
        Some(ROOT_NAME) | None => ("the schema".to_string(), Some(text)),
        Some(name) => (
            format!("import {name:?}"),
            imports.iter().find(|(n, _)| n == name).map(|(_, t)| t.as_str()),
        ),
    };
    let offset = err.labels().and_then(|mut labels| labels.next()).map(|label| label.offset());
    let at = match (offset, source) {
        (Some(offset), Some(source)) => {
            let (line, column) = line_column(source, offset);
            format!("{where_}, line {line} column {column}")
        }
        _ => where_,
    };
    let message = err.to_string().replace(ROOT_NAME, "the schema");
    Error::InvalidInput(format!("protobuf schema: {at}: {message}"))
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = text.get(..end).unwrap_or_default();
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

mod damage;
#[cfg(test)]
mod tests;
