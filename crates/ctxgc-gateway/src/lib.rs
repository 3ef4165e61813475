//! `ctxgc gateway`: an HTTP gateway an agent reaches by changing its base URL. Requests to
//! OpenAI Chat Completions (`/v1/chat/completions`), OpenAI Responses (`/v1/responses`) and
//! Anthropic Messages (`/v1/messages`) have their conversation compiled (incrementally,
//! cache-stable) before they go upstream; every other path is forwarded as it came.
//! Answers, streamed or not, are passed back chunk by chunk with the upstream's status and
//! headers; the client's credentials go upstream and nowhere else.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use ctxgc_gateway::{GatewayOptions, serve};
//! use ctxgc_gateway::upstream::{Upstream, Upstreams};
//! let options = GatewayOptions::new(Upstreams::new(vec![Upstream::parse("openai")?])?);
//! let store = ctxgc_store::open(&ctxgc_store::Location::parse(".ctxgc/ctxgc.db"))?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8787").await?;
//! serve(listener, options, Some(store), std::future::pending()).await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use ctxgc_core::chat::{ChatOptions, Preset};
use ctxgc_store::AnyStore;

pub mod breakpoints;
pub mod endpoint;
pub mod metrics;
pub mod recall;
pub mod recall_stream;
pub mod request;
pub mod savings;
pub mod server;
pub mod sessions;
pub mod splice;
pub mod upstream;
pub mod usage;

pub use server::{Gateway, SESSION_HEADER, TOKEN_HEADER};

/// Default limit on request bodies: long conversations with images run to megabytes.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// How the gateway runs.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// Where requests go.
    pub upstreams: upstream::Upstreams,
    /// What compiling may take away (cache-stable on top of it unless `cache_stable` is off).
    pub preset: Preset,
    /// Cache-stable compilation: earlier output stays a byte-stable prefix.
    pub cache_stable: bool,
    /// Offer the `ctxgc_recall` tool and answer it from the store.
    pub recall: bool,
    /// Place Anthropic `cache_control` breakpoints.
    pub cache_breakpoints: bool,
    /// The token clients must send in `x-ctxgc-token` (none: no token check).
    pub token: Option<String>,
    /// Hosts accepted besides the local ones.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted besides the gateway's own.
    pub allowed_origins: Vec<String>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// How long an upstream may take to start answering (and to send each later chunk).
    pub timeout: Duration,
    /// No JSON line per request on stderr.
    pub quiet: bool,
    /// The secret credentials are hashed with to scope conversations by tenant
    /// (`CTXGC_TENANT_SECRET`). Gateways sharing a store should share it; without one, a
    /// random secret is made once and kept in the store.
    pub tenant_secret: Option<String>,
    /// About how many bytes of conversations stay compiled in memory; past it the least
    /// recently used are dropped and reloaded from the store when they come back.
    pub memory_budget: usize,
}

impl GatewayOptions {
    /// The defaults for these upstreams: default preset, cache-stable, no recall, no
    /// breakpoints, no token, local hosts only.
    pub fn new(upstreams: upstream::Upstreams) -> GatewayOptions {
        GatewayOptions {
            upstreams,
            preset: Preset::Default,
            cache_stable: true,
            recall: false,
            cache_breakpoints: false,
            token: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            timeout: server::DEFAULT_TIMEOUT,
            quiet: false,
            tenant_secret: None,
            memory_budget: sessions::DEFAULT_MEMORY_BUDGET,
        }
    }

    /// The compiler's chat options these settings mean.
    pub fn chat_options(&self) -> ChatOptions {
        ChatOptions {
            preset: self.preset,
            expand_tool: self.recall.then(|| recall::TOOL.to_owned()),
            cache: self.cache_stable.then(Default::default),
            ..ChatOptions::default()
        }
    }
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The HTTP client could not be built.
    #[error("the HTTP client could not be built: {0}")]
    Client(#[from] reqwest::Error),
    /// Listening failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The settings do not hold together.
    #[error("{0}")]
    Usage(String),
}

/// The shared state of a gateway: without a store, requests are forwarded uncompiled.
pub fn build(
    options: GatewayOptions,
    store: Option<AnyStore>,
) -> Result<Arc<Gateway>, GatewayError> {
    if let Some(token) = &options.token
        && (token.trim().is_empty() || token.trim() != token)
    {
        return Err(GatewayError::Usage(
            "the gateway token must not be empty or begin or end with whitespace".into(),
        ));
    }
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .read_timeout(options.timeout)
        .pool_max_idle_per_host(256)
        // Redirects are the client's business: pass them back as they came.
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    if options
        .tenant_secret
        .as_ref()
        .is_some_and(|s| s.trim().is_empty())
    {
        return Err(GatewayError::Usage(
            "the tenant secret must not be empty".into(),
        ));
    }
    let sessions = store.map(|s| {
        let sessions = sessions::Sessions::new(s, options.chat_options())
            .with_memory_budget(options.memory_budget);
        if let Some(secret) = &options.tenant_secret {
            sessions.set_tenant_secret(secret);
        }
        Arc::new(sessions)
    });
    Ok(Arc::new(Gateway {
        upstreams: options.upstreams.clone(),
        client,
        sessions,
        metrics: metrics::Metrics::default(),
        savings: savings::SavingsWrites::default(),
        options,
        compile_slots: Arc::new(tokio::sync::Semaphore::new(server::compile_slots())),
    }))
}

/// Serves the gateway on `listener` until `shutdown` resolves. A listener on an address
/// other than loopback needs a token.
pub async fn serve(
    listener: tokio::net::TcpListener,
    options: GatewayOptions,
    store: Option<AnyStore>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), GatewayError> {
    let local = listener.local_addr()?;
    if !local.ip().is_loopback() && options.token.is_none() {
        return Err(GatewayError::Usage(format!(
            "listening on {local} (not loopback) needs a token: set CTXGC_TOKEN (or --token)"
        )));
    }
    let gateway = build(options, store)?;
    serve_gateway(listener, gateway, shutdown).await
}

/// Serves an already built gateway (its metrics stay readable by the caller).
pub async fn serve_gateway(
    listener: tokio::net::TcpListener,
    gateway: Arc<Gateway>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), GatewayError> {
    let local = listener.local_addr()?;
    let app = server::router(gateway, local);
    // Streamed answers are many small writes: with Nagle's algorithm on, each one after the
    // first waits for the client's delayed ACK (40 ms on Linux).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}
