//! Splitting an input into its items' exact bytes ([`split_items`]), so that receipts can give
//! them back unchanged: the layouts a document may have and the slices it is cut into. Knows no
//! format; detection ([`crate::frontend::detect`]) says which layout an input has.

use serde_json::value::RawValue;

use crate::error::Error;

/// How the items of an input are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One JSON array of items.
    Array,
    /// One JSON object holding the items under a key (`events`, `messages`, `input`).
    Wrapped(&'static str),
    /// One JSON value per line.
    Lines,
}

/// One item's exact bytes and where it came from.
#[derive(Debug, Clone, Copy)]
pub struct RawItem<'a> {
    /// The item's exact text.
    pub text: &'a str,
    /// One-based line where it starts (for JSONL), or 0 inside a document.
    pub line: usize,
}

/// Splits an input into its items' exact bytes, following `layout`.
pub fn split_items(text: &str, layout: Layout) -> Result<Vec<RawItem<'_>>, Error> {
    let text = text.trim_start_matches('\u{feff}');
    match layout {
        Layout::Array => {
            let items: Vec<&RawValue> =
                serde_json::from_str(text).map_err(|e| Error::json("input", &e))?;
            Ok(document_items(items))
        }
        Layout::Wrapped(key) => {
            let raw: std::collections::BTreeMap<String, &RawValue> =
                serde_json::from_str(text).map_err(|e| Error::json("input", &e))?;
            let inner = raw.get(key).ok_or_else(|| {
                Error::UnknownFormat(format!("no `{key}` array in the input object"))
            })?;
            let items: Vec<&RawValue> = serde_json::from_str(inner.get())
                .map_err(|e| Error::json(format!("`{key}`"), &e))?;
            Ok(document_items(items))
        }
        Layout::Lines => {
            let mut out = Vec::new();
            for (n, line) in text.lines().enumerate() {
                let trimmed = line.trim();
                if trimmed.is_empty() {
                    continue;
                }
                let raw: &RawValue = serde_json::from_str(trimmed)
                    .map_err(|e| Error::json(format!("line {}", n + 1), &e))?;
                out.push(RawItem {
                    text: raw.get(),
                    line: n + 1,
                });
            }
            Ok(out)
        }
    }
}

/// The items of a JSON document's array, as slices of the input.
pub(crate) fn document_items(items: Vec<&RawValue>) -> Vec<RawItem<'_>> {
    items
        .into_iter()
        .map(|r| RawItem {
            text: r.get(),
            line: 0,
        })
        .collect()
}
