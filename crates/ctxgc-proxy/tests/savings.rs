//! Savings records: a reviewed projection with its originals in a SQLite file records one
//! record per trimmed call in the same file (exact tokens of what the real test server sent
//! and of what the agent received), none for an untrimmed call or an `expand`, with or
//! without `--quiet`; records outlive the proxy.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ctxgc_core::Tokenizer;
use ctxgc_core::store::Store;
use ctxgc_core::store::savings::SavingsSource;
use ctxgc_proxy::receipts::PROXY_CONTEXT;
use ctxgc_proxy::reviewed::ReviewedProjection;
use ctxgc_store::Location;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(20);

const REVIEWED: &str = r#"{"ctxgc_projection": 1, "rules": {"min_saving_tokens": 0},
  "tools": {"search_flights": {"drop": [
    {"field": "flights[].fare_rules"}, {"field": "flights[].aircraft"},
    {"field": "flights[].amenities"}, {"field": "disclaimer"}]}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_trimmed_call_is_recorded_in_the_store_of_the_originals() {
    let dir = tempfile::tempdir().unwrap();
    let projection = dir.path().join("projection.json");
    std::fs::write(&projection, REVIEWED).unwrap();
    let location = Location::Sqlite(dir.path().join("ctxgc.db"));
    let servers = set_of(vec![stdio_server("travel", &[])], &[]);

    let direct = direct_stdio(&[]).await;
    let original = text_of(
        &direct
            .call_tool(call("search_flights", flights_args()))
            .await
            .unwrap(),
    );

    let mut trimmed_texts = Vec::new();
    for quiet in [false, true] {
        let shaper = ReviewedProjection::load_with_store(&projection, &location).unwrap();
        let core = ctxgc_proxy::build_core(&servers, Arc::new(shaper), TIMEOUT, quiet);
        let (agent, _) = proxy_over_pipe(core).await;
        // An untrimmed tool first: it is call 1 and records nothing.
        let (_, is_error) = call_text(&agent, "get_customer", json!({"customer_id": "C7"})).await;
        assert!(!is_error);
        let (trimmed, is_error) = call_text(&agent, "search_flights", flights_args()).await;
        assert!(!is_error);
        assert!(trimmed.len() < original.len(), "the output was trimmed");
        let reference = trimmed
            .split("expand ref \"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .expect("a reference")
            .to_owned();
        let (expanded, _) =
            call_text(&agent, "expand", json!({"ref": reference, "fields": ["*"]})).await;
        assert_eq!(expanded, original);
        agent.cancel().await.unwrap();
        trimmed_texts.push(trimmed);
    }

    let mut store = ctxgc_store::open(&location).unwrap();
    let records = store.savings(None).unwrap();
    assert_eq!(records.len(), 2, "{records:?}");
    let tokenizer = Tokenizer::O200kBase;
    for (record, trimmed) in records.iter().zip(&trimmed_texts) {
        assert_eq!(record.source, SavingsSource::Proxy);
        assert_eq!(record.context_id, PROXY_CONTEXT);
        assert_eq!(record.tool, "search_flights");
        assert_eq!(record.ordinal, 2, "the second call of each proxy");
        assert_eq!(record.tokens_before, tokenizer.count(&original) as u64);
        assert_eq!(record.tokens_after, tokenizer.count(trimmed) as u64);
        assert!(record.tokens_saved() > 0);
        assert_eq!(record.usage, None);
    }
    assert_eq!(store.savings(Some(PROXY_CONTEXT)).unwrap(), records);
}
