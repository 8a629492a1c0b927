//! Per-topic settings in the engine: which topics retention may delete from (known settings,
//! `cleanup.policy`), overrides persisted in `topicfs-topic-config` across reopenings, the
//! layers of a broker's settings, and changes taking effect without reopening.

use std::collections::BTreeMap;
use std::path::Path;

use topicfs::error::Error;
use topicfs::format::Offset;
use topicfs::settings::topic_config::TOPIC_CONFIG_FILE;
use topicfs::source::{ConfigChange, ConfigSource, TopicSource};
use topicfs::storage::{BrokerSettings, CleanupPolicy, LogConfig, LogDirs, SegmentMode};

use crate::log_fixture::{record, small_config};

fn config_with(pairs: &[(&str, &str)]) -> LogConfig {
    let mut c = small_config();
    for (name, value) in pairs {
        c.set(name, value).unwrap();
    }
    c
}

fn set(name: &str, value: &str) -> ConfigChange {
    ConfigChange::Set { name: name.to_string(), value: value.to_string() }
}

/// `records` 100-byte records with timestamps in 1970 appended to `topic` (several segments).
fn fill(d: &LogDirs, topic: &str, records: usize) {
    let log = d.log(topic, 0).unwrap();
    for i in 0..records {
        log.append(&[record(1000 + i as i64, &"x".repeat(100))]).unwrap();
    }
}

fn segment_count(d: &LogDirs, topic: &str) -> usize {
    d.log(topic, 0).unwrap().segment_list().len()
}

/// What `config` shows for one setting: (value, source).
fn shown(d: &LogDirs, topic: &str, name: &str) -> (String, ConfigSource) {
    let entries = d.topic_config(topic).unwrap();
    let e = entries.iter().find(|e| e.name == name).unwrap();
    (e.value.clone().unwrap(), e.source)
}

/// A data dir holding topic `t` (several segments of 1970 records) whose settings topicfs does
/// not know: created by this engine, then its entry removed, as in a copy of a broker's dir.
fn dir_with_unknown_topic(path: &Path) {
    let d = LogDirs::open_dir(
        path,
        config_with(&[("retention.ms", "-1")]),
        Default::default(),
        SegmentMode::Writable,
    )
    .unwrap();
    d.create_topic("t", 1).unwrap();
    fill(&d, "t", 40);
    d.shutdown().unwrap();
    drop(d);
    std::fs::remove_file(path.join(TOPIC_CONFIG_FILE)).unwrap();
}

#[test]
fn a_topic_with_unknown_settings_is_never_deleted_from_by_time_or_size_until_set() {
    let tmp = tempfile::tempdir().unwrap();
    dir_with_unknown_topic(tmp.path());
    let mount = config_with(&[("retention.ms", "1000"), ("retention.bytes", "100")]);
    let d =
        LogDirs::open_dir(tmp.path(), mount, Default::default(), SegmentMode::Writable).unwrap();
    let before = segment_count(&d, "t");
    assert!(before > 3);
    assert!(!d.topic_settings_known("t"));
    assert_eq!(d.enforce_retention().unwrap(), 0);
    assert_eq!(segment_count(&d, "t"), before);
    // An override, even of the policy, keeps them unknown: only MakeKnown (what a
    // `cleanup.policy` line written to `config` sends with it) makes them known.
    d.alter_topic_config("t", &[set("cleanup.policy", "delete")]).unwrap();
    assert!(!d.topic_settings_known("t"));
    assert_eq!(d.enforce_retention().unwrap(), 0);
    d.alter_topic_config("t", &[set("cleanup.policy", "delete"), ConfigChange::MakeKnown]).unwrap();
    assert!(d.topic_settings_known("t"));
    assert!(d.enforce_retention().unwrap() > 0);
    assert_eq!(segment_count(&d, "t"), 1);
}

