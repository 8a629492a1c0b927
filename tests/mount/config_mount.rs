//! Topic settings through a real mount: a writable mount of a broker's log dir deletes nothing
//! of topics whose settings it does not know, and `config` set with `echo` survives a remount,
//! keeps data, and changes retention without one.
//! Needs root (or fusermount3) and /dev/fuse.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::Stdio;

use common::corpus::copy_corpus;
use common::{Dirs, MountGuard, sh, sh_output, wait_until};

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
    assert_eq!(
        config_line(&m, "compacted", "cleanup.policy"),
        "cleanup.policy=delete # kafka-default; not applied: settings unknown"
    );
    let _dirs = m.unmount();
    let logged = fs::read_to_string(&log_path).unwrap();
    let line = logged.lines().find(|l| l.contains("settings unknown for topic(s)")).unwrap();
    for topic in ["compacted", "orders", "retained", "transactions", "upgraded"] {
        assert!(line.contains(topic), "{line}");
    }
    assert!(!line.contains("probe"), "{line}");
    assert!(
        line.contains("write cleanup.policy=delete (or compact) to MNT/<topic>/config"),
        "{line}"
    );
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
        "retention.ms=604800000 # kafka-default; not applied: settings unknown"
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

/// Runs `bash -c script` (bash's own `printf` and `echo -e`), returning everything.
fn bash(script: &str) -> std::process::Output {
    std::process::Command::new("bash").arg("-c").arg(script).stdin(Stdio::null()).output().unwrap()
}

