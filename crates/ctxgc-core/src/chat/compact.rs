//! Tool-output compaction: lossless re-encoding first, then (outside the lossless preset)
//! row sampling and text folding that always say what they left out.
//!
//! **Lossless.** A JSON output is re-written in plain notation ([`crate::chat::plain`]: JSON's
//! brackets, colons and commas, no spaces, quotes only where a reader needs them). A list of
//! two or more records (objects with the same keys) — at the top level, in a field of an
//! object, or at any depth — becomes a header of keys plus rows: `{columns:[...],rows:[[...],
//! ...]}`. A field whose value is an object with the same keys in every row is spread into
//! nested columns (`{prices:[economy,business]}`); a field with the same value in every row of
//! a table of three or more is written once, under `every_row`; and a list of lists of such
//! records becomes `{columns:[...],row_groups:[[row, ...], ...]}`. [`crate::chat::plain::from_plain`]
//! then [`decode_tables`] give the original value back exactly; nothing is dropped. The
//! encoding is used only when it costs fewer tokens, and header + rows never on a value that
//! already holds an object shaped like a table (the encoding would be ambiguous) or that has
//! duplicate keys (re-serialising would lose one).
//!
//! **Sampling.** A list of records longer than the threshold keeps its first rows and every
//! row carrying a safety signal; a note before the output names the list, how many rows were
//! shown and which were omitted, and where the original is.
//!
//! **Folding.** A long plain-text output (logs, test runs, listings) keeps its head, its tail,
//! every line carrying a safety signal (errors, failures, warnings) and whole Python
//! tracebacks; runs of identical lines are collapsed; every gap is marked in place and a note
//! at the top says what was omitted and where the original is.
//!
//! **Safety signals** are matched on words, not substrings: keys and string values are split
//! into words (at non-letters and camelCase humps) and compared with the list, so
//! `"PEANUT_ALLERGEN"` and `"ValueError"` carry a signal and `"egg-free"` does not.
//!
//! ```
//! use ctxgc_core::chat::compact::{compact_json, decode_tables};
//! use ctxgc_core::Tokenizer;
//! use ctxgc_core::chat::plain::from_plain;
//! let text = r#"{"flights": [
//!   {"flight_number": "HAT069", "origin": "JFK", "departs": "06:00:00", "price": 121},
//!   {"flight_number": "HAT083", "origin": "JFK", "departs": "01:00:00", "price": 87},
//!   {"flight_number": "HAT101", "origin": "JFK", "departs": "13:00:00", "price": 99}]}"#;
//! let compacted = compact_json(text, Tokenizer::O200kBase).unwrap();
//! assert_eq!(
//!     compacted.text,
//!     "{flights:{columns:[flight_number,departs,price],every_row:{origin:JFK},\
//!      rows:[[HAT069,06:00:00,121],[HAT083,01:00:00,87],[HAT101,13:00:00,99]]}}"
//! );
//! let back = decode_tables(&from_plain(&compacted.text).unwrap());
//! assert_eq!(back, serde_json::from_str::<serde_json::Value>(text).unwrap());
//! ```

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::chat::plain::to_plain;
use crate::chat::{Folding, Sampling};
use crate::tokens::Tokenizer;

/// Words whose presence keeps a row or a line, and which of them mark personal data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SafetySignals {
    /// Every signal word (lower case), PII words included.
    pub words: BTreeSet<String>,
    /// The words that mark personal data: such rows are kept and the note says they hold PII.
    pub pii: BTreeSet<String>,
}

/// Safety words kept by default: hazards, expiry, errors and failures.
pub const DEFAULT_SAFETY_WORDS: &[&str] = &[
    "allergen",
    "allergens",
    "allergy",
    "allergies",
    "allergic",
    "anaphylaxis",
    "warning",
    "caution",
    "danger",
    "dangerous",
    "hazard",
    "hazardous",
    "toxic",
    "severity",
    "severe",
    "critical",
    "urgent",
    "emergency",
    "expiry",
    "expires",
    "expired",
    "expiration",
    "recall",
    "recalled",
    "contraindication",
    "contraindicated",
    "overdose",
    "error",
    "errors",
    "errored",
    "exception",
    "failed",
    "failure",
    "fail",
    "fatal",
    "panic",
    "panicked",
    "traceback",
    "denied",
    "forbidden",
    "unauthorized",
    "timeout",
    "crash",
    "crashed",
    "aborted",
    "segfault",
];

/// Words that mark personal data by default.
pub const DEFAULT_PII_WORDS: &[&str] = &[
    "ssn",
    "passport",
    "dob",
    "birth",
    "birthdate",
    "iban",
    "cvv",
    "password",
];

