//! The per-segment field index: which records of one sealed segment hold which value of one
//! field (a JSON field of the value, or a header), as Druid keeps a dimension per segment: a
//! dictionary of the field's distinct values and, per value, the offsets holding it. Pure:
//! bytes in, bytes out; what a field *is* and how a value is read from a record is the view's.
//!
//! # Layout (version 1, big-endian)
//!
//! | position | field |
//! |---|---|
//! | 0 | magic `TFFI` |
//! | 4 | CRC-32C `u32` of every byte after it |
//! | 8 | version `u8` (1) |
//! | 9 | base offset `i64`, end offset `i64` (every record from the base offset below it is indexed) |
//! | 25 | record count `u64`: records indexed |
//! | 33 | the field's text: length (LEB128), bytes |
//! | | *other* postings: records whose field is an object or an array (not dictionary values, but candidates of every condition) |
//! | | entry count (LEB128), then per entry: kind `u8` ([`ValueKind`]), bytes (length LEB128, bytes), postings |
//!
//! Postings are a count (LEB128) and that many offsets relative to the base offset, the first
//! as is, each next one as the (positive) difference to the previous (LEB128).
//!
//! Entries are sorted by [`compare_entries`]: by kind (null, false, true, number, string),
//! numbers by their `f64` value then text, strings by bytes. So equal strings can be found by
//! binary search, and numbers near a value too.
//!
//! **Invariants** checked by [`FieldIndex::decode`] before anything is trusted: magic, version,
//! CRC, every length inside the bytes and nothing after the last entry, kinds known, numbers
//! UTF-8 text that parses as `f64`, entries strictly increasing in [`compare_entries`] order,
//! every offset in `[base, end)` and strictly increasing within its postings. Nothing here
//! panics on any bytes.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::bytes::invalid;
use crate::{DecodeError, Offset};

const MAGIC: &[u8; 4] = b"TFFI";
const VERSION: u8 = 1;
/// Bytes before the field text.
const HEAD: usize = 33;

/// The JSON type of a dictionary value (a header value is a [`ValueKind::String`] of its bytes,
/// a null header value [`ValueKind::Null`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueKind {
    Null = 0,
    False = 1,
    True = 2,
    /// Bytes: the number's JSON text.
    Number = 3,
    /// Bytes: the string's content (unescaped), or a header value's bytes.
    String = 4,
}

impl ValueKind {
    fn of(tag: u8) -> Option<ValueKind> {
        Some(match tag {
            0 => ValueKind::Null,
            1 => ValueKind::False,
            2 => ValueKind::True,
            3 => ValueKind::Number,
            4 => ValueKind::String,
            _ => return None,
        })
    }
}

/// One dictionary value and the records holding it (offsets relative to the base offset).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: ValueKind,
    pub bytes: Vec<u8>,
    pub offsets: Vec<u32>,
}

/// The order of dictionary entries (see the module docs).
pub fn compare_entries(a: (ValueKind, &[u8]), b: (ValueKind, &[u8])) -> Ordering {
    a.0.cmp(&b.0).then_with(|| {
        if a.0 == ValueKind::Number {
            let (x, y) = (number(a.1), number(b.1));
            x.partial_cmp(&y).unwrap_or(Ordering::Equal).then_with(|| a.1.cmp(b.1))
        } else {
            a.1.cmp(b.1)
        }
    })
}

/// A number's text as `f64` (NaN when it is not one; decode refuses those).
fn number(text: &[u8]) -> f64 {
    std::str::from_utf8(text).ok().and_then(|t| t.parse::<f64>().ok()).unwrap_or(f64::NAN)
}

/// One sealed segment's index of one field (decoded and checked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldIndex {
    pub base: Offset,
    pub end: Offset,
    pub records: u64,
    /// The field's text, as the filter writes it.
    pub field: Vec<u8>,
    /// Records whose field is an object or an array.
    pub other: Vec<u32>,
    /// The dictionary, in [`compare_entries`] order.
    pub entries: Vec<Entry>,
}

impl FieldIndex {
    /// Bytes this index holds in memory (about).
    pub fn memory_bytes(&self) -> usize {
        let postings: usize =
            self.entries.iter().map(|e| e.offsets.len() * 4 + e.bytes.len() + 56).sum();
        postings + self.other.len() * 4 + self.field.len() + 96
    }

