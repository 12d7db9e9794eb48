//! The chart's Grafana dashboard (`charts/gpu-policy/dashboards/
//! gpu-policy.json`) and its PrometheusRule ask Prometheus only for what the
//! server exports: every metric an expression selects is a series of a
//! live `/metrics` of the real binary, once it has served admissions in
//! cluster and registry mode, and every label it matches or groups on is
//! one those series carry or one the scrape adds. The dashboard is a
//! Grafana dashboard model Grafana can load.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::support::chart;
use crate::support::fake_api::FakeApi;
use crate::support::fake_registry::{Auth, FakeRegistry, image_config};
use crate::support::fixtures::fixture;
use crate::support::promql::{self, Query, Selector, exposed_series};
use crate::support::server::{ENFORCE, MUTATE, Options, Server, write_atomically};

const DASHBOARD: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/charts/gpu-policy/dashboards/gpu-policy.json");

/// The labels a Prometheus scrape adds to every series: prometheus-operator's
/// target labels for the chart's ServiceMonitor (it honours the server's
/// own `endpoint`, so that one is the metric's).
const TARGET_LABELS: &[&str] = &["namespace", "job", "instance", "pod", "service", "container"];

/// What the alerts read that other components export: Prometheus' own
/// `up` of each target, and the API server's count of webhook calls it
/// could not make.
const NOT_OURS: &[&str] = &["up", "apiserver_admission_webhook_rejection_count"];

/// Grafana's built-in variables.
const GRAFANA_VARIABLES: &[&str] = &["__rate_interval", "__interval", "__range"];

fn dashboard() -> Value {
    let text = std::fs::read_to_string(DASHBOARD).expect("the dashboard file");
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{DASHBOARD} is not JSON: {err}"))
}

fn selector(metric: &str, labels: &[&str]) -> Selector {
    Selector { metric: metric.to_owned(), labels: labels.iter().map(|l| (*l).to_owned()).collect() }
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|n| (*n).to_owned()).collect()
}

// ---------------------------------------------------------------------------
// The extractor itself.

