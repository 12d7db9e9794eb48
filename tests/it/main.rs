//! The integration tests, one binary: each suite is a module, and
//! [`support`] holds the helpers they share.
//!
//! Run one suite with `cargo test --test it e2e::`, one test with
//! `cargo test --test it -- --exact e2e::dry_run_gets_the_same_bytes_as_the_real_request`.

mod support;

mod admission_policies;
mod architecture;
mod audit;
mod cert_secret;
mod chart;
mod cli;
mod cluster;
mod dashboard;
mod doctor;
mod dra_cluster;
mod e2e;
mod examples;
mod fake_api;
mod golden;
mod install;
mod patch_check;
mod policy_test;
mod properties;
mod registry;
mod reports;
mod scale;
mod sharing;
