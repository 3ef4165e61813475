//! What every front-end shares: [`detect`] tells formats apart by shape (asking the
//! [`crate::formats::REGISTRY`] which format claims an item); [`split_items`] finds each
//! item's exact bytes so that receipts can give them back unchanged. Each format lowers to
//! the Session IR in its own module under [`crate::formats`].

use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::Error;
use crate::formats::key::Format;

pub use crate::formats::openai_chat as openai;
pub use crate::formats::{anthropic, events, records, responses, tracetrim};

pub(crate) mod split;
use split::document_items;
pub use split::{Layout, RawItem, split_items};

/// What [`detect`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detected {
    /// The format.
    pub format: Format,
    /// How its items are laid out.
    pub layout: Layout,
    /// JSONL where every line is a whole conversation record (`{"id", "messages"}`).
    pub records: bool,
}

/// Tells the input format apart by shape.
///
/// ```
/// use ctxgc_core::{Format, frontend::detect};
/// let d = detect(r#"{"events": [{"id": "e1", "type": "decision", "timestamp": 1, "content": "go"}]}"#).unwrap();
/// assert_eq!(d.format, Format::Events);
/// let d = detect(r#"[{"role": "user", "content": "hi"}]"#).unwrap();
/// assert_eq!(d.format, Format::OpenaiChat);
/// ```
pub fn detect(text: &str) -> Result<Detected, Error> {
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return Err(Error::UnknownFormat("the input is empty".into()));
    }
    // An object is read member by member in one pass, which validates it as well; only when
    // that fails is the text parsed again to tell a broken document from a JSONL one.
    if trimmed.starts_with('{')
        && let Ok(map) = serde_json::from_str::<TopLevel<'_>>(trimmed)
    {
        return detect_object(&map);
    }
    match serde_json::from_str::<&RawValue>(trimmed) {
        Ok(raw) => detect_document(raw.get()),
        Err(err) if err.is_syntax() && err.line() > 1 && looks_like_jsonl(trimmed) => {
            detect_lines(trimmed)
        }
        Err(err) => Err(Error::json("input", &err)),
    }
}

fn looks_like_jsonl(text: &str) -> bool {
    text.lines()
        .next()
        .is_some_and(|l| serde_json::from_str::<&RawValue>(l.trim()).is_ok())
}

fn detect_document(doc: &str) -> Result<Detected, Error> {
    // Only the top-level shape and the first item decide the format, so the document is read
    // shallowly: its members stay unparsed slices of the input, and only the first item is
    // parsed into a tree. (Parsing a whole 100k-event trace into a `Value` here, only to read
    // its first element, cost as much as lowering it.)
    let single = |format| {
        Ok(Detected {
            format,
            layout: Layout::Array,
            records: false,
        })
    };
    match doc.as_bytes().first() {
        Some(b'[') => match first_element(doc)? {
            None => single(crate::formats::detect::of_empty_list().format()),
            Some(first) => single(classify_item(&first)?),
        },
        Some(b'{') => {
            let map: TopLevel<'_> =
                serde_json::from_str(doc).map_err(|e| Error::json("input", &e))?;
            detect_object(&map)
        }
        _ => Err(Error::UnknownFormat(
            "the input is a JSON scalar, not a trace or a message list".into(),
        )),
    }
}

/// A JSON object's members, their values left as unparsed slices of the input.
type TopLevel<'a> = std::collections::HashMap<String, &'a RawValue>;

fn detect_object(map: &TopLevel<'_>) -> Result<Detected, Error> {
    let Some((wire, claim)) = crate::formats::detect::claiming_object(map) else {
        return Err(Error::UnknownFormat(
            "a JSON object without an `events`, `messages` or `input` array".into(),
        ));
    };
    let format = match claim.layout {
        Layout::Wrapped(key) if claim.by_first_item => match map.get(key) {
            Some(list) => match first_element(list.get())? {
                Some(first) => classify_item(&first)?,
                None => wire.format(),
            },
            None => wire.format(),
        },
        _ => wire.format(),
    };
    Ok(Detected {
        format,
        layout: claim.layout,
        records: false,
    })
}

/// The first element of the JSON array `array`, parsed. The array has been validated as a
/// whole already, so the rest of it is not read at all.
fn first_element(array: &str) -> Result<Option<Value>, Error> {
    let json_space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r');
    let inner = array
        .trim_start_matches(json_space)
        .strip_prefix('[')
        .ok_or_else(|| Error::UnknownFormat("expected a JSON array".into()))?
        .trim_start_matches(json_space);
    if inner.starts_with(']') {
        return Ok(None);
    }
    serde_json::Deserializer::from_str(inner)
        .into_iter::<Value>()
        .next()
        .transpose()
        .map_err(|e| Error::json("input", &e))
}

