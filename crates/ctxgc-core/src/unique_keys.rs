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

use std::borrow::Cow;
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

/// Parses `text` into a [`serde_json::Value`] (a repeated key keeps its last value, as
/// serde_json does) and reports the first repeated key, in one pass over the text: the tree
/// is built by a visitor that notices a key already present in its object. Only when one is
/// found is the text walked again, by [`duplicate_key`], for the object's path.
///
/// ```
/// use ctxgc_core::unique_keys::parse_unique;
/// let (value, repeated) = parse_unique(r#"{"a": 1, "b": [{"c": 2.50}]}"#).unwrap();
/// assert_eq!(value["b"][0]["c"].to_string(), "2.50");
/// assert!(repeated.is_none());
/// let (value, repeated) = parse_unique(r#"{"a": 1, "a": 2}"#).unwrap();
/// assert_eq!(value["a"], 2);
/// assert_eq!(repeated.unwrap().key, "a");
/// assert!(parse_unique("{not json").is_err());
/// ```
pub fn parse_unique(
    text: &str,
) -> Result<(serde_json::Value, Option<DuplicateKey>), serde_json::Error> {
    let (value, repeated) = parse_noting_repeats(text)?;
    let found = if repeated { duplicate_key(text) } else { None };
    Ok((value, found))
}

/// Parses `text` as [`serde_json::from_str`] would, and says whether any object in it repeats
/// a key (without locating it: see [`parse_unique`] for that). One pass over the text.
///
/// ```
/// use ctxgc_core::unique_keys::parse_noting_repeats;
/// assert!(!parse_noting_repeats(r#"[{"a": 1}, {"a": 2}]"#).unwrap().1);
/// assert!(parse_noting_repeats(r#"{"a": {"b": 1, "b": 2}}"#).unwrap().1);
/// ```
pub fn parse_noting_repeats(text: &str) -> Result<(serde_json::Value, bool), serde_json::Error> {
    let mut repeated = false;
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Build {
        repeated: &mut repeated,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok((value, repeated))
}

/// The members of a JSON object in document order, each value built as
/// [`parse_noting_repeats`] builds it; keys are borrowed from the text where they hold no
/// escape.
pub type Members<'a> = Vec<(Cow<'a, str>, serde_json::Value)>;

/// Parses a JSON object into its [`Members`] in one pass, without building the object's own
/// hash map (a large trace's events are read this way: hashing every key of every event was
/// a third of lowering it). `None` when the text is not exactly one object, or when any object
/// in it repeats a key: the caller then parses it with [`parse_unique`], which says what is
/// wrong and where.
///
/// ```
/// use ctxgc_core::unique_keys::parse_members;
/// let members = parse_members(r#"{"id": "e1", "args": {"q": 1}}"#).unwrap();
/// assert_eq!(members[0].0, "id");
/// assert_eq!(members[1].1["q"], 1);
/// assert!(parse_members(r#"{"a": 1, "a": 2}"#).is_none());
/// assert!(parse_members(r#"{"a": {"b": 1, "b": 2}}"#).is_none());
/// assert!(parse_members("[1]").is_none());
/// assert!(parse_members("{} x").is_none());
/// ```
pub fn parse_members(text: &str) -> Option<Members<'_>> {
    if !text.trim_start().starts_with('{') {
        return None; // a number could reach `visit_map` as serde_json's private one-entry map
    }
    let mut repeated = false;
    let mut de = serde_json::Deserializer::from_str(text);
    let members = de
        .deserialize_map(MembersVisitor {
            repeated: &mut repeated,
        })
        .ok()?;
    de.end().ok()?;
    (!repeated).then_some(members)
}

/// Members an event usually has (its id, type, timestamp, parent and a few fields of its kind).
const TYPICAL_MEMBERS: usize = 12;

/// Objects with more members than this find repeated keys through a hash set, not by scanning.
const LINEAR_KEY_CHECK: usize = 16;

struct MembersVisitor<'r> {
    repeated: &'r mut bool,
}

impl<'de> Visitor<'de> for MembersVisitor<'_> {
    type Value = Members<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
        // Sized for a typical event, so reading one allocates once rather than growing twice.
        let mut members: Members<'de> = Vec::with_capacity(TYPICAL_MEMBERS);
        let mut seen: Option<HashSet<Cow<'de, str>>> = None;
        while let Some(key) = map.next_key_seed(BorrowedKey)? {
            if key == NUMBER_TOKEN && members.is_empty() {
                return Err(serde::de::Error::custom("a number, not an object"));
            }
            let value = map.next_value_seed(Build {
                repeated: &mut *self.repeated,
            })?;
            let repeat = match &mut seen {
                Some(seen) => !seen.insert(key.clone()),
                None => members.iter().any(|(k, _)| *k == key),
            };
            *self.repeated |= repeat;
            members.push((key, value));
            if seen.is_none() && members.len() > LINEAR_KEY_CHECK {
                seen = Some(members.iter().map(|(k, _)| k.clone()).collect());
            }
        }
        Ok(members)
    }
}

/// A key borrowed from the text when it holds no escape.
struct BorrowedKey;

impl<'de> DeserializeSeed<'de> for BorrowedKey {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for BorrowedKey {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v))
    }
}

/// Builds a [`serde_json::Value`] exactly as its own `Deserialize` does, noting whether any
/// object repeats a key.
struct Build<'a> {
    repeated: &'a mut bool,
}

/// How serde_json hands an arbitrary-precision number to a visitor: a one-entry map under
/// this key, whose value is the number's text.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

impl<'de> DeserializeSeed<'de> for Build<'_> {
    type Value = serde_json::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<serde_json::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_> {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<serde_json::Value, E> {
        Ok(serde_json::Number::from_f64(v)
            .map_or(serde_json::Value::Null, serde_json::Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_none<E>(self) -> Result<serde_json::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<serde_json::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(v) = seq.next_element_seed(Build {
            repeated: &mut *self.repeated,
        })? {
            items.push(v);
        }
        Ok(serde_json::Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<serde_json::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == NUMBER_TOKEN && object.is_empty() {
                let text: String = map.next_value()?;
                let number = text.parse().map_err(serde::de::Error::custom)?;
                return Ok(serde_json::Value::Number(number));
            }
            let value = map.next_value_seed(Build {
                repeated: &mut *self.repeated,
            })?;
            if object.insert(key, value).is_some() {
                *self.repeated = true;
            }
        }
        Ok(serde_json::Value::Object(object))
    }
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
