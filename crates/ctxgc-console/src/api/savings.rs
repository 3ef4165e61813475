//! `GET /api/savings` and `GET /api/sessions/{id}/savings`: what the gateway and the proxy
//! saved, as they recorded it in the store the console reads (see
//! `ctxgc_core::store::savings`): totals per source and per session, and one session's
//! records in the store's order.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;
use ctxgc_core::store::Store;
use ctxgc_core::store::savings::{SavingsRecord, SavingsTotals, totals};
use serde::Serialize;

use super::sessions::{lock, store_of};
use super::{blocking, json_response};
use crate::Console;
use crate::error::ApiError;

/// Every source's totals, and each session's.
#[derive(Debug, Serialize)]
struct Overview {
    /// False without a store (then everything is empty).
    store: bool,
    totals: Vec<SavingsTotals>,
    sessions: Vec<SessionSavings>,
}

/// One session's totals, per source.
#[derive(Debug, Serialize)]
struct SessionSavings {
    context_id: String,
    totals: Vec<SavingsTotals>,
}

/// One session's records and totals.
#[derive(Debug, Serialize)]
struct SessionRecords {
    context_id: String,
    totals: Vec<SavingsTotals>,
    records: Vec<SavingsRecord>,
}

/// Totals per source, and per session (sessions in the store's order).
pub async fn overview(State(console): State<Arc<Console>>) -> Result<Response, ApiError> {
    let Some(handle) = console.store.clone() else {
        return json_response(&Overview {
            store: false,
            totals: Vec::new(),
            sessions: Vec::new(),
        });
    };
    blocking(move || {
        let records = lock(&handle)?.savings(None)?;
        let mut by_session: BTreeMap<&str, Vec<SavingsRecord>> = BTreeMap::new();
        for r in &records {
            by_session
                .entry(r.context_id.as_str())
                .or_default()
                .push(r.clone());
        }
        json_response(&Overview {
            store: true,
            totals: totals(&records),
            sessions: by_session
                .into_iter()
                .map(|(id, records)| SessionSavings {
                    context_id: id.to_owned(),
                    totals: totals(&records),
                })
                .collect(),
        })
    })
    .await
}

/// One session's records (none is an empty list: a session the gateway never compiled).
pub async fn session(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let handle = store_of(&console)?;
    blocking(move || {
        let records = lock(&handle)?.savings(Some(&id))?;
        json_response(&SessionRecords {
            totals: totals(&records),
            context_id: id,
            records,
        })
    })
    .await
}
