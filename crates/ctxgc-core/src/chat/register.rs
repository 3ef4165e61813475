//! The register: the live declared state as one block the model reads after the system prompt.
//!
//! ```text
//! [ACTIVE_AGENT_STATE]
//! - active_reservation = "0U4NPP" (m2, declared)
//! - cabin_class = "economy" (m6, declared)
//! ```
//!
//! One line per key (sorted by key): the value as JSON, the message that supports it, and
//! `declared`, `pinned` or `unsure`, then `flagged: ...` when a schema problem was accepted
//! under policy `flag`. The register is its own system message (or system block), never an
//! edit of the policy text. A register already in the input — the output of an earlier
//! compile — is read back (its facts are carried over, with their provenance) and replaced,
//! never stacked.
//!
//! Only a register ctxgc itself wrote is replaced ([`written_block`]): the exact message or
//! block [`render`] and the back-end produce, at the place they put it, every line of the
//! shape [`render`] writes. Any other text, even one that opens with [`HEADER`], is the
//! caller's and stays as it is.
//!
//! ```
//! use ctxgc_core::chat::register::{parse, Line};
//! let lines = parse("[ACTIVE_AGENT_STATE]\n- cabin_class = \"economy\" (m6, declared)").unwrap();
//! assert!(matches!(&lines[0], Line::Fact { key, provenance, .. } if key == "cabin_class" && provenance == "m6"));
//! assert!(parse("You are an airline agent.").is_none());
//! ```

use std::collections::BTreeMap;

use serde_json::Value;

use crate::chat::message_of;
use crate::chat::state::{Fact, Status};
use crate::ir::{Item, Role};

/// The register's first line; also how a register in the input is recognised.
pub const HEADER: &str = "[ACTIVE_AGENT_STATE]";

/// Renders the register, or `None` when no fact is live.
///
/// ```
/// use ctxgc_core::chat::register::render;
/// use ctxgc_core::chat::state::{Fact, Status};
/// use std::collections::BTreeMap;
/// let fact = Fact { value: "economy".into(), status: Status::Declared, support: 6,
///                   provenance: "m6".into(), carried: false, flags: vec![] };
/// let facts = BTreeMap::from([("cabin_class", &fact)]);
/// assert_eq!(render(&facts).unwrap(), "[ACTIVE_AGENT_STATE]\n- cabin_class = \"economy\" (m6, declared)");
/// ```
pub fn render(facts: &BTreeMap<&str, &Fact>) -> Option<String> {
    if facts.is_empty() {
        return None;
    }
    let mut out = String::from(HEADER);
    for (key, fact) in facts {
        push_line(
            &mut out,
            key,
            &fact.value,
            &fact.provenance,
            fact.status,
            &fact.flags.join("; "),
        );
    }
    Some(out)
}

fn push_line(
    out: &mut String,
    key: &str,
    value: &Value,
    provenance: &str,
    status: Status,
    flags: &str,
) {
    out.push_str("\n- ");
    out.push_str(key);
    out.push_str(" = ");
    out.push_str(&value.to_string());
    out.push_str(" (");
    out.push_str(provenance);
    out.push_str(", ");
    out.push_str(status.word());
    if !flags.is_empty() {
        out.push_str(", flagged: ");
        // Newlines would break the one-line-per-key shape.
        out.push_str(&flags.replace(['\n', '\r'], " "));
    }
    out.push(')');
}

/// Reads back a register exactly as [`render`] writes it: the header, then at least one
/// fact line, keys strictly ascending, nothing else (no other line, no extra whitespace).
/// `None` for any other text, so a text that only looks like a register is never taken for
/// one.
///
/// ```
/// use ctxgc_core::chat::register::read_written;
/// assert!(read_written("[ACTIVE_AGENT_STATE]\n- cabin_class = \"economy\" (m6, declared)").is_some());
/// // A system prompt that opens with the header but says more is not a register.
/// assert!(read_written("[ACTIVE_AGENT_STATE]\n- cabin_class = \"economy\" (m6, declared)\nBe polite.").is_none());
/// assert!(read_written("[ACTIVE_AGENT_STATE]").is_none());
/// ```
pub fn read_written(text: &str) -> Option<Vec<Line>> {
    let lines = parse(text)?;
    let mut again = String::from(HEADER);
    let mut previous: Option<&str> = None;
    for line in &lines {
        let Line::Fact {
            key,
            value,
            provenance,
            status,
            flags,
        } = line
        else {
            return None;
        };
        if previous.is_some_and(|p| p >= key.as_str()) {
            return None;
        }
        previous = Some(key);
        push_line(
            &mut again,
            key,
            value,
            provenance,
            *status,
            &flags.join("; "),
        );
    }
    (!lines.is_empty() && again == text).then_some(lines)
}

