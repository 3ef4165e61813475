//! The embedded backend: one SQLite file in WAL mode.
//!
//! Every append is one `BEGIN IMMEDIATE` transaction (writers queue on SQLite's write lock)
//! committed with `synchronous = FULL`, so an acknowledged append survives the process being
//! killed and the machine losing power. [`Store::append_all`] commits several appends in one
//! such transaction (each in a savepoint of its own): one fsync for all of them. Several processes may share the file: readers never
//! block writers, writers wait for each other (up to [`BUSY_TIMEOUT`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use ctxgc_core::store::chat::{
    ChatEnvelope, ChatMessage, ChatTranscript, check_chat_append, holds_chat, is_chat_format,
};
use ctxgc_core::store::savings::SavingsRecord;
use ctxgc_core::store::{AppendBatch, SessionInfo, Snapshot, Store, StoreError};
use ctxgc_core::{Format, Item};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::codec;
use crate::{blob_hash, hash_from_hex, hex, verified_receipt};

/// How long a writer waits for another process's transaction before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

const BACKEND: &str = "sqlite";

/// Schema migrations, in order; each runs once, in a transaction, when a database is opened.
const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        "CREATE TABLE sessions (
        id INTEGER PRIMARY KEY,
        context_id TEXT NOT NULL UNIQUE,
        format TEXT,
        next_seq INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE blobs (
        hash BLOB PRIMARY KEY,
        bytes BLOB NOT NULL
    );
    CREATE TABLE receipts (
        session_id INTEGER NOT NULL REFERENCES sessions(id),
        receipt_id TEXT NOT NULL,
        hash BLOB NOT NULL REFERENCES blobs(hash),
        PRIMARY KEY (session_id, receipt_id)
    );
    CREATE INDEX receipts_by_hash ON receipts(session_id, hash);
    CREATE TABLE items (
        session_id INTEGER NOT NULL REFERENCES sessions(id),
        seq INTEGER NOT NULL,
        item_id TEXT NOT NULL,
        hash BLOB NOT NULL REFERENCES blobs(hash),
        body BLOB NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE snapshots (
        session_id INTEGER NOT NULL REFERENCES sessions(id),
        fingerprint TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body BLOB NOT NULL,
        PRIMARY KEY (session_id, fingerprint)
    );
    CREATE TABLE state (
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        value BLOB NOT NULL,
        PRIMARY KEY (scope, key)
    );",
    ),
    // Chat sessions: the envelope of the latest request and every message, in order (the
    // message bytes live in `blobs`, also indexed as receipts).
    (
        2,
        "CREATE TABLE chat_sessions (
        session_id INTEGER PRIMARY KEY REFERENCES sessions(id),
        items_key TEXT,
        envelope TEXT
    );
    CREATE TABLE chat_messages (
        session_id INTEGER NOT NULL REFERENCES sessions(id),
        seq INTEGER NOT NULL,
        message_id TEXT NOT NULL,
        hash BLOB NOT NULL REFERENCES blobs(hash),
        PRIMARY KEY (session_id, seq)
    );",
    ),
    // What the gateway and the proxy saved: one row per request or tool call, never
    // replaced. Not tied to a session row: a record may name a session that holds nothing.
    (
        3,
        "CREATE TABLE savings (
        id INTEGER PRIMARY KEY,
        source TEXT NOT NULL,
        context_id TEXT NOT NULL,
        ordinal INTEGER NOT NULL,
        tool TEXT NOT NULL,
        tokens_before INTEGER NOT NULL,
        tokens_after INTEGER NOT NULL,
        input_tokens INTEGER,
        cache_read_tokens INTEGER,
        cache_write_tokens INTEGER,
        output_tokens INTEGER,
        at_ms INTEGER NOT NULL
    );
    CREATE INDEX savings_by_session ON savings(context_id, at_ms);",
    ),
];

/// The columns of a savings row, in the order [`crate::savings::decode`] takes them, and
/// the canonical order (SQLite compares text byte by byte and puts NULL first, as the
/// canonical order does).
const SAVINGS_SELECT: &str =
    "SELECT source, context_id, ordinal, tokens_before, tokens_after, at_ms, tool,
        input_tokens, cache_read_tokens, cache_write_tokens, output_tokens FROM savings";
const SAVINGS_ORDER: &str = "ORDER BY context_id, at_ms, source, ordinal, tool, tokens_before,
        tokens_after, input_tokens, cache_read_tokens, cache_write_tokens, output_tokens, id";

/// The newest schema version this build knows.
pub const SCHEMA_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].0;

