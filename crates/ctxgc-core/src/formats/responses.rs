//! The OpenAI Responses front-end: the items of a request's `input`.
//!
//! `message` items (with or without `"type": "message"`; roles `user`, `assistant`, `system`,
//! `developer`; content a string or a list of `input_text`/`output_text` parts) become
//! messages; a `function_call` becomes an assistant message holding one call, a
//! `function_call_output` a tool message holding its output. Every other item type
//! (`reasoning`, `web_search_call`, `item_reference`, custom tools, ...) is kept opaque: sent
//! as it is, never pruned. An `input` given as one string is one user message.
//!
//! ```
//! use ctxgc_core::frontend::responses::lower_raw;
//! use ctxgc_core::frontend::{split_items, Layout};
//! use ctxgc_core::ir::Kind;
//! let raw = split_items(r#"[
//!   {"role": "user", "content": "weather?"},
//!   {"type": "reasoning", "id": "rs_1", "summary": []},
//!   {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": "{}"},
//!   {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
//! ]"#, Layout::Array).unwrap();
//! let items = lower_raw(&raw).unwrap();
//! assert_eq!(items[1].id, "rs_1");
//! assert!(matches!(items[1].kind, Kind::Opaque { .. }));
//! assert_eq!(items[3].id, "m3");
//! ```

use serde_json::{Value, json};

use crate::chat::lowering::{Problems, StringOrList, chat_item, lower_each, parse_arguments};
use crate::error::Error;
use crate::formats::protocol::{StreamRound, ToolCallMade, arguments_of_text, event_json};
use crate::formats::wire::set_output_text;
use crate::frontend::split::RawItem;
use crate::ir::{Block, Call, Item, Kind, Message, Role, ToolOutput};
use crate::plan::BlockRewrite;

/// Lowers an `input` that is one string: a single user message whose raw bytes are the string.
pub fn lower_input_string(raw: &str) -> Result<Vec<Item>, Error> {
    let text: String = serde_json::from_str(raw).map_err(|e| Error::json("`input`", &e))?;
    Ok(vec![chat_item(
        "m0".into(),
        raw,
        Kind::Message(Message {
            role: Role::User,
            blocks: vec![Block::Text { text }],
        }),
    )])
}

