use super::*;
use crate::log_dir::KAFKA_MAX_PARTITIONS;
use topicfs_format::{NO_TIMESTAMP, NewRecord, Offset};

fn record(value: &str) -> NewRecord {
    NewRecord {
        timestamp: NO_TIMESTAMP,
        key: None,
        value: Some(value.as_bytes().to_vec()),
        headers: Vec::new(),
    }
}

fn given(paths: &[PathBuf]) -> Vec<(String, PathBuf)> {
    paths.iter().map(|p| (p.display().to_string(), p.clone())).collect()
}

fn open(paths: &[PathBuf], mode: SegmentMode) -> Result<LogDirs> {
    LogDirs::open(&given(paths), LogConfig::default(), HashMap::new(), mode)
}

fn three(tmp: &Path) -> Vec<PathBuf> {
    ["a", "b", "c"].iter().map(|n| tmp.join(n)).collect()
}

fn checkpoint(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

fn partitions_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| parse_partition_dir(n).is_some())
        .collect();
    names.sort();
    names
}

#[test]
fn new_partitions_go_to_the_dir_with_fewest_and_each_dir_checkpoints_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = three(tmp.path());
    let dirs = open(&paths, SegmentMode::Writable).unwrap();
    // Empty dirs tie: log.dirs order, one each, round and round.
    dirs.create_topic("t", 4).unwrap();
    assert_eq!(partitions_in(&paths[0]), ["t-0", "t-3"]);
    assert_eq!(partitions_in(&paths[1]), ["t-1"]);
    assert_eq!(partitions_in(&paths[2]), ["t-2"]);
    // b and c hold one each, a two: the next goes to b, then c.
    dirs.create_partition("t", 4).unwrap();
    dirs.create_topic("u", 1).unwrap();
    assert_eq!(partitions_in(&paths[1]), ["t-1", "t-4"]);
    assert_eq!(partitions_in(&paths[2]), ["t-2", "u-0"]);
    assert_eq!(dirs.partition_numbers("t").unwrap(), [0, 1, 2, 3, 4]);
    assert_eq!(dirs.topic_names(), ["t", "u"]);
    let err = dirs.create_topic("t", 1).unwrap_err();
    assert_eq!(err.errno(), libc::EEXIST);
    let p = dirs.partition("t", 4).unwrap();
    p.append(topicfs_source::Records::Owned(&[record("x"), record("y")])).unwrap();
    dirs.shutdown().unwrap();
    // The same identity in every dir, each with its own directory id only if the first had.
    let meta: Vec<String> = paths.iter().map(|p| checkpoint(p, META_PROPERTIES)).collect();
    let cluster = |m: &str| m.lines().find(|l| l.starts_with("cluster.id=")).map(str::to_string);
    assert!(cluster(&meta[0]).is_some());
    assert!(meta.iter().all(|m| cluster(m) == cluster(&meta[0])), "{meta:?}");
    // Checkpoints per dir, for its partitions only.
    let b = checkpoint(&paths[1], "recovery-point-offset-checkpoint");
    assert!(b.contains("t 1 0") && b.contains("t 4 2"), "{b}");
    assert!(!b.contains("t 0 ") && !b.contains("u 0"), "{b}");
    for p in &paths {
        assert!(p.join(".kafka_cleanshutdown").exists(), "{}", p.display());
    }
    // Read back through a new mount of the three.
    let dirs = open(&paths, SegmentMode::ReadOnly).unwrap();
    let summary = dirs.partition("t", 4).unwrap().summary().unwrap();
    assert_eq!(summary.log_end_offset, Offset(2));
}

#[test]
fn dirs_of_two_brokers_are_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = three(tmp.path());
    for (p, node) in paths.iter().zip(["1", "1", "2"]) {
        std::fs::create_dir_all(p).unwrap();
        std::fs::write(
            p.join(META_PROPERTIES),
            format!("version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id={node}\n"),
        )
        .unwrap();
    }
    let err = open(&paths, SegmentMode::Writable).unwrap_err().to_string();
    assert!(err.contains("c/meta.properties has node id 2"), "{err}");
    assert!(err.contains("a/meta.properties has node id 1"), "{err}");
    for p in &paths {
        assert!(!p.join(".lock").exists(), "nothing written in {}", p.display());
    }
}

