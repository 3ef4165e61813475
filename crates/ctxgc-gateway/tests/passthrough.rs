//! Forwarding over real HTTP on loopback: streams pass chunk by chunk, a client that leaves
//! cancels the upstream, faults and other paths come back as they came, bad bodies get a
//! clear 400, and the proxy's checks (Host, token, body size) guard the door.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_is_passed_on_before_it_ends_and_a_client_that_leaves_cancels_it() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let gateway = TestGateway::start(options_for(&upstream.base), Some(store)).await;
    let body = json!({"model": "slow-stream", "stream": true,
        "messages": [{"role": "user", "content": "go"}]});
    let mut response = client()
        .post(format!("{}/v1/chat/completions", gateway.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    // The upstream never ends this stream: the first event can only arrive if the gateway
    // passes chunks on as they come.
    let first = tokio::time::timeout(Duration::from_secs(30), response.chunk())
        .await
        .expect("the first event arrives while the stream is still open")
        .unwrap()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&first).starts_with("data: {"),
        "{first:?}"
    );
    assert!(!upstream.state.stream_cancelled.load(Ordering::SeqCst));
    drop(response);
    // The gateway drops its upstream request when the client goes away.
    let mut waited = 0;
    while !upstream.state.stream_cancelled.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 1;
        assert!(waited < 1500, "the upstream stream was never cancelled");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_and_other_paths_pass_through_as_they_came() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let mut options = options_for(&upstream.base);
    options.timeout = Duration::from_secs(1);
    let gateway = TestGateway::start(options, Some(store)).await;
    let http = client();

    // 429 with its retry-after and body.
    let r = http
        .post(format!("{}/v1/chat/completions", gateway.base))
        .header("authorization", "Bearer sk-x")
        .json(&json!({"model": "rate-limited", "messages": [{"role": "user", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "17");
    assert_eq!(r.headers()["x-request-id"], "req_fake_429");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");

    // An upstream that does not answer in time: 504, in the API's error shape.
    let r = http
        .post(format!("{}/v1/messages", gateway.base))
        .json(&json!({"model": "hang", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 504);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], "error");

    // Any other path: method, path, query and body bytes exactly as sent.
    let raw = b"{\"input\":  \"keep   my spacing\", \"model\":\"e\"}".to_vec();
    let r = http
        .post(format!(
            "{}/v1/embeddings?api-version=2024-10-01",
            gateway.base
        ))
        .header("content-type", "application/json")
        .body(raw.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let last = upstream.last();
    assert_eq!(last.path, "/v1/embeddings");
    assert_eq!(last.query.as_deref(), Some("api-version=2024-10-01"));
    assert_eq!(last.body, raw);

    // An unreachable upstream: 502 that says so.
    let dead = TestGateway::start(options_for("http://127.0.0.1:9"), None).await;
    let r = http
        .get(format!("{}/v1/models", dead.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
    let text = r.text().await.unwrap();
    assert!(text.contains("could not be reached"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_get_a_clear_error_naming_the_field() {
    let upstream = FakeUpstream::start().await;
    let (_db, store) = sqlite_store();
    let gateway = TestGateway::start(options_for(&upstream.base), Some(store)).await;
    let http = client();
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "/v1/chat/completions",
            b"{\"messages\": [".to_vec(),
            "not valid JSON",
        ),
        (
            "/v1/chat/completions",
            b"{\"messages\": 3}".to_vec(),
            "`messages` must be a JSON array",
        ),
        (
            "/v1/messages",
            b"{\"messages\": [\"hi\"]}".to_vec(),
            "`messages[0]` must be a JSON object",
        ),
        (
            "/v1/responses",
            b"{\"input\": [{\"role\": \"user\"}], \"stream\": \"yes\"}".to_vec(),
            "`stream` must be true or false",
        ),
        (
            "/v1/chat/completions",
            b"{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\"}]}".to_vec(),
            "not valid UTF-8",
        ),
    ];
    for (path, body, expected) in cases {
        let r = http
            .post(format!("{}{path}", gateway.base))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{path} {expected}");
        let text = r.text().await.unwrap();
        assert!(text.contains(expected), "{path}: {text}");
    }
    // A message the front-end refuses names its index and field.
    let r = http
        .post(format!("{}/v1/chat/completions", gateway.base))
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "a"}, {"role": "wizard", "content": "b"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let text = r.text().await.unwrap();
    assert!(text.contains("wizard"), "{text}");
    // None of these reached the provider.
    assert!(upstream.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_token_and_body_limits_are_the_proxys() {
    let upstream = FakeUpstream::start().await;
    let mut options = options_for(&upstream.base);
    options.token = Some("gw-token-5e1d".into());
    options.max_body_bytes = 2048;
    let gateway = TestGateway::start(options, None).await;
    let http = client();
    let url = format!("{}/v1/models", gateway.base);

    let r = http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .get(&url)
        .header("x-ctxgc-token", "wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .get(&url)
        .header("x-ctxgc-token", "gw-token-5e1d")
        .header("authorization", "Bearer sk-provider")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The provider sees its own credential and never the gateway's token.
    let last = upstream.last();
    assert_eq!(last.header("authorization"), Some("Bearer sk-provider"));
    assert_eq!(last.header("x-ctxgc-token"), None);

    let r = http
        .get(&url)
        .header("host", "evil.example")
        .header("x-ctxgc-token", "gw-token-5e1d")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = http
        .get(&url)
        .header("origin", "https://evil.example")
        .header("x-ctxgc-token", "gw-token-5e1d")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = http
        .post(format!("{}/v1/chat/completions", gateway.base))
        .header("x-ctxgc-token", "gw-token-5e1d")
        .body(vec![b' '; 4096])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(upstream.requests().len(), 1);
}
