//! The gateway's layering (`ARCHITECTURE.md`, "The gateway"), checked on its
//! source: the upstream half (`upstream`) knows nothing of gapless-server,
//! the pump sits on it, and the hosts (HTTP, stdio) on both; no import cycle; no file over
//! 700 lines, no function over 100. The client-facing half is gapless-server
//! through its public API only: this crate is another crate; it names
//! `axum` only where it adds a route of its own (`front`: the metadata),
//! and never `gapless_redis` (the cluster is the server's). Each rule is shown failing on an injected
//! violation.

#[path = "../../../engine/tests/support/layering.rs"]
mod layering;

use layering::{assert_caught, standard_violations, Graph};
use std::path::Path;

fn rank(layer: &str) -> u32 {
    match layer {
        "sync" => 0,
        "upstream" => 0,
        "pump" | "hold" => 1,
        "host" | "bridge" | "front" => 2,
        "lib" | "main" => 3,
        other => panic!("{other} is a layer ARCHITECTURE.md does not rank: give it a rank"),
    }
}

fn graph() -> Graph {
    let g = Graph::of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(g.modules.len() >= 5, "found only {:?}", g.modules.keys());
    g
}

fn violations(g: &Graph) -> Vec<String> {
    let mut v = standard_violations(g, rank, 700, 100);
    v.extend(g.names_outside("axum::", &["front"]).into_iter().map(|m| format!("{m} names axum::")));
    v.extend(
        g.names_outside("gapless_redis::", &[]).into_iter().map(|m| format!("{m} names gapless_redis::")),
    );
    v.extend(
        g.names_outside("gapless_server::", &["pump", "hold", "host", "bridge", "lib", "main"])
            .into_iter()
            .map(|m| format!("{m} names gapless_server")),
    );
    v
}

#[test]
fn the_gateway_keeps_its_layers() {
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
    caught("upstream::sse", format!("{}\nuse crate::pump::Link;\n", text("upstream::sse")), "imports pump");
    caught("pump", format!("{}\nfn f(_: axum::Router) {{}}\n", text("pump")), "names axum::");
    caught(
        "upstream",
        format!("{}\nfn f(_: gapless_server::RpcError) {{}}\n", text("upstream")),
        "names gapless_server",
    );
    caught("pump", format!("{}{}", text("pump"), "\n".repeat(700)), "over 700 lines");
}
