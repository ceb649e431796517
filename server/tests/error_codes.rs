//! Every JSON-RPC error code the server, its bundled binary, gapless-rmcp
//! and gapless-gateway can emit is a row of `gapless_wire::rpc_code`'s table, and
//! keeps MCP 2026-07-28's policy on each generation the row says it is used
//! on.
//!
//! The walk is over the sources (outside their `#[cfg(test)]` modules and
//! comments): every integer literal of `-32768..=-31000`, every
//! `code::NAME` and every rmcp `ErrorData::constructor` is a code that can
//! be sent. A code an application hands the server on a 2026-07-28 request
//! is made one the revision allows (`RpcError::for_2026`, unit-tested in
//! `vocab/jsonrpc.rs`), so the application's codes are not walked here.

use gapless::wire::rpc_code::{self, code, policy, Authority, Generation, Source};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The folders whose code can send an error.
const ROOTS: [&str; 5] = ["src", "bin/src", "cli/src", "rmcp/src", "gateway/src"];

/// rmcp's `ErrorData` constructors and their codes.
const RMCP: [(&str, i64); 7] = [
    ("parse_error", -32700),
    ("invalid_request", code::INVALID_REQUEST),
    ("method_not_found", code::METHOD_NOT_FOUND),
    ("invalid_params", code::INVALID_PARAMS),
    ("internal_error", code::INTERNAL_ERROR),
    ("resource_not_found", code::RESOURCE_NOT_FOUND),
    ("url_elicitation_required", code::URL_ELICITATION_REQUIRED),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of `source` outside comments and its `#[cfg(test)]` module
/// (which the files keep last).
fn code_lines(source: &str) -> impl Iterator<Item = (usize, &str)> {
    source
        .lines()
        .enumerate()
        .take_while(|(_, l)| l.trim() != "#[cfg(test)]")
        .map(|(i, l)| (i + 1, l.split("//").next().unwrap_or("")))
}

/// The integers of `-32768..=-31000` written in `line`.
fn literals(line: &str) -> Vec<i64> {
    let b = line.as_bytes();
    let mut out = vec![];
    for (i, _) in line.match_indices("-3") {
        let digits: String = line[i + 1..].chars().take_while(char::is_ascii_digit).collect();
        let before_ok = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if digits.len() == 5 && before_ok {
            let n: i64 = -digits.parse::<i64>().unwrap();
            if (-32768..=-31000).contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// The names of `gapless_wire::rpc_code::code`'s constants, with their
/// values, read from its source.
fn named_codes() -> BTreeMap<String, i64> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/wire/src/rpc_code.rs");
    let src = std::fs::read_to_string(path).unwrap();
    let mut names = BTreeMap::new();
    for l in src.lines() {
        if let Some(rest) = l.trim().strip_prefix("pub const ") {
            if let Some((name, value)) = rest.split_once(": i64 = ") {
                if let Ok(v) = value.trim_end_matches(';').parse() {
                    names.insert(name.to_owned(), v);
                }
            }
        }
    }
    assert!(names.len() >= 13, "read only {names:?}");
    names
}

/// Every code the sources can send, with where.
fn walk() -> BTreeMap<i64, Vec<String>> {
    let names = named_codes();
    let mut files = vec![];
    for root in ROOTS {
        rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join(root), &mut files);
    }
    assert!(files.len() > 60, "found only {} files", files.len());
    let mut found: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for f in files {
        let src = std::fs::read_to_string(&f).unwrap();
        for (n, line) in code_lines(&src) {
            let at = || format!("{}:{n}", f.display());
            for c in literals(line) {
                found.entry(c).or_default().push(at());
            }
            for (i, _) in line.match_indices("code::") {
                let name: String =
                    line[i + 6..].chars().take_while(|c| c.is_ascii_uppercase() || *c == '_').collect();
                if name.len() > 1 {
                    let c = *names.get(&name).unwrap_or_else(|| panic!("{}: unknown code {name}", at()));
                    found.entry(c).or_default().push(at());
                }
            }
            for (ctor, c) in RMCP {
                if line.contains(&format!("ErrorData::{ctor}(")) {
                    found.entry(c).or_default().push(at());
                }
            }
        }
    }
    found
}

/// What is wrong with the codes found: a code with no row, or a row the
/// policy refuses on a generation it is used on.
fn wrongs(found: &BTreeMap<i64, Vec<String>>) -> Vec<String> {
    let mut wrong = vec![];
    for (&c, places) in found {
        let Some(row) = rpc_code::lookup(c) else {
            wrong.push(format!("{c} is not in gapless_wire's table (at {})", places.join(", ")));
            continue;
        };
        for g in [Generation::Mcp2025, Generation::Mcp2026] {
            if row.used_on(g) {
                if let Err(v) = policy(c, g) {
                    wrong.push(format!("{} ({c}) on {g:?}: {v} (at {})", row.name, places.join(", ")));
                }
            }
        }
    }
    wrong
}

#[test]
fn every_code_that_can_be_sent_is_in_the_table_and_keeps_the_policy() {
    let found = walk();
    // The walk sees the codes it must: gapless's own, MCP's and JSON-RPC's.
    for must in [code::TOO_MANY_IN_FLIGHT, code::REQUEST_LOST, code::RESUME_REFUSED, code::EVENTS_GONE] {
        assert!(found.contains_key(&must), "the walk did not find {must}: {found:?}");
    }
    let w = wrongs(&found);
    assert!(w.is_empty(), "codes against the table or MCP's policy:\n{}", w.join("\n"));
}

/// Every row is a code some source sends (the table lists nothing the
/// server cannot emit), and gapless's own are outside `-32768..=-32000`.
#[test]
fn every_row_is_sent_somewhere() {
    let found = walk();
    for row in rpc_code::CODES {
        let app_only = matches!(row.code, code::RESOURCE_NOT_FOUND | code::URL_ELICITATION_REQUIRED);
        assert!(app_only || found.contains_key(&row.code), "{} ({}) is sent nowhere", row.name, row.code);
        if row.authority == Authority::Gapless {
            assert!(!(-32768..=-32000).contains(&row.code), "{row:?}");
        }
        if row.source == Source::LocalClient {
            assert!(!row.on_2026 || row.on_2025, "{row:?}");
        }
    }
}

/// The walk catches what the policy forbids: today's codes before the move
/// (-32009, -32090, -32099), a code with no row, `-32002` on 2026-07-28.
#[test]
fn the_walk_catches_codes_against_the_policy() {
    let src =
        "let a = -32009;\nlet b = RpcError::new(-32090, m); // -32001 in a comment\nconst R: i32 = -32099;\n";
    let mut found: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for (n, line) in code_lines(src) {
        for c in literals(line) {
            found.entry(c).or_default().push(format!("x.rs:{n}"));
        }
    }
    assert_eq!(found.keys().copied().collect::<Vec<_>>(), [-32099, -32090, -32009]);
    assert_eq!(wrongs(&found).len(), 3, "{:?}", wrongs(&found));
    assert!(literals("x_32009 + -320090").is_empty());
    // A row used on 2026-07-28 that the revision forbids there.
    assert!(policy(code::RESOURCE_NOT_FOUND, Generation::Mcp2026).is_err());
}