fn detect_lines(text: &str) -> Result<Detected, Error> {
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let value: Value = serde_json::from_str(first).map_err(|e| Error::json("line 1", &e))?;
    let lines = |format, records| {
        Ok(Detected {
            format,
            layout: Layout::Lines,
            records,
        })
    };
    let Value::Object(map) = &value else {
        return Err(Error::UnknownFormat("line 1 is not a JSON object".into()));
    };
    // A line that is a whole conversation (`{"id", "messages": [...]}`): a record.
    if let Some((wire, claim)) = crate::formats::detect::claiming_object(map)
        && wire.is_chat()
        && let Layout::Wrapped(key) = claim.layout
        && key == crate::formats::detect::default_chat().items_key()
    {
        let format = match map.get(key).and_then(|m| m.get(0)) {
            Some(first) if claim.by_first_item => classify_item(first)?,
            _ => wire.format(),
        };
        return lines(format, true);
    }
    if let Some(wire) = crate::formats::detect::claiming_line(map) {
        return lines(wire.format(), false);
    }
    lines(classify_item(&value)?, false)
}

/// Which format one item belongs to: the first registered format that claims it.
fn classify_item(item: &Value) -> Result<Format, Error> {
    let Value::Object(map) = item else {
        return Err(Error::UnknownFormat(
            "the first item is not a JSON object".into(),
        ));
    };
    crate::formats::claiming(map)
        .map(|w| w.format())
        .ok_or_else(|| {
            Error::UnknownFormat("items have neither `role` (messages) nor `type` (events)".into())
        })
}

/// [`detect`] followed by [`split_items`], reading a JSON array document once instead of
/// three times (validate, read its first item, split): the array is validated and split in one
/// pass, and only its first item is parsed to tell the format. Other layouts (an object, JSONL)
/// take the two steps as they are. Results and errors are those of the two steps.
///
/// ```
/// use ctxgc_core::{Format, frontend::detect_and_split};
/// let (d, items) = detect_and_split(r#"[{"id": "e1", "type": "decision", "timestamp": 1, "content": "go"}]"#).unwrap();
/// assert_eq!(d.format, Format::Events);
/// assert_eq!(items.len(), 1);
/// ```
pub fn detect_and_split(text: &str) -> Result<(Detected, Vec<RawItem<'_>>), Error> {
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if trimmed.starts_with('[')
        && let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(trimmed)
    {
        let format = match items.first() {
            None => crate::formats::detect::of_empty_list().format(),
            Some(first) => {
                let first: Value =
                    serde_json::from_str(first.get()).map_err(|e| Error::json("input", &e))?;
                classify_item(&first)?
            }
        };
        let detected = Detected {
            format,
            layout: Layout::Array,
            records: false,
        };
        return Ok((detected, document_items(items)));
    }
    // Not an array, or not a valid one: `detect` tells a broken document from JSONL.
    let detected = detect(text)?;
    Ok((detected, split_items(text, detected.layout)?))
}

/// [`detect_and_split`] for a caller that parses every item itself: an array whose first item
/// is an event is split by its structure alone (strings and nesting followed, item contents
/// not validated), a tenth of the cost of validating it. The flag says whether the document
/// was validated; when it was not and an item later fails to parse, the caller reports what
/// [`detect_and_split`] reports for the text, so errors stay those of a validating read.
/// Anything else takes [`detect_and_split`] itself.
///
/// ```
/// use ctxgc_core::{Format, frontend::detect_and_split_unchecked};
/// let text = r#"[{"id": "e1", "type": "decision", "timestamp": 1, "content": "go"}, {"broken": tru}]"#;
/// let (d, items, validated) = detect_and_split_unchecked(text).unwrap();
/// assert_eq!((d.format, items.len(), validated), (Format::Events, 2, false));
/// assert!(ctxgc_core::frontend::detect_and_split(text).is_err());
/// ```
pub fn detect_and_split_unchecked(text: &str) -> Result<(Detected, Vec<RawItem<'_>>, bool), Error> {
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if let Some((format, items)) = split_event_array(trimmed) {
        let detected = Detected {
            format,
            layout: Layout::Array,
            records: false,
        };
        return Ok((detected, items, false));
    }
    detect_and_split(text).map(|(detected, items)| (detected, items, true))
}

