//! `ctxgc bench --through-gateway` (strategy `gateway`): each recorded conversation replayed
//! through a real gateway, as an agent runs it.
//!
//! The gateway runs in process on loopback (default settings: cache-stable, default preset,
//! a SQLite store in a temporary folder) in front of a fake provider, also on loopback. Before
//! each agent turn the bench sends the whole history so far, in the transcript's own API
//! (OpenAI Chat, Anthropic Messages, OpenAI Responses), exactly as an agent resends it; the
//! gateway compiles it (incrementally after the first request) and sends it upstream. The fake
//! provider records the body it received, which is what is scored, and answers with the
//! recorded assistant turn and a `usage` it counts itself: input tokens of the messages it
//! received, of which cached the leading messages identical to the previous request's (a
//! prefix cache on message boundaries). What the gateway read from those answers is reported
//! after the table. Event traces are not chat requests: the strategy reports an error for them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ctxgc_bench::context::{Context, id_words};
use ctxgc_bench::strategy::{Prefix, Strategy, StrategyError};
use ctxgc_core::{Format, Tokenizer};
use ctxgc_gateway::Gateway;
use ctxgc_gateway::metrics::Counters;
use ctxgc_gateway::upstream::{Upstream, Upstreams};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// The strategy's name in specs and reports.
pub const NAME: &str = "gateway";
/// One line on what it does.
pub const SUMMARY: &str = "the recorded session replayed through `ctxgc gateway` (in process, loopback, default settings: cache-stable) against a fake provider that answers with the recorded turns; scored on what reached the provider";

/// The fake provider's state.
struct Provider {
    tokenizer: Tokenizer,
    /// The recorded assistant turn the next request is answered with.
    next: Mutex<Option<String>>,
    /// The last body received.
    last: Mutex<Option<Bytes>>,
    /// Per conversation (the `model` field names it): the previous request's messages, as
    /// (hash, tokens).
    previous: Mutex<HashMap<String, Vec<(blake3::Hash, usize)>>>,
}

/// The replay strategy: a gateway and its fake provider, kept running for the whole bench.
pub struct ThroughGateway {
    runtime: tokio::runtime::Runtime,
    gateway: Arc<Gateway>,
    base: String,
    provider: Arc<Provider>,
    client: reqwest::Client,
    _store: tempfile::TempDir,
}

impl ThroughGateway {
    /// Starts the fake provider and the gateway on loopback.
    pub fn start(tokenizer: Tokenizer) -> Result<ThroughGateway, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("starting the runtime: {e}"))?;
        let store_dir = tempfile::tempdir().map_err(|e| format!("a temporary folder: {e}"))?;
        let provider = Arc::new(Provider {
            tokenizer,
            next: Mutex::new(None),
            last: Mutex::new(None),
            previous: Mutex::new(HashMap::new()),
        });
        let location = ctxgc_store::Location::Sqlite(store_dir.path().join("gateway.db"));
        let store = ctxgc_store::open(&location).map_err(|e| format!("the store: {e}"))?;
        let state = provider.clone();
        let (gateway, base) = runtime.block_on(async move {
            let app = Router::new().fallback(answer).with_state(state);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| format!("listening on loopback: {e}"))?;
            let upstream = format!(
                "http://{}",
                listener.local_addr().map_err(|e| e.to_string())?
            );
            tokio::spawn(async move { axum::serve(listener, app).await });
            let upstreams = Upstream::parse(&upstream)
                .and_then(|u| Upstreams::new(vec![u]))
                .map_err(|e| e.to_string())?;
            let mut options = ctxgc_gateway::GatewayOptions::new(upstreams);
            options.quiet = true;
            let gateway = ctxgc_gateway::build(options, Some(store)).map_err(|e| e.to_string())?;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| format!("listening on loopback: {e}"))?;
            let base = format!(
                "http://{}",
                listener.local_addr().map_err(|e| e.to_string())?
            );
            tokio::spawn(ctxgc_gateway::serve_gateway(
                listener,
                gateway.clone(),
                std::future::pending(),
            ));
            Ok::<_, String>((gateway, base))
        })?;
        Ok(ThroughGateway {
            runtime,
            gateway,
            base,
            provider,
            client: reqwest::Client::new(),
            _store: store_dir,
        })
    }

    /// What the gateway counted so far (requests, incremental ones, bytes, provider usage).
    pub fn totals(&self) -> Counters {
        self.gateway.metrics().total()
    }
}

/// The request an agent sends with the first `len` items of the conversation: the history
/// in the transcript's own API, under a model name that names the conversation.
fn request_body(format: Format, items: &[ctxgc_core::Item], model: &str) -> String {
    let join = |items: &[ctxgc_core::Item]| {
        let mut out = String::from("[");
        for (n, item) in items.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(&item.raw);
        }
        out.push(']');
        out
    };
    let wire = format.wire();
    // A format that keeps its system prompt in a field of its own (Anthropic) lowers it as
    // the first item, `system`.
    match items.split_first() {
        Some((first, rest)) if wire.system_key().is_some() && first.id == "system" => {
            wire.request_body(model, Some(&first.raw), &join(rest))
        }
        _ => wire.request_body(model, None, &join(items)),
    }
}

impl Strategy for ThroughGateway {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> String {
        SUMMARY.to_owned()
    }

