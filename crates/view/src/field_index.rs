//! Field indexes of filtered views (`where/<filter>/`), as Druid keeps a dimension: per sealed
//! span (segment) of a partition and per indexed field, the field's dictionary of values and,
//! per value, the offsets holding it ([`topicfs_format::field_index`]).
//!
//! # What an index answers
//!
//! An index gives a *superset* of the records that can match a condition on its field: every
//! dictionary value is tested with the filter's own comparison ([`Condition::holds_for_json`],
//! [`Condition::holds_for_bytes`]), the postings of the values that hold are united, with the
//! records whose field is an object or an array (always candidates), and the lists of several
//! indexed conditions intersected. Records a schema decodes are always candidates (what a
//! schema shows may change while the mount runs). A walker of a filtered stream
//! ([`crate::walker`]) skips, unread, the batches of a sealed span holding no candidate: they
//! render nothing anyway, so positions and sizes are those of the scan; every other record is
//! still evaluated by [`Filter::matches`]. So an answer with an index is the scan's answer by
//! construction. The active segment is always scanned.
//!
//! # Trust
//!
//! An index is for one [`SealedSpan`] exactly (base, cursors with the source's generation,
//! bytes), checked against the source ([`SpanStore::sealed_span_at`]) each time a walk enters
//! the span: a segment the cleaner or retention replaced is another span, whose index is built
//! again; a payload from the store is decoded and checked like untrusted bytes and must state
//! the span's base and end offsets.
//!
//! # Building
//!
//! Declared fields (by `MNT/<topic>/indexes`, or by the first filtered read on a field) are
//! built in the background on the mount's executor (class [`Class::Store`]), one job per
//! partition at a time, loading from the span store first and storing what is built
//! ([`FIELD_INDEX`], kept beside the segments on a writable mount, else in the cache dir).
//! Indexes held in memory count their bytes against [`DEFAULT_MEMORY_BOUND`]; past it the least
//! recently used are dropped and reloaded when next needed (a walk meanwhile scans).

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

use serde_json::Value;
use topicfs_executor::{Blocking, Class, Executor};
use topicfs_format::field_index::{self, FieldIndex, FieldIndexBuilder, ValueKind};
use topicfs_format::{Offset, Record, decode_batch, peek_entry};
use topicfs_source::sync::lock;
use topicfs_source::{PartitionSource, ReadCursor, ReadMode, SealedSpan, SpanKind, SpanStore};

use crate::filter::{Condition, Field, Filter, Op};
use crate::schemas::{Decoded, Schemas};

/// The span-store kind of field indexes: every indexed field of a span in one payload
/// ([`field_index::encode_set`]).
pub const FIELD_INDEX: SpanKind =
    SpanKind { name: "fields", tag: 6, prefix: None, with_the_log: true };

/// Bytes of indexes held in memory before the least recently used are dropped.
pub const DEFAULT_MEMORY_BOUND: usize = 96 << 20;

/// Bytes a build reads at a time.
const READ_BYTES: usize = 1 << 20;

/// A field as `indexes` lists it: its text and parsed form.
#[derive(Clone, Debug)]
struct Declared {
    text: String,
    field: Field,
}

/// An index held in memory.
struct Held {
    span: SealedSpan,
    index: Arc<FieldIndex>,
    bytes: usize,
    used: u64,
}

/// What is known of one partition.
#[derive(Default)]
struct PartState {
    /// Its sealed spans at the last enumeration, by base offset.
    spans: Vec<SealedSpan>,
    /// Indexes built or loaded (field text, span base) → (span, encoded bytes): in the store
    /// or in memory.
    known: HashMap<(String, i64), (SealedSpan, u64)>,
    /// A job for it is queued or running.
    busy: bool,
    /// Something changed since the last job (a span without an index was met).
    dirty: bool,
    /// Asked for again while a job ran: the job runs once more.
    rerun: bool,
    /// A job enumerated its spans at least once.
    enumerated: bool,
}

