//! The store suite: every test runs on SQLite and on PostgreSQL (see
//! `ctxgc_store::testing::test_databases`), so both backends keep the same promises.

mod common;

use common::{append_batches, compile_whole, items, raw_sql, set_var, traces};
use ctxgc_core::compile::report_events;
use ctxgc_core::store::{Snapshot, SnapshotPolicy, StoreError, StoredSession, content_hash};
use ctxgc_core::{Format, Session};
use ctxgc_store::Store;
use ctxgc_store::testing::{TestDb, test_databases};

/// Runs `test` once per backend, naming the backend if it panics.
fn on_every_backend(test: impl Fn(&TestDb)) {
    for db in test_databases() {
        eprintln!("backend: {}", db.backend);
        test(&db);
    }
}

fn template() -> Session {
    Session::new(Default::default())
}

#[test]
fn appended_items_come_back_in_order_with_their_sequence_numbers() {
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        let first = items(&[set_var("e1", 1, "x", 1), set_var("e2", 2, "y", 2)].join("\n"));
        assert_eq!(store.append("c", Format::Events, 0, &first).unwrap(), 2);
        let second = items(&set_var("e3", 3, "x", 3));
        assert_eq!(store.append("c", Format::Events, 2, &second).unwrap(), 3);

        let mut reopened = db.open().unwrap();
        let all = reopened.items("c", 0).unwrap();
        let ids: Vec<&str> = all.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["e1", "e2", "e3"]);
        assert_eq!(all[0], first[0], "an item comes back exactly as appended");
        assert_eq!(all[2].raw, set_var("e3", 3, "x", 3));
        let tail: Vec<String> = reopened
            .items("c", 2)
            .unwrap()
            .into_iter()
            .map(|i| i.id)
            .collect();
        assert_eq!(tail, ["e3"]);
        assert!(reopened.items("c", 3).unwrap().is_empty());
        assert!(reopened.items("nobody", 0).unwrap().is_empty());
        let info = reopened.info("c").unwrap().unwrap();
        assert_eq!((info.format, info.items), (Some(Format::Events), 3));
        assert!(reopened.info("nobody").unwrap().is_none());
    });
}

#[test]
fn a_stale_sequence_number_is_a_conflict_and_writes_nothing() {
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        store
            .append("c", Format::Events, 0, &items(&set_var("e1", 1, "x", 1)))
            .unwrap();
        for stale in [0, 2, 7] {
            let err = store
                .append(
                    "c",
                    Format::Events,
                    stale,
                    &items(&set_var("e2", 2, "x", 2)),
                )
                .unwrap_err();
            assert!(
                matches!(err, StoreError::Conflict { expected, actual: 1, .. } if expected == stale),
                "{err}"
            );
        }
        // A session that does not exist yet has length 0.
        let err = store
            .append("new", Format::Events, 1, &items(&set_var("e1", 1, "x", 1)))
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict { actual: 0, .. }),
            "{err}"
        );
        assert!(
            store.info("new").unwrap().is_none(),
            "a refused append creates nothing"
        );
        assert_eq!(store.items("c", 0).unwrap().len(), 1);
        assert!(store.receipt("c", "e2").unwrap().is_none());
    });
}

