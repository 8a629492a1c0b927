//! The render summary of a sealed span: what sizing learned about one sealed segment in each
//! format, kept in the segment cache ([`crate::render_index::RENDER_SUMMARY`]) so that a remount knows a
//! stream's size without rendering the segment again.
//!
//! One payload per span holds one [`FormatSummary`] per (format, isolation) rendered so far,
//! where `.json` with payloads shown as JSON ([`JsonPayload::Object`]) is a format of its own
//! (tag 3: its sizes are not `.json`'s):
//!
//! ```text
//! version u8 = 1 | count u16 | count × (format u8 | committed u8 | aborted digest u64
//!   | rendered bytes u64 | end bound i64 | checkpoints u32
//!   | checkpoints × (hint unit i64 | hint position u64 | bound i64 | rendered position u64))
//! ```
//!
//! **Invariant** (of a summary of span `s` in format `f`): rendering `s`'s batches in `f`, from
//! the cursor at its first batch to the cursor at its end, renders `rendered` bytes and ends at
//! offset bound `end_bound`; each checkpoint is a batch boundary inside `s` (a cursor the
//! source made, copied, never interpreted) with the rendered bytes of `s` before it. With
//! `read_committed` the rendering also depends on which of the span's transactions were
//! aborted: `digest` is [`crate::txn::TxnSnapshot::aborted_digest`] over the span, and a
//! summary is used only with an equal digest and a stable offset at or past the span's end.
//! Decoding checks every length and order; a payload that fails is ignored (and replaced).

use crate::render::JsonPayload;
use crate::spec::Format;
use topicfs_format::Offset;
use topicfs_source::CursorHint;

const VERSION: u8 = 1;

/// One checkpoint inside a span, relative to the span's start.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct SpanCheckpoint {
    pub(super) hint: CursorHint,
    pub(super) bound: Offset,
    pub(super) position: u64,
}

/// What rendering one span in one format (and isolation) gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct FormatSummary {
    /// The format, and how `.json` shows payloads that are JSON ([`JsonPayload::String`] for
    /// the other formats).
    pub(super) format: (Format, JsonPayload),
    pub(super) committed: bool,
    pub(super) digest: u64,
    pub(super) rendered: u64,
    pub(super) end_bound: Offset,
    pub(super) checkpoints: Vec<SpanCheckpoint>,
}

fn format_tag(f: (Format, JsonPayload)) -> u8 {
    match f {
        (Format::Values, _) => 0,
        (Format::Json, JsonPayload::String) => 1,
        (Format::Raw, _) => 2,
        (Format::Json, JsonPayload::Object) => 3,
    }
}

fn format_of(tag: u8) -> Option<(Format, JsonPayload)> {
    match tag {
        0 => Some((Format::Values, JsonPayload::String)),
        1 => Some((Format::Json, JsonPayload::String)),
        2 => Some((Format::Raw, JsonPayload::String)),
        3 => Some((Format::Json, JsonPayload::Object)),
        _ => None,
    }
}

/// Encodes `summaries` (at most one per format and isolation).
pub(super) fn encode(summaries: &[FormatSummary]) -> Vec<u8> {
    let mut out = vec![VERSION];
    out.extend_from_slice(&(summaries.len().min(usize::from(u16::MAX)) as u16).to_be_bytes());
    for s in summaries.iter().take(usize::from(u16::MAX)) {
        out.push(format_tag(s.format));
        out.push(u8::from(s.committed));
        out.extend_from_slice(&s.digest.to_be_bytes());
        out.extend_from_slice(&s.rendered.to_be_bytes());
        out.extend_from_slice(&s.end_bound.0.to_be_bytes());
        out.extend_from_slice(&(s.checkpoints.len() as u32).to_be_bytes());
        for c in &s.checkpoints {
            let (unit, pos) = c.hint.get().unwrap_or((i64::MIN, 0));
            out.extend_from_slice(&unit.to_be_bytes());
            out.extend_from_slice(&pos.to_be_bytes());
            out.extend_from_slice(&c.bound.0.to_be_bytes());
            out.extend_from_slice(&c.position.to_be_bytes());
        }
    }
    out
}

struct Cur<'a>(&'a [u8]);

impl Cur<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
}

