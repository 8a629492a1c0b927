//! The records of Kafka's KRaft metadata log (`__cluster_metadata-0`) and of its snapshots
//! (`<end offset>-<epoch>.checkpoint`). Pure: bytes in, values out.
//!
//! Each record's **value** (the key is null) is framed by `AbstractApiMessageSerde`:
//!
//! ```text
//! unsigned varint  frame version (1; 0 was KRaft's 2.8 preview and is refused, as Kafka does)
//! unsigned varint  api key       (which record: the "apiKey" of its JSON schema)
//! unsigned varint  version       (of that record's schema)
//! ...              the record, in Kafka's message serialization at that version
//! ```
//!
//! and nothing may follow the record ("garbage after" is an error in Kafka too). The records
//! read here are flexible at every version they have, so strings are *compact* (unsigned varint
//! length + 1, 0 = null), a `uuid` is 16 bytes, and every record ends with a tagged-field
//! section (a count, then tag, size and bytes per field; all skipped: none of these records
//! defines a tagged field). Schemas, from apache/kafka
//! `metadata/src/main/resources/common/metadata/` (as of commit 1eb7644, 2024-10):
//!
//! | api key | record | versions read | fields |
//! |---|---|---|---|
//! | 2 | `TopicRecord` | 0 (validVersions "0", flexible "0+") | `Name` string, `TopicId` uuid |
//! | 4 | `ConfigRecord` | 0 (validVersions "0", flexible "0+") | `ResourceType` int8, `ResourceName` string, `Name` string, `Value` string nullable "0+" (null: the setting is deleted) |
//! | 9 | `RemoveTopicRecord` | 0 (validVersions "0", flexible "0+") | `TopicId` uuid |
//! | 23 | `BeginTransactionRecord` | 0 (flexible "0+") | `Name` nullable string |
//! | 24 | `EndTransactionRecord` | 0 (flexible "0+") | none |
//! | 25 | `AbortTransactionRecord` | 0 (flexible "0+") | `Reason` nullable string |
//!
//! Any other api key (PartitionRecord, RegisterBrokerRecord, FeatureLevelRecord, ...) is
//! [`MetadataRecord::Other`]: its body is not read, so a record type this reader does not know
//! is skipped safely. A version of the records above that this reader does not know is an
//! error (its layout cannot be guessed); the replay skips that record as Kafka's loader skips
//! a record it cannot replay.
//!
//! Snapshots are framed by two control records (in control batches, key `int16 version,
//! int16 type`, see [`super::control`]), whose values are `MessageUtil.toByteBuffer` of
//! apache/kafka `clients/src/main/resources/common/message/SnapshotHeaderRecord.json` (type 3:
//! `Version` int16, `LastContainedLogTimestamp` int64, flexible "0+") and
//! `SnapshotFooterRecord.json` (type 4: `Version` int16, flexible "0+"), without a frame:
//! [`decode_snapshot_header`], [`decode_snapshot_footer`].
//!
//! Errors carry the byte position inside the value; no input panics.

use super::{DecodeError, DecodeErrorKind};

/// The only frame version Kafka reads (`AbstractApiMessageSerde.DEFAULT_FRAME_VERSION`).
pub const FRAME_VERSION: u32 = 1;
/// `TopicRecord`'s api key.
pub const TOPIC_RECORD: u16 = 2;
/// `ConfigRecord`'s api key.
pub const CONFIG_RECORD: u16 = 4;
/// `RemoveTopicRecord`'s api key.
pub const REMOVE_TOPIC_RECORD: u16 = 9;
/// `BeginTransactionRecord`'s api key (KIP-868 metadata transactions).
pub const BEGIN_TRANSACTION_RECORD: u16 = 23;
/// `EndTransactionRecord`'s api key.
pub const END_TRANSACTION_RECORD: u16 = 24;
/// `AbortTransactionRecord`'s api key.
pub const ABORT_TRANSACTION_RECORD: u16 = 25;

/// `ConfigResource.Type.TOPIC`.
pub const RESOURCE_TOPIC: i8 = 2;
/// `ConfigResource.Type.BROKER`: an empty resource name is the cluster-wide default, a node id
/// one broker's own setting.
pub const RESOURCE_BROKER: i8 = 4;

/// A topic id (`Uuid`): 16 bytes, most significant first.
pub type TopicId = [u8; 16];