/// Lowers input items already split into their exact bytes; every problem is reported.
pub fn lower_raw(raw: &[RawItem<'_>]) -> Result<Vec<Item>, Error> {
    lower_each(raw, lower_item)
}

/// Lowers one input item, recording its problems.
pub fn lower_item(index: usize, id: &str, value: &Value, problems: &mut Problems) -> Option<Kind> {
    let ty = value.get("type").and_then(Value::as_str);
    match ty {
        None | Some("message") => {
            let role = match value.get("role").and_then(Value::as_str) {
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                Some("system" | "developer") => Role::System,
                Some(other) => {
                    problems.push(
                        index,
                        id,
                        Some("role"),
                        format!(
                            "unknown role {other:?} (expected user, assistant, system or developer)"
                        ),
                    );
                    return None;
                }
                None => {
                    problems.push(index, id, Some("role"), "missing (a string)");
                    return None;
                }
            };
            let blocks = match problems.string_or_list(index, id, value, "content", "parts")? {
                StringOrList::String(s) => vec![Block::Text { text: s.clone() }],
                StringOrList::List(parts) => parts
                    .iter()
                    .map(
                        |p| match (p.get("type").and_then(Value::as_str), p.get("text")) {
                            (
                                Some("input_text" | "output_text" | "text"),
                                Some(Value::String(t)),
                            ) => Block::Text { text: t.clone() },
                            _ => Block::Other,
                        },
                    )
                    .collect(),
            };
            Some(Kind::Message(Message { role, blocks }))
        }
        Some("function_call") => {
            let call_id =
                problems.non_empty_string(index, id, value, "call_id", "call_id", "missing")?;
            let name = problems.non_empty_string(index, id, value, "name", "name", "missing")?;
            let arguments = match value.get("arguments") {
                Some(Value::String(s)) => parse_arguments(s),
                Some(other) => other.clone(),
                None => Value::Object(Default::default()),
            };
            Some(Kind::Message(Message {
                role: Role::Assistant,
                blocks: vec![Block::ToolCall(Call {
                    call_id: call_id.to_owned(),
                    name: name.to_owned(),
                    arguments,
                })],
            }))
        }
        Some("function_call_output") => {
            let call_id =
                problems.non_empty_string(index, id, value, "call_id", "call_id", "missing")?;
            let output = problems
                .string_or_list(index, id, value, "output", "parts")?
                .to_value();
            Some(Kind::Message(Message {
                role: Role::Tool,
                blocks: vec![Block::ToolResult(ToolOutput {
                    call_id: call_id.to_owned(),
                    output,
                    is_error: false,
                })],
            }))
        }
        Some(other) => Some(Kind::Opaque {
            type_name: other.to_owned(),
        }),
    }
}

/// Replaces the content of rewritten blocks in an input item.
pub fn apply_rewrites(value: &mut Value, rewrites: &[BlockRewrite]) -> Result<(), String> {
    let ty = value.get("type").and_then(Value::as_str).map(str::to_owned);
    for rw in rewrites {
        match ty.as_deref() {
            Some("function_call_output") if rw.block == 0 => {
                let slot = value.get_mut("output").ok_or("no output")?;
                set_output_text(slot, &rw.text, &["input_text", "output_text", "text"]);
            }
            None | Some("message") => match value.get_mut("content") {
                Some(Value::String(s)) if rw.block == 0 => *s = rw.text.clone(),
                Some(Value::Array(parts)) => {
                    let part = parts
                        .get_mut(rw.block)
                        .and_then(Value::as_object_mut)
                        .ok_or_else(|| format!("no content part {}", rw.block))?;
                    part.insert("text".into(), Value::String(rw.text.clone()));
                }
                _ => return Err(format!("no block {}", rw.block)),
            },
            _ => return Err(format!("block {} cannot be rewritten", rw.block)),
        }
    }
    Ok(())
}

/// The texts token counts cover (see [`crate::frontend::openai::payload`]): message text,
/// function-call names and arguments, function-call output text. Opaque items are not counted.
pub fn payload(value: &Value, out: &mut Vec<String>) {
    let parts = |v: &Value, out: &mut Vec<String>| match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(list) => {
            for p in list {
                if let Some(Value::String(t)) = p.get("text") {
                    out.push(t.clone());
                }
            }
        }
        _ => {}
    };
    match value.get("type").and_then(Value::as_str) {
        None | Some("message") => {
            if let Some(c) = value.get("content") {
                parts(c, out);
            }
        }
        Some("function_call") => {
            if let Some(Value::String(n)) = value.get("name") {
                out.push(n.clone());
            }
            match value.get("arguments") {
                Some(Value::String(s)) => out.push(s.clone()),
                Some(other) => out.push(other.to_string()),
                None => {}
            }
        }
        Some("function_call_output") => {
            if let Some(o) = value.get("output") {
                parts(o, out);
            }
        }
        _ => {}
    }
}

/// The item types only a Responses input holds.
const ITEM_TYPES: [&str; 4] = [
    "function_call",
    "function_call_output",
    "message",
    "reasoning",
];

/// OpenAI Responses input items.
#[derive(Debug, Clone, Copy)]
pub struct Responses;

impl crate::formats::wire::WireFormat for Responses {
    chat_driver!();

    fn format(&self) -> crate::formats::key::Format {
        crate::formats::key::Format::Responses
    }

