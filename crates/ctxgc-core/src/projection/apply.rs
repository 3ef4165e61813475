//! Applying a projection to a tool output, and the way back (`expand`).
//!
//! A JSON output is re-serialised compactly with the dropped fields removed, and one footer
//! line says what was hidden and how to get it back:
//!
//! ```text
//! {"reservation_id":"ZFA04Y","flights":[{"flight_number":"HAT036","price":151}]}
//! [hidden: created_at, flights[].origin — expand ref "kqzvmtrwxa"]
//! ```
//!
//! The original goes into a [`ReceiptStore`] under the reference, so [`expand`] gives back
//! exactly what was there: the whole original text for `"*"`, or each requested field's
//! values under their concrete paths. Nothing is hidden when that would not save at least
//! [`LearnOptions::min_saving_tokens`](super::learn::LearnOptions) tokens (footer
//! included), nor from an error output, which the agent needs whole. Trimming is
//! deterministic: the same projection and output give the same text and the same reference.
//!
//! ```
//! use ctxgc_core::projection::{Projection, apply::{expand, MemoryReceipts, ReceiptStore}};
//! use serde_json::json;
//! let p = Projection::from_json(r#"{"ctxgc_projection": 1, "rules": {"min_saving_tokens": 0},
//!     "tools": {"get": {"drop": [{"field": "notes"}]}}}"#).unwrap();
//! let raw = r#"{"id": "A1", "notes": "a long note that nobody reads again, about how the parcel was wrapped, weighed and labelled twice"}"#;
//! let trimmed = p.apply("get", raw);
//! assert!(trimmed.text.starts_with(r#"{"id":"A1"}"#));
//! let mut store = MemoryReceipts::default();
//! let reference = trimmed.receipt.clone().unwrap().reference;
//! store.put(trimmed.receipt.unwrap()).unwrap();
//! let back = expand(&store, &json!({"ref": reference, "fields": ["notes"]})).unwrap();
//! assert_eq!(back, r#"{"notes":"a long note that nobody reads again, about how the parcel was wrapped, weighed and labelled twice"}"#);
//! assert_eq!(expand(&store, &json!({"ref": reference, "fields": ["*"]})).unwrap(), raw);
//! ```

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::counts::{compact_output, is_failure};
use super::fields::{self, Node, OPAQUE_FIELD, Output, Segment, is_keyed_by_data, push_general};
use super::learn::Projection;

/// The name of the tool that gives hidden fields back.
pub const EXPAND_TOOL: &str = "expand";

/// Footers list at most this many hidden fields; the rest are counted.
const MAX_LISTED: usize = 25;

/// What was done to an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Fields were hidden (see [`Trimmed::hidden`]).
    Trimmed,
    /// Re-serialised compactly; nothing hidden.
    Compacted,
    /// Given as it came.
    AsIs,
}

/// Why nothing was hidden.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Untrimmed {
    /// The projection has no entry for the tool.
    UnknownTool,
    /// The projection says `"trim": false` for the tool.
    TrimOff,
    /// The output is an error, which the agent needs whole.
    Failure,
    /// None of the output's fields is dropped.
    NothingDropped,
    /// Hiding would save fewer tokens than the rule asks (footer included).
    NotWorthIt,
}

/// The receipt of one trimmed output: its original, by reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrimReceipt {
    /// The reference the footer gives (see [`reference_of`]).
    pub reference: String,
    /// The tool that produced the output.
    pub tool: String,
    /// The output exactly as the tool returned it.
    pub original: String,
    /// The field groups that were hidden.
    pub hidden: Vec<String>,
}

/// An output after [`Projection::apply`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trimmed {
    /// What the agent receives.
    pub text: String,
    /// What was done.
    pub outcome: Outcome,
    /// Why nothing was hidden, when nothing was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untrimmed: Option<Untrimmed>,
    /// Hidden fields, grouped (a list or object all of whose fields went is named once).
    pub hidden: Vec<String>,
    /// Number of values hidden.
    pub hidden_values: usize,
    /// Generalised paths of every leaf field whose values left the text (a field hidden as
    /// an echo is not one: its values are still shown by another).
    pub removed: BTreeSet<String>,
    /// The original, to put in the receipt store (only when something was hidden).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<TrimReceipt>,
}

/// Letters in a reference: 10 lowercase letters carry 47 bits and cost few tokens.
const REFERENCE_LETTERS: usize = 10;

