//! Tenants never meet, and conversations of one tenant never mix.
//!
//! - A conversation recognised by its opening (or named by `x-ctxgc-session`) belongs to the
//!   credentials it came with: two API keys sending the same system prompt and first message
//!   get two store sessions, and a recall in one never answers from the other.
//! - Two conversations of one key that open the same way, interleaved, each keep a session
//!   of their own: after they part, every request is compiled incrementally, and a recall
//!   is answered from the conversation that asked, even where the other holds the same id.
//! - A mis-copied receipt id is answered with the nearest ids the conversation shortened; a
//!   recall result the client sends back is never compacted again.
//! - What the gateway added is in `x-ctxgc-overhead-ms` and in `/metrics`; the provider's
//!   cache counts reach the client unchanged.

mod common;

use common::*;
use ctxgc_core::store::Store;
use serde_json::{Value, json};

const SYSTEM: &str = "You are a coding agent.";

fn read_call(id: &str) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
        "function": {"name": "read_file", "arguments": "{\"path\": \"src/lib.rs\"}"}}]})
}

/// A file long enough to be folded once the agent has read it, marked with `owner`.
fn file_of(owner: &str) -> String {
    (0..400)
        .map(|i| format!("line {i}: const {owner}_ONLY_{i}: u32 = {i};\n"))
        .collect()
}

/// The opening every conversation here shares, then a read of `file` and a question.
fn with_read(file: &str, question: &str) -> Vec<Value> {
    vec![
        json!({"role": "system", "content": SYSTEM}),
        json!({"role": "user", "content": "Hi"}),
        read_call("c1"),
        json!({"role": "tool", "tool_call_id": "c1", "content": file}),
        // The agent has read the file whole; only then may it be folded.
        json!({"role": "assistant", "content": "I have read it."}),
        json!({"role": "user", "content": question}),
    ]
}

async fn post_as(
    base: &str,
    key: &str,
    session: Option<&str>,
    body: &Value,
) -> (Value, reqwest::header::HeaderMap) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .header("authorization", format!("Bearer {key}"))
        .json(body);
    if let Some(s) = session {
        request = request.header("x-ctxgc-session", s);
    }
    let r = request.send().await.unwrap();
    assert_eq!(r.status(), 200);
    let headers = r.headers().clone();
    (r.json().await.unwrap(), headers)
}

