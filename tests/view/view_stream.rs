//! Streams: exact sizes, windows, growth, tails without re-rendering, control batches,
//! retention, and a seeded model over random logs.

use crate::view_support;

use std::sync::Arc;

use proptest::prelude::*;
use topicfs::error::Error;
use topicfs::format::control::encode_end_txn_marker_batch;
use topicfs::format::{BatchSpec, Compression, NewRecord, Offset, TimestampType, decode_batch};
use topicfs::source::PartitionSource;
use topicfs::view::Renderer;
use topicfs::view::spec::{Bound, Format, StreamSpec};
use topicfs::view::stream::{CHECKPOINT_INTERVAL, Stream, StreamRegistry};
use topicfs::view::txn::Isolation;
use view_support::{MemPartition, compressed, plain, rec};

const FORMATS: [Format; 3] = [Format::Values, Format::Json, Format::Raw];

/// What a full read of `[start, end)` must return, computed from the stored batches directly.
pub(crate) fn model(part: &MemPartition, format: Format, start: i64, end: Option<i64>) -> Vec<u8> {
    let end = end.unwrap_or(i64::MAX);
    let mut out = Vec::new();
    if end <= start {
        return out;
    }
    let renderer = Renderer::new(format, &part.topic, part.partition);
    for (_, _, bytes) in part.batches() {
        let batch = decode_batch(&bytes).unwrap();
        let info = batch.info();
        if format == Format::Raw {
            if info.last_offset.0 >= start && info.base_offset.0 < end {
                out.extend_from_slice(&bytes);
            }
            continue;
        }
        if info.is_control {
            continue;
        }
        for r in batch.records() {
            let r = r.unwrap();
            if r.offset.0 >= start && r.offset.0 < end {
                renderer.render(info, &r, &mut out);
            }
        }
    }
    out
}

fn full_read(s: &Stream) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let chunk = s.read_at(out.len() as u64, 4096).unwrap();
        if chunk.is_empty() {
            return out;
        }
        out.extend_from_slice(&chunk);
    }
}

fn open(reg: &StreamRegistry, part: &Arc<MemPartition>, name: &str) -> Arc<Stream> {
    let spec = StreamSpec::parse_by_offset(name).unwrap();
    reg.open(Arc::clone(part) as Arc<dyn PartitionSource>, &spec, 0).unwrap()
}

/// A partition of `n` records in batches of 1..=7 records, mixed codecs, a commit marker every
/// tenth batch, rolled every `segment_bytes`.
fn sample(n: usize, segment_bytes: usize) -> Arc<MemPartition> {
    let part = Arc::new(MemPartition::new("orders", 3, segment_bytes));
    let codecs = [Compression::None, Compression::Gzip, Compression::None, Compression::Zstd];
    let mut i = 0;
    let mut batch_no = 0;
    while i < n {
        let count = (batch_no % 7) + 1;
        let records: Vec<NewRecord> = (i..(i + count).min(n))
            .map(|j| {
                rec(&format!("value-{j}-\"quoted\"\t{}", "x".repeat(j % 50)), 1_000 + j as i64)
            })
            .collect();
        i += records.len();
        part.append_batch(&compressed(codecs[batch_no % codecs.len()]), &records);
        batch_no += 1;
        if batch_no % 10 == 0 {
            let base = part.summary().unwrap().log_end_offset;
            part.append_stored(encode_end_txn_marker_batch(base, 0, 7, 0, true, 0, 5).unwrap());
        }
    }
    part
}

#[test]
fn size_equals_full_read_for_every_format_start_and_range() {
    let part = sample(300, 8 * 1024);
    let reg = StreamRegistry::new();
    let log_end = part.summary().unwrap().log_end_offset.0;
    for format in FORMATS {
        for start in (0..=log_end).step_by(17) {
            let suffix = format.suffix();
            let open_stream = open(&reg, &part, &format!("{start}{suffix}"));
            let expected = model(&part, format, start, None);
            assert_eq!(open_stream.size().unwrap(), expected.len() as u64, "{start}{suffix}");
            assert_eq!(full_read(&open_stream), expected, "{start}{suffix}");
            for end in [start, start + 1, start + 13, log_end, log_end + 5] {
                let name = format!("{start}..{end}{suffix}");
                let s = open(&reg, &part, &name);
                let expected = model(&part, format, start, Some(end));
                assert_eq!(s.size().unwrap(), expected.len() as u64, "{name}");
                assert_eq!(full_read(&s), expected, "{name}");
            }
        }
    }
}

