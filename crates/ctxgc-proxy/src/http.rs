//! The proxy over streamable HTTP (`--http PORT`): `/mcp` for the agent, `/report` for a
//! person. Every request must carry the bearer token (compared in constant time), its `Host`
//! must be local or listed with `--allowed-host` (against DNS rebinding), and request bodies
//! are size-limited. The order of the checks is fixed: Host, then token, then body size, so a
//! request from a foreign page learns nothing about the token.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use subtle::ConstantTimeEq;
use tower_http::limit::RequestBodyLimitLayer;

use crate::server::{ProxyCore, ProxyServer};

/// Default limit on request bodies: far above any tool call, far below a memory problem.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Hosts always accepted in `Host`.
pub const LOCAL_HOSTS: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// How the HTTP side is protected.
#[derive(Debug, Clone)]
pub struct HttpSecurity {
    /// The bearer token every request must carry.
    pub token: String,
    /// Hosts accepted besides the local ones (`host` or `host:port`).
    pub allowed_hosts: Vec<String>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
}

#[derive(Clone)]
struct Guard {
    token_digest: [u8; 32],
    allowed_hosts: Arc<Vec<String>>,
}

impl Guard {
    fn token_matches(&self, presented: &str) -> bool {
        // Digests first: equal lengths, so the comparison time says nothing about the
        // token's length either.
        let presented = blake3::hash(presented.as_bytes());
        bool::from(presented.as_bytes().ct_eq(&self.token_digest))
    }

    fn host_allowed(&self, authority: &str) -> bool {
        let authority = authority.trim().to_ascii_lowercase();
        let host = host_of(&authority);
        LOCAL_HOSTS.contains(&host)
            || self
                .allowed_hosts
                .iter()
                .any(|allowed| allowed == &authority || allowed == host)
    }
}

/// The host part of an authority (`[::1]:8080` → `::1`, `example.com:80` → `example.com`).
fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    }
}

fn refuse(status: StatusCode, message: &'static str) -> Response {
    let mut response = (status, message).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"ctxgc-proxy\""),
        );
    }
    response
}

async fn check_host(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let authority = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.to_string()));
    match authority {
        Some(a) if guard.host_allowed(&a) => next.run(request).await,
        _ => refuse(
            StatusCode::FORBIDDEN,
            "Host not allowed: only local hosts and those given with --allowed-host\n",
        ),
    }
}

async fn check_token(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let from_header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .map(str::trim)
        .map(str::to_owned);
    // A browser cannot send a header when following a link: the report also takes the token
    // in its query (`/report?token=...`); the MCP endpoint does not.
    let from_query = if request.uri().path() == "/report" {
        request.uri().query().and_then(|q| {
            q.split('&')
                .find_map(|pair| pair.strip_prefix("token="))
                .map(percent_decode)
        })
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

/// Decodes `%XX` escapes (and `+` as a space) of a query value; malformed escapes stay.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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

/// The HTTP application: `/mcp` (streamable HTTP MCP) and `/report`, behind the checks.
pub fn router(core: Arc<ProxyCore>, security: &HttpSecurity) -> Router {
    let guard = Guard {
        token_digest: *blake3::hash(security.token.as_bytes()).as_bytes(),
        allowed_hosts: Arc::new(
            security
                .allowed_hosts
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .collect(),
        ),
    };
    let mut hosts: Vec<String> = LOCAL_HOSTS.iter().map(|h| (*h).to_owned()).collect();
    hosts.extend(guard.allowed_hosts.iter().cloned());
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
        .layer(RequestBodyLimitLayer::new(security.max_body_bytes))
        .layer(middleware::from_fn_with_state(guard.clone(), check_token))
        .layer(middleware::from_fn_with_state(guard, check_host))
}

/// Serves [`router`] on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    core: Arc<ProxyCore>,
    security: &HttpSecurity,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(core, security);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_part_of_authorities() {
        assert_eq!(host_of("127.0.0.1:8799"), "127.0.0.1");
        assert_eq!(host_of("[::1]:8799"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
        let guard = Guard {
            token_digest: *blake3::hash(b"t").as_bytes(),
            allowed_hosts: Arc::new(vec!["tunnel.example".into()]),
        };
        assert!(guard.host_allowed("LOCALHOST:1"));
        assert!(guard.host_allowed("tunnel.example:443"));
        assert!(!guard.host_allowed("evil.example"));
        assert!(!guard.host_allowed("localhost.evil.example"));
        assert!(guard.token_matches("t"));
        assert!(!guard.token_matches("t "));
        assert!(!guard.token_matches(""));
        assert_eq!(percent_decode("a%2Bb+c%zz%4"), "a+b c%zz%4");
    }
}
