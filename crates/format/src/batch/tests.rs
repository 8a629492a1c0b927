use super::encode::{write_record, write_value_record};
use super::*;
use crate::compression;
use crate::{NO_TIMESTAMP, NewRecord, Record, Timestamp};

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

fn hello() -> NewRecord {
    NewRecord {
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(b"hello".to_vec()),
        headers: vec![],
    }
}

const APPENDIX_B_HELLO: &str = "
    00 00 00 00 00 00 00 00  00 00 00 3d  00 00 00 00  02  e6 41 a4 4b  00 00
    00 00 00 00  00 00 01 8b cf e5 68 00  00 00 01 8b cf e5 68 00
    ff ff ff ff ff ff ff ff  ff ff  ff ff ff ff  00 00 00 01
    16 00 00 00 01 0a 68 65 6c 6c 6f 00";

#[test]
fn one_record_batch_matches_appendix_b_byte_for_byte() {
    let bytes = encode_batch(&BatchSpec::default(), &[hello()]).unwrap();
    assert_eq!(bytes, hex(APPENDIX_B_HELLO));
    assert_eq!(bytes.len(), 73);
    let info = parse_batch_info(&bytes).unwrap();
    assert_eq!(info.crc, 0xE641_A44B);
    assert_eq!(info.size, 73);
}

#[test]
fn appendix_b_batch_decodes_to_its_record() {
    let bytes = hex(APPENDIX_B_HELLO);
    let batch = decode_batch(&bytes).unwrap();
    let records: Vec<_> = batch.records().collect::<Result<_, _>>().unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].offset, Offset(0));
    assert_eq!(records[0].timestamp, 1_700_000_000_000);
    assert_eq!(records[0].key, None);
    assert_eq!(records[0].value, Some(&b"hello"[..]));
    assert_eq!(records[0].sequence, -1);
}

fn rec(ts: Timestamp, key: Option<&[u8]>, value: Option<&[u8]>) -> NewRecord {
    NewRecord {
        timestamp: ts,
        key: key.map(<[u8]>::to_vec),
        value: value.map(<[u8]>::to_vec),
        headers: vec![],
    }
}

fn sample_records() -> Vec<NewRecord> {
    let mut with_headers = rec(1_700_000_000_500, Some(b"k2"), Some(b"v2"));
    with_headers.headers =
        vec![(b"trace".to_vec(), Some(b"abc".to_vec())), (b"empty".to_vec(), None)];
    vec![
        rec(1_700_000_000_100, Some(b"k0"), Some(b"hello")),
        rec(1_700_000_000_000, None, None),
        with_headers,
        rec(1_699_999_999_000, Some(b""), Some(&[0u8; 300])),
    ]
}

/// Recomputes `batchLength` and the CRC of a hand-edited v2 batch.
fn refresh(bytes: &mut [u8]) {
    let len = (bytes.len() - LOG_OVERHEAD) as i32;
    bytes[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&bytes[ATTRIBUTES_AT..]);
    bytes[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

fn all<'b>(batch: &'b Batch<'_>) -> Result<Vec<Record<'b>>, DecodeError> {
    batch.records().collect()
}

#[test]
fn every_codec_roundtrips_keys_values_nulls_and_headers() {
    let input = sample_records();
    for compression in Compression::ALL {
        let spec = BatchSpec {
            base_offset: Offset(1000),
            partition_leader_epoch: 7,
            compression,
            producer_id: 42,
            producer_epoch: 3,
            base_sequence: 10,
            ..BatchSpec::default()
        };
        let bytes = encode_batch(&spec, &input).unwrap();
        let batch = decode_batch(&bytes).unwrap();
        let info = batch.info();
        assert_eq!(info.compression, compression);
        assert_eq!(info.base_offset, Offset(1000));
        assert_eq!(info.last_offset, Offset(1003));
        assert_eq!(info.records_count, 4);
        assert_eq!(info.base_timestamp, 1_700_000_000_100);
        assert_eq!(info.max_timestamp, 1_700_000_000_500);
        assert_eq!(info.partition_leader_epoch, 7);
        assert_eq!((info.producer_id, info.producer_epoch, info.base_sequence), (42, 3, 10));
        assert_eq!(info.size as usize, bytes.len());
        let out = all(&batch).unwrap();
        assert_eq!(out.len(), input.len());
        for (i, (r, n)) in out.iter().zip(&input).enumerate() {
            assert_eq!(r.offset, Offset(1000 + i as i64));
            assert_eq!(r.timestamp, n.timestamp);
            assert_eq!(r.key, n.key.as_deref());
            assert_eq!(r.value, n.value.as_deref());
            assert_eq!(r.sequence, 10 + i as i32);
            let headers: Vec<_> =
                r.headers.iter().map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec))).collect();
            assert_eq!(headers, n.headers);
        }
    }
}

#[test]
fn encode_batch_into_appends_and_returns_the_batch_length() {
    let mut out = b"prefix".to_vec();
    let n = encode_batch_into(&mut out, &BatchSpec::default(), &[hello()]).unwrap();
    assert_eq!(n, 73);
    assert_eq!(&out[..6], b"prefix");
    assert_eq!(out[6..], hex(APPENDIX_B_HELLO));
}

