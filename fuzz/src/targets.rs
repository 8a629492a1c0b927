//! The bodies of the fuzz targets, shared by `fuzz/fuzz_targets/*.rs` (libFuzzer, nightly
//! flags) and `tests/reliability/reliability_fuzz_corpus.rs` (a plain `cargo test` that replays the seed
//! corpus and every regression input through the very same functions).
//!
//! Each function takes arbitrary bytes and must return without panicking, whatever the bytes.
//! Besides "no panic", each checks a few invariants that hold for every input (stated next to the
//! `assert!`s), so the fuzzer also finds wrong answers, not only crashes.
//!
//! The CRC of a batch gates everything behind it, and a fuzzer cannot forge CRCs, so the decoding
//! targets have *fix-up* modes: the first input byte chooses whether the target rewrites the
//! entry's `size` field and CRC (v2: CRC-32C, legacy: CRC-32) before decoding. [`build_batch`]
//! goes further: it compresses fuzzer bytes with a chosen codec and wraps them in a well-formed
//! batch or legacy wrapper, so the record decoders behind every codec see arbitrary input.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use topicfs::format::batch::MAGIC_V2;
use topicfs::format::checkpoint::{
    format_leader_epoch_checkpoint, format_offset_checkpoint, parse_leader_epoch_checkpoint,
    parse_offset_checkpoint, parse_partition_metadata,
};
use topicfs::format::compression::{self, Compression};
use topicfs::format::control::{parse_control_key, parse_end_txn_marker};
use topicfs::format::file_name::{
    parse_partition_dir, parse_segment_file_name, parse_special_dir, partition_dir_name,
    validate_topic_name,
};
use topicfs::format::index_entry::{
    OFFSET_INDEX_ENTRY_SIZE, OffsetPosition, TIME_INDEX_ENTRY_SIZE, TimestampOffset,
};
use topicfs::format::properties::{format_properties, parse_properties};
use topicfs::format::{
    LOG_OVERHEAD, NewRecord, Offset, decode_batch, legacy, parse_batch_info, peek_entry, verify_crc,
};
use topicfs::source::OffsetQuery;
use topicfs::storage::LogConfig;
use topicfs::storage::log::{LoadState, Log};
use topicfs::storage::segment::SegmentMode;
use topicfs::view::envelope::{parse_envelope, split_envelope_lines, split_value_lines};
use topicfs::view::spec::{StreamSpec, TimePoint, time_name};

/// Upper bound on records taken from one batch: a fuzzed `recordsCount` may claim billions, the
/// iterator must stop at the end of the body anyway; the cap keeps a wrong iterator from
/// looping forever inside a fuzz run (it would show as a timeout, not a pass).
const MAX_RECORDS_PER_BATCH: usize = 1 << 17;
/// Decompression bound used when a target calls a codec directly.
const DECOMPRESS_LIMIT: usize = 1 << 20;

/// Decodes one entry fully: header facts, CRC, payload, every record (and control records).
/// Returns the number of records decoded without error.
fn decode_entry(entry: &[u8]) -> usize {
    let info = parse_batch_info(entry);
    let crc = verify_crc(entry);
    let Ok(batch) = decode_batch(entry) else { return 0 };
    // decode_batch checks framing and CRC first: success implies both pass on their own.
    assert!(crc.is_ok(), "decode_batch accepted an entry verify_crc refuses");
    let info = info.expect("decode_batch accepted an entry parse_batch_info refuses");
    assert_eq!(batch.info().magic, info.magic);
    assert_eq!(batch.info().size, info.size);
    let mut ok = 0;
    for record in batch.records().take(MAX_RECORDS_PER_BATCH) {
        let Ok(record) = record else { break };
        ok += 1;
        if batch.info().is_control {
            let _ = parse_control_key(record.key);
            let _ = parse_end_txn_marker(record.value);
        }
        let _ = record.headers.len();
    }
    ok
}

/// Rewrites the `size` field of the entry at the start of `entry` to cover all of `entry`, and
/// its CRC to match (v2: CRC-32C of bytes 21.., legacy: CRC-32 of bytes 16..).
fn fix_up_entry(entry: &mut [u8]) {
    let Some(size) = entry.len().checked_sub(LOG_OVERHEAD) else { return };
    let Ok(size) = i32::try_from(size) else { return };
    if let Some(field) = entry.get_mut(8..12) {
        field.copy_from_slice(&size.to_be_bytes());
    }
    match entry.get(16).map(|m| *m as i8) {
        Some(MAGIC_V2) => {
            let crc = crc32c::crc32c(entry.get(21..).unwrap_or_default());
            if let Some(field) = entry.get_mut(17..21) {
                field.copy_from_slice(&crc.to_be_bytes());
            }
        }
        Some(0 | 1) => {
            let crc = crc32fast::hash(entry.get(16..).unwrap_or_default());
            if let Some(field) = entry.get_mut(12..16) {
                field.copy_from_slice(&crc.to_be_bytes());
            }
        }
        _ => {}
    }
}

