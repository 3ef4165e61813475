//! Replayed cost on hand-made request sequences: appending is cheap, editing early history is
//! paid for every turn after it.

mod common;

use common::{DropItems, Msg, bench_conversations, config, metrics, transcript};
use ctxgc_bench::context::{Context, Segment, SegmentKind};
use ctxgc_bench::replay::{CacheModel, Replayer, TokenCache};
use ctxgc_bench::run::BenchConfig;
use ctxgc_core::Tokenizer;
use serde_json::json;

fn context(texts: &[&str]) -> Context {
    Context {
        segments: texts
            .iter()
            .map(|t| Segment {
                text: (*t).to_owned(),
                kind: SegmentKind::Content,
            })
            .collect(),
        ..Context::default()
    }
}

fn bill(requests: &[&[&str]], model: CacheModel) -> (f64, u64, u64) {
    let mut tokens = TokenCache::new(Tokenizer::O200kBase);
    let mut replay = Replayer::default();
    for r in requests {
        replay.send(&context(r), &mut tokens, model);
    }
    (
        replay.bill.cost,
        replay.bill.input_tokens,
        replay.bill.cached_tokens,
    )
}

const A: &str = "system: You are a careful agent working on the billing ledger.\n";
const B: &str = "user: Please reconcile invoice inv_2024_0042 against the ledger.\n";
const C: &str = "tool: [result of c1] ledger row 42: 1250.00 EUR, status open\n";
const C_EDITED: &str = "tool: [result of c1] [tool result cleared]\n";
const D: &str = "assistant: The invoice matches the ledger row.\n";

fn tokens(text: &str) -> f64 {
    Tokenizer::O200kBase.count(text) as f64
}

#[test]
fn an_append_only_history_reads_every_earlier_request_from_the_cache() {
    let model = CacheModel::default();
    let (cost, input, cached) = bill(&[&[A, B], &[A, B, C], &[A, B, C, D]], model);
    let (a, b, c, d) = (tokens(A), tokens(B), tokens(C), tokens(D));
    let expected = 1.25 * (a + b) + (0.1 * (a + b) + 1.25 * c) + (0.1 * (a + b + c) + 1.25 * d);
    assert!((cost - expected).abs() < 1e-9, "{cost} vs {expected}");
    assert_eq!(input as f64, 3.0 * (a + b) + 2.0 * c + d);
    assert_eq!(cached as f64, 2.0 * (a + b) + c);
}

#[test]
fn editing_early_history_pays_for_everything_after_the_edit() {
    let model = CacheModel::default();
    let (append_only, ..) = bill(&[&[A, B, C], &[A, B, C, D], &[A, B, C, D, B]], model);
    // The same requests, but from the second one on the tool result is rewritten: the cache
    // breaks at C once, then holds again.
    let (edit_once, ..) = bill(
        &[&[A, B, C], &[A, B, C_EDITED, D], &[A, B, C_EDITED, D, B]],
        model,
    );
    // An edit that moves every turn (as a sliding window does) breaks it every time.
    let (edit_every_turn, ..) = bill(&[&[A, B, C], &[B, C, D], &[C, D, B]], model);
    assert!(edit_once > append_only, "{edit_once} <= {append_only}");
    assert!(
        edit_every_turn > edit_once,
        "{edit_every_turn} <= {edit_once}"
    );
    // The exact price of the one edit: C_EDITED and D written instead of D alone, A and B
    // still read.
    let (a, b, c, ce, d) = (tokens(A), tokens(B), tokens(C), tokens(C_EDITED), tokens(D));
    let expected = 1.25 * (a + b + c)
        + (0.1 * (a + b) + 1.25 * (ce + d))
        + (0.1 * (a + b + ce + d) + 1.25 * b);
    assert!((edit_once - expected).abs() < 1e-9);
}

#[test]
fn the_multipliers_are_configurable() {
    let free_reads = CacheModel {
        cache_read: 0.0,
        cache_write: 1.0,
    };
    let (cost, ..) = bill(&[&[A], &[A, B]], free_reads);
    assert!((cost - (tokens(A) + tokens(B))).abs() < 1e-9);
}

/// A transcript long enough that where an edit happens matters.
fn support_session() -> ctxgc_core::frontend::Conversation {
    let mut messages = vec![
        Msg::System("You are a support agent. Look orders up before answering."),
        Msg::User("Where are my orders ord_1001, ord_1002, ord_1003 and ord_1004?"),
    ];
    let ids = ["c1", "c2", "c3", "c4"];
    let orders = ["ord_1001", "ord_1002", "ord_1003", "ord_1004"];
    let outputs = [
        r#"{"order": "ord_1001", "status": "shipped", "carrier": "DHL", "tracking": "JD0142"}"#,
        r#"{"order": "ord_1002", "status": "packing", "carrier": "UPS", "tracking": "1Z0043"}"#,
        r#"{"order": "ord_1003", "status": "delivered", "carrier": "DHL", "tracking": "JD0190"}"#,
        r#"{"order": "ord_1004", "status": "cancelled", "carrier": null, "tracking": null}"#,
    ];
    for k in 0..4 {
        messages.push(Msg::Call(
            ids[k],
            "get_order",
            json!({"order_id": orders[k]}),
        ));
        messages.push(Msg::Result(ids[k], outputs[k]));
    }
    messages.push(Msg::Assistant(
        "ord_1001 shipped with DHL (JD0142); the rest follow.",
    ));
    transcript(&messages)
}

#[test]
fn a_strategy_that_edits_history_early_pays_more_than_full_a_stable_edit_pays_less() {
    let strategies = || -> BenchConfig {
        let mut cfg = config(&[
            "full",
            "clear-tool-results:trigger=0,keep=1",
            "truncate-events:n=4",
        ]);
        // Drops the user's question from the history once the agent has it in hand: an edit
        // near the start of every request after the first.
        cfg.strategies.push(Box::new(DropItems {
            name: "drop-question",
            ids: vec!["m1"],
            stub: false,
        }));
        cfg
    };
    let report = bench_conversations(vec![support_session()], &strategies());
    let full = &metrics(&report, 0, "full").replay;
    assert_eq!(full.relative_to_full, Some(1.0));
    assert_eq!(full.requests, 5);
    // Dropping m1 from every request is a stable edit: the requests still extend each other.
    let dropped = &metrics(&report, 0, "drop-question").replay;
    assert!(dropped.relative_to_full.unwrap() < 1.0);
    // Clearing all but the latest result moves the edit point every turn: every request
    // rewrites the result the previous one still had.
    let cleared = metrics(&report, 0, "clear-tool-results:trigger=0,keep=1");
    assert!(cleared.tokens_after < cleared.tokens_before);
    assert!(
        cleared.replay.cached_tokens < full.cached_tokens,
        "{} >= {}",
        cleared.replay.cached_tokens,
        full.cached_tokens
    );
    // A sliding window rewrites the start of every request once it is full: smaller, and
    // dearer than sending everything.
    let window = metrics(&report, 0, "truncate-events:n=4");
    assert!(window.tokens_after < window.tokens_before);
    let relative = window.replay.relative_to_full.unwrap();
    assert!(relative > 1.0, "sliding window cost {relative} of full");
}
