//! Schemas of Kafka records: the Confluent wire format, the Schema Registry's `_schemas` topic
//! and REST answers, and codecs between schema-encoded bodies and JSON.
//!
//! Pure: no I/O. The view layer finds a framed key or value ([`wire::Framed`]), looks its id up
//! in a [`registry::Registry`] (fed from the `_schemas` topic or the REST API), compiles the
//! [`SchemaRecord`] into a [`Codec`] once, and calls [`Codec::to_json`] per record
//! ([`Codec::from_json`] for appends).
//!
//! - Avro ([`avro`]): the binary encoding to and from the Avro JSON encoding that
//!   `kafka-avro-console-consumer` prints.
//! - JSON Schema ([`json_schema`]): the body is JSON text; appends are checked against the
//!   schema's `type`, `properties`, `required`, `enum`, `const` and `items`.
//! - Protobuf ([`protobuf`]): a schema's `.proto` text and its references compiled by protox,
//!   values decoded and encoded by prost-reflect as canonical proto3 JSON, with the message
//!   indexes of the wire format.
//!
//! Every error on bad input is [`Error::InvalidInput`] naming the field path
//! (`payload.address.zip: expected int, got "x"`); nothing here panics on bytes or JSON from
//! outside.

pub mod avro;
pub mod json_schema;
pub mod protobuf;
pub mod registry;
pub mod wire;

use serde_json::Value;
use topicfs_source::{Error, Result};

pub use crate::wire::Framed;

/// The kind of a schema, the registry's `schemaType` (absent means Avro).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SchemaType {
    Avro,
    Protobuf,
    Json,
}

impl SchemaType {
    /// The registry's name: `AVRO`, `PROTOBUF`, `JSON`.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Protobuf => "PROTOBUF",
            SchemaType::Json => "JSON",
        }
    }

    /// The registry's `schemaType` field: `None` (absent or JSON null) is Avro.
    pub fn parse(name: Option<&str>) -> Result<SchemaType> {
        match name {
            None | Some("AVRO") => Ok(SchemaType::Avro),
            Some("PROTOBUF") => Ok(SchemaType::Protobuf),
            Some("JSON") => Ok(SchemaType::Json),
            Some(other) => Err(Error::InvalidInput(format!(
                "schemaType: unknown schema type {other:?} (expected AVRO, PROTOBUF or JSON)"
            ))),
        }
    }
}

/// A schema's reference to another registered schema: for Avro `name` is the full name of a
/// named type the referenced schema defines; for Protobuf the import path; for JSON Schema the
/// `$ref` URL.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SchemaReference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

/// One registered schema: a `_schemas` record's value or a REST answer. `subject` and
/// `version` are absent when it came from `/schemas/ids/{id}` (which names neither).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaRecord {
    pub id: u32,
    pub subject: Option<String>,
    pub version: Option<i32>,
    pub schema_type: SchemaType,
    pub text: String,
    pub references: Vec<SchemaReference>,
    /// Soft-deleted (`"deleted": true`, or a DELETE_SUBJECT up to its version): still decodes
    /// records by id, no longer a subject's latest version.
    pub deleted: bool,
}

/// Where registered schemas come from: the `_schemas` topic as read so far (the view's
/// topic-backed source), or a Schema Registry's REST API (`topicfs-registry`). Implementations
/// look at their source again before answering `NotFound` for an id or subject they have not
/// seen (a schema is registered before the records that use it are produced), and bound how
/// long a call may wait (a registry that does not answer is an error, not a hang).
pub trait SchemaSource: Send + Sync {
    /// The schema registered under `id`. `NotFound` when none is.
    fn by_id(&self, id: u32) -> Result<SchemaRecord>;
    /// Version `version` of `subject`, or its latest version (not soft-deleted) for `None`.
    fn by_subject(&self, subject: &str, version: Option<i32>) -> Result<SchemaRecord>;
    /// The subjects with a version that is not deleted, sorted.
    fn subjects(&self) -> Result<Vec<String>>;
    /// The versions of `subject` that are not deleted, ascending, each with its schema id.
    fn versions(&self, subject: &str) -> Result<Vec<(i32, u32)>>;
}

/// A compiled schema: turns bodies (the bytes after the wire format's header) into JSON and
/// back. Build once per schema id; each call is independent.
#[derive(Debug)]
pub enum Codec {
    Avro(avro::AvroCodec),
    Json(json_schema::JsonSchemaCodec),
    /// Its bodies start with the message indexes (which message of the file).
    Protobuf(Box<protobuf::ProtobufSchema>),
}

