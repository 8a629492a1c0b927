//! Scale of a cluster mount against tansu (issue 16, "Scale"): many partitions listed through
//! the mount, and many concurrent readers sharing one connection per broker with the daemon's
//! memory bounded by `--memory-budget`. Figures are printed, never asserted (no timing
//! assertions); completeness, the connection count and the memory bound are asserted.

use crate::common;

use std::collections::HashSet;
use std::ffi::OsString;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::tansu::Tansu;
use common::{Dirs, MountGuard, sh};

fn mount(broker: &Tansu, args: &[&str]) -> MountGuard {
    let mut all = vec!["--config", "request.timeout.ms=30000"];
    all.extend_from_slice(args);
    let source = OsString::from(broker.bootstrap());
    MountGuard::foreground_source(Dirs::new(), &source, &all, Stdio::inherit())
}

/// The daemon's TCP connections to 127.0.0.1:`port` that are established: the socket inodes
/// among /proc/PID/fd matched against /proc/PID/net/tcp (remote port `port`, state 01).
fn connections_to(pid: u32, port: u16) -> usize {
    let mut inodes = HashSet::new();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    for fd in fds.flatten() {
        if let Ok(target) = std::fs::read_link(fd.path()) {
            let t = target.to_string_lossy();
            if let Some(inode) = t.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                inodes.insert(inode.to_string());
            }
        }
    }
    let tcp = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
    let want = format!("{port:04X}");
    tcp.lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 9
                && f[2].rsplit(':').next() == Some(want.as_str())
                && f[3] == "01"
                && inodes.contains(f[9])
        })
        .count()
}

/// A field of /proc/PID/status in KiB (VmRSS, VmHWM).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// 100 topics of 100 partitions (10,000 partitions) made through the mount (`mkdir` with
/// `--partitions 100`), then `ls` of the mount root and of every topic directory: the listing
/// is complete. The times are printed: the first listing after the topics were created, a
/// second one from the cached Metadata, and the first listing of a second, fresh mount of the
/// same cluster (right after its first Metadata, asked when mounting).
#[test]
fn cluster_scale_ten_thousand_partitions_list_completely() {
    const TOPICS: usize = 100;
    const PARTITIONS: usize = 100;
    let broker = Tansu::start();
    let m = mount(&broker, &["--partitions", &PARTITIONS.to_string()]);
    let mnt = m.mnt();
    let mnt = mnt.display().to_string();
    let started = Instant::now();
    sh(&format!("for i in $(seq -w 0 {}); do mkdir {mnt}/t$i; done", TOPICS - 1));
    eprintln!(
        "created {TOPICS} topics x {PARTITIONS} partitions through the mount in {:?}",
        started.elapsed()
    );
    let expected_topics: Vec<String> = (0..TOPICS).map(|i| format!("t{i:02}")).collect();
    let expected_parts: HashSet<String> = (0..PARTITIONS).map(|p| p.to_string()).collect();
    // A fresh mount of the same cluster: its first listing follows the mount's first Metadata.
    let fresh = mount(&broker, &[]);
    let fresh_mnt = fresh.mnt().display().to_string();
    for (round, mnt) in [("first", &mnt), ("second", &mnt), ("fresh mount's first", &fresh_mnt)] {
        let started = Instant::now();
        let listing = sh(&format!("ls {mnt} && for t in {mnt}/*; do echo \"== $t\"; ls $t; done"));
        let took = started.elapsed();
        eprintln!(
            "{round} ls of the root and all {TOPICS} topic directories \
             ({} partitions): {took:?}",
            TOPICS * PARTITIONS
        );
        let mut sections = listing.split("== ");
        let root: Vec<&str> = sections.next().unwrap().lines().collect();
        assert_eq!(root, expected_topics, "root listing");
        let mut seen = 0;
        for section in sections {
            let mut lines = section.lines();
            let dir = lines.next().unwrap();
            let parts: HashSet<String> =
                lines.filter(|l| l.parse::<u32>().is_ok()).map(ToString::to_string).collect();
            assert_eq!(parts, expected_parts, "partitions listed in {dir}");
            seen += 1;
        }
        assert_eq!(seen, TOPICS);
    }
    fresh.unmount();
    m.unmount();
}

