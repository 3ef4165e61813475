//! # ctxgc-console
//!
//! A local web console (`ctxgc serve`): paste or upload a trace or transcript, compile it
//! with a preset, and see the original and the compiled output side by side, every retired
//! or rewritten item marked with its reason code, the pass's documentation and the receipt's
//! exact original bytes one click away. A second tab browses the sessions of a store
//! (SQLite or PostgreSQL), their receipts and compaction steps, and what the gateway and
//! the MCP proxy saved when they write to the same store; a third links the bench and
//! projection reports found in a folder.
//!
//! The page, its script and its style are compiled into the binary: the console works
//! offline and loads nothing from elsewhere.
//!
//! The JSON API the page uses:
//!
//! | route | what |
//! |---|---|
//! | `POST /api/compile?preset=&from=&tokenizer=` | the body is the input; the compiled view, tokens and replayed cost per preset |
//! | `GET /api/passes` | every reason code with its pass's documentation |
//! | `GET /api/sessions` | the store's sessions |
//! | `GET /api/sessions/{id}?preset=` | one stored session, compiled |
//! | `GET /api/sessions/{id}/steps?tokenizer=` | a stored chat's cache-stable compaction steps |
//! | `GET /api/savings` | what the gateway and the proxy saved, per source and per session |
//! | `GET /api/sessions/{id}/savings` | one session's savings records, in the store's order |
//! | `GET /api/receipts/{id}?session=` | a stored receipt's exact bytes |
//! | `GET /api/examples`, `GET /api/examples/{name}` | the bundled examples |
//! | `GET /api/reports`, `GET /reports/{name}` | report pages of `--reports DIR` |
//!
//! ```no_run
//! use std::sync::Arc;
//! use ctxgc_console::{Console, ConsoleOptions};
//! # async fn run() -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let local = listener.local_addr()?;
//! let console = Arc::new(Console::new(ConsoleOptions::default(), None));
//! axum::serve(listener, ctxgc_console::router(console, local)).await
//! # }
//! ```
#![warn(missing_docs)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::middleware;
use axum::routing::{get, post};
use ctxgc_http_guard::{Guard, HttpSecurity, check_host, check_origin};
use ctxgc_store::{AnyStore, Location};

mod api;
mod assets;
mod cost;
mod error;
mod examples;
mod options;
mod playground;
mod security;
mod view;

pub use error::ApiError;
pub use view::{CompileView, ItemView, PresetTokens, ReceiptView, ReplayedCost};

/// Default limit on an uploaded input: far above a long agent session, far below a memory
/// problem.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// How the console is protected and what it serves besides the playground.
#[derive(Debug, Clone)]
pub struct ConsoleOptions {
    /// A token every request must carry (`Authorization: Bearer`, or `?token=` for pages
    /// and links a browser follows). Required off loopback.
    pub token: Option<String>,
    /// Hosts accepted in `Host` besides the local ones.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted besides the console's own.
    pub allowed_origins: Vec<String>,
    /// Largest accepted upload, in bytes.
    pub max_body_bytes: usize,
    /// A folder of report pages (`ctxgc bench --output html`, `ctxgc report`) to link.
    pub reports_dir: Option<PathBuf>,
}

impl Default for ConsoleOptions {
    fn default() -> Self {
        ConsoleOptions {
            token: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            reports_dir: None,
        }
    }
}

/// An opened store and where it is (for the page; a URL's password is never shown).
pub struct StoreHandle {
    pub(crate) store: Mutex<AnyStore>,
    pub(crate) location: String,
}

impl StoreHandle {
    /// Wraps a store opened at `location`. Open it before the async runtime starts: the
    /// PostgreSQL client runs a runtime of its own.
    pub fn new(store: AnyStore, location: &Location) -> StoreHandle {
        StoreHandle {
            store: Mutex::new(store),
            location: location.to_string(),
        }
    }
}

/// Everything the handlers share.
pub struct Console {
    pub(crate) options: ConsoleOptions,
    pub(crate) store: Option<Arc<StoreHandle>>,
}

impl Console {
    /// A console with these options, over `store` when one is given.
    pub fn new(options: ConsoleOptions, store: Option<StoreHandle>) -> Console {
        Console {
            options,
            store: store.map(Arc::new),
        }
    }
}

/// The application, behind the proxy's Host and Origin checks (against DNS rebinding and
/// foreign pages) and the token when one is set. `local` is the address the listener is
/// bound to: a `Host` must name its port.
pub fn router(console: Arc<Console>, local: SocketAddr) -> Router {
    let security = HttpSecurity {
        token: console.options.token.clone().unwrap_or_default(),
        allowed_hosts: console.options.allowed_hosts.clone(),
        allowed_origins: console.options.allowed_origins.clone(),
        max_body_bytes: console.options.max_body_bytes,
    };
    let guard = Guard::new(&security, local);
    let token_required = console.options.token.is_some();
    Router::new()
        .route("/", get(assets::index))
        .route("/assets/{name}", get(assets::asset))
        .route("/api/compile", post(api::compile::compile))
        .route("/api/passes", get(api::passes::passes))
        .route("/api/sessions", get(api::sessions::list))
        .route("/api/sessions/{id}", get(api::sessions::show))
        .route("/api/sessions/{id}/steps", get(api::steps::steps))
        .route("/api/sessions/{id}/savings", get(api::savings::session))
        .route("/api/savings", get(api::savings::overview))
        .route("/api/receipts/{id}", get(api::sessions::receipt))
        .route("/api/examples", get(api::examples::list))
        .route("/api/examples/{name}", get(api::examples::show))
        .route("/api/reports", get(api::reports::list))
        .route("/reports/{name}", get(api::reports::page))
        .fallback(api::not_found)
        .with_state(console)
        .layer(middleware::from_fn_with_state(
            (guard.clone(), token_required),
            security::check_token,
        ))
        .layer(middleware::from_fn_with_state(guard.clone(), check_origin))
        .layer(middleware::from_fn_with_state(guard, check_host))
}