#[test]
fn two_writers_on_separate_connections_never_fork_a_session() {
    on_every_backend(|db| {
        let mut a = StoredSession::open(db.open().unwrap(), "c", template()).unwrap();
        let mut b = StoredSession::open(db.open().unwrap(), "c", template()).unwrap();
        assert_eq!(
            a.append(Format::Events, items(&set_var("a1", 1, "x", 1)))
                .unwrap(),
            0..1
        );
        // b has not seen a1: its append at 0 is refused.
        let err = b
            .append(Format::Events, items(&set_var("b1", 2, "x", 2)))
            .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Conflict {
                    expected: 0,
                    actual: 1,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(b.refresh().unwrap(), 1);
        assert_eq!(
            b.append(Format::Events, items(&set_var("b1", 2, "x", 2)))
                .unwrap(),
            1..2
        );
        let ids: Vec<String> = db
            .open()
            .unwrap()
            .items("c", 0)
            .unwrap()
            .into_iter()
            .map(|i| i.id)
            .collect();
        assert_eq!(ids, ["a1", "b1"]);
    });
}

#[test]
fn a_session_keeps_the_format_of_its_first_append() {
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        store
            .append("c", Format::Events, 0, &items(&set_var("e1", 1, "x", 1)))
            .unwrap();
        let err = store
            .append(
                "c",
                Format::OpenaiChat,
                1,
                &items(&set_var("e2", 2, "x", 2)),
            )
            .unwrap_err();
        assert!(matches!(err, StoreError::FormatMismatch { .. }), "{err}");
        assert_eq!(store.items("c", 0).unwrap().len(), 1);
    });
}

#[test]
fn receipts_are_read_only_through_their_own_session() {
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        let shared = set_var("e1", 1, "x", 1);
        let secret = set_var("s1", 2, "password", 42);
        store
            .append("alice", Format::Events, 0, &items(&shared))
            .unwrap();
        store
            .append("bob", Format::Events, 0, &items(&shared))
            .unwrap();
        store
            .append("bob", Format::Events, 1, &items(&secret))
            .unwrap();
        store
            .put_receipt("bob", "tool-output-7", b"bob's tool output")
            .unwrap();

        // Identical payloads are stored once, but each session reaches only its own.
        let mut reopened = db.open().unwrap();
        assert_eq!(reopened.distinct_payloads().unwrap(), 3);
        assert_eq!(
            reopened.receipt("alice", "e1").unwrap().as_deref(),
            Some(shared.as_bytes())
        );
        assert_eq!(
            reopened.receipt("bob", "e1").unwrap().as_deref(),
            Some(shared.as_bytes())
        );
        for id in ["s1", "tool-output-7"] {
            assert!(
                reopened.receipt("alice", id).unwrap().is_none(),
                "alice read bob's receipt {id}"
            );
        }
        assert!(reopened.receipt("nobody", "e1").unwrap().is_none());
        // By content address too: knowing the hash is not enough.
        let secret_hash = content_hash(secret.as_bytes());
        assert!(
            reopened
                .receipt_by_hash("alice", &secret_hash)
                .unwrap()
                .is_none()
        );
        assert_eq!(
            reopened
                .receipt_by_hash("bob", &secret_hash)
                .unwrap()
                .as_deref(),
            Some(secret.as_bytes())
        );
        let shared_hash = content_hash(shared.as_bytes());
        assert!(
            reopened
                .receipt_by_hash("alice", &shared_hash)
                .unwrap()
                .is_some()
        );
        assert!(
            reopened
                .receipt_by_hash("alice", "not-a-hash")
                .unwrap()
                .is_none()
        );
        // The session's items, too.
        assert!(
            reopened
                .items("alice", 0)
                .unwrap()
                .iter()
                .all(|i| i.id == "e1")
        );
    });
}

#[test]
fn a_receipt_never_changes_and_a_refused_batch_leaves_nothing() {
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        let hash = store.put_receipt("c", "r1", b"original").unwrap();
        assert_eq!(hash, content_hash(b"original"));
        assert_eq!(store.put_receipt("c", "r1", b"original").unwrap(), hash);
        let err = store.put_receipt("c", "r1", b"changed").unwrap_err();
        assert!(matches!(err, StoreError::ReceiptTaken { .. }), "{err}");
        let before = store.distinct_payloads().unwrap();

        // The second item's id is taken by different bytes: the whole batch is refused.
        let batch = items(&[set_var("e1", 1, "x", 1), set_var("r1", 2, "x", 2)].join("\n"));
        let err = store.append("c", Format::Events, 0, &batch).unwrap_err();
        assert!(matches!(err, StoreError::ReceiptTaken { .. }), "{err}");
        assert!(store.items("c", 0).unwrap().is_empty());
        assert!(store.receipt("c", "e1").unwrap().is_none());
        assert_eq!(store.distinct_payloads().unwrap(), before);
        assert_eq!(store.info("c").unwrap().unwrap().items, 0);
        assert_eq!(
            store.receipt("c", "r1").unwrap().as_deref(),
            Some(&b"original"[..])
        );
    });
}

