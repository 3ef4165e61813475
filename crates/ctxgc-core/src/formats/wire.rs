//! The [`WireFormat`] trait every format implements, and what its methods take and give: a
//! lowered conversation ([`Lowered`]) and the [`Family`] a format belongs to. Apart from the
//! registry ([`crate::formats::REGISTRY`]), so that a codec depends on the contract, not on
//! the list of codecs.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::chat::lowering::{ChatDoc, Envelope};
use crate::compile::options::Options;
use crate::compile::report::Compiled;
use crate::error::Error;
use crate::formats::key::Format;
use crate::formats::protocol::{StreamRound, ToolCallMade};
use crate::formats::shape::{ObjectClaim, ObjectShape};
use crate::frontend::split::RawItem;
use crate::ir::Item;
use crate::plan::BlockRewrite;
use crate::render::messages::{Conversion, OutputMessage, Portable, RenderedChat, Source};
use crate::session::Session;
use crate::validate::{Rule, Violation};

/// One conversation of an input, lowered: what the driver compiles. A file may hold many
/// (conversation records, one per line).
#[derive(Debug, Clone)]
pub struct Lowered<'a> {
    /// For JSONL of conversation records: the record's id and one-based line.
    pub record: Option<(String, usize)>,
    /// The conversation's exact text: the whole input, or the record's line.
    pub raw: Cow<'a, str>,
    /// The document: its format, how it was laid out, and its items (taken by the session
    /// that compiles it).
    pub doc: ChatDoc,
}

impl Lowered<'_> {
    /// A single document (not a record) laid out as a bare list of items.
    pub fn bare(format: Format, text: &str, items: Vec<Item>) -> Lowered<'_> {
        Lowered {
            record: None,
            raw: Cow::Borrowed(text),
            doc: ChatDoc {
                format,
                envelope: Envelope::Array,
                items,
                system_item: None,
                input_was_string: false,
            },
        }
    }
}

/// Writes `text` as a tool output held in `slot`: into its one text part (a part whose
/// `type` is one of `text_types`) when it is a list with exactly one, else as the whole output.
pub(crate) fn set_output_text(slot: &mut Value, text: &str, text_types: &[&str]) {
    if let Value::Array(parts) = slot {
        let texts: Vec<usize> = parts
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                p.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| text_types.contains(&t))
            })
            .map(|(k, _)| k)
            .collect();
        if let [k] = texts[..]
            && let Some(part) = parts[k].as_object_mut()
        {
            part.insert("text".into(), Value::String(text.to_owned()));
            return;
        }
    }
    *slot = Value::String(text.to_owned());
}

/// The error of a chat-only operation asked of a format that is not a chat.
fn not_chat(name: &str) -> String {
    format!("{name} is not a chat format")
}

/// What a format holds, which decides how it is compiled and stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Agent event traces (`set_var`, `tool_call`, ...): compiled, and stored item by item.
    Events,
    /// A provider's message list: compiled, converted into one another, stored as
    /// transcripts, served by a gateway.
    Chat,
    /// Tool-call traces, read to learn projections; not compiled.
    ToolTrace,
}

/// A wire format: detection, lowering, the session that compiles it, rendering, reporting,
/// validation, and where a request keeps its conversation.
///
/// The methods after [`WireFormat::before_after`] concern message lists (chats); their
/// defaults describe a format that is not one.
pub trait WireFormat: Sync {
    /// The registry's key.
    fn format(&self) -> Format;

    /// The stable name used on the command line (`--from`, `--to`) and in reports.
    fn name(&self) -> &'static str;

    /// Whether `item` (the first item of a list, or the first line of JSONL) is one of this
    /// format's. Asked in [`REGISTRY`](crate::formats::REGISTRY) order: a format is only asked about items that every
    /// format before it declined.
    fn claims_item(&self, item: &Map<String, Value>) -> bool;

    /// Whether a document object is one of this format's, and how it holds its items (an
    /// `events` array; `messages` beside a top-level `system`). Asked in [`REGISTRY`](crate::formats::REGISTRY) order.
    fn claims_object(&self, object: &dyn ObjectShape) -> Option<ObjectClaim> {
        let _ = object;
        None
    }

    /// Whether a line of JSONL is one of this format's before any format is asked about it
    /// as an item ([`WireFormat::claims_item`]): for a format whose lines other formats
    /// would claim by their fields.
    fn claims_line(&self, line: &Map<String, Value>) -> bool {
        let _ = line;
        false
    }

    /// Whether an item of a message list whose own `type` is `kind` shows by itself that the
    /// list is this format's (a Responses `function_call`).
    fn shown_by_item_type(&self, kind: &str) -> bool {
        let _ = kind;
        false
    }