fn backend_error(operation: &str) -> impl FnOnce(rusqlite::Error) -> StoreError + '_ {
    move |e| {
        let read_only = matches!(
            &e,
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ReadOnly
        );
        StoreError::Backend {
            backend: BACKEND,
            message: if read_only {
                format!(
                    "{operation}: the database is read-only (the file is not writable, so it was opened for reading only): {e}"
                )
            } else {
                format!("{operation}: {e}")
            },
        }
    }
}

fn to_i64(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Backend {
        backend: BACKEND,
        message: format!("{what} {value} is out of range"),
    })
}

fn to_u64(value: i64, context_id: &str, what: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt {
        context_id: context_id.to_owned(),
        message: format!("negative {what} {value}"),
    })
}

fn parse_format(name: Option<String>, context_id: &str) -> Result<Option<Format>, StoreError> {
    match name {
        None => Ok(None),
        Some(name) => Format::from_name(&name)
            .map(Some)
            .ok_or_else(|| StoreError::Corrupt {
                context_id: context_id.to_owned(),
                message: format!("unknown format {name:?}"),
            }),
    }
}

/// Switches the database to WAL mode. Changing the mode needs a moment alone with the file,
/// which SQLite does not wait for: two processes creating the database together retry.
fn set_wal(conn: &Connection) -> Result<String, rusqlite::Error> {
    let mut attempts = 0;
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)) {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy && attempts < 200 =>
            {
                attempts += 1;
                std::thread::sleep(Duration::from_millis(25));
            }
            other => return other,
        }
    }
}

/// A session store in one SQLite file.
///
/// ```
/// use ctxgc_core::store::Store;
/// let dir = tempfile::tempdir().unwrap();
/// let mut store = ctxgc_store::SqliteStore::open(dir.path().join("ctxgc.db")).unwrap();
/// store.put_state("ctx-1", "mode", b"auto").unwrap();
/// assert_eq!(store.state("ctx-1", "mode").unwrap().as_deref(), Some(&b"auto"[..]));
/// ```
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating it, and its folder, if needed) the database at `path`, and brings its
    /// schema up to date.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Backend {
                backend: BACKEND,
                message: format!("cannot create {}: {e}", dir.display()),
            })?;
        }
        let what = format!("open {}", path.display());
        // A database file marked read-only is still readable: it is opened for reading only
        // (no WAL switch, no migration), and every write reports that it is read-only.
        let read_only = std::fs::metadata(&path).is_ok_and(|m| m.permissions().readonly());
        if read_only {
            return Self::open_read_only(path);
        }
        let conn = Connection::open(&path).map_err(backend_error(&what))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(backend_error(&what))?;
        // WAL: readers do not block the writer. FULL: a commit is on disk before it returns.
        let mode = set_wal(&conn).map_err(backend_error(&what))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Backend {
                backend: BACKEND,
                message: format!("{what}: the database refused WAL mode (got {mode:?})"),
            });
        }
        conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
            .map_err(backend_error(&what))?;
        let mut store = SqliteStore { conn, path };
        store.migrate()?;
        Ok(store)
    }

    fn open_read_only(path: PathBuf) -> Result<Self, StoreError> {
        let what = format!("open {} (read-only)", path.display());
        let flags =
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags).map_err(backend_error(&what))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(backend_error(&what))?;
        let store = SqliteStore { conn, path };
        let latest = MIGRATIONS.last().map_or(0, |(v, _)| *v);
        let version = store.schema_version()?;
        if version != latest {
            return Err(StoreError::Backend {
                backend: BACKEND,
                message: format!(
                    "{what}: the database is at schema version {version}, this build needs {latest}, and a read-only file cannot be migrated"
                ),
            });
        }
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version the database is at.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row(
                "SELECT COALESCE(MAX(version), 0) FROM schema_version",
                [],
                |row| row.get(0),
            )
            .map_err(backend_error("read schema_version"))
    }

    /// How many distinct payloads the receipts hold (identical bytes count once).
    pub fn distinct_payloads(&self) -> Result<u64, StoreError> {
        let n: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM blobs", [], |row| row.get(0))
            .map_err(backend_error("count blobs"))?;
        to_u64(n, "", "count")
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        self.migrate_with(MIGRATIONS)
    }

    /// Applies the migrations newer than the database's version, in one transaction.
    fn migrate_with(&mut self, migrations: &[(i64, &str)]) -> Result<(), StoreError> {
        let latest = migrations.last().map_or(0, |(v, _)| *v);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend_error("begin migration"))?;
        tx.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY)")
            .map_err(backend_error("create schema_version"))?;
        let current: i64 = tx
            .query_row(
                "SELECT COALESCE(MAX(version), 0) FROM schema_version",
                [],
                |row| row.get(0),
            )
            .map_err(backend_error("read schema_version"))?;
        if current > latest {
            return Err(StoreError::Corrupt {
                context_id: "schema_version".into(),
                message: format!(
                    "the database is at schema version {current}, newer than this ctxgc knows ({latest}); upgrade ctxgc"
                ),
            });
        }
        for (version, sql) in migrations.iter().filter(|(v, _)| *v > current) {
            let what = format!("migrate to schema version {version}");
            tx.execute_batch(sql).map_err(backend_error(&what))?;
            tx.execute(
                "INSERT INTO schema_version (version) VALUES (?1)",
                [version],
            )
            .map_err(backend_error(&what))?;
        }
        tx.commit().map_err(backend_error("commit migration"))
    }

    fn session_id(&self, context_id: &str) -> Result<Option<i64>, StoreError> {
        self.conn
            .query_row(
                "SELECT id FROM sessions WHERE context_id = ?1",
                [context_id],
                |row| row.get(0),
            )
            .optional()
            .map_err(backend_error("find session"))
    }
}

