//! What `gpu-policy doctor` read of the cluster, as plain values: the checks
//! read it and nothing else, so a table test builds one by hand.

use std::collections::BTreeMap;

/// How one part of the cluster was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen<T> {
    /// Read whole.
    Complete(T),
    /// The first pages only: the cluster holds more than the doctor reads
    /// of the kind (`cluster::read_inventory` says how many).
    Truncated(T),
    /// The caller may not read it; `rbac` says what to grant
    /// (`list daemonsets.apps`).
    Forbidden { rbac: &'static str },
    /// The API server does not serve the kind (a cluster without
    /// `resource.k8s.io/v1`, an install without webhook configurations).
    NotServed,
}

impl<T> Seen<T> {
    pub fn items(&self) -> Option<&T> {
        match self {
            Seen::Complete(items) | Seen::Truncated(items) => Some(items),
            Seen::Forbidden { .. } | Seen::NotServed => None,
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Seen<U> {
        match self {
            Seen::Complete(items) => Seen::Complete(f(items)),
            Seen::Truncated(items) => Seen::Truncated(f(items)),
            Seen::Forbidden { rbac } => Seen::Forbidden { rbac },
            Seen::NotServed => Seen::NotServed,
        }
    }
}

impl<T: Default> Default for Seen<T> {
    fn default() -> Self {
        Seen::Complete(T::default())
    }
}

/// One Node, reduced to what the findings read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    /// Only those `checks::gpu_nodes::is_read_label` keeps.
    pub labels: BTreeMap<String, String>,
    /// `status.capacity` of the resources under `nvidia.com/`, as whole
    /// counts (a count that is not whole is left out).
    pub capacity: BTreeMap<String, u64>,
    /// `status.runtimeHandlers[].name` (Kubernetes 1.30 and later); None
    /// when the node reports none.
    pub runtime_handlers: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeClass {
    pub name: String,
    pub handler: String,
}

/// The NVIDIA components the doctor looks for by their DaemonSets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Component {
    /// The NVIDIA device plugin: advertises `nvidia.com/gpu`.
    DevicePlugin,
    /// GPU Feature Discovery: the `nvidia.com/gpu.*` and `nvidia.com/cuda.*`
    /// node labels.
    FeatureDiscovery,
}

impl Component {
    pub fn title(self) -> &'static str {
        match self {
            Component::DevicePlugin => "the NVIDIA device plugin",
            Component::FeatureDiscovery => "GPU Feature Discovery",
        }
    }

    /// The names and labels of docs/operations.md, "What it reads".
    fn signs(self) -> Signs {
        match self {
            Component::DevicePlugin => Signs {
                names: &["nvidia-device-plugin-daemonset", "nvidia-device-plugin-ds"],
                suffixes: &["nvidia-device-plugin"],
                labels: &[
                    ("app.kubernetes.io/name", "nvidia-device-plugin"),
                    ("app", "nvidia-device-plugin-daemonset"),
                    ("name", "nvidia-device-plugin-ds"),
                ],
            },
            Component::FeatureDiscovery => Signs {
                names: &["gpu-feature-discovery", "nvidia-gpu-feature-discovery"],
                suffixes: &["gpu-feature-discovery"],
                labels: &[
                    ("app.kubernetes.io/name", "gpu-feature-discovery"),
                    ("app", "gpu-feature-discovery"),
                ],
            },
        }
    }

    /// The component a DaemonSet named `name` with `labels` runs, if any. The
    /// chart's MPS control daemon shares the plugin's labels and is no device
    /// plugin; GFD is matched first: the chart names it
    /// `<release>-gpu-feature-discovery` with the plugin's labels.
    pub fn of_daemon_set(name: &str, labels: &BTreeMap<String, String>) -> Option<Component> {
        if name.contains("mps-control-daemon") {
            return None;
        }
        [Component::FeatureDiscovery, Component::DevicePlugin].into_iter().find(|component| {
            let signs = component.signs();
            signs.names.contains(&name)
                || signs.suffixes.iter().any(|suffix| name.ends_with(suffix))
                || signs
                    .labels
                    .iter()
                    .any(|(key, value)| labels.get(*key).map(String::as_str) == Some(*value))
        })
    }

    pub fn looked_for(self) -> String {
        let signs = self.signs();
        let labels: Vec<String> =
            signs.labels.iter().map(|(key, value)| format!("{key}={value}")).collect();
        format!(
            "named {} or *{}, or labelled {}",
            signs.names.join(", "),
            signs.suffixes.join(", *"),
            labels.join(", ")
        )
    }
}

