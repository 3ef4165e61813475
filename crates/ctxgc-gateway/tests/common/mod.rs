//! A fake model provider on loopback and a gateway in front of it.
//!
//! The fake records every request exactly as it arrived (method, path, headers, body bytes)
//! and answers in each provider's real format, streamed (server-sent events, one event per
//! chunk) or not. Its answer echoes the text of the last user message, so a client can tell
//! its own answer from anyone else's. Models with special names drive faults:
//! `rate-limited` (429 with `retry-after`), `server-error` (500), `hang` (no answer),
//! `slow-stream` (an endless stream, to see the gateway cancel it), `recall:<id>` (asks
//! `ctxgc_recall` for `<id>` until it gets an answer, then echoes the result).

#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ctxgc_gateway::upstream::{Upstream, Upstreams};
use ctxgc_gateway::{Gateway, GatewayOptions};
use serde_json::{Value, json};

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the upstream received JSON")
    }
}

#[derive(Default)]
pub struct FakeState {
    pub requests: Mutex<Vec<Recorded>>,
    /// Set when an endless stream was dropped by the gateway (the client went away).
    pub stream_cancelled: AtomicBool,
    pub streams_started: AtomicUsize,
}

pub struct FakeUpstream {
    pub base: String,
    pub state: Arc<FakeState>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl FakeUpstream {
    pub async fn start() -> FakeUpstream {
        let state = Arc::new(FakeState::default());
        let app = Router::new().fallback(fake).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await
                .unwrap();
        });
        FakeUpstream {
            base: format!("http://{addr}"),
            state,
            shutdown: Some(tx),
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    pub fn last(&self) -> Recorded {
        self.requests()
            .last()
            .cloned()
            .expect("a request reached the upstream")
    }
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// The text of the last user message of a request, whatever its format.
fn last_user_text(body: &Value) -> String {
    let list = body
        .get("messages")
        .or_else(|| body.get("input"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for m in list.iter().rev() {
        if m.get("role").and_then(Value::as_str) != Some("user") {
            continue;
        }
        match m.get("content") {
            Some(Value::String(s)) => return s.clone(),
            Some(Value::Array(parts)) => {
                for p in parts {
                    if let Some(t) = p.get("text").and_then(Value::as_str) {
                        return t.to_owned();
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(Value::String(s)) = body.get("input") {
        return s.clone();
    }
    String::new()
}

/// The recall result the gateway appended last to a request, if any.
fn recall_result(body: &Value) -> Option<String> {
    let list = body
        .get("messages")
        .or_else(|| body.get("input"))?
        .as_array()?;
    // Only the last message: the result the gateway just appended.
    if let Some(m) = list.last() {
        if m.get("role").and_then(Value::as_str) == Some("tool") {
            return m.get("content").and_then(Value::as_str).map(str::to_owned);
        }
        if m.get("type").and_then(Value::as_str) == Some("function_call_output") {
            return m.get("output").and_then(Value::as_str).map(str::to_owned);
        }
        if let Some(parts) = m.get("content").and_then(Value::as_array) {
            for p in parts {
                if p.get("type").and_then(Value::as_str) == Some("tool_result") {
                    return p.get("content").and_then(Value::as_str).map(str::to_owned);
                }
            }
        }
    }
    None
}

#[derive(Clone, Copy, PartialEq)]
enum Api {
    Chat,
    Responses,
    Messages,
}

fn json_response(status: StatusCode, body: Value) -> Response {
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn usage(api: Api, input: u64) -> Value {
    match api {
        Api::Chat => {
            json!({"prompt_tokens": input, "completion_tokens": 7, "total_tokens": input + 7,
            "prompt_tokens_details": {"cached_tokens": input / 2}})
        }
        Api::Responses => {
            json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": input / 2},
            "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": input + 7})
        }
        Api::Messages => json!({"input_tokens": input, "cache_creation_input_tokens": 11,
            "cache_read_input_tokens": input / 2, "output_tokens": 7}),
    }
}

fn answer_json(api: Api, model: &str, text: &str, input: u64) -> Value {
    match api {
        Api::Chat => json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000,
            "model": model, "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": null},
            "logprobs": null, "finish_reason": "stop"}], "usage": usage(api, input)}),
        Api::Responses => json!({"id": "resp_1", "object": "response", "created_at": 1700000000,
            "status": "completed", "model": model, "output": [{"type": "message", "id": "msg_1",
            "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "parallel_tool_calls": true, "tool_choice": "auto", "tools": [], "usage": usage(api, input)}),
        Api::Messages => {
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": null,
            "usage": usage(api, input)})
        }
    }
}

fn recall_call_json(api: Api, model: &str, id: &str) -> Value {
    let args = json!({"id": id}).to_string();
    match api {
        Api::Chat => json!({"id": "chatcmpl-2", "object": "chat.completion", "created": 1700000000,
            "model": model, "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_r1", "type": "function", "function": {"name": "ctxgc_recall", "arguments": args}}]},
            "finish_reason": "tool_calls"}], "usage": usage(api, 10)}),
        Api::Responses => json!({"id": "resp_2", "object": "response", "created_at": 1700000000,
            "status": "completed", "model": model, "output": [{"type": "function_call", "id": "fc_1",
            "call_id": "call_r1", "name": "ctxgc_recall", "arguments": args, "status": "completed"}],
            "parallel_tool_calls": true, "tool_choice": "auto", "tools": [], "usage": usage(api, 10)}),
        Api::Messages => {
            json!({"id": "msg_2", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "tool_use", "id": "toolu_r1", "name": "ctxgc_recall", "input": {"id": id}}],
            "stop_reason": "tool_use", "stop_sequence": null, "usage": usage(api, 10)})
        }
    }
}

