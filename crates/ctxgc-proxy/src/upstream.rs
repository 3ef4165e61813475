//! One upstream MCP server, seen from the proxy: an MCP *client* connection that is opened on
//! first use, reopened after the server crashed or closed it (a stdio server is started
//! again), and whose every request is bounded by a timeout, so a hung server costs the agent
//! one clear tool error and never blocks the other servers.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    Implementation, ProtocolVersion, Tool,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use tokio::sync::Mutex;

use crate::config::{ServerSpec, UpstreamTransport};

/// Why a request to an upstream failed. The messages are for the agent: they name the server
/// and say what happens next; credentials are removed from them by the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// The server could not be started or reached.
    #[error("upstream server \"{server}\" could not be started or reached: {message}")]
    Start {
        /// The server.
        server: String,
        /// What went wrong.
        message: String,
    },
    /// The server exited or closed the connection during the request.
    #[error(
        "upstream server \"{server}\" exited or closed the connection during the call ({message}); it will be started again on the next call"
    )]
    Closed {
        /// The server.
        server: String,
        /// What the transport said.
        message: String,
    },
    /// The server did not answer in time.
    #[error("upstream server \"{server}\" did not answer {what} within {seconds} s")]
    Timeout {
        /// The server.
        server: String,
        /// The request, e.g. `tool "search"`.
        what: String,
        /// The limit.
        seconds: u64,
    },
    /// The server answered something that is not a valid MCP response.
    #[error("upstream server \"{server}\" returned an invalid response: {message}")]
    Invalid {
        /// The server.
        server: String,
        /// What was wrong.
        message: String,
    },
    /// The server answered with a JSON-RPC error.
    #[error("upstream server \"{server}\" refused the request: {message}")]
    Refused {
        /// The server.
        server: String,
        /// Its error message.
        message: String,
    },
}

/// Called when an upstream's tool list changed (after the new list is in the cache).
pub type ChangeListener = Arc<dyn Fn() + Send + Sync>;

/// The client side of the connection: follows the upstream's tool-list changes.
#[derive(Clone)]
struct UpstreamClient {
    server: String,
    tools: Arc<RwLock<Vec<Tool>>>,
    on_change: ChangeListener,
    timeout: Duration,
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("ctxgc-proxy", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        // Refetch outside the notification handler: awaiting a request on the same
        // connection from inside its own message loop would stall it.
        let this = self.clone();
        let peer = context.peer.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(this.timeout, peer.list_all_tools()).await {
                Ok(Ok(tools)) => {
                    if let Ok(mut cache) = this.tools.write() {
                        *cache = tools;
                    }
                    (this.on_change)();
                }
                Ok(Err(err)) => eprintln!(
                    "ctxgc proxy: upstream \"{}\": listing tools after a change failed: {err}",
                    this.server
                ),
                Err(_) => eprintln!(
                    "ctxgc proxy: upstream \"{}\": listing tools after a change timed out",
                    this.server
                ),
            }
        });
    }
}

struct Link {
    peer: Peer<RoleClient>,
    /// Keeps the connection (and a stdio child) alive; dropping it closes them.
    _service: RunningService<RoleClient, UpstreamClient>,
}

/// One upstream server and its (re)opened connection.
pub struct Upstream {
    spec: ServerSpec,
    timeout: Duration,
    tools: Arc<RwLock<Vec<Tool>>>,
    on_change: ChangeListener,
    link: Mutex<Option<Link>>,
}