/// The reference of an output: content-addressed (blake3 of the tool and the output, written
/// in lowercase letters), so the same output gets the same one.
pub fn reference_of(tool: &str, original: &str) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(tool.as_bytes());
    hasher.update(&[0]);
    hasher.update(original.as_bytes());
    let hash = hasher.finalize();
    let mut n = u64::from_le_bytes(hash.as_bytes()[..8].try_into().unwrap_or([0; 8]));
    let mut out = String::with_capacity(REFERENCE_LETTERS);
    for _ in 0..REFERENCE_LETTERS {
        out.push(char::from(b'a' + (n % 26) as u8));
        n /= 26;
    }
    out
}

/// Hidden fields with one parent are listed once under it: `address.{zip,city}`.
fn grouped(hidden: &[String]) -> Vec<String> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for path in hidden {
        let (parent, key) = match fields::last_key(path) {
            // Only plain `parent.key` paths are grouped; lists, maps and quoted keys stay whole.
            Some(key)
                if path.ends_with(key)
                    && path.len() > key.len() + 1
                    && path[..path.len() - key.len()].ends_with('.') =>
            {
                (
                    path[..path.len() - key.len() - 1].to_owned(),
                    key.to_owned(),
                )
            }
            _ => (String::new(), path.clone()),
        };
        match out.iter_mut().find(|(p, _)| !p.is_empty() && *p == parent) {
            Some((_, keys)) => keys.push(key),
            None => out.push((parent, vec![key])),
        }
    }
    out.into_iter()
        .map(|(parent, keys)| match keys.len() {
            _ if parent.is_empty() => keys.join(", "),
            1 => format!("{parent}.{}", keys[0]),
            _ => format!("{parent}.{{{}}}", keys.join(",")),
        })
        .collect()
}

/// The footer line for hidden fields: what went, and the reference to ask for it by.
///
/// ```
/// use ctxgc_core::projection::apply::footer;
/// assert_eq!(footer("qmvtkrzoab", &["insurance".into(), "address.zip".into(), "address.city".into()]),
///            r#"[hidden: insurance, address.{zip,city} — expand ref "qmvtkrzoab"]"#);
/// ```
pub fn footer(reference: &str, hidden: &[String]) -> String {
    format!(
        "[hidden: {} — expand ref \"{reference}\"]",
        hidden_list(hidden)
    )
}

/// What a footer says was hidden: grouped fields (at most 25 named, the rest counted), or
/// `the whole output`.
///
/// ```
/// use ctxgc_core::projection::apply::hidden_list;
/// assert_eq!(hidden_list(&["address.zip".into(), "address.city".into()]), "address.{zip,city}");
/// ```
pub fn hidden_list(hidden: &[String]) -> String {
    if hidden.len() == 1 && hidden[0] == OPAQUE_FIELD {
        return "the whole output".to_owned();
    }
    let groups = grouped(hidden);
    let mut listed: Vec<&str> = groups.iter().take(MAX_LISTED).map(String::as_str).collect();
    let more = groups.len().saturating_sub(MAX_LISTED);
    let more_text = format!("{more} more");
    if more > 0 {
        listed.push(&more_text);
    }
    listed.join(", ")
}

/// `address.{zip,city}` → `address.zip`, `address.city` (the footer's grouped form).
fn expand_braces(field: &str) -> Vec<String> {
    if let Some(open) = field.rfind(".{")
        && field.ends_with('}')
        && field.len() > open + 3
    {
        let parent = &field[..open];
        return field[open + 2..field.len() - 1]
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(|k| format!("{parent}.{k}"))
            .collect();
    }
    vec![field.to_owned()]
}

struct Removal<'a> {
    drop: &'a BTreeMap<&'a str, bool>,
    groups: Vec<String>,
    values: usize,
    removed: BTreeSet<String>,
}

