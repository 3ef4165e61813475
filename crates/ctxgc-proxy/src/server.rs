//! The proxy as an MCP *server* towards the agent: it publishes the upstream tools with their
//! names, descriptions and input schemas unchanged (a tool name that two servers share is
//! prefixed with the server name), plus `expand` and, in automatic mode, the done tool. Each
//! call is forwarded unchanged; only the result is rewritten on its way back, and never the
//! result of `expand` itself.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ctxgc_core::Tokenizer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter,
    Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::calllog::{CallLog, CallRecord};
use crate::redact::Redactor;
use crate::shaping::{OutputShaper, ToolSurface};
use crate::structured::{StructuredPath, reconcile, relax_schema};
use crate::upstream::Upstream;

/// Tells every connected agent that the tool list changed: legacy (session) peers by a
/// `notifications/tools/list_changed`, 2026-07-28 peers through their `subscriptions/listen`.
pub struct ChangeHub {
    legacy_peers: Mutex<Vec<Peer<RoleServer>>>,
    listeners: broadcast::Sender<()>,
}

impl Default for ChangeHub {
    fn default() -> Self {
        ChangeHub {
            legacy_peers: Mutex::new(Vec::new()),
            listeners: broadcast::channel(16).0,
        }
    }
}

impl ChangeHub {
    fn register(&self, peer: Peer<RoleServer>) {
        if let Ok(mut peers) = self.legacy_peers.lock() {
            peers.retain(|p| !p.is_transport_closed());
            peers.push(peer);
        }
    }

    /// Sends the change to every agent (must run inside a tokio runtime).
    pub fn notify(&self) {
        let _ = self.listeners.send(());
        let peers: Vec<Peer<RoleServer>> = match self.legacy_peers.lock() {
            Ok(mut peers) => {
                peers.retain(|p| !p.is_transport_closed());
                peers.clone()
            }
            Err(_) => return,
        };
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                for peer in peers {
                    let _ = peer.notify_tool_list_changed().await;
                }
            });
        }
    }
}

/// One published tool and where it goes.
#[derive(Debug, Clone)]
struct Route {
    server: usize,
    upstream_name: String,
    has_output_schema: bool,
    /// The published output schema has no `required` lists (see [`crate::structured`]).
    schema_relaxed: bool,
}

/// Everything the proxy serves from: upstreams, shaper, redactor, log, change hub.
pub struct ProxyCore {
    upstreams: Vec<Arc<Upstream>>,
    shaper: Arc<dyn OutputShaper>,
    redactor: Redactor,
    tokenizer: Tokenizer,
    log: CallLog,
    hub: Arc<ChangeHub>,
    routes: Mutex<BTreeMap<String, Route>>,
    savings: Option<crate::savings::SavingsSink>,
}

impl ProxyCore {
    /// A core over `upstreams` (which must notify `hub` on tool-list changes).
    pub fn new(
        upstreams: Vec<Arc<Upstream>>,
        shaper: Arc<dyn OutputShaper>,
        redactor: Redactor,
        log: CallLog,
        hub: Arc<ChangeHub>,
    ) -> Self {
        ProxyCore {
            upstreams,
            savings: shaper.savings_sink(),
            shaper,
            redactor,
            tokenizer: Tokenizer::O200kBase,
            log,
            hub,
            routes: Mutex::new(BTreeMap::new()),
        }
    }

    /// The call log (session totals).
    pub fn log(&self) -> &CallLog {
        &self.log
    }

    /// The redactor every text to the agent passes through.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The shaper.
    pub fn shaper(&self) -> &Arc<dyn OutputShaper> {
        &self.shaper
    }

    /// Connects every upstream that has no open connection, side by side; a failure is
    /// printed on stderr and leaves that server's last known tools in place.
    pub async fn connect_all(&self) {
        let mut tasks = tokio::task::JoinSet::new();
        for upstream in &self.upstreams {
            if upstream.is_connected().await {
                continue;
            }
            let upstream = upstream.clone();
            tasks.spawn(async move {
                let result = upstream.connect().await;
                (upstream, result)
            });
        }
        while let Some(joined) = tasks.join_next().await {
            if let Ok((upstream, Err(err))) = joined {
                eprintln!(
                    "ctxgc proxy: {} (its tools stay unavailable until it answers)",
                    self.redactor.text(&err.to_string())
                );
                let _ = upstream;
            }
        }
    }

