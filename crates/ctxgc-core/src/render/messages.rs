//! The message back-ends: a compiled chat written back as OpenAI Chat Completions, Anthropic
//! Messages or OpenAI Responses JSON.
//!
//! In the input's own format, a kept message is written from its original bytes, so unchanged
//! history stays byte-identical from one compile to the next (prompt caches are prefix
//! caches). A rewritten message is its original with only the rewritten blocks' content
//! replaced (then written compactly); a retired message is left out. Every other field of the
//! document (`model`, `tools`, ...) keeps its exact bytes. The register is its own system
//! message (OpenAI, Responses) or an extra block of the top-level `system` (Anthropic), placed
//! after the system prompt, whose text is never edited.
//!
//! In another format (`--to`), messages are rebuilt from the IR: text, tool calls and tool
//! results carry over; what the target cannot hold (images, thinking, opaque items) is left
//! out and reported as a warning.
//!
//! ```
//! use ctxgc_core::{compile, Options};
//! let chat = r#"{"model": "gpt-4o", "messages": [{"role": "user",   "content": "hi"}]}"#;
//! let out = compile(chat, &Options::default()).unwrap();
//! // The kept message keeps its exact bytes, spacing included.
//! assert_eq!(out.output, r#"{"model":"gpt-4o","messages":[{"role": "user",   "content": "hi"}]}"#);
//! ```

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::chat::lowering::{ChatDoc, Envelope};
use crate::chat::message_of;
pub use crate::chat::register::{EMPTIED, register_position};
use crate::error::{Diagnostic, Error};
use crate::formats::key::Format;
use crate::ir::{Block, Kind, Role};
use crate::plan::{Action, BlockRewrite};
use crate::session::Session;

/// Where an output message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The input item at this position.
    Item(usize),
    /// The register.
    Register,
}

/// One message (or item) of the output, as JSON text.
#[derive(Debug, Clone)]
pub struct OutputMessage {
    /// Where it came from.
    pub source: Source,
    /// Its JSON text. For the Anthropic system prompt this is the `system` value.
    pub json: String,
}

/// A rendered chat document.
#[derive(Debug, Clone, Default)]
pub struct RenderedChat {
    /// The whole document.
    pub text: String,
    /// Its messages, in order (the Anthropic system value first, when there is one).
    pub messages: Vec<OutputMessage>,
    /// Things the target format could not hold, left out.
    pub warnings: Vec<Diagnostic>,
}

pub(crate) fn internal(message: impl Into<String>) -> Error {
    Error::Usage(format!("rendering failed: {}", message.into()))
}

/// The message the register is written as, in `format`.
pub fn register_message(format: Format, register: &str) -> Value {
    format.wire().register_message(register)
}

/// Drops text parts a rewrite emptied (a removed state block or register) from content lists.
fn drop_empty_parts(list: &mut Vec<Value>, emptied: &[usize]) {
    let mut k = 0;
    list.retain(|part| {
        let drop = emptied.contains(&k)
            && part
                .get("text")
                .and_then(Value::as_str)
                .is_some_and(str::is_empty);
        k += 1;
        !drop
    });
}

fn rewrite_value(
    format: Format,
    raw: &str,
    rewrites: &[BlockRewrite],
    system: bool,
) -> Result<Value, Error> {
    let mut value: Value = serde_json::from_str(raw)
        .map_err(|e| internal(format!("an original no longer parses: {e}")))?;
    format
        .wire()
        .apply_rewrites(&mut value, rewrites)
        .map_err(internal)?;
    let emptied: Vec<usize> = rewrites
        .iter()
        .filter(|r| r.text.is_empty())
        .map(|r| r.block)
        .collect();
    if emptied.is_empty() {
        return Ok(value);
    }
    let part_type = format.wire().text_part_type(&value);
    let content = if system {
        Some(&mut value)
    } else {
        value.get_mut("content")
    };
    // A message whose only text was cut says so instead of going out empty: no provider
    // takes an empty content list, and Anthropic takes no empty text either.
    if let Some(Value::Array(list)) = content {
        drop_empty_parts(list, &emptied);
        if list.is_empty() && !system {
            *list = vec![json!({"type": part_type, "text": EMPTIED})];
        }
    } else if let Some(Value::String(s)) = value.get_mut("content")
        && s.is_empty()
    {
        *s = EMPTIED.to_owned();
    }
    Ok(value)
}

