//! The batches of one Fetch response a consumer keeps: Kafka's `read_committed` filter, done per
//! response as the Java consumer does it (`CompletedFetch.nextFetchedRecord`), so reading
//! committed records never needs a scan of the partition from its log start.
//!
//! A `read_committed` Fetch (isolation_level 1) returns batches only below the partition's last
//! stable offset (LSO) and, with them, the aborted transactions that overlap them, each as
//! (producer id, first offset). Walking the batches in offset order:
//!
//! * before a batch is looked at, every aborted transaction whose first offset is at or below
//!   the batch's last offset makes its producer *aborted*;
//! * a control batch carrying an ABORT marker of an aborted producer ends that: the producer's
//!   later batches are kept again. Control batches themselves are kept: they hold no records
//!   (the view never shows them as records, as the Java consumer never returns them), and they
//!   carry a reader past the transactions they end, so a partition ending with an aborted
//!   transaction still reads to its last stable offset;
//! * a transactional data batch of an aborted producer is dropped;
//! * nothing at or past the LSO is kept, even if a broker sends it.
//!
//! **Invariant**: the filter needs nothing but the response: the broker lists every aborted
//! transaction whose range overlaps the fetched offsets, also one that began before the fetch
//! offset, so each response is filtered on its own and a stream opened at any offset costs one
//! Fetch to its first record.

use std::collections::HashSet;

use topicfs_format::control::{ControlRecordType, parse_control_key};
use topicfs_format::{DecodeError, Offset, decode_batch, parse_batch_info, peek_entry};

/// What [`committed_batches`] kept of one response.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Kept {
    /// The kept batches, whole and in order, as the broker sent them.
    pub bytes: Vec<u8>,
    /// The offset after the last batch looked at (kept or dropped): where the next Fetch
    /// starts. Equal to the fetch offset when no whole batch at or past it was in the response.
    pub next: Offset,
}

