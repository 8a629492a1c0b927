//! Which render index serves a stream: the shared index of a (topic, partition, format), or one
//! with an origin of its own for a start far past it; the transaction trackers; the entry
//! points of background sizing.

use super::*;

/// Key of a render index: rendered bytes depend on the topic and partition (JSON) and format.
type IndexKey = (String, u32, Format);

/// Most render indexes with an origin of their own kept per (topic, partition, format); older
/// ones live on only in the streams opened on them.
pub const MAX_ORIGINS: usize = 32;

/// One per mount: caches a [`RenderIndex`] per (topic, partition, format) and opens streams at
/// one [`Isolation`], through the mount's [`TxnTrackers`] (shared with
/// [`TopicViews`](crate::topic::TopicViews), so a partition read directly and through a
/// topic-level stream is scanned once).
#[derive(Default)]
pub struct StreamRegistry {
    indexes: Mutex<HashMap<IndexKey, Arc<RenderIndex>>>,
    /// Render indexes whose origin is a stream's own start, for streams starting farther past
    /// the shared index's frontier than a sizing budget (most recent last, at most
    /// [`MAX_ORIGINS`] per key).
    origins: Mutex<HashMap<IndexKey, Vec<Arc<RenderIndex>>>>,
    /// The mount's transaction trackers (one per partition) and its isolation level.
    txns: Arc<TxnTrackers>,
    /// The mount's budget the renderings streams keep between reads come out of; `None`: kept
    /// without limit (in-process use without a mount).
    budget: Option<Arc<MemoryBudget>>,
    /// Key streams recently opened (`by-key/`), shared by the lookups and opens of a name.
    key_streams: crate::bykey::KeyStreamCache,
    /// JSON streams show keys and values in the wire format decoded ([`crate::schemas`]).
    schemas: Option<Arc<crate::schemas::Schemas>>,
    /// How JSON streams show payloads that are JSON (`-o json_payload=`).
    json_payload: crate::render::JsonPayload,
    /// Streams hold only the records this filter keeps (`where/<filter>/`), with its text.
    filter: Option<(Arc<str>, Arc<crate::filter::Filter>)>,
    /// How the filter served each partition (see [`crate::filter::FilterStats`]).
    filter_stats: Mutex<HashMap<(String, u32), Arc<crate::filter::FilterStats>>>,
    /// The mount's field indexes: filtered streams skip the batches they rule out, and their
    /// opens start the builds of the fields they read ([`crate::field_index`]).
    field_indexes: Option<Arc<crate::field_index::FieldIndexes>>,
}

impl StreamRegistry {
    /// An empty registry showing committed records ([`Isolation::ReadCommitted`]).
    pub fn new() -> StreamRegistry {
        StreamRegistry::default()
    }

    /// An empty registry at `isolation`.
    pub fn with_isolation(isolation: Isolation) -> StreamRegistry {
        StreamRegistry::with_trackers(Arc::new(TxnTrackers::new(isolation)))
    }

    /// An empty registry keeping its partitions' transaction state in `txns`, at their
    /// isolation level: a mount passes the same trackers to its
    /// [`TopicViews`](crate::topic::TopicViews).
    pub fn with_trackers(txns: Arc<TxnTrackers>) -> StreamRegistry {
        StreamRegistry { txns, ..StreamRegistry::default() }
    }

    /// The transaction trackers of this registry's streams.
    pub fn trackers(&self) -> &Arc<TxnTrackers> {
        &self.txns
    }

    /// The same registry with every stream it opens keeping renderings only within `budget`.
    pub fn with_budget(mut self, budget: &Arc<MemoryBudget>) -> StreamRegistry {
        self.budget = Some(Arc::clone(budget));
        self
    }

    /// The same registry decoding keys and values with `schemas` in JSON streams.
    pub fn with_schemas(mut self, schemas: Option<Arc<crate::schemas::Schemas>>) -> StreamRegistry {
        self.schemas = schemas;
        self
    }

    /// The same registry showing payloads that are JSON as `payload` says in JSON streams.
    pub fn with_json_payload(mut self, payload: crate::render::JsonPayload) -> StreamRegistry {
        self.json_payload = payload;
        self
    }

    /// How JSON streams show payloads that are JSON.
    pub fn json_payload(&self) -> crate::render::JsonPayload {
        self.json_payload
    }

