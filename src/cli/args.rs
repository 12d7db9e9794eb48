//! `check`'s flags, and what every command shares: `--config`, the exit status, stdout.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;

use crate::admission::Mode;
use crate::kubernetes_version::KubernetesVersion;
use crate::settings::Settings;

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// A file, a folder (recursive: *.yaml, *.yml, *.json) or - for stdin.
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    pub files: Vec<PathBuf>,
    /// The namespace's mode.
    #[arg(long, value_enum, default_value_t = ModeArg::Enforce)]
    pub mode: ModeArg,
    /// The namespace of objects that name none.
    #[arg(long, value_name = "NS", default_value = "default")]
    pub namespace: String,
    /// A namespace annotation to simulate (repeatable), e.g.
    /// gpu-policy.io/max-gpus-per-pod=2.
    #[arg(long = "namespace-annotation", value_name = "KEY=VALUE", value_parser = key_value)]
    pub namespace_annotations: Vec<(String, String)>,
    /// The policy configuration file (YAML); defaults apply without one.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = CheckOutput::Text)]
    pub output: CheckOutput,
    /// Read what GPU images need from their registries, as the webhook does
    /// in imageResolution.mode registry (with the config's timeout per
    /// object, its insecureRegistries and credentialsFile); the image table
    /// answers for an image whose registry does not.
    #[arg(long)]
    pub resolve_images: bool,
    /// A dockerconfigjson file with the registry credentials (instead of
    /// the config's imageResolution.credentialsFile); needs --resolve-images.
    #[arg(long, value_name = "FILE", requires = "resolve_images")]
    pub registry_credentials: Option<PathBuf>,
    /// What the cluster's nodes carry: a YAML or JSON file of Node objects
    /// or a List of them (`kubectl get nodes -o yaml`). R4 then leaves out
    /// the floors whose GPU Feature Discovery labels no GPU node carries,
    /// and warns when no node meets a minimum, as the webhook does; without
    /// it every floor is written.
    #[arg(long, value_name = "FILE")]
    pub nodes: Option<PathBuf>,
    /// The GPU products the cluster's GPU nodes carry (GPU Feature
    /// Discovery's nvidia.com/gpu.product values), comma separated, e.g.
    /// NVIDIA-H100-80GB-HBM3,NVIDIA-A10: what the globs of gpuProducts and
    /// of the namespace annotation gpu-policy.io/gpu-products expand to, as
    /// the webhook expands them against its nodes, without Node manifests.
    /// Added to the products of --nodes.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub node_products: Vec<String>,
    /// The pods as they are now (`kubectl get pod -o yaml`): a Pod of -f
    /// with the namespace and name of one of them is checked as the update
    /// from it, as the webhook judges a second `kubectl apply` or
    /// `kubectl set image` (its answer to `--dry-run=server`). Repeatable;
    /// a file, a folder or - for stdin, as -f.
    #[arg(long = "old", value_name = "PATH")]
    pub old: Vec<PathBuf>,
    /// What decides: the webhook's rules, or the generated admission
    /// policies (`manifests --admission-policies --mutating-policies`)
    /// evaluated in CEL, as the API server would without the webhook.
    #[arg(long, value_enum, default_value_t = Engine::Webhook, conflicts_with_all = ["resolve_images", "nodes", "node_products"])]
    pub engine: Engine,
    /// With --engine cel: the policies `manifests --admission-policies
    /// --mutating-policies --kube-version VERSION` renders for that
    /// Kubernetes release (none of the mutating ones before 1.34, and
    /// none whose CEL it refuses). Default: the newest supported release.
    #[arg(long, value_name = "VERSION", value_parser = KubernetesVersion::parse)]
    pub kube_version: Option<KubernetesVersion>,
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    ValueEnum,
    serde::Deserialize,
    strum::Display,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Engine {
    /// The webhook's rules.
    Webhook,
    /// The generated ValidatingAdmissionPolicies and
    /// MutatingAdmissionPolicies, in CEL.
    Cel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Enforce,
    Warn,
    Audit,
}

impl From<ModeArg> for Mode {
    fn from(mode: ModeArg) -> Self {
        match mode {
            ModeArg::Enforce => Mode::Enforce,
            ModeArg::Warn => Mode::Warn,
            ModeArg::Audit => Mode::Audit,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckOutput {
    /// One block per object, for people.
    Text,
    /// One JSON array, one element per object.
    Json,
    /// Every object after mutation, as multi-document YAML.
    Yaml,
}

fn key_value(text: &str) -> anyhow::Result<(String, String)> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => anyhow::bail!("{text:?} is not KEY=VALUE"),
    }
}

/// Exit status for bad input (unreadable path, YAML/JSON error, bad flags).
pub const EXIT_BAD_INPUT: u8 = 2;

/// The settings of `--config FILE`, the defaults without it.
pub(super) fn settings_of(config: Option<&PathBuf>) -> anyhow::Result<Settings> {
    Ok(match config {
        Some(path) => Settings::load(path)?,
        None => Settings::default(),
    })
}

/// 1 when something failed (denied, violated, found), else 0.
pub(super) fn exit_status(failed: bool) -> ExitCode {
    match failed {
        true => ExitCode::from(1),
        false => ExitCode::SUCCESS,
    }
}

/// `text` on stdout; a closed pipe (`| head`) is not an error of the input.
pub(super) fn print(text: &str) -> std::io::Result<()> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(err),
        _ => Ok(()),
    }
}
