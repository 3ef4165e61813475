//! # ctxgc-store
//!
//! Durable ctxgc sessions. The interface is [`ctxgc_core::store::Store`]; this crate holds
//! its two database backends:
//!
//! - [`SqliteStore`]: one SQLite file in WAL mode, the embedded default. With no
//!   configuration the database is `.ctxgc/ctxgc.db` under the working directory
//!   ([`DEFAULT_PATH`]), or wherever `CTXGC_DB` points.
//! - [`PostgresStore`]: PostgreSQL, selected by a `postgres://` URL, for many instances that
//!   serve the same sessions.
//!
//! Both store the same things the same way: sessions by `context_id`, their items in append
//! order under sequence numbers, every item's original bytes as a receipt (content-addressed
//! by blake3, each session reaching only its own), compiler snapshots to resume incremental
//! compilation, named state blobs, and chat sessions (a request envelope and every message,
//! see [`ctxgc_core::store::chat`]). Schema migrations are versioned (`schema_version`
//! table) and applied on open: a database of an earlier version is brought up to date in
//! place, its sessions untouched.
//!
//! ```
//! use ctxgc_core::frontend::events::lower_events;
//! use ctxgc_core::store::StoredSession;
//! use ctxgc_core::{Format, Session};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let location = ctxgc_store::Location::parse(dir.path().join("ctxgc.db").to_str().unwrap());
//! let trace = r#"[
//!   {"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 10},
//!   {"id": "e2", "type": "set_var", "timestamp": 2, "key": "x", "value": 20}
//! ]"#;
//! let items = lower_events(trace, &Default::default()).unwrap();
//! let store = ctxgc_store::open(&location).unwrap();
//! let mut stored = StoredSession::open(store, "ctx-1", Session::new(Default::default())).unwrap();
//! stored.append(Format::Events, items).unwrap();
//! drop(stored);
//!
//! // Another process, later: the items are there.
//! let store = ctxgc_store::open(&location).unwrap();
//! let mut stored = StoredSession::open(store, "ctx-1", Session::new(Default::default())).unwrap();
//! stored.compile().unwrap();
//! assert_eq!(stored.session().decision(0).by, ["e2"]);
//! ```
#![warn(missing_docs)]

use std::fmt;
use std::path::{Path, PathBuf};

use ctxgc_core::store::chat::{ChatEnvelope, ChatMessage, ChatTranscript};
use ctxgc_core::store::savings::SavingsRecord;
pub use ctxgc_core::store::{AppendBatch, SessionInfo, Snapshot, Store, StoreError, StoredSession};
use ctxgc_core::{Format, Item};

mod codec;
pub mod postgres;
mod savings;
pub mod sqlite;
pub mod testing;

pub use crate::postgres::PostgresStore;
pub use crate::sqlite::SqliteStore;

/// The database used when nothing else is configured, relative to the working directory.
pub const DEFAULT_PATH: &str = ".ctxgc/ctxgc.db";

/// The environment variable that names the database when no `--db` is given.
pub const ENV_VAR: &str = "CTXGC_DB";

/// Where a store lives: a SQLite file or a PostgreSQL URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (`postgres://` or `postgresql://`).
    Postgres(String),
}

impl Location {
    /// Reads a `--db` value: a `postgres://` or `postgresql://` URL, a `sqlite://PATH`, or a
    /// plain file path.
    ///
    /// ```
    /// use ctxgc_store::Location;
    /// assert!(matches!(Location::parse("postgres://postgres@127.0.0.1:5432/test"), Location::Postgres(_)));
    /// assert_eq!(Location::parse("sqlite://x.db"), Location::Sqlite("x.db".into()));
    /// assert_eq!(Location::parse("state/ctxgc.db"), Location::Sqlite("state/ctxgc.db".into()));
    /// ```
    pub fn parse(spec: &str) -> Location {
        if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
            Location::Postgres(spec.to_owned())
        } else if let Some(path) = spec.strip_prefix("sqlite://") {
            Location::Sqlite(PathBuf::from(path))
        } else {
            Location::Sqlite(PathBuf::from(spec))
        }
    }

    /// The location to use: `flag` (a `--db` value) if given, else `$CTXGC_DB` if set and
    /// not empty, else [`DEFAULT_PATH`] under `cwd`.
    ///
    /// ```
    /// use ctxgc_store::Location;
    /// let here = std::path::Path::new("/work/project");
    /// assert_eq!(Location::resolve(Some("a.db"), None, here), Location::Sqlite("a.db".into()));
    /// assert_eq!(
    ///     Location::resolve(None, Some("postgres://db/ctx"), here),
    ///     Location::Postgres("postgres://db/ctx".into())
    /// );
    /// assert_eq!(Location::resolve(None, None, here), Location::Sqlite(here.join(".ctxgc/ctxgc.db")));
    /// ```
    pub fn resolve(flag: Option<&str>, env: Option<&str>, cwd: &Path) -> Location {
        match flag.or(env.filter(|v| !v.trim().is_empty())) {
            Some(spec) => Location::parse(spec),
            None => Location::Sqlite(cwd.join(DEFAULT_PATH)),
        }
    }

    /// [`Location::resolve`] with this process's `CTXGC_DB` and working directory.
    pub fn from_env(flag: Option<&str>) -> Result<Location, StoreError> {
        let cwd = std::env::current_dir().map_err(|e| StoreError::Backend {
            backend: "sqlite",
            message: format!("cannot read the working directory: {e}"),
        })?;
        let env = std::env::var(ENV_VAR).ok();
        Ok(Location::resolve(flag, env.as_deref(), &cwd))
    }
}

