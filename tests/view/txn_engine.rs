//! The `read_committed` transaction scan (`view::txn`) over the log engine: its header-only
//! reads give what scanning whole batches gives, and a broker's producer snapshots and
//! `.txnindex` files at a segment boundary start the scan there with the same result. (Moved
//! from `view::txn`'s unit tests: the view's own tests use no log engine.)

use std::collections::HashMap;
use std::sync::Arc;

use topicfs::Result;
use topicfs::format::control::{ControlRecordType, encode_end_txn_marker_batch, parse_control_key};
use topicfs::format::{BatchSpec, NewRecord, Offset, decode_batch, encode_batch, parse_batch_info};
use topicfs::settings::config::LogConfig;
use topicfs::source::{
    AppendInfo, Committed, KeyIndex, Known, OffsetQuery, PartitionSource, PartitionSummary,
    ReadAnswer, ReadCursor, ReadMode, Records, SegmentFiles,
};
use topicfs::storage::{LogDirs, SegmentMode};
use topicfs::view::txn::{TxnSnapshot, TxnTracker};

fn data(base: i64, pid: i64, transactional: bool) -> Vec<u8> {
    data_n(base, pid, transactional, 1, 1)
}

fn marker(offset: i64, pid: i64, commit: bool) -> Vec<u8> {
    encode_end_txn_marker_batch(Offset(offset), 0, pid, 0, commit, 0, 0).unwrap()
}

/// Every aborted range the snapshot knows, as a digest (equal digests: the same ranges).
fn all_aborted(snap: &TxnSnapshot) -> u64 {
    snap.aborted_digest(Offset(i64::MIN), Offset(i64::MAX))
}

/// Where and why the scan stopped on damage, if it did.
fn damage(snap: &TxnSnapshot) -> Option<String> {
    snap.admits(snap.stable).err().map(|e| e.to_string())
}

/// An aborted transaction: (producer, first offset, marker offset).
type Aborted = (i64, Offset, Offset);

/// The transactions of `batches` in order, by Kafka's rules (independently of `view::txn`):
/// those still open, `(producer, first offset)`, and the aborted ones.
fn transactions_of(batches: &[Vec<u8>]) -> (Vec<(i64, Offset)>, Vec<Aborted>) {
    let mut open: HashMap<i64, Offset> = HashMap::new();
    let mut aborted = Vec::new();
    for b in batches {
        let info = parse_batch_info(b).unwrap();
        if info.is_control && info.is_transactional {
            let batch = decode_batch(b).unwrap();
            let record = batch.records().next().unwrap().unwrap();
            let abort =
                parse_control_key(record.key).unwrap().record_type == ControlRecordType::Abort;
            if let Some(first) = open.remove(&info.producer_id)
                && abort
            {
                aborted.push((info.producer_id, first, info.base_offset));
            }
        } else if info.is_transactional && !info.is_control {
            open.entry(info.producer_id).or_insert(info.base_offset);
        }
    }
    let mut open: Vec<(i64, Offset)> = open.into_iter().collect();
    open.sort_unstable();
    (open, aborted)
}

/// A transactional (or plain) batch of `n` records of `len` bytes each from `base`.
fn data_n(base: i64, pid: i64, transactional: bool, n: usize, len: usize) -> Vec<u8> {
    let spec = BatchSpec {
        base_offset: Offset(base),
        producer_id: pid,
        producer_epoch: 0,
        base_sequence: 0,
        is_transactional: transactional,
        ..BatchSpec::default()
    };
    let record = NewRecord { value: Some(vec![b'v'; len]), ..NewRecord::default() };
    encode_batch(&spec, &vec![record; n]).unwrap()
}

/// A segment as stored: its base offset, its batches, bytes after them.
type StoredSegment = (i64, Vec<Vec<u8>>, Vec<u8>);

/// Segments of a partition `t-0` written as stored, opened read-only by the engine.
fn stored_log(dir: &std::path::Path, segments: &[StoredSegment]) -> Arc<dyn PartitionSource> {
    let part = dir.join("t-0");
    std::fs::create_dir_all(&part).unwrap();
    for (base, batches, tail) in segments {
        let mut bytes = batches.concat();
        bytes.extend_from_slice(tail);
        std::fs::write(part.join(format!("{base:020}.log")), bytes).unwrap();
    }
    // Segments below the last one were recovered before (a broker's clean history): the
    // damage in them is served as stored, not cut off by recovery.
    let last = segments.last().map_or(0, |s| s.0);
    std::fs::write(dir.join("recovery-point-offset-checkpoint"), format!("0\n1\nt 0 {last}\n"))
        .unwrap();
    let logs =
        LogDirs::open_dir(dir, LogConfig::default(), Default::default(), SegmentMode::ReadOnly)
            .unwrap();
    logs.log("t", 0).unwrap()
}

