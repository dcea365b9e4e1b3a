//! Freed memory handed back to the system after a webhook's large work.
//!
//! glibc's allocator keeps what a thread frees in that thread's arena, for its next
//! allocation, and returns pages to the system only from the top of each heap. So after large
//! admission reviews the freed memory stays resident: 8 UPDATEs of 3 MB at once left a
//! webhook server at 90 MiB with nothing live (`cargo xtask bench webhook-memory`), and the
//! next burst, landing on other threads' arenas, grows it again toward the Deployment's limit.
//! `malloc_trim` hands every arena's free pages back; with it the same run keeps 13 MiB. musl's
//! allocator (the generated Dockerfile's static binary) unmaps large blocks as they are freed,
//! so this is glibc's alone.

use std::sync::atomic::{AtomicUsize, Ordering};

/// How much freed work makes a trim worth it: a trim walks every arena under its lock, so
/// small reviews add up to one rather than each paying for one.
const GIVE_BACK_ABOVE: usize = 16 * 1024 * 1024;

/// The work freed since the last trim, across every webhook of the process.
static FREED: AtomicUsize = AtomicUsize::new(0);

/// Counts work of about `bytes` that has been freed, and hands the free pages back once what
/// was freed since the last time is over [`GIVE_BACK_ABOVE`]. The trim runs on a blocking
/// thread, since it holds each arena's lock while it walks it: the answer that crossed the
/// line is not held back by it.
pub(crate) fn freed(bytes: usize) {
    let since = FREED
        .fetch_add(bytes, Ordering::Relaxed)
        .saturating_add(bytes);
    // Only the call that takes the count back to zero trims; one that lost the race leaves
    // the count over the line for the next.
    let crossed = since > GIVE_BACK_ABOVE
        && FREED
            .compare_exchange(since, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
    if crossed {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(trim)),
            Err(_) => trim(),
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: `malloc_trim` takes no pointers: it walks glibc's own arenas, each under its
    // lock, and frees nothing that is in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
