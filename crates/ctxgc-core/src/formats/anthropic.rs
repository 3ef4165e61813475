//! The Anthropic Messages front-end.
//!
//! Reads the top-level `system` (a string or a list of text blocks) as its own item, id
//! `system`, placed first; then `user` and `assistant` messages whose `content` is a string or
//! a list of blocks: `text`, `tool_use` (a call), `tool_result` (an output, in a user
//! message), `thinking` and `redacted_thinking` (reasoning the API needs back unedited: never
//! rewritten), and anything else (images, documents, server tools) kept as it is. Blocks are
//! the content blocks in order (one block for a string content).
//!
//! ```
//! use ctxgc_core::frontend::anthropic::lower_raw;
//! use ctxgc_core::frontend::{split_items, Layout};
//! use ctxgc_core::ir::{Block, Kind};
//! let raw = split_items(r#"[{"role": "assistant", "content": [
//!   {"type": "thinking", "thinking": "…", "signature": "sig"},
//!   {"type": "tool_use", "id": "tu1", "name": "get_weather", "input": {"city": "Paris"}}]}]"#, Layout::Array).unwrap();
//! let items = lower_raw(&raw, Some(r#""You are terse.""#)).unwrap();
//! assert_eq!(items[0].id, "system");
//! let Kind::Message(m) = &items[1].kind else { panic!() };
//! assert!(matches!(m.blocks[0], Block::Thinking));
//! assert!(matches!(&m.blocks[1], Block::ToolCall(c) if c.name == "get_weather"));
//! ```

use serde_json::{Value, json};

use crate::chat::lowering::{ChatDoc, Envelope};
use crate::chat::lowering::{Problems, StringOrList, assign_ids, chat_item, parse_item, type_name};
use crate::error::{Diagnostic, Error};
use crate::formats::protocol::{StreamRound, ToolCallMade, event_json};
use crate::formats::wire::set_output_text;
use crate::frontend::split::RawItem;
use crate::ir::{Block, Call, Item, Kind, Message, Role, ToolOutput};
use crate::plan::BlockRewrite;
use crate::render::messages::{
    OutputMessage, RenderedChat, Source, internal, item_json, write_array, write_object,
};
use crate::session::Session;

/// The id of the item lowered from the top-level `system`.
pub const SYSTEM_ID: &str = "system";

/// Lowers the system prompt's raw bytes (a string or a list of text blocks).
pub fn lower_system(raw: &str) -> Result<Item, Error> {
    let value: Value = serde_json::from_str(raw).map_err(|e| Error::json("`system`", &e))?;
    let blocks = match &value {
        Value::String(s) => vec![Block::Text { text: s.clone() }],
        Value::Array(list) => list
            .iter()
            .map(
                |b| match (b.get("type").and_then(Value::as_str), b.get("text")) {
                    (Some("text"), Some(Value::String(t))) => Block::Text { text: t.clone() },
                    _ => Block::Other,
                },
            )
            .collect(),
        Value::Null => Vec::new(),
        other => {
            return Err(Error::Invalid(vec![Diagnostic::new(
                0,
                Some(SYSTEM_ID.into()),
                Some("system"),
                format!(
                    "expected a string or a list of text blocks, found {}",
                    type_name(other)
                ),
            )]));
        }
    };
    Ok(chat_item(
        SYSTEM_ID.into(),
        raw,
        Kind::Message(Message {
            role: Role::System,
            blocks,
        }),
    ))
}

