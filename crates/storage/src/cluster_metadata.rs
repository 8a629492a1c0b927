//! A KRaft broker's topic settings, read from the data dir's `__cluster_metadata-0` (the
//! metadata log the broker replicates from the controllers; `metadata.log.dir` defaults to the
//! first `log.dirs` entry).
//!
//! The directory holds snapshots, `<end offset>-<epoch>.checkpoint` (20 and 10 digits; the
//! snapshot contains the records at offsets below its end offset, framed by a
//! `SnapshotHeader` control batch first and a `SnapshotFooter` control batch last), and the
//! log's segments (`<base offset>.log`). The state is what Kafka's `MetadataLoader` builds:
//! the newest snapshot, then every log record at or after its end offset, in offset order,
//! replayed into [`topicfs_settings::metadata_image::Image`] (which says what each record
//! does); control batches (leader changes, KRaft version and voters) carry no settings and are
//! stepped over by their headers. Broker settings come out in topic-level names
//! ([`ClusterMetadataConfigs`]).
//!
//! # Damage
//!
//! - The last batch of the newest segment extending past the end of the file is a write in
//!   progress (or torn by a crash): the read stops before it, without error, and a later
//!   [`ClusterMetadataReader::refresh`] reads it once it is whole.
//! - A batch that fails its CRC or framing, log batches whose offsets do not increase (the CRC
//!   does not cover the base offset), a sealed segment with bytes after its last whole batch,
//!   a snapshot without its header or footer, or records missing between the snapshot and the
//!   log (a gap in offsets): `Err(`[`Error::Corrupt`]`)` naming the file and position.
//!   The broker's settings are then unknown as a whole: a reader that went on past the damage,
//!   or stopped before it, could hand retention a topic's settings that the broker no longer
//!   has (a `cleanup.policy=compact` set after the damage), and the safe answer is none
//!   (SEMANTICS.md, "Settings a broker holds"). [`ClusterMetadataReader::refresh`] keeps
//!   showing the last good state on such an error, and its next call reads everything again.
//! - A record inside a whole batch that does not decode (an unknown frame version, a version
//!   of `ConfigRecord` this reader does not know) or does not apply (a `RemoveTopicRecord` of
//!   an unknown topic id, an `EndTransactionRecord` without a begin) is logged once, naming
//!   the file, the batch's position and the record's offset, and skipped: what Kafka's loader
//!   does with a record it cannot replay (`faultHandler.handleFault`, then the next record).
//!
//! Records the broker has written but the quorum has not committed yet (past the high
//! watermark, which is not kept on disk) are read like the others; a broker truncates them
//! only when the log diverges, which the reader notices (see [`ClusterMetadataReader::refresh`]).

use std::fs::File;
use std::path::{Path, PathBuf};

use topicfs_format::batch::CRC_AT;
use topicfs_format::control::{ControlRecordType, parse_control_key};
use topicfs_format::decode_batch;
use topicfs_format::file_name::{FileKind, parse_segment_file_name};
use topicfs_format::metadata_record::{
    decode_metadata_record, decode_snapshot_footer, decode_snapshot_header,
};
use topicfs_source::error::{Error, Result};

use super::open::{is_not_found, open_read, read_dir};
use super::scan::{BatchLocation, ChunkReader, corrupt_at, read_fully_at};
pub use topicfs_settings::metadata_image::ClusterMetadataConfigs;
use topicfs_settings::metadata_image::Image;

/// The metadata log's partition directory inside the data dir.
pub const CLUSTER_METADATA_DIR: &str = "__cluster_metadata-0";
/// A snapshot file's suffix (`Snapshots.SUFFIX`).
pub const SNAPSHOT_SUFFIX: &str = ".checkpoint";

