//! The shared backend: PostgreSQL, for a fleet of instances serving the same sessions.
//!
//! Every append is one transaction that first locks the session's row, checks the expected
//! sequence number and then writes; it returns once PostgreSQL has committed it (with the
//! server's default `synchronous_commit = on`, that is after the commit reached its WAL on
//! disk). Writers of one session queue on its row lock, writers of different sessions do not
//! wait for each other. Connect with a URL such as
//! `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`; a schema other than `public` is chosen
//! with `?options=-csearch_path%3DSCHEMA`.

use ctxgc_core::store::chat::{
    ChatEnvelope, ChatMessage, ChatTranscript, check_chat_append, holds_chat, is_chat_format,
};
use ctxgc_core::store::savings::SavingsRecord;
use ctxgc_core::store::{AppendBatch, SessionInfo, Snapshot, Store, StoreError};
use ctxgc_core::{Format, Item};
use postgres::{Client, NoTls, Statement};

use crate::codec;
use crate::{blob_hash, hash_from_hex, hex, verified_receipt};

const BACKEND: &str = "postgres";

/// Rows written per statement when a batch is large.
const ROWS_PER_STATEMENT: usize = 4096;

/// Schema migrations, in order; each runs once, in a transaction, when a database is opened.
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "CREATE TABLE sessions (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        context_id TEXT NOT NULL UNIQUE,
        format TEXT,
        next_seq BIGINT NOT NULL DEFAULT 0
    );
    CREATE TABLE blobs (
        hash BYTEA PRIMARY KEY,
        bytes BYTEA NOT NULL
    );
    CREATE TABLE receipts (
        session_id BIGINT NOT NULL REFERENCES sessions(id),
        receipt_id TEXT NOT NULL,
        hash BYTEA NOT NULL REFERENCES blobs(hash),
        PRIMARY KEY (session_id, receipt_id)
    );
    CREATE INDEX receipts_by_hash ON receipts(session_id, hash);
    CREATE TABLE items (
        session_id BIGINT NOT NULL REFERENCES sessions(id),
        seq BIGINT NOT NULL,
        item_id TEXT NOT NULL,
        hash BYTEA NOT NULL REFERENCES blobs(hash),
        body BYTEA NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE snapshots (
        session_id BIGINT NOT NULL REFERENCES sessions(id),
        fingerprint TEXT NOT NULL,
        seq BIGINT NOT NULL,
        body BYTEA NOT NULL,
        PRIMARY KEY (session_id, fingerprint)
    );
    CREATE TABLE state (
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        value BYTEA NOT NULL,
        PRIMARY KEY (scope, key)
    );",
    ),
    // Chat sessions: the envelope of the latest request and every message, in order (the
    // message bytes live in `blobs`, also indexed as receipts).
    (
        2,
        "CREATE TABLE chat_sessions (
        session_id BIGINT PRIMARY KEY REFERENCES sessions(id),
        items_key TEXT,
        envelope TEXT
    );
    CREATE TABLE chat_messages (
        session_id BIGINT NOT NULL REFERENCES sessions(id),
        seq BIGINT NOT NULL,
        message_id TEXT NOT NULL,
        hash BYTEA NOT NULL REFERENCES blobs(hash),
        PRIMARY KEY (session_id, seq)
    );",
    ),
    // What the gateway and the proxy saved: one row per request or tool call, never
    // replaced. Not tied to a session row: a record may name a session that holds nothing.
    (
        3,
        "CREATE TABLE savings (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        source TEXT NOT NULL,
        context_id TEXT NOT NULL,
        ordinal BIGINT NOT NULL,
        tool TEXT NOT NULL,
        tokens_before BIGINT NOT NULL,
        tokens_after BIGINT NOT NULL,
        input_tokens BIGINT,
        cache_read_tokens BIGINT,
        cache_write_tokens BIGINT,
        output_tokens BIGINT,
        at_ms BIGINT NOT NULL
    );
    CREATE INDEX savings_by_session ON savings(context_id, at_ms);",
    ),
];

/// The columns of a savings row, in the order [`crate::savings::decode`] takes them, and
/// the canonical order: text compared byte by byte (`COLLATE "C"`, whatever the database's
/// collation) and NULL first, as the canonical order does.
const SAVINGS_SELECT: &str =
    "SELECT source, context_id, ordinal, tokens_before, tokens_after, at_ms, tool,
        input_tokens, cache_read_tokens, cache_write_tokens, output_tokens FROM savings";
const SAVINGS_ORDER: &str = "ORDER BY context_id COLLATE \"C\", at_ms, source COLLATE \"C\", ordinal,
        tool COLLATE \"C\", tokens_before, tokens_after, input_tokens NULLS FIRST,
        cache_read_tokens NULLS FIRST, cache_write_tokens NULLS FIRST, output_tokens NULLS FIRST, id";

/// The newest schema version this build knows.
pub const SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

