//! `--recall` for streamed answers (OpenAI Chat Completions, OpenAI Responses and Anthropic
//! Messages): the client sees one normal stream although the model called `ctxgc_recall` on
//! the way.
//!
//! Events are passed on as they arrive until the model starts a tool call (an OpenAI chunk
//! with `tool_calls`, a Responses `function_call` output item, an Anthropic `tool_use`
//! block); from there the rest of the answer is held back. When the answer ends and every tool call in it is a recall call, the gateway
//! answers them from the store, appends the model's turn and the results to the request, sends
//! it upstream again (streamed) and relays the continuation in place of what it held back:
//! its opening event (Anthropic `message_start`, Responses `response.created` and
//! `response.in_progress`) left out, Anthropic block indexes and Responses output indexes
//! moved past what the client already has, Responses sequence numbers continued, and the
//! final Responses `response.completed` listing every output item the client was shown. An answer with any other tool call is released as it
//! came. The text the model wrote before calling the tool stays in the client's stream and
//! goes back upstream in the assistant turn.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, header};
use axum::response::Response;
use ctxgc_core::Format;
use ctxgc_core::formats::protocol::StreamRound;
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::recall::{Call, MAX_ROUNDS, Scope, TOOL, answer_call, continue_request, receipt_of};
use crate::server::{Gateway, hop_by_hop, send};
use crate::usage::{Usage, UsageReader};

/// Whether streamed recall applies to requests of this format.
pub fn supported(format: Format) -> bool {
    format.wire().streams_answers()
}

/// One server-sent event: its exact bytes, its name and its data.
#[derive(Debug)]
struct Event {
    bytes: Vec<u8>,
    data: String,
}

impl Event {
    fn parse(raw: Vec<u8>) -> Event {
        let text = String::from_utf8_lossy(&raw);
        let mut data: Vec<&str> = Vec::new();
        for line in text.lines() {
            if let Some(d) = line.strip_prefix("data:") {
                data.push(d.strip_prefix(' ').unwrap_or(d));
            }
        }
        let data = data.join("\n");
        Event { bytes: raw, data }
    }
}

/// Splits a byte stream into whole events (each ends with a blank line).
#[derive(Debug, Default)]
struct Splitter {
    buf: Vec<u8>,
    scanned: usize,
}

impl Splitter {
    fn push(&mut self, chunk: &[u8]) -> Vec<Event> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        let mut i = self.scanned;
        while i < self.buf.len() {
            let end = if self.buf[i..].starts_with(b"\n\n") {
                Some(i + 2)
            } else if self.buf[i..].starts_with(b"\r\n\r\n") {
                Some(i + 4)
            } else {
                None
            };
            match end {
                Some(end) => {
                    let raw: Vec<u8> = self.buf.drain(..end).collect();
                    out.push(Event::parse(raw));
                    i = 0;
                }
                None => i += 1,
            }
        }
        // Keep the last bytes unscanned: a separator may straddle two chunks.
        self.scanned = self.buf.len().saturating_sub(3);
        out
    }

    /// What is left when the stream ends (an event without its blank line).
    fn rest(&mut self) -> Option<Event> {
        let raw = std::mem::take(&mut self.buf);
        (!raw.iter().all(u8::is_ascii_whitespace)).then(|| Event::parse(raw))
    }
}

/// One streamed answer as it goes by, read by its format ([`StreamRound`] holds what the
/// client already has, what is held back, and the model's turn rebuilt from the events).
#[derive(Debug)]
struct Round {
    format: Format,
    state: StreamRound,
}

impl Round {
    fn new(format: Format, first: bool, offset: usize) -> Round {
        Round {
            format,
            state: StreamRound::new(first, offset),
        }
    }

    /// A continuation that follows `earlier` output items and sequence number `next_seq`
    /// (Responses).
    fn after(mut self, earlier: Vec<Value>, next_seq: u64) -> Round {
        self.state = self.state.after(earlier, next_seq);
        self
    }

    /// Takes one event in; returns what goes to the client now.
    fn on_event(&mut self, event: Event) -> Option<Bytes> {
        self.format
            .wire()
            .stream_event(&mut self.state, event.bytes, &event.data)
            .map(Bytes::from)
    }

