//! The retention thread of a read-write mount: Kafka's `log.retention.check.interval.ms` loop.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use crate::storage::log_dirs::LogDirs;

/// Kafka's `log.retention.check.interval.ms` default: how often retention runs.
pub const RETENTION_CHECK_INTERVAL: Duration = Duration::from_secs(300);
/// Kafka's `InitialTaskDelayMs`: the first retention pass, after loading settles (or after
/// one check interval, if that is shorter).
const RETENTION_INITIAL_DELAY: Duration = Duration::from_secs(30);

/// The retention task: Kafka's `log.retention.check.interval.ms` loop over the log dirs (an
/// offline one skipped).
pub(super) struct Retention {
    /// Dropping it wakes the thread, which then ends.
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Retention {
    pub(super) fn start(log_dir: Arc<LogDirs>, interval: Duration) -> Retention {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let mut wait = RETENTION_INITIAL_DELAY.min(interval);
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(wait) {
                match log_dir.enforce_retention() {
                    Ok(0) => {}
                    Ok(deleted) => log::info!("retention deleted {deleted} segment(s)"),
                    Err(err) => log::log!(err.log_level(), "retention: {err}"),
                }
                wait = interval;
            }
        });
        Retention { stop, thread }
    }

    /// Stops the loop, waiting for a retention pass in progress to finish.
    pub(super) fn stop(self) {
        drop(self.stop);
        if self.thread.join().is_err() {
            log::error!("the retention thread panicked");
        }
    }
}