/// Indexes receipt `id` → `hash` for a session inside a transaction; refuses different bytes.
fn index_receipt(
    tx: &Connection,
    session_id: i64,
    context_id: &str,
    id: &str,
    hash: &[u8],
    bytes: &[u8],
) -> Result<(), StoreError> {
    tx.prepare_cached("INSERT OR IGNORE INTO blobs (hash, bytes) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute(params![hash, bytes]))
        .map_err(backend_error("store receipt bytes"))?;
    let added = tx
        .prepare_cached(
            "INSERT INTO receipts (session_id, receipt_id, hash) VALUES (?1, ?2, ?3)
             ON CONFLICT (session_id, receipt_id) DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![session_id, id, hash]))
        .map_err(backend_error("index receipt"))?;
    if added == 0 {
        let held: Vec<u8> = tx
            .prepare_cached("SELECT hash FROM receipts WHERE session_id = ?1 AND receipt_id = ?2")
            .and_then(|mut s| s.query_row(params![session_id, id], |row| row.get(0)))
            .map_err(backend_error("read receipt"))?;
        if held != hash {
            return Err(StoreError::ReceiptTaken {
                context_id: context_id.to_owned(),
                id: id.to_owned(),
            });
        }
    }
    Ok(())
}

/// The session's row id, creating the session (without a format) if it does not exist.
fn ensure_session(tx: &Connection, context_id: &str) -> Result<i64, StoreError> {
    tx.prepare_cached(
        "INSERT INTO sessions (context_id) VALUES (?1) ON CONFLICT (context_id) DO NOTHING",
    )
    .and_then(|mut s| s.execute([context_id]))
    .map_err(backend_error("create session"))?;
    tx.prepare_cached("SELECT id FROM sessions WHERE context_id = ?1")
        .and_then(|mut s| s.query_row([context_id], |row| row.get(0)))
        .map_err(backend_error("find session"))
}

/// A chat session's row: session id, format, message count, items key, envelope.
type ChatHead = (i64, Option<String>, i64, Option<String>, Option<String>);

/// True when the session is a chat session.
fn is_chat_session(tx: &Connection, session_id: i64) -> Result<bool, StoreError> {
    tx.prepare_cached("SELECT EXISTS (SELECT 1 FROM chat_sessions WHERE session_id = ?1)")
        .and_then(|mut s| s.query_row([session_id], |row| row.get(0)))
        .map_err(backend_error("read chat session"))
}

/// Each item's stored encoding and the hash of its original bytes.
type EncodedBatch = Vec<(Vec<u8>, [u8; 32])>;

fn encode_batch(batch: &AppendBatch<'_>) -> Result<EncodedBatch, StoreError> {
    batch
        .items
        .iter()
        .map(|item| {
            codec::encode_item(item)
                .map(|body| (body, blob_hash(item.raw.as_bytes())))
                .map_err(|message| StoreError::Corrupt {
                    context_id: batch.context_id.to_owned(),
                    message,
                })
        })
        .collect()
}

/// An error of the transaction that carried several batches, given to each of them.
fn shared_failure(operation: &str, e: rusqlite::Error) -> impl Fn() -> StoreError {
    let message = match backend_error(operation)(e) {
        StoreError::Backend { message, .. } => message,
        other => other.to_string(),
    };
    move || StoreError::Backend {
        backend: BACKEND,
        message: message.clone(),
    }
}