#[test]
fn promql_selectors_are_the_metrics_not_functions_keywords_or_labels() {
    let query = promql::parse(
        r#"sum by (decision) (rate(gpu_policy_admission_requests_total{namespace=~"$namespace", decision="denied"}[$__rate_interval]))"#,
    );
    assert_eq!(
        query.selectors,
        vec![selector("gpu_policy_admission_requests_total", &["decision", "namespace"])]
    );
    assert_eq!(query.grouping, names(&["decision"]));

    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "histogram_quantile(0.99, sum by (namespace, endpoint, le) (rate(x_bucket[5m]))) > 0.5",
            &["x_bucket"],
            &["endpoint", "le", "namespace"],
        ),
        ("a_seconds - time() < 14 * 86400", &["a_seconds"], &[]),
        ("count(stale == 1) or vector(0)", &["stale"], &[]),
        // An aggregation's clause after its parenthesis; a metric named
        // like a function's argument.
        ("sum(rate(requests[5m])) by (pod)", &["requests"], &["pod"]),
        (
            "sum(rate(a[10m])) > 3 * sum(rate(a[1d] offset 10m)) and on (namespace) b unless c",
            &["a", "b", "c"],
            &["namespace"],
        ),
        (
            "sum without (instance) (x) / ignoring (le) group_left (pod) y",
            &["x", "y"],
            &["instance", "le", "pod"],
        ),
        (r#"label_replace(x, "dst", "$1", "src", "(.*)") # y is a comment"#, &["x"], &[]),
        (r#"count_values("value", topk by (a) (5, metric))"#, &["metric"], &["a"]),
        ("max_over_time(x[5m:1m]) @ end()", &["x"], &[]),
        ("1e3 + 0x1f + Inf - NaN + x * bool_thing", &["bool_thing", "x"], &[]),
        (r#"{__name__="by_name", job="j"}"#, &["by_name"], &[]),
        (r#"absent(up{job="gpu-policy"} == 1)"#, &["up"], &[]),
        // Aggregation names as metrics (followed by neither `(` nor a
        // clause) stay metrics.
        ("count + sum", &["count", "sum"], &[]),
        ("rate(${metric_prefix}x[$__interval])", &["x"], &[]),
    ];
    for (expr, metrics, grouping) in cases {
        let query = promql::parse(expr);
        assert_eq!(query.metric_names(), names(metrics), "metrics of {expr}");
        assert_eq!(query.grouping, names(grouping), "grouping of {expr}");
    }
    assert_eq!(
        promql::parse(r#"absent(up{job="gpu-policy", namespace!~"x"} == 1)"#).selectors,
        vec![selector("up", &["job", "namespace"])]
    );
}

#[test]
fn exposition_gives_the_series_names_prometheus_stores() {
    let exposition = "\
# HELP gpu_policy_admission_requests Admission requests.
# TYPE gpu_policy_admission_requests counter
gpu_policy_admission_requests_total{endpoint=\"/mutate\",decision=\"a \\\"b\\\" }\"} 2
# TYPE gpu_policy_admission_duration_seconds histogram
gpu_policy_admission_duration_seconds_bucket{endpoint=\"/mutate\",le=\"+Inf\"} 1
# TYPE gpu_policy_certificate_expiry_timestamp_seconds gauge
gpu_policy_certificate_expiry_timestamp_seconds 1.8e9
# TYPE gpu_policy_empty counter
# EOF
";
    let series = exposed_series(exposition);
    let expected: BTreeMap<String, BTreeSet<String>> = [
        ("gpu_policy_admission_requests_total", &["decision", "endpoint"][..]),
        ("gpu_policy_admission_duration_seconds_bucket", &["endpoint", "le"]),
        ("gpu_policy_admission_duration_seconds_sum", &[]),
        ("gpu_policy_admission_duration_seconds_count", &[]),
        ("gpu_policy_certificate_expiry_timestamp_seconds", &[]),
        ("gpu_policy_empty_total", &[]),
    ]
    .into_iter()
    .map(|(name, labels)| (name.to_owned(), names(labels)))
    .collect();
    assert_eq!(series, expected);
}

// ---------------------------------------------------------------------------
// The live metrics.

/// A GPU image in the fake registry whose config says CUDA 13.0.
fn cuda_image(registry: &FakeRegistry) -> String {
    registry.push_image("team/trainer", "1", &image_config(&["CUDA_VERSION=13.0.2"], &[]));
    format!("{}/team/trainer:1", registry.host())
}

/// The series of `/metrics` after the binary, reading the fake API server
/// (the cluster caches) and resolving images from the fake registry, has
/// answered a mutation twice (a registry fetch, then the caches), a denial
/// and a request it cannot read.
async fn exported_series() -> BTreeMap<String, BTreeSet<String>> {
    let api = FakeApi::start().await;
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}));
    let registry = FakeRegistry::start(Auth::None).await;
    let image = cuda_image(&registry);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.yaml");
    let host = format!("{:?}", registry.host());
    write_atomically(
        &config,
        format!(
            "imageResolution:\n  mode: registry\n  timeout: 4s\n  registries: [{host}]\n  insecureRegistries: [{host}]\n"
        )
        .as_bytes(),
    );
    let (server, _scratch) =
        Server::start_in_cluster_with(&api, Options { config: Some(config), ..Options::default() })
            .await;
    let mut connection = server.connect().await;
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {"containers": [{"name": "train", "image": image,
            "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    });
    for _ in 0..2 {
        let response = connection.admit(MUTATE, &pod).await;
        assert_eq!(response["allowed"], true, "{response}");
    }
    let denied = connection.admit(ENFORCE, &fixture("04")).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    let bad = connection.post(ENFORCE, b"not json".to_vec()).await.expect("answer");
    assert_eq!(bad.status, 400);
    let metrics = server.metrics().await;
    let series = exposed_series(&metrics);
    // What the admissions above must have made exist, so a query the
    // check passes is one that has data in a live cluster.
    for name in [
        "gpu_policy_admission_requests_total",
        "gpu_policy_rule_findings_total",
        "gpu_policy_admission_duration_seconds_bucket",
        "gpu_policy_image_lookups_total",
        "gpu_policy_image_cache_hits_total",
        "gpu_policy_image_fetch_duration_seconds_bucket",
        "gpu_policy_cluster_cache_stale",
        "gpu_policy_reload_success",
        "gpu_policy_certificate_expiry_timestamp_seconds",
    ] {
        let sampled = metrics
            .lines()
            .any(|line| line.strip_prefix(name).is_some_and(|rest| rest.starts_with(['{', ' '])));
        assert!(sampled, "no sample of {name}:\n{metrics}");
    }
    series
}

/// What is wrong with `query` (from `source`) against the exported
/// `series`; `external` metrics are not checked, nor their labels.
fn problems_of(
    source: &str,
    query: &Query,
    series: &BTreeMap<String, BTreeSet<String>>,
    external: &[&str],
) -> Vec<String> {
    let mut problems = Vec::new();
    if query.selectors.is_empty() {
        problems.push(format!("{source}: selects no metric"));
    }
    let mut known: BTreeSet<&str> = TARGET_LABELS.iter().copied().collect();
    let mut reads_external = false;
    for selector in &query.selectors {
        if external.contains(&selector.metric.as_str()) {
            reads_external = true;
            continue;
        }
        let Some(labels) = series.get(&selector.metric) else {
            problems.push(format!("{source}: {} is not exported by the server", selector.metric));
            continue;
        };
        known.extend(labels.iter().map(String::as_str));
        for label in &selector.labels {
            if !labels.contains(label) && !TARGET_LABELS.contains(&label.as_str()) {
                problems.push(format!(
                    "{source}: {} has no label {label} (it has {labels:?})",
                    selector.metric
                ));
            }
        }
    }
    if !reads_external {
        for label in &query.grouping {
            if !known.contains(label.as_str()) {
                problems
                    .push(format!("{source}: groups by {label}, which no series it selects has"));
            }
        }
    }
    problems
}

/// The PromQL of a Grafana query variable: `label_values(SELECTOR, label)`
/// is Grafana's, its selector PromQL.
fn variable_promql(query: &str) -> Option<String> {
    let inner = query.trim().strip_prefix("label_values(")?.strip_suffix(')')?;
    let (selector, _label) = inner.rsplit_once(',')?;
    Some(selector.to_owned())
}

/// Every PromQL expression of the dashboard, named by where it is.
fn dashboard_expressions(dashboard: &Value) -> Vec<(String, String)> {
    let mut expressions = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                expressions.push((
                    format!(
                        "panel {:?} {}",
                        panel["title"].as_str().unwrap_or_default(),
                        target["refId"].as_str().unwrap_or_default()
                    ),
                    expr.to_owned(),
                ));
            }
        }
    }
    for variable in dashboard["templating"]["list"].as_array().into_iter().flatten() {
        if variable["type"] != "query" {
            continue;
        }
        let query =
            variable["query"]["query"].as_str().or(variable["query"].as_str()).unwrap_or_default();
        let promql = variable_promql(query).unwrap_or_else(|| {
            panic!("variable {}: not label_values(...): {query}", variable["name"])
        });
        expressions.push((format!("variable {}", variable["name"]), promql));
    }
    expressions
}

#[tokio::test(flavor = "multi_thread")]
async fn dashboard_queries_read_only_exported_metrics() {
    let dashboard = dashboard();
    let expressions = dashboard_expressions(&dashboard);
    assert!(expressions.len() > 20, "{expressions:?}");
    let series = exported_series().await;
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for (source, expr) in &expressions {
        let query = promql::parse(expr);
        used.extend(query.metric_names());
        problems.extend(problems_of(source, &query, &series, &[]));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Every family the server exports has a panel.
    let families: BTreeSet<String> = series
        .keys()
        .map(|name| {
            ["_bucket", "_sum", "_count", "_total"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(name)
                .to_owned()
        })
        .collect();
    let shown: BTreeSet<String> = families
        .iter()
        .filter(|family| used.iter().any(|name| name.starts_with(family.as_str())))
        .cloned()
        .collect();
    assert_eq!(shown, families, "families without a panel");
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_rule_alerts_read_only_exported_metrics() {
    // Rendered first: a blocking subprocess, before anything runs on the
    // runtime.
    let objects = chart::render(&json!({
        "serviceMonitor": {"enabled": true},
        "prometheusRule": {"enabled": true},
    }));
    let rule = objects.iter().find(|o| o["kind"] == "PrometheusRule").expect("a PrometheusRule");
    let alerts: Vec<(String, String)> = rule["spec"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["rules"].as_array().into_iter().flatten())
        .map(|r| {
            (
                format!("alert {}", r["alert"].as_str().expect("an alert name")),
                r["expr"].as_str().expect("an expr").to_owned(),
            )
        })
        .collect();
    assert!(alerts.len() >= 8, "{alerts:?}");
    let series = exported_series().await;
    let mut problems = Vec::new();
    let mut external = BTreeSet::new();
    for (source, expr) in &alerts {
        let query = promql::parse(expr);
        external.extend(
            query.metric_names().into_iter().filter(|name| NOT_OURS.contains(&name.as_str())),
        );
        problems.extend(problems_of(source, &query, &series, NOT_OURS));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(external, names(NOT_OURS), "the metrics of other components the alerts read");
}

// ---------------------------------------------------------------------------
// The dashboard model.

#[test]
fn dashboard_is_a_grafana_dashboard_model() {
    let dashboard = dashboard();
    for field in ["title", "uid"] {
        assert!(
            dashboard[field].as_str().is_some_and(|s| !s.is_empty()),
            "{field}: {}",
            dashboard[field]
        );
    }
    let uid = dashboard["uid"].as_str().unwrap_or_default();
    assert!(
        uid.len() <= 40 && uid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "Grafana's uid: at most 40 of [a-zA-Z0-9-_]: {uid}"
    );
    // Grafana 11 writes 39 and up; older numbers are migrated on load.
    let schema = dashboard["schemaVersion"].as_u64().expect("schemaVersion");
    assert!(schema >= 39, "schemaVersion {schema}");

    let variables = dashboard["templating"]["list"].as_array().expect("templating.list");
    let datasource =
        variables.iter().find(|v| v["name"] == "datasource").expect("a datasource variable");
    assert_eq!(datasource["type"], "datasource");
    assert_eq!(datasource["query"], "prometheus");
    let defined: BTreeSet<&str> = variables
        .iter()
        .filter_map(|v| v["name"].as_str())
        .chain(GRAFANA_VARIABLES.iter().copied())
        .collect();
    let prometheus = json!({"type": "prometheus", "uid": "${datasource}"});
    for variable in variables.iter().filter(|v| v["type"] == "query") {
        assert_eq!(variable["datasource"], prometheus, "{variable}");
    }

    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(!panels.is_empty());
    let mut ids = BTreeSet::new();
    let mut cells: BTreeMap<(u64, u64), String> = BTreeMap::new();
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or_default();
        assert!(!title.is_empty(), "a panel without a title: {panel}");
        let id = panel["id"].as_u64().unwrap_or_else(|| panic!("{title}: no id"));
        assert!(ids.insert(id), "{title}: id {id} twice");
        let kind = panel["type"].as_str().unwrap_or_default();
        assert!(!kind.is_empty(), "{title}: no type");
        let grid = &panel["gridPos"];
        let [h, w, x, y] = ["h", "w", "x", "y"]
            .map(|k| grid[k].as_u64().unwrap_or_else(|| panic!("{title}: gridPos.{k}")));
        assert!(h > 0 && w > 0 && x + w <= 24, "{title}: gridPos {grid}");
        // No two panels share a cell of the 24-column grid.
        for row in y..y + h {
            for column in x..x + w {
                if let Some(other) = cells.insert((row, column), title.to_owned()) {
                    panic!("{title} overlaps {other} at row {row}, column {column}");
                }
            }
        }
        if kind == "row" {
            assert!(panel.get("targets").is_none(), "{title}: a row with targets");
            continue;
        }
        assert_eq!(panel["datasource"], prometheus, "{title}");
        let targets = panel["targets"].as_array().unwrap_or_else(|| panic!("{title}: no targets"));
        assert!(!targets.is_empty(), "{title}: no targets");
        let mut refs = BTreeSet::new();
        for target in targets {
            let expr = target["expr"].as_str().unwrap_or_default();
            assert!(!expr.trim().is_empty(), "{title}: a target without expr");
            assert_eq!(target["datasource"], prometheus, "{title}: {target}");
            let reference = target["refId"].as_str().unwrap_or_default();
            assert!(
                !reference.is_empty() && refs.insert(reference.to_owned()),
                "{title}: refId {reference:?} empty or twice"
            );
            for used in variables_in(expr) {
                assert!(
                    defined.contains(used.as_str()),
                    "{title}: ${used} is not a variable of the dashboard"
                );
            }
        }
    }
}

/// The Grafana variables `$name` and `${name}` of `expr`.
fn variables_in(expr: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        let name: String = rest
            .trim_start_matches('{')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // `$1` in a label_replace replacement is not a variable.
        if !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()) {
            found.push(name);
        }
    }
    found
}
