//! Fleet scale: the built server against the fake API server grown to a
//! fleet (support/fleet.rs). Run by hand with `scripts/scale.sh`, which
//! builds the release binaries and sets the knobs; ignored otherwise.
//!
//! It measures
//! - for a small cluster, for clusters with one source grown (namespaces,
//!   nodes or claim templates) and for the whole fleet: the time from the
//!   spawn of the process to the first 200 of `/readyz`, the RSS after a
//!   warm-up (a few seconds of light load, which also lets the allocator
//!   give back what the first lists left free) and the peak RSS. A cache's
//!   bytes per object are the RSS it adds over the small cluster divided
//!   by the objects it adds;
//! - `/validate/enforce` with the Deployment of `benches/reviews/` under
//!   the load tool (`examples/loadgen.rs`), on a small-cluster server and a
//!   fleet server side by side: saturation, then half of the small
//!   cluster's median saturation throughput sent to both, the order
//!   flipping every round so both see the same machine; p99, server CPU
//!   per request, and RSS after the load.
//!
//! It fails when the fleet server answers wrongly (a namespace annotation
//! or a claim template from the far end of its lists not applied), when a
//! request under load fails, or when the fleet's RSS after the load is
//! above `SCALE_RSS_GOAL_MIB`.
//!
//! Knobs (environment): `SCALE_LOADGEN` (the load tool, required),
//! `SCALE_NAMESPACES` (10000), `SCALE_NODES` (5000), `SCALE_TEMPLATES`
//! (20000), `SCALE_ROUNDS` (3), `SCALE_DURATION` (10s), `SCALE_WARMUP`
//! (2s), `SCALE_CONCURRENCY` (16), `SCALE_WARM_UP` (3s at
//! `WARM_UP_RATE` after ready),
//! `SCALE_SERVER_CPUS` (0), `SCALE_LOADGEN_CPUS` (1), `SCALE_OUT`
//! (`target/scale`: `results.jsonl`, `table.md`), `SCALE_RSS_GOAL_MIB`
//! (100).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::dra_cluster::claimed_pod;
use crate::support::fake_api::FakeApi;
use crate::support::fleet::{
    REVIEW_NAMESPACE, Shape, claim_template, fleet, team_max_gpus, team_mode, team_name,
};
use crate::support::oracles::{literal, visible_devices_entries};
use crate::support::server::{ENFORCE, MUTATE, Options, Server, patch_of, patched, pod_with_gpus};
use crate::support::tls::SERVER_NAME;

/// What the small cluster holds of each grown source.
const SMALL: Shape = Shape { namespaces: 10, nodes: 10, templates: 10 };

const MIB: f64 = 1024.0 * 1024.0;

/// Requests per second of the warm-up before memory is read.
const WARM_UP_RATE: f64 = 500.0;

struct Knobs {
    fleet: Shape,
    loadgen: PathBuf,
    rounds: usize,
    duration: String,
    warmup: String,
    concurrency: usize,
    warm_up: String,
    server_cpus: String,
    loadgen_cpus: String,
    out: PathBuf,
    rss_goal_mib: f64,
}

fn knob<T: FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(value) => value.parse().unwrap_or_else(|_| panic!("{name}={value:?} does not parse")),
        Err(_) => default,
    }
}

impl Knobs {
    fn from_env() -> Self {
        let loadgen = std::env::var("SCALE_LOADGEN")
            .unwrap_or_else(|_| panic!("SCALE_LOADGEN names the load tool; run scripts/scale.sh"));
        Knobs {
            fleet: Shape {
                namespaces: knob("SCALE_NAMESPACES", 10_000),
                nodes: knob("SCALE_NODES", 5_000),
                templates: knob("SCALE_TEMPLATES", 20_000),
            },
            loadgen: PathBuf::from(loadgen),
            rounds: knob("SCALE_ROUNDS", 3),
            duration: knob("SCALE_DURATION", "10s".to_owned()),
            warmup: knob("SCALE_WARMUP", "2s".to_owned()),
            concurrency: knob("SCALE_CONCURRENCY", 16),
            warm_up: knob("SCALE_WARM_UP", "3s".to_owned()),
            server_cpus: knob("SCALE_SERVER_CPUS", "0".to_owned()),
            loadgen_cpus: knob("SCALE_LOADGEN_CPUS", "1".to_owned()),
            out: PathBuf::from(knob("SCALE_OUT", "target/scale".to_owned())),
            rss_goal_mib: knob("SCALE_RSS_GOAL_MIB", 100.0),
        }
    }
}