/// Target `log_bytes`: bytes as a `.log` file region, or (first byte odd) one entry with its
/// size and CRC fixed up.
///
/// Invariants: walking entries with `peek_entry` always advances (every legal entry is at least
/// 26 bytes), so the walk ends; an entry `decode_batch` accepts also passes `verify_crc` and
/// `parse_batch_info`.
pub fn log_bytes(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode & 1 == 1 {
        let mut entry = rest.to_vec();
        fix_up_entry(&mut entry);
        decode_entry(&entry);
        return;
    }
    let mut pos = 0usize;
    let mut steps = 0usize;
    while let Some(region) = rest.get(pos..) {
        let header = match peek_entry(region) {
            Ok(Some(h)) => h,
            Ok(None) | Err(_) => break,
        };
        let total = header.total_size();
        assert!(total > LOG_OVERHEAD, "peek_entry accepted a size below the minimum");
        let Some(entry) = region.get(..total) else { break };
        decode_entry(entry);
        pos += total;
        steps += 1;
        assert!(steps <= rest.len(), "entry walk does not advance");
    }
}

/// Target `build_batch`: fuzzer bytes compressed with a chosen codec and wrapped into a
/// well-formed v2 batch or legacy v0/v1 wrapper (CRCs right), then decoded; the same bytes also
/// go straight into every decompressor.
///
/// Layout: `[magic selector, codec, attribute bits, records count, body...]`. For legacy
/// wrappers the body is taken as the inner message set and each inner message's CRC is fixed up,
/// so the deep iterator's checks beyond the CRC are reached.
pub fn build_batch(data: &[u8]) {
    let [sel, codec, attr_bits, count, body @ ..] = data else { return };
    let codec = Compression::from_id(codec % 5).unwrap_or(Compression::None);
    for c in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
        for magic in [0, 1, 2] {
            if let Ok(out) = compression::decompress_bounded(c, body, magic, DECOMPRESS_LIMIT) {
                assert!(out.len() <= DECOMPRESS_LIMIT, "{c:?} ignored its output bound");
            }
        }
    }
    match sel % 3 {
        2 => {
            let Ok(payload) = compression::compress(codec, body) else { return };
            let mut entry = Vec::with_capacity(payload.len() + 61);
            entry.extend_from_slice(&1000i64.to_be_bytes()); // baseOffset
            entry.extend_from_slice(&[0; 4]); // batchLength, fixed up below
            entry.extend_from_slice(&0i32.to_be_bytes()); // partitionLeaderEpoch
            entry.push(2); // magic
            entry.extend_from_slice(&[0; 4]); // crc, fixed up below
            let attributes = i16::from(codec.id()) | (i16::from(*attr_bits) & 0x78);
            entry.extend_from_slice(&attributes.to_be_bytes());
            let last_delta = i32::from(*count).saturating_sub(1).max(0);
            entry.extend_from_slice(&last_delta.to_be_bytes());
            entry.extend_from_slice(&1_767_225_600_000i64.to_be_bytes()); // baseTimestamp
            entry.extend_from_slice(&1_767_225_600_500i64.to_be_bytes()); // maxTimestamp
            entry.extend_from_slice(&(-1i64).to_be_bytes()); // producerId
            entry.extend_from_slice(&(-1i16).to_be_bytes()); // producerEpoch
            entry.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence
            entry.extend_from_slice(&i32::from(*count).to_be_bytes()); // recordsCount
            entry.extend_from_slice(&payload);
            fix_up_entry(&mut entry);
            decode_entry(&entry);
        }
        magic => {
            let magic = magic as i8;
            let mut inner = body.to_vec();
            fix_up_inner_set(&mut inner, magic);
            let Ok(packed) = compression::compress(codec, &inner) else { return };
            let attributes = codec.id() | (attr_bits & 0x08);
            let entry = legacy::encode_message(
                Offset(i64::from(*count)),
                magic,
                attributes,
                1_767_225_600_000,
                None,
                Some(&packed),
            );
            decode_entry(&entry);
        }
    }
}

