//! Upstream credentials stay in the proxy: every text the agent receives (tool lists, tool
//! results, error messages) passes through a [`Redactor`] holding the credential values of
//! the server configuration and of the environment the upstreams inherit, so not even a
//! server that echoes its own key, nor an error that quotes a URL, can hand one to the
//! agent.
//!
//! A credential reaches the agent in whatever encoding the server wrote it in, so each one
//! is searched in every form a tool output commonly carries: as it is, JSON-escaped (once
//! and twice, with and without `\uXXXX` for non-ASCII, as Python's `json.dumps` writes it),
//! percent-encoded (both hex cases, space as `%20` or `+`) and base64 (standard and URL
//! alphabets, at each of the three alignments inside a longer encoded text, as in HTTP Basic
//! credentials). All forms are matched in one pass (Aho-Corasick, leftmost longest).

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine;
use serde_json::Value;

/// What a credential is replaced with.
pub const HIDDEN: &str = "[credential hidden by ctxgc]";

/// Values shorter than this are not treated as credentials: replacing every "1" or "yes" in
/// tool outputs would corrupt them, and such values protect nothing. The proxy says at start
/// how many it could not redact.
pub const MIN_SECRET_LEN: usize = 6;

/// Replaces known credential values, in all their encodings, in text sent to the agent.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Every encoded form of every credential, sorted, deduplicated.
    patterns: Vec<String>,
    matcher: Option<AhoCorasick>,
    too_short: usize,
}

impl Redactor {
    /// A redactor for `secrets`; values shorter than [`MIN_SECRET_LEN`] are counted (see
    /// [`Redactor::too_short`]), not searched.
    ///
    /// ```
    /// use ctxgc_proxy::redact::Redactor;
    /// let r = Redactor::new(["sk-live-1234567".to_string(), "abc".to_string()]);
    /// assert_eq!(r.text("key sk-live-1234567 failed"), "key [credential hidden by ctxgc] failed");
    /// assert_eq!(r.too_short(), 1);
    /// // The same key, base64-encoded inside HTTP Basic credentials:
    /// assert!(!r.text("Basic dXNlcjpzay1saXZlLTEyMzQ1Njc=").contains("LTEyMzQ1"));
    /// ```
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut too_short = std::collections::BTreeSet::new();
        let mut patterns = Vec::new();
        for secret in secrets {
            if secret.chars().count() < MIN_SECRET_LEN {
                if !secret.trim().is_empty() {
                    too_short.insert(secret);
                }
                continue;
            }
            patterns.extend(encodings(&secret));
        }
        patterns.retain(|p| p.chars().count() >= MIN_SECRET_LEN);
        patterns.sort();
        patterns.dedup();
        let matcher = if patterns.is_empty() {
            None
        } else {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&patterns)
                .ok()
        };
        Redactor {
            patterns,
            matcher,
            too_short: too_short.len(),
        }
    }

    /// Whether there is nothing to hide.
    pub fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    /// How many distinct credential values were too short to be redacted.
    pub fn too_short(&self) -> usize {
        self.too_short
    }

    /// How many encoded forms are searched.
    pub fn forms(&self) -> usize {
        self.patterns.len()
    }

    /// `text` with every credential, in every encoding, replaced by [`HIDDEN`].
    pub fn text(&self, text: &str) -> String {
        match &self.matcher {
            Some(matcher) if matcher.is_match(text) => {
                let replacements = vec![HIDDEN; self.patterns.len()];
                matcher.replace_all(text, &replacements)
            }
            _ => text.to_owned(),
        }
    }

    /// Whether `text` holds a credential.
    pub fn finds_any(&self, text: &str) -> bool {
        self.matcher.as_ref().is_some_and(|m| m.is_match(text))
    }

    /// Replaces credentials in every string (and object key) of `value`, in place.
    pub fn value(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(s) => {
                if self.finds_any(s) {
                    *s = self.text(s);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            Value::Object(map) => {
                if map.keys().any(|k| self.finds_any(k)) {
                    let old = std::mem::take(map);
                    for (k, mut v) in old {
                        self.value(&mut v);
                        map.insert(self.text(&k), v);
                    }
                } else {
                    map.values_mut().for_each(|v| self.value(v));
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

/// Every form of `secret` the agent could receive.
fn encodings(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_owned()];
    let once = [json_escaped(secret, false), json_escaped(secret, true)];
    for escaped in &once {
        forms.push(escaped.clone());
        // A JSON document inside a JSON string (a text block that is itself JSON text).
        forms.push(json_escaped(escaped, false));
    }
    for upper in [true, false] {
        for plus in [true, false] {
            forms.push(percent_encoded(secret, upper, plus));
        }
    }
    forms.extend(base64_cores(secret.as_bytes()));
    forms
}

/// `text` as inside a JSON string; `ascii`: non-ASCII as `\uXXXX` (Python's default).
fn json_escaped(text: &str, ascii: bool) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ascii && !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// Percent-encoding of every byte but the unreserved ones (RFC 3986).
fn percent_encoded(text: &str, upper: bool, space_as_plus: bool) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for &b in text.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(b))
            }
            b' ' if space_as_plus => out.push('+'),
            _ if upper => out.push_str(&format!("%{b:02X}")),
            _ => out.push_str(&format!("%{b:02x}")),
        }
    }
    out
}