/// Item `i` of a compiled session as it is sent in its own format (`system`: it is the
/// Anthropic top-level system value), or `None` when it is retired. Depends only on the item
/// and its plan, so a caller that keeps rendered messages between compiles (the gateway) can
/// render only what is new while the plans stand.
///
/// ```
/// use ctxgc_core::render::messages::item_json;
/// use ctxgc_core::{Format, Session};
/// let doc = ctxgc_core::chat::lowering::lower_document(
///     r#"[{"role": "user", "content": "hi"}]"#, Format::OpenaiChat).unwrap();
/// let mut session = Session::new(Default::default());
/// session.extend(doc.items).unwrap();
/// session.compile();
/// let json = item_json(Format::OpenaiChat, &session, 0, false).unwrap();
/// assert_eq!(json.as_deref(), Some(r#"{"role": "user", "content": "hi"}"#));
/// ```
pub fn item_json(
    format: Format,
    session: &Session,
    i: usize,
    system: bool,
) -> Result<Option<String>, Error> {
    let item = &session.items()[i];
    let plan = session.plan_of(i);
    match plan.verdict {
        None => Ok(Some(item.raw.clone())),
        Some(v) => match v.action {
            Action::Keep => Ok(Some(item.raw.clone())),
            Action::Retire => Ok(None),
            Action::Rewrite => Ok(Some(
                rewrite_value(format, &item.raw, &v.rewrites, system)?.to_string(),
            )),
        },
    }
}

pub(crate) fn write_array(messages: &[OutputMessage]) -> String {
    let mut out = String::from("[");
    for (k, m) in messages.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        out.push_str(&m.json);
    }
    out.push(']');
    out
}

pub(crate) fn write_object(entries: &[(String, String)]) -> String {
    let mut out = String::from("{");
    for (k, (key, value)) in entries.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(key.clone()).to_string());
        out.push(':');
        out.push_str(value);
    }
    out.push('}');
    out
}

/// Renders the compiled document in its own format.
pub fn render(
    doc: &ChatDoc,
    session: &Session,
    register: Option<&str>,
) -> Result<RenderedChat, Error> {
    doc.format.wire().render(doc, session, register)
}

pub(crate) fn render_list(
    doc: &ChatDoc,
    session: &Session,
    register: Option<&str>,
) -> Result<RenderedChat, Error> {
    let items = session.items();
    let at = register_position(items, None);
    let mut messages = Vec::new();
    for i in 0..items.len() {
        if i == at
            && let Some(r) = register
        {
            messages.push(OutputMessage {
                source: Source::Register,
                json: register_message(doc.format, r).to_string(),
            });
        }
        if let Some(json) = item_json(doc.format, session, i, false)? {
            messages.push(OutputMessage {
                source: Source::Item(i),
                json,
            });
        }
    }
    if at == items.len()
        && let Some(r) = register
    {
        messages.push(OutputMessage {
            source: Source::Register,
            json: register_message(doc.format, r).to_string(),
        });
    }
    let text = if doc.input_was_string {
        let only_kept_string = messages.len() == 1
            && matches!(messages[0].source, Source::Item(0))
            && messages[0].json.trim_start().starts_with('"');
        if only_kept_string {
            envelope_with(doc, messages[0].json.clone())
        } else {
            // The string becomes a list: the user message is written out as an item.
            for m in &mut messages {
                if m.json.trim_start().starts_with('"') {
                    m.json = format!("{{\"role\":\"user\",\"content\":{}}}", m.json);
                } else if matches!(m.source, Source::Item(_))
                    && !m.json.trim_start().starts_with('{')
                {
                    return Err(internal("unexpected input shape"));
                }
            }
            envelope_with(doc, write_array(&messages))
        }
    } else {
        envelope_with(doc, write_array(&messages))
    };
    Ok(RenderedChat {
        text,
        messages,
        warnings: Vec::new(),
    })
}

