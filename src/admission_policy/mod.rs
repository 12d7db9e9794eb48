//! Admission policies (ValidatingAdmissionPolicy, MutatingAdmissionPolicy)
//! for the API server to run in-process.
//!
//! - [`cost`]: the static worst-case cost of their CEL expressions, against
//!   the limits Kubernetes applies to them.

pub mod cost;
