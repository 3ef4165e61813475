//! Trimming results that carry structured content, as servers built with the official SDKs
//! send them: every annotated tool declares an output schema, and every result repeats its
//! output in `structuredContent`, which clients validate against that schema. The text
//! block is trimmed as any output; the structured copy then follows one of these paths:
//!
//! - **inside a string field**: a tool returning text (`-> str` gets `{"result": string}`)
//!   repeats the text block in a string field: the field gets the trimmed text too, which
//!   the schema (a string) still allows;
//! - **trimmed object**: the text block is the structured object written as JSON: the
//!   structured copy becomes the trimmed JSON body. The output schema published for a tool
//!   the proxy may trim has no `required` lists ([`relax_schema`]), so a result without its
//!   hidden fields validates; it is published so from the first listing and never changes,
//!   so no client holds a stricter copy;
//! - **dropped**: without an output schema the structured copy is dropped (the hidden fields
//!   must not reach the agent by it);
//! - **kept whole**: with a schema, when neither of the first two applies, the result goes
//!   through untrimmed (a structured copy that breaks its schema would fail the call).

use serde_json::{Map, Value};

/// What was done with the structured copy of a trimmed result (the per-call line says it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StructuredPath {
    /// The string fields named were given the trimmed text.
    InsideString(Vec<String>),
    /// The structured object was replaced by the trimmed JSON body.
    TrimmedObject,
    /// The structured copy was dropped (the tool declares no output schema).
    Dropped,
    /// Nothing could be trimmed without breaking the schema: the result goes whole.
    KeptWhole(&'static str),
    /// The text changed without hiding anything (compacted): the structured copy stays.
    Unchanged,
}

impl StructuredPath {
    /// The note of the per-call line.
    pub fn note(&self) -> String {
        match self {
            StructuredPath::InsideString(fields) => format!(
                "structured output: trimmed inside the string field {}",
                fields
                    .iter()
                    .map(|f| format!("\"{f}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            StructuredPath::TrimmedObject => {
                "structured output: trimmed like the text, hidden fields optional in the published schema".into()
            }
            StructuredPath::Dropped => {
                "structured output dropped (no output schema), text trimmed".into()
            }
            StructuredPath::KeptWhole(why) => {
                format!("structured output with a schema, not trimmed: {why}")
            }
            StructuredPath::Unchanged => "structured output kept, text compacted".into(),
        }
    }
}

/// Removes every `required` list from a JSON schema (nested objects and `$defs` included):
/// any object the tool returns still validates after fields were hidden from it.
///
/// ```
/// use ctxgc_proxy::structured::relax_schema;
/// let mut schema = serde_json::json!({"type": "object", "required": ["a"],
///     "properties": {"a": {"type": "object", "required": ["b"]}, "required": {"type": "string"}},
///     "$defs": {"L": {"required": ["x"]}}});
/// relax_schema(&mut schema);
/// assert_eq!(schema, serde_json::json!({"type": "object",
///     "properties": {"a": {"type": "object"}, "required": {"type": "string"}},
///     "$defs": {"L": {}}}));
/// ```
pub fn relax_schema(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("required").is_some_and(Value::is_array) {
                map.remove("required");
            }
            map.values_mut().for_each(relax_schema);
        }
        Value::Array(items) => items.iter_mut().for_each(relax_schema),
        _ => {}
    }
}

/// The JSON body of a trimmed output (the text before its `[hidden: ...]` footer).
fn body_of(trimmed: &str) -> &str {
    match trimmed.rfind("\n[hidden: ") {
        Some(at) => &trimmed[..at],
        None => trimmed,
    }
}

/// Brings `structured` in line with text blocks that were shaped (`blocks`: original and
/// shaped text of each changed block). `fields_hidden`: whether anything was hidden;
/// `relaxed`: the published schema has no `required` lists; `has_schema`: the tool declares
/// an output schema. Returns the path taken; with [`StructuredPath::KeptWhole`] the caller
/// must send the original text blocks.
pub fn reconcile(
    structured: &mut Option<Value>,
    blocks: &[(String, String)],
    fields_hidden: bool,
    has_schema: bool,
    relaxed: bool,
) -> StructuredPath {
    let Some(value) = structured.as_mut() else {
        return StructuredPath::Unchanged;
    };
    // A string field repeating a text block.
    if let Value::Object(map) = value {
        let fields = replace_strings(map, blocks);
        if !fields.is_empty() {
            return StructuredPath::InsideString(fields);
        }
    }
    if !fields_hidden {
        return StructuredPath::Unchanged;
    }
    // The text block is the object, written as JSON.
    let mirrored = blocks.iter().find(|(original, _)| {
        serde_json::from_str::<Value>(original).is_ok_and(|parsed| &parsed == value)
    });
    if let Some((_, shaped)) = mirrored {
        match serde_json::from_str::<Value>(body_of(shaped)) {
            Ok(trimmed @ Value::Object(_)) if relaxed || !has_schema => {
                *structured = Some(trimmed);
                return StructuredPath::TrimmedObject;
            }
            Ok(_) if has_schema => {
                return StructuredPath::KeptWhole("the trimmed text is not an object");
            }
            Err(_) if has_schema => {
                return StructuredPath::KeptWhole("the trimmed text is not JSON");
            }
            _ => {}
        }
    }
    if has_schema {
        return StructuredPath::KeptWhole("the structured content is not the text block");
    }
    *structured = None;
    StructuredPath::Dropped
}

fn replace_strings(map: &mut Map<String, Value>, blocks: &[(String, String)]) -> Vec<String> {
    let mut fields = Vec::new();
    for (key, field) in map.iter_mut() {
        let Value::String(text) = field else {
            continue;
        };
        if let Some((_, shaped)) = blocks.iter().find(|(original, _)| original == text) {
            *text = shaped.clone();
            fields.push(key.clone());
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_path() {
        let original = r#"{"a": 1, "b": "long"}"#.to_owned();
        let shaped = "{\"a\":1}\n[hidden: b — expand ref \"abcdefghij\"]".to_owned();
        let blocks = vec![(original.clone(), shaped.clone())];

        let mut s = Some(json!({"result": original}));
        assert_eq!(
            reconcile(&mut s, &blocks, true, true, false),
            StructuredPath::InsideString(vec!["result".into()])
        );
        assert_eq!(s, Some(json!({"result": shaped})));

        let mut s = Some(json!({"a": 1, "b": "long"}));
        assert_eq!(
            reconcile(&mut s, &blocks, true, true, true),
            StructuredPath::TrimmedObject
        );
        assert_eq!(s, Some(json!({"a": 1})));

        let mut s = Some(json!({"a": 1, "b": "long"}));
        assert!(matches!(
            reconcile(&mut s, &blocks, true, true, false),
            StructuredPath::KeptWhole(_)
        ));

        let mut s = Some(json!({"other": true}));
        assert_eq!(
            reconcile(&mut s, &blocks, true, false, false),
            StructuredPath::Dropped
        );
        assert_eq!(s, None);

        let mut s = Some(json!({"other": true}));
        assert!(matches!(
            reconcile(&mut s, &blocks, true, true, true),
            StructuredPath::KeptWhole(_)
        ));
    }
}
