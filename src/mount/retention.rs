//! Retention of a read-write mount: Kafka's `log.retention.check.interval.ms` loop, a periodic
//! task of the mount's executor.

use std::sync::Arc;
use std::time::Duration;

use crate::executor::{Executor, Periodic};
use crate::storage::log_dirs::LogDirs;

/// Kafka's `log.retention.check.interval.ms` default: how often retention runs.
pub const RETENTION_CHECK_INTERVAL: Duration = Duration::from_secs(300);
/// Kafka's `InitialTaskDelayMs`: the first retention pass, after loading settles (or after
/// one check interval, if that is shorter).
const RETENTION_INITIAL_DELAY: Duration = Duration::from_secs(30);

/// The retention task: Kafka's `log.retention.check.interval.ms` loop over the log dirs (an
/// offline one skipped), `interval` after each pass ends.
pub(super) struct Retention {
    periodic: Periodic,
}

impl Retention {
    pub(super) fn start(
        executor: &Executor,
        log_dirs: Arc<LogDirs>,
        interval: Duration,
    ) -> Retention {
        let first = RETENTION_INITIAL_DELAY.min(interval);
        let periodic =
            executor.every(first, interval, move || match log_dirs.enforce_retention() {
                Ok(0) => {}
                Ok(deleted) => log::info!("retention deleted {deleted} segment(s)"),
                Err(err) => log::log!(err.log_level(), "retention: {err}"),
            });
        Retention { periodic }
    }

    /// Stops the loop, waiting for a retention pass in progress to finish.
    pub(super) fn stop(self) {
        self.periodic.stop();
    }
}