    fn reserved_names(&self) -> Vec<String> {
        [self.shaper.expand_tool(), self.shaper.done_tool()]
            .into_iter()
            .flatten()
            .map(|t| t.name)
            .collect()
    }

    /// Publishes the tools of every upstream (as last listed), with collisions prefixed, and
    /// refreshes the routing table.
    fn catalog(&self) -> Vec<Tool> {
        let reserved = self.reserved_names();
        let per_server: Vec<Vec<Tool>> = self.upstreams.iter().map(|u| u.cached_tools()).collect();
        let mut owners: BTreeMap<&str, usize> = BTreeMap::new();
        for tools in &per_server {
            let mut seen = std::collections::BTreeSet::new();
            for tool in tools {
                if seen.insert(tool.name.as_ref()) {
                    *owners.entry(tool.name.as_ref()).or_default() += 1;
                }
            }
        }
        let mut routes = BTreeMap::new();
        let mut published = Vec::new();
        let mut taken: std::collections::BTreeSet<String> = reserved.iter().cloned().collect();
        for (server, tools) in per_server.iter().enumerate() {
            let prefix = tool_prefix(self.upstreams[server].name());
            for tool in tools {
                let name = tool.name.as_ref();
                let shared = owners.get(name).copied().unwrap_or(0) > 1
                    || reserved.iter().any(|r| r == name);
                let mut exposed = if shared {
                    format!("{prefix}_{name}")
                } else {
                    name.to_owned()
                };
                while taken.contains(&exposed) {
                    exposed = format!("{prefix}_{exposed}");
                }
                taken.insert(exposed.clone());
                let mut out = tool.clone();
                // A tool the proxy may trim is published with hidden fields optional, from
                // the first listing on, so no client validates against a stricter copy.
                let schema_relaxed = match &tool.output_schema {
                    Some(schema) if self.shaper.may_trim(&exposed) => {
                        let mut relaxed = Value::Object((**schema).clone());
                        relax_schema(&mut relaxed);
                        if let Value::Object(map) = relaxed {
                            out.output_schema = Some(Arc::new(map));
                        }
                        true
                    }
                    _ => false,
                };
                routes.insert(
                    exposed.clone(),
                    Route {
                        server,
                        upstream_name: name.to_owned(),
                        has_output_schema: tool.output_schema.is_some(),
                        schema_relaxed,
                    },
                );
                out.name = Cow::Owned(exposed);
                published.push(self.redact_tool(out));
            }
        }
        for surface in [self.shaper.expand_tool(), self.shaper.done_tool()]
            .into_iter()
            .flatten()
        {
            published.push(surface_tool(surface));
        }
        if let Ok(mut table) = self.routes.lock() {
            *table = routes;
        }
        published
    }

    fn redact_tool(&self, tool: Tool) -> Tool {
        if self.redactor.is_empty() {
            return tool;
        }
        let Ok(mut value) = serde_json::to_value(&tool) else {
            return tool;
        };
        if !self.redactor.finds_any(&value.to_string()) {
            return tool;
        }
        self.redactor.value(&mut value);
        serde_json::from_value(value).unwrap_or(tool)
    }

    fn route(&self, name: &str) -> Option<Route> {
        self.routes.lock().ok()?.get(name).cloned()
    }

    /// The published tool list, connecting upstreams that are not connected.
    pub async fn list_tools(&self) -> Vec<Tool> {
        self.connect_all().await;
        self.catalog()
    }

