//! A live chat session: messages appended as they happen, each append compiled in time
//! proportional to the message, not to the conversation.
//!
//! [`crate::compile()`] of a chat lowers, compiles and renders the whole transcript every time;
//! an agent loop or a gateway that keeps the conversation in memory does not need to. A
//! [`LiveChat`] keeps what a compile builds: the [`Session`] (whose passes update their indexes
//! for new items only), the declared-state [`Ledger`] and the checks that span messages.
//! [`LiveChat::append`] lowers one message and brings all of them up to date; the register
//! is read from the ledger; [`LiveChat::render`] writes the document (linear in its size).
//! What it gives is exactly what compiling the whole transcript gives
//! (`tests/chat_live.rs` compares them on the corpus).
//!
//! An append that would change what earlier messages are — a provider id that an earlier
//! message already has (ids are then reassigned), or, when the format was detected rather
//! than given, a message that shows another format — is refused with [`Error::Usage`]; the
//! caller compiles the whole transcript instead. Cache-stable compilation (which takes its
//! compaction steps compile by compile) is not available in a live session.
//!
//! ```
//! use ctxgc_core::chat::live::LiveChat;
//! use ctxgc_core::{compile, Options};
//! let options = Options::default();
//! let mut live = LiveChat::new(r#"[{"role": "system", "content": "You book flights."}]"#, &options).unwrap();
//! live.append(r#"{"role": "user", "content": "Move me to business."}"#).unwrap();
//! live.append(r#"{"role": "assistant", "content": "Done.<contextgc-state>{\"assert\": {\"cabin\": \"business\"}}</contextgc-state>"}"#).unwrap();
//! assert!(live.register().unwrap().contains("cabin = \"business\""));
//! let whole = format!("[{}]", live.session().items().iter().map(|i| i.raw.as_str()).collect::<Vec<_>>().join(","));
//! assert_eq!(live.render().unwrap().text, compile(&whole, &options).unwrap().output);
//! ```

use std::collections::HashSet;

use serde_json::Value;

use crate::chat::ChatConfig;
use crate::chat::compile::{ChatInput, lower_chat_input, session_of};
use crate::chat::lowering::{ChatDoc, ResultCheck, lower_unchecked, message_format, provider_id};
use crate::chat::register;
use crate::chat::state::Ledger;
use crate::compile::Options;
use crate::error::{Diagnostic, Error};
use crate::frontend::RawItem;
use crate::ir::Format;
use crate::render::messages::RenderedChat;
use crate::session::Session;

/// A chat kept in memory and compiled message by message.
#[derive(Debug, Clone)]
pub struct LiveChat {
    options: Options,
    /// The document's format and envelope (its items live in `session`).
    doc: ChatDoc,
    /// True when the format was given (`Options::from`) rather than detected.
    forced: bool,
    session: Session,
    /// The declared state of every message.
    ledger: Ledger,
    results: ResultCheck,
    /// Every provider id seen, unique or not (ids `m<i>` never take one).
    provider_ids: HashSet<String>,
    /// Messages in the list (the Anthropic top-level system prompt is not one of them).
    messages: usize,
}

fn refuse(message: impl Into<String>) -> Error {
    Error::Usage(format!(
        "{}; compile the whole transcript instead",
        message.into()
    ))
}

impl LiveChat {
    /// A live session holding a chat document (any chat format, bare list or request object),
    /// compiled as [`crate::compile()`] compiles it.
    pub fn new(text: &str, options: &Options) -> Result<Self, Error> {
        let mut doc = match lower_chat_input(text, options.from)? {
            ChatInput::Doc(doc) => doc,
            ChatInput::Records(_) => {
                return Err(Error::Usage(
                    "a live session holds one conversation, not a JSONL of records".into(),
                ));
            }
        };
        if options.chat.cache.is_some() {
            // Cache-stable compilation takes its compaction steps at each compile, so a session
            // compiled message by message is not the whole transcript compiled at once.
            return Err(Error::Usage(
                "a live session compiles eagerly; cache-stable compilation is not available for it"
                    .into(),
            ));
        }
        let config = ChatConfig::resolve(&options.chat, options.tokenizer);
        let session = session_of(&doc, &config, options)?;
        let items = std::mem::take(&mut doc.items);
        let ledger = Ledger::build(config.state.clone(), &items);
        let mut results = ResultCheck::new(doc.format);
        for (i, item) in items.iter().enumerate() {
            // The document lowered, so it breaks no rule here.
            results.add(i, item);
        }
        let mut provider_ids = HashSet::new();
        if doc.format.wire().messages_carry_ids() {
            for item in &items {
                if let Ok(value) = serde_json::from_str::<Value>(&item.raw)
                    && let Some(id) = provider_id(&value)
                {
                    provider_ids.insert(id);
                }
            }
        }
        let messages = items.len() - usize::from(doc.system_item.is_some());
        Ok(LiveChat {
            options: options.clone(),
            doc,
            forced: options.from.is_some(),
            session,
            ledger,
            results,
            provider_ids,
            messages,
        })
    }

