//! R8's messages, which the webhook's check and the generated validation both fill.

use crate::policy::message::{MessageTemplate, Noun};

/// `{taints}`: [`TAINT`]'s list of the GPU taints tolerated; `{tolerations}`: [`TOLERATION`]'s
/// list of the pod's tolerations that tolerate them (`toleration_text`).
pub const CPU_POD_TOLERATES_GPU_TAINT: MessageTemplate = MessageTemplate::new(
    "the pod requests no GPU but tolerates the GPU {taints} through its {tolerations}: it could \
     be scheduled on a GPU node and keep the node's GPUs from GPU pods; remove the toleration, \
     or request a GPU",
);

pub const TAINT: Noun = Noun::new("taint", "taints");
pub const TOLERATION: Noun = Noun::new("toleration", "tolerations");
