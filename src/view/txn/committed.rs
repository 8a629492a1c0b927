//! A partition as a `read_committed` consumer sees its offsets.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{NewRecord, Offset};
use crate::source::{
    AbortedTxn, AppendInfo, BatchChunk, BoundaryTxnState, KeyIndex, OffsetQuery, PartitionSource,
    PartitionSummary, ReadCursor, SpanStore,
};
use crate::storage::segment_files::SegmentFiles;

use super::TxnTracker;

/// A partition as a `read_committed` consumer sees its offsets: the log end offset is the last
/// stable offset (see the module docs). Batches are read as stored; the stream walker cuts them
/// at the stable offset and hides aborted records. The transaction scan reads the inner source
/// (so its header-only reads), never this wrapper, which keeps the default
/// [`PartitionSource::read_heads_past_damage`] (whole batches).
pub struct CommittedPartition {
    inner: Arc<dyn PartitionSource>,
    tracker: Arc<TxnTracker>,
}

impl CommittedPartition {
    /// `inner` seen through `tracker` (which must be `inner`'s).
    pub fn new(inner: Arc<dyn PartitionSource>, tracker: Arc<TxnTracker>) -> CommittedPartition {
        CommittedPartition { inner, tracker }
    }

    fn stable(&self) -> Result<Offset> {
        Ok(self.tracker.refresh(self.inner.as_ref())?.stable)
    }
}

impl PartitionSource for CommittedPartition {
    fn topic(&self) -> &str {
        self.inner.topic()
    }

    fn partition(&self) -> u32 {
        self.inner.partition()
    }

    fn summary(&self) -> Result<PartitionSummary> {
        let mut summary = self.inner.summary()?;
        let stable = self.stable()?;
        summary.log_end_offset = summary.log_end_offset.min(stable).max(summary.log_start_offset);
        Ok(summary)
    }

    fn last_modified(&self) -> Result<std::time::SystemTime> {
        self.inner.last_modified()
    }

    fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
        let summary = self.summary()?;
        match query {
            OffsetQuery::Latest => Ok(summary.log_end_offset),
            OffsetQuery::Earliest => self.inner.offset_for(query),
            OffsetQuery::MaxTimestamp | OffsetQuery::Timestamp(_) => {
                Ok(self.inner.offset_for(query)?.min(summary.log_end_offset))
            }
        }
    }

    fn seek(&self, target: Offset) -> Result<ReadCursor> {
        let summary = self.summary()?;
        if target > summary.log_end_offset {
            return Err(Error::OffsetOutOfRange {
                requested: target,
                log_start: summary.log_start_offset,
                log_end: summary.log_end_offset,
            });
        }
        self.inner.seek(target)
    }

    fn read(&self, cursor: &ReadCursor, max_bytes: usize) -> Result<BatchChunk> {
        self.inner.read(cursor, max_bytes)
    }

    fn read_past_damage(&self, cursor: &ReadCursor, max_bytes: usize) -> Result<BatchChunk> {
        self.inner.read_past_damage(cursor, max_bytes)
    }

    fn byte_location(&self, cursor: &ReadCursor, delta: u64) -> (String, u64) {
        self.inner.byte_location(cursor, delta)
    }

    fn holds(&self, cursor: &ReadCursor) -> Result<bool> {
        self.inner.holds(cursor)
    }

    fn rewrites(&self) -> u64 {
        self.inner.rewrites()
    }

    fn aborted_transactions(&self, from: Offset, to: Offset) -> Result<Vec<AbortedTxn>> {
        self.inner.aborted_transactions(from, to)
    }

    fn txn_state_at_boundary(&self) -> Result<Option<BoundaryTxnState>> {
        self.inner.txn_state_at_boundary()
    }

    fn append(&self, records: &[NewRecord]) -> Result<AppendInfo> {
        self.inner.append(records)
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn sizing_budget(&self) -> u64 {
        self.inner.sizing_budget()
    }

    fn segment_files(&self) -> Option<&dyn SegmentFiles> {
        self.inner.segment_files()
    }

    fn key_index(&self) -> Option<&dyn KeyIndex> {
        self.inner.key_index()
    }

    fn span_store(&self) -> Option<&dyn SpanStore> {
        self.inner.span_store()
    }
}
