//! Unit tests of the key index format.

use super::*;

fn sample() -> KeyIndexBuilder {
    let mut b = KeyIndexBuilder::new(Offset(100));
    for o in 100..400 {
        let key = format!("k{}", o % 37);
        b.add(Some(key.as_bytes()), Offset(o));
    }
    b.add(None, Offset(400));
    b.add(Some(b""), Offset(401));
    b.add(Some(b"\xff/"), Offset(405));
    b.add_txn_batch(TxnBatch {
        base_offset: Offset(402),
        last_offset: Offset(404),
        producer_id: 7,
    });
    b
}

#[test]
fn an_encoded_index_answers_like_its_builder() {
    let b = sample();
    let index = SegmentKeyIndex::decode(b.encode(Offset(406), 4096)).unwrap();
    assert_eq!(index.key_count(), 40);
    assert_eq!(index.record_count(), 303);
    assert_eq!(
        (index.base_offset(), index.end_offset(), index.log_size()),
        (Offset(100), Offset(406), 4096)
    );
    for k in 0..37 {
        let key = format!("k{k}");
        let e = index.find(Some(key.as_bytes())).unwrap();
        let got: Vec<i64> = index.postings(&e).unwrap().iter().map(|o| o.0).collect();
        assert_eq!(got, b.offsets(Some(key.as_bytes())));
    }
    let null = index.find(None).unwrap();
    assert_eq!(index.postings(&null).unwrap(), [Offset(400)]);
    let empty = index.find(Some(b"")).unwrap();
    assert_eq!(index.postings(&empty).unwrap(), [Offset(401)]);
    assert!(index.find(Some(b"absent")).is_none());
    assert_eq!(index.producer_at(Offset(403)), Some(7));
    assert_eq!(index.producer_at(Offset(405)), None);
    assert_eq!(index.producer_at(Offset(401)), None);
}

#[test]
fn the_filter_rejects_most_absent_keys() {
    let index = SegmentKeyIndex::decode(sample().encode(Offset(406), 1)).unwrap();
    let admitted = (0..10_000)
        .filter(|i| index.may_contain(key_hash(Some(format!("x{i}").as_bytes()))))
        .count();
    assert!(admitted < 200, "{admitted} of 10000 absent keys admitted");
}

#[test]
fn empty_and_tiny_indexes_encode() {
    let index =
        SegmentKeyIndex::decode(KeyIndexBuilder::new(Offset(5)).encode(Offset(5), 0)).unwrap();
    assert_eq!(index.key_count(), 0);
    assert!(!index.may_contain(key_hash(None)));
    let mut b = KeyIndexBuilder::new(Offset(0));
    b.add(Some(b"one"), Offset(3));
    let index = SegmentKeyIndex::decode(b.encode(Offset(4), 10)).unwrap();
    assert_eq!(index.postings(&index.find(Some(b"one")).unwrap()).unwrap(), [Offset(3)]);
}

#[test]
fn every_damaged_byte_is_detected() {
    let bytes = sample().encode(Offset(406), 1);
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x40;
        assert!(SegmentKeyIndex::decode(bad).is_err(), "flip at {i} not detected");
    }
    for len in 0..bytes.len() {
        assert!(SegmentKeyIndex::decode(bytes[..len].to_vec()).is_err());
    }
}

/// An index of another layout version (version 1, written before the key order) is
/// refused, so a stored one is rebuilt, never misread.
#[test]
fn an_index_of_another_version_is_refused() {
    let mut bytes = sample().encode(Offset(406), 1);
    assert!(SegmentKeyIndex::decode(bytes.clone()).is_ok());
    bytes[4..6].copy_from_slice(&1u16.to_be_bytes());
    let crc = checksum(&bytes);
    bytes[8..12].copy_from_slice(&crc.to_be_bytes());
    let err = SegmentKeyIndex::decode(bytes).unwrap_err();
    assert!(err.to_string().contains("version"), "{err}");
}

