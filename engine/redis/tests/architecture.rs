//! The Redis store's layering (`ARCHITECTURE.md`, "Redis store modules"),
//! checked on its source with the engine's checker: errors, the data it
//! answers with and the reply decoders at the bottom; the connection,
//! keys, scripts and the decision table's facts above them; the client
//! (`RedisStore`'s core); a session's operations by job; tasks, nodes, the
//! append queue and the notifier on top. A module imports only its own
//! layer and lower ranks; no import cycle; no file over 700 lines, no
//! function over 100. Each rule is also shown failing on a violation
//! injected into the real graph.

#[path = "../../tests/support/layering.rs"]
mod layering;

use layering::{assert_caught, standard_violations, Graph};
use std::path::Path;

fn rank(layer: &str) -> u32 {
    match layer {
        // `testing` (a redis-server child for tests) needs nothing of the store.
        "error" | "model" | "sync" | "testing" => 0,
        "reply" => 1,
        "conn" | "facts" | "keys" | "scripts" => 2,
        "client" => 3,
        "session" => 4,
        "tasks" | "task_events" | "nodes" | "appender" | "notify" => 5,
        "lib" => 6,
        other => panic!("{other} is a layer ARCHITECTURE.md does not rank: give it a rank"),
    }
}

fn graph() -> Graph {
    let g = Graph::of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(g.modules.len() > 15, "found only {} modules: {:?}", g.modules.len(), g.modules.keys());
    g
}

fn violations(g: &Graph) -> Vec<String> {
    standard_violations(g, rank, 700, 100)
}

#[test]
fn the_store_keeps_its_layers() {
    let v = violations(&graph());
    assert!(v.is_empty(), "layering violations:\n{}", v.join("\n"));
}

#[test]
fn each_rule_catches_an_injected_violation() {
    let g = graph();
    let text = |m: &str| g.modules[m].code.clone();
    let caught = |module: &str, injected: String, expect: &str| {
        assert_caught(&g, &violations, module, injected, expect)
    };
    // The errors importing the client (which imports them), in a group.
    caught("error", format!("{}\nuse crate::{{client::RedisStore, keys}};\n", text("error")), "import cycle");
    caught(
        "reply",
        format!("{}\nfn f(s: &crate::session::REPLAY_CHUNKS) {{}}\n", text("reply")),
        "reply (rank 1) imports session",
    );
    caught("keys", format!("{}{}", text("keys"), "\n".repeat(700)), "over 700 lines");
    let body: String = (0..100).map(|i| format!("    let _x{i} = {i};\n")).collect();
    caught("keys", format!("{}\nfn long() {{\n{body}}}\n", text("keys")), "fn long (102 lines)");
}