/// Fixes the magic and CRC of each message of a legacy inner set, as far as the size fields
/// frame them.
fn fix_up_inner_set(set: &mut [u8], magic: i8) {
    let mut pos = 0usize;
    while let Some(rest) = set.get_mut(pos..) {
        let Some(size) = rest.get(8..12).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        else {
            return;
        };
        let Ok(size) = usize::try_from(size) else { return };
        let Some(total) = size.checked_add(LOG_OVERHEAD) else { return };
        let Some(msg) = rest.get_mut(..total) else { return };
        if let Some(m) = msg.get_mut(16) {
            *m = magic as u8;
        }
        fix_up_entry(msg);
        if total == 0 {
            return;
        }
        pos += total;
    }
}

/// Target `index_entries`: the bytes as an `.index` and as a `.timeindex` file.
///
/// Invariant: every whole entry decodes and encodes back to the same bytes; `nth` past the last
/// whole entry is `None`.
pub fn index_entries(data: &[u8]) {
    let whole = data.len() / OFFSET_INDEX_ENTRY_SIZE;
    for n in 0..whole {
        let e = OffsetPosition::nth(data, n).expect("a whole offset index entry decodes");
        let at = n * OFFSET_INDEX_ENTRY_SIZE;
        assert_eq!(&e.encode()[..], &data[at..at + OFFSET_INDEX_ENTRY_SIZE]);
        let _ = e.offset(Offset(i64::MAX));
    }
    assert!(OffsetPosition::nth(data, whole).is_none());
    assert!(OffsetPosition::nth(data, usize::MAX).is_none());
    let whole = data.len() / TIME_INDEX_ENTRY_SIZE;
    for n in 0..whole {
        let e = TimestampOffset::nth(data, n).expect("a whole time index entry decodes");
        let at = n * TIME_INDEX_ENTRY_SIZE;
        assert_eq!(&e.encode()[..], &data[at..at + TIME_INDEX_ENTRY_SIZE]);
        let _ = e.offset(Offset(i64::MAX));
    }
    assert!(TimestampOffset::nth(data, whole).is_none());
    assert!(TimestampOffset::nth(data, usize::MAX).is_none());
}

/// A scratch partition directory per process, emptied before each use.
fn scratch_dir() -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let shm = Path::new("/dev/shm");
    let root = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    root.join(format!("topicfs-fuzz-{}-{n}", std::process::id())).join("fuzz-0")
}

/// Splits off a length-prefixed (u16, big-endian) piece.
fn take_piece(data: &[u8]) -> (&[u8], &[u8]) {
    let Some((len, rest)) = data.split_first_chunk::<2>() else { return (data, &[]) };
    let len = usize::from(u16::from_be_bytes(*len)).min(rest.len());
    rest.split_at(len)
}

/// Target `segment_files`: a partition directory holding one segment whose `.log`, `.index` and
/// `.timeindex` are fuzzer bytes, opened by the engine (load and recovery, read-only or writable)
/// and read completely through seeks, reads and ListOffsets queries.
///
/// Layout: `[flags, u16 log length, log, u16 index length, index, time index...]`; flags bit 0:
/// writable (else read-only), bit 1: clean shutdown (no recovery), bit 2: base offset 1000.
///
/// Invariants: reading from the log start offset reaches the log end offset in a bounded number
/// of reads, with strictly advancing cursors, and every batch served passes its CRC.
pub fn segment_files(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else { return };
    let (log, rest) = take_piece(rest);
    let (index, time_index) = take_piece(rest);
    let dir = scratch_dir();
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let base = if flags & 4 != 0 { 1000 } else { 0 };
    let name = |suffix: &str| dir.join(format!("{base:020}{suffix}"));
    let written = std::fs::write(name(".log"), log).is_ok()
        && std::fs::write(name(".index"), index).is_ok()
        && std::fs::write(name(".timeindex"), time_index).is_ok();
    if written {
        read_partition_dir(&dir, flags);
    }
    if let Some(parent) = dir.parent() {
        let _ = std::fs::remove_dir_all(parent);
    }
}

