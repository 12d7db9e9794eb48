//! Serving a router over TLS, with graceful shutdown: stop accepting, let
//! requests in flight finish (bounded), then return.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// A TLS handshake that takes longer than this is dropped, so a slow or
/// silent client cannot hold a task.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// At shutdown, how long an idle connection (no request in flight) is given
/// to deliver one more request, which is answered with `Connection: close`.
/// hyper closes an idle connection at once on graceful shutdown, which drops
/// a request already on the wire: the API server writes on a new connection
/// straight away, and on a kept-alive one whenever it likes, and does not
/// resend a POST that was written.
const IDLE_GRACE: Duration = Duration::from_secs(2);

/// Accepts TLS connections on `listener` and serves `app` over HTTP/1.1
/// (keep-alive, like the API server) until `shutdown` completes; then waits
/// at most `drain()` for open connections to finish their requests.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    shutdown: impl Future<Output = ()>,
    drain: impl Fn() -> Duration,
) {
    let acceptor = TlsAcceptor::from(tls);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(Duration::from_secs(30));
    let http = Arc::new(http);
    let mut connections = JoinSet::new();
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
                // Answers are small and must leave at once: Nagle's
                // algorithm would hold the tail of one back for the
                // client's delayed ACK.
                if let Err(error) = tcp.set_nodelay(true) {
                    tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
                }
                let connection = Connection {
                    acceptor: acceptor.clone(),
                    app: app.clone(),
                    http: Arc::clone(&http),
                    stop: stop_rx.clone(),
                };
                connections.spawn(connection.serve(tcp, peer));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drain = drain();
    tracing::info!(
        connections = connections.len(),
        ?drain,
        "draining connections"
    );
    let drained = tokio::time::timeout(drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            ?drain,
            open = connections.len(),
            "connections still open after the drain timeout"
        );
        connections.abort_all();
    }
}

/// Completes on SIGTERM (Kubernetes stopping the pod) or SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; stopping on Ctrl-C only");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

struct Connection {
    acceptor: TlsAcceptor,
    app: Router,
    http: Arc<hyper::server::conn::http1::Builder>,
    stop: watch::Receiver<bool>,
}

impl Connection {
    async fn serve(mut self, tcp: tokio::net::TcpStream, peer: std::net::SocketAddr) {
        let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(tcp)).await {
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
        let activity = Arc::new(Activity::default());
        let seen = Arc::clone(&activity);
        let app = self.app;
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(Peer(peer));
            seen.in_flight.fetch_add(1, Ordering::AcqRel);
            seen.request_started.notify_waiters();
            let app = app.clone();
            let seen = Arc::clone(&seen);
            async move {
                let response = match app.oneshot(request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                seen.in_flight.fetch_sub(1, Ordering::AcqRel);
                Ok::<_, Infallible>(response)
            }
        });
        let connection = self.http.serve_connection(TokioIo::new(tls), service);
        tokio::pin!(connection);
        tokio::select! {
            result = connection.as_mut() => {
                log_end(peer, result);
                return;
            }
            _ = self.stop.wait_for(|stop| *stop) => {}
        }
        let request_started = activity.request_started.notified();
        tokio::pin!(request_started);
        // Registered before the check, so a request starting in between
        // is not missed.
        request_started.as_mut().enable();
        if activity.is_idle() {
            tokio::select! {
                result = connection.as_mut() => {
                    log_end(peer, result);
                    return;
                }
                () = request_started => {}
                () = tokio::time::sleep(IDLE_GRACE) => {}
            }
        }
        connection.as_mut().graceful_shutdown();
        log_end(peer, connection.await);
    }
}

/// The address a request came from, in the request's extensions: the
/// budgets and rate limits that are shared per caller key on its IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub std::net::SocketAddr);

/// Requests of one connection: how many are in flight (the service was
/// called, the response is not ready yet), and a signal when one starts.
#[derive(Default)]
struct Activity {
    in_flight: AtomicUsize,
    request_started: Notify,
}

impl Activity {
    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }
}

fn log_end(peer: std::net::SocketAddr, result: Result<(), hyper::Error>) {
    if let Err(error) = result {
        tracing::debug!(%peer, %error, "connection closed with an error");
    }
}
