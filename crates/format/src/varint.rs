//! Kafka's variable-length integers (`ByteUtils.writeVarint` / `readVarint` and the `long`
//! variants): ZigZag, then unsigned LEB128, least significant 7-bit group first, `0x80` set on
//! every byte but the last. This is Protocol Buffers' `sint32` / `sint64`.
//!
//! Invariants mirrored from the Java reader: a varint is at most 5 bytes and a varlong at most 10;
//! a longer encoding is [`DecodeErrorKind::InvalidVarint`]. As in Java, the bits of the last byte
//! that do not fit the width are silently dropped.

use super::{DecodeError, DecodeErrorKind};

/// Longest encoding of a varint (`int32`).
pub const MAX_VARINT_SIZE: usize = 5;
/// Longest encoding of a varlong (`int64`).
pub const MAX_VARLONG_SIZE: usize = 10;

/// Appends `v` as a ZigZag varint.
#[inline]
pub fn write_varint(out: &mut Vec<u8>, v: i32) {
    let (mut buf, mut n) = ([0u8; MAX_VARINT_SIZE], 0);
    put_varint(&mut buf, &mut n, v);
    out.extend_from_slice(buf.get(..n).unwrap_or_default());
}

/// Appends `v` as a ZigZag varlong.
#[inline]
pub fn write_varlong(out: &mut Vec<u8>, v: i64) {
    let (mut buf, mut n) = ([0u8; MAX_VARLONG_SIZE], 0);
    put_varlong(&mut buf, &mut n, v);
    out.extend_from_slice(buf.get(..n).unwrap_or_default());
}

/// Writes `v` as a ZigZag varint into `buf` at `*at` and advances `*at`; the caller leaves
/// [`MAX_VARINT_SIZE`] bytes of room (bytes that do not fit are dropped, `*at` still counts
/// them). For encoders that assemble a record's header on the stack and append it at once.
#[inline]
pub fn put_varint(buf: &mut [u8], at: &mut usize, v: i32) {
    put_unsigned(buf, at, u64::from(((v << 1) ^ (v >> 31)) as u32));
}

/// [`put_varint`] for a ZigZag varlong ([`MAX_VARLONG_SIZE`] bytes of room).
#[inline]
pub fn put_varlong(buf: &mut [u8], at: &mut usize, v: i64) {
    put_unsigned(buf, at, ((v << 1) ^ (v >> 63)) as u64);
}

#[inline]
fn put_unsigned(buf: &mut [u8], at: &mut usize, mut u: u64) {
    // One and two bytes (every length and delta of an `append` line's record) without the
    // loop: a visible share of encoding a line (callgrind, issue 17 in `doc/benchmarks-history.md`).
    if u < 0x80 {
        if let Some(b) = buf.get_mut(*at) {
            *b = u as u8;
        }
        *at += 1;
        return;
    }
    if u < 0x4000 {
        if let Some([lo, hi]) =
            buf.get_mut(*at..*at + 2).and_then(|s| <&mut [u8; 2]>::try_from(s).ok())
        {
            *lo = (u as u8) | 0x80;
            *hi = (u >> 7) as u8;
        }
        *at += 2;
        return;
    }
    while u >= 0x80 {
        if let Some(b) = buf.get_mut(*at) {
            *b = (u as u8) | 0x80;
        }
        *at += 1;
        u >>= 7;
    }
    if let Some(b) = buf.get_mut(*at) {
        *b = u as u8;
    }
    *at += 1;
}

/// Reads a ZigZag varint at `*pos`, advancing `*pos` past it.
///
/// Errors: [`DecodeErrorKind::Truncated`] if the buffer ends inside the varint,
/// [`DecodeErrorKind::InvalidVarint`] if it is longer than 5 bytes. `at` is the varint's start.
///
/// Most varints of a record (its length, deltas, key and value lengths, header count) take one
/// or two bytes (lengths below 8,192); those are decided here and longer ones, and every error,
/// left to a call kept out of line, so the decoding loops stay small.
#[inline(always)]
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32, DecodeError> {
    if let Some(u) = short_unsigned(buf, pos) {
        return Ok(unzigzag32(u));
    }
    read_varint_slow(buf, pos)
}

/// The unsigned value of a one- or two-byte varint at `*pos` (advancing past it), or `None`
/// (nothing moved) for a longer, truncated or missing one.
#[inline(always)]
fn short_unsigned(buf: &[u8], pos: &mut usize) -> Option<u32> {
    let at = *pos;
    let b0 = *buf.get(at)?;
    if b0 < 0x80 {
        *pos = at + 1;
        return Some(u32::from(b0));
    }
    let b1 = *buf.get(at + 1)?;
    if b1 < 0x80 {
        *pos = at + 2;
        return Some(u32::from(b0 & 0x7f) | (u32::from(b1) << 7));
    }
    None
}

