//! The OpenAI Chat Completions front-end.
//!
//! Reads `system`/`developer`, `user`, `assistant`, `tool` and the legacy `function` role.
//! `content` is a string, `null`, or a list of content parts (`text` parts become text
//! blocks, everything else — images, audio, files, refusals — is kept as it is).
//! `tool_calls` are read in the API's form (`{"id", "type": "function", "function": {"name",
//! "arguments": "<JSON text>"}}`, arguments parsed and kept as text when they are not JSON),
//! in the corpus form (`{"id", "name", "arguments": {...}}`) and as custom-tool calls; the
//! legacy `function_call` pairs with the `function` message that follows. Blocks are, in order:
//! the content (one block for a string, one per part for a list), then each tool call.
//!
//! ```
//! use ctxgc_core::frontend::openai::lower_messages;
//! use ctxgc_core::ir::{Block, Kind};
//! let items = lower_messages(r#"[{"role": "assistant", "content": null, "tool_calls": [
//!   {"id": "c1", "type": "function", "function": {"name": "get_user", "arguments": "{\"id\": 7}"}}]}]"#).unwrap();
//! let Kind::Message(m) = &items[0].kind else { panic!() };
//! let Block::ToolCall(call) = &m.blocks[0] else { panic!() };
//! assert_eq!(call.arguments["id"], 7);
//! ```

use serde_json::{Value, json};

use crate::chat::lowering::{Problems, lower_each, parse_arguments, type_name};
use crate::error::Error;
use crate::formats::protocol::{StreamRound, ToolCallMade, arguments_of_text};
use crate::formats::wire::set_output_text;
use crate::frontend::split::{Layout, RawItem, split_items};
use crate::ir::{Block, Call, Item, Kind, Message, Role, ToolOutput};
use crate::plan::BlockRewrite;

/// Where a block sits in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockPath {
    /// The whole `content` string (or, for a tool message, the whole content).
    Content,
    /// `content[k]`.
    Part(usize),
    /// `tool_calls[k]`.
    ToolCall(usize),
    /// The legacy `function_call`.
    FunctionCall,
}

/// Lowers a message list: a JSON array, or an object with a `messages` array.
pub fn lower_messages(text: &str) -> Result<Vec<Item>, Error> {
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    let layout = if trimmed.starts_with('{') {
        Layout::Wrapped("messages")
    } else {
        Layout::Array
    };
    lower_raw(&split_items(text, layout)?)
}

/// Lowers messages already split into their exact bytes; every problem is reported.
pub fn lower_raw(raw: &[RawItem<'_>]) -> Result<Vec<Item>, Error> {
    lower_each(raw, |index, id, value, problems| {
        lower_message(index, id, value, problems).map(Kind::Message)
    })
}

fn role_of(value: &Value) -> Result<(Role, &str), String> {
    match value.get("role") {
        None => Err("missing".into()),
        Some(Value::String(r)) => match r.as_str() {
            "system" | "developer" => Ok((Role::System, r)),
            "user" => Ok((Role::User, r)),
            "assistant" => Ok((Role::Assistant, r)),
            "tool" | "function" => Ok((Role::Tool, r)),
            other => Err(format!(
                "unknown role {other:?} (expected system, developer, user, assistant, tool or function)"
            )),
        },
        Some(other) => Err(format!("expected a string, found {}", type_name(other))),
    }
}

fn content_blocks(
    value: &Value,
    index: usize,
    id: &str,
    problems: &mut Problems,
) -> Vec<(BlockPath, Block)> {
    match value.get("content") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![(BlockPath::Content, Block::Text { text: s.clone() })],
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(k, part)| {
                let block = match part {
                    Value::String(s) => Block::Text { text: s.clone() },
                    Value::Object(p) => {
                        match (p.get("type").and_then(Value::as_str), p.get("text")) {
                            (Some("text"), Some(Value::String(t))) => {
                                Block::Text { text: t.clone() }
                            }
                            (Some("text"), _) => {
                                problems.push(
                                    index,
                                    id,
                                    Some(&format!("content[{k}].text")),
                                    "a text part needs a string `text`",
                                );
                                Block::Other
                            }
                            _ => Block::Other,
                        }
                    }
                    other => {
                        let at = format!("content[{k}]");
                        problems.expected(index, id, &at, "a content part object", other);
                        Block::Other
                    }
                };
                (BlockPath::Part(k), block)
            })
            .collect(),
        Some(other) => {
            let what = "a string, a list of parts or null";
            problems.expected(index, id, "content", what, other);
            Vec::new()
        }
    }
}

