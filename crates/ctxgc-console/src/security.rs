//! The token check. Host and Origin are checked by the proxy's own middleware
//! (`ctxgc_proxy::http`), so every ctxgc server refuses the same requests.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ctxgc_proxy::http::Guard;

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
    let from_header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .map(|t| t.trim().to_owned());
    let from_query = request.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|pair| pair.strip_prefix("token="))
            .map(percent_decode)
    });
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

/// Decodes `%XX` escapes and `+` of a query value; a malformed escape stays as it is.
pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let decoded = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match decoded {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn query_values_are_decoded() {
        assert_eq!(percent_decode("a%2Fb+c"), "a/b c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
        assert_eq!(percent_decode("%4"), "%4");
    }
}
