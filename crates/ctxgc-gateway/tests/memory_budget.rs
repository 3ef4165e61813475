//! Conversations compiled in memory stay within the memory budget: past it the least
//! recently used are dropped, and one that comes back is reloaded from the store and goes on
//! incrementally, with the same output as if it had stayed.

mod common;

use common::*;
use ctxgc_core::Format;
use ctxgc_core::chat::ChatOptions;
use ctxgc_gateway::request::{Parsed, parse};
use ctxgc_gateway::sessions::{CompilePath, Sessions};
use serde_json::json;

/// A conversation of `turns` exchanges, each with a tool output of about 2 KB.
fn body(conversation: usize, turns: usize) -> Vec<u8> {
    let mut messages = vec![json!({"role": "system", "content": "You are a coding agent."})];
    for t in 0..turns {
        messages.push(
            json!({"role": "user", "content": format!("conversation {conversation}: step {t}")}),
        );
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{t}"),
            "type": "function", "function": {"name": "run", "arguments": format!("{{\"step\": {t}}}")}}]}));
        let output: String = (0..40)
            .map(|i| format!("{conversation}.{t}.{i} ok\n"))
            .collect::<String>()
            .repeat(4);
        messages.push(json!({"role": "tool", "tool_call_id": format!("c{t}"), "content": output}));
    }
    serde_json::to_vec(&json!({"model": "m", "messages": messages})).unwrap()
}

fn compile(sessions: &Sessions, key: &str, body: &[u8]) -> ctxgc_gateway::sessions::Compiled {
    let Parsed::Conversation(conv) = parse(body, Format::OpenaiChat).unwrap() else {
        panic!("a conversation")
    };
    sessions.compile(key, &conv).unwrap()
}

#[test]
fn memory_stays_within_the_budget_and_dropped_conversations_come_back() {
    const BUDGET: usize = 256 << 10;
    let (_db, store) = sqlite_store();
    let sessions = Sessions::new(store, ChatOptions::default()).with_memory_budget(BUDGET);
    let (_db2, roomy_store) = sqlite_store();
    let roomy = Sessions::new(roomy_store, ChatOptions::default());

    let mut largest = 0;
    for c in 0..40 {
        compile(&sessions, &format!("k{c}"), &body(c, 6));
        let first = compile(&roomy, &format!("k{c}"), &body(c, 6));
        largest = largest.max(first.body.len());
        assert!(
            sessions.live_bytes() <= BUDGET,
            "after {c} conversations {} bytes are compiled in memory (budget {BUDGET})",
            sessions.live_bytes()
        );
    }
    assert!(sessions.live_bytes() > 0);
    assert!(
        roomy.live_bytes() > 4 * BUDGET,
        "the 40 conversations need more than the budget ({} bytes)",
        roomy.live_bytes()
    );

    // Conversation 0 was dropped long ago; it comes back from the store, continues
    // incrementally and sends what a gateway that kept it in memory sends.
    let back = compile(&sessions, "k0", &body(0, 7));
    let kept = compile(&roomy, "k0", &body(0, 7));
    assert_eq!(back.path, CompilePath::Incremental);
    assert_eq!(back.new_items, 3);
    assert_eq!(back.context_id, kept.context_id);
    assert_eq!(back.body, kept.body, "the same bytes go upstream");
    assert!(sessions.live_bytes() <= BUDGET.max(largest * 4));
}
