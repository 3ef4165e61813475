//! Used-value survival on hand-made transcripts: misses that must be found, and none where
//! nothing the agent used was lost.

mod common;

use common::{DropItems, Msg, bench_conversations, bench_text, config, metrics, transcript};
use ctxgc_bench::run::BenchConfig;
use serde_json::json;

/// An airline transcript: the agent looks up a reservation, then quotes the flight and price
/// the tool returned, then books with them.
fn airline() -> ctxgc_core::frontend::Conversation {
    transcript(&[
        Msg::System("You are an airline support agent."),
        Msg::User("Hi, my reservation is 0U4NPP, can I upgrade?"),
        Msg::Call(
            "call_1",
            "get_reservation",
            json!({"reservation_id": "0U4NPP"}),
        ),
        Msg::Result(
            "call_1",
            r#"{"flight": "HAT123", "cabin": "economy", "upgrade_price": 1250}"#,
        ),
        Msg::Assistant("Flight HAT123 can be upgraded for 1250 dollars. Shall I?"),
        Msg::User("Yes please."),
        Msg::Call(
            "call_2",
            "upgrade",
            json!({"reservation_id": "0U4NPP", "flight": "HAT123", "cabin": "business"}),
        ),
        Msg::Result("call_2", "ok"),
        Msg::Assistant("Done: 0U4NPP is now in business."),
    ])
}

#[test]
fn full_history_misses_nothing_and_counts_every_use() {
    let report = bench_conversations(vec![airline()], &config(&["full"]));
    let m = metrics(&report, 0, "full");
    // Turns: m2 uses 0U4NPP; m4 uses HAT123 and 1250; m6 uses 0U4NPP and HAT123 ("business"
    // appeared nowhere before); m8 uses 0U4NPP.
    assert_eq!(m.survival.turns, 4);
    assert_eq!(m.survival.used_values, 6);
    assert_eq!(m.survival.missed_values, 0);
    assert_eq!(m.survival.turns_with_miss, 0);
    assert!(m.survival.misses.is_empty());
}

#[test]
fn a_cleared_tool_result_is_a_miss_for_every_value_used_from_it() {
    // Clearing everything above 0 tokens, keeping no result: the lookup's output is gone
    // before the agent quotes it.
    let report = bench_conversations(
        vec![airline()],
        &config(&["clear-tool-results:trigger=0,keep=0"]),
    );
    let m = metrics(&report, 0, "clear-tool-results:trigger=0,keep=0");
    let missed: Vec<(&str, &str, &str)> = m
        .survival
        .misses
        .iter()
        .map(|x| (x.turn_id.as_str(), x.value.as_str(), x.source_id.as_str()))
        .collect();
    // HAT123 at m6 is still visible in the agent's own message m4, so only m4's uses miss.
    assert_eq!(missed, vec![("m4", "HAT123", "m3"), ("m4", "1250", "m3")]);
    assert_eq!(m.survival.missed_values, 2);
    assert_eq!(m.survival.turns_with_miss, 1);
}

#[test]
fn the_default_trigger_leaves_a_short_conversation_alone() {
    let report = bench_conversations(vec![airline()], &config(&["clear-tool-results"]));
    let m = metrics(&report, 0, "clear-tool-results");
    assert_eq!(m.survival.missed_values, 0);
    assert_eq!(m.tokens_after, m.tokens_before);
}

#[test]
fn a_value_only_in_a_dropped_item_is_a_miss_unless_a_stub_makes_it_recoverable() {
    let report = |stub: bool| {
        let cfg = BenchConfig {
            strategies: vec![Box::new(DropItems {
                name: "drop-m1",
                ids: vec!["m1"],
                stub,
            })],
            timing: false,
            explain: true,
            ..BenchConfig::default()
        };
        bench_conversations(vec![airline()], &cfg)
    };
    // Without a stub: the reservation number is only in the user's message m1.
    let dropped = report(false);
    let m = metrics(&dropped, 0, "drop-m1");
    let missed: Vec<(&str, &str)> = m
        .survival
        .misses
        .iter()
        .map(|x| (x.turn_id.as_str(), x.value.as_str()))
        .collect();
    // m2 needs it before anything else holds it; m6 and m8 still find it in the agent's own
    // call m2.
    assert_eq!(missed, vec![("m2", "0U4NPP")]);
    // With a stub that names m1 (and the original held), it is recoverable: no miss.
    let stubbed = report(true);
    assert_eq!(metrics(&stubbed, 0, "drop-m1").survival.missed_values, 0);
}

#[test]
fn values_are_matched_as_whole_words_and_short_values_are_not_counted() {
    let conversation = transcript(&[
        Msg::User("Order 12 of customer 4471 is ord_9921x"),
        // "4471" appears earlier; "ord_992" does not (only inside the longer ord_9921x);
        // "12" is too short to count.
        Msg::Call(
            "c1",
            "lookup",
            json!({"customer": 4471, "order": "ord_992", "n": 12}),
        ),
    ]);
    let report = bench_conversations(vec![conversation], &config(&["full"]));
    let m = metrics(&report, 0, "full");
    assert_eq!(m.survival.used_values, 1);
}

#[test]
fn truncation_to_one_event_loses_the_value_ctxgc_keeps_a_receipt_for() {
    // The agent uses the superseded value: ctxgc retires e1 and its stub names it, so with a
    // recall tool offered the value is recalled (one priced recall); without one the stub can
    // be redeemed by nobody and it is lost; a one-event window drops it outright.
    let trace = r#"[
      {"id": "e1", "type": "set_var", "timestamp": 1, "key": "cfg", "value": "cfg_alpha_01"},
      {"id": "e2", "type": "set_var", "timestamp": 2, "key": "cfg", "value": "cfg_beta_02"},
      {"id": "e3", "type": "tool_call", "timestamp": 3, "tool_name": "compare", "arguments": {"old": "cfg_alpha_01", "new": "cfg_beta_02"}}
    ]"#;
    let report = bench_text(
        "trace.json",
        trace,
        &config(&["full", "ctxgc", "ctxgc-recall", "truncate-events:n=1"]),
    );
    assert_eq!(metrics(&report, 0, "full").survival.used_values, 2);
    let recalled = metrics(&report, 0, "ctxgc-recall");
    assert_eq!(recalled.survival.missed_values, 0);
    assert_eq!(
        (
            recalled.survival.recovered_values,
            recalled.survival.recalls
        ),
        (1, 1)
    );
    assert_eq!(recalled.replay.recall_requests, 1);
    assert_eq!(metrics(&report, 0, "ctxgc").survival.missed_values, 1);
    assert_eq!(metrics(&report, 0, "ctxgc").survival.recalls, 0);
    let truncated = metrics(&report, 0, "truncate-events:n=1");
    assert_eq!(truncated.survival.missed_values, 1);
    let miss = &truncated.survival.misses[0];
    assert_eq!(
        (
            miss.turn_id.as_str(),
            miss.value.as_str(),
            miss.source_id.as_str()
        ),
        ("e3", "cfg_alpha_01", "e1")
    );
}

#[test]
fn misses_are_listed_only_when_asked_for() {
    let mut cfg = config(&["clear-tool-results:trigger=0,keep=0"]);
    cfg.explain = false;
    let report = bench_conversations(vec![airline()], &cfg);
    let m = metrics(&report, 0, "clear-tool-results:trigger=0,keep=0");
    assert_eq!(m.survival.missed_values, 2);
    assert!(m.survival.misses.is_empty());
}
