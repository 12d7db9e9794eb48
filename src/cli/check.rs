//! `gpu-policy check`: the webhook's decisions, offline, for CI pipelines.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use serde_json::Value;

use super::nodes::{KnownNodes, node_products};
use super::{CheckArgs, CheckOutput, Engine};
use crate::admission::Mode;
use crate::admission::checker::{Checker, ObjectReport, mutated};
use crate::admission::images::{self, ResolvedImages, needs_of, offline_resolver};
use crate::admission_policy::engine::PolicyEngine;
use crate::cluster::lean_node_of_manifest;
use crate::manifest;
use crate::policy::ImageFacts;
use crate::policy::cluster::ClusterSnapshot;
use crate::settings::Settings;

/// `--nodes FILE`: the Nodes read through the manifest reader of `-f`
/// (YAML or JSON, Lists split), each kept as the webhook's cache keeps it.
fn read_nodes(args: &CheckArgs, settings: &Settings) -> anyhow::Result<Option<ClusterSnapshot>> {
    let Some(path) = &args.nodes else {
        return Ok(None);
    };
    let stdin = std::path::Path::new(manifest::STDIN);
    if path == stdin && args.files.iter().any(|file| file == stdin) {
        bail!("--nodes and -f cannot both read stdin (-)");
    }
    let documents = manifest::load(std::slice::from_ref(path), &mut std::io::stdin().lock())
        .context("--nodes")?;
    let mut snapshot = ClusterSnapshot::default();
    for (index, document) in documents.iter().enumerate() {
        let (name, node) = lean_node_of_manifest(&document.object, settings)
            .map_err(|why| anyhow!("--nodes {}: object {}: {why}", document.source, index + 1))?;
        snapshot.nodes.insert(name, node);
    }
    Ok(Some(snapshot))
}

/// `--old PATH`: the pods before the update, read as -f is.
fn read_old(args: &CheckArgs) -> anyhow::Result<Vec<manifest::Document>> {
    if args.old.is_empty() {
        return Ok(Vec::new());
    }
    let stdin = std::path::Path::new(manifest::STDIN);
    if args.old.iter().any(|path| path == stdin) && args.files.iter().any(|file| file == stdin) {
        bail!("--old and -f cannot both read stdin (-)");
    }
    manifest::load(&args.old, &mut std::io::stdin().lock()).context("--old")
}

