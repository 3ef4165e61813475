//! `POST /api/compile?preset=&from=&tokenizer=`: the body is the input, as uploaded.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::{blocking, json_response};
use crate::Console;
use crate::error::ApiError;
use crate::options::CompileQuery;
use crate::view::CompileView;

/// Compiles the uploaded input and answers the full view.
pub async fn compile(
    State(console): State<Arc<Console>>,
    query: Result<Query<CompileQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request("bad-query", e.body_text()))?;
    let options = query.to_options()?;
    let preset = query.preset_name()?.to_owned();
    let bytes = read_body(&headers, body, console.options.max_body_bytes).await?;
    blocking(move || {
        let text = ctxgc_core::error::decode_utf8(&bytes)?;
        if text.trim().is_empty() {
            return Err(ApiError::bad_request(
                "empty",
                "the request body is empty: send the trace or transcript to compile",
            ));
        }
        let compiled = crate::playground::compile(text, &options, &preset)?;
        let view = CompileView::new(
            &compiled.compiled,
            &preset,
            &compiled.originals,
            &compiled.presets,
        );
        json_response(&view)
    })
    .await
}

/// Reads the whole body under `limit` bytes (a declared length over it is refused before
/// reading, a stream over it as soon as it passes).
async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too-large",
            format!(
                "the request body is over the limit of {limit} bytes (ctxgc serve --max-body-bytes)"
            ),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes().to_vec()),
        Err(err) if err.is::<LengthLimitError>() => Err(too_large()),
        Err(err) => Err(ApiError::bad_request(
            "unreadable-body",
            format!("the request body could not be read: {err}"),
        )),
    }
}
