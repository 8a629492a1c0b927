//! The cluster section of `topicfs-bench` (`--cluster`): a cluster mount
//! (`topicfs mount kafka://...`) against confluent-kafka (librdkafka, the venv's
//! `scripts/bench-confluent.py`) on the same tansu broker, started here and killed on exit:
//!
//! - `cat by-offset/0` of the read partition (1 M 100-byte records by default) vs
//!   confluent-kafka consuming the same partition from offset 0 to the same end;
//! - `cat lines >> append` (acks=all, the mount's default) vs confluent-kafka producing the
//!   same lines with its default batching and acks=all, each into a fresh topic;
//! - time to first byte of `by-offset/0` (open plus the first `read()`) on a large partition vs
//!   on a 1,000-record one, and the broker's share of it: the same partitions' answer times to
//!   one Fetch of offset 0, and to what the mount asks for an open + first read (ListOffsets
//!   earliest and latest, twice).
//!
//! Repetitions alternate between the mount and its baseline (A B B A ...), as everywhere in
//! the benchmark. The broker's storage engine is reported with the figures: a comparison is
//! only fair on the same broker and engine.

use super::*;

use std::net::{TcpListener, TcpStream};

use topicfs::cluster::config::parse_bootstrap;
use topicfs::cluster::{Client, ClientConfig, FetchOptions};

/// ListOffsets' "latest" timestamp: the log end offset (what the mount takes as a stream's end
/// at open).
const LATEST: i64 = -1;
/// ListOffsets' "earliest" timestamp: the log start offset.
const EARLIEST: i64 = -2;
/// Records per Produce request when seeding partitions.
const SEED_BATCH: usize = 5000;

/// A tansu broker in `<work>/tansu`, killed on drop; its pid is in `<work>/brokers.pid` so
/// `scripts/bench` can kill it after a crash.
pub(crate) struct Broker {
    child: Option<Child>,
    pub(crate) port: u16,
}

fn tansu_binary() -> PathBuf {
    std::env::var_os("TOPICFS_TANSU")
        .map_or_else(|| PathBuf::from("/opt/tansu/bin/tansu"), PathBuf::from)
}

pub(crate) fn python() -> PathBuf {
    std::env::var_os("TOPICFS_PYTHON")
        .map_or_else(|| PathBuf::from("/opt/topicfs-venv/bin/python"), PathBuf::from)
}

impl Broker {
    pub(crate) fn start(work: &Path, engine: &str) -> Result<Broker, String> {
        Broker::start_advertising(work, engine, "tansu", None)
    }