#[test]
fn empty_record_list_is_refused_and_leaves_out_untouched() {
    let mut out = vec![1, 2, 3];
    let none: &[NewRecord] = &[];
    assert!(encode_batch_into(&mut out, &BatchSpec::default(), none).is_err());
    assert_eq!(out, [1, 2, 3]);
}

#[test]
fn records_without_a_timestamp_are_written_with_the_default_timestamp() {
    let records = [rec(NO_TIMESTAMP, None, Some(b"a")), rec(7_000, None, Some(b"b"))];
    let spec = BatchSpec { default_timestamp: 5_000, ..BatchSpec::default() };
    let batch_bytes = encode_batch(&spec, &records).unwrap();
    let batch = decode_batch(&batch_bytes).unwrap();
    assert_eq!((batch.info().base_timestamp, batch.info().max_timestamp), (5_000, 7_000));
    let stamps: Vec<_> = all(&batch).unwrap().iter().map(|r| r.timestamp).collect();
    assert_eq!(stamps, [5_000, 7_000]);
    // Without a default the record keeps NO_TIMESTAMP, as before.
    let bytes = encode_batch(&BatchSpec::default(), &records[..1]).unwrap();
    assert_eq!(all(&decode_batch(&bytes).unwrap()).unwrap()[0].timestamp, NO_TIMESTAMP);
}

#[test]
fn borrowed_records_encode_byte_for_byte_like_owned_ones() {
    let owned = sample_records();
    let borrowed: Vec<RecordRef<'_>> = owned.iter().map(EncodeRecord::record_ref).collect();
    for compression in Compression::ALL {
        let spec = BatchSpec { compression, default_timestamp: 9, ..BatchSpec::default() };
        assert_eq!(encode_batch(&spec, &borrowed), encode_batch(&spec, &owned));
    }
    let line = RecordRef::value_only(b"line");
    let bytes = encode_batch(&BatchSpec::default(), &[line]).unwrap();
    let batch = decode_batch(&bytes).unwrap();
    let r = &all(&batch).unwrap()[0];
    assert_eq!((r.key, r.value, r.headers.len()), (None, Some(&b"line"[..]), 0));
}

#[test]
fn record_stamps_are_the_records_offsets_and_timestamps_for_every_codec() {
    for compression in Compression::ALL {
        let spec = BatchSpec { base_offset: Offset(40), compression, ..BatchSpec::default() };
        let bytes = encode_batch(&spec, &sample_records()).unwrap();
        let batch = decode_batch(&bytes).unwrap();
        let stamps: Vec<_> = batch.record_stamps().collect::<Result<_, _>>().unwrap();
        let expected: Vec<_> = all(&batch)
            .unwrap()
            .iter()
            .map(|r| RecordStamp { offset: r.offset, timestamp: r.timestamp })
            .collect();
        assert_eq!(stamps, expected);
    }
    let lat = BatchSpec {
        timestamp_type: TimestampType::LogAppendTime,
        log_append_time: 77,
        ..BatchSpec::default()
    };
    let bytes = encode_batch(&lat, &sample_records()).unwrap();
    let batch = decode_batch(&bytes).unwrap();
    assert!(batch.record_stamps().all(|s| s.unwrap().timestamp == 77));
    let v1 = legacy::encode_message(Offset(8), 1, 0, 1_600_000_000_000, None, None);
    let batch = decode_batch(&v1).unwrap();
    let stamps: Vec<_> = batch.record_stamps().collect::<Result<_, _>>().unwrap();
    assert_eq!(stamps, [RecordStamp { offset: Offset(8), timestamp: 1_600_000_000_000 }]);
}

/// Walks `records` (an uncompressed batch's records section) with windows of `window`
/// bytes the way a timestamp lookup does, collecting every stamp.
fn peek_all(info: &BatchInfo, records: &[u8], window: usize) -> Vec<RecordStamp> {
    let (mut out, mut pos, mut want) = (Vec::new(), 0, window);
    while out.len() < info.records_count as usize {
        let stop = (pos + want).min(records.len());
        let at_end = stop == records.len();
        match peek_record_stamp(info, &records[pos..stop], at_end).unwrap() {
            StampPeek::Stamp { stamp, len } => {
                out.push(stamp);
                pos += len;
                want = window;
            }
            StampPeek::NeedMore { need } => {
                assert!(need > stop - pos, "NeedMore must ask for more than it had");
                want = need;
            }
        }
    }
    check_no_trailing_records(records.len() - pos).unwrap();
    out
}

#[test]
fn peek_record_stamp_walks_an_uncompressed_batch_like_record_stamps_for_any_window() {
    for tstype in [TimestampType::CreateTime, TimestampType::LogAppendTime] {
        let spec = BatchSpec {
            base_offset: Offset(40),
            timestamp_type: tstype,
            log_append_time: 77,
            ..BatchSpec::default()
        };
        let bytes = encode_batch(&spec, &sample_records()).unwrap();
        let batch = decode_batch(&bytes).unwrap();
        let expected: Vec<_> = batch.record_stamps().collect::<Result<_, _>>().unwrap();
        for window in 1..bytes.len() {
            assert_eq!(peek_all(batch.info(), &bytes[RECORDS_AT..], window), expected);
        }
    }
}

