//! `topicfs-bench`: the measurements behind `scripts/bench`. An example target, so that it is
//! built by `cargo test` and clippy but never installed as a second binary.
//!
//! Generates its own data dirs with the engine, then measures every figure of BENCHMARKS.md
//! against a baseline taken in the same run: repetitions alternate between the subject and its
//! baseline (A B B A ...), so a machine shared with other work slows both alike, and each figure
//! is reported as the median of its repetitions, their spread (min..max), and the median of the
//! per-repetition ratios.
//!
//! In-process figures call the engine ([`LogDirs`], [`Log`]) and the views directly. Mount
//! figures run the real daemon (`topicfs mount DATA MNT -f`) and real tools (`cat`, `tail`)
//! against it; every daemon this program starts is unmounted and reaped before it exits, and its
//! pid is listed in `<work>/daemons.pid` so `scripts/bench` can clean up after a crash.
//!
//! Output: a table on stdout and every figure as JSON (`--json`).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[path = "bench/ceiling.rs"]
mod ceiling;

use clap::Parser;
use serde_json::{Value, json};

use topicfs::format::{NewRecord, Offset, decode_batch};
use topicfs::source::{OffsetQuery, PartitionSource};
use topicfs::storage::LogDirs;
use topicfs::storage::log::Log;
use topicfs::storage::{LogConfig, SegmentMode};
use topicfs::view::{StreamRegistry, StreamSpec};

#[path = "bench/cluster.rs"]
mod cluster;
#[path = "bench/cluster_net.rs"]
mod cluster_net;
#[path = "bench/cluster_wide.rs"]
mod cluster_wide;
#[path = "bench/schemas.rs"]
mod schemas;
#[path = "bench/shutdown.rs"]
mod shutdown;

/// Bytes of every generated record value (and of every line written to `append`, newline
/// included).
const VALUE_BYTES: usize = 100;
/// Records per appended batch.
const BATCH_RECORDS: usize = 1000;
/// The generated topic.
const TOPIC: &str = "bench";
/// Kafka's default `segment.bytes` (`log.segment.bytes`, 1 GiB): the segment size of the
/// partition the sequential-read targets are measured on, as a broker with default settings
/// would lay it out. The `--segments` partition (1,000 segments of 1.1 MB in full mode) is kept
/// for what depends on the number of segments: per-file costs, `ls`, mount and open times.
const KAFKA_SEGMENT_BYTES: u64 = 1 << 30;

#[derive(Parser, Debug)]
#[command(about = "Measure topicfs against same-run baselines (see BENCHMARKS.md)")]
struct Args {
    /// Small sizes for everyday use (under two minutes).
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// The sizes of BENCHMARKS.md: 10 million records in 1 GiB segments and in 1,000 segments.
    #[arg(long)]
    full: bool,
    /// Records of the generated partition (overrides the mode).
    #[arg(long)]
    records: Option<u64>,
    /// Segments of the generated partition (overrides the mode).
    #[arg(long)]
    segments: Option<u64>,
    /// Repetitions of each interleaved measurement (overrides the mode).
    #[arg(long)]
    reps: Option<usize>,
    /// Scratch directory (data dirs, mountpoints); on the disk being measured.
    #[arg(long, default_value = "/var/tmp/topicfs-bench")]
    work: PathBuf,
    /// Where to write the figures as JSON.
    #[arg(long, default_value = "bench.json")]
    json: PathBuf,
    /// The topicfs binary for mount figures.
    #[arg(long, default_value = "target/release/topicfs")]
    topicfs: PathBuf,
    /// Only the in-process figures (no mount).
    #[arg(long)]
    no_mount: bool,
    /// Keep the generated data dirs between runs when their size matches (faster reruns).
    #[arg(long)]
    reuse_data: bool,
    /// Only the by-key figures (issue 21): a partition of `--records` records (10 million in
    /// full mode) with a tenth as many distinct keys, in 1 GiB segments.
    #[arg(long)]
    by_key: bool,
    /// Only the many-readers figure (1, 10, 100 and 1,000 handles reading at once through a
    /// mount): the data it needs and nothing else.
    #[arg(long)]
    many_readers: bool,
    /// Only the cluster figures (examples/bench/cluster.rs): a cluster mount against
    /// confluent-kafka on a tansu broker started here.
    #[arg(long)]
    cluster: bool,
    /// Records of the cluster read partition (`cat by-offset/0` vs confluent-kafka).
    #[arg(long, default_value_t = 1_000_000)]
    cluster_records: u64,
    /// Records of the large partition for the cluster time to first byte (the read partition
    /// when not larger).
    #[arg(long, default_value_t = 5_000_000)]
    cluster_ttfb_records: u64,
    /// Lines of the cluster append figure.
    #[arg(long, default_value_t = 300_000)]
    cluster_append_lines: u64,
    /// tansu's storage engine for the cluster figures: memory or sqlite.
    #[arg(long, default_value = "memory")]
    cluster_engine: String,
    /// Only the cluster network figures (examples/bench/cluster_net.rs, issue 36): reads
    /// behind a delaying proxy, and `tail -f` followers of a produced partition.
    #[arg(long)]
    cluster_net: bool,
    /// Only the wide-topic cluster figures (examples/bench/cluster_wide.rs, issue 36 §4):
    /// topic-level files of a topic of many partitions, behind the delaying proxy.
    #[arg(long)]
    cluster_wide: bool,
    /// Partitions of the `--cluster-wide` topic.
    #[arg(long, default_value_t = 2000)]
    wide_partitions: u64,
    /// Records per partition of the `--cluster-wide` topic.
    #[arg(long, default_value_t = 5)]
    wide_records: u64,
    /// Round-trip times of the proxy for `--cluster-net` and `--cluster-wide`, in ms.
    #[arg(long, default_value = "0,4,20")]
    cluster_delays_ms: String,
    /// Producer variants of `--cluster-net`'s confluent-kafka-produced partitions (issue 47),
    /// comma-separated: linger0, linger5, linger20, two-producers, lz4; `none` for none.
    #[arg(long, default_value = "linger0,linger5,linger20,two-producers,lz4")]
    cluster_variants: String,
    /// Records of each `--cluster-variants` partition.
    #[arg(long, default_value_t = 1_000_000)]
    cluster_variant_records: u64,
    /// `--cluster-net` measures only the `--cluster-variants` partitions (not the mount-made
    /// partition at each delay, nor the followers).
    #[arg(long)]
    cluster_variants_only: bool,
    /// Follower counts for `--cluster-net`.
    #[arg(long, default_value = "1,4,16")]
    cluster_followers: String,
    /// Records/s confluent-kafka produces while the followers follow.
    #[arg(long, default_value_t = 75_000)]
    follow_rate: u64,
    /// Seconds confluent-kafka produces while the followers follow.
    #[arg(long, default_value_t = 20)]
    follow_seconds: u64,
    /// Only the FUSE-ceiling figures (topicfs against a null filesystem with the same FUSE
    /// settings) and the cold-open figures (issue 17): the data they need and nothing else.
    #[arg(long)]
    ceiling_and_cold: bool,
    /// Only the read rows of the FUSE ceiling (`cat by-offset/0` and `.json` against the null
    /// filesystem and raw `cat`): no appends, no cold opens. With `--reuse-data` the 1 GiB-segment
    /// partition is kept for the next run.
    #[arg(long)]
    ceiling_reads: bool,
    /// Records of the large cold-open partition (default: about 10 GB of log when the disk has
    /// 20 GB free, else the largest that leaves 10 GB free).
    #[arg(long)]
    cold_records: Option<u64>,
    /// With `--ceiling-and-cold`: only the cold-open figures (no ceiling rows).
    #[arg(long)]
    cold_only: bool,
    /// Only the append rows of the FUSE ceiling (`cat lines >> append` against the null
    /// filesystem's write and `cat >> plain file`): no read data is generated.
    #[arg(long)]
    ceiling_append: bool,
    /// Only the shutdown figures (issue 32, examples/bench/shutdown.rs): SIGTERM to exit with
    /// `--shutdown-segments` unsynced segments, with and without a `tail -f` reader, against
    /// `sync -f` and an fsync per file of a copy of the same files.
    #[arg(long)]
    shutdown: bool,
    /// Unsynced segments of the shutdown figures.
    #[arg(long, default_value_t = 10_000)]
    shutdown_segments: u64,
    /// Only the records-with-schemas figures (issue 35, examples/bench/schemas.rs): `cat
    /// by-offset/0.json` of `--schema-records` Avro values on a mount with schemas, against the
    /// same with `-o schemas=off` and against fastavro decoding the same values in Python.
    #[arg(long)]
    schemas: bool,
    /// Avro values of the `--schemas` figures.
    #[arg(long, default_value_t = 1_000_000)]
    schema_records: u64,
    /// Lines per repetition of the append-through-the-mount figures (default: 300,000 quick,
    /// 2,000,000 full).
    #[arg(long)]
    append_lines: Option<u64>,
    /// Lines appended for the `--ceiling-reads` figure of `tail -n 10` on the next mount of a
    /// log topicfs wrote (issue 36 §3).
    #[arg(long, default_value_t = 5_000_000)]
    remount_lines: u64,
}

/// Sizes of one run.
#[derive(Clone, Debug)]
struct Plan {
    mode: &'static str,
    records: u64,
    segments: u64,
    reps: usize,
    /// Records per repetition of the in-process append figure.
    engine_append_records: u64,
    /// Lines per repetition of the append-through-the-mount figure.
    mount_append_lines: u64,
    /// Random lookups per kind in-process / through the mount.
    lookups_in_process: usize,
    lookups_mount: usize,
    /// The read-only broker figure: partitions x segments.
    broker_partitions: u32,
    broker_segments: u64,
}

impl Plan {
    fn from_args(a: &Args) -> Plan {
        let mut p = if a.full {
            Plan {
                mode: "full",
                records: 10_000_000,
                segments: 1000,
                reps: 5,
                engine_append_records: 5_000_000,
                mount_append_lines: 2_000_000,
                lookups_in_process: 20_000,
                lookups_mount: 1000,
                broker_partitions: 100,
                broker_segments: 20,
            }
        } else {
            Plan {
                mode: "quick",
                records: 1_000_000,
                segments: 100,
                reps: 3,
                engine_append_records: 1_000_000,
                mount_append_lines: 300_000,
                lookups_in_process: 5000,
                lookups_mount: 300,
                broker_partitions: 100,
                broker_segments: 20,
            }
        };
        if let Some(r) = a.records {
            p.records = r.max(BATCH_RECORDS as u64);
            p.mode = "custom";
        }
        if let Some(n) = a.append_lines {
            p.mount_append_lines = n.max(1);
        }
        if let Some(s) = a.segments {
            p.segments = s.max(1);
            p.mode = "custom";
        }
        if let Some(r) = a.reps {
            p.reps = r.max(1);
        }
        p
    }
}

// ---- statistics ---------------------------------------------------------------------------

/// Median, min and max of some repetitions.
#[derive(Clone, Copy, Debug)]
struct Stat {
    median: f64,
    min: f64,
    max: f64,
}

/// Appends per mount in the ceiling's append figure (each of 300,000 lines by default).
const APPENDS_PER_MOUNT: usize = 5;

/// Min, quartiles and max of some samples (nearest rank).
fn distribution(samples: &[f64]) -> [f64; 5] {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let i = ((s.len() as f64 - 1.0) * q).round() as usize;
        s.get(i).copied().unwrap_or(f64::NAN)
    };
    [at(0.0), at(0.25), at(0.5), at(0.75), at(1.0)]
}

fn stat(samples: &[f64]) -> Stat {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return Stat { median: f64::NAN, min: f64::NAN, max: f64::NAN };
    }
    let median = if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 };
    Stat { median, min: s[0], max: s[n - 1] }
}

/// The `q`-quantile (0..=1) of sorted samples, nearest rank.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Latency samples in microseconds: p50, p99, max.
fn latency(mut us: Vec<f64>) -> (f64, f64, f64) {
    us.sort_by(f64::total_cmp);
    (quantile(&us, 0.5), quantile(&us, 0.99), us.last().copied().unwrap_or(f64::NAN))
}

/// Latency samples (µs) taken in `rounds` consecutive rounds: the median over rounds of each
/// round's p50 and p99, and the best and worst round's p99 (a noisy neighbour inflates the tail
/// of some rounds; the spread shows how much).
struct Rounds {
    p50: f64,
    p99: f64,
    p99_best: f64,
    p99_worst: f64,
    max: f64,
}

fn latency_rounds(us: &[f64], rounds: usize) -> Rounds {
    let per = (us.len() / rounds.max(1)).max(1);
    let (mut p50s, mut p99s) = (vec![], vec![]);
    for chunk in us.chunks(per) {
        let (p50, p99, _) = latency(chunk.to_vec());
        p50s.push(p50);
        p99s.push(p99);
    }
    let p99 = stat(&p99s);
    Rounds {
        p50: stat(&p50s).median,
        p99: p99.median,
        p99_best: p99.min,
        p99_worst: p99.max,
        max: us.iter().copied().fold(f64::NAN, f64::max),
    }
}

/// A small deterministic generator (xorshift64*): the benchmark needs spread, not secrecy.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

// ---- the report -----------------------------------------------------------------------------

/// One row of the table.
struct Row {
    section: &'static str,
    name: String,
    value: String,
    baseline: String,
    ratio: String,
    target: String,
    verdict: &'static str,
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    json: BTreeMap<String, Value>,
    notes: Vec<String>,
}

impl Report {
    /// A row of a time in seconds (shown in ms), with no baseline; `under` is the target
    /// (its text and the limit in seconds) when there is one.
    fn seconds_row(
        &mut self,
        section: &'static str,
        name: impl Into<String>,
        seconds: f64,
        under: Option<(&str, f64)>,
    ) {
        let (target, met) = match under {
            Some((text, limit)) => (text, Some(seconds < limit)),
            None => ("", None),
        };
        self.row(section, name, fmt_ms(seconds), "", "", target, met);
    }

    #[allow(clippy::too_many_arguments)]
    fn row(
        &mut self,
        section: &'static str,
        name: impl Into<String>,
        value: impl Into<String>,
        baseline: impl Into<String>,
        ratio: impl Into<String>,
        target: impl Into<String>,
        met: Option<bool>,
    ) {
        let verdict = match met {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "",
        };
        self.rows.push(Row {
            section,
            name: name.into(),
            value: value.into(),
            baseline: baseline.into(),
            ratio: ratio.into(),
            target: target.into(),
            verdict,
        });
    }

    /// A row comparing two transfer rates: `(seconds, bytes)` of the figure and of its
    /// baseline, the ratio baseline time / figure time (higher is better), and `min` as the
    /// target when there is one.
    fn rate_ratio_row(
        &mut self,
        section: &'static str,
        name: &str,
        (secs, bytes): (f64, u64),
        (base_secs, base_bytes): (f64, u64),
        min: Option<f64>,
    ) {
        let r = base_secs / secs;
        self.row(
            section,
            name,
            fmt_rate_cell(secs, bytes),
            fmt_rate_cell(base_secs, base_bytes),
            format!("{r:.2}"),
            min.map_or(String::new(), |m| format!(">= {m:.2}")),
            min.map(|m| r >= m),
        );
    }

    fn put(&mut self, key: &str, value: Value) {
        self.json.insert(key.to_string(), value);
    }

