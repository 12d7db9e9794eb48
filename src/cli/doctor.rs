//! `gpu-policy doctor`: why GPUs do not show up, and whether gpu-policy
//! works, from one read of the cluster (`cluster::read_inventory`), the
//! checks of `crate::doctor`, printed as text or JSON; with
//! `--write-report`, written as one cluster-scoped policy report through
//! `audit`'s writer (`cluster::write_reports`).
//!
//! Runs as whoever the kubeconfig names, or in a pod as its ServiceAccount
//! (the webhook's has what doctor reads: docs/operations.md). A kind it
//! may not read is a note, and the checks that need it are skipped.
//!
//! Exit status: 0 when nothing is found, 1 with findings, 2 when the
//! cluster cannot be read (unreachable, the nodes unreadable, an error
//! other than forbidden or not found, the read past [`READ_TIMEOUT`]) or
//! the configuration cannot be loaded. With `--write-report`: 0 once the
//! report is written, whatever it says (as `audit --write-reports`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

pub fn run(args: &DoctorArgs) -> ExitCode {
    super::runtime::run_in_runtime(doctor(args))
}

/// The settings the checks use, and where they came from.
async fn settings(
    args: &DoctorArgs,
    client: &kube::Client,
) -> Result<(Settings, ConfigSource), String> {
    if let Some(path) = &args.config {
        let settings = Settings::load(path).map_err(|e| e.to_string())?;
        return Ok((settings, ConfigSource::File(path.display().to_string())));
    }
    let config_map = format!("{}/{NAME}", args.namespace);
    let text = cluster::install_config(client, &args.namespace)
        .await
        .map_err(|e| format!("cannot read the cluster: ConfigMap {config_map}: {e}"))?;
    Ok(match text {
        None => (Settings::default(), ConfigSource::Defaults),
        Some(text) => match Settings::from_yaml(&text, &config_map) {
            Ok(settings) => (settings, ConfigSource::ConfigMap(config_map)),
            Err(error) => (
                Settings::default(),
                ConfigSource::Invalid {
                    config_map,
                    error: error.to_string(),
                },
            ),
        },
    })
}

async fn doctor(args: &DoctorArgs) -> Result<ExitCode, String> {
    let connection = match &args.kubeconfig {
        Some(path) => Connection::Kubeconfig(path),
        None => Connection::Default,
    };
    let client = cluster::connect(connection)
        .await
        .map_err(|err| err.to_string())?
        .ok_or("cannot reach the API server: pass --kubeconfig, set KUBECONFIG, or run in a pod")?;
    let write_api = match args.write_report {
        true => Some(
            cluster::report_api(&client, args.report_api.chosen(), ReportScope::Cluster)
                .await
                .map_err(|e| e.to_string())?,
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
        .map_err(|_| {
            format!(
                "cannot read the cluster within {} s",
                READ_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| format!("cannot read the cluster: {e}"))?;
    if let Seen::Forbidden { rbac } = inventory.nodes {
        return Err(format!(
            "cannot read the cluster: nodes are forbidden to this user; grant {rbac}"
        ));
    }
    let diagnosis = doctor::diagnose(&inventory);
    let output = match (args.output, write_api) {
        (Some(output), _) => Some(output),
        (None, None) => Some(DoctorOutput::Text),
        (None, Some(_)) => None,
    };
    let mut out = std::io::stdout().lock();
    let printed = match output {
        None => Ok(()),
        Some(DoctorOutput::Text) => write!(out, "{}", doctor::text(&diagnosis)),
        Some(DoctorOutput::Json) => {
            let text = doctor::json(&diagnosis).map_err(|e| e.to_string())?;
            writeln!(out, "{text}")
        }
    };
    printed.map_err(|e| e.to_string())?;
    let Some(api) = write_api else {
        return Ok(match diagnosis.healthy() {
            true => ExitCode::SUCCESS,
            false => ExitCode::from(1),
        });
    };
    let report = reports::doctor_report(&diagnosis, api, Timestamp::of(now));
    let written = cluster::write_reports(&client, api, &[report], Cleanup::Nothing)
        .await
        .map_err(|e| e.to_string())?;
    for line in written {
        let shown = match output {
            None => writeln!(out, "{line}"),
            Some(_) => writeln!(std::io::stderr(), "{line}"),
        };
        shown.map_err(|e| e.to_string())?;
    }
    Ok(ExitCode::SUCCESS)
}
