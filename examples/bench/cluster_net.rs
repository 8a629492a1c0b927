//! The cluster network rows of `topicfs-bench` (`--cluster-net`, issue 36): a tansu broker
//! behind a delaying TCP proxy (`scripts/bench-proxy.py`; the broker advertises the proxy, so
//! every client, the mount's and confluent-kafka's, talks through it):
//!
//! - `cat by-offset/0` of a partition (1 M 100-byte records by default) through a cluster
//!   mount against confluent-kafka consuming it, at round-trip times of 0, 4 and 20 ms
//!   (`--cluster-delays-ms`), and the mount's throughput at each delay over its throughput at
//!   0 ms (the proxy's own cost is in both);
//! - followers: confluent-kafka producing about 75 K records/s (`--follow-rate`) into one
//!   partition for `--follow-seconds`, while 1, 4 and 16 `tail -n +1 -f by-offset/0` of a
//!   cluster mount follow it; the figure is the time from the producer's last acknowledgement
//!   to every follower having the last record, each follower's lines checked to be every
//!   record exactly once, in order;
//! - partitions confluent-kafka produced (issue 47, `--cluster-variants`): `linger.ms` 0, 5
//!   and 20, two producers interleaved on one partition, lz4; for each, `cat by-offset/0` at 0
//!   and 20 ms, the 20 ms rate over the 0 ms one, and confluent-kafka consuming it as the peer,
//!   with the batches' framing as a Fetch of its first MiB shows it (records per batch).

use super::cluster::{Broker, client, confluent, seconds_of, seed};
use super::*;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::sync::Mutex;

/// The delaying proxy, killed on drop.
pub(crate) struct Proxy {
    child: Child,
    control: PathBuf,
}

impl Proxy {
    pub(crate) fn start(work: &Path, target: u16, port: u16) -> Result<Proxy, String> {
        let control = work.join("proxy-rtt-ms");
        fs::write(&control, "0").map_err(|e| e.to_string())?;
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/bench-proxy.py");
        let child = Command::new(super::cluster::python())
            .arg(script)
            .args([port.to_string(), target.to_string()])
            .arg(&control)
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("bench-proxy.py: {e}"))?;
        let p = Proxy { child, control };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err("bench-proxy.py not listening after 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(p)
    }

