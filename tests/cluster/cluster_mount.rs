//! Real mounts of a cluster (`topicfs mount kafka://HOST:PORT MNT`) driven with shell tools,
//! against tansu 0.6.0 (SQLite engine, one broker per test, `common::tansu::Tansu`). Every
//! mount is unmounted by `MountGuard` even when a test fails. Needs root (or fusermount3),
//! /dev/fuse, jq, and the broker built by `scripts/install-deps`.

use crate::common;

use std::ffi::OsString;
use std::process::Stdio;

use common::tansu::{Tansu, free_port};
use common::{Dirs, Follower, MountGuard, failed_mount, sh, sh_output};

fn mount(broker: &Tansu, args: &[&str]) -> MountGuard {
    let mut all = vec!["--config", "request.timeout.ms=10000"];
    all.extend_from_slice(args);
    let source = OsString::from(broker.bootstrap());
    MountGuard::foreground_source(Dirs::new(), &source, &all, Stdio::inherit())
}

#[test]
fn cluster_mount_shell_tools_list_append_and_stream() {
    let broker = Tansu::start();
    let m = mount(&broker, &[]);
    let mnt = m.mnt();
    let mnt = mnt.display();
    sh(&format!("mkdir {mnt}/t"));
    assert_eq!(sh(&format!("ls {mnt}")), "t\n");
    let part = sh(&format!("ls {mnt}/t/0"));
    assert!(part.contains("by-offset\n") && part.contains("append\n"), "{part}");
    assert!(!part.contains("segments"), "{part}");
    let out = sh_output(&format!("ls {mnt}/t/0/segments"));
    assert!(!out.status.success());
    sh(&format!("printf 'a\\nb\\n' >> {mnt}/t/0/append"));
    sh(&format!("printf 'c\\nd\\n' >> {mnt}/t/0/append"));
    assert_eq!(sh(&format!("cat {mnt}/t/0/by-offset/0")), "a\nb\nc\nd\n");
    assert_eq!(sh(&format!("head -n 1 {mnt}/t/0/by-offset/0")), "a\n");
    assert_eq!(sh(&format!("wc -l < {mnt}/t/0/by-offset/0")).trim(), "4");
    assert_eq!(sh(&format!("tail -n 2 {mnt}/t/0/by-offset/0")), "c\nd\n");
    let info = sh(&format!("cat {mnt}/t/0/info"));
    assert!(info.contains("log_end_offset: 4\n"), "{info}");
    assert!(!info.contains("segments"), "{info}");
    assert_eq!(
        sh(&format!("jq -c '[.offset, .payload]' {mnt}/t/0/by-offset/0.json")),
        "[0,\"a\"]\n[1,\"b\"]\n[2,\"c\"]\n[3,\"d\"]\n"
    );
    m.unmount();
}

#[test]
fn cluster_mount_info_shows_the_timestamps_of_a_partition_holding_records() {
    let broker = Tansu::start();
    let m = mount(&broker, &[]);
    let mnt = m.mnt();
    let mnt = mnt.display();
    sh(&format!("mkdir {mnt}/t"));
    let empty = sh(&format!("cat {mnt}/t/0/info"));
    assert!(empty.contains("first_timestamp: none\n"), "{empty}");
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    sh(&format!("seq 1 52 >> {mnt}/t/0/append"));
    let after = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let info = sh(&format!("cat {mnt}/t/0/info"));
    eprintln!("{info}");
    assert!(info.contains("log_end_offset: 52\n"), "{info}");
    assert!(!info.contains("none"), "`none` means no records: {info}");
    let value = |key: &str| {
        info.lines().find_map(|l| l.strip_prefix(key)).map(str::to_string).unwrap_or_default()
    };
    let first: i64 = value("first_timestamp: ").parse().expect(&info);
    let (before, after) = (before.as_millis() as i64, after.as_millis() as i64);
    assert!(before - 1000 <= first && first <= after + 1000, "{first} not in [{before}, {after}]");
    // tansu 0.6 drops the connection on ListOffsets -3 (doc/cluster-brokers.md): its max is
    // `unknown`; a broker that answers it gives the value.
    let max = value("max_timestamp: ");
    assert!(max == "unknown" || max.parse::<i64>().is_ok_and(|m| m >= first), "{info}");
    m.unmount();
}

