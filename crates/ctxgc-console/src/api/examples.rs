//! `GET /api/examples` and `GET /api/examples/{name}`: the bundled examples, to try the
//! console without an input at hand.

use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::json_response;
use crate::error::ApiError;
use crate::examples::EXAMPLES;

#[derive(Debug, Serialize)]
struct ExampleInfo {
    name: &'static str,
    title: &'static str,
    bytes: usize,
}

/// The examples' names, titles and sizes.
pub async fn list() -> Result<Response, ApiError> {
    let list: Vec<ExampleInfo> = EXAMPLES
        .iter()
        .map(|e| ExampleInfo {
            name: e.name,
            title: e.title,
            bytes: e.text.len(),
        })
        .collect();
    json_response(&list)
}

/// One example's text.
pub async fn show(Path(name): Path<String>) -> Result<Response, ApiError> {
    let example = EXAMPLES
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| ApiError::not_found(format!("no bundled example {name:?}")))?;
    let mut response = example.text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Ok(response)
}
