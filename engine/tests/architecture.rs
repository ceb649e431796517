//! The layering rules of `ARCHITECTURE.md`, checked on the source: module
//! imports form a DAG, `ring` imports nothing of the layers above it,
//! `session` nothing of the async layer, and only `ring` and `session` (and
//! the shim itself) import the `sync` shim: the layers whose races the loom
//! models check (the async layer reaches its atomics through the session
//! layer's pacing gates); and no file is over 700 lines. Imports are read by the shared checker
//! (`support/layering.rs`), grouped `use crate::{a, b}` ones included;
//! comments are skipped: a doc may name an upper layer, code may not use it.

#[path = "support/layering.rs"]
mod layering;

use layering::{assert_caught, top, Graph};
use std::path::Path;

fn graph() -> Graph {
    Graph::of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

/// What breaks the engine's rules.
fn violations(g: &Graph) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(c) = g.cycle() {
        v.push(format!("import cycle: {}", c.join(" -> ")));
    }
    // A reader can hold each file (ARCHITECTURE.md).
    v.extend(g.long_files(700).into_iter().map(|f| format!("{f} is over 700 lines")));
    for (m, module) in &g.modules {
        for d in &module.imports {
            let (from, to) = (top(m), top(d));
            let forbidden = match from {
                "ring" => ["session", "subscription"].contains(&to),
                "session" => to == "subscription",
                _ => false,
            };
            if forbidden {
                v.push(format!("{m} imports {d}: the {from} layer must not use the {to} layer"));
            }
            if to == "sync" && !["ring", "session", "sync"].contains(&from) {
                v.push(format!("{m} imports the sync shim; only ring and session may"));
            }
        }
    }
    v
}

#[test]
fn layers_import_downward_only() {
    let g = graph();
    assert!(g.modules.len() > 20, "found only {} modules: {:?}", g.modules.len(), g.modules.keys());
    let v = violations(&g);
    assert!(v.is_empty(), "layering violations:\n{}", v.join("\n"));
}

#[test]
fn module_imports_form_a_dag() {
    if let Some(c) = graph().cycle() {
        panic!("import cycle: {}", c.join(" -> "));
    }
}

/// Each rule fails on a violation injected into the real graph, grouped
/// imports included.
#[test]
fn each_rule_catches_an_injected_violation() {
    let g = graph();
    let text = |m: &str| g.modules[m].code.clone();
    let caught = |module: &str, injected: String, expect: &str| {
        assert_caught(&g, &violations, module, injected, expect)
    };
    caught("ring::gap", format!("{}{}", text("ring::gap"), "\n".repeat(700)), "over 700 lines");
    caught(
        "ring::gap",
        format!("{}\nuse crate::{{session::Hub, ring::batch}};\n", text("ring::gap")),
        "the ring layer must not use the session layer",
    );
    caught(
        "session::table",
        format!("{}\nuse crate::{{\n    subscription::Subscription,\n}};\n", text("session::table")),
        "the session layer must not use the subscription layer",
    );
    caught(
        "subscription",
        format!("{}\nuse crate::sync::Arc;\n", text("subscription")),
        "imports the sync shim",
    );
    caught("ring::gap", format!("{}\nuse super::snapshot::Pinned;\n", text("ring::gap")), "import cycle");
}
