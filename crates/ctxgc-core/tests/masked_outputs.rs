//! `masked-output`: in cache-stable mode with a recall tool, a tool output older than the last
//! few agent turns is masked behind the recall tool, in compaction steps, and recoverable byte
//! for byte; never without a recall tool, in the lossless preset, in a one-shot (eager) compile,
//! or for a kept tool.

use ctxgc_core::chat::Preset;
use ctxgc_core::session::CacheModel;
use ctxgc_core::{Action, Options, Reason, compile, receipt};
use serde_json::{Value, json};

/// A support session: each turn the agent reads a bulky order record and answers.
fn session(turns: usize) -> Vec<Value> {
    let mut messages = vec![json!({"role": "system", "content": "You are a support agent."})];
    for t in 0..turns {
        messages.push(json!({"role": "user", "content": format!("What about order {t}?")}));
        let (tool, id) = if t % 3 == 2 {
            ("get_policy", format!("p{t}"))
        } else {
            ("get_order", format!("o{t}"))
        };
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": tool, "arguments": json!({"order": t}).to_string()}}]}));
        let lines: Vec<String> = (0..60)
            .map(|l| {
                format!(
                    "order {t} line {l}: item SKU-{l:03} shipped from depot {}",
                    l % 7
                )
            })
            .collect();
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": lines.join("\n")}));
        messages.push(json!({"role": "assistant", "content": format!("Order {t} has shipped.")}));
    }
    messages
}

/// Cache-stable with a recall tool, and a cost model under which a short session steps.
fn options(preset: Preset) -> Options {
    let mut options = Options::default();
    options.chat.preset = preset;
    options.chat.expand_tool = Some("ctxgc_recall".into());
    options.chat.cache = Some(CacheModel {
        min_reclaim_tokens: 100,
        min_expected_turns: 50.0,
        ..Default::default()
    });
    options
}

fn tool_positions(messages: &[Value]) -> Vec<usize> {
    (0..messages.len())
        .filter(|&i| messages[i]["role"] == "tool")
        .collect()
}

#[test]
fn old_outputs_are_masked_behind_the_recall_tool_and_recoverable() {
    let messages = session(30);
    let text = Value::Array(messages.clone()).to_string();
    let options = options(Preset::Default);
    let compiled = compile(&text, &options).expect("compiles");
    let tools = tool_positions(&messages);
    let masked: Vec<usize> = tools
        .iter()
        .copied()
        .filter(|&i| compiled.decisions[i].reason == Some(Reason::MaskedOutput))
        .collect();
    assert!(masked.len() >= 6, "masked {masked:?} of {tools:?}");
    // The latest outputs (within the last 3 agent turns) are sent as they are.
    for &i in &tools[tools.len() - 1..] {
        assert_eq!(compiled.decisions[i].action, Action::Keep, "item {i}");
    }
    let output: Value = serde_json::from_str(&compiled.output).expect("output is JSON");
    let sent = output.as_array().expect("a list");
    for &i in &masked {
        let id = &compiled.decisions[i].id;
        let stub = sent
            .iter()
            .find(|m| m["tool_call_id"] == messages[i]["tool_call_id"])
            .and_then(|m| m["content"].as_str())
            .expect("the masked output is still answered");
        assert_eq!(
            stub,
            format!(
                "[ctxgc: output masked; call ctxgc_recall with id \"{id}\" for the full output]"
            )
        );
        let (original, decision) = receipt(&text, &options, id).expect("a receipt");
        assert_eq!(decision.reason, Some(Reason::MaskedOutput));
        assert_eq!(
            serde_json::from_str::<Value>(&original).expect("JSON"),
            messages[i],
            "{id} comes back as it was"
        );
    }
    // Masks are deferred decisions: taken in reported compaction steps.
    let steps = compiled
        .chat
        .as_ref()
        .and_then(|c| c.compaction_steps.as_ref())
        .expect("cache-stable reports its steps");
    assert!(!steps.is_empty());
}

#[test]
fn masking_needs_a_recall_tool_a_cache_and_a_lossy_preset() {
    let messages = session(30);
    let text = Value::Array(messages.clone()).to_string();
    let none_masked = |options: &Options, what: &str| {
        let compiled = compile(&text, options).expect("compiles");
        assert!(
            compiled
                .decisions
                .iter()
                .all(|d| d.reason != Some(Reason::MaskedOutput)),
            "{what}"
        );
    };
    let mut no_recall = options(Preset::Default);
    no_recall.chat.expand_tool = None;
    none_masked(
        &no_recall,
        "without a recall tool nobody could get a masked output back",
    );
    let mut eager = options(Preset::Default);
    eager.chat.cache = None;
    none_masked(&eager, "a one-shot compile does not edit history in steps");
    none_masked(&options(Preset::Lossless), "lossless loses nothing");
    let mut off = options(Preset::Default);
    off.chat.mask_after_turns = Some(0);
    none_masked(&off, "0 turns turns masking off");
    // A short session: its outputs are too few tokens for a mask to repay its costs.
    let short = Value::Array(session(6)).to_string();
    let compiled = compile(&short, &options(Preset::Default)).expect("compiles");
    assert!(
        compiled
            .decisions
            .iter()
            .all(|d| d.reason != Some(Reason::MaskedOutput)),
        "below {} output tokens nothing is masked",
        ctxgc_core::passes::masked_outputs::MASK_FROM_OUTPUT_TOKENS
    );
}

#[test]
fn kept_tools_are_never_masked_and_the_turn_count_is_configurable() {
    let messages = session(30);
    let text = Value::Array(messages.clone()).to_string();
    let mut options = options(Preset::Default);
    options.chat.keep_tools = vec!["get_policy".into()];
    let compiled = compile(&text, &options).expect("compiles");
    for i in tool_positions(&messages) {
        let tool_call = &messages[i - 1]["tool_calls"][0]["function"]["name"];
        if tool_call == "get_policy" {
            assert_eq!(compiled.decisions[i].action, Action::Keep, "item {i}");
        }
    }
    let masked = |options: &Options| {
        compile(&text, options)
            .expect("compiles")
            .decisions
            .iter()
            .filter(|d| d.reason == Some(Reason::MaskedOutput))
            .count()
    };
    let mut later = options.clone();
    later.chat.mask_after_turns = Some(8);
    assert!(masked(&later) < masked(&options));
}
