//! The HTTP side: the checks (Host, Origin, token, body size: the proxy's own rules), the
//! three conversation endpoints compiled then forwarded, every other path forwarded as it
//! came, and answers streamed back chunk by chunk.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use ctxgc_core::Format;
use ctxgc_http_guard::{Guard, HttpSecurity, check_body, check_host, check_origin};
use futures_util::Stream;

use crate::endpoint::format_of;
use crate::metrics::{Metrics, Record};
use crate::request::{Parsed, parse};
use crate::sessions::{CompilePath, SessionError, Sessions};
use crate::upstream::Upstreams;
use crate::usage::{Usage, UsageReader};
use crate::{GatewayOptions, recall};

/// The header that names a conversation.
pub const SESSION_HEADER: &str = "x-ctxgc-session";
/// The header that carries the gateway's own token (the provider's credentials stay in
/// `Authorization` / `x-api-key`, forwarded as they came).
pub const TOKEN_HEADER: &str = "x-ctxgc-token";

/// Everything a request handler shares.
pub struct Gateway {
    pub(crate) upstreams: Upstreams,
    pub(crate) client: reqwest::Client,
    pub(crate) sessions: Option<Arc<Sessions>>,
    pub(crate) metrics: Metrics,
    pub(crate) savings: crate::savings::SavingsWrites,
    pub(crate) options: GatewayOptions,
    /// Compiles allowed at once. Compiling is CPU-bound, so more than the cores only adds
    /// the memory of every request being compiled together (64 concurrent first requests of
    /// 100k-token conversations held 1.2 GB): the others wait their turn, parsed nothing yet.
    pub(crate) compile_slots: Arc<tokio::sync::Semaphore>,
}

/// How many compiles run at once: twice the cores (a compile may wait on the store).
pub(crate) fn compile_slots() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) * 2
}

impl Gateway {
    /// The counters.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The conversations, when a store is configured.
    pub fn sessions(&self) -> Option<&Arc<Sessions>> {
        self.sessions.as_ref()
    }
}

/// Headers that describe one hop, never forwarded (RFC 9110 section 7.6.1), and the
/// gateway's own.
pub(crate) fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

