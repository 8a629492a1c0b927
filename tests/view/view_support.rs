//! An in-memory `PartitionSource` for view tests: segments of v2 batches built with
//! `encode_batch`, Kafka's offset and ListOffsets rules, retention, and counters of the bytes
//! handed to readers (to check that reads do not re-render the whole partition).

#![allow(dead_code)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use topicfs::error::{Error, Result};
use topicfs::format::{
    BatchSpec, Compression, NewRecord, Offset, Timestamp, decode_batch, encode_batch,
    parse_batch_info, peek_entry,
};
use topicfs::source::{
    AppendInfo, BatchChunk, ChunkStart, Committed, CursorHint, KeyIndex, Known, OffsetQuery,
    PartitionSource, PartitionSummary, ReadAnswer, ReadCursor, ReadMode, Records,
};
use topicfs::source::{SegmentFileKind, SegmentFiles, SegmentSummary};

/// The cursor at `pos` of the segment at `base` (the hint is (segment base, position), as the
/// log engine's).
pub fn cursor_at(base: Offset, pos: u64, next_offset: Offset) -> ReadCursor {
    ReadCursor { next_offset, hint: CursorHint::new(base.0, pos) }
}

pub struct Segment {
    pub base: Offset,
    pub bytes: Vec<u8>,
}

pub struct State {
    pub segments: Vec<Segment>,
    pub log_start: Offset,
    pub log_end: Offset,
    /// (offset, timestamp) of every record, in log order.
    pub timestamps: Vec<(Offset, Timestamp)>,
}

pub struct MemPartition {
    pub topic: String,
    pub partition: u32,
    /// A new segment is rolled when the active one reaches this size.
    pub segment_bytes: usize,
    /// Whether one `read` may return batches of several segments.
    pub span_segments: bool,
    pub state: Mutex<State>,
    /// Bytes returned by `read` so far.
    pub bytes_read: AtomicU64,
    /// What `sizing_budget` says (the interface's default unless set).
    pub sizing_budget: AtomicU64,
    /// The most bytes one `read` returned.
    pub largest_read: AtomicU64,
}

impl MemPartition {
    pub fn new(topic: &str, partition: u32, segment_bytes: usize) -> MemPartition {
        MemPartition {
            topic: topic.to_string(),
            partition,
            segment_bytes,
            span_segments: false,
            state: Mutex::new(State {
                segments: vec![Segment { base: Offset(0), bytes: Vec::new() }],
                log_start: Offset(0),
                log_end: Offset(0),
                timestamps: Vec::new(),
            }),
            bytes_read: AtomicU64::new(0),
            sizing_budget: AtomicU64::new(topicfs::source::DEFAULT_SIZING_BUDGET),
            largest_read: AtomicU64::new(0),
        }
    }

    /// Sets what `sizing_budget` says from now on.
    pub fn set_sizing_budget(&self, bytes: u64) {
        self.sizing_budget.store(bytes, Ordering::SeqCst);
    }

    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::SeqCst)
    }

    /// Appends one batch built from `spec` (its base offset is replaced by the log end offset).
    pub fn append_batch(&self, spec: &BatchSpec, records: &[NewRecord]) -> AppendInfo {
        let mut st = self.state.lock().unwrap();
        let base = st.log_end;
        let bytes =
            encode_batch(&BatchSpec { base_offset: base, ..spec.clone() }, records).unwrap();
        self.append_bytes(&mut st, bytes)
    }

    /// Appends stored bytes of one batch as they are (its offsets must be >= the log end).
    pub fn append_stored(&self, bytes: Vec<u8>) -> AppendInfo {
        let mut st = self.state.lock().unwrap();
        self.append_bytes(&mut st, bytes)
    }

    fn append_bytes(&self, st: &mut State, bytes: Vec<u8>) -> AppendInfo {
        let info = parse_batch_info(&bytes).unwrap();
        let active = st.segments.last().unwrap();
        if !active.bytes.is_empty() && active.bytes.len() + bytes.len() > self.segment_bytes {
            st.segments.push(Segment { base: info.base_offset, bytes: Vec::new() });
        }
        for r in decode_batch(&bytes).unwrap().records() {
            let r = r.unwrap();
            st.timestamps.push((r.offset, r.timestamp));
        }
        st.segments.last_mut().unwrap().bytes.extend_from_slice(&bytes);
        st.log_end = Offset(info.last_offset.0 + 1);
        AppendInfo { first_offset: info.base_offset, last_offset: info.last_offset, batches: 1 }
    }

    /// Deletes every segment whose successor starts at or below `offset` (retention) and moves
    /// the log start to the first remaining segment's base.
    pub fn delete_segments_below(&self, offset: Offset) {
        let mut st = self.state.lock().unwrap();
        while st.segments.len() > 1 && st.segments[1].base <= offset {
            st.segments.remove(0);
        }
        st.log_start = st.segments[0].base.max(st.log_start);
    }

    /// Every batch as (segment base, position, bytes), in log order.
    pub fn batches(&self) -> Vec<(Offset, u64, Vec<u8>)> {
        let st = self.state.lock().unwrap();
        let mut out = Vec::new();
        for seg in &st.segments {
            let mut pos = 0;
            while let Some(h) = peek_entry(&seg.bytes[pos..]).unwrap() {
                let len = h.total_size();
                out.push((seg.base, pos as u64, seg.bytes[pos..pos + len].to_vec()));
                pos += len;
            }
        }
        out
    }
}

