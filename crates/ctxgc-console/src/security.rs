//! The token check. Host and Origin are checked by the proxy's own middleware
//! (`ctxgc_http_guard`), so every ctxgc server refuses the same requests.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ctxgc_http_guard::{Guard, bearer_token, query_token};

use crate::error::ApiError;

/// Requires the token, when one is set, in `Authorization: Bearer` or, for what a browser
/// loads by following a link (the page, report pages), in the `token` query parameter.
pub async fn check_token(
    State((guard, required)): State<(Guard, bool)>,
    request: Request,
    next: Next,
) -> Response {
    if !required {
        return next.run(request).await;
    }
    let from_header = bearer_token(request.headers());
    let from_query = request.uri().query().and_then(query_token);
    let ok = from_header
        .iter()
        .chain(from_query.iter())
        .any(|t| guard.token_matches(t));
    if ok {
        return next.run(request).await;
    }
    let mut response = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "missing or wrong token: send Authorization: Bearer $CTXGC_TOKEN, or open the console at /?token=...",
    )
    .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"ctxgc-console\""),
    );
    response
}