impl Removal<'_> {
    fn record_removed(&mut self, node: &Node, general: &str) {
        self.groups.push(general.to_owned());
        let mut stack = vec![(node, general.to_owned())];
        // Count every leaf below, with its generalised path.
        while let Some((n, path)) = stack.pop() {
            match n {
                Node::Object(fields) if !fields.is_empty() => {
                    let keyed = is_keyed_by_data(fields);
                    for (k, v) in fields {
                        let mut p = path.clone();
                        push_general(&mut p, &Segment::field(k, keyed));
                        stack.push((v, p));
                    }
                }
                Node::Array(items) if !items.is_empty() => {
                    for v in items {
                        let mut p = path.clone();
                        push_general(&mut p, &Segment::Item(0));
                        stack.push((v, p));
                    }
                }
                Node::Embedded { doc, .. } => {
                    let mut p = path.clone();
                    push_general(&mut p, &Segment::Doc);
                    stack.push((doc, p));
                }
                _ => {
                    self.values += 1;
                    self.removed.insert(path);
                }
            }
        }
    }

    /// True when the node at `path` goes.
    fn drops(&self, path: &str, node: &Node) -> bool {
        match self.drop.get(path) {
            None => false,
            Some(false) => true,
            Some(true) => match node {
                Node::Object(f) => f.is_empty(),
                Node::Array(i) => i.is_empty(),
                Node::Embedded { .. } => false,
                Node::Scalar(_) => true,
            },
        }
    }

    /// Replaces the groups recorded under `path` by `path` itself (everything under it went).
    fn collapse(&mut self, path: &str) {
        self.groups.retain(|g| !fields::is_under(g, path));
        self.groups.push(path.to_owned());
    }

    /// The node without dropped fields; `None` when nothing of it is left.
    fn trim(&mut self, node: &Node, general: &mut String) -> Option<Node> {
        match node {
            Node::Object(entries) if !entries.is_empty() => {
                let keyed = is_keyed_by_data(entries);
                let mut kept = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    let len = general.len();
                    push_general(general, &Segment::field(k, keyed));
                    if self.drops(general, v) {
                        let path = general.clone();
                        self.record_removed(v, &path);
                    } else {
                        match self.trim(v, general) {
                            Some(n) => kept.push((k.clone(), n)),
                            None if keyed => {
                                // Keys of records stay, so the agent can still name them.
                                let empty = match v {
                                    Node::Array(_) => Node::Array(Vec::new()),
                                    _ => Node::Object(Vec::new()),
                                };
                                kept.push((k.clone(), empty));
                            }
                            None => {
                                let path = general.clone();
                                self.collapse(&path);
                            }
                        }
                    }
                    general.truncate(len);
                }
                (!kept.is_empty()).then_some(Node::Object(kept))
            }
            Node::Array(items) if !items.is_empty() => {
                let len = general.len();
                push_general(general, &Segment::Item(0));
                let result = if items.iter().all(|i| self.drops(general, i)) {
                    let path = general.clone();
                    for item in items {
                        self.record_removed(item, &path);
                    }
                    self.groups.dedup();
                    None
                } else {
                    let trimmed: Vec<Option<Node>> =
                        items.iter().map(|i| self.trim(i, general)).collect();
                    if trimmed.iter().all(Option::is_none) {
                        let path = general.clone();
                        self.collapse(&path);
                        None
                    } else {
                        // Items keep their places: an emptied one stays as an empty value.
                        Some(Node::Array(
                            trimmed
                                .into_iter()
                                .zip(items)
                                .map(|(t, orig)| {
                                    t.unwrap_or_else(|| match orig {
                                        Node::Array(_) => Node::Array(Vec::new()),
                                        _ => Node::Object(Vec::new()),
                                    })
                                })
                                .collect(),
                        ))
                    }
                };
                general.truncate(len);
                result
            }
            Node::Embedded { doc, syntax } => {
                let len = general.len();
                push_general(general, &Segment::Doc);
                let result = self.trim(doc, general).map(|d| Node::Embedded {
                    doc: Box::new(d),
                    syntax: *syntax,
                });
                if result.is_none() {
                    let path = general.clone();
                    self.collapse(&path);
                }
                general.truncate(len);
                result
            }
            other => Some(other.clone()),
        }
    }
}

fn dedup_in_order(groups: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    groups
        .into_iter()
        .filter(|g| seen.insert(g.clone()))
        .collect()
}

impl Projection {
    /// The lossless encoding of a compact JSON text: itself, or, when
    /// [`LearnOptions::tables`](super::learn::LearnOptions) is on, the `compact-json` pass's
    /// re-encoding (plain notation, lists of records as header + rows) when that is smaller.
    fn lossless(&self, compact: String, parsed: &Output) -> String {
        if !self.rules.tables || !matches!(parsed, Output::Structured(_)) {
            return compact;
        }
        match crate::chat::compact::compact_json(&compact, self.tokenizer) {
            Some(c) => c.text,
            None => compact,
        }
    }