    fn print(&self) {
        let headers = ["figure", "topicfs", "baseline", "ratio", "target", ""];
        let mut widths = headers.map(str::len);
        for r in &self.rows {
            for (i, cell) in
                [&r.name, &r.value, &r.baseline, &r.ratio, &r.target].iter().enumerate()
            {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let line = |cells: [&str; 6]| {
            let mut s = String::from("|");
            for (i, c) in cells.iter().enumerate() {
                let pad = widths[i].saturating_sub(c.chars().count());
                s.push_str(&format!(" {c}{} |", " ".repeat(pad)));
            }
            println!("{s}");
        };
        // Rows grouped by section, in this order, each group in the order measured.
        const ORDER: [&str; 14] = [
            "shutdown",
            "cluster",
            "schemas",
            "append",
            "read",
            "many readers",
            "lookup",
            "tail",
            "ls",
            "mount",
            "open",
            "memory",
            "CPU",
            "machine",
        ];
        let rank = |s: &str| ORDER.iter().position(|o| *o == s).unwrap_or(ORDER.len());
        let mut rows: Vec<&Row> = self.rows.iter().collect();
        rows.sort_by_key(|r| rank(r.section));
        let mut section = "";
        line(headers);
        let sep: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line([&sep[0], &sep[1], &sep[2], &sep[3], &sep[4], &sep[5]]);
        for r in rows {
            if r.section != section {
                section = r.section;
                line([&format!("**{section}**"), "", "", "", "", ""]);
            }
            line([&r.name, &r.value, &r.baseline, &r.ratio, &r.target, r.verdict]);
        }
        for n in &self.notes {
            println!("\nnote: {n}");
        }
    }
}

fn fmt_rate(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.2} M", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.1} k", per_s / 1e3)
    } else {
        format!("{per_s:.1}")
    }
}

fn fmt_spread(s: &Stat, scale: f64, unit: &str) -> String {
    format!("{:.0}..{:.0} {unit}", s.min * scale, s.max * scale)
}

fn fmt_ms(s: f64) -> String {
    if s < 0.01 { format!("{:.3} ms", s * 1e3) } else { format!("{:.1} ms", s * 1e3) }
}

// ---- data generation ------------------------------------------------------------------------

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A reusable batch of [`BATCH_RECORDS`] records with [`VALUE_BYTES`]-byte printable values;
/// [`Batch::fill`] stamps record number and timestamp in place.
struct Batch {
    records: Vec<NewRecord>,
}

impl Batch {
    fn new(n: usize) -> Batch {
        let mut value = vec![b'x'; VALUE_BYTES];
        value[..7].copy_from_slice(b"record ");
        let records = (0..n)
            .map(|_| NewRecord {
                timestamp: 0,
                key: None,
                value: Some(value.clone()),
                headers: vec![],
            })
            .collect();
        Batch { records }
    }

    /// Record `first + i` gets timestamp `t0 + first + i` (one millisecond apart) and its
    /// number in the value.
    fn fill(&mut self, first: u64, t0: i64) {
        for (i, r) in self.records.iter_mut().enumerate() {
            let n = first + i as u64;
            r.timestamp = t0 + n as i64;
            if let Some(v) = r.value.as_mut() {
                write_decimal(&mut v[7..19], n);
            }
        }
    }
}

/// Writes `lines` lines of `VALUE_BYTES` bytes each (`line NNNNNNNNNNNN yyy…`) to `path` and
/// reads them once, so they come from the page cache when timed.
fn write_lines_file(path: &Path, lines: u64) -> Result<(), String> {
    {
        let mut out = std::io::BufWriter::new(File::create(path).map_err(|e| e.to_string())?);
        let mut line = vec![b'y'; VALUE_BYTES];
        line[..5].copy_from_slice(b"line ");
        line[VALUE_BYTES - 1] = b'\n';
        for n in 0..lines {
            write_decimal(&mut line[5..17], n);
            out.write_all(&line).map_err(|e| e.to_string())?;
        }
    }
    time_sh(&format!("cat {}", sh_quote(path)))?;
    Ok(())
}

/// Writes `n` as zero-padded decimal filling `out`.
fn write_decimal(out: &mut [u8], mut n: u64) {
    for b in out.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// What was generated in a data dir.
#[derive(Clone, Debug)]
struct Generated {
    dir: PathBuf,
    records: u64,
    /// Timestamp of record 0 (record `n` has `t0 + n`).
    t0: i64,
    log_bytes: u64,
    segments: usize,
}

fn bench_config(segment_bytes: u64) -> LogConfig {
    LogConfig { segment_bytes, retention_ms: None, ..LogConfig::default() }
}

/// Size of one encoded batch of the generator (to size segments).
fn batch_bytes(scratch: &Path) -> Result<u64, String> {
    let dir = scratch.join("probe");
    let _ = fs::remove_dir_all(&dir);
    let logs =
        LogDirs::open_dir(&dir, bench_config(1 << 30), Default::default(), SegmentMode::Writable)
            .map_err(|e| e.to_string())?;
    logs.create_topic(TOPIC, 1).map_err(|e| e.to_string())?;
    let log = logs.log(TOPIC, 0).map_err(|e| e.to_string())?;
    let mut batch = Batch::new(BATCH_RECORDS);
    batch.fill(1_000_000, now_ms());
    log.append(&batch.records).map_err(|e| e.to_string())?;
    let size = log_bytes(&log);
    logs.shutdown().map_err(|e| e.to_string())?;
    let _ = fs::remove_dir_all(&dir);
    Ok(size)
}

fn log_bytes(log: &Log) -> u64 {
    log.segment_list().iter().map(|s| s.size()).sum()
}

/// Creates `partitions` partitions of topic [`TOPIC`] in a fresh data dir, each with `records`
/// records in about `segments` segments. Returns the figures of the first partition.
fn generate(
    dir: &Path,
    partitions: u32,
    records: u64,
    segments: u64,
    per_batch: usize,
    batch_size: u64,
) -> Result<(Generated, Duration), String> {
    let batches = records.div_ceil(per_batch as u64);
    let per_segment = batches.div_ceil(segments.max(1)).max(1);
    let one = batch_size * per_batch as u64 / BATCH_RECORDS as u64 + 64;
    let segment_bytes = per_segment * one + one / 2;
    generate_sized(dir, partitions, records, segment_bytes, per_batch)
}

/// Like [`generate`], with segments rolled at `segment_bytes`.
fn generate_sized(
    dir: &Path,
    partitions: u32,
    records: u64,
    segment_bytes: u64,
    per_batch: usize,
) -> Result<(Generated, Duration), String> {
    let _ = fs::remove_dir_all(dir);
    let logs = LogDirs::open_dir(
        dir,
        bench_config(segment_bytes),
        Default::default(),
        SegmentMode::Writable,
    )
    .map_err(|e| e.to_string())?;
    logs.create_topic(TOPIC, partitions).map_err(|e| e.to_string())?;
    let t0 = now_ms() - records as i64 - 60_000;
    let mut batch = Batch::new(per_batch);
    let start = Instant::now();
    for p in 0..partitions {
        let log = logs.log(TOPIC, p).map_err(|e| e.to_string())?;
        let mut n = 0;
        while n < records {
            let k = (records - n).min(per_batch as u64) as usize;
            batch.fill(n, t0);
            log.append(&batch.records[..k]).map_err(|e| e.to_string())?;
            n += k as u64;
        }
    }
    let took = start.elapsed();
    let log = logs.log(TOPIC, 0).map_err(|e| e.to_string())?;
    let g = Generated {
        dir: dir.to_path_buf(),
        records,
        t0,
        log_bytes: log_bytes(&log),
        segments: log.segment_list().len(),
    };
    logs.shutdown().map_err(|e| e.to_string())?;
    Ok((g, took))
}

/// The read-only broker dir: `broker_partitions` partitions of `broker_segments` segments, one
/// 10-record batch each. Partition 0 is written by the engine (and closed cleanly); the others
/// are byte copies of it (the engine fsyncs every segment at a clean close, which for thousands
/// of segments would take most of a quick run on this disk).
fn generate_broker(dir: &Path, plan: &Plan, batch_size: u64) -> Result<Generated, String> {
    let records = plan.broker_segments * 10;
    let (g, _) = generate(dir, 1, records, plan.broker_segments, 10, batch_size)?;
    let first = dir.join(format!("{TOPIC}-0"));
    let files: Vec<PathBuf> = fs::read_dir(&first)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    for p in 1..plan.broker_partitions {
        let to = dir.join(format!("{TOPIC}-{p}"));
        fs::create_dir(&to).map_err(|e| format!("{}: {e}", to.display()))?;
        for f in &files {
            if let Some(name) = f.file_name() {
                fs::copy(f, to.join(name)).map_err(|e| format!("{}: {e}", f.display()))?;
            }
        }
    }
    Ok(g)
}

/// Reuses a generated dir whose first partition has the same number of records and segments.
fn reuse(dir: &Path, records: u64, segments: u64) -> Option<Generated> {
    let logs =
        LogDirs::open_dir(dir, bench_config(1 << 30), Default::default(), SegmentMode::ReadOnly)
            .ok()?;
    let log = logs.log(TOPIC, 0).ok()?;
    let n = log.log_end_offset().0 as u64;
    let segs = log.segment_list().len() as u64;
    if n != records || segs.abs_diff(segments) > segments / 10 + 1 {
        return None;
    }
    let first = log.seek(Offset(0)).ok()?;
    let chunk = log.read(&first, 1).ok()?;
    let batch = decode_batch(&chunk.bytes).ok()?;
    let t0 = batch.info().base_timestamp;
    Some(Generated {
        dir: dir.to_path_buf(),
        records,
        t0,
        log_bytes: log_bytes(&log),
        segments: segs as usize,
    })
}

/// The `.log` files of partition 0 in offset order.
fn segment_logs(g: &Generated) -> Vec<PathBuf> {
    let pdir = g.dir.join(format!("{TOPIC}-0"));
    let mut logs: Vec<PathBuf> = fs::read_dir(&pdir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
                .collect()
        })
        .unwrap_or_default();
    logs.sort();
    logs
}

// ---- CPU time -------------------------------------------------------------------------------

/// CPU time of the calling thread (ns), from `/proc/thread-self/schedstat`.
fn thread_cpu_ns() -> u64 {
    fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// CPU time of every thread of process `pid` (ns), from `/proc/<pid>/task/*/schedstat`.
/// Threads that exited in between are not counted; the daemon's FUSE workers live as long as
/// the mount.
fn process_cpu_ns(pid: u32) -> u64 {
    // utime + stime of the whole process (fields 14 and 15 of /proc/<pid>/stat, after the
    // parenthesised command name), in USER_HZ (100 per second on Linux): unlike per-thread
    // counters it includes threads that have ended (read-ahead workers).
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0 };
    let Some((_, rest)) = stat.rsplit_once(')') else { return 0 };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // `rest` starts at field 3 (state): utime is field 14, stime field 15.
    (ticks(11) + ticks(12)) * 10_000_000
}

/// `VmHWM` (peak resident set) and `VmRSS` of `pid`, in bytes.
fn rss(pid: u32) -> (u64, u64) {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

// ---- the machine --------------------------------------------------------------------------

/// Round trips of one byte between two threads over a socket pair, in microseconds: what
/// waking a sleeping thread costs on this machine. Every FUSE request wakes a daemon thread
/// and then the caller, so this bounds how cheap a request can be; on a VM, waking a thread
/// on the other (idle) vCPU costs far more than on bare metal.
fn wake_round_trip_us(rounds: usize) -> Result<(f64, f64), String> {
    use std::os::unix::net::UnixStream;
    let (mut a, mut b) = UnixStream::pair().map_err(|e| e.to_string())?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let mut byte = [0u8; 1];
        loop {
            if b.read(&mut byte)? == 0 {
                return Ok(());
            }
            b.write_all(&byte)?;
        }
    });
    let mut us = Vec::with_capacity(rounds);
    let mut byte = [7u8; 1];
    for _ in 0..rounds {
        let start = Instant::now();
        a.write_all(&byte).map_err(|e| e.to_string())?;
        a.read_exact(&mut byte).map_err(|e| e.to_string())?;
        us.push(start.elapsed().as_secs_f64() * 1e6);
    }
    drop(a);
    let _ = echo.join();
    let (p50, p99, _) = latency(us);
    Ok((p50, p99))
}

fn machine_context(report: &mut Report) -> Result<(), String> {
    let (p50, p99) = wake_round_trip_us(20_000)?;
    report.row(
        "machine",
        "thread wake-up round trip (socket ping-pong between two threads)",
        format!("p50 {p50:.1} µs, p99 {p99:.1} µs"),
        "",
        "",
        "",
        None,
    );
    report.put("wake_round_trip_us", json!({"p50": p50, "p99": p99, "rounds": 20_000}));
    Ok(())
}

// ---- in-process figures ---------------------------------------------------------------------

fn engine_append(plan: &Plan, work: &Path, report: &mut Report) -> Result<(), String> {
    let records = plan.engine_append_records;
    let mut batch = Batch::new(BATCH_RECORDS);
    let (mut engine_s, mut plain_s, mut ratios, mut cpu_per_record) =
        (vec![], vec![], vec![], vec![]);
    let mut bytes_written = 0;
    for rep in 0..plan.reps {
        let dir = work.join("append-engine");
        let plain = work.join("append-plain.bin");
        let _ = fs::remove_dir_all(&dir);
        let _ = fs::remove_file(&plain);
        let run_engine = |batch: &mut Batch| -> Result<(f64, u64, u64), String> {
            let logs = LogDirs::open_dir(
                &dir,
                bench_config(1 << 30),
                Default::default(),
                SegmentMode::Writable,
            )
            .map_err(|e| e.to_string())?;
            logs.create_topic(TOPIC, 1).map_err(|e| e.to_string())?;
            let log = logs.log(TOPIC, 0).map_err(|e| e.to_string())?;
            let t0 = now_ms() - records as i64;
            let cpu0 = thread_cpu_ns();
            let start = Instant::now();
            let mut n = 0;
            while n < records {
                let k = (records - n).min(BATCH_RECORDS as u64) as usize;
                batch.fill(n, t0);
                log.append(&batch.records[..k]).map_err(|e| e.to_string())?;
                n += k as u64;
            }
            let took = start.elapsed().as_secs_f64();
            let cpu = thread_cpu_ns() - cpu0;
            let bytes = log_bytes(&log);
            logs.shutdown().map_err(|e| e.to_string())?;
            Ok((took, cpu, bytes))
        };
        let run_plain = |bytes: u64| -> Result<f64, String> {
            // The same bytes in writes of one batch each, to a plain file on the same disk.
            let chunk =
                vec![b'x'; (bytes / records.div_ceil(BATCH_RECORDS as u64)).max(1) as usize];
            let mut f = File::create(&plain).map_err(|e| e.to_string())?;
            let start = Instant::now();
            let mut left = bytes;
            while left > 0 {
                let k = left.min(chunk.len() as u64) as usize;
                f.write_all(&chunk[..k]).map_err(|e| e.to_string())?;
                left -= k as u64;
            }
            drop(f);
            Ok(start.elapsed().as_secs_f64())
        };
        // A B B A: the first repetition learns the byte count from the engine.
        let (e, p, cpu, bytes) = if rep % 2 == 0 || bytes_written == 0 {
            let (e, cpu, bytes) = run_engine(&mut batch)?;
            let _ = fs::remove_dir_all(&dir);
            (e, run_plain(bytes)?, cpu, bytes)
        } else {
            let p = run_plain(bytes_written)?;
            let _ = fs::remove_file(&plain);
            let (e, cpu, bytes) = run_engine(&mut batch)?;
            (e, p, cpu, bytes)
        };
        bytes_written = bytes;
        let _ = fs::remove_dir_all(&dir);
        let _ = fs::remove_file(&plain);
        engine_s.push(e);
        plain_s.push(p);
        ratios.push(p / e);
        cpu_per_record.push(cpu as f64 / records as f64);
    }
    let e = stat(&engine_s);
    let p = stat(&plain_s);
    let r = stat(&ratios);
    let rate = records as f64 / e.median;
    let mb = (records as usize * VALUE_BYTES) as f64 / e.median / 1e6;
    let cpu = stat(&cpu_per_record);
    report.row(
        "append",
        format!(
            "engine append, {}-byte values, batches of {BATCH_RECORDS} (records/s)",
            VALUE_BYTES
        ),
        format!("{} rec/s, {mb:.0} MB/s", fmt_rate(rate)),
        format!("plain write {:.0} MB/s", bytes_written as f64 / p.median / 1e6),
        format!("{:.2} ({:.2}..{:.2})", r.median, r.min, r.max),
        ">= 1 M rec/s",
        Some(rate >= 1e6),
    );
    report.row(
        "CPU",
        "engine append CPU per record",
        format!("{:.0} ns", cpu.median),
        "",
        "",
        "",
        None,
    );
    report.put(
        "append_engine",
        json!({
            "records": records, "reps": plan.reps, "log_bytes": bytes_written,
            "seconds": engine_s, "plain_seconds": plain_s, "ratio_to_plain": ratios,
            "records_per_s_median": rate, "value_mb_per_s_median": mb,
            "cpu_ns_per_record": cpu_per_record,
            "spread_records_per_s": [records as f64 / e.max, records as f64 / e.min],
        }),
    );
    Ok(())
}

