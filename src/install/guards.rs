//! The ValidatingAdmissionPolicies that hold the install's ServiceAccounts
//! to what their RBAC is for, where RBAC cannot say it: docs/security.md,
//! "What RBAC cannot say: two guard policies". The Helm chart renders the
//! same objects (`templates/guard-policies.yaml`);
//! `tests/chart/test_chart.py` holds the two to each other.

use serde_json::{Value, json};

/// What the API server itself changes in `metadata` on an update.
const SERVER_SET_METADATA: &str = "['resourceVersion', 'generation', 'managedFields']";

/// Every other member of `metadata` as it was: labels, annotations, owner
/// references (an owner that goes away takes the object with it),
/// finalizers. Iterated as maps (`dyn`), so a member this list does not
/// name is held too.
const METADATA_KEPT: &str = concat!(
    "dyn(object.metadata).all(k, k in variables.serverSetMetadata || ",
    "(k in dyn(oldObject.metadata) && dyn(object.metadata)[k] == dyn(oldObject.metadata)[k])) && ",
    "dyn(oldObject.metadata).all(k, k in variables.serverSetMetadata || k in dyn(object.metadata))"
);

/// The same entries in the same order, each member of each entry as it
/// was but `clientConfig`, and each member of `clientConfig` as it was but
/// `caBundle`. Entries are iterated as maps (`dyn`): a field a later
/// Kubernetes adds is held as well.
const WEBHOOKS_KEPT: &str = concat!(
    "variables.newWebhooks.map(w, w.name) == variables.oldWebhooks.map(w, w.name) && ",
    "variables.newWebhooks.all(w, variables.oldWebhooks.exists(o, o.name == w.name && ",
    "dyn(w).all(k, k == 'clientConfig' || (k in dyn(o) && dyn(w)[k] == dyn(o)[k])) && ",
    "dyn(o).all(k, k == 'clientConfig' || k in dyn(w)) && ",
    "dyn(w.clientConfig).all(k, k == 'caBundle' || ",
    "(k in dyn(o.clientConfig) && dyn(w.clientConfig)[k] == dyn(o.clientConfig)[k])) && ",
    "dyn(o.clientConfig).all(k, k == 'caBundle' || k in dyn(w.clientConfig))))"
);

/// The annotation of a `kubernetes.io/service-account-token` Secret that
/// names the ServiceAccount (of the Secret's namespace) whose token the
/// token controller writes into it.
const NAMED: &str = concat!(
    "has(object.metadata.annotations) && ",
    "'kubernetes.io/service-account.name' in object.metadata.annotations ? ",
    "object.metadata.annotations['kubernetes.io/service-account.name'] : ''"
);

/// The same of the Secret before an update (only an update has one).
const NAMED_BEFORE: &str = concat!(
    "request.operation == 'UPDATE' && has(oldObject.metadata.annotations) && ",
    "'kubernetes.io/service-account.name' in oldObject.metadata.annotations ? ",
    "oldObject.metadata.annotations['kubernetes.io/service-account.name'] : ''"
);

fn binding(name: &str, labels: &Value) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    })
}

/// The objects carry `labels`, the install's; requests of anyone but the
/// ServiceAccount `namespace/install` are not matched.
pub(crate) fn webhook_configuration_guard(
    install: &str,
    labels: &Value,
    namespace: &str,
) -> [Value; 2] {
    let (name, service_account, configurations) =
        (format!("{install}-webhook-configurations"), install, install);
    let user = format!("system:serviceaccount:{namespace}:{service_account}");
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["admissionregistration.k8s.io"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE", "DELETE"],
                "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
            }]},
            "matchConditions": [{
                "name": "webhook-service-account",
                "expression": format!("request.userInfo.username == '{user}'"),
            }],
            "variables": [
                {"name": "serverSetMetadata", "expression": SERVER_SET_METADATA},
                {"name": "metadataKept", "expression": METADATA_KEPT},
                {"name": "newWebhooks", "expression": "has(object.webhooks) ? object.webhooks : []"},
                {"name": "oldWebhooks", "expression": "has(oldObject.webhooks) ? oldObject.webhooks : []"},
                {"name": "webhooksKept", "expression": WEBHOOKS_KEPT},
            ],
            "validations": [
                {
                    "expression": format!(
                        "request.operation == 'UPDATE' && request.name == '{configurations}'"
                    ),
                    "message": format!(
                        "the ServiceAccount {namespace}/{service_account} may update the webhook \
                         configurations {configurations} only, and create or delete none"
                    ),
                },
                {
                    "expression": "request.operation != 'UPDATE' || \
                                   (variables.metadataKept && variables.webhooksKept)",
                    "message": format!(
                        "the ServiceAccount {namespace}/{service_account} may change only \
                         clientConfig.caBundle of the webhook configurations {configurations}; \
                         apply the install to change anything else"
                    ),
                },
            ],
        },
    });
    [policy, binding(&name, labels)]
}

/// The objects carry `labels`, the install's; `install` names the
/// ServiceAccount whose token no Secret in `namespace` may carry.
pub(crate) fn service_account_token_guard(
    install: &str,
    labels: &Value,
    namespace: &str,
) -> [Value; 2] {
    let name = format!("{install}-service-account-tokens");
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE"], "resources": ["secrets"],
                }],
            },
            "matchConditions": [{
                "name": "service-account-token",
                "expression": "object.type == 'kubernetes.io/service-account-token'",
            }],
            "variables": [
                // A Kubernetes name holds no quote.
                {"name": "serviceAccounts", "expression": format!("['{install}']")},
                {"name": "named", "expression": NAMED},
                {"name": "namedBefore", "expression": NAMED_BEFORE},
            ],
            "validations": [{
                "expression": "!(variables.named in variables.serviceAccounts) || \
                               variables.named == variables.namedBefore",
                "messageExpression": format!(
                    "'no Secret of type kubernetes.io/service-account-token may name the \
                     ServiceAccount {namespace}/' + variables.named + ' of {install}: its token \
                     would never expire; use kubectl create token for a short-lived one'"
                ),
            }],
        },
    });
    [policy, binding(&name, labels)]
}
