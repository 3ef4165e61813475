//! The HTTP side against hostile requests, on a real listener on loopback: chunked bodies
//! over the limit, bodies that are not JSON, a Host with another port, foreign Origins, and
//! blank tokens.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ctxgc_proxy::shaping::PassThrough;
use ctxgc_proxy::{Downstream, Mode, ProxyError, ProxyOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TIMEOUT: Duration = Duration::from_secs(20);
const TOKEN: &str = "agent-token-1e8d44";

fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string()
}

async fn echo_proxy(max_body_bytes: usize, origins: &[&str]) -> HttpProxy {
    let servers = set_of(vec![stdio_server("s", &["--tools", "echo"])], &[]);
    let mut rules = security(TOKEN);
    rules.max_body_bytes = max_body_bytes;
    rules.allowed_origins = origins.iter().map(|o| (*o).to_owned()).collect();
    HttpProxy::start(core(&servers, Arc::new(PassThrough), TIMEOUT), rules).await
}

/// A POST to `/mcp` with the given extra headers; returns status and body.
async fn post(
    proxy: &HttpProxy,
    headers: &[(&str, &str)],
    content_type: &str,
    body: String,
) -> (u16, String) {
    let client = reqwest::Client::new();
    let mut request = client
        .post(format!("{}/mcp", proxy.base))
        .header("content-type", content_type)
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(TOKEN)
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// Sends a chunked POST by hand (no Content-Length), `chunks` chunks of `chunk` bytes, and
/// returns the status line.
async fn chunked_post(proxy: &HttpProxy, chunk: usize, chunks: usize) -> String {
    let address = proxy.base.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let piece = "x".repeat(chunk);
    for _ in 0..chunks {
        // The server may answer and close before the last chunk: that is the point.
        if stream
            .write_all(format!("{chunk:x}\r\n{piece}\r\n").as_bytes())
            .await
            .is_err()
        {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    let text = String::from_utf8_lossy(&response).into_owned();
    text.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_gets_413() {
    let proxy = echo_proxy(16 * 1024, &[]).await;
    let status = chunked_post(&proxy, 4096, 8).await;
    assert!(status.starts_with("HTTP/1.1 413"), "{status}");
    // Under the limit, the same route answers (here: 400, the body is not JSON).
    let status = chunked_post(&proxy, 1024, 2).await;
    assert!(status.starts_with("HTTP/1.1 400"), "{status}");
}

#[tokio::test]
async fn a_body_that_is_not_json_gets_400_with_a_jsonrpc_parse_error() {
    let proxy = echo_proxy(64 * 1024, &[]).await;
    for content_type in ["application/json", "text/plain"] {
        let (status, body) = post(&proxy, &[], content_type, "{not json".into()).await;
        assert_eq!(status, 400, "{content_type}: {body}");
        let answer: Value = serde_json::from_str(&body).expect("a JSON-RPC answer");
        assert_eq!(answer["jsonrpc"], "2.0");
        assert_eq!(answer["id"], Value::Null);
        assert_eq!(answer["error"]["code"], -32700, "{body}");
    }
    // JSON still goes through.
    let (status, _) = post(&proxy, &[], "application/json", initialize_body()).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn host_must_name_the_proxys_own_port() {
    let proxy = echo_proxy(64 * 1024, &[]).await;
    let port: u16 = proxy.base.rsplit(':').next().unwrap().parse().unwrap();
    let own = format!("127.0.0.1:{port}");
    let other = format!("127.0.0.1:{}", port.wrapping_add(1).max(1));
    let localhost_other = format!("localhost:{}", port.wrapping_add(1).max(1));
    let localhost_own = format!("localhost:{port}");
    for (host, expected) in [
        (own.as_str(), 200),
        (localhost_own.as_str(), 200),
        (other.as_str(), 403),
        (localhost_other.as_str(), 403),
        ("localhost", 403),
        ("evil.example", 403),
    ] {
        let (status, body) = post(
            &proxy,
            &[("host", host)],
            "application/json",
            initialize_body(),
        )
        .await;
        assert_eq!(status, expected, "Host {host}: {body}");
    }
}

#[tokio::test]
async fn origin_must_be_the_proxys_own_or_allowed() {
    let proxy = echo_proxy(64 * 1024, &["https://console.example"]).await;
    let port: u16 = proxy.base.rsplit(':').next().unwrap().parse().unwrap();
    let own = format!("http://127.0.0.1:{port}");
    let own_localhost = format!("http://localhost:{port}");
    let other_port = format!("http://localhost:{}", port.wrapping_add(1).max(1));
    for (origin, expected) in [
        (own.as_str(), 200),
        (own_localhost.as_str(), 200),
        ("https://console.example", 200),
        ("https://evil.example", 403),
        ("null", 403),
        (other_port.as_str(), 403),
    ] {
        let (status, body) = post(
            &proxy,
            &[("origin", origin)],
            "application/json",
            initialize_body(),
        )
        .await;
        assert_eq!(status, expected, "Origin {origin}: {body}");
    }
    // Without an Origin (not a browser), the token alone decides.
    let (status, _) = post(&proxy, &[], "application/json", initialize_body()).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_blank_token_is_refused_at_start() {
    for token in ["", "   ", "\t\n", " padded-token-123 "] {
        let mut rules = security(token);
        rules.max_body_bytes = 1024;
        let options = ProxyOptions {
            servers: set_of(vec![stdio_server("s", &["--tools", "echo"])], &[]),
            mode: Mode::PassThrough,
            downstream: Downstream::Http {
                bind: "127.0.0.1".parse().unwrap(),
                port: 0,
                security: rules,
            },
            timeout: TIMEOUT,
            quiet: true,
            db: None,
        };
        match ctxgc_proxy::run(options).await {
            Err(ProxyError::Usage(message)) => assert!(message.contains("token"), "{message}"),
            other => panic!("token {token:?}: expected a usage error, got {other:?}"),
        }
    }
}
