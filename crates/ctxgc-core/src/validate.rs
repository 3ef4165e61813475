//! Structural validators for message lists, one per provider format: what the provider's API
//! checks before it accepts a request, as far as structure goes.
//!
//! - **OpenAI Chat Completions**: known roles; content a string, a non-empty list of parts or
//!   null (null only beside tool calls); every tool call has an id and a name; the `tool` messages that
//!   answer an assistant's calls follow it directly, one per call, before any other message;
//!   a `tool` message answers a call of that run; a legacy `function` message follows a
//!   `function_call` of that name.
//! - **Anthropic Messages**: roles `user` and `assistant`; content a string or a list of
//!   blocks; text blocks are not empty (also inside a `tool_result`); thinking only in assistant turns; `tool_use` ids are
//!   unique; every `tool_use` is answered by a `tool_result` in the very next message, a user
//!   message, where results come before any other block; every `tool_result` answers a
//!   `tool_use` of the message just before it; the system prompt is a string or text blocks.
//! - **OpenAI Responses**: message items have a role and content (a string or a non-empty
//!   list); `function_call` items have a
//!   unique `call_id`, a name and string arguments; every `function_call_output` answers an
//!   earlier call, and every call is answered.
//!
//! A call left unanswered by the last message is reported as [`Rule::UnansweredCall`] with
//! `at_end` set: a transcript captured while a tool was running ends that way. Tool calls on
//! a user message (a convention of some corpora) are reported as [`Rule::CallerRole`].
//!
//! ```
//! use ctxgc_core::validate::{validate, Rule};
//! use ctxgc_core::Format;
//! let ok = r#"[{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
//!              {"role": "tool", "tool_call_id": "c1", "content": "done"}]"#;
//! assert!(validate(Format::OpenaiChat, ok).unwrap().is_empty());
//! let orphan = r#"[{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c9", "content": "x"}]"#;
//! assert_eq!(validate(Format::OpenaiChat, orphan).unwrap()[0].rule, Rule::ResultWithoutCall);
//! ```

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use crate::error::Error;
use crate::formats::key::Format;

/// Which rule a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// The document or an item has the wrong shape.
    Shape,
    /// An unknown or misplaced role.
    Role,
    /// Content of the wrong type, or empty where the API requires text.
    Content,
    /// A tool call without id or name, or with arguments of the wrong type.
    Call,
    /// A call id used twice where it must be unique.
    DuplicateCallId,
    /// A call with no result after it.
    UnansweredCall,
    /// A result that answers no call (or not a call of the turn just before it).
    ResultWithoutCall,
    /// Results out of place (Anthropic: after other blocks of the user message).
    ResultOrder,
    /// Tool calls on a message that is not the assistant's.
    CallerRole,
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Position of the message in the list.
    pub index: usize,
    /// The rule.
    pub rule: Rule,
    /// The call id involved, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// True for a call left unanswered by the last message.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub at_end: bool,
    /// What is wrong, in words.
    pub detail: String,
}

impl Violation {
    pub(crate) fn new(index: usize, rule: Rule, detail: impl Into<String>) -> Self {
        Violation {
            index,
            rule,
            call_id: None,
            at_end: false,
            detail: detail.into(),
        }
    }

    fn call(index: usize, rule: Rule, id: &str, detail: impl Into<String>) -> Self {
        Violation {
            call_id: Some(id.to_owned()),
            ..Violation::new(index, rule, detail)
        }
    }

    /// What identifies the violation across a compile (positions shift when messages are
    /// retired): the rule, the call id and whether it is at the end.
    pub fn key(&self) -> (Rule, Option<String>, bool) {
        (self.rule, self.call_id.clone(), self.at_end)
    }
}