/// One decoded metadata record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataRecord {
    /// `TopicRecord`: a topic exists with this name and id.
    Topic {
        /// The topic name.
        name: String,
        /// The topic's id (what `partition.metadata` holds, base64 there).
        topic_id: TopicId,
    },
    /// `RemoveTopicRecord`: the topic with this id is deleted, with its configs.
    RemoveTopic {
        /// The deleted topic's id.
        topic_id: TopicId,
    },
    /// `ConfigRecord`: sets (`value` is `Some`) or deletes (`None`) one setting of a resource.
    Config {
        /// [`RESOURCE_TOPIC`], [`RESOURCE_BROKER`], or another `ConfigResource.Type` id.
        resource_type: i8,
        /// The topic name, the broker's node id, or empty (a cluster-wide broker default).
        resource_name: String,
        /// The setting's name (a topic-level name for a topic, a broker name for a broker).
        name: String,
        /// The value; `None` deletes the setting.
        value: Option<String>,
    },
    /// `BeginTransactionRecord`: the records up to the matching end or abort are one change.
    BeginTransaction,
    /// `EndTransactionRecord`: the transaction's records take effect.
    EndTransaction,
    /// `AbortTransactionRecord`: the transaction's records are dropped.
    AbortTransaction,
    /// Any other record type; its body was not read.
    Other {
        /// The record's api key.
        api_key: u16,
        /// The record's version.
        version: u16,
    },
}

/// Decodes one metadata record value (frame, then the record).
pub fn decode_metadata_record(value: &[u8]) -> Result<MetadataRecord, DecodeError> {
    let mut r = Reader { buf: value, pos: 0 };
    let frame_at = r.pos;
    match r.unsigned_varint()? {
        FRAME_VERSION => {}
        0 => return Err(invalid(frame_at, "frame version 0 (KRaft's 2.8 preview format)")),
        _ => return Err(invalid(frame_at, "unknown frame version (only 1 is known)")),
    }
    let api_key = r.short()?;
    let version_at = r.pos;
    let version = r.short()?;
    let known = |max: u16| {
        if version > max {
            Err(invalid(version_at, "a version of this record type this reader does not know"))
        } else {
            Ok(())
        }
    };
    let record = match api_key {
        TOPIC_RECORD => {
            known(0)?;
            let name = r.compact_string()?;
            let topic_id = r.uuid()?;
            MetadataRecord::Topic { name, topic_id }
        }
        REMOVE_TOPIC_RECORD => {
            known(0)?;
            MetadataRecord::RemoveTopic { topic_id: r.uuid()? }
        }
        CONFIG_RECORD => {
            known(0)?;
            let [resource_type] = r.array::<1>()?;
            let resource_name = r.compact_string()?;
            let name = r.compact_string()?;
            let value = r.nullable_compact_string()?;
            MetadataRecord::Config {
                resource_type: resource_type as i8,
                resource_name,
                name,
                value,
            }
        }
        BEGIN_TRANSACTION_RECORD => {
            known(0)?;
            r.nullable_compact_string()?;
            MetadataRecord::BeginTransaction
        }
        END_TRANSACTION_RECORD => {
            known(0)?;
            MetadataRecord::EndTransaction
        }
        ABORT_TRANSACTION_RECORD => {
            known(0)?;
            r.nullable_compact_string()?;
            MetadataRecord::AbortTransaction
        }
        _ => return Ok(MetadataRecord::Other { api_key, version }),
    };
    r.skip_tagged_fields()?;
    r.end()?;
    Ok(record)
}

/// A snapshot's first record (`SnapshotHeaderRecord`, control type 3).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SnapshotHeader {
    /// The header's `Version` field (0).
    pub version: i16,
    /// The append time of the last log record the snapshot contains.
    pub last_contained_log_timestamp: i64,
}

/// Decodes a `SnapshotHeaderRecord` control record value (version 0, flexible).
pub fn decode_snapshot_header(value: &[u8]) -> Result<SnapshotHeader, DecodeError> {
    let mut r = Reader { buf: value, pos: 0 };
    let version = i16::from_be_bytes(r.array()?);
    let last_contained_log_timestamp = i64::from_be_bytes(r.array()?);
    r.skip_tagged_fields()?;
    r.end()?;
    Ok(SnapshotHeader { version, last_contained_log_timestamp })
}

