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
//! loses nothing, and its original bytes are the receipt a stub names. Requests that arrive
//! together share one commit ([`Sessions::commit_counts`]): the first to reach the store
//! commits what the others queued meanwhile, and each goes on once its items are durable. Each gateway session
//! is a store session (`gw-<key>`, or `gw-<key>.<hash>` for a later conversation under the
//! same key: a rewritten history, or another conversation that opens the same way). The
//! store sessions of a key are listed under [`GATEWAY_SCOPE`], so several gateways on one
//! PostgreSQL serve the same conversations: a gateway that is behind catches up from the
//! store.
//!
//! **Tenants never meet.** The server scopes every key by the request's credentials
//! ([`Sessions::tenant_of`]: a keyed hash, never the credential itself), so two API keys
//! that send the same opening get two sessions. Under one key, every conversation keeps its
//! own session: a request is matched against each conversation the key holds (the longest
//! stored prefix of its items wins), so interleaved conversations stay incremental, and a
//! recall is answered from the store session the request was compiled into, never another.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use ctxgc_core::chat::compile::render_session;
use ctxgc_core::chat::lowering::{ChatDoc, Envelope, lower_document};
use ctxgc_core::chat::state::Ledger;
use ctxgc_core::chat::{ChatConfig, ChatOptions, register};
use ctxgc_core::store::{AppendBatch, Store, StoreError};
use ctxgc_core::{Format, Item, Options, Session};
use ctxgc_store::AnyStore;

use crate::request::Conversation;
use crate::splice::Rendered;

/// The state scope under which each conversation key names its current store session.
pub const GATEWAY_SCOPE: &str = "ctxgc-gateway";

/// How many conversations stay compiled in memory (the least recently used is dropped; it is
/// reloaded from the store when it comes back).
pub const DEFAULT_MAX_LIVE: usize = 4096;

/// How many bytes of conversations stay compiled in memory, by default (see
/// [`Sessions::with_memory_budget`]).
pub const DEFAULT_MEMORY_BUDGET: usize = 256 << 20;

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
    /// The rendered item list, kept between requests (cache-stable compilation only).
    rendered: Option<Rendered>,
}

impl Live {
    /// About what it holds in memory: its items' original bytes (as stored, and again in
    /// the forms the compiler keeps of them) and the rendered text. An estimate for the
    /// memory budget, not an exact count.
    fn bytes(&self) -> usize {
        let items: usize = self
            .session
            .items()
            .iter()
            .map(|i| i.raw.len() + i.id.len() + ITEM_OVERHEAD)
            .sum();
        2 * items + self.rendered.as_ref().map_or(0, Rendered::text_bytes)
    }

    /// How many of the request's items this conversation holds, when what it holds is a
    /// prefix of them (compared byte for byte); `None` when the request is not its.
    fn prefix_of(&self, conv: &Conversation<'_>, raws: &[&str]) -> Option<usize> {
        prefix_len(
            self.session.items(),
            self.format,
            self.has_system,
            conv,
            raws,
        )
    }
}

/// How many of `raws` the stored `items` are, when they are a byte-identical prefix of the
/// request's items in the same format (and agree on whether item 0 is a system prompt).
fn prefix_len(
    items: &[Item],
    format: Format,
    has_system: bool,
    conv: &Conversation<'_>,
    raws: &[&str],
) -> Option<usize> {
    let matches = format == conv.format
        && items.len() <= raws.len()
        && items.iter().zip(raws).all(|(item, raw)| item.raw == *raw)
        && (items.is_empty() || has_system == conv.system.is_some());
    matches.then_some(items.len())
}

/// What an item costs in memory besides its bytes (its place in the session, its blocks, its
/// plans, its decision), for the memory budget: about 1 KiB, measured against the heap for
/// short chat turns and bulky tool outputs alike (`tests/memory_estimate.rs`).
const ITEM_OVERHEAD: usize = 1024;

/// The conversations of one key, in memory.
#[derive(Default)]
struct Group {
    /// Compiled conversations, most recently used first (at most [`MAX_LIVE_PER_KEY`]).
    lives: Vec<Live>,
    last_used: u64,
    /// What its conversations held when a request last finished with it ([`Live::bytes`]),
    /// as counted in [`Sessions::live_bytes`].
    bytes: usize,
}

