//! The records of Kafka's `__consumer_offsets` topic (the group coordinator's log), and which
//! partition of it holds a group. Pure: bytes in, bytes out.
//!
//! Every record's key and value start with an `int16` version; fields are big-endian, strings an
//! `int16` length then UTF-8 (versions below the flexible ones):
//!
//! | record | key | value |
//! |---|---|---|
//! | offset commit | v0, v1: group, topic, `int32` partition | see [`OffsetCommitValue`] |
//! | group metadata | v2: group | the group's members (not decoded here) |
//! | newer coordinator records (KIP-848 groups, share groups) | v3 and up | not decoded here |
//!
//! A record with a null value is a tombstone: the key is deleted. The latest record for a key
//! wins (the topic is compacted). Offset commit values:
//!
//! | version | fields after the version |
//! |---|---|
//! | 0, 2 | `int64` offset, string metadata, `int64` commit timestamp |
//! | 1 | `int64` offset, string metadata, `int64` commit timestamp, `int64` expire timestamp |
//! | 3 | `int64` offset, `int32` leader epoch, string metadata, `int64` commit timestamp |
//! | 4 | the v3 fields, flexible: metadata a compact string, then a tagged-field section |
//!
//! topicfs writes key v1 and value v3, what a broker writes for a commit without an expire time
//! (`GroupMetadataManager`/`OffsetCommitValue` "highest supported non-flexible version").

use super::{DecodeError, DecodeErrorKind, Offset, Timestamp};

/// `offsets.topic.num.partitions`' default: partitions of `__consumer_offsets`.
pub const DEFAULT_OFFSETS_PARTITIONS: u32 = 50;
/// The topic the group coordinator keeps its state in.
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Key version of an offset commit that topicfs writes.
pub const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
/// Key version of a group metadata record.
pub const GROUP_METADATA_KEY_VERSION: i16 = 2;
/// Value version of an offset commit that topicfs writes.
pub const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
/// Kafka's "no leader epoch" (`RecordBatch.NO_PARTITION_LEADER_EPOCH`).
pub const NO_LEADER_EPOCH: i32 = -1;

/// Java's `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units, with 32-bit
/// overflow.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// The partition of `__consumer_offsets` holding `group`'s records, as the group coordinator
/// chooses it: `Utils.abs(groupId.hashCode()) % partitions`, where `Utils.abs(Integer.MIN_VALUE)`
/// is 0. `partitions` 0 is taken as 1.
pub fn offsets_partition_for(group: &str, partitions: u32) -> u32 {
    let hash = java_string_hash(group);
    let abs = if hash == i32::MIN { 0 } else { hash.unsigned_abs() };
    abs % partitions.max(1)
}

/// The key of an offset commit: which group's position in which partition.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OffsetCommitKey {
    pub group: String,
    pub topic: String,
    pub partition: i32,
}

/// A decoded `__consumer_offsets` key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupRecordKey {
    /// Versions 0 and 1.
    OffsetCommit(OffsetCommitKey),
    /// Version 2: the group's membership record (its value is not decoded).
    GroupMetadata { group: String },
    /// Version 3 and later: records of the new group coordinator (consumer-protocol groups,
    /// share groups); skipped.
    Other { version: i16 },
}

/// The value of an offset commit. `offset` is Kafka's committed offset: the next record the
/// group will process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommitValue {
    pub offset: Offset,
    /// `None` for [`NO_LEADER_EPOCH`] and for versions before 3.
    pub leader_epoch: Option<i32>,
    pub metadata: String,
    pub commit_timestamp: Timestamp,
    /// Version 1 only.
    pub expire_timestamp: Option<Timestamp>,
}

/// Encodes an offset commit key (version 1).
pub fn encode_offset_commit_key(key: &OffsetCommitKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + key.group.len() + key.topic.len());
    out.extend_from_slice(&OFFSET_COMMIT_KEY_VERSION.to_be_bytes());
    put_string(&mut out, &key.group);
    put_string(&mut out, &key.topic);
    out.extend_from_slice(&key.partition.to_be_bytes());
    out
}

