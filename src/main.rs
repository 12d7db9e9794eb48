use std::process::ExitCode;

/// mimalloc serves the request path's allocations (the body, the
/// document's nodes, the patch and the answer, among others) for about
/// 14,000 fewer instructions per GPU-pod review than the system allocator
/// (docs/performance.md).
#[global_allocator]
static ALLOCATOR: gpu_policy::allocator::Mimalloc = gpu_policy::allocator::Mimalloc;

fn main() -> ExitCode {
    gpu_policy::cli::main()
}

/// mimalloc's options, by their place in `mi_option_t` (mimalloc.h of the
/// v3 sources libmimalloc-sys builds); the crate names only some of them.
#[cfg(target_os = "linux")]
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Run by the loader before anything allocates: the runtime allocates
/// before `main`, and mimalloc reads the arena option when it makes its
/// first arena. Set this early, it also wins over
/// `MIMALLOC_ARENA_EAGER_COMMIT` in the environment.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
#[used]
#[unsafe(link_section = ".init_array")]
static COMMIT_ARENAS_AS_USED: extern "C" fn() = commit_arenas_as_used;

/// By default mimalloc commits its arenas up front. A review near the
/// 3 MiB limit then left the server's resident set 7.5 bodies above where
/// it was, and 16 such reviews at once took it past 100 MiB. With arenas
/// committed as pages are used, one review peaks under three bodies above
/// the base and the 16 at about 52 MiB in a release build, 66 MiB in the
/// debug build the tests run (tests/it/e2e/memory.rs).
///
/// Freed pages go back to the OS after mimalloc's own delay (10 ms).
/// Returning them at once lowered those peaks by half a body and 3 MiB,
/// but under load a page was returned and touched again every five to ten
/// requests: a page fault each time, and about half a microsecond of CPU
/// per request (docs/performance.md).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
extern "C" fn commit_arenas_as_used() {
    // SAFETY: mi_option_set is not thread safe; the loader runs this
    // before main, on the one thread there is.
    unsafe {
        libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
    }
}
