//! Format-specific rules live in `formats/`: no source file of the workspace outside a
//! `formats/` folder branches on a [`Format`] variant (`==`, `!=`, a `match` arm,
//! `matches!`). Code elsewhere asks the format's codec (`format.wire()`) what it needs, so a
//! new format is its module and one registry line.
//!
//! Tests and doc examples may name variants as values (which format to compile as); only
//! non-test sources are read, and only branches are refused.

use std::path::{Path, PathBuf};

use ctxgc_core::Format;
use ctxgc_core::formats::REGISTRY;

/// Every `.rs` file under `dir`, recursively, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without `//` comments and without its `#[cfg(test)]` module, whitespace
/// collapsed to single spaces (so a branch split over lines is one string).
fn code_of(source: &str) -> String {
    let without_tests = source
        .find("#[cfg(test)]\nmod tests")
        .map_or(source, |at| &source[..at]);
    let code: Vec<&str> = without_tests
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect();
    code.join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The branches on `variant` in `code`.
fn branches(code: &str, variant: &str) -> Vec<String> {
    let name = format!("Format::{variant}");
    let mut found = Vec::new();
    for (at, _) in code.match_indices(&name) {
        let before = &code[..at];
        let after = &code[at + name.len()..];
        let compared = before.ends_with("== ") || before.ends_with("!= ");
        let arm = after.starts_with(" =>")
            || after.starts_with(" |")
            || after.starts_with(") =>")
            || before.ends_with("| ");
        // Inside a `matches!(...)` still open here (looked for close by: string literals
        // holding parentheses make a longer look unreliable).
        let mut from = before.len().saturating_sub(120);
        while !before.is_char_boundary(from) {
            from -= 1;
        }
        let near = &before[from..];
        let in_matches = near.rfind("matches!(").is_some_and(|m| {
            let opened = near[m..].matches('(').count();
            let closed = near[m..].matches(')').count();
            opened > closed
        });
        if compared || arm || in_matches {
            let start = before.char_indices().rev().nth(40).map_or(0, |(i, _)| i);
            found.push(format!("…{}{name}…", &code[start..at]));
        }
    }
    found
}

#[test]
fn no_source_outside_formats_branches_on_a_format() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&crates, &mut files);
    let sources: Vec<PathBuf> = files
        .into_iter()
        .filter(|p| {
            let path = p.to_string_lossy().replace('\\', "/");
            path.contains("/src/") && !path.contains("/formats/")
        })
        .collect();
    assert!(
        sources.len() > 50,
        "expected the workspace's sources, found {}",
        sources.len()
    );
    let variants: Vec<String> = REGISTRY
        .iter()
        .map(|w| format!("{:?}", w.format()))
        .collect();
    let mut offenders = Vec::new();
    for path in &sources {
        let source = std::fs::read_to_string(path).expect("a readable source file");
        let code = code_of(&source);
        for variant in &variants {
            for branch in branches(&code, variant) {
                offenders.push(format!("{}: {branch}", path.display()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "branches on a format outside formats/ (ask format.wire() instead):\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_scan_finds_each_kind_of_branch() {
    // The detector itself, on code that branches in every way it refuses.
    let code = code_of(
        "fn f(format: Format) {\n    if format == Format::Anthropic {}\n    match format {\n        Format::Responses => {}\n        Format::OpenaiChat\n        | Format::Events => {}\n        _ => {}\n    }\n    let _ = matches!(\n        kind(format),\n        Some(Format::Tracetrim)\n    );\n    let value = Format::Events; // a value, not a branch\n}\n#[cfg(test)]\nmod tests {\n    fn g(f: Format) -> bool { f == Format::Events }\n}\n",
    );
    let found: usize = [
        "Anthropic",
        "Responses",
        "OpenaiChat",
        "Events",
        "Tracetrim",
    ]
    .iter()
    .map(|v| branches(&code, v).len())
    .sum();
    assert_eq!(found, 5, "{code}");
    assert_eq!(format!("{:?}", Format::Events), "Events");
}

/// The names of a `Name = Literal["a", "b"]` line of a Python stub.
fn literal_names(stub: &str, alias: &str) -> Vec<String> {
    let prefix = format!("{alias} = Literal[");
    let line = stub
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {alias} in the stub"));
    let mut names: Vec<String> = line[prefix.len()..]
        .trim_end_matches(']')
        .split(',')
        .map(|n| n.trim().trim_matches('"').to_owned())
        .collect();
    names.sort();
    names
}

/// Type checkers read the Python wheel's stub, not the registry: its format names must be the
/// registry's (every format as input, the chat formats as `to=`).
#[test]
fn the_python_stub_names_the_registered_formats() {
    let stub_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../ctxgc-py/python/ctxgc/_native.pyi");
    let stub = std::fs::read_to_string(&stub_path).expect("the Python stub is in the workspace");
    let mut every: Vec<String> = REGISTRY.iter().map(|c| c.name().to_owned()).collect();
    every.sort();
    let mut chats: Vec<String> = REGISTRY
        .iter()
        .filter(|c| c.is_chat())
        .map(|c| c.name().to_owned())
        .collect();
    chats.sort();
    assert_eq!(literal_names(&stub, "InputFormat"), every);
    assert_eq!(literal_names(&stub, "ChatFormat"), chats);
}
