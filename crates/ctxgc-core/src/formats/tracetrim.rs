//! The tracetrim JSONL front-end: one event per line.
//!
//! ```text
//! {"kind": "prompt", "text": "You are a billing agent..."}
//! {"kind": "call", "tool": "list_charges", "arguments": {"customer": "cus_1"}, "output": "{...}", "turn": 0}
//! {"kind": "message", "text": "The last charge was $20.", "turn": 1}
//! ```
//!
//! - `prompt`: `text` (string) — the system prompt;
//! - `call`: `tool` (string), `arguments` (any JSON; a string holding JSON is parsed),
//!   `output` (the raw text the tool returned; other JSON is kept as a value), optional `id`
//!   (the call id; one is made up otherwise) and `is_error` (boolean);
//! - `message`: `text` (string) — the agent's message (the last one is its answer), or a
//!   user turn with `"role": "user"`.
//!
//! The optional `turn` (integer) is the model turn that produced the event; events of one
//! turn become one assistant message holding that turn's text and calls, followed by one
//! tool message per call, so calls emitted together stay together. Turns must not decrease.
//! An event without `turn` is a turn of its own. A prompt's turn (`-1`) is ignored.
//!
//! ```
//! use ctxgc_core::frontend::tracetrim::lower_tracetrim;
//! use ctxgc_core::ir::{Block, Kind, Role};
//! let items = lower_tracetrim(r#"{"kind": "prompt", "text": "Be brief."}
//! {"kind": "call", "tool": "a", "arguments": {}, "output": "1", "turn": 0}
//! {"kind": "call", "tool": "b", "arguments": "{\"x\": 2}", "output": "2", "turn": 0}
//! {"kind": "message", "text": "Done.", "turn": 1}"#).unwrap();
//! // system, one assistant message with both calls, two tool messages, the answer.
//! assert_eq!(items.len(), 5);
//! let Kind::Message(m) = &items[1].kind else { panic!() };
//! assert_eq!(m.role, Role::Assistant);
//! assert_eq!(m.blocks.iter().filter(|b| matches!(b, Block::ToolCall(_))).count(), 2);
//! let err = lower_tracetrim(r#"{"kind": "call", "arguments": {}, "output": ""}"#).unwrap_err();
//! assert!(err.to_string().contains(r#"field "tool""#));
//! ```

use serde_json::{Map, Value};

use crate::chat::lowering::type_name;
use crate::error::{Diagnostic, Error};
use crate::ir::{Block, Call, Item, Kind, Message, Role, ToolOutput};

/// Fields each event kind reads; the rest are kept in the item's `extra`.
const KNOWN: [&str; 10] = [
    "kind",
    "text",
    "tool",
    "arguments",
    "output",
    "turn",
    "id",
    "is_error",
    "role",
    "call_id",
];

/// One validated event.
enum Event {
    Prompt(String),
    User(String),
    Agent {
        text: String,
    },
    Call {
        id: String,
        tool: String,
        arguments: Value,
        output: Value,
        is_error: bool,
    },
}

struct Line {
    index: usize,
    raw: String,
    turn: Option<i64>,
    event: Event,
    extra: Option<Value>,
}

fn problem(index: usize, field: Option<&str>, message: impl Into<String>) -> Diagnostic {
    Diagnostic::new(index, None, field, message)
}

fn string_field(
    map: &Map<String, Value>,
    index: usize,
    field: &str,
    problems: &mut Vec<Diagnostic>,
) -> Option<String> {
    match map.get(field) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            problems.push(problem(
                index,
                Some(field),
                format!("expected a string, found {}", type_name(other)),
            ));
            None
        }
        None => {
            problems.push(problem(index, Some(field), "missing"));
            None
        }
    }
}