impl PartitionSource for MemPartition {
    fn topic(&self) -> &str {
        &self.topic
    }

    fn known(&self) -> Known {
        Known {
            bounds: None,
            last_modified: None,
            rewrites: 0,
            sizing_budget: self.sizing_budget.load(Ordering::SeqCst),
        }
    }

    fn partition(&self) -> u32 {
        self.partition
    }

    fn summary(&self) -> Result<PartitionSummary> {
        let st = self.state.lock().unwrap();
        let size_bytes = Some(st.segments.iter().map(|s| s.bytes.len() as u64).sum());
        let (log_start_offset, log_end_offset) = (st.log_start, st.log_end);
        let segment_count = Some(st.segments.len());
        let live = st.timestamps.iter().filter(|(o, _)| *o >= log_start_offset);
        let first_timestamp = live.clone().next().map(|(_, t)| *t);
        let max_timestamp = live.map(|(_, t)| *t).max();
        Ok(PartitionSummary {
            log_start_offset,
            log_end_offset,
            segment_count,
            size_bytes,
            first_timestamp,
            max_timestamp,
            last_modified: SystemTime::UNIX_EPOCH,
        })
    }

    fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
        let summary = self.summary()?;
        let records: Vec<(Offset, Timestamp)> = self
            .state
            .lock()
            .unwrap()
            .timestamps
            .iter()
            .copied()
            .filter(|(o, _)| *o >= summary.log_start_offset)
            .collect();
        Ok(match query {
            OffsetQuery::Latest => summary.log_end_offset,
            OffsetQuery::Earliest => summary.log_start_offset,
            OffsetQuery::MaxTimestamp => match summary.max_timestamp {
                Some(max) => records.iter().find(|(_, t)| *t == max).unwrap().0,
                None => summary.log_end_offset,
            },
            OffsetQuery::Timestamp(t) => {
                records.iter().find(|(_, ts)| *ts >= t).map_or(summary.log_end_offset, |(o, _)| *o)
            }
        })
    }

    fn seek(&self, target: Offset) -> Result<ReadCursor> {
        // Under one lock: retention between the bounds and the walk would find a cursor past
        // `target` (the engine's seek is atomic the same way).
        let st = self.state.lock().unwrap();
        let (log_start, log_end) = (st.log_start, st.log_end);
        if target < log_start || target > log_end {
            return Err(Error::OffsetOutOfRange { requested: target, log_start, log_end });
        }
        let mut prev_next = log_start;
        for seg in &st.segments {
            let mut pos = 0;
            while pos < seg.bytes.len() {
                let info = parse_batch_info(&seg.bytes[pos..]).unwrap();
                if info.last_offset >= target {
                    return Ok(cursor_at(seg.base, pos as u64, prev_next));
                }
                prev_next = Offset(info.last_offset.0 + 1);
                pos += peek_entry(&seg.bytes[pos..]).unwrap().unwrap().total_size();
            }
        }
        let last = st.segments.last().unwrap();
        Ok(cursor_at(last.base, last.bytes.len() as u64, log_end))
    }

    /// Every mode reads whole batches (nothing here is damaged).
    fn read(&self, cursor: &ReadCursor, max_bytes: usize, _: ReadMode) -> Result<ReadAnswer> {
        self.read_batches(cursor, max_bytes).map(ReadAnswer::Batches)
    }

    fn holds(&self, cursor: &ReadCursor) -> Result<bool> {
        let st = self.state.lock().unwrap();
        Ok(match cursor.hint.get() {
            Some((base, _)) => st.segments.iter().any(|s| s.base.0 == base),
            None => cursor.next_offset >= st.log_start,
        })
    }

    fn append(&self, records: Records<'_>) -> Result<AppendInfo> {
        let Records::Owned(records) = records else {
            return Err(Error::Unsupported("borrowed records in the in-memory test partition"));
        };
        Ok(self.append_batch(&BatchSpec::default(), records))
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

    fn span_store(&self) -> Option<&dyn topicfs::source::SpanStore> {
        None
    }
}

