//! Kafka's small text files: offset checkpoints, the leader epoch checkpoint and
//! `partition.metadata` (`meta.properties` is Java properties text: [`super::properties`]).
//!
//! Checkpoint framing (`CheckpointFile`): a version line (must be `0`), a count line, then exactly
//! `count` entry lines of whitespace-separated tokens; lines end with `\n`. An empty file is an
//! empty checkpoint.
//!
//! ```text
//! 0
//! 2
//! my-topic 0 1234        offset checkpoints: topic, partition, offset
//! other 3 98             leader-epoch-checkpoint: epoch, start offset (2 tokens)
//! ```
//!
//! Error positions (`at`) are byte offsets of the offending line inside the text.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::{DecodeError, DecodeErrorKind};

/// The only checkpoint format version Kafka writes and accepts.
pub const CHECKPOINT_VERSION: i32 = 0;

pub(super) fn text_error(at: usize, why: impl Into<String>) -> DecodeError {
    DecodeError::new(at, DecodeErrorKind::InvalidText(why.into()))
}

/// Lines of `text` with their byte offsets (split on `\n`, a trailing `\r` removed, as Java's
/// `readLine` does; no empty line after a final newline).
pub(super) fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut at = 0;
    text.split_inclusive('\n').map(move |raw| {
        let start = at;
        at += raw.len();
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        (start, line.strip_suffix('\r').unwrap_or(line))
    })
}

/// Parses checkpoint framing, handing each entry line's tokens to `entry`.
fn parse_checkpoint<T>(
    text: &str,
    tokens_per_line: usize,
    mut entry: impl FnMut(&[&str]) -> Option<T>,
) -> Result<Vec<T>, DecodeError> {
    let mut lines = lines(text);
    let Some((_, version)) = lines.next() else { return Ok(Vec::new()) };
    match version.trim().parse::<i32>() {
        Ok(CHECKPOINT_VERSION) => {}
        _ => return Err(text_error(0, format!("unrecognised checkpoint version {version:?}"))),
    }
    let (count_at, count) =
        lines.next().ok_or_else(|| text_error(text.len(), "missing entry count"))?;
    let expected: usize = count
        .trim()
        .parse()
        .map_err(|_| text_error(count_at, format!("invalid entry count {count:?}")))?;
    let mut out = Vec::with_capacity(expected.min(1 << 16));
    for (at, line) in lines {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if tokens.len() != tokens_per_line {
            return Err(text_error(at, format!("malformed checkpoint line {line:?}")));
        }
        let e = entry(&tokens)
            .ok_or_else(|| text_error(at, format!("malformed checkpoint line {line:?}")))?;
        out.push(e);
    }
    if out.len() != expected {
        return Err(text_error(
            count_at,
            format!("expected {expected} entries but found {}", out.len()),
        ));
    }
    Ok(out)
}