/// Lowers messages already split into their exact bytes, after the system prompt if given.
pub fn lower_raw(raw: &[RawItem<'_>], system: Option<&str>) -> Result<Vec<Item>, Error> {
    let mut items = Vec::with_capacity(raw.len() + 1);
    if let Some(system) = system {
        items.push(lower_system(system)?);
    }
    let mut problems = Problems::default();
    let values: Vec<Option<Value>> = raw
        .iter()
        .enumerate()
        .map(|(i, r)| parse_item(r, i, &mut problems))
        .collect();
    // Anthropic messages carry no ids; `system` is reserved for the system prompt.
    let provider: Vec<Option<String>> = values.iter().map(|_| None).collect();
    let ids = assign_ids(&provider, 0);
    for (index, (value, raw)) in values.iter().zip(raw).enumerate() {
        let Some(value) = value else { continue };
        if let Some(message) = lower_message(index, &ids[index], value, &mut problems) {
            items.push(chat_item(
                ids[index].clone(),
                raw.text,
                Kind::Message(message),
            ));
        }
    }
    problems.finish(items)
}

fn block(index: usize, id: &str, k: usize, b: &Value, problems: &mut Problems) -> Block {
    let field = |f: &str| format!("content[{k}].{f}");
    let Value::Object(map) = b else {
        let at = format!("content[{k}]");
        problems.expected(index, id, &at, "a content block object", b);
        return Block::Other;
    };
    match map.get("type").and_then(Value::as_str) {
        Some("text") => match map.get("text") {
            Some(Value::String(t)) => Block::Text { text: t.clone() },
            _ => {
                problems.push(
                    index,
                    id,
                    Some(&field("text")),
                    "a text block needs a string `text`",
                );
                Block::Other
            }
        },
        Some("tool_use") => {
            let call_id = map.get("id").and_then(Value::as_str);
            let name = map.get("name").and_then(Value::as_str);
            match (call_id, name) {
                (Some(call_id), Some(name)) if !call_id.is_empty() => Block::ToolCall(Call {
                    call_id: call_id.to_owned(),
                    name: name.to_owned(),
                    arguments: map.get("input").cloned().unwrap_or(Value::Null),
                }),
                (None, _) | (Some(_), Some(_)) => {
                    problems.push(
                        index,
                        id,
                        Some(&field("id")),
                        "a tool_use block needs a non-empty string `id`",
                    );
                    Block::Other
                }
                (Some(_), None) => {
                    problems.push(
                        index,
                        id,
                        Some(&field("name")),
                        "a tool_use block needs a string `name`",
                    );
                    Block::Other
                }
            }
        }
        Some("tool_result") => match map.get("tool_use_id").and_then(Value::as_str) {
            Some(call_id) if !call_id.is_empty() => {
                let output = map.get("content").cloned().unwrap_or(Value::Null);
                if !matches!(output, Value::Null | Value::String(_) | Value::Array(_)) {
                    let at = field("content");
                    problems.expected(index, id, &at, "a string or a list of blocks", &output);
                }
                Block::ToolResult(ToolOutput {
                    call_id: call_id.to_owned(),
                    output,
                    is_error: map
                        .get("is_error")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                })
            }
            _ => {
                problems.push(
                    index,
                    id,
                    Some(&field("tool_use_id")),
                    "a tool_result block needs a non-empty string `tool_use_id`",
                );
                Block::Other
            }
        },
        Some("thinking" | "redacted_thinking") => Block::Thinking,
        Some(_) => Block::Other,
        None => {
            problems.push(index, id, Some(&field("type")), "missing (a string)");
            Block::Other
        }
    }
}

/// Lowers one message, recording its problems.
pub fn lower_message(
    index: usize,
    id: &str,
    value: &Value,
    problems: &mut Problems,
) -> Option<Message> {
    let role = match value.get("role") {
        Some(Value::String(r)) if r == "user" => Role::User,
        Some(Value::String(r)) if r == "assistant" => Role::Assistant,
        Some(Value::String(r)) => {
            let hint = if r == "system" {
                " (the system prompt goes in the top-level `system` field)"
            } else {
                ""
            };
            problems.push(
                index,
                id,
                Some("role"),
                format!("unknown role {r:?}: expected user or assistant{hint}"),
            );
            return None;
        }
        Some(other) => {
            problems.expected(index, id, "role", "a string", other);
            return None;
        }
        None => {
            problems.push(index, id, Some("role"), "missing");
            return None;
        }
    };
    let blocks = match problems.string_or_list(index, id, value, "content", "blocks")? {
        StringOrList::String(s) => vec![Block::Text { text: s.clone() }],
        StringOrList::List(list) => list
            .iter()
            .enumerate()
            .map(|(k, b)| block(index, id, k, b, problems))
            .collect(),
    };
    Some(Message { role, blocks })
}

/// Replaces the content of rewritten blocks in a message (or in the system prompt's value).
pub fn apply_rewrites(value: &mut Value, rewrites: &[BlockRewrite]) -> Result<(), String> {
    // The system prompt's value is the string or list itself; a message holds `content`.
    let content = if value.is_object() {
        value
            .get_mut("content")
            .ok_or("a message without content")?
    } else {
        value
    };
    for rw in rewrites {
        match content {
            Value::String(s) if rw.block == 0 => *s = rw.text.clone(),
            Value::Array(blocks) => {
                let b = blocks
                    .get_mut(rw.block)
                    .and_then(Value::as_object_mut)
                    .ok_or_else(|| format!("no block {}", rw.block))?;
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        b.insert("text".into(), Value::String(rw.text.clone()));
                    }
                    Some("tool_result") => {
                        // A result without content gets one.
                        let slot = b.entry("content").or_insert(Value::Null);
                        set_output_text(slot, &rw.text, &["text"]);
                    }
                    Some("thinking" | "redacted_thinking") => {
                        return Err("thinking blocks are never edited".into());
                    }
                    _ => return Err(format!("block {} cannot be rewritten", rw.block)),
                }
            }
            _ => return Err(format!("no block {}", rw.block)),
        }
    }
    Ok(())
}