#[derive(Default)]
struct State {
    declared: HashMap<String, Vec<Declared>>,
    parts: HashMap<(String, u32), PartState>,
    held: HashMap<(String, u32, String, i64), Held>,
    memory: usize,
    tick: u64,
    jobs: usize,
    /// Candidates computed, by (filter text, topic, partition, span base), with their span:
    /// each walk entering a span finds them here (cleared past [`CANDIDATE_LISTS`]).
    candidates: HashMap<(String, String, u32, i64), Candidates>,
}

/// The candidates of a filter in one span (`None`: the span is read whole).
type Candidates = (SealedSpan, Option<Arc<Vec<u32>>>);

/// Most candidate lists kept.
const CANDIDATE_LISTS: usize = 256;

/// One field's state over a topic's partitions (a line of `indexes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldStatus {
    pub field: String,
    /// Sealed segments indexed, of `total`.
    pub done: usize,
    pub total: usize,
    /// Encoded bytes of the indexes.
    pub bytes: u64,
    /// Every sealed segment the last jobs saw is indexed (a job started by this look may still
    /// find newer ones).
    pub ready: bool,
}

/// The mount's field indexes (see the module docs).
pub struct FieldIndexes {
    executor: Executor,
    schemas: Option<Arc<Schemas>>,
    bound: usize,
    state: Mutex<State>,
    /// Signalled when a job ends.
    idle: Condvar,
}

impl std::fmt::Debug for FieldIndexes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FieldIndexes").field("bound", &self.bound).finish_non_exhaustive()
    }
}

impl FieldIndexes {
    /// Field indexes built on `executor`, reading JSON fields as filters do with `schemas`.
    pub fn new(executor: Executor, schemas: Option<Arc<Schemas>>) -> FieldIndexes {
        FieldIndexes {
            executor,
            schemas,
            bound: DEFAULT_MEMORY_BOUND,
            state: Mutex::default(),
            idle: Condvar::new(),
        }
    }

    /// The same with at most `bound` bytes of indexes in memory.
    pub fn with_memory_bound(mut self, bound: usize) -> FieldIndexes {
        self.bound = bound;
        self
    }

    /// Parses a field as a filter writes it (`user`, `address.city`, `@header.h`): only JSON
    /// fields and headers are indexed.
    pub fn parse_field(text: &str) -> Result<Field, String> {
        if text.contains(['=', '<', '>', '!', '~', ',', '/']) {
            return Err(format!("{text:?} is not a field (write = < > ! ~ , / as %XX)"));
        }
        let filter = Filter::parse(&format!("{text}=x")).map_err(|e| e.to_string())?;
        let conditions = filter.conditions().unwrap_or_default();
        match conditions.first().map(|c| c.field.clone()) {
            Some(f @ (Field::Json(_) | Field::Header(_))) if conditions.len() == 1 => Ok(f),
            _ => Err(format!("{text:?} is not a JSON field or @header.NAME")),
        }
    }

    /// Declares `text` indexed for `topic` (nothing if it is): later jobs build it.
    pub fn declare(&self, topic: &str, text: &str) -> Result<(), String> {
        let field = FieldIndexes::parse_field(text)?;
        let mut state = lock(&self.state);
        let fields = state.declared.entry(topic.to_string()).or_default();
        if !fields.iter().any(|d| d.field == field) {
            fields.push(Declared { text: text.to_string(), field });
        }
        Ok(())
    }

    /// Forgets the index of `text` for `topic`: no longer built nor used. `false` when it was
    /// not declared.
    pub fn drop_field(&self, topic: &str, text: &str) -> Result<bool, String> {
        let field = FieldIndexes::parse_field(text)?;
        let mut state = lock(&self.state);
        let Some(fields) = state.declared.get_mut(topic) else { return Ok(false) };
        let Some(at) = fields.iter().position(|d| d.field == field) else { return Ok(false) };
        let gone = fields.remove(at).text;
        let state = &mut *state;
        for ((t, _), part) in state.parts.iter_mut() {
            if t == topic {
                part.known.retain(|(f, _), _| *f != gone);
            }
        }
        let mut freed = 0;
        state.held.retain(|(t, _, f, _), held| {
            let keep = !(t == topic && *f == gone);
            if !keep {
                freed += held.bytes;
            }
            keep
        });
        state.memory = state.memory.saturating_sub(freed);
        state.candidates.clear();
        Ok(true)
    }

