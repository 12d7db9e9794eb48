//! `gpu-policy serve`: the webhook over HTTPS, operations over HTTP.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use rustls::server::danger::ClientCertVerifier;

use crate::certs::client_auth::ClientAuth;
use crate::certs::secret::{RouteConfig, SecretRef, SecretRoute};
use crate::certs::{self, CertificateResolver, Reload};
use crate::cluster::{self, ClusterCache, Watches};
use crate::server::{self, AppState};
use crate::settings::Settings;
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
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_key",
        conflicts_with = "cert_secret"
    )]
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
}

/// The --cert-secret route (boxed in [`ServeArgs`] to keep the command
/// enum small).
#[derive(Debug, clap::Args)]
pub struct CertSecretArgs {
    /// Share one CA and serving certificate between all replicas through
    /// this Secret (type kubernetes.io/tls: ca.crt, ca.key, tls.crt,
    /// tls.key): created when absent, the serving certificate renewed in
    /// place, re-read every --reload-interval and served from --certs-dir.
    /// Needs the cluster.
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "no_cluster")]
    pub cert_secret: Option<SecretRef>,
    /// A MutatingWebhookConfiguration and/or ValidatingWebhookConfiguration
    /// whose caBundle is kept equal to the CA of --cert-secret (repeatable).
    #[arg(long = "webhook-config", value_name = "NAME", requires = "cert_secret")]
    pub webhook_configs: Vec<String>,
    /// The Service in front of the webhook: NAME.NAMESPACE.svc is added to
    /// the --cert-secret certificate.
    #[arg(long, value_name = "NAME", default_value = certs::secret::DEFAULT_SERVICE)]
    pub service_name: String,
    /// Namespace of --service-name.
    #[arg(long, value_name = "NAMESPACE", default_value = certs::secret::DEFAULT_SERVICE_NAMESPACE)]
    pub service_namespace: String,
}

pub fn run(args: &ServeArgs) -> ExitCode {
    // Held until `run` returns: dropping it writes out the queued log lines.
    let _log_writer = telemetry::init(args.log_format);
    // kube's client and rustls need one process-level provider; installing
    // it explicitly avoids "Could not automatically determine the
    // process-level CryptoProvider". It fails only if one is installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            tracing::error!(error = %message, "gpu-policy serve failed");
            eprintln!("gpu-policy: {message}");
            ExitCode::FAILURE
        }
    }
}

fn load_settings(path: Option<&Path>) -> Result<Settings, String> {
    match path {
        Some(path) => Settings::load(path).map_err(|e| e.to_string()),
        None => Ok(Settings::default()),
    }
}

