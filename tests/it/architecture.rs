//! Architecture guard, for each crate of the workspace ([`CRATES`]): its
//! rooms import only the rooms below them, in the order its `lib.rs` lists
//! them; its module graph has no cycles; and none of its files is over 800
//! lines. Between crates, Cargo holds the order: `gpu-policy-core` cannot
//! name the root crate, nor `kubernetes-cel` either of them.
//!
//! A cycle between files makes a room that cannot be read, tested or moved
//! apart: to understand one file you must understand the other. The
//! intended layering is `settings` at the bottom, `policy` above it,
//! `admission` above `policy`, and `server`/`cli` on top; an edge pointing
//! down is fine, an edge pointing back up closes a cycle.
//!
//! The graph is built by parsing every product file with `syn`, from the
//! crate's roots (`src/lib.rs` and `src/main.rs`) along `mod` declarations (`#[path]`
//! included; `#[cfg(test)]` modules and items are left out). Every path
//! naming an item of the crate (`use crate::…`, `super::…`, `self::…`,
//! groups, inline paths in code and in macro arguments, names brought in by
//! `use`) is resolved to the file that *defines* the item, following
//! re-exports (`pub use x::Item`, `pub use x::*`, renames). File A has an
//! edge to file B when A names an item defined in B; a `mod child;`
//! declaration or a `pub use` re-export alone is not an edge.
//!
//! Limits: paths inside macro bodies are found by a token scan; method calls
//! through a trait and names resolved through local variables are not seen.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use syn::visit::{self, Visit};
use syn::{Attribute, ImplItemFn, Item, ItemUse, Macro, UseTree};

const MAX_LINES: usize = 800;
const DECLARES: [&str; 7] = ["enum", "struct", "fn", "trait", "type", "const", "static"];

/// A `use`d path with its local name (`None` for a glob), as written.
type Import = (Option<String>, Vec<String>);

/// One module: a file, or an inline `mod m { … }` inside one.
#[derive(Default)]
struct Module {
    file: String,
    /// The absolute module path, `[]` for the crate root.
    path: Vec<String>,
    parent: Option<usize>,
    children: BTreeMap<String, usize>,
    defs: BTreeSet<String>,
    imports: Vec<Import>,
    /// The product items of the module, minus `mod` items.
    items: Vec<Item>,
}

#[derive(Default)]
struct Crate {
    mods: Vec<Module>,
    /// What the crate's own code calls it besides `crate`.
    names: &'static [&'static str],
}

/// A crate of the workspace: the folder of its sources, the files its
/// targets start from, and the names its code calls it by.
struct Source {
    dir: &'static str,
    roots: &'static [&'static str],
    names: &'static [&'static str],
}

const CRATES: [Source; 3] = [
    Source {
        dir: "src",
        // The binary is a crate of its own over the library (`gpu_policy::…`).
        roots: &["lib.rs", "main.rs"],
        names: &["gpu_policy"],
    },
    Source { dir: "crates/policy-core/src", roots: &["lib.rs"], names: &["gpu_policy_core"] },
    Source { dir: "crates/kubernetes-cel/src", roots: &["lib.rs"], names: &["kubernetes_cel"] },
];

/// `(from file, to file) -> names of the items that make the edge`.
type Edges = BTreeMap<(String, String), BTreeSet<String>>;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn is_test_only(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| match &a.meta {
        syn::Meta::Path(p) => p.is_ident("test"),
        syn::Meta::List(l) if l.path.is_ident("cfg") => {
            let cfg = l.tokens.to_string();
            cfg.contains("test") && !cfg.contains("not")
        }
        _ => false,
    })
}

fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Flattens a use tree into (local name or `None` for a glob, full path).
fn flatten(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<Import>) {
    let full = |prefix: &Vec<String>, ident: &syn::Ident| {
        let mut path = prefix.clone();
        if ident != "self" {
            path.push(ident.to_string());
        }
        path
    };
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) => {
            let path = full(prefix, &n.ident);
            out.push((path.last().cloned(), path));
        }
        UseTree::Rename(r) => out.push((Some(r.rename.to_string()), full(prefix, &r.ident))),
        UseTree::Glob(_) => out.push((None, prefix.clone())),
        UseTree::Group(g) => g.items.iter().for_each(|t| flatten(t, prefix, out)),
    }
}

fn use_paths(u: &ItemUse) -> Vec<Import> {
    let mut out = Vec::new();
    if u.leading_colon.is_none() {
        flatten(&u.tree, &mut Vec::new(), &mut out);
    }
    out
}

impl Crate {
    fn load(&mut self, file: &Path, parent: Option<usize>, name: &str, mod_rs: bool) -> usize {
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let dir = file.parent().unwrap();
        let child_dir = match mod_rs {
            true => dir.to_path_buf(),
            false => dir.join(file.file_stem().unwrap()),
        };
        let rel = file.strip_prefix(root()).unwrap().display().to_string();
        self.add(rel, parent, name, ast.items, &child_dir)
    }

