//! `ctxgc gateway --upstream openai|anthropic|URL [--port PORT] [--db PATH|URL] [--recall] ...`

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use clap::{Args, ValueEnum};
use ctxgc_core::chat::Preset;
use ctxgc_gateway::upstream::{Upstream, Upstreams};
use ctxgc_gateway::{DEFAULT_MAX_BODY_BYTES, GatewayOptions};

use crate::Failure;

/// Where Anthropic prompt-cache breakpoints go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Breakpoints {
    /// The client's own only.
    Off,
    /// At the end of the stable prefix (at most four in all, the client's own kept).
    Auto,
}

/// Arguments of `ctxgc gateway`.
#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// Where requests go: openai, anthropic or a URL, optionally under a path prefix
    /// (/claude=anthropic). Repeatable: Anthropic requests go to the anthropic upstream,
    /// others to the openai one.
    #[arg(long, value_name = "[PREFIX=]openai|anthropic|URL", required = true)]
    pub upstream: Vec<String>,
    /// Port to listen on (0 picks a free one; the address is printed on stderr).
    #[arg(long, default_value_t = 8787)]
    pub port: u16,
    /// Address to bind; other than loopback needs a token.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Where conversations and receipts are kept: a SQLite file or a postgres:// URL (several
    /// gateways on one PostgreSQL share conversations). Default: $CTXGC_DB, else
    /// .ctxgc/ctxgc.db.
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<String>,
    /// What compiling may take away: lossless, default or aggressive (always cache-stable:
    /// what was sent stays a byte-stable prefix between compaction steps).
    #[arg(long, default_value = "default")]
    pub preset: String,
    /// Forward conversations without compiling them (metrics and logs only).
    #[arg(long)]
    pub no_compile: bool,
    /// Offer the model a ctxgc_recall tool and answer it from the store (stubs then name
    /// their receipt).
    #[arg(long)]
    pub recall: bool,
    /// Anthropic prompt-cache breakpoints.
    #[arg(long, value_enum, default_value = "off")]
    pub cache_breakpoints: Breakpoints,
    /// A token clients must send in x-ctxgc-token (default: $CTXGC_TOKEN; none on loopback
    /// when unset). Visible in the process list: prefer the variable.
    #[arg(long)]
    pub token: Option<String>,
    /// A Host accepted besides the local ones (repeatable).
    #[arg(long, value_name = "HOST")]
    pub allowed_host: Vec<String>,
    /// A browser origin accepted besides the gateway's own (repeatable).
    #[arg(long, value_name = "ORIGIN")]
    pub allowed_origin: Vec<String>,
    /// Largest accepted request body, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// Seconds an upstream may take to start answering, and between two chunks of a stream.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// No JSON line per request on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// About how many MiB of conversations stay compiled in memory; past it the least
    /// recently used are dropped and reloaded from the store when they come back.
    #[arg(long, value_name = "MIB", default_value_t = ctxgc_gateway::sessions::DEFAULT_MEMORY_BUDGET >> 20)]
    pub memory_mb: usize,
}

/// The variable that holds the secret credentials are hashed with (tenant scoping). Gateways
/// that share a store should share it; unset, the first gateway on a store makes one and
/// keeps it there.
pub const TENANT_SECRET_VAR: &str = "CTXGC_TENANT_SECRET";

/// Runs `ctxgc gateway` until interrupted.
pub fn run(args: GatewayArgs) -> Result<(), Failure> {
    let list = args
        .upstream
        .iter()
        .map(|u| Upstream::parse(u))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::Usage(e.to_string()))?;
    let upstreams = Upstreams::new(list).map_err(|e| Failure::Usage(e.to_string()))?;
    let preset = Preset::from_name(&args.preset).ok_or_else(|| {
        Failure::Usage(format!(
            "--preset {:?}: expected lossless, default or aggressive",
            args.preset
        ))
    })?;
    if args.timeout == 0 {
        return Err(Failure::Usage("--timeout must be at least 1 second".into()));
    }
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var("CTXGC_TOKEN").ok())
        .filter(|t| !t.is_empty());
    if !args.bind.is_loopback() && token.is_none() {
        return Err(Failure::Usage(format!(
            "--bind {}: a gateway reachable from other machines needs a token: export CTXGC_TOKEN=CHOOSE_A_SECRET (or --token)",
            args.bind
        )));
    }
    if args.recall && args.no_compile {
        return Err(Failure::Usage(
            "--recall answers from compiled conversations: drop --no-compile".into(),
        ));
    }
    let mut options = GatewayOptions::new(upstreams);
    options.preset = preset;
    options.recall = args.recall;
    options.cache_breakpoints = args.cache_breakpoints == Breakpoints::Auto;
    options.token = token;
    options.allowed_hosts = args.allowed_host;
    options.allowed_origins = args.allowed_origin;
    options.max_body_bytes = args.max_body_bytes;
    options.timeout = Duration::from_secs(args.timeout);
    options.quiet = args.quiet;
    if args.memory_mb == 0 {
        return Err(Failure::Usage("--memory-mb must be at least 1".into()));
    }
    options.memory_budget = args.memory_mb.saturating_mul(1 << 20);
    options.tenant_secret = std::env::var(TENANT_SECRET_VAR)
        .ok()
        .filter(|t| !t.is_empty());
    // The store is opened before the runtime starts (its PostgreSQL client runs one of its
    // own) and used from blocking threads only.
    let store = if args.no_compile {
        None
    } else {
        let location = ctxgc_store::Location::from_env(args.db.as_deref())
            .map_err(|e| Failure::Input(e.to_string()))?;
        if let ctxgc_store::Location::Sqlite(path) = &location
            && let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)?;
        }
        let store = ctxgc_store::open(&location).map_err(|e| Failure::Input(e.to_string()))?;
        eprintln!("ctxgc gateway: conversations kept in {location}");
        Some(store)
    };
    let upstream_names: Vec<String> = options
        .upstreams
        .list()
        .iter()
        .map(|u| u.to_string())
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.bind, args.port)).await?;
        let local = listener.local_addr()?;
        eprintln!(
            "ctxgc gateway: listening on http://{local} -> {} (set OPENAI_BASE_URL=http://{local}/v1 or ANTHROPIC_BASE_URL=http://{local})",
            upstream_names.join(", ")
        );
        ctxgc_gateway::serve(listener, options, store, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| match e {
            ctxgc_gateway::GatewayError::Usage(m) => Failure::Usage(m),
            other => Failure::Input(other.to_string()),
        })
    })
}