impl Group {
    /// The conversation holding the longest stored prefix of the request, if any.
    fn best(&self, conv: &Conversation<'_>, raws: &[&str]) -> Option<usize> {
        self.lives
            .iter()
            .enumerate()
            .filter_map(|(i, live)| Some((live.prefix_of(conv, raws)?, i)))
            // Longest prefix first; between equals, the most recently used (lowest index).
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
            .map(|(_, i)| i)
    }

    /// Puts a conversation first (most recently used), replacing one of the same store
    /// session, and keeps at most [`MAX_LIVE_PER_KEY`] in memory.
    fn put_first(&mut self, live: Live) {
        self.lives.retain(|l| l.context_id != live.context_id);
        self.lives.insert(0, live);
        self.lives.truncate(MAX_LIVE_PER_KEY);
    }

    fn touch(&mut self, i: usize) {
        if i > 0 {
            let live = self.lives.remove(i);
            self.lives.insert(0, live);
        }
    }
}

/// Conversations of one key kept compiled in memory; older ones are reloaded from the store
/// when they come back.
pub const MAX_LIVE_PER_KEY: usize = 8;

/// Store sessions listed under one key (newest first); a conversation older than these
/// starts a fresh session when it comes back, its receipts still in the store.
pub const MAX_LISTED_PER_KEY: usize = 64;

/// The state key under [`GATEWAY_SCOPE`] that holds the secret credentials are hashed with.
const TENANT_SECRET_KEY: &str = "tenant-secret";