fn answer_text(answer: &Value) -> String {
    answer["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The gateway's store sessions (every one it made is named `gw-...`).
fn store_sessions(gateway: &TestGateway) -> Vec<String> {
    let sessions = gateway.gateway.sessions().expect("a store");
    let mut names: Vec<String> = sessions
        .with_store(|s| s.sessions())
        .unwrap()
        .into_iter()
        .map(|i| i.context_id)
        .filter(|c| c.starts_with("gw-"))
        .collect();
    names.sort();
    names
}

fn recall_gateway_options(upstream: &FakeUpstream) -> ctxgc_gateway::GatewayOptions {
    let mut options = options_for(&upstream.base);
    options.recall = true;
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_api_keys_with_the_same_opening_get_two_sessions_and_never_each_others_data() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let gateway = TestGateway::start(recall_gateway_options(&upstream), Some(store)).await;
    let hi = json!({"model": "fake-model", "messages": [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi"}]});
    for key in ["sk-alice-1", "sk-bob-2", "sk-carol-3", "sk-dave-4"] {
        post_as(&gateway.base, key, None, &hi).await;
    }
    assert_eq!(store_sessions(&gateway).len(), 4, "one session per API key");
    // A session name is scoped by the key too.
    for key in ["sk-alice-1", "sk-bob-2"] {
        post_as(&gateway.base, key, Some("shared-name"), &hi).await;
    }
    let named: Vec<String> = store_sessions(&gateway)
        .into_iter()
        .filter(|c| c.starts_with("gw-shared-name@"))
        .collect();
    assert_eq!(named.len(), 2, "{named:?}");
    // No credential reaches the store's names.
    assert!(
        store_sessions(&gateway)
            .iter()
            .all(|c| !c.contains("alice") && !c.contains("sk-"))
    );

    // Alice's long read is folded; its stub names a receipt.
    let alice = file_of("ALICE");
    let mut body = json!({"model": "fake-model", "messages": with_read(&alice, "Line 100?")});
    post_as(&gateway.base, "sk-alice-1", None, &body).await;
    let id = stub_id(&upstream.last().json());

    // Alice may recall it.
    body["model"] = json!(format!("recall:{id}"));
    let (answer, _) = post_as(&gateway.base, "sk-alice-1", None, &body).await;
    assert_eq!(answer_text(&answer), format!("recalled: {alice}"));

    // Bob opens the same way and asks for the same id: his conversation has no such item.
    let before = upstream.requests().len();
    let bob = json!({"model": format!("recall:{id}"), "messages": [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi"}]});
    let (answer, _) = post_as(&gateway.base, "sk-bob-2", None, &bob).await;
    assert_eq!(
        answer_text(&answer),
        format!(
            "recalled: no item with id \"{id}\" in this conversation (it has no shortened items)"
        )
    );
    for request in &upstream.requests()[before..] {
        let body = String::from_utf8_lossy(&request.body);
        assert!(!body.contains("ALICE_ONLY"), "Alice's data reached Bob");
    }
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_two_conversations_with_the_same_opening_keep_their_own_sessions() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let gateway = TestGateway::start(recall_gateway_options(&upstream), Some(store)).await;
    let files = [file_of("FIRST"), file_of("SECOND")];
    let mut histories: Vec<Vec<Value>> = files
        .iter()
        .map(|f| with_read(f, "What does line 100 say?"))
        .collect();
    // Interleaved: first, second, first, second, ... each growing by two messages.
    for round in 0..6 {
        for (n, history) in histories.iter_mut().enumerate() {
            if round > 0 {
                history.push(
                    json!({"role": "assistant", "content": format!("Answer {round} of {n}.")}),
                );
                history
                    .push(json!({"role": "user", "content": format!("Question {round} of {n}?")}));
            }
            let body = json!({"model": "fake-model", "messages": history});
            post_as(&gateway.base, "sk-one-key", None, &body).await;
            let sent = String::from_utf8_lossy(&upstream.last().body).into_owned();
            let other = ["SECOND_ONLY", "FIRST_ONLY"][n];
            assert!(
                !sent.contains(other),
                "round {round}: conversation {n} got the other's file"
            );
            assert!(
                !sent.contains(&format!("of {}.", 1 - n)),
                "round {round}: conversation {n} got the other's turns"
            );
        }
    }
    assert_eq!(store_sessions(&gateway).len(), 2, "one session each");
    let total = gateway.gateway.metrics().total();
    assert_eq!(total.requests, 12);
    // Each conversation's first request is compiled whole; every later one incrementally.
    assert_eq!(total.incremental, 10);

    // Both fold the read at the same position, so both stubs name the same id; each recall
    // is answered from the conversation that asks.
    let id = stub_id(&upstream.last().json());
    for (n, history) in histories.iter().enumerate().rev() {
        let body = json!({"model": format!("recall:{id}"), "messages": history});
        let (answer, _) = post_as(&gateway.base, "sk-one-key", None, &body).await;
        assert_eq!(answer_text(&answer), format!("recalled: {}", files[n]));
    }
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mis_copied_id_is_answered_with_the_nearest_shortened_ids() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let gateway = TestGateway::start(recall_gateway_options(&upstream), Some(store)).await;
    let file = file_of("MINE");
    let mut body = json!({"model": "fake-model", "messages": with_read(&file, "Line 100?")});
    post_as(&gateway.base, "sk-k", None, &body).await;
    let id = stub_id(&upstream.last().json());
    let wrong = format!("{id}9");
    body["model"] = json!(format!("recall:{wrong}"));
    let (answer, _) = post_as(&gateway.base, "sk-k", None, &body).await;
    assert_eq!(
        answer_text(&answer),
        format!(
            "recalled: no item with id \"{wrong}\" in this conversation; the shortened items nearest to it are \"{id}\""
        )
    );
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recall_result_sent_back_is_never_compacted_again() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let gateway = TestGateway::start(recall_gateway_options(&upstream), Some(store)).await;
    let file = file_of("RECALLED");
    let recall = |call: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": call, "type": "function",
            "function": {"name": "ctxgc_recall", "arguments": "{\"id\": \"m3\"}"}}]})
    };
    // A client that answered the recall tool itself, twice with the same result (which
    // would be a duplicate, and then a long read to fold, for any other tool).
    let messages = vec![
        json!({"role": "system", "content": SYSTEM}),
        json!({"role": "user", "content": "Hi"}),
        recall("r1"),
        json!({"role": "tool", "tool_call_id": "r1", "content": file}),
        json!({"role": "assistant", "content": "I have read it."}),
        recall("r2"),
        json!({"role": "tool", "tool_call_id": "r2", "content": file}),
        json!({"role": "assistant", "content": "Read again."}),
        json!({"role": "user", "content": "Go on."}),
    ];
    post_as(
        &gateway.base,
        "sk-k",
        None,
        &json!({"model": "fake-model", "messages": messages}),
    )
    .await;
    let sent = upstream.last().json();
    let results: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(results, [file.as_str(), file.as_str()]);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overhead_is_reported_and_provider_cache_counts_pass_unchanged() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let gateway = TestGateway::start(options_for(&upstream.base), Some(store)).await;
    let http = reqwest::Client::new();
    let file = file_of("CACHE");
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"model": "fake-model", "messages": with_read(&file, "Line 1?")}),
        ),
        (
            "/v1/messages",
            json!({"model": "fake-model", "max_tokens": 9, "system": SYSTEM,
                "messages": [{"role": "user", "content": "Hi"}]}),
        ),
    ] {
        for stream in [false, true] {
            let mut body = body.clone();
            body["stream"] = json!(stream);
            let r = http
                .post(format!("{}{path}", gateway.base))
                .header("x-api-key", "sk-cache")
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let overhead: f64 = r
                .headers()
                .get("x-ctxgc-overhead-ms")
                .expect("the overhead header")
                .to_str()
                .unwrap()
                .parse()
                .expect("milliseconds");
            assert!(overhead >= 0.0);
            let text = r.text().await.unwrap();
            // The fake provider derives its counts from the body it received.
            let received = upstream.last().body.len() as u64 / 4;
            let expect = |key: &str, value: u64| {
                let needle = format!("\"{key}\":{value}");
                assert!(
                    text.contains(&needle),
                    "{path} stream={stream}: {needle} not in {text}"
                );
            };
            if path == "/v1/messages" {
                expect("cache_read_input_tokens", received / 2);
                expect("cache_creation_input_tokens", 11);
            } else {
                expect("cached_tokens", received / 2);
            }
        }
    }
    let metrics = reqwest::get(format!("{}/metrics", gateway.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("# TYPE ctxgc_gateway_overhead_seconds histogram"));
    assert!(metrics.contains("ctxgc_gateway_overhead_seconds_count 4"));
    assert!(metrics.contains("ctxgc_gateway_overhead_seconds_bucket{le=\"+Inf\"} 4"));
    gateway.stop().await;
}
