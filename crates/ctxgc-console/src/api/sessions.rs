//! `GET /api/sessions`, `GET /api/sessions/{id}` and `GET /api/receipts/{id}?session=`: the
//! store's sessions, one compiled, and a receipt's exact bytes.

use std::collections::BTreeMap;
use std::sync::{Arc, MutexGuard};

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use base64::Engine;
use ctxgc_core::Compiled;
use ctxgc_core::formats::Family;
use ctxgc_core::store::{Store, StoredSession};
use ctxgc_store::AnyStore;
use serde::{Deserialize, Serialize};

use super::{blocking, json_response};
use crate::error::ApiError;
use crate::options::CompileQuery;
use crate::view::CompileView;
use crate::{Console, StoreHandle};

pub(crate) fn store_of(console: &Console) -> Result<Arc<StoreHandle>, ApiError> {
    console.store.clone().ok_or_else(|| {
        ApiError::not_found(
            "no store is open: start the console with --db PATH|URL (or set CTXGC_DB) to browse sessions",
        )
    })
}

pub(crate) fn lock(handle: &StoreHandle) -> Result<MutexGuard<'_, AnyStore>, ApiError> {
    handle
        .store
        .lock()
        .map_err(|_| ApiError::internal("the store is unusable after an earlier failure"))
}

/// The store and its sessions.
#[derive(Debug, Serialize)]
struct SessionList {
    /// `sqlite` or `postgres`, with the location (passwords hidden); `null` without a store.
    store: Option<StoreInfo>,
    sessions: Vec<ctxgc_core::store::SessionInfo>,
}

#[derive(Debug, Serialize)]
struct StoreInfo {
    backend: &'static str,
    location: String,
}

/// Every stored session, in the store's order (by id).
pub async fn list(State(console): State<Arc<Console>>) -> Result<Response, ApiError> {
    let Some(handle) = console.store.clone() else {
        return json_response(&SessionList {
            store: None,
            sessions: Vec::new(),
        });
    };
    blocking(move || {
        let mut store = lock(&handle)?;
        let sessions = store.sessions()?;
        json_response(&SessionList {
            store: Some(StoreInfo {
                backend: store.backend(),
                location: handle.location.clone(),
            }),
            sessions,
        })
    })
    .await
}

/// One stored session, compiled as `ctxgc session compile` would, with its items' originals.
pub async fn show(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    query: Result<Query<CompileQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request("bad-query", e.body_text()))?;
    let mut options = query.to_options()?;
    let preset = query.preset_name()?.to_owned();
    let handle = store_of(&console)?;
    blocking(move || {
        let mut store = lock(&handle)?;
        let (compiled, originals) = compile_stored(&mut store, &id, &mut options)?;
        drop(store);
        let view = CompileView::new(&compiled, &preset, &originals, &[]);
        json_response(&serde_json::json!({"context_id": id, "compiled": view}))
    })
    .await
}

fn compile_stored(
    store: &mut AnyStore,
    id: &str,
    options: &mut ctxgc_core::Options,
) -> Result<(Compiled, BTreeMap<String, String>), ApiError> {
    if let Some(transcript) = store.chat_transcript(id)? {
        let compiled = transcript.compile(options)?;
        let originals = transcript
            .messages
            .iter()
            .map(|m| (m.id.clone(), m.raw.clone()))
            .collect();
        return Ok((compiled, originals));
    }
    let format = store
        .info(id)?
        .and_then(|info| info.format)
        .ok_or_else(|| ApiError::not_found(format!("no session {id:?} in the store")))?;
    if format.wire().family() != Family::Events {
        return Err(ApiError::new(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "unknown-format",
            format!(
                "session {id:?} holds {} items, which cannot be compiled from the store",
                format.name()
            ),
        ));
    }
    let template = ctxgc_core::compile::event_session_template(options);
    let mut stored = StoredSession::open(&mut *store, id, template)?;
    stored.compile()?;
    let compiled = ctxgc_core::compile::report_events(stored.session(), options.tokenizer);
    let originals = stored
        .session()
        .items()
        .iter()
        .map(|item| (item.id.clone(), item.raw.clone()))
        .collect();
    Ok((compiled, originals))
}

/// `?session=CTX`: receipts live in a session.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptQuery {
    session: Option<String>,
    #[allow(dead_code)]
    token: Option<String>,
}

/// A receipt's exact bytes: as text when they are UTF-8, and always in base64.
#[derive(Debug, Serialize)]
struct ReceiptBytes {
    session: String,
    id: String,
    bytes: usize,
    hash: String,
    utf8: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    original: Option<String>,
    original_base64: String,
}

/// The handler of `GET /api/receipts/{id}?session=CTX`.
pub async fn receipt(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    query: Result<Query<ReceiptQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request("bad-query", e.body_text()))?;
    let session = query.session.filter(|s| !s.is_empty()).ok_or_else(|| {
        ApiError::bad_request(
            "missing-session",
            "query parameter session is required: receipts are kept per session (/api/receipts/ID?session=CONTEXT_ID)",
        )
    })?;
    let handle = store_of(&console)?;
    blocking(move || {
        let raw = lock(&handle)?.receipt(&session, &id)?.ok_or_else(|| {
            ApiError::not_found(format!("no receipt {id:?} in session {session:?}"))
        })?;
        let text = String::from_utf8(raw.clone()).ok();
        json_response(&ReceiptBytes {
            bytes: raw.len(),
            hash: ctxgc_core::store::content_hash(&raw),
            utf8: text.is_some(),
            original: text,
            original_base64: base64::engine::general_purpose::STANDARD.encode(&raw),
            session,
            id,
        })
    })
    .await
}
