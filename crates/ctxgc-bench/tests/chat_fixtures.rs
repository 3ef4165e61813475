//! The chat fixtures the console ships (Anthropic with a system prompt, Responses, OpenAI
//! Chat) replay under `full` and every ctxgc preset: each history prefix is given to a
//! strategy as a request of its own format, so an Anthropic system prompt travels as the
//! `system` field, never as a message.

mod common;

use common::{bench_text, config};
use ctxgc_bench::run::{BenchConfig, InputFile, load};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../ctxgc-core/tests/fixtures/chat/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const STRATEGIES: [&str; 5] = [
    "full",
    "ctxgc-lossless",
    "ctxgc",
    "ctxgc-aggressive",
    "ctxgc-cache",
];

#[test]
fn every_chat_fixture_replays_under_every_preset() {
    for name in [
        "anthropic_session.json",
        "responses_session.json",
        "airline_cabin_change.json",
    ] {
        let report = bench_text(name, &fixture(name), &config(&STRATEGIES));
        assert!(
            report.files[0].error.is_none(),
            "{name}: {:?}",
            report.files[0].error
        );
        assert_eq!(report.conversations.len(), 1, "{name}");
        for result in &report.conversations[0].results {
            assert!(
                result.error.is_none(),
                "{name}: {}: {:?}",
                result.strategy,
                result.error
            );
            let metrics = result.metrics.as_ref().expect("a replay");
            assert!(metrics.replay.requests > 0, "{name}: {}", result.strategy);
        }
        let ctxgc = report
            .totals
            .iter()
            .find(|s| s.strategy == "ctxgc")
            .expect("ctxgc totals");
        assert!(ctxgc.replay_cost > 0.0, "{name}");
    }
}

#[test]
fn an_anthropic_prefix_carries_its_system_prompt_as_the_system_field() {
    let text = fixture("anthropic_session.json");
    let prepared = load(
        &InputFile {
            path: "anthropic_session.json".into(),
            text: Ok(text),
        },
        &BenchConfig::default(),
    )
    .expect("the fixture loads");
    let conversation = &prepared[0];
    let prefix = conversation.prefix_json(3);
    let value: serde_json::Value = serde_json::from_str(&prefix).expect("the prefix is JSON");
    assert_eq!(
        value["system"],
        "You are a grocery assistant. Always check allergens before recommending a product."
    );
    let messages = value["messages"].as_array().expect("a message list");
    assert_eq!(messages.len(), 2, "the system prompt is not a message");
    assert_eq!(messages[0]["role"], "user");
    // Without the system prompt a prefix is the plain list, as before.
    assert!(conversation.prefix_json(0).starts_with('['));
}
