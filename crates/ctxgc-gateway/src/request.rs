//! A conversation request, parsed by borrowing: every top-level field and every message stays
//! a slice of the body (`serde_json` raw values), so nothing is copied or re-encoded, and a
//! message is recognised by the hash of its exact bytes.

use ctxgc_core::Format;
use ctxgc_core::chat::lowering::object_entries;
use serde_json::value::RawValue;

use crate::endpoint::items_key;

/// How many leading messages are searched for the first user message.
const PREFIX_SCAN: usize = 8;

/// A message's identity: blake3 of its exact bytes.
pub type MessageHash = [u8; 32];

/// A request body whose conversation the gateway compiles.
#[derive(Debug)]
pub struct Conversation<'a> {
    /// The provider format.
    pub format: Format,
    /// Every top-level entry, in order, as exact bytes.
    pub entries: Vec<(String, &'a RawValue)>,
    /// The key of the item list.
    pub items_key: &'static str,
    /// The Anthropic `system` prompt, if any.
    pub system: Option<&'a RawValue>,
    /// The messages (or Responses input items), as exact bytes.
    pub messages: Vec<&'a RawValue>,
    /// True when the request asks for a server-sent-event stream.
    pub stream: bool,
}

/// What a conversation endpoint's body turned out to be.
#[derive(Debug)]
pub enum Parsed<'a> {
    /// A conversation to compile.
    Conversation(Conversation<'a>),
    /// Nothing to compile (no item list, or a Responses `input` given as one string): the
    /// body goes upstream as it came.
    Nothing {
        /// Whether it asks for a stream.
        stream: bool,
    },
}

/// A body the gateway cannot read, with what is wrong and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadRequest(pub String);

/// Parses a request body of a conversation endpoint.
///
/// ```
/// use ctxgc_core::Format;
/// use ctxgc_gateway::request::{Parsed, parse};
/// let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#;
/// let Parsed::Conversation(c) = parse(body, Format::OpenaiChat).unwrap() else { panic!() };
/// assert_eq!(c.messages[0].get(), r#"{"role":"user","content":"hi"}"#);
/// assert!(c.stream);
/// assert!(parse(b"{\"messages\": 3}", Format::OpenaiChat).unwrap_err().0.contains("`messages`"));
/// ```
pub fn parse(body: &[u8], format: Format) -> Result<Parsed<'_>, BadRequest> {
    let text = std::str::from_utf8(body).map_err(|e| {
        BadRequest(format!(
            "the request body is not valid UTF-8 (at byte {})",
            e.valid_up_to()
        ))
    })?;
    let text = text.trim_start_matches('\u{feff}').trim();
    if !text.starts_with('{') {
        return Err(BadRequest(
            "the request body must be a JSON object".to_owned(),
        ));
    }
    let entries = object_entries(text)
        .map_err(|e| BadRequest(format!("the request body is not valid JSON: {e}")))?;
    let wire = format.wire();
    let key = items_key(format);
    let mut seen = std::collections::BTreeSet::new();
    for (k, _) in &entries {
        if !seen.insert(k.as_str()) && (k == key || k == "system" || k == "stream") {
            return Err(BadRequest(format!(
                "the request body has `{k}` more than once"
            )));
        }
    }
    let field = |name: &str| entries.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    let stream = match field("stream") {
        None => false,
        Some(v) => match v.get() {
            "true" => true,
            "false" | "null" => false,
            other => {
                return Err(BadRequest(format!(
                    "`stream` must be true or false, found {other}"
                )));
            }
        },
    };
    let Some(list) = field(key) else {
        return Ok(Parsed::Nothing { stream });
    };
    if wire.items_may_be_string() && list.get().starts_with('"') {
        return Ok(Parsed::Nothing { stream });
    }
    let messages: Vec<&RawValue> = serde_json::from_str(list.get()).map_err(|e| {
        BadRequest(format!(
            "`{key}` must be a JSON array of {}: {e}",
            wire.item_noun()
        ))
    })?;
    for (i, m) in messages.iter().enumerate() {
        if !m.get().starts_with('{') {
            return Err(BadRequest(format!(
                "`{key}[{i}]` must be a JSON object, found {}",
                m.get().chars().take(40).collect::<String>()
            )));
        }
    }
    let system = wire.system_key().and_then(field);
    Ok(Parsed::Conversation(Conversation {
        format,
        entries,
        items_key: key,
        system,
        messages,
        stream,
    }))
}

impl Conversation<'_> {
    /// The hashes of the items as the compiler sees them: the Anthropic system prompt first
    /// (when given), then each message.
    pub fn item_hashes(&self) -> Vec<MessageHash> {
        self.system
            .iter()
            .chain(self.messages.iter())
            .map(|raw| *blake3::hash(raw.get().as_bytes()).as_bytes())
            .collect()
    }

    /// The hash of the stable prefix that names a conversation when the client names none:
    /// the format, the system prompt and the messages up to the first user message (the
    /// task), which every later request of the conversation repeats.
    pub fn prefix_key(&self) -> String {
        #[derive(serde::Deserialize)]
        struct Role<'a> {
            #[serde(borrow, default)]
            role: Option<&'a str>,
        }
        let first_user = self
            .messages
            .iter()
            .take(PREFIX_SCAN)
            .position(|m| {
                serde_json::from_str::<Role>(m.get()).is_ok_and(|r| r.role == Some("user"))
            })
            .unwrap_or(0);
        let mut hasher = blake3::Hasher::new();
        hasher.update(self.format.name().as_bytes());
        hasher.update(b"\0");
        for raw in self
            .system
            .iter()
            .chain(self.messages.iter().take(first_user + 1))
        {
            hasher.update(raw.get().as_bytes());
            hasher.update(b"\0");
        }
        let hex = hasher.finalize().to_hex();
        format!("auto-{}", &hex[..32])
    }

    /// The entries as owned `(key, raw value)` pairs, as the renderer's envelope wants them.
    pub fn owned_entries(&self) -> Vec<(String, String)> {
        self.entries
            .iter()
            .map(|(k, v)| {
                // The item list is replaced by the compiled one: no need to copy it.
                let value = if k == self.items_key {
                    String::new()
                } else {
                    v.get().to_owned()
                };
                (k.clone(), value)
            })
            .collect()
    }
}
