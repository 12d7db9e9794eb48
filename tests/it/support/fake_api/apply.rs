//! Server-side apply (`PATCH` with `application/apply-patch+yaml`), as one
//! field manager sees it: the applied configuration creates the object, or
//! replaces every field of the stored one but its metadata, whose labels
//! and annotations are merged and whose bookkeeping (uid,
//! creationTimestamp, generation, resourceVersion) the store keeps.
//!
//! Like the real server it wants `fieldManager` (422 without), the body's
//! `apiVersion`, `kind` and `metadata.name` matching the URL (400), and
//! answers 201 when it created the object, 200 when it updated it. Not
//! modelled: `managedFields`, conflicts between managers (`force` is
//! recorded in the request log and otherwise ignored), list and map merge
//! strategies; a second manager's fields are overwritten.

use super::*;

/// Whether the request is a server-side apply.
pub fn is_apply(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim() == "application/apply-patch+yaml")
}

/// The applied configuration: JSON (what kube sends), else YAML.
fn parse_config(body: &[u8]) -> Result<Value, Value> {
    let invalid = |err: String| status(400, "BadRequest", format!("invalid apply patch: {err}"));
    let config: Value = match serde_json::from_slice(body) {
        Ok(config) => config,
        Err(_) => {
            let text = std::str::from_utf8(body).map_err(|err| invalid(err.to_string()))?;
            serde_saphyr::from_str(text).map_err(|err| invalid(err.to_string()))?
        }
    };
    if !config.is_object() {
        return Err(invalid("not an object".to_owned()));
    }
    Ok(config)
}

pub fn apply(
    shared: &Shared,
    target: &Target,
    query: &HashMap<String, String>,
    body: &[u8],
    dry_run: bool,
) -> ApiResult {
    if query.get("fieldManager").is_none_or(|m| m.is_empty()) {
        return Err(status(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: \
             is required for apply patch",
        ));
    }
    let config = parse_config(body)?;
    let name = target.name.as_deref().unwrap_or_default();
    let kind = &target.kind;
    if config["apiVersion"] != kind.api_version().as_str() || config["kind"] != kind.kind.as_str() {
        return Err(status(
            400,
            "BadRequest",
            format!(
                "the apply patch names {} {}, not {} {}",
                config["apiVersion"],
                config["kind"],
                kind.api_version(),
                kind.kind
            ),
        ));
    }
    if meta_str(&config, "name") != name {
        return Err(status(
            400,
            "BadRequest",
            "the name of the object does not match the name on the URL",
        ));
    }
    let given_namespace = meta_str(&config, "namespace");
    if let Some(namespace) = &target.namespace
        && !given_namespace.is_empty()
        && &given_namespace != namespace
    {
        return Err(status(
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let mut store = shared.store.lock().unwrap();
    let key = key_of(kind, target.namespace.as_deref().unwrap_or_default(), name);
    let stored = store.objects.get(&key).cloned();
    let mut object = config;
    if let Some(namespace) = &target.namespace {
        object["metadata"]["namespace"] = namespace.clone().into();
    }
    if let Some(stored) = &stored {
        for field in ["labels", "annotations"] {
            let mut merged = stored["metadata"][field].as_object().cloned().unwrap_or_default();
            if let Some(applied) = object["metadata"][field].as_object() {
                merged.extend(applied.clone());
            }
            if !merged.is_empty() {
                object["metadata"][field] = Value::Object(merged);
            }
        }
    }
    let code = if stored.is_some() { 200 } else { 201 };
    if dry_run {
        return Ok((code, object));
    }
    Ok((code, store.commit(&shared.changes, kind, object, false)))
}
