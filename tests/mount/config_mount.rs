//! Topic settings through a real mount: a writable mount of a broker's log dir deletes nothing
//! of topics whose settings it does not know, and `config` set with `echo` survives a remount,
//! keeps data, and changes retention without one.
//! Needs root (or fusermount3) and /dev/fuse.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::Stdio;

use common::corpus::copy_corpus;
use common::{Dirs, MountGuard, sh, wait_until};

/// Every `.log` file under the partition directories of `data`, as `<dir>/<file>`.
fn log_files(data: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for dir in fs::read_dir(data).unwrap() {
        let dir = dir.unwrap();
        if !dir.file_type().unwrap().is_dir() {
            continue;
        }
        for file in fs::read_dir(dir.path()).unwrap() {
            let name = file.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".log") {
                out.push(format!("{}/{name}", dir.file_name().to_string_lossy()));
            }
        }
    }
    out.sort();
    out
}

/// Appends `n` 100-byte records stamped in 1970 to partition 0 of `topic`, one write each.
fn append_old(m: &MountGuard, topic: &str, n: usize) {
    for i in 0..n {
        let line = format!("{{\"ts\":{},\"payload\":\"{}\"}}\n", 1000 + i, "x".repeat(100));
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(m.path(&format!("{topic}/0/append.json")))
            .unwrap();
        std::io::Write::write_all(&mut f, line.as_bytes()).unwrap();
    }
}

/// The errno of opening `path` for appending and writing `text` (`None`: it worked).
fn append_errno(path: &Path, text: &str) -> Option<i32> {
    let written = fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
    written.err().map(|e| e.raw_os_error().unwrap())
}

fn has_first_segment(m: &MountGuard, topic: &str) -> bool {
    m.path(&format!("{topic}/0/segments/00000000000000000000.log")).exists()
}

fn config_line(m: &MountGuard, topic: &str, name: &str) -> String {
    let text = fs::read_to_string(m.path(&format!("{topic}/config"))).unwrap();
    text.lines().find(|l| l.starts_with(&format!("{name}="))).unwrap().to_string()
}

/// The repro of issue 31: a copy of `tests/fixtures/broker-v1/log-dir` mounted writable with
/// retention every second. Its topics' settings are unknown, so no segment is deleted (the
/// compacted topic keeps the only values of k2 and k5); a topic created through the mount
/// shows that retention passes did run meanwhile.
#[test]
fn a_writable_mount_of_a_brokers_log_dir_deletes_no_segment_of_topics_with_unknown_settings() {
    let dirs = Dirs::new();
    copy_corpus(&dirs.data());
    let before = log_files(&dirs.data());
    let log_path = dirs.root.path().join("mount.log");
    let log = fs::File::create(&log_path).unwrap();
    let m = MountGuard::foreground_logging_to(
        dirs,
        &["--retention-check-interval-ms", "1000"],
        Stdio::from(log),
    );
    // A probe: created here (known settings), tiny segments, 1 ms retention.
    fs::create_dir(m.path("probe")).unwrap();
    sh(&format!(
        "printf 'segment.bytes=300\\nretention.ms=1\\n' >> '{}'",
        m.path("probe/config").display()
    ));
    append_old(&m, "probe", 5);
    wait_until("a retention pass deleted the probe's first segment", || {
        !has_first_segment(&m, "probe")
    });
    let after: Vec<String> =
        log_files(&m.data()).into_iter().filter(|f| !f.starts_with("probe-0/")).collect();
    assert_eq!(after, before, "no segment of the broker's topics was deleted");
    let keys = fs::read_to_string(m.path("compacted/0/keys")).unwrap();
    let names: Vec<&str> = keys.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(names, ["k1", "k2", "k3", "k4", "k5"], "{keys}");
    assert!(config_line(&m, "compacted", "cleanup.policy").ends_with("# kafka-default"));
    let _dirs = m.unmount();
    let logged = fs::read_to_string(&log_path).unwrap();
    let line = logged.lines().find(|l| l.contains("settings unknown for topic(s)")).unwrap();
    for topic in ["compacted", "orders", "retained", "transactions", "upgraded"] {
        assert!(line.contains(topic), "{line}");
    }
    assert!(!line.contains("probe"), "{line}");
}