/// The key order lists every key once, the null key first, then by bytes.
#[test]
fn entries_in_key_order_are_sorted_by_key_bytes() {
    let index = SegmentKeyIndex::decode(sample().encode(Offset(406), 1)).unwrap();
    let keys: Vec<Option<Vec<u8>>> = (0..index.key_count())
        .map(|i| index.key_of(&index.entry_in_key_order(i).unwrap()).unwrap().map(<[u8]>::to_vec))
        .collect();
    let mut expect = keys.clone();
    expect.sort();
    expect.dedup();
    assert_eq!(keys, expect);
    assert_eq!(keys.len(), 40);
    assert_eq!(keys[0], None);
    assert_eq!(keys[1].as_deref(), Some(&b""[..]));
}

/// Built in bulk, in parts joined in order, with keys short and long (kept in the arena),
/// the index is byte for byte the one built record by record.
#[test]
fn the_bulk_builder_in_parts_encodes_what_the_incremental_one_does() {
    let key = |o: i64| match o % 7 {
        0 => None,
        1 => Some(format!("a-much-longer-key-than-sixteen-bytes-{}", o % 5).into_bytes()),
        _ => Some(format!("k{}", o % 13).into_bytes()),
    };
    let mut one = KeyIndexBuilder::new(Offset(1000));
    let mut parts: Vec<BulkKeyIndexBuilder> =
        (0..3).map(|_| BulkKeyIndexBuilder::new(Offset(1000))).collect();
    // 39,000 records: sorted through the radix partition on several threads.
    for o in 1000..40_000 {
        one.add(key(o).as_deref(), Offset(o));
        parts[((o - 1000) * 3 / 39_000) as usize].add(key(o).as_deref(), Offset(o));
    }
    let t = TxnBatch { base_offset: Offset(1003), last_offset: Offset(1009), producer_id: 3 };
    one.add_txn_batch(t);
    KeySink::add_txn_batch(&mut parts[0], t);
    let mut bulk = parts.remove(0);
    for p in parts {
        bulk.append(p);
    }
    assert_eq!(bulk.encode(Offset(40_000), 77), one.encode(Offset(40_000), 77));
    // And a builder on top of an encoded index answers as one that read everything.
    let half = {
        let mut b = KeyIndexBuilder::new(Offset(1000));
        for o in 1000..20_000 {
            b.add(key(o).as_deref(), Offset(o));
        }
        b
    };
    let mut top = KeyIndexBuilder::on_top_of(
        SegmentKeyIndex::decode(half.encode(Offset(20_000), 5)).unwrap(),
    );
    for o in 1000..40_000 {
        top.add(key(o).as_deref(), Offset(o));
    }
    top.add_txn_batch(t);
    for o in 0..20 {
        let k = key(o);
        assert_eq!(top.offsets(k.as_deref()), one.offsets(k.as_deref()), "key of {o}");
        assert_eq!(
            top.offsets_from(k.as_deref(), Offset(20_005)),
            one.offsets_from(k.as_deref(), Offset(20_005))
        );
    }
    assert_eq!(top.encode(Offset(40_000), 77), one.encode(Offset(40_000), 77));
}

