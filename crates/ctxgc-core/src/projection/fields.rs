//! Tool outputs as trees of fields, and the field paths that name them across calls.
//!
//! A JSON output becomes a [`Node`] tree. Every node has a *generalised path* that is the
//! same for the same field in every call of a tool: list items are `[]` (`flights[].price`),
//! entries of an object keyed by data (ids, dates) are `{}` (`payment_methods{}.brand`), and a
//! string field that holds a JSON (or Python-literal) document is descended into through
//! `<json>` (`response<json>.results[].title`). Output that is not a JSON object or array is
//! one opaque field, [`OPAQUE_FIELD`].
//!
//! Every node also has a *concrete path* naming exactly one place in one output
//! (`flights[1].price`, `payment_methods.credit_card_7.brand`), which is what `expand`
//! returns values under.
//!
//! ```
//! use ctxgc_core::projection::fields::{parse_output, leaves};
//! let out = parse_output(r#"{"flights": [{"number": "HAT1", "price": 120}, {"number": "HAT2", "price": 99}]}"#);
//! let paths: Vec<String> = leaves(&out).into_iter().map(|l| l.path).collect();
//! assert_eq!(paths, ["flights[].number", "flights[].price", "flights[].number", "flights[].price"]);
//! ```

use serde_json::Value;

/// The field name of an output that is not a JSON object or array.
pub const OPAQUE_FIELD: &str = "(text)";

/// How a string field's embedded document was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocSyntax {
    /// JSON text.
    Json,
    /// A Python literal (`{'a': None}`), as Python tools often print.
    Python,
}

/// One node of a parsed output.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// An object, keys in their original order.
    Object(Vec<(String, Node)>),
    /// A list.
    Array(Vec<Node>),
    /// A string holding a whole document, parsed.
    Embedded {
        /// The parsed document.
        doc: Box<Node>,
        /// How it was written.
        syntax: DocSyntax,
    },
    /// A string, number, boolean or null.
    Scalar(Value),
}

/// A parsed tool output.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A JSON object or array.
    Structured(Node),
    /// Anything else, kept as one opaque field.
    Opaque(String),
}

/// Parses a tool output's text.
pub fn parse_output(text: &str) -> Output {
    let trimmed = text.trim();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
            return Output::Structured(node_of(value, 0));
        }
    } else if trimmed.starts_with('"')
        // A JSON string holding a document (double-encoded output).
        && let Ok(Value::String(inner)) = serde_json::from_str::<Value>(trimmed)
        && let Some(node) = embedded_doc(&inner, 0)
    {
        return Output::Structured(node);
    }
    Output::Opaque(text.to_owned())
}

/// Embedded documents are followed this deep at most (a document in a string in a string...).
const MAX_EMBEDDING: usize = 3;

fn node_of(value: Value, depth: usize) -> Node {
    match value {
        Value::Object(map) => Node::Object(
            map.into_iter()
                .map(|(k, v)| (k, node_of(v, depth)))
                .collect(),
        ),
        Value::Array(items) => Node::Array(items.into_iter().map(|v| node_of(v, depth)).collect()),
        Value::String(s) => embedded_doc(&s, depth).unwrap_or(Node::Scalar(Value::String(s))),
        other => Node::Scalar(other),
    }
}

fn embedded_doc(s: &str, depth: usize) -> Option<Node> {
    if depth >= MAX_EMBEDDING {
        return None;
    }
    let t = s.trim();
    let shaped =
        (t.starts_with('{') && t.ends_with('}')) || (t.starts_with('[') && t.ends_with(']'));
    if !shaped || t.len() < 2 {
        return None;
    }
    let (value, syntax) = match serde_json::from_str::<Value>(t) {
        Ok(v) => (v, DocSyntax::Json),
        Err(_) => (super::pylit::parse(t)?, DocSyntax::Python),
    };
    if !(value.is_object() || value.is_array()) {
        return None;
    }
    Some(Node::Embedded {
        doc: Box::new(node_of(value, depth + 1)),
        syntax,
    })
}

