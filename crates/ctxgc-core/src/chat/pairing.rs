//! Which tool result answers which call.
//!
//! Providers let call ids repeat within one conversation (several corpora reuse one id for a
//! whole series of calls), so a result is paired with the earliest call that carries its id
//! and has no result yet. Pairing is built incrementally, item by item, and is the same for
//! every pass and for the back-end.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::OnceLock;

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use crate::chat::compact::{Compacted, compact_parsed};
use crate::ir::{Block, Call, Item, Kind, ToolOutput};
use crate::tokens::Tokenizer;

/// A block of an item: its position in the session and its index in the message's blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Slot {
    /// Position of the item.
    pub item: usize,
    /// Index of the block in the message.
    pub block: usize,
}

/// The BLAKE3 hash of a tool output's canonical JSON: equal for the same output.
///
/// Held as its 32 bytes (every result of a large trace is hashed, and several passes keep the
/// hashes they compare), written as lowercase hex wherever a pass's state is stored, so stored
/// pipelines read the same either way.
///
/// ```
/// use ctxgc_core::chat::pairing::OutputHash;
///
/// let hash = OutputHash::of(&serde_json::json!({"ok": true}));
/// assert_eq!(hash, OutputHash::of(&serde_json::json!({"ok": true})));
/// assert_ne!(hash, OutputHash::of(&serde_json::json!({"ok": false})));
/// assert_eq!(hash.to_string().len(), 64);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OutputHash(blake3::Hash);

impl OutputHash {
    /// The hash of `output`'s canonical JSON ([`crate::ir::canonical_json`]).
    pub fn of(output: &serde_json::Value) -> Self {
        Self(blake3::hash(crate::ir::canonical_json(output).as_bytes()))
    }
}

impl std::fmt::Display for OutputHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.to_hex().as_str())
    }
}

impl Serialize for OutputHash {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.to_hex().as_str())
    }
}

impl<'de> Deserialize<'de> for OutputHash {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let hex = String::deserialize(deserializer)?;
        blake3::Hash::from_hex(hex.as_bytes())
            .map(Self)
            .map_err(|e| serde::de::Error::custom(format!("output hash {hex:?}: {e}")))
    }
}

/// One call as pairing sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallInfo {
    /// Where the call is.
    pub slot: Slot,
    /// The tool's name.
    pub name: String,
    /// Tool name plus canonical arguments: equal for "the same call".
    pub signature: String,
}

/// Calls and results paired so far.
///
/// ```
/// use ctxgc_core::chat::pairing::Pairing;
/// use ctxgc_core::frontend::openai::lower_messages;
/// let items = lower_messages(r#"[
///   {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
///   {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}
/// ]"#).unwrap();
/// let mut pairing = Pairing::default();
/// for (i, item) in items.iter().enumerate() { pairing.add(i, item); }
/// assert_eq!(pairing.call_of(1, 0).unwrap().name, "ls");
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Pairing {
    /// Calls without a result yet, by id, oldest first.
    open: HashMap<String, VecDeque<usize>>,
    calls: Vec<CallInfo>,
    /// For each item with results: (block, index into `calls`).
    #[serde(with = "crate::chat::position_map")]
    results: HashMap<usize, Vec<(usize, usize)>>,
    /// For each item with calls: (block, result slot) once answered.
    #[serde(with = "crate::chat::position_map")]
    answered: HashMap<usize, Vec<(usize, Slot)>>,
}