fn engine_open(plan: &Plan, g: &Generated, report: &mut Report) -> Result<(), String> {
    let (mut writable, mut read_only) = (vec![], vec![]);
    for rep in 0..plan.reps {
        let ro = || -> Result<f64, String> {
            let start = Instant::now();
            let logs = LogDirs::open_dir(
                &g.dir,
                bench_config(1 << 30),
                Default::default(),
                SegmentMode::ReadOnly,
            )
            .map_err(|e| e.to_string())?;
            let t = start.elapsed().as_secs_f64();
            drop(logs);
            Ok(t)
        };
        let rw = || -> Result<f64, String> {
            let start = Instant::now();
            let logs = LogDirs::open_dir(
                &g.dir,
                bench_config(1 << 30),
                Default::default(),
                SegmentMode::Writable,
            )
            .map_err(|e| e.to_string())?;
            let t = start.elapsed().as_secs_f64();
            if !logs.dirs()[0].had_clean_shutdown() {
                return Err("the generated dir was not cleanly shut down".into());
            }
            logs.shutdown().map_err(|e| e.to_string())?;
            Ok(t)
        };
        if rep % 2 == 0 {
            writable.push(rw()?);
            read_only.push(ro()?);
        } else {
            read_only.push(ro()?);
            writable.push(rw()?);
        }
    }
    let w = stat(&writable);
    let r = stat(&read_only);
    let name = format!("LogDirs::open_dir, clean, {} segments (in-process)", g.segments);
    report.seconds_row("open", name, w.median, Some(("< 200 ms", 0.2)));
    let name = format!("LogDirs::open_dir read-only, {} segments (in-process)", g.segments);
    report.seconds_row("open", name, r.median, None);
    report.put(
        "open_in_process",
        json!({"segments": g.segments, "writable_seconds": writable, "read_only_seconds": read_only}),
    );
    Ok(())
}

fn engine_lookups(plan: &Plan, g: &Generated, report: &mut Report) -> Result<(), String> {
    let logs =
        LogDirs::open_dir(&g.dir, bench_config(1 << 30), Default::default(), SegmentMode::ReadOnly)
            .map_err(|e| e.to_string())?;
    let log = logs.log(TOPIC, 0).map_err(|e| e.to_string())?;
    let n = plan.lookups_in_process;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut seek_us, mut seek_first_us, mut time_us, mut time_first_us) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let first_record = |log: &Log, target: Offset| -> Result<u64, String> {
        let cursor = log.seek(target).map_err(|e| e.to_string())?;
        let chunk = log.read(&cursor, 1).map_err(|e| e.to_string())?;
        let batch = decode_batch(&chunk.bytes).map_err(|e| e.to_string())?;
        for r in batch.records() {
            let r = r.map_err(|e| e.to_string())?;
            if r.offset >= target {
                return Ok(r.value.map_or(0, <[u8]>::len) as u64);
            }
        }
        Err(format!("offset {target} not found in its batch"))
    };
    // Warm-up: the partition's files into the page cache (a lookup on a cold cache measures
    // the disk; the memory reclaimer of a shared machine may have evicted them since they were
    // written), then touch the indexes once.
    for entry in fs::read_dir(g.dir.join(format!("{TOPIC}-0"))).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let mut file = File::open(&path).map_err(|e| e.to_string())?;
        std::io::copy(&mut file, &mut std::io::sink()).map_err(|e| e.to_string())?;
    }
    for _ in 0..n.min(1000) {
        let o = Offset(rng.below(g.records) as i64);
        log.seek(o).map_err(|e| e.to_string())?;
    }
    for _ in 0..n {
        let o = Offset(rng.below(g.records) as i64);
        let t = Instant::now();
        let c = log.seek(o).map_err(|e| e.to_string())?;
        seek_us.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(c);

        let o = Offset(rng.below(g.records) as i64);
        let t = Instant::now();
        std::hint::black_box(first_record(&log, o)?);
        seek_first_us.push(t.elapsed().as_secs_f64() * 1e6);

        let ts = g.t0 + rng.below(g.records) as i64;
        let t = Instant::now();
        let found = log.offset_for(OffsetQuery::Timestamp(ts)).map_err(|e| e.to_string())?;
        time_us.push(t.elapsed().as_secs_f64() * 1e6);
        if found != Offset(ts - g.t0) {
            return Err(format!("timestamp {ts} resolved to {found}, expected {}", ts - g.t0));
        }

        let ts = g.t0 + rng.below(g.records) as i64;
        let t = Instant::now();
        let found = log.offset_for(OffsetQuery::Timestamp(ts)).map_err(|e| e.to_string())?;
        std::hint::black_box(first_record(&log, found)?);
        time_first_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let rounds = plan.reps;
    let mut put = |name: &str, key: &str, target: Option<f64>, us: Vec<f64>| {
        let r = latency_rounds(&us, rounds);
        let (p50, p99, max) = (r.p50, r.p99, r.max);
        report.row(
            "lookup",
            format!("{name} (in-process, {} records)", g.records),
            format!(
                "p50 {p50:.1} µs, p99 {p99:.1} µs (rounds {:.0}..{:.0})",
                r.p99_best, r.p99_worst
            ),
            "",
            "",
            target.map_or(String::new(), |t| format!("p99 < {t:.0} µs")),
            target.map(|t| p99 < t),
        );
        report.json.insert(
            key.to_string(),
            json!({"p50_us": p50, "p99_us": p99, "max_us": max, "samples": n, "rounds": rounds,
                   "p99_best_round_us": r.p99_best, "p99_worst_round_us": r.p99_worst}),
        );
    };
    put("offset lookup: Log::seek", "lookup_offset_engine", Some(20.0), seek_us);
    put("offset lookup + first record", "lookup_offset_first_record_engine", None, seek_first_us);
    put("timestamp lookup: offset_for(Timestamp)", "lookup_time_engine", Some(50.0), time_us);
    put("timestamp lookup + first record", "lookup_time_first_record_engine", None, time_first_us);
    Ok(())
}

/// Sequential reads in-process: every record decoded (engine), and the value-line rendering of
/// `by-offset/0` through a view stream, against reading the `.log` files.
fn engine_reads(plan: &Plan, g: &Generated, report: &mut Report) -> Result<(), String> {
    let logs = Arc::new(
        LogDirs::open_dir(&g.dir, bench_config(1 << 30), Default::default(), SegmentMode::ReadOnly)
            .map_err(|e| e.to_string())?,
    );
    let log = logs.log(TOPIC, 0).map_err(|e| e.to_string())?;
    let files = segment_logs(g);
    let (mut raw_s, mut decode_s, mut view_s, mut decode_cpu, mut view_cpu) =
        (vec![], vec![], vec![], vec![], vec![]);
    let mut view_bytes = 0;
    let read_raw = || -> Result<f64, String> {
        let mut buf = vec![0u8; 128 * 1024];
        let start = Instant::now();
        for f in &files {
            let mut file = File::open(f).map_err(|e| e.to_string())?;
            while file.read(&mut buf).map_err(|e| e.to_string())? > 0 {}
        }
        Ok(start.elapsed().as_secs_f64())
    };
    read_raw()?; // into the page cache
    for rep in 0..plan.reps {
        let decode = || -> Result<(f64, u64), String> {
            let cpu0 = thread_cpu_ns();
            let start = Instant::now();
            let mut cursor = log.seek(Offset(0)).map_err(|e| e.to_string())?;
            let mut count = 0u64;
            loop {
                let chunk = log.read(&cursor, 1 << 20).map_err(|e| e.to_string())?;
                if chunk.bytes.is_empty() {
                    break;
                }
                let mut at = 0;
                while at < chunk.bytes.len() {
                    let batch = decode_batch(&chunk.bytes[at..]).map_err(|e| e.to_string())?;
                    for r in batch.records() {
                        std::hint::black_box(r.map_err(|e| e.to_string())?);
                        count += 1;
                    }
                    at += batch.info().size as usize;
                }
                match chunk.next {
                    Some(next) => cursor = next,
                    None => break,
                }
            }
            if count != g.records {
                return Err(format!("decoded {count} records, expected {}", g.records));
            }
            Ok((start.elapsed().as_secs_f64(), thread_cpu_ns() - cpu0))
        };
        let view = || -> Result<(f64, u64, u64), String> {
            // A fresh registry each time: the first read builds the render index as it goes.
            let registry = StreamRegistry::new();
            let part: Arc<dyn PartitionSource> = log.clone();
            let spec = StreamSpec::parse_by_offset("0").map_err(|e| e.to_string())?;
            let cpu0 = thread_cpu_ns();
            let start = Instant::now();
            let stream = registry.open(part, &spec, now_ms()).map_err(|e| e.to_string())?;
            let mut pos = 0u64;
            loop {
                let bytes = stream.read_at(pos, 128 * 1024).map_err(|e| e.to_string())?;
                if bytes.is_empty() {
                    break;
                }
                pos += bytes.len() as u64;
            }
            Ok((start.elapsed().as_secs_f64(), thread_cpu_ns() - cpu0, pos))
        };
        let mut one = |order: bool| -> Result<(), String> {
            if order {
                raw_s.push(read_raw()?);
            }
            let (d, dc) = decode()?;
            let (v, vc, vb) = view()?;
            if !order {
                raw_s.push(read_raw()?);
            }
            decode_s.push(d);
            view_s.push(v);
            decode_cpu.push(dc as f64 / g.records as f64);
            view_cpu.push(vc as f64 / g.records as f64);
            view_bytes = vb;
            Ok(())
        };
        one(rep % 2 == 0)?;
    }
    let raw = stat(&raw_s);
    let d = stat(&decode_s);
    let v = stat(&view_s);
    let ratio = |xs: &[f64]| stat(&raw_s.iter().zip(xs).map(|(r, x)| r / x).collect::<Vec<_>>());
    let rd = ratio(&decode_s);
    let rv = ratio(&view_s);
    let raw_mb = g.log_bytes as f64 / raw.median / 1e6;
    report.row(
        "read",
        "engine read + decode every record (in-process)",
        format!(
            "{} rec/s, {:.0} MB/s",
            fmt_rate(g.records as f64 / d.median),
            g.log_bytes as f64 / d.median / 1e6
        ),
        format!("read .log {raw_mb:.0} MB/s"),
        format!("{:.2} ({:.2}..{:.2})", rd.median, rd.min, rd.max),
        "",
        None,
    );
    report.row(
        "read",
        "view by-offset/0 values, fresh index (in-process)",
        format!(
            "{} rec/s, {:.0} MB/s",
            fmt_rate(g.records as f64 / v.median),
            view_bytes as f64 / v.median / 1e6
        ),
        format!("read .log {raw_mb:.0} MB/s"),
        format!("{:.2} ({:.2}..{:.2})", rv.median, rv.min, rv.max),
        "",
        None,
    );
    report.row(
        "CPU",
        "engine read+decode CPU per record",
        format!("{:.0} ns", stat(&decode_cpu).median),
        "",
        "",
        "",
        None,
    );
    report.row(
        "CPU",
        "view values render CPU per record (in-process)",
        format!("{:.0} ns", stat(&view_cpu).median),
        "",
        "",
        "",
        None,
    );
    report.put(
        "read_in_process",
        json!({
            "records": g.records, "log_bytes": g.log_bytes, "raw_seconds": raw_s,
            "decode_seconds": decode_s, "view_values_seconds": view_s, "view_bytes": view_bytes,
            "decode_cpu_ns_per_record": decode_cpu, "view_cpu_ns_per_record": view_cpu,
        }),
    );
    Ok(())
}

// ---- mounts ---------------------------------------------------------------------------------

/// A running `topicfs mount -f` daemon; unmounted and reaped on drop.
struct Mount {
    child: Option<Child>,
    mnt: PathBuf,
}

fn is_mounted(mnt: &Path) -> bool {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else { return false };
    let want = mnt.to_string_lossy().replace(' ', "\\040");
    info.lines().any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

impl Mount {
    /// [`Mount::start`] of `data` at `mnt` with `extra` flags, probing partition 0 of the
    /// benchmark topic.
    fn topic(a: &Args, data: &Path, mnt: &Path, extra: &[&str]) -> Result<(Mount, f64), String> {
        Mount::start(&a.topicfs, data, mnt, extra, &format!("{TOPIC}/0"), &a.work)
    }

    /// One mount-time sample: mounts as [`Mount::topic`] does, unmounts cleanly, and returns
    /// the time from spawning the daemon to the first stat under the mount.
    fn time(a: &Args, data: &Path, mnt: &Path, extra: &[&str]) -> Result<f64, String> {
        let (m, t) = Mount::topic(a, data, mnt, extra)?;
        m.stop()?;
        Ok(t)
    }

    /// Starts the daemon and waits (deadline 120 s) until the mount is listed and `probe`
    /// (a path under it) can be stat'ed. Returns the mount and the time that took.
    fn start(
        bin: &Path,
        data: &Path,
        mnt: &Path,
        extra: &[&str],
        probe: &str,
        work: &Path,
    ) -> Result<(Mount, f64), String> {
        let mut args = vec!["--retention-ms", "-1"];
        // Figures other than the cold-open ones measure mounts without a segment cache.
        if !extra.contains(&"--cache-dir") {
            args.extend_from_slice(&["--cache-dir", "none"]);
        }
        args.extend_from_slice(extra);
        Mount::start_source(bin, data.as_os_str(), mnt, &args, probe, work)
    }

    /// [`Mount::start`] of any source (a data dir or `kafka://HOST:PORT`) with exactly `args`.
    fn start_source(
        bin: &Path,
        source: &OsStr,
        mnt: &Path,
        args: &[&str],
        probe: &str,
        work: &Path,
    ) -> Result<(Mount, f64), String> {
        fs::create_dir_all(mnt).map_err(|e| e.to_string())?;
        if is_mounted(mnt) {
            return Err(format!("{} is already mounted", mnt.display()));
        }
        let log = File::create(work.join("daemon.log")).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let child = Command::new(bin)
            .arg("mount")
            .arg(source)
            .arg(mnt)
            .arg("-f")
            .args(args)
            // `TOPICFS_BENCH_DAEMON_LOG` (an env_logger filter) traces the daemon into
            // `<work>/daemon.log`, e.g. `topicfs::cluster::conn=trace` for every request.
            .env(
                "RUST_LOG",
                std::env::var("TOPICFS_BENCH_DAEMON_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let pid_file = work.join("daemons.pid");
        if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(&pid_file) {
            let _ = writeln!(f, "{} {}", child.id(), mnt.display());
        }
        let mut m = Mount { child: Some(child), mnt: mnt.to_path_buf() };
        let deadline = start + Duration::from_secs(120);
        loop {
            if is_mounted(mnt) && fs::metadata(mnt.join(probe)).is_ok() {
                break;
            }
            if let Some(c) = m.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                let log = fs::read_to_string(work.join("daemon.log")).unwrap_or_default();
                return Err(format!("topicfs mount exited with {status}: {log}"));
            }
            if Instant::now() > deadline {
                return Err(format!("{} not mounted after 120 s", mnt.display()));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok((m, start.elapsed().as_secs_f64()))
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Kills the daemon with SIGKILL (an unclean stop) and detaches the dead mount.
    fn kill_unclean(mut self) -> Result<(), String> {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("fusermount3").arg("-uz").arg(&self.mnt).status();
        Ok(())
    }

    /// Unmounts cleanly and waits for the daemon to exit (it writes the clean-shutdown marker).
    fn stop(mut self) -> Result<(), String> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<(), String> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        let _ = Command::new("fusermount3").arg("-u").arg(&self.mnt).stderr(Stdio::null()).status();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let _ = Command::new("fusermount3").arg("-uz").arg(&self.mnt).status();
                    return Err(format!("daemon of {} did not stop in 60 s", self.mnt.display()));
                }
            }
        }
        if is_mounted(&self.mnt) {
            let _ = Command::new("fusermount3").arg("-uz").arg(&self.mnt).status();
        }
        Ok(())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

/// Runs `sh -c script` with stdout to /dev/null; returns its wall time.
fn time_sh(script: &str) -> Result<f64, String> {
    let start = Instant::now();
    let status = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("`{script}` failed: {status}"));
    }
    Ok(start.elapsed().as_secs_f64())
}

fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.to_string_lossy().replace('\'', "'\\''"))
}