#[test]
fn peek_record_stamp_refuses_damaged_framing_at_the_end_of_a_batch() {
    let bytes = encode_batch(&BatchSpec::default(), &sample_records()).unwrap();
    let info = parse_batch_info(&bytes).unwrap();
    let records = &bytes[RECORDS_AT..];
    // Cut inside the first record: more is needed, or an error once the batch has ended.
    assert!(matches!(
        peek_record_stamp(&info, &records[..3], false),
        Ok(StampPeek::NeedMore { .. })
    ));
    assert!(peek_record_stamp(&info, &records[..3], true).is_err());
    assert!(peek_record_stamp(&info, &[], true).is_err(), "fewer records than the count");
    // A negative record length is an error whatever the window.
    assert!(peek_record_stamp(&info, &[0x01, 0, 0, 0], false).is_err());
    assert!(check_no_trailing_records(1).is_err());
}

#[test]
fn record_values_are_the_records_offsets_and_values_for_every_codec() {
    for compression in Compression::ALL {
        let spec = BatchSpec { base_offset: Offset(40), compression, ..BatchSpec::default() };
        let bytes = encode_batch(&spec, &sample_records()).unwrap();
        let batch = decode_batch(&bytes).unwrap();
        let values: Vec<_> = batch.record_values().collect::<Result<_, _>>().unwrap();
        let expected: Vec<_> = all(&batch)
            .unwrap()
            .iter()
            .map(|r| RecordValue { offset: r.offset, value: r.value })
            .collect();
        assert_eq!(values, expected);
    }
    let v1 = legacy::encode_message(Offset(8), 1, 0, 1_600_000_000_000, None, Some(b"v"));
    let batch = decode_batch(&v1).unwrap();
    let values: Vec<_> = batch.record_values().collect::<Result<_, _>>().unwrap();
    assert_eq!(values, [RecordValue { offset: Offset(8), value: Some(&b"v"[..]) }]);
}

#[test]
fn record_stamps_refuse_what_records_refuse_at_the_same_byte() {
    let mut short = hex(APPENDIX_B_HELLO);
    short[RECORD_BATCH_OVERHEAD] = 0x18; // record length one byte longer than its contents
    short.push(0);
    let mut trailing = hex(APPENDIX_B_HELLO);
    trailing.extend_from_slice(&[0x16, 0, 0]);
    let mut missing = hex(APPENDIX_B_HELLO);
    missing[RECORDS_COUNT_AT + 3] = 2;
    for mut bytes in [short, trailing, missing] {
        refresh(&mut bytes);
        let batch = decode_batch(&bytes).unwrap();
        let light = batch.record_stamps().find_map(Result::err).unwrap();
        assert_eq!(Some(light.clone()), batch.records().find_map(Result::err));
        let values = batch.record_values().find_map(Result::err);
        assert_eq!(values, Some(light.clone()));
        // The value walk sees the records before the damaged one, then stops with its error.
        let mut walked = Vec::new();
        assert_eq!(batch.for_each_value(|v| walked.push(v)), Err(light));
        let before: Vec<_> = batch.record_values().map_while(Result::ok).collect();
        assert_eq!(walked, before);
    }
}

#[test]
fn the_value_walk_is_the_record_values_for_every_codec_and_legacy_messages() {
    let mut batches: Vec<Vec<u8>> = Compression::ALL
        .into_iter()
        .map(|compression| {
            let spec = BatchSpec { base_offset: Offset(40), compression, ..BatchSpec::default() };
            encode_batch(&spec, &sample_records()).unwrap()
        })
        .collect();
    batches.push(legacy::encode_message(Offset(8), 1, 0, 1_600_000_000_000, None, Some(b"v")));
    batches.push(legacy::encode_message(Offset(9), 0, 0, 0, Some(b"k"), None));
    for bytes in &batches {
        let batch = decode_batch(bytes).unwrap();
        let mut walked = Vec::new();
        batch.for_each_value(|v| walked.push(v)).unwrap();
        let values: Vec<_> = batch.record_values().collect::<Result<_, _>>().unwrap();
        assert_eq!(walked, values);
        // The bound the value-line fast path relies on: value lines fit in the records.
        let lines: usize = values.iter().map(|v| v.value.map_or(0, <[u8]>::len) + 1).sum();
        assert!(lines <= batch.records_bytes(), "{lines} > {}", batch.records_bytes());
    }
}

#[test]
fn log_append_time_overrides_every_record_timestamp() {
    let spec = BatchSpec {
        timestamp_type: TimestampType::LogAppendTime,
        log_append_time: 1_800_000_000_000,
        ..BatchSpec::default()
    };
    let bytes = encode_batch(&spec, &sample_records()).unwrap();
    let batch = decode_batch(&bytes).unwrap();
    assert_eq!(batch.info().timestamp_type, TimestampType::LogAppendTime);
    assert_eq!(batch.info().max_timestamp, 1_800_000_000_000);
    assert!(all(&batch).unwrap().iter().all(|r| r.timestamp == 1_800_000_000_000));
}

#[test]
fn set_log_append_time_stamps_the_batch_and_keeps_the_crc_valid() {
    let mut bytes = encode_batch(&BatchSpec::default(), &sample_records()).unwrap();
    set_log_append_time(&mut bytes, 1_900_000_000_000).unwrap();
    verify_crc(&bytes).unwrap();
    let batch = decode_batch(&bytes).unwrap();
    assert_eq!(batch.info().timestamp_type, TimestampType::LogAppendTime);
    assert_eq!(batch.info().base_timestamp, 1_700_000_000_100, "base timestamp unchanged");
    assert!(all(&batch).unwrap().iter().all(|r| r.timestamp == 1_900_000_000_000));
}