/// The texts token counts cover (see [`crate::frontend::openai::payload`]): text, tool-use
/// names and inputs, tool-result text, thinking text. `value` is a message or the system value.
pub fn payload(value: &Value, out: &mut Vec<String>) {
    let content = if value.is_object() {
        value.get("content")
    } else {
        Some(value)
    };
    fn blocks(content: &Value, out: &mut Vec<String>) {
        match content {
            Value::String(s) => out.push(s.clone()),
            Value::Array(list) => {
                for b in list {
                    match b.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            if let Some(Value::String(t)) = b.get("text") {
                                out.push(t.clone());
                            }
                        }
                        Some("thinking") => {
                            if let Some(Value::String(t)) = b.get("thinking") {
                                out.push(t.clone());
                            }
                        }
                        Some("tool_use") => {
                            if let Some(Value::String(n)) = b.get("name") {
                                out.push(n.clone());
                            }
                            if let Some(input) = b.get("input") {
                                out.push(input.to_string());
                            }
                        }
                        Some("tool_result") => {
                            if let Some(c) = b.get("content") {
                                blocks(c, out);
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(c) = content {
        blocks(c, out);
    }
}

/// The rendered Anthropic top-level `system` value: the prompt item's own bytes (as its plan
/// renders them), or, with a register, its blocks with the register as one more text block.
/// `None` when there is neither a prompt nor a register.
pub fn render_system(
    session: &Session,
    system_item: Option<usize>,
    register: Option<&str>,
) -> Result<Option<String>, Error> {
    let mut system = match system_item {
        Some(s) => item_json(crate::formats::key::Format::Anthropic, session, s, true)?,
        None => None,
    };
    if let Some(r) = register {
        let mut blocks = match system.as_deref().map(serde_json::from_str::<Value>) {
            None => Vec::new(),
            Some(Ok(Value::String(text))) => vec![json!({"type": "text", "text": text})],
            Some(Ok(Value::Array(list))) => list,
            Some(Ok(Value::Null)) => Vec::new(),
            Some(_) => return Err(internal("the system prompt no longer parses")),
        };
        blocks.push(json!({"type": "text", "text": r}));
        system = Some(Value::Array(blocks).to_string());
    }
    Ok(system)
}

pub(crate) fn render_document(
    doc: &ChatDoc,
    session: &Session,
    register: Option<&str>,
) -> Result<RenderedChat, Error> {
    let items = session.items();
    let mut warnings = Vec::new();
    // The system value: unchanged bytes unless a register is added or an old one removed.
    let system = render_system(session, doc.system_item, register)?;
    let mut messages = Vec::new();
    if let Some(s) = &system {
        messages.push(OutputMessage {
            source: doc.system_item.map_or(Source::Register, Source::Item),
            json: s.clone(),
        });
    }
    let mut list = Vec::new();
    for i in 0..items.len() {
        if Some(i) == doc.system_item {
            continue;
        }
        if let Some(json) = item_json(crate::formats::key::Format::Anthropic, session, i, false)? {
            list.push(OutputMessage {
                source: Source::Item(i),
                json,
            });
        }
    }
    let array = write_array(&list);
    messages.extend(list);
    let text = match &doc.envelope {
        Envelope::Array if system.is_none() => array,
        Envelope::Array => {
            warnings.push(Diagnostic::new(
                0,
                None,
                Some("system"),
                "the input was a bare message list; the register needs the top-level `system`, so the output is an object {\"system\", \"messages\"}",
            ));
            write_object(&[
                ("system".into(), system.clone().unwrap_or_default()),
                ("messages".into(), array),
            ])
        }
        Envelope::Object { entries, .. } => {
            let mut out: Vec<(String, String)> = Vec::new();
            let mut placed = false;
            for (k, v) in entries {
                match k.as_str() {
                    "system" => {
                        if let Some(s) = &system {
                            out.push((k.clone(), s.clone()));
                        }
                        placed = true;
                    }
                    "messages" => {
                        if !placed && let Some(s) = &system {
                            out.push(("system".into(), s.clone()));
                            placed = true;
                        }
                        out.push((k.clone(), array.clone()));
                    }
                    _ => out.push((k.clone(), v.clone())),
                }
            }
            write_object(&out)
        }
    };
    Ok(RenderedChat {
        text,
        messages,
        warnings,
    })
}

/// The content block types only Anthropic messages hold.
const BLOCK_TYPES: [&str; 4] = ["tool_use", "tool_result", "thinking", "redacted_thinking"];

/// Anthropic Messages.
#[derive(Debug, Clone, Copy)]
pub struct Anthropic;

impl crate::formats::wire::WireFormat for Anthropic {
    chat_driver!();

    fn format(&self) -> crate::formats::key::Format {
        crate::formats::key::Format::Anthropic
    }

    fn name(&self) -> &'static str {
        "anthropic"
    }

    /// A message with a role and Anthropic content blocks (tool use, tool results, thinking).
    fn claims_item(&self, item: &serde_json::Map<String, Value>) -> bool {
        item.contains_key("role")
            && item
                .get("content")
                .and_then(Value::as_array)
                .is_some_and(|blocks| {
                    blocks.iter().any(|b| {
                        b.get("type")
                            .and_then(Value::as_str)
                            .is_some_and(|t| BLOCK_TYPES.contains(&t))
                    })
                })
    }

    /// `{"system": ..., "messages": [...]}`.
    fn claims_object(
        &self,
        object: &dyn crate::formats::shape::ObjectShape,
    ) -> Option<crate::formats::shape::ObjectClaim> {
        use crate::formats::shape::{Member, ObjectClaim};
        (object.member("messages") == Some(Member::List) && object.member("system").is_some())
            .then_some(ObjectClaim {
                layout: crate::frontend::split::Layout::Wrapped("messages"),
                by_first_item: false,
            })
    }

    fn shown_by_block_type(&self, kind: &str) -> bool {
        BLOCK_TYPES.contains(&kind)
    }

    fn system_key(&self) -> Option<&'static str> {
        Some("system")
    }

    fn endpoint(&self) -> Option<&'static str> {
        Some("/messages")
    }

    fn tool_definition(&self, name: &str, description: &str, parameters: &Value) -> Option<Value> {
        Some(json!({"name": name, "description": description, "input_schema": parameters}))
    }

    /// The `tool_use` blocks of the answer's `content`.
    fn answer_tool_calls(&self, answer: &Value) -> Option<Vec<ToolCallMade>> {
        let blocks = answer.get("content")?.as_array()?;
        Some(
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                .map(|b| ToolCallMade {
                    id: b.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: b
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    arguments: b.get("input").cloned(),
                })
                .collect(),
        )
    }

    /// The assistant turn, then one user message of `tool_result` blocks.
    fn continue_request(
        &self,
        request: &mut Value,
        answer: &Value,
        results: &[(&str, &str)],
    ) -> Option<()> {
        let messages = request.get_mut("messages")?.as_array_mut()?;
        messages.push(json!({"role": "assistant", "content": answer.get("content")?.clone()}));
        let blocks: Vec<Value> = results
            .iter()
            .map(|(call_id, text)| {
                json!({"type": "tool_result", "tool_use_id": call_id, "content": text})
            })
            .collect();
        messages.push(json!({"role": "user", "content": blocks}));
        Some(())
    }

    fn error_body(&self, kind: &str, message: &str) -> Value {
        json!({"type": "error", "error": {"type": kind, "message": message}})
    }

    fn stream_error_event(&self, message: &str) -> String {
        format!(
            "event: error\ndata: {}\n\n",
            json!({"type": "error", "error": {"type": "api_error", "message": message}})
        )
    }

    fn streams_answers(&self) -> bool {
        true
    }

    /// Blocks pass until a `tool_use` block starts; a continuation leaves out its
    /// `message_start` and numbers its blocks after the client's.
    fn stream_event(&self, round: &mut StreamRound, bytes: Vec<u8>, data: &str) -> Option<Vec<u8>> {
        let Some((mut data, kind, index)) = event_json(data, "index") else {
            return round.pass_or_hold(bytes);
        };
        match (kind.as_str(), index) {
            ("message_start", _) if !round.first => return None,
            ("content_block_start", Some(i)) => {
                let mut block = data.get("content_block").cloned().unwrap_or(Value::Null);
                if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                    round.holding = true;
                    block["input"] = json!({});
                }
                round.reserve_block(i);
                round.blocks[i] = block;
                if !round.holding {
                    round.passed_blocks = round.passed_blocks.max(i + 1);
                }
            }
            ("content_block_delta", Some(i)) if i < round.blocks.len() => {
                let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                let block = &mut round.blocks[i];
                let add = |block: &mut Value, key: &str, more: &str| {
                    let now = block.get(key).and_then(Value::as_str).unwrap_or("");
                    block[key] = Value::String(format!("{now}{more}"));
                };
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => add(block, "text", delta["text"].as_str().unwrap_or("")),
                    Some("thinking_delta") => {
                        add(block, "thinking", delta["thinking"].as_str().unwrap_or(""))
                    }
                    Some("signature_delta") => add(
                        block,
                        "signature",
                        delta["signature"].as_str().unwrap_or(""),
                    ),
                    Some("input_json_delta") => {
                        round.inputs[i].push_str(delta["partial_json"].as_str().unwrap_or(""))
                    }
                    _ => {}
                }
            }
            ("content_block_stop", Some(i)) if i < round.blocks.len() => {
                if !round.inputs[i].trim().is_empty()
                    && let Ok(input) = serde_json::from_str::<Value>(&round.inputs[i])
                {
                    round.blocks[i]["input"] = input;
                }
            }
            _ => {}
        }
        if round.holding {
            round.held.push(bytes);
            return None;
        }
        match index {
            // Continuations number their blocks from 0: move them past the client's.
            Some(i) if round.offset > 0 => {
                data["index"] = json!(i + round.offset);
                Some(format!("event: {kind}\ndata: {data}\n\n").into_bytes())
            }
            _ => Some(bytes),
        }
    }

    fn stream_tool_calls(&self, round: &StreamRound) -> Vec<ToolCallMade> {
        round
            .blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
            .map(|b| ToolCallMade {
                id: Some(b["id"].as_str().unwrap_or("").to_owned()),
                name: b["name"].as_str().unwrap_or("").to_owned(),
                arguments: Some(b["input"].clone()),
            })
            .collect()
    }

    fn stream_answer(&self, round: &StreamRound) -> Value {
        json!({"content": round.present_blocks()})
    }

    fn takes_cache_breakpoints(&self) -> bool {
        true
    }

    fn render_system(
        &self,
        session: &Session,
        system_item: Option<usize>,
        register: Option<&str>,
    ) -> Result<Option<String>, Error> {
        render_system(session, system_item, register)
    }

    /// `max_tokens` is required by the API.
    fn request_body(&self, model: &str, system: Option<&str>, list: &str) -> String {
        let model = Value::String(model.to_owned());
        match system {
            Some(system) => format!(
                "{{\"model\":{model},\"max_tokens\":1024,\"system\":{system},\"messages\":{list}}}"
            ),
            None => format!("{{\"model\":{model},\"max_tokens\":1024,\"messages\":{list}}}"),
        }
    }

    fn call_id_key(&self) -> &'static str {
        "tool_use_id"
    }

    fn messages_carry_ids(&self) -> bool {
        false
    }

    fn lower_items(&self, raw: &[RawItem<'_>], system: Option<&str>) -> Result<Vec<Item>, Error> {
        lower_raw(raw, system)
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
        use crate::render::messages::arguments_object;
        use serde_json::json;
        if p.role == Role::System {
            cx.system_texts.extend(p.texts);
            return Ok(());
        }
        let mut blocks: Vec<Value> = Vec::new();
        for (k, (id, text, is_error)) in p.results.iter().enumerate() {
            let id = cx.result_id(i, k, id);
            let mut b = json!({"type": "tool_result", "tool_use_id": id, "content": text});
            if *is_error {
                b["is_error"] = Value::Bool(true);
            }
            blocks.push(b);
        }
        for t in &p.texts {
            blocks.push(json!({"type": "text", "text": t}));
        }
        for (k, (id, name, args)) in p.calls.iter().enumerate() {
            blocks.push(json!({"type": "tool_use", "id": cx.call_id(i, k, id),
                               "name": name, "input": arguments_object(args)}));
        }
        if blocks.is_empty() {
            return Ok(());
        }
        let role = if p.role == Role::Assistant {
            "assistant"
        } else {
            "user"
        };
        // Results follow their calls in the next user message: consecutive user
        // messages made of results are merged into one.
        if role == "user"
            && let Some(last) = cx.out.last_mut()
            && let Ok(mut prev) = serde_json::from_str::<Value>(&last.json)
            && prev["role"] == "user"
            && !p.results.is_empty()
            && prev["content"]
                .as_array()
                .is_some_and(|c| c.iter().all(|b| b["type"] == "tool_result"))
        {
            if let Some(c) = prev["content"].as_array_mut() {
                c.extend(blocks);
            }
            last.json = prev.to_string();
            return Ok(());
        }
        cx.push(i, json!({"role": role, "content": blocks}));
        Ok(())
    }

    fn convert_register(&self, cx: &mut crate::render::messages::Conversion<'_>, register: &str) {
        cx.system_texts.push(register.to_owned());
    }

    fn converted_document(
        &self,
        cx: &mut crate::render::messages::Conversion<'_>,
        list: String,
    ) -> String {
        use crate::render::messages::{OutputMessage, Source, write_object};
        use serde_json::json;
        let mut entries = Vec::new();
        if !cx.system_texts.is_empty() {
            let blocks: Vec<Value> = cx
                .system_texts
                .iter()
                .map(|t| json!({"type": "text", "text": t}))
                .collect();
            let system = Value::Array(blocks).to_string();
            cx.out.insert(
                0,
                OutputMessage {
                    source: Source::Register,
                    json: system.clone(),
                },
            );
            entries.push(("system".to_owned(), system));
        }
        entries.push(("messages".to_owned(), list));
        write_object(&entries)
    }

    fn render(
        &self,
        doc: &crate::chat::lowering::ChatDoc,
        session: &crate::session::Session,
        register: Option<&str>,
    ) -> Result<crate::render::messages::RenderedChat, Error> {
        render_document(doc, session, register)
    }

    fn validate_list(
        &self,
        doc: &Value,
        list: &[Value],
        out: &mut Vec<crate::validate::Violation>,
    ) {
        if let Some(system) = doc.get("system") {
            crate::validate::anthropic_system(system, out);
        }
        crate::validate::anthropic(list, out);
    }
}
