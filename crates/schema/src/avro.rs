//! Avro bodies to and from the Avro JSON encoding, as `kafka-avro-console-consumer` prints it.
//!
//! Schemas are parsed by the Apache Avro crate (`apache_avro::Schema::parse_str_with_list`, so
//! named types defined in referenced schemas resolve). The binary reader and writer are ours,
//! over its schema tree, because values come from the network and must be decoded with limits
//! the crate's reader does not have: it recurses without a depth limit (a recursive record of a
//! few hundred kilobytes overflows the stack) and lets a zero-byte item (null, an empty record)
//! be repeated by a block count as large as the count says.
//!
//! # The JSON mapping (decode; encode accepts exactly the same)
//! - `null` → `null`; `boolean` → `true`/`false`; `int`, `long` → a JSON integer.
//! - `float` → the shortest decimal that reads back as the same 32-bit float (`0.1`, not
//!   `0.10000000149011612`), as Java's `Float.toString` gives; `double` → the shortest decimal
//!   of the double. NaN and the infinities, which JSON numbers cannot carry, are the strings
//!   `"NaN"`, `"Infinity"` and `"-Infinity"` (as Jackson writes them, quoted).
//! - `string` → a JSON string (invalid UTF-8 is an error, not replaced).
//! - `bytes` and `fixed` → a JSON string of one code point U+0000..U+00FF per byte (ISO-8859-1,
//!   the Avro specification's JSON encoding).
//! - `enum` → its symbol; `array` → a JSON array; `map` → an object (keys in the order written);
//!   `record` → an object with the fields in schema order.
//! - a union → `null` for its null branch, otherwise `{"<branch>": value}` where `<branch>` is
//!   the full name of a named type (record, enum, fixed) and the type's name otherwise (`int`,
//!   `string`, `array`, `map`, ...).
//! - Logical types are shown as their underlying type, as the console consumer shows them:
//!   `date` and `time-millis` as the int (days since 1970-01-01, milliseconds after midnight),
//!   `timestamp-millis`/`-micros`/`-nanos`, `local-timestamp-*` and `time-micros` as the long,
//!   `decimal` as its bytes or fixed (the unscaled two's-complement big-endian integer, as the
//!   ISO-8859-1 string above), `uuid` as its string (or its fixed(16)), `duration` as its
//!   fixed(12). Union branches of logical types are named by the underlying type too.
//!
//! # Limits (decode)
//! Nesting deeper than [`MAX_DEPTH`] (records, arrays, maps, unions) is an error; a body
//! produces at most its length plus [`ZERO_BYTE_VALUES`] JSON values, so a block count cannot
//! make work or memory out of nothing; a length prefix is checked against the bytes left before
//! anything is allocated; a negative length, a varint over 10 bytes, a union index or enum
//! ordinal out of range, and bytes left after the value are errors.

use std::collections::HashMap;

use apache_avro::Schema;
use apache_avro::schema::{Name, RecordSchema};
use serde_json::Value;
use topicfs_source::{Error, Result};

/// Deepest nesting of records, arrays, maps and unions a value may have.
pub const MAX_DEPTH: usize = 256;
/// JSON values a body may produce beyond one per byte (values that take no bytes: `null`,
/// empty records, `fixed` of size 0).
pub const ZERO_BYTE_VALUES: usize = 1 << 16;
/// Longest schema text accepted (with its references), in bytes.
pub const MAX_SCHEMA_TEXT: usize = 32 << 20;

/// A compiled Avro schema: its root and every named type it can reach, by full name (as a
/// `Name` split at its last dot, so a lookup hashes without allocating).
#[derive(Debug)]
pub struct AvroCodec {
    root: Schema,
    names: HashMap<Name, Schema>,
}

/// `name` in the form the names map keys by: name and namespace split at the last dot.
fn canonical(name: &Name) -> Result<Name> {
    let full = name.fullname(None);
    Name::new(&full).map_err(|e| invalid(format!("Avro schema: bad name {full}: {e}")))
}

fn invalid(message: String) -> Error {
    Error::InvalidInput(message)
}

impl AvroCodec {
    /// Parses `text` with the texts of the schemas it references (each defining named types it
    /// may use). Logical types are dropped before parsing (see the module doc: values are
    /// shown as their underlying types), so every node is a plain Avro type.
    pub fn compile(text: &str, references: &[&str]) -> Result<AvroCodec> {
        let total = text.len() + references.iter().map(|r| r.len()).sum::<usize>();
        if total > MAX_SCHEMA_TEXT {
            return Err(invalid(format!(
                "Avro schema: {total} bytes of schema text, over the limit of {MAX_SCHEMA_TEXT}"
            )));
        }
        let plain = |what: &str, t: &str| -> Result<String> {
            let mut json: Value = serde_json::from_str(t)
                .map_err(|e| invalid(format!("Avro schema{what}: not JSON: {e}")))?;
            strip_logical_types(&mut json);
            Ok(json.to_string())
        };
        let root_text = plain("", text)?;
        let mut reference_texts = Vec::with_capacity(references.len());
        for (i, r) in references.iter().enumerate() {
            reference_texts.push(plain(&format!(" (reference {i})"), r)?);
        }
        let (root, schemata) = Schema::parse_str_with_list(&root_text, &reference_texts)
            .map_err(|e| invalid(format!("Avro schema: {e}")))?;
        let mut names = HashMap::new();
        collect_names(&root, &mut names, 0)?;
        for s in &schemata {
            collect_names(s, &mut names, 0)?;
        }
        Ok(AvroCodec { root, names })
    }

