//! gpu-policy's own install: `allowlist-target-missing`,
//! `mode-label-invalid`, `no-namespace-opted-in`, `ca-bundle-mismatch`,
//! `webhook-not-ready` (docs/operations.md, "The findings"). The allowlist
//! entries shipped by default are guesses at where NVIDIA's DaemonSets run,
//! and are not judged.

use std::str::FromStr;

use crate::admission::Mode;
use crate::doctor::finding::{Finding, FindingId, Severity, Subject, count, named};
use crate::doctor::inventory::{Component, Inventory, Seen};
use crate::settings::MODE_LABEL;

pub fn check(inventory: &Inventory) -> Vec<Finding> {
    let mut findings = Vec::new();
    findings.extend(allowlist(inventory));
    findings.extend(namespaces(inventory));
    findings.extend(ca_bundles(inventory));
    findings.extend(replicas(inventory));
    findings
}

fn allowlist(inventory: &Inventory) -> Vec<Finding> {
    let missing: Vec<_> = inventory
        .install
        .allowlist
        .iter()
        .filter(|target| !target.default_entry && target.exists == Seen::Complete(false))
        .collect();
    if missing.is_empty() {
        return Vec::new();
    }
    let mut evidence: Vec<String> =
        missing.iter().map(|target| format!("no DaemonSet for entry {}", target.entry)).collect();
    // Components under names no entry gives: their pods get the rules.
    for ds in inventory.daemon_sets.items().into_iter().flatten() {
        let named_by_entry = inventory.install.allowlist.iter().any(|target| {
            target.namespace == ds.namespace
                && match target.by_prefix {
                    true => ds.name.starts_with(&target.name),
                    false => ds.name == target.name,
                }
        });
        if !named_by_entry && ds.component == Component::DevicePlugin {
            evidence.push(format!(
                "{} runs as DaemonSet {}, which no entry names",
                ds.component.title(),
                ds.key()
            ));
        }
    }
    vec![Finding::new(
        FindingId::AllowlistTargetMissing,
        Severity::Warning,
        format!(
            "{} of gpu-policy's allowlist {} a DaemonSet that does not exist",
            count(missing.len(), "entry", "entries"),
            if missing.len() == 1 { "names" } else { "name" }
        ),
        missing
            .iter()
            .map(|target| {
                Subject::namespaced("apps/v1", "DaemonSet", (&target.namespace, &target.name))
            })
            .collect(),
        evidence,
        "name the DaemonSets that run (allowlist: namespace, kind DaemonSet, name) in gpu-policy's config, or remove the entries".to_owned(),
    )]
}

fn namespaces(inventory: &Inventory) -> Vec<Finding> {
    let Some(namespaces) = inventory.namespaces.items() else {
        return Vec::new();
    };
    let mut findings = Vec::new();
    let invalid: Vec<_> =
        namespaces.iter().filter(|ns| Mode::from_str(&ns.mode).is_err()).collect();
    if !invalid.is_empty() {
        findings.push(Finding::new(
            FindingId::ModeLabelInvalid,
            Severity::Warning,
            format!(
                "{} a {MODE_LABEL} label that is no mode: gpu-policy does not act there",
                count(invalid.len(), "namespace has", "namespaces have")
            ),
            invalid.iter().map(|ns| Subject::cluster("v1", "Namespace", &ns.namespace)).collect(),
            invalid
                .iter()
                .map(|ns| format!("{}: {MODE_LABEL}={}", ns.namespace, ns.mode))
                .collect(),
            format!(
                "kubectl label namespace NS --overwrite {MODE_LABEL}=enforce (or warn, or audit)"
            ),
        ));
    }
    let installed = inventory.install.webhooks.items().is_some_and(|hooks| !hooks.is_empty());
    let opted_in = namespaces.len().saturating_sub(invalid.len());
    if installed && opted_in == 0 && matches!(inventory.namespaces, Seen::Complete(_)) {
        findings.push(Finding::new(
            FindingId::NoNamespaceOptedIn,
            Severity::Warning,
            "no namespace is opted in: gpu-policy is installed but checks no pod".to_owned(),
            Vec::new(),
            vec![format!("no namespace has the label {MODE_LABEL} with a mode")],
            format!("kubectl label namespace NS {MODE_LABEL}=enforce (or warn, or audit)"),
        ));
    }
    findings
}