/// How many references, transitively, one schema may pull in: a cap on a registry that
/// answers with a cycle or an endless chain.
pub const MAX_REFERENCES: usize = 1_000;

impl Codec {
    /// Compiles `record`, fetching each referenced schema (transitively, each (subject,
    /// version) once, at most [`MAX_REFERENCES`]) with `resolve_reference`.
    pub fn compile(
        record: &SchemaRecord,
        resolve_reference: &mut dyn FnMut(&SchemaReference) -> Result<SchemaRecord>,
    ) -> Result<Codec> {
        match record.schema_type {
            SchemaType::Avro => {
                let references = collect_references(record, resolve_reference)?;
                let texts: Vec<&str> = references.iter().map(|(_, r)| r.text.as_str()).collect();
                Ok(Codec::Avro(avro::AvroCodec::compile(&record.text, &texts)?))
            }
            SchemaType::Json => {
                Ok(Codec::Json(json_schema::JsonSchemaCodec::compile(&record.text)?))
            }
            SchemaType::Protobuf => {
                // Each import by the name the importing schema gives it.
                let imports: Vec<(String, String)> = collect_references(record, resolve_reference)?
                    .into_iter()
                    .map(|(reference, resolved)| (reference.name, resolved.text))
                    .collect();
                let schema = protobuf::ProtobufSchema::compile(&record.text, &imports)?;
                Ok(Codec::Protobuf(Box::new(schema)))
            }
        }
    }

    /// The schema type this codec was compiled from.
    pub fn schema_type(&self) -> SchemaType {
        match self {
            Codec::Avro(_) => SchemaType::Avro,
            Codec::Json(_) => SchemaType::Json,
            Codec::Protobuf(_) => SchemaType::Protobuf,
        }
    }

    /// Decodes a body (the bytes after the 5-byte header) to JSON.
    pub fn to_json(&self, body: &[u8]) -> Result<Value> {
        match self {
            Codec::Avro(c) => c.to_json(body),
            Codec::Json(c) => c.to_json(body),
            Codec::Protobuf(c) => c.to_json(body).map(|(value, _type)| value),
        }
    }

    /// [`Codec::to_json`] as JSON text (what `serde_json::to_string` makes of it): Avro bodies
    /// are written as JSON while read, without building the value.
    pub fn to_json_text(&self, body: &[u8]) -> Result<String> {
        match self {
            Codec::Avro(c) => c.to_json_text(body),
            _ => self.to_json(body).and_then(|v| {
                serde_json::to_string(&v)
                    .map_err(|e| Error::InvalidInput(format!("value as JSON: {e}")))
            }),
        }
    }

    /// Encodes `value` to a body, checking it against the schema; errors name the field path
    /// starting at `root` (e.g. `payload`).
    pub fn from_json(&self, value: &Value, root: &str) -> Result<Vec<u8>> {
        match self {
            Codec::Avro(c) => c.from_json(value, root),
            Codec::Json(c) => c.from_json(value, root),
            // The file's first message; errors name the field inside it.
            Codec::Protobuf(c) => c.from_json(None, value).map_err(|e| match e {
                Error::InvalidInput(what) => Error::InvalidInput(format!("{root}: {what}")),
                e => e,
            }),
        }
    }
}

/// The schemas `record` references, transitively, in the order met (depth first), each
/// (subject, version) once, with the reference that named it.
fn collect_references(
    record: &SchemaRecord,
    resolve: &mut dyn FnMut(&SchemaReference) -> Result<SchemaRecord>,
) -> Result<Vec<(SchemaReference, SchemaRecord)>> {
    let mut seen: std::collections::HashSet<(String, i32)> = Default::default();
    let mut out = Vec::new();
    let mut stack: Vec<SchemaReference> = record.references.iter().rev().cloned().collect();
    while let Some(reference) = stack.pop() {
        if !seen.insert((reference.subject.clone(), reference.version)) {
            continue;
        }
        if out.len() >= MAX_REFERENCES {
            return Err(Error::InvalidInput(format!(
                "schema {}: more than {MAX_REFERENCES} references",
                record.id
            )));
        }
        let resolved = resolve(&reference)?;
        stack.extend(resolved.references.iter().rev().cloned());
        out.push((reference, resolved));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
