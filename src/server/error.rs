use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::budget::Refusal;
use super::budget::charged::BodyCut;
use crate::admission::ReviewError;

/// A request the webhook cannot answer with an AdmissionReview: the API
/// server applies the failurePolicy; a person with curl reads the reason.
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
    #[error("this caller is over its share of the server; retry later")]
    OverShare,
    #[error("the server is busy; retry later")]
    Busy,
}

/// Long enough for the bodies in flight to be decided or cut, short enough
/// that the API server, which retries on `Retry-After`, does so within its
/// webhook timeout.
pub const RETRY_AFTER_SECONDS: u64 = 1;

impl From<Refusal> for RequestError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::OverShare => RequestError::OverShare,
            Refusal::Full => RequestError::Busy,
        }
    }
}

impl From<BodyCut> for RequestError {
    fn from(cut: BodyCut) -> Self {
        match cut {
            BodyCut::Refused(refusal) => refusal.into(),
            BodyCut::Shed => RequestError::OverShare,
        }
    }
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
            RequestError::OverShare => StatusCode::TOO_MANY_REQUESTS,
            RequestError::Busy => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl IntoResponse for RequestError {
    fn into_response(self) -> Response {
        let reason = crate::manifest::one_line(&self.to_string());
        let mut response = (
            self.status(),
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("gpu-policy: {reason}\n"),
        )
            .into_response();
        if matches!(self, RequestError::OverShare | RequestError::Busy) {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        response
    }
}
