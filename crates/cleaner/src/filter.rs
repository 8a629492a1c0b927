//! Which records of a batch stay: Kafka's cleaner `RecordFilter` per batch.

use super::*;

/// What [`Filter::batch`] kept of a batch.
pub(super) struct Kept {
    /// The original bytes are kept as they are.
    pub(super) original: bool,
    pub(super) max_timestamp: Timestamp,
    /// The batch's delete horizon, [`NO_TIMESTAMP`] if none.
    pub(super) horizon: Timestamp,
}

/// Kafka's cleaner `RecordFilter` with `MemoryRecords.filterTo`, per batch.
pub(super) struct Filter<'a> {
    pub(super) map: &'a OffsetMap,
    pub(super) producers: &'a Producers,
    pub(super) now: Timestamp,
    pub(super) delete_retention_ms: i64,
}

impl Filter<'_> {
    /// Kafka's `shouldRetainRecord`.
    fn retain_record(&self, info: &BatchInfo, r: &Record<'_>) -> bool {
        if r.offset > self.map.latest_offset() {
            return true;
        }
        let Some(key) = r.key else { return false };
        let latest_for_key = self.map.get(key).is_none_or(|found| r.offset >= found);
        let retain_deletes = !info.has_delete_horizon || self.now < info.base_timestamp;
        latest_for_key && (r.value.is_some() || retain_deletes)
    }

    /// Filters one batch: `None` when it goes entirely, else what was kept, rewritten into
    /// `out` unless the original stays as it is. Legacy entries are kept unchanged.
    pub(super) fn batch(
        &self,
        entry: &[u8],
        info: &BatchInfo,
        txn: &mut TxnMetadata,
        out: &mut Vec<u8>,
        stats: &mut CleanStats,
    ) -> std::result::Result<Option<Kept>, topicfs_format::DecodeError> {
        if info.magic < 2 {
            stats.legacy_copied += 1;
            let horizon = NO_TIMESTAMP;
            return Ok(Some(Kept { original: true, max_timestamp: info.max_timestamp, horizon }));
        }
        let can_discard =
            if info.is_control { txn.on_control_batch(info, entry) } else { txn.on_batch(info) };
        let discard_records = if info.is_control {
            can_discard && info.has_delete_horizon && info.base_timestamp <= self.now
        } else {
            can_discard
        };
        let marker_for_empty_txn = can_discard && info.is_control;
        let retain_empty = self.producers.is_last_of_producer(info, self.now);
        // `LogSegment::read` checked the CRC.
        let batch = decode_batch_unverified(entry)?;
        let mut kept: Vec<Record<'_>> = Vec::new();
        let mut all = true;
        let mut tombstones = false;
        for r in batch.records() {
            let r = r?;
            stats.records_read += 1;
            let retain = !discard_records && (info.is_control || self.retain_record(info, &r));
            if retain {
                tombstones |= r.value.is_none();
                kept.push(r);
            } else {
                all = false;
            }
        }
        stats.records_kept += kept.len() as u64;
        let old_horizon = if info.has_delete_horizon { info.base_timestamp } else { NO_TIMESTAMP };
        if kept.is_empty() {
            if retain_empty {
                // A producer's last batch (or one emptied before) stays as its header.
                if info.records_count == 0 {
                    return Ok(Some(Kept {
                        original: true,
                        max_timestamp: info.max_timestamp,
                        horizon: NO_TIMESTAMP,
                    }));
                }
                encode_empty_batch(out, info)?;
                return Ok(Some(Kept {
                    original: false,
                    max_timestamp: info.max_timestamp,
                    horizon: NO_TIMESTAMP,
                }));
            }
            return Ok(None);
        }
        let set_horizon = (tombstones || marker_for_empty_txn) && !info.has_delete_horizon;
        // The horizon that matters for a later pass: one still to come over something it
        // will remove (tombstones, a marker).
        let pending = |h: Timestamp| {
            if (tombstones || info.is_control) && h > self.now { h } else { NO_TIMESTAMP }
        };
        if all && !set_horizon {
            return Ok(Some(Kept {
                original: true,
                max_timestamp: info.max_timestamp,
                horizon: pending(old_horizon),
            }));
        }
        let horizon = if set_horizon {
            Some(self.now.saturating_add(self.delete_retention_ms))
        } else {
            info.has_delete_horizon.then_some(info.base_timestamp)
        };
        encode_retained_batch(out, info, &kept, horizon)?;
        let max_timestamp = parse_batch_info(out)?.max_timestamp;
        Ok(Some(Kept {
            original: false,
            max_timestamp,
            horizon: pending(horizon.unwrap_or(NO_TIMESTAMP)),
        }))
    }
}
