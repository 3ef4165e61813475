//! What the chat front-ends share: documents and their envelopes, item ids, field readers.
//!
//! A chat document is a list of messages (or Responses items), bare or inside an object
//! (`{"messages": [...], "model": ...}`, `{"system": ..., "messages": [...]}`,
//! `{"input": [...]}`). The envelope keeps every other field as its exact bytes, so the
//! back-end can write the document back with only the messages changed.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::{Diagnostic, Error};
use crate::formats::key::Format;
use crate::frontend::split::{Layout, RawItem, split_items};
use crate::ir::{Item, Kind};

/// How the items sat in the input, so the output can be written the same way.
#[derive(Debug, Clone, PartialEq)]
pub enum Envelope {
    /// A bare JSON array.
    Array,
    /// A JSON object: every entry as exact bytes, in order; `items_key` holds the items.
    Object {
        /// Entries `(key, raw value)`, in input order.
        entries: Vec<(String, String)>,
        /// The key of the item list (`messages`, `input`).
        items_key: String,
    },
}

/// One chat document, lowered.
#[derive(Debug, Clone)]
pub struct ChatDoc {
    /// The provider format.
    pub format: Format,
    /// How it was laid out.
    pub envelope: Envelope,
    /// The items: messages (and, for Anthropic, the top-level system prompt first).
    pub items: Vec<Item>,
    /// Position of the item lowered from a top-level `system` field (Anthropic), if any.
    pub system_item: Option<usize>,
    /// True when a Responses `input` was one string rather than a list.
    pub input_was_string: bool,
}

/// The JSON type of a value, for error messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Ids for items: the provider's id where it has one that is unique in the document, `m<i>`
/// (the item's position in the list) otherwise, never colliding with a provider id.
pub fn assign_ids(provider: &[Option<String>], prefix_offset: usize) -> Vec<String> {
    let mut counts = std::collections::HashMap::new();
    for id in provider.iter().flatten() {
        *counts.entry(id.as_str()).or_insert(0usize) += 1;
    }
    let taken: std::collections::HashSet<&str> = counts.keys().copied().collect();
    provider
        .iter()
        .enumerate()
        .map(|(i, id)| match id {
            Some(id) if counts.get(id.as_str()) == Some(&1) => id.clone(),
            _ => {
                let mut candidate = format!("m{}", i + prefix_offset);
                let mut n = 1;
                while taken.contains(candidate.as_str()) {
                    candidate = format!("m{}_{n}", i + prefix_offset);
                    n += 1;
                }
                candidate
            }
        })
        .collect()
}

/// The provider's id of a raw item, when it has a non-empty string `id`.
pub fn provider_id(value: &Value) -> Option<String> {
    value
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

struct EntriesVisitor;

impl<'de> Visitor<'de> for EntriesVisitor {
    type Value = Vec<(String, &'de RawValue)>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
            out.push((k, v));
        }
        Ok(out)
    }
}

/// The entries of a JSON object as exact bytes, in order (duplicate keys kept as they are).
pub fn object_entries(text: &str) -> Result<Vec<(String, &RawValue)>, serde_json::Error> {
    let mut d = serde_json::Deserializer::from_str(text);
    let entries = (&mut d).deserialize_map(EntriesVisitor)?;
    d.end()?;
    Ok(entries)
}

/// Lowers one chat document of a known format.
pub fn lower_document(text: &str, format: Format) -> Result<ChatDoc, Error> {
    let text = text.trim_start_matches('\u{feff}').trim();
    if text.starts_with('[') {
        let raw = split_items(text, Layout::Array)?;
        let items = lower_items(format, &raw, None)?;
        return Ok(ChatDoc {
            format,
            envelope: Envelope::Array,
            items,
            system_item: None,
            input_was_string: false,
        });
    }
    if !text.starts_with('{') {
        return Err(Error::UnknownFormat(format!(
            "a {} document must be a JSON array or object",
            format.name()
        )));
    }
    let entries = object_entries(text).map_err(|e| Error::json("input", &e))?;
    let mut seen = std::collections::HashSet::new();
    if let Some((key, _)) = entries.iter().find(|(k, _)| !seen.insert(k.as_str())) {
        return Err(Error::Invalid(vec![Diagnostic::new(
            0,
            None,
            Some(key),
            format!(
                "duplicate key {key:?} in the document object (JSON readers disagree on which value counts; keep one)"
            ),
        )]));
    }
    let wire = format.wire();
    let items_key = wire.items_key();
    let Some(list) = entries
        .iter()
        .find(|(k, _)| k == items_key)
        .map(|(_, v)| *v)
    else {
        return Err(Error::UnknownFormat(format!(
            "no `{items_key}` in the input object ({} input)",
            format.name()
        )));
    };
    // The top-level system prompt of a format that has one.
    let system = wire
        .system_key()
        .and_then(|key| entries.iter().find(|(k, _)| k == key))
        .map(|(_, v)| v.get());
    let owned: Vec<(String, String)> = entries
        .iter()
        .map(|(k, v)| (k.clone(), v.get().to_owned()))
        .collect();
    let mut input_was_string = false;
    let string_items = list
        .get()
        .trim_start()
        .starts_with('"')
        .then(|| wire.lower_string_items(list.get()))
        .flatten();
    let items = if let Some(items) = string_items {
        input_was_string = true;
        items?
    } else {
        let raw = split_items(list.get(), Layout::Array).map_err(|e| match e {
            Error::Json {
                line,
                column,
                message,
                ..
            } => Error::Json {
                context: format!("`{items_key}`"),
                line,
                column,
                message,
            },
            other => other,
        })?;
        lower_items(format, &raw, system)?
    };
    let system_item = system.is_some().then_some(0);
    Ok(ChatDoc {
        format,
        envelope: Envelope::Object {
            entries: owned,
            items_key: items_key.to_owned(),
        },
        items,
        system_item,
        input_was_string,
    })
}

