//! The allocator the binary installs (`src/main.rs`, with mimalloc's
//! options), and the benchmarks too, so that the request path allocates
//! there as it does in the server.

pub use mimalloc::MiMalloc;
