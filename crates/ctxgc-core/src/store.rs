//! Where sessions live between processes: the storage interface, an in-memory store (the
//! library default), and [`StoredSession`], the incremental engine backed by a store.
//!
//! The core does no I/O: durable backends (SQLite, PostgreSQL) implement [`Store`] in the
//! `ctxgc-store` crate. Every backend keeps the same promises:
//!
//! - **Durable before acknowledged.** [`Store::append`] returns only once the items are
//!   committed; a batch is stored whole or not at all.
//! - **No forks.** Every append names the sequence number it expects to write at (the number
//!   of items the writer has seen). A writer that is behind gets [`StoreError::Conflict`];
//!   two writers can never both write sequence number `n`.
//! - **Isolation.** Everything is read through a `context_id`; one session never sees another
//!   session's items or receipts, even when identical payloads are stored once.
//! - **Receipts.** The original bytes of every appended item are kept, content-addressed by
//!   blake3, so whatever a later compilation retires or rewrites can be given back by id.
//!
//! ```
//! use ctxgc_core::frontend::events::lower_events;
//! use ctxgc_core::store::{MemoryStore, StoredSession};
//! use ctxgc_core::{Format, Session};
//!
//! let trace = r#"[
//!   {"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 10},
//!   {"id": "e2", "type": "set_var", "timestamp": 2, "key": "x", "value": 20}
//! ]"#;
//! let items = lower_events(trace, &Default::default()).unwrap();
//! let mut stored = StoredSession::open(MemoryStore::new(), "ctx-1", Session::new(Default::default())).unwrap();
//! assert_eq!(stored.append(Format::Events, items).unwrap(), 0..2);
//! stored.compile().unwrap();
//! assert_eq!(stored.session().decision(0).by, ["e2"]);
//! let original = stored.receipt("e1").unwrap().unwrap();
//! assert_eq!(original, br#"{"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 10}"#);
//! ```

use std::collections::BTreeMap;
use std::ops::Range;

use crate::error::Error;
use crate::formats::Format;
use crate::ir::Item;
use crate::session::Session;

pub mod chat;
pub mod savings;

use chat::{ChatEnvelope, ChatMessage, ChatTranscript, holds_chat};
use savings::SavingsRecord;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The writer appended against a stale sequence number: someone else appended first.
    /// Nothing was written; catch up ([`StoredSession::refresh`]) and decide again.
    #[error(
        "session {context_id:?}: append expected to write at sequence {expected}, but the session already has {actual} items (another writer appended first)"
    )]
    Conflict {
        /// The session.
        context_id: String,
        /// The sequence number the writer expected to write at.
        expected: u64,
        /// The number of items the session actually has.
        actual: u64,
    },
    /// The items do not fit the session (duplicate ids, dangling references, ...). Nothing
    /// was written.
    #[error("session {context_id:?}: items rejected: {source}")]
    Rejected {
        /// The session.
        context_id: String,
        /// What is wrong with the items.
        #[source]
        source: Error,
    },
    /// The items are in another format than the session's.
    #[error("session {context_id:?} holds {stored} items; cannot append {appended} items to it")]
    FormatMismatch {
        /// The session.
        context_id: String,
        /// The session's format.
        stored: &'static str,
        /// The format of the items appended.
        appended: &'static str,
    },
    /// A receipt id is already taken by different bytes in this session.
    #[error(
        "session {context_id:?}: receipt {id:?} already holds different bytes; receipts never change"
    )]
    ReceiptTaken {
        /// The session.
        context_id: String,
        /// The receipt id.
        id: String,
    },
    /// A receipt's bytes no longer match the blake3 hash they were stored under: the database
    /// was damaged or edited. The bytes are not returned.
    #[error(
        "session {context_id:?}: receipt {id:?} is corrupt: its bytes no longer match the blake3 hash {hash} they were stored under"
    )]
    ReceiptCorrupt {
        /// The session.
        context_id: String,
        /// The receipt id (or the hash, when read by hash).
        id: String,
        /// The hash it was stored under.
        hash: String,
    },
    /// What the store holds cannot be read back (a damaged or foreign database).
    #[error("session {context_id:?}: stored data is unreadable: {message}")]
    Corrupt {
        /// The session (or the database-wide scope, like `schema_version`).
        context_id: String,
        /// What is wrong.
        message: String,
    },
    /// The database could not be reached or refused the operation.
    #[error("{backend}: {message}")]
    Backend {
        /// Which backend (`sqlite`, `postgres`, ...).
        backend: &'static str,
        /// What it said, with the operation that failed.
        message: String,
    },
}

/// What a store knows about one session.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SessionInfo {
    /// The session's id.
    pub context_id: String,
    /// The format of its items (`None` for a session that holds receipts but no item yet).
    pub format: Option<Format>,
    /// How many items it holds (the next sequence number).
    pub items: u64,
}