/// The request headers sent upstream: the client's, credentials included, less hop-by-hop
/// ones, `Host` and `Content-Length` (set for the new body), `Accept-Encoding` (answers are
/// read for their usage as they pass) and the gateway's own.
fn upstream_headers(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if hop_by_hop(name)
            || name == header::HOST
            || name == header::CONTENT_LENGTH
            || name == header::ACCEPT_ENCODING
            || name.as_str() == SESSION_HEADER
            || name.as_str() == TOKEN_HEADER
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// An error the gateway itself answers with, in the shape of the API the client called.
pub(crate) fn error_response(
    status: StatusCode,
    format: Option<Format>,
    kind: &str,
    message: &str,
) -> Response {
    // OpenAI's shape where the API is not known.
    let body = format
        .unwrap_or(Format::OpenaiChat)
        .wire()
        .error_body(kind, message);
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// What the per-request JSON line says.
#[derive(Debug, Default, serde::Serialize)]
struct LogLine {
    method: String,
    path: String,
    upstream: String,
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<String>,
    /// The keyed hash of the request's credentials (never the credentials).
    #[serde(skip_serializing_if = "Option::is_none")]
    tenant: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compile: Option<CompilePath>,
    #[serde(skip_serializing_if = "Option::is_none")]
    items: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    new_items: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    receipts: Option<usize>,
    bytes_in: u64,
    bytes_out: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    compile_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recall_calls: Option<usize>,
    usage: Usage,
    compile_us: u64,
    overhead_us: u64,
    total_ms: u64,
    completed: bool,
}

/// Counts a request and writes its line when its answer is over (or the client left).
struct Finish {
    gateway: Arc<Gateway>,
    line: LogLine,
    incremental: bool,
    started: Instant,
    /// The savings record to write once the answer is over (a compiled request).
    savings: Option<crate::savings::Pending>,
}

impl Finish {
    fn done(mut self, usage: Usage, completed: bool) {
        if let Some(pending) = self.savings.take() {
            crate::savings::record(&self.gateway, pending, usage, self.line.status);
        }
        self.line.usage = usage;
        self.line.completed = completed;
        self.line.total_ms = self.started.elapsed().as_millis() as u64;
        self.gateway.metrics.record(&Record {
            session: self.line.session.clone(),
            tenant: self.line.tenant.clone(),
            incremental: self.incremental,
            bytes_in: self.line.bytes_in,
            bytes_out: self.line.bytes_out,
            usage,
            status: self.line.status,
            overhead_us: self.line.overhead_us,
        });
        if !self.gateway.options.quiet
            && let Ok(text) = serde_json::to_string(&self.line)
        {
            eprintln!("{text}");
        }
    }
}

type ByteStream = std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

/// The answer's body on its way to the client: each chunk is handed on as it arrives and
/// read for usage on the side. Dropping it (the client went away) drops the upstream
/// response, which closes that connection and so cancels the request upstream.
struct Tap {
    inner: ByteStream,
    reader: Option<UsageReader>,
    finish: Option<Finish>,
    /// Bytes still to come when the upstream gave a length: the client's side stops polling
    /// once it has them all, so the answer is complete when this reaches 0.
    remaining: Option<u64>,
}

impl Tap {
    fn end(&mut self, completed: bool) {
        if let (Some(reader), Some(finish)) = (self.reader.take(), self.finish.take()) {
            finish.done(reader.finish(), completed);
        }
    }
}

impl Stream for Tap {
    type Item = Result<Bytes, reqwest::Error>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let polled = self.inner.as_mut().poll_next(cx);
        match &polled {
            std::task::Poll::Ready(Some(Ok(chunk))) => {
                if let Some(reader) = self.reader.as_mut() {
                    reader.feed(chunk);
                }
                let len = chunk.len() as u64;
                if let Some(remaining) = self.remaining.as_mut() {
                    *remaining = remaining.saturating_sub(len);
                    if *remaining == 0 {
                        self.end(true);
                    }
                }
            }
            std::task::Poll::Ready(Some(Err(_))) => self.end(false),
            std::task::Poll::Ready(None) => self.end(true),
            std::task::Poll::Pending => {}
        }
        polled
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.end(false);
    }
}

/// Requires the gateway's token in `x-ctxgc-token` when one is set.
async fn check_token(
    State((guard, required)): State<(Guard, bool)>,
    request: Request,
    next: Next,
) -> Response {
    if !required {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(TOKEN_HEADER)
        .and_then(|h| h.to_str().ok())
        .map(str::trim);
    if presented.is_some_and(|t| guard.token_matches(t)) {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            "missing or wrong gateway token (x-ctxgc-token: $CTXGC_TOKEN)\n",
        )
            .into_response()
    }
}

async fn metrics(State(gateway): State<Arc<Gateway>>) -> Response {
    let mut text = gateway.metrics.render();
    if let Some(sessions) = &gateway.sessions {
        let counts = sessions.commit_counts();
        for (name, help, value) in [
            (
                "ctxgc_gateway_store_commits_total",
                "Store commits of appended items (one per group of requests that arrived together).",
                counts.commits,
            ),
            (
                "ctxgc_gateway_store_appends_total",
                "Appends of requests' new items, carried by those commits.",
                counts.appends,
            ),
        ] {
            text.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"
            ));
        }
    }
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

/// The application: `/metrics`, and every other path forwarded; behind the checks.
pub fn router(gateway: Arc<Gateway>, local: SocketAddr) -> Router {
    let security = HttpSecurity {
        token: gateway.options.token.clone().unwrap_or_default(),
        allowed_hosts: gateway.options.allowed_hosts.clone(),
        allowed_origins: gateway.options.allowed_origins.clone(),
        max_body_bytes: gateway.options.max_body_bytes,
    };
    let guard = Guard::new(&security, local);
    let token_required = gateway.options.token.is_some();
    Router::new()
        .route("/metrics", axum::routing::get(metrics))
        .fallback(forward)
        .with_state(gateway)
        .layer(middleware::from_fn_with_state(guard.clone(), check_body))
        .layer(middleware::from_fn_with_state(
            (guard.clone(), token_required),
            check_token,
        ))
        .layer(middleware::from_fn_with_state(guard.clone(), check_origin))
        .layer(middleware::from_fn_with_state(guard, check_host))
}

