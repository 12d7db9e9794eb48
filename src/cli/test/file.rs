//! The test file of `gpu-policy test`: its schema (`apiVersion:
//! gpu-policy.io/v1alpha1`, `kind: Test`; docs/policy.md, "Testing a
//! configuration"), read strictly, and everything it names loaded: the
//! configuration, the resources, the expected objects. What is wrong is a
//! [`TestFileError`] on one line, naming the file and the field; nothing is
//! evaluated here.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use regex::Regex;
use serde_json::Value;

use super::fields::{FieldError, Fields, described, list, non_empty_string};
use crate::admission::Mode;
use crate::cli::args::Engine;
use crate::manifest::{self, Document, one_line};
use crate::policy::RuleId;
use crate::settings::{Config, Settings};

/// The `apiVersion` of a test document.
pub const TEST_API_VERSION: &str = "gpu-policy.io/v1alpha1";
/// The `kind` of a test document.
pub const TEST_KIND: &str = "Test";
/// How the name of a test file ends, for the folders searched.
pub const SUFFIXES: [&str; 2] = [".gpu-policy-test.yaml", ".gpu-policy-test.yml"];

/// A test file that cannot be read or does not follow the schema.
#[derive(Debug, thiserror::Error)]
pub enum TestFileError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: invalid YAML: {message}")]
    Yaml { path: String, message: String },
    /// `context` names the document when the file holds several.
    #[error("{path}: {context}{error}")]
    Field {
        path: String,
        context: String,
        error: FieldError,
    },
    #[error("{path}: no test file (*{}) in it", SUFFIXES[0])]
    NoneFound { path: String },
}

/// One test document, with what it names loaded.
pub struct Test {
    /// The test file, as found.
    pub file: String,
    pub name: String,
    pub settings: Settings,
    pub namespace: String,
    pub mode: Mode,
    pub annotations: BTreeMap<String, String>,
    /// Every object of `resources`, in order; evaluated together.
    pub resources: Vec<Document>,
    pub cases: Vec<Case>,
}

/// One case: what is expected of one object.
pub struct Case {
    /// Its place in `cases`.
    pub index: usize,
    pub object: ObjectId,
    pub engines: Engines,
    pub expect: Expectations,
}

/// The engines a case is run on (`engines:`; both by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Engines {
    pub webhook: bool,
    pub cel: bool,
}

impl Engines {
    pub const BOTH: Engines = Engines {
        webhook: true,
        cel: true,
    };

    pub fn includes(self, engine: Engine) -> bool {
        match engine {
            Engine::Webhook => self.webhook,
            Engine::Cel => self.cel,
        }
    }
}

impl fmt::Display for Engines {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = [(self.webhook, "webhook"), (self.cel, "cel")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect();
        f.write_str(&names.join(", "))
    }
}

/// An object of the resources: `Kind/namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectId {
    pub kind: String,
    pub namespace: String,
    /// `metadata.name`, else `metadata.generateName`, as `check` reports it.
    pub name: String,
}

