//! `ctxgc bench` as a user meets it: the table, `--output json`, `--output html` opened in
//! headless Chromium, and its exit codes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ctxgc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(args)
        .output()
        .expect("ctxgc runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_sample_prints_a_table_with_every_strategy() {
    let out = ctxgc(&["bench", "--sample", "--no-timing"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    for name in [
        "full",
        "truncate-events",
        "truncate-tokens",
        "clear-tool-results",
        "ctxgc",
        "ctxgc-lossless",
        "ctxgc-aggressive",
    ] {
        assert!(
            table.lines().any(|l| l.trim_start().starts_with(name)),
            "{name} missing:\n{table}"
        );
    }
    assert!(table.contains("sample:corpus-sample.jsonl (4 conversation(s), openai-chat)"));
    assert!(table.contains("sample:coding_agent_short.json (1 conversation(s), events)"));
}

#[test]
fn json_output_is_the_documented_schema_and_reproducible() {
    let args = [
        "bench",
        "--sample",
        "--no-timing",
        "--strategy",
        "full",
        "--strategy",
        "ctxgc",
        "--output",
        "json",
    ];
    let one = ctxgc(&args);
    assert!(one.status.success(), "{}", text(&one.stderr));
    let two = ctxgc(&args);
    assert_eq!(one.stdout, two.stdout, "two processes, same bytes");
    let report: serde_json::Value = serde_json::from_slice(&one.stdout).expect("JSON");
    assert_eq!(report["schema"], "ctxgc-bench/1");
    assert_eq!(report["strategies"].as_array().map(Vec::len), Some(2));
    assert_eq!(report["conversations"].as_array().map(Vec::len), Some(7));
}

#[test]
fn json_can_go_to_a_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.json");
    let path_str = path.to_string_lossy().into_owned();
    let out = ctxgc(&[
        "bench",
        "--sample",
        "--strategy",
        "full",
        "--output",
        "json",
        &path_str,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("written")).expect("JSON");
    assert_eq!(report["totals"][0]["strategy"], "full");
}

fn chromium_available() -> bool {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    Path::new(&chromium).exists()
}

#[test]
fn the_html_page_opens_in_headless_chromium_without_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let page = dir.path().join("bench.html");
    let page_str = page.to_string_lossy().into_owned();
    let out = ctxgc(&["bench", "--sample", "--output", "html", &page_str]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&page).expect("page written");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<svg"), "the page has its plots");
    assert!(!html.contains("<script"));
    if !chromium_available() {
        assert!(
            std::env::var_os("CI").is_none()
                && std::env::var_os("CTXGC_REQUIRE_SERVICES").is_none(),
            "Chromium is required in CI: apt-get install -y chromium"
        );
        eprintln!("note: no Chromium here; the page was not opened");
        return;
    }
    let shot = dir.path().join("bench.png");
    let check = Command::new("bash")
        .arg(repo().join("scripts/chromium-check.sh"))
        .arg(&page)
        .arg(&shot)
        .output()
        .expect("the check runs");
    assert!(
        check.status.success(),
        "{}{}",
        text(&check.stdout),
        text(&check.stderr)
    );
    assert!(std::fs::metadata(&shot).expect("screenshot").len() > 10_000);
}

#[test]
fn the_chromium_check_fails_on_a_page_with_console_errors() {
    if !chromium_available() {
        eprintln!("note: no Chromium here; skipping");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let page = dir.path().join("bad.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><script>console.error('boom'); nope();</script></body></html>",
    )
    .expect("written");
    let check = Command::new("bash")
        .arg(repo().join("scripts/chromium-check.sh"))
        .arg(&page)
        .arg(dir.path().join("bad.png"))
        .output()
        .expect("the check runs");
    assert_eq!(check.status.code(), Some(1));
    assert!(text(&check.stderr).contains("boom"));
}

#[test]
fn bad_usage_and_unreadable_inputs_have_their_exit_codes() {
    let out = ctxgc(&["bench", "--sample", "--strategy", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unknown strategy \"nope\""));

    let out = ctxgc(&["bench"]);
    assert_eq!(out.status.code(), Some(2));

    let out = ctxgc(&["bench", "--sample", "--output", "pdf"]);
    assert_eq!(out.status.code(), Some(2));

    // An unreadable file is reported in the table; the others are still benched.
    let out = ctxgc(&["bench", "--sample", "/nonexistent/trace.json"]);
    assert_eq!(out.status.code(), Some(1));
    let table = text(&out.stdout);
    assert!(table.contains("/nonexistent/trace.json: could not be read"));
    assert!(table.contains("sample:coding_agent_short.json"));
}

#[test]
fn explain_lists_each_miss_with_where_the_value_came_from() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("trace.json");
    std::fs::write(
        &trace,
        r#"[
          {"id": "e1", "type": "set_var", "timestamp": 1, "key": "cfg", "value": "cfg_alpha_01"},
          {"id": "e2", "type": "set_var", "timestamp": 2, "key": "cfg", "value": "cfg_beta_02"},
          {"id": "e3", "type": "tool_call", "timestamp": 3, "tool_name": "compare", "arguments": {"old": "cfg_alpha_01"}}
        ]"#,
    )
    .expect("written");
    let trace_str = trace.to_string_lossy().into_owned();
    let out = ctxgc(&[
        "bench",
        &trace_str,
        "--strategy",
        "truncate-events:n=1",
        "--explain",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("miss before turn 2 (e3): \"cfg_alpha_01\" from e1 (item 0)"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_recorded_session_replays_through_the_gateway() {
    let input = repo().join("examples/bench/corpus-sample.jsonl");
    let out = ctxgc(&[
        "bench",
        input.to_str().unwrap(),
        "--no-timing",
        "--strategy",
        "full",
        "--strategy",
        "ctxgc-cache",
        "--through-gateway",
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let totals = report["totals"].as_array().unwrap();
    let of = |name: &str| {
        totals
            .iter()
            .find(|t| t["strategy"] == name)
            .unwrap_or_else(|| panic!("{name} in {totals:?}"))
            .clone()
    };
    let (gateway, cache, full) = (of("gateway"), of("ctxgc-cache"), of("full"));
    assert_eq!(gateway["conversations"], 4, "{gateway}");
    assert_eq!(gateway["errors"], 0, "{gateway}");
    assert_eq!(gateway["nondeterministic"], 0);
    // The gateway compiles with the cache-stable preset: what reached the provider is what
    // `ctxgc-cache` gives on the same prefixes, request by request.
    assert_eq!(gateway["tokens_after"], cache["tokens_after"]);
    assert_eq!(gateway["replay_cost"], cache["replay_cost"]);
    assert!(gateway["tokens_after"].as_u64() < full["tokens_after"].as_u64());
    assert!(gateway["replay_cost"].as_f64() < full["replay_cost"].as_f64());

    // After the table: what the gateway sent and what the fake provider reported.
    let stderr = text(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("ctxgc: through the gateway: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    let number = |after: &str| -> u64 {
        line.split(after)
            .nth(1)
            .unwrap()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let requests = number("through the gateway: ");
    let incremental = number(" requests (");
    assert!(requests > 10, "{line}");
    // One request per conversation compiles from scratch; every other is incremental.
    assert_eq!(incremental, requests - 4, "{line}");
    assert!(number("provider usage: ") > 0, "{line}");
    assert!(number(" input tokens (") > 0, "{line}");
}
