//! What a request may make the server keep, say and write: metric series,
//! log lines, and the answer itself.
//!
//! - Reviews whose strings are a megabyte each (the object's kind, its
//!   name and namespace, the resource, the operation, the uid) create no
//!   metric series and leave no memory behind: `/metrics` stays small and
//!   names none of them, the resident set comes back to where it was, and
//!   every log line stays short.
//! - A pod whose findings would fill megabytes (3,000 containers to pin,
//!   thousands of violations, a list of 1,000 containers) gets an answer
//!   of a few kilobytes on every endpoint: the denial, the warnings and the
//!   audit annotations are cut with a count of the rest, and a patch over
//!   its budget is refused (enforce) or warned about (warn).

use serde_json::{Value, json};

use crate::PEAK_RSS;
use crate::support::fixtures::fixture;
use crate::support::server::{
    AUDIT, Connection, ENFORCE, MUTATE, Server, WARN, body_of, next_uid, pod_with_gpus, review,
};

const MIB: u64 = 1 << 20;
/// How many reviews the burst sends, each with one string this long.
const BURST: usize = 100;
const LONG: usize = 1 << 20;
/// The resident set after the burst, above the base: what the allocator
/// keeps in its worker threads' heaps for the next requests, measured at
/// 3 to 7 MiB over six runs. The burst's strings, kept as label values,
/// made it 240 MiB.
const RSS_AFTER_BURST: u64 = 16 * MIB;
/// `/metrics` after the burst.
const METRICS_BYTES: usize = 64 << 10;
/// The longest log line the server may write.
const LOG_LINE_BYTES: usize = 4 << 10;
/// The answer to any review, whatever its findings.
const ANSWER_BYTES: usize = 16 << 10;
/// Containers whose pins are a patch over its 256 KiB budget.
const PATCH_CONTAINERS: usize = 3_000;
/// What the API server passes on of warnings (k8s.io/apiserver's warning
/// recorder: 4,096 characters in all, from every webhook), and what one
/// warning may be before it cuts it (256).
const API_SERVER_WARNING_CHARS: usize = 4096;
const API_SERVER_WARNING_ITEM_CHARS: usize = 256;

/// A review of a GPU pod on `path` whose field at `field` is a megabyte
/// long, starting with `marker`.
fn long_review(marker: &str, field: usize, uid: &str) -> Value {
    let long = format!("{marker}{}", "x".repeat(LONG));
    let mut body = review(&pod_with_gpus(1), uid, false);
    body["request"]["kind"]["kind"] = json!(long);
    let extra = format!("{marker}{}", "y".repeat(LONG / 2));
    match field % 5 {
        0 => body["request"]["namespace"] = json!(extra),
        1 => body["request"]["name"] = json!(extra),
        2 => body["request"]["resource"]["resource"] = json!(extra),
        3 => body["request"]["operation"] = json!(extra),
        _ => body["request"]["uid"] = json!(format!("{uid}{extra}")),
    }
    body
}

