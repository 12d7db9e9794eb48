//! Reading Kubernetes manifests for the offline `check`: files, folders,
//! stdin; multi-document YAML, JSON, and `kind: List`.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One object found in the input.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Where it came from: a path, or `-` for stdin.
    pub source: String,
    pub object: Value,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
}

/// The path that means standard input.
pub const STDIN: &str = "-";

/// Loads every object from the given paths, in order; folders are walked
/// recursively (files ending `.yaml`, `.yml`, `.json`, sorted by name).
pub fn load(paths: &[PathBuf], stdin: &mut dyn Read) -> Result<Vec<Document>, LoadError> {
    let mut documents = Vec::new();
    for path in paths {
        if path.as_os_str() == STDIN {
            let mut text = String::new();
            stdin
                .read_to_string(&mut text)
                .map_err(|source| LoadError::Read { path: "stdin".to_owned(), source })?;
            // YAML is read as such whatever its style: flow mappings and
            // JSON documents separated by `---` are YAML too.
            documents.extend(parse(&text, STDIN, false)?);
            continue;
        }
        let metadata = std::fs::metadata(path)
            .map_err(|source| LoadError::Read { path: path.display().to_string(), source })?;
        let files = if metadata.is_dir() { manifest_files(path)? } else { vec![path.clone()] };
        for file in files {
            let shown = file.display().to_string();
            let text = std::fs::read_to_string(&file)
                .map_err(|source| LoadError::Read { path: shown.clone(), source })?;
            let json = file.extension().is_some_and(|e| e == "json");
            documents.extend(parse(&text, &shown, json)?);
        }
    }
    Ok(documents)
}

/// Symlinked folders are not followed (a link to a parent would list the
/// same manifests again and again); symlinked files are read.
fn manifest_files(folder: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let mut found = Vec::new();
    for entry in walkdir::WalkDir::new(folder) {
        let entry = entry.map_err(|err| LoadError::Read {
            path: err.path().unwrap_or(folder).display().to_string(),
            source: err.into(),
        })?;
        let path = entry.into_path();
        let manifest = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
        if manifest && !path.is_dir() {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

/// Parses one file's text: JSON, or multi-document YAML.
pub fn parse(text: &str, source: &str, json: bool) -> Result<Vec<Document>, LoadError> {
    let parse_error = |message: String| LoadError::Parse { path: source.to_owned(), message };
    let values: Vec<Value> = if json {
        let value: Value = serde_json::from_str(text).map_err(|err| {
            parse_error(format!(
                "invalid JSON at line {}, column {}: {err}",
                err.line(),
                err.column()
            ))
        })?;
        vec![value]
    } else {
        serde_saphyr::from_multiple(text)
            .map_err(|err| parse_error(format!("invalid YAML: {}", one_line(&err.to_string()))))?
    };
    let mut documents = Vec::new();
    for (index, value) in values.into_iter().enumerate() {
        flatten(value, source, index, &mut documents)?;
    }
    Ok(documents)
}

/// Splits lists (`kind: List`, `PodList`, or a JSON array) into their items; skips empty documents.
fn flatten(
    value: Value,
    source: &str,
    index: usize,
    documents: &mut Vec<Document>,
) -> Result<(), LoadError> {
    match value {
        Value::Null => Ok(()),
        Value::Array(items) => {
            for item in items {
                flatten(item, source, index, documents)?;
            }
            Ok(())
        }
        Value::Object(mut map) => {
            let is_list =
                map.get("kind").and_then(Value::as_str).is_some_and(|kind| kind.ends_with("List"))
                    && map.get("items").is_some_and(Value::is_array);
            if is_list {
                if let Some(Value::Array(items)) = map.remove("items") {
                    for item in items {
                        flatten(item, source, index, documents)?;
                    }
                }
                return Ok(());
            }
            documents.push(Document { source: source.to_owned(), object: Value::Object(map) });
            Ok(())
        }
        other => Err(LoadError::Parse {
            path: source.to_owned(),
            message: format!(
                "document {} is not a Kubernetes object (found {})",
                index + 1,
                json_type(&other)
            ),
        }),
    }
}

/// What kind of JSON value this is, for messages about a field of the
/// wrong type (`must be a list, not a string`).
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Error messages of the YAML parser span several lines (a snippet with a caret), and JSON errors
/// quote the offending value, line breaks and all; keep them on one.
pub fn one_line(message: &str) -> String {
    message
        .split(['\n', '\r', '\u{0B}', '\u{0C}', '\u{85}', '\u{2028}', '\u{2029}'])
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests;
