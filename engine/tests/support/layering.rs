//! The layering rules of a crate, checked on its source: the module graph
//! (who imports whom), and the checks every crate's `architecture` test
//! applies to it. Shared by the engine's, the Redis store's and the
//! server's tests (included with `#[path]`: one file, no copies).
//!
//! How imports are read, from the code alone (comments, string and char
//! literals blanked first):
//! - `crate::a::b::X` and `super::X` paths, in `use` items and in code,
//!   grouped ones included (`use crate::{a, b::{c, d}}`, over several
//!   lines), each resolved to the deepest module it names;
//! - a name a `use` brought in (`use crate::tasks::{self, Tasks}`, then
//!   `tasks::declares`), and a child module named by its parent
//!   (`mod.rs`'s `pub use store::X`, `cluster::attach(..)`).
//!
//! A module's `mod` lines are not imports, and a module naming one of its
//! ancestors (a child's `super::X`) is part of that ancestor: neither makes
//! an edge. Every other reference does.
#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One module (one file) of a crate.
#[derive(Clone, Debug)]
pub struct Module {
    /// Its path relative to the crate's `src/`.
    pub file: PathBuf,
    /// Its code, comments and literals blanked (line structure kept).
    pub code: String,
    /// How many lines the file has.
    pub lines: usize,
    /// The modules it imports (deepest module each path names).
    pub imports: BTreeSet<String>,
}

/// A crate's modules by name (`lib` for the root, `a::b` for `a/b.rs` or
/// `a/b/mod.rs`).
#[derive(Clone, Debug)]
pub struct Graph {
    pub modules: BTreeMap<String, Module>,
}

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

/// The module name of a source file: `ring/cursor.rs` → `ring::cursor`,
/// `ring/mod.rs` → `ring`, `lib.rs` → `lib`.
pub fn module_name(rel: &Path) -> String {
    let rel = rel.with_extension("");
    let parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if parts == ["lib"] {
        return "lib".into();
    }
    let parts: Vec<&str> = parts.iter().map(String::as_str).filter(|p| *p != "mod").collect();
    parts.join("::")
}