#[test]
fn base_offset_and_leader_epoch_rewrites_do_not_touch_the_crc() {
    let mut bytes = hex(APPENDIX_B_HELLO);
    set_base_offset(&mut bytes, Offset(5000)).unwrap();
    set_partition_leader_epoch(&mut bytes, 9).unwrap();
    assert_eq!(&bytes[CRC_AT..CRC_AT + 4], &0xE641_A44Bu32.to_be_bytes());
    let batch = decode_batch(&bytes).unwrap();
    assert_eq!(batch.info().partition_leader_epoch, 9);
    assert_eq!(all(&batch).unwrap()[0].offset, Offset(5000));
}

#[test]
fn crc_mismatch_is_reported_at_the_crc_field() {
    let mut bytes = hex(APPENDIX_B_HELLO);
    bytes[70] ^= 0x01; // inside the value
    for e in [verify_crc(&bytes).unwrap_err(), decode_batch(&bytes).unwrap_err()] {
        assert_eq!(e.at, CRC_AT);
        assert!(matches!(e.kind, DecodeErrorKind::CrcMismatch { stored: 0xE641_A44B, .. }));
    }
    // Header facts are still readable: parse_batch_info does not check the CRC.
    assert_eq!(parse_batch_info(&bytes).unwrap().records_count, 1);
}

#[test]
fn unverified_decode_skips_only_the_crc_check() {
    let intact = hex(APPENDIX_B_HELLO);
    let stamps = |b: &Batch<'_>| -> Vec<(Offset, Timestamp)> {
        b.record_stamps().map(|s| s.map(|s| (s.offset, s.timestamp)).unwrap()).collect()
    };
    let verified = decode_batch(&intact).unwrap();
    let unverified = decode_batch_unverified(&intact).unwrap();
    assert_eq!(stamps(&verified), stamps(&unverified));
    assert_eq!(stamps(&unverified), [(Offset(0), 1_700_000_000_000)]);
    // A flipped value bit: the CRC check refuses it, the unverified decode still parses.
    let mut flipped = intact.clone();
    flipped[70] ^= 0x01;
    assert!(decode_batch(&flipped).is_err());
    assert_eq!(stamps(&decode_batch_unverified(&flipped).unwrap()), stamps(&verified));
    // Structural damage is still an error: a record count the records do not have.
    let mut miscounted = intact;
    miscounted[60] = 2;
    assert!(decode_batch_unverified(&miscounted).unwrap().record_stamps().any(|s| s.is_err()));
}

#[test]
fn peek_entry_stops_quietly_below_17_bytes_and_rejects_small_sizes() {
    let bytes = hex(APPENDIX_B_HELLO);
    assert_eq!(peek_entry(&bytes[..16]).unwrap(), None);
    let h = peek_entry(&bytes[..17]).unwrap().unwrap();
    assert_eq!(h, EntryHeader { offset: Offset(0), size: 61, magic: 2 });
    assert_eq!(h.total_size(), 73);
    let mut small = bytes.clone();
    small[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&13i32.to_be_bytes());
    let e = peek_entry(&small).unwrap_err();
    assert_eq!((e.at, e.kind), (LENGTH_AT, DecodeErrorKind::InvalidSize(13)));
}

#[test]
fn torn_entry_is_truncated_not_decoded() {
    let bytes = hex(APPENDIX_B_HELLO);
    let e = decode_batch(&bytes[..72]).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::Truncated { needed: 73, available: 72 });
    assert!(parse_batch_info(&bytes[..60]).is_err());
    assert!(parse_batch_info(&bytes[..61]).is_ok());
}

#[test]
fn bytes_after_the_entry_are_ignored() {
    let mut bytes = hex(APPENDIX_B_HELLO);
    bytes.extend_from_slice(&[0xff; 10]);
    assert_eq!(all(&decode_batch(&bytes).unwrap()).unwrap().len(), 1);
}

#[test]
fn v2_batch_shorter_than_its_header_or_with_unknown_magic_is_invalid() {
    let mut bytes = hex(APPENDIX_B_HELLO);
    bytes[MAGIC_AT] = 3;
    assert_eq!(decode_batch(&bytes).unwrap_err().kind, DecodeErrorKind::UnknownMagic(3));
    let mut short = hex(APPENDIX_B_HELLO);
    short[LENGTH_AT..LENGTH_AT + 4].copy_from_slice(&48i32.to_be_bytes());
    assert!(matches!(parse_batch_info(&short).unwrap_err().kind, DecodeErrorKind::InvalidSize(48)));
}

#[test]
fn invalid_codec_bits_are_rejected_at_the_attributes() {
    let mut bytes = hex(APPENDIX_B_HELLO);
    bytes[ATTRIBUTES_AT + 1] = 0x05;
    refresh(&mut bytes);
    let e = decode_batch(&bytes).unwrap_err();
    assert_eq!((e.at, e.kind), (ATTRIBUTES_AT, DecodeErrorKind::InvalidCompression(5)));
}

