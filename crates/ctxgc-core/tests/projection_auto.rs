//! Automatic mode: observe first, then trim; back off from a tool the agent expands too
//! often; survive a restart.

use ctxgc_core::projection::apply::ReceiptStore;
use ctxgc_core::projection::auto::{AutoConfig, AutoTrim};
use serde_json::json;

fn output(i: usize) -> String {
    json!({
        "order_id": format!("ORD{i}X"),
        "total": 100 + i,
        "warehouse": {"bay": format!("bay number {}", i % 3), "notes": "packed by the night shift and scanned twice at the gate"},
    })
    .to_string()
}

fn config() -> AutoConfig {
    AutoConfig {
        min_runs: 3,
        min_trimmed_to_judge: 2,
        max_expand_share: 0.5,
        ..AutoConfig::default()
    }
}

/// One run: the agent looks an order up and quotes its total.
fn run_once(tt: &mut AutoTrim, i: usize) -> String {
    tt.prompt("You are an order assistant.");
    tt.user("What is my order total?");
    let shown = tt.output("get_order", &json!({"order": i}), &output(i));
    tt.done(&format!("Your total is {}.", 100 + i));
    shown
}

#[test]
fn observes_the_first_runs_unchanged_then_trims() {
    let mut tt = AutoTrim::new(config());
    for i in 0..3 {
        assert_eq!(run_once(&mut tt, i), output(i), "run {i} is observed");
        assert_eq!(tt.is_trimming(), i == 2, "trimming starts after min_runs");
    }
    let shown = run_once(&mut tt, 3);
    assert!(shown.contains("\"total\":103"), "{shown}");
    assert!(shown.contains("[hidden: warehouse"), "{shown}");
    assert!(!shown.contains("night shift"));
    let stats = &tt.tool_stats()["get_order"];
    assert_eq!((stats.outputs, stats.trimmed), (4, 1));
    assert!(stats.tokens_out < stats.tokens_in);
}

#[test]
fn runs_without_an_answer_do_not_teach() {
    let mut tt = AutoTrim::new(config());
    for i in 0..5 {
        tt.output("get_order", "{\"order\": 1}", &output(i));
        tt.end_without_answer();
    }
    assert!(!tt.is_trimming());
    assert_eq!(tt.runs_learned(), 0);
    assert_eq!(tt.report("t").calls, 5, "they count for the report");
}

#[test]
fn expand_gives_the_original_back_and_counts_as_use() {
    let mut tt = AutoTrim::new(config());
    for i in 0..3 {
        run_once(&mut tt, i);
    }
    let shown = tt.output("get_order", &json!({"order": 7}), &output(7));
    let reference = shown
        .rsplit("ref \"")
        .next()
        .unwrap()
        .trim_end_matches("\"]")
        .to_owned();
    let back = tt
        .expand(&json!({"ref": reference, "fields": ["*"]}))
        .unwrap();
    assert_eq!(back, output(7));
    let notes = tt
        .expand(format!(r#"{{"ref": "{reference}", "fields": ["warehouse.notes"]}}"#).as_str())
        .unwrap();
    assert_eq!(
        notes,
        r#"{"warehouse.notes":"packed by the night shift and scanned twice at the gate"}"#
    );
    tt.done("Total 107, packed by the night shift.");
    // The expanded fields were used: learning keeps them from now on.
    let shown = run_once(&mut tt, 8);
    assert!(shown.contains("night shift"), "{shown}");
}

#[test]
fn a_tool_expanded_too_often_is_no_longer_trimmed_and_the_report_says_so() {
    let mut tt = AutoTrim::new(AutoConfig {
        min_trimmed_to_judge: 1,
        ..config()
    });
    for i in 0..3 {
        run_once(&mut tt, i);
    }
    let shown = tt.output("get_order", &json!({"order": 3}), &output(3));
    assert!(shown.contains("[hidden:"), "{shown}");
    let r = shown
        .rsplit("ref \"")
        .next()
        .unwrap()
        .trim_end_matches("\"]");
    tt.expand(&json!({"ref": r, "fields": ["warehouse.bay"]}))
        .unwrap();
    // Asking twice for the same output counts once.
    tt.expand(&json!({"ref": r, "fields": ["warehouse.notes"]}))
        .unwrap();
    assert_eq!(tt.tool_stats()["get_order"].expanded, 1);
    tt.done("Your total is 103.");
    let disabled = tt.disabled_tools();
    assert!(disabled["get_order"].contains("asked back"), "{disabled:?}");
    let shown = run_once(&mut tt, 9);
    assert_eq!(shown, output(9), "no longer trimmed");
    let report = tt.report("auto");
    let tool = report.tools.iter().find(|t| t.tool == "get_order").unwrap();
    assert!(tool.disabled.is_some());
    assert!(report.actions[0].text.contains("no longer trimmed"));
}

#[test]
fn state_survives_a_restart() {
    let mut tt = AutoTrim::new(config());
    for i in 0..3 {
        run_once(&mut tt, i);
    }
    // A run in progress when the process stops.
    let shown = tt.output("get_order", &json!({"order": 4}), &output(4));
    let saved = tt.to_json();
    let store = tt.store().clone();
    let mut resumed = AutoTrim::from_json(&saved).unwrap();
    assert!(resumed.is_trimming());
    assert_eq!(resumed.runs_learned(), 3);
    assert_eq!(resumed.state(), tt.state());
    // With the receipts carried over (a persistent store), expand still answers.
    *resumed.store_mut() = store;
    let reference = shown
        .rsplit("ref \"")
        .next()
        .unwrap()
        .trim_end_matches("\"]");
    assert!(resumed.store().get(reference).unwrap().is_some());
    assert_eq!(
        resumed.expand(&json!({"ref": reference})).unwrap(),
        output(4)
    );
    let summary = resumed.done("Your total is 104.");
    assert_eq!((summary.outputs, summary.trimmed), (1, 1));
    // Bad state is an error, not a panic.
    assert!(AutoTrim::from_json("{").is_err());
    let wrong = saved.replacen("\"ctxgc_auto\":1", "\"ctxgc_auto\":9", 1);
    assert!(
        AutoTrim::from_json(&wrong)
            .unwrap_err()
            .to_string()
            .contains("version 9")
    );
}

#[test]
fn the_done_and_expand_tools_have_schemas() {
    let done = AutoTrim::done_tool();
    assert_eq!(done.name, "ctxgc_done");
    assert_eq!(done.input_schema["required"], json!(["answer"]));
    assert_eq!(AutoTrim::expand_tool().name, "expand");
    // What expand returns is never trimmed again, even when routed through `output`.
    let mut tt = AutoTrim::new(config());
    for i in 0..4 {
        run_once(&mut tt, i);
    }
    let recalled = output(5);
    assert_eq!(tt.output("expand", "{\"ref\": \"x\"}", &recalled), recalled);
    assert!(!tt.tool_stats().contains_key("expand"));
}