fn tool_call(
    call: &Value,
    k: usize,
    index: usize,
    id: &str,
    problems: &mut Problems,
) -> Option<Call> {
    let field = |f: &str| format!("tool_calls[{k}].{f}");
    let Value::Object(map) = call else {
        let at = format!("tool_calls[{k}]");
        problems.expected(index, id, &at, "an object", call);
        return None;
    };
    let call_id = problems
        .non_empty_string(index, id, call, "id", &field("id"), "missing")?
        .to_owned();
    let (name, arguments) = if let Some(function) = map.get("function") {
        let name = function.get("name").and_then(Value::as_str);
        let arguments = match function.get("arguments") {
            Some(Value::String(s)) => parse_arguments(s),
            Some(other) => other.clone(),
            None => Value::Object(Default::default()),
        };
        (name, arguments)
    } else if let Some(custom) = map.get("custom") {
        let input = custom.get("input").cloned().unwrap_or(Value::Null);
        (custom.get("name").and_then(Value::as_str), input)
    } else {
        let arguments = match map.get("arguments") {
            Some(Value::String(s)) => parse_arguments(s),
            Some(other) => other.clone(),
            None => Value::Object(Default::default()),
        };
        (map.get("name").and_then(Value::as_str), arguments)
    };
    let Some(name) = name else {
        problems.push(
            index,
            id,
            Some(&field("function.name")),
            "missing tool name (a string)",
        );
        return None;
    };
    Some(Call {
        call_id,
        name: name.to_owned(),
        arguments,
    })
}

/// The call id a legacy `function_call` and its `function` result share.
fn legacy_call_id(name: &str) -> String {
    format!("function_call:{name}")
}

/// The message's blocks with where each sits.
pub fn blocks_with_paths(
    index: usize,
    id: &str,
    value: &Value,
    problems: &mut Problems,
) -> Option<(Role, Vec<(BlockPath, Block)>)> {
    let (role, role_text) = match role_of(value) {
        Ok(r) => r,
        Err(message) => {
            problems.push(index, id, Some("role"), message);
            return None;
        }
    };
    let mut blocks = Vec::new();
    match role {
        Role::Tool => {
            let call_id = if role_text == "function" {
                match value.get("name").and_then(Value::as_str) {
                    Some(name) => legacy_call_id(name),
                    None => {
                        problems.push(
                            index,
                            id,
                            Some("name"),
                            "a function message needs its function's name",
                        );
                        return None;
                    }
                }
            } else {
                let missing = "missing: a tool message must name the call it answers";
                problems
                    .non_empty_string(index, id, value, "tool_call_id", "tool_call_id", missing)?
                    .to_owned()
            };
            let output = match value.get("content") {
                None | Some(Value::Null) => Value::String(String::new()),
                Some(_) => problems
                    .string_or_list(index, id, value, "content", "parts")?
                    .to_value(),
            };
            let is_error = value.get("error").and_then(Value::as_bool).unwrap_or(false)
                || value
                    .get("is_error")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
            blocks.push((
                BlockPath::Content,
                Block::ToolResult(ToolOutput {
                    call_id,
                    output,
                    is_error,
                }),
            ));
        }
        _ => {
            blocks.extend(content_blocks(value, index, id, problems));
            match value.get("tool_calls") {
                None | Some(Value::Null) => {}
                Some(Value::Array(calls)) => {
                    for (k, call) in calls.iter().enumerate() {
                        if let Some(call) = tool_call(call, k, index, id, problems) {
                            blocks.push((BlockPath::ToolCall(k), Block::ToolCall(call)));
                        }
                    }
                }
                Some(other) => problems.expected(index, id, "tool_calls", "a list", other),
            }
            if let Some(fc) = value.get("function_call").filter(|v| !v.is_null()) {
                match fc.get("name").and_then(Value::as_str) {
                    Some(name) => {
                        let arguments = match fc.get("arguments") {
                            Some(Value::String(s)) => parse_arguments(s),
                            Some(other) => other.clone(),
                            None => Value::Object(Default::default()),
                        };
                        blocks.push((
                            BlockPath::FunctionCall,
                            Block::ToolCall(Call {
                                call_id: legacy_call_id(name),
                                name: name.to_owned(),
                                arguments,
                            }),
                        ));
                    }
                    None => {
                        problems.push(index, id, Some("function_call.name"), "missing (a string)")
                    }
                }
            }
        }
    }
    Some((role, blocks))
}