/// A tool call or a tool result, wherever the IR holds it.
enum ToolPart<'a> {
    Call(&'a Call),
    Result(&'a ToolOutput),
}

/// Calls `f` with each tool call and result of an item and its block index: a message's
/// call and result blocks, or the single block a `tool_call` / `tool_result` event is.
fn for_each_tool_part<'a>(item: &'a Item, mut f: impl FnMut(usize, ToolPart<'a>)) {
    match &item.kind {
        Kind::ToolCall(call) => f(0, ToolPart::Call(call)),
        Kind::ToolResult(out) => f(0, ToolPart::Result(out)),
        Kind::Message(message) => {
            for (b, block) in message.blocks.iter().enumerate() {
                match block {
                    Block::ToolCall(call) => f(b, ToolPart::Call(call)),
                    Block::ToolResult(out) => f(b, ToolPart::Result(out)),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// The tool output of result block `block` of `item` (block 0 of a `tool_result` event).
fn output_at(item: &Item, block: usize) -> Option<&ToolOutput> {
    match &item.kind {
        Kind::ToolResult(out) if block == 0 => Some(out),
        Kind::Message(message) => match message.blocks.get(block)? {
            Block::ToolResult(out) => Some(out),
            _ => None,
        },
        _ => None,
    }
}

/// A message's tool output with the state blocks it must not carry removed, when it is
/// text and that changed it (see [`ResultView::text`]).
fn stripped_text(item: &Item, output: &ToolOutput) -> Option<String> {
    match &item.kind {
        Kind::Message(_) => {
            crate::chat::output_text(output).and_then(crate::chat::state::strip_blocks)
        }
        _ => None,
    }
}

/// The [`call_signature`] of each call of an item, in order.
fn call_signatures(item: &Item) -> Vec<String> {
    let mut signatures = Vec::new();
    for_each_tool_part(item, |_, part| {
        if let ToolPart::Call(call) = part {
            signatures.push(call_signature(call));
        }
    });
    signatures
}

/// The signature of a call: name and canonical arguments, length-prefixed.
pub fn call_signature(call: &Call) -> String {
    let mut signature = format!("{}:{}\u{0}", call.name.len(), call.name);
    crate::ir::write_canonical(&call.arguments, &mut signature);
    signature
}

impl Pairing {
    /// Takes item `i` into account (items must be added in order). A `tool_call` or
    /// `tool_result` event is paired as the one block it is (block 0), so every pass sees
    /// the calls and results of traces and transcripts alike.
    pub fn add(&mut self, i: usize, item: &Item) {
        self.add_signed(i, item, call_signatures(item));
    }

    /// [`Pairing::add`] with the [`call_signature`] of each call of the item given, in order
    /// (computed beforehand, on every core for a large batch).
    fn add_signed(&mut self, i: usize, item: &Item, signatures: Vec<String>) {
        let mut signatures = signatures.into_iter();
        for_each_tool_part(item, |b, part| {
            let slot = Slot { item: i, block: b };
            match part {
                ToolPart::Call(call) => {
                    let index = self.calls.len();
                    self.calls.push(CallInfo {
                        slot,
                        name: call.name.clone(),
                        signature: signatures.next().unwrap_or_else(|| call_signature(call)),
                    });
                    self.open
                        .entry(call.call_id.clone())
                        .or_default()
                        .push_back(index);
                }
                ToolPart::Result(out) => {
                    let Some(queue) = self.open.get_mut(&out.call_id) else {
                        return;
                    };
                    let Some(index) = queue.pop_front() else {
                        return;
                    };
                    if queue.is_empty() {
                        self.open.remove(&out.call_id);
                    }
                    self.results.entry(i).or_default().push((b, index));
                    let call = self.calls[index].slot;
                    self.answered
                        .entry(call.item)
                        .or_default()
                        .push((call.block, slot));
                }
            }
        });
    }

    /// The call that result block `block` of item `item` answers.
    pub fn call_of(&self, item: usize, block: usize) -> Option<&CallInfo> {
        self.results
            .get(&item)?
            .iter()
            .find(|(b, _)| *b == block)
            .map(|&(_, index)| &self.calls[index])
    }

    /// Result blocks of item `item`, with the call each answers.
    pub fn results_in(&self, item: usize) -> impl Iterator<Item = (usize, &CallInfo)> {
        self.results
            .get(&item)
            .into_iter()
            .flatten()
            .map(|&(b, index)| (b, &self.calls[index]))
    }

    /// Where the results of the calls made by item `item` are.
    pub fn answers_to(&self, item: usize) -> &[(usize, Slot)] {
        self.answered.get(&item).map_or(&[], Vec::as_slice)
    }

    /// True when every call made so far has a result.
    pub fn all_answered(&self) -> bool {
        self.open.is_empty()
    }
}

/// Calls and results of a session, paired once for every pass, with what the tool-output
/// passes need of each result computed at most once: its text without state blocks, its
/// parse as JSON, its canonical hash, its error status, its token count.
///
/// A [`crate::Session`] keeps one and hands it to the passes in [`crate::passes::Cx`]; it is
/// derived from the items alone, so a session loaded from a snapshot rebuilds it.
///
/// ```
/// use ctxgc_core::chat::pairing::ToolIndex;
/// use ctxgc_core::frontend::openai::lower_messages;
/// let items = lower_messages(r#"[
///   {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
///   {"role": "tool", "tool_call_id": "c1", "content": "{\"files\": [\"a.txt\"]}"}
/// ]"#).unwrap();
/// let mut index = ToolIndex::default();
/// index.extend_to(&items, items.len());
/// let results = index.results(1, &items[1]);
/// assert_eq!(results[0].call.name, "ls");
/// assert!(results[0].json().is_some());
/// assert!(!results[0].is_error());
/// ```
#[derive(Debug, Default)]
pub struct ToolIndex {
    pairing: Pairing,
    /// Items taken into account: `0..added`.
    added: usize,
    /// For each item with results, one entry per result block, in `results_in` order.
    results: HashMap<usize, Vec<ResultFacts>>,
}

/// What is known of one result block, each part computed when first asked.
#[derive(Debug, Clone, Default)]
struct ResultFacts {
    /// A message's output with state blocks removed, when removing them changed it.
    stripped: Option<String>,
    hash: OnceLock<OutputHash>,
    error: OnceLock<bool>,
    /// What only some passes ask of some results, allocated when first asked: every result
    /// of a large trace is held here, and most are only hashed and checked for an error.
    more: OnceLock<Box<MoreFacts>>,
}

/// The facts of a result that only some passes ask for.
#[derive(Debug, Clone, Default)]
struct MoreFacts {
    /// An event's output that is not a string, as compact JSON.
    rendered: OnceLock<String>,
    json: OnceLock<Option<serde_json::Value>>,
    tokens: OnceLock<(Tokenizer, usize)>,
    compacted: OnceLock<(Tokenizer, Option<Compacted>)>,
}

impl ResultFacts {
    fn more(&self) -> &MoreFacts {
        self.more.get_or_init(Box::default)
    }
}

/// A clone starts empty and is rebuilt from the items at its next [`ToolIndex::extend_to`]:
/// everything in it is derived from the items, and the parsed outputs it caches can be large
/// (a session is cloned to be saved, and the index is never saved).
impl Clone for ToolIndex {
    fn clone(&self) -> Self {
        ToolIndex::default()
    }
}

impl ToolIndex {
    /// Takes items `self.added..end` into account (items already taken are skipped, so a
    /// session calls this before every compile).
    pub fn extend_to(&mut self, items: &[Item], end: usize) {
        let end = end.min(items.len());
        let new = items.get(self.added..end).unwrap_or_default();
        // Writing the arguments of calls canonically is most of pairing's work: a large batch
        // (a whole trace) does it on every core first.
        let bytes = new.iter().map(|item| item.raw.len()).sum();
        let signatures = crate::parallel::map_in_order(new, bytes, |_, item| call_signatures(item));
        for ((i, item), signatures) in items
            .iter()
            .enumerate()
            .take(end)
            .skip(self.added)
            .zip(signatures)
        {
            self.pairing.add_signed(i, item, signatures);
            let facts: Vec<ResultFacts> = self
                .pairing
                .results_in(i)
                .map(|(b, _)| ResultFacts {
                    stripped: output_at(item, b).and_then(|output| stripped_text(item, output)),
                    ..ResultFacts::default()
                })
                .collect();
            if !facts.is_empty() {
                self.results.insert(i, facts);
            }
        }
        self.added = self.added.max(end);
    }

    /// The pairing of every call and result taken so far.
    pub fn pairing(&self) -> &Pairing {
        &self.pairing
    }

    /// The results in item `i` (already taken, `item` being `items[i]`), each with its call.
    pub fn results<'a>(&'a self, i: usize, item: &'a Item) -> Vec<ResultView<'a>> {
        let facts = self.results.get(&i).map_or(&[][..], Vec::as_slice);
        self.pairing
            .results_in(i)
            .zip(facts)
            .filter_map(|((b, call), facts)| {
                Some(ResultView {
                    slot: Slot { item: i, block: b },
                    call,
                    output: output_at(item, b)?,
                    event: matches!(item.kind, Kind::ToolResult(_)),
                    facts,
                })
            })
            .collect()
    }
}

/// A tool result as the tool-output passes see it.
#[derive(Debug, Clone)]
pub struct ResultView<'a> {
    /// Where it is.
    pub slot: Slot,
    /// The call it answers.
    pub call: &'a CallInfo,
    /// The output as given.
    pub output: &'a crate::ir::ToolOutput,
    /// It is a `tool_result` event (otherwise a block of a message).
    event: bool,
    facts: &'a ResultFacts,
}

impl<'a> ResultView<'a> {
    /// The text the model receives, when a pass may rewrite it. A message's output: its
    /// text ([`crate::chat::output_text`]) with state blocks removed. An event's output is
    /// shown whole: a string as it is, any other value as compact JSON.
    pub fn text(&self) -> Option<&'a str> {
        if let Some(stripped) = &self.facts.stripped {
            return Some(stripped);
        }
        if !self.event {
            return crate::chat::output_text(self.output);
        }
        let facts = self.facts;
        Some(match &self.output.output {
            serde_json::Value::String(text) => text,
            other => facts.more().rendered.get_or_init(|| other.to_string()),
        })
    }

    /// True when [`ResultView::text`] is `Some`, without writing an event's output out.
    pub fn has_text(&self) -> bool {
        self.event || self.text().is_some()
    }

    /// True when the output is a stub or note an earlier compile wrote (see
    /// [`crate::chat::written_by_ctxgc`]): no pass rewrites it or takes it as evidence.
    pub fn written_by_ctxgc(&self) -> bool {
        // An event's output that is not a string is shown as JSON, which never opens with a
        // note's prefix: no need to write every such output out to know.
        if self.event && !self.output.output.is_string() {
            return false;
        }
        self.text().is_some_and(crate::chat::written_by_ctxgc)
    }

    /// The text parsed by [`crate::chat::compact::parse_json_output`]: a JSON object or array
    /// that can be re-encoded without loss.
    pub fn json(&self) -> Option<&'a serde_json::Value> {
        let text = self.text();
        self.facts
            .more()
            .json
            .get_or_init(|| text.and_then(crate::chat::compact::parse_json_output))
            .as_ref()
    }

    /// The hash of the output's canonical JSON: equal for the same output.
    pub fn output_hash(&self) -> OutputHash {
        let output = &self.output.output;
        *self.facts.hash.get_or_init(|| OutputHash::of(output))
    }

    /// Tokens of the text (0 when it is not text).
    pub fn tokens(&self, tokenizer: Tokenizer) -> usize {
        let count = || (tokenizer, self.text().map_or(0, |t| tokenizer.count(t)));
        match self.facts.more().tokens.get_or_init(count) {
            &(t, n) if t == tokenizer => n,
            _ => count().1,
        }
    }

    /// The lossless re-encoding the compact-json pass would send
    /// ([`crate::chat::compact::compact_parsed`]), when the output is JSON and it saves tokens.
    pub fn compacted(&self, tokenizer: Tokenizer) -> Option<Cow<'a, Compacted>> {
        let compute = || {
            let (text, value) = (self.text()?, self.json()?);
            compact_parsed(text, value, || self.tokens(tokenizer), tokenizer)
        };
        match self
            .facts
            .more()
            .compacted
            .get_or_init(|| (tokenizer, compute()))
        {
            (t, c) if *t == tokenizer => c.as_ref().map(Cow::Borrowed),
            _ => compute().map(Cow::Owned),
        }
    }

    /// Tokens of what the compact-json pass would send for this output: its lossless
    /// re-encoding, else the text. What a lossy rewrite has to beat.
    pub fn lossless_tokens(&self, tokenizer: Tokenizer) -> usize {
        self.compacted(tokenizer)
            .map_or_else(|| self.tokens(tokenizer), |c| c.tokens_after)
    }

    /// True when the output reports a failure: flagged by the provider, a JSON object with a
    /// non-empty `error`, or a first line that says error, exception, failed or traceback.
    pub fn is_error(&self) -> bool {
        if self.output.is_error {
            return true;
        }
        // An event's object output is its own parse.
        if self.event
            && let serde_json::Value::Object(map) = &self.output.output
        {
            return *self
                .facts
                .error
                .get_or_init(|| text_reports_error("", Some(map.get("error").cloned())));
        }
        let Some(text) = self.text() else {
            return false;
        };
        *self.facts.error.get_or_init(|| {
            // Only a text that opens an object can parse as one; the shared parse serves
            // unless a repeated key made it refuse the text.
            let json_space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r');
            let error_field = if text.trim_start().starts_with('{') {
                // `json()` trims any Unicode space, serde_json only JSON's four.
                let same_text = text.trim().len() == text.trim_matches(json_space).len();
                match self.json().filter(|_| same_text) {
                    Some(serde_json::Value::Object(map)) => Some(map.get("error").cloned()),
                    _ => match serde_json::from_str::<serde_json::Value>(text) {
                        Ok(serde_json::Value::Object(map)) => Some(map.get("error").cloned()),
                        _ => None,
                    },
                }
            } else {
                None
            };
            text_reports_error(text, error_field)
        })
    }
}

/// `error_field`: `Some(the "error" member)` when the text is a JSON object.
fn text_reports_error(text: &str, error_field: Option<Option<serde_json::Value>>) -> bool {
    if let Some(Some(e)) = error_field {
        return !matches!(e, serde_json::Value::Null | serde_json::Value::Bool(false))
            && e.as_str().is_none_or(|s| !s.trim().is_empty());
    }
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut reports = false;
    crate::chat::compact::for_each_word(first, |w| {
        reports |= matches!(
            w,
            "error" | "errors" | "exception" | "failed" | "failure" | "traceback" | "fatal"
        );
    });
    reports
}

#[cfg(test)]
mod tests {
    use super::OutputHash;
    use serde_json::json;

    #[test]
    fn an_output_hash_is_stored_as_the_hex_stored_pipelines_already_hold() {
        let output = json!({"b": [1, 2], "a": "x"});
        let hash = OutputHash::of(&output);
        let hex = blake3::hash(crate::ir::canonical_json(&output).as_bytes())
            .to_hex()
            .to_string();
        let stored = serde_json::to_string(&hash).expect("a hash serializes");
        assert_eq!(stored, format!("\"{hex}\""));
        assert_eq!(hash.to_string(), hex);
        let read: OutputHash = serde_json::from_str(&stored).expect("the hex reads back");
        assert_eq!(read, hash);
    }

    #[test]
    fn a_stored_hash_that_is_not_hex_is_an_error_naming_it() {
        let error = serde_json::from_str::<OutputHash>("\"not-a-hash\"")
            .expect_err("not a hash")
            .to_string();
        assert!(error.contains("output hash \"not-a-hash\""), "{error}");
        assert!(serde_json::from_str::<OutputHash>("42").is_err());
    }
}