/// Reads the settings in `data_dir`'s `__cluster_metadata-0` once (see the module docs);
/// `None` when the data dir has no such directory. `node_id` is this broker's `node.id` (from
/// `meta.properties`), whose own BROKER settings win over the cluster default; `None` reads
/// the cluster default only.
pub fn read_cluster_metadata(
    data_dir: &Path,
    node_id: Option<i32>,
) -> Result<Option<ClusterMetadataConfigs>> {
    Ok(ClusterMetadataReader::open(data_dir, node_id)?.map(|r| r.configs().clone()))
}

/// A snapshot's id: the end offset (exclusive) of the records it contains, and the epoch.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SnapshotId {
    end_offset: i64,
    epoch: i32,
}

/// `Snapshots.parse` for a finished snapshot: `<20 digits>-<10 digits>.checkpoint`
/// (`.checkpoint.part` and `.checkpoint.deleted` are not snapshots to read).
fn parse_snapshot_name(name: &str) -> Option<SnapshotId> {
    let stem = name.strip_suffix(SNAPSHOT_SUFFIX)?;
    let (offset, epoch) = stem.split_once('-')?;
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(offset, 20) || !digits(epoch, 10) {
        return None;
    }
    Some(SnapshotId { end_offset: offset.parse().ok()?, epoch: epoch.parse().ok()? })
}

/// Where the log read stopped: the next batch of segment `segment` starts at `position`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Resume {
    /// Base offset of the segment.
    segment: i64,
    /// Position of the first byte not read yet.
    position: u64,
    /// The last batch read in that segment, (position, base offset, CRC): still there with the
    /// same bytes unless the log was truncated and written again.
    last_batch: Option<(u64, i64, u32)>,
}

/// Where the replay stands.
#[derive(Debug)]
struct Replay {
    image: Image,
    /// The snapshot read, if any.
    snapshot: Option<SnapshotId>,
    /// The offset of the next record to apply.
    next_offset: i64,
    /// The last offset of the last log batch read (applied or not): the next batch must start
    /// after it.
    log_last_offset: Option<i64>,
    resume: Option<Resume>,
}

/// Reads `__cluster_metadata-0` and keeps its place, so that [`ClusterMetadataReader::refresh`]
/// reads only what was appended since (a read-only mount next to a running broker calls it on
/// its refresh interval; a call that finds nothing new costs a directory listing and one
/// 21-byte read).
///
/// ```no_run
/// # use topicfs_storage::cluster_metadata::ClusterMetadataReader;
/// # fn f(data_dir: &std::path::Path) -> topicfs_source::error::Result<()> {
/// if let Some(mut reader) = ClusterMetadataReader::open(data_dir, Some(1))? {
///     let first = reader.configs().clone(); // hand to LogDir::set_broker_settings
///     // later, on a timer:
///     if reader.refresh()? {
///         let changed = reader.configs().clone(); // hand over again
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ClusterMetadataReader {
    dir: PathBuf,
    node_id: Option<i32>,
    replay: Replay,
    configs: ClusterMetadataConfigs,
    /// A read failed: the next refresh reads everything again.
    start_over: bool,
}