/// `code` with comments, string literals and char literals replaced by
/// spaces (newlines kept, so line numbers stay).
pub fn blank_comments_and_literals(code: &str) -> String {
    let b = code.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank =
        |out: &mut Vec<u8>, s: &[u8]| out.extend(s.iter().map(|&c| if c == b'\n' { b'\n' } else { b' ' }));
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest.starts_with(b"/*") {
            // Nested block comments.
            let (mut depth, mut j) = (0usize, 0);
            while j < rest.len() {
                if rest[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &rest[..j]);
            i += j;
        } else if let Some(len) = raw_string_len(rest) {
            blank(&mut out, &rest[..len]);
            i += len;
        } else if rest[0] == b'"' || (rest.starts_with(b"b\"") && !prev_is_ident(b, i)) {
            let start = if rest[0] == b'"' { 1 } else { 2 };
            let mut j = start;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            let len = (j + 1).min(rest.len());
            blank(&mut out, &rest[..len]);
            i += len;
        } else if rest[0] == b'\'' {
            // A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            let len = if rest.get(1) == Some(&b'\\') {
                rest[2..].iter().position(|&c| c == b'\'').map(|p| p + 3)
            } else if rest.get(2) == Some(&b'\'') {
                Some(3)
            } else {
                // A multi-byte char: up to the closing quote within 6 bytes.
                rest.iter()
                    .skip(1)
                    .take(5)
                    .position(|&c| c == b'\'')
                    .map(|p| p + 2)
                    .filter(|_| rest[1] >= 0x80)
            };
            match len {
                Some(len) => {
                    blank(&mut out, &rest[..len]);
                    i += len;
                }
                None => {
                    out.push(b'\'');
                    i += 1;
                }
            }
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("blanking keeps UTF-8 (only ASCII replaced, whole literals blanked)")
}

fn prev_is_ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// The length of a raw string literal at the start of `s` (`r"..."`,
/// `r#"..."#`, `br"..."`), if there is one.
fn raw_string_len(s: &[u8]) -> Option<usize> {
    let mut j = if s.starts_with(b"br") {
        2
    } else if s.starts_with(b"r") {
        1
    } else {
        return None;
    };
    let hashes = s[j..].iter().take_while(|&&c| c == b'#').count();
    j += hashes;
    if s.get(j) != Some(&b'"') {
        return None;
    }
    j += 1;
    let mut close = vec![b'"'];
    close.resize(1 + hashes, b'#');
    let end = s[j..].windows(close.len()).position(|w| w == close.as_slice())?;
    Some(j + end + close.len())
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Every path that starts at byte `at` of `code` (`a::b::{c, d::e}`
/// expands to `a::b::c`, `a::b::d::e`), as segment lists; and the `use`
/// aliases a group leaf brings in (`self` leaves name their parent).
fn paths_at(code: &[u8], mut at: usize) -> Vec<Vec<String>> {
    fn skip_ws(code: &[u8], mut i: usize) -> usize {
        while i < code.len() && code[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    }
    fn ident(code: &[u8], i: usize) -> (String, usize) {
        let mut j = i;
        while j < code.len() && is_ident(code[j]) {
            j += 1;
        }
        (String::from_utf8_lossy(&code[i..j]).into_owned(), j)
    }
    // One path (with its groups) from `i`; returns the paths and the end.
    fn path(code: &[u8], i: usize, prefix: Vec<String>) -> (Vec<Vec<String>>, usize) {
        let mut segs = prefix;
        let mut i = skip_ws(code, i);
        loop {
            if code.get(i) == Some(&b'{') {
                let mut out = Vec::new();
                i += 1;
                loop {
                    i = skip_ws(code, i);
                    match code.get(i) {
                        Some(b'}') => return (out, i + 1),
                        Some(b',') => i += 1,
                        None => return (out, i),
                        _ => {
                            let (more, end) = path(code, i, segs.clone());
                            out.extend(more);
                            // Skip an `as name` and anything else up to the
                            // next `,` or `}` of this group.
                            let mut j = end;
                            while j < code.len() && code[j] != b',' && code[j] != b'}' {
                                j += 1;
                            }
                            i = j;
                        }
                    }
                }
            }
            let (id, end) = ident(code, i);
            if id.is_empty() {
                return (vec![segs], i);
            }
            segs.push(id);
            let after = skip_ws(code, end);
            if code[after..].starts_with(b"::") {
                i = skip_ws(code, after + 2);
            } else {
                return (vec![segs], end);
            }
        }
    }
    at = skip_ws(code, at);
    path(code, at, Vec::new()).0
}

/// The module a path names, from module `from`: `crate::` paths from the
/// root, `super::` and `self::` relative to `from`, a child's name from
/// `from` itself, an alias by what it stands for. Resolved to the deepest
/// module of `known`; `None` when it names none.
fn resolve(
    from: &str,
    segs: &[String],
    known: &BTreeSet<String>,
    aliases: &BTreeMap<String, Vec<String>>,
) -> Option<String> {
    let mut base: Vec<String> =
        if from == "lib" { vec![] } else { from.split("::").map(str::to_owned).collect() };
    let mut rest: &[String] = segs;
    let full: Vec<String> = match rest.first().map(String::as_str) {
        Some("crate") => rest[1..].to_vec(),
        Some("super") | Some("self") => {
            while let Some(s) = rest.first().map(String::as_str) {
                match s {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
            base.into_iter().chain(rest.iter().cloned()).collect()
        }
        Some(first) => match aliases.get(first) {
            Some(target) => target.iter().cloned().chain(rest[1..].iter().cloned()).collect(),
            // A child module named by its parent; anything else is another
            // crate's.
            None => {
                let child = base.iter().cloned().chain(std::iter::once(first.to_owned())).collect::<Vec<_>>();
                if !known.contains(&child.join("::")) {
                    return None;
                }
                base.into_iter().chain(rest.iter().cloned()).collect()
            }
        },
        None => return None,
    };
    (1..=full.len()).rev().map(|n| full[..n].join("::")).find(|m| known.contains(m))
}

/// The crate-absolute segments of a `use` path of module `from`, if it is a
/// path into this crate (`crate::`, `super::`, `self::`, or a child module
/// of `from`).
fn absolute(from: &str, segs: &[String], known: &BTreeSet<String>) -> Option<Vec<String>> {
    let mut base: Vec<String> =
        if from == "lib" { vec![] } else { from.split("::").map(str::to_owned).collect() };
    match segs.first().map(String::as_str) {
        Some("crate") => Some(segs[1..].to_vec()),
        Some("super") | Some("self") => {
            let mut rest = segs;
            while let Some(s) = rest.first().map(String::as_str) {
                match s {
                    "super" => drop(base.pop()),
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
            Some(base.into_iter().chain(rest.iter().cloned()).collect())
        }
        Some(first) => {
            base.push(first.to_owned());
            known
                .contains(&base.join("::"))
                .then(|| base.into_iter().chain(segs[1..].iter().cloned()).collect())
        }
        None => None,
    }
}

/// The modules a module's code imports.
fn imports_of(name: &str, code: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let b = code.as_bytes();
    // Aliases: each `use` leaf's last segment (or its `as` name) stands for
    // its path (a `self` leaf for its parent).
    let mut aliases: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut uses = Vec::new();
    let mut i = 0;
    while let Some(p) = code[i..].find("use ") {
        let at = i + p;
        i = at + 4;
        if prev_is_ident(b, at) {
            continue;
        }
        for segs in paths_at(b, at + 4) {
            let mut target = segs.clone();
            if target.last().is_some_and(|s| s == "self") {
                target.pop();
            }
            // Only a path into this crate makes an alias (another crate's
            // names are not modules of this one).
            if let (Some(last), Some(abs)) = (target.last(), absolute(name, &target, known)) {
                if !matches!(last.as_str(), "crate" | "super" | "self") {
                    aliases.insert(last.clone(), abs);
                }
            }
            uses.push(segs);
        }
    }
    let mut out = BTreeSet::new();
    let mut add = |segs: &[String], aliases: &BTreeMap<String, Vec<String>>| {
        if let Some(m) = resolve(name, segs, known, aliases) {
            let is_ancestor_or_self = m == name || name.starts_with(&format!("{m}::")) || m == "lib";
            if !is_ancestor_or_self {
                out.insert(m);
            }
        }
    };
    for segs in &uses {
        add(segs, &BTreeMap::new());
    }
    // Paths in code: an identifier followed by `::`, not itself the tail of
    // a longer path.
    let mut i = 0;
    while i < b.len() {
        if is_ident(b[i]) && !prev_is_ident(b, i) {
            let mut j = i;
            while j < b.len() && is_ident(b[j]) {
                j += 1;
            }
            let preceded_by_path = i >= 2 && &b[i - 2..i] == b"::";
            if !preceded_by_path && b[j..].starts_with(b"::") {
                for segs in paths_at(b, i) {
                    add(&segs, &aliases);
                }
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

impl Graph {
    /// The modules of the crate whose sources are in `src`.
    pub fn of(src: &Path) -> Graph {
        let mut files = Vec::new();
        sources(src, &mut files);
        let mut raw = BTreeMap::new();
        for f in files {
            let rel = f.strip_prefix(src).unwrap().to_path_buf();
            let text = fs::read_to_string(&f).unwrap();
            raw.insert(module_name(&rel), (rel, text));
        }
        Graph::from_texts(raw.into_iter().map(|(m, (rel, text))| (m, rel, text)))
    }

    /// A graph of the given modules' texts (what the tests of the checks
    /// inject violations into).
    pub fn from_texts(texts: impl IntoIterator<Item = (String, PathBuf, String)>) -> Graph {
        let texts: Vec<(String, PathBuf, String)> = texts.into_iter().collect();
        let known: BTreeSet<String> = texts.iter().map(|(m, _, _)| m.clone()).collect();
        let modules = texts
            .into_iter()
            .map(|(m, file, text)| {
                let code = blank_comments_and_literals(&text);
                let imports = imports_of(&m, &code, &known);
                let lines = text.lines().count();
                (m, Module { file, code, lines, imports })
            })
            .collect();
        Graph { modules }
    }

    /// The same graph with module `name`'s text replaced (or added).
    pub fn with(&self, name: &str, text: &str) -> Graph {
        let mut texts: Vec<(String, PathBuf, String)> = Vec::new();
        for (m, module) in &self.modules {
            if m != name {
                texts.push((m.clone(), module.file.clone(), module.code.clone()));
            }
        }
        let file = PathBuf::from(format!("{}.rs", name.replace("::", "/")));
        texts.push((name.to_owned(), file, text.to_owned()));
        Graph::from_texts(texts)
    }

    /// An import cycle, if any, as the modules around it.
    pub fn cycle(&self) -> Option<Vec<String>> {
        fn visit<'a>(
            m: &'a str,
            g: &'a BTreeMap<String, Module>,
            state: &mut BTreeMap<&'a str, u8>,
            stack: &mut Vec<&'a str>,
        ) -> Option<Vec<String>> {
            match state.get(m) {
                Some(2) => return None,
                Some(1) => {
                    let from = stack.iter().position(|s| *s == m).unwrap_or(0);
                    let mut c: Vec<String> = stack[from..].iter().map(|s| s.to_string()).collect();
                    c.push(m.to_owned());
                    return Some(c);
                }
                _ => {}
            }
            state.insert(m, 1);
            stack.push(m);
            for d in g.get(m).into_iter().flat_map(|x| &x.imports) {
                if let Some(c) = visit(d, g, state, stack) {
                    return Some(c);
                }
            }
            stack.pop();
            state.insert(m, 2);
            None
        }
        let mut state = BTreeMap::new();
        self.modules.keys().find_map(|m| visit(m, &self.modules, &mut state, &mut Vec::new()))
    }

    /// Every import that breaks the rank rule: a module may import modules
    /// of its own top-level folder and of lower ranks only (`rank` gives a
    /// top-level module's rank; `lib` is the crate root).
    pub fn rank_violations(&self, rank: impl Fn(&str) -> u32) -> Vec<String> {
        let mut out = Vec::new();
        for (m, module) in &self.modules {
            for d in &module.imports {
                let (from, to) = (top(m), top(d));
                if from != to && rank(from) <= rank(to) {
                    out.push(format!("{m} (rank {}) imports {d} (rank {})", rank(from), rank(to)));
                }
            }
        }
        out
    }

    /// Modules whose code names `path` (a crate, `axum::`, or a module,
    /// `crate::app`) outside the top-level modules `allowed`.
    pub fn names_outside(&self, path: &str, allowed: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        for (m, module) in &self.modules {
            if allowed.contains(&top(m)) {
                continue;
            }
            let b = module.code.as_bytes();
            // Not the tail of a longer name or path (`my_axum::`, `x::axum::`).
            let found = module
                .code
                .match_indices(path)
                .any(|(i, _)| !(prev_is_ident(b, i) || (i >= 2 && &b[i - 2..i] == b"::")));
            if found {
                out.push(m.clone());
            }
        }
        out
    }

    /// Modules that import module `target` (or one inside it) outside the
    /// top-level modules `allowed`.
    pub fn importers_outside(&self, target: &str, allowed: &[&str]) -> Vec<String> {
        self.modules
            .iter()
            .filter(|(m, module)| {
                !allowed.contains(&top(m))
                    && top(m) != target
                    && module.imports.iter().any(|d| d == target || d.starts_with(&format!("{target}::")))
            })
            .map(|(m, _)| m.clone())
            .collect()
    }

    /// Files longer than `max` lines.
    pub fn long_files(&self, max: usize) -> Vec<String> {
        self.modules
            .values()
            .filter(|m| m.lines > max)
            .map(|m| format!("{} ({} lines)", m.file.display(), m.lines))
            .collect()
    }

    /// Functions longer than `max` lines (from the `fn` line to its closing
    /// brace), tests included.
    pub fn long_functions(&self, max: usize) -> Vec<String> {
        let mut out = Vec::new();
        for module in self.modules.values() {
            for (name, lines) in functions(&module.code) {
                if lines > max {
                    out.push(format!("{}: fn {name} ({lines} lines)", module.file.display()));
                }
            }
        }
        out
    }
}

/// The checks every crate's test applies: no import cycle, the rank rule,
/// no file over `max_file` lines, no function over `max_fn`.
pub fn standard_violations(
    g: &Graph,
    rank: impl Fn(&str) -> u32,
    max_file: usize,
    max_fn: usize,
) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(c) = g.cycle() {
        v.push(format!("import cycle: {}", c.join(" -> ")));
    }
    v.extend(g.rank_violations(rank));
    v.extend(g.long_files(max_file).into_iter().map(|f| format!("{f} is over {max_file} lines")));
    v.extend(g.long_functions(max_fn).into_iter().map(|f| format!("{f} is over {max_fn} lines")));
    v
}

/// Panics unless `rules` report a violation containing `expect` once
/// module `module`'s text is `text` (a rule shown to catch what it is for).
pub fn assert_caught(
    g: &Graph,
    rules: &dyn Fn(&Graph) -> Vec<String>,
    module: &str,
    text: String,
    expect: &str,
) {
    let v = rules(&g.with(module, &text));
    assert!(v.iter().any(|x| x.contains(expect)), "{module}: expected {expect:?} in {v:#?}");
}

/// The file-size rule alone, for a crate with no layers to rank: no file of
/// `src` over `max` lines. Checks the crate's source, then shows the rule
/// failing on `module` made `max` lines longer.
pub fn check_file_limit(src: &Path, module: &str, max: usize) {
    let g = Graph::of(src);
    assert!(g.modules.contains_key(module), "no {module} in {:?}", g.modules.keys());
    let rule = |g: &Graph| -> Vec<String> {
        g.long_files(max).into_iter().map(|f| format!("{f} is over {max} lines")).collect()
    };
    let v = rule(&g);
    assert!(v.is_empty(), "{}", v.join("\n"));
    let longer = format!("{}{}", g.modules[module].code, "\n".repeat(max));
    assert_caught(&g, &rule, module, longer, &format!("over {max} lines"));
}

/// The top-level module of `m` (`a` of `a::b::c`).
pub fn top(m: &str) -> &str {
    m.split("::").next().unwrap_or(m)
}

/// Every function with a body in `code` (blanked), with its length in
/// lines.
pub fn functions(code: &str) -> Vec<(String, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = code[i..].find("fn ") {
        let at = i + p;
        i = at + 3;
        if prev_is_ident(b, at) {
            continue;
        }
        let name: String = code[at + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if name.is_empty() {
            continue; // `fn(` types
        }
        // The body starts at the first `{` before any `;` at depth 0 of
        // parentheses (a declaration without a body ends at `;`).
        let (mut j, mut parens) = (at, 0i32);
        let body = loop {
            match b.get(j) {
                None => break None,
                Some(b'(') | Some(b'<') | Some(b'[') => parens += 1,
                Some(b')') | Some(b'>') | Some(b']') => parens -= 1,
                Some(b';') if parens <= 0 => break None,
                Some(b'{') if parens <= 0 => break Some(j),
                _ => {}
            }
            j += 1;
        };
        let Some(open) = body else { continue };
        let mut depth = 0usize;
        let mut k = open;
        while k < b.len() {
            match b[k] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            k += 1;
        }
        let first = code[..at].matches('\n').count();
        let last = code[..k.min(b.len())].matches('\n').count();
        out.push((name, last - first + 1));
    }
    out
}
