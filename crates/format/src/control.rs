//! Control records (`ControlRecordType`, `EndTransactionMarker`).
//!
//! A control batch (attribute bit 5) holds one control record. Its **key** is 4 bytes:
//! `int16 version` (negative is invalid; higher versions are read as v0) and `int16 type`.
//! A transaction marker's **value** is `int16 version, int32 coordinatorEpoch` (6 bytes; longer
//! values are accepted, extra bytes ignored).

use super::batch::{BatchSpec, encode_batch};
use super::bytes::{be_i16, be_i32};
use super::{DecodeError, DecodeErrorKind, NewRecord, Offset, Timestamp};

/// Size of a control record key.
pub const CONTROL_KEY_SIZE: usize = 4;
/// Size of an end-transaction marker value (version 0).
pub const END_TXN_MARKER_VALUE_SIZE: usize = 6;

/// The type of a control record.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ControlRecordType {
    /// Transaction aborted (0).
    Abort,
    /// Transaction committed (1).
    Commit,
    /// KRaft leader change (2).
    LeaderChange,
    /// KRaft snapshot header (3).
    SnapshotHeader,
    /// KRaft snapshot footer (4).
    SnapshotFooter,
    /// KRaft version (5).
    KraftVersion,
    /// KRaft voters (6).
    KraftVoters,
    /// Any other type id; readers ignore it.
    Unknown(i16),
}

impl ControlRecordType {
    /// The type with this id.
    pub fn from_id(id: i16) -> ControlRecordType {
        match id {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            2 => ControlRecordType::LeaderChange,
            3 => ControlRecordType::SnapshotHeader,
            4 => ControlRecordType::SnapshotFooter,
            5 => ControlRecordType::KraftVersion,
            6 => ControlRecordType::KraftVoters,
            _ => ControlRecordType::Unknown(id),
        }
    }

    /// The id stored in the key.
    pub fn id(self) -> i16 {
        match self {
            ControlRecordType::Abort => 0,
            ControlRecordType::Commit => 1,
            ControlRecordType::LeaderChange => 2,
            ControlRecordType::SnapshotHeader => 3,
            ControlRecordType::SnapshotFooter => 4,
            ControlRecordType::KraftVersion => 5,
            ControlRecordType::KraftVoters => 6,
            ControlRecordType::Unknown(id) => id,
        }
    }

    /// Kafka's enum name (`ABORT`, `COMMIT`, ..., `UNKNOWN`).
    pub fn name(self) -> &'static str {
        match self {
            ControlRecordType::Abort => "ABORT",
            ControlRecordType::Commit => "COMMIT",
            ControlRecordType::LeaderChange => "LEADER_CHANGE",
            ControlRecordType::SnapshotHeader => "SNAPSHOT_HEADER",
            ControlRecordType::SnapshotFooter => "SNAPSHOT_FOOTER",
            ControlRecordType::KraftVersion => "KRAFT_VERSION",
            ControlRecordType::KraftVoters => "KRAFT_VOTERS",
            ControlRecordType::Unknown(_) => "UNKNOWN",
        }
    }

    /// Whether this type is a transaction marker (ABORT or COMMIT).
    pub fn is_end_txn_marker(self) -> bool {
        matches!(self, ControlRecordType::Abort | ControlRecordType::Commit)
    }
}

/// A parsed control record key.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ControlKey {
    /// Key version (0 today; higher versions are read as 0).
    pub version: i16,
    /// What the control record says.
    pub record_type: ControlRecordType,
}

/// Parses a control record key (`ControlRecordType.parse`). A null key, fewer than 4 bytes or
/// a negative version is invalid.
pub fn parse_control_key(key: Option<&[u8]>) -> Result<ControlKey, DecodeError> {
    let key = key.ok_or_else(|| invalid("control record with a null key"))?;
    let version = be_i16(key, 0)?;
    if version < 0 {
        return Err(invalid("negative control record key version"));
    }
    let record_type = ControlRecordType::from_id(be_i16(key, 2)?);
    Ok(ControlKey { version, record_type })
}

/// A parsed end-transaction marker value.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EndTxnMarker {
    /// Value version (0 today).
    pub version: i16,
    /// Epoch of the transaction coordinator that wrote the marker.
    pub coordinator_epoch: i32,
}

