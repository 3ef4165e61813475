//! The security rules of the HTTP side and of upstream credentials, against the real proxy
//! on loopback and real upstreams.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ctxgc_proxy::config::{ServerSpec, UpstreamTransport, parse_servers};
use ctxgc_proxy::shaping::PassThrough;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(20);
const TOKEN: &str = "agent-token-7f3a9c";

fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string()
}

async fn post(
    url: &str,
    host: Option<&str>,
    token: Option<&str>,
    body: String,
) -> reqwest::StatusCode {
    let client = reqwest::Client::new();
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(host) = host {
        request = request.header("host", host);
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.expect("request sent").status()
}

#[tokio::test]
async fn token_host_and_body_limit_are_enforced() {
    let servers = set_of(vec![stdio_server("s", &["--tools", "echo"])], &[]);
    let mut rules = security(TOKEN);
    rules.allowed_hosts = vec!["tunnel.example".into()];
    rules.max_body_bytes = 16 * 1024;
    let proxy = HttpProxy::start(core(&servers, Arc::new(PassThrough), TIMEOUT), rules).await;
    let mcp = format!("{}/mcp", proxy.base);

    assert_eq!(post(&mcp, None, None, initialize_body()).await, 401);
    assert_eq!(
        post(&mcp, None, Some("wrong-token"), initialize_body()).await,
        401
    );
    assert_eq!(
        post(
            &mcp,
            None,
            Some(&TOKEN[..TOKEN.len() - 1]),
            initialize_body()
        )
        .await,
        401
    );
    // A foreign Host is refused even with the right token (DNS rebinding).
    assert_eq!(
        post(&mcp, Some("evil.example"), Some(TOKEN), initialize_body()).await,
        403
    );
    assert_eq!(
        post(
            &mcp,
            Some("localhost.evil.example:80"),
            Some(TOKEN),
            initialize_body()
        )
        .await,
        403
    );
    // ...and the Host check comes first: a foreign page learns nothing about the token.
    assert_eq!(
        post(&mcp, Some("evil.example"), None, initialize_body()).await,
        403
    );
    // Listed hosts and local ones pass.
    assert_eq!(
        post(&mcp, Some("tunnel.example"), Some(TOKEN), initialize_body()).await,
        200
    );
    assert_eq!(post(&mcp, None, Some(TOKEN), initialize_body()).await, 200);
    // Bodies over the limit are refused.
    let huge = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x".repeat(64 * 1024)}}})
    .to_string();
    assert_eq!(post(&mcp, None, Some(TOKEN), huge).await, 413);

    // The report sits behind the token too (header or ?token= for a browser).
    let client = reqwest::Client::new();
    let report = format!("{}/report", proxy.base);
    assert_eq!(client.get(&report).send().await.unwrap().status(), 401);
    assert_eq!(
        client
            .get(format!("{report}?token=nope"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    // Authorised, but pass-through mode keeps no report.
    assert_eq!(
        client
            .get(format!("{report}?token={TOKEN}"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );

    // A real agent with the token works; one without cannot even connect.
    let (agent, _) = proxy.agent(TOKEN).await;
    assert_eq!(
        call_text(&agent, "echo", json!({"text": "hello"})).await,
        ("hello".to_owned(), false)
    );
    agent.cancel().await.unwrap();
    let refused = {
        use rmcp::ServiceExt;
        let config =
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                mcp.clone(),
            )
            .auth_header("wrong");
        Agent::default()
            .serve(rmcp::transport::StreamableHttpClientTransport::from_config(
                config,
            ))
            .await
    };
    assert!(refused.is_err());
}

/// Everything the agent can receive, as one string, to search for credentials in.
async fn everything_the_agent_sees(agent: &AgentSession) -> String {
    let mut seen = String::new();
    let tools = agent.list_all_tools().await.unwrap();
    seen.push_str(&serde_json::to_string(&tools).unwrap());
    if let Some(info) = agent.peer_info() {
        seen.push_str(&serde_json::to_string(&*info).unwrap());
    }
    for tool in [
        "whoami",
        "leak_credential",
        "fail_with_credential",
        "echo",
        "no_such_tool",
    ] {
        for name in [
            tool.to_owned(),
            format!("env_{tool}"),
            format!("hdr_{tool}"),
        ] {
            match agent.call_tool(call(&name, json!({"text": "x"}))).await {
                Ok(result) => seen.push_str(&serde_json::to_string(&result).unwrap()),
                Err(err) => seen.push_str(&err.to_string()),
            }
        }
    }
    seen
}

#[tokio::test]
async fn upstream_credentials_never_reach_the_agent() {
    let env_secret = "env-secret-5b1c77e2";
    let header_secret = "hdr-secret-90ad3f41";
    let upstream = HttpTestServer::start(&["--require-bearer", header_secret]);
    let file = json!({"mcpServers": {
        "env": {"command": TEST_SERVER, "args": ["--require-env", "TEST_API_KEY"],
                "env": {"TEST_API_KEY": "${CTXGC_TEST_ENV_SECRET}"}},
        "hdr": {"url": upstream.url, "headers": {"Authorization": "Bearer ${CTXGC_TEST_HDR_SECRET}"}},
        // Unreachable, with the secret in its URL: its start error must not quote it.
        "down": {"url": format!("http://127.0.0.1:9/mcp?key=${{CTXGC_TEST_HDR_SECRET}}")}
    }})
    .to_string();
    let lookup = |name: &str| match name {
        "CTXGC_TEST_ENV_SECRET" => Some(env_secret.to_owned()),
        "CTXGC_TEST_HDR_SECRET" => Some(header_secret.to_owned()),
        _ => None,
    };
    let servers = parse_servers(&file, "mcp.json", &lookup).unwrap();

    for over_http in [false, true] {
        let core = core(&servers, Arc::new(PassThrough), TIMEOUT);
        let (seen, authenticated) = if over_http {
            let proxy = HttpProxy::start(core, security(TOKEN)).await;
            let (agent, _) = proxy.agent(TOKEN).await;
            let seen = everything_the_agent_sees(&agent).await;
            let auth = call_text(&agent, "env_whoami", json!({})).await.0
                + &call_text(&agent, "hdr_whoami", json!({})).await.0;
            agent.cancel().await.unwrap();
            (seen, auth)
        } else {
            let (agent, _) = proxy_over_pipe(core).await;
            let seen = everything_the_agent_sees(&agent).await;
            let auth = call_text(&agent, "env_whoami", json!({})).await.0
                + &call_text(&agent, "hdr_whoami", json!({})).await.0;
            agent.cancel().await.unwrap();
            (seen, auth)
        };
        // The credentials did reach the upstreams...
        assert_eq!(
            authenticated,
            r#"{"authenticated":true}{"authenticated":true}"#
        );
        // ...the misbehaving tools did run and answer...
        assert!(seen.contains("credential hidden by ctxgc"), "{seen}");
        // ...and nothing the agent received holds either credential.
        assert!(!seen.contains(env_secret), "env secret leaked: {seen}");
        assert!(
            !seen.contains(header_secret),
            "header secret leaked: {seen}"
        );
    }
}

#[tokio::test]
async fn a_start_error_does_not_quote_the_credential() {
    let secret = "url-secret-c0ffee42";
    let servers = set_of(
        vec![ServerSpec {
            name: "down".into(),
            transport: UpstreamTransport::Http {
                url: format!("http://127.0.0.1:9/mcp?key={secret}"),
                headers: vec![],
            },
        }],
        &[secret],
    );
    let (agent, _) = proxy_over_pipe(core(&servers, Arc::new(PassThrough), TIMEOUT)).await;
    // No tool is known; the agent's call is refused without the URL's key.
    let err = agent
        .call_tool(call("whoami", json!({})))
        .await
        .unwrap_err()
        .to_string();
    assert!(!err.contains(secret), "{err}");
    agent.cancel().await.unwrap();
}
