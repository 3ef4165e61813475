//! Throwaway databases for tests: a SQLite file in a fresh temporary folder, and a PostgreSQL
//! schema of its own, both removed when dropped. A test written against [`test_databases`]
//! runs on every backend.
//!
//! PostgreSQL is found at `$CTXGC_TEST_PG`, else [`DEFAULT_TEST_PG`]. When it does not answer,
//! the PostgreSQL half of a suite is skipped with a note, except under CI (`CI` or
//! `CTXGC_REQUIRE_SERVICES` set), where that is an error: CI starts the server before the
//! tests (`.ci/postgres.sh`).
//!
//! ```
//! use ctxgc_core::store::Store;
//! for db in ctxgc_store::testing::test_databases() {
//!     let mut store = db.open().unwrap();
//!     store.put_state("scope", "key", b"value").unwrap();
//!     assert_eq!(store.state("scope", "key").unwrap().as_deref(), Some(&b"value"[..]));
//! }
//! ```

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use postgres::{Client, NoTls};

use crate::{AnyStore, Location, StoreError};

/// The PostgreSQL server tests use when `CTXGC_TEST_PG` is not set.
pub const DEFAULT_TEST_PG: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A database that exists for one test and is removed when dropped.
#[derive(Debug)]
pub struct TestDb {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// Where it is: pass it to [`crate::open`], or to `--db` of another process.
    pub location: Location,
    cleanup: Cleanup,
}

#[derive(Debug)]
enum Cleanup {
    Folder(PathBuf),
    Schema { admin_url: String, schema: String },
}

impl TestDb {
    /// Opens a store on this database.
    pub fn open(&self) -> Result<AnyStore, StoreError> {
        crate::open(&self.location)
    }

    /// The `--db` value that names this database.
    pub fn spec(&self) -> String {
        match &self.location {
            Location::Sqlite(path) => path.display().to_string(),
            Location::Postgres(url) => url.clone(),
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::Folder(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Cleanup::Schema { admin_url, schema } => {
                if let Ok(mut client) = Client::connect(admin_url, NoTls) {
                    let _ =
                        client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
                }
            }
        }
    }
}

/// A name no other test of any process uses at the same time.
fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{prefix}_{}_{}_{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A SQLite database in a fresh temporary folder.
pub fn sqlite() -> TestDb {
    let dir = std::env::temp_dir().join(unique_name("ctxgc-store-test"));
    TestDb {
        backend: "sqlite",
        location: Location::Sqlite(dir.join("ctxgc.db")),
        cleanup: Cleanup::Folder(dir),
    }
}

/// A fresh schema in the test PostgreSQL database, or why there is none.
pub fn postgres() -> Result<TestDb, String> {
    let admin_url = std::env::var("CTXGC_TEST_PG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_TEST_PG.to_owned());
    let mut client = Client::connect(&admin_url, NoTls)
        .map_err(|e| format!("{}: {e}", crate::redact_url(&admin_url)))?;
    let schema = unique_name("ctxgc_test");
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .map_err(|e| format!("create schema {schema}: {e}"))?;
    let separator = if admin_url.contains('?') { '&' } else { '?' };
    let url = format!("{admin_url}{separator}options=-csearch_path%3D{schema}");
    Ok(TestDb {
        backend: "postgres",
        location: Location::Postgres(url),
        cleanup: Cleanup::Schema { admin_url, schema },
    })
}

/// True when tests must not skip what needs a service (under CI).
pub fn services_required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var_os("CTXGC_REQUIRE_SERVICES").is_some()
}

/// One fresh database per backend: SQLite always, PostgreSQL when it answers (and under CI,
/// where it must).
///
/// # Panics
///
/// When PostgreSQL does not answer and [`services_required`].
pub fn test_databases() -> Vec<TestDb> {
    let mut out = vec![sqlite()];
    match postgres() {
        Ok(db) => out.push(db),
        Err(why) if services_required() => {
            panic!("PostgreSQL is required under CI and does not answer: {why}")
        }
        Err(why) => eprintln!(
            "note: PostgreSQL tests skipped ({why}); run .ci/postgres.sh or set CTXGC_TEST_PG"
        ),
    }
    out
}
