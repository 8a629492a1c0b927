//! The Avro binary writer from the JSON mapping (see the parent module).

use apache_avro::Schema;
use apache_avro::schema::RecordSchema;
use serde_json::{Map, Value};
use topicfs_source::{Error, Result};

use super::{AvroCodec, MAX_DEPTH, branch_name, describe, invalid};

/// JSON as the caller gave it, or an Avro schema's default value (which differs in unions:
/// the default is for the first branch, not wrapped in `{"<branch>": ...}`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Json,
    Default,
}

/// One body being written: `out` the bytes so far, `path` the field path of the value being
/// written (starting at the caller's root name, for messages).
pub(super) struct Writer<'c> {
    pub(super) codec: &'c AvroCodec,
    pub(super) out: Vec<u8>,
    pub(super) path: String,
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

    pub(super) fn long(&mut self, n: i64) {
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
    pub(super) fn value(
        &mut self,
        schema: &Schema,
        value: &Value,
        mode: Mode,
        depth: usize,
    ) -> Result<()> {
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
