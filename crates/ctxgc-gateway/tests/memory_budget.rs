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

fn holds_prefix(sessions: &Sessions, key: &str, body: &[u8]) -> bool {
    let Parsed::Conversation(conv) = parse(body, Format::OpenaiChat).unwrap() else {
        panic!("a conversation")
    };
    sessions.holds_prefix(key, &conv)
}

/// What decides whether a request waits for a compile slot: only a request that extends a
/// conversation held in memory is known to cost what it appends. A new conversation, another
/// key's, and one the budget dropped (reloaded whole from the store) take a slot.
#[test]
fn only_a_conversation_held_in_memory_goes_past_the_compile_slots() {
    let (_db, store) = sqlite_store();
    let sessions = Sessions::new(store, ChatOptions::default()).with_memory_budget(64 << 10);
    assert!(
        !holds_prefix(&sessions, "k0", &body(0, 3)),
        "nothing held yet"
    );
    let first = compile(&sessions, "k0", &body(0, 3));
    assert_eq!(first.path, CompilePath::Full);
    assert!(
        holds_prefix(&sessions, "k0", &body(0, 4)),
        "the same conversation, grown"
    );
    assert!(
        holds_prefix(&sessions, "k0", &body(0, 3)),
        "resent as it was"
    );
    assert!(
        !holds_prefix(&sessions, "k1", &body(0, 4)),
        "another key never shares it"
    );
    assert!(
        !holds_prefix(&sessions, "k0", &body(1, 4)),
        "another conversation of the key"
    );
    let next = compile(&sessions, "k0", &body(0, 4));
    assert_eq!(next.path, CompilePath::Incremental);
    // Past the budget, conversation 0 is dropped from memory: its next request is a whole
    // compile (from the store) and waits for a slot like a new one.
    for c in 1..40 {
        compile(&sessions, &format!("k{c}"), &body(c, 6));
    }
    assert!(!holds_prefix(&sessions, "k0", &body(0, 5)));
}