fn read_partition_dir(dir: &Path, flags: u8) {
    let mode = if flags & 1 != 0 { SegmentMode::Writable } else { SegmentMode::ReadOnly };
    let state = LoadState { had_clean_shutdown: flags & 2 != 0, ..LoadState::default() };
    let config = LogConfig { segment_index_bytes: 4096, ..LogConfig::default() };
    let Ok(log) = Log::open(dir, "fuzz", 0, config, mode, state) else { return };
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    assert!(start <= end, "log start offset {start} above log end offset {end}");
    for q in [OffsetQuery::Earliest, OffsetQuery::Latest, OffsetQuery::MaxTimestamp] {
        let _ = log.offset_for(q);
    }
    for t in [i64::MIN, -1, 0, 1_767_225_600_000, i64::MAX] {
        let _ = log.offset_for(OffsetQuery::Timestamp(t));
    }
    let _ = log.summary();
    let _ = log.segment_summaries();
    let _ = log.aborted_transactions(start, end);
    for target in [start, end, start.plus(1), Offset(end.0.saturating_sub(1)), Offset(i64::MAX)] {
        let _ = log.seek(target);
    }
    if let Ok(mut cursor) = log.seek(start) {
        for _ in 0..10_000 {
            let Ok(chunk) = log.read(&cursor, 4096) else { break };
            let mut pos = 0;
            while let Some(Ok(Some(h))) = chunk.bytes.get(pos..).map(peek_entry) {
                let entry = chunk.bytes.get(pos..pos + h.total_size());
                let entry = entry.expect("read returned part of a batch");
                assert!(verify_crc(entry).is_ok(), "read served a batch failing its CRC");
                pos += h.total_size();
            }
            match chunk.next {
                Some(next) if next != cursor => {
                    assert!(next > cursor, "read cursor went backwards");
                    cursor = next;
                }
                _ => break,
            }
        }
    }
    if flags & 1 != 0 {
        let record = NewRecord { value: Some(b"after".to_vec()), ..NewRecord::default() };
        let _ = log.append(&[record]);
    }
    let _ = log.close();
}

/// Target `text_files`: the bytes as each text file of a log dir: the four offset checkpoints,
/// `leader-epoch-checkpoint`, `meta.properties` (and its keys as topic settings) and
/// `partition.metadata`.
///
/// Invariant: whatever parses, formatted and parsed again, gives the same entries.
pub fn text_files(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(entries) = parse_offset_checkpoint(&text) {
        let again = parse_offset_checkpoint(&format_offset_checkpoint(&entries));
        assert_eq!(again.as_ref(), Ok(&entries), "offset checkpoint does not round-trip");
    }
    if let Ok(entries) = parse_leader_epoch_checkpoint(&text) {
        let again = parse_leader_epoch_checkpoint(&format_leader_epoch_checkpoint(&entries));
        assert_eq!(again.as_ref(), Ok(&entries), "leader epoch checkpoint does not round-trip");
    }
    if let Ok(props) = parse_properties(&text) {
        let again = parse_properties(&format_properties(&props, "#Thu Jan 01 00:00:00 UTC 2026"));
        assert_eq!(again.as_ref(), Ok(&props), "properties do not round-trip");
        let mut config = LogConfig::default();
        for (k, v) in &props {
            let _ = config.set(k, v);
        }
    }
    let _ = parse_partition_metadata(&text);
}

/// Target `names`: the bytes as a path component: a `by-offset/` and `by-time/` spec (parsed,
/// then resolved against a partition whose offsets come from the input), a segment file name, a
/// partition directory name, a topic name.
///
/// Invariants: a resolved `by-offset` start lies in `[log start, log end]`; a topic name that
/// validates round-trips through its partition directory name.
pub fn names(data: &[u8]) {
    let Ok(name) = std::str::from_utf8(data) else { return };
    let part = fake::Partition::from_name(name);
    if let Ok(spec) = StreamSpec::parse_by_offset(name) {
        for now in [0, 1_767_225_600_000, i64::MAX, i64::MIN] {
            if let Ok(r) = spec.resolve(&part, now) {
                assert!(r.start >= part.log_start && r.start <= part.log_end, "{name:?}: {r:?}");
            }
        }
    }
    if let Ok(spec) = StreamSpec::parse_by_time(name) {
        for now in [0, 1_767_225_600_000, i64::MAX, i64::MIN] {
            let _ = spec.resolve(&part, now);
        }
    }
    if let Some(rel) = name.strip_prefix('-')
        && let Ok(ms) = rel.parse::<i64>()
    {
        let _ = TimePoint::Ago(ms).query(i64::MIN);
        let _ = time_name(ms);
    }
    let _ = parse_segment_file_name(name);
    let _ = parse_special_dir(name);
    let _ = parse_partition_dir(name);
    if validate_topic_name(name).is_ok() {
        let dir = partition_dir_name(name, 7);
        assert_eq!(parse_partition_dir(&dir), Some((name.to_string(), 7)), "{name:?}");
    }
}

