//! Conversations the gateway has seen, compiled incrementally and kept in the store.
//!
//! Clients resend the whole history on every request. The gateway names the conversation
//! (the `x-ctxgc-session` header, or [`Conversation::prefix_key`]), and when the items it
//! holds are a byte-identical prefix of the request's, lowers and compiles only the new
//! messages (the compiler's incremental path) and renders only them (see
//! [`crate::splice`]). The compiled session is cache-stable: what was sent before is sent
//! again byte for byte until a compaction step pays for itself.
//!
//! Every new item is appended to the store before the request goes upstream, so a crash
//! loses nothing, and its original bytes are the receipt a stub names. Each gateway session
//! is a store session (`gw-<key>`, or `gw-<key>.<hash>` once the client rewrote history);
//! the current one is named under [`GATEWAY_SCOPE`], so several gateways on one PostgreSQL
//! serve the same conversation: a gateway that is behind catches up from the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ctxgc_core::chat::compile::render_session;
use ctxgc_core::chat::lowering::{ChatDoc, Envelope, lower_document};
use ctxgc_core::chat::state::Ledger;
use ctxgc_core::chat::{ChatConfig, ChatOptions, register};
use ctxgc_core::store::{Store, StoreError};
use ctxgc_core::{Format, Item, Options, Session};
use ctxgc_store::AnyStore;

use crate::request::Conversation;
use crate::splice::Rendered;

/// The state scope under which each conversation key names its current store session.
pub const GATEWAY_SCOPE: &str = "ctxgc-gateway";

/// How many conversations stay compiled in memory (the least recently used is dropped; it is
/// reloaded from the store when it comes back).
pub const DEFAULT_MAX_LIVE: usize = 4096;

/// How a request's conversation was compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompilePath {
    /// Only the new messages were lowered and compiled.
    Incremental,
    /// The whole conversation was compiled (first request, or history rewritten).
    Full,
}

/// A compiled request body and what it took.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The body to send upstream.
    pub body: String,
    /// The store session it belongs to.
    pub context_id: String,
    /// How it was compiled.
    pub path: CompilePath,
    /// Items in the conversation.
    pub items: usize,
    /// Items appended by this request.
    pub new_items: usize,
    /// Items sent retired or rewritten (each with a receipt in the store).
    pub receipts: usize,
}