impl fmt::Display for Location {
    /// The location for messages; a URL's password is never shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "{}", path.display()),
            Location::Postgres(url) => f.write_str(&redact_url(url)),
        }
    }
}

/// A URL with its password replaced by `***`, for messages.
///
/// ```
/// assert_eq!(
///     ctxgc_store::redact_url("postgres://app:s3cret@db:5432/ctx"),
///     "postgres://app:***@db:5432/ctx"
/// );
/// assert_eq!(ctxgc_store::redact_url("postgres://postgres@127.0.0.1/test"), "postgres://postgres@127.0.0.1/test");
/// ```
pub fn redact_url(url: &str) -> String {
    let without_user_password = redact_user_password(url);
    // `?password=...` in the query string.
    match without_user_password.find("password=") {
        Some(start) => {
            let value = start + "password=".len();
            let end = without_user_password[value..]
                .find('&')
                .map_or(without_user_password.len(), |e| value + e);
            format!(
                "{}***{}",
                &without_user_password[..value],
                &without_user_password[end..]
            )
        }
        None => without_user_password,
    }
}

fn redact_user_password(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &url[..scheme_end],
            &rest[..colon],
            &rest[at..]
        ),
        None => url.to_owned(),
    }
}

/// Opens the store at `location`, creating and migrating the database as needed.
pub fn open(location: &Location) -> Result<AnyStore, StoreError> {
    match location {
        Location::Sqlite(path) => SqliteStore::open(path).map(AnyStore::Sqlite),
        Location::Postgres(url) => {
            PostgresStore::connect(url).map(|s| AnyStore::Postgres(Box::new(s)))
        }
    }
}

/// Either backend, chosen at run time from a [`Location`].
#[derive(Debug)]
pub enum AnyStore {
    /// A SQLite file.
    Sqlite(SqliteStore),
    /// A PostgreSQL database (boxed: its client and prepared statements are large).
    Postgres(Box<PostgresStore>),
}

macro_rules! dispatch {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            AnyStore::Sqlite($s) => $e,
            AnyStore::Postgres($s) => $e,
        }
    };
}

impl AnyStore {
    /// How many distinct payloads the receipts hold (identical bytes count once).
    pub fn distinct_payloads(&mut self) -> Result<u64, StoreError> {
        dispatch!(self, s => s.distinct_payloads())
    }

    /// The schema version the database is at.
    pub fn schema_version(&mut self) -> Result<i64, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.schema_version(),
            AnyStore::Postgres(s) => s.schema_version().map(i64::from),
        }
    }
}

