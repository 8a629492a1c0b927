//! Threads that block on one thing for their whole life, and so cannot be tasks (a task would
//! hold a worker forever): the mount's signal wait (`sigwait`) and one reader per broker
//! connection (a blocking socket read). Every such thread is started here, named, and counted
//! while it lives ([`dedicated_threads`]), so the thread list of doc/ARCHITECTURE.md has one
//! source and a test can count them. Everything else runs on an [`crate::Executor`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

/// Dedicated threads alive in this process.
static ALIVE: AtomicUsize = AtomicUsize::new(0);

/// Decrements [`ALIVE`] when the thread's closure ends (returns or unwinds).
struct Alive;

impl Drop for Alive {
    fn drop(&mut self) {
        ALIVE.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Starts `body` on a thread of its own named `name` (see the module docs for which threads
/// may be dedicated); the error is the OS's when it cannot start one.
pub fn spawn_dedicated(
    name: String,
    body: impl FnOnce() + Send + 'static,
) -> std::io::Result<JoinHandle<()>> {
    ALIVE.fetch_add(1, Ordering::AcqRel);
    let alive = Alive;
    std::thread::Builder::new().name(name).spawn(move || {
        let _alive = alive;
        body();
    })
    // On an error the closure (and the `Alive` in it) is dropped: the count goes back.
}

/// How many dedicated threads are alive now.
pub fn dedicated_threads() -> usize {
    ALIVE.load(Ordering::Acquire)
}
