//! Recall in the scoreboard: a hidden value counts as recoverable only when its stub names a
//! receipt *and* the request offers the recall tool; each recall is priced as one more request
//! carrying the recalled original. Also the strategies built on recall: `ctxgc-recall`,
//! `ctxgc-projection` (projections learned leave-one-out) and `mask-observations` on long
//! sessions.

mod common;

use common::{
    DropItems, Msg, bench_conversations, config, corpus_dir, metrics, totals, transcript,
};
use ctxgc_bench::context::Context;
use ctxgc_bench::run::{BenchConfig, InputFile, run};
use ctxgc_bench::strategy::{Prefix, Strategy, StrategyError};
use serde_json::json;

/// DropItems with a stub, in a request that offers no recall tool.
struct StubWithoutRecall(DropItems);

impl Strategy for StubWithoutRecall {
    fn name(&self) -> &str {
        "stub-no-recall"
    }
    fn description(&self) -> String {
        "stubs that name a receipt, no recall tool".into()
    }
    fn compact(&self, prefix: Prefix<'_>) -> Result<Context, StrategyError> {
        let mut context = self.0.compact(prefix)?;
        context.recall_offered = false;
        Ok(context)
    }
}

fn booking() -> ctxgc_core::frontend::Conversation {
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
    ])
}

#[test]
fn a_stub_is_a_recall_only_when_the_request_offers_the_recall_tool_and_each_recall_is_priced() {
    let drop = || DropItems {
        name: "drop-result",
        ids: vec!["m3"],
        stub: true,
    };
    let mut cfg = config(&["full"]);
    cfg.strategies.push(Box::new(drop()));
    cfg.strategies.push(Box::new(StubWithoutRecall(drop())));
    let report = bench_conversations(vec![booking()], &cfg);
    let full = metrics(&report, 0, "full");
    // HAT123 and 1250 are only in the result m3 when the agent writes m4 (m6 finds them in
    // m4 itself): one recall, for two values.
    let recalled = metrics(&report, 0, "drop-result");
    assert_eq!(recalled.survival.missed_values, 0);
    assert_eq!(recalled.survival.recovered_values, 2);
    assert_eq!(recalled.survival.recalls, 1);
    assert_eq!(recalled.replay.recall_requests, 1);
    assert_eq!(recalled.replay.requests, full.replay.requests);
    assert!(recalled.replay.recalled_tokens > 0);
    let lost = metrics(&report, 0, "stub-no-recall");
    assert_eq!(lost.survival.recalls, 0);
    assert_eq!(lost.replay.recall_requests, 0);
    assert_eq!(
        lost.survival.missed_values,
        recalled.survival.recovered_values
    );
    // The recalls are in the bill: the same context without them costs less.
    assert!(recalled.replay.cost > lost.replay.cost);
    let extra = recalled.replay.cost - lost.replay.cost;
    let recalled_tokens = recalled.replay.recalled_tokens as f64;
    assert!(extra >= 1.25 * recalled_tokens, "{extra} < written recalls");
}

fn corpus_file(name: &str) -> Option<InputFile> {
    let path = corpus_dir().join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(InputFile {
            path: path.display().to_string(),
            text: Ok(text),
        }),
        Err(_) => {
            eprintln!("note: no corpus at {}; skipping", path.display());
            None
        }
    }
}

#[test]
fn projections_learned_leave_one_out_remove_more_tool_output_with_nothing_lost() {
    let Some(input) = corpus_file("tau-bench-airline-gpt4o.jsonl") else {
        return;
    };
    let config = BenchConfig {
        limit: Some(24),
        ..config(&["full", "ctxgc", "ctxgc-recall", "ctxgc-projection"])
    };
    let report = run(&[input], &config, &mut |_| {});
    let total = |name: &str| totals(&report, name).clone();
    for name in ["ctxgc", "ctxgc-recall", "ctxgc-projection"] {
        assert_eq!(total(name).missed_values, 0, "{name} lost a used value");
        assert_eq!(total(name).errors, 0, "{name}");
    }
    let projected = total("ctxgc-projection");
    let recall = total("ctxgc-recall");
    assert!(
        projected.tool_output_tokens_after < recall.tool_output_tokens_after,
        "{} >= {}",
        projected.tool_output_tokens_after,
        recall.tool_output_tokens_after
    );
    // Every recall is one more request, and the bill includes them.
    let recall_requests: usize = report
        .conversations
        .iter()
        .flat_map(|c| &c.results)
        .filter(|r| r.strategy == "ctxgc-projection")
        .filter_map(|r| r.metrics.as_ref())
        .map(|m| m.replay.recall_requests)
        .sum();
    assert_eq!(recall_requests, projected.recalls);
}