impl Default for SafetySignals {
    fn default() -> Self {
        let pii: BTreeSet<String> = DEFAULT_PII_WORDS.iter().map(|w| (*w).to_owned()).collect();
        let mut words: BTreeSet<String> = DEFAULT_SAFETY_WORDS
            .iter()
            .map(|w| (*w).to_owned())
            .collect();
        words.extend(pii.iter().cloned());
        SafetySignals { words, pii }
    }
}

impl SafetySignals {
    /// The default signals, built once and shared.
    pub fn shared_default() -> std::sync::Arc<SafetySignals> {
        static DEFAULT: std::sync::LazyLock<std::sync::Arc<SafetySignals>> =
            std::sync::LazyLock::new(|| std::sync::Arc::new(SafetySignals::default()));
        DEFAULT.clone()
    }
}

/// Splits text into lower-case words: at every non-alphanumeric character and at camelCase
/// humps (`ValueError` → `value`, `error`; `HTTPServer` → `http`, `server`).
///
/// ```
/// use ctxgc_core::chat::compact::words;
/// assert_eq!(words("egg-free PEANUT_ALLERGEN ValueError"), ["egg", "free", "peanut", "allergen", "value", "error"]);
/// ```
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_word(text, |word| out.push(word.to_owned()));
    out
}

/// Calls `visit` with each word of `text`, lower-cased, split as [`words`] splits. One pass
/// and one reused buffer: a tool output of tens of megabytes is scanned without copying it
/// into a character array or a list of all its words.
///
/// ```
/// use ctxgc_core::chat::compact::for_each_word;
/// let mut seen = Vec::new();
/// for_each_word("HTTPServer failed", |w| seen.push(w.to_owned()));
/// assert_eq!(seen, ["http", "server", "failed"]);
/// ```
pub fn for_each_word(text: &str, mut visit: impl FnMut(&str)) {
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    // The character before `c` in the text (alphanumeric whenever `current` is not empty).
    let mut prev: Option<char> = None;
    while let Some(c) = chars.next() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                visit(&current);
                current.clear();
            }
            prev = Some(c);
            continue;
        }
        if c.is_uppercase()
            && !current.is_empty()
            && let Some(p) = prev
        {
            let next_lower = chars.peek().is_some_and(|n| n.is_lowercase());
            if p.is_lowercase() || p.is_numeric() || (p.is_uppercase() && next_lower) {
                visit(&current);
                current.clear();
            }
        }
        current.extend(c.to_lowercase());
        prev = Some(c);
    }
    if !current.is_empty() {
        visit(&current);
    }
}

impl SafetySignals {
    /// Adds words (lower-cased) to the list.
    pub fn add_words(&mut self, extra: &[String]) {
        for w in extra {
            for word in words(w) {
                self.words.insert(word);
            }
        }
    }

    fn matches(&self, word: &str) -> bool {
        self.words.contains(word)
    }

    /// The signal words in a text, in order of first appearance.
    pub fn in_text(&self, text: &str) -> Vec<String> {
        let mut found: Vec<String> = Vec::new();
        for_each_word(text, |w| {
            if self.matches(w) && !found.iter().any(|f| f == w) {
                found.push(w.to_owned());
            }
        });
        found
    }

    /// The signal words a JSON value carries: in keys whose value is not empty, and in string
    /// values.
    pub fn in_value(&self, value: &Value) -> Vec<String> {
        let mut found = Vec::new();
        self.collect(value, &mut found);
        found
    }

    fn collect(&self, value: &Value, found: &mut Vec<String>) {
        let push = |w: String, found: &mut Vec<String>| {
            if !found.contains(&w) {
                found.push(w);
            }
        };
        match value {
            Value::String(s) => {
                for w in self.in_text(s) {
                    push(w, found);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| self.collect(v, found)),
            Value::Object(map) => {
                for (k, v) in map {
                    if !is_empty_value(v) {
                        for w in self.in_text(k) {
                            push(w, found);
                        }
                    }
                    self.collect(v, found);
                }
            }
            _ => {}
        }
    }

    /// True when one of `found` marks personal data.
    pub fn has_pii(&self, found: &[String]) -> bool {
        found.iter().any(|w| self.pii.contains(w))
    }
}

fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) | Value::Bool(true) => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing. A repeated key makes an output unsafe to re-encode: serde_json keeps the last of
// them, so re-serialising would drop one.

