//! Which directories are Kafka log directories, by the names in them: the classification a
//! mount makes before it writes anything into (or serves) a data dir, so that a copy of `/etc`
//! does not get `.lock`, checkpoints and segment files written into it.
//!
//! A directory is a log dir when
//!
//! - it holds `meta.properties` (every broker since 0.10 writes one, and topicfs writes one at
//!   its first writable mount), or
//! - everything at its root is either one of Kafka's root files ([`is_kafka_root_file`]: the
//!   checkpoints, `.lock`, `.kafka_cleanshutdown`, `meta.properties`, and their `.tmp` forms),
//!   a file of topicfs's own (a name starting with [`TOPICFS_FILE_PREFIX`]), the tiered
//!   storage's `remote-log-index-cache` directory, or a directory named like a partition
//!   (`<topic>-<n>`, or the `-delete` / `-future` / `-stray` forms) that holds only files a
//!   broker writes there ([`is_partition_file`]).
//!
//! An empty directory is a new log dir. Anything else is not one: a `dbus-1/` holding
//! `system.conf` is named like partition 1 of topic `dbus`, but a broker never writes
//! `system.conf`. `lost+found` is not accepted either: Kafka's `LogManager` refuses a log dir
//! holding a directory not named like a partition. Pure: names and kinds in, a verdict out; the
//! listing is the caller's (the log engine's `log_dir::classify_data_dir`).

use super::file_name::{parse_partition_dir, parse_segment_file_name, parse_special_dir};

/// Root files whose names start with this are topicfs's own (e.g. its topic settings), and
/// belong in a log dir it wrote.
pub const TOPICFS_FILE_PREFIX: &str = "topicfs-";

/// Files a broker keeps at the root of a log dir (without their `.tmp` form).
pub const KAFKA_ROOT_FILES: &[&str] = &[
    "meta.properties",
    ".lock",
    ".kafka_cleanshutdown",
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
    // KRaft: the bootstrap metadata of a controller's metadata log dir.
    "bootstrap.checkpoint",
];

/// Directories a broker keeps at the root of a log dir that are not partitions: the tiered
/// storage's index cache (`RemoteIndexCache.DIR_NAME`, skipped by `LogManager`).
pub const KAFKA_ROOT_DIRS: &[&str] = &["remote-log-index-cache"];

/// What a name in a directory is (after following symlinks).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// Anything else: FIFO, socket, device, dangling symlink, symlink loop.
    Other,
}

/// One entry at the root of the directory being classified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootEntry {
    pub name: String,
    pub kind: EntryKind,
    /// For a directory named like a partition: the names and kinds inside it. Empty otherwise.
    pub children: Vec<(String, EntryKind)>,
}

/// The verdict on a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Nothing in it: a new log dir.
    Empty,
    /// It holds `meta.properties`.
    MetaProperties,
    /// No `meta.properties`, but only names a broker (or topicfs) writes.
    KafkaNames,
    /// Not a log dir: `entry` (relative to the directory, `dbus-1/system.conf`) is something a
    /// broker never writes there, for the reason `why`.
    Foreign { entry: String, why: &'static str },
}

impl Layout {
    /// Whether a mount may use the directory as a log dir.
    pub fn is_log_dir(&self) -> bool {
        !matches!(self, Layout::Foreign { .. })
    }
}

/// `name` without one trailing `.tmp` (the in-flight form of a file Kafka writes by rename).
fn without_tmp(name: &str) -> &str {
    name.strip_suffix(".tmp").unwrap_or(name)
}

/// Whether `name` is one of Kafka's files at the root of a log dir, or its `.tmp` form.
pub fn is_kafka_root_file(name: &str) -> bool {
    KAFKA_ROOT_FILES.contains(&without_tmp(name))
}

/// Whether `name` is named like a partition directory: `<topic>-<n>`, or
/// `<topic>-<n>.<uuid>-(delete|future|stray)`.
pub fn is_partition_dir_name(name: &str) -> bool {
    parse_partition_dir(name).is_some() || parse_special_dir(name).is_some()
}

/// Whether a broker writes a file named `name` in the partition directory `dir`: a segment's
/// files (`<base>.log`, `.index`, `.timeindex`, `.txnindex`), producer snapshots
/// (`<offset>.snapshot`), each also with `.deleted`, `.cleaned` or `.swap`; `partition.metadata`
/// and `leader-epoch-checkpoint`; and, in the KRaft metadata log (`__cluster_metadata-0`),
/// `quorum-state` and `<offset>-<epoch>.checkpoint` snapshots (also `.part`, `.deleted`).
/// Each also in its `.tmp` form.
pub fn is_partition_file(dir: &str, name: &str) -> bool {
    let name = without_tmp(name);
    if parse_segment_file_name(name).is_some()
        || name == "partition.metadata"
        || name == "leader-epoch-checkpoint"
    {
        return true;
    }
    let metadata_log = parse_partition_dir(dir).is_some_and(|(t, _)| t == "__cluster_metadata");
    metadata_log && (name == "quorum-state" || is_raft_snapshot_name(name))
}

