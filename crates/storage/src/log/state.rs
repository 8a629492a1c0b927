//! A log's state other than its segment map ([`super::segments`]) and offsets
//! ([`super::offsets`]), one type per job, each with its own lock or none: the topic's settings,
//! the writer's state (the append lock), what the directory's listing found, and the cleaner's
//! marks. See [`super::Log`] for the lock order.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use topicfs_format::Timestamp;
use topicfs_source::sync::lock;

use super::load::RefusedFile;
use super::txn::ProducerState;
use super::{LOCAL_SIZING_BUDGET, LoadState, LogConfig};
use crate::segment::now_ms;

/// The topic's settings as this log applies them. Each is replaced as a whole; a reader gets
/// the value of one moment (an append, a roll or a retention pass reads the configuration once).
#[derive(Debug)]
pub(super) struct Settings {
    /// The effective configuration, replaced whole when the topic's settings change. Its lock
    /// is held only to clone or replace the `Arc` (nothing is taken under it).
    config: RwLock<Arc<LogConfig>>,
    /// Whether the topic's settings are known (see [`topicfs_settings::topic_config`]): retention by time
    /// and size runs only then. `true` for a log opened on its own.
    known: AtomicBool,
    /// Log bytes a stream's `stat`/`open` may render to size it.
    sizing_budget: AtomicU64,
}

impl Settings {
    pub(super) fn new(config: LogConfig) -> Settings {
        Settings {
            config: RwLock::new(Arc::new(config)),
            known: AtomicBool::new(true),
            sizing_budget: AtomicU64::new(LOCAL_SIZING_BUDGET),
        }
    }

    pub(super) fn config(&self) -> Arc<LogConfig> {
        Arc::clone(&self.config.read().unwrap_or_else(|e| e.into_inner()))
    }

    pub(super) fn set_config(&self, config: Arc<LogConfig>) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = config;
    }

    pub(super) fn known(&self) -> bool {
        self.known.load(Ordering::Acquire)
    }

    pub(super) fn set_known(&self, known: bool) {
        self.known.store(known, Ordering::Release);
    }

    pub(super) fn sizing_budget(&self) -> u64 {
        self.sizing_budget.load(Ordering::Relaxed)
    }

    pub(super) fn set_sizing_budget(&self, bytes: u64) {
        self.sizing_budget.store(bytes, Ordering::Relaxed);
    }
}

/// What only the log's one writer reads and changes, behind the **append lock**
/// (`Log::writer`): appends, rolls, retention passes, the cleaner's swaps and close each hold
/// it throughout, so they happen one at a time. A load sets it (at open, or a read-only log's
/// reload, which no holder of the lock calls).
#[derive(Debug)]
pub(super) struct Writer {
    /// Set by close: appends fail afterwards.
    pub(super) closed: bool,
    /// Random reduction of `segment.ms` for the active segment (`segment.jitter.ms`), drawn at
    /// each load and roll.
    pub(super) roll_jitter_ms: i64,
    /// The producer state at the active segment's base offset, as far as this engine knows it,
    /// for the `.snapshot` it writes at the next roll (see `txn.rs`).
    pub(super) producer_state: ProducerState,
    /// Every batch of the active segment was appended by this engine since it was opened (the
    /// segment was empty at open, or this engine rolled to it): it holds no producer's batch.
    pub(super) active_all_ours: bool,
}

impl Default for Writer {
    fn default() -> Self {
        Writer {
            closed: false,
            roll_jitter_ms: 0,
            producer_state: ProducerState::Undetermined,
            active_all_ours: false,
        }
    }
}

/// The append lock held by the log cleaner while it checks its inputs and swaps its output in
/// ([`super::Log::cleaner_lock`]): appends, rolls, retention and close wait meanwhile.
pub struct AppendGuard<'a> {
    _writer: MutexGuard<'a, Writer>,
}

impl<'a> AppendGuard<'a> {
    pub(super) fn new(writer: &'a Mutex<Writer>) -> AppendGuard<'a> {
        AppendGuard { _writer: lock(writer) }
    }
}

/// What the partition directory's listings found, and when a read-only log last looked.
#[derive(Debug)]
pub(super) struct Listing {
    /// What the log dir knew at open (read-only reloads start from it again).
    pub(super) load_state: LoadState,
    /// Segment-file names of the directory's last listing that are not regular files (FIFOs,
    /// sockets, devices, directories, dangling links, loops): never opened, reported by
    /// `Log::file_problems`. Replaced whole by each listing; nothing is taken under its lock.
    pub(super) refused: Mutex<Vec<RefusedFile>>,
    /// Wall time (ms) of the last read-only refresh.
    last_refresh_ms: AtomicI64,
    /// Segments re-read by recovery at open (diagnostics; 0 after a clean shutdown).
    pub(super) recovered_segments: AtomicUsize,
}

impl Listing {
    pub(super) fn new(load_state: LoadState) -> Listing {
        Listing {
            load_state,
            refused: Mutex::new(Vec::new()),
            last_refresh_ms: AtomicI64::new(now_ms()),
            recovered_segments: AtomicUsize::new(0),
        }
    }

    /// Whether a refresh is due at `now` (the last one at least `interval_ms` ago), claiming
    /// it: of callers at once, one gets `true`.
    pub(super) fn claim_refresh(&self, now: Timestamp, interval_ms: i64) -> bool {
        let last = self.last_refresh_ms.load(Ordering::Relaxed);
        now.saturating_sub(last) >= interval_ms
            && self
                .last_refresh_ms
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }
}

/// What the log cleaner left in this log, each read and set on its own (no lock).
#[derive(Debug)]
pub(super) struct CleanerMarks {
    /// See `Log::latest_delete_horizon`.
    pub(super) latest_delete_horizon: AtomicI64,
    /// Segments the cleaner installed so far (their generations, see
    /// [`crate::segment::LogSegment::generation`]).
    pub(super) generation: AtomicU32,
}

impl Default for CleanerMarks {
    fn default() -> Self {
        CleanerMarks {
            latest_delete_horizon: AtomicI64::new(topicfs_format::NO_TIMESTAMP),
            generation: AtomicU32::new(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[test]
    fn a_refresh_is_due_once_per_interval_and_claimed_by_one_caller() {
        let listing = Listing::new(LoadState::default());
        assert!(!listing.claim_refresh(now_ms() - 1_000, 200), "not before the interval");
        let later = now_ms() + 10_000;
        assert!(listing.claim_refresh(later, 200));
        assert!(!listing.claim_refresh(later + 199, 200), "claimed: the next is 200 ms on");
        // Callers at once: one of them refreshes.
        let (barrier, claimed) = (Barrier::new(8), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    barrier.wait();
                    if listing.claim_refresh(later + 200, 200) {
                        claimed.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(claimed.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_new_config_applies_whole_to_the_next_reader() {
        let settings = Settings::new(LogConfig::default());
        let before = settings.config();
        let changed = LogConfig { retention_bytes: Some(7), ..LogConfig::default() };
        settings.set_config(Arc::new(changed));
        assert_eq!(settings.config().retention_bytes, Some(7));
        assert_eq!(before.retention_bytes, LogConfig::default().retention_bytes, "a snapshot");
        assert!(settings.known(), "a log opened on its own knows its settings");
        assert_eq!(settings.sizing_budget(), LOCAL_SIZING_BUDGET);
    }
}
