//! `kafka-dump-log.sh` texts rendered whole: `.log` bytes, `.index`, `.timeindex` and `.txnindex`.

use std::fmt::Write as _;

use topicfs_format::dump::{
    batch_line, index_entry_line, invalid_bytes_line, log_starting_offset_line,
    time_index_entry_line, write_record_line,
};
use topicfs_format::index_entry::{
    OFFSET_INDEX_ENTRY_SIZE, OffsetPosition, TIME_INDEX_ENTRY_SIZE, TimestampOffset,
};
use topicfs_format::{Compression, Offset, decode_batch, legacy, verify_crc};
use topicfs_source::error::Result;

use super::TXN_INDEX_ENTRY_SIZE;
use super::entries::{Entries, Entry};

/// `kafka-dump-log.sh --print-data-log` of a `.log` file's bytes, rendered whole: the
/// reference a [`LogDump`](super::LogDump) reads as, for inputs small enough to hold.
pub fn dump_log(label: &str, base: Offset, bytes: &[u8]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Dumping {label}");
    let _ = writeln!(out, "{}", log_starting_offset_line(base));
    let mut entries = Entries::new(bytes);
    for e in entries.by_ref() {
        render_entry(&e, &mut out);
    }
    if entries.invalid_tail() > 0 {
        let name = label.rsplit('/').next().unwrap_or(label);
        let _ = writeln!(out, "{}", invalid_bytes_line(entries.invalid_tail() as u64, name));
    }
    out
}

/// The lines of one entry in a `.log` dump: the batch line, then its records' lines (or why
/// they could not be read).
pub(super) fn render_entry(e: &Entry<'_>, out: &mut String) {
    let valid = verify_crc(e.bytes).is_ok();
    let _ = writeln!(out, "{}", batch_line(&e.info, e.position, valid));
    if let Err(why) = dump_records(e, out) {
        let _ = writeln!(
            out,
            "Could not read the records of the batch at position {}: {why}",
            e.position
        );
    }
}

/// The `| offset: ...` lines of one entry.
fn dump_records(e: &Entry<'_>, out: &mut String) -> Result<(), topicfs_format::DecodeError> {
    let batch = decode_batch(e.bytes)?;
    // Legacy messages print their own CRC: the entry's, or each inner message's.
    let mut legacy_crcs: Vec<u32> = Vec::new();
    if e.info.magic < 2 {
        if e.info.compression == Compression::None {
            legacy_crcs.push(e.info.crc);
        } else {
            let contents = legacy::decode_wrapper(e.bytes)?;
            let mut at = 0;
            while let Some(rest) = contents.inner.get(at..).filter(|r| !r.is_empty()) {
                let m = legacy::parse_message(rest)?;
                legacy_crcs.push(m.crc);
                at = at.saturating_add(m.size);
            }
        }
    }
    for (i, record) in batch.records().enumerate() {
        let record = record?;
        let crc = legacy_crcs.get(i).copied();
        write_record_line(out, batch.info(), &record, true, crc);
        out.push('\n');
    }
    Ok(())
}

/// The dump of a `.index` file's bytes.
pub fn dump_offset_index(label: &str, base: Offset, bytes: &[u8]) -> String {
    let mut out = format!("Dumping {label}\n");
    for (i, e) in offset_entries(bytes).into_iter().enumerate() {
        if i > 0 && e.relative_offset.0 == 0 && e.position == 0 {
            break;
        }
        let _ = writeln!(out, "{}", index_entry_line(e.offset(base), e.position));
    }
    out
}

/// The dump of a `.timeindex` file's bytes.
pub fn dump_time_index(label: &str, base: Offset, bytes: &[u8]) -> String {
    let mut out = format!("Dumping {label}\n");
    for (i, e) in time_entries(bytes).into_iter().enumerate() {
        if i > 0 && e.relative_offset.0 == 0 && e.timestamp == 0 {
            break;
        }
        let _ = writeln!(out, "{}", time_index_entry_line(e.timestamp, e.offset(base)));
    }
    out
}

/// One `.txnindex` entry (Kafka's `AbortedTxn` with its version).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct TxnEntry {
    pub(super) version: i16,
    pub(super) producer_id: i64,
    pub(super) first_offset: i64,
    pub(super) last_offset: i64,
    pub(super) last_stable_offset: i64,
}

pub(super) fn txn_entries(bytes: &[u8]) -> Vec<TxnEntry> {
    topicfs_format::txn_index::entries(bytes)
        .map(|(_, e)| TxnEntry {
            version: e.version,
            producer_id: e.producer_id,
            first_offset: e.first_offset.0,
            last_offset: e.last_offset.0,
            last_stable_offset: e.last_stable_offset.0,
        })
        .collect()
}

/// The dump of a `.txnindex` file's bytes.
pub fn dump_txn_index(label: &str, bytes: &[u8]) -> String {
    let mut out = format!("Dumping {label}\n");
    for t in txn_entries(bytes) {
        let _ = writeln!(
            out,
            "version: {} producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
            t.version, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset
        );
    }
    let rest = bytes.len() % TXN_INDEX_ENTRY_SIZE;
    if rest > 0 {
        let name = label.rsplit('/').next().unwrap_or(label);
        let _ = writeln!(out, "{}", invalid_bytes_line(rest as u64, name));
    }
    out
}

pub(super) fn offset_entries(bytes: &[u8]) -> Vec<OffsetPosition> {
    (0..bytes.len() / OFFSET_INDEX_ENTRY_SIZE)
        .map_while(|n| OffsetPosition::nth(bytes, n))
        .collect()
}

pub(super) fn time_entries(bytes: &[u8]) -> Vec<TimestampOffset> {
    (0..bytes.len() / TIME_INDEX_ENTRY_SIZE).map_while(|n| TimestampOffset::nth(bytes, n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumps_stop_at_the_first_unwritten_index_slot() {
        let index = [
            OffsetPosition { relative_offset: topicfs_format::RelativeOffset(3), position: 100 }
                .encode(),
            [0u8; 8],
        ]
        .concat();
        assert_eq!(
            dump_offset_index("t-0/00000000000000000010.index", Offset(10), &index),
            "Dumping t-0/00000000000000000010.index\noffset: 13 position: 100\n"
        );
    }
}