    /// Applies the projection to one output of `tool`.
    pub fn apply(&self, tool: &str, output: &str) -> Trimmed {
        self.apply_flagged(tool, output, false)
    }

    /// As [`Projection::apply`], for an output the provider flagged as an error (or not).
    pub fn apply_flagged(&self, tool: &str, output: &str, is_error: bool) -> Trimmed {
        self.apply_with_footer(tool, output, is_error, &footer)
    }

    /// As [`Projection::apply_flagged`], with the footer line written by `footer_of(reference,
    /// hidden)`: a compiler pass names its own way back (or none) instead of an `expand`
    /// reference. Whether hiding is worth it is judged with that footer.
    ///
    /// ```
    /// use ctxgc_core::projection::Projection;
    /// let p = Projection::from_json(r#"{"ctxgc_projection": 1, "rules": {"min_saving_tokens": 0},
    ///     "tools": {"get": {"drop": [{"field": "notes"}]}}}"#).unwrap();
    /// let raw = r#"{"id": "A1", "notes": "a long note that nobody reads again, about how the parcel was wrapped, weighed and labelled twice"}"#;
    /// let trimmed = p.apply_with_footer("get", raw, false, &|_, hidden| format!("[hidden: {}]", hidden.join(", ")));
    /// assert_eq!(trimmed.text, "{\"id\":\"A1\"}\n[hidden: notes]");
    /// ```
    pub fn apply_with_footer(
        &self,
        tool: &str,
        output: &str,
        is_error: bool,
        footer_of: &dyn Fn(&str, &[String]) -> String,
    ) -> Trimmed {
        let parsed = fields::parse_output(output);
        let compact = self.lossless(compact_output(&parsed, output), &parsed);
        let as_given = |outcome, why| Trimmed {
            text: if outcome == Outcome::Compacted {
                compact.clone()
            } else {
                output.to_owned()
            },
            outcome,
            untrimmed: Some(why),
            hidden: Vec::new(),
            hidden_values: 0,
            removed: BTreeSet::new(),
            receipt: None,
        };
        let plain = match parsed {
            Output::Structured(_) => Outcome::Compacted,
            Output::Opaque(_) => Outcome::AsIs,
        };
        if is_failure(output, is_error) {
            // Nothing hidden from an error; re-serialising it loses nothing.
            return as_given(plain, Untrimmed::Failure);
        }
        let Some(t) = self.tools.get(tool) else {
            return as_given(plain, Untrimmed::UnknownTool);
        };
        let Some(mut drop) = self.dropped(tool).filter(|_| t.trim) else {
            return as_given(plain, Untrimmed::TrimOff);
        };
        let echoes = self.echoes(tool);
        if !echoes.is_empty() {
            // An echo goes only where its values are still shown by a field that stays.
            let found = super::echo::echoes(&parsed);
            for (field, of) in &echoes {
                let shown = drop
                    .get(of)
                    .is_none_or(|_| echoes.iter().any(|(f, _)| f == of))
                    && found.get(*field).is_some_and(|set| set.contains(*of));
                if !shown {
                    drop.remove(field);
                }
            }
        }
        let reference = reference_of(tool, output);
        let (body, hidden, hidden_values, removed) = match &parsed {
            Output::Opaque(_) => {
                if !drop.contains_key(OPAQUE_FIELD) {
                    return as_given(plain, Untrimmed::NothingDropped);
                }
                let removed = BTreeSet::from([OPAQUE_FIELD.to_owned()]);
                (String::new(), vec![OPAQUE_FIELD.to_owned()], 1, removed)
            }
            Output::Structured(node) => {
                let mut removal = Removal {
                    drop: &drop,
                    groups: Vec::new(),
                    values: 0,
                    removed: BTreeSet::new(),
                };
                let kept = removal.trim(node, &mut String::new());
                // An echo's values are still in the text: hidden from view, not removed.
                removal
                    .removed
                    .retain(|path| !echoes.iter().any(|(field, _)| field == path));
                if removal.groups.is_empty() {
                    return as_given(plain, Untrimmed::NothingDropped);
                }
                let body = match kept {
                    Some(n) => self.lossless(fields::compact(&n), &parsed),
                    None => match node {
                        Node::Array(_) => "[]".to_owned(),
                        _ => "{}".to_owned(),
                    },
                };
                (
                    body,
                    dedup_in_order(removal.groups),
                    removal.values,
                    removal.removed,
                )
            }
        };
        let foot = footer_of(&reference, &hidden);
        let text = if body.is_empty() {
            foot
        } else {
            format!("{body}\n{foot}")
        };
        let before = self.tokenizer.count(&compact) as u64;
        let after = self.tokenizer.count(&text) as u64;
        if after + self.rules.min_saving_tokens > before {
            return as_given(plain, Untrimmed::NotWorthIt);
        }
        Trimmed {
            text,
            outcome: Outcome::Trimmed,
            untrimmed: None,
            receipt: Some(TrimReceipt {
                reference,
                tool: tool.to_owned(),
                original: output.to_owned(),
                hidden: hidden.clone(),
            }),
            hidden,
            hidden_values,
            removed,
        }
    }
}