#[test]
fn read_at_windows_concatenate_to_full_read() {
    let part = sample(200, 4 * 1024);
    let reg = StreamRegistry::new();
    for format in FORMATS {
        let s = open(&reg, &part, &format!("5..190{}", format.suffix()));
        let expected = model(&part, format, 5, Some(190));
        for window in [1, 7, 100, 4096, 70_000] {
            let mut got = Vec::new();
            let mut at = 0u64;
            loop {
                let chunk = s.read_at(at, window).unwrap();
                assert!(chunk.len() <= window);
                if chunk.is_empty() {
                    break;
                }
                at += chunk.len() as u64;
                got.extend_from_slice(&chunk);
            }
            assert_eq!(got, expected, "{format:?} window {window}");
        }
        // Random access, out of order, matches the same bytes.
        for at in [expected.len() as u64 / 2, 3, expected.len() as u64 - 1, 0] {
            let chunk = s.read_at(at, 50).unwrap();
            let at = at as usize;
            assert_eq!(chunk, expected[at..(at + 50).min(expected.len())], "{format:?} at {at}");
        }
        assert!(s.read_at(expected.len() as u64, 10).unwrap().is_empty());
        assert!(s.read_at(u64::MAX, 10).unwrap().is_empty());
    }
}

#[test]
fn open_stream_grows_after_appends_and_earlier_bytes_never_change() {
    let part = sample(20, 1024);
    let reg = StreamRegistry::new();
    for format in FORMATS {
        let s = open(&reg, &part, &format!("-5{}", format.suffix()));
        let before = full_read(&s);
        assert_eq!(s.size().unwrap(), before.len() as u64);
        let start = s.start().0;
        for k in 0..30 {
            part.append_batch(&plain(), &[rec(&format!("late-{k}"), 9_000 + k)]);
            let size = s.size().unwrap();
            let now = full_read(&s);
            assert_eq!(size, now.len() as u64);
            assert!(now.starts_with(&before), "bytes before the growth changed");
            assert_eq!(now, model(&part, format, start, None));
            assert!(!s.is_complete());
        }
    }
}

#[test]
fn bounded_range_completes_when_log_end_reaches_its_end() {
    let part = sample(10, 1 << 20);
    let reg = StreamRegistry::new();
    let s = open(&reg, &part, "5..15.json");
    assert_eq!(s.size().unwrap(), model(&part, Format::Json, 5, Some(15)).len() as u64);
    assert!(!s.is_complete());
    for k in 0..10 {
        part.append_batch(&plain(), &[rec(&format!("more-{k}"), 50)]);
    }
    let size = s.size().unwrap();
    assert!(s.is_complete());
    let expected = model(&part, Format::Json, 5, Some(15));
    assert_eq!(size, expected.len() as u64);
    part.append_batch(&plain(), &[rec("after", 60)]);
    assert_eq!(s.size().unwrap(), size, "a complete range never changes");
    assert_eq!(full_read(&s), expected);
}

#[test]
fn tail_window_renders_at_most_an_interval_not_the_partition() {
    let part = sample(20_000, 256 * 1024);
    let log_bytes = part.summary().unwrap().size_bytes.unwrap();
    assert!(log_bytes > 16 * CHECKPOINT_INTERVAL, "sample too small: {log_bytes}");
    let reg = StreamRegistry::new();
    for format in FORMATS {
        // Building the index reads the partition once.
        let s = open(&reg, &part, &format!("0{}", format.suffix()));
        let size = s.size().unwrap();
        // A tail read (`tail -n 10`: size, then a read near the end) reads about one interval.
        let before = part.bytes_read();
        let s = open(&reg, &part, &format!("0{}", format.suffix()));
        assert_eq!(s.size().unwrap(), size);
        let tail = s.read_at(size - 500, 500).unwrap();
        let read = part.bytes_read() - before;
        assert!(read < 4 * CHECKPOINT_INTERVAL, "{format:?}: tail read {read} of {log_bytes}");
        let expected = model(&part, format, 0, None);
        assert_eq!(tail, expected[expected.len() - 500..]);
        // `-10` opened on a built index needs no full pass either.
        let before = part.bytes_read();
        let s = open(&reg, &part, &format!("-10{}", format.suffix()));
        let all = full_read(&s);
        assert_eq!(all, model(&part, format, s.start().0, None));
        let read = part.bytes_read() - before;
        assert!(read < 4 * CHECKPOINT_INTERVAL, "{format:?}: -10 read {read} of {log_bytes}");
    }
}

