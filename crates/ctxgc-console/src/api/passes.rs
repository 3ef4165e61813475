//! `GET /api/passes`: every reason code with its pass's documentation.

use axum::response::Response;
use ctxgc_core::Reason;
use serde::Serialize;

use super::json_response;
use crate::error::ApiError;

/// One reason code and the documentation of the pass that emits it.
#[derive(Debug, Serialize)]
pub struct PassInfo {
    /// The code (`superseded-var`, ...).
    pub code: &'static str,
    /// One line: what the pass does.
    pub summary: &'static str,
    /// What it retires or rewrites, why that is safe, an example.
    pub doc: String,
}

/// Every code in pipeline order.
pub fn all() -> Vec<PassInfo> {
    Reason::ALL
        .into_iter()
        .map(|reason| {
            let doc = ctxgc_core::passes::doc_for(reason);
            PassInfo {
                code: reason.code(),
                summary: doc.map_or("", |d| d.summary),
                doc: doc.map(|d| module_doc(d.doc)).unwrap_or_default(),
            }
        })
        .collect()
}

/// The pass module's opening `//!` comment as plain text.
fn module_doc(source: &str) -> String {
    let mut out = String::new();
    for line in source.lines().take_while(|l| l.starts_with("//!")) {
        let text = line.trim_start_matches("//!");
        out.push_str(text.strip_prefix(' ').unwrap_or(text));
        out.push('\n');
    }
    out
}

/// The handler.
pub async fn passes() -> Result<Response, ApiError> {
    json_response(&all())
}