/// A saved compiler state: the session as compiled over its first `seq` items.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// How many items (sequence numbers `0..seq`) the state covers.
    pub seq: u64,
    /// The state.
    pub session: Session,
}

/// One batch of a group commit ([`Store::append_all`]): what [`Store::append`] takes.
#[derive(Debug, Clone, Copy)]
pub struct AppendBatch<'a> {
    /// The session.
    pub context_id: &'a str,
    /// The session's format (set on its first append).
    pub format: Format,
    /// The sequence number the batch is written at (the session's length).
    pub expected_seq: u64,
    /// The items.
    pub items: &'a [Item],
}

/// Persistence of sessions, their items, receipts, compiler snapshots and named state.
///
/// Sequence numbers are positions: the first item of a session has sequence number 0, and
/// the next append writes at [`Store::next_seq`].
pub trait Store {
    /// The backend's name, for messages (`memory`, `sqlite`, `postgres`).
    fn backend(&self) -> &'static str;

    /// Appends `items` to the session `context_id` (created on its first append, with
    /// `format`), at sequence number `expected_seq`, together with each item's original bytes
    /// as its receipt, in one transaction. Returns the next sequence number, only once the
    /// batch is durable. A session whose length is not `expected_seq` gives
    /// [`StoreError::Conflict`]; after that, or any error the backend reports before
    /// committing, nothing of the batch is stored. (If the connection breaks while the commit
    /// is under way, only reading the session back tells: [`StoredSession`] does so after
    /// every failed append.)
    fn append(
        &mut self,
        context_id: &str,
        format: Format,
        expected_seq: u64,
        items: &[Item],
    ) -> Result<u64, StoreError>;