    /// Declares every JSON and header field `filter` reads for `topic` (the first filtered
    /// read on a field starts its index) and starts a job for `part` when one is needed.
    pub fn on_filtered_read(self: &Arc<Self>, part: Arc<dyn PartitionSource>, filter: &Filter) {
        for c in filter.alternatives().iter().flatten() {
            if let Some(text) = field_text(&c.field) {
                let _ = self.declare(part.topic(), &text);
            }
        }
        self.ensure(part);
    }

    /// Starts a job building `part`'s missing indexes, unless one is queued or running or the
    /// source keeps no spans.
    pub fn ensure(self: &Arc<Self>, part: Arc<dyn PartitionSource>) {
        if part.span_store().is_none_or(|s| !s.keeps_summaries()) {
            return;
        }
        let key = (part.topic().to_string(), part.partition());
        {
            let mut state = lock(&self.state);
            if state.declared.get(&key.0).is_none_or(Vec::is_empty) {
                return;
            }
            let entry = state.parts.entry(key.clone()).or_default();
            if entry.busy {
                entry.rerun = true;
                return;
            }
            entry.busy = true;
            entry.dirty = false;
            state.jobs += 1;
        }
        let this = Arc::clone(self);
        self.executor.submit(Class::Store, Blocking::No, move || {
            loop {
                this.build_partition(part.as_ref());
                let mut state = lock(&this.state);
                if let Some(p) = state.parts.get_mut(&key) {
                    if std::mem::take(&mut p.rerun) {
                        p.dirty = false;
                        continue;
                    }
                    p.busy = false;
                }
                state.jobs -= 1;
                break;
            }
            this.idle.notify_all();
        });
    }

