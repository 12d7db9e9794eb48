//! The checks' table tests: small inventories, and the ids (with causes)
//! and objects each check reports for them.

use std::collections::BTreeMap;

use super::findings;
use crate::doctor::diagnose;
use crate::doctor::inventory::{
    AllowlistTarget, Component, ComponentPod, ConfigSource, DaemonSet, Deployment, Dra, Install,
    Inventory, Node, OptedIn, PolicyConfig, RuntimeClass, Seen, Slice, Webhook, WebhookKind,
};

fn node(name: &str, labels: &[(&str, &str)], capacity: &[(&str, u64)]) -> Node {
    Node {
        name: name.to_owned(),
        labels: labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        capacity: capacity.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
        runtime_handlers: None,
    }
}

const PRESENT: (&str, &str) = ("nvidia.com/gpu.present", "true");
const COMPUTE: (&str, &str) = ("nvidia.com/gpu.compute.major", "8");
const DRIVER: (&str, &str) = ("nvidia.com/cuda.driver-version.major", "13");
const OLD_DRIVER: (&str, &str) = ("nvidia.com/cuda.driver.major", "12");
const GPUS: (&str, u64) = ("nvidia.com/gpu", 4);

/// A GPU node as a working stack leaves it: labelled by GFD, advertising
/// GPUs.
fn labelled(name: &str) -> Node {
    node(name, &[PRESENT, COMPUTE, DRIVER], &[GPUS])
}

fn daemon_set(name: &str, component: Component, desired: i64, ready: i64) -> DaemonSet {
    DaemonSet { namespace: "nvidia".to_owned(), name: name.to_owned(), component, desired, ready }
}

fn plugin_pod(node: &str, ready: bool, runtime_class: Option<&str>) -> ComponentPod {
    ComponentPod {
        namespace: "nvidia".to_owned(),
        name: format!("nvidia-device-plugin-{node}"),
        component: Component::DevicePlugin,
        node: Some(node.to_owned()),
        ready,
        runtime_class: runtime_class.map(str::to_owned),
    }
}

/// A healthy fleet: two labelled GPU nodes, a CPU node, the RuntimeClass,
/// both DaemonSets ready with their pods.
fn healthy() -> Inventory {
    Inventory {
        nodes: Seen::Complete(vec![labelled("gpu-1"), labelled("gpu-2"), node("cpu-1", &[], &[])]),
        runtime_classes: Seen::Complete(vec![RuntimeClass {
            name: "nvidia".to_owned(),
            handler: "nvidia".to_owned(),
        }]),
        daemon_sets: Seen::Complete(vec![
            daemon_set("nvidia-device-plugin-daemonset", Component::DevicePlugin, 2, 2),
            daemon_set("gpu-feature-discovery", Component::FeatureDiscovery, 2, 2),
        ]),
        component_pods: Seen::Complete(vec![
            plugin_pod("gpu-1", true, Some("nvidia")),
            plugin_pod("gpu-2", true, Some("nvidia")),
        ]),
        namespaces: Seen::Complete(vec![OptedIn {
            namespace: "team-a".to_owned(),
            mode: "enforce".to_owned(),
        }]),
        ..Inventory::default()
    }
}

/// (id, cause, objects) of each finding.
type Row = (&'static str, Option<&'static str>, Vec<String>);