impl ObjectId {
    /// `Kind/namespace/name`, or `Kind/name` in `namespace`.
    pub fn parse(text: &str, namespace: &str) -> Option<Self> {
        let parts: Vec<&str> = text.split('/').collect();
        let (kind, namespace, name) = match parts.as_slice() {
            [kind, name] => (*kind, namespace, *name),
            [kind, namespace, name] => (*kind, *namespace, *name),
            _ => return None,
        };
        let valid = |part: &str| !part.is_empty() && part.trim() == part;
        (valid(kind) && valid(namespace) && valid(name)).then(|| Self {
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

/// What a case expects; `None` is not checked.
#[derive(Debug, Default)]
pub struct Expectations {
    pub allowed: Option<bool>,
    pub ignored: Option<bool>,
    /// Whether the object gets a patch.
    pub mutated: Option<bool>,
    /// Exactly the rules violated.
    pub violations: Option<BTreeSet<RuleId>>,
    /// Exactly the rules that change the object (a workload: its pods).
    pub changes: Option<BTreeSet<RuleId>>,
    /// Each violation message (the denial, when it names none) matches one
    /// of these, and each of these matches one of them.
    pub messages: Option<Vec<Pattern>>,
    /// Each warning matches one of these, and each of these one of them.
    pub warnings: Option<Vec<Pattern>>,
    /// The object after the patch.
    pub patched: Option<Value>,
}

impl Expectations {
    /// The names of the expectations given, in the schema's order.
    pub fn given(&self) -> Vec<&'static str> {
        [
            ("allowed", self.allowed.is_some()),
            ("ignored", self.ignored.is_some()),
            ("mutated", self.mutated.is_some()),
            ("violations", self.violations.is_some()),
            ("changes", self.changes.is_some()),
            ("messages", self.messages.is_some()),
            ("warnings", self.warnings.is_some()),
            ("patched", self.patched.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }
}

/// A message pattern: a substring, or `/a regular expression/`.
#[derive(Debug, Clone)]
pub enum Pattern {
    Substring(String),
    Regex(Regex),
}

impl Pattern {
    fn parse(text: String, path: &str) -> Result<Self, FieldError> {
        match text
            .strip_prefix('/')
            .and_then(|rest| rest.strip_suffix('/'))
        {
            Some(expression) if !expression.is_empty() => {
                Regex::new(expression).map(Pattern::Regex).map_err(|err| {
                    FieldError::new(
                        path,
                        format!("not a regular expression: {}", one_line(&err.to_string())),
                    )
                })
            }
            _ => Ok(Pattern::Substring(text)),
        }
    }

    pub fn matches(&self, text: &str) -> bool {
        match self {
            Pattern::Substring(part) => text.contains(part.as_str()),
            Pattern::Regex(regex) => regex.is_match(text),
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Substring(part) => write!(f, "{part:?}"),
            Pattern::Regex(regex) => write!(f, "/{}/", regex.as_str()),
        }
    }
}

const TEST_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "name",
    "config",
    "namespace",
    "resources",
    "engines",
    "cases",
];
const NAMESPACE_FIELDS: &[&str] = &["name", "mode", "annotations"];
const RESOURCE_FIELDS: &[&str] = &["inline"];
const CASE_FIELDS: &[&str] = &[
    "object",
    "engines",
    "allowed",
    "ignored",
    "mutated",
    "violations",
    "changes",
    "messages",
    "warnings",
    "patched",
];
const PATCHED_FIELDS: &[&str] = &["file", "object"];

/// Every test of one file (a file may hold several documents), or the
/// problem of each document that has one.
pub fn load(path: &Path) -> Result<Vec<Test>, Vec<TestFileError>> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| {
        vec![TestFileError::Read {
            path: shown.clone(),
            source,
        }]
    })?;
    let documents: Vec<Value> = serde_saphyr::from_multiple::<Value>(&text)
        .map_err(|err| {
            vec![TestFileError::Yaml {
                path: shown.clone(),
                message: one_line(&err.to_string()),
            }]
        })?
        .into_iter()
        .filter(|document| !document.is_null())
        .collect();
    if documents.is_empty() {
        return Err(vec![TestFileError::Field {
            path: shown,
            context: String::new(),
            error: FieldError::new("the file", "holds no test"),
        }]);
    }
    let base = path.parent().unwrap_or(Path::new(""));
    let several = documents.len() > 1;
    let (mut tests, mut problems) = (Vec::new(), Vec::new());
    for (index, document) in documents.into_iter().enumerate() {
        match parse_test(document, base, &shown) {
            Ok(test) => tests.push(test),
            Err(error) => problems.push(TestFileError::Field {
                path: shown.clone(),
                context: if several {
                    format!("document {}: ", index + 1)
                } else {
                    String::new()
                },
                error,
            }),
        }
    }
    if problems.is_empty() {
        Ok(tests)
    } else {
        Err(problems)
    }
}

/// The test files at `path`: the file itself, or the files of a folder
/// (recursive, symlinked folders not followed) whose names end with one of
/// [`SUFFIXES`], sorted.
pub fn find(path: &Path) -> Result<Vec<PathBuf>, TestFileError> {
    let read_error = |dir: &Path, source| TestFileError::Read {
        path: dir.display().to_string(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(|source| read_error(path, source))?;
    if !metadata.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut found = Vec::new();
    let mut pending = vec![path.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|source| read_error(&dir, source))? {
            let entry = entry.map_err(|source| read_error(&dir, source))?;
            let file = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(file);
            } else if entry
                .file_name()
                .to_str()
                .is_some_and(|name| SUFFIXES.iter().any(|suffix| name.ends_with(suffix)))
                && !file.is_dir()
            {
                found.push(file);
            }
        }
    }
    if found.is_empty() {
        return Err(TestFileError::NoneFound {
            path: path.display().to_string(),
        });
    }
    found.sort();
    Ok(found)
}

fn parse_test(document: Value, base: &Path, file: &str) -> Result<Test, FieldError> {
    let mut fields = Fields::new(document, "", TEST_FIELDS)?;
    for (key, wanted) in [("apiVersion", TEST_API_VERSION), ("kind", TEST_KIND)] {
        let found = fields.required_string(key)?;
        if found != wanted {
            return Err(FieldError::new(
                key,
                format!("must be {wanted}, not {found:?}"),
            ));
        }
    }
    let name = fields.required_string("name")?;
    let settings = settings(fields.take("config"), base)?;
    let (namespace, mode, annotations) = match fields.take("namespace") {
        Some(value) => namespace(value)?,
        None => ("default".to_owned(), Mode::Enforce, BTreeMap::new()),
    };
    let resources = resources(fields.required("resources")?, base, file)?;
    let engines = match fields.list("engines")? {
        Some(items) => engines(items, "engines")?,
        None => Engines::BOTH,
    };
    let items = list(fields.required("cases")?, "cases")?;
    if items.is_empty() {
        return Err(FieldError::new("cases", "is empty"));
    }
    let cases = items
        .into_iter()
        .enumerate()
        .map(|(index, (path, value))| parse_case(value, &path, index, &namespace, engines, base))
        .collect::<Result<_, _>>()?;
    Ok(Test {
        file: file.to_owned(),
        name,
        settings,
        namespace,
        mode,
        annotations,
        resources,
        cases,
    })
}

/// `config:` a path relative to the test file, or the configuration
/// itself; the defaults without it.
fn settings(value: Option<Value>, base: &Path) -> Result<Settings, FieldError> {
    let invalid = |message: String| FieldError::new("config", message);
    match value {
        None => Ok(Settings::default()),
        Some(Value::String(path)) if path.trim().is_empty() => Err(invalid("is empty".into())),
        Some(Value::String(path)) => {
            Settings::load(&base.join(path)).map_err(|err| invalid(err.to_string()))
        }
        Some(map @ Value::Object(_)) => {
            let config: Config =
                serde_json::from_value(map).map_err(|err| invalid(one_line(&err.to_string())))?;
            Settings::from_config(config).map_err(|err| invalid(err.to_string()))
        }
        Some(other) => Err(invalid(format!(
            "must be a path or a mapping, not {}",
            described(&other)
        ))),
    }
}

fn namespace(value: Value) -> Result<(String, Mode, BTreeMap<String, String>), FieldError> {
    let mut fields = Fields::new(value, "namespace", NAMESPACE_FIELDS)?;
    let name = fields
        .string("name")?
        .unwrap_or_else(|| "default".to_owned());
    let mode = match fields.string("mode")? {
        None => Mode::Enforce,
        Some(text) => text.parse().map_err(|err: crate::admission::UnknownMode| {
            FieldError::new(fields.path_of("mode"), err.to_string())
        })?,
    };
    let mut annotations = BTreeMap::new();
    if let Some(value) = fields.take("annotations") {
        let path = fields.path_of("annotations");
        let Value::Object(map) = value else {
            return Err(FieldError::new(
                path,
                format!("must be a mapping, not {}", described(&value)),
            ));
        };
        for (key, value) in map {
            let text = match value {
                Value::String(text) => text,
                other => {
                    return Err(FieldError::new(
                        format!("{path}.{key}"),
                        format!("must be a string (quote it), not {}", described(&other)),
                    ));
                }
            };
            annotations.insert(key, text);
        }
    }
    Ok((name, mode, annotations))
}

/// `resources:` paths (files or folders) relative to the test file, and
/// `inline:` objects.
fn resources(value: Value, base: &Path, file: &str) -> Result<Vec<Document>, FieldError> {
    let items = list(value, "resources")?;
    if items.is_empty() {
        return Err(FieldError::new("resources", "is empty"));
    }
    let mut documents = Vec::new();
    for (path, value) in items {
        match value {
            Value::String(_) => {
                let relative = non_empty_string(value, &path)?;
                documents.extend(read_manifests(&relative, base, &path)?);
            }
            value @ Value::Object(_) => {
                let mut fields = Fields::new(value, &path, RESOURCE_FIELDS)?;
                let inline_path = fields.path_of("inline");
                let object = fields.required("inline")?;
                if !object.is_object() {
                    return Err(FieldError::new(
                        inline_path,
                        format!("must be a Kubernetes object, not {}", described(&object)),
                    ));
                }
                documents.push(Document {
                    source: format!("{file} {inline_path}"),
                    object,
                });
            }
            other => {
                return Err(FieldError::new(
                    path,
                    format!(
                        "must be a path or a mapping with inline, not {}",
                        described(&other)
                    ),
                ));
            }
        }
    }
    Ok(documents)
}

/// The objects of a file or folder named relative to the test file.
fn read_manifests(relative: &str, base: &Path, path: &str) -> Result<Vec<Document>, FieldError> {
    if relative == manifest::STDIN {
        return Err(FieldError::new(path, "a test does not read stdin"));
    }
    manifest::load(&[base.join(relative)], &mut std::io::empty())
        .map_err(|err| FieldError::new(path, err.to_string()))
}

fn engines(items: Vec<(String, Value)>, path: &str) -> Result<Engines, FieldError> {
    if items.is_empty() {
        return Err(FieldError::new(path, "is empty"));
    }
    let mut engines = Engines {
        webhook: false,
        cel: false,
    };
    for (path, value) in items {
        let text = non_empty_string(value, &path)?;
        let slot = match Engine::from_str(&text, false) {
            Ok(Engine::Webhook) => &mut engines.webhook,
            Ok(Engine::Cel) => &mut engines.cel,
            Err(_) => {
                return Err(FieldError::new(
                    path,
                    format!("unknown engine {text:?} (expected webhook or cel)"),
                ));
            }
        };
        if *slot {
            return Err(FieldError::new(path, format!("{text} is listed twice")));
        }
        *slot = true;
    }
    Ok(engines)
}

fn parse_case(
    value: Value,
    path: &str,
    index: usize,
    namespace: &str,
    engines_of_test: Engines,
    base: &Path,
) -> Result<Case, FieldError> {
    let mut fields = Fields::new(value, path, CASE_FIELDS)?;
    let text = fields.required_string("object")?;
    let object = ObjectId::parse(&text, namespace).ok_or_else(|| {
        FieldError::new(
            fields.path_of("object"),
            format!("must be Kind/namespace/name or Kind/name, not {text:?}"),
        )
    })?;
    let engines = match fields.list("engines")? {
        Some(items) => engines(items, &fields.path_of("engines"))?,
        None => engines_of_test,
    };
    let rules = |items: Option<Vec<(String, Value)>>| items.map(rule_set).transpose();
    let patterns = |items: Option<Vec<(String, Value)>>| items.map(pattern_list).transpose();
    let expect = Expectations {
        allowed: fields.boolean("allowed")?,
        ignored: fields.boolean("ignored")?,
        mutated: fields.boolean("mutated")?,
        violations: rules(fields.list("violations")?)?,
        changes: rules(fields.list("changes")?)?,
        messages: patterns(fields.list("messages")?)?,
        warnings: patterns(fields.list("warnings")?)?,
        patched: match fields.take("patched") {
            Some(value) => Some(patched(value, &fields.path_of("patched"), base)?),
            None => None,
        },
    };
    if expect.given().is_empty() {
        return Err(FieldError::new(
            path,
            "expects nothing: give at least one of allowed, ignored, mutated, violations, \
             changes, messages, warnings, patched",
        ));
    }
    Ok(Case {
        index,
        object,
        engines,
        expect,
    })
}

fn rule_set(items: Vec<(String, Value)>) -> Result<BTreeSet<RuleId>, FieldError> {
    let mut rules = BTreeSet::new();
    for (path, value) in items {
        let text = non_empty_string(value, &path)?;
        let Some(rule) = RuleId::parse(&text) else {
            let known: Vec<&str> = RuleId::ALL.iter().map(|rule| rule.as_str()).collect();
            return Err(FieldError::new(
                path,
                format!("unknown rule {text:?} (the rules: {})", known.join(", ")),
            ));
        };
        if !rules.insert(rule) {
            return Err(FieldError::new(path, format!("{rule} is listed twice")));
        }
    }
    Ok(rules)
}

fn pattern_list(items: Vec<(String, Value)>) -> Result<Vec<Pattern>, FieldError> {
    items
        .into_iter()
        .map(|(path, value)| Pattern::parse(non_empty_string(value, &path)?, &path))
        .collect()
}

/// `patched:` `{file: PATH}` (one object, relative to the test file) or
/// `{object: {...}}`.
fn patched(value: Value, path: &str, base: &Path) -> Result<Value, FieldError> {
    let mut fields = Fields::new(value, path, PATCHED_FIELDS)?;
    let file = fields.string("file")?;
    let object = fields.take("object");
    match (file, object) {
        (Some(file), None) => {
            let file_path = fields.path_of("file");
            let mut documents = read_manifests(&file, base, &file_path)?;
            match documents.len() {
                1 => Ok(documents.remove(0).object),
                n => Err(FieldError::new(
                    file_path,
                    format!("{file} holds {n} objects; expected one"),
                )),
            }
        }
        (None, Some(object @ Value::Object(_))) => Ok(object),
        (None, Some(other)) => Err(FieldError::new(
            fields.path_of("object"),
            format!("must be a Kubernetes object, not {}", described(&other)),
        )),
        _ => Err(FieldError::new(path, "give either file or object")),
    }
}

#[cfg(test)]
mod tests;
