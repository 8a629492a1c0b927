//! The Avro binary reader (see the parent module for the JSON mapping and the limits).

use std::fmt::Write as _;

use apache_avro::Schema;
use apache_avro::schema::RecordSchema;
use serde_json::{Map, Number, Value};
use topicfs_source::{Error, Result};

use super::{AvroCodec, MAX_DEPTH, branch_name, invalid};

/// One body being read. Invariant: `pos <= buf.len()`; `path` is the field path of the value
/// being read (for messages); `budget` the values it may still produce.
pub(super) struct Reader<'c, 'b> {
    pub(super) codec: &'c AvroCodec,
    pub(super) buf: &'b [u8],
    pub(super) pos: usize,
    pub(super) budget: usize,
    pub(super) path: String,
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
    /// [`MAX_DEPTH`] levels fit a 1 MiB thread stack in a debug build (tested).
    pub(super) fn value(&mut self, schema: &Schema, depth: usize) -> Result<Value> {
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
                // Writing to a String cannot fail.
                let _ = write!(self.path, "[{}]", items.len());
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
                let _ = write!(self.path, "[{key:?}]");
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

/// The JSON text writer: the same reading as [`Reader::value`] (the same checks, budget and
/// depth), writing what `serde_json::to_string` writes of that value straight into `out`
/// instead of building it. `None` when the Value reader must answer instead: on any error
/// (it says which, with the field path) and for a map holding a key twice or a record whose
/// field names repeat (its object keeps one).
impl Reader<'_, '_> {
    pub(super) fn text(&mut self, schema: &Schema, depth: usize, out: &mut Vec<u8>) -> Option<()> {
        self.spend().ok()?;
        if depth > MAX_DEPTH {
            return None;
        }
        let codec = self.codec;
        match codec.resolve(schema).ok()? {
            Schema::Union(u) => self.union_text(u.variants(), depth, out),
            Schema::Array(a) => self.array_text(&a.items, depth, out),
            Schema::Map(m) => self.map_text(&m.types, depth, out),
            Schema::Record(r) => self.record_text(r, depth, out),
            leaf => self.leaf_text(leaf, out),
        }
    }

    #[inline(never)]
    fn leaf_text(&mut self, schema: &Schema, out: &mut Vec<u8>) -> Option<()> {
        match schema {
            Schema::Null => out.extend_from_slice(b"null"),
            Schema::Boolean => match self.array::<1>().ok()? {
                [0] => out.extend_from_slice(b"false"),
                [1] => out.extend_from_slice(b"true"),
                _ => return None,
            },
            Schema::Int => {
                out.extend_from_slice(itoa::Buffer::new().format(self.int().ok()?).as_bytes())
            }
            Schema::Long => {
                out.extend_from_slice(itoa::Buffer::new().format(self.long().ok()?).as_bytes())
            }
            Schema::String => {
                let n = self.length().ok()?;
                let text = std::str::from_utf8(self.take(n).ok()?).ok()?;
                serde_json::to_writer(&mut *out, text).ok()?;
            }
            // Floats, bytes, fixed and enums: read as the Value reader does, written by serde_json.
            other => serde_json::to_writer(&mut *out, &self.leaf(other).ok()?).ok()?,
        }
        Some(())
    }

    #[inline(never)]
    fn union_text(&mut self, branches: &[Schema], depth: usize, out: &mut Vec<u8>) -> Option<()> {
        let i = self.long().ok()?;
        let branch = usize::try_from(i).ok().and_then(|i| branches.get(i))?;
        if matches!(self.codec.resolve(branch).ok()?, Schema::Null) {
            // The Value reader reads the null and shows the union as `null`.
            return self.text(branch, depth + 1, out);
        }
        out.push(b'{');
        serde_json::to_writer(&mut *out, &branch_name(branch)).ok()?;
        out.push(b':');
        self.text(branch, depth + 1, out)?;
        out.push(b'}');
        Some(())
    }

    #[inline(never)]
    fn array_text(&mut self, item: &Schema, depth: usize, out: &mut Vec<u8>) -> Option<()> {
        out.push(b'[');
        let mut first = true;
        loop {
            let count = self.block_count().ok()?;
            if count == 0 {
                break;
            }
            for _ in 0..count {
                if !std::mem::take(&mut first) {
                    out.push(b',');
                }
                self.text(item, depth + 1, out)?;
            }
        }
        out.push(b']');
        Some(())
    }

    #[inline(never)]
    fn map_text(&mut self, values: &Schema, depth: usize, out: &mut Vec<u8>) -> Option<()> {
        out.push(b'{');
        let mut keys = std::collections::HashSet::new();
        loop {
            let count = self.block_count().ok()?;
            if count == 0 {
                break;
            }
            for _ in 0..count {
                self.spend().ok()?;
                let n = self.length().ok()?;
                let key = std::str::from_utf8(self.take(n).ok()?).ok()?.to_string();
                if !keys.is_empty() {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, &key).ok()?;
                if !keys.insert(key) {
                    return None;
                }
                out.push(b':');
                self.text(values, depth + 1, out)?;
            }
        }
        out.push(b'}');
        Some(())
    }

    #[inline(never)]
    fn record_text(&mut self, r: &RecordSchema, depth: usize, out: &mut Vec<u8>) -> Option<()> {
        if r.lookup.len() != r.fields.len() {
            return None;
        }
        out.push(b'{');
        for (i, field) in r.fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut *out, &field.name).ok()?;
            out.push(b':');
            self.text(&field.schema, depth + 1, out)?;
        }
        out.push(b'}');
        Some(())
    }
}