fn rows(inventory: &Inventory) -> Vec<Row> {
    findings(inventory)
        .into_iter()
        .map(|f| (f.id.as_str(), f.cause, f.subjects.iter().map(|s| s.key()).collect()))
        .collect()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn with_nodes(nodes: Vec<Node>) -> Inventory {
    Inventory { nodes: Seen::Complete(nodes), ..healthy() }
}

fn with_pods(pods: Vec<ComponentPod>) -> Inventory {
    Inventory { component_pods: Seen::Complete(pods), ..healthy() }
}

#[test]
fn a_healthy_fleet_has_no_finding_and_no_note() {
    let diagnosis = diagnose(&Inventory {
        config: PolicyConfig {
            source: ConfigSource::File("config.yaml".to_owned()),
            runtime_class_name: "nvidia".to_owned(),
        },
        ..healthy()
    });
    assert_eq!(diagnosis.findings, []);
    assert_eq!(diagnosis.notes, []);
    assert!(diagnosis.healthy());
    assert_eq!(diagnosis.summary.nodes, 3);
    assert_eq!(diagnosis.summary.gpu_nodes, 2);
    assert_eq!(diagnosis.summary.opted_in["enforce"], ["team-a"]);
}

#[test]
fn no_gpu_capacity_names_the_likely_cause() {
    let bare = |name: &str| node(name, &[PRESENT], &[]);
    let table: Vec<(&str, Inventory, Vec<Row>)> = vec![
        (
            "ready plugin without a RuntimeClass: the runtime is not the default",
            Inventory {
                nodes: Seen::Complete(vec![labelled("gpu-1"), bare("gpu-2")]),
                ..with_pods(vec![plugin_pod("gpu-1", true, None), plugin_pod("gpu-2", true, None)])
            },
            vec![("no-gpu-capacity", Some("runtime-not-default"), names(&["gpu-2"]))],
        ),
        (
            "the plugin's pod is not ready",
            Inventory {
                nodes: Seen::Complete(vec![bare("gpu-1"), labelled("gpu-2")]),
                ..with_pods(vec![
                    plugin_pod("gpu-1", false, None),
                    plugin_pod("gpu-2", true, Some("nvidia")),
                ])
            },
            vec![("no-gpu-capacity", Some("device-plugin-not-ready"), names(&["gpu-1"]))],
        ),
        (
            "no plugin pod on the node",
            Inventory {
                nodes: Seen::Complete(vec![bare("gpu-3"), labelled("gpu-1")]),
                ..healthy()
            },
            vec![("no-gpu-capacity", Some("device-plugin-not-on-node"), names(&["gpu-3"]))],
        ),
        (
            "no device plugin at all, a node NFD labelled",
            Inventory {
                nodes: Seen::Complete(vec![node(
                    "gpu-1",
                    &[("feature.node.kubernetes.io/pci-0302_10de.present", "true")],
                    &[],
                )]),
                daemon_sets: Seen::Complete(Vec::new()),
                component_pods: Seen::Complete(Vec::new()),
                ..healthy()
            },
            vec![("no-gpu-capacity", Some("device-plugin-missing"), names(&["gpu-1"]))],
        ),
        (
            "MIG devices under the mixed strategy",
            with_nodes(vec![node(
                "gpu-1",
                &[PRESENT, COMPUTE, DRIVER],
                &[("nvidia.com/mig-1g.5gb", 7)],
            )]),
            vec![("no-gpu-capacity", Some("mig-strategy"), names(&["gpu-1"]))],
        ),
        (
            "a ready plugin with a RuntimeClass that finds nothing",
            with_nodes(vec![bare("gpu-1"), labelled("gpu-2")]),
            vec![("no-gpu-capacity", Some("device-plugin-finds-no-gpu"), names(&["gpu-1"]))],
        ),
        (
            "the DaemonSets unread",
            Inventory {
                nodes: Seen::Complete(vec![bare("gpu-1")]),
                daemon_sets: Seen::Forbidden { rbac: "list daemonsets.apps" },
                component_pods: Seen::Forbidden { rbac: "list pods" },
                ..healthy()
            },
            vec![
                ("no-gpu-capacity", Some("device-plugin-unread"), names(&["gpu-1"])),
                // Not known whether GFD runs: its labels are said missing.
            ],
        ),
        (
            "the DaemonSets read, their pods not",
            Inventory {
                nodes: Seen::Complete(vec![bare("gpu-1")]),
                component_pods: Seen::Forbidden { rbac: "list pods" },
                ..healthy()
            },
            vec![("no-gpu-capacity", Some("device-plugin-unread"), names(&["gpu-1"]))],
        ),
        (
            "a node whose GPUs the DRA driver publishes needs no capacity",
            Inventory {
                nodes: Seen::Complete(vec![bare("gpu-1"), labelled("gpu-2")]),
                dra: Seen::Complete(Dra {
                    gpu_device_classes: vec!["gpu.nvidia.com".to_owned()],
                    slices: vec![Slice {
                        name: "gpu-1-gpu.nvidia.com-x".to_owned(),
                        node: Some("gpu-1".to_owned()),
                        devices: 8,
                        ..Slice::default()
                    }],
                }),
                ..healthy()
            },
            vec![],
        ),
        (
            "a CPU node is no GPU node",
            with_nodes(vec![labelled("gpu-1"), node("cpu-1", &[("nvidia.com/other", "x")], &[])]),
            vec![],
        ),
        (
            "the pod alone makes it a GPU node; two causes, two findings",
            Inventory {
                nodes: Seen::Complete(vec![
                    node("gpu-1", &[], &[]),
                    node("gpu-2", &[], &[]),
                    node("gpu-3", &[PRESENT], &[]),
                    labelled("gpu-4"),
                ]),
                ..with_pods(vec![
                    plugin_pod("gpu-1", true, None),
                    plugin_pod("gpu-2", true, None),
                    plugin_pod("gpu-3", false, Some("nvidia")),
                ])
            },
            vec![
                ("no-gpu-capacity", Some("device-plugin-not-ready"), names(&["gpu-3"])),
                ("no-gpu-capacity", Some("runtime-not-default"), names(&["gpu-1", "gpu-2"])),
            ],
        ),
    ];
    for (case, inventory, expected) in table {
        let found: Vec<Row> =
            rows(&inventory).into_iter().filter(|(id, _, _)| *id == "no-gpu-capacity").collect();
        assert_eq!(found, expected, "{case}");
    }
}

#[test]
fn gfd_labels_are_missing_with_or_without_gfd() {
    let unlabelled = |name: &str| node(name, &[PRESENT], &[GPUS]);
    let table: Vec<(&str, Inventory, Vec<Row>)> = vec![
        (
            "no GFD DaemonSet",
            Inventory {
                nodes: Seen::Complete(vec![unlabelled("gpu-1"), unlabelled("gpu-2")]),
                daemon_sets: Seen::Complete(vec![daemon_set(
                    "nvidia-device-plugin-daemonset",
                    Component::DevicePlugin,
                    2,
                    2,
                )]),
                ..healthy()
            },
            vec![("gfd-missing", None, names(&["gpu-1", "gpu-2"]))],
        ),
        (
            "GFD runs, one node lacks the labels",
            with_nodes(vec![labelled("gpu-1"), unlabelled("gpu-2")]),
            vec![("gfd-labels-missing", None, names(&["gpu-2"]))],
        ),
        (
            "the driver label under GFD's older name counts",
            with_nodes(vec![node("gpu-1", &[PRESENT, COMPUTE, OLD_DRIVER], &[GPUS])]),
            vec![],
        ),
        (
            "a compute label without a driver label is not enough",
            with_nodes(vec![node("gpu-1", &[PRESENT, COMPUTE], &[GPUS])]),
            vec![("gfd-labels-missing", None, names(&["gpu-1"]))],
        ),
        (
            "MIG capacity counts as GPUs",
            with_nodes(vec![node("gpu-1", &[], &[("nvidia.com/mig-3g.20gb", 2)])]),
            vec![
                ("no-gpu-capacity", Some("mig-strategy"), names(&["gpu-1"])),
                ("gfd-labels-missing", None, names(&["gpu-1"])),
            ],
        ),
    ];
    for (case, inventory, expected) in table {
        let found: Vec<Row> = rows(&inventory)
            .into_iter()
            .filter(|(id, _, _)| id.starts_with("gfd") || *id == "no-gpu-capacity")
            .collect();
        assert_eq!(found, expected, "{case}");
    }
}

#[test]
fn gfd_missing_says_what_gpu_policy_does() {
    let none = with_nodes(vec![node("gpu-1", &[PRESENT], &[GPUS])]);
    let some = with_nodes(vec![labelled("gpu-1"), node("gpu-2", &[PRESENT], &[GPUS])]);
    let summary = |inventory: &Inventory| {
        findings(inventory).into_iter().map(|f| f.summary).collect::<Vec<_>>().join("\n")
    };
    let none = summary(&none);
    assert!(none.contains("enforces no compute or driver floor"), "{none}");
    assert!(none.contains("whenNodesUnlabelled: skip"), "{none}");
    assert!(none.contains("with require, GPU pods with a floor stay Pending"), "{none}");
    let some = summary(&some);
    assert!(some.contains("never scheduled onto these nodes"), "{some}");
}

#[test]
fn the_runtime_class_and_its_handler() {
    let handlers = |mut node: Node, list: &[&str]| {
        node.runtime_handlers = Some(list.iter().map(|s| (*s).to_owned()).collect());
        node
    };
    let no_class = |nodes: Vec<Node>| Inventory {
        nodes: Seen::Complete(nodes),
        runtime_classes: Seen::Complete(Vec::new()),
        ..healthy()
    };
    let table: Vec<(&str, Inventory, Vec<Row>)> = vec![
        (
            "missing",
            no_class(vec![labelled("gpu-1")]),
            vec![("runtime-class-missing", None, names(&["nvidia"]))],
        ),
        (
            "missing, but the GPU Operator configures the runtime",
            no_class(vec![node(
                "gpu-1",
                &[PRESENT, COMPUTE, DRIVER, ("nvidia.com/gpu.deploy.container-toolkit", "true")],
                &[GPUS],
            )]),
            vec![],
        ),
        (
            "missing, none configured",
            Inventory {
                config: PolicyConfig {
                    source: ConfigSource::Defaults,
                    runtime_class_name: String::new(),
                },
                ..no_class(vec![labelled("gpu-1")])
            },
            vec![],
        ),
        ("missing, no GPU node", no_class(vec![node("cpu-1", &[], &[])]), vec![]),
        (
            "a handler the node does not report",
            with_nodes(vec![
                handlers(labelled("gpu-1"), &["runc"]),
                handlers(labelled("gpu-2"), &["runc", "nvidia"]),
                labelled("gpu-3"),
            ]),
            vec![("runtime-handler-unknown", None, names(&["gpu-1"]))],
        ),
        (
            "a node that reports no handlers is not judged",
            with_nodes(vec![handlers(labelled("gpu-1"), &[])]),
            vec![],
        ),
    ];
    for (case, inventory, expected) in table {
        let found: Vec<Row> =
            rows(&inventory).into_iter().filter(|(id, _, _)| id.starts_with("runtime")).collect();
        assert_eq!(found, expected, "{case}");
    }
    let noted = diagnose(&no_class(vec![node(
        "gpu-1",
        &[PRESENT, COMPUTE, DRIVER, ("nvidia.com/gpu.deploy.container-toolkit", "true")],
        &[GPUS],
    )]));
    assert!(noted.notes.iter().any(|n| n.kind == "runtime"), "{:?}", noted.notes);
}

#[test]
fn daemon_sets_short_of_ready() {
    let inventory = Inventory {
        daemon_sets: Seen::Complete(vec![
            daemon_set("nvidia-device-plugin-daemonset", Component::DevicePlugin, 3, 2),
            daemon_set("gpu-feature-discovery", Component::FeatureDiscovery, 2, 2),
        ]),
        ..healthy()
    };
    assert_eq!(
        rows(&inventory),
        [("daemonset-not-ready", None, names(&["nvidia/nvidia-device-plugin-daemonset"]))]
    );
}

#[test]
fn dra_driver_and_slice_versions() {
    let slice = |name: &str, without_compute: u64, without_driver: u64| Slice {
        name: name.to_owned(),
        node: Some("gpu-1".to_owned()),
        devices: 8,
        without_compute_capability: without_compute,
        without_driver_version: without_driver,
    };
    let dra = |classes: &[&str], slices: Vec<Slice>| Inventory {
        dra: Seen::Complete(Dra { gpu_device_classes: names(classes), slices }),
        ..healthy()
    };
    let table: Vec<(&str, Inventory, Vec<Row>)> = vec![
        (
            "classes without slices",
            dra(&["gpu.nvidia.com", "mig.nvidia.com"], Vec::new()),
            vec![("dra-driver-missing", None, names(&["gpu.nvidia.com", "mig.nvidia.com"]))],
        ),
        (
            "slices without the attributes",
            dra(&["gpu.nvidia.com"], vec![slice("a", 0, 0), slice("b", 8, 0), slice("c", 0, 1)]),
            vec![("dra-slice-versions-missing", None, names(&["b", "c"]))],
        ),
        ("no class, no slice", dra(&[], Vec::new()), vec![]),
        ("not served", Inventory { dra: Seen::NotServed, ..healthy() }, vec![]),
    ];
    for (case, inventory, expected) in table {
        assert_eq!(rows(&inventory), expected, "{case}");
        assert!(diagnose(&inventory).notes.iter().all(|n| n.kind != "forbidden"), "{case}");
    }
}

fn webhook(kind: WebhookKind, trusts: Option<Result<(), String>>, service: bool) -> Webhook {
    Webhook {
        configuration: kind,
        name: "pods.gpu-policy.io".to_owned(),
        trusts_serving_certificate: trusts,
        service: service.then(|| "gpu-policy/gpu-policy".to_owned()),
    }
}

fn installed(webhooks: Vec<Webhook>, deployment: Option<Deployment>) -> Inventory {
    Inventory {
        install: Install {
            namespace: "gpu-policy".to_owned(),
            webhooks: Seen::Complete(webhooks),
            deployment: Seen::Complete(deployment),
            allowlist: Vec::new(),
        },
        ..healthy()
    }
}

#[test]
fn gpu_policy_itself() {
    let deployment = |ready| Deployment {
        namespace: "gpu-policy".to_owned(),
        name: "gpu-policy".to_owned(),
        replicas: 2,
        ready,
    };
    let target = |name: &str, exists: bool| AllowlistTarget {
        entry: format!("nvidia/DaemonSet/{name}"),
        namespace: "nvidia".to_owned(),
        name: name.to_owned(),
        by_prefix: false,
        default_entry: false,
        exists: Seen::Complete(exists),
    };
    let trusted = || Some(Ok(()));
    let mut allowlisted = installed(vec![webhook(WebhookKind::Mutating, trusted(), false)], None);
    allowlisted.install.allowlist = vec![
        target("nvidia-device-plugin-daemonset", true),
        target("nvidia-gpu-exporter", false),
        AllowlistTarget { default_entry: true, ..target("gpu-feature-discovery", false) },
    ];
    let mut nobody = installed(vec![webhook(WebhookKind::Mutating, trusted(), false)], None);
    nobody.namespaces = Seen::Complete(vec![OptedIn {
        namespace: "team-b".to_owned(),
        mode: "enforcing".to_owned(),
    }]);
    let table: Vec<(&str, Inventory, Vec<Row>)> = vec![
        (
            "in the cluster, all replicas ready, caBundle trusted",
            installed(
                vec![
                    webhook(WebhookKind::Mutating, trusted(), true),
                    webhook(WebhookKind::Validating, trusted(), true),
                ],
                Some(deployment(2)),
            ),
            vec![],
        ),
        (
            "a caBundle of another CA, one replica of two",
            installed(
                vec![
                    webhook(WebhookKind::Mutating, Some(Err("unknown issuer".into())), true),
                    webhook(WebhookKind::Validating, trusted(), true),
                ],
                Some(deployment(1)),
            ),
            vec![
                ("ca-bundle-mismatch", None, names(&["gpu-policy"])),
                ("webhook-not-ready", None, names(&["gpu-policy/gpu-policy"])),
            ],
        ),
        (
            "a Service without a Deployment",
            installed(vec![webhook(WebhookKind::Mutating, trusted(), true)], None),
            vec![("webhook-not-ready", None, names(&["gpu-policy/gpu-policy"]))],
        ),
        (
            "outside the cluster (a URL): no Deployment expected",
            installed(vec![webhook(WebhookKind::Mutating, None, false)], None),
            vec![],
        ),
        (
            "an allowlist entry naming no DaemonSet",
            allowlisted,
            vec![("allowlist-target-missing", None, names(&["nvidia/nvidia-gpu-exporter"]))],
        ),
        (
            "a mode that is no mode, and so nobody opted in",
            nobody,
            vec![
                ("mode-label-invalid", None, names(&["team-b"])),
                ("no-namespace-opted-in", None, names(&[])),
            ],
        ),
    ];
    for (case, inventory, expected) in table {
        assert_eq!(rows(&inventory), expected, "{case}");
    }
}

#[test]
fn what_cannot_be_read_is_a_note_not_a_finding() {
    let inventory = Inventory {
        daemon_sets: Seen::Forbidden { rbac: "list daemonsets.apps" },
        component_pods: Seen::Forbidden { rbac: "list pods" },
        runtime_classes: Seen::Forbidden { rbac: "list runtimeclasses.node.k8s.io" },
        install: Install {
            namespace: "gpu-policy".to_owned(),
            webhooks: Seen::NotServed,
            deployment: Seen::Forbidden { rbac: "get deployments.apps" },
            allowlist: Vec::new(),
        },
        ..healthy()
    };
    let diagnosis = diagnose(&inventory);
    assert_eq!(rows(&inventory), []);
    let kinds: Vec<&str> = diagnosis.notes.iter().map(|n| n.kind).collect();
    assert_eq!(
        kinds,
        ["forbidden", "forbidden", "forbidden", "not-installed", "forbidden", "config"]
    );
    assert!(
        diagnosis.notes[1].message.contains("grant list daemonsets.apps"),
        "{:?}",
        diagnosis.notes
    );
}

#[test]
fn a_large_fleet_is_named_in_part_and_counted() {
    let nodes: Vec<Node> =
        (0..1000).map(|i| node(&format!("gpu-{i:04}"), &[PRESENT], &[])).collect();
    let found = findings(&with_nodes(nodes));
    let finding = found
        .iter()
        .find(|f| f.id.as_str() == "no-gpu-capacity")
        .unwrap_or_else(|| panic!("{found:?}"));
    assert_eq!(finding.subjects.len(), 10);
    assert_eq!(finding.more_subjects, 990);
    assert_eq!(finding.evidence.len(), 11, "{:?}", finding.evidence);
    assert!(finding.summary.starts_with("1000 nodes look like GPU nodes"), "{}", finding.summary);
}

#[test]
fn every_finding_id_is_reported_by_exactly_one_check() {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for check in super::CHECKS {
        for id in check.ids {
            *seen.entry(id.as_str()).or_default() += 1;
        }
    }
    let all: BTreeMap<&str, usize> =
        crate::doctor::FindingId::ALL.iter().map(|id| (id.as_str(), 1)).collect();
    assert_eq!(seen, all);
}

#[test]
fn every_finding_id_is_in_the_operations_table() {
    let docs = include_str!("../../../docs/operations.md");
    for id in crate::doctor::FindingId::ALL {
        let row = format!("| `{id}` |");
        assert!(docs.contains(&row), "docs/operations.md has no row {row}");
    }
}