    fn add(
        &mut self,
        file: String,
        parent: Option<usize>,
        name: &str,
        items: Vec<Item>,
        child_dir: &Path,
    ) -> usize {
        let me = self.mods.len();
        let mut path = parent.map_or(vec![], |p| self.mods[p].path.clone());
        path.extend(parent.map(|p| {
            self.mods[p].children.insert(name.to_string(), me);
            name.to_string()
        }));
        self.mods.push(Module { file: file.clone(), path, parent, ..Module::default() });
        for item in items {
            if is_test_only(item_attrs(&item)) {
                continue;
            }
            let def = match &item {
                Item::Mod(m) => {
                    let name = m.ident.to_string();
                    if let Some((_, inner)) = &m.content {
                        let sub = child_dir.join(&name);
                        self.add(file.clone(), Some(me), &name, inner.clone(), &sub);
                    } else if let Some(p) = path_attr(&m.attrs) {
                        // Relative to the declaring file's directory.
                        let dir = root().join(&file).parent().unwrap().join(p);
                        self.load(&dir, Some(me), &name, true);
                    } else {
                        let flat = child_dir.join(format!("{name}.rs"));
                        let mod_rs = !flat.exists();
                        let file = if mod_rs { child_dir.join(&name).join("mod.rs") } else { flat };
                        self.load(&file, Some(me), &name, mod_rs);
                    }
                    continue;
                }
                Item::Use(u) => {
                    self.mods[me].imports.extend(use_paths(u));
                    None
                }
                Item::Const(i) => Some(&i.ident),
                Item::Enum(i) => Some(&i.ident),
                Item::Fn(i) => Some(&i.sig.ident),
                Item::Static(i) => Some(&i.ident),
                Item::Struct(i) => Some(&i.ident),
                Item::Trait(i) => Some(&i.ident),
                Item::Type(i) => Some(&i.ident),
                Item::Union(i) => Some(&i.ident),
                Item::Macro(i) => {
                    // Items a macro declares (`pub enum RuleId` in a macro_rules).
                    let words = words(&i.mac.tokens.to_string());
                    let declared = words.windows(2).filter(|w| DECLARES.contains(&w[0].as_str()));
                    let names = declared.map(|w| w[1].clone()).filter(|n| !n.is_empty());
                    self.mods[me].defs.extend(names);
                    i.ident.as_ref()
                }
                _ => None,
            };
            if let Some(ident) = def {
                self.mods[me].defs.insert(ident.to_string());
            }
            self.mods[me].items.push(item);
        }
        me
    }

    /// Makes a path written in module `m` absolute (`[]` is the crate root),
    /// or `None` if it does not start in the crate.
    fn expand(&self, m: usize, segs: &[String], depth: usize) -> Option<Vec<String>> {
        let (first, rest) = segs.split_first()?;
        let module = &self.mods[m];
        let join = |base: Vec<String>, rest: &[String]| [base, rest.to_vec()].concat();
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            name if self.names.contains(&name) => Some(rest.to_vec()),
            "self" => Some(join(module.path.clone(), rest)),
            "super" if rest.first().is_some_and(|s| s == "super") => {
                self.expand(module.parent?, rest, depth)
            }
            "super" => Some(join(self.mods[module.parent?].path.clone(), rest)),
            _ if depth > 16 || module.defs.contains(first) => None,
            _ if module.children.contains_key(first) => Some(join(module.path.clone(), segs)),
            _ => {
                let import = module.imports.iter().find(|(n, _)| n.as_ref() == Some(first));
                if let Some((_, target)) = import {
                    return self.expand(m, target, depth + 1).map(|t| join(t, rest));
                }
                // A name a glob brings in: keep it only if it resolves.
                module.imports.iter().filter(|(n, _)| n.is_none()).find_map(|(_, target)| {
                    let abs = join(self.expand(m, target, depth + 1)?, segs);
                    self.resolve(&abs, depth + 1).map(|_| abs)
                })
            }
        }
    }

    /// The (file, name) defining the item an absolute path names; `None` for
    /// a module or a name that is not found.
    fn resolve(&self, abs: &[String], depth: usize) -> Option<(String, String)> {
        if depth > 16 {
            return None;
        }
        let mut m = 0;
        let mut i = 0;
        while let Some(&c) = abs.get(i).and_then(|s| self.mods[m].children.get(s)) {
            m = c;
            i += 1;
        }
        let name = abs.get(i)?;
        let module = &self.mods[m];
        if module.defs.contains(name) {
            return Some((module.file.clone(), name.clone()));
        }
        let rest = &abs[i + 1..];
        module.imports.iter().find_map(|(n, target)| {
            let target = self.expand(m, target, depth + 1)?;
            match n {
                Some(n) if n == name => self.resolve(&[target, rest.to_vec()].concat(), depth + 1),
                None if target != module.path => {
                    self.resolve(&[target, abs[i..].to_vec()].concat(), depth + 1)
                }
                _ => None,
            }
        })
    }
}