#[test]
fn a_partition_in_two_dirs_is_served_by_neither_and_both_copies_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = three(tmp.path());
    {
        let a = open(&[paths[0].to_path_buf()], SegmentMode::Writable).unwrap();
        a.create_topic("t", 2).unwrap();
        a.log("t", 1).unwrap().append(&[record("in a")]).unwrap();
        a.shutdown().unwrap();
        let meta = std::fs::read_to_string(paths[0].join(META_PROPERTIES)).unwrap();
        let b = open(&[paths[1].to_path_buf()], SegmentMode::Writable).unwrap();
        b.create_topic("t", 2).unwrap();
        b.shutdown().unwrap();
        // One broker: b gets a's identity, and only t-1 stays in both.
        std::fs::write(paths[1].join(META_PROPERTIES), meta).unwrap();
        std::fs::remove_dir_all(paths[1].join("t-0")).unwrap();
    }
    let before_a = checkpoint(&paths[0], "recovery-point-offset-checkpoint");
    assert!(before_a.contains("t 1 1"), "{before_a}");
    let dirs = open(&paths, SegmentMode::Writable).unwrap();
    assert_eq!(dirs.partition_numbers("t").unwrap(), [0]);
    assert_eq!(dirs.partition("t", 1).err().map(|e| e.errno()), Some(libc::ENOENT));
    let report = dirs.log_dirs();
    assert_eq!(report.duplicates.len(), 1);
    assert_eq!(report.duplicates[0].0, "t");
    assert_eq!(report.duplicates[0].2, vec![paths[0].clone(), paths[1].clone()]);
    // Adding partition 1 again is refused: it exists, twice.
    assert_eq!(dirs.create_partition("t", 1).unwrap_err().errno(), libc::EEXIST);
    dirs.shutdown().unwrap();
    // Neither copy touched; a's checkpoint entry for it kept.
    let after_a = checkpoint(&paths[0], "recovery-point-offset-checkpoint");
    assert!(after_a.contains("t 1 1"), "{after_a}");
    assert!(paths[0].join("t-1").is_dir() && paths[1].join("t-1").is_dir());
}

#[test]
fn a_future_replica_is_not_served_and_counts_for_placement() {
    let tmp = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = three(tmp.path()).into_iter().take(2).collect();
    {
        let a = open(&[paths[0].to_path_buf()], SegmentMode::Writable).unwrap();
        a.create_topic("t", 1).unwrap();
        a.log("t", 0).unwrap().append(&[record("current")]).unwrap();
        a.shutdown().unwrap();
        let meta = std::fs::read_to_string(paths[0].join(META_PROPERTIES)).unwrap();
        std::fs::create_dir_all(paths[1].join("t-0.0123456789abcdef0123456789abcdef-future"))
            .unwrap();
        std::fs::write(paths[1].join(META_PROPERTIES), meta).unwrap();
    }
    let dirs = open(&paths, SegmentMode::Writable).unwrap();
    assert_eq!(dirs.topic_names(), ["t"]);
    let summary = dirs.partition("t", 0).unwrap().summary().unwrap();
    assert_eq!(summary.log_end_offset, Offset(1), "the current replica, in a");
    // a holds t-0, b the future t-0: a tie, so log.dirs order puts the next in a.
    dirs.create_topic("n", 1).unwrap();
    assert!(paths[0].join("n-0").is_dir());
    dirs.shutdown().unwrap();
}

