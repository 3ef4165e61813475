//! Telling formats apart by shape, by asking the [`REGISTRY`]: which format claims a document
//! object ([`WireFormat::claims_object`]), an item ([`WireFormat::claims_item`]), a line of
//! JSONL ([`WireFormat::claims_line`]), and which chat format a message of a list shows by
//! itself ([`WireFormat::shown_by_item_type`], [`WireFormat::shown_by_block_type`]). No rule
//! here names a format: each format states its own in its module.
//!
//! ```
//! use ctxgc_core::Format;
//! use ctxgc_core::formats::detect::chat_format_of;
//! let v = serde_json::json!([{"role": "user", "content": "hi"},
//!   {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]);
//! assert_eq!(chat_format_of(&v), Format::Anthropic);
//! ```

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::error::Error;
use crate::formats::key::Format;
use crate::formats::{REGISTRY, WireFormat};

pub use crate::formats::shape::{Member, ObjectClaim, ObjectShape};

/// The first registered format that claims a document object, with its claim.
pub fn claiming_object(object: &dyn ObjectShape) -> Option<(&'static dyn WireFormat, ObjectClaim)> {
    REGISTRY
        .iter()
        .copied()
        .find_map(|w| w.claims_object(object).map(|claim| (w, claim)))
}

/// The first registered format that claims a line of JSONL before any item rule is asked.
pub fn claiming_line(line: &Map<String, Value>) -> Option<&'static dyn WireFormat> {
    REGISTRY.iter().copied().find(|w| w.claims_line(line))
}

/// The chat format a message list is read as when no message shows another: the last
/// registered chat format, which claims any message with a role.
pub fn default_chat() -> &'static dyn WireFormat {
    REGISTRY
        .iter()
        .rev()
        .copied()
        .find(|w| w.is_chat())
        // The registry holds chat formats (formats::tests); were it not to, the first format.
        .unwrap_or(REGISTRY[0])
}

/// The format an empty list is read as: the first registered event format (nothing in it
/// says otherwise, and an empty trace compiles to nothing).
pub fn of_empty_list() -> &'static dyn WireFormat {
    REGISTRY
        .iter()
        .copied()
        .find(|w| w.family() == crate::formats::Family::Events)
        .unwrap_or(REGISTRY[0])
}

fn shown_by_type(kind: &str) -> Option<Format> {
    REGISTRY
        .iter()
        .find(|w| w.shown_by_item_type(kind))
        .map(|w| w.format())
}

fn shown_by_block(kind: &str) -> Option<Format> {
    REGISTRY
        .iter()
        .find(|w| w.shown_by_block_type(kind))
        .map(|w| w.format())
}

/// The chat format of a parsed document (a message list, or an object holding one), looking
/// at every message rather than only the first: a list that starts with a plain user message
/// and holds `tool_use` blocks later is Anthropic.
pub fn chat_format_of(doc: &Value) -> Format {
    let list = match doc {
        Value::Array(list) => Some(list),
        Value::Object(map) => {
            if let Some((wire, claim)) = claiming_object(map)
                && wire.is_chat()
                && !claim.by_first_item
            {
                return wire.format();
            }
            map.get(default_chat().items_key())
                .and_then(Value::as_array)
        }
        _ => None,
    };
    list.and_then(|list| list.iter().find_map(message_format))
        .unwrap_or_else(|| default_chat().format())
}

/// [`chat_format_of`] the document `text` (trimmed), reading of a message list only each
/// message's `type` and its content blocks' `type`s instead of building the whole document.
/// Anything that read does not settle (an object document, a message that is not a plain
/// object) is decided on the parsed document, exactly as [`chat_format_of`] decides it.
///
/// ```
/// use ctxgc_core::{Format, formats::detect::chat_format_of_text};
/// let plain = r#"[{"role": "user", "content": "hi"}]"#;
/// assert_eq!(chat_format_of_text(plain).unwrap(), Format::OpenaiChat);
/// let blocks = r#"[{"role": "user", "content": "hi"},
///                  {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]"#;
/// assert_eq!(chat_format_of_text(blocks).unwrap(), Format::Anthropic);
/// assert!(chat_format_of_text("[{").is_err());
/// ```
pub fn chat_format_of_text(text: &str) -> Result<Format, Error> {
    if text.starts_with('[')
        && let Ok(messages) = serde_json::from_str::<Vec<MessageShape<'_>>>(text)
        && let Ok(shown) = messages
            .iter()
            .map(MessageShape::format)
            .find(|shown| !matches!(shown, Ok(None)))
            .transpose()
    {
        return Ok(shown.flatten().unwrap_or_else(|| default_chat().format()));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| Error::json("input", &e))?;
    Ok(chat_format_of(&value))
}

/// The members of a message (or of a content block) that tell a chat format.
#[derive(serde::Deserialize)]
struct MessageShape<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<&'a RawValue>,
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
}

impl MessageShape<'_> {
    /// [`message_format`] of this message; `Err` when a part of it is not what the shape
    /// expects (a block that is not an object, a repeated key), to be read in full instead.
    fn format(&self) -> Result<Option<Format>, ()> {
        if let Some(shown) = Self::kind(self.kind)?.and_then(|k| shown_by_type(&k)) {
            return Ok(Some(shown));
        }
        let Some(content) = self.content.filter(|c| c.get().starts_with('[')) else {
            return Ok(None);
        };
        let blocks: Vec<MessageShape<'_>> = serde_json::from_str(content.get()).map_err(|_| ())?;
        for block in &blocks {
            if let Some(shown) = Self::kind(block.kind)?.and_then(|k| shown_by_block(&k)) {
                return Ok(Some(shown));
            }
        }
        Ok(None)
    }

    /// `kind` when it is a string.
    fn kind(kind: Option<&RawValue>) -> Result<Option<Cow<'_, str>>, ()> {
        match kind.map(RawValue::get) {
            Some(text) if text.starts_with('"') => {
                serde_json::from_str(text).map(Some).map_err(|_| ())
            }
            _ => Ok(None),
        }
    }
}

/// The format one message of a list shows by itself (a Responses item type, or Anthropic
/// content blocks), if any: [`chat_format_of`] takes the first message that shows one.
pub fn message_format(m: &Value) -> Option<Format> {
    if let Some(shown) = m
        .get("type")
        .and_then(Value::as_str)
        .and_then(shown_by_type)
    {
        return Some(shown);
    }
    m.get("content")
        .and_then(Value::as_array)?
        .iter()
        .find_map(|b| {
            b.get("type")
                .and_then(Value::as_str)
                .and_then(shown_by_block)
        })
}