#[test]
fn cluster_mount_tail_f_sees_a_later_append() {
    let broker = Tansu::start();
    let m = mount(&broker, &[]);
    sh(&format!("mkdir {}", m.path("t").display()));
    sh(&format!("printf 'first\\n' >> {}", m.path("t/0/append").display()));
    let stream = m.path("t/0/by-offset/0");
    let mut follower = Follower::start("tail", &["-f", "-s", "0.2", stream.to_str().unwrap()]);
    follower.wait_for("first\n");
    sh(&format!("printf 'later\\n' >> {}", m.path("t/0/append").display()));
    assert_eq!(follower.wait_for("later\n"), "first\nlater\n");
    drop(follower);
    m.unmount();
}

#[test]
fn cluster_mount_with_no_broker_fails_with_the_address() {
    let port = free_port();
    let dirs = Dirs::new();
    let addr = format!("127.0.0.1:{port}");
    let source = format!("kafka://{addr}");
    let (code, stderr) =
        failed_mount(&source, &dirs.mnt(), &["--config", "request.timeout.ms=2000"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&addr), "{stderr}");
}

#[test]
fn cluster_mount_refuses_an_unknown_client_setting_by_name() {
    let dirs = Dirs::new();
    let (code, stderr) =
        failed_mount("kafka://127.0.0.1:1", &dirs.mnt(), &["--config", "no.such.setting=1"]);
    assert!(code != Some(0), "{stderr}");
    assert!(stderr.contains("no.such.setting"), "{stderr}");
}

#[test]
fn cluster_mount_streams_of_not_yet_known_size_read_whole_with_shell_tools() {
    let broker = Tansu::start();
    let m = mount(&broker, &["--sizing-budget", "1"]);
    let mnt = m.mnt();
    let mnt = mnt.display();
    sh(&format!("mkdir {mnt}/t"));
    for i in 0..20 {
        sh(&format!("printf '{i}\\n' >> {mnt}/t/0/append"));
    }
    let all: String = (0..20).map(|i| format!("{i}\n")).collect();
    assert_eq!(sh(&format!("cat {mnt}/t/0/by-offset/0")), all);
    assert_eq!(sh(&format!("wc -l < {mnt}/t/0/by-offset/0")).trim(), "20");
    assert_eq!(sh(&format!("tail -n 2 {mnt}/t/0/by-offset/0")), "18\n19\n");
    assert_eq!(sh(&format!("jq -c .offset {mnt}/t/0/by-offset/15.json | wc -l")).trim(), "5");
    m.unmount();
}

/// With the cluster's default sizing budget (64 KiB, one Fetch): a stream of 2,000 records of
/// 100 bytes (200 KB) shows st_size 0 at its first stat (not yet known), every shell tool reads
/// exactly its records, `tail -n` of it reads forward and prints the right lines, the fast
/// form `by-offset/-N` is exact at once, a stream read to its end stays exact, and `tail -f` of
/// a stream not yet sized follows a later append.
#[test]
fn cluster_mount_streams_larger_than_the_default_sizing_budget_behave_as_locally() {
    let broker = Tansu::start();
    let m = mount(&broker, &[]);
    let mnt = m.mnt();
    let mnt = mnt.display();
    sh(&format!("mkdir {mnt}/t"));
    sh(&format!("seq -f 'r%099.0f' 0 1999 >> {mnt}/t/0/append"));
    let line = |n: u32| format!("r{n:099}\n");
    let all: String = (0..2000).map(line).collect();
    // Not yet known: more than one Fetch away (a fresh name of the same stream).
    assert_eq!(sh(&format!("stat -c %s {mnt}/t/0/by-offset/0.json")), "0\n");
    assert_eq!(sh(&format!("head -n 2 {mnt}/t/0/by-offset/0")), line(0) + &line(1));
    assert_eq!(sh(&format!("tail -n 2 {mnt}/t/0/by-offset/0")), line(1998) + &line(1999));
    assert_eq!(sh(&format!("tail -n 2 {mnt}/t/0/by-offset/1000")), line(1998) + &line(1999));
    assert_eq!(sh(&format!("wc -c < {mnt}/t/0/by-offset/0")).trim(), "202000");
    assert_eq!(sh(&format!("wc -l < {mnt}/t/0/by-offset/10")).trim(), "1990");
    assert_eq!(sh(&format!("cat {mnt}/t/0/by-offset/0")), all);
    // The fast form is exact at once: its end is within one Fetch of its start.
    assert_eq!(sh(&format!("stat -c %s {mnt}/t/0/by-offset/-3")), "303\n");
    assert_eq!(sh(&format!("tail -n 2 {mnt}/t/0/by-offset/-3")), line(1998) + &line(1999));
    assert_eq!(
        sh(&format!("jq -r .offset {mnt}/t/0/by-offset/1995.json")),
        "1995\n1996\n1997\n1998\n1999\n"
    );
    assert_eq!(sh(&format!("jq -c .offset {mnt}/t/0/by-offset/0.json | wc -l")).trim(), "2000");
    // Read to its end by `cat` above: exact from then on.
    assert_eq!(sh(&format!("stat -c %s {mnt}/t/0/by-offset/0")), "202000\n");
    // `tail -f` of a stream whose size is not yet known reads to its end, then follows.
    let stream = m.path("t/0/by-offset/1.json");
    let args = ["-n", "+1", "-f", "-s", "0.2", stream.to_str().unwrap()];
    let mut follower = Follower::start("tail", &args);
    follower.wait_for("\"offset\":1999,");
    sh(&format!("printf 'later\\n' >> {mnt}/t/0/append"));
    let seen = follower.wait_for("\"offset\":2000,");
    assert_eq!(seen.lines().count(), 2000, "records 1 to 2000 once each");
    drop(follower);
    m.unmount();
}