    fn error_result(&self, message: &str) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(self.redactor.text(message))])
    }

    /// Handles one `tools/call` from the agent.
    pub async fn call_tool(
        &self,
        request: CallToolRequestParams,
    ) -> Result<CallToolResult, ErrorData> {
        let name = request.name.to_string();
        // What the shaper sees (and may keep in traces and receipts) carries no credential.
        let mut arguments = request
            .arguments
            .clone()
            .map(Value::Object)
            .unwrap_or_else(|| Value::Object(Default::default()));
        self.redactor.value(&mut arguments);
        if self.shaper.expand_tool().is_some_and(|t| t.name == name) {
            return Ok(self.answer_own_tool(&name, true, self.shaper.expand(&arguments)));
        }
        if self.shaper.done_tool().is_some_and(|t| t.name == name) {
            return Ok(self.answer_own_tool(&name, false, self.shaper.done(&arguments)));
        }
        let route = match self.route(&name) {
            Some(route) => route,
            None => {
                // The agent may know a tool we have not listed yet (or lost on a restart).
                self.list_tools().await;
                match self.route(&name) {
                    Some(route) => route,
                    None => {
                        return Err(ErrorData::invalid_params(
                            format!("unknown tool {name:?}"),
                            None,
                        ));
                    }
                }
            }
        };
        let upstream = self.upstreams[route.server].clone();
        let mut forwarded = CallToolRequestParams::new(route.upstream_name.clone());
        forwarded.arguments = request.arguments;
        let result = match upstream.call_tool(forwarded).await {
            Ok(result) => result,
            Err(err) => {
                let message = err.to_string();
                let out = self.error_result(&message);
                self.log.record(&CallRecord {
                    tool: name,
                    tokens_from_upstream: 0,
                    tokens_to_agent: self.count_result(&out),
                    fields_hidden: 0,
                    is_expand: false,
                    note: Some(self.redactor.text(&message)),
                });
                return Ok(out);
            }
        };
        Ok(self.shape_result(&name, &route, &arguments, result))
    }

    fn answer_own_tool(
        &self,
        name: &str,
        is_expand: bool,
        answer: Result<String, crate::shaping::ShapeError>,
    ) -> CallToolResult {
        let (out, note) = match answer {
            // What expand gives back goes to the agent as it is: never trimmed again.
            Ok(text) => (
                CallToolResult::success(vec![ContentBlock::text(self.redactor.text(&text))]),
                None,
            ),
            Err(err) => (self.error_result(&err.0), Some(err.0)),
        };
        self.log.record(&CallRecord {
            tool: name.to_owned(),
            tokens_from_upstream: 0,
            tokens_to_agent: self.count_result(&out),
            fields_hidden: 0,
            is_expand,
            note,
        });
        out
    }

    /// Exact tokens of `text`, or 0 under `--quiet`, where no line shows them.
    fn count(&self, text: &str) -> usize {
        if self.log.is_quiet() {
            0
        } else {
            self.tokenizer.count(text)
        }
    }

    fn count_result(&self, result: &CallToolResult) -> usize {
        result
            .content
            .iter()
            .filter_map(|c| c.as_text())
            .map(|t| self.count(&t.text))
            .sum()
    }

    fn shape_result(
        &self,
        name: &str,
        route: &Route,
        arguments: &Value,
        mut result: CallToolResult,
    ) -> CallToolResult {
        let mut tokens_from_upstream = 0;
        let mut tokens_to_agent = 0;
        let mut fields_hidden = 0;
        let mut note = None;
        let is_error = result.is_error == Some(true);
        if is_error {
            note = Some("tool error".to_owned());
        }
        // Credentials out of the structured copy before it is compared with the text.
        if let Some(structured) = result.structured_content.as_mut() {
            self.redactor.value(structured);
        }
        // Original (redacted) and shaped text of every block the shaper changed.
        let mut shaped_blocks: Vec<(String, String)> = Vec::new();
        for block in result.content.iter_mut() {
            let ContentBlock::Text(text) = block else {
                continue;
            };
            let raw_tokens = self.count(&text.text);
            tokens_from_upstream += raw_tokens;
            let mut changed = false;
            // Credentials go first: the shaper keeps what it is given (traces, receipts).
            if self.redactor.finds_any(&text.text) {
                text.text = self.redactor.text(&text.text);
                changed = true;
            }
            match self.shaper.shape(name, arguments, &text.text, is_error) {
                Ok(shaped) => {
                    fields_hidden += shaped.fields_hidden;
                    if shaped.text != text.text {
                        let original = std::mem::replace(&mut text.text, shaped.text);
                        shaped_blocks.push((original, text.text.clone()));
                        changed = true;
                    }
                }
                Err(err) => note = Some(format!("not trimmed: {}", err.0)),
            }
            // Counting is the costly part of a call: count again only what changed.
            tokens_to_agent += if changed {
                self.count(&text.text)
            } else {
                raw_tokens
            };
        }
        if !shaped_blocks.is_empty() && result.structured_content.is_some() {
            // The hidden fields must not reach the agent by the structured copy, and the
            // copy must still satisfy the schema the agent was given.
            let path = reconcile(
                &mut result.structured_content,
                &shaped_blocks,
                fields_hidden > 0,
                route.has_output_schema,
                route.schema_relaxed,
            );
            if matches!(path, StructuredPath::KeptWhole(_)) {
                for block in result.content.iter_mut() {
                    if let ContentBlock::Text(text) = block
                        && let Some((original, _)) = shaped_blocks
                            .iter()
                            .find(|(_, shaped)| *shaped == text.text)
                    {
                        text.text = original.clone();
                    }
                }
                fields_hidden = 0;
                tokens_to_agent = tokens_from_upstream;
                shaped_blocks.clear(); // nothing reached the agent trimmed
            }
            note = Some(path.note());
        }
        let totals = self.log.record(&CallRecord {
            tool: name.to_owned(),
            tokens_from_upstream,
            tokens_to_agent,
            fields_hidden,
            is_expand: false,
            note,
        });
        if let Some(sink) = &self.savings
            && !shaped_blocks.is_empty()
        {
            // Under --quiet nothing was counted: count what changed (the rest is the same on
            // both sides and saves nothing).
            let (before, after) = if self.log.is_quiet() {
                shaped_blocks
                    .iter()
                    .fold((0, 0), |(b, a), (original, shaped)| {
                        (
                            b + self.tokenizer.count(original),
                            a + self.tokenizer.count(shaped),
                        )
                    })
            } else {
                (tokens_from_upstream, tokens_to_agent)
            };
            if let Err(e) = sink.record(totals.calls as u64, name, before as u64, after as u64) {
                eprintln!("ctxgc proxy: {name}: savings not recorded: {e}");
            }
        }
        result
    }
}

