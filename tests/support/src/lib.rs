//! What gpu-policy's unit tests, integration suites and benchmarks build
//! their inputs with, each builder once. It depends on no gpu-policy crate:
//! everything here is JSON or certificates, as a caller sends them.
//!
//! - [`review`]: AdmissionReview requests as the API server sends them;
//! - [`pods`]: the GPU pod, [`pods::gpu_pod`];
//! - [`bad_claims`]: malformed DRA claims and pods, the bad-input catalog;
//! - [`x509`]: reading test certificates.

pub mod bad_claims;
pub mod pods;
pub mod review;
pub mod x509;
