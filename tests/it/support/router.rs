//! The admission router in process (`gpu_policy::server::router`), without
//! TLS or a listener: a body goes in as the API server would post it, and
//! the status and the answer's bytes come out.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use gpu_policy::server::{AppState, MAX_BODY_BYTES, router};
use gpu_policy::settings::Settings;
use tokio::runtime::Runtime;
use tower::ServiceExt;

/// A router with `settings` and no cluster, and a runtime to drive it.
pub struct InProcess {
    router: Router,
    runtime: Runtime,
}

impl InProcess {
    pub fn new(settings: Settings) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|err| format!("a runtime: {err}"))?;
        Ok(Self { router: router(Arc::new(AppState::new(settings))), runtime })
    }

    /// POSTs `body` as JSON to `path`: the status and the answer's bytes.
    pub fn post(&self, path: &str, body: Vec<u8>) -> Result<(StatusCode, Vec<u8>), String> {
        let request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .map_err(|err| format!("a request: {err}"))?;
        self.runtime.block_on(async {
            let response = match self.router.clone().oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            let status = response.status();
            // The answer is smaller than what the server accepts.
            let bytes = axum::body::to_bytes(response.into_body(), MAX_BODY_BYTES)
                .await
                .map_err(|err| format!("the answer's body: {err}"))?;
            Ok((status, bytes.to_vec()))
        })
    }
}
