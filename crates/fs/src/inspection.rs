//! Inspection: a partition's `segments/` (its segment files as stored, each with a `.dump` in
//! `kafka-dump-log.sh`'s words) and its `check` report (see [`topicfs_view::inspect`]). They
//! exist only for partitions whose source has segment files
//! ([`topicfs_source::PartitionSource::segment_files`]: a log dir's partitions; a cluster's have none).
//!
//! ```text
//! <topic>/<p>/segments/                    every segment's files, each with its dump
//! <topic>/<p>/segments/<base>.<ext>        the file as stored (a sealed one read from disk)
//! <topic>/<p>/segments/<base>.<ext>.dump   the file in kafka-dump-log.sh's words
//! <topic>/<p>/check                        the partition's check report
//! ```

use std::time::SystemTime;

use topicfs_format::Offset;
use topicfs_source::error::{Error, Result};
use topicfs_source::{SegmentFileKind, SegmentSummary};
use topicfs_view::inspect::{DUMP_SUFFIX, Inspection, InspectionReader, files};

use super::TopicFs;
use super::attr::{AttrReply, DYNAMIC_TTL, OpenRequest, Opened, SEALED_BLOCK_SIZE, STABLE_TTL};
use super::handle::{Handle, StreamRef};
use super::node::{
    FileNode, InspectDir, InspectFile, Node, PartitionId, parse_segment_file_name,
    segment_file_name,
};
use super::open::direct;
use super::subtree::{DirAttr, SubtreeDir, SubtreeFile};

/// Every kind of segment file, in listing order.
const KINDS: [SegmentFileKind; 4] = [
    SegmentFileKind::Log,
    SegmentFileKind::Index,
    SegmentFileKind::TimeIndex,
    SegmentFileKind::TxnIndex,
];

fn file(file: InspectFile) -> Node {
    Node::File(FileNode::Inspect(file))
}

impl SubtreeDir for InspectDir {
    fn child(&self, _fs: &TopicFs, name: &str) -> Result<Option<Node>> {
        let InspectDir::Segments(id) = self;
        Ok(match name.strip_suffix(DUMP_SUFFIX) {
            Some(name) => parse_segment_file_name(name)
                .map(|(base, kind)| file(InspectFile::Dump(id.clone(), base, kind))),
            None => parse_segment_file_name(name)
                .map(|(base, kind)| file(InspectFile::Segment(id.clone(), base, kind))),
        })
    }

    fn list(&self, fs: &TopicFs) -> Result<Vec<(String, Node)>> {
        let InspectDir::Segments(id) = self;
        let mut names = Vec::new();
        for segment in files(fs.partition(id)?.as_ref())?.segments()? {
            let base = segment.base_offset;
            for kind in KINDS {
                if segment_file_size(&segment, kind).is_some() {
                    let name = segment_file_name(base, kind);
                    let dump = file(InspectFile::Dump(id.clone(), base, kind));
                    names.push((format!("{name}{DUMP_SUFFIX}"), dump));
                    names.push((name, file(InspectFile::Segment(id.clone(), base, kind))));
                }
            }
        }
        Ok(names)
    }

    fn attr(&self, fs: &TopicFs) -> Result<DirAttr> {
        let InspectDir::Segments(id) = self;
        let mtime = fs.partition(id)?.last_modified()?;
        Ok(DirAttr { perm: fs.dir_perm(false), mtime, ttl: STABLE_TTL })
    }
}

impl SubtreeFile for InspectFile {
    fn mtime(&self, fs: &TopicFs) -> Result<SystemTime> {
        match self {
            InspectFile::Segment(id, base, _) | InspectFile::Dump(id, base, _) => {
                Ok(fs.segment(id, *base)?.last_modified)
            }
            InspectFile::Check(id) => fs.partition(id)?.last_modified(),
        }
    }

    fn is_stream(&self) -> bool {
        false
    }

    fn resolve(&self, _fs: &TopicFs) -> Result<StreamRef> {
        Err(Error::NotFound(format!("{} is not a stream", self.path())))
    }

    fn is_writable(&self) -> bool {
        false
    }

