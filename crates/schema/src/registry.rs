//! The schemas of a Confluent Schema Registry, rebuilt from its `_schemas` topic (or fed from
//! its REST answers).
//!
//! # The `_schemas` records (as the registry writes them)
//! Keys and values are JSON. The key's `keytype` says what the record is:
//! - `SCHEMA`, key `{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}` (older registries
//!   write `"magic":0`), value `{"subject":S,"version":V,"id":N,"schemaType":T,"references":
//!   [{"name","subject","version"}],"schema":TEXT,"deleted":false,...}` (`schemaType` absent for
//!   Avro; other fields such as `metadata`, `ruleSet`, `ts` are ignored). A value with
//!   `"deleted":true` soft-deletes that version; a null value (tombstone) removes it for good.
//! - `DELETE_SUBJECT`, value `{"subject":S,"version":V}`: soft-deletes every version of S up to
//!   and including V (the registry's own handler does exactly that).
//! - `CONFIG`, `MODE`, `NOOP`, `CLEAR_SUBJECT` (a cache-maintenance marker; permanent deletes
//!   arrive as tombstones of the SCHEMA keys): recognised, change no schema.
//! - Any other keytype (`CONTEXT`, ... of newer registries): ignored and counted.
//!
//! A record that is not one of these (not JSON, a field of the wrong type, a SCHEMA value whose
//! subject or version differ from its key's) changes nothing; it is counted and its reason is
//! kept (the last [`KEPT_PROBLEMS`]). [`Registry::apply`] never panics.
//!
//! # Queries
//! A schema by id is found while any (subject, version) registered with that id remains, soft
//! deleted or not (consumers must still decode old records, as the registry's
//! `/schemas/ids/{id}` answers). A subject's latest version is its highest non-deleted one.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Map, Value};
use topicfs_source::{Error, Result};

use crate::{SchemaRecord, SchemaReference, SchemaType};

/// How many reasons for rejected records a [`Registry`] keeps (the latest).
pub const KEPT_PROBLEMS: usize = 64;

/// One version of a subject, as listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubjectVersion {
    pub version: i32,
    pub id: u32,
    pub deleted: bool,
}

/// What applying records did: counts, and the reasons for the last rejected ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistryStats {
    /// Records that changed (or could have changed) the schemas: SCHEMA, DELETE_SUBJECT.
    pub applied: u64,
    /// Well-formed records of keytypes that carry no schema (CONFIG, MODE, NOOP, CLEAR_SUBJECT).
    pub recognised: u64,
    /// Well-formed records of keytypes this code does not know.
    pub unknown: u64,
    /// Records that could not be read.
    pub rejected: u64,
    /// The reasons of the last [`KEPT_PROBLEMS`] rejected records, oldest first.
    pub problems: Vec<String>,
}

/// The registry's state: every subject's versions and the ids they use.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    subjects: BTreeMap<String, BTreeMap<i32, SchemaRecord>>,
    ids: HashMap<u32, BTreeSet<(String, i32)>>,
    /// Schemas known by id only (REST `/schemas/ids/{id}` answers).
    id_only: HashMap<u32, SchemaRecord>,
    stats: RegistryStats,
}

fn bad(what: String) -> Error {
    Error::InvalidInput(what)
}

fn object<'v>(value: &'v Value, what: &str) -> Result<&'v Map<String, Value>> {
    value
        .as_object()
        .ok_or_else(|| bad(format!("{what}: expected a JSON object, got {}", kind(value))))
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn string(o: &Map<String, Value>, field: &str, what: &str) -> Result<String> {
    match o.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(bad(format!("{what}.{field}: expected a string, got {}", kind(other)))),
        None => Err(bad(format!("{what}.{field}: missing"))),
    }
}

