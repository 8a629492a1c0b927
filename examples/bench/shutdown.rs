//! The shutdown figures (issue 32): how long a daemon takes to end on SIGTERM with many
//! segments written since the last sync, against the cost of making the same files durable
//! outside topicfs in the same run.
//!
//! Each repetition writes `--shutdown-segments` segments (4 KiB `segment.bytes`, four 1,000-byte
//! lines each, over 10 partitions written at once) through a fresh writable mount, so that all of
//! them are unsynced for the daemon (its recovery points are still at 0), then:
//!
//! - without a reader: SIGTERM until the daemon has exited (its clean shutdown included);
//! - with a `tail -f -s 0.1` of partition 0 held open (on alternate repetitions): SIGTERM until the
//!   reader has ended (the mount is busy: detached lazily, the connection aborted after the
//!   2 s grace), and until the daemon has exited.
//!
//! The baselines copy the resulting data dir (the same files and bytes, freshly dirty in the
//! page cache) and make the copy durable: `sync -f` (one `syncfs`, what the daemon now does)
//! and `fsync` of each file in turn (what it did before).

use super::*;

/// Partitions written at once.
const PARTITIONS: u32 = 10;
const SEGMENT_BYTES: u64 = 4096;
const LINE_BYTES: usize = 1000;

/// One data dir with `segments` unsynced segments in a running daemon; returns the mount.
fn dirty_mount(a: &Args, data: &Path, mnt: &Path, segments: u64) -> Result<Mount, String> {
    let _ = fs::remove_dir_all(data);
    {
        let logs = LogDirs::open_dir(
            data,
            bench_config(SEGMENT_BYTES),
            Default::default(),
            SegmentMode::Writable,
        )
        .map_err(|e| e.to_string())?;
        logs.create_topic(TOPIC, PARTITIONS).map_err(|e| e.to_string())?;
        logs.shutdown().map_err(|e| e.to_string())?;
    }
    let bytes = SEGMENT_BYTES.to_string();
    let (m, _) = Mount::topic(a, data, mnt, &["--segment-bytes", &bytes])?;
    // A segment of 4 KiB takes four 1,000-byte lines (one batch).
    let lines_per_partition = segments * 4 / u64::from(PARTITIONS) + 4;
    let src = a.work.join("shutdown-lines.txt");
    let line = format!("{}\n", "s".repeat(LINE_BYTES - 1));
    fs::write(&src, line.repeat(lines_per_partition as usize)).map_err(|e| e.to_string())?;
    let writers: Vec<Child> = (0..PARTITIONS)
        .map(|p| {
            let append = mnt.join(TOPIC).join(p.to_string()).join("append");
            Command::new("sh")
                .arg("-c")
                .arg(format!("cat {} >> {}", sh_quote(&src), sh_quote(&append)))
                .spawn()
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    for mut w in writers {
        let status = w.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("writing segments through the mount failed: {status}"));
        }
    }
    Ok(m)
}

/// `.log` files under `data`.
fn count_segments(data: &Path) -> u64 {
    let Ok(parts) = fs::read_dir(data) else { return 0 };
    parts
        .flatten()
        .filter_map(|p| fs::read_dir(p.path()).ok())
        .flatten()
        .flatten()
        .filter(|f| f.file_name().to_string_lossy().ends_with(".log"))
        .count() as u64
}

