//! Watches: the initial events, the changes since a resourceVersion,
//! bookmarks, expiry and dropped connections.

use super::*;

pub fn start_watch(
    shared: &Shared,
    target: &Target,
    query: &HashMap<String, String>,
    meta_only: bool,
) -> Response {
    let mut filter = match Filter::from_query(target, query) {
        Ok(filter) => filter,
        Err(status) => return status_response(&status),
    };
    if let Some(name) = &target.name {
        // The old single-object watch: GET .../{name}?watch=true
        filter.fields.push(FieldRequirement {
            path: "metadata.name".into(),
            value: name.clone(),
            equal: true,
        });
    }
    let requested = query.get("resourceVersion").map(String::as_str).unwrap_or_default();
    let send_initial_events = query.get("sendInitialEvents").is_some_and(|v| v == "true");
    let bookmarks = query.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map(|s| Instant::now() + Duration::from_secs(s));

    // Under the store lock: the snapshot or replay and the subscription line
    // up exactly, and every later write arrives on `changes`.
    let store = shared.store.lock().unwrap();
    let mut cursor = WatchCursor {
        filter,
        meta_only,
        pending: VecDeque::new(),
        close_after_pending: false,
        finished: false,
        changes: shared.changes.subscribe(),
        kill: shared.kill.subscribe(),
        bookmarks: None,
        deadline: timeout,
        last_rv: store.rv,
    };
    {
        if send_initial_events || requested.is_empty() || requested == "0" {
            for obj in store.select(&cursor.filter) {
                let line = cursor.event_line("ADDED", &obj);
                cursor.pending.push_back(line);
            }
            if send_initial_events {
                let line = cursor.bookmark_line(true);
                cursor.pending.push_back(line);
            }
        } else {
            let Ok(from) = requested.parse::<u64>() else {
                return status_response(&status(
                    400,
                    "BadRequest",
                    format!("invalid resourceVersion {requested:?}"),
                ));
            };
            if from < store.floor {
                let expired = status(
                    410,
                    "Expired",
                    format!("too old resource version: {from} ({})", store.floor),
                );
                cursor.pending.push_back(line_of(&json!({"type": "ERROR", "object": expired})));
                cursor.close_after_pending = true;
            } else {
                for change in store.history.iter().filter(|c| c.rv > from) {
                    if let Some(line) = cursor.change_line(change) {
                        cursor.pending.push_back(line);
                    }
                }
            }
        }
    }
    drop(store);
    if bookmarks && !cursor.close_after_pending {
        let period = *shared.bookmark_interval.lock().unwrap();
        cursor.bookmarks = Some(tokio::time::interval_at(Instant::now() + period, period));
    }

    let stream = futures::stream::unfold(cursor, |mut cursor| async move {
        let item = cursor.next_item().await?;
        Some((item, cursor))
    });
    Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap()
}

pub struct WatchCursor {
    pub filter: Filter,
    pub meta_only: bool,
    /// Lines to send before live events (snapshot, replay, or the 410 error).
    pub pending: VecDeque<Bytes>,
    pub close_after_pending: bool,
    pub finished: bool,
    pub changes: broadcast::Receiver<Arc<Change>>,
    pub kill: watch::Receiver<u64>,
    pub bookmarks: Option<Interval>,
    pub deadline: Option<Instant>,
    /// Everything up to here has been sent (what bookmarks carry).
    pub last_rv: u64,
}

impl WatchCursor {
    pub async fn next_item(&mut self) -> Option<io::Result<Bytes>> {
        if self.finished {
            return None;
        }
        if let Some(line) = self.pending.pop_front() {
            return Some(Ok(line));
        }
        if self.close_after_pending {
            self.finished = true;
            return None;
        }
        loop {
            tokio::select! {
                changed = self.kill.changed() => {
                    self.finished = true;
                    return changed.is_ok().then(|| {
                        Err(io::Error::new(io::ErrorKind::ConnectionAborted, "FakeApi::drop_watches"))
                    });
                }
                () = sleep_until_opt(self.deadline) => {
                    self.finished = true;
                    return None;
                }
                received = self.changes.recv() => match received {
                    Ok(change) => {
                        self.last_rv = self.last_rv.max(change.rv);
                        if let Some(line) = self.change_line(&change) {
                            return Some(Ok(line));
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.finished = true;
                        let expired = status(410, "Expired", "the watch fell behind");
                        return Some(Ok(line_of(&json!({"type": "ERROR", "object": expired}))));
                    }
                    Err(broadcast::error::RecvError::Closed) => {
                        self.finished = true;
                        return None;
                    }
                },
                () = tick_opt(&mut self.bookmarks) => {
                    return Some(Ok(self.bookmark_line(false)));
                }
            }
        }
    }

    pub fn event_line(&self, event: &str, obj: &Value) -> Bytes {
        let obj = if self.meta_only { to_metadata(obj) } else { obj.clone() };
        line_of(&json!({"type": event, "object": obj}))
    }

    /// The event a watcher with this filter sees for a change, if any.
    pub fn change_line(&self, change: &Change) -> Option<Bytes> {
        if !change.kind.same_resource(&self.filter.kind) {
            return None;
        }
        let now = self.filter.matches(&change.object);
        let event = match change.change {
            ChangeType::Added => now.then_some("ADDED"),
            ChangeType::Deleted => now.then_some("DELETED"),
            ChangeType::Modified => {
                let before = change.previous.as_ref().is_some_and(|prev| self.filter.matches(prev));
                match (before, now) {
                    (true, true) => Some("MODIFIED"),
                    (false, true) => Some("ADDED"),
                    (true, false) => Some("DELETED"),
                    (false, false) => None,
                }
            }
        }?;
        Some(self.event_line(event, &change.object))
    }

    pub fn bookmark_line(&self, initial_events_end: bool) -> Bytes {
        let (api_version, kind) = if self.meta_only {
            ("meta.k8s.io/v1".to_owned(), "PartialObjectMetadata".to_owned())
        } else {
            (self.filter.kind.api_version(), self.filter.kind.kind.clone())
        };
        let mut metadata = json!({"resourceVersion": self.last_rv.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line_of(&json!({
            "type": "BOOKMARK",
            "object": {"apiVersion": api_version, "kind": kind, "metadata": metadata},
        }))
    }
}

pub async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

pub async fn tick_opt(interval: &mut Option<Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

pub fn line_of(value: &Value) -> Bytes {
    let mut line = serde_json::to_vec(value).expect("JSON");
    line.push(b'\n');
    Bytes::from(line)
}
