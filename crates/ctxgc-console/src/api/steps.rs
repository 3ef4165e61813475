//! `GET /api/sessions/{id}/steps?tokenizer=`: how a stored chat session grew and where
//! cache-stable compilation took its compaction steps.
//!
//! The store keeps every message at its position; cache-stable steps are a pure function of
//! the messages so far, so compiling the stored prefix that ends where a step was taken gives
//! exactly the output an agent received at that point. Each step is reported with the
//! session's tokens at that point, uncompacted (`tokens_before`) and compiled (`tokens_after`).

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use ctxgc_core::Options;
use ctxgc_core::session::CompactionStep;
use ctxgc_core::store::Store;
use ctxgc_core::store::chat::ChatTranscript;
use serde::{Deserialize, Serialize};

use super::sessions::{lock, store_of};
use super::{blocking, json_response};
use crate::Console;
use crate::error::ApiError;
use crate::options::{CompileQuery, apply_preset};

/// `?tokenizer=`: steps are always those of the cache-stable preset.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepsQuery {
    tokenizer: Option<String>,
    #[allow(dead_code)]
    token: Option<String>,
}

/// One point of the session: its first `messages` messages.
#[derive(Debug, Serialize)]
struct Point {
    messages: usize,
    /// Tokens of those messages, uncompacted.
    tokens_before: usize,
    /// Tokens of their cache-stable compiled output.
    tokens_after: usize,
}

/// A compaction step with the session's tokens where it was taken.
#[derive(Debug, Serialize)]
struct StepView {
    /// What the compiler reports: `at` (messages when taken), `items` (ids whose decision
    /// changed), `tokens_saved`, `prefix_tokens_invalidated`, `expected_turns`,
    /// `estimated_net`.
    #[serde(flatten)]
    step: CompactionStep,
    /// Tokens of the first `at` messages, uncompacted.
    tokens_before: usize,
    /// Tokens of their compiled output, the step applied.
    tokens_after: usize,
}

#[derive(Debug, Serialize)]
struct StepsView {
    context_id: String,
    format: &'static str,
    tokenizer: &'static str,
    /// The whole session: messages and tokens uncompacted and compiled.
    session: Point,
    steps: Vec<StepView>,
}

/// The handler.
pub async fn steps(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    query: Result<Query<StepsQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::bad_request("bad-query", e.body_text()))?;
    let mut options = CompileQuery {
        tokenizer: query.tokenizer,
        ..CompileQuery::default()
    }
    .to_options()?;
    apply_preset(&mut options, "cache-stable");
    let handle = store_of(&console)?;
    blocking(move || {
        let transcript = lock(&handle)?.chat_transcript(&id)?;
        let transcript = match transcript {
            Some(t) => t,
            None => return Err(not_a_chat(&mut *lock(&handle)?, &id)?),
        };
        json_response(&steps_of(&id, &transcript, &options)?)
    })
    .await
}

/// Why `id` has no steps: it is no session, or an event trace (cache-stable compilation is
/// for message transcripts).
fn not_a_chat<S: Store>(store: &mut S, id: &str) -> Result<ApiError, ApiError> {
    Ok(match store.info(id)? {
        None => ApiError::not_found(format!("no session {id:?} in the store")),
        Some(_) => ApiError::bad_request(
            "bad-request",
            format!(
                "session {id:?} is an event trace: compaction steps are taken by cache-stable compilation of message transcripts only"
            ),
        ),
    })
}

fn steps_of(
    id: &str,
    transcript: &ChatTranscript,
    options: &Options,
) -> Result<StepsView, ApiError> {
    let whole = transcript.compile(options)?;
    let steps = whole
        .chat
        .as_ref()
        .and_then(|c| c.compaction_steps.clone())
        .unwrap_or_default();
    let mut views = Vec::with_capacity(steps.len());
    for step in steps {
        let prefix = ChatTranscript {
            messages: transcript.messages[..step.at.min(transcript.messages.len())].to_vec(),
            ..transcript.clone()
        };
        let compiled = prefix.compile(options)?;
        views.push(StepView {
            step,
            tokens_before: compiled.tokens_before,
            tokens_after: compiled.tokens_after,
        });
    }
    Ok(StepsView {
        context_id: id.to_owned(),
        format: transcript.format.name(),
        tokenizer: whole.tokenizer,
        session: Point {
            messages: transcript.messages.len(),
            tokens_before: whole.tokens_before,
            tokens_after: whole.tokens_after,
        },
        steps: views,
    })
}
