//! The test file of `gpu-policy test` (docs/policy.md, "The test file"),
//! read strictly by serde (unknown keys refused), with everything it names
//! loaded; what is wrong is a [`TestFileError`] on one line, naming the file
//! and the field.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::admission::{Mode, UnknownMode};
use crate::cli::args::Engine;
use crate::cli::nodes::node_products;
use crate::manifest::json_type;
use crate::manifest::{self, Document, one_line};
use crate::policy::RuleId;
use crate::settings::{Config, Settings};

pub const TEST_API_VERSION: &str = "gpu-policy.io/v1alpha1";
pub const TEST_KIND: &str = "Test";
/// How the name of a test file ends, for the folders searched.
pub const SUFFIXES: [&str; 2] = [".gpu-policy-test.yaml", ".gpu-policy-test.yml"];

/// A field of the test file that is not what the schema says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// Where, as a path: `namespace.mode`, `cases[0].patched.file`.
    pub field: String,
    pub message: String,
}

impl FieldError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

/// A test file that cannot be read or does not follow the schema.
#[derive(Debug, thiserror::Error)]
pub enum TestFileError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: invalid YAML: {message}")]
    Yaml { path: String, message: String },
    /// `context` names the document when the file holds several.
    #[error("{path}: {context}{error}")]
    Field { path: String, context: String, error: FieldError },
    #[error("{path}: no test file (*{}) in it", SUFFIXES[0])]
    NoneFound { path: String },
}

/// One test document, with what it names loaded.
pub struct Test {
    pub file: String,
    pub name: String,
    pub settings: Settings,
    pub namespace: String,
    pub mode: Mode,
    pub annotations: BTreeMap<String, String>,
    /// `nodeProducts`: the GPU products the fleet's nodes carry, which product globs expand
    /// against; sorted, each once.
    pub node_products: Vec<String>,
    /// Every object of `resources`, in order; evaluated together.
    pub resources: Vec<Document>,
    pub cases: Vec<Case>,
}

pub struct Case {
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
    pub const BOTH: Engines = Engines { webhook: true, cel: true };

    pub fn includes(self, engine: Engine) -> bool {
        match engine {
            Engine::Webhook => self.webhook,
            Engine::Cel => self.cel,
        }
    }
}

impl fmt::Display for Engines {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = [Engine::Webhook, Engine::Cel]
            .into_iter()
            .filter(|&engine| self.includes(engine))
            .map(|engine| engine.to_string())
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

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

/// What a case expects (docs/policy.md, "The test file"); `None` is not
/// checked.
#[derive(Debug, Default)]
pub struct Expectations {
    pub allowed: Option<bool>,
    pub ignored: Option<bool>,
    pub mutated: Option<bool>,
    pub violations: Option<BTreeSet<RuleId>>,
    pub changes: Option<BTreeSet<RuleId>>,
    pub messages: Option<Vec<Pattern>>,
    pub warnings: Option<Vec<Pattern>>,
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
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "NonEmpty")]
pub enum Pattern {
    Substring(String),
    Regex(Regex),
}

impl TryFrom<NonEmpty> for Pattern {
    type Error = String;

    fn try_from(NonEmpty(text): NonEmpty) -> Result<Self, String> {
        match text.strip_prefix('/').and_then(|rest| rest.strip_suffix('/')) {
            Some(expression) if !expression.is_empty() => Regex::new(expression)
                .map(Pattern::Regex)
                .map_err(|err| format!("not a regular expression: {}", one_line(&err.to_string()))),
            _ => Ok(Pattern::Substring(text)),
        }
    }
}

impl Pattern {
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

/// A string that is not blank.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "String")]
struct NonEmpty(String);

impl TryFrom<String> for NonEmpty {
    type Error = &'static str;

    fn try_from(text: String) -> Result<Self, &'static str> {
        match text.trim().is_empty() {
            true => Err("is empty"),
            false => Ok(NonEmpty(text)),
        }
    }
}

/// A rule by its name.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(try_from = "NonEmpty")]
struct RuleName(RuleId);

impl TryFrom<NonEmpty> for RuleName {
    type Error = String;

    fn try_from(NonEmpty(text): NonEmpty) -> Result<Self, String> {
        RuleId::parse(&text).map(RuleName).ok_or_else(|| {
            let known: Vec<&str> = RuleId::ALL.iter().map(|rule| rule.as_str()).collect();
            format!("unknown rule {text:?} (the rules: {})", known.join(", "))
        })
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "NonEmpty")]
struct ObjectRef {
    kind: String,
    namespace: Option<String>,
    name: String,
}

impl TryFrom<NonEmpty> for ObjectRef {
    type Error = String;