/// `part` answering a header-only read with whole batches, as a source without one does.
struct WholeBatches(Arc<dyn PartitionSource>);

impl PartitionSource for WholeBatches {
    fn topic(&self) -> &str {
        self.0.topic()
    }
    fn partition(&self) -> u32 {
        self.0.partition()
    }
    fn summary(&self) -> Result<PartitionSummary> {
        self.0.summary()
    }
    fn known(&self) -> Known {
        self.0.known()
    }
    fn offset_for(&self, query: OffsetQuery) -> Result<Offset> {
        self.0.offset_for(query)
    }
    fn seek(&self, target: Offset) -> Result<ReadCursor> {
        self.0.seek(target)
    }
    fn holds(&self, cursor: &ReadCursor) -> Result<bool> {
        self.0.holds(cursor)
    }
    fn read(&self, cursor: &ReadCursor, max: usize, mode: ReadMode) -> Result<ReadAnswer> {
        let mode = match mode {
            ReadMode::HeadsPastDamage => ReadMode::PastDamage,
            other => other,
        };
        self.0.read(cursor, max, mode)
    }
    fn append(&self, records: Records<'_>) -> Result<AppendInfo> {
        self.0.append(records)
    }
    fn sync(&self) -> Result<()> {
        self.0.sync()
    }
    fn segment_files(&self) -> Option<&dyn SegmentFiles> {
        self.0.segment_files()
    }
    fn key_index(&self) -> Option<&dyn KeyIndex> {
        self.0.key_index()
    }
    fn committed(&self) -> Committed<'_> {
        self.0.committed()
    }
    fn span_store(&self) -> Option<&dyn topicfs::source::SpanStore> {
        self.0.span_store()
    }
}

/// The scan through the engine's header-only reads, and through whole batches (what a
/// source without a header-only read answers to [`ReadMode::HeadsPastDamage`]), give the
/// same state: stable offset, aborted ranges, damage and where.
fn assert_header_scan_is_the_full_scan(part: Arc<dyn PartitionSource>) -> TxnSnapshot {
    let heads = TxnTracker::new().refresh(part.as_ref()).unwrap();
    let whole = WholeBatches(Arc::clone(&part));
    let full = TxnTracker::new().refresh(&whole).unwrap();
    assert_eq!(heads.stable, full.stable);
    assert_eq!(all_aborted(&heads), all_aborted(&full));
    assert_eq!(damage(&heads), damage(&full));
    heads
}

/// Flips the last byte of `batch` (a record byte): it still frames, its CRC fails.
fn damaged(mut batch: Vec<u8>) -> Vec<u8> {
    let last = batch.len() - 1;
    batch[last] ^= 0xff;
    batch
}