/// Lowers one message (a JSON object), recording its problems.
pub fn lower_message(
    index: usize,
    id: &str,
    value: &Value,
    problems: &mut Problems,
) -> Option<Message> {
    let (role, blocks) = blocks_with_paths(index, id, value, problems)?;
    Some(Message {
        role,
        blocks: blocks.into_iter().map(|(_, b)| b).collect(),
    })
}

/// Replaces the content of rewritten blocks in a message (parsed from its original bytes).
pub fn apply_rewrites(value: &mut Value, rewrites: &[BlockRewrite]) -> Result<(), String> {
    let mut problems = Problems::default();
    let Some((_, blocks)) = blocks_with_paths(0, "", value, &mut problems) else {
        return Err("the message no longer lowers".into());
    };
    for rw in rewrites {
        let Some((path, block)) = blocks.get(rw.block) else {
            return Err(format!("no block {}", rw.block));
        };
        match (path, block) {
            (BlockPath::Content, Block::ToolResult(_)) => {
                let slot = value
                    .get_mut("content")
                    .ok_or("a tool message without content")?;
                set_output_text(slot, &rw.text, &["text", "input_text", "output_text"]);
            }
            (BlockPath::Content, _) => {
                value["content"] = Value::String(rw.text.clone());
            }
            (BlockPath::Part(k), _) => {
                let part = value
                    .get_mut("content")
                    .and_then(|c| c.get_mut(*k))
                    .ok_or_else(|| format!("no content part {k}"))?;
                if let Some(p) = part.as_object_mut() {
                    p.insert("text".into(), Value::String(rw.text.clone()));
                } else {
                    *part = Value::String(rw.text.clone());
                }
            }
            (BlockPath::ToolCall(_) | BlockPath::FunctionCall, _) => {
                return Err("tool calls are never rewritten".into());
            }
        }
    }
    Ok(())
}