fn ca_bundles(inventory: &Inventory) -> Vec<Finding> {
    let Some(webhooks) = inventory.install.webhooks.items() else {
        return Vec::new();
    };
    let untrusted: Vec<_> = webhooks
        .iter()
        .filter_map(|hook| match &hook.trusts_serving_certificate {
            Some(Err(why)) => Some((hook, why)),
            _ => None,
        })
        .collect();
    if untrusted.is_empty() {
        return Vec::new();
    }
    let mut configurations: Vec<Subject> = untrusted
        .iter()
        .map(|(hook, _)| {
            Subject::cluster(
                "admissionregistration.k8s.io/v1",
                hook.configuration.as_str(),
                crate::install::NAME,
            )
        })
        .collect();
    configurations.dedup();
    let names: Vec<String> = untrusted.iter().map(|(hook, _)| hook.name.clone()).collect();
    vec![Finding::new(
        FindingId::CaBundleMismatch,
        Severity::Error,
        format!(
            "the caBundle of {} does not trust the serving certificate: the API server cannot call {}, so admissions fail (failurePolicy Fail) or skip the policy (Ignore)",
            count(untrusted.len(), "webhook", "webhooks"),
            named(&names)
        ),
        configurations,
        untrusted
            .iter()
            .map(|(hook, why)| format!("{} {}: {why}", hook.configuration.as_str(), hook.name))
            .collect(),
        "run the server with --cert-secret and --webhook-config (it keeps caBundle equal to its CA), or with cert-manager check the cainjector and the cert-manager.io/inject-ca-from annotation".to_owned(),
    )]
}

fn replicas(inventory: &Inventory) -> Vec<Finding> {
    let install = &inventory.install;
    let Some(service) = install
        .webhooks
        .items()
        .and_then(|hooks| hooks.iter().find_map(|hook| hook.service.clone()))
    else {
        // Called at a URL: the server runs outside the cluster.
        return Vec::new();
    };
    let (summary, evidence, severity, subject) = match &install.deployment {
        Seen::Complete(Some(deployment)) if deployment.ready >= deployment.replicas => {
            return Vec::new();
        }
        Seen::Complete(Some(deployment)) => (
            format!(
                "gpu-policy's Deployment {}/{} has {} of {} replicas ready",
                deployment.namespace, deployment.name, deployment.ready, deployment.replicas
            ),
            vec![format!(
                "spec.replicas {}, status.readyReplicas {}",
                deployment.replicas, deployment.ready
            )],
            if deployment.ready == 0 { Severity::Error } else { Severity::Warning },
            Subject::namespaced("apps/v1", "Deployment", (&deployment.namespace, &deployment.name)),
        ),
        Seen::Complete(None) => (
            format!(
                "the webhooks call Service {service}, but gpu-policy's Deployment does not exist in {}",
                install.namespace
            ),
            vec![format!("no Deployment {}/{}", install.namespace, crate::install::NAME)],
            Severity::Error,
            Subject::namespaced(
                "apps/v1",
                "Deployment",
                (&install.namespace, crate::install::NAME),
            ),
        ),
        _ => return Vec::new(),
    };
    vec![Finding::new(
        FindingId::WebhookNotReady,
        severity,
        format!("{summary}: admissions wait for the replicas that answer, or fail"),
        vec![subject],
        evidence,
        format!(
            "kubectl -n {} describe deployment {} and read the log of its pods",
            install.namespace,
            crate::install::NAME
        ),
    )]
}