fn envelope_with(doc: &ChatDoc, list: String) -> String {
    match &doc.envelope {
        Envelope::Array => list,
        Envelope::Object { entries, items_key } => {
            let entries: Vec<(String, String)> = entries
                .iter()
                .map(|(k, v)| {
                    if k == items_key {
                        (k.clone(), list.clone())
                    } else {
                        (k.clone(), v.clone())
                    }
                })
                .collect();
            write_object(&entries)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Conversion between formats.

/// A message reduced to what every format can hold.
pub struct Portable {
    /// Its role.
    pub role: Role,
    /// Its texts, rewrites applied.
    pub texts: Vec<String>,
    /// Its tool calls: `(call id, name, arguments)`.
    pub calls: Vec<(String, String, Value)>,
    /// Its tool results: `(call id, text, is_error)`.
    pub results: Vec<(String, String, bool)>,
}

fn portable(session: &Session, i: usize, warnings: &mut Vec<Diagnostic>) -> Option<Portable> {
    let item = &session.items()[i];
    let plan = session.plan_of(i);
    let rewrites: Vec<BlockRewrite> = match &plan.verdict {
        Some(v) if v.action == Action::Retire => return None,
        Some(v) if v.action == Action::Rewrite => v.rewrites.clone(),
        _ => Vec::new(),
    };
    let Kind::Message(message) = &item.kind else {
        warnings.push(Diagnostic::new(
            i,
            Some(item.id.clone()),
            None,
            "an opaque item has no equivalent in the target format and is left out",
        ));
        return None;
    };
    let mut p = Portable {
        role: message.role,
        texts: Vec::new(),
        calls: Vec::new(),
        results: Vec::new(),
    };
    for (b, block) in message.blocks.iter().enumerate() {
        let new = rewrites
            .iter()
            .find(|r| r.block == b)
            .map(|r| r.text.clone());
        match block {
            Block::Text { text } => {
                let t = new.unwrap_or_else(|| text.clone());
                if !t.is_empty() {
                    p.texts.push(t);
                }
            }
            Block::ToolCall(call) => p.calls.push((call.call_id.clone(), call.name.clone(), call.arguments.clone())),
            Block::ToolResult(out) => {
                let text = new.unwrap_or_else(|| match crate::chat::output_text(out) {
                    Some(t) => t.to_owned(),
                    None => match &out.output {
                        Value::Null => String::new(),
                        other => other.to_string(),
                    },
                });
                p.results.push((out.call_id.clone(), text, out.is_error));
            }
            Block::Thinking | Block::Other => warnings.push(Diagnostic::new(
                i,
                Some(item.id.clone()),
                Some("content"),
                format!("block {b} (reasoning, image or other) has no equivalent in the target format and is left out"),
            )),
        }
    }
    Some(p)
}

/// A call's arguments as JSON text.
pub(crate) fn arguments_text(args: &Value) -> String {
    match args {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A call's arguments as a JSON object.
pub(crate) fn arguments_object(args: &Value) -> Value {
    match args {
        Value::Object(_) => args.clone(),
        Value::String(s) => json!({"_raw": s}),
        other => json!({"_value": other}),
    }
}

/// A conversion into another chat format in progress: what the target's
/// [`crate::formats::WireFormat::convert_item`] writes into.
pub struct Conversion<'s> {
    session: &'s Session,
    pairing: crate::chat::pairing::Pairing,
    call_ids: HashMap<(usize, usize), String>,
    /// Texts for a top-level system prompt (a format that keeps one there).
    pub system_texts: Vec<String>,
    /// The output messages so far.
    pub out: Vec<OutputMessage>,
}

impl Conversion<'_> {
    /// The position of the `k`-th block of item `i` that `pred` holds for (0 when none).
    fn block_index(&self, i: usize, pred: fn(&Block) -> bool, k: usize) -> usize {
        message_of(&self.session.items()[i])
            .map(|m| {
                m.blocks
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| pred(b))
                    .nth(k)
                    .map_or(0, |(b, _)| b)
            })
            .unwrap_or(0)
    }

    /// The converted id of the call the `k`-th tool result of item `i` answers (`fallback`
    /// when it answers none).
    pub fn result_id(&self, i: usize, k: usize, fallback: &str) -> String {
        let b = self.block_index(i, |b| matches!(b, Block::ToolResult(_)), k);
        self.pairing
            .call_of(i, b)
            .and_then(|c| self.call_ids.get(&(c.slot.item, c.slot.block)).cloned())
            .unwrap_or_else(|| fallback.to_owned())
    }

    /// The converted id of the `k`-th tool call of item `i` (a repeated id gets a suffix).
    pub fn call_id(&self, i: usize, k: usize, fallback: &str) -> String {
        let b = self.block_index(i, |b| matches!(b, Block::ToolCall(_)), k);
        self.call_ids
            .get(&(i, b))
            .cloned()
            .unwrap_or_else(|| fallback.to_owned())
    }

    /// Appends a message converted from item `i`.
    pub fn push(&mut self, i: usize, json: Value) {
        self.out.push(OutputMessage {
            source: Source::Item(i),
            json: json.to_string(),
        })
    }
}

/// Renders the compiled session in another chat format, rebuilt from the IR.
pub fn convert(
    session: &Session,
    register: Option<&str>,
    target: Format,
) -> Result<RenderedChat, Error> {
    let wire = target.wire();
    let mut warnings = Vec::new();
    let items = session.items();
    // Call ids must be unique in Anthropic and Responses; repeated ids get a suffix, and each
    // result follows the call it was paired with.
    let mut pairing = crate::chat::pairing::Pairing::default();
    for (i, item) in items.iter().enumerate() {
        pairing.add(i, item);
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut call_ids: HashMap<(usize, usize), String> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        if let Some(m) = message_of(item) {
            for (b, block) in m.blocks.iter().enumerate() {
                if let Block::ToolCall(call) = block {
                    let n = seen.entry(call.call_id.clone()).or_insert(0);
                    *n += 1;
                    let id = if *n == 1 {
                        call.call_id.clone()
                    } else {
                        format!("{}_{}", call.call_id, n)
                    };
                    call_ids.insert((i, b), id);
                }
            }
        }
    }
    let mut cx = Conversion {
        session,
        pairing,
        call_ids,
        system_texts: Vec::new(),
        out: Vec::new(),
    };
    let at = register_position(items, None);
    let mut register_done = false;
    for i in 0..items.len() {
        if i == at && !register_done {
            register_done = true;
            if let Some(r) = register {
                wire.convert_register(&mut cx, r);
            }
        }
        let Some(p) = portable(session, i, &mut warnings) else {
            continue;
        };
        wire.convert_item(&mut cx, i, p)?;
    }
    if !register_done && let Some(r) = register {
        wire.convert_register(&mut cx, r);
    }
    let list = write_array(&cx.out);
    let text = wire.converted_document(&mut cx, list);
    Ok(RenderedChat {
        text,
        messages: cx.out,
        warnings,
    })
}
