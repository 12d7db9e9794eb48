#!/usr/bin/env python3
"""Tests of the Helm chart charts/gpu-policy, offline (no cluster, no helm binary).

- helm-python-sdk (import name `helm_python`, Helm v4 Go SDK through ctypes)
  lints and renders the chart: `helm_python.lint(path, values, strict=...,
  namespace=..., kube_version=...)` and `Chart.load(path).render(values,
  name=..., namespace=...)`, which also applies values.schema.json; a render
  for a given Kubernetes release and served APIs (.Capabilities) calls the
  SDK's native `helm_render` with kube_version and api_versions, which
  Chart.render does not pass;
- with default values the chart rendered for each supported Kubernetes
  release must render the same objects as `gpu-policy manifests
  --kube-version` of that release (the binary is the reference; all but the
  Namespace, which `helm install --create-namespace` makes), compared field
  by field;
- with admissionPolicies.enabled the chart renders its bundled admission
  policies for the cluster's release (charts/gpu-policy/files/policies/),
  which must be the binary's `manifests --admission-policies
  [--mutating-policies] --kube-version` output for the default config
  (`run.sh --regenerate` writes them); MutatingAdmissionPolicies only where
  the cluster serves the version of that release's file; a config that
  changes a setting they read must fail to render unless
  admissionPolicies.manifest is given, and a given manifest is rendered;
- every rendered object of every value set, rendered for each supported
  release, is validated with kubernetes-validate (strict) against that
  release's schemas; CRD kinds it has no schema for are checked for shape
  only.

Run by tests/chart/run.sh. Prints one line per test and `N passed, M failed`;
exits 1 on any failure. `--render VALUES_JSON` instead prints the objects
rendered for those values as one JSON list.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator

import helm_python as helm
from helm_python import _native as helm_native
import jsonschema
import kubernetes_validate
import yaml
import kubernetes_validate.utils
from kubernetes_validate.utils import SchemaNotFoundError, latest_version

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
import jsondiff  # noqa: E402  (tests/python)

ROOT = Path(__file__).resolve().parents[2]
CHART = Path(os.environ.get("GPU_POLICY_CHART", ROOT / "charts" / "gpu-policy"))
BINARY = Path(os.environ.get("GPU_POLICY_BIN", ROOT / "target" / "debug" / "gpu-policy"))
NAMESPACE = "gpu-policy"
RELEASE = "gpu-policy"
# The Kubernetes releases gpu-policy supports (crates/policy-core/src/kubernetes_version.rs:
# OLDEST..=NEWEST), 1.MINOR; the chart renders for each what it serves.
OLDEST_MINOR, NEWEST_MINOR = 32, 37
RELEASES = [f"1.{minor}" for minor in range(OLDEST_MINOR, NEWEST_MINOR + 1)]
NEWEST = RELEASES[-1]
# The schemas every rendered object is validated against: each supported
# release's, rendered for that release, and the newest kubernetes-validate
# ships when it is newer (rendered as for the newest supported release).
KUBE_VERSIONS = [f"{release}.0" for release in RELEASES]
if tuple(int(part) for part in latest_version().split(".")[:2]) > (1, NEWEST_MINOR):
    KUBE_VERSIONS.append(latest_version())
# The API version the cluster serves MutatingAdmissionPolicy in, that the
# chart's bundled policies for a release use (v1beta1 in 1.34 and 1.35, when
# the cluster turns it on; v1 from 1.36); None before 1.34.
MAP_V1BETA1 = "admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy"
MAP_V1 = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"


def minor(release: str) -> int:
    return int(release.split(".")[1])


def map_api(release: str) -> str | None:
    if minor(release) >= 36:
        return MAP_V1
    return MAP_V1BETA1 if minor(release) >= 34 else None


# Kinds of CRDs (cert-manager, prometheus-operator) kubernetes-validate has no
# schema for: validated for shape only.
CRD_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("cert-manager.io/v1", "Certificate"),
    ("cert-manager.io/v1", "Issuer"),
}
# install.rs' kind -> (API group, resource), in Workload::ALL order.
WORKLOADS = [
    ("Deployment", "apps", "deployments"),
    ("ReplicaSet", "apps", "replicasets"),
    ("StatefulSet", "apps", "statefulsets"),
    ("DaemonSet", "apps", "daemonsets"),
    ("Job", "batch", "jobs"),
    ("CronJob", "batch", "cronjobs"),
    ("ReplicationController", "", "replicationcontrollers"),
    ("PodTemplate", "", "podtemplates"),
]
FULL = {
    "certificates": {"mode": "cert-manager"},
    "serviceMonitor": {"enabled": True},
    "prometheusRule": {"enabled": True},
}
CUSTOM_ALLOWLIST = [
    {"namespace": "kube-system", "kind": "DaemonSet", "name": "nvidia-gpu-exporter"},
    {"namespace": "gpu-operator", "kind": "DaemonSet", "name": "nvidia-dcgm-exporter"},
    {"namespace": "gpu-operator", "kind": "DaemonSet", "name": "gpu-feature-discovery"},
    {"namespace": "gpu-operator", "kind": "Deployment", "name": "gpu-operator"},
    {"namespace": "monitoring", "kind": "StatefulSet", "name": "smi-scraper"},
    {"namespace": "gpu-operator", "kind": "Job", "name": "nvidia-cuda-validator"},
    {"namespace": "kube-system", "kind": "PodTemplate", "name": "gpu-probe"},
    # The NVIDIA DRA driver: its MPS control daemons by namePrefix, next to
    # a name of the same kind (one rule without resourceNames grants both).
    {"namespace": "nvidia-dra-driver-gpu", "kind": "DaemonSet", "name": "nvidia-dra-driver-gpu-kubelet-plugin"},
    {"namespace": "nvidia-dra-driver-gpu", "kind": "ReplicaSet", "namePrefix": "mps-control-daemon-"},
    {"namespace": "nvidia-dra-driver-gpu", "kind": "ReplicaSet", "name": "static-mps"},
    # Never watched: no rule, and no Role in a namespace of its own.
    {"namespace": "templates-only", "kind": "PodTemplate", "namePrefix": "gpu-probe-"},
]
CLIENT_CA_SECRET = "apiserver-client-ca"
CLIENT_NAMES = ["kube-apiserver", "gpu-policy.gpu-policy.svc"]
WEBHOOK_FROM = ["10.0.0.0/24", "192.168.7.10/32", "fd00:10::/64"]
HARDENED = {
    "clientAuth": {"enabled": True, "caSecret": CLIENT_CA_SECRET, "names": CLIENT_NAMES},
    "networkPolicy": {"enabled": True, "webhookFrom": WEBHOOK_FROM},
}
# The generated admission policies (bundled for the default config), beside
# the webhook and alone.
POLICIES = {"admissionPolicies": {"enabled": True}}
POLICIES_ALONE = {"webhook": {"enabled": False}, "admissionPolicies": {"enabled": True}}
# With them, the MutatingAdmissionPolicies (rendered where the release serves them).
MUTATING = {"admissionPolicies": {"mutating": True}}
# The value sets every object of which is validated with kubernetes-validate.
REGISTRY_PULL_SECRET = "registry-pull"
REGISTRY = {
    "config": {"imageResolution": {"mode": "registry", "registries": ["127.0.0.1:9"], "insecureRegistries": ["127.0.0.1:9"]}},
    "imageResolution": {"pullSecret": {"name": REGISTRY_PULL_SECRET}},
}
VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "registry mode with a pull secret": REGISTRY,
    "cert-manager+monitoring": FULL,
    "client certificates+network policy": HARDENED,
    "cert-manager external issuer": {
        "certificates": {
            "mode": "cert-manager",
            "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}},
        }
    },
    "admission policies beside the webhook": POLICIES,
    "admission policies alone": POLICIES_ALONE,
    "reports": {"reports": {"enabled": True}},
    "reports beside the admission policies alone": {**POLICIES_ALONE, "reports": {"enabled": True}},
    "everything set": {
        "fullnameOverride": "gpu-policy-b",
        "image": {"repository": "registry.example/gpu-policy", "tag": "1.2.3", "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "regcred"}],
        "replicas": 3,
        "failurePolicy": "Ignore",
        "logFormat": "text",
        "budget": {"maxConnections": 300, "maxConnectionsPerPeer": 100, "maxInflightMiB": 64,
                   "maxInflightMiBPerPeer": 32, "requestDeadlineSeconds": 5, "idleTimeoutSeconds": 60},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}]}
                    ]
                }
            }
        },
        "podAnnotations": {"example.com/team": "platform"},
        "podDisruptionBudget": {"minAvailable": "50%"},
        "topologySpread": {"whenUnsatisfiable": "DoNotSchedule"},
        "config": {"minComputeCapability": "7.0", "allowlist": CUSTOM_ALLOWLIST, "privilegedGpu": "deny",
                   "gpuSharing": {"kaiScheduler": {"schedulerName": "kai"}, "hami": {"enabled": False}}},
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
    },
}
# The value sets that render the webhook.
WEBHOOK_VALUE_SETS = {label: values for label, values in VALUE_SETS.items()
                      if values.get("webhook", {}).get("enabled", True)}

TESTS: list[tuple[str, Callable[[], None]]] = []
# libyaml when PyYAML has it: the pure-Python loader is most of the run time.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# kubernetes-validate re-reads its schema files (the definitions are megabytes)
# on every call; they never change during a run.
kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(
    kubernetes_validate.utils.schema_contents)


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=LOADER)


def test(fn: Callable[[], None]) -> Callable[[], None]:
    TESTS.append((fn.__name__, fn))
    return fn


class Failure(AssertionError):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Failure(message)


# --- helpers ---------------------------------------------------------------


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def render_files(values: dict[str, Any] | None = None, *, name: str = RELEASE,
                 namespace: str = NAMESPACE, kube: str | None = None,
                 api_versions: list[str] | None = None) -> dict[str, str]:
    """helm template: template path -> rendered text (NOTES.txt included).
    `kube` is the cluster's Kubernetes version (1.MINOR or a full version;
    default: the SDK's own, v1.36.0) and `api_versions` what it serves
    beyond the SDK's defaults (`helm template --kube-version
    --api-versions`)."""
    with helm.Chart.load(CHART) as chart:
        if kube is None and api_versions is None:
            return chart.render(values or {}, name=name, namespace=namespace)
        opts: dict[str, Any] = {"name": name, "namespace": namespace}
        if kube is not None:
            version = kube.lstrip("v")
            opts["kube_version"] = "v" + (f"{version}.0" if version.count(".") == 1 else version)
        if api_versions is not None:
            opts["api_versions"] = api_versions
        rendered: dict[str, str] = json.loads(helm_native.call_string(
            "helm_render", chart._raw(), json.dumps(values or {}), json.dumps(opts)))
        return rendered


_RENDERED: dict[str, list[dict[str, Any]]] = {}


def render(values: dict[str, Any] | None = None, *, name: str = RELEASE,
           namespace: str = NAMESPACE, kube: str | None = None,
           api_versions: list[str] | None = None) -> list[dict[str, Any]]:
    """The rendered objects (a fresh copy: tests may change them); `kube`
    and `api_versions` as render_files'."""
    cache_key = json.dumps([values or {}, name, namespace, kube, api_versions], sort_keys=True)
    if cache_key not in _RENDERED:
        objects = []
        for path, text in sorted(render_files(values, name=name, namespace=namespace, kube=kube,
                                              api_versions=api_versions).items()):
            if path.endswith("NOTES.txt"):
                continue
            for document in yaml.load_all(text, Loader=LOADER):
                if document is not None:
                    objects.append(document)
        _RENDERED[cache_key] = objects
    return copy.deepcopy(_RENDERED[cache_key])


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    metadata = obj.get("metadata", {})
    return (obj["kind"], metadata.get("namespace", ""), metadata["name"])


def by_key(objects: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for obj in objects:
        check(key(obj) not in out, f"rendered twice: {key(obj)}")
        out[key(obj)] = obj
    return out


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    check(len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}")
    return found[0]


_MANIFESTS: dict[tuple[str, ...], list[dict[str, Any]]] = {}


def manifests(*args: str) -> list[dict[str, Any]]:
    """`gpu-policy manifests ARGS`, parsed (a fresh copy)."""
    if args not in _MANIFESTS:
        check(BINARY.is_file(), f"{BINARY} is missing: run `cargo build` first")
        out = subprocess.run([str(BINARY), "manifests", *args], capture_output=True, text=True, check=False)
        check(out.returncode == 0, f"gpu-policy manifests failed: {out.stderr}")
        _MANIFESTS[args] = [d for d in yaml.load_all(out.stdout, Loader=LOADER) if d is not None]
    return copy.deepcopy(_MANIFESTS[args])


def diff(expected: Any, actual: Any, path: str = "") -> Iterator[str]:
    """Every differing field path, `path: manifests ... , chart ...`."""
    return jsondiff.diff(expected, actual, path, ("manifests", "chart"))


def config_diff(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Differences of two parsed config.yaml. Helm drops keys whose value is
    null; a missing Option field deserializes to None, the same Config."""
    actual = dict(actual)
    for k, v in expected.items():
        if v is None and k not in actual:
            actual[k] = None
    return list(diff(expected, actual, "data.config.yaml"))


def compare_with_manifests(chart_objects: list[dict[str, Any]],
                           reference: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    rendered = by_key(chart_objects)
    expected = by_key([o for o in reference if o["kind"] != "Namespace"])
    for k in sorted(set(rendered) - set(expected)):
        problems.append(f"{'/'.join(k)}: rendered by the chart, not in manifests")
    for k in sorted(expected):
        if k not in rendered:
            problems.append(f"{'/'.join(k)}: in manifests, not rendered by the chart")
            continue
        e, a = copy.deepcopy(expected[k]), copy.deepcopy(rendered[k])
        if k[0] == "ConfigMap":
            e_config = load_yaml(e["data"].pop("config.yaml"))
            a_config = load_yaml(a["data"].pop("config.yaml"))
            problems += [f"{'/'.join(k)} {p}" for p in config_diff(e_config, a_config)]
        problems += [f"{'/'.join(k)} {p}" for p in diff(e, a)]
    return problems


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    check(len(pod["containers"]) == 1, "one container expected")
    return pod["containers"][0]


def schema_rejects(values: dict[str, Any]) -> str:
    """The message of helm's schema validation, at render and in validate_schema."""
    with helm.Chart.load(CHART) as chart:
        try:
            chart.render(values, name=RELEASE, namespace=NAMESPACE)
        except helm.HelmValuesError as error:
            message = str(error)
        else:
            raise Failure(f"rendered with {values}: the schema should refuse it")
        try:
            chart.validate_schema(chart.merge_values(values))
        except helm.HelmValuesError:
            pass
        else:
            raise Failure(f"validate_schema accepted {values}")
    return message


def run_binary(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BINARY), *args], capture_output=True, text=True, check=False)


# --- the chart itself ------------------------------------------------------


@test
def chart_metadata() -> None:
    with helm.Chart.load(CHART) as chart:
        meta = chart.metadata
        check(meta.get("apiVersion") == "v2", f"apiVersion {meta.get('apiVersion')}")
        check(meta.get("name") == "gpu-policy", f"name {meta.get('name')}")
        check(meta.get("version") == "0.1.0", f"version {meta.get('version')}")
        check(meta.get("appVersion") == "0.1.0", f"appVersion {meta.get('appVersion')}")
        check(meta.get("kubeVersion") == f">={RELEASES[0]}.0-0", f"kubeVersion {meta.get('kubeVersion')}")
        check(bool(meta.get("description")), "no description")
        check(chart.crds == [], f"the chart ships CRDs: {chart.crds}")
    check(not (CHART / "crds").exists(), "charts/gpu-policy/crds/ exists")
    image = one(manifests(), "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    check(image.endswith(":0.1.0"), f"appVersion 0.1.0 but manifests' image is {image}")


@test
def lint_every_value_set() -> None:
    problems = []
    for label, values in VALUE_SETS.items():
        for kube in KUBE_VERSIONS:
            report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE, kube_version=f"v{kube}")
            # severity 1 (info, e.g. "icon is recommended") is fine; strict
            # treats warnings as errors, so 2 and 3 fail.
            bad = [m for m in report["messages"] if m["severity"] >= 2] + [
                {"error": e} for e in report["errors"]
            ]
            problems += [f"{label} (v{kube}): {m.get('path', '')} {m['error'].strip()}" for m in bad]
    check(not problems, "lint:\n  " + "\n  ".join(problems))


# The templates that read .Capabilities: what the cluster's release serves
# changes only the ResourceClaim rules' version and the bundled admission
# policies, which the tests render for every release; the rest is the same
# for every Kubernetes version.
CAPABILITIES_READERS = {"templates/_helpers.tpl", "templates/_webhooks.tpl",
                        "templates/admission-policies.yaml"}


@test
def only_the_release_dependent_templates_read_capabilities() -> None:
    with helm.Chart.load(CHART) as chart:
        readers = {t["name"] for t in chart.templates if ".Capabilities" in t["data"]}
    check(readers == CAPABILITIES_READERS, f"templates reading .Capabilities: {sorted(readers)}")
    # Everything but the webhook configurations (their claim rules) is the
    # same for every release.
    releases = {release: [o for o in render(FULL, kube=release) if not o["kind"].endswith("WebhookConfiguration")]
                for release in RELEASES}
    differing = [r for r in RELEASES if releases[r] != releases[NEWEST]]
    check(not differing, f"rendered differently for {differing} than for {NEWEST}")
    # A release newer than the newest supported renders as the newest (one
    # older than the oldest is refused by Chart.yaml's kubeVersion).
    check(render(POLICIES, kube="1.99") == render(POLICIES, kube=NEWEST), "1.99 renders unlike the newest")


@test
def values_config_mirrors_config_default() -> None:
    reference = one(manifests(), "ConfigMap")
    default_config = load_yaml(reference["data"]["config.yaml"])
    with helm.Chart.load(CHART) as chart:
        values_config = chart.values["config"]
    # The SDK returns maps with sorted keys: the order is read from the file.
    in_file = load_yaml((CHART / "values.yaml").read_text())["config"]
    check(list(in_file) == list(default_config),
          f"config keys {list(in_file)} != Config fields {list(default_config)} (same order)")
    problems = list(diff(default_config, values_config, "config"))
    check(not problems, "values.yaml config differs from Config::default():\n  " + "\n  ".join(problems))
    # Each field has a comment right above it.
    lines = (CHART / "values.yaml").read_text().splitlines()
    start = lines.index("config:")
    uncommented = []
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line and not line.startswith(" "):
            break
        match = re.match(r"^  ([A-Za-z]+):", line)
        if match and not lines[i - 1].lstrip().startswith("#"):
            uncommented.append(match.group(1))
    check(not uncommented, f"config fields without a comment: {uncommented}")


# The budget's values and the `serve` flags they set (templates/deployment.yaml).
BUDGET_FLAGS = {
    "maxConnections": "--max-connections",
    "maxConnectionsPerPeer": "--max-connections-per-peer",
    "maxInflightMiB": "--max-inflight-mib",
    "maxInflightMiBPerPeer": "--max-inflight-mib-per-peer",
    "requestDeadlineSeconds": "--request-deadline",
    "idleTimeoutSeconds": "--idle-timeout",
}


@test
def budget_values_leave_the_server_defaults_and_their_comments_state_them() -> None:
    """values.yaml sets no budget (the server's defaults hold) and gives each
    default in a comment, `# key: default`; those must be `serve --help`'s."""
    check(load_yaml((CHART / "values.yaml").read_text())["budget"] == {}, "budget is set in values.yaml")
    defaults: dict[str, str] = {}
    flag = None
    for line in run_binary("serve", "--help").stdout.splitlines():
        stripped = line.strip()
        if stripped.startswith("--"):
            flag = stripped.split()[0]
        match = re.search(r"\[default: ([^\]]+)\]", stripped)
        if match and flag:
            defaults[flag] = match.group(1)
    commented = dict(re.findall(r"^  # ([A-Za-z]+): (\d+)$", (CHART / "values.yaml").read_text(), re.M))
    for key, flag in BUDGET_FLAGS.items():
        check(commented.get(key) == defaults.get(flag),
              f"values.yaml gives {key}: {commented.get(key)}, `serve --help` {flag}: {defaults.get(flag)}")