/// Validates a document (a message list, an object holding one, or one record) in `format`.
pub fn validate(format: Format, text: &str) -> Result<Vec<Violation>, Error> {
    // A UTF-8 byte order mark is not part of the document.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let doc: Value = serde_json::from_str(text.trim()).map_err(|e| Error::json("document", &e))?;
    Ok(validate_value(format, &doc))
}

/// Validates a parsed document.
pub fn validate_value(format: Format, doc: &Value) -> Vec<Violation> {
    let wire = format.wire();
    let key = wire.items_key();
    let list = match doc {
        Value::Array(list) => list.as_slice(),
        Value::Object(map) => match map.get(key) {
            Some(Value::Array(list)) => list.as_slice(),
            Some(Value::String(_)) if wire.items_may_be_string() => &[],
            _ => return vec![Violation::new(0, Rule::Shape, format!("no `{key}` list"))],
        },
        _ => return vec![Violation::new(0, Rule::Shape, "not a message list")],
    };
    let mut out = Vec::new();
    wire.validate_list(doc, list, &mut out);
    out
}

fn openai_call(call: &Value) -> Option<(String, String)> {
    let id = call.get("id")?.as_str().filter(|s| !s.is_empty())?;
    let holder = call
        .get("function")
        .or_else(|| call.get("custom"))
        .unwrap_or(call);
    let name = holder.get("name")?.as_str()?;
    Some((id.to_owned(), name.to_owned()))
}

pub(crate) fn openai(list: &[Value], out: &mut Vec<Violation>) {
    // The calls of the most recent message with calls that are still unanswered, in order.
    let mut pending: Vec<String> = Vec::new();
    let mut pending_from = 0;
    let mut legacy: Option<String> = None;
    let close = |pending: &mut Vec<String>, from: usize, at_end: bool, out: &mut Vec<Violation>| {
        for id in pending.drain(..) {
            let mut v = Violation::call(
                from,
                Rule::UnansweredCall,
                &id,
                format!("call {id:?} has no tool message after it"),
            );
            v.at_end = at_end;
            out.push(v);
        }
    };
    for (i, m) in list.iter().enumerate() {
        let Some(map) = m.as_object() else {
            out.push(Violation::new(
                i,
                Rule::Shape,
                "a message must be an object",
            ));
            continue;
        };
        let role = map.get("role").and_then(Value::as_str).unwrap_or("");
        if !matches!(
            role,
            "system" | "developer" | "user" | "assistant" | "tool" | "function"
        ) {
            out.push(Violation::new(
                i,
                Rule::Role,
                format!("unknown role {role:?}"),
            ));
            continue;
        }
        let content = map.get("content");
        match content {
            None | Some(Value::Null) | Some(Value::String(_)) => {}
            Some(Value::Array(parts)) => {
                if parts.is_empty() {
                    out.push(Violation::new(
                        i,
                        Rule::Content,
                        "content must not be an empty list",
                    ));
                }
                if parts
                    .iter()
                    .any(|p| !(p.is_object() && p.get("type").is_some_and(Value::is_string)))
                {
                    out.push(Violation::new(
                        i,
                        Rule::Content,
                        "every content part needs a `type`",
                    ));
                }
            }
            Some(_) => out.push(Violation::new(
                i,
                Rule::Content,
                "content must be a string, a list or null",
            )),
        }
        if role == "tool" {
            let id = map
                .get("tool_call_id")
                .and_then(Value::as_str)
                .unwrap_or("");
            match pending.iter().position(|p| p == id) {
                Some(k) => {
                    pending.remove(k);
                }
                None => out.push(Violation::call(
                    i,
                    Rule::ResultWithoutCall,
                    id,
                    format!("tool message for {id:?} does not follow a message calling it"),
                )),
            }
            if content.is_none() {
                out.push(Violation::new(
                    i,
                    Rule::Content,
                    "a tool message needs content",
                ));
            }
            continue;
        }
        if role == "function" {
            let name = map.get("name").and_then(Value::as_str).unwrap_or("");
            if legacy.as_deref() != Some(name) {
                out.push(Violation::call(
                    i,
                    Rule::ResultWithoutCall,
                    name,
                    "function message without a function_call before it",
                ));
            }
            legacy = None;
            continue;
        }
        close(&mut pending, pending_from, false, out);
        legacy = None;
        let calls = match map.get("tool_calls") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(c)) => c.as_slice(),
            Some(_) => {
                out.push(Violation::new(i, Rule::Call, "tool_calls must be a list"));
                &[][..]
            }
        };
        let mut seen = HashSet::new();
        for call in calls {
            match openai_call(call) {
                Some((id, _)) => {
                    if role != "assistant" {
                        out.push(Violation::call(
                            i,
                            Rule::CallerRole,
                            &id,
                            format!("tool call on a {role} message"),
                        ));
                    }
                    if !seen.insert(id.clone()) {
                        out.push(Violation::call(
                            i,
                            Rule::DuplicateCallId,
                            &id,
                            "call id used twice in one message",
                        ));
                    }
                    if let Some(args) = call.get("function").and_then(|f| f.get("arguments"))
                        && !args.is_string()
                    {
                        out.push(Violation::call(
                            i,
                            Rule::Call,
                            &id,
                            "function.arguments must be a JSON string",
                        ));
                    }
                    pending.push(id);
                }
                None => out.push(Violation::new(
                    i,
                    Rule::Call,
                    "a tool call needs an id and a name",
                )),
            }
        }
        pending_from = i;
        if let Some(fc) = map.get("function_call").filter(|v| !v.is_null()) {
            legacy = fc.get("name").and_then(Value::as_str).map(str::to_owned);
        }
        if role == "assistant"
            && calls.is_empty()
            && legacy.is_none()
            && matches!(content, None | Some(Value::Null))
        {
            out.push(Violation::new(
                i,
                Rule::Content,
                "an assistant message needs content or tool calls",
            ));
        }
    }
    close(&mut pending, pending_from, true, out);
}

