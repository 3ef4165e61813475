//! Savings end to end, over HTTP: a real gateway in front of the fake provider (the
//! gateway's own test harness) compiles the repository's support conversation into a SQLite
//! file, the proxy's savings sink records a trimmed call in the same file, and the console
//! opened on that file shows both: totals per source, per session, and one session's
//! records exactly as the store holds them.

mod common;

#[path = "../../ctxgc-gateway/tests/common/mod.rs"]
mod gateway;

use common::Server;
use ctxgc_console::{ConsoleOptions, StoreHandle};
use ctxgc_core::store::Store;
use ctxgc_core::store::savings::SavingsRecord;
use ctxgc_proxy::receipts::{PROXY_CONTEXT, StoreReceipts};
use serde_json::Value;
use serde_json::value::RawValue;

/// The support example resent whole before each assistant turn, as an agent does.
fn requests() -> Vec<String> {
    let text = common::read("examples/support-session.json");
    let messages: Vec<Box<RawValue>> = serde_json::from_str(&text).expect("a message list");
    (2..messages.len())
        .filter(|&k| messages[k].get().contains("\"role\": \"assistant\""))
        .map(|k| {
            let list: Vec<&str> = messages[..k].iter().map(|m| m.get()).collect();
            format!(
                "{{\"model\":\"fake-model\",\"messages\":[{}]}}",
                list.join(",")
            )
        })
        .collect()
}

/// Runs the gateway over `db` for every request; returns how many were answered.
fn run_gateway(db: &ctxgc_store::testing::TestDb) -> usize {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bodies = requests();
    runtime.block_on(async {
        let upstream = gateway::FakeUpstream::start().await;
        let running = gateway::TestGateway::start(
            gateway::options_for(&upstream.base),
            Some(db.open().unwrap()),
        )
        .await;
        for body in &bodies {
            let r = reqwest::Client::new()
                .post(format!("{}/v1/chat/completions", running.base))
                .header("content-type", "application/json")
                .header("x-ctxgc-session", "support")
                .body(body.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            r.bytes().await.unwrap();
        }
        running.gateway.savings_settled().await;
        running.stop().await;
    });
    bodies.len()
}

fn get(server: &Server, path: &str) -> (u16, Value) {
    let url = server.url(path);
    server.runtime.block_on(async {
        let response = reqwest::get(url).await.expect("answer");
        let status = response.status().as_u16();
        (status, response.json::<Value>().await.expect("JSON answer"))
    })
}

#[test]
fn the_console_shows_what_a_real_gateway_and_the_proxy_recorded_in_its_store() {
    let db = ctxgc_store::testing::sqlite();
    let answered = run_gateway(&db);
    // The proxy's sink, on the same file: one trimmed call.
    let receipts = StoreReceipts::open(&db.location).unwrap();
    receipts
        .savings_sink()
        .record(2, "search_flights", 5_210, 1_133)
        .unwrap();
    drop(receipts);

    let mut store = db.open().unwrap();
    let stored: Vec<SavingsRecord> = store.savings(None).unwrap();
    assert_eq!(stored.len(), answered + 1);
    let gateway_records: Vec<&SavingsRecord> = stored
        .iter()
        .filter(|r| r.context_id != PROXY_CONTEXT)
        .collect();
    let context_id = gateway_records[0].context_id.clone();
    let before: u64 = gateway_records.iter().map(|r| r.tokens_before).sum();
    let after: u64 = gateway_records.iter().map(|r| r.tokens_after).sum();
    let saved: u64 = gateway_records.iter().map(|r| r.tokens_saved()).sum();
    assert!(saved > 0);
    let server = Server::start(
        ConsoleOptions::default(),
        Some(StoreHandle::new(store, &db.location)),
    );

    let (status, overview) = get(&server, "/api/savings");
    assert_eq!(status, 200, "{overview}");
    assert_eq!(overview["store"], true);
    let totals = overview["totals"].as_array().unwrap();
    assert_eq!(totals.len(), 2, "{overview}");
    let gateway_totals = &totals[0];
    assert_eq!(gateway_totals["source"], "gateway");
    assert_eq!(gateway_totals["records"].as_u64(), Some(answered as u64));
    assert_eq!(gateway_totals["tokens_before"].as_u64(), Some(before));
    assert_eq!(gateway_totals["tokens_after"].as_u64(), Some(after));
    assert_eq!(gateway_totals["tokens_saved"].as_u64(), Some(saved));
    assert_eq!(gateway_totals["with_usage"].as_u64(), Some(answered as u64));
    assert!(gateway_totals["usage"]["input_tokens"].as_u64().unwrap() > 0);
    let proxy_totals = &totals[1];
    assert_eq!(proxy_totals["source"], "proxy");
    assert_eq!(proxy_totals["tokens_saved"].as_u64(), Some(5_210 - 1_133));
    assert_eq!(proxy_totals["with_usage"].as_u64(), Some(0));
    // Per session, in the store's order (`ctxgc-proxy` < `gw-support`).
    let sessions: Vec<&str> = overview["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["context_id"].as_str().unwrap())
        .collect();
    assert_eq!(sessions, [PROXY_CONTEXT, context_id.as_str()]);

    // One session's records: exactly the store's, in its order.
    let (status, answer) = get(&server, &format!("/api/sessions/{context_id}/savings"));
    assert_eq!(status, 200, "{answer}");
    let expected: Vec<Value> = gateway_records
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    assert_eq!(answer["records"].as_array().unwrap(), &expected);
    assert_eq!(answer["totals"][0]["tokens_saved"].as_u64(), Some(saved));
    let ordinals: Vec<u64> = answer["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ordinal"].as_u64().unwrap())
        .collect();
    assert!(ordinals.windows(2).all(|w| w[0] < w[1]), "{ordinals:?}");

    // A session nothing was recorded for: an empty list, not an error.
    let (status, answer) = get(&server, "/api/sessions/nothing-here/savings");
    assert_eq!(
        (status, answer["records"].as_array().map(Vec::len)),
        (200, Some(0))
    );
}

#[test]
fn without_a_store_there_are_no_savings_to_show() {
    let server = Server::start(ConsoleOptions::default(), None);
    let (status, overview) = get(&server, "/api/savings");
    assert_eq!(status, 200);
    assert_eq!(overview["store"], false);
    assert_eq!(overview["totals"].as_array().map(Vec::len), Some(0));
    let (status, answer) = get(&server, "/api/sessions/gw-x/savings");
    assert_eq!(status, 404, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--db"),
        "{answer}"
    );
}
