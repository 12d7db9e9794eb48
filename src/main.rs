use std::process::ExitCode;

/// mimalloc serves the request path's allocations (the body, the
/// document's nodes, the patch and the answer, among others) for about
/// 14,000 fewer instructions per GPU-pod review than the system allocator
/// (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    gpu_policy::cli::main()
}

/// mimalloc's `mi_option_arena_eager_commit`, by its place in
/// `mi_option_t` (mimalloc.h of the v3 sources libmimalloc-sys builds),
/// which the crate does not name.
#[cfg(target_os = "linux")]
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Run by the loader before anything allocates: mimalloc reads the option
/// when it makes its first arena, and the runtime allocates before `main`.
/// Set this early, it also wins over `MIMALLOC_ARENA_EAGER_COMMIT`.
// SAFETY: an `.init_array` entry is called by the loader with no
// arguments, as an `extern "C" fn()`, which this is.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
#[used]
#[unsafe(link_section = ".init_array")]
static COMMIT_ARENAS_AS_USED: extern "C" fn() = commit_arenas_as_used;

/// Arenas committed as their pages are used, not up front (mimalloc's
/// default), so the resident set follows what requests hold; freed pages go
/// back after mimalloc's own 10 ms delay. One review near the body limit
/// (tests/it/e2e/memory.rs) peaks 6.1 to 8.7 bodies above the base committed
/// up front, 1.9 to 2.2 as used; RSS under load 32.3 MiB to 15.0 MiB. All
/// figures: docs/performance.md, "Why the hand-written pieces stay".
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
extern "C" fn commit_arenas_as_used() {
    // SAFETY: mi_option_set is not thread safe; the loader runs this
    // before main, on the one thread there is.
    unsafe {
        libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
    }
}