/// The error to report when the items of an event array did not all lower: where the array
/// was split without being validated ([`detect_and_split_unchecked`]), a text that is not valid
/// JSON is reported as a broken document, as a validating read reports it before any item is
/// lowered; otherwise the lowering's own error.
pub(crate) fn broken_document_first(text: &str, validated: bool, lowering: Error) -> Error {
    if validated {
        return lowering;
    }
    match detect_and_split(text) {
        Err(document) => document,
        Ok(_) => lowering,
    }
}

/// Nesting deeper than this is left to the validating parser (and its recursion limit).
const STRUCTURAL_DEPTH_LIMIT: usize = 100;

/// The items of `text` (already trimmed) when it is plainly a JSON array `[item, item, ...]`
/// whose first item is an event, found by following strings and brackets only. `None`
/// otherwise, as soon as that is known (a chat array is left after its first item): the caller
/// then validates the text, which says what it is or what is wrong.
fn split_event_array(text: &str) -> Option<(Format, Vec<RawItem<'_>>)> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'[') || bytes.last() != Some(&b']') {
        return None;
    }
    let mut items = Vec::new();
    let mut at = skip_json_space(bytes, 1);
    let mut format = crate::formats::detect::of_empty_list().format();
    if at == bytes.len() - 1 {
        return Some((format, items));
    }
    loop {
        let (item, next) = array_item_at(text, at)?;
        if items.is_empty() {
            let first: Value = serde_json::from_str(item).ok()?;
            format = classify_item(&first).ok()?;
            if format.wire().family() != crate::formats::Family::Events {
                return None;
            }
        }
        items.push(RawItem {
            text: item,
            line: 0,
        });
        match bytes.get(next)? {
            b',' => at = skip_json_space(bytes, next + 1),
            b']' if next == bytes.len() - 1 => return Some((format, items)),
            _ => return None,
        }
    }
}

fn skip_json_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes
        .get(at)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        at += 1;
    }
    at
}

/// The array item of `text` starting at `at` (strings and brackets followed, the contents not
/// validated), and where what follows it starts (past white space).
fn array_item_at(text: &str, start: usize) -> Option<(&str, usize)> {
    let bytes = text.as_bytes();
    let mut at = start;
    let mut depth = 0usize;
    let mut in_string = false;
    while at < bytes.len() {
        if in_string {
            // Most of a trace is inside strings: jump to the next quote or escape.
            at += memchr::memchr2(b'"', b'\\', &bytes[at..])?;
            match bytes[at] {
                b'\\' => at += 1,
                _ => in_string = false,
            }
        } else {
            match bytes[at] {
                b'"' => in_string = true,
                b'{' | b'[' => {
                    depth += 1;
                    if depth > STRUCTURAL_DEPTH_LIMIT {
                        return None;
                    }
                }
                // The array's own bracket: a scalar item ends before it.
                b'}' | b']' if depth == 0 => break,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        // An object or array item ends with its closing bracket.
                        at += 1;
                        break;
                    }
                }
                b',' if depth == 0 => break,
                _ => {}
            }
        }
        at += 1;
    }
    if in_string || at >= bytes.len() {
        return None;
    }
    let item = text
        .get(start..at)?
        .trim_end_matches([' ', '\t', '\n', '\r']);
    (!item.is_empty()).then(|| (item, skip_json_space(bytes, at)))
}

/// One conversation (or trace) of an input: a file may hold many (corpus records, one per line).
#[derive(Debug, Clone)]
pub struct Conversation {
    /// The record's id (`id` field of a corpus record), or `"0"` for a single document.
    pub id: String,
    /// The format its items were lowered from.
    pub format: Format,
    /// The items, in order.
    pub items: Vec<crate::ir::Item>,
    /// The record's exact bytes (a whole line or the whole document).
    pub raw: String,
}