/// Encodes an offset commit value (version 3). Metadata longer than `i16::MAX` bytes is cut
/// (callers pass short metadata).
pub fn encode_offset_commit_value(value: &OffsetCommitValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(26 + value.metadata.len());
    out.extend_from_slice(&OFFSET_COMMIT_VALUE_VERSION.to_be_bytes());
    out.extend_from_slice(&value.offset.0.to_be_bytes());
    out.extend_from_slice(&value.leader_epoch.unwrap_or(NO_LEADER_EPOCH).to_be_bytes());
    put_string(&mut out, &value.metadata);
    out.extend_from_slice(&value.commit_timestamp.to_be_bytes());
    out
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    let mut bytes = s.as_bytes();
    if bytes.len() > i16::MAX as usize {
        let mut end = i16::MAX as usize;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        bytes = bytes.get(..end).unwrap_or_default();
    }
    out.extend_from_slice(&(bytes.len() as i16).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// Decodes a `__consumer_offsets` key.
pub fn decode_group_record_key(buf: &[u8]) -> Result<GroupRecordKey, DecodeError> {
    let mut r = Reader { buf, pos: 0 };
    let version = r.i16()?;
    match version {
        0 | 1 => {
            let group = r.string()?;
            let topic = r.string()?;
            let partition = r.i32()?;
            Ok(GroupRecordKey::OffsetCommit(OffsetCommitKey { group, topic, partition }))
        }
        2 => Ok(GroupRecordKey::GroupMetadata { group: r.string()? }),
        v if v > 2 => Ok(GroupRecordKey::Other { version: v }),
        _ => Err(invalid(0, "negative __consumer_offsets key version")),
    }
}

/// Decodes an offset commit value, versions 0 to 4.
pub fn decode_offset_commit_value(buf: &[u8]) -> Result<OffsetCommitValue, DecodeError> {
    let mut r = Reader { buf, pos: 0 };
    let version = r.i16()?;
    let offset = Offset(r.i64()?);
    let (leader_epoch, metadata) = match version {
        0..=2 => (NO_LEADER_EPOCH, r.string()?),
        3 => (r.i32()?, r.string()?),
        4 => (r.i32()?, r.compact_string()?),
        _ => return Err(invalid(0, "unknown offset commit value version")),
    };
    let commit_timestamp = r.i64()?;
    let expire_timestamp = if version == 1 { Some(r.i64()?) } else { None };
    if version == 4 {
        r.skip_tagged_fields()?;
    }
    Ok(OffsetCommitValue {
        offset,
        leader_epoch: (leader_epoch != NO_LEADER_EPOCH).then_some(leader_epoch),
        metadata,
        commit_timestamp,
        expire_timestamp,
    })
}

fn invalid(at: usize, why: &'static str) -> DecodeError {
    DecodeError::new(at, DecodeErrorKind::InvalidRecord(why))
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|end| *end <= self.buf.len()).ok_or(
            DecodeError::new(
                self.pos,
                DecodeErrorKind::Truncated {
                    needed: n,
                    available: self.buf.len().saturating_sub(self.pos),
                },
            ),
        )?;
        let bytes = self.buf.get(self.pos..end).unwrap_or_default();
        self.pos = end;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let at = self.pos;
        self.take(N)?.try_into().map_err(|_| invalid(at, "short field"))
    }

    fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    fn utf8(&mut self, len: usize) -> Result<String, DecodeError> {
        let at = self.pos;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| invalid(at, "string is not UTF-8"))
    }

    /// An `int16`-length string; a null string (-1) is empty.
    fn string(&mut self) -> Result<String, DecodeError> {
        let at = self.pos;
        match self.i16()? {
            -1 => Ok(String::new()),
            n if n < 0 => Err(invalid(at, "negative string length")),
            n => self.utf8(n as usize),
        }
    }

    /// An unsigned varint (`ByteUtils.readUnsignedVarint`), through the shared reader.
    fn unsigned_varint(&mut self) -> Result<u32, DecodeError> {
        crate::varint::read_unsigned_varint(self.buf, &mut self.pos)
    }

    /// A compact string (unsigned varint length + 1; 0 is null, taken as empty).
    fn compact_string(&mut self) -> Result<String, DecodeError> {
        match self.unsigned_varint()? {
            0 => Ok(String::new()),
            n => self.utf8(n as usize - 1),
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_and_partition_choice_match_kafka() {
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("etl"), 100_765);
        assert_eq!(java_string_hash(""), 0);
        // Overflowing and negative hashes (Java: "polygenelubricants".hashCode() == MIN_VALUE).
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(offsets_partition_for("polygenelubricants", 50), 0);
        assert_eq!(java_string_hash("zzzzzzzz"), -1_910_022_912);
        assert_eq!(offsets_partition_for("zzzzzzzz", 50), 12);
        assert_eq!(offsets_partition_for("hello", 50), 99_162_322 % 50);
        assert_eq!(offsets_partition_for("etl", 50), 100_765 % 50);
        // UTF-16 code units, not bytes: a character outside the BMP counts as two units.
        assert_eq!(java_string_hash("\u{e9}"), 0xe9);
        assert_eq!(java_string_hash("\u{1f600}"), 0xd83d * 31 + 0xde00);
    }

    #[test]
    fn key_and_value_round_trip_at_the_versions_written() {
        let key = OffsetCommitKey { group: "etl".into(), topic: "orders".into(), partition: 7 };
        let bytes = encode_offset_commit_key(&key);
        assert_eq!(bytes, b"\x00\x01\x00\x03etl\x00\x06orders\x00\x00\x00\x07");
        assert_eq!(decode_group_record_key(&bytes), Ok(GroupRecordKey::OffsetCommit(key)));
        let value = OffsetCommitValue {
            offset: Offset(42),
            leader_epoch: None,
            metadata: String::new(),
            commit_timestamp: 1_767_225_600_000,
            expire_timestamp: None,
        };
        let bytes = encode_offset_commit_value(&value);
        assert_eq!(bytes.len(), 2 + 8 + 4 + 2 + 8);
        assert_eq!(&bytes[..2], &[0, 3]);
        assert_eq!(&bytes[10..14], &[0xff; 4], "leader epoch -1");
        assert_eq!(decode_offset_commit_value(&bytes), Ok(value));
    }

    #[test]
    fn every_value_version_a_broker_writes_decodes() {
        let mut v0 = vec![0, 0];
        v0.extend_from_slice(&5i64.to_be_bytes());
        v0.extend_from_slice(b"\x00\x02md");
        v0.extend_from_slice(&100i64.to_be_bytes());
        let d = decode_offset_commit_value(&v0).unwrap();
        assert_eq!((d.offset, d.metadata.as_str(), d.commit_timestamp), (Offset(5), "md", 100));
        let mut v1 = v0.clone();
        v1[1] = 1;
        v1.extend_from_slice(&200i64.to_be_bytes());
        assert_eq!(decode_offset_commit_value(&v1).unwrap().expire_timestamp, Some(200));
        let mut v2 = v0.clone();
        v2[1] = 2;
        assert_eq!(decode_offset_commit_value(&v2).unwrap().expire_timestamp, None);
        let mut v4 = vec![0, 4];
        v4.extend_from_slice(&9i64.to_be_bytes());
        v4.extend_from_slice(&3i32.to_be_bytes());
        v4.extend_from_slice(b"\x03md");
        v4.extend_from_slice(&300i64.to_be_bytes());
        // One tagged field (tag 0, a 16-byte topic id).
        v4.extend_from_slice(&[1, 0, 16]);
        v4.extend_from_slice(&[7; 16]);
        let d = decode_offset_commit_value(&v4).unwrap();
        assert_eq!((d.offset, d.leader_epoch, d.metadata.as_str()), (Offset(9), Some(3), "md"));
        assert_eq!(d.commit_timestamp, 300);
        assert_eq!(
            decode_group_record_key(b"\x00\x02\x00\x01g"),
            Ok(GroupRecordKey::GroupMetadata { group: "g".into() })
        );
        assert_eq!(
            decode_group_record_key(b"\x00\x05xyz"),
            Ok(GroupRecordKey::Other { version: 5 })
        );
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_decode_or_fail_without_panicking(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let _ = decode_group_record_key(&bytes);
            let _ = decode_offset_commit_value(&bytes);
        }

        #[test]
        fn what_is_encoded_decodes_to_itself(
            group in ".{0,40}",
            topic in "[a-zA-Z0-9._-]{1,40}",
            partition in 0i32..i32::MAX,
            offset in 0i64..i64::MAX,
            ts in proptest::prelude::any::<i64>(),
        ) {
            let key = OffsetCommitKey { group, topic, partition };
            proptest::prop_assert_eq!(
                decode_group_record_key(&encode_offset_commit_key(&key)),
                Ok(GroupRecordKey::OffsetCommit(key))
            );
            let value = OffsetCommitValue {
                offset: Offset(offset),
                leader_epoch: None,
                metadata: String::new(),
                commit_timestamp: ts,
                expire_timestamp: None,
            };
            proptest::prop_assert_eq!(
                decode_offset_commit_value(&encode_offset_commit_value(&value)),
                Ok(value)
            );
        }
    }

    #[test]
    fn damaged_records_are_errors_not_panics() {
        let key = encode_offset_commit_key(&OffsetCommitKey {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        });
        for n in 0..key.len() {
            assert!(decode_group_record_key(&key[..n]).is_err(), "{n}");
        }
        let value = encode_offset_commit_value(&OffsetCommitValue {
            offset: Offset(1),
            leader_epoch: Some(2),
            metadata: "m".into(),
            commit_timestamp: 3,
            expire_timestamp: None,
        });
        for n in 0..value.len() {
            assert!(decode_offset_commit_value(&value[..n]).is_err(), "{n}");
        }
        assert!(decode_offset_commit_value(b"\x00\x09\x00").is_err());
        assert!(decode_group_record_key(b"\xff\xff").is_err());
        assert!(decode_group_record_key(b"\x00\x01\xff\xfe").is_err());
        assert!(decode_group_record_key(b"\x00\x01\x00\x02\xff\xfe").is_err(), "not UTF-8");
    }
}
