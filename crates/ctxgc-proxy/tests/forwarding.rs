//! The MCP plumbing against real servers: the test server as a child over stdio and over
//! HTTP on loopback, the agent a real rmcp client, the proxy in between.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ctxgc_proxy::shaping::PassThrough;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn tools_are_listed_unchanged_and_calls_forwarded() {
    let servers = set_of(vec![stdio_server("travel", &[])], &[]);
    let (agent, _) = proxy_over_pipe(core(&servers, Arc::new(PassThrough), TIMEOUT)).await;
    let direct = direct_stdio(&[]).await;

    let through_proxy = agent.list_all_tools().await.unwrap();
    let upstream = direct.list_all_tools().await.unwrap();
    // Pass-through mode offers no expand: the lists are identical, field for field.
    assert_eq!(through_proxy, upstream);
    assert!(through_proxy.iter().any(|t| t.name == "search_flights"));

    let (via_proxy, is_error) = call_text(&agent, "search_flights", flights_args()).await;
    assert!(!is_error);
    let direct_result = direct
        .call_tool(call("search_flights", flights_args()))
        .await
        .unwrap();
    assert_eq!(via_proxy, text_of(&direct_result));
    let parsed: serde_json::Value = serde_json::from_str(&via_proxy).unwrap();
    assert_eq!(parsed["flights"][0]["id"], "FL-DUBLIS-100");

    agent.cancel().await.unwrap();
    direct.cancel().await.unwrap();
}

#[tokio::test]
async fn shared_tool_names_are_prefixed_with_the_server_name() {
    let servers = set_of(
        vec![
            stdio_server("alpha", &["--tools", "echo,get_customer", "--label", "A"]),
            stdio_server("beta", &["--tools", "echo,whoami", "--label", "B"]),
        ],
        &[],
    );
    let (agent, _) = proxy_over_pipe(core(&servers, Arc::new(PassThrough), TIMEOUT)).await;
    let tools = agent.list_all_tools().await.unwrap();
    assert_eq!(
        names(&tools),
        ["alpha_echo", "beta_echo", "get_customer", "whoami"]
    );
    // Description and schema of a prefixed tool are the upstream's own.
    let direct = direct_stdio(&["--tools", "echo"]).await;
    let upstream_echo = direct.list_all_tools().await.unwrap().remove(0);
    let alpha_echo = tools.iter().find(|t| t.name == "alpha_echo").unwrap();
    assert_eq!(alpha_echo.description, upstream_echo.description);
    assert_eq!(alpha_echo.input_schema, upstream_echo.input_schema);

    assert_eq!(
        call_text(&agent, "alpha_echo", json!({"text": "hi"})).await,
        ("A: hi".to_owned(), false)
    );
    assert_eq!(
        call_text(&agent, "beta_echo", json!({"text": "hi"})).await,
        ("B: hi".to_owned(), false)
    );
    let (customer, _) = call_text(&agent, "get_customer", json!({"customer_id": "C1"})).await;
    assert!(customer.contains("\"customer_id\":\"C1\""));
    // An unknown tool is a protocol error, not a silent success.
    assert!(agent.call_tool(call("echo", json!({}))).await.is_err());
    agent.cancel().await.unwrap();
    direct.cancel().await.unwrap();
}

