//! Streams over the real log engine (segment files in a temporary dir): sizes equal full reads
//! across rolled segments, growth after appends, and time ranges resolved by the engine's
//! ListOffsets.

use std::sync::Arc;

use topicfs::format::{NewRecord, decode_batch};
use topicfs::source::{PartitionSource, TopicSource};
use topicfs::storage::{LogConfig, LogDirs, SegmentMode};
use topicfs::view::Renderer;
use topicfs::view::spec::{Format, StreamSpec};
use topicfs::view::stream::{Stream, StreamRegistry};

fn full_read(s: &Stream) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let chunk = s.read_at(out.len() as u64, 3000).unwrap();
        if chunk.is_empty() {
            return out;
        }
        out.extend_from_slice(&chunk);
    }
}

/// The expected rendering of every record from `start`, straight from the engine's batches.
fn model(part: &dyn PartitionSource, format: Format, start: i64) -> Vec<u8> {
    let renderer = Renderer::new(format, part.topic(), part.partition());
    let mut cursor = part.seek(part.summary().unwrap().log_start_offset).unwrap();
    let mut out = Vec::new();
    loop {
        let chunk = part
            .read(&cursor, 1 << 20, topicfs::source::ReadMode::Batches)
            .and_then(topicfs::source::ReadAnswer::into_chunk)
            .unwrap();
        if chunk.bytes.is_empty() {
            return out;
        }
        let mut at = 0;
        while at < chunk.bytes.len() {
            let batch = decode_batch(&chunk.bytes[at..]).unwrap();
            let info = batch.info().clone();
            let size = info.size as usize;
            if format == Format::Raw {
                if info.last_offset.0 >= start {
                    out.extend_from_slice(&chunk.bytes[at..at + size]);
                }
            } else if !info.is_control {
                for r in batch.records() {
                    let r = r.unwrap();
                    if r.offset.0 >= start {
                        renderer.render(&info, &r, &mut out);
                    }
                }
            }
            at += size;
        }
        cursor = chunk.next.unwrap();
    }
}

#[test]
fn streams_over_engine_segments_have_exact_sizes_and_grow() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = LogConfig::default();
    config.set("segment.bytes", "2048").unwrap();
    config.set("index.interval.bytes", "256").unwrap();
    config.set("retention.ms", "-1").unwrap();
    let logs =
        LogDirs::open_dir(dir.path(), config, Default::default(), SegmentMode::Writable).unwrap();
    logs.create_topic("events", 1).unwrap();
    let part = logs.partition("events", 0).unwrap();
    let append = |from: i64, to: i64| {
        for k in from..to {
            let records: Vec<NewRecord> = (0..(k % 4 + 1))
                .map(|j| NewRecord {
                    timestamp: 1_000 + k,
                    key: Some(format!("key-{k}").into_bytes()),
                    value: Some(format!("value {k}.{j} \"q\"").into_bytes()),
                    headers: vec![(b"h".to_vec(), Some(vec![0xff, k as u8]))],
                })
                .collect();
            part.append(topicfs::source::Records::Owned(&records)).unwrap();
        }
    };
    append(0, 300);
    assert!(part.segment_files().unwrap().segments().unwrap().len() > 5);
    let reg = StreamRegistry::new();
    let log_end = part.summary().unwrap().log_end_offset.0;
    for format in [Format::Values, Format::Json, Format::Raw] {
        for start in [0, 1, log_end / 2, log_end - 1, log_end] {
            let spec = StreamSpec::parse_by_offset(&format!("{start}{}", format.suffix())).unwrap();
            let s = reg.open(Arc::clone(&part), &spec, 0).unwrap();
            let expected = model(part.as_ref(), format, start);
            assert_eq!(s.size().unwrap(), expected.len() as u64, "{format:?} from {start}");
            assert_eq!(full_read(&s), expected, "{format:?} from {start}");
        }
        let spec = StreamSpec::parse_by_offset(&format!("-7{}", format.suffix())).unwrap();
        let s = reg.open(Arc::clone(&part), &spec, 0).unwrap();
        let before = full_read(&s);
        append(300, 310);
        let after = full_read(&s);
        assert!(after.starts_with(&before) && after.len() > before.len());
        assert_eq!(s.size().unwrap(), after.len() as u64);
        assert_eq!(after, model(part.as_ref(), format, s.start().0));
    }
    // by-time through the engine's ListOffsets: records with timestamps 1100..1200.
    let spec = StreamSpec::parse_by_time("1100..1200").unwrap();
    let s = reg.open(Arc::clone(&part), &spec, 0).unwrap();
    let text = String::from_utf8(full_read(&s)).unwrap();
    assert!(text.starts_with("value 100.0 "), "{text}");
    assert!(text.trim_end().ends_with("value 199.3 \"q\""), "{text}");
    assert_eq!(s.size().unwrap(), text.len() as u64);
    assert!(s.is_complete());
}

/// The users of the segment cache name their kinds of payload (`SpanKind`): every kind has its
/// own name and tag, sealed and prefix entries alike, and they are the names and tags of the
/// entries earlier versions wrote (`.render` 1, `.txn` 2, `.keys` 3, `.prefix` 4,
/// `.prefix-txn` 5), so an existing cache dir stays valid.
#[test]
fn span_kinds_are_distinct_and_keep_the_names_and_tags_of_existing_cache_entries() {
    use topicfs::storage::key_index::KEY_INDEX;
    use topicfs::view::render_index::RENDER_SUMMARY;
    use topicfs::view::txn::TXN_SUMMARY;
    let mut entries = Vec::new();
    for kind in [RENDER_SUMMARY, TXN_SUMMARY, KEY_INDEX] {
        entries.push((kind.name, kind.tag));
        entries.extend(kind.prefix);
    }
    entries.sort_by_key(|e| e.1);
    assert_eq!(
        entries,
        [("render", 1), ("txn", 2), ("keys", 3), ("prefix", 4), ("prefix-txn", 5)],
        "names and tags of the entries already on disk"
    );
}
