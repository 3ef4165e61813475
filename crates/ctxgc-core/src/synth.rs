//! Deterministic synthetic event traces, for benchmarks and scale tests.
//!
//! The traces look like a coding agent's: variables set and reset, tool calls (some repeated
//! with the same result), file reads and edits, test and command runs, errors that a later
//! run resolves, and branches that get abandoned. The same `(events, seed)` always gives the
//! same trace; no clock or system randomness is involved.

use serde_json::{Value, json};

/// A small, fast, deterministic generator (SplitMix64).
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Generates `events` events as JSON values, deterministically from `seed`.
///
/// ```
/// let a = ctxgc_core::synth::events(100, 7);
/// let b = ctxgc_core::synth::events(100, 7);
/// assert_eq!(a, b);
/// assert_eq!(a.len(), 100);
/// ```
pub fn events(events: usize, seed: u64) -> Vec<Value> {
    let mut rng = Rng(seed);
    let mut out: Vec<Value> = Vec::with_capacity(events);
    let mut last: Option<String> = None;
    // The open branch: its root, and the event the root followed from.
    let mut branch: Option<(String, Option<String>)> = None;
    let keys = 50 + (events as u64 / 200);
    let files = 20 + (events as u64 / 500);
    while out.len() < events {
        let n = out.len();
        let id = format!("e{n}");
        let ts = n as u64 * 10;
        let parent = last.clone().map_or(Value::Null, Value::String);
        let roll = rng.below(100);
        let remaining = events - n;
        if roll < 6
            && let Some((root, before)) = branch.take()
        {
            // Give up the current branch; the next event continues from before it.
            out.push(json!({"id": id, "type": "abandon", "timestamp": ts, "parent_id": parent, "ref_to": [root]}));
            last = before;
            continue;
        }
        let event = if roll < 30 {
            let key = rng.below(keys);
            json!({"id": id, "type": "set_var", "timestamp": ts, "parent_id": parent, "key": format!("var_{key}"), "value": rng.below(1000)})
        } else if roll < 50 && remaining >= 2 {
            let tool = rng.below(12);
            let arg = rng.below(8);
            let call = json!({"id": id, "type": "tool_call", "timestamp": ts, "parent_id": parent, "tool_name": format!("tool_{tool}"), "arguments": {"q": format!("query {arg}")}});
            out.push(call);
            let rid = format!("e{}", n + 1);
            let result = json!({"id": rid, "type": "tool_result", "timestamp": ts + 1, "parent_id": id, "call_id": id, "result": format!("result of tool_{tool} for query {arg}: {}", (tool * 31 + arg * 7) % 97)});
            out.push(result);
            last = Some(rid);
            continue;
        } else if roll < 60 {
            let f = rng.below(files);
            json!({"id": id, "type": "file_read", "timestamp": ts, "parent_id": parent, "path": format!("src/module_{f}.rs")})
        } else if roll < 66 {
            let f = rng.below(files);
            json!({"id": id, "type": "file_edit", "timestamp": ts, "parent_id": parent, "path": format!("src/module_{f}.rs"), "diff_hash": format!("{:08x}", rng.next() as u32)})
        } else if roll < 74 {
            let ok = rng.below(4) != 0;
            json!({"id": id, "type": "command_run", "timestamp": ts, "parent_id": parent, "command": format!("cargo test -p crate_{}", rng.below(5)), "exit_code": if ok { 0 } else { 101 }})
        } else if roll < 78 && n > 0 {
            let cause = out
                .iter()
                .rev()
                .take(20)
                .find(|e| e["type"] == "command_run")
                .and_then(|e| e["id"].as_str())
                .map(str::to_owned);
            json!({"id": id, "type": "error", "timestamp": ts, "parent_id": parent, "message": "test failed: assertion left == right", "related_to": cause})
        } else if roll < 84 {
            let d = json!({"id": id, "type": "decision", "timestamp": ts, "parent_id": parent, "content": format!("Try approach {}", rng.below(30))});
            if branch.is_none() && rng.below(3) == 0 {
                branch = Some((id.clone(), last.clone()));
            }
            d
        } else if roll < 90 {
            let passed = rng.below(50);
            let failed = if rng.below(3) == 0 { rng.below(3) } else { 0 };
            json!({"id": id, "type": "test_run", "timestamp": ts, "parent_id": parent, "test_names": [format!("tests::case_{}", rng.below(10))], "exit_code": if failed == 0 { 0 } else { 1 }, "passed_count": passed, "failed_count": failed})
        } else if roll < 94 {
            json!({"id": id, "type": "verification", "timestamp": ts, "parent_id": parent, "content": format!("endpoint {} answers", rng.below(6)), "passed": rng.below(5) != 0})
        } else if roll < 97 {
            json!({"id": id, "type": "requirement", "timestamp": ts, "parent_id": parent, "content": format!("latency under {} ms", 10 + rng.below(90))})
        } else {
            json!({"id": id, "type": "artifact_created", "timestamp": ts, "parent_id": parent, "artifact_type": "report", "path": format!("out/report_{n}.md")})
        };
        out.push(event);
        last = Some(id);
    }
    out.truncate(events);
    out
}

