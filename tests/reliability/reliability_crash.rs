//! CI's short run of `scripts/crash-test`: two rounds of writers appending through `append` and
//! `append.json` while the daemon is killed with SIGKILL at a random moment, then a remount and
//! a check that every acknowledged record is there exactly once, in order, in whole batches
//! with good CRCs and indexes that agree with the log. The script cleans up its mounts and
//! daemon itself, on failure too; the test only adds a deadline.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A hang guard for the whole script (two rounds take seconds), not a performance bound.
const DEADLINE: Duration = Duration::from_secs(240);

#[test]
fn acknowledged_appends_survive_kill_9_of_the_daemon() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/crash-test");
    let mut child = Command::new(script)
        .args(["--rounds", "2", "--writers", "4", "--bin", env!("CARGO_BIN_EXE_topicfs")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > DEADLINE {
            // SIGTERM lets the script's `finally` unmount and remove its work dir.
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let _ = child.wait();
            panic!("scripts/crash-test did not finish");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "crash-test failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("2 rounds run"), "{stdout}");
}