impl ClusterMetadataReader {
    /// Reads the newest snapshot and the log after it; `None` when `data_dir` has no
    /// `__cluster_metadata-0`.
    pub fn open(data_dir: &Path, node_id: Option<i32>) -> Result<Option<ClusterMetadataReader>> {
        let dir = data_dir.join(CLUSTER_METADATA_DIR);
        match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&dir, "stat", e)),
            Ok(_) => {}
        }
        let mut replay = load(&dir)?;
        replay.image.take_touched();
        let configs = replay.image.configs(node_id);
        Ok(Some(ClusterMetadataReader { dir, node_id, replay, configs, start_over: false }))
    }

    /// The settings as of the last successful read.
    pub fn configs(&self) -> &ClusterMetadataConfigs {
        &self.configs
    }

    /// Reads what was appended since the last read; whether [`Self::configs`] changed.
    ///
    /// Starts over from the newest snapshot when the log is not the one read before: the
    /// segment the read stopped in is gone or shorter than where it stopped, the last batch
    /// read there has other bytes now (a follower truncated and wrote again), or a snapshot
    /// newer than the records read has appeared. When nothing was appended it returns at once
    /// (one directory listing and one 21-byte read), whatever the size of the metadata. On an
    /// error the previous state stays.
    pub fn refresh(&mut self) -> Result<bool> {
        if self.start_over {
            return self.reload();
        }
        let listing = list(&self.dir)?;
        match self.place(&listing)? {
            Place::Unchanged => Ok(false),
            Place::StartOver => self.reload(),
            Place::Continue => {
                // Applied in place, so that a refresh costs what was appended, not what the
                // metadata holds. On an error the image holds the records before the damage
                // but `configs` does not show them, and the next refresh starts over.
                if let Err(e) = read_log(&self.dir, &listing.segments, &mut self.replay) {
                    self.start_over = true;
                    return Err(e);
                }
                Ok(self.replay.image.update(&mut self.configs, self.node_id))
            }
        }
    }

    /// Reads the newest snapshot and the log again; whether [`Self::configs`] changed.
    fn reload(&mut self) -> Result<bool> {
        self.start_over = true;
        let mut replay = load(&self.dir)?;
        replay.image.take_touched();
        let configs = replay.image.configs(self.node_id);
        let changed = configs != self.configs;
        (self.replay, self.configs, self.start_over) = (replay, configs, false);
        Ok(changed)
    }

    /// Whether the log read so far is still there, and whether anything follows it.
    fn place(&self, listing: &Listing) -> Result<Place> {
        if listing.snapshots.last().is_some_and(|s| s.end_offset > self.replay.next_offset) {
            return Ok(Place::StartOver);
        }
        let Some(resume) = self.replay.resume else {
            return Ok(if listing.segments.is_empty() {
                Place::Unchanged
            } else {
                Place::Continue
            });
        };
        if !listing.segments.contains(&resume.segment) {
            return Ok(Place::StartOver);
        }
        let Some(len) = still_there(&self.dir, &resume)? else { return Ok(Place::StartOver) };
        let newest = listing.segments.last() == Some(&resume.segment);
        Ok(if newest && len == resume.position { Place::Unchanged } else { Place::Continue })
    }
}

/// What [`ClusterMetadataReader::refresh`] has to do.
enum Place {
    /// Nothing was appended.
    Unchanged,
    /// Read on from where the last read stopped.
    Continue,
    /// The log is not the one read before: read the newest snapshot and the log again.
    StartOver,
}

