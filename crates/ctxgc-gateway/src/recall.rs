//! `--recall`: the gateway offers the model a `ctxgc_recall` tool, and when the model calls
//! it, answers from the store and sends the request on itself, so the client sees a normal
//! answer. Stubs name a receipt id only in this mode (the compiler's `expand_tool`).
//!
//! An answer that is not streamed is read whole, and when every tool call in it is a recall
//! call, the calls and their results are appended and the request is sent again (at most
//! [`MAX_ROUNDS`] times). An answer with other tool calls goes to the client as it came.
//! Streamed answers (OpenAI Chat, Anthropic Messages) are continued in the stream itself:
//! see [`crate::recall_stream`].

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use ctxgc_core::Format;
use ctxgc_core::chat::lowering::object_entries;
use serde_json::{Value, json};

use crate::server::{Gateway, send};
use crate::sessions::Recalled;
use crate::usage::{Usage, UsageReader};

/// The tool's name.
pub const TOOL: &str = "ctxgc_recall";
/// The most recall rounds one request may take.
pub const MAX_ROUNDS: usize = 4;

const DESCRIPTION: &str = "Returns the full original of an earlier message or tool output that \
was shortened in this conversation. Call it with the id a shortened item names.";

fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {"id": {"type": "string", "description": "The id the shortened item names."}},
        "required": ["id"]
    })
}

/// The tool's definition in a request of `format` (`Null` for a format no provider serves).
pub fn definition(format: Format) -> Value {
    format
        .wire()
        .tool_definition(TOOL, DESCRIPTION, &parameters())
        .unwrap_or(Value::Null)
}

/// Adds the tool to a request body's `tools` (once), keeping every other byte.
///
/// ```
/// use ctxgc_core::Format;
/// use ctxgc_gateway::recall::offer_tool;
/// let out = offer_tool(Format::Anthropic, r#"{"model":"m","messages":[]}"#);
/// assert!(out.ends_with(r#""tools":[{"name":"ctxgc_recall","description":"Returns the full original of an earlier message or tool output that was shortened in this conversation. Call it with the id a shortened item names.","input_schema":{"type":"object","properties":{"id":{"type":"string","description":"The id the shortened item names."}},"required":["id"]}}]}"#));
/// assert_eq!(offer_tool(Format::Anthropic, &out), out);
/// ```
pub fn offer_tool(format: Format, body: &str) -> String {
    let Ok(entries) = object_entries(body) else {
        return body.to_owned();
    };
    let pairs: Vec<(&str, &str)> = entries.iter().map(|(k, v)| (k.as_str(), v.get())).collect();
    let mut out = String::with_capacity(body.len() + 512);
    write_object(format, &pairs, true, &mut out);
    out
}

/// Writes a JSON object from its entries (keys written as JSON strings, values as given);
/// with `recall`, the tool is added to `tools` (once), or a `tools` list holding it is
/// appended.
pub(crate) fn write_object(
    format: Format,
    entries: &[(&str, &str)],
    recall: bool,
    out: &mut String,
) {
    let tool = recall.then(|| definition(format).to_string());
    out.push('{');
    let mut placed = tool.is_none();
    for (n, (k, raw)) in entries.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        out.push_str(&Value::String((*k).to_owned()).to_string());
        out.push(':');
        match &tool {
            Some(tool) if *k == "tools" && raw.starts_with('[') && !placed => {
                placed = true;
                if raw.contains(&format!("\"{TOOL}\"")) {
                    out.push_str(raw);
                } else {
                    let inner = raw[1..raw.len() - 1].trim();
                    out.push('[');
                    if !inner.is_empty() {
                        out.push_str(inner);
                        out.push(',');
                    }
                    out.push_str(tool);
                    out.push(']');
                }
            }
            _ => out.push_str(raw),
        }
    }
    if !placed && let Some(tool) = &tool {
        if !entries.is_empty() {
            out.push(',');
        }
        out.push_str("\"tools\":[");
        out.push_str(tool);
        out.push(']');
    }
    out.push('}');
}

/// A recall call the model made: the call's id and the receipt id it asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    pub(crate) call_id: String,
    pub(crate) receipt: Option<String>,
}

