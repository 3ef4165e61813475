//! The `ctxgc` binary as a user meets it: commands, exit codes, stdin, determinism across
//! processes.

mod common;
use common::ctxgc_stdin;
use std::path::PathBuf;
use std::process::{Command, Output};

fn ctxgc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(args)
        .output()
        .expect("ctxgc runs")
}

fn example() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/coding-session.jsonl")
        .to_string_lossy()
        .into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("utf-8 stderr")
}

#[test]
fn first_run_command_from_the_readme_works() {
    let out = ctxgc(&["compile", &example()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("[e12] db = postgres-15"));
    assert!(text.contains("e02: superseded by e12"));
    assert!(
        !text.contains("db = postgres\n"),
        "retired content must not leak"
    );
}

#[test]
fn json_report_has_the_contract_fields() {
    let out = ctxgc(&["compile", "--json", &example()]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    for key in [
        "output",
        "tokens_before",
        "tokens_after",
        "decisions",
        "receipts",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    let d = &v["decisions"][1];
    assert_eq!(d["id"], "e02");
    assert_eq!(d["action"], "retire");
    assert_eq!(d["reason"], "superseded-var");
    assert_eq!(d["by"], serde_json::json!(["e12"]));
    assert!(v["tokens_after"].as_u64() < v["tokens_before"].as_u64());
}

#[test]
fn dry_run_prints_the_plan_only() {
    let out = ctxgc(&["compile", "--dry-run", &example()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(v.get("decisions").is_some());
    assert!(v.get("output").is_none());
}

#[test]
fn two_processes_give_byte_identical_output() {
    let a = ctxgc(&["compile", "--json", &example()]);
    let b = ctxgc(&["compile", "--json", &example()]);
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn stdin_is_read_with_dash_or_no_file() {
    let text = std::fs::read(example()).expect("example");
    let from_file = ctxgc(&["compile", &example()]);
    let dash = ctxgc_stdin(&["compile", "-"], &text);
    let none = ctxgc_stdin(&["compile"], &text);
    assert_eq!(dash.stdout, from_file.stdout);
    assert_eq!(none.stdout, from_file.stdout);
}

#[test]
fn receipt_gives_back_the_original_bytes() {
    let out = ctxgc(&["receipt", &example(), "e02"]);
    assert!(out.status.success());
    let line = std::fs::read_to_string(example())
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_owned();
    assert_eq!(stdout(&out), line);
    assert!(stderr(&out).contains("superseded-var"));
    let kept = ctxgc(&["receipt", "--json", &example(), "e12"]);
    let v: serde_json::Value = serde_json::from_slice(&kept.stdout).expect("json");
    assert_eq!(v["decision"]["action"], "keep");
    let missing = ctxgc(&["receipt", &example(), "zzz"]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn explain_lists_every_retired_item_and_documents_codes() {
    let out = ctxgc(&["explain", &example()]);
    let text = stdout(&out);
    assert!(text.contains("e02 retired [superseded-var] by e12"));
    assert!(text.contains("e16 retired [duplicate-call] by e13, e14"));
    let doc = ctxgc(&["explain", "--code", "dead-branch"]);
    assert!(stdout(&doc).contains("Why it is safe"));
    let all = ctxgc(&["explain", "--code", "all"]);
    assert!(stdout(&all).contains("stale-read"));
    let bad = ctxgc(&["explain", "--code", "nope"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn diff_is_unified() {
    let out = ctxgc(&["diff", &example()]);
    let text = stdout(&out);
    assert!(text.starts_with("--- before\n+++ after\n"));
    assert!(text.contains("-[e02] db = postgres\n"));
    assert!(text.contains("+[receipts e02: superseded by e12;"));
}

#[test]
fn invalid_input_exits_1_and_usage_errors_exit_2() {
    let bad = ctxgc_stdin(
        &["compile"],
        br#"[{"id":"e1","type":"command_run","timestamp":1,"command":"ls","exit_code":"0"}]"#,
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad)
            .contains("item 0 (id \"e1\"): field \"exit_code\": expected integer, found string")
    );
    let utf8 = ctxgc_stdin(&["compile"], b"[{\"id\": \"\xfe\"}]");
    assert_eq!(utf8.status.code(), Some(1));
    assert!(stderr(&utf8).contains("not valid UTF-8"));
    let malformed = ctxgc_stdin(&["compile"], b"{\"events\": [");
    assert_eq!(malformed.status.code(), Some(1));
    assert!(stderr(&malformed).contains("malformed JSON"));
    let usage = ctxgc(&["compile", "--no-such-flag"]);
    assert_eq!(usage.status.code(), Some(2));
    let missing = ctxgc(&["compile", "/nonexistent/trace.json"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("/nonexistent/trace.json"));
    let format = ctxgc(&["compile", "--from", "yaml", &example()]);
    assert_eq!(format.status.code(), Some(2));
}
