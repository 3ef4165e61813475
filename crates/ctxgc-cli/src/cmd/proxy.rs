//! `ctxgc proxy (--servers FILE | --upstream-cmd CMD | --upstream-url URL) [--config P | --auto DIR] [--http PORT]`

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args};
use ctxgc_http_guard::{DEFAULT_MAX_BODY_BYTES, HttpSecurity};
use ctxgc_proxy::{Downstream, Mode, ProxyError, ProxyOptions, config};

use crate::Failure;

/// Arguments of `ctxgc proxy`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("upstream").required(true).args(["servers", "upstream_cmd", "upstream_url"])))]
#[command(group(ArgGroup::new("mode").args(["config", "auto"])))]
pub struct ProxyArgs {
    /// The `mcpServers` JSON (as Claude Desktop, Claude Code and Cursor use); `${VAR}` is read
    /// from the environment at start.
    #[arg(long, value_name = "FILE")]
    pub servers: Option<PathBuf>,
    /// One stdio server: its command line, e.g. "python -m my_server".
    #[arg(long, value_name = "CMD")]
    pub upstream_cmd: Option<String>,
    /// One streamable-HTTP server.
    #[arg(long, value_name = "URL")]
    pub upstream_url: Option<String>,
    /// A header for --upstream-url, NAME=VALUE (repeatable). Visible in the process list:
    /// prefer --servers with ${VAR} for credentials.
    #[arg(long, value_name = "NAME=VALUE", requires = "upstream_url")]
    pub header: Vec<String>,
    /// The name of the single server given by --upstream-cmd or --upstream-url.
    #[arg(long, value_name = "NAME", default_value = "upstream")]
    pub name: String,
    /// An environment variable whose value is a credential (repeatable): it is never shown
    /// to the agent. Variables named like credentials (`*_API_KEY`, `*_TOKEN`, `*SECRET*`,
    /// `*PASSWORD`...) and passwords in URLs are hidden without it.
    #[arg(long, value_name = "NAME")]
    pub secret_env: Vec<String>,
    /// Apply a reviewed projection file.
    #[arg(long, value_name = "PROJECTION")]
    pub config: Option<PathBuf>,
    /// Automatic mode: observe, learn and trim; traces, state and report live in DIR (0700).
    #[arg(long, value_name = "DIR")]
    pub auto: Option<PathBuf>,
    /// Where the originals of trimmed outputs are kept, for expand after restarts and
    /// crashes: a SQLite file or a postgres:// URL (default: DIR/ctxgc.db with --auto;
    /// $CTXGC_DB or .ctxgc/ctxgc.db with --config).
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<String>,
    /// Runs observed unchanged before automatic mode trims.
    #[arg(long, default_value_t = 5, requires = "auto")]
    pub min_runs: usize,
    /// Serve streamable HTTP on this port instead of stdio (0 picks a free port).
    #[arg(long, value_name = "PORT")]
    pub http: Option<u16>,
    /// Address to bind with --http.
    #[arg(long, default_value = "127.0.0.1", requires = "http")]
    pub bind: IpAddr,
    /// The bearer token clients must send over HTTP (default: $CTXGC_TOKEN). Visible in the
    /// process list: prefer the variable.
    #[arg(long, requires = "http")]
    pub token: Option<String>,
    /// A Host accepted besides the local ones (repeatable), e.g. your tunnel's name.
    #[arg(long, value_name = "HOST", requires = "http")]
    pub allowed_host: Vec<String>,
    /// A browser origin accepted besides the proxy's own (repeatable), e.g.
    /// https://console.example.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    pub allowed_origin: Vec<String>,
    /// Largest accepted HTTP request body, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES, requires = "http")]
    pub max_body_bytes: usize,
    /// Seconds allowed for starting an upstream and for each of its answers.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// No per-call line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

fn config_failure(err: config::ConfigError) -> Failure {
    match err {
        config::ConfigError::NoServer => Failure::Usage(err.to_string()),
        other => Failure::Input(other.to_string()),
    }
}

/// Runs `ctxgc proxy`.
pub fn run(args: ProxyArgs) -> Result<(), Failure> {
    let lookup = |name: &str| std::env::var(name).ok();
    let mut servers = if let Some(path) = &args.servers {
        config::load_servers(path).map_err(config_failure)?
    } else if let Some(cmd) = &args.upstream_cmd {
        config::single_command(&args.name, cmd, &lookup).map_err(config_failure)?
    } else if let Some(url) = &args.upstream_url {
        config::single_url(&args.name, url, &args.header, &lookup).map_err(config_failure)?
    } else {
        return Err(Failure::Usage(config::ConfigError::NoServer.to_string()));
    };
    // Stdio upstreams inherit this process's environment: its credentials must not reach
    // the agent either.
    let environment = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
    servers.add_inherited_env(environment, &args.secret_env);
    let mode = match (&args.config, &args.auto) {
        (Some(path), _) => Mode::Config(path.clone()),
        (None, Some(dir)) => Mode::Auto {
            dir: dir.clone(),
            min_runs: args.min_runs,
        },
        (None, None) => Mode::PassThrough,
    };
    let downstream = match args.http {
        None => Downstream::Stdio,
        Some(port) => {
            let token = args
                .token
                .clone()
                .or_else(|| std::env::var("CTXGC_TOKEN").ok())
                .filter(|t| !t.is_empty())
                .ok_or_else(|| {
                    Failure::Usage(
                        "--http needs a token: export CTXGC_TOKEN=CHOOSE_A_SECRET (or --token)"
                            .into(),
                    )
                })?;
            let security = HttpSecurity {
                token,
                allowed_hosts: args.allowed_host.clone(),
                allowed_origins: args.allowed_origin.clone(),
                max_body_bytes: args.max_body_bytes,
            };
            security.check_token().map_err(Failure::Usage)?;
            Downstream::Http {
                bind: args.bind,
                port,
                security,
            }
        }
    };
    if args.timeout == 0 {
        return Err(Failure::Usage("--timeout must be at least 1 second".into()));
    }
    ctxgc_proxy::run_blocking(ProxyOptions {
        servers,
        mode,
        downstream,
        timeout: Duration::from_secs(args.timeout),
        quiet: args.quiet,
        db: args.db.as_deref().map(ctxgc_store::Location::parse),
    })
    .map_err(|err| match err {
        ProxyError::Usage(m) => Failure::Usage(m),
        other => Failure::Input(other.to_string()),
    })
}
