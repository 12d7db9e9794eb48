//! The complete install, built from the program's own constants: the
//! paths the server routes on, the kinds the policy reads, the label that
//! opts a namespace in. `gpu-policy manifests` prints it; `webhook-config/`
//! and the Helm chart are tested against it, so they cannot drift.

mod guards;

use serde_json::{Value, json};

use crate::admission::Endpoint;
use crate::admission::Mode;
use crate::admission::Workload;
use crate::kubernetes_version::KubernetesVersion;
use crate::policy::dra::claims::{CLAIM_GROUP, ClaimKind};
use crate::settings::{Config, MODE_LABEL};

/// The name of every object of the install.
pub const NAME: &str = "gpu-policy";
/// The Secret of the server-managed certificate route.
pub const CERT_SECRET: &str = "gpu-policy-tls";
pub const HTTPS_PORT: u16 = 8443;
pub const METRICS_PORT: u16 = 8080;
/// The API server gives up on a webhook after this many seconds.
pub const TIMEOUT_SECONDS: u32 = 5;
const CONFIG_DIR: &str = "/etc/gpu-policy";
const CERTS_DIR: &str = "/var/run/gpu-policy/certs";

/// What the install varies by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallOptions {
    pub namespace: String,
    pub image: String,
    pub replicas: u32,
    /// PEM CA for `caBundle`; None leaves it to the certificate route.
    pub ca_bundle: Option<String>,
    /// `Fail` or `Ignore`, for the enforce entries.
    pub failure_policy: String,
    /// Where the API server calls a webhook that runs outside the cluster:
    /// its entries get `url` instead of the Service, and the objects that
    /// run the server in the cluster are left out.
    pub webhook_url: Option<WebhookUrl>,
    /// The release the manifests are for: the `resource.k8s.io` version
    /// the claim rules name.
    pub kubernetes: KubernetesVersion,
}

/// The base URL of a webhook outside the cluster, checked as the API
/// server checks `clientConfig.url` (Kubernetes' `ValidateWebhookURL`):
/// https, a host, no user information, query or fragment. Kept without a
/// trailing `/`, so that joining an endpoint's path never gives `//`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl(String);

/// Why a `--webhook-url` is refused; one line, for `gpu-policy:
/// --webhook-url URL: <reason>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookUrlError {
    #[error("whitespace and control characters are not allowed")]
    Whitespace,
    #[error("{0}")]
    Unreadable(url::ParseError),
    #[error("the scheme must be https, not {0}")]
    Scheme(String),
    #[error("a host is required")]
    NoHost,
    #[error("user information is not allowed")]
    UserInformation,
    #[error("a query is not allowed")]
    Query,
    #[error("a fragment is not allowed")]
    Fragment,
}

impl WebhookUrl {
    pub fn parse(text: &str) -> Result<Self, WebhookUrlError> {
        // The url crate drops these silently; Go's net/url, which the API
        // server parses with, rejects them.
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(WebhookUrlError::Whitespace);
        }
        let url = url::Url::parse(text).map_err(|error| match error {
            url::ParseError::EmptyHost => WebhookUrlError::NoHost,
            other => WebhookUrlError::Unreadable(other),
        })?;
        if url.scheme() != "https" {
            return Err(WebhookUrlError::Scheme(url.scheme().to_owned()));
        }
        // The url crate reads `https:host`, `https:/host` and `https:///host`
        // as `https://host`; Go's net/url finds no host in them.
        let authority = text
            .get(url.scheme().len() + 1..)
            .and_then(|rest| rest.strip_prefix("//"))
            .unwrap_or("");
        if authority.is_empty()
            || authority.starts_with(['/', '\\'])
            || url.host_str().is_none_or(str::is_empty)
        {
            return Err(WebhookUrlError::NoHost);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(WebhookUrlError::UserInformation);
        }
        if url.query().is_some() {
            return Err(WebhookUrlError::Query);
        }
        if url.fragment().is_some() {
            return Err(WebhookUrlError::Fragment);
        }
        Ok(Self(url.as_str().trim_end_matches('/').to_owned()))
    }

    fn join(&self, path: &str) -> String {
        format!("{}{path}", self.0)
    }
}