#[test]
fn the_header_only_scan_gives_what_scanning_whole_batches_gives() {
    // Segment 0: plain and transactional batches of producers 1..=4 large enough to take
    // several scan chunks and header reads; P1 commits, P2 aborts, a compaction gap (offsets
    // 400..1000 gone), a damaged transactional data batch of P3 (its header still true)
    // later committed, a KRaft-style control batch without a transaction. Segment 1000: P4
    // aborts, P5 stays open.
    let mut seg0 = Vec::new();
    let mut o = 0i64;
    for i in 0..100 {
        let pid = 1 + (i % 2);
        seg0.push(data_n(o, pid, i % 5 != 0, 3, 3000));
        o += 3;
    }
    seg0.push(marker(o, 1, true));
    seg0.push(marker(o + 1, 2, false));
    o = 1000; // compaction gap
    seg0.push(damaged(data_n(o, 3, true, 2, 100)));
    seg0.push(data_n(o + 2, 9, false, 1, 10));
    seg0.push(marker(o + 3, 3, true));
    let mut kraft = marker(o + 4, 0, true);
    kraft[22] &= !0x10; // control, not transactional (attributes bit 4)
    kraft = recrc(kraft);
    seg0.push(kraft);
    let seg1_base = o + 5;
    let seg1 = vec![
        data_n(seg1_base, 4, true, 5, 5000),
        marker(seg1_base + 5, 4, false),
        data_n(seg1_base + 6, 5, true, 1, 10),
        data_n(seg1_base + 7, 9, false, 1, 10),
    ];
    let dir = tempfile::tempdir().unwrap();
    let part =
        stored_log(dir.path(), &[(0, seg0.clone(), vec![]), (seg1_base, seg1.clone(), vec![])]);
    let snap = assert_header_scan_is_the_full_scan(part);
    assert_eq!(snap.stable, Offset(seg1_base + 6), "P5 open: {snap:?}");
    assert_eq!(damage(&snap), None);
    assert!(snap.is_aborted_record(2, Offset(4)), "P2 aborted");
    assert!(!snap.is_aborted_record(1, Offset(1)), "P1 committed");
    assert!(!snap.is_aborted_record(3, Offset(1000)), "P3 committed, its batch damaged");
    assert!(snap.is_aborted_record(4, Offset(seg1_base)), "P4 aborted");

    // Bytes that do not frame a batch at the end of the sealed segment: stepped over.
    let dir = tempfile::tempdir().unwrap();
    let garbage = vec![0x7f; 40];
    let part =
        stored_log(dir.path(), &[(0, seg0.clone(), garbage), (seg1_base, seg1.clone(), vec![])]);
    assert_eq!(assert_header_scan_is_the_full_scan(part).stable, Offset(seg1_base + 6));

    // A damaged marker (P1's commit): the scan stops there, at the same place both ways.
    let at = 100;
    let mut bad = seg0.clone();
    bad[at] = damaged(bad[at].clone());
    let dir = tempfile::tempdir().unwrap();
    let part = stored_log(dir.path(), &[(0, bad, vec![]), (seg1_base, seg1.clone(), vec![])]);
    let snap = assert_header_scan_is_the_full_scan(part);
    assert_eq!(snap.stable, Offset(3), "P2's transaction stays open below the stop");
    assert!(snap.admits(Offset(3)).is_ok_and(|a| !a));

    // A damaged header (an unknown magic) at the end of the sealed segment: bytes that do
    // not frame a batch end the segment, both ways alike.
    let mut bad = seg0.clone();
    let mut unknown = data_n(1004, 9, false, 1, 10);
    unknown[16] = 7;
    bad.push(unknown);
    let dir = tempfile::tempdir().unwrap();
    let part = stored_log(dir.path(), &[(0, bad, vec![]), (seg1_base, seg1, vec![])]);
    let snap = assert_header_scan_is_the_full_scan(part);
    assert_eq!(snap.stable, Offset(seg1_base + 6), "stepped over to the next segment");
    assert_eq!(damage(&snap), None);
}

