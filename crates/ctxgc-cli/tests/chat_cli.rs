//! `ctxgc` on chat transcripts as a user meets it: in a pipe, `--json`, records, `explain`,
//! `receipt`, `--schema`, `--to`, and usage errors.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn fixture(name: &str) -> String {
    format!(
        "{}/../ctxgc-core/tests/fixtures/chat/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn ctxgc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(args)
        .output()
        .expect("ctxgc runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

#[test]
fn compile_prints_the_message_list_so_it_can_sit_in_a_pipe() {
    let text = std::fs::read(fixture("airline_cabin_change.json")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(["compile", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&text).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let messages: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(messages.len(), 8);
    assert!(
        messages[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("[ACTIVE_AGENT_STATE]")
    );
}

#[test]
fn json_puts_the_output_under_output_with_the_report() {
    let out = ctxgc(&["compile", "--json", &fixture("airline_cabin_change.json")]);
    assert!(out.status.success());
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(
        v["output"].is_array(),
        "the message list itself, not a string"
    );
    assert_eq!(v["chat"]["register"][0]["key"], "active_reservation");
    assert_eq!(v["chat"]["orphan_check"]["ok"], true);
    assert!(
        v["chat"]["payloads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["id"] == "m4" && p["after"] == 0)
    );
}

#[test]
fn records_give_one_line_each() {
    let out = ctxgc(&["compile", &fixture("corpus_samples.jsonl")]);
    assert!(out.status.success());
    assert_eq!(stdout(&out).lines().count(), 4);
    let out = ctxgc(&["compile", "--json", &fixture("corpus_samples.jsonl")]);
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert!(
        lines
            .iter()
            .all(|l| l["id"].is_string() && l["output"]["messages"].is_array())
    );
}

#[test]
fn explain_lists_retirements_register_declarations_and_orphans() {
    let out = ctxgc(&["explain", &fixture("anthropic_session.json")]);
    let text = stdout(&out);
    assert!(
        text.contains("m4 rewritten [duplicate-result] by m2"),
        "{text}"
    );
    assert!(
        text.contains("allergy = \"peanut\" (supported by m1, pinned)"),
        "{text}"
    );
    assert!(
        text.contains("declaration in m4 (item 5): {\"event\":\"untrusted\",\"role\":\"tool\"}"),
        "{text}"
    );
    assert!(text.contains("orphaned facts: none"));
    // The doc of the pass that emits the code, which speaks of both its forms.
    let out = ctxgc(&["explain", "--code", "superseded-fact"]);
    let doc = stdout(&out);
    assert!(
        doc.starts_with("`superseded-var` and `superseded-fact`: a value that a later value"),
        "{doc}"
    );
    assert!(doc.contains("`superseded-fact`: an assistant turn all of whose declared facts"));
}

#[test]
fn receipt_gives_back_the_original_bytes() {
    let out = ctxgc(&["receipt", &fixture("airline_cabin_change.json"), "m4"]);
    assert!(out.status.success());
    let original = std::fs::read_to_string(fixture("airline_cabin_change.json")).unwrap();
    let raw = stdout(&out);
    assert!(original.contains(raw.trim_end()));
    assert!(raw.contains("Upgrading you now."));
}

#[test]
fn schemas_from_a_file_and_bad_flags() {
    let schema = std::env::temp_dir().join(format!("ctxgc-chat-cli-{}.json", std::process::id()));
    std::fs::write(
        &schema,
        r#"{"keys": {"cabin_class": {"enum": ["business", "first"]}}, "additional_keys": false}"#,
    )
    .unwrap();
    let out = ctxgc(&[
        "compile",
        "--json",
        "--schema-policy",
        "reject",
        "--schema",
        schema.to_str().unwrap(),
        &fixture("airline_cabin_change.json"),
    ]);
    let _ = std::fs::remove_file(&schema);
    assert!(out.status.success());
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let rejected = v["chat"]["declarations"].as_array().unwrap();
    assert_eq!(
        rejected.len(),
        3,
        "active_reservation (unknown), cabin_class economy twice"
    );
    assert_eq!(v["chat"]["register"][0]["value"], "business");
    for args in [
        vec!["compile", "--preset", "extreme", "x.json"],
        vec!["compile", "--schema-policy", "maybe", "x.json"],
        vec!["compile", "--to", "yaml", "x.json"],
    ] {
        let out = ctxgc(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn to_writes_another_format() {
    let out = ctxgc(&[
        "compile",
        "--to",
        "anthropic",
        &fixture("airline_cabin_change.json"),
    ]);
    assert!(out.status.success());
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["system"][0]["text"], "You are an airline support agent.");
    assert_eq!(v["messages"][0]["role"], "user");
}

/// A coding session of twenty answered reads, 55k tokens of output.
fn coding_session() -> String {
    let mut messages =
        vec![serde_json::json!({"role": "system", "content": "You are a coding agent."})];
    for k in 0..20 {
        let file: String = (0..120)
            .map(|i| format!("line {i}: pub fn handler_{k}_{i}(request: &Request) -> Response {{ Response::ok() }}\n"))
            .collect();
        messages.push(
            serde_json::json!({"role": "user", "content": format!("Look at src/mod_{k}.rs.")}),
        );
        messages.push(
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": format!("c{k}"), "type": "function", "function": {"name": "read_file",
            "arguments": serde_json::json!({"path": format!("src/mod_{k}.rs")}).to_string()}}]}),
        );
        messages.push(
            serde_json::json!({"role": "tool", "tool_call_id": format!("c{k}"), "content": file}),
        );
        messages
            .push(serde_json::json!({"role": "assistant", "content": format!("mod_{k} read.")}));
    }
    Value::Array(messages).to_string()
}

#[test]
fn mask_after_sets_how_many_agent_turns_an_output_stays_whole() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("coding.json");
    std::fs::write(&path, coding_session()).expect("write");
    let masked = |extra: &[&str]| {
        let path = path.to_str().expect("utf-8 path");
        let mut args = vec![
            "compile",
            path,
            "--preset",
            "cache-stable",
            "--expand-tool",
            "ctxgc_recall",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = ctxgc(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
        report["decisions"]
            .as_array()
            .expect("decisions")
            .iter()
            .filter(|d| d["reason"] == "masked-output")
            .count()
    };
    // The default masks every read but the last two (within 3 agent turns of the end).
    assert_eq!(masked(&[]), 18);
    assert_eq!(masked(&["--mask-after", "10"]), 13);
    assert_eq!(masked(&["--mask-after", "0"]), 0);
}

#[test]
fn eager_pins_the_default_passes_taken_at_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let coding = dir.path().join("coding.json");
    std::fs::write(&coding, coding_session()).expect("write");
    let coding = coding.to_str().expect("utf-8 path").to_owned();
    let airline = fixture("airline_cabin_change.json");
    for path in [airline.as_str(), coding.as_str()] {
        let run = |extra: &[&str]| {
            let mut args = vec!["compile", path, "--expand-tool", "ctxgc_recall", "--json"];
            args.extend_from_slice(extra);
            let out = ctxgc(&args);
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            out.stdout
        };
        let eager = run(&["--preset", "eager"]);
        assert_eq!(eager, run(&[]), "{path}: eager is today's default");
        assert_ne!(
            eager,
            run(&["--preset", "cache-stable"]),
            "{path}: eager takes decisions cache-stable defers"
        );
    }
    let out = ctxgc(&["compile", "--preset", "lazy", &airline]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("eager"),
        "the error lists every preset"
    );
}