/// A mount whose log (stderr) goes to `log`, with a short request deadline for fault tests.
/// Fetches are kept to 256 KiB: tansu's SQLite engine serves about 5,000 records a second, so a
/// default-sized Fetch (50 MiB) of a large partition takes longer than any short deadline.
fn mount_logging(broker: &Tansu, timeout_ms: u32, log: &std::path::Path) -> MountGuard {
    let timeout = format!("request.timeout.ms={timeout_ms}");
    let source = OsString::from(broker.bootstrap());
    let file = std::fs::File::create(log).unwrap();
    let args = ["--config", &timeout, "--config", "fetch.max.bytes=262144"];
    MountGuard::foreground_source(Dirs::new(), &source, &args, Stdio::from(file))
}

/// The broker killed mid-`cat`: `cat` ends with an error (no hang) and the daemon logs the
/// broker and the partition; `ls` while it is down answers from cached metadata or fails, both
/// within the deadline; once the broker is back a new `cat` reads everything without a
/// remount; and unmounting works while the broker is down. Times are printed, not asserted
/// (beyond the hang guard of the shell tools' `timeout`).
#[test]
fn cluster_mount_broker_killed_mid_cat_fails_the_read_and_a_restart_recovers() {
    const TIMEOUT_MS: u32 = 10_000;
    let mut broker = Tansu::start();
    let scratch = tempfile::tempdir().unwrap();
    let log = scratch.path().join("topicfs.log");
    let m = mount_logging(&broker, TIMEOUT_MS, &log);
    let mnt = m.mnt();
    let mnt = mnt.display();
    sh(&format!("mkdir {mnt}/big"));
    // 40,000 lines of 100 bytes (4 MB), appended in 128 KiB writes (one Produce each): tansu's
    // SQLite engine serves about 5,000 records a second, so `cat` takes seconds.
    const LINES: usize = 40_000;
    let lines = scratch.path().join("lines");
    sh(&format!(
        "seq -w 1 {LINES} | sed 's/$/ {pad}/' > {lines} && cat {lines} >> {mnt}/big/0/append",
        pad = "x".repeat(92),
        lines = lines.display()
    ));
    let out = scratch.path().join("out");
    let err = scratch.path().join("err");
    let mut cat = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec timeout 120 cat {mnt}/big/0/by-offset/0 > {} 2> {}",
            out.display(),
            err.display()
        ))
        .spawn()
        .unwrap();
    let opened = std::time::Instant::now();
    while std::fs::metadata(&out).map(|m| m.len() == 0).unwrap_or(true) {
        assert!(cat.try_wait().unwrap().is_none(), "cat ended before printing anything");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    eprintln!("cat printed its first bytes after {:?}", opened.elapsed());
    broker.kill();
    let killed = std::time::Instant::now();
    let status = cat.wait().unwrap();
    let cat_took = killed.elapsed();
    let printed = std::fs::metadata(&out).unwrap().len();
    let cat_err = std::fs::read_to_string(&err).unwrap();
    eprintln!(
        "cat ended {cat_took:?} after the kill (request.timeout.ms={TIMEOUT_MS}): {status}, \
         {printed} of {} bytes, stderr: {cat_err}",
        LINES * 100
    );
    // Not 124 (the hang guard) and not success: cat saw a read error.
    assert!(!status.success() && status.code() != Some(124), "{status}: {cat_err}");
    assert!(cat_err.contains("Input/output error") || cat_err.contains("timed out"), "{cat_err}");
    assert!((printed as usize) < LINES * 100, "cat finished before the kill: make it bigger");
    let daemon_log = std::fs::read_to_string(&log).unwrap();
    let logged =
        daemon_log.lines().find(|l| l.contains(&broker.addr()) && l.contains("partition big/0"));
    assert!(logged.is_some(), "no log line names the broker and big/0:\n{daemon_log}");

    // While the broker is down: `ls` of the mount answers from cached metadata (Metadata is
    // kept for metadata.max.age.ms); `ls` of a partition needs its offsets (ListOffsets) and
    // fails with EIO after the deadline. Neither hangs.
    let started = std::time::Instant::now();
    assert_eq!(sh(&format!("timeout 60 ls {mnt}")), "big\n");
    eprintln!("ls of the mount with the broker down took {:?}", started.elapsed());
    let started = std::time::Instant::now();
    let ls = sh_output(&format!("timeout 60 ls {mnt}/big/0"));
    eprintln!(
        "ls of a partition with the broker down took {:?}: {} {}{}",
        started.elapsed(),
        ls.status,
        String::from_utf8_lossy(&ls.stdout),
        String::from_utf8_lossy(&ls.stderr)
    );
    assert_ne!(ls.status.code(), Some(124), "ls hung");
    if ls.status.success() {
        let listed = String::from_utf8_lossy(&ls.stdout).to_string();
        assert!(listed.contains("by-offset"), "{listed}");
    } else {
        let stderr = String::from_utf8_lossy(&ls.stderr).to_string();
        assert!(stderr.contains("Input/output error") || stderr.contains("timed out"), "{stderr}");
    }

    // A command of several requests (`ls -l` stats `info`, whose size needs ListOffsets
    // earliest and latest, and more) against the dead broker, once the broker has not counted
    // as down for a while (one deadline after the last failure): it ends within about one
    // deadline, since after the first request times out the others fail at once; run again
    // at once, it fails at once. Times printed, not asserted.
    std::thread::sleep(std::time::Duration::from_millis(u64::from(TIMEOUT_MS) + 500));
    for round in ["first", "again"] {
        let started = std::time::Instant::now();
        let ls =
            sh_output(&format!("timeout 60 ls -l {mnt}/big/0; timeout 60 cat {mnt}/big/0/info"));
        eprintln!(
            "ls -l and cat info of a partition with the broker down ({round}) took {:?} \
             (request.timeout.ms={TIMEOUT_MS}): {} {}",
            started.elapsed(),
            ls.status,
            String::from_utf8_lossy(&ls.stderr)
        );
        assert_ne!(ls.status.code(), Some(124), "ls -l or cat hung");
        assert!(!ls.status.success(), "cat info with the broker down succeeded");
        let stderr = String::from_utf8_lossy(&ls.stderr).to_string();
        assert!(stderr.contains("Input/output error") || stderr.contains("timed out"), "{stderr}");
    }

    // The broker back on the same port: a new cat reads everything, without a remount.
    broker.restart();
    let started = std::time::Instant::now();
    assert_eq!(
        sh(&format!("timeout 300 cat {mnt}/big/0/by-offset/0 | wc -l")).trim(),
        LINES.to_string()
    );
    eprintln!("cat after the restart took {:?}", started.elapsed());
    assert_eq!(
        sh(&format!("timeout 60 tail -n 1 {mnt}/big/0/by-offset/0")),
        format!("{LINES} {}\n", "x".repeat(92))
    );

    // Down again: unmount still works (and the daemon exits cleanly).
    broker.kill();
    let started = std::time::Instant::now();
    m.unmount();
    eprintln!("unmount with the broker down took {:?}", started.elapsed());
}

