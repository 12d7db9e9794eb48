//! The helpers the suites share, each in one place.
//!
//! - [`fixtures`]: the manifests of `tests/fixtures/` and their pods;
//! - [`workloads`]: the pod a workload's controller creates;
//! - [`review`]: AdmissionReview requests;
//! - [`server`] and [`tls`]: the built binary as a server, and the API
//!   server's side of the wire;
//! - [`fake_api`]: an in-process Kubernetes API server;
//! - [`fake_registry`]: an in-process OCI image registry;
//! - [`pods`] and [`oracles`]: generated pods, and what the policy must do
//!   to them;
//! - [`script`]: the Python checks;
//! - [`x509`]: reading test certificates.

pub mod fake_api;
pub mod fake_registry;
pub mod fixtures;
pub mod oracles;
pub mod pods;
pub mod review;
pub mod script;
pub mod server;
pub mod tls;
pub mod workloads;
pub mod x509;