    pub(crate) fn set_rtt_ms(&self, ms: u64) -> Result<(), String> {
        fs::write(&self.control, ms.to_string()).map_err(|e| e.to_string())?;
        // The proxy reads it every 50 ms.
        std::thread::sleep(Duration::from_millis(200));
        Ok(())
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

pub(crate) fn list(s: &str) -> Vec<u64> {
    s.split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

pub fn run(a: &Args, report: &mut Report) -> Result<(), String> {
    let engine = a.cluster_engine.as_str();
    let reps = a.reps.unwrap_or(3).max(1);
    let proxy_port = free_port()?;
    eprintln!("cluster-net: starting tansu ({engine} engine) behind a delaying proxy ...");
    let broker = Broker::start_advertising(&a.work, engine, "tansu-net", Some(proxy_port))?;
    let proxy = Proxy::start(&a.work, broker.port, proxy_port)?;
    let via = format!("127.0.0.1:{proxy_port}");
    let c = client(&broker)?;
    let mnt = a.work.join("mnt-net");
    let source = format!("kafka://{via}");
    variants(a, report, &proxy, &c, &via, &mnt)?;
    if a.cluster_variants_only {
        return Ok(());
    }
    let records = a.cluster_records;
    eprintln!("cluster-net: producing {records} records ...");
    seed(&c, "read", records)?;
    let end = records as i64;
    let mount = |mnt: &Path| {
        Mount::start_source(
            &a.topicfs,
            OsStr::new(&source),
            mnt,
            &["--config", "request.timeout.ms=60000"],
            "read/0",
            &a.work,
        )
    };

    // ---- cat by-offset/0 vs confluent-kafka at each round-trip time ----
    let by0 = mnt.join("read").join("0").join("by-offset").join("0");
    let cat = format!("cat {} >/dev/null", sh_quote(&by0));
    let end_s = end.to_string();
    let mut loopback = None;
    let mut rows = Vec::new();
    for rtt in list(&a.cluster_delays_ms) {
        proxy.set_rtt_ms(rtt)?;
        eprintln!("cluster-net: {rtt} ms round trip: cat by-offset/0 vs confluent-kafka ...");
        let (m, _) = mount(&mnt)?;
        let (mut mt, mut ct, mut ratios) = (vec![], vec![], vec![]);
        for rep in 0..reps {
            let run_conf = || -> Result<f64, String> {
                let v = confluent(&["consume", &via, "read", "0", &end_s])?;
                if v["records"].as_i64() != Some(end) {
                    return Err(format!("confluent-kafka consumed {v}, expected {end} records"));
                }
                seconds_of(&v)
            };
            let (t, b) = if rep % 2 == 0 {
                let t = time_sh(&cat)?;
                (t, run_conf()?)
            } else {
                let b = run_conf()?;
                (time_sh(&cat)?, b)
            };
            mt.push(t);
            ct.push(b);
            ratios.push(b / t);
        }
        drop(m);
        let (t, b, r) = (stat(&mt), stat(&ct), stat(&ratios));
        let rate = end as f64 / t.median;
        let base = *loopback.get_or_insert(rate);
        report.row(
            "cluster network",
            format!("cat by-offset/0 through a cluster mount, {end} records, {rtt} ms round trip ({engine} tansu, proxy)"),
            format!("{} rec/s; {:.2} of 0 ms", fmt_rate(rate), rate / base),
            format!("confluent-kafka consume {} rec/s", fmt_rate(end as f64 / b.median)),
            format!("{:.2} ({:.2}..{:.2})", r.median, r.min, r.max),
            if rtt >= 20 { ">= 1.00; >= 0.50 of 0 ms" } else { ">= 1.00" },
            Some(r.median >= 1.0 && (rtt < 20 || rate / base >= 0.5)),
        );
        rows.push(json!({"rtt_ms": rtt, "seconds": mt, "confluent_seconds": ct,
                         "ratio_to_confluent": ratios, "of_loopback": rate / base}));
    }
    report.put("cluster_net_read", json!(rows));
    proxy.set_rtt_ms(0)?;
    drop(proxy);
    drop(broker);

    // ---- followers ----
    let broker = Broker::start(&a.work, engine)?;
    let c = client(&broker)?;
    let source = format!("kafka://{}", broker.addr());
    let mut rows = Vec::new();
    for n in list(&a.cluster_followers) {
        let topic = format!("follow{n}");
        c.create_topic(&topic, 1, &[]).map_err(|e| format!("create {topic}: {e}"))?;
        let (m, _) = Mount::start_source(
            &a.topicfs,
            OsStr::new(&source),
            &mnt,
            &["--config", "request.timeout.ms=60000"],
            &format!("{topic}/0"),
            &a.work,
        )?;
        let path = mnt.join(&topic).join("0").join("by-offset").join("0");
        eprintln!(
            "cluster-net: {n} followers of a partition produced at {} rec/s for {} s ...",
            a.follow_rate, a.follow_seconds
        );
        // Per follower: (lines, lines out of order, wall-clock time of the last line).
        let seen: Arc<Mutex<Vec<(u64, u64, f64)>>> =
            Arc::new(Mutex::new(vec![(0, 0, 0.0); n as usize]));
        let mut tails = Vec::new();
        let mut readers = Vec::new();
        for i in 0..n as usize {
            let mut child = Command::new("tail")
                .args(["-n", "+1", "-f"])
                .arg(&path)
                .stdout(Stdio::piped())
                .stdin(Stdio::null())
                .spawn()
                .map_err(|e| format!("tail: {e}"))?;
            let out = child.stdout.take().ok_or("tail without stdout")?;
            tails.push(child);
            let seen = Arc::clone(&seen);
            readers.push(std::thread::spawn(move || {
                for (expect, line) in BufReader::new(out).split(b'\n').enumerate() {
                    let Ok(line) = line else { break };
                    let now = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0.0, |d| d.as_secs_f64());
                    let ok = std::str::from_utf8(&line).ok().and_then(|s| s.parse::<usize>().ok())
                        == Some(expect);
                    let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                    s[i].0 += 1;
                    s[i].1 += u64::from(!ok);
                    s[i].2 = now;
                }
            }));
        }
        let v = confluent(&[
            "produce-rate",
            &broker.addr(),
            &topic,
            "0",
            &a.follow_rate.to_string(),
            &a.follow_seconds.to_string(),
        ])?;
        let produced = v["records"].as_u64().ok_or_else(|| format!("no records in {v}"))?;
        let last_ack = v["last_ack"].as_f64().ok_or_else(|| format!("no last_ack in {v}"))?;
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let done =
                seen.lock().unwrap_or_else(|p| p.into_inner()).iter().all(|s| s.0 >= produced);
            if done || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Anything more (a duplicate) would show within a poll of tail's.
        std::thread::sleep(Duration::from_millis(1500));
        for t in &mut tails {
            let _ = t.kill();
            let _ = t.wait();
        }
        for r in readers {
            let _ = r.join();
        }
        drop(m);
        let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let exact = seen.iter().all(|s| s.0 == produced && s.1 == 0);
        let lag: Vec<f64> = seen.iter().map(|s| s.2 - last_ack).collect();
        let worst = lag.iter().copied().fold(f64::MIN, f64::max);
        report.row(
            "cluster network",
            format!("{n} tail -f followers of one partition, {produced} records at {:.0} K rec/s ({engine} tansu)", v["rate"].as_f64().unwrap_or(0.0) / 1e3),
            format!("every follower had the last record {worst:.2} s after the last ack"),
            if exact { "each got every record once, in order".to_string() } else { format!("NOT exact: {:?}", seen.iter().map(|s| (s.0, s.1)).collect::<Vec<_>>()) },
            "",
            "exactly once; about one follower's time",
            Some(exact),
        );
        rows.push(json!({"followers": n, "records": produced, "lag_seconds": lag, "exact": exact}));
    }
    report.put("cluster_followers", json!(rows));
    Ok(())
}

/// One producer variant of [`variants`]: name, `linger.ms`, `compression.type`, producers.
const VARIANTS: [(&str, u32, &str, u32); 5] = [
    ("linger0", 0, "none", 1),
    ("linger5", 5, "none", 1),
    ("linger20", 20, "none", 1),
    ("two-producers", 5, "none", 2),
    ("lz4", 20, "lz4", 1),
];

/// Batches and records of the first Fetch answer (1 MiB) of `topic`/0: how the broker frames
/// what the producer wrote.
fn framing(c: &topicfs::cluster::Client, topic: &str) -> Result<(usize, i64), String> {
    use topicfs::cluster::FetchOptions;
    use topicfs::format::{parse_batch_info, peek_entry};
    let opts = FetchOptions { max_bytes: Some(1 << 20), ..FetchOptions::default() };
    let f = c.fetch(topic, 0, Offset(0), opts).map_err(|e| e.to_string())?;
    let (mut batches, mut records, mut pos) = (0, 0, 0);
    let buf = &f.records[..];
    while let Ok(Some(h)) = peek_entry(&buf[pos..]) {
        let size = h.total_size();
        if size == 0 || pos + size > buf.len() {
            break;
        }
        let info = parse_batch_info(&buf[pos..pos + size]).map_err(|e| e.to_string())?;
        batches += 1;
        records += info.last_offset.0 - info.base_offset.0 + 1;
        pos += size;
    }
    Ok((batches, records))
}

/// The issue 47 rows: `cat by-offset/0` of partitions confluent-kafka produced, at 0 and 20 ms.
fn variants(
    a: &Args,
    report: &mut Report,
    proxy: &Proxy,
    c: &topicfs::cluster::Client,
    via: &str,
    mnt: &Path,
) -> Result<(), String> {
    let engine = a.cluster_engine.as_str();
    let reps = a.reps.unwrap_or(3).max(1);
    let wanted: Vec<&str> = a.cluster_variants.split(',').map(str::trim).collect();
    let records = a.cluster_variant_records;
    let end = records as i64;
    let end_s = end.to_string();
    let source = format!("kafka://{via}");
    let mut rows = Vec::new();
    for (name, linger, compression, producers) in VARIANTS {
        if !wanted.contains(&name) {
            continue;
        }
        proxy.set_rtt_ms(0)?;
        let topic = format!("v-{name}");
        c.create_topic(&topic, 1, &[]).map_err(|e| format!("create {topic}: {e}"))?;
        eprintln!("cluster-net: {name}: confluent-kafka produces {records} records ...");
        let v = confluent(&[
            "produce-variant",
            via,
            &topic,
            "0",
            &end_s,
            &linger.to_string(),
            compression,
            &producers.to_string(),
        ])?;
        let produced_s = seconds_of(&v)?;
        let (batches, in_batches) = framing(c, &topic)?;
        let per_batch = in_batches as f64 / batches.max(1) as f64;
        let by0 = mnt.join(&topic).join("0").join("by-offset").join("0");
        let cat = format!("cat {} >/dev/null", sh_quote(&by0));
        let mut per_rtt = Vec::new();
        for rtt in [0u64, 20] {
            proxy.set_rtt_ms(rtt)?;
            let (m, _) = Mount::start_source(
                &a.topicfs,
                OsStr::new(&source),
                mnt,
                &["--config", "request.timeout.ms=60000"],
                &format!("{topic}/0"),
                &a.work,
            )?;
            let (mut mt, mut ct) = (vec![], vec![]);
            for rep in 0..reps {
                let run_conf = || -> Result<f64, String> {
                    let v = confluent(&["consume", via, &topic, "0", &end_s])?;
                    if v["records"].as_i64() != Some(end) {
                        return Err(format!(
                            "confluent-kafka consumed {v}, expected {end} records"
                        ));
                    }
                    seconds_of(&v)
                };
                if rep % 2 == 0 {
                    mt.push(time_sh(&cat)?);
                    ct.push(run_conf()?);
                } else {
                    ct.push(run_conf()?);
                    mt.push(time_sh(&cat)?);
                }
            }
            drop(m);
            per_rtt.push((rtt, mt, ct));
        }
        let rate = |s: &[f64]| end as f64 / stat(s).median;
        let (r0, r20) = (rate(&per_rtt[0].1), rate(&per_rtt[1].1));
        let (c0, c20) = (rate(&per_rtt[0].2), rate(&per_rtt[1].2));
        let of0 = r20 / r0;
        let ratios: Vec<f64> = per_rtt[1].1.iter().map(|t| end as f64 / t / r0).collect();
        let spread = stat(&ratios);
        report.row(
            "cluster network",
            format!(
                "cat by-offset/0, {end} records confluent-kafka produced ({name}: linger.ms \
                 {linger}, {compression}, {producers} producer(s); {per_batch:.0} records a \
                 batch), 20 ms vs 0 ms round trip ({engine} tansu, proxy)"
            ),
            format!("{} rec/s at 20 ms; {} rec/s at 0 ms", fmt_rate(r20), fmt_rate(r0)),
            format!(
                "confluent-kafka consume {} rec/s at 20 ms, {} rec/s at 0 ms",
                fmt_rate(c20),
                fmt_rate(c0)
            ),
            format!("{of0:.2} of 0 ms ({:.2}..{:.2})", spread.min, spread.max),
            ">= 0.50 of 0 ms",
            Some(of0 >= 0.5),
        );
        rows.push(json!({"variant": name, "linger_ms": linger, "compression": compression,
                         "producers": producers, "produce_seconds": produced_s,
                         "records_per_batch": per_batch,
                         "seconds_0ms": per_rtt[0].1, "seconds_20ms": per_rtt[1].1,
                         "confluent_seconds_0ms": per_rtt[0].2,
                         "confluent_seconds_20ms": per_rtt[1].2, "of_0ms": of0}));
    }
    proxy.set_rtt_ms(0)?;
    report.put("cluster_net_variants", json!(rows));
    Ok(())
}
