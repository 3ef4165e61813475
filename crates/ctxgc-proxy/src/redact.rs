//! Upstream credentials stay in the proxy: every text the agent receives (tool lists, tool
//! results, error messages) passes through a [`Redactor`] holding the credential values of
//! the server configuration, so not even a server that echoes its own key, nor an error that
//! quotes a URL, can hand one to the agent.

use serde_json::Value;

/// What a credential is replaced with.
pub const HIDDEN: &str = "[credential hidden by ctxgc]";

/// Values shorter than this are not treated as credentials: replacing every "1" or "yes" in
/// tool outputs would corrupt them, and such values protect nothing.
pub const MIN_SECRET_LEN: usize = 6;

/// Replaces known credential values in text sent to the agent.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so "Bearer XYZ" is replaced whole before "XYZ".
    secrets: Vec<String>,
}

impl Redactor {
    /// A redactor for `secrets`; values shorter than [`MIN_SECRET_LEN`] are ignored.
    ///
    /// ```
    /// use ctxgc_proxy::redact::Redactor;
    /// let r = Redactor::new(["sk-live-1234567".to_string()]);
    /// assert_eq!(r.text("key sk-live-1234567 failed"), "key [credential hidden by ctxgc] failed");
    /// ```
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .filter(|s| s.chars().count() >= MIN_SECRET_LEN)
            .collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Redactor { secrets }
    }

    /// Whether there is nothing to hide.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every credential replaced by [`HIDDEN`].
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), HIDDEN);
            }
        }
        out
    }

    /// Whether `text` holds a credential.
    pub fn finds_any(&self, text: &str) -> bool {
        self.secrets.iter().any(|s| text.contains(s.as_str()))
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
}
