//! Names of segment files and partition directories (`LogFileUtils`, `LocalLog`).
//!
//! Segment files are named by their base offset as 20 zero-padded decimal digits, plus a suffix:
//! `00000000000000005000.log`. A state suffix may follow (`.deleted`, `.cleaned`, `.swap`):
//! `00000000000000000000.index.swap`. The base offset is parsed back from the name up to its first
//! `.`. Partition directories are `<topic>-<partition>`, split at the **last** `-`; directories of
//! deleted, moving or stray replicas are `<topic>-<partition>.<uuid>-(delete|future|stray)`.

use super::Offset;

/// Longest legal topic name (`Topic.MAX_NAME_LENGTH`).
pub const MAX_TOPIC_NAME_LENGTH: usize = 249;

/// The 20-digit zero-padded decimal form of a base offset (`filenamePrefixFromOffset`).
/// Negative offsets (never valid for a segment) print with their sign.
pub fn format_base_offset(base: Offset) -> String {
    format!("{:020}", base.0)
}

/// The kind of a file inside a partition directory, by its suffix.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// `.log`: record batches.
    Log,
    /// `.index`: offset index.
    Index,
    /// `.timeindex`: time index.
    TimeIndex,
    /// `.txnindex`: aborted transaction index.
    TxnIndex,
    /// `.snapshot`: producer state snapshot.
    Snapshot,
}

impl FileKind {
    /// Every kind.
    pub const ALL: [FileKind; 5] = [
        FileKind::Log,
        FileKind::Index,
        FileKind::TimeIndex,
        FileKind::TxnIndex,
        FileKind::Snapshot,
    ];

    /// The file suffix including its dot (`.log`).
    pub fn suffix(self) -> &'static str {
        match self {
            FileKind::Log => ".log",
            FileKind::Index => ".index",
            FileKind::TimeIndex => ".timeindex",
            FileKind::TxnIndex => ".txnindex",
            FileKind::Snapshot => ".snapshot",
        }
    }
}

/// A transient state suffix after the kind suffix.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum FileState {
    /// `.deleted`: scheduled for asynchronous deletion.
    Deleted,
    /// `.cleaned`: output of an in-progress compaction or split.
    Cleaned,
    /// `.swap`: finished compaction output waiting to replace the originals.
    Swap,
}

impl FileState {
    /// The suffix including its dot (`.deleted`).
    pub fn suffix(self) -> &'static str {
        match self {
            FileState::Deleted => ".deleted",
            FileState::Cleaned => ".cleaned",
            FileState::Swap => ".swap",
        }
    }
}

/// The file name of a segment file: `<20-digit base><kind suffix>`.
pub fn segment_file_name(base: Offset, kind: FileKind) -> String {
    format!("{}{}", format_base_offset(base), kind.suffix())
}

/// A parsed segment (or snapshot) file name.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SegmentFileName {
    /// The offset in the name (a segment's base offset, or a snapshot's offset).
    pub base_offset: Offset,
    /// Which file of the segment.
    pub kind: FileKind,
    /// A transient state suffix, if any.
    pub state: Option<FileState>,
}

/// Parses `<digits><kind suffix>[<state suffix>]`. The base offset is everything before the first
/// `.` and must be a non-negative decimal `i64` (Kafka accepts any width; it writes 20 digits).
pub fn parse_segment_file_name(name: &str) -> Option<SegmentFileName> {
    let dot = name.find('.')?;
    let (digits, suffixes) = name.split_at(dot);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let base_offset = Offset(digits.parse::<i64>().ok()?);
    for kind in FileKind::ALL {
        let Some(rest) = suffixes.strip_prefix(kind.suffix()) else { continue };
        let state = match rest {
            "" => None,
            ".deleted" => Some(FileState::Deleted),
            ".cleaned" => Some(FileState::Cleaned),
            ".swap" => Some(FileState::Swap),
            _ => continue,
        };
        return Some(SegmentFileName { base_offset, kind, state });
    }
    None
}

/// Parses a live partition directory name `<topic>-<partition>`, splitting at the last `-`.
/// The partition must be a non-negative decimal `u32` and the topic a valid topic name.
pub fn parse_partition_dir(name: &str) -> Option<(String, u32)> {
    let dash = name.rfind('-')?;
    let (topic, partition) = (&name[..dash], &name[dash + 1..]);
    if partition.is_empty() || !partition.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    validate_topic_name(topic).ok()?;
    Some((topic.to_string(), partition.parse().ok()?))
}

/// The partition directory name `<topic>-<partition>`.
pub fn partition_dir_name(topic: &str, partition: u32) -> String {
    format!("{topic}-{partition}")
}

/// Why a partition directory is not a live replica.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SpecialDirKind {
    /// `-delete`: topic or replica deletion in progress.
    Delete,
    /// `-future`: target of an intra-broker move.
    Future,
    /// `-stray`: a replica a KRaft broker should not host.
    Stray,
}

/// A parsed `<topic>-<partition>.<uuid>-(delete|future|stray)` directory name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpecialDir {
    /// Topic name (possibly truncated for `-delete`/`-stray` names over 255 characters).
    pub topic: String,
    /// Partition number.
    pub partition: u32,
    /// The 32 hex digits (dashless UUID) between `.` and the suffix.
    pub uuid: String,
    /// Which kind of special directory.
    pub kind: SpecialDirKind,
}

