use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;
use topicfs_format::metadata_record::encode::{
    encode_metadata_record, encode_snapshot_footer, encode_snapshot_header,
};
use topicfs_format::metadata_record::{MetadataRecord, RESOURCE_BROKER, RESOURCE_TOPIC, TopicId};
use topicfs_format::{BatchSpec, NewRecord, Offset, encode_batch};

const T0: i64 = 1_767_225_600_000;

fn id(n: u8) -> TopicId {
    [n; 16]
}

fn topic(name: &str, n: u8) -> MetadataRecord {
    MetadataRecord::Topic { name: name.into(), topic_id: id(n) }
}

fn remove(n: u8) -> MetadataRecord {
    MetadataRecord::RemoveTopic { topic_id: id(n) }
}

fn config(resource_type: i8, resource: &str, name: &str, value: Option<&str>) -> MetadataRecord {
    MetadataRecord::Config {
        resource_type,
        resource_name: resource.into(),
        name: name.into(),
        value: value.map(str::to_string),
    }
}

fn topic_config(topic: &str, name: &str, value: Option<&str>) -> MetadataRecord {
    config(RESOURCE_TOPIC, topic, name, value)
}

fn broker_config(broker: &str, name: &str, value: Option<&str>) -> MetadataRecord {
    config(RESOURCE_BROKER, broker, name, value)
}

/// One data batch of metadata records at `base`.
fn batch(base: i64, records: &[MetadataRecord]) -> Vec<u8> {
    let records: Vec<NewRecord> = records
        .iter()
        .map(|r| NewRecord {
            timestamp: T0,
            key: None,
            value: Some(encode_metadata_record(r)),
            headers: Vec::new(),
        })
        .collect();
    encode_batch(&BatchSpec { base_offset: Offset(base), ..BatchSpec::default() }, &records)
        .unwrap()
}

/// One control batch of one control record of type `kind` at `base`.
fn control(base: i64, kind: i16, value: Vec<u8>) -> Vec<u8> {
    let mut key = 0i16.to_be_bytes().to_vec();
    key.extend_from_slice(&kind.to_be_bytes());
    let record =
        NewRecord { timestamp: T0, key: Some(key), value: Some(value), headers: Vec::new() };
    let spec = BatchSpec { base_offset: Offset(base), is_control: true, ..BatchSpec::default() };
    encode_batch(&spec, &[record]).unwrap()
}

/// A whole snapshot file: header, `records` in one batch, footer.
fn snapshot(records: &[MetadataRecord]) -> Vec<u8> {
    let n = records.len() as i64;
    let mut out = control(0, 3, encode_snapshot_header(T0));
    out.extend(batch(1, records));
    out.extend(control(1 + n, 4, encode_snapshot_footer()));
    out
}

struct Dir {
    _tmp: tempfile::TempDir,
    data: PathBuf,
}

impl Dir {
    fn new() -> Dir {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().to_path_buf();
        std::fs::create_dir(data.join(CLUSTER_METADATA_DIR)).unwrap();
        Dir { _tmp: tmp, data }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.data.join(CLUSTER_METADATA_DIR).join(name)
    }

    fn write(&self, name: &str, bytes: &[u8]) {
        std::fs::write(self.path(name), bytes).unwrap();
    }

    fn append(&self, name: &str, bytes: &[u8]) {
        let mut all = crate::open::read_regular(&self.path(name)).unwrap();
        all.extend_from_slice(bytes);
        self.write(name, &all);
    }

    fn read(&self, node_id: Option<i32>) -> Result<Option<ClusterMetadataConfigs>> {
        read_cluster_metadata(&self.data, node_id)
    }
}

fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn topics(entries: &[(&str, &[(&str, &str)])]) -> BTreeMap<String, BTreeMap<String, String>> {
    entries.iter().map(|(t, s)| (t.to_string(), settings(s))).collect()
}

const LOG0: &str = "00000000000000000000.log";

#[test]
fn no_metadata_directory_is_none() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(read_cluster_metadata(tmp.path(), Some(1)).unwrap(), None);
    assert!(ClusterMetadataReader::open(tmp.path(), None).unwrap().is_none());
}

#[test]
fn an_empty_metadata_directory_knows_no_topics() {
    let dir = Dir::new();
    assert_eq!(dir.read(Some(1)).unwrap(), Some(ClusterMetadataConfigs::default()));
}

