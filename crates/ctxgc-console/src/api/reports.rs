//! `GET /api/reports` and `GET /reports/{name}`: the HTML report pages (`ctxgc bench
//! --output html`, `ctxgc report`) found in the folder given with `--reports`.

use std::path::Path as FsPath;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::{blocking, json_response};
use crate::Console;
use crate::error::ApiError;

#[derive(Debug, Serialize)]
struct ReportInfo {
    name: String,
    href: String,
    bytes: u64,
}

#[derive(Debug, Serialize)]
struct ReportList {
    /// The folder, or `null` when none was given.
    folder: Option<String>,
    reports: Vec<ReportInfo>,
}

/// The `.html` files directly in `dir`, sorted by name, with their sizes.
fn pages(dir: &FsPath) -> Result<Vec<(String, u64)>, ApiError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| ApiError::internal(format!("reports folder {}: {e}", dir.display())))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if is_file && name.ends_with(".html") {
            let bytes = entry.metadata().map_or(0, |m| m.len());
            out.push((name, bytes));
        }
    }
    out.sort();
    Ok(out)
}

/// The report pages.
pub async fn list(State(console): State<Arc<Console>>) -> Result<Response, ApiError> {
    let Some(dir) = console.options.reports_dir.clone() else {
        return json_response(&ReportList {
            folder: None,
            reports: Vec::new(),
        });
    };
    blocking(move || {
        let reports = pages(&dir)?
            .into_iter()
            .map(|(name, bytes)| ReportInfo {
                href: format!("/reports/{name}"),
                name,
                bytes,
            })
            .collect();
        json_response(&ReportList {
            folder: Some(dir.display().to_string()),
            reports,
        })
    })
    .await
}

/// One report page; only names the listing gives are served, so no path leaves the folder.
pub async fn page(
    State(console): State<Arc<Console>>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let dir = console.options.reports_dir.clone().ok_or_else(|| {
        ApiError::not_found("no reports folder: start the console with --reports DIR")
    })?;
    blocking(move || {
        if !pages(&dir)?.iter().any(|(n, _)| *n == name) {
            return Err(ApiError::not_found(format!(
                "no report page {name:?} in {}",
                dir.display()
            )));
        }
        let html = std::fs::read(dir.join(&name))
            .map_err(|e| ApiError::internal(format!("{}: {e}", dir.join(&name).display())))?;
        let mut response = html.into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        Ok(response)
    })
    .await
}
