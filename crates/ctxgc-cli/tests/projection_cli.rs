//! `ctxgc learn`, `trim`, `measure` and `report` as a user runs them: on the fixture traces
//! of the core crate and on the corpus, with reviewed edits, stdin, JSON output and errors.

mod common;
use common::ctxgc_stdin;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn ctxgc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(args)
        .output()
        .expect("ctxgc runs")
}

fn fixtures() -> Vec<String> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ctxgc-core/tests/fixtures/projection");
    (1..=5)
        .map(|n| {
            dir.join(format!("billing-{n}.jsonl"))
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

fn corpus(name: &str) -> Option<String> {
    let dir = std::env::var_os("CTXGC_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/corpus"
            ))
        });
    let path = dir.join(name);
    if path.is_file() {
        Some(path.to_string_lossy().into_owned())
    } else {
        eprintln!(
            "note: no corpus file {} (set CTXGC_CORPUS); skipping",
            path.display()
        );
        None
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

fn with<'a>(first: &[&'a str], rest: &'a [String]) -> Vec<&'a str> {
    first
        .iter()
        .copied()
        .chain(rest.iter().map(String::as_str))
        .collect()
}

/// The charge list of billing-1, as the tool returned it.
fn charge_list() -> String {
    let trace = std::fs::read_to_string(&fixtures()[0]).unwrap();
    let line = trace
        .lines()
        .find(|l| l.contains("stripe_list_charges"))
        .unwrap();
    let v: Value = serde_json::from_str(line).unwrap();
    v["output"].as_str().unwrap().to_owned()
}

fn learn_to(dir: &Path) -> PathBuf {
    let path = dir.join("projection.json");
    let f = fixtures();
    let out = ctxgc(&with(&["learn", "-o", path.to_str().unwrap()], &f));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("learned from 5 runs"),
        "{}",
        text(&out.stderr)
    );
    path
}