    /// The parsed root schema.
    pub fn schema(&self) -> &Schema {
        &self.root
    }

    /// Decodes an Avro binary body (written with this very schema) to JSON.
    pub fn to_json(&self, body: &[u8]) -> Result<Value> {
        let mut reader = decode::Reader {
            codec: self,
            buf: body,
            pos: 0,
            budget: body.len().saturating_add(ZERO_BYTE_VALUES),
            path: String::new(),
        };
        let value = reader.value(&self.root, 0)?;
        if reader.pos != body.len() {
            return Err(invalid(format!(
                "Avro body: {} bytes left after the value (of {}): written with another schema?",
                body.len() - reader.pos,
                body.len()
            )));
        }
        Ok(value)
    }

    /// [`AvroCodec::to_json`] as the text `serde_json::to_string` makes of it, written while
    /// reading (no `Value` built), except for a body that does not decode or holds a map key
    /// twice: those go through `to_json` (its error, its object).
    pub fn to_json_text(&self, body: &[u8]) -> Result<String> {
        let mut reader = decode::Reader {
            codec: self,
            buf: body,
            pos: 0,
            budget: body.len().saturating_add(ZERO_BYTE_VALUES),
            path: String::new(),
        };
        let mut out = Vec::with_capacity(body.len().saturating_mul(2).saturating_add(16));
        if reader.text(&self.root, 0, &mut out).is_some() && reader.pos == body.len() {
            if let Ok(text) = String::from_utf8(out) {
                return Ok(text);
            }
        }
        let value = self.to_json(body)?;
        serde_json::to_string(&value).map_err(|e| invalid(format!("Avro value as JSON: {e}")))
    }

    /// Encodes `value` (in the JSON mapping of the module doc) to an Avro binary body; errors
    /// name the field path below `root`.
    pub fn from_json(&self, value: &Value, root: &str) -> Result<Vec<u8>> {
        let mut writer = encode::Writer { codec: self, out: Vec::new(), path: root.to_string() };
        writer.value(&self.root, value, encode::Mode::Json, 0)?;
        Ok(writer.out)
    }

    fn resolve<'s>(&'s self, schema: &'s Schema) -> Result<&'s Schema> {
        match schema {
            Schema::Ref { name } => match self.names.get(name) {
                Some(s) => Ok(s),
                None => self.names.get(&canonical(name)?).ok_or_else(|| {
                    invalid(format!("Avro schema: unknown named type {}", name.fullname(None)))
                }),
            },
            other => Ok(other),
        }
    }
}

/// Removes `logicalType` from every schema node of a schema's JSON (not from default values).
fn strip_logical_types(json: &mut Value) {
    match json {
        Value::Array(branches) => branches.iter_mut().for_each(strip_logical_types),
        Value::Object(node) => {
            node.remove("logicalType");
            for key in ["type", "items", "values"] {
                if let Some(inner) = node.get_mut(key) {
                    strip_logical_types(inner);
                }
            }
            if let Some(Value::Array(fields)) = node.get_mut("fields") {
                for field in fields {
                    if let Some(t) = field.get_mut("type") {
                        strip_logical_types(t);
                    }
                }
            }
        }
        _ => {}
    }
}

/// Adds a named type; false if its name was already there.
fn named(name: &Name, schema: &Schema, names: &mut HashMap<Name, Schema>) -> Result<bool> {
    let key = canonical(name)?;
    if names.contains_key(&key) {
        return Ok(false);
    }
    names.insert(key, schema.clone());
    Ok(true)
}

fn collect_names(schema: &Schema, names: &mut HashMap<Name, Schema>, depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(invalid(format!("Avro schema: nested deeper than {MAX_DEPTH}")));
    }
    match schema {
        Schema::Record(RecordSchema { name, fields, .. }) if named(name, schema, names)? => {
            for f in fields {
                collect_names(&f.schema, names, depth + 1)?;
            }
        }
        Schema::Enum(e) => {
            named(&e.name, schema, names)?;
        }
        Schema::Fixed(f) => {
            named(&f.name, schema, names)?;
        }
        Schema::Array(a) => collect_names(&a.items, names, depth + 1)?,
        Schema::Map(m) => collect_names(&m.types, names, depth + 1)?,
        Schema::Union(u) => {
            for v in u.variants() {
                collect_names(v, names, depth + 1)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// A union branch's name in the JSON encoding.
fn branch_name(schema: &Schema) -> String {
    fn full(name: &Name) -> String {
        name.fullname(None)
    }
    match schema {
        Schema::Null => "null".into(),
        Schema::Boolean => "boolean".into(),
        Schema::Int => "int".into(),
        Schema::Long => "long".into(),
        Schema::Float => "float".into(),
        Schema::Double => "double".into(),
        Schema::Bytes => "bytes".into(),
        Schema::String => "string".into(),
        Schema::Array(_) => "array".into(),
        Schema::Map(_) => "map".into(),
        Schema::Record(r) => full(&r.name),
        Schema::Enum(e) => full(&e.name),
        Schema::Fixed(f) => full(&f.name),
        Schema::Ref { name } => full(name),
        Schema::Union(_) => "union".into(),
        other => format!("{other:?}"),
    }
}

/// A value's kind and a short excerpt, for messages: `"x"`, `12`, `an object`.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.len() <= 40 => format!("{s:?}"),
        Value::String(s) => {
            let cut: String = s.chars().take(40).collect();
            format!("{cut:?}...")
        }
        Value::Array(a) => format!("an array of {}", a.len()),
        Value::Object(_) => "an object".into(),
    }
}

mod decode;
mod encode;

#[cfg(test)]
mod tests;
