//! A run, as the learner sees it: the tool calls the agent made (arguments and outputs), the
//! text the agent wrote, and the text it was given (system prompt, user turns), in order,
//! each stamped with the model turn that produced it.
//!
//! Turns matter because calls emitted in the same model turn were all written before any of
//! their outputs existed: one call's arguments never count as using a sibling's output. A
//! turn is one assistant message (message transcripts), one `turn` number (tracetrim JSONL),
//! or one call (event traces, which carry no turns: each call is its own turn, in arrival
//! order).
//!
//! ```
//! use ctxgc_core::projection::Run;
//! use serde_json::json;
//! let mut run = Run::new("r1");
//! run.push_prompt("You are a travel agent.");
//! let t = run.push_call("search", json!({"to": "SEA"}), "{\"flights\": []}", None);
//! run.push_message("No flights.", None);
//! assert_eq!(run.calls[0].turn, t);
//! assert_eq!(run.answer(), Some("No flights."));
//! ```

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ir::{Block, Item, Kind, Role};

/// Who wrote a text of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Author {
    /// The system prompt (or developer instructions).
    Prompt,
    /// The user (or a simulated user).
    User,
    /// The agent itself: its messages, the last of which is its answer.
    Agent,
}

/// A text of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Text {
    /// Position in the run (texts and calls share one sequence).
    pub order: u64,
    /// The model turn that wrote it (for prompt and user texts: the turn before them).
    pub turn: i64,
    /// Who wrote it.
    pub author: Author,
    /// The text.
    pub text: String,
}

/// A tool call of a run, with its output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceCall {
    /// The id the output refers to (synthesised where the source had none).
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments (parsed JSON where they were JSON text).
    pub arguments: Value,
    /// The model turn that emitted the call.
    pub turn: i64,
    /// Position of the call in the run.
    pub order: u64,
    /// The raw output text, once it arrived.
    pub output: Option<String>,
    /// Position of the output in the run.
    pub output_order: u64,
    /// The provider marked the output as an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// The agent asked for fields of a trimmed output back (`expand`): those fields were used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expansion {
    /// Index in [`Run::calls`] of the call whose output was expanded.
    pub call: usize,
    /// The generalised paths given back.
    pub fields: Vec<String>,
}

/// One run of an agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// The run's id (a corpus record's `id`, a file name, ...).
    pub id: String,
    /// Prompt, user and agent texts, in order.
    pub texts: Vec<Text>,
    /// Tool calls, in order.
    pub calls: Vec<TraceCall>,
    /// Fields the agent asked back from trimmed outputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expansions: Vec<Expansion>,
    /// Tool results that answer no call of the agent (a dangling call id).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub orphan_results: u64,
    /// Calls made by the (simulated) user rather than the agent, left out of the run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub user_calls: u64,
    next_order: u64,
    last_turn: i64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Arguments given as text are parsed when they are JSON; otherwise kept as a string.
