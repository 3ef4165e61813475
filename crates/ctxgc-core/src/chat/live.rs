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
//! caller compiles the whole transcript instead. Under cache-stable compilation
//! (`--preset cache-stable`, the gateway's and Python `wrap()`'s default) a compaction step is
//! priced after each item, whether the items come one by one or all at once, so the live
//! session and the whole transcript take the same steps.
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
use crate::chat::compile::payload_tokens;
use crate::chat::compile::{ChatInput, lower_chat_input, session_of};
use crate::chat::lowering::{ChatDoc, ResultCheck, lower_unchecked, provider_id};
use crate::chat::register;
use crate::chat::state::{Ledger, StateConfig};
use crate::compile::Options;
use crate::error::{Diagnostic, Error};
use crate::formats::Format;
use crate::formats::detect::{default_chat, message_format};
use crate::frontend::RawItem;
use crate::ir::Kind;
use crate::plan::{Action, Reason};
use crate::render::messages::{
    RenderedChat, Source, item_json, register_message, register_position,
};
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
    /// Cache-stable mode: the register sits in the cached prefix, so it shows the state as of
    /// the last compaction step: the items it covers and its text (rebuilt at each step).
    stable_register: Option<(usize, Option<String>)>,
    /// How declarations are read (what the register is rebuilt with at a step).
    state: StateConfig,
    results: ResultCheck,
    /// Every provider id seen, unique or not (ids `m<i>` never take one).
    provider_ids: HashSet<String>,
    /// Messages in the list (the Anthropic top-level system prompt is not one of them).
    messages: usize,
    /// Each message as sent, kept between calls of [`LiveChat::sent`].
    kept: SentCache,
}

/// What [`LiveChat::sent`] keeps per item between calls: brought up to date for the items
/// whose plan may have changed ([`Session::take_changes`]).
#[derive(Debug, Clone, Default)]
struct SentCache {
    /// The item as sent (`None`: retired), once written.
    json: Vec<Option<String>>,
    /// Tokens of the item as sent.
    after: Vec<usize>,
    /// Tokens of the item as given.
    before: Vec<usize>,
    tokens_before: usize,
    actions: Vec<Action>,
    reasons: Vec<Option<Reason>>,
    /// The register message as sent, and its tokens.
    register: Option<(String, usize)>,
}

/// One message of the compiled list: where it comes from and its JSON text.
#[derive(Debug, Clone, Copy)]
pub struct SentMessage<'a> {
    /// The item it is (or the register).
    pub source: Source,
    /// Its JSON, as sent.
    pub json: &'a str,
}

