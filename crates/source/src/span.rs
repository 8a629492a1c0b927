//! What is learned about spans of the log, kept across remounts ([`SpanStore`]).

use topicfs_format::Offset;

use crate::cursor::ReadCursor;

#[cfg(doc)]
use super::PartitionSource;

/// A sealed part of the log (a sealed segment locally): its batches never change while it
/// exists, so what is learned about them can be kept across remounts ([`SpanStore::load`]).
/// Made by the source; the view copies its cursors.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SealedSpan {
    /// The span's name: the base offset of its segment.
    pub base: Offset,
    /// The cursor at its first batch.
    pub start: ReadCursor,
    /// The cursor after its last batch (the source's place of its end; `next_offset` is the
    /// last offset it holds plus one).
    pub end: ReadCursor,
    /// Its stored bytes.
    pub bytes: u64,
}

/// A kind of payload kept per span in a [`SpanStore`], named by its user (the render index,
/// the transaction tracker, the key index each define theirs next to their payload's
/// encoding). The store knows nothing of a kind but its names and tags: a store keeps at most
/// one payload per (span, kind), and the payload's encoding is the user's.
///
/// **Invariant**: names and tags are unique among the kinds of one program and never change
/// meaning (a store may keep payloads across versions of the program, and a kind's tag is
/// recorded with its payloads, so a payload of another kind under the same name is refused).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpanKind {
    /// The user's name of its payloads (a local store's entry file extension for a sealed span).
    pub name: &'static str,
    /// The kind's number, recorded with each payload of a sealed span.
    pub tag: u8,
    /// The name and tag of the kind's payloads for the stable prefix of the part of the log
    /// still being written ([`SpanStore::prefix_span_at`]); `None`: the kind is kept for sealed
    /// spans only.
    pub prefix: Option<(&'static str, u8)>,
    /// Whether a source that owns its log keeps this kind's payloads with the log itself, so
    /// that every later reader of the log finds them whatever else it keeps (the engine: beside
    /// the segment in the partition directory, see `storage::cache`), rather than only in a
    /// store of the reader's own (the segment cache dir). For payloads that are small against
    /// their span and that a reader needs first (rendered sizes, transaction events); `false`
    /// for large ones (key indexes), which stay within the bounded store.
    pub with_the_log: bool,
}

/// What [`SpanStore::update`] does with a kept payload: given the valid payload (if any), the
/// new payload (`None`: leave it).
pub type SummaryUpdate = Box<dyn FnOnce(Option<Vec<u8>>) -> Option<Vec<u8>> + Send>;

/// Bytes a user of a [`SpanStore`] moves past the end of the stable prefix it last stored (or
/// took from the store) before it stores the prefix again: the render index counts rendered
/// bytes, the transaction tracker scanned bytes.
pub const PREFIX_STORE_EVERY: u64 = 64 << 20;

/// Where what is learned about spans of the log is kept across remounts, for a source that
/// keeps it ([`PartitionSource::span_store`]; the log engine keeps it in its segment cache).
/// Two forms of span: a *sealed* span (a sealed segment), whose batches never change while it
/// exists, and the *stable prefix* of the part still being written (the active segment's bytes
/// below a batch boundary already passed), kept while the source still holds those bytes
/// unchanged. A payload is the user's encoding, checked by the store only for integrity and
/// against the span's bytes: decode it like bytes from disk. Nothing here ever fails: a payload
/// the store cannot keep is learned again later.
pub trait SpanStore: Send + Sync {
    /// Whether anything learned is kept across remounts at all (the engine: a segment cache
    /// dir is set); `false`: every other method keeps and finds nothing.
    fn keeps_summaries(&self) -> bool {
        true
    }
    /// The sealed span whose first batch is the next one read from `cursor` (the cursor is at
    /// the span's start, or at the end of the sealed span before it), if any.
    fn sealed_span_at(&self, cursor: &ReadCursor) -> Option<SealedSpan>;
    /// What was kept as `kind` for `span` (in this or an earlier mount), if it is still valid
    /// for the span's bytes.
    fn load(&self, span: &SealedSpan, kind: SpanKind) -> Option<Vec<u8>>;
    /// Replaces what is kept as `kind` for `span` by what `update` makes of it (`None`: keep it
    /// as it is), later, on another thread; updates of one store run one at a time, so two
    /// callers merging into one payload do not lose each other's part.
    fn update(&self, span: &SealedSpan, kind: SpanKind, update: SummaryUpdate);
    /// The stable prefix of the part of the log still being written whose first batch is the
    /// next one read from `cursor`: the span of that prefix (`end` is a batch boundary) and the
    /// `kind` payload (encoded as for a sealed span) kept for exactly that span by
    /// [`SpanStore::update_prefix`], if still valid. `None` otherwise, and for a kind without
    /// [`SpanKind::prefix`].
    fn prefix_span_at(&self, cursor: &ReadCursor, kind: SpanKind) -> Option<(SealedSpan, Vec<u8>)>;
    /// Like [`SpanStore::update`] for the prefix of the part still being written from `start`
    /// (its first batch, a cursor at a span start) to `end` (a batch boundary the caller got
    /// to); a payload kept for a prefix of another length is not handed to `update`. Nothing
    /// when `start` and `end` do not delimit such a prefix, or the kind has no
    /// [`SpanKind::prefix`].
    fn update_prefix(
        &self,
        start: &ReadCursor,
        end: &ReadCursor,
        kind: SpanKind,
        update: SummaryUpdate,
    );
}