impl Upstream {
    /// An upstream that connects on first use. `timeout` bounds starting it and every
    /// request; `on_change` is called when its tool list changed.
    pub fn new(spec: ServerSpec, timeout: Duration, on_change: ChangeListener) -> Self {
        Upstream {
            spec,
            timeout,
            tools: Arc::new(RwLock::new(Vec::new())),
            on_change,
            link: Mutex::new(None),
        }
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The tools last listed by the server (empty before the first connection).
    pub fn cached_tools(&self) -> Vec<Tool> {
        self.tools.read().map(|t| t.clone()).unwrap_or_default()
    }

    /// Whether a connection is open now.
    pub async fn is_connected(&self) -> bool {
        let link = self.link.lock().await;
        link.as_ref().is_some_and(|l| !l.peer.is_transport_closed())
    }

    /// The open connection, opening (or reopening) it when there is none or the server
    /// went away; a fresh connection lists the server's tools.
    async fn peer(&self) -> Result<Peer<RoleClient>, UpstreamError> {
        let mut link = self.link.lock().await;
        if let Some(open) = link.as_ref()
            && !open.peer.is_transport_closed()
        {
            return Ok(open.peer.clone());
        }
        *link = None;
        let opened = tokio::time::timeout(self.timeout, self.open())
            .await
            .map_err(|_| UpstreamError::Timeout {
                server: self.spec.name.clone(),
                what: "the start of the connection".into(),
                seconds: self.timeout.as_secs(),
            })??;
        let peer = opened.peer.clone();
        *link = Some(opened);
        drop(link);
        let tools = tokio::time::timeout(self.timeout, peer.list_all_tools())
            .await
            .map_err(|_| UpstreamError::Timeout {
                server: self.spec.name.clone(),
                what: "tools/list".into(),
                seconds: self.timeout.as_secs(),
            })?
            .map_err(|e| self.service_error(e))?;
        let changed = {
            let mut cache = self.tools.write().map_err(|_| UpstreamError::Invalid {
                server: self.spec.name.clone(),
                message: "tool cache poisoned".into(),
            })?;
            let changed = *cache != tools;
            *cache = tools;
            changed
        };
        if changed {
            (self.on_change)();
        }
        Ok(peer)
    }

    async fn open(&self) -> Result<Link, UpstreamError> {
        let client = UpstreamClient {
            server: self.spec.name.clone(),
            tools: self.tools.clone(),
            on_change: self.on_change.clone(),
            timeout: self.timeout,
        };
        let start_error = |message: String| UpstreamError::Start {
            server: self.spec.name.clone(),
            message,
        };
        let service = match &self.spec.transport {
            UpstreamTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args);
                for (k, v) in env {
                    cmd.env(k, v);
                }
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                let transport = TokioChildProcess::new(cmd)
                    .map_err(|e| start_error(format!("cannot run {command:?}: {e}")))?;
                client
                    .serve(transport)
                    .await
                    .map_err(|e| start_error(e.to_string()))?
            }
            UpstreamTransport::Http { url, headers } => {
                let mut custom = std::collections::HashMap::new();
                for (k, v) in headers {
                    let name = HeaderName::from_bytes(k.as_bytes())
                        .map_err(|_| start_error(format!("invalid header name {k:?}")))?;
                    let value = HeaderValue::from_str(v)
                        .map_err(|_| start_error(format!("invalid value for header {k:?}")))?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.clone())
                    .custom_headers(custom);
                let transport = StreamableHttpClientTransport::from_config(config);
                client
                    .serve(transport)
                    .await
                    .map_err(|e| start_error(e.to_string()))?
            }
        };
        Ok(Link {
            peer: service.peer().clone(),
            _service: service,
        })
    }

    /// Connects now (at start or on `tools/list`), so the server's tools are known.
    pub async fn connect(&self) -> Result<(), UpstreamError> {
        self.peer().await.map(|_| ())
    }

    /// Forwards one tool call unchanged and returns the server's raw result.
    pub async fn call_tool(
        &self,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, UpstreamError> {
        let tool = params.name.to_string();
        let peer = self.peer().await?;
        let response = tokio::time::timeout(self.timeout, peer.call_tool_once(params))
            .await
            .map_err(|_| UpstreamError::Timeout {
                server: self.spec.name.clone(),
                what: format!("tool {tool:?}"),
                seconds: self.timeout.as_secs(),
            })?;
        match response {
            Ok(CallToolResponse::Complete(result)) => Ok(result),
            Ok(CallToolResponse::InputRequired(_)) => Err(UpstreamError::Invalid {
                server: self.spec.name.clone(),
                message: "the tool asked for client input, which the proxy does not relay".into(),
            }),
            Ok(CallToolResponse::Task(_)) => Err(UpstreamError::Invalid {
                server: self.spec.name.clone(),
                message: "the tool answered with a task, which the proxy does not relay".into(),
            }),
            Ok(_) => Err(UpstreamError::Invalid {
                server: self.spec.name.clone(),
                message: "a tool response of a kind the proxy does not know".into(),
            }),
            Err(err) => {
                let err = self.service_error(err);
                if matches!(err, UpstreamError::Closed { .. }) {
                    // Start afresh on the next call.
                    *self.link.lock().await = None;
                }
                Err(err)
            }
        }
    }

    fn service_error(&self, err: ServiceError) -> UpstreamError {
        let server = self.spec.name.clone();
        match err {
            ServiceError::McpError(e) => UpstreamError::Refused {
                server,
                message: e.message.to_string(),
            },
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                UpstreamError::Closed {
                    server,
                    message: err.to_string(),
                }
            }
            ServiceError::Timeout { timeout } => UpstreamError::Timeout {
                server,
                what: "the request".into(),
                seconds: timeout.as_secs(),
            },
            ServiceError::UnexpectedResponse => UpstreamError::Invalid {
                server,
                message: "a response of the wrong type".into(),
            },
            other => UpstreamError::Invalid {
                server,
                message: other.to_string(),
            },
        }
    }
}
