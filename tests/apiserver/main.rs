//! gpu-policy against a real Kubernetes control plane: etcd and
//! kube-apiserver built from their Go modules (`scripts/control-plane.sh
//! build`), started per test, driven with `kubectl` as users drive them.
//!
//! Skipped, with one printed line, when the control plane is not built,
//! unless `GPU_POLICY_REQUIRE_CONTROL_PLANE=1` (`.ci/run` sets it after
//! building). Run it with `cargo test --test apiserver`.

#[path = "../it/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

mod admission_policies;
mod audit_command;
mod client_certificates;
mod doctor;
mod dra_floors;
mod failure_policy;
mod fixtures;
mod gfd_labels;
mod gpu_placement;
mod install;
mod least_privilege;
mod pod_claims;
mod pod_updates;
mod reports;
mod writes;