impl Default for InstallOptions {
    fn default() -> Self {
        Self {
            namespace: NAME.to_owned(),
            image: format!("ghcr.io/gpu-policy/gpu-policy:{}", env!("CARGO_PKG_VERSION")),
            replicas: 2,
            ca_bundle: None,
            failure_policy: "Fail".to_owned(),
            webhook_url: None,
            kubernetes: KubernetesVersion::default(),
        }
    }
}

pub(crate) fn labels() -> Value {
    json!({"app.kubernetes.io/name": NAME, "app.kubernetes.io/instance": NAME})
}

fn metadata(name: &str, namespace: Option<&str>) -> Value {
    let mut metadata = json!({"name": name, "labels": labels()});
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    metadata
}

/// Every object of the install, in apply order.
pub fn objects(
    options: &InstallOptions,
    config: &Config,
) -> Result<Vec<Value>, serde_saphyr::ser::Error> {
    let ns = options.namespace.as_str();
    let config_yaml = serde_saphyr::to_string(config)?;
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(ns, None)}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(NAME, Some(ns))}),
    ];
    // Before the RBAC they bound.
    objects.extend(guards::webhook_configuration_guard(NAME, &labels(), ns));
    objects.extend(guards::service_account_token_guard(NAME, &labels(), ns));
    objects.push(cluster_role());
    objects.push(binding("ClusterRoleBinding", NAME, None, ns));
    for (namespace, role) in allowlist_roles(config) {
        objects.push(role);
        objects.push(binding("RoleBinding", &format!("{NAME}-allowlist"), Some(&namespace), ns));
    }
    objects.push(certificate_secret(ns));
    objects.push(secret_role(ns));
    objects.push(binding("RoleBinding", NAME, Some(ns), ns));
    // A webhook outside the cluster needs its identity and RBAC, not what
    // runs it in the cluster.
    if options.webhook_url.is_none() {
        objects.extend(in_cluster_server(options, ns, config_yaml));
    }
    objects.push(mutating_configuration(options));
    objects.push(validating_configuration(options));
    Ok(objects)
}

/// What runs the server in the cluster.
fn in_cluster_server(options: &InstallOptions, ns: &str, config_yaml: String) -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(NAME, Some(ns)),
            "data": {"config.yaml": config_yaml},
        }),
        deployment(options),
        json!({
            "apiVersion": "v1", "kind": "Service", "metadata": metadata(NAME, Some(ns)),
            "spec": {
                "selector": labels(),
                "ports": [
                    {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"},
                    {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
                ],
            },
        }),
        json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": metadata(NAME, Some(ns)),
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels()}},
        }),
    ]
}

// Why each rule, here and in `secret_role`: docs/security.md, "What the
// install's ServiceAccounts may do".
fn cluster_role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": metadata(NAME, None),
        "rules": [
            {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
            {"apiGroups": ["node.k8s.io"], "resources": ["runtimeclasses"], "verbs": ["list", "watch"]},
            {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list"]},
            {"apiGroups": ["resource.k8s.io"],
             "resources": ["resourceclaims", "resourceclaimtemplates"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["resource.k8s.io"],
             "resources": ["deviceclasses", "resourceslices"],
             "verbs": ["list", "watch"]},
            {"apiGroups": ["admissionregistration.k8s.io"],
             "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
             "resourceNames": [NAME], "verbs": ["get", "update"]},
        ],
    })
}

