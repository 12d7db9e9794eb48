use std::process::ExitCode;

/// Decoding a review builds a JSON tree of many small allocations, freed
/// when the answer is sent; mimalloc serves them far cheaper than the
/// system allocator (see docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    gpu_policy::cli::main()
}
