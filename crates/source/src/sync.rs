//! Locking that survives a panic elsewhere.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, recovering it if a thread panicked while holding it.
///
/// Every critical section in the crate leaves its data consistent between statements that can
/// panic (updates are plain stores or single map calls after the work is done), so a poisoned
/// lock still guards consistent state, and one failed request must not take the whole mount
/// down.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