/// One Role per namespace of the allowlist, one rule per kind (what each
/// grants and why: docs/security.md's table and docs/policy.md,
/// "Configuration"). A PodTemplate is never watched, so its `namePrefix`
/// entries get no rule (and a namespace without any rule, no Role).
fn allowlist_roles(config: &Config) -> Vec<(String, Value)> {
    config
        .allowlist_namespaces()
        .into_iter()
        .filter_map(|namespace| {
            let mut rules: Vec<Value> = Vec::new();
            for workload in Workload::ALL {
                let entries: Vec<_> = (config.allowlist.iter())
                    .filter(|e| e.namespace == namespace && e.kind == workload.kind())
                    .collect();
                let mut rule = json!({
                    "apiGroups": [workload.group()], "resources": [workload.resource()],
                    "verbs": ["list", "watch"],
                });
                let by_prefix = workload != Workload::PodTemplate
                    && entries.iter().any(|e| e.name_prefix.is_some());
                if !by_prefix {
                    let mut names: Vec<&str> = (entries.iter())
                        .filter(|e| e.name_prefix.is_none())
                        .map(|e| e.name.as_str())
                        .collect();
                    if names.is_empty() {
                        continue;
                    }
                    names.sort_unstable();
                    rule["resourceNames"] = json!(names);
                }
                rules.push(rule);
            }
            if rules.is_empty() {
                return None;
            }
            let role = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": metadata(&format!("{NAME}-allowlist"), Some(namespace)),
                "rules": rules,
            });
            Some((namespace.to_owned(), role))
        })
        .collect()
}

/// Created empty: the server fills it (docs/security.md's table). `Opaque`,
/// so that applying the install again leaves the server's data alone: a
/// `kubernetes.io/tls` Secret would carry empty `tls.crt` and `tls.key`.
fn certificate_secret(namespace: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": metadata(CERT_SECRET, Some(namespace)),
        "type": "Opaque",
    })
}

fn secret_role(namespace: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": metadata(NAME, Some(namespace)),
        "rules": [
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [CERT_SECRET], "verbs": ["get", "update"]},
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [NAME], "verbs": ["get"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": [NAME], "verbs": ["get"]},
        ],
    })
}

fn binding(
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    service_account_namespace: &str,
) -> Value {
    let role_kind = if kind == "ClusterRoleBinding" { "ClusterRole" } else { "Role" };
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
        "metadata": metadata(name, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": service_account_namespace}],
    })
}

/// The server's arguments in the install: config from the ConfigMap,
/// certificate from the server-managed Secret, caBundle kept in sync.
pub fn server_args(namespace: &str) -> Vec<String> {
    [
        "serve",
        "--config",
        &format!("{CONFIG_DIR}/config.yaml"),
        "--certs-dir",
        CERTS_DIR,
        "--cert-secret",
        &format!("{namespace}/{CERT_SECRET}"),
        "--webhook-config",
        NAME,
        "--service-namespace",
        namespace,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

fn deployment(options: &InstallOptions) -> Value {
    let ns = options.namespace.as_str();
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata(NAME, Some(ns)),
        "spec": {
            "replicas": options.replicas,
            "selector": {"matchLabels": labels()},
            "template": {
                "metadata": {"labels": labels()},
                "spec": {
                    "serviceAccountName": NAME,
                    "automountServiceAccountToken": true,
                    "securityContext": {
                        "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "topologySpreadConstraints": [{
                        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": labels()},
                    }],
                    "containers": [{
                        "name": NAME,
                        "image": options.image,
                        "args": server_args(ns),
                        "ports": [
                            {"name": "https", "containerPort": HTTPS_PORT, "protocol": "TCP"},
                            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
                        ],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 10},
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "metrics"}, "periodSeconds": 5},
                        "resources": {
                            "requests": {"cpu": "50m", "memory": "64Mi"},
                            "limits": {"memory": "256Mi"},
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "volumeMounts": [
                            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": true},
                            {"name": "certs", "mountPath": CERTS_DIR},
                        ],
                    }],
                    "volumes": [
                        {"name": "config", "configMap": {"name": NAME}},
                        {"name": "certs", "emptyDir": {}},
                    ],
                },
            },
        },
    })
}

/// Never call the webhook for its own namespace: a broken webhook must not
/// block its own repair.
fn namespace_selector(mode: Option<Mode>, own_namespace: &str) -> Value {
    let mut expressions = vec![json!({
        "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [own_namespace],
    })];
    if let Some(mode) = mode {
        expressions.push(json!({"key": MODE_LABEL, "operator": "In", "values": [mode.as_str()]}));
    }
    json!({"matchExpressions": expressions})
}