    /// The compiled session: items, plans and decisions.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The format of the messages.
    pub fn format(&self) -> Format {
        self.doc.format
    }

    /// Appends one message (its JSON text, in the session's format) and compiles it. Returns
    /// the new item's position. A refused message leaves the session as it was.
    pub fn append(&mut self, message: &str) -> Result<usize, Error> {
        if self.doc.input_was_string {
            return Err(refuse(
                "a Responses input given as one string takes no appends",
            ));
        }
        let value: Value = serde_json::from_str(message).map_err(|e| Error::json("message", &e))?;
        if !self.forced
            && self.doc.format == Format::OpenaiChat
            && let Some(shown) = message_format(&value)
        {
            return Err(refuse(format!(
                "the message is {} while the transcript was read as openai-chat",
                shown.name()
            )));
        }
        let index = self.session.items().len();
        let id = self.next_id(&value)?;
        let raw = RawItem {
            text: message.trim(),
            line: 0,
        };
        let mut item = lower_unchecked(self.doc.format, &[raw], None)
            .map_err(|e| self.renumber(e, index, &id))?
            .pop()
            .ok_or_else(|| refuse("the message lowered to nothing"))?;
        item.id = id;
        let problems = self.results.add(index, &item);
        let appended = if problems.is_empty() {
            self.session.append(item)
        } else {
            Err(Error::Invalid(problems))
        };
        if let Err(e) = appended {
            // Forget the refused message (rare: rebuilt from what the session holds).
            self.results = ResultCheck::new(self.doc.format);
            for (i, item) in self.session.items().iter().enumerate() {
                self.results.add(i, item);
            }
            return Err(e);
        }
        if let Some(id) =
            provider_id(&value).filter(|_| self.doc.format.wire().messages_carry_ids())
        {
            self.provider_ids.insert(id);
        }
        self.messages += 1;
        self.session.compile();
        self.ledger.apply(index, &self.session.items()[index]);
        Ok(index)
    }

    /// The id the whole transcript gives the next message, or a refusal when adding it would
    /// change an earlier message's id.
    fn next_id(&self, value: &Value) -> Result<String, Error> {
        if let Some(id) = provider_id(value).filter(|_| self.doc.format.wire().messages_carry_ids())
        {
            if self.provider_ids.contains(&id) || self.session.position(&id).is_some() {
                return Err(refuse(format!(
                    "id {id:?} is already taken in the transcript (earlier ids would change)"
                )));
            }
            return Ok(id);
        }
        let k = self.messages;
        let mut candidate = format!("m{k}");
        let mut n = 1;
        while self.provider_ids.contains(&candidate) {
            candidate = format!("m{k}_{n}");
            n += 1;
        }
        Ok(candidate)
    }

    /// Problems of a message lowered on its own, named by its place in the session.
    fn renumber(&self, error: Error, index: usize, id: &str) -> Error {
        match error {
            Error::Invalid(problems) => Error::Invalid(
                problems
                    .into_iter()
                    .map(|p| Diagnostic {
                        index,
                        id: Some(id.to_owned()),
                        ..p
                    })
                    .collect(),
            ),
            other => other,
        }
    }

    /// The `[ACTIVE_AGENT_STATE]` register as it is sent now, if any fact is live.
    pub fn register(&self) -> Option<String> {
        register::render(&self.ledger.facts())
    }

    /// The compiled document, as [`crate::compile()`] writes it for the whole transcript.
    pub fn render(&self) -> Result<RenderedChat, Error> {
        let register = self.register();
        crate::chat::compile::render_session(
            &self.doc,
            &self.session,
            register.as_deref(),
            self.options.chat.to,
        )
    }
}
