//! Kafka's small text files: offset checkpoints, the leader epoch checkpoint, `meta.properties`
//! and `partition.metadata`.
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

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::{DecodeError, DecodeErrorKind};

/// The only checkpoint format version Kafka writes and accepts.
pub const CHECKPOINT_VERSION: i32 = 0;

fn text_error(at: usize, why: impl Into<String>) -> DecodeError {
    DecodeError::new(at, DecodeErrorKind::InvalidText(why.into()))
}

/// Lines of `text` with their byte offsets (split on `\n`, a trailing `\r` removed, as Java's
/// `readLine` does; no empty line after a final newline).
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
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

/// Parses Java `Properties` text (`meta.properties`): `#`/`!` comments, `key=value`, `key:value`
/// or `key value`, backslash escapes (`\t \n \r \f \uXXXX`, `\x` = `x`) and line continuations.
/// Unknown keys are kept; a later duplicate wins.
pub fn parse_properties(text: &str) -> Result<BTreeMap<String, String>, DecodeError> {
    let mut map = BTreeMap::new();
    let mut logical = String::new();
    let mut logical_at = 0;
    for (at, line) in lines(text) {
        let piece = if logical.is_empty() {
            logical_at = at;
            let t = line.trim_start_matches([' ', '\t', '\x0c']);
            if t.is_empty() || t.starts_with('#') || t.starts_with('!') {
                continue;
            }
            t
        } else {
            line.trim_start_matches([' ', '\t', '\x0c'])
        };
        let trailing = piece.bytes().rev().take_while(|&b| b == b'\\').count();
        if trailing % 2 == 1 {
            logical.push_str(&piece[..piece.len() - 1]);
            continue;
        }
        logical.push_str(piece);
        let (k, v) = split_property(&logical);
        map.insert(unescape(k, logical_at)?, unescape(v, logical_at)?);
        logical.clear();
    }
    if !logical.is_empty() {
        let (k, v) = split_property(&logical);
        map.insert(unescape(k, logical_at)?, unescape(v, logical_at)?);
    }
    Ok(map)
}

/// Splits a logical line at the first unescaped `=`, `:` or whitespace (raw, still escaped).
fn split_property(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' | b' ' | b'\t' | b'\x0c' => break,
            _ => i += 1,
        }
    }
    let i = i.min(bytes.len());
    let key = &line[..i];
    let mut rest = line[i..].trim_start_matches([' ', '\t', '\x0c']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\x0c']);
    }
    (key, rest)
}

fn unescape(s: &str, at: usize) -> Result<String, DecodeError> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                    .ok_or_else(|| text_error(at, "malformed \\uXXXX escape"))?;
                // Java writes a character above U+FFFF as a UTF-16 surrogate pair of escapes.
                let low = (0xD800..0xDC00).contains(&code).then(|| low_surrogate(&chars)).flatten();
                let c = match low {
                    Some(low) => {
                        chars.nth(5);
                        char::from_u32(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
                    }
                    None => char::from_u32(code),
                };
                out.push(c.unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

/// The low surrogate of a `\uDC00`..`\uDFFF` escape at the start of `rest`, if there is one.
fn low_surrogate(rest: &std::str::Chars<'_>) -> Option<u32> {
    let s = rest.as_str();
    let hex = s.strip_prefix("\\u")?.get(..4)?;
    u32::from_str_radix(hex, 16).ok().filter(|c| (0xDC00..0xE000).contains(c))
}

fn escape(s: &str, is_key: bool, out: &mut String) {
    for (i, c) in s.chars().enumerate() {
        match c {
            ' ' if is_key || i == 0 => out.push_str("\\ "),
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\x0c' => out.push_str("\\f"),
            '=' | ':' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                // One escape per UTF-16 code unit, as Java's `Properties.store` writes.
                for unit in c.encode_utf16(&mut [0; 2]) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
            c => out.push(c),
        }
    }
}

/// Formats properties as `Properties.store` does: an empty comment line `#`, a `#<date>` comment
/// line (`date_comment` is given by the caller, e.g. `Tue Oct 29 10:00:00 UTC 2024`), then one
/// escaped `key=value` line per entry.
pub fn format_properties(props: &BTreeMap<String, String>, date_comment: &str) -> String {
    let mut out = format!("#\n#{date_comment}\n");
    for (k, v) in props {
        escape(k, true, &mut out);
        out.push('=');
        escape(v, false, &mut out);
        out.push('\n');
    }
    out
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
    fn meta_properties_parse_like_java_properties() {
        let text = "#\n#Tue Oct 29 10:00:00 UTC 2024\n! bang comment\n  node.id=1\n\
                    cluster.id : abc\\\n   def\ndirectory.id  xyz\nversion=1\nunknown.key=a\\=b\\u0041\n";
        let m = parse_properties(text).unwrap();
        assert_eq!(m["node.id"], "1");
        assert_eq!(m["cluster.id"], "abcdef");
        assert_eq!(m["directory.id"], "xyz");
        assert_eq!(m["version"], "1");
        assert_eq!(m["unknown.key"], "a=bA");
        assert_eq!(m.len(), 5);
    }

    #[test]
    fn properties_roundtrip_through_the_formatter() {
        let mut m = BTreeMap::new();
        m.insert("version".to_string(), "1".to_string());
        m.insert("cluster.id".to_string(), "MkU3OEVBNTcwNTJENDM2Qk".to_string());
        m.insert("odd key=x".to_string(), " lead:#!\\ é".to_string());
        let text = format_properties(&m, "Tue Oct 29 10:00:00 UTC 2024");
        assert!(text.starts_with("#\n#Tue Oct 29 10:00:00 UTC 2024\n"));
        assert!(text.contains("version=1\n"));
        assert_eq!(parse_properties(&text).unwrap(), m);
    }

    #[test]
    fn properties_above_u_ffff_roundtrip_as_surrogate_pair_escapes() {
        // Found by the `text_files` fuzz target: U+ECB2C was written as `\uECB2C` (five hex
        // digits), read back as U+ECB2 followed by `C`.
        let mut m = BTreeMap::new();
        m.insert("versi\u{ecb2c}on".to_string(), "\u{1F600}".to_string());
        let text = format_properties(&m, "Thu Jan 01 00:00:00 UTC 2026");
        assert!(text.contains("versi\\uDB72\\uDF2Con=\\uD83D\\uDE00\n"), "{text}");
        assert_eq!(parse_properties(&text).unwrap(), m);
        // A lone surrogate escape is not a character.
        assert_eq!(parse_properties("k=\\uD800x").unwrap()["k"], "\u{FFFD}x");
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
                let _ = parse_properties(t);
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