/// The conversation a request belongs to.
struct Named {
    /// The key its sessions are found by: the name, scoped by the tenant when there is one.
    key: String,
    /// The session name (`x-ctxgc-session`, or the hash of its opening).
    name: String,
    /// The keyed hash of its credentials.
    tenant: Option<String>,
}

/// What compiling a request gave.
struct Prepared {
    body: Bytes,
    format: Option<Format>,
    named: Option<Named>,
    compiled: Option<crate::sessions::Compiled>,
    compile_error: Option<String>,
    compile_us: u64,
    stream: bool,
}

/// Compiles a conversation request; a body the gateway cannot read is answered with 400.
async fn prepare(
    gateway: &Arc<Gateway>,
    format: Format,
    headers: &HeaderMap,
    query: Option<&str>,
    body: Bytes,
) -> Result<Prepared, Response> {
    let started = Instant::now();
    let mut prepared = Prepared {
        body: body.clone(),
        format: Some(format),
        named: None,
        compiled: None,
        compile_error: None,
        compile_us: 0,
        stream: false,
    };
    let Some(sessions) = gateway.sessions.clone() else {
        return Ok(prepared);
    };
    let named = match headers.get(SESSION_HEADER) {
        None => None,
        Some(v) => match v.to_str() {
            Ok(s) if valid_session_name(s) => Some(s.to_owned()),
            _ => {
                return Err(error_response(
                    StatusCode::BAD_REQUEST,
                    Some(format),
                    "invalid_request_error",
                    "x-ctxgc-session must be 1 to 128 characters of A-Z a-z 0-9 . _ : -",
                ));
            }
        },
    };
    let headers = headers.clone();
    let query = query.map(str::to_owned);
    let slots = gateway.compile_slots.clone();
    let runtime = tokio::runtime::Handle::current();
    let result = tokio::task::spawn_blocking(move || {
        // Parsing borrows the body (each message stays its raw bytes), so it is cheap; what
        // costs memory is a whole compile. Only that waits for one of the compile slots: a
        // request that extends a conversation held in memory costs what it appends and goes
        // past the queue instead of waiting behind the whole compiles of new conversations.
        let parsed = parse(&body, format).map_err(|e| (StatusCode::BAD_REQUEST, e.0))?;
        let conv = match parsed {
            Parsed::Conversation(c) => c,
            Parsed::Nothing { stream } => return Ok((None, None, stream)),
        };
        let stream = conv.stream;
        // A conversation belongs to the credentials it came with: the same opening (or the
        // same session name) from two API keys is two conversations.
        let tenant = match sessions.tenant_of(&headers, query.as_deref()) {
            Ok(t) => t,
            Err(e) => return Ok((None, Some(Err(e.to_string())), stream)),
        };
        let name = named.unwrap_or_else(|| conv.prefix_key());
        let key = crate::sessions::scoped_key(&name, tenant.as_deref());
        let scope = Some(Named { key, name, tenant });
        let key = scope.as_ref().map_or("", |s| s.key.as_str());
        // A closed semaphore is never made, so the permit always comes; without one the
        // compile still runs rather than failing the request. (This is a blocking thread:
        // waiting here holds no runtime worker.)
        let _permit = if sessions.holds_prefix(key, &conv) {
            None
        } else {
            runtime.block_on(slots.acquire_owned()).ok()
        };
        match sessions.compile(key, &conv) {
            Ok(compiled) => Ok((scope, Some(Ok(compiled)), stream)),
            Err(SessionError::Invalid(e)) => Err((StatusCode::BAD_REQUEST, e.to_string())),
            Err(SessionError::Store(e)) => Ok((scope, Some(Err(e.to_string())), stream)),
        }
    })
    .await;
    prepared.compile_us = started.elapsed().as_micros() as u64;
    match result {
        Ok(Ok((named, compiled, stream))) => {
            prepared.named = named;
            prepared.stream = stream;
            match compiled {
                Some(Ok(mut c)) => {
                    if gateway.options.cache_breakpoints
                        && format.wire().takes_cache_breakpoints()
                        && let Some(marked) = crate::breakpoints::add_breakpoints(&c.body)
                    {
                        c.body = marked;
                    }
                    prepared.body = Bytes::from(std::mem::take(&mut c.body));
                    prepared.compiled = Some(c);
                }
                // The store failed: the request goes on as the client sent it (nothing is
                // lost, nothing is compiled), and the log line says why.
                Some(Err(e)) => prepared.compile_error = Some(e),
                None => {}
            }
            Ok(prepared)
        }
        Ok(Err((status, message))) => Err(error_response(
            status,
            Some(format),
            "invalid_request_error",
            &format!("ctxgc gateway: {message}"),
        )),
        Err(join) => Err(error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            Some(format),
            "api_error",
            &format!("ctxgc gateway: compiling failed: {join}"),
        )),
    }
}

