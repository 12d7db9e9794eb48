//! HTTP handling: where a request points, and the verbs (list, get,
//! create, replace, patch, delete).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64_URL;

use super::*;

/// Where a request points.
pub struct Target {
    pub kind: KindInfo,
    /// `None` for cluster-scoped kinds and all-namespaces collections.
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

pub fn parse_target(store: &Store, path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let target =
        |kind: KindInfo, namespace: Option<&str>, name: Option<&str>, sub: Option<&str>| Target {
            kind,
            namespace: namespace.map(str::to_owned),
            name: name.map(str::to_owned),
            subresource: sub.map(str::to_owned),
        };
    if let ["namespaces", namespace, plural, tail @ ..] = rest
        && let Some(kind) = store.kind_by_plural(group, version, plural).filter(|k| k.namespaced)
    {
        return match tail {
            [] => Some(target(kind, Some(namespace), None, None)),
            [name] => Some(target(kind, Some(namespace), Some(name), None)),
            [name, sub] => Some(target(kind, Some(namespace), Some(name), Some(sub))),
            _ => None,
        };
    }
    let (plural, name, sub) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return None,
    };
    let kind = store.kind_by_plural(group, version, plural)?;
    if kind.namespaced && name.is_some() {
        return None;
    }
    Some(target(kind, None, name, sub))
}

pub async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let method = req.method().clone();
    let uri = req.uri().clone();
    let path = uri.path().to_owned();
    let path_and_query =
        uri.path_and_query().map_or_else(|| path.clone(), |p| p.as_str().to_owned());
    shared.requests.lock().unwrap().push((method.to_string(), path_and_query.clone()));
    let meta_only = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("as=PartialObjectMetadata"));
    if meta_only {
        shared.metadata_requests.lock().unwrap().push((method.to_string(), path_and_query.clone()));
    }

    match shared.take_fault(method.as_str(), &path, &path_and_query) {
        Some(FaultAnswer::Status(code)) => {
            return status_response(&status(
                code,
                reason_for(code),
                format!("injected by FakeApi::fail_next: {method} {path_and_query}"),
            ));
        }
        Some(FaultAnswer::Hang) => hang(&shared).await,
        None => {}
    }

    let query: HashMap<String, String> = Query::try_from_uri(&uri).map(|q| q.0).unwrap_or_default();
    let headers = req.headers().clone();
    let body = match axum::body::to_bytes(req.into_body(), 64 << 20).await {
        Ok(body) => body,
        Err(err) => {
            return status_response(&status(400, "BadRequest", format!("reading body: {err}")));
        }
    };

    match path.as_str() {
        "/version" => return json_response(200, &version_info()),
        "/healthz" | "/livez" | "/readyz" => {
            return Response::builder()
                .header(header::CONTENT_TYPE, "text/plain")
                .body(Body::from("ok"))
                .unwrap();
        }
        "/api" => {
            return json_response(
                200,
                &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
            );
        }
        _ => {}
    }
    // The discovery of one group: the versions its registered kinds have.
    if method == Method::GET
        && let Some(group) =
            path.strip_prefix("/apis/").filter(|g| !g.is_empty() && !g.contains('/'))
    {
        let store = shared.store.lock().unwrap();
        let mut versions: Vec<&str> = Vec::new();
        for kind in store.kinds.iter().filter(|k| k.group == group) {
            if !versions.contains(&kind.version.as_str()) {
                versions.push(&kind.version);
            }
        }
        if versions.is_empty() {
            return status_response(&status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ));
        }
        let versions: Vec<Value> = versions
            .iter()
            .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
            .collect();
        return json_response(
            200,
            &json!({"kind": "APIGroup", "apiVersion": "v1", "name": group,
                    "versions": versions, "preferredVersion": versions[0]}),
        );
    }

    let target = parse_target(&shared.store.lock().unwrap(), &path);
    let Some(target) = target else {
        return status_response(&status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    };
    let dry_run = query.contains_key("dryRun");
    let is_watch = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));

    if let Some(sub) = &target.subresource
        && sub != "status"
    {
        return status_response(&status(
            404,
            "NotFound",
            format!("subresource {sub} is not served"),
        ));
    }

    let result = match (&method, target.name.is_some()) {
        (&Method::GET, _) if is_watch => return start_watch(&shared, &target, &query, meta_only),
        (&Method::GET, false) => list(&shared, &target, &query, meta_only),
        (&Method::GET, true) => get_one(&shared, &target).map(|obj| (200, obj)),
        (&Method::POST, false) if target.subresource.is_none() => {
            create(&shared, &target, &body, dry_run)
        }
        (&Method::PUT, true) => replace(&shared, &target, &body, dry_run),
        (&Method::PATCH, true) if target.subresource.is_none() && apply::is_apply(&headers) => {
            apply::apply(&shared, &target, &query, &body, dry_run)
        }
        (&Method::PATCH, true) => patch(&shared, &target, &headers, &body, dry_run),
        (&Method::DELETE, true) if target.subresource.is_none() => {
            delete(&shared, &target, &body, dry_run)
        }
        (&Method::DELETE, false) => delete_collection(&shared, &target, &query, dry_run),
        _ => Err(status(405, "MethodNotAllowed", format!("{method} is not supported on {path}"))),
    };
    match result {
        // Lists come back converted already.
        Ok((code, obj)) if meta_only && obj.get("items").is_none() => {
            json_response(code, &to_metadata(&obj))
        }
        Ok((code, obj)) => json_response(code, &obj),
        Err(status) => status_response(&status),
    }
}