    /// The index of the entry `(kind, bytes)`, if present.
    pub fn find(&self, kind: ValueKind, bytes: &[u8]) -> Option<usize> {
        self.entries.binary_search_by(|e| compare_entries((e.kind, &e.bytes), (kind, bytes))).ok()
    }

    /// Checks and decodes `b` (see the module docs for what is checked).
    pub fn decode(b: &[u8]) -> Result<FieldIndex, DecodeError> {
        if b.get(..4) != Some(MAGIC.as_slice()) {
            return Err(invalid(0, "field index: bad magic"));
        }
        let crc = b.get(4..8).and_then(|c| <[u8; 4]>::try_from(c).ok()).map(u32::from_be_bytes);
        if crc != Some(crc32c::crc32c(b.get(8..).unwrap_or_default())) {
            return Err(invalid(4, "field index: CRC mismatch"));
        }
        if b.get(8) != Some(&VERSION) {
            return Err(invalid(8, "field index: unknown version"));
        }
        let mut r = Reader { b, at: 9 };
        let base = Offset(r.i64()?);
        let end = Offset(r.i64()?);
        let records = r.i64()? as u64;
        if end < base {
            return Err(invalid(17, "field index: end before base"));
        }
        let span = end.0.checked_sub(base.0).and_then(|d| u64::try_from(d).ok()).unwrap_or(0);
        let n = r.len()?;
        let field = r.take(n)?.to_vec();
        let other = r.postings(span)?;
        let count = r.len()?;
        let mut entries: Vec<Entry> = Vec::with_capacity(count.min(b.len()));
        for _ in 0..count {
            let at = r.at;
            let kind = r.u8().and_then(|t| {
                ValueKind::of(t).ok_or_else(|| invalid(at, "field index: unknown kind"))
            })?;
            let n = r.len()?;
            let bytes = r.take(n)?.to_vec();
            if kind == ValueKind::Number && number(&bytes).is_nan() {
                return Err(invalid(at, "field index: a number that is not one"));
            }
            if matches!(kind, ValueKind::Null | ValueKind::False | ValueKind::True)
                && !bytes.is_empty()
            {
                return Err(invalid(at, "field index: a literal with bytes"));
            }
            if let Some(prev) = entries.last() {
                if compare_entries((prev.kind, &prev.bytes), (kind, &bytes)) != Ordering::Less {
                    return Err(invalid(at, "field index: dictionary not sorted"));
                }
            }
            let offsets = r.postings(span)?;
            entries.push(Entry { kind, bytes, offsets });
        }
        if r.at != b.len() {
            return Err(invalid(r.at, "field index: bytes after the last entry"));
        }
        Ok(FieldIndex { base, end, records, field, other, entries })
    }
}

/// Reads the parts of an index, every read checked.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let end = self.at.checked_add(n).ok_or_else(|| invalid(self.at, "field index: length"))?;
        let out =
            self.b.get(self.at..end).ok_or_else(|| invalid(self.at, "field index: truncated"))?;
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        self.take(1).map(|b| b.first().copied().unwrap_or(0))
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        let b = self.take(8)?;
        Ok(i64::from_be_bytes(<[u8; 8]>::try_from(b).unwrap_or_default()))
    }

    fn uleb(&mut self) -> Result<u64, DecodeError> {
        let start = self.at;
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let c = self.u8()?;
            v |= u64::from(c & 0x7f).checked_shl(shift).unwrap_or(0);
            if c & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(invalid(start, "field index: varint too long"))
    }

    /// A count or length, which cannot exceed the bytes left.
    fn len(&mut self) -> Result<usize, DecodeError> {
        let at = self.at;
        let n = self.uleb()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.b.len().saturating_sub(self.at))
            .ok_or_else(|| invalid(at, "field index: a length past the end"))
    }

    /// Postings of relative offsets below `span`, strictly increasing.
    fn postings(&mut self, span: u64) -> Result<Vec<u32>, DecodeError> {
        let count = self.len()?;
        let mut out = Vec::with_capacity(count);
        let mut prev: Option<u64> = None;
        for _ in 0..count {
            let at = self.at;
            let d = self.uleb()?;
            let v = match prev {
                None => Some(d),
                Some(p) if d > 0 => p.checked_add(d),
                Some(_) => None,
            };
            let v = v
                .filter(|&v| v < span)
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(|| invalid(at, "field index: an offset out of order or range"))?;
            prev = Some(u64::from(v));
            out.push(v);
        }
        Ok(out)
    }
}

fn put_uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let c = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(c);
            return;
        }
        out.push(c | 0x80);
    }
}

