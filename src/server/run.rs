//! The whole server put together from its [`Options`]: settings, cluster
//! caches, certificates and their reloads, the listeners, and shutdown.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rustls::server::danger::ClientCertVerifier;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::{AppState, budget, listener, operations_router, router};
use crate::certs::client_auth::ClientAuth;
use crate::certs::secret::{RouteConfig, SecretError, SecretRef, SecretRoute};
use crate::certs::{self, CertError, CertificateResolver, Reload};
pub use crate::cluster::Connection as ClusterAccess;
use crate::cluster::{self, ClusterCache, Watches};
use crate::poll::{Polled, poll_bytes};
use crate::settings::{ConfigError, Settings};

#[derive(Debug, Clone)]
pub struct Options {
    pub listen: SocketAddr,
    pub metrics_listen: SocketAddr,
    /// Reloaded when its bytes change; the defaults without one.
    pub config: Option<PathBuf>,
    pub certificates: Certificates,
    pub cluster: ClusterAccess,
    pub client_auth: Option<ClientAuthOptions>,
    /// How often the certificate files, the config file and the
    /// certificate Secret are compared with what is loaded.
    pub reload_interval: Duration,
    pub budget: budget::Limits,
}

#[derive(Debug, Clone)]
pub enum Certificates {
    /// `--tls-cert`, `--tls-key`.
    Files { cert: PathBuf, key: PathBuf },
    /// Generated into `dir` and reused while valid, covering the default
    /// names and `dns_names`.
    SelfSigned { dir: PathBuf, dns_names: Vec<String> },
    /// Shared by every replica through a Secret (`--cert-secret`).
    Secret(RouteConfig),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAuthOptions {
    /// PEM, reloaded when the file changes.
    pub ca: PathBuf,
    /// Names the certificate's subject CN or a DNS name must equal; empty:
    /// any name.
    pub names: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Cluster(cluster::ConnectError),
    #[error(
        "--cert-secret {secret} needs the API server, which is not configured or does not answer"
    )]
    SecretWithoutCluster { secret: SecretRef },
    #[error(transparent)]
    Certificate(#[from] CertError),
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
}

/// Fails only while starting.
pub async fn run(options: Options) -> Result<(), ServeError> {
    // kube's client and rustls need one process-level provider. It fails
    // only if one is installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let settings = match &options.config {
        Some(path) => Settings::load(path)?,
        None => Settings::default(),
    };
    let state = Arc::new(AppState::new(settings));
    state.readiness.config_loaded.store(true, Ordering::Release);
    state.metrics.set_reload("config", true);

    let (client, watches) = connect_cluster(&options.cluster, &state).await?;
    let every = options.reload_interval.max(Duration::from_secs(1));
    let mut secret_route = None;
    let (cert, key) = match &options.certificates {
        Certificates::Files { cert, key } => (cert.clone(), key.clone()),
        Certificates::SelfSigned { dir, dns_names } => {
            let generated = certs::ensure_self_signed(dir, dns_names)?;
            tracing::info!(
                ca = %generated.ca.display(),
                reused = generated.reused,
                "serving a self-signed certificate; clients verify it with this CA"
            );
            (generated.cert, generated.key)
        }
        Certificates::Secret(config) => {
            let Some(client) = client else {
                return Err(ServeError::SecretWithoutCluster { secret: config.secret.clone() });
            };
            let route = secret_route_start(client, config.clone()).await?;
            let paths = (route.cert_path(), route.key_path());
            secret_route = Some(route);
            paths
        }
    };
    let client_auth = match &options.client_auth {
        Some(client_auth) => Some(require_client_certificates(&state, client_auth, every)?),
        None => None,
    };
    let tls = serve_certificate(&state, &cert, &key, client_auth, every)?;
    if let Some(path) = options.config.clone() {
        let (reloaded, settings) = watch::channel(state.settings.load_full());
        tokio::spawn(watch_config(path, every, Arc::clone(&state), reloaded));
        if let Some(watches) = watches {
            tokio::spawn(follow_settings(watches, settings));
        }
    }
    tokio::spawn(poll_registry_credentials(Arc::clone(&state), every));
    if let Some(route) = secret_route {
        tokio::spawn(route.run(every));
    }

    let admission = bind(options.listen).await?;
    let operations = bind(options.metrics_listen).await?;
    state.readiness.listener_bound.store(true, Ordering::Release);
    tracing::info!(
        listen = %admission.local_addr().map_or(options.listen, |a| a),
        metrics_listen = %operations.local_addr().map_or(options.metrics_listen, |a| a),
        "gpu-policy serving"
    );
    tracing::info!(limits = ?options.budget, "admission port budget");
    serve_until_signal(state, admission, operations, tls, options.budget).await;
    tracing::info!("gpu-policy stopped");
    Ok(())
}

