//! Pods whose containers use [`super::CountedClaim`]s: several containers
//! share a pod claim, name it whole or narrow it to a request or a
//! subrequest; some uses do not resolve. The oracle says what each
//! container and the pod hold.

use std::collections::{BTreeMap, BTreeSet};

use gpu_policy::policy::dra::tables::ClaimTables;
use gpu_policy::policy::{Evaluation, Evaluator, ObjectError, Subject};
use gpu_policy::settings::{NamespaceSettings, Settings};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::{
    CountedClaim, Devices, EDGES, Expected, Mode, claim_of, count, mode, small_count, sum,
};
use crate::support::pods::pick;

/// Where a pod claim comes from: template `t-k`, claim `rc-k`, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Template(usize),
    Claim(usize),
    Missing,
}

/// What an entry of a container's `resources.claims` names of its claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Whole,
    /// `request: rN`.
    Request(usize),
    /// `request: rN/sM`: a `firstAvailable` subrequest.
    Subrequest(usize, usize),
    /// A request the claim does not have.
    Missing,
}

/// One container: its list (`initContainers`, `containers`,
/// `ephemeralContainers`), whether it is a sidecar, and its claim uses
/// (pod claim `pc-i`, or one the pod does not have).
#[derive(Debug, Clone)]
pub struct UsingContainer {
    pub list: &'static str,
    pub sidecar: bool,
    pub uses: Vec<(usize, Part)>,
}

/// A pod whose containers use claims, and the claims of the same input.
#[derive(Debug, Clone)]
pub struct ClaimPod {
    pub templates: Vec<CountedClaim>,
    pub claims: Vec<CountedClaim>,
    pub pod_claims: Vec<Source>,
    pub containers: Vec<UsingContainer>,
    /// The namespace's `gpu-policy.io/max-gpus-per-pod`.
    pub max_per_pod: u64,
}

pub const NAMESPACE: &str = "ml";

fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        4 => Just(Part::Whole),
        3 => (0..4usize).prop_map(Part::Request),
        2 => (0..4usize, 0..3usize).prop_map(|(r, s)| Part::Subrequest(r, s)),
        1 => Just(Part::Missing),
    ]
}

fn using_container() -> impl Strategy<Value = UsingContainer> {
    (
        prop_oneof![
            2 => Just("initContainers"),
            5 => Just("containers"),
            1 => Just("ephemeralContainers"),
        ],
        any::<bool>(),
        // Pod claim 6 is never there.
        prop::collection::vec((prop_oneof![9 => 0..3usize, 1 => 0..=6usize], part()), 0..=4),
    )
        .prop_map(|(list, sidecar, uses)| UsingContainer {
            list,
            sidecar: sidecar && list == "initContainers",
            uses,
        })
}

/// The maxima a pod's total meets: small, at the ends of i64 and u64.
fn max_per_pod() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 0..=16u64,
        3 => pick(&EDGES),
        1 => any::<u64>(),
    ]
}

/// Pods of up to six pod claims, shared by several containers, naming
/// whole claims, requests and subrequests, over templates and claims that
/// are mostly readable (one alternative in thirty may be refused) and
/// mostly of small counts.
pub fn claim_pod() -> impl Strategy<Value = ClaimPod> {
    let claim = || {
        let count = prop_oneof![29 => small_count(), 1 => count()];
        let mode = prop_oneof![
            29 => prop_oneof![8 => Just(Mode::Absent), 6 => Just(Mode::ExactCount), 1 => Just(Mode::All)],
            1 => mode(),
        ];
        claim_of(count, mode, 8)
    };
    (
        prop::collection::vec(claim(), 1..=3),
        prop::collection::vec(claim(), 1..=3),
        prop::collection::vec(
            prop_oneof![
                3 => (0..3usize).prop_map(Source::Template),
                3 => (0..3usize).prop_map(Source::Claim),
                1 => Just(Source::Missing),
            ],
            1..=6,
        ),
        prop::collection::vec(using_container(), 1..=6),
        max_per_pod(),
    )
        .prop_map(|(templates, claims, pod_claims, containers, max_per_pod)| ClaimPod {
            templates,
            claims,
            pod_claims,
            containers,
            max_per_pod,
        })
}

impl Part {
    /// The entry of `resources.claims`.
    fn json(self, claim: &str) -> Value {
        match self {
            Part::Whole => json!({"name": claim}),
            Part::Request(r) => json!({"name": claim, "request": format!("r{r}")}),
            Part::Subrequest(r, s) => json!({"name": claim, "request": format!("r{r}/s{s}")}),
            Part::Missing => json!({"name": claim, "request": "missing"}),
        }
    }
}

impl ClaimPod {
    /// The templates and claims, as objects of the pod's namespace.
    pub fn objects(&self) -> Vec<Value> {
        let templates =
            self.templates.iter().enumerate().map(|(k, claim)| {
                claim.object("ResourceClaimTemplate", &format!("t-{k}"), NAMESPACE)
            });
        let claims = self
            .claims
            .iter()
            .enumerate()
            .map(|(k, claim)| claim.object("ResourceClaim", &format!("rc-{k}"), NAMESPACE));
        templates.chain(claims).collect()
    }

