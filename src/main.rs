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
#[cfg(target_os = "linux")]
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Run by the loader before anything allocates: the runtime allocates
/// before `main`, and mimalloc reads the arena option when it makes its
/// first arena. Set this early, they also win over
/// `MIMALLOC_ARENA_EAGER_COMMIT` and `MIMALLOC_PURGE_DELAY` in the
/// environment.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static RETURN_FREED_MEMORY_PROMPTLY: extern "C" fn() = return_freed_memory_promptly;

/// By default mimalloc commits its arenas up front and hands freed pages
/// back to the OS 10 ms later. A review near the 3 MiB limit then left the
/// server's resident set 7.5 bodies above where it was, and 16 such
/// reviews at once took it past 100 MiB. With arenas committed as pages
/// are used and freed pages returned at once, one review peaks under two
/// bodies above the base and the 16 at 38 MiB (tests/it/e2e/memory.rs),
/// at no measurable cost in instructions (docs/performance.md).
#[cfg(target_os = "linux")]
extern "C" fn return_freed_memory_promptly() {
    // SAFETY: mi_option_set is not thread safe; the loader runs this
    // before main, on the one thread there is.
    unsafe {
        libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
        libmimalloc_sys::mi_option_set(PURGE_DELAY, 0);
    }
}