/// Lowers every conversation of an input, whatever its format: a single event trace or
/// message list gives one conversation, corpus JSONL (`{"id", "messages"}` per line) one per line.
pub fn lower_conversations(
    text: &str,
    options: &crate::compile::Options,
) -> Result<Vec<Conversation>, Error> {
    let wire = crate::compile::input_format(text, options)?.wire();
    Ok(wire
        .lower(text, options)?
        .into_iter()
        .map(|lowered| Conversation {
            id: lowered.record.map_or_else(|| "0".to_owned(), |(id, _)| id),
            format: lowered.doc.format,
            items: lowered.doc.items,
            raw: lowered.raw.into_owned(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `detect_and_split` gives what `detect` then `split_items` give, errors included.
    fn two_steps(text: &str) -> Result<(Detected, Vec<(String, usize)>), String> {
        let detected = detect(text).map_err(|e| e.to_string())?;
        let items = split_items(text, detected.layout).map_err(|e| e.to_string())?;
        Ok((
            detected,
            items.iter().map(|r| (r.text.to_owned(), r.line)).collect(),
        ))
    }

    fn one_step(text: &str) -> Result<(Detected, Vec<(String, usize)>), String> {
        let (detected, items) = detect_and_split(text).map_err(|e| e.to_string())?;
        Ok((
            detected,
            items.iter().map(|r| (r.text.to_owned(), r.line)).collect(),
        ))
    }

    #[test]
    fn detect_and_split_equals_detect_then_split_on_every_shape() {
        let event = r#"{"id":"e1","type":"set_var","timestamp":1,"key":"x","value":1}"#;
        let inputs = [
            format!("[{event}, {event}]"),
            format!("\u{feff}\n  [ {event} ]  \n"),
            "[]".to_owned(),
            " [ ] ".to_owned(),
            r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]"#.to_owned(),
            format!("{{\"events\": [{event}]}}"),
            format!("{event}\n{event}\n"),
            "[1, 2]\n[3]\n".to_owned(),
            format!("[{event},\n{{\"id\":\"e2\""),
            format!("[{event}] trailing"),
            "[5]".to_owned(),
            "[{\"neither\": 1}]".to_owned(),
            "".to_owned(),
            "   ".to_owned(),
        ];
        for input in &inputs {
            assert_eq!(one_step(input), two_steps(input), "input {input:?}");
        }
        // The comparison is not vacuous: the shapes above include both results and errors.
        assert!(inputs.iter().any(|i| one_step(i).is_ok()));
        assert!(inputs.iter().any(|i| one_step(i).is_err()));
    }

    #[test]
    fn a_valid_array_splits_by_structure_as_the_validating_read_splits_it() {
        let event = r#"{"id":"e1","type":"set_var","timestamp":1,"key":"x","value":1}"#;
        let tricky = r#"{"id":"e2","type":"set_var","timestamp":2,"key":"a\"]},[{","value":["\\",{"b":[[]]},"}"]}"#;
        let inputs = [
            format!("[{event}]"),
            format!("\u{feff}\n [\n\t{event} ,\r\n {tricky}\n]\n"),
            format!("[{tricky},{tricky},{event}]"),
            "[]".to_owned(),
            " [ \n ] ".to_owned(),
            format!("[{event}, 5, \"x\", [1, [2]], null, true]"),
        ];
        for input in &inputs {
            let (detected, items, validated) = detect_and_split_unchecked(input).unwrap();
            assert!(!validated, "{input:?} takes the structural split");
            assert_eq!(detected.format, Format::Events);
            let texts = |items: &[RawItem<'_>]| -> Vec<String> {
                items.iter().map(|r| r.text.to_owned()).collect()
            };
            let (_, expected) = detect_and_split(input).unwrap();
            assert_eq!(texts(&items), texts(&expected), "{input:?}");
        }
    }

    #[test]
    fn what_the_structural_split_cannot_settle_is_read_with_validation() {
        let event = r#"{"id":"e1","type":"set_var","timestamp":1,"key":"x","value":1}"#;
        let deep = format!(
            "[{{\"id\":\"e\",\"type\":\"set_var\",\"v\":{}1{}}}]",
            "[".repeat(120),
            "]".repeat(120)
        );
        for input in [
            format!("[{event} {event}]"),
            format!("[{event},]"),
            format!("[,{event}]"),
            format!("[{event}]]"),
            format!("[{event}"),
            format!("[{event},\"open]"),
            deep,
        ] {
            assert!(split_event_array(input.trim()).is_none(), "{input:?}");
            let unchecked = detect_and_split_unchecked(&input).map(|(d, items, validated)| {
                assert!(validated);
                (
                    d,
                    items.iter().map(|r| r.text.to_owned()).collect::<Vec<_>>(),
                )
            });
            let checked = detect_and_split(&input)
                .map(|(d, items)| (d, items.iter().map(|r| r.text.to_owned()).collect()));
            assert_eq!(
                unchecked.map_err(|e| e.to_string()),
                checked.map_err(|e| e.to_string())
            );
        }
        // A chat array is always read with validation.
        let chat = r#"[{"role":"user","content":"hi"}]"#;
        assert!(detect_and_split_unchecked(chat).unwrap().2);
    }
}