/// Why a conversation could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The messages are not what their format requires (named item and field).
    #[error("{0}")]
    Invalid(#[from] ctxgc_core::Error),
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

/// One conversation compiled in memory.
struct Live {
    context_id: String,
    format: Format,
    session: Session,
    /// The request's Anthropic system prompt was item 0.
    has_system: bool,
    last_used: u64,
    /// The rendered item list, kept between requests (cache-stable compilation only).
    rendered: Option<Rendered>,
}

/// The conversations, the store and the compile options.
pub struct Sessions {
    /// `None` only while being dropped.
    store: Mutex<Option<AnyStore>>,
    live: Mutex<HashMap<String, Arc<Mutex<Option<Live>>>>>,
    clock: std::sync::atomic::AtomicU64,
    options: Options,
    config: ChatConfig,
    template: Session,
    max_live: usize,
}

/// The store session a rewritten history moves to: named by the request's own items.
fn fresh_context_id(key: &str, conv: &Conversation<'_>) -> String {
    let mut h = blake3::Hasher::new();
    for x in conv.item_hashes() {
        h.update(&x);
    }
    format!("gw-{key}.{}", &h.finalize().to_hex()[..16])
}

impl Sessions {
    /// Sessions kept in `store`, compiled with `chat` options (cache-stable unless they say
    /// otherwise).
    pub fn new(store: AnyStore, chat: ChatOptions) -> Sessions {
        let options = Options {
            chat,
            ..Options::default()
        };
        let config = ChatConfig::resolve(&options.chat, options.tokenizer);
        let mut template = Session::with_passes(
            options.retention.clone(),
            ctxgc_core::passes::chat_pipeline(&config),
        );
        if let Some(model) = &options.chat.cache {
            template.enable_cache_stable(ctxgc_core::session::CacheModel {
                tokenizer: options.tokenizer,
                ..model.clone()
            });
        }
        Sessions {
            store: Mutex::new(Some(store)),
            live: Mutex::new(HashMap::new()),
            clock: std::sync::atomic::AtomicU64::new(0),
            options,
            config,
            template,
            max_live: DEFAULT_MAX_LIVE,
        }
    }

    /// The compile options in use.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Runs `f` with the store (blocking: call from a blocking thread).
    pub fn with_store<T>(
        &self,
        f: impl FnOnce(&mut AnyStore) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut guard = self.store.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_mut() {
            Some(store) => f(store),
            None => Err(StoreError::Backend {
                backend: "gateway",
                message: "the store is closed".into(),
            }),
        }
    }

    fn entry(&self, key: &str) -> Arc<Mutex<Option<Live>>> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = live.get(key) {
            return e.clone();
        }
        if live.len() >= self.max_live {
            // Drop the least recently used conversation that no request holds right now.
            let oldest = live
                .iter()
                .filter(|(_, e)| Arc::strong_count(e) == 1)
                .filter_map(|(k, e)| {
                    let used = e.try_lock().ok()?.as_ref().map_or(0, |l| l.last_used);
                    Some((used, k.clone()))
                })
                .min();
            if let Some((_, k)) = oldest {
                live.remove(&k);
            }
        }
        let e = Arc::new(Mutex::new(None));
        live.insert(key.to_owned(), e.clone());
        e
    }

    /// Compiles a request's conversation under `key`: incrementally when what is stored is
    /// a prefix of it, from scratch otherwise. Blocking (store I/O): call from a blocking
    /// thread.
    pub fn compile(&self, key: &str, conv: &Conversation<'_>) -> Result<Compiled, SessionError> {
        // The request's items as exact bytes. What is stored is recognised by comparing
        // bytes (memcmp), and only the new items are hashed: a request costs what it adds.
        let raws: Vec<&str> = conv
            .system
            .iter()
            .chain(conv.messages.iter())
            .map(|r| r.get())
            .collect();
        let entry = self.entry(key);
        let mut slot = entry.lock().unwrap_or_else(|p| p.into_inner());
        let now = self
            .clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Up to three tries: a store session another gateway advanced is caught up with, a
        // rewritten history moves to a fresh store session.
        let mut path = CompilePath::Incremental;
        let mut new_items = 0;
        for _ in 0..3 {
            if slot.is_none() {
                let pointer = self.with_store(|s| s.state(GATEWAY_SCOPE, key))?;
                let context_id = pointer
                    .and_then(|p| String::from_utf8(p).ok())
                    .unwrap_or_else(|| format!("gw-{key}"));
                *slot = Some(self.load(&context_id, conv)?);
            }
            let Some(live) = slot.as_mut() else { continue };
            live.last_used = now;
            let stored = live.session.items();
            let matches = live.format == conv.format
                && stored.len() <= raws.len()
                && stored.iter().zip(&raws).all(|(item, raw)| item.raw == *raw)
                && (stored.is_empty() || live.has_system == conv.system.is_some());
            if !matches {
                // History was rewritten (or another conversation shares the key): a fresh
                // store session, named by the request's own items.
                let context_id = fresh_context_id(key, conv);
                self.with_store(|s| s.put_state(GATEWAY_SCOPE, key, context_id.as_bytes()))?;
                *slot = Some(self.load(&context_id, conv)?);
                path = CompilePath::Full;
                continue;
            }
            if live.session.items().is_empty() {
                path = CompilePath::Full;
                live.has_system = conv.system.is_some();
            }
            let start = live.session.items().len();
            if start < raws.len() {
                let items = self.lower_from(conv, start)?;
                let count = items.len();
                match self.append(live, items, raws.len()) {
                    Ok(()) => new_items = count,
                    Err(SessionError::Store(StoreError::Conflict { .. })) => {
                        // Another gateway appended first: catch up and decide again.
                        *slot = None;
                        continue;
                    }
                    Err(SessionError::Store(StoreError::Rejected { .. })) => {
                        // (Nothing was appended: the session is as it was.)
                        // The new items do not fit the stored ones (an id reused across the
                        // two): compile the request on its own, in a fresh store session.
                        let context_id = fresh_context_id(key, conv);
                        self.with_store(|s| {
                            s.put_state(GATEWAY_SCOPE, key, context_id.as_bytes())
                        })?;
                        *slot = Some(self.load(&context_id, conv)?);
                        path = CompilePath::Full;
                        continue;
                    }
                    Err(e) => {
                        *slot = None;
                        return Err(e);
                    }
                }
            }
            let live = slot.as_mut().ok_or_else(|| {
                SessionError::Store(StoreError::Corrupt {
                    context_id: key.to_owned(),
                    message: "session vanished while compiling".into(),
                })
            })?;
            return self.render(live, conv, path, new_items, raws.len());
        }
        Err(SessionError::Store(StoreError::Backend {
            backend: "gateway",
            message: format!(
                "conversation {key:?}: the stored session kept changing under this request (three tries)"
            ),
        }))
    }

    /// Opens a store session and compiles what it holds; the request's system prompt decides
    /// whether item 0 is one.
    fn load(&self, context_id: &str, conv: &Conversation<'_>) -> Result<Live, SessionError> {
        let (info, items) = self.with_store(|s| -> Result<_, StoreError> {
            let info = s.info(context_id)?;
            let items = s.items(context_id, 0)?;
            Ok((info, items))
        })?;
        let has_system = items
            .first()
            .is_some_and(|i| i.id == "system" && conv.format == Format::Anthropic);
        let mut session = self.template.clone();
        session.extend(items)?;
        session.compile();
        Ok(Live {
            context_id: context_id.to_owned(),
            format: info.and_then(|i| i.format).unwrap_or(conv.format),
            session,
            has_system,
            last_used: 0,
            rendered: None,
        })
    }

    /// Lowers the request's items from item `start` on (item 0 is the Anthropic system
    /// prompt when there is one). Positional ids continue the conversation's numbering.
    fn lower_from(&self, conv: &Conversation<'_>, start: usize) -> Result<Vec<Item>, SessionError> {
        let offset = start - usize::from(conv.system.is_some() && start > 0);
        if start == 0 {
            // The whole document: the front-end sees it exactly as the client sent it.
            let mut text = String::from("{");
            for (n, (k, v)) in conv.entries.iter().enumerate() {
                if n > 0 {
                    text.push(',');
                }
                text.push_str(&serde_json::Value::String(k.clone()).to_string());
                text.push(':');
                text.push_str(v.get());
            }
            text.push('}');
            return Ok(lower_document(&text, conv.format)?.items);
        }
        let suffix = &conv.messages[offset..];
        let mut text =
            String::with_capacity(suffix.iter().map(|m| m.get().len() + 1).sum::<usize>() + 2);
        text.push('[');
        for (n, m) in suffix.iter().enumerate() {
            if n > 0 {
                text.push(',');
            }
            text.push_str(m.get());
        }
        text.push(']');
        let mut items = match lower_document(&text, conv.format) {
            Ok(doc) => doc.items,
            // Lowered alone, a bad message would be named by its place in the suffix: lower
            // the whole request for an error that names it where the client put it.
            Err(_) => return self.lower_from(conv, 0),
        };
        for item in &mut items {
            if let Some(renamed) = shifted_id(&item.id, offset) {
                item.id = renamed;
            }
        }
        Ok(items)
    }

    /// Appends items to the live session and to the store (durable before the request goes
    /// on), then compiles what is new. On a store error the live session holds items the
    /// store does not: the caller drops it, and it is reloaded from the store.
    fn append(&self, live: &mut Live, items: Vec<Item>, total: usize) -> Result<(), SessionError> {
        let start = live.session.items().len();
        if start + items.len() != total {
            return Err(SessionError::Store(StoreError::Corrupt {
                context_id: live.context_id.clone(),
                message: format!(
                    "lowering gave {} items for {} messages",
                    start + items.len(),
                    total
                ),
            }));
        }
        // All or nothing: a batch that does not fit leaves the session as it was.
        if let Err(source) = live.session.extend(items) {
            return Err(SessionError::Store(StoreError::Rejected {
                context_id: live.context_id.clone(),
                source,
            }));
        }
        let batch = &live.session.items()[start..];
        self.with_store(|s| s.append(&live.context_id, live.format, start as u64, batch))?;
        live.session.compile();
        Ok(())
    }

    /// The register's text for the session as it stands: in cache-stable mode the register
    /// shows the state as of the last compaction step, so it stays in the stable prefix.
    fn register_text(&self, session: &Session) -> Option<String> {
        let state_items = match session.cache_boundary() {
            Some(boundary) => &session.items()[..boundary],
            None => session.items(),
        };
        let ledger = Ledger::build(self.config.state.clone(), state_items);
        register::render(&ledger.facts())
    }

    fn render(
        &self,
        live: &mut Live,
        conv: &Conversation<'_>,
        path: CompilePath,
        new_items: usize,
        items: usize,
    ) -> Result<Compiled, SessionError> {
        let recall = self.options.chat.expand_tool.is_some();
        let system_item = live.has_system.then_some(0);
        if live.session.cache_boundary().is_some() {
            // Cache-stable: what was rendered stands until the next compaction step; only
            // the new items are rendered.
            let holds = live
                .rendered
                .as_ref()
                .is_some_and(|r| r.holds_for(conv.format, &live.session, system_item));
            if !holds {
                let register_text = self.register_text(&live.session);
                live.rendered = Some(Rendered::start(
                    conv.format,
                    &live.session,
                    system_item,
                    register_text.as_deref(),
                )?);
            }
            if let Some(rendered) = live.rendered.as_mut() {
                rendered.extend(&live.session)?;
                return Ok(Compiled {
                    body: rendered.body(conv, recall),
                    context_id: live.context_id.clone(),
                    path,
                    items,
                    new_items,
                    receipts: rendered.receipts(),
                });
            }
        }
        let session = &live.session;
        let register_text = self.register_text(session);
        let doc = ChatDoc {
            format: conv.format,
            envelope: Envelope::Object {
                entries: conv.owned_entries(),
                items_key: conv.items_key.to_owned(),
            },
            items: Vec::new(),
            system_item: live.has_system.then_some(0),
            input_was_string: false,
        };
        let rendered = render_session(&doc, session, register_text.as_deref(), None)?;
        let receipts = (0..session.items().len())
            .filter(|&i| session.plan_of(i).action() != ctxgc_core::Action::Keep)
            .count();
        Ok(Compiled {
            body: if recall {
                crate::recall::offer_tool(conv.format, &rendered.text)
            } else {
                rendered.text
            },
            context_id: live.context_id.clone(),
            path,
            items,
            new_items,
            receipts,
        })
    }

    /// The original bytes of item `id` of the conversation `key` (what a stub names).
    pub fn receipt(&self, key: &str, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let context_id = {
            let entry = self.entry(key);
            let slot = entry.lock().unwrap_or_else(|p| p.into_inner());
            slot.as_ref().map(|l| l.context_id.clone())
        };
        let context_id = match context_id {
            Some(c) => c,
            None => self
                .with_store(|s| s.state(GATEWAY_SCOPE, key))?
                .and_then(|p| String::from_utf8(p).ok())
                .unwrap_or_else(|| format!("gw-{key}")),
        };
        self.with_store(|s| s.receipt(&context_id, id))
    }
}

