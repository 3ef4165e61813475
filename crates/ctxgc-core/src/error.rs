//! Diagnostics: every problem names the item, the field and what is wrong.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One problem found in the input, located precisely enough to fix it.
///
/// ```
/// use ctxgc_core::Diagnostic;
/// let d = Diagnostic::new(3, Some("e04".into()), Some("exit_code"), "expected integer, found string");
/// assert_eq!(d.to_string(), "item 3 (id \"e04\"): field \"exit_code\": expected integer, found string");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// Zero-based position of the item in the input (event, message or line).
    pub index: usize,
    /// The item's id, when it has a readable one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The field at fault, when the problem is in one field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What is wrong, in words.
    pub message: String,
}

impl Diagnostic {
    /// A diagnostic for item `index`.
    pub fn new(
        index: usize,
        id: Option<String>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            index,
            id,
            field: field.map(str::to_owned),
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "item {}", self.index)?;
        if let Some(id) = &self.id {
            write!(f, " (id {id:?})")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": field {field:?}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Why an input could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is not text in UTF-8.
    #[error("input is not valid UTF-8: invalid byte at offset {offset} (line {line})")]
    InvalidUtf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
        /// One-based line of that byte.
        line: usize,
    },
    /// The input is not JSON (or JSONL) at all.
    #[error("{context}: malformed JSON at line {line}, column {column}: {message}")]
    Json {
        /// Where the JSON came from ("input", "line 7", ...).
        context: String,
        /// One-based line.
        line: usize,
        /// One-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The input's shape is not a format ctxgc reads.
    #[error("unknown input format: {0}")]
    UnknownFormat(String),
    /// The input parsed, but items in it are invalid. All problems are listed, not only the first.
    #[error("{} invalid item(s):\n{}", .0.len(), render_list(.0))]
    Invalid(Vec<Diagnostic>),
    /// A request the caller made cannot be met (unknown id, bad option).
    #[error("{0}")]
    Usage(String),
}

fn render_list(diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(|d| format!("  {d}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Error {
    /// Builds an [`Error::Json`] from a serde_json error, with a context label.
    pub fn json(context: impl Into<String>, err: &serde_json::Error) -> Self {
        Error::Json {
            context: context.into(),
            line: err.line(),
            column: err.column(),
            message: err.to_string(),
        }
    }
}

/// Decodes bytes as UTF-8, with an error that says where the first bad byte is.
pub fn decode_utf8(bytes: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(bytes).map_err(|e| {
        let offset = e.valid_up_to();
        let line = 1 + bytes[..offset].iter().filter(|b| **b == b'\n').count();
        Error::InvalidUtf8 { offset, line }
    })
}
