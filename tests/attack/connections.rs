//! Connection attacks: bodies that stall, a flood of connections, and a
//! peer that announces more body bytes than its share, each from a
//! loopback address of its own (127.0.0.2, 127.0.0.3) while a legitimate
//! caller reviews from 127.0.0.1, as the API server would from its own.
//!
//! The server runs with its default budget (`serve --help`,
//! docs/operations.md "The admission port's budget"); each test reads the
//! numbers it expects from [`Limits::DEFAULT`].

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use gpu_policy::server::budget::Limits;
use rustls::ClientConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep, timeout};
use tokio_rustls::client::TlsStream;

use crate::PEAK_RSS;
use crate::support::server::{
    MUTATE, Server, body_of, handshake_from, next_uid, pod_with_gpus, review,
};
use crate::support::tls::SERVER_NAME;

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const SECOND_ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));

/// The bound the issue sets on a legitimate review while an attack runs.
const ANSWERED_WITHIN: Duration = Duration::from_secs(1);
/// What a connection whose request stalls is given beyond the deadline to
/// be closed: the server's scheduling, and this process's, on a loaded
/// machine.
const CLOSE_MARGIN: Duration = Duration::from_secs(5);
/// The body every attacking request announces: near the 3 MiB limit.
const ANNOUNCED: usize = 3_000_000;

const MIB: f64 = (1 << 20) as f64;

/// A TLS connection from `source` on which a POST announcing
/// [`ANNOUNCED`] body bytes is written with the first `sent` of them; the
/// rest never comes. Err when the server closed it before that was
/// written.
async fn stalled_request(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
    source: IpAddr,
    sent: usize,
) -> Result<TlsStream<TcpStream>, String> {
    let mut tls = handshake_from(Some(source), addr, config).await?;
    let head = format!(
        "POST {MUTATE} HTTP/1.1\r\nHost: {SERVER_NAME}:443\r\n\
         Content-Type: application/json\r\nContent-Length: {ANNOUNCED}\r\n\r\n"
    );
    tls.write_all(head.as_bytes()).await.map_err(|e| format!("head: {e}"))?;
    tls.write_all(&vec![b' '; sent]).await.map_err(|e| format!("body: {e}"))?;
    tls.flush().await.map_err(|e| format!("flush: {e}"))?;
    Ok(tls)
}

/// What the server did with a connection, read by its client.
#[derive(Debug)]
enum Fate {
    /// It answered with this status and `Retry-After`, then closed.
    Answered { status: u16, retry_after: Option<String> },
    /// It closed without an answer (EOF or reset).
    Closed,
    /// Still open after the time the client waited.
    Open,
}

/// Reads `tls` until the server closes it, at most `limit`.
async fn fate(mut tls: TlsStream<TcpStream>, limit: Duration) -> Fate {
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    let read_all = async {
        loop {
            match tls.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            }
        }
    };
    if timeout(limit, read_all).await.is_err() {
        return Fate::Open;
    }
    let text = String::from_utf8_lossy(&received);
    let Some(status_line) = text.lines().next().filter(|l| l.starts_with("HTTP/1.1 ")) else {
        return Fate::Closed;
    };
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line: {status_line}"));
    let retry_after = text
        .lines()
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
        .map(|(_, value)| value.trim().to_owned());
    Fate::Answered { status, retry_after }
}

/// One review of a GPU pod from 127.0.0.1 on a fresh connection, as the
/// API server sends it; how long until its answer (200, allowed).
async fn legitimate_review(server: &Server, pod: &Value) -> Duration {
    let started = Instant::now();
    let mut connection = server.connect().await;
    let response = connection.admit(MUTATE, pod).await;
    let took = started.elapsed();
    assert_eq!(response["allowed"], true, "{response}");
    took
}