#[test]
fn record_length_larger_than_its_contents_is_invalid() {
    let mut bytes = hex(APPENDIX_B_HELLO);
    bytes[RECORDS_AT] = 0x18; // length 12, one byte more than the record holds
    bytes.push(0);
    refresh(&mut bytes);
    let batch = decode_batch(&bytes).unwrap();
    let e = all(&batch).unwrap_err();
    assert_eq!(e.at, RECORDS_AT);
    assert!(
        matches!(e.kind, DecodeErrorKind::InvalidRecord(m) if m.contains("length does not match"))
    );
}

#[test]
fn record_length_past_the_batch_end_is_invalid() {
    let mut bytes = hex(APPENDIX_B_HELLO);
    bytes[RECORDS_AT] = 0x7e; // 63 bytes, the batch holds 11
    refresh(&mut bytes);
    let e = all(&decode_batch(&bytes).unwrap()).unwrap_err();
    assert_eq!(e.at, RECORDS_AT);
}

#[test]
fn fewer_records_than_records_count_is_invalid() {
    let mut bytes = hex(APPENDIX_B_HELLO);
    bytes[RECORDS_COUNT_AT + 3] = 2;
    refresh(&mut bytes);
    let batch = decode_batch(&bytes).unwrap();
    let mut it = batch.records();
    assert!(it.next().unwrap().is_ok());
    let e = it.next().unwrap().unwrap_err();
    assert_eq!(e.at, 73);
    assert!(it.next().is_none(), "the iterator ends after an error");
}

#[test]
fn bytes_after_the_last_record_fail_the_last_record() {
    let mut bytes = hex(APPENDIX_B_HELLO);
    bytes.extend_from_slice(&[0x16, 0, 0]);
    refresh(&mut bytes);
    let batch = decode_batch(&bytes).unwrap();
    let mut it = batch.records();
    let e = it.next().unwrap().unwrap_err();
    assert!(
        matches!(e.kind, DecodeErrorKind::InvalidRecord(m) if m.contains("declared batch size"))
    );
    assert!(it.next().is_none());
    // The same with zero declared records.
    let mut zero = hex(APPENDIX_B_HELLO);
    zero[RECORDS_COUNT_AT + 3] = 0;
    refresh(&mut zero);
    assert!(all(&decode_batch(&zero).unwrap()).is_err());
}

#[test]
fn negative_records_count_and_null_header_keys_are_invalid() {
    let mut bytes = hex(APPENDIX_B_HELLO);
    bytes[RECORDS_COUNT_AT..RECORDS_AT].copy_from_slice(&(-1i32).to_be_bytes());
    refresh(&mut bytes);
    assert!(decode_batch(&bytes).is_err());

    let mut r = hello();
    r.headers = vec![(b"h".to_vec(), None)];
    let mut bytes = encode_batch(&BatchSpec::default(), &[r]).unwrap();
    // Header key length varint (1 -> 0x02) sits 4 bytes before the end: turn it into -1.
    let n = bytes.len();
    assert_eq!(bytes[n - 3], 0x02);
    bytes.splice(n - 3..n - 1, [0x01]);
    bytes[RECORDS_AT] -= 2; // record length minus one byte
    refresh(&mut bytes);
    let e = all(&decode_batch(&bytes).unwrap()).unwrap_err();
    assert!(matches!(e.kind, DecodeErrorKind::InvalidRecord("null header key")), "{e:?}");
}

#[test]
fn emptied_batch_with_no_payload_yields_no_records() {
    let mut bytes = hex(APPENDIX_B_HELLO);
    bytes.truncate(RECORD_BATCH_OVERHEAD);
    bytes[RECORDS_COUNT_AT + 3] = 0;
    bytes[ATTRIBUTES_AT + 1] = Compression::Gzip.id();
    refresh(&mut bytes);
    let batch = decode_batch(&bytes).unwrap();
    assert_eq!(all(&batch).unwrap().len(), 0);
}

#[test]
fn sequences_wrap_past_i32_max() {
    assert_eq!(increment_sequence(i32::MAX, 1), 0);
    assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    assert_eq!(increment_sequence(5, 2), 7);
    assert_eq!(increment_sequence(-1, 2), -1);
}

#[test]
fn legacy_messages_decode_with_their_offsets_and_timestamps() {
    let v0 = legacy::encode_message(Offset(7), 0, 0, 123, Some(b"k"), Some(b"v0"));
    let batch = decode_batch(&v0).unwrap();
    assert_eq!(batch.info().magic, 0);
    assert_eq!(batch.info().timestamp_type, TimestampType::NoTimestampType);
    let r = &all(&batch).unwrap()[0];
    assert_eq!(
        (r.offset, r.timestamp, r.key, r.value),
        (Offset(7), -1, Some(&b"k"[..]), Some(&b"v0"[..]))
    );

    let v1 = legacy::encode_message(Offset(8), 1, 0, 1_600_000_000_000, None, None);
    let batch = decode_batch(&v1).unwrap();
    assert_eq!(batch.info().timestamp_type, TimestampType::CreateTime);
    assert_eq!(batch.info().max_timestamp, 1_600_000_000_000);
    let r = &all(&batch).unwrap()[0];
    assert_eq!((r.offset, r.timestamp, r.key, r.value), (Offset(8), 1_600_000_000_000, None, None));
}