struct Signs {
    names: &'static [&'static str],
    suffixes: &'static [&'static str],
    labels: &'static [(&'static str, &'static str)],
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonSet {
    pub namespace: String,
    pub name: String,
    pub component: Component,
    /// `status.desiredNumberScheduled` and `status.numberReady`.
    pub desired: i64,
    pub ready: i64,
}

impl DaemonSet {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentPod {
    pub namespace: String,
    pub name: String,
    pub component: Component,
    /// `spec.nodeName`; None while it is not scheduled.
    pub node: Option<String>,
    /// Its `Ready` condition is `True`.
    pub ready: bool,
    /// `spec.runtimeClassName`.
    pub runtime_class: Option<String>,
}

/// A ResourceSlice of the NVIDIA DRA driver (`gpu.nvidia.com`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slice {
    pub name: String,
    /// `spec.nodeName`.
    pub node: Option<String>,
    /// Its devices, and how many of them lack each version attribute the
    /// DRA floors read.
    pub devices: u64,
    pub without_compute_capability: u64,
    pub without_driver_version: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dra {
    /// The DeviceClasses whose names `gpuDeviceClasses` lists.
    pub gpu_device_classes: Vec<String>,
    pub slices: Vec<Slice>,
}

/// A namespace's `gpu-policy.io/mode` label, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptedIn {
    pub namespace: String,
    pub mode: String,
}

/// Which kind a webhook configuration is (the two the install makes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WebhookKind {
    Mutating,
    Validating,
}

impl WebhookKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookKind::Mutating => "MutatingWebhookConfiguration",
            WebhookKind::Validating => "ValidatingWebhookConfiguration",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    pub configuration: WebhookKind,
    pub name: String,
    /// Whether `clientConfig.caBundle` trusts the serving certificate of
    /// the certificate Secret: Ok, or why not (empty, another CA,
    /// expired). None when there is no Secret to compare with.
    pub trusts_serving_certificate: Option<Result<(), String>>,
    /// `clientConfig.service` as `namespace/name`; None for a `url`.
    pub service: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    pub namespace: String,
    pub name: String,
    /// `spec.replicas` and `status.readyReplicas`.
    pub replicas: i64,
    pub ready: i64,
}

/// One allowlist entry of kind DaemonSet, and whether what it names
/// exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowlistTarget {
    /// The entry as the config shows it (`kube-system/DaemonSet/name`).
    pub entry: String,
    pub namespace: String,
    /// The name, or with `by_prefix` the prefix, it names.
    pub name: String,
    pub by_prefix: bool,
    /// One of the entries gpu-policy ships by default: guesses at where
    /// NVIDIA's DaemonSets run, which a cluster need not have.
    pub default_entry: bool,
    pub exists: Seen<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// `--config FILE`.
    File(String),
    /// The install's ConfigMap, `namespace/name`.
    ConfigMap(String),
    /// Neither: the defaults.
    Defaults,
    /// The install's ConfigMap (`namespace/name`) does not load (`error`):
    /// the defaults.
    Invalid { config_map: String, error: String },
}

/// What the findings read of the policy configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyConfig {
    pub source: ConfigSource,
    /// `runtimeClassName` (empty: none injected).
    pub runtime_class_name: String,
}

/// gpu-policy's own install.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Install {
    pub namespace: String,
    /// The webhooks of its Mutating and ValidatingWebhookConfigurations;
    /// NotServed when neither configuration exists.
    pub webhooks: Seen<Vec<Webhook>>,
    /// Its Deployment; `Complete(None)` when there is none.
    pub deployment: Seen<Option<Deployment>>,
    pub allowlist: Vec<AllowlistTarget>,
}

/// Everything `doctor` read, once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    pub nodes: Seen<Vec<Node>>,
    pub runtime_classes: Seen<Vec<RuntimeClass>>,
    pub daemon_sets: Seen<Vec<DaemonSet>>,
    /// The pods of the device plugin's and GFD's DaemonSets.
    pub component_pods: Seen<Vec<ComponentPod>>,
    pub dra: Seen<Dra>,
    pub namespaces: Seen<Vec<OptedIn>>,
    pub install: Install,
    pub config: PolicyConfig,
}

impl Default for Inventory {
    fn default() -> Self {
        Inventory {
            nodes: Seen::default(),
            runtime_classes: Seen::default(),
            daemon_sets: Seen::default(),
            component_pods: Seen::default(),
            dra: Seen::NotServed,
            namespaces: Seen::default(),
            install: Install::default(),
            config: PolicyConfig {
                source: ConfigSource::Defaults,
                runtime_class_name: "nvidia".to_owned(),
            },
        }
    }
}

#[cfg(test)]
mod tests;