/// Writes one batch inside an open transaction (or savepoint): checks the expected sequence
/// number and the format, indexes the receipts, stores the items, advances the session.
/// Returns the next sequence number; the caller commits.
fn write_batch(
    tx: &Connection,
    batch: &AppendBatch<'_>,
    encoded: &EncodedBatch,
) -> Result<u64, StoreError> {
    let AppendBatch {
        context_id,
        format,
        expected_seq,
        items,
    } = *batch;
    let expected = to_i64(expected_seq, "sequence number")?;
    let session_id = ensure_session(tx, context_id)?;
    let (stored_format, next): (Option<String>, i64) = tx
        .prepare_cached("SELECT format, next_seq FROM sessions WHERE id = ?1")
        .and_then(|mut s| s.query_row([session_id], |row| Ok((row.get(0)?, row.get(1)?))))
        .map_err(backend_error("read session"))?;
    if next != expected {
        return Err(StoreError::Conflict {
            context_id: context_id.to_owned(),
            expected: expected_seq,
            actual: to_u64(next, context_id, "sequence number")?,
        });
    }
    match parse_format(stored_format, context_id)? {
        Some(stored) if stored != format => {
            return Err(StoreError::FormatMismatch {
                context_id: context_id.to_owned(),
                stored: stored.name(),
                appended: format.name(),
            });
        }
        Some(stored) if is_chat_format(stored) && is_chat_session(tx, session_id)? => {
            return Err(holds_chat(context_id));
        }
        Some(_) => {}
        None => {
            tx.prepare_cached("UPDATE sessions SET format = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![session_id, format.name()]))
                .map_err(backend_error("set session format"))?;
        }
    }
    for (offset, (item, (body, hash))) in items.iter().zip(encoded).enumerate() {
        index_receipt(
            tx,
            session_id,
            context_id,
            &item.id,
            hash,
            item.raw.as_bytes(),
        )?;
        let seq = expected + to_i64(offset as u64, "sequence number")?;
        tx.prepare_cached(
            "INSERT INTO items (session_id, seq, item_id, hash, body) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut s| s.execute(params![session_id, seq, item.id, &hash[..], body]))
        .map_err(backend_error("store item"))?;
    }
    let new_next = expected + to_i64(items.len() as u64, "sequence number")?;
    tx.prepare_cached("UPDATE sessions SET next_seq = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![session_id, new_next]))
        .map_err(backend_error("advance session"))?;
    to_u64(new_next, context_id, "sequence number")
}

impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    fn append(
        &mut self,
        context_id: &str,
        format: Format,
        expected_seq: u64,
        items: &[Item],
    ) -> Result<u64, StoreError> {
        // One append is a group of one: the same transaction, checks and errors.
        let batch = AppendBatch {
            context_id,
            format,
            expected_seq,
            items,
        };
        self.append_all(std::slice::from_ref(&batch))
            .pop()
            .unwrap_or_else(|| {
                Err(StoreError::Backend {
                    backend: BACKEND,
                    message: "the append was not written".into(),
                })
            })
    }

    fn append_all(&mut self, batches: &[AppendBatch<'_>]) -> Vec<Result<u64, StoreError>> {
        let encoded: Vec<Result<EncodedBatch, StoreError>> =
            batches.iter().map(encode_batch).collect();
        let mut tx = match self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
        {
            Ok(tx) => tx,
            Err(e) => {
                let failure = shared_failure("begin appends", e);
                return batches.iter().map(|_| Err(failure())).collect();
            }
        };
        // Each batch in a savepoint of its own: one that fails leaves nothing behind, and the
        // others are committed all the same.
        let mut results = Vec::with_capacity(batches.len());
        for (batch, encoded) in batches.iter().zip(encoded) {
            let result = encoded.and_then(|encoded| {
                let savepoint = tx.savepoint().map_err(backend_error("begin batch"))?;
                let next = write_batch(&savepoint, batch, &encoded)?;
                savepoint.commit().map_err(backend_error("end batch"))?;
                Ok(next)
            });
            results.push(result);
        }
        if let Err(e) = tx.commit() {
            let failure = shared_failure("commit appends", e);
            for result in &mut results {
                if result.is_ok() {
                    *result = Err(failure());
                }
            }
        }
        results
    }

    fn info(&mut self, context_id: &str) -> Result<Option<SessionInfo>, StoreError> {
        let row: Option<(Option<String>, i64)> = self
            .conn
            .prepare_cached("SELECT format, next_seq FROM sessions WHERE context_id = ?1")
            .and_then(|mut s| {
                s.query_row([context_id], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()
            })
            .map_err(backend_error("read session"))?;
        row.map(|(format, next)| {
            Ok(SessionInfo {
                context_id: context_id.to_owned(),
                format: parse_format(format, context_id)?,
                items: to_u64(next, context_id, "sequence number")?,
            })
        })
        .transpose()
    }

    fn items(&mut self, context_id: &str, from: u64) -> Result<Vec<Item>, StoreError> {
        let Some(session_id) = self.session_id(context_id)? else {
            return Ok(Vec::new());
        };
        let from_i = to_i64(from, "sequence number")?;
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT i.seq, i.body, b.bytes FROM items i JOIN blobs b ON b.hash = i.hash
                 WHERE i.session_id = ?1 AND i.seq >= ?2 ORDER BY i.seq",
            )
            .map_err(backend_error("read items"))?;
        let rows = stmt
            .query_map(params![session_id, from_i], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, Vec<u8>>(1)?,
                    row.get::<_, Vec<u8>>(2)?,
                ))
            })
            .map_err(backend_error("read items"))?;
        let mut items = Vec::new();
        for (n, row) in rows.enumerate() {
            let (seq, body, raw) = row.map_err(backend_error("read items"))?;
            let want = from_i + n as i64;
            if seq != want {
                return Err(StoreError::Corrupt {
                    context_id: context_id.to_owned(),
                    message: format!("item sequence {want} is missing (found {seq})"),
                });
            }
            items.push(
                codec::decode_item(&body, raw).map_err(|message| StoreError::Corrupt {
                    context_id: context_id.to_owned(),
                    message: format!("item at sequence {seq}: {message}"),
                })?,
            );
        }
        Ok(items)
    }

    fn sessions(&mut self) -> Result<Vec<SessionInfo>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT context_id, format, next_seq FROM sessions ORDER BY context_id")
            .map_err(backend_error("list sessions"))?;
        let rows = stmt
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, Option<String>>(1)?,
                    row.get::<_, i64>(2)?,
                ))
            })
            .map_err(backend_error("list sessions"))?;
        let mut out = Vec::new();
        for row in rows {
            let (context_id, format, next) = row.map_err(backend_error("list sessions"))?;
            out.push(SessionInfo {
                format: parse_format(format, &context_id)?,
                items: to_u64(next, &context_id, "sequence number")?,
                context_id,
            });
        }
        Ok(out)
    }

    fn save_snapshot(
        &mut self,
        context_id: &str,
        fingerprint: &str,
        snapshot: &Snapshot,
    ) -> Result<(), StoreError> {
        let body =
            codec::encode_session(&snapshot.session).map_err(|message| StoreError::Corrupt {
                context_id: context_id.to_owned(),
                message,
            })?;
        let seq = to_i64(snapshot.seq, "sequence number")?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend_error("begin snapshot"))?;
        let row: Option<(i64, i64)> = tx
            .query_row(
                "SELECT id, next_seq FROM sessions WHERE context_id = ?1",
                [context_id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
            .map_err(backend_error("read session"))?;
        let (session_id, next) = row.unwrap_or((0, 0));
        if seq > next {
            return Err(StoreError::Corrupt {
                context_id: context_id.to_owned(),
                message: format!(
                    "a snapshot over {seq} items cannot be saved: the session has {next}"
                ),
            });
        }
        if row.is_none() {
            return Ok(()); // an empty snapshot of an empty session: nothing to keep
        }
        tx.execute(
            "INSERT INTO snapshots (session_id, fingerprint, seq, body) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (session_id, fingerprint) DO UPDATE SET seq = excluded.seq, body = excluded.body
             WHERE excluded.seq > snapshots.seq",
            params![session_id, fingerprint, seq, body],
        )
        .map_err(backend_error("save snapshot"))?;
        tx.commit().map_err(backend_error("commit snapshot"))
    }

    fn load_snapshot(
        &mut self,
        context_id: &str,
        fingerprint: &str,
    ) -> Result<Option<Snapshot>, StoreError> {
        // Decoded straight from SQLite's buffer: a snapshot of a long session is tens of MB.
        let row: Option<(i64, Option<ctxgc_core::Session>)> = self
            .conn
            .query_row(
                "SELECT n.seq, n.body FROM snapshots n JOIN sessions s ON s.id = n.session_id
                 WHERE s.context_id = ?1 AND n.fingerprint = ?2",
                [context_id, fingerprint],
                |row| {
                    let body = row.get_ref(1)?.as_blob()?;
                    Ok((row.get(0)?, codec::decode_session(body)))
                },
            )
            .optional()
            .map_err(backend_error("load snapshot"))?;
        let Some((seq, session)) = row else {
            return Ok(None);
        };
        let seq = to_u64(seq, context_id, "sequence number")?;
        Ok(session.map(|session| Snapshot { seq, session }))
    }

    fn put_receipt(
        &mut self,
        context_id: &str,
        id: &str,
        original: &[u8],
    ) -> Result<String, StoreError> {
        let hash = blob_hash(original);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend_error("begin receipt"))?;
        let session_id = ensure_session(&tx, context_id)?;
        index_receipt(&tx, session_id, context_id, id, &hash, original)?;
        tx.commit().map_err(backend_error("commit receipt"))?;
        Ok(hex(&hash))
    }

    fn receipt(&mut self, context_id: &str, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let row: Option<(Vec<u8>, Vec<u8>)> = self
            .conn
            .prepare_cached(
                "SELECT r.hash, b.bytes FROM receipts r
                 JOIN sessions s ON s.id = r.session_id
                 JOIN blobs b ON b.hash = r.hash
                 WHERE s.context_id = ?1 AND r.receipt_id = ?2",
            )
            .and_then(|mut s| {
                s.query_row([context_id, id], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()
            })
            .map_err(backend_error("read receipt"))?;
        row.map(|(hash, bytes)| verified_receipt(context_id, id, &hash, bytes))
            .transpose()
    }

    fn receipt_by_hash(
        &mut self,
        context_id: &str,
        hash_text: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(hash) = hash_from_hex(hash_text) else {
            return Ok(None);
        };
        let bytes: Option<Vec<u8>> = self
            .conn
            .prepare_cached(
                "SELECT b.bytes FROM blobs b WHERE b.hash = ?2 AND EXISTS (
                   SELECT 1 FROM receipts r JOIN sessions s ON s.id = r.session_id
                   WHERE s.context_id = ?1 AND r.hash = ?2)",
            )
            .and_then(|mut s| {
                s.query_row(params![context_id, &hash[..]], |row| row.get(0))
                    .optional()
            })
            .map_err(backend_error("read receipt"))?;
        bytes
            .map(|b| verified_receipt(context_id, hash_text, &hash, b))
            .transpose()
    }

    fn put_state(&mut self, scope: &str, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO state (scope, key, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
                params![scope, key, value],
            )
            .map(|_| ())
            .map_err(backend_error("save state"))
    }

    fn state(&mut self, scope: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.conn
            .query_row(
                "SELECT value FROM state WHERE scope = ?1 AND key = ?2",
                [scope, key],
                |row| row.get(0),
            )
            .optional()
            .map_err(backend_error("read state"))
    }

    fn chat_append(
        &mut self,
        context_id: &str,
        format: Format,
        expected_len: u64,
        envelope: Option<&ChatEnvelope>,
        messages: &[ChatMessage],
    ) -> Result<u64, StoreError> {
        let expected = to_i64(expected_len, "message count")?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(backend_error("begin chat append"))?;
        let session_id = ensure_session(&tx, context_id)?;
        let (stored_format, next): (Option<String>, i64) = tx
            .prepare_cached("SELECT format, next_seq FROM sessions WHERE id = ?1")
            .and_then(|mut s| s.query_row([session_id], |row| Ok((row.get(0)?, row.get(1)?))))
            .map_err(backend_error("read session"))?;
        let chat = is_chat_session(&tx, session_id)?;
        check_chat_append(
            context_id,
            parse_format(stored_format, context_id)?,
            chat,
            format,
            to_u64(next, context_id, "message count")?,
            expected_len,
        )?;
        if !chat {
            tx.prepare_cached("INSERT INTO chat_sessions (session_id) VALUES (?1)")
                .and_then(|mut s| s.execute([session_id]))
                .map_err(backend_error("create chat session"))?;
        }
        if let Some(envelope) = envelope {
            tx.prepare_cached(
                "UPDATE chat_sessions SET items_key = ?2, envelope = ?3 WHERE session_id = ?1",
            )
            .and_then(|mut s| {
                s.execute(params![
                    session_id,
                    envelope.items_key(),
                    envelope.to_json()
                ])
            })
            .map_err(backend_error("store chat envelope"))?;
        }
        for (offset, message) in messages.iter().enumerate() {
            let hash = blob_hash(message.raw.as_bytes());
            index_receipt(
                &tx,
                session_id,
                context_id,
                &message.id,
                &hash,
                message.raw.as_bytes(),
            )?;
            let seq = expected + to_i64(offset as u64, "message count")?;
            tx.prepare_cached(
                "INSERT INTO chat_messages (session_id, seq, message_id, hash) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut s| s.execute(params![session_id, seq, message.id, &hash[..]]))
            .map_err(backend_error("store chat message"))?;
        }
        let new_next = expected + to_i64(messages.len() as u64, "message count")?;
        tx.prepare_cached("UPDATE sessions SET format = ?2, next_seq = ?3 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![session_id, format.name(), new_next]))
            .map_err(backend_error("advance chat session"))?;
        tx.commit().map_err(backend_error("commit chat append"))?;
        to_u64(new_next, context_id, "message count")
    }

    fn chat_transcript(&mut self, context_id: &str) -> Result<Option<ChatTranscript>, StoreError> {
        // One read transaction: the envelope and the messages of the same moment.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(backend_error("begin chat read"))?;
        let head: Option<ChatHead> = tx
            .prepare_cached(
                "SELECT s.id, s.format, s.next_seq, c.items_key, c.envelope
                 FROM sessions s JOIN chat_sessions c ON c.session_id = s.id
                 WHERE s.context_id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([context_id], |row| {
                    Ok((
                        row.get(0)?,
                        row.get(1)?,
                        row.get(2)?,
                        row.get(3)?,
                        row.get(4)?,
                    ))
                })
                .optional()
            })
            .map_err(backend_error("read chat session"))?;
        let Some((session_id, format, next, items_key, envelope)) = head else {
            return Ok(None);
        };
        let corrupt = |message: String| StoreError::Corrupt {
            context_id: context_id.to_owned(),
            message,
        };
        let format = parse_format(format, context_id)?
            .ok_or_else(|| corrupt("a chat session without a format".into()))?;
        let envelope = match (envelope, items_key) {
            (Some(text), Some(key)) => Some(
                ChatEnvelope::from_json(&text, &key)
                    .map_err(|e| corrupt(format!("chat envelope: {e}")))?,
            ),
            (None, _) => None,
            (Some(_), None) => return Err(corrupt("a chat envelope without its items key".into())),
        };
        let mut messages = Vec::new();
        {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT m.seq, m.message_id, b.bytes FROM chat_messages m
                     JOIN blobs b ON b.hash = m.hash
                     WHERE m.session_id = ?1 ORDER BY m.seq",
                )
                .map_err(backend_error("read chat messages"))?;
            let rows = stmt
                .query_map([session_id], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, Vec<u8>>(2)?,
                    ))
                })
                .map_err(backend_error("read chat messages"))?;
            for (n, row) in rows.enumerate() {
                let (seq, id, bytes) = row.map_err(backend_error("read chat messages"))?;
                if seq != n as i64 {
                    return Err(corrupt(format!(
                        "chat message {n} is missing (found {seq})"
                    )));
                }
                let raw = String::from_utf8(bytes)
                    .map_err(|_| corrupt(format!("chat message {id:?} is not UTF-8")))?;
                messages.push(ChatMessage { id, raw });
            }
        }
        tx.commit().map_err(backend_error("end chat read"))?;
        if messages.len() as i64 != next {
            return Err(corrupt(format!(
                "the session counts {next} messages but holds {}",
                messages.len()
            )));
        }
        Ok(Some(ChatTranscript {
            format,
            envelope,
            messages,
        }))
    }

    fn record_savings(&mut self, record: &SavingsRecord) -> Result<(), StoreError> {
        let row = crate::savings::encode(BACKEND, record)?;
        let [input, read, write, output] = row.usage;
        self.conn
            .prepare_cached(
                "INSERT INTO savings (source, context_id, ordinal, tool, tokens_before,
                 tokens_after, input_tokens, cache_read_tokens, cache_write_tokens,
                 output_tokens, at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    row.source,
                    row.context_id,
                    row.ordinal,
                    row.tool,
                    row.tokens_before,
                    row.tokens_after,
                    input,
                    read,
                    write,
                    output,
                    row.at_ms
                ])
            })
            .map(|_| ())
            .map_err(backend_error("record savings"))
    }

    fn savings(&mut self, context_id: Option<&str>) -> Result<Vec<SavingsRecord>, StoreError> {
        let sql = match context_id {
            Some(_) => format!("{SAVINGS_SELECT} WHERE context_id = ?1 {SAVINGS_ORDER}"),
            None => format!("{SAVINGS_SELECT} {SAVINGS_ORDER}"),
        };
        let mut stmt = self
            .conn
            .prepare_cached(&sql)
            .map_err(backend_error("read savings"))?;
        let read = |row: &rusqlite::Row<'_>| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                [row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?],
                row.get::<_, String>(6)?,
                [row.get(7)?, row.get(8)?, row.get(9)?, row.get(10)?],
            ))
        };
        let rows = match context_id {
            Some(c) => stmt.query_map([c], read),
            None => stmt.query_map([], read),
        }
        .map_err(backend_error("read savings"))?;
        rows.map(|row| {
            let (source, context_id, numbers, tool, usage) =
                row.map_err(backend_error("read savings"))?;
            crate::savings::decode(&source, context_id, numbers, tool, usage)
        })
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_1_database_gets_chat_sessions_and_keeps_its_sessions() {
        let db = crate::testing::sqlite();
        let crate::Location::Sqlite(path) = &db.location else {
            unreachable!("a SQLite test database")
        };
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let conn = Connection::open(path).unwrap();
        let mut old = SqliteStore {
            conn,
            path: path.clone(),
        };
        old.migrate_with(&MIGRATIONS[..1]).unwrap();
        let trace = r#"{"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 1}"#;
        let items = ctxgc_core::frontend::events::lower_events(trace, &Default::default()).unwrap();
        old.append("events", Format::Events, 0, &items).unwrap();
        drop(old);

        let mut store = SqliteStore::open(path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(store.items("events", 0).unwrap(), items);
        let chat = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
        let appended =
            ctxgc_core::store::chat::append_chat(&mut store, "chat", chat, &Default::default())
                .unwrap();
        assert_eq!(appended.ids, ["m0"]);
        let transcript = store.chat_transcript("chat").unwrap().unwrap();
        assert_eq!(
            transcript.text(),
            r#"{"model":"m","messages":[{"role": "user", "content": "hi"}]}"#
        );
    }

    #[test]
    fn an_older_database_gets_only_the_newer_migrations() {
        let db = crate::testing::sqlite();
        let crate::Location::Sqlite(path) = &db.location else {
            unreachable!("a SQLite test database")
        };
        let mut store = SqliteStore::open(path).unwrap();
        store
            .put_state("scope", "key", b"kept across the upgrade")
            .unwrap();
        let next = [
            MIGRATIONS[0],
            MIGRATIONS[1],
            MIGRATIONS[2],
            (
                4,
                "CREATE TABLE added_in_2 (x INTEGER); INSERT INTO added_in_2 VALUES (7);",
            ),
        ];
        store.migrate_with(&next).unwrap();
        assert_eq!(store.schema_version().unwrap(), 4);
        // Applied once: running the list again must not insert a second row.
        store.migrate_with(&next).unwrap();
        let rows: i64 = store
            .conn
            .query_row("SELECT COUNT(*) FROM added_in_2", [], |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 1);
        assert_eq!(
            store.state("scope", "key").unwrap().as_deref(),
            Some(&b"kept across the upgrade"[..])
        );
        // This build (version 3) now refuses the upgraded database.
        drop(store);
        let err = SqliteStore::open(path).unwrap_err();
        assert!(err.to_string().contains("schema version 4"), "{err}");
    }

    #[test]
    fn a_version_2_database_gets_savings_and_keeps_its_chats() {
        let db = crate::testing::sqlite();
        let crate::Location::Sqlite(path) = &db.location else {
            unreachable!("a SQLite test database")
        };
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut old = SqliteStore {
            conn: Connection::open(path).unwrap(),
            path: path.clone(),
        };
        old.migrate_with(&MIGRATIONS[..2]).unwrap();
        let chat = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
        ctxgc_core::store::chat::append_chat(&mut old, "chat", chat, &Default::default()).unwrap();
        drop(old);

        let mut store = SqliteStore::open(path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(
            store
                .chat_transcript("chat")
                .unwrap()
                .unwrap()
                .messages
                .len(),
            1
        );
        assert!(store.savings(None).unwrap().is_empty());
        let record = SavingsRecord {
            source: ctxgc_core::store::savings::SavingsSource::Gateway,
            context_id: "chat".into(),
            ordinal: 1,
            tool: "/v1/chat/completions".into(),
            tokens_before: 10,
            tokens_after: 7,
            usage: None,
            at_ms: 1,
        };
        store.record_savings(&record).unwrap();
        assert_eq!(store.savings(Some("chat")).unwrap(), [record]);
    }
}
