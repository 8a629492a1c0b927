//! Bounds-checked big-endian field readers shared by the entry decoders ([`super::batch`],
//! [`super::legacy`], [`super::control`]): a short buffer is a [`DecodeError`], never a panic.

use super::{DecodeError, DecodeErrorKind};

// `at` is where the field starts; a field past the end of `buf` is `Truncated` at `at`.

pub(crate) fn be_bytes<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N], DecodeError> {
    at.checked_add(N).and_then(|end| buf.get(at..end)).and_then(|b| b.try_into().ok()).ok_or_else(
        || {
            DecodeError::new(
                at,
                DecodeErrorKind::Truncated { needed: at.saturating_add(N), available: buf.len() },
            )
        },
    )
}
pub(crate) fn be_i64(buf: &[u8], at: usize) -> Result<i64, DecodeError> {
    be_bytes(buf, at).map(i64::from_be_bytes)
}
pub(crate) fn be_i32(buf: &[u8], at: usize) -> Result<i32, DecodeError> {
    be_bytes(buf, at).map(i32::from_be_bytes)
}
pub(crate) fn be_u32(buf: &[u8], at: usize) -> Result<u32, DecodeError> {
    be_bytes(buf, at).map(u32::from_be_bytes)
}
pub(crate) fn be_i16(buf: &[u8], at: usize) -> Result<i16, DecodeError> {
    be_bytes(buf, at).map(i16::from_be_bytes)
}

/// A record or batch violating Kafka's reader rules, at byte `at`; `why` says which rule.
pub fn invalid(at: usize, why: &'static str) -> DecodeError {
    DecodeError::new(at, DecodeErrorKind::InvalidRecord(why))
}
