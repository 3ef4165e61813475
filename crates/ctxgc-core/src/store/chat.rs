//! Chat sessions in a store: a conversation appended a few messages at a time (in OpenAI
//! Chat Completions, Anthropic Messages or OpenAI Responses form), with its request envelope
//! (system prompt, tools, model and every other field), compiled from any process exactly as
//! `ctxgc compile` compiles the whole transcript.
//!
//! A stored chat is a [`ChatTranscript`]: the envelope of the latest request that carried one
//! (the request object with its message list emptied, every other field as its exact bytes)
//! and every message ever appended, as its exact bytes, with the id `ctxgc compile` gives it in
//! the whole transcript. [`ChatTranscript::text`] is that whole transcript;
//! [`ChatTranscript::compile`] compiles it.
//!
//! [`append_chat`] is the front door for a writer (an agent loop, a gateway): it lowers the
//! new request, checks the whole transcript still lowers and that no message already stored
//! changes its id, and stores the new messages (each also kept as its receipt). Appends never
//! fork: a writer that is behind gets [`StoreError::Conflict`] (when it asked for a position)
//! or catches up and retries.
//!
//! ```
//! use ctxgc_core::store::MemoryStore;
//! use ctxgc_core::store::chat::{ChatAppend, append_chat};
//! use ctxgc_core::store::Store;
//! use ctxgc_core::Options;
//!
//! let mut store = MemoryStore::new();
//! // The first request: the envelope (model, tools) and two messages.
//! let first = r#"{"model": "gpt-4o", "messages": [
//!   {"role": "user", "content": "Weather in Oslo?"},
//!   {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]}
//! ]}"#;
//! let appended = append_chat(&mut store, "ctx-1", first, &ChatAppend::default()).unwrap();
//! assert_eq!((appended.range.clone(), appended.ids.clone()), (0..2, vec!["m0".to_owned(), "m1".to_owned()]));
//! // The next turn: only the new messages, as a bare list (the envelope stays).
//! let next = r#"[{"role": "tool", "tool_call_id": "c1", "content": "{\"temp_c\": 4}"},
//!               {"role": "assistant", "content": "4 °C in Oslo."}]"#;
//! let appended = append_chat(&mut store, "ctx-1", next, &ChatAppend::default()).unwrap();
//! assert_eq!(appended.ids, ["m2", "m3"], "ids continue across appends");
//!
//! let transcript = store.chat_transcript("ctx-1").unwrap().unwrap();
//! let whole = transcript.text();
//! assert!(whole.starts_with(r#"{"model":"gpt-4o","messages":[{"role": "user""#));
//! // Compiling the stored session is compiling the whole transcript.
//! let options = Options::default();
//! assert_eq!(transcript.compile(&options).unwrap().output, ctxgc_core::compile(&whole, &options).unwrap().output);
//! ```

use std::ops::Range;

use crate::chat::compile::{ChatInput, lower_chat_input, record_item_id};
use crate::chat::lowering::{ChatDoc, Envelope, object_entries};
use crate::compile::{Compiled, Options};
use crate::error::Error;
use crate::formats::Format;

use super::{Store, StoreError};

/// True for the formats a chat session can hold.
pub fn is_chat_format(format: Format) -> bool {
    format.wire().is_chat()
}

/// What every backend checks before a chat append ([`Store::chat_append`]), on what it read of
/// the session: a session that holds a format must hold a chat format and be a chat session,
/// and the caller must have seen all `actual` messages stored so far.
///
/// ```
/// use ctxgc_core::Format;
/// use ctxgc_core::store::chat::check_chat_append;
/// assert!(check_chat_append("c", Some(Format::OpenaiChat), true, Format::Anthropic, 2, 2).is_ok());
/// assert!(check_chat_append("c", Some(Format::Events), false, Format::OpenaiChat, 0, 0).is_err());
/// assert!(check_chat_append("c", None, false, Format::OpenaiChat, 1, 0).is_err());
/// ```
pub fn check_chat_append(
    context_id: &str,
    stored: Option<Format>,
    is_chat_session: bool,
    appended: Format,
    actual: u64,
    expected: u64,
) -> Result<(), StoreError> {
    if let Some(stored) = stored {
        if !is_chat_format(stored) || !is_chat_format(appended) {
            return Err(StoreError::FormatMismatch {
                context_id: context_id.to_owned(),
                stored: stored.name(),
                appended: appended.name(),
            });
        }
        if !is_chat_session {
            return Err(holds_items(context_id));
        }
    }
    if actual != expected {
        return Err(StoreError::Conflict {
            context_id: context_id.to_owned(),
            expected,
            actual,
        });
    }
    Ok(())
}