/// Mount times: the 1,000-segment dir clean and after an unclean stop, and the read-only
/// broker dir (partitions x segments).
fn mount_times(
    plan: &Plan,
    a: &Args,
    g: &Generated,
    broker: &Generated,
    report: &mut Report,
) -> Result<(), String> {
    let mnt = a.work.join("mnt");
    let (mut clean, mut unclean, mut ro, mut broker_ro) = (vec![], vec![], vec![], vec![]);
    let mut recovered = String::new();
    for _ in 0..plan.reps.min(3) {
        clean.push(Mount::time(a, &g.dir, &mnt, &[])?);
        ro.push(Mount::time(a, &g.dir, &mnt, &["--read-only"])?);
        broker_ro.push(Mount::time(a, &broker.dir, &mnt, &["--read-only"])?);
        // Unclean: a writable daemon killed with SIGKILL, then mounted again.
        let (m, _) = Mount::topic(a, &g.dir, &mnt, &[])?;
        m.kill_unclean()?;
        if g.dir.join(".kafka_cleanshutdown").exists() {
            return Err("clean-shutdown marker present after SIGKILL".into());
        }
        unclean.push(Mount::time(a, &g.dir, &mnt, &[])?);
        if !g.dir.join(".kafka_cleanshutdown").exists() {
            recovered = "(no clean-shutdown marker after unmount)".into();
        }
    }
    let c = stat(&clean);
    let u = stat(&unclean);
    let r = stat(&ro);
    let b = stat(&broker_ro);
    let name = format!("mount, clean, {} segments (spawn to first stat)", g.segments);
    report.seconds_row("mount", name, c.median, Some(("< 1 s", 1.0)));
    let name = format!("mount, after SIGKILL of the daemon, {} segments {recovered}", g.segments);
    report.seconds_row("mount", name, u.median, None);
    let name = format!("mount --read-only, {} segments", g.segments);
    report.seconds_row("mount", name, r.median, None);
    let name = format!(
        "mount --read-only, {} partitions x {} segments",
        plan.broker_partitions, broker.segments
    );
    report.seconds_row("mount", name, b.median, Some(("< 1 s", 1.0)));
    report.put(
        "mount_time",
        json!({"segments": g.segments, "clean_seconds": clean, "unclean_seconds": unclean,
               "read_only_seconds": ro, "broker_partitions": plan.broker_partitions,
               "broker_segments_per_partition": broker.segments, "broker_read_only_seconds": broker_ro}),
    );
    Ok(())
}

/// Reads, tails, lookups, CPU and RSS through a read-only mount of the big partition.
fn mount_reads(
    plan: &Plan,
    a: &Args,
    g: &Generated,
    kafka: &Generated,
    report: &mut Report,
) -> Result<(), String> {
    let mnt = a.work.join("mnt");
    let (m, _) = Mount::topic(a, &g.dir, &mnt, &["--read-only"])?;
    let pid = m.pid();
    let part = mnt.join(TOPIC).join("0");
    let by0 = part.join("by-offset").join("0");

    // tail -n 10, first on a fresh mount (no render index yet), then warm.
    let tail = format!("tail -n 10 {}", sh_quote(&by0));
    let tail_first = time_sh(&tail)?;
    let mut tail_warm = vec![];
    for _ in 0..5 {
        tail_warm.push(time_sh(&tail)?);
    }
    let tw = stat(&tail_warm);
    report.row(
        "tail",
        format!(
            "tail -n 10 by-offset/0, first on a fresh mount ({:.2} GB)",
            g.log_bytes as f64 / 1e9
        ),
        fmt_ms(tail_first),
        "",
        "",
        "",
        None,
    );
    report.row(
        "tail",
        "tail -n 10 by-offset/0, warm",
        fmt_ms(tw.median),
        "",
        "",
        "< 100 ms",
        Some(tw.median < 0.1),
    );
    report.put(
        "tail",
        json!({"first_seconds": tail_first, "warm_seconds": tail_warm, "log_bytes": g.log_bytes}),
    );

    // ls -l segments/ on the fresh mount: every file's size, so every small segment's .log
    // dump is counted (a pass over its .log); then again after the entries' 1 s TTL, when the
    // counted sizes are remembered.
    let segments_dir = part.join("segments");
    let files = fs::read_dir(&segments_dir).map_err(|e| e.to_string())?.count();
    let ls = format!("ls -l {}", sh_quote(&segments_dir));
    let ls_first = time_sh(&ls)?;
    let mut ls_warm = vec![];
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(1100));
        ls_warm.push(time_sh(&ls)?);
    }
    report.row(
        "ls",
        format!("ls -l segments/ ({files} files), first on a fresh mount"),
        fmt_ms(ls_first),
        "",
        "",
        "",
        None,
    );
    report.row(
        "ls",
        "ls -l segments/, again after the attribute TTL",
        fmt_ms(stat(&ls_warm).median),
        "",
        "",
        "",
        None,
    );
    report.put(
        "ls_segments",
        json!({"files": files, "first_seconds": ls_first, "warm_seconds": ls_warm}),
    );

    // Sequential reads of this partition's 1,000 small segments: what the mount adds per
    // segment file (no target; the targets are measured on Kafka-sized segments below).
    sequential_reads(plan, g, &part, pid, &ReadPass::small_segments(g), report)?;

    // Lookups through the mount: open + first record of random by-offset/N and by-time/T.
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let (mut off_us, mut time_us, mut raw_us) = (vec![], vec![], vec![]);
    let mut buf = vec![0u8; 4096];
    let first_line = |path: &Path, buf: &mut [u8]| -> Result<usize, String> {
        let mut f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let n = f.read(buf).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(n)
    };
    let raw_logs = segment_logs(g);
    for _ in 0..plan.lookups_mount {
        let o = rng.below(g.records);
        let p = part.join("by-offset").join(o.to_string());
        let t = Instant::now();
        let n = first_line(&p, &mut buf)?;
        off_us.push(t.elapsed().as_secs_f64() * 1e6);
        let expect = format!("record {o:012}");
        if n < 19 || &buf[..19] != expect.as_bytes() {
            return Err(format!("{}: first record is not {expect}", p.display()));
        }
        let ts = g.t0 + rng.below(g.records) as i64;
        let p = part.join("by-time").join(ts.to_string());
        let t = Instant::now();
        let n = first_line(&p, &mut buf)?;
        time_us.push(t.elapsed().as_secs_f64() * 1e6);
        let expect = format!("record {:012}", ts - g.t0);
        if n < 19 || &buf[..19] != expect.as_bytes() {
            return Err(format!("{}: first record is not {expect}", p.display()));
        }
        // Baseline: open + first 4 KiB of a raw .log file at random.
        let f = &raw_logs[rng.below(raw_logs.len() as u64) as usize];
        let t = Instant::now();
        first_line(f, &mut buf)?;
        raw_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let (rp50, rp99, _) = latency(raw_us.clone());
    for (key, name, us) in [
        ("lookup_offset_mount", "by-offset/N", off_us),
        ("lookup_time_mount", "by-time/T", time_us),
    ] {
        let r = latency_rounds(&us, plan.reps);
        let (p50, p99, max) = (r.p50, r.p99, r.max);
        report.row(
            "lookup",
            format!("open + first record, random {name}, through the mount"),
            format!(
                "p50 {:.2} ms, p99 {:.2} ms (rounds {:.2}..{:.2})",
                p50 / 1e3,
                p99 / 1e3,
                r.p99_best / 1e3,
                r.p99_worst / 1e3
            ),
            format!("raw .log open+read p50 {:.3} ms, p99 {:.3} ms", rp50 / 1e3, rp99 / 1e3),
            "",
            "p99 < 2 ms",
            Some(p99 < 2000.0),
        );
        report.put(
            key,
            json!({"p50_us": p50, "p99_us": p99, "max_us": max, "samples": plan.lookups_mount,
                   "p99_best_round_us": r.p99_best, "p99_worst_round_us": r.p99_worst,
                               "raw_p50_us": rp50, "raw_p99_us": rp99}),
        );
    }

    let (hwm_small, now_small) = rss(pid);
    m.stop()?;

    // The targets' sequential reads: the same records laid out as a broker with Kafka's
    // default segment.bytes would (a 1.1 GB partition: two segments).
    let (m, _) = Mount::topic(a, &kafka.dir, &mnt, &["--read-only"])?;
    let part = mnt.join(TOPIC).join("0");
    sequential_reads(plan, kafka, &part, m.pid(), &ReadPass::kafka_segments(kafka), report)?;
    let (hwm_kafka, now_kafka) = rss(m.pid());
    m.stop()?;

    let hwm = hwm_small.max(hwm_kafka);
    report.row(
        "memory",
        format!("daemon peak RSS after all reads ({:.2} GB partition)", g.log_bytes as f64 / 1e9),
        format!(
            "{:.1} MB ({} segments: {:.1} MB, now {:.1}; {} segment(s): {:.1} MB, now {:.1})",
            hwm as f64 / 1e6,
            g.segments,
            hwm_small as f64 / 1e6,
            now_small as f64 / 1e6,
            kafka.segments,
            hwm_kafka as f64 / 1e6,
            now_kafka as f64 / 1e6
        ),
        "",
        "",
        "< 100 MB",
        Some(hwm < 100_000_000),
    );
    report.put(
        "daemon_rss_read",
        json!({"peak_bytes": hwm, "small_segments_peak_bytes": hwm_small,
               "small_segments_current_bytes": now_small, "kafka_segments_peak_bytes": hwm_kafka,
               "kafka_segments_current_bytes": now_kafka, "log_bytes": g.log_bytes}),
    );
    Ok(())
}

/// `Threads:` of process `pid`.
fn threads(pid: u32) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Threads:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Many handles reading at once: for 1, 10, 100 and 1,000 handles open together on
/// `by-offset/<n>` at offsets spread over the partition (Kafka-sized segments, read-only), each
/// reading its stream in 128 KiB reads (the test's threads, at most 64, take turns over the
/// handles): the aggregate throughput, the daemon's peak RSS and most threads (sampled every
/// 5 ms), and its RSS after every handle closed. A fresh mount for each count (the peak RSS is
/// the process's). The baseline is the one-reader figure: the ratio is the aggregate throughput
/// of N readers over that of one.
fn many_readers(a: &Args, kafka: &Generated, report: &mut Report) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let (soft, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_err(|e| e.to_string())?;
    if soft < 2048 {
        nix::sys::resource::setrlimit(
            nix::sys::resource::Resource::RLIMIT_NOFILE,
            2048.min(hard),
            hard,
        )
        .map_err(|e| format!("RLIMIT_NOFILE: {e}"))?;
    }
    let mnt = a.work.join("mnt-many");
    let mut figures = Vec::new();
    let mut one_reader = 0.0;
    for n in [1usize, 10, 100, 1000] {
        // Every reader reads the same amount at 100 and 1,000 (1 MiB); fewer read more, so
        // that each count reads at least 64 MiB in all.
        let per_reader: u64 = (64u64 << 20).div_ceil(n as u64).max(1 << 20);
        let (m, _) = Mount::topic(a, &kafka.dir, &mnt, &["--read-only"])?;
        let pid = m.pid();
        let part = mnt.join(TOPIC).join("0").join("by-offset");
        // Records of about 110 bytes rendered as 101-byte lines: a reader starting at
        // `records - span` still has `per_reader` bytes to read.
        let span = (per_reader / 100 + BATCH_RECORDS as u64).min(kafka.records);
        let stride = (kafka.records - span) / n as u64;
        let files: Vec<File> = (0..n as u64)
            .map(|i| File::open(part.join((i * stride).to_string())))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("open: {e}"))?;
        let files = Arc::new(files);
        let stop = Arc::new(AtomicBool::new(false));
        let most = Arc::new(AtomicU64::new(threads(pid)));
        let sampler = {
            let (stop, most) = (Arc::clone(&stop), Arc::clone(&most));
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    most.fetch_max(threads(pid), Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        };
        let workers = n.min(64);
        let start = Instant::now();
        let readers: Vec<_> = (0..workers)
            .map(|t| {
                let files = Arc::clone(&files);
                std::thread::spawn(move || -> Result<u64, String> {
                    let mine: Vec<usize> = (t..files.len()).step_by(workers).collect();
                    let mut at = vec![0u64; mine.len()];
                    let mut buf = vec![0u8; 128 << 10];
                    let mut total = 0;
                    while at.iter().any(|x| *x < per_reader) {
                        for (k, &i) in mine.iter().enumerate() {
                            if at[k] >= per_reader {
                                continue;
                            }
                            let got =
                                files[i].read_at(&mut buf, at[k]).map_err(|e| e.to_string())?;
                            if got == 0 {
                                at[k] = per_reader;
                            }
                            at[k] += got as u64;
                            total += got as u64;
                        }
                    }
                    Ok(total)
                })
            })
            .collect();
        let mut bytes = 0;
        for r in readers {
            bytes += r.join().map_err(|_| "a reader panicked".to_string())??;
        }
        let secs = start.elapsed().as_secs_f64();
        stop.store(true, Ordering::SeqCst);
        let _ = sampler.join();
        let (peak, _) = rss(pid);
        drop(files);
        std::thread::sleep(Duration::from_millis(500));
        let (_, after) = rss(pid);
        let most = most.load(Ordering::SeqCst);
        m.stop()?;
        let rate = bytes as f64 / secs;
        if n == 1 {
            one_reader = rate;
        }
        report.row(
            "many readers",
            format!("{n} handles reading at once (aggregate MB/s; daemon peak RSS, threads)"),
            format!(
                "{:.0} MB/s; {:.1} MB, {most} threads; {:.1} MB after close",
                rate / 1e6,
                peak as f64 / 1e6,
                after as f64 / 1e6
            ),
            format!("{:.0} MB/s", one_reader / 1e6),
            format!("{:.2}x", rate / one_reader),
            "< 256 MB, <= 64 threads",
            Some(peak < 256 << 20 && most <= 64),
        );
        figures.push(json!({"readers": n, "bytes": bytes, "seconds": secs,
                            "bytes_per_s": rate, "peak_rss_bytes": peak,
                            "rss_after_close_bytes": after, "most_threads": most}));
    }
    report.put("many_readers", Value::Array(figures));
    Ok(())
}

