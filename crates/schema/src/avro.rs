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
use serde_json::{Map, Number, Value};
use topicfs_source::{Error, Result};

/// Deepest nesting of records, arrays, maps and unions a value may have.
pub const MAX_DEPTH: usize = 256;
/// JSON values a body may produce beyond one per byte (values that take no bytes: `null`,
/// empty records, `fixed` of size 0).
pub const ZERO_BYTE_VALUES: usize = 1 << 20;
/// Longest schema text accepted (with its references), in bytes.
pub const MAX_SCHEMA_TEXT: usize = 32 << 20;

/// A compiled Avro schema: its root and every named type it can reach, by full name.
#[derive(Debug)]
pub struct AvroCodec {
    root: Schema,
    names: HashMap<String, Schema>,
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
        let mut reader = Reader {
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

    /// Encodes `value` (in the JSON mapping of the module doc) to an Avro binary body; errors
    /// name the field path below `root`.
    pub fn from_json(&self, value: &Value, root: &str) -> Result<Vec<u8>> {
        let mut writer = Writer { codec: self, out: Vec::new(), path: root.to_string() };
        writer.value(&self.root, value, Mode::Json, 0)?;
        Ok(writer.out)
    }

    fn resolve<'s>(&'s self, schema: &'s Schema) -> Result<&'s Schema> {
        match schema {
            Schema::Ref { name } => {
                let full = name.fullname(None);
                self.names
                    .get(&full)
                    .ok_or_else(|| invalid(format!("Avro schema: unknown named type {full}")))
            }
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

fn named(full: String, schema: &Schema, names: &mut HashMap<String, Schema>) -> bool {
    if names.contains_key(&full) {
        return false;
    }
    names.insert(full, schema.clone());
    true
}

fn collect_names(schema: &Schema, names: &mut HashMap<String, Schema>, depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(invalid(format!("Avro schema: nested deeper than {MAX_DEPTH}")));
    }
    match schema {
        Schema::Record(RecordSchema { name, fields, .. })
            if named(name.fullname(None), schema, names) =>
        {
            for f in fields {
                collect_names(&f.schema, names, depth + 1)?;
            }
        }
        Schema::Enum(e) => {
            named(e.name.fullname(None), schema, names);
        }
        Schema::Fixed(f) => {
            named(f.name.fullname(None), schema, names);
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

struct Reader<'c, 'b> {
    codec: &'c AvroCodec,
    buf: &'b [u8],
    pos: usize,
    budget: usize,
    path: String,
}

impl Reader<'_, '_> {
    fn fail(&self, what: impl std::fmt::Display) -> Error {
        let at = if self.path.is_empty() { "value" } else { self.path.as_str() };
        invalid(format!("Avro body at byte {}: {at}: {what}", self.pos))
    }

    fn long(&mut self) -> Result<i64> {
        let mut n: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(self.fail("truncated (in a varint)"));
            };
            self.pos += 1;
            n |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok((n >> 1) as i64 ^ -((n & 1) as i64));
            }
        }
        Err(self.fail("varint longer than 10 bytes"))
    }

    fn int(&mut self) -> Result<i32> {
        let n = self.long()?;
        i32::try_from(n).map_err(|_| self.fail(format!("int out of range: {n}")))
    }

    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let left = self.buf.len() - self.pos;
        if n > left {
            return Err(self.fail(format!("truncated: {n} bytes needed, {left} left")));
        }
        let start = self.pos;
        self.pos += n;
        self.buf
            .get(start..start + n)
            .ok_or_else(|| invalid("Avro body: reader past its end".into()))
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let bytes = self.take(N)?;
        <[u8; N]>::try_from(bytes).map_err(|_| invalid("Avro body: short read".into()))
    }

    /// A length prefix: non-negative and no more than the bytes left.
    fn length(&mut self) -> Result<usize> {
        let n = self.long()?;
        let left = self.buf.len() - self.pos;
        match usize::try_from(n) {
            Ok(n) if n <= left => Ok(n),
            Ok(n) => Err(self.fail(format!("truncated: length {n} over the {left} bytes left"))),
            Err(_) => Err(self.fail(format!("negative length {n}"))),
        }
    }

    fn spend(&mut self) -> Result<()> {
        match self.budget.checked_sub(1) {
            Some(b) => {
                self.budget = b;
                Ok(())
            }
            None => Err(self.fail("more values than the body can hold (a block count too large?)")),
        }
    }

    /// The next block's item count (0 ends), skipping the byte size of a negative count.
    fn block_count(&mut self) -> Result<u64> {
        let n = self.long()?;
        if n < 0 {
            self.long()?; // the block's size in bytes: not needed to read it
            return n
                .checked_neg()
                .map(|c| c as u64)
                .ok_or_else(|| self.fail("block count overflow"));
        }
        Ok(n as u64)
    }

    /// One value. The recursion goes through this function and the small nested ones below
    /// (union, array, map, record), each kept out of line so that a level costs little stack:
    /// [`MAX_DEPTH`] levels fit a 2 MiB thread stack in a debug build.
    fn value(&mut self, schema: &Schema, depth: usize) -> Result<Value> {
        self.spend()?;
        if depth > MAX_DEPTH {
            return Err(self.depth_error());
        }
        let codec = self.codec;
        match codec.resolve(schema)? {
            Schema::Union(u) => self.union(u.variants(), depth),
            Schema::Array(a) => self.array_value(&a.items, depth),
            Schema::Map(m) => self.map_value(&m.types, depth),
            Schema::Record(r) => self.record(r, depth),
            leaf => self.leaf(leaf),
        }
    }

    #[inline(never)]
    fn depth_error(&self) -> Error {
        self.fail(format!("nested deeper than {MAX_DEPTH}"))
    }

    /// A value with no values inside.
    #[inline(never)]
    fn leaf(&mut self, schema: &Schema) -> Result<Value> {
        Ok(match schema {
            Schema::Null => Value::Null,
            Schema::Boolean => match self.array::<1>()? {
                [0] => Value::Bool(false),
                [1] => Value::Bool(true),
                [other] => return Err(self.fail(format!("boolean byte {other}, expected 0 or 1"))),
            },
            Schema::Int => Value::from(self.int()?),
            Schema::Long => Value::from(self.long()?),
            Schema::Float => {
                let f = f32::from_le_bytes(self.array::<4>()?);
                float_json(
                    f.is_finite().then(|| f.to_string().parse::<f64>().unwrap_or(f64::from(f))),
                    f64::from(f),
                )
            }
            Schema::Double => {
                let d = f64::from_le_bytes(self.array::<8>()?);
                float_json(d.is_finite().then_some(d), d)
            }
            Schema::Bytes => {
                let n = self.length()?;
                Value::String(self.take(n)?.iter().map(|&b| char::from(b)).collect())
            }
            Schema::String => {
                let n = self.length()?;
                let start = self.pos;
                let bytes = self.take(n)?;
                match std::str::from_utf8(bytes) {
                    Ok(s) => Value::String(s.to_string()),
                    Err(e) => {
                        self.pos = start;
                        return Err(self.fail(format!("string is not UTF-8: {e}")));
                    }
                }
            }
            Schema::Fixed(f) => {
                Value::String(self.take(f.size)?.iter().map(|&b| char::from(b)).collect())
            }
            Schema::Enum(e) => {
                let i = self.long()?;
                match usize::try_from(i).ok().and_then(|i| e.symbols.get(i)) {
                    Some(symbol) => Value::String(symbol.clone()),
                    None => {
                        return Err(self.fail(format!(
                            "enum ordinal {i} out of range (enum {} has {} symbols)",
                            e.name.fullname(None),
                            e.symbols.len()
                        )));
                    }
                }
            }
            other => return Err(self.fail(format!("unsupported Avro schema node {other:?}"))),
        })
    }

    #[inline(never)]
    fn union(&mut self, branches: &[Schema], depth: usize) -> Result<Value> {
        let i = self.long()?;
        let Some(branch) = usize::try_from(i).ok().and_then(|i| branches.get(i)) else {
            return Err(
                self.fail(format!("union branch {i} out of range ({} branches)", branches.len()))
            );
        };
        let inner = self.value(branch, depth + 1)?;
        Ok(match self.codec.resolve(branch)? {
            Schema::Null => Value::Null,
            _ => {
                let mut object = Map::with_capacity(1);
                object.insert(branch_name(branch), inner);
                Value::Object(object)
            }
        })
    }

    #[inline(never)]
    fn array_value(&mut self, item: &Schema, depth: usize) -> Result<Value> {
        let mut items = Vec::new();
        loop {
            let count = self.block_count()?;
            if count == 0 {
                break;
            }
            for _ in 0..count {
                let len = self.path.len();
                self.path.push_str(&format!("[{}]", items.len()));
                items.push(self.value(item, depth + 1)?);
                self.path.truncate(len);
            }
        }
        Ok(Value::Array(items))
    }

    #[inline(never)]
    fn map_value(&mut self, values: &Schema, depth: usize) -> Result<Value> {
        let mut object = Map::new();
        loop {
            let count = self.block_count()?;
            if count == 0 {
                break;
            }
            for _ in 0..count {
                self.spend()?;
                let n = self.length()?;
                let key = match std::str::from_utf8(self.take(n)?) {
                    Ok(k) => k.to_string(),
                    Err(e) => return Err(self.fail(format!("map key is not UTF-8: {e}"))),
                };
                let len = self.path.len();
                self.path.push_str(&format!("[{key:?}]"));
                let v = self.value(values, depth + 1)?;
                self.path.truncate(len);
                object.insert(key, v);
            }
        }
        Ok(Value::Object(object))
    }

    #[inline(never)]
    fn record(&mut self, r: &RecordSchema, depth: usize) -> Result<Value> {
        let mut object = Map::with_capacity(r.fields.len().min(1024));
        for field in &r.fields {
            let len = self.path.len();
            if !self.path.is_empty() {
                self.path.push('.');
            }
            self.path.push_str(&field.name);
            let v = self.value(&field.schema, depth + 1)?;
            self.path.truncate(len);
            object.insert(field.name.clone(), v);
        }
        Ok(Value::Object(object))
    }
}

/// A float or double: the number when finite (`shortest`), else `"NaN"`, `"Infinity"`,
/// `"-Infinity"`.
fn float_json(shortest: Option<f64>, raw: f64) -> Value {
    match shortest.and_then(Number::from_f64) {
        Some(n) => Value::Number(n),
        None if raw.is_nan() => Value::String("NaN".into()),
        None if raw > 0.0 => Value::String("Infinity".into()),
        None => Value::String("-Infinity".into()),
    }
}

/// JSON as the caller gave it, or an Avro schema's default value (which differs in unions:
/// the default is for the first branch, not wrapped in `{"<branch>": ...}`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Json,
    Default,
}

struct Writer<'c> {
    codec: &'c AvroCodec,
    out: Vec<u8>,
    path: String,
}

