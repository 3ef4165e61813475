//! A console on a loopback port for the length of a test.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use ctxgc_console::{Console, ConsoleOptions, StoreHandle};
use ctxgc_core::store::chat::{ChatAppend, append_chat};
use ctxgc_core::store::{Store, StoredSession};
use ctxgc_core::{Format, Session};

/// A running console; stopped when dropped (its runtime goes with it).
pub struct Server {
    pub base: String,
    pub runtime: tokio::runtime::Runtime,
}

impl Server {
    /// Starts a console on 127.0.0.1 with a free port. Stores are opened by the caller
    /// before this (the PostgreSQL client runs a runtime of its own).
    pub fn start(options: ConsoleOptions, store: Option<StoreHandle>) -> Server {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let base = runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let local = listener.local_addr().expect("address");
            let app = ctxgc_console::router(Arc::new(Console::new(options, store)), local);
            tokio::spawn(async move { axum::serve(listener, app).await });
            format!("http://{local}")
        });
        Server { base, runtime }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// A file of the repository, by its path from the repository root.
pub fn repo_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

pub fn read(path: &str) -> String {
    std::fs::read_to_string(repo_file(path)).expect("repository file")
}

/// One events session and one chat session in `store`.
pub fn fill<S: Store>(store: &mut S) {
    let items = ctxgc_core::frontend::events::lower_events(
        &read("examples/coding-session.jsonl"),
        &Default::default(),
    )
    .unwrap();
    let template = Session::with_passes(Default::default(), ctxgc_core::passes::event_pipeline());
    let mut stored = StoredSession::open(&mut *store, "coding", template).unwrap();
    stored.append(Format::Events, items).unwrap();
    drop(stored);
    append_chat(
        store,
        "support",
        &read("examples/support-session.json"),
        &ChatAppend::default(),
    )
    .unwrap();
}
