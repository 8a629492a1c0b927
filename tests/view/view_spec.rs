//! Spec grammar and resolution: every accepted form, garbage rejected, ListOffsets semantics.

use crate::view_support;

use std::sync::Arc;

use topicfs::error::Error;
use topicfs::format::Offset;
use topicfs::source::{PartitionSource, ReadCursor};
use topicfs::view::listing::{by_offset_names, by_time_names};
use topicfs::view::spec::{
    Bound, Format, OffsetPoint, Resolved, Selector, StreamSpec, TimePoint, time_name,
};
use view_support::{MemPartition, plain, rec};

fn offsets(name: &str) -> (Selector, Format) {
    let s = StreamSpec::parse_by_offset(name).unwrap_or_else(|e| panic!("{e}"));
    (s.selector, s.format)
}

fn times(name: &str) -> Selector {
    StreamSpec::parse_by_time(name).unwrap_or_else(|e| panic!("{e}")).selector
}

#[test]
fn by_offset_grammar_accepts_every_form_and_suffix() {
    use OffsetPoint::*;
    let at = |n| Selector::Offsets { start: At(Offset(n)), end: None };
    assert_eq!(offsets("42"), (at(42), Format::Values));
    assert_eq!(offsets("42.json"), (at(42), Format::Json));
    assert_eq!(offsets("42.raw"), (at(42), Format::Raw));
    assert_eq!(offsets("42.."), (at(42), Format::Values));
    assert_eq!(offsets("0"), (at(0), Format::Values));
    assert_eq!(offsets("-10").0, Selector::Offsets { start: BeforeEnd(10), end: None });
    assert_eq!(offsets("-10...json").0, Selector::Offsets { start: BeforeEnd(10), end: None });
    assert_eq!(
        offsets("100..200.raw"),
        (Selector::Offsets { start: At(Offset(100)), end: Some(Offset(200)) }, Format::Raw)
    );
    assert_eq!(offsets("5..5").0, Selector::Offsets { start: At(Offset(5)), end: Some(Offset(5)) });
    assert_eq!(offsets(&i64::MAX.to_string()).0, at(i64::MAX));
}

#[test]
fn by_offset_rejects_garbage_negative_ranges_and_overflow() {
    for name in [
        "",
        ".json",
        "abc",
        "+5",
        "5x",
        " 5",
        "1.5",
        "5.",
        "5..json",
        "..10",
        "10..5",
        "-5..10",
        "5..-1",
        "5..10..20",
        "9223372036854775808",
        "-18446744073709551616",
        "0..99999999999999999999",
        "--1",
        "-",
        "5.txt",
        "٣",
    ] {
        let err = StreamSpec::parse_by_offset(name).expect_err(name);
        assert_eq!(Error::from(err).errno(), libc::ENOENT, "{name}");
    }
}

#[test]
fn by_time_grammar_accepts_every_form() {
    use TimePoint::*;
    let from = |t| Selector::Times { start: t, end: None };
    assert_eq!(times("1764662400000"), from(At(1_764_662_400_000)));
    assert_eq!(times("2026-12-02T08:00:00Z"), from(At(1_796_198_400_000)));
    assert_eq!(times("2026-12-02T08:00:00.123+08:00"), from(At(1_796_169_600_123)));
    assert_eq!(times("2026-12-02"), from(At(1_796_169_600_000)));
    assert_eq!(times("2026-12-02.."), from(At(1_796_169_600_000)));
    assert_eq!(times("-90s"), from(Ago(90_000)));
    assert_eq!(times("-15m"), from(Ago(900_000)));
    assert_eq!(times("-1h"), from(Ago(3_600_000)));
    assert_eq!(times("-2d"), from(Ago(172_800_000)));
    assert_eq!(times("-1"), from(Latest));
    assert_eq!(times("-2"), from(Earliest));
    assert_eq!(times("-3"), from(MaxTimestamp));
    assert_eq!(times("1969-12-31"), from(At(0)), "times before 1970 clamp to 0");
    assert_eq!(
        times("2026-12-02..2026-12-03"),
        Selector::Times { start: At(1_796_169_600_000), end: Some(At(1_796_256_000_000)) }
    );
    assert_eq!(
        times("-1h..-30m"),
        Selector::Times { start: Ago(3_600_000), end: Some(Ago(1_800_000)) }
    );
    assert_eq!(times("-2..-1"), Selector::Times { start: Earliest, end: Some(Latest) });
    assert_eq!(StreamSpec::parse_by_time("-15m.json").unwrap().format, Format::Json);
}

#[test]
fn by_time_rejects_garbage() {
    for name in [
        "",
        "yesterday",
        "-4",
        "-0x",
        "-1y",
        "-h",
        "-1.5h",
        "2026-13-01",
        "2026-02-30",
        "2026-12-02T08:00:00",
        "2026-12-02T25:00:00Z",
        "2026-12-3",
        "2000..1000",
        "-30m..-1h",
        "9223372036854775808",
        "-9999999999999999999d",
        "-9223372036854775807d",
        "1..2..3",
    ] {
        let err = StreamSpec::parse_by_time(name).expect_err(name);
        assert_eq!(Error::from(err).errno(), libc::ENOENT, "{name}");
    }
}

