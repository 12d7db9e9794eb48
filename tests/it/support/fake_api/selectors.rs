//! Label and field selectors.

use super::*;

#[derive(Clone, Debug)]
pub enum LabelRequirement {
    Exists(String),
    NotExists(String),
    Equal(String, String),
    NotEqual(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

#[derive(Clone, Debug)]
pub struct FieldRequirement {
    /// Dotted path, e.g. `metadata.name` or `spec.nodeName`.
    pub path: String,
    pub value: String,
    pub equal: bool,
}

#[derive(Clone, Debug)]
pub struct Filter {
    pub kind: KindInfo,
    pub namespace: Option<String>,
    pub labels: Vec<LabelRequirement>,
    pub fields: Vec<FieldRequirement>,
}

impl Filter {
    pub fn all(kind: KindInfo) -> Self {
        Self { kind, namespace: None, labels: Vec::new(), fields: Vec::new() }
    }

    pub fn from_query(target: &Target, query: &HashMap<String, String>) -> Result<Self, Value> {
        let labels = parse_label_selector(
            query.get("labelSelector").map(String::as_str).unwrap_or_default(),
        )
        .map_err(|err| status(400, "BadRequest", format!("unable to parse requirement: {err}")))?;
        let fields = parse_field_selector(
            query.get("fieldSelector").map(String::as_str).unwrap_or_default(),
        )
        .map_err(|err| status(400, "BadRequest", format!("invalid field selector: {err}")))?;
        Ok(Self { kind: target.kind.clone(), namespace: target.namespace.clone(), labels, fields })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        if let Some(namespace) = &self.namespace
            && &meta_str(obj, "namespace") != namespace
        {
            return false;
        }
        let labels = obj["metadata"]["labels"].as_object();
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        let labels_match = self.labels.iter().all(|req| match req {
            LabelRequirement::Exists(k) => label(k).is_some(),
            LabelRequirement::NotExists(k) => label(k).is_none(),
            LabelRequirement::Equal(k, v) => label(k) == Some(v.as_str()),
            LabelRequirement::NotEqual(k, v) => label(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
        });
        labels_match
            && self.fields.iter().all(|req| {
                let pointer = format!("/{}", req.path.replace('.', "/"));
                let actual = match obj.pointer(&pointer) {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                };
                (actual == req.value) == req.equal
            })
    }
}

/// Splits at commas outside parentheses.
pub fn split_top_level(selector: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&selector[start..]);
    parts
}

pub fn parse_label_selector(selector: &str) -> Result<Vec<LabelRequirement>, String> {
    let mut requirements = Vec::new();
    for part in split_top_level(selector) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let requirement = if let Some(key) = part.strip_prefix('!') {
            LabelRequirement::NotExists(key.trim().to_owned())
        } else if let Some((k, v)) = part.split_once("!=") {
            LabelRequirement::NotEqual(k.trim().to_owned(), v.trim().to_owned())
        } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            LabelRequirement::Equal(k.trim().to_owned(), v.trim().to_owned())
        } else if let Some(open) = part.find('(') {
            let close = part
                .rfind(')')
                .filter(|&c| c > open)
                .ok_or_else(|| format!("{part:?}: missing )"))?;
            let values: Vec<String> = part[open + 1..close]
                .split(',')
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .collect();
            match part[..open].split_whitespace().collect::<Vec<_>>().as_slice() {
                [key, "in"] => LabelRequirement::In((*key).to_owned(), values),
                [key, "notin"] => LabelRequirement::NotIn((*key).to_owned(), values),
                _ => return Err(format!("{part:?}: unknown operator")),
            }
        } else if part.contains(|c: char| c.is_whitespace() || c == '<' || c == '>') {
            return Err(format!("{part:?}: unsupported requirement"));
        } else {
            LabelRequirement::Exists(part.to_owned())
        };
        requirements.push(requirement);
    }
    Ok(requirements)
}

pub fn parse_field_selector(selector: &str) -> Result<Vec<FieldRequirement>, String> {
    let mut requirements = Vec::new();
    for part in selector.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (path, value, equal) = if let Some((p, v)) = part.split_once("!=") {
            (p, v, false)
        } else if let Some((p, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            (p, v, true)
        } else {
            return Err(format!("{part:?}: expected field=value or field!=value"));
        };
        requirements.push(FieldRequirement {
            path: path.trim().to_owned(),
            value: value.trim().to_owned(),
            equal,
        });
    }
    Ok(requirements)
}
