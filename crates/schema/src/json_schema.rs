//! JSON Schema values: the body after the wire format's header is JSON text.
//!
//! Decoding parses the text (an error if it is not JSON) and shows the value as it is; it is
//! not validated (the producer's serializer did that, and a reader should see what is there).
//! Encoding validates the value against the schema, then writes it as compact JSON.
//!
//! # The validator
//! A small one of our own, checking the keywords that decide whether a consumer can read the
//! value: `type` (one name or a list; `integer` is a number without a fraction), `enum`,
//! `const`, `properties`, `required`, `additionalProperties` (`false` or a schema), `items`
//! (one schema for every item, or a list for the first items as in drafts 4-7), `prefixItems`
//! (2020-12), `allOf`/`anyOf`/`oneOf`, `not`, boolean schemas and local `$ref`s (`#`,
//! `#/definitions/...`, `#/$defs/...`). Other keywords (formats, lengths, patterns, bounds) and
//! `$ref`s to other documents are not checked. The `jsonschema` crate checks all of them but
//! brings regex engines, URL and IDNA handling and an HTTP resolver's feature tree (dozens of
//! crates) for a check an append makes once; our subset is what Confluent's serializer
//! failures are about in practice (a missing field, a wrong type, an unknown enum value).

use serde_json::Value;
use topicfs_source::{Error, Result};

/// Deepest nesting of schemas (and of `$ref` hops) the validator follows.
pub const MAX_DEPTH: usize = 128;

/// A compiled JSON Schema: its JSON.
#[derive(Debug)]
pub struct JsonSchemaCodec {
    schema: Value,
}

fn invalid(m: String) -> Error {
    Error::InvalidInput(m)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::String(s) if s.len() <= 40 => format!("{s:?}"),
        Value::Array(_) | Value::Object(_) | Value::String(_) => {
            format!("a value of type {}", type_name(v))
        }
        other => other.to_string(),
    }
}

fn has_type(v: &Value, name: &str) -> bool {
    match (name, v) {
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        ("number", Value::Number(_)) => true,
        _ => type_name(v) == name,
    }
}

impl JsonSchemaCodec {
    /// Parses the schema text: JSON, an object or a boolean.
    pub fn compile(text: &str) -> Result<JsonSchemaCodec> {
        let schema: Value = serde_json::from_str(text)
            .map_err(|e| invalid(format!("JSON Schema: not JSON: {e}")))?;
        match schema {
            Value::Object(_) | Value::Bool(_) => Ok(JsonSchemaCodec { schema }),
            other => Err(invalid(format!(
                "JSON Schema: expected an object or a boolean, got {}",
                type_name(&other)
            ))),
        }
    }

    /// The body as JSON (not validated).
    pub fn to_json(&self, body: &[u8]) -> Result<Value> {
        serde_json::from_slice(body)
            .map_err(|e| invalid(format!("JSON Schema body: not JSON: {e}")))
    }

    /// Validates `value` and writes it as compact JSON; errors name the path below `root`.
    pub fn from_json(&self, value: &Value, root: &str) -> Result<Vec<u8>> {
        self.validate(&self.schema, value, root, 0)?;
        serde_json::to_vec(value).map_err(|e| invalid(format!("{root}: {e}")))
    }

    fn resolve<'s>(&'s self, reference: &str, path: &str) -> Result<Option<&'s Value>> {
        let Some(pointer) = reference.strip_prefix('#') else {
            return Ok(None); // another document: not checked
        };
        self.schema.pointer(pointer).map(Some).ok_or_else(|| {
            invalid(format!("{path}: the schema's $ref {reference:?} points nowhere"))
        })
    }

    fn validate(&self, schema: &Value, v: &Value, path: &str, depth: usize) -> Result<()> {
        let at = if path.is_empty() { "value" } else { path };
        let fail = |what: String| Err(invalid(format!("{at}: {what}")));
        if depth > MAX_DEPTH {
            return fail(format!("schema nested deeper than {MAX_DEPTH}"));
        }
        let s = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => return fail("not allowed here (schema false)".into()),
            Value::Object(s) => s,
            _ => return Ok(()),
        };
        if let Some(Value::String(r)) = s.get("$ref") {
            if let Some(target) = self.resolve(r, path)? {
                self.validate(target, v, path, depth + 1)?;
            }
        }
        match s.get("type") {
            Some(Value::String(t)) if !has_type(v, t) => {
                return fail(format!("expected {t}, got {}", describe(v)));
            }
            Some(Value::Array(ts))
                if !ts.iter().any(|t| t.as_str().is_some_and(|t| has_type(v, t))) =>
            {
                let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
                return fail(format!("expected one of {}, got {}", names.join(", "), describe(v)));
            }
            _ => {}
        }
        if let Some(Value::Array(options)) = s.get("enum") {
            if !options.contains(v) {
                return fail(format!(
                    "{} is not one of the enum's {} values",
                    describe(v),
                    options.len()
                ));
            }
        }
        if let Some(c) = s.get("const") {
            if c != v {
                return fail(format!("expected the constant {c}, got {}", describe(v)));
            }
        }
        if let Value::Object(o) = v {
            if let Some(Value::Array(required)) = s.get("required") {
                if let Some(missing) =
                    required.iter().filter_map(Value::as_str).find(|r| !o.contains_key(*r))
                {
                    return fail(format!("missing required property {missing:?}"));
                }
            }
            let properties = s.get("properties").and_then(Value::as_object);
            for (name, item) in o {
                let at = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
                match (properties.and_then(|p| p.get(name)), s.get("additionalProperties")) {
                    (Some(p), _) => self.validate(p, item, &at, depth + 1)?,
                    (None, Some(extra)) => self.validate(extra, item, &at, depth + 1)?,
                    (None, None) => {}
                }
            }
        }
        if let Value::Array(items) = v {
            let prefix = match (s.get("prefixItems"), s.get("items")) {
                (Some(Value::Array(p)), _) | (None, Some(Value::Array(p))) => p.as_slice(),
                _ => &[],
            };
            let rest = match s.get("items") {
                Some(Value::Array(_)) => s.get("additionalItems"),
                other => other,
            };
            for (i, item) in items.iter().enumerate() {
                let at = format!("{path}[{i}]");
                match prefix.get(i) {
                    Some(p) => self.validate(p, item, &at, depth + 1)?,
                    None => {
                        if let Some(r) = rest {
                            self.validate(r, item, &at, depth + 1)?;
                        }
                    }
                }
            }
        }
        if let Some(Value::Array(all)) = s.get("allOf") {
            for sub in all {
                self.validate(sub, v, path, depth + 1)?;
            }
        }
        for (keyword, exactly_one) in [("anyOf", false), ("oneOf", true)] {
            if let Some(Value::Array(options)) = s.get(keyword) {
                let mut matched = 0;
                let mut first_error = None;
                for sub in options {
                    match self.validate(sub, v, path, depth + 1) {
                        Ok(()) => matched += 1,
                        Err(e) => first_error = first_error.or(Some(e)),
                    }
                }
                if matched == 0 {
                    let why = match first_error {
                        Some(Error::InvalidInput(m)) => format!(" (first: {m})"),
                        _ => String::new(),
                    };
                    return fail(format!("matches none of the {keyword} schemas{why}"));
                }
                if exactly_one && matched > 1 {
                    return fail(format!(
                        "matches {matched} of the oneOf schemas, not exactly one"
                    ));
                }
            }
        }
        if let Some(not) = s.get("not") {
            if self.validate(not, v, path, depth + 1).is_ok() {
                return fail("matches the schema under \"not\"".into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
