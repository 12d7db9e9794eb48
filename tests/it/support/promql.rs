//! PromQL as the chart's dashboard and alerts write it, read for the names
//! they depend on: the metrics an expression selects (with the labels it
//! matches on) and the labels it groups by; and the series names an
//! OpenMetrics exposition gives Prometheus, with their labels.
//!
//! Not a PromQL parser: a tokenizer that knows which identifiers are not
//! metric names (functions, aggregation operators, keywords, label names),
//! which is all a check of names needs.

use std::collections::{BTreeMap, BTreeSet};

/// One vector selector: `metric{label="value", ...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    pub metric: String,
    /// The label names its matchers name (`__name__` aside).
    pub labels: BTreeSet<String>,
}

/// What one expression depends on.
#[derive(Debug, Default)]
pub struct Query {
    pub selectors: Vec<Selector>,
    /// The labels of `by (...)`, `without (...)`, `on (...)`,
    /// `ignoring (...)`, `group_left (...)` and `group_right (...)`.
    pub grouping: BTreeSet<String>,
}

impl Query {
    pub fn metric_names(&self) -> BTreeSet<String> {
        self.selectors.iter().map(|s| s.metric.clone()).collect()
    }
}

/// Words followed by a list of label names in parentheses.
const LABEL_LISTS: &[&str] = &["by", "without", "on", "ignoring", "group_left", "group_right"];
/// Binary operators and modifiers spelled as words.
const KEYWORDS: &[&str] = &["and", "or", "unless", "offset", "bool"];
/// Aggregation operators, which may be followed by `by`/`without` rather
/// than by their parenthesis (`sum by (le) (...)`).
const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];

fn is_identifier_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_identifier(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

struct Tokens {
    chars: Vec<char>,
    at: usize,
}

impl Tokens {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip_whitespace(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    /// The next character after whitespace, not consumed.
    fn next_significant(&mut self) -> Option<char> {
        self.skip_whitespace();
        self.peek()
    }

    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> String {
        let start = self.at;
        while self.peek().is_some_and(&keep) {
            self.at += 1;
        }
        self.chars[start..self.at].iter().collect()
    }

    /// A quoted string (the opening quote at the cursor), unescaped
    /// enough for a metric name.
    fn string(&mut self) -> String {
        let quote = self.chars[self.at];
        self.at += 1;
        let mut text = String::new();
        while let Some(c) = self.peek() {
            self.at += 1;
            match c {
                '\\' if quote != '`' => {
                    if let Some(escaped) = self.peek() {
                        text.push(escaped);
                        self.at += 1;
                    }
                }
                c if c == quote => break,
                c => text.push(c),
            }
        }
        text
    }

    /// Past the `close` that matches the `open` at the cursor (strings
    /// inside skipped).
    fn skip_group(&mut self, open: char, close: char) {
        let mut depth = 0;
        while let Some(c) = self.peek() {
            match c {
                '"' | '\'' | '`' => {
                    self.string();
                    continue;
                }
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        self.at += 1;
                        return;
                    }
                }
                _ => {}
            }
            self.at += 1;
        }
    }

    /// The label names of a `(a, b)` list at the cursor.
    fn label_list(&mut self) -> Vec<String> {
        let mut labels = Vec::new();
        self.at += 1;
        while let Some(c) = self.next_significant() {
            match c {
                ')' => {
                    self.at += 1;
                    break;
                }
                c if is_identifier_start(c) => labels.push(self.take_while(is_identifier)),
                '"' | '\'' | '`' => labels.push(self.string()),
                _ => self.at += 1,
            }
        }
        labels
    }

    /// The matchers of a `{...}` at the cursor: the label names, and the
    /// metric name a `__name__="..."` matcher gives.
    fn matchers(&mut self) -> (BTreeSet<String>, Option<String>) {
        let mut labels = BTreeSet::new();
        let mut name = None;
        self.at += 1;
        while let Some(c) = self.next_significant() {
            match c {
                '}' => {
                    self.at += 1;
                    break;
                }
                c if is_identifier_start(c) => {
                    let label = self.take_while(is_identifier);
                    let operator = match self.next_significant() {
                        Some('=' | '!') => self.take_while(|c| matches!(c, '=' | '!' | '~')),
                        _ => String::new(),
                    };
                    let value = match self.next_significant() {
                        Some('"' | '\'' | '`') => Some(self.string()),
                        _ => None,
                    };
                    if label == "__name__" {
                        if operator == "=" {
                            name = value;
                        }
                    } else {
                        labels.insert(label);
                    }
                }
                // A quoted metric name (Prometheus 3: {"a.b"}).
                '"' | '\'' | '`' => name = Some(self.string()),
                _ => self.at += 1,
            }
        }
        (labels, name)
    }

    /// The identifier that starts at the cursor after whitespace, not
    /// consumed.
    fn peek_word(&mut self) -> String {
        self.skip_whitespace();
        let start = self.at;
        let word = self.take_while(is_identifier);
        self.at = start;
        word
    }
}