/// The receipt id a call's arguments ask for.
pub(crate) fn receipt_of(args: &Value) -> Option<String> {
    args.get("id").and_then(Value::as_str).map(str::to_owned)
}

/// The recall calls of an answer, when every tool call in it is one (`None` otherwise, or
/// when it has no call).
fn recall_calls(format: Format, answer: &Value) -> Option<Vec<Call>> {
    let mut calls = Vec::new();
    let mut others = 0;
    for call in format.wire().answer_tool_calls(answer)? {
        if call.name == TOOL {
            calls.push(Call {
                call_id: call.id?,
                receipt: call.arguments.as_ref().and_then(receipt_of),
            });
        } else {
            others += 1;
        }
    }
    (others == 0 && !calls.is_empty()).then_some(calls)
}

/// Appends the model's turn and the recall results to the request.
pub(crate) fn continue_request(
    format: Format,
    request: &mut Value,
    answer: &Value,
    results: &[(Call, String)],
) -> Option<()> {
    let results: Vec<(&str, &str)> = results
        .iter()
        .map(|(c, text)| (c.call_id.as_str(), text.as_str()))
        .collect();
    format.wire().continue_request(request, answer, &results)
}

/// What the model gets back for a stored item: the text of a tool output or message when it
/// is one string, the item's original JSON otherwise.
///
/// ```
/// use ctxgc_gateway::recall::original_text;
/// assert_eq!(original_text(r#"{"role":"tool","tool_call_id":"c1","content":"42 rows"}"#), "42 rows");
/// assert_eq!(original_text(r#"{"type":"function_call_output","call_id":"c1","output":"ok"}"#), "ok");
/// assert_eq!(original_text(r#"{"role":"user","content":[{"type":"image"}]}"#), r#"{"role":"user","content":[{"type":"image"}]}"#);
/// ```
pub fn original_text(raw: &str) -> String {
    let Ok(value) = serde_json::from_str::<Value>(raw) else {
        return raw.to_owned();
    };
    let text = value
        .get("content")
        .or_else(|| value.get("output"))
        .and_then(|c| match c {
            Value::String(s) => Some(s.clone()),
            // An Anthropic tool result inside a user message: its one text.
            Value::Array(blocks) if blocks.len() == 1 => {
                let b = &blocks[0];
                match b.get("content") {
                    Some(Value::String(s)) => Some(s.clone()),
                    _ => b.get("text").and_then(Value::as_str).map(str::to_owned),
                }
            }
            _ => None,
        });
    text.unwrap_or_else(|| raw.to_owned())
}

/// The conversation a recall is answered from: the request's key and the store session it
/// was compiled into (never another conversation's, even under the same key).
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    pub key: String,
    pub context_id: String,
}

/// What the store gives back for one call: the original, or words naming the ids the model
/// may have meant.
pub(crate) async fn answer_call(gateway: &Arc<Gateway>, scope: &Scope, call: &Call) -> String {
    let Some(id) = call.receipt.clone() else {
        return format!("{TOOL} needs an `id` argument: the id a shortened item names");
    };
    let Some(sessions) = gateway.sessions.clone() else {
        return "no store is configured".to_owned();
    };
    let scope = scope.clone();
    let lookup = id.clone();
    let found = tokio::task::spawn_blocking(move || {
        sessions.recall(&scope.key, &scope.context_id, &lookup)
    })
    .await;
    match found {
        Ok(Ok(Recalled::Found(bytes))) => match String::from_utf8(bytes) {
            Ok(text) => original_text(&text),
            Err(_) => format!("receipt {id:?} holds bytes that are not UTF-8 text"),
        },
        Ok(Ok(Recalled::Missing { nearest })) => missing_text(&id, &nearest),
        Ok(Err(e)) => format!("the store could not be read: {e}"),
        Err(e) => format!("the store could not be read: {e}"),
    }
}