fn path_attr(attrs: &[Attribute]) -> Option<String> {
    let attr = attrs.iter().find(|a| a.path().is_ident("path"))?;
    match &attr.meta.require_name_value().ok()?.value {
        syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
        _ => None,
    }
}

/// The words of a token string: identifiers, `::`, and "" for anything else
/// (string literals too).
fn words(tokens: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut chars = tokens.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut w = c.to_string();
            while let Some(n) = chars.next_if(|n| n.is_alphanumeric() || *n == '_') {
                w.push(n);
            }
            words.push(w);
        } else if c == ':' && chars.next_if_eq(&':').is_some() {
            words.push("::".into());
        } else if c == '"' {
            let mut escaped = false;
            for c in chars.by_ref() {
                if c == '"' && !escaped {
                    break;
                }
                escaped = c == '\\' && !escaped;
            }
            words.push(String::new());
        } else if !c.is_whitespace() {
            words.push(String::new());
        }
    }
    words
}

/// Paths like `crate :: a :: b` in the tokens of a macro call or definition.
fn token_paths(tokens: &str) -> Vec<Vec<String>> {
    let words = words(tokens);
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let mut path = vec![words[i].clone()];
        while i + 2 < words.len() && words[i + 1] == "::" && !words[i + 2].is_empty() {
            path.push(words[i + 2].clone());
            i += 2;
        }
        if path.len() > 1 && path[0] != "::" && !path[0].is_empty() {
            out.push(path);
        }
        i += 1;
    }
    out
}

struct Uses<'a> {
    krate: &'a Crate,
    from: String,
    module: usize,
    edges: &'a mut Edges,
}

impl Uses<'_> {
    fn note(&mut self, segs: &[String]) {
        let from = &self.from;
        let abs = self.krate.expand(self.module, segs, 0);
        if let Some((to, name)) = abs.and_then(|abs| self.krate.resolve(&abs, 0))
            && &to != from
        {
            self.edges.entry((from.clone(), to)).or_default().insert(name);
        }
    }
}

impl<'ast> Visit<'ast> for Uses<'_> {
    fn visit_item(&mut self, i: &'ast Item) {
        if !is_test_only(item_attrs(i)) && !matches!(i, Item::Mod(_)) {
            visit::visit_item(self, i);
        }
    }
    fn visit_impl_item_fn(&mut self, i: &'ast ImplItemFn) {
        if !is_test_only(&i.attrs) {
            visit::visit_impl_item_fn(self, i);
        }
    }
    fn visit_attribute(&mut self, _: &'ast Attribute) {}
    fn visit_item_use(&mut self, u: &'ast ItemUse) {
        // A private `use` is a dependency; a re-export only passes one on.
        if matches!(u.vis, syn::Visibility::Inherited) {
            let imports = use_paths(u);
            imports.iter().filter(|(n, _)| n.is_some()).for_each(|(_, p)| self.note(p));
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() {
            let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            self.note(&segs);
        }
        visit::visit_path(self, p);
    }
    fn visit_macro(&mut self, m: &'ast Macro) {
        let paths = token_paths(&m.tokens.to_string());
        paths.iter().for_each(|p| self.note(p));
        visit::visit_macro(self, m);
    }
}

fn module_edges(source: &Source) -> Edges {
    let mut krate = Crate { names: source.names, ..Crate::default() };
    for file in source.roots {
        krate.load(&root().join(source.dir).join(file), None, "", true);
    }
    let mut edges = Edges::new();
    for (module, m) in krate.mods.iter().enumerate() {
        let mut uses = Uses { krate: &krate, from: m.file.clone(), module, edges: &mut edges };
        m.items.iter().for_each(|i| uses.visit_item(i));
    }
    edges.retain(|(from, to), _| from != to);
    edges
}

/// Kosaraju's strongly connected components with more than one file.
fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    type Graph<'a> = BTreeMap<&'a str, Vec<&'a str>>;
    fn dfs<'a>(v: &'a str, g: &Graph<'a>, seen: &mut BTreeSet<&'a str>, out: &mut Vec<&'a str>) {
        if seen.insert(v) {
            g.get(v).into_iter().flatten().for_each(|w| dfs(w, g, seen, out));
            out.push(v);
        }
    }
    let (mut next, mut prev) = (Graph::new(), Graph::new());
    for (from, to) in edges.keys() {
        next.entry(from.as_str()).or_default().push(to.as_str());
        prev.entry(to.as_str()).or_default().push(from.as_str());
    }
    let (mut seen, mut order) = (BTreeSet::new(), Vec::new());
    next.keys().for_each(|v| dfs(v, &next, &mut seen, &mut order));
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for v in order.into_iter().rev() {
        let mut scc = Vec::new();
        dfs(v, &prev, &mut seen, &mut scc);
        if scc.len() > 1 {
            scc.sort();
            found.push(scc.into_iter().map(String::from).collect::<Vec<_>>());
        }
    }
    found.sort();
    found
}

