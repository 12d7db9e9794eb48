//! `manifests --admission-policies --coverage`: what the admission policies
//! cover, rule by rule, from the registry (`policy::rules::entries`) and its
//! [`ApiServer`] reasons; [`compatibility_table`]: what the install uses of
//! each supported release. Tests hold docs/policy.md's coverage table and
//! docs/compatibility.md's to their output on the default settings.

use super::{GeneratedPolicy, all_generated, generated};
use crate::kubernetes_version::KubernetesVersion;
use crate::policy::RuleId;
use crate::policy::rules::{ApiServer, Check, Entry, entries};
use crate::settings::Settings;

/// The markdown table: one row per registry entry, by rule number, for
/// the policies rendered for `release`.
pub fn coverage_table(settings: &Settings, release: KubernetesVersion) -> String {
    let mut out = String::from(
        "| rule | admission policies | enforced by the policies | webhook only |\n\
         | --- | --- | --- | --- |\n",
    );
    for (rule, entry) in entries() {
        let coverage = entry.api_server.coverage();
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            rule_name(rule, entry),
            policies(rule, entry, settings, release),
            coverage.enforced,
            coverage.webhook_only
        ));
    }
    out
}

/// `R2 bounded-requests`, with what the entry runs on when the rule has
/// more than one entry (`(claims)`).
fn rule_name(rule: RuleId, entry: &Entry) -> String {
    let number = rule as usize + 1;
    let name = format!("R{number} {rule}");
    match (rule.rule().entries.len(), entry.check) {
        (1, _) => name,
        (_, Check::Claim(_)) => format!("{name} (claims)"),
        (_, Check::Pod(_)) => format!("{name} (pods)"),
        (_, Check::Allowlist(_)) => name,
    }
}

/// The policies generated for the entry, or why there are none.
fn policies(
    rule: RuleId,
    entry: &Entry,
    settings: &Settings,
    release: KubernetesVersion,
) -> String {
    let policies = generated(rule, entry, settings, release);
    let named = |list: &[GeneratedPolicy], kind: &str| -> Vec<String> {
        list.iter().map(|policy| format!("`{}` ({kind})", policy.name)).collect()
    };
    let mut all = named(&policies.validating, "validating");
    all.extend(named(&policies.mutating, "mutating"));
    match entry.api_server {
        ApiServer::InOtherPolicies(_) => "none of its own: in the others' CEL".to_owned(),
        ApiServer::WebhookOnly { .. } => "none".to_owned(),
        _ => {
            all.extend(policies.left_out.iter().map(|left_out| {
                format!(
                    "`{}` left out on Kubernetes {release} ({})",
                    left_out.policy, left_out.reason
                )
            }));
            match all.is_empty() {
                // The settings leave it nothing to do (R8 without `gpuTolerations`).
                true => "none with these settings".to_owned(),
                false => all.join(", "),
            }
        }
    }
}

/// The markdown table of what the install uses of each supported release
/// (`kubernetes_version`), with the policies the default settings' output
/// leaves out of it.
pub fn compatibility_table(settings: &Settings) -> String {
    let mut out = String::from(
        "| Kubernetes | webhook | ValidatingAdmissionPolicy | MutatingAdmissionPolicy | Dynamic Resource Allocation |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for release in KubernetesVersion::supported() {
        let mutating = match release.mutating_policies() {
            None => "none: the webhook makes the changes".to_owned(),
            Some(api) => {
                let mut cell = format!("`{}`", api.version);
                if api.opt_in {
                    cell.push_str(", when turned on");
                }
                let left_out: Vec<String> = all_generated(settings, release)
                    .left_out
                    .iter()
                    .filter(|l| l.mutating)
                    .map(|l| format!("`{}`", l.policy))
                    .collect();
                if !left_out.is_empty() {
                    cell.push_str(&format!(
                        "; without {} (its CEL needs a later release)",
                        left_out.join(", ")
                    ));
                }
                cell
            }
        };
        let dra = release.dra();
        let mut dra_cell = format!("`resource.k8s.io/{}`", dra.version);
        if dra.opt_in {
            dra_cell.push_str(", when turned on");
        }
        if !dra.first_available {
            dra_cell.push_str("; no `firstAvailable`");
        }
        out.push_str(&format!(
            "| {release} | `v1`, with `matchConditions` | `v1` | {mutating} | {dra_cell} |\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests;