/// The texts of a message that token counts cover: content text (text parts, refusals),
/// tool-call names and arguments (as sent), tool output text (structured output as compact
/// JSON). Each piece is counted on its own.
pub fn payload(value: &Value, out: &mut Vec<String>) {
    match value.get("content") {
        Some(Value::String(s)) => out.push(s.clone()),
        Some(Value::Array(parts)) => {
            for p in parts {
                match p {
                    Value::String(s) => out.push(s.clone()),
                    Value::Object(m) => {
                        for key in ["text", "refusal"] {
                            if let Some(Value::String(s)) = m.get(key) {
                                out.push(s.clone());
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    let call_text = |call: &Value, out: &mut Vec<String>| {
        let holder = call
            .get("function")
            .or_else(|| call.get("custom"))
            .unwrap_or(call);
        if let Some(Value::String(name)) = holder.get("name") {
            out.push(name.clone());
        }
        match holder.get("arguments").or_else(|| holder.get("input")) {
            Some(Value::String(s)) => out.push(s.clone()),
            Some(other) => out.push(other.to_string()),
            None => {}
        }
    };
    if let Some(Value::Array(calls)) = value.get("tool_calls") {
        for call in calls {
            call_text(call, out);
        }
    }
    if let Some(fc) = value.get("function_call").filter(|v| v.is_object()) {
        call_text(fc, out);
    }
}

/// OpenAI Chat Completions messages.
#[derive(Debug, Clone, Copy)]
pub struct OpenaiChat;

impl crate::formats::wire::WireFormat for OpenaiChat {
    chat_driver!();

    fn format(&self) -> crate::formats::key::Format {
        crate::formats::key::Format::OpenaiChat
    }

    fn name(&self) -> &'static str {
        "openai-chat"
    }

    /// Any message with a role that an earlier format did not claim.
    fn claims_item(&self, item: &serde_json::Map<String, Value>) -> bool {
        item.contains_key("role")
    }

    /// `{"messages": [...]}`: whose messages they are, the first one tells.
    fn claims_object(
        &self,
        object: &dyn crate::formats::shape::ObjectShape,
    ) -> Option<crate::formats::shape::ObjectClaim> {
        use crate::formats::shape::{Member, ObjectClaim};
        (object.member("messages") == Some(Member::List)).then_some(ObjectClaim {
            layout: crate::frontend::split::Layout::Wrapped("messages"),
            by_first_item: true,
        })
    }

    fn endpoint(&self) -> Option<&'static str> {
        Some("/chat/completions")
    }

    fn tool_definition(&self, name: &str, description: &str, parameters: &Value) -> Option<Value> {
        Some(
            json!({"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}),
        )
    }

    /// The `tool_calls` of the first choice's message.
    fn answer_tool_calls(&self, answer: &Value) -> Option<Vec<ToolCallMade>> {
        let message = answer.pointer("/choices/0/message")?;
        let calls = message.get("tool_calls")?.as_array()?;
        Some(
            calls
                .iter()
                .map(|call| ToolCallMade {
                    id: call.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: call
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    arguments: arguments_of_text(
                        call.pointer("/function/arguments").and_then(Value::as_str),
                    ),
                })
                .collect(),
        )
    }

    /// The assistant message, then one `tool` message per result.
    fn continue_request(
        &self,
        request: &mut Value,
        answer: &Value,
        results: &[(&str, &str)],
    ) -> Option<()> {
        let messages = request.get_mut("messages")?.as_array_mut()?;
        messages.push(answer.pointer("/choices/0/message")?.clone());
        for (call_id, text) in results {
            messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": text}));
        }
        Some(())
    }

    fn streams_answers(&self) -> bool {
        true
    }

    /// Chunks pass until one carries `tool_calls`; the text and the calls are gathered from
    /// the deltas.
    fn stream_event(&self, round: &mut StreamRound, bytes: Vec<u8>, data: &str) -> Option<Vec<u8>> {
        if let Ok(chunk) = serde_json::from_str::<Value>(data)
            && let Some(delta) = chunk.pointer("/choices/0/delta")
        {
            if let Some(text) = delta.get("content").and_then(Value::as_str) {
                round.text.push_str(text);
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                round.holding = true;
                for call in calls {
                    let index = call.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                    if round.calls.len() <= index {
                        round.calls.resize(index + 1, Default::default());
                    }
                    let slot = &mut round.calls[index];
                    if let Some(id) = call.get("id").and_then(Value::as_str) {
                        slot.0.push_str(id);
                    }
                    if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                        slot.1.push_str(name);
                    }
                    if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str)
                    {
                        slot.2.push_str(args);
                    }
                }
            }
        }
        round.pass_or_hold(bytes)
    }

    fn stream_tool_calls(&self, round: &StreamRound) -> Vec<ToolCallMade> {
        round
            .calls
            .iter()
            .map(|(id, name, args)| ToolCallMade {
                id: Some(id.clone()),
                name: name.clone(),
                arguments: arguments_of_text(Some(args)),
            })
            .collect()
    }

    fn stream_answer(&self, round: &StreamRound) -> Value {
        let calls: Vec<Value> = round
            .calls
            .iter()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
            })
            .collect();
        let content = if round.text.is_empty() {
            Value::Null
        } else {
            Value::String(round.text.clone())
        };
        json!({"choices": [{"message": {"role": "assistant", "content": content, "tool_calls": calls}}]})
    }

    fn lower_items(&self, raw: &[RawItem<'_>], _system: Option<&str>) -> Result<Vec<Item>, Error> {
        lower_raw(raw)
    }

    fn payload(&self, message: &Value, out: &mut Vec<String>) {
        payload(message, out)
    }

    fn apply_rewrites(&self, message: &mut Value, rewrites: &[BlockRewrite]) -> Result<(), String> {
        apply_rewrites(message, rewrites)
    }

    fn convert_item(
        &self,
        cx: &mut crate::render::messages::Conversion<'_>,
        i: usize,
        p: crate::render::messages::Portable,
    ) -> Result<(), Error> {
        use crate::render::messages::arguments_text;
        use serde_json::{Map, json};
        for (k, (id, text, _)) in p.results.iter().enumerate() {
            let id = cx.result_id(i, k, id);
            cx.push(
                i,
                json!({"role": "tool", "tool_call_id": id, "content": text}),
            );
        }
        let role = match p.role {
            Role::System => "system",
            Role::User | Role::Tool => "user",
            Role::Assistant => "assistant",
        };
        if p.role == Role::Tool && p.texts.is_empty() {
            return Ok(());
        }
        if p.texts.is_empty() && p.calls.is_empty() && !p.results.is_empty() {
            return Ok(());
        }
        let mut m = Map::new();
        m.insert("role".into(), role.into());
        m.insert(
            "content".into(),
            if p.texts.is_empty() && !p.calls.is_empty() {
                Value::Null
            } else {
                Value::String(p.texts.join("\n\n"))
            },
        );
        if !p.calls.is_empty() {
            let calls: Vec<Value> = p
                .calls
                .iter()
                .enumerate()
                .map(|(k, (id, name, args))| {
                    json!({"id": cx.call_id(i, k, id), "type": "function",
                           "function": {"name": name, "arguments": arguments_text(args)}})
                })
                .collect();
            m.insert("tool_calls".into(), Value::Array(calls));
        }
        cx.push(i, Value::Object(m));
        Ok(())
    }

    fn render(
        &self,
        doc: &crate::chat::lowering::ChatDoc,
        session: &crate::session::Session,
        register: Option<&str>,
    ) -> Result<crate::render::messages::RenderedChat, Error> {
        crate::render::messages::render_list(doc, session, register)
    }

    fn validate_list(
        &self,
        _doc: &Value,
        list: &[Value],
        out: &mut Vec<crate::validate::Violation>,
    ) {
        crate::validate::openai(list, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_named() {
        let err = lower_messages(
            r#"[{"role": "robot", "content": "x"}, {"role": "tool", "content": "y"},
               {"role": "assistant", "content": 3}, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f"}}]}]"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("item 0 (id \"m0\"): field \"role\": unknown role \"robot\""),
            "{err}"
        );
        assert!(
            err.contains("item 1 (id \"m1\"): field \"tool_call_id\": missing"),
            "{err}"
        );
        assert!(
            err.contains("item 2 (id \"m2\"): field \"content\""),
            "{err}"
        );
        assert!(
            err.contains("item 3 (id \"m3\"): field \"tool_calls[0].id\": missing"),
            "{err}"
        );
    }

    #[test]
    fn unparsable_arguments_are_kept_as_text() {
        let items = lower_messages(
            r#"[{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]}]"#,
        )
        .unwrap();
        let Kind::Message(m) = &items[0].kind else {
            panic!()
        };
        let Block::ToolCall(call) = &m.blocks[0] else {
            panic!()
        };
        assert_eq!(call.arguments, Value::String("{not json".into()));
    }

    #[test]
    fn legacy_function_calls_pair_by_name() {
        let items = lower_messages(
            r#"[{"role": "assistant", "content": null, "function_call": {"name": "lookup", "arguments": "{}"}},
               {"role": "function", "name": "lookup", "content": "42"}]"#,
        )
        .unwrap();
        let mut pairing = crate::chat::pairing::Pairing::default();
        for (i, item) in items.iter().enumerate() {
            pairing.add(i, item);
        }
        assert_eq!(pairing.call_of(1, 0).unwrap().name, "lookup");
    }

    #[test]
    fn content_parts_are_blocks() {
        let items = lower_messages(
            r#"[{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:"}}]}]"#,
        )
        .unwrap();
        let Kind::Message(m) = &items[0].kind else {
            panic!()
        };
        assert_eq!(
            m.blocks,
            vec![
                Block::Text {
                    text: "look".into()
                },
                Block::Other
            ]
        );
    }
}
