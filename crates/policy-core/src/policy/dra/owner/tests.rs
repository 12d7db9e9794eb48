use serde_json::json;

use super::*;
use crate::policy::dra::claims::{DraCount, read_spec};
use crate::policy::dra::tables::ClaimTables;
use crate::policy::testing::leaked;
use crate::settings::Settings;

fn entry(name: &str, source: ClaimSource<'static>) -> PodClaim<'static> {
    PodClaim { name: leaked(&json!(name)).as_str().unwrap_or_default(), source }
}

fn generated(pod_claim: &str, claim: Option<&str>) -> GeneratedClaim {
    GeneratedClaim { pod_claim: pod_claim.to_owned(), claim: claim.map(str::to_owned) }
}

/// A claim spec of one request of `count` GPUs.
fn gpus(count: u64) -> ClaimSpec {
    let spec = json!({"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}]}});
    read_spec(leaked(&spec), "spec").unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn each_entry_counts_from_where_it_gets_its_devices() {
    let claims = [
        entry("a", ClaimSource::Template("eight")),
        entry("b", ClaimSource::Template("eight")),
        entry("c", ClaimSource::Template("one")),
        entry("d", ClaimSource::Claim("shared")),
        entry("a", ClaimSource::Claim("ignored")),
        entry("e", ClaimSource::Template("skipped")),
        entry("f", ClaimSource::Missing),
    ];
    let statuses = [
        generated("b", Some("pod-b-x1")),
        generated("e", None),
        generated("zz", Some("unrelated")),
    ];
    let origins = pod_claim_origins(&claims, &statuses, Some("a"));
    assert_eq!(
        origins,
        Ok(vec![
            PodClaimEntry { name: "a", origin: ClaimOrigin::UnderReview },
            PodClaimEntry {
                name: "b",
                origin: ClaimOrigin::Template { template: "eight", generated: Some("pod-b-x1") }
            },
            PodClaimEntry {
                name: "c",
                origin: ClaimOrigin::Template { template: "one", generated: None }
            },
            PodClaimEntry { name: "d", origin: ClaimOrigin::Claim("shared") },
            PodClaimEntry { name: "e", origin: ClaimOrigin::Nothing },
            PodClaimEntry { name: "f", origin: ClaimOrigin::Nothing },
        ])
    );
    // A pod claim named by a claim entry is that claim, whoever says it is
    // under review.
    let origins = pod_claim_origins(&claims, &statuses, Some("d"));
    let d = origins.unwrap_or_default();
    assert_eq!(d[3].origin, ClaimOrigin::Claim("shared"));
}

#[test]
fn past_the_cap_the_entries_are_counted_not_read() {
    let names: Vec<String> = (0..=MAX_POD_CLAIMS).map(|i| format!("c{i}")).collect();
    let claims: Vec<PodClaim<'_>> =
        names.iter().map(|name| PodClaim { name, source: ClaimSource::Template("t") }).collect();
    assert_eq!(pod_claim_origins(&claims, &[], None), Err(MAX_POD_CLAIMS + 1));
    let at_cap = &claims[..MAX_POD_CLAIMS];
    assert_eq!(pod_claim_origins(at_cap, &[], None).map(|e| e.len()), Ok(MAX_POD_CLAIMS));
    // The same name twice is one entry.
    let twice: Vec<PodClaim<'_>> = at_cap.iter().chain(at_cap).copied().collect();
    assert_eq!(pod_claim_origins(&twice, &[], None).map(|e| e.len()), Ok(MAX_POD_CLAIMS));
}

#[test]
fn only_what_the_caches_cannot_answer_is_read_each_once() {
    let claims = [
        entry("a", ClaimSource::Template("known-template")),
        entry("b", ClaimSource::Template("new-template")),
        entry("c", ClaimSource::Template("new-template")),
        entry("d", ClaimSource::Template("gone-template")),
        entry("e", ClaimSource::Template("new-template")),
        entry("f", ClaimSource::Claim("known-claim")),
        entry("g", ClaimSource::Claim("new-claim")),
        entry("h", ClaimSource::Claim("new-claim")),
        entry("under", ClaimSource::Template("under-template")),
    ];
    let statuses = [generated("d", Some("pod-d-x1")), generated("e", Some("known-generated"))];
    let entries = pod_claim_origins(&claims, &statuses, Some("under")).unwrap_or_default();
    let known = |kind: ClaimKind, name: &str| match kind {
        ClaimKind::Template => name == "known-template",
        ClaimKind::Claim => name == "known-claim" || name == "known-generated",
    };
    assert_eq!(
        to_read(&entries, known),
        vec![
            (ClaimKind::Template, "new-template"),
            (ClaimKind::Claim, "pod-d-x1"),
            (ClaimKind::Claim, "new-claim"),
        ]
    );
}

#[test]
fn the_claim_under_review_stands_for_its_template_and_reads_come_before_the_caches() {
    let settings = Settings::default();
    let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "cached", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]}}}});
    let stale = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "pod-b-x1", "namespace": "ml"},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}]}}});
    let cache = ClaimTables::collect(&[&template, &stale], "ml", &settings);
    let claims = [
        entry("a", ClaimSource::Template("under-template")),
        entry("b", ClaimSource::Template("gone")),
    ];
    let statuses = [generated("b", Some("pod-b-x1"))];
    let entries = pod_claim_origins(&claims, &statuses, Some("a")).unwrap_or_default();
    let read = [
        ReadClaim {
            kind: ClaimKind::Template,
            name: "read-template".to_owned(),
            read: Fetched::Found(gpus(4)),
        },
        ReadClaim { kind: ClaimKind::Claim, name: "missing".to_owned(), read: Fetched::NotFound },
        ReadClaim {
            kind: ClaimKind::Claim,
            name: "slow".to_owned(),
            read: Fetched::Unread("no answer within 2s".to_owned()),
        },
    ];
    let under_review = gpus(8).summary(&|c| settings.is_gpu_device_class(c));
    let is_gpu = |class: &str| settings.is_gpu_device_class(class);
    let owner = OwnerClaims::new(
        "ml",
        &entries,
        &read,
        Some(("under-template", under_review.clone())),
        Some(&cache),
        &is_gpu,
    );
    let total = |resolved: Resolved| match resolved {
        Resolved::Known(summary) => summary.gpu_total(),
        other => panic!("not known: {other:?}"),
    };
    assert_eq!(
        owner.resource_claim_template("ml", "under-template"),
        Resolved::Known(under_review)
    );
    assert_eq!(
        total(owner.resource_claim_template("ml", "read-template")),
        Some(DraCount::Exactly(4))
    );
    assert_eq!(total(owner.resource_claim_template("ml", "cached")), Some(DraCount::Exactly(2)));
    // A template gone since its claim was made answers as that claim.
    assert_eq!(total(owner.resource_claim_template("ml", "gone")), Some(DraCount::Exactly(1)));
    assert_eq!(owner.resource_claim("ml", "missing"), Resolved::Unknown);
    assert_eq!(
        owner.resource_claim("ml", "slow"),
        Resolved::Unreadable("ResourceClaim \"slow\" not read: no answer within 2s".to_owned())
    );
    // Another namespace is none of the pod's.
    assert_eq!(owner.resource_claim_template("other", "cached"), Resolved::Unknown);
}