#[test]
fn an_offline_dir_answers_eio_writes_nothing_and_the_others_go_on() {
    let tmp = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = three(tmp.path()).into_iter().take(2).collect();
    let dirs = open(&paths, SegmentMode::Writable).unwrap();
    dirs.create_topic("t", 2).unwrap();
    let in_b = dirs.partition("t", 1).unwrap();
    let b = &dirs.dirs[1];
    b.health.take_offline("test: the disk failed".into());
    let err = in_b.append(topicfs_source::Records::Owned(&[record("x")])).unwrap_err();
    assert_eq!(err.errno(), libc::EIO);
    assert!(err.to_string().contains("is offline (test: the disk failed)"), "{err}");
    assert_eq!(dirs.partition("t", 1).err().map(|e| e.errno()), Some(libc::EIO));
    // Still listed (the partition exists; its disk does not answer).
    assert_eq!(dirs.partition_numbers("t").unwrap(), [0, 1]);
    dirs.partition("t", 0).unwrap().append(topicfs_source::Records::Owned(&[record("y")])).unwrap();
    // New partitions go to the online dirs only.
    dirs.create_topic("u", 2).unwrap();
    assert_eq!(partitions_in(&paths[1]), ["t-1"]);
    let report = dirs.log_dirs();
    assert!(report.dirs[0].offline.is_none());
    assert_eq!(report.dirs[1].offline.as_deref(), Some("test: the disk failed"));
    std::fs::remove_file(paths[1].join("recovery-point-offset-checkpoint")).ok();
    dirs.shutdown().unwrap();
    assert!(paths[0].join(".kafka_cleanshutdown").exists());
    assert!(!paths[1].join(".kafka_cleanshutdown").exists(), "nothing written to b");
    assert!(!paths[1].join("recovery-point-offset-checkpoint").exists());
}

#[test]
fn a_setting_changed_through_one_dir_applies_to_partitions_in_every_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = three(tmp.path());
    let dirs = open(&paths, SegmentMode::Writable).unwrap();
    dirs.create_topic("t", 3).unwrap();
    let change =
        [ConfigChange::Set { name: "retention.ms".to_string(), value: "12345".to_string() }];
    dirs.alter_topic_config("t", &change).unwrap();
    for d in dirs.dirs() {
        for log in d.logs() {
            assert_eq!(log.config().retention_ms, Some(12345), "{}", d.path().display());
        }
    }
    let file = std::fs::read_to_string(paths[0].join("topicfs-topic-config")).unwrap();
    assert!(file.contains("retention.ms=12345"), "{file}");
    assert!(!paths[1].join("topicfs-topic-config").exists());
    dirs.shutdown().unwrap();
    // A later mount of the three reads it from the first dir for all.
    let dirs = open(&paths, SegmentMode::ReadOnly).unwrap();
    let config = dirs.topic_config("t").unwrap();
    let retention = config.iter().find(|e| e.name == "retention.ms").unwrap();
    assert_eq!(retention.value.as_deref(), Some("12345"));
    assert_eq!(dirs.dirs()[2].log("t", 2).unwrap().config().retention_ms, Some(12345));
}

#[test]
fn every_dir_is_locked_and_retention_runs_in_each() {
    let tmp = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = three(tmp.path()).into_iter().take(2).collect();
    let config = LogConfig { segment_bytes: 400, ..LogConfig::default() };
    let dirs =
        LogDirs::open(&given(&paths), config, HashMap::new(), SegmentMode::Writable).unwrap();
    for p in &paths {
        let err = open(&[p.to_path_buf()], SegmentMode::Writable).unwrap_err();
        assert!(matches!(err, Error::Locked(_)), "{} is locked: {err}", p.display());
    }
    dirs.create_topic("t", 2).unwrap();
    let change = [
        ConfigChange::Set { name: "retention.ms".into(), value: "1".into() },
        ConfigChange::Set { name: "segment.bytes".into(), value: "400".into() },
    ];
    dirs.alter_topic_config("t", &change).unwrap();
    let old = NewRecord { timestamp: 1, ..record(&"x".repeat(150)) };
    for p in 0..2 {
        let log = dirs.log("t", p).unwrap();
        for _ in 0..4 {
            log.append(std::slice::from_ref(&old)).unwrap();
        }
        assert!(log.segment_list().len() > 2, "several segments");
    }
    let deleted = dirs.enforce_retention().unwrap();
    assert!(deleted >= 4, "{deleted}");
    for p in 0..2 {
        let log = dirs.log("t", p).unwrap();
        assert_eq!(log.segment_list().len(), 1, "all but the active segment, in both dirs");
    }
    dirs.shutdown().unwrap();
    for p in &paths {
        let points = checkpoint(p, "recovery-point-offset-checkpoint");
        assert!(points.lines().any(|l| l.starts_with("t ")), "{}: {points}", p.display());
    }
}

#[test]
fn space_counts_each_file_system_once() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = three(tmp.path());
    let dirs = open(&paths, SegmentMode::Writable).unwrap();
    // Three dirs on one file system: its space once, as one dir alone shows it.
    let all = TopicSource::space(&dirs).unwrap();
    let one = dirs.dirs()[0].space().unwrap();
    assert_eq!(all.blocks, one.blocks);
    assert_eq!(all.fragment_size, one.fragment_size);
    dirs.shutdown().unwrap();
}