    fn name(&self) -> &'static str {
        "responses"
    }

    /// A `message` item, or a role-less function call, function output or reasoning item.
    fn claims_item(&self, item: &serde_json::Map<String, Value>) -> bool {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => true,
            Some("function_call" | "function_call_output" | "reasoning") => {
                !item.contains_key("role")
            }
            _ => false,
        }
    }

    fn items_key(&self) -> &'static str {
        "input"
    }

    /// `{"input": [...]}` or `{"input": "..."}`, unless the object holds `messages` too.
    fn claims_object(
        &self,
        object: &dyn crate::formats::shape::ObjectShape,
    ) -> Option<crate::formats::shape::ObjectClaim> {
        use crate::formats::shape::{Member, ObjectClaim};
        let input = object.member("input");
        (matches!(input, Some(Member::List | Member::Text))
            && object.member("messages") != Some(Member::List))
        .then_some(ObjectClaim {
            layout: crate::frontend::split::Layout::Wrapped("input"),
            by_first_item: false,
        })
    }

    fn shown_by_item_type(&self, kind: &str) -> bool {
        ITEM_TYPES.contains(&kind)
    }

    fn item_noun(&self) -> &'static str {
        "input items"
    }

    fn endpoint(&self) -> Option<&'static str> {
        Some("/responses")
    }

    fn tool_definition(&self, name: &str, description: &str, parameters: &Value) -> Option<Value> {
        Some(
            json!({"type": "function", "name": name, "description": description, "parameters": parameters}),
        )
    }

    /// The `function_call` items of the answer's `output`.
    fn answer_tool_calls(&self, answer: &Value) -> Option<Vec<ToolCallMade>> {
        let output = answer.get("output")?.as_array()?;
        Some(
            output
                .iter()
                .filter(|i| i.get("type").and_then(Value::as_str) == Some("function_call"))
                .map(|item| ToolCallMade {
                    id: item
                        .get("call_id")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    name: item
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    arguments: arguments_of_text(item.get("arguments").and_then(Value::as_str)),
                })
                .collect(),
        )
    }

    /// The answer's output items, then one `function_call_output` per result.
    fn continue_request(
        &self,
        request: &mut Value,
        answer: &Value,
        results: &[(&str, &str)],
    ) -> Option<()> {
        let input = request.get_mut("input")?.as_array_mut()?;
        for item in answer.get("output")?.as_array()? {
            input.push(item.clone());
        }
        for (call_id, text) in results {
            input.push(json!({"type": "function_call_output", "call_id": call_id, "output": text}));
        }
        Some(())
    }

    fn stream_error_event(&self, message: &str) -> String {
        format!(
            "event: error\ndata: {}\n\n",
            json!({"type": "error", "code": "api_error", "message": message, "param": null})
        )
    }

    fn streams_answers(&self) -> bool {
        true
    }

    /// Output items pass until a `function_call` item is added. A continuation leaves out
    /// `response.created` and `response.in_progress`, continues the sequence numbers and
    /// output indexes, and its final response lists every item the client was shown.
    fn stream_event(&self, round: &mut StreamRound, bytes: Vec<u8>, data: &str) -> Option<Vec<u8>> {
        let Some((mut data, kind, index)) = event_json(data, "output_index") else {
            return round.pass_or_hold(bytes);
        };
        if let Some(i) = index {
            round.reserve_block(i);
        }
        match (kind.as_str(), index) {
            ("response.created" | "response.in_progress", _) if !round.first => return None,
            ("response.output_item.added", Some(i)) => {
                let item = data.get("item").cloned().unwrap_or(Value::Null);
                if item.get("type").and_then(Value::as_str) == Some("function_call") {
                    round.holding = true;
                }
                round.blocks[i] = item;
                if !round.holding {
                    round.passed_blocks = round.passed_blocks.max(i + 1);
                }
            }
            ("response.function_call_arguments.delta", Some(i)) => {
                round.inputs[i].push_str(data["delta"].as_str().unwrap_or(""));
            }
            ("response.function_call_arguments.done", Some(i)) => {
                if let Some(args) = data.get("arguments").and_then(Value::as_str) {
                    round.inputs[i] = args.to_owned();
                }
            }
            ("response.output_item.done", Some(i)) => {
                let mut item = data.get("item").cloned().unwrap_or(Value::Null);
                if item.get("type").and_then(Value::as_str) == Some("function_call")
                    && item.get("arguments").is_none()
                {
                    item["arguments"] = Value::String(round.inputs[i].clone());
                }
                round.blocks[i] = item;
            }
            _ => {}
        }
        if round.first {
            if !round.holding
                && let Some(seq) = data.get("sequence_number").and_then(Value::as_u64)
            {
                round.next_seq = round.next_seq.max(seq + 1);
            }
            return round.pass_or_hold(bytes);
        }
        if data.get("sequence_number").is_some() {
            data["sequence_number"] = json!(round.next_seq);
            round.next_seq += 1;
        }
        if let Some(i) = index {
            data["output_index"] = json!(i + round.offset);
        }
        if matches!(
            kind.as_str(),
            "response.completed" | "response.incomplete" | "response.failed"
        ) && let Some(output) = data.pointer_mut("/response/output")
            && let Some(list) = output.as_array()
        {
            let mut all = round.earlier.clone();
            all.extend(list.iter().cloned());
            *output = Value::Array(all);
        }
        round.pass_or_hold(format!("event: {kind}\ndata: {data}\n\n").into_bytes())
    }

    fn stream_tool_calls(&self, round: &StreamRound) -> Vec<ToolCallMade> {
        round
            .blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.get("type").and_then(Value::as_str) == Some("function_call"))
            .map(|(i, b)| {
                let args = b
                    .get("arguments")
                    .and_then(Value::as_str)
                    .map_or_else(|| round.inputs[i].clone(), str::to_owned);
                ToolCallMade {
                    id: Some(b["call_id"].as_str().unwrap_or("").to_owned()),
                    name: b["name"].as_str().unwrap_or("").to_owned(),
                    arguments: arguments_of_text(Some(&args)),
                }
            })
            .collect()
    }

    fn stream_answer(&self, round: &StreamRound) -> Value {
        json!({"output": round.present_blocks()})
    }

    fn call_id_key(&self) -> &'static str {
        "call_id"
    }

    fn lower_items(&self, raw: &[RawItem<'_>], _system: Option<&str>) -> Result<Vec<Item>, Error> {
        lower_raw(raw)
    }

    fn items_may_be_string(&self) -> bool {
        true
    }

    fn lower_string_items(&self, raw: &str) -> Option<Result<Vec<Item>, Error>> {
        Some(lower_input_string(raw))
    }

    fn payload(&self, message: &Value, out: &mut Vec<String>) {
        payload(message, out)
    }

    fn apply_rewrites(&self, message: &mut Value, rewrites: &[BlockRewrite]) -> Result<(), String> {
        apply_rewrites(message, rewrites)
    }

    fn text_part_type(&self, message: &Value) -> &'static str {
        if message.get("role").and_then(Value::as_str) == Some("assistant") {
            "output_text"
        } else {
            "input_text"
        }
    }

    fn register_message(&self, register: &str) -> Value {
        serde_json::json!({"type": "message", "role": "system", "content": register})
    }

    fn convert_item(
        &self,
        cx: &mut crate::render::messages::Conversion<'_>,
        i: usize,
        p: crate::render::messages::Portable,
    ) -> Result<(), Error> {
        use crate::render::messages::arguments_text;
        use serde_json::json;
        for (k, (id, text, _)) in p.results.iter().enumerate() {
            let id = cx.result_id(i, k, id);
            cx.push(
                i,
                json!({"type": "function_call_output", "call_id": id, "output": text}),
            );
        }
        if !p.texts.is_empty() {
            let role = match p.role {
                Role::System => "system",
                Role::Assistant => "assistant",
                _ => "user",
            };
            cx.push(
                i,
                json!({"type": "message", "role": role, "content": p.texts.join("\n\n")}),
            );
        }
        for (k, (id, name, args)) in p.calls.iter().enumerate() {
            cx.push(
                i,
                json!({"type": "function_call", "call_id": cx.call_id(i, k, id),
                        "name": name, "arguments": arguments_text(args)}),
            );
        }
        Ok(())
    }

    fn converted_document(
        &self,
        _cx: &mut crate::render::messages::Conversion<'_>,
        list: String,
    ) -> String {
        crate::render::messages::write_object(&[("input".to_owned(), list)])
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
        crate::validate::responses(list, out)
    }
}