/// Decodes a payload; `None` if any length, tag or order is wrong.
pub(super) fn decode(bytes: &[u8]) -> Option<Vec<FormatSummary>> {
    let mut c = Cur(bytes);
    if c.take::<1>()? != [VERSION] {
        return None;
    }
    let count = u16::from_be_bytes(c.take()?);
    let mut out = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let format = format_of(c.take::<1>()?[0])?;
        let committed = match c.take::<1>()?[0] {
            0 => false,
            1 => true,
            _ => return None,
        };
        let digest = u64::from_be_bytes(c.take()?);
        let rendered = u64::from_be_bytes(c.take()?);
        let end_bound = Offset(i64::from_be_bytes(c.take()?));
        let n = u32::from_be_bytes(c.take()?) as usize;
        // Each checkpoint takes 32 bytes: a count larger than what is left is damage.
        if n > c.0.len() / 32 {
            return None;
        }
        let mut checkpoints = Vec::with_capacity(n);
        let mut last = (Offset(i64::MIN), 0u64);
        for _ in 0..n {
            let unit = i64::from_be_bytes(c.take()?);
            let pos = u64::from_be_bytes(c.take()?);
            let bound = Offset(i64::from_be_bytes(c.take()?));
            let position = u64::from_be_bytes(c.take()?);
            if bound < last.0 || position < last.1 || position > rendered || bound > end_bound {
                return None;
            }
            last = (bound, position);
            checkpoints.push(SpanCheckpoint { hint: CursorHint::new(unit, pos), bound, position });
        }
        out.push(FormatSummary { format, committed, digest, rendered, end_bound, checkpoints });
    }
    c.0.is_empty().then_some(out)
}

/// `summaries` with `s` in place of the one of its format and isolation.
pub(super) fn merged(mut summaries: Vec<FormatSummary>, s: FormatSummary) -> Vec<FormatSummary> {
    summaries.retain(|x| (x.format, x.committed) != (s.format, s.committed));
    summaries.push(s);
    summaries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<FormatSummary> {
        vec![
            FormatSummary {
                format: (Format::Json, JsonPayload::String),
                committed: true,
                digest: 99,
                rendered: 5000,
                end_bound: Offset(120),
                checkpoints: vec![
                    SpanCheckpoint {
                        hint: CursorHint::new(100, 0),
                        bound: Offset(100),
                        position: 0,
                    },
                    SpanCheckpoint {
                        hint: CursorHint::new(100, 4096),
                        bound: Offset(110),
                        position: 2500,
                    },
                ],
            },
            FormatSummary {
                format: (Format::Raw, JsonPayload::String),
                committed: false,
                digest: 0,
                rendered: 7,
                end_bound: Offset(120),
                checkpoints: vec![],
            },
        ]
    }

    #[test]
    fn summaries_round_trip_and_merge_by_format_and_isolation() {
        let s = sample();
        assert_eq!(decode(&encode(&s)), Some(s.clone()));
        let mut replaced = s[1].clone();
        replaced.rendered = 8;
        let m = merged(s.clone(), replaced.clone());
        assert_eq!(m.len(), 2);
        assert!(m.contains(&replaced));
        let mut other = s[1].clone();
        other.committed = true;
        assert_eq!(merged(s.clone(), other).len(), 3);
        // `.json` with payloads as JSON is summarized apart from `.json`.
        let mut object = s[0].clone();
        object.format = (Format::Json, JsonPayload::Object);
        let m = merged(s, object.clone());
        assert_eq!(m.len(), 3);
        assert_eq!(decode(&encode(&m)), Some(m));
    }

    #[test]
    fn a_damaged_payload_decodes_to_nothing_never_a_panic() {
        let bytes = encode(&sample());
        for n in 0..bytes.len() {
            assert_eq!(decode(&bytes[..n]), None, "prefix of {n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(decode(&longer), None);
        let mut bad = bytes.clone();
        bad[0] = 2;
        assert_eq!(decode(&bad), None, "another version");
        // Checkpoints out of order.
        let mut s = sample();
        s[0].checkpoints.swap(0, 1);
        assert_eq!(decode(&encode(&s)), None);
        // A checkpoint past the span's rendering.
        let mut s = sample();
        s[0].checkpoints[1].position = 6000;
        assert_eq!(decode(&encode(&s)), None);
    }
}