#[test]
fn sequential_reads_continue_from_the_last_position() {
    let part = sample(5_000, 1 << 20);
    let reg = StreamRegistry::new();
    let s = open(&reg, &part, "0");
    let size = s.size().unwrap();
    let before = part.bytes_read();
    let mut at = 0;
    while at < size {
        at += s.read_at(at, 4096).unwrap().len() as u64;
    }
    let read = part.bytes_read() - before;
    let log_bytes = part.summary().unwrap().size_bytes.unwrap();
    // Each read resumes at the batch where the previous one stopped: the log is read about
    // once, not once per checkpoint interval per read.
    assert!(read < 3 * log_bytes, "cat read {read} bytes of a {log_bytes}-byte log");
}

/// A partition of `batches` batches of 500 records of about 100 bytes (55 KB each, larger than
/// the windows below), one segment.
fn large_batches(batches: usize) -> Arc<MemPartition> {
    let part = Arc::new(MemPartition::new("orders", 0, 1 << 30));
    for b in 0..batches {
        let records: Vec<NewRecord> =
            (0..500).map(|i| rec(&format!("{b:04}-{i:04}-{}", "v".repeat(90)), 1)).collect();
        part.append_batch(&plain(), &records);
    }
    part
}

#[test]
fn sequential_small_reads_read_and_decode_each_batch_once() {
    let part = large_batches(20);
    let log_bytes = part.summary().unwrap().size_bytes.unwrap();
    let reg = StreamRegistry::new();
    for format in [Format::Values, Format::Json] {
        for (name, end) in [("0", None), ("0..4321", Some(4321))] {
            let name = format!("{name}{}", format.suffix());
            let s = open(&reg, &part, &name);
            let expected = model(&part, format, 0, end);
            let before = part.bytes_read();
            let mut got = Vec::new();
            loop {
                let chunk = s.read_at(got.len() as u64, 4096).unwrap();
                if chunk.is_empty() {
                    break;
                }
                got.extend_from_slice(&chunk);
            }
            assert_eq!(got, expected, "{name}");
            // Each read continues inside the batch the previous one stopped in (its kept
            // rendering) instead of reading that batch again from its start.
            let read = part.bytes_read() - before;
            assert!(read <= log_bytes + log_bytes / 10, "{name}: read {read} of {log_bytes}");
        }
    }
}

/// Batches of about 1 MB as stored (max.message.bytes' default) that zstd compressed from
/// about 4 MB of values (four letters in a pseudo-random order).
fn compressed_batches(batches: usize) -> Arc<MemPartition> {
    let part = Arc::new(MemPartition::new("orders", 0, 1 << 30));
    let mut seed = 7u64;
    let spec = BatchSpec { compression: Compression::Zstd, ..plain() };
    for _ in 0..batches {
        let records: Vec<NewRecord> = (0..1000)
            .map(|_| {
                let value: String = (0..4000)
                    .map(|_| {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        b"acgt"[(seed >> 62) as usize] as char
                    })
                    .collect();
                rec(&value, 1)
            })
            .collect();
        part.append_batch(&spec, &records);
    }
    part
}

#[test]
fn a_read_holds_one_compressed_batch_at_a_time_not_the_log_its_window_spans() {
    let part = compressed_batches(6);
    let batches = part.batches();
    let largest_batch = batches.iter().map(|b| b.2.len()).max().unwrap() as u64;
    assert!(largest_batch > 500_000, "batches of {largest_batch} bytes");
    let reg = StreamRegistry::new();
    let s = open(&reg, &part, "0");
    let expected = model(&part, Format::Values, 0, None);
    assert!(expected.len() as u64 > 3 * largest_batch * 6, "compressed about 4:1");
    // Windows deep inside the rendering of later batches, read after the first read taught the
    // stream the batch size: each read renders from a batch start and holds one batch.
    for at in [100u64, 9_000_000, 13_500_000, 21_000_000, 2_000_000] {
        let got = s.read_at(at, 128 << 10).unwrap();
        let at = at as usize;
        assert_eq!(got, expected[at..(at + (128 << 10)).min(expected.len())], "at {at}");
    }
    let largest = part.largest_read.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        largest <= largest_batch,
        "one read returned {largest} bytes (batches {largest_batch})"
    );
}

