//! What a provider's API says around a conversation, as a gateway needs it: how a tool is
//! offered, which tool calls an answer makes, how the answer and the tools' results are
//! appended to the request, how an error is shaped, and how a streamed answer is read event
//! by event. Each format writes its own in its module ([`crate::formats::WireFormat`]'s
//! protocol methods); this module holds the shapes they share.
//!
//! ```
//! use ctxgc_core::Format;
//! use serde_json::json;
//! let answer = json!({"content": [{"type": "text", "text": "Let me look."},
//!     {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.rs"}}]});
//! let calls = Format::Anthropic.wire().answer_tool_calls(&answer).unwrap();
//! assert_eq!(calls[0].name, "read");
//! assert_eq!(calls[0].arguments, Some(json!({"path": "a.rs"})));
//! ```

use serde_json::Value;

/// One tool call an answer of the API makes.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallMade {
    /// The call's id, when the answer gives one.
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments, parsed; `None` when absent or not JSON.
    pub arguments: Option<Value>,
}

/// One streamed answer as it goes by: what the client already has, what is held back, and
/// the model's turn rebuilt from the events. A format reads its events into it
/// ([`crate::formats::WireFormat::stream_event`]); the gateway drives it.
///
/// Events pass until the model starts a tool call; from there the rest of the answer is held
/// back, to be released as it came or replaced by a continuation.
#[derive(Debug, Default)]
pub struct StreamRound {
    /// True for the first round of a request (a continuation leaves out its opening events).
    pub first: bool,
    /// The blocks (Anthropic) or output items (Responses) the client has from earlier rounds:
    /// a continuation's indexes are moved past them.
    pub offset: usize,
    /// True once a tool call started: events are held back from then on.
    pub holding: bool,
    /// The events held back, as their exact bytes.
    pub held: Vec<Vec<u8>>,
    /// OpenAI Chat: the text written so far.
    pub text: String,
    /// OpenAI Chat: the tool calls (id, name, arguments as text) by index.
    pub calls: Vec<(String, String, String)>,
    /// Anthropic: the content blocks by index. Responses: the output items by index.
    pub blocks: Vec<Value>,
    /// The tool inputs (Anthropic) or function arguments (Responses) by index, as text until
    /// they end.
    pub inputs: Vec<String>,
    /// How many of `blocks` the client was shown.
    pub passed_blocks: usize,
    /// Responses: the output items the client was shown in earlier rounds (the final
    /// `response.completed` lists them first).
    pub earlier: Vec<Value>,
    /// Responses: the next sequence number to write.
    pub next_seq: u64,
}

impl StreamRound {
    /// A round of a request: the first one, or a continuation after `offset` blocks.
    pub fn new(first: bool, offset: usize) -> StreamRound {
        StreamRound {
            first,
            offset,
            ..StreamRound::default()
        }
    }

    /// A continuation that follows `earlier` output items and sequence number `next_seq`
    /// (Responses).
    pub fn after(mut self, earlier: Vec<Value>, next_seq: u64) -> StreamRound {
        self.earlier = earlier;
        self.next_seq = next_seq;
        self
    }

    /// Responses: the output items the client has, this round's included.
    pub fn shown_items(&self) -> Vec<Value> {
        let mut items = self.earlier.clone();
        items.extend(
            self.blocks
                .iter()
                .take(self.passed_blocks)
                .filter(|b| !b.is_null())
                .cloned(),
        );
        items
    }

    /// `bytes` for the client now, or held back once a tool call started.
    pub fn pass_or_hold(&mut self, bytes: Vec<u8>) -> Option<Vec<u8>> {
        if self.holding {
            self.held.push(bytes);
            None
        } else {
            Some(bytes)
        }
    }

    /// Makes room for block `i` (and its input).
    pub fn reserve_block(&mut self, i: usize) {
        if self.blocks.len() <= i {
            self.blocks.resize(i + 1, Value::Null);
            self.inputs.resize(i + 1, String::new());
        }
    }

    /// The blocks read so far, in order, without the gaps.
    pub fn present_blocks(&self) -> Vec<Value> {
        self.blocks
            .iter()
            .filter(|b| !b.is_null())
            .cloned()
            .collect()
    }
}

/// A streamed event's data as JSON, its `type`, and the position it names under
/// `index_key`; `None` when the data is not JSON.
pub(crate) fn event_json(data: &str, index_key: &str) -> Option<(Value, String, Option<usize>)> {
    let data = serde_json::from_str::<Value>(data).ok()?;
    let kind = data
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let index = data
        .get(index_key)
        .and_then(Value::as_u64)
        .map(|i| i as usize);
    Some((data, kind, index))
}

/// Parses arguments given as JSON text (OpenAI's `arguments`).
pub(crate) fn arguments_of_text(text: Option<&str>) -> Option<Value> {
    text.and_then(|a| serde_json::from_str::<Value>(a).ok())
}
