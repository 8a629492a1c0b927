//! The log cleaner of a read-write mount: Kafka's `LogCleaner` thread as a periodic task of the
//! mount's executor, one pass over every log `log.cleaner.backoff.ms` (`--cleaner-backoff-ms`)
//! after the previous one ends, its offset map sized by `log.cleaner.dedupe.buffer.size`
//! (`--cleaner-dedupe-buffer-size`, the one large allocation, made once and kept between
//! passes). Which topics it cleans, and with which settings, a callback decides per topic
//! (`None`: not cleaned).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::cleaner::{CleanOptions, Cleaner, CleanerSettings, clean_logs};
use crate::executor::{Executor, Periodic};
use crate::storage::log_dirs::LogDirs;

/// Kafka's `log.cleaner.backoff.ms` default: the pause between two cleaner passes.
pub const CLEANER_BACKOFF: Duration = Duration::from_millis(15_000);

/// Which topics are cleaned and how: `None` for a topic not cleaned.
pub type SettingsFor = dyn Fn(&str) -> Option<CleanerSettings> + Send + Sync;

/// The cleaner task of a read-write mount.
pub(super) struct CleanerTask {
    periodic: Periodic,
    /// Set at stop: a pass in progress ends at its next batch, swapping nothing more.
    abort: Arc<AtomicBool>,
}

impl CleanerTask {
    pub(super) fn start(
        executor: &Executor,
        log_dirs: Arc<LogDirs>,
        backoff: Duration,
        dedupe_buffer_bytes: usize,
        settings_for: Arc<SettingsFor>,
    ) -> CleanerTask {
        let abort = Arc::new(AtomicBool::new(false));
        let aborted = Arc::clone(&abort);
        let mut cleaner: Option<Cleaner> = None;
        let periodic = executor.every(backoff, backoff, move || {
            // Each online dir with its own cleaner-offset-checkpoint, as Kafka's cleaner
            // keeps one per log dir.
            for (log_dir, health) in log_dirs.online() {
                let logs = log_dir.logs();
                // The map is allocated at the first log to clean, not at mount.
                let wanted: Vec<_> =
                    logs.iter().filter(|l| settings_for(l.topic()).is_some()).cloned().collect();
                if wanted.is_empty() {
                    continue;
                }
                let cleaner = cleaner.get_or_insert_with(|| Cleaner::new(dedupe_buffer_bytes));
                let opts = CleanOptions {
                    now: crate::storage::segment::now_ms(),
                    abort: Some(&aborted),
                    crash_at: None,
                };
                let for_topic =
                    |t: &str| settings_for(t).map(|s| CleanerSettings { dedupe_buffer_bytes, ..s });
                let cleaned = clean_logs(log_dir.path(), &wanted, cleaner, &for_topic, &opts);
                if cleaned > 0 {
                    log::info!("cleaner: {cleaned} log(s) cleaned in {}", log_dir.path().display());
                }
                // A dir whose disk failed meanwhile is found at its next check.
                health.check();
            }
        });
        CleanerTask { periodic, abort }
    }

    /// Stops the loop: a pass in progress ends at its next batch (nothing half swapped: the
    /// swap itself is never interrupted), and has ended when this returns.
    pub(super) fn stop(self) {
        self.abort.store(true, std::sync::atomic::Ordering::Relaxed);
        self.periodic.stop();
    }
}