    fn attr(&self, fs: &TopicFs, ino: u64, _node: &Node) -> Result<AttrReply> {
        let perm = fs.read_only_perm();
        match self {
            InspectFile::Segment(id, base, kind) => {
                let segment = fs.segment(id, *base)?;
                let size = segment_file_size(&segment, *kind).ok_or_else(|| {
                    Error::NotFound(format!("{} has no {}", self.path(), kind.suffix()))
                })?;
                if segment.is_active {
                    return Ok(fs.file_reply(ino, size, perm, segment.last_modified, DYNAMIC_TTL));
                }
                let mut reply = fs.file_reply(ino, size, perm, segment.last_modified, STABLE_TTL);
                reply.attr.blksize = SEALED_BLOCK_SIZE;
                Ok(reply)
            }
            InspectFile::Dump(id, base, kind) => {
                let segment = fs.segment(id, *base)?;
                let partition = fs.partition(id)?;
                let size = fs.inspect.dump_size(&partition, *base, *kind)?;
                let ttl = if segment.is_active { DYNAMIC_TTL } else { STABLE_TTL };
                Ok(fs.file_reply(ino, size, perm, segment.last_modified, ttl))
            }
            InspectFile::Check(id) => {
                let mtime = fs.partition(id)?.last_modified()?;
                let size = fs.inspect.check_size(fs.partition(id)?.as_ref())?;
                Ok(fs.file_reply(ino, size, perm, mtime, DYNAMIC_TTL))
            }
        }
    }

    fn open(&self, fs: &TopicFs, _ino: u64, _node: &Node, request: OpenRequest) -> Result<Opened> {
        match self {
            InspectFile::Dump(..) | InspectFile::Check(_) => {
                fs.refuse_write(request, "writing an inspection file")?;
                let reader = InspectionReader::new(fs.inspection(self)?);
                Ok(direct(fs.handles.insert(Handle::Inspection(reader))))
            }
            InspectFile::Segment(id, base_offset, kind) => {
                fs.refuse_write(request, "writing a segment file")?;
                // Fails with NotFound once retention deleted the segment.
                let segment = fs.segment(id, *base_offset)?;
                if segment_file_size(&segment, *kind).is_none() {
                    let what = self.path();
                    return Err(Error::NotFound(format!("{what} has no {}", kind.suffix())));
                }
                let partition = fs.partition(id)?;
                // A sealed segment's files never change: the kernel may keep their pages and
                // read the file on disk itself. The active one's go through `read` (its index
                // has a zero tail that is not shown, its `.log` may end in a partial batch).
                let backing = if segment.is_active {
                    None
                } else {
                    files(partition.as_ref())?.sealed_segment_file(*base_offset, *kind)?
                };
                let handle = Handle::Segment { partition, base_offset: *base_offset, kind: *kind };
                let fh = fs.handles.insert(handle);
                Ok(match backing {
                    Some(file) => Opened {
                        fh,
                        direct_io: false,
                        keep_cache: true,
                        backing: Some(file),
                        no_flush: true,
                    },
                    None => direct(fh),
                })
            }
        }
    }
}

/// Size of one file of a segment; `None` when the segment has no such file.
fn segment_file_size(segment: &SegmentSummary, kind: SegmentFileKind) -> Option<u64> {
    match kind {
        SegmentFileKind::Log => Some(segment.log_size),
        SegmentFileKind::Index => Some(segment.index_size),
        SegmentFileKind::TimeIndex => Some(segment.time_index_size),
        SegmentFileKind::TxnIndex => segment.txn_index_size,
    }
}

impl TopicFs {
    /// A segment dump or a check report: rendered (a `.log` dump: counted) once per change of
    /// the segments it is of, and shared by every handle reading it.
    fn inspection(&self, file: &InspectFile) -> Result<Inspection> {
        match file {
            InspectFile::Dump(id, base, kind) => {
                self.inspect.dump(&self.partition(id)?, *base, *kind)
            }
            InspectFile::Check(id) => self.inspect.check(&self.partition(id)?),
            InspectFile::Segment(..) => {
                Err(Error::NotFound(format!("{} is not an inspection file", file.path())))
            }
        }
    }

    /// Whether the partition has segment files (`segments/` and `check` exist only then);
    /// `NotFound` for a partition that does not exist.
    pub(super) fn has_segment_files(&self, id: &PartitionId) -> Result<bool> {
        Ok(self.partition(id)?.segment_files().is_some())
    }

    /// The summary of the segment of `id` based at `base`; `NotFound` once it is gone.
    fn segment(&self, id: &PartitionId, base: Offset) -> Result<SegmentSummary> {
        files(self.partition(id)?.as_ref())?.segment_summary(base)?.ok_or_else(|| {
            Error::NotFound(format!("segment {base} of {}-{}", id.topic, id.partition))
        })
    }
}