/// True when an object's keys are data (ids, dates) rather than field names: every value is
/// an object or a list, and every key holds a digit or repeats a value of its own entry.
pub fn is_keyed_by_data(entries: &[(String, Node)]) -> bool {
    !entries.is_empty()
        && entries.iter().all(|(key, value)| {
            matches!(value, Node::Object(_) | Node::Array(_))
                && (key.chars().any(|c| c.is_ascii_digit()) || entry_repeats_key(key, value))
        })
}

fn entry_repeats_key(key: &str, value: &Node) -> bool {
    match value {
        Node::Object(fields) => fields
            .iter()
            .any(|(_, v)| matches!(v, Node::Scalar(Value::String(s)) if s == key)),
        _ => false,
    }
}

/// One path segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment<'a> {
    /// An object field.
    Key(&'a str),
    /// An entry of an object keyed by data (`{}`), with its key.
    Entry(&'a str),
    /// A list item (`[]`), with its index.
    Item(usize),
    /// Into an embedded document (`<json>`).
    Doc,
}

impl<'a> Segment<'a> {
    /// The segment of an object's field `key`: an entry when the object is keyed by data.
    pub(crate) fn field(key: &'a str, keyed_by_data: bool) -> Self {
        if keyed_by_data {
            Segment::Entry(key)
        } else {
            Segment::Key(key)
        }
    }
}

/// Appends a key segment to a path, quoting keys that would make the path ambiguous.
pub fn push_key(path: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| !matches!(c, '.' | '[' | ']' | '{' | '}' | '<' | '>' | '"' | '(' | ')'));
    if plain {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    } else {
        path.push('[');
        path.push_str(&Value::String(key.to_owned()).to_string());
        path.push(']');
    }
}

/// Appends a segment to a generalised path.
pub fn push_general(path: &mut String, segment: &Segment<'_>) {
    match segment {
        Segment::Key(k) => push_key(path, k),
        Segment::Entry(_) => path.push_str("{}"),
        Segment::Item(_) => path.push_str("[]"),
        Segment::Doc => path.push_str("<json>"),
    }
}

/// Appends a segment to a concrete path.
pub fn push_concrete(path: &mut String, segment: &Segment<'_>) {
    match segment {
        Segment::Key(k) | Segment::Entry(k) => push_key(path, k),
        Segment::Item(i) => {
            path.push('[');
            path.push_str(&i.to_string());
            path.push(']');
        }
        Segment::Doc => path.push_str("<json>"),
    }
}

/// The last key named in a generalised path (`flights[].price` → `price`), if any.
pub fn last_key(path: &str) -> Option<&str> {
    let mut trimmed = path;
    while let Some(rest) = trimmed
        .strip_suffix("[]")
        .or_else(|| trimmed.strip_suffix("{}"))
        .or_else(|| trimmed.strip_suffix("<json>"))
    {
        trimmed = rest;
    }
    if trimmed.ends_with("\"]") {
        // A quoted key: take the JSON string inside the last `["..."]`.
        let start = trimmed.rfind("[\"")?;
        return Some(&trimmed[start + 2..trimmed.len() - 2]);
    }
    let start = trimmed
        .rfind(['.', ']', '}', '>'])
        .map(|i| i + 1)
        .unwrap_or(0);
    let key = &trimmed[start..];
    (!key.is_empty()).then_some(key)
}

/// True when `path` is `ancestor` or lies under it.
pub fn is_under(path: &str, ancestor: &str) -> bool {
    if ancestor.is_empty() {
        return true;
    }
    match path.strip_prefix(ancestor) {
        Some("") => true,
        Some(rest) => rest.starts_with(['.', '[', '{', '<']),
        None => false,
    }
}

/// A leaf of an output: a scalar, or an empty object or list.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf<'a> {
    /// Generalised path.
    pub path: String,
    /// Concrete path.
    pub concrete: String,
    /// The scalar value; `None` for an empty object or list.
    pub value: Option<&'a Value>,
    /// The node itself.
    pub node: &'a Node,
    /// The object key this leaf sits under, if any.
    pub key: Option<&'a str>,
}