pub(crate) fn anthropic_system(system: &Value, out: &mut Vec<Violation>) {
    match system {
        Value::String(_) => {}
        Value::Array(blocks) => {
            for b in blocks {
                if b.get("type").and_then(Value::as_str) != Some("text") {
                    out.push(Violation::new(
                        0,
                        Rule::Content,
                        "system blocks must be text blocks",
                    ));
                } else if b
                    .get("text")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    out.push(Violation::new(
                        0,
                        Rule::Content,
                        "a system text block must not be empty",
                    ));
                }
            }
        }
        _ => out.push(Violation::new(
            0,
            Rule::Content,
            "system must be a string or a list of text blocks",
        )),
    }
}

pub(crate) fn anthropic(list: &[Value], out: &mut Vec<Violation>) {
    let mut ids = HashSet::new();
    let mut previous_calls: Vec<String> = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if !matches!(role, "user" | "assistant") {
            out.push(Violation::new(
                i,
                Rule::Role,
                format!("role must be user or assistant, found {role:?}"),
            ));
        }
        let blocks: Vec<&Value> = match m.get("content") {
            Some(Value::String(s)) => {
                if s.is_empty() && !(role == "assistant" && i + 1 == list.len()) {
                    out.push(Violation::new(
                        i,
                        Rule::Content,
                        "content must not be empty",
                    ));
                }
                Vec::new()
            }
            Some(Value::Array(b)) => {
                if b.is_empty() {
                    out.push(Violation::new(
                        i,
                        Rule::Content,
                        "content must not be an empty list",
                    ));
                }
                b.iter().collect()
            }
            _ => {
                out.push(Violation::new(
                    i,
                    Rule::Content,
                    "content must be a string or a list of blocks",
                ));
                Vec::new()
            }
        };
        let mut calls = Vec::new();
        let mut answered = Vec::new();
        let mut other_seen = false;
        for b in blocks {
            match b.get("type").and_then(Value::as_str) {
                Some("text") => {
                    other_seen = true;
                    if b.get("text")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        out.push(Violation::new(
                            i,
                            Rule::Content,
                            "a text block must not be empty",
                        ));
                    }
                }
                Some("thinking" | "redacted_thinking") => {
                    if role != "assistant" {
                        out.push(Violation::new(
                            i,
                            Rule::Role,
                            "thinking blocks belong to assistant turns",
                        ));
                    }
                }
                Some("tool_use") => {
                    let id = b.get("id").and_then(Value::as_str).unwrap_or("");
                    if role != "assistant" {
                        out.push(Violation::call(
                            i,
                            Rule::CallerRole,
                            id,
                            "tool_use in a user message",
                        ));
                    }
                    if id.is_empty() || b.get("name").and_then(Value::as_str).is_none() {
                        out.push(Violation::new(
                            i,
                            Rule::Call,
                            "a tool_use block needs an id and a name",
                        ));
                    } else if !ids.insert(id.to_owned()) {
                        out.push(Violation::call(
                            i,
                            Rule::DuplicateCallId,
                            id,
                            "tool_use ids must be unique",
                        ));
                    }
                    if !b.get("input").is_some_and(Value::is_object) {
                        out.push(Violation::call(
                            i,
                            Rule::Call,
                            id,
                            "tool_use input must be an object",
                        ));
                    }
                    calls.push(id.to_owned());
                }
                Some("tool_result") => {
                    let id = b.get("tool_use_id").and_then(Value::as_str).unwrap_or("");
                    if other_seen {
                        out.push(Violation::call(
                            i,
                            Rule::ResultOrder,
                            id,
                            "tool_result blocks must come before other blocks",
                        ));
                    }
                    if role != "user" || !previous_calls.iter().any(|c| c == id) {
                        out.push(Violation::call(
                            i,
                            Rule::ResultWithoutCall,
                            id,
                            format!("tool_result for {id:?} does not answer a tool_use of the message before"),
                        ));
                    }
                    let empty_text =
                        b.get("content")
                            .and_then(Value::as_array)
                            .is_some_and(|parts| {
                                parts.iter().any(|p| {
                                    p.get("type").and_then(Value::as_str) == Some("text")
                                        && p.get("text")
                                            .and_then(Value::as_str)
                                            .is_none_or(str::is_empty)
                                })
                            });
                    if empty_text {
                        out.push(Violation::call(
                            i,
                            Rule::Content,
                            id,
                            "a text block in a tool_result must not be empty",
                        ));
                    }
                    answered.push(id.to_owned());
                }
                Some(_) => other_seen = true,
                None => out.push(Violation::new(
                    i,
                    Rule::Content,
                    "every block needs a `type`",
                )),
            }
        }
        for id in &previous_calls {
            if !answered.contains(id) {
                out.push(Violation::call(
                    i.saturating_sub(1),
                    Rule::UnansweredCall,
                    id,
                    format!("tool_use {id:?} has no tool_result in the next message"),
                ));
            }
        }
        previous_calls = calls;
    }
    for id in previous_calls {
        let mut v = Violation::call(
            list.len().saturating_sub(1),
            Rule::UnansweredCall,
            &id,
            format!("tool_use {id:?} has no tool_result after it"),
        );
        v.at_end = true;
        out.push(v);
    }
}

