//! `gpu-policy serve`: the flags, parsed into [`server::Options`] for [`server::run`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::certs::secret::{self, RouteConfig, SecretRef};
use crate::server::budget::Limits;
use crate::server::{self, Certificates, ClientAuthOptions, ClusterAccess};
use crate::telemetry::{self, LogFormat};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// HTTPS address of the admission endpoints.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Plain HTTP address of /metrics, /healthz and /readyz.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_listen: SocketAddr,
    /// The policy configuration file (YAML), reloaded when it changes.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Serving certificate (PEM, chain allowed); reloaded when it changes.
    #[arg(long, value_name = "FILE", requires = "tls_key", conflicts_with = "cert_secret")]
    pub tls_cert: Option<PathBuf>,
    /// Private key of the serving certificate (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Where a self-signed CA and certificate are written when --tls-cert
    /// is not given (reused while valid), or the pair of --cert-secret.
    #[arg(long, value_name = "DIR", default_value = "certs")]
    pub certs_dir: PathBuf,
    /// An extra DNS name for the self-signed or --cert-secret certificate
    /// (repeatable).
    #[arg(long = "dns-name", value_name = "NAME")]
    pub dns_names: Vec<String>,
    #[command(flatten)]
    pub secret: Box<CertSecretArgs>,
    /// Require a client certificate signed by a CA of this file (PEM, one
    /// or more certificates); reloaded when it changes. A client without
    /// one fails the TLS handshake.
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,
    /// With --client-ca: the client certificate's subject CN or one of its
    /// DNS names must also equal one of these names (repeatable).
    #[arg(long = "client-name", value_name = "NAME", requires = "client_ca")]
    pub client_names: Vec<String>,
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
    /// Run on the static configuration only, without reading the cluster.
    #[arg(long, conflicts_with = "kubeconfig")]
    pub no_cluster: bool,
    /// Kubeconfig to reach the API server (default: in-cluster service
    /// account, else KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// How often the certificate, client CA and config files are compared
    /// with what is loaded.
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    pub reload_interval: u64,
    #[command(flatten)]
    pub budget: BudgetArgs,
}

/// The admission port's budget (docs/operations.md, "The admission port's
/// budget"). Shares are per peer IP address.
#[derive(Debug, clap::Args)]
pub struct BudgetArgs {
    /// Open connections on the admission port, all peers together; past
    /// it a new connection is closed at once, unless its peer is under
    /// its fair share, in which case a connection of the peer holding the
    /// most is closed for it.
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT.connections,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// Open connections of one peer address; past it a new connection is
    /// closed at once.
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT.connections_per_peer,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections_per_peer: u64,
    /// Request body bytes in flight (being received or decided), all peers
    /// together, in MiB; at least the 3 MiB a single review may have.
    #[arg(long, value_name = "MIB", default_value_t = Limits::DEFAULT.body_bytes >> 20,
          value_parser = clap::value_parser!(u64).range(3..=65536))]
    pub max_inflight_mib: u64,
    /// Request body bytes in flight of one peer address, in MiB; a request
    /// past it is answered 429 with Retry-After.
    #[arg(long, value_name = "MIB", default_value_t = Limits::DEFAULT.body_bytes_per_peer >> 20,
          value_parser = clap::value_parser!(u64).range(3..=65536))]
    pub max_inflight_mib_per_peer: u64,
    /// From the first byte of a request to the last byte of its body; a
    /// request still arriving then has its connection closed.
    #[arg(long, value_name = "SECONDS", default_value_t = Limits::DEFAULT.request_deadline.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub request_deadline: u64,
    /// How long a kept-alive connection may wait for its next request
    /// before it is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = Limits::DEFAULT.idle_timeout.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub idle_timeout: u64,
}

impl BudgetArgs {
    /// The limits the flags ask for.
    pub fn limits(&self) -> Limits {
        Limits {
            connections: self.max_connections,
            connections_per_peer: self.max_connections_per_peer,
            body_bytes: self.max_inflight_mib << 20,
            body_bytes_per_peer: self.max_inflight_mib_per_peer << 20,
            request_deadline: Duration::from_secs(self.request_deadline),
            idle_timeout: Duration::from_secs(self.idle_timeout),
        }
    }
}

/// The --cert-secret route (boxed in [`ServeArgs`] to keep the command
/// enum small).
#[derive(Debug, clap::Args)]
pub struct CertSecretArgs {
    /// Share one CA and serving certificate between all replicas through
    /// this Secret (ca.crt, ca.key, tls.crt, tls.key; type Opaque or
    /// kubernetes.io/tls), which must exist: the install creates it empty
    /// and the server fills it (get and update, never create), renews the
    /// serving certificate in place, re-reads it every --reload-interval
    /// and serves it from --certs-dir. Needs the cluster.
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "no_cluster")]
    pub cert_secret: Option<SecretRef>,
    /// A MutatingWebhookConfiguration and/or ValidatingWebhookConfiguration
    /// whose caBundle is kept equal to the CA of --cert-secret (repeatable).
    #[arg(long = "webhook-config", value_name = "NAME", requires = "cert_secret")]
    pub webhook_configs: Vec<String>,
    /// The Service in front of the webhook: NAME.NAMESPACE.svc is added to
    /// the --cert-secret certificate.
    #[arg(long, value_name = "NAME", default_value = secret::DEFAULT_SERVICE)]
    pub service_name: String,
    /// Namespace of --service-name.
    #[arg(long, value_name = "NAMESPACE", default_value = secret::DEFAULT_SERVICE_NAMESPACE)]
    pub service_namespace: String,
}

impl ServeArgs {
    /// What the flags ask of the server.
    pub fn options(&self) -> server::Options {
        let certificates = match (&self.tls_cert, &self.tls_key, &self.secret.cert_secret) {
            (Some(cert), Some(key), _) => {
                Certificates::Files { cert: cert.clone(), key: key.clone() }
            }
            (_, _, Some(secret)) => Certificates::Secret(RouteConfig {
                dns_names: self.dns_names.clone(),
                service: self.secret.service_name.clone(),
                service_namespace: self.secret.service_namespace.clone(),
                webhook_configs: self.secret.webhook_configs.clone(),
                ..RouteConfig::new(secret.clone(), self.certs_dir.clone())
            }),
            _ => Certificates::SelfSigned {
                dir: self.certs_dir.clone(),
                dns_names: self.dns_names.clone(),
            },
        };
        let cluster = match (&self.kubeconfig, self.no_cluster) {
            (_, true) => ClusterAccess::Disabled,
            (Some(path), false) => ClusterAccess::Kubeconfig(path.clone()),
            (None, false) => ClusterAccess::Default,
        };
        server::Options {
            listen: self.listen,
            metrics_listen: self.metrics_listen,
            config: self.config.clone(),
            certificates,
            cluster,
            client_auth: self
                .client_ca
                .clone()
                .map(|ca| ClientAuthOptions { ca, names: self.client_names.clone() }),
            reload_interval: Duration::from_secs(self.reload_interval),
            budget: self.budget.limits(),
        }
    }
}

pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    // Held until `run` returns: dropping it writes out the queued log lines.
    let _log_writer = telemetry::init(args.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    if let Err(error) = runtime.block_on(server::run(args.options())) {
        tracing::error!(%error, "gpu-policy serve failed");
        return Err(error.into());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests;