    /// What JSON streams show beyond the records' bytes (schemas, payloads as JSON).
    pub fn json_shown(&self) -> crate::render::JsonShown {
        crate::render::JsonShown { schemas: self.schemas.clone(), payload: self.json_payload }
    }

    /// The same registry with the mount's field indexes (see the field).
    pub fn with_field_indexes(
        mut self,
        indexes: Option<Arc<crate::field_index::FieldIndexes>>,
    ) -> StreamRegistry {
        self.field_indexes = indexes;
        self
    }

    /// The mount's field indexes, if any.
    pub fn field_indexes(&self) -> Option<&Arc<crate::field_index::FieldIndexes>> {
        self.field_indexes.as_ref()
    }

    /// The same registry opening streams of only the records `filter` (written `text`) keeps:
    /// a rendering of its own per (partition, format), never kept in the segment cache. A
    /// filtered stream has no raw form (a batch holds records the filter does not keep).
    pub fn with_filter(mut self, text: &str, filter: crate::filter::Filter) -> StreamRegistry {
        self.filter = Some((Arc::from(text), Arc::new(filter)));
        self
    }

    /// A registry like this one (its trackers, budget and schemas) opening streams of only the
    /// records `filter` (written `text`) keeps: what `where/<filter>/` reads through.
    pub fn filtered(&self, text: &str, filter: crate::filter::Filter) -> StreamRegistry {
        StreamRegistry {
            txns: Arc::clone(&self.txns),
            budget: self.budget.clone(),
            schemas: self.schemas.clone(),
            json_payload: self.json_payload,
            field_indexes: self.field_indexes.clone(),
            ..StreamRegistry::default()
        }
        .with_filter(text, filter)
    }

    /// The filter's text and how it served `topic`-`partition` so far (`None` when this
    /// registry has no filter).
    pub fn filter_stats(
        &self,
        topic: &str,
        partition: u32,
    ) -> Option<(Arc<str>, Arc<crate::filter::FilterStats>)> {
        let (text, _) = self.filter.as_ref()?;
        let key = (topic.to_string(), partition);
        let stats = Arc::clone(lock(&self.filter_stats).entry(key).or_default());
        Some((Arc::clone(text), stats))
    }

    /// The schemas JSON streams decode with, if any.
    pub fn schemas(&self) -> Option<&Arc<crate::schemas::Schemas>> {
        self.schemas.as_ref()
    }

    /// A render index of `part` in `format` from `start` (the log start when `None`), with this
    /// registry's tracker and schemas.
    fn new_index(
        &self,
        part: &dyn PartitionSource,
        tracked: &dyn PartitionSource,
        format: Format,
        start: Option<Offset>,
    ) -> Result<RenderIndex> {
        if self.filter.is_some() && format == Format::Raw {
            return Err(Error::InvalidInput(
                "a filtered stream has no raw form (a batch holds records the filter does not \
                 keep): use the value or .json form"
                    .into(),
            ));
        }
        let mut index = match start {
            Some(start) => RenderIndex::new_at(part, format, start)?,
            None => RenderIndex::new(part, format)?,
        };
        index.renderer = index
            .renderer
            .clone()
            .with_schemas(self.schemas.clone())
            .with_json_payload(self.json_payload);
        if let (Some((_, filter)), Some((text, stats))) =
            (&self.filter, self.filter_stats(part.topic(), part.partition()))
        {
            let renderer = index.renderer.clone();
            index.renderer = renderer
                .with_filter(text, Arc::clone(filter), stats)
                .with_field_indexes(self.field_indexes.clone());
        }
        index.txn = self.tracker(tracked);
        Ok(index)
    }

    /// The key streams recently opened (see [`crate::bykey::KeyStreamCache`]).
    pub fn key_streams(&self) -> &crate::bykey::KeyStreamCache {
        &self.key_streams
    }

    /// The isolation level of every stream this registry opens.
    pub fn isolation(&self) -> Isolation {
        self.txns.isolation()
    }

    /// The transaction tracker of `part` (see [`TxnTrackers::tracker`]).
    pub fn tracker(&self, part: &dyn PartitionSource) -> Option<Arc<TxnTracker>> {
        self.txns.tracker(part)
    }

