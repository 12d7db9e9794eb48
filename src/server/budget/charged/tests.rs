use std::time::Duration;

use axum::extract::FromRequest as _;
use axum::http::header;
use http_body_util::{BodyExt as _, StreamBody};

use super::*;
use crate::server::body::ReviewPost;
use crate::server::budget::{Budget, Limits};

use crate::server::budget::tests::ip;

/// The shared limits, with room for every peer's connection and time
/// for a body that is not meant to stall.
const LIMITS: Limits = Limits {
    connections_per_peer: 4,
    request_deadline: Duration::from_secs(10),
    idle_timeout: Duration::from_secs(10),
    ..crate::server::budget::tests::LIMITS
};

/// One frame of a body that cannot fail.
type Framed = Result<Frame<Bytes>, std::convert::Infallible>;

/// A body of data frames of these sizes, all ready.
fn frames(sizes: &[usize]) -> StreamBody<futures::stream::Iter<std::vec::IntoIter<Framed>>> {
    let frames: Vec<Framed> =
        sizes.iter().map(|size| Ok(Frame::data(Bytes::from(vec![b' '; *size])))).collect();
    StreamBody::new(futures::stream::iter(frames))
}

#[tokio::test]
async fn a_chunked_body_is_charged_as_it_arrives_and_refused_past_the_share() {
    let budget = Budget::new(LIMITS, crate::metrics::BudgetRefusals::default());
    let _connection = budget.connect(ip(1)).expect("connection");
    let charge = Arc::new(budget.body(ip(1), 0).expect("nothing announced"));
    let phase = Arc::new(RequestPhase::default());
    let mut body = Charged::new(frames(&[25, 25, 25]), Arc::clone(&charge), phase);
    for _ in 0..2 {
        let frame = body.frame().await.expect("a frame").expect("within the share");
        assert_eq!(frame.data_ref().map(Bytes::len), Some(25));
    }
    assert_eq!(budget.in_use().1, 50);
    let error = body.frame().await.expect("a frame").expect_err("75 is over 60");
    assert_eq!(error.downcast_ref::<BodyCut>(), Some(&BodyCut::Refused(Refusal::OverShare)));
    drop((body, charge));
    assert_eq!(budget.in_use().1, 0);
}

#[tokio::test]
async fn a_stalled_body_is_woken_and_cut_when_shed() {
    let budget = Budget::new(LIMITS, crate::metrics::BudgetRefusals::default());
    let _attacker = budget.connect(ip(1)).expect("connection");
    let charge = Arc::new(budget.body(ip(1), 60).expect("its share"));
    let stalled = StreamBody::new(futures::stream::pending::<
        Result<Frame<Bytes>, std::convert::Infallible>,
    >());
    let mut body = Charged::new(stalled, Arc::clone(&charge), Arc::new(RequestPhase::default()));
    let waiting = tokio::spawn(async move { body.frame().await.map(|frame| frame.map(|_| ())) });
    tokio::task::yield_now().await;
    let _other = budget.connect(ip(3)).expect("connection");
    let _held = budget.body(ip(3), 39).expect("the rest but one");
    let _api_server = budget.connect(ip(2)).expect("connection");
    let _review = budget.body(ip(2), 20).expect("room made for it");
    let cut = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the stalled body is woken")
        .expect("the task completes")
        .expect("a frame")
        .expect_err("cut");
    assert_eq!(cut.downcast_ref::<BodyCut>(), Some(&BodyCut::Shed));
    drop(charge);
    assert_eq!(budget.in_use().1, 59);
}

#[tokio::test]
async fn a_whole_body_stops_the_clock_and_can_no_longer_be_shed() {
    let budget = Budget::new(LIMITS, crate::metrics::BudgetRefusals::default());
    let _connection = budget.connect(ip(1)).expect("connection");
    let charge = Arc::new(budget.body(ip(1), 60).expect("its share"));
    let phase = Arc::new(RequestPhase::default());
    let body = Charged::new(frames(&[30, 30]), Arc::clone(&charge), Arc::clone(&phase));
    let read = body.collect().await.expect("the body").to_bytes();
    assert_eq!(read.len(), 60);
    let _other = budget.connect(ip(2)).expect("connection");
    assert_eq!(budget.body(ip(2), 50).err(), Some(Refusal::Full));
    assert!(!charge.claim.signal.is_shed());
}

#[tokio::test]
async fn a_body_over_the_share_is_answered_429_with_retry_after() {
    let budget = Budget::new(LIMITS, crate::metrics::BudgetRefusals::default());
    let _connection = budget.connect(ip(1)).expect("connection");
    let charge = Arc::new(budget.body(ip(1), 0).expect("nothing announced"));
    let body = Charged::new(frames(&[40, 40]), charge, Arc::new(RequestPhase::default()));
    let request = axum::http::Request::post("/mutate")
        .header(header::CONTENT_TYPE, "application/json")
        .body(axum::body::Body::new(body))
        .expect("a request");
    let Err(response) = ReviewPost::from_request(request, &()).await else {
        panic!("the body is over the share");
    };
    assert_eq!(response.status(), axum::http::StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers().get(header::RETRY_AFTER).map(|v| v.as_bytes()), Some(&b"1"[..]));
}
