//! The example of docs/chat.md: an airline cabin change, compiled to what is still true.
//! The snapshot (`tests/snapshots/chat_readme__airline_cabin_change.snap`) pins the output.

use ctxgc_core::{Action, Options, compile};
use serde_json::Value;

mod common;

#[test]
fn airline_cabin_change() {
    let text = common::chat_fixture("airline_cabin_change.json");
    let compiled = compile(&text, &Options::default()).unwrap();
    let report = compiled.chat.as_ref().unwrap();
    let output: Value = serde_json::from_str(&compiled.output).unwrap();
    let mut shown = String::new();
    for m in output.as_array().unwrap() {
        shown.push_str(&format!(
            "{}: {}\n",
            m["role"].as_str().unwrap(),
            m["content"].as_str().unwrap()
        ));
    }
    shown.push_str("--- decisions\n");
    for d in compiled
        .decisions
        .iter()
        .filter(|d| d.action != Action::Keep)
    {
        shown.push_str(&format!(
            "{} {:?} {} by [{}]\n",
            d.id,
            d.action,
            d.reason.map_or("", |r| r.code()),
            d.by.join(", ")
        ));
    }
    shown.push_str("--- orphan check\n");
    for (turn, keys) in &report.orphan_check.still_required {
        shown.push_str(&format!(
            "still required: {turn} supports {}\n",
            keys.join(", ")
        ));
    }
    shown.push_str(&format!(
        "orphaned facts: {}\n",
        if report.orphan_check.ok {
            "none".to_owned()
        } else {
            report.orphan_check.orphaned.join(", ")
        }
    ));
    shown.push_str(&format!(
        "--- tokens (o200k_base)\n{} -> {}\n",
        compiled.tokens_before, compiled.tokens_after
    ));
    insta::assert_snapshot!(shown);
    assert!(report.validation.ok);
}