/// Issue 44: no change but `MakeKnown` makes unknown settings known. An empty change (what a
/// round trip of `config` used to send) changes nothing and writes nothing; another override
/// is kept marked unknown and applied (rolls), across reopening, with retention still off;
/// `MakeKnown` makes the settings known, and that is kept too.
#[test]
fn only_make_known_makes_unknown_settings_known_and_it_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    dir_with_unknown_topic(tmp.path());
    let file = tmp.path().join(TOPIC_CONFIG_FILE);
    let mount = config_with(&[("retention.ms", "1000")]);
    let d = LogDirs::open_dir(tmp.path(), mount.clone(), Default::default(), SegmentMode::Writable)
        .unwrap();
    d.alter_topic_config("t", &[]).unwrap();
    assert!(!d.topic_settings_known("t"));
    assert!(!file.exists(), "an empty change writes nothing");
    d.alter_topic_config("t", &[set("segment.bytes", "5000")]).unwrap();
    assert!(!d.topic_settings_known("t"));
    assert_eq!(d.log("t", 0).unwrap().config().segment_bytes, 5000, "the override applies");
    let entries = d.topic_config("t").unwrap();
    let applied = |name: &str| entries.iter().find(|e| e.name == name).unwrap().applied;
    assert!(applied("segment.bytes") && !applied("retention.ms") && !applied("cleanup.policy"));
    let segments = segment_count(&d, "t");
    assert_eq!(d.enforce_retention().unwrap(), 0);
    d.shutdown().unwrap();
    drop(d);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.lines().any(|l| l == "t unknown segment.bytes=5000"), "{text}");
    let d = LogDirs::open_dir(tmp.path(), mount.clone(), Default::default(), SegmentMode::Writable)
        .unwrap();
    assert!(!d.topic_settings_known("t"));
    assert_eq!(shown(&d, "t", "segment.bytes"), ("5000".into(), ConfigSource::TopicOverride));
    assert_eq!(d.enforce_retention().unwrap(), 0);
    assert_eq!(segment_count(&d, "t"), segments);
    d.alter_topic_config("t", &[ConfigChange::MakeKnown]).unwrap();
    assert!(d.topic_settings_known("t"));
    d.shutdown().unwrap();
    drop(d);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.lines().any(|l| l == "t segment.bytes=5000"), "{text}");
    let d =
        LogDirs::open_dir(tmp.path(), mount, Default::default(), SegmentMode::Writable).unwrap();
    assert!(d.topic_settings_known("t"));
    assert!(d.enforce_retention().unwrap() > 0);
}

#[test]
fn segments_below_the_log_start_offset_are_deleted_even_with_unknown_settings() {
    let tmp = tempfile::tempdir().unwrap();
    dir_with_unknown_topic(tmp.path());
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap();
    let third = d.log("t", 0).unwrap().segment_list()[2].base_offset();
    d.shutdown().unwrap();
    drop(d);
    // As a DeleteRecords would leave it: the log start offset at the third segment.
    std::fs::write(
        tmp.path().join("log-start-offset-checkpoint"),
        format!("0\n1\nt 0 {}\n", third.0),
    )
    .unwrap();
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap();
    assert!(!d.topic_settings_known("t"));
    assert_eq!(d.enforce_retention().unwrap(), 2, "the two segments below offset {third:?}");
    assert_eq!(d.log("t", 0).unwrap().segment_list()[0].base_offset(), third);
}

#[test]
fn compact_alone_never_deletes_by_time_or_size_and_compact_delete_does() {
    let tmp = tempfile::tempdir().unwrap();
    let mount = config_with(&[
        ("cleanup.policy", "compact"),
        ("retention.ms", "1000"),
        ("retention.bytes", "100"),
    ]);
    assert_eq!(mount.cleanup_policy, CleanupPolicy::COMPACT);
    let d =
        LogDirs::open_dir(tmp.path(), mount, Default::default(), SegmentMode::Writable).unwrap();
    d.create_topic("t", 1).unwrap();
    fill(&d, "t", 40);
    let before = segment_count(&d, "t");
    assert_eq!(d.enforce_retention().unwrap(), 0);
    assert_eq!(segment_count(&d, "t"), before);
    assert_eq!(shown(&d, "t", "cleanup.policy"), ("compact".into(), ConfigSource::MountDefault));
    d.alter_topic_config("t", &[set("cleanup.policy", "compact,delete")]).unwrap();
    assert!(d.enforce_retention().unwrap() > 0);
    assert_eq!(segment_count(&d, "t"), 1);
}