/// [`bash`] that must succeed: its standard output.
fn bash_ok(script: &str) -> String {
    let out = bash(script);
    assert!(
        out.status.success(),
        "`{script}` failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Edits `file` with vim as a user would, without a vimrc: `commands` (ex commands) then `:wq`.
fn vim(file: &Path, commands: &[&str]) {
    let mut script = String::from("vim -u NONE -i NONE -n -es");
    for c in commands {
        script.push_str(&format!(" -c \"{c}\""));
    }
    script.push_str(&format!(" -c wq '{}'", file.display()));
    bash_ok(&script);
}

/// Issue 44, items 1 and 2, on a copy of `tests/fixtures/broker-v1/log-dir` (settings
/// unknown): `config` says retention and compaction are off and which settings are not
/// applied (its size exact); `cat config > saved; cat saved > config` and a `vim` write
/// without an edit change nothing, so retention passes (seen running on a probe topic) delete
/// no segment of those topics and their settings stay unknown.
#[test]
fn a_config_round_trip_or_an_editor_write_deletes_nothing_of_a_topic_with_unknown_settings() {
    let dirs = Dirs::new();
    copy_corpus(&dirs.data());
    let before = log_files(&dirs.data());
    let m = MountGuard::foreground_on(dirs, &["--retention-check-interval-ms", "200"]);
    let config = m.path("orders/config");
    let text = fs::read_to_string(&config).unwrap();
    assert!(
        text.starts_with(
            "# settings unknown: no retention and no compaction until \
                          cleanup.policy=delete (or compact) is written to this file\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("\nretention.ms=604800000 # kafka-default; not applied: settings unknown\n"),
        "{text}"
    );
    assert!(text.contains("\nsegment.bytes=1073741824 # kafka-default\n"), "{text}");
    assert_eq!(fs::metadata(&config).unwrap().len(), text.len() as u64);
    let saved = m.dirs_root().join("saved");
    sh(&format!(
        "cat '{c}' > '{s}' && cat '{s}' > '{c}'",
        c = config.display(),
        s = saved.display()
    ));
    vim(&m.path("compacted/config"), &[]);
    assert_eq!(fs::read_to_string(&config).unwrap(), text);
    // Removing a policy override that is not there states nothing (a probe found it made the
    // settings known, and retention deleted by Kafka's defaults).
    sh(&format!("printf 'cleanup.policy=\\n' > '{}'", m.path("upgraded/config").display()));
    assert!(fs::read_to_string(m.path("upgraded/config")).unwrap().starts_with("# settings"));
    // A copy saved while the settings were unknown, written back once they are set, would pin
    // what it showed (7 days of retention) as overrides: refused whole, nothing changed.
    let tx = m.path("transactions/config");
    let tx_saved = m.dirs_root().join("tx.saved");
    sh(&format!("cat '{}' > '{}'", tx.display(), tx_saved.display()));
    sh(&format!("printf 'cleanup.policy=delete\\nretention.ms=-1\\n' > '{}'", tx.display()));
    let set = fs::read_to_string(&tx).unwrap();
    let out = sh_output(&format!("cat '{}' > '{}'", tx_saved.display(), tx.display()));
    assert!(!out.status.success(), "the saved copy was taken");
    assert_eq!(fs::read_to_string(&tx).unwrap(), set);
    assert!(set.contains("\nretention.ms=-1 # override\n"), "{set}");
    // Retention passes run meanwhile: a probe (known settings, tiny segments, 1 ms retention)
    // loses its old segments twice, so a whole pass ran after the writes above.
    fs::create_dir(m.path("probe")).unwrap();
    sh(&format!(
        "printf 'segment.bytes=300\\nretention.ms=1\\n' >> '{}'",
        m.path("probe/config").display()
    ));
    for round in 0..2 {
        let old: Vec<String> =
            log_files(&m.data()).into_iter().filter(|f| f.starts_with("probe-0/")).collect();
        append_old(&m, "probe", 5);
        wait_until(&format!("round {round}: retention deleted the probe's older segments"), || {
            let now = log_files(&m.data());
            !old.iter().any(|f| now.contains(f))
        });
    }
    let after: Vec<String> =
        log_files(&m.data()).into_iter().filter(|f| !f.starts_with("probe-0/")).collect();
    assert_eq!(after, before, "no segment of the broker's topics was deleted");
    let kept = fs::read_to_string(m.data().join("topicfs-topic-config")).unwrap();
    assert!(!kept.lines().any(|l| l.starts_with("orders") || l.starts_with("compacted")), "{kept}");
    assert!(fs::read_to_string(m.path("compacted/config")).unwrap().starts_with("# settings"));
    m.unmount();
}

/// Issue 44, item 7, with the tools users write with: the lines written between open and
/// close are one change, applied at the close (visible to the next command). bash's `printf`
/// writes each line on its own: a bad second line fails the command and the first is not
/// applied. `echo -e`, `cat file >` and `vim` work the same.
#[test]
fn shell_tools_write_config_lines_as_one_change_applied_at_close() {
    let m = MountGuard::foreground(&[]);
    fs::create_dir(m.path("t")).unwrap();
    let config = m.path("t/config");
    let q = config.display();
    let before = fs::read_to_string(&config).unwrap();
    let out = bash(&format!("printf 'retention.ms=7100\\nsegment.bytes=abc\\n' > '{q}'"));
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(fs::read_to_string(&config).unwrap(), before, "nothing applied");
    let grep = format!("grep -E '^(retention.ms|segment.bytes|segment.ms)=' '{q}'");
    let shown = bash_ok(&format!(
        "printf 'retention.ms=7100\\nsegment.bytes=2000000\\n' > '{q}' && {grep}"
    ));
    assert_eq!(
        shown,
        "retention.ms=7100 # override\nsegment.bytes=2000000 # override\n\
         segment.ms=604800000 # kafka-default\n"
    );
    let shown =
        bash_ok(&format!("echo -e 'retention.ms=7200\\nsegment.ms=5000' > '{q}' && {grep}"));
    assert_eq!(
        shown,
        "retention.ms=7200 # override\nsegment.bytes=2000000 # override\n\
         segment.ms=5000 # override\n"
    );
    let lines = m.dirs_root().join("lines");
    fs::write(&lines, "retention.ms=7300\nsegment.ms=soon\n").unwrap();
    let before = fs::read_to_string(&config).unwrap();
    let out = bash(&format!("cat '{}' > '{q}'", lines.display()));
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(fs::read_to_string(&config).unwrap(), before, "nothing applied");
    fs::write(&lines, "retention.ms=7300\nsegment.ms=6000\n").unwrap();
    let shown = bash_ok(&format!("cat '{}' > '{q}' && {grep}", lines.display()));
    assert_eq!(
        shown,
        "retention.ms=7300 # override\nsegment.bytes=2000000 # override\n\
         segment.ms=6000 # override\n"
    );
    // An editor writes the whole file back: only the edited line changes anything.
    vim(&config, &["%s/^retention.ms=.*/retention.ms=7400/"]);
    assert_eq!(config_line(&m, "t", "retention.ms"), "retention.ms=7400 # override");
    assert_eq!(config_line(&m, "t", "segment.ms"), "segment.ms=6000 # override");
    assert_eq!(config_line(&m, "t", "flush.ms"), "flush.ms=9223372036854775807 # kafka-default");
    m.unmount();
}

/// Issue 44, item 8: a value that no continuation can make valid is refused at its `write()`,
/// so the command fails even without a newline (a refusal at `close()` would be ignored by the
/// shell); nothing is applied.
#[test]
fn printf_of_a_value_that_cannot_become_valid_fails_without_a_newline() {
    let m = MountGuard::foreground(&[]);
    fs::create_dir(m.path("t")).unwrap();
    let config = m.path("t/config");
    let before = fs::read_to_string(&config).unwrap();
    for script in ["printf 'retention.ms=abc'", "printf 'retention.ms=-2'", "printf 'no.such=1'"] {
        for shell in ["sh", "bash"] {
            let out = std::process::Command::new(shell)
                .arg("-c")
                .arg(format!("{script} > '{}'", config.display()))
                .output()
                .unwrap();
            assert!(!out.status.success(), "{shell}: {script}: {out:?}");
        }
    }
    assert_eq!(fs::read_to_string(&config).unwrap(), before);
    sh(&format!("printf 'retention.ms=-1' > '{}'", config.display()));
    assert_eq!(config_line(&m, "t", "retention.ms"), "retention.ms=-1 # override");
    m.unmount();
}

/// Issue 44, item 9: a line without end is refused at the write that takes it past 4 KiB
/// (16 MiB written in 1 KiB writes: 4 KiB accepted, then EINVAL), and a 16 MiB stream from a
/// pipe fails; the mount goes on serving `config` unchanged, and its log quotes only the
/// start of the line.
#[test]
fn a_config_line_past_4_kib_is_refused_at_once() {
    let dirs = Dirs::new();
    let log_path = dirs.root.path().join("mount.log");
    let log = fs::File::create(&log_path).unwrap();
    let m = MountGuard::foreground_logging_to(dirs, &[], Stdio::from(log));
    fs::create_dir(m.path("t")).unwrap();
    let config = m.path("t/config");
    let before = fs::read_to_string(&config).unwrap();
    let mut file = fs::OpenOptions::new().write(true).open(&config).unwrap();
    let chunk = [b'#'; 1024];
    let mut accepted = 0usize;
    let errno = loop {
        match std::io::Write::write(&mut file, &chunk) {
            Ok(n) => accepted += n,
            Err(e) => break e.raw_os_error(),
        }
        assert!(accepted <= 16 << 20, "16 MiB accepted");
    };
    assert_eq!((accepted, errno), (4096, Some(libc::EINVAL)));
    drop(file);
    let out = bash(&format!("head -c 16777216 /dev/zero | tr '\\0' x > '{}'", config.display()));
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(fs::read_to_string(&config).unwrap(), before);
    let _dirs = m.unmount();
    let logged = fs::read_to_string(&log_path).unwrap();
    assert!(logged.contains("t/config line 1: longer than 4096 bytes"), "{logged}");
    assert!(logged.len() < 64 * 1024, "the log holds {} bytes", logged.len());
}

/// Issue 44, item 14: with `topicfs-topic-config` damaged, writes of `config` fail with EIO,
/// and the log says what works instead (fix or remove the file, then remount), not a write of
/// `config`; done, the next mount takes the write.
#[test]
fn a_damaged_settings_file_is_logged_with_advice_that_works() {
    let m = MountGuard::foreground(&[]);
    fs::create_dir(m.path("t")).unwrap();
    sh(&format!("echo retention.ms=-1 >> '{}'", m.path("t/config").display()));
    let dirs = m.unmount();
    let file = dirs.data().join("topicfs-topic-config");
    let good = fs::read_to_string(&file).unwrap();
    fs::write(&file, good.replace("retention.ms=-1", "retention.ms=x")).unwrap();
    let log_path = dirs.root.path().join("mount.log");
    let log = fs::File::create(&log_path).unwrap();
    let m = MountGuard::foreground_logging_to(dirs, &[], Stdio::from(log));
    assert_eq!(append_errno(&m.path("t/config"), "cleanup.policy=delete\n"), Some(libc::EIO));
    let dirs = m.unmount();
    let logged = fs::read_to_string(&log_path).unwrap();
    let line = logged.lines().find(|l| l.contains("settings unknown for topic(s) t")).unwrap();
    assert!(line.contains("topicfs-topic-config is damaged"), "{line}");
    assert!(line.contains("fix or remove it, then remount"), "{line}");
    assert!(!line.contains("write cleanup.policy"), "{line}");
    let damage = logged.lines().find(|l| l.contains("corrupt data in")).unwrap();
    assert!(damage.contains("mounted again"), "{damage}");
    fs::remove_file(&file).unwrap();
    let m = MountGuard::foreground_on(dirs, &[]);
    sh(&format!("echo cleanup.policy=delete >> '{}'", m.path("t/config").display()));
    assert_eq!(config_line(&m, "t", "cleanup.policy"), "cleanup.policy=delete # override");
    m.unmount();
}
