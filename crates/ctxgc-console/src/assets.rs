//! The page, its script and its style, compiled into the binary: nothing is fetched from
//! elsewhere, so the console works offline.

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

const INDEX: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/style.css");

/// Only the console's own script and style run on its page.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn with_type(body: &'static str, content_type: &'static str) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    (headers, body).into_response()
}

/// The page.
pub async fn index() -> Response {
    with_type(INDEX, "text/html; charset=utf-8")
}

/// `app.js` or `style.css`.
pub async fn asset(Path(name): Path<String>) -> Result<Response, ApiError> {
    match name.as_str() {
        "app.js" => Ok(with_type(SCRIPT, "text/javascript; charset=utf-8")),
        "style.css" => Ok(with_type(STYLE, "text/css; charset=utf-8")),
        _ => Err(ApiError::not_found(format!("no asset {name:?}"))),
    }
}