/// Parses an end-transaction marker value (`EndTransactionMarker.deserializeValue`): at least 6
/// bytes, version >= 0; extra bytes are ignored.
pub fn parse_end_txn_marker(value: Option<&[u8]>) -> Result<EndTxnMarker, DecodeError> {
    let value = value.ok_or_else(|| invalid("transaction marker with a null value"))?;
    let version = be_i16(value, 0)?;
    if version < 0 {
        return Err(invalid("negative transaction marker version"));
    }
    Ok(EndTxnMarker { version, coordinator_epoch: be_i32(value, 2)? })
}

/// The record of a COMMIT or ABORT marker (key version 0, value version 0), as
/// `MemoryRecords.writeEndTransactionalMarker` builds it.
pub fn end_txn_marker_record(
    commit: bool,
    coordinator_epoch: i32,
    timestamp: Timestamp,
) -> NewRecord {
    let kind = if commit { ControlRecordType::Commit } else { ControlRecordType::Abort };
    let mut key = Vec::with_capacity(CONTROL_KEY_SIZE);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&kind.id().to_be_bytes());
    let mut value = Vec::with_capacity(END_TXN_MARKER_VALUE_SIZE);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    NewRecord { timestamp, key: Some(key), value: Some(value), headers: Vec::new() }
}

/// A whole marker batch: transactional + control, CreateTime, `baseSequence` -1, the
/// producer's id and epoch, uncompressed.
pub fn encode_end_txn_marker_batch(
    base_offset: Offset,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    timestamp: Timestamp,
) -> Result<Vec<u8>, DecodeError> {
    let spec = BatchSpec {
        base_offset,
        partition_leader_epoch,
        producer_id,
        producer_epoch,
        base_sequence: -1,
        is_transactional: true,
        is_control: true,
        ..BatchSpec::default()
    };
    encode_batch(&spec, &[end_txn_marker_record(commit, coordinator_epoch, timestamp)])
}

fn invalid(why: &'static str) -> DecodeError {
    DecodeError::new(0, DecodeErrorKind::InvalidRecord(why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode_batch;

    #[test]
    fn commit_marker_batch_matches_appendix_b() {
        let bytes =
            encode_end_txn_marker_batch(Offset(3), 0, 1000, 0, true, 0, 1_700_000_001_000).unwrap();
        assert_eq!(bytes.len(), 78);
        assert_eq!(&bytes[8..12], &66i32.to_be_bytes());
        assert_eq!(&bytes[17..21], &0x21BC_F166u32.to_be_bytes());
        assert_eq!(&bytes[21..23], &[0x00, 0x30]);
        assert_eq!(&bytes[61..], &[0x20, 0, 0, 0, 0x08, 0, 0, 0, 1, 0x0c, 0, 0, 0, 0, 0, 0, 0]);
        let batch = decode_batch(&bytes).unwrap();
        assert!(batch.info().is_control && batch.info().is_transactional);
        let r = batch.records().next().unwrap().unwrap();
        assert_eq!(r.offset, Offset(3));
        let key = parse_control_key(r.key).unwrap();
        assert_eq!(key.record_type, ControlRecordType::Commit);
        assert_eq!(parse_end_txn_marker(r.value).unwrap().coordinator_epoch, 0);
    }

    #[test]
    fn abort_marker_carries_its_coordinator_epoch() {
        let r = end_txn_marker_record(false, 42, 5);
        let key = parse_control_key(r.key.as_deref()).unwrap();
        assert_eq!(key, ControlKey { version: 0, record_type: ControlRecordType::Abort });
        let m = parse_end_txn_marker(r.value.as_deref()).unwrap();
        assert_eq!(m, EndTxnMarker { version: 0, coordinator_epoch: 42 });
    }

    #[test]
    fn unknown_types_and_higher_versions_are_read_not_rejected() {
        let key = parse_control_key(Some(&[0, 7, 0, 99])).unwrap();
        assert_eq!(key.version, 7);
        assert_eq!(key.record_type, ControlRecordType::Unknown(99));
        assert_eq!(key.record_type.name(), "UNKNOWN");
        // Longer marker values are accepted, extra bytes ignored.
        assert!(parse_end_txn_marker(Some(&[0, 0, 0, 0, 0, 1, 0xff, 0xff])).is_ok());
    }

    #[test]
    fn short_or_negative_control_data_is_invalid() {
        assert!(parse_control_key(None).is_err());
        assert!(parse_control_key(Some(&[0, 0, 1])).is_err());
        assert!(parse_control_key(Some(&[0xff, 0xff, 0, 1])).is_err());
        assert!(parse_end_txn_marker(Some(&[0, 0, 0, 0, 0])).is_err());
        assert!(parse_end_txn_marker(Some(&[0x80, 0, 0, 0, 0, 0])).is_err());
    }
}
