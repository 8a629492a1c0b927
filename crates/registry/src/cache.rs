//! The client's caches.
//!
//! - Schemas by id: a registered id's schema never changes, so it is kept for good, at most
//!   [`MAX_IDS`] of them (the oldest inserted goes first).
//! - Everything else (subjects, a subject's versions, a version's or the latest schema, and
//!   "no schema with this id"): kept for the configured time to live, so that a new
//!   registration is seen soon after and a garbage id in every record costs one request per
//!   time to live, not one per record. At most [`MAX_SHORT`] entries (expired ones are dropped
//!   first when full, then all).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use topicfs_schema::SchemaRecord;

/// Schemas by id kept at most.
pub const MAX_IDS: usize = 10_000;
/// Short-lived entries kept at most.
pub const MAX_SHORT: usize = 10_000;

/// A short-lived answer.
#[derive(Clone, Debug)]
pub enum Short {
    Subjects(Arc<Vec<String>>),
    Versions(Arc<Vec<i32>>),
    Record(Arc<SchemaRecord>),
    /// The registry said there is no such thing (the message of its answer).
    NotFound(Arc<str>),
}

#[derive(Default)]
pub struct Cache {
    ids: HashMap<u32, Arc<SchemaRecord>>,
    id_order: VecDeque<u32>,
    /// By request path.
    short: HashMap<String, (Instant, Short)>,
}

impl Cache {
    pub fn id(&self, id: u32) -> Option<Arc<SchemaRecord>> {
        self.ids.get(&id).cloned()
    }

    pub fn insert_id(&mut self, id: u32, record: Arc<SchemaRecord>) {
        if self.ids.insert(id, record).is_none() {
            self.id_order.push_back(id);
        }
        while self.ids.len() > MAX_IDS {
            match self.id_order.pop_front() {
                Some(old) => {
                    self.ids.remove(&old);
                }
                None => break,
            }
        }
    }

    /// The answer for `path` if it is younger than `ttl`.
    pub fn short(&self, path: &str, ttl: Duration) -> Option<Short> {
        let (at, answer) = self.short.get(path)?;
        (at.elapsed() < ttl).then(|| answer.clone())
    }

    pub fn insert_short(&mut self, path: String, answer: Short, ttl: Duration) {
        if self.short.len() >= MAX_SHORT {
            self.short.retain(|_, (at, _)| at.elapsed() < ttl);
            if self.short.len() >= MAX_SHORT {
                self.short.clear();
            }
        }
        self.short.insert(path, (Instant::now(), answer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topicfs_schema::SchemaType;

    fn record(id: u32) -> Arc<SchemaRecord> {
        Arc::new(SchemaRecord {
            id,
            subject: None,
            version: None,
            schema_type: SchemaType::Avro,
            text: "\"int\"".into(),
            references: Vec::new(),
            deleted: false,
        })
    }

    #[test]
    fn ids_are_bounded_oldest_first() {
        let mut c = Cache::default();
        for id in 0..(MAX_IDS as u32 + 5) {
            c.insert_id(id, record(id));
        }
        assert_eq!(c.ids.len(), MAX_IDS);
        assert!(c.id(0).is_none() && c.id(4).is_none());
        assert!(c.id(5).is_some() && c.id(MAX_IDS as u32 + 4).is_some());
    }

    #[test]
    fn short_entries_expire_and_are_bounded() {
        let mut c = Cache::default();
        let ttl = Duration::from_millis(50);
        c.insert_short("/subjects".into(), Short::NotFound("x".into()), ttl);
        assert!(c.short("/subjects", ttl).is_some());
        std::thread::sleep(Duration::from_millis(60));
        assert!(c.short("/subjects", ttl).is_none());
        for i in 0..(MAX_SHORT + 10) {
            c.insert_short(format!("/p{i}"), Short::NotFound("x".into()), Duration::from_secs(60));
        }
        assert!(c.short.len() <= MAX_SHORT);
    }
}