#[test]
fn topic_records_and_config_records_give_each_topics_overrides_by_name() {
    let dir = Dir::new();
    let mut log = batch(0, &[topic("orders", 1), topic("compacted", 2)]);
    log.extend(batch(
        2,
        &[
            topic_config("compacted", "cleanup.policy", Some("compact")),
            topic_config("orders", "retention.ms", Some("86400000")),
            topic_config("ghost", "retention.ms", Some("1")),
            config(8, "kafka.server", "TRACE", Some("x")), // BROKER_LOGGER: ignored
        ],
    ));
    dir.write(LOG0, &log);
    let got = dir.read(Some(1)).unwrap().unwrap();
    assert_eq!(
        got.topics,
        topics(&[
            ("compacted", &[("cleanup.policy", "compact")]),
            ("orders", &[("retention.ms", "86400000")])
        ])
    );
    assert!(got.dynamic_defaults.is_empty());
}

#[test]
fn a_config_record_with_a_null_value_deletes_the_setting() {
    let dir = Dir::new();
    let mut log =
        batch(0, &[topic("orders", 1), topic_config("orders", "retention.ms", Some("5"))]);
    log.extend(batch(2, &[topic_config("orders", "retention.bytes", Some("100"))]));
    log.extend(batch(3, &[topic_config("orders", "retention.ms", None)]));
    dir.write(LOG0, &log);
    let got = dir.read(None).unwrap().unwrap();
    assert_eq!(got.topics, topics(&[("orders", &[("retention.bytes", "100")])]));
}

#[test]
fn remove_topic_record_forgets_the_topic_and_its_configs() {
    let dir = Dir::new();
    let mut log = batch(0, &[topic("old", 1), topic_config("old", "retention.ms", Some("1"))]);
    log.extend(batch(2, &[remove(1)]));
    // Created again under the same name with a new id: no configs carried over.
    log.extend(batch(3, &[topic("old", 2)]));
    dir.write(LOG0, &log);
    assert_eq!(dir.read(None).unwrap().unwrap().topics, topics(&[("old", &[])]));
}

#[test]
fn broker_defaults_map_to_topic_names_and_this_brokers_own_win() {
    let dir = Dir::new();
    dir.write(
        LOG0,
        &batch(
            0,
            &[
                broker_config("", "log.retention.ms", Some("1000")),
                broker_config("", "log.cleanup.policy", Some("compact")),
                broker_config("", "num.io.threads", Some("8")),
                broker_config("1", "log.retention.ms", Some("2000")),
                broker_config("2", "log.segment.bytes", Some("999")),
            ],
        ),
    );
    assert_eq!(
        dir.read(Some(1)).unwrap().unwrap().dynamic_defaults,
        settings(&[("retention.ms", "2000"), ("cleanup.policy", "compact")])
    );
    assert_eq!(
        dir.read(Some(2)).unwrap().unwrap().dynamic_defaults,
        settings(&[
            ("retention.ms", "1000"),
            ("cleanup.policy", "compact"),
            ("segment.bytes", "999")
        ])
    );
    assert_eq!(
        dir.read(None).unwrap().unwrap().dynamic_defaults,
        settings(&[("retention.ms", "1000"), ("cleanup.policy", "compact")])
    );
}

#[test]
fn the_newest_snapshot_then_the_log_from_its_end_offset_is_replayed() {
    let dir = Dir::new();
    // An older snapshot that would say otherwise.
    dir.write("00000000000000000002-0000000001.checkpoint", &snapshot(&[topic("stale", 9)]));
    dir.write(
        "00000000000000000005-0000000002.checkpoint",
        &snapshot(&[topic("orders", 1), topic_config("orders", "retention.ms", Some("10"))]),
    );
    // The log from offset 3: offsets 3 and 4 are in the snapshot already, and are skipped even
    // where they disagree with it; 5 and 6 come after it.
    let mut log =
        batch(3, &[topic_config("orders", "retention.ms", Some("skipped")), topic("skipped", 7)]);
    log.extend(batch(5, &[topic_config("orders", "retention.ms", Some("20")), topic("later", 2)]));
    dir.write("00000000000000000003.log", &log);
    let got = dir.read(None).unwrap().unwrap();
    assert_eq!(got.topics, topics(&[("later", &[]), ("orders", &[("retention.ms", "20")])]));
}