/// One pass of sequential reads: which streams, over which partition, reported how.
struct ReadPass {
    /// Key of the pass's figures in the JSON report.
    key: &'static str,
    /// The partition's shape, appended to each row's name.
    label: String,
    /// The streams read: "values" (`by-offset/0`), "json" (`by-offset/0.json`), "segments"
    /// (`segments/*.log`).
    kinds: &'static [&'static str],
    /// Whether the sequential-read targets apply to this pass's rows.
    targets: bool,
}

impl ReadPass {
    /// The targets' pass: a partition laid out with Kafka's default `segment.bytes`.
    fn kafka_segments(g: &Generated) -> ReadPass {
        ReadPass {
            key: "read_mount",
            label: format!("{} segment(s) of up to 1 GiB", g.segments),
            kinds: &["values", "json", "segments"],
            targets: true,
        }
    }

    /// The many-small-segments pass: per-file costs dominate `segments/*.log`.
    fn small_segments(g: &Generated) -> ReadPass {
        let each = g.log_bytes as f64 / g.segments.max(1) as f64 / 1e6;
        ReadPass {
            key: "read_mount_small_segments",
            label: format!("{} segments of {each:.1} MB", g.segments),
            kinds: &["values", "segments"],
            targets: false,
        }
    }
}

/// Sequential reads of `part` (partition 0 of `g`, mounted read-only by daemon `pid`):
/// `cat` of the pass's streams, interleaved with `cat` of the raw `.log` files from the page
/// cache, `plan.reps` times.
fn sequential_reads(
    plan: &Plan,
    g: &Generated,
    part: &Path,
    pid: u32,
    pass: &ReadPass,
    report: &mut Report,
) -> Result<(), String> {
    let logs = segment_logs(g);
    let raw_files: Vec<String> = logs.iter().map(|p| sh_quote(p)).collect();
    let seg_files: Vec<String> = logs
        .iter()
        .filter_map(|p| p.file_name().map(|n| sh_quote(&part.join("segments").join(n))))
        .collect();
    let raw_cat = format!("cat {}", raw_files.join(" "));
    let seg_cat = format!("cat {}", seg_files.join(" "));
    let by0 = part.join("by-offset").join("0");
    let values_cat = format!("cat {}", sh_quote(&by0));
    let json_cat = format!("cat {}", sh_quote(&part.join("by-offset").join("0.json")));
    time_sh(&raw_cat)?; // warm the page cache
    let json_bytes =
        fs::metadata(part.join("by-offset").join("0.json")).map_err(|e| e.to_string())?.len();
    let values_bytes = fs::metadata(&by0).map_err(|e| e.to_string())?.len();
    let all: [(&str, &str, &String, u64); 3] = [
        ("values", "by-offset/0 (value lines)", &values_cat, values_bytes),
        ("json", "by-offset/0.json", &json_cat, json_bytes),
        ("segments", "segments/*.log", &seg_cat, g.log_bytes),
    ];
    let kinds: Vec<(&str, &str, &String, u64)> =
        all.into_iter().filter(|k| pass.kinds.contains(&k.0)).collect();
    let mut raw_s = vec![];
    let mut times: Vec<Vec<f64>> = vec![vec![]; kinds.len()];
    let mut cpus: Vec<Vec<f64>> = vec![vec![]; kinds.len()];
    for rep in 0..plan.reps {
        if rep % 2 == 0 {
            raw_s.push(time_sh(&raw_cat)?);
        }
        let order: Vec<usize> = if rep % 2 == 0 {
            (0..kinds.len()).collect()
        } else {
            (0..kinds.len()).rev().collect()
        };
        for i in order {
            let cpu0 = process_cpu_ns(pid);
            let t = time_sh(kinds[i].2)?;
            times[i].push(t);
            cpus[i].push((process_cpu_ns(pid) - cpu0) as f64 / g.records as f64);
        }
        if rep % 2 == 1 {
            raw_s.push(time_sh(&raw_cat)?);
        }
    }
    let raw = stat(&raw_s);
    let raw_mb = g.log_bytes as f64 / raw.median / 1e6;
    let mut read_json = serde_json::Map::new();
    read_json.insert("raw_cat_seconds".into(), json!(raw_s));
    read_json.insert("records".into(), json!(g.records));
    read_json.insert("log_bytes".into(), json!(g.log_bytes));
    for (i, (key, name, _, bytes)) in kinds.iter().enumerate() {
        let t = stat(&times[i]);
        let ratios: Vec<f64> = raw_s.iter().zip(&times[i]).map(|(r, x)| r / x).collect();
        let r = stat(&ratios);
        let (target, met) = match *key {
            "values" if pass.targets => (">= 0.50 of raw cat", Some(r.median >= 0.5)),
            "segments" if pass.targets => (">= 0.80 of raw cat", Some(r.median >= 0.8)),
            _ => ("", None),
        };
        report.row(
            "read",
            format!("cat {name} through the mount, {}", pass.label),
            format!(
                "{} rec/s, {:.0} MB/s",
                fmt_rate(g.records as f64 / t.median),
                *bytes as f64 / t.median / 1e6
            ),
            format!("cat raw .log {raw_mb:.0} MB/s, {}", fmt_rate(g.records as f64 / raw.median)),
            format!("{:.2} ({:.2}..{:.2})", r.median, r.min, r.max),
            target,
            met,
        );
        if *key == "segments" {
            // What the mount adds per file: each is a lookup, an open and a release
            // (FUSE round trips), while its bytes are read by the kernel itself.
            let files = seg_files.len().max(1) as f64;
            let extra: Vec<f64> =
                raw_s.iter().zip(&times[i]).map(|(r, x)| (x - r) / files * 1e6).collect();
            let e = stat(&extra);
            report.row(
                "read",
                format!("cat segments/*.log: time per file over raw cat, {}", pass.label),
                format!("{:.0} µs ({:.0}..{:.0})", e.median, e.min, e.max),
                format!("raw cat {:.0} µs per file", raw.median / files * 1e6),
                "",
                "",
                None,
            );
            read_json.insert("segments_extra_us_per_file".into(), json!(extra));
        }
        let cpu = stat(&cpus[i]);
        report.row(
            "CPU",
            format!("daemon CPU per record read, {name}, {}", pass.label),
            format!("{:.0} ns", cpu.median),
            "",
            "",
            "",
            None,
        );
        read_json.insert(
            (*key).to_string(),
            json!({"seconds": times[i], "bytes": bytes, "ratio_to_raw_cat": ratios,
                   "daemon_cpu_ns_per_record": cpus[i], "spread_seconds": fmt_spread(&t, 1.0, "s")}),
        );
    }
    read_json.insert("segments_in_partition".into(), json!(g.segments));
    report.put(pass.key, Value::Object(read_json));
    Ok(())
}

/// `cat lines > MNT/bench/0/append` against `cat lines > plain file`, interleaved.
fn mount_append(plan: &Plan, a: &Args, report: &mut Report) -> Result<(), String> {
    let lines = plan.mount_append_lines;
    let src = a.work.join("lines.txt");
    write_lines_file(&src, lines)?;
    let plain = a.work.join("append-plain.txt");
    let data = a.work.join("data-append");
    let mnt = a.work.join("mnt");
    let (mut mount_s, mut plain_s, mut cpu, mut ratios) = (vec![], vec![], vec![], vec![]);
    let mut hwm_max = 0;
    for rep in 0..plan.reps {
        empty_topic_dir(&data)?;
        let (m, _) = Mount::topic(a, &data, &mnt, &[])?;
        let append = mnt.join(TOPIC).join("0").join("append");
        let run_plain = || {
            let _ = fs::remove_file(&plain);
            time_sh(&format!("cat {} >> {}", sh_quote(&src), sh_quote(&plain)))
        };
        let run_mount = || -> Result<(f64, u64), String> {
            let c0 = process_cpu_ns(m.pid());
            let t = time_sh(&format!("cat {} >> {}", sh_quote(&src), sh_quote(&append)))?;
            Ok((t, process_cpu_ns(m.pid()) - c0))
        };
        let (p, (t, c)) = if rep % 2 == 0 {
            let p = run_plain()?;
            (p, run_mount()?)
        } else {
            let mt = run_mount()?;
            (run_plain()?, mt)
        };
        let info = fs::read_to_string(mnt.join(TOPIC).join("0").join("info")).unwrap_or_default();
        hwm_max = hwm_max.max(rss(m.pid()).0);
        m.stop()?;
        // Check what was appended: the log end offset must be the line count.
        let logs = LogDirs::open_dir(
            &data,
            bench_config(1 << 30),
            Default::default(),
            SegmentMode::ReadOnly,
        )
        .map_err(|e| e.to_string())?;
        let end = logs.log(TOPIC, 0).map_err(|e| e.to_string())?.log_end_offset();
        if end.0 as u64 != lines {
            return Err(format!(
                "append through the mount: log end offset {end}, expected {lines}; info: {info}"
            ));
        }
        mount_s.push(t);
        plain_s.push(p);
        ratios.push(p / t);
        cpu.push(c as f64 / lines as f64);
    }
    let _ = fs::remove_file(&plain);
    let _ = fs::remove_dir_all(&data);
    let t = stat(&mount_s);
    let p = stat(&plain_s);
    let r = stat(&ratios);
    let bytes = lines as f64 * VALUE_BYTES as f64;
    report.row(
        "append",
        format!("cat {VALUE_BYTES}-byte lines >> append through the mount"),
        format!("{} rec/s, {:.0} MB/s", fmt_rate(lines as f64 / t.median), bytes / t.median / 1e6),
        format!("cat >> plain file {:.0} MB/s", bytes / p.median / 1e6),
        format!("{:.2} ({:.2}..{:.2})", r.median, r.min, r.max),
        ">= 0.40 of plain",
        Some(r.median >= 0.4),
    );
    report.row(
        "CPU",
        "daemon CPU per record written (append)",
        format!("{:.0} ns", stat(&cpu).median),
        "",
        "",
        "",
        None,
    );
    report.row(
        "memory",
        "daemon peak RSS while appending",
        format!("{:.1} MB", hwm_max as f64 / 1e6),
        "",
        "",
        "< 100 MB",
        Some(hwm_max < 100_000_000),
    );
    report.put(
        "append_mount",
        json!({"lines": lines, "line_bytes": VALUE_BYTES, "seconds": mount_s, "plain_seconds": plain_s,
               "ratio_to_plain": ratios, "daemon_cpu_ns_per_record": cpu, "daemon_peak_rss_bytes": hwm_max}),
    );
    Ok(())
}

// ---- main -----------------------------------------------------------------------------------

/// Median seconds and MB/s of `bytes` as a cell.
fn fmt_rate_cell(seconds: f64, bytes: u64) -> String {
    format!("{} ({:.0} MB/s)", fmt_ms(seconds), bytes as f64 / seconds / 1e6)
}

/// The FUSE ceiling (issue 17): `cat by-offset/0`, `cat by-offset/0.json` and `cat lines >>
/// append` through topicfs against a null filesystem with the same FUSE settings serving the
/// same bytes from memory (and writing what it is given to a plain file), and against raw
/// `cat` of the page cache, in the same run, alternating.
fn fuse_ceiling(
    plan: &Plan,
    a: &Args,
    kafka: &Generated,
    report: &mut Report,
) -> Result<(), String> {
    let mnt = a.work.join("mnt");
    let null_mnt = a.work.join("mnt-null");
    let (m, _) = Mount::topic(a, &kafka.dir, &mnt, &["--read-only"])?;
    let part = mnt.join(TOPIC).join("0");
    let values = fs::read(part.join("by-offset/0")).map_err(|e| e.to_string())?;
    let json_bytes = fs::read(part.join("by-offset/0.json")).map_err(|e| e.to_string())?;
    let (values_len, json_len) = (values.len() as u64, json_bytes.len() as u64);
    let sink = a.work.join("null-sink.txt");
    let nullfs = ceiling::NullFs::new(values, json_bytes, &sink).map_err(|e| e.to_string())?;
    let null = ceiling::NullMount::start(nullfs, &null_mnt, 2)?;
    let raw: Vec<String> = segment_logs(kafka).iter().map(|p| sh_quote(p)).collect();
    let raw_cat = format!("cat {}", raw.join(" "));
    let cats = [
        format!("cat {}", sh_quote(&part.join("by-offset/0"))),
        format!("cat {}", sh_quote(&null.mnt.join("data"))),
        format!("cat {}", sh_quote(&part.join("by-offset/0.json"))),
        format!("cat {}", sh_quote(&null.mnt.join("data.json"))),
        raw_cat,
    ];
    for c in &cats {
        time_sh(c)?; // warm: page cache, render index
    }
    let reps = plan.reps.max(3);
    let mut t: Vec<Vec<f64>> = vec![vec![]; cats.len()];
    // The daemon's CPU (user + system) per `cat` of its two files: what an A/B of two daemons
    // compares when the machine's speed moves between runs.
    let mut cpu: [Vec<f64>; 2] = [vec![], vec![]];
    for rep in 0..reps {
        let order: Vec<usize> =
            if rep % 2 == 0 { (0..cats.len()).collect() } else { (0..cats.len()).rev().collect() };
        for i in order {
            let c0 = process_cpu_ns(m.pid());
            t[i].push(time_sh(&cats[i])?);
            if i == 0 || i == 2 {
                cpu[i / 2].push((process_cpu_ns(m.pid()) - c0) as f64 / 1e9);
            }
        }
    }
    drop(m);
    let med: Vec<f64> = t.iter().map(|x| stat(x).median).collect();
    let sec = "ceiling";
    for (k, (file, bytes)) in
        [("by-offset/0", values_len), ("by-offset/0.json", json_len)].into_iter().enumerate()
    {
        let c = stat(&cpu[k]).median;
        report.row(
            sec,
            format!("daemon CPU (user + system) per cat {file}"),
            format!("{} ({:.0} µs/MB)", fmt_ms(c), c * 1e6 / (bytes as f64 / 1e6)),
            "",
            "",
            "",
            None,
        );
    }
    report.rate_ratio_row(
        sec,
        "null fs read of the value lines vs raw cat of the segments",
        (med[1], values_len),
        (med[4], kafka.log_bytes),
        None,
    );
    report.rate_ratio_row(
        sec,
        "cat by-offset/0 vs the null fs read of the same bytes",
        (med[0], values_len),
        (med[1], values_len),
        Some(0.75),
    );
    report.rate_ratio_row(
        sec,
        "cat by-offset/0 vs raw cat of the segments",
        (med[0], values_len),
        (med[4], kafka.log_bytes),
        None,
    );
    report.rate_ratio_row(
        sec,
        "cat by-offset/0.json vs the null fs read of the same bytes",
        (med[2], json_len),
        (med[3], json_len),
        Some(0.50),
    );
    report.rate_ratio_row(
        sec,
        "cat by-offset/0.json vs raw cat of the segments",
        (med[2], json_len),
        (med[4], kafka.log_bytes),
        None,
    );

    report.put(
        "ceiling",
        json!({"reps": reps, "values_bytes": values_len, "json_bytes": json_len,
        "log_bytes": kafka.log_bytes, "topicfs_values_s": t[0], "null_values_s": t[1],
        "topicfs_json_s": t[2], "null_json_s": t[3], "raw_cat_s": t[4],
        "daemon_cpu_values_s": cpu[0], "daemon_cpu_json_s": cpu[1]}),
    );
    if !a.ceiling_reads {
        ceiling_append(plan, a, &null, report)?;
    }
    drop(null);
    let _ = fs::remove_file(&sink);
    Ok(())
}