/// `<20 digits>-<10 digits>.checkpoint`, optionally `.part` or `.deleted` (Kafka's
/// `Snapshots` file names).
fn is_raft_snapshot_name(name: &str) -> bool {
    let base = name
        .strip_suffix(".checkpoint")
        .or_else(|| name.strip_suffix(".checkpoint.part"))
        .or_else(|| name.strip_suffix(".checkpoint.deleted"));
    let Some((offset, epoch)) = base.and_then(|b| b.split_once('-')) else { return false };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(offset) && digits(epoch)
}

/// Classifies a directory from its root entries (see the module doc). The first foreign entry
/// in name order is the one named.
pub fn classify(entries: &[RootEntry]) -> Layout {
    if entries.is_empty() {
        return Layout::Empty;
    }
    if entries.iter().any(|e| e.name == "meta.properties" && e.kind == EntryKind::File) {
        return Layout::MetaProperties;
    }
    let mut sorted: Vec<&RootEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for entry in sorted {
        if let Some(why) = foreign_root_entry(entry) {
            return Layout::Foreign { entry: entry.name.clone(), why };
        }
        let mut children: Vec<&(String, EntryKind)> = entry.children.iter().collect();
        children.sort_by(|a, b| a.0.cmp(&b.0));
        for (child, kind) in children {
            let why = if *kind == EntryKind::Dir {
                Some("a directory inside a partition directory (a broker makes none)")
            } else if !is_partition_file(&entry.name, child) {
                Some("not a file a broker writes in a partition directory")
            } else {
                None
            };
            if let Some(why) = why {
                return Layout::Foreign { entry: format!("{}/{child}", entry.name), why };
            }
        }
    }
    Layout::KafkaNames
}

