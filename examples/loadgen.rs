//! HTTPS load for an admission webhook, sent the way the API server sends
//! it: AdmissionReview POSTs over TLS verified against a CA (with SNI), on
//! HTTP/1.1 connections that are kept alive.
//!
//! ```sh
//! cargo run --release --example loadgen -- \
//!     --url 'https://127.0.0.1:8443/mutate?timeout=10s' --ca certs/ca.crt \
//!     --server-name gpu-policy.gpu-policy.svc --body benches/reviews/gpu-pod.json \
//!     --concurrency 16 --duration 10s [--rate 5000] [--output json]
//! ```
//!
//! Each connection is one task sending one request at a time. Without
//! `--rate` every task sends its next request as soon as the answer is in
//! (saturation); with it, a pacer releases one send every 1/rate seconds
//! and the next free connection sends it. Latency runs from the first byte
//! written to the last byte of the answer read. A send that finds every
//! connection busy waits for one, and `schedule_lag_p99_us` shows it: a lag
//! near the latency means the server (or this tool) could not keep the rate.
//!
//! An answer counts as a success when its status is 200 and its body carries
//! the request's uid (the API server rejects any other). Failures are
//! counted by kind: `connect`, `tls`, `unsent` (the connection closed before
//! the request was written), `io` (written, no answer), `timeout`, `status`
//! and `no_uid`. With `--server-pid` the tool also reads the server's CPU
//! time and peak RSS from `/proc`. The exit code is 0 when nothing failed,
//! 1 when something did, 2 when the tool could not run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::{Parser, ValueEnum};
use http_body_util::{BodyExt, Full};
use hyper::Uri;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use serde::Serialize;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

#[derive(Debug, Parser)]
#[command(about = "HTTPS load for an admission webhook, as the API server sends it")]
struct Args {
    /// `https://HOST:PORT/PATH[?QUERY]` of the webhook.
    #[arg(long)]
    url: Uri,
    /// CA that signed the server certificate (PEM).
    #[arg(long, value_name = "FILE")]
    ca: PathBuf,
    /// Name sent as SNI and checked against the certificate (default: the
    /// URL's host), like `<service>.<namespace>.svc` of the API server.
    #[arg(long, value_name = "NAME")]
    server_name: Option<String>,
    /// The request body: an AdmissionReview (JSON) with a `request.uid`.
    #[arg(long, value_name = "FILE")]
    body: PathBuf,
    /// Connections, each with one request in flight.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// How long to measure, as a Go duration (`10s`, `1m30s`).
    #[arg(long, value_parser = duration, default_value = "10s")]
    duration: Duration,
    /// Load before measuring starts, not counted.
    #[arg(long, value_parser = duration, default_value = "1s")]
    warmup: Duration,
    /// Requests per second in total; without it, as fast as answers come.
    #[arg(long, value_parser = rate)]
    rate: Option<f64>,
    /// How long to wait for one answer.
    #[arg(long, value_parser = duration, default_value = "10s")]
    timeout: Duration,
    /// Threads of the tool's runtime.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Never sleep: a task that only yields keeps the tool's thread
    /// running, so that an answer never has to wake it. On loopback the
    /// server's kernel time pays for waking the tool, which over a network
    /// it does not.
    #[arg(long)]
    busy_poll: bool,
    /// Process id of the server: its CPU time and peak RSS are reported.
    #[arg(long, value_name = "PID")]
    server_pid: Option<u32>,
    /// A label copied into the report.
    #[arg(long, default_value = "")]
    label: String,
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Output {
    Text,
    Json,
}

fn duration(text: &str) -> Result<Duration, String> {
    gpu_policy::duration::parse(text)
        .ok_or_else(|| format!("{text:?} is not a duration like 10s or 500ms"))
}

fn rate(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|rate| rate.is_finite() && *rate > 0.0)
        .ok_or_else(|| format!("{text:?} is not a positive number of requests per second"))
}

/// What went wrong with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Failure {
    Connect,
    Tls,
    /// The connection closed before the request went out (the API server
    /// sends it again on a new connection).
    Unsent,
    /// The request went out and no answer came back.
    Io,
    Timeout,
    Status,
    NoUid,
}

impl Failure {
    fn as_str(self) -> &'static str {
        match self {
            Failure::Connect => "connect",
            Failure::Tls => "tls",
            Failure::Unsent => "unsent",
            Failure::Io => "io",
            Failure::Timeout => "timeout",
            Failure::Status => "status",
            Failure::NoUid => "no_uid",
        }
    }
}