/// Records per batch of the lookup figures' partition (issue 36 §3): about 1 MiB batches of
/// 100-byte values, what topicfs's own `append` and librdkafka's producer write.
const LOOKUP_BATCH_RECORDS: usize = 10_000;

/// Open + first read of random `by-offset/N` right after a sequential read of the same
/// partition (issue 36 §3: "1 M-record, one-segment partitions right after a sequential
/// read"): per round, `cat by-offset/0` of the whole partition and then `lookups` opens of a
/// random `by-offset/N`, each reading once with a buffer of `st_blksize` (what Python's `open`
/// and `read(100)` ask) and checked to start with record `N`. Against open + one read of the
/// same size at a random position of the partition's `.log` (the page cache's floor).
fn lookups_after_read(
    a: &Args,
    g: &Generated,
    mount_args: &[&str],
    label: &str,
    rounds: usize,
    lookups: usize,
    report: &mut Report,
) -> Result<(), String> {
    let mnt = a.work.join("mnt-lookup");
    let (m, _) = Mount::topic(a, &g.dir, &mnt, mount_args)?;
    let part = mnt.join(TOPIC).join("0");
    let by0 = part.join("by-offset").join("0");
    let blksize =
        std::os::unix::fs::MetadataExt::blksize(&fs::metadata(&by0).map_err(|e| e.to_string())?)
            as usize;
    let mut buf = vec![0u8; blksize.max(4096)];
    let raw: Vec<(PathBuf, u64)> = segment_logs(g)
        .into_iter()
        .map(|log| fs::metadata(&log).map(|m| (log, m.len())).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut mount_us, mut raw_us) = (vec![], vec![]);
    let cat = format!("cat {} > /dev/null", sh_quote(&by0));
    for _ in 0..rounds {
        time_sh(&cat)?;
        for _ in 0..lookups {
            let o = rng.below(g.records);
            let p = part.join("by-offset").join(o.to_string());
            let t = Instant::now();
            let mut f = File::open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let n = f.read(&mut buf).map_err(|e| format!("{}: {e}", p.display()))?;
            mount_us.push(t.elapsed().as_secs_f64() * 1e6);
            let expect = format!("record {o:012}");
            if n < expect.len() || &buf[..expect.len()] != expect.as_bytes() {
                return Err(format!("{}: first record is not {expect}", p.display()));
            }
            let (log, len) = &raw[rng.below(raw.len() as u64) as usize];
            let at = rng.below(len.saturating_sub(buf.len() as u64).max(1)) & !4095;
            let t = Instant::now();
            let f = File::open(log).map_err(|e| format!("{}: {e}", log.display()))?;
            std::os::unix::fs::FileExt::read_at(&f, &mut buf, at).map_err(|e| e.to_string())?;
            raw_us.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    m.stop()?;
    let r = latency_rounds(&mount_us, rounds);
    let (rp50, rp99, _) = latency(raw_us);
    report.row(
        "lookup",
        format!(
            "open + first read ({} KiB) of a random by-offset/N right after cat by-offset/0, {label}",
            buf.len() >> 10
        ),
        format!(
            "p50 {:.2} ms, p99 {:.2} ms (rounds {:.2}..{:.2})",
            r.p50 / 1e3,
            r.p99 / 1e3,
            r.p99_best / 1e3,
            r.p99_worst / 1e3
        ),
        format!("raw .log open + read p50 {:.3} ms, p99 {:.3} ms", rp50 / 1e3, rp99 / 1e3),
        "",
        "p99 < 2 ms",
        Some(r.p99 < 2000.0),
    );
    let key = if mount_args.contains(&"--read-only") { "read_only" } else { "read_write" };
    report.put(
        &format!("lookup_after_read_{key}"),
        json!({"label": label, "p50_us": r.p50, "p99_us": r.p99, "max_us": r.max,
               "p99_best_round_us": r.p99_best, "p99_worst_round_us": r.p99_worst,
               "rounds": rounds, "lookups_per_round": lookups, "read_bytes": buf.len(),
               "raw_p50_us": rp50, "raw_p99_us": rp99}),
    );
    Ok(())
}

/// A fresh data dir at `data` (anything there before removed) holding the benchmark topic with
/// one empty partition, closed cleanly, for a mount to append to.
fn empty_topic_dir(data: &Path) -> Result<(), String> {
    let _ = fs::remove_dir_all(data);
    let logs =
        LogDirs::open_dir(data, bench_config(1 << 30), Default::default(), SegmentMode::Writable)
            .map_err(|e| e.to_string())?;
    logs.create_topic(TOPIC, 1).map_err(|e| e.to_string())?;
    logs.shutdown().map_err(|e| e.to_string())
}

/// The bytes of the entries topicfs keeps beside the segments of the partition dir `dir`.
fn beside_bytes(dir: &Path) -> u64 {
    beside_files(dir).iter().map(|p| fs::metadata(p).map_or(0, |m| m.len())).sum()
}

/// The entries topicfs keeps beside the segments of the partition dir `dir`.
fn beside_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else { return vec![] };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".topicfs-"))
        .map(|e| e.path())
        .collect()
}