fn read_line(
    index: usize,
    line_no: usize,
    raw: &str,
    problems: &mut Vec<Diagnostic>,
) -> Option<Line> {
    let value: Value = match serde_json::from_str(raw) {
        Ok(v) => v,
        Err(e) => {
            problems.push(problem(
                index,
                None,
                format!("line {line_no}: malformed JSON: {e}"),
            ));
            return None;
        }
    };
    let Value::Object(map) = value else {
        problems.push(problem(
            index,
            None,
            format!("expected an object, found {}", type_name(&value)),
        ));
        return None;
    };
    let before = problems.len();
    let turn = match map.get("turn") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64(),
        Some(other) => {
            problems.push(problem(
                index,
                Some("turn"),
                format!("expected an integer, found {}", type_name(other)),
            ));
            None
        }
    };
    let event = match map.get("kind").and_then(Value::as_str) {
        Some("prompt") => string_field(&map, index, "text", problems).map(Event::Prompt),
        Some("message") => {
            let text = string_field(&map, index, "text", problems);
            match map.get("role").map(|r| r.as_str()) {
                None | Some(Some("assistant" | "agent")) => text.map(|text| Event::Agent { text }),
                Some(Some("user")) => text.map(Event::User),
                Some(_) => {
                    problems.push(problem(
                        index,
                        Some("role"),
                        "expected \"assistant\" or \"user\"",
                    ));
                    None
                }
            }
        }
        Some("call") => {
            let tool = string_field(&map, index, "tool", problems);
            let arguments = match map.get("arguments") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(Value::String(s)) => {
                    serde_json::from_str(s).unwrap_or(Value::String(s.clone()))
                }
                Some(other) => other.clone(),
            };
            let output = match map.get("output") {
                Some(v) => Some(v.clone()),
                None => {
                    problems.push(problem(index, Some("output"), "missing"));
                    None
                }
            };
            let is_error = match map.get("is_error") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(other) => {
                    problems.push(problem(
                        index,
                        Some("is_error"),
                        format!("expected a boolean, found {}", type_name(other)),
                    ));
                    false
                }
            };
            let id = match map.get("id").or_else(|| map.get("call_id")) {
                None | Some(Value::Null) => format!("call{index}"),
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                Some(other) => {
                    problems.push(problem(
                        index,
                        Some("id"),
                        format!("expected a non-empty string, found {}", type_name(other)),
                    ));
                    String::new()
                }
            };
            match (tool, output) {
                (Some(tool), Some(output)) => Some(Event::Call {
                    id,
                    tool,
                    arguments,
                    output,
                    is_error,
                }),
                _ => None,
            }
        }
        Some(other) => {
            problems.push(problem(
                index,
                Some("kind"),
                format!("unknown kind {other:?}: expected \"prompt\", \"call\" or \"message\""),
            ));
            None
        }
        None => {
            problems.push(problem(
                index,
                Some("kind"),
                "missing (expected \"prompt\", \"call\" or \"message\")",
            ));
            None
        }
    };
    if problems.len() > before {
        return None;
    }
    let extra: Map<String, Value> = map
        .iter()
        .filter(|(k, _)| !KNOWN.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some(Line {
        index,
        raw: raw.to_owned(),
        turn,
        event: event?,
        extra: (!extra.is_empty()).then_some(Value::Object(extra)),
    })
}

fn item(id: usize, raw: String, role: Role, blocks: Vec<Block>, extra: Option<Value>) -> Item {
    Item {
        id: format!("m{id}"),
        raw,
        kind: Kind::Message(Message { role, blocks }),
        parent: None,
        timestamp: None,
        retention: Default::default(),
        extra: extra.map(Box::new),
    }
}

