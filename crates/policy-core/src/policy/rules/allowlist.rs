//! R5 `allowlist`: workloads that must see every card without requesting one
//! (docs/policy.md, "R5 allowlist").
//!
//! Reads: of pods, `metadata.namespace` (or the request's) and the controller
//! `metadata.ownerReferences` entry (`kind`, `name`, `uid`); of workload templates, the
//! workload's namespace, `kind` and `metadata.name`.
//!
//! Allows: an exemption when namespace, kind and name equal a `{namespace, kind, name}` entry, or
//! namespace and kind equal and the name starts with a `{namespace, kind, namePrefix}` entry's
//! prefix (generated suffixes). Labels never allowlist (anyone can set them), nor does the name in
//! another namespace. Allowlisted pods skip R1, R6 and R3's reserved-class check; R2 still applies.

pub use super::rule::{AllowlistInput, Exemption};
use super::rule::{ApiServer, Check, Coverage, Entry, Rule, Severity};
use crate::policy::cluster::ClusterFacts;
use crate::policy::message::{Notice, NoticeKind};
use crate::policy::subject::{Identity, Owner};
use crate::settings::AllowlistEntry;

/// No policy of its own: the policies of the rules it exempts from test
/// the allowlist in their CEL ([`super::cel_text::allowlisted`]).
pub const RULE: Rule = Rule {
    name: "allowlist",
    severity: Severity::High,
    entries: &[Entry {
        check: Check::Allowlist(exempt),
        api_server: ApiServer::InOtherPolicies(Coverage {
            enforced: "by the controller owner reference's kind and name, and the workload's own \
        kind and name (or `namePrefix`), in the entry's namespace: in the policies of R1, the \
        reserved class of R3, and R6",
            webhook_only: "owner UID verification: the policy cannot read the owner, so anyone who \
        can create pods in an allowlisted namespace can write an owner reference to the \
        exporter and get its exemption. Keep allowlisted namespaces (by default \
        `kube-system`) closed to ordinary users, or run the webhook beside the policies",
        }),
    }],
};

/// The allowlist stage: the entry that exempts the object. With a cluster to read, a pod's owner
/// must be the one the entry names ([`verify_owner`]).
pub fn exempt<'a>(input: &AllowlistInput<'a>) -> Exemption<'a> {
    let entry = matching_entry(input.identity, input.namespace, &input.settings.config().allowlist);
    if let (Some(entry), Identity::Pod { owner: Some(owner) }, Some(cluster)) =
        (entry, input.identity, input.cluster)
        && let Err(notice) = verify_owner(entry, owner, cluster)
    {
        return Exemption { entry: None, notices: vec![notice] };
    }
    Exemption { entry, notices: Vec::new() }
}

/// The configured entry that exempts this object, if any.
pub fn matching_entry<'e>(
    identity: Identity<'_>,
    namespace: &str,
    entries: &'e [AllowlistEntry],
) -> Option<&'e AllowlistEntry> {
    let (kind, name) = match identity {
        Identity::Pod { owner: Some(owner) } => (owner.kind, owner.name),
        Identity::Pod { owner: None } => return None,
        Identity::Workload { kind, name } => (kind, name),
    };
    entries.iter().find(|entry| entry.matches(namespace, kind, name))
}

/// With a cluster to ask: the owner a pod names must exist in its namespace with the referenced
/// UID, or anyone could reference the exporter as owner and get its exemption. `Err` says why not.
pub fn verify_owner(
    entry: &AllowlistEntry,
    owner: Owner<'_>,
    cluster: &dyn ClusterFacts,
) -> Result<(), Notice> {
    // The owner's own name: for a name entry it is the entry's name, for a
    // namePrefix entry the workload that matched it.
    let existing = cluster.workload_uid(&entry.namespace, &entry.kind, owner.name);
    let named = format!("{}/{}/{}", entry.namespace, entry.kind, owner.name);
    let reason = match (existing.as_deref(), owner.uid) {
        (Some(uid), Some(referenced)) if uid == referenced => return Ok(()),
        (None, _) => format!("owner {named} does not exist"),
        _ => format!("owner UID is not that of {named}"),
    };
    Err(Notice::new(NoticeKind::UnverifiedOwner, format!("allowlist: {reason}; no exemption")))
}

#[cfg(test)]
mod tests;