/// The prefix of a server's tools: its name, with characters that tool names may not hold
/// replaced by `_`.
fn tool_prefix(server: &str) -> String {
    server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn surface_tool(surface: ToolSurface) -> Tool {
    Tool::new(
        surface.name,
        surface.description,
        Arc::new(surface.input_schema),
    )
}

/// The rmcp server handler: a cheap handle on the shared [`ProxyCore`], one per session.
#[derive(Clone)]
pub struct ProxyServer {
    core: Arc<ProxyCore>,
    hub: Arc<ChangeHub>,
}

impl ProxyServer {
    /// A handler over `core`.
    pub fn new(core: Arc<ProxyCore>) -> Self {
        let hub = core.hub.clone();
        ProxyServer { core, hub }
    }
}

impl ServerHandler for ProxyServer {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "ctxgc-proxy",
            env!("CARGO_PKG_VERSION"),
        ));
        if let Some(done) = self.core.shaper.done_tool() {
            config = config.with_instructions(format!(
                "Last step, required: when your final answer is ready, call {} once with the complete answer, before you show it; then show the same answer.",
                done.name
            ));
        }
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.core.list_tools().await,
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.core
            .call_tool(request)
            .await
            .map(CallToolResponse::Complete)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.hub.register(context.peer.clone());
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.hub.listeners.subscribe();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        if context.sink().notify_tool_list_changed().await.is_err() {
                            return Ok(());
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}