fn format_checkpoint(count: usize, entry_lines: impl Iterator<Item = String>) -> String {
    let mut out = format!("{CHECKPOINT_VERSION}\n{count}\n");
    for line in entry_lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Parses an offset checkpoint (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
/// `replication-offset-checkpoint`, `cleaner-offset-checkpoint`) into `(topic, partition, offset)`.
pub fn parse_offset_checkpoint(text: &str) -> Result<Vec<(String, u32, i64)>, DecodeError> {
    parse_checkpoint(text, 3, |t| Some((t[0].to_string(), t[1].parse().ok()?, t[2].parse().ok()?)))
}

/// Formats an offset checkpoint, entries in the given order.
pub fn format_offset_checkpoint(entries: &[(String, u32, i64)]) -> String {
    format_checkpoint(entries.len(), entries.iter().map(|(t, p, o)| format!("{t} {p} {o}")))
}

/// Parses a `leader-epoch-checkpoint` into `(epoch, start offset)` pairs.
pub fn parse_leader_epoch_checkpoint(text: &str) -> Result<Vec<(i32, i64)>, DecodeError> {
    parse_checkpoint(text, 2, |t| Some((t[0].parse().ok()?, t[1].parse().ok()?)))
}

/// Formats a `leader-epoch-checkpoint`.
pub fn format_leader_epoch_checkpoint(entries: &[(i32, i64)]) -> String {
    format_checkpoint(entries.len(), entries.iter().map(|(e, o)| format!("{e} {o}")))
}

/// A topic id (Kafka `Uuid`): 16 bytes, printed as 22 characters of URL-safe base64 without
/// padding.
pub type TopicId = [u8; 16];

/// Formats a topic id as Kafka prints it.
pub fn format_uuid(id: &TopicId) -> String {
    URL_SAFE_NO_PAD.encode(id)
}

/// Parses a Kafka `Uuid` string (22 characters of URL-safe base64).
pub fn parse_uuid(s: &str) -> Option<TopicId> {
    if s.len() != 22 {
        return None;
    }
    URL_SAFE_NO_PAD.decode(s).ok()?.try_into().ok()
}

/// Parses `partition.metadata`: `version: 0` and `topic_id: <uuid>` lines, each split at `:`
/// followed by whitespace. The version must be 0 and the all-zero id is invalid.
pub fn parse_partition_metadata(text: &str) -> Result<TopicId, DecodeError> {
    let mut lines = lines(text);
    let (_, version) = lines.next().ok_or_else(|| text_error(0, "empty partition.metadata"))?;
    match version.split_once(':') {
        Some(("version", v)) if v.trim() == "0" && v.starts_with(char::is_whitespace) => {}
        _ => return Err(text_error(0, format!("unsupported partition.metadata line {version:?}"))),
    }
    let (at, id_line) =
        lines.next().ok_or_else(|| text_error(text.len(), "partition.metadata has no topic_id"))?;
    let id = match id_line.split_once(':') {
        Some(("topic_id", v)) if v.starts_with(char::is_whitespace) => parse_uuid(v.trim()),
        _ => None,
    }
    .ok_or_else(|| text_error(at, format!("invalid topic_id line {id_line:?}")))?;
    if id == [0; 16] {
        return Err(text_error(at, "the all-zero topic id is invalid"));
    }
    Ok(id)
}

/// Formats `partition.metadata` exactly as Kafka writes it (no trailing newline).
pub fn format_partition_metadata(id: &TopicId) -> String {
    format!("version: 0\ntopic_id: {}", format_uuid(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn offset_checkpoint_roundtrips_in_kafka_layout() {
        let entries = vec![("my-topic".to_string(), 0, 5124), ("other.topic-x".to_string(), 7, 0)];
        let text = format_offset_checkpoint(&entries);
        assert_eq!(text, "0\n2\nmy-topic 0 5124\nother.topic-x 7 0\n");
        assert_eq!(parse_offset_checkpoint(&text).unwrap(), entries);
    }

    #[test]
    fn empty_checkpoint_file_is_empty_and_runs_of_whitespace_split() {
        assert!(parse_offset_checkpoint("").unwrap().is_empty());
        assert_eq!(parse_offset_checkpoint("0\n1\nt  3\t9\n").unwrap(), vec![("t".into(), 3, 9)]);
    }

    #[test]
    fn checkpoint_with_wrong_version_count_or_tokens_is_rejected() {
        assert!(parse_offset_checkpoint("1\n0\n").is_err());
        let e = parse_offset_checkpoint("0\n2\nt 0 1\n").unwrap_err();
        assert_eq!(e.at, 2, "count mismatch points at the count line");
        let e = parse_offset_checkpoint("0\n2\nt 0 1\nt 1\n").unwrap_err();
        assert_eq!(e.at, 10, "a short line is reported at its start");
        assert!(parse_offset_checkpoint("0\n1\nt x 1\n").is_err());
        assert!(parse_offset_checkpoint("0\n1\nt 0 1 2\n").is_err());
        assert!(parse_offset_checkpoint("0\n").is_err());
    }

    #[test]
    fn leader_epoch_checkpoint_roundtrips() {
        let entries = vec![(0, 0), (3, 1500)];
        let text = format_leader_epoch_checkpoint(&entries);
        assert_eq!(text, "0\n2\n0 0\n3 1500\n");
        assert_eq!(parse_leader_epoch_checkpoint(&text).unwrap(), entries);
        assert!(parse_leader_epoch_checkpoint("0\n1\n0 0 0\n").is_err());
    }

    #[test]
    fn partition_metadata_roundtrips_without_trailing_newline() {
        let id: TopicId = [7; 16];
        let text = format_partition_metadata(&id);
        assert_eq!(text, format!("version: 0\ntopic_id: {}", format_uuid(&id)));
        assert!(!text.ends_with('\n'));
        assert_eq!(format_uuid(&id).len(), 22);
        assert_eq!(parse_partition_metadata(&text).unwrap(), id);
    }

    #[test]
    fn partition_metadata_rejects_bad_version_and_zero_id() {
        assert!(parse_partition_metadata("version: 1\ntopic_id: BwcHBwcHBwcHBwcHBwcHBw").is_err());
        assert!(parse_partition_metadata("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA").is_err());
        assert!(parse_partition_metadata("version: 0\ntopic_id: short").is_err());
        assert!(parse_partition_metadata("version: 0").is_err());
    }

    proptest! {
        #[test]
        fn text_parsers_never_panic(text in "\\PC{0,200}", bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let lossy = String::from_utf8_lossy(&bytes);
            for t in [text.as_str(), &*lossy] {
                let _ = parse_offset_checkpoint(t);
                let _ = parse_leader_epoch_checkpoint(t);
                let _ = parse_partition_metadata(t);
            }
        }

        #[test]
        fn offset_checkpoints_roundtrip(entries in proptest::collection::vec(("[a-zA-Z0-9._-]{1,20}", any::<u32>(), any::<i64>()), 0..20)) {
            let text = format_offset_checkpoint(&entries);
            prop_assert_eq!(parse_offset_checkpoint(&text).unwrap(), entries);
        }
    }
}