fn backend_error(operation: &str) -> impl FnOnce(postgres::Error) -> StoreError + '_ {
    move |e| StoreError::Backend {
        backend: BACKEND,
        message: format!("{operation}: {}", describe(&e)),
    }
}

/// What the server said, in full: the driver's own `Display` of a server error is only
/// "db error", which leaves an operator guessing.
///
/// With a server error: `ERROR 23505: duplicate key value ... (detail: ...; hint: ...)`;
/// otherwise the driver's message and its cause.
pub fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut out = format!("{} {}: {}", db.severity(), db.code().code(), db.message());
        let mut extra = Vec::new();
        if let Some(detail) = db.detail() {
            extra.push(format!("detail: {detail}"));
        }
        if let Some(hint) = db.hint() {
            extra.push(format!("hint: {hint}"));
        }
        if let Some(table) = db.table() {
            extra.push(format!("table: {table}"));
        }
        if !extra.is_empty() {
            out.push_str(&format!(" ({})", extra.join("; ")));
        }
        return out;
    }
    match std::error::Error::source(e) {
        Some(cause) if !e.to_string().contains(&cause.to_string()) => format!("{e}: {cause}"),
        _ => e.to_string(),
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

/// Reads column `index` of a row, as a store error when it has another type.
fn column<'a, T: postgres::types::FromSql<'a>>(
    row: &'a postgres::Row,
    index: usize,
    what: &str,
) -> Result<T, StoreError> {
    row.try_get(index).map_err(backend_error(what))
}

/// The statements every append runs, prepared once per connection.
struct Statements {
    lock_session: Statement,
    set_format: Statement,
    put_blobs: Statement,
    put_receipts: Statement,
    receipt_clash: Statement,
    put_items: Statement,
    advance: Statement,
    is_chat: Statement,
}

impl Statements {
    fn prepare(client: &mut Client) -> Result<Self, StoreError> {
        let mut prepare = |sql: &str| client.prepare(sql).map_err(backend_error("prepare"));
        Ok(Statements {
            // Creates the session if needed and locks its row until the transaction ends.
            lock_session: prepare(
                "INSERT INTO sessions (context_id) VALUES ($1)
                 ON CONFLICT (context_id) DO UPDATE SET context_id = EXCLUDED.context_id
                 RETURNING id, format, next_seq",
            )?,
            set_format: prepare("UPDATE sessions SET format = $2 WHERE id = $1")?,
            put_blobs: prepare(
                "INSERT INTO blobs (hash, bytes) SELECT * FROM unnest($1::bytea[], $2::bytea[])
                 ON CONFLICT (hash) DO NOTHING",
            )?,
            put_receipts: prepare(
                "INSERT INTO receipts (session_id, receipt_id, hash)
                 SELECT $1, * FROM unnest($2::text[], $3::bytea[])
                 ON CONFLICT (session_id, receipt_id) DO NOTHING
                 RETURNING receipt_id",
            )?,
            receipt_clash: prepare(
                "SELECT u.id FROM unnest($2::text[], $3::bytea[]) AS u(id, hash)
                 JOIN receipts r ON r.session_id = $1 AND r.receipt_id = u.id
                 WHERE r.hash <> u.hash LIMIT 1",
            )?,
            put_items: prepare(
                "INSERT INTO items (session_id, seq, item_id, hash, body)
                 SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bytea[], $5::bytea[])",
            )?,
            advance: prepare("UPDATE sessions SET next_seq = $2 WHERE id = $1")?,
            is_chat: prepare("SELECT EXISTS (SELECT 1 FROM chat_sessions WHERE session_id = $1)")?,
        })
    }
}

/// A session store in a PostgreSQL database, shared by any number of processes.
pub struct PostgresStore {
    url: String,
    client: Client,
    statements: Statements,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &crate::redact_url(&self.url))
            .finish_non_exhaustive()
    }
}

