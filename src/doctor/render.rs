//! The outputs of `doctor`: text for people ([`text`]) and JSON for
//! scripts ([`json`], its schema in docs/operations.md, versioned by
//! [`JSON_SCHEMA_VERSION`]).

use std::fmt::Write as _;

use serde::Serialize;

use super::diagnosis::{Diagnosis, Summary};
use super::finding::{Finding, Note, count};
use crate::admission::Mode;

/// The version of the JSON output's schema: raised when a field changes
/// meaning or goes; new fields may come without it.
pub const JSON_SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Output<'d> {
    schema_version: u32,
    healthy: bool,
    summary: &'d Summary,
    findings: &'d [Finding],
    notes: &'d [Note],
}

pub fn json(diagnosis: &Diagnosis) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(&Output {
        schema_version: JSON_SCHEMA_VERSION,
        healthy: diagnosis.healthy(),
        summary: &diagnosis.summary,
        findings: &diagnosis.findings,
        notes: &diagnosis.notes,
    })
}

/// The diagnosis for people.
pub fn text(diagnosis: &Diagnosis) -> String {
    let summary = &diagnosis.summary;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "gpu-policy doctor: {}, {} with GPUs; {}",
        count(summary.nodes, "node", "nodes"),
        summary.gpu_nodes,
        match diagnosis.findings.len() {
            0 => "healthy".to_owned(),
            n => count(n, "finding", "findings"),
        }
    );
    for finding in &diagnosis.findings {
        out.push('\n');
        let _ =
            writeln!(out, "[{}] {}: {}", finding.severity.as_str(), finding.id, finding.summary);
        if !finding.subjects.is_empty() {
            let _ = writeln!(out, "  objects: {}", objects(finding));
        }
        if let Some(cause) = finding.cause {
            let _ = writeln!(out, "  cause: {cause}");
        }
        if !finding.evidence.is_empty() {
            let _ = writeln!(out, "  evidence:");
            for line in &finding.evidence {
                let _ = writeln!(out, "    - {line}");
            }
        }
        let _ = writeln!(out, "  fix: {}", finding.fix);
    }
    if !diagnosis.notes.is_empty() {
        out.push('\n');
        for note in &diagnosis.notes {
            let _ = writeln!(out, "note ({}): {}", note.kind, note.message);
        }
    }
    out.push('\n');
    let modes: Vec<String> = Mode::ALL
        .iter()
        .map(|mode| {
            let names = summary.opted_in.get(mode.as_str()).map(Vec::as_slice);
            match names {
                Some(names) if !names.is_empty() => {
                    format!("{mode} {}", super::finding::named(names))
                }
                _ => format!("{mode} none"),
            }
        })
        .collect();
    let _ = writeln!(out, "opted in: {}", modes.join("; "));
    out
}

/// `Node gpu-1, gpu-2 and 3 more`: the subjects by kind, in order.
fn objects(finding: &Finding) -> String {
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    for subject in &finding.subjects {
        match groups.iter_mut().find(|(kind, _)| *kind == subject.kind) {
            Some((_, keys)) => keys.push(subject.key()),
            None => groups.push((subject.kind, vec![subject.key()])),
        }
    }
    let mut text: Vec<String> =
        groups.into_iter().map(|(kind, keys)| format!("{kind} {}", keys.join(", "))).collect();
    if finding.more_subjects > 0 {
        text.push(format!("and {} more", finding.more_subjects));
    }
    text.join("; ")
}

#[cfg(test)]
mod tests;
