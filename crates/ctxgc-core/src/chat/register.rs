//! The register: the live declared state as one block the model reads after the system prompt.
//!
//! ```text
//! [ACTIVE_AGENT_STATE]
//! - active_reservation = "0U4NPP" (m2, declared)
//! - cabin_class = "economy" (m6, declared)
//! ```
//!
//! One line per key (sorted by key): the value as JSON, the message that supports it, and
//! `declared`, `pinned` or `unsure`, then `flagged: ...` when a schema problem was accepted
//! under policy `flag`. The register is its own system message (or system block), never an
//! edit of the policy text. A register already in the input — the output of an earlier
//! compile — is read back (its facts are carried over, with their provenance) and replaced,
//! never stacked.
//!
//! ```
//! use ctxgc_core::chat::register::{parse, Line};
//! let lines = parse("[ACTIVE_AGENT_STATE]\n- cabin_class = \"economy\" (m6, declared)").unwrap();
//! assert!(matches!(&lines[0], Line::Fact { key, provenance, .. } if key == "cabin_class" && provenance == "m6"));
//! assert!(parse("You are an airline agent.").is_none());
//! ```

use std::collections::BTreeMap;

use serde_json::Value;

use crate::chat::state::{Fact, Status};

/// The register's first line; also how a register in the input is recognised.
pub const HEADER: &str = "[ACTIVE_AGENT_STATE]";

/// Renders the register, or `None` when no fact is live.
///
/// ```
/// use ctxgc_core::chat::register::render;
/// use ctxgc_core::chat::state::{Fact, Status};
/// use std::collections::BTreeMap;
/// let fact = Fact { value: "economy".into(), status: Status::Declared, support: 6,
///                   provenance: "m6".into(), carried: false, flags: vec![] };
/// let facts = BTreeMap::from([("cabin_class", &fact)]);
/// assert_eq!(render(&facts).unwrap(), "[ACTIVE_AGENT_STATE]\n- cabin_class = \"economy\" (m6, declared)");
/// ```
pub fn render(facts: &BTreeMap<&str, &Fact>) -> Option<String> {
    if facts.is_empty() {
        return None;
    }
    let mut out = String::from(HEADER);
    for (key, fact) in facts {
        out.push_str("\n- ");
        out.push_str(key);
        out.push_str(" = ");
        out.push_str(&fact.value.to_string());
        out.push_str(" (");
        out.push_str(&fact.provenance);
        out.push_str(", ");
        out.push_str(fact.status.word());
        if !fact.flags.is_empty() {
            out.push_str(", flagged: ");
            // Newlines would break the one-line-per-key shape.
            out.push_str(&fact.flags.join("; ").replace(['\n', '\r'], " "));
        }
        out.push(')');
    }
    Some(out)
}

/// One line of a register read back.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// A fact.
    Fact {
        /// The key.
        key: String,
        /// The value.
        value: Value,
        /// Its provenance (the message id shown).
        provenance: String,
        /// declared, pinned or unsure.
        status: Status,
        /// Flags it carried.
        flags: Vec<String>,
    },
    /// A line that does not have the shape [`render`] writes.
    Unreadable(String),
}

/// Reads a register back; `None` when `text` is not a register.
pub fn parse(text: &str) -> Option<Vec<Line>> {
    let rest = text.trim_start().strip_prefix(HEADER)?;
    if !(rest.is_empty() || rest.starts_with(['\n', '\r'])) {
        return None;
    }
    Some(
        rest.lines()
            .map(str::trim_end)
            .filter(|l| !l.trim().is_empty())
            .map(|l| parse_line(l).unwrap_or_else(|| Line::Unreadable(l.to_owned())))
            .collect(),
    )
}

fn parse_line(line: &str) -> Option<Line> {
    let body = line.strip_prefix("- ")?;
    let (key, rest) = body.split_once(" = ")?;
    let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    let value = stream.next()?.ok()?;
    let tail = rest[stream.byte_offset()..].trim();
    let inner = tail.strip_prefix('(')?.strip_suffix(')')?;
    let mut parts = inner.splitn(3, ", ");
    let provenance = parts.next()?.to_owned();
    let status = Status::from_word(parts.next()?)?;
    let flags = match parts.next() {
        None => Vec::new(),
        Some(f) => vec![f.strip_prefix("flagged: ")?.to_owned()],
    };
    Some(Line::Fact {
        key: key.to_owned(),
        value,
        provenance,
        status,
        flags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_then_parse_round_trips() {
        let a = Fact {
            value: serde_json::json!({"city": "Austin (TX)", "zip": 78750}),
            status: Status::Pinned,
            support: 3,
            provenance: "m3".into(),
            carried: false,
            flags: vec!["does not match /^x$/".into()],
        };
        let b = Fact {
            value: "maybe west".into(),
            status: Status::Unsure,
            support: 5,
            provenance: "msg_9".into(),
            carried: false,
            flags: vec![],
        };
        let facts = BTreeMap::from([("address", &a), ("rider", &b)]);
        let text = render(&facts).unwrap();
        let lines = parse(&text).unwrap();
        assert_eq!(
            lines,
            vec![
                Line::Fact {
                    key: "address".into(),
                    value: a.value.clone(),
                    provenance: "m3".into(),
                    status: Status::Pinned,
                    flags: a.flags.clone(),
                },
                Line::Fact {
                    key: "rider".into(),
                    value: b.value.clone(),
                    provenance: "msg_9".into(),
                    status: Status::Unsure,
                    flags: vec![],
                },
            ]
        );
    }

    #[test]
    fn odd_lines_are_reported_not_guessed() {
        let lines = parse("[ACTIVE_AGENT_STATE]\n- k = oops (m1, declared)").unwrap();
        assert!(matches!(&lines[0], Line::Unreadable(_)));
        assert!(parse("[ACTIVE_AGENT_STATE] trailing").is_none());
    }
}