impl Drop for Sessions {
    /// A PostgreSQL client closes by running a runtime of its own, which cannot happen on a
    /// thread that drives async tasks: the store is closed on a thread of its own.
    fn drop(&mut self) {
        let store = self
            .store
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(store) = store {
            if tokio::runtime::Handle::try_current().is_ok() {
                let _ = std::thread::spawn(move || drop(store)).join();
            } else {
                drop(store);
            }
        }
    }
}

/// `m<k>` or `m<k>_<n>` (a positional id the front-end gave) with `k` moved by `offset`.
fn shifted_id(id: &str, offset: usize) -> Option<String> {
    let rest = id.strip_prefix('m')?;
    let (digits, tail) = match rest.split_once('_') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let k: usize = digits.parse().ok()?;
    if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    Some(match tail {
        Some(t) => format!("m{}_{t}", k + offset),
        None => format!("m{}", k + offset),
    })
}

#[cfg(test)]
mod tests {
    use super::shifted_id;

    #[test]
    fn positional_ids_continue_the_numbering() {
        assert_eq!(shifted_id("m0", 5).as_deref(), Some("m5"));
        assert_eq!(shifted_id("m2_1", 5).as_deref(), Some("m7_1"));
        assert_eq!(shifted_id("msg_abc", 5), None);
        assert_eq!(shifted_id("call_1", 5), None);
    }
}