/// The same trace as JSONL text (one event per line).
pub fn events_jsonl(events: usize, seed: u64) -> String {
    let mut text = String::new();
    for e in self::events(events, seed) {
        text.push_str(&e.to_string());
        text.push('\n');
    }
    text
}

/// A chat of about `messages` OpenAI-style messages (a JSON array), built by putting the
/// conversations of `records_jsonl` (one `{"messages": [...]}` record per line, the corpus
/// format) back to back, cycling through them as often as needed. The first record's system
/// message opens the chat; the others' are left out. Copies after the first get their tool-call
/// ids suffixed (`_2`, `_3`, …) so that every call stays paired with its own result. The chat
/// never ends between a tool call and its results, so it may run a few messages over.
///
/// ```
/// let records = r#"{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}"#;
/// let chat = ctxgc_core::synth::chat_json(records, 5).unwrap();
/// let messages: serde_json::Value = serde_json::from_str(&chat).unwrap();
/// assert_eq!(messages.as_array().unwrap().len(), 5);
/// assert_eq!(messages[0]["role"], "system");
/// ```
pub fn chat_json(records_jsonl: &str, messages: usize) -> Result<String, String> {
    let mut conversations: Vec<Vec<Value>> = Vec::new();
    for (n, line) in records_jsonl.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record: Value =
            serde_json::from_str(line).map_err(|e| format!("record on line {}: {e}", n + 1))?;
        let Some(list) = record.get("messages").and_then(Value::as_array) else {
            return Err(format!("record on line {}: no \"messages\" array", n + 1));
        };
        conversations.push(list.clone());
    }
    let system = conversations
        .first()
        .and_then(|c| c.first())
        .filter(|m| m["role"] == "system")
        .cloned();
    let turns: Vec<&[Value]> = conversations
        .iter()
        .map(|c| match c.first() {
            Some(m) if m["role"] == "system" => &c[1..],
            _ => &c[..],
        })
        .filter(|c| !c.is_empty())
        .collect();
    if turns.is_empty() {
        return Err("no conversation has a non-system message".into());
    }
    let mut out: Vec<Value> = system.into_iter().collect();
    let mut copy = 0;
    'fill: loop {
        copy += 1;
        for conversation in &turns {
            for message in *conversation {
                let open_call = out.last().is_some_and(|m: &Value| {
                    m["tool_calls"].as_array().is_some_and(|c| !c.is_empty())
                });
                if out.len() >= messages && !open_call && message["role"] != "tool" {
                    break 'fill;
                }
                let mut message = message.clone();
                if copy > 1 {
                    suffix_call_ids(&mut message, copy);
                }
                out.push(message);
            }
        }
    }
    serde_json::to_string(&out).map_err(|e| e.to_string())
}

fn suffix_call_ids(message: &mut Value, copy: usize) {
    let suffix = |v: &mut Value| {
        if let Some(id) = v.as_str() {
            *v = Value::String(format!("{id}_{copy}"));
        }
    };
    if let Some(id) = message.get_mut("tool_call_id") {
        suffix(id);
    }
    if let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) {
        for call in calls {
            if let Some(id) = call.get_mut("id") {
                suffix(id);
            }
        }
    }
}