    /// Waits until no job is queued or running (for tests and `indexes` readers that want a
    /// settled state).
    pub fn wait_idle(&self) {
        let mut state = lock(&self.state);
        while state.jobs > 0 {
            state = self.idle.wait(state).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Whether a source can hold indexes at all.
    pub fn supported(part: &dyn PartitionSource) -> bool {
        part.span_store().is_some_and(SpanStore::keeps_summaries)
    }

    /// The state of every declared field of `topic` over `parts`.
    pub fn status(&self, topic: &str, parts: &[Arc<dyn PartitionSource>]) -> Vec<FieldStatus> {
        let state = lock(&self.state);
        let Some(fields) = state.declared.get(topic) else { return Vec::new() };
        fields
            .iter()
            .map(|d| {
                let (mut done, mut total, mut bytes, mut busy) = (0, 0, 0, false);
                for part in parts {
                    let key = (topic.to_string(), part.partition());
                    let Some(p) = state.parts.get(&key) else {
                        busy = true;
                        continue;
                    };
                    busy |= !p.enumerated || p.dirty;
                    total += p.spans.len();
                    for span in &p.spans {
                        if let Some((s, b)) = p.known.get(&(d.text.clone(), span.base.0)) {
                            if s == span {
                                done += 1;
                                bytes += b;
                            }
                        }
                    }
                }
                FieldStatus {
                    field: d.text.clone(),
                    done,
                    total,
                    bytes,
                    ready: !busy && done == total,
                }
            })
            .collect()
    }

    /// The field texts of `filter`'s conditions indexed for `topic`, and of `part`'s sealed
    /// segments how many have an index of them all (for `info`).
    pub fn coverage(&self, part: &dyn PartitionSource, filter: &Filter) -> (Vec<String>, usize) {
        let state = lock(&self.state);
        let topic = part.topic().to_string();
        let fields: Vec<String> = state
            .declared
            .get(&topic)
            .map(|ds| {
                ds.iter()
                    .filter(|d| filter.alternatives().iter().flatten().any(|c| c.field == d.field))
                    .map(|d| d.text.clone())
                    .collect()
            })
            .unwrap_or_default();
        let Some(p) = state.parts.get(&(topic, part.partition())) else { return (fields, 0) };
        let done = p
            .spans
            .iter()
            .filter(|s| {
                fields
                    .iter()
                    .any(|f| p.known.get(&(f.clone(), s.base.0)).is_some_and(|k| k.0 == **s))
            })
            .count();
        (fields, done)
    }

    /// Builds or loads the missing indexes of `part`'s sealed spans (one job).
    fn build_partition(&self, part: &dyn PartitionSource) {
        let Some(store) = part.span_store() else { return };
        let spans = sealed_spans(part, store);
        let key = (part.topic().to_string(), part.partition());
        let fields = {
            let mut state = lock(&self.state);
            let p = state.parts.entry(key.clone()).or_default();
            p.spans = spans.clone();
            p.enumerated = true;
            p.known.retain(|_, (span, _)| spans.contains(span));
            state.declared.get(&key.0).cloned().unwrap_or_default()
        };
        for span in &spans {
            // Not in memory (never built, or dropped past the memory bound).
            let missing: Vec<&Declared> = {
                let state = lock(&self.state);
                fields
                    .iter()
                    .filter(|d| {
                        let hkey = (key.0.clone(), key.1, d.text.clone(), span.base.0);
                        !state.held.get(&hkey).is_some_and(|h| h.span == *span)
                    })
                    .collect()
            };
            if missing.is_empty() {
                continue;
            }
            // Stored first.
            let mut still = Vec::new();
            let stored = store.load(span, FIELD_INDEX).unwrap_or_default();
            for d in missing {
                let found = field_index::split_set(&stored).into_iter().find_map(|b| {
                    let index = FieldIndex::decode(b).ok()?;
                    let fits = index.field == d.text.as_bytes()
                        && index.base == span.base
                        && index.end == span.end.next_offset;
                    fits.then_some((index, b.len() as u64))
                });
                match found {
                    Some((index, len)) => self.insert(&key, d, span, index, len),
                    None => still.push(d),
                }
            }
            if still.is_empty() {
                continue;
            }
            let Some(built) = self.build_span(part, span, &still) else { continue };
            let mut encoded = Vec::new();
            for (d, bytes) in still.iter().zip(built) {
                if let Ok(index) = FieldIndex::decode(&bytes) {
                    self.insert(&key, d, span, index, bytes.len() as u64);
                    encoded.push((d.text.clone(), bytes));
                }
            }
            store.update(
                span,
                FIELD_INDEX,
                Box::new(move |old| {
                    let old = old.unwrap_or_default();
                    let mut keep: Vec<Vec<u8>> = field_index::split_set(&old)
                        .into_iter()
                        .filter(|b| {
                            FieldIndex::decode(b).is_ok_and(|i| {
                                !encoded.iter().any(|(f, _)| f.as_bytes() == i.field.as_slice())
                            })
                        })
                        .map(<[u8]>::to_vec)
                        .collect();
                    keep.extend(encoded.into_iter().map(|(_, b)| b));
                    Some(field_index::encode_set(keep.iter().map(Vec::as_slice)))
                }),
            );
        }
    }

    /// Holds `index` of `d` for `span` and records it as known.
    fn insert(
        &self,
        key: &(String, u32),
        d: &Declared,
        span: &SealedSpan,
        index: FieldIndex,
        len: u64,
    ) {
        let mut state = lock(&self.state);
        let state = &mut *state;
        if !state.declared.get(&key.0).is_some_and(|ds| ds.iter().any(|x| x.text == d.text)) {
            return;
        }
        state.tick += 1;
        let bytes = index.memory_bytes();
        let hkey = (key.0.clone(), key.1, d.text.clone(), span.base.0);
        let held = Held { span: *span, index: Arc::new(index), bytes, used: state.tick };
        if let Some(old) = state.held.insert(hkey, held) {
            state.memory = state.memory.saturating_sub(old.bytes);
        }
        state.memory += bytes;
        state
            .parts
            .entry(key.clone())
            .or_default()
            .known
            .insert((d.text.clone(), span.base.0), (*span, len));
        // Over the bound: the least recently used go (reloaded from the store when needed).
        while state.memory > self.bound && state.held.len() > 1 {
            let Some(oldest) =
                state.held.iter().min_by_key(|(_, h)| h.used).map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(h) = state.held.remove(&oldest) {
                state.memory = state.memory.saturating_sub(h.bytes);
                if let Some(p) = state.parts.get_mut(&(oldest.0.clone(), oldest.1)) {
                    // Known only while a store keeps it: reloaded, or built again.
                    if p.known.get(&(oldest.2.clone(), oldest.3)).is_some_and(|k| k.0 == h.span) {
                        p.dirty = true;
                    }
                }
            }
        }
    }

    /// Reads `span`'s records once and builds an index of each of `fields`; `None` when a
    /// batch of it cannot be read whole (no index: the span is scanned).
    fn build_span(
        &self,
        part: &dyn PartitionSource,
        span: &SealedSpan,
        fields: &[&Declared],
    ) -> Option<Vec<Vec<u8>>> {
        let end = span.end.next_offset;
        let mut builders: Vec<FieldIndexBuilder> =
            fields.iter().map(|d| FieldIndexBuilder::new(d.text.as_bytes(), span.base)).collect();
        let mut cursor: ReadCursor = span.start;
        'read: loop {
            let chunk =
                part.read(&cursor, READ_BYTES, ReadMode::PastDamage).ok()?.into_chunk().ok()?;
            if chunk.skipped.is_some() {
                return None;
            }
            if chunk.bytes.is_empty() {
                break;
            }
            let mut rest = chunk.bytes.as_slice();
            while !rest.is_empty() {
                let head = peek_entry(rest).ok()??;
                let len = head.total_size();
                let entry = rest.get(..len)?;
                rest = rest.get(len..).unwrap_or_default();
                let batch = decode_batch(entry).ok()?;
                let info = batch.info();
                if info.base_offset >= end {
                    break 'read;
                }
                if info.is_control {
                    continue;
                }
                for record in batch.records() {
                    let record = record.ok()?;
                    if record.offset >= end {
                        break 'read;
                    }
                    for (d, b) in fields.iter().zip(builders.iter_mut()) {
                        self.index_record(&d.field, &record, b);
                    }
                }
            }
            match chunk.next {
                Some(next) if next.next_offset < end => cursor = next,
                _ => break,
            }
        }
        Some(builders.into_iter().map(|b| b.finish(end)).collect())
    }

    /// Adds what `record` holds in `field` to `b`.
    fn index_record(&self, field: &Field, record: &Record<'_>, b: &mut FieldIndexBuilder) {
        match field {
            Field::Header(name) => {
                let mut any = false;
                for h in record.headers.iter().filter(|h| h.key == name.as_slice()) {
                    any = true;
                    match h.value {
                        Some(v) => b.add(record.offset, ValueKind::String, v),
                        None => b.add(record.offset, ValueKind::Null, &[]),
                    }
                }
                if !any {
                    b.skip(record.offset);
                }
            }
            Field::Json(path) => {
                let Some(value) = record.value else { return b.skip(record.offset) };
                if let Some(schemas) = &self.schemas {
                    if !matches!(schemas.decode(value), Decoded::Plain) {
                        // What a schema shows may change: always a candidate.
                        return b.add_other(record.offset);
                    }
                }
                match crate::filter::extract::field(value, path) {
                    Ok(Some(v)) => add_value(b, record.offset, &v),
                    _ => b.skip(record.offset),
                }
            }
            Field::Key | Field::Value => b.add_other(record.offset),
        }
    }

    /// The candidates of `filter` in the span holding offset `at` of `part` (see
    /// [`SpanGate`]); `None`: nothing is known here.
    pub(crate) fn gate(
        &self,
        part: &dyn PartitionSource,
        text: &str,
        filter: &Filter,
        at: Offset,
    ) -> Option<SpanGate> {
        let key = (part.topic().to_string(), part.partition());
        let (span, next) = {
            let state = lock(&self.state);
            let p = state.parts.get(&key)?;
            let i = p.spans.partition_point(|s| s.base <= at);
            let next = p.spans.get(i).map(|s| s.base);
            let span =
                i.checked_sub(1).and_then(|i| p.spans.get(i)).filter(|s| at < s.end.next_offset);
            match span {
                Some(s) => (Some(*s), next),
                // Not in a known sealed span (the active segment): scanned up to the next one.
                None => {
                    return Some(SpanGate {
                        lo: at,
                        hi: next.unwrap_or(Offset(i64::MAX)),
                        candidates: None,
                    });
                }
            }
        };
        let span = span?;
        let _ = next;
        let scan = SpanGate { lo: span.base, hi: span.end.next_offset, candidates: None };
        let current = part.span_store().and_then(|s| s.sealed_span_at(&span.start));
        let mut state = lock(&self.state);
        if current != Some(span) {
            if let Some(p) = state.parts.get_mut(&key) {
                p.dirty = true;
            }
            return Some(scan);
        }
        let ckey = (text.to_string(), key.0.clone(), key.1, span.base.0);
        if let Some((s, c)) = state.candidates.get(&ckey) {
            if *s == span {
                return Some(SpanGate { candidates: c.clone(), ..scan });
            }
        }
        let declared = state.declared.get(&key.0).cloned().unwrap_or_default();
        state.tick += 1;
        let tick = state.tick;
        // Per alternative, the intersection of its indexed conditions' lists; the union of
        // the alternatives' (an alternative with no indexed condition: every record, a scan).
        let mut records = 0;
        let mut complete = true;
        let mut union: Vec<u32> = Vec::new();
        for conditions in filter.alternatives() {
            let mut lists: Vec<Vec<u32>> = Vec::new();
            for c in conditions {
                let Some(d) = declared.iter().find(|d| d.field == c.field) else { continue };
                let hkey = (key.0.clone(), key.1, d.text.clone(), span.base.0);
                match state.held.get_mut(&hkey) {
                    Some(h) if h.span == span => {
                        h.used = tick;
                        records = h.index.records;
                        lists.push(candidates(c, &h.index));
                    }
                    _ => {
                        complete = false;
                        if let Some(p) = state.parts.get_mut(&key) {
                            p.dirty = true;
                        }
                    }
                }
            }
            let Some(mut out) = lists.pop() else { return Some(scan) };
            for other in lists {
                out.retain(|o| other.binary_search(o).is_ok());
            }
            union.extend(out);
        }
        union.sort_unstable();
        union.dedup();
        let out = union;
        // Most of the span a candidate: reading it all is as fast.
        let few = (out.len() as u64).saturating_mul(2) <= records;
        let candidates = few.then(|| Arc::new(out));
        if complete {
            if state.candidates.len() >= CANDIDATE_LISTS {
                state.candidates.clear();
            }
            state.candidates.insert(ckey, (span, candidates.clone()));
        }
        Some(SpanGate { candidates, ..scan })
    }
}

/// What a walk knows of the offsets `[lo, hi)`: the candidates (relative to `lo`, sorted) of
/// an indexed sealed span, or `None` (scan every batch).
#[derive(Clone, Debug)]
pub(crate) struct SpanGate {
    pub(crate) lo: Offset,
    pub(crate) hi: Offset,
    pub(crate) candidates: Option<Arc<Vec<u32>>>,
}

impl SpanGate {
    /// Whether the batch `[base, last]` may hold a match: not when it lies in this span and
    /// holds no candidate.
    pub(crate) fn may_hold(&self, base: Offset, last: Offset) -> bool {
        let Some(c) = &self.candidates else { return true };
        if base < self.lo || last >= self.hi {
            return true;
        }
        let (b, l) = ((base.0 - self.lo.0) as u64, (last.0 - self.lo.0) as u64);
        let i = c.partition_point(|&o| u64::from(o) < b);
        c.get(i).is_some_and(|&o| u64::from(o) <= l)
    }
}

impl SpanGate {
    /// Whether the record at `offset` is ruled out: in this span, and not a candidate.
    pub(crate) fn rejects(&self, offset: Offset) -> bool {
        let Some(c) = &self.candidates else { return false };
        if offset < self.lo || offset >= self.hi {
            return false;
        }
        let rel = u32::try_from(offset.0 - self.lo.0).unwrap_or(u32::MAX);
        c.binary_search(&rel).is_err()
    }
}

/// The field text of `field` as `indexes` lists it, for the fields indexes hold.
fn field_text(field: &Field) -> Option<String> {
    let escape = |s: &[u8]| -> String {
        let mut out = String::new();
        for &c in s {
            if c.is_ascii_alphanumeric() || b"-_:@+*^$'\"()[]{};|#&".contains(&c) {
                out.push(c as char);
            } else {
                out.push_str(&format!("%{c:02X}"));
            }
        }
        out
    };
    match field {
        Field::Json(path) => {
            Some(path.iter().map(|s| escape(s.as_bytes())).collect::<Vec<_>>().join("."))
        }
        Field::Header(name) => Some(format!("@header.{}", escape(name))),
        Field::Key | Field::Value => None,
    }
}

/// Adds a JSON value to `b`.
fn add_value(b: &mut FieldIndexBuilder, offset: Offset, v: &Value) {
    match v {
        Value::Null => b.add(offset, ValueKind::Null, &[]),
        Value::Bool(false) => b.add(offset, ValueKind::False, &[]),
        Value::Bool(true) => b.add(offset, ValueKind::True, &[]),
        Value::Number(n) => b.add(offset, ValueKind::Number, n.to_string().as_bytes()),
        Value::String(s) => b.add(offset, ValueKind::String, s.as_bytes()),
        Value::Array(_) | Value::Object(_) => b.add_other(offset),
    }
}

/// A dictionary value as the JSON value it was read from (`None`: it cannot be, a candidate).
fn json_value(kind: ValueKind, bytes: &[u8]) -> Option<Value> {
    Some(match kind {
        ValueKind::Null => Value::Null,
        ValueKind::False => Value::Bool(false),
        ValueKind::True => Value::Bool(true),
        ValueKind::Number => Value::Number(serde_json::from_slice(bytes).ok()?),
        ValueKind::String => Value::String(String::from_utf8(bytes.to_vec()).ok()?),
    })
}

/// Whether `c` may hold for a dictionary value (the filter's own comparison; a value that
/// cannot be read back is a candidate).
fn entry_holds(c: &Condition, e: &field_index::Entry) -> bool {
    match &c.field {
        Field::Header(_) => match e.kind {
            ValueKind::Null => c.holds_for_bytes(None),
            _ => c.holds_for_bytes(Some(&e.bytes)),
        },
        _ => json_value(e.kind, &e.bytes).is_none_or(|v| c.holds_for_json(&v)),
    }
}

/// The records of `index`'s span (relative offsets, sorted) that may satisfy `c`.
pub(crate) fn candidates(c: &Condition, index: &FieldIndex) -> Vec<u32> {
    let plain = c.value.number.is_none() && c.value.json.is_none() && c.value.pattern.is_none();
    let matching: Vec<usize> = match (&c.field, c.op) {
        // Equal to a plain string: only that string (a number's or a literal's text never
        // spells one; see `filter`).
        (Field::Json(_), Op::Eq) if plain => {
            index.find(ValueKind::String, &c.value.bytes).into_iter().collect()
        }
        // A header's bytes equal: that value, and a null one when the literal is `null`.
        (Field::Header(_), Op::Eq) if c.value.pattern.is_none() => {
            let mut m: Vec<usize> =
                index.find(ValueKind::String, &c.value.bytes).into_iter().collect();
            if c.value.json == Some(Value::Null) {
                m.extend(index.find(ValueKind::Null, &[]));
            }
            m
        }
        _ => (0..index.entries.len())
            .filter(|&i| index.entries.get(i).is_some_and(|e| entry_holds(c, e)))
            .collect(),
    };
    let mut out: Vec<u32> = index.other.clone();
    for i in matching {
        if let Some(e) = index.entries.get(i) {
            out.extend_from_slice(&e.offsets);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// `part`'s sealed spans from its log start, in order (stops at the first place that is not a
/// sealed span's start: the active segment, or a log start inside a segment).
fn sealed_spans(part: &dyn PartitionSource, store: &dyn SpanStore) -> Vec<SealedSpan> {
    let Ok(start) = part.summary().map(|s| s.log_start_offset) else { return Vec::new() };
    let Ok(mut cursor) = part.seek(start) else { return Vec::new() };
    let mut out: Vec<SealedSpan> = Vec::new();
    while let Some(span) = store.sealed_span_at(&cursor) {
        if out.last().is_some_and(|l| l.base >= span.base) {
            break;
        }
        out.push(span);
        cursor = span.end;
    }
    out
}

#[cfg(test)]
mod tests;