/// `<topic>/config` on a cluster mount goes through DescribeConfigs and
/// IncrementalAlterConfigs: `echo name=value >> config` sets the topic's override on the
/// broker, `cat` shows it, `name=` removes it. (tansu lists only the overrides it keeps, with
/// the source DEFAULT_CONFIG, so they read as `kafka-default`: see doc/cluster-brokers.md.)
#[test]
fn cluster_mount_config_sets_shows_and_removes_a_topics_override_on_the_broker() {
    let broker = Tansu::start();
    let m = mount(&broker, &[]);
    let mnt = m.mnt();
    let mnt = mnt.display();
    sh(&format!("mkdir {mnt}/t"));
    sh(&format!("echo retention.ms=86400000 >> {mnt}/t/config"));
    let shown = sh(&format!("cat {mnt}/t/config"));
    assert!(shown.lines().any(|l| l == "retention.ms=86400000 # kafka-default"), "{shown}");
    sh(&format!("echo retention.ms= >> {mnt}/t/config"));
    let shown = sh(&format!("cat {mnt}/t/config"));
    assert!(!shown.contains("retention.ms=86400000"), "{shown}");
    m.unmount();
}

/// Records with schemas on a cluster mount: the `_schemas` topic is read through the cluster
/// like any topic (here written through the mount, as the registry would write it), an
/// `append.json` payload naming the schema is encoded, and `.json` shows it decoded.
#[test]
fn cluster_mount_records_with_schemas_from_the_schemas_topic() {
    let broker = Tansu::start();
    let m = mount(&broker, &["-o", "schemas=on"]);
    std::fs::create_dir(m.path("_schemas")).unwrap();
    let schema = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"customer","type":"string"}]}"#;
    let key =
        serde_json::json!({"keytype": "SCHEMA", "subject": "t-value", "version": 1, "magic": 1});
    let value = serde_json::json!({"subject": "t-value", "version": 1, "id": 41, "schema": schema});
    let line = serde_json::json!({"key": key.to_string(), "payload": value.to_string()});
    std::fs::write(m.path("_schemas/0/append.json"), format!("{line}\n")).unwrap();
    std::fs::create_dir(m.path("t")).unwrap();
    let order = serde_json::json!({"id": 7, "customer": "ann"});
    let append = serde_json::json!({"payload": order, "payload_subject": "t-value"});
    std::fs::write(m.path("t/0/append.json"), format!("{append}\n")).unwrap();
    let out = sh(&format!("cat {}", m.path("t/0/by-offset/0.json").display()));
    let line: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
    assert_eq!(line["payload"], order, "{out}");
    assert_eq!(line["payload_schema_id"], 41, "{out}");
    // The bytes as stored: magic byte, id 41, the Avro body.
    let raw = std::fs::read(m.path("t/0/by-offset/0")).unwrap();
    assert_eq!(&raw[..5], &[0, 0, 0, 0, 41], "{raw:?}");
    assert_eq!(sh(&format!("ls {}", m.path("t/schemas").display())), "t-value\n");
    m.unmount();
}

