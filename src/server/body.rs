//! An admission POST as the handler reads it ([`ReviewPost`]).
//!
//! axum's `Bytes` gathers the frames and then copies them into one buffer,
//! holding a large review (up to 3 MiB) twice. Here the buffer is made
//! once, of the `Content-Length` (never above the limit), and each frame
//! is copied into it. The content type and the timeout are read in place:
//! axum's `HeaderMap` and `RawQuery` extractors copy them out.

use std::time::Duration;

use axum::RequestExt;
use axum::body::HttpBody;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::budget::charged::BodyCut;
use super::error::RequestError;

/// Bodies above this are refused with 413. The API server caps objects at
/// 3 MiB (etcd's limit), and a review carries the object and the old one.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

pub struct ReviewPost {
    pub content_type: Option<HeaderValue>,
    /// The API server's `?timeout=`: how long it waits for the answer.
    pub timeout: Option<Duration>,
    pub body: Vec<u8>,
}

impl<S: Send + Sync> FromRequest<S> for ReviewPost {
    type Rejection = Response;

    async fn from_request(mut request: Request, _: &S) -> Result<Self, Response> {
        let content_type = request.headers_mut().remove(header::CONTENT_TYPE);
        let timeout = request.uri().query().and_then(timeout);
        let announced = announced_length(request.headers());
        // A body over the limit is read up to it and then refused (refused
        // at once, a client still writing would see the connection closed
        // rather than the 413).
        let mut body = request.into_limited_body();
        let mut buffer = Vec::with_capacity(announced);
        while let Some(frame) =
            std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
        {
            let frame = frame.map_err(|error| rejected(&error).into_response())?;
            if let Ok(data) = frame.into_data() {
                if buffer.len() + data.len() > MAX_BODY_BYTES {
                    return Err(RequestError::TooLarge { limit: MAX_BODY_BYTES }.into_response());
                }
                buffer.extend_from_slice(&data);
            }
        }
        Ok(ReviewPost { content_type, timeout, body: buffer })
    }
}

/// The `Content-Length`, at most [`MAX_BODY_BYTES`]; 0 when there is none
/// or it is not a number.
pub fn announced_length(headers: &axum::http::HeaderMap) -> usize {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|length| length.to_str().ok())
        .and_then(|length| length.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_BODY_BYTES)
}

/// A Go duration as the API server writes it.
fn timeout(query: &str) -> Option<Duration> {
    query.split('&').find_map(|pair| pair.strip_prefix("timeout=").and_then(crate::duration::parse))
}

fn rejected(error: &axum::Error) -> RequestError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if cause.is::<http_body_util::LengthLimitError>() {
            return RequestError::TooLarge { limit: MAX_BODY_BYTES };
        }
        if let Some(cut) = cause.downcast_ref::<BodyCut>() {
            return (*cut).into();
        }
        source = cause.source();
    }
    RequestError::Body(crate::manifest::one_line(&error.to_string()))
}