#[test]
fn kept_rendering_of_a_batch_retention_deleted_is_stale() {
    let part = Arc::new(MemPartition::new("orders", 0, 60_000));
    for b in 0..4 {
        let records: Vec<NewRecord> =
            (0..500).map(|i| rec(&format!("{b}-{i:04}-{}", "v".repeat(90)), 1)).collect();
        part.append_batch(&plain(), &records);
    }
    let reg = StreamRegistry::new();
    let s = open(&reg, &part, "0");
    let first = s.read_at(0, 100).unwrap();
    assert_eq!(first.len(), 100);
    let segments = part.segment_files().unwrap().segments().unwrap();
    assert!(segments.len() >= 2, "{segments:?}");
    part.delete_segments_below(segments[1].base_offset);
    // The rest of the first batch was rendered by the first read, but its records are gone.
    assert!(matches!(s.read_at(100, 100), Err(Error::StaleHandle)));
}

#[test]
fn control_batches_are_skipped_in_record_formats_and_kept_in_raw() {
    let part = Arc::new(MemPartition::new("t", 0, 1 << 20));
    let txn = BatchSpec { is_transactional: true, producer_id: 7, producer_epoch: 0, ..plain() };
    part.append_batch(&txn, &[rec("a", 1), rec("b", 2)]);
    part.append_stored(encode_end_txn_marker_batch(Offset(2), 0, 7, 0, true, 0, 3).unwrap());
    part.append_batch(&plain(), &[rec("c", 4)]);
    let reg = StreamRegistry::new();
    assert_eq!(full_read(&open(&reg, &part, "0")), b"a\nb\nc\n");
    let json = full_read(&open(&reg, &part, "0.json"));
    assert_eq!(json.iter().filter(|b| **b == b'\n').count(), 3);
    let raw = full_read(&open(&reg, &part, "0.raw"));
    let stored: Vec<u8> = part.batches().into_iter().flat_map(|(_, _, b)| b).collect();
    assert_eq!(raw, stored);
    // A range holding only the marker renders nothing, but its raw form is the marker batch.
    assert!(full_read(&open(&reg, &part, "2..3")).is_empty());
    assert_eq!(full_read(&open(&reg, &part, "2..3.raw")), part.batches()[1].2);
}

#[test]
fn raw_range_spans_the_batches_holding_its_first_and_last_offsets() {
    let part = Arc::new(MemPartition::new("t", 0, 1 << 20));
    part.append_batch(&plain(), &[rec("a", 1), rec("b", 1), rec("c", 1)]); // 0..=2
    part.append_batch(&plain(), &[rec("d", 1), rec("e", 1)]); // 3..=4
    part.append_batch(&plain(), &[rec("f", 1)]); // 5
    let b = part.batches();
    let reg = StreamRegistry::new();
    assert_eq!(
        full_read(&open(&reg, &part, "1..4.raw")),
        [b[0].2.clone(), b[1].2.clone()].concat()
    );
    assert_eq!(full_read(&open(&reg, &part, "3..4.raw")), b[1].2);
    assert_eq!(full_read(&open(&reg, &part, "4.raw")), [b[1].2.clone(), b[2].2.clone()].concat());
    assert!(full_read(&open(&reg, &part, "4..4.raw")).is_empty());
    assert!(full_read(&open(&reg, &part, "6.raw")).is_empty());
}

#[test]
fn reads_follow_batches_across_segments_within_one_chunk() {
    let mut p = MemPartition::new("t", 1, 700);
    p.span_segments = true;
    let part = Arc::new(p);
    for k in 0..200 {
        part.append_batch(&plain(), &[rec(&format!("v{k}"), k), rec(&format!("w{k}"), k)]);
    }
    assert!(part.segment_files().unwrap().segments().unwrap().len() > 20);
    let reg = StreamRegistry::new();
    for format in FORMATS {
        for start in [0, 33, 201, 399, 400] {
            let s = open(&reg, &part, &format!("{start}{}", format.suffix()));
            let expected = model(&part, format, start, None);
            assert_eq!(s.size().unwrap(), expected.len() as u64);
            assert_eq!(full_read(&s), expected);
        }
    }
}

