//! Times the `read_committed` transaction scan of one partition in process, without FUSE or a
//! segment cache: what the first `read_committed` open on a first-ever mount waits for.
//!
//! `cargo run --release --example txnscan-profile -- DATA_DIR TOPIC [PARTITION] [ROUNDS]`, under
//! `perf record -g` to see where the scan goes. The directory is opened read-only.

use std::time::Instant;

use topicfs::storage::{LogConfig, LogDirs, SegmentMode};
use topicfs::view::txn::TxnTracker;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(topic)) = (args.get(1), args.get(2)) else {
        return Err("usage: txnscan-profile DATA_DIR TOPIC [PARTITION] [ROUNDS]".into());
    };
    let partition: u32 = args.get(3).map_or(Ok(0), |s| s.parse()).map_err(|e| format!("{e}"))?;
    let rounds: u32 = args.get(4).map_or(Ok(5), |s| s.parse()).map_err(|e| format!("{e}"))?;
    let logs = LogDirs::open_dir(
        std::path::Path::new(dir),
        LogConfig::default(),
        Default::default(),
        SegmentMode::ReadOnly,
    )
    .map_err(|e| e.to_string())?;
    let log = logs.log(topic, partition).map_err(|e| e.to_string())?;
    for _ in 0..rounds {
        let tracker = TxnTracker::new();
        let began = Instant::now();
        let snapshot = tracker.refresh(&*log).map_err(|e| e.to_string())?;
        println!(
            "scan to stable offset {}: {:.1} ms",
            snapshot.stable,
            began.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(())
}
