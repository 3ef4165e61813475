//! Anthropic prompt-cache breakpoints (`--cache-breakpoints auto`).
//!
//! Under cache-stable compilation the whole compiled request is the stable prefix of the next
//! one (until a compaction step), so the breakpoint that pays is at its end: the last content
//! block of the last message. A second one goes on the end of the system prompt, which
//! outlives compaction steps. The client's own `cache_control` markers are kept and count
//! toward Anthropic's limit of four; none is added past it.

use serde_json::{Map, Value, json};

/// Anthropic's limit on `cache_control` markers in one request.
pub const MAX_BREAKPOINTS: usize = 4;

fn count_markers(value: &Value) -> usize {
    match value {
        Value::Object(map) => {
            usize::from(map.contains_key("cache_control"))
                + map.values().map(count_markers).sum::<usize>()
        }
        Value::Array(list) => list.iter().map(count_markers).sum(),
        _ => 0,
    }
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// Marks the last block of a `content` (or `system`) value; a string becomes one text block.
/// Returns false when there is nothing to mark or it is marked already.
fn mark_end(content: &mut Value) -> bool {
    match content {
        Value::String(text) if !text.is_empty() => {
            let text = std::mem::take(text);
            *content = json!([{"type": "text", "text": text, "cache_control": ephemeral()}]);
            true
        }
        Value::Array(blocks) => match blocks.last_mut() {
            Some(Value::Object(block)) if !block.contains_key("cache_control") => {
                // Thinking blocks cannot carry a marker.
                let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
                if matches!(kind, "thinking" | "redacted_thinking") {
                    return false;
                }
                block.insert("cache_control".into(), ephemeral());
                true
            }
            _ => false,
        },
        _ => false,
    }
}

/// Adds breakpoints to an Anthropic Messages body; returns the new body, or `None` when
/// nothing was added (the body then goes as it is).
///
/// ```
/// use ctxgc_gateway::breakpoints::add_breakpoints;
/// let body = r#"{"model":"m","system":"Be brief.","messages":[{"role":"user","content":"hi"}]}"#;
/// let out = add_breakpoints(body).unwrap();
/// assert_eq!(out.matches("cache_control").count(), 2);
/// ```
pub fn add_breakpoints(body: &str) -> Option<String> {
    let mut doc: Map<String, Value> = serde_json::from_str(body).ok()?;
    let mut budget = MAX_BREAKPOINTS.saturating_sub(count_markers(&Value::Object(doc.clone())));
    let mut added = 0;
    if budget > 0
        && let Some(Value::Array(messages)) = doc.get_mut("messages")
        && let Some(Value::Object(last)) = messages.last_mut()
        && let Some(content) = last.get_mut("content")
        && mark_end(content)
    {
        budget -= 1;
        added += 1;
    }
    if budget > 0
        && let Some(system) = doc.get_mut("system")
        && mark_end(system)
    {
        added += 1;
    }
    if added == 0 {
        return None;
    }
    serde_json::to_string(&doc).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clients_own_markers_are_kept_and_counted() {
        let body = r#"{"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}],
            "tools":[{"name":"t","input_schema":{},"cache_control":{"type":"ephemeral"}}],
            "messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]},
                        {"role":"assistant","content":"y"},{"role":"user","content":"z"}]}"#;
        let out = add_breakpoints(body).unwrap();
        assert_eq!(out.matches("cache_control").count(), 4);
        // A full budget adds nothing.
        assert!(add_breakpoints(&out).is_none());
    }
}