/// Every leaf of a structured output, in document order (an opaque output has none: it is
/// the one field [`OPAQUE_FIELD`]).
pub fn leaves(output: &Output) -> Vec<Leaf<'_>> {
    let mut out = Vec::new();
    if let Output::Structured(node) = output {
        walk(
            node,
            &mut String::new(),
            &mut String::new(),
            None,
            &mut |leaf| {
                // An empty `[]` or `{}` output has no field at all.
                if !leaf.path.is_empty() {
                    out.push(leaf)
                }
            },
        );
    }
    out
}

/// A list whose items are scalars, as found at a generalised path (for "a list joined into
/// text").
#[derive(Debug, Clone)]
pub struct ScalarList<'a> {
    /// Generalised path of the items (`tags[]`).
    pub path: String,
    /// The items.
    pub items: Vec<&'a Value>,
}

/// Every list of two or more scalars in an output.
pub fn scalar_lists(output: &Output) -> Vec<ScalarList<'_>> {
    fn go<'a>(node: &'a Node, path: &mut String, out: &mut Vec<ScalarList<'a>>) {
        match node {
            Node::Object(fields) => {
                let keyed = is_keyed_by_data(fields);
                for (k, v) in fields {
                    let len = path.len();
                    if keyed {
                        push_general(path, &Segment::Entry(k));
                    } else {
                        push_key(path, k);
                    }
                    go(v, path, out);
                    path.truncate(len);
                }
            }
            Node::Array(items) => {
                let len = path.len();
                path.push_str("[]");
                let scalars: Vec<&Value> = items
                    .iter()
                    .filter_map(|i| match i {
                        Node::Scalar(v) if !v.is_null() => Some(v),
                        _ => None,
                    })
                    .collect();
                if scalars.len() >= 2 && scalars.len() == items.len() {
                    out.push(ScalarList {
                        path: path.clone(),
                        items: scalars,
                    });
                }
                for item in items {
                    go(item, path, out);
                }
                path.truncate(len);
            }
            Node::Embedded { doc, .. } => {
                let len = path.len();
                path.push_str("<json>");
                go(doc, path, out);
                path.truncate(len);
            }
            Node::Scalar(_) => {}
        }
    }
    let mut out = Vec::new();
    if let Output::Structured(node) = output {
        go(node, &mut String::new(), &mut out);
    }
    out
}

/// Runs `f` with `segment` appended to both paths, then takes it off again.
fn descend(
    general: &mut String,
    concrete: &mut String,
    segment: &Segment<'_>,
    f: impl FnOnce(&mut String, &mut String),
) {
    let (gl, cl) = (general.len(), concrete.len());
    push_general(general, segment);
    push_concrete(concrete, segment);
    f(general, concrete);
    general.truncate(gl);
    concrete.truncate(cl);
}

fn walk<'a>(
    node: &'a Node,
    general: &mut String,
    concrete: &mut String,
    key: Option<&'a str>,
    emit: &mut dyn FnMut(Leaf<'a>),
) {
    match node {
        Node::Object(fields) if !fields.is_empty() => {
            let keyed = is_keyed_by_data(fields);
            for (k, v) in fields {
                descend(general, concrete, &Segment::field(k, keyed), |g, c| {
                    walk(v, g, c, Some(k), emit)
                });
            }
        }
        Node::Array(items) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                descend(general, concrete, &Segment::Item(i), |g, c| {
                    walk(item, g, c, key, emit)
                });
            }
        }
        Node::Embedded { doc, .. } => {
            descend(general, concrete, &Segment::Doc, |g, c| {
                walk(doc, g, c, key, emit)
            });
        }
        Node::Scalar(v) => emit(Leaf {
            path: general.clone(),
            concrete: concrete.clone(),
            value: Some(v),
            node,
            key,
        }),
        // Empty object or list: a leaf without values.
        _ => emit(Leaf {
            path: general.clone(),
            concrete: concrete.clone(),
            value: None,
            node,
            key,
        }),
    }
}

/// Writes a node as compact JSON (embedded documents back into their string, as JSON).
pub fn write_compact(node: &Node, out: &mut String) {
    match node {
        Node::Object(fields) => crate::ir::write_joined(out, '{', '}', fields, |(k, v), out| {
            out.push_str(&Value::String(k.clone()).to_string());
            out.push(':');
            write_compact(v, out);
        }),
        Node::Array(items) => crate::ir::write_joined(out, '[', ']', items, write_compact),
        Node::Embedded { doc, .. } => {
            let mut inner = String::new();
            write_compact(doc, &mut inner);
            out.push_str(&Value::String(inner).to_string());
        }
        Node::Scalar(v) => out.push_str(&v.to_string()),
    }
}