@test
def schema_is_draft07_and_covers_every_value() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    check(schema.get("$schema") == "http://json-schema.org/draft-07/schema#", "not draft-07")
    jsonschema.Draft7Validator.check_schema(schema)
    with helm.Chart.load(CHART) as chart:
        defaults = chart.values
    jsonschema.Draft7Validator(schema).validate(defaults)

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = schema["definitions"][node["$ref"].rsplit("/", 1)[1]]
        return node

    missing: list[str] = []
    untyped: list[str] = []

    def walk(value: Any, node: dict[str, Any], path: str) -> None:
        node = resolve(node)
        if not any(k in node for k in ("type", "enum", "oneOf", "anyOf", "const")):
            untyped.append(path)
        if isinstance(value, dict):
            for k, v in value.items():
                props = node.get("properties", {})
                if k in props:
                    walk(v, props[k], f"{path}.{k}")
                elif isinstance(node.get("additionalProperties"), dict):
                    walk(v, node["additionalProperties"], f"{path}.{k}")
                else:
                    missing.append(f"{path}.{k}")
        elif isinstance(value, list) and isinstance(node.get("items"), dict):
            for i, v in enumerate(value):
                walk(v, node["items"], f"{path}[{i}]")

    walk(defaults, schema, "")
    check(not missing, f"values without a schema: {missing}")
    check(not untyped, f"schema entries without a type: {untyped}")


@test
def schema_rejects_bad_values() -> None:
    cases = {
        "failurePolicy: Sometimes": ({"failurePolicy": "Sometimes"}, "/failurePolicy"),
        "certificates.mode: vault": ({"certificates": {"mode": "vault"}}, "/certificates/mode"),
        "visibleDevicesPin: all": ({"config": {"visibleDevicesPin": "all"}}, "/config/visibleDevicesPin"),
        "visibleDevicesPin: ALL": ({"config": {"visibleDevicesPin": "ALL"}}, "/config/visibleDevicesPin"),
        "visibleDevicesPin: empty": ({"config": {"visibleDevicesPin": ""}}, "/config/visibleDevicesPin"),
        "config typo": ({"config": {"maxPerPods": 4}}, "/config"),
        "maxPerPod: -1": ({"config": {"maxPerPod": -1}}, "/config/maxPerPod"),
        "minComputeCapability: eight": ({"config": {"minComputeCapability": "eight"}},
                                        "/config/minComputeCapability"),
        "allowlist kind Pod": ({"config": {"allowlist": [{"namespace": "a", "kind": "Pod", "name": "b"}]}},
                               "/config/allowlist/0/kind"),
        "allowlist entry without name": ({"config": {"allowlist": [{"namespace": "a", "kind": "Job"}]}},
                                         "/config/allowlist/0"),
        "allowlist entry with name and namePrefix": (
            {"config": {"allowlist": [{"namespace": "a", "kind": "Job", "name": "b", "namePrefix": "batch-"}]}},
            "/config/allowlist/0"),
        "allowlist namePrefix too short": (
            {"config": {"allowlist": [{"namespace": "a", "kind": "Job", "namePrefix": "abc-"}]}},
            "/config/allowlist/0/namePrefix"),
        "allowlist namePrefix without a trailing -": (
            {"config": {"allowlist": [{"namespace": "a", "kind": "Job", "namePrefix": "batch"}]}},
            "/config/allowlist/0/namePrefix"),
        "image rule minimum 8.x": ({"config": {"imageComputeCapabilities": [{"pattern": "x", "minimum": "8.x"}]}},
                                   "/config/imageComputeCapabilities/0/minimum"),
        "privilegedGpu: refuse": ({"config": {"privilegedGpu": "refuse"}}, "/config/privilegedGpu"),
        "computeAffinity.whenNodesUnlabelled: never": (
            {"config": {"computeAffinity": {"whenNodesUnlabelled": "never"}}},
            "/config/computeAffinity/whenNodesUnlabelled"),
        "gpuSharing typo": ({"config": {"gpuSharing": {"kai": {"enabled": False}}}}, "/config/gpuSharing"),
        "gpuSharing.hami.enabled: a string": ({"config": {"gpuSharing": {"hami": {"enabled": "no"}}}},
                                              "/config/gpuSharing/hami/enabled"),
        "kaiScheduler.schedulerName: empty": ({"config": {"gpuSharing": {"kaiScheduler": {"schedulerName": ""}}}},
                                              "/config/gpuSharing/kaiScheduler/schedulerName"),
        "logFormat: xml": ({"logFormat": "xml"}, "/logFormat"),
        "budget.maxInflightMiBPerPeer under a review": ({"budget": {"maxInflightMiBPerPeer": 2}},
                                                        "/budget/maxInflightMiBPerPeer"),
        "budget typo": ({"budget": {"maxConnection": 10}}, "/budget"),
        "replicas: 0": ({"replicas": 0}, "/replicas"),
        "unknown top-level key": ({"replicaCount": 3}, "additional properties"),
        "webhook.enabled: a string": ({"webhook": {"enabled": "no"}}, "/webhook/enabled"),
        "admissionPolicies typo": ({"admissionPolicies": {"manifests": "x"}}, "/admissionPolicies"),
        "admissionPolicies.manifest: a list": ({"admissionPolicies": {"manifest": []}},
                                               "/admissionPolicies/manifest"),
        "pullPolicy: Sometimes": ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        "whenUnsatisfiable: Maybe": ({"topologySpread": {"whenUnsatisfiable": "Maybe"}},
                                     "/topologySpread/whenUnsatisfiable"),
        "clientAuth.names blank": ({"clientAuth": {"names": [""]}}, "/clientAuth/names/0"),
        "clientAuth typo": ({"clientAuth": {"caSecrets": "x"}}, "/clientAuth"),
        "networkPolicy.webhookFrom not a CIDR": ({"networkPolicy": {"webhookFrom": ["10.0.0.1"]}},
                                                 "/networkPolicy/webhookFrom/0"),
        "networkPolicy.metricsNamespace: Monitoring": ({"networkPolicy": {"metricsNamespace": "Monitoring"}},
                                                       "/networkPolicy/metricsNamespace"),
        "dashboard.enabled: a string": ({"dashboard": {"enabled": "yes"}}, "/dashboard/enabled"),
        "dashboard typo": ({"dashboard": {"label_value": "1"}}, "/dashboard"),
        "dashboard.label with a space": ({"dashboard": {"label": "grafana dashboard"}}, "/dashboard/label"),
        "dashboard.labelValue: a number": ({"dashboard": {"labelValue": 1}}, "/dashboard/labelValue"),
        "dashboard.labelValue with a space": ({"dashboard": {"labelValue": "a b"}}, "/dashboard/labelValue"),
        "dashboard.labels: a number": ({"dashboard": {"labels": {"team": 1}}}, "/dashboard/labels/team"),
        "dashboard.namespace: Monitoring": ({"dashboard": {"namespace": "Monitoring"}}, "/dashboard/namespace"),
        "reports.api: kyverno": ({"reports": {"api": "kyverno"}}, "/reports/api"),
        "reports.schedule: four fields": ({"reports": {"schedule": "0 * * *"}}, "/reports/schedule"),
        "reports.schedule with CRON_TZ": ({"reports": {"schedule": "CRON_TZ=UTC 0 * * * *"}}, "/reports/schedule"),
        "reports.schedule: @often": ({"reports": {"schedule": "@often"}}, "/reports/schedule"),
        "reports.resources typo": ({"reports": {"resources": {"limit": {"memory": "1Gi"}}}}, "/reports/resources"),
        "reports.resources: not a quantity": ({"reports": {"resources": {"limits": {"memory": "lots"}}}},
                                              "/reports/resources/limits/memory"),
        "reports typo": ({"reports": {"enable": True}}, "/reports"),
    }
    problems = []
    for label, (values, where) in cases.items():
        try:
            message = schema_rejects(values)
        except Failure as failure:
            problems.append(f"{label}: {failure}")
            continue
        if where not in message:
            problems.append(f"{label}: the message does not name {where}: {message!r}")
    # helm lint reports it too.
    report = helm.lint(CHART, {"failurePolicy": "Sometimes"}, namespace=NAMESPACE)
    if not report["errors"]:
        problems.append("helm lint accepted failurePolicy: Sometimes")
    check(not problems, "\n  ".join(["schema:"] + problems))


