//! Request errors and the one place they become status codes.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::admission::ReviewError;

/// A request the webhook cannot answer with an AdmissionReview. The API
/// server treats these as webhook failures (and applies the failurePolicy);
/// a person debugging with curl reads the one-line reason.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("content type {0:?} is not application/json")]
    ContentType(String),
    #[error("empty body: expected an AdmissionReview")]
    EmptyBody,
    #[error("body is larger than {} MiB", .limit / (1024 * 1024))]
    TooLarge { limit: usize },
    #[error("cannot read the body: {0}")]
    Body(String),
    #[error(transparent)]
    Review(#[from] ReviewError),
    #[error("cannot encode the response: {0}")]
    Encode(serde_json::Error),
}

impl RequestError {
    pub fn status(&self) -> StatusCode {
        match self {
            RequestError::ContentType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            RequestError::EmptyBody | RequestError::Body(_) | RequestError::Review(_) => {
                StatusCode::BAD_REQUEST
            }
            RequestError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            RequestError::Encode(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for RequestError {
    fn into_response(self) -> Response {
        let reason = crate::manifest::one_line(&self.to_string());
        (
            self.status(),
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("gpu-policy: {reason}\n"),
        )
            .into_response()
    }
}
