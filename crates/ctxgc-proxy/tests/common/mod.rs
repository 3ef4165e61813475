//! Shared harness: the real test server (a child over stdio, or served over HTTP on
//! loopback), the proxy in-process, and the agent side as a real rmcp client.
#![allow(dead_code)]

use std::io::BufRead;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ctxgc_http_guard::HttpSecurity;
use ctxgc_proxy::config::{ServerSet, ServerSpec, UpstreamTransport};
use ctxgc_proxy::server::{ProxyCore, ProxyServer};
use ctxgc_proxy::shaping::OutputShaper;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    ProtocolVersion, Tool,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;

pub const TEST_SERVER: &str = env!("CARGO_BIN_EXE_ctxgc-test-server");

/// A stdio upstream running the test server with `args`.
pub fn stdio_server(name: &str, args: &[&str]) -> ServerSpec {
    stdio_server_with_env(name, args, &[])
}

pub fn stdio_server_with_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> ServerSpec {
    ServerSpec {
        name: name.to_owned(),
        transport: UpstreamTransport::Stdio {
            command: TEST_SERVER.to_owned(),
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            cwd: None,
        },
    }
}

/// The test server served over HTTP on loopback; killed on drop.
pub struct HttpTestServer {
    child: std::process::Child,
    pub url: String,
}

impl HttpTestServer {
    pub fn start(args: &[&str]) -> Self {
        let mut child = std::process::Command::new(TEST_SERVER)
            .args(["--http", "0"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("test server starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("test server prints its URL");
        HttpTestServer {
            child,
            url: line.trim().to_owned(),
        }
    }
}

impl Drop for HttpTestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn set_of(servers: Vec<ServerSpec>, secrets: &[&str]) -> ServerSet {
    ServerSet {
        servers,
        secrets: secrets.iter().map(|s| (*s).to_owned()).collect(),
        notes: Vec::new(),
    }
}

/// The agent: a real rmcp client that counts tool-list change notifications.
#[derive(Clone, Default)]
pub struct Agent {
    pub list_changes: Arc<AtomicUsize>,
    pub changed: Arc<Notify>,
}

impl ClientHandler for Agent {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("test-agent", "1.0.0"),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changes.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_one();
    }
}

pub type AgentSession = RunningService<RoleClient, Agent>;

/// The proxy in-process, spoken to over a pipe by the agent (the same rmcp byte-stream
/// transport as stdio).
pub async fn proxy_over_pipe(core: Arc<ProxyCore>) -> (AgentSession, Agent) {
    core.connect_all().await;
    let (server_side, agent_side) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = ProxyServer::new(core).serve(server_side).await {
            let _ = running.waiting().await;
        }
    });
    let agent = Agent::default();
    let session = agent
        .clone()
        .serve(agent_side)
        .await
        .expect("agent connects");
    (session, agent)
}

pub fn core(
    servers: &ServerSet,
    shaper: Arc<dyn OutputShaper>,
    timeout: Duration,
) -> Arc<ProxyCore> {
    ctxgc_proxy::build_core(servers, shaper, timeout, false)
}

/// The proxy in-process over HTTP on 127.0.0.1 (port picked by the system).
pub struct HttpProxy {
    pub base: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl HttpProxy {
    pub async fn start(core: Arc<ProxyCore>, security: HttpSecurity) -> Self {
        core.connect_all().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = ctxgc_proxy::http::serve(listener, core, &security, async {
                let _ = rx.await;
            })
            .await;
        });
        HttpProxy {
            base,
            shutdown: Some(tx),
        }
    }

    pub async fn agent(&self, token: &str) -> (AgentSession, Agent) {
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", self.base))
            .auth_header(token.to_owned());
        let transport = StreamableHttpClientTransport::from_config(config);
        let agent = Agent::default();
        let session = agent
            .clone()
            .serve(transport)
            .await
            .expect("agent connects over HTTP");
        (session, agent)
    }
}

impl Drop for HttpProxy {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

pub fn security(token: &str) -> HttpSecurity {
    HttpSecurity {
        token: token.to_owned(),
        allowed_hosts: Vec::new(),
        allowed_origins: Vec::new(),
        max_body_bytes: 64 * 1024,
    }
}

pub fn call(tool: &str, arguments: Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Value::Object(map) = arguments {
        params.arguments = Some(map);
    }
    params
}

pub async fn call_text(session: &AgentSession, tool: &str, arguments: Value) -> (String, bool) {
    let result: CallToolResult = session
        .call_tool(call(tool, arguments))
        .await
        .unwrap_or_else(|e| panic!("call {tool}: {e}"));
    (text_of(&result), result.is_error == Some(true))
}

pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn names(tools: &[Tool]) -> Vec<String> {
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    names
}

/// A direct client of the test server over stdio (no proxy), for comparisons.
pub async fn direct_stdio(args: &[&str]) -> RunningService<RoleClient, Agent> {
    let mut cmd = tokio::process::Command::new(TEST_SERVER);
    cmd.args(args);
    let transport = rmcp::transport::TokioChildProcess::new(cmd).expect("spawn test server");
    Agent::default()
        .serve(transport)
        .await
        .expect("direct client connects")
}

pub fn flights_args() -> Value {
    json!({"origin": "DUB", "destination": "LIS"})
}

/// Waits for `n` tool-list change notifications (a hang here is a failing test; the harness
/// bounds it so the failure is reported).
pub async fn wait_for_list_changes(agent: &Agent, n: usize) {
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        while agent.list_changes.load(Ordering::SeqCst) < n {
            agent.changed.notified().await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "expected {n} tools/list_changed notification(s), saw {}",
        agent.list_changes.load(Ordering::SeqCst)
    );
}