/// A receipt store failed (persistent backends wrap their own errors in this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("receipt store: {0}")]
pub struct ReceiptStoreError(pub String);

/// Where the originals of trimmed outputs are kept for [`expand`]. The core keeps them in
/// memory ([`MemoryReceipts`]); a persistent backend implements this trait.
pub trait ReceiptStore {
    /// Stores a receipt (storing the same reference again replaces it).
    fn put(&mut self, receipt: TrimReceipt) -> Result<(), ReceiptStoreError>;
    /// The receipt under a reference, if still kept.
    fn get(&self, reference: &str) -> Result<Option<TrimReceipt>, ReceiptStoreError>;
}

/// Receipts in memory, the most recent `capacity` kept (oldest dropped first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryReceipts {
    /// How many receipts are kept at most (0: no limit).
    pub capacity: usize,
    receipts: BTreeMap<String, TrimReceipt>,
    order: VecDeque<String>,
}

impl Default for MemoryReceipts {
    fn default() -> Self {
        MemoryReceipts::with_capacity(0)
    }
}

impl MemoryReceipts {
    /// A store that keeps at most `capacity` receipts (0: no limit).
    pub fn with_capacity(capacity: usize) -> Self {
        MemoryReceipts {
            capacity,
            receipts: BTreeMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Number of receipts kept.
    pub fn len(&self) -> usize {
        self.receipts.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.receipts.is_empty()
    }
}

impl ReceiptStore for MemoryReceipts {
    fn put(&mut self, receipt: TrimReceipt) -> Result<(), ReceiptStoreError> {
        if self.receipts.contains_key(&receipt.reference) {
            self.order.retain(|r| r != &receipt.reference);
        }
        self.order.push_back(receipt.reference.clone());
        self.receipts.insert(receipt.reference.clone(), receipt);
        while self.capacity > 0 && self.order.len() > self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.receipts.remove(&old);
            }
        }
        Ok(())
    }

    fn get(&self, reference: &str) -> Result<Option<TrimReceipt>, ReceiptStoreError> {
        Ok(self.receipts.get(reference).cloned())
    }
}

/// Why `expand` could not answer. The message is written for the agent to act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// The arguments are not `{"ref": string, "fields": [string, ...]}`.
    #[error(
        "expand: {0}; call it as {{\"ref\": \"<reference from the [hidden: ...] line>\", \"fields\": [\"*\"]}}"
    )]
    BadArguments(String),
    /// No trimmed output has that reference (or it is no longer kept).
    #[error("expand: no trimmed output has reference {0:?} (it may be older than what is kept)")]
    UnknownReference(String),
    /// A requested field is not in the output.
    #[error("expand: output {reference} has no field {field:?}; its fields include: {available}")]
    UnknownField {
        /// The reference.
        reference: String,
        /// The field asked for.
        field: String,
        /// Some of the fields it has.
        available: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] ReceiptStoreError),
}