/// Lowers a tracetrim trace. Every problem of every line is reported.
pub fn lower_tracetrim(text: &str) -> Result<Vec<Item>, Error> {
    let mut problems = Vec::new();
    let mut lines = Vec::new();
    let mut index = 0;
    for (n, raw) in text.trim_start_matches('\u{feff}').lines().enumerate() {
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        if let Some(line) = read_line(index, n + 1, raw, &mut problems) {
            lines.push(line);
        }
        index += 1;
    }
    // Turns must not go back: a group is the run of consecutive agent events of one turn.
    let mut last_turn: Option<i64> = None;
    for line in &lines {
        if matches!(line.event, Event::Prompt(_) | Event::User(_)) {
            continue;
        }
        if let Some(t) = line.turn {
            if let Some(prev) = last_turn
                && t < prev
            {
                problems.push(problem(
                    line.index,
                    Some("turn"),
                    format!("turn {t} comes after turn {prev}: turns must not decrease"),
                ));
            }
            last_turn = Some(t);
        }
    }
    if !problems.is_empty() {
        return Err(Error::Invalid(problems));
    }
    let mut items = Vec::new();
    let mut group: Vec<Line> = Vec::new();
    let flush = |group: &mut Vec<Line>, items: &mut Vec<Item>| {
        if group.is_empty() {
            return;
        }
        let mut blocks = Vec::new();
        let mut results = Vec::new();
        let raw = group
            .iter()
            .map(|l| l.raw.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let turn = group[0].turn;
        for line in group.drain(..) {
            match line.event {
                Event::Agent { text } => blocks.push(Block::Text { text }),
                Event::Call {
                    id,
                    tool,
                    arguments,
                    output,
                    is_error,
                } => {
                    blocks.push(Block::ToolCall(Call {
                        call_id: id.clone(),
                        name: tool,
                        arguments,
                    }));
                    results.push((line.raw, id, output, is_error, line.extra));
                }
                Event::Prompt(_) | Event::User(_) => {}
            }
        }
        let extra = turn.map(|t| serde_json::json!({ "turn": t }));
        let n = items.len();
        items.push(item(n, raw, Role::Assistant, blocks, extra));
        for (raw, call_id, output, is_error, extra) in results {
            let n = items.len();
            items.push(item(
                n,
                raw,
                Role::Tool,
                vec![Block::ToolResult(ToolOutput {
                    call_id,
                    output,
                    is_error,
                })],
                extra,
            ));
        }
    };
    for line in lines {
        match &line.event {
            Event::Prompt(_) | Event::User(_) => {
                flush(&mut group, &mut items);
                let (role, text) = match line.event {
                    Event::Prompt(t) => (Role::System, t),
                    Event::User(t) => (Role::User, t),
                    _ => unreachable!("matched above"),
                };
                let n = items.len();
                items.push(item(
                    n,
                    line.raw,
                    role,
                    vec![Block::Text { text }],
                    line.extra,
                ));
            }
            Event::Agent { .. } | Event::Call { .. } => {
                let same_turn =
                    line.turn.is_some() && group.last().is_some_and(|g| g.turn == line.turn);
                if !same_turn {
                    flush(&mut group, &mut items);
                }
                group.push(line);
            }
        }
    }
    flush(&mut group, &mut items);
    Ok(items)
}

/// tracetrim traces: lowered (for learning projections and the bench), not compiled yet.
#[derive(Debug, Clone, Copy)]
pub struct Tracetrim;

impl Tracetrim {
    fn unsupported(&self) -> Error {
        use crate::formats::wire::WireFormat;
        Error::UnknownFormat(format!("{} input is not supported yet", self.name()))
    }
}

impl crate::formats::wire::WireFormat for Tracetrim {
    fn format(&self) -> crate::formats::key::Format {
        crate::formats::key::Format::Tracetrim
    }

    fn family(&self) -> crate::formats::wire::Family {
        crate::formats::wire::Family::ToolTrace
    }

    fn name(&self) -> &'static str {
        "tracetrim"
    }

    fn claims_item(&self, item: &Map<String, Value>) -> bool {
        matches!(
            item.get("kind").and_then(Value::as_str),
            Some("prompt" | "call" | "message")
        )
    }

    /// A one-line trace: an object with a `kind`.
    fn claims_object(
        &self,
        object: &dyn crate::formats::shape::ObjectShape,
    ) -> Option<crate::formats::shape::ObjectClaim> {
        object
            .member("kind")
            .is_some()
            .then_some(crate::formats::shape::ObjectClaim {
                layout: crate::frontend::split::Layout::Lines,
                by_first_item: false,
            })
    }

    /// Its lines carry a `role` that chat formats would claim; the `kind` comes first.
    fn claims_line(&self, line: &Map<String, Value>) -> bool {
        self.claims_item(line)
    }

    fn compilable(&self) -> Result<(), Error> {
        Err(self.unsupported())
    }

    fn lower<'a>(
        &self,
        text: &'a str,
        _options: &crate::compile::options::Options,
    ) -> Result<Vec<crate::formats::wire::Lowered<'a>>, Error> {
        let items = lower_tracetrim(text)?;
        Ok(vec![crate::formats::wire::Lowered::bare(
            crate::formats::key::Format::Tracetrim,
            text,
            items,
        )])
    }

    fn session(&self, options: &crate::compile::options::Options) -> crate::session::Session {
        crate::compile::options::event_session_template(options)
    }

    fn report(
        &self,
        _lowered: &crate::formats::wire::Lowered<'_>,
        _session: &crate::session::Session,
        _options: &crate::compile::options::Options,
    ) -> Result<crate::compile::report::Compiled, Error> {
        Err(self.unsupported())
    }

    fn before_after(
        &self,
        _lowered: &crate::formats::wire::Lowered<'_>,
        _session: &crate::session::Session,
        _options: &crate::compile::options::Options,
        _prefix: &str,
    ) -> Result<(String, String), Error> {
        Err(self.unsupported())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(items: &[Item]) -> Vec<(Role, usize)> {
        items
            .iter()
            .map(|i| match &i.kind {
                Kind::Message(m) => (m.role, m.blocks.len()),
                _ => panic!("messages only"),
            })
            .collect()
    }

    #[test]
    fn events_without_turns_are_turns_of_their_own() {
        let items = lower_tracetrim(
            "{\"kind\": \"call\", \"tool\": \"a\", \"arguments\": {}, \"output\": \"1\"}\n\
             {\"kind\": \"call\", \"tool\": \"b\", \"arguments\": {}, \"output\": \"2\"}\n\
             {\"kind\": \"message\", \"role\": \"user\", \"text\": \"ok?\"}\n\
             {\"kind\": \"message\", \"text\": \"yes\"}",
        )
        .unwrap();
        assert_eq!(
            roles(&items),
            [
                (Role::Assistant, 1),
                (Role::Tool, 1),
                (Role::Assistant, 1),
                (Role::Tool, 1),
                (Role::User, 1),
                (Role::Assistant, 1)
            ]
        );
    }

    #[test]
    fn every_problem_is_reported_with_its_line_and_field() {
        let err = lower_tracetrim(
            "{\"kind\": \"call\", \"tool\": 3, \"output\": \"x\", \"turn\": 2}\n\
             {\"kind\": \"nope\"}\n\
             {\"kind\": \"message\", \"text\": \"a\", \"turn\": \"1\"}\n\
             [1]\n\
             {\"kind\": \"call\", \"tool\": \"t\", \"output\": \"x\", \"turn\": 5}\n\
             {\"kind\": \"call\", \"tool\": \"t\", \"output\": \"x\", \"turn\": 4}",
        )
        .unwrap_err()
        .to_string();
        for expected in [
            "item 0: field \"tool\": expected a string, found number",
            "item 1: field \"kind\": unknown kind \"nope\"",
            "item 2: field \"turn\": expected an integer, found string",
            "item 3: expected an object, found array",
            "item 5: field \"turn\": turn 4 comes after turn 5",
        ] {
            assert!(err.contains(expected), "{expected}\n{err}");
        }
        let err = lower_tracetrim("{\"kind\": \"prompt\", \"text\": \"a\"}\n{oops").unwrap_err();
        assert!(err.to_string().contains("item 1"), "{err}");
    }

    #[test]
    fn outputs_keep_their_value_and_unknown_fields_are_kept() {
        let items = lower_tracetrim(
            r#"{"kind": "call", "tool": "t", "arguments": "not json", "output": {"a": 1}, "latency_ms": 4}"#,
        )
        .unwrap();
        let Kind::Message(m) = &items[0].kind else {
            panic!()
        };
        let Block::ToolCall(call) = &m.blocks[0] else {
            panic!()
        };
        assert_eq!(call.arguments, Value::String("not json".into()));
        let Kind::Message(m) = &items[1].kind else {
            panic!()
        };
        let Block::ToolResult(out) = &m.blocks[0] else {
            panic!()
        };
        assert_eq!(out.output, serde_json::json!({"a": 1}));
        assert_eq!(
            items[1].extra.as_deref(),
            Some(&serde_json::json!({"latency_ms": 4}))
        );
    }
}