pub fn parse_arguments(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// A tool output value as the text the agent saw: strings as they are, content-part lists
/// as their texts joined, anything else as compact JSON.
pub fn output_text(output: &Value) -> String {
    match output {
        Value::String(s) => s.clone(),
        Value::Array(parts)
            if !parts.is_empty()
                && parts
                    .iter()
                    .all(|p| p.get("text").and_then(Value::as_str).is_some()) =>
        {
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        }
        other => other.to_string(),
    }
}

impl Run {
    /// An empty run.
    pub fn new(id: impl Into<String>) -> Run {
        Run {
            id: id.into(),
            last_turn: -1,
            ..Run::default()
        }
    }

    fn take_order(&mut self) -> u64 {
        let o = self.next_order;
        self.next_order += 1;
        o
    }

    fn turn_for(&mut self, turn: Option<i64>) -> i64 {
        let t = turn.unwrap_or(self.last_turn + 1).max(self.last_turn);
        self.last_turn = t;
        t
    }

    /// The turn of the latest agent text or call (`-1` before any).
    pub fn last_turn(&self) -> i64 {
        self.last_turn
    }

    /// Appends a text by `author` in `turn`, next in order.
    fn push_text(&mut self, author: Author, turn: i64, text: String) {
        let order = self.take_order();
        self.texts.push(Text {
            order,
            turn,
            author,
            text,
        });
    }

    /// Appends system-prompt text.
    pub fn push_prompt(&mut self, text: impl Into<String>) {
        self.push_text(Author::Prompt, self.last_turn, text.into());
    }

    /// Appends a user turn.
    pub fn push_user(&mut self, text: impl Into<String>) {
        self.push_text(Author::User, self.last_turn, text.into());
    }

    /// Appends an agent message; `turn` is the model turn that wrote it (a new turn if
    /// `None`). Returns the turn used.
    pub fn push_message(&mut self, text: impl Into<String>, turn: Option<i64>) -> i64 {
        let turn = self.turn_for(turn);
        self.push_text(Author::Agent, turn, text.into());
        turn
    }

    /// Appends a call with its output; `turn` as for [`Run::push_message`]. Returns the turn.
    pub fn push_call(
        &mut self,
        tool: impl Into<String>,
        arguments: Value,
        output: impl Into<String>,
        turn: Option<i64>,
    ) -> i64 {
        let turn = self.turn_for(turn);
        let order = self.take_order();
        let output_order = self.take_order();
        let index = self.calls.len();
        self.calls.push(TraceCall {
            call_id: format!("c{index}"),
            tool: tool.into(),
            arguments,
            turn,
            order,
            output: Some(output.into()),
            output_order,
            is_error: false,
        });
        turn
    }

    /// Records that the agent asked back `fields` of call `call`'s output.
    pub fn push_expansion(&mut self, call: usize, fields: Vec<String>) {
        self.expansions.push(Expansion { call, fields });
    }

    /// The agent's answer: its last message, if it wrote any.
    pub fn answer(&self) -> Option<&str> {
        self.texts
            .iter()
            .rev()
            .find(|t| t.author == Author::Agent && !t.text.trim().is_empty())
            .map(|t| t.text.as_str())
    }

    /// Builds a run from lowered items (any front-end): messages with tool-call and
    /// tool-result blocks, or tool_call / tool_result events.
    ///
    /// Calls on user messages (simulated users with tools of their own) are left out, with
    /// their results: the agent never saw them. A result is matched to the oldest unanswered
    /// call with its id, so sources that reuse call ids pair up in order.
    pub fn from_items(id: impl Into<String>, items: &[Item]) -> Run {
        let mut run = Run::new(id);
        let mut pending: BTreeMap<String, VecDeque<usize>> = BTreeMap::new();
        let mut user_pending: BTreeMap<String, u64> = BTreeMap::new();
        for item in items {
            match &item.kind {
                Kind::Message(message) => {
                    let text = message
                        .blocks
                        .iter()
                        .filter_map(|b| match b {
                            Block::Text { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                        .join("\n");
                    let calls = message.blocks.iter().filter_map(|b| match b {
                        Block::ToolCall(call) => Some(call),
                        _ => None,
                    });
                    match message.role {
                        Role::System => run.push_prompt(text),
                        Role::User => {
                            if !text.trim().is_empty() {
                                run.push_user(text);
                            }
                            for call in calls {
                                *user_pending.entry(call.call_id.clone()).or_default() += 1;
                                run.user_calls += 1;
                            }
                        }
                        Role::Assistant => {
                            let turn = run.turn_for(None);
                            if !text.trim().is_empty() {
                                run.push_message(text, Some(turn));
                            }
                            let order = run.take_order();
                            for call in calls {
                                run.open_call(&mut pending, call, turn, order);
                            }
                        }
                        Role::Tool => {}
                    }
                    for block in &message.blocks {
                        if let Block::ToolResult(out) = block {
                            run.close_call(&mut pending, &mut user_pending, out);
                        }
                    }
                }
                Kind::ToolCall(call) => {
                    let turn = run.turn_for(None);
                    let order = run.take_order();
                    run.open_call(&mut pending, call, turn, order);
                }
                Kind::ToolResult(out) => run.close_call(&mut pending, &mut user_pending, out),
                Kind::Note { content, .. } => {
                    run.push_message(content.clone(), None);
                }
                _ => {}
            }
        }
        run
    }

    fn open_call(
        &mut self,
        pending: &mut BTreeMap<String, VecDeque<usize>>,
        call: &crate::ir::Call,
        turn: i64,
        order: u64,
    ) {
        let index = self.calls.len();
        pending
            .entry(call.call_id.clone())
            .or_default()
            .push_back(index);
        self.calls.push(TraceCall {
            call_id: call.call_id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            turn,
            order,
            output: None,
            output_order: order,
            is_error: false,
        });
    }

    fn close_call(
        &mut self,
        pending: &mut BTreeMap<String, VecDeque<usize>>,
        user_pending: &mut BTreeMap<String, u64>,
        out: &crate::ir::ToolOutput,
    ) {
        let order = self.take_order();
        if let Some(index) = pending.get_mut(&out.call_id).and_then(VecDeque::pop_front) {
            let call = &mut self.calls[index];
            call.output = Some(output_text(&out.output));
            call.output_order = order;
            call.is_error = out.is_error;
        } else if let Some(n) = user_pending.get_mut(&out.call_id).filter(|n| **n > 0) {
            *n -= 1;
        } else {
            self.orphan_results += 1;
        }
    }

    /// The run as tracetrim JSONL (one event per line: `prompt`, `call` with its output,
    /// `message`; user turns as `message` with `"role": "user"`), turns included.
    pub fn to_tracetrim_jsonl(&self) -> String {
        let mut events: Vec<(u64, Value)> = Vec::new();
        for t in &self.texts {
            let v = match t.author {
                Author::Prompt => serde_json::json!({"kind": "prompt", "text": t.text, "turn": -1}),
                Author::User => {
                    serde_json::json!({"kind": "message", "role": "user", "text": t.text})
                }
                Author::Agent => {
                    serde_json::json!({"kind": "message", "text": t.text, "turn": t.turn})
                }
            };
            events.push((t.order, v));
        }
        for c in &self.calls {
            let mut v = serde_json::json!({
                "kind": "call", "tool": c.tool, "arguments": c.arguments,
                "output": c.output.clone().unwrap_or_default(), "turn": c.turn,
            });
            if c.is_error {
                v["is_error"] = Value::Bool(true);
            }
            events.push((c.order, v));
        }
        events.sort_by_key(|(o, _)| *o);
        let mut out = String::new();
        for (_, v) in events {
            out.push_str(&v.to_string());
            out.push('\n');
        }
        out
    }

    /// Names of the tools the run called (with an output), sorted.
    pub fn tools(&self) -> BTreeSet<&str> {
        self.calls
            .iter()
            .filter(|c| c.output.is_some())
            .map(|c| c.tool.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Call, Message, ToolOutput};
    use serde_json::json;

    fn item(kind: Kind) -> Item {
        Item {
            id: "x".into(),
            raw: String::new(),
            kind,
            parent: None,
            timestamp: None,
            retention: Default::default(),
            extra: None,
        }
    }

    fn msg(role: Role, blocks: Vec<Block>) -> Item {
        item(Kind::Message(Message { role, blocks }))
    }

    fn call(id: &str, name: &str) -> Block {
        Block::ToolCall(Call {
            call_id: id.into(),
            name: name.into(),
            arguments: json!({}),
        })
    }

    fn result(id: &str, out: &str) -> Block {
        Block::ToolResult(ToolOutput {
            call_id: id.into(),
            output: json!(out),
            is_error: false,
        })
    }

    #[test]
    fn calls_of_one_message_share_a_turn_and_reused_ids_pair_in_order() {
        let items = vec![
            msg(
                Role::System,
                vec![Block::Text {
                    text: "policy".into(),
                }],
            ),
            msg(Role::Assistant, vec![call("a", "f"), call("b", "g")]),
            msg(Role::Tool, vec![result("a", "1")]),
            msg(Role::Tool, vec![result("b", "2")]),
            msg(Role::Assistant, vec![call("a", "h")]),
            msg(Role::Tool, vec![result("a", "3")]),
            msg(
                Role::Assistant,
                vec![Block::Text {
                    text: "done".into(),
                }],
            ),
        ];
        let run = Run::from_items("r", &items);
        let turns: Vec<i64> = run.calls.iter().map(|c| c.turn).collect();
        assert_eq!(turns, [0, 0, 1]);
        let outs: Vec<_> = run.calls.iter().map(|c| c.output.as_deref()).collect();
        assert_eq!(outs, [Some("1"), Some("2"), Some("3")]);
        assert_eq!(run.answer(), Some("done"));
        assert_eq!(run.orphan_results, 0);
    }

    #[test]
    fn user_side_calls_are_left_out() {
        let items = vec![
            msg(Role::User, vec![call("u1", "toggle")]),
            msg(Role::Tool, vec![result("u1", "ok")]),
            msg(Role::Tool, vec![result("zz", "?")]),
        ];
        let run = Run::from_items("r", &items);
        assert!(run.calls.is_empty());
        assert_eq!((run.user_calls, run.orphan_results), (1, 1));
    }

    #[test]
    fn events_are_one_turn_per_call() {
        let items = vec![
            item(Kind::ToolCall(Call {
                call_id: "e1".into(),
                name: "f".into(),
                arguments: json!({}),
            })),
            item(Kind::ToolCall(Call {
                call_id: "e2".into(),
                name: "f".into(),
                arguments: json!({}),
            })),
            item(Kind::ToolResult(ToolOutput {
                call_id: "e1".into(),
                output: json!([{"type": "text", "text": "x"}]),
                is_error: true,
            })),
        ];
        let run = Run::from_items("r", &items);
        assert_eq!(run.calls[0].turn, 0);
        assert_eq!(run.calls[1].turn, 1);
        assert_eq!(run.calls[0].output.as_deref(), Some("x"));
        assert!(run.calls[0].is_error);
        assert_eq!(run.calls[1].output, None);
    }
}
