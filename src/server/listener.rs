//! Serving a router over TLS within the port's [`Budget`] and deadlines,
//! with graceful shutdown: stop accepting, let requests in flight finish
//! (bounded), then return.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::response::IntoResponse;
use hyper::body::{Body as _, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::budget::charged::Charged;
use super::budget::deadline::{Deadlined, RequestPhase};
use super::budget::{Budget, ConnectionPermit};
use super::error::RequestError;

/// A slow or silent client cannot hold a task longer than this.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// At shutdown, how long an idle connection is given to deliver one more
/// request (answered with `Connection: close`): hyper would close it at
/// once, dropping a request already on the wire, and the API server does
/// not resend a POST it wrote.
const IDLE_GRACE: Duration = Duration::from_secs(2);

/// hyper's read buffer of one connection, which holds a request's headers
/// whole (the API server's are under 1 KiB; a TLS record is at most 16
/// KiB). hyper's default (~400 KB) would let each connection hold that.
const READ_BUFFER_BYTES: usize = 32 * 1024;

/// Then waits at most `drain()` for open connections.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    budget: Arc<Budget>,
    shutdown: impl Future<Output = ()>,
    drain: impl Fn() -> Duration,
) {
    let acceptor = TlsAcceptor::from(tls);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut http = hyper::server::conn::http1::Builder::new();
    // hyper's header timeout starts when it waits for a request: it is the
    // idle timeout; the request's deadline runs from its first byte.
    http.timer(TokioTimer::new())
        .keep_alive(true)
        .max_buf_size(READ_BUFFER_BYTES)
        .header_read_timeout(budget.limits().idle_timeout);
    let http = Arc::new(http);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (tcp, peer) = match accepted {
                    Ok(connection) => connection,
                    Err(error) => {
                        // Out of file descriptors: back off, do not spin.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let permit = match budget.connect(peer.ip()) {
                    Ok(permit) => permit,
                    Err(refusal) => {
                        // Closed before the handshake costs anything.
                        tracing::debug!(%peer, ?refusal, "connection refused by the budget");
                        continue;
                    }
                };
                // Nagle's algorithm would hold an answer's tail back for
                // the client's delayed ACK.
                if let Err(error) = tcp.set_nodelay(true) {
                    tracing::debug!(%peer, %error, "cannot set TCP_NODELAY");
                }
                let connection = Connection {
                    acceptor: acceptor.clone(),
                    app: app.clone(),
                    http: Arc::clone(&http),
                    budget: Arc::clone(&budget),
                    stop: stop_rx.clone(),
                };
                connections.spawn(connection.serve(tcp, peer, permit));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drain = drain();
    tracing::info!(connections = connections.len(), ?drain, "draining connections");
    let drained =
        tokio::time::timeout(drain, async { while connections.join_next().await.is_some() {} })
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
    budget: Arc<Budget>,
    stop: watch::Receiver<bool>,
}

impl Connection {
    async fn serve(
        self,
        tcp: tokio::net::TcpStream,
        peer: std::net::SocketAddr,
        permit: ConnectionPermit,
    ) {
        tokio::select! {
            () = self.serve_within(tcp, peer) => {}
            () = permit.shed() => {
                tracing::debug!(%peer, "connection closed for a peer under its fair share");
            }
        }
    }

    async fn serve_within(mut self, tcp: tokio::net::TcpStream, peer: std::net::SocketAddr) {
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
        let budget = self.budget;
        let phase = Arc::new(RequestPhase::default());
        let io = Deadlined::new(tls, Arc::clone(&phase), budget.limits().request_deadline);
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(Peer(peer));
            seen.in_flight.fetch_add(1, Ordering::AcqRel);
            seen.request_started.notify_waiters();
            let app = app.clone();
            let seen = Arc::clone(&seen);
            let phase = Arc::clone(&phase);
            let charged = charge_body(&budget, peer, request, &phase);
            async move {
                let response = match charged {
                    Ok((request, _charge)) => match app.oneshot(request).await {
                        Ok(response) => response,
                        Err(never) => match never {},
                    },
                    Err(refused) => refused.into_response(),
                };
                phase.answered();
                seen.in_flight.fetch_sub(1, Ordering::AcqRel);
                Ok::<_, Infallible>(response)
            }
        });
        let connection = self.http.serve_connection(TokioIo::new(io), service);
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
        // Registered before the check, so no request starting between is
        // missed.
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

/// `Content-Length` reserved before a byte is read; held until answered.
fn charge_body(
    budget: &Arc<Budget>,
    peer: std::net::SocketAddr,
    request: hyper::Request<Incoming>,
    phase: &Arc<RequestPhase>,
) -> Result<(axum::extract::Request, Arc<super::budget::BodyCharge>), RequestError> {
    if request.body().is_end_stream() {
        phase.arrived();
    }
    let announced =
        u64::try_from(super::body::announced_length(request.headers())).unwrap_or(u64::MAX);
    let charge = Arc::new(budget.body(peer.ip(), announced).inspect_err(|refusal| {
        tracing::debug!(%peer, ?refusal, announced, "request body refused by the budget");
    })?);
    let request = request.map(|body| {
        axum::body::Body::new(Charged::new(body, Arc::clone(&charge), Arc::clone(phase)))
    });
    Ok((request, charge))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub std::net::SocketAddr);

/// Requests of one connection in flight, and a signal when one starts.
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
