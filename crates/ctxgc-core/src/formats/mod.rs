//! Wire formats: one module per format, each implementing [`WireFormat`], all listed once in
//! [`REGISTRY`].
//!
//! A format knows everything that depends on its shape: which items are its own (detection),
//! how a document lowers to the Session IR, which session compiles it, how a compiled session
//! is written back (rewrites included) and reported, how an output is validated, and where a
//! request body keeps its conversation (system prompt, messages, other fields) for a gateway.
//! The driver in [`crate::compile`] only ever talks to the trait: detect → format → lower →
//! [`Session`] → plan → render.
//!
//! A new format is one module here implementing [`WireFormat`] and one line in the registry
//! (which makes its [`Format`] variant and its place in [`REGISTRY`]). Code outside this folder never branches on a
//! format: it asks the codec, so detection ([`detect`]), the gateway's protocol
//! ([`protocol`]) and every report pick a new format up from the registry.
//!
//! ```
//! use ctxgc_core::Format;
//! use ctxgc_core::formats::REGISTRY;
//! let names: Vec<&str> = REGISTRY.iter().map(|f| f.name()).collect();
//! assert_eq!(names, ["responses", "anthropic", "openai-chat", "events", "tracetrim"]);
//! assert_eq!(Format::Anthropic.wire().items_key(), "messages");
//! assert_eq!(Format::Responses.wire().items_key(), "input");
//! ```

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::chat::lowering::ChatDoc;
use crate::compile::{Compiled, Options};
use crate::error::Error;
use crate::formats::protocol::{StreamRound, ToolCallMade};
use crate::frontend::RawItem;
use crate::ir::Item;
use crate::plan::BlockRewrite;
use crate::render::messages::{Conversion, OutputMessage, Portable, RenderedChat, Source};
use crate::session::Session;
use crate::validate::{Rule, Violation};

/// The driver half of [`WireFormat`] for a message-list format: chats lower, compile, report
/// and diff alike (`crate::chat::compile`), whichever of them they are.
macro_rules! chat_driver {
    () => {
        fn lower<'a>(
            &self,
            text: &'a str,
            options: &crate::compile::Options,
        ) -> Result<Vec<crate::formats::Lowered<'a>>, crate::error::Error> {
            crate::chat::compile::lower(text, options)
        }

        fn session(&self, options: &crate::compile::Options) -> crate::session::Session {
            crate::chat::compile::session_template(options)
        }

        fn report(
            &self,
            lowered: &crate::formats::Lowered<'_>,
            session: &crate::session::Session,
            options: &crate::compile::Options,
        ) -> Result<crate::compile::Compiled, crate::error::Error> {
            crate::chat::compile::report(lowered, session, options)
        }

        fn before_after(
            &self,
            lowered: &crate::formats::Lowered<'_>,
            session: &crate::session::Session,
            options: &crate::compile::Options,
            prefix: &str,
        ) -> Result<(String, String), crate::error::Error> {
            crate::chat::compile::transcripts(lowered, session, options, prefix)
        }

        fn family(&self) -> crate::formats::Family {
            crate::formats::Family::Chat
        }
    };
}

pub mod anthropic;
pub mod detect;
pub mod events;
pub mod openai_chat;
pub mod protocol;
pub mod records;
pub mod responses;
pub mod tracetrim;

/// The one place a format is registered: its key (a variant of [`Format`], whose kebab-case
/// spelling is its stored name), its module and its codec. The order is the order detection
/// asks formats whether an item is theirs (the first to claim it wins).
///
/// The list is handed to a macro, so that one list makes both the key type (in `key.rs`,
/// which depends on no code: the lowest layers name formats by it) and, here, [`REGISTRY`]
/// and [`Format::wire`].
macro_rules! each_format {
    ($then:ident) => {
        $then! {
            /// OpenAI Responses input items.
            Responses => responses::Responses,
            /// Anthropic Messages.
            Anthropic => anthropic::Anthropic,
            /// OpenAI Chat Completions messages.
            OpenaiChat => openai_chat::OpenaiChat,
            /// Structured agent events (set_var, tool_call, ...), rendered as prompt text.
            Events => events::Events,
            /// tracetrim JSONL traces (`{"kind": "prompt"|"call"|"message"}`).
            Tracetrim => tracetrim::Tracetrim,
        }
    };
}

pub mod key;
pub use key::Format;

/// [`REGISTRY`] and [`Format::wire`], from [`each_format`]'s list.
macro_rules! registry {
    ($($(#[$meta:meta])* $variant:ident => $module:ident :: $codec:ident,)*) => {
        /// Every wire format, in the order detection asks them whether an item is theirs.
        pub static REGISTRY: &[&dyn WireFormat] = &[$(&$module::$codec,)*];

        impl Format {
            /// The registered implementation of this format.
            pub fn wire(self) -> &'static dyn WireFormat {
                match self {
                    $(Format::$variant => &$module::$codec,)*
                }
            }
        }
    };
}

each_format!(registry);

impl Format {
    /// The stable name used on the command line (`--from`, `--to`).
    pub fn name(self) -> &'static str {
        self.wire().name()
    }

    /// Parses a name given by [`Format::name`].
    pub fn from_name(name: &str) -> Option<Format> {
        by_name(name).map(|w| w.format())
    }
}

/// The registered format with this key.
pub fn wire(format: Format) -> &'static dyn WireFormat {
    format.wire()
}

/// The registered format with this name (`--from`, `--to`).
pub fn by_name(name: &str) -> Option<&'static dyn WireFormat> {
    REGISTRY.iter().copied().find(|w| w.name() == name)
}

/// The message-list format a provider serves at `path` (the part after the host and an
/// optional `/v1`), if any.
///
/// ```
/// use ctxgc_core::Format;
/// assert_eq!(ctxgc_core::formats::by_endpoint("/messages").map(|f| f.format()), Some(Format::Anthropic));
/// assert!(ctxgc_core::formats::by_endpoint("/models").is_none());
/// ```
pub fn by_endpoint(path: &str) -> Option<&'static dyn WireFormat> {
    REGISTRY
        .iter()
        .copied()
        .find(|w| w.endpoint() == Some(path))
}

/// The first registered format that claims `item` (the first item of a list, or the first
/// line of JSONL).
pub fn claiming(item: &Map<String, Value>) -> Option<&'static dyn WireFormat> {
    REGISTRY.iter().copied().find(|w| w.claims_item(item))
}

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
                envelope: crate::chat::lowering::Envelope::Array,
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
    /// format's. Asked in [`REGISTRY`] order: a format is only asked about items that every
    /// format before it declined.
    fn claims_item(&self, item: &Map<String, Value>) -> bool;

    /// Whether a document object is one of this format's, and how it holds its items (an
    /// `events` array; `messages` beside a top-level `system`). Asked in [`REGISTRY`] order.
    fn claims_object(&self, object: &dyn detect::ObjectShape) -> Option<detect::ObjectClaim> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_names_its_own_key_and_stores_under_its_name() {
        for codec in REGISTRY {
            let format = codec.format();
            // A codec returning another format's key would make that format unreachable.
            assert!(std::ptr::addr_eq(format.wire(), *codec), "{format:?}");
            assert_eq!(Format::from_name(codec.name()), Some(format));
            // The stored spelling (serde) and the command line's (`name`) are one name.
            assert_eq!(serde_json::to_value(format).ok(), Some(json!(codec.name())));
        }
        let mut names: Vec<&str> = REGISTRY.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len(), "two codecs share a name");
    }
}