#[tokio::test]
async fn upstream_tool_list_changes_reach_the_agent_over_stdio() {
    let servers = set_of(vec![stdio_server("dyn", &[])], &[]);
    let (agent, events) = proxy_over_pipe(core(&servers, Arc::new(PassThrough), TIMEOUT)).await;
    assert!(!names(&agent.list_all_tools().await.unwrap()).contains(&"late_tool".to_owned()));
    let (_, is_error) = call_text(&agent, "add_tool", json!({"name": "late_tool"})).await;
    assert!(!is_error);
    wait_for_list_changes(&events, 1).await;
    let tools = agent.list_all_tools().await.unwrap();
    assert!(
        names(&tools).contains(&"late_tool".to_owned()),
        "{:?}",
        names(&tools)
    );
    assert_eq!(
        call_text(&agent, "late_tool", json!({"text": "x"})).await,
        ("late_tool: x".to_owned(), false)
    );
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn http_upstream_and_http_agent_with_list_changes() {
    let upstream = HttpTestServer::start(&[]);
    let servers = set_of(
        vec![ctxgc_proxy::config::ServerSpec {
            name: "remote".into(),
            transport: ctxgc_proxy::config::UpstreamTransport::Http {
                url: upstream.url.clone(),
                headers: Vec::new(),
            },
        }],
        &[],
    );
    let proxy = HttpProxy::start(
        core(&servers, Arc::new(PassThrough), TIMEOUT),
        security("agent-token-123"),
    )
    .await;
    let (agent, events) = proxy.agent("agent-token-123").await;
    let tools = agent.list_all_tools().await.unwrap();
    assert!(names(&tools).contains(&"search_flights".to_owned()));
    let (text, is_error) = call_text(&agent, "search_flights", flights_args()).await;
    assert!(!is_error);
    assert!(text.contains("FL-DUBLIS-111"));

    call_text(&agent, "add_tool", json!({"name": "remote_late"})).await;
    wait_for_list_changes(&events, 1).await;
    assert!(names(&agent.list_all_tools().await.unwrap()).contains(&"remote_late".to_owned()));
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn crashed_stdio_upstream_is_reported_then_restarted() {
    let servers = set_of(vec![stdio_server("fragile", &[])], &[]);
    let (agent, _) = proxy_over_pipe(core(&servers, Arc::new(PassThrough), TIMEOUT)).await;
    let (message, is_error) = call_text(&agent, "crash", json!({})).await;
    assert!(is_error, "{message}");
    assert!(
        message.contains("upstream server \"fragile\" exited or closed the connection"),
        "{message}"
    );
    assert!(
        message.contains("started again on the next call"),
        "{message}"
    );
    // The next call starts the server again and is answered.
    let (text, is_error) = call_text(&agent, "echo", json!({"text": "back"})).await;
    assert_eq!((text.as_str(), is_error), ("back", false));
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn hung_and_garbled_upstreams_give_tool_errors_and_others_keep_serving() {
    let servers = set_of(
        vec![
            stdio_server("stuck", &["--tools", "hang,garbage,echo", "--label", "S"]),
            stdio_server("healthy", &["--tools", "get_customer"]),
        ],
        &[],
    );
    let (agent, _) = proxy_over_pipe(core(
        &servers,
        Arc::new(PassThrough),
        Duration::from_secs(2),
    ))
    .await;
    let (message, is_error) = call_text(&agent, "hang", json!({})).await;
    assert!(is_error);
    assert_eq!(
        message,
        "upstream server \"stuck\" did not answer tool \"hang\" within 2 s"
    );
    let (customer, is_error) =
        call_text(&agent, "get_customer", json!({"customer_id": "C9"})).await;
    assert!(!is_error && customer.contains("C9"));
    // A hung request does not wedge the server's other calls.
    assert_eq!(
        call_text(&agent, "echo", json!({"text": "still here"})).await,
        ("S: still here".to_owned(), false)
    );

    let (message, is_error) = call_text(&agent, "garbage", json!({})).await;
    assert!(is_error, "{message}");
    assert!(
        message.starts_with("upstream server \"stuck\""),
        "{message}"
    );
    let (customer, is_error) =
        call_text(&agent, "get_customer", json!({"customer_id": "C9"})).await;
    assert!(!is_error && customer.contains("C9"));
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn an_upstream_that_cannot_start_leaves_the_others_served() {
    let mut broken = stdio_server("broken", &[]);
    if let ctxgc_proxy::config::UpstreamTransport::Stdio { command, .. } = &mut broken.transport {
        *command = "/nonexistent/ctxgc-no-such-server".into();
    }
    let servers = set_of(
        vec![broken, stdio_server("fine", &["--tools", "echo"])],
        &[],
    );
    let (agent, _) = proxy_over_pipe(core(&servers, Arc::new(PassThrough), TIMEOUT)).await;
    assert_eq!(names(&agent.list_all_tools().await.unwrap()), ["echo"]);
    assert_eq!(
        call_text(&agent, "echo", json!({"text": "ok"})).await,
        ("ok".to_owned(), false)
    );
    agent.cancel().await.unwrap();
}

#[tokio::test]
async fn agents_on_the_2026_lifecycle_get_list_changes_through_listen() {
    use rmcp::ClientServiceExt;
    use rmcp::model::{ClientConfig, ProtocolVersion, ServerNotification, SubscriptionFilter};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let servers = set_of(vec![stdio_server("dyn", &[])], &[]);
    let proxy = HttpProxy::start(
        core(&servers, Arc::new(PassThrough), TIMEOUT),
        security("agent-token-123"),
    )
    .await;
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", proxy.base))
        .auth_header("agent-token-123");
    let agent = ClientConfig::default()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config),
            rmcp::ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("2026-07-28 agent connects");
    let mut subscription = agent
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("listen accepted");
    assert!(names(&agent.list_all_tools().await.unwrap()).contains(&"search_flights".to_owned()));
    let result = agent
        .call_tool(call("add_tool", json!({"name": "modern_tool"})))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true));
    let notification = tokio::time::timeout(Duration::from_secs(30), subscription.next())
        .await
        .expect("a notification arrives")
        .expect("subscription open");
    assert!(matches!(
        notification,
        Some(ServerNotification::ToolListChangedNotification(_))
    ));
    assert!(names(&agent.list_all_tools().await.unwrap()).contains(&"modern_tool".to_owned()));
    let _ = subscription.cancel().await;
    agent.cancel().await.unwrap();
}
