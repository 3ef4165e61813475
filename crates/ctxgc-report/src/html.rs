//! What every page shares: escaping text for HTML, inline code spans, number formatting.

use std::fmt::Write as _;

/// Escapes text for HTML content and attribute values (`& < > " '`).
///
/// ```
/// assert_eq!(ctxgc_report::html::escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
/// ```
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Text with `backtick` spans written as `<code>` elements, everything escaped.
///
/// ```
/// assert_eq!(ctxgc_report::html::code_spans("use `<b>` now"), "use <code>&lt;b&gt;</code> now");
/// ```
pub fn code_spans(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", escape(part));
        } else {
            out.push_str(&escape(part));
        }
    }
    out
}

/// A count with thousands separators.
///
/// ```
/// assert_eq!(ctxgc_report::thousands(1_234_567), "1,234,567");
/// assert_eq!(ctxgc_report::thousands(12), "12");
/// ```
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A share (0.0–1.0) as a percentage with one decimal.
///
/// ```
/// assert_eq!(ctxgc_report::html::percent(0.1234), "12.3%");
/// ```
pub fn percent(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}