#[test]
fn an_override_survives_reopening_while_mount_defaults_follow_the_new_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let d = LogDirs::open_dir(
        tmp.path(),
        config_with(&[("retention.ms", "-1")]),
        Default::default(),
        SegmentMode::Writable,
    )
    .unwrap();
    for topic in ["kept", "follows"] {
        d.create_topic(topic, 1).unwrap();
        fill(&d, topic, 30);
    }
    d.alter_topic_config("kept", &[set("retention.ms", "-1")]).unwrap();
    d.shutdown().unwrap();
    drop(d);
    let d = LogDirs::open_dir(
        tmp.path(),
        config_with(&[("retention.ms", "1000")]),
        Default::default(),
        SegmentMode::Writable,
    )
    .unwrap();
    assert_eq!(shown(&d, "kept", "retention.ms"), ("-1".into(), ConfigSource::TopicOverride));
    assert_eq!(shown(&d, "follows", "retention.ms"), ("1000".into(), ConfigSource::MountDefault));
    assert_eq!(shown(&d, "follows", "flush.ms").1, ConfigSource::KafkaDefault);
    let kept = segment_count(&d, "kept");
    assert!(d.enforce_retention().unwrap() > 0);
    assert_eq!(segment_count(&d, "kept"), kept, "the override keeps every segment");
    assert_eq!(segment_count(&d, "follows"), 1);
    // Removing the override: the topic follows the mount's default from now on.
    d.alter_topic_config("kept", &[ConfigChange::Remove { name: "retention.ms".into() }]).unwrap();
    assert_eq!(shown(&d, "kept", "retention.ms"), ("1000".into(), ConfigSource::MountDefault));
    assert!(d.enforce_retention().unwrap() > 0);
    assert_eq!(segment_count(&d, "kept"), 1);
}

#[test]
fn settings_take_effect_without_reopening() {
    let tmp = tempfile::tempdir().unwrap();
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap();
    d.create_topic("t", 1).unwrap();
    let log = d.log("t", 0).unwrap();
    log.append(&[record(1, &"x".repeat(200))]).unwrap();
    d.alter_topic_config("t", &[set("max.message.bytes", "150")]).unwrap();
    assert!(matches!(
        log.append(&[record(2, &"x".repeat(200))]),
        Err(Error::RecordTooLarge { .. })
    ));
    d.alter_topic_config(
        "t",
        &[set("max.message.bytes", "100000"), set("segment.bytes", "100000")],
    )
    .unwrap();
    for i in 0..20 {
        log.append(&[record(3 + i, &"x".repeat(200))]).unwrap();
    }
    assert_eq!(log.segment_list().len(), 1, "no roll at the old 1 KiB segment size");
    assert_eq!(log.config().segment_bytes, 100_000);
}

#[test]
fn a_refused_change_changes_nothing_and_a_read_only_dir_refuses_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap();
    d.create_topic("t", 1).unwrap();
    d.alter_topic_config("t", &[set("retention.ms", "5000")]).unwrap();
    let file = tmp.path().join(TOPIC_CONFIG_FILE);
    let text = std::fs::read_to_string(&file).unwrap();
    let before = d.topic_config("t").unwrap();
    for changes in [
        vec![set("retention.bytes", "10"), set("segment.bytes", "1")],
        vec![set("no.such.setting", "1")],
        vec![set("min.compaction.lag.ms", "10"), set("max.compaction.lag.ms", "5")],
    ] {
        let e = d.alter_topic_config("t", &changes).unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL, "{e}");
    }
    assert_eq!(d.topic_config("t").unwrap(), before);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    assert_eq!(d.alter_topic_config("nope", &[]).unwrap_err().errno(), libc::ENOENT);
    d.shutdown().unwrap();
    drop(d);
    let r =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::ReadOnly)
            .unwrap();
    assert_eq!(shown(&r, "t", "retention.ms"), ("5000".into(), ConfigSource::TopicOverride));
    assert_eq!(r.alter_topic_config("t", &[]).unwrap_err().errno(), libc::EROFS);
}