    fn try_from(NonEmpty(text): NonEmpty) -> Result<Self, String> {
        let parts: Vec<&str> = text.split('/').collect();
        let (kind, namespace, name) = match parts.as_slice() {
            [kind, name] => (*kind, None, *name),
            [kind, namespace, name] => (*kind, Some(*namespace), *name),
            _ => ("", None, ""),
        };
        let valid = |part: &str| !part.is_empty() && part.trim() == part;
        if valid(kind) && namespace.is_none_or(valid) && valid(name) {
            Ok(ObjectRef {
                kind: kind.to_owned(),
                namespace: namespace.map(str::to_owned),
                name: name.to_owned(),
            })
        } else {
            Err(format!("must be Kind/namespace/name or Kind/name, not {text:?}"))
        }
    }
}

/// `T` read only from a mapping. serde's derived structs also take a list
/// of their fields in order, which a test file never means.
struct Mapping<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Mapping<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Fields<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        deserializer.deserialize_map(Fields(std::marker::PhantomData)).map(Mapping)
    }
}

/// One test document as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TestDocument {
    api_version: NonEmpty,
    kind: NonEmpty,
    name: NonEmpty,
    config: Option<Value>,
    namespace: Option<Mapping<NamespaceDocument>>,
    node_products: Option<Vec<String>>,
    resources: Vec<Resource>,
    engines: Option<Vec<Engine>>,
    cases: Vec<Mapping<CaseDocument>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamespaceDocument {
    name: Option<NonEmpty>,
    mode: Option<NonEmpty>,
    annotations: Option<BTreeMap<String, String>>,
}

/// A path (a file or folder) relative to the test file, or an object.
enum Resource {
    Path(NonEmpty),
    Inline(Inline),
}

/// Told apart by the value's type, so that the error of the one it is
/// names its own field.
impl<'de> Deserialize<'de> for Resource {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PathOrInline;
        impl<'de> Visitor<'de> for PathOrInline {
            type Value = Resource;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a path or a mapping with inline")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Resource, E> {
                NonEmpty::try_from(text.to_owned()).map(Resource::Path).map_err(E::custom)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Resource, A::Error> {
                Inline::deserialize(MapAccessDeserializer::new(map)).map(Resource::Inline)
            }
        }
        deserializer.deserialize_any(PathOrInline)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Inline {
    inline: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseDocument {
    object: ObjectRef,
    engines: Option<Vec<Engine>>,
    allowed: Option<bool>,
    ignored: Option<bool>,
    mutated: Option<bool>,
    violations: Option<Vec<RuleName>>,
    changes: Option<Vec<RuleName>>,
    messages: Option<Vec<Pattern>>,
    warnings: Option<Vec<Pattern>>,
    patched: Option<Mapping<Patched>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Patched {
    file: Option<NonEmpty>,
    object: Option<Map<String, Value>>,
}

/// Every test of one file (a file may hold several documents), or the
/// problem of each document that has one.
pub fn load(path: &Path) -> Result<Vec<Test>, Vec<TestFileError>> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|source| vec![TestFileError::Read { path: shown.clone(), source }])?;
    let documents: Vec<Value> = serde_saphyr::from_multiple::<Value>(&text)
        .map_err(|err| {
            vec![TestFileError::Yaml { path: shown.clone(), message: one_line(&err.to_string()) }]
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
                context: if several { format!("document {}: ", index + 1) } else { String::new() },
                error,
            }),
        }
    }
    if problems.is_empty() { Ok(tests) } else { Err(problems) }
}

/// The test files at `path`: the file itself, or the files of a folder
/// (recursive, symlinked folders not followed) whose names end with one of
/// [`SUFFIXES`], sorted.
pub fn find(path: &Path) -> Result<Vec<PathBuf>, TestFileError> {
    let mut found = Vec::new();
    for entry in walkdir::WalkDir::new(path) {
        let entry = entry.map_err(|err| TestFileError::Read {
            path: err.path().unwrap_or(path).display().to_string(),
            source: err.into(),
        })?;
        if entry.depth() == 0 && !entry.file_type().is_dir() {
            return Ok(vec![path.to_path_buf()]);
        }
        let named = entry
            .file_name()
            .to_str()
            .is_some_and(|name| SUFFIXES.iter().any(|suffix| name.ends_with(suffix)));
        if named && !entry.path().is_dir() {
            found.push(entry.into_path());
        }
    }
    if found.is_empty() {
        return Err(TestFileError::NoneFound { path: path.display().to_string() });
    }
    found.sort();
    Ok(found)
}