#[test]
fn a_batch_straddling_the_snapshot_end_applies_only_its_later_records() {
    let dir = Dir::new();
    dir.write("00000000000000000002-0000000001.checkpoint", &snapshot(&[topic("a", 1)]));
    dir.write(LOG0, &batch(0, &[topic("x", 5), topic("y", 6), topic("b", 2)]));
    assert_eq!(dir.read(None).unwrap().unwrap().topics, topics(&[("a", &[]), ("b", &[])]));
}

#[test]
fn metadata_transactions_apply_at_their_end_and_not_at_all_when_aborted() {
    let dir = Dir::new();
    let mut log = batch(0, &[topic("t", 1)]);
    log.extend(batch(1, &[MetadataRecord::BeginTransaction, topic_config("t", "a", Some("1"))]));
    log.extend(batch(3, &[topic_config("t", "b", Some("2")), MetadataRecord::EndTransaction]));
    log.extend(batch(5, &[MetadataRecord::BeginTransaction, topic_config("t", "c", Some("3"))]));
    log.extend(batch(7, &[MetadataRecord::AbortTransaction]));
    log.extend(batch(8, &[MetadataRecord::BeginTransaction, topic_config("t", "d", Some("4"))]));
    dir.write(LOG0, &log);
    // The last transaction is still open: not applied yet.
    assert_eq!(
        dir.read(None).unwrap().unwrap().topics,
        topics(&[("t", &[("a", "1"), ("b", "2")])])
    );
}

#[test]
fn control_batches_and_unknown_record_types_are_stepped_over() {
    let dir = Dir::new();
    let mut log = control(0, 2, vec![0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 1, 0, 2, 0, 0, 0, 1, 0, 0]);
    log.extend(batch(1, &[MetadataRecord::Other { api_key: 12, version: 0 }, topic("t", 1)]));
    log.extend(batch(3, &[MetadataRecord::Other { api_key: 3, version: 2 }]));
    dir.write(LOG0, &log);
    assert_eq!(dir.read(None).unwrap().unwrap().topics, topics(&[("t", &[])]));
}

#[test]
fn a_record_that_does_not_decode_is_skipped_and_the_rest_applied() {
    let dir = Dir::new();
    let records = vec![
        NewRecord { timestamp: T0, key: None, value: Some(vec![0, 2, 0]), headers: vec![] },
        NewRecord {
            timestamp: T0,
            key: None,
            value: Some(encode_metadata_record(&topic("t", 1))),
            headers: vec![],
        },
    ];
    let mut log = encode_batch(&BatchSpec::default(), &records).unwrap();
    log.extend(batch(2, &[remove(42)])); // an unknown id: skipped
    dir.write(LOG0, &log);
    assert_eq!(dir.read(None).unwrap().unwrap().topics, topics(&[("t", &[])]));
}

#[test]
fn a_torn_last_batch_is_the_end_of_the_log() {
    let dir = Dir::new();
    let mut log = batch(0, &[topic("t", 1)]);
    let whole = log.len();
    log.extend(&batch(1, &[topic("u", 2)])[..30]);
    dir.write(LOG0, &log);
    let mut reader = ClusterMetadataReader::open(&dir.data, None).unwrap().unwrap();
    assert_eq!(reader.configs().topics, topics(&[("t", &[])]));
    // The write completes: the next refresh reads it.
    let mut rest = log[..whole].to_vec();
    rest.extend(batch(1, &[topic("u", 2)]));
    dir.write(LOG0, &rest);
    assert!(reader.refresh().unwrap());
    assert_eq!(reader.configs().topics, topics(&[("t", &[]), ("u", &[])]));
}

