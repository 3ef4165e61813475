//! Duplicate object keys in JSON input.
//!
//! JSON parsers disagree on `{"role": "user", "role": "assistant"}`: most keep the last value,
//! some the first, some refuse. Taking one silently would compile something other than what a
//! provider (or a person reading the file) sees, so input with a repeated key is refused, with
//! the path of the object and the key.
//!
//! ```
//! use ctxgc_core::unique_keys::duplicate_key;
//! assert_eq!(duplicate_key(r#"{"a": 1, "b": {"c": 2}}"#), None);
//! let found = duplicate_key(r#"{"content": [{"type": "text", "text": "a", "text": "b"}]}"#).unwrap();
//! assert_eq!(found.path, "$.content[0]");
//! assert_eq!(found.key, "text");
//! ```

use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A key that occurs twice in one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// Where the object is (`$` is the whole text, `$.messages[3]` ...).
    pub path: String,
    /// The repeated key.
    pub key: String,
}

impl fmt::Display for DuplicateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "duplicate key {:?} in the object at {}",
            self.key, self.path
        )
    }
}

/// The first key repeated within one object of `text`, in document order. `None` when there is
/// none, or when `text` is not JSON (the caller's parser reports that).
pub fn duplicate_key(text: &str) -> Option<DuplicateKey> {
    let mut found = None;
    let mut de = serde_json::Deserializer::from_str(text);
    // Deep input is refused by serde_json's own nesting limit, like any other parse.
    let _ = Walk {
        path: "$".to_owned(),
        found: &mut found,
    }
    .deserialize(&mut de);
    found
}

/// Walks a value, stopping at the first repeated key.
struct Walk<'a> {
    path: String,
    found: &'a mut Option<DuplicateKey>,
}

/// Stops the walk once a duplicate is found (the error carries no information of its own).
fn stop<E: serde::de::Error>() -> E {
    E::custom("duplicate key")
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut k = 0usize;
        loop {
            let element = Walk {
                path: format!("{}[{k}]", self.path),
                found: &mut *self.found,
            };
            if seq.next_element_seed(element)?.is_none() {
                return Ok(());
            }
            k += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen: HashSet<String> = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            // serde_json hands an arbitrary-precision number over as a one-entry map with a
            // private key; its value is the number's text.
            if key == "$serde_json::private::Number" {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            if !seen.insert(key.clone()) {
                *self.found = Some(DuplicateKey {
                    path: self.path,
                    key,
                });
                return Err(stop());
            }
            let path = if key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                format!("{}.{key}", self.path)
            } else {
                format!("{}[{}]", self.path, serde_json::Value::String(key.clone()))
            };
            map.next_value_seed(Walk {
                path,
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_repeat_at_any_depth() {
        assert_eq!(duplicate_key("[1, 2.5, 1e400, \"x\", null, true]"), None);
        let d = duplicate_key(r#"{"a": {"b": [0, {"k": 1, "k": 2}]}}"#).unwrap();
        assert_eq!((d.path.as_str(), d.key.as_str()), ("$.a.b[1]", "k"));
        let d = duplicate_key(r#"{"odd key": {"x": 1, "x": 1}}"#).unwrap();
        assert_eq!(d.path, "$[\"odd key\"]");
        assert_eq!(duplicate_key("{not json"), None);
    }
}