    fn compact(&self, prefix: Prefix<'_>) -> Result<Context, StrategyError> {
        let input = prefix.input;
        let format = input.conversation.format;
        let path = match format.wire().endpoint() {
            Some(endpoint) if format.wire().is_chat() => format!("/v1{endpoint}"),
            _ => {
                return Err(StrategyError(format!(
                    "the gateway takes chat requests (openai-chat, anthropic, responses), not {}",
                    format.name()
                )));
            }
        };
        let items = &input.conversation.items;
        let name = blake3::hash(format!("{}\0{}", input.source, input.conversation.id).as_bytes())
            .to_hex()[..16]
            .to_owned();
        let model = format!("replay-{name}");
        let body = request_body(format, &items[..prefix.len], &model);
        *lock(&self.provider.next) = items.get(prefix.len).map(|i| i.raw.clone());
        let url = format!("{}{path}", self.base);
        let sent = self.runtime.block_on(async {
            let answer = self
                .client
                .post(url)
                .header("content-type", "application/json")
                .header("authorization", "Bearer sk-replay")
                .header("x-api-key", "sk-replay")
                .header("anthropic-version", "2023-06-01")
                .header("x-ctxgc-session", format!("bench-{name}"))
                .body(body)
                .send()
                .await
                .map_err(|e| StrategyError(format!("the gateway did not answer: {e}")))?;
            let status = answer.status();
            let text = answer
                .bytes()
                .await
                .map_err(|e| StrategyError(format!("reading the gateway's answer: {e}")))?;
            if !status.is_success() {
                return Err(StrategyError(format!(
                    "the gateway answered {status}: {}",
                    String::from_utf8_lossy(&text)
                )));
            }
            lock(&self.provider.last)
                .take()
                .ok_or_else(|| StrategyError("the request never reached the provider".into()))
        })?;
        let sent = std::str::from_utf8(&sent)
            .map_err(|e| StrategyError(format!("the upstream body is not UTF-8: {e}")))?;
        let mut context = ctxgc_bench::strategy::ctxgc::message_context(format, sent)?;
        context.items_kept = context.segments.len();
        // Recoverable, as for ctxgc: an item not sent as it came whose id the model can see.
        let words = id_words(sent);
        context.recoverable = items[..prefix.len]
            .iter()
            .filter(|i| words.contains(i.id.as_str()) && !sent.contains(i.raw.as_str()))
            .map(|i| i.id.clone())
            .collect();
        Ok(context)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The request body's messages, as the provider counts them (the Anthropic `system` first).
#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow, default)]
    model: Option<&'a str>,
    #[serde(borrow, default)]
    system: Option<&'a RawValue>,
    #[serde(borrow, default)]
    messages: Option<Vec<&'a RawValue>>,
    #[serde(borrow, default)]
    input: Option<Vec<&'a RawValue>>,
}

/// The fake provider: records the body, answers with the recorded turn and its own count.
async fn answer(State(provider): State<Arc<Provider>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let Ok(body) = axum::body::to_bytes(request.into_body(), usize::MAX).await else {
        return (StatusCode::BAD_REQUEST, "unreadable body").into_response();
    };
    let Ok(parsed) = serde_json::from_slice::<Body>(&body) else {
        return (StatusCode::BAD_REQUEST, "not a chat request").into_response();
    };
    let model = parsed.model.unwrap_or("").to_owned();
    let messages: Vec<&RawValue> = parsed
        .system
        .into_iter()
        .chain(parsed.messages.or(parsed.input).unwrap_or_default())
        .collect();
    let counted: Vec<(blake3::Hash, usize)> = messages
        .iter()
        .map(|m| {
            (
                blake3::hash(m.get().as_bytes()),
                provider.tokenizer.count(m.get()),
            )
        })
        .collect();
    let total: usize = counted.iter().map(|(_, n)| n).sum();
    let cached: usize = {
        let mut previous = lock(&provider.previous);
        let before = previous.remove(&model).unwrap_or_default();
        let cached = counted
            .iter()
            .zip(&before)
            .take_while(|(a, b)| a.0 == b.0)
            .map(|(a, _)| a.1)
            .sum();
        previous.insert(model.clone(), counted);
        cached
    };
    let recorded = lock(&provider.next)
        .take()
        .unwrap_or_else(|| r#"{"role":"assistant","content":"ok"}"#.to_owned());
    let output = provider.tokenizer.count(&recorded);
    *lock(&provider.last) = Some(body.clone());
    let recorded: Value = serde_json::from_str(&recorded)
        .unwrap_or_else(|_| json!({"role": "assistant", "content": "ok"}));
    let answer = match path.as_str() {
        "/v1/messages" => {
            let content = match recorded.get("content") {
                Some(Value::String(text)) => json!([{"type": "text", "text": text}]),
                Some(list @ Value::Array(_)) => list.clone(),
                _ => json!([]),
            };
            json!({"id": "msg_replay", "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": total - cached, "cache_read_input_tokens": cached,
                    "cache_creation_input_tokens": 0, "output_tokens": output}})
        }
        "/v1/responses" => json!({"id": "resp_replay", "object": "response", "status": "completed",
            "model": model, "output": [recorded],
            "usage": {"input_tokens": total, "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": output, "total_tokens": total + output}}),
        _ => json!({"id": "chatcmpl-replay", "object": "chat.completion", "created": 0,
            "model": model, "choices": [{"index": 0, "message": recorded, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": total, "completion_tokens": output,
                "total_tokens": total + output, "prompt_tokens_details": {"cached_tokens": cached}}}),
    };
    let mut response = answer.to_string().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The line printed after the table: what the gateway sent and what the provider reported.
pub fn summary(totals: &Counters) -> String {
    format!(
        "through the gateway: {} requests ({} incremental), {} bytes from the agent, {} bytes sent upstream; provider usage: {} input tokens ({} read from cache), {} output tokens",
        totals.requests,
        totals.incremental,
        totals.bytes_in,
        totals.bytes_out,
        totals.usage.input_tokens,
        totals.usage.cache_read_tokens,
        totals.usage.output_tokens
    )
}