pub(crate) fn responses(list: &[Value], out: &mut Vec<Violation>) {
    let mut calls: HashMap<String, usize> = HashMap::new();
    let mut open: Vec<(String, usize)> = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let ty = item.get("type").and_then(Value::as_str);
        match ty {
            None | Some("message") => {
                let role = item.get("role").and_then(Value::as_str).unwrap_or("");
                if !matches!(role, "user" | "assistant" | "system" | "developer") {
                    out.push(Violation::new(
                        i,
                        Rule::Role,
                        format!("unknown role {role:?}"),
                    ));
                }
                match item.get("content") {
                    Some(Value::Array(parts)) if parts.is_empty() => out.push(Violation::new(
                        i,
                        Rule::Content,
                        "content must not be an empty list",
                    )),
                    Some(Value::String(_) | Value::Array(_)) => {}
                    _ => out.push(Violation::new(
                        i,
                        Rule::Content,
                        "a message needs string or list content",
                    )),
                }
            }
            Some("function_call") => {
                let id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
                if id.is_empty() || item.get("name").and_then(Value::as_str).is_none() {
                    out.push(Violation::new(
                        i,
                        Rule::Call,
                        "a function_call needs a call_id and a name",
                    ));
                    continue;
                }
                if !item.get("arguments").is_some_and(Value::is_string) {
                    out.push(Violation::call(
                        i,
                        Rule::Call,
                        id,
                        "arguments must be a JSON string",
                    ));
                }
                if calls.insert(id.to_owned(), i).is_some() {
                    out.push(Violation::call(
                        i,
                        Rule::DuplicateCallId,
                        id,
                        "call_id used twice",
                    ));
                }
                open.push((id.to_owned(), i));
            }
            Some("function_call_output") => {
                let id = item.get("call_id").and_then(Value::as_str).unwrap_or("");
                match open.iter().position(|(c, _)| c == id) {
                    Some(k) => {
                        open.remove(k);
                    }
                    None => out.push(Violation::call(
                        i,
                        Rule::ResultWithoutCall,
                        id,
                        format!("output for {id:?} answers no earlier call"),
                    )),
                }
            }
            _ => {}
        }
    }
    for (id, at) in open {
        let mut v = Violation::call(
            at,
            Rule::UnansweredCall,
            &id,
            format!("function_call {id:?} has no output"),
        );
        // Only calls after the last message-like item are "still running".
        v.at_end = list[at..]
            .iter()
            .all(|it| it.get("type").and_then(Value::as_str) == Some("function_call"));
        out.push(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_results_must_follow_their_calls() {
        let late = r#"[{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                       {"role": "user", "content": "hurry"},
                       {"role": "tool", "tool_call_id": "c1", "content": "x"}]"#;
        let v = validate(Format::OpenaiChat, late).unwrap();
        let rules: Vec<Rule> = v.iter().map(|v| v.rule).collect();
        assert_eq!(rules, vec![Rule::UnansweredCall, Rule::ResultWithoutCall]);
        assert!(!v[0].at_end);
    }

    #[test]
    fn trailing_call_is_reported_at_end() {
        let open = r#"[{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f", "arguments": {}}]}]"#;
        let v = validate(Format::OpenaiChat, open).unwrap();
        assert_eq!(v.len(), 1);
        assert!(v[0].at_end);
    }

    #[test]
    fn anthropic_rules() {
        let doc = r#"{"system": "be brief", "messages": [
          {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
          {"role": "user", "content": [{"type": "text", "text": "and"}, {"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
          {"role": "user", "content": [{"type": "text", "text": ""}]}
        ]}"#;
        let rules: Vec<Rule> = validate(Format::Anthropic, doc)
            .unwrap()
            .iter()
            .map(|v| v.rule)
            .collect();
        assert_eq!(rules, vec![Rule::ResultOrder, Rule::Content]);
    }

    #[test]
    fn responses_rules() {
        let doc = r#"{"input": [{"type": "function_call_output", "call_id": "x", "output": "1"},
          {"type": "function_call", "call_id": "y", "name": "f", "arguments": "{}"},
          {"role": "user", "content": "next"}]}"#;
        let v = validate(Format::Responses, doc).unwrap();
        assert_eq!(v[0].rule, Rule::ResultWithoutCall);
        assert_eq!(v[1].rule, Rule::UnansweredCall);
        assert!(!v[1].at_end);
    }
}