async fn serve(args: &ServeArgs) -> Result<(), String> {
    let settings = load_settings(args.config.as_deref())?;
    let state = Arc::new(AppState::new(settings));
    state.readiness.config_loaded.store(true, Ordering::Release);
    state.metrics.set_reload("config", true);

    let connection = match (&args.kubeconfig, args.no_cluster) {
        (_, true) => cluster::Connection::Disabled,
        (Some(path), false) => cluster::Connection::Kubeconfig(path),
        (None, false) => cluster::Connection::Default,
    };
    let client = cluster::connect(connection).await?;
    let mut watches = None;
    match client.clone() {
        Some(client) => {
            let cache = Arc::new(ClusterCache::default());
            let started =
                Watches::start(client.clone(), &state.settings.load(), Arc::clone(&cache));
            watches = Some(started);
            let _ = state.cluster.set(cache);
            let _ = state.client.set(client);
            tracing::info!(
                "reading the cluster: namespaces, nodes, runtime classes, allowlisted workloads"
            );
        }
        None => tracing::info!(
            "running without a cluster: static configuration only (no namespace annotations, \
             RuntimeClass, node or owner checks)"
        ),
    }

    let mut secret_route = None;
    let (cert_path, key_path) = match (&args.tls_cert, &args.tls_key, &args.secret.cert_secret) {
        (Some(cert), Some(key), _) => (cert.clone(), key.clone()),
        (_, _, Some(secret)) => {
            let Some(client) = client else {
                return Err(format!(
                    "--cert-secret {secret} needs the API server, which is not configured or \
                     does not answer"
                ));
            };
            let route = secret_route_start(client, secret, args).await?;
            let paths = (route.cert_path(), route.key_path());
            secret_route = Some(route);
            paths
        }
        _ => {
            let generated = certs::ensure_self_signed(&args.certs_dir, &args.dns_names)
                .map_err(|e| e.to_string())?;
            tracing::info!(
                ca = %generated.ca.display(),
                reused = generated.reused,
                "serving a self-signed certificate; clients verify it with this CA"
            );
            (generated.cert, generated.key)
        }
    };
    let resolver =
        Arc::new(CertificateResolver::load(&cert_path, &key_path).map_err(|e| e.to_string())?);
    state
        .readiness
        .certificate_loaded
        .store(true, Ordering::Release);
    state
        .metrics
        .certificate_expiry
        .set(resolver.not_after() as f64);
    state.metrics.set_reload("certificate", true);
    let every = Duration::from_secs(args.reload_interval.max(1));
    let client_auth = client_auth_start(args, &state, every)?;
    let tls = Arc::new(
        certs::server_config(Arc::clone(&resolver), client_auth).map_err(|e| e.to_string())?,
    );

    let poller_state = Arc::clone(&state);
    let poller_resolver = Arc::clone(&resolver);
    let _certificate_poller =
        Arc::clone(&resolver).spawn_poller(every, move |reload| match reload {
            Reload::Reloaded => {
                tracing::info!("serving certificate reloaded");
                poller_state.metrics.set_reload("certificate", true);
                poller_state
                    .metrics
                    .certificate_expiry
                    .set(poller_resolver.not_after() as f64);
            }
            Reload::Failed(error) => {
                tracing::error!(%error, "new certificate refused; the previous one keeps serving");
                poller_state.metrics.set_reload("certificate", false);
            }
            Reload::Unchanged => {}
        });
    if let Some(path) = args.config.clone() {
        tokio::spawn(watch_config(path, every, Arc::clone(&state), watches));
    }
    if let Some(route) = secret_route {
        tokio::spawn(route.run(every));
    }

    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let operations = TcpListener::bind(args.metrics_listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.metrics_listen))?;
    state
        .readiness
        .listener_bound
        .store(true, Ordering::Release);
    tracing::info!(
        listen = %listener.local_addr().map_or(args.listen, |a| a),
        metrics_listen = %operations.local_addr().map_or(args.metrics_listen, |a| a),
        "gpu-policy serving"
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    let operations_app = server::operations_router(Arc::clone(&state));
    let mut operations_stop = stop_rx.clone();
    let operations_task = tokio::spawn(async move {
        let stopped = async move {
            let _ = operations_stop.wait_for(|stop| *stop).await;
        };
        axum::serve(operations, operations_app)
            .with_graceful_shutdown(stopped)
            .await
    });
    let mut admission_stop = stop_rx;
    let admission = server::listener::serve_tls(
        listener,
        tls,
        server::router(Arc::clone(&state)),
        async move {
            let _ = admission_stop.wait_for(|stop| *stop).await;
        },
        {
            let state = Arc::clone(&state);
            move || state.drain_timeout()
        },
    );
    let signals = async {
        server::listener::shutdown_signal().await;
        tracing::info!("shutting down: no new connections, finishing requests in flight");
        let _ = stop_tx.send(true);
    };
    tokio::join!(admission, signals);
    let _ = operations_task.await;
    tracing::info!("gpu-policy stopped");
    Ok(())
}

