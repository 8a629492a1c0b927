//! Unit tests of the transaction scan, its state and its persistence.

use super::state::{SpanEvents, TxnEvent, TxnState};
use super::*;
use crate::format::control::encode_end_txn_marker_batch;
use crate::format::{BatchSpec, encode_batch, parse_batch_info};
use crate::format::{NewRecord, Offset};
use crate::source::{
    AppendInfo, Committed, KeyIndex, Known, OffsetQuery, PartitionSource, PartitionSummary,
    ReadAnswer, ReadCursor, ReadMode, Records, SegmentFiles,
};
use std::collections::HashMap;
use std::sync::Arc;

fn data(base: i64, pid: i64, transactional: bool) -> Vec<u8> {
    let spec = BatchSpec {
        base_offset: Offset(base),
        producer_id: pid,
        producer_epoch: 0,
        base_sequence: 0,
        is_transactional: transactional,
        ..BatchSpec::default()
    };
    encode_batch(&spec, &[NewRecord { value: Some(b"v".to_vec()), ..NewRecord::default() }])
        .unwrap()
}

fn marker(offset: i64, pid: i64, commit: bool) -> Vec<u8> {
    encode_end_txn_marker_batch(Offset(offset), 0, pid, 0, commit, 0, 0).unwrap()
}

/// Observes `batches` in order; returns the state and each batch's header.
fn scan(batches: &[Vec<u8>]) -> (TxnState, Vec<BatchInfo>) {
    let mut st = TxnState::default();
    let mut infos = Vec::new();
    for b in batches {
        let info = parse_batch_info(b).unwrap();
        st.observe(&info, Some(b)).unwrap();
        st.scanned_to = info.last_offset.plus(1);
        infos.push(info);
    }
    (st, infos)
}

#[test]
fn a_batch_is_aborted_only_when_its_producers_next_marker_is_an_abort() {
    // 0: P1 data, 1: P2 data, 2: P1 data, 3: P2 COMMIT, 4: P1 ABORT, 5: P1 data, 6: P1 COMMIT
    let (st, infos) = scan(&[
        data(0, 1, true),
        data(1, 2, true),
        data(2, 1, true),
        marker(3, 2, true),
        marker(4, 1, false),
        data(5, 1, true),
        marker(6, 1, true),
    ]);
    let snap = st.snapshot();
    let aborted: Vec<bool> = infos.iter().map(|i| snap.is_aborted(i)).collect();
    assert_eq!(aborted, [true, false, true, false, false, false, false]);
    assert_eq!(snap.stable, Offset(7));
}

#[test]
fn the_stable_offset_stops_at_the_first_open_transaction() {
    let (st, _) =
        scan(&[data(0, 9, false), data(1, 1, true), data(2, 2, true), marker(3, 2, true)]);
    assert_eq!(st.snapshot().stable, Offset(1));
    assert!(st.snapshot().admits(Offset(0)).unwrap());
    assert!(!st.snapshot().admits(Offset(1)).unwrap());
}

#[test]
fn idempotent_non_transactional_batches_are_never_aborted() {
    let (st, infos) = scan(&[data(0, 1, false), marker(1, 1, false)]);
    assert!(!st.snapshot().is_aborted(&infos[0]));
    assert_eq!(st.snapshot().stable, Offset(2));
}

/// Scans `batches`, recording the events of each span (split before each index in
/// `splits`), as the tracker does for sealed segments.
fn record(batches: &[Vec<u8>], splits: &[usize]) -> Vec<Vec<TxnEvent>> {
    let mut st = TxnState::default();
    let mut spans = vec![SpanEvents::default()];
    for (i, b) in batches.iter().enumerate() {
        if splits.contains(&i) {
            spans.push(SpanEvents::default());
        }
        let info = parse_batch_info(b).unwrap();
        if let Some(e) = st.observe(&info, Some(b)).unwrap() {
            spans.last_mut().unwrap().note(e);
        }
    }
    spans.into_iter().map(|s| s.events).collect()
}

fn applied(spans: &[Vec<TxnEvent>]) -> (HashMap<i64, Offset>, HashMap<i64, Ranges>) {
    let mut st = TxnState::default();
    for e in spans.iter().flatten() {
        st.apply(*e);
    }
    (st.open, (*st.aborted).clone())
}