#[test]
fn a_damaged_settings_file_is_left_as_it_is_and_its_topics_count_as_unknown() {
    let tmp = tempfile::tempdir().unwrap();
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap();
    d.create_topic("t", 1).unwrap();
    d.alter_topic_config("t", &[set("retention.ms", "-1")]).unwrap();
    fill(&d, "t", 30);
    d.shutdown().unwrap();
    drop(d);
    let file = tmp.path().join(TOPIC_CONFIG_FILE);
    let damaged =
        std::fs::read_to_string(&file).unwrap().replace("retention.ms=-1", "retention.ms=x");
    std::fs::write(&file, &damaged).unwrap();
    // Writable: the mount comes up; no topic is deleted from on guessed settings, changes fail
    // with EIO naming the file (it is the only copy of the other overrides), new topics work.
    let d = LogDirs::open_dir(
        tmp.path(),
        config_with(&[("retention.ms", "1000")]),
        Default::default(),
        SegmentMode::Writable,
    )
    .unwrap();
    assert!(!d.topic_settings_known("t"));
    let segments = segment_count(&d, "t");
    assert_eq!(d.enforce_retention().unwrap(), 0);
    assert_eq!(segment_count(&d, "t"), segments);
    let e = d.alter_topic_config("t", &[set("retention.ms", "-1")]).unwrap_err();
    assert_eq!(e.errno(), libc::EIO);
    assert!(e.to_string().contains(TOPIC_CONFIG_FILE) && e.to_string().contains("retention.ms"));
    d.create_topic("u", 1).unwrap();
    assert!(!d.topic_settings_known("u"));
    d.shutdown().unwrap();
    drop(d);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), damaged, "left as it was");
    let r =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::ReadOnly)
            .unwrap();
    assert_eq!(shown(&r, "t", "retention.ms").1, ConfigSource::MountDefault);
}

/// What the damaged file's error and the unknown-settings warning advise works: with the file
/// removed (or fixed), the next open takes changes again.
#[test]
fn a_damaged_settings_file_removed_or_fixed_takes_changes_after_reopening() {
    let tmp = tempfile::tempdir().unwrap();
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap();
    d.create_topic("t", 1).unwrap();
    d.alter_topic_config("t", &[set("retention.ms", "-1")]).unwrap();
    d.shutdown().unwrap();
    drop(d);
    let file = tmp.path().join(TOPIC_CONFIG_FILE);
    let good = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, good.replace("retention.ms=-1", "retention.ms=x")).unwrap();
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap();
    assert_eq!(
        d.alter_topic_config("t", &[set("segment.ms", "5")]).unwrap_err().errno(),
        libc::EIO
    );
    // Fixed while open: still refused (the file is read at open only).
    std::fs::write(&file, &good).unwrap();
    let e = d.check_topic_config("t", &[set("segment.ms", "5")]).unwrap_err();
    assert_eq!(e.errno(), libc::EIO);
    d.shutdown().unwrap();
    drop(d);
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap();
    assert!(d.topic_settings_known("t"));
    d.alter_topic_config("t", &[set("segment.ms", "5")]).unwrap();
    assert_eq!(shown(&d, "t", "retention.ms"), ("-1".into(), ConfigSource::TopicOverride));
    d.shutdown().unwrap();
    drop(d);
    // Removed: the overrides are gone, changes work.
    std::fs::write(&file, good.replace("retention.ms=-1", "retention.ms=x")).unwrap();
    std::fs::remove_file(&file).unwrap();
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap();
    assert!(!d.topic_settings_known("t"));
    d.alter_topic_config("t", &[set("cleanup.policy", "delete"), ConfigChange::MakeKnown]).unwrap();
    assert!(d.topic_settings_known("t"));
}

#[test]
fn the_settings_file_is_a_plain_file_at_the_root_written_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap();
    d.create_topic("a.b", 2).unwrap();
    d.alter_topic_config("a.b", &[set("cleanup.policy", "delete,compact")]).unwrap();
    let file = tmp.path().join(TOPIC_CONFIG_FILE);
    assert!(std::fs::symlink_metadata(&file).unwrap().is_file());
    assert!(!tmp.path().join(format!("{TOPIC_CONFIG_FILE}.tmp")).exists());
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.lines().any(|l| l == "a.b cleanup.policy=compact,delete"), "{text}");
    // Nothing but partition directories is a directory at the root (a broker would take any
    // other for a partition and fail the log dir).
    for entry in std::fs::read_dir(tmp.path()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            let name = entry.file_name().into_string().unwrap();
            assert!(name == "a.b-0" || name == "a.b-1", "{name}");
        }
    }
}