/// The length of the segment of `resume` if it still holds the bytes it was read up to.
fn still_there(dir: &Path, resume: &Resume) -> Result<Option<u64>> {
    let path = dir.join(segment_name(resume.segment));
    let file = match open_read(&path) {
        Ok(f) => f,
        Err(e) if is_not_found(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.metadata().map_err(|e| Error::io(&path, "stat", e))?.len();
    if len < resume.position {
        return Ok(None);
    }
    let Some((position, base_offset, crc)) = resume.last_batch else { return Ok(Some(len)) };
    let mut head = [0u8; CRC_AT + 4];
    let n = read_fully_at(&file, &mut head, position).map_err(|e| Error::io(&path, "read", e))?;
    let found_base = head.get(..8).and_then(|b| b.try_into().ok()).map(i64::from_be_bytes);
    let found_crc =
        head.get(CRC_AT..CRC_AT + 4).and_then(|b| b.try_into().ok()).map(u32::from_be_bytes);
    let same = n == head.len() && found_base == Some(base_offset) && found_crc == Some(crc);
    Ok(same.then_some(len))
}

fn segment_name(base_offset: i64) -> String {
    format!("{base_offset:020}{}", FileKind::Log.suffix())
}

/// The snapshots and segments of the metadata log directory, each sorted.
struct Listing {
    snapshots: Vec<SnapshotId>,
    /// Base offsets of the `.log` files (no `.deleted`/`.cleaned`/`.swap` ones).
    segments: Vec<i64>,
}

fn list(dir: &Path) -> Result<Listing> {
    let mut listing = Listing { snapshots: Vec::new(), segments: Vec::new() };
    for entry in read_dir(dir)? {
        let entry = entry.map_err(|e| Error::io(dir, "readdir", e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        if let Some(id) = parse_snapshot_name(&name) {
            listing.snapshots.push(id);
        } else if let Some(f) = parse_segment_file_name(&name) {
            if f.kind == FileKind::Log && f.state.is_none() {
                listing.segments.push(f.base_offset.0);
            }
        }
    }
    listing.snapshots.sort();
    listing.segments.sort();
    Ok(listing)
}

/// Replays the newest snapshot, then the log from its end offset.
fn load(dir: &Path) -> Result<Replay> {
    let listing = list(dir)?;
    let mut replay = Replay {
        image: Image::default(),
        snapshot: None,
        next_offset: 0,
        log_last_offset: None,
        resume: None,
    };
    if let Some(&id) = listing.snapshots.last() {
        let name = format!("{:020}-{:010}{SNAPSHOT_SUFFIX}", id.end_offset, id.epoch);
        read_snapshot(&dir.join(name), &mut replay.image)?;
        replay.snapshot = Some(id);
        replay.next_offset = id.end_offset;
    }
    read_log(dir, &listing.segments, &mut replay)?;
    Ok(replay)
}

/// Calls `each` with every whole batch of `path` from `position`, in order, and returns where
/// the batches end (the file's length, or the start of a batch extending past it).
fn for_each_batch(
    path: &Path,
    file: &File,
    position: u64,
    mut each: impl FnMut(&BatchLocation, &[u8]) -> Result<()>,
) -> Result<u64> {
    let len = file.metadata().map_err(|e| Error::io(path, "stat", e))?.len();
    let mut reader = ChunkReader::new(file, path, len);
    let mut pos = position;
    while let Some(batch) = reader.batch_at(pos)? {
        if batch.info.magic != topicfs_format::batch::MAGIC_V2 {
            return Err(Error::corrupt(path, pos, "a metadata log batch that is not magic v2"));
        }
        let entry = reader.entry(&batch)?.ok_or_else(|| {
            Error::corrupt(path, pos, "batch shorter than its size field (file truncated?)")
        })?;
        each(&batch, entry)?;
        pos = batch.end();
    }
    Ok(pos)
}

/// Replays one snapshot file into `image`: a `SnapshotHeader` control batch first, data
/// batches, a `SnapshotFooter` control batch last (`RecordsSnapshotReader`'s rules).
fn read_snapshot(path: &Path, image: &mut Image) -> Result<()> {
    let file = open_read(path)?;
    let (mut header, mut footer) = (false, false);
    let end = for_each_batch(path, &file, 0, |batch, entry| {
        let at = batch.position.0;
        let decoded = decode_batch(entry).map_err(|e| corrupt_at(path, at, e))?;
        if footer {
            return Err(Error::corrupt(path, at, "a batch after the snapshot's footer"));
        }
        for record in decoded.records() {
            let record = record.map_err(|e| corrupt_at(path, at, e))?;
            if batch.info.is_control {
                let key = parse_control_key(record.key).map_err(|e| corrupt_at(path, at, e))?;
                let value = record.value.unwrap_or_default();
                match key.record_type {
                    ControlRecordType::SnapshotHeader if !header => {
                        decode_snapshot_header(value).map_err(|e| corrupt_at(path, at, e))?;
                        header = true;
                    }
                    ControlRecordType::SnapshotFooter if header => {
                        decode_snapshot_footer(value).map_err(|e| corrupt_at(path, at, e))?;
                        footer = true;
                    }
                    ControlRecordType::SnapshotHeader | ControlRecordType::SnapshotFooter => {
                        return Err(Error::corrupt(
                            path,
                            at,
                            "snapshot header or footer out of place",
                        ));
                    }
                    // KRaft version and voters records (3.9+): no settings.
                    _ => {}
                }
            } else if !header {
                return Err(Error::corrupt(path, at, "snapshot does not start with its header"));
            } else {
                replay_value(path, at, record.offset.0, record.value, image);
            }
        }
        Ok(())
    })?;
    let len = file.metadata().map_err(|e| Error::io(path, "stat", e))?.len();
    if end != len {
        return Err(Error::corrupt(path, end, "a snapshot ending inside a batch"));
    }
    if !footer {
        return Err(Error::corrupt(path, end, "a snapshot without its footer (incomplete)"));
    }
    image.end_snapshot();
    Ok(())
}

/// Decodes and replays one record value; a record that does not decode or apply is logged
/// once and skipped.
fn replay_value(path: &Path, batch_at: u64, offset: i64, value: Option<&[u8]>, image: &mut Image) {
    let outcome = match value {
        None => Err("a metadata record with a null value".to_string()),
        Some(value) => match decode_metadata_record(value) {
            Ok(record) => image.replay(record).map_err(str::to_string),
            Err(e) => Err(e.to_string()),
        },
    };
    if let Err(why) = outcome {
        let e = Error::corrupt(path, batch_at, format!("record at offset {offset} skipped: {why}"));
        if e.first_report() {
            log::warn!("{e}");
        }
    }
}

/// Replays the log's batches from `replay`'s place: the segment it stopped in, else the last
/// segment whose base offset is at most the next offset, to the end of the newest segment.
fn read_log(dir: &Path, segments: &[i64], replay: &mut Replay) -> Result<()> {
    let next = replay.next_offset;
    let start = match replay.resume {
        Some(r) => segments.iter().position(|&s| s == r.segment).unwrap_or(0),
        None => segments.iter().rposition(|&s| s <= next).unwrap_or(0),
    };
    let Some(todo) = segments.get(start..) else { return Ok(()) };
    for (i, &base) in todo.iter().enumerate() {
        let path = dir.join(segment_name(base));
        let file = open_read(&path)?;
        let resume = replay.resume.filter(|r| r.segment == base);
        let mut last_batch = resume.and_then(|r| r.last_batch);
        let from = resume.map_or(0, |r| r.position);
        let end = for_each_batch(&path, &file, from, |batch, entry| {
            let at = batch.position.0;
            let info = &batch.info;
            // Kafka's batch CRC does not cover the base offset: offsets that do not increase
            // are damage (a broker's recovery refuses them too), not records to skip.
            let after = replay.log_last_offset.map_or(i64::MIN, |last| last);
            if info.base_offset.0 <= after || info.last_offset.0 < info.base_offset.0 {
                return Err(Error::corrupt(&path, at, "batch offsets that do not increase"));
            }
            replay.log_last_offset = Some(info.last_offset.0);
            last_batch = Some((at, info.base_offset.0, info.crc));
            if info.last_offset.0 < replay.next_offset {
                return Ok(());
            }
            if info.base_offset.0 > replay.next_offset {
                return Err(Error::corrupt(
                    &path,
                    at,
                    format!(
                        "records {}..{} are missing (in no snapshot and no segment)",
                        replay.next_offset, info.base_offset.0
                    ),
                ));
            }
            let decoded = decode_batch(entry).map_err(|e| corrupt_at(&path, at, e))?;
            if !info.is_control {
                for record in decoded.records() {
                    let record = record.map_err(|e| corrupt_at(&path, at, e))?;
                    if record.offset.0 >= replay.next_offset {
                        replay_value(&path, at, record.offset.0, record.value, &mut replay.image);
                    }
                }
            }
            replay.next_offset = info.last_offset.0.saturating_add(1);
            Ok(())
        })?;
        let newest = i + 1 == todo.len();
        let len = file.metadata().map_err(|e| Error::io(&path, "stat", e))?.len();
        if !newest && end != len {
            return Err(Error::corrupt(
                &path,
                end,
                "bytes after the last whole batch of a sealed segment",
            ));
        }
        replay.resume = Some(Resume { segment: base, position: end, last_batch });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
