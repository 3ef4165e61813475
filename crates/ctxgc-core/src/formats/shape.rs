//! How detection sees a document object: what each top-level member holds ([`ObjectShape`],
//! [`Member`]) and how a format claims the object ([`ObjectClaim`]). Plain types a codec's
//! [`claims_object`](crate::formats::WireFormat::claims_object) reads and writes.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::frontend::split::Layout;

/// What a member of a document object holds, as detection sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member {
    /// A JSON array.
    List,
    /// A JSON string.
    Text,
    /// Anything else.
    Other,
}

/// The top-level members of a document object, as detection sees them.
pub trait ObjectShape {
    /// What member `key` holds, if the object has it.
    fn member(&self, key: &str) -> Option<Member>;
}

impl ObjectShape for std::collections::HashMap<String, &RawValue> {
    fn member(&self, key: &str) -> Option<Member> {
        self.get(key).map(|raw| member_of_text(raw.get()))
    }
}

impl ObjectShape for Map<String, Value> {
    fn member(&self, key: &str) -> Option<Member> {
        self.get(key).map(|v| match v {
            Value::Array(_) => Member::List,
            Value::String(_) => Member::Text,
            _ => Member::Other,
        })
    }
}

fn member_of_text(text: &str) -> Member {
    match text.as_bytes().first() {
        Some(b'[') => Member::List,
        Some(b'"') => Member::Text,
        _ => Member::Other,
    }
}

/// How a format claims a document object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectClaim {
    /// How the object lays out its items.
    pub layout: Layout,
    /// True when the format is then told by the list's first item (a `messages` list holds
    /// whichever format's messages); the claiming format where the list is empty.
    pub by_first_item: bool,
}
