//! Reading the `.txnindex` files of a partition's segments (the aborted transactions a
//! `read_committed` reader skips), and producer-state snapshots (`<offset>.snapshot`): read at
//! segment boundaries so that a transaction scan need not start at the log start, and written
//! at each roll when the engine knows the producer state.

use super::*;

use topicfs_format::producer_snapshot::ProducerSnapshot;
use topicfs_source::BoundaryTxnState;

impl Log {
    /// Aborted transactions from the `.txnindex` files whose range overlaps `[from, to)`
    /// (`lastOffset >= from` and `firstOffset < to`). A trailing partial entry is ignored.
    pub fn aborted_transactions(&self, from: Offset, to: Offset) -> Result<Vec<AbortedTxn>> {
        let mut out = Vec::new();
        for seg in self.segments.from(from) {
            let path = seg.file_path(".txnindex");
            let bytes = match crate::open::read_regular(&path) {
                Ok(b) => b,
                Err(e) if crate::open::is_not_found(&e) => continue,
                Err(e) => return Err(e),
            };
            for (at, entry) in txn_index::entries(&bytes) {
                // Only the version's high byte is checked (versions 1..=255 pass, negative ones
                // do not), as this reader always did.
                if entry.version.to_be_bytes()[0] > 0 {
                    return Err(Error::corrupt(&path, at, "unknown txn index entry version"));
                }
                if entry.last_offset >= from && entry.first_offset < to {
                    out.push(AbortedTxn {
                        producer_id: entry.producer_id,
                        first_offset: entry.first_offset,
                        last_offset: entry.last_offset,
                        last_stable_offset: entry.last_stable_offset,
                    });
                }
            }
        }
        Ok(out)
    }
}

impl Log {
    /// The transaction state a broker recorded at a segment boundary (Kafka's way to know it
    /// without reading the log): the newest `<base>.snapshot` that decodes, taken at the base
    /// offset of a segment above the log start offset, with the aborted transactions whose ABORT
    /// marker lies below it from the `.txnindex` files. A snapshot that does not decode is
    /// skipped with a warning naming it (an older one, or none, is used instead); `None` when
    /// no segment above the log start has one (what this engine writes for its own appends, or
    /// a broker older than 0.11).
    pub fn txn_state_at_boundary(&self) -> Result<Option<BoundaryTxnState>> {
        let log_start = self.log_start_offset();
        let bases: Vec<Offset> =
            self.segments.bases().into_iter().filter(|b| *b > log_start).collect();
        for base in bases.into_iter().rev() {
            let Some(snapshot) = self.producer_snapshot_at(base) else { continue };
            let aborted = self
                .aborted_transactions(log_start, base)?
                .into_iter()
                .filter(|t| t.last_offset < base)
                .collect();
            return Ok(Some(BoundaryTxnState {
                offset: base,
                open: snapshot.open_transactions().collect(),
                aborted,
            }));
        }
        Ok(None)
    }

    /// The producer snapshot `<base>.snapshot`, if there is one that reads and decodes; one
    /// that does not is logged (naming the file, and the byte for a damaged one) and `None`.
    fn producer_snapshot_at(&self, base: Offset) -> Option<ProducerSnapshot> {
        let path = segment_file_path(&self.dir, base, ".snapshot");
        let bytes = match crate::open::read_regular(&path) {
            Ok(b) => b,
            Err(e) if crate::open::is_not_found(&e) => return None,
            Err(e) => {
                log::warn!("{e}: producer snapshot not used");
                return None;
            }
        };
        match ProducerSnapshot::decode(&bytes) {
            Ok(s) => Some(s),
            Err(e) => {
                log::warn!(
                    "{}: producer snapshot not used: corrupt at byte {}: {e}",
                    path.display(),
                    e.at
                );
                None
            }
        }
    }
}

/// What the engine knows of the producer state at the active segment's base offset: what the
/// `.snapshot` it writes at the next roll holds. Its own appends carry no producer id, so they
/// never change the state; only batches another writer left in the active segment can.
#[derive(Debug)]
pub enum ProducerState {
    /// Not looked at yet: decided at the first roll ([`Log::producer_state_at_roll`]).
    Undetermined,
    /// The state at the active segment's base offset, which every batch in it so far left
    /// unchanged.
    Known(ProducerSnapshot),
    /// Not known: no usable snapshot at the active segment's base offset (and it is not the
    /// log start), or the segment held batches of a producer. No snapshot is written, and
    /// readers scan as they would without one.
    Unknown,
}

/// Bytes of batch headers asked per step when looking for producers in a segment.
const PRODUCER_LOOK_CHUNK: usize = 16 << 20;

impl Log {
    /// Writes `<new_base>.snapshot` at a roll, as a broker takes one at each roll, when the
    /// producer state is known: readers then start their transaction scan there
    /// ([`Log::txn_state_at_boundary`]) instead of reading every batch below it. `sealed` is
    /// the segment just sealed. A failure costs readers a scan, never
    /// a wrong answer: it is logged, and a partly written file is removed (one that survives a
    /// crash fails its CRC and is not used).
    pub(super) fn write_producer_snapshot(
        &self,
        writer: &mut Writer,
        sealed: &LogSegment,
        new_base: Offset,
    ) {
        if matches!(writer.producer_state, ProducerState::Undetermined) {
            writer.producer_state = self.producer_state_at_roll(sealed, writer.active_all_ours);
        }
        let ProducerState::Known(snapshot) = &writer.producer_state else { return };
        let path = segment_file_path(&self.dir, new_base, ".snapshot");
        if let Err(e) = std::fs::write(&path, snapshot.encode()) {
            log::warn!("{}: producer snapshot not written: {e}", path.display());
            let _ = std::fs::remove_file(&path);
        }
    }

    /// The producer state at the end of `sealed` (the segment being sealed): the snapshot at
    /// its base offset (none needed at the log start, where the state is empty), when none of
    /// its batches is a producer's: known without reading it when this engine appended all of
    /// them (`all_ours`), else from its batch headers (once per process, at the first roll
    /// after open).
    fn producer_state_at_roll(&self, sealed: &LogSegment, all_ours: bool) -> ProducerState {
        let base = sealed.base_offset();
        let at_base = match self.producer_snapshot_at(base) {
            Some(s) => s,
            None if base == self.log_start_offset() => ProducerSnapshot::default(),
            None => {
                log::debug!("{}: no producer state at {base}; no snapshots", self.dir.display());
                return ProducerState::Unknown;
            }
        };
        if all_ours {
            // Every batch in it is this engine's: no producer's, nothing to read.
            return ProducerState::Known(at_base);
        }
        let mut position = Position(0);
        while position.0 < sealed.size() {
            let (heads, next) = match sealed.read_heads(position, PRODUCER_LOOK_CHUNK) {
                Ok(r) => r,
                Err(e) => {
                    log::debug!("{}: producer state unknown: {e}", self.dir.display());
                    return ProducerState::Unknown;
                }
            };
            // No header (a legacy message, damage) or a producer's batch: not known here.
            if heads.is_empty() || heads.iter().any(|h| h.info.producer_id >= 0) {
                log::debug!(
                    "{}: segment {base} holds batches this engine cannot follow producers \
                     through; no snapshots",
                    self.dir.display()
                );
                return ProducerState::Unknown;
            }
            position = next;
        }
        ProducerState::Known(at_base)
    }
}
