//! `gpu-policy audit`: what the policy would change or deny for what is
//! already running. Read-only.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use kube::api::GroupVersionKind;

use super::{EXIT_BAD_INPUT, check::render_text};
use crate::admission::checker::{Checker, ObjectReport};
use crate::admission::{Mode, Workload};
use crate::cluster::{self, Connection};
use crate::manifest::Document;
use crate::policy::dra::claims::ClaimKind;
use crate::settings::{MODE_LABEL, Settings};

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Audit one namespace (its mode label, else enforce).
    #[arg(
        short = 'n',
        long,
        value_name = "NS",
        conflicts_with = "all_namespaces"
    )]
    pub namespace: Option<String>,
    /// Audit every namespace, opted in or not (enforce where unlabelled).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Kubeconfig (default: in-cluster, else KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The policy configuration file (YAML).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Output format: text, or json (the element shape of `check -o json`).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = AuditOutput::Text)]
    pub output: AuditOutput,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuditOutput {
    Text,
    Json,
}

pub fn run(args: &AuditArgs) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("gpu-policy: cannot start the runtime: {error}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    match runtime.block_on(audit(args)) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("gpu-policy: {message}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

/// The kinds audited in each namespace: pods, workloads, and the DRA
/// claims and claim templates (bounded-requests).
fn audited_kinds() -> Vec<GroupVersionKind> {
    let mut kinds = vec![GroupVersionKind::gvk("", "v1", "Pod")];
    kinds.extend(Workload::ALL.iter().map(|workload| {
        let version = "v1";
        GroupVersionKind::gvk(workload.group(), version, workload.kind())
    }));
    kinds.extend(
        [ClaimKind::Claim, ClaimKind::Template].map(|kind| cluster::dra_gvk(kind.as_str())),
    );
    kinds
}

async fn audit(args: &AuditArgs) -> Result<ExitCode, String> {
    let settings = match &args.config {
        Some(path) => Settings::load(path).map_err(|e| e.to_string())?,
        None => Settings::default(),
    };
    let connection = match &args.kubeconfig {
        Some(path) => Connection::Kubeconfig(path),
        None => Connection::Default,
    };
    let client = cluster::connect(connection)
        .await?
        .ok_or("no reachable cluster: pass --kubeconfig or set KUBECONFIG")?;
    let snapshot = cluster::snapshot(&client, &settings)
        .await
        .map_err(|e| format!("cannot read the cluster: {e}"))?;
    // (namespace, mode) pairs to audit.
    let targets: Vec<(String, Mode)> = snapshot
        .namespaces
        .iter()
        .filter_map(|(name, kept)| {
            let mode = kept.get(MODE_LABEL).and_then(|m| m.parse::<Mode>().ok());
            match (&args.namespace, args.all_namespaces, mode) {
                (Some(only), _, _) if only != name => None,
                (Some(_), _, mode) | (None, true, mode) => {
                    Some((name.clone(), mode.unwrap_or(Mode::Enforce)))
                }
                (None, false, Some(mode)) => Some((name.clone(), mode)),
                (None, false, None) => None,
            }
        })
        .collect();
    if let Some(only) = &args.namespace
        && targets.is_empty()
    {
        return Err(format!("namespace {only:?} not found"));
    }
    let mut documents = Vec::new();
    let mut reports = Vec::new();
    for (namespace, mode) in &targets {
        let annotations: BTreeMap<String, String> = snapshot.namespace_annotations_of(namespace);
        let checker = Checker::new(&settings, *mode, namespace)
            .with_annotations(&annotations)
            .with_cluster(&snapshot);
        for gvk in audited_kinds() {
            let objects = match cluster::list_objects(&client, namespace, &gvk).await {
                Ok(objects) => objects,
                // A cluster without resource.k8s.io/v1 has no claims.
                Err(e) if gvk.group == cluster::DRA_GROUP && cluster::is_not_served(&e) => {
                    Vec::new()
                }
                Err(e) => return Err(format!("cannot list {} in {namespace}: {e}", gvk.kind)),
            };
            for object in objects {
                reports.push(checker.check(&object));
                documents.push(Document {
                    source: format!("{namespace}, {mode} mode"),
                    object,
                });
            }
        }
    }
    let violating = reports
        .iter()
        .any(|r| !r.violations.is_empty() || r.error.is_some());
    let mut out = std::io::stdout().lock();
    let written = match args.output {
        AuditOutput::Json => serde_json::to_string_pretty(&reports)
            .map_err(|e| e.to_string())
            .and_then(|text| writeln!(out, "{text}").map_err(|e| e.to_string())),
        AuditOutput::Text => {
            let pairs: Vec<(ObjectReport, &Document)> =
                reports.into_iter().zip(documents.iter()).collect();
            let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            write!(
                out,
                "{}",
                render_text(&pairs, "running in the cluster", colour)
            )
            .map_err(|e| e.to_string())
        }
    };
    written?;
    Ok(if violating {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
