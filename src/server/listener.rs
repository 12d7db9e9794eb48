//! Serving a router over TLS, with graceful shutdown: stop accepting, let
//! in-flight requests finish (bounded), then return.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// A TLS handshake that takes longer than this is dropped, so a slow or
/// silent client cannot hold a task.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts TLS connections on `listener` and serves `app` over HTTP/1.1
/// (keep-alive, like the API server) until `shutdown` completes; then waits
/// at most `drain` for open connections to finish their requests.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    shutdown: impl Future<Output = ()>,
    drain: impl Fn() -> Duration,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(Duration::from_secs(30));
    let http = Arc::new(http);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (tcp, peer) = match accepted {
                    Ok(connection) => connection,
                    Err(error) => {
                        // Out of file descriptors and the like: back off
                        // instead of spinning.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let service = TowerToHyperService::new(app.clone());
                let watcher = graceful.watcher();
                let http = Arc::clone(&http);
                tokio::spawn(async move {
                    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(error)) => {
                            tracing::debug!(%peer, %error, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    };
                    let connection = http.serve_connection(TokioIo::new(tls), service);
                    if let Err(error) = watcher.watch(connection).await {
                        tracing::debug!(%peer, %error, "connection closed with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    let drain = drain();
    tracing::info!(
        connections = graceful.count(),
        ?drain,
        "draining connections"
    );
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(?drain, "connections still open after the drain timeout");
    }
}
