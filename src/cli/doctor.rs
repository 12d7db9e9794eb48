//! `gpu-policy doctor` (its exit status: `cli::Command::Doctor`; what it
//! reads and reports: docs/operations.md, "gpu-policy doctor"), within
//! [`READ_TIMEOUT`]; `--write-report` writes through `audit`'s writer.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow, bail};

use super::audit::ReportApiArg;
use crate::cluster::{self, Cleanup, Connection, InventoryOptions};
use crate::doctor::inventory::{ConfigSource, PolicyConfig};
use crate::doctor::{self, Seen};
use crate::install::NAME;
use crate::reports::{self, ReportScope, Timestamp};
use crate::settings::Settings;

/// How long the whole read of the cluster may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Kubeconfig (default: in-cluster, else KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The policy configuration file (YAML); default: the install's
    /// ConfigMap, if readable, else the defaults.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The namespace gpu-policy is installed in.
    #[arg(short = 'n', long, value_name = "NS", default_value = NAME)]
    pub namespace: String,
    /// Output format (default: text; with --write-report, only the line of
    /// the report written).
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<DoctorOutput>,
    /// Write the findings into the cluster as one cluster-scoped report
    /// (ClusterReport or ClusterPolicyReport gpu-policy-doctor;
    /// server-side apply, field manager gpu-policy-audit).
    #[arg(long)]
    pub write_report: bool,
    /// The report API to write: wgpolicyk8s.io/v1alpha2, openreports.io/v1alpha1,
    /// or whichever the cluster serves (OpenReports first).
    #[arg(long, value_enum, default_value_t = ReportApiArg::Auto, requires = "write_report")]
    pub report_api: ReportApiArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DoctorOutput {
    /// The findings, their evidence and fixes, for people.
    Text,
    /// One JSON document (schema in docs/operations.md).
    Json,
}

pub fn run(args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    super::runtime::run_in_runtime(doctor(args))
}

/// The settings the checks use, and where they came from.
async fn settings(
    args: &DoctorArgs,
    client: &kube::Client,
) -> anyhow::Result<(Settings, ConfigSource)> {
    if let Some(path) = &args.config {
        let settings = Settings::load(path)?;
        return Ok((settings, ConfigSource::File(path.display().to_string())));
    }
    let config_map = format!("{}/{NAME}", args.namespace);
    let text = cluster::install_config(client, &args.namespace)
        .await
        .with_context(|| format!("cannot read the cluster: ConfigMap {config_map}"))?;
    Ok(match text {
        None => (Settings::default(), ConfigSource::Defaults),
        Some(text) => match Settings::from_yaml(&text, &config_map) {
            Ok(settings) => (settings, ConfigSource::ConfigMap(config_map)),
            Err(error) => (
                Settings::default(),
                ConfigSource::Invalid { config_map, error: error.to_string() },
            ),
        },
    })
}

async fn doctor(args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    let connection = match &args.kubeconfig {
        Some(path) => Connection::Kubeconfig(path.clone()),
        None => Connection::Default,
    };
    let client = cluster::connect(&connection).await?.context(
        "cannot reach the API server: pass --kubeconfig, set KUBECONFIG, or run in a pod",
    )?;
    let write_api = match args.write_report {
        true => Some(
            cluster::report_api(&client, args.report_api.chosen(), ReportScope::Cluster).await?,
        ),
        false => None,
    };
    let (settings, source) = settings(args, &client).await?;
    let now = SystemTime::now();
    let options = InventoryOptions {
        namespace: &args.namespace,
        settings: &settings,
        config: PolicyConfig {
            source,
            runtime_class_name: settings.config().runtime_class_name.clone(),
        },
        now: now
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            .unwrap_or(0),
    };
    let inventory = tokio::time::timeout(READ_TIMEOUT, cluster::read_inventory(&client, options))
        .await
        .map_err(|_| anyhow!("cannot read the cluster within {} s", READ_TIMEOUT.as_secs()))?
        .context("cannot read the cluster")?;
    if let Seen::Forbidden { rbac } = inventory.nodes {
        bail!("cannot read the cluster: nodes are forbidden to this user; grant {rbac}");
    }
    let diagnosis = doctor::diagnose(&inventory);
    // With reports to write and no -o, only the lines of those written.
    let output = args.output.or(write_api.is_none().then_some(DoctorOutput::Text));
    let mut out = std::io::stdout().lock();
    match output {
        None => {}
        Some(DoctorOutput::Text) => write!(out, "{}", doctor::text(&diagnosis))?,
        Some(DoctorOutput::Json) => writeln!(out, "{}", doctor::json(&diagnosis)?)?,
    }
    let Some(api) = write_api else {
        return Ok(super::args::exit_status(!diagnosis.healthy()));
    };
    let report = reports::doctor_report(&diagnosis, api, Timestamp::of(now));
    let written = cluster::write_reports(&client, api, &[report], Cleanup::Nothing).await?;
    super::runtime::print_written(&written, output.is_some())?;
    Ok(ExitCode::SUCCESS)
}