/// The compiled message list of a live chat, with its counts: what
/// [`crate::compile()`] gives for the whole transcript, without writing the document.
#[derive(Debug, Clone)]
pub struct Sent<'a> {
    /// The messages, in order.
    pub messages: Vec<SentMessage<'a>>,
    /// Exact tokens of the messages as given.
    pub tokens_before: usize,
    /// Exact tokens of the messages as sent (the register included).
    pub tokens_after: usize,
    /// Items whose sent text may differ from the last call's (new ones included), sorted;
    /// `None`: every one may.
    pub changed: Option<Vec<usize>>,
    /// Every item's action, in input order.
    pub actions: &'a [Action],
    /// Every item's reason, in input order.
    pub reasons: &'a [Option<Reason>],
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
        let config = ChatConfig::resolve(&options.chat, options.tokenizer);
        let session = session_of(&doc, &config, options)?;
        let items = std::mem::take(&mut doc.items);
        let ledger = Ledger::build(config.state.clone(), &items);
        let stable_register = session
            .cache_boundary()
            .map(|b| (b, stable_register_of(&config.state, &items[..b])));
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
            stable_register,
            state: config.state,
            results,
            provider_ids,
            messages,
            kept: SentCache::default(),
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
            && self.doc.format == default_chat().format()
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
        if let Some(boundary) = self.session.cache_boundary()
            && self
                .stable_register
                .as_ref()
                .is_none_or(|(b, _)| *b != boundary)
        {
            let text = stable_register_of(&self.state, &self.session.items()[..boundary]);
            self.stable_register = Some((boundary, text));
        }
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

    /// The `[ACTIVE_AGENT_STATE]` register as it is sent now, if any fact is live (under
    /// cache-stable compilation: live as of the last compaction step).
    pub fn register(&self) -> Option<String> {
        match &self.stable_register {
            Some((_, text)) => text.clone(),
            None => register::render(&self.ledger.facts()),
        }
    }

    /// The compiled message list and its exact counts, kept up to date item by item: it costs
    /// in proportion to what was appended and what that changed, plus one pass to list the
    /// messages. `Ok(None)` where the output is not a plain list of the items (an Anthropic
    /// chat, whose system prompt carries the register; a conversion with `--to`; a Responses
    /// input given as one string): [`LiveChat::render`] writes those.
    pub fn sent(&mut self) -> Result<Option<Sent<'_>>, Error> {
        let format = self.doc.format;
        if format.wire().system_key().is_some()
            || self.doc.system_item.is_some()
            || self.doc.input_was_string
            || self.options.chat.to.is_some_and(|to| to != format)
        {
            return Ok(None);
        }
        let tokenizer = self.options.tokenizer;
        let changes = self.session.take_changes();
        let items = self.session.items();
        let n = items.len();
        let kept = &mut self.kept;
        let all = changes.is_none() || n < kept.actions.len();
        if all {
            *kept = SentCache::default();
        }
        let old = kept.actions.len();
        for item in &items[old..] {
            let tokens = match item.kind {
                Kind::Message(_) => payload_tokens(format, &item.raw, tokenizer),
                _ => 0,
            };
            kept.before.push(tokens);
            kept.tokens_before += tokens;
        }
        kept.json.resize(n, None);
        kept.after.resize(n, 0);
        kept.actions.resize(n, Action::Keep);
        kept.reasons.resize(n, None);
        let changed: Vec<usize> = match changes {
            Some(list) if !all => {
                let mut list: Vec<usize> = list.into_iter().filter(|&i| i < old).collect();
                list.extend(old..n);
                list
            }
            _ => (0..n).collect(),
        };
        for &i in &changed {
            let plan = self.session.plan_of(i);
            kept.actions[i] = plan.action();
            kept.reasons[i] = plan.verdict.as_ref().map(|v| v.reason);
            let json = item_json(format, &self.session, i, false)?;
            kept.after[i] = match &json {
                Some(j) if *j == items[i].raw => kept.before[i],
                Some(j) => payload_tokens(format, j, tokenizer),
                None => 0,
            };
            kept.json[i] = json;
        }
        let register = match &self.stable_register {
            Some((_, text)) => text.clone(),
            None => register::render(&self.ledger.facts()),
        };
        kept.register = match (register, kept.register.take()) {
            (None, _) => None,
            (Some(r), old) => {
                let json = register_message(format, &r).to_string();
                match old {
                    Some((text, tokens)) if text == json => Some((text, tokens)),
                    _ => {
                        let tokens = payload_tokens(format, &json, tokenizer);
                        Some((json, tokens))
                    }
                }
            }
        };
        let at = register_position(items, None);
        let mut messages = Vec::with_capacity(n + 1);
        let mut tokens_after = 0;
        for i in 0..=n {
            if i == at
                && let Some((json, tokens)) = &kept.register
            {
                messages.push(SentMessage {
                    source: Source::Register,
                    json,
                });
                tokens_after += tokens;
            }
            if let Some(Some(json)) = kept.json.get(i) {
                messages.push(SentMessage {
                    source: Source::Item(i),
                    json,
                });
                tokens_after += kept.after[i];
            }
        }
        Ok(Some(Sent {
            messages,
            tokens_before: kept.tokens_before,
            tokens_after,
            changed: (!all).then_some(changed),
            actions: &kept.actions,
            reasons: &kept.reasons,
        }))
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

/// The register of the items a compaction step covers (cache-stable mode).
fn stable_register_of(state: &StateConfig, items: &[crate::ir::Item]) -> Option<String> {
    register::render(&Ledger::build(state.clone(), items).facts())
}