#[test]
fn a_dir_locked_elsewhere_fails_the_open_before_any_dir_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = three(tmp.path()).into_iter().take(2).collect();
    let dirs = open(&paths, SegmentMode::Writable).unwrap();
    dirs.create_topic("t", 2).unwrap();
    dirs.shutdown().unwrap();
    drop(dirs);
    // Another process (here another open) holds b.
    let holder = open(&[paths[1].to_path_buf()], SegmentMode::Writable).unwrap();
    let err = open(&paths, SegmentMode::Writable).unwrap_err();
    assert!(matches!(err, Error::Locked(ref p) if p == &paths[1]), "{err}");
    // a was not opened: its clean-shutdown marker is still there (an open removes it first).
    assert!(paths[0].join(".kafka_cleanshutdown").exists());
    holder.shutdown().unwrap();
    drop(holder);
    open(&paths, SegmentMode::Writable).unwrap().shutdown().unwrap();
}

fn keyed(key: &str, value: &str) -> NewRecord {
    NewRecord { key: Some(key.as_bytes().to_vec()), ..record(value) }
}

/// Every file under `dir` with its length, mtime and bytes: equal before and after when
/// nothing in the dir was written.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u64, std::time::SystemTime, Vec<u8>)> {
    let mut files = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                todo.push(path.clone());
            }
            let bytes = if meta.is_file() { std::fs::read(&path).unwrap() } else { Vec::new() };
            files.insert(path, (meta.len(), meta.modified().unwrap(), bytes));
        }
    }
    files
}

#[test]
fn an_offline_dir_answers_eio_to_keys_spans_transactions_and_groups_touching_nothing() {
    use crate::groups::LocalGroupStore;
    use topicfs_format::groups::{CONSUMER_OFFSETS_TOPIC, offsets_partition_for};
    use topicfs_source::GroupStore;
    let tmp = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = three(tmp.path()).into_iter().take(2).collect();
    let config = LogConfig { segment_bytes: 400, ..LogConfig::default() };
    let dirs = Arc::new(
        LogDirs::open(&given(&paths), config, HashMap::new(), SegmentMode::Writable).unwrap(),
    );
    // Empty dirs: partition 0 in a, 1 in b, for both topics.
    dirs.create_topic(CONSUMER_OFFSETS_TOPIC, 2).unwrap();
    dirs.create_topic("t", 2).unwrap();
    assert!(paths[1].join("t-1").is_dir() && paths[1].join("__consumer_offsets-1").is_dir());
    let in_b = dirs.partition("t", 1).unwrap();
    for i in 0..12 {
        let r = keyed(&format!("k{}", i % 3), &"v".repeat(60));
        in_b.append(topicfs_source::Records::Owned(&[r])).unwrap();
    }
    let groups = LocalGroupStore::new(Arc::clone(&dirs));
    let group = (0..).map(|n| format!("g{n}")).find(|g| offsets_partition_for(g, 2) == 1).unwrap();
    groups.commit(&group, "t", &[(1, Offset(3))]).unwrap();
    // Online, each answers; the capabilities are taken now, before the dir goes offline.
    let keys = in_b.key_index().unwrap();
    assert_eq!(keys.key_hits(Some(b"k1"), Offset(0)).unwrap().hits.len(), 4);
    let listing = keys.listing().unwrap();
    let spans = in_b.span_store().unwrap();
    let start = in_b.seek(Offset(0)).unwrap();
    assert!(spans.sealed_span_at(&start).is_some(), "the first segment is sealed");
    let files = in_b.segment_files().unwrap();
    let first = files.segments().unwrap()[0].base_offset;
    let log_file = topicfs_source::SegmentFileKind::Log;
    assert!(files.read_segment_file(first, log_file, 0, &mut [0u8; 8]).unwrap() > 0);
    let topicfs_source::Committed::ByView(Some(boundary)) = in_b.committed() else {
        panic!("a local log's view decides what is committed, from its boundary state")
    };
    boundary.state_at_boundary().unwrap();
    assert_eq!(groups.committed(&group, "t").unwrap()[&1].offset, Offset(3));

    dirs.dirs[1].health.take_offline("test: the disk failed".into());
    let before = snapshot(&paths[1]);
    let eio = |r: std::result::Result<(), Error>, what: &str| {
        let err = r.expect_err(what);
        assert_eq!(err.errno(), libc::EIO, "{what}: {err}");
        assert!(err.to_string().contains("is offline (test: the disk failed)"), "{what}: {err}");
    };
    // by-key/ and latest/ (the key index), through handles taken before and after.
    eio(keys.key_hits(Some(b"k1"), Offset(0)).map(drop), "key_hits");
    eio(keys.keys_named(1, 2).map(drop), "keys_named");
    eio(keys.listing().map(drop), "listing");
    let mut listing = listing;
    eio(listing.next_key().map(drop), "a listing begun before");
    let again = in_b.key_index().unwrap();
    eio(again.key_hits(None, Offset(0)).map(drop), "key_hits of a new handle");
    // Spans: nothing found, nothing kept.
    assert!(!spans.keeps_summaries());
    assert!(spans.sealed_span_at(&start).is_none());
    // Segment files (MNT/@segments, passthrough): listings and bytes.
    eio(files.segments().map(drop), "segments");
    eio(files.segment_summary(first).map(drop), "segment_summary");
    eio(files.read_segment_file(first, log_file, 0, &mut [0u8; 8]).map(drop), "segment bytes");
    eio(files.sealed_segment_file(first, log_file).map(drop), "sealed_segment_file");
    eio(files.repaired_segment_files(first).map(drop), "repaired_segment_files");
    eio(files.file_problems().map(drop), "file_problems");
    // The partition itself, through a handle taken before.
    eio(in_b.summary().map(drop), "summary");
    eio(in_b.read(&start, 1 << 10, topicfs_source::ReadMode::Batches).map(drop), "read");
    // read_committed's boundary state.
    eio(boundary.state_at_boundary().map(drop), "state_at_boundary");
    // Groups whose __consumer_offsets partition is in b: reads and commits.
    eio(groups.committed(&group, "t").map(drop), "committed");
    eio(groups.groups("t").map(drop), "groups");
    eio(groups.commit(&group, "t", &[(1, Offset(5))]), "commit");
    assert_eq!(snapshot(&paths[1]), before, "nothing written in b");
    dirs.shutdown().unwrap();
}