/// `echo name=value >> config` sets an override kept across a remount under other defaults;
/// a bad value fails the write (EINVAL) and changes nothing; `name=` removes the override and
/// retention follows the mount's default at once; a read-only mount shows it and refuses writes.
#[test]
fn an_override_set_through_config_survives_remount_keeps_data_and_changes_live() {
    let m = MountGuard::foreground(&["--segment-bytes", "1024"]);
    fs::create_dir(m.path("t")).unwrap();
    fs::create_dir(m.path("u")).unwrap();
    let config = m.path("t/config");
    let quoted = config.display();
    sh(&format!("echo retention.ms=-1 >> '{quoted}'"));
    assert_eq!(config_line(&m, "t", "retention.ms"), "retention.ms=-1 # override");
    let before = fs::read_to_string(&config).unwrap();
    assert_eq!(append_errno(&config, "retention.ms=abc\n"), Some(libc::EINVAL));
    assert_eq!(fs::read_to_string(&config).unwrap(), before);
    // `cat config` written back through a file is accepted and changes nothing.
    let saved = m.dirs_root().join("config.saved");
    let saved = saved.display();
    sh(&format!("cat '{quoted}' > '{saved}' && cat '{saved}' > '{quoted}'"));
    assert_eq!(fs::read_to_string(&config).unwrap(), before);
    append_old(&m, "t", 30);
    append_old(&m, "u", 30);
    let dirs = m.unmount();

    let m = MountGuard::foreground_on(
        dirs,
        &[
            "--segment-bytes",
            "1024",
            "--retention-ms",
            "1000",
            "--retention-check-interval-ms",
            "200",
        ],
    );
    wait_until("retention deleted u's first segment", || !has_first_segment(&m, "u"));
    assert!(has_first_segment(&m, "t"), "the override kept t's segments");
    assert_eq!(fs::read_to_string(m.path("t/0/by-offset/0")).unwrap().lines().count(), 30);
    assert_eq!(config_line(&m, "t", "retention.ms"), "retention.ms=-1 # override");
    assert_eq!(config_line(&m, "u", "retention.ms"), "retention.ms=1000 # mount-default");
    sh(&format!("echo retention.ms= >> '{}'", m.path("t/config").display()));
    assert_eq!(config_line(&m, "t", "retention.ms"), "retention.ms=1000 # mount-default");
    wait_until("retention deleted t's first segment", || !has_first_segment(&m, "t"));
    sh(&format!("echo retention.ms=-1 >> '{}'", m.path("t/config").display()));
    let dirs = m.unmount();

    let m = MountGuard::foreground_on(dirs, &["--read-only"]);
    assert_eq!(config_line(&m, "t", "retention.ms"), "retention.ms=-1 # override");
    assert_eq!(append_errno(&m.path("t/config"), "retention.ms=5\n"), Some(libc::EROFS));
    m.unmount();
}

/// The broker-v1 corpus with a KRaft metadata log beside it (`tests/fixtures/kraft-v1`: the
/// same topics, `compacted` with `cleanup.policy=compact`, `retained` with `retention.ms=-1`,
/// `transactions` with `retention.ms=86400000`, a cluster default `retention.ms=-1`). A
/// read-only mount shows those settings in `config` with their sources; a writable mount takes
/// them as the topics' settings: the topics are known (no "settings unknown" line), retention
/// deletes the sealed segments of `transactions` (records of 2026-01-01, older than its day)
/// and nothing of the topics the broker keeps forever or compacts.
#[test]
fn a_brokers_kraft_metadata_log_decides_its_topics_settings() {
    let dirs = Dirs::new();
    copy_corpus(&dirs.data());
    let kraft = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kraft-v1/log-dir");
    common::corpus::copy_tree(
        &kraft.join("__cluster_metadata-0"),
        &dirs.data().join("__cluster_metadata-0"),
    );
    let before = log_files(&dirs.data());

    let m = MountGuard::foreground_on(dirs, &["--read-only"]);
    assert_eq!(
        config_line(&m, "compacted", "cleanup.policy"),
        "cleanup.policy=compact # broker-override"
    );
    assert_eq!(config_line(&m, "retained", "retention.ms"), "retention.ms=-1 # broker-override");
    assert_eq!(
        config_line(&m, "transactions", "retention.ms"),
        "retention.ms=86400000 # broker-override"
    );
    assert_eq!(config_line(&m, "orders", "retention.ms"), "retention.ms=-1 # broker-default");
    let dirs = m.unmount();

    let log_path = dirs.root.path().join("mount.log");
    let log = fs::File::create(&log_path).unwrap();
    let m = MountGuard::foreground_logging_to(
        dirs,
        &["--retention-check-interval-ms", "200"],
        Stdio::from(log),
    );
    wait_until("retention deleted the sealed segments of transactions", || {
        !m.path("transactions/0/segments/00000000000000000013.log").exists()
    });
    assert!(!has_first_segment(&m, "transactions"));
    assert!(m.path("transactions/0/segments/00000000000000000017.log").exists(), "active kept");
    let kept: Vec<String> = log_files(&m.data())
        .into_iter()
        .filter(|f| !f.starts_with("transactions-0/") && !f.starts_with("__cluster_metadata-0/"))
        .collect();
    let expected: Vec<String> = before
        .iter()
        .filter(|f| !f.starts_with("transactions-0/") && !f.starts_with("__cluster_metadata-0/"))
        .cloned()
        .collect();
    assert_eq!(kept, expected, "no segment of a topic kept forever or compacted was deleted");
    let keys = fs::read_to_string(m.path("compacted/0/keys")).unwrap();
    let names: Vec<&str> = keys.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(names, ["k1", "k2", "k3", "k4", "k5"], "{keys}");
    let _dirs = m.unmount();
    let logged = fs::read_to_string(&log_path).unwrap();
    assert!(
        !logged.lines().any(|l| l.contains("settings unknown for topic(s)")
            && ["compacted", "orders", "retained", "transactions"].iter().any(|t| l.contains(t))),
        "{logged}"
    );
}

