//! `ctxgc serve [--port PORT] [--bind ADDR --token T] [--db PATH|URL] [--reports DIR]`

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use ctxgc_console::{Console, ConsoleOptions, DEFAULT_MAX_BODY_BYTES, StoreHandle};
use ctxgc_http_guard::HttpSecurity;
use ctxgc_store::Location;

use crate::Failure;

/// Arguments of `ctxgc serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Port to listen on (0 picks a free one; the address is printed on stderr).
    #[arg(long, default_value_t = 8790)]
    pub port: u16,
    /// Address to bind; other than loopback needs a token.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// A token every request must carry (default: $CTXGC_TOKEN; none on loopback when
    /// unset). Open the console at /?token=... . Visible in the process list: prefer the
    /// variable.
    #[arg(long)]
    pub token: Option<String>,
    /// The store whose sessions the console shows: a SQLite file or a postgres:// URL.
    /// Default: $CTXGC_DB, else .ctxgc/ctxgc.db when it exists (none is created).
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<String>,
    /// A folder of report pages (`ctxgc bench --output html`, `ctxgc report`) to link.
    #[arg(long, value_name = "DIR")]
    pub reports: Option<PathBuf>,
    /// A Host accepted besides the local ones (repeatable).
    #[arg(long, value_name = "HOST")]
    pub allowed_host: Vec<String>,
    /// A browser origin accepted besides the console's own (repeatable).
    #[arg(long, value_name = "ORIGIN")]
    pub allowed_origin: Vec<String>,
    /// Largest accepted upload, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
}

/// The store to show: the one named, or the default file when it already exists.
fn open_store(db: Option<&str>) -> Result<Option<StoreHandle>, Failure> {
    let named =
        db.is_some() || std::env::var(ctxgc_store::ENV_VAR).is_ok_and(|v| !v.trim().is_empty());
    let location = Location::from_env(db).map_err(|e| Failure::Input(e.to_string()))?;
    if let Location::Sqlite(path) = &location
        && !path.is_file()
    {
        if named {
            return Err(Failure::Usage(format!(
                "--db {}: no such SQLite database (the console only reads stores; `ctxgc session append` or the gateway creates one)",
                path.display()
            )));
        }
        return Ok(None);
    }
    let store =
        ctxgc_store::open(&location).map_err(|e| Failure::Input(format!("{location}: {e}")))?;
    eprintln!("ctxgc serve: sessions from {location}");
    Ok(Some(StoreHandle::new(store, &location)))
}

/// Runs `ctxgc serve` until interrupted.
pub fn run(args: ServeArgs) -> Result<(), Failure> {
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var("CTXGC_TOKEN").ok())
        .filter(|t| !t.is_empty());
    if let Some(token) = &token {
        let security = HttpSecurity {
            token: token.clone(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: args.max_body_bytes,
        };
        security.check_token().map_err(Failure::Usage)?;
    } else if !args.bind.is_loopback() {
        return Err(Failure::Usage(format!(
            "--bind {}: a console reachable from other machines needs a token: export CTXGC_TOKEN=CHOOSE_A_SECRET (or --token)",
            args.bind
        )));
    }
    if let Some(dir) = &args.reports
        && !dir.is_dir()
    {
        return Err(Failure::Usage(format!(
            "--reports {}: no such folder",
            dir.display()
        )));
    }
    // The store is opened before the runtime starts: its PostgreSQL client runs one of its own.
    let store = open_store(args.db.as_deref())?;
    let options = ConsoleOptions {
        token,
        allowed_hosts: args.allowed_host,
        allowed_origins: args.allowed_origin,
        max_body_bytes: args.max_body_bytes,
        reports_dir: args.reports,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.bind, args.port)).await?;
        let local = listener.local_addr()?;
        eprintln!("ctxgc serve: console on http://{local}/");
        let app = ctxgc_console::router(Arc::new(Console::new(options, store)), local);
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        Ok(())
    })
}