/// Decodes a `SnapshotFooterRecord` control record value (version 0, flexible): its `Version`.
pub fn decode_snapshot_footer(value: &[u8]) -> Result<i16, DecodeError> {
    let mut r = Reader { buf: value, pos: 0 };
    let version = i16::from_be_bytes(r.array()?);
    r.skip_tagged_fields()?;
    r.end()?;
    Ok(version)
}

fn invalid(at: usize, why: &'static str) -> DecodeError {
    DecodeError::new(at, DecodeErrorKind::InvalidRecord(why))
}

/// A cursor over one value; every read is bounds-checked.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let available = self.buf.len().saturating_sub(self.pos);
        let bytes = self.pos.checked_add(n).and_then(|end| self.buf.get(self.pos..end)).ok_or(
            DecodeError::new(self.pos, DecodeErrorKind::Truncated { needed: n, available }),
        )?;
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let at = self.pos;
        self.take(N)?.try_into().map_err(|_| invalid(at, "short field"))
    }

    /// An unsigned varint (`ByteUtils.readUnsignedVarint`), through the shared reader.
    fn unsigned_varint(&mut self) -> Result<u32, DecodeError> {
        crate::varint::read_unsigned_varint(self.buf, &mut self.pos)
    }

    /// An unsigned varint that must fit a Java `short` (the frame's api key and version).
    fn short(&mut self) -> Result<u16, DecodeError> {
        let at = self.pos;
        let v = self.unsigned_varint()?;
        u16::try_from(v)
            .ok()
            .filter(|v| *v <= i16::MAX as u16)
            .ok_or_else(|| invalid(at, "api key or version above 32767"))
    }

    fn uuid(&mut self) -> Result<[u8; 16], DecodeError> {
        self.array()
    }

    /// A nullable compact string: `None` for length 0.
    fn nullable_compact_string(&mut self) -> Result<Option<String>, DecodeError> {
        let at = self.pos;
        let n = self.unsigned_varint()?;
        if n == 0 {
            return Ok(None);
        }
        let len = (n - 1) as usize;
        if len > i16::MAX as usize {
            return Err(invalid(at, "string longer than 32767 bytes"));
        }
        let bytes_at = self.pos;
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes)
            .map(|s| Some(s.to_string()))
            .map_err(|_| invalid(bytes_at, "string is not UTF-8"))
    }

    /// A compact string that may not be null.
    fn compact_string(&mut self) -> Result<String, DecodeError> {
        let at = self.pos;
        self.nullable_compact_string()?.ok_or_else(|| invalid(at, "null for a non-nullable string"))
    }

    /// A tagged-field section: a count, then (tag, size, bytes) each; all skipped.
    fn skip_tagged_fields(&mut self) -> Result<(), DecodeError> {
        let count = self.unsigned_varint()?;
        for _ in 0..count {
            self.unsigned_varint()?;
            let size = self.unsigned_varint()?;
            self.take(size as usize)?;
        }
        Ok(())
    }

    fn end(&self) -> Result<(), DecodeError> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(invalid(self.pos, "bytes after the end of the record"))
        }
    }
}

/// Encoders of the records above, for tests that build metadata logs (the byte-level
/// fixtures come from an independent Python encoder, `tests/fixtures/generate_kraft.py`).
/// Other crates' tests reach them through the `test-support` feature.
#[cfg(any(test, feature = "test-support"))]
pub mod encode {
    use super::*;

    fn uvarint(out: &mut Vec<u8>, mut v: u32) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn compact(out: &mut Vec<u8>, s: Option<&str>) {
        match s {
            None => uvarint(out, 0),
            Some(s) => {
                uvarint(out, s.len() as u32 + 1);
                out.extend_from_slice(s.as_bytes());
            }
        }
    }