    /// The events held back, for the client.
    fn take_held(&mut self) -> Vec<Bytes> {
        std::mem::take(&mut self.state.held)
            .into_iter()
            .map(Bytes::from)
            .collect()
    }

    /// The recall calls of the answer, when it ended in tool calls that are all recall calls.
    fn recall_calls(&self) -> Option<Vec<Call>> {
        let calls = self.format.wire().stream_tool_calls(&self.state);
        if calls.is_empty()
            || calls
                .iter()
                .any(|c| c.name != TOOL || c.id.as_deref().is_none_or(str::is_empty))
        {
            return None;
        }
        Some(
            calls
                .into_iter()
                .map(|c| Call {
                    receipt: c.arguments.as_ref().and_then(receipt_of),
                    call_id: c.id.unwrap_or_default(),
                })
                .collect(),
        )
    }

    /// The model's turn, shaped as a whole answer of the API (what `continue_request` reads).
    fn answer(&self) -> Value {
        self.format.wire().stream_answer(&self.state)
    }
}

/// An error told inside a stream already under way, in the API's own event shape.
fn error_event(format: Format, message: &str) -> Bytes {
    Bytes::from(format.wire().stream_error_event(message))
}

/// What the stream did, reported when it is over: usage summed over every round, recall
/// calls answered, and whether it completed.
pub type OnDone = Box<dyn FnOnce(Usage, usize, bool) + Send>;