/// Where and how to connect, shared by the tasks.
struct Target {
    address: String,
    server_name: ServerName<'static>,
    connector: TlsConnector,
    request_uri: Uri,
    authority: String,
    body: Bytes,
    uid: Vec<u8>,
    timeout: Duration,
}

/// What one task measured.
#[derive(Default)]
struct Tally {
    latencies_ns: Vec<u64>,
    lags_ns: Vec<u64>,
    failures: BTreeMap<Failure, u64>,
    first_failure: Option<String>,
}

impl Tally {
    fn fail(&mut self, failure: Failure, detail: String) {
        *self.failures.entry(failure).or_default() += 1;
        self.first_failure.get_or_insert(detail);
    }
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

impl Target {
    async fn connect(&self) -> Result<Sender, (Failure, String)> {
        let tcp = TcpStream::connect(&self.address)
            .await
            .map_err(|e| (Failure::Connect, format!("connect {}: {e}", self.address)))?;
        let _ = tcp.set_nodelay(true);
        let tls = self
            .connector
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| (Failure::Tls, format!("TLS: {e}")))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| (Failure::Io, format!("HTTP handshake: {e}")))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// Sends one review and checks the answer.
    async fn send(&self, sender: &mut Sender) -> Result<(), (Failure, String)> {
        sender.ready().await.map_err(|e| (Failure::Unsent, format!("connection closed: {e}")))?;
        let request = hyper::Request::post(self.request_uri.clone())
            .header(hyper::header::HOST, &self.authority)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "application/json")
            .body(Full::new(self.body.clone()))
            .map_err(|e| (Failure::Io, format!("request: {e}")))?;
        let response = sender.try_send_request(request).await.map_err(|mut e| {
            // hyper hands back a request it did not write.
            let failure = match e.take_message() {
                Some(_) => Failure::Unsent,
                None => Failure::Io,
            };
            (failure, format!("send: {}", e.into_error()))
        })?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| (Failure::Io, format!("read: {e}")))?
            .to_bytes();
        if status != hyper::StatusCode::OK {
            let text = String::from_utf8_lossy(&body);
            return Err((Failure::Status, format!("status {status}: {text}")));
        }
        if !body.windows(self.uid.len()).any(|w| w == self.uid) {
            let text = String::from_utf8_lossy(&body);
            return Err((Failure::NoUid, format!("answer without the uid: {text}")));
        }
        Ok(())
    }
}

/// Releases sends at a fixed rate, one every `every` from `first`.
///
/// tokio's timer wheel ticks every millisecond, so tasks sleeping on it
/// wake together and send a millisecond's requests as one burst, which the
/// server then queues. The pacer is a thread of its own that sleeps to each
/// send time (the kernel's timers are precise to tens of microseconds) and
/// adds a permit; a connection that is free takes it.
struct Pacer {
    permits: tokio::sync::Semaphore,
    /// Permits taken so far: the n-th one taken was due at `first + n * every`
    /// (the semaphore serves waiters in order).
    taken: AtomicU64,
    first: Instant,
    every: Duration,
}

impl Pacer {
    /// Starts the pacing thread; it stops releasing at `end`.
    fn start(first: Instant, every: Duration, end: Instant) -> Result<Arc<Self>, String> {
        let pacer = Arc::new(Pacer {
            permits: tokio::sync::Semaphore::new(0),
            taken: AtomicU64::new(0),
            first,
            every,
        });
        let releasing = Arc::clone(&pacer);
        std::thread::Builder::new()
            .name("pacer".to_owned())
            .spawn(move || releasing.release_until(end.into_std()))
            .map_err(|e| format!("cannot start the pacer thread: {e}"))?;
        Ok(pacer)
    }

    /// Releases the n-th send at `due(n)`, until the end. The sends that
    /// fell due while the thread slept go out in one call, so that the
    /// connections are woken once for them.
    fn release_until(&self, end: std::time::Instant) {
        let due_before_end = |n: u64| self.due(n).map(Instant::into_std).filter(|at| *at < end);
        let mut released = 0;
        while let Some(next) = due_before_end(released) {
            std::thread::sleep(next.saturating_duration_since(std::time::Instant::now()));
            let now = std::time::Instant::now();
            let mut ready = 0;
            while due_before_end(released + ready).is_some_and(|at| at <= now) {
                ready += 1;
            }
            self.permits.add_permits(usize::try_from(ready).unwrap_or(usize::MAX));
            released += ready;
        }
        self.permits.close();
    }

