//! Added latency per tool call through the proxy, against a direct call to the same server.
//!
//! - stdio: the agent talks to the test server spawned as a child (direct), or to the proxy
//!   over a byte pipe with the stdio codec, the proxy talking to the same child (proxied);
//! - HTTP: the agent talks to the test server over streamable HTTP on loopback (direct), or
//!   to the proxy over streamable HTTP on loopback, the proxy to the same server (proxied).
//!
//! Two tools: `echo` (a few bytes: the plumbing alone) and `search_flights` (~10 kB of JSON:
//! plus exact token counting of what goes through). `stdio/proxied+projection` also trims
//! `search_flights` with a reviewed projection; `-quiet` is `--quiet` (no per-call line, so
//! no token counting). The proxied variants print the per-call line as `ctxgc proxy` does:
//! run with `cargo bench -p ctxgc-proxy 2>/dev/null`.

use std::hint::black_box;
use std::io::BufRead;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use ctxgc_core::projection::Projection;
use ctxgc_http_guard::HttpSecurity;
use ctxgc_proxy::config::{ServerSet, ServerSpec, UpstreamTransport};
use ctxgc_proxy::reviewed::ReviewedProjection;
use ctxgc_proxy::server::ProxyServer;
use ctxgc_proxy::shaping::{OutputShaper, PassThrough};
use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

const TEST_SERVER: &str = env!("CARGO_BIN_EXE_ctxgc-test-server");
const TOKEN: &str = "bench-token-1234";

type Client = RunningService<RoleClient, ClientConfig>;

fn client_info() -> ClientConfig {
    ClientConfig::default().with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

fn params(tool: &str) -> CallToolRequestParams {
    let mut p = CallToolRequestParams::new(tool.to_owned());
    let args = if tool == "echo" {
        json!({"text": "ping"})
    } else {
        json!({"origin": "DUB", "destination": "LIS"})
    };
    if let serde_json::Value::Object(map) = args {
        p.arguments = Some(map);
    }
    p
}

struct HttpServerChild(std::process::Child, String);

impl Drop for HttpServerChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_http_server() -> HttpServerChild {
    let mut child = std::process::Command::new(TEST_SERVER)
        .args(["--http", "0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("test server starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("url line");
    HttpServerChild(child, line.trim().to_owned())
}

async fn direct_stdio() -> Client {
    let transport =
        TokioChildProcess::new(tokio::process::Command::new(TEST_SERVER)).expect("spawn");
    client_info().serve(transport).await.expect("connect")
}

fn servers(spec: UpstreamTransport) -> ServerSet {
    ServerSet {
        servers: vec![ServerSpec {
            name: "bench".into(),
            transport: spec,
        }],
        secrets: vec![],
        notes: vec![],
    }
}

const PROJECTION: &str = r#"{"ctxgc_projection": 1, "rules": {"min_saving_tokens": 0},
  "tools": {"search_flights": {"drop": [
    {"field": "flights[].fare_rules"}, {"field": "flights[].aircraft"},
    {"field": "flights[].amenities"}, {"field": "disclaimer"}]}}}"#;

async fn proxied_stdio(trim: bool, quiet: bool) -> Client {
    let shaper: Arc<dyn OutputShaper> = if trim {
        Arc::new(ReviewedProjection::new(
            Projection::from_json(PROJECTION).expect("projection"),
        ))
    } else {
        Arc::new(PassThrough)
    };
    let set = servers(UpstreamTransport::Stdio {
        command: TEST_SERVER.into(),
        args: vec![],
        env: vec![],
        cwd: None,
    });
    let core = ctxgc_proxy::build_core(&set, shaper, Duration::from_secs(30), quiet);
    core.connect_all().await;
    let (server_side, agent_side) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = ProxyServer::new(core).serve(server_side).await {
            let _ = running.waiting().await;
        }
    });
    client_info().serve(agent_side).await.expect("connect")
}

async fn http_client(url: String, token: Option<&str>) -> Client {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(token) = token {
        config = config.auth_header(token.to_owned());
    }
    client_info()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("connect")
}

async fn proxied_http(upstream_url: String) -> Client {
    let set = servers(UpstreamTransport::Http {
        url: upstream_url,
        headers: vec![],
    });
    let core = ctxgc_proxy::build_core(&set, Arc::new(PassThrough), Duration::from_secs(30), false);
    core.connect_all().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let security = HttpSecurity {
        token: TOKEN.into(),
        allowed_hosts: vec![],
        allowed_origins: vec![],
        max_body_bytes: 4 << 20,
    };
    tokio::spawn(async move {
        let _ = ctxgc_proxy::http::serve(listener, core, &security, std::future::pending()).await;
    });
    http_client(format!("{base}/mcp"), Some(TOKEN)).await
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let http_server = start_http_server();
    let clients: Vec<(&str, Client)> = rt.block_on(async {
        vec![
            ("stdio/direct", direct_stdio().await),
            ("stdio/proxied", proxied_stdio(false, false).await),
            ("stdio/proxied-quiet", proxied_stdio(false, true).await),
            ("stdio/proxied+projection", proxied_stdio(true, false).await),
            (
                "http/direct",
                http_client(http_server.1.clone(), None).await,
            ),
            ("http/proxied", proxied_http(http_server.1.clone()).await),
        ]
    });
    for tool in ["echo", "search_flights"] {
        let mut group = c.benchmark_group(format!("call/{tool}"));
        group.sample_size(200);
        group.measurement_time(Duration::from_secs(8));
        for (label, client) in &clients {
            group.bench_function(*label, |b| {
                b.iter(|| {
                    let result = rt
                        .block_on(client.call_tool(params(tool)))
                        .expect("call answered");
                    black_box(result);
                })
            });
        }
        group.finish();
    }
    rt.block_on(async {
        for (_, client) in clients {
            let _ = client.cancel().await;
        }
    });
    drop(http_server);
}

criterion_group!(benches, bench);
criterion_main!(benches);