/// Waits for `FakeApi::release_hangs`, at most `HANG_LIMIT`.
async fn hang(shared: &Shared) {
    let mut release = shared.release.subscribe();
    let _ = tokio::time::timeout(HANG_LIMIT, release.changed()).await;
}

pub type ApiResult = Result<(u16, Value), Value>;

pub fn not_found(target: &Target, name: &str) -> Value {
    with_details(
        status(404, "NotFound", format!("{} \"{name}\" not found", target.kind.plural)),
        target,
        name,
    )
}

pub fn conflict(target: &Target, name: &str) -> Value {
    with_details(
        status(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                target.kind.plural
            ),
        ),
        target,
        name,
    )
}

pub fn list(
    shared: &Shared,
    target: &Target,
    query: &HashMap<String, String>,
    meta_only: bool,
) -> ApiResult {
    let filter = Filter::from_query(target, query)?;
    let limit =
        query.get("limit").and_then(|limit| limit.parse::<usize>().ok()).filter(|&limit| limit > 0);
    let store = shared.store.lock().unwrap();
    let continued = match query.get("continue").filter(|token| !token.is_empty()) {
        Some(token) => Some(ContinueToken::decode(token)?),
        None => None,
    };
    if let Some(token) = &continued
        && token.rv < store.floor
    {
        return Err(status(
            410,
            "Expired",
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter.",
        ));
    }
    let (mut items, more) = store.select_page(&filter, continued.as_ref().map(|t| &t.after), limit);
    // Every page reads as of the first one: a watch from there replays
    // whatever changed while the client paged.
    let rv = continued.as_ref().map_or(store.rv, |token| token.rv);
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if more && let Some(last) = items.last() {
        let after = (meta_str(last, "namespace"), meta_str(last, "name"));
        metadata["continue"] = ContinueToken { rv, after }.encode().into();
    }
    if meta_only {
        items = items.iter().map(to_metadata).collect();
    }
    let (api_version, kind) = if meta_only {
        ("meta.k8s.io/v1".to_owned(), "PartialObjectMetadataList".to_owned())
    } else {
        (target.kind.api_version(), format!("{}List", target.kind.kind))
    };
    Ok((
        200,
        json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": metadata,
            "items": items,
        }),
    ))
}

/// Where the next page of a list starts: after (namespace, name), as of
/// resourceVersion `rv`. Opaque to clients, like the real server's.
pub struct ContinueToken {
    pub rv: u64,
    pub after: (String, String),
}

impl ContinueToken {
    pub fn encode(&self) -> String {
        let json = json!([self.rv, self.after.0, self.after.1]).to_string();
        BASE64_URL.encode(json)
    }

    pub fn decode(token: &str) -> Result<Self, Value> {
        let invalid = || status(400, "BadRequest", "continue key is not valid");
        let json = BASE64_URL.decode(token).map_err(|_| invalid())?;
        let (rv, namespace, name): (u64, String, String) =
            serde_json::from_slice(&json).map_err(|_| invalid())?;
        Ok(Self { rv, after: (namespace, name) })
    }
}