fn int(o: &Map<String, Value>, field: &str, what: &str) -> Result<i32> {
    match o.get(field) {
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| bad(format!("{what}.{field}: expected a 32-bit integer, got {n}"))),
        Some(other) => {
            Err(bad(format!("{what}.{field}: expected an integer, got {}", kind(other))))
        }
        None => Err(bad(format!("{what}.{field}: missing"))),
    }
}

fn id(o: &Map<String, Value>, field: &str, what: &str) -> Result<u32> {
    let n = int(o, field, what)?;
    u32::try_from(n)
        .map_err(|_| bad(format!("{what}.{field}: a schema id is not negative, got {n}")))
}

fn json(bytes: &[u8], what: &str) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| bad(format!("{what}: not JSON: {e}")))
}

/// `schemaType`, `schema` and `references` of a registry JSON object (a `_schemas` value or a
/// REST answer).
fn schema_parts(
    o: &Map<String, Value>,
    what: &str,
) -> Result<(SchemaType, String, Vec<SchemaReference>)> {
    let schema_type = match o.get("schemaType") {
        None | Some(Value::Null) => SchemaType::Avro,
        Some(Value::String(s)) => match SchemaType::parse(Some(s)) {
            Ok(t) => t,
            Err(Error::InvalidInput(m)) => return Err(bad(format!("{what}.{m}"))),
            Err(e) => return Err(e),
        },
        Some(other) => {
            return Err(bad(format!("{what}.schemaType: expected a string, got {}", kind(other))));
        }
    };
    let text = string(o, "schema", what)?;
    let references = match o.get("references") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let at = format!("{what}.references[{i}]");
                let r = object(r, &at)?;
                Ok(SchemaReference {
                    name: string(r, "name", &at)?,
                    subject: string(r, "subject", &at)?,
                    version: int(r, "version", &at)?,
                })
            })
            .collect::<Result<_>>()?,
        Some(other) => {
            return Err(bad(format!("{what}.references: expected an array, got {}", kind(other))));
        }
    };
    Ok((schema_type, text, references))
}

fn deleted(o: &Map<String, Value>, what: &str) -> Result<bool> {
    match o.get("deleted") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(bad(format!("{what}.deleted: expected a boolean, got {}", kind(other)))),
    }
}

/// The registry's error answer (`{"error_code":40403,"message":"Schema not found"}`), if `o`
/// is one: 404xx are `NotFound`, others `InvalidInput`.
fn error_answer(o: &Map<String, Value>) -> Option<Error> {
    let code = o.get("error_code")?.as_i64()?;
    let message = o.get("message").and_then(Value::as_str).unwrap_or("");
    let text = format!("schema registry error {code}: {message}");
    Some(if (40400..40500).contains(&code) { Error::NotFound(text) } else { bad(text) })
}

/// A REST answer to `GET /schemas/ids/{id}`: `{"schema":TEXT,"schemaType":T,"references":[..]}`
/// (subject and version unknown). The registry's error objects become `NotFound` (404xx) or
/// `InvalidInput`.
pub fn parse_schema_by_id(id: u32, body: &[u8]) -> Result<SchemaRecord> {
    let what = format!("/schemas/ids/{id}");
    let value = json(body, &what)?;
    let o = object(&value, &what)?;
    if let Some(e) = error_answer(o) {
        return Err(e);
    }
    let (schema_type, text, references) = schema_parts(o, &what)?;
    Ok(SchemaRecord {
        id,
        subject: None,
        version: None,
        schema_type,
        text,
        references,
        deleted: false,
    })
}

/// A REST answer to `GET /subjects/{subject}/versions/{version}`: `{"subject","version","id",
/// "schemaType","references","schema"}` (`deleted` when asked with `?deleted=true`).
pub fn parse_subject_version(body: &[u8]) -> Result<SchemaRecord> {
    let what = "/subjects/{subject}/versions/{version}";
    let value = json(body, what)?;
    let o = object(&value, what)?;
    if let Some(e) = error_answer(o) {
        return Err(e);
    }
    schema_value(o, what)
}

