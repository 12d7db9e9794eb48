//! The ceiling of gpu-policy's serving stack: the same TLS listener, rustls
//! configuration, certificate resolver, hyper and axum as `gpu-policy
//! serve`, answering every POST with `allowed: true` for the request's uid
//! and doing nothing else. `scripts/bench.sh` measures gpu-policy against it.
//!
//! ```sh
//! cargo run --release --example echo_server -- --listen 127.0.0.1:8444 --certs-dir certs
//! ```
//!
//! It serves the certificate in `--certs-dir` (made there by `gpu-policy
//! serve` or by this program, as `gpu-policy serve` makes it), so one CA
//! verifies both servers. It stops on SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use clap::Parser;
use serde::Deserialize;
use tokio::net::TcpListener;

use gpu_policy::certs::{self, CertificateResolver};
use gpu_policy::server::budget::{Budget, Limits};
use gpu_policy::server::{MAX_BODY_BYTES, listener};

#[derive(Debug, Parser)]
#[command(about = "An admission webhook that allows everything: the ceiling of the stack")]
struct Args {
    #[arg(long, default_value = "127.0.0.1:8444")]
    listen: SocketAddr,
    /// Where the CA and serving certificate are (made when absent).
    #[arg(long, default_value = "certs")]
    certs_dir: PathBuf,
}

/// The one field of the review the answer needs.
#[derive(Deserialize)]
struct Review {
    request: Request,
}

#[derive(Deserialize)]
struct Request {
    uid: String,
}

async fn allow(body: Bytes) -> Response {
    let Ok(review) = serde_json::from_slice::<Review>(&body) else {
        return (StatusCode::BAD_REQUEST, "not an AdmissionReview\n").into_response();
    };
    let answer = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review.request.uid, "allowed": true},
    });
    ([(header::CONTENT_TYPE, "application/json")], answer.to_string()).into_response()
}

async fn run(args: Args) -> Result<(), String> {
    let generated = certs::ensure_self_signed(&args.certs_dir, &[]).map_err(|e| e.to_string())?;
    let resolver = Arc::new(
        CertificateResolver::load(&generated.cert, &generated.key).map_err(|e| e.to_string())?,
    );
    let tls = Arc::new(certs::server_config(resolver, None).map_err(|e| e.to_string())?);
    let app = Router::new()
        .fallback(post(allow))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES));
    let tcp = TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    eprintln!("echo_server listening on {}", args.listen);
    listener::serve_tls(
        tcp,
        tls,
        app,
        // The same budget as `gpu-policy serve`'s defaults, so the two
        // stacks are compared doing the same bookkeeping.
        Budget::new(Limits::DEFAULT, Default::default()),
        listener::shutdown_signal(),
        || Duration::from_secs(10),
    )
    .await;
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("echo_server: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("echo_server: {error}");
            ExitCode::FAILURE
        }
    }
}
