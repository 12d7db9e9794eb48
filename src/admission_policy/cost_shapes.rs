//! The shapes of what admission policies read, with the sizes Kubernetes
//! derives from the schemas: `object` and `oldObject` (a Pod or a workload
//! template, a ResourceClaim or a ResourceClaimTemplate), `namespaceObject`
//! and `request`.
//!
//! None of these schemas has a `maxItems` or `maxLength` on the fields the
//! policies read, so every list is as long as a 3 MiB request can hold
//! items of its smallest JSON, every map as large, every string as long as
//! the request (`k8s.io/apiserver/pkg/cel/common/schemas.go`). Only the
//! fields the policies read are listed; another field is of unknown shape.

use super::{MIN_STRING_SIZE, Shape, Variables, object_min_serialized_size};

fn string() -> Shape {
    Shape::unbounded_string()
}

fn string_map() -> Shape {
    Shape::unbounded_map(string(), MIN_STRING_SIZE)
}

/// A list of objects whose only required field is `name` (smallest JSON
/// `{"name":""}`, 12 bytes).
fn named_list<'a>(fields: impl IntoIterator<Item = (&'a str, Shape)>) -> Shape {
    Shape::unbounded_list(
        Shape::object(fields),
        object_min_serialized_size(&[("name", MIN_STRING_SIZE)]),
    )
}

fn container() -> Shape {
    Shape::object([
        ("name", string()),
        ("image", string()),
        ("restartPolicy", string()),
        (
            "env",
            named_list([
                ("name", string()),
                ("value", string()),
                ("valueFrom", Shape::object([])),
            ]),
        ),
        (
            "resources",
            Shape::object([
                // Quantities are read as strings (`quantity(...)`).
                ("limits", string_map()),
                ("requests", string_map()),
                (
                    "claims",
                    named_list([("name", string()), ("request", string())]),
                ),
            ]),
        ),
        (
            "volumeMounts",
            Shape::unbounded_list(
                Shape::object([("name", string()), ("mountPath", string())]),
                object_min_serialized_size(&[
                    ("name", MIN_STRING_SIZE),
                    ("mountPath", MIN_STRING_SIZE),
                ]),
            ),
        ),
        (
            "securityContext",
            Shape::object([("privileged", Shape::Scalar)]),
        ),
    ])
}

fn metadata() -> Shape {
    // An owner reference requires apiVersion, kind, name and uid.
    let owner_min = object_min_serialized_size(&[
        ("apiVersion", MIN_STRING_SIZE),
        ("kind", MIN_STRING_SIZE),
        ("name", MIN_STRING_SIZE),
        ("uid", MIN_STRING_SIZE),
    ]);
    Shape::object([
        ("name", string()),
        ("namespace", string()),
        ("labels", string_map()),
        ("annotations", string_map()),
        (
            "ownerReferences",
            Shape::unbounded_list(
                Shape::object([
                    ("kind", string()),
                    ("name", string()),
                    ("controller", Shape::Scalar),
                ]),
                owner_min,
            ),
        ),
    ])
}

fn pod_spec_fields() -> Vec<(&'static str, Shape)> {
    let containers = || {
        Shape::unbounded_list(
            container(),
            object_min_serialized_size(&[("name", MIN_STRING_SIZE)]),
        )
    };
    vec![
        ("containers", containers()),
        ("initContainers", containers()),
        ("ephemeralContainers", containers()),
        (
            "volumes",
            named_list([
                ("name", string()),
                ("hostPath", Shape::object([("path", string())])),
            ]),
        ),
        (
            "resourceClaims",
            named_list([
                ("name", string()),
                ("resourceClaimName", string()),
                ("resourceClaimTemplateName", string()),
            ]),
        ),
        ("runtimeClassName", string()),
        ("nodeSelector", string_map()),
    ]
}

/// The Pod, as `object` and `oldObject` of a policy on pods. Containers,
/// environment variables, volumes and claims require only `name`.
pub fn pod() -> Shape {
    Shape::object([
        ("apiVersion", string()),
        ("kind", string()),
        ("metadata", metadata()),
        ("spec", Shape::object(pod_spec_fields())),
    ])
}

/// A Pod or a workload with a pod template (a Deployment's, a Job's,
/// a CronJob's one level deeper, a PodTemplate's at `template`): one
/// object with the fields of them all, so that every branch of the
/// policies' `spec` variable has the same pod spec, of the same sizes.
pub fn pod_or_workload() -> Shape {
    let template = || {
        Shape::object([
            ("metadata", metadata()),
            ("spec", Shape::object(pod_spec_fields())),
        ])
    };
    let mut spec = pod_spec_fields();
    spec.push(("template", template()));
    spec.push((
        "jobTemplate",
        Shape::object([("spec", Shape::object([("template", template())]))]),
    ));
    Shape::object([
        ("apiVersion", string()),
        ("kind", string()),
        ("metadata", metadata()),
        ("spec", Shape::object(spec)),
        ("template", template()),
    ])
}

/// A ResourceClaim (devices at `spec.devices`) or a ResourceClaimTemplate
/// (at `spec.spec.devices`), resource.k8s.io/v1. A request requires only
/// `name`; a `firstAvailable` alternative `name` and `deviceClassName`.
pub fn claim_or_template() -> Shape {
    let device_fields = || {
        vec![
            ("name", string()),
            ("deviceClassName", string()),
            ("allocationMode", string()),
            ("count", Shape::Scalar),
            ("adminAccess", Shape::Scalar),
        ]
    };
    let alternative_min = object_min_serialized_size(&[
        ("name", MIN_STRING_SIZE),
        ("deviceClassName", MIN_STRING_SIZE),
    ]);
    let mut request = device_fields();
    request.push(("exactly", Shape::object(device_fields())));
    request.push((
        "firstAvailable",
        Shape::unbounded_list(Shape::object(device_fields()), alternative_min),
    ));
    let devices = || Shape::object([("requests", named_list(request.clone()))]);
    Shape::object([
        ("apiVersion", string()),
        ("kind", string()),
        ("metadata", metadata()),
        (
            "spec",
            Shape::object([
                ("devices", devices()),
                ("spec", Shape::object([("devices", devices())])),
            ]),
        ),
    ])
}

/// `namespaceObject`: the Namespace, of which the policies read the
/// annotations.
pub fn namespace() -> Shape {
    Shape::object([("metadata", metadata())])
}

/// `request`: the admission request's attributes the policies read
/// (`k8s.io/apiserver/pkg/admission/plugin/cel/compile.go` declares them
/// without a `maxLength`).
pub fn request() -> Shape {
    Shape::object([
        ("namespace", string()),
        ("name", string()),
        ("operation", string()),
        ("subResource", string()),
    ])
}

fn variables(object: Shape) -> Variables {
    [
        ("object", object.clone()),
        ("oldObject", object),
        ("namespaceObject", namespace()),
        ("request", request()),
    ]
    .into_iter()
    .map(|(name, shape)| (name.to_owned(), shape))
    .collect()
}

/// The variables of a policy on pods: `object` and `oldObject` as Pods.
pub fn pod_policy_variables() -> Variables {
    variables(pod())
}

/// The variables of a policy on pods and workloads.
pub fn workload_policy_variables() -> Variables {
    variables(pod_or_workload())
}

/// The variables of a policy on ResourceClaims and their templates.
pub fn claim_policy_variables() -> Variables {
    variables(claim_or_template())
}