fn client_config(options: &InstallOptions, endpoint: Endpoint) -> Value {
    let mut config = match &options.webhook_url {
        Some(url) => json!({"url": url.join(endpoint.path())}),
        None => json!({"service": {
            "name": NAME, "namespace": options.namespace, "path": endpoint.path(), "port": 443,
        }}),
    };
    if let Some(pem) = &options.ca_bundle {
        use base64::Engine as _;
        config["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(pem));
    }
    config
}

fn common(options: &InstallOptions, endpoint: Endpoint, failure_policy: &str) -> Value {
    let prefix = match endpoint {
        Endpoint::Mutate => "mutate",
        Endpoint::Validate(mode) => mode.as_str(),
        Endpoint::Namespace => "namespace",
    };
    json!({
        "name": format!("{prefix}.gpu-policy.io"),
        "clientConfig": client_config(options, endpoint),
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": TIMEOUT_SECONDS,
        "matchPolicy": "Equivalent",
        "failurePolicy": failure_policy,
    })
}

pub(crate) fn pod_rules() -> Vec<Value> {
    vec![
        json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}),
        json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods/ephemeralcontainers"], "scope": "Namespaced"}),
    ]
}

/// Updates of Pods themselves, sent to the webhooks only when
/// [`POD_UPDATE_CONDITION`] holds.
pub(crate) fn pod_update_rule() -> Value {
    json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"], "scope": "Namespaced"})
}

/// Names [`POD_UPDATE_CONDITION`].
pub const POD_UPDATE_CONDITION_NAME: &str = "pod-updates-gpu-policy-governs";

/// Every request but a Pod's update passes; which updates pass, and why,
/// is docs/policy.md, "Why `matchConditions`". Every field is tested with
/// `has` first: an expression that errs would fall to the failure policy.
pub const POD_UPDATE_CONDITION: &str = concat!(
    "request.operation != 'UPDATE' || request.resource.resource != 'pods' || ",
    "(has(request.subResource) && request.subResource != '') || ",
    "!has(object.spec) || !has(oldObject.spec) || ",
    "object.spec.containers.map(c, has(c.image) ? c.image : '') != ",
    "oldObject.spec.containers.map(c, has(c.image) ? c.image : '') || ",
    "object.spec.containers.map(c, has(c.env) ? c.env : []) != ",
    "oldObject.spec.containers.map(c, has(c.env) ? c.env : []) || ",
    "(has(object.spec.initContainers) ? object.spec.initContainers : [])",
    ".map(c, has(c.image) ? c.image : '') != ",
    "(has(oldObject.spec.initContainers) ? oldObject.spec.initContainers : [])",
    ".map(c, has(c.image) ? c.image : '') || ",
    "(has(object.spec.initContainers) ? object.spec.initContainers : [])",
    ".map(c, has(c.env) ? c.env : []) != ",
    "(has(oldObject.spec.initContainers) ? oldObject.spec.initContainers : [])",
    ".map(c, has(c.env) ? c.env : []) || ",
    "(has(object.spec.runtimeClassName) ? object.spec.runtimeClassName : '') != ",
    "(has(oldObject.spec.runtimeClassName) ? oldObject.spec.runtimeClassName : '') || ",
    "(has(object.spec.affinity) ? object.spec.affinity : {}) != ",
    "(has(oldObject.spec.affinity) ? oldObject.spec.affinity : {}) || ",
    "(has(object.spec.tolerations) ? object.spec.tolerations : []) != ",
    "(has(oldObject.spec.tolerations) ? oldObject.spec.tolerations : []) || ",
    "(has(object.metadata.annotations) ? object.metadata.annotations : {})",
    ".exists(k, k.startsWith('gpu-policy.io/') && !(has(oldObject.metadata.annotations) ",
    "&& k in oldObject.metadata.annotations ",
    "&& oldObject.metadata.annotations[k] == object.metadata.annotations[k])) || ",
    "(has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {})",
    ".exists(k, k.startsWith('gpu-policy.io/') && !(has(object.metadata.annotations) ",
    "&& k in object.metadata.annotations))",
);