#[test]
fn learn_writes_a_reviewable_projection() {
    let dir = tempfile::tempdir().unwrap();
    let path = learn_to(dir.path());
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(p["ctxgc_projection"], 1);
    let charges = &p["tools"]["stripe_list_charges"];
    let dropped: Vec<&str> = charges["drop"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert!(dropped.contains(&"data[].receipt_url"), "{dropped:?}");
    let kept: Vec<&str> = charges["keep"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert!(
        kept.contains(&"data[].id") && kept.contains(&"data[].failure_message"),
        "{kept:?}"
    );
    for d in charges["drop"].as_array().unwrap() {
        assert!(d["seen"].as_u64().unwrap() >= 3 && d["used"] == 0, "{d}");
    }
    // To stdout without -o, the same bytes.
    let f = fixtures();
    let out = ctxgc(&with(&["learn"], &f));
    assert_eq!(text(&out.stdout), std::fs::read_to_string(&path).unwrap());
}

#[test]
fn learn_recallable_hides_unused_identifying_fields_and_says_so_in_its_rules() {
    let f = fixtures();
    let fields = |p: &Value, tool: &str, list: &str| -> Vec<String> {
        p["tools"][tool][list]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|d| d["field"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let learn = |extra: &[&str]| -> Value {
        let mut args = vec!["learn"];
        args.extend_from_slice(extra);
        let out = ctxgc(&with(&args, &f));
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_str(&text(&out.stdout)).unwrap()
    };
    let fingerprint = "data[].payment_method_details.card.fingerprint";
    let default = learn(&[]);
    assert!(
        default["rules"].get("recallable").is_none(),
        "{}",
        default["rules"]
    );
    assert!(fields(&default, "stripe_list_charges", "keep").contains(&fingerprint.to_owned()));
    let recallable = learn(&["--recallable"]);
    assert_eq!(recallable["rules"]["recallable"], true);
    assert_eq!(recallable["rules"]["max_used_share"], 0.1);
    let dropped = fields(&recallable, "stripe_list_charges", "drop");
    assert!(dropped.contains(&fingerprint.to_owned()), "{dropped:?}");
    // Used identifying fields stay.
    let kept = fields(&recallable, "stripe_list_charges", "keep");
    assert!(kept.contains(&"data[].id".to_owned()), "{kept:?}");
    // An explicit share wins over the preset's.
    let strict = learn(&["--recallable", "--max-used-share", "0"]);
    assert_eq!(strict["rules"]["max_used_share"], 0.0);
    // measure takes the same flag, and says what a miss means under it.
    let out = ctxgc(&with(&["measure", "--recallable"], &f));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("costs a recall"),
        "{}",
        text(&out.stdout)
    );
    let out = ctxgc(&with(&["measure"], &f));
    assert!(!text(&out.stdout).contains("costs a recall"));
}

#[test]
fn trim_hides_dropped_fields_and_respects_edits() {
    let dir = tempfile::tempdir().unwrap();
    let path = learn_to(dir.path());
    let raw = charge_list();
    let p = path.to_str().unwrap();
    let out = ctxgc_stdin(
        &["trim", "--projection", p, "--tool", "stripe_list_charges"],
        raw.as_bytes(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    let body = shown.lines().next().unwrap();
    assert!(!body.contains("receipt_url"), "{shown}");
    assert!(body.contains("ch_009A7") && body.contains("Your card was declined."));
    assert_eq!(
        shown.trim_end().lines().count(),
        2,
        "the output and one footer line"
    );
    assert!(shown.lines().nth(1).unwrap().starts_with("[hidden: "));
    assert!(text(&out.stderr).contains("reference"));
    // --json carries the receipt: the original, under the footer's reference.
    let out = ctxgc_stdin(
        &[
            "trim",
            "--projection",
            p,
            "--tool",
            "stripe_list_charges",
            "--json",
            "-",
        ],
        raw.as_bytes(),
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outcome"], "trimmed");
    assert_eq!(v["receipt"]["original"], raw.as_str());
    assert!(v["tokens_after"].as_u64() < v["tokens_before"].as_u64());
    // A person turns the tool off: re-serialised, nothing hidden.
    let mut edited: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edited["tools"]["stripe_list_charges"]["trim"] = Value::Bool(false);
    std::fs::write(&path, edited.to_string()).unwrap();
    let out = ctxgc_stdin(
        &["trim", "--projection", p, "--tool", "stripe_list_charges"],
        raw.as_bytes(),
    );
    let shown = text(&out.stdout);
    assert!(
        shown.contains("receipt_url") && !shown.contains("[hidden:"),
        "{shown}"
    );
    assert!(
        text(&out.stderr).contains("nothing hidden (trim off)"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn measure_prints_leave_one_out_figures() {
    let f = fixtures();
    let out = ctxgc(&with(&["measure", "--json"], &f));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "tool_tokens_before",
        "tool_tokens_after",
        "calls",
        "misses",
        "calls_total",
        "reserialisation_share",
    ] {
        assert!(m["overall"].get(key).is_some(), "overall.{key}");
        assert!(
            m["per_tool"]["stripe_list_charges"].get(key).is_some(),
            "per_tool.{key}"
        );
    }
    assert_eq!(m["overall"]["calls_total"], 15);
    let out = ctxgc(&with(&["measure", "--per-tool"], &f));
    let table = text(&out.stdout);
    assert!(
        table.contains("stripe_list_charges") && table.contains("all tools"),
        "{table}"
    );
}

#[test]
fn report_writes_a_page_and_its_json() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let f = fixtures();
    let out = ctxgc(&with(&["report", "-o", html.to_str().unwrap()], &f));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("stripe_list_charges"));
    assert!(
        !page.contains("http://") || page.contains("xmlns=\"http://www.w3.org/2000/svg\""),
        "no external assets"
    );
    assert!(
        !page.contains("<script") && !page.contains("<link"),
        "self-contained"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap())
            .unwrap();
    assert_eq!(json["runs"], 5);
    assert!(
        json["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "automatic")
    );
    // Byte-identical the second time.
    let out = ctxgc(&with(&["report", "-o", html.to_str().unwrap()], &f));
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(&html).unwrap(), page);
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"kind\": \"call\", \"tool\": 1, \"output\": \"x\"}\n",
    )
    .unwrap();
    let out = ctxgc(&["learn", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("bad.jsonl") && text(&out.stderr).contains("field \"tool\""),
        "{}",
        text(&out.stderr)
    );
    let bad_projection = dir.path().join("p.json");
    std::fs::write(
        &bad_projection,
        "{\"ctxgc_projection\": 1, \"tools\": {\"t\": {\"drop\": 3}}}",
    )
    .unwrap();
    let out = ctxgc_stdin(
        &[
            "trim",
            "--projection",
            bad_projection.to_str().unwrap(),
            "--tool",
            "t",
        ],
        b"{}",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("p.json: projection: line 1"),
        "{}",
        text(&out.stderr)
    );
    let out = ctxgc(&["measure", "--max-used-share", "2", &fixtures()[0]]);
    assert_eq!(out.status.code(), Some(2));
    let out = ctxgc(&["learn", "/nonexistent/trace.jsonl"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("/nonexistent/trace.jsonl"));
}

#[test]
fn the_commands_work_on_the_corpus() {
    let Some(path) = corpus("tau-bench-airline-gpt4o.jsonl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let projection = dir.path().join("p.json");
    let out = ctxgc(&["learn", &path, "-o", projection.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("learned from 122 runs"),
        "{}",
        text(&out.stderr)
    );
    let out = ctxgc(&["measure", &path, "--json"]);
    assert!(out.status.success());
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["runs"], 122);
    assert!(
        m["overall"]["tool_tokens_after"].as_u64() < m["overall"]["tool_tokens_before"].as_u64()
    );
    // A search output of the corpus through `trim`.
    let corpus_text = std::fs::read_to_string(&path).unwrap();
    let record: Value = serde_json::from_str(corpus_text.lines().next().unwrap()).unwrap();
    let search = record["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "search_direct_flight")
        .expect("the first run searches flights");
    let out = ctxgc_stdin(
        &[
            "trim",
            "--projection",
            projection.to_str().unwrap(),
            "--tool",
            "search_direct_flight",
        ],
        search["content"].as_str().unwrap().as_bytes(),
    );
    assert!(out.status.success());
    assert!(text(&out.stdout).len() < search["content"].as_str().unwrap().len());
    let html = dir.path().join("r.html");
    let out = ctxgc(&["report", &path, "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(dir.path().join("r.json").is_file());
}