/// The clusters the server is started against, and the source each grows.
struct Cluster {
    name: &'static str,
    shape: Shape,
    api: FakeApi,
}

impl Cluster {
    async fn seeded(name: &'static str, shape: Shape) -> Self {
        let seeding = Instant::now();
        let api = fleet(shape).await;
        eprintln!(
            "seeded {name}: {} namespaces, {} nodes, {} claim templates in {:.1} s",
            shape.namespaces,
            shape.nodes,
            shape.templates,
            seeding.elapsed().as_secs_f64()
        );
        Cluster { name, shape, api }
    }

    /// The objects it has beyond the small cluster.
    fn added(&self) -> usize {
        (self.shape.namespaces - SMALL.namespaces)
            + (self.shape.nodes - SMALL.nodes)
            + (self.shape.templates - SMALL.templates)
    }

    async fn serve(&self, knobs: &Knobs) -> (Server, tempfile::TempDir) {
        let options = Options {
            cpus: Some(knobs.server_cpus.clone()),
            ready_timeout: Some(Duration::from_secs(300)),
            ..Options::default()
        };
        Server::start_in_cluster_with(&self.api, options).await
    }
}

/// One start of the server: how long to ready, and its memory.
struct Startup {
    ready: Duration,
    rss: u64,
    peak_rss: u64,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn review_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/reviews/gpu-deployment.json")
}

