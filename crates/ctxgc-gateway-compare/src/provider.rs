//! The fake provider: answers as soon as it has read the request, in the real shape of each
//! API, so that everything a measurement sees beyond the direct call's time is the gateway's.
//!
//! It reads the whole body (a real provider does, and a gateway that streams its upload is
//! then timed fairly) but does not parse it: it only looks for a top-level `"stream": true`,
//! so its own cost stays small and the same for every gateway. Usage fields are filled from
//! the body's length (about 4 bytes a token) so gateways that read usage do that work; their
//! values mean nothing else.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use clap::Args;
use serde_json::json;

/// Arguments of `gateway-compare fake-provider`.
#[derive(Debug, Args)]
pub struct ProviderArgs {
    /// Port on 127.0.0.1 (0 picks a free one; the address is printed on stdout).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Pause between two events of a streamed answer, in milliseconds (0: none, the whole
    /// answer goes at once, event by event).
    #[arg(long, default_value_t = 0)]
    pub chunk_gap_ms: u64,
}

/// The words of every answer, one streamed delta each.
const ANSWER: [&str; 8] = [
    "The cheapest",
    " flight with",
    " seats left",
    " is HAT000",
    " at 300",
    " dollars;",
    " shall I",
    " book it?",
];

/// Serves until the process is stopped.
pub async fn run(args: ProviderArgs) -> anyhow::Result<()> {
    let gap = Duration::from_millis(args.chunk_gap_ms);
    let app = Router::new()
        .route("/v1/chat/completions", post(openai))
        .route("/chat/completions", post(openai))
        .route("/v1/messages", post(anthropic))
        .fallback(not_found)
        // Conversations of 100k tokens and more are bodies of several hundred kilobytes.
        .layer(DefaultBodyLimit::disable())
        .with_state(gap);
    let listener =
        tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, args.port)))
            .await
            .context("binding the fake provider")?;
    println!("http://{}", listener.local_addr()?);
    // Each event is a small write: with Nagle's algorithm on, every one after the first would
    // wait for the peer's delayed ACK, and the harness would measure that instead.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await?;
    Ok(())
}

async fn not_found(uri: Uri) -> Response {
    let body = json!({"error": {"message": format!("fake provider: no route for {}", uri.path()), "type": "not_found"}});
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

/// Whether the body asks for a stream: a `"stream"` key followed by `true`. A key of that
/// name inside a message would be escaped (`\"stream\"`), so only a real key matches.
fn wants_stream(body: &[u8]) -> bool {
    let mut rest = body;
    while let Some(at) = memchr::memmem::find(rest, b"\"stream\"") {
        let after = &rest[at + 8..];
        let value = after
            .iter()
            .position(|b| !matches!(b, b' ' | b'\n' | b'\r' | b'\t' | b':'));
        if let Some(start) = value
            && after[..start].contains(&b':')
        {
            return after[start..].starts_with(b"true");
        }
        rest = after;
    }
    false
}

/// Usage figures derived from the body's length: prompt tokens about bytes / 4, half of them
/// as if read from the provider's prompt cache.
fn usage_of(body: &[u8]) -> (usize, usize) {
    let prompt = body.len() / 4;
    (prompt, prompt / 2)
}

fn json_response(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// An SSE response whose events are separate body frames, `gap` apart.
fn sse_response(events: Vec<String>, gap: Duration) -> Response {
    let stream = futures_util::stream::unfold(
        (events.into_iter(), true),
        move |(mut it, first)| async move {
            let next = it.next()?;
            if !first && !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            Some((Ok::<Bytes, Infallible>(Bytes::from(next)), (it, false)))
        },
    );
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

async fn openai(State(gap): State<Duration>, body: Bytes) -> Response {
    let (prompt, cached) = usage_of(&body);
    let completion = ANSWER.len() * 2;
    let usage = json!({"prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion, "prompt_tokens_details": {"cached_tokens": cached}});
    let (id, created, model) = ("chatcmpl-fake", 1_700_000_000u64, "fake-gpt");
    if !wants_stream(&body) {
        let answer = json!({"id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER.concat()},
                "finish_reason": "stop"}],
            "usage": usage});
        return json_response(answer.to_string());
    }
    let chunk = |choices: serde_json::Value| {
        let c = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": choices});
        format!("data: {c}\n\n")
    };
    let mut events = vec![chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
    )];
    for word in ANSWER {
        events.push(chunk(
            json!([{"index": 0, "delta": {"content": word}, "finish_reason": null}]),
        ));
    }
    events.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
    ));
    let last = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
        "choices": [], "usage": usage});
    events.push(format!("data: {last}\n\n"));
    events.push("data: [DONE]\n\n".to_string());
    sse_response(events, gap)
}

async fn anthropic(State(gap): State<Duration>, body: Bytes) -> Response {
    let (prompt, cached) = usage_of(&body);
    let output = ANSWER.len() * 2;
    let (id, model) = ("msg_fake", "fake-claude");
    if !wants_stream(&body) {
        let answer = json!({"id": id, "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": ANSWER.concat()}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": prompt - cached, "output_tokens": output,
                "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}});
        return json_response(answer.to_string());
    }
    let event = |name: &str, data: serde_json::Value| format!("event: {name}\ndata: {data}\n\n");
    let mut events = vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": prompt - cached, "output_tokens": 1,
                "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0}}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
        event("ping", json!({"type": "ping"})),
    ];
    for word in ANSWER {
        events.push(event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": word}}),
        ));
    }
    events.push(event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push(event("message_delta", json!({"type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": output}})));
    events.push(event("message_stop", json!({"type": "message_stop"})));
    sse_response(events, gap)
}

#[cfg(test)]
mod tests {
    use super::wants_stream;

    #[test]
    fn stream_flag_is_found_only_as_a_key() {
        assert!(wants_stream(
            br#"{"model":"m","stream":true,"messages":[]}"#
        ));
        assert!(wants_stream(b"{\"model\": \"m\",\n  \"stream\" : true}"));
        assert!(!wants_stream(br#"{"model":"m","stream":false}"#));
        assert!(!wants_stream(
            br#"{"model":"m","stream_options":{"include_usage":true}}"#
        ));
        assert!(!wants_stream(
            br#"{"messages":[{"content":"say \"stream\": true"}]}"#
        ));
        assert!(!wants_stream(br#"{"messages":[]}"#));
    }
}