#[test]
fn retention_keeps_positions_and_makes_deleted_bytes_stale() {
    let part = sample(400, 2 * 1024);
    let reg = StreamRegistry::new();
    let s = open(&reg, &part, "0");
    let full = full_read(&s);
    let size = s.size().unwrap();
    let segments = part.segment_files().unwrap().segments().unwrap();
    let cut = segments[segments.len() / 2].base_offset;
    part.delete_segments_below(cut);
    // The size does not shrink (tail -f keeps following) and the tail is still readable.
    assert_eq!(s.size().unwrap(), size);
    let tail = s.read_at(size - 100, 100).unwrap();
    assert_eq!(tail, full[full.len() - 100..]);
    // The head of the stream was deleted.
    assert!(matches!(s.read_at(0, 10), Err(Error::StaleHandle)));
    part.append_batch(&plain(), &[rec("new", 1)]);
    assert_eq!(s.size().unwrap(), size + 4);
    // A stream opened now starts at the new log start and reads consistently.
    let fresh = open(&reg, &part, &format!("{}", cut.0));
    assert_eq!(full_read(&fresh), model(&part, Format::Values, cut.0, None));
    // Offsets below the log start no longer exist.
    let spec = StreamSpec::parse_by_offset("0").unwrap();
    let err = reg.open(Arc::clone(&part) as Arc<dyn PartitionSource>, &spec, 0).unwrap_err();
    assert!(matches!(err, Error::OffsetOutOfRange { .. }), "{err}");
}

#[test]
fn time_range_end_stays_open_until_a_record_reaches_it() {
    let part = Arc::new(MemPartition::new("t", 0, 1 << 20));
    for k in 0..5 {
        part.append_batch(&plain(), &[rec(&format!("v{k}"), 1000 + k)]);
    }
    let reg = StreamRegistry::new();
    let spec = StreamSpec::parse_by_time("1002..2000").unwrap();
    let s = reg.open(Arc::clone(&part) as Arc<dyn PartitionSource>, &spec, 0).unwrap();
    assert_eq!(s.end(), Bound::UntilTimestamp(2000));
    assert_eq!(full_read(&s), b"v2\nv3\nv4\n");
    // An out-of-order record below the end time still belongs to the range.
    part.append_batch(&plain(), &[rec("late", 1500)]);
    assert_eq!(s.size().unwrap(), 14);
    part.append_batch(&plain(), &[rec("end", 2000)]);
    part.append_batch(&plain(), &[rec("after", 1001)]);
    assert_eq!(s.size().unwrap(), 14);
    assert_eq!(s.end(), Bound::Fixed(Offset(6)));
    assert!(s.is_complete());
    assert_eq!(full_read(&s), b"v2\nv3\nv4\nlate\n");
}

#[test]
fn log_append_time_and_headers_render_like_kcat() {
    let part = Arc::new(MemPartition::new("t", 0, 1 << 20));
    let spec =
        BatchSpec { timestamp_type: TimestampType::LogAppendTime, log_append_time: 77, ..plain() };
    let mut r = rec("v", 5);
    r.headers = vec![(b"h".to_vec(), Some(b"x".to_vec())), (b"n".to_vec(), None)];
    part.append_batch(&spec, &[r]);
    let reg = StreamRegistry::new();
    let json = String::from_utf8(full_read(&open(&reg, &part, "0.json"))).unwrap();
    assert_eq!(
        json,
        "{\"topic\":\"t\",\"partition\":0,\"offset\":0,\"tstype\":\"logappend\",\"ts\":77,\
         \"broker\":-1,\"headers\":[\"h\",\"x\",\"n\",null],\"key\":\"kv\",\"payload\":\"v\"}\n"
    );
}

/// One random batch: (value, timestamp) of its records, a codec number, and whether an abort
/// marker precedes it.
type RandomBatch = (Vec<(Option<Vec<u8>>, i64)>, u8, bool);

