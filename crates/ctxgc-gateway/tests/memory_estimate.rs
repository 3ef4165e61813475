//! The memory budget counts what a live conversation really holds: the estimate behind
//! `Sessions::live_bytes` is checked against the heap, measured by a counting allocator, for
//! conversations shaped like coding-agent sessions (bulky tool outputs) and chat sessions
//! (many short turns).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use common::*;
use ctxgc_core::Format;
use ctxgc_core::chat::ChatOptions;
use ctxgc_gateway::request::{Parsed, parse};
use ctxgc_gateway::sessions::Sessions;
use serde_json::json;

/// The system allocator, keeping a count of the bytes held.
struct Counting;

static HELD: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        HELD.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A conversation of `turns` exchanges whose tool outputs have `lines` lines each.
fn body(conversation: usize, turns: usize, lines: usize) -> Vec<u8> {
    let mut messages = vec![json!({"role": "system", "content": "You are a coding agent."})];
    for t in 0..turns {
        messages.push(json!({"role": "user", "content": format!("conversation {conversation}: step {t}, go on")}));
        messages.push(json!({"role": "assistant", "content": format!("Running step {t}."), "tool_calls": [{"id": format!("c{t}"),
            "type": "function", "function": {"name": "run", "arguments": format!("{{\"step\": {t}}}")}}]}));
        let output: String = (0..lines)
            .map(|i| {
                format!(
                    "src/module_{t}.rs:{i}: warning: unused variable `value_{conversation}_{i}`\n"
                )
            })
            .collect();
        messages.push(json!({"role": "tool", "tool_call_id": format!("c{t}"), "content": output}));
    }
    serde_json::to_vec(&json!({"model": "m", "messages": messages})).unwrap()
}

/// Heap the sessions hold for `n` conversations against what they estimate.
fn measured_and_estimated(turns: usize, lines: usize, n: usize) -> (isize, usize) {
    let (_db, store) = sqlite_store();
    let sessions = Sessions::new(store, ChatOptions::default());
    let bodies: Vec<Vec<u8>> = (0..n).map(|c| body(c, turns, lines)).collect();
    // One conversation first, so that what every session shares (tokenizer tables, the
    // store's statements) is not counted as any conversation's.
    let warm = body(n, turns, lines);
    compile(&sessions, "warm", &warm);
    let estimate_before = sessions.live_bytes();
    let before = HELD.load(Ordering::Relaxed);
    for (c, b) in bodies.iter().enumerate() {
        compile(&sessions, &format!("k{c}"), b);
    }
    let held = HELD.load(Ordering::Relaxed) - before;
    (held, sessions.live_bytes() - estimate_before)
}

fn compile(sessions: &Sessions, key: &str, body: &[u8]) {
    let Parsed::Conversation(conv) = parse(body, Format::OpenaiChat).unwrap() else {
        panic!("a conversation")
    };
    sessions.compile(key, &conv).unwrap();
}

#[test]
fn the_estimate_is_within_a_factor_of_two_of_the_heap() {
    for (shape, turns, lines) in [("bulky outputs", 20, 200), ("short turns", 200, 2)] {
        let (held, estimated) = measured_and_estimated(turns, lines, 6);
        let ratio = estimated as f64 / held as f64;
        eprintln!("{shape}: {held} bytes held, {estimated} estimated ({ratio:.2}x)");
        assert!(
            (0.5..=2.0).contains(&ratio),
            "{shape}: {held} bytes held, {estimated} estimated ({ratio:.2}x)"
        );
    }
}
