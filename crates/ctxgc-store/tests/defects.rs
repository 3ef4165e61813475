//! Defects found by an outside attack on the store: tampered receipt bytes handed out without
//! complaint, a read-only database file that could not even be read, PostgreSQL errors that
//! said only "db error".

mod common;

use common::raw_sql;
use ctxgc_core::store::{Store, StoreError};
use ctxgc_store::Location;
use ctxgc_store::testing::test_databases;

/// Item 6: the blake3 hash kept with every receipt is checked on read; bytes that no longer
/// match it are reported as corruption naming the receipt, never returned as the original.
#[test]
fn item_6_tampered_receipt_bytes_are_reported_as_corruption() {
    for db in test_databases() {
        let mut store = db.open().expect("opens");
        let original = br#"{"id":"e1","type":"set_var","timestamp":1,"key":"x","value":1}"#;
        let hash = store.put_receipt("ctx-1", "e1", original).expect("stored");
        store
            .put_receipt("ctx-1", "e2", b"untouched")
            .expect("stored");
        assert_eq!(
            store.receipt("ctx-1", "e1").unwrap().as_deref(),
            Some(&original[..])
        );
        drop(store);

        let tamper = match db.backend {
            "sqlite" => format!(
                "UPDATE blobs SET bytes = CAST('{{\"value\":2}}' AS BLOB) WHERE hash = x'{hash}'"
            ),
            _ => format!(
                "UPDATE blobs SET bytes = convert_to('{{\"value\":2}}', 'UTF8') WHERE hash = '\\x{hash}'::bytea"
            ),
        };
        raw_sql(&db, &tamper);

        let mut store = db.open().expect("opens");
        for read in [
            store.receipt("ctx-1", "e1"),
            store.receipt_by_hash("ctx-1", &hash),
        ] {
            match read {
                Err(e @ StoreError::ReceiptCorrupt { .. }) => {
                    let message = e.to_string();
                    assert!(
                        message.contains("ctx-1") && message.contains(&hash),
                        "{message}"
                    );
                }
                other => panic!("{}: expected corruption, got {other:?}", db.backend),
            }
        }
        let StoreError::ReceiptCorrupt { id, .. } = store.receipt("ctx-1", "e1").unwrap_err()
        else {
            unreachable!()
        };
        assert_eq!(id, "e1");
        // Other receipts are still served.
        assert_eq!(
            store.receipt("ctx-1", "e2").unwrap().as_deref(),
            Some(&b"untouched"[..])
        );
    }
}

/// Item 10: a database file that is not writable is opened for reading: reads work, and a
/// write fails with an error that says the database is read-only.
#[test]
fn item_10_a_read_only_sqlite_file_is_readable() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ctxgc.db");
    {
        let mut store = ctxgc_store::open(&Location::Sqlite(path.clone())).expect("opens");
        store
            .put_receipt("ctx-1", "e1", b"original")
            .expect("stored");
        store.put_state("scope", "k", b"v").expect("stored");
    }
    let mut perms = std::fs::metadata(&path).expect("exists").permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&path, perms).expect("chmod");

    let mut store = ctxgc_store::open(&Location::Sqlite(path.clone())).expect("opens read-only");
    assert_eq!(
        store.receipt("ctx-1", "e1").unwrap().as_deref(),
        Some(&b"original"[..])
    );
    assert_eq!(
        store.state("scope", "k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    let err = store.put_state("scope", "k", b"w").expect_err("read-only");
    assert!(err.to_string().contains("read-only"), "{err}");
    let bytes_after = std::fs::read(&path).expect("readable");
    drop(store);
    assert_eq!(std::fs::read(&path).expect("readable"), bytes_after);
}

/// Item 10: a PostgreSQL error carries what the server said (SQLSTATE, message, detail),
/// not only "db error".
#[test]
fn item_10_postgres_errors_carry_the_servers_words() {
    for db in test_databases()
        .into_iter()
        .filter(|d| d.backend == "postgres")
    {
        let mut store = db.open().expect("opens");
        store
            .put_receipt("ctx-1", "e1", b"original")
            .expect("stored");
        drop(store);
        // Break the schema under the store so that the server refuses the next write.
        raw_sql(
            &db,
            "ALTER TABLE receipts ADD CONSTRAINT receipt_id_short CHECK (length(receipt_id) < 3)",
        );
        let mut store = db.open().expect("opens");
        let err = store
            .put_receipt("ctx-1", "too-long-id", b"more")
            .expect_err("refused by the server");
        let message = err.to_string();
        assert!(!message.ends_with("db error"), "{message}");
        assert!(message.contains("23514"), "{message}");
        assert!(message.contains("receipt_id_short"), "{message}");
        assert!(message.contains("detail:"), "{message}");
    }
}