fn arb_batch() -> impl Strategy<Value = RandomBatch> {
    (
        prop::collection::vec(
            (prop::option::weighted(0.9, prop::collection::vec(any::<u8>(), 0..40)), 0i64..100),
            1..6,
        ),
        0u8..4,
        prop::bool::weighted(0.1),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Seeded model: random batches (codecs, null and binary values, markers, small segments,
    /// appends between reads) and random ranges and windows agree with the stored batches.
    #[test]
    fn streams_agree_with_a_model_of_random_logs(
        batches in prop::collection::vec(arb_batch(), 1..60),
        segment_bytes in 200usize..3000,
        probes in prop::collection::vec((0i64..200, 0i64..60, 1usize..300, 0u64..2000), 1..8),
    ) {
        let part = Arc::new(MemPartition::new("rnd", 9, segment_bytes));
        let codecs = [Compression::None, Compression::Gzip, Compression::Lz4, Compression::Snappy];
        let reg = StreamRegistry::new();
        let half = batches.len() / 2;
        let append = |batch: &RandomBatch| {
            let (records, codec, marker) = batch;
            if *marker {
                let base = part.summary().unwrap().log_end_offset;
                part.append_stored(encode_end_txn_marker_batch(base, 0, 1, 0, false, 0, 1).unwrap());
            }
            let records: Vec<NewRecord> = records
                .iter()
                .map(|(v, ts)| NewRecord { timestamp: *ts, key: None, value: v.clone(), headers: vec![] })
                .collect();
            part.append_batch(&compressed(codecs[*codec as usize]), &records);
        };
        batches[..half].iter().for_each(append);
        let mut streams = Vec::new();
        for format in FORMATS {
            let s = open(&reg, &part, &format!("0{}", format.suffix()));
            let _ = s.size().unwrap();
            streams.push((format, s));
        }
        batches[half..].iter().for_each(append);
        let log_end = part.summary().unwrap().log_end_offset.0;
        for (format, s) in &streams {
            let expected = model(&part, *format, 0, None);
            prop_assert_eq!(s.size().unwrap(), expected.len() as u64);
            prop_assert_eq!(&full_read(s), &expected);
        }
        for (start, len, window, at) in probes {
            let start = start.min(log_end);
            let end = start + len;
            for format in FORMATS {
                let s = open(&reg, &part, &format!("{start}..{end}{}", format.suffix()));
                let expected = model(&part, format, start, Some(end));
                prop_assert_eq!(s.size().unwrap(), expected.len() as u64);
                let got = s.read_at(at, window).unwrap();
                let lo = (at as usize).min(expected.len());
                let hi = (lo + window).min(expected.len());
                prop_assert_eq!(&got[..], &expected[lo..hi]);
            }
        }
    }
}

/// Opening one stream again (what the lookup, `stat` and `open` of one name each do) does not
/// read the batch holding its start again: the index keeps the positions it walked to
/// (`IndexState::located`). In batches of 2,000 records (what a producer's 1 MB batches hold),
/// that batch is most of a random open's cost.
#[test]
fn reopening_a_stream_inside_a_large_batch_reads_that_batch_once() {
    let part = Arc::new(MemPartition::new("orders", 0, 64 << 20));
    for b in 0..20 {
        let records: Vec<NewRecord> = (0..2000)
            .map(|i| rec(&format!("value-{}", b * 2000 + i), 1_000 + i64::from(b * 2000 + i)))
            .collect();
        part.append_batch(&plain(), &records);
    }
    let reg = StreamRegistry::with_isolation(Isolation::ReadUncommitted);
    for format in FORMATS {
        let whole = full_read(&open(&reg, &part, &format!("0{}", format.suffix())));
        let name = format!("21234{}", format.suffix());
        let before = part.bytes_read();
        let first = open(&reg, &part, &name);
        assert!(part.bytes_read() > before, "{format:?}: the first open walks the batch");
        let mut opened = vec![first];
        for _ in 0..2 {
            let before = part.bytes_read();
            opened.push(open(&reg, &part, &name));
            assert_eq!(part.bytes_read(), before, "{format:?}: an open again read the log");
        }
        let expected = model(&part, format, 21_234, None);
        assert!(whole.ends_with(&expected), "{format:?}");
        for s in opened {
            assert_eq!(s.read_at(0, 100).unwrap(), expected[..100], "{format:?}");
        }
    }
}

#[test]
fn opening_far_from_the_log_start_renders_neither_the_prefix_nor_more_than_the_budget() {
    let part = sample(20_000, 256 * 1024);
    let log_bytes = part.summary().unwrap().size_bytes.unwrap();
    assert!(log_bytes > 16 * CHECKPOINT_INTERVAL, "sample too small: {log_bytes}");
    let budget = 16 * 1024;
    part.set_sizing_budget(budget);
    // What one sizing or open may read: the budget, plus the chunk and batch it ends in.
    let most = budget + 2 * CHECKPOINT_INTERVAL;
    // read_uncommitted: the transaction scan of read_committed (its stable offset) reads the
    // partition's batch headers once, which is not sizing (see SEMANTICS.md).
    let reg = StreamRegistry::with_isolation(Isolation::ReadUncommitted);
    for format in FORMATS {
        // The middle of the partition: opened on an index of its own origin, first bytes
        // without rendering the 10,000 records before it.
        let before = part.bytes_read();
        let s = open(&reg, &part, &format!("10000{}", format.suffix()));
        let first = s.read_at(0, 100).unwrap();
        let read = part.bytes_read() - before;
        assert!(read < most, "{format:?}: open + first read {read} of {log_bytes}");
        let expected = model(&part, format, 10_000, None);
        assert_eq!(first, expected[..100]);
        assert_eq!(reg.origin_indexes(part.as_ref(), format), 1, "{format:?}");
        // Its size is not known within the budget; asking costs at most the budget.
        let before = part.bytes_read();
        assert_eq!(s.known_size().unwrap(), None, "{format:?}");
        let read = part.bytes_read() - before;
        assert!(read < most, "{format:?}: a sizing read {read} of {log_bytes}");
        // The log start: the same, on the shared index.
        let before = part.bytes_read();
        let s0 = open(&reg, &part, &format!("0{}", format.suffix()));
        assert_eq!(s0.known_size().unwrap(), None, "{format:?}");
        let read = part.bytes_read() - before;
        assert!(read < most, "{format:?}: open + stat of 0 read {read} of {log_bytes}");
        // Reading the middle stream to its end makes its size exact, without a second pass.
        let all = full_read(&s);
        assert_eq!(all, expected);
        assert_eq!(s.known_size().unwrap(), Some(all.len() as u64), "{format:?}");
        assert!(s.is_sized());
        // The last records: within the budget, so exact at once.
        let tail = open(&reg, &part, &format!("-10{}", format.suffix()));
        let tail_model = model(&part, format, tail.start().0, None);
        assert_eq!(tail.known_size().unwrap(), Some(tail_model.len() as u64), "{format:?}");
        assert_eq!(full_read(&tail), tail_model);
    }
}

#[test]
fn repeated_sizings_converge_to_the_exact_size_and_never_show_a_partial_one() {
    let part = sample(3_000, 64 * 1024);
    // One batch per sizing.
    part.set_sizing_budget(1);
    let batches = part.batches().len();
    for format in FORMATS {
        let reg = StreamRegistry::new();
        let s = open(&reg, &part, &format!("0{}", format.suffix()));
        let mut calls = 0;
        let size = loop {
            calls += 1;
            assert!(calls <= batches + 1, "{format:?}: no size after {calls} sizings");
            if let Some(size) = s.known_size().unwrap() {
                break size;
            }
        };
        assert!(calls > 10, "{format:?}: sized after {calls} sizings of {batches} batches");
        let expected = model(&part, format, 0, None);
        assert_eq!(size, expected.len() as u64, "{format:?}");
        // A bounded range in the middle: not known, then exact once read.
        let r = open(&reg, &part, &format!("1000..2000{}", format.suffix()));
        let _ = r.known_size().unwrap();
        let all = full_read(&r);
        assert_eq!(r.known_size().unwrap(), Some(all.len() as u64), "{format:?}");
    }
}

#[test]
fn a_read_to_the_end_makes_the_size_exact_and_it_stays_exact_as_the_log_grows() {
    let part = sample(3_000, 64 * 1024);
    part.set_sizing_budget(1);
    let reg = StreamRegistry::new();
    let s = open(&reg, &part, "0");
    assert_eq!(s.known_size().unwrap(), None);
    let all = full_read(&s);
    assert_eq!(all, model(&part, Format::Values, 0, None));
    assert_eq!(s.known_size().unwrap(), Some(all.len() as u64));
    // Far more than the budget appended: a size once shown stays exact (`tail -f` would take a
    // size going back to 0 for a truncation).
    for i in 0..200 {
        part.append_batch(&plain(), &[rec(&format!("late-{i}"), 1_700_000_000_000 + i)]);
    }
    let grown = model(&part, Format::Values, 0, None);
    assert_eq!(s.known_size().unwrap(), Some(grown.len() as u64));
    assert_eq!(s.read_at(all.len() as u64, 1 << 20).unwrap(), grown[all.len()..]);
    // The index learned the whole partition from that read: a new stream is exact at once.
    let again = open(&reg, &part, "0");
    assert_eq!(again.known_size().unwrap(), Some(grown.len() as u64));
}
