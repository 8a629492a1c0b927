//! The log cleaner's figure (issue 31): cleaning a dirty partition with many distinct keys
//! against `cp -r` of the same partition on the same disk, in the same run, and the cleaner's
//! peak RSS against its dedupe buffer. Run through `scripts/bench --cleaner`.
//!
//! `cleaner-bench --work DIR [--bytes N] [--keys N] [--value-bytes N] [--dedupe SIZE]
//! [--segment-bytes N]`: writes a partition of about N bytes of keyed records (keys drawn
//! from `--keys` distinct ones, so most are overwritten several times), copies it with
//! `cp -r` followed by `sync`, then cleans the copy in a child process (`--clean-only`), which
//! reports its own wall time and peak RSS (`VmHWM`). Prints one table and the ratio.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use topicfs::cleaner::{CleanOptions, Cleaner, CleanerSettings};
use topicfs::format::{Offset, RecordRef};
use topicfs::storage::LogConfig;
use topicfs::storage::log::{LoadState, Log};
use topicfs::storage::segment::SegmentMode;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn size(text: &str) -> u64 {
    let (num, mult) = match text.chars().last() {
        Some('K' | 'k') => (&text[..text.len() - 1], 1 << 10),
        Some('M' | 'm') => (&text[..text.len() - 1], 1 << 20),
        Some('G' | 'g') => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    num.parse::<u64>().expect("a size") * mult
}

fn config(segment_bytes: u64) -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", &segment_bytes.to_string()).unwrap();
    c.set("retention.ms", "-1").unwrap();
    c
}

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The child: cleans `dir` fully and prints `seconds passes peak_rss_kib bytes_after`.
fn clean_only(dir: &Path, dedupe: usize, segment_bytes: u64) {
    let state = LoadState { had_clean_shutdown: true, ..LoadState::default() };
    let log = Log::open(dir, "bench", 0, config(segment_bytes), SegmentMode::Writable, state)
        .expect("open the copy");
    let settings = CleanerSettings {
        segment_bytes,
        dedupe_buffer_bytes: dedupe,
        min_cleanable_dirty_ratio: 0.0,
        ..CleanerSettings::default()
    };
    let start = Instant::now();
    let mut cleaner = Cleaner::new(dedupe);
    let mut checkpoint: Option<Offset> = None;
    let mut passes = 0;
    let opts = CleanOptions { now: 4_000_000_000_000, ..CleanOptions::default() };
    while let Some(stats) = cleaner.clean(&log, &settings, checkpoint, &opts).expect("clean") {
        passes += 1;
        checkpoint = Some(stats.end_offset);
        if stats.end_offset >= stats.first_uncleanable {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes: u64 = log.segment_list().iter().map(|s| s.size()).sum();
    log.close().expect("close");
    println!("{secs} {passes} {} {bytes}", vm_hwm_kib());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dedupe = size(&arg(&args, "--dedupe").unwrap_or_else(|| "128M".into())) as usize;
    let segment_bytes = size(&arg(&args, "--segment-bytes").unwrap_or_else(|| "128M".into()));
    if let Some(dir) = arg(&args, "--clean-only") {
        clean_only(Path::new(&dir), dedupe, segment_bytes);
        return;
    }
    let work =
        PathBuf::from(arg(&args, "--work").unwrap_or_else(|| "/var/tmp/topicfs-bench".into()));
    let bytes = size(&arg(&args, "--bytes").unwrap_or_else(|| "1G".into()));
    let keys: u64 = arg(&args, "--keys").map_or(1_000_000, |k| size(&k));
    let value_bytes = size(&arg(&args, "--value-bytes").unwrap_or_else(|| "150".into())) as usize;
    let root = work.join("cleaner");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let src = root.join("src");
    std::fs::create_dir(&src).unwrap();
    let dir = src.join("bench-0");

    // The dirty partition: batches of 100 records, keys drawn from `keys`.
    let t = Instant::now();
    let log = Log::create(&dir, "bench", 0, config(segment_bytes)).unwrap();
    let value = vec![b'v'; value_bytes];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut written = 0u64;
    let mut records = 0u64;
    let mut names: Vec<Vec<u8>> = Vec::with_capacity(100);
    while written < bytes {
        names.clear();
        for _ in 0..100 {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let k = x.wrapping_mul(0x2545_F491_4F6C_DD1D) % keys;
            names.push(format!("key-{k:08}").into_bytes());
        }
        let batch: Vec<RecordRef<'_>> = names
            .iter()
            .map(|k| RecordRef {
                timestamp: 1_767_225_600_000,
                key: Some(k),
                value: Some(&value),
                headers: &[],
            })
            .collect();
        log.append_refs(&batch).unwrap();
        records += 100;
        written = log.segment_list().iter().map(|s| s.size()).sum();
    }
    log.force_roll().unwrap();
    log.close().unwrap();
    drop(log);
    let segments = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "log")))
        .count();
    eprintln!(
        "generated {records} records, {written} bytes, {segments} segments, {keys} keys in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    // Baseline: cp -r of the partition on the same disk, then sync.
    let copy_root = root.join("copy");
    let t = Instant::now();
    let ok = Command::new("cp").arg("-r").arg(&src).arg(&copy_root).status().unwrap().success();
    assert!(ok, "cp -r");
    assert!(Command::new("sync").status().unwrap().success());
    let cp_secs = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&copy_root);

    // The cleaner, in a child process so that its peak RSS is its own.
    let clean_root = root.join("clean");
    assert!(Command::new("cp").arg("-r").arg(&src).arg(&clean_root).status().unwrap().success());
    assert!(Command::new("sync").status().unwrap().success());
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--clean-only", clean_root.join("bench-0").to_str().unwrap()])
        .args(["--dedupe", &dedupe.to_string(), "--segment-bytes", &segment_bytes.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "clean: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let f: Vec<f64> = text.split_whitespace().map(|v| v.parse().unwrap()).collect();
    let (clean_secs, passes, rss_kib, after) = (f[0], f[1], f[2], f[3]);
    let rss_mib = rss_kib / 1024.0;
    let limit_mib = dedupe as f64 / (1 << 20) as f64 + 64.0;
    println!("| figure | value |");
    println!("|---|---|");
    println!(
        "| partition | {written} bytes, {records} records, {keys} distinct keys, {segments} segments |"
    );
    println!("| cp -r + sync | {cp_secs:.2} s |");
    println!("| clean ({passes} pass(es), output {after:.0} bytes) | {clean_secs:.2} s |");
    println!("| ratio clean / cp | {:.2}x (target <= 4x) |", clean_secs / cp_secs);
    println!(
        "| cleaner peak RSS | {rss_mib:.0} MiB (target <= dedupe {:.0} MiB + 64 MiB = {limit_mib:.0} MiB) |",
        dedupe as f64 / (1 << 20) as f64
    );
    let _ = std::fs::remove_dir_all(&root);
}