/// Target `append_input`: the bytes as written to `append` and to `append.json`.
///
/// Invariants: `append` makes one record per `\n` and keeps the rest (which holds no `\n`);
/// `append.json` either refuses or accepts every non-blank line, and keeps a rest without `\n`.
pub fn append_input(data: &[u8]) {
    let newlines = data.iter().filter(|&&b| b == b'\n').count();
    let (records, rest) = split_value_lines(data);
    assert_eq!(records.len(), newlines);
    assert!(!rest.contains(&b'\n'));
    if let Ok((records, rest)) = split_envelope_lines(data, 1) {
        assert!(records.len() <= newlines);
        assert!(!rest.contains(&b'\n'));
    }
    let _ = parse_envelope(data, u64::MAX);
}

/// A fuzz target body.
pub type Target = fn(&[u8]);

/// Every target by name, for corpus replays.
pub const TARGETS: &[(&str, Target)] = &[
    ("log_bytes", log_bytes),
    ("build_batch", build_batch),
    ("index_entries", index_entries),
    ("segment_files", segment_files),
    ("text_files", text_files),
    ("names", names),
    ("append_input", append_input),
];

mod fake {
    //! A partition with fixed offsets, for resolving specs without storage.

    use std::time::SystemTime;

    use topicfs::error::{Error, Result};
    use topicfs::format::Offset;
    use topicfs::source::{
        AppendInfo, BatchChunk, Committed, DEFAULT_SIZING_BUDGET, KeyIndex, Known, OffsetQuery,
        PartitionSource, PartitionSummary, ReadAnswer, ReadCursor, ReadMode, Records, SegmentFiles,
    };

    /// Offsets derived from the name being fuzzed, so specs meet varied logs.
    pub(super) struct Partition {
        pub(super) log_start: Offset,
        pub(super) log_end: Offset,
    }

    impl Partition {
        pub(super) fn from_name(name: &str) -> Partition {
            let h = name.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
            let start = (h % 1000) as i64;
            let end = if h & 1 == 0 { start + (h >> 10) as i64 % 100_000 } else { i64::MAX };
            Partition { log_start: Offset(start), log_end: Offset(end) }
        }
    }

    impl PartitionSource for Partition {
        fn topic(&self) -> &str {
            "fuzz"
        }
        fn partition(&self) -> u32 {
            0
        }
        fn summary(&self) -> Result<PartitionSummary> {
            Ok(PartitionSummary {
                log_start_offset: self.log_start,
                log_end_offset: self.log_end,
                segment_count: None,
                size_bytes: None,
                first_timestamp: None,
                max_timestamp: None,
                last_modified: SystemTime::UNIX_EPOCH,
            })
        }
        fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
            Ok(match query {
                OffsetQuery::Earliest => self.log_start,
                OffsetQuery::Latest | OffsetQuery::MaxTimestamp => self.log_end,
                OffsetQuery::Timestamp(t) => Offset(t.clamp(self.log_start.0, self.log_end.0)),
            })
        }
        fn seek(&self, _target: Offset) -> Result<ReadCursor> {
            Err(Error::Unsupported("fuzz partition has no batches"))
        }
        fn known(&self) -> Known {
            Known {
                bounds: None,
                last_modified: None,
                rewrites: 0,
                sizing_budget: DEFAULT_SIZING_BUDGET,
            }
        }
        fn holds(&self, cursor: &ReadCursor) -> Result<bool> {
            Ok(cursor.next_offset >= self.log_start)
        }
        fn read(&self, _cursor: &ReadCursor, _max_bytes: usize, _: ReadMode) -> Result<ReadAnswer> {
            Ok(ReadAnswer::Batches(BatchChunk::default()))
        }
        fn append(&self, _records: Records<'_>) -> Result<AppendInfo> {
            Err(Error::ReadOnly)
        }
        fn sync(&self) -> Result<()> {
            Ok(())
        }
        fn segment_files(&self) -> Option<&dyn SegmentFiles> {
            None
        }
        fn key_index(&self) -> Option<&dyn KeyIndex> {
            None
        }
        fn committed(&self) -> Committed<'_> {
            Committed::ByView(None)
        }

        fn span_store(&self) -> Option<&dyn topicfs::source::SpanStore> {
            None
        }
    }
}