#[test]
fn broker_settings_layer_with_their_precedence_and_make_a_topic_known() {
    let tmp = tempfile::tempdir().unwrap();
    dir_with_unknown_topic(tmp.path());
    let d = LogDirs::open_dir(
        tmp.path(),
        config_with(&[("segment.ms", "4444")]),
        Default::default(),
        SegmentMode::Writable,
    )
    .unwrap();
    assert!(!d.topic_settings_known("t"));
    let props = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    d.set_broker_settings(BrokerSettings {
        topics: BTreeMap::from([("t".to_string(), props(&[("retention.bytes", "100")]))]),
        dynamic_defaults: props(&[("retention.ms", "-1"), ("segment.jitter.ms", "7")]),
        static_defaults: props(&[("segment.ms", "5555"), ("flush.ms", "9")]),
    });
    assert!(d.topic_settings_known("t"));
    for (name, value, source) in [
        ("retention.bytes", "100", ConfigSource::BrokerTopic),
        ("retention.ms", "-1", ConfigSource::BrokerDefault),
        ("segment.jitter.ms", "7", ConfigSource::BrokerDefault),
        ("segment.ms", "4444", ConfigSource::MountDefault),
        ("flush.ms", "9", ConfigSource::BrokerStatic),
        ("cleanup.policy", "delete", ConfigSource::KafkaDefault),
    ] {
        assert_eq!(shown(&d, "t", name), (value.to_string(), source), "{name}");
    }
    // The broker's settings decide retention at once.
    assert!(d.enforce_retention().unwrap() > 0);
    assert_eq!(segment_count(&d, "t"), 1);
    // The topic's own override is above the broker's.
    d.alter_topic_config("t", &[set("retention.bytes", "-1")]).unwrap();
    assert_eq!(shown(&d, "t", "retention.bytes"), ("-1".into(), ConfigSource::TopicOverride));
    // Broker settings that vanish leave the topic known through its entry here.
    d.set_broker_settings(BrokerSettings::default());
    assert!(d.topic_settings_known("t"));
    assert!(d.log("t", 0).unwrap().log_start_offset() > Offset(0));
}

#[test]
fn consumer_offsets_keeps_the_brokers_compacted_settings() {
    let tmp = tempfile::tempdir().unwrap();
    let mount = config_with(&[("retention.ms", "1000")]);
    let internal = std::collections::HashMap::from([(
        "__consumer_offsets".to_string(),
        topicfs::storage::groups::offsets_topic_config(&mount),
    )]);
    let d = LogDirs::open_dir(tmp.path(), mount, internal, topicfs::storage::SegmentMode::Writable)
        .unwrap();
    d.create_topic("__consumer_offsets", 1).unwrap();
    assert_eq!(
        shown(&d, "__consumer_offsets", "cleanup.policy"),
        ("compact".into(), ConfigSource::BrokerTopic)
    );
    assert_eq!(
        shown(&d, "__consumer_offsets", "retention.ms"),
        ("-1".into(), ConfigSource::BrokerTopic)
    );
}

#[test]
fn a_mount_default_given_at_kafkas_value_still_ranks_above_server_properties() {
    let tmp = tempfile::tempdir().unwrap();
    let d =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap();
    d.create_topic("t", 1).unwrap();
    let given = BTreeMap::from([("retention.ms".to_string(), "604800000".to_string())]);
    d.set_mount_defaults(given).unwrap();
    d.set_broker_settings(BrokerSettings {
        static_defaults: BTreeMap::from([("retention.ms".to_string(), "3600000".to_string())]),
        ..BrokerSettings::default()
    });
    assert_eq!(shown(&d, "t", "retention.ms"), ("604800000".into(), ConfigSource::MountDefault));
    assert_eq!(d.log("t", 0).unwrap().config().retention_ms, Some(604_800_000));
    // Only what was given is the mount's now: segment.bytes falls to Kafka's default.
    assert_eq!(shown(&d, "t", "segment.bytes").1, ConfigSource::KafkaDefault);
    let bad = BTreeMap::from([("retention.ms".to_string(), "soon".to_string())]);
    assert_eq!(d.set_mount_defaults(bad).unwrap_err().errno(), libc::EINVAL);
    assert_eq!(shown(&d, "t", "retention.ms").1, ConfigSource::MountDefault);
}

#[test]
fn a_settings_file_that_is_not_a_regular_file_refuses_a_writable_open() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join(TOPIC_CONFIG_FILE)).unwrap();
    let e =
        LogDirs::open_dir(tmp.path(), small_config(), Default::default(), SegmentMode::Writable)
            .unwrap_err()
            .to_string();
    assert!(e.contains(TOPIC_CONFIG_FILE), "{e}");
    assert!(tmp.path().join(TOPIC_CONFIG_FILE).is_dir(), "left as it was");
}
