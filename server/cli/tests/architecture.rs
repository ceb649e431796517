//! A reader can hold each source file of gapless-cli: none is over 700 lines
//! (`ARCHITECTURE.md`), checked on the source with the shared checker
//! (`engine/tests/support/layering.rs`), and shown failing on a file made
//! longer.

#[path = "../../../engine/tests/support/layering.rs"]
mod layering;

use layering::{assert_caught, Graph};
use std::path::Path;

fn graph() -> Graph {
    Graph::of(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

fn violations(g: &Graph) -> Vec<String> {
    g.long_files(700).into_iter().map(|f| format!("{f} is over 700 lines")).collect()
}

#[test]
fn no_source_file_is_over_700_lines() {
    let g = graph();
    assert!(g.modules.contains_key("lib"), "found only {:?}", g.modules.keys());
    let v = violations(&g);
    assert!(v.is_empty(), "{}", v.join("\n"));
}

#[test]
fn the_limit_catches_a_longer_file() {
    let g = graph();
    let longer = format!("{}{}", g.modules["lib"].code, "\n".repeat(700));
    assert_caught(&g, &violations, "lib", longer, "over 700 lines");
}
