//! The layering rules of `ARCHITECTURE.md`, checked on the source: module
//! imports form a DAG, `ring` imports nothing of the layers above it,
//! `session` nothing of the async layer, and only `ring` and `session` (and
//! the shim itself) import the `sync` shim: the layers whose races the loom
//! models check (the async layer reaches its atomics through the session
//! layer's pacing gates). Comment lines are skipped: a doc may name an upper
//! layer, code may not use it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Module name of a source file: `ring/cursor.rs` → `ring::cursor`,
/// `ring/mod.rs` → `ring`.
fn module(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).filter(|p| *p != "mod" && *p != "lib").collect();
    parts.join("::")
}

/// The modules a file's code names: `crate::a` (its layer) and
/// `super::b` (a sibling) paths. `super` of the file module `a::b` is `a`;
/// of a folder module `a` (its `mod.rs`) it is the crate root.
fn imports(module: &str, text: &str) -> BTreeSet<String> {
    let mut sup: Vec<&str> = module.split("::").filter(|p| !p.is_empty()).collect();
    sup.pop();
    let mut out = BTreeSet::new();
    for line in text.lines().map(str::trim_start).filter(|l| !l.starts_with("//")) {
        for (prefix, base) in [("crate::", &[][..]), ("super::", &sup[..])] {
            let mut rest = line;
            while let Some(i) = rest.find(prefix) {
                rest = &rest[i + prefix.len()..];
                let seg: String =
                    rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if seg.starts_with(|c: char| c.is_ascii_lowercase()) {
                    let mut path: Vec<&str> = base.to_vec();
                    path.push(&seg);
                    out.insert(path.join("::"));
                }
            }
        }
    }
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut g = BTreeMap::new();
    for f in files {
        let m = module(&src, &f);
        let text = fs::read_to_string(&f).unwrap();
        g.insert(m.clone(), imports(&m, &text).into_iter().filter(|d| *d != m).collect());
    }
    g
}

fn layer(m: &str) -> &str {
    m.split("::").next().unwrap_or("")
}

#[test]
fn layers_import_downward_only() {
    let g = graph();
    assert!(g.len() > 20, "found only {} modules: {:?}", g.len(), g.keys());
    for (m, deps) in &g {
        for d in deps {
            let (from, to) = (layer(m), layer(d));
            let forbidden = match from {
                "ring" => ["session", "subscription"].contains(&to),
                "session" => to == "subscription",
                _ => false,
            };
            assert!(!forbidden, "{m} imports {d}: the {from} layer must not use the {to} layer");
            if to == "sync" {
                assert!(
                    ["ring", "session", "sync"].contains(&from),
                    "{m} imports the sync shim; only ring and session may"
                );
            }
        }
    }
}

#[test]
fn module_imports_form_a_dag() {
    let g = graph();
    // Depth-first search for a cycle among the modules (parents excluded:
    // a parent's `mod` lines are not imports).
    fn visit<'a>(
        m: &'a str,
        g: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, u8>,
        stack: &mut Vec<&'a str>,
    ) {
        match state.get(m) {
            Some(2) => return,
            Some(1) => panic!("import cycle: {} -> {m}", stack.join(" -> ")),
            _ => {}
        }
        state.insert(m, 1);
        stack.push(m);
        for d in g.get(m).into_iter().flatten() {
            if g.contains_key(d.as_str()) && !m.starts_with(&format!("{d}::")) {
                visit(d, g, state, stack);
            }
        }
        stack.pop();
        state.insert(m, 2);
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        visit(m, &g, &mut state, &mut Vec::new());
    }
}
