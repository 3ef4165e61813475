//! Fuzz-style properties for the proxy's JSON-RPC request parsing: real MCP requests
//! (initialize, tools/list, tools/call, expand, notifications), mutated (truncated, bytes
//! flipped, invalid UTF-8, duplicate keys, wrong types, nesting), arbitrary bytes, and 10,000
//! and 100,000 levels of nesting, huge strings and numbers.
//!
//! Two doors: the stdio gate's [`judge`] (every line an agent sends over stdio), and POSTs to
//! `/mcp` on a real HTTP proxy in front of the real test server. The properties: the gate
//! forwards a message or answers with a JSON-RPC error (-32700 / -32600) that says why; the
//! HTTP side answers every body with a 2xx or a 4xx, never a 5xx, and a real agent is still
//! served afterwards.
//!
//! `CTXGC_FUZZ_CASES` sets the cases per property (default 32 gate cases, a quarter of that
//! over HTTP).

mod common;
#[path = "../../ctxgc-core/tests/fuzz/mutate.rs"]
mod mutate;

use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use ctxgc_proxy::shaping::PassThrough;
use ctxgc_proxy::stdio_gate::{Verdict, judge};
use mutate::{cases, mutated, mutations, nested_arrays, nested_objects};
use proptest::prelude::*;
use serde_json::{Value, json};

const TOKEN: &str = "fuzz-token-5c21a9";

/// Real requests an agent sends.
fn seeds() -> Vec<String> {
    vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": true}},
            "clientInfo": {"name": "fuzz", "version": "1"}}})
        .to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"text": "hello", "nested": {"list": [1, 2.5, null, true]}}}})
        .to_string(),
        json!({"jsonrpc": "2.0", "id": "x-4", "method": "tools/call", "params": {
            "name": "expand", "arguments": {"ref": "search_flights#00ff", "fields": ["flights[].price"]}}})
        .to_string(),
        json!({"jsonrpc": "2.0", "id": 5, "result": {}}).to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3, "reason": "x"}})
            .to_string(),
    ]
}

fn gate(line: &[u8]) {
    match judge(line) {
        Verdict::Forward | Verdict::Skip => {}
        Verdict::Answer(answer) => {
            let value: Value = serde_json::from_str(&answer)
                .unwrap_or_else(|e| panic!("the gate's answer is not JSON ({e}): {answer}"));
            let code = value["error"]["code"].as_i64();
            assert!(matches!(code, Some(-32700 | -32600)), "{answer}");
            let message = value["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.len() > 12,
                "an answer that does not say why: {answer}"
            );
        }
    }
}

/// One HTTP proxy in front of the real test server, with an initialized MCP session.
struct Env {
    runtime: tokio::runtime::Runtime,
    proxy: HttpProxy,
    session: String,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let proxy = runtime.block_on(async {
            let servers = set_of(
                vec![stdio_server("s", &["--tools", "echo,search_flights"])],
                &[],
            );
            let mut rules = security(TOKEN);
            rules.max_body_bytes = 8 << 20;
            HttpProxy::start(
                core(&servers, Arc::new(PassThrough), Duration::from_secs(20)),
                rules,
            )
            .await
        });
        let mut env = Env {
            runtime,
            proxy,
            session: String::new(),
        };
        let (status, _, session) = post_raw(&env, seeds()[0].clone().into_bytes(), None);
        assert_eq!(status, 200);
        env.session = session.expect("an MCP session id");
        let (status, _, _) = post_raw(&env, seeds()[1].clone().into_bytes(), Some(&env.session));
        assert!(status < 300, "notifications/initialized: {status}");
        env
    })
}

/// Posts a body to `/mcp`; returns the status, the body and the session id it gave.
fn post_raw(env: &Env, body: Vec<u8>, session: Option<&str>) -> (u16, String, Option<String>) {
    env.runtime.block_on(async {
        let mut request = reqwest::Client::new()
            .post(format!("{}/mcp", env.proxy.base))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .bearer_auth(TOKEN)
            .body(body);
        if let Some(s) = session {
            request = request
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-06-18");
        }
        let response = request.send().await.expect("the proxy answers");
        let status = response.status().as_u16();
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // A stream may stay open: read what comes within a bound, not forever.
        let text = tokio::time::timeout(Duration::from_secs(10), response.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        (status, text, session)
    })
}

fn post(body: Vec<u8>, in_session: bool) -> (u16, String) {
    let env = env();
    let (status, text, _) = post_raw(env, body, in_session.then_some(env.session.as_str()));
    (status, text)
}

/// A real agent still lists and calls tools.
fn assert_healthy() {
    let env = env();
    env.runtime.block_on(async {
        let (agent, _) = env.proxy.agent(TOKEN).await;
        let (text, is_error) = call_text(&agent, "echo", json!({"text": "still serving"})).await;
        assert_eq!((text.as_str(), is_error), ("still serving", false));
        let _ = agent.cancel().await;
    });
}

fn assert_answered(status: u16, text: &str) {
    assert!(
        status < 500,
        "the proxy answered a request with {status}: {text}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(32),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_stdio_gate_judges_mutated_requests(seed in 0usize..16, ms in mutations()) {
        let seeds = seeds();
        gate(&mutated(&seeds[seed % seeds.len()], &ms));
    }

    #[test]
    fn the_stdio_gate_judges_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        gate(&bytes);
        let mut line = b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ".to_vec();
        line.extend_from_slice(&bytes);
        gate(&line);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(32).div_ceil(4),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn http_answers_mutated_requests(seed in 0usize..16, ms in mutations(), in_session in any::<bool>()) {
        let seeds = seeds();
        let (status, text) = post(mutated(&seeds[seed % seeds.len()], &ms), in_session);
        assert_answered(status, &text);
        assert_healthy();
    }
}

#[test]
fn deep_nesting_huge_strings_and_numbers() {
    let mut bodies = Vec::new();
    for depth in [10_000, 100_000] {
        let arrays = nested_arrays(depth, "1");
        let objects = nested_objects(depth, "1");
        bodies.push(arrays.clone());
        bodies.push(format!(
            r#"{{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {{"name": "echo", "arguments": {{"text": {objects}}}}}}}"#
        ));
        bodies.push(format!(
            r#"{{"jsonrpc": "2.0", "id": {arrays}, "method": "tools/list"}}"#
        ));
        bodies.push(format!(
            r#"{{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {{"name": "expand", "arguments": {}}}}}"#,
            Value::String(objects.clone())
        ));
    }
    let big = "z".repeat(4 << 20);
    let digits = "3".repeat(100_000);
    bodies.push(format!(
        r#"{{"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {{"name": "echo", "arguments": {{"text": "{big}"}}}}}}"#
    ));
    bodies.push(format!(
        r#"{{"jsonrpc": "2.0", "id": {digits}, "method": "tools/call", "params": {{"name": "echo", "arguments": {{"text": "x"}}}}}}"#
    ));
    bodies.push(r#"{"jsonrpc": "2.0", "id": 1e99999, "method": "ping"}"#.to_owned());
    for (i, body) in bodies.into_iter().enumerate() {
        gate(body.as_bytes());
        for in_session in [false, true] {
            let (status, text) = post(body.clone().into_bytes(), in_session);
            eprintln!("body {i} (session {in_session}): {status}");
            assert_answered(status, &text.chars().take(400).collect::<String>());
        }
    }
    assert_healthy();
}