async fn connect_cluster(
    access: &ClusterAccess,
    state: &AppState,
) -> Result<(Option<kube::Client>, Option<Watches>), ServeError> {
    let client = cluster::connect(access).await.map_err(ServeError::Cluster)?;
    let mut watches = None;
    match client.clone() {
        Some(client) => {
            let cache = Arc::new(ClusterCache::default());
            watches =
                Some(Watches::start(client.clone(), &state.settings.load(), Arc::clone(&cache)));
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
    Ok((client, watches))
}

/// Keeps the allowlist watches and the node projection on the settings in
/// force; of reloads that come while one is applied, the latest is next.
async fn follow_settings(watches: Watches, mut settings: watch::Receiver<Arc<Settings>>) {
    while settings.changed().await.is_ok() {
        let current = Arc::clone(&settings.borrow_and_update());
        watches.apply(&current).await;
    }
}

/// The first pass of the --cert-secret route, before the resolver loads its
/// files. When it fails, files of an earlier run (an emptyDir survives
/// container restarts) are served while it retries; without them the
/// server does not start.
async fn secret_route_start(
    client: kube::Client,
    config: RouteConfig,
) -> Result<SecretRoute, SecretError> {
    let route = SecretRoute::new(client, config);
    let secret = &route.config().secret;
    match route.ensure_once().await {
        Ok(outcome) => {
            outcome.log(secret);
            tracing::info!(
                %secret,
                dir = %route.config().certs_dir.display(),
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
        Err(error) => return Err(error),
    }
    Ok(route)
}

fn serve_certificate(
    state: &Arc<AppState>,
    cert: &Path,
    key: &Path,
    client_auth: Option<Arc<dyn ClientCertVerifier>>,
    every: Duration,
) -> Result<Arc<rustls::ServerConfig>, CertError> {
    let resolver = Arc::new(CertificateResolver::load(cert, key)?);
    state.readiness.certificate_loaded.store(true, Ordering::Release);
    state.metrics.certificate_expiry.set(resolver.not_after() as f64);
    state.metrics.set_reload("certificate", true);

    let poller_state = Arc::clone(state);
    let poller_resolver = Arc::clone(&resolver);
    Arc::clone(&resolver).spawn_poller(every, move |reload| match reload {
        Reload::Reloaded => {
            tracing::info!("serving certificate reloaded");
            poller_state.metrics.set_reload("certificate", true);
            poller_state.metrics.certificate_expiry.set(poller_resolver.not_after() as f64);
        }
        Reload::Failed(error) => {
            tracing::error!(%error, "new certificate refused; the previous one keeps serving");
            poller_state.metrics.set_reload("certificate", false);
        }
        Reload::Unchanged => {}
    });
    Ok(Arc::new(certs::server_config(resolver, client_auth)?))
}

/// The server does not start without them; a file that does not load later
/// is refused and the CAs in force stay.
fn require_client_certificates(
    state: &Arc<AppState>,
    options: &ClientAuthOptions,
    every: Duration,
) -> Result<Arc<dyn ClientCertVerifier>, CertError> {
    let auth = Arc::new(ClientAuth::load(&options.ca, &options.names)?);
    state.metrics.set_reload("client_ca", true);
    state.client_certificates_required.store(true, std::sync::atomic::Ordering::Release);
    tracing::info!(
        ca = %options.ca.display(),
        cas = auth.ca_count(),
        names = %options.names.join(", "),
        "requiring client certificates"
    );
    let poller_state = Arc::clone(state);
    let poller_auth = Arc::clone(&auth);
    Arc::clone(&auth).spawn_poller(every, move |reload| match reload {
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
    Ok(auth)
}

/// Accepted settings are sent on `reloaded` for the cluster watches.
async fn watch_config(
    path: PathBuf,
    every: Duration,
    state: Arc<AppState>,
    reloaded: watch::Sender<Arc<Settings>>,
) {
    let loaded = std::fs::read(&path).ok();
    let read = || std::fs::read(&path);
    poll_bytes(every, loaded, read, |polled| match polled {
        Polled::Changed(bytes) => {
            if let Some(settings) = reload_config(&state, &path, bytes) {
                reloaded.send_replace(settings);
            }
        }
        Polled::Failed(error) => {
            tracing::error!(path = %path.display(), %error, "cannot read the config file; keeping the loaded settings");
            state.metrics.set_reload("config", false);
        }
    })
    .await;
}

fn reload_config(state: &AppState, path: &Path, bytes: &[u8]) -> Option<Arc<Settings>> {
    let shown = path.display().to_string();
    let parsed = match std::str::from_utf8(bytes) {
        Ok(text) => Settings::from_yaml(text, &shown),
        Err(error) => Err(ConfigError::Parse { path: shown, message: error.to_string() }),
    };
    match parsed {
        Ok(settings) => {
            let settings = Arc::new(settings);
            state.settings.store(Arc::clone(&settings));
            state.images.apply(&settings, &state.metrics);
            // The log line first: whoever watches the metric then finds it.
            tracing::info!(path = %path.display(), "config reloaded");
            state.metrics.set_reload("config", true);
            Some(settings)
        }
        Err(error) => {
            tracing::error!(%error, "new config refused; the previous settings stay");
            state.metrics.set_reload("config", false);
            None
        }
    }
}

async fn poll_registry_credentials(state: Arc<AppState>, every: Duration) {
    let mut ticker = crate::poll::ticker(every);
    loop {
        ticker.tick().await;
        state.images.poll_credentials(&state.metrics);
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr).await.map_err(|source| ServeError::Listen { addr, source })
}

async fn serve_until_signal(
    state: Arc<AppState>,
    admission: TcpListener,
    operations: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    limits: budget::Limits,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let operations_app = operations_router(Arc::clone(&state));
    let mut operations_stop = stop_rx.clone();
    let operations_task = tokio::spawn(async move {
        let stopped = async move {
            let _ = operations_stop.wait_for(|stop| *stop).await;
        };
        axum::serve(operations, operations_app).with_graceful_shutdown(stopped).await
    });
    let mut admission_stop = stop_rx;
    let admission = listener::serve_tls(
        admission,
        tls,
        router(Arc::clone(&state)),
        budget::Budget::new(limits, state.metrics.refused.clone()),
        async move {
            let _ = admission_stop.wait_for(|stop| *stop).await;
        },
        {
            let state = Arc::clone(&state);
            move || state.drain_timeout()
        },
    );
    let signals = async {
        listener::shutdown_signal().await;
        tracing::info!("shutting down: no new connections, finishing requests in flight");
        let _ = stop_tx.send(true);
    };
    tokio::join!(admission, signals);
    let _ = operations_task.await;
}

#[cfg(test)]
mod tests;