    /// Appends several batches, each as [`Store::append`] would, committed together: one
    /// durable commit for all of them (group commit), so writers that arrive at once share
    /// its cost. Each batch succeeds or fails on its own (a [`StoreError::Conflict`] in one
    /// leaves the others stored); the results are in the order of `batches`, each given
    /// only once its batch is durable. The default appends them one by one.
    ///
    /// ```
    /// use ctxgc_core::frontend::events::lower_events;
    /// use ctxgc_core::store::{AppendBatch, MemoryStore, Store};
    /// use ctxgc_core::Format;
    ///
    /// let items = lower_events(
    ///     r#"[{"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 10}]"#,
    ///     &Default::default(),
    /// )
    /// .unwrap();
    /// let mut store = MemoryStore::new();
    /// let results = store.append_all(&[
    ///     AppendBatch { context_id: "a", format: Format::Events, expected_seq: 0, items: &items },
    ///     // b is empty: nothing can be written at sequence 5, and a is stored all the same
    ///     AppendBatch { context_id: "b", format: Format::Events, expected_seq: 5, items: &items },
    /// ]);
    /// assert_eq!(results[0].as_ref().ok(), Some(&1));
    /// assert!(results[1].is_err());
    /// assert_eq!(store.items("a", 0).unwrap().len(), 1);
    /// ```
    fn append_all(&mut self, batches: &[AppendBatch<'_>]) -> Vec<Result<u64, StoreError>> {
        batches
            .iter()
            .map(|b| self.append(b.context_id, b.format, b.expected_seq, b.items))
            .collect()
    }

    /// What the store knows about one session (`None`: no such session).
    fn info(&mut self, context_id: &str) -> Result<Option<SessionInfo>, StoreError>;

    /// The items of a session from sequence number `from` on, in order.
    fn items(&mut self, context_id: &str, from: u64) -> Result<Vec<Item>, StoreError>;

    /// Every session, ordered by `context_id`.
    fn sessions(&mut self) -> Result<Vec<SessionInfo>, StoreError>;

    /// Saves the compiler state of a session over its first `snapshot.seq` items, for the
    /// configuration `fingerprint`. A newer snapshot (higher `seq`) for the same fingerprint
    /// is not replaced by an older one.
    fn save_snapshot(
        &mut self,
        context_id: &str,
        fingerprint: &str,
        snapshot: &Snapshot,
    ) -> Result<(), StoreError>;

    /// The saved compiler state of a session for the configuration `fingerprint`, if any.
    fn load_snapshot(
        &mut self,
        context_id: &str,
        fingerprint: &str,
    ) -> Result<Option<Snapshot>, StoreError>;

    /// Stores `original` as the receipt `id` of a session, content-addressed (identical bytes
    /// are stored once, whichever sessions hold them). Returns the blake3 hash (hex). Storing
    /// the same bytes under the same id again is a no-op; different bytes are refused.
    fn put_receipt(
        &mut self,
        context_id: &str,
        id: &str,
        original: &[u8],
    ) -> Result<String, StoreError>;

    /// The original bytes of receipt `id`, only if that receipt belongs to `context_id`.
    fn receipt(&mut self, context_id: &str, id: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// The bytes with this blake3 hash (hex), only if a receipt of `context_id` holds them.
    fn receipt_by_hash(
        &mut self,
        context_id: &str,
        hash: &str,
    ) -> Result<Option<Vec<u8>>, StoreError>;

    /// Saves a named state blob (learned projections, mode state, ...) under a scope (a
    /// `context_id`, or any name shared by several sessions). Replaces the previous value.
    fn put_state(&mut self, scope: &str, key: &str, value: &[u8]) -> Result<(), StoreError>;

    /// A named state blob, if one was saved.
    fn state(&mut self, scope: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Appends messages to the chat session `context_id` (created on its first append), in one
    /// transaction: `messages` at positions `expected_len..`, each also kept as the receipt of
    /// its id, the session's format set to `format`, and its envelope replaced by `envelope`
    /// when one is given (kept when `None`). Returns the new number of messages, only once
    /// durable. A session whose length is not `expected_len` gives [`StoreError::Conflict`]; a
    /// session of items ([`Store::append`]) gives [`StoreError::FormatMismatch`] or
    /// [`StoreError::Rejected`]. Use [`chat::append_chat`], which assigns the ids and checks
    /// the whole transcript, rather than calling this directly.
    fn chat_append(
        &mut self,
        context_id: &str,
        format: Format,
        expected_len: u64,
        envelope: Option<&ChatEnvelope>,
        messages: &[ChatMessage],
    ) -> Result<u64, StoreError>;

    /// The chat session `context_id` as one consistent read: format, envelope and every
    /// message (`None`: no chat session of that id).
    fn chat_transcript(&mut self, context_id: &str) -> Result<Option<ChatTranscript>, StoreError>;

    /// Keeps one record of what the gateway or the proxy saved, durable once this returns.
    /// Records are only ever added (the same record twice is kept twice).
    fn record_savings(&mut self, record: &SavingsRecord) -> Result<(), StoreError>;

    /// The savings records of the session `context_id`, or of every session when `None`, in
    /// [`savings::canonical_order`].
    fn savings(&mut self, context_id: Option<&str>) -> Result<Vec<SavingsRecord>, StoreError>;
}

/// `Store` for a pointer to a store (`&mut S`, `Box<S>`): every method forwards to the
/// store pointed at.
macro_rules! forward_store {
    ($($pointer:ty),+) => {$(
        impl<S: Store + ?Sized> Store for $pointer {
            fn backend(&self) -> &'static str {
                (**self).backend()
            }
            fn append(
                &mut self,
                context_id: &str,
                format: Format,
                expected_seq: u64,
                items: &[Item],
            ) -> Result<u64, StoreError> {
                (**self).append(context_id, format, expected_seq, items)
            }
            fn append_all(&mut self, batches: &[AppendBatch<'_>]) -> Vec<Result<u64, StoreError>> {
                (**self).append_all(batches)
            }
            fn info(&mut self, context_id: &str) -> Result<Option<SessionInfo>, StoreError> {
                (**self).info(context_id)
            }
            fn items(&mut self, context_id: &str, from: u64) -> Result<Vec<Item>, StoreError> {
                (**self).items(context_id, from)
            }
            fn sessions(&mut self) -> Result<Vec<SessionInfo>, StoreError> {
                (**self).sessions()
            }
            fn save_snapshot(
                &mut self,
                context_id: &str,
                fingerprint: &str,
                snapshot: &Snapshot,
            ) -> Result<(), StoreError> {
                (**self).save_snapshot(context_id, fingerprint, snapshot)
            }
            fn load_snapshot(
                &mut self,
                context_id: &str,
                fingerprint: &str,
            ) -> Result<Option<Snapshot>, StoreError> {
                (**self).load_snapshot(context_id, fingerprint)
            }
            fn put_receipt(
                &mut self,
                context_id: &str,
                id: &str,
                original: &[u8],
            ) -> Result<String, StoreError> {
                (**self).put_receipt(context_id, id, original)
            }
            fn receipt(&mut self, context_id: &str, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
                (**self).receipt(context_id, id)
            }
            fn receipt_by_hash(
                &mut self,
                context_id: &str,
                hash: &str,
            ) -> Result<Option<Vec<u8>>, StoreError> {
                (**self).receipt_by_hash(context_id, hash)
            }
            fn put_state(&mut self, scope: &str, key: &str, value: &[u8]) -> Result<(), StoreError> {
                (**self).put_state(scope, key, value)
            }
            fn state(&mut self, scope: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
                (**self).state(scope, key)
            }
            fn chat_append(
                &mut self,
                context_id: &str,
                format: Format,
                expected_len: u64,
                envelope: Option<&ChatEnvelope>,
                messages: &[ChatMessage],
            ) -> Result<u64, StoreError> {
                (**self).chat_append(context_id, format, expected_len, envelope, messages)
            }
            fn chat_transcript(&mut self, context_id: &str) -> Result<Option<ChatTranscript>, StoreError> {
                (**self).chat_transcript(context_id)
            }
            fn record_savings(&mut self, record: &SavingsRecord) -> Result<(), StoreError> {
                (**self).record_savings(record)
            }
            fn savings(&mut self, context_id: Option<&str>) -> Result<Vec<SavingsRecord>, StoreError> {
                (**self).savings(context_id)
            }
        }
    )+};
}

forward_store!(&mut S, Box<S>);

/// The blake3 hash of `bytes`, as lowercase hex: the content address of a receipt.
///
/// ```
/// assert_eq!(ctxgc_core::store::content_hash(b"").len(), 64);
/// ```
pub fn content_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

#[derive(Debug, Clone, Default)]
struct MemorySession {
    format: Option<Format>,
    items: Vec<Item>,
    receipts: BTreeMap<String, String>,
    snapshots: BTreeMap<String, Snapshot>,
    /// Set for a chat session: its envelope and messages.
    chat: Option<MemoryChat>,
}

#[derive(Debug, Clone, Default)]
struct MemoryChat {
    envelope: Option<ChatEnvelope>,
    messages: Vec<ChatMessage>,
}

impl MemorySession {
    fn info(&self, context_id: &str) -> SessionInfo {
        SessionInfo {
            context_id: context_id.to_owned(),
            format: self.format,
            items: match &self.chat {
                Some(chat) => chat.messages.len() as u64,
                None => self.items.len() as u64,
            },
        }
    }
}

/// A store in memory: the library default. Lives as long as the value; nothing is durable.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    sessions: BTreeMap<String, MemorySession>,
    blobs: BTreeMap<String, Vec<u8>>,
    state: BTreeMap<(String, String), Vec<u8>>,
    /// Savings records, kept in the order they are read back.
    savings: Vec<SavingsRecord>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many distinct payloads the receipts hold (identical bytes count once).
    pub fn distinct_payloads(&self) -> usize {
        self.blobs.len()
    }
}

impl Store for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    fn append(
        &mut self,
        context_id: &str,
        format: Format,
        expected_seq: u64,
        items: &[Item],
    ) -> Result<u64, StoreError> {
        let existing = self.sessions.get(context_id);
        if existing.is_some_and(|s| s.chat.is_some()) {
            return Err(holds_chat(context_id));
        }
        let actual = existing.map_or(0, |s| s.items.len() as u64);
        if actual != expected_seq {
            return Err(StoreError::Conflict {
                context_id: context_id.to_owned(),
                expected: expected_seq,
                actual,
            });
        }
        if let Some(stored) = existing.and_then(|s| s.format)
            && stored != format
        {
            return Err(StoreError::FormatMismatch {
                context_id: context_id.to_owned(),
                stored: stored.name(),
                appended: format.name(),
            });
        }
        // Check every receipt id before changing anything: the batch is all or nothing.
        let hashes: Vec<String> = items
            .iter()
            .map(|item| content_hash(item.raw.as_bytes()))
            .collect();
        let mut taken: BTreeMap<&str, &str> = existing
            .map(|s| {
                s.receipts
                    .iter()
                    .map(|(id, h)| (id.as_str(), h.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        for (item, hash) in items.iter().zip(&hashes) {
            if let Some(held) = taken.insert(&item.id, hash)
                && held != hash
            {
                return Err(StoreError::ReceiptTaken {
                    context_id: context_id.to_owned(),
                    id: item.id.clone(),
                });
            }
        }
        let session = self.sessions.entry(context_id.to_owned()).or_default();
        session.format = Some(format);
        for (item, hash) in items.iter().zip(hashes) {
            self.blobs
                .entry(hash.clone())
                .or_insert_with(|| item.raw.as_bytes().to_vec());
            session.receipts.insert(item.id.clone(), hash);
        }
        session.items.extend_from_slice(items);
        Ok(session.items.len() as u64)
    }

    fn info(&mut self, context_id: &str) -> Result<Option<SessionInfo>, StoreError> {
        Ok(self.sessions.get(context_id).map(|s| s.info(context_id)))
    }

    fn items(&mut self, context_id: &str, from: u64) -> Result<Vec<Item>, StoreError> {
        let from = usize::try_from(from).unwrap_or(usize::MAX);
        Ok(self
            .sessions
            .get(context_id)
            .and_then(|s| s.items.get(from..))
            .map_or_else(Vec::new, <[Item]>::to_vec))
    }

    fn sessions(&mut self) -> Result<Vec<SessionInfo>, StoreError> {
        Ok(self.sessions.iter().map(|(id, s)| s.info(id)).collect())
    }

    fn save_snapshot(
        &mut self,
        context_id: &str,
        fingerprint: &str,
        snapshot: &Snapshot,
    ) -> Result<(), StoreError> {
        let len = self.sessions.get(context_id).map_or(0, |s| s.items.len());
        if snapshot.seq > len as u64 {
            return Err(StoreError::Corrupt {
                context_id: context_id.to_owned(),
                message: format!(
                    "a snapshot over {} items cannot be saved: the session has {len}",
                    snapshot.seq
                ),
            });
        }
        let Some(session) = self.sessions.get_mut(context_id) else {
            return Ok(()); // an empty snapshot of an empty session: nothing to keep
        };
        if session
            .snapshots
            .get(fingerprint)
            .is_none_or(|s| s.seq < snapshot.seq)
        {
            session
                .snapshots
                .insert(fingerprint.to_owned(), snapshot.clone());
        }
        Ok(())
    }

    fn load_snapshot(
        &mut self,
        context_id: &str,
        fingerprint: &str,
    ) -> Result<Option<Snapshot>, StoreError> {
        Ok(self
            .sessions
            .get(context_id)
            .and_then(|s| s.snapshots.get(fingerprint).cloned()))
    }

    fn put_receipt(
        &mut self,
        context_id: &str,
        id: &str,
        original: &[u8],
    ) -> Result<String, StoreError> {
        let hash = content_hash(original);
        let session = self.sessions.entry(context_id.to_owned()).or_default();
        match session.receipts.get(id) {
            Some(held) if *held != hash => {
                return Err(StoreError::ReceiptTaken {
                    context_id: context_id.to_owned(),
                    id: id.to_owned(),
                });
            }
            Some(_) => {}
            None => {
                session.receipts.insert(id.to_owned(), hash.clone());
            }
        }
        self.blobs
            .entry(hash.clone())
            .or_insert_with(|| original.to_vec());
        Ok(hash)
    }

    fn receipt(&mut self, context_id: &str, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .sessions
            .get(context_id)
            .and_then(|s| s.receipts.get(id))
            .and_then(|hash| self.blobs.get(hash))
            .cloned())
    }

    fn receipt_by_hash(
        &mut self,
        context_id: &str,
        hash: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let owned = self
            .sessions
            .get(context_id)
            .is_some_and(|s| s.receipts.values().any(|h| h == hash));
        Ok(if owned {
            self.blobs.get(hash).cloned()
        } else {
            None
        })
    }

    fn put_state(&mut self, scope: &str, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.state
            .insert((scope.to_owned(), key.to_owned()), value.to_vec());
        Ok(())
    }

    fn state(&mut self, scope: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.state.get(&(scope.to_owned(), key.to_owned())).cloned())
    }

    fn chat_append(
        &mut self,
        context_id: &str,
        format: Format,
        expected_len: u64,
        envelope: Option<&ChatEnvelope>,
        messages: &[ChatMessage],
    ) -> Result<u64, StoreError> {
        let existing = self.sessions.get(context_id);
        let actual = existing
            .and_then(|s| s.chat.as_ref())
            .map_or(0, |c| c.messages.len() as u64);
        chat::check_chat_append(
            context_id,
            existing.and_then(|s| s.format),
            existing.is_some_and(|s| s.chat.is_some()),
            format,
            actual,
            expected_len,
        )?;
        let hashes: Vec<String> = messages
            .iter()
            .map(|m| content_hash(m.raw.as_bytes()))
            .collect();
        if let Some(session) = existing {
            for (m, hash) in messages.iter().zip(&hashes) {
                if session.receipts.get(&m.id).is_some_and(|held| held != hash) {
                    return Err(StoreError::ReceiptTaken {
                        context_id: context_id.to_owned(),
                        id: m.id.clone(),
                    });
                }
            }
        }
        let session = self.sessions.entry(context_id.to_owned()).or_default();
        session.format = Some(format);
        let chat = session.chat.get_or_insert_with(MemoryChat::default);
        if let Some(envelope) = envelope {
            chat.envelope = Some(envelope.clone());
        }
        for (m, hash) in messages.iter().zip(hashes) {
            self.blobs
                .entry(hash.clone())
                .or_insert_with(|| m.raw.as_bytes().to_vec());
            session.receipts.entry(m.id.clone()).or_insert(hash);
        }
        chat.messages.extend_from_slice(messages);
        Ok(chat.messages.len() as u64)
    }

    fn chat_transcript(&mut self, context_id: &str) -> Result<Option<ChatTranscript>, StoreError> {
        let Some(session) = self.sessions.get(context_id) else {
            return Ok(None);
        };
        Ok(match (&session.chat, session.format) {
            (Some(chat), Some(format)) => Some(ChatTranscript {
                format,
                envelope: chat.envelope.clone(),
                messages: chat.messages.clone(),
            }),
            _ => None,
        })
    }

    fn record_savings(&mut self, record: &SavingsRecord) -> Result<(), StoreError> {
        // After every equal record: the same position a sort of all records would give.
        let at = self
            .savings
            .partition_point(|r| savings::canonical_order(r, record).is_le());
        self.savings.insert(at, record.clone());
        Ok(())
    }

    fn savings(&mut self, context_id: Option<&str>) -> Result<Vec<SavingsRecord>, StoreError> {
        Ok(self
            .savings
            .iter()
            .filter(|r| context_id.is_none_or(|c| r.context_id == c))
            .cloned()
            .collect())
    }
}

/// When [`StoredSession::compile`] saves a new snapshot: once the items compiled since the
/// last one reach `min_items`, and at least a `1/growth_divisor` share of the items the last
/// snapshot covers. Snapshot writes then cost a bounded share of what is appended (amortised
/// O(1) per item), while reopening replays a bounded tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotPolicy {
    /// The fewest new items worth a snapshot.
    pub min_items: u64,
    /// A new snapshot waits for `covered / growth_divisor` new items (0: only `min_items`).
    pub growth_divisor: u64,
}

impl Default for SnapshotPolicy {
    fn default() -> Self {
        SnapshotPolicy {
            min_items: 512,
            growth_divisor: 16,
        }
    }
}

impl SnapshotPolicy {
    /// True when a session of `len` items whose last snapshot covers `covered` deserves a
    /// new snapshot.
    ///
    /// ```
    /// use ctxgc_core::store::SnapshotPolicy;
    /// let policy = SnapshotPolicy { min_items: 100, growth_divisor: 10 };
    /// assert!(!policy.due(99, 0));
    /// assert!(policy.due(100, 0));
    /// assert!(!policy.due(10_500, 10_000)); // 500 new, 1000 needed
    /// assert!(policy.due(11_000, 10_000));
    /// ```
    pub fn due(&self, len: u64, covered: u64) -> bool {
        let fresh = len.saturating_sub(covered);
        let share = covered.checked_div(self.growth_divisor).unwrap_or(0);
        fresh > 0 && fresh >= self.min_items.max(share)
    }
}

/// A [`Session`] whose items live in a [`Store`]: appends are durable before they are
/// acknowledged, and reopening resumes from the newest snapshot instead of replaying the
/// whole session.
///
/// The session's configuration (retention policy, passes) comes from an empty template
/// session; snapshots are kept per configuration (a fingerprint of the template), so a
/// session compiled under two configurations never mixes their states.
#[derive(Debug)]
pub struct StoredSession<S: Store> {
    store: S,
    context_id: String,
    template: Session,
    fingerprint: String,
    session: Session,
    format: Option<Format>,
    /// How many items the newest snapshot this process knows of covers.
    snapshot_seq: u64,
    /// False after a failed append: the in-memory session may hold items the store refused,
    /// so it is rebuilt from the store before the next use.
    in_sync: bool,
    /// How many items the session had when it was last known to match the store.
    synced_len: u64,
    policy: SnapshotPolicy,
}

/// A fingerprint of a session's configuration: blake3 of the empty session's state, in
/// canonical JSON (sorted keys, so that map order never changes it), and of this version.
fn fingerprint_of(template: &Session) -> Result<String, StoreError> {
    let state = serde_json::to_value(template).map_err(|e| StoreError::Corrupt {
        context_id: String::new(),
        message: format!("session configuration cannot be serialised: {e}"),
    })?;
    let mut hasher = blake3::Hasher::new();
    hasher.update(env!("CARGO_PKG_VERSION").as_bytes());
    hasher.update(b"\0");
    hasher.update(crate::ir::canonical_json(&state).as_bytes());
    Ok(hasher.finalize().to_hex().to_string())
}

impl<S: Store> StoredSession<S> {
    /// Opens the session `context_id` of `store` (it need not exist yet), configured like
    /// `template`, which must be empty. Resumes from the newest snapshot for this
    /// configuration and replays only the items after it.
    pub fn open(store: S, context_id: &str, template: Session) -> Result<Self, StoreError> {
        if !template.items().is_empty() {
            return Err(StoreError::Rejected {
                context_id: context_id.to_owned(),
                source: Error::Usage("the template session must be empty".into()),
            });
        }
        let fingerprint = fingerprint_of(&template)?;
        let mut stored = StoredSession {
            store,
            context_id: context_id.to_owned(),
            session: template.clone(),
            template,
            fingerprint,
            format: None,
            snapshot_seq: 0,
            in_sync: false,
            synced_len: 0,
            policy: SnapshotPolicy::default(),
        };
        stored.reload()?;
        Ok(stored)
    }

    /// Sets when compiling saves snapshots.
    pub fn with_snapshot_policy(mut self, policy: SnapshotPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Rebuilds the in-memory session from the store: newest snapshot, then the items after it.
    fn reload(&mut self) -> Result<(), StoreError> {
        self.in_sync = false;
        let snapshot = self
            .store
            .load_snapshot(&self.context_id, &self.fingerprint)?;
        // A snapshot that does not hold what it says is ignored like an unreadable one: it is
        // a cache of what the items say, and the items are replayed instead.
        let (seq, session) = match snapshot {
            Some(s) if s.session.items().len() as u64 == s.seq => (s.seq, s.session),
            _ => (0, self.template.clone()),
        };
        self.session = session;
        self.snapshot_seq = seq;
        self.format = self.store.info(&self.context_id)?.and_then(|i| i.format);
        self.catch_up()?;
        self.in_sync = true;
        Ok(())
    }

    fn ensure_in_sync(&mut self) -> Result<(), StoreError> {
        if self.in_sync { Ok(()) } else { self.reload() }
    }

    /// Catches up with items other writers appended since this session last read the store.
    /// Returns how many items were read.
    pub fn refresh(&mut self) -> Result<u64, StoreError> {
        if self.in_sync {
            self.catch_up()
        } else {
            let before = self.synced_len;
            self.reload()?;
            Ok(self.len().saturating_sub(before))
        }
    }

    /// Replays the stored items after the in-memory session's last one.
    fn catch_up(&mut self) -> Result<u64, StoreError> {
        let from = self.len();
        let items = self.store.items(&self.context_id, from)?;
        let count = items.len() as u64;
        if count == 0 {
            return Ok(0);
        }
        if self.format.is_none() {
            self.format = self.store.info(&self.context_id)?.and_then(|i| i.format);
        }
        if let Err(e) = self.session.extend(items) {
            self.in_sync = false;
            self.synced_len = from;
            return Err(StoreError::Corrupt {
                context_id: self.context_id.clone(),
                message: format!("stored items from sequence {from} do not replay: {e}"),
            });
        }
        Ok(count)
    }

    /// Appends items in `format`: checks them against the session, stores them durably at the
    /// next sequence number, and only then returns their sequence numbers. A writer that is
    /// behind the store gets [`StoreError::Conflict`] and nothing is written; call
    /// [`StoredSession::refresh`] and decide again.
    pub fn append(&mut self, format: Format, items: Vec<Item>) -> Result<Range<u64>, StoreError> {
        self.ensure_in_sync()?;
        if let Some(stored) = self.format
            && stored != format
        {
            return Err(StoreError::FormatMismatch {
                context_id: self.context_id.clone(),
                stored: stored.name(),
                appended: format.name(),
            });
        }
        let start = self.len();
        // Extending first validates the batch against the session (all or nothing).
        self.session
            .extend(items)
            .map_err(|source| StoreError::Rejected {
                context_id: self.context_id.clone(),
                source,
            })?;
        let batch = usize::try_from(start)
            .ok()
            .and_then(|s| self.session.items().get(s..))
            .unwrap_or_default();
        match self.store.append(&self.context_id, format, start, batch) {
            Ok(next) => {
                self.format = Some(format);
                Ok(start..next)
            }
            Err(err) => {
                self.in_sync = false;
                self.synced_len = start;
                Err(err)
            }
        }
    }

    /// Compiles what was appended since the last compilation, and saves a snapshot when the
    /// [`SnapshotPolicy`] says one is due.
    pub fn compile(&mut self) -> Result<(), StoreError> {
        self.ensure_in_sync()?;
        self.session.compile();
        let len = self.len();
        if self.policy.due(len, self.snapshot_seq) {
            self.save_snapshot()?;
        }
        Ok(())
    }

    /// Saves a snapshot of the session as it is now.
    pub fn save_snapshot(&mut self) -> Result<(), StoreError> {
        self.ensure_in_sync()?;
        if self.is_empty() {
            return Ok(());
        }
        let snapshot = Snapshot {
            seq: self.len(),
            session: self.session.clone(),
        };
        self.store
            .save_snapshot(&self.context_id, &self.fingerprint, &snapshot)?;
        self.snapshot_seq = snapshot.seq;
        Ok(())
    }

    /// The original bytes of item (or receipt) `id` of this session.
    pub fn receipt(&mut self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.store.receipt(&self.context_id, id)
    }

    /// The in-memory session, as of the last append, refresh or compile.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// [`Session::take_changes`] of the session: `None` also after a reload (another writer
    /// appended first, or a snapshot was read), when every plan may have changed.
    pub fn take_changes(&mut self) -> Option<Vec<usize>> {
        self.session.take_changes()
    }

    /// The session's id.
    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    /// The format of the session's items (`None` until the first append).
    pub fn format(&self) -> Option<Format> {
        self.format
    }

    /// How many items the session holds (the next sequence number).
    pub fn len(&self) -> u64 {
        self.session.items().len() as u64
    }

    /// True when the session holds no item.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many items the newest snapshot known to this session covers.
    pub fn snapshot_seq(&self) -> u64 {
        self.snapshot_seq
    }

    /// The fingerprint of this session's configuration (snapshots are kept per fingerprint).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The store.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Gives the store back.
    pub fn into_store(self) -> S {
        self.store
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::events::lower_events;

    fn items(text: &str) -> Vec<Item> {
        lower_events(text, &Default::default()).expect("test trace lowers")
    }

    fn set_var(id: &str, ts: u32, key: &str, value: u32) -> String {
        format!(
            r#"{{"id":"{id}","type":"set_var","timestamp":{ts},"key":"{key}","value":{value}}}"#
        )
    }

    #[test]
    fn a_stale_writer_gets_a_conflict_and_nothing_is_written() {
        let mut store = MemoryStore::new();
        let mut a = StoredSession::open(&mut store, "c", Session::new(Default::default())).unwrap();
        a.append(Format::Events, items(&set_var("e1", 1, "x", 1)))
            .unwrap();
        drop(a);
        // A second writer that has seen nothing appends at 0.
        let err = store
            .append("c", Format::Events, 0, &items(&set_var("e2", 2, "x", 2)))
            .unwrap_err();
        assert!(matches!(
            err,
            StoreError::Conflict {
                expected: 0,
                actual: 1,
                ..
            }
        ));
        assert_eq!(store.items("c", 0).unwrap().len(), 1);
    }

    #[test]
    fn a_writer_behind_the_store_conflicts_then_catches_up() {
        let mut stored =
            StoredSession::open(MemoryStore::new(), "c", Session::new(Default::default())).unwrap();
        stored
            .append(Format::Events, items(&set_var("e1", 1, "x", 1)))
            .unwrap();
        // Another writer appends behind this session's back.
        stored
            .store_mut()
            .append("c", Format::Events, 1, &items(&set_var("e2", 2, "x", 2)))
            .unwrap();
        let err = stored
            .append(Format::Events, items(&set_var("e3", 3, "x", 3)))
            .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Conflict {
                    expected: 1,
                    actual: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(stored.refresh().unwrap(), 1);
        assert_eq!(stored.len(), 2);
        assert_eq!(
            stored
                .append(Format::Events, items(&set_var("e3", 3, "x", 3)))
                .unwrap(),
            2..3
        );
        let ids: Vec<String> = stored
            .store_mut()
            .items("c", 0)
            .unwrap()
            .into_iter()
            .map(|i| i.id)
            .collect();
        assert_eq!(ids, ["e1", "e2", "e3"]);
    }

    #[test]
    fn rejected_items_leave_the_session_and_the_store_unchanged() {
        let mut stored =
            StoredSession::open(MemoryStore::new(), "c", Session::new(Default::default())).unwrap();
        stored
            .append(Format::Events, items(&set_var("e1", 1, "x", 1)))
            .unwrap();
        let err = stored
            .append(Format::Events, items(&set_var("e1", 2, "x", 2)))
            .unwrap_err();
        assert!(matches!(err, StoreError::Rejected { .. }), "{err}");
        assert_eq!(stored.len(), 1);
        assert_eq!(stored.store_mut().items("c", 0).unwrap().len(), 1);
    }

    #[test]
    fn resuming_from_a_snapshot_compiles_like_the_whole_trace() {
        let lines: Vec<String> = (0..40)
            .map(|n| set_var(&format!("e{n}"), n, &format!("k{}", n % 7), n))
            .collect();
        let whole = crate::compile(&lines.join("\n"), &Default::default()).unwrap();
        let policy = SnapshotPolicy {
            min_items: 5,
            growth_divisor: 0,
        };
        let template = Session::new(Default::default());
        let mut store = MemoryStore::new();
        for chunk in lines.chunks(6) {
            let mut stored = StoredSession::open(&mut store, "c", template.clone())
                .unwrap()
                .with_snapshot_policy(policy);
            stored
                .append(Format::Events, items(&chunk.join("\n")))
                .unwrap();
            stored.compile().unwrap();
        }
        let mut stored = StoredSession::open(&mut store, "c", template).unwrap();
        assert!(stored.snapshot_seq() >= 35, "{}", stored.snapshot_seq());
        stored.compile().unwrap();
        let resumed = crate::compile::report_events(stored.session(), Default::default());
        assert_eq!(resumed.output, whole.output);
        assert_eq!(resumed.decisions, whole.decisions);
    }

    #[test]
    fn receipts_are_content_addressed_and_isolated() {
        let mut store = MemoryStore::new();
        store
            .append("a", Format::Events, 0, &items(&set_var("e1", 1, "x", 1)))
            .unwrap();
        store
            .append("b", Format::Events, 0, &items(&set_var("e1", 1, "x", 1)))
            .unwrap();
        store
            .append("b", Format::Events, 1, &items(&set_var("e2", 2, "x", 2)))
            .unwrap();
        assert_eq!(store.distinct_payloads(), 2);
        assert!(store.receipt("a", "e2").unwrap().is_none());
        let hash = content_hash(set_var("e2", 2, "x", 2).as_bytes());
        assert!(store.receipt_by_hash("a", &hash).unwrap().is_none());
        assert!(store.receipt_by_hash("b", &hash).unwrap().is_some());
    }
}