#[test]
fn legacy_crc_mismatch_is_reported_at_byte_12() {
    let mut v1 = legacy::encode_message(Offset(8), 1, 0, 5, None, Some(b"value"));
    let n = v1.len();
    v1[n - 1] ^= 0xff;
    let e = decode_batch(&v1).unwrap_err();
    assert_eq!(e.at, 12);
    assert!(matches!(e.kind, DecodeErrorKind::CrcMismatch { .. }));
}

#[test]
fn legacy_wrappers_yield_inner_messages_with_absolute_offsets() {
    let records = sample_records();
    for magic in [0i8, 1] {
        for c in [Compression::Gzip, Compression::Snappy, Compression::Lz4] {
            let bytes = legacy::encode_wrapper(magic, c, Offset(500), &records, None).unwrap();
            let batch = decode_batch(&bytes).unwrap();
            let info = batch.info();
            assert_eq!((info.base_offset, info.last_offset), (Offset(500), Offset(503)));
            assert_eq!(info.records_count, 4);
            assert_eq!(info.compression, c);
            let out = all(&batch).unwrap();
            let offsets: Vec<i64> = out.iter().map(|r| r.offset.0).collect();
            assert_eq!(offsets, [500, 501, 502, 503], "magic {magic} {}", c.name());
            assert_eq!(out[0].value, Some(&b"hello"[..]));
            let expected_ts = if magic == 0 { -1 } else { records[1].timestamp };
            assert_eq!(out[1].timestamp, expected_ts);
        }
    }
}

#[test]
fn v1_wrapper_offset_is_its_last_inner_offset_and_zero_means_base_zero() {
    // Inner relative offsets 0..3, wrapper at 109: absolute = 109 - 3 + relative.
    let bytes =
        legacy::encode_wrapper(1, Compression::Gzip, Offset(106), &sample_records(), None).unwrap();
    let offsets: Vec<i64> =
        all(&decode_batch(&bytes).unwrap()).unwrap().iter().map(|r| r.offset.0).collect();
    assert_eq!(offsets, [106, 107, 108, 109]);
    let mut zero = bytes.clone();
    set_base_offset(&mut zero, Offset(0)).unwrap();
    let offsets: Vec<i64> =
        all(&decode_batch(&zero).unwrap()).unwrap().iter().map(|r| r.offset.0).collect();
    assert_eq!(offsets, [0, 1, 2, 3]);
}

#[test]
fn v1_log_append_time_wrapper_overrides_inner_timestamps() {
    let bytes =
        legacy::encode_wrapper(1, Compression::Snappy, Offset(0), &sample_records(), Some(77))
            .unwrap();
    let batch = decode_batch(&bytes).unwrap();
    assert_eq!(batch.info().timestamp_type, TimestampType::LogAppendTime);
    assert!(all(&batch).unwrap().iter().all(|r| r.timestamp == 77));
}

#[test]
fn v0_lz4_wrapper_with_kafka_08_header_checksum_decodes() {
    // Kafka before KIP-57 computed HC over the magic bytes too; readers ignore HC for v0.
    let inner = legacy::encode_message(Offset(3), 0, 0, 0, None, Some(b"old"));
    let mut packed = compression::compress(Compression::Lz4, &inner).unwrap();
    packed[6] = packed[6].wrapping_add(1);
    let bytes = legacy::encode_message(Offset(3), 0, Compression::Lz4.id(), 0, None, Some(&packed));
    let batch = decode_batch(&bytes).unwrap();
    let out = all(&batch).unwrap();
    assert_eq!(out[0].value, Some(&b"old"[..]));
    // The same frame in a v1 wrapper is rejected.
    let inner1 = legacy::encode_message(Offset(0), 1, 0, 0, None, Some(b"old"));
    let mut packed1 = compression::compress(Compression::Lz4, &inner1).unwrap();
    packed1[6] = packed1[6].wrapping_add(1);
    let bytes1 =
        legacy::encode_message(Offset(3), 1, Compression::Lz4.id(), 0, None, Some(&packed1));
    assert!(decode_batch(&bytes1).is_err());
}

#[test]
fn legacy_wrappers_with_zstd_or_no_inner_messages_are_invalid() {
    let packed = compression::compress(Compression::Zstd, b"").unwrap();
    let z = legacy::encode_message(Offset(0), 1, Compression::Zstd.id(), 0, None, Some(&packed));
    assert!(matches!(decode_batch(&z).unwrap_err().kind, DecodeErrorKind::InvalidCompression(4)));
    let empty = compression::compress(Compression::Gzip, b"").unwrap();
    let e = legacy::encode_message(Offset(0), 1, Compression::Gzip.id(), 0, None, Some(&empty));
    assert!(matches!(decode_batch(&e).unwrap_err().kind, DecodeErrorKind::InvalidRecord(_)));
}

