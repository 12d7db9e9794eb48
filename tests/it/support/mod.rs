//! Shared helpers for the integration tests. Each test binary pulls this in
//! with `mod support;` and uses only the parts it needs.

pub mod fake_api;
pub mod pods;
pub mod script;
pub mod workloads;