#[test]
fn a_damaged_batch_is_an_error_naming_the_file_and_position() {
    let dir = Dir::new();
    let mut log = batch(0, &[topic("t", 1)]);
    let second = log.len();
    log.extend(batch(1, &[topic("u", 2)]));
    log.extend(batch(2, &[topic("v", 3)]));
    let last = log.len() - 1;
    log[last] ^= 0xff; // inside the last batch's records: its CRC no longer matches
    dir.write(LOG0, &log);
    match dir.read(None) {
        Err(Error::Corrupt { file, position, what }) => {
            assert!(file.ends_with(LOG0), "{file:?}");
            assert!(position > second as u64, "{position}");
            assert!(what.contains("CRC"), "{what}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn missing_records_between_the_snapshot_and_the_log_are_an_error() {
    let dir = Dir::new();
    dir.write("00000000000000000002-0000000001.checkpoint", &snapshot(&[topic("a", 1)]));
    dir.write("00000000000000000004.log", &batch(4, &[topic("b", 2)]));
    let err = dir.read(None).unwrap_err();
    assert!(err.to_string().contains("records 2..4 are missing"), "{err}");
}

#[test]
fn a_snapshot_without_its_footer_or_header_is_an_error() {
    let dir = Dir::new();
    let name = "00000000000000000002-0000000001.checkpoint";
    let mut no_footer = control(0, 3, encode_snapshot_header(T0));
    no_footer.extend(batch(1, &[topic("a", 1)]));
    dir.write(name, &no_footer);
    assert!(dir.read(None).unwrap_err().to_string().contains("footer"));
    let mut no_header = batch(0, &[topic("a", 1)]);
    no_header.extend(control(1, 4, encode_snapshot_footer()));
    dir.write(name, &no_header);
    assert!(dir.read(None).unwrap_err().to_string().contains("header"));
    // Partial and deleted snapshots are not read.
    std::fs::rename(dir.path(name), dir.path(&format!("{name}.part"))).unwrap();
    assert_eq!(dir.read(None).unwrap().unwrap(), ClusterMetadataConfigs::default());
}

#[test]
fn refresh_reads_only_new_batches_and_says_whether_anything_changed() {
    let dir = Dir::new();
    dir.write(LOG0, &batch(0, &[topic("t", 1)]));
    let mut reader = ClusterMetadataReader::open(&dir.data, Some(1)).unwrap().unwrap();
    assert!(!reader.refresh().unwrap(), "nothing new");
    dir.append(LOG0, &batch(1, &[topic_config("t", "retention.ms", Some("5"))]));
    assert!(reader.refresh().unwrap());
    assert_eq!(reader.configs().topics, topics(&[("t", &[("retention.ms", "5")])]));
    // A record that changes nothing the configs show.
    dir.append(LOG0, &batch(2, &[MetadataRecord::Other { api_key: 20, version: 0 }]));
    assert!(!reader.refresh().unwrap());
    // A roll: a new segment follows.
    dir.write(
        "00000000000000000003.log",
        &batch(3, &[broker_config("1", "log.retention.ms", Some("7"))]),
    );
    assert!(reader.refresh().unwrap());
    assert_eq!(reader.configs().dynamic_defaults, settings(&[("retention.ms", "7")]));
    assert_eq!(reader.replay.next_offset, 4);
    assert_eq!(reader.replay.resume.map(|r| r.segment), Some(3));
}

#[test]
fn refresh_starts_over_when_the_log_was_truncated_and_written_again() {
    let dir = Dir::new();
    let mut log = batch(0, &[topic("t", 1)]);
    log.extend(batch(1, &[topic_config("t", "retention.ms", Some("uncommitted"))]));
    dir.write(LOG0, &log);
    let mut reader = ClusterMetadataReader::open(&dir.data, None).unwrap().unwrap();
    assert_eq!(reader.configs().topics, topics(&[("t", &[("retention.ms", "uncommitted")])]));
    // The broker truncates offset 1 (the log diverged) and the new leader's offset 1 follows,
    // longer than the old one.
    let mut again = batch(0, &[topic("t", 1)]);
    again.extend(batch(1, &[topic_config("t", "segment.ms", Some("1")), topic("u", 2)]));
    dir.write(LOG0, &again);
    assert!(reader.refresh().unwrap());
    assert_eq!(reader.configs().topics, topics(&[("t", &[("segment.ms", "1")]), ("u", &[])]));
}

#[test]
fn refresh_starts_over_from_a_newer_snapshot_when_the_segments_it_read_are_gone() {
    let dir = Dir::new();
    dir.write(LOG0, &batch(0, &[topic("t", 1), topic_config("t", "a", Some("1"))]));
    let mut reader = ClusterMetadataReader::open(&dir.data, None).unwrap().unwrap();
    // The broker took a snapshot at 4 (including records the reader never saw) and deleted
    // the segment; the log goes on at 4.
    dir.write(
        "00000000000000000004-0000000001.checkpoint",
        &snapshot(&[topic("t", 1), topic_config("t", "a", Some("2")), topic("v", 3)]),
    );
    std::fs::remove_file(dir.path(LOG0)).unwrap();
    dir.write("00000000000000000004.log", &batch(4, &[topic("w", 4)]));
    assert!(reader.refresh().unwrap());
    assert_eq!(reader.configs().topics, topics(&[("t", &[("a", "2")]), ("v", &[]), ("w", &[])]));
}

#[test]
fn refresh_keeps_the_last_good_state_on_damage() {
    let dir = Dir::new();
    dir.write(LOG0, &batch(0, &[topic("t", 1)]));
    let mut reader = ClusterMetadataReader::open(&dir.data, None).unwrap().unwrap();
    let mut bad = batch(1, &[topic("u", 2)]);
    let last = bad.len() - 1;
    bad[last] ^= 1;
    dir.append(LOG0, &bad);
    assert!(matches!(reader.refresh(), Err(Error::Corrupt { .. })));
    assert_eq!(reader.configs().topics, topics(&[("t", &[])]));
    assert_eq!(reader.replay.next_offset, 1);
    assert!(matches!(reader.refresh(), Err(Error::Corrupt { .. })), "still damaged");
    // The broker truncates the damaged batch and writes it again: read from the start.
    let mut fixed = batch(0, &[topic("t", 1)]);
    fixed.extend(batch(1, &[topic("u", 2)]));
    dir.write(LOG0, &fixed);
    assert!(reader.refresh().unwrap());
    assert_eq!(reader.configs().topics, topics(&[("t", &[]), ("u", &[])]));
}

fn any_record() -> impl proptest::strategy::Strategy<Value = MetadataRecord> {
    use proptest::prelude::*;
    let name = || prop::sample::select(vec!["a", "b", "c"]);
    let setting = || prop::sample::select(vec!["retention.ms", "cleanup.policy"]);
    let value = || prop::option::of(prop::sample::select(vec!["1", "2"]));
    prop_oneof![
        (name(), 0u8..4).prop_map(|(n, i)| topic(n, i)),
        (0u8..4).prop_map(remove),
        (name(), setting(), value()).prop_map(|(t, k, v)| topic_config(t, k, v)),
        (prop::sample::select(vec!["", "1", "2"]), value()).prop_map(|(b, v)| broker_config(
            b,
            "log.retention.ms",
            v
        )),
        Just(MetadataRecord::BeginTransaction),
        Just(MetadataRecord::EndTransaction),
        Just(MetadataRecord::AbortTransaction),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// What a reader refreshed after every batch shows is what a fresh read shows.
    #[test]
    fn refreshing_after_each_batch_agrees_with_a_fresh_read(
        batches in proptest::collection::vec(proptest::collection::vec(any_record(), 1..4), 1..12)
    ) {
        let dir = Dir::new();
        dir.write(LOG0, &[]);
        let mut reader = ClusterMetadataReader::open(&dir.data, Some(1)).unwrap().unwrap();
        let mut offset = 0;
        for records in &batches {
            dir.append(LOG0, &batch(offset, records));
            offset += records.len() as i64;
            let before = reader.configs().clone();
            let changed = reader.refresh().unwrap();
            let fresh = dir.read(Some(1)).unwrap().unwrap();
            proptest::prop_assert_eq!(reader.configs(), &fresh);
            proptest::prop_assert_eq!(changed, before != fresh);
        }
    }
}

#[test]
fn snapshot_names_parse_as_kafka_writes_them() {
    assert_eq!(
        parse_snapshot_name("00000000000000000123-0000000004.checkpoint"),
        Some(SnapshotId { end_offset: 123, epoch: 4 })
    );
    for bad in [
        "00000000000000000123-0000000004.checkpoint.part",
        "00000000000000000123-0000000004.checkpoint.deleted",
        "123-4.checkpoint",
        "00000000000000000123.checkpoint",
        "0000000000000000012x-0000000004.checkpoint",
    ] {
        assert_eq!(parse_snapshot_name(bad), None, "{bad}");
    }
}

/// The checked-in fixture (tests/fixtures/kraft-v1, written by an independent Python encoder
/// from Kafka's JSON schemas) gives exactly the settings its manifest lists.
#[test]
fn the_kraft_fixture_gives_the_settings_its_manifest_lists() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/kraft-v1");
    let manifest: serde_json::Value =
        serde_json::from_slice(&crate::open::read_regular(&fixture.join("manifest.json")).unwrap())
            .unwrap();
    let as_map = |v: &serde_json::Value| -> BTreeMap<String, String> {
        v.as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect()
    };
    let node_id = manifest["node_id"].as_i64().unwrap() as i32;
    let got = read_cluster_metadata(&fixture.join("log-dir"), Some(node_id)).unwrap().unwrap();
    let want_topics: BTreeMap<String, BTreeMap<String, String>> = manifest["topics"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(t, s)| (t.clone(), as_map(s)))
        .collect();
    assert_eq!(got.topics, want_topics);
    assert_eq!(got.dynamic_defaults, as_map(&manifest["dynamic_defaults"]));
    // Spot checks of what the fixture is for.
    assert_eq!(got.topics["compacted"]["cleanup.policy"], "compact");
    assert_eq!(got.topics["retained"]["retention.ms"], "-1");
    assert!(!got.topics.contains_key("removed"));
    // Without the node id the broker's own override is not applied.
    let cluster_only = read_cluster_metadata(&fixture.join("log-dir"), None).unwrap().unwrap();
    assert_eq!(cluster_only.dynamic_defaults, as_map(&manifest["cluster_defaults"]));
}

/// The kraft-v1 fixture's files, (name, bytes), sorted by name.
fn fixture_files() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/kraft-v1/log-dir")
        .join(CLUSTER_METADATA_DIR);
    let mut files: Vec<(String, Vec<u8>)> = crate::open::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let bytes = crate::open::read_regular(&dir.join(&name)).unwrap();
            (name, bytes)
        })
        .collect();
    files.sort();
    files
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Flipped bits or a truncation anywhere in the fixture's metadata log: never a panic; the
    /// answer is either settings or damage named by file and a position inside it.
    #[test]
    fn damaged_fixture_files_give_settings_or_an_error_naming_the_damage(
        file in 0usize..16, at in proptest::prelude::any::<proptest::sample::Index>(),
        bits in 1u8..=255, truncate in proptest::prelude::any::<bool>(),
    ) {
        let files = fixture_files();
        let dir = Dir::new();
        let hit = file % files.len();
        for (i, (name, bytes)) in files.iter().enumerate() {
            let mut bytes = bytes.clone();
            if i == hit && !bytes.is_empty() {
                let at = at.index(bytes.len());
                if truncate { bytes.truncate(at) } else { bytes[at] ^= bits }
            }
            dir.write(name, &bytes);
        }
        match dir.read(Some(1)) {
            Ok(configs) => proptest::prop_assert!(configs.is_some()),
            Err(Error::Corrupt { file, position, .. }) => {
                let len = crate::open::read_regular(&file).unwrap().len() as u64;
                proptest::prop_assert!(file.starts_with(dir.path("")));
                proptest::prop_assert!(position <= len, "{position} > {len}");
            }
            Err(other) => proptest::prop_assert!(false, "{other:?}"),
        }
    }
}

#[test]
fn batch_offsets_that_do_not_increase_are_damage_not_records_to_skip() {
    let dir = Dir::new();
    let mut log = batch(0, &[topic("t", 1), topic("u", 2)]);
    // A bit flipped in the second batch's base offset (outside the CRC) sends it back to 1.
    log.extend(batch(1, &[topic_config("t", "cleanup.policy", Some("compact"))]));
    dir.write(LOG0, &log);
    let err = dir.read(None).unwrap_err();
    assert!(err.to_string().contains("do not increase"), "{err}");
}

/// The fixture's metadata log is a partition the engine itself reads as a broker's: a
/// read-only open of its log dir loads `__cluster_metadata-0` from log start 8 to log end 27
/// (the snapshot and `quorum-state` next to it are ignored).
#[test]
fn the_kraft_fixture_is_a_partition_the_engine_reads() {
    let log_dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/kraft-v1/log-dir");
    let mode = crate::SegmentMode::ReadOnly;
    let config = crate::LogConfig::default();
    let dir = crate::LogDirs::open_dir(&log_dir, config, Default::default(), mode).unwrap();
    let log = dir.log("__cluster_metadata", 0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (Offset(8), Offset(27)));
}