    /// A broker in `<work>/<dir>` advertising `127.0.0.1:<advertised>` in its Metadata (a
    /// proxy in front of it: every client then talks through the proxy) rather than its own
    /// listener.
    pub(crate) fn start_advertising(
        work: &Path,
        engine: &str,
        dir: &str,
        advertised: Option<u16>,
    ) -> Result<Broker, String> {
        let dir = work.join(dir);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let url = format!("tcp://127.0.0.1:{port}");
        let advertised = format!("tcp://127.0.0.1:{}", advertised.unwrap_or(port));
        let storage = match engine {
            "sqlite" => "sqlite://tansu.db",
            "memory" => "memory://tansu/",
            other => return Err(format!("--cluster-engine {other}: memory or sqlite")),
        };
        let log = File::create(dir.join("tansu.log")).map_err(|e| e.to_string())?;
        let bin = tansu_binary();
        let child = Command::new(&bin)
            .current_dir(&dir)
            .arg("broker")
            .args(["--listener-url", &url, "--advertised-listener-url", &advertised])
            .args(["--storage-engine", storage])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{}: {e} (scripts/install-deps --test-broker)", bin.display()))?;
        if let Ok(mut f) =
            OpenOptions::new().create(true).append(true).open(work.join("brokers.pid"))
        {
            let _ = writeln!(f, "{}", child.id());
        }
        let mut b = Broker { child: Some(child), port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
            .is_err()
        {
            if let Some(Ok(Some(status))) = b.child.as_mut().map(Child::try_wait) {
                return Err(format!("tansu exited with {status}"));
            }
            if Instant::now() > deadline {
                return Err("tansu not listening after 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(b)
    }

    pub(crate) fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `bench-confluent.py ARGS...`; its JSON answer.
pub(crate) fn confluent(args: &[&str]) -> Result<Value, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/bench-confluent.py");
    let out = Command::new(python())
        .arg(script)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", python().display()))?;
    if !out.status.success() {
        return Err(format!(
            "bench-confluent.py {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("bench-confluent.py {args:?}: {e}"))
}

pub(crate) fn seconds_of(v: &Value) -> Result<f64, String> {
    v["seconds"].as_f64().ok_or_else(|| format!("no seconds in {v}"))
}

pub(crate) fn client(broker: &Broker) -> Result<Client, String> {
    let mut config = ClientConfig::default();
    config.set_pair("request.timeout.ms=60000").map_err(|e| e.to_string())?;
    let bootstrap =
        parse_bootstrap(&format!("kafka://{}", broker.addr())).map_err(|e| e.to_string())?;
    Client::connect(bootstrap, config).map_err(|e| e.to_string())
}

/// Creates `topic` (one partition) and produces `records` records of [`VALUE_BYTES`] bytes in
/// requests of [`SEED_BATCH`]; returns the seconds it took.
pub(crate) fn seed(c: &Client, topic: &str, records: u64) -> Result<f64, String> {
    let start = Instant::now();
    c.create_topic(topic, 1, &[]).map_err(|e| format!("create {topic}: {e}"))?;
    let mut batch = Batch::new(SEED_BATCH);
    let t0 = now_ms();
    let mut done = 0;
    while done < records {
        let n = (records - done).min(SEED_BATCH as u64) as usize;
        batch.fill(done, t0);
        c.produce(topic, 0, &batch.records[..n]).map_err(|e| format!("seed {topic}: {e}"))?;
        done += n as u64;
    }
    Ok(start.elapsed().as_secs_f64())
}

/// The partition's log end offset as ListOffsets answers it (the end of a stream opened now)
/// and the high watermark Fetch reports; they differ on tansu's memory engine.
fn ends(c: &Client, topic: &str) -> Result<(i64, i64), String> {
    let latest =
        c.list_offset(topic, 0, LATEST).map_err(|e| e.to_string())?.map_or(0, |l| l.offset.0);
    let hwm = c
        .fetch(topic, 0, Offset(0), FetchOptions { max_bytes: Some(1), ..FetchOptions::default() })
        .map_err(|e| e.to_string())?
        .high_watermark
        .0;
    Ok((latest, hwm))
}

/// The cluster figures; `mnt` is free to mount on.
pub fn run(a: &Args, report: &mut Report) -> Result<(), String> {
    let records = a.cluster_records;
    let reps = a.reps.unwrap_or(3).max(1);
    let engine = a.cluster_engine.as_str();
    eprintln!("cluster: starting tansu ({engine} engine) ...");
    let broker = Broker::start(&a.work, engine)?;
    let c = client(&broker)?;
    eprintln!("cluster: producing {records} records ...");
    let seed_s = seed(&c, "read", records)?;
    seed(&c, "small", 1000)?;
    let big_records = a.cluster_ttfb_records.max(records);
    let big = if big_records > records {
        eprintln!("cluster: producing {big_records} records for time to first byte ...");
        seed(&c, "big", big_records)?;
        "big"
    } else {
        "read"
    };
    let (latest, end) = ends(&c, "read")?;
    report.notes.push(format!(
        "cluster: tansu 0.6.0, {engine} engine; seeded {records} records with topicfs's client in \
         {seed_s:.1} s ({} rec/s); ListOffsets latest {latest}, Fetch high watermark {end}",
        fmt_rate(records as f64 / seed_s)
    ));
    if end != latest {
        report.notes.push(format!(
            "cluster: the broker's ListOffsets latest ({latest}) is not its high watermark \
             ({end}) (tansu's memory engine, doc/cluster-brokers.md); the mount reads to the high \
             watermark, and so does confluent-kafka here"
        ));
    }

    let mnt = a.work.join("mnt");
    let source = format!("kafka://{}", broker.addr());
    let (m, mount_s) = Mount::start_source(
        &a.topicfs,
        OsStr::new(&source),
        &mnt,
        &["--config", "request.timeout.ms=60000"],
        "read/0",
        &a.work,
    )?;
    report.put("cluster_mount_seconds", json!(mount_s));
    let by0 = mnt.join("read").join("0").join("by-offset").join("0");

    // What the mount shows first: exactly the records up to the end as of open, one line each.
    let out = Command::new("wc")
        .arg("-c")
        .stdin(File::open(&by0).map_err(|e| format!("{}: {e}", by0.display()))?)
        .output()
        .map_err(|e| e.to_string())?;
    let bytes: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
    if bytes != end as u64 * (VALUE_BYTES as u64 + 1) {
        return Err(format!(
            "cat by-offset/0 through the cluster mount gave {bytes} bytes, expected {end} lines"
        ));
    }

    // ---- cat by-offset/0 vs confluent-kafka consuming to the end ----
    eprintln!("cluster: cat by-offset/0 vs confluent-kafka consume ({reps} repetitions) ...");
    let end_s = end.to_string();
    let (mut mount_t, mut conf_t, mut ratios, mut cpu, mut broker_cpu) =
        (vec![], vec![], vec![], vec![], vec![]);
    let cat = format!("cat {}", sh_quote(&by0));
    for rep in 0..reps {
        let run_mount = || -> Result<(f64, u64, u64), String> {
            let (c0, b0) = (process_cpu_ns(m.pid()), process_cpu_ns(broker.pid()));
            let t = time_sh(&cat)?;
            Ok((t, process_cpu_ns(m.pid()) - c0, process_cpu_ns(broker.pid()) - b0))
        };
        let run_conf = || -> Result<f64, String> {
            let v = confluent(&["consume", &broker.addr(), "read", "0", &end_s])?;
            if v["records"].as_i64() != Some(end) {
                return Err(format!("confluent-kafka consumed {v}, expected {end} records"));
            }
            seconds_of(&v)
        };
        let ((t, cp, bcp), b) = if rep % 2 == 0 {
            let mt = run_mount()?;
            (mt, run_conf()?)
        } else {
            let b = run_conf()?;
            (run_mount()?, b)
        };
        mount_t.push(t);
        conf_t.push(b);
        ratios.push(b / t);
        cpu.push(cp as f64 / end as f64);
        broker_cpu.push(bcp as f64 / end as f64);
    }
    let (t, b, r) = (stat(&mount_t), stat(&conf_t), stat(&ratios));
    let mb = end as f64 * VALUE_BYTES as f64 / 1e6;
    report.row(
        "cluster",
        format!("cat by-offset/0 through a cluster mount, {end} records ({engine} tansu)"),
        format!("{} rec/s, {:.0} MB/s", fmt_rate(end as f64 / t.median), mb / t.median),
        format!("confluent-kafka consume {} rec/s", fmt_rate(end as f64 / b.median)),
        format!("{:.2} ({:.2}..{:.2})", r.median, r.min, r.max),
        ">= 1.00 (as fast as confluent-kafka)",
        Some(r.median >= 1.0),
    );
    report.row(
        "CPU",
        "daemon CPU per record read (cluster mount)",
        format!("{:.0} ns", stat(&cpu).median),
        format!("broker {:.0} ns", stat(&broker_cpu).median),
        "",
        "",
        None,
    );
    report.put(
        "cluster_read",
        json!({"records": end, "engine": engine, "seconds": mount_t, "confluent_seconds": conf_t,
               "ratio_to_confluent": ratios, "daemon_cpu_ns_per_record": cpu,
               "broker_cpu_ns_per_record_during_cat": broker_cpu}),
    );

    // ---- time to first byte: the big partition vs a 1,000-record one ----
    eprintln!("cluster: time to first byte ...");
    for topic in [big, "small"] {
        // The mount learns the topic (Metadata) before anything is timed.
        fs::metadata(mnt.join(topic).join("0")).map_err(|e| format!("{topic}/0: {e}"))?;
    }
    let first_byte = |topic: &str| -> Result<f64, String> {
        let path = mnt.join(topic).join("0").join("by-offset").join("0");
        let start = Instant::now();
        let mut f = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut byte = [0u8; 1];
        let n = f.read(&mut byte).map_err(|e| format!("{}: {e}", path.display()))?;
        let t = start.elapsed().as_secs_f64();
        if n != 1 || byte[0] != b'r' {
            return Err(format!("{}: first byte {byte:?} ({n} read)", path.display()));
        }
        Ok(t)
    };
    let ttfb_reps = (reps * 5).max(10);
    let (_, big_end) = ends(&c, big)?;
    let pair = BigVsSmall { reps: ttfb_reps, big, big_end };
    pair.measure(
        report,
        "cluster_first_byte",
        "time to first byte of by-offset/0",
        ("~1 (the same within noise)", Some(0.8)),
        &first_byte,
    )?;

    // The broker's own share: one Fetch of offset 0 (64 KiB, what a first read asks) with
    // topicfs's client, no mount. A broker whose Fetch costs more on a larger partition (tansu's
    // memory engine) bounds the ratio above whatever the mount does.
    let one_fetch = |topic: &str| -> Result<f64, String> {
        let opts = FetchOptions { max_bytes: Some(64 << 10), ..FetchOptions::default() };
        let start = Instant::now();
        let f = c.fetch(topic, 0, Offset(0), opts).map_err(|e| format!("{topic}: {e}"))?;
        let t = start.elapsed().as_secs_f64();
        if f.records.is_empty() {
            return Err(format!("{topic}: Fetch of offset 0 returned nothing"));
        }
        Ok(t)
    };
    pair.measure(
        report,
        "cluster_broker_fetch",
        "the broker alone: one Fetch of offset 0 (64 KiB)",
        ("(the broker's share of the row above)", None),
        &one_fetch,
    )?;

    // What the mount asks of the broker for an open + first read once the stream's first
    // Fetch answer is kept (the steady state of the row above): the log start and end twice
    // (the permission check's stat and the open each resolve the name; ListOffsets earliest
    // and latest, pipelined), nothing else. The same requests for both partitions, so what
    // differs is the broker's time to answer them.
    let two_bounds = |topic: &str| -> Result<f64, String> {
        let q = [EARLIEST, LATEST].map(|ts| (topic.to_string(), 0, ts));
        let start = Instant::now();
        for _ in 0..2 {
            for (_, answer) in c.list_offsets(&q).map_err(|e| format!("{topic}: {e}"))? {
                answer.map_err(|e| format!("{topic}: {e}"))?;
            }
        }
        Ok(start.elapsed().as_secs_f64())
    };
    pair.measure(
        report,
        "cluster_broker_bounds",
        "the broker alone: what an open + first read asks (ListOffsets earliest + latest, twice)",
        ("(the broker's share of time to first byte)", None),
        &two_bounds,
    )?;

    // ---- cat lines >> append vs confluent-kafka producing them ----
    let lines = a.cluster_append_lines;
    eprintln!("cluster: cat {lines} lines >> append vs confluent-kafka produce ...");
    let src = a.work.join("cluster-lines.txt");
    write_lines_file(&src, lines)?;
    let src_s = src.to_string_lossy().to_string();
    let (mut mount_t, mut conf_t, mut ratios, mut cpu) = (vec![], vec![], vec![], vec![]);
    for rep in 0..reps {
        let (tm, tc) = (format!("append-m{rep}"), format!("append-c{rep}"));
        // The mount's topic through the mount (CreateTopics), the baseline's with the client.
        fs::create_dir(mnt.join(&tm)).map_err(|e| format!("mkdir {tm}: {e}"))?;
        c.create_topic(&tc, 1, &[]).map_err(|e| format!("create {tc}: {e}"))?;
        let append = mnt.join(&tm).join("0").join("append");
        let run_mount = || -> Result<(f64, u64), String> {
            let c0 = process_cpu_ns(m.pid());
            let t = time_sh(&format!("cat {} >> {}", sh_quote(&src), sh_quote(&append)))?;
            Ok((t, process_cpu_ns(m.pid()) - c0))
        };
        let run_conf = || -> Result<f64, String> {
            seconds_of(&confluent(&["produce", &broker.addr(), &tc, "0", &src_s])?)
        };
        let ((t, cp), b) = if rep % 2 == 0 {
            let mt = run_mount()?;
            (mt, run_conf()?)
        } else {
            let b = run_conf()?;
            (run_mount()?, b)
        };
        for topic in [&tm, &tc] {
            let (_, hwm) = ends(&c, topic)?;
            if hwm as u64 != lines {
                return Err(format!("{topic}: high watermark {hwm} after {lines} lines"));
            }
        }
        mount_t.push(t);
        conf_t.push(b);
        ratios.push(b / t);
        cpu.push(cp as f64 / lines as f64);
    }
    let (t, b, r) = (stat(&mount_t), stat(&conf_t), stat(&ratios));
    report.row(
        "cluster",
        format!("cat {lines} {VALUE_BYTES}-byte lines >> append, acks=all ({engine} tansu)"),
        format!("{} rec/s", fmt_rate(lines as f64 / t.median)),
        format!("confluent-kafka produce {} rec/s", fmt_rate(lines as f64 / b.median)),
        format!("{:.2} ({:.2}..{:.2})", r.median, r.min, r.max),
        ">= 1.00 (as fast as confluent-kafka)",
        Some(r.median >= 1.0),
    );
    report.row(
        "CPU",
        "daemon CPU per record appended (cluster mount)",
        format!("{:.0} ns", stat(&cpu).median),
        "",
        "",
        "",
        None,
    );
    report.put(
        "cluster_append",
        json!({"lines": lines, "engine": engine, "seconds": mount_t, "confluent_seconds": conf_t,
               "ratio_to_confluent": ratios, "daemon_cpu_ns_per_record": cpu}),
    );
    let _ = fs::remove_file(&src);
    m.stop()?;
    drop(broker);
    let _ = fs::remove_dir_all(a.work.join("tansu"));
    Ok(())
}

/// A figure measured on the big partition and on the 1,000-record one (`small`), `reps`
/// times, alternating which goes first; the ratio is small / big (1: no growth with the
/// partition).
struct BigVsSmall<'a> {
    reps: usize,
    big: &'a str,
    big_end: i64,
}

impl BigVsSmall<'_> {
    /// Times `time` on both partitions and reports the row `what` (its target text, and the
    /// median ratio it must reach to be "met", if any) and its repetitions as JSON `key`.
    fn measure(
        &self,
        report: &mut Report,
        key: &str,
        what: &str,
        (target, at_least): (&str, Option<f64>),
        time: &dyn Fn(&str) -> Result<f64, String>,
    ) -> Result<(), String> {
        let (mut big_t, mut small_t, mut ratios) = (vec![], vec![], vec![]);
        for rep in 0..self.reps {
            let (bt, st) = if rep % 2 == 0 {
                let bt = time(self.big)?;
                (bt, time("small")?)
            } else {
                let st = time("small")?;
                (time(self.big)?, st)
            };
            big_t.push(bt);
            small_t.push(st);
            ratios.push(st / bt);
        }
        let (bt, st, r) = (stat(&big_t), stat(&small_t), stat(&ratios));
        let big_end = self.big_end;
        report.row(
            "cluster",
            format!("{what}, {big_end} records vs 1,000"),
            format!("{} ({}..{})", fmt_ms(bt.median), fmt_ms(bt.min), fmt_ms(bt.max)),
            format!("1,000 records {}", fmt_ms(st.median)),
            format!("{:.2} ({:.2}..{:.2})", r.median, r.min, r.max),
            target,
            at_least.map(|least| r.median >= least),
        );
        report.put(
            key,
            json!({"big_records": big_end, "big_seconds": big_t, "small_seconds": small_t,
                   "ratio_small_to_big": ratios}),
        );
        Ok(())
    }
}