#[test]
fn a_spans_recorded_events_give_the_state_scanning_its_batches_gives() {
    // P1 spans three segments (its abort in the last), P2 commits inside the first, P3 is
    // still open at the end.
    let batches = [
        data(0, 1, true),
        data(1, 2, true),
        data(2, 1, true),
        marker(3, 2, true),
        data(4, 1, true),
        data(5, 3, true),
        data(6, 1, true),
        marker(7, 1, false),
        data(8, 1, true),
        data(9, 9, false),
    ];
    for splits in [vec![], vec![3], vec![2, 5], vec![1, 4, 7, 8], (1..10).collect()] {
        let spans = record(&batches, &splits);
        let (st, _) = scan(&batches);
        assert_eq!(applied(&spans), (st.open.clone(), (*st.aborted).clone()), "{splits:?}");
        // Retention deleted the spans before the last ones: applying the rest equals
        // scanning the rest.
        let starts: Vec<usize> = std::iter::once(0).chain(splits.iter().copied()).collect();
        for (k, from) in starts.iter().enumerate() {
            let (rest, _) = scan(&batches[*from..]);
            assert_eq!(
                applied(&spans[k..]),
                (rest.open.clone(), (*rest.aborted).clone()),
                "{splits:?} from {from}"
            );
        }
        // Encoded and decoded, each span's events are the same.
        for events in &spans {
            let e = SpanEvents { events: events.clone(), ..SpanEvents::default() };
            let bytes = e.encode(Offset(10));
            assert_eq!(SpanEvents::decode(&bytes, Offset(10)).as_ref(), Some(events));
            assert_eq!(SpanEvents::decode(&bytes, Offset(11)), None, "another end");
            for n in 0..bytes.len() {
                assert_eq!(SpanEvents::decode(&bytes[..n], Offset(10)), None);
            }
        }
    }
    // Only what the state depends on is kept: the first data batch of a producer per span
    // and after each marker, and every marker.
    let spans = record(&batches, &[]);
    assert_eq!(spans[0].len(), 6, "{:?}", spans[0]);
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
    use crate::storage::config::LogConfig;
    use crate::storage::log_dir::LogDir;
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
    let logs = LogDir::open_read_only(dir, LogConfig::default()).unwrap();
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
    fn span_store(&self) -> Option<&dyn crate::source::SpanStore> {
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
    assert_eq!(*heads.aborted, *full.aborted);
    assert_eq!(heads.damage, full.damage);
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
    assert!(snap.damage.is_none());
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
    assert!(snap.damage.is_none());
}

/// `batch` with its CRC computed again (after an attribute was changed on purpose).
fn recrc(mut batch: Vec<u8>) -> Vec<u8> {
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

#[test]
fn a_brokers_producer_snapshot_and_txnindex_start_the_scan_at_their_segment() {
    use crate::format::producer_snapshot::{ProducerEntry, ProducerSnapshot};
    use crate::format::txn_index::TxnIndexEntry;
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
    assert_eq!(*from_snapshot.aborted, *scanned.aborted);

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
    assert_eq!(*damaged_snapshot.aborted, *scanned.aborted);

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
    use crate::format::producer_snapshot::{ProducerEntry, ProducerSnapshot};
    use crate::format::txn_index::TxnIndexEntry;
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
        let (below, _) = scan(&batches[..at as usize]);
        let pdir = dir.path().join("t-0");
        let mut txnindex: HashMap<i64, Vec<u8>> = HashMap::new();
        let mut aborts: Vec<(i64, Offset, Offset)> = below
            .aborted
            .iter()
            .flat_map(|(pid, ranges)| ranges.iter().map(move |(f, l)| (*pid, *f, *l)))
            .collect();
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
        let entries = below
            .open
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
        assert_eq!(*started.aborted, *full.aborted, "seed {seed}, boundary {at}, {bases:?}");
    }
}

#[test]
fn isolation_levels_parse_by_kafkas_names() {
    assert_eq!("read_committed".parse::<Isolation>().unwrap(), Isolation::ReadCommitted);
    assert_eq!("read_uncommitted".parse::<Isolation>().unwrap(), Isolation::ReadUncommitted);
    assert!("committed".parse::<Isolation>().is_err());
    assert_eq!(Isolation::default().name(), "read_committed");
}