/// `batch` with its CRC computed again (after an attribute was changed on purpose).
fn recrc(mut batch: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

#[test]
fn a_brokers_producer_snapshot_and_txnindex_start_the_scan_at_their_segment() {
    use topicfs::format::producer_snapshot::{ProducerEntry, ProducerSnapshot};
    use topicfs::format::txn_index::TxnIndexEntry;
    // Segment 0: P1 opens a transaction, P2's is aborted, a plain batch. Segment 4: P1
    // commits, P4 opens a transaction that has no marker yet, a plain batch.
    let seg0 = vec![data(0, 1, true), data(1, 2, true), marker(2, 2, false), data(3, 9, false)];
    let seg4 = vec![data(4, 1, true), marker(5, 1, true), data(6, 4, true), data(7, 9, false)];
    let dir = tempfile::tempdir().unwrap();
    let part = stored_log(dir.path(), &[(0, seg0, vec![]), (4, seg4, vec![])]);
    let scanned = TxnTracker::new().refresh(part.as_ref()).unwrap();
    assert_eq!(scanned.stable, Offset(6));
    assert!(scanned.is_aborted_record(2, Offset(1)));

    // What a broker leaves: P2's abort in segment 0's `.txnindex`, and at the roll to
    // segment 4 a snapshot with P1's transaction open since offset 0.
    let pdir = dir.path().join("t-0");
    let abort = TxnIndexEntry {
        version: 0,
        producer_id: 2,
        first_offset: Offset(1),
        last_offset: Offset(2),
        last_stable_offset: Offset(0),
    };
    std::fs::write(pdir.join("00000000000000000000.txnindex"), abort.to_bytes()).unwrap();
    let producer = |pid: i64, open: Option<i64>| ProducerEntry {
        producer_id: pid,
        epoch: 0,
        last_sequence: 0,
        last_offset: 1,
        offset_delta: 0,
        timestamp: 0,
        coordinator_epoch: 0,
        current_txn_first_offset: open.map(Offset),
    };
    let snapshot = |entries| ProducerSnapshot { entries }.encode();
    let at4 = pdir.join("00000000000000000004.snapshot");
    std::fs::write(&at4, snapshot(vec![producer(1, Some(0)), producer(2, None)])).unwrap();
    let from_snapshot = TxnTracker::new().refresh(part.as_ref()).unwrap();
    assert_eq!(from_snapshot.stable, scanned.stable);
    assert_eq!(all_aborted(&from_snapshot), all_aborted(&scanned));

    // The state below the boundary is the snapshot's, not read from the batches: a
    // transaction it records open since offset 3 (with no batch here) holds the stable
    // offset there, as it would on the broker.
    std::fs::write(&at4, snapshot(vec![producer(7, Some(3))])).unwrap();
    assert_eq!(TxnTracker::new().refresh(part.as_ref()).unwrap().stable, Offset(3));

    // A damaged snapshot is not used: the scan reads every batch instead.
    let mut bytes = snapshot(vec![producer(7, Some(3))]);
    bytes[12] ^= 1;
    std::fs::write(&at4, bytes).unwrap();
    let damaged_snapshot = TxnTracker::new().refresh(part.as_ref()).unwrap();
    assert_eq!(damaged_snapshot.stable, scanned.stable);
    assert_eq!(all_aborted(&damaged_snapshot), all_aborted(&scanned));

    // Nor is one at the log start offset (nothing below it to stand for), or at an offset
    // that is not a segment's base offset.
    std::fs::remove_file(&at4).unwrap();
    for name in ["00000000000000000000.snapshot", "00000000000000000005.snapshot"] {
        std::fs::write(pdir.join(name), snapshot(vec![producer(7, Some(0))])).unwrap();
    }
    assert_eq!(TxnTracker::new().refresh(part.as_ref()).unwrap().stable, scanned.stable);
}

/// A seeded model of the promise above: for random transactional logs split into random
/// segments, a broker's files at any segment boundary (a snapshot of the transactions open
/// there, each aborted transaction in the `.txnindex` of the segment holding its marker)
/// give the scan starting there the state the scan of every batch gives.
#[test]
fn starting_at_any_boundarys_snapshot_gives_what_scanning_every_batch_gives() {
    use topicfs::format::producer_snapshot::{ProducerEntry, ProducerSnapshot};
    use topicfs::format::txn_index::TxnIndexEntry;
    let mut x: u64 = 0x5eed_1234_abcd_0001;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for seed in 0..40 {
        let count = 8 + next(40) as i64;
        let batches: Vec<Vec<u8>> = (0..count)
            .map(|o| {
                let pid = 1 + next(4) as i64;
                match next(6) {
                    0 => marker(o, pid, true),
                    1 => marker(o, pid, false),
                    2 => data(o, pid, false),
                    _ => data(o, pid, true),
                }
            })
            .collect();
        let mut cuts: Vec<i64> =
            (0..1 + next(3)).map(|_| 1 + next(count as u64 - 1) as i64).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let bases: Vec<i64> = std::iter::once(0).chain(cuts.iter().copied()).collect();
        let segments: Vec<StoredSegment> = bases
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                let end = bases.get(i + 1).copied().unwrap_or(count);
                (b, batches[b as usize..end as usize].to_vec(), vec![])
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let part = stored_log(dir.path(), &segments);
        let full = TxnTracker::new().refresh(part.as_ref()).unwrap();
        // What a broker leaves at the boundary `at`: the state of every batch below it.
        let at = cuts[next(cuts.len() as u64) as usize];
        let (open, mut aborts) = transactions_of(&batches[..at as usize]);
        let pdir = dir.path().join("t-0");
        let mut txnindex: HashMap<i64, Vec<u8>> = HashMap::new();
        aborts.sort_unstable_by_key(|(_, _, last)| *last);
        for (pid, first, last) in aborts {
            let seg = *bases.iter().rfind(|b| **b <= last.0).unwrap();
            let entry = TxnIndexEntry {
                version: 0,
                producer_id: pid,
                first_offset: first,
                last_offset: last,
                last_stable_offset: first,
            };
            txnindex.entry(seg).or_default().extend_from_slice(&entry.to_bytes());
        }
        for (seg, bytes) in txnindex {
            std::fs::write(pdir.join(format!("{seg:020}.txnindex")), bytes).unwrap();
        }
        let entries = open
            .iter()
            .map(|(pid, first)| ProducerEntry {
                producer_id: *pid,
                epoch: 0,
                last_sequence: 0,
                last_offset: at - 1,
                offset_delta: 0,
                timestamp: 0,
                coordinator_epoch: 0,
                current_txn_first_offset: Some(*first),
            })
            .collect();
        let snapshot = ProducerSnapshot { entries }.encode();
        std::fs::write(pdir.join(format!("{at:020}.snapshot")), snapshot).unwrap();
        let started = TxnTracker::new().refresh(part.as_ref()).unwrap();
        assert_eq!(started.stable, full.stable, "seed {seed}, boundary {at}, {bases:?}");
        assert_eq!(
            all_aborted(&started),
            all_aborted(&full),
            "seed {seed}, boundary {at}, {bases:?}"
        );
    }
}