    /// When the n-th send is due; `None` past what an `Instant` can hold.
    fn due(&self, n: u64) -> Option<Instant> {
        let nanos = self.every.as_nanos().checked_mul(u128::from(n))?;
        self.first.checked_add(Duration::from_nanos(u64::try_from(nanos).ok()?))
    }

    /// Waits for the next send and returns when it was due; `None` once the
    /// pacer has stopped.
    async fn next_send(&self) -> Option<Instant> {
        self.permits.acquire().await.ok()?.forget();
        let index = self.taken.fetch_add(1, Ordering::Relaxed);
        Some(self.due(index).unwrap_or_else(Instant::now))
    }
}

/// One connection's loop: send until `end`, recording after `measure_from`.
async fn run_task(
    target: Arc<Target>,
    measure_from: Instant,
    end: Instant,
    pacer: Option<Arc<Pacer>>,
) -> Tally {
    let mut tally = Tally::default();
    let mut sender: Option<Sender> = None;
    loop {
        let mut due = Instant::now();
        if let Some(pacer) = &pacer {
            match pacer.next_send().await {
                Some(at) => due = at,
                None => break,
            }
        }
        let started = Instant::now();
        if started >= end {
            break;
        }
        let measured = started >= measure_from;
        let result = tokio::time::timeout(target.timeout, async {
            if sender.is_none() {
                sender = Some(target.connect().await?);
            }
            match sender.as_mut() {
                Some(open) => target.send(open).await,
                None => Err((Failure::Io, "no connection".to_owned())),
            }
        })
        .await
        .unwrap_or_else(|_| Err((Failure::Timeout, format!("no answer in {:?}", target.timeout))));
        let finished = Instant::now();
        match result {
            Ok(()) if measured => {
                tally.latencies_ns.push(nanos(finished - started));
                tally.lags_ns.push(nanos(started - due));
            }
            Ok(()) => {}
            Err((failure, detail)) => {
                // A connection that failed is not reused; the next request
                // opens a new one, as the API server would.
                sender = None;
                if measured {
                    tally.fail(failure, detail);
                } else if pacer.is_none() {
                    // During warmup, do not spin on a server that is down.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }
    tally
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// CPU time (user + system) and peak RSS of a process, from `/proc`.
#[derive(Debug, Clone, Copy)]
struct ProcessSample {
    cpu: Duration,
    peak_rss_kib: u64,
    rss_kib: u64,
}

fn sample_process(pid: u32) -> Option<ProcessSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces: fields are counted after its `)`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    // utime and stime are fields 14 and 15 of the file (11 and 12 here).
    let clock_ticks = 100; // USER_HZ on Linux
    let total = ticks(11)? + ticks(12)?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some(ProcessSample {
        cpu: Duration::from_millis(total * 1000 / clock_ticks),
        peak_rss_kib: kib("VmHWM:")?,
        rss_kib: kib("VmRSS:")?,
    })
}

#[derive(Debug, Serialize)]
struct Report {
    label: String,
    url: String,
    concurrency: usize,
    target_rate: Option<f64>,
    duration_s: f64,
    requests: u64,
    failed: u64,
    failures: BTreeMap<&'static str, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_failure: Option<String>,
    throughput_rps: f64,
    latency_us: Latency,
    schedule_lag_p99_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    server: Option<ServerUse>,
}

#[derive(Debug, Serialize)]
struct Latency {
    mean: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    p999: f64,
    max: f64,
}

#[derive(Debug, Serialize)]
struct ServerUse {
    cpu_us_per_request: f64,
    cpu_cores: f64,
    rss_mib: f64,
    peak_rss_mib: f64,
}

/// The value below which `q` of the sorted samples lie (nearest rank), in µs.
fn quantile_us(sorted_ns: &[u64], q: f64) -> f64 {
    if sorted_ns.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted_ns.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted_ns.len()) - 1;
    sorted_ns[index] as f64 / 1000.0
}

fn load_roots(path: &Path) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    let certs =
        CertificateDer::pem_file_iter(path).map_err(|e| format!("{}: {e}", path.display()))?;
    for cert in certs {
        let cert = cert.map_err(|e| format!("{}: {e}", path.display()))?;
        roots.add(cert).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if roots.is_empty() {
        return Err(format!("{}: no certificate", path.display()));
    }
    Ok(roots)
}

fn target(args: &Args) -> Result<Target, String> {
    if args.url.scheme_str() != Some("https") {
        return Err(format!("--url {}: only https is supported", args.url));
    }
    let host = args.url.host().ok_or_else(|| format!("--url {}: no host", args.url))?;
    let port = args.url.port_u16().unwrap_or(443);
    let name = args.server_name.clone().unwrap_or_else(|| host.to_owned());
    let server_name =
        ServerName::try_from(name.clone()).map_err(|e| format!("--server-name {name}: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(load_roots(&args.ca)?)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let body = std::fs::read(&args.body).map_err(|e| format!("{}: {e}", args.body.display()))?;
    let review: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| format!("{}: not JSON: {e}", args.body.display()))?;
    let uid = review
        .pointer("/request/uid")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| format!("{}: no request.uid", args.body.display()))?;
    Ok(Target {
        address: format!("{host}:{port}"),
        server_name,
        connector: TlsConnector::from(Arc::new(config)),
        request_uri: args
            .url
            .path_and_query()
            .map_or_else(|| Uri::from_static("/"), |p| Uri::from(p.clone())),
        authority: format!("{name}:{port}"),
        body: Bytes::from(body),
        uid: format!("\"{uid}\"").into_bytes(),
        timeout: args.timeout,
    })
}

async fn run(args: &Args) -> Result<Report, String> {
    let target = Arc::new(target(args)?);
    let concurrency = args.concurrency.max(1);
    let start = Instant::now();
    let end = start
        .checked_add(args.warmup)
        .and_then(|m| m.checked_add(args.duration))
        .ok_or("--warmup and --duration are too long")?;
    let measure_from = start + args.warmup;
    // With a rate, one send every 1/rate seconds.
    let every = args
        .rate
        .map(|rate| {
            Duration::try_from_secs_f64(1.0 / rate)
                .ok()
                .filter(|every| start.checked_add(*every).is_some())
                .ok_or_else(|| format!("--rate {rate:?}: too low"))
        })
        .transpose()?;
    let pacer = every.map(|every| Pacer::start(start, every, end)).transpose()?;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        tasks.spawn(run_task(Arc::clone(&target), measure_from, end, pacer.clone()));
    }
    let mut before = None;
    if let Some(pid) = args.server_pid {
        tokio::time::sleep_until(measure_from).await;
        before = sample_process(pid);
    }
    let mut tally = Tally::default();
    while let Some(joined) = tasks.join_next().await {
        let task = joined.map_err(|e| format!("a load task failed: {e}"))?;
        tally.latencies_ns.extend(task.latencies_ns);
        tally.lags_ns.extend(task.lags_ns);
        for (failure, count) in task.failures {
            *tally.failures.entry(failure).or_default() += count;
        }
        if tally.first_failure.is_none() {
            tally.first_failure = task.first_failure;
        }
    }
    let elapsed = args.duration.as_secs_f64();
    let server = match (args.server_pid, before) {
        (Some(pid), Some(before)) => sample_process(pid).map(|after| {
            let requests = tally.latencies_ns.len().max(1) as f64;
            let cpu = after.cpu.saturating_sub(before.cpu).as_secs_f64();
            ServerUse {
                cpu_us_per_request: cpu * 1e6 / requests,
                cpu_cores: cpu / elapsed,
                rss_mib: after.rss_kib as f64 / 1024.0,
                peak_rss_mib: after.peak_rss_kib as f64 / 1024.0,
            }
        }),
        _ => None,
    };
    tally.latencies_ns.sort_unstable();
    tally.lags_ns.sort_unstable();
    let latencies = &tally.latencies_ns;
    let mean = if latencies.is_empty() {
        0.0
    } else {
        latencies.iter().map(|&ns| ns as f64).sum::<f64>() / latencies.len() as f64 / 1000.0
    };
    Ok(Report {
        label: args.label.clone(),
        url: args.url.to_string(),
        concurrency,
        target_rate: args.rate,
        duration_s: elapsed,
        requests: latencies.len() as u64,
        failed: tally.failures.values().sum(),
        failures: tally
            .failures
            .iter()
            .map(|(failure, count)| (failure.as_str(), *count))
            .collect(),
        first_failure: tally.first_failure,
        throughput_rps: latencies.len() as f64 / elapsed,
        latency_us: Latency {
            mean,
            p50: quantile_us(latencies, 0.50),
            p90: quantile_us(latencies, 0.90),
            p99: quantile_us(latencies, 0.99),
            p999: quantile_us(latencies, 0.999),
            max: latencies.last().map_or(0.0, |&ns| ns as f64 / 1000.0),
        },
        schedule_lag_p99_us: every.map(|_| quantile_us(&tally.lags_ns, 0.99)),
        server,
    })
}

fn print_text(report: &Report) {
    let rate = report.target_rate.map_or("saturation".to_owned(), |r| format!("{r:.0} req/s"));
    println!(
        "{} {}: {} connections, {rate}, {:.1} s",
        report.label, report.url, report.concurrency, report.duration_s
    );
    println!(
        "  requests {}  failed {}  throughput {:.0} req/s",
        report.requests, report.failed, report.throughput_rps
    );
    let l = &report.latency_us;
    println!(
        "  latency µs: mean {:.0}  p50 {:.0}  p90 {:.0}  p99 {:.0}  p99.9 {:.0}  max {:.0}",
        l.mean, l.p50, l.p90, l.p99, l.p999, l.max
    );
    if let Some(lag) = report.schedule_lag_p99_us {
        println!("  schedule lag p99 {lag:.0} µs");
    }
    for (failure, count) in &report.failures {
        println!("  {failure}: {count}");
    }
    if let Some(first) = &report.first_failure {
        println!("  first failure: {first}");
    }
    if let Some(server) = &report.server {
        println!(
            "  server: {:.1} µs CPU per request, {:.2} cores, RSS {:.1} MiB (peak {:.1} MiB)",
            server.cpu_us_per_request, server.cpu_cores, server.rss_mib, server.peak_rss_mib
        );
    }
}

/// Keeps the runtime's threads from sleeping (`--busy-poll`): a task that
/// only yields, so that a worker polls for I/O without waiting. Returns how
/// many times it has run.
fn keep_busy(runtime: &tokio::runtime::Runtime) -> Arc<AtomicU64> {
    let spins = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&spins);
    runtime.spawn(async move {
        loop {
            counted.fetch_add(1, Ordering::Relaxed);
            tokio::task::yield_now().await;
        }
    });
    spins
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("loadgen: cannot start the runtime: {error}");
            return std::process::ExitCode::from(2);
        }
    };
    if args.busy_poll {
        keep_busy(&runtime);
    }
    match runtime.block_on(run(&args)) {
        Ok(report) => {
            match args.output {
                Output::Text => print_text(&report),
                Output::Json => match serde_json::to_string(&report) {
                    Ok(json) => println!("{json}"),
                    Err(error) => {
                        eprintln!("loadgen: {error}");
                        return std::process::ExitCode::from(2);
                    }
                },
            }
            if report.failed == 0 && report.requests > 0 {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::from(1)
            }
        }
        Err(error) => {
            eprintln!("loadgen: {error}");
            std::process::ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => runtime,
            Err(error) => panic!("runtime: {error}"),
        }
    }

    #[test]
    fn pacer_hands_out_sends_one_interval_apart_and_stops_at_the_end() {
        runtime().block_on(async {
            let every = Duration::from_millis(1);
            // Started 100 ms ago: 101 sends are due at once, in order.
            let first = Instant::now() - Duration::from_millis(100);
            let end = Instant::now() + Duration::from_millis(50);
            let pacer = match Pacer::start(first, every, end) {
                Ok(pacer) => pacer,
                Err(error) => panic!("{error}"),
            };
            let mut sends = Vec::new();
            while let Some(at) = pacer.next_send().await {
                sends.push(at);
            }
            assert!(sends.len() >= 101, "only {} sends", sends.len());
            for (n, at) in sends.iter().enumerate() {
                assert_eq!(*at, first + every * u32::try_from(n).unwrap_or(u32::MAX));
            }
            // None of them was due after the end.
            assert!(sends.iter().all(|at| *at < end), "{:?}", sends.last());
            assert!(Instant::now() >= end);
        });
    }

    /// While the runtime waits on a timer, the busy task keeps running
    /// (a runtime left alone would sleep until the timer fires), and the
    /// runtime still ends.
    #[test]
    fn a_busy_runtime_keeps_running_while_it_waits() {
        let runtime = runtime();
        let spins = keep_busy(&runtime);
        runtime.block_on(async { tokio::time::sleep(Duration::from_millis(20)).await });
        assert!(spins.load(Ordering::Relaxed) > 100, "{spins:?}");
        drop(runtime);
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let samples: Vec<u64> = (1..=1000).map(|n| n * 1000).collect();
        assert_eq!(quantile_us(&samples, 0.5), 500.0);
        assert_eq!(quantile_us(&samples, 0.99), 990.0);
        assert_eq!(quantile_us(&samples, 0.999), 999.0);
        assert_eq!(quantile_us(&[], 0.99), 0.0);
    }
}
