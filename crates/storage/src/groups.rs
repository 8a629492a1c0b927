//! Consumer groups' committed offsets in a data dir, stored as a broker stores them: offset
//! commit records in the `__consumer_offsets` topic (formats in [`topicfs_format::groups`]).
//!
//! **Where a group lives**: partition `abs(hashCode(group)) % N` of `__consumer_offsets`, `N` its
//! partition count (created with [`DEFAULT_OFFSETS_PARTITIONS`] by the first commit on a writable
//! data dir that has none). A broker started on the dir, or any reader of the topic, finds the
//! same positions there.
//!
//! **State**: per partition of `__consumer_offsets`, the latest value of every offset commit key
//! read so far, and the offset the next read continues from. A lookup first catches up from
//! there to the log end (a commit's own batch is read back this way), so each record is decoded
//! once per mount, not once per lookup. A partition whose log start moved past that offset, or
//! whose log end fell below it (a broker's truncation), is read again from its log start.
//! Records apply in offset order: the latest per key wins, a null value deletes the key. Group
//! metadata records and the new coordinator's records (key version 3 and up) are skipped.
//! Transactional offset commits (`TxnOffsetCommit`) are held per producer until their
//! transaction's marker: applied at COMMIT, dropped at ABORT, so an open transaction's commits
//! do not show yet. A record that does not decode is logged with its partition and offset and
//! skipped.
//!
//! **Commits** are one batch appended to the group's partition (so a crash keeps all of it or
//! none, recovery truncating a torn batch), fsynced (log and indexes) before [`GroupStore::commit`]
//! returns. A commit too large for one batch of `max.message.bytes` is refused whole.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use topicfs_format::groups::{
    CONSUMER_OFFSETS_TOPIC, DEFAULT_OFFSETS_PARTITIONS, GroupRecordKey, OffsetCommitKey,
    OffsetCommitValue, decode_group_record_key, decode_offset_commit_value,
    encode_offset_commit_key, encode_offset_commit_value, offsets_partition_for,
};
use topicfs_format::{
    NewRecord, Offset, RECORD_BATCH_OVERHEAD, decode_batch, decode_batch_unverified, peek_entry,
};
use topicfs_source::error::{Error, Result};
use topicfs_source::sync::lock;
use topicfs_source::{CommittedOffset, GroupStore};

use super::log::Log;
use super::log_dirs::LogDirs;
use super::segment::now_ms;
use topicfs_settings::config::LogConfig;

/// Bytes read from `__consumer_offsets` per step of a catch-up.
const READ_CHUNK: usize = 1 << 20;

/// The configuration a broker gives `__consumer_offsets` (`cleanup.policy=compact`,
/// `offsets.topic.segment.bytes` 100 MiB, producer compression): no time or size retention, so
/// the data dir's retention settings never delete committed offsets (the `config` file shows
/// these as the broker's override of the topic).
pub fn offsets_topic_config(default: &LogConfig) -> LogConfig {
    LogConfig {
        cleanup_policy: topicfs_settings::config::CleanupPolicy::COMPACT,
        segment_bytes: 100 * 1024 * 1024,
        retention_ms: None,
        retention_bytes: None,
        ..default.clone()
    }
}

/// The latest offset commits of one `__consumer_offsets` partition, as read so far.
#[derive(Debug, Default)]
struct PartitionState {
    /// The offset the next catch-up reads from (the log end offset of the last one).
    next: Offset,
    /// The log start offset the state was built from.
    log_start: Offset,
    commits: HashMap<OffsetCommitKey, CommittedOffset>,
    /// Records decoded into this state so far (for tests and statistics).
    records_read: u64,
    /// Records of transactions not ended yet, by producer id: applied at their COMMIT marker,
    /// dropped at their ABORT marker (as the group coordinator replays them).
    pending: HashMap<i64, Vec<PendingRecord>>,
}

/// A record of an open transaction: offset, key, value.
type PendingRecord = (Offset, Option<Vec<u8>>, Option<Vec<u8>>);

/// [`GroupStore`] over the `__consumer_offsets` topic of a broker's log dirs (its partitions
/// may sit in any of them); see the module doc.
#[derive(Debug)]
pub struct LocalGroupStore {
    dir: Arc<LogDirs>,
    /// By partition of `__consumer_offsets`.
    state: Mutex<HashMap<u32, PartitionState>>,
    /// Serializes commits (and the creation of the topic by the first one).
    commit_lock: Mutex<()>,
}

impl LocalGroupStore {
    /// Groups of the log dirs `dir`.
    pub fn new(dir: Arc<LogDirs>) -> LocalGroupStore {
        LocalGroupStore { dir, state: Mutex::new(HashMap::new()), commit_lock: Mutex::new(()) }
    }

