//! The log cleaner's files in flight, seen the way Kafka's loader sees them but without changing
//! anything (read-only mode; a broker may be mid-swap).
//!
//! Kafka's cleaner writes a compacted replacement of a group of segments as `<base>.log.cleaned`
//! (plus indexes), renames it `.swap` when complete, renames the originals `.deleted`, then drops
//! the `.swap` suffix. A segment split (index-offset overflow) uses the same protocol. After a
//! crash, `LogLoader` deletes `.deleted` and `.cleaned` files, deletes `.swap` files at or above
//! the smallest `.cleaned` base offset (an unfinished split, KAFKA-6264), and finishes the other
//! swaps: the originals whose base offsets lie in `[minSwapBase, maxSwapNext)` are deleted and
//! the `.swap` suffixes dropped.
//!
//! [`read_only_segment_files`] makes the same decisions in memory: the result names, for every
//! offset range, exactly one file set, so a finished compaction whose final renames have not
//! happened yet shows the compacted data, once, and never the originals beside it.

use std::path::Path;

use topicfs_format::Offset;
use topicfs_format::file_name::{FileKind, FileState, SegmentFileName};
use topicfs_source::error::{Error, Result};

use super::scan::ChunkReader;

/// One segment a log is made of: its base offset and whether its files still carry `.swap`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SegmentFiles {
    /// The segment's base offset.
    pub base_offset: Offset,
    /// Whether the segment is a finished compaction's output not yet renamed (`.log.swap`).
    pub swap: bool,
}

/// Next offset of a `.log` (or `.log.swap`) file whose base offset is `base`: last offset of its
/// last whole batch plus one, by a header scan; `base` when it holds no batch (Kafka's
/// `readNextOffset` on a swap segment).
pub fn next_offset_of_log_file(path: &Path, base: Offset) -> Result<Offset> {
    let file = super::open::open_read(path)?;
    let len = file.metadata().map_err(|e| Error::io(path, "stat", e))?.len();
    let mut reader = ChunkReader::new(&file, path, len);
    let (mut next, mut pos) = (base, 0);
    while let Some(batch) = reader.batch_at(pos)? {
        next = batch.info.last_offset.plus(1);
        pos = batch.end();
    }
    Ok(next)
}

/// The segments of the partition directory `dir`, whose segment file names are `files`, as
/// Kafka's loader would leave them (passes 1 and 2 of `LogLoader`), decided without renaming or
/// deleting anything: `.deleted` and `.cleaned` files are ignored, and so are `.swap` files
/// at or above the smallest `.cleaned` base offset; each remaining `.log.swap` is a segment in
/// place of the `.log` files whose base offsets lie in `[minSwapBase, maxSwapNext)`. Sorted by
/// base offset.
pub fn read_only_segment_files(dir: &Path, files: &[SegmentFileName]) -> Result<Vec<SegmentFiles>> {
    let min_cleaned =
        files.iter().filter(|f| f.state == Some(FileState::Cleaned)).map(|f| f.base_offset).min();
    let swap_logs: Vec<Offset> = files
        .iter()
        .filter(|f| f.kind == FileKind::Log && f.state == Some(FileState::Swap))
        .map(|f| f.base_offset)
        .filter(|base| min_cleaned.is_none_or(|m| *base < m))
        .collect();
    let mut out: Vec<SegmentFiles> =
        swap_logs.iter().map(|&base_offset| SegmentFiles { base_offset, swap: true }).collect();
    let mut replaced: Option<(Offset, Offset)> = None;
    for &base in &swap_logs {
        let name =
            format!("{}.swap", topicfs_format::file_name::segment_file_name(base, FileKind::Log));
        let next = next_offset_of_log_file(&dir.join(name), base)?;
        replaced = Some(match replaced {
            None => (base, next),
            Some((min, max)) => (min.min(base), max.max(next)),
        });
    }
    if let Some((min, max)) = replaced {
        log::debug!(
            "{}: serving the cleaner's .swap files for offsets {min}..{max} in place of the \
             segments they replace",
            dir.display()
        );
    }
    out.extend(
        files
            .iter()
            .filter(|f| f.kind == FileKind::Log && f.state.is_none())
            // A `.swap` renamed over a `.log` of the same name replaces it even when its range
            // is empty (every record compacted away).
            .filter(|f| !swap_logs.contains(&f.base_offset))
            .filter(|f| {
                replaced.is_none_or(|(min, max)| f.base_offset < min || f.base_offset >= max)
            })
            .map(|f| SegmentFiles { base_offset: f.base_offset, swap: false }),
    );
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use topicfs_format::file_name::parse_segment_file_name;

    fn files(names: &[&str]) -> Vec<SegmentFileName> {
        names.iter().map(|n| parse_segment_file_name(n).unwrap()).collect()
    }

    fn seg(base: i64, swap: bool) -> SegmentFiles {
        SegmentFiles { base_offset: Offset(base), swap }
    }

    #[test]
    fn an_empty_swap_replaces_the_segment_of_its_own_name() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("00000000000000000005.log.swap"), b"").unwrap();
        let names = files(&[
            "00000000000000000000.log",
            "00000000000000000005.log",
            "00000000000000000005.log.swap",
            "00000000000000000009.log",
        ]);
        let got = read_only_segment_files(tmp.path(), &names).unwrap();
        assert_eq!(got, [seg(0, false), seg(5, true), seg(9, false)]);
    }

    #[test]
    fn deleted_and_cleaned_files_are_never_segments() {
        let tmp = tempfile::tempdir().unwrap();
        let names = files(&[
            "00000000000000000000.log.deleted",
            "00000000000000000003.log",
            "00000000000000000003.log.cleaned",
            "00000000000000000007.log.swap",
            "00000000000000000007.index.swap",
        ]);
        let got = read_only_segment_files(tmp.path(), &names).unwrap();
        assert_eq!(got, [seg(3, false)], "a swap at or above the smallest .cleaned is a split");
    }
}
