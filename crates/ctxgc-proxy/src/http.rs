//! The proxy over streamable HTTP (`--http PORT`): `/mcp` for the agent, `/report` for a
//! person, behind the checks every ctxgc server shares ([`ctxgc_http_guard`]: Host, Origin,
//! bearer token, body size and JSON, in that order).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::extract::State;
use axum::http::StatusCode;
use axum::middleware;
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use ctxgc_http_guard::{
    Guard, HttpSecurity, LOCAL_HOSTS, bearer_token, check_body, check_host, check_origin,
    query_token, refuse,
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::server::{ProxyCore, ProxyServer};

async fn check_token(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let from_header = bearer_token(request.headers());
    // A browser cannot send a header when following a link: the report also takes the token
    // in its query (`/report?token=...`); the MCP endpoint does not.
    let from_query = if request.uri().path() == "/report" {
        request.uri().query().and_then(query_token)
    } else {
        None
    };
    let ok = from_header
        .iter()
        .chain(from_query.iter())
        .any(|t| guard.token_matches(t));
    if ok {
        next.run(request).await
    } else {
        refuse(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token (Authorization: Bearer $CTXGC_TOKEN)\n",
        )
    }
}

async fn report(State(core): State<Arc<ProxyCore>>) -> Response {
    match core.shaper().report_html() {
        Some(html) => Html(html).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "no report: the proxy keeps a report in automatic mode (--auto DIR)\n",
        )
            .into_response(),
    }
}

/// The HTTP application: `/mcp` (streamable HTTP MCP) and `/report`, behind the checks;
/// `local` is the address the listener is bound to.
pub fn router(core: Arc<ProxyCore>, security: &HttpSecurity, local: SocketAddr) -> Router {
    let guard = Guard::new(security, local);
    // The checks above are the proxy's; the MCP layer's own Host check stays as a second
    // line, with the same hosts.
    let mut hosts: Vec<String> = LOCAL_HOSTS.iter().map(|h| (*h).to_owned()).collect();
    if !local.ip().is_unspecified() {
        hosts.push(local.ip().to_string());
    }
    hosts.extend(guard.allowed_hosts().iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_max_request_body_bytes(security.max_body_bytes);
    let mcp_core = core.clone();
    let mcp: StreamableHttpService<ProxyServer, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(ProxyServer::new(mcp_core.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .nest_service("/mcp", mcp)
        .route("/report", get(report).with_state(core))
        .layer(middleware::from_fn_with_state(guard.clone(), check_body))
        .layer(middleware::from_fn_with_state(guard.clone(), check_token))
        .layer(middleware::from_fn_with_state(guard.clone(), check_origin))
        .layer(middleware::from_fn_with_state(guard, check_host))
}

/// Serves [`router`] on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    core: Arc<ProxyCore>,
    security: &HttpSecurity,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(core, security, listener.local_addr()?);
    // Small writes (SSE events) must not wait for the peer's delayed ACK (Nagle).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
