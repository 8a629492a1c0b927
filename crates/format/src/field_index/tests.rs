use super::*;
use proptest::prelude::*;

/// (offset, kind, bytes) of a value given to a builder.
type Given = (i64, ValueKind, Vec<u8>);

fn sample() -> (Vec<u8>, Vec<Given>) {
    let values = vec![
        (100, ValueKind::String, b"alice".to_vec()),
        (101, ValueKind::Number, b"3".to_vec()),
        (102, ValueKind::String, b"bob".to_vec()),
        (104, ValueKind::String, b"alice".to_vec()),
        (105, ValueKind::Null, Vec::new()),
        (106, ValueKind::Number, b"-2.5".to_vec()),
        (107, ValueKind::True, Vec::new()),
    ];
    let mut b = FieldIndexBuilder::new(b"user", Offset(100));
    for (o, k, v) in &values {
        b.add(Offset(*o), *k, v);
    }
    b.skip(Offset(108));
    b.add_other(Offset(109));
    (b.finish(Offset(110)), values)
}

#[test]
fn field_index_round_trip() {
    let (bytes, values) = sample();
    let index = FieldIndex::decode(&bytes).unwrap();
    assert_eq!((index.base, index.end, index.records), (Offset(100), Offset(110), 9));
    assert_eq!(index.field, b"user");
    assert_eq!(index.other, vec![9]);
    for (o, k, v) in &values {
        let at = index.find(*k, v).unwrap();
        assert!(index.entries[at].offsets.contains(&((o - 100) as u32)));
    }
    let alice = index.find(ValueKind::String, b"alice").unwrap();
    assert_eq!(index.entries[alice].offsets, vec![0, 4]);
    // Sorted: null, true, numbers by value, strings by bytes.
    let kinds: Vec<_> = index.entries.iter().map(|e| (e.kind, e.bytes.clone())).collect();
    assert_eq!(
        kinds,
        vec![
            (ValueKind::Null, vec![]),
            (ValueKind::True, vec![]),
            (ValueKind::Number, b"-2.5".to_vec()),
            (ValueKind::Number, b"3".to_vec()),
            (ValueKind::String, b"alice".to_vec()),
            (ValueKind::String, b"bob".to_vec()),
        ]
    );
    assert!(index.find(ValueKind::String, b"carol").is_none());
}

#[test]
fn field_index_refuses_every_damaged_byte() {
    let (bytes, _) = sample();
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x41;
        assert!(FieldIndex::decode(&b).is_err(), "byte {i}");
    }
    for n in 0..bytes.len() {
        assert!(FieldIndex::decode(&bytes[..n]).is_err(), "cut at {n}");
    }
}

/// Re-signs `b` (after the CRC) so that decode checks the structure, not only the CRC.
fn resign(mut b: Vec<u8>) -> Vec<u8> {
    if b.len() >= 8 {
        let crc = crc32c::crc32c(&b[8..]);
        b[4..8].copy_from_slice(&crc.to_be_bytes());
    }
    b
}

proptest! {
    #[test]
    fn field_index_random_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[0; 4]);
        b.push(VERSION);
        b.extend_from_slice(&tail);
        let _ = FieldIndex::decode(&resign(b));
        let _ = FieldIndex::decode(&tail);
    }

    #[test]
    fn field_index_mutations_never_panic(at in 0usize..400, byte in any::<u8>()) {
        let (bytes, _) = sample();
        let mut b = bytes.clone();
        if let Some(c) = b.get_mut(at % bytes.len()) {
            *c = byte;
        }
        let _ = FieldIndex::decode(&resign(b));
    }

    #[test]
    fn field_index_round_trips_random_values(
        values in proptest::collection::vec((0u8..5, "[a-c]{0,3}", -50i32..50), 0..60),
    ) {
        let mut builder = FieldIndexBuilder::new(b"f", Offset(7));
        let mut expect: Vec<(ValueKind, Vec<u8>, u32)> = Vec::new();
        for (i, (k, s, n)) in values.iter().enumerate() {
            let kind = ValueKind::of(*k).unwrap();
            let bytes = match kind {
                ValueKind::Number => n.to_string().into_bytes(),
                ValueKind::String => s.clone().into_bytes(),
                _ => Vec::new(),
            };
            builder.add(Offset(7 + i as i64), kind, &bytes);
            expect.push((kind, bytes, i as u32));
        }
        let index = FieldIndex::decode(&builder.finish(Offset(7 + values.len() as i64))).unwrap();
        prop_assert_eq!(index.records, values.len() as u64);
        for (kind, bytes, rel) in expect {
            let at = index.find(kind, &bytes).unwrap();
            prop_assert!(index.entries[at].offsets.contains(&rel));
        }
        let total: usize = index.entries.iter().map(|e| e.offsets.len()).sum();
        prop_assert_eq!(total, values.len());
    }
}