/// Reads an unsigned varint (`ByteUtils.readUnsignedVarint`: at most 5 bytes, no ZigZag; the
/// lengths and counts of Kafka's flexible message versions) at `*pos`, advancing past it.
///
/// Errors as [`read_varint`].
pub fn read_unsigned_varint(buf: &[u8], pos: &mut usize) -> Result<u32, DecodeError> {
    Ok(read_unsigned_slow(buf, pos, 5)? as u32)
}

#[cold]
#[inline(never)]
fn read_varint_slow(buf: &[u8], pos: &mut usize) -> Result<i32, DecodeError> {
    // Five bytes at most; bits past the 32nd of the fifth are dropped, as Kafka's reader does.
    Ok(unzigzag32(read_unsigned_slow(buf, pos, 5)? as u32))
}

/// A varint of at most `max_bytes` bytes at `*pos` (advancing past it only when it is whole
/// and valid), its groups of 7 bits put together low first; bits shifted past 64 are dropped.
fn read_unsigned_slow(buf: &[u8], pos: &mut usize, max_bytes: u32) -> Result<u64, DecodeError> {
    let start = *pos;
    let mut value: u64 = 0;
    let mut i = start;
    for n in 0..max_bytes {
        let Some(&b) = buf.get(i) else {
            return Err(truncated(start, i + 1 - start, buf.len().saturating_sub(start)));
        };
        i += 1;
        value |= u64::from(b & 0x7f) << (7 * n);
        if b & 0x80 == 0 {
            *pos = i;
            return Ok(value);
        }
    }
    Err(DecodeError::new(start, DecodeErrorKind::InvalidVarint))
}

/// Reads a ZigZag varlong at `*pos`, advancing `*pos` past it.
///
/// Errors as [`read_varint`], with a limit of 10 bytes. Short values are decided inline, as there.
#[inline(always)]
pub fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, DecodeError> {
    if let Some(u) = short_unsigned(buf, pos) {
        return Ok(unzigzag64(u64::from(u)));
    }
    read_varlong_slow(buf, pos)
}

#[cold]
#[inline(never)]
fn read_varlong_slow(buf: &[u8], pos: &mut usize) -> Result<i64, DecodeError> {
    Ok(unzigzag64(read_unsigned_slow(buf, pos, 10)?))
}

/// The signed value of a ZigZag-encoded 32-bit varint (0, -1, 1, -2, ... for 0, 1, 2, 3, ...).
#[inline(always)]
fn unzigzag32(u: u32) -> i32 {
    ((u >> 1) as i32) ^ -((u & 1) as i32)
}