fn reversed(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths.iter().rev().cloned().collect()
}

fn retention_ms(dirs: &LogDirs, topic: &str) -> Option<(String, topicfs_source::ConfigSource)> {
    let config = TopicSource::topic_config(dirs, topic).unwrap();
    let e = config.into_iter().find(|e| e.name == "retention.ms").unwrap();
    Some((e.value?, e.source))
}

fn known(dirs: &LogDirs, topic: &str) -> bool {
    dirs.topic_settings_known(topic)
}

/// Sets `topic`'s retention.ms and states its settings (`ConfigChange::MakeKnown`, what a
/// written `cleanup.policy` line of `config` sends).
fn set_retention(dirs: &LogDirs, topic: &str, ms: &str) -> Result<()> {
    let change = [
        ConfigChange::Set { name: "retention.ms".into(), value: ms.into() },
        ConfigChange::MakeKnown,
    ];
    TopicSource::alter_topic_config(dirs, topic, &change)
}

const SETTINGS: &str = "topicfs-topic-config";

#[test]
fn the_topics_settings_are_the_same_whatever_the_order_of_the_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = three(tmp.path());
    // Given c,b,a, none holding the file: it goes to a (first by path), not to c.
    let dirs = open(&reversed(&paths), SegmentMode::Writable).unwrap();
    dirs.create_topic("t", 3).unwrap();
    set_retention(&dirs, "t", "12345").unwrap();
    dirs.shutdown().unwrap();
    drop(dirs);
    let has_file: Vec<bool> = paths.iter().map(|p| p.join(SETTINGS).exists()).collect();
    assert_eq!(has_file, [true, false, false]);
    // A topic of the dirs with no entry (a broker's): its settings are unknown.
    {
        let lone = tmp.path().join("lone");
        let d = open(&[lone.to_path_buf()], SegmentMode::Writable).unwrap();
        d.create_topic("u", 1).unwrap();
        d.shutdown().unwrap();
        drop(d);
        std::fs::rename(lone.join("u-0"), paths[1].join("u-0")).unwrap();
    }
    let mut seen = Vec::new();
    let rotated = vec![paths[1].clone(), paths[2].clone(), paths[0].clone()];
    for order in [paths.clone(), reversed(&paths), rotated] {
        for mode in [SegmentMode::ReadOnly, SegmentMode::Writable] {
            let dirs = open(&order, mode).unwrap();
            let state = (
                TopicSource::topic_config(&dirs, "t").unwrap(),
                TopicSource::topic_config(&dirs, "u").unwrap(),
                known(&dirs, "t"),
                known(&dirs, "u"),
            );
            assert!(state.2 && !state.3, "{order:?}: t known, u not");
            assert_eq!(
                retention_ms(&dirs, "t"),
                Some(("12345".into(), topicfs_source::ConfigSource::TopicOverride))
            );
            seen.push(state);
            dirs.shutdown().unwrap();
        }
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]), "the same in every order");
    // A change made with the dirs in another order goes to the same file.
    let dirs = open(&reversed(&paths), SegmentMode::Writable).unwrap();
    set_retention(&dirs, "u", "777").unwrap();
    assert!(known(&dirs, "u"));
    dirs.shutdown().unwrap();
    let has_file: Vec<bool> = paths.iter().map(|p| p.join(SETTINGS).exists()).collect();
    assert_eq!(has_file, [true, false, false]);
    let dirs = open(&paths, SegmentMode::ReadOnly).unwrap();
    assert_eq!(retention_ms(&dirs, "u").unwrap().0, "777");
}

