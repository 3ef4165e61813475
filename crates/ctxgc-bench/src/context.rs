//! What a strategy sends to the model: an ordered list of segments.
//!
//! Every strategy, whatever it does inside, hands back a [`Context`]: the segments the model
//! would receive (one per message of a chat, one per line of an event prompt), which of them are
//! receipt stubs, and which removed items a stub in it lets the model get back. All metrics are
//! computed on this one shape, so every strategy is measured the same way.
//!
//! The text of a segment is the text that is counted (exact BPE) and searched for values. An
//! event renders as the prompt back-end renders it (`[id] key = value`); a message renders as
//! `role: content`, with each tool call as `[call ID NAME(ARGUMENTS)]` and each tool output as
//! `[result of ID] OUTPUT`. The few framing tokens a provider adds per message are not counted,
//! for any strategy.

use std::collections::BTreeSet;

use ctxgc_core::ir::{Block, Item, Kind, Message, Role, plain_value};
use ctxgc_core::render::prompt::event_line;
use serde::Serialize;
use serde_json::Value;

/// What a segment is, for the metrics that tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SegmentKind {
    /// A message or event that is not a tool output.
    Content,
    /// A tool's output (a tool message, a `tool_result` event or block).
    ToolOutput,
    /// A receipt stub: it names removed items and says why, and carries no content of theirs.
    Stub,
}

/// One unit of what the model receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The text, as counted and searched.
    pub text: String,
    /// What it is.
    pub kind: SegmentKind,
}

/// What a strategy sends to the model for one prefix of a conversation.
///
/// ```
/// use ctxgc_bench::context::{Context, Segment, SegmentKind};
/// let ctx = Context {
///     segments: vec![
///         Segment { text: "[receipt e1: superseded by e2]\n".into(), kind: SegmentKind::Stub },
///         Segment { text: "[e2] x = 20\n".into(), kind: SegmentKind::Content },
///     ],
///     recoverable: ["e1".to_string()].into(),
///     recall_offered: true,
///     items_kept: 1,
/// };
/// assert_eq!(ctx.visible_text(), "[e2] x = 20\n");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    /// The segments, in the order the model reads them.
    pub segments: Vec<Segment>,
    /// Ids of removed or rewritten items whose originals the strategy holds and a receipt
    /// stub in this context names. The model can get them back only when `recall_offered`.
    pub recoverable: BTreeSet<String>,
    /// True when the request offers the model a recall tool (`expand_tool`, the gateway's
    /// `ctxgc_recall`) that answers with a named receipt's original. Without one a stub's
    /// reference can be redeemed by nobody, so nothing it names is recoverable.
    pub recall_offered: bool,
    /// How many items of the input the context carries, as they were or rewritten.
    pub items_kept: usize,
}

impl Context {
    /// The text of every segment that is not a receipt stub, in order.
    pub fn visible_text(&self) -> String {
        self.segments
            .iter()
            .filter(|s| s.kind != SegmentKind::Stub)
            .map(|s| s.text.as_str())
            .collect()
    }

    /// The whole text the model receives, stubs included.
    pub fn full_text(&self) -> String {
        self.segments.iter().map(|s| s.text.as_str()).collect()
    }
}

/// The role of a message, as written in a segment.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// The text of one message.
fn message_text(message: &Message) -> String {
    let mut out = String::from(role_name(message.role));
    out.push(':');
    for (n, block) in message.blocks.iter().enumerate() {
        out.push(if n == 0 { ' ' } else { '\n' });
        match block {
            Block::Text { text } => out.push_str(text),
            Block::ToolCall(call) => {
                out.push_str(&format!(
                    "[call {} {}({})]",
                    call.call_id, call.name, call.arguments
                ));
            }
            Block::ToolResult(result) => {
                out.push_str(&format!(
                    "[result of {}] {}",
                    result.call_id,
                    plain_value(&result.output)
                ));
            }
            // The IR keeps no text for these; they are counted by this placeholder alone.
            Block::Thinking => out.push_str("[thinking]"),
            Block::Other => out.push_str("[other content]"),
        }
    }
    out.push('\n');
    out
}