/// Parses a tool output as a JSON object or array, when it is one that can be re-encoded
/// without loss.
pub fn parse_json_output(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return None;
    }
    // One pass builds the tree and notices a repeated key.
    match crate::unique_keys::parse_noting_repeats(trimmed) {
        Ok((value, false)) => Some(value),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Header + rows.

/// A column of a table: a plain key, or an object spread into nested columns.
#[derive(Debug, Clone, PartialEq)]
enum Column {
    Key(String),
    Spread(String, Vec<Column>),
}

fn key_set(map: &Map<String, Value>) -> BTreeSet<&str> {
    map.keys().map(String::as_str).collect()
}

/// Columns shared by every record, or `None` when the records differ in their keys.
fn columns_of(records: &[&Map<String, Value>]) -> Option<Vec<Column>> {
    let first = records.first()?;
    if first.is_empty() {
        return None;
    }
    let keys = key_set(first);
    if records.iter().any(|r| key_set(r) != keys) {
        return None;
    }
    let mut columns = Vec::new();
    for key in first.keys() {
        let subs: Option<Vec<&Map<String, Value>>> =
            records.iter().map(|r| r.get(key)?.as_object()).collect();
        match subs.and_then(|subs| columns_of(&subs)) {
            Some(inner) => columns.push(Column::Spread(key.clone(), inner)),
            None => columns.push(Column::Key(key.clone())),
        }
    }
    Some(columns)
}

fn header(columns: &[Column]) -> Value {
    Value::Array(
        columns
            .iter()
            .map(|c| match c {
                Column::Key(k) => Value::String(k.clone()),
                Column::Spread(k, inner) => {
                    let mut m = Map::new();
                    m.insert(k.clone(), header(inner));
                    Value::Object(m)
                }
            })
            .collect(),
    )
}

fn push_row(columns: &[Column], record: &Map<String, Value>, row: &mut Vec<Value>) {
    for c in columns {
        match c {
            Column::Key(k) => row.push(record.get(k).map(encode_tables).unwrap_or(Value::Null)),
            Column::Spread(k, inner) => {
                if let Some(sub) = record.get(k).and_then(Value::as_object) {
                    push_row(inner, sub, row);
                }
            }
        }
    }
}

fn as_records(items: &[Value]) -> Option<Vec<&Map<String, Value>>> {
    items.iter().map(Value::as_object).collect()
}

fn table(columns: &[Column], records: &[&Map<String, Value>]) -> Vec<Vec<Value>> {
    records
        .iter()
        .map(|r| {
            let mut row = Vec::new();
            push_row(columns, r, &mut row);
            row
        })
        .collect()
}

impl Column {
    /// Cells the column takes in a row.
    fn width(&self) -> usize {
        match self {
            Column::Key(_) => 1,
            Column::Spread(_, inner) => inner.iter().map(Column::width).sum(),
        }
    }
}

/// A table needs this many rows before a value they all share is written once instead.
const SHARED_MIN_ROWS: usize = 3;

/// Takes the top-level columns whose cell is the same in every row (of every group) out of
/// the header and the rows, and returns them, with their value, for `every_row`. Nothing is
/// taken from a short table, nor when it would leave no column.
fn take_shared(columns: &mut Vec<Column>, groups: &mut [Vec<Vec<Value>>]) -> Map<String, Value> {
    let mut shared = Map::new();
    let rows = || groups.iter().flatten();
    let Some(first) = rows().next() else {
        return shared;
    };
    if rows().count() < SHARED_MIN_ROWS {
        return shared;
    }
    let mut offset = 0;
    let mut taken = Vec::new();
    for (c, column) in columns.iter().enumerate() {
        if let Column::Key(key) = column
            && rows().all(|row| row.get(offset) == first.get(offset))
            && let Some(value) = first.get(offset)
        {
            taken.push((c, offset, key.clone(), value.clone()));
        }
        offset += column.width();
    }
    if taken.len() == columns.len() {
        return shared;
    }
    // From the right, so the positions still to remove stay where they were.
    for &(c, cell, _, _) in taken.iter().rev() {
        columns.remove(c);
        for row in groups.iter_mut().flatten() {
            row.remove(cell);
        }
    }
    shared.extend(taken.into_iter().map(|(_, _, key, value)| (key, value)));
    shared
}

/// The object a table is written as: its header, the values every row shares, its rows.
fn table_object(
    mut columns: Vec<Column>,
    mut groups: Vec<Vec<Vec<Value>>>,
    grouped: bool,
) -> Value {
    let shared = take_shared(&mut columns, &mut groups);
    let mut m = Map::new();
    m.insert("columns".into(), header(&columns));
    if !shared.is_empty() {
        m.insert(SHARED.into(), Value::Object(shared));
    }
    let rows = |rows: Vec<Vec<Value>>| Value::Array(rows.into_iter().map(Value::Array).collect());
    if grouped {
        m.insert(
            "row_groups".into(),
            Value::Array(groups.into_iter().map(rows).collect()),
        );
    } else {
        m.insert("rows".into(), rows(groups.into_iter().flatten().collect()));
    }
    Value::Object(m)
}

/// The key of a table's values that every row shares.
const SHARED: &str = "every_row";

/// Re-encodes every list of records as header + rows (see the module doc). Pure structure:
/// whether it is smaller is for the caller to decide.
pub fn encode_tables(value: &Value) -> Value {
    match value {
        Value::Array(items) if items.len() >= 2 => {
            if let Some(records) = as_records(items)
                && let Some(columns) = columns_of(&records)
            {
                let rows = table(&columns, &records);
                return table_object(columns, vec![rows], false);
            }
            let groups: Option<Vec<Vec<&Map<String, Value>>>> = items
                .iter()
                .map(|g| {
                    let list = g.as_array().filter(|l| !l.is_empty())?;
                    as_records(list)
                })
                .collect();
            if let Some(groups) = groups {
                let all: Vec<&Map<String, Value>> = groups.iter().flatten().copied().collect();
                if all.len() >= 2
                    && let Some(columns) = columns_of(&all)
                {
                    let groups = groups.iter().map(|g| table(&columns, g)).collect();
                    return table_object(columns, groups, true);
                }
            }
            Value::Array(items.iter().map(encode_tables).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(encode_tables).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), encode_tables(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn table_shaped(map: &Map<String, Value>) -> bool {
    let shared = usize::from(map.get(SHARED).is_some_and(Value::is_object));
    map.len() == 2 + shared
        && map.contains_key("columns")
        && (map.contains_key("rows") || map.contains_key("row_groups"))
}

fn holds_table_shape(value: &Value) -> bool {
    match value {
        Value::Object(map) => table_shaped(map) || map.values().any(holds_table_shape),
        Value::Array(items) => items.iter().any(holds_table_shape),
        _ => false,
    }
}

fn parse_header(h: &Value) -> Option<Vec<Column>> {
    h.as_array()?
        .iter()
        .map(|c| match c {
            Value::String(k) => Some(Column::Key(k.clone())),
            Value::Object(m) if m.len() == 1 => {
                let (k, inner) = m.iter().next()?;
                Some(Column::Spread(k.clone(), parse_header(inner)?))
            }
            _ => None,
        })
        .collect()
}

fn rebuild(
    columns: &[Column],
    cells: &mut std::slice::Iter<'_, Value>,
) -> Option<Map<String, Value>> {
    let mut m = Map::new();
    for c in columns {
        match c {
            Column::Key(k) => {
                m.insert(k.clone(), decode_tables(cells.next()?));
            }
            Column::Spread(k, inner) => {
                m.insert(k.clone(), Value::Object(rebuild(inner, cells)?));
            }
        }
    }
    Some(m)
}

fn decode_rows(columns: &[Column], shared: &Map<String, Value>, rows: &Value) -> Option<Value> {
    rows.as_array()?
        .iter()
        .map(|row| {
            let cells = row.as_array()?;
            let mut it = cells.iter();
            let mut m = rebuild(columns, &mut it)?;
            m.extend(
                shared
                    .iter()
                    .map(|(key, value)| (key.clone(), value.clone())),
            );
            it.next().is_none().then_some(Value::Object(m))
        })
        .collect::<Option<Vec<_>>>()
        .map(Value::Array)
}

/// The inverse of [`encode_tables`].
pub fn decode_tables(value: &Value) -> Value {
    match value {
        Value::Object(map) if table_shaped(map) => {
            // Decoded once for the table, then copied into every row.
            let shared: Map<String, Value> = map
                .get(SHARED)
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), decode_tables(v)))
                        .collect()
                })
                .unwrap_or_default();
            let decoded = parse_header(&map["columns"]).and_then(|columns| {
                if let Some(rows) = map.get("rows") {
                    decode_rows(&columns, &shared, rows)
                } else {
                    map.get("row_groups")?
                        .as_array()?
                        .iter()
                        .map(|g| decode_rows(&columns, &shared, g))
                        .collect::<Option<Vec<_>>>()
                        .map(Value::Array)
                }
            });
            decoded.unwrap_or_else(|| value.clone())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), decode_tables(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(decode_tables).collect()),
        other => other.clone(),
    }
}

