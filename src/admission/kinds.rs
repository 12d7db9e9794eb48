//! What the policy makes of an object's kind, and the [`Subject`] each is
//! evaluated as.

use crate::document::Json;

use crate::policy::dra::claims::{CLAIM_GROUP, ClaimKind};
use crate::policy::{Scope, Shape, Subject};

/// The workload kinds whose pod template is validated (never mutated: the
/// pods they create are, so GitOps tools see no drift).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    Deployment,
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    Job,
    CronJob,
    ReplicationController,
    PodTemplate,
}

impl Workload {
    pub const ALL: [Workload; 8] = [
        Workload::Deployment,
        Workload::ReplicaSet,
        Workload::StatefulSet,
        Workload::DaemonSet,
        Workload::Job,
        Workload::CronJob,
        Workload::ReplicationController,
        Workload::PodTemplate,
    ];

    /// The kind, the API group (`""` is the core group) and the plural
    /// resource name, as webhook rules and RBAC name it.
    fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Workload::Deployment => ("Deployment", "apps", "deployments"),
            Workload::ReplicaSet => ("ReplicaSet", "apps", "replicasets"),
            Workload::StatefulSet => ("StatefulSet", "apps", "statefulsets"),
            Workload::DaemonSet => ("DaemonSet", "apps", "daemonsets"),
            Workload::Job => ("Job", "batch", "jobs"),
            Workload::CronJob => ("CronJob", "batch", "cronjobs"),
            Workload::ReplicationController => {
                ("ReplicationController", "", "replicationcontrollers")
            }
            Workload::PodTemplate => ("PodTemplate", "", "podtemplates"),
        }
    }

    pub fn kind(self) -> &'static str {
        self.names().0
    }

    pub fn group(self) -> &'static str {
        self.names().1
    }

    pub fn resource(self) -> &'static str {
        self.names().2
    }

    pub fn shape(self) -> Shape {
        match self {
            Workload::CronJob => Shape::CronJob,
            Workload::PodTemplate => Shape::PodTemplate,
            _ => Shape::Template,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Pod,
    Workload(Workload),
    /// A resource.k8s.io ResourceClaim or ResourceClaimTemplate: its GPU
    /// requests are bounded (R2); a claim made for a pod gets the pod's
    /// floors (R4, on the mutating webhook).
    Claim(ClaimKind),
    /// Anything else: allowed untouched and reported as ignored.
    Ignored,
}

impl ObjectKind {
    /// By API group (`""` is the core group) and kind.
    pub fn of(group: &str, kind: &str) -> ObjectKind {
        if group.is_empty() && kind == "Pod" {
            return ObjectKind::Pod;
        }
        if group == CLAIM_GROUP
            && let Some(claim) = ClaimKind::of_kind(kind)
        {
            return ObjectKind::Claim(claim);
        }
        Workload::ALL
            .into_iter()
            .find(|w| w.group() == group && w.kind() == kind)
            .map_or(ObjectKind::Ignored, ObjectKind::Workload)
    }

    /// By `apiVersion` and `kind` as written in a manifest.
    pub fn of_manifest(api_version: &str, kind: &str) -> ObjectKind {
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        Self::of(group, kind)
    }

    /// The object, being created in `namespace`, as the evaluator takes it.
    pub fn created<'a>(self, object: Json<'a>, namespace: &'a str) -> Option<Subject<'a>> {
        match self {
            ObjectKind::Pod => Some(Subject::pod(object, namespace, Scope::Whole)),
            ObjectKind::Workload(workload) => {
                Some(Subject::template(object, workload.shape(), workload.kind(), namespace))
            }
            ObjectKind::Claim(kind) => Some(Subject::claim(object, kind, namespace)),
            ObjectKind::Ignored => None,
        }
    }
}
