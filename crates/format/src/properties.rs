//! Java `.properties` text, as `java.util.Properties` loads and stores it: Kafka's
//! `meta.properties` (read by the log engine) and the cluster client's `--command-config`
//! files. The one parser of this syntax in topicfs.
//!
//! Read: `#`/`!` comment lines; `key=value`, `key:value` or `key value` (the first unescaped
//! `=`, `:` or whitespace ends the key; whitespace around the separator is dropped); backslash
//! line continuations (an odd number of trailing backslashes; the next line's leading
//! whitespace is dropped); the escapes `\t \n \r \f \uXXXX` (a UTF-16 surrogate pair of
//! `\u` escapes is one character) and `\x` = `x`. Whitespace is space, tab and form feed, as in
//! Java. Lines end at `\n`, a trailing `\r` removed.
//!
//! Error positions (`at`) are byte offsets of the offending entry's first line.

use std::collections::BTreeMap;

use super::DecodeError;
use super::checkpoint::{lines, text_error};

/// One entry of a properties text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Property {
    /// 1-based number of the line the entry starts on (its key's line).
    pub line: usize,
    /// Byte offset of that line in the text.
    pub at: usize,
    /// The key, unescaped.
    pub key: String,
    /// The value, unescaped (continuation lines joined).
    pub value: String,
}

/// Parses properties text into its entries, in file order (a duplicate key appears twice).
/// A malformed `\uXXXX` escape is an error at the byte offset of its entry's first line.
pub fn parse_entries(text: &str) -> Result<Vec<Property>, DecodeError> {
    let mut out = Vec::new();
    let mut logical = String::new();
    let (mut logical_at, mut logical_line) = (0, 0);
    let entry = |logical: &str, at: usize, line: usize| -> Result<Property, DecodeError> {
        let (k, v) = split_property(logical);
        Ok(Property { line, at, key: unescape(k, at)?, value: unescape(v, at)? })
    };
    for (n, (at, line)) in lines(text).enumerate() {
        let piece = if logical.is_empty() {
            (logical_at, logical_line) = (at, n + 1);
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
        out.push(entry(&logical, logical_at, logical_line)?);
        logical.clear();
    }
    if !logical.is_empty() {
        out.push(entry(&logical, logical_at, logical_line)?);
    }
    Ok(out)
}

/// Parses properties text (`meta.properties`) into a map: unknown keys are kept; a later
/// duplicate wins, as in Java's `Properties.load`.
pub fn parse_properties(text: &str) -> Result<BTreeMap<String, String>, DecodeError> {
    Ok(parse_entries(text)?.into_iter().map(|p| (p.key, p.value)).collect())
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
    fn properties_files_follow_java_syntax() {
        let text = "# comment\n! also\n\nclient.id = my\\\n    client\nacks:all\nsasl.username alice\n\
                    sasl.password=p\\u00e4ss\\tword\n  key\\=with\\:seps = v\n";
        let parsed = parse_entries(text).unwrap();
        let pairs: Vec<(usize, &str, &str)> =
            parsed.iter().map(|p| (p.line, p.key.as_str(), p.value.as_str())).collect();
        assert_eq!(
            pairs,
            [
                (4, "client.id", "myclient"),
                (6, "acks", "all"),
                (7, "sasl.username", "alice"),
                (8, "sasl.password", "p\u{e4}ss\tword"),
                (9, "key=with:seps", "v"),
            ]
        );
    }

    proptest! {
        #[test]
        fn properties_parser_never_panics(text in "\\PC{0,200}", bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let lossy = String::from_utf8_lossy(&bytes);
            for t in [text.as_str(), &*lossy] {
                let _ = parse_properties(t);
            }
        }
    }
}