/// A lossless re-encoding of a JSON output.
#[derive(Debug, Clone, PartialEq)]
pub struct Compacted {
    /// The new text.
    pub text: String,
    /// True when lists of records became header + rows.
    pub tables: bool,
    /// Tokens of the original text.
    pub tokens_before: usize,
    /// Tokens of the new text.
    pub tokens_after: usize,
}

/// The smallest lossless re-encoding of `value`, in plain notation: as it is, or with lists
/// of records as header + rows.
fn smallest_encoding(value: &Value, tokenizer: Tokenizer) -> (String, bool, usize) {
    let compact = to_plain(value);
    let compact_tokens = tokenizer.count(&compact);
    if holds_table_shape(value) {
        return (compact, false, compact_tokens);
    }
    let encoded = to_plain(&encode_tables(value));
    if encoded != compact {
        let encoded_tokens = tokenizer.count(&encoded);
        if encoded_tokens < compact_tokens {
            return (encoded, true, encoded_tokens);
        }
    }
    (compact, false, compact_tokens)
}

/// Re-encodes a JSON output without loss, when that saves tokens.
pub fn compact_json(text: &str, tokenizer: Tokenizer) -> Option<Compacted> {
    compact_parsed(
        text,
        &parse_json_output(text)?,
        || tokenizer.count(text),
        tokenizer,
    )
}

