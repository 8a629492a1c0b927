//! A partition as a `read_committed` consumer sees its offsets.

use std::sync::Arc;

use topicfs_format::Offset;
use topicfs_source::error::{Error, Result};
use topicfs_source::{
    AppendInfo, Committed, KeyIndex, Known, OffsetQuery, PartitionSource, PartitionSummary,
    ReadAnswer, ReadCursor, ReadMode, Records, SegmentFiles, SpanStore,
};

use super::TxnTracker;

/// A partition as a `read_committed` consumer sees its offsets: the log end offset is the last
/// stable offset (see the module docs). Batches are read as stored; the stream walker cuts them
/// at the stable offset and hides aborted records. The transaction scan reads the inner source,
/// never this wrapper. Every method says what it does with the inner source's: most forward
/// it, the bounds are cut at the stable offset, and the bounds the inner source states without
/// asking are not stated (they may lie past the stable offset).
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

    /// The inner source's, without the bounds it states: its end may lie past the stable
    /// offset, so a reader asks [`CommittedPartition::summary`].
    fn known(&self) -> Known {
        Known { bounds: None, ..self.inner.known() }
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

    fn holds(&self, cursor: &ReadCursor) -> Result<bool> {
        self.inner.holds(cursor)
    }

    /// The batches as stored: the stream walker cuts them at the stable offset and hides
    /// aborted records.
    fn read(&self, cursor: &ReadCursor, max_bytes: usize, mode: ReadMode) -> Result<ReadAnswer> {
        self.inner.read(cursor, max_bytes, mode)
    }

    fn append(&self, records: Records<'_>) -> Result<AppendInfo> {
        self.inner.append(records)
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn segment_files(&self) -> Option<&dyn SegmentFiles> {
        self.inner.segment_files()
    }

    fn key_index(&self) -> Option<&dyn KeyIndex> {
        self.inner.key_index()
    }

    fn committed(&self) -> Committed<'_> {
        self.inner.committed()
    }

    fn span_store(&self) -> Option<&dyn SpanStore> {
        self.inner.span_store()
    }
}
