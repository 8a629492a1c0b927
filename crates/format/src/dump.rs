//! Lines as `kafka-dump-log.sh` (`DumpLogSegments`) prints them, for segment files shown in
//! Kafka's own words. Pure formatting: callers decode the bytes and supply positions.
//!
//! ```text
//! baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 73 magic: 2 compresscodec: none crc: 3863061579 isvalid: true
//! | offset: 0 CreateTime: 1700000000000 keySize: -1 valueSize: 5 sequence: -1 headerKeys: []
//! offset: 4821 position: 4167
//! timestamp: 1700000000123 offset: 4821
//! ```
//!
//! KRaft control records (types 2-6), which Kafka prints as JSON, are printed as
//! `controlType: <NAME>(<id>)`.

use std::fmt::Write as _;

use super::batch::increment_sequence;
use super::control::{parse_control_key, parse_end_txn_marker};
use super::{BatchInfo, Offset, Record, Timestamp};

/// `Log starting offset: <base>`, printed before the batches of a `.log` file.
pub fn log_starting_offset_line(base: Offset) -> String {
    format!("Log starting offset: {base}")
}

/// The shallow line of one batch (v2) or top-level legacy message at `position`; `is_valid` is
/// whether its CRC matched.
pub fn batch_line(info: &BatchInfo, position: u64, is_valid: bool) -> String {
    let mut line = String::with_capacity(320);
    if info.magic >= 2 {
        let last_offset_delta = info.last_offset.0.wrapping_sub(info.base_offset.0) as i32;
        let last_sequence = increment_sequence(info.base_sequence, last_offset_delta);
        let delete_horizon = if info.has_delete_horizon {
            format!("OptionalLong[{}]", info.base_timestamp)
        } else {
            "OptionalLong.empty".to_string()
        };
        let _ = write!(
            line,
            "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} \
             producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} \
             isControl: {} deleteHorizonMs: {}",
            info.base_offset,
            info.last_offset,
            info.records_count,
            info.base_sequence,
            last_sequence,
            info.producer_id,
            info.producer_epoch,
            info.partition_leader_epoch,
            info.is_transactional,
            info.is_control,
            delete_horizon,
        );
    } else {
        let _ = write!(line, "offset: {}", info.last_offset);
    }
    let _ = write!(
        line,
        " position: {} {}: {} size: {} magic: {} compresscodec: {} crc: {} isvalid: {}",
        position,
        info.timestamp_type.name(),
        info.max_timestamp,
        info.size,
        info.magic,
        info.compression.name(),
        info.crc,
        is_valid,
    );
    line
}

/// The `--deep-iteration` line of one record of the batch `info`. `print_data` appends
/// ` key: ...` and ` payload: ...` (lossy UTF-8; only when non-null) for non-control records.
/// `legacy_crc` is the CRC of a legacy message (ignored for v2).
pub fn record_line(
    info: &BatchInfo,
    record: &Record<'_>,
    print_data: bool,
    legacy_crc: Option<u32>,
) -> String {
    let mut line = String::with_capacity(160);
    write_record_line(&mut line, info, record, print_data, legacy_crc);
    line
}

/// [`record_line`] appended to `out` (no newline). A `.log` dump prints one line per record,
/// so this is the dump's inner loop: it writes straight into the text, without a `String`
/// per line or the formatting machinery per number.
pub fn write_record_line(
    out: &mut String,
    info: &BatchInfo,
    record: &Record<'_>,
    print_data: bool,
    legacy_crc: Option<u32>,
) {
    let mut n = itoa::Buffer::new();
    out.push_str("| offset: ");
    out.push_str(n.format(record.offset.0));
    out.push(' ');
    out.push_str(info.timestamp_type.name());
    out.push_str(": ");
    out.push_str(n.format(record.timestamp));
    out.push_str(" keySize: ");
    out.push_str(n.format(record.key.map_or(-1, |k| k.len() as i64)));
    out.push_str(" valueSize: ");
    out.push_str(n.format(record.value.map_or(-1, |v| v.len() as i64)));
    if info.magic >= 2 {
        out.push_str(" sequence: ");
        out.push_str(n.format(record.sequence));
        out.push_str(" headerKeys: [");
        for (i, h) in record.headers.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_lossy(out, h.key);
        }
        out.push(']');
    } else if let Some(crc) = legacy_crc {
        out.push_str(" isValid: true crc: ");
        out.push_str(n.format(crc));
    }
    if info.is_control {
        out.push_str(&control_suffix(record));
    } else if print_data {
        if let Some(k) = record.key {
            out.push_str(" key: ");
            push_lossy(out, k);
        }
        if let Some(v) = record.value {
            out.push_str(" payload: ");
            push_lossy(out, v);
        }
    }
}

/// Appends `bytes` as `String::from_utf8_lossy` shows them. Valid UTF-8 (most keys and
/// payloads) is checked by `str::from_utf8`, which is several times faster on ASCII than the
/// chunk-by-chunk walk of the lossy conversion; only invalid bytes take that walk.
fn push_lossy(out: &mut String, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) => out.push_str(s),
        Err(_) => out.push_str(&String::from_utf8_lossy(bytes)),
    }
}

fn control_suffix(record: &Record<'_>) -> String {
    match parse_control_key(record.key) {
        Ok(key) if key.record_type.is_end_txn_marker() => {
            match parse_end_txn_marker(record.value) {
                Ok(m) => format!(
                    " endTxnMarker: {} coordinatorEpoch: {}",
                    key.record_type.name(),
                    m.coordinator_epoch
                ),
                Err(e) => format!(" endTxnMarker: {} invalid: {e}", key.record_type.name()),
            }
        }
        Ok(key) => format!(" controlType: {}({})", key.record_type.name(), key.record_type.id()),
        Err(e) => format!(" controlType: invalid ({e})"),
    }
}