impl Writer<'_> {
    fn fail(&self, what: impl std::fmt::Display) -> Error {
        let at = if self.path.is_empty() { "value" } else { self.path.as_str() };
        invalid(format!("{at}: {what}"))
    }

    /// An error at the field `name` below the current path.
    fn fail_at(&mut self, name: &str, what: String) -> Error {
        let len = self.path.len();
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(name);
        let e = self.fail(what);
        self.path.truncate(len);
        e
    }

    fn long(&mut self, n: i64) {
        let mut z = ((n << 1) ^ (n >> 63)) as u64;
        while z >= 0x80 {
            self.out.push((z as u8 & 0x7f) | 0x80);
            z >>= 7;
        }
        self.out.push(z as u8);
    }

    fn latin1(&self, s: &str, what: &str) -> Result<Vec<u8>> {
        s.chars()
            .map(|c| u8::try_from(u32::from(c)))
            .collect::<std::result::Result<Vec<u8>, _>>()
            .map_err(|_| {
                self.fail(format!(
                    "{what} string has a character above U+00FF (one code point per byte)"
                ))
            })
    }

    fn float(&self, value: &Value, what: &str) -> Result<f64> {
        match value {
            Value::Number(n) => {
                n.as_f64().ok_or_else(|| self.fail(format!("expected {what}, got {n}")))
            }
            Value::String(s) if s == "NaN" => Ok(f64::NAN),
            Value::String(s) if s == "Infinity" => Ok(f64::INFINITY),
            Value::String(s) if s == "-Infinity" => Ok(f64::NEG_INFINITY),
            other => Err(self.fail(format!("expected {what}, got {}", describe(other)))),
        }
    }

    fn with_path<T>(
        &mut self,
        segment: &str,
        field: bool,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let len = self.path.len();
        if field && !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(segment);
        let r = f(self);
        self.path.truncate(len);
        r
    }

    /// One value. As in the reader, the recursion goes through small functions: the nested
    /// types each have their own, the leaves one out of line.
    fn value(&mut self, schema: &Schema, value: &Value, mode: Mode, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(self.fail(format!("nested deeper than {MAX_DEPTH}")));
        }
        let codec = self.codec;
        match (codec.resolve(schema)?, value) {
            (Schema::Array(a), Value::Array(items)) => {
                self.array_items(&a.items, items, mode, depth)
            }
            (Schema::Map(m), Value::Object(entries)) => {
                self.map_entries(&m.types, entries, mode, depth)
            }
            (Schema::Record(r), Value::Object(fields)) => self.record(r, fields, mode, depth),
            (Schema::Union(u), v) => self.union(u.variants(), v, mode, depth),
            (schema, value) => self.leaf(schema, value),
        }
    }

    #[inline(never)]
    fn array_items(
        &mut self,
        item_schema: &Schema,
        items: &[Value],
        mode: Mode,
        depth: usize,
    ) -> Result<()> {
        if !items.is_empty() {
            self.long(items.len() as i64);
            for (i, item) in items.iter().enumerate() {
                self.with_path(&format!("[{i}]"), false, |w| {
                    w.value(item_schema, item, mode, depth + 1)
                })?;
            }
        }
        self.long(0);
        Ok(())
    }

    #[inline(never)]
    fn map_entries(
        &mut self,
        values: &Schema,
        entries: &Map<String, Value>,
        mode: Mode,
        depth: usize,
    ) -> Result<()> {
        if !entries.is_empty() {
            self.long(entries.len() as i64);
            for (k, v) in entries {
                self.long(k.len() as i64);
                self.out.extend_from_slice(k.as_bytes());
                self.with_path(&format!("[{k:?}]"), false, |w| {
                    w.value(values, v, mode, depth + 1)
                })?;
            }
        }
        self.long(0);
        Ok(())
    }

    #[inline(never)]
    fn record(
        &mut self,
        r: &RecordSchema,
        fields: &Map<String, Value>,
        mode: Mode,
        depth: usize,
    ) -> Result<()> {
        for field in &r.fields {
            match (fields.get(&field.name), &field.default) {
                (Some(v), _) => self
                    .with_path(&field.name, true, |w| w.value(&field.schema, v, mode, depth + 1))?,
                (None, Some(default)) => self.with_path(&field.name, true, |w| {
                    w.value(&field.schema, default, Mode::Default, depth + 1)
                })?,
                (None, None) => {
                    return Err(self.fail_at(
                        &field.name,
                        format!(
                            "missing field of record {} (it has no default)",
                            r.name.fullname(None)
                        ),
                    ));
                }
            }
        }
        if let Some(unknown) = fields.keys().find(|k| !r.lookup.contains_key(k.as_str())) {
            return Err(
                self.fail_at(unknown, format!("no such field in record {}", r.name.fullname(None)))
            );
        }
        Ok(())
    }

    /// A value with no values inside, or one of the wrong JSON type.
    #[inline(never)]
    fn leaf(&mut self, schema: &Schema, value: &Value) -> Result<()> {
        let expected =
            |w: &Self, what: &str| w.fail(format!("expected {what}, got {}", describe(value)));
        match (schema, value) {
            (Schema::Null, Value::Null) => {}
            (Schema::Null, _) => return Err(expected(self, "null")),
            (Schema::Boolean, Value::Bool(b)) => self.out.push(u8::from(*b)),
            (Schema::Boolean, _) => return Err(expected(self, "boolean")),
            (Schema::Int, Value::Number(n)) if n.is_i64() || n.is_u64() => {
                let v = n.as_i64().and_then(|v| i32::try_from(v).ok());
                let v = v.ok_or_else(|| self.fail(format!("int out of range: {n}")))?;
                self.long(i64::from(v));
            }
            (Schema::Int, _) => return Err(expected(self, "int")),
            (Schema::Long, Value::Number(n)) if n.is_i64() || n.is_u64() => {
                let v = n.as_i64().ok_or_else(|| self.fail(format!("long out of range: {n}")))?;
                self.long(v);
            }
            (Schema::Long, _) => return Err(expected(self, "long")),
            (Schema::Float, v) => {
                let d = self.float(v, "float")?;
                let f = d as f32;
                if d.is_finite() && !f.is_finite() {
                    return Err(self.fail(format!("{d} out of range for float")));
                }
                self.out.extend_from_slice(&f.to_le_bytes());
            }
            (Schema::Double, v) => {
                let d = self.float(v, "double")?;
                self.out.extend_from_slice(&d.to_le_bytes());
            }
            (Schema::Bytes, Value::String(s)) => {
                let bytes = self.latin1(s, "bytes")?;
                self.long(bytes.len() as i64);
                self.out.extend_from_slice(&bytes);
            }
            (Schema::Bytes, _) => {
                return Err(expected(self, "bytes (a string of code points U+0000..U+00FF)"));
            }
            (Schema::String, Value::String(s)) => {
                self.long(s.len() as i64);
                self.out.extend_from_slice(s.as_bytes());
            }
            (Schema::String, _) => return Err(expected(self, "string")),
            (Schema::Fixed(f), Value::String(s)) => {
                let bytes = self.latin1(s, "fixed")?;
                if bytes.len() != f.size {
                    return Err(self.fail(format!(
                        "fixed {} has size {}, got {} bytes",
                        f.name.fullname(None),
                        f.size,
                        bytes.len()
                    )));
                }
                self.out.extend_from_slice(&bytes);
            }
            (Schema::Fixed(f), _) => {
                return Err(expected(self, &format!("fixed {} (a string)", f.name.fullname(None))));
            }
            (Schema::Enum(e), Value::String(s)) => match e.symbols.iter().position(|x| x == s) {
                Some(i) => self.long(i as i64),
                None => {
                    return Err(self.fail(format!(
                        "unknown symbol {s:?} of enum {} (symbols: {})",
                        e.name.fullname(None),
                        e.symbols.join(", ")
                    )));
                }
            },
            (Schema::Enum(e), _) => {
                return Err(expected(self, &format!("enum {} symbol", e.name.fullname(None))));
            }
            (Schema::Array(_), _) => return Err(expected(self, "array")),
            (Schema::Map(_), _) => return Err(expected(self, "map (an object)")),
            (Schema::Record(r), _) => {
                return Err(expected(
                    self,
                    &format!("record {} (an object)", r.name.fullname(None)),
                ));
            }
            (other, _) => return Err(self.fail(format!("unsupported Avro schema node {other:?}"))),
        }
        Ok(())
    }

    fn union(
        &mut self,
        branches: &[Schema],
        value: &Value,
        mode: Mode,
        depth: usize,
    ) -> Result<()> {
        let codec = self.codec;
        if mode == Mode::Default {
            // A default is for the first branch, as plain JSON.
            let Some(first) = branches.first() else {
                return Err(self.fail("empty union has no default"));
            };
            self.long(0);
            return self.value(first, value, Mode::Default, depth + 1);
        }
        let names: Vec<String> = branches.iter().map(branch_name).collect();
        if value.is_null() {
            for (i, b) in branches.iter().enumerate() {
                if matches!(codec.resolve(b)?, Schema::Null) {
                    self.long(i as i64);
                    return Ok(());
                }
            }
            return Err(self.fail(format!("null is not a branch of union [{}]", names.join(", "))));
        }
        let single = match value {
            Value::Object(o) if o.len() == 1 => o.iter().next(),
            _ => None,
        };
        let Some((name, inner)) = single else {
            return Err(self.fail(format!(
                "union branch not named: expected null or {{\"<branch>\": value}} with a branch of [{}], got {}",
                names.join(", "),
                describe(value)
            )));
        };
        let Some(i) = names.iter().position(|n| n == name) else {
            return Err(
                self.fail(format!("{name:?} is not a branch of union [{}]", names.join(", ")))
            );
        };
        self.long(i as i64);
        self.value(&branches[i], inner, Mode::Json, depth + 1)
    }
}

#[cfg(test)]
mod tests;