/// 100 concurrent `cat by-offset/0` readers (of 4 partitions of 2 MB, 25 each) through one mount: each
/// reads exactly the partition's records; while they run the daemon holds exactly two TCP
/// connections to the (one) broker: one all readers share, bootstrap and leader alike, since
/// connections are keyed by address and the bootstrap address is the broker's advertised one,
/// and one of background work's own client; the daemon's peak RSS is
/// printed and stays below its RSS before the readers plus `--memory-budget` plus a fixed
/// allowance for the readers' threads and buffers (doc/DESIGN-NOTES.md, "Memory").
#[test]
fn cluster_scale_hundred_concurrent_readers_share_one_connection_and_bounded_memory() {
    const READERS: usize = 100;
    const PARTITIONS: usize = 4;
    const LINES: usize = 200;
    const BUDGET_MIB: u64 = 16;
    /// Beyond the budget: thread stacks touched, per-handle buffers and allocator slack.
    const ALLOWANCE_MIB: u64 = 48;
    let broker = Tansu::start();
    let budget = format!("{BUDGET_MIB}M");
    let m = mount(&broker, &["--partitions", &PARTITIONS.to_string(), "--memory-budget", &budget]);
    let mnt = m.mnt();
    let mnt = mnt.display();
    let scratch = tempfile::tempdir().unwrap();
    let lines = scratch.path().join("lines");
    sh(&format!("mkdir {mnt}/r"));
    sh(&format!(
        "seq -w 1 {LINES} | sed 's/$/ {pad}/' > {lines}",
        pad = "x".repeat(10_000),
        lines = lines.display()
    ));
    for p in 0..PARTITIONS {
        sh(&format!("cat {} >> {mnt}/r/{p}/append", lines.display()));
    }
    let expected = std::fs::read(&lines).unwrap();
    let pid = m.pid;
    let port = broker.port();
    let rss_before = status_kib(pid, "VmRSS");
    eprintln!("connections before the readers: {}", connections_to(pid, port));

    let out = scratch.path().display().to_string();
    let mut readers = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "for i in $(seq 1 {READERS}); do \
               timeout 300 cat {mnt}/r/$((i % {PARTITIONS}))/by-offset/0 > {out}/out.$i & \
             done; wait"
        ))
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut samples = Vec::new();
    while readers.try_wait().unwrap().is_none() {
        samples.push(connections_to(pid, port));
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = started.elapsed();
    let status = readers.wait().unwrap();
    assert!(status.success(), "{status}");
    let peak_kib = status_kib(pid, "VmHWM");
    let max_conns = samples.iter().copied().max().unwrap_or(0);
    eprintln!(
        "{READERS} concurrent readers ({LINES} records of 10 KB each) took {took:?}; \
         connections to the broker sampled {} times: min {}, max {max_conns}; daemon RSS \
         before {} KiB, peak (VmHWM) {peak_kib} KiB, --memory-budget {BUDGET_MIB} MiB",
        samples.len(),
        samples.iter().copied().min().unwrap_or(0),
        rss_before
    );
    for i in 1..=READERS {
        let got = std::fs::read(format!("{out}/out.{i}")).unwrap();
        assert!(
            got == expected,
            "reader {i} read {} bytes, not the {} appended",
            got.len(),
            expected.len()
        );
    }
    assert!(samples.len() > 1, "the readers ended before a sample");
    assert_eq!(
        max_conns, 2,
        "connections to the one broker while {READERS} readers ran (the readers' and background work's)"
    );
    let bound_kib = rss_before + (BUDGET_MIB + ALLOWANCE_MIB) * 1024;
    assert!(peak_kib <= bound_kib, "peak RSS {peak_kib} KiB over {bound_kib} KiB");
    m.unmount();
}