/// The store sessions of a key, newest first, as the store lists them (one context id a
/// line; an older gateway wrote just one id, which reads as a list of one).
fn parse_listed(value: Option<Vec<u8>>) -> Vec<String> {
    value
        .and_then(|v| String::from_utf8(v).ok())
        .map(|text| {
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The request's items as exact bytes: the Anthropic system prompt (when there is one), then
/// each message.
fn raw_items<'a>(conv: &'a Conversation<'_>) -> Vec<&'a str> {
    conv.system
        .iter()
        .chain(conv.messages.iter())
        .map(|r| r.get())
        .collect()
}

/// The key a conversation's sessions are found by: its name (`x-ctxgc-session`, or
/// [`Conversation::prefix_key`]) scoped by its tenant ([`Sessions::tenant_of`]). `@` is not
/// a character of session names, so no name given without credentials spells another
/// tenant's key.
///
/// ```
/// use ctxgc_gateway::sessions::scoped_key;
/// assert_eq!(scoped_key("support", Some("3fa9")), "support@3fa9");
/// assert_eq!(scoped_key("support", None), "support");
/// ```
pub fn scoped_key(name: &str, tenant: Option<&str>) -> String {
    match tenant {
        Some(tenant) => format!("{name}@{tenant}"),
        None => name.to_owned(),
    }
}

/// What a recall of a receipt id found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recalled {
    /// The original bytes of the item.
    Found(Vec<u8>),
    /// No item of that id in the conversation: the ids nearest to it that the conversation
    /// shortened (closest first, at most three).
    Missing {
        /// The ids a stub of this conversation names, nearest first.
        nearest: Vec<String>,
    },
}

/// The conversations, the store and the compile options.
pub struct Sessions {
    /// `None` only while being dropped.
    store: Mutex<Option<AnyStore>>,
    live: Mutex<HashMap<String, Arc<Mutex<Group>>>>,
    clock: std::sync::atomic::AtomicU64,
    options: Options,
    config: ChatConfig,
    template: Session,
    max_live: usize,
    /// Most bytes of conversations kept compiled ([`Live::bytes`], summed over the groups).
    memory_budget: usize,
    /// Bytes the groups in memory hold, as each last counted.
    live_bytes: std::sync::atomic::AtomicUsize,
    /// The key credentials are hashed with: set by the operator, or made once per store.
    tenant_secret: OnceLock<[u8; 32]>,
    /// Appends waiting for the next group commit.
    pending: Mutex<Vec<Arc<PendingAppend>>>,
    /// Store commits made for appends, and the appends they carried.
    commits: std::sync::atomic::AtomicU64,
    appends: std::sync::atomic::AtomicU64,
}

/// One request's new items, waiting to be committed with those of the requests that arrive
/// while the store is busy.
struct PendingAppend {
    context_id: String,
    format: Format,
    start: u64,
    items: Vec<Item>,
    /// Set by whichever request commits the group.
    result: Mutex<Option<Result<u64, StoreError>>>,
}

/// How many appends the store committed, in how many commits ([`Sessions::commit_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitCounts {
    /// Store commits (each one durable write of a group of appends).
    pub commits: u64,
    /// Appends they carried.
    pub appends: u64,
}

/// The store session a later conversation under `key` moves to: named by the request's own
/// items.
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
            memory_budget: DEFAULT_MEMORY_BUDGET,
            live_bytes: std::sync::atomic::AtomicUsize::new(0),
            tenant_secret: OnceLock::new(),
            pending: Mutex::new(Vec::new()),
            commits: std::sync::atomic::AtomicU64::new(0),
            appends: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Keeps at most about `bytes` of conversations compiled in memory (default
    /// [`DEFAULT_MEMORY_BUDGET`]): past it, the least recently used conversations not in
    /// use are dropped, and reloaded from the store when they come back. One conversation
    /// bigger than the budget is still compiled; it is dropped once another is used.
    pub fn with_memory_budget(mut self, bytes: usize) -> Sessions {
        self.memory_budget = bytes;
        self
    }

    /// About how many bytes of conversations are compiled in memory now (what the memory
    /// budget counts).
    pub fn live_bytes(&self) -> usize {
        self.live_bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Hashes credentials with a key derived from `secret` (`CTXGC_TENANT_SECRET`): gateways
    /// that share a store and a secret scope tenants alike. Without one, the first gateway
    /// on a store makes a random secret and keeps it there. Returns false when the secret
    /// was already in use (set or made).
    pub fn set_tenant_secret(&self, secret: &str) -> bool {
        let key = blake3::derive_key("ctxgc gateway tenant secret v1", secret.as_bytes());
        self.tenant_secret.set(key).is_ok()
    }

    /// The secret credentials are hashed with: the operator's, else the store's, made once
    /// (random) on first use.
    fn tenant_key(&self) -> Result<[u8; 32], StoreError> {
        if let Some(key) = self.tenant_secret.get() {
            return Ok(*key);
        }
        let stored = self.with_store(|s| {
            if let Some(v) = s.state(GATEWAY_SCOPE, TENANT_SECRET_KEY)?
                && let Ok(key) = <[u8; 32]>::try_from(v.as_slice())
            {
                return Ok(key);
            }
            let mut fresh = [0u8; 32];
            getrandom::fill(&mut fresh).map_err(|e| StoreError::Backend {
                backend: "gateway",
                message: format!("no random bytes for the tenant secret: {e}"),
            })?;
            s.put_state(GATEWAY_SCOPE, TENANT_SECRET_KEY, &fresh)?;
            // Two gateways starting on one empty store at once: the last write stands, and
            // both read it back.
            match s.state(GATEWAY_SCOPE, TENANT_SECRET_KEY)? {
                Some(v) => <[u8; 32]>::try_from(v.as_slice()).map_err(|_| StoreError::Corrupt {
                    context_id: GATEWAY_SCOPE.to_owned(),
                    message: "the stored tenant secret is not 32 bytes".into(),
                }),
                None => Ok(fresh),
            }
        })?;
        Ok(*self.tenant_secret.get_or_init(|| stored))
    }

    /// The tenant a request's credentials name, as a keyed hash (24 hex digits), or `None`
    /// for a request without credentials. Every credential a provider reads is hashed
    /// together: `Authorization`, `x-api-key`, `api-key`, and the `key` / `api-key` query
    /// parameters. Blocking on first use (the store's secret): call from a blocking thread.
    pub fn tenant_of(
        &self,
        headers: &axum::http::HeaderMap,
        query: Option<&str>,
    ) -> Result<Option<String>, StoreError> {
        let mut credentials: Vec<(&str, &[u8])> = Vec::new();
        for name in ["authorization", "x-api-key", "api-key"] {
            for value in headers.get_all(name) {
                credentials.push((name, value.as_bytes()));
            }
        }
        let pairs: Vec<(String, String)> = query
            .map(|q| {
                form_urlencoded::parse(q.as_bytes())
                    .filter(|(k, _)| k == "key" || k == "api-key")
                    .map(|(k, v)| (format!("query {k}"), v.into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        for (k, v) in &pairs {
            credentials.push((k.as_str(), v.as_bytes()));
        }
        if credentials.is_empty() {
            return Ok(None);
        }
        let mut hasher = blake3::Hasher::new_keyed(&self.tenant_key()?);
        for (name, value) in credentials {
            hasher.update(name.as_bytes());
            hasher.update(b"\0");
            hasher.update(&(value.len() as u64).to_le_bytes());
            hasher.update(value);
        }
        Ok(Some(hasher.finalize().to_hex()[..24].to_owned()))
    }

    /// The options in use.
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

    fn entry(&self, key: &str) -> Arc<Mutex<Group>> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = live.get(key) {
            return e.clone();
        }
        if live.len() >= self.max_live {
            // Drop the least recently used key that no request holds right now.
            let oldest = live
                .iter()
                .filter(|(_, e)| Arc::strong_count(e) == 1)
                .filter_map(|(k, e)| Some((e.try_lock().ok()?.last_used, k.clone())))
                .min();
            if let Some((_, k)) = oldest {
                self.forget(&mut live, &k);
            }
        }
        let e = Arc::new(Mutex::new(Group::default()));
        live.insert(key.to_owned(), e.clone());
        e
    }

    /// Drops a key's conversations from memory (they stay in the store).
    fn forget(&self, live: &mut HashMap<String, Arc<Mutex<Group>>>, key: &str) {
        if let Some(group) = live.remove(key) {
            let bytes = group.lock().unwrap_or_else(|p| p.into_inner()).bytes;
            self.live_bytes
                .fetch_sub(bytes, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Counts what `group` (of `key`) holds now, then, while the conversations in memory
    /// hold more than the budget, drops the least recently used keys no request holds.
    fn account(&self, key: &str, group: &mut Group) {
        use std::sync::atomic::Ordering::Relaxed;
        let bytes: usize = group.lives.iter().map(Live::bytes).sum();
        let before = std::mem::replace(&mut group.bytes, bytes);
        if bytes >= before {
            self.live_bytes.fetch_add(bytes - before, Relaxed);
        } else {
            self.live_bytes.fetch_sub(before - bytes, Relaxed);
        }
        if self.live_bytes.load(Relaxed) <= self.memory_budget {
            return;
        }
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let mut candidates: Vec<(u64, String)> = live
            .iter()
            .filter(|(k, e)| k.as_str() != key && Arc::strong_count(e) == 1)
            .filter_map(|(k, e)| Some((e.try_lock().ok()?.last_used, k.clone())))
            .collect();
        candidates.sort_unstable();
        for (_, k) in candidates {
            if self.live_bytes.load(Relaxed) <= self.memory_budget {
                break;
            }
            self.forget(&mut live, &k);
        }
    }

    /// The store sessions listed under `key`, newest first.
    fn listed(&self, key: &str) -> Result<Vec<String>, StoreError> {
        Ok(parse_listed(
            self.with_store(|s| s.state(GATEWAY_SCOPE, key))?,
        ))
    }

    /// Finds the conversation a request continues (in memory, else among the store
    /// sessions listed under its key), or starts a new store session for it, and puts it
    /// first in the group.
    fn find_or_start(
        &self,
        key: &str,
        group: &mut Group,
        conv: &Conversation<'_>,
        raws: &[&str],
        path: &mut CompilePath,
    ) -> Result<(), SessionError> {
        if let Some(i) = group.best(conv, raws) {
            group.touch(i);
            return Ok(());
        }
        // Not in memory: another gateway (or an earlier run) may hold it in the store. A
        // conversation in memory that is not a prefix is not one in the store either (store
        // sessions only grow), so only the others are read.
        let listed = self.listed(key)?;
        let mut best: Option<(usize, Live)> = None;
        for context_id in &listed {
            if group.lives.iter().any(|l| &l.context_id == context_id) {
                continue;
            }
            if let Some(live) = self.load_matching(context_id, conv, raws)? {
                let held = live.session.items().len();
                if best.as_ref().is_none_or(|(n, _)| held > *n) {
                    best = Some((held, live));
                }
            }
        }
        if let Some((_, live)) = best {
            group.put_first(live);
            return Ok(());
        }
        // A conversation this key has not held: a store session of its own, listed first.
        *path = CompilePath::Full;
        let name = if listed.is_empty() && group.lives.is_empty() {
            format!("gw-{key}")
        } else {
            fresh_context_id(key, conv)
        };
        self.start_session(key, group, conv, raws, &name, listed)
    }

    /// Starts the request's conversation in a store session named `name` (or `name.2`,
    /// `name.3`, ... when that one holds other items: a client that went back to an earlier
    /// state of a conversation), lists it first under `key` and puts it first in `group`.
    fn start_session(
        &self,
        key: &str,
        group: &mut Group,
        conv: &Conversation<'_>,
        raws: &[&str],
        name: &str,
        listed: Vec<String>,
    ) -> Result<(), SessionError> {
        let mut found = None;
        for n in 1..=16 {
            let context_id = if n == 1 {
                name.to_owned()
            } else {
                format!("{name}.{n}")
            };
            if let Some(live) = self.load_matching(&context_id, conv, raws)? {
                found = Some(live);
                break;
            }
        }
        let live = found.ok_or_else(|| StoreError::Corrupt {
            context_id: name.to_owned(),
            message: "16 store sessions of this name hold other items than the request".into(),
        })?;
        let mut names = vec![live.context_id.clone()];
        names.extend(
            listed
                .into_iter()
                .filter(|c| *c != live.context_id)
                .take(MAX_LISTED_PER_KEY - 1),
        );
        self.with_store(|s| s.put_state(GATEWAY_SCOPE, key, names.join("\n").as_bytes()))?;
        group.put_first(live);
        Ok(())
    }

    /// Whether a conversation of `key` held in memory is a prefix of the request's: then
    /// [`Sessions::compile`] costs what the request appends (unless the conversation is
    /// evicted in between). `false` means a whole compile, from the store or from scratch.
    pub fn holds_prefix(&self, key: &str, conv: &Conversation<'_>) -> bool {
        let raws = raw_items(conv);
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = live.get(key).cloned() else {
            return false;
        };
        drop(live);
        let group = entry.lock().unwrap_or_else(|p| p.into_inner());
        group.best(conv, &raws).is_some()
    }

    /// Compiles a request's conversation under `key`: incrementally when a conversation of
    /// the key holds a prefix of its items, from scratch in a store session of its own
    /// otherwise. Blocking (store I/O): call from a blocking thread.
    pub fn compile(&self, key: &str, conv: &Conversation<'_>) -> Result<Compiled, SessionError> {
        // The request's items as exact bytes. What is stored is recognised by comparing
        // bytes (memcmp), and only the new items are hashed: a request costs what it adds.
        let raws = raw_items(conv);
        let entry = self.entry(key);
        let mut group = entry.lock().unwrap_or_else(|p| p.into_inner());
        group.last_used = self
            .clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let compiled = self.compile_in(key, &mut group, conv, &raws);
        self.account(key, &mut group);
        compiled
    }

    /// [`Sessions::compile`] with the key's conversations locked.
    fn compile_in(
        &self,
        key: &str,
        group: &mut Group,
        conv: &Conversation<'_>,
        raws: &[&str],
    ) -> Result<Compiled, SessionError> {
        // Up to three tries: a store session another gateway advanced is caught up with, a
        // batch that does not fit moves to a fresh store session.
        let mut path = CompilePath::Incremental;
        let mut new_items = 0;
        // Set when the conversation to use was just put first (caught up, or started apart).
        let mut chosen: Option<usize> = None;
        for _ in 0..3 {
            let at = match chosen.take() {
                Some(at) => at,
                None => {
                    self.find_or_start(key, group, conv, raws, &mut path)?;
                    0
                }
            };
            let live = &mut group.lives[at];
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
                        let context_id = live.context_id.clone();
                        group.lives.remove(at);
                        if let Some(caught_up) = self.load_matching(&context_id, conv, raws)? {
                            group.put_first(caught_up);
                            chosen = Some(0);
                        }
                        continue;
                    }
                    Err(SessionError::Store(StoreError::Rejected { .. })) => {
                        // (Nothing was appended: the session is as it was.)
                        // The new items do not fit the stored ones (an id reused across the
                        // two): compile the request on its own, in a fresh store session.
                        let listed = self.listed(key)?;
                        let name = format!("{}.r", fresh_context_id(key, conv));
                        self.start_session(key, group, conv, raws, &name, listed)?;
                        chosen = Some(0);
                        path = CompilePath::Full;
                        continue;
                    }
                    Err(e) => {
                        group.lives.remove(at);
                        return Err(e);
                    }
                }
            }
            let live = &mut group.lives[at];
            return self.render(live, conv, path, new_items, raws.len());
        }
        Err(SessionError::Store(StoreError::Backend {
            backend: "gateway",
            message: format!(
                "conversation {key:?}: the stored session kept changing under this request (three tries)"
            ),
        }))
    }

    /// Opens a store session and compiles what it holds, when what it holds is a prefix of
    /// the request's items (`None` otherwise: nothing is compiled). The request's system
    /// prompt decides whether item 0 is one.
    fn load_matching(
        &self,
        context_id: &str,
        conv: &Conversation<'_>,
        raws: &[&str],
    ) -> Result<Option<Live>, SessionError> {
        let (info, items) = self.with_store(|s| -> Result<_, StoreError> {
            let info = s.info(context_id)?;
            let items = s.items(context_id, 0)?;
            Ok((info, items))
        })?;
        let format = info.and_then(|i| i.format).unwrap_or(conv.format);
        let has_system = items
            .first()
            .is_some_and(|i| i.id == "system" && conv.format.wire().system_key().is_some());
        if prefix_len(&items, format, has_system, conv, raws).is_none() {
            return Ok(None);
        }
        let mut session = self.template.clone();
        session.extend(items)?;
        session.compile();
        Ok(Some(Live {
            context_id: context_id.to_owned(),
            format,
            session,
            has_system,
            rendered: None,
        }))
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
        let batch = live.session.items()[start..].to_vec();
        self.commit(PendingAppend {
            context_id: live.context_id.clone(),
            format: live.format,
            start: start as u64,
            items: batch,
            result: Mutex::new(None),
        })?;
        live.session.compile();
        Ok(())
    }

    /// Commits one append together with those of every request that queued while the store
    /// was busy (group commit): the request that gets the store commits the whole queue in
    /// one transaction, and each request returns once its own items are durable. One
    /// request alone costs one commit, as before; n at once cost about one, not n.
    fn commit(&self, append: PendingAppend) -> Result<u64, StoreError> {
        use std::sync::atomic::Ordering::Relaxed;
        let mine = Arc::new(append);
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(mine.clone());
        let mut guard = self.store.lock().unwrap_or_else(|p| p.into_inner());
        // Committed by the request that held the store before this one.
        if let Some(result) = take_result(&mine) {
            return result;
        }
        let group = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        let Some(store) = guard.as_mut() else {
            return Err(StoreError::Backend {
                backend: "gateway",
                message: "the store is closed".into(),
            });
        };
        let batches: Vec<AppendBatch<'_>> = group
            .iter()
            .map(|p| AppendBatch {
                context_id: &p.context_id,
                format: p.format,
                expected_seq: p.start,
                items: &p.items,
            })
            .collect();
        let results = store.append_all(&batches);
        self.commits.fetch_add(1, Relaxed);
        self.appends.fetch_add(group.len() as u64, Relaxed);
        for (pending, result) in group.iter().zip(results) {
            *pending.result.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
        }
        drop(guard);
        take_result(&mine).unwrap_or_else(|| {
            Err(StoreError::Backend {
                backend: "gateway",
                message: "the append was not committed (the store gave no result for it)".into(),
            })
        })
    }

    /// How many requests' appends are waiting for the store right now.
    pub fn queued_appends(&self) -> usize {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// How many appends the store committed, in how many commits: with requests arriving
    /// together, fewer commits than appends.
    pub fn commit_counts(&self) -> CommitCounts {
        use std::sync::atomic::Ordering::Relaxed;
        CommitCounts {
            commits: self.commits.load(Relaxed),
            appends: self.appends.load(Relaxed),
        }
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

    /// The original bytes of item `id` of the conversation `key` (what a stub names): of
    /// the conversation used last, else of the others the key holds, newest first.
    pub fn receipt(&self, key: &str, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut context_ids: Vec<String> = {
            let entry = self.entry(key);
            let group = entry.lock().unwrap_or_else(|p| p.into_inner());
            group.lives.iter().map(|l| l.context_id.clone()).collect()
        };
        for listed in self.listed(key)? {
            if !context_ids.contains(&listed) {
                context_ids.push(listed);
            }
        }
        if context_ids.is_empty() {
            context_ids.push(format!("gw-{key}"));
        }
        for context_id in context_ids {
            if let Some(bytes) = self.with_store(|s| s.receipt(&context_id, id))? {
                return Ok(Some(bytes));
            }
        }
        Ok(None)
    }

    /// What a recall of `id` in the store session `context_id` (the one the request was
    /// compiled into, under `key`) gets: the item's original bytes, or the ids nearest to
    /// it that the conversation shortened. Never another session's item.
    pub fn recall(&self, key: &str, context_id: &str, id: &str) -> Result<Recalled, StoreError> {
        if let Some(bytes) = self.with_store(|s| s.receipt(context_id, id))? {
            return Ok(Recalled::Found(bytes));
        }
        let in_memory: Option<Vec<String>> = {
            let entry = self.entry(key);
            let group = entry.lock().unwrap_or_else(|p| p.into_inner());
            group
                .lives
                .iter()
                .find(|l| l.context_id == context_id)
                .map(|live| shortened_ids(&live.session))
        };
        let shortened = match in_memory {
            Some(ids) => ids,
            None => {
                let items = self.with_store(|s| s.items(context_id, 0))?;
                let mut session = self.template.clone();
                match session.extend(items) {
                    Ok(()) => {
                        session.compile();
                        shortened_ids(&session)
                    }
                    Err(_) => Vec::new(),
                }
            }
        };
        Ok(Recalled::Missing {
            nearest: nearest_ids(id, &shortened),
        })
    }
}

/// The result a group commit left for an append, if it was committed yet.
fn take_result(append: &PendingAppend) -> Option<Result<u64, StoreError>> {
    append
        .result
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
}

/// The ids of the items a compiled session retired or rewrote: the ones its stubs name.
fn shortened_ids(session: &Session) -> Vec<String> {
    session
        .items()
        .iter()
        .enumerate()
        .filter(|&(i, _)| session.plan_of(i).action() != ctxgc_core::Action::Keep)
        .map(|(_, item)| item.id.clone())
        .collect()
}

/// The (at most three) ids nearest to a mis-copied one, by edit distance, ties by id.
///
/// ```
/// use ctxgc_gateway::sessions::nearest_ids;
/// let ids = ["m3".to_owned(), "m12".to_owned(), "m31".to_owned(), "call_9".to_owned()];
/// assert_eq!(nearest_ids("m13", &ids), ["m12", "m3", "m31"]);
/// assert!(nearest_ids("m1", &[]).is_empty());
/// ```
pub fn nearest_ids(id: &str, ids: &[String]) -> Vec<String> {
    let mut ranked: Vec<(usize, &String)> = ids
        .iter()
        .map(|candidate| (strsim::levenshtein(id, candidate), candidate))
        .collect();
    ranked.sort();
    ranked.dedup_by(|a, b| a.1 == b.1);
    ranked.into_iter().take(3).map(|(_, c)| c.clone()).collect()
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