fn lower_items(
    format: Format,
    raw: &[RawItem<'_>],
    anthropic_system: Option<&str>,
) -> Result<Vec<Item>, Error> {
    let items = lower_unchecked(format, raw, anthropic_system)?;
    one_result_per_call(format, &items)?;
    Ok(items)
}

/// Lowers raw items of a chat format, without the rules that span messages.
pub(crate) fn lower_unchecked(
    format: Format,
    raw: &[RawItem<'_>],
    anthropic_system: Option<&str>,
) -> Result<Vec<Item>, Error> {
    format.wire().lower_items(raw, anthropic_system)
}

/// Refuses a tool result for a call that already has its result. Call ids may be reused (a
/// result answers the earliest call with its id that has none yet), but a second result with
/// no call left to answer is ambiguous: which of the two the model saw, and which one a pass
/// may point at, cannot be known.
fn one_result_per_call(format: Format, items: &[Item]) -> Result<(), Error> {
    let mut check = ResultCheck::new(format);
    let problems: Vec<Diagnostic> = items
        .iter()
        .enumerate()
        .flat_map(|(i, item)| check.add(i, item))
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Invalid(problems))
    }
}

/// The one-result-per-call rule, checked message by message (what a live session checks
/// for each message it appends).
#[derive(Debug, Clone)]
pub struct ResultCheck {
    field: &'static str,
    /// Calls without their result yet, by call id.
    open: std::collections::HashMap<String, usize>,
    /// The message that answered each call id last.
    answered: std::collections::HashMap<String, String>,
}

impl ResultCheck {
    /// No message seen yet.
    pub fn new(format: Format) -> Self {
        ResultCheck {
            field: format.wire().call_id_key(),
            open: Default::default(),
            answered: Default::default(),
        }
    }

    /// Takes item `i` into account; the problems it brings (a second result for a call).
    pub fn add(&mut self, i: usize, item: &Item) -> Vec<Diagnostic> {
        use crate::ir::{Block, Kind};
        let mut problems = Vec::new();
        let Kind::Message(m) = &item.kind else {
            return problems;
        };
        for block in &m.blocks {
            match block {
                Block::ToolCall(call) => *self.open.entry(call.call_id.clone()).or_default() += 1,
                Block::ToolResult(out) => match self.open.get_mut(out.call_id.as_str()) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        self.answered.insert(out.call_id.clone(), item.id.clone());
                    }
                    _ => {
                        if let Some(first) = self.answered.get(out.call_id.as_str()) {
                            problems.push(Diagnostic::new(
                                i,
                                Some(item.id.clone()),
                                Some(self.field),
                                format!(
                                    "a second tool result for call {:?}, which {first} already answered",
                                    out.call_id
                                ),
                            ));
                        }
                    }
                },
                _ => {}
            }
        }
        problems
    }
}

/// A field that must be a string or a list, as found ([`Problems::string_or_list`]).
pub(crate) enum StringOrList<'v> {
    /// A string.
    String(&'v String),
    /// A list.
    List(&'v Vec<Value>),
}

impl StringOrList<'_> {
    /// The field's value, copied.
    pub(crate) fn to_value(&self) -> Value {
        match self {
            StringOrList::String(s) => Value::String((*s).clone()),
            StringOrList::List(list) => Value::Array((*list).clone()),
        }
    }
}

/// Collects per-item problems while lowering, then fails with all of them at once.
#[derive(Debug, Default)]
pub struct Problems(pub Vec<Diagnostic>);

impl Problems {
    /// Adds one.
    pub fn push(
        &mut self,
        index: usize,
        id: &str,
        field: Option<&str>,
        message: impl Into<String>,
    ) {
        self.0
            .push(Diagnostic::new(index, Some(id.to_owned()), field, message));
    }

    /// Adds "expected `what`, found <the JSON type of `found`>" at `field`.
    pub(crate) fn expected(
        &mut self,
        index: usize,
        id: &str,
        field: &str,
        what: &str,
        found: &Value,
    ) {
        self.push(
            index,
            id,
            Some(field),
            format!("expected {what}, found {}", type_name(found)),
        );
    }