/// Filters the record bytes of one partition of a Fetch response: batches (whole; a partial one
/// cut by the size limit ends the walk) at or past `from` (the fetch offset), below `lso`,
/// without the data batches of `aborted` transactions (producer id, first offset), as
/// described in the module docs. Stops before a kept batch that would take
/// the kept bytes past `max_bytes` (the first kept batch is always whole). `Err((position,
/// error))` for bytes that do not frame a batch.
pub fn committed_batches(
    records: &[u8],
    from: Offset,
    lso: Offset,
    aborted: &[(i64, Offset)],
    max_bytes: usize,
) -> Result<Kept, (usize, DecodeError)> {
    let mut pending: Vec<(i64, Offset)> = aborted.to_vec();
    // Taken from the front in first-offset order (Java's priority queue).
    pending.sort_by_key(|&(pid, first)| (first, pid));
    let mut pending = pending.into_iter().peekable();
    let mut aborted_now: HashSet<i64> = HashSet::new();
    let mut kept = Kept { bytes: Vec::new(), next: from };
    let mut pos = 0;
    while let Some(rest) = records.get(pos..).filter(|r| !r.is_empty()) {
        let Some(h) = peek_entry(rest).map_err(|e| (pos, e))? else { break };
        let Some(entry) = rest.get(..h.total_size()) else {
            break; // A batch cut at the size limit: the broker's way to say "more".
        };
        let info = parse_batch_info(entry).map_err(|e| (pos, e))?;
        if info.base_offset >= lso {
            break;
        }
        while let Some((pid, _)) = pending.next_if(|&(_, first)| first <= info.last_offset) {
            aborted_now.insert(pid);
        }
        let keep = if info.is_control {
            if info.is_transactional && aborted_now.contains(&info.producer_id) {
                let batch = decode_batch(entry).map_err(|e| (pos, e))?;
                if let Some(record) = batch.records().next() {
                    let record = record.map_err(|e| (pos, e))?;
                    let key = parse_control_key(record.key).map_err(|e| (pos, e))?;
                    if key.record_type == ControlRecordType::Abort {
                        aborted_now.remove(&info.producer_id);
                    }
                }
            }
            true
        } else {
            !(info.is_transactional && aborted_now.contains(&info.producer_id))
        };
        let before_fetch = info.last_offset < from;
        if keep && !before_fetch {
            if !kept.bytes.is_empty() && kept.bytes.len() + entry.len() > max_bytes {
                break;
            }
            kept.bytes.extend_from_slice(entry);
        }
        if !before_fetch {
            kept.next = info.last_offset.plus(1);
        }
        pos += entry.len();
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use topicfs_format::control::encode_end_txn_marker_batch;
    use topicfs_format::{BatchSpec, NewRecord, encode_batch};

    /// A batch of `n` one-byte records at `base`; transactional for `pid` >= 0.
    fn batch(base: i64, n: usize, pid: i64) -> Vec<u8> {
        let records: Vec<NewRecord> = (0..n)
            .map(|i| NewRecord {
                timestamp: 1000 + i as i64,
                key: None,
                value: Some(vec![b'a' + i as u8]),
                headers: Vec::new(),
            })
            .collect();
        let spec = BatchSpec {
            producer_id: pid,
            producer_epoch: if pid >= 0 { 0 } else { -1 },
            base_sequence: if pid >= 0 { 0 } else { -1 },
            is_transactional: pid >= 0,
            base_offset: Offset(base),
            ..BatchSpec::default()
        };
        encode_batch(&spec, &records).unwrap()
    }

    fn marker(base: i64, pid: i64, commit: bool) -> Vec<u8> {
        encode_end_txn_marker_batch(Offset(base), 0, pid, 0, commit, 0, 2000).unwrap()
    }

    /// The base offsets of the kept batches.
    fn bases(kept: &Kept) -> Vec<i64> {
        let mut out = Vec::new();
        let mut pos = 0;
        while let Ok(Some(h)) = peek_entry(&kept.bytes[pos..]) {
            out.push(
                parse_batch_info(&kept.bytes[pos..pos + h.total_size()]).unwrap().base_offset.0,
            );
            pos += h.total_size();
        }
        out
    }

    /// 0-1 plain, 2-3 txn of 7 (aborted at 6), 4-5 txn of 8 (committed at 7), 6 abort marker of
    /// 7, 7 commit marker of 8, 8-9 txn of 7 again (a new transaction, committed at 10), 10
    /// commit marker of 7, 11 plain.
    fn log() -> Vec<u8> {
        [
            batch(0, 2, -1),
            batch(2, 2, 7),
            batch(4, 2, 8),
            marker(6, 7, false),
            marker(7, 8, true),
            batch(8, 2, 7),
            marker(10, 7, true),
            batch(11, 1, -1),
        ]
        .concat()
    }

    #[test]
    fn aborted_batches_are_dropped_and_markers_kept() {
        let kept =
            committed_batches(&log(), Offset(0), Offset(12), &[(7, Offset(2))], 1 << 20).unwrap();
        assert_eq!(bases(&kept), [0, 4, 6, 7, 8, 10, 11]);
        assert_eq!(kept.next, Offset(12));
    }

    #[test]
    fn a_producer_is_kept_again_after_its_abort_marker() {
        // Without the marker ending the abort, the later transaction of 7 (8-9) would be lost.
        let kept =
            committed_batches(&log(), Offset(0), Offset(12), &[(7, Offset(2))], 1 << 20).unwrap();
        assert!(bases(&kept).contains(&8));
        // No aborted list: everything but the markers.
        let all = committed_batches(&log(), Offset(0), Offset(12), &[], 1 << 20).unwrap();
        assert_eq!(bases(&all), [0, 2, 4, 6, 7, 8, 10, 11]);
    }

    #[test]
    fn an_aborted_transaction_begun_before_the_fetch_offset_is_still_dropped() {
        // Fetch at 3 (inside 7's aborted transaction): the broker lists it with first offset 2,
        // and the response starts with the batch holding offset 3.
        let bytes = log();
        let kept =
            committed_batches(&bytes, Offset(3), Offset(12), &[(7, Offset(2))], 1 << 20).unwrap();
        assert_eq!(bases(&kept), [4, 6, 7, 8, 10, 11]);
    }

    #[test]
    fn nothing_at_or_past_the_last_stable_offset_is_kept() {
        let kept =
            committed_batches(&log(), Offset(0), Offset(8), &[(7, Offset(2))], 1 << 20).unwrap();
        assert_eq!(bases(&kept), [0, 4, 6, 7]);
        assert_eq!(kept.next, Offset(8));
    }

    #[test]
    fn a_response_of_only_dropped_batches_still_moves_the_next_offset() {
        // Cut by the size limit before the marker: nothing kept, the next fetch starts at 4.
        let bytes = batch(2, 2, 7);
        let kept =
            committed_batches(&bytes, Offset(2), Offset(9), &[(7, Offset(2))], 1 << 20).unwrap();
        assert!(kept.bytes.is_empty());
        assert_eq!(kept.next, Offset(4));
        // An aborted transaction last before the stable offset: its marker carries a reader to 5.
        let bytes = [batch(2, 2, 7), marker(4, 7, false)].concat();
        let kept =
            committed_batches(&bytes, Offset(2), Offset(5), &[(7, Offset(2))], 1 << 20).unwrap();
        assert_eq!((bases(&kept), kept.next), (vec![4], Offset(5)));
    }

    #[test]
    fn the_byte_limit_keeps_whole_batches_and_a_cut_batch_ends_the_walk() {
        let bytes = log();
        let first = batch(0, 2, -1).len();
        let kept = committed_batches(&bytes, Offset(0), Offset(12), &[], 1).unwrap();
        assert_eq!((bases(&kept), kept.next), (vec![0], Offset(2)));
        // The response cut in the middle of the second batch.
        let kept =
            committed_batches(&bytes[..first + 10], Offset(0), Offset(12), &[], 1 << 20).unwrap();
        assert_eq!((bases(&kept), kept.next), (vec![0], Offset(2)));
    }

    #[test]
    fn bytes_that_do_not_frame_a_batch_are_an_error_with_the_position() {
        let mut bytes = log();
        let first = batch(0, 2, -1).len();
        bytes[first + 16] = 9; // the second batch's magic
        let (at, _) = committed_batches(&bytes, Offset(0), Offset(12), &[], 1 << 20).unwrap_err();
        assert_eq!(at, first);
    }
}