@test
def schema_accepts_good_values() -> None:
    cases = [
        {"failurePolicy": "Ignore"},
        {"certificates": {"mode": "cert-manager"}},
        {"config": {"visibleDevicesPin": "none"}},
        {"config": {"minComputeCapability": "8.0"}},
        {"config": {"minComputeCapability": 7.5}},
        {"config": {"minComputeCapability": None}},
        {"config": {"allowlist": []}},
        {"config": {"privilegedGpu": "deny"}},
        {"config": {"computeAffinity": {"whenNodesUnlabelled": "require"}}},
        # runtimeClassName "" injects no class; the reserved classes stay.
        {"config": {"runtimeClassName": ""}},
        {"config": {"gpuSharing": {"kaiScheduler": {"enabled": False, "schedulerName": ""}}}},
        {"config": {"gpuSharing": {"kaiScheduler": {"schedulerName": "kai"}, "hami": {"enabled": False}}}},
        {"podDisruptionBudget": {"minAvailable": "50%"}},
        {"dashboard": {"enabled": True, "label": "example.com/dashboard", "labelValue": "gpu"}},
        {"reports": {"enabled": True, "schedule": "@hourly"}},
        {"reports": {"enabled": True, "schedule": "0 */6 * * 1-5", "api": "openreports"}},
        *VALUE_SETS.values(),
    ]
    problems = []
    for values in cases:
        try:
            render(values)
        except helm.HelmError as error:
            problems.append(f"{values}: {error}")
    check(not problems, "refused:\n  " + "\n  ".join(problems))


@test
def template_refuses_what_the_server_refuses() -> None:
    # gpuRuntimeClasses must include runtimeClassName (Settings::from_config):
    # the schema cannot say it, the template fails.
    try:
        render({"config": {"runtimeClassName": "nvidia-cdi"}})
    except helm.HelmRenderError as error:
        check("gpuRuntimeClasses must include" in str(error), str(error))
    else:
        raise Failure("rendered a runtimeClassName outside gpuRuntimeClasses")
    render({"config": {"runtimeClassName": "nvidia-cdi", "gpuRuntimeClasses": ["nvidia", "nvidia-cdi"]}})


# --- the same objects as `gpu-policy manifests` ----------------------------


# The renders compared with `manifests`: (label, render()'s kube, the
# manifests arguments): `helm template` without --kube-version (the SDK's
# default release) against `manifests` for its default (the newest), and
# the chart for each supported release against `manifests --kube-version`.
RELEASE_RENDERS: list[tuple[str, str | None, tuple[str, ...]]] = [
    ("the SDK's default release", None, ()),
    *[(release, release, ("--kube-version", release)) for release in RELEASES],
]


def _manifests_test(kind: str) -> None:
    def run() -> None:
        problems = []
        for label, kube, args in RELEASE_RENDERS:
            chart_objects = [o for o in render(kube=kube) if o["kind"] == kind]
            reference = [o for o in manifests(*args) if o["kind"] == kind]
            check(reference, f"manifests {' '.join(args)} has no {kind}")
            problems += [f"{label}: {p}" for p in compare_with_manifests(chart_objects, reference)]
        check(not problems, f"{len(problems)} differences:\n  " + "\n  ".join(problems))

    run.__name__ = f"default_values_match_manifests[{kind}]"
    TESTS.append((run.__name__, run))


for _kind in ["ServiceAccount", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterRole",
              "ClusterRoleBinding", "Role", "RoleBinding", "Secret", "ConfigMap", "Deployment", "Service",
              "PodDisruptionBudget", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]:
    _manifests_test(_kind)


@test
def default_values_render_nothing_else() -> None:
    for label, kube, args in RELEASE_RENDERS:
        rendered = {key(o) for o in render(kube=kube)}
        expected = {key(o) for o in manifests(*args) if o["kind"] != "Namespace"}
        check(rendered == expected, f"{label}: only in the chart: {sorted(rendered - expected)}; "
              f"only in manifests: {sorted(expected - rendered)}")
    namespaces = [o for o in manifests() if o["kind"] == "Namespace"]
    check([n["metadata"]["name"] for n in namespaces] == [NAMESPACE], "manifests' Namespace")


@test
def other_namespace_image_replicas_failure_policy_match_manifests() -> None:
    values = {
        "image": {"repository": "registry.example/gpu-policy", "tag": "1.2.3"},
        "replicas": 3,
        "failurePolicy": "Ignore",
    }
    reference = manifests("--namespace", "gpu-system", "--image", "registry.example/gpu-policy:1.2.3",
                          "--replicas", "3", "--failure-policy", "Ignore")
    problems = compare_with_manifests(render(values, namespace="gpu-system"), reference)
    check(not problems, f"{len(problems)} differences:\n  " + "\n  ".join(problems))


@test
def rendered_config_is_accepted_by_the_server() -> None:
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"containers": [{"name": "train", "image": "nvidia/cuda:12.6.3-base-ubuntu24.04",
                                 "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
    }
    with tempfile.TemporaryDirectory() as tmp:
        pod_file = Path(tmp) / "pod.yaml"
        pod_file.write_text(yaml.safe_dump(pod))
        for label, values in WEBHOOK_VALUE_SETS.items():
            config_text = one(render(values), "ConfigMap")["data"]["config.yaml"]
            config_file = Path(tmp) / "config.yaml"
            config_file.write_text(config_text)
            out = run_binary("check", "--config", str(config_file), "-f", str(pod_file), "-o", "json")
            check(out.returncode == 0,
                  f"{label}: gpu-policy check --config <rendered config.yaml> exited {out.returncode}: "
                  f"{out.stderr.strip()}\n{config_text}")
            report = json.loads(out.stdout)
            check(report[0]["allowed"], f"{label}: the GPU pod was denied: {report}")


@test
def allowlist_roles_follow_install_rs() -> None:
    values = {"config": {"allowlist": CUSTOM_ALLOWLIST}}
    objects = render(values)
    # install::allowlist_roles: one Role per namespace (sorted), one rule per
    # kind in Workload::ALL order, names sorted; a kind with a namePrefix
    # entry (PodTemplate aside: never watched) without resourceNames; no
    # Role without a rule.
    expected_roles = {}
    for namespace in sorted({e["namespace"] for e in CUSTOM_ALLOWLIST}):
        rules = []
        for kind, group, resource in WORKLOADS:
            entries = [e for e in CUSTOM_ALLOWLIST if e["namespace"] == namespace and e["kind"] == kind]
            names = sorted(e["name"] for e in entries if "name" in e)
            if kind != "PodTemplate" and any("namePrefix" in e for e in entries):
                rules.append({"apiGroups": [group], "resources": [resource], "verbs": ["list", "watch"]})
            elif names:
                rules.append({"apiGroups": [group], "resources": [resource], "resourceNames": names,
                              "verbs": ["list", "watch"]})
        if rules:
            expected_roles[namespace] = rules
    check(expected_roles["nvidia-dra-driver-gpu"][0] == {
        "apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["list", "watch"]},
        f"the namePrefix rule: {expected_roles['nvidia-dra-driver-gpu']}")
    roles = {o["metadata"]["namespace"]: o for o in objects
             if o["kind"] == "Role" and o["metadata"]["name"] == "gpu-policy-allowlist"}
    check(sorted(roles) == sorted(expected_roles), f"Roles in {sorted(roles)}, expected {sorted(expected_roles)}")
    problems = []
    for namespace, rules in expected_roles.items():
        problems += [f"{namespace}: {p}" for p in diff(rules, roles[namespace]["rules"], "rules")]
        binding = one([o for o in objects if o["metadata"].get("namespace") == namespace], "RoleBinding",
                      "gpu-policy-allowlist")
        problems += [f"{namespace}: {p}" for p in diff(
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gpu-policy-allowlist"},
            binding["roleRef"], "roleRef")]
        problems += [f"{namespace}: {p}" for p in diff(
            [{"kind": "ServiceAccount", "name": "gpu-policy", "namespace": NAMESPACE}],
            binding["subjects"], "subjects")]
    check(not problems, "\n  ".join(problems))
    no_allowlist = render({"config": {"allowlist": []}})
    check(not [o for o in no_allowlist if o["metadata"]["name"] == "gpu-policy-allowlist"],
          "an empty allowlist still renders allowlist Roles")


@test
def custom_config_matches_manifests_of_the_same_config() -> None:
    """The ConfigMap and the allowlist Roles come from one config: the chart's
    `config` values and `gpu-policy manifests --config FILE` agree."""
    values = {"config": {"allowlist": CUSTOM_ALLOWLIST,
                         "gpuResources": ["nvidia.com/gpu", "nvidia.com/vgpu"]}}
    objects = render(values)
    config_text = one(objects, "ConfigMap")["data"]["config.yaml"]
    with tempfile.TemporaryDirectory() as tmp:
        config_file = Path(tmp) / "config.yaml"
        config_file.write_text(config_text)
        reference = manifests("--config", str(config_file))
    problems = compare_with_manifests(objects, reference)
    check(not problems, f"{len(problems)} differences:\n  " + "\n  ".join(problems))


# --- the permissions docs/security.md lists --------------------------------

SECURITY_DOC = ROOT / "docs" / "security.md"
PERMISSIONS_HEADING = "## What the install's ServiceAccounts may do"
# One granted verb: (ServiceAccount, where, API group, resource, name, verb);
# name "*" for every name. The allowlist Roles, whose kinds and names come
# from config.allowlist, are one placeholder where/resource/name.
Grant = tuple[str, str, str, str, str, str]
ALLOWLISTED = "(allowlisted)"


def documented_permissions() -> set[Grant]:
    """The rows of the table under PERMISSIONS_HEADING, one grant per verb."""
    text = SECURITY_DOC.read_text()
    check(PERMISSIONS_HEADING in text, f"{SECURITY_DOC.name} has no {PERMISSIONS_HEADING!r}")
    section = text.split(PERMISSIONS_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    check(rows, "the permissions table has no rows")
    ticked = re.compile(r"`([^`]*)`")
    grants: set[Grant] = set()
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split(" | ")]
        check(len(cells) == 6, f"not 6 cells: {row}")
        account, where, resources, names, verbs, _why = cells
        (account,) = ticked.findall(account)
        if where == "cluster":
            scope = "cluster"
        elif where.startswith("namespace "):
            scope = ticked.findall(where)[0]
        else:
            check(where == "each namespace of `allowlist`", f"where: {where!r}")
            scope = ALLOWLISTED
        if scope == ALLOWLISTED:
            check(resources == "the allowlisted kinds" and names == "the allowlisted names", row)
            kinds = [("", ALLOWLISTED)]
            granted_names = [ALLOWLISTED]
        else:
            kinds = [tuple(reversed(r.split(".", 1))) if "." in r else ("", r)
                     for r in ticked.findall(resources)]
            granted_names = ["*"] if names == "all" else ticked.findall(names)
        check(kinds and granted_names and ticked.findall(verbs), f"empty cell: {row}")
        for group, resource in kinds:
            for name in granted_names:
                for verb in ticked.findall(verbs):
                    grants.add((account, scope, group, resource, name, verb))
    return grants


def rendered_permissions(objects: list[dict[str, Any]]) -> set[Grant]:
    """What the objects' RBAC grants the ServiceAccounts they bind."""
    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
             for o in objects if o["kind"] in ("Role", "ClusterRole")}
    grants: set[Grant] = set()
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        namespace = binding["metadata"].get("namespace", "")
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], namespace if ref["kind"] == "Role" else "", ref["name"]))
        check(role is not None, f"{key(binding)} binds {ref}, which is not rendered")
        allowlist = ref["name"].endswith("-allowlist")
        scope = ALLOWLISTED if allowlist else ("cluster" if binding["kind"] == "ClusterRoleBinding" else namespace)
        for subject in binding["subjects"]:
            check(subject["kind"] == "ServiceAccount" and subject["namespace"] == NAMESPACE,
                  f"{key(binding)} binds {subject}")
            for rule in role["rules"]:
                check(set(rule) <= {"apiGroups", "resources", "resourceNames", "verbs"}, f"rule {rule}")
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for name in rule.get("resourceNames", ["*"]):
                            for verb in rule["verbs"]:
                                if allowlist:
                                    group, resource, name = "", ALLOWLISTED, ALLOWLISTED
                                grants.add((subject["name"], scope, group, resource, name, verb))
    return grants


