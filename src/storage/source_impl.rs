//! The log engine behind the filesystem's narrow interface: [`TopicSource`] for a [`LogDir`],
//! [`PartitionSource`] for a [`Log`]. Each method forwards to the engine method of the same
//! meaning; the semantics are documented there and in [`crate::source`].

use std::sync::Arc;

use crate::error::Result;
use crate::format::{NewRecord, Offset};
use crate::source::{
    AbortedTxn, AppendInfo, BatchChunk, OffsetQuery, PartitionSource, PartitionSummary, ReadCursor,
    SegmentFileKind, SegmentSummary, TopicSource,
};

use super::log::Log;
use super::log_dir::LogDir;

impl PartitionSource for Log {
    fn topic(&self) -> &str {
        Log::topic(self)
    }

    fn partition(&self) -> u32 {
        Log::partition(self)
    }

    fn summary(&self) -> Result<PartitionSummary> {
        Log::summary(self)
    }

    fn segments(&self) -> Result<Vec<SegmentSummary>> {
        self.segment_summaries()
    }

    fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
        Log::offset_for(self, query)
    }

    fn seek(&self, target: Offset) -> Result<ReadCursor> {
        Log::seek(self, target)
    }

    fn read(&self, cursor: &ReadCursor, max_bytes: usize) -> Result<BatchChunk> {
        Log::read(self, cursor, max_bytes)
    }

    fn aborted_transactions(&self, from: Offset, to: Offset) -> Result<Vec<AbortedTxn>> {
        Log::aborted_transactions(self, from, to)
    }

    fn append(&self, records: &[NewRecord]) -> Result<AppendInfo> {
        Log::append(self, records)
    }

    fn sync(&self) -> Result<()> {
        Log::sync(self)
    }

    fn read_segment_file(
        &self,
        base_offset: Offset,
        kind: SegmentFileKind,
        pos: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        Log::read_segment_file(self, base_offset, kind, pos, buf)
    }
}

impl TopicSource for LogDir {
    fn topics(&self) -> Result<Vec<String>> {
        Ok(self.topic_names())
    }

    fn partitions(&self, topic: &str) -> Result<Vec<u32>> {
        self.partition_numbers(topic)
    }

    fn partition(&self, topic: &str, partition: u32) -> Result<Arc<dyn PartitionSource>> {
        let log: Arc<dyn PartitionSource> = self.log(topic, partition)?;
        Ok(log)
    }

    fn create_topic(&self, topic: &str, partitions: u32) -> Result<()> {
        LogDir::create_topic(self, topic, partitions)
    }

    fn create_partition(&self, topic: &str, partition: u32) -> Result<()> {
        LogDir::create_partition(self, topic, partition)
    }

    fn is_read_only(&self) -> bool {
        LogDir::is_read_only(self)
    }

    fn shutdown(&self) -> Result<()> {
        LogDir::shutdown(self)
    }
}