/// The events of a streamed answer, each a complete SSE event.
fn stream_events(api: Api, model: &str, text: &str, input: u64) -> Vec<String> {
    let pieces: Vec<String> = text
        .chars()
        .collect::<Vec<_>>()
        .chunks(4)
        .map(|c| c.iter().collect())
        .collect();
    let data = |v: Value| format!("data: {v}\n\n");
    let event = |name: &str, v: Value| format!("event: {name}\ndata: {v}\n\n");
    let mut out = Vec::new();
    match api {
        Api::Chat => {
            let chunk = |delta: Value, finish: Value| {
                json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
                    "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
            };
            out.push(data(chunk(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
            )));
            for p in &pieces {
                out.push(data(chunk(json!({"content": p}), Value::Null)));
            }
            out.push(data(chunk(json!({}), json!("stop"))));
            out.push(data(
                json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
                "model": model, "choices": [], "usage": usage(api, input)}),
            ));
            out.push("data: [DONE]\n\n".to_owned());
        }
        Api::Responses => {
            let mut seq = 0;
            let mut next = || {
                seq += 1;
                seq - 1
            };
            let base = |status: &str, output: Value, usage: Value| {
                json!({"id": "resp_1", "object": "response", "created_at": 1700000000, "status": status,
                    "model": model, "output": output, "parallel_tool_calls": true, "tool_choice": "auto",
                    "tools": [], "usage": usage})
            };
            out.push(event(
                "response.created",
                json!({"type": "response.created", "sequence_number": next(),
                "response": base("in_progress", json!([]), Value::Null)}),
            ));
            out.push(event("response.output_item.added", json!({"type": "response.output_item.added",
                "sequence_number": next(), "output_index": 0, "item": {"type": "message", "id": "msg_1",
                "status": "in_progress", "role": "assistant", "content": []}})));
            for p in &pieces {
                out.push(event("response.output_text.delta", json!({"type": "response.output_text.delta",
                    "sequence_number": next(), "item_id": "msg_1", "output_index": 0, "content_index": 0,
                    "delta": p, "logprobs": []})));
            }
            out.push(event("response.output_text.done", json!({"type": "response.output_text.done",
                "sequence_number": next(), "item_id": "msg_1", "output_index": 0, "content_index": 0,
                "text": text, "logprobs": []})));
            let done = answer_json(Api::Responses, model, text, input);
            out.push(event(
                "response.completed",
                json!({"type": "response.completed",
                "sequence_number": next(), "response": done}),
            ));
        }
        Api::Messages => {
            let mut start_usage = usage(api, input);
            start_usage["output_tokens"] = json!(1);
            out.push(event("message_start", json!({"type": "message_start", "message": {"id": "msg_1",
                "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": start_usage}})));
            out.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            ));
            out.push(event("ping", json!({"type": "ping"})));
            for p in &pieces {
                out.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": p}}),
                ));
            }
            out.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ));
            out.push(event("message_delta", json!({"type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 7}})));
            out.push(event("message_stop", json!({"type": "message_stop"})));
        }
    }
    out
}

/// The events of a streamed answer that says a few words, then calls `ctxgc_recall` for
/// `id` (its arguments in two pieces), as OpenAI Chat and Anthropic stream them.
fn stream_recall_events(api: Api, model: &str, id: &str) -> Vec<String> {
    let args = json!({"id": id}).to_string();
    let (one, two) = args.split_at(args.len() / 2);
    let data = |v: Value| format!("data: {v}\n\n");
    let event = |name: &str, v: Value| format!("event: {name}\ndata: {v}\n\n");
    match api {
        Api::Responses => {
            let item = json!({"type": "function_call", "id": "fc_r1", "call_id": "call_r1",
                "name": "ctxgc_recall", "arguments": "", "status": "in_progress"});
            let mut done_item = item.clone();
            done_item["arguments"] = json!(args);
            done_item["status"] = json!("completed");
            let text_item = json!({"type": "message", "id": "msg_r", "status": "completed",
                "role": "assistant", "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}]});
            let base = |status: &str, output: Value| {
                json!({"id": "resp_r", "object": "response", "created_at": 1700000000, "status": status,
                    "model": model, "output": output, "parallel_tool_calls": true, "tool_choice": "auto",
                    "tools": [], "usage": if status == "completed" { usage(api, 10) } else { Value::Null }})
            };
            let mut in_progress_text = text_item.clone();
            in_progress_text["content"] = json!([]);
            in_progress_text["status"] = json!("in_progress");
            vec![
                event(
                    "response.created",
                    json!({"type": "response.created", "sequence_number": 0,
                    "response": base("in_progress", json!([]))}),
                ),
                event(
                    "response.in_progress",
                    json!({"type": "response.in_progress", "sequence_number": 1,
                    "response": base("in_progress", json!([]))}),
                ),
                event(
                    "response.output_item.added",
                    json!({"type": "response.output_item.added",
                    "sequence_number": 2, "output_index": 0, "item": in_progress_text}),
                ),
                event(
                    "response.output_text.delta",
                    json!({"type": "response.output_text.delta",
                    "sequence_number": 3, "item_id": "msg_r", "output_index": 0, "content_index": 0,
                    "delta": "Let me check.", "logprobs": []}),
                ),
                event(
                    "response.output_text.done",
                    json!({"type": "response.output_text.done",
                    "sequence_number": 4, "item_id": "msg_r", "output_index": 0, "content_index": 0,
                    "text": "Let me check.", "logprobs": []}),
                ),
                event(
                    "response.output_item.done",
                    json!({"type": "response.output_item.done",
                    "sequence_number": 5, "output_index": 0, "item": text_item}),
                ),
                event(
                    "response.output_item.added",
                    json!({"type": "response.output_item.added",
                    "sequence_number": 6, "output_index": 1, "item": item}),
                ),
                event(
                    "response.function_call_arguments.delta",
                    json!({"type": "response.function_call_arguments.delta",
                    "sequence_number": 7, "item_id": "fc_r1", "output_index": 1, "delta": one}),
                ),
                event(
                    "response.function_call_arguments.delta",
                    json!({"type": "response.function_call_arguments.delta",
                    "sequence_number": 8, "item_id": "fc_r1", "output_index": 1, "delta": two}),
                ),
                event(
                    "response.function_call_arguments.done",
                    json!({"type": "response.function_call_arguments.done",
                    "sequence_number": 9, "item_id": "fc_r1", "output_index": 1, "arguments": args}),
                ),
                event(
                    "response.output_item.done",
                    json!({"type": "response.output_item.done",
                    "sequence_number": 10, "output_index": 1, "item": done_item}),
                ),
                event(
                    "response.completed",
                    json!({"type": "response.completed", "sequence_number": 11,
                    "response": base("completed", json!([text_item, done_item]))}),
                ),
            ]
        }
        Api::Messages => {
            let mut start_usage = usage(api, 10);
            start_usage["output_tokens"] = json!(1);
            vec![
                event(
                    "message_start",
                    json!({"type": "message_start", "message": {"id": "msg_r",
                    "type": "message", "role": "assistant", "model": model, "content": [],
                    "stop_reason": null, "stop_sequence": null, "usage": start_usage}}),
                ),
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}),
                ),
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": "Let me check."}}),
                ),
                event(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 0}),
                ),
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 1,
                    "content_block": {"type": "tool_use", "id": "toolu_r1", "name": "ctxgc_recall", "input": {}}}),
                ),
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": one}}),
                ),
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": two}}),
                ),
                event(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 1}),
                ),
                event(
                    "message_delta",
                    json!({"type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 9}}),
                ),
                event("message_stop", json!({"type": "message_stop"})),
            ]
        }
        _ => {
            let chunk = |delta: Value, finish: Value| {
                data(
                    json!({"id": "chatcmpl-r", "object": "chat.completion.chunk", "created": 1700000000,
                    "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]}),
                )
            };
            vec![
                chunk(json!({"role": "assistant", "content": ""}), Value::Null),
                chunk(json!({"content": "Let me check."}), Value::Null),
                chunk(
                    json!({"tool_calls": [{"index": 0, "id": "call_r1", "type": "function",
                    "function": {"name": "ctxgc_recall", "arguments": ""}}]}),
                    Value::Null,
                ),
                chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": one}}]}),
                    Value::Null,
                ),
                chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": two}}]}),
                    Value::Null,
                ),
                chunk(json!({}), json!("tool_calls")),
                data(
                    json!({"id": "chatcmpl-r", "object": "chat.completion.chunk", "created": 1700000000,
                    "model": model, "choices": [], "usage": usage(Api::Chat, 10)}),
                ),
                "data: [DONE]\n\n".to_owned(),
            ]
        }
    }
}