/// The selectors and grouping labels of `expr`. Grafana's variables
/// (`$namespace`, `${job}`, `$__rate_interval`) may appear where PromQL
/// has a value, a duration or a string.
pub fn parse(expr: &str) -> Query {
    let mut tokens = Tokens { chars: expr.chars().collect(), at: 0 };
    let mut query = Query::default();
    while let Some(c) = tokens.next_significant() {
        match c {
            '#' => {
                tokens.take_while(|c| c != '\n');
            }
            '"' | '\'' | '`' => {
                tokens.string();
            }
            '$' => {
                tokens.at += 1;
                if tokens.peek() == Some('{') {
                    tokens.skip_group('{', '}');
                } else {
                    tokens.take_while(is_identifier);
                }
            }
            // Ranges, subqueries: durations only.
            '[' => tokens.skip_group('[', ']'),
            '{' => {
                let (labels, name) = tokens.matchers();
                if let Some(metric) = name {
                    query.selectors.push(Selector { metric, labels });
                }
            }
            // Numbers and durations (0.99, 86400, 1e3, 0x1f, 10m).
            c if c.is_ascii_digit() || c == '.' => {
                tokens.take_while(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
            }
            c if is_identifier_start(c) => {
                let word = tokens.take_while(is_identifier);
                let lower = word.to_ascii_lowercase();
                let next = tokens.next_significant();
                if LABEL_LISTS.contains(&lower.as_str()) {
                    if next == Some('(') {
                        query.grouping.extend(tokens.label_list());
                    }
                } else if KEYWORDS.contains(&lower.as_str()) || lower == "inf" || lower == "nan" {
                    // An operator or a number.
                } else if next == Some('(') {
                    // A function or an aggregation operator.
                } else if AGGREGATIONS.contains(&lower.as_str())
                    && matches!(tokens.peek_word().as_str(), "by" | "without")
                {
                    // `sum by (le) (...)`.
                } else {
                    let (labels, name) =
                        if next == Some('{') { tokens.matchers() } else { (BTreeSet::new(), None) };
                    query.selectors.push(Selector { metric: name.unwrap_or(word), labels });
                }
            }
            _ => tokens.at += 1,
        }
    }
    query
}

/// The series names a scrape of `exposition` (OpenMetrics or Prometheus
/// text) gives Prometheus, each with the label names its samples carry. A
/// family declared by `# TYPE` gets the names Prometheus stores for its type
/// (a counter `x` as `x_total`, a histogram as `x_bucket`, `x_sum` and
/// `x_count`), whether or not it has a sample yet.
pub fn exposed_series(exposition: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut series: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in exposition.lines() {
        if let Some(declaration) = line.strip_prefix("# TYPE ") {
            let mut words = declaration.split_whitespace();
            let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                continue;
            };
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" | "gaugehistogram" => &["_bucket", "_sum", "_count"],
                "summary" => &["", "_sum", "_count"],
                "info" => &["_info"],
                _ => &[""],
            };
            for suffix in suffixes {
                let full = if name.ends_with(suffix) {
                    name.to_owned()
                } else {
                    format!("{name}{suffix}")
                };
                series.entry(full).or_default();
            }
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut tokens = Tokens { chars: line.chars().collect(), at: 0 };
        let name = tokens.take_while(is_identifier);
        let labels = if tokens.peek() == Some('{') { tokens.matchers().0 } else { BTreeSet::new() };
        series.entry(name).or_default().extend(labels);
    }
    series
}