#[test]
fn long_sessions_reach_the_target_and_masking_steps_only_when_it_pays() {
    let Some(input) = corpus_file("tau-bench-airline-gpt4o.jsonl") else {
        return;
    };
    // A few runs, joined into sessions of at least 20,000 tokens (the CLI uses 100,000).
    let short: String = input
        .text
        .as_ref()
        .map(|t| t.lines().take(12).map(|l| format!("{l}\n")).collect())
        .unwrap_or_default();
    let config = BenchConfig {
        long_sessions: Some(20_000),
        ..config(&["full", "mask-observations", "mask-observations:eager=1"])
    };
    let report = run(
        &[InputFile {
            path: "airline-long".into(),
            text: Ok(short),
        }],
        &config,
        &mut |_| {},
    );
    assert!(!report.conversations.is_empty());
    for (n, c) in report.conversations.iter().enumerate() {
        let full = metrics(&report, n, "full");
        assert!(
            full.tokens_before >= 20_000,
            "{}: {}",
            c.id,
            full.tokens_before
        );
        for name in ["mask-observations", "mask-observations:eager=1"] {
            let m = metrics(&report, n, name);
            assert_eq!(
                m.survival.missed_values, 0,
                "{name}: masked values are recallable"
            );
            assert_eq!(m.replay.recall_requests, m.survival.recalls);
            assert!(m.tokens_after < m.tokens_before, "{name} masks something");
        }
        let stepped = metrics(&report, n, "mask-observations");
        let eager = metrics(&report, n, "mask-observations:eager=1");
        // Masking on every request moves the edit point every turn; steps are taken only
        // when they pay, so they are never billed more.
        assert!(
            stepped.replay.cost <= eager.replay.cost,
            "{}: {} > {}",
            c.id,
            stepped.replay.cost,
            eager.replay.cost
        );
    }
}

/// Runs of an order tool whose output holds an identifying field no turn uses (a long
/// tracking reference) next to the price the agent quotes.
fn orders() -> Vec<ctxgc_core::frontend::Conversation> {
    (0..5)
        .map(|i| {
            let tracking: Vec<String> = (0..8)
                .map(|k| format!("1Z{i}{k}9AA10123456{k}{i}"))
                .collect();
            let output = json!({
                "order_id": format!("A{i}7Q"),
                "tracking_number": tracking.join(" "),
                "price": 105 + 10 * i,
            })
            .to_string();
            let answer = format!("Your order costs {} dollars.", 105 + 10 * i);
            let call = json!({"order_id": format!("A{i}7Q")});
            transcript(&[
                Msg::System("You are a shop assistant."),
                Msg::User("How much is my order?"),
                Msg::Call("call_1", "get_order", call),
                Msg::Result("call_1", &output),
                Msg::Assistant(&answer),
                Msg::User("Thanks."),
                Msg::Assistant("You are welcome."),
            ])
        })
        .collect()
}

#[test]
fn leave_one_out_projections_are_learned_with_the_recall_backed_rules() {
    use ctxgc_bench::prepare::{Prepared, learn_leave_one_out};
    let mut group: Vec<Prepared> = orders()
        .into_iter()
        .map(|c| Prepared::new("orders".into(), c, Default::default(), None))
        .collect();
    learn_leave_one_out(&mut group);
    for p in &group {
        let projection = p
            .projection
            .as_ref()
            .expect("a projection per conversation");
        assert!(projection.rules.recallable);
        let dropped = projection
            .dropped("get_order")
            .expect("get_order is trimmed");
        // Identifying by its name, and used by no other run: hidden, since it can be recalled.
        assert!(dropped.contains_key("tracking_number"), "{dropped:?}");
        assert!(!dropped.contains_key("price"), "{dropped:?}");
    }
}

#[test]
fn projections_hide_unused_identifying_fields_when_the_recall_tool_is_offered() {
    let report = bench_conversations(orders(), &config(&["ctxgc-recall", "ctxgc-projection"]));
    let total = |name: &str| totals(&report, name).clone();
    let (projected, recall) = (total("ctxgc-projection"), total("ctxgc-recall"));
    assert_eq!(projected.missed_values, 0);
    assert_eq!(projected.recalls, 0);
    assert!(
        projected.tool_output_tokens_after < recall.tool_output_tokens_after,
        "{} >= {}",
        projected.tool_output_tokens_after,
        recall.tool_output_tokens_after
    );
}
