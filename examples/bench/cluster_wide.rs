//! The wide-topic rows of `topicfs-bench` (`--cluster-wide`, issue 36 §4): a topic of many
//! partitions (2,000 by default, `--wide-partitions`) with a few records each (5,
//! `--wide-records`) on a tansu broker behind the delaying proxy of `--cluster-net`, at round
//! trips of 0 and 20 ms (`--cluster-delays-ms`):
//!
//! - `cat offsets/-1` and `cat info` of the topic against confluent-kafka's
//!   `AdminClient.list_offsets` of every partition's latest offset (librdkafka batches it per
//!   leader: the client a user would pick to ask the same);
//! - `cat by-time/-2` (every record of every partition, merged by time) against
//!   confluent-kafka consuming every partition from its start until it has every record.
//!
//! Each repetition mounts afresh (a first read, nothing kept from the one before; the mount's
//! own start is not timed) and alternates with the baseline. The targets are the issue's, on
//! loopback: `offsets/-1` and `info` under 0.2 s, the merged `by-time/-2` under 2 s.

use super::cluster::{Broker, client, confluent, seconds_of};
use super::cluster_net::{Proxy, free_port, list};
use super::*;

use topicfs::format::NewRecord;

pub fn run(a: &Args, report: &mut Report) -> Result<(), String> {
    let engine = a.cluster_engine.as_str();
    let reps = a.reps.unwrap_or(3).max(1);
    let parts = a.wide_partitions.max(1);
    let per = a.wide_records.max(1);
    let proxy_port = free_port()?;
    eprintln!("cluster-wide: starting tansu ({engine} engine) behind a delaying proxy ...");
    let broker = Broker::start_advertising(&a.work, engine, "tansu-wide", Some(proxy_port))?;
    let proxy = Proxy::start(&a.work, broker.port, proxy_port)?;
    let via = format!("127.0.0.1:{proxy_port}");
    let c = client(&broker)?;
    eprintln!("cluster-wide: a topic of {parts} partitions, {per} records each ...");
    let topic = "wide";
    c.create_topic(topic, i32::try_from(parts).map_err(|e| e.to_string())?, &[])
        .map_err(|e| format!("create {topic}: {e}"))?;
    let t0 = now_ms();
    for p in 0..parts {
        // Times interleave the partitions: the merge alternates between all of them.
        let records: Vec<NewRecord> = (0..per)
            .map(|i| NewRecord {
                timestamp: t0 + (i * parts + p) as i64,
                value: Some(format!("{p:05}-{i:03}-{}", "x".repeat(80)).into_bytes()),
                ..NewRecord::default()
            })
            .collect();
        c.produce(topic, p as i32, &records).map_err(|e| format!("seed {topic}/{p}: {e}"))?;
    }
    let total = parts * per;
    let source = format!("kafka://{via}");
    let mnt = a.work.join("mnt-wide");
    let top = mnt.join(topic);
    let total_s = total.to_string();
    let mut rows = Vec::new();
    for rtt in list(&a.cluster_delays_ms) {
        proxy.set_rtt_ms(rtt)?;
        for (file, what) in [
            ("offsets/-1", "cat offsets/-1"),
            ("info", "cat info"),
            ("by-time/-2", "cat by-time/-2"),
        ] {
            eprintln!("cluster-wide: {rtt} ms round trip: {what} ...");
            let path = top.join(file);
            let (mut mt, mut ct) = (vec![], vec![]);
            for rep in 0..reps {
                let measure_mount = || -> Result<f64, String> {
                    let (m, _) = Mount::start_source(
                        &a.topicfs,
                        OsStr::new(&source),
                        &mnt,
                        &["--config", "request.timeout.ms=60000", "--read-only"],
                        topic,
                        &a.work,
                    )?;
                    let start = Instant::now();
                    let out = Command::new("cat")
                        .arg(&path)
                        .output()
                        .map_err(|e| format!("cat {}: {e}", path.display()))?;
                    let t = start.elapsed().as_secs_f64();
                    drop(m);
                    if !out.status.success() {
                        return Err(format!("cat {}: {}", path.display(), out.status));
                    }
                    let lines = out.stdout.iter().filter(|&&b| b == b'\n').count() as u64;
                    let want = match file {
                        "by-time/-2" => total,
                        "offsets/-1" => parts,
                        _ => 1,
                    };
                    if lines < want {
                        return Err(format!("{what}: {lines} lines, at least {want} expected"));
                    }
                    Ok(t)
                };
                let run_conf = || -> Result<f64, String> {
                    let v = if file == "by-time/-2" {
                        confluent(&["wide-consume", &via, topic, &total_s])?
                    } else {
                        confluent(&["wide-offsets", &via, topic, "latest"])?
                    };
                    seconds_of(&v)
                };
                let (t, b) = if rep % 2 == 0 {
                    let t = measure_mount()?;
                    (t, run_conf()?)
                } else {
                    let b = run_conf()?;
                    (measure_mount()?, b)
                };
                mt.push(t);
                ct.push(b);
            }
            let (t, b) = (stat(&mt), stat(&ct));
            let limit = if file == "by-time/-2" { 2.0 } else { 0.2 };
            let baseline = if file == "by-time/-2" {
                format!("confluent-kafka consume of every partition {}", fmt_ms(b.median))
            } else {
                format!("confluent-kafka AdminClient.list_offsets {}", fmt_ms(b.median))
            };
            report.row(
                "cluster wide topic",
                format!("{what} of a {parts}-partition topic ({total} records), {rtt} ms round trip ({engine} tansu, proxy)"),
                format!("{} ({}..{})", fmt_ms(t.median), fmt_ms(t.min), fmt_ms(t.max)),
                baseline,
                format!("{:.2}", b.median / t.median),
                if rtt == 0 {
                    if file == "by-time/-2" { "< 2 s on loopback" } else { "< 0.2 s on loopback" }
                } else {
                    ""
                },
                (rtt == 0).then_some(t.median < limit),
            );
            rows.push(json!({"rtt_ms": rtt, "file": file, "seconds": mt, "confluent_seconds": ct}));
        }
    }
    report.put("cluster_wide", json!(rows));
    proxy.set_rtt_ms(0)?;
    Ok(())
}