pub fn get_one(shared: &Shared, target: &Target) -> Result<Value, Value> {
    let name = target.name.as_deref().unwrap_or_default();
    let store = shared.store.lock().unwrap();
    store
        .objects
        .get(&key_of(&target.kind, target.namespace.as_deref().unwrap_or_default(), name))
        .cloned()
        .ok_or_else(|| not_found(target, name))
}

/// Parses a request body as an object of the target's kind.
pub fn parse_body(target: &Target, body: &[u8]) -> Result<Value, Value> {
    let obj: Value = serde_json::from_slice(body).map_err(|err| {
        status(400, "BadRequest", format!("the body is not a JSON object: {err}"))
    })?;
    if !obj.is_object() {
        return Err(status(400, "BadRequest", "the body is not a JSON object"));
    }
    let kind = &target.kind;
    let given_kind = obj["kind"].as_str().unwrap_or_default();
    let given_api_version = obj["apiVersion"].as_str().unwrap_or_default();
    if (!given_kind.is_empty() && given_kind != kind.kind)
        || (!given_api_version.is_empty() && given_api_version != kind.api_version())
    {
        return Err(status(
            400,
            "BadRequest",
            format!(
                "the API version in the data ({given_api_version}) or kind ({given_kind}) does not match \
                 the expected {} {}",
                kind.api_version(),
                kind.kind
            ),
        ));
    }
    if let Some(namespace) = &target.namespace {
        let given = meta_str(&obj, "namespace");
        if !given.is_empty() && &given != namespace {
            return Err(status(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    Ok(obj)
}

pub fn create(shared: &Shared, target: &Target, body: &[u8], dry_run: bool) -> ApiResult {
    if target.kind.namespaced && target.namespace.is_none() {
        return Err(status(405, "MethodNotAllowed", "create needs a namespace in the path"));
    }
    let mut obj = parse_body(target, body)?;
    let mut store = shared.store.lock().unwrap();
    if obj.get("metadata").is_none_or(|m| !m.is_object()) {
        obj["metadata"] = json!({});
    }
    if let Some(namespace) = &target.namespace {
        obj["metadata"]["namespace"] = namespace.clone().into();
    }
    let mut name = meta_str(&obj, "name");
    if name.is_empty() {
        let prefix = meta_str(&obj, "generateName");
        if prefix.is_empty() {
            return Err(status(
                422,
                "Invalid",
                "metadata.name: Required value: name or generateName is required",
            ));
        }
        name = format!("{prefix}{}", random_suffix(store.next_uid + store.rv));
        obj["metadata"]["name"] = name.clone().into();
    }
    let key = key_of(&target.kind, target.namespace.as_deref().unwrap_or_default(), &name);
    if store.objects.contains_key(&key) {
        return Err(with_details(
            status(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", target.kind.plural),
            ),
            target,
            &name,
        ));
    }
    for field in ["resourceVersion", "uid", "creationTimestamp", "generation"] {
        obj["metadata"].as_object_mut().expect("metadata").remove(field);
    }
    if dry_run {
        return Ok((201, obj));
    }
    Ok((201, store.commit(&shared.changes, &target.kind, obj, false)))
}

/// Checks an update against the stored object: same name, and when the body
/// carries a resourceVersion it must be the current one.
pub fn check_update(target: &Target, stored: &Value, updated: &Value) -> Result<(), Value> {
    let name = target.name.as_deref().unwrap_or_default();
    if meta_str(updated, "name") != name {
        return Err(status(
            400,
            "BadRequest",
            "the name of the object does not match the name on the URL",
        ));
    }
    let rv = meta_str(updated, "resourceVersion");
    if !rv.is_empty() && rv != meta_str(stored, "resourceVersion") {
        return Err(conflict(target, name));
    }
    Ok(())
}

/// Stores an update, keeping everything but `.status` for the status subresource.
pub fn store_update(
    shared: &Shared,
    store: &mut Store,
    target: &Target,
    stored: Value,
    mut updated: Value,
    dry_run: bool,
) -> Value {
    if target.subresource.is_some() {
        let status = updated.get("status").cloned();
        updated = stored;
        match status {
            Some(status) => updated["status"] = status,
            None => {
                updated.as_object_mut().expect("object").remove("status");
            }
        }
    }
    if let Some(namespace) = &target.namespace {
        updated["metadata"]["namespace"] = namespace.clone().into();
    }
    if dry_run {
        return updated;
    }
    store.commit(&shared.changes, &target.kind, updated, false)
}

pub fn replace(shared: &Shared, target: &Target, body: &[u8], dry_run: bool) -> ApiResult {
    let updated = parse_body(target, body)?;
    let mut store = shared.store.lock().unwrap();
    let name = target.name.as_deref().unwrap_or_default();
    let key = key_of(&target.kind, target.namespace.as_deref().unwrap_or_default(), name);
    let stored = store.objects.get(&key).cloned().ok_or_else(|| not_found(target, name))?;
    check_update(target, &stored, &updated)?;
    Ok((200, store_update(shared, &mut store, target, stored, updated, dry_run)))
}

pub fn patch(
    shared: &Shared,
    target: &Target,
    headers: &HeaderMap,
    body: &[u8],
    dry_run: bool,
) -> ApiResult {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or_default()
        .trim()
        .to_owned();
    let mut store = shared.store.lock().unwrap();
    let name = target.name.as_deref().unwrap_or_default();
    let key = key_of(&target.kind, target.namespace.as_deref().unwrap_or_default(), name);
    let stored = store.objects.get(&key).cloned().ok_or_else(|| not_found(target, name))?;
    let mut updated = stored.clone();
    match content_type.as_str() {
        "application/merge-patch+json" => {
            let patch: Value = serde_json::from_slice(body)
                .map_err(|err| status(400, "BadRequest", format!("invalid merge patch: {err}")))?;
            json_patch::merge(&mut updated, &patch);
        }
        "application/json-patch+json" => {
            let patch: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|err| status(400, "BadRequest", format!("invalid JSON patch: {err}")))?;
            json_patch::patch(&mut updated, &patch.0).map_err(|err| {
                status(422, "Invalid", format!("the JSON patch does not apply: {err}"))
            })?;
        }
        other => {
            return Err(status(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format ({other}) - accepted media types \
                     include: application/json-patch+json, application/merge-patch+json"
                ),
            ));
        }
    }
    if !updated.is_object() {
        return Err(status(422, "Invalid", "the patched object is not a JSON object"));
    }
    if target.namespace.as_deref().is_some_and(|ns| meta_str(&updated, "namespace") != ns) {
        return Err(status(400, "BadRequest", "a patch cannot change the namespace"));
    }
    check_update(target, &stored, &updated)?;
    Ok((200, store_update(shared, &mut store, target, stored, updated, dry_run)))
}

pub fn delete(shared: &Shared, target: &Target, body: &[u8], dry_run: bool) -> ApiResult {
    let options: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let mut store = shared.store.lock().unwrap();
    let name = target.name.as_deref().unwrap_or_default();
    let namespace = target.namespace.as_deref().unwrap_or_default();
    let stored = store
        .objects
        .get(&key_of(&target.kind, namespace, name))
        .cloned()
        .ok_or_else(|| not_found(target, name))?;
    let preconditions = &options["preconditions"];
    for (field, precondition) in
        [("uid", &preconditions["uid"]), ("resourceVersion", &preconditions["resourceVersion"])]
    {
        if let Some(expected) = precondition.as_str()
            && expected != meta_str(&stored, field)
        {
            return Err(conflict(target, name));
        }
    }
    if dry_run {
        return Ok((200, stored));
    }
    let deleted = store.erase(&shared.changes, &target.kind, namespace, name).expect("present");
    Ok((200, deleted))
}

pub fn delete_collection(
    shared: &Shared,
    target: &Target,
    query: &HashMap<String, String>,
    dry_run: bool,
) -> ApiResult {
    let filter = Filter::from_query(target, query)?;
    let mut store = shared.store.lock().unwrap();
    let mut deleted = store.select(&filter);
    if !dry_run {
        deleted = deleted
            .iter()
            .filter_map(|obj| {
                store.erase(
                    &shared.changes,
                    &target.kind,
                    &meta_str(obj, "namespace"),
                    &meta_str(obj, "name"),
                )
            })
            .collect();
    }
    Ok((
        200,
        json!({
            "apiVersion": target.kind.api_version(),
            "kind": format!("{}List", target.kind.kind),
            "metadata": {"resourceVersion": store.rv.to_string()},
            "items": deleted,
        }),
    ))
}
