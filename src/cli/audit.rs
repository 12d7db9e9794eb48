//! `gpu-policy audit` (its exit status: `cli::Command::Audit`). With
//! `--write-reports` the findings are written as policy reports
//! (`crate::reports`, `cluster::write_reports`), and nothing else is touched.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::{Context, bail};
use kube::api::GroupVersionKind;

use super::check::render_text;
use crate::admission::checker::{Checker, ObjectReport};
use crate::admission::{Mode, Workload};
use crate::cluster::{self, Cleanup, Connection};
use crate::manifest::Document;
use crate::policy::ClusterFacts;
use crate::policy::dra::claims::ClaimKind;
use crate::reports::{self, ReportApi, ReportScope, Timestamp};
use crate::settings::MODE_LABEL;

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Audit one namespace (its mode label, else enforce).
    #[arg(short = 'n', long, value_name = "NS", conflicts_with = "all_namespaces")]
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
    /// Output format (default: text; with --write-reports, only the lines
    /// of the reports written).
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<AuditOutput>,
    /// Write the findings into the cluster as policy reports (server-side
    /// apply, field manager gpu-policy-audit), one per namespace, and
    /// delete those written before for namespaces that have none now.
    #[arg(long)]
    pub write_reports: bool,
    /// The report API to write: wgpolicyk8s.io/v1alpha2 PolicyReports,
    /// openreports.io/v1alpha1 Reports, or whichever the cluster serves
    /// (OpenReports first).
    #[arg(long, value_enum, default_value_t = ReportApiArg::Auto, requires = "write_reports")]
    pub report_api: ReportApiArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuditOutput {
    /// One block per object, for people.
    Text,
    /// One JSON array: the element shape of `check -o json`.
    Json,
    /// The findings as wgpolicyk8s.io/v1alpha2 PolicyReports (YAML).
    Policyreport,
    /// The findings as openreports.io/v1alpha1 Reports (YAML).
    Openreports,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportApiArg {
    /// wgpolicyk8s.io/v1alpha2 PolicyReport.
    Wgpolicyk8s,
    /// openreports.io/v1alpha1 Report.
    Openreports,
    /// OpenReports if the cluster serves it, else PolicyReport.
    Auto,
}

impl ReportApiArg {
    /// None: ask the cluster.
    pub(super) fn chosen(self) -> Option<ReportApi> {
        match self {
            ReportApiArg::Wgpolicyk8s => Some(ReportApi::PolicyReport),
            ReportApiArg::Openreports => Some(ReportApi::OpenReports),
            ReportApiArg::Auto => None,
        }
    }
}

pub fn run(args: &AuditArgs) -> anyhow::Result<ExitCode> {
    super::runtime::run_in_runtime(audit(args))
}

/// The kinds audited in each namespace: pods, workloads, and the DRA
/// claims and claim templates (bounded-requests) of the served version of
/// `resource.k8s.io`, if any.
fn audited_kinds(dra_version: Option<&str>) -> Vec<GroupVersionKind> {
    let mut kinds = vec![GroupVersionKind::gvk("", "v1", "Pod")];
    kinds.extend(Workload::ALL.iter().map(|workload| {
        let version = "v1";
        GroupVersionKind::gvk(workload.group(), version, workload.kind())
    }));
    if let Some(version) = dra_version {
        kinds.extend(
            [ClaimKind::Claim, ClaimKind::Template]
                .map(|kind| cluster::dra_gvk(version, kind.as_str())),
        );
    }
    kinds
}

async fn audit(args: &AuditArgs) -> anyhow::Result<ExitCode> {
    let settings = super::args::settings_of(args.config.as_ref())?;
    let connection = match &args.kubeconfig {
        Some(path) => Connection::Kubeconfig(path.clone()),
        None => Connection::Default,
    };
    let client = cluster::connect(&connection)
        .await?
        .context("no reachable cluster: pass --kubeconfig or set KUBECONFIG")?;
    // Before anything is read: a cluster that serves no report API fails
    // fast.
    let write_api = if args.write_reports {
        let chosen = args.report_api.chosen();
        Some(cluster::report_api(&client, chosen, ReportScope::Namespaced).await?)
    } else {
        None
    };
    let snapshot =
        cluster::snapshot(&client, &settings).await.context("cannot read the cluster")?;
    let dra_version = cluster::served_dra_version(&client)
        .await
        .context("cannot read the cluster's API discovery")?;
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
        bail!("namespace {only:?} not found");
    }
    let mut documents = Vec::new();
    let mut reports = Vec::new();
    for (namespace, mode) in &targets {
        let annotations: BTreeMap<String, String> =
            ClusterFacts::namespace_annotations(&snapshot, namespace);
        let checker = Checker::new(&settings, *mode, namespace)
            .with_annotations(&annotations)
            .with_cluster(&snapshot);
        for gvk in audited_kinds(dra_version) {
            let objects = cluster::list_objects(&client, namespace, &gvk)
                .await
                .with_context(|| format!("cannot list {} in {namespace}", gvk.kind))?;
            for object in objects {
                reports.push(checker.check(&object));
                documents.push(Document { source: format!("{namespace}, {mode} mode"), object });
            }
        }
    }
    let violating = reports.iter().any(|r| !r.violations.is_empty() || r.error.is_some());
    // One time for every result of the run.
    let now = Timestamp::of(SystemTime::now());
    // With reports to write and no -o, only the lines of those written.
    let output = args.output.or(write_api.is_none().then_some(AuditOutput::Text));
    let mut out = std::io::stdout().lock();
    match output {
        None => {}
        Some(AuditOutput::Json) => writeln!(out, "{}", serde_json::to_string_pretty(&reports)?)?,
        Some(AuditOutput::Text) => {
            let pairs: Vec<(ObjectReport, &Document)> =
                reports.iter().cloned().zip(documents.iter()).collect();
            write!(out, "{}", render_text(&pairs, "running in the cluster"))?;
        }
        Some(format) => {
            let api = match format {
                AuditOutput::Policyreport => ReportApi::PolicyReport,
                _ => ReportApi::OpenReports,
            };
            let built = reports::build(&reports, api, now);
            write!(out, "{}", serde_saphyr::to_string_multiple(&built)?)?;
        }
    }
    let Some(api) = write_api else {
        return Ok(super::args::exit_status(violating));
    };
    let cleanup = match &args.namespace {
        Some(namespace) => Cleanup::Namespace(namespace),
        None => Cleanup::Everywhere,
    };
    let built = reports::build(&reports, api, now);
    let written = cluster::write_reports(&client, api, &built, cleanup).await?;
    super::runtime::print_written(&written, output.is_some())?;
    Ok(ExitCode::SUCCESS)
}
