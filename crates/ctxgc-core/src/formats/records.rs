//! Conversation records, one per line: `{"id": "...", "messages": [...], ...}` (the corpus
//! form). Each record is its own conversation, compiled on its own; every field besides
//! `messages` is kept as its exact bytes.
//!
//! ```
//! use ctxgc_core::frontend::records::lower_records;
//! let jsonl = "{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n\
//!              {\"id\": \"b\", \"messages\": [{\"role\": \"user\", \"content\": \"yo\"}], \"meta\": {}}\n";
//! let records = lower_records(jsonl, None).unwrap();
//! assert_eq!(records.len(), 2);
//! assert_eq!(records[1].id, "b");
//! assert_eq!(records[1].line, 2);
//! ```

use serde_json::Value;

use crate::chat::lowering::{ChatDoc, lower_document};
use crate::error::{Diagnostic, Error};
use crate::formats::detect::chat_format_of;
use crate::formats::key::Format;

/// One record, lowered.
#[derive(Debug, Clone)]
pub struct Record {
    /// The record's `id` (or `line N` when it has none).
    pub id: String,
    /// One-based line number.
    pub line: usize,
    /// The record's exact text.
    pub raw: String,
    /// The conversation.
    pub doc: ChatDoc,
}

/// Prefixes every diagnostic of a record's error with where the record is.
fn in_record(err: Error, line: usize, id: &str) -> Error {
    let place = format!("line {line} (record {id:?})");
    match err {
        Error::Invalid(list) => Error::Invalid(
            list.into_iter()
                .map(|d| Diagnostic {
                    message: format!("{place}: message {}: {}", d.index, d.message),
                    ..d
                })
                .collect(),
        ),
        Error::Json {
            line: l,
            column,
            message,
            context,
        } => Error::Json {
            context: format!("{place}: {context}"),
            line: l,
            column,
            message,
        },
        Error::UnknownFormat(m) => Error::UnknownFormat(format!("{place}: {m}")),
        other => other,
    }
}

/// Lowers every record of a JSONL text. `format` forces the messages' format; otherwise each
/// record's is detected. Every problem of every record is reported.
pub fn lower_records(text: &str, format: Option<Format>) -> Result<Vec<Record>, Error> {
    let text = text.trim_start_matches('\u{feff}');
    let mut records = Vec::new();
    let mut problems: Vec<Diagnostic> = Vec::new();
    let mut first_error: Option<Error> = None;
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let head: Value = match serde_json::from_str(trimmed) {
            Ok(v) => v,
            Err(e) => {
                first_error.get_or_insert(Error::json(format!("line {line_no}"), &e));
                continue;
            }
        };
        let id = match head.get("id") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => format!("line {line_no}"),
        };
        if !head.get("messages").is_some_and(Value::is_array) {
            problems.push(Diagnostic::new(
                records.len(),
                Some(id.clone()),
                Some("messages"),
                format!("line {line_no}: a record needs a `messages` list"),
            ));
            continue;
        }
        let record_format = format.unwrap_or_else(|| chat_format_of(&head));
        match lower_document(trimmed, record_format) {
            Ok(doc) => records.push(Record {
                id,
                line: line_no,
                raw: trimmed.to_owned(),
                doc,
            }),
            Err(e) => match in_record(e, line_no, &id) {
                Error::Invalid(mut list) => problems.append(&mut list),
                other => {
                    first_error.get_or_insert(other);
                }
            },
        }
    }
    if let Some(err) = first_error {
        return Err(err);
    }
    if !problems.is_empty() {
        return Err(Error::Invalid(problems));
    }
    let mut seen = std::collections::HashMap::new();
    for r in &records {
        if let Some(prev) = seen.insert(r.id.clone(), r.line) {
            return Err(Error::Invalid(vec![Diagnostic::new(
                0,
                Some(r.id.clone()),
                Some("id"),
                format!(
                    "line {}: duplicate record id (first on line {prev})",
                    r.line
                ),
            )]));
        }
    }
    Ok(records)
}