/// [`unzigzag32`] for a varlong.
#[inline(always)]
fn unzigzag64(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Number of bytes [`write_varint`] emits for `v` (`ByteUtils.sizeOfVarint`).
#[inline]
pub fn size_of_varint(v: i32) -> usize {
    let u = ((v << 1) ^ (v >> 31)) as u32;
    // 1 byte per started group of 7 significant bits, at least 1 (compares: cheaper than
    // counting bits and dividing, per record of an append).
    match u {
        0..0x80 => 1,
        0x80..0x4000 => 2,
        0x4000..0x20_0000 => 3,
        0x20_0000..0x1000_0000 => 4,
        _ => 5,
    }
}

/// Number of bytes [`write_varlong`] emits for `v` (`ByteUtils.sizeOfVarlong`).
#[inline]
pub fn size_of_varlong(v: i64) -> usize {
    let u = ((v << 1) ^ (v >> 63)) as u64;
    let bits = 64 - (u | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

fn truncated(at: usize, needed: usize, available: usize) -> DecodeError {
    DecodeError::new(at, DecodeErrorKind::Truncated { needed, available })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn put_writes_what_read_reads_in_the_size_it_announces(
            a in prop_oneof![any::<i32>(), -20_000i32..20_000, -(1i32 << 22)..(1 << 22)],
            b in any::<i64>(),
        ) {
            let (mut buf, mut at) = ([0u8; MAX_VARINT_SIZE + MAX_VARLONG_SIZE], 0);
            put_varint(&mut buf, &mut at, a);
            prop_assert_eq!(at, size_of_varint(a));
            put_varlong(&mut buf, &mut at, b);
            prop_assert_eq!(at, size_of_varint(a) + size_of_varlong(b));
            let mut pos = 0;
            prop_assert_eq!(read_varint(&buf, &mut pos).unwrap(), a);
            prop_assert_eq!(read_varlong(&buf, &mut pos).unwrap(), b);
            prop_assert_eq!(pos, at);
        }
    }

    fn enc32(v: i32) -> Vec<u8> {
        let mut out = Vec::new();
        write_varint(&mut out, v);
        out
    }

    #[test]
    fn varint_examples_match_the_spec() {
        // §2.3: 0->00, -1->01, 1->02, 5->0A, 63->7E, -64->7F, 64->80 01.
        let cases: [(i32, &[u8]); 7] = [
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (5, &[0x0a]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
        ];
        for (v, bytes) in cases {
            assert_eq!(enc32(v), bytes, "encoding of {v}");
            let mut pos = 0;
            assert_eq!(read_varint(bytes, &mut pos).unwrap(), v);
            assert_eq!(pos, bytes.len());
            assert_eq!(size_of_varint(v), bytes.len());
        }
    }

    #[test]
    fn extreme_values_use_the_maximum_width() {
        assert_eq!(enc32(i32::MIN).len(), MAX_VARINT_SIZE);
        assert_eq!(enc32(i32::MAX).len(), MAX_VARINT_SIZE);
        let mut out = Vec::new();
        write_varlong(&mut out, i64::MIN);
        assert_eq!(out.len(), MAX_VARLONG_SIZE);
        let mut pos = 0;
        assert_eq!(read_varlong(&out, &mut pos).unwrap(), i64::MIN);
    }

    #[test]
    fn varint_longer_than_five_bytes_is_invalid() {
        let bytes = [0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
        let mut pos = 0;
        let err = read_varint(&bytes, &mut pos).unwrap_err();
        assert_eq!(err.kind, DecodeErrorKind::InvalidVarint);
        assert_eq!(pos, 0, "position is not advanced on error");
    }

    #[test]
    fn varlong_longer_than_ten_bytes_is_invalid() {
        let mut bytes = vec![0x80; 10];
        bytes.push(0x01);
        let err = read_varlong(&bytes, &mut 0).unwrap_err();
        assert_eq!(err.kind, DecodeErrorKind::InvalidVarint);
    }

    #[test]
    fn varint_cut_short_is_truncated_at_its_start() {
        let bytes = [0x00, 0x80, 0x80];
        let mut pos = 1;
        let err = read_varint(&bytes, &mut pos).unwrap_err();
        assert_eq!(err.at, 1);
        assert!(matches!(err.kind, DecodeErrorKind::Truncated { .. }));
    }

    #[test]
    fn values_at_the_edges_of_the_inline_widths_read_back_with_their_width() {
        // One byte holds ZigZag values below 0x80, two bytes below 0x4000: the inline path ends
        // at the second byte and longer varints go out of line.
        for v in [0, -1, 1, 63, -64, 64, -65, 8191, -8192, 8192, -8193, i32::MAX, i32::MIN] {
            let bytes = enc32(v);
            let mut pos = 0;
            assert_eq!(read_varint(&bytes, &mut pos).unwrap(), v, "varint {v}");
            assert_eq!(pos, bytes.len(), "varint {v}");
            let mut long = Vec::new();
            write_varlong(&mut long, i64::from(v));
            let mut pos = 0;
            assert_eq!(read_varlong(&long, &mut pos).unwrap(), i64::from(v), "varlong {v}");
            assert_eq!(pos, long.len(), "varlong {v}");
        }
    }

    #[test]
    fn a_failed_read_leaves_the_position_where_the_varint_starts() {
        // Cut after one continuation byte (inside what the inline path reads), and missing.
        for bytes in [&[0x07, 0x80][..], &[0x07][..]] {
            let mut pos = 1;
            let err = read_varint(bytes, &mut pos).unwrap_err();
            assert_eq!((err.at, pos), (1, 1));
            assert!(matches!(err.kind, DecodeErrorKind::Truncated { .. }));
            let err = read_varlong(bytes, &mut pos).unwrap_err();
            assert_eq!((err.at, pos), (1, 1));
        }
    }

    proptest! {
        #[test]
        fn varint_roundtrips_and_size_matches(
            v in prop_oneof![any::<i32>(), -20_000i32..20_000, -(1i32 << 22)..(1 << 22)],
        ) {
            let out = enc32(v);
            prop_assert_eq!(out.len(), size_of_varint(v));
            let mut pos = 0;
            prop_assert_eq!(read_varint(&out, &mut pos).unwrap(), v);
            prop_assert_eq!(pos, out.len());
        }

        #[test]
        fn varlong_roundtrips_and_size_matches(v in any::<i64>()) {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            prop_assert_eq!(out.len(), size_of_varlong(v));
            let mut pos = 0;
            prop_assert_eq!(read_varlong(&out, &mut pos).unwrap(), v);
            prop_assert_eq!(pos, out.len());
        }

        #[test]
        fn random_bytes_never_panic_the_varint_readers(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            let _ = read_varint(&bytes, &mut 0);
            let _ = read_varlong(&bytes, &mut 0);
        }
    }
}