fn partition() -> Arc<MemPartition> {
    // Offsets 0..10, timestamps 1000, 1010, ..., with an out-of-order 5 at offset 7.
    let part = Arc::new(MemPartition::new("t", 0, 200));
    for k in 0..10i64 {
        let ts = if k == 7 { 5 } else { 1000 + 10 * k };
        part.append_batch(&plain(), &[rec(&k.to_string(), ts)]);
    }
    part
}

fn resolve_offsets(part: &MemPartition, name: &str) -> Result<Resolved, Error> {
    StreamSpec::parse_by_offset(name).unwrap().resolve(part, 0)
}

fn resolve_time(part: &MemPartition, name: &str, now: i64) -> Resolved {
    StreamSpec::parse_by_time(name).unwrap().resolve(part, now).unwrap()
}

#[test]
fn offset_specs_resolve_within_the_log() {
    let part = partition();
    let r = |s, e| Resolved { start: Offset(s), end: e };
    assert_eq!(resolve_offsets(&part, "3").unwrap(), r(3, Bound::Open));
    assert_eq!(resolve_offsets(&part, "10").unwrap(), r(10, Bound::Open));
    assert_eq!(resolve_offsets(&part, "-4").unwrap(), r(6, Bound::Open));
    assert_eq!(resolve_offsets(&part, "-400").unwrap(), r(0, Bound::Open), "clamped to log start");
    assert_eq!(resolve_offsets(&part, "-0").unwrap(), r(10, Bound::Open));
    assert_eq!(resolve_offsets(&part, "2..50").unwrap(), r(2, Bound::Fixed(Offset(50))));
    let err = resolve_offsets(&part, "11").unwrap_err();
    assert!(matches!(err, Error::OffsetOutOfRange { .. }), "{err}");
    part.delete_segments_below(Offset(5));
    let log_start = part.summary().unwrap().log_start_offset;
    assert!(log_start > Offset(0));
    assert_eq!(resolve_offsets(&part, "0").unwrap_err().errno(), libc::ENOENT);
    assert_eq!(resolve_offsets(&part, "-400").unwrap().start, log_start);
}

#[test]
fn time_specs_resolve_with_list_offsets_semantics() {
    let part = partition();
    assert_eq!(resolve_time(&part, "1000", 0).start, Offset(0));
    assert_eq!(resolve_time(&part, "1015", 0).start, Offset(2));
    // Later than every record: the log end, so the stream is empty now and grows.
    assert_eq!(resolve_time(&part, "5000", 0), Resolved { start: Offset(10), end: Bound::Open });
    assert_eq!(resolve_time(&part, "-1", 0).start, Offset(10));
    assert_eq!(resolve_time(&part, "-2", 0).start, Offset(0));
    assert_eq!(resolve_time(&part, "-3", 0).start, Offset(9));
    // Relative times are anchored at the moment of resolution.
    assert_eq!(resolve_time(&part, "-1s", 2_060).start, Offset(6));
    // The range end is resolved through ListOffsets of the end time, not record by record:
    // the out-of-order record at offset 7 (timestamp 5) stays inside 1000..1085.
    let r = resolve_time(&part, "1000..1085", 0);
    assert_eq!(r.end, Bound::UntilTimestamp(1085));
    assert_eq!(part.offset_for(topicfs::source::OffsetQuery::Timestamp(1085)).unwrap(), Offset(9));
    // Kafka's special values as ends resolve to offsets at once.
    assert_eq!(resolve_time(&part, "-2..-1", 0).end, Bound::Fixed(Offset(10)));
    assert_eq!(resolve_time(&part, "-1..-2", 0).end, Bound::Fixed(Offset(10)), "never below start");
}

#[test]
fn listings_offer_log_start_and_every_segment() {
    let part = partition();
    let bases: Vec<String> = part
        .segment_files()
        .unwrap()
        .segments()
        .unwrap()
        .iter()
        .map(|s| s.base_offset.0.to_string())
        .collect();
    assert!(bases.len() > 2);
    assert_eq!(by_offset_names(part.as_ref()).unwrap(), bases);
    let names = by_time_names(part.as_ref()).unwrap();
    assert_eq!(names.len(), bases.len());
    assert_eq!(names[0], "1970-01-01T00:00:01.000Z");
    for name in by_offset_names(part.as_ref()).unwrap() {
        StreamSpec::parse_by_offset(&name).unwrap().resolve(part.as_ref(), 0).unwrap();
    }
    for (name, base) in names.iter().zip(part.segment_files().unwrap().segments().unwrap()) {
        let spec = StreamSpec::parse_by_time(name).unwrap();
        let r = spec.resolve(part.as_ref(), 0).unwrap();
        // Each listed time starts at (or, with out-of-order times, before) its segment.
        assert!(r.start <= base.base_offset, "{name}");
        let cursor = ReadCursor::at(base.base_offset);
        assert!(
            !part
                .read(&cursor, 1, topicfs::source::ReadMode::Batches)
                .and_then(topicfs::source::ReadAnswer::into_chunk)
                .unwrap()
                .bytes
                .is_empty()
        );
    }
    part.delete_segments_below(Offset(4));
    let start = part.summary().unwrap().log_start_offset.0.to_string();
    assert_eq!(by_offset_names(part.as_ref()).unwrap()[0], start);
}

#[test]
fn time_names_are_rfc3339_utc_with_milliseconds_and_parse_back() {
    let t = 1_796_198_400_123;
    let name = time_name(t).unwrap();
    assert_eq!(name, "2026-12-02T08:00:00.123Z");
    assert_eq!(times(&name), Selector::Times { start: TimePoint::At(t), end: None });
}
