//! File names for record keys: the names under `by-key/` and `latest/` and in `keys`.
//!
//! A Kafka key is bytes (or null), a file name is at most 255 bytes without `/` or NUL. Every
//! key has exactly one name, and every name decodes to at most one key:
//!
//! | key | name |
//! |---|---|
//! | UTF-8, 1 to [`MAX_PLAIN`] bytes, no `/`, NUL or control character, not starting with `%`, not `.` or `..`, not ending in `.json` or `.raw` | the key itself (`user-42`) |
//! | null | `%null` |
//! | empty | `%` |
//! | any other key whose escaped form fits | `%` then the key with `%`, `/`, `.`, `~`, control characters and bytes that are not UTF-8 written `%XX` (upper-case hex): `a/b` is `%a%2Fb`, `\xff` is `%%FF`, `x.json` is `%x%2Ejson` |
//! | longer ones | `%~` then 32 hex digits of the key's two 64-bit hashes ([`long_hashes`]): not reversible by itself, the key index resolves it |
//!
//! The escaped form never holds `.`, so a `.json`/`.raw` suffix after a name is unambiguous;
//! it never starts with `~`, so `%~` names are only long ones; `%null` is free because the key
//! `null` is a plain name. Only canonical names parse ([`parse_key_name`] of a name is `Some`
//! only when [`key_name`] of its key gives that name back), so one file is one name.
//!
//! Names are at most [`MAX_NAME`] bytes, leaving room for the longest format suffix (`.json`)
//! within Linux's 255.

use std::fmt::Write as _;

use twox_hash::XxHash64;

/// Longest name [`key_name`] makes: 255 minus the longest suffix, `.json`.
pub const MAX_NAME: usize = 250;
/// Longest key shown as itself.
pub const MAX_PLAIN: usize = MAX_NAME;
/// The name of the null key.
pub const NULL_NAME: &str = "%null";
/// What starts every name that is not the key itself.
pub const ESCAPE: char = '%';
/// What starts a long key's name, after [`ESCAPE`].
const LONG: char = '~';

/// What a name stands for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KeyName {
    /// Exactly this key (`None`: the null key).
    Key(Option<Vec<u8>>),
    /// A key too long for its name, known by its two hashes ([`long_hashes`]).
    Long(u64, u64),
}

/// The 64-bit hash of a key that the key index sorts its dictionary by (xxHash64, seed 0; the
/// null key hashes to 0, and the dictionary tells it from a key of that hash by its bytes).
pub fn key_hash(key: Option<&[u8]>) -> u64 {
    #[cfg(test)]
    if let Some(hash) = TEST_KEY_HASH.with(std::cell::Cell::get) {
        return hash(key);
    }
    match key {
        Some(key) => XxHash64::oneshot(0, key),
        None => 0,
    }
}

/// A function of a key to its hash (see [`with_key_hash`]).
#[cfg(test)]
type KeyHashFn = fn(Option<&[u8]>) -> u64;

#[cfg(test)]
thread_local! {
    /// A hash that replaces [`key_hash`] on this thread (see [`with_key_hash`]).
    static TEST_KEY_HASH: std::cell::Cell<Option<KeyHashFn>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with `hash` in place of [`key_hash`] on this thread: unit tests force keys to share a
/// hash (64-bit collisions cannot be found by search) to check that the index tells them apart.
#[cfg(test)]
pub(crate) fn with_key_hash<T>(hash: KeyHashFn, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            TEST_KEY_HASH.with(|h| h.set(None));
        }
    }
    TEST_KEY_HASH.with(|h| h.set(Some(hash)));
    let _reset = Reset;
    f()
}

/// The two hashes a long key's name holds: [`key_hash`] and xxHash64 with seed 1 (128 bits
/// together, so two long keys of one partition sharing a name is not a practical concern; the
/// index still resolves a name to one key only when exactly one matches).
pub fn long_hashes(key: &[u8]) -> (u64, u64) {
    (XxHash64::oneshot(0, key), XxHash64::oneshot(1, key))
}

/// Whether `key` is shown as itself.
fn is_plain(key: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(key) else { return false };
    !s.is_empty()
        && s.len() <= MAX_PLAIN
        && !s.starts_with(ESCAPE)
        && s != "."
        && s != ".."
        && !s.ends_with(".json")
        && !s.ends_with(".raw")
        && !s.chars().any(|c| c == '/' || c.is_control())
}

/// Whether `c` is written `%XX` in the escaped form.
fn escapes(c: char) -> bool {
    matches!(c, '%' | '/' | '.' | '~') || c.is_control()
}

fn push_escaped_bytes(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        let _ = write!(out, "%{b:02X}");
    }
}

/// The escaped form of `key` (with the leading `%`).
fn escaped(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len() + 1);
    out.push(ESCAPE);
    for chunk in key.utf8_chunks() {
        for c in chunk.valid().chars() {
            if escapes(c) {
                let mut buf = [0u8; 4];
                push_escaped_bytes(&mut out, c.encode_utf8(&mut buf).as_bytes());
            } else {
                out.push(c);
            }
        }
        push_escaped_bytes(&mut out, chunk.invalid());
    }
    out
}