/// `--resolve-images`: each object's GPU images looked up in their
/// registries, within the configured timeout per object. An image without
/// an answer is left to the table, said on stderr (and in the warnings).
fn resolve_images(
    args: &CheckArgs,
    checker: &Checker<'_>,
    objects: &[&Value],
    settings: &Settings,
) -> anyhow::Result<Vec<Option<ResolvedImages>>> {
    let mut config = settings.config().image_resolution.clone();
    if let Some(path) = &args.registry_credentials {
        config.credentials_file = Some(path.clone());
    }
    let budget = settings.image_timeout();
    let wanted = checker.images(objects);
    if wanted.iter().all(Option::is_none) {
        return Ok(Vec::new());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the registry client")?;
    runtime.block_on(async {
        let resolver = offline_resolver(&config)?;
        let mut resolved = Vec::with_capacity(wanted.len());
        for entry in wanted {
            let Some(entry) = entry else {
                resolved.push(None);
                continue;
            };
            let (facts, details) =
                images::resolve(&resolver, &entry, budget, |facts| needs_of(facts)).await;
            for detail in details {
                eprintln!("gpu-policy: {detail}; the image table applies");
            }
            resolved.push(Some(facts));
        }
        Ok(resolved)
    })
}

pub fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    if args.kube_version.is_some() && args.engine != Engine::Cel {
        bail!("--kube-version chooses the admission policies: it needs --engine cel");
    }
    let settings = super::args::settings_of(args.config.as_ref())?;
    let products =
        node_products(&args.node_products).map_err(|why| anyhow!("--node-products: {why}"))?;
    let nodes = KnownNodes::of(read_nodes(args, &settings)?, products);
    let old_documents = read_old(args)?;
    let mut documents = manifest::load(&args.files, &mut std::io::stdin().lock())?;
    // `gpu-policy test` files sit beside the manifests they test (examples/).
    documents.retain(|doc| !super::test::is_test_file(&doc.object));
    let annotations: BTreeMap<String, String> =
        args.namespace_annotations.iter().cloned().collect();
    let mode = Mode::from(args.mode);
    // Evaluated together: pods resolve their DRA claims from those beside them.
    let objects: Vec<&Value> = documents.iter().map(|doc| &doc.object).collect();
    let old_objects: Vec<&Value> = old_documents.iter().map(|doc| &doc.object).collect();
    let mut checker = Checker::new(&settings, mode, &args.namespace)
        .with_annotations(&annotations)
        .with_input(&objects)
        .with_old(&old_objects);
    if let Some(nodes) = &nodes {
        checker = checker.with_nodes(nodes);
    }
    let resolved = if args.resolve_images {
        resolve_images(args, &checker, &objects, &settings)?
    } else {
        Vec::new()
    };
    let images: Vec<Option<&dyn ImageFacts>> =
        resolved.iter().map(|r| r.as_ref().map(|r| r as &dyn ImageFacts)).collect();
    let reports: Vec<ObjectReport> = match args.engine {
        Engine::Webhook => objects
            .iter()
            .enumerate()
            .map(|(index, object)| {
                checker.check_resolved(object, images.get(index).copied().flatten())
            })
            .collect(),
        Engine::Cel => {
            let release = args.kube_version.unwrap_or_default();
            let engine = PolicyEngine::for_release(&settings, release)
                .context("internal error: a generated policy")?;
            objects
                .iter()
                .map(|object| {
                    let old = checker.old_of(object);
                    engine.report(object, old, &args.namespace, mode, &annotations)
                })
                .collect()
        }
    };
    let reports: Vec<(ObjectReport, &manifest::Document)> =
        reports.into_iter().zip(&documents).collect();

    let text = match args.output {
        CheckOutput::Json => {
            let array: Vec<&ObjectReport> = reports.iter().map(|(r, _)| r).collect();
            format!("{}\n", serde_json::to_string_pretty(&array)?)
        }
        CheckOutput::Yaml => {
            let mut objects: Vec<Value> = Vec::with_capacity(reports.len());
            for (report, doc) in &reports {
                let object = mutated(&doc.object, report).with_context(|| {
                    format!("internal error: the patch for {} does not apply", doc.source)
                })?;
                objects.push(object);
            }
            serde_saphyr::to_string_multiple(&objects)?
        }
        CheckOutput::Text => render_text(&reports, &format!("{mode} mode")),
    };
    super::args::print(&text)?;
    let denied = reports.iter().any(|(report, _)| !report.allowed);
    Ok(super::args::exit_status(denied))
}

/// One block per object: decision first, then violations, changes,
/// warnings; a summary line at the end. In colour on a terminal, unless
/// `NO_COLOR` is set.
pub fn render_text(reports: &[(ObjectReport, &manifest::Document)], context: &str) -> String {
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let paint = |code: &str, text: &str| match colour {
        true => format!("\x1b[{code}m{text}\x1b[0m"),
        false => text.to_owned(),
    };
    let mut text = String::new();
    let (mut allowed, mut denied, mut ignored) = (0, 0, 0);
    for (report, doc) in reports {
        let decision = if report.ignored {
            ignored += 1;
            paint("2", "ignored")
        } else if !report.allowed {
            denied += 1;
            paint("1;31", "DENIED")
        } else {
            allowed += 1;
            let mutated = if report.patch.is_empty() { "" } else { ", mutated" };
            paint("32", &format!("allowed{mutated}"))
        };
        let name = if report.name.is_empty() { "(unnamed)" } else { &report.name };
        let kind = if report.kind.is_empty() { "(no kind)" } else { &report.kind };
        text.push_str(&format!(
            "{kind} {}/{name}: {decision}  ({})\n",
            report.namespace, doc.source
        ));
        if report.ignored {
            continue;
        }
        if let Some(denial) = report.denial.as_deref()
            && report.violations.is_empty()
        {
            text.push_str(&format!("  {} {denial}\n", paint("31", "error     ")));
        }
        for violation in &report.violations {
            text.push_str(&format!(
                "  {} [{}] {}\n",
                paint("31", "violation "),
                violation.rule,
                violation.message
            ));
        }
        // A workload's changes are made to the pods it creates; a pod's and a claim's to itself.
        let changed_itself = report.kind == "Pod" || report.kind == "ResourceClaim";
        let change_label = if changed_itself { "change    " } else { "pod change" };
        for (rule, summary) in &report.changes {
            text.push_str(&format!("  {} [{rule}] {summary}\n", paint("36", change_label)));
        }
        for warning in &report.warnings_in_full {
            text.push_str(&format!("  {} {warning}\n", paint("33", "warning   ")));
        }
    }
    text.push_str(&format!(
        "{} objects ({context}): {allowed} allowed, {denied} denied, {ignored} ignored\n",
        reports.len()
    ));
    text
}