/// The register ctxgc wrote into `item`, if it holds one: the block it is (the whole message
/// is that one block when `whole`) and its facts. `leading` says whether every item before
/// this one is a system message: the back-end writes the register there and nowhere else.
///
/// What ctxgc writes is exactly `{"role": "system", "content": REGISTER}` (Responses: with
/// `"type": "message"`), or the last block `{"type": "text", "text": REGISTER}` of an
/// Anthropic `system` list; a `developer` message, a message with other fields, a block that
/// is not the last, or a text that [`read_written`] refuses is the caller's.
pub fn written_block(item: &Item, leading: bool) -> Option<WrittenRegister> {
    let message = message_of(item)?;
    if !leading || message.role != Role::System {
        return None;
    }
    let value: Value = serde_json::from_str(&item.raw).ok()?;
    let (block, whole, text) = match &value {
        Value::Object(map) => {
            let only_known_fields = map.iter().all(|(k, v)| match k.as_str() {
                "role" => *v == "system",
                "type" => *v == "message",
                "content" => v.is_string(),
                _ => false,
            });
            if !only_known_fields || !map.contains_key("role") {
                return None;
            }
            (0, true, map.get("content")?.as_str()?)
        }
        // An Anthropic `system` list: ctxgc appends the register as its last block.
        Value::Array(blocks) => {
            let last = blocks.last()?.as_object()?;
            let exact = last.len() == 2 && last.get("type").is_some_and(|t| *t == "text");
            if !exact {
                return None;
            }
            (
                blocks.len() - 1,
                blocks.len() == 1,
                last.get("text")?.as_str()?,
            )
        }
        _ => return None,
    };
    let lines = read_written(text)?;
    Some(WrittenRegister {
        block,
        whole,
        lines,
    })
}

/// A register ctxgc wrote, found in an item by [`written_block`].
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenRegister {
    /// The block it is.
    pub block: usize,
    /// True when the item holds nothing else.
    pub whole: bool,
    /// Its facts.
    pub lines: Vec<Line>,
}

/// Tracks whether the items seen so far are all system messages (where the back-end writes
/// the register). Feed it every item in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeadingSystem {
    /// True once an item that is not a system message was seen.
    past: bool,
}

impl LeadingSystem {
    /// Takes `item` into account; returns true when it is in the leading run of system
    /// messages.
    pub fn next(&mut self, item: &Item) -> bool {
        if message_of(item).is_none_or(|m| m.role != Role::System) {
            self.past = true;
        }
        !self.past
    }
}

/// One line of a register read back.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// A fact.
    Fact {
        /// The key.
        key: String,
        /// The value.
        value: Value,
        /// Its provenance (the message id shown).
        provenance: String,
        /// declared, pinned or unsure.
        status: Status,
        /// Flags it carried.
        flags: Vec<String>,
    },
    /// A line that does not have the shape [`render`] writes.
    Unreadable(String),
}

/// Reads a register back; `None` when `text` is not a register.
pub fn parse(text: &str) -> Option<Vec<Line>> {
    let rest = text.trim_start().strip_prefix(HEADER)?;
    if !(rest.is_empty() || rest.starts_with(['\n', '\r'])) {
        return None;
    }
    Some(
        rest.lines()
            .map(str::trim_end)
            .filter(|l| !l.trim().is_empty())
            .map(|l| parse_line(l).unwrap_or_else(|| Line::Unreadable(l.to_owned())))
            .collect(),
    )
}

fn parse_line(line: &str) -> Option<Line> {
    let body = line.strip_prefix("- ")?;
    let (key, rest) = body.split_once(" = ")?;
    let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    let value = stream.next()?.ok()?;
    let tail = rest[stream.byte_offset()..].trim();
    let inner = tail.strip_prefix('(')?.strip_suffix(')')?;
    let mut parts = inner.splitn(3, ", ");
    let provenance = parts.next()?.to_owned();
    let status = Status::from_word(parts.next()?)?;
    let flags = match parts.next() {
        None => Vec::new(),
        Some(f) => vec![f.strip_prefix("flagged: ")?.to_owned()],
    };
    Some(Line::Fact {
        key: key.to_owned(),
        value,
        provenance,
        status,
        flags,
    })
}

/// What a message (or tool output) that held only a state block becomes: content is never
/// left empty.
pub const EMPTIED: &str = "[ctxgc: this message held only a state block]";

/// Where the register goes: after the leading run of system items.
pub fn register_position(items: &[Item], skip: Option<usize>) -> usize {
    items
        .iter()
        .enumerate()
        .position(|(i, item)| {
            Some(i) != skip && message_of(item).is_none_or(|m| m.role != Role::System)
        })
        .unwrap_or(items.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_then_parse_round_trips() {
        let a = Fact {
            value: serde_json::json!({"city": "Austin (TX)", "zip": 78750}),
            status: Status::Pinned,
            support: 3,
            provenance: "m3".into(),
            carried: false,
            flags: vec!["does not match /^x$/".into()],
        };
        let b = Fact {
            value: "maybe west".into(),
            status: Status::Unsure,
            support: 5,
            provenance: "msg_9".into(),
            carried: false,
            flags: vec![],
        };
        let facts = BTreeMap::from([("address", &a), ("rider", &b)]);
        let text = render(&facts).unwrap();
        let lines = parse(&text).unwrap();
        assert_eq!(
            lines,
            vec![
                Line::Fact {
                    key: "address".into(),
                    value: a.value.clone(),
                    provenance: "m3".into(),
                    status: Status::Pinned,
                    flags: a.flags.clone(),
                },
                Line::Fact {
                    key: "rider".into(),
                    value: b.value.clone(),
                    provenance: "msg_9".into(),
                    status: Status::Unsure,
                    flags: vec![],
                },
            ]
        );
    }

    #[test]
    fn odd_lines_are_reported_not_guessed() {
        let lines = parse("[ACTIVE_AGENT_STATE]\n- k = oops (m1, declared)").unwrap();
        assert!(matches!(&lines[0], Line::Unreadable(_)));
        assert!(parse("[ACTIVE_AGENT_STATE] trailing").is_none());
    }
}