/// The text of an item as the model reads it, uncompacted.
///
/// ```
/// use ctxgc_core::frontend::events::lower_events;
/// let items = lower_events(r#"[{"id":"e1","type":"set_var","timestamp":1,"key":"x","value":10}]"#, &Default::default()).unwrap();
/// assert_eq!(ctxgc_bench::context::item_text(&items[0]), "[e1] x = 10\n");
/// ```
pub fn item_text(item: &Item) -> String {
    match &item.kind {
        Kind::Message(message) => message_text(message),
        _ => event_line(item),
    }
}

/// True for a tool's output: a tool message, a `tool_result` event, a message with a result block.
pub fn is_tool_output(item: &Item) -> bool {
    match &item.kind {
        Kind::ToolResult(_) => true,
        Kind::Message(m) => {
            m.role == Role::Tool || m.blocks.iter().any(|b| matches!(b, Block::ToolResult(_)))
        }
        _ => false,
    }
}

/// True for a system prompt (never dropped by truncation).
pub fn is_system(item: &Item) -> bool {
    matches!(&item.kind, Kind::Message(m) if m.role == Role::System)
}

/// True for items that are structure, not content (`edge_injection`): no strategy renders them.
pub fn is_structure(item: &Item) -> bool {
    matches!(item.kind, Kind::EdgeInjection { .. })
}

/// True when the agent wrote this item with a model call: an assistant message, or a
/// `tool_call` or `decision` event. The bench replays a request before each.
pub fn is_agent_turn(item: &Item) -> bool {
    match &item.kind {
        Kind::Message(m) => m.role == Role::Assistant,
        Kind::ToolCall(_) => true,
        Kind::Note { note, .. } => *note == ctxgc_core::ir::NoteKind::Decision,
        _ => false,
    }
}

/// The segment of an item as it is, uncompacted.
pub fn item_segment(item: &Item) -> Segment {
    Segment {
        text: item_text(item),
        kind: if is_tool_output(item) {
            SegmentKind::ToolOutput
        } else {
            SegmentKind::Content
        },
    }
}

/// Call ids this item makes (tool calls), in order.
pub fn calls_made(item: &Item) -> Vec<&str> {
    match &item.kind {
        Kind::ToolCall(call) => vec![call.call_id.as_str()],
        Kind::Message(m) => m
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::ToolCall(call) => Some(call.call_id.as_str()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Call ids this item answers (tool outputs), in order.
pub fn calls_answered(item: &Item) -> Vec<&str> {
    match &item.kind {
        Kind::ToolResult(out) => vec![out.call_id.as_str()],
        Kind::Message(m) => m
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::ToolResult(out) => Some(out.call_id.as_str()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A copy of `item` with every tool output replaced by `placeholder` (what provider-side
/// clearing does); `None` when the item carries no tool output.
pub fn with_outputs_cleared(item: &Item, placeholder: &str) -> Option<Item> {
    let mut copy = item.clone();
    let mut changed = false;
    match &mut copy.kind {
        Kind::ToolResult(out) => {
            out.output = Value::String(placeholder.to_owned());
            changed = true;
        }
        Kind::Message(m) => {
            for block in &mut m.blocks {
                if let Block::ToolResult(out) = block {
                    out.output = Value::String(placeholder.to_owned());
                    changed = true;
                }
            }
            if !changed && m.role == Role::Tool {
                // A tool message whose output the front-end kept as text blocks.
                m.blocks = vec![Block::Text {
                    text: placeholder.to_owned(),
                }];
                changed = true;
            }
        }
        _ => {}
    }
    changed.then_some(copy)
}

/// Words of a text as ids are written (`e01_sub`, `m12`, `tr_code_1`): used to find which ids a
/// receipt stub names. A backslash separates words too: inside a JSON string a stub's quotes
/// are escaped (`with id \"m8\"`).
///
/// ```
/// let words = ctxgc_bench::context::id_words(r#"call ctxgc_recall with id \"m8\" for it"#);
/// assert!(words.contains("m8"));
/// ```
pub fn id_words(text: &str) -> BTreeSet<&str> {
    text.split(|c: char| c.is_whitespace() || "[](){};,:\"'\\".contains(c))
        .filter(|w| !w.is_empty())
        .collect()
}
