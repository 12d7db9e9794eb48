//! The helpers the suites share, each in one place.
//!
//! - [`fixtures`]: the manifests of `tests/fixtures/` and their pods;
//! - [`workloads`]: the pod a workload's controller creates;
//! - [`review`]: AdmissionReview requests; [`router`]: the admission
//!   router in process;
//! - [`bad_claims`]: malformed DRA claims and pods, the bad-input catalog;
//! - [`server`] and [`tls`]: the built binary as a server, and the API
//!   server's side of the wire;
//! - [`fake_api`]: an in-process Kubernetes API server; [`fleet`]: a GPU
//!   fleet for it, grown to any size;
//! - [`fake_registry`]: an in-process OCI image registry; [`fake_dns`]: an
//!   in-process DNS server that records every question;
//! - [`large_pods`]: pods as large as a review may be, sized to a body;
//! - [`late_webhook`]: a sidecar injector's webhook, called after
//!   gpu-policy's, for the real control plane;
//! - [`pods`] and [`oracles`]: generated pods, and what the policy must do
//!   to them; [`claimed_pods`]: generated pods with DRA claims, the
//!   objects they name, and how they resolve; [`counted_claims`]: claims
//!   whose counts reach past u64, the pods that use them, and their totals;
//! - [`script`]: the Python checks; [`kubernetes_validate`]: strict schema
//!   validation of YAML streams; [`report_crds`]: the policy report CRDs
//!   and validation against their schemas; [`chart`]: the Helm chart
//!   rendered;
//! - [`promql`]: the metric names PromQL selects, and the series an
//!   exposition offers;
//! - [`process`]: running the binary or a tool to completion;
//!   [`control_plane`]: a real etcd and kube-apiserver, and kubectl;
//! - [`x509`]: reading test certificates; [`generated_docs`]: the docs'
//!   sections the program prints, and `UPDATE_GOLDEN`.
//!
//! [`review`], [`bad_claims`], [`x509`] and [`gpu_pod`] are the builders of
//! `tests/support`, which the unit tests and benchmarks use too.

pub use gpu_policy_test_support::{bad_claims, pods::gpu_pod, review, x509};
pub mod chart;
pub mod claimed_pods;
pub mod counted_claims;
// Used by the `apiserver` suite (tests/apiserver), which shares this room.
#[allow(dead_code)]
pub mod control_plane;
pub mod fake_api;
pub mod fake_dns;
pub mod fake_registry;
pub mod fixtures;
pub mod fleet;
pub mod generated_docs;
pub mod kubernetes_validate;
pub mod large_pods;
// Used by the `apiserver` suite (tests/apiserver), which shares this room.
#[allow(dead_code)]
pub mod late_webhook;
pub mod oracles;
pub mod pods;
pub mod process;
pub mod promql;
pub mod report_crds;
pub mod router;
pub mod script;
pub mod server;
pub mod sharing_webhooks;
pub mod tls;
pub mod workloads;