/// `where/<filter>/` on a cluster mount (issue 46): the filter runs in the mount over what
/// Fetch returns, and `cat` of a filtered stream is what `jq` keeps from the unfiltered one.
#[test]
fn cluster_mount_filtered_streams_are_what_jq_keeps() {
    let broker = Tansu::start();
    let m = mount(&broker, &[]);
    let mnt = m.mnt();
    let mnt = mnt.display();
    sh(&format!("mkdir {mnt}/orders"));
    let lines: String = (0..600)
        .map(|i| {
            if i % 9 == 2 {
                format!("not json {i}\n")
            } else {
                format!("{{\"id\":{i},\"user\":\"user-{}\",\"qty\":{}}}\n", i % 20, i % 5)
            }
        })
        .collect();
    std::fs::write(m.path("orders/0/append"), lines).unwrap();
    for (filter, jq) in [
        ("user=user-13", r#"select(.user=="user-13")"#),
        ("qty>3,user~-1", r#"select(.qty>3 and (.user|contains("-1")))"#),
    ] {
        let want = sh(&format!("jq -cR 'fromjson? | {jq}' {mnt}/orders/0/by-offset/0"));
        assert!(!want.is_empty(), "{filter}");
        let got = sh(&format!("cat '{mnt}/orders/where/{filter}/0/by-offset/0'"));
        assert_eq!(got, want, "{filter}");
        let json = sh(&format!("jq -c .payload '{mnt}/orders/where/{filter}/0/by-offset/0.json'"));
        assert_eq!(json.lines().count(), want.lines().count(), "{filter}.json");
    }
    m.unmount();
}