/// The conversation a compiled request's recall calls are answered from.
fn recall_scope(prepared: &Prepared) -> Option<recall::Scope> {
    let compiled = prepared.compiled.as_ref()?;
    Some(recall::Scope {
        key: prepared.named.as_ref()?.key.clone(),
        context_id: compiled.context_id.clone(),
    })
}

/// Session names: short, printable, safe in labels and logs.
fn valid_session_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// Sends a request upstream; the answer's head within the timeout.
pub(crate) async fn send(
    gateway: &Gateway,
    format: Option<Format>,
    method: Method,
    url: &str,
    headers: HeaderMap,
    body: Bytes,
) -> Result<reqwest::Response, Response> {
    let request = gateway
        .client
        .request(method, url)
        .headers(headers)
        .body(body);
    match tokio::time::timeout(gateway.options.timeout, request.send()).await {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(e)) if e.is_timeout() => Err(error_response(
            StatusCode::GATEWAY_TIMEOUT,
            format,
            "timeout",
            "ctxgc gateway: the upstream did not answer in time",
        )),
        Ok(Err(e)) => Err(error_response(
            StatusCode::BAD_GATEWAY,
            format,
            "api_connection_error",
            &format!(
                "ctxgc gateway: the upstream could not be reached: {}",
                error_chain(e)
            ),
        )),
        Err(_) => Err(error_response(
            StatusCode::GATEWAY_TIMEOUT,
            format,
            "timeout",
            &format!(
                "ctxgc gateway: the upstream did not answer within {} s",
                gateway.options.timeout.as_secs()
            ),
        )),
    }
}

