//! The filesystem operation running on a thread, as a moment ([`Operation`]).

use std::time::Instant;

/// The filesystem operation (one `lookup`, `open`, `read`, `getattr`, ...) running on this
/// thread, as a moment: a source may answer a question of that operation with what it learned
/// from an answer *asked after the operation began*, without asking again.
///
/// **Invariant** (what makes this linearizable): an answer asked after the operation began
/// reflects every change the source had acknowledged before the operation began, so one such
/// answer serves every question of the operation as "the partition at that moment". An answer
/// asked before it, however recent, does not: another client's record produced a moment before
/// the operation must be visible to it. A question asked outside any operation (a background
/// thread) never reuses anything on this account.
///
/// Operations nest: an operation begun while one runs on the thread keeps the outer one's
/// moment (the inner one is part of it). Made by the filesystem layer at the top of each
/// filesystem method; dropped at its end.
///
/// The process also counts the operations running on behalf of a caller (not background
/// work, [`Operation::begin_background`]) and when the last one ended, so background work can
/// wait for a quiet moment ([`Operation::quiet_for`]) instead of queueing its requests ahead of
/// a caller's on a shared connection.
#[must_use = "the operation ends when this is dropped"]
pub struct Operation {
    outer: Option<Instant>,
    /// Counted in [`RUNNING_OPERATIONS`] (an outermost operation for a caller).
    counted: bool,
}

thread_local! {
    static OPERATION_BEGAN: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// Outermost caller operations running now in the process.
static RUNNING_OPERATIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// When the last caller operation ended, in nanoseconds since [`operations_epoch`].
static LAST_OPERATION_ENDED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn operations_epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl Operation {
    /// Begins an operation for a caller on this thread (or joins the one running).
    pub fn begin() -> Operation {
        Operation::begin_counted(true)
    }

    /// Begins an operation of background work: as [`Operation::begin`], but not counted as
    /// a caller's ([`Operation::quiet_for`]).
    pub fn begin_background() -> Operation {
        Operation::begin_counted(false)
    }

    fn begin_counted(counted: bool) -> Operation {
        let outer = OPERATION_BEGAN.with(|b| {
            let outer = b.get();
            if outer.is_none() {
                b.set(Some(Instant::now()));
            }
            outer
        });
        let counted = counted && outer.is_none();
        if counted {
            operations_epoch();
            RUNNING_OPERATIONS.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
        Operation { outer, counted }
    }

    /// How long no caller operation has been running in the process; `None` while one runs.
    pub fn quiet_for() -> Option<std::time::Duration> {
        use std::sync::atomic::Ordering;
        if RUNNING_OPERATIONS.load(Ordering::Acquire) > 0 {
            return None;
        }
        let ended = std::time::Duration::from_nanos(LAST_OPERATION_ENDED.load(Ordering::Acquire));
        Some(operations_epoch().elapsed().saturating_sub(ended))
    }

    /// When the operation running on this thread began; `None` outside any operation.
    pub fn began() -> Option<Instant> {
        OPERATION_BEGAN.with(std::cell::Cell::get)
    }

    /// Whether an answer asked at `asked` answers for the operation running on this thread:
    /// asked at or after it began.
    pub fn covers(asked: Instant) -> bool {
        Operation::began().is_some_and(|began| asked >= began)
    }
}

impl Drop for Operation {
    fn drop(&mut self) {
        OPERATION_BEGAN.with(|b| b.set(self.outer));
        if self.counted {
            use std::sync::atomic::Ordering;
            let now = u64::try_from(operations_epoch().elapsed().as_nanos()).unwrap_or(u64::MAX);
            LAST_OPERATION_ENDED.fetch_max(now, Ordering::AcqRel);
            RUNNING_OPERATIONS.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Operation;
    use std::sync::Mutex;
    use std::time::Instant;

    /// The count of running operations is process-wide: the two tests take turns, so that one
    /// does not see the other's operation (`cargo test` runs them on threads of one process).
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    #[test]
    fn an_operation_covers_answers_asked_after_it_began_and_only_while_it_runs() {
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = Instant::now();
        assert!(!Operation::covers(before), "outside any operation");
        {
            let _op = Operation::begin();
            let began = Operation::began().unwrap();
            assert!(!Operation::covers(before), "asked before the operation began");
            assert!(Operation::covers(Instant::now()));
            {
                // A nested operation keeps the outer moment.
                let _inner = Operation::begin();
                assert_eq!(Operation::began(), Some(began));
            }
            assert_eq!(Operation::began(), Some(began), "the inner end does not end the outer");
        }
        assert_eq!(Operation::began(), None);
        assert!(!Operation::covers(Instant::now()));
        // Another thread runs its own operations.
        let _op = Operation::begin();
        std::thread::spawn(|| assert_eq!(Operation::began(), None)).join().unwrap();
    }

    #[test]
    fn the_process_is_quiet_only_while_no_caller_operation_runs() {
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let op = Operation::begin();
        assert_eq!(Operation::quiet_for(), None, "a caller's operation runs");
        drop(op);
        let quiet = Operation::quiet_for().expect("none runs");
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(Operation::quiet_for().expect("none runs") > quiet, "quiet time grows");
        // Background work does not count.
        let _background = Operation::begin_background();
        assert!(Operation::quiet_for().is_some());
        assert!(Operation::began().is_some(), "but it is an operation for the bounds");
    }
}