/// Receipts to index in one transaction: id, content hash, bytes.
type ReceiptRows<'a> = Vec<(&'a str, [u8; 32], &'a [u8])>;

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://...` or `postgresql://...`) and brings
    /// its schema up to date. Uses a blocking client: from async code, call it on a blocking
    /// thread (`tokio::task::spawn_blocking`).
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let mut client = Self::client(url)?;
        migrate(&mut client)?;
        let statements = Statements::prepare(&mut client)?;
        Ok(PostgresStore {
            url: url.to_owned(),
            client,
            statements,
        })
    }

    fn client(url: &str) -> Result<Client, StoreError> {
        let config: postgres::Config = url.parse().map_err(|e| StoreError::Backend {
            backend: BACKEND,
            message: format!("invalid URL {}: {e}", crate::redact_url(url)),
        })?;
        config.connect(NoTls).map_err(|e| StoreError::Backend {
            backend: BACKEND,
            message: format!("cannot connect to {}: {e}", crate::redact_url(url)),
        })
    }

    /// Reconnects when the server closed the connection (restart, idle timeout).
    fn ensure_connected(&mut self) -> Result<(), StoreError> {
        if self.client.is_closed() {
            let mut client = Self::client(&self.url)?;
            self.statements = Statements::prepare(&mut client)?;
            self.client = client;
        }
        Ok(())
    }

    /// The schema version the database is at.
    pub fn schema_version(&mut self) -> Result<i32, StoreError> {
        self.ensure_connected()?;
        let row = self
            .client
            .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])
            .map_err(backend_error("read schema_version"))?;
        column(&row, 0, "read schema_version")
    }

    /// How many distinct payloads the receipts hold (identical bytes count once).
    pub fn distinct_payloads(&mut self) -> Result<u64, StoreError> {
        self.ensure_connected()?;
        let row = self
            .client
            .query_one("SELECT COUNT(*) FROM blobs", &[])
            .map_err(backend_error("count blobs"))?;
        to_u64(column(&row, 0, "count blobs")?, "", "count")
    }

    /// Writes blobs and receipt rows for a session inside a transaction; refuses an id that
    /// already holds different bytes.
    fn index_receipts(
        tx: &mut postgres::Transaction<'_>,
        statements: &Statements,
        session_id: i64,
        context_id: &str,
        receipts: &ReceiptRows<'_>,
    ) -> Result<(), StoreError> {
        // Blobs in hash order, so concurrent transactions lock shared blobs in one order.
        let mut blobs: Vec<(&[u8; 32], &[u8])> = receipts.iter().map(|(_, h, b)| (h, *b)).collect();
        blobs.sort_unstable_by_key(|(h, _)| *h);
        blobs.dedup_by_key(|(h, _)| *h);
        for chunk in blobs.chunks(ROWS_PER_STATEMENT) {
            let hashes: Vec<&[u8]> = chunk.iter().map(|(h, _)| &h[..]).collect();
            let bytes: Vec<&[u8]> = chunk.iter().map(|(_, b)| *b).collect();
            tx.execute(&statements.put_blobs, &[&hashes, &bytes])
                .map_err(backend_error("store receipt bytes"))?;
        }
        for chunk in receipts.chunks(ROWS_PER_STATEMENT) {
            let ids: Vec<&str> = chunk.iter().map(|(id, _, _)| *id).collect();
            let hashes: Vec<&[u8]> = chunk.iter().map(|(_, h, _)| &h[..]).collect();
            let added = tx
                .query(&statements.put_receipts, &[&session_id, &ids, &hashes])
                .map_err(backend_error("index receipts"))?;
            if added.len() < chunk.len() {
                let clash = tx
                    .query_opt(&statements.receipt_clash, &[&session_id, &ids, &hashes])
                    .map_err(backend_error("read receipts"))?;
                if let Some(row) = clash {
                    return Err(StoreError::ReceiptTaken {
                        context_id: context_id.to_owned(),
                        id: column(&row, 0, "read receipts")?,
                    });
                }
            }
        }
        Ok(())
    }

    fn session_row(
        tx: &mut postgres::Transaction<'_>,
        statements: &Statements,
        context_id: &str,
    ) -> Result<(i64, Option<String>, i64), StoreError> {
        let row = tx
            .query_one(&statements.lock_session, &[&context_id])
            .map_err(backend_error("lock session"))?;
        Ok((
            column(&row, 0, "lock session")?,
            column(&row, 1, "lock session")?,
            column(&row, 2, "lock session")?,
        ))
    }
}

impl PostgresStore {
    /// True when the session is a chat session.
    fn is_chat_session(
        tx: &mut postgres::Transaction<'_>,
        statements: &Statements,
        session_id: i64,
    ) -> Result<bool, StoreError> {
        let row = tx
            .query_one(&statements.is_chat, &[&session_id])
            .map_err(backend_error("read chat session"))?;
        column(&row, 0, "read chat session")
    }
}

fn migrate(client: &mut Client) -> Result<(), StoreError> {
    migrate_with(client, MIGRATIONS)
}

/// Applies the migrations newer than the database's version, in one transaction.
fn migrate_with(client: &mut Client, migrations: &[(i32, &str)]) -> Result<(), StoreError> {
    let latest = migrations.last().map_or(0, |(v, _)| *v);
    let mut tx = client
        .transaction()
        .map_err(backend_error("begin migration"))?;
    // Instances starting together take turns; the lock is per schema and ends with the
    // transaction.
    tx.batch_execute(
        "SELECT pg_advisory_xact_lock(1668576359, hashtext(current_schema()));
         CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY);",
    )
    .map_err(backend_error("create schema_version"))?;
    let row = tx
        .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])
        .map_err(backend_error("read schema_version"))?;
    let current: i32 = column(&row, 0, "read schema_version")?;
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
        tx.batch_execute(sql).map_err(backend_error(&what))?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[version],
        )
        .map_err(backend_error(&what))?;
    }
    tx.commit().map_err(backend_error("commit migration"))
}

/// A batch's items as stored: their encodings and their receipts.
struct EncodedBatch<'a> {
    bodies: Vec<Vec<u8>>,
    receipts: ReceiptRows<'a>,
}