#[tokio::test(flavor = "multi_thread")]
async fn megabyte_strings_in_reviews_create_no_series_and_leave_no_memory() {
    let _alone = crate::alone();
    let server = Server::start_release().await;
    let mut connection = server.connect().await;
    // Every endpoint answers ordinary reviews, and reviews as large as the
    // burst's (a long annotation), so that the base holds the series and
    // the buffers that requests of this size make.
    let mut large = pod_with_gpus(1);
    large["metadata"]["annotations"] = json!({"note": "z".repeat(LONG + LONG / 2)});
    for pod in [pod_with_gpus(1), large] {
        for _ in 0..3 {
            for path in [MUTATE, ENFORCE, WARN, AUDIT] {
                connection.admit(path, &pod).await;
            }
        }
    }
    let base = server.memory("VmRSS");

    for at in 0..BURST {
        let marker = format!("attacker{at:03}");
        let uid = next_uid();
        let body = long_review(&marker, at, &uid);
        let path = [MUTATE, ENFORCE, WARN, AUDIT][at % 4];
        let reply = connection
            .post(path, body_of(&body))
            .await
            .unwrap_or_else(|err| panic!("{marker}: {err}"));
        // A megabyte operation is no operation: the review is refused as
        // malformed; every other one is answered.
        let expected = if at % 5 == 3 { 400 } else { 200 };
        assert_eq!(reply.status, expected, "{marker}: {:.200}", reply.text());
    }
    // The legitimate caller is still answered as before.
    let response = connection.admit(MUTATE, &pod_with_gpus(1)).await;
    assert_eq!(response["allowed"], true, "{response}");

    let metrics = server.metrics().await;
    let rss = settled_rss(&server, base).await;
    // Each review that was read has its decision line, of kind `other`,
    // once the log's thread has written them.
    let log = server
        .log_with_lines(BURST - BURST / 5, std::time::Duration::from_secs(10), is_decision_of_other)
        .await;
    let longest_line = log.lines().map(str::len).max().unwrap_or(0);
    eprintln!(
        "after {BURST} reviews of 1 MiB strings: RSS {:.1} MiB over a base of {:.1} MiB; \
         /metrics {} bytes; longest log line {} bytes",
        rss.saturating_sub(base) as f64 / MIB as f64,
        base as f64 / MIB as f64,
        metrics.len(),
        longest_line,
    );
    assert!(
        !metrics.contains("attacker"),
        "a series names a request's string: {:.2000}",
        metrics.lines().filter(|line| line.contains("attacker")).collect::<Vec<_>>().join("\n")
    );
    assert!(metrics.len() <= METRICS_BYTES, "/metrics is {} bytes", metrics.len());
    assert!(metrics.contains(r#"kind="other""#), "the kinds are counted as other:\n{metrics}");
    assert!(
        rss <= base + RSS_AFTER_BURST,
        "RSS {:.1} MiB after the burst, base {:.1} MiB",
        rss as f64 / MIB as f64,
        base as f64 / MIB as f64
    );
    assert!(
        longest_line <= LOG_LINE_BYTES,
        "a log line of {longest_line} bytes: {:.300}",
        log.lines().max_by_key(|line| line.len()).unwrap_or("")
    );
    // Each review that was read left its decision line, its kind `other`
    // and its long field cut, saying how much was left out.
    let decisions: Vec<Value> = log
        .lines()
        .filter(|line| is_decision_of_other(line))
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
        .collect();
    assert_eq!(decisions.len(), BURST - BURST / 5, "one decision line each");
    let cut = decisions
        .iter()
        .filter(|line| {
            ["namespace", "name", "uid"].iter().any(|field| {
                line[field].as_str().is_some_and(|value| {
                    value.contains("attacker") && value.contains("bytes more)")
                })
            })
        })
        .count();
    assert_eq!(cut, BURST * 3 / 5, "{decisions:#?}");
    let peak = server.memory("VmHWM");
    assert!(peak <= PEAK_RSS, "peak RSS {:.1} MiB", peak as f64 / MIB as f64);
}

/// The resident set once the allocator has given back what the burst
/// freed: read until it is within the bound or a few seconds have passed.
async fn settled_rss(server: &Server, base: u64) -> u64 {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let rss = server.memory("VmRSS");
        if rss <= base + RSS_AFTER_BURST || tokio::time::Instant::now() >= deadline {
            return rss;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Whether a log line is the decision line of a review of a kind outside
/// the webhooks' (the metrics' and the log's `other`).
fn is_decision_of_other(line: &str) -> bool {
    line.contains("admission decision")
        && serde_json::from_str::<Value>(line).is_ok_and(|line| line["kind"] == "other")
}

/// A CPU-only pod of `count` containers, each of which `/mutate` pins to
/// `void`: a patch of some 100 bytes per container. Each container has
/// an argument of `argument_bytes` (a field no rule reads, which makes the
/// review larger and so the memory it may take).
fn pod_of_many_containers(count: usize, argument_bytes: usize) -> Value {
    let argument = "a".repeat(argument_bytes);
    let containers: Vec<Value> = (0..count)
        .map(|at| match argument_bytes {
            0 => json!({"name": format!("c{at}")}),
            _ => json!({"name": format!("c{at}"), "args": [argument]}),
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "many", "namespace": "ml"},
        "spec": {"containers": containers}})
}

/// A pod whose findings are many and long: one container requesting
/// `resources` GPU resources without limits (a violation each), and
/// `privileged` privileged containers without a GPU (one violation naming
/// them all).
fn pod_of_many_violations(resources: usize, privileged: usize) -> Value {
    let mut pod = fixture("11");
    let requests: serde_json::Map<String, Value> =
        (0..resources).map(|at| (format!("nvidia.com/mig-{at}g.{at}gb"), json!(1))).collect();
    pod["spec"]["containers"][0]["resources"]["requests"] = Value::Object(requests);
    let containers = pod["spec"]["containers"].as_array_mut().expect("the fixture's containers");
    containers.extend(
        (0..privileged)
            .map(|at| json!({"name": format!("p{at}"), "securityContext": {"privileged": true}})),
    );
    pod
}

/// Sends `pod` to `path`: the response, and the size of the whole answer.
async fn answer(connection: &mut Connection, path: &str, pod: &Value) -> (Value, usize) {
    let uid = next_uid();
    let reply = connection
        .post(path, body_of(&review(pod, &uid, false)))
        .await
        .unwrap_or_else(|err| panic!("{path}: {err}"));
    let size = reply.body.len();
    (reply.admission(&uid), size)
}

fn warnings_of(response: &Value) -> Vec<String> {
    response["warnings"]
        .as_array()
        .map(|warnings| {
            warnings.iter().map(|w| w.as_str().unwrap_or_default().to_owned()).collect()
        })
        .unwrap_or_default()
}

/// The warnings fit what the API server passes on, and the last one says
/// how many more there were.
fn assert_warnings_bounded(path: &str, warnings: &[String]) {
    let chars: usize = warnings.iter().map(|w| w.chars().count()).sum();
    assert!(
        warnings.len() <= 20 && chars <= API_SERVER_WARNING_CHARS / 2,
        "{path}: {} warnings, {chars} characters",
        warnings.len()
    );
    for warning in warnings {
        assert!(warning.chars().count() < API_SERVER_WARNING_ITEM_CHARS, "{path}: {warning}");
        assert!(warning.starts_with("gpu-policy: "), "{path}: {warning}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn findings_past_every_cap_get_an_answer_of_a_few_kilobytes() {
    let _alone = crate::alone();
    let server = Server::start_release().await;
    let mut connection = server.connect().await;

    // More containers than a review of its size may hold in memory: denied
    // unread, with one line.
    let many = pod_of_many_containers(100_000, 0);
    let (response, size) = answer(&mut connection, MUTATE, &many).await;
    let message = response["status"]["message"].as_str().unwrap_or_default();
    eprintln!("100,000 empty containers, /mutate: {size} bytes: {message}");
    assert!(size <= ANSWER_BYTES, "/mutate answered {size} bytes");
    assert_eq!(response["allowed"], false, "{:.500}", response.to_string());
    assert!(!message.contains('\n'), "{message}");
    assert!(message.contains("is not read"), "{message}");

    // A patch over its budget (containers whose unread arguments make the
    // review large enough to be read): the pod is denied in enforce mode,
    // fail closed, with one line saying why.
    let many = pod_of_many_containers(PATCH_CONTAINERS, 400);
    let (response, size) = answer(&mut connection, MUTATE, &many).await;
    let message = response["status"]["message"].as_str().unwrap_or_default();
    eprintln!(
        "{PATCH_CONTAINERS} containers to pin, /mutate: {size} bytes, allowed {}, patch {} bytes, \
         message {} bytes",
        response["allowed"],
        response["patch"].as_str().map_or(0, str::len),
        message.len()
    );
    assert!(size <= ANSWER_BYTES, "/mutate answered {size} bytes");
    assert_eq!(response["allowed"], false, "{:.500}", response.to_string());
    assert!(response.get("patch").is_none_or(Value::is_null));
    assert!(!message.contains('\n'), "{message}");
    assert!(message.contains("patch") && message.contains("3,001 operations"), "{message}");

    // In warn mode: allowed, told it would be denied.
    let (response, size) = answer(&mut connection, WARN, &many).await;
    let warnings = warnings_of(&response);
    eprintln!("/validate/warn: {size} bytes, {} warnings", warnings.len());
    assert!(size <= ANSWER_BYTES, "/validate/warn answered {size} bytes");
    assert_eq!(response["allowed"], true);
    assert_warnings_bounded(WARN, &warnings);
    assert!(
        warnings.iter().any(|w| w.contains("would deny") && w.contains("patch")),
        "{warnings:#?}"
    );

    // Thousands of violations: the denial, the warnings and the audit
    // annotation each hold what fits and count the rest.
    let pod = pod_of_many_violations(3_000, 1_000);
    let (response, size) = answer(&mut connection, ENFORCE, &pod).await;
    let message = response["status"]["message"].as_str().unwrap_or_default();
    eprintln!("3,000 violations, /validate/enforce: {size} bytes, message {} bytes", message.len());
    assert!(size <= ANSWER_BYTES, "/validate/enforce answered {size} bytes");
    assert_eq!(response["allowed"], false);
    assert!(message.len() <= 4096, "{} bytes", message.len());
    assert!(message.contains("; and 2,"), "{message}");
    assert!(message.ends_with(" more"), "{message}");

    let (response, size) = answer(&mut connection, WARN, &pod).await;
    let warnings = warnings_of(&response);
    eprintln!("/validate/warn: {size} bytes, {} warnings", warnings.len());
    assert!(size <= ANSWER_BYTES, "/validate/warn answered {size} bytes");
    assert_warnings_bounded(WARN, &warnings);
    assert!(warnings.last().is_some_and(|w| w.contains("more")), "{warnings:#?}");

    let (response, size) = answer(&mut connection, AUDIT, &pod).await;
    let annotations = response["auditAnnotations"].as_object().cloned().unwrap_or_default();
    let longest = annotations.values().map(|v| v.as_str().map_or(0, str::len)).max().unwrap_or(0);
    eprintln!("/validate/audit: {size} bytes, longest annotation {longest} bytes");
    assert!(size <= ANSWER_BYTES, "/validate/audit answered {size} bytes");
    assert!(longest <= 4096, "an audit annotation of {longest} bytes");
    let violations = annotations["violations"].as_str().unwrap_or_default();
    assert!(violations.contains(" more"), "{violations:.300}");

    // A list of 1,000 containers names a few and counts the rest.
    let pod = pod_of_many_violations(0, 1_000);
    let (response, size) = answer(&mut connection, ENFORCE, &pod).await;
    let message = response["status"]["message"].as_str().unwrap_or_default();
    eprintln!(
        "1,000 privileged containers, /validate/enforce: {size} bytes, message {} bytes",
        message.len()
    );
    assert!(size <= ANSWER_BYTES, "/validate/enforce answered {size} bytes");
    assert!(message.contains("and 990 more"), "{message:.4096}");
    // What evaluating the pods costs is the business of the memory
    // budget's tests (the document, the view and the rules' changes); this
    // one judges the answers.
    let peak = server.memory("VmHWM");
    eprintln!("peak RSS {:.1} MiB", peak as f64 / MIB as f64);
}