/// A REST answer to `GET /subjects`: a JSON array of subject names (sorted here).
pub fn parse_subjects(body: &[u8]) -> Result<Vec<String>> {
    let what = "/subjects";
    let value = json(body, what)?;
    if let Some(e) = value.as_object().and_then(error_answer) {
        return Err(e);
    }
    let Value::Array(list) = value else {
        return Err(bad(format!("{what}: expected an array, got {}", kind(&value))));
    };
    let mut subjects = list
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.as_str()
                .map(str::to_string)
                .ok_or_else(|| bad(format!("{what}[{i}]: expected a string, got {}", kind(s))))
        })
        .collect::<Result<Vec<_>>>()?;
    subjects.sort();
    Ok(subjects)
}

/// A REST answer to `GET /subjects/{subject}/versions`: a JSON array of version numbers
/// (sorted here).
pub fn parse_versions(body: &[u8]) -> Result<Vec<i32>> {
    let what = "/subjects/{subject}/versions";
    let value = json(body, what)?;
    if let Some(e) = value.as_object().and_then(error_answer) {
        return Err(e);
    }
    let Value::Array(list) = value else {
        return Err(bad(format!("{what}: expected an array, got {}", kind(&value))));
    };
    let mut versions = list
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_i64()
                .and_then(|v| i32::try_from(v).ok())
                .ok_or_else(|| bad(format!("{what}[{i}]: expected a 32-bit integer, got {v}")))
        })
        .collect::<Result<Vec<_>>>()?;
    versions.sort_unstable();
    Ok(versions)
}