/// Parses a `-delete` / `-future` / `-stray` directory name, as Kafka's
/// `^(\S+)-(\S+)\.(\S+)-(delete|future|stray)$` does: the suffix after the last `-`, the uuid
/// after the last `.`, then topic and partition split at the last `-`.
pub fn parse_special_dir(name: &str) -> Option<SpecialDir> {
    if name.chars().any(char::is_whitespace) {
        return None;
    }
    let (rest, suffix) = name.rsplit_once('-')?;
    let kind = match suffix {
        "delete" => SpecialDirKind::Delete,
        "future" => SpecialDirKind::Future,
        "stray" => SpecialDirKind::Stray,
        _ => return None,
    };
    let (topic_partition, uuid) = rest.rsplit_once('.')?;
    let (topic, partition) = topic_partition.rsplit_once('-')?;
    if topic.is_empty() || uuid.is_empty() {
        return None;
    }
    Some(SpecialDir {
        topic: topic.to_string(),
        partition: partition.parse().ok()?,
        uuid: uuid.to_string(),
        kind,
    })
}

/// Kafka's `Topic.validate`: non-empty, not `.` or `..`, at most 249 characters, only ASCII
/// letters, digits, `.`, `_` and `-`. The error text says which rule failed.
pub fn validate_topic_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("topic name is illegal, it can't be empty");
    }
    if name == "." || name == ".." {
        return Err("topic name cannot be \".\" or \"..\"");
    }
    if name.len() > MAX_TOPIC_NAME_LENGTH {
        return Err("topic name is illegal, it can't be longer than 249 characters");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        return Err(
            "topic name contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        );
    }
    Ok(())
}

/// Kafka's `Topic.hasCollision`: whether two different topic names would clash once `.` is
/// read as `_` (both become the same metric name), e.g. `a.b` and `a_b`. A name does not
/// collide with itself.
pub fn has_collision(a: &str, b: &str) -> bool {
    a != b && a.replace('.', "_") == b.replace('.', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_collide_when_equal_after_dots_become_underscores() {
        assert!(has_collision("a.b", "a_b"));
        assert!(has_collision("a_b", "a.b"));
        assert!(has_collision("x.y_z", "x_y.z"));
        assert!(!has_collision("a.b", "a.b"), "the same name is no collision");
        assert!(!has_collision("a.b", "a-b"));
        assert!(!has_collision("ab", "a_b"));
    }

    #[test]
    fn base_offsets_are_twenty_zero_padded_digits() {
        assert_eq!(format_base_offset(Offset(5000)), "00000000000000005000");
        assert_eq!(format_base_offset(Offset(i64::MAX)), "09223372036854775807");
        assert_eq!(
            segment_file_name(Offset(0), FileKind::TimeIndex),
            "00000000000000000000.timeindex"
        );
    }

    #[test]
    fn segment_file_names_roundtrip_with_state_suffixes() {
        for kind in FileKind::ALL {
            let name = segment_file_name(Offset(42), kind);
            let p = parse_segment_file_name(&name).unwrap();
            assert_eq!((p.base_offset, p.kind, p.state), (Offset(42), kind, None));
            for state in [FileState::Deleted, FileState::Cleaned, FileState::Swap] {
                let p = parse_segment_file_name(&format!("{name}{}", state.suffix())).unwrap();
                assert_eq!((p.kind, p.state), (kind, Some(state)));
            }
        }
    }

    #[test]
    fn other_files_are_not_segment_files() {
        for name in [
            "leader-epoch-checkpoint",
            "partition.metadata",
            "00000000000000000000.log.tmp",
            "00000000000000000000.logx",
            ".log",
            "-1.log",
            "99999999999999999999.log",
            "00000000000000000000",
        ] {
            assert_eq!(parse_segment_file_name(name), None, "{name}");
        }
    }

    #[test]
    fn partition_dirs_split_at_the_last_dash() {
        assert_eq!(parse_partition_dir("my-topic-12"), Some(("my-topic".into(), 12)));
        assert_eq!(parse_partition_dir("a.b_c-0"), Some(("a.b_c".into(), 0)));
        assert_eq!(partition_dir_name("my-topic", 12), "my-topic-12");
        for bad in ["topic", "topic-", "-0", "topic-x", "to pic-0", "t-0.abc-delete"] {
            assert_eq!(parse_partition_dir(bad), None, "{bad}");
        }
    }

    #[test]
    fn delete_future_and_stray_dirs_are_recognised() {
        let d = parse_special_dir("my-topic-3.0123456789abcdef0123456789abcdef-delete").unwrap();
        assert_eq!(d.topic, "my-topic");
        assert_eq!(d.partition, 3);
        assert_eq!(d.uuid, "0123456789abcdef0123456789abcdef");
        assert_eq!(d.kind, SpecialDirKind::Delete);
        assert_eq!(parse_special_dir("t-0.abc-future").unwrap().kind, SpecialDirKind::Future);
        assert_eq!(parse_special_dir("t-0.abc-stray").unwrap().kind, SpecialDirKind::Stray);
        assert_eq!(parse_special_dir("t-0.abc-gone"), None);
        assert_eq!(parse_special_dir("t-0-delete"), None);
        assert_eq!(parse_special_dir("my-topic-3"), None);
    }

    #[test]
    fn topic_names_follow_kafka_validation() {
        assert!(validate_topic_name("orders.v1_eu-west").is_ok());
        assert!(validate_topic_name(&"a".repeat(249)).is_ok());
        assert!(validate_topic_name(&"a".repeat(250)).is_err());
        for bad in ["", ".", "..", "a b", "a/b", "é", "a:b"] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?}");
        }
    }
}