    /// `part` as streams of this registry see it: through its tracker in `read_committed`
    /// (offsets resolve against the last stable offset).
    pub fn view(&self, part: Arc<dyn PartitionSource>) -> Arc<dyn PartitionSource> {
        match self.tracker(part.as_ref()) {
            Some(tracker) => Arc::new(CommittedPartition::new(part, tracker)),
            None => part,
        }
    }

    /// Resolves `spec` against `part` at `now` (epoch ms, the anchor of relative times) and
    /// opens the stream. Errors as [`StreamSpec::resolve`] does (`OffsetOutOfRange` for a start
    /// outside the log).
    pub fn open(
        &self,
        part: Arc<dyn PartitionSource>,
        spec: &StreamSpec,
        now: Timestamp,
    ) -> Result<Arc<Stream>> {
        if let (Some(indexes), Some((_, filter))) = (&self.field_indexes, &self.filter) {
            indexes.on_filtered_read(Arc::clone(&part), filter);
        }
        let view = self.view(Arc::clone(&part));
        let resolved = spec.resolve(view.as_ref(), now)?;
        let open = || {
            let index =
                self.index_for(part.as_ref(), view.as_ref(), spec.format, resolved.start)?;
            Stream::open(index, Arc::clone(&part), resolved.start, resolved.end)
        };
        // A cleaner pass ending between choosing the index and opening on it can leave the
        // start before the index's origin: the second choice sees it.
        let mut stream = match open() {
            Err(Error::StaleHandle) => open()?,
            other => other?,
        };
        stream.budget = self.budget.clone();
        Ok(Arc::new(stream))
    }

    /// The render index a stream of `part` (seen as `view`) starting at `start` is opened on:
    /// the shared one when it reaches `start` within the source's sizing budget (at most
    /// [`SIZED_AT_ONCE`]), else one with an origin at or before `start` that does (the most
    /// recent such), else a new one whose origin is `start` itself. So opening a stream never
    /// renders more than that of log, and never the records before its start that the shared
    /// index has not rendered yet.
    pub fn index_for(
        &self,
        part: &dyn PartitionSource,
        view: &dyn PartitionSource,
        format: Format,
        start: Offset,
    ) -> Result<Arc<RenderIndex>> {
        let budget = part.known().sizing_budget;
        let mut shared = self.index(part, format)?;
        if shared.origin_now(view)? > start {
            // A cleaner pass replaced segments the shared index had rendered: its origin moved
            // past records the log still holds (see "Compaction" in `view::render_index`).
            // Streams open on it keep it; new ones get a new shared index from the log start.
            shared = self.renew(part, format, &shared)?;
        }
        if shared.frontier() >= start {
            return Ok(shared);
        }
        let key = (part.topic().to_string(), part.partition(), format);
        let listed = lock(&self.origins).get(&key).cloned().unwrap_or_default();
        let mut candidate: Option<(Offset, Arc<RenderIndex>)> = None;
        for i in listed {
            let origin = i.origin_now(view)?;
            if origin <= start && candidate.as_ref().is_none_or(|(o, _)| origin >= *o) {
                candidate = Some((origin, i));
            }
        }
        let candidate = candidate.map(|(_, i)| i);
        // Already covered: no rendering at all (a lookup, `stat` and `open` of one name each
        // resolve it).
        if let Some(index) = candidate.as_ref().filter(|i| i.frontier() >= start) {
            return Ok(Arc::clone(index));
        }
        let budget = budget.min(SIZED_AT_ONCE);
        if shared.reaches(view, start, budget)? {
            return Ok(shared);
        }
        if let Some(index) = candidate {
            if index.reaches(view, start, budget)? {
                return Ok(index);
            }
        }
        let index = Arc::new(self.new_index(part, part, format, Some(start))?);
        let mut origins = lock(&self.origins);
        let list = origins.entry(key).or_default();
        list.push(Arc::clone(&index));
        if list.len() > MAX_ORIGINS {
            list.remove(0);
        }
        Ok(index)
    }

    /// [`RenderIndex::requests_waiting`] of the shared render index of `topic`-`partition` in
    /// `format` (0 before it exists): for tests and statistics.
    pub fn requests_waiting(&self, topic: &str, partition: u32, format: Format) -> usize {
        let key = (topic.to_string(), partition, format);
        lock(&self.indexes).get(&key).map_or(0, |index| index.requests_waiting())
    }