#[test]
fn resuming_from_snapshots_compiles_exactly_like_the_whole_trace() {
    let policy = SnapshotPolicy {
        min_items: 7,
        growth_divisor: 4,
    };
    on_every_backend(|db| {
        for (name, text) in traces() {
            let whole = compile_whole(&text);
            let context_id = format!("trace-{name}");
            let all = items(&text);
            let max_batch = (all.len() / 50).max(9);
            let batches = append_batches(all, max_batch);
            for (n, batch) in batches.into_iter().enumerate() {
                // Every batch in a fresh process-like session: open, append, compile, close.
                let mut stored = StoredSession::open(db.open().unwrap(), &context_id, template())
                    .unwrap()
                    .with_snapshot_policy(policy);
                stored.append(Format::Events, batch).unwrap();
                if n % 3 == 0 {
                    stored.compile().unwrap();
                }
            }
            let mut stored =
                StoredSession::open(db.open().unwrap(), &context_id, template()).unwrap();
            assert!(stored.snapshot_seq() > 0, "{name}: no snapshot was used");
            stored.compile().unwrap();
            let resumed = report_events(stored.session(), Default::default());
            assert_eq!(resumed.output, whole.output, "{name}");
            assert_eq!(resumed.decisions, whole.decisions, "{name}");
            assert_eq!(resumed.receipts, whole.receipts, "{name}");
            assert_eq!(
                (resumed.tokens_before, resumed.tokens_after),
                (whole.tokens_before, whole.tokens_after),
                "{name}"
            );
            assert_eq!(resumed.warnings, whole.warnings, "{name}");
        }
    });
}

#[test]
fn snapshots_are_kept_per_configuration_and_never_go_back() {
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        let text: Vec<String> = (0..10)
            .map(|n| set_var(&format!("e{n}"), n, "x", n))
            .collect();
        let all = items(&text.join("\n"));
        store.append("c", Format::Events, 0, &all).unwrap();
        let state = |upto: usize| {
            let mut session = template();
            session.extend(all[..upto].to_vec()).unwrap();
            session.compile();
            Snapshot {
                seq: upto as u64,
                session,
            }
        };
        store.save_snapshot("c", "cfg-a", &state(8)).unwrap();
        store.save_snapshot("c", "cfg-a", &state(5)).unwrap();
        store.save_snapshot("c", "cfg-b", &state(3)).unwrap();
        let err = store
            .save_snapshot("other", "cfg-a", &state(8))
            .unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");

        let mut reopened = db.open().unwrap();
        let a = reopened.load_snapshot("c", "cfg-a").unwrap().unwrap();
        assert_eq!((a.seq, a.session.items().len()), (8, 8));
        let b = reopened.load_snapshot("c", "cfg-b").unwrap().unwrap();
        assert_eq!(b.seq, 3);
        assert!(reopened.load_snapshot("c", "cfg-c").unwrap().is_none());
        assert!(reopened.load_snapshot("other", "cfg-a").unwrap().is_none());

        // Different retention policies never share a snapshot.
        let mut strict = Session::new(ctxgc_core::RetentionPolicy {
            min_importance: 1.0,
            ..Default::default()
        });
        strict.compile();
        let default_fp = StoredSession::open(db.open().unwrap(), "c", template())
            .unwrap()
            .fingerprint()
            .to_owned();
        let strict_fp = StoredSession::open(db.open().unwrap(), "c", strict)
            .unwrap()
            .fingerprint()
            .to_owned();
        assert_ne!(default_fp, strict_fp);
    });
}