/// The sockets the server process has open: its two listeners and its
/// connections.
fn open_sockets(server: &Server) -> usize {
    let fds = std::fs::read_dir(format!("/proc/{}/fd", server.pid())).expect("/proc/<pid>/fd");
    fds.filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("socket:"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_stall_are_cut_at_the_deadline_and_cost_little() {
    let _alone = crate::alone();
    const STALLED: usize = 150;
    const SENT: usize = 2_900_000;
    let server = Server::start_release().await;
    let deadline = Limits::DEFAULT.request_deadline;
    let (addr, config) = (server.admission, server.client_config());
    // The attacker has a thread of its own, as it would a machine: its
    // writes do not hold up the legitimate caller's client.
    let attack = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the attacker's runtime");
        runtime.block_on(async move {
            let tasks: Vec<_> = (0..STALLED)
                .map(|_| {
                    let config = Arc::clone(&config);
                    tokio::spawn(async move {
                        let began = Instant::now();
                        let fate = match stalled_request(addr, config, ATTACKER, SENT).await {
                            Ok(tls) => fate(tls, deadline + CLOSE_MARGIN).await,
                            Err(_) => Fate::Closed,
                        };
                        (fate, began.elapsed())
                    })
                })
                .collect();
            let mut fates = Vec::with_capacity(STALLED);
            for task in tasks {
                fates.push(task.await.expect("the attacker's task completes"));
            }
            fates
        })
    });

    let pod = pod_with_gpus(1);
    let mut answered_in = Vec::new();
    while !attack.is_finished() {
        answered_in.push(legitimate_review(&server, &pod).await);
        sleep(Duration::from_millis(250)).await;
    }
    let reviews = answered_in.len();
    let slowest = answered_in.iter().max().copied().unwrap_or_default();
    let mut open = 0;
    let mut latest_close = Duration::ZERO;
    for (fate, took) in attack.join().expect("the attack's thread completes") {
        match fate {
            Fate::Open => open += 1,
            _ => latest_close = latest_close.max(took),
        }
    }
    let peak = server.memory("VmHWM");
    eprintln!(
        "{STALLED} stalled bodies of {SENT} bytes: peak RSS {:.1} MiB, {open} still open after \
         {:?}, the last closed after {latest_close:?}; {reviews} legitimate reviews meanwhile, \
         the slowest answered in {slowest:?}",
        peak as f64 / MIB,
        deadline + CLOSE_MARGIN,
    );
    assert_eq!(
        open,
        0,
        "stalled connections still open after the deadline and {CLOSE_MARGIN:?}; log:\n{}",
        server.log()
    );
    assert!(peak <= PEAK_RSS, "peak RSS {:.1} MiB", peak as f64 / MIB);
    assert!(reviews >= 5, "only {reviews} legitimate reviews were sent");
    assert!(
        slowest <= ANSWERED_WITHIN,
        "a legitimate review took {slowest:?}; all, in order: {answered_in:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_from_one_peer_is_held_to_its_share() {
    let _alone = crate::alone();
    const FLOOD: usize = 400;
    let server = Server::start_release().await;
    let before = open_sockets(&server);
    let config = server.client_config();
    let handshakes =
        (0..FLOOD).map(|_| handshake_from(Some(ATTACKER), server.admission, Arc::clone(&config)));
    let flood: Vec<_> =
        futures::future::join_all(handshakes).await.into_iter().filter_map(Result::ok).collect();
    let answered_in = legitimate_review(&server, &pod_with_gpus(1)).await;
    // The connections the server refused are closed at once; give its
    // accept loop a moment to have dropped the last of them.
    sleep(Duration::from_millis(500)).await;
    let sockets = open_sockets(&server);
    let peak = server.memory("VmHWM");
    let share = usize::try_from(Limits::DEFAULT.connections_per_peer).expect("small");
    eprintln!(
        "{FLOOD} connections from one peer: {} handshakes completed, the server holds {sockets} \
         sockets ({before} before the flood, share {share}), peak RSS {:.1} MiB; a legitimate review answered in \
         {answered_in:?}",
        flood.len(),
        peak as f64 / MIB,
    );
    // What it held before (its listeners, the readiness probes' last
    // connections), the legitimate caller's connection (kept alive until
    // dropped) and the peer's share.
    assert!(
        sockets <= before + 1 + share,
        "the server holds {sockets} sockets, {before} before, for a share of {share}"
    );
    assert!(peak <= PEAK_RSS, "peak RSS {:.1} MiB", peak as f64 / MIB);
    assert!(answered_in <= ANSWERED_WITHIN, "a legitimate review took {answered_in:?}");
    let refused = refused_count(&server, "connections", "over_share").await;
    assert_eq!(refused, FLOOD - flood.len(), "every connection closed at once is counted");
    drop(flood);
}

/// `gpu_policy_admission_refused_total` of `resource` and `reason`, 0 when
/// the series is not written yet.
async fn refused_count(server: &Server, resource: &str, reason: &str) -> usize {
    let series = format!(
        "gpu_policy_admission_refused_total{{resource=\"{resource}\",reason=\"{reason}\"}} "
    );
    let metrics = server.metrics().await;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .map_or(0, |value| value.trim().parse().expect("a count"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_over_its_byte_share_is_told_to_retry_and_others_are_served() {
    let _alone = crate::alone();
    const REQUESTS: usize = 16;
    let server = Server::start_release().await;
    let config = server.client_config();
    let fits = usize::try_from(Limits::DEFAULT.body_bytes_per_peer).expect("small") / ANNOUNCED;
    assert!(fits < REQUESTS, "the test must go over the share");
    let mut requests = Vec::new();
    for _ in 0..REQUESTS {
        let tls = stalled_request(server.admission, Arc::clone(&config), ATTACKER, 0)
            .await
            .expect("a head is written");
        requests.push(tls);
    }
    let answered_in = legitimate_review(&server, &pod_with_gpus(1)).await;
    // Well within the deadline: a request over the share is answered at
    // once, and the others are still waiting for their bodies.
    let fates = futures::future::join_all(
        requests.into_iter().map(|tls| fate(tls, Duration::from_secs(3))),
    )
    .await;
    let refused = fates
        .iter()
        .filter(|fate| {
            matches!(fate, Fate::Answered { status: 429, retry_after: Some(after) } if after == "1")
        })
        .count();
    let waiting = fates.iter().filter(|fate| matches!(fate, Fate::Open)).count();
    eprintln!(
        "{REQUESTS} requests of {ANNOUNCED} bytes from one peer: {waiting} waiting for their \
         body, {refused} answered 429 with Retry-After; a legitimate review answered in \
         {answered_in:?}"
    );
    assert_eq!((waiting, refused), (fits, REQUESTS - fits), "{fates:?}");
    assert_eq!(
        refused_count(&server, "body_bytes", "over_share").await,
        refused,
        "every 429 is counted"
    );
    assert!(answered_in <= ANSWERED_WITHIN, "a legitimate review took {answered_in:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pool_sheds_the_largest_holder_for_the_api_server() {
    let _alone = crate::alone();
    let server = Server::start_release().await;
    let config = server.client_config();
    let limits = Limits::DEFAULT;
    let pool = usize::try_from(limits.body_bytes).expect("small");
    let per_peer = usize::try_from(limits.body_bytes_per_peer).expect("small");
    // The first attacker takes its whole share, the second what is left
    // of the pool but a little, too little for the review below.
    let first = per_peer / ANNOUNCED;
    let second = (pool - first * ANNOUNCED) / ANNOUNCED;
    let left = pool - (first + second) * ANNOUNCED;
    let mut held = Vec::new();
    for (source, count) in [(ATTACKER, first), (SECOND_ATTACKER, second)] {
        for _ in 0..count {
            let tls = stalled_request(server.admission, Arc::clone(&config), source, 0)
                .await
                .expect("a head is written");
            held.push((source, tls));
        }
    }
    sleep(Duration::from_millis(500)).await;

    // A review larger than what is left: it fits only if a body is shed.
    let uid = next_uid();
    let mut pod = pod_with_gpus(1);
    pod["metadata"]["annotations"] = json!({"example.com/notes": "n".repeat(left + (256 << 10))});
    let body = body_of(&review(&pod, &uid, false));
    let review_bytes = body.len();
    assert!(review_bytes > left && review_bytes < ANNOUNCED);
    let started = Instant::now();
    let mut connection = server.connect().await;
    let reply = connection
        .post(MUTATE, body)
        .await
        .unwrap_or_else(|err| panic!("{err}; log:\n{}", server.log()));
    let answered_in = started.elapsed();
    assert_eq!(reply.admission(&uid)["allowed"], true);

    let fates = futures::future::join_all(
        held.into_iter()
            .map(|(source, tls)| async move { (source, fate(tls, Duration::from_secs(2)).await) }),
    )
    .await;
    let shed = |peer: IpAddr| {
        fates
            .iter()
            .filter(|(source, fate)| {
                *source == peer
                    && matches!(fate, Fate::Answered { status: 429, retry_after: Some(after) } if after == "1")
            })
            .count()
    };
    eprintln!(
        "a pool of {pool} bytes held by {first} + {second} stalled bodies: a review of {} bytes \
         answered in {answered_in:?}; shed: {} of the first peer, {} of the second",
        review_bytes,
        shed(ATTACKER),
        shed(SECOND_ATTACKER),
    );
    assert_eq!((shed(ATTACKER), shed(SECOND_ATTACKER)), (1, 0), "{fates:?}");
    assert!(answered_in <= ANSWERED_WITHIN, "the review took {answered_in:?}");
}
