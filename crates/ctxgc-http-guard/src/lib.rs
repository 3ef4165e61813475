//! # ctxgc-http-guard
//!
//! The checks every ctxgc HTTP server (the MCP proxy's `--http`, the gateway, the console)
//! puts in front of its routes, so all of them refuse the same requests. Every request must
//! carry the bearer token (compared in constant time); its `Host` must name the server's own
//! address and port, or one listed with `--allowed-host` (against DNS rebinding); a browser's
//! `Origin` must be the server's own or one listed with `--allowed-origin`; request bodies are size-limited (chunked ones too: 413) and must be
//! JSON (400 with a JSON-RPC parse error otherwise). The order of the checks is fixed: Host,
//! Origin, token, body, so a request from a foreign page learns nothing about the token.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

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
    /// Browser origins accepted besides the proxy's own (`scheme://host[:port]`).
    pub allowed_origins: Vec<String>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
}

impl HttpSecurity {
    /// Checks the token before the proxy starts: it must not be empty, whitespace only, or
    /// begin or end with whitespace (a header value is trimmed, so such a token could never
    /// be presented as set).
    ///
    /// ```
    /// use ctxgc_http_guard::HttpSecurity;
    /// let mut s = HttpSecurity { token: "   ".into(), allowed_hosts: vec![], allowed_origins: vec![], max_body_bytes: 1024 };
    /// assert!(s.check_token().is_err());
    /// s.token = "k3y-9f2a".into();
    /// assert!(s.check_token().is_ok());
    /// ```
    pub fn check_token(&self) -> Result<(), String> {
        if self.token.trim().is_empty() {
            return Err(
                "over HTTP a token is required: set CTXGC_TOKEN (or --token) to a secret that is not empty or blank"
                    .into(),
            );
        }
        if self.token.trim() != self.token {
            return Err("the HTTP token must not begin or end with whitespace".into());
        }
        Ok(())
    }
}

/// The checks of [`HttpSecurity`], ready to run as middleware (also used by other servers
/// that share the proxy's rules, like the gateway).
#[derive(Clone)]
pub struct Guard {
    token_digest: [u8; 32],
    allowed_hosts: Arc<Vec<String>>,
    allowed_origins: Arc<Vec<String>>,
    /// The address the proxy listens on: its port must be the one a `Host` names.
    local: SocketAddr,
    max_body_bytes: usize,
}

impl Guard {
    /// The checks for a server listening on `local`.
    pub fn new(security: &HttpSecurity, local: SocketAddr) -> Guard {
        let lowered = |list: &[String]| -> Arc<Vec<String>> {
            Arc::new(
                list.iter()
                    .map(|h| h.trim().trim_end_matches('/').to_ascii_lowercase())
                    .collect(),
            )
        };
        Guard {
            token_digest: *blake3::hash(security.token.as_bytes()).as_bytes(),
            allowed_hosts: lowered(&security.allowed_hosts),
            allowed_origins: lowered(&security.allowed_origins),
            local,
            max_body_bytes: security.max_body_bytes,
        }
    }

    /// The hosts accepted in `Host` beside the local ones and the bound address, lower-cased.
    pub fn allowed_hosts(&self) -> &[String] {
        &self.allowed_hosts
    }

    /// Whether `presented` is the token, compared in constant time.
    pub fn token_matches(&self, presented: &str) -> bool {
        // Digests first: equal lengths, so the comparison time says nothing about the
        // token's length either.
        let presented = blake3::hash(presented.as_bytes());
        bool::from(presented.as_bytes().ct_eq(&self.token_digest))
    }

    /// Whether `authority` (a `Host` value) names this proxy: a local name or the bound
    /// address with the proxy's own port, or an entry of `--allowed-host` (`host:port`
    /// exactly; a bare `host` with no port, as behind a tunnel, or with the proxy's port).
    pub fn host_allowed(&self, authority: &str) -> bool {
        let authority = authority.trim().to_ascii_lowercase();
        let host = host_of(&authority);
        let port = port_of(&authority);
        let own_port = self.local.port();
        let own_ip = self.local.ip().to_string();
        let local_name =
            LOCAL_HOSTS.contains(&host) || (!self.local.ip().is_unspecified() && host == own_ip);
        if local_name && port.unwrap_or(80) == own_port {
            return true;
        }
        self.allowed_hosts.iter().any(|allowed| {
            if port_of(allowed).is_some() {
                allowed == &authority
            } else {
                allowed == host && port.is_none_or(|p| p == own_port)
            }
        })
    }

    /// Whether a browser `Origin` may call: the proxy's own origin or one given with
    /// `--allowed-origin`. `Origin: null` (sandboxed pages, files) is refused.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
        if let Some(authority) = origin.strip_prefix("http://")
            && !authority.contains('/')
        {
            let host = host_of(authority);
            let port = port_of(authority).unwrap_or(80);
            if (LOCAL_HOSTS.contains(&host) || host == self.local.ip().to_string())
                && port == self.local.port()
            {
                return true;
            }
        }
        self.allowed_origins
            .iter()
            .any(|allowed| allowed == &origin)
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

/// The port of an authority, when it names one (`[::1]:8080` → 8080).
fn port_of(authority: &str) -> Option<u16> {
    let rest = match authority.strip_prefix('[') {
        Some(rest) => rest
            .split_once(']')
            .map(|(_, after)| after)?
            .strip_prefix(':')?,
        None => authority.rsplit_once(':').map(|(_, port)| port)?,
    };
    rest.parse().ok()
}

/// A refusal with a plain-text reason; a 401 names the bearer scheme it wants.
pub fn refuse(status: StatusCode, message: &'static str) -> Response {
    let mut response = (status, message).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"ctxgc-proxy\""),
        );
    }
    response
}