@test
def permissions_are_the_documented_table() -> None:
    documented = documented_permissions()
    problems = []
    for label, objects, accounts in [
        ("the chart with the reports CronJob", render(REPORTS), {RELEASE, REPORTS_NAME}),
        ("gpu-policy manifests", manifests(), {RELEASE}),
    ]:
        expected = {g for g in documented if g[0] in accounts}
        granted = rendered_permissions(objects)
        problems += [f"{label} grants, the table does not list: {g}" for g in sorted(granted - expected)]
        problems += [f"{label} lacks what the table lists: {g}" for g in sorted(expected - granted)]
        rendered_accounts = {o["metadata"]["name"] for o in objects if o["kind"] == "ServiceAccount"}
        if rendered_accounts != accounts:
            problems.append(f"{label}: ServiceAccounts {sorted(rendered_accounts)}")
    check(not problems, "\n  ".join(problems))
    # The table's own check can fail: a verb more is seen.
    objects = render(REPORTS)
    one(objects, "ClusterRole", RELEASE)["rules"][0]["verbs"].append("get")
    check(("gpu-policy", "cluster", "", "namespaces", "*", "get") in rendered_permissions(objects) - documented,
          "an added verb goes unseen")


@test
def guard_policies_name_the_install_service_accounts() -> None:
    def token_accounts(objects: list[dict[str, Any]]) -> str | None:
        policies = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"
                    and o["metadata"]["name"].endswith("-service-account-tokens")]
        if not policies:
            return None
        (variable,) = [v for v in policies[0]["spec"]["variables"] if v["name"] == "serviceAccounts"]
        return variable["expression"]

    def webhook_guard(objects: list[dict[str, Any]]) -> bool:
        return any(o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("-webhook-configurations")
                   for o in objects)

    for values, accounts, guard in [
        ({}, "['gpu-policy']", True),
        (REPORTS, "['gpu-policy', 'gpu-policy-reports']", True),
        (FULL, "['gpu-policy']", True),
        (merge(POLICIES_ALONE, REPORTS), "['gpu-policy-reports']", False),
        (POLICIES_ALONE, None, False),
    ]:
        objects = render(values)
        check(token_accounts(objects) == accounts, f"{values}: {token_accounts(objects)}")
        check(webhook_guard(objects) == guard, f"{values}: webhook configuration guard")
    other = render({"fullnameOverride": "gpu-policy-b", **REPORTS}, namespace="gpu-system")
    policy = one(other, "ValidatingAdmissionPolicy", "gpu-policy-b-webhook-configurations")
    check(policy["spec"]["matchConditions"][0]["expression"]
          == "request.userInfo.username == 'system:serviceaccount:gpu-system:gpu-policy-b'",
          f"matchConditions {policy['spec']['matchConditions']}")
    check(token_accounts(other) == "['gpu-policy-b', 'gpu-policy-b-reports']", f"{token_accounts(other)}")
    binding = one(other, "ValidatingAdmissionPolicyBinding", "gpu-policy-b-service-account-tokens")
    check(binding["spec"] == {"policyName": "gpu-policy-b-service-account-tokens", "validationActions": ["Deny"]},
          f"binding {binding['spec']}")


# --- cert-manager, monitoring, other values --------------------------------


def serve_flags() -> set[str]:
    out = run_binary("serve", "--help")
    check(out.returncode == 0, f"gpu-policy serve --help: {out.stderr}")
    return set(re.findall(r"(--[a-z][a-z-]+)", out.stdout))


@test
def cert_manager_mode() -> None:
    objects = render(FULL)
    certificate = one(objects, "Certificate", "gpu-policy")
    spec = certificate["spec"]
    check(certificate["metadata"]["namespace"] == NAMESPACE, "Certificate namespace")
    check(spec["secretName"] == "gpu-policy-tls", f"secretName {spec['secretName']}")
    check("gpu-policy.gpu-policy.svc" in spec["dnsNames"], f"dnsNames {spec['dnsNames']}")
    # No issuerRef given: the usual bootstrap.
    selfsigned = one(objects, "Issuer", "gpu-policy-selfsigned")
    check(selfsigned["spec"] == {"selfSigned": {}}, f"self-signed Issuer {selfsigned['spec']}")
    ca = one(objects, "Certificate", "gpu-policy-ca")["spec"]
    check(ca["isCA"] is True and ca["issuerRef"]["name"] == "gpu-policy-selfsigned"
          and ca["issuerRef"]["kind"] == "Issuer", f"CA Certificate {ca}")
    ca_issuer = one(objects, "Issuer", "gpu-policy-ca")
    check(ca_issuer["spec"] == {"ca": {"secretName": ca["secretName"]}}, f"CA Issuer {ca_issuer['spec']}")
    check(spec["issuerRef"]["name"] == "gpu-policy-ca" and spec["issuerRef"]["kind"] == "Issuer",
          f"serving certificate issuerRef {spec['issuerRef']}")

    for kind in ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]:
        annotations = one(objects, kind)["metadata"].get("annotations", {})
        check(annotations.get("cert-manager.io/inject-ca-from") == "gpu-policy/gpu-policy",
              f"{kind} annotations {annotations}")
        for webhook in one(objects, kind)["webhooks"]:
            check("caBundle" not in webhook["clientConfig"], f"{kind} {webhook['name']} has a caBundle")

    main = container(objects)
    args = main["args"]
    check(args == ["serve", "--config", "/etc/gpu-policy/config.yaml",
                   "--tls-cert", "/var/run/gpu-policy/certs/tls.crt",
                   "--tls-key", "/var/run/gpu-policy/certs/tls.key"], f"args {args}")
    check("--cert-secret" not in args and "--webhook-config" not in args, f"args {args}")
    mount = [m for m in main["volumeMounts"] if m["mountPath"] == "/var/run/gpu-policy/certs"]
    volumes = one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    certs = [v for v in volumes if v["name"] == mount[0]["name"]]
    check(certs and certs[0].get("secret", {}).get("secretName") == "gpu-policy-tls",
          f"certs volume {certs}")
    # No Secret route: cert-manager writes the Secret, so the chart renders
    # none, and no Secret RBAC and no webhook updates.
    check(not [o for o in objects if o["kind"] == "Secret"], "a Secret rendered in cert-manager mode")
    own_role = one(objects, "Role", "gpu-policy")
    check(not [r for r in own_role["rules"] if "secrets" in r["resources"]],
          "the Role may read or write Secrets in cert-manager mode")
    rules = one(objects, "ClusterRole")["rules"]
    check(not [r for r in rules if "admissionregistration.k8s.io" in r["apiGroups"]],
          "the ClusterRole may update the webhook configurations in cert-manager mode")

    # Self mode: none of that.
    default = render()
    check(not [o for o in default if o["kind"] in ("Certificate", "Issuer", "ServiceMonitor", "PrometheusRule")],
          "cert-manager or monitoring objects with default values")
    for kind in ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]:
        check("annotations" not in one(default, kind)["metadata"], f"{kind} annotated in self mode")


@test
def cert_manager_external_issuer() -> None:
    objects = render(VALUE_SETS["cert-manager external issuer"])
    check(not [o for o in objects if o["kind"] == "Issuer"], "bootstrap Issuers rendered with an issuerRef")
    check([o["metadata"]["name"] for o in objects if o["kind"] == "Certificate"] == ["gpu-policy"],
          "one Certificate expected")
    ref = one(objects, "Certificate")["spec"]["issuerRef"]
    check(ref == {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}, f"issuerRef {ref}")


@test
def every_serve_flag_exists() -> None:
    flags = serve_flags()
    for label, values in WEBHOOK_VALUE_SETS.items():
        args = container(render(values))["args"]
        check(args[0] == "serve", f"{label}: {args}")
        unknown = [a for a in args if a.startswith("--") and a not in flags]
        check(not unknown, f"{label}: `gpu-policy serve` has no {unknown}")


@test
def service_monitor() -> None:
    objects = render(FULL)
    monitor = one(objects, "ServiceMonitor")
    check(monitor["apiVersion"] == "monitoring.coreos.com/v1", monitor["apiVersion"])
    service = one(objects, "Service")
    check(monitor["spec"]["selector"]["matchLabels"] == service["metadata"]["labels"], "selector")
    ports = {p["name"] for p in service["spec"]["ports"]}
    endpoints = monitor["spec"]["endpoints"]
    check(endpoints and all(e["port"] in ports and e.get("path") == "/metrics" for e in endpoints),
          f"endpoints {endpoints}")
    # The server's `endpoint` label, not prometheus-operator's target label of
    # that name (which would rename it exported_endpoint): the alerts and the
    # dashboard group by it.
    check(all(e.get("honorLabels") is True for e in endpoints), f"honorLabels: {endpoints}")
    labelled = one(render(VALUE_SETS["everything set"]), "ServiceMonitor")
    check(labelled["metadata"]["labels"].get("release") == "prometheus", "serviceMonitor.labels")


@test
def prometheus_rule() -> None:
    rule = one(render(FULL), "PrometheusRule")
    check(rule["apiVersion"] == "monitoring.coreos.com/v1", rule["apiVersion"])
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    wanted = {
        "GpuPolicyBadRequests": ["gpu_policy_admission_requests_total", 'decision="bad_request"'],
        "GpuPolicyDenialSpike": ["gpu_policy_admission_requests_total", 'decision="denied"'],
        "GpuPolicyHighLatency": ["histogram_quantile(0.99", "gpu_policy_admission_duration_seconds_bucket",
                                 "> 0.5"],
        "GpuPolicyCertificateExpiring": ["gpu_policy_certificate_expiry_timestamp_seconds - time() < 14 * 86400"],
        "GpuPolicyClusterCacheStale": ["gpu_policy_cluster_cache_stale == 1"],
        "GpuPolicyReloadFailed": ["gpu_policy_reload_success == 0"],
        "GpuPolicyWebhookCallErrors": ["apiserver_admission_webhook_rejection_count"],
        "GpuPolicyDown": ["up{"],
    }
    problems = []
    for name, parts in wanted.items():
        if name not in alerts:
            problems.append(f"no alert {name}")
            continue
        alert = alerts[name]
        problems += [f"{name}: expr lacks {p!r}: {alert['expr']}" for p in parts if p not in alert["expr"]]
        if "severity" not in alert.get("labels", {}):
            problems.append(f"{name}: no severity")
        if not alert.get("annotations", {}).get("summary"):
            problems.append(f"{name}: no summary")
        if not re.fullmatch(r"\d+[smh]", str(alert.get("for", ""))):
            problems.append(f"{name}: for {alert.get('for')}")
        if alert["expr"].count("(") != alert["expr"].count(")"):
            problems.append(f"{name}: unbalanced parentheses in {alert['expr']}")
    check(alerts["GpuPolicyClusterCacheStale"]["for"] == "10m", "stale cache: for 10m")
    # Metric names the server really exports (src/metrics.rs and its room).
    metrics = "".join(path.read_text() for path in
                      [ROOT / "src" / "metrics.rs", *sorted((ROOT / "src" / "metrics").rglob("*.rs"))])
    for name in ["admission_requests", "admission_duration_seconds", "certificate_expiry_timestamp_seconds",
                 "reload_success", "cluster_cache_stale"]:
        if f'"{name}"' not in metrics:
            problems.append(f"src/metrics no longer registers {name}")
    # Prometheus' own templates survive helm: {{ $labels.x }} and {{ $value }}.
    descriptions = " ".join(a["annotations"].get("description", "") for a in alerts.values())
    if "{{ $labels.endpoint }}" not in descriptions or "{{ $value" not in descriptions:
        problems.append("alert descriptions lost their Prometheus templates")
    thresholds = one(render({"prometheusRule": {"enabled": True, "latencyThresholdSeconds": 0.25,
                                                "certificateExpiryDays": 30}}), "PrometheusRule")
    exprs = " ".join(r["expr"] for g in thresholds["spec"]["groups"] for r in g["rules"])
    if "> 0.25" not in exprs or "< 30 * 86400" not in exprs:
        problems.append(f"thresholds not applied: {exprs}")
    no_monitor = one(render({"prometheusRule": {"enabled": True}}), "PrometheusRule")
    if any(r["alert"] == "GpuPolicyDown" for g in no_monitor["spec"]["groups"] for r in g["rules"]):
        problems.append("GpuPolicyDown (needs the ServiceMonitor's job label) without serviceMonitor")
    check(not problems, "\n  ".join(problems))