mod value_records {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The fast path for `append` lines writes exactly what the general record writer
        /// writes, for every value length and offset delta (varints of 1 to 5 bytes).
        #[test]
        fn value_records_match_the_general_encoding(
            value in proptest::collection::vec(any::<u8>(), 0..300),
            long in 0usize..3, offset_delta in prop_oneof![0i32..200, 0i32..i32::MAX],
        ) {
            let value = value.repeat(1 + long * 300);
            let (mut fast, mut general) = (vec![7u8], vec![7u8]);
            write_value_record(&mut fast, offset_delta, &value).unwrap();
            write_record(&mut general, &RecordRef::value_only(&value), offset_delta, 0).unwrap();
            prop_assert_eq!(fast, general);
        }
    }

    /// Splits `lines` as the `append` file does: one value per `\n`-terminated line.
    fn line_values(head: Option<&[u8]>, lines: &[u8]) -> Vec<Vec<u8>> {
        let mut values: Vec<Vec<u8>> = head.map(<[u8]>::to_vec).into_iter().collect();
        let mut parts: Vec<&[u8]> = lines.split(|&b| b == b'\n').collect();
        parts.pop(); // after the last newline: not a line
        values.extend(parts.into_iter().map(<[u8]>::to_vec));
        values
    }

    proptest! {
        /// Lines encoded straight from the written bytes are byte for byte the batches
        /// `encode_batch` writes for the same records, split greedily under the limit: every
        /// batch but the last is full (the next record would not fit), each fits, and every
        /// line is a record in order. Bytes after the last newline are not encoded, and what
        /// was in the buffer before stays.
        #[test]
        fn value_lines_encode_as_encode_batch_does(
            lines in proptest::collection::vec(proptest::collection::vec(1u8..=255, 0..500), 1..40),
            tail in proptest::collection::vec(1u8..=255, 0..5),
            head in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..50)),
            limit in prop_oneof![400usize..2000, Just(1 << 20)],
            log_append_time in any::<bool>(),
        ) {
            let mut bytes = Vec::new();
            for l in &lines {
                bytes.extend(l.iter().map(|&b| if b == b'\n' { b'n' } else { b }));
                bytes.push(b'\n');
            }
            bytes.extend(tail.iter().map(|&b| if b == b'\n' { b'n' } else { b }));
            let spec = BatchSpec {
                default_timestamp: 1_000,
                log_append_time: 1_000,
                timestamp_type: if log_append_time {
                    TimestampType::LogAppendTime
                } else {
                    TimestampType::CreateTime
                },
                ..BatchSpec::default()
            };
            let values = line_values(head.as_deref(), &bytes);
            let records: Vec<RecordRef<'_>> =
                values.iter().map(|v| RecordRef::value_only(v)).collect();
            let mut out = vec![9u8, 9];
            match encode_value_lines_into(&mut out, &spec, head.as_deref(), &bytes, limit) {
                Ok(batches) => {
                    prop_assert_eq!(&out[..2], &[9u8, 9][..]);
                    let mut next = 0;
                    let mut at = 2;
                    for (i, b) in batches.iter().enumerate() {
                        prop_assert_eq!(b.start, at);
                        prop_assert!(b.len <= limit);
                        let chunk = &records[next..next + b.records];
                        let expected = encode_batch(&spec, chunk).unwrap();
                        prop_assert_eq!(&out[b.start..b.start + b.len], &expected[..]);
                        prop_assert_eq!(b.max_timestamp, 1_000);
                        if i + 1 < batches.len() {
                            let one_more = encode_batch(&spec, &records[next..next + b.records + 1]).unwrap();
                            prop_assert!(one_more.len() > limit);
                        }
                        next += b.records;
                        at += b.len;
                    }
                    prop_assert_eq!(next, records.len());
                    prop_assert_eq!(at, out.len());
                }
                Err(LinesError::RecordTooLarge { size }) => {
                    prop_assert_eq!(&out[..], &[9u8, 9][..]);
                    prop_assert!(size > limit);
                    let too_large = records
                        .iter()
                        .any(|r| encode_batch(&spec, std::slice::from_ref(r)).unwrap().len() == size);
                    prop_assert!(too_large);
                }
                Err(LinesError::Invalid(e)) => {
                    prop_assert!(records.is_empty(), "{e}");
                    prop_assert_eq!(&out[..], &[9u8, 9][..]);
                }
            }
        }
    }

    /// A codec is refused (the caller encodes compressed lines the general way), writing
    /// nothing.
    #[test]
    fn value_lines_refuse_a_codec() {
        let spec = BatchSpec { compression: Compression::Lz4, ..BatchSpec::default() };
        let mut out = vec![1u8];
        let r = encode_value_lines_into(&mut out, &spec, None, b"a\n", 1 << 20);
        assert!(matches!(r, Err(LinesError::Invalid(_))));
        assert_eq!(out, [1u8]);
    }

    /// A batch mixing value records with keyed, timestamped and headed ones decodes to
    /// what was encoded: the dispatch picks the fast path only for records it fits.
    #[test]
    fn mixed_batches_round_trip() {
        let headers = vec![(b"h".to_vec(), Some(b"v".to_vec()))];
        let records = [
            RecordRef::value_only(b"plain"),
            RecordRef { key: Some(b"k"), ..RecordRef::value_only(b"keyed") },
            RecordRef { timestamp: 5, ..RecordRef::value_only(b"timed") },
            RecordRef { headers: &headers, ..RecordRef::value_only(b"headed") },
            RecordRef { value: None, ..RecordRef::value_only(b"") },
            RecordRef::value_only(b""),
        ];
        let spec = BatchSpec { default_timestamp: 1_000, ..BatchSpec::default() };
        let bytes = encode_batch(&spec, &records).unwrap();
        let batch = decode_batch(&bytes).unwrap();
        let decoded: Vec<_> = batch.records().collect::<Result<_, _>>().unwrap();
        assert_eq!(decoded.len(), records.len());
        for (d, r) in decoded.iter().zip(&records) {
            assert_eq!(d.key, r.key);
            assert_eq!(d.value, r.value);
            let expected_ts = if r.timestamp == NO_TIMESTAMP { 1_000 } else { r.timestamp };
            assert_eq!(d.timestamp, expected_ts);
            assert_eq!(d.headers.len(), r.headers.len());
        }
    }
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// Runs every decoder entry point over `bytes`, draining record iterators.
    fn exercise(bytes: &[u8]) {
        let _ = peek_entry(bytes);
        let _ = parse_batch_info(bytes);
        let _ = verify_crc(bytes);
        if let Ok(b) = decode_batch(bytes) {
            // Every record or the first error, and the light walk agrees with it exactly.
            let full: Vec<_> = b
                .records()
                .map(|r| r.map(|r| RecordStamp { offset: r.offset, timestamp: r.timestamp }))
                .collect();
            let light: Vec<_> = b.record_stamps().collect();
            assert_eq!(light, full);
            // The value walk: the record values up to the first error, then that error.
            let values: Vec<_> = b.record_values().collect();
            let mut walked = Vec::new();
            let end = b.for_each_value(|v| walked.push(Ok(v)));
            if let Err(e) = end {
                walked.push(Err(e));
            }
            assert_eq!(walked, values);
            let lines: usize = values
                .iter()
                .filter_map(|v| v.as_ref().ok())
                .map(|v| v.value.map_or(0, <[u8]>::len) + 1)
                .sum();
            assert!(lines <= b.records_bytes());
        }
        let mut copy = bytes.to_vec();
        let _ = set_log_append_time(&mut copy, 1);
        let _ = set_partition_leader_epoch(&mut copy, 1);
        let _ = set_base_offset(&mut copy, Offset(1));
    }

    fn valid_entry(kind: u8, compression: Compression) -> Vec<u8> {
        let records = sample_records();
        match kind % 3 {
            0 => {
                encode_batch(&BatchSpec { compression, ..BatchSpec::default() }, &records).unwrap()
            }
            1 => {
                let c =
                    if compression == Compression::Zstd { Compression::None } else { compression };
                if c == Compression::None {
                    legacy::encode_message(Offset(4), 1, 0, 9, Some(b"k"), Some(b"v"))
                } else {
                    legacy::encode_wrapper(1, c, Offset(9), &records, None).unwrap()
                }
            }
            _ => legacy::encode_message(Offset(4), 0, 0, 0, None, Some(b"v0")),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn random_bytes_never_panic_the_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            exercise(&bytes);
        }

        #[test]
        fn random_bytes_behind_a_plausible_header_never_panic(
            magic in 0u8..4, size in 0i32..300, tail in proptest::collection::vec(any::<u8>(), 0..300)
        ) {
            let mut bytes = vec![0u8; 8];
            bytes.extend_from_slice(&size.to_be_bytes());
            bytes.extend_from_slice(&[0, 0, 0, 0, magic]);
            bytes.extend(tail);
            exercise(&bytes);
            if bytes.len() > ATTRIBUTES_AT && magic == 2 {
                let crc = crc32c::crc32c(&bytes[ATTRIBUTES_AT..]);
                bytes[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
                exercise(&bytes);
            }
        }

        #[test]
        fn mutated_valid_entries_never_panic(
            kind in any::<u8>(), codec in 0usize..5,
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
            cut in any::<usize>(), fix_crc in any::<bool>()
        ) {
            let mut bytes = valid_entry(kind, Compression::ALL[codec]);
            for &(i, x) in &flips {
                let n = bytes.len();
                bytes[i % n] ^= x;
            }
            let n = bytes.len();
            bytes.truncate(n - cut % (n / 4 + 1));
            if fix_crc && bytes.len() > ATTRIBUTES_AT {
                if bytes[MAGIC_AT] == 2 {
                    let crc = crc32c::crc32c(&bytes[ATTRIBUTES_AT..]);
                    bytes[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
                } else {
                    let crc = crc32fast::hash(&bytes[16..]);
                    bytes[12..16].copy_from_slice(&crc.to_be_bytes());
                }
            }
            exercise(&bytes);
        }

        #[test]
        fn encoded_batches_always_decode_to_their_records(
            records in proptest::collection::vec(
                (any::<i64>(), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
                 proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
                 proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..8),
                                            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8))), 0..3)),
                1..20),
            codec in 0usize..5, base in 0i64..i64::MAX / 2
        ) {
            let input: Vec<NewRecord> = records
                .into_iter()
                .map(|(timestamp, key, value, headers)| NewRecord { timestamp, key, value, headers })
                .collect();
            let spec = BatchSpec { base_offset: Offset(base), compression: Compression::ALL[codec], ..BatchSpec::default() };
            let bytes = encode_batch(&spec, &input).unwrap();
            let batch = decode_batch(&bytes).unwrap();
            let out: Vec<Record<'_>> = batch.records().collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(out.len(), input.len());
            for (i, (r, n)) in out.iter().zip(&input).enumerate() {
                prop_assert_eq!(r.offset, Offset(base + i as i64));
                prop_assert_eq!(r.timestamp, n.timestamp);
                prop_assert_eq!(r.key, n.key.as_deref());
                prop_assert_eq!(r.value, n.value.as_deref());
                prop_assert_eq!(r.headers.len(), n.headers.len());
            }
        }
    }
}