/// A `_schemas` SCHEMA value or a subject-version answer.
fn schema_value(o: &Map<String, Value>, what: &str) -> Result<SchemaRecord> {
    let (schema_type, text, references) = schema_parts(o, what)?;
    Ok(SchemaRecord {
        id: id(o, "id", what)?,
        subject: Some(string(o, "subject", what)?),
        version: Some(int(o, "version", what)?),
        schema_type,
        text,
        references,
        deleted: deleted(o, what)?,
    })
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Applies one `_schemas` record (key and value bytes; `None` value = tombstone). Records
    /// must come in offset order. A record that cannot be read changes nothing and is counted
    /// (see [`Registry::stats`]).
    pub fn apply(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) {
        if let Err(e) = self.try_apply(key, value) {
            self.stats.rejected += 1;
            if self.stats.problems.len() == KEPT_PROBLEMS {
                self.stats.problems.remove(0);
            }
            let reason = match e {
                Error::InvalidInput(m) => m,
                other => other.to_string(),
            };
            self.stats.problems.push(reason);
        }
    }

    fn try_apply(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> Result<()> {
        let key = key.ok_or_else(|| bad("_schemas record without a key".into()))?;
        let key = json(key, "_schemas key")?;
        let k = object(&key, "_schemas key")?;
        let keytype = string(k, "keytype", "_schemas key")?;
        match keytype.as_str() {
            "SCHEMA" => {
                let subject = string(k, "subject", "_schemas key")?;
                let version = int(k, "version", "_schemas key")?;
                match value {
                    None => self.remove(&subject, version),
                    Some(v) => {
                        let v = json(v, "_schemas value")?;
                        let record = schema_value(object(&v, "_schemas value")?, "_schemas value")?;
                        if record.subject.as_deref() != Some(subject.as_str())
                            || record.version != Some(version)
                        {
                            return Err(bad(format!(
                                "_schemas value: subject {:?} version {:?} under the key of {subject:?} version {version}",
                                record.subject, record.version
                            )));
                        }
                        self.insert(record);
                    }
                }
                self.stats.applied += 1;
            }
            "DELETE_SUBJECT" => {
                if let Some(v) = value {
                    let v = json(v, "_schemas DELETE_SUBJECT value")?;
                    let o = object(&v, "_schemas DELETE_SUBJECT value")?;
                    let subject = string(o, "subject", "_schemas DELETE_SUBJECT value")?;
                    let up_to = int(o, "version", "_schemas DELETE_SUBJECT value")?;
                    if let Some(versions) = self.subjects.get_mut(&subject) {
                        for (_, record) in versions.range_mut(..=up_to) {
                            record.deleted = true;
                        }
                    }
                }
                self.stats.applied += 1;
            }
            "CONFIG" | "MODE" | "NOOP" | "CLEAR_SUBJECT" => self.stats.recognised += 1,
            _ => self.stats.unknown += 1,
        }
        Ok(())
    }

    /// Adds or replaces a (subject, version), e.g. from a REST answer. A record without a
    /// subject and version (from `/schemas/ids/{id}`) is kept by id only.
    pub fn insert(&mut self, record: SchemaRecord) {
        let (Some(subject), Some(version)) = (record.subject.clone(), record.version) else {
            self.id_only.insert(record.id, record);
            return;
        };
        self.remove(&subject, version);
        self.ids.entry(record.id).or_default().insert((subject.clone(), version));
        self.subjects.entry(subject).or_default().insert(version, record);
    }

    fn remove(&mut self, subject: &str, version: i32) {
        let Some(versions) = self.subjects.get_mut(subject) else { return };
        let Some(old) = versions.remove(&version) else { return };
        if versions.is_empty() {
            self.subjects.remove(subject);
        }
        if let Some(users) = self.ids.get_mut(&old.id) {
            users.remove(&(subject.to_string(), version));
            if users.is_empty() {
                self.ids.remove(&old.id);
            }
        }
    }

    /// The schema registered under `id` (a non-deleted use of it if there is one).
    pub fn schema_by_id(&self, id: u32) -> Option<&SchemaRecord> {
        let Some(users) = self.ids.get(&id) else {
            return self.id_only.get(&id);
        };
        let mut found = None;
        for (subject, version) in users {
            if let Some(r) = self.subjects.get(subject).and_then(|v| v.get(version)) {
                if !r.deleted {
                    return Some(r);
                }
                found = found.or(Some(r));
            }
        }
        found
    }

    /// The subjects with at least one version not deleted, sorted.
    pub fn subjects(&self) -> Vec<&str> {
        self.subjects
            .iter()
            .filter(|(_, v)| v.values().any(|r| !r.deleted))
            .map(|(s, _)| s.as_str())
            .collect()
    }

    /// Every version of `subject` (soft-deleted ones flagged), in version order.
    pub fn versions(&self, subject: &str) -> Vec<SubjectVersion> {
        self.subjects
            .get(subject)
            .map(|v| {
                v.iter()
                    .map(|(&version, r)| SubjectVersion { version, id: r.id, deleted: r.deleted })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// One version of a subject (deleted or not).
    pub fn version(&self, subject: &str, version: i32) -> Option<&SchemaRecord> {
        self.subjects.get(subject)?.get(&version)
    }

    /// The highest version of `subject` that is not deleted.
    pub fn latest(&self, subject: &str) -> Option<&SchemaRecord> {
        self.subjects.get(subject)?.values().rev().find(|r| !r.deleted)
    }

    /// The references of the schema `id`.
    pub fn references(&self, id: u32) -> Option<&[SchemaReference]> {
        self.schema_by_id(id).map(|r| r.references.as_slice())
    }

    /// The schema a reference names, for [`crate::Codec::compile`]: `NotFound` if unknown.
    pub fn resolve_reference(&self, reference: &SchemaReference) -> Result<SchemaRecord> {
        self.version(&reference.subject, reference.version).cloned().ok_or_else(|| {
            Error::NotFound(format!(
                "schema reference {:?}: subject {:?} version {} is not registered",
                reference.name, reference.subject, reference.version
            ))
        })
    }

    /// Counts of applied, ignored and rejected records, and the last reasons.
    pub fn stats(&self) -> &RegistryStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests;