fn sse(events: Vec<String>) -> Response {
    let stream = futures_util::stream::iter(
        events
            .into_iter()
            .map(|e| Ok::<Bytes, Infallible>(Bytes::from(e))),
    );
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    r
}

/// Sets a flag when dropped: the gateway stopped reading the endless stream.
struct CancelFlag(Arc<FakeState>);
impl Drop for CancelFlag {
    fn drop(&mut self) {
        self.0.stream_cancelled.store(true, Ordering::SeqCst);
    }
}

async fn fake(State(state): State<Arc<FakeState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    state.requests.lock().unwrap().push(Recorded {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
        body: body.to_vec(),
    });
    let path = parts.uri.path();
    if parts.method == axum::http::Method::GET && path == "/v1/models" {
        return json_response(
            StatusCode::OK,
            json!({"object": "list", "data": [{"id": "fake-model", "object": "model", "created": 1, "owned_by": "test"}]}),
        );
    }
    let api = match path {
        "/v1/chat/completions" => Api::Chat,
        "/v1/responses" => Api::Responses,
        "/v1/messages" => Api::Messages,
        _ => {
            return json_response(
                StatusCode::NOT_FOUND,
                json!({"error": {"message": format!("no route {path}"), "type": "not_found"}}),
            );
        }
    };
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "not JSON"}}),
        );
    };
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let stream = request
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let input = body.len() as u64 / 4;
    match model.as_str() {
        "rate-limited" => {
            let mut r = json_response(
                StatusCode::TOO_MANY_REQUESTS,
                json!({"error": {"message": "Rate limit reached", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}),
            );
            r.headers_mut()
                .insert("retry-after", HeaderValue::from_static("17"));
            r.headers_mut()
                .insert("x-request-id", HeaderValue::from_static("req_fake_429"));
            return r;
        }
        "server-error" => {
            return json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({"error": {"message": "upstream exploded", "type": "server_error"}}),
            );
        }
        "hang" => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        "slow-stream" => {
            state.streams_started.fetch_add(1, Ordering::SeqCst);
            let flag = CancelFlag(state.clone());
            let events = stream_events(api, &model, "tick", input);
            let first = events[0].clone();
            let stream = async_stream(first, flag);
            let mut r = Response::new(Body::from_stream(stream));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            return r;
        }
        _ => {}
    }
    if let Some(id) = model.strip_prefix("recall:") {
        return match recall_result(&request) {
            None if stream => sse(stream_recall_events(api, &model, id)),
            Some(result) if stream => sse(stream_events(
                api,
                &model,
                &format!("recalled: {result}"),
                input,
            )),
            None => json_response(StatusCode::OK, recall_call_json(api, &model, id)),
            Some(result) => json_response(
                StatusCode::OK,
                answer_json(api, &model, &format!("recalled: {result}"), input),
            ),
        };
    }
    let text = format!("echo: {}", last_user_text(&request));
    if stream {
        sse(stream_events(api, &model, &text, input))
    } else {
        json_response(StatusCode::OK, answer_json(api, &model, &text, input))
    }
}