/// With --client-ca: loads the CAs (serve fails when they do not load, so
/// the server is never ready without them) and polls the file every
/// `every`; a file that does not load is refused and the CAs in force stay.
fn client_auth_start(
    args: &ServeArgs,
    state: &Arc<AppState>,
    every: Duration,
) -> Result<Option<Arc<dyn ClientCertVerifier>>, String> {
    let Some(path) = &args.client_ca else {
        return Ok(None);
    };
    let auth = Arc::new(ClientAuth::load(path, &args.client_names).map_err(|e| e.to_string())?);
    state.metrics.set_reload("client_ca", true);
    tracing::info!(
        ca = %path.display(),
        cas = auth.ca_count(),
        names = %args.client_names.join(", "),
        "requiring client certificates"
    );
    let poller_state = Arc::clone(state);
    let poller_auth = Arc::clone(&auth);
    let _poller = Arc::clone(&auth).spawn_poller(every, move |reload| match reload {
        Reload::Reloaded => {
            tracing::info!(cas = poller_auth.ca_count(), "client CA reloaded");
            poller_state.metrics.set_reload("client_ca", true);
        }
        Reload::Failed(error) => {
            tracing::error!(%error, "new client CA refused; the previous one stays in force");
            poller_state.metrics.set_reload("client_ca", false);
        }
        Reload::Unchanged => {}
    });
    Ok(Some(auth))
}

/// The first pass of the --cert-secret route, before the resolver loads its
/// files. When it fails, files left in --certs-dir by an earlier run (an
/// emptyDir survives container restarts) are served while the loop retries;
/// without them there is nothing to serve and `serve` fails.
async fn secret_route_start(
    client: kube::Client,
    secret: &SecretRef,
    args: &ServeArgs,
) -> Result<SecretRoute, String> {
    let config = RouteConfig {
        dns_names: args.dns_names.clone(),
        service: args.secret.service_name.clone(),
        service_namespace: args.secret.service_namespace.clone(),
        webhook_configs: args.secret.webhook_configs.clone(),
        ..RouteConfig::new(secret.clone(), args.certs_dir.clone())
    };
    let route = SecretRoute::new(client, config);
    match route.ensure_once().await {
        Ok(outcome) => {
            outcome.log(secret);
            tracing::info!(
                %secret,
                dir = %args.certs_dir.display(),
                "serving the certificate of the Secret"
            );
        }
        Err(error) if route.cert_path().is_file() && route.key_path().is_file() => {
            tracing::error!(
                %secret,
                %error,
                "certificate Secret unavailable; serving the files of the last run, retrying"
            );
        }
        Err(error) => return Err(error.to_string()),
    }
    Ok(route)
}

/// Polls the config file and swaps the settings when its bytes change; a
/// file that does not parse is refused and the previous settings stay. The
/// cluster watches follow the new settings.
async fn watch_config(
    path: PathBuf,
    every: Duration,
    state: Arc<AppState>,
    watches: Option<Watches>,
) {
    let mut last = std::fs::read(&path).ok();
    let mut ticker = tokio::time::interval(every);
    loop {
        ticker.tick().await;
        let current = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::error!(path = %path.display(), %error, "cannot read the config file; keeping the loaded settings");
                state.metrics.set_reload("config", false);
                continue;
            }
        };
        if last.as_deref() == Some(current.as_slice()) {
            continue;
        }
        let parsed = String::from_utf8(current.clone())
            .map_err(|e| e.to_string())
            .and_then(|text| {
                Settings::from_yaml(&text, &path.display().to_string()).map_err(|e| e.to_string())
            });
        match parsed {
            Ok(settings) => {
                let settings = Arc::new(settings);
                state.settings.store(Arc::clone(&settings));
                if let Some(watches) = &watches {
                    watches.apply(&settings).await;
                }
                state.metrics.set_reload("config", true);
                tracing::info!(path = %path.display(), "config reloaded");
            }
            Err(error) => {
                state.metrics.set_reload("config", false);
                tracing::error!(%error, "new config refused; the previous settings stay");
            }
        }
        last = Some(current);
    }
}
