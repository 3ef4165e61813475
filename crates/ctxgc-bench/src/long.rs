//! Long sessions: the conversations of an input concatenated, in order, into sessions of at
//! least a given number of tokens (`ctxgc bench --long-sessions 100000`).
//!
//! Agent sessions in production run far longer than one benchmark task. To price what matters
//! there — old observations that pile up, and edits that a prompt cache makes expensive — the
//! runs of a file are put end to end: the first run's messages as they are, each later run's
//! without its system prompt (one agent, one system prompt, task after task). A session closes
//! once it reaches the target; what is left at the end joins the last session. Message ids are
//! given again by the front-end, over the whole session.
//!
//! ```
//! use ctxgc_bench::long::concatenate;
//! use ctxgc_core::{Options, frontend::lower_conversations};
//! let line = |id: &str, word: &str| format!(
//!     r#"{{"id": "{id}", "messages": [{{"role": "system", "content": "Be brief."}}, {{"role": "user", "content": "{}"}}]}}"#,
//!     word.repeat(50));
//! let text = format!("{}\n{}\n{}\n", line("a", "alpha "), line("b", "beta "), line("c", "gamma "));
//! let conversations = lower_conversations(&text, &Options::default()).unwrap();
//! let long = concatenate(&conversations, 100, &Options::default()).unwrap();
//! assert_eq!(long.len(), 1);
//! assert_eq!(long[0].id, "long-1 (a..c)");
//! assert_eq!(long[0].items.len(), 4); // one system prompt, three user turns
//! ```

use ctxgc_core::Options;
use ctxgc_core::frontend::{Conversation, lower_conversations};
use serde_json::Value;

use crate::context::item_text;

/// The messages of a conversation's raw record (or document), as JSON values.
fn messages_of(conversation: &Conversation) -> Result<Vec<Value>, String> {
    let value: Value = serde_json::from_str(&conversation.raw)
        .map_err(|e| format!("conversation {:?}: {e}", conversation.id))?;
    match value {
        Value::Array(messages) => Ok(messages),
        Value::Object(mut map) => match map.remove("messages") {
            Some(Value::Array(messages)) => Ok(messages),
            _ => Err(format!(
                "conversation {:?}: long sessions need message lists (a `messages` array)",
                conversation.id
            )),
        },
        _ => Err(format!(
            "conversation {:?}: not a message list",
            conversation.id
        )),
    }
}

fn is_system(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("system")
}

/// Concatenates `conversations` into sessions of at least `target` tokens (exact counts of
/// the bench's item texts), lowered again as one conversation each.
pub fn concatenate(
    conversations: &[Conversation],
    target: usize,
    options: &Options,
) -> Result<Vec<Conversation>, String> {
    let tokenizer = options.tokenizer;
    // (first id, last id, messages, tokens) per session.
    let mut sessions: Vec<(String, String, Vec<Value>, usize)> = Vec::new();
    let mut open: Option<(String, String, Vec<Value>, usize)> = None;
    for c in conversations {
        let messages = messages_of(c)?;
        let session = open.get_or_insert_with(|| (c.id.clone(), c.id.clone(), Vec::new(), 0));
        let first = session.2.is_empty();
        // Later runs' system prompts are left out, so they do not count either.
        let tokens: usize = c
            .items
            .iter()
            .filter(|i| first || !crate::context::is_system(i))
            .map(|i| tokenizer.count(&item_text(i)))
            .sum();
        session
            .2
            .extend(messages.into_iter().filter(|m| first || !is_system(m)));
        session.1 = c.id.clone();
        session.3 += tokens;
        if session.3 >= target
            && let Some(done) = open.take()
        {
            sessions.push(done);
        }
    }
    if let Some(rest) = open {
        match sessions.last_mut() {
            Some(last) => {
                last.1 = rest.1;
                last.2.extend(rest.2.into_iter().filter(|m| !is_system(m)));
                last.3 += rest.3;
            }
            None => sessions.push(rest),
        }
    }
    let mut text = String::new();
    for (n, (first, last, messages, _)) in sessions.into_iter().enumerate() {
        let record = serde_json::json!({
            "id": format!("long-{} ({first}..{last})", n + 1),
            "messages": messages,
        });
        text.push_str(&record.to_string());
        text.push('\n');
    }
    if text.is_empty() {
        return Ok(Vec::new());
    }
    lower_conversations(&text, options).map_err(|e| format!("long sessions: {e}"))
}