/// One `.index` entry: `offset: <absolute offset> position: <position>`.
pub fn index_entry_line(offset: Offset, position: u32) -> String {
    format!("offset: {offset} position: {position}")
}

/// One `.timeindex` entry: `timestamp: <ms> offset: <absolute offset>`.
pub fn time_index_entry_line(timestamp: Timestamp, offset: Offset) -> String {
    format!("timestamp: {timestamp} offset: {offset}")
}

/// The trailer for bytes at the end of a `.log` file that do not form a whole batch.
pub fn invalid_bytes_line(count: u64, file_name: &str) -> String {
    format!("Found {count} invalid bytes at the end of {file_name}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::encode_end_txn_marker_batch;
    use crate::{BatchSpec, NewRecord, decode_batch, encode_batch, legacy, verify_crc};

    #[test]
    fn appendix_b_batch_prints_the_spec_line() {
        let bytes = encode_batch(
            &BatchSpec::default(),
            &[NewRecord {
                timestamp: 1_700_000_000_000,
                key: None,
                value: Some(b"hello".to_vec()),
                headers: vec![],
            }],
        )
        .unwrap();
        let batch = decode_batch(&bytes).unwrap();
        assert_eq!(
            batch_line(batch.info(), 0, verify_crc(&bytes).is_ok()),
            "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 \
             producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false \
             deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 73 \
             magic: 2 compresscodec: none crc: 3863061579 isvalid: true"
        );
        let record = batch.records().next().unwrap().unwrap();
        assert_eq!(
            record_line(batch.info(), &record, false, None),
            "| offset: 0 CreateTime: 1700000000000 keySize: -1 valueSize: 5 sequence: -1 headerKeys: []"
        );
        assert_eq!(
            record_line(batch.info(), &record, true, None),
            "| offset: 0 CreateTime: 1700000000000 keySize: -1 valueSize: 5 sequence: -1 headerKeys: [] payload: hello"
        );
    }

    #[test]
    fn key_payload_and_header_keys_are_printed() {
        let r = NewRecord {
            timestamp: 1_700_000_000_005,
            key: Some(b"abc".to_vec()),
            value: Some(b"hello".to_vec()),
            headers: vec![(b"k1".to_vec(), None), (b"k2".to_vec(), Some(b"x".to_vec()))],
        };
        let spec = BatchSpec {
            base_offset: Offset(5),
            base_sequence: 5,
            producer_id: 1,
            ..BatchSpec::default()
        };
        let bytes = encode_batch(&spec, &[r]).unwrap();
        let batch = decode_batch(&bytes).unwrap();
        let record = batch.records().next().unwrap().unwrap();
        assert_eq!(
            record_line(batch.info(), &record, true, None),
            "| offset: 5 CreateTime: 1700000000005 keySize: 3 valueSize: 5 sequence: 5 headerKeys: [k1,k2] key: abc payload: hello"
        );
    }

    #[test]
    fn commit_marker_prints_its_crc_and_end_txn_marker() {
        let bytes =
            encode_end_txn_marker_batch(Offset(3), 0, 1000, 0, true, 0, 1_700_000_001_000).unwrap();
        let batch = decode_batch(&bytes).unwrap();
        let line = batch_line(batch.info(), 146, true);
        assert!(line.contains("isTransactional: true isControl: true"), "{line}");
        assert!(line.contains(&format!("crc: {} isvalid: true", 0x21BC_F166u32)), "{line}");
        assert!(line.contains("producerId: 1000 producerEpoch: 0"), "{line}");
        let record = batch.records().next().unwrap().unwrap();
        assert_eq!(
            record_line(batch.info(), &record, true, None),
            "| offset: 3 CreateTime: 1700000001000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0"
        );
    }

    #[test]
    fn legacy_messages_print_offset_and_record_crc() {
        let bytes = legacy::encode_message(Offset(9), 1, 0, 1_600_000_000_000, None, Some(b"v"));
        let m = legacy::parse_message(&bytes).unwrap();
        let batch = decode_batch(&bytes).unwrap();
        assert_eq!(
            batch_line(batch.info(), 0, true),
            format!(
                "offset: 9 position: 0 CreateTime: 1600000000000 size: {} magic: 1 compresscodec: none crc: {} isvalid: true",
                bytes.len(),
                m.crc
            )
        );
        let record = batch.records().next().unwrap().unwrap();
        assert_eq!(
            record_line(batch.info(), &record, false, Some(m.crc)),
            format!(
                "| offset: 9 CreateTime: 1600000000000 keySize: -1 valueSize: 1 isValid: true crc: {}",
                m.crc
            )
        );
    }

    #[test]
    fn index_lines_use_absolute_offsets() {
        assert_eq!(index_entry_line(Offset(4821), 4167), "offset: 4821 position: 4167");
        assert_eq!(
            time_index_entry_line(1_700_000_000_123, Offset(4821)),
            "timestamp: 1700000000123 offset: 4821"
        );
        assert_eq!(log_starting_offset_line(Offset(0)), "Log starting offset: 0");
        assert_eq!(
            invalid_bytes_line(5, "00000000000000000000.log"),
            "Found 5 invalid bytes at the end of 00000000000000000000.log"
        );
    }
}
