//! Kafka's four codecs, exactly as Kafka frames them (`clients/.../common/compress/*`):
//!
//! - gzip (1): an RFC 1952 stream; concatenated members are accepted on read.
//! - snappy (2): the *xerial snappy-java* stream, not raw snappy and not the official framing
//!   format: a 16-byte header (`82 53 4E 41 50 50 59 00`, int32 BE version 1, int32 BE minimum
//!   compatible version 1), then chunks of int32 BE length + one raw snappy block. Input without
//!   the header is read as one raw block (snappy-java's fallback); a repeated header between
//!   chunks (concatenated streams) is skipped.
//! - lz4 (3): the LZ4 frame format: FLG version `01`, reserved bits 0; the header checksum (HC)
//!   is verified except for magic v0 data, whose HC Kafka computed wrongly before KIP-57; block
//!   checksums are verified, the content checksum is skipped unverified. Read with independent
//!   *or linked* blocks (Kafka's `Lz4BlockInputStream` takes independent ones only, but liblz4's
//!   default and brokers such as tansu write linked ones: a linked block may refer back into the
//!   last 64 KiB of output). Written as Kafka writes it: FLG `0x60` (independent blocks), BD
//!   `0x40` (64 KiB blocks), a correct HC, blocks stored uncompressed when compression does not
//!   shrink them.
//! - zstd (4): a standard Zstandard frame; magic v2 only.
//!
//! Every decoder bounds its output by [`MAX_DECOMPRESSED_SIZE`] so a small hostile payload cannot
//! exhaust memory, and returns [`DecodeErrorKind::Decompression`] rather than panicking.

use std::io::{Read, Write};

use twox_hash::XxHash32;

use super::{DecodeError, DecodeErrorKind};

/// Largest decompressed payload accepted from one batch (256 MiB). Kafka's own bound is the
/// broker's memory; ours turns a decompression bomb into a [`DecodeError`].
pub const MAX_DECOMPRESSED_SIZE: usize = 256 * 1024 * 1024;

/// Compression codec of a batch (attribute bits 0-2).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    /// 0: uncompressed.
    None,
    /// 1: gzip (RFC 1952).
    Gzip,
    /// 2: snappy in snappy-java's stream framing.
    Snappy,
    /// 3: LZ4 frame, independent blocks.
    Lz4,
    /// 4: Zstandard (v2 only).
    Zstd,
}

impl Compression {
    /// Every codec, in id order.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec in attribute bits 0-2. Ids 5-7 are [`DecodeErrorKind::InvalidCompression`]
    /// (`at` 0: the caller knows where the attributes are and adjusts it).
    pub fn from_attributes(attributes: u8) -> Result<Compression, DecodeError> {
        let id = attributes & 0x07;
        Compression::from_id(id)
            .ok_or_else(|| DecodeError::new(0, DecodeErrorKind::InvalidCompression(id)))
    }