/// The error every backend gives for an item append ([`Store::append`]) to a chat session.
pub fn holds_chat(context_id: &str) -> StoreError {
    StoreError::Rejected {
        context_id: context_id.to_owned(),
        source: Error::Usage(
            "the session holds a chat transcript: append messages with `chat_append`".into(),
        ),
    }
}

/// The error every backend gives for a chat append ([`Store::chat_append`]) to a session of
/// items.
pub fn holds_items(context_id: &str) -> StoreError {
    StoreError::Rejected {
        context_id: context_id.to_owned(),
        source: Error::Usage(
            "the session holds items appended one by one (`append`), not a chat transcript".into(),
        ),
    }
}

/// The key of the message list in a request of `format`: `input` for Responses, else
/// `messages`.
pub fn items_key(format: Format) -> &'static str {
    format.wire().items_key()
}

/// A chat request without its messages: every other field (system prompt, tools, model,
/// record id, ...) as its exact bytes, in order, and the key that holds the message list
/// (`messages`, or `input` for Responses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatEnvelope {
    entries: Vec<(String, String)>,
    items_key: String,
}

impl ChatEnvelope {
    /// An envelope from a request's entries `(key, exact JSON value)`, in order; `items_key`
    /// must be one of them (its value is ignored: the messages live beside the envelope).
    pub fn new(entries: Vec<(String, String)>, items_key: &str) -> Result<Self, Error> {
        if !entries.iter().any(|(k, _)| k == items_key) {
            return Err(Error::Usage(format!(
                "a chat envelope needs its `{items_key}` entry"
            )));
        }
        for (key, value) in &entries {
            serde_json::from_str::<&serde_json::value::RawValue>(value).map_err(|e| {
                Error::Usage(format!(
                    "chat envelope entry `{key}` is not one JSON value: {e}"
                ))
            })?;
        }
        Ok(ChatEnvelope {
            entries,
            items_key: items_key.to_owned(),
        })
    }

    /// The entries, in order, as exact JSON text.
    pub fn entries(&self) -> &[(String, String)] {
        &self.entries
    }

    /// The key of the message list.
    pub fn items_key(&self) -> &str {
        &self.items_key
    }

    /// The envelope as one JSON object, its message list empty: how stores keep it.
    ///
    /// ```
    /// use ctxgc_core::store::chat::ChatEnvelope;
    /// let envelope = ChatEnvelope::new(vec![("model".into(), r#""gpt-4o""#.into()), ("messages".into(), "[1]".into())], "messages").unwrap();
    /// assert_eq!(envelope.to_json(), r#"{"model":"gpt-4o","messages":[]}"#);
    /// assert_eq!(ChatEnvelope::from_json(&envelope.to_json(), "messages").unwrap(), ChatEnvelope::new(vec![("model".into(), r#""gpt-4o""#.into()), ("messages".into(), "[]".into())], "messages").unwrap());
    /// ```
    pub fn to_json(&self) -> String {
        self.with_items("[]")
    }

    /// Reads an envelope written by [`ChatEnvelope::to_json`].
    pub fn from_json(text: &str, items_key: &str) -> Result<Self, Error> {
        let entries = object_entries(text)
            .map_err(|e| Error::json("chat envelope", &e))?
            .into_iter()
            .map(|(k, v)| (k, v.get().to_owned()))
            .collect();
        ChatEnvelope::new(entries, items_key)
    }

    /// The envelope with `items` (a JSON array's text) as its message list.
    fn with_items(&self, items: &str) -> String {
        let mut text = String::from("{");
        for (n, (key, value)) in self.entries.iter().enumerate() {
            if n > 0 {
                text.push(',');
            }
            text.push_str(&serde_json::Value::String(key.clone()).to_string());
            text.push(':');
            text.push_str(if *key == self.items_key { items } else { value });
        }
        text.push('}');
        text
    }
}

/// One stored message: its id in the whole transcript (as `ctxgc compile` reports it) and its
/// exact bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// The id (`<record id>#<item id>` when the transcript is a conversation record).
    pub id: String,
    /// The message's exact JSON text.
    pub raw: String,
}