/// A node as compact JSON text.
pub fn compact(node: &Node) -> String {
    let mut out = String::new();
    write_compact(node, &mut out);
    out
}

/// A node as a JSON value (embedded documents as parsed values, for `expand`).
pub fn to_value(node: &Node) -> Value {
    match node {
        Node::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), to_value(v)))
                .collect(),
        ),
        Node::Array(items) => Value::Array(items.iter().map(to_value).collect()),
        Node::Embedded { doc, .. } => to_value(doc),
        Node::Scalar(v) => v.clone(),
    }
}

/// Calls `visit(general, concrete, node)` for every node of a tree, parents before children.
pub fn visit_nodes<'a>(node: &'a Node, visit: &mut dyn FnMut(&str, &str, &'a Node)) {
    fn go<'a>(
        node: &'a Node,
        general: &mut String,
        concrete: &mut String,
        visit: &mut dyn FnMut(&str, &str, &'a Node),
    ) {
        visit(general, concrete, node);
        match node {
            Node::Object(fields) => {
                let keyed = is_keyed_by_data(fields);
                for (k, v) in fields {
                    descend(general, concrete, &Segment::field(k, keyed), |g, c| {
                        go(v, g, c, visit)
                    });
                }
            }
            Node::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    descend(general, concrete, &Segment::Item(i), |g, c| {
                        go(item, g, c, visit)
                    });
                }
            }
            Node::Embedded { doc, .. } => {
                descend(general, concrete, &Segment::Doc, |g, c| {
                    go(doc, g, c, visit)
                });
            }
            Node::Scalar(_) => {}
        }
    }
    go(node, &mut String::new(), &mut String::new(), visit);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(text: &str) -> Vec<String> {
        leaves(&parse_output(text))
            .into_iter()
            .map(|l| l.path)
            .collect()
    }

    #[test]
    fn lists_generalise_and_maps_keyed_by_ids_too() {
        assert_eq!(paths(r#"[[{"a": 1}], [{"a": 2}]]"#), ["[][].a", "[][].a"]);
        assert_eq!(
            paths(r#"{"pm": {"card_1": {"id": "card_1", "brand": "visa"}}, "seats": {"eco": 3}}"#),
            ["pm{}.id", "pm{}.brand", "seats.eco"]
        );
    }

    #[test]
    fn embedded_documents_are_descended_into() {
        assert_eq!(
            paths(r#"{"error": "", "response": "{\"items\": [{\"id\": 1}]}"}"#),
            ["error", "response<json>.items[].id"]
        );
        assert_eq!(
            paths(r#"{"response": "{'ok': True, 'n': None}"}"#),
            ["response<json>.ok", "response<json>.n"]
        );
    }

    #[test]
    fn awkward_keys_are_quoted_and_paths_compare_by_ancestry() {
        assert_eq!(paths(r#"{"a.b": {"c": 1}}"#), [r#"["a.b"].c"#]);
        assert!(is_under("flights[].price", "flights"));
        assert!(is_under("flights[].price", "flights[]"));
        assert!(!is_under("flightsx", "flights"));
        assert_eq!(last_key("flights[].price"), Some("price"));
        assert_eq!(last_key("reservations[]"), Some("reservations"));
        assert_eq!(last_key(r#"x["a.b"]"#), Some("a.b"));
    }

    #[test]
    fn non_json_is_one_opaque_field() {
        assert!(matches!(parse_output("255.0"), Output::Opaque(_)));
        assert!(matches!(parse_output("Error: no"), Output::Opaque(_)));
        assert!(leaves(&parse_output("plain")).is_empty());
    }

    #[test]
    fn compact_rewrites_embedded_documents_as_json() {
        let Output::Structured(node) = parse_output(r#"{"r": "{'a': 1}", "b": [1, 2]}"#) else {
            panic!("structured")
        };
        assert_eq!(compact(&node), r#"{"r":"{\"a\":1}","b":[1,2]}"#);
    }
}
