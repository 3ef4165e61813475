//! Upstreams that misbehave at the socket level, on loopback: one that never answers, one
//! that closes the connection before answering, one that dies in the middle of its answer
//! (plain and streamed), one that answers with bytes that are not HTTP, one that dribbles a
//! good answer byte by byte, and one that stalls in the middle of its answer for longer than
//! the gateway's timeout. The client always gets either the upstream's exact answer or a clear
//! error (a JSON error naming the fault, or a broken body it cannot mistake for a whole one),
//! and after each fault the gateway serves the next request as usual.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ANSWER: &str = r#"{"id":"chatcmpl-9","object":"chat.completion","created":1,"model":"ok","choices":[{"index":0,"message":{"role":"assistant","content":"a whole answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}"#;

/// Reads one request (head and Content-Length body); returns the body.
async fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(buf[head_end..head_end + length].to_vec())
}

fn head(content_type: &str, length: usize) -> String {
    format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {length}\r\n\r\n")
}

/// Behaves as the request's `model` says.
async fn misbehave(mut stream: TcpStream) {
    let Some(body) = read_request(&mut stream).await else {
        return;
    };
    let model = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["model"].as_str().map(str::to_owned))
        .unwrap_or_default();
    match model.as_str() {
        "hang" => tokio::time::sleep(Duration::from_secs(3600)).await,
        "close" => {}
        "garbage" => {
            let _ = stream
                .write_all(b"SSH-2.0-OpenSSH_9.6\r\n\x00\x01\x02 not http at all\r\n\r\n")
                .await;
        }
        "die-mid-answer" => {
            let _ = stream
                .write_all(
                    format!(
                        "{}{}",
                        head("application/json", ANSWER.len()),
                        &ANSWER[..40]
                    )
                    .as_bytes(),
                )
                .await;
        }
        "die-mid-stream" => {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n\
                      1c\r\ndata: {\"choices\":[{\"delta\"\r\n",
                )
                .await;
        }
        "dribble" => {
            let whole = format!("{}{ANSWER}", head("application/json", ANSWER.len()));
            for byte in whole.bytes() {
                if stream.write_all(&[byte]).await.is_err() {
                    return;
                }
                let _ = stream.flush().await;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        "stall" => {
            let _ = stream
                .write_all(
                    format!(
                        "{}{}",
                        head("application/json", ANSWER.len()),
                        &ANSWER[..40]
                    )
                    .as_bytes(),
                )
                .await;
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        _ => {
            let _ = stream
                .write_all(format!("{}{ANSWER}", head("application/json", ANSWER.len())).as_bytes())
                .await;
        }
    }
    let _ = stream.shutdown().await;
}

async fn hostile_upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(misbehave(stream));
        }
    });
    format!("http://{addr}")
}

fn request(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": format!("Say something ({model}).")}
    ]})
}

/// What the client got: status, and the body or why it could not be read; `Err` when the
/// connection closed before a whole response head arrived.
async fn try_send(
    base: &str,
    model: &str,
    stream: bool,
) -> Result<(u16, Result<String, String>), String> {
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .header("authorization", "Bearer sk-hostile-test")
        .json(&request(model, stream))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = match response.bytes().await {
        Ok(b) => String::from_utf8(b.to_vec()).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    Ok((status, body))
}

/// As `try_send`, for requests the gateway must answer with a whole response head.
async fn send(base: &str, model: &str, stream: bool) -> (u16, Result<String, String>) {
    try_send(base, model, stream)
        .await
        .unwrap_or_else(|e| panic!("{model}: the gateway answers: {e}"))
}

async fn assert_healthy(base: &str) {
    let (status, body) = send(base, "ok", false).await;
    assert_eq!((status, body.as_deref()), (200, Ok(ANSWER)));
}

fn error_message(body: &Result<String, String>) -> String {
    let text = body.as_ref().expect("an error body");
    let value: Value = serde_json::from_str(text).expect("a JSON error");
    value["error"]["message"]
        .as_str()
        .expect("an error message")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_upstream_fault_is_a_clear_error_and_the_gateway_stays_up() {
    let upstream = hostile_upstream().await;
    for with_store in [false, true] {
        let (_db, store) = sqlite_store();
        let mut options = options_for(&upstream);
        options.timeout = Duration::from_secs(1);
        let gateway = TestGateway::start(options, with_store.then_some(store)).await;
        let base = gateway.base.clone();
        assert_healthy(&base).await;

        let (status, body) = send(&base, "hang", false).await;
        assert_eq!(status, 504);
        assert!(error_message(&body).contains("did not answer"), "{body:?}");
        assert_healthy(&base).await;

        for model in ["close", "garbage"] {
            let (status, body) = send(&base, model, false).await;
            assert_eq!(status, 502, "{model}: {body:?}");
            let message = error_message(&body);
            assert!(
                message.starts_with("ctxgc gateway: the upstream"),
                "{model}: {message}"
            );
            assert_healthy(&base).await;
        }

        // Broken off mid-answer: the client cannot take it for a whole answer. The gateway
        // passes the answer on as it comes, so the break can reach the client before the head
        // is flushed (the connection closes with no response), after it (the body breaks), or,
        // for the stall, as the gateway's own timeout error.
        for (model, stream) in [
            ("die-mid-answer", false),
            ("die-mid-stream", true),
            ("stall", false),
        ] {
            match try_send(&base, model, stream).await {
                Err(closed_before_head) => assert!(!closed_before_head.is_empty(), "{model}"),
                Ok((_, Err(broken_body))) => assert!(!broken_body.is_empty(), "{model}"),
                Ok((status, Ok(text))) => {
                    assert_ne!(
                        status, 200,
                        "{model}: a broken answer passed as whole: {text}"
                    );
                    assert!(!error_message(&Ok(text)).is_empty());
                }
            }
            assert_healthy(&base).await;
        }

        // Slow but steady: passed on whole, byte for byte.
        let (status, body) = send(&base, "dribble", false).await;
        assert_eq!((status, body.as_deref()), (200, Ok(ANSWER)));
        assert_healthy(&base).await;

        let metrics = reqwest::get(format!("{base}/metrics")).await.unwrap();
        assert_eq!(metrics.status(), 200);
        gateway.stop().await;
    }
}