/// A stored chat: format, envelope and every message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatTranscript {
    /// The format of the messages.
    pub format: Format,
    /// The envelope (`None`: the transcript is a bare message list).
    pub envelope: Option<ChatEnvelope>,
    /// Every message, in order.
    pub messages: Vec<ChatMessage>,
}

impl ChatTranscript {
    /// The whole transcript as one JSON document: the envelope holding every message (or a
    /// bare list).
    pub fn text(&self) -> String {
        let mut list = String::from("[");
        for (n, m) in self.messages.iter().enumerate() {
            if n > 0 {
                list.push(',');
            }
            list.push_str(&m.raw);
        }
        list.push(']');
        match &self.envelope {
            Some(envelope) => envelope.with_items(&list),
            None => list,
        }
    }

    /// Compiles the whole transcript: byte for byte what [`crate::compile`] gives for
    /// [`ChatTranscript::text`] in this format.
    pub fn compile(&self, options: &Options) -> Result<Compiled, Error> {
        crate::compile(&self.text(), &self.options(options))
    }

    /// The original bytes of a message and what was decided for it, by the id
    /// [`ChatTranscript::compile`] reports.
    pub fn receipt(&self, options: &Options, id: &str) -> Result<(String, crate::Decision), Error> {
        crate::receipt(&self.text(), &self.options(options), id)
    }

    fn options(&self, options: &Options) -> Options {
        Options {
            from: Some(self.format),
            ..options.clone()
        }
    }
}

/// How [`append_chat`] appends.
#[derive(Debug, Clone, Default)]
pub struct ChatAppend {
    /// Force the format of the appended request (detected from the whole transcript otherwise).
    pub from: Option<Format>,
    /// Append only if the session holds exactly this many messages; otherwise
    /// [`StoreError::Conflict`]. `None`: append after whatever the session holds, catching up
    /// and retrying when another writer appends first.
    pub expected_len: Option<u64>,
}

/// What [`append_chat`] stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatAppended {
    /// Positions of the new messages in the session.
    pub range: Range<u64>,
    /// Their ids.
    pub ids: Vec<String>,
    /// The format of the session's messages.
    pub format: Format,
    /// True when the request carried an envelope (which replaced the stored one).
    pub envelope_replaced: bool,
}

/// How many times [`append_chat`] catches up and retries when other writers keep appending
/// first.
const APPEND_ATTEMPTS: usize = 100;

/// A lowered request: its format, envelope and messages (the Anthropic system prompt is part
/// of the envelope, not a message).
struct Request {
    format: Format,
    envelope: Option<ChatEnvelope>,
    messages: Vec<String>,
}

fn rejected(context_id: &str, source: Error) -> StoreError {
    StoreError::Rejected {
        context_id: context_id.to_owned(),
        source,
    }
}

/// The one conversation of a chat input (a document, or a single record).
fn single_doc(input: ChatInput) -> Result<(Option<String>, ChatDoc), Error> {
    match input {
        ChatInput::Doc(doc) => Ok((None, doc)),
        ChatInput::Records(mut records) if records.len() == 1 => {
            let record = records.remove(0);
            Ok((Some(record.id), record.doc))
        }
        ChatInput::Records(records) => Err(Error::Usage(format!(
            "a chat session takes one conversation at a time; the input holds {} records",
            records.len()
        ))),
    }
}

fn request_of(text: &str, from: Option<Format>) -> Result<Request, Error> {
    let (_, doc) = single_doc(lower_chat_input(text, from)?)?;
    let envelope = match &doc.envelope {
        Envelope::Array => None,
        Envelope::Object { entries, items_key } => {
            Some(ChatEnvelope::new(entries.clone(), items_key)?)
        }
    };
    let messages = if doc.input_was_string {
        // A Responses `input` given as one string is the user message it stands for, so that
        // later turns can follow it in a list.
        let text = doc
            .items
            .first()
            .map(|item| item.raw.as_str())
            .unwrap_or("\"\"");
        vec![format!(r#"{{"role":"user","content":{text}}}"#)]
    } else {
        doc.items
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != doc.system_item)
            .map(|(_, item)| item.raw.clone())
            .collect()
    };
    Ok(Request {
        format: doc.format,
        envelope,
        messages,
    })
}

/// The ids `ctxgc compile` gives the messages of a whole transcript, in order.
fn transcript_ids(text: &str, format: Format) -> Result<Vec<String>, Error> {
    let (record, doc) = single_doc(lower_chat_input(text, Some(format))?)?;
    Ok(doc
        .items
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != doc.system_item)
        .map(|(_, item)| match &record {
            Some(r) => record_item_id(r, &item.id),
            None => item.id.clone(),
        })
        .collect())
}