#[test]
fn the_overrides_file_stays_in_the_dir_holding_it_and_an_offline_one_refuses_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = three(tmp.path());
    let dirs = open(&paths, SegmentMode::Writable).unwrap();
    dirs.create_topic("t", 3).unwrap();
    dirs.shutdown().unwrap();
    drop(dirs);
    // Moved to c (as an older topicfs given c first would have kept it): c stays its home.
    std::fs::rename(paths[0].join(SETTINGS), paths[2].join(SETTINGS)).unwrap();
    let dirs = open(&paths, SegmentMode::Writable).unwrap();
    assert!(known(&dirs, "t"));
    set_retention(&dirs, "t", "4242").unwrap();
    assert!(!paths[0].join(SETTINGS).exists());
    assert!(checkpoint(&paths[2], SETTINGS).contains("retention.ms=4242"));
    // c offline: changes fail with EIO naming it; what was loaded is still shown and used.
    dirs.dirs[2].health.take_offline("test: the disk failed".into());
    let before = checkpoint(&paths[2], SETTINGS);
    let err = set_retention(&dirs, "t", "1").unwrap_err();
    assert_eq!(err.errno(), libc::EIO);
    assert!(err.to_string().contains(&format!("{} is offline", paths[2].display())), "{err}");
    assert_eq!(retention_ms(&dirs, "t").unwrap().0, "4242");
    assert!(known(&dirs, "t"));
    assert_eq!(dirs.dirs()[0].log("t", 0).unwrap().config().retention_ms, Some(4242));
    // A new topic is made, its settings unknown (no entry can be written).
    dirs.create_topic("n", 2).unwrap();
    assert!(!known(&dirs, "n"));
    assert_eq!(checkpoint(&paths[2], SETTINGS), before);
    dirs.shutdown().unwrap();
}

