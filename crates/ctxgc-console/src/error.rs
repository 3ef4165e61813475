//! Every refusal the API gives: a status and a JSON body naming the problem.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An API error: `{"error": {"problem": "<code>", "message": "<what and where>"}}`.
///
/// `problem` is stable (`malformed-json`, `unknown-format`, `too-large`, `invalid-utf8`,
/// ...) for programs; `message` says what is wrong and where, for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable code for the kind of problem.
    pub problem: &'static str,
    /// What is wrong, naming the item or field.
    pub message: String,
}

impl ApiError {
    /// An error of `status` with a problem code and message.
    pub fn new(status: StatusCode, problem: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            problem,
            message: message.into(),
        }
    }

    /// A request the API cannot meet as asked (400).
    pub fn bad_request(problem: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, problem, message)
    }

    /// Something named in the request does not exist (404).
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not-found", message)
    }

    /// The console failed on its side (500): the store is unreachable, a task died.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl From<ctxgc_core::Error> for ApiError {
    /// Input errors are the caller's (4xx), each with its own problem code.
    fn from(err: ctxgc_core::Error) -> Self {
        use ctxgc_core::Error;
        let (status, problem) = match &err {
            Error::InvalidUtf8 { .. } => (StatusCode::BAD_REQUEST, "invalid-utf8"),
            Error::Json { .. } => (StatusCode::BAD_REQUEST, "malformed-json"),
            Error::UnknownFormat(_) => (StatusCode::UNPROCESSABLE_ENTITY, "unknown-format"),
            Error::Invalid(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid-items"),
            Error::Usage(_) => (StatusCode::BAD_REQUEST, "bad-request"),
        };
        ApiError::new(status, problem, err.to_string())
    }
}

impl From<ctxgc_core::store::StoreError> for ApiError {
    fn from(err: ctxgc_core::store::StoreError) -> Self {
        use ctxgc_core::store::StoreError;
        match &err {
            StoreError::Backend { .. } | StoreError::Corrupt { .. } => {
                ApiError::new(StatusCode::BAD_GATEWAY, "store", err.to_string())
            }
            _ => ApiError::new(StatusCode::CONFLICT, "store", err.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"problem": self.problem, "message": self.message}});
        (self.status, axum::Json(body)).into_response()
    }
}