fn parse_test(document: Value, base: &Path, file: &str) -> Result<Test, FieldError> {
    if !document.is_object() {
        let found = json_type(&document);
        return Err(FieldError::new("the document", format!("must be a mapping, not {found}")));
    }
    let document: TestDocument = serde_path_to_error::deserialize(document).map_err(|err| {
        let field = match err.path().to_string() {
            top if top == "." => "the document".to_owned(),
            field => field,
        };
        FieldError::new(field, one_line(&err.inner().to_string()))
    })?;
    for (key, wanted, NonEmpty(found)) in [
        ("apiVersion", TEST_API_VERSION, &document.api_version),
        ("kind", TEST_KIND, &document.kind),
    ] {
        if found != wanted {
            return Err(FieldError::new(key, format!("must be {wanted}, not {found:?}")));
        }
    }
    let settings = settings(document.config, base)?;
    let ns = document.namespace.map(|Mapping(ns)| ns).unwrap_or_default();
    let namespace = ns.name.map_or_else(|| "default".to_owned(), |name| name.0);
    let mode = match ns.mode {
        Some(NonEmpty(mode)) => mode
            .parse()
            .map_err(|err: UnknownMode| FieldError::new("namespace.mode", err.to_string()))?,
        None => Mode::Enforce,
    };
    let node_products = node_products(&document.node_products.unwrap_or_default())
        .map_err(|why| FieldError::new("nodeProducts", why))?;
    if document.resources.is_empty() {
        return Err(FieldError::new("resources", "is empty"));
    }
    let mut resources = Vec::new();
    for (index, resource) in document.resources.into_iter().enumerate() {
        let path = format!("resources[{index}]");
        match resource {
            Resource::Path(NonEmpty(relative)) => {
                resources.extend(read_manifests(&relative, base, &path)?);
            }
            Resource::Inline(Inline { inline }) => resources.push(Document {
                source: format!("{file} {path}.inline"),
                object: Value::Object(inline),
            }),
        }
    }
    let engines = match document.engines {
        Some(listed) => engines(&listed, "engines")?,
        None => Engines::BOTH,
    };
    if document.cases.is_empty() {
        return Err(FieldError::new("cases", "is empty"));
    }
    let cases = document
        .cases
        .into_iter()
        .enumerate()
        .map(|(index, Mapping(case))| parse_case(case, index, &namespace, engines, base))
        .collect::<Result<_, _>>()?;
    Ok(Test {
        file: file.to_owned(),
        name: document.name.0,
        settings,
        namespace,
        mode,
        annotations: ns.annotations.unwrap_or_default(),
        node_products,
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
        Some(other) => {
            Err(invalid(format!("must be a path or a mapping, not {}", json_type(&other))))
        }
    }
}

fn read_manifests(relative: &str, base: &Path, path: &str) -> Result<Vec<Document>, FieldError> {
    if relative == manifest::STDIN {
        return Err(FieldError::new(path, "a test does not read stdin"));
    }
    manifest::load(&[base.join(relative)], &mut std::io::empty())
        .map_err(|err| FieldError::new(path, err.to_string()))
}

fn engines(listed: &[Engine], path: &str) -> Result<Engines, FieldError> {
    if listed.is_empty() {
        return Err(FieldError::new(path, "is empty"));
    }
    let engines = each_once(listed.iter().copied(), path)?;
    Ok(Engines { webhook: engines.contains(&Engine::Webhook), cel: engines.contains(&Engine::Cel) })
}

/// The items listed, none of them twice.
fn each_once<T: Ord + Copy + fmt::Display>(
    listed: impl IntoIterator<Item = T>,
    path: &str,
) -> Result<BTreeSet<T>, FieldError> {
    let mut set = BTreeSet::new();
    for (index, item) in listed.into_iter().enumerate() {
        if !set.insert(item) {
            let field = format!("{path}[{index}]");
            return Err(FieldError::new(field, format!("{item} is listed twice")));
        }
    }
    Ok(set)
}

fn parse_case(
    case: CaseDocument,
    index: usize,
    namespace: &str,
    engines_of_test: Engines,
    base: &Path,
) -> Result<Case, FieldError> {
    let path = format!("cases[{index}]");
    let object = ObjectId {
        kind: case.object.kind,
        namespace: case.object.namespace.unwrap_or_else(|| namespace.to_owned()),
        name: case.object.name,
    };
    let engines = match case.engines {
        Some(listed) => engines(&listed, &format!("{path}.engines"))?,
        None => engines_of_test,
    };
    let rules = |listed: Option<Vec<RuleName>>, field: &str| {
        let path = format!("{path}.{field}");
        listed
            .map(|listed| each_once(listed.into_iter().map(|RuleName(rule)| rule), &path))
            .transpose()
    };
    let expect = Expectations {
        allowed: case.allowed,
        ignored: case.ignored,
        mutated: case.mutated,
        violations: rules(case.violations, "violations")?,
        changes: rules(case.changes, "changes")?,
        messages: case.messages,
        warnings: case.warnings,
        patched: match case.patched {
            Some(Mapping(patched)) => {
                Some(patched_object(patched, &format!("{path}.patched"), base)?)
            }
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
    Ok(Case { index, object, engines, expect })
}

fn patched_object(patched: Patched, path: &str, base: &Path) -> Result<Value, FieldError> {
    match (patched.file, patched.object) {
        (Some(NonEmpty(file)), None) => {
            let file_path = format!("{path}.file");
            let mut documents = read_manifests(&file, base, &file_path)?;
            match documents.len() {
                1 => Ok(documents.remove(0).object),
                n => Err(FieldError::new(
                    file_path,
                    format!("{file} holds {n} objects; expected one"),
                )),
            }
        }
        (None, Some(object)) => Ok(Value::Object(object)),
        _ => Err(FieldError::new(path, "give either file or object")),
    }
}

#[cfg(test)]
mod tests;