impl<'a> EncodedBatch<'a> {
    fn of(batch: &AppendBatch<'a>) -> Result<Self, StoreError> {
        let bodies = batch
            .items
            .iter()
            .map(|item| {
                codec::encode_item(item).map_err(|message| StoreError::Corrupt {
                    context_id: batch.context_id.to_owned(),
                    message,
                })
            })
            .collect::<Result<_, _>>()?;
        let receipts = batch
            .items
            .iter()
            .map(|item| {
                let raw = item.raw.as_bytes();
                (item.id.as_str(), blob_hash(raw), raw)
            })
            .collect();
        Ok(EncodedBatch { bodies, receipts })
    }
}

impl PostgresStore {
    /// Writes the encoded batches in one transaction, each in a savepoint of its own, and
    /// fills in each one's result; `Err` when the transaction as a whole failed (then no
    /// batch is known to be stored).
    fn group_commit(
        &mut self,
        batches: &[AppendBatch<'_>],
        encoded: &[Option<EncodedBatch<'_>>],
        results: &mut [Option<Result<u64, StoreError>>],
    ) -> Result<(), StoreError> {
        self.ensure_connected()?;
        let PostgresStore {
            client, statements, ..
        } = self;
        let mut tx = client
            .transaction()
            .map_err(backend_error("begin appends"))?;
        // Locks are taken in one order by every writer, so two gateways committing groups
        // that share sessions or payloads wait for each other instead of deadlocking: every
        // payload of the group first (in hash order), then the sessions in name order.
        let mut blobs: Vec<(&[u8; 32], &[u8])> = encoded
            .iter()
            .flatten()
            .flat_map(|e| e.receipts.iter().map(|(_, h, b)| (h, *b)))
            .collect();
        blobs.sort_unstable_by_key(|(h, _)| *h);
        blobs.dedup_by_key(|(h, _)| *h);
        for chunk in blobs.chunks(ROWS_PER_STATEMENT) {
            let hashes: Vec<&[u8]> = chunk.iter().map(|(h, _)| &h[..]).collect();
            let bytes: Vec<&[u8]> = chunk.iter().map(|(_, b)| *b).collect();
            tx.execute(&statements.put_blobs, &[&hashes, &bytes])
                .map_err(backend_error("store receipt bytes"))?;
        }
        let mut order: Vec<usize> = (0..batches.len()).collect();
        order.sort_by_key(|&i| batches[i].context_id);
        for i in order {
            let Some(batch_encoded) = &encoded[i] else {
                continue;
            };
            let mut savepoint = tx.transaction().map_err(backend_error("begin batch"))?;
            let result = Self::write_batch(&mut savepoint, statements, &batches[i], batch_encoded)
                .and_then(|next| {
                    savepoint.commit().map_err(backend_error("end batch"))?;
                    Ok(next)
                });
            // (A savepoint dropped without commit is rolled back.)
            results[i] = Some(result);
        }
        // The payloads were written for the whole group before any batch: those of a refused
        // batch that nothing else references go again, so a refused batch leaves nothing.
        let refused: Vec<&[u8]> = (encoded.iter().zip(results.iter()))
            .filter(|(_, r)| matches!(r, Some(Err(_))))
            .filter_map(|(e, _)| e.as_ref())
            .flat_map(|e| e.receipts.iter().map(|(_, h, _)| &h[..]))
            .collect();
        if !refused.is_empty() {
            tx.execute(
                "DELETE FROM blobs b WHERE b.hash = ANY($1)
                   AND NOT EXISTS (SELECT 1 FROM items i WHERE i.hash = b.hash)
                   AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.hash = b.hash)
                   AND NOT EXISTS (SELECT 1 FROM chat_messages c WHERE c.hash = b.hash)",
                &[&refused],
            )
            .map_err(backend_error("drop refused payloads"))?;
        }
        tx.commit().map_err(backend_error("commit appends"))
    }

    /// Writes one batch inside an open transaction: locks the session's row, checks the
    /// expected sequence number and the format, indexes the receipts, stores the items and
    /// advances the session. Returns the next sequence number; the caller commits.
    fn write_batch(
        tx: &mut postgres::Transaction<'_>,
        statements: &Statements,
        batch: &AppendBatch<'_>,
        encoded: &EncodedBatch<'_>,
    ) -> Result<u64, StoreError> {
        let AppendBatch {
            context_id,
            format,
            expected_seq,
            items,
        } = *batch;
        let EncodedBatch { bodies, receipts } = encoded;
        let expected = to_i64(expected_seq, "sequence number")?;
        let count = to_i64(items.len() as u64, "batch size")?;
        let (session_id, stored_format, next) = Self::session_row(tx, statements, context_id)?;
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
            Some(stored)
                if is_chat_format(stored) && Self::is_chat_session(tx, statements, session_id)? =>
            {
                return Err(holds_chat(context_id));
            }
            Some(_) => {}
            None => {
                tx.execute(&statements.set_format, &[&session_id, &format.name()])
                    .map_err(backend_error("set session format"))?;
            }
        }
        Self::index_receipts(tx, statements, session_id, context_id, receipts)?;
        for (chunk_index, chunk) in receipts.chunks(ROWS_PER_STATEMENT).enumerate() {
            let first = chunk_index * ROWS_PER_STATEMENT;
            let seqs: Vec<i64> = (0..chunk.len())
                .map(|k| to_i64((first + k) as u64, "sequence number").map(|k| expected + k))
                .collect::<Result<_, _>>()?;
            let ids: Vec<&str> = chunk.iter().map(|(id, _, _)| *id).collect();
            let hashes: Vec<&[u8]> = chunk.iter().map(|(_, h, _)| &h[..]).collect();
            let chunk_bodies: Vec<&[u8]> = bodies[first..first + chunk.len()]
                .iter()
                .map(Vec::as_slice)
                .collect();
            tx.execute(
                &statements.put_items,
                &[&session_id, &seqs, &ids, &hashes, &chunk_bodies],
            )
            .map_err(backend_error("store items"))?;
        }
        let new_next = expected + count;
        tx.execute(&statements.advance, &[&session_id, &new_next])
            .map_err(backend_error("advance session"))?;
        to_u64(new_next, context_id, "sequence number")
    }
}

