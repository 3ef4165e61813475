//! Chat sessions behind `ctxgc session`: appending chat requests (OpenAI Chat Completions,
//! Anthropic Messages, OpenAI Responses; a document, a bare message list or one conversation
//! record) with their envelope, and compiling, reading back and printing the whole stored
//! transcript exactly as `ctxgc compile` would.

use ctxgc_core::Options;
use ctxgc_core::store::chat::{ChatAppend, ChatTranscript, append_chat};
use ctxgc_store::{AnyStore, Store};

use super::compile::print_compiled;
use super::receipt::print_receipt;
use super::session::store_failure;
use crate::Failure;

/// Appends one chat request's messages (`request` is its exact text) to `context_id`.
pub fn append(
    store: &mut AnyStore,
    context_id: &str,
    request: &str,
    options: &Options,
    expected_len: Option<u64>,
) -> Result<(), Failure> {
    let appended = append_chat(
        store,
        context_id,
        request,
        &ChatAppend {
            from: options.from,
            expected_len,
        },
    )
    .map_err(store_failure)?;
    let envelope = if appended.envelope_replaced {
        ", envelope stored"
    } else {
        ""
    };
    println!(
        "{context_id}: appended {} {} messages at sequence {}..{}{envelope}",
        appended.ids.len(),
        appended.format.name(),
        appended.range.start,
        appended.range.end
    );
    Ok(())
}

/// The chat transcript of `context_id`, if it is a chat session.
pub fn transcript(
    store: &mut AnyStore,
    context_id: &str,
) -> Result<Option<ChatTranscript>, Failure> {
    store.chat_transcript(context_id).map_err(store_failure)
}

/// Compiles a stored chat and prints it like `ctxgc compile` of the whole transcript.
pub fn compile(
    transcript: &ChatTranscript,
    options: &Options,
    json: bool,
    dry_run: bool,
) -> Result<(), Failure> {
    let compiled = transcript.compile(options)?;
    print_compiled(&compiled, json, dry_run)
}

/// Prints the original of a stored chat message and its decision (on stderr, or in JSON).
pub fn receipt(
    transcript: &ChatTranscript,
    options: &Options,
    id: &str,
    json: bool,
) -> Result<(), Failure> {
    let (raw, decision) = transcript.receipt(options, id)?;
    print_receipt(id, &raw, &decision, json)
}