#[test]
fn an_unreadable_snapshot_falls_back_to_replaying_the_items() {
    on_every_backend(|db| {
        let text: Vec<String> = (0..30)
            .map(|n| set_var(&format!("e{n}"), n, &format!("k{}", n % 4), n))
            .collect();
        let text = text.join("\n");
        let mut stored = StoredSession::open(db.open().unwrap(), "c", template())
            .unwrap()
            .with_snapshot_policy(SnapshotPolicy {
                min_items: 1,
                growth_divisor: 0,
            });
        stored.append(Format::Events, items(&text)).unwrap();
        stored.compile().unwrap();
        drop(stored);
        let garbage = match db.backend {
            "sqlite" => "UPDATE snapshots SET body = X'01FFFF'",
            _ => "UPDATE snapshots SET body = '\\x01ffff'::bytea",
        };
        raw_sql(db, garbage);
        let mut stored = StoredSession::open(db.open().unwrap(), "c", template()).unwrap();
        assert_eq!(stored.snapshot_seq(), 0, "the damaged snapshot was used");
        assert_eq!(stored.len(), 30);
        stored.compile().unwrap();
        let resumed = report_events(stored.session(), Default::default());
        assert_eq!(resumed.output, compile_whole(&text).output);
    });
}

#[test]
fn damaged_items_are_an_error_that_names_the_session_and_sequence() {
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        store
            .append(
                "c",
                Format::Events,
                0,
                &items(&[set_var("e1", 1, "x", 1), set_var("e2", 2, "x", 2)].join("\n")),
            )
            .unwrap();
        let damage = match db.backend {
            "sqlite" => "UPDATE items SET body = X'01C1' WHERE seq = 1",
            _ => "UPDATE items SET body = '\\x01c1'::bytea WHERE seq = 1",
        };
        raw_sql(db, damage);
        let err = db.open().unwrap().items("c", 0).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{message}");
        assert!(
            message.contains("\"c\"") && message.contains("sequence 1"),
            "{message}"
        );
    });
}

#[test]
fn named_state_is_saved_replaced_and_scoped() {
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        assert!(store.state("ctx-1", "projection").unwrap().is_none());
        store.put_state("ctx-1", "projection", b"v1").unwrap();
        store.put_state("ctx-1", "projection", b"v2").unwrap();
        store
            .put_state("fleet", "projection", &[0, 255, 7])
            .unwrap();
        let mut reopened = db.open().unwrap();
        assert_eq!(
            reopened.state("ctx-1", "projection").unwrap().as_deref(),
            Some(&b"v2"[..])
        );
        assert_eq!(
            reopened.state("fleet", "projection").unwrap().as_deref(),
            Some(&[0, 255, 7][..])
        );
        assert!(reopened.state("ctx-2", "projection").unwrap().is_none());
        assert!(reopened.state("ctx-1", "mode").unwrap().is_none());
    });
}

#[test]
fn sessions_are_listed_in_order_of_their_ids() {
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        for (n, ctx) in ["zeta", "alpha", "mid"].into_iter().enumerate() {
            let batch: Vec<String> = (0..=n as u64)
                .map(|k| set_var(&format!("e{k}"), k, "x", k))
                .collect();
            store
                .append(ctx, Format::Events, 0, &items(&batch.join("\n")))
                .unwrap();
        }
        let listed: Vec<(String, u64)> = db
            .open()
            .unwrap()
            .sessions()
            .unwrap()
            .into_iter()
            .map(|s| (s.context_id, s.items))
            .collect();
        assert_eq!(
            listed,
            [("alpha".into(), 2), ("mid".into(), 3), ("zeta".into(), 1)]
        );
    });
}

#[test]
fn the_schema_is_migrated_once_and_a_newer_schema_is_refused() {
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        assert_eq!(store.schema_version().unwrap(), 3);
        store
            .append("c", Format::Events, 0, &items(&set_var("e1", 1, "x", 1)))
            .unwrap();
        drop(store);
        // Opening again applies nothing twice and keeps the data.
        let mut store = db.open().unwrap();
        assert_eq!(store.schema_version().unwrap(), 3);
        assert_eq!(store.items("c", 0).unwrap().len(), 1);
        drop(store);
        raw_sql(db, "INSERT INTO schema_version (version) VALUES (99)");
        let err = db.open().unwrap_err();
        assert!(err.to_string().contains("newer"), "{err}");
    });
}

