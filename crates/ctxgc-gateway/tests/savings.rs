//! Savings records: a conversation (the repository's support example, resent whole at every
//! turn as agents do) through the gateway in front of the fake provider, with a SQLite store.
//! One record per answered request, in the conversation's store session, with the exact
//! tokens of the body the client sent and of the body that went upstream, the usage the
//! provider reported, and the number of messages as the ordinal; a request the provider
//! refused records nothing.

mod common;

use common::*;
use ctxgc_core::Options;
use ctxgc_core::store::Store;
use ctxgc_core::store::savings::{ProviderUsage, SavingsSource};
use ctxgc_gateway::savings::body_tokens;
use serde_json::value::RawValue;

/// The requests an agent sends for the example: the history up to each assistant turn.
fn requests() -> Vec<(String, usize)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/support-session.json"
    );
    let text = std::fs::read_to_string(path).expect("the example reads");
    let messages: Vec<Box<RawValue>> = serde_json::from_str(&text).expect("a message list");
    let mut out = Vec::new();
    for (k, m) in messages.iter().enumerate() {
        if k > 1 && m.get().contains("\"role\": \"assistant\"") {
            let list: Vec<&str> = messages[..k].iter().map(|m| m.get()).collect();
            out.push((
                format!(
                    "{{\"model\":\"fake-model\",\"messages\":[{}]}}",
                    list.join(",")
                ),
                k,
            ));
        }
    }
    out
}

async fn post(base: &str, body: &str) -> u16 {
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .header("content-type", "application/json")
        .header("authorization", "Bearer sk-savings-test")
        .header("x-ctxgc-session", "support")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    r.bytes().await.unwrap();
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answered_request_leaves_one_savings_record_in_the_store() {
    let requests = requests();
    assert!(requests.len() >= 3, "{} requests", requests.len());
    let upstream = FakeUpstream::start().await;
    let (db, store) = sqlite_store();
    let gateway = TestGateway::start(options_for(&upstream.base), Some(store)).await;

    for (body, _) in &requests {
        assert_eq!(post(&gateway.base, body).await, 200);
    }
    // Refused upstream: no record.
    let refused = requests[0].0.replace("fake-model", "server-error");
    assert_eq!(post(&gateway.base, &refused).await, 500);
    gateway.gateway.savings_settled().await;

    let sent = upstream.requests();
    assert_eq!(sent.len(), requests.len() + 1);
    let mut reader = db.open().unwrap();
    let records = reader.savings(None).unwrap();
    assert_eq!(records.len(), requests.len(), "{records:?}");
    let tokenizer = Options::default().tokenizer;
    let mut saved = 0;
    for ((record, (body, messages)), upstream_request) in records.iter().zip(&requests).zip(&sent) {
        assert_eq!(record.source, SavingsSource::Gateway);
        // The session named by the client, scoped by its credentials' keyed hash.
        assert!(
            record.context_id.starts_with("gw-support@"),
            "{}",
            record.context_id
        );
        assert_eq!(record.tool, "/v1/chat/completions");
        assert_eq!(record.ordinal, *messages as u64);
        let chat = Some(ctxgc_core::Format::OpenaiChat);
        assert_eq!(
            record.tokens_before,
            body_tokens(tokenizer, chat, body.as_bytes())
        );
        let out = String::from_utf8(upstream_request.body.clone()).unwrap();
        assert_eq!(
            record.tokens_after,
            body_tokens(tokenizer, chat, out.as_bytes())
        );
        // Counted message by message: within a few tokens per message of the whole text.
        let near = |counted: u64, text: &str| {
            counted.abs_diff(tokenizer.count(text) as u64) <= 3 * (*messages as u64 + 4)
        };
        assert!(near(record.tokens_before, body), "{record:?}");
        assert!(near(record.tokens_after, &out), "{record:?}");
        // The fake bills a quarter of the body's bytes, half of them read from its cache.
        let input = out.len() as u64 / 4;
        assert_eq!(
            record.usage,
            Some(ProviderUsage {
                input_tokens: input,
                cache_read_tokens: input / 2,
                cache_write_tokens: 0,
                output_tokens: 7,
            })
        );
        saved += record.tokens_saved();
    }
    assert!(saved > 0, "compiling the support session saves tokens");
    // One store session holds them all, read back in order.
    let session = reader.savings(Some(&records[0].context_id)).unwrap();
    assert_eq!(session, records);
}