/// Moves every file of `from` whose name contains `.topicfs-` into `to` (created).
fn move_beside_files(from: &Path, to: &Path) -> Result<(), String> {
    fs::create_dir_all(to).map_err(|e| e.to_string())?;
    for p in beside_files(from) {
        let name = p.file_name().ok_or("no file name")?;
        fs::rename(&p, to.join(name)).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// Issue 36 §3, exact sizes on any mount of a log topicfs wrote: `lines` lines `cat` into
/// `append` of a fresh read-write mount with `--cache-dir none`, the daemon left alone until
/// what it keeps beside the segments stops growing (the sizing that follows the append
/// handle's close), unmounted; then, alternating, `tail -n 10 by-offset/0` on a new mount with
/// an empty cache dir of that log, and of the same log as a broker would have written it (the
/// entries beside the segments moved away: the size is not yet known, `tail` reads forward).
/// Each output is checked to end with the last line appended, and the first `stat` of the
/// topicfs-written log to show the exact size.
fn remount_sizes(a: &Args, lines: u64, reps: usize, report: &mut Report) -> Result<(), String> {
    let sec = "lookup";
    let data = a.work.join("data-remount");
    let aside = a.work.join("beside-aside");
    let empty = a.work.join("cache-empty");
    let src = a.work.join("lines-remount.txt");
    let mnt = a.work.join("mnt-remount");
    empty_topic_dir(&data)?;
    let _ = fs::remove_dir_all(&aside);
    write_lines_file(&src, lines)?;
    let (m, _) = Mount::topic(a, &data, &mnt, &["--cache-dir", "none"])?;
    let part = mnt.join(TOPIC).join("0");
    let part_dir = data.join(format!("{TOPIC}-0"));
    let append_s =
        time_sh(&format!("cat {} >> {}", sh_quote(&src), sh_quote(&part.join("append"))))?;
    // The sizing after the close runs once requests pause: wait (without requests) until the
    // entries beside the segments have not grown for 2 s.
    let started = Instant::now();
    let (mut last, mut quiet_since) = (beside_bytes(&part_dir), Instant::now());
    while quiet_since.elapsed() < Duration::from_secs(2) || last == 0 {
        if started.elapsed() > Duration::from_secs(300) {
            return Err("remount sizes: no sizes beside the segments after 300 s".into());
        }
        std::thread::sleep(Duration::from_millis(200));
        let now = beside_bytes(&part_dir);
        if now != last {
            (last, quiet_since) = (now, Instant::now());
        }
    }
    let sizing_s = started.elapsed().as_secs_f64() - 2.0;
    m.stop()?;
    let entries = beside_files(&part_dir).len();
    let last_line = format!("line {:012}", lines - 1);
    let out = a.work.join("tail-remount.txt");
    let (mut kept, mut broker, mut exact_at_once) = (vec![], vec![], true);
    for rep in 0..reps {
        let mut order = [true, false];
        if rep % 2 == 1 {
            order.reverse();
        }
        for topicfs_written in order {
            if !topicfs_written {
                move_beside_files(&part_dir, &aside)?;
            }
            let _ = fs::remove_dir_all(&empty);
            fs::create_dir_all(&empty).map_err(|e| e.to_string())?;
            let dir_arg = empty.to_string_lossy().into_owned();
            let (m, _) = Mount::topic(a, &data, &mnt, &["--read-only", "--cache-dir", &dir_arg])?;
            let by0 = part.join("by-offset").join("0");
            let first_stat = fs::metadata(&by0).map(|md| md.len()).unwrap_or(0);
            let secs = time_sh(&format!("tail -n 10 {} > {}", sh_quote(&by0), sh_quote(&out)))?;
            m.stop()?;
            if !topicfs_written {
                move_beside_files(&aside, &part_dir)?;
            }
            let text = fs::read_to_string(&out).map_err(|e| e.to_string())?;
            if !text.lines().last().is_some_and(|l| l.starts_with(&last_line)) {
                return Err(format!("remount sizes: tail -n 10 did not end with {last_line}"));
            }
            if topicfs_written {
                exact_at_once &= first_stat == lines * VALUE_BYTES as u64;
                kept.push(secs);
            } else {
                broker.push(secs);
            }
        }
    }
    let _ = fs::remove_dir_all(&empty);
    let _ = fs::remove_dir_all(&aside);
    let _ = fs::remove_file(&src);
    let _ = fs::remove_file(&out);
    let (c, u) = (stat(&kept).median, stat(&broker).median);
    report.row(
        sec,
        format!(
            "tail -n 10 by-offset/0 on a new mount (empty cache dir) of {lines} lines topicfs \
             appended (sized in the background after the append's close: {sizing_s:.1} s, \
             {entries} entries beside the segments, {last} bytes)"
        ),
        fmt_ms(c),
        format!("{} the same log without them (as a broker writes it)", fmt_ms(u)),
        format!("{:.1}x", u / c),
        "exact size at the first stat",
        Some(exact_at_once),
    );
    report.put(
        "remount_sizes",
        json!({"lines": lines, "reps": reps, "append_s": append_s, "sizing_s": sizing_s,
               "beside_entries": entries, "beside_bytes": last,
               "topicfs_written_tail_s": kept, "broker_like_tail_s": broker,
               "exact_at_first_stat": exact_at_once}),
    );
    let _ = fs::remove_dir_all(&data);
    Ok(())
}

/// The append rows of the FUSE ceiling: the same lines `cat`ed into topicfs's `append` (a
/// fresh writable mount each repetition), the null fs's sink and a plain file, alternating the
/// order; each repetition's log end offset is checked against the line count.
fn ceiling_append(
    plan: &Plan,
    a: &Args,
    null: &ceiling::NullMount,
    report: &mut Report,
) -> Result<(), String> {
    let mnt = a.work.join("mnt");
    let sec = "ceiling";
    let reps = plan.reps.max(3);
    let lines = plan.mount_append_lines;
    let src = a.work.join("lines.txt");
    write_lines_file(&src, lines)?;
    let data = a.work.join("data-append");
    let plain = a.work.join("append-plain.txt");
    let (mut top_s, mut null_s, mut plain_s, mut cpu) = (vec![], vec![], vec![], vec![]);
    for rep in 0..reps {
        empty_topic_dir(&data)?;
        let (m, _) = Mount::topic(a, &data, &mnt, &[])?;
        let append = mnt.join(TOPIC).join("0").join("append");
        // Several appends into one mount, as a producer appends (the issue's bimodal
        // appends showed within one mount), each beside a null fs and a plain-file run.
        for k in 0..APPENDS_PER_MOUNT {
            let mut runs: Vec<(usize, String)> = vec![
                (0, format!("cat {} >> {}", sh_quote(&src), sh_quote(&append))),
                (1, format!("cat {} >> {}", sh_quote(&src), sh_quote(&null.mnt.join("sink")))),
                (2, format!("rm -f {p}; cat {} >> {p}", sh_quote(&src), p = sh_quote(&plain))),
            ];
            if (rep + k) % 2 == 1 {
                runs.reverse();
            }
            for (i, script) in runs {
                let c0 = process_cpu_ns(m.pid());
                let secs = time_sh(&script)?;
                if i == 0 {
                    cpu.push((process_cpu_ns(m.pid()) - c0) as f64 / lines as f64);
                }
                [&mut top_s, &mut null_s, &mut plain_s][i].push(secs);
            }
        }
        m.stop()?;
        let logs = LogDirs::open_dir(
            &data,
            bench_config(1 << 30),
            Default::default(),
            SegmentMode::ReadOnly,
        )
        .map_err(|e| e.to_string())?;
        let end = logs.log(TOPIC, 0).map_err(|e| e.to_string())?.log_end_offset();
        let want = lines * APPENDS_PER_MOUNT as u64;
        if end.0 as u64 != want {
            return Err(format!("ceiling append: log end offset {end}, expected {want}"));
        }
    }
    let bytes = lines * VALUE_BYTES as u64;
    let (tm, nm, pm) = (stat(&top_s).median, stat(&null_s).median, stat(&plain_s).median);
    report.rate_ratio_row(
        sec,
        "cat lines >> append vs the null fs's write of the same lines",
        (tm, bytes),
        (nm, bytes),
        Some(0.80),
    );
    report.rate_ratio_row(
        sec,
        "cat lines >> append vs cat >> a plain file",
        (tm, bytes),
        (pm, bytes),
        None,
    );
    report.rate_ratio_row(
        sec,
        "null fs write vs cat >> a plain file",
        (nm, bytes),
        (pm, bytes),
        None,
    );
    for (what, samples) in [
        ("cat lines >> append", &top_s),
        ("null fs write", &null_s),
        ("cat >> a plain file", &plain_s),
    ] {
        let d = distribution(samples);
        report.row(
            sec,
            format!(
                "{what}: distribution of {} appends ({APPENDS_PER_MOUNT} per mount)",
                samples.len()
            ),
            format!(
                "min {} / p25 {} / p50 {} / p75 {} / max {}",
                fmt_ms(d[0]),
                fmt_ms(d[1]),
                fmt_ms(d[2]),
                fmt_ms(d[3]),
                fmt_ms(d[4])
            ),
            "",
            format!("max/min {:.2}", d[4] / d[0]),
            "",
            None,
        );
    }
    report.row(
        "CPU",
        "daemon CPU per record written (ceiling append)",
        format!("{:.0} ns", stat(&cpu).median),
        "",
        "",
        "",
        None,
    );
    report.put(
        "ceiling_append",
        json!({"reps": reps, "append_lines": lines, "topicfs_append_s": top_s,
               "null_append_s": null_s, "plain_append_s": plain_s,
               "daemon_cpu_ns_per_record": cpu}),
    );
    let _ = fs::remove_file(&plain);
    let _ = fs::remove_dir_all(&data);
    Ok(())
}

/// The rendering alone (issue 17): `by-offset/0` and `by-offset/0.json` read in-process through
/// one view stream in 1 MiB windows (what a FUSE read asks for), on one thread, without FUSE
/// and without read-ahead: the thread's CPU time per MB rendered, against reading the `.log`
/// files with `read(2)` into a 1 MiB buffer. The render index is warm (a first pass builds it),
/// as it is for the mount's figures.
fn render_in_process(plan: &Plan, g: &Generated, report: &mut Report) -> Result<(), String> {
    let logs = Arc::new(
        LogDirs::open_dir(&g.dir, bench_config(1 << 30), Default::default(), SegmentMode::ReadOnly)
            .map_err(|e| e.to_string())?,
    );
    let log = logs.log(TOPIC, 0).map_err(|e| e.to_string())?;
    let registry = StreamRegistry::new();
    let files = segment_logs(g);
    let raw = || -> Result<(u64, u64), String> {
        let mut buf = vec![0u8; 1 << 20];
        let cpu0 = thread_cpu_ns();
        let mut n = 0u64;
        for f in &files {
            let mut file = File::open(f).map_err(|e| e.to_string())?;
            loop {
                let got = file.read(&mut buf).map_err(|e| e.to_string())?;
                if got == 0 {
                    break;
                }
                n += got as u64;
            }
        }
        Ok((thread_cpu_ns() - cpu0, n))
    };
    let render = |name: &str| -> Result<(u64, u64), String> {
        let part: Arc<dyn PartitionSource> = log.clone();
        let spec = StreamSpec::parse_by_offset(name).map_err(|e| e.to_string())?;
        let stream = registry.open(part, &spec, now_ms()).map_err(|e| e.to_string())?;
        let cpu0 = thread_cpu_ns();
        let mut pos = 0u64;
        loop {
            let bytes = stream.read_at(pos, 1 << 20).map_err(|e| e.to_string())?;
            if bytes.is_empty() {
                break;
            }
            pos += bytes.len() as u64;
            std::hint::black_box(bytes);
        }
        Ok((thread_cpu_ns() - cpu0, pos))
    };
    raw()?;
    render("0")?;
    render("0.json")?;
    let (mut raw_ns, mut val_ns, mut json_ns) = (vec![], vec![], vec![]);
    let (mut raw_b, mut val_b, mut json_b) = (0, 0, 0);
    for _ in 0..plan.reps.max(3) {
        let (ns, b) = raw()?;
        raw_ns.push(ns as f64);
        raw_b = b;
        let (ns, b) = render("0")?;
        val_ns.push(ns as f64);
        val_b = b;
        let (ns, b) = render("0.json")?;
        json_ns.push(ns as f64);
        json_b = b;
    }
    let per_mb = |ns: &[f64], bytes: u64| stat(ns).median / (bytes as f64 / 1e6);
    let (raw_c, val_c, json_c) =
        (per_mb(&raw_ns, raw_b), per_mb(&val_ns, val_b), per_mb(&json_ns, json_b));
    let cell =
        |c: f64, ns: &[f64]| format!("{:.0} µs/MB ({:.1} ms CPU)", c / 1e3, stat(ns).median / 1e6);
    let sec = "render";
    for (name, c, ns) in [
        ("by-offset/0 rendered in-process, CPU per MB (1 MiB windows)", val_c, &val_ns),
        ("by-offset/0.json rendered in-process, CPU per MB (1 MiB windows)", json_c, &json_ns),
    ] {
        report.row(
            sec,
            name,
            cell(c, ns),
            cell(raw_c, &raw_ns),
            format!("{:.2}", raw_c / c),
            "",
            None,
        );
    }
    report.put(
        "render_in_process",
        json!({"values_bytes": val_b, "json_bytes": json_b, "log_bytes": raw_b,
        "values_cpu_ns": val_ns, "json_cpu_ns": json_ns, "raw_read_cpu_ns": raw_ns}),
    );
    Ok(())
}

/// Only the append rows of the FUSE ceiling (`--ceiling-append`), with a null fs that serves
/// no read data.
fn ceiling_append_only(plan: &Plan, a: &Args, report: &mut Report) -> Result<(), String> {
    let sink = a.work.join("null-sink.txt");
    let nullfs = ceiling::NullFs::new(vec![], vec![], &sink).map_err(|e| e.to_string())?;
    let null = ceiling::NullMount::start(nullfs, &a.work.join("mnt-null"), 2)?;
    let result = ceiling_append(plan, a, &null, report);
    drop(null);
    let _ = fs::remove_file(&sink);
    result
}

/// Time to open `path` and read its first byte (in-process: no shell or process start).
fn first_byte_s(path: &Path) -> Result<f64, String> {
    let start = Instant::now();
    let mut f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut b = [0u8; 1];
    let n = f.read(&mut b).map_err(|e| format!("{}: {e}", path.display()))?;
    if n == 0 {
        return Err(format!("{}: empty", path.display()));
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Free bytes on the filesystem of `dir` (`df`).
fn free_bytes(dir: &Path) -> u64 {
    let out = Command::new("df").arg("-B1").arg("--output=avail").arg(dir).output();
    out.ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().nth(1).and_then(|l| l.trim().parse().ok()))
        .unwrap_or(0)
}

/// Time to open `path` and read its first record: one read of 4 KiB (a 100-byte value line,
/// its JSON object, or the first batch's header), in-process.
fn first_record_s(path: &Path) -> Result<f64, String> {
    let start = Instant::now();
    let mut f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut b = [0u8; 4096];
    let n = f.read(&mut b).map_err(|e| format!("{}: {e}", path.display()))?;
    if n == 0 {
        return Err(format!("{}: empty", path.display()));
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Polls `path` every 100 ms until its `st_size` is not 0 (its size is known); the seconds
/// that took, or an error after `limit`.
fn wait_exact(path: &Path, limit: Duration) -> Result<f64, String> {
    let started = Instant::now();
    loop {
        if fs::metadata(path).map(|m| m.len()).unwrap_or(0) > 0 {
            return Ok(started.elapsed().as_secs_f64());
        }
        if started.elapsed() > limit {
            return Err(format!("{}: size still not known after {limit:?}", path.display()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The six kinds of random stream the open figures sample.
const OPEN_KINDS: [&str; 6] = [
    "by-offset/N",
    "by-offset/N.json",
    "by-offset/N.raw",
    "by-time/T",
    "by-time/T.json",
    "by-time/T.raw",
];

/// `samples` rounds of the six kinds of random stream of `g` under `part`, each timed by
/// `time`: the seconds per kind.
fn open_samples(
    g: &Generated,
    part: &Path,
    rng: &mut Rng,
    samples: usize,
    time: fn(&Path) -> Result<f64, String>,
) -> Result<BTreeMap<&'static str, Vec<f64>>, String> {
    let mut out: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for _ in 0..samples {
        let n = rng.below(g.records);
        let t = g.t0 + rng.below(g.records) as i64;
        let names = [
            format!("by-offset/{n}"),
            format!("by-offset/{n}.json"),
            format!("by-offset/{n}.raw"),
            format!("by-time/{t}"),
            format!("by-time/{t}.json"),
            format!("by-time/{t}.raw"),
        ];
        for (kind, name) in OPEN_KINDS.iter().zip(names) {
            out.entry(kind).or_default().push(time(&part.join(&name))?);
        }
    }
    Ok(out)
}

/// Rows (p50 and p99 against `limit`) and JSON of open samples.
fn open_rows(
    report: &mut Report,
    label: &str,
    what: &str,
    samples: &BTreeMap<&'static str, Vec<f64>>,
    target: (&str, f64),
    json_out: &mut serde_json::Map<String, Value>,
) {
    for (kind, v) in samples {
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        let p50 = quantile(&sorted, 0.5);
        let p99 = quantile(&sorted, 0.99);
        report.seconds_row(
            "cold open",
            format!("{label}: {what} of {kind}, p99 of {} (p50 {})", v.len(), fmt_ms(p50)),
            p99,
            Some(target),
        );
        json_out.insert(format!("{what}/{kind}"), json!(v));
    }
}

/// Cold and warm opens (issue 17), on read-only mounts of partitions in 1 GiB segments (1,000
/// records and a large one, about 10 GB) and of one in small segments:
/// - first mount, empty `--cache-dir`: open + first byte of 30 random `by-offset/N` and
///   `by-time/T` in every format at once after mount (cold); how long until background sizing
///   makes `by-offset/0` (values) and then `by-offset/0.json` exact; `tail -n 10 by-offset/0`
///   once `by-offset/0` is exact; then open + first record of 200 random streams of each kind
///   (warm);
/// - remount with the cache the first mount filled: `tail -n 10 by-offset/0` as the first thing
///   on the mount, then the cold and warm samples again.
fn cold_opens(a: &Args, one_batch: u64, report: &mut Report) -> Result<(), String> {
    let per_record = one_batch.div_ceil(BATCH_RECORDS as u64).max(1);
    let free = free_bytes(&a.work);
    let large = a.cold_records.unwrap_or_else(|| {
        let target: u64 = 10 << 30;
        let bytes = if free >= 20 << 30 { target } else { free.saturating_sub(10 << 30) };
        (bytes / per_record).max(1_000_000)
    });
    report.notes.push(format!(
        "cold opens: {} free on the work disk at the start; large partition {large} records (~{:.1} GB)",
        free as f64 / 1e9,
        (large * per_record) as f64 / 1e9
    ));
    let mnt = a.work.join("mnt");
    let mut rng = Rng(0x005e_ed17);
    let (cold_samples, warm_samples) = (30, 200);
    let mut json_all = serde_json::Map::new();
    let small_segment: u64 = 1 << 20;
    for (records, segment_bytes) in
        [(1000u64, KAFKA_SEGMENT_BYTES), (1_000_000, small_segment), (large, KAFKA_SEGMENT_BYTES)]
    {
        let layout = if segment_bytes == small_segment { "1 MiB" } else { "1 GiB" };
        let dir = a.work.join(format!("data-cold-{records}-{segment_bytes}"));
        let expected_segments = (records * per_record).div_ceil(segment_bytes).max(1);
        let g = match a.reuse_data.then(|| reuse(&dir, records, expected_segments)).flatten() {
            Some(g) => g,
            None => {
                eprintln!("generating {records} records in {layout} segments for cold opens ...");
                let (g, took) = generate_sized(&dir, 1, records, segment_bytes, BATCH_RECORDS)?;
                report.notes.push(format!(
                    "cold opens: generated {records} records ({:.2} GB, {} segments) in {:.0} s",
                    g.log_bytes as f64 / 1e9,
                    g.segments,
                    took.as_secs_f64()
                ));
                g
            }
        };
        let cache = a.work.join(format!("cache-cold-{records}-{segment_bytes}"));
        let _ = fs::remove_dir_all(&cache);
        let cache_s = cache.to_string_lossy().into_owned();
        for phase in ["first mount, no cache", "remount, cache warm"] {
            let extra = ["--read-only", "--cache-dir", cache_s.as_str()];
            let (m, mount_s) = Mount::topic(a, &g.dir, &mnt, &extra)?;
            let ready = Instant::now();
            let part = mnt.join(TOPIC).join("0");
            let label = format!(
                "{records} records ({:.1} GB, {} x {layout} segments), {phase}",
                g.log_bytes as f64 / 1e9,
                g.segments
            );
            let by0 = part.join("by-offset/0");
            let tail_script = format!("timeout 60 tail -n 10 {} >/dev/null", sh_quote(&by0));
            let mut phase_json = serde_json::Map::new();
            report.seconds_row(
                "cold open",
                format!("{label}: mount (spawn to first stat)"),
                mount_s,
                None,
            );
            phase_json.insert("mount_s".into(), json!(mount_s));
            let first = phase.starts_with("first");
            if !first {
                // A size not yet known (0) would make `tail` read forward from the start:
                // bounded here.
                let tail = time_sh(&tail_script).unwrap_or(60.0);
                report.seconds_row(
                    "cold open",
                    format!("{label}: tail -n 10 by-offset/0, first thing on the mount"),
                    tail,
                    Some(("< 50 ms", 0.050)),
                );
                phase_json.insert("tail_n_10_s".into(), json!(tail));
            }
            let cold = open_samples(&g, &part, &mut rng, cold_samples, first_byte_s)?;
            open_rows(
                report,
                &label,
                "cold open + first byte",
                &cold,
                ("< 50 ms", 0.050),
                &mut phase_json,
            );
            if first {
                let limit = Duration::from_secs(1800);
                wait_exact(&by0, limit)?;
                let values_s = ready.elapsed().as_secs_f64();
                report.seconds_row(
                    "cold open",
                    format!("{label}: by-offset/0 exact (background sizing), after mount"),
                    values_s,
                    None,
                );
                let tail = time_sh(&tail_script).unwrap_or(60.0);
                report.seconds_row(
                    "cold open",
                    format!("{label}: tail -n 10 by-offset/0 once by-offset/0 is exact"),
                    tail,
                    Some(("< 50 ms", 0.050)),
                );
                wait_exact(&part.join("by-offset/0.json"), limit)?;
                let json_s = ready.elapsed().as_secs_f64();
                report.seconds_row(
                    "cold open",
                    format!("{label}: by-offset/0.json exact (background sizing), after mount"),
                    json_s,
                    None,
                );
                phase_json.insert("values_exact_after_s".into(), json!(values_s));
                phase_json.insert("json_exact_after_s".into(), json!(json_s));
                phase_json.insert("tail_n_10_once_exact_s".into(), json!(tail));
            }
            let warm = open_samples(&g, &part, &mut rng, warm_samples, first_record_s)?;
            open_rows(
                report,
                &label,
                "warm open + first record",
                &warm,
                ("< 2 ms", 0.002),
                &mut phase_json,
            );
            m.stop()?;
            json_all.insert(format!("{records}x{layout}/{phase}"), Value::Object(phase_json));
        }
        if !a.reuse_data {
            let _ = fs::remove_dir_all(&dir);
        }
        let _ = fs::remove_dir_all(&cache);
    }
    report.put("cold_open", Value::Object(json_all));
    Ok(())
}

fn machine() -> Value {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown".to_string(), |s| s.trim().to_string());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let kernel =
        fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    json!({"cpu": model, "cores": cores, "memory": mem, "kernel": kernel, "loadavg_at_start": load})
}

fn run(a: &Args) -> Result<Report, String> {
    let plan = Plan::from_args(a);
    let mut report = Report::default();
    fs::create_dir_all(&a.work).map_err(|e| e.to_string())?;
    report.put("machine", machine());
    report.put("plan", json!({"mode": plan.mode, "records": plan.records, "segments": plan.segments, "reps": plan.reps}));
    eprintln!(
        "topicfs-bench: {} mode, {} records in ~{} segments, {} repetitions, work dir {}",
        plan.mode,
        plan.records,
        plan.segments,
        plan.reps,
        a.work.display()
    );

    if a.cluster_net {
        if !a.topicfs.exists() {
            return Err(format!("{} missing: cargo build --release", a.topicfs.display()));
        }
        machine_context(&mut report)?;
        cluster_net::run(a, &mut report)?;
        if let Ok(load) = fs::read_to_string("/proc/loadavg") {
            report.notes.push(format!("load average at the end: {}", load.trim()));
        }
        return Ok(report);
    }
    if a.cluster_wide {
        if !a.topicfs.exists() {
            return Err(format!("{} missing: cargo build --release", a.topicfs.display()));
        }
        machine_context(&mut report)?;
        cluster_wide::run(a, &mut report)?;
        if let Ok(load) = fs::read_to_string("/proc/loadavg") {
            report.notes.push(format!("load average at the end: {}", load.trim()));
        }
        return Ok(report);
    }
    if a.schemas {
        if !a.topicfs.exists() {
            return Err(format!("{} missing: cargo build --release", a.topicfs.display()));
        }
        machine_context(&mut report)?;
        schemas::run(a, &mut report)?;
        if let Ok(load) = fs::read_to_string("/proc/loadavg") {
            report.notes.push(format!("load average at the end: {}", load.trim()));
        }
        return Ok(report);
    }
    if a.cluster {
        if !a.topicfs.exists() {
            return Err(format!("{} missing: cargo build --release", a.topicfs.display()));
        }
        machine_context(&mut report)?;
        cluster::run(a, &mut report)?;
        if let Ok(load) = fs::read_to_string("/proc/loadavg") {
            report.notes.push(format!("load average at the end: {}", load.trim()));
        }
        return Ok(report);
    }
    let one_batch = batch_bytes(&a.work)?;
    if a.many_readers {
        let dir = a.work.join(format!("data-{}x1GiB", plan.records));
        let kafka = match a.reuse_data.then(|| reuse(&dir, plan.records, 1)).flatten() {
            Some(k) => k,
            None => {
                eprintln!("generating {} records in 1 GiB segments ...", plan.records);
                generate_sized(&dir, 1, plan.records, KAFKA_SEGMENT_BYTES, BATCH_RECORDS)?.0
            }
        };
        machine_context(&mut report)?;
        eprintln!("mount: many readers ...");
        many_readers(a, &kafka, &mut report)?;
        if !a.reuse_data {
            let _ = fs::remove_dir_all(&dir);
        }
        return Ok(report);
    }
    if a.by_key {
        machine_context(&mut report)?;
        by_key(&plan, a, &mut report)?;
        return Ok(report);
    }
    if a.shutdown {
        machine_context(&mut report)?;
        shutdown::run(a, &plan, &mut report)?;
        return Ok(report);
    }
    if a.ceiling_append {
        machine_context(&mut report)?;
        eprintln!("mount: the FUSE ceiling, appends ...");
        ceiling_append_only(&plan, a, &mut report)?;
        return Ok(report);
    }
    if a.ceiling_reads {
        machine_context(&mut report)?;
        let dir = a.work.join(format!("data-{}x1GiB", plan.records));
        let kafka = match a.reuse_data.then(|| reuse(&dir, plan.records, 1)).flatten() {
            Some(k) => k,
            None => {
                eprintln!("generating {} records in 1 GiB segments ...", plan.records);
                generate_sized(&dir, 1, plan.records, KAFKA_SEGMENT_BYTES, BATCH_RECORDS)?.0
            }
        };
        eprintln!("in-process: rendering by-offset/0 and .json ...");
        render_in_process(&plan, &kafka, &mut report)?;
        eprintln!("mount: the FUSE ceiling, reads only ...");
        fuse_ceiling(&plan, a, &kafka, &mut report)?;
        if !a.reuse_data {
            let _ = fs::remove_dir_all(&dir);
        }
        let records = 1_000_000;
        let dir = a.work.join("data-lookup-1M");
        eprintln!("generating {records} records in batches of {LOOKUP_BATCH_RECORDS} ...");
        let big = generate_sized(&dir, 1, records, KAFKA_SEGMENT_BYTES, LOOKUP_BATCH_RECORDS)?.0;
        eprintln!("mount: lookups right after a sequential read ...");
        for (args, how) in
            [(&["--read-only"][..], "read-only mount"), (&[][..], "read-write mount")]
        {
            let label = format!(
                "{records} records in one segment, batches of {LOOKUP_BATCH_RECORDS} (about 1 \
                 MiB), {how}"
            );
            lookups_after_read(a, &big, args, &label, plan.reps.max(3), 300, &mut report)?;
        }
        let _ = fs::remove_dir_all(&dir);
        eprintln!("mount: tail -n 10 on the next mount of a log topicfs appended ...");
        remount_sizes(a, a.remount_lines.max(10), plan.reps.max(3), &mut report)?;
        return Ok(report);
    }
    if a.ceiling_and_cold {
        machine_context(&mut report)?;
        if !a.cold_only {
            let dir = a.work.join(format!("data-{}x1GiB", plan.records));
            eprintln!("generating {} records in 1 GiB segments ...", plan.records);
            let kafka =
                generate_sized(&dir, 1, plan.records, KAFKA_SEGMENT_BYTES, BATCH_RECORDS)?.0;
            eprintln!("mount: the FUSE ceiling ...");
            fuse_ceiling(&plan, a, &kafka, &mut report)?;
            let _ = fs::remove_dir_all(&dir);
        }
        eprintln!("mount: cold opens ...");
        cold_opens(a, one_batch, &mut report)?;
        return Ok(report);
    }
    let big_dir = a.work.join(format!("data-{}x{}", plan.records, plan.segments));
    let (g, gen_time) =
        match a.reuse_data.then(|| reuse(&big_dir, plan.records, plan.segments)).flatten() {
            Some(g) => (g, None),
            None => {
                eprintln!("generating {} records ...", plan.records);
                let (g, t) =
                    generate(&big_dir, 1, plan.records, plan.segments, BATCH_RECORDS, one_batch)?;
                (g, Some(t))
            }
        };
    if let Some(t) = gen_time {
        report.notes.push(format!(
            "generated {} records ({:.2} GB, {} segments) with the engine in {:.1} s ({} rec/s)",
            g.records,
            g.log_bytes as f64 / 1e9,
            g.segments,
            t.as_secs_f64(),
            fmt_rate(g.records as f64 / t.as_secs_f64())
        ));
    }
    // The same records in Kafka-sized segments, for the sequential-read targets.
    let kafka_segments =
        (plan.records.div_ceil(BATCH_RECORDS as u64) * one_batch).div_ceil(KAFKA_SEGMENT_BYTES);
    let kafka_dir = a.work.join(format!("data-{}x1GiB", plan.records));
    let kafka =
        match a.reuse_data.then(|| reuse(&kafka_dir, plan.records, kafka_segments)).flatten() {
            Some(k) => k,
            None => {
                eprintln!("generating {} records in 1 GiB segments ...", plan.records);
                generate_sized(&kafka_dir, 1, plan.records, KAFKA_SEGMENT_BYTES, BATCH_RECORDS)?.0
            }
        };
    report.put(
        "data",
        json!({"records": g.records, "log_bytes": g.log_bytes, "segments": g.segments,
               "kafka_segments": kafka.segments, "kafka_segment_bytes": KAFKA_SEGMENT_BYTES}),
    );
    // The read-only broker dir: partitions x segments of 10-record batches, one per segment.
    let broker_dir = a.work.join("data-broker");
    let broker = match a
        .reuse_data
        .then(|| reuse(&broker_dir, plan.broker_segments * 10, plan.broker_segments))
        .flatten()
        .filter(|_| broker_dir.join(format!("{TOPIC}-{}", plan.broker_partitions - 1)).is_dir())
    {
        Some(b) => b,
        None => generate_broker(&broker_dir, &plan, one_batch)?,
    };

    machine_context(&mut report)?;
    eprintln!("in-process: append ...");
    engine_append(&plan, &a.work, &mut report)?;
    eprintln!("in-process: open, lookups, reads ...");
    engine_open(&plan, &g, &mut report)?;
    engine_lookups(&plan, &g, &mut report)?;
    engine_reads(&plan, &g, &mut report)?;
    if !a.no_mount {
        if !a.topicfs.exists() {
            return Err(format!("{} missing: cargo build --release", a.topicfs.display()));
        }
        eprintln!("mount: reads, tail, lookups ...");
        mount_reads(&plan, a, &g, &kafka, &mut report)?;
        eprintln!("mount: many readers ...");
        many_readers(a, &kafka, &mut report)?;
        eprintln!("mount: append ...");
        mount_append(&plan, a, &mut report)?;
        eprintln!("mount: mount times ...");
        mount_times(&plan, a, &g, &broker, &mut report)?;
    }
    let _ = fs::remove_dir_all(&broker_dir);
    if !a.reuse_data {
        let _ = fs::remove_dir_all(&big_dir);
        let _ = fs::remove_dir_all(&kafka_dir);
    }
    if let Ok(load) = fs::read_to_string("/proc/loadavg") {
        report.notes.push(format!("load average at the end: {}", load.trim()));
    }
    Ok(report)
}

// ---- by-key (issue 21) ----------------------------------------------------------------------

/// The key of record `n` among `keys` keys (spread at random, so a key's records are in every
/// segment and never adjacent).
fn bench_key(n: u64, keys: u64) -> String {
    let mut rng = Rng(n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    format!("user-{:07}", rng.below(keys))
}

/// By-key figures: index build through a mount against `cat by-offset/0.json`, index size
/// against the log, `by-key/<k>.json` and `latest/<k>` open plus first read, an absent key,
/// and `jq` over the JSON stream against `by-key/<k>.json` for one key.
fn by_key(plan: &Plan, a: &Args, report: &mut Report) -> Result<(), String> {
    let records = plan.records;
    let keys = (records / 10).max(1);
    let dir = a.work.join(format!("data-{records}-keyed"));
    let _ = fs::remove_dir_all(&dir);
    eprintln!("generating {records} records with {keys} keys in 1 GiB segments ...");
    let logs = LogDirs::open_dir(
        &dir,
        bench_config(KAFKA_SEGMENT_BYTES),
        Default::default(),
        SegmentMode::Writable,
    )
    .map_err(|e| e.to_string())?;
    logs.create_topic(TOPIC, 1).map_err(|e| e.to_string())?;
    let log = logs.log(TOPIC, 0).map_err(|e| e.to_string())?;
    let t0 = now_ms() - records as i64 - 60_000;
    let mut batch = Batch::new(BATCH_RECORDS);
    let mut n = 0;
    while n < records {
        let k = (records - n).min(BATCH_RECORDS as u64) as usize;
        batch.fill(n, t0);
        for (i, r) in batch.records[..k].iter_mut().enumerate() {
            r.key = Some(bench_key(n + i as u64, keys).into_bytes());
        }
        log.append(&batch.records[..k]).map_err(|e| e.to_string())?;
        n += k as u64;
    }
    let log_size = log_bytes(&log);
    let segments = log.segment_list().len();
    logs.shutdown().map_err(|e| e.to_string())?;
    drop(log);
    drop(logs);

    // In process: the build, and the size of the indexes against the log.
    let logs = LogDirs::open_dir(
        &dir,
        bench_config(KAFKA_SEGMENT_BYTES),
        Default::default(),
        SegmentMode::ReadOnly,
    )
    .map_err(|e| e.to_string())?;
    let log = logs.log(TOPIC, 0).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let index_bytes = log.keys().index_bytes(log.as_ref()).map_err(|e| e.to_string())?;
    let build_in_process = start.elapsed().as_secs_f64();
    drop(log);
    drop(logs);
    report.row(
        "by-key",
        format!(
            "key index size ({records} records, {keys} keys, {:.2} GB of log in {segments} \
             segments)",
            log_size as f64 / 1e9
        ),
        format!("{:.1} MB", index_bytes as f64 / 1e6),
        format!("{:.1} MB log", log_size as f64 / 1e6),
        format!("{:.3}", index_bytes as f64 / log_size as f64),
        "<= 0.10",
        Some(index_bytes as f64 <= 0.10 * log_size as f64),
    );
    report.row(
        "by-key",
        "key index build in process (every segment)",
        fmt_ms(build_in_process),
        "",
        "",
        "",
        None,
    );

    // Through a mount: the first query builds the index; the baseline is a full JSON read.
    let mnt = a.work.join("mnt");
    let part = mnt.join(TOPIC).join("0");
    let probe = format!("{TOPIC}/0");
    let json0 = part.join("by-offset").join("0.json");
    let (mut builds, mut cats) = (vec![], vec![]);
    let some_key = bench_key(records / 2, keys);
    for _ in 0..plan.reps.min(3) {
        let (m, _) = Mount::start(&a.topicfs, &dir, &mnt, &["--read-only"], &probe, &a.work)?;
        cats.push(time_sh(&format!("cat {} > /dev/null", sh_quote(&json0)))?);
        m.stop()?;
        let (m, _) = Mount::start(&a.topicfs, &dir, &mnt, &["--read-only"], &probe, &a.work)?;
        let first = part.join("by-key").join(format!("{some_key}.json"));
        builds.push(time_sh(&format!("cat {} > /dev/null", sh_quote(&first)))?);
        m.stop()?;
    }
    let (b, c) = (stat(&builds), stat(&cats));
    report.row(
        "by-key",
        "first by-key query on a fresh mount (index build) vs cat by-offset/0.json",
        format!("{} ({})", fmt_ms(b.median), fmt_spread(&b, 1000.0, "ms")),
        format!("{} ({})", fmt_ms(c.median), fmt_spread(&c, 1000.0, "ms")),
        format!("{:.2}", b.median / c.median),
        "<= 1.5",
        Some(b.median <= 1.5 * c.median),
    );

    // Lookups once built.
    let (m, _) = Mount::start(&a.topicfs, &dir, &mnt, &["--read-only"], &probe, &a.work)?;
    time_sh(&format!(
        "cat {} > /dev/null",
        sh_quote(&part.join("by-key").join(format!("{some_key}.json")))
    ))?;
    let mut rng = Rng(0x5EED);
    let mut buf = vec![0u8; 4096];
    let mut open_read = |path: PathBuf| -> Result<f64, String> {
        let start = Instant::now();
        let mut f = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let _ = f.read(&mut buf).map_err(|e| e.to_string())?;
        Ok(start.elapsed().as_secs_f64() * 1e6)
    };
    let lookups = plan.lookups_mount;
    let (mut by_key_us, mut latest_us, mut absent_us) = (vec![], vec![], vec![]);
    for i in 0..lookups {
        let key = bench_key(rng.below(records), keys);
        by_key_us.push(open_read(part.join("by-key").join(format!("{key}.json")))?);
        latest_us.push(open_read(part.join("latest").join(&key))?);
        let absent = format!("absent-{i}");
        absent_us.push(open_read(part.join("by-key").join(absent))?);
    }
    for (name, us, target) in [
        ("by-key/<k>.json open + first read", by_key_us, 5000.0),
        ("latest/<k> open + first read", latest_us, 5000.0),
        ("by-key/<absent> open + read", absent_us, 1000.0),
    ] {
        let r = latency_rounds(&us, 3);
        report.row(
            "by-key",
            format!("{name} ({lookups} random keys): p50 / p99"),
            format!("{:.0} / {:.0} us", r.p50, r.p99),
            "",
            "",
            format!("p99 < {:.0} ms", target / 1000.0),
            Some(r.p99 < target),
        );
    }
    // One key: jq scanning the JSON stream against the index.
    let jq = time_sh(&format!(
        "jq -c 'select(.key == \"{some_key}\")' {} > /dev/null",
        sh_quote(&json0)
    ))?;
    let mut direct = vec![];
    for _ in 0..5 {
        let path = part.join("by-key").join(format!("{some_key}.json"));
        direct.push(time_sh(&format!("cat {} > /dev/null", sh_quote(&path)))?);
    }
    let d = stat(&direct);
    report.row(
        "by-key",
        "one key: cat by-key/<k>.json vs jq select(.key == k) over by-offset/0.json",
        fmt_ms(d.median),
        fmt_ms(jq),
        format!("{:.0}x faster", jq / d.median),
        "",
        None,
    );
    m.stop()?;
    if !a.reuse_data {
        let _ = fs::remove_dir_all(&dir);
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(report) => {
            report.print();
            let mut json = report.json.clone();
            json.insert(
                "table".into(),
                Value::Array(
                    report
                        .rows
                        .iter()
                        .map(|r| {
                            json!({"section": r.section, "figure": r.name, "topicfs": r.value,
                                   "baseline": r.baseline, "ratio": r.ratio, "target": r.target,
                                   "verdict": r.verdict})
                        })
                        .collect(),
                ),
            );
            let text = serde_json::to_string_pretty(&json).unwrap_or_default();
            if let Err(e) = fs::write(&args.json, text + "\n") {
                eprintln!("topicfs-bench: {}: {e}", args.json.display());
                return ExitCode::FAILURE;
            }
            eprintln!("figures written to {}", args.json.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("topicfs-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