/// The containers of `pod` that `/mutate` pins to no GPU.
async fn pinned_by_mutate(server: &Server, pod: &Value) -> Vec<String> {
    let response = server.connect().await.admit(MUTATE, pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    let after = patch_of(&response).map_or_else(|| pod.clone(), |patch| patched(pod, &patch));
    after["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| visible_devices_entries(c).iter().any(|e| literal(e) == Some("void")))
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

/// The fleet server knows what sits at the far end of its lists: the
/// per-pod maximum of the last team namespace that lowers it to 1 in
/// enforce mode, and the last claim template of an enforce namespace.
async fn check_fleet_answers(server: &Server, shape: Shape) {
    let mut connection = server.connect().await;
    let review = std::fs::read(review_path()).expect("the Deployment review");
    let uid = serde_json::from_slice::<Value>(&review).expect("JSON")["request"]["uid"]
        .as_str()
        .expect("a uid")
        .to_owned();
    let response = connection.post(ENFORCE, review).await.expect("an answer").admission(&uid);
    assert_eq!(response["allowed"], true, "the load's review: {response}");

    let team = (0..shape.teams())
        .rev()
        .find(|&i| team_mode(i) == "enforce" && team_max_gpus(i) == Some(1))
        .expect("a team namespace with a maximum of 1 (grow SCALE_NAMESPACES)");
    let mut pod = pod_with_gpus(2);
    pod["metadata"]["namespace"] = json!(team_name(team));
    let denied = connection.admit(ENFORCE, &pod).await;
    assert_eq!(denied["allowed"], false, "{}: {denied}", team_name(team));
    assert!(denied.to_string().contains("maximum of 1 per pod"), "{denied}");
    pod["metadata"]["namespace"] = json!(REVIEW_NAMESPACE);
    let allowed = connection.admit(ENFORCE, &pod).await;
    assert_eq!(allowed["allowed"], true, "{allowed}");

    // Template i lives in team namespace i % teams.
    let template = (0..shape.templates)
        .rev()
        .find(|&i| team_mode(i % shape.teams()) == "enforce")
        .map(|i| claim_template(i, shape.teams()))
        .expect("a claim template in an enforce namespace");
    let mut pod = claimed_pod("far", template["metadata"]["name"].as_str().expect("name"));
    pod["metadata"]["namespace"] = template["metadata"]["namespace"].clone();
    assert_eq!(pinned_by_mutate(server, &pod).await, ["sidecar"], "{template}");
    let mut unknown = claimed_pod("unknown", "no-such-template");
    unknown["metadata"]["namespace"] = template["metadata"]["namespace"].clone();
    assert_eq!(pinned_by_mutate(server, &unknown).await, ["ctr", "sidecar"]);
}

/// One run of the load tool against `server`'s `/validate/enforce`; its
/// JSON report, which must show no failure.
async fn load(
    knobs: &Knobs,
    server: &Server,
    label: String,
    rate: Option<f64>,
    (duration, warmup): (&str, &str),
) -> Value {
    let mut command = Command::new("taskset");
    command
        .args(["-c", &knobs.loadgen_cpus])
        .arg(&knobs.loadgen)
        .arg("--url")
        .arg(format!("https://{}{ENFORCE}", server.admission))
        .arg("--ca")
        .arg(server.certs_dir.join("ca.crt"))
        .args(["--server-name", SERVER_NAME])
        .arg("--body")
        .arg(review_path())
        .args(["--concurrency", &knobs.concurrency.to_string()])
        .args(["--duration", duration, "--warmup", warmup])
        .args(["--server-pid", &server.pid().to_string()])
        .args(["--label", &label, "--output", "json"]);
    if let Some(rate) = rate {
        command.args(["--rate", &format!("{rate:.0}")]);
    }
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("the load tool's thread")
        .expect("the load tool runs");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!("{label}: no JSON report ({err}): {}", String::from_utf8_lossy(&output.stderr))
    });
    assert_eq!(report["failed"], 0, "{label}: {report}");
    eprintln!(
        "{label:<24} {:>8.0} req/s  p99 {:>6.0} µs  CPU {:>5.1} µs/req",
        report["throughput_rps"].as_f64().unwrap_or_default(),
        report["latency_us"]["p99"].as_f64().unwrap_or_default(),
        report["server"]["cpu_us_per_request"].as_f64().unwrap_or_default(),
    );
    report
}

/// The median of a number at `pointer` over the reports labelled `label`.
fn median_of(reports: &[Value], label: &str, pointer: &str) -> f64 {
    median(
        reports
            .iter()
            .filter(|r| r["label"] == label)
            .filter_map(|r| r.pointer(pointer)?.as_f64())
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "fleet scale: minutes of load; run scripts/scale.sh"]
async fn fleet_scale() {
    let knobs = Knobs::from_env();
    let fleet_shape = knobs.fleet;
    assert!(
        fleet_shape.namespaces > SMALL.namespaces
            && fleet_shape.nodes > SMALL.nodes
            && fleet_shape.templates > SMALL.templates,
        "the fleet must be larger than the small cluster {SMALL:?}"
    );
    let clusters = [
        Cluster::seeded("small", SMALL).await,
        Cluster::seeded("namespaces", Shape { namespaces: fleet_shape.namespaces, ..SMALL }).await,
        Cluster::seeded("nodes", Shape { nodes: fleet_shape.nodes, ..SMALL }).await,
        Cluster::seeded("templates", Shape { templates: fleet_shape.templates, ..SMALL }).await,
        Cluster::seeded("fleet", fleet_shape).await,
    ];

    // Startup and idle memory, each cluster in turn, the order rotating.
    let mut startups: Vec<Vec<Startup>> = clusters.iter().map(|_| Vec::new()).collect();
    for round in 0..knobs.rounds {
        for offset in 0..clusters.len() {
            let index = (round + offset) % clusters.len();
            let cluster = &clusters[index];
            let (server, _scratch) = cluster.serve(&knobs).await;
            let label = format!("{} warm-up", cluster.name);
            let warm_up = (knobs.warm_up.as_str(), "0s");
            load(&knobs, &server, label, Some(WARM_UP_RATE), warm_up).await;
            let startup = Startup {
                ready: server.ready_after,
                rss: server.memory("VmRSS"),
                peak_rss: server.memory("VmHWM"),
            };
            eprintln!(
                "{:<10} ready in {:.2} s, RSS {:.1} MiB (peak {:.1} MiB)",
                cluster.name,
                startup.ready.as_secs_f64(),
                startup.rss as f64 / MIB,
                startup.peak_rss as f64 / MIB
            );
            startups[index].push(startup);
        }
    }
    let small_rss = median(startups[0].iter().map(|s| s.rss as f64).collect());

    // Load: the small cluster's server and the fleet's, side by side.
    let (small, _small_scratch) = clusters[0].serve(&knobs).await;
    let fleet_cluster = &clusters[clusters.len() - 1];
    let (fleet_server, _fleet_scratch) = fleet_cluster.serve(&knobs).await;
    check_fleet_answers(&fleet_server, fleet_shape).await;
    let servers = [("small", &small), ("fleet", &fleet_server)];
    let mut reports = Vec::new();
    let measured = (knobs.duration.as_str(), knobs.warmup.as_str());
    let order = |round: usize| {
        let mut order = servers;
        if round % 2 == 1 {
            order.reverse();
        }
        order
    };
    for round in 0..knobs.rounds {
        for (name, server) in order(round) {
            let label = format!("{name} saturation");
            reports.push(load(&knobs, server, label, None, measured).await);
        }
    }
    let half = median_of(&reports, "small saturation", "/throughput_rps") / 2.0;
    for round in 0..knobs.rounds {
        for (name, server) in order(round) {
            let label = format!("{name} half");
            reports.push(load(&knobs, server, label, Some(half), measured).await);
        }
    }
    let rss_after_load: Vec<u64> = servers.iter().map(|(_, s)| s.memory("VmRSS")).collect();

    // The report.
    let mut table = String::new();
    let shape = |s: Shape| {
        format!("{} namespaces, {} nodes, {} claim templates", s.namespaces, s.nodes, s.templates)
    };
    let _ = writeln!(
        table,
        "Fleet: {}; small cluster: {}. {} rounds; RSS warm after {} at {WARM_UP_RATE} req/s; \
         load {} (warm-up {}), {} connections, server on CPUs {}, load tool on CPUs {}.\n",
        shape(fleet_shape),
        shape(SMALL),
        knobs.rounds,
        knobs.warm_up,
        knobs.duration,
        knobs.warmup,
        knobs.concurrency,
        knobs.server_cpus,
        knobs.loadgen_cpus
    );
    let _ = writeln!(
        table,
        "| cluster | objects added | ready (s) | RSS warm (MiB) | peak RSS (MiB) | bytes per added object |\n\
         |---|--:|--:|--:|--:|--:|"
    );
    for (cluster, runs) in clusters.iter().zip(&startups) {
        let rss = median(runs.iter().map(|s| s.rss as f64).collect());
        let per_object = if cluster.added() == 0 {
            "".to_owned()
        } else {
            format!("{:.0}", (rss - small_rss) / cluster.added() as f64)
        };
        let _ = writeln!(
            table,
            "| {} | {} | {:.2} | {:.1} | {:.1} | {per_object} |",
            cluster.name,
            cluster.added(),
            median(runs.iter().map(|s| s.ready.as_secs_f64()).collect()),
            rss / MIB,
            median(runs.iter().map(|s| s.peak_rss as f64).collect()) / MIB,
        );
    }
    let _ = writeln!(
        table,
        "\n`/validate/enforce`, the Deployment review in `{REVIEW_NAMESPACE}`; half load = \
         {half:.0} req/s (half of the small cluster's median saturation).\n\n\
         | server | saturation (req/s) | CPU µs/req | half load p50 (µs) | half load p99 (µs) | \
         half load CPU µs/req | RSS after load (MiB) |\n\
         |---|--:|--:|--:|--:|--:|--:|"
    );
    for ((name, _), rss) in servers.iter().zip(&rss_after_load) {
        let saturation = format!("{name} saturation");
        let half_load = format!("{name} half");
        let _ = writeln!(
            table,
            "| {name} | {:.0} | {:.1} | {:.0} | {:.0} | {:.1} | {:.1} |",
            median_of(&reports, &saturation, "/throughput_rps"),
            median_of(&reports, &saturation, "/server/cpu_us_per_request"),
            median_of(&reports, &half_load, "/latency_us/p50"),
            median_of(&reports, &half_load, "/latency_us/p99"),
            median_of(&reports, &half_load, "/server/cpu_us_per_request"),
            *rss as f64 / MIB,
        );
    }
    println!("\n{table}");
    std::fs::create_dir_all(&knobs.out).expect("the output directory");
    std::fs::write(knobs.out.join("table.md"), &table).expect("table.md");
    let lines: String = reports.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(knobs.out.join("results.jsonl"), lines).expect("results.jsonl");

    let fleet_rss = rss_after_load[1] as f64 / MIB;
    assert!(
        fleet_rss <= knobs.rss_goal_mib,
        "the fleet server's RSS after the load is {fleet_rss:.1} MiB, above the goal of {} MiB",
        knobs.rss_goal_mib
    );
}
