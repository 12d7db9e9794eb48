//! The pod a ResourceClaim is made for, made ready for the claim rules
//! ([`ClaimOwner`]): its view, its claims resolved ([`OwnerClaims`]) as they
//! would be had the pod been created after its templates.

use crate::document::Json;

use super::cluster::{ClusterFacts, NodeFacts};
use super::dra::allocation::MadeFor;
use super::dra::claims::ClaimSummary;
use super::dra::owner::{OwnerClaims, OwnerPod, PodClaimEntry, pod_claim_origins};
use super::dra::{ClaimFacts, resolution};
use super::images::ImageFacts;
use super::pod::{ClaimSource, PodView, Shape};
use super::rules::rule::{ClaimOwner, OwnerInput, RuleInput};
use super::subject::Scope;
use crate::settings::{NamespaceSettings, Settings};

/// A whole pod: the claim rules read the pod as created.
static WHOLE: Scope = Scope::Whole;

/// What the evaluator has for the claim rules.
pub(super) struct Context<'a> {
    pub settings: &'a Settings,
    pub namespace: &'a NamespaceSettings,
    pub cluster: Option<&'a dyn ClusterFacts>,
    pub images: Option<&'a dyn ImageFacts>,
    pub cache: Option<&'a dyn ClaimFacts>,
    /// The claim's namespace.
    pub namespace_name: &'a str,
}

/// The owner pod, read and resolved; what [`ClaimOwner`] borrows.
pub(super) enum PreparedOwner<'a> {
    Read(Box<ReadOwner<'a>>),
    NotFound,
    Unreadable(String),
}

/// The owner pod read: its view, its claims and where they resolve.
pub(super) struct ReadOwner<'a> {
    view: PodView<'a>,
    entries: Result<Vec<PodClaimEntry<'a>>, usize>,
    claims: OwnerClaims<'a>,
}

impl<'a> PreparedOwner<'a> {
    /// `owner`, read for the claim made for `made_for`, whose requests are `summary`.
    pub fn new(
        owner: &'a OwnerPod<'a>,
        made_for: &'a MadeFor,
        summary: &ClaimSummary,
        context: &Context<'a>,
        is_gpu_class: &dyn Fn(&str) -> bool,
    ) -> Self {
        let read = match owner {
            OwnerPod::NotFound => return PreparedOwner::NotFound,
            OwnerPod::Unreadable(why) => return PreparedOwner::Unreadable(why.clone()),
            OwnerPod::Read(read) => read,
        };
        let uid = read
            .pod
            .get("metadata")
            .and_then(|metadata| metadata.get("uid"))
            .and_then(Json::as_str);
        if uid != Some(made_for.pod_uid.as_str()) {
            return PreparedOwner::NotFound;
        }
        let mut view = match PodView::parse(read.pod, Shape::Pod, context.settings) {
            Ok(Some(view)) => view,
            Ok(None) => return PreparedOwner::Unreadable("it is not a pod".to_owned()),
            Err(error) => return PreparedOwner::Unreadable(format!("{error}")),
        };
        let pod_claim = made_for.pod_claim.as_deref();
        let entries = pod_claim_origins(&view.resource_claims, read.generated, pod_claim);
        let template =
            view.resource_claims.iter().find(|claim| Some(claim.name) == pod_claim).and_then(
                |claim| match claim.source {
                    ClaimSource::Template(template) => Some(template),
                    _ => None,
                },
            );
        let listed: &[PodClaimEntry<'a>] = entries.as_deref().unwrap_or_default();
        let claims = OwnerClaims::new(
            context.namespace_name,
            listed,
            read.claims,
            template.map(|template| (template, summary.clone())),
            context.cache,
            is_gpu_class,
        );
        // Unresolved claims are the pod's own admission's to warn of.
        let _ = resolution::resolve(&mut view, Some(&claims), context.namespace_name);
        PreparedOwner::Read(Box::new(ReadOwner { view, entries, claims }))
    }

    /// The owner as the claim rules read it.
    pub fn input<'s>(&'s self, context: &Context<'s>) -> ClaimOwner<'s> {
        match self {
            PreparedOwner::NotFound => ClaimOwner::NotFound,
            PreparedOwner::Unreadable(why) => ClaimOwner::Unreadable(why),
            PreparedOwner::Read(read) => ClaimOwner::Read(OwnerInput {
                pod: RuleInput {
                    view: &read.view,
                    settings: context.settings,
                    namespace: context.namespace,
                    scope: &WHOLE,
                    old: None,
                    allowlisted: None,
                    cluster: context.cluster,
                    nodes: context.cluster.map(|c| -> &dyn NodeFacts { c }),
                    images: context.images,
                    claims: Some(&read.claims),
                    namespace_name: context.namespace_name,
                },
                entries: &read.entries,
                claims: &read.claims,
            }),
        }
    }
}