/// Why a root entry is not what a broker keeps there, if it is not.
fn foreign_root_entry(entry: &RootEntry) -> Option<&'static str> {
    let name = entry.name.as_str();
    if is_partition_dir_name(name) {
        return (entry.kind != EntryKind::Dir)
            .then_some("named like a partition directory, but not a directory");
    }
    if is_kafka_root_file(name) || name.starts_with(TOPICFS_FILE_PREFIX) {
        return (entry.kind == EntryKind::Dir)
            .then_some("named like a file of a log dir, but a directory");
    }
    if KAFKA_ROOT_DIRS.contains(&name) && entry.kind == EntryKind::Dir {
        return None;
    }
    Some("not a file or partition directory a broker keeps in a log dir")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str) -> RootEntry {
        RootEntry { name: name.to_string(), kind: EntryKind::File, children: vec![] }
    }

    fn dir(name: &str, children: &[&str]) -> RootEntry {
        let children = children.iter().map(|c| (c.to_string(), EntryKind::File)).collect();
        RootEntry { name: name.to_string(), kind: EntryKind::Dir, children }
    }

    fn foreign(entries: &[RootEntry]) -> String {
        match classify(entries) {
            Layout::Foreign { entry, .. } => entry,
            other => panic!("{entries:?} classified as {other:?}"),
        }
    }

    #[test]
    fn an_empty_directory_is_a_new_log_dir_and_meta_properties_makes_any_a_log_dir() {
        assert_eq!(classify(&[]), Layout::Empty);
        assert!(Layout::Empty.is_log_dir());
        // meta.properties decides, whatever else is there.
        let with_meta = [file("meta.properties"), file("README"), dir("x", &[])];
        assert_eq!(classify(&with_meta), Layout::MetaProperties);
        // ... but only as a regular file.
        let meta_dir = RootEntry { kind: EntryKind::Dir, ..file("meta.properties") };
        assert_eq!(foreign(&[meta_dir]), "meta.properties");
    }

    #[test]
    fn a_broker_layout_without_meta_properties_is_a_log_dir() {
        let entries = [
            file(".lock"),
            file(".kafka_cleanshutdown"),
            file("recovery-point-offset-checkpoint"),
            file("log-start-offset-checkpoint.tmp"),
            file("replication-offset-checkpoint"),
            file("cleaner-offset-checkpoint"),
            file("topicfs-topic-settings"),
            dir("remote-log-index-cache", &[]),
            dir(
                "orders-0",
                &[
                    "00000000000000000000.log",
                    "00000000000000000000.index",
                    "00000000000000000000.timeindex",
                    "00000000000000000000.txnindex",
                    "00000000000000000042.snapshot",
                    "00000000000000000000.log.deleted",
                    "00000000000000000000.index.cleaned",
                    "00000000000000000000.timeindex.swap",
                    "00000000000000000042.snapshot.deleted",
                    "partition.metadata",
                    "leader-epoch-checkpoint",
                    "leader-epoch-checkpoint.tmp",
                    "partition.metadata.tmp",
                ],
            ),
            dir("orders-1", &[]),
            dir("orders-2.0123456789abcdef0123456789abcdef-delete", &["00000000000000000000.log"]),
            dir("orders-3.0123456789abcdef0123456789abcdef-future", &["partition.metadata"]),
            dir("orders-4.0123456789abcdef0123456789abcdef-stray", &[]),
            dir(
                "__cluster_metadata-0",
                &[
                    "quorum-state",
                    "00000000000000000000.log",
                    "00000000000000000123-0000000004.checkpoint",
                    "00000000000000000200-0000000004.checkpoint.part",
                    "00000000000000000007-0000000001.checkpoint.deleted",
                ],
            ),
        ];
        assert_eq!(classify(&entries), Layout::KafkaNames);
    }

    #[test]
    fn a_copy_of_etc_is_not_a_log_dir_and_the_first_foreign_entry_is_named() {
        // dbus-1 is named like partition 1 of topic dbus; system.conf is not a broker's file.
        assert_eq!(foreign(&[dir("dbus-1", &["system.conf"])]), "dbus-1/system.conf");
        let etc = [
            file("passwd"),
            dir("dbus-1", &["system.conf", "session.conf"]),
            dir("polkit-1", &["rules.d"]),
            file("hostname"),
        ];
        // In name order: dbus-1 before hostname and passwd.
        assert_eq!(foreign(&etc), "dbus-1/session.conf");
        assert_eq!(foreign(&[file("hostname")]), "hostname");
        assert!(!classify(&etc).is_log_dir());
    }

    #[test]
    fn each_foreign_kind_of_entry_is_refused() {
        // A directory not named like a partition (lost+found too: Kafka refuses it).
        assert_eq!(foreign(&[dir("lost+found", &[])]), "lost+found");
        assert_eq!(foreign(&[dir("conf.d", &[])]), "conf.d");
        // A subdirectory inside a partition directory.
        let nested =
            RootEntry { children: vec![("sub".to_string(), EntryKind::Dir)], ..dir("t-0", &[]) };
        assert_eq!(foreign(&[nested]), "t-0/sub");
        // A regular file named like a partition.
        assert_eq!(foreign(&[file("t-0")]), "t-0");
        // A Kafka root file's name on a directory.
        assert_eq!(
            foreign(&[dir("recovery-point-offset-checkpoint", &[])]),
            "recovery-point-offset-checkpoint"
        );
        // Quorum files only in the metadata log.
        assert_eq!(foreign(&[dir("t-0", &["quorum-state"])]), "t-0/quorum-state");
        let snapshot = "00000000000000000123-0000000004.checkpoint";
        assert_eq!(foreign(&[dir("t-0", &[snapshot])]), format!("t-0/{snapshot}"));
        // Near misses of broker names (Kafka parses a base offset of any width, so `0.log` is
        // one of its names).
        assert_eq!(classify(&[dir("t-0", &["0.log"])]), Layout::KafkaNames);
        for name in ["00000000000000000000.log.bak", "x.index", "partition.metadata.old"] {
            assert_eq!(foreign(&[dir("t-0", &[name])]), format!("t-0/{name}"));
        }
        // Files of the kind topicfs never writes at the root.
        assert_eq!(foreign(&[file(".lock"), file("notes.txt")]), "notes.txt");
    }

    #[test]
    fn root_and_partition_names_are_recognized_with_their_tmp_forms() {
        assert!(is_kafka_root_file("replication-offset-checkpoint.tmp"));
        assert!(!is_kafka_root_file("replication-offset-checkpoint.tmp.tmp"));
        assert!(is_partition_dir_name("a.b_c-12"));
        assert!(!is_partition_dir_name("a-"));
        assert!(!is_partition_dir_name("-1") && !is_partition_dir_name("a b-1"));
        assert!(is_partition_file("t-0", "00000000000000000000.txnindex.tmp"));
        assert!(is_partition_file("__cluster_metadata-0", "quorum-state.tmp"));
        assert!(!is_partition_file("t-0", "quorum-state"));
    }
}
