//! `gpu-policy manifests`: the complete install as YAML; with
//! `--admission-policies --cost`, the CEL cost of the policies instead;
//! with `--admission-policies --coverage`, what they cover of each rule.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::admission_policy::{cost_check, coverage};
use crate::install::{self, InstallOptions};
use crate::kubernetes_version::KubernetesVersion;
use crate::settings::Settings;

#[derive(Debug, clap::Args)]
pub struct ManifestsArgs {
    /// The namespace the webhook runs in.
    #[arg(long, default_value = install::NAME)]
    pub namespace: String,
    /// The container image.
    #[arg(long, conflicts_with = "webhook_url")]
    pub image: Option<String>,
    /// The Deployment's replicas.
    #[arg(long, default_value_t = 2, conflicts_with = "webhook_url")]
    pub replicas: u32,
    /// Register the webhook at this base URL (`https://HOST[:PORT][/PATH]`)
    /// instead of the in-cluster Service, for a server running outside the
    /// cluster (a laptop against kind or k3d, a local API server): every
    /// entry calls URL/mutate or URL/validate/..., and the ConfigMap,
    /// Deployment, Service and PodDisruptionBudget are left out (so
    /// --image and --replicas conflict with it); the Namespace,
    /// ServiceAccount and RBAC the server runs with are kept.
    #[arg(long, value_name = "URL", conflicts_with = "admission_policies")]
    pub webhook_url: Option<String>,
    /// A PEM CA to put in every caBundle; without it the server fills
    /// caBundle itself (the Secret route).
    #[arg(long, value_name = "FILE")]
    pub ca_bundle_file: Option<PathBuf>,
    /// failurePolicy of the enforce entries (warn and audit: Ignore).
    #[arg(long, value_parser = ["Fail", "Ignore"], default_value = "Fail")]
    pub failure_policy: String,
    /// The policy configuration the ConfigMap carries (default: the
    /// built-in one). The Roles that let the server watch the allowlisted
    /// workloads are derived from its allowlist, so applying the output
    /// again after changing the allowlist updates both. With --webhook-url
    /// there is no ConfigMap: give `serve --config` the same file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the ValidatingAdmissionPolicies of the validating rules and
    /// their bindings instead of the webhook: the policy evaluated by the
    /// API server itself, from the same --config.
    #[arg(long)]
    pub admission_policies: bool,
    /// With --admission-policies: also the MutatingAdmissionPolicies of the
    /// NVIDIA_VISIBLE_DEVICES pin, the runtime class and the webhook's
    /// annotations (v1 from Kubernetes 1.36, v1beta1 in 1.34-1.35: see
    /// --kube-version).
    #[arg(long, requires = "admission_policies")]
    pub mutating_policies: bool,
    /// With --admission-policies: instead of the manifests, the CEL cost
    /// of every expression of those policies (Markdown tables): its worst
    /// case, and its cost on a reference object (a Pod of 10 sidecars and
    /// 10 containers, a ResourceClaim of 10 requests) held against the API
    /// server's per-expression and per-request limits. Exit status 1 when
    /// one is over a limit or cannot be estimated.
    #[arg(long, requires = "admission_policies")]
    pub cost: bool,
    /// With --admission-policies: instead of the manifests, a Markdown
    /// table of what the policies generated from --config enforce of each
    /// rule, and what only the webhook does.
    #[arg(long, requires = "admission_policies", conflicts_with = "cost")]
    pub coverage: bool,
    /// The Kubernetes release of the cluster (1.MINOR, or the version
    /// `kubectl version` prints): render only what it serves. The
    /// ResourceClaim rules name its resource.k8s.io version (v1beta1
    /// before 1.34); the MutatingAdmissionPolicies are v1 from 1.36,
    /// v1beta1 in 1.34 and 1.35, none before; a policy whose CEL calls a
    /// function that release's API server refuses is left out, with a
    /// note on stderr. Default: the newest supported release.
    #[arg(long, value_name = "VERSION", value_parser = KubernetesVersion::parse,
          default_value_t = KubernetesVersion::default())]
    pub kube_version: KubernetesVersion,
}

pub fn run(args: &ManifestsArgs) -> anyhow::Result<ExitCode> {
    let (options, settings) = read_inputs(args)?;
    if args.cost {
        return Ok(print_cost(&settings, args.mutating_policies));
    }
    let text = if args.coverage {
        coverage::coverage_table(&settings, args.kube_version)
    } else if args.admission_policies {
        let rendered = crate::admission_policy::manifests(
            &settings,
            args.mutating_policies,
            args.kube_version,
        );
        for note in &rendered.notes {
            eprintln!("gpu-policy: note: {note}");
        }
        serde_saphyr::to_string_multiple(&rendered.objects)?
    } else {
        serde_saphyr::to_string_multiple(&install::objects(&options, settings.config())?)?
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    Ok(ExitCode::SUCCESS)
}

/// The install options and the policy settings the flags name.
fn read_inputs(args: &ManifestsArgs) -> anyhow::Result<(InstallOptions, Settings)> {
    // It is written into object paths and into the guard policies' CEL
    // strings: a name Kubernetes would refuse is refused here.
    if !crate::cluster::is_dns_label(&args.namespace) {
        bail!(
            "--namespace {:?} is not a namespace name (a DNS label: lowercase letters, digits and '-', at most 63)",
            args.namespace
        );
    }
    let mut options = InstallOptions {
        namespace: args.namespace.clone(),
        replicas: args.replicas,
        failure_policy: args.failure_policy.clone(),
        kubernetes: args.kube_version,
        ..InstallOptions::default()
    };
    if let Some(image) = &args.image {
        options.image = image.clone();
    }
    if let Some(url) = &args.webhook_url {
        // Escaped: a newline in it must not split the one line.
        let parsed = install::WebhookUrl::parse(url)
            .with_context(|| format!("--webhook-url {}", url.escape_debug()))?;
        options.webhook_url = Some(parsed);
    }
    if let Some(path) = &args.ca_bundle_file {
        let pem = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        options.ca_bundle = Some(pem);
    }
    Ok((options, super::args::settings_of(args.config.as_ref())?))
}

/// The cost tables; exit status 1 when a policy is over a limit on its
/// reference object.
fn print_cost(settings: &Settings, mutating: bool) -> ExitCode {
    let checks = cost_check::check(settings, mutating);
    let _ = std::io::stdout().lock().write_all(cost_check::report(&checks).as_bytes());
    let over: Vec<String> = checks
        .iter()
        .filter(|c| !c.within_limits())
        .map(|c| format!("{} ({})", c.reference.name, c.reference.kind))
        .collect();
    if !over.is_empty() {
        eprintln!(
            "gpu-policy: over the API server's cost limits on the reference object: {}",
            over.join(", ")
        );
    }
    super::args::exit_status(!over.is_empty())
}