    /// The framed value of `record` (version 0, no tagged fields); `Other` gets an empty body.
    pub fn encode_metadata_record(record: &MetadataRecord) -> Vec<u8> {
        let mut out = vec![FRAME_VERSION as u8];
        let key = match record {
            MetadataRecord::Topic { .. } => TOPIC_RECORD,
            MetadataRecord::RemoveTopic { .. } => REMOVE_TOPIC_RECORD,
            MetadataRecord::Config { .. } => CONFIG_RECORD,
            MetadataRecord::BeginTransaction => BEGIN_TRANSACTION_RECORD,
            MetadataRecord::EndTransaction => END_TRANSACTION_RECORD,
            MetadataRecord::AbortTransaction => ABORT_TRANSACTION_RECORD,
            MetadataRecord::Other { api_key, .. } => *api_key,
        };
        uvarint(&mut out, u32::from(key));
        let version = match record {
            MetadataRecord::Other { version, .. } => *version,
            _ => 0,
        };
        uvarint(&mut out, u32::from(version));
        match record {
            MetadataRecord::Topic { name, topic_id } => {
                compact(&mut out, Some(name));
                out.extend_from_slice(topic_id);
            }
            MetadataRecord::RemoveTopic { topic_id } => out.extend_from_slice(topic_id),
            MetadataRecord::Config { resource_type, resource_name, name, value } => {
                out.push(*resource_type as u8);
                compact(&mut out, Some(resource_name));
                compact(&mut out, Some(name));
                compact(&mut out, value.as_deref());
            }
            MetadataRecord::BeginTransaction | MetadataRecord::AbortTransaction => {
                compact(&mut out, None);
            }
            MetadataRecord::EndTransaction | MetadataRecord::Other { .. } => {}
        }
        out.push(0); // no tagged fields
        out
    }

    /// A `SnapshotHeaderRecord` value.
    pub fn encode_snapshot_header(last_contained_log_timestamp: i64) -> Vec<u8> {
        let mut out = 0i16.to_be_bytes().to_vec();
        out.extend_from_slice(&last_contained_log_timestamp.to_be_bytes());
        out.push(0);
        out
    }

    /// A `SnapshotFooterRecord` value.
    pub fn encode_snapshot_footer() -> Vec<u8> {
        vec![0, 0, 0]
    }
}

#[cfg(test)]
mod tests {
    use super::encode::*;
    use super::*;

    const ID: TopicId = [0x10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff];

    /// Every record with its bytes as the schemas lay them out, written by hand.
    fn samples() -> Vec<(MetadataRecord, Vec<u8>)> {
        let mut topic = vec![1, 2, 0, 7];
        topic.extend_from_slice(b"orders");
        topic.extend_from_slice(&ID);
        topic.push(0);
        let mut remove = vec![1, 9, 0];
        remove.extend_from_slice(&ID);
        remove.push(0);
        let mut config = vec![1, 4, 0, 2, 10];
        config.extend_from_slice(b"compacted");
        config.push(15);
        config.extend_from_slice(b"cleanup.policy");
        config.push(8);
        config.extend_from_slice(b"compact");
        config.push(0);
        let mut deleted = vec![1, 4, 0, 4, 1, 17];
        deleted.extend_from_slice(b"log.retention.ms");
        deleted.extend_from_slice(&[0, 0]);
        vec![
            (MetadataRecord::Topic { name: "orders".into(), topic_id: ID }, topic),
            (MetadataRecord::RemoveTopic { topic_id: ID }, remove),
            (
                MetadataRecord::Config {
                    resource_type: RESOURCE_TOPIC,
                    resource_name: "compacted".into(),
                    name: "cleanup.policy".into(),
                    value: Some("compact".into()),
                },
                config,
            ),
            (
                MetadataRecord::Config {
                    resource_type: RESOURCE_BROKER,
                    resource_name: String::new(),
                    name: "log.retention.ms".into(),
                    value: None,
                },
                deleted,
            ),
            (MetadataRecord::BeginTransaction, vec![1, 23, 0, 0, 0]),
            (MetadataRecord::EndTransaction, vec![1, 24, 0, 0]),
            (MetadataRecord::AbortTransaction, vec![1, 25, 0, 0, 0]),
        ]
    }

    #[test]
    fn each_record_type_decodes_from_its_schemas_layout() {
        for (record, bytes) in samples() {
            assert_eq!(decode_metadata_record(&bytes), Ok(record.clone()), "{record:?}");
            assert_eq!(encode_metadata_record(&record), bytes, "{record:?}");
        }
    }

    #[test]
    fn every_short_prefix_of_a_record_is_refused_without_panicking() {
        for (record, bytes) in samples() {
            for n in 0..bytes.len() {
                let err = decode_metadata_record(&bytes[..n]).unwrap_err();
                assert!(err.at <= n, "{record:?} cut at {n}: error at {}", err.at);
            }
        }
        let header = encode_snapshot_header(5);
        for n in 0..header.len() {
            assert!(decode_snapshot_header(&header[..n]).is_err());
        }
        assert!(decode_snapshot_footer(&[0]).is_err());
    }

