//! Which tool result answers which call.
//!
//! Providers let call ids repeat within one conversation (several corpora reuse one id for a
//! whole series of calls), so a result is paired with the earliest call that carries its id
//! and has no result yet. Pairing is built incrementally, item by item, and is the same for
//! every pass and for the back-end.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::ir::{Block, Call, Item, Kind};

/// A block of an item: its position in the session and its index in the message's blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Slot {
    /// Position of the item.
    pub item: usize,
    /// Index of the block in the message.
    pub block: usize,
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

/// The signature of a call: name and canonical arguments, length-prefixed.
pub fn call_signature(call: &Call) -> String {
    let args = crate::ir::canonical_json(&call.arguments);
    format!("{}:{}\u{0}{}", call.name.len(), call.name, args)
}

impl Pairing {
    /// Takes item `i` into account (items must be added in order).
    pub fn add(&mut self, i: usize, item: &Item) {
        let Kind::Message(message) = &item.kind else {
            return;
        };
        for (b, block) in message.blocks.iter().enumerate() {
            match block {
                Block::ToolCall(call) => {
                    let index = self.calls.len();
                    self.calls.push(CallInfo {
                        slot: Slot { item: i, block: b },
                        name: call.name.clone(),
                        signature: call_signature(call),
                    });
                    self.open
                        .entry(call.call_id.clone())
                        .or_default()
                        .push_back(index);
                }
                Block::ToolResult(out) => {
                    let Some(queue) = self.open.get_mut(&out.call_id) else {
                        continue;
                    };
                    let Some(index) = queue.pop_front() else {
                        continue;
                    };
                    if queue.is_empty() {
                        self.open.remove(&out.call_id);
                    }
                    self.results.entry(i).or_default().push((b, index));
                    let call = self.calls[index].slot;
                    self.answered
                        .entry(call.item)
                        .or_default()
                        .push((call.block, Slot { item: i, block: b }));
                }
                _ => {}
            }
        }
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

/// A tool result as the tool-output passes see it.
#[derive(Debug, Clone)]
pub struct ResultView<'a> {
    /// Where it is.
    pub slot: Slot,
    /// The call it answers.
    pub call: &'a CallInfo,
    /// The output as given.
    pub output: &'a crate::ir::ToolOutput,
    /// Its text with state blocks removed (what the model receives), when it is text.
    pub text: Option<String>,
}

impl ResultView<'_> {
    /// True when the output is a stub or note an earlier compile wrote (see
    /// [`crate::chat::written_by_ctxgc`]): no pass rewrites it or takes it as evidence.
    pub fn written_by_ctxgc(&self) -> bool {
        self.text
            .as_deref()
            .is_some_and(crate::chat::written_by_ctxgc)
    }

    /// True when the output reports a failure: flagged by the provider, a JSON object with a
    /// non-empty `error`, or a first line that says error, exception, failed or traceback.
    pub fn is_error(&self) -> bool {
        if self.output.is_error {
            return true;
        }
        let Some(text) = &self.text else {
            return false;
        };
        if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(text)
            && let Some(e) = map.get("error")
        {
            return !matches!(e, serde_json::Value::Null | serde_json::Value::Bool(false))
                && e.as_str().is_none_or(|s| !s.trim().is_empty());
        }
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        crate::chat::compact::words(first).iter().any(|w| {
            matches!(
                w.as_str(),
                "error" | "errors" | "exception" | "failed" | "failure" | "traceback" | "fatal"
            )
        })
    }
}

/// The results in item `i` (already added to `pairing`), each with its call and text.
pub fn results_of<'a>(pairing: &'a Pairing, i: usize, item: &'a Item) -> Vec<ResultView<'a>> {
    let Kind::Message(message) = &item.kind else {
        return Vec::new();
    };
    pairing
        .results_in(i)
        .filter_map(|(b, call)| {
            let Block::ToolResult(output) = message.blocks.get(b)? else {
                return None;
            };
            let text = crate::chat::output_text(output)
                .map(|t| crate::chat::state::strip_blocks(t).unwrap_or_else(|| t.to_owned()));
            Some(ResultView {
                slot: Slot { item: i, block: b },
                call,
                output,
                text,
            })
        })
        .collect()
}