/// Sends SIGTERM to the daemon and returns the seconds until it exited (and its status).
fn sigterm_until_exit(
    m: &mut Mount,
    reader: Option<&mut Child>,
) -> Result<(f64, Option<f64>), String> {
    let pid = m.pid();
    let start = Instant::now();
    Command::new("kill").arg("-TERM").arg(pid.to_string()).status().map_err(|e| e.to_string())?;
    let (mut exited, mut reader_ended) = (None, None);
    let mut reader = reader;
    let deadline = start + Duration::from_secs(300);
    while exited.is_none() || (reader.is_some() && reader_ended.is_none()) {
        if exited.is_none()
            && let Some(c) = m.child.as_mut()
            && let Ok(Some(status)) = c.try_wait()
        {
            if !status.success() {
                return Err(format!("daemon exited with {status}"));
            }
            exited = Some(start.elapsed().as_secs_f64());
        }
        if reader_ended.is_none()
            && let Some(r) = reader.as_mut()
            && let Ok(Some(_)) = r.try_wait()
        {
            reader_ended = Some(start.elapsed().as_secs_f64());
        }
        if Instant::now() > deadline {
            return Err("daemon or reader still running 300 s after SIGTERM".into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    m.child = None;
    Ok((exited.unwrap_or(f64::NAN), reader_ended))
}

/// Copies `data` to `copy` (fresh dirty pages of the same files) and returns the seconds
/// `sync` takes to make the copy durable: `sync -f` (one syncfs) or an fsync per file.
fn baseline(data: &Path, copy: &Path, per_file: bool) -> Result<f64, String> {
    let _ = fs::remove_dir_all(copy);
    let status =
        Command::new("cp").arg("-a").arg(data).arg(copy).status().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("cp -a {} failed", data.display()));
    }
    let start = Instant::now();
    if per_file {
        for part in fs::read_dir(copy).map_err(|e| e.to_string())?.flatten() {
            let Ok(files) = fs::read_dir(part.path()) else { continue };
            for f in files.flatten() {
                File::open(f.path()).and_then(|f| f.sync_all()).map_err(|e| e.to_string())?;
            }
            File::open(part.path()).and_then(|f| f.sync_all()).map_err(|e| e.to_string())?;
        }
    } else {
        let status =
            Command::new("sync").arg("-f").arg(copy).status().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err("sync -f failed".into());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let _ = fs::remove_dir_all(copy);
    Ok(secs)
}

pub fn run(a: &Args, plan: &Plan, report: &mut Report) -> Result<(), String> {
    let segments = a.shutdown_segments;
    let reps = plan.reps.max(2);
    let data = a.work.join("data-shutdown");
    let copy = a.work.join("data-shutdown-copy");
    let mnt = a.work.join("mnt");
    let (mut quiet, mut busy_exit, mut busy_reader) = (vec![], vec![], vec![]);
    let (mut syncfs, mut per_file, mut counted) = (vec![], vec![], vec![]);
    for rep in 0..reps {
        eprintln!("shutdown: repetition {}/{reps}: writing {segments} segments ...", rep + 1);
        let mut m = dirty_mount(a, &data, &mnt, segments)?;
        counted.push(count_segments(&data));
        if rep % 2 == 0 {
            let (exit, _) = sigterm_until_exit(&mut m, None)?;
            quiet.push(exit);
        } else {
            let follow = mnt.join(TOPIC).join("0").join("by-offset").join("0");
            // Polling every 0.1 s (tail's default is 1 s), so its end shows when its reads
            // started failing.
            let mut reader = Command::new("tail")
                .args(["-f", "-s", "0.1"])
                .arg(&follow)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| e.to_string())?;
            // The reader has the file open once tail's fd points into the mount.
            let fd_dir = PathBuf::from(format!("/proc/{}/fd", reader.id()));
            let opened = Instant::now();
            while !fs::read_dir(&fd_dir)
                .map(|d| {
                    d.flatten().any(|e| fs::read_link(e.path()).is_ok_and(|t| t.starts_with(&mnt)))
                })
                .unwrap_or(false)
            {
                if opened.elapsed() > Duration::from_secs(30) {
                    let _ = reader.kill();
                    return Err("tail -f did not open its file".into());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let (exit, ended) = sigterm_until_exit(&mut m, Some(&mut reader))?;
            let _ = reader.wait();
            busy_exit.push(exit);
            busy_reader.push(ended.unwrap_or(f64::NAN));
        }
        drop(m);
        if !data.join(".kafka_cleanshutdown").exists() {
            return Err("no clean-shutdown marker after SIGTERM".into());
        }
        let order = if rep % 2 == 0 { [false, true] } else { [true, false] };
        for each in order {
            let secs = baseline(&data, &copy, each)?;
            if each { per_file.push(secs) } else { syncfs.push(secs) }
        }
    }
    let n = stat(&counted.iter().map(|&c| c as f64).collect::<Vec<_>>()).median;
    let (q, sf, pf) = (stat(&quiet).median, stat(&syncfs).median, stat(&per_file).median);
    report.row(
        "shutdown",
        format!("SIGTERM to exit, {n:.0} unsynced segments vs sync -f of a copy"),
        fmt_ms(q),
        fmt_ms(sf),
        format!("{:.2}", q / sf),
        "< 2 s",
        Some(q < 2.0),
    );
    report.row(
        "shutdown",
        "  the same vs an fsync per file of a copy (the shutdown before)",
        fmt_ms(q),
        fmt_ms(pf),
        format!("{:.2}", q / pf),
        "",
        None,
    );
    if !busy_reader.is_empty() {
        let (r, e) = (stat(&busy_reader).median, stat(&busy_exit).median);
        report.row(
            "shutdown",
            "SIGTERM to the end of a tail -f -s 0.1 reader (2 s grace, then abort)",
            fmt_ms(r),
            "",
            "",
            "<= 2 s + 0.5",
            Some(r < 2.5),
        );
        report.seconds_row("shutdown", "SIGTERM to exit with that reader", e, None);
    }
    report.put(
        "shutdown",
        json!({"segments": counted, "sigterm_to_exit_s": quiet, "busy_sigterm_to_exit_s": busy_exit,
               "busy_sigterm_to_reader_end_s": busy_reader, "baseline_syncfs_s": syncfs,
               "baseline_fsync_per_file_s": per_file}),
    );
    let _ = fs::remove_dir_all(&data);
    let _ = fs::remove_file(a.work.join("shutdown-lines.txt"));
    Ok(())
}
