//! The tests' GPU pod: one builder, every suite.

use serde_json::{Value, json};

/// The CUDA base image of [`gpu_pod`]: its config says
/// `NVIDIA_VISIBLE_DEVICES=all`, as every official CUDA image does.
pub const CUDA_IMAGE: &str = "nvidia/cuda:12.6.3-base-ubuntu24.04";

/// A pod named `trainer` with one container `train` of [`CUDA_IMAGE`]
/// asking for one `nvidia.com/gpu` as a limit, in no namespace:
/// `gpu_pod().name("p").namespace("ml").gpus("500m").json()`.
pub fn gpu_pod() -> GpuPod {
    GpuPod {
        name: "trainer".to_owned(),
        namespace: None,
        container: "train".to_owned(),
        image: CUDA_IMAGE.to_owned(),
        gpus: json!(1),
    }
}

/// A GPU pod being built; see [`gpu_pod`].
#[derive(Debug, Clone)]
pub struct GpuPod {
    name: String,
    namespace: Option<String>,
    container: String,
    image: String,
    gpus: Value,
}

impl GpuPod {
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }

    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_owned());
        self
    }

    pub fn container(mut self, container: &str) -> Self {
        self.container = container.to_owned();
        self
    }

    pub fn image(mut self, image: &str) -> Self {
        self.image = image.to_owned();
        self
    }

    /// The limit: a number (`2`) or a quantity's text (`"500m"`).
    pub fn gpus(mut self, gpus: impl Into<Value>) -> Self {
        self.gpus = gpus.into();
        self
    }

    pub fn json(&self) -> Value {
        let mut metadata = json!({"name": self.name});
        if let Some(namespace) = &self.namespace {
            metadata["namespace"] = json!(namespace);
        }
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {"containers": [{
                "name": self.container,
                "image": self.image,
                "resources": {"limits": {"nvidia.com/gpu": self.gpus}}
            }]}
        })
    }

    /// The pod as a manifest for `kubectl` and `check`: JSON, which is
    /// YAML, on one line and ending in a newline.
    pub fn manifest(&self) -> String {
        format!("{}\n", self.json())
    }
}

#[cfg(test)]
mod tests;