impl Store for PostgresStore {
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
        let mut results: Vec<Option<Result<u64, StoreError>>> = Vec::new();
        results.resize_with(batches.len(), || None);
        let mut encoded: Vec<Option<EncodedBatch<'_>>> = Vec::with_capacity(batches.len());
        for (batch, result) in batches.iter().zip(&mut results) {
            match EncodedBatch::of(batch) {
                Ok(e) => encoded.push(Some(e)),
                Err(e) => {
                    *result = Some(Err(e));
                    encoded.push(None);
                }
            }
        }
        let failure = match self.group_commit(batches, &encoded, &mut results) {
            Ok(()) => None,
            Err(StoreError::Backend { message, .. }) => Some(message),
            Err(other) => Some(other.to_string()),
        };
        results
            .into_iter()
            .map(|result| match (result, &failure) {
                (Some(Err(e)), _) => Err(e),
                (Some(Ok(next)), None) => Ok(next),
                (_, Some(message)) => Err(StoreError::Backend {
                    backend: BACKEND,
                    message: message.clone(),
                }),
                (None, None) => Err(StoreError::Backend {
                    backend: BACKEND,
                    message: "the batch was not written".into(),
                }),
            })
            .collect()
    }

    fn info(&mut self, context_id: &str) -> Result<Option<SessionInfo>, StoreError> {
        self.ensure_connected()?;
        let row = self
            .client
            .query_opt(
                "SELECT format, next_seq FROM sessions WHERE context_id = $1",
                &[&context_id],
            )
            .map_err(backend_error("read session"))?;
        row.map(|row| {
            Ok(SessionInfo {
                context_id: context_id.to_owned(),
                format: parse_format(column(&row, 0, "read session")?, context_id)?,
                items: to_u64(
                    column(&row, 1, "read session")?,
                    context_id,
                    "sequence number",
                )?,
            })
        })
        .transpose()
    }

    fn items(&mut self, context_id: &str, from: u64) -> Result<Vec<Item>, StoreError> {
        self.ensure_connected()?;
        let from_i = to_i64(from, "sequence number")?;
        let rows = self
            .client
            .query(
                "SELECT i.seq, i.body, b.bytes FROM items i
                 JOIN sessions s ON s.id = i.session_id
                 JOIN blobs b ON b.hash = i.hash
                 WHERE s.context_id = $1 AND i.seq >= $2 ORDER BY i.seq",
                &[&context_id, &from_i],
            )
            .map_err(backend_error("read items"))?;
        let mut items = Vec::with_capacity(rows.len());
        for (n, row) in rows.iter().enumerate() {
            let seq: i64 = column(row, 0, "read items")?;
            let want = from_i + n as i64;
            if seq != want {
                return Err(StoreError::Corrupt {
                    context_id: context_id.to_owned(),
                    message: format!("item sequence {want} is missing (found {seq})"),
                });
            }
            let body: &[u8] = column(row, 1, "read items")?;
            let raw: Vec<u8> = column(row, 2, "read items")?;
            items.push(
                codec::decode_item(body, raw).map_err(|message| StoreError::Corrupt {
                    context_id: context_id.to_owned(),
                    message: format!("item at sequence {seq}: {message}"),
                })?,
            );
        }
        Ok(items)
    }

    fn sessions(&mut self) -> Result<Vec<SessionInfo>, StoreError> {
        self.ensure_connected()?;
        let rows = self
            .client
            .query(
                "SELECT context_id, format, next_seq FROM sessions ORDER BY context_id",
                &[],
            )
            .map_err(backend_error("list sessions"))?;
        rows.iter()
            .map(|row| {
                let context_id: String = column(row, 0, "list sessions")?;
                Ok(SessionInfo {
                    format: parse_format(column(row, 1, "list sessions")?, &context_id)?,
                    items: to_u64(
                        column(row, 2, "list sessions")?,
                        &context_id,
                        "sequence number",
                    )?,
                    context_id,
                })
            })
            .collect()
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
        self.ensure_connected()?;
        let row = self
            .client
            .query_opt(
                "SELECT id, next_seq FROM sessions WHERE context_id = $1",
                &[&context_id],
            )
            .map_err(backend_error("read session"))?;
        let (session_id, next): (i64, i64) = match &row {
            Some(row) => (
                column(row, 0, "read session")?,
                column(row, 1, "read session")?,
            ),
            None => (0, 0),
        };
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
        self.client
            .execute(
                "INSERT INTO snapshots (session_id, fingerprint, seq, body) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (session_id, fingerprint) DO UPDATE SET seq = EXCLUDED.seq, body = EXCLUDED.body
                 WHERE snapshots.seq < EXCLUDED.seq",
                &[&session_id, &fingerprint, &seq, &body],
            )
            .map(|_| ())
            .map_err(backend_error("save snapshot"))
    }

    fn load_snapshot(
        &mut self,
        context_id: &str,
        fingerprint: &str,
    ) -> Result<Option<Snapshot>, StoreError> {
        self.ensure_connected()?;
        let row = self
            .client
            .query_opt(
                "SELECT n.seq, n.body FROM snapshots n JOIN sessions s ON s.id = n.session_id
                 WHERE s.context_id = $1 AND n.fingerprint = $2",
                &[&context_id, &fingerprint],
            )
            .map_err(backend_error("load snapshot"))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let seq = to_u64(
            column(&row, 0, "load snapshot")?,
            context_id,
            "sequence number",
        )?;
        let body: &[u8] = column(&row, 1, "load snapshot")?;
        Ok(codec::decode_session(body).map(|session| Snapshot { seq, session }))
    }

    fn put_receipt(
        &mut self,
        context_id: &str,
        id: &str,
        original: &[u8],
    ) -> Result<String, StoreError> {
        let hash = blob_hash(original);
        self.ensure_connected()?;
        let PostgresStore {
            client, statements, ..
        } = self;
        let mut tx = client
            .transaction()
            .map_err(backend_error("begin receipt"))?;
        let (session_id, _, _) = Self::session_row(&mut tx, statements, context_id)?;
        Self::index_receipts(
            &mut tx,
            statements,
            session_id,
            context_id,
            &vec![(id, hash, original)],
        )?;
        tx.commit().map_err(backend_error("commit receipt"))?;
        Ok(hex(&hash))
    }

    fn receipt(&mut self, context_id: &str, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.ensure_connected()?;
        let row = self
            .client
            .query_opt(
                "SELECT r.hash, b.bytes FROM receipts r
                 JOIN sessions s ON s.id = r.session_id
                 JOIN blobs b ON b.hash = r.hash
                 WHERE s.context_id = $1 AND r.receipt_id = $2",
                &[&context_id, &id],
            )
            .map_err(backend_error("read receipt"))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let hash: Vec<u8> = column(&row, 0, "read receipt")?;
        let bytes: Vec<u8> = column(&row, 1, "read receipt")?;
        verified_receipt(context_id, id, &hash, bytes).map(Some)
    }

    fn receipt_by_hash(
        &mut self,
        context_id: &str,
        hash_text: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(hash) = hash_from_hex(hash_text) else {
            return Ok(None);
        };
        self.ensure_connected()?;
        let row = self
            .client
            .query_opt(
                "SELECT b.bytes FROM blobs b WHERE b.hash = $2 AND EXISTS (
                   SELECT 1 FROM receipts r JOIN sessions s ON s.id = r.session_id
                   WHERE s.context_id = $1 AND r.hash = $2)",
                &[&context_id, &&hash[..]],
            )
            .map_err(backend_error("read receipt"))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let bytes: Vec<u8> = column(&row, 0, "read receipt")?;
        verified_receipt(context_id, hash_text, &hash, bytes).map(Some)
    }

    fn put_state(&mut self, scope: &str, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.ensure_connected()?;
        self.client
            .execute(
                "INSERT INTO state (scope, key, value) VALUES ($1, $2, $3)
                 ON CONFLICT (scope, key) DO UPDATE SET value = EXCLUDED.value",
                &[&scope, &key, &value],
            )
            .map(|_| ())
            .map_err(backend_error("save state"))
    }

    fn state(&mut self, scope: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.ensure_connected()?;
        let row = self
            .client
            .query_opt(
                "SELECT value FROM state WHERE scope = $1 AND key = $2",
                &[&scope, &key],
            )
            .map_err(backend_error("read state"))?;
        row.map(|row| column(&row, 0, "read state")).transpose()
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
        let count = to_i64(messages.len() as u64, "batch size")?;
        let receipts: ReceiptRows<'_> = messages
            .iter()
            .map(|m| {
                let raw = m.raw.as_bytes();
                (m.id.as_str(), blob_hash(raw), raw)
            })
            .collect();
        self.ensure_connected()?;
        let PostgresStore {
            client, statements, ..
        } = self;
        let mut tx = client
            .transaction()
            .map_err(backend_error("begin chat append"))?;
        // Locks the session's row: appends to one session queue here.
        let (session_id, stored_format, next) = Self::session_row(&mut tx, statements, context_id)?;
        let chat = Self::is_chat_session(&mut tx, statements, session_id)?;
        check_chat_append(
            context_id,
            parse_format(stored_format, context_id)?,
            chat,
            format,
            to_u64(next, context_id, "message count")?,
            expected_len,
        )?;
        if !chat {
            tx.execute(
                "INSERT INTO chat_sessions (session_id) VALUES ($1)",
                &[&session_id],
            )
            .map_err(backend_error("create chat session"))?;
        }
        if let Some(envelope) = envelope {
            tx.execute(
                "UPDATE chat_sessions SET items_key = $2, envelope = $3 WHERE session_id = $1",
                &[&session_id, &envelope.items_key(), &envelope.to_json()],
            )
            .map_err(backend_error("store chat envelope"))?;
        }
        Self::index_receipts(&mut tx, statements, session_id, context_id, &receipts)?;
        for (chunk_index, chunk) in receipts.chunks(ROWS_PER_STATEMENT).enumerate() {
            let first = chunk_index * ROWS_PER_STATEMENT;
            let seqs: Vec<i64> = (0..chunk.len())
                .map(|k| to_i64((first + k) as u64, "message count").map(|k| expected + k))
                .collect::<Result<_, _>>()?;
            let ids: Vec<&str> = chunk.iter().map(|(id, _, _)| *id).collect();
            let hashes: Vec<&[u8]> = chunk.iter().map(|(_, h, _)| &h[..]).collect();
            tx.execute(
                "INSERT INTO chat_messages (session_id, seq, message_id, hash)
                 SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bytea[])",
                &[&session_id, &seqs, &ids, &hashes],
            )
            .map_err(backend_error("store chat messages"))?;
        }
        let new_next = expected + count;
        tx.execute(
            "UPDATE sessions SET format = $2, next_seq = $3 WHERE id = $1",
            &[&session_id, &format.name(), &new_next],
        )
        .map_err(backend_error("advance chat session"))?;
        tx.commit().map_err(backend_error("commit chat append"))?;
        to_u64(new_next, context_id, "message count")
    }

    fn chat_transcript(&mut self, context_id: &str) -> Result<Option<ChatTranscript>, StoreError> {
        self.ensure_connected()?;
        // One snapshot for both reads: the envelope and the messages of the same moment.
        let mut tx = self
            .client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(backend_error("begin chat read"))?;
        let head = tx
            .query_opt(
                "SELECT s.id, s.format, s.next_seq, c.items_key, c.envelope
                 FROM sessions s JOIN chat_sessions c ON c.session_id = s.id
                 WHERE s.context_id = $1",
                &[&context_id],
            )
            .map_err(backend_error("read chat session"))?;
        let Some(head) = head else {
            return Ok(None);
        };
        let what = "read chat session";
        let session_id: i64 = column(&head, 0, what)?;
        let format: Option<String> = column(&head, 1, what)?;
        let next: i64 = column(&head, 2, what)?;
        let items_key: Option<String> = column(&head, 3, what)?;
        let envelope: Option<String> = column(&head, 4, what)?;
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
        let rows = tx
            .query(
                "SELECT m.seq, m.message_id, b.bytes FROM chat_messages m
                 JOIN blobs b ON b.hash = m.hash
                 WHERE m.session_id = $1 ORDER BY m.seq",
                &[&session_id],
            )
            .map_err(backend_error("read chat messages"))?;
        tx.commit().map_err(backend_error("end chat read"))?;
        let mut messages = Vec::with_capacity(rows.len());
        for (n, row) in rows.iter().enumerate() {
            let what = "read chat messages";
            let seq: i64 = column(row, 0, what)?;
            let id: String = column(row, 1, what)?;
            let bytes: Vec<u8> = column(row, 2, what)?;
            if seq != n as i64 {
                return Err(corrupt(format!(
                    "chat message {n} is missing (found {seq})"
                )));
            }
            let raw = String::from_utf8(bytes)
                .map_err(|_| corrupt(format!("chat message {id:?} is not UTF-8")))?;
            messages.push(ChatMessage { id, raw });
        }
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
        self.ensure_connected()?;
        self.client
            .execute(
                "INSERT INTO savings (source, context_id, ordinal, tool, tokens_before,
                 tokens_after, input_tokens, cache_read_tokens, cache_write_tokens,
                 output_tokens, at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                &[
                    &row.source,
                    &row.context_id,
                    &row.ordinal,
                    &row.tool,
                    &row.tokens_before,
                    &row.tokens_after,
                    &input,
                    &read,
                    &write,
                    &output,
                    &row.at_ms,
                ],
            )
            .map(|_| ())
            .map_err(backend_error("record savings"))
    }

    fn savings(&mut self, context_id: Option<&str>) -> Result<Vec<SavingsRecord>, StoreError> {
        self.ensure_connected()?;
        let rows = match context_id {
            Some(c) => self.client.query(
                &format!("{SAVINGS_SELECT} WHERE context_id = $1 {SAVINGS_ORDER}"),
                &[&c],
            ),
            None => self
                .client
                .query(&format!("{SAVINGS_SELECT} {SAVINGS_ORDER}"), &[]),
        }
        .map_err(backend_error("read savings"))?;
        let what = "read savings";
        rows.iter()
            .map(|row| {
                let source: String = column(row, 0, what)?;
                crate::savings::decode(
                    &source,
                    column(row, 1, what)?,
                    [
                        column(row, 2, what)?,
                        column(row, 3, what)?,
                        column(row, 4, what)?,
                        column(row, 5, what)?,
                    ],
                    column(row, 6, what)?,
                    [
                        column(row, 7, what)?,
                        column(row, 8, what)?,
                        column(row, 9, what)?,
                        column(row, 10, what)?,
                    ],
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_1_database_gets_chat_sessions_and_keeps_its_sessions() {
        let db = match crate::testing::postgres() {
            Ok(db) => db,
            Err(why) if crate::testing::services_required() => {
                panic!("PostgreSQL required: {why}")
            }
            Err(why) => return eprintln!("note: PostgreSQL test skipped ({why})"),
        };
        let crate::Location::Postgres(url) = &db.location else {
            unreachable!("a PostgreSQL test database")
        };
        let mut client = PostgresStore::client(url).unwrap();
        migrate_with(&mut client, &MIGRATIONS[..1]).unwrap();
        client
            .batch_execute(
                "INSERT INTO sessions (context_id, format, next_seq) VALUES ('events', 'events', 0)",
            )
            .unwrap();
        drop(client);

        let mut store = PostgresStore::connect(url).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(
            store.info("events").unwrap().unwrap().format,
            Some(Format::Events)
        );
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
        let db = match crate::testing::postgres() {
            Ok(db) => db,
            Err(why) if crate::testing::services_required() => {
                panic!("PostgreSQL required: {why}")
            }
            Err(why) => return eprintln!("note: PostgreSQL test skipped ({why})"),
        };
        let crate::Location::Postgres(url) = &db.location else {
            unreachable!("a PostgreSQL test database")
        };
        let mut store = PostgresStore::connect(url).unwrap();
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
        migrate_with(&mut store.client, &next).unwrap();
        assert_eq!(store.schema_version().unwrap(), 4);
        migrate_with(&mut store.client, &next).unwrap();
        let row = store
            .client
            .query_one("SELECT COUNT(*) FROM added_in_2", &[])
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), 1);
        assert_eq!(
            store.state("scope", "key").unwrap().as_deref(),
            Some(&b"kept across the upgrade"[..])
        );
        drop(store);
        let err = PostgresStore::connect(url).unwrap_err();
        assert!(err.to_string().contains("schema version 4"), "{err}");
    }

    #[test]
    fn a_version_2_database_gets_savings_and_keeps_its_chats() {
        let db = match crate::testing::postgres() {
            Ok(db) => db,
            Err(why) if crate::testing::services_required() => {
                panic!("PostgreSQL required: {why}")
            }
            Err(why) => return eprintln!("note: PostgreSQL test skipped ({why})"),
        };
        let crate::Location::Postgres(url) = &db.location else {
            unreachable!("a PostgreSQL test database")
        };
        let mut client = PostgresStore::client(url).unwrap();
        migrate_with(&mut client, &MIGRATIONS[..2]).unwrap();
        client
            .batch_execute(
                "INSERT INTO sessions (context_id, format, next_seq) VALUES ('events', 'events', 0)",
            )
            .unwrap();
        drop(client);

        let mut store = PostgresStore::connect(url).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(
            store.info("events").unwrap().unwrap().format,
            Some(Format::Events)
        );
        let chat = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
        ctxgc_core::store::chat::append_chat(&mut store, "chat", chat, &Default::default())
            .unwrap();
        assert!(store.savings(None).unwrap().is_empty());
        let record = SavingsRecord {
            source: ctxgc_core::store::savings::SavingsSource::Proxy,
            context_id: "chat".into(),
            ordinal: 2,
            tool: "search".into(),
            tokens_before: 10,
            tokens_after: 3,
            usage: None,
            at_ms: 5,
        };
        store.record_savings(&record).unwrap();
        assert_eq!(store.savings(Some("chat")).unwrap(), [record]);
        assert_eq!(
            store
                .chat_transcript("chat")
                .unwrap()
                .unwrap()
                .messages
                .len(),
            1
        );
    }
}