impl MemPartition {
    /// Whole batches from `cursor` (see [`PartitionSource::read`]).
    pub fn read_batches(&self, cursor: &ReadCursor, max_bytes: usize) -> Result<BatchChunk> {
        let Some((base, pos)) = cursor.hint.get() else {
            return self.read_batches(&self.seek(cursor.next_offset)?, max_bytes);
        };
        let st = self.state.lock().unwrap();
        let Some(mut i) = st.segments.iter().position(|s| s.base == Offset(base)) else {
            // Deleted by retention since the cursor was made: as the engine, the place is
            // found again by offset unless its records are gone.
            let (log_start, log_end) = (st.log_start, st.log_end);
            drop(st);
            if cursor.next_offset < log_start {
                return Err(Error::OffsetOutOfRange {
                    requested: cursor.next_offset,
                    log_start,
                    log_end,
                });
            }
            return self.read_batches(&self.seek(cursor.next_offset)?, max_bytes);
        };
        let mut pos = pos as usize;
        let mut out = Vec::new();
        let mut starts = Vec::new();
        let mut next_offset = cursor.next_offset;
        loop {
            let seg = &st.segments[i];
            if pos >= seg.bytes.len() {
                if i + 1 < st.segments.len() && (out.is_empty() || self.span_segments) {
                    i += 1;
                    pos = 0;
                    continue;
                }
                break;
            }
            if starts
                .last()
                .is_none_or(|s: &ChunkStart| s.cursor.hint.get().unwrap().0 != seg.base.0)
            {
                starts.push(ChunkStart {
                    at: out.len(),
                    // A segment's base offset bounds every offset in it from below.
                    cursor: cursor_at(
                        seg.base,
                        pos as u64,
                        if pos == 0 { next_offset.max(seg.base) } else { next_offset },
                    ),
                    retention_boundary: pos == 0,
                });
            }
            let h = peek_entry(&seg.bytes[pos..]).unwrap().unwrap();
            let len = h.total_size();
            if !out.is_empty() && out.len() + len > max_bytes {
                break;
            }
            let info = parse_batch_info(&seg.bytes[pos..]).unwrap();
            out.extend_from_slice(&seg.bytes[pos..pos + len]);
            next_offset = Offset(info.last_offset.0 + 1);
            pos += len;
        }
        self.bytes_read.fetch_add(out.len() as u64, Ordering::SeqCst);
        self.largest_read.fetch_max(out.len() as u64, Ordering::SeqCst);
        let next = cursor_at(st.segments[i].base, pos as u64, next_offset);
        Ok(BatchChunk { bytes: out, starts, next: Some(next), crc_checked: false, skipped: None })
    }
}

impl SegmentFiles for MemPartition {
    fn segments(&self) -> Result<Vec<SegmentSummary>> {
        let st = self.state.lock().unwrap();
        let n = st.segments.len();
        Ok(st
            .segments
            .iter()
            .enumerate()
            .map(|(i, s)| SegmentSummary {
                base_offset: s.base,
                log_size: s.bytes.len() as u64,
                index_size: 0,
                time_index_size: 0,
                txn_index_size: None,
                max_timestamp: None,
                is_active: i + 1 == n,
                last_modified: SystemTime::UNIX_EPOCH,
            })
            .collect())
    }

    fn read_segment_file(
        &self,
        _base_offset: Offset,
        _kind: SegmentFileKind,
        _pos: u64,
        _buf: &mut [u8],
    ) -> Result<usize> {
        Err(Error::Unsupported("segment files of the in-memory test partition"))
    }

    fn byte_location(&self, _cursor: &ReadCursor, _delta: u64) -> Option<(String, u64)> {
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

    fn file_problems(&self) -> Result<Vec<topicfs::source::FileProblem>> {
        Ok(Vec::new())
    }
}

/// A record with this value (and key `k<value>`), timestamp `ts`.
pub fn rec(value: &str, ts: Timestamp) -> NewRecord {
    NewRecord {
        timestamp: ts,
        key: Some(format!("k{value}").into_bytes()),
        value: Some(value.as_bytes().to_vec()),
        headers: Vec::new(),
    }
}

/// A plain, uncompressed CreateTime batch spec.
pub fn plain() -> BatchSpec {
    BatchSpec::default()
}

/// A compressed batch spec.
pub fn compressed(c: Compression) -> BatchSpec {
    BatchSpec { compression: c, ..BatchSpec::default() }
}
