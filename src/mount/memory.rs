//! Giving freed memory back to the system: the crate's one `unsafe` that is not a map.
//!
//! The daemon (not the filesystem logic, which gets it handed in through
//! [`crate::fs::TopicFs::with_memory_release`]) owns the process's allocator. glibc offers
//! `malloc_trim` only as an FFI call, and no maintained crate wraps it safely, so this is the
//! one deliberate exception to "`unsafe` only where mmap needs it" (see doc/ARCHITECTURE.md):
//! one call, no pointers, measured to be needed (below).

#![allow(unsafe_code)]

/// Gives the pages of memory freed inside the allocator's heaps back to the system (glibc's
/// `malloc_trim(0)`); a no-op with other C libraries. Returns whether any memory was released.
///
/// Why: glibc returns freed heap memory to the system only from the top of a heap, so one
/// small live allocation (an inode, a handle) above the freed buffers of many closed streams
/// keeps them all resident (1,000 handles read and closed: 59-62 MB resident against 11 MB
/// idle). The safe alternatives were measured and rejected: `MALLOC_ARENA_MAX=1`,
/// `MALLOC_TRIM_THRESHOLD_` and a fixed 128 KiB `MALLOC_MMAP_THRESHOLD_` returned nothing, a
/// 32 KiB threshold returned it but made a single `cat` 2.2 times slower (every buffer its own
/// mapping, faulted in anew), and mimalloc kept more. The filesystem calls this when many
/// stream handles have closed, not on any read path.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn return_freed_memory() -> bool {
    // SAFETY: `malloc_trim` takes no pointer and has no precondition; it walks glibc's own
    // arenas under their locks and releases whole free pages (`madvise(MADV_DONTNEED)` and
    // shrinking the heap top). It is thread-safe and leaves every live allocation untouched.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// See the glibc version: other C libraries have no `malloc_trim`.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn return_freed_memory() -> bool {
    false
}