    /// `value[field]` when it is a string or a list (of `list_of`); otherwise records that
    /// it is missing or what it is instead.
    pub(crate) fn string_or_list<'v>(
        &mut self,
        index: usize,
        id: &str,
        value: &'v Value,
        field: &str,
        list_of: &str,
    ) -> Option<StringOrList<'v>> {
        match value.get(field) {
            Some(Value::String(s)) => Some(StringOrList::String(s)),
            Some(Value::Array(list)) => Some(StringOrList::List(list)),
            Some(other) => {
                let what = format!("a string or a list of {list_of}");
                self.expected(index, id, field, &what, other);
                None
            }
            None => {
                self.push(index, id, Some(field), "missing");
                None
            }
        }
    }

    /// `value[field]` when it is a non-empty string; otherwise records that it is empty,
    /// not a string, or missing (said as `missing`), under the name `at`.
    pub(crate) fn non_empty_string<'v>(
        &mut self,
        index: usize,
        id: &str,
        value: &'v Value,
        field: &str,
        at: &str,
        missing: &str,
    ) -> Option<&'v str> {
        match value.get(field) {
            Some(Value::String(s)) if !s.is_empty() => Some(s),
            Some(Value::String(_)) => {
                self.push(index, id, Some(at), "must not be empty");
                None
            }
            Some(other) => {
                self.expected(index, id, at, "a string", other);
                None
            }
            None => {
                self.push(index, id, Some(at), missing);
                None
            }
        }
    }

    /// `Ok(value)` when nothing was found, else every problem.
    pub fn finish<T>(self, value: T) -> Result<T, Error> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(Error::Invalid(self.0))
        }
    }
}

/// The problem of an item with a repeated key: parsers disagree on which value counts, so
/// the value ctxgc would read is not the one every reader of the input reads.
pub fn duplicate_key_problem(
    index: usize,
    id: Option<String>,
    d: &crate::unique_keys::DuplicateKey,
) -> Diagnostic {
    let field = if d.path == "$" {
        d.key.clone()
    } else {
        format!("{}.{}", d.path.trim_start_matches("$."), d.key)
    };
    Diagnostic::new(
        index,
        id,
        Some(&field),
        format!("{d} (JSON readers disagree on which value counts; keep one)"),
    )
}

/// An item of a chat document (a message, or a Responses item) with its exact bytes: chats
/// carry no sequence edges, timestamps, retention or extra fields.
pub(crate) fn chat_item(id: String, raw: &str, kind: Kind) -> Item {
    Item {
        id,
        raw: raw.to_owned(),
        kind,
        parent: None,
        timestamp: None,
        retention: Default::default(),
        extra: None,
    }
}

/// Parses every item, names each by its provider id ([`parse_with_ids`]) and lowers it with
/// `lower` (given its position, id and value); every problem is reported.
pub(crate) fn lower_each(
    raw: &[RawItem<'_>],
    mut lower: impl FnMut(usize, &str, &Value, &mut Problems) -> Option<Kind>,
) -> Result<Vec<Item>, Error> {
    let mut problems = Problems::default();
    let (values, ids) = parse_with_ids(raw, &mut problems);
    let mut items = Vec::with_capacity(raw.len());
    for (index, (value, raw)) in values.iter().zip(raw).enumerate() {
        let Some(value) = value else { continue };
        if let Some(kind) = lower(index, &ids[index], value, &mut problems) {
            items.push(chat_item(ids[index].clone(), raw.text, kind));
        }
    }
    problems.finish(items)
}

/// Parses every item (each problem recorded) and names each by its provider id where it has
/// a unique one ([`assign_ids`]).
pub fn parse_with_ids(
    raw: &[RawItem<'_>],
    problems: &mut Problems,
) -> (Vec<Option<Value>>, Vec<String>) {
    let values: Vec<Option<Value>> = raw
        .iter()
        .enumerate()
        .map(|(i, r)| parse_item(r, i, problems))
        .collect();
    let ids = assign_ids(
        &values
            .iter()
            .map(|v| v.as_ref().and_then(provider_id))
            .collect::<Vec<_>>(),
        0,
    );
    (values, ids)
}

/// Parses one raw item, or records why it is not JSON (or holds a repeated key).
pub fn parse_item(raw: &RawItem<'_>, index: usize, problems: &mut Problems) -> Option<Value> {
    match crate::unique_keys::parse_unique(raw.text) {
        Ok((v @ Value::Object(_), repeated)) => match repeated {
            None => Some(v),
            Some(d) => {
                problems
                    .0
                    .push(duplicate_key_problem(index, provider_id(&v), &d));
                None
            }
        },
        Ok((other, _)) => {
            problems.0.push(Diagnostic::new(
                index,
                None,
                None,
                format!("expected a JSON object, found {}", type_name(&other)),
            ));
            None
        }
        Err(e) => {
            problems.0.push(Diagnostic::new(
                index,
                None,
                None,
                format!("malformed JSON: {e}"),
            ));
            None
        }
    }
}

/// Parses tool-call arguments given as JSON text; text that is not JSON is kept as a string.
pub fn parse_arguments(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => v,
        Err(_) => Value::String(text.to_owned()),
    }
}