/// Fails while the cycles the refactoring is removing are still there (that
/// is intended: the failure lists what to move); it must pass afterwards.
#[test]
fn no_crate_has_module_cycles() {
    let mut report = String::new();
    for source in &CRATES {
        report += &cycles_report(&module_edges(source));
    }
    assert!(
        report.is_empty(),
        "the module graph has cycles; move items so that every edge points down:\n{report}"
    );
}

fn cycles_report(edges: &Edges) -> String {
    let mut report = String::new();
    for scc in cycles(edges) {
        report += &format!("\ncycle of {} files: {}\n", scc.len(), scc.join(", "));
        for ((from, to), names) in
            edges.iter().filter(|((f, t), _)| scc.contains(f) && scc.contains(t))
        {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            report += &format!("  {from} -> {to} ({})\n", names.join(", "));
        }
    }
    report
}

/// The rooms of a crate's `lib.rs` list, bottom first: each `//! - ` line
/// is one layer, naming one room or several side by side (`[`metrics`],
/// [`telemetry`]`).
fn layers(source: &Source) -> Vec<Vec<String>> {
    let lib = fs::read_to_string(root().join(source.dir).join("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|line| line.strip_prefix("//! - "))
        .map(|line| {
            let head = line.split(':').next().unwrap_or_default();
            head.split("[`")
                .skip(1)
                .filter_map(|part| part.split_once("`]").map(|(name, _)| name.to_owned()))
                .collect::<Vec<_>>()
        })
        .filter(|rooms| !rooms.is_empty())
        .collect()
}

/// The room of a file of the crate: its first component under the crate's
/// folder (`src/admission/wire.rs` is in `admission`, `src/install.rs` in
/// `install`); None for the crate roots.
fn room(source: &Source, file: &str) -> Option<String> {
    let inside =
        file.strip_prefix(source.dir).and_then(|inside| inside.strip_prefix('/')).unwrap_or(file);
    let first = inside.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_owned())
}

#[test]
fn rooms_import_only_the_rooms_listed_before_them() {
    // kubernetes-cel is one room to the rest of the workspace: it lists none.
    for source in &CRATES[..2] {
        rooms_import_only_the_rooms_listed_before_them_in(source);
    }
}

fn rooms_import_only_the_rooms_listed_before_them_in(source: &Source) {
    let layers = layers(source);
    let lib = format!("{}/lib.rs", source.dir);
    let layer_of = |room: &str| layers.iter().position(|layer| layer.iter().any(|r| r == room));
    // A list the parser no longer reads, or a graph with no edge between
    // rooms, would pass vacuously.
    assert!(layers.len() >= 5, "{lib} lists {} layers", layers.len());
    let mut between_rooms = 0;
    let mut unlisted = BTreeSet::new();
    let mut upward = Vec::new();
    for ((from, to), names) in module_edges(source) {
        let (Some(from_room), Some(to_room)) = (room(source, &from), room(source, &to)) else {
            continue;
        };
        between_rooms += usize::from(from_room != to_room);
        match (layer_of(&from_room), layer_of(&to_room)) {
            (Some(a), Some(b)) if b >= a && from_room != to_room => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                upward.push(format!("{from} -> {to} ({})", names.join(", ")));
            }
            (None, _) => {
                unlisted.insert(from_room);
            }
            (_, None) => {
                unlisted.insert(to_room);
            }
            _ => {}
        }
    }
    assert!(between_rooms > 0, "{lib}: no import between rooms was found");
    assert!(unlisted.is_empty(), "rooms missing from {lib}'s list: {unlisted:?}");
    assert!(
        upward.is_empty(),
        "imports of a room listed at or after the importer's in {lib}:\n  {}",
        upward.join("\n  ")
    );
}

#[test]
fn no_source_file_is_over_800_lines() {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let lines = fs::read_to_string(&path).unwrap().lines().count();
                if lines > MAX_LINES {
                    out.push(format!(
                        "{} ({lines} lines)",
                        path.strip_prefix(root()).unwrap().display()
                    ));
                }
            }
        }
    }
    let mut long = Vec::new();
    for source in &CRATES {
        walk(&root().join(source.dir), &mut long);
    }
    long.sort();
    assert!(
        long.is_empty(),
        "source files over {MAX_LINES} lines, split them:\n  {}",
        long.join("\n  ")
    );
}
