//! Savings records on every backend (memory, SQLite, PostgreSQL): what is written is read
//! back whole, after reopening, per session or all together, in one order whatever the
//! order of writing; a count a database cannot hold is refused by name.

use ctxgc_core::store::savings::{ProviderUsage, SavingsRecord, SavingsSource, canonical_order};
use ctxgc_core::store::{MemoryStore, Store, StoreError};
use ctxgc_store::testing::test_databases;

fn record(
    context_id: &str,
    at_ms: u64,
    source: SavingsSource,
    ordinal: u64,
    usage: Option<ProviderUsage>,
) -> SavingsRecord {
    SavingsRecord {
        source,
        context_id: context_id.into(),
        ordinal,
        tool: match source {
            SavingsSource::Gateway => "/v1/messages".into(),
            SavingsSource::Proxy => "search_issues".into(),
        },
        tokens_before: 1_000 + ordinal * 10,
        tokens_after: 400 + ordinal,
        usage,
        at_ms,
    }
}

/// Records in an order no backend keeps by accident: times out of order, two sessions
/// interleaved, ties on time broken by source and ordinal, one exact duplicate, and session
/// names whose byte order differs from a dictionary's (`Zeta` before `alpha`).
fn records() -> Vec<SavingsRecord> {
    let usage = Some(ProviderUsage {
        input_tokens: 420,
        cache_read_tokens: 300,
        cache_write_tokens: 20,
        output_tokens: 37,
    });
    vec![
        record("gw-alpha", 1_700, SavingsSource::Gateway, 4, usage),
        record("ctxgc-proxy", 1_500, SavingsSource::Proxy, 2, None),
        record("gw-alpha", 1_200, SavingsSource::Gateway, 2, None),
        record("gw-Zeta", 1_300, SavingsSource::Gateway, 2, usage),
        record("gw-alpha", 1_200, SavingsSource::Proxy, 1, None),
        record("ctxgc-proxy", 1_400, SavingsSource::Proxy, 1, None),
        record("gw-alpha", 1_700, SavingsSource::Gateway, 4, usage),
        record(
            "gw-alpha",
            1_200,
            SavingsSource::Gateway,
            1,
            Some(ProviderUsage::default()),
        ),
    ]
}

fn sorted(mut records: Vec<SavingsRecord>) -> Vec<SavingsRecord> {
    records.sort_by(canonical_order);
    records
}

fn write_and_read(store: &mut dyn Store) -> (Vec<SavingsRecord>, Vec<SavingsRecord>) {
    for r in records() {
        store.record_savings(&r).expect("record is stored");
    }
    (
        store.savings(None).expect("all records read"),
        store
            .savings(Some("gw-alpha"))
            .expect("one session's records read"),
    )
}

#[test]
fn every_backend_reads_the_records_back_in_the_canonical_order() {
    let expected = sorted(records());
    let alpha: Vec<SavingsRecord> = expected
        .iter()
        .filter(|r| r.context_id == "gw-alpha")
        .cloned()
        .collect();
    assert_eq!(alpha.len(), 5, "the duplicate is kept");
    assert_eq!(expected[0].context_id, "ctxgc-proxy");
    assert_eq!(expected[2].context_id, "gw-Zeta", "bytes: 'Z' < 'a'");

    let (all, one) = write_and_read(&mut MemoryStore::new());
    assert_eq!((all, one), (expected.clone(), alpha.clone()), "memory");

    for db in test_databases() {
        let (all, one) = write_and_read(&mut db.open().expect("store opens"));
        assert_eq!(all, expected, "{}", db.backend);
        assert_eq!(one, alpha, "{}", db.backend);
        // Another process, later: the records are durable.
        let mut reopened = db.open().expect("store reopens");
        assert_eq!(reopened.savings(None).unwrap(), expected, "{}", db.backend);
        assert!(reopened.savings(Some("gw-none")).unwrap().is_empty());
    }
}

#[test]
fn a_count_beyond_what_the_database_holds_is_refused_by_name() {
    for db in test_databases() {
        let mut store = db.open().expect("store opens");
        let mut r = record("gw-big", 1, SavingsSource::Gateway, 1, None);
        r.tokens_before = u64::MAX;
        let err = store.record_savings(&r).unwrap_err();
        assert!(matches!(err, StoreError::Backend { .. }), "{err}");
        assert!(err.to_string().contains("tokens_before"), "{err}");
        assert!(store.savings(None).unwrap().is_empty(), "{}", db.backend);
    }
}