/// Keys of one hash (forced: every key hashes to its length here, so `aa`, `bb` and `cc`
/// collide, as do `x` and `y`, and the empty key shares the null key's 0) are kept apart by their bytes, in
/// the bulk builder (sorted, in parts) and in the incremental one (and one on top of an
/// encoded index), and a query for one returns that key's offsets only.
#[test]
fn keys_of_one_hash_are_kept_apart() {
    fn by_len(key: Option<&[u8]>) -> u64 {
        key.map_or(0, |k| k.len() as u64)
    }
    crate::key_name::with_key_hash(by_len, || {
        let keys: [Option<&[u8]>; 6] =
            [Some(b"aa"), Some(b"bb"), Some(b"cc"), Some(b"x"), Some(b"y"), None];
        // Offset o holds keys[o % 6], or the empty key when o % 11 == 0.
        let key = |o: i64| if o % 11 == 0 { Some(&b""[..]) } else { keys[(o % 6) as usize] };
        let mut one = KeyIndexBuilder::new(Offset(0));
        let mut parts: Vec<BulkKeyIndexBuilder> =
            (0..2).map(|_| BulkKeyIndexBuilder::new(Offset(0))).collect();
        for o in 0..3000 {
            one.add(key(o), Offset(o));
            parts[(o / 1500) as usize].add(key(o), Offset(o));
        }
        let mut bulk = parts.remove(0);
        bulk.append(parts.remove(0));
        let encoded = bulk.encode(Offset(3000), 9);
        assert_eq!(encoded, one.encode(Offset(3000), 9));
        let index = SegmentKeyIndex::decode(encoded).unwrap();
        assert_eq!(index.key_count(), 7);
        assert_eq!(index.entries_with_hash(2).len(), 3);
        let mut top = KeyIndexBuilder::on_top_of(
            SegmentKeyIndex::decode(one.encode(Offset(3000), 9)).unwrap(),
        );
        for o in 3000..3100 {
            top.add(key(o), Offset(o));
            one.add(key(o), Offset(o));
        }
        let mut all = keys.to_vec();
        all.push(Some(b""));
        for k in all {
            let want: Vec<i64> = (0..3000).filter(|&o| key(o) == k).collect();
            let entry = index.find(k).unwrap();
            assert_eq!(index.key_of(&entry).unwrap(), k);
            let got: Vec<i64> = index.postings(&entry).unwrap().iter().map(|o| o.0).collect();
            assert_eq!(got, want, "encoded, key {k:?}");
            assert_eq!(one.offsets_from(k, Offset(0))[..want.len()], want[..], "key {k:?}");
            assert_eq!(top.offsets(k), one.offsets(k), "on top, key {k:?}");
            assert!(one.offsets(k).iter().all(|&o| key(o) == k), "key {k:?}");
        }
        // A key of a shared hash that the segment does not hold is not found.
        assert!(index.find(Some(b"dd")).is_none());
        assert!(one.offsets(Some(b"dd")).is_empty());
        assert!(top.offsets(Some(b"z")).is_empty());
    });
}

/// Bytes with a valid CRC but hostile contents never panic.
#[test]
fn hostile_contents_with_a_valid_crc_never_panic() {
    let bytes = sample().encode(Offset(406), 1);
    let mut state = 0x9e3779b97f4a7c15u64;
    for _ in 0..3000 {
        let mut bad = bytes.clone();
        for _ in 0..4 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let at = 12 + (state >> 33) as usize % (bad.len() - 12);
            bad[at] = (state >> 13) as u8;
        }
        let crc = checksum(&bad);
        bad[8..12].copy_from_slice(&crc.to_be_bytes());
        if let Ok(index) = SegmentKeyIndex::decode(bad) {
            for i in 0..index.key_count() {
                let e = index.entry(i).unwrap();
                let _ = index.key_of(&e);
                let _ = index.postings(&e);
            }
            let _ = index.find(Some(b"k3"));
            let _ = index.may_contain(12345);
            let _ = index.producer_at(Offset(403));
        }
    }
}

/// Runs the jobs last first, as `width` threads might finish them in any order.
struct Reversed(usize);

impl RunJobs for Reversed {
    fn width(&self) -> usize {
        self.0
    }

    fn run_jobs<'a>(&self, jobs: Vec<Box<dyn FnOnce() + Send + 'a>>) {
        for job in jobs.into_iter().rev() {
            job();
        }
    }
}

#[test]
fn the_sort_cut_into_jobs_gives_the_index_sorting_in_order_gives() {
    // Enough records for the radix partition (more than 2^14), keys colliding in their top bits.
    let build = || {
        let mut b = BulkKeyIndexBuilder::new(Offset(0));
        for o in 0..40_000i64 {
            let key = format!("key-{}", (o * 7919) % 5_003);
            b.add(Some(key.as_bytes()), Offset(o));
        }
        b.add(None, Offset(40_000));
        b
    };
    let in_order = build().encode(Offset(40_001), 123);
    for width in [1, 2, 3, 4, 16] {
        let cut = build().encode_with(Offset(40_001), 123, &Reversed(width));
        assert!(cut == in_order, "width {width}: another index");
    }
    let index = SegmentKeyIndex::decode(in_order).unwrap();
    assert_eq!(index.record_count(), 40_001);
    assert_eq!(index.key_count(), 5_004);
}