#[test]
fn rejected_items_are_not_stored() {
    on_every_backend(|db| {
        let mut stored = StoredSession::open(db.open().unwrap(), "c", template()).unwrap();
        stored
            .append(Format::Events, items(&set_var("e1", 1, "x", 1)))
            .unwrap();
        let dangling = r#"{"id":"e2","type":"set_var","timestamp":2,"key":"x","value":2,"parent_id":"nowhere"}"#;
        let err = stored.append(Format::Events, items(dangling)).unwrap_err();
        assert!(matches!(err, StoreError::Rejected { .. }), "{err}");
        assert!(err.to_string().contains("parent_id"), "{err}");
        assert_eq!(db.open().unwrap().items("c", 0).unwrap().len(), 1);
    });
}

#[test]
fn a_group_commit_stores_each_batch_or_refuses_it_alone() {
    use ctxgc_store::AppendBatch;
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        store
            .append(
                "taken",
                Format::Events,
                0,
                &items(&set_var("e1", 1, "x", 1)),
            )
            .unwrap();
        let a1 = items(&set_var("a1", 1, "x", 1));
        let a2 = items(&set_var("a2", 2, "x", 2));
        let stale = items(&set_var("s1", 1, "y", 1));
        let clash = items(&set_var("e1", 9, "x", 99));
        let b = items(&[set_var("b1", 1, "z", 1), set_var("b2", 2, "z", 2)].join("\n"));
        let batch = |context_id, expected_seq, items| AppendBatch {
            context_id,
            format: Format::Events,
            expected_seq,
            items,
        };
        let results = store.append_all(&[
            batch("a", 0, &a1),
            batch("stale", 3, &stale),
            // The same session twice in one group: the second batch follows the first.
            batch("a", 1, &a2),
            batch("taken", 1, &clash),
            batch("b", 0, &b),
        ]);
        assert_eq!(results.len(), 5);
        assert_eq!(results[0].as_ref().ok(), Some(&1));
        assert!(
            matches!(
                &results[1],
                Err(StoreError::Conflict {
                    expected: 3,
                    actual: 0,
                    ..
                })
            ),
            "{:?}",
            results[1]
        );
        assert_eq!(results[2].as_ref().ok(), Some(&2));
        assert!(
            matches!(&results[3], Err(StoreError::ReceiptTaken { id, .. }) if id == "e1"),
            "{:?}",
            results[3]
        );
        assert_eq!(results[4].as_ref().ok(), Some(&2));

        // What was acknowledged is durable; what was refused left nothing behind.
        let mut reopened = db.open().unwrap();
        let ids = |store: &mut ctxgc_store::AnyStore, c: &str| -> Vec<String> {
            store
                .items(c, 0)
                .unwrap()
                .into_iter()
                .map(|i| i.id)
                .collect()
        };
        assert_eq!(ids(&mut reopened, "a"), ["a1", "a2"]);
        assert_eq!(ids(&mut reopened, "b"), ["b1", "b2"]);
        assert!(ids(&mut reopened, "stale").is_empty());
        assert_eq!(ids(&mut reopened, "taken"), ["e1"]);
        assert_eq!(
            reopened.receipt("taken", "e1").unwrap().as_deref(),
            Some(set_var("e1", 1, "x", 1).as_bytes())
        );
        assert_eq!(
            reopened.receipt("a", "a2").unwrap().as_deref(),
            Some(set_var("a2", 2, "x", 2).as_bytes())
        );
        // Only the five stored items' payloads: the refused batches' are not kept.
        assert_eq!(reopened.distinct_payloads().unwrap(), 5);
        assert!(store.append_all(&[]).is_empty());
    });
}
