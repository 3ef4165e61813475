//! # ctxgc-proxy
//!
//! An MCP proxy in front of any MCP servers: an MCP *server* towards the agent and an MCP
//! *client* towards each upstream. At start it asks every upstream for its tools and
//! publishes the same names, descriptions and input schemas (a name two servers share is
//! prefixed with the server name), plus `expand` and, in automatic mode, a done tool. Each
//! call is forwarded unchanged; only the result is rewritten on its way back — trimmed by a
//! reviewed projection (`--config`) or by what automatic mode learned (`--auto DIR`) — and
//! `expand` gives back the hidden fields exactly.
//!
//! Layers, each in its own module: [`config`] (the `mcpServers` file), [`upstream`] (one
//! client connection per server, restarted after a crash, bounded by a timeout),
//! [`server`] (the published catalog and call routing), [`shaping`] (the one interface
//! through which outputs are transformed), [`http`] (streamable HTTP with token, Host and
//! body-size checks), [`redact`] (credentials never reach the agent), [`calllog`] (one stderr
//! line per call), [`workdir`] (the private work directory).
//!
//! ```no_run
//! use std::time::Duration;
//! use ctxgc_proxy::{config, Downstream, Mode, ProxyOptions};
//! let servers = config::single_command("upstream", "python -m my_server", &|v: &str| std::env::var(v).ok()).unwrap();
//! ctxgc_proxy::run_blocking(ProxyOptions {
//!     servers,
//!     mode: Mode::PassThrough,
//!     downstream: Downstream::Stdio,
//!     timeout: Duration::from_secs(60),
//!     quiet: false,
//!     db: None,
//! }).unwrap();
//! ```
#![warn(missing_docs)]

pub mod automatic;
pub mod calllog;
pub mod config;
pub mod http;
pub mod receipts;
pub mod redact;
pub mod reviewed;
pub mod savings;
pub mod server;
pub mod shaping;
pub mod stdio_gate;
pub mod structured;
pub mod upstream;
pub mod workdir;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;

use ctxgc_core::projection::auto::AutoConfig;

use crate::automatic::AutoShaper;
use crate::calllog::CallLog;
use crate::config::ServerSet;
use crate::redact::Redactor;
use crate::reviewed::ReviewedProjection;
use crate::server::{ChangeHub, ProxyCore, ProxyServer};
use crate::shaping::{OutputShaper, PassThrough};
use crate::upstream::Upstream;
use ctxgc_http_guard::HttpSecurity;

/// What the proxy does to tool outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Nothing: outputs go through unchanged (the per-call token line still shows them).
    PassThrough,
    /// Apply a reviewed projection file.
    Config(PathBuf),
    /// Observe the first `min_runs` runs, then trim with what was learned; everything lives
    /// in `dir`.
    Auto {
        /// The work directory (created 0700).
        dir: PathBuf,
        /// Runs observed unchanged before trimming starts.
        min_runs: usize,
    },
}

/// Where the agent connects.
#[derive(Debug, Clone)]
pub enum Downstream {
    /// Over this process's stdin/stdout (nothing but protocol on stdout).
    Stdio,
    /// Over streamable HTTP.
    Http {
        /// Address to bind (127.0.0.1 unless told otherwise).
        bind: IpAddr,
        /// Port (0 picks a free one, printed on stderr).
        port: u16,
        /// Token, Host and body-size rules.
        security: HttpSecurity,
    },
}

/// Everything `ctxgc proxy` needs.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// The upstream servers.
    pub servers: ServerSet,
    /// What is done to outputs.
    pub mode: Mode,
    /// Where the agent connects.
    pub downstream: Downstream,
    /// Limit on starting an upstream and on every request to it.
    pub timeout: Duration,
    /// No per-call line on stderr.
    pub quiet: bool,
    /// Where the originals of trimmed outputs are kept (`--db`): by default `DIR/ctxgc.db`
    /// in automatic mode; with a reviewed projection, `$CTXGC_DB` or `.ctxgc/ctxgc.db`.
    pub db: Option<ctxgc_store::Location>,
}

/// Why the proxy could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// A usage problem (options that do not fit together, a missing token...).
    #[error("{0}")]
    Usage(String),
    /// The projection or the work directory could not be used.
    #[error("{0}")]
    Shaper(String),
    /// A system error (binding a port, the runtime...).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The downstream MCP session failed.
    #[error("MCP session with the agent failed: {0}")]
    Session(String),
}