    #[test]
    fn other_api_keys_are_skipped_without_reading_their_body() {
        // FeatureLevelRecord (12) v0: name "metadata.version", level 20, no tagged fields.
        let mut feature = vec![1, 12, 0, 17];
        feature.extend_from_slice(b"metadata.version");
        feature.extend_from_slice(&[0, 20, 0]);
        assert_eq!(
            decode_metadata_record(&feature),
            Ok(MetadataRecord::Other { api_key: 12, version: 0 })
        );
        // An api key above 127 takes two varint bytes.
        assert_eq!(
            decode_metadata_record(&[1, 0x90, 0x03, 5, 0xff]),
            Ok(MetadataRecord::Other { api_key: 400, version: 5 })
        );
    }

    #[test]
    fn frames_and_versions_this_reader_does_not_know_are_errors_at_their_byte() {
        let err = decode_metadata_record(&[0, 2, 0]).unwrap_err();
        assert_eq!((err.at, err.to_string().contains("2.8")), (0, true), "{err}");
        assert_eq!(decode_metadata_record(&[2, 2, 0]).unwrap_err().at, 0);
        // TopicRecord version 1 does not exist yet.
        assert_eq!(decode_metadata_record(&[1, 2, 1, 1, 0]).unwrap_err().at, 2);
        // An api key past a Java short.
        assert_eq!(decode_metadata_record(&[1, 0x80, 0x80, 0x02, 0]).unwrap_err().at, 1);
        // A varint of six bytes.
        let err = decode_metadata_record(&[1, 0x80, 0x80, 0x80, 0x80, 0x80, 0]).unwrap_err();
        assert_eq!((err.at, &err.kind), (1, &DecodeErrorKind::InvalidVarint));
    }

    #[test]
    fn trailing_bytes_null_names_and_bad_utf8_are_errors_at_their_byte() {
        let (_, mut topic) = samples().remove(0);
        topic.push(0);
        assert_eq!(decode_metadata_record(&topic).unwrap_err().at, topic.len() - 1);
        // A null topic name (compact length 0) where the schema has no nullableVersions.
        let mut null_name = vec![1, 2, 0, 0];
        null_name.extend_from_slice(&ID);
        null_name.push(0);
        assert_eq!(decode_metadata_record(&null_name).unwrap_err().at, 3);
        let mut bad = vec![1, 2, 0, 3, 0xff, 0xfe];
        bad.extend_from_slice(&ID);
        bad.push(0);
        assert_eq!(decode_metadata_record(&bad).unwrap_err().at, 4);
    }

    #[test]
    fn tagged_fields_a_newer_writer_adds_are_skipped() {
        let mut remove = vec![1, 9, 0];
        remove.extend_from_slice(&ID);
        // two tagged fields: tag 0 with 3 bytes, tag 7 with 0 bytes
        remove.extend_from_slice(&[2, 0, 3, 9, 9, 9, 7, 0]);
        assert_eq!(
            decode_metadata_record(&remove),
            Ok(MetadataRecord::RemoveTopic { topic_id: ID })
        );
        remove.truncate(remove.len() - 1);
        assert!(decode_metadata_record(&remove).is_err());
    }

    #[test]
    fn snapshot_header_and_footer_decode() {
        assert_eq!(
            decode_snapshot_header(&encode_snapshot_header(1_767_225_600_000)),
            Ok(SnapshotHeader { version: 0, last_contained_log_timestamp: 1_767_225_600_000 })
        );
        assert_eq!(decode_snapshot_footer(&encode_snapshot_footer()), Ok(0));
        assert!(decode_snapshot_footer(&[0, 0, 0, 1]).is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_decode_or_fail_without_panicking(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let _ = decode_metadata_record(&bytes);
            let _ = decode_snapshot_header(&bytes);
            let _ = decode_snapshot_footer(&bytes);
        }

        #[test]
        fn config_records_round_trip(
            resource_type in proptest::prelude::any::<i8>(),
            resource_name in ".{0,20}",
            name in "[a-z.]{1,30}",
            value in proptest::option::of(".{0,40}"),
        ) {
            let record = MetadataRecord::Config { resource_type, resource_name, name, value };
            proptest::prop_assert_eq!(decode_metadata_record(&encode_metadata_record(&record)), Ok(record));
        }
    }
}