pub(crate) fn pod_match_conditions() -> Value {
    json!([{"name": POD_UPDATE_CONDITION_NAME, "expression": POD_UPDATE_CONDITION}])
}

pub(crate) fn workload_rules() -> Vec<Value> {
    let mut groups: Vec<&str> = Workload::ALL.iter().map(|w| w.group()).collect();
    groups.sort_unstable();
    groups.dedup();
    groups
        .into_iter()
        .map(|group| {
            let resources: Vec<&str> =
                Workload::ALL.iter().filter(|w| w.group() == group).map(|w| w.resource()).collect();
            json!({"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                   "resources": resources, "scope": "Namespaced"})
        })
        .collect()
}

/// ResourceClaims and ResourceClaimTemplates, validated on CREATE and
/// UPDATE, in the one `resource.k8s.io` version `release` registers for:
/// with `matchPolicy: Equivalent` the API server sends the other versions
/// it serves converted to it.
pub(crate) fn claim_rules(release: KubernetesVersion) -> Value {
    let resources: Vec<&str> = ClaimKind::ALL.iter().map(|k| k.resource()).collect();
    json!({"apiGroups": [CLAIM_GROUP], "apiVersions": [release.dra().version],
           "operations": ["CREATE", "UPDATE"], "resources": resources, "scope": "Namespaced"})
}

/// ResourceClaims on CREATE, mutated: a claim the resource claim
/// controller makes for a pod gets gpu-policy's selector. Only the claim's
/// creation (its spec is immutable after it); one version, as for
/// validation.
fn claim_mutation_rule(release: KubernetesVersion) -> Value {
    json!({"apiGroups": [CLAIM_GROUP], "apiVersions": [release.dra().version], "operations": ["CREATE"],
           "resources": [ClaimKind::Claim.resource()], "scope": "Namespaced"})
}

fn mutating_configuration(options: &InstallOptions) -> Value {
    let mut webhook = common(options, Endpoint::Mutate, &options.failure_policy);
    let mut rules = pod_rules();
    rules.push(pod_update_rule());
    rules.push(claim_mutation_rule(options.kubernetes));
    webhook["rules"] = json!(rules);
    webhook["matchConditions"] = pod_match_conditions();
    webhook["namespaceSelector"] = namespace_selector(Some(Mode::Enforce), &options.namespace);
    // Later webhooks (a sidecar injector) may add containers: run again.
    webhook["reinvocationPolicy"] = json!("IfNeeded");
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": metadata(NAME, None),
        "webhooks": [webhook],
    })
}

fn validating_configuration(options: &InstallOptions) -> Value {
    let mut webhooks = Vec::new();
    for mode in Mode::ALL {
        let failure_policy = match mode {
            Mode::Enforce => options.failure_policy.as_str(),
            // Warnings and audit annotations are not worth an outage.
            Mode::Warn | Mode::Audit => "Ignore",
        };
        let mut webhook = common(options, Endpoint::Validate(mode), failure_policy);
        let mut rules = pod_rules();
        rules.push(pod_update_rule());
        rules.extend(workload_rules());
        rules.push(claim_rules(options.kubernetes));
        webhook["rules"] = json!(rules);
        webhook["matchConditions"] = pod_match_conditions();
        webhook["namespaceSelector"] = namespace_selector(Some(mode), &options.namespace);
        webhooks.push(webhook);
    }
    let mut guard = common(options, Endpoint::Namespace, &options.failure_policy);
    guard["rules"] = json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                             "resources": ["namespaces"], "scope": "Cluster"}]);
    // The label itself: the guard sees it added, changed and removed.
    guard["objectSelector"] =
        json!({"matchExpressions": [{"key": MODE_LABEL, "operator": "Exists"}]});
    guard["namespaceSelector"] = namespace_selector(None, &options.namespace);
    webhooks.push(guard);
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": metadata(NAME, None),
        "webhooks": webhooks,
    })
}

#[cfg(test)]
mod tests;