/// The name of `key` (`None`: the null key); see the module docs.
pub fn key_name(key: Option<&[u8]>) -> String {
    let Some(key) = key else { return NULL_NAME.to_string() };
    if is_plain(key) {
        // `is_plain` checked UTF-8.
        return String::from_utf8_lossy(key).into_owned();
    }
    let name = escaped(key);
    if name.len() <= MAX_NAME {
        return name;
    }
    let (h0, h1) = long_hashes(key);
    format!("{ESCAPE}{LONG}{h0:016x}{h1:016x}")
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// What `name` stands for, or `None` when it is not the canonical name of any key (see the
/// module docs).
pub fn parse_key_name(name: &str) -> Option<KeyName> {
    if name == NULL_NAME {
        return Some(KeyName::Key(None));
    }
    let Some(body) = name.strip_prefix(ESCAPE) else {
        return is_plain(name.as_bytes()).then(|| KeyName::Key(Some(name.as_bytes().to_vec())));
    };
    if let Some(hex) = body.strip_prefix(LONG) {
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        let h0 = u64::from_str_radix(hex.get(..16)?, 16).ok()?;
        let h1 = u64::from_str_radix(hex.get(16..)?, 16).ok()?;
        return Some(KeyName::Long(h0, h1));
    }
    let bytes = body.as_bytes();
    let mut key = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hi = hex_digit(*bytes.get(i + 1)?)?;
            let lo = hex_digit(*bytes.get(i + 2)?)?;
            key.push(hi << 4 | lo);
            i += 3;
        } else {
            key.push(b);
            i += 1;
        }
    }
    // Canonical only: one key, one name.
    (key_name(Some(&key)) == name).then_some(KeyName::Key(Some(key)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(key: Option<&[u8]>) -> String {
        let name = key_name(key);
        assert!(name.len() <= MAX_NAME, "{name}");
        assert!(!name.contains('/') && !name.contains('\0') && !name.contains('\n'), "{name}");
        assert!(!name.ends_with(".json") && !name.ends_with(".raw"), "{name}");
        match parse_key_name(&name) {
            Some(KeyName::Key(k)) => assert_eq!(k.as_deref(), key, "{name}"),
            Some(KeyName::Long(h0, h1)) => {
                let key = key.unwrap();
                assert_eq!((h0, h1), long_hashes(key));
            }
            None => panic!("{name} does not parse"),
        }
        name
    }

    #[test]
    fn names_of_keys_that_are_not_file_names() {
        assert_eq!(round_trip(Some(b"user-42")), "user-42");
        assert_eq!(round_trip(None), "%null");
        assert_eq!(round_trip(Some(b"null")), "null");
        assert_eq!(round_trip(Some(b"")), "%");
        assert_eq!(round_trip(Some(b"a/b")), "%a%2Fb");
        assert_eq!(round_trip(Some(b"a\0b")), "%a%00b");
        assert_eq!(round_trip(Some(b"\xff\x00")), "%%FF%00");
        assert_eq!(round_trip(Some(b"%x")), "%%25x");
        assert_eq!(round_trip(Some(b"x.json")), "%x%2Ejson");
        assert_eq!(round_trip(Some(b"x.raw")), "%x%2Eraw");
        assert_eq!(round_trip(Some(b".")), "%%2E");
        assert_eq!(round_trip(Some(b"..")), "%%2E%2E");
        assert_eq!(round_trip(Some(b"line\nbreak")), "%line%0Abreak");
        assert_eq!(round_trip(Some("héllo/w".as_bytes())), "%héllo%2Fw");
        assert_eq!(round_trip(Some(b"~a/b")), "%%7Ea%2Fb");
        assert_eq!(round_trip(Some(b"a.b.c")), "a.b.c");
        let long = vec![b'k'; 251];
        let name = round_trip(Some(&long));
        assert!(name.starts_with("%~") && name.len() == 34, "{name}");
        assert_eq!(round_trip(Some(&[b'k'; 250])), "k".repeat(250));
    }

    #[test]
    fn only_canonical_names_parse() {
        for name in
            ["%user", "%null%", "%a%2fb", "%a%2", "%a%ZZ", "%~12", "a/b", ".", "..", "x.json"]
        {
            if let Some(KeyName::Key(Some(k))) = parse_key_name(name) {
                panic!("{name} parsed as {k:?}");
            }
        }
        assert_eq!(parse_key_name("%user"), None);
        assert_eq!(parse_key_name("%a.b/"), None);
        assert_eq!(parse_key_name(""), None);
    }

    proptest! {
        #[test]
        fn every_key_has_one_name_that_parses_back(key in proptest::option::of(
            proptest::collection::vec(any::<u8>(), 0..300))) {
            round_trip(key.as_deref());
        }

        #[test]
        fn utf8_keys_round_trip(key in "\\PC{0,80}") {
            round_trip(Some(key.as_bytes()));
        }

        #[test]
        fn no_name_panics_and_parsed_names_are_canonical(name in "[%a-zA-Z0-9./~\\-]{0,40}") {
            if let Some(KeyName::Key(key)) = parse_key_name(&name) {
                prop_assert_eq!(key_name(key.as_deref()), name);
            }
        }
    }
}
