//! Test support: a partition whose sealed segments are served from memory, and the logs
//! the inspection tests dump and check.

use std::sync::Arc;
use std::time::SystemTime;

use topicfs_format::index_entry::TimestampOffset;
use topicfs_format::{BatchSpec, Compression, NewRecord, Offset, encode_batch};
use topicfs_source::error::{Error, Result};
use topicfs_source::{
    AppendInfo, Committed, DEFAULT_SIZING_BUDGET, KeyIndex, Known, OffsetQuery, PartitionSource,
    PartitionSummary, ReadAnswer, ReadCursor, ReadMode, Records,
};
use topicfs_source::{SegmentFileKind, SegmentFiles, SegmentSummary};

/// `count` sealed segments (base offsets 0, 1000, ...) served from memory with the same
/// files (only what the check and the dumps read), counting the reads of their files.
#[derive(Default)]
pub(super) struct Segments {
    pub(super) log: Vec<u8>,
    pub(super) index: Vec<u8>,
    pub(super) time_index: Vec<u8>,
    pub(super) count: i64,
    pub(super) reads: std::sync::atomic::AtomicUsize,
}

/// One sealed segment at base offset 0 with these files.
pub(super) fn segment_files(log: Vec<u8>, index: Vec<u8>, time_index: Vec<u8>) -> Segments {
    Segments { log, index, time_index, count: 1, ..Segments::default() }
}

impl PartitionSource for Segments {
    fn topic(&self) -> &str {
        "t"
    }
    fn partition(&self) -> u32 {
        0
    }
    fn summary(&self) -> Result<PartitionSummary> {
        Err(Error::Unsupported("summary"))
    }
    fn offset_for(&self, _: OffsetQuery) -> Result<Offset> {
        Err(Error::Unsupported("offset_for"))
    }
    fn seek(&self, _: Offset) -> Result<ReadCursor> {
        Err(Error::Unsupported("seek"))
    }
    fn known(&self) -> Known {
        Known {
            bounds: None,
            last_modified: None,
            rewrites: 0,
            sizing_budget: DEFAULT_SIZING_BUDGET,
        }
    }
    fn holds(&self, _: &ReadCursor) -> Result<bool> {
        Err(Error::Unsupported("holds"))
    }
    fn read(&self, _: &ReadCursor, _: usize, _: ReadMode) -> Result<ReadAnswer> {
        Err(Error::Unsupported("read"))
    }
    fn append(&self, _: Records<'_>) -> Result<AppendInfo> {
        Err(Error::ReadOnly)
    }
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    fn segment_files(&self) -> Option<&dyn SegmentFiles> {
        Some(self)
    }
    fn key_index(&self) -> Option<&dyn KeyIndex> {
        None
    }
    fn committed(&self) -> Committed<'_> {
        Committed::ByView(None)
    }

    fn span_store(&self) -> Option<&dyn topicfs_source::SpanStore> {
        None
    }
}

impl SegmentFiles for Segments {
    fn segments(&self) -> Result<Vec<SegmentSummary>> {
        Ok((0..self.count)
            .map(|i| SegmentSummary {
                base_offset: Offset(i * 1000),
                log_size: self.log.len() as u64,
                index_size: self.index.len() as u64,
                time_index_size: self.time_index.len() as u64,
                txn_index_size: None,
                max_timestamp: None,
                is_active: false,
                last_modified: SystemTime::UNIX_EPOCH,
            })
            .collect())
    }
    fn read_segment_file(
        &self,
        _: Offset,
        kind: SegmentFileKind,
        pos: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let file = match kind {
            SegmentFileKind::Log => &self.log,
            SegmentFileKind::Index => &self.index,
            SegmentFileKind::TimeIndex => &self.time_index,
            SegmentFileKind::TxnIndex => return Err(Error::NotFound("txnindex".into())),
        };
        let rest = file.get(pos as usize..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        Ok(n)
    }
    fn byte_location(&self, _: &ReadCursor, _: u64) -> Option<(String, u64)> {
        None
    }
    fn segment_summary(&self, base_offset: Offset) -> Result<Option<SegmentSummary>> {
        Ok(self.segments()?.into_iter().find(|s| s.base_offset == base_offset))
    }
    fn sealed_segment_file(&self, _: Offset, _: SegmentFileKind) -> Result<Option<std::fs::File>> {
        Ok(None)
    }
    fn repaired_segment_files(&self, _: Offset) -> Result<Vec<(SegmentFileKind, u64, String)>> {
        Ok(Vec::new())
    }
    fn file_problems(&self) -> Result<Vec<topicfs_source::FileProblem>> {
        Ok(Vec::new())
    }
}

/// Three batches of two records: offsets 0-1, 2-3, 4-5 (the last at 10, 20, 30 ms).
pub(super) fn three_batches() -> (Vec<u8>, Vec<u64>) {
    let mut log = Vec::new();
    let mut positions = Vec::new();
    for b in 0..3i64 {
        positions.push(log.len() as u64);
        let spec = BatchSpec { base_offset: Offset(2 * b), ..BatchSpec::default() };
        let record =
            |t| NewRecord { timestamp: t, value: Some(b"v".to_vec()), ..NewRecord::default() };
        log.extend(encode_batch(&spec, &[record(10 * b + 5), record(10 * b + 10)]).unwrap());
    }
    (log, positions)
}

pub(super) fn time_entry(timestamp: i64, relative: u32) -> Vec<u8> {
    TimestampOffset { timestamp, relative_offset: topicfs_format::RelativeOffset(relative) }
        .encode()
        .to_vec()
}

/// Twelve batches of 1 to 12 records (offsets 0-77; every third one gzip), the fifth
/// damaged (a flipped payload byte: CRC mismatch, records unreadable), then the first half
/// of another batch (an invalid tail).
pub(super) fn damaged_multi_batch_log() -> Vec<u8> {
    let mut log = Vec::new();
    let mut next = 0i64;
    for b in 0..12usize {
        let compression = if b % 3 == 2 { Compression::Gzip } else { Compression::None };
        let spec = BatchSpec { base_offset: Offset(next), compression, ..BatchSpec::default() };
        let records: Vec<NewRecord> = (0..=b)
            .map(|r| NewRecord {
                timestamp: 1_700_000_000_000 + (10 * b + r) as i64,
                key: (r % 2 == 0).then(|| format!("k{r}").into_bytes()),
                value: Some(format!("value {b}.{r} {}", "x".repeat(r * 7)).into_bytes()),
                ..NewRecord::default()
            })
            .collect();
        let mut batch = encode_batch(&spec, &records).unwrap();
        if b == 4 {
            let last = batch.len() - 2;
            batch[last] ^= 0x20;
        }
        log.extend(batch);
        next += records.len() as i64;
    }
    let spec = BatchSpec { base_offset: Offset(next), ..BatchSpec::default() };
    let tail = encode_batch(&spec, &[NewRecord::default()]).unwrap();
    log.extend_from_slice(&tail[..tail.len() / 2]);
    log
}

pub(super) fn one_segment(log: Vec<u8>) -> Arc<dyn PartitionSource> {
    Arc::new(segment_files(log, Vec::new(), Vec::new()))
}