/// The answer to a recall of an id the conversation does not have.
///
/// ```
/// use ctxgc_gateway::recall::missing_text;
/// assert_eq!(missing_text("m13", &["m12".into(), "m3".into()]),
///     r#"no item with id "m13" in this conversation; the shortened items nearest to it are "m12", "m3""#);
/// assert_eq!(missing_text("m1", &[]), r#"no item with id "m1" in this conversation (it has no shortened items)"#);
/// ```
pub fn missing_text(id: &str, nearest: &[String]) -> String {
    if nearest.is_empty() {
        return format!("no item with id {id:?} in this conversation (it has no shortened items)");
    }
    let names: Vec<String> = nearest.iter().map(|n| format!("{n:?}")).collect();
    format!(
        "no item with id {id:?} in this conversation; the shortened items nearest to it are {}",
        names.join(", ")
    )
}

/// Sends the request, answering recall calls until the model gives an answer of its own.
/// Returns the client's response, how many recall calls were answered and the usage summed
/// over every round.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn round_trip(
    gateway: &Arc<Gateway>,
    format: Format,
    scope: &Scope,
    method: Method,
    url: &str,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(Response, usize, Usage), Response> {
    let mut body = body;
    let mut answered = 0;
    let mut usage = Usage::default();
    for round in 0..=MAX_ROUNDS {
        let upstream = send(
            gateway,
            Some(format),
            method.clone(),
            url,
            headers.clone(),
            body.clone(),
        )
        .await?;
        let status = upstream.status();
        let response_headers = upstream.headers().clone();
        let bytes = match upstream.bytes().await {
            Ok(b) => b,
            Err(e) => {
                return Err(crate::server::error_response(
                    StatusCode::BAD_GATEWAY,
                    Some(format),
                    "api_connection_error",
                    &format!(
                        "ctxgc gateway: the upstream answer broke off: {}",
                        e.without_url()
                    ),
                ));
            }
        };
        let mut reader = UsageReader::new(false);
        reader.feed(&bytes);
        let u = reader.finish();
        usage.input_tokens += u.input_tokens;
        usage.output_tokens += u.output_tokens;
        usage.cache_read_tokens += u.cache_read_tokens;
        usage.cache_write_tokens += u.cache_write_tokens;
        let answer: Option<Value> = status
            .is_success()
            .then(|| serde_json::from_slice(&bytes).ok())
            .flatten();
        let calls = answer.as_ref().and_then(|a| recall_calls(format, a));
        let (Some(answer), Some(calls)) = (answer, calls) else {
            return Ok((rebuild(status, &response_headers, bytes), answered, usage));
        };
        if round == MAX_ROUNDS {
            return Ok((rebuild(status, &response_headers, bytes), answered, usage));
        }
        let mut results = Vec::with_capacity(calls.len());
        for call in calls {
            let text = answer_call(gateway, scope, &call).await;
            results.push((call, text));
        }
        answered += results.len();
        let Ok(mut request) = serde_json::from_slice::<Value>(&body) else {
            return Ok((rebuild(status, &response_headers, bytes), answered, usage));
        };
        if continue_request(format, &mut request, &answer, &results).is_none() {
            return Ok((rebuild(status, &response_headers, bytes), answered, usage));
        }
        body = Bytes::from(request.to_string());
    }
    Err(crate::server::error_response(
        StatusCode::BAD_GATEWAY,
        Some(format),
        "api_error",
        "ctxgc gateway: recall rounds exhausted",
    ))
}

fn rebuild(status: StatusCode, headers: &HeaderMap, bytes: Bytes) -> Response {
    let mut response = bytes.into_response();
    *response.status_mut() = status;
    for (name, value) in headers {
        if name != axum::http::header::CONTENT_LENGTH && !crate::server::hop_by_hop(name) {
            response.headers_mut().append(name.clone(), value.clone());
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_answers_made_of_recall_calls_are_continued() {
        let chat = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ctxgc_recall", "arguments": "{\"id\":\"m3\"}"}}
        ]}}]});
        assert_eq!(
            recall_calls(Format::OpenaiChat, &chat),
            Some(vec![Call {
                call_id: "c1".into(),
                receipt: Some("m3".into())
            }])
        );
        let mixed = json!({"content": [
            {"type": "tool_use", "id": "t1", "name": "ctxgc_recall", "input": {"id": "m1"}},
            {"type": "tool_use", "id": "t2", "name": "book", "input": {}}
        ]});
        assert_eq!(recall_calls(Format::Anthropic, &mixed), None);
    }
}