/// Middleware: refuses (403) a request whose `Host` does not name this server.
pub async fn check_host(State(guard): State<Guard>, request: Request, next: Next) -> Response {
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
            "Host not allowed: only this server's own address and port, and hosts given with --allowed-host\n",
        ),
    }
}

/// Middleware: refuses (403) a browser request from a foreign `Origin`.
pub async fn check_origin(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    // No Origin: not a browser (or a same-origin GET); the token still protects the call.
    let allowed = match request.headers().get(header::ORIGIN) {
        None => true,
        Some(origin) => origin
            .to_str()
            .is_ok_and(|origin| guard.origin_allowed(origin)),
    };
    if allowed {
        next.run(request).await
    } else {
        refuse(
            StatusCode::FORBIDDEN,
            "Origin not allowed: only this server's own and those given with --allowed-origin\n",
        )
    }
}

/// The JSON-RPC answer to a body that is not JSON (`id` is null: none could be read).
pub fn parse_error_body(detail: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": format!("Parse error: {detail}")},
    })
    .to_string()
}

/// Reads the whole body under the size limit (a declared length or a chunked stream over
/// it: 413) and, for MCP posts, refuses what is not JSON (400, JSON-RPC -32700), before
/// the MCP layer sees it.
pub async fn check_body(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let too_large = || {
        refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body over the limit (--max-body-bytes)\n",
        )
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > guard.max_body_bytes as u64) {
        return too_large();
    }
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, guard.max_body_bytes);
    let bytes = match http_body_util::BodyExt::collect(limited).await {
        Ok(collected) => collected.to_bytes(),
        Err(err) if err.is::<http_body_util::LengthLimitError>() => return too_large(),
        Err(_) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "the request body could not be read\n",
            );
        }
    };
    if parts.method == axum::http::Method::POST && parts.uri.path().starts_with("/mcp") {
        let text = bytes
            .strip_prefix(b"\xEF\xBB\xBF".as_slice())
            .unwrap_or(&bytes);
        if let Err(err) = serde_json::from_slice::<serde::de::IgnoredAny>(text) {
            let mut response = (
                StatusCode::BAD_REQUEST,
                parse_error_body(&format!("the body is not JSON ({err})")),
            )
                .into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            return response;
        }
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

/// The token of an `Authorization: Bearer TOKEN` header, trimmed.
pub fn bearer_token(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .map(|t| t.trim().to_owned())
}

/// The `token` parameter of a query string, decoded (`%XX` and `+`), for pages a browser opens
/// by following a link, which cannot carry a header.
///
/// ```
/// assert_eq!(ctxgc_http_guard::query_token("a=1&token=a%2Bb+c"), Some("a+b c".to_owned()));
/// assert_eq!(ctxgc_http_guard::query_token("a=1"), None);
/// ```
pub fn query_token(query: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_part_of_authorities() {
        assert_eq!(host_of("127.0.0.1:8799"), "127.0.0.1");
        assert_eq!(host_of("[::1]:8799"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
        assert_eq!(port_of("[::1]:8799"), Some(8799));
        assert_eq!(port_of("localhost"), None);
        assert_eq!(port_of("[::1]"), None);
        let guard = Guard {
            token_digest: *blake3::hash(b"t").as_bytes(),
            allowed_hosts: Arc::new(vec!["tunnel.example".into(), "lan.example:9000".into()]),
            allowed_origins: Arc::new(vec!["https://console.example".into()]),
            local: "127.0.0.1:8799".parse().unwrap(),
            max_body_bytes: 1024,
        };
        assert!(guard.host_allowed("LOCALHOST:8799"));
        assert!(guard.host_allowed("[::1]:8799"));
        assert!(!guard.host_allowed("localhost:1"));
        assert!(!guard.host_allowed("127.0.0.1"));
        assert!(guard.host_allowed("tunnel.example"));
        assert!(guard.host_allowed("tunnel.example:8799"));
        assert!(!guard.host_allowed("tunnel.example:443"));
        assert!(guard.host_allowed("lan.example:9000"));
        assert!(!guard.host_allowed("lan.example:9001"));
        assert!(!guard.host_allowed("evil.example"));
        assert!(!guard.host_allowed("localhost.evil.example"));
        assert!(guard.origin_allowed("http://localhost:8799"));
        assert!(guard.origin_allowed("https://console.example/"));
        assert!(!guard.origin_allowed("http://localhost:8800"));
        assert!(!guard.origin_allowed("null"));
        assert!(!guard.origin_allowed("https://evil.example"));
        assert!(guard.token_matches("t"));
        assert!(!guard.token_matches("t "));
        assert!(!guard.token_matches(""));
        assert_eq!(
            query_token("x=1&token=a%2Bb+c%zz%4").as_deref(),
            Some("a+b c%zz%4")
        );
    }
}
