//! Unit tests of the transaction scan, its state and its persistence.

use super::state::{SpanEvents, TxnEvent, TxnState};
use super::*;
use std::collections::HashMap;
use topicfs_format::control::encode_end_txn_marker_batch;
use topicfs_format::{BatchSpec, encode_batch, parse_batch_info};
use topicfs_format::{NewRecord, Offset};

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

#[test]
fn isolation_levels_parse_by_kafkas_names() {
    assert_eq!("read_committed".parse::<Isolation>().unwrap(), Isolation::ReadCommitted);
    assert_eq!("read_uncommitted".parse::<Isolation>().unwrap(), Isolation::ReadUncommitted);
    assert!("committed".parse::<Isolation>().is_err());
    assert_eq!(Isolation::default().name(), "read_committed");
}