    /// Render indexes with an origin of their own kept for `part` in `format` (for tests and
    /// statistics).
    pub fn origin_indexes(&self, part: &dyn PartitionSource, format: Format) -> usize {
        let key = (part.topic().to_string(), part.partition(), format);
        lock(&self.origins).get(&key).map_or(0, Vec::len)
    }

    /// Sizes the shared render index of `part` in `format` to the log end in steps of `step`
    /// bytes of log (see [`RenderIndex::size_step`]) while `go()` says so: background sizing.
    /// Readers share the index, so what this renders is never rendered again by them, and a
    /// reader that needs more renders it itself (the index's lock orders them).
    pub fn size_in_background(
        &self,
        part: Arc<dyn PartitionSource>,
        format: Format,
        step: u64,
        go: &dyn Fn() -> bool,
    ) -> Result<bool> {
        let view = self.view(Arc::clone(&part));
        let index = self.index(part.as_ref(), format)?;
        while go() {
            if index.size_step(view.as_ref(), step)?.reached {
                return Ok(true);
            }
            std::thread::yield_now();
        }
        Ok(false)
    }

    /// Renders (counting only) the sealed span `span` of `part` in `format` on an index of its
    /// own whose origin is the span's start, in steps of `step` bytes of log while `go()` says
    /// so, so that the segment cache learns the span's rendering: the shared index (and every
    /// stream) then moves over the span without rendering it. Spans are independent, so
    /// background sizing summarizes several at once. Nothing is shared with readers but the
    /// cache. Whether it got through the span (the index is dropped either way).
    pub fn summarize_span(
        &self,
        part: Arc<dyn PartitionSource>,
        format: Format,
        span: &SealedSpan,
        step: u64,
        go: &dyn Fn() -> bool,
    ) -> Result<bool> {
        let view = self.view(Arc::clone(&part));
        let index = self.new_index(view.as_ref(), part.as_ref(), format, Some(span.base))?;
        if index.knows_span(view.as_ref(), span) {
            // Known from an earlier mount: nothing to render (and no jump over the cached
            // spans after it, which for every span of a remount would cost their square).
            return Ok(true);
        }
        while go() {
            if index.summarize_step(view.as_ref(), span.end.next_offset, step)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// A new shared render index of `part` in `format` in place of `old` (unless another
    /// caller replaced it already: then that one).
    fn renew(
        &self,
        part: &dyn PartitionSource,
        format: Format,
        old: &Arc<RenderIndex>,
    ) -> Result<Arc<RenderIndex>> {
        let key = (part.topic().to_string(), part.partition(), format);
        if let Some(index) = lock(&self.indexes).get(&key).filter(|i| !Arc::ptr_eq(i, old)) {
            return Ok(Arc::clone(index));
        }
        // Built outside the mount-wide lock (it asks the source), then checked again.
        let index = self.new_index(part, part, format, None)?;
        let mut indexes = lock(&self.indexes);
        match indexes.get(&key) {
            Some(current) if !Arc::ptr_eq(current, old) => Ok(Arc::clone(current)),
            _ => {
                let index = Arc::new(index);
                indexes.insert(key, Arc::clone(&index));
                Ok(index)
            }
        }
    }

    /// The render index of `part` in `format`, created (empty) on first use.
    ///
    /// **Invariant** (no I/O under the mount-wide lock): `indexes` is held only to look up and
    /// to insert. A new index is built (a `summary()` and a `seek()` of the source: a readdir
    /// or a ListOffsets) outside it, so a partition whose source stalls delays no other
    /// partition's open; two callers racing build one each and the first inserted is the one
    /// everybody uses (the other is dropped unused).
    pub fn index(&self, part: &dyn PartitionSource, format: Format) -> Result<Arc<RenderIndex>> {
        let key = (part.topic().to_string(), part.partition(), format);
        if let Some(index) = lock(&self.indexes).get(&key) {
            return Ok(Arc::clone(index));
        }
        let index = self.new_index(part, part, format, None)?;
        let mut indexes = lock(&self.indexes);
        let index = indexes.entry(key).or_insert_with(|| Arc::new(index));
        Ok(Arc::clone(index))
    }
}