/// [`compact_json`] of a text already parsed by [`parse_json_output`] into `value`;
/// `tokens_of_text` counts the text (called only when the re-encoding differs from it).
pub fn compact_parsed(
    text: &str,
    value: &Value,
    tokens_of_text: impl FnOnce() -> usize,
    tokenizer: Tokenizer,
) -> Option<Compacted> {
    let (new, tables, after) = smallest_encoding(value, tokenizer);
    if new == text {
        return None;
    }
    let before = tokens_of_text();
    (after < before).then_some(Compacted {
        text: new,
        tables,
        tokens_before: before,
        tokens_after: after,
    })
}

// ---------------------------------------------------------------------------------------------
// Sampling.

/// What sampling did to one list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampledList {
    /// Where the list is (`$`, `$.flights`, `$.reservations[2].flights`).
    pub path: String,
    /// Rows (or row groups) it had.
    pub total: usize,
    /// Zero-based indices kept.
    pub kept: Vec<usize>,
    /// Kept rows carrying a safety signal: index and words.
    pub flagged: Vec<(usize, Vec<String>)>,
    /// Kept rows that hold personal data.
    pub pii: Vec<usize>,
}

/// A sampled output.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled {
    /// The new text: the note, a newline, the sampled JSON.
    pub text: String,
    /// The lists sampled.
    pub lists: Vec<SampledList>,
    /// The note alone.
    pub note: String,
}

fn is_record_list(items: &[Value]) -> bool {
    items.iter().all(Value::is_object)
}

fn is_group_list(items: &[Value]) -> bool {
    items.iter().all(|g| {
        g.as_array()
            .is_some_and(|l| !l.is_empty() && is_record_list(l))
    })
}