/// An error and its causes, without the URL (its query can hold a key).
fn error_chain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The client's response: the upstream's status and headers (less hop-by-hop ones) and its
/// body passed on chunk by chunk.
fn relay(upstream: reqwest::Response, finish: Finish) -> Response {
    let status = upstream.status();
    let mut headers = HeaderMap::with_capacity(upstream.headers().len());
    for (name, value) in upstream.headers() {
        if !hop_by_hop(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    let stream = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let tap = Tap {
        remaining: upstream.content_length(),
        inner: Box::pin(upstream.bytes_stream()),
        reader: Some(UsageReader::new(stream)),
        finish: Some(finish),
    };
    let mut response = Response::new(Body::from_stream(tap));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// Every request other than `/metrics`.
async fn forward(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    // The body was read whole (under the limit) by the body check.
    let body = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(_) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                None,
                "invalid_request_error",
                "ctxgc gateway: the request body could not be read",
            );
        }
    };
    let path = parts.uri.path().to_owned();
    let anthropic_header = parts.headers.contains_key("anthropic-version");
    let upstream = gateway.upstreams.route(&path, anthropic_header).clone();
    let provider_path = upstream.provider_path(&path);
    let url = upstream.url_for(&path, parts.uri.query());
    let bytes_in = body.len() as u64;
    let original = body.clone();
    let format = (parts.method == Method::POST)
        .then(|| format_of(provider_path))
        .flatten();
    let prepared = match format {
        Some(format) => {
            match prepare(&gateway, format, &parts.headers, parts.uri.query(), body).await {
                Ok(p) => p,
                Err(response) => return response,
            }
        }
        None => Prepared {
            body,
            format: None,
            named: None,
            compiled: None,
            compile_error: None,
            compile_us: 0,
            stream: false,
        },
    };
    let headers = upstream_headers(&parts.headers);
    // What the gateway added before the request went upstream (the body was read by the
    // body check already): parsing, compiling, storing.
    let overhead_us = started.elapsed().as_micros() as u64;
    let mut line = LogLine {
        method: parts.method.to_string(),
        path: path.clone(),
        upstream: upstream.base.clone(),
        session: prepared.named.as_ref().map(|n| n.name.clone()),
        tenant: prepared.named.as_ref().and_then(|n| n.tenant.clone()),
        compile: prepared.compiled.as_ref().map(|c| c.path),
        items: prepared.compiled.as_ref().map(|c| c.items),
        new_items: prepared.compiled.as_ref().map(|c| c.new_items),
        receipts: prepared.compiled.as_ref().map(|c| c.receipts),
        bytes_in,
        bytes_out: prepared.body.len() as u64,
        compile_error: prepared.compile_error.clone(),
        compile_us: prepared.compile_us,
        overhead_us,
        ..LogLine::default()
    };
    let incremental = prepared
        .compiled
        .as_ref()
        .is_some_and(|c| c.path == CompilePath::Incremental);
    let savings = crate::savings::Pending::of(
        prepared.compiled.as_ref(),
        prepared.format,
        provider_path,
        &original,
        &prepared.body,
    );

    // Recall round trips for answers that are not streamed read the answer whole.
    if gateway.options.recall
        && !prepared.stream
        && let (Some(format), Some(scope)) = (prepared.format, recall_scope(&prepared))
    {
        let outcome = recall::round_trip(
            &gateway,
            format,
            &scope,
            parts.method.clone(),
            &url,
            headers,
            prepared.body,
        )
        .await;
        let (response, calls, usage) = match outcome {
            Ok(done) => done,
            Err(response) => (response, 0, Usage::default()),
        };
        line.recall_calls = Some(calls);
        line.status = response.status().as_u16();
        Finish {
            gateway: gateway.clone(),
            line,
            incremental,
            started,
            savings,
        }
        .done(usage, true);
        return with_overhead(response, overhead_us);
    }

    // A streamed answer that may call the recall tool: the gateway writes the client's
    // stream itself, round by round.
    let stream_recall = match (prepared.format, recall_scope(&prepared)) {
        (Some(format), Some(scope))
            if gateway.options.recall
                && prepared.stream
                && crate::recall_stream::supported(format) =>
        {
            Some((format, scope, headers.clone(), prepared.body.clone()))
        }
        _ => None,
    };
    let response = match send(
        &gateway,
        prepared.format,
        parts.method.clone(),
        &url,
        headers,
        prepared.body,
    )
    .await
    {
        Ok(r) => r,
        Err(response) => {
            line.status = response.status().as_u16();
            Finish {
                gateway: gateway.clone(),
                line,
                incremental,
                started,
                savings,
            }
            .done(Usage::default(), false);
            return with_overhead(response, overhead_us);
        }
    };
    line.status = response.status().as_u16();
    if let Some((format, scope, headers, body)) = stream_recall
        && response.status().is_success()
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"))
    {
        let mut finish = Finish {
            gateway: gateway.clone(),
            line,
            incremental,
            started,
            savings,
        };
        let on_done: crate::recall_stream::OnDone = Box::new(move |usage, calls, completed| {
            finish.line.recall_calls = Some(calls);
            finish.done(usage, completed);
        });
        let response = crate::recall_stream::relay(
            gateway.clone(),
            format,
            scope,
            parts.method.clone(),
            url,
            headers,
            body,
            response,
            on_done,
        );
        return with_overhead(response, overhead_us);
    }
    let response = relay(
        response,
        Finish {
            gateway: gateway.clone(),
            line,
            incremental,
            started,
            savings,
        },
    );
    with_overhead(response, overhead_us)
}

/// The response header that says what the gateway added before the request went upstream,
/// in milliseconds (parse, compile, store; the provider's own time is not in it).
pub const OVERHEAD_HEADER: &str = "x-ctxgc-overhead-ms";

/// `response` with [`OVERHEAD_HEADER`] set.
fn with_overhead(mut response: Response, overhead_us: u64) -> Response {
    let text = format!("{}.{:03}", overhead_us / 1000, overhead_us % 1000);
    if let Ok(value) = HeaderValue::from_str(&text) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(OVERHEAD_HEADER), value);
    }
    response
}

/// How long an upstream may take to start answering, by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
