//! # ctxgc-report
//!
//! The pages ctxgc writes for people: every one self-contained (inline CSS and SVG, no
//! script, no external asset) and byte-identical for identical input. The compiler core
//! renders no HTML; it hands out plain report data, and this crate turns it into pages.
//!
//! - [`html`]: escaping and the small pieces every page shares;
//! - [`projection`]: the tool-output report of learned projections (`ctxgc report`, and the
//!   page the proxy serves in its automatic mode).
//!
//! ```
//! use ctxgc_core::projection::{Run, report::Report, measure::MeasureOptions};
//! use serde_json::json;
//! let mut run = Run::new("r0");
//! run.push_call("lookup", json!({"q": "x"}), r#"{"id": "K07", "body": "<long> text"}"#.to_owned(), None);
//! run.push_message("Found K07.", None);
//! let page = ctxgc_report::projection::render_html(&Report::build("demo & co", &[run], &MeasureOptions::default()));
//! assert!(page.starts_with("<!DOCTYPE html>"));
//! assert!(page.contains("demo &amp; co"));
//! assert!(!page.contains("<script"));
//! ```
#![warn(missing_docs)]

pub mod html;
pub mod projection;

pub use html::thousands;
