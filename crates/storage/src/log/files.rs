//! The local-only [`topicfs_source::SegmentFiles`] side of a log: what
//! `segments/` lists, the raw bytes of segment files, and the file problems `check` reports.

use super::*;

/// What `segments/` shows of one segment (a `stat` of its `.txnindex` while it is active).
pub fn segment_summary(seg: &LogSegment) -> Result<SegmentSummary> {
    let txn = seg.txn_index_size();
    Ok(SegmentSummary {
        base_offset: seg.base_offset(),
        log_size: seg.size(),
        index_size: seg.index_file_size(false)?,
        time_index_size: seg.index_file_size(true)?,
        txn_index_size: txn,
        max_timestamp: seg.max_timestamp_so_far()?.map(|(ts, _)| ts),
        is_active: seg.is_active(),
        last_modified: seg.last_modified(),
    })
}

impl Log {
    /// Segments in base-offset order, as listed under `segments/`.
    pub fn segment_summaries(&self) -> Result<Vec<SegmentSummary>> {
        self.maybe_refresh()?;
        // The sealed segments' summaries are kept while the map is unchanged: a `stat` of each
        // segment's `.txnindex` made every lookup in `segments/` cost a system call per segment.
        let view = self.segments.read();
        let Some(last) = view.last() else { return Ok(Vec::new()) };
        let sealed = view.sealed_summaries(segment_summary)?;
        let mut out = Vec::with_capacity(view.len());
        out.extend_from_slice(&sealed);
        out.push(segment_summary(last)?);
        Ok(out)
    }

    /// What the log could not serve from its directory's files, for the partition's `check`:
    /// every segment-file name that is not a regular file (never opened), and an active
    /// segment whose bytes after its last whole batch do not even start like one (a `.log` of
    /// text, say; a broker's half-written batch is not reported).
    pub fn file_problems(&self) -> Result<Vec<FileProblem>> {
        self.maybe_refresh()?;
        let mut out: Vec<FileProblem> = lock(&self.listing.refused)
            .iter()
            .map(|r| FileProblem {
                name: r.name.clone(),
                position: None,
                what: format!("refused: a {}, not a regular file (not opened)", r.found),
            })
            .collect();
        let Some(active) = self.segments.last() else { return Ok(out) };
        let path = active.log_path();
        let on_disk = match std::fs::metadata(path) {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(Error::io(path, "stat", e)),
        };
        let end = active.size();
        if on_disk > end {
            let mut head = [0u8; topicfs_format::HEADER_SIZE_UP_TO_MAGIC];
            let n = active.read_log_bytes_on_disk(end, &mut head)?;
            let not_a_batch = match topicfs_format::peek_entry(head.get(..n).unwrap_or_default()) {
                Err(e) => Some(e.to_string()),
                Ok(Some(h)) if !(0..=2).contains(&h.magic) => Some(format!("magic {}", h.magic)),
                Ok(_) => None,
            };
            if let Some(why) = not_a_batch {
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
                out.push(FileProblem {
                    name: name.unwrap_or_default(),
                    position: Some(end),
                    what: format!(
                        "{} bytes that are not record batches ({why}); not shown",
                        on_disk - end
                    ),
                });
            }
        }
        Ok(out)
    }

    /// Raw bytes of one segment file at `pos`; index files end at their last valid entry.
    pub fn read_segment_file(
        &self,
        base_offset: Offset,
        kind: SegmentFileKind,
        pos: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        let seg = self.segment(base_offset).ok_or_else(|| {
            Error::NotFound(format!("segment {base_offset} of {}", self.dir.display()))
        })?;
        match kind {
            SegmentFileKind::Log => seg.read_log_bytes(pos, buf),
            SegmentFileKind::Index => seg.read_index_bytes(false, pos, buf),
            SegmentFileKind::TimeIndex => seg.read_index_bytes(true, pos, buf),
            SegmentFileKind::TxnIndex => {
                let path = seg.file_path(".txnindex");
                let file = crate::open::open_read(&path).map_err(|e| {
                    if crate::open::is_not_found(&e) {
                        Error::NotFound(path.display().to_string())
                    } else {
                        e
                    }
                })?;
                read_fully_at(&file, buf, pos).map_err(|e| Error::io(&path, "read", e))
            }
        }
    }
}
