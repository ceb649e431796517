//! A reader can hold each source file of gapless-cli: none is over 700 lines
//! (`ARCHITECTURE.md`), checked on the source with the shared checker
//! (`engine/tests/support/layering.rs`), and shown failing on a file made
//! longer.

#[path = "../../../engine/tests/support/layering.rs"]
mod layering;

#[test]
fn no_source_file_is_over_700_lines() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    layering::check_file_limit(&src, "lib", 700);
}