    /// Whether a content block of type `kind` inside a message shows by itself that the list
    /// is this format's (an Anthropic `tool_use`).
    fn shown_by_block_type(&self, kind: &str) -> bool {
        let _ = kind;
        false
    }

    /// Refuses, before anything is read, an input this format lowers but cannot compile.
    fn compilable(&self) -> Result<(), Error> {
        Ok(())
    }

    /// Lowers `text` to its conversations (one per record for JSONL of records).
    fn lower<'a>(&self, text: &'a str, options: &Options) -> Result<Vec<Lowered<'a>>, Error>;

    /// Lowers a document [`crate::frontend::detect_and_split_unchecked`] already split into
    /// `raw` (`validated`: whether that read validated the document), for a format that
    /// lowers from split items instead of reading `text` again. `None`: lower `text` with
    /// [`WireFormat::lower`].
    fn lower_split<'a>(
        &self,
        text: &'a str,
        raw: &[RawItem<'_>],
        validated: bool,
        options: &Options,
    ) -> Option<Result<Lowered<'a>, Error>> {
        let _ = (text, raw, validated, options);
        None
    }

    /// An empty session configured by `options` to compile this format: retention, passes,
    /// the prompt-cache model.
    fn session(&self, options: &Options) -> Session;

    /// The report of a compiled conversation, with its output rendered.
    fn report(
        &self,
        lowered: &Lowered<'_>,
        session: &Session,
        options: &Options,
    ) -> Result<Compiled, Error>;

    /// The conversation as given and as compiled, as readable text for diffing; every id
    /// is prefixed with `prefix`.
    fn before_after(
        &self,
        lowered: &Lowered<'_>,
        session: &Session,
        options: &Options,
        prefix: &str,
    ) -> Result<(String, String), Error>;

    /// What the format holds.
    fn family(&self) -> Family;

    /// True for message lists (chats): they can be converted into one another (`--to`),
    /// stored as chat sessions and compiled by a gateway.
    fn is_chat(&self) -> bool {
        self.family() == Family::Chat
    }

    /// The key of the item list in a document object or request body.
    fn items_key(&self) -> &'static str {
        "messages"
    }

    /// What the items of the list are called in messages to a person.
    fn item_noun(&self) -> &'static str {
        "messages"
    }

    /// The top-level field that holds the system prompt, when it is not a message.
    fn system_key(&self) -> Option<&'static str> {
        None
    }

    /// The provider's endpoint for this format (the path after an optional `/v1`).
    fn endpoint(&self) -> Option<&'static str> {
        None
    }

    /// The rendered value of the top-level system field ([`WireFormat::system_key`]): the
    /// prompt item `system_item` as its plan renders it, with the register where one is
    /// given. `None` when there is neither, or the format keeps no such field.
    fn render_system(
        &self,
        session: &Session,
        system_item: Option<usize>,
        register: Option<&str>,
    ) -> Result<Option<String>, Error> {
        let _ = (session, system_item, register);
        Ok(None)
    }

    /// Whether a message's own `id` names it (Anthropic messages carry no ids).
    fn messages_carry_ids(&self) -> bool {
        true
    }

    /// The field of a tool result that names the call it answers.
    fn call_id_key(&self) -> &'static str {
        "tool_call_id"
    }

    /// Lowers the raw items of a list (and the top-level system prompt, for a format that has
    /// one), without the rules that span messages.
    fn lower_items(&self, raw: &[RawItem<'_>], system: Option<&str>) -> Result<Vec<Item>, Error> {
        let _ = (raw, system);
        Err(Error::UnknownFormat(not_chat(self.name())))
    }

    /// True when the item list may be given as one string (a Responses `input`).
    fn items_may_be_string(&self) -> bool {
        false
    }

    /// Lowers an item list given as one string, for a format that allows one; `None` for a
    /// format that does not.
    fn lower_string_items(&self, raw: &str) -> Option<Result<Vec<Item>, Error>> {
        let _ = raw;
        None
    }

    /// The texts of one message that token counts cover (see [`crate::chat::compile`]).
    fn payload(&self, message: &Value, out: &mut Vec<String>) {
        let _ = (message, out);
    }

    /// Writes block rewrites into a message's JSON.
    fn apply_rewrites(&self, message: &mut Value, rewrites: &[BlockRewrite]) -> Result<(), String> {
        let _ = (message, rewrites);
        Err(not_chat(self.name()))
    }

    /// The type of a text part written into `message` (a placeholder for emptied content).
    fn text_part_type(&self, message: &Value) -> &'static str {
        let _ = message;
        "text"
    }

    /// The message the register is written as.
    fn register_message(&self, register: &str) -> Value {
        json!({"role": "system", "content": register})
    }

    /// Renders a compiled document in its own format: kept messages as their original bytes,
    /// rewritten ones with their rewrites, every other field of the envelope unchanged.
    fn render(
        &self,
        doc: &ChatDoc,
        session: &Session,
        register: Option<&str>,
    ) -> Result<RenderedChat, Error> {
        let _ = (doc, session, register);
        Err(Error::UnknownFormat(not_chat(self.name())))
    }

    /// Writes the register into a conversion to this format (`--to`).
    fn convert_register(&self, cx: &mut Conversion<'_>, register: &str) {
        cx.out.push(OutputMessage {
            source: Source::Register,
            json: self.register_message(register).to_string(),
        });
    }

    /// Writes item `i`, reduced to what every chat format holds, into a conversion to this
    /// format (`--to`).
    fn convert_item(&self, cx: &mut Conversion<'_>, i: usize, p: Portable) -> Result<(), Error> {
        let _ = (cx, i, p);
        Err(Error::UnknownFormat(format!(
            "cannot convert to {}",
            self.name()
        )))
    }

    /// The converted document: the message list in this format's envelope.
    fn converted_document(&self, cx: &mut Conversion<'_>, list: String) -> String {
        let _ = cx;
        list
    }

    /// The structural rules of the API, checked on a parsed document's item list.
    fn validate_list(&self, doc: &Value, list: &[Value], out: &mut Vec<Violation>) {
        let _ = (doc, list);
        out.push(Violation::new(0, Rule::Shape, not_chat(self.name())));
    }

    // The provider's protocol, as a gateway speaks it (see [`protocol`]). The defaults
    // describe a format no provider serves: no tools, errors in OpenAI's shape.

    /// A tool's definition in a request of this format; `None` for a format no provider
    /// serves.
    fn tool_definition(&self, name: &str, description: &str, parameters: &Value) -> Option<Value> {
        let _ = (name, description, parameters);
        None
    }

    /// The tool calls a whole (not streamed) answer makes, in order; `None` when the answer
    /// lacks the list that holds them.
    fn answer_tool_calls(&self, answer: &Value) -> Option<Vec<ToolCallMade>> {
        let _ = answer;
        None
    }

    /// Appends the model's turn (`answer`, shaped as [`WireFormat::answer_tool_calls`] reads
    /// it) and its tool calls' results (call id, text) to a request body. `None` when the
    /// request or the answer lacks the lists this needs.
    fn continue_request(
        &self,
        request: &mut Value,
        answer: &Value,
        results: &[(&str, &str)],
    ) -> Option<()> {
        let _ = (request, answer, results);
        None
    }

    /// The body of an error a gateway answers with itself, in the API's shape.
    fn error_body(&self, kind: &str, message: &str) -> Value {
        json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
    }

    /// An error told inside a stream already under way, as one server-sent event.
    fn stream_error_event(&self, message: &str) -> String {
        format!(
            "data: {}\n\n",
            json!({"error": {"message": message, "type": "api_error", "param": null, "code": null}})
        )
    }

    /// Whether a streamed answer of this format can be read event by event
    /// ([`WireFormat::stream_event`]).
    fn streams_answers(&self) -> bool {
        false
    }

    /// Reads one server-sent event of a streamed answer (its exact bytes and its `data`) into
    /// `round`; returns the bytes that go to the client now, if any (a continuation's events
    /// are renumbered to follow what the client has).
    fn stream_event(&self, round: &mut StreamRound, bytes: Vec<u8>, data: &str) -> Option<Vec<u8>> {
        let _ = data;
        round.pass_or_hold(bytes)
    }

    /// The tool calls of a streamed answer read so far, in order.
    fn stream_tool_calls(&self, round: &StreamRound) -> Vec<ToolCallMade> {
        let _ = round;
        Vec::new()
    }

    /// The model's turn of a streamed answer, shaped as a whole answer (what
    /// [`WireFormat::continue_request`] reads).
    fn stream_answer(&self, round: &StreamRound) -> Value {
        let _ = round;
        Value::Null
    }

    /// Whether a request of this format may carry prompt-cache breakpoints a gateway marks
    /// (Anthropic's `cache_control`).
    fn takes_cache_breakpoints(&self) -> bool {
        false
    }

    /// A request body for `model` holding `list` (a JSON list of this format's items) and,
    /// for a format that keeps it in its own field, the system prompt.
    fn request_body(&self, model: &str, system: Option<&str>, list: &str) -> String {
        let model = Value::String(model.to_owned());
        match (self.system_key(), system) {
            (Some(key), Some(system)) => format!(
                "{{\"model\":{model},\"{key}\":{system},\"{}\":{list}}}",
                self.items_key()
            ),
            _ => format!("{{\"model\":{model},\"{}\":{list}}}", self.items_key()),
        }
    }
}
