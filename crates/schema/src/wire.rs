//! The Confluent wire format of a key or value written by a schema-registry-aware serializer:
//!
//! ```text
//! byte 0      magic byte, always 0
//! bytes 1..5  schema id, 4 bytes big-endian (the registry's global id)
//! bytes 5..   the body: for Protobuf the message-index varints then the message; for Avro
//!             the Avro binary encoding; for JSON Schema the JSON text
//! ```
//!
//! [`Framed::parse`] never panics on any input: empty, a wrong magic byte and an id cut short are
//! errors that say which.

use topicfs_source::{Error, Result};

/// The magic byte every framed value starts with.
pub const MAGIC: u8 = 0;
/// Bytes before the body: the magic byte and the 4-byte id.
pub const HEADER_LEN: usize = 5;

/// A framed key or value: the schema id and the bytes after the 5-byte header (borrowed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framed<'a> {
    pub schema_id: u32,
    pub body: &'a [u8],
}

impl<'a> Framed<'a> {
    /// Splits `bytes` into id and body. Errors (`InvalidInput`): empty input, a first byte other
    /// than 0, fewer than 4 id bytes after it.
    pub fn parse(bytes: &'a [u8]) -> Result<Framed<'a>> {
        let Some((&magic, rest)) = bytes.split_first() else {
            return Err(Error::InvalidInput(
                "schema wire format: empty value (expected magic byte 0 and a 4-byte schema id)"
                    .into(),
            ));
        };
        if magic != MAGIC {
            return Err(Error::InvalidInput(format!(
                "schema wire format: magic byte is {magic:#04x}, expected 0x00 (not a schema-registry framed value)"
            )));
        }
        let Some((id, body)) = rest.split_first_chunk::<4>() else {
            return Err(Error::InvalidInput(format!(
                "schema wire format: schema id truncated ({} of 4 bytes after the magic byte)",
                rest.len()
            )));
        };
        Ok(Framed { schema_id: u32::from_be_bytes(*id), body })
    }
}

/// The framed bytes of `body` under `schema_id`: `0`, the id big-endian, the body.
pub fn frame(schema_id: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.push(MAGIC);
    out.extend_from_slice(&schema_id.to_be_bytes());
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<Framed<'_>>) -> String {
        match r {
            Err(Error::InvalidInput(m)) => m,
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    #[test]
    fn frame_then_parse_gives_the_id_and_body_back() {
        let bytes = frame(0x0102_0304, b"body");
        assert_eq!(bytes, [0, 1, 2, 3, 4, b'b', b'o', b'd', b'y']);
        let f = Framed::parse(&bytes).unwrap();
        assert_eq!(f.schema_id, 0x0102_0304);
        assert_eq!(f.body, b"body");
        let empty_body = frame(7, b"");
        assert_eq!(Framed::parse(&empty_body).unwrap(), Framed { schema_id: 7, body: b"" });
    }

    #[test]
    fn empty_wrong_magic_and_truncated_ids_are_errors_that_say_which() {
        assert!(message(Framed::parse(b"")).contains("empty value"));
        assert!(message(Framed::parse(b"\x01\0\0\0\x01x")).contains("magic byte is 0x01"));
        assert!(message(Framed::parse(b"{\"a\":1}")).contains("magic byte is 0x7b"));
        for n in 0..4 {
            let bytes = [0u8, 0, 0, 1][..=n].to_vec();
            let m = message(Framed::parse(&bytes));
            assert!(m.contains(&format!("truncated ({n} of 4 bytes")), "{m}");
        }
    }
}
