//! The server's layering (`ARCHITECTURE.md`, "Server modules"), checked on
//! its source: each top-level folder of `src/` is a layer with a rank, and
//! a module imports only its own layer and lower ranks; no import cycle;
//! `axum` only in the HTTP and operator layers (and the public builder,
//! `lib.rs` and `serve.rs`); `gapless_redis` only in the backend (and the
//! builder's `store`); the composition root (`app.rs`) named only by the
//! layers above it; no file over 700 lines, no function over 100. Each
//! rule is also shown failing on a violation injected into the real graph.

#[path = "../../engine/tests/support/layering.rs"]
mod layering;

use layering::{assert_caught, standard_violations, Graph};
use std::path::Path;

/// Each layer's rank: a module may import its own layer and lower ranks.
fn rank(layer: &str) -> u32 {
    match layer {
        "vocab" => 0,
        "telemetry" => 1,
        "backend" => 2,
        "session" => 3,
        "tasks" => 4,
        "sessionless" => 5,
        "host" => 6,
        "protocol" => 7,
        "app" => 8,
        "operator" => 9,
        "http" => 10,
        "serve" => 11,
        "lib" => 12,
        other => panic!("{other} is a layer ARCHITECTURE.md does not rank: give it a rank"),
    }
}

/// Where `axum` may be named.
const AXUM: [&str; 4] = ["http", "operator", "lib", "serve"];
/// Where `gapless_redis` may be named.
const REDIS: [&str; 2] = ["backend", "lib"];
/// The layers above the composition root.
const ABOVE_ROOT: [&str; 4] = ["http", "operator", "lib", "serve"];

fn graph() -> Graph {
    let g = Graph::of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(g.modules.len() > 40, "found only {} modules: {:?}", g.modules.len(), g.modules.keys());
    g
}

/// Every rule, as the list of what breaks it.
fn violations(g: &Graph) -> Vec<String> {
    let mut v = standard_violations(g, rank, 700, 100);
    v.extend(g.names_outside("axum::", &AXUM).into_iter().map(|m| format!("{m} names axum")));
    v.extend(
        g.names_outside("gapless_redis::", &REDIS).into_iter().map(|m| format!("{m} names gapless_redis")),
    );
    v.extend(
        g.importers_outside("app", &ABOVE_ROOT)
            .into_iter()
            .map(|m| format!("{m} names the composition root")),
    );
    v
}

#[test]
fn the_server_keeps_its_layers() {
    let v = violations(&graph());
    assert!(v.is_empty(), "layering violations:\n{}", v.join("\n"));
}

#[test]
fn every_layer_is_ranked() {
    for m in graph().modules.keys() {
        rank(layering::top(m));
    }
}

/// Each rule fails on a violation injected into the real graph.
#[test]
fn each_rule_catches_an_injected_violation() {
    let g = graph();
    let text = |m: &str| g.modules[m].code.clone();
    let caught = |module: &str, injected: String, expect: &str| {
        assert_caught(&g, &violations, module, injected, expect)
    };
    // A cycle: the vocabulary's lock helper importing the backend, which
    // imports it.
    caught("vocab::sync", format!("{}\nuse crate::backend::Backend;\n", text("vocab::sync")), "import cycle");
    // A lower layer importing a higher one, in a group over two lines.
    caught(
        "telemetry",
        format!(
            "{}\nuse crate::{{\n    vocab::sync::lock,\n    protocol::Protocol,\n}};\n",
            text("telemetry")
        ),
        "telemetry (rank 1) imports protocol",
    );
    // A name brought in by `use` and used as a path.
    caught(
        "session::lanes",
        format!(
            "{}\nuse crate::host;\nfn f() {{ let _ = host::LogLevel::Debug; }}\n",
            text("session::lanes")
        ),
        "session::lanes (rank 3) imports host",
    );
    caught("tasks::wire", format!("{}\nfn f(_: axum::Router) {{}}\n", text("tasks::wire")), "names axum");
    caught(
        "protocol::builtin",
        format!("{}\nfn f(_: gapless_redis::StoreConfig) {{}}\n", text("protocol::builtin")),
        "names gapless_redis",
    );
    caught(
        "protocol::listen",
        format!("{}\nfn f(_: &crate::app::AppState) {{}}\n", text("protocol::listen")),
        "names the composition root",
    );
    caught("vocab::time", format!("{}{}", text("vocab::time"), "\n".repeat(700)), "over 700 lines");
    let body: String = (0..100).map(|i| format!("    let _x{i} = {i};\n")).collect();
    caught(
        "vocab::time",
        format!("{}\nfn long() {{\n{body}}}\n", text("vocab::time")),
        "fn long (102 lines)",
    );
}