impl Store for AnyStore {
    fn backend(&self) -> &'static str {
        dispatch!(self, s => s.backend())
    }
    fn append(
        &mut self,
        context_id: &str,
        format: Format,
        expected_seq: u64,
        items: &[Item],
    ) -> Result<u64, StoreError> {
        dispatch!(self, s => s.append(context_id, format, expected_seq, items))
    }
    fn append_all(&mut self, batches: &[AppendBatch<'_>]) -> Vec<Result<u64, StoreError>> {
        dispatch!(self, s => s.append_all(batches))
    }
    fn info(&mut self, context_id: &str) -> Result<Option<SessionInfo>, StoreError> {
        dispatch!(self, s => s.info(context_id))
    }
    fn items(&mut self, context_id: &str, from: u64) -> Result<Vec<Item>, StoreError> {
        dispatch!(self, s => s.items(context_id, from))
    }
    fn sessions(&mut self) -> Result<Vec<SessionInfo>, StoreError> {
        dispatch!(self, s => s.sessions())
    }
    fn save_snapshot(
        &mut self,
        context_id: &str,
        fingerprint: &str,
        snapshot: &Snapshot,
    ) -> Result<(), StoreError> {
        dispatch!(self, s => s.save_snapshot(context_id, fingerprint, snapshot))
    }
    fn load_snapshot(
        &mut self,
        context_id: &str,
        fingerprint: &str,
    ) -> Result<Option<Snapshot>, StoreError> {
        dispatch!(self, s => s.load_snapshot(context_id, fingerprint))
    }
    fn put_receipt(
        &mut self,
        context_id: &str,
        id: &str,
        original: &[u8],
    ) -> Result<String, StoreError> {
        dispatch!(self, s => s.put_receipt(context_id, id, original))
    }
    fn receipt(&mut self, context_id: &str, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        dispatch!(self, s => s.receipt(context_id, id))
    }
    fn receipt_by_hash(
        &mut self,
        context_id: &str,
        hash: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        dispatch!(self, s => s.receipt_by_hash(context_id, hash))
    }
    fn put_state(&mut self, scope: &str, key: &str, value: &[u8]) -> Result<(), StoreError> {
        dispatch!(self, s => s.put_state(scope, key, value))
    }
    fn state(&mut self, scope: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        dispatch!(self, s => s.state(scope, key))
    }
    fn chat_append(
        &mut self,
        context_id: &str,
        format: Format,
        expected_len: u64,
        envelope: Option<&ChatEnvelope>,
        messages: &[ChatMessage],
    ) -> Result<u64, StoreError> {
        dispatch!(self, s => s.chat_append(context_id, format, expected_len, envelope, messages))
    }
    fn chat_transcript(&mut self, context_id: &str) -> Result<Option<ChatTranscript>, StoreError> {
        dispatch!(self, s => s.chat_transcript(context_id))
    }
    fn record_savings(&mut self, record: &SavingsRecord) -> Result<(), StoreError> {
        dispatch!(self, s => s.record_savings(record))
    }
    fn savings(&mut self, context_id: Option<&str>) -> Result<Vec<SavingsRecord>, StoreError> {
        dispatch!(self, s => s.savings(context_id))
    }
}

/// The blake3 hash of a payload, as stored (32 bytes).
fn blob_hash(bytes: &[u8]) -> [u8; 32] {
    *blake3::hash(bytes).as_bytes()
}

/// Checks receipt bytes read back against the hash they were stored under: a damaged or
/// edited database must not hand out other bytes as an original.
fn verified_receipt(
    context_id: &str,
    id: &str,
    hash: &[u8],
    bytes: Vec<u8>,
) -> Result<Vec<u8>, StoreError> {
    if blob_hash(&bytes)[..] == *hash {
        Ok(bytes)
    } else {
        Err(StoreError::ReceiptCorrupt {
            context_id: context_id.to_owned(),
            id: id.to_owned(),
            hash: blake3::Hash::from_slice(hash)
                .map(|h| h.to_hex().to_string())
                .unwrap_or_else(|_| format!("{hash:02x?}")),
        })
    }
}

/// Lowercase hex of a hash, as [`ctxgc_core::store::content_hash`] writes it.
fn hex(hash: &[u8; 32]) -> String {
    blake3::Hash::from_bytes(*hash).to_hex().to_string()
}

/// A hash from its hex form; `None` if it is not 64 hex digits.
fn hash_from_hex(text: &str) -> Option<[u8; 32]> {
    blake3::Hash::from_hex(text).ok().map(|h| *h.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_round_trip_through_hex() {
        let hash = blob_hash(b"payload");
        assert_eq!(hex(&hash), ctxgc_core::store::content_hash(b"payload"));
        assert_eq!(hash_from_hex(&hex(&hash)), Some(hash));
        assert_eq!(hash_from_hex("not hex"), None);
    }

    #[test]
    fn an_empty_env_var_falls_back_to_the_default() {
        let cwd = Path::new("/tmp/project");
        assert_eq!(
            Location::resolve(None, Some("  "), cwd),
            Location::Sqlite(cwd.join(DEFAULT_PATH))
        );
        assert_eq!(
            Location::resolve(Some("x.db"), Some("postgres://h/d"), cwd),
            Location::Sqlite("x.db".into())
        );
    }

    #[test]
    fn passwords_never_reach_messages() {
        let location = Location::parse("postgresql://u:pw@h/d?sslmode=disable");
        assert_eq!(
            location.to_string(),
            "postgresql://u:***@h/d?sslmode=disable"
        );
        assert_eq!(
            redact_url("postgres://h/d?user=a@b"),
            "postgres://h/d?user=a@b"
        );
        assert_eq!(
            redact_url("postgres://h/d?password=pw&user=u"),
            "postgres://h/d?password=***&user=u"
        );
    }
}