    /// The name of container `index` of [`ClaimPod::containers`].
    pub fn container_name(index: usize) -> String {
        format!("c{index}")
    }

    pub fn pod(&self) -> Value {
        let pod_claims: Vec<Value> = self
            .pod_claims
            .iter()
            .enumerate()
            .map(|(i, source)| match source {
                Source::Template(k) => {
                    json!({"name": format!("pc-{i}"), "resourceClaimTemplateName": format!("t-{k}")})
                }
                Source::Claim(k) => {
                    json!({"name": format!("pc-{i}"), "resourceClaimName": format!("rc-{k}")})
                }
                Source::Missing => json!({"name": format!("pc-{i}")}),
            })
            .collect();
        let mut spec = json!({"resourceClaims": pod_claims, "containers": []});
        for (index, container) in self.containers.iter().enumerate() {
            let uses: Vec<Value> = container
                .uses
                .iter()
                .map(|(claim, part)| part.json(&format!("pc-{claim}")))
                .collect();
            let mut written = json!({"name": Self::container_name(index), "image": "busybox",
                                     "resources": {"claims": uses}});
            if container.sidecar {
                written["restartPolicy"] = json!("Always");
            }
            match spec[container.list].as_array_mut() {
                Some(list) => list.push(written),
                None => spec[container.list] = json!([written]),
            }
        }
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "counted", "namespace": NAMESPACE},
               "spec": spec})
    }

    /// What a pod claim resolves to: the claim's reading, when it reads.
    fn claim_of(&self, pod_claim: usize) -> Option<Vec<(Option<Devices>, bool)>> {
        let (kind, claim) = match self.pod_claims.get(pod_claim)? {
            Source::Template(k) => ("ResourceClaimTemplate", self.templates.get(*k)?),
            Source::Claim(k) => ("ResourceClaim", self.claims.get(*k)?),
            Source::Missing => return None,
        };
        match claim.expected(kind) {
            Expected::Read(requests) => Some(requests),
            Expected::Unreadable(_) => None,
        }
    }

    /// The GPUs that a set of uses holds: per pod claim, the whole claim
    /// once if any use names it whole, else each request named once
    /// (whichever of its subrequests is named); uses that do not resolve
    /// hold nothing.
    fn held<'a>(&self, uses: impl IntoIterator<Item = &'a (usize, Part)>) -> Option<Devices> {
        // Pod claim -> None (whole) or the requests named.
        let mut named: BTreeMap<usize, Option<BTreeSet<usize>>> = BTreeMap::new();
        for (pod_claim, part) in uses {
            let Some(requests) = self.claim_of(*pod_claim) else {
                continue;
            };
            let request = match part {
                Part::Whole => None,
                Part::Request(r) | Part::Subrequest(r, _) if *r < requests.len() => Some(*r),
                _ => continue,
            };
            let entry = named.entry(*pod_claim).or_insert_with(|| Some(BTreeSet::new()));
            match (request, entry) {
                (None, entry) => *entry = None,
                (Some(r), Some(set)) => {
                    set.insert(r);
                }
                (Some(_), None) => {}
            }
        }
        sum(named.into_iter().map(|(pod_claim, requests)| {
            let all = self.claim_of(pod_claim)?;
            match requests {
                None => sum(all.iter().map(|(gpu, _)| *gpu)),
                Some(set) => sum(set.into_iter().map(|r| all.get(r).and_then(|(gpu, _)| *gpu))),
            }
        }))
    }

    /// What container `index` holds through its claims (an ephemeral
    /// container never holds any).
    pub fn container_gpus(&self, index: usize) -> Option<Devices> {
        let container = self.containers.get(index)?;
        if container.list == "ephemeralContainers" {
            return None;
        }
        self.held(&container.uses)
    }

    /// What the pod holds: every claim its (not ephemeral) containers use,
    /// each pod claim once, however many containers share it.
    pub fn total(&self) -> Option<Devices> {
        self.held(
            self.containers
                .iter()
                .filter(|c| c.list != "ephemeralContainers")
                .flat_map(|c| &c.uses),
        )
    }
}

/// Evaluates `subject` as `check` does: its claims resolve from `objects`,
/// in `namespace` (what its annotations make of `settings`).
pub fn evaluate(
    subject: &Subject<'_>,
    objects: &[Value],
    settings: &Settings,
    namespace: &NamespaceSettings,
) -> Result<Evaluation, ObjectError> {
    let objects: Vec<&Value> = objects.iter().collect();
    let input = ClaimTables::collect(&objects, subject.namespace, settings);
    let evaluator = Evaluator {
        settings,
        namespace,
        cluster: None,
        nodes: None,
        claims: Some(&input),
        images: None,
        claim_owner: None,
    };
    evaluator.evaluate(subject)
}