/// The first event, then a comment line every 20 ms, forever; the flag goes with it.
fn async_stream(
    first: String,
    flag: CancelFlag,
) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send {
    futures_util::stream::unfold((0u64, Some(first), flag), |(n, first, flag)| async move {
        if let Some(first) = first {
            return Some((Ok(Bytes::from(first)), (n + 1, None, flag)));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        Some((
            Ok(Bytes::from(format!(": keep-alive {n}\n\n"))),
            (n + 1, None, flag),
        ))
    })
}

/// A gateway on loopback in front of `upstream`.
pub struct TestGateway {
    pub base: String,
    pub gateway: Arc<Gateway>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl TestGateway {
    pub async fn start(
        options: GatewayOptions,
        store: Option<ctxgc_store::AnyStore>,
    ) -> TestGateway {
        let gateway = ctxgc_gateway::build(options, store).expect("gateway builds");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let g = gateway.clone();
        let task = tokio::spawn(async move {
            ctxgc_gateway::serve_gateway(listener, g, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        TestGateway {
            base: format!("http://{addr}"),
            gateway,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Gateway options with one URL upstream, quiet.
pub fn options_for(upstream: &str) -> GatewayOptions {
    let mut o =
        GatewayOptions::new(Upstreams::new(vec![Upstream::parse(upstream).unwrap()]).unwrap());
    o.quiet = true;
    o
}

/// A fresh SQLite store in a temporary folder.
pub fn sqlite_store() -> (ctxgc_store::testing::TestDb, ctxgc_store::AnyStore) {
    let db = ctxgc_store::testing::sqlite();
    let store = db.open().unwrap();
    (db, store)
}

/// The corpus folder, when present.
pub fn corpus() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("CTXGC_CORPUS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus")
        });
    dir.is_dir().then_some(dir)
}

/// Every string inside a JSON value.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(list) => list.iter().for_each(|x| strings(x, out)),
        Value::Object(map) => map.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// The receipt id a stub in this upstream body names.
pub fn stub_id(sent: &Value) -> String {
    let mut all = Vec::new();
    strings(sent, &mut all);
    let stub = all
        .iter()
        .find(|s| s.contains("call ctxgc_recall with id \""))
        .expect("a stub that names its receipt");
    stub.split("call ctxgc_recall with id \"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned()
}
