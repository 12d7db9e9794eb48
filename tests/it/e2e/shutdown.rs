//! SIGTERM: requests in flight are finished, the next request of an idle
//! connection is answered, and the process exits 0.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::time::{Instant, sleep, timeout};

use crate::support::fixtures::fixture;
use crate::support::server::{
    Exchange, MUTATE, Options, Server, body_of, exchange_once, next_uid, review,
};

#[derive(Default)]
struct Tally {
    /// Complete 200 answers.
    ok: AtomicUsize,
    /// Complete 200 answers to requests started after SIGTERM.
    ok_after_term: AtomicUsize,
    /// Connections refused or requests not fully written after SIGTERM
    /// (acceptable: the server had stopped taking them).
    not_taken_after_term: AtomicUsize,
    /// Fully written requests without a complete 200 answer, and any
    /// failure before SIGTERM.
    failures: Mutex<Vec<String>>,
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_finishes_requests_in_flight_and_exits_0() {
    const CLIENTS: usize = 16;
    let mut server = Server::start(Options::default(), None).await;
    let tally = Arc::new(Tally::default());
    let term_sent = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let addr = server.admission;
        let config = server.client_config();
        let tally = Arc::clone(&tally);
        let term_sent = Arc::clone(&term_sent);
        let stop = Arc::clone(&stop);
        let pod = fixture("11");
        clients.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let after_term = term_sent.load(Ordering::SeqCst);
                let uid = next_uid();
                let body = body_of(&review(&pod, &uid, false));
                // One request per connection, as a fresh client would.
                let exchange = exchange_once(addr, Arc::clone(&config), &body).await;
                let fail = |message: String| {
                    tally.failures.lock().expect("lock").push(format!("{uid}: {message}"));
                };
                match exchange {
                    Exchange::NotAccepted(_) | Exchange::NotSent(_)
                        if term_sent.load(Ordering::SeqCst) =>
                    {
                        tally.not_taken_after_term.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    Exchange::NotAccepted(err) | Exchange::NotSent(err) => {
                        fail(format!("before SIGTERM: {err}"));
                        break;
                    }
                    Exchange::Sent(Ok((200, answer))) => {
                        let review: Value = serde_json::from_slice(&answer).unwrap_or_default();
                        if review["response"]["uid"] == uid.as_str()
                            && review["response"]["allowed"] == true
                        {
                            tally.ok.fetch_add(1, Ordering::Relaxed);
                            if after_term {
                                tally.ok_after_term.fetch_add(1, Ordering::Relaxed);
                            }
                        } else {
                            fail(format!("unexpected answer: {review}"));
                        }
                    }
                    Exchange::Sent(Ok((status, answer))) => {
                        fail(format!("status {status}: {}", String::from_utf8_lossy(&answer)))
                    }
                    Exchange::Sent(Err(err)) => fail(format!("fully written, then {err}")),
                }
            }
        }));
    }

    // Load is on: the clients have had answers.
    let deadline = Instant::now() + Duration::from_secs(20);
    while tally.ok.load(Ordering::Relaxed) < 4 * CLIENTS {
        assert!(
            Instant::now() < deadline,
            "the clients got no answers; failures: {:?}",
            tally.failures.lock().expect("lock")
        );
        sleep(Duration::from_millis(20)).await;
    }
    term_sent.store(true, Ordering::SeqCst);
    server.terminate();
    let status = server.wait_exit(Duration::from_secs(20)).await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        timeout(Duration::from_secs(20), client)
            .await
            .expect("clients finish")
            .expect("client task");
    }

    let log = server.log();
    assert_eq!(status.code(), Some(0), "exit status {status}; log:\n{log}");
    assert!(log.contains("shutting down: no new connections"), "log:\n{log}");
    assert!(log.contains("gpu-policy stopped"), "log:\n{log}");
    assert!(
        !log.contains("connections still open after the drain timeout"),
        "the drain completed: {log}"
    );
    let failures = tally.failures.lock().expect("lock");
    assert!(
        failures.is_empty(),
        "{} fully written request(s) got no complete 200 answer \
         ({} ok, {} of them started after SIGTERM, {} not taken after SIGTERM):\n{}\n\
         server log from SIGTERM on:\n{}",
        failures.len(),
        tally.ok.load(Ordering::Relaxed),
        tally.ok_after_term.load(Ordering::Relaxed),
        tally.not_taken_after_term.load(Ordering::Relaxed),
        failures.join("\n"),
        log.find("shutting down").map_or("", |at| &log[at..]),
    );
}

/// A kept-alive connection that is idle when SIGTERM comes still gets an
/// answer to the next request (the API server writes on an idle connection
/// whenever it likes and does not resend a POST it wrote); the connection
/// closes after that answer.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_answers_the_next_request_of_an_idle_connection() {
    let mut server = Server::start(Options::default(), None).await;
    let mut connection = server.connect().await;
    let pod = fixture("11");
    let first = connection.admit(MUTATE, &pod).await;
    assert_eq!(first["allowed"], true, "{first}");
    server.terminate();
    // Long enough for the server to have begun shutting down (its log says
    // so), well inside its grace period for idle connections.
    server.wait_for_log("shutting down", Duration::from_secs(5)).await;
    sleep(Duration::from_millis(200)).await;
    let second = connection.admit(MUTATE, &pod).await;
    assert_eq!(second["allowed"], true, "{second}");
    let after = connection.post(MUTATE, body_of(&review(&pod, &next_uid(), false))).await;
    assert!(after.is_err(), "the connection stayed open after shutdown");
    let status = server.wait_exit(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "exit status {status}");
}
