//! The allocator every kernbench binary declares (ADR-0026) and its two
//! settings: memory freed is kept for reuse, not handed back to the
//! kernel while the process runs (every binary, ADR-0072); transparent
//! huge pages are off (the main job only, ADR-0121). Everything else is
//! mimalloc's default, huge pages included elsewhere (ADR-0073).
//!
//! Used by the binaries only (`main`, `src/bin`, the examples and
//! benches); the library itself allocates through whatever global
//! allocator its embedder chose and never calls this.

/// The global allocator of the binaries: `#[global_allocator] static
/// ALLOCATOR: Allocator = Allocator;`.
pub use mimalloc::MiMalloc as Allocator;

/// mimalloc's `mi_option_purge_delay`: its place in `mi_option_t`
/// (`mimalloc.h`), for which the Rust bindings name no constant.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Tells the allocator never to purge: pages it frees stay the process's
/// and are reused as they are. By default mimalloc hands a free page
/// back to the kernel after a delay counted in wall-clock milliseconds,
/// and the kernel zeroes it again when it is next touched: how much is
/// zeroed then depends on how fast the run goes, and on the 2-core test
/// machine (2026-11-28) one run
/// in four of the 256- and 1,024-SIP points spent 1-4 s of system time
/// doing it (ADR-0072). Call first thing in `main`.
pub fn keep_freed_memory() {
    // SAFETY: sets one entry of mimalloc's option table (read and
    // written atomically); -1 is a valid purge delay ("never").
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, -1) }
}

/// Turns transparent huge pages off for this process (Linux's
/// `PR_SET_THP_DISABLE`, which holds for memory already mapped too),
/// unless the environment already sets `MIMALLOC_ALLOW_THP`. The main
/// job calls it first thing (ADR-0121): it touches each of its buffers
/// once, so huge pages only cost it the kernel's clearing of fresh 2 MiB
/// pages. Elsewhere a no-op.
pub fn small_pages_for_a_short_run() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: prctl with an option and integer arguments only; a
        // kernel without the option returns an error, which is ignored
        // (huge pages then stay as they were).
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `PURGE_DELAY` is the purge delay: its default is mimalloc v3's
    /// (1,000 ms, `options.c`) unless the environment sets it, and the
    /// setting reads back.
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // SAFETY: reads one entry of mimalloc's option table.
        let get = || unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) };
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(get(), 1000);
        }
        keep_freed_memory();
        assert_eq!(get(), -1);
    }
}
