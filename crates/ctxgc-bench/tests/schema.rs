//! The JSON report's schema is the one `docs/bench.md` documents, and the report is
//! byte-identical from one run to the next.

mod common;

use std::collections::BTreeSet;

use common::{bench_text, config};
use ctxgc_bench::run::{BenchConfig, InputFile, run};
use serde_json::Value;

const MISSING_VALUE: &str = r#"[
  {"id": "e1", "type": "set_var", "timestamp": 1, "key": "cfg", "value": "cfg_alpha_01"},
  {"id": "e2", "type": "set_var", "timestamp": 2, "key": "cfg", "value": "cfg_beta_02"},
  {"id": "e3", "type": "tool_call", "timestamp": 3, "tool_name": "compare", "arguments": {"old": "cfg_alpha_01", "new": "cfg_beta_02"}}
]"#;

/// A report that exercises every field: the bundled samples (probes, chats), a trace where
/// truncation misses a value, an unreadable file and a failing strategy.
fn full_report() -> Value {
    let mut inputs = ctxgc_bench::samples::inputs();
    inputs.push(InputFile {
        path: "miss.json".into(),
        text: Ok(MISSING_VALUE.into()),
    });
    inputs.push(InputFile {
        path: "broken.json".into(),
        text: Ok("{\"events\": [{\"id\": 1}]}".into()),
    });
    let cfg: BenchConfig = config(&["full", "truncate-events:n=1", "ctxgc", "external:exit 1"]);
    let report = run(&inputs, &cfg, &mut |_| {});
    serde_json::to_value(&report).expect("the report serialises")
}

fn field_paths(value: &Value, at: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                out.insert(path.clone());
                field_paths(v, &path, out);
            }
        }
        Value::Array(items) => {
            for v in items {
                field_paths(v, &format!("{at}[]"), out);
            }
        }
        _ => {}
    }
}

/// `(path, optional)` as documented, with `SUMMARY` expanded to both places it stands for.
fn documented() -> Vec<(String, bool)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/bench.md"))
        .expect("docs/bench.md exists");
    let start = doc
        .find("<!-- schema-paths:start -->")
        .expect("start marker");
    let end = doc.find("<!-- schema-paths:end -->").expect("end marker");
    let mut out = Vec::new();
    for line in doc[start..end].lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("<!--") || line.starts_with("```") {
            continue;
        }
        let (path, optional) = match line.strip_suffix(" ?") {
            Some(p) => (p, true),
            None => (line, false),
        };
        if let Some(rest) = path.strip_prefix("SUMMARY.") {
            out.push((format!("files[].summaries[].{rest}"), optional));
            out.push((format!("totals[].{rest}"), optional));
        } else {
            out.push((path.to_owned(), optional));
        }
    }
    out
}

#[test]
fn every_field_of_the_report_is_documented_and_every_required_field_is_there() {
    let mut produced = BTreeSet::new();
    field_paths(&full_report(), "", &mut produced);
    let documented = documented();
    let known: BTreeSet<&str> = documented.iter().map(|(p, _)| p.as_str()).collect();
    let undocumented: Vec<&String> = produced
        .iter()
        .filter(|p| !known.contains(p.as_str()))
        .collect();
    assert!(
        undocumented.is_empty(),
        "fields missing from docs/bench.md: {undocumented:?}"
    );
    let absent: Vec<&str> = documented
        .iter()
        .filter(|(p, optional)| !optional && !produced.contains(p))
        .map(|(p, _)| p.as_str())
        .collect();
    assert!(
        absent.is_empty(),
        "documented fields not produced: {absent:?}"
    );
}

#[test]
fn the_schema_names_itself() {
    let report = full_report();
    assert_eq!(report["schema"], "ctxgc-bench/1");
    assert_eq!(report["files"][4]["path"], "miss.json");
    assert!(
        report["files"][5]["error"]
            .as_str()
            .is_some_and(|e| e.contains("\"id\""))
    );
}

#[test]
fn two_runs_print_byte_identical_json() {
    let one = serde_json::to_string_pretty(&full_report()).expect("serialises");
    let two = serde_json::to_string_pretty(&full_report()).expect("serialises");
    assert_eq!(one, two);
}

#[test]
fn every_built_in_strategy_is_deterministic_on_the_fixtures() {
    let Ok(text) =
        std::fs::read_to_string(common::fixtures_dir().join("customer_support_long.json"))
    else {
        eprintln!("note: tracegc fixtures not found; skipping");
        return;
    };
    let cfg = BenchConfig {
        timing: false,
        ..BenchConfig::default()
    };
    let report = bench_text("customer_support_long", &text, &cfg);
    for s in &report.totals {
        assert_eq!(s.conversations, 1, "{}", s.strategy);
        assert_eq!(s.nondeterministic, 0, "{}", s.strategy);
    }
}
