//! The JSON API's handlers, one module per resource.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::error::ApiError;

pub mod compile;
pub mod examples;
pub mod passes;
pub mod reports;
pub mod savings;
pub mod sessions;
pub mod steps;

/// Any other path: a JSON 404 naming it.
pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!("no such page or API route: {}", uri.path()))
}

/// A value as a JSON response.
pub(crate) fn json_response<T: Serialize>(value: &T) -> Result<Response, ApiError> {
    let body = serde_json::to_vec(value)
        .map_err(|e| ApiError::internal(format!("the answer could not be written: {e}")))?;
    let mut response = (StatusCode::OK, Body::from(body)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// Runs blocking work (compiling, the store) off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::internal(format!("the request's task failed: {e}")))?
}