/// The base64 characters that depend on `bytes` alone, wherever they start in a longer
/// encoded text: for each alignment (0, 1 or 2 bytes before them in their group), the
/// characters whose six bits all come from `bytes`.
fn base64_cores(bytes: &[u8]) -> Vec<String> {
    let engines = [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::URL_SAFE,
    ];
    let mut out = Vec::new();
    for engine in engines {
        for offset in 0..3usize {
            let mut padded = vec![0u8; offset];
            padded.extend_from_slice(bytes);
            let encoded = engine.encode(&padded);
            let first = (8 * offset).div_ceil(6);
            let last = 8 * (offset + bytes.len()) / 6;
            if last > first && last <= encoded.len() {
                out.push(encoded[first..last].to_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_longest_first_and_ignores_short_values() {
        let r = Redactor::new([
            "Bearer tok-abcdef".into(),
            "tok-abcdef".into(),
            "yes".into(),
        ]);
        assert_eq!(r.too_short(), 1);
        assert_eq!(
            r.text("Authorization: Bearer tok-abcdef"),
            format!("Authorization: {HIDDEN}")
        );
        assert_eq!(r.text("tok-abcdef yes"), format!("{HIDDEN} yes"));
        let mut v = serde_json::json!({"a": ["x tok-abcdef"], "tok-abcdef": 1, "n": 3});
        r.value(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"a": [format!("x {HIDDEN}")], HIDDEN: 1, "n": 3})
        );
    }

    #[test]
    fn every_encoding_is_found() {
        let secret = "pa\"ss\\wörd 42/x";
        let r = Redactor::new([secret.to_string()]);
        let as_json = serde_json::to_string(&serde_json::json!({"k": secret})).unwrap();
        let as_python = r#"{"k": "pa\"ss\\w\u00f6rd 42/x"}"#;
        let nested = serde_json::to_string(&serde_json::json!({"text": as_json})).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("user:{secret}"));
        let b64url =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("xy{secret}z"));
        let url = format!("https://h/?p={}", percent_encoded(secret, true, false));
        let form = format!("p={}&q=1", percent_encoded(secret, false, true));
        for (what, text) in [
            ("raw", format!("the key is {secret}.")),
            ("json", as_json),
            ("python json", as_python.to_owned()),
            ("json in json", nested),
            ("base64", format!("Basic {b64}")),
            ("base64url", b64url),
            ("url", url),
            ("form", form),
        ] {
            let out = r.text(&text);
            assert!(out.contains(HIDDEN), "{what}: {text} -> {out}");
            for core in base64_cores(secret.as_bytes()) {
                assert!(!out.contains(&core), "{what}: {out}");
            }
            assert!(
                !out.contains("ss\\\\w") && !out.contains("ss\\w"),
                "{what}: {out}"
            );
        }
    }
}