/// The arguments of an `expand` call, read leniently: `fields` may be a list, one string, or
/// missing (all).
pub fn expand_request(arguments: &Value) -> Result<(String, Vec<String>), ExpandError> {
    let arguments = match arguments {
        Value::String(s) => &serde_json::from_str::<Value>(s)
            .map_err(|e| ExpandError::BadArguments(format!("arguments are not JSON: {e}")))?,
        other => other,
    };
    let Value::Object(map) = arguments else {
        return Err(ExpandError::BadArguments(
            "arguments must be an object".into(),
        ));
    };
    let reference = match map.get("ref").or_else(|| map.get("reference")) {
        Some(Value::String(r)) if !r.trim().is_empty() => r.trim().to_owned(),
        Some(_) => return Err(ExpandError::BadArguments("`ref` must be a string".into())),
        None => return Err(ExpandError::BadArguments("`ref` is missing".into())),
    };
    let fields = match map.get("fields") {
        None | Some(Value::Null) => vec!["*".to_owned()],
        Some(Value::String(f)) => vec![f.clone()],
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(f) => out.push(f.clone()),
                    _ => {
                        return Err(ExpandError::BadArguments(format!(
                            "`fields[{i}]` must be a string"
                        )));
                    }
                }
            }
            if out.is_empty() {
                vec!["*".to_owned()]
            } else {
                out
            }
        }
        Some(_) => {
            return Err(ExpandError::BadArguments(
                "`fields` must be a list of field paths".into(),
            ));
        }
    };
    Ok((reference, fields))
}

/// Answers an `expand` call: `"*"` gives the original output exactly; field paths
/// (generalised like `flights[].price`, or concrete like `flights[1].price`) give each
/// matching value under its concrete path, as compact JSON.
pub fn expand(store: &dyn ReceiptStore, arguments: &Value) -> Result<String, ExpandError> {
    let (reference, wanted) = expand_request(arguments)?;
    let receipt = store
        .get(&reference)?
        .ok_or_else(|| ExpandError::UnknownReference(reference.clone()))?;
    expand_receipt(&receipt, &wanted)
}

/// Answers an `expand` request from its receipt.
pub fn expand_receipt(receipt: &TrimReceipt, wanted: &[String]) -> Result<String, ExpandError> {
    if wanted.iter().any(|f| f.trim() == "*") {
        return Ok(receipt.original.clone());
    }
    let parsed = fields::parse_output(&receipt.original);
    let Output::Structured(root) = &parsed else {
        if wanted.iter().all(|f| f == OPAQUE_FIELD) {
            return Ok(receipt.original.clone());
        }
        return Err(ExpandError::UnknownField {
            reference: receipt.reference.clone(),
            field: wanted.first().cloned().unwrap_or_default(),
            available: format!("{OPAQUE_FIELD} (the output is plain text; ask for \"*\")"),
        });
    };
    let mut out = Map::new();
    let wanted: Vec<String> = wanted
        .iter()
        .flat_map(|f| expand_braces(f.trim()))
        .collect();
    for field in &wanted {
        let field = field.as_str();
        let mut found = false;
        let mut visit = |general: &str, concrete: &str, node: &Node| {
            // A node matches when it is the field; nodes under a match are inside its value.
            if general == field || concrete == field {
                found = true;
                if !out.keys().any(|k| fields::is_under(concrete, k)) {
                    out.insert(concrete.to_owned(), fields::to_value(node));
                }
            }
        };
        fields::visit_nodes(root, &mut visit);
        if !found {
            let mut available = receipt.hidden.clone();
            if available.is_empty() {
                available = fields::leaves(&parsed)
                    .into_iter()
                    .map(|l| l.path)
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .take(20)
                    .collect();
            }
            return Err(ExpandError::UnknownField {
                reference: receipt.reference.clone(),
                field: field.to_owned(),
                available: available.join(", "),
            });
        }
    }
    Ok(Value::Object(out).to_string())
}

/// A tool as offered to a model: name, description, JSON schema of its input. Adapt it to
/// the provider's format (`{"type": "function", "function": {...}}` for OpenAI chat,
/// `name`/`description`/`input_schema` for Anthropic).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON schema of its arguments.
    pub input_schema: Value,
}

/// The `expand` tool to offer next to trimmed outputs.
pub fn expand_tool() -> ToolSchema {
    ToolSchema {
        name: EXPAND_TOOL.to_owned(),
        description: "Some tool outputs end with a line like [hidden: a, b[].c — expand ref \"xyz\"]: those fields \
were left out to save space. Call this tool with that ref to get them back: fields [\"*\"] (the default) returns \
the whole original output; field paths as written in the line (like flights[].price) return just those values."
            .to_owned(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {
                "ref": {"type": "string", "description": "The reference from the [hidden: ...] line."},
                "fields": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Field paths to return, or [\"*\"] for the whole original output."
                }
            },
            "required": ["ref"],
            "additionalProperties": false
        }),
    }
}