/// The shaper for `mode`, keeping originals in the store at `db` (see [`ProxyOptions::db`]).
pub fn shaper_for(
    mode: &Mode,
    db: Option<&ctxgc_store::Location>,
) -> Result<Arc<dyn OutputShaper>, ProxyError> {
    match mode {
        Mode::PassThrough => Ok(Arc::new(PassThrough)),
        Mode::Config(path) => {
            let location = match db {
                Some(location) => location.clone(),
                None => ctxgc_store::Location::from_env(None)
                    .map_err(|e| ProxyError::Shaper(e.to_string()))?,
            };
            if let ctxgc_store::Location::Sqlite(file) = &location
                && let Some(parent) = file.parent().filter(|p| !p.as_os_str().is_empty())
            {
                workdir::ensure_private_dir(parent)
                    .map_err(|e| ProxyError::Shaper(format!("{}: {e}", parent.display())))?;
            }
            Ok(Arc::new(
                ReviewedProjection::load_with_store(path, &location).map_err(ProxyError::Shaper)?,
            ))
        }
        Mode::Auto { dir, min_runs } => {
            let config = AutoConfig {
                min_runs: *min_runs as u64,
                ..AutoConfig::default()
            };
            Ok(Arc::new(
                AutoShaper::open_with_store(dir, config, db)
                    .map_err(|e| ProxyError::Shaper(e.to_string()))?,
            ))
        }
    }
}

/// Builds the proxy core: one [`Upstream`] per server, all feeding one change hub.
pub fn build_core(
    servers: &ServerSet,
    shaper: Arc<dyn OutputShaper>,
    timeout: Duration,
    quiet: bool,
) -> Arc<ProxyCore> {
    let hub = Arc::new(ChangeHub::default());
    let upstreams = servers
        .servers
        .iter()
        .map(|spec| {
            let hub = hub.clone();
            Arc::new(Upstream::new(
                spec.clone(),
                timeout,
                Arc::new(move || hub.notify()),
            ))
        })
        .collect();
    Arc::new(ProxyCore::new(
        upstreams,
        shaper,
        Redactor::new(servers.secrets.iter().cloned()),
        CallLog::new(quiet),
        hub,
    ))
}

/// Runs the proxy until the agent disconnects (stdio) or the process is interrupted (HTTP).
pub async fn run(options: ProxyOptions) -> Result<(), ProxyError> {
    // Refused before anything starts: no upstream is launched for a proxy that cannot serve.
    if let Downstream::Http { security, .. } = &options.downstream {
        security.check_token().map_err(ProxyError::Usage)?;
    }
    for note in &options.servers.notes {
        eprintln!("ctxgc proxy: {note}");
    }
    let shaper = shaper_for(&options.mode, options.db.as_ref())?;
    let core = build_core(
        &options.servers,
        shaper.clone(),
        options.timeout,
        options.quiet,
    );
    if core.redactor().too_short() > 0 {
        eprintln!(
            "ctxgc proxy: {} credential value(s) shorter than {} characters cannot be redacted from what the agent receives (a value that short would match ordinary text): use longer credentials",
            core.redactor().too_short(),
            redact::MIN_SECRET_LEN
        );
    }
    let result = serve(options.downstream, core).await;
    shaper.flush();
    result
}

async fn serve(downstream: Downstream, core: Arc<ProxyCore>) -> Result<(), ProxyError> {
    // Learn the upstream tools before the agent asks, so the first listing is complete.
    core.connect_all().await;
    match downstream {
        Downstream::Stdio => {
            let (reads, writes, flushed) =
                stdio_gate::gate(tokio::io::stdin(), tokio::io::stdout());
            let service = ProxyServer::new(core)
                .serve((reads, writes))
                .await
                .map_err(|e| ProxyError::Session(e.to_string()))?;
            let ended = service
                .waiting()
                .await
                .map_err(|e| ProxyError::Session(e.to_string()));
            // The last answers reach stdout before the process exits.
            let _ = tokio::time::timeout(Duration::from_secs(5), flushed).await;
            ended.map(|_| ())
        }
        Downstream::Http {
            bind,
            port,
            security,
        } => {
            if !bind.is_loopback() {
                eprintln!(
                    "ctxgc proxy: listening on {bind}, reachable from other machines: only the token protects it (clients must also use a Host given with --allowed-host)"
                );
            }
            let listener = tokio::net::TcpListener::bind(SocketAddr::new(bind, port)).await?;
            eprintln!(
                "ctxgc proxy: serving MCP on http://{}/mcp (send Authorization: Bearer $CTXGC_TOKEN)",
                listener.local_addr()?
            );
            http::serve(listener, core, &security, async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
            Ok(())
        }
    }
}

/// [`run`] on a runtime of its own, for a synchronous `main`.
pub fn run_blocking(options: ProxyOptions) -> Result<(), ProxyError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(options))
}