/// The client's response to a streamed request that may call `ctxgc_recall`: the first
/// answer's status and headers, and a body the gateway writes round by round.
#[allow(clippy::too_many_arguments)]
pub(crate) fn relay(
    gateway: Arc<Gateway>,
    format: Format,
    scope: Scope,
    method: Method,
    url: String,
    headers: HeaderMap,
    body: Bytes,
    first: reqwest::Response,
    on_done: OnDone,
) -> Response {
    let status = first.status();
    let mut response_headers = HeaderMap::with_capacity(first.headers().len());
    for (name, value) in first.headers() {
        if !hop_by_hop(name) && name != header::CONTENT_LENGTH {
            response_headers.append(name.clone(), value.clone());
        }
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(32);
    tokio::spawn(drive(
        gateway, format, scope, method, url, headers, body, first, tx, on_done,
    ));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = status;
    *response.headers_mut() = response_headers;
    response
}

fn add(total: &mut Usage, u: Usage) {
    total.input_tokens += u.input_tokens;
    total.output_tokens += u.output_tokens;
    total.cache_read_tokens += u.cache_read_tokens;
    total.cache_write_tokens += u.cache_write_tokens;
}

/// Runs the rounds. A client that goes away ends it: the channel closes, the upstream
/// response is dropped, which cancels the request upstream.
#[allow(clippy::too_many_arguments)]
async fn drive(
    gateway: Arc<Gateway>,
    format: Format,
    scope: Scope,
    method: Method,
    url: String,
    headers: HeaderMap,
    mut body: Bytes,
    first: reqwest::Response,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    on_done: OnDone,
) {
    let mut usage = Usage::default();
    let mut answered = 0;
    let mut upstream = first;
    let mut offset = 0;
    let mut round_number = 0;
    // Responses: the output items the client has so far, and the next sequence number.
    let mut shown: Vec<Value> = Vec::new();
    let mut next_seq = 0;
    let completed = loop {
        let mut reader = UsageReader::new(true);
        let mut round = Round::new(format, round_number == 0, offset)
            .after(std::mem::take(&mut shown), next_seq);
        let mut splitter = Splitter::default();
        let mut stream = upstream.bytes_stream();
        let mut broke = None;
        let mut client_gone = false;
        'read: while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(chunk) => {
                    reader.feed(&chunk);
                    for event in splitter.push(&chunk) {
                        if let Some(out) = round.on_event(event)
                            && tx.send(Ok(out)).await.is_err()
                        {
                            client_gone = true;
                            break 'read;
                        }
                    }
                }
                Err(e) => {
                    broke = Some(e.without_url().to_string());
                    break;
                }
            }
        }
        drop(stream);
        add(&mut usage, reader.finish());
        if client_gone {
            break false;
        }
        if let Some(event) = splitter.rest()
            && let Some(out) = round.on_event(event)
        {
            let _ = tx.send(Ok(out)).await;
        }
        if let Some(why) = broke {
            let _ = tx
                .send(Err(std::io::Error::other(format!(
                    "the upstream stream broke off: {why}"
                ))))
                .await;
            break false;
        }
        let calls = (round_number < MAX_ROUNDS)
            .then(|| round.recall_calls())
            .flatten();
        let Some(calls) = calls else {
            for bytes in round.take_held() {
                if tx.send(Ok(bytes)).await.is_err() {
                    break;
                }
            }
            break true;
        };
        let mut results = Vec::with_capacity(calls.len());
        for call in calls {
            let text = answer_call(&gateway, &scope, &call).await;
            results.push((call, text));
        }
        answered += results.len();
        let next = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|mut request| {
                continue_request(format, &mut request, &round.answer(), &results)?;
                Some(request)
            });
        let Some(next) = next else {
            for bytes in round.take_held() {
                let _ = tx.send(Ok(bytes)).await;
            }
            break true;
        };
        body = Bytes::from(next.to_string());
        let sent = send(
            &gateway,
            Some(format),
            method.clone(),
            &url,
            headers.clone(),
            body.clone(),
        )
        .await;
        let streamed = |r: &reqwest::Response| {
            r.status().is_success()
                && r.headers()
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.starts_with("text/event-stream"))
        };
        match sent {
            Ok(r) if streamed(&r) => upstream = r,
            Ok(r) => {
                let status = r.status();
                let text = r.text().await.unwrap_or_default();
                let message = format!(
                    "ctxgc gateway: continuing after {TOOL}, the upstream answered {status}: {}",
                    text.chars().take(2000).collect::<String>()
                );
                let _ = tx.send(Ok(error_event(format, &message))).await;
                break false;
            }
            Err(_) => {
                let message = format!(
                    "ctxgc gateway: continuing after {TOOL}, the upstream could not be reached"
                );
                let _ = tx.send(Ok(error_event(format, &message))).await;
                break false;
            }
        }
        offset += round.state.passed_blocks;
        shown = round.state.shown_items();
        next_seq = round.state.next_seq;
        round_number += 1;
    };
    on_done(usage, answered, completed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_are_split_across_chunks() {
        let mut s = Splitter::default();
        assert!(s.push(b"data: {\"a\":1}\n").is_empty());
        let events = s.push(b"\ndata: [DONE]\r\n\r\nevent: x\ndata: 2");
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].data, "{\"a\":1}");
        assert_eq!(events[1].data, "[DONE]");
        assert_eq!(s.rest().map(|e| e.data), Some("2".to_owned()));
    }

    #[test]
    fn an_anthropic_recall_call_is_held_and_read_back() {
        let mut round = Round::new(Format::Anthropic, true, 0);
        let ev = |name: &str, data: Value| {
            Event::parse(format!("event: {name}\ndata: {data}\n\n").into_bytes())
        };
        assert!(
            round
                .on_event(ev(
                    "message_start",
                    json!({"type": "message_start", "message": {}})
                ))
                .is_some()
        );
        assert!(round.on_event(ev("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))).is_some());
        assert!(round.on_event(ev("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me look."}}))).is_some());
        assert!(round.on_event(ev("content_block_start", json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": TOOL, "input": {}}}))).is_none());
        assert!(round.on_event(ev("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"id\": \"m"}}))).is_none());
        assert!(round.on_event(ev("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "3\"}"}}))).is_none());
        assert!(
            round
                .on_event(ev(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 1})
                ))
                .is_none()
        );
        let calls = round.recall_calls().unwrap();
        assert_eq!(
            calls,
            vec![Call {
                call_id: "t1".into(),
                receipt: Some("m3".into())
            }]
        );
        assert_eq!(round.state.passed_blocks, 1);
        assert_eq!(
            round.answer(),
            json!({"content": [{"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "t1", "name": TOOL, "input": {"id": "m3"}}]})
        );
        // A continuation's blocks come after the client's.
        let mut next = Round::new(Format::Anthropic, false, 1);
        assert!(
            next.on_event(ev(
                "message_start",
                json!({"type": "message_start", "message": {}})
            ))
            .is_none()
        );
        let moved = next.on_event(ev("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))).unwrap();
        assert!(String::from_utf8_lossy(&moved).contains("\"index\":1"));
    }
}