/// The format of the whole transcript: forced, else detected from all of it (a list that
/// starts with plain text messages tells its format only once tool calls appear).
fn transcript_format(
    stored: Option<&ChatTranscript>,
    request: &Request,
    from: Option<Format>,
) -> Result<Format, Error> {
    if let Some(format) = from {
        return Ok(format);
    }
    let Some(stored) = stored else {
        return Ok(request.format);
    };
    let mut probe = stored.clone();
    probe.envelope = request.envelope.clone().or(probe.envelope);
    probe
        .messages
        .extend(request.messages.iter().map(|raw| ChatMessage {
            id: String::new(),
            raw: raw.clone(),
        }));
    let text = probe.text();
    let (_, doc) = single_doc(lower_chat_input(&text, None)?)?;
    Ok(doc.format)
}

/// One attempt: plans the append against what the store holds now, then writes it.
fn try_append<S: Store + ?Sized>(
    store: &mut S,
    context_id: &str,
    request: &Request,
    options: &ChatAppend,
) -> Result<ChatAppended, StoreError> {
    let stored = store.chat_transcript(context_id)?;
    let len = stored.as_ref().map_or(0, |t| t.messages.len() as u64);
    if let Some(expected) = options.expected_len
        && expected != len
    {
        return Err(StoreError::Conflict {
            context_id: context_id.to_owned(),
            expected,
            actual: len,
        });
    }
    let format = transcript_format(stored.as_ref(), request, options.from)
        .map_err(|e| rejected(context_id, e))?;
    let mut whole = stored.clone().unwrap_or(ChatTranscript {
        format,
        envelope: None,
        messages: Vec::new(),
    });
    whole.format = format;
    let envelope_replaced = request.envelope.is_some();
    if let Some(envelope) = &request.envelope {
        whole.envelope = Some(envelope.clone());
    }
    whole
        .messages
        .extend(request.messages.iter().map(|raw| ChatMessage {
            id: String::new(),
            raw: raw.clone(),
        }));
    let ids = transcript_ids(&whole.text(), format).map_err(|e| rejected(context_id, e))?;
    if ids.len() != whole.messages.len() {
        return Err(rejected(
            context_id,
            Error::Usage(format!(
                "the whole transcript lowers to {} messages, not the {} stored and appended",
                ids.len(),
                whole.messages.len()
            )),
        ));
    }
    let start = usize::try_from(len).unwrap_or(usize::MAX);
    for (old, new) in whole.messages.iter().zip(&ids).take(start) {
        if old.id != *new {
            return Err(rejected(
                context_id,
                Error::Usage(format!(
                    "appending would rename stored message {:?} to {new:?} (an appended message repeats a provider id already in the session); ids never change",
                    old.id
                )),
            ));
        }
    }
    let fresh: Vec<ChatMessage> = request
        .messages
        .iter()
        .zip(ids.iter().skip(start))
        .map(|(raw, id)| ChatMessage {
            id: id.clone(),
            raw: raw.clone(),
        })
        .collect();
    let next = store.chat_append(context_id, format, len, request.envelope.as_ref(), &fresh)?;
    Ok(ChatAppended {
        range: len..next,
        ids: fresh.into_iter().map(|m| m.id).collect(),
        format,
        envelope_replaced,
    })
}

/// Appends one chat request (a document in any chat format, a bare message list, or one
/// conversation record) to the chat session `context_id`, creating it on its first append.
///
/// The request's envelope, when it has one, replaces the stored envelope (a gateway sends the
/// current system prompt and tools with every request); a bare list keeps it. Only the new
/// messages are sent: a request that repeats the history appends it again.
pub fn append_chat<S: Store + ?Sized>(
    store: &mut S,
    context_id: &str,
    request: &str,
    options: &ChatAppend,
) -> Result<ChatAppended, StoreError> {
    let request = request_of(request, options.from).map_err(|e| rejected(context_id, e))?;
    let mut attempts = 0;
    loop {
        attempts += 1;
        match try_append(store, context_id, &request, options) {
            Err(StoreError::Conflict { .. })
                if options.expected_len.is_none() && attempts < APPEND_ATTEMPTS => {}
            other => return other,
        }
    }
}
