//! Keys and values with schemas: the Confluent wire format (byte 0, a 4-byte big-endian schema
//! id, then the body) shown as JSON in `.json` lines, and JSON encoded into it for appends.
//!
//! [`Schemas`] is one per mount. It asks a [`SchemaSource`] (the `_schemas` topic through the
//! seam, [`topic::TopicSchemas`], or a registry's REST API) for each schema id once, compiles it
//! once ([`Codec`]), and keeps the outcome for the rest of the mount:
//!
//! - Invariant: the answer for an id never changes within a mount. A schema id's text never
//!   changes in a registry, and an id that is unknown (or whose schema cannot be compiled) when
//!   first met stays so (logged once): so the rendering of a record, and every stream's size
//!   and byte positions, are the same at every read. (A source looks again before saying an id
//!   is unknown, and serializers register a schema before producing with it, so an id a record
//!   carries is known unless it never was registered where the mount looks.)
//! - Only a key or value whose first byte is 0 (the wire format's magic byte) is taken as
//!   framed; any other bytes are shown as before. A framed one that does not decode is shown as
//!   before too, with the reason beside it ([`Decoded::Failed`]).
//! - Renderings with schemas are not stored in the segment cache (a later mount may know other
//!   schemas, or run with `schemas=off`): see [`crate::render::Renderer::persistable`].

pub mod topic;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;
use topicfs_schema::{Codec, SchemaRecord, SchemaSource, wire};
use topicfs_source::error::{Error, Result};

/// Most failed ids remembered (a value of random bytes starting with 0 names an arbitrary id):
/// past it, a failed id is asked of the source again when met.
const MAX_FAILED_IDS: usize = 65_536;

/// What one key or value is, as shown in a `.json` line.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoded {
    /// Not in the wire format (its first byte is not 0): shown as its bytes.
    Plain,
    /// Decoded with schema `id`: `json` is the value as JSON text.
    Json { id: u32, json: String },
    /// Framed, but not decodable: shown as its bytes, with `error`; `id` when the header held
    /// one.
    Failed { id: Option<u32>, error: String },
}

#[derive(Clone)]
enum Entry {
    Ready(Arc<Codec>),
    Failed(String),
}

/// One mount's schemas; see the module doc.
pub struct Schemas {
    source: Arc<dyn SchemaSource>,
    codecs: RwLock<HashMap<u32, Entry>>,
}

impl std::fmt::Debug for Schemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let known = self.codecs.read().map_or(0, |c| c.len());
        f.debug_struct("Schemas").field("ids", &known).finish_non_exhaustive()
    }
}

impl Schemas {
    /// Schemas from `source`.
    pub fn new(source: Arc<dyn SchemaSource>) -> Schemas {
        Schemas { source, codecs: RwLock::new(HashMap::new()) }
    }

    /// Where the schemas come from.
    pub fn source(&self) -> &Arc<dyn SchemaSource> {
        &self.source
    }

    /// The codec of schema `id`, compiled on first use (see the module doc: the answer never
    /// changes within a mount).
    pub fn codec(&self, id: u32) -> std::result::Result<Arc<Codec>, String> {
        if let Some(entry) = self.codecs.read().unwrap_or_else(|e| e.into_inner()).get(&id) {
            return match entry {
                Entry::Ready(codec) => Ok(Arc::clone(codec)),
                Entry::Failed(why) => Err(why.clone()),
            };
        }
        let entry = match self.compile(id) {
            Ok(codec) => Entry::Ready(Arc::new(codec)),
            Err(e) => {
                let why = format!("schema id {id}: {e}");
                Entry::Failed(why)
            }
        };
        let mut codecs = self.codecs.write().unwrap_or_else(|e| e.into_inner());
        // Another reader may have compiled it meanwhile: the first answer stays.
        if let Some(first) = codecs.get(&id) {
            return match first {
                Entry::Ready(codec) => Ok(Arc::clone(codec)),
                Entry::Failed(why) => Err(why.clone()),
            };
        }
        let failed = codecs.values().filter(|e| matches!(e, Entry::Failed(_))).count();
        match &entry {
            Entry::Failed(why) => {
                log::warn!("{why}: values with it are shown as bytes, with the reason");
                if failed < MAX_FAILED_IDS {
                    codecs.insert(id, entry.clone());
                }
            }
            Entry::Ready(codec) => {
                log::debug!("schema id {id}: {} codec compiled", codec.schema_type().as_str());
                codecs.insert(id, entry.clone());
            }
        }
        match entry {
            Entry::Ready(codec) => Ok(codec),
            Entry::Failed(why) => Err(why),
        }
    }

    fn compile(&self, id: u32) -> Result<Codec> {
        let record = self.source.by_id(id)?;
        Codec::compile(&record, &mut |reference| {
            self.source.by_subject(&reference.subject, Some(reference.version))
        })
    }

    /// What `bytes` (a key or value) is (see [`Decoded`]).
    pub fn decode(&self, bytes: &[u8]) -> Decoded {
        if bytes.first() != Some(&wire::MAGIC) {
            return Decoded::Plain;
        }
        let framed = match wire::Framed::parse(bytes) {
            Ok(framed) => framed,
            Err(e) => return Decoded::Failed { id: None, error: e.to_string() },
        };
        let id = framed.schema_id;
        let codec = match self.codec(id) {
            Ok(codec) => codec,
            Err(error) => return Decoded::Failed { id: Some(id), error },
        };
        match codec.to_json_text(framed.body) {
            Ok(json) => Decoded::Json { id, json },
            Err(e) => Decoded::Failed { id: Some(id), error: format!("schema id {id}: {e}") },
        }
    }

    /// The wire-format bytes of `value` encoded with schema `id`; `InvalidInput` naming the
    /// field (from `root`, e.g. `payload`) when it does not match.
    pub fn encode_with_id(&self, id: u32, value: &Value, root: &str) -> Result<Vec<u8>> {
        let codec = self.codec(id).map_err(Error::InvalidInput)?;
        let body = codec.from_json(value, root)?;
        Ok(wire::frame(id, &body))
    }

    /// [`Schemas::encode_with_id`] with the latest version of `subject`.
    pub fn encode_with_subject(&self, subject: &str, value: &Value, root: &str) -> Result<Vec<u8>> {
        let record: SchemaRecord = self
            .source
            .by_subject(subject, None)
            .map_err(|e| Error::InvalidInput(format!("{root}_subject {subject:?}: {e}")))?;
        self.encode_with_id(record.id, value, root)
    }
}