#[test]
fn two_identical_overrides_files_are_one_and_two_that_differ_are_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = three(tmp.path()).into_iter().take(2).collect();
    let dirs = open(&paths, SegmentMode::Writable).unwrap();
    dirs.create_topic("t", 2).unwrap();
    set_retention(&dirs, "t", "12345").unwrap();
    dirs.shutdown().unwrap();
    drop(dirs);
    let text = checkpoint(&paths[0], SETTINGS);
    std::fs::write(paths[1].join(SETTINGS), &text).unwrap();
    // The same bytes: one is used; a read-only mount leaves the other, a writable one removes it.
    let dirs = open(&reversed(&paths), SegmentMode::ReadOnly).unwrap();
    assert_eq!(retention_ms(&dirs, "t").unwrap().0, "12345");
    drop(dirs);
    assert_eq!(checkpoint(&paths[1], SETTINGS), text);
    let dirs = open(&reversed(&paths), SegmentMode::Writable).unwrap();
    assert!(!paths[1].join(SETTINGS).exists(), "the copy is removed");
    set_retention(&dirs, "t", "999").unwrap();
    dirs.shutdown().unwrap();
    drop(dirs);
    assert!(checkpoint(&paths[0], SETTINGS).contains("retention.ms=999"));
    assert!(!paths[1].join(SETTINGS).exists());
    // Two that differ: damage. Every topic unknown, changes refused naming both files, both
    // files kept as they are, in either order.
    std::fs::write(paths[1].join(SETTINGS), &text).unwrap();
    let kept = checkpoint(&paths[0], SETTINGS);
    for (n, order) in [paths.clone(), reversed(&paths)].into_iter().enumerate() {
        for mode in [SegmentMode::Writable, SegmentMode::ReadOnly] {
            let dirs = open(&order, mode).unwrap();
            assert!(!known(&dirs, "t"), "{order:?}");
            assert!(!dirs.log("t", 1).unwrap().settings_known());
            let (_, source) = retention_ms(&dirs, "t").unwrap();
            assert_ne!(source, topicfs_source::ConfigSource::TopicOverride);
            if mode == SegmentMode::Writable {
                let err = set_retention(&dirs, "t", "1").unwrap_err();
                assert_eq!(err.errno(), libc::EIO, "{err}");
                let msg = err.to_string();
                for p in &paths {
                    assert!(msg.contains(&p.join(SETTINGS).display().to_string()), "{msg}");
                }
                // A new topic gets no entry either (the files are not replaced).
                let new = format!("n{n}");
                dirs.create_topic(&new, 1).unwrap();
                assert!(!known(&dirs, &new));
                dirs.shutdown().unwrap();
            }
        }
        assert_eq!(checkpoint(&paths[0], SETTINGS), kept);
        assert_eq!(checkpoint(&paths[1], SETTINGS), text);
    }
}

/// The directories under `path`, sorted.
fn dirs_in(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| path.join(n).is_dir())
        .collect();
    names.sort();
    names
}

#[test]
fn create_topic_refuses_a_colliding_name_or_too_many_partitions_before_creating_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = open(&[tmp.path().to_path_buf()], SegmentMode::Writable).unwrap();
    dir.create_topic("a.b", 1).unwrap();
    let err = dir.create_topic("a_b", 1).unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL);
    assert!(err.to_string().contains("existing topic \"a.b\""), "{err}");
    // u32::MAX partitions (`--partitions 4294967295`): refused at once, not created one by
    // one until killed.
    let err = dir.create_topic("big", u32::MAX).unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL);
    assert!(err.to_string().contains("at most 2147483647"), "{err}");
    let err = dir.create_partition("a.b", KAFKA_MAX_PARTITIONS).unwrap_err();
    assert_eq!(err.errno(), libc::EINVAL);
    assert_eq!(dirs_in(tmp.path()), ["a.b-0"]);
    assert_eq!(dir.topic_names(), ["a.b"]);
}

#[test]
fn a_topic_creation_failing_at_one_partition_removes_the_ones_made_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = open(&[tmp.path().to_path_buf()], SegmentMode::Writable).unwrap();
    // Partition 2's directory cannot be made: a file holds its name.
    std::fs::write(tmp.path().join("t-2"), "in the way").unwrap();
    assert!(dir.create_topic("t", 4).is_err());
    assert!(dirs_in(tmp.path()).is_empty(), "{:?}", dirs_in(tmp.path()));
    assert!(dir.partition_numbers("t").is_err());
    std::fs::remove_file(tmp.path().join("t-2")).unwrap();
    dir.create_topic("t", 4).unwrap();
    assert_eq!(dir.partition_numbers("t").unwrap(), [0, 1, 2, 3]);
}

#[test]
fn a_creation_after_the_shutdown_is_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = open(&[tmp.path().to_path_buf()], SegmentMode::Writable).unwrap();
    dirs.shutdown().unwrap();
    let before = snapshot(tmp.path());
    assert_eq!(dirs.create_topic("t", 1).unwrap_err().errno(), libc::ESTALE);
    assert_eq!(snapshot(tmp.path()), before, "no settings entry, no partition");
}