fn sample_walk(
    value: &Value,
    path: &str,
    sampling: Sampling,
    signals: &SafetySignals,
    lists: &mut Vec<SampledList>,
) -> Value {
    match value {
        Value::Array(items)
            if items.len() > sampling.max_rows
                && (is_record_list(items) || is_group_list(items)) =>
        {
            let mut kept = Vec::new();
            let mut flagged = Vec::new();
            let mut pii = Vec::new();
            let mut out = Vec::new();
            for (i, row) in items.iter().enumerate() {
                let found = signals.in_value(row);
                if i < sampling.keep_rows || !found.is_empty() {
                    kept.push(i);
                    if signals.has_pii(&found) {
                        pii.push(i);
                    }
                    if !found.is_empty() {
                        flagged.push((i, found));
                    }
                    out.push(sample_walk(
                        row,
                        &format!("{path}[{i}]"),
                        sampling,
                        signals,
                        lists,
                    ));
                }
            }
            lists.push(SampledList {
                path: path.to_owned(),
                total: items.len(),
                kept,
                flagged,
                pii,
            });
            Value::Array(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| sample_walk(v, &format!("{path}[{i}]"), sampling, signals, lists))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let child = if k.chars().all(|c| c.is_alphanumeric() || c == '_') {
                        format!("{path}.{k}")
                    } else {
                        format!("{path}[{}]", Value::String(k.clone()))
                    };
                    (k.clone(), sample_walk(v, &child, sampling, signals, lists))
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// One-based ranges of the indices in `0..total` that are not in `kept`: `"11-16, 18"`.
fn omitted_ranges(total: usize, kept: &[usize]) -> String {
    let kept: BTreeSet<usize> = kept.iter().copied().collect();
    let mut parts = Vec::new();
    let mut start: Option<usize> = None;
    for i in 0..=total {
        let omitted = i < total && !kept.contains(&i);
        match (omitted, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                parts.push(if s + 1 == i {
                    format!("{}", s + 1)
                } else {
                    format!("{}-{}", s + 1, i)
                });
                start = None;
            }
            _ => {}
        }
    }
    parts.join(", ")
}

fn describe(list: &SampledList) -> String {
    let shown = list.kept.len();
    let mut s = format!("{}: {shown} of {} rows shown", list.path, list.total);
    if !list.flagged.is_empty() {
        let flagged: Vec<String> = list
            .flagged
            .iter()
            .map(|(i, words)| {
                let pii = if list.pii.contains(i) {
                    ", holds PII"
                } else {
                    ""
                };
                format!("{} ({}{pii})", i + 1, words.join(" "))
            })
            .collect();
        let _ = write!(s, ", safety-flagged rows kept: {}", flagged.join(", "));
    }
    let _ = write!(
        s,
        "; {} rows omitted: {}",
        list.total - shown,
        omitted_ranges(list.total, &list.kept)
    );
    s
}

/// Samples every list of records longer than the threshold (see the module doc). `hint` says
/// where the original is. `None` when nothing is long enough or the result would not be
/// smaller.
pub fn sample_rows(
    text: &str,
    sampling: Sampling,
    signals: &SafetySignals,
    hint: &str,
    tokenizer: Tokenizer,
) -> Option<Sampled> {
    let value = parse_json_output(text)?;
    sample_parsed(text, &value, sampling, signals, hint, tokenizer)
}

/// [`sample_rows`] of a text already parsed by [`parse_json_output`] into `value`.
pub fn sample_parsed(
    text: &str,
    value: &Value,
    sampling: Sampling,
    signals: &SafetySignals,
    hint: &str,
    tokenizer: Tokenizer,
) -> Option<Sampled> {
    let mut lists = Vec::new();
    let sampled = sample_walk(value, "$", sampling, signals, &mut lists);
    if lists.is_empty() || lists.iter().all(|l| l.kept.len() == l.total) {
        return None;
    }
    // Lists nested in kept rows were pushed first; report them in document order.
    lists.sort_by(|a, b| a.path.cmp(&b.path));
    let parts: Vec<String> = lists.iter().map(describe).collect();
    let note = format!(
        "[ctxgc: output sampled, row numbers 1-based; {}; shown rows keep every field; {hint}]",
        parts.join("; ")
    );
    let (body, _, _) = smallest_encoding(&sampled, tokenizer);
    let new = format!("{note}\n{body}");
    (tokenizer.count(&new) < tokenizer.count(text)).then_some(Sampled {
        text: new,
        lists,
        note,
    })
}

// ---------------------------------------------------------------------------------------------
// Folding.

/// A folded text output.
#[derive(Debug, Clone, PartialEq)]
pub struct Folded {
    /// The new text.
    pub text: String,
    /// The note at its top.
    pub note: String,
    /// Lines the original had.
    pub lines: usize,
    /// Lines omitted (not counting collapsed repeats).
    pub omitted: usize,
    /// Repeated lines collapsed.
    pub collapsed: usize,
}

/// Folds a long plain-text output (see the module doc). `None` when it is short enough, is
/// JSON, or folding would not make it smaller.
pub fn fold_text(
    text: &str,
    folding: Folding,
    signals: &SafetySignals,
    hint: &str,
    tokenizer: Tokenizer,
) -> Option<Folded> {
    fold_unless_json(
        text,
        || parse_json_output(text).is_some(),
        folding,
        signals,
        hint,
        tokenizer,
    )
}

/// [`fold_text`], with `is_json` saying whether the text is JSON [`parse_json_output`] takes
/// (asked only when the text is long enough to fold).
pub fn fold_unless_json(
    text: &str,
    is_json: impl FnOnce() -> bool,
    folding: Folding,
    signals: &SafetySignals,
    hint: &str,
    tokenizer: Tokenizer,
) -> Option<Folded> {
    let lines: Vec<&str> = text.split('\n').collect();
    if lines.len() <= folding.max_lines || is_json() {
        return None;
    }
    // Runs of identical lines: (first line index, repeat count).
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match runs.last_mut() {
            Some((start, count)) if !line.trim().is_empty() && lines[*start] == *line => {
                *count += 1
            }
            _ => runs.push((i, 1)),
        }
    }
    let n = runs.len();
    let mut keep = vec![false; n];
    for k in keep.iter_mut().take(folding.head.min(n)) {
        *k = true;
    }
    for k in keep.iter_mut().skip(n.saturating_sub(folding.tail)) {
        *k = true;
    }
    let mut signal_lines = 0;
    let mut in_traceback = false;
    for (r, &(start, _)) in runs.iter().enumerate() {
        let line = lines[start];
        if line.starts_with("Traceback (most recent call last)") {
            in_traceback = true;
        }
        let signal = !signals.in_text(line).is_empty();
        if in_traceback || signal {
            if !keep[r] {
                signal_lines += 1;
            }
            keep[r] = true;
        }
        // A traceback ends at its first unindented line after the header.
        if in_traceback && !line.starts_with("Traceback") && !line.starts_with([' ', '\t']) {
            in_traceback = false;
        }
    }
    let mut body = String::new();
    let mut omitted = 0;
    let mut collapsed = 0;
    let mut gap: Option<(usize, usize)> = None;
    let flush_gap = |body: &mut String, gap: &mut Option<(usize, usize)>| {
        if let Some((from, to)) = gap.take() {
            let count = to - from + 1;
            let _ = writeln!(
                body,
                "[ctxgc: {count} line{} omitted here: {}]",
                if count == 1 { "" } else { "s" },
                if from == to {
                    format!("line {}", from + 1)
                } else {
                    format!("lines {}-{}", from + 1, to + 1)
                }
            );
        }
    };
    for (r, &(start, count)) in runs.iter().enumerate() {
        let end = start + count - 1;
        if keep[r] {
            flush_gap(&mut body, &mut gap);
            body.push_str(lines[start]);
            body.push('\n');
            if count > 1 {
                collapsed += count - 1;
                let _ = writeln!(
                    body,
                    "[ctxgc: the line above repeats {} more time{} (lines {}-{})]",
                    count - 1,
                    if count == 2 { "" } else { "s" },
                    start + 2,
                    end + 1
                );
            }
        } else {
            omitted += count;
            gap = Some(match gap {
                Some((from, _)) => (from, end),
                None => (start, end),
            });
        }
    }
    flush_gap(&mut body, &mut gap);
    if body.ends_with('\n') && !text.ends_with('\n') {
        body.pop();
    }
    let note = format!(
        "[ctxgc: long output folded: {} of {} lines omitted, {collapsed} repeated lines collapsed, \
         first {} and last {} lines and {signal_lines} more lines with errors or warnings kept; {hint}]",
        omitted,
        lines.len(),
        folding.head,
        folding.tail
    );
    let new = format!("{note}\n{body}");
    (tokenizer.count(&new) < tokenizer.count(text)).then_some(Folded {
        text: new,
        note,
        lines: lines.len(),
        omitted,
        collapsed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The split as first written, over a collected character array: the streaming
    /// [`for_each_word`] must give exactly the same words.
    fn reference_words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut current = String::new();
        let chars: Vec<char> = text.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            if !c.is_alphanumeric() {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
                continue;
            }
            if c.is_uppercase() && !current.is_empty() {
                let prev = chars[i - 1];
                let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
                if prev.is_lowercase() || prev.is_numeric() || (prev.is_uppercase() && next_lower) {
                    out.push(std::mem::take(&mut current));
                }
            }
            current.extend(c.to_lowercase());
        }
        if !current.is_empty() {
            out.push(current);
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn streaming_words_split_as_the_reference(text in "[a-zA-Z0-9_ .:ÉéΩωİß-]{0,40}") {
            proptest::prop_assert_eq!(words(&text), reference_words(&text));
        }
    }

    #[test]
    fn words_split_at_humps_and_punctuation() {
        assert_eq!(words("HTTPServer"), ["http", "server"]);
        assert_eq!(words("date_of_birth"), ["date", "of", "birth"]);
        assert_eq!(words("AssertionError: x"), ["assertion", "error", "x"]);
    }

    #[test]
    fn egg_free_is_not_an_allergen() {
        let s = SafetySignals::default();
        assert!(s.in_value(&json!({"name": "Egg-free pasta"})).is_empty());
        assert_eq!(
            s.in_value(&json!({"warning": "PEANUT_ALLERGEN"})),
            ["warning", "allergen"]
        );
        // A key with an empty value carries no signal.
        assert!(
            s.in_value(&json!({"error": "", "response": "ok"}))
                .is_empty()
        );
        assert!(s.has_pii(&s.in_value(&json!({"first_name": "Mia", "dob": "1990-04-05"}))));
    }

    #[test]
    fn tables_round_trip_with_spread_columns_and_groups() {
        let v = json!([
            [{"n": "A", "seats": {"eco": 1, "bus": 2}, "tags": []}, {"n": "B", "seats": {"eco": 3, "bus": 4}, "tags": ["x"]}],
            [{"n": "C", "seats": {"bus": 6, "eco": 5}, "tags": [{"a": 1}, {"a": 2}]}]
        ]);
        let enc = encode_tables(&v);
        assert_eq!(
            enc["columns"],
            json!(["n", {"seats": ["eco", "bus"]}, "tags"])
        );
        assert_eq!(decode_tables(&enc), v);
    }

    #[test]
    fn a_value_every_row_shares_is_written_once() {
        let row = |n: &str, origin: &str| json!({"n": n, "origin": origin, "status": "ok", "p": {"a": 1}});
        // Three rows over two groups share `status` (and the spread `p`, which stays a column).
        let grouped = json!([[row("A", "JFK"), row("B", "JFK")], [row("C", "SEA")]]);
        let enc = encode_tables(&grouped);
        assert_eq!(enc["columns"], json!(["n", "origin", {"p": ["a"]}]));
        assert_eq!(enc["every_row"], json!({"status": "ok"}));
        assert_eq!(enc["row_groups"][1], json!([["C", "SEA", 1]]));
        assert_eq!(decode_tables(&enc), grouped);

        let flat = json!([row("A", "JFK"), row("B", "JFK"), row("C", "JFK")]);
        let enc = encode_tables(&flat);
        assert_eq!(enc["every_row"], json!({"origin": "JFK", "status": "ok"}));
        assert_eq!(enc["rows"][2], json!(["C", 1]));
        assert_eq!(decode_tables(&enc), flat);

        // Two rows are too few to gain; a table whose every column is shared keeps them all.
        let two = json!([row("A", "JFK"), row("B", "JFK")]);
        assert!(encode_tables(&two).get("every_row").is_none());
        let same = json!([{"a": 1}, {"a": 1}, {"a": 1}]);
        assert_eq!(
            encode_tables(&same),
            json!({"columns": ["a"], "rows": [[1], [1], [1]]})
        );

        // An input already holding that shape is not encoded, so decoding cannot misread it.
        let text = r#"{"t": {"columns": ["a"], "every_row": {"b": 1}, "rows": [[1]]}, "l": [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]}"#;
        assert!(!compact_json(text, Tokenizer::O200kBase).unwrap().tables);
    }

    #[test]
    fn differing_keys_stay_records() {
        let v = json!([{"a": 1}, {"b": 2}]);
        assert_eq!(encode_tables(&v), v);
    }

    #[test]
    fn table_shaped_input_is_not_encoded() {
        let text = r#"{"t": {"columns": ["a"], "rows": [[1]]}, "l": [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]}"#;
        let c = compact_json(text, Tokenizer::O200kBase).unwrap();
        assert!(!c.tables);
    }

    #[test]
    fn duplicate_keys_are_left_alone() {
        assert!(parse_json_output(r#"{"a": 1, "a": 2}"#).is_none());
        assert!(parse_json_output(r#"{"a": 1, "b": {"c": 1.50}}"#).is_some());
    }

    #[test]
    fn sampling_keeps_safety_rows_and_says_what_it_left_out() {
        let rows: Vec<Value> = (0..15)
            .map(|i| {
                if i == 9 {
                    json!({"name": "Peanut Butter 500g", "warning": "PEANUT_ALLERGEN"})
                } else if i == 11 {
                    json!({"name": "Egg-free pasta", "warning": ""})
                } else {
                    json!({"name": format!("Item {i}"), "warning": ""})
                }
            })
            .collect();
        let text = json!({"inventory": rows}).to_string();
        let s = sample_rows(
            &text,
            Sampling {
                max_rows: 5,
                keep_rows: 3,
            },
            &SafetySignals::default(),
            "the full output is kept by the operator (ctxgc receipt m4)",
            Tokenizer::O200kBase,
        )
        .unwrap();
        assert_eq!(s.lists[0].kept, vec![0, 1, 2, 9]);
        assert!(
            s.note.contains("$.inventory: 4 of 15 rows shown"),
            "{}",
            s.note
        );
        assert!(
            s.note
                .contains("safety-flagged rows kept: 10 (warning allergen)"),
            "{}",
            s.note
        );
        assert!(s.note.contains("11 rows omitted: 4-9, 11-15"), "{}", s.note);
        assert!(s.text.contains("Peanut Butter"));
        assert!(!s.text.contains("Egg-free"));
    }

    #[test]
    fn folding_keeps_errors_head_tail_and_marks_gaps() {
        let mut lines: Vec<String> = (1..=100).map(|i| format!("ok line {i}")).collect();
        lines[49] = "ValueError: bad input".into();
        for l in lines.iter_mut().take(80).skip(60) {
            *l = "same".into();
        }
        let text = lines.join("\n");
        let f = fold_text(
            &text,
            Folding {
                max_lines: 40,
                head: 5,
                tail: 5,
            },
            &SafetySignals::default(),
            "hint",
            Tokenizer::O200kBase,
        )
        .unwrap();
        assert!(f.text.contains("ValueError: bad input"));
        assert!(f.text.contains("ok line 1\n"));
        assert!(f.text.ends_with("ok line 100"));
        assert!(
            f.text
                .contains("[ctxgc: 44 lines omitted here: lines 6-49]"),
            "{}",
            f.text
        );
        assert_eq!(f.collapsed, 0, "the run of repeats fell in a gap");
        assert_eq!(f.lines, 100);
    }
}
