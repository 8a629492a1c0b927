//! A partition's segment files, for a source that has local ones ([`SegmentFiles`]).

use std::time::SystemTime;

use topicfs_format::{Offset, Timestamp};

use crate::cursor::ReadCursor;
use crate::error::Result;

#[cfg(doc)]
use super::PartitionSource;

/// One segment as listed under `segments/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentSummary {
    pub base_offset: Offset,
    /// Size of the `.log` file in bytes.
    pub log_size: u64,
    /// Current sizes of the index files (0 when the file does not exist).
    pub index_size: u64,
    pub time_index_size: u64,
    /// `None` when the segment has no `.txnindex`.
    pub txn_index_size: Option<u64>,
    /// Largest timestamp in the segment, if known.
    pub max_timestamp: Option<Timestamp>,
    /// Whether this is the active (last, appendable) segment.
    pub is_active: bool,
    pub last_modified: SystemTime,
}

/// The files of one segment.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SegmentFileKind {
    Log,
    Index,
    TimeIndex,
    TxnIndex,
}

impl SegmentFileKind {
    /// The file name suffix, with the dot (`.log`, `.index`, `.timeindex`, `.txnindex`).
    pub fn suffix(self) -> &'static str {
        match self {
            SegmentFileKind::Log => ".log",
            SegmentFileKind::Index => ".index",
            SegmentFileKind::TimeIndex => ".timeindex",
            SegmentFileKind::TxnIndex => ".txnindex",
        }
    }
}

/// A file of a partition that its source could not serve (for the partition's `check`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileProblem {
    /// The file's name in the partition directory.
    pub name: String,
    /// The byte position the problem starts at, if it is inside the file.
    pub position: Option<u64>,
    /// What is wrong, in a few words.
    pub what: String,
}

/// A partition's segment files: the local-only half of the partition interface, reached by
/// [`PartitionSource::segment_files`]. The filesystem shows `segments/`, the inspection files
/// (`check`, `.dump`) and passes sealed files through to the kernel only for a partition that
/// has them; a live cluster has none.
pub trait SegmentFiles: Send + Sync {
    /// Segments in base-offset order.
    fn segments(&self) -> Result<Vec<SegmentSummary>>;
    /// The segment whose base offset is `base_offset`, if any (what [`Self::segments`] lists
    /// for it).
    fn segment_summary(&self, base_offset: Offset) -> Result<Option<SegmentSummary>>;
    /// Reads the raw bytes of one segment file at `pos` (the preallocated zero tail of an active
    /// index is not shown: the file ends at its last valid entry).
    fn read_segment_file(
        &self,
        base_offset: Offset,
        kind: SegmentFileKind,
        pos: u64,
        buf: &mut [u8],
    ) -> Result<usize>;
    /// An open handle on one file of a sealed (not active) segment, when its bytes on disk are
    /// exactly what [`SegmentFiles::read_segment_file`] returns and will not change: the
    /// mount hands it to the kernel, which then reads it without asking (FUSE passthrough).
    /// `None` for the active segment and for a file whose on-disk size differs from the size
    /// shown (an index left untrimmed by a crash).
    fn sealed_segment_file(
        &self,
        base_offset: Offset,
        kind: SegmentFileKind,
    ) -> Result<Option<std::fs::File>>;
    /// Files of segment `base_offset` whose bytes on disk the source found damaged and serves
    /// repaired instead (an index rebuilt in memory from the `.log` on a read-only mount), as
    /// (file, byte position of the damage on disk, what is wrong there).
    fn repaired_segment_files(
        &self,
        base_offset: Offset,
    ) -> Result<Vec<(SegmentFileKind, u64, String)>>;
    /// Where the stored byte `delta` bytes after the batch start at `cursor` lies, as (a file
    /// name, a byte position in it), when the cursor's hint names a segment of this source;
    /// `None` otherwise (see `<dyn PartitionSource>::byte_location`).
    fn byte_location(&self, cursor: &ReadCursor, delta: u64) -> Option<(String, u64)>;
    /// Files the source could not serve at all or in part: names that are not regular files
    /// (refused unopened, see `storage::open`), bytes that are not batches after the last
    /// whole batch of the active segment.
    fn file_problems(&self) -> Result<Vec<FileProblem>>;
}