fn put_postings(out: &mut Vec<u8>, offsets: &[u32]) {
    put_uleb(out, offsets.len() as u64);
    let mut prev = None;
    for &o in offsets {
        put_uleb(out, prev.map_or(u64::from(o), |p: u32| u64::from(o - p)));
        prev = Some(o);
    }
}

/// Builds one segment's index of one field from the records in offset order.
#[derive(Debug)]
pub struct FieldIndexBuilder {
    base: Offset,
    field: Vec<u8>,
    values: HashMap<(ValueKind, Vec<u8>), Vec<u32>>,
    other: Vec<u32>,
    records: u64,
    /// The last record counted (a record is counted once, whatever it holds).
    last: Option<Offset>,
}

impl FieldIndexBuilder {
    /// An empty index of `field` for a segment whose base offset is `base`.
    pub fn new(field: &[u8], base: Offset) -> FieldIndexBuilder {
        FieldIndexBuilder {
            base,
            field: field.to_vec(),
            values: HashMap::new(),
            other: Vec::new(),
            records: 0,
            last: None,
        }
    }

    /// `offset` relative to the base, when it is in the segment's range and not before the
    /// last one given.
    fn relative(&mut self, offset: Offset) -> Option<u32> {
        if self.last.is_some_and(|l| offset < l) {
            return None;
        }
        if self.last != Some(offset) {
            self.records += 1;
            self.last = Some(offset);
        }
        u32::try_from(offset.0.checked_sub(self.base.0)?).ok()
    }

    /// A record at `offset` (offsets come in increasing order) that holds nothing to index
    /// (not JSON, no such field).
    pub fn skip(&mut self, offset: Offset) {
        self.relative(offset);
    }

    /// The record at `offset` holds `bytes` of `kind` in the field (a record may hold several
    /// values, header values: each is added).
    pub fn add(&mut self, offset: Offset, kind: ValueKind, bytes: &[u8]) {
        if let Some(rel) = self.relative(offset) {
            let list = self.values.entry((kind, bytes.to_vec())).or_default();
            if list.last() != Some(&rel) {
                list.push(rel);
            }
        }
    }

    /// The record at `offset` holds an object or an array in the field.
    pub fn add_other(&mut self, offset: Offset) {
        if let Some(rel) = self.relative(offset) {
            if self.other.last() != Some(&rel) {
                self.other.push(rel);
            }
        }
    }

    /// The index's bytes; `end`: every record below it was given.
    pub fn finish(self, end: Offset) -> Vec<u8> {
        let mut entries: Vec<_> = self.values.into_iter().collect();
        entries.sort_by(|a, b| compare_entries((a.0.0, &a.0.1), (b.0.0, &b.0.1)));
        let mut out = Vec::with_capacity(64 + entries.len() * 16);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&[0; 4]);
        out.push(VERSION);
        out.extend_from_slice(&self.base.0.to_be_bytes());
        out.extend_from_slice(&end.0.max(self.base.0).to_be_bytes());
        out.extend_from_slice(&(self.records as i64).to_be_bytes());
        debug_assert_eq!(out.len(), HEAD);
        put_uleb(&mut out, self.field.len() as u64);
        out.extend_from_slice(&self.field);
        put_postings(&mut out, &self.other);
        put_uleb(&mut out, entries.len() as u64);
        for ((kind, bytes), offsets) in &entries {
            out.push(*kind as u8);
            put_uleb(&mut out, bytes.len() as u64);
            out.extend_from_slice(bytes);
            put_postings(&mut out, offsets);
        }
        let crc = crc32c::crc32c(out.get(8..).unwrap_or_default());
        if let Some(c) = out.get_mut(4..8) {
            c.copy_from_slice(&crc.to_be_bytes());
        }
        out
    }
}

/// The indexes of several fields of one segment, kept as one payload: each index's length
/// (`u32`, big-endian), then its bytes.
pub fn encode_set<'a>(indexes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for index in indexes {
        out.extend_from_slice(&u32::try_from(index.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(index);
    }
    out
}

/// The indexes of an [`encode_set`] payload (each still to be decoded); the ones before any
/// damage in the framing.
pub fn split_set(mut b: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let Some((len, rest)) = b.split_first_chunk::<4>() {
        let len = u32::from_be_bytes(*len) as usize;
        let Some(index) = rest.get(..len) else { break };
        out.push(index);
        b = rest.get(len..).unwrap_or_default();
    }
    out
}

#[cfg(test)]
mod tests;
