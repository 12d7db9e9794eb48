//! An admission POST as the handler reads it ([`ReviewPost`]): the body,
//! read once into a buffer of its announced size, its content type and the
//! API server's `?timeout=`.
//!
//! axum's `Bytes` gathers the frames hyper reads and then copies them into
//! one buffer: a large review (the API server sends up to 3 MiB, an
//! UPDATE two objects in it) is held twice while it is read. Here the
//! buffer is made once, of the `Content-Length` (never above the body
//! limit, which still applies), and each frame is copied into it as it
//! arrives. The content type and the timeout are read from the request
//! where they are: axum's `HeaderMap` and `RawQuery` extractors would copy
//! the whole header map and the query out of it on every request.

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

/// What the handler reads of an admission request.
pub struct ReviewPost {
    /// The `Content-Type` header, if there is one.
    pub content_type: Option<HeaderValue>,
    /// The API server's `?timeout=`: how long it waits for the answer.
    pub timeout: Option<Duration>,
    /// The whole body.
    pub body: Vec<u8>,
}

impl<S: Send + Sync> FromRequest<S> for ReviewPost {
    type Rejection = Response;

    async fn from_request(mut request: Request, _: &S) -> Result<Self, Response> {
        let content_type = request.headers_mut().remove(header::CONTENT_TYPE);
        let timeout = request.uri().query().and_then(timeout);
        let announced = announced_length(request.headers());
        // The router's body limit applies here as it does to `Bytes`: a
        // body over it is read up to the limit and then refused (refused
        // at once, a client still writing it would see the connection
        // closed rather than the 413). What is read is charged to the
        // caller's budget like any body.
        let mut body = request.into_limited_body();
        let mut buffer = Vec::with_capacity(announced);
        while let Some(frame) =
            std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
        {
            let frame = frame.map_err(|error| rejected(&error).into_response())?;
            if let Ok(data) = frame.into_data() {
                if buffer.len() + data.len() > MAX_BODY_BYTES {
                    return Err(RequestError::TooLarge {
                        limit: MAX_BODY_BYTES,
                    }
                    .into_response());
                }
                buffer.extend_from_slice(&data);
            }
        }
        Ok(ReviewPost {
            content_type,
            timeout,
            body: buffer,
        })
    }
}

/// The body length a request's `Content-Length` announces, at most
/// [`MAX_BODY_BYTES`] (a longer body is refused when it passes that); 0
/// when there is none or it is not a number.
pub fn announced_length(headers: &axum::http::HeaderMap) -> usize {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|length| length.to_str().ok())
        .and_then(|length| length.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_BODY_BYTES)
}

/// The `timeout` parameter of a query, a Go duration (`10s`, `500ms`,
/// `1m30s`), as the API server writes it.
fn timeout(query: &str) -> Option<Duration> {
    query.split('&').find_map(|pair| {
        pair.strip_prefix("timeout=")
            .and_then(crate::duration::parse)
    })
}

/// A body that could not be read: over the limit, over the caller's share
/// of the budget, or cut short.
fn rejected(error: &axum::Error) -> RequestError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if cause.is::<http_body_util::LengthLimitError>() {
            return RequestError::TooLarge {
                limit: MAX_BODY_BYTES,
            };
        }
        if let Some(cut) = cause.downcast_ref::<BodyCut>() {
            return (*cut).into();
        }
        source = cause.source();
    }
    RequestError::Body(crate::manifest::one_line(&error.to_string()))
}