    /// Records of `__consumer_offsets` decoded so far, over all partitions: each once per
    /// mount, unless a partition had to be read again from its start.
    pub fn records_read(&self) -> u64 {
        lock(&self.state).values().map(|s| s.records_read).sum()
    }

    /// Partitions of `__consumer_offsets`; empty when the topic does not exist.
    fn offsets_partitions(&self) -> Vec<u32> {
        self.dir.partition_numbers(CONSUMER_OFFSETS_TOPIC).unwrap_or_default()
    }

    /// Brings the state of `partition` up to the log end and calls `f` with it.
    fn with_partition<T>(&self, partition: u32, f: impl FnOnce(&PartitionState) -> T) -> Result<T> {
        let log = self.dir.log(CONSUMER_OFFSETS_TOPIC, partition)?;
        let mut states = lock(&self.state);
        let state = states.entry(partition).or_default();
        self.watched(catch_up(&log, state))?;
        Ok(f(state))
    }

    /// `result`, its error looked at by the logs' dirs ([`LogDirs::observe`]: the dir it
    /// names may have failed).
    fn watched<T>(&self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            self.dir.observe(e);
        }
        result
    }
}

/// Reads `log` from `state.next` to its current end into `state`.
fn catch_up(log: &Log, state: &mut PartitionState) -> Result<()> {
    // Offsets only (a summary would also look up timestamps): this runs at every lookup.
    log.maybe_refresh()?;
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    if state.next < start || state.next > end || state.log_start > start {
        let records_read = state.records_read;
        *state =
            PartitionState { next: start, log_start: start, records_read, ..Default::default() };
    }
    if state.next == end {
        return Ok(());
    }
    let mut cursor = log.seek(state.next)?;
    while cursor.next_offset < end {
        let chunk = log.read(&cursor, READ_CHUNK)?;
        if chunk.bytes.is_empty() {
            break;
        }
        let mut at = 0;
        while let Some(rest) = chunk.bytes.get(at..) {
            let Some(header) =
                peek_entry(rest).map_err(|e| corrupt(log, &cursor, &chunk, at, &e))?
            else {
                break;
            };
            let size = header.total_size();
            let entry = rest.get(..size).ok_or_else(|| {
                corrupt(log, &cursor, &chunk, at, &"batch runs past the chunk read")
            })?;
            let batch = if chunk.crc_checked {
                decode_batch_unverified(entry)
            } else {
                decode_batch(entry)
            }
            .map_err(|e| corrupt(log, &cursor, &chunk, at, &e))?;
            at += size;
            let info = batch.info();
            for record in batch.records() {
                match record {
                    Ok(record) if record.offset >= state.next => {
                        state.records_read += 1;
                        if info.is_control {
                            end_transaction(log, state, info.producer_id, &record);
                        } else if info.is_transactional {
                            let pending = state.pending.entry(info.producer_id).or_default();
                            let owned = |b: Option<&[u8]>| b.map(<[u8]>::to_vec);
                            pending.push((record.offset, owned(record.key), owned(record.value)));
                        } else {
                            apply(log, state, record.offset, record.key, record.value);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => {
                        log::warn!(
                            "{}: batch at offset {}: {e}; its remaining records are skipped",
                            log.dir().display(),
                            info.base_offset
                        );
                        break;
                    }
                }
            }
        }
        match chunk.next {
            Some(next) if next != cursor => cursor = next,
            _ => break,
        }
    }
    state.next = end;
    state.log_start = start;
    Ok(())
}

/// Damage at byte `at` of `chunk` (read from `cursor`), named by its segment file and position
/// when the log engine's cursor hint (segment base offset, position) says where that is.
fn corrupt(
    log: &Log,
    cursor: &topicfs_source::ReadCursor,
    chunk: &topicfs_source::BatchChunk,
    at: usize,
    what: &dyn std::fmt::Display,
) -> Error {
    let run = chunk.starts.iter().rev().find(|s| s.at <= at);
    let (run_at, run_cursor) = run.map_or((0, *cursor), |s| (s.at, s.cursor));
    let what = format!("__consumer_offsets: {what}");
    match crate::log::SegmentCursor::of(&run_cursor).map(|c| (c.segment_base.0, c.position.0)) {
        Some((base, position)) => {
            let file = log.dir().join(topicfs_format::file_name::segment_file_name(
                Offset(base),
                topicfs_format::file_name::FileKind::Log,
            ));
            Error::corrupt(file, position + (at - run_at) as u64, what)
        }
        None => {
            Error::corrupt(log.dir(), 0, format!("{what} (after offset {})", cursor.next_offset))
        }
    }
}

/// A control record of producer `producer_id`: a COMMIT applies its pending records, an ABORT
/// drops them, anything else is ignored.
fn end_transaction(
    log: &Log,
    state: &mut PartitionState,
    producer_id: i64,
    record: &topicfs_format::Record<'_>,
) {
    use topicfs_format::control::{ControlRecordType, parse_control_key};
    match parse_control_key(record.key).map(|k| k.record_type) {
        Ok(ControlRecordType::Commit) => {
            for (offset, key, value) in state.pending.remove(&producer_id).unwrap_or_default() {
                apply(log, state, offset, key.as_deref(), value.as_deref());
            }
        }
        Ok(ControlRecordType::Abort) => {
            state.pending.remove(&producer_id);
        }
        Ok(_) => {}
        Err(e) => {
            log::warn!("{}: offset {}: control record: {e}", log.dir().display(), record.offset);
        }
    }
}

/// Applies one record: the latest offset commit per key wins, a null value deletes it.
fn apply(
    log: &Log,
    state: &mut PartitionState,
    offset: Offset,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    let Some(key) = key else {
        return;
    };
    let key = match decode_group_record_key(key) {
        Ok(GroupRecordKey::OffsetCommit(key)) => key,
        Ok(GroupRecordKey::GroupMetadata { .. } | GroupRecordKey::Other { .. }) => return,
        Err(e) => {
            log::warn!("{}: offset {offset}: key: {e}; skipped", log.dir().display());
            return;
        }
    };
    match value {
        None => {
            state.commits.remove(&key);
        }
        Some(value) => match decode_offset_commit_value(value) {
            Ok(v) => {
                let committed = CommittedOffset {
                    offset: v.offset,
                    metadata: v.metadata,
                    commit_timestamp: v.commit_timestamp,
                };
                state.commits.insert(key, committed);
            }
            Err(e) => {
                log::warn!(
                    "{}: offset {offset}: offset commit value: {e}; skipped",
                    log.dir().display()
                );
            }
        },
    }
}

impl GroupStore for LocalGroupStore {
    fn groups(&self, topic: &str) -> Result<Vec<String>> {
        let mut groups = BTreeSet::new();
        for partition in self.offsets_partitions() {
            self.with_partition(partition, |state| {
                for key in state.commits.keys() {
                    if key.topic == topic {
                        groups.insert(key.group.clone());
                    }
                }
            })?;
        }
        Ok(groups.into_iter().collect())
    }

    fn committed(&self, group: &str, topic: &str) -> Result<BTreeMap<u32, CommittedOffset>> {
        let partitions = self.offsets_partitions();
        if partitions.is_empty() {
            return Ok(BTreeMap::new());
        }
        let partition = offsets_partition_for(group, partitions.len() as u32);
        self.with_partition(partition, |state| {
            state
                .commits
                .iter()
                .filter(|(k, _)| k.group == group && k.topic == topic)
                .filter_map(|(k, v)| Some((u32::try_from(k.partition).ok()?, v.clone())))
                .collect()
        })
    }

    fn commit(&self, group: &str, topic: &str, offsets: &[(u32, Offset)]) -> Result<()> {
        if self.dir.is_read_only() {
            return Err(Error::ReadOnly);
        }
        if offsets.is_empty() {
            return Ok(());
        }
        let _guard = lock(&self.commit_lock);
        if self.offsets_partitions().is_empty() {
            self.dir.create_topic(CONSUMER_OFFSETS_TOPIC, DEFAULT_OFFSETS_PARTITIONS)?;
            log::info!(
                "created {CONSUMER_OFFSETS_TOPIC} with {DEFAULT_OFFSETS_PARTITIONS} partitions \
                 for the first commit (group {group:?})"
            );
        }
        let count = self.offsets_partitions().len() as u32;
        let log = self.dir.log(CONSUMER_OFFSETS_TOPIC, offsets_partition_for(group, count))?;
        let now = now_ms();
        let records: Vec<NewRecord> = offsets
            .iter()
            .map(|&(partition, offset)| {
                let key = OffsetCommitKey {
                    group: group.to_string(),
                    topic: topic.to_string(),
                    partition: i32::try_from(partition).unwrap_or(i32::MAX),
                };
                let value = OffsetCommitValue {
                    offset,
                    leader_epoch: None,
                    metadata: String::new(),
                    commit_timestamp: now,
                    expire_timestamp: None,
                };
                NewRecord {
                    timestamp: now,
                    key: Some(encode_offset_commit_key(&key)),
                    value: Some(encode_offset_commit_value(&value)),
                    headers: Vec::new(),
                }
            })
            .collect();
        // One batch, or the commit would not be atomic.
        let size: usize = RECORD_BATCH_OVERHEAD
            + records
                .iter()
                .map(|r| {
                    21 + r.key.as_ref().map_or(0, Vec::len) + r.value.as_ref().map_or(0, Vec::len)
                })
                .sum::<usize>();
        let max = log.config().max_message_bytes as usize;
        if size > max {
            return Err(Error::InvalidInput(format!(
                "a commit of {} offsets for group {group:?} needs {size} bytes, more than one \
                 batch of max.message.bytes ({max}) of {CONSUMER_OFFSETS_TOPIC} holds",
                offsets.len()
            )));
        }
        self.watched(log.append(&records))?;
        self.watched(log.sync())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &std::path::Path) -> (Arc<LogDirs>, LocalGroupStore) {
        let mut configs = HashMap::new();
        configs.insert(
            CONSUMER_OFFSETS_TOPIC.to_string(),
            offsets_topic_config(&LogConfig::default()),
        );
        let dir = Arc::new(
            LogDirs::open_dir(
                dir,
                LogConfig::default(),
                configs,
                super::super::SegmentMode::Writable,
            )
            .unwrap(),
        );
        (Arc::clone(&dir), LocalGroupStore::new(dir))
    }

    #[test]
    fn commits_land_in_kafkas_partition_durably_and_latest_per_key_wins() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, groups) = store(tmp.path());
        assert_eq!(groups.groups("orders").unwrap(), Vec::<String>::new());
        groups.commit("etl", "orders", &[(0, Offset(3)), (1, Offset(5))]).unwrap();
        assert_eq!(dir.partition_numbers(CONSUMER_OFFSETS_TOPIC).unwrap().len(), 50);
        // "etl".hashCode() = 100765, % 50 = 15.
        let log = dir.log(CONSUMER_OFFSETS_TOPIC, 15).unwrap();
        assert_eq!(log.log_end_offset(), Offset(2));
        // One batch, fsynced before the commit returned (the recovery point is the log end).
        assert_eq!(log.segment_list().len(), 1);
        assert_eq!(log.recovery_point(), Offset(2));
        let offsets_config = dir.config_for(CONSUMER_OFFSETS_TOPIC);
        assert_eq!((offsets_config.retention_ms, offsets_config.retention_bytes), (None, None));
        groups.commit("etl", "orders", &[(0, Offset(7))]).unwrap();
        groups.commit("hello", "orders", &[(0, Offset(1))]).unwrap();
        groups.commit("etl", "other", &[(0, Offset(9))]).unwrap();
        let c = groups.committed("etl", "orders").unwrap();
        assert_eq!(c.keys().copied().collect::<Vec<_>>(), [0, 1]);
        // Looking again decodes nothing again: the state catches up from where it stopped.
        assert_eq!(groups.records_read(), 4, "etl's partition only, every record once");
        groups.groups("orders").unwrap();
        let read = groups.records_read();
        assert_eq!(read, 5, "and hello's, for the listing");
        groups.committed("etl", "orders").unwrap();
        groups.groups("orders").unwrap();
        assert_eq!(groups.records_read(), read);
        groups.commit("etl", "orders", &[(1, Offset(6))]).unwrap();
        assert_eq!(groups.committed("etl", "orders").unwrap()[&1].offset, Offset(6));
        assert_eq!(groups.records_read(), read + 1, "only the new record");
        groups.commit("etl", "orders", &[(1, Offset(5))]).unwrap();
        let c = groups.committed("etl", "orders").unwrap();
        assert_eq!((c[&0].offset, c[&1].offset), (Offset(7), Offset(5)));
        assert_eq!(groups.groups("orders").unwrap(), ["etl", "hello"]);
        assert_eq!(groups.groups("other").unwrap(), ["etl"]);
        // A second store over the same dir (a remount) reads the same state.
        let again = LocalGroupStore::new(Arc::clone(&dir));
        assert_eq!(again.committed("etl", "orders").unwrap(), c);
        // A tombstone deletes the key.
        let key = encode_offset_commit_key(&OffsetCommitKey {
            group: "etl".into(),
            topic: "orders".into(),
            partition: 1,
        });
        log.append(&[NewRecord { timestamp: 0, key: Some(key), value: None, headers: vec![] }])
            .unwrap();
        let c = groups.committed("etl", "orders").unwrap();
        assert_eq!(c.keys().copied().collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn a_read_only_dir_refuses_commits() {
        let tmp = tempfile::tempdir().unwrap();
        {
            let (dir, groups) = store(tmp.path());
            groups.commit("g", "t", &[(0, Offset(1))]).unwrap();
            dir.shutdown().unwrap();
        }
        let mode = super::super::SegmentMode::ReadOnly;
        let dir = Arc::new(
            LogDirs::open_dir(tmp.path(), LogConfig::default(), HashMap::new(), mode).unwrap(),
        );
        let groups = LocalGroupStore::new(dir);
        assert_eq!(groups.committed("g", "t").unwrap()[&0].offset, Offset(1));
        assert!(matches!(groups.commit("g", "t", &[(0, Offset(2))]), Err(Error::ReadOnly)));
    }
}