/// Issue 31's "done when": a topic created through the mount, `cleanup.policy=compact` set
/// through `config`, keyed records appended round after round (8 distinct keys, 40 rounds):
/// the cleaner keeps the log bounded by its distinct keys while the appends go on, `latest/`
/// shows each key's last value, every offset a reader sees is still in order, and a remount
/// finds the same settings.
#[test]
fn a_compacted_topic_set_through_config_stays_bounded_by_its_distinct_keys() {
    let m = MountGuard::foreground(&["--cleaner-backoff-ms", "100"]);
    fs::create_dir(m.path("table")).unwrap();
    sh(&format!(
        "printf 'cleanup.policy=compact\\nsegment.bytes=4096\\nmin.cleanable.dirty.ratio=0.01\\n' \
         >> '{}'",
        m.path("table/config").display()
    ));
    let keys = 8;
    let rounds = 40;
    let value = "v".repeat(200);
    let segment_bytes = |m: &MountGuard| -> u64 {
        fs::read_dir(m.path("table/0/segments"))
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
            .map(|e| e.metadata().unwrap().len())
            .sum()
    };
    for round in 0..rounds {
        let mut text = String::new();
        for k in 0..keys {
            text.push_str(&format!("{{\"key\":\"k{k}\",\"payload\":\"{value}-{round}\"}}\n"));
        }
        let mut f =
            fs::OpenOptions::new().append(true).open(m.path("table/0/append.json")).unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
    }
    let appended = (keys * rounds) as u64;
    // Everything appended is about 40 x 8 x 230 bytes = 74 KB; compacted, the sealed part holds
    // one record per key, plus the active segment (under segment.bytes).
    wait_until("the cleaner bounded the log by its distinct keys", || segment_bytes(&m) < 16_384);
    for k in 0..keys {
        let latest = fs::read_to_string(m.path(&format!("table/0/latest/k{k}"))).unwrap();
        assert_eq!(latest.trim_end(), format!("{value}-{}", rounds - 1), "k{k}");
    }
    let lines = fs::read_to_string(m.path("table/0/by-offset/0.json")).unwrap();
    let offsets: Vec<u64> = lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["offset"].as_u64().unwrap())
        .collect();
    assert!(offsets.len() < appended as usize / 2, "{} records left", offsets.len());
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets stay in order: {offsets:?}");
    assert_eq!(offsets.last().copied(), Some(appended - 1), "the last record is kept");
    let dirs = m.unmount();

    let m = MountGuard::foreground_on(dirs, &[]);
    assert_eq!(config_line(&m, "table", "cleanup.policy"), "cleanup.policy=compact # override");
    assert_eq!(config_line(&m, "table", "segment.bytes"), "segment.bytes=4096 # override");
    m.unmount();
}

/// "Live on a read-only mount": a read-only mount of the broker-v1 corpus shows Kafka's
/// defaults; once the broker's metadata log appears in the data dir (as a KRaft broker started
/// on it writes it), the next lookups show the settings it holds, without a remount.
#[test]
fn a_read_only_mount_takes_in_the_brokers_metadata_log_while_mounted() {
    let dirs = Dirs::new();
    copy_corpus(&dirs.data());
    let data = dirs.data();
    let m = MountGuard::foreground_on(dirs, &["--read-only"]);
    assert_eq!(
        config_line(&m, "retained", "retention.ms"),
        "retention.ms=604800000 # kafka-default"
    );
    let kraft = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kraft-v1/log-dir");
    // Written aside and renamed in, so the reader never sees a half-copied directory.
    let staging = data.join("__cluster_metadata-0.staging");
    common::corpus::copy_tree(&kraft.join("__cluster_metadata-0"), &staging);
    fs::rename(&staging, data.join("__cluster_metadata-0")).unwrap();
    wait_until("the mount took in the broker's metadata log", || {
        config_line(&m, "retained", "retention.ms") == "retention.ms=-1 # broker-override"
    });
    assert_eq!(
        config_line(&m, "compacted", "cleanup.policy"),
        "cleanup.policy=compact # broker-override"
    );
    assert_eq!(config_line(&m, "orders", "retention.ms"), "retention.ms=-1 # broker-default");
    m.unmount();
}