@test
def restricted_pod_security_in_every_value_set() -> None:
    for label, values in WEBHOOK_VALUE_SETS.items():
        pod = one(render(values), "Deployment")["spec"]["template"]["spec"]
        context = pod["securityContext"]
        check(context.get("runAsNonRoot") is True and context.get("runAsUser") == 65532
              and context.get("seccompProfile") == {"type": "RuntimeDefault"}, f"{label}: pod {context}")
        for c in pod["containers"]:
            sc = c["securityContext"]
            check(sc.get("allowPrivilegeEscalation") is False and sc.get("readOnlyRootFilesystem") is True
                  and sc.get("capabilities") == {"drop": ["ALL"]}, f"{label}: container {sc}")


@test
def other_values_reach_the_objects() -> None:
    values = VALUE_SETS["everything set"]
    objects = render(values, name="other-release")
    names = {o["metadata"]["name"] for o in objects}
    check(names <= {"gpu-policy-b", "gpu-policy-b-allowlist", "gpu-policy-b-tls", "gpu-policy-b-webhook-configurations",
                    "gpu-policy-b-service-account-tokens"}, f"names {names}")
    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    main = pod["containers"][0]
    check(deployment["spec"]["replicas"] == 3, "replicas")
    check(main["image"] == "registry.example/gpu-policy:1.2.3", main["image"])
    check(main["imagePullPolicy"] == "Always", "pullPolicy")
    check(pod["imagePullSecrets"] == [{"name": "regcred"}], "imagePullSecrets")
    check(pod["nodeSelector"] == values["nodeSelector"], "nodeSelector")
    check(pod["tolerations"] == values["tolerations"], "tolerations")
    check(pod["affinity"] == values["affinity"], "affinity")
    check(deployment["spec"]["template"]["metadata"]["annotations"] == values["podAnnotations"], "podAnnotations")
    check(pod["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "DoNotSchedule", "topologySpread")
    check(one(objects, "PodDisruptionBudget")["spec"]["minAvailable"] == "50%", "minAvailable")
    labels = deployment["metadata"]["labels"]
    check(labels == {"app.kubernetes.io/name": "gpu-policy-b", "app.kubernetes.io/instance": "other-release"},
          f"labels {labels}")
    args = main["args"]
    for flag, value in [("--cert-secret", "gpu-policy/gpu-policy-b-tls"), ("--webhook-config", "gpu-policy-b"),
                        ("--service-namespace", NAMESPACE), ("--service-name", "gpu-policy-b"),
                        ("--log-format", "text"), ("--max-connections", "300"),
                        ("--max-connections-per-peer", "100"), ("--max-inflight-mib", "64"),
                        ("--max-inflight-mib-per-peer", "32"), ("--request-deadline", "5"),
                        ("--idle-timeout", "60")]:
        check(flag in args and args[args.index(flag) + 1] == value, f"{flag} {value} not in {args}")
    rules = one(objects, "ClusterRole")["rules"]
    check(rules[-1]["resourceNames"] == ["gpu-policy-b"], f"ClusterRole {rules[-1]}")
    secret_role = one(objects, "Role", "gpu-policy-b")
    check(secret_role["rules"][0]["resourceNames"] == ["gpu-policy-b-tls"], "Secret Role")
    for kind in ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]:
        for webhook in one(objects, kind)["webhooks"]:
            check(webhook["clientConfig"]["service"]["name"] == "gpu-policy-b", f"{kind} service")
            if webhook["name"] in ("enforce.gpu-policy.io", "mutate.gpu-policy.io", "namespace.gpu-policy.io"):
                check(webhook["failurePolicy"] == "Ignore", f"{webhook['name']} failurePolicy")
    config = load_yaml(one(objects, "ConfigMap")["data"]["config.yaml"])
    check(config["minComputeCapability"] == "7.0", f"minComputeCapability {config['minComputeCapability']!r}")
    check(config["allowlist"] == CUSTOM_ALLOWLIST, "allowlist")
    check(config["privilegedGpu"] == "deny", f"privilegedGpu {config['privilegedGpu']!r}")
    sharing = {"kaiScheduler": {"enabled": True, "schedulerName": "kai"}, "hami": {"enabled": False}}
    check(config["gpuSharing"] == sharing, f"gpuSharing {config['gpuSharing']}")

    off = render({"podDisruptionBudget": {"enabled": False}, "topologySpread": {"enabled": False}})
    check(not [o for o in off if o["kind"] == "PodDisruptionBudget"], "PDB disabled but rendered")
    check("topologySpreadConstraints" not in one(off, "Deployment")["spec"]["template"]["spec"],
          "topologySpread disabled but rendered")


def render_error(values: dict[str, Any], *, kube: str | None = None,
                 api_versions: list[str] | None = None) -> str:
    """The message of a template `fail` for `values` (`kube` and
    `api_versions` as render's)."""
    try:
        render(values, kube=kube, api_versions=api_versions)
    except helm.HelmRenderError as error:
        return str(error)
    raise Failure(f"rendered with {values}: the template should refuse it")


@test
def client_certificates() -> None:
    ca_dir = "/var/run/gpu-policy/client-ca"
    objects = render(HARDENED)
    main = container(objects)
    args = main["args"]
    check(args[args.index("--client-ca") + 1] == f"{ca_dir}/ca.crt", f"--client-ca in {args}")
    names = [args[i + 1] for i, a in enumerate(args) if a == "--client-name"]
    check(names == CLIENT_NAMES, f"--client-name {names}")
    mount = [m for m in main["volumeMounts"] if m["name"] == "client-ca"]
    check(mount == [{"name": "client-ca", "mountPath": ca_dir, "readOnly": True}], f"mount {mount}")
    volumes = one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    volume = [v for v in volumes if v["name"] == "client-ca"]
    check(volume == [{"name": "client-ca", "secret": {"secretName": CLIENT_CA_SECRET}}], f"volume {volume}")
    # A mounted file, never subPath: a rotated CA reaches the pod.
    check(all("subPath" not in m for m in main["volumeMounts"]), "subPath mount")

    from_config_map = render({"clientAuth": {"enabled": True, "caConfigMap": "kube-root-ca.crt"}})
    main = container(from_config_map)
    args = main["args"]
    check(args[args.index("--client-ca") + 1] == f"{ca_dir}/ca.crt" and "--client-name" not in args,
          f"args {args}")
    volumes = one(from_config_map, "Deployment")["spec"]["template"]["spec"]["volumes"]
    check([v for v in volumes if v["name"] == "client-ca"]
          == [{"name": "client-ca", "configMap": {"name": "kube-root-ca.crt"}}], f"volumes {volumes}")
    other_key = container(render({"clientAuth": {"enabled": True, "caSecret": "s", "caKey": "tls.crt"}}))["args"]
    check(other_key[other_key.index("--client-ca") + 1] == f"{ca_dir}/tls.crt", f"caKey: {other_key}")

    # Off by default, and off when disabled even with a CA named.
    for values in [{}, {"clientAuth": {"caSecret": CLIENT_CA_SECRET, "names": CLIENT_NAMES}}]:
        main = container(render(values))
        check(not [a for a in main["args"] if a.startswith("--client-")], f"{values}: {main['args']}")
        check(not [m for m in main["volumeMounts"] if m["name"] == "client-ca"], f"{values}: mounted")

    message = render_error({"clientAuth": {"enabled": True}})
    check("set clientAuth.caSecret or clientAuth.caConfigMap" in message, message)
    message = render_error({"clientAuth": {"enabled": True, "caSecret": "a", "caConfigMap": "b"}})
    check("not both" in message, message)

    # The rendered flags are ones `gpu-policy serve` takes together.
    with tempfile.TemporaryDirectory() as tmp:
        # A timeout in case the flags were taken and the server started.
        out = subprocess.run([str(BINARY), "serve", "--client-name", "x", "--no-cluster", "--certs-dir", tmp,
                              "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
                             capture_output=True, text=True, check=False, timeout=60)
        check(out.returncode != 0 and "--client-ca" in out.stderr,
              f"--client-name without --client-ca: exit {out.returncode}: {out.stderr}")


@test
def registry_credentials() -> None:
    directory = "/var/run/gpu-policy/registry"
    objects = render(REGISTRY)
    main = container(objects)
    mount = [m for m in main["volumeMounts"] if m["name"] == "registry-credentials"]
    check(mount == [{"name": "registry-credentials", "mountPath": directory, "readOnly": True}], f"mount {mount}")
    volumes = one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    volume = [v for v in volumes if v["name"] == "registry-credentials"]
    expected = {"secretName": REGISTRY_PULL_SECRET,
                "items": [{"key": ".dockerconfigjson", "path": ".dockerconfigjson"}]}
    check(volume == [{"name": "registry-credentials", "secret": expected}], f"volume {volume}")
    # A mounted directory, never subPath: a changed Secret reaches the pod.
    check(all("subPath" not in m for m in main["volumeMounts"]), "subPath mount")
    config = load_yaml(one(objects, "ConfigMap")["data"]["config.yaml"])
    block = config["imageResolution"]
    check(block.get("credentialsFile") == f"{directory}/.dockerconfigjson", f"credentialsFile in {block}")
    check(block["mode"] == "registry" and block["table"], f"the rest of the block stays: {block}")

    # No Secret named: nothing mounted, no credentialsFile.
    for values in [{}, {"config": {"imageResolution": {"mode": "registry"}}}]:
        objects = render(values)
        check(not [m for m in container(objects)["volumeMounts"] if m["name"] == "registry-credentials"],
              f"{values}: mounted")
        config = load_yaml(one(objects, "ConfigMap")["data"]["config.yaml"])
        check("credentialsFile" not in config["imageResolution"], f"{values}: {config['imageResolution']}")

    # The server reads the mounted file: check --resolve-images with the
    # rendered config and a dockerconfigjson where the chart puts it fails
    # only on the path, and reads a file given instead.
    with tempfile.TemporaryDirectory() as tmp:
        config_file = Path(tmp) / "config.yaml"
        config_file.write_text(one(render(REGISTRY), "ConfigMap")["data"]["config.yaml"])
        pod_file = Path(tmp) / "pod.yaml"
        pod_file.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t", "namespace": "ml"},
            "spec": {"containers": [{"name": "t", "image": "127.0.0.1:9/t:1",
                                     "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}))
        out = run_binary("check", "--config", str(config_file), "-f", str(pod_file), "--resolve-images")
        check(out.returncode == 2 and f"{directory}/.dockerconfigjson" in out.stderr,
              f"the mounted path is read: exit {out.returncode}: {out.stderr}")
        credentials = Path(tmp) / ".dockerconfigjson"
        credentials.write_text(json.dumps({"auths": {"127.0.0.1:9": {"auth": "dTpw"}}}))
        out = run_binary("check", "--config", str(config_file), "-f", str(pod_file), "--resolve-images",
                         "--registry-credentials", str(credentials), "-o", "json")
        check(out.returncode == 0, f"with the file: exit {out.returncode}: {out.stderr}")
    message = schema_rejects({"imageResolution": {"pullSecret": {"name": "Bad_Name"}}})
    check("/imageResolution/pullSecret/name" in message, message)


@test
def network_policy() -> None:
    objects = render(HARDENED)
    policy = one(objects, "NetworkPolicy")
    check(policy["apiVersion"] == "networking.k8s.io/v1", policy["apiVersion"])
    check(policy["metadata"]["namespace"] == NAMESPACE, "namespace")
    deployment = one(objects, "Deployment")
    spec = policy["spec"]
    check(spec["podSelector"] == {"matchLabels": deployment["spec"]["selector"]["matchLabels"]},
          f"podSelector {spec['podSelector']}")
    check(spec["policyTypes"] == ["Ingress"], f"policyTypes {spec['policyTypes']}")
    ports = {p["name"]: p["containerPort"] for p in container(objects)["ports"]}
    expected = [
        {"from": [{"ipBlock": {"cidr": cidr}} for cidr in WEBHOOK_FROM],
         "ports": [{"protocol": "TCP", "port": ports["https"]}]},
        {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
         "ports": [{"protocol": "TCP", "port": ports["metrics"]}]},
    ]
    check(ports == {"https": 8443, "metrics": 8080}, f"container ports {ports}")
    problems = list(jsondiff.diff(expected, spec["ingress"], "spec.ingress", ("expected", "chart")))
    check(not problems, "\n  ".join(problems))

    other = one(render({"networkPolicy": {"enabled": True, "webhookFrom": ["172.16.0.0/12"],
                                          "metricsNamespace": "observability"}}), "NetworkPolicy")
    check(other["spec"]["ingress"][1]["from"][0]["namespaceSelector"]["matchLabels"]
          == {"kubernetes.io/metadata.name": "observability"}, f"metricsNamespace: {other['spec']}")
    no_metrics = one(render({"networkPolicy": {"enabled": True, "webhookFrom": ["172.16.0.0/12"],
                                               "metricsNamespace": ""}}), "NetworkPolicy")
    check([r["ports"][0]["port"] for r in no_metrics["spec"]["ingress"]] == [8443],
          f"metricsNamespace empty: {no_metrics['spec']['ingress']}")
    check(not [o for o in render() if o["kind"] == "NetworkPolicy"], "a NetworkPolicy with default values")
    message = render_error({"networkPolicy": {"enabled": True}})
    check("networkPolicy.webhookFrom must list" in message, message)


@test
def notes() -> None:
    for values in [{}, FULL]:
        text = next(t for p, t in render_files(values).items() if p.endswith("NOTES.txt"))
        for line in ["kubectl label namespace ml gpu-policy.io/mode=audit",
                     "gpu-policy.io/mode=warn", "gpu-policy.io/mode=enforce",
                     "kubectl apply --dry-run=server -f pod.yaml"]:
            check(line in text, f"NOTES.txt lacks {line!r}")
        check(text.index("mode=audit") < text.index("mode=warn") < text.index("mode=enforce"),
              "NOTES.txt: audit, then warn, then enforce")


# --- the Grafana dashboard --------------------------------------------------

DASHBOARD_FILE = CHART / "dashboards" / "gpu-policy.json"
DASHBOARD = {"dashboard": {"enabled": True}}


def validate_strictly(objects: list[dict[str, Any]]) -> list[str]:
    """kubernetes-validate's complaints about `objects`, for every KUBE_VERSIONS."""
    problems = []
    for obj in objects:
        for kube in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(obj, kube, strict=True)
            except kubernetes_validate.ValidationError as error:
                path = ".".join(str(p) for p in error.path)
                problems.append(f"{obj['kind']} {obj['metadata']['name']} ({kube}): {path}: {error.message}")
    return problems


def dashboard_maps(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")]


@test
def dashboard_config_map() -> None:
    text = DASHBOARD_FILE.read_text()
    check(json.loads(text)["uid"] == "gpu-policy", "dashboards/gpu-policy.json")
    for values in [{}, merge(POLICIES_ALONE, DASHBOARD)]:
        check(not dashboard_maps(render(values)), f"{values}: a dashboard ConfigMap")
    objects = render(DASHBOARD)
    config_map = one(dashboard_maps(objects), "ConfigMap")
    metadata = config_map["metadata"]
    check(metadata["name"] == "gpu-policy-dashboard" and metadata["namespace"] == NAMESPACE, f"{metadata}")
    check(metadata["labels"] == {"app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/name": "gpu-policy",
                                 "grafana_dashboard": "1"}, f"labels {metadata['labels']}")
    check("annotations" not in metadata, f"annotations {metadata}")
    # The file byte for byte, and nothing else.
    check(config_map["data"] == {"gpu-policy.json": text}, "the ConfigMap does not hold dashboards/gpu-policy.json")
    # Beside everything else the chart renders, not instead of it.
    others = sorted(key(o) for o in objects if o is not config_map and o["metadata"]["name"] != "gpu-policy-dashboard")
    check(others == sorted(key(o) for o in render()), f"besides the dashboard: {others}")

    custom = one(dashboard_maps(render({"dashboard": {
        "enabled": True, "label": "example.com/dashboard", "labelValue": "gpu",
        # The sidecar's label is not overridden by an extra label of the same key.
        "labels": {"team": "gpu", "example.com/dashboard": "other"},
        "annotations": {"grafana_folder": "GPU"}, "namespace": "monitoring"}})), "ConfigMap")
    metadata = custom["metadata"]
    check(metadata["namespace"] == "monitoring", f"namespace {metadata['namespace']}")
    check(metadata["labels"] == {"app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/name": "gpu-policy",
                                 "example.com/dashboard": "gpu", "team": "gpu"}, f"labels {metadata['labels']}")
    check(metadata["annotations"] == {"grafana_folder": "GPU"}, f"annotations {metadata.get('annotations')}")
    check(custom["data"] == {"gpu-policy.json": text}, "custom values change the dashboard")
    problems = validate_strictly([config_map, custom])
    check(not problems, "\n  ".join(problems))


# --- the reports CronJob ---------------------------------------------------

REPORTS = {"reports": {"enabled": True}}
REPORTS_NAME = "gpu-policy-reports"
# What audit calls (cluster::snapshot, audit's kinds): lists, and a get of
# an allowlisted workload by name.
AUDIT_READS = [
    {"apiGroups": [""], "resources": ["namespaces", "nodes", "pods"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": [r for _, g, r in WORKLOADS if g == ""], "verbs": ["get", "list"]},
    {"apiGroups": ["apps"], "resources": [r for _, g, r in WORKLOADS if g == "apps"], "verbs": ["get", "list"]},
    {"apiGroups": ["batch"], "resources": [r for _, g, r in WORKLOADS if g == "batch"], "verbs": ["get", "list"]},
    {"apiGroups": ["node.k8s.io"], "resources": ["runtimeclasses"], "verbs": ["list"]},
    {"apiGroups": ["resource.k8s.io"],
     "resources": ["resourceclaims", "resourceclaimtemplates", "deviceclasses", "resourceslices"],
     "verbs": ["list"]},
]
REPORT_WRITES = {
    "wgpolicyk8s": {"apiGroups": ["wgpolicyk8s.io"], "resources": ["policyreports", "clusterpolicyreports"],
                    "verbs": ["list", "create", "patch", "delete"]},
    "openreports": {"apiGroups": ["openreports.io"], "resources": ["reports", "clusterreports"],
                    "verbs": ["list", "create", "patch", "delete"]},
}


def reports_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["metadata"]["name"] == REPORTS_NAME]


@test
def reports_cronjob_is_off_by_default() -> None:
    for values in [{}, FULL, POLICIES_ALONE, {"reports": {"api": "openreports"}}]:
        objects = render(values)
        check(not reports_objects(objects) and not [o for o in objects if o["kind"] == "CronJob"],
              f"{values}: reports objects rendered")


@test
def reports_cronjob() -> None:
    objects = render(REPORTS)
    deployment = one(objects, "Deployment")
    cron = one(objects, "CronJob", REPORTS_NAME)
    check(cron["metadata"]["namespace"] == NAMESPACE, "namespace")
    spec = cron["spec"]
    check(spec["schedule"] == "*/30 * * * *", f"schedule {spec['schedule']}")
    check(spec["concurrencyPolicy"] == "Forbid", f"concurrencyPolicy {spec.get('concurrencyPolicy')}")
    job = spec["jobTemplate"]["spec"]
    pod = job["template"]["spec"]
    # A failed run (exit 2) is tried again a bounded number of times, in a
    # new pod each time.
    check(pod["restartPolicy"] == "Never" and job["backoffLimit"] == 2,
          f"restartPolicy {pod['restartPolicy']}, backoffLimit {job.get('backoffLimit')}")
    check(len(pod["containers"]) == 1, "one container")
    main = pod["containers"][0]
    check(main["args"] == ["audit", "--all-namespaces", "--write-reports", "--report-api", "auto",
                           "--config", "/etc/gpu-policy/config.yaml"], f"args {main['args']}")
    check(main["image"] == deployment["spec"]["template"]["spec"]["containers"][0]["image"], "image")
    check(main["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
          f"resources {main['resources']}")
    # The config as the Deployment mounts it: the same ConfigMap, the same path.
    check(main["volumeMounts"] == [{"name": "config", "mountPath": "/etc/gpu-policy", "readOnly": True}],
          f"volumeMounts {main['volumeMounts']}")
    config_map = one(objects, "ConfigMap", "gpu-policy")
    check(pod["volumes"] == [{"name": "config", "configMap": {"name": config_map["metadata"]["name"]}}],
          f"volumes {pod['volumes']}")
    deployment_volume = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "config"]
    check(deployment_volume == pod["volumes"], f"the Deployment's config volume {deployment_volume}")
    # Restricted pod security, as the webhook's.
    check(pod["securityContext"] == deployment["spec"]["template"]["spec"]["securityContext"],
          f"pod securityContext {pod['securityContext']}")
    check(main["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                      "capabilities": {"drop": ["ALL"]}}, f"securityContext {main['securityContext']}")
    # Its pods are not the webhook's: neither the Service nor the PDB selects them.
    labels = job["template"]["metadata"]["labels"]
    for selector in [one(objects, "Service")["spec"]["selector"],
                     one(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]]:
        check(not selector.items() <= labels.items(), f"{selector} selects the CronJob's pods {labels}")

    # A ServiceAccount of its own, bound to its ClusterRole and nothing else.
    check(pod["serviceAccountName"] == REPORTS_NAME and pod["automountServiceAccountToken"] is True,
          f"serviceAccountName {pod.get('serviceAccountName')}")
    one(objects, "ServiceAccount", REPORTS_NAME)
    binding = one(objects, "ClusterRoleBinding", REPORTS_NAME)
    check(binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                 "name": REPORTS_NAME}, f"roleRef {binding['roleRef']}")
    check(binding["subjects"] == [{"kind": "ServiceAccount", "name": REPORTS_NAME, "namespace": NAMESPACE}],
          f"subjects {binding['subjects']}")
    bound = [o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
             and any(s["name"] == REPORTS_NAME for s in o["subjects"])]
    check(bound == [binding], f"bindings of {REPORTS_NAME}: {[key(o) for o in bound]}")
    check(sorted(key(o) for o in reports_objects(objects))
          == sorted([("ServiceAccount", NAMESPACE, REPORTS_NAME), ("ClusterRole", "", REPORTS_NAME),
                     ("ClusterRoleBinding", "", REPORTS_NAME), ("CronJob", NAMESPACE, REPORTS_NAME)]),
          f"reports objects {[key(o) for o in reports_objects(objects)]}")
    # Beside everything else the chart renders.
    others = sorted(key(o) for o in objects if o["metadata"]["name"] != REPORTS_NAME)
    check(others == sorted(key(o) for o in render()), f"besides the reports: {others}")

    # The rules, exactly, for each API.
    problems = []
    for api, writes in [("auto", [REPORT_WRITES["wgpolicyk8s"], REPORT_WRITES["openreports"]]),
                        ("wgpolicyk8s", [REPORT_WRITES["wgpolicyk8s"]]),
                        ("openreports", [REPORT_WRITES["openreports"]])]:
        chosen = render({"reports": {"enabled": True, "api": api}})
        rules = one(chosen, "ClusterRole", REPORTS_NAME)["rules"]
        problems += [f"{api}: {p}" for p in jsondiff.diff(AUDIT_READS + writes, rules, "rules", ("expected", "chart"))]
        args = one(chosen, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
        if args[args.index("--report-api") + 1] != api:
            problems.append(f"{api}: args {args}")
    check(not problems, "\n  ".join(problems))

    # Other values reach it.
    values = {"fullnameOverride": "gpu-policy-b", "image": {"repository": "registry.example/gpu-policy",
              "tag": "1.2.3", "pullPolicy": "Always"}, "imagePullSecrets": [{"name": "regcred"}],
              "nodeSelector": {"kubernetes.io/os": "linux"},
              "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
              "reports": {"enabled": True, "schedule": "@daily", "api": "wgpolicyk8s",
                          "resources": {"limits": {"memory": "2Gi"}}}}
    other = render(values, name="other-release")
    cron = one(other, "CronJob", "gpu-policy-b-reports")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    main = pod["containers"][0]
    check(cron["spec"]["schedule"] == "@daily", "schedule")
    check(main["image"] == "registry.example/gpu-policy:1.2.3" and main["imagePullPolicy"] == "Always", "image")
    # Merged over the defaults, as Helm merges values.
    check(main["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "2Gi"}},
          f"resources {main['resources']}")
    check(pod["imagePullSecrets"] == [{"name": "regcred"}], "imagePullSecrets")
    check(pod["nodeSelector"] == values["nodeSelector"] and pod["tolerations"] == values["tolerations"],
          "nodeSelector, tolerations")
    check(pod["volumes"][0]["configMap"]["name"] == "gpu-policy-b" and pod["serviceAccountName"] == "gpu-policy-b-reports",
          f"names {pod}")
    check(cron["metadata"]["labels"] == {"app.kubernetes.io/instance": "other-release",
                                         "app.kubernetes.io/name": "gpu-policy-b-reports"},
          f"labels {cron['metadata']['labels']}")
    # A Job is named after the CronJob and 11 characters: at most 63.
    long_name = one(render({"fullnameOverride": "g" * 52, **REPORTS}), "CronJob")["metadata"]["name"]
    check(len(long_name) <= 52 and long_name.endswith("-reports"), f"name {long_name}")

    # Without the webhook (the admission policies alone) the config still comes.
    alone = render(merge(POLICIES_ALONE, REPORTS))
    check(one(alone, "ConfigMap")["metadata"]["name"] == "gpu-policy", "the config without the webhook")
    check(not [o for o in alone if o["kind"] == "Deployment"], "a Deployment without the webhook")
    check(len(reports_objects(alone)) == 4, f"reports objects {[key(o) for o in reports_objects(alone)]}")

    notes = next(t for p, t in render_files(REPORTS).items() if p.endswith("NOTES.txt"))
    for line in [f"kubectl -n {NAMESPACE} create job --from=cronjob/{REPORTS_NAME}",
                 "kubectl get reports.openreports.io -A", "kubectl get policyreports.wgpolicyk8s.io -A"]:
        check(line in notes, f"NOTES.txt lacks {line!r}")


@test
def reports_cronjob_runs_flags_audit_takes() -> None:
    out = run_binary("audit", "--help")
    check(out.returncode == 0, f"gpu-policy audit --help: {out.stderr}")
    flags = set(re.findall(r"(--[a-z][a-z-]+)", out.stdout))
    schema = json.loads((CHART / "values.schema.json").read_text())
    for api in schema["properties"]["reports"]["properties"]["api"]["enum"]:
        args = one(render({"reports": {"enabled": True, "api": api}}), "CronJob")[
            "spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
        check(args[0] == "audit", f"args {args}")
        unknown = [a for a in args if a.startswith("--") and a not in flags]
        check(not unknown, f"`gpu-policy audit` has no {unknown}")
        # The value is one --report-api takes.
        check(re.search(rf"\b{api}\b", out.stdout.split("--report-api", 1)[-1]) is not None,
              f"--report-api does not list {api}:\n{out.stdout}")


# --- admission policies ----------------------------------------------------

# The bundled policies: KIND-1.MINOR.yaml (KIND validating or mutating) for
# each release whose output differs from the release before's; the chart
# renders a release the file of the newest release at or below it.
POLICY_FILES = CHART / "files" / "policies"
GENERATED_FOR = CHART / "files" / "admission-policies-config.yaml"
REGENERATE = "run `bash tests/chart/run.sh --regenerate` to write them again"
POLICY_KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}
MUTATING_KINDS = {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}
# The guard policies (templates/guard-policies.yaml), rendered with the
# webhook whatever admissionPolicies says; not generated from the config.
GUARD_POLICIES = {"gpu-policy-webhook-configurations", "gpu-policy-service-account-tokens"}
# The policy on ResourceClaims, whose version and request shape follow the
# release; and the mutating policy whose CEL 1.34 refuses.
CLAIM_POLICY = "gpu-policy-bounded-requests-claims"
VISIBLE_DEVICES_POLICY = "gpu-policy-visible-devices"


def generated_policy(obj: dict[str, Any]) -> bool:
    return obj["kind"] in POLICY_KINDS and obj["metadata"]["name"] not in GUARD_POLICIES


# A toleration for gpuTolerations.
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

# One change per Config field: (field, base overrides, changed overrides).
# The generated policies must change with the fields GENERATED_FOR lists and
# with no other.
CONFIG_CHANGES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("gpuResources", {}, {"gpuResources": ["nvidia.com/gpu"]}),
    ("gpuDeviceClasses", {}, {"gpuDeviceClasses": ["gpu.nvidia.com"]}),
    ("maxPerContainer", {}, {"maxPerContainer": 4}),
    ("maxPerPod", {}, {"maxPerPod": 4}),
    ("runtimeClassName", {"gpuRuntimeClasses": ["nvidia", "nvidia-cdi"]},
     {"gpuRuntimeClasses": ["nvidia", "nvidia-cdi"], "runtimeClassName": "nvidia-cdi"}),
    ("gpuRuntimeClasses", {}, {"gpuRuntimeClasses": ["nvidia", "nvidia-cdi"]}),
    ("visibleDevicesPin", {}, {"visibleDevicesPin": "none"}),
    ("minComputeCapability", {}, {"minComputeCapability": "9.0"}),
    ("imageResolution", {}, {"imageResolution": {"mode": "off"}}),
    ("imageComputeCapabilities", {}, {"imageComputeCapabilities": [{"pattern": "^example/", "minimum": "8.0"}]}),
    ("allowlist", {}, {"allowlist": []}),
    ("policyAdmins", {}, {"policyAdmins": ["platform-admins"]}),
    ("gpuSharing", {}, {"gpuSharing": {"kaiScheduler": {"enabled": False}, "hami": {"enabled": False}}}),
    ("privilegedGpu", {}, {"privilegedGpu": "deny"}),
    ("draComputeAffinity", {}, {"draComputeAffinity": "nodeLabels"}),
    ("computeAffinity", {}, {"computeAffinity": {"whenNodesUnlabelled": "require"}}),
    ("gpuProducts", {}, {"gpuProducts": ["NVIDIA-H100*"]}),
    ("gpuTolerations", {}, {"gpuTolerations": [GPU_TOLERATION]}),
    ("denyCpuPodsOnGpuNodes", {"gpuTolerations": [GPU_TOLERATION]},
     {"gpuTolerations": [GPU_TOLERATION], "denyCpuPodsOnGpuNodes": True}),
]


def default_config() -> dict[str, Any]:
    return load_yaml((CHART / "values.yaml").read_text())["config"]


_GENERATED: dict[tuple[str, str, bool], str] = {}


def generated_output(config: dict[str, Any] | None, release: str, mutating: bool) -> str:
    """`manifests --admission-policies [--mutating-policies] --kube-version
    RELEASE` for `config` (default: values.yaml's)."""
    config = default_config() if config is None else config
    cache_key = (json.dumps(config, sort_keys=True), release, mutating)
    if cache_key not in _GENERATED:
        flags = ["--admission-policies", *(["--mutating-policies"] if mutating else []), "--kube-version", release]
        with tempfile.TemporaryDirectory() as tmp:
            config_file = Path(tmp) / "config.yaml"
            config_file.write_text(yaml.safe_dump(config))
            out = run_binary("manifests", *flags, "--config", str(config_file))
        check(out.returncode == 0, f"manifests {' '.join(flags)}: {out.stderr}")
        _GENERATED[cache_key] = out.stdout
    return _GENERATED[cache_key]


def generated_policies(config: dict[str, Any] | None = None, release: str = NEWEST) -> tuple[str, str]:
    """`manifests --admission-policies --kube-version RELEASE` for `config`
    (default: values.yaml's), and what `--mutating-policies` adds to it ("" before 1.34)."""
    validating = generated_output(config, release, False)
    both = generated_output(config, release, True)
    check(both.startswith(validating),
          f"{release}: --mutating-policies does not append to --admission-policies' output")
    return validating, both[len(validating):]


def generated_policy_files(config: dict[str, Any] | None = None) -> dict[str, str]:
    """The files files/policies/ holds for `config`: name -> text."""
    files: dict[str, str] = {}
    previous = {"validating": "", "mutating": ""}
    for release in RELEASES:
        for kind, text in zip(("validating", "mutating"), generated_policies(config, release)):
            if text != previous[kind]:
                # The chart takes an empty file for none: it would render
                # the release before's.
                check(bool(text), f"{release}: no {kind} policies, after some in the release before")
                files[f"{kind}-{release}.yaml"] = text
            previous[kind] = text
    return files


def objects_of(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=LOADER) if d is not None]


def regenerate() -> None:
    """Writes the bundled policies and the settings they are for."""
    header = [line for line in GENERATED_FOR.read_text().splitlines() if line.startswith("#")]
    config = default_config()
    settings = {k: config[k] for k in load_yaml(GENERATED_FOR.read_text())}
    GENERATED_FOR.write_text("\n".join(header) + "\n" + yaml.safe_dump(settings, sort_keys=False))
    files = generated_policy_files()
    POLICY_FILES.mkdir(exist_ok=True)
    for path in sorted(POLICY_FILES.iterdir()):
        if path.name not in files:
            path.unlink()
    for name, text in files.items():
        (POLICY_FILES / name).write_text(text)
    print(f"wrote {GENERATED_FOR.relative_to(ROOT)} and {POLICY_FILES.relative_to(ROOT)}/{{{','.join(files)}}}")


@test
def bundled_policies_are_the_generated_output() -> None:
    config = default_config()
    generated_for = load_yaml(GENERATED_FOR.read_text())
    stale = [k for k, v in generated_for.items() if config.get(k) != v]
    check(not stale, f"{GENERATED_FOR.name} differs from values.yaml config in {stale}: {REGENERATE}")
    bundled = {path.name: path.read_text() for path in sorted(POLICY_FILES.iterdir())}
    # The config the chart renders, not only the one values.yaml states.
    rendered = load_yaml(one(render(), "ConfigMap")["data"]["config.yaml"])
    for label, source in [("values.yaml", None), ("the rendered ConfigMap", rendered)]:
        expected = generated_policy_files(source)
        missing, extra = sorted(set(expected) - set(bundled)), sorted(set(bundled) - set(expected))
        check(not missing and not extra,
              f"files/policies/ for {label}'s config lacks {missing}, has {extra} besides: {REGENERATE}")
        differing = [name for name in expected if bundled[name] != expected[name]]
        check(not differing, f"files/policies/ {differing}: not `gpu-policy manifests --kube-version` output "
              f"for {label}'s config: {REGENERATE}")


@test
def policies_read_exactly_the_settings_the_guard_compares() -> None:
    guarded = set(load_yaml(GENERATED_FOR.read_text()))
    config = default_config()
    check({field for field, _, _ in CONFIG_CHANGES} == set(config),
          f"CONFIG_CHANGES covers {sorted(f for f, _, _ in CONFIG_CHANGES)}, Config has {sorted(config)}")
    problems = []
    for field, base, changed in CONFIG_CHANGES:
        # Any release's output: a setting one release's policies read is guarded.
        differs = any(generated_output(merge(config, base), release, True)
                      != generated_output(merge(config, changed), release, True) for release in RELEASES)
        if differs and field not in guarded:
            problems.append(f"{field} changes the policies but {GENERATED_FOR.name} does not list it")
        if not differs and field in guarded:
            problems.append(f"{GENERATED_FOR.name} lists {field}, which does not change the policies")
    check(not problems, "\n  ".join(problems))


def claim_versions(objects: list[dict[str, Any]]) -> list[list[str]]:
    """The apiVersions of every resource.k8s.io rule of the webhook
    configurations and the generated policies."""
    rules = [rule for o in objects if o["kind"].endswith("WebhookConfiguration")
             for webhook in o["webhooks"] for rule in webhook["rules"]]
    rules += [rule for o in objects if generated_policy(o)
              for rule in o["spec"].get("matchConstraints", {}).get("resourceRules", [])]
    return [rule["apiVersions"] for rule in rules if rule["apiGroups"] == ["resource.k8s.io"]]


@test
def each_release_renders_its_policies_and_claim_rules() -> None:
    problems = []
    for release in RELEASES:
        validating, mutating = generated_policies(None, release)
        cases = [(POLICIES, [], validating), (POLICIES_ALONE, [], validating)]
        if map_api(release):
            cases += [(merge(POLICIES, MUTATING), [map_api(release)], validating + mutating),
                      (merge(POLICIES_ALONE, MUTATING), [map_api(release)], validating + mutating)]
        for values, api_versions, expected in cases:
            policies = [o for o in render(values, kube=release, api_versions=api_versions) if generated_policy(o)]
            if policies != objects_of(expected):
                problems.append(f"{release} {values}: the policies rendered are not `gpu-policy manifests "
                                f"--admission-policies{' --mutating-policies' if api_versions else ''} "
                                f"--kube-version {release}`")
        # What the chart renders for the release, MutatingAdmissionPolicies
        # where it serves them.
        if map_api(release):
            objects = render(merge(POLICIES, MUTATING), kube=release, api_versions=[map_api(release)])
        else:
            objects = render(POLICIES, kube=release)
        # The claim rules name the version the release serves claims in:
        # 4 webhook rules (mutate and the three modes) and the claim policy's.
        version = "v1" if minor(release) >= 34 else "v1beta1"
        versions = claim_versions(objects)
        if versions != [[version]] * 5:
            problems.append(f"{release}: claim rules' apiVersions {versions}, expected 5 x [{version}]")
        # The claim policy reads the requests in the release's shape: flat
        # (v1beta1), firstAvailable from 1.33, exactly from 1.34 (v1).
        expressions = json.dumps(one(objects, "ValidatingAdmissionPolicy", CLAIM_POLICY)["spec"])
        shape = {"firstAvailable": minor(release) >= 33, "r.exactly": minor(release) >= 34}
        if {part: part in expressions for part in shape} != shape:
            problems.append(f"{release}: {CLAIM_POLICY} reads {[p for p in shape if p in expressions]}")
        # The mutating policies in the version the release serves them in;
        # 1.34 without the one whose CEL it refuses.
        mutating_objects = [o for o in objects if o["kind"] in MUTATING_KINDS]
        if map_api(release):
            group_version = map_api(release).rsplit("/", 1)[0]
            names = {o["metadata"]["name"] for o in mutating_objects if o["kind"] == "MutatingAdmissionPolicy"}
            map_versions = sorted({o["apiVersion"] for o in mutating_objects})
            if map_versions != [group_version]:
                problems.append(f"{release}: MutatingAdmissionPolicies in {map_versions}")
            if (VISIBLE_DEVICES_POLICY in names) != (minor(release) >= 35):
                problems.append(f"{release}: MutatingAdmissionPolicies {sorted(names)}")
        elif mutating_objects or mutating:
            problems.append(f"{release}: MutatingAdmissionPolicies, which it does not serve")
    check(not problems, "\n  ".join(problems))


@test
def mutating_policies_need_the_cluster_to_serve_them() -> None:
    # Every message says where they are served and how to go on.
    served = ["admissionregistration.k8s.io/v1beta1 from Kubernetes 1.34", "MutatingAdmissionPolicy feature gate",
              "--runtime-config=admissionregistration.k8s.io/v1beta1=true", "v1 from 1.36",
              "set admissionPolicies.mutating=false"]
    for release, api_versions, parts in [
        # Before 1.34: none that gpu-policy renders, whatever is served.
        ("1.32", [], ["Kubernetes 1.32 serves no MutatingAdmissionPolicy"]),
        ("1.33", [MAP_V1BETA1, MAP_V1], ["Kubernetes 1.33 serves no MutatingAdmissionPolicy"]),
        # 1.34 and 1.35: v1beta1, when the cluster turns it on.
        ("1.34", [], ["Kubernetes 1.34 cluster does not serve admissionregistration.k8s.io/v1beta1 "
                      "MutatingAdmissionPolicy",
                      "--api-versions admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy"]),
        ("1.35", [MAP_V1], ["Kubernetes 1.35 cluster does not serve admissionregistration.k8s.io/v1beta1 "
                            "MutatingAdmissionPolicy"]),
        # From 1.36: v1.
        ("1.36", [MAP_V1BETA1], ["Kubernetes 1.36 cluster does not serve admissionregistration.k8s.io/v1 "
                                 "MutatingAdmissionPolicy",
                                 "--api-versions admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"]),
        # helm template without --kube-version and --api-versions (the
        # SDK's default release, 1.36, serving no MutatingAdmissionPolicy).
        (None, None, ["cluster does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy"]),
    ]:
        for values in [merge(POLICIES, MUTATING), merge(POLICIES_ALONE, MUTATING)]:
            message = render_error(values, kube=release, api_versions=api_versions)
            for part in parts + served:
                check(part in message, f"{release} {api_versions}: {part!r} not in {message!r}")
            check("\n" not in message.strip(), f"{release}: not one line: {message!r}")
        # Without the mutating policies the release renders.
        render(POLICIES, kube=release, api_versions=api_versions)


@test
def policies_render_beside_the_webhook_and_alone() -> None:
    validating, mutating = (objects_of(text) for text in generated_policies(None, NEWEST))
    check({o["kind"] for o in validating} == POLICY_KINDS - MUTATING_KINDS
          and {o["kind"] for o in mutating} == MUTATING_KINDS, "the generated policies' kinds")
    webhook = render(kube=NEWEST)
    check(not [o for o in webhook if generated_policy(o)], "policies rendered by default")
    for values, expected_policies, expect_webhook in [
        (POLICIES, validating, True),
        (merge(POLICIES, MUTATING), validating + mutating, True),
        (POLICIES_ALONE, validating, False),
        (merge(POLICIES_ALONE, MUTATING), validating + mutating, False),
    ]:
        objects = render(values, kube=NEWEST, api_versions=[MAP_V1])
        policies = [o for o in objects if generated_policy(o)]
        check(policies == expected_policies, f"{values}: the policies rendered are not the bundled files")
        others = sorted(key(o) for o in objects if not generated_policy(o))
        check(others == (sorted(key(o) for o in webhook) if expect_webhook else []),
              f"{values}: besides the policies: {others}")
        notes = next(t for p, t in render_files(values, kube=NEWEST, api_versions=[MAP_V1]).items()
                     if p.endswith("NOTES.txt"))
        check("validatingadmissionpolicies" in notes and ("Check the webhook" in notes) == expect_webhook,
              f"{values}: NOTES.txt:\n{notes}")
    message = render_error({"webhook": {"enabled": False}})
    check("nothing to install" in message, message)


@test
def changed_policy_settings_need_a_manifest() -> None:
    for values, kube, api_versions, field, flags in [
        (merge(POLICIES, {"config": {"maxPerPod": 4}}), "1.33", None, "maxPerPod",
         "--admission-policies --kube-version 1.33 --config"),
        (merge(POLICIES_ALONE, {"config": {"allowlist": CUSTOM_ALLOWLIST}}), NEWEST, None, "allowlist",
         f"--admission-policies --kube-version {NEWEST} --config"),
        # helm template without --kube-version: the SDK's default release.
        (merge(POLICIES, {"config": {"maxPerContainer": 2}}), None, None, "maxPerContainer",
         "--admission-policies --kube-version 1.36 --config"),
        (merge(merge(POLICIES, MUTATING), {"config": {"visibleDevicesPin": "none"}}), "1.35", [MAP_V1BETA1],
         "visibleDevicesPin", "--admission-policies --mutating-policies --kube-version 1.35 --config"),
    ]:
        message = render_error(values, kube=kube, api_versions=api_versions)
        for part in [f"config.{field} differs", f"gpu-policy manifests {flags}",
                     "--set-file admissionPolicies.manifest="]:
            check(part in message, f"{values}: {part!r} not in {message!r}")
        check("\n" not in message.strip(), f"not one line: {message!r}")
    # The same values, or other settings changed: the bundled files render.
    render(merge(POLICIES, {"config": {"maxPerPod": 8, "gpuRuntimeClasses": ["nvidia"]}}))
    render(merge(POLICIES, {"config": {"minComputeCapability": "8.0", "policyAdmins": ["platform-admins"]}}))
    # Without the policies, config is the webhook's alone.
    render({"config": {"maxPerPod": 4}})


@test
def a_given_manifest_is_rendered() -> None:
    config = merge(default_config(), {"maxPerPod": 4, "allowlist": CUSTOM_ALLOWLIST})
    validating, mutating = generated_policies(config)
    check("4" in validating and validating != generated_policies()[0],
          "the manifest for another config is the bundled one")
    for values, expected in [
        (merge(POLICIES, {"config": config, "admissionPolicies": {"manifest": validating}}), validating),
        (merge(POLICIES_ALONE, {"config": config, "admissionPolicies": {"manifest": validating}}), validating),
        (merge(POLICIES, {"config": config,
                          "admissionPolicies": {"mutating": True, "manifest": validating + mutating}}),
         validating + mutating),
    ]:
        policies = [o for o in render(values) if generated_policy(o)]
        check(policies == objects_of(expected), f"{values['admissionPolicies']}: not the manifest given")
    for values, part in [
        (merge(POLICIES, {"admissionPolicies": {"mutating": True, "manifest": validating}}),
         "holds no MutatingAdmissionPolicy"),
        (merge(POLICIES, {"admissionPolicies": {"manifest": validating + mutating}}),
         "admissionPolicies.mutating is false"),
        (merge(POLICIES, {"admissionPolicies": {"manifest": yaml.safe_dump_all(manifests())}}),
         "holds a Namespace, not only admission policies"),
        (merge(POLICIES, {"admissionPolicies": {"manifest": "kind: [unclosed"}}), "is not YAML"),
        ({"admissionPolicies": {"manifest": validating}}, "admissionPolicies.enabled is false"),
    ]:
        message = render_error(values)
        check(part in message, f"{part!r} not in {message!r}")
    # The suggested command is for the cluster's release.
    message = render_error(merge(POLICIES, {"admissionPolicies": {"manifest": "kind: [unclosed"}}), kube="1.34")
    check("--kube-version 1.34 --config" in message, message)


# --- kubernetes-validate ---------------------------------------------------

SKIPPED: set[tuple[str, str]] = set()


def crd_shape(obj: dict[str, Any]) -> list[str]:
    problems = []
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return ["metadata is not an object"]
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", str(metadata.get("name", ""))):
        problems.append(f"metadata.name {metadata.get('name')!r}")
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", str(metadata.get("namespace", ""))):
        problems.append(f"metadata.namespace {metadata.get('namespace')!r}")
    for field in ("labels", "annotations"):
        value = metadata.get(field, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            problems.append(f"metadata.{field} is not a map of strings")
    unknown = set(metadata) - {"name", "namespace", "labels", "annotations"}
    if unknown:
        problems.append(f"metadata has {sorted(unknown)}")
    if set(obj) - {"apiVersion", "kind", "metadata", "spec"}:
        problems.append(f"top-level fields {sorted(set(obj))}")
    if not isinstance(obj.get("spec"), dict):
        problems.append("spec is not an object")
    return problems


def _validate_test(kube: str) -> None:
    release = kube.rsplit(".", 1)[0]

    def run() -> None:
        problems = []
        # The chart's objects for every value set, rendered for the release
        # (and with the MutatingAdmissionPolicies where it serves them), and
        # the plain manifests for it (`kubectl apply -k webhook-config/`),
        # Namespace included.
        sources = [(label, render(values, kube=release)) for label, values in VALUE_SETS.items()]
        if map_api(release):
            sources.append(("mutating admission policies",
                            render(merge(POLICIES_ALONE, MUTATING), kube=release, api_versions=[map_api(release)])))
        sources.append(("manifests", manifests("--kube-version", release)))
        for label, objects in sources:
            for obj in objects:
                where = f"{label}: {obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
                try:
                    kubernetes_validate.validate(obj, kube, strict=True)
                except SchemaNotFoundError:
                    if (obj["apiVersion"], obj["kind"]) not in CRD_KINDS:
                        problems.append(f"{where}: no schema in kubernetes-validate for {obj['apiVersion']}")
                        continue
                    SKIPPED.add((obj["apiVersion"], obj["kind"]))
                    problems += [f"{where}: {p}" for p in crd_shape(obj)]
                except kubernetes_validate.ValidationError as error:
                    path = ".".join(str(p) for p in error.path)
                    problems.append(f"{where}: {path}: {error.message}")
        check(not problems, "\n  ".join(problems))

    run.__name__ = f"kubernetes_validate_strict[{kube}]"
    TESTS.append((run.__name__, run))


for _kube in KUBE_VERSIONS:
    _validate_test(_kube)


# --- runner ----------------------------------------------------------------


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--render":
        # The objects rendered for the values given as JSON, as one JSON
        # list on stdout, for the Rust tests (tests/it/support/chart.rs).
        print(json.dumps(render(json.loads(sys.argv[2]))))
        return 0
    print(f"helm-python-sdk {helm.__version__} (helm-c {helm.helm_c_version()}, Helm SDK {helm.helm_sdk_version()}), "
          f"kubernetes-validate {kubernetes_validate.version.__version__} (Kubernetes {', '.join(KUBE_VERSIONS)}), "
          f"binary {BINARY.relative_to(ROOT) if BINARY.is_relative_to(ROOT) else BINARY}")
    if sys.argv[1:] == ["--regenerate"]:
        regenerate()
        return 0
    selected = sys.argv[1:]
    passed = failed = 0
    for name, fn in TESTS:
        if selected and not any(s in name for s in selected):
            continue
        try:
            fn()
        except Failure as failure:
            failed += 1
            print(f"FAIL {name}: {failure}")
        except Exception:  # noqa: BLE001 - a crash is a failure too
            failed += 1
            print(f"FAIL {name}:\n{traceback.format_exc()}")
        else:
            passed += 1
            print(f"ok   {name}")
    if SKIPPED:
        kinds = ", ".join(f"{k} ({a})" for a, k in sorted(SKIPPED))
        print(f"note: kubernetes-validate has no schema for {kinds}: checked for apiVersion/kind/metadata/spec "
              "shape only")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