    /// The codec with this id (`CompressionType.forId`), if any.
    pub fn from_id(id: u8) -> Option<Compression> {
        match id {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// The id stored in attribute bits 0-2.
    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// The name Kafka uses (`compression.type`, `compresscodec:` in kafka-dump-log.sh).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// Parses a codec name as in the `compression.type` topic config (lowercase, as Kafka
    /// requires). `producer` (keep the producer's codec) is not a codec and returns `None`.
    pub fn from_name(name: &str) -> Option<Compression> {
        Compression::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// Compresses `data` (a concatenation of records, or a legacy inner message set) with `c`,
/// framed as Kafka frames it. [`Compression::None`] returns a copy.
pub fn compress(c: Compression, data: &[u8]) -> Result<Vec<u8>, DecodeError> {
    match c {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(data.len() / 2 + 64),
                flate2::Compression::default(),
            );
            enc.write_all(data).map_err(|e| codec_error(0, "gzip", e))?;
            enc.finish().map_err(|e| codec_error(0, "gzip", e))
        }
        Compression::Snappy => snappy_compress(data),
        Compression::Lz4 => Ok(lz4_compress(data)),
        // Kafka's default zstd level is 3 (`ZstdCompression.DEFAULT_LEVEL`).
        Compression::Zstd => zstd::bulk::compress(data, 3).map_err(|e| codec_error(0, "zstd", e)),
    }
}

/// Decompresses a batch payload (or legacy wrapper value) compressed with `c`. `magic` is the
/// batch's magic: it decides whether the LZ4 header checksum is checked (v1, v2) or ignored
/// (v0). Error positions (`at`) are byte offsets inside `data`, where known, else 0.
pub fn decompress(c: Compression, data: &[u8], magic: i8) -> Result<Vec<u8>, DecodeError> {
    decompress_bounded(c, data, magic, MAX_DECOMPRESSED_SIZE)
}

/// [`decompress`] with an explicit output bound `limit` (bytes).
pub fn decompress_bounded(
    c: Compression,
    data: &[u8],
    magic: i8,
    limit: usize,
) -> Result<Vec<u8>, DecodeError> {
    match c {
        Compression::None => {
            if data.len() > limit {
                return Err(too_large(0, limit));
            }
            Ok(data.to_vec())
        }
        Compression::Gzip => {
            read_bounded(flate2::read::MultiGzDecoder::new(data), "gzip", data.len(), limit)
        }
        Compression::Snappy => snappy_decompress(data, limit),
        Compression::Lz4 => lz4_decompress(data, magic < 1, limit),
        Compression::Zstd => {
            let dec = zstd::stream::read::Decoder::with_buffer(data)
                .map_err(|e| codec_error(0, "zstd", e))?;
            read_bounded(dec, "zstd", data.len(), limit)
        }
    }
}

fn read_bounded(
    r: impl Read,
    codec: &str,
    hint: usize,
    limit: usize,
) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(hint.saturating_mul(2).min(1 << 20).min(limit));
    r.take(limit as u64 + 1).read_to_end(&mut out).map_err(|e| codec_error(0, codec, e))?;
    if out.len() > limit {
        return Err(too_large(0, limit));
    }
    Ok(out)
}

fn codec_error(at: usize, codec: &str, e: impl std::fmt::Display) -> DecodeError {
    DecodeError::new(at, DecodeErrorKind::Decompression(format!("{codec}: {e}")))
}

fn too_large(at: usize, limit: usize) -> DecodeError {
    DecodeError::new(
        at,
        DecodeErrorKind::Decompression(format!("decompressed size exceeds {limit} bytes")),
    )
}

fn be_u32(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn le_u32(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

// ---------------------------------------------------------------------------------------------
// snappy (xerial snappy-java stream)

/// `0x82 "SNAPPY" 0x00`, the start of snappy-java's stream header.
const SNAPPY_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0x00];
/// Magic + int32 version + int32 minimum compatible version.
const SNAPPY_HEADER_SIZE: usize = 16;
/// Uncompressed bytes per chunk on write (snappy-java's default block size).
const SNAPPY_CHUNK: usize = 32 * 1024;

fn snappy_compress(data: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(SNAPPY_HEADER_SIZE + data.len() / 2 + 64);
    out.extend_from_slice(&SNAPPY_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut enc = snap::raw::Encoder::new();
    let mut block = Vec::new();
    for chunk in data.chunks(SNAPPY_CHUNK) {
        block.resize(snap::raw::max_compress_len(chunk.len()), 0);
        let n = enc.compress(chunk, &mut block).map_err(|e| codec_error(0, "snappy", e))?;
        let len = i32::try_from(n).map_err(|e| codec_error(0, "snappy", e))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(block.get(..n).unwrap_or_default());
    }
    Ok(out)
}

fn snappy_decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
    let mut dec = snap::raw::Decoder::new();
    if !data.starts_with(&SNAPPY_MAGIC) || data.len() < SNAPPY_HEADER_SIZE {
        // snappy-java's fallback: no stream header means one raw snappy block.
        let mut out = Vec::new();
        snappy_block(&mut dec, data, 0, &mut out, limit)?;
        return Ok(out);
    }
    let mut out = Vec::new();
    let mut pos = SNAPPY_HEADER_SIZE;
    while pos < data.len() {
        // A second stream header (concatenated snappy-java streams) is skipped.
        if data.get(pos..).is_some_and(|rest| rest.starts_with(&SNAPPY_MAGIC)) {
            if data.len() - pos < SNAPPY_HEADER_SIZE {
                return Err(codec_error(pos, "snappy", "truncated stream header"));
            }
            pos += SNAPPY_HEADER_SIZE;
            continue;
        }
        let len = be_u32(data, pos)
            .ok_or_else(|| codec_error(pos, "snappy", "truncated chunk length"))?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= i32::MAX as usize)
            .ok_or_else(|| codec_error(pos, "snappy", "negative chunk length"))?;
        let start = pos + 4;
        let end = start
            .checked_add(len)
            .filter(|&e| e <= data.len())
            .ok_or_else(|| codec_error(pos, "snappy", "chunk extends past the end of the data"))?;
        snappy_block(&mut dec, data.get(start..end).unwrap_or_default(), start, &mut out, limit)?;
        pos = end;
    }
    Ok(out)
}

/// Decompresses one raw snappy block, appending to `out`, checking the total bound first.
fn snappy_block(
    dec: &mut snap::raw::Decoder,
    block: &[u8],
    at: usize,
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), DecodeError> {
    let n = snap::raw::decompress_len(block).map_err(|e| codec_error(at, "snappy", e))?;
    let old = out.len();
    let total = old.checked_add(n).filter(|&t| t <= limit).ok_or_else(|| too_large(at, limit))?;
    out.resize(total, 0);
    let written = dec
        .decompress(block, out.get_mut(old..).unwrap_or_default())
        .map_err(|e| codec_error(at, "snappy", e))?;
    out.truncate(old + written);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// lz4 frame

const LZ4_MAGIC: u32 = 0x184D_2204;
/// FLG: version `01`, independent blocks, no checksums, no content size (what Kafka writes).
const LZ4_FLG: u8 = 0x60;
/// BD: maximum block size code 4 = 64 KiB (what Kafka writes).
const LZ4_BD: u8 = 0x40;
const LZ4_BLOCK_SIZE: usize = 64 * 1024;
/// How far back a linked block may copy from: LZ4's 64 KiB window.
const LZ4_WINDOW: usize = 64 * 1024;
/// High bit of a block size: the block is stored uncompressed.
const LZ4_UNCOMPRESSED: u32 = 0x8000_0000;

fn lz4_compress(data: &[u8]) -> Vec<u8> {
    let blocks = data.len().div_ceil(LZ4_BLOCK_SIZE);
    let mut out = Vec::with_capacity(7 + 4 + data.len() + blocks * 4 + 64);
    out.extend_from_slice(&LZ4_MAGIC.to_le_bytes());
    out.push(LZ4_FLG);
    out.push(LZ4_BD);
    out.push(lz4_header_checksum(&[LZ4_FLG, LZ4_BD]));
    let mut scratch = vec![0u8; lz4_flex::block::get_maximum_output_size(LZ4_BLOCK_SIZE)];
    for chunk in data.chunks(LZ4_BLOCK_SIZE) {
        match lz4_flex::block::compress_into(chunk, &mut scratch) {
            Ok(n) if n < chunk.len() => {
                out.extend_from_slice(&(n as u32).to_le_bytes());
                out.extend_from_slice(scratch.get(..n).unwrap_or_default());
            }
            // Kafka stores a block uncompressed when compression does not shrink it.
            _ => {
                out.extend_from_slice(&(chunk.len() as u32 | LZ4_UNCOMPRESSED).to_le_bytes());
                out.extend_from_slice(chunk);
            }
        }
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    out
}

/// HC = second byte of xxHash32(descriptor, seed 0).
fn lz4_header_checksum(descriptor: &[u8]) -> u8 {
    (XxHash32::oneshot(0, descriptor) >> 8) as u8
}

fn lz4_decompress(
    data: &[u8],
    ignore_header_checksum: bool,
    limit: usize,
) -> Result<Vec<u8>, DecodeError> {
    let err = |at: usize, why: &str| codec_error(at, "lz4", why);
    if le_u32(data, 0) != Some(LZ4_MAGIC) {
        return Err(err(0, "missing frame magic"));
    }
    let (&flg, &bd) = match (data.get(4), data.get(5)) {
        (Some(f), Some(b)) => (f, b),
        _ => return Err(err(4, "truncated frame descriptor")),
    };
    if flg >> 6 != 0b01 {
        return Err(err(4, "unsupported frame version"));
    }
    if flg & 0x03 != 0 || bd & 0x8f != 0 {
        return Err(err(4, "reserved descriptor bits set"));
    }
    // Linked blocks (block independence flag clear) may copy from the previous 64 KiB of output.
    let linked = flg & 0x20 == 0;
    let block_checksum = flg & 0x10 != 0;
    let content_size = flg & 0x08 != 0;
    let content_checksum = flg & 0x04 != 0;
    let max_block = match (bd >> 4) & 0x07 {
        4 => 64 << 10,
        5 => 256 << 10,
        6 => 1 << 20,
        7 => 4 << 20,
        _ => return Err(err(5, "invalid maximum block size")),
    };
    let hc_at = if content_size { 14 } else { 6 };
    let hc = *data.get(hc_at).ok_or_else(|| err(hc_at, "truncated frame descriptor"))?;
    if !ignore_header_checksum {
        let descriptor = data.get(4..hc_at).unwrap_or_default();
        if lz4_header_checksum(descriptor) != hc {
            return Err(err(hc_at, "frame descriptor checksum mismatch"));
        }
    }
    let mut out = Vec::new();
    let mut pos = hc_at + 1;
    loop {
        let raw = le_u32(data, pos).ok_or_else(|| err(pos, "truncated block size"))?;
        let size = (raw & !LZ4_UNCOMPRESSED) as usize;
        if size == 0 {
            // End mark; Kafka skips the content checksum without verifying it.
            if content_checksum && le_u32(data, pos + 4).is_none() {
                return Err(err(pos + 4, "truncated content checksum"));
            }
            return Ok(out);
        }
        if size > max_block {
            return Err(err(pos, "block size exceeds the frame's maximum"));
        }
        let start = pos + 4;
        let block = start
            .checked_add(size)
            .and_then(|end| data.get(start..end))
            .ok_or_else(|| err(pos, "block extends past the end of the data"))?;
        let mut next = start + size;
        if block_checksum {
            let stored = le_u32(data, next).ok_or_else(|| err(next, "truncated block checksum"))?;
            if stored != XxHash32::oneshot(0, block) {
                return Err(err(next, "block checksum mismatch"));
            }
            next += 4;
        }
        let old = out.len();
        if raw & LZ4_UNCOMPRESSED != 0 {
            if old + size > limit {
                return Err(too_large(pos, limit));
            }
            out.extend_from_slice(block);
        } else {
            // Decompress into a full block of room, then check the real size against the bound.
            out.resize(old + max_block, 0);
            let (before, room) = out.split_at_mut(old);
            let n = if linked {
                let dict = before.get(old.saturating_sub(LZ4_WINDOW)..).unwrap_or_default();
                lz4_flex::block::decompress_into_with_dict(block, room, dict)
            } else {
                lz4_flex::block::decompress_into(block, room)
            }
            .map_err(|e| codec_error(start, "lz4", e))?;
            out.truncate(old + n);
            if out.len() > limit {
                return Err(too_large(pos, limit));
            }
        }
        pos = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Vec<u8> {
        let mut v = Vec::new();
        for i in 0..200_000u32 {
            v.extend_from_slice(format!("record-{} ", i % 977).as_bytes());
        }
        v
    }

    #[test]
    fn every_codec_roundtrips_large_and_empty_inputs() {
        let data = sample();
        for c in Compression::ALL {
            for input in [&data[..], &[][..], b"x"] {
                let packed = compress(c, input).unwrap();
                assert_eq!(decompress(c, &packed, 2).unwrap(), input, "{}", c.name());
            }
        }
    }

    #[test]
    fn codec_names_and_ids_roundtrip() {
        for c in Compression::ALL {
            assert_eq!(Compression::from_name(c.name()), Some(c));
            assert_eq!(Compression::from_attributes(c.id() | 0x18).unwrap(), c);
        }
        assert_eq!(Compression::from_name("producer"), None);
        assert_eq!(Compression::from_name("GZIP"), None);
        for bad in 5..8u8 {
            let e = Compression::from_attributes(bad).unwrap_err();
            assert_eq!(e.kind, DecodeErrorKind::InvalidCompression(bad));
        }
    }

    #[test]
    fn lz4_frame_header_is_what_kafka_writes() {
        let packed = compress(Compression::Lz4, b"hello").unwrap();
        assert_eq!(&packed[..6], &[0x04, 0x22, 0x4d, 0x18, 0x60, 0x40]);
        // HC of (60 40) as written by Kafka's Lz4BlockOutputStream and liblz4.
        assert_eq!(packed[6], 0x82);
        assert_eq!(&packed[packed.len() - 4..], &[0, 0, 0, 0]);
    }

    #[test]
    fn lz4_frames_from_lz4_flex_frame_encoder_decode() {
        let data = sample();
        let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(
            lz4_flex::frame::FrameInfo::new()
                .block_mode(lz4_flex::frame::BlockMode::Independent)
                .block_checksums(true)
                .content_checksum(true),
            Vec::new(),
        );
        enc.write_all(&data).unwrap();
        let framed = enc.finish().unwrap();
        assert_eq!(decompress(Compression::Lz4, &framed, 2).unwrap(), data);
    }

    #[test]
    fn lz4_wrong_header_checksum_is_rejected_except_for_magic_v0() {
        let mut packed = compress(Compression::Lz4, b"hello hello hello").unwrap();
        packed[6] ^= 0xff;
        assert!(decompress(Compression::Lz4, &packed, 1).is_err());
        assert!(decompress(Compression::Lz4, &packed, 2).is_err());
        assert_eq!(decompress(Compression::Lz4, &packed, 0).unwrap(), b"hello hello hello");
    }

    /// Data whose later 64 KiB blocks repeat earlier ones, so a linked-block encoder copies from
    /// the previous block (the dictionary) rather than within the block.
    fn cross_block_data() -> Vec<u8> {
        let mut seed = 0x2545_f491_u32;
        let chunk: Vec<u8> = (0..50_000)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                (seed % 251) as u8
            })
            .collect();
        let mut data = Vec::new();
        for _ in 0..7 {
            data.extend_from_slice(&chunk);
        }
        data
    }

    fn linked_frame(data: &[u8], checksums: bool) -> Vec<u8> {
        let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(
            lz4_flex::frame::FrameInfo::new()
                .block_mode(lz4_flex::frame::BlockMode::Linked)
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_checksums(checksums)
                .content_checksum(checksums),
            Vec::new(),
        );
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn lz4_linked_block_frames_decode() {
        let data = cross_block_data();
        for checksums in [false, true] {
            let framed = linked_frame(&data, checksums);
            assert_eq!(framed[4] & 0x20, 0, "the encoder wrote independent blocks");
            // Random bytes repeated every 50,000: mostly back references across blocks shrink it.
            assert!(framed.len() < data.len() / 2, "{} bytes", framed.len());
            assert_eq!(decompress(Compression::Lz4, &framed, 2).unwrap(), data);
        }
        // The same frame read as independent blocks cannot resolve its back references.
        let mut independent = linked_frame(&data, false);
        independent[4] |= 0x20;
        independent[6] = lz4_header_checksum(&independent[4..6]);
        assert!(decompress(Compression::Lz4, &independent, 2).is_err());
    }

    #[test]
    fn lz4_linked_blocks_keep_the_size_bound_and_error_positions() {
        let data = cross_block_data();
        let framed = linked_frame(&data, false);
        let e = decompress_bounded(Compression::Lz4, &framed, 2, 100_000).unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::Decompression(ref m) if m.contains("100000")));
        // A corrupt later block reports that block's position, not the frame's start.
        let mut bad = framed.clone();
        let first = 7 + 4 + (u32::from_le_bytes(bad[7..11].try_into().unwrap()) & 0x7fff_ffff);
        let second_data = first as usize + 4;
        for b in &mut bad[second_data..second_data + 8] {
            *b = 0xff;
        }
        let e = decompress(Compression::Lz4, &bad, 2).unwrap_err();
        assert!(e.at >= first as usize, "{e:?}");
    }

    #[test]
    fn snappy_stream_has_the_xerial_header_and_chunks() {
        let data = sample();
        let packed = compress(Compression::Snappy, &data).unwrap();
        assert_eq!(
            &packed[..16],
            &[0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1]
        );
        // Chunks are at most 32 KiB of input: the first chunk decompresses to exactly 32 KiB.
        let len = u32::from_be_bytes(packed[16..20].try_into().unwrap()) as usize;
        let first = snap::raw::Decoder::new().decompress_vec(&packed[20..20 + len]).unwrap();
        assert_eq!(first.len(), SNAPPY_CHUNK);
    }

    #[test]
    fn snappy_without_header_is_read_as_one_raw_block() {
        let raw = snap::raw::Encoder::new().compress_vec(b"raw snappy block").unwrap();
        assert_eq!(decompress(Compression::Snappy, &raw, 1).unwrap(), b"raw snappy block");
    }

    #[test]
    fn concatenated_snappy_streams_and_gzip_members_decode_fully() {
        let mut s = compress(Compression::Snappy, b"first ").unwrap();
        s.extend(compress(Compression::Snappy, b"second").unwrap());
        assert_eq!(decompress(Compression::Snappy, &s, 2).unwrap(), b"first second");
        let mut g = compress(Compression::Gzip, b"first ").unwrap();
        g.extend(compress(Compression::Gzip, b"second").unwrap());
        assert_eq!(decompress(Compression::Gzip, &g, 2).unwrap(), b"first second");
    }

    #[test]
    fn output_above_the_bound_is_rejected_by_every_codec() {
        let zeros = vec![0u8; 1 << 20];
        for c in Compression::ALL {
            let packed = compress(c, &zeros).unwrap();
            let e = decompress_bounded(c, &packed, 2, (1 << 20) - 1).unwrap_err();
            assert!(matches!(e.kind, DecodeErrorKind::Decompression(_)), "{}", c.name());
            assert_eq!(decompress_bounded(c, &packed, 2, 1 << 20).unwrap().len(), 1 << 20);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn garbage_never_panics_any_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            for c in Compression::ALL {
                for magic in 0..3 {
                    let _ = decompress(c, &bytes, magic);
                }
            }
        }

        #[test]
        fn mutated_streams_never_panic(data in proptest::collection::vec(any::<u8>(), 0..2000),
                                       flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
            for c in Compression::ALL {
                let mut packed = compress(c, &data).unwrap();
                if packed.is_empty() { continue; }
                for &(i, x) in &flips {
                    let n = packed.len();
                    packed[i % n] ^= x;
                }
                let _ = decompress(c, &packed, 2);
            }
        }
    }
}
