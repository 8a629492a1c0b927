//! The log engine behind the filesystem's narrow interface: [`TopicSource`] for a [`LogDir`],
//! [`PartitionSource`] for a [`Log`]. Each method forwards to the engine method of the same
//! meaning; the semantics are documented there and in [`crate::source`].

use std::fs::File;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{NewRecord, Offset, RecordRef};
use crate::source::{
    AbortedTxn, AppendInfo, BatchChunk, OffsetQuery, PartitionSource, PartitionSummary, ReadCursor,
    SegmentFileKind, SegmentSummary, SpaceStats, TopicSource,
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

    fn segment_summary(&self, base_offset: Offset) -> Result<Option<SegmentSummary>> {
        self.maybe_refresh()?;
        self.segment(base_offset).map(|seg| super::log::segment_summary(&seg)).transpose()
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

    fn append_refs(&self, records: &[RecordRef<'_>]) -> Result<AppendInfo> {
        Log::append_refs(self, records)
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

    fn sealed_segment_file(
        &self,
        base_offset: Offset,
        kind: SegmentFileKind,
    ) -> Result<Option<File>> {
        let segment = self.segment(base_offset).ok_or_else(|| {
            Error::NotFound(format!("segment {base_offset} of {}", self.dir().display()))
        })?;
        if segment.is_active() {
            return Ok(None);
        }
        let path = segment.file_path(kind.suffix());
        let file = File::open(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::NotFound(path.display().to_string()),
            _ => Error::io(&path, "open", e),
        })?;
        let on_disk = file.metadata().map_err(|e| Error::io(&path, "stat", e))?.len();
        // What `read_segment_file` shows: the `.log` up to its committed size, an index up to its
        // last entry (a roll trims a sealed index, but a crash can leave its zero tail).
        let shown = match kind {
            SegmentFileKind::Log => segment.size(),
            SegmentFileKind::Index => segment.index_file_size(false)?,
            SegmentFileKind::TimeIndex => segment.index_file_size(true)?,
            SegmentFileKind::TxnIndex => on_disk,
        };
        Ok((on_disk == shown).then_some(file))
    }

    fn repaired_segment_files(
        &self,
        base_offset: Offset,
    ) -> Result<Vec<(SegmentFileKind, u64, String)>> {
        let segment = self.segment(base_offset).ok_or_else(|| {
            Error::NotFound(format!("segment {base_offset} of {}", self.dir().display()))
        })?;
        Ok(segment
            .index_repairs()?
            .into_iter()
            .map(|r| {
                let kind = if r.time { SegmentFileKind::TimeIndex } else { SegmentFileKind::Index };
                (kind, r.position, r.what)
            })
            .collect())
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

    fn space(&self) -> Result<SpaceStats> {
        let path = self.path();
        let st = nix::sys::statvfs::statvfs(path)
            .map_err(|e| Error::io(path, "statvfs", std::io::Error::from(e)))?;
        Ok(SpaceStats {
            block_size: u32::try_from(st.block_size()).unwrap_or(u32::MAX),
            fragment_size: u32::try_from(st.fragment_size()).unwrap_or(u32::MAX),
            blocks: st.blocks(),
            blocks_free: st.blocks_free(),
            blocks_available: st.blocks_available(),
            files: st.files(),
            files_free: st.files_free(),
        })
    }
}
